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
//! - **the spend** ([`spend`]) is counted once per call, across the gates and
//!   the retry loop: one retry budget, and one ceiling on upstream attempts of
//!   every kind, which a caller may lower and never raise.
//! - **an attempt** ([`attempt`]) goes through admission afresh, so every retry
//!   reserves fresh capacity and gets a fresh timeout; its grant is marked sent
//!   only as the request leaves, so anything failing before rolls it back. Its
//!   time upstream is bounded by the attempt timeout and the caller's deadline;
//!   either cancels the request (the socket is closed).
//! - **a streamed attempt** ([`streaming`]) is the same until its first output:
//!   everything before it is classified, retried and gated like a whole call;
//!   after it nothing is retried (the first-chunk rule).

mod attempt;
mod cache_plan;
mod classify;
mod gates;
mod prompted_tools;
mod retry;
mod schema;
mod spend;
mod streaming;
mod target;

use std::convert::Infallible;
use std::time::{Instant, SystemTime};

use crate::Weir;
use crate::chat::{CacheMultipliers, CallError, ChatRequest, ChatResponse, Stamp};
use crate::error::WeirError;
use crate::stream::ChatStream;
use crate::types::{CallParams, Conversation, DecodedResponse};

use spend::Spend;

pub(crate) use target::REGION_PLACEHOLDER;
use target::Target;

/// What an attempt produced: a whole answer, or a live stream whose first output
/// is in hand.
enum Outcome<L> {
    Complete(DecodedResponse),
    Live(L),
}

/// One way of making an upstream attempt; the retry loop and the gates are the
/// same for every way.
trait Attempt {
    /// What a live answer is; [`Infallible`] for attempts that never stream.
    type Live;

    /// One attempt, already counted in `spend`; an attempt that makes another
    /// upstream request of its own (a stream's replay) counts it there too.
    async fn run(
        &self,
        target: &Target<'_>,
        conversation: &Conversation,
        params: &CallParams,
        request: &ChatRequest,
        spend: &mut Spend,
    ) -> Result<Outcome<Self::Live>, WeirError>;
}

/// The whole-answer attempt.
struct Whole;

impl Attempt for Whole {
    type Live = Infallible;

    async fn run(
        &self,
        target: &Target<'_>,
        conversation: &Conversation,
        params: &CallParams,
        request: &ChatRequest,
        _spend: &mut Spend,
    ) -> Result<Outcome<Infallible>, WeirError> {
        attempt::run(target, conversation, params, request.deadline).await.map(Outcome::Complete)
    }
}

/// What the stages report for the stamp while the call runs.
#[derive(Debug, Default)]
pub(crate) struct Tally {
    pub provider: Option<String>,
    pub requested_max_tokens: Option<u32>,
    pub attempts: u32,
    pub cache_multipliers: Option<CacheMultipliers>,
}

/// Runs one chat call end to end.
pub(crate) async fn chat(weir: &Weir, mut request: ChatRequest) -> Result<ChatResponse, CallError> {
    let started = Instant::now();
    cache_plan::plan(&mut request.conversation);
    let mut tally = Tally::default();
    let result = run(weir, &request, &mut tally, &Whole).await;
    let stamp = stamp(request.model, tally, started);
    match result {
        Ok(Outcome::Complete(answer)) => {
            let answer = ChatResponse::stamped(answer, stamp);
            if let Some(billable_input) = answer.billable_input() {
                tracing::info!(model = %answer.stamp.model, billable_input, usage = ?answer.usage, "call billed");
            }
            Ok(answer)
        }
        Ok(Outcome::Live(never)) => match never {},
        Err(error) => Err(CallError { error, stamp }),
    }
}

/// Opens a streamed chat call: resolves once the first output is in hand (or the
/// call failed before any, after the same retries and gates as [`chat`]).
pub(crate) async fn chat_stream(weir: &Weir, mut request: ChatRequest) -> Result<ChatStream, CallError> {
    let started = Instant::now();
    cache_plan::plan(&mut request.conversation);
    let mut tally = Tally::default();
    let attempt = streaming::Streamed::new(request.stream_replay);
    let result = match request.response_schema {
        Some(_) => Err(WeirError::InvalidRequest(
            "a structured (JSON-schema) answer is validated whole and cannot be streamed; send it without `stream`"
                .to_owned(),
        )),
        // Tools read from a JSON answer cannot be streamed as they are written: the
        // answer is taken whole and replayed as a stream.
        None if prompted_tools_apply(weir, &request) => match run(weir, &request, &mut tally, &Whole).await {
            Ok(Outcome::Complete(answer)) => Ok(Outcome::Complete(answer)),
            Ok(Outcome::Live(never)) => match never {},
            Err(error) => Err(error),
        },
        None => run(weir, &request, &mut tally, &attempt).await,
    };
    let stamp = stamp(request.model, tally, started);
    match result {
        Ok(Outcome::Live(live)) => Ok(live.into_chat_stream(stamp)),
        Ok(Outcome::Complete(answer)) => Ok(streaming::replayed(answer, stamp)),
        Err(error) => Err(CallError { error, stamp }),
    }
}

fn stamp(model: String, tally: Tally, started: Instant) -> Stamp {
    Stamp {
        model,
        provider: tally.provider,
        requested_max_tokens: tally.requested_max_tokens,
        attempts: tally.attempts,
        latency: started.elapsed(),
        ended_at: SystemTime::now(),
        cache_multipliers: tally.cache_multipliers,
    }
}

async fn run<A: Attempt>(
    weir: &Weir,
    request: &ChatRequest,
    tally: &mut Tally,
    attempt: &A,
) -> Result<Outcome<A::Live>, WeirError> {
    let target = target::resolve(weir, &request.model, request.caller.as_ref()).await?;
    tally.provider = Some(target.provider.key().to_owned());
    tally.cache_multipliers =
        Some(CacheMultipliers { read: target.model.cache_read_multiplier, write: target.model.cache_write_multiplier });
    if !prompted_tools::applies(target.provider.info(), target.model.native_tools, &request.conversation) {
        return gates::run(attempt, &target, request, tally).await;
    }
    let mut prompted = request.clone();
    let tools = prompted_tools::describe(&mut prompted.conversation);
    match gates::run(attempt, &target, &prompted, tally).await? {
        Outcome::Complete(mut answer) => {
            tools.read(&mut answer);
            Ok(Outcome::Complete(answer))
        }
        live => Ok(live),
    }
}

/// Whether this request's model reads its tools from the prompt (see
/// [`prompted_tools`]); an unknown model or provider fails later, in `run`.
fn prompted_tools_apply(weir: &Weir, request: &ChatRequest) -> bool {
    let Some(model) = weir.catalog().get(&request.model) else { return false };
    let registry = weir.registry();
    let Some(provider) = registry.get(&model.provider) else { return false };
    prompted_tools::applies(provider.info(), model.native_tools, &request.conversation)
}
