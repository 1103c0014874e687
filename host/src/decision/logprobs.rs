//! The log-probability backend's own part: a question rendered as a prompt
//! whose answers are single-token labels, and the label distribution read
//! back from the first output token's most likely candidates
//! (`docs/src/providers/decision-wire.md`, "Decisions from log-probabilities").
//!
//! Labels are capital letters, one token in every byte-pair vocabulary in
//! use: a `choice`'s options are `A`, `B`, ... in their declared order; a
//! `noul` is `A` (true), `B` (false), `C` (the state does not say); a `score`
//! is binned into at most [`MAX_SCORE_BINS`] runs of consecutive integers,
//! labelled `A`, `B`, ..., each bin's probability spread evenly over its
//! integers (the model was asked for the bin, so nothing finer is claimed).

use serde_json::Value;

use super::{Question, State};
use crate::types::{PreparedConversation, TokenCandidate};

/// The most options a `choice` may have on this backend: one per letter.
pub const MAX_LABELS: usize = 26;
/// A `score` scale of more integers than this is asked for in bins.
pub const MAX_SCORE_BINS: usize = 10;
/// How many candidates of the first token the backend asks for.
pub const TOP_CANDIDATES: u8 = 20;

const SYSTEM: &str = "You answer one question about a state. Reply with the letter of your answer and nothing \
                      else: exactly one capital letter from the list given.";

/// A question as this backend asks it: the prompt and what each label stands for.
#[derive(Debug, Clone, PartialEq)]
pub struct Rendered {
    pub conversation: PreparedConversation,
    /// Per label, in label order, the outcomes it stands for (indices into
    /// [`Question::outcomes`]): one each, except a score's bins.
    pub labels: Vec<(String, Vec<usize>)>,
}

/// Why a question cannot be asked on this backend, or its answer read.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LogprobsError {
    #[error("question `{id}`: a choice of {options} options cannot be labelled with {MAX_LABELS} letters")]
    TooManyOptions { id: String, options: usize },
    /// The model answered something else (its tokens go to the log only).
    #[error("the model's first token is none of the labels")]
    NoLabel,
    #[error("the answer has no output token")]
    NoToken,
}

/// The prompt for `question` about `state`.
pub fn render(state: &State, question: &Question) -> Result<Rendered, LogprobsError> {
    let outcomes = question.outcomes();
    let groups: Vec<Vec<usize>> = match question {
        Question::Choice { id, options, .. } if options.len() > MAX_LABELS => {
            return Err(LogprobsError::TooManyOptions { id: id.clone(), options: options.len() });
        }
        Question::Score { .. } => bins(outcomes.len()),
        Question::Choice { .. } | Question::Noul { .. } => (0..outcomes.len()).map(|index| vec![index]).collect(),
    };
    let labels: Vec<(String, Vec<usize>)> =
        groups.into_iter().zip('A'..='Z').map(|(g, l)| (l.to_string(), g)).collect();
    let mut prompt = describe_state(state);
    prompt.push_str(&format!("\nQuestion: {}\n", asked(question)));
    for (label, group) in &labels {
        prompt.push_str(&format!("{label}: {}\n", meaning(question, &outcomes, group)));
    }
    prompt.push_str("\nAnswer with one letter.");
    Ok(Rendered { conversation: PreparedConversation::user(prompt).with_system(SYSTEM), labels })
}

/// `count` consecutive outcomes in at most [`MAX_SCORE_BINS`] runs, as even as
/// they divide (the first runs one longer).
fn bins(count: usize) -> Vec<Vec<usize>> {
    let runs = count.clamp(1, MAX_SCORE_BINS);
    let (size, longer) = (count / runs, count % runs);
    let mut next = 0;
    (0..runs)
        .map(|run| {
            let length = size + usize::from(run < longer);
            let group = (next..next + length).collect();
            next += length;
            group
        })
        .collect()
}

fn describe_state(state: &State) -> String {
    let mut text = String::from("State:\n");
    if let Some(body) = state.text.as_deref().filter(|body| !body.trim().is_empty()) {
        text.push_str(body.trim());
        text.push('\n');
    }
    for (name, value) in state.fields.iter().flatten() {
        let shown = match value {
            Value::String(word) => word.clone(),
            other => other.to_string(),
        };
        text.push_str(&format!("- {name}: {shown}\n"));
    }
    text
}

/// The question in words: the caller's, else its id read as words.
fn asked(question: &Question) -> String {
    let words = question.text().map_or_else(|| question.id().replace(['_', '-'], " "), str::to_owned);
    match question {
        Question::Noul { .. } => format!("{words}? (A: yes, B: no, C: the state does not say)"),
        Question::Choice { .. } | Question::Score { .. } => words,
    }
}

fn meaning(question: &Question, outcomes: &[String], group: &[usize]) -> String {
    match question {
        Question::Noul { .. } => ["yes", "no", "the state does not say"][group[0].min(2)].to_owned(),
        Question::Score { .. } if group.len() > 1 => {
            format!("{} to {}", outcomes[group[0]], outcomes[group[group.len() - 1]])
        }
        Question::Choice { .. } | Question::Score { .. } => outcomes[group[0]].clone(),
    }
}

/// The probability of each of `question`'s outcomes (in [`Question::outcomes`]
/// order), read from the first token's `candidates`:
///
/// - a label's probability is the sum of its candidates' (a token that is the
///   label once trimmed: `"A"` and `" A"` alike);
/// - a label missing from the list is given the share it can honestly have:
///   the mass the list leaves unlisted, divided evenly among the missing
///   labels, but never more than the least likely listed candidate (had it
///   been more likely, it would have been listed);
/// - the labels' probabilities are then renormalized to sum to 1, and a bin's
///   spread evenly over its integers.
///
/// No label among the candidates at all is a failure, not a guess.
pub fn distribution(
    question: &Question,
    rendered: &Rendered,
    candidates: &[TokenCandidate],
) -> Result<Vec<f64>, LogprobsError> {
    if candidates.is_empty() {
        return Err(LogprobsError::NoToken);
    }
    let probability = |candidate: &TokenCandidate| candidate.logprob.min(0.0).exp();
    let listed: Vec<Option<f64>> = rendered
        .labels
        .iter()
        .map(|(label, _)| {
            let matching = candidates.iter().filter(|candidate| candidate.token.trim() == label);
            matching.map(probability).reduce(|a, b| a + b)
        })
        .collect();
    if listed.iter().all(Option::is_none) {
        return Err(LogprobsError::NoLabel);
    }
    let total: f64 = candidates.iter().map(probability).sum();
    let unlisted = (1.0 - total).max(0.0);
    let least = candidates.iter().map(probability).fold(f64::INFINITY, f64::min);
    let missing = listed.iter().filter(|p| p.is_none()).count();
    let share = if missing == 0 { 0.0 } else { (unlisted / missing as f64).min(least) };
    let by_label: Vec<f64> = listed.iter().map(|p| p.unwrap_or(share)).collect();
    let sum: f64 = by_label.iter().sum();
    let mut outcomes = vec![0.0; question.outcomes().len()];
    for ((_, group), p) in rendered.labels.iter().zip(&by_label) {
        for index in group {
            outcomes[*index] = p / sum / group.len() as f64;
        }
    }
    Ok(outcomes)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use serde_json::json;

    use super::*;

    fn question(value: Value) -> Question {
        serde_json::from_value(value).unwrap()
    }

    fn state() -> State {
        serde_json::from_value(json!({"text": "Card charged twice.", "fields": {"plan": "pro", "months": 14}})).unwrap()
    }

    fn candidate(token: &str, p: f64) -> TokenCandidate {
        TokenCandidate { token: token.to_owned(), logprob: p.ln() }
    }

    fn prompt(rendered: &Rendered) -> String {
        match &rendered.conversation.turns[0].content[0] {
            crate::types::ContentBlock::Text(text) => text.clone(),
            _ => String::new(),
        }
    }

    #[test]
    fn a_choice_is_asked_with_one_letter_per_option_and_the_state() {
        let q = question(json!({"id": "intent", "shape": "choice", "options": ["billing", "bug"]}));
        let rendered = render(&state(), &q).unwrap();
        let text = prompt(&rendered);
        assert!(text.contains("Card charged twice.") && text.contains("- plan: pro") && text.contains("- months: 14"));
        assert!(text.contains("Question: intent\nA: billing\nB: bug\n"), "{text}");
        assert_eq!(rendered.labels, [("A".to_owned(), vec![0]), ("B".to_owned(), vec![1])]);
        let worded = question(json!({"id": "q", "shape": "noul", "text": "Is a refund owed"}));
        let text = prompt(&render(&state(), &worded).unwrap());
        assert!(text.contains("Question: Is a refund owed? (A: yes, B: no, C: the state does not say)"), "{text}");
        let many: Vec<String> = (0..27).map(|i| format!("o{i}")).collect();
        let too_many = question(json!({"id": "big", "shape": "choice", "options": many}));
        assert!(matches!(render(&state(), &too_many), Err(LogprobsError::TooManyOptions { options: 27, .. })));
    }

    #[test]
    fn the_listed_labels_are_renormalized_over_the_declared_options() {
        let q = question(json!({"id": "intent", "shape": "choice", "options": ["billing", "bug", "other"]}));
        let rendered = render(&state(), &q).unwrap();
        let top = [
            candidate("A", 0.6),
            candidate(" A", 0.1),
            candidate("B", 0.2),
            candidate("C", 0.05),
            candidate("The", 0.05),
        ];
        let p = distribution(&q, &rendered, &top).unwrap();
        let sum = 0.95;
        for (got, want) in p.iter().zip([0.7 / sum, 0.2 / sum, 0.05 / sum]) {
            assert!((got - want).abs() < 1e-9, "{p:?}");
        }
    }

    #[test]
    fn a_missing_label_gets_the_unlisted_mass_never_more_than_the_least_listed() {
        let q = question(json!({"id": "q", "shape": "noul"}));
        let rendered = render(&state(), &q).unwrap();
        // 0.9 listed, 0.1 unlisted, the least listed 0.02: C gets 0.02, not 0.1.
        let top = [candidate("A", 0.8), candidate("B", 0.08), candidate("x", 0.02)];
        let p = distribution(&q, &rendered, &top).unwrap();
        let sum = 0.8 + 0.08 + 0.02;
        assert!((p[2] - 0.02 / sum).abs() < 1e-9, "{p:?}");
        assert!((p.iter().sum::<f64>() - 1.0).abs() < 1e-9);
        // Two missing share what is unlisted: 0.04 each, under the least listed 0.3.
        let top = [candidate("A", 0.62), candidate("x", 0.3)];
        let p = distribution(&q, &rendered, &top).unwrap();
        let sum = 0.62 + 0.04 + 0.04;
        assert!((p[1] - 0.04 / sum).abs() < 1e-9 && (p[2] - 0.04 / sum).abs() < 1e-9, "{p:?}");
    }

    #[test]
    fn no_label_among_the_candidates_is_refused_not_guessed() {
        let q = question(json!({"id": "q", "shape": "noul"}));
        let rendered = render(&state(), &q).unwrap();
        let error = distribution(&q, &rendered, &[candidate("Yes", 0.9)]).unwrap_err();
        assert_eq!(error, LogprobsError::NoLabel);
        assert_eq!(distribution(&q, &rendered, &[]).unwrap_err(), LogprobsError::NoToken);
    }

    #[test]
    fn a_long_score_is_asked_in_bins_and_each_bin_spread_over_its_integers() {
        let q = question(json!({"id": "u", "shape": "score", "min": 1, "max": 5}));
        let rendered = render(&state(), &q).unwrap();
        assert_eq!(rendered.labels.len(), 5, "a short scale: one letter per integer");
        let long = question(json!({"id": "u", "shape": "score", "min": 0, "max": 100}));
        let rendered = render(&state(), &long).unwrap();
        assert_eq!(rendered.labels.len(), MAX_SCORE_BINS);
        assert_eq!(rendered.labels[0].1.len(), 11, "101 integers in 10 bins: the first is one longer");
        assert!(prompt(&rendered).contains("A: 0 to 10\nB: 11 to 20\n"), "{}", prompt(&rendered));
        let p = distribution(&long, &rendered, &[candidate("A", 1.0)]).unwrap();
        assert_eq!(p.len(), 101);
        assert!((p[0] - 1.0 / 11.0).abs() < 1e-9 && p[11] == 0.0, "{:?}", &p[..12]);
        assert_eq!(bins(101).iter().map(Vec::len).sum::<usize>(), 101);
    }
}
