//! The call template: the one path every chat call takes, in a fixed order,
//! outermost first.
//!
//! ```text
//! stamp ─► gates ─► retry loop ─► attempt: admission ─► encode ─► transport ─► decode / classify
//! ```
//!
//! - **stamp** (here) is outermost so that every answer *and every failure* —
//!   a rejection before any attempt included — carries the catalog id, provider,
//!   ceiling, attempts, latency and end time, set in this one place.
//! - **gates** ([`gates`]) judge a decoded answer: a refusal is final (a safety
//!   classifier is not re-rolled); a truncation re-runs the whole call once at
//!   the model's ceiling, through the same output-budget formula; an empty
//!   answer and an answer that fails its schema re-run, bounded.
//! - **the retry loop** ([`retry`]) is the only one: it re-runs an attempt for
//!   upstream signals (429, overload, 5xx, resets, timeouts) with each signal's
//!   policy as data, and no HTTP client below it retries.
//! - **an attempt** ([`attempt`]) goes through admission afresh, so every retry
//!   reserves fresh capacity and gets a fresh timeout; its grant is marked sent
//!   only as the request leaves, so anything failing before rolls it back.

mod attempt;
mod classify;
mod gates;
mod retry;
mod schema;
mod target;

use std::time::{Instant, SystemTime};

use crate::Weir;
use crate::chat::{CallError, ChatRequest, ChatResponse, Stamp};
use crate::error::WeirError;

/// What the stages report for the stamp while the call runs.
#[derive(Debug, Default)]
pub(crate) struct Tally {
    pub provider: Option<String>,
    pub requested_max_tokens: Option<u32>,
    pub attempts: u32,
}

/// Runs one chat call end to end.
pub(crate) async fn chat(weir: &Weir, request: ChatRequest) -> Result<ChatResponse, CallError> {
    let started = Instant::now();
    let mut tally = Tally::default();
    let result = run(weir, &request, &mut tally).await;
    let stamp = Stamp {
        model: request.model,
        provider: tally.provider,
        requested_max_tokens: tally.requested_max_tokens,
        attempts: tally.attempts,
        latency: started.elapsed(),
        ended_at: SystemTime::now(),
    };
    match result {
        Ok(answer) => Ok(ChatResponse {
            content: answer.content,
            stop_reason: answer.stop_reason,
            raw_stop_reason: answer.raw_stop_reason,
            usage: answer.usage,
            refusal: answer.refusal,
            served_model: answer.served_model,
            request_id: answer.request_id,
            stamp,
        }),
        Err(error) => Err(CallError { error, stamp }),
    }
}

async fn run(
    weir: &Weir,
    request: &ChatRequest,
    tally: &mut Tally,
) -> Result<crate::types::DecodedResponse, WeirError> {
    let target = target::resolve(weir, &request.model)?;
    tally.provider = Some(target.provider.key().to_owned());
    gates::run(&target, request, tally).await
}
