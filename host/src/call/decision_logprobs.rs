//! The log-probability backend of a decision entry (`backend = "logprobs"`):
//! each question is one chat request to the entry's model through its provider
//! component's `logprobs` interface — the prompt and its single-token labels
//! rendered by the host ([`crate::decision::logprobs`]), one output token at
//! temperature 0, the first token's most likely candidates asked for — and the
//! label distribution read back and renormalized over the declared outcomes.
//!
//! Up to [`QUESTIONS_IN_FLIGHT`] questions are asked at once, each through
//! admission and the retry loop with its own retry budget, and their answers
//! kept in the request's order (as an embeddings call's batches are). The first
//! that fails fails the call with its category: no question starts after it,
//! the ones in flight finish, and every attempt made is on the record. What the
//! provider billed is recorded as it reported it: the prompt, and the one
//! output token each question generates.

use std::time::Instant;

use crate::Weir;
use crate::admission::{Demand, Feedback, Lane, estimate_input};
use crate::catalog::ModelSpec;
use crate::decision::logprobs::{self, Rendered, TOP_CANDIDATES};
use crate::decision::{DecideRequest, Decision, Question};
use crate::error::WeirError;
use crate::plugin::Session;
use crate::record::Tokens;
use crate::types::{CallParams, FirstToken};

use super::attempt_log::{Observed, bounded};
use super::decision::{Decided, failure, feed};
use super::opening::Opening;
use super::operation::{ESTIMATED, Sent, exchange_in, in_order, logged, sent};
use super::retry::Try;
use super::spend::Spend;
use super::target::Target;
use super::{Failure, Tally, attempt, hold};

/// The output each question asks for: its label, one token.
const LABEL_TOKENS: u32 = 1;

/// Questions of one call in flight at once: a many-question call takes about
/// one round trip per four questions, and never parks dozens in the queue.
const QUESTIONS_IN_FLIGHT: usize = 4;

pub(super) async fn decide(
    weir: &Weir,
    request: &DecideRequest,
    target: &Target<'_>,
    tally: &mut Tally,
    opening: &Opening,
) -> Result<Decided, WeirError> {
    let wire = &request.question;
    let rendered: Vec<Rendered> = wire
        .questions
        .iter()
        .map(|question| logprobs::render(&wire.state, question))
        .collect::<Result<_, _>>()
        .map_err(|error| WeirError::InvalidRequest(error.to_string()))?;
    let estimates: Vec<u64> = rendered.iter().map(|asked| within_window(target, asked)).collect::<Result<_, _>>()?;
    let outputs = LABEL_TOKENS.saturating_mul(u32::try_from(rendered.len()).unwrap_or(u32::MAX));
    let worst = crate::budget::worst_case(target.model, estimates.iter().sum(), outputs);
    tally.hold = hold::take_worst(weir, request.caller.as_ref(), target, worst, opening).await?;
    let params = params(target);
    // By index, not by borrowed items: the closure then takes an owned value,
    // which keeps the call's future `Send` for the gateway.
    let started = tally.started;
    let asks = (0..rendered.len()).map(|index| {
        let attempt = LabelTry {
            target,
            asked: &rendered[index],
            params: &params,
            deadline: request.deadline,
            estimate: estimates[index],
        };
        ask(attempt, &wire.questions[index], request.max_retries, started)
    });
    let asked = in_order(asks, QUESTIONS_IN_FLIGHT, tally).await?;
    let (answers, first_tokens): (Vec<_>, Vec<_>) = asked.into_iter().unzip();
    Ok(decided(answers, &first_tokens, &estimates, tally))
}

/// One question through the retry loop with its own retry budget, and its
/// distribution read from the answer; its attempts are timed from the call's
/// start (`started`).
async fn ask(
    attempt: LabelTry<'_, '_>,
    question: &Question,
    max_retries: Option<u32>,
    started: Instant,
) -> Sent<((Question, Vec<f64>), FirstToken)> {
    let target = attempt.target;
    let Sent { result, attempts, records } = sent(&attempt, target, max_retries, attempt.deadline, started).await;
    let result = result.and_then(|first| {
        let distribution = read(target, question, attempt.asked, &first)?;
        Ok(((question.clone(), distribution), first))
    });
    Sent { result, attempts, records }
}

/// One token at temperature 0 (none where the deployment takes only its own).
fn params(target: &Target<'_>) -> CallParams {
    let model = target.model;
    CallParams { temperature: temperature(model), ..CallParams::new(model.wire_id.clone(), LABEL_TOKENS) }
}

/// 0, unless the entry's sampling is fixed ([`super::policy::fixed_sampling`]:
/// `fixed_temperature`, or a reasoning family's wire id), where none is sent.
fn temperature(model: &ModelSpec) -> Option<f64> {
    (!super::policy::fixed_sampling(model)).then_some(0.0)
}

/// A question's prompt tokens, refused before anything is admitted or sent
/// when it and its label do not fit the model's context window (chat's rule).
fn within_window(target: &Target<'_>, asked: &Rendered) -> Result<u64, WeirError> {
    let input = estimate_input(target.model.tokenizer, &asked.conversation);
    attempt::fits_window(target, input, LABEL_TOKENS)?;
    Ok(input)
}

/// The question's distribution from its first token; an answer that names no
/// label is unusable (the candidates go to the log, not to the caller).
fn read(target: &Target<'_>, question: &Question, asked: &Rendered, first: &FirstToken) -> Result<Vec<f64>, WeirError> {
    logprobs::distribution(question, asked, &first.candidates).map_err(|error| {
        let listed: Vec<&str> = first.candidates.iter().take(5).map(|candidate| candidate.token.as_str()).collect();
        tracing::warn!(model = %target.model.id, question = question.id(), ?listed, %error, "no label read");
        WeirError::UnusableAnswer {
            model: target.model.id.clone(),
            reason: format!("question `{}`: {error}", question.id()),
        }
    })
}

/// The call's answer: what was billed summed over the questions, the host's
/// estimate standing in for a question whose usage was not reported.
fn decided(answers: Vec<(Question, Vec<f64>)>, firsts: &[FirstToken], estimates: &[u64], tally: &mut Tally) -> Decided {
    let estimated = firsts.iter().any(|first| first.usage.is_none());
    if estimated {
        tally.notes.push(ESTIMATED);
    }
    let input_tokens = firsts.iter().zip(estimates).map(|(first, estimate)| billed(first, *estimate).input).sum();
    let decision = Decision {
        answers,
        input_tokens: Some(input_tokens),
        served_model: firsts.iter().find_map(|first| first.served_model.clone()),
        request_id: firsts.iter().find_map(|first| first.request_id.clone()),
    };
    Decided { decision, input_tokens, estimated }
}

/// What one question was billed: the provider's usage, else the estimate and
/// the one label token.
fn billed(first: &FirstToken, estimate: u64) -> Tokens {
    match &first.usage {
        Some(usage) => Tokens::of(usage),
        None => Tokens { input: estimate, output: u64::from(LABEL_TOKENS), ..Tokens::default() },
    }
}

/// One question's attempt, as the retry loop re-runs it.
struct LabelTry<'a, 't> {
    target: &'a Target<'t>,
    asked: &'a Rendered,
    params: &'a CallParams,
    deadline: Option<tokio::time::Instant>,
    estimate: u64,
}

impl Try for LabelTry<'_, '_> {
    type Output = FirstToken;

    async fn run(&self, spend: &mut Spend<'_>) -> Result<FirstToken, Failure> {
        let attempt = async |observed: &mut Observed| self.attempt(observed).await;
        logged(spend, attempt, |first| billed(first, self.estimate).into()).await
    }
}

impl LabelTry<'_, '_> {
    async fn attempt(&self, observed: &mut Observed) -> Result<FirstToken, WeirError> {
        let target = self.target;
        let demand = Demand { requests: 1, tokens: self.estimate + u64::from(LABEL_TOKENS) };
        let mut session = target.provider.session();
        let (conversation, params, deadline) = (&self.asked.conversation, self.params, self.deadline);
        let encode = async |session: &mut Session<'_>| {
            session.logprobs_encode(conversation, params, TOP_CANDIDATES, deadline).await
        };
        let response = exchange_in(target, &mut session, demand, deadline, Lane::Interactive, observed, encode).await?;
        if !(200..300).contains(&response.status) {
            return Err(failure(target, &response, session.classify(&response).await).await);
        }
        let first = session
            .logprobs_decode(&response)
            .await
            .map_err(|source| super::classify::plugin_failure(target, source))?;
        feed(target, Feedback::Success).await;
        if observed.request_id.is_none() {
            observed.request_id = first.request_id.as_deref().map(bounded);
        }
        Ok(first)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The decision path sets a temperature by the same rule as a call: none
    /// for a reasoning family or a fixed entry, 0 elsewhere.
    #[test]
    fn the_decision_temperature_follows_the_calls_rule() {
        let entry = |wire_id: &str, fixed_temperature: bool| ModelSpec {
            wire_id: wire_id.into(),
            fixed_temperature,
            ..ModelSpec::sample()
        };
        assert_eq!(temperature(&entry("gpt-4.1-mini", false)), Some(0.0));
        assert_eq!(temperature(&entry("gpt-5-chat-latest", false)), Some(0.0));
        assert_eq!(temperature(&entry("o3", false)), None);
        assert_eq!(temperature(&entry("gpt-5-mini", false)), None);
        assert_eq!(temperature(&entry("llama3.1:8b", true)), None);
    }
}
