//! The call template: the one path every chat call takes, in a fixed order,
//! outermost first.
//!
//! ```text
//! stamp ─► target ─► policy ─► gates ─► retry loop ─► attempt: admission ─► encode ─► transport ─► decode / classify
//! ```
//!
//! - **stamp** (here) is outermost so that every answer *and every failure* —
//!   a rejection before any attempt included — carries the catalog id, provider,
//!   ceiling, attempts, latency and end time, set in this one place.
//! - **policy** ([`policy`]), right after the target resolved: a request
//!   needing what the entry does not have is refused before admission, with
//!   nothing sent; sampling a deployment refuses is withheld; a stream the entry
//!   cannot give is taken whole and replayed.
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

mod answer_cache;
mod attempt;
mod attempt_log;
mod cache_plan;
mod classify;
mod count;
mod decision;
mod decision_logprobs;
mod effort;
mod fallback;
mod gates;
mod hold;
mod native;
mod opening;
mod operation;
mod policy;
mod prompted_schema;
mod prompted_tools;
mod retrieval;
mod retry;
mod schema;
mod spend;
mod streaming;
mod target;
mod web_search;

use std::convert::Infallible;
use std::sync::Arc;
use std::time::{Instant, SystemTime};

use crate::Weir;
use crate::chat::{ChatRequest, ChatResponse, Stamp};
use crate::error::CallError;
use crate::error::WeirError;
use crate::record::CacheMultipliers;
use crate::record::{self, AttemptRecord, CallLog, CallRecord, Ending, Observers, Opened, Operation, Resolved};
use crate::stream::ChatStream;
use crate::types::{CallParams, Conversation, DecodedResponse};

use opening::Opening;
use spend::Spend;

pub(crate) use count::count_input;
pub use count::{CountedBy, InputCount};
pub(crate) use decision::decide;
pub(crate) use retrieval::{embed, rerank};
pub(crate) use target::REGION_PLACEHOLDER;
use target::{Naming, Target};

/// What an attempt produced: a whole answer, or a live stream whose first output
/// is in hand.
enum Outcome<L> {
    Complete(DecodedResponse),
    Live(L),
}

/// Why an attempt failed, and whether the retry loop may look at it at all.
#[derive(Debug)]
enum Failure {
    /// The retry loop decides, from the signal's policy.
    Signal(WeirError),
    /// Answered from this attempt: the rules for an in-band stream error settled
    /// it (a rejection a second attempt would meet again, or a call whose caller
    /// opted out of the replay), so nothing re-runs it.
    Settled(WeirError),
}

impl From<WeirError> for Failure {
    fn from(error: WeirError) -> Self {
        Self::Signal(error)
    }
}

/// One way of making an upstream attempt; the retry loop and the gates are the
/// same for every way.
trait Attempt {
    /// What a live answer is; [`Infallible`] for attempts that never stream.
    type Live;

    /// Whether the attempt asks the upstream for a stream.
    const STREAMS: bool;

    /// One attempt, already counted in `spend`, and logged there; an attempt
    /// that makes another upstream request of its own (a stream's replay)
    /// counts and logs it too.
    async fn run(
        &self,
        target: &Target<'_>,
        conversation: &Conversation,
        params: &CallParams,
        request: &ChatRequest,
        spend: &mut Spend<'_>,
    ) -> Result<Outcome<Self::Live>, Failure>;
}

/// The whole-answer attempt.
struct Whole;

impl Attempt for Whole {
    type Live = Infallible;
    const STREAMS: bool = false;

    async fn run(
        &self,
        target: &Target<'_>,
        conversation: &Conversation,
        params: &CallParams,
        request: &ChatRequest,
        spend: &mut Spend<'_>,
    ) -> Result<Outcome<Infallible>, Failure> {
        let answer = attempt::logged(target, conversation, params, request.deadline, spend).await?;
        Ok(Outcome::Complete(answer))
    }
}

/// What the stages report for the stamp and the record while the call runs.
#[derive(Debug)]
pub(crate) struct Tally {
    pub started: Instant,
    pub requested_max_tokens: Option<u32>,
    pub attempts: u32,
    /// Where the call went, once the model resolved.
    pub resolved: Option<Resolved>,
    /// Every upstream attempt, for the record.
    pub attempt_records: Vec<AttemptRecord>,
    /// What the policy changed or withheld, by stable name, for the record:
    /// `effort_not_applied` (see [`gates`]) and [`policy::PolicyNotes::names`]
    /// (`temperature_omitted`, `top_p_omitted`, `stream_replayed_whole`). Empty,
    /// and unallocated, for most calls.
    pub notes: Vec<&'static str>,
    /// The call's hold on its caller's budgets, settled from its record.
    pub hold: Option<crate::budget::Hold>,
    /// The caller's native fields and betas the serving provider was not handed.
    pub native_dropped: crate::chat::NativeDropped,
    /// What the answer cache did, for the stamp (`None`: the entry does not cache).
    pub cache_mark: Option<crate::answer_cache::CacheMark>,
    /// A hit: the call whose answer it is.
    pub cached_from: Option<String>,
    /// A miss the call may store its answer under (see [`answer_cache`]).
    pub to_store: Option<answer_cache::ToStore>,
    /// The answering attempt's own blocks (see [`crate::chat::NativeBlocks`]).
    pub native_answer: Option<std::sync::Arc<crate::chat::NativeBlocks>>,
    /// The most web searches an attempt may run (see [`web_search`]): what a
    /// live stream that did not show its count to its end is charged.
    pub search_bound: u64,
    /// The dialect of a live stream's own pieces (`native.native-stream`).
    pub stream_dialect: Option<String>,
}

impl Tally {
    fn new(started: Instant) -> Self {
        Self {
            started,
            requested_max_tokens: None,
            attempts: 0,
            resolved: None,
            attempt_records: Vec::new(),
            notes: Vec::new(),
            hold: None,
            native_dropped: crate::chat::NativeDropped::default(),
            cache_mark: None,
            cached_from: None,
            to_store: None,
            native_answer: None,
            search_bound: 0,
            stream_dialect: None,
        }
    }
}

/// Runs one chat call end to end. Its record is opened before anything is
/// spent and committed before the answer (or the failure) is returned.
pub(crate) async fn chat(weir: &Weir, mut request: ChatRequest) -> Result<ChatResponse, CallError> {
    let mut call = open(weir, &request, false);
    let result = match run(weir, &mut request, &mut call.tally, &Whole, &call.opening, None).await {
        Err(error) => {
            Box::pin(fallback::after(weir, &mut request, &mut call.tally, &Whole, &call.opening, error)).await
        }
        served => served,
    };
    call.log.add_route_notes(call.tally.native_dropped.notes());
    call.log.add_route_notes(native::own_usage_notes(call.tally.native_answer.as_deref()));
    let stamp = stamp(&call.log, &request.model, &call.tally);
    let result = match result {
        Ok(Outcome::Complete(answer)) => Ok(answer),
        Ok(Outcome::Live(never)) => match never {},
        Err(error) => Err(error),
    };
    store_whole(weir, &result, &mut call).await;
    let ending = ending(&result, &call.log, &call.tally);
    let closed = call.close(ending).await;
    match (result, closed) {
        (Ok(answer), Ok(())) => Ok(ChatResponse::stamped(answer, stamp)),
        (Ok(_), Err(error)) | (Err(error), _) => Err(CallError { error, stamp }),
    }
}

/// Opens a streamed chat call: resolves once the first output is in hand (or the
/// call failed before any, after the same retries and gates as [`chat`]). A
/// live stream's record is committed before its end reaches the caller.
pub(crate) async fn chat_stream(weir: &Weir, mut request: ChatRequest) -> Result<ChatStream, CallError> {
    let mut call = open(weir, &request, true);
    let attempt = streaming::Streamed::new(request.stream_replay);
    let result = match request.response_schema {
        Some(_) => Err(WeirError::InvalidRequest(
            "a structured (JSON-schema) answer is validated whole and cannot be streamed; send it without `stream`"
                .to_owned(),
        )),
        // A stream the entry cannot give as it is written is answered whole by
        // `run` (see `policy`) and replayed below.
        None => match run(weir, &mut request, &mut call.tally, &attempt, &call.opening, None).await {
            Err(error) => {
                Box::pin(fallback::after(weir, &mut request, &mut call.tally, &attempt, &call.opening, error)).await
            }
            served => served,
        },
    };
    call.log.add_route_notes(call.tally.native_dropped.notes());
    call.log.add_route_notes(native::own_usage_notes(call.tally.native_answer.as_deref()));
    let stamp = stamp(&call.log, &request.model, &call.tally);
    let result = match result {
        Ok(Outcome::Live(live)) => {
            let log = call.hand_over();
            let tally = &mut call.tally;
            let record = streaming::StreamRecord {
                observers: weir.observers().clone(),
                resolved: tally.resolved.take().map(|mut resolved| {
                    served_by(weir, &mut resolved, &tally.attempt_records);
                    resolved
                }),
                attempts: std::mem::take(&mut tally.attempt_records),
                max_tokens: tally.requested_max_tokens,
                first_output: stamp.latency,
                notes: std::mem::take(&mut tally.notes),
                hold: tally.hold.take(),
                store: answer_cache::pending(tally).map(|to_store| (weir.clone(), to_store)),
                search_bound: tally.search_bound,
                dialect: tally.stream_dialect.take(),
                log,
            };
            return Ok(live.into_chat_stream(stamp, record));
        }
        Ok(Outcome::Complete(answer)) => Ok(answer),
        Err(error) => Err(error),
    };
    store_whole(weir, &result, &mut call).await;
    let ending = ending(&result, &call.log, &call.tally);
    let closed = call.close(ending).await;
    match (result, closed) {
        (Ok(answer), Ok(())) => Ok(streaming::replayed(answer, stamp)),
        (Ok(_), Err(error)) | (Err(error), _) => Err(CallError { error, stamp }),
    }
}

/// Stores a whole answer the call may store (see [`answer_cache`]), before its
/// record closes: a hit served right after this call finds it.
async fn store_whole(weir: &Weir, result: &Result<DecodedResponse, WeirError>, call: &mut Running<'_>) {
    let Ok(answer) = result else { return };
    if let Some(to_store) = answer_cache::pending(&mut call.tally) {
        answer_cache::store(weir, to_store, answer, call.log.call_id()).await;
    }
}

/// What `name` resolves to now for `caller`: the call's own resolution, with
/// an opening that sends and records nothing.
pub(crate) async fn preview(weir: &Weir, name: &str, caller: Option<crate::Caller>) -> Result<String, WeirError> {
    // Whatever kind the name is: a preview resolves it as a call of that kind would.
    let kind = match weir.roles().get(name) {
        Some(role) => role.kind,
        None => weir.catalog().get(name).map_or(crate::catalog::RoleKind::Chat, |model| model.kind),
    };
    let naming = Naming { model: name, caller: caller.as_ref(), route: record::Route::Library, kind };
    let opening = Opening::none();
    let resolution = target::resolve_any(weir, &naming, &opening).await?;
    Ok(resolution.reached().model.id.clone())
}

/// Records a request refused before it became a call (its caller key was not
/// accepted): opened and closed at once with `category`, nothing spent.
/// Returns the record's call id.
pub(crate) async fn refused(
    weir: &Weir,
    route: record::Route,
    category: crate::Category,
    traceparent: Option<String>,
) -> String {
    let mut call = Running::new(weir, CallLog::refused(route, traceparent));
    let call_id = call.log.call_id().to_owned();
    let opened = call.opening.settled().await;
    let ending = Ending { category: category.as_str().to_owned(), ..Ending::default() };
    if let Err(error) = opened.and(call.close(ending).await) {
        tracing::warn!(%error, call_id, "a refused caller's request was not recorded");
    }
    call_id
}

/// Opens the call's record: every observer is told now; the acknowledgement
/// is awaited as the first request is about to leave (see [`opening`]), so a
/// ledger that cannot hold the record refuses the call before anything is sent.
fn open<'w>(weir: &'w Weir, request: &ChatRequest, stream: bool) -> Running<'w> {
    let what = Opened {
        caller: request.caller.as_ref(),
        route: request.route,
        operation: Operation::Chat,
        model: &request.model,
        stream,
        traceparent: request.traceparent.clone(),
    };
    let content = weir.records_content().then(|| crate::record::content::request(&request.conversation));
    Running::new(weir, CallLog::open_chat(what, content, request.route_notes.clone(), request.client.clone()))
}

/// A call's record while the call runs: its log, its opening and the tally of
/// what it did. The call closes the record with [`Self::close`] (or hands it
/// to its live stream). If the call's future is dropped first — its caller
/// went away and the server dropped the handler, or an embedding service
/// dropped the future — the record is closed here as `client_left`, so no
/// opened call stays unclosed in the ledger, the metrics or the spans. What
/// the dropped attempts reported is gone with them: when a request had left,
/// the record notes `usage_unknown_caller_left` and the budget hold is settled
/// at its worst case, never as zero.
pub(crate) struct Running<'w> {
    weir: &'w Weir,
    log: CallLog,
    opening: Opening,
    pub(super) tally: Tally,
    closed: bool,
}

impl<'w> Running<'w> {
    /// Tells every observer the call opened (see [`open`]).
    pub(super) fn new(weir: &'w Weir, log: CallLog) -> Self {
        let opening = Opening::new(weir.observers().open(log.opening()), log.opening());
        let tally = Tally::new(log.started());
        Self { weir, log, opening, tally, closed: false }
    }

    /// Closes the record and hands it to every observer, waiting for them (the
    /// ledger: until it is committed).
    pub(super) async fn close(&mut self, ending: Ending) -> Result<(), WeirError> {
        let record = self.record(ending);
        settle(self.tally.hold.take(), &record, true);
        commit(self.weir.observers(), record).await
    }

    /// The log, for a live stream that closes the record itself.
    fn hand_over(&mut self) -> CallLog {
        self.closed = true;
        self.log.detach()
    }

    fn record(&mut self, ending: Ending) -> CallRecord {
        self.closed = true;
        let attempts = std::mem::take(&mut self.tally.attempt_records);
        if let Some(resolved) = &mut self.tally.resolved {
            served_by(self.weir, resolved, &attempts);
        }
        self.log.close(self.tally.resolved.as_ref(), attempts, ending)
    }
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        if self.closed {
            return;
        }
        let sent = self.opening.sent();
        tracing::info!(
            call_id = self.log.call_id(),
            sent,
            "the caller left before its call ended: recorded as client_left"
        );
        let mut notes = std::mem::take(&mut self.tally.notes);
        if sent {
            notes.push("usage_unknown_caller_left");
        }
        let hold = self.tally.hold.take();
        let charged_worst_case = sent && hold.is_some();
        let record =
            self.record(Ending { category: "client_left".to_owned(), notes, charged_worst_case, ..Ending::default() });
        settle(hold, &record, !sent);
        // Handed over now (the ledger queues its row); nobody is left to wait
        // for the acknowledgement.
        drop(self.weir.observers().closed(&Arc::new(record)));
    }
}

/// Replaces a budget hold with what the record says the call spent (every
/// attempt), before the record is committed; with its worst case when the
/// record cannot say (`usage_known` false: a request left and what it spent
/// was never reported), never with zero.
fn settle(hold: Option<crate::budget::Hold>, record: &CallRecord, usage_known: bool) {
    match hold {
        Some(hold) if usage_known => hold.settle(crate::budget::Spend::of(&record.usage, record.cost_usd)),
        Some(hold) => hold.settle_at_worst(),
        None => {}
    }
}

/// Hands a closed record to every observer and waits for them; a refusal
/// (the ledger's) is the call's `ledger_unavailable`.
async fn commit(observers: &Observers, record: CallRecord) -> Result<(), WeirError> {
    observers.closed(&Arc::new(record)).await.map_err(|refusal| WeirError::LedgerUnavailable(refusal.0))
}

/// How a whole call ended, as its record says.
fn ending(result: &Result<DecodedResponse, WeirError>, log: &CallLog, tally: &Tally) -> Ending {
    match result {
        Ok(answer) => Ending {
            category: "ok".to_owned(),
            stop_reason: Some(record::stop_reason_name(answer.stop_reason).to_owned()),
            served_model: answer.served_model.clone(),
            max_tokens: tally.requested_max_tokens,
            answer: log.records_content().then(|| match tally.native_answer.as_deref() {
                Some(own) => record::content::answer_with_own(&answer.content, &own.blocks, &own.dialect),
                None => record::answer_content(&answer.content),
            }),
            notes: tally.notes.clone(),
            cached_from: tally.cached_from.clone(),
            ..Ending::default()
        },
        Err(error) => Ending {
            category: error.category().as_str().to_owned(),
            max_tokens: tally.requested_max_tokens,
            notes: tally.notes.clone(),
            ..Ending::default()
        },
    }
}

fn stamp(log: &CallLog, model: &str, tally: &Tally) -> Stamp {
    Stamp {
        call_id: log.call_id().to_owned(),
        model: tally.resolved.as_ref().map_or_else(|| model.to_owned(), |resolved| resolved.model.clone()),
        role: tally.resolved.as_ref().and_then(|resolved| resolved.role.clone()),
        provider: tally.resolved.as_ref().map(|resolved| resolved.provider.clone()),
        requested_max_tokens: tally.requested_max_tokens,
        attempts: tally.attempts,
        latency: tally.started.elapsed(),
        ended_at: SystemTime::now(),
        cache_multipliers: tally.resolved.as_ref().map(|resolved| resolved.multipliers),
        native_dropped: tally.native_dropped.clone(),
        passed_over: tally.resolved.as_ref().map(|resolved| resolved.passed_over.clone()).unwrap_or_default(),
        fallback_from: tally.resolved.as_ref().and_then(|resolved| resolved.fallback_from.clone()),
        cache: tally.cache_mark,
        native_answer: tally.native_answer.clone(),
    }
}

/// Resolves the call once (unless a role's fallback already resolved it: see
/// [`fallback`]), applies the policy (capabilities, sampling), takes the
/// budget hold and runs the gates: a stream the entry cannot give as it is
/// written goes as a whole request.
async fn run<A: Attempt>(
    weir: &Weir,
    request: &mut ChatRequest,
    tally: &mut Tally,
    attempt: &A,
    opening: &Opening,
    resolved_by_fallback: Option<Target<'_>>,
) -> Result<Outcome<A::Live>, WeirError> {
    let mut target = match resolved_by_fallback {
        Some(target) => target,
        None => target::resolve(weir, &Naming::chat(request), opening).await?,
    };
    // The breakpoints follow the entry that serves the call.
    cache_plan::plan(&mut request.conversation, target.model.prompt_cache);
    let request = &*request;
    tally.resolved = Some(resolved(&target));
    let native = native::plan(&target, request)?;
    target.native = native.request;
    target.native_answer = native.answer_native;
    target.search_bound = native.search_bound;
    target.search_price = native.search_price;
    // The record holds the price the call's searches are charged at.
    if let Some(resolved) = tally.resolved.as_mut() {
        resolved.prices.web_search = native.search_price;
    }
    tally.search_bound = native.search_bound;
    tally.native_dropped = native.dropped;
    let mut policy = policy::check(target.model, target.provider.info().capabilities, request)?;
    tally.hold = hold::take(weir, request, &target, opening).await?;
    // Every check that refuses a caller has run: only now may the cache answer.
    if let Some(answer) = answer_cache::look_up(weir, &target, request, &policy, tally).await? {
        return Ok(Outcome::Complete(answer));
    }
    // An entry that cannot stream is never asked to, and tools read from a JSON
    // answer cannot be streamed as they are written: the answer is taken whole
    // and the caller replays it as a stream.
    let replayed = !policy.streams || policy.prompted_tools;
    let own = match A::STREAMS && target.native_answer && !replayed {
        true => own_stream(weir, &target, tally.hold.is_some())?,
        false => OwnStream::NotAsked,
    };
    target.native_stream = own == OwnStream::Carried;
    tally.stream_dialect = target.native.as_ref().filter(|_| target.native_stream).map(|native| native.dialect.clone());
    policy.notes.stream_replayed_whole = A::STREAMS && (replayed || own == OwnStream::Whole);
    policy.notes.hosted_items_not_streamed = own == OwnStream::Dropped;
    tally.notes.extend(policy.notes.names());
    if policy.notes.stream_replayed_whole {
        return match dispatch(&Whole, &target, request, tally, &policy).await? {
            Outcome::Complete(answer) => Ok(Outcome::Complete(answer)),
            Outcome::Live(never) => match never {},
        };
    }
    dispatch(attempt, &target, request, tally, &policy).await
}

/// How a streamed call whose answer carries the provider's own blocks goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum OwnStream {
    /// Not such a call, or it is replayed whole for another reason.
    NotAsked,
    /// Live, the own blocks in place (`native.native-stream`).
    Carried,
    /// Live without the own blocks (`hosted_tool_streams = "live"`).
    Dropped,
    /// Taken whole and replayed.
    Whole,
}

/// How `target`'s stream with own blocks goes under `hosted_tool_streams`:
/// live with them where the provider's stream carries them (its count of web
/// searches with them, so a budget holding searches is settled right);
/// elsewhere whole, or under `live` without them, unless the budget holds
/// web searches (such a stream reports no count: taken whole).
fn own_stream(weir: &Weir, target: &Target<'_>, held: bool) -> Result<OwnStream, WeirError> {
    use crate::config::HostedToolStreams;
    let mode = weir.config().hosted_tool_streams;
    if mode == HostedToolStreams::Whole {
        // Whatever the component could stream: not asked.
        return Ok(OwnStream::Whole);
    }
    let carried = target
        .provider
        .streams_native()
        .map_err(|source| WeirError::Plugin { model: target.model.id.clone(), source })?;
    Ok(own_stream_of(mode, carried, held && target.search_bound > 0))
}

/// [`own_stream`]'s rule: `carried` when the provider's stream carries its own
/// blocks, `searches_held` when the call's budget holds web searches.
fn own_stream_of(mode: crate::config::HostedToolStreams, carried: bool, searches_held: bool) -> OwnStream {
    use crate::config::HostedToolStreams;
    match (mode, carried) {
        (HostedToolStreams::Whole, _) => OwnStream::Whole,
        (_, true) => OwnStream::Carried,
        (HostedToolStreams::Live, false) if !searches_held => OwnStream::Dropped,
        (HostedToolStreams::Native | HostedToolStreams::Live, false) => OwnStream::Whole,
    }
}

/// Runs the gates with the conversation the model reads: as asked, or with its
/// tools described in the prompt (see [`prompted_tools`]) and read back out of
/// the answer, or its response schema described there (see [`prompted_schema`]).
async fn dispatch<A: Attempt>(
    attempt: &A,
    target: &Target<'_>,
    request: &ChatRequest,
    tally: &mut Tally,
    policy: &policy::Policy,
) -> Result<Outcome<A::Live>, WeirError> {
    let wire = gates::Wire { schema: !policy.prompted_schema };
    if !policy.prompted_tools && !policy.prompted_schema {
        return gates::run(attempt, target, request, tally, wire).await;
    }
    let mut prompted = request.clone();
    if let Some(schema) = request.response_schema.as_ref().filter(|_| policy.prompted_schema) {
        prompted_schema::describe(&mut prompted.conversation, schema);
    }
    if !policy.prompted_tools {
        return gates::run(attempt, target, &prompted, tally, wire).await;
    }
    let tools = prompted_tools::describe(&mut prompted.conversation);
    match gates::run(attempt, target, &prompted, tally, wire).await? {
        Outcome::Complete(mut answer) => {
            tools.read(&mut answer);
            Ok(Outcome::Complete(answer))
        }
        live => Ok(live),
    }
}

/// Where the call went and what it is billed at, for the record.
fn resolved(target: &target::Reached<'_>) -> Resolved {
    let model = target.model;
    Resolved {
        model: model.id.clone(),
        role: target.role.map(str::to_owned),
        identity: model.identity.clone(),
        provider: crate::catalog::recorded_provider(&target.provider_key).to_owned(),
        wire_id: model.wire_id.clone(),
        endpoint_host: endpoint_host(&target.endpoint),
        prices: model.prices,
        multipliers: CacheMultipliers { read: model.cache_read_multiplier, write: model.cache_write_multiplier },
        passed_over: target.passed_over.clone(),
        fallback_from: None,
    }
}

/// An entry with deployments is recorded with the wire id and endpoint host
/// of the deployment its last attempt went to (each attempt names its own).
fn served_by(weir: &Weir, resolved: &mut Resolved, attempts: &[AttemptRecord]) {
    let Some(name) = attempts.last().and_then(|attempt| attempt.deployment.as_deref()) else { return };
    let catalog = weir.catalog();
    let Some(model) = catalog.get(&resolved.model) else { return };
    let Some(deployment) = model.deployments.iter().find(|deployment| deployment.id == name) else { return };
    resolved.wire_id.clone_from(&deployment.spec.wire_id);
    resolved.endpoint_host = deployment.spec.endpoint.as_deref().and_then(|endpoint| match &deployment.region {
        Some(region) => endpoint_host(&endpoint.replace(REGION_PLACEHOLDER, region)),
        None => endpoint_host(endpoint),
    });
}

/// The host (and port) of an endpoint URL: no scheme, user info, path or query.
fn endpoint_host(endpoint: &str) -> Option<String> {
    let rest = endpoint.split_once("://").map_or(endpoint, |(_, rest)| rest);
    let authority = rest.split(['/', '?', '#']).next()?;
    let host = authority.rsplit_once('@').map_or(authority, |(_, host)| host);
    (!host.is_empty()).then(|| host.to_owned())
}

#[cfg(test)]
mod tests {
    use super::endpoint_host;

    /// `native` streams the own blocks live where they are carried and takes the
    /// rest whole; `live` drops them where they are not, unless the budget holds
    /// searches (such a stream reports no count); `whole` always takes it whole.
    #[test]
    fn a_stream_with_own_blocks_goes_as_the_mode_and_the_component_allow() {
        use super::{OwnStream, own_stream_of};
        use crate::config::HostedToolStreams::{Live, Native, Whole};
        assert_eq!(own_stream_of(Native, true, true), OwnStream::Carried, "its count is known: live under a budget");
        assert_eq!(own_stream_of(Native, false, false), OwnStream::Whole);
        assert_eq!(own_stream_of(Live, true, false), OwnStream::Carried);
        assert_eq!(own_stream_of(Live, false, false), OwnStream::Dropped);
        assert_eq!(own_stream_of(Live, false, true), OwnStream::Whole, "no count: the budget's searches need it whole");
        assert_eq!(own_stream_of(Whole, true, false), OwnStream::Whole);
    }

    #[test]
    fn the_endpoint_host_keeps_no_path_query_or_user_info() {
        assert_eq!(endpoint_host("https://api.openai.com/v1").as_deref(), Some("api.openai.com"));
        assert_eq!(endpoint_host("http://user:pw@127.0.0.1:8080/x?key=1").as_deref(), Some("127.0.0.1:8080"));
        assert_eq!(endpoint_host("https://h.example?q=1").as_deref(), Some("h.example"));
        assert_eq!(endpoint_host("https:///path"), None);
    }
}
