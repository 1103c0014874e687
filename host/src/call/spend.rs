//! What one call may spend upstream, counted in one place.
//!
//! A caller may ask for fewer retries or correction turns than the catalog
//! entry allows, never more: the operator pays for every upstream request, so a
//! header (or a library field) can only lower the entry's limits. Every
//! upstream attempt of the call — the first, each retry, each correction turn,
//! the truncation escalation, an empty answer's re-run, a stream's replay
//! without streaming — counts against one ceiling, the entry's `max_attempts`;
//! the retry budget is also per call, not per payload, so a correction does
//! not buy a fresh set of retries.
//!
//! The call's budget hold rides here too, for the same reason: every attempt
//! receives the spend, so the one place an attempt is about to be sent
//! ([`Spend::cover`]) sees every kind of re-run. The first hold covers the
//! first attempt; an attempt counted after it (by [`Spend::next_attempt`])
//! tops the hold up before it goes, or the call ends with the hold's
//! category.

use std::time::Instant;

use crate::budget::Hold;
use crate::catalog::ModelSpec;
use crate::chat::ChatRequest;
use crate::error::{Pending, WeirError};
use crate::record::AttemptReason;
use crate::types::Conversation;

use super::attempt_log::AttemptLog;
use super::hold;
use super::target::Reached;

/// Retries of upstream signals per call when neither the request nor the entry
/// says.
pub const DEFAULT_RETRIES: u32 = 3;
/// Correction turns per call when neither the request nor the entry says.
pub const DEFAULT_CORRECTIONS: u32 = 2;

/// The call's limits and what it has spent so far.
#[derive(Debug)]
pub(super) struct Spend<'h> {
    model: String,
    max_attempts: u32,
    max_retries: u32,
    max_corrections: u32,
    attempts: u32,
    retries: u32,
    /// Every attempt made, for the call's record.
    pub log: AttemptLog,
    /// The call's budget hold, when its caller has budgets.
    budget: Option<Covered<'h>>,
}

/// The call's budget hold (it stays the call's: a call dropped mid-attempt
/// settles it from its record) and how many attempts it covers.
#[derive(Debug)]
struct Covered<'h> {
    hold: &'h mut Hold,
    attempts: u32,
    /// The most web searches one attempt may run (see `call::web_search`).
    search_bound: u64,
    /// USD per thousand of the call's web searches.
    search_price: Option<f64>,
}

impl<'h> Spend<'h> {
    /// The entry's limits, lowered (never raised) by the request's.
    pub fn for_call(model: &ModelSpec, request: &ChatRequest, call_started: Instant) -> Self {
        Self::lowered_by(model, request.max_retries, request.max_corrections, call_started)
    }

    /// The entry's limits, lowered (never raised) by what the caller asked.
    pub fn lowered_by(
        model: &ModelSpec,
        asked_retries: Option<u32>,
        asked_corrections: Option<u32>,
        call_started: Instant,
    ) -> Self {
        let max_retries = lowered(asked_retries, model.max_retries.unwrap_or(DEFAULT_RETRIES));
        let max_corrections = lowered(asked_corrections, model.max_corrections.unwrap_or(DEFAULT_CORRECTIONS));
        if asked_retries.is_some_and(|asked| asked > max_retries)
            || asked_corrections.is_some_and(|asked| asked > max_corrections)
        {
            tracing::debug!(
                model = %model.id, max_retries, max_corrections,
                "the request asked for more retries or corrections than the entry allows; clamped"
            );
        }
        Self {
            model: model.id.clone(),
            max_attempts: model.max_attempts.max(1),
            max_retries,
            max_corrections,
            attempts: 0,
            retries: 0,
            log: AttemptLog::new(call_started),
            budget: None,
        }
    }

    /// The call's budget hold, which covers its first attempt; every later
    /// attempt tops it up before it is sent ([`Self::cover`]), with up to
    /// `search_bound` web searches of its own at `search_price`.
    pub fn holding(self, hold: Option<&'h mut Hold>, search_bound: u64, search_price: Option<f64>) -> Self {
        Self { budget: hold.map(|hold| Covered { hold, attempts: 1, search_bound, search_price }), ..self }
    }

    /// Called as an attempt is about to be sent with `conversation` and an
    /// output budget of `max_tokens`: an attempt the hold does not cover yet
    /// (one counted after the first) tops it up to what the call's attempts
    /// have reported spending plus this attempt's worst case, or fails with
    /// the category the hold gives (`budget_exhausted`,
    /// `call_budget_exceeded`), nothing sent. Nothing to do, and nothing
    /// estimated, for a caller without budgets or an attempt already covered.
    pub async fn cover(
        &mut self,
        target: &Reached<'_>,
        conversation: &Conversation,
        max_tokens: u32,
    ) -> Result<(), WeirError> {
        let Some(budget) = &mut self.budget else { return Ok(()) };
        if self.attempts <= budget.attempts {
            return Ok(());
        }
        budget.attempts = self.attempts;
        let spent = hold::Searched {
            tokens: self.log.usage(),
            web_searches: self.log.web_searches(),
            search_bound: budget.search_bound,
            search_price: budget.search_price,
        };
        hold::top_up(target, budget.hold, &spent, conversation, max_tokens).await
    }

    /// Upstream attempts made so far.
    pub fn attempts(&self) -> u32 {
        self.attempts
    }

    pub fn max_corrections(&self) -> u32 {
        self.max_corrections
    }

    /// Counts the call's first upstream attempt, which always fits: the
    /// ceiling is at least 1.
    pub fn first_attempt(&mut self) {
        self.attempts = self.attempts.max(1);
    }

    /// Counts one more upstream attempt, run for `reason`, or refuses it once
    /// the ceiling is reached; `pending` says what it was for.
    pub fn next_attempt(&mut self, reason: AttemptReason, pending: impl FnOnce() -> Pending) -> Result<(), WeirError> {
        if !self.has_room() {
            return Err(self.ceiling(pending()));
        }
        self.attempts += 1;
        self.log.next_is(reason);
        Ok(())
    }

    /// The failure of a call that needed another attempt past its ceiling.
    pub fn ceiling(&self, pending: Pending) -> WeirError {
        tracing::warn!(model = %self.model, attempts = self.attempts, ?pending, "the call's attempt ceiling is reached");
        WeirError::AttemptCeiling { model: self.model.clone(), attempts: self.attempts, pending }
    }

    /// Takes one retry from the call's budget; `false` once it is spent.
    pub fn take_retry(&mut self) -> bool {
        if self.retries >= self.max_retries {
            return false;
        }
        self.retries += 1;
        true
    }

    /// Retries taken so far (each doubles the next wait).
    pub fn retries(&self) -> u32 {
        self.retries
    }

    /// Whether another attempt would fit under the ceiling.
    pub fn has_room(&self) -> bool {
        self.attempts < self.max_attempts
    }
}

fn lowered(asked: Option<u32>, limit: u32) -> u32 {
    asked.map_or(limit, |asked| asked.min(limit))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::Conversation;

    fn request(retries: Option<u32>, corrections: Option<u32>) -> ChatRequest {
        let mut request = ChatRequest::new("m", Conversation::user("hi"));
        request.max_retries = retries;
        request.max_corrections = corrections;
        request
    }

    #[test]
    fn a_request_lowers_the_entrys_limits_and_never_raises_them() {
        let model = ModelSpec { max_retries: Some(2), max_corrections: None, ..ModelSpec::sample() };
        let spend = Spend::for_call(&model, &request(Some(1_000), Some(1_000)), Instant::now());
        assert_eq!((spend.max_retries, spend.max_corrections), (2, DEFAULT_CORRECTIONS));
        let spend = Spend::for_call(&model, &request(Some(0), Some(1)), Instant::now());
        assert_eq!((spend.max_retries, spend.max_corrections), (0, 1));
        let spend = Spend::for_call(&model, &request(None, None), Instant::now());
        assert_eq!((spend.max_retries, spend.max_corrections), (2, DEFAULT_CORRECTIONS));
    }

    #[test]
    fn the_ceiling_refuses_the_attempt_past_it_and_names_what_it_was_for() {
        let model = ModelSpec { max_attempts: 2, ..ModelSpec::sample() };
        let mut spend = Spend::for_call(&model, &request(None, None), Instant::now());
        spend.first_attempt();
        assert!(spend.has_room());
        assert!(spend.next_attempt(AttemptReason::Escalation, || Pending::Escalation).is_ok());
        assert!(!spend.has_room());
        let error = spend.next_attempt(AttemptReason::Escalation, || Pending::Escalation).unwrap_err();
        assert!(matches!(error, WeirError::AttemptCeiling { attempts: 2, pending: Pending::Escalation, .. }));
        assert_eq!(spend.attempts(), 2, "a refused attempt is not counted");
    }

    #[test]
    fn the_retry_budget_is_spent_once_per_call() {
        let model = ModelSpec { max_retries: Some(2), ..ModelSpec::sample() };
        let mut spend = Spend::for_call(&model, &request(None, None), Instant::now());
        assert!(spend.take_retry() && spend.take_retry());
        assert!(!spend.take_retry());
        assert_eq!(spend.retries(), 2);
    }
}
