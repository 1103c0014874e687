//! The decision wire's JSON and its checks (see `docs/src/providers/decision-wire.md`).

use std::collections::{BTreeSet, HashMap};
use std::fmt;

use serde::de::{MapAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

/// How far a distribution's sum may be from 1.
pub const SUM_TOLERANCE: f64 = 1e-3;

const MAX_QUESTIONS: usize = 64;
const MAX_ID_CHARS: usize = 64;
const MIN_OPTIONS: usize = 2;
const MAX_OPTIONS: usize = 32;
const MAX_OPTION_CHARS: usize = 64;
/// A question's optional `text`, at most this long.
const MAX_TEXT_CHARS: usize = 1_000;
/// A `score` scale spans at most this many steps (101 outcomes).
const MAX_SCORE_SPAN: i64 = 100;

/// A decision request, as a caller sends it and as an endpoint receives it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DecisionRequest {
    pub model: String,
    pub state: State,
    pub questions: Vec<Question>,
}

/// What the questions are about: text, typed fields, or both.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct State {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fields: Option<serde_json::Map<String, Value>>,
}

/// One question and its shape.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "shape", rename_all = "lowercase", deny_unknown_fields)]
pub enum Question {
    /// One of the declared options.
    Choice {
        id: String,
        options: Vec<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        text: Option<String>,
    },
    /// A nullable boolean: `true`, `false`, or `null` (the state does not say).
    Noul {
        id: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        text: Option<String>,
    },
    /// An integer from `min` to `max`, both included.
    Score {
        id: String,
        min: i64,
        max: i64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        text: Option<String>,
    },
}

impl Question {
    pub fn id(&self) -> &str {
        match self {
            Self::Choice { id, .. } | Self::Noul { id, .. } | Self::Score { id, .. } => id,
        }
    }

    /// The question in words, when the caller wrote it.
    pub fn text(&self) -> Option<&str> {
        match self {
            Self::Choice { text, .. } | Self::Noul { text, .. } | Self::Score { text, .. } => text.as_deref(),
        }
    }

    /// The outcomes an answer must give a probability to, in order.
    pub fn outcomes(&self) -> Vec<String> {
        match self {
            Self::Choice { options, .. } => options.clone(),
            Self::Noul { .. } => ["true", "false", "null"].map(str::to_owned).to_vec(),
            Self::Score { min, max, .. } => (*min..=*max).map(|value| value.to_string()).collect(),
        }
    }

    fn validate(&self) -> Result<(), String> {
        let id = self.id();
        check_id(id)?;
        if self.text().is_some_and(|text| text.trim().is_empty() || text.chars().count() > MAX_TEXT_CHARS) {
            return Err(format!("question `{id}`: `text` is 1 to {MAX_TEXT_CHARS} characters, not blank"));
        }
        match self {
            Self::Choice { options, .. } => check_options(id, options),
            Self::Noul { .. } => Ok(()),
            Self::Score { min, max, .. } if min >= max => {
                Err(format!("question `{id}`: `min` ({min}) must be below `max` ({max})"))
            }
            Self::Score { min, max, .. } if max.checked_sub(*min).is_none_or(|span| span > MAX_SCORE_SPAN) => {
                Err(format!("question `{id}`: a score spans at most {MAX_SCORE_SPAN} steps ({min} to {max})"))
            }
            Self::Score { .. } => Ok(()),
        }
    }
}

fn check_id(id: &str) -> Result<(), String> {
    let allowed = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-';
    if id.is_empty() || id.chars().count() > MAX_ID_CHARS || !id.chars().all(allowed) {
        return Err(format!("question id `{id}`: 1 to {MAX_ID_CHARS} characters of letters, digits, `_` and `-`"));
    }
    Ok(())
}

fn check_options(id: &str, options: &[String]) -> Result<(), String> {
    if !(MIN_OPTIONS..=MAX_OPTIONS).contains(&options.len()) {
        return Err(format!(
            "question `{id}`: a choice has {MIN_OPTIONS} to {MAX_OPTIONS} options, not {}",
            options.len()
        ));
    }
    let mut seen = BTreeSet::new();
    for option in options {
        if option.trim().is_empty() || option.chars().count() > MAX_OPTION_CHARS {
            return Err(format!("question `{id}`: an option is 1 to {MAX_OPTION_CHARS} characters, not blank"));
        }
        if !seen.insert(option.as_str()) {
            return Err(format!("question `{id}`: option `{option}` is declared twice"));
        }
    }
    Ok(())
}

impl DecisionRequest {
    /// The request's own checks (the wire's rules): a refusal names the first
    /// rule broken, for the caller.
    pub fn validate(&self) -> Result<(), String> {
        if self.model.trim().is_empty() {
            return Err("`model` is empty".to_owned());
        }
        self.state.validate()?;
        if self.questions.is_empty() || self.questions.len() > MAX_QUESTIONS {
            return Err(format!("a request asks 1 to {MAX_QUESTIONS} questions, not {}", self.questions.len()));
        }
        let mut ids = BTreeSet::new();
        for question in &self.questions {
            question.validate()?;
            if !ids.insert(question.id()) {
                return Err(format!("question id `{}` is used twice", question.id()));
            }
        }
        Ok(())
    }
}

impl State {
    fn validate(&self) -> Result<(), String> {
        let text = self.text.as_deref().is_some_and(|text| !text.trim().is_empty());
        let fields = self.fields.as_ref().is_some_and(|fields| !fields.is_empty());
        if !text && !fields {
            return Err("`state` has neither `text` nor `fields`: there is nothing to decide about".to_owned());
        }
        for (name, value) in self.fields.iter().flatten() {
            if matches!(value, Value::Array(_) | Value::Object(_)) {
                return Err(format!("state field `{name}` is nested: a field is a string, number, boolean or null"));
            }
        }
        Ok(())
    }
}

/// An endpoint's answer, as it arrives (checked by [`check_answer`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DecisionAnswer {
    pub answers: Vec<AnsweredQuestion>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<DecisionUsage>,
    /// The served model, as the endpoint reports it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct DecisionUsage {
    pub input_tokens: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AnsweredQuestion {
    pub id: String,
    pub distribution: Distribution,
}

/// A distribution as the JSON object lists it: every entry, in order, a key
/// given twice kept twice (so the check can refuse it instead of a parser
/// silently keeping one).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Distribution(pub Vec<(String, f64)>);

impl Serialize for Distribution {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_map(self.0.iter().map(|(outcome, probability)| (outcome, probability)))
    }
}

impl<'de> Deserialize<'de> for Distribution {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Entries;
        impl<'de> Visitor<'de> for Entries {
            type Value = Distribution;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an object of outcome -> probability")
            }

            fn visit_map<M: MapAccess<'de>>(self, mut map: M) -> Result<Distribution, M::Error> {
                let mut entries = Vec::new();
                while let Some((outcome, probability)) = map.next_entry::<String, f64>()? {
                    entries.push((outcome, probability));
                }
                Ok(Distribution(entries))
            }
        }
        deserializer.deserialize_map(Entries)
    }
}

/// Why an endpoint's answer is not a valid one for the request: said to the
/// caller as `upstream_error` (never the endpoint's own text), never repaired.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Malformed {
    #[error("the answer is not the decision wire's JSON: {0}")]
    Body(String),
    #[error("question `{0}` has no answer")]
    Unanswered(String),
    #[error("question `{0}` is answered twice")]
    AnsweredTwice(String),
    #[error("an answer is given for `{0}`, which was not asked")]
    NotAsked(String),
    #[error("question `{id}`: outcome `{outcome}` has no probability")]
    MissingOutcome { id: String, outcome: String },
    #[error("question `{id}`: outcome `{outcome}` was not declared")]
    UndeclaredOutcome { id: String, outcome: String },
    #[error("question `{id}`: outcome `{outcome}` is given twice")]
    OutcomeTwice { id: String, outcome: String },
    #[error("question `{id}`: outcome `{outcome}` has probability {probability}, not a number from 0")]
    BadProbability { id: String, outcome: String, probability: f64 },
    #[error("question `{id}`: the probabilities sum to {sum}, not 1 (within {SUM_TOLERANCE})")]
    SumNotOne { id: String, sum: f64 },
}

impl Malformed {
    /// What was wrong, in the request's own terms only: an id or an outcome
    /// the endpoint made up is not repeated (the whole error is for the log).
    pub fn safe_reason(&self) -> String {
        match self {
            Self::Body(_) => "the answer is not the decision wire's JSON".to_owned(),
            Self::NotAsked(_) => "an answer is given for a question that was not asked".to_owned(),
            Self::UndeclaredOutcome { id, .. } => format!("question `{id}`: an outcome that was not declared"),
            // Every id and outcome below is one the request declared.
            Self::Unanswered(_)
            | Self::AnsweredTwice(_)
            | Self::MissingOutcome { .. }
            | Self::OutcomeTwice { .. }
            | Self::BadProbability { .. }
            | Self::SumNotOne { .. } => self.to_string(),
        }
    }
}

/// A checked answer, read back by the shape asked.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    /// Per question, in the request's order: the question and the
    /// probability of each outcome in [`Question::outcomes`] order.
    pub answers: Vec<(Question, Vec<f64>)>,
    pub input_tokens: Option<u64>,
    pub served_model: Option<String>,
    pub request_id: Option<String>,
}

/// A `noul` question's three probabilities.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NoulAnswer {
    pub r#true: f64,
    pub r#false: f64,
    /// The state does not say.
    pub null: f64,
}

impl Decision {
    /// The answers as the wire writes them: each question's distribution over
    /// its outcomes in declared order.
    pub fn answered(&self) -> Vec<AnsweredQuestion> {
        let answered = self.answers.iter().map(|(question, probabilities)| AnsweredQuestion {
            id: question.id().to_owned(),
            distribution: Distribution(question.outcomes().into_iter().zip(probabilities.iter().copied()).collect()),
        });
        answered.collect()
    }

    fn answer(&self, id: &str) -> Option<(&Question, &[f64])> {
        self.answers.iter().find(|(question, _)| question.id() == id).map(|(question, p)| (question, p.as_slice()))
    }

    /// A `choice` question's options and their probabilities.
    pub fn choice(&self, id: &str) -> Option<Vec<(&str, f64)>> {
        match self.answer(id)? {
            (Question::Choice { options, .. }, p) => {
                Some(options.iter().map(String::as_str).zip(p.iter().copied()).collect())
            }
            _ => None,
        }
    }

    pub fn noul(&self, id: &str) -> Option<NoulAnswer> {
        match self.answer(id)? {
            (Question::Noul { .. }, [r#true, r#false, null]) => {
                Some(NoulAnswer { r#true: *r#true, r#false: *r#false, null: *null })
            }
            _ => None,
        }
    }

    /// A `score` question's values and their probabilities, lowest first.
    pub fn score(&self, id: &str) -> Option<Vec<(i64, f64)>> {
        match self.answer(id)? {
            (Question::Score { min, max, .. }, p) => Some((*min..=*max).zip(p.iter().copied()).collect()),
            _ => None,
        }
    }
}

/// Parses an endpoint's body and checks it against `request` (see
/// `docs/src/providers/decision-wire.md`): exactly one answer per question, each over exactly
/// its outcomes, every probability finite and not negative, each sum 1 within
/// [`SUM_TOLERANCE`]. Nothing is repaired.
pub fn check_answer(request: &DecisionRequest, body: &[u8]) -> Result<Decision, Malformed> {
    let answer: DecisionAnswer = serde_json::from_slice(body).map_err(|error| Malformed::Body(error.to_string()))?;
    let asked: HashMap<&str, &Question> = request.questions.iter().map(|question| (question.id(), question)).collect();
    let mut given: HashMap<&str, &Distribution> = HashMap::new();
    for answered in &answer.answers {
        if !asked.contains_key(answered.id.as_str()) {
            return Err(Malformed::NotAsked(answered.id.clone()));
        }
        if given.insert(answered.id.as_str(), &answered.distribution).is_some() {
            return Err(Malformed::AnsweredTwice(answered.id.clone()));
        }
    }
    let mut answers = Vec::with_capacity(request.questions.len());
    for question in &request.questions {
        let id = question.id();
        let distribution = given.get(id).ok_or_else(|| Malformed::Unanswered(id.to_owned()))?;
        answers.push((question.clone(), probabilities(question, distribution)?));
    }
    Ok(Decision {
        answers,
        input_tokens: answer.usage.map(|usage| usage.input_tokens),
        served_model: answer.model,
        request_id: answer.request_id,
    })
}

/// `distribution`'s probabilities in the order of `question`'s outcomes.
fn probabilities(question: &Question, distribution: &Distribution) -> Result<Vec<f64>, Malformed> {
    let id = question.id().to_owned();
    let outcomes = question.outcomes();
    let mut by_outcome: HashMap<&str, f64> = HashMap::new();
    for (outcome, probability) in &distribution.0 {
        if !outcomes.contains(outcome) {
            return Err(Malformed::UndeclaredOutcome { id, outcome: outcome.clone() });
        }
        if !probability.is_finite() || *probability < 0.0 {
            return Err(Malformed::BadProbability { id, outcome: outcome.clone(), probability: *probability });
        }
        if by_outcome.insert(outcome, *probability).is_some() {
            return Err(Malformed::OutcomeTwice { id, outcome: outcome.clone() });
        }
    }
    let mut ordered = Vec::with_capacity(outcomes.len());
    for outcome in &outcomes {
        let probability = by_outcome
            .get(outcome.as_str())
            .ok_or_else(|| Malformed::MissingOutcome { id: id.clone(), outcome: outcome.clone() })?;
        ordered.push(*probability);
    }
    let sum: f64 = ordered.iter().sum();
    if (sum - 1.0).abs() > SUM_TOLERANCE {
        return Err(Malformed::SumNotOne { id, sum });
    }
    Ok(ordered)
}
