//! The streamed attempt and the first-chunk rule.
//!
//! ```text
//! admission ─► encode(stream) ─► open ─► status? ─► read until the first output ─► Live ─► pump task ─► ChatStream
//!                                          │ non-2xx: classify (retry loop)     │ in-band error: classify, maybe
//!                                          │                                     │ replay once without streaming
//! ```
//!
//! Before the first output reaches the caller, every failure is the retry loop's
//! and the gates' like in a whole call, but one: an accepted stream that breaks
//! without a frame ends the turn (see [`First::Dropped`]). An in-band error frame in an HTTP-200
//! stream is classified from its status, and earns one replay of the same request
//! without streaming when a second attempt could change the outcome; otherwise,
//! or when the caller opted out of the replay, it is answered from that attempt
//! with no retry either (see [`after_frame`]). After the
//! first output nothing is retried: a capacity signal feeds the throttle its
//! weight and the stream fails naming its position; any failure ends the stream
//! with a normalized error. The attempt timeout bounds the stream until its
//! first output; the caller's deadline bounds it to its end.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::admission::{Feedback, Grant, ModelGate};
use crate::chat::{ChatRequest, Stamp};
use crate::error::{Pending, WeirError};
use crate::plugin::ComponentStream;
use crate::record::AttemptReason;
use crate::record::{self, AttemptRecord, CallLog, Ending, Observers, Resolved, StreamEnd, Tokens};
use crate::stream::{Assembler, InPlace};
use crate::stream::{ChatStream, STREAM_BUFFER, StreamFailure, UpstreamStream, deltas_of};
use crate::transport::{Credential, TransportError};
use crate::types::{
    CallParams, Conversation, DecodedResponse, HttpRequest, InBandError, NativeDelta, StopReason, StreamDelta, Usage,
};

use super::attempt::{self, feed_back};
use super::attempt_log::{Ended, Observed, bounded, request_id};
use super::spend::Spend;
use super::target::Target;
use super::{Attempt, Failure, Outcome, classify};

/// A streamed attempt. The replay without streaming is spent once per call.
pub(super) struct Streamed {
    replay_allowed: bool,
    replayed: AtomicBool,
}

impl Streamed {
    pub fn new(replay_allowed: bool) -> Self {
        Self { replay_allowed, replayed: AtomicBool::new(false) }
    }
}

impl Attempt for Streamed {
    type Live = Live;
    const STREAMS: bool = true;

    async fn run(
        &self,
        target: &Target<'_>,
        conversation: &Conversation,
        params: &CallParams,
        request: &ChatRequest,
        spend: &mut Spend<'_>,
    ) -> Result<Outcome<Live>, Failure> {
        let streaming = CallParams { stream: true, ..params.clone() };
        let began = std::time::Instant::now();
        let mut observed = Observed::default();
        let opened = match spend.cover(target, conversation, params.max_tokens).await {
            Ok(()) => self.open(target, conversation, &streaming, request.deadline, &mut observed).await,
            Err(error) => Err(error),
        };
        match opened {
            Ok(First::Live(live)) => {
                spend.log.push(began, observed, Ended::Live);
                Ok(Outcome::Live(*live))
            }
            Ok(First::Complete(answer)) => {
                spend.log.push(began, observed, Ended::Answered(&answer));
                Ok(Outcome::Complete(answer))
            }
            Ok(First::InBand(in_band)) => {
                observed.status = in_band.status.or(observed.status);
                let failed = InBandAttempt { in_band, began, observed };
                self.after_in_band_error(target, conversation, params, request, spend, failed).await
            }
            Ok(First::Dropped(error)) => {
                spend.log.push(began, observed, Ended::Failed(&error));
                Err(Failure::Settled(error))
            }
            Err(error) => {
                spend.log.push(began, observed, Ended::Failed(&error));
                Err(Failure::Signal(error))
            }
        }
    }
}

/// A streamed attempt that ended in an in-band error, logged once classified.
struct InBandAttempt {
    in_band: InBandError,
    began: std::time::Instant,
    observed: Observed,
}

impl Streamed {
    /// Admits, encodes and opens the stream, then reads it until its first
    /// output: the retryable phase, bounded by the attempt timeout and the deadline.
    async fn open(
        &self,
        target: &Target<'_>,
        conversation: &Conversation,
        streaming: &CallParams,
        deadline: Option<Instant>,
        observed: &mut Observed,
    ) -> Result<First, WeirError> {
        let mut session = target.provider.session();
        let (mut grant, http_request) =
            attempt::admit_and_encode(target, &mut session, conversation, streaming, deadline, observed).await?;
        // The decoder is the instance that encoded the request, taken before
        // the request leaves: when the pool stays full, the call fails having
        // sent nothing.
        let decoder = match target.native_stream {
            true => session.into_native_stream(deadline).await,
            false => session.into_stream(deadline).await,
        };
        let decoder = match decoder {
            Ok(decoder) => decoder,
            Err(source) => {
                grant.rollback().await;
                return Err(plugin(target, source));
            }
        };
        grant.mark_sent();
        let opened = first_output(target, http_request, grant, decoder, deadline, observed);
        attempt::in_flight(target, deadline, opened).await
    }
}

/// How a stream's retryable phase ended.
enum First {
    /// The first output is in hand.
    Live(Box<Live>),
    /// Over before any output: a whole (empty, refused or cut off) answer for
    /// the gates.
    Complete(DecodedResponse),
    /// An error frame before any output; the upstream and the grant are gone.
    InBand(InBandError),
    /// The accepted stream broke before any output (the socket dropped, the
    /// framing broke, the body ended without a stop): the turn ends here. The
    /// upstream took the request, so it may have been processed and billed; a
    /// second attempt could pay for it twice. A stall is not a drop: the attempt
    /// timeout's error stays the retry loop's.
    Dropped(WeirError),
}

/// Opens the stream and reads it until its first output: the phase the attempt
/// timeout and the deadline bound.
async fn first_output(
    target: &Target<'_>,
    http_request: HttpRequest,
    grant: Grant,
    decoder: ComponentStream,
    deadline: Option<Instant>,
    observed: &mut Observed,
) -> Result<First, WeirError> {
    let transport = target.weir.transport();
    let body = transport
        .open(&target.endpoint, http_request, &target.credential)
        .await
        .map_err(|source| attempt::transport_failure(target, source))?;
    observed.status = Some(body.status);
    observed.request_id = request_id(&body.headers);
    if !(200..300).contains(&body.status) {
        // The decoder's instance goes back to the pool before the body is read.
        drop(decoder);
        let response = body.read_all().await.map_err(|source| attempt::transport_failure(target, source))?;
        return Err(attempt::upstream_failure(target, &mut target.provider.session(), &response).await);
    }
    let mut upstream = UpstreamStream::new(body, target.provider.info().stream_framing, decoder);
    let mut first = Vec::new();
    loop {
        match upstream.next().await {
            Some(Ok(NativeDelta::Neutral(StreamDelta::Error(in_band)))) => return Ok(First::InBand(in_band)),
            Some(Ok(delta)) => {
                let output = is_output(&delta);
                first.push(delta);
                if output {
                    feed_back(target.gate, Feedback::Success).await;
                    return Ok(First::Live(Box::new(Live::new(target, first, upstream, grant, deadline))));
                }
            }
            Some(Err(failure)) if ends_the_turn(&failure) => {
                return Ok(First::Dropped(stream_failure(target, failure)));
            }
            Some(Err(failure)) => return Err(stream_failure(target, failure)),
            None => {
                feed_back(target.gate, Feedback::Success).await;
                return Ok(First::Complete(assembled(first)));
            }
        }
    }
}

impl Streamed {
    /// An error frame before any output: classified from its status, then
    /// replayed once without streaming (an attempt of its own, under the call's
    /// ceiling), settled at once, or — when the replay it earned is spent or
    /// would pass the ceiling — returned to the retry loop.
    async fn after_in_band_error(
        &self,
        target: &Target<'_>,
        conversation: &Conversation,
        params: &CallParams,
        request: &ChatRequest,
        spend: &mut Spend<'_>,
        failed: InBandAttempt,
    ) -> Result<Outcome<Live>, Failure> {
        let InBandAttempt { in_band, began, observed } = failed;
        let (status, status_from_prose) = (in_band.status, in_band.status_from_prose);
        let (error, detail) = classify::in_band(&Origin::of(target), in_band);
        spend.log.push(began, observed, Ended::Failed(&error));
        feed_back(target.gate, Feedback::Backpressure(error.backpressure_weight())).await;
        let frame = Frame { status, status_from_prose, slow_down: error.backpressure_weight() > 0, detail: &detail };
        match after_frame(self.replay_allowed, &frame) {
            AfterFrame::Settled => {
                tracing::info!(model = %target.model.id, ?status, "in-band error before output; answered from this attempt");
                Err(Failure::Settled(error))
            }
            AfterFrame::Replay if spend.has_room() && !self.replayed.swap(true, Ordering::Relaxed) => {
                tracing::info!(model = %target.model.id, ?status, "in-band error before output; replaying once without streaming");
                spend.next_attempt(AttemptReason::Replay, || Pending::Retry(Box::new(error)))?;
                let whole = CallParams { stream: false, ..params.clone() };
                let answer = attempt::logged(target, conversation, &whole, request.deadline, spend).await?;
                Ok(Outcome::Complete(answer))
            }
            AfterFrame::Replay => Err(Failure::Signal(error)),
        }
    }
}

/// What the host knows of an in-band error frame when it decides what comes next.
struct Frame<'a> {
    /// The status the frame carries (or that its prose names).
    status: Option<u16>,
    /// The status was read from the provider's prose, not a structured field.
    status_from_prose: bool,
    /// The component classed it a slow-down signal (rate limited, overloaded).
    slow_down: bool,
    /// The provider's raw words, for the one question of whether they reject
    /// streaming itself.
    detail: &'a str,
}

/// What an in-band error before output earns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum AfterFrame {
    /// One replay of the same request without streaming (or, when that is spent,
    /// the retry loop).
    Replay,
    /// Nothing more: the call fails with this error.
    Settled,
}

/// Whether a second attempt without streaming could change an in-band error's
/// outcome, and may be made:
///
/// - a caller that opted out of the replay (delegated authority) gets no second
///   attempt of any kind: not the replay, not a retry;
/// - a slow-down signal (rate limited, overloaded) earns it whatever status the
///   provider documents for it: Bedrock's `ServiceQuotaExceededException` is a
///   400 that means capacity;
/// - a status only the prose names that would carry member guidance (402) keeps
///   it: the replay's real HTTP status is what may pick the billing category;
/// - a timeout (408), 425, 429, a 5xx or no status at all earn it;
/// - any other 4xx (409 included) would survive the replay and is answered from
///   this attempt, unless it rejects streaming itself — exactly what the replay
///   turns off.
///
/// What the provider's prose says steers only this decision, never a category.
fn after_frame(replay_allowed: bool, frame: &Frame<'_>) -> AfterFrame {
    if !replay_allowed {
        return AfterFrame::Settled;
    }
    if frame.slow_down || (frame.status_from_prose && frame.status.is_some_and(carries_member_guidance)) {
        return AfterFrame::Replay;
    }
    match frame.status {
        Some(408 | 425 | 429) | None => AfterFrame::Replay,
        Some(400..=499) if names_streaming(frame.detail) => AfterFrame::Replay,
        Some(400..=499) => AfterFrame::Settled,
        Some(_) => AfterFrame::Replay,
    }
}

/// A status whose category tells a caller what to correct (402:
/// `provider_credit_exhausted`), and so must come from a structured status.
fn carries_member_guidance(status: u16) -> bool {
    status == 402
}

/// "streaming is not supported", "the `stream` parameter", "'stream' must be
/// false": the word as the subject, not the bare "stream" a component's own
/// wording may carry ("an error frame in a 200 stream").
fn names_streaming(detail: &str) -> bool {
    let detail = detail.to_ascii_lowercase();
    ["streaming", "`stream`", "'stream'", "\"stream\"", "stream parameter", "stream mode", "stream=true"]
        .iter()
        .any(|phrase| detail.contains(phrase))
}

/// Whether a caller would see this delta or own piece: the first such ends
/// the retryable phase. An own block and a citation are output; a text
/// block's start and the own usage are not (nothing of the answer yet).
fn is_output(piece: &NativeDelta) -> bool {
    let delta = match piece {
        NativeDelta::Neutral(delta) => delta,
        NativeDelta::Block(_) | NativeDelta::Citation(_) => return true,
        NativeDelta::TextStart(_) | NativeDelta::Usage(_) => return false,
    };
    match delta {
        StreamDelta::Text(text) | StreamDelta::Thinking(text) => !text.is_empty(),
        StreamDelta::ThinkingSignature(_) | StreamDelta::ToolCallStart(_) | StreamDelta::ToolCallFragment(_) => true,
        StreamDelta::ToolCallEnd(_)
        | StreamDelta::Usage(_)
        | StreamDelta::Stop(_)
        | StreamDelta::ServedModel(_)
        | StreamDelta::RequestId(_)
        | StreamDelta::Error(_) => false,
    }
}

/// A stream over before any output, whole: its neutral deltas (it can have
/// no own block: a block is output).
fn assembled(pieces: Vec<NativeDelta>) -> DecodedResponse {
    let mut assembler = crate::stream::Assembler::default();
    for piece in pieces {
        if let NativeDelta::Neutral(delta) = piece {
            assembler.push(delta);
        }
    }
    assembler.finish()
}

fn plugin(target: &Target<'_>, source: crate::plugin::PluginError) -> WeirError {
    classify::plugin_failure(target, source)
}

/// A stream that broke before any output: transport and framing failures are
/// transient (the retry loop re-runs them); a component failure is not.
/// Whether a failure of an accepted stream before any output ends the turn
/// (see [`First::Dropped`]): every way the body breaks, but not a read that
/// timed out (a stall, which the retry loop may try again) and not a
/// component's own failure (nothing says the upstream misbehaved).
fn ends_the_turn(failure: &StreamFailure) -> bool {
    match failure {
        StreamFailure::Transport(TransportError::Timeout) | StreamFailure::Plugin(_) => false,
        StreamFailure::Transport(_) | StreamFailure::Framing(_) | StreamFailure::EndedWithoutStop => true,
    }
}

fn stream_failure(target: &Target<'_>, failure: StreamFailure) -> WeirError {
    let error = Origin::of(target).failure(failure);
    tracing::warn!(model = %target.model.id, provider = target.provider.key(), %error, "upstream stream failed before output");
    error
}

/// Who a stream's failures are attributed to, owned so the pump task can outlive
/// the call's borrowed target.
#[derive(Debug, Clone)]
pub(super) struct Origin {
    pub model: String,
    pub provider: String,
    pub credential: Option<String>,
    /// The credential the request carried: what upstream text is scrubbed of
    /// before it is logged (never handed to a component).
    pub sent: Credential,
}

impl Origin {
    fn of(target: &Target<'_>) -> Self {
        Self {
            model: target.model.id.clone(),
            provider: target.provider.key().to_owned(),
            credential: target.credential_id.clone(),
            sent: target.credential.clone(),
        }
    }
}

/// A stream whose first output is in hand, with everything it holds: the
/// upstream connection and the admission grant (its concurrency permit).
pub(super) struct Live {
    first: Vec<NativeDelta>,
    upstream: UpstreamStream,
    grant: Grant,
    gate: Arc<ModelGate>,
    origin: Origin,
    /// The caller's deadline: the stream is cut there, wherever it is.
    deadline: Option<Instant>,
}

impl Live {
    fn new(
        target: &Target<'_>,
        first: Vec<NativeDelta>,
        upstream: UpstreamStream,
        grant: Grant,
        deadline: Option<Instant>,
    ) -> Self {
        Self { first, upstream, grant, gate: Arc::clone(target.gate), origin: Origin::of(target), deadline }
    }

    /// Hands the stream to its own task, which reads the upstream only as fast as
    /// the caller takes deltas, stops when the caller goes away, and closes the
    /// call's record before the stream's end reaches the caller.
    pub fn into_chat_stream(self, stamp: Stamp, record: StreamRecord) -> ChatStream {
        let (sender, receiver) = mpsc::channel(STREAM_BUFFER);
        tokio::spawn(self.pump(sender, record));
        ChatStream::new(receiver, stamp)
    }

    async fn pump(self, sender: mpsc::Sender<Result<NativeDelta, WeirError>>, record: StreamRecord) {
        let Self { first, mut upstream, grant, gate, origin, deadline } = self;
        let records_content = record.log.records_content();
        let mut seen =
            Seen::new(records_content || record.store.is_some(), records_content && record.dialect.is_some());
        let mut delivered: u64 = 0;
        let relay = Relay { gate: &gate, origin: &origin, sender: &sender, deadline };
        let ended = relay.run(first, &mut upstream, &mut seen, &mut delivered).await;
        // The permit goes back as soon as the upstream is done with.
        drop(grant);
        let stream_end = StreamEnd {
            delivered,
            upstream_bytes: upstream.bytes(),
            client_left: matches!(ended, StreamEnded::ClientLeft),
            completed: matches!(ended, StreamEnded::Completed),
        };
        drop(upstream);
        let category = match &ended {
            StreamEnded::Completed => "ok".to_owned(),
            StreamEnded::ClientLeft => "client_left".to_owned(),
            StreamEnded::Failed(error) => error.category().as_str().to_owned(),
        };
        // Boxed: closing the record is a large future that runs once, at the
        // end; inline it would size this task for the stream's whole life
        // (see `UpstreamStream::advance`).
        let committed = Box::pin(record.close(seen, category, stream_end)).await;
        // The stream's last item goes out only once its record is committed.
        match (ended, committed) {
            (StreamEnded::Failed(error), _) => {
                let _ = sender.send(Err(error)).await;
            }
            (StreamEnded::Completed, Err(error)) => {
                let _ = sender.send(Err(error)).await;
            }
            (StreamEnded::Completed | StreamEnded::ClientLeft, _) => {}
        }
    }
}

/// How a live stream ended.
enum StreamEnded {
    /// The upstream reached its end.
    Completed,
    /// The caller went away; the upstream request was dropped.
    ClientLeft,
    /// The stream broke after output (or reached the caller's deadline); the
    /// error is the stream's last item, sent after the record is committed.
    Failed(WeirError),
}

/// Moves deltas from the upstream to the caller.
struct Relay<'a> {
    gate: &'a ModelGate,
    origin: &'a Origin,
    sender: &'a mpsc::Sender<Result<NativeDelta, WeirError>>,
    deadline: Option<Instant>,
}

impl Relay<'_> {
    async fn run(
        &self,
        first: Vec<NativeDelta>,
        upstream: &mut UpstreamStream,
        seen: &mut Seen,
        delivered: &mut u64,
    ) -> StreamEnded {
        let Self { gate, origin, sender, .. } = *self;
        for delta in first {
            seen.note(&delta);
            if sender.send(Ok(delta)).await.is_err() {
                return self.client_left(*delivered);
            }
            *delivered += 1;
        }
        let expiry = until(self.deadline);
        tokio::pin!(expiry);
        loop {
            let next = tokio::select! {
                next = upstream.next() => next,
                () = sender.closed() => return self.client_left(*delivered),
                () = &mut expiry => {
                    let error = WeirError::DeadlineExceeded { model: origin.model.clone() };
                    return StreamEnded::Failed(mid_stream(gate, origin, error, *delivered, upstream.bytes()).await);
                }
            };
            let delta = match next {
                None => return StreamEnded::Completed,
                Some(Ok(NativeDelta::Neutral(StreamDelta::Error(in_band)))) => {
                    let (error, _) = classify::in_band(origin, in_band);
                    return StreamEnded::Failed(mid_stream(gate, origin, error, *delivered, upstream.bytes()).await);
                }
                Some(Ok(delta)) => delta,
                Some(Err(failure)) => {
                    let error = origin.failure(failure);
                    return StreamEnded::Failed(mid_stream(gate, origin, error, *delivered, upstream.bytes()).await);
                }
            };
            seen.note(&delta);
            if sender.send(Ok(delta)).await.is_err() {
                return self.client_left(*delivered);
            }
            *delivered += 1;
        }
    }

    /// The caller went away: noticed while waiting on the upstream or while handing
    /// it a delta, whichever came first. Logged once here for both.
    fn client_left(&self, delivered: u64) -> StreamEnded {
        tracing::info!(model = %self.origin.model, delivered, "the caller left; cancelling the upstream stream");
        StreamEnded::ClientLeft
    }
}

/// What a live stream said about itself, for its record: the facts always, the
/// content only when the operator records it.
struct Seen {
    usage: Option<Usage>,
    /// The web searches the provider's own usage reported (the last one: it
    /// is cumulative, like the tokens); `None` when none came.
    web_searches: Option<u64>,
    /// The web searches its own blocks showed (see `call::web_search::shown`).
    searches_shown: u64,
    stop: Option<StopReason>,
    served_model: Option<String>,
    request_id: Option<String>,
    content: Option<Assembler>,
    /// The answer with its own blocks in place, for a record of a stream that
    /// carries them.
    in_place: Option<InPlace>,
}

impl Seen {
    fn new(records_content: bool, in_place: bool) -> Self {
        Self {
            usage: None,
            web_searches: None,
            searches_shown: 0,
            stop: None,
            served_model: None,
            request_id: None,
            content: records_content.then(Assembler::default),
            in_place: in_place.then(InPlace::default),
        }
    }

    fn note(&mut self, piece: &NativeDelta) {
        if let Some(in_place) = &mut self.in_place {
            in_place.push(piece);
        }
        let delta = match piece {
            NativeDelta::Neutral(delta) => delta,
            NativeDelta::Usage(json) => {
                self.web_searches = super::web_search::reported(json);
                return;
            }
            NativeDelta::Block(json) => {
                self.searches_shown += super::web_search::shown(json);
                return;
            }
            NativeDelta::TextStart(_) | NativeDelta::Citation(_) => return,
        };
        match delta {
            StreamDelta::Usage(usage) => self.usage = Some(*usage),
            StreamDelta::Stop(stop) => self.stop = Some(stop.reason),
            StreamDelta::ServedModel(model) => self.served_model = Some(model.clone()),
            StreamDelta::RequestId(id) => self.request_id = Some(bounded(id)),
            _ => {}
        }
        if let Some(content) = &mut self.content {
            content.push(delta.clone());
        }
    }
}

/// What a live stream needs to close its call's record when it ends.
pub(super) struct StreamRecord {
    pub log: CallLog,
    pub observers: Observers,
    pub resolved: Option<Resolved>,
    pub attempts: Vec<AttemptRecord>,
    pub max_tokens: Option<u32>,
    pub first_output: Duration,
    pub notes: Vec<&'static str>,
    /// The call's budget hold, settled from the record (a stream the caller
    /// left: from what the upstream reported).
    pub hold: Option<crate::budget::Hold>,
    /// Where to store the stream's answer, once whole (see `call::answer_cache`).
    pub store: Option<(crate::Weir, super::answer_cache::ToStore)>,
    /// The most web searches the attempt may run (see `call::web_search`):
    /// what a stream that did not report its count to its end is charged.
    pub search_bound: u64,
    /// The dialect of the provider's own pieces, for a stream that carries them.
    pub dialect: Option<String>,
}

impl StreamRecord {
    /// Closes the record with what the stream reported (its usage is the last
    /// attempt's) and waits for the observers: the ledger's commit.
    async fn close(self, seen: Seen, category: String, stream_end: StreamEnd) -> Result<(), WeirError> {
        let Self {
            mut log,
            observers,
            resolved,
            mut attempts,
            max_tokens,
            first_output,
            mut notes,
            hold,
            store,
            search_bound,
            dialect,
        } = self;
        let reported = seen.usage.is_some();
        // The assembled answer: the cache's (a stream that reached its end)
        // and the record's (only when it records content).
        let answer = seen.content.map(Assembler::finish);
        if let (Some((weir, to_store)), Some(answer)) = (store, &answer)
            && category == "ok"
            && stream_end.completed
        {
            super::answer_cache::store(&weir, to_store, answer, log.call_id()).await;
        }
        let searches =
            super::web_search::streamed(seen.web_searches, seen.searches_shown, stream_end.completed, search_bound);
        if searches.at_bound {
            notes.push("web_searches_charged_at_bound");
        }
        if let Some(last) = attempts.last_mut() {
            last.usage = seen.usage.as_ref().map(Tokens::of);
            last.web_searches = searches.count;
            if last.request_id.is_none() {
                last.request_id = seen.request_id;
            }
        }
        let ending = Ending {
            category,
            stop_reason: seen.stop.map(|reason| record::stop_reason_name(reason).to_owned()),
            served_model: seen.served_model,
            max_tokens,
            first_output: Some(first_output),
            stream_end: Some(stream_end),
            answer: match (seen.in_place.and_then(InPlace::finish), dialect) {
                (Some((content, blocks)), Some(dialect)) => {
                    Some(record::content::answer_with_own(&content, &blocks, &dialect))
                }
                _ => answer.filter(|_| log.records_content()).map(|answer| record::answer_content(&answer.content)),
            },
            notes,
            charged_worst_case: hold.is_some() && !reported,
            cached_from: None,
        };
        let record = log.close(resolved.as_ref(), attempts, ending);
        super::settle(hold, &record, reported);
        super::commit(&observers, record).await
    }
}

impl Origin {
    /// A broken stream as the call's error, before output and after alike: framing
    /// and a missing stop are transport failures (transient), a component's is its own.
    fn failure(&self, failure: StreamFailure) -> WeirError {
        match failure {
            StreamFailure::Plugin(source) => WeirError::Plugin {
                model: self.model.clone(),
                source: source.scrubbed(|text| self.sent.scrub(text).into_owned()),
            },
            StreamFailure::Transport(source) => self.transport(source),
            StreamFailure::Framing(_) | StreamFailure::EndedWithoutStop => {
                self.transport(TransportError::Io(failure.to_string()))
            }
        }
    }

    fn transport(&self, source: TransportError) -> WeirError {
        WeirError::Transport { model: self.model.clone(), provider: self.provider.clone(), source }
    }
}

/// Resolves at the deadline; never without one.
async fn until(deadline: Option<Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}

/// A failure after output began: never retried. A capacity signal still feeds
/// the throttle its weight, so the next calls slow down.
async fn mid_stream(gate: &ModelGate, origin: &Origin, error: WeirError, deltas: u64, bytes: u64) -> WeirError {
    feed_back(gate, Feedback::Backpressure(error.backpressure_weight())).await;
    tracing::warn!(model = %origin.model, provider = %origin.provider, deltas, bytes, error = %error, "stream failed after output began");
    WeirError::MidStream { model: origin.model.clone(), deltas, bytes, source: Box::new(error) }
}

/// A whole answer (a replay without streaming, or a stream over before any
/// output that passed the gates) delivered as a stream.
pub(super) fn replayed(answer: DecodedResponse, stamp: Stamp) -> ChatStream {
    let deltas = deltas_of(answer);
    let (sender, receiver) = mpsc::channel(deltas.len().max(1));
    for delta in deltas {
        // Cannot fail: the channel holds them all and the receiver is alive.
        let _ = sender.try_send(Ok(NativeDelta::Neutral(delta)));
    }
    ChatStream::new(receiver, stamp)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(status: Option<u16>, detail: &str) -> Frame<'_> {
        Frame { status, status_from_prose: false, slow_down: false, detail }
    }

    #[test]
    fn the_replay_is_earned_only_where_a_second_attempt_could_differ() {
        for status in [None, Some(408), Some(425), Some(429), Some(500), Some(503), Some(529)] {
            assert_eq!(after_frame(true, &frame(status, "anything")), AfterFrame::Replay, "{status:?}");
        }
        for status in [400, 401, 402, 403, 404, 409, 413, 422] {
            let rejected = frame(Some(status), "error frame in a 200 stream: bad parameter");
            assert_eq!(after_frame(true, &rejected), AfterFrame::Settled, "{status}");
        }
        assert_eq!(
            after_frame(true, &frame(Some(400), "Streaming is not supported for this model")),
            AfterFrame::Replay
        );
        assert_eq!(after_frame(true, &frame(Some(400), "invalid value for `stream`")), AfterFrame::Replay);
    }

    #[test]
    fn an_opted_out_caller_gets_no_second_attempt_of_any_kind() {
        for status in [None, Some(429), Some(500), Some(400)] {
            assert_eq!(after_frame(false, &frame(status, "streaming is not supported")), AfterFrame::Settled);
        }
        let slow_down = Frame { slow_down: true, ..frame(Some(429), "") };
        assert_eq!(after_frame(false, &slow_down), AfterFrame::Settled);
    }

    #[test]
    fn a_slow_down_signal_and_a_402_read_from_prose_keep_the_replay() {
        let quota_400 = Frame { slow_down: true, ..frame(Some(400), "ServiceQuotaExceededException") };
        assert_eq!(after_frame(true, &quota_400), AfterFrame::Replay, "a capacity signal whatever its status");
        let prose_402 = Frame { status_from_prose: true, ..frame(Some(402), "Error code: 402") };
        assert_eq!(after_frame(true, &prose_402), AfterFrame::Replay, "the real status may pick the category");
        let prose_400 = Frame { status_from_prose: true, ..frame(Some(400), "Error code: 400") };
        assert_eq!(after_frame(true, &prose_400), AfterFrame::Settled, "prose steers the decision");
    }

    #[test]
    fn output_is_what_a_caller_would_see() {
        let neutral = NativeDelta::Neutral;
        assert!(!is_output(&neutral(StreamDelta::Text(String::new()))));
        assert!(is_output(&neutral(StreamDelta::Text("a".into()))));
        assert!(!is_output(&neutral(StreamDelta::ServedModel("m".into()))));
        assert!(!is_output(&neutral(StreamDelta::ToolCallEnd(0))));
        assert!(is_output(&NativeDelta::Block("{}".into())));
        assert!(is_output(&NativeDelta::Citation("{}".into())));
        assert!(!is_output(&NativeDelta::TextStart("{}".into())));
        assert!(!is_output(&NativeDelta::Usage("{}".into())));
    }
}
