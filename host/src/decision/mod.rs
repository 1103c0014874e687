//! Decisions: typed questions about a state, answered with a probability over
//! the outcomes the caller declared (`docs/src/providers/decision-wire.md`). Every decision
//! endpoint speaks one wire, so its vocabulary and its codec live here, in the
//! host, not in a component: a decision entry (`provider = "decision"`)
//! carries only its endpoint and credential.
//!
//! Here: the wire's types, the strict check of a request
//! ([`DecisionRequest::validate`]) and of an endpoint's answer against it
//! ([`check_answer`]: never repaired), the answer read back by the shape asked
//! ([`Decision`]), an endpoint's error status classified ([`classify`]), and
//! the log-probability backend's prompts and reading (`logprobs`).
//! The call itself goes through the same stages as every other (see
//! `call::decision`).

pub(crate) mod logprobs;
mod status;
mod wire;

pub use status::classify;
pub use wire::{
    AnsweredQuestion, Decision, DecisionAnswer, DecisionRequest, DecisionUsage, Distribution, Malformed, NoulAnswer,
    Question, SUM_TOLERANCE, State, check_answer,
};

use crate::caller::Caller;
use crate::chat::Stamp;
use crate::record::Route;

/// A decision call, as the library takes it: the wire's request (its
/// `model` a decision role or entry) and who asks.
#[derive(Debug, Clone)]
pub struct DecideRequest {
    pub question: DecisionRequest,
    /// When the caller stops waiting; absent: only the attempt timeout bounds it.
    pub deadline: Option<tokio::time::Instant>,
    /// Lowers the entry's retries of upstream signals, never raises them.
    pub max_retries: Option<u32>,
    pub caller: Option<Caller>,
    pub route: Route,
    pub traceparent: Option<String>,
}

impl DecideRequest {
    pub fn new(question: DecisionRequest) -> Self {
        Self { question, deadline: None, max_retries: None, caller: None, route: Route::Library, traceparent: None }
    }

    pub fn caller(mut self, caller: Caller) -> Self {
        self.caller = Some(caller);
        self
    }
}

/// A checked decision and what it cost.
#[derive(Debug, Clone)]
pub struct DecideResponse {
    pub decision: Decision,
    /// Billed input tokens (the ledger records the same number).
    pub input_tokens: u64,
    /// The endpoint reported no count, so the host's estimate of the request
    /// stands in (the record notes `input_tokens_estimated`).
    pub input_tokens_estimated: bool,
    pub stamp: Stamp,
}

#[cfg(test)]
mod tests;
