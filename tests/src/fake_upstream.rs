//! A fake OpenAI server (Chat Completions, Embeddings, and the `/rerank` route of
//! OpenAI-compatible servers) on loopback, scripted per request.
//!
//! Flow of one request: the connection task (one per TCP connection, hyper HTTP/1.1) reads the
//! whole request, records it in [`FakeUpstream::received`], then pops the next [`Scripted`]
//! answer from the FIFO queue. A scripted answer is played as is; with the queue empty the
//! request goes to an axum router that speaks OpenAI (echo completions, a fixed first token's
//! log-probabilities when asked for them, deterministic embeddings and rankings, decisions on
//! the decision wire, model list, 404s).
//!
//! Why not `axum::serve`: a scripted [`Scripted::Drop`] must close the TCP connection without
//! writing a single byte, which no handler can express. Serving each connection ourselves
//! lets the handler signal its connection task, which then resets the socket.
//!
//! The server runs on its own thread and runtime, not the test's: a test may block (waiting
//! on a child process, a blocking CLI run) on a single-threaded `#[tokio::test]` runtime and
//! the fake still answers, and dropping [`FakeUpstream`] stops everything deterministically
//! (the thread is joined, so the port is closed when `drop` returns).

use std::collections::VecDeque;
use std::convert::Infallible;
use std::net::{SocketAddr, TcpListener as StdTcpListener};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use axum::extract::Extension;
use axum::http::{Method, Request, Response, StatusCode, Uri};
use axum::routing::{get, post};
use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use serde_json::Value;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, oneshot};
use tower::ServiceExt;

use crate::{decision_wire, openai_wire};

/// One scripted answer. Consumed in FIFO order by incoming requests, whatever their path.
#[derive(Debug, Clone)]
pub enum Scripted {
    /// Answer with exactly this status, these headers and this body.
    Respond { status: u16, headers: Vec<(String, String)>, body: Bytes },
    /// Accept the connection and read the request, then reset it without any response
    /// (a connection reset before the head).
    Drop,
    /// Send nothing until `delay` passes, then play `then`.
    Delay { delay: Duration, then: Box<Scripted> },
    /// Send the head, then the given raw chunks (for SSE), pausing `pause` between chunks.
    /// Each chunk is flushed on its own, so a client sees them arrive one by one.
    Stream { status: u16, headers: Vec<(String, String)>, chunks: Vec<Bytes>, pause: Duration },
    /// Like [`Scripted::Stream`], but after the last chunk the connection is cut without the
    /// body's end (a socket drop mid-stream; no error frame).
    StreamThenDrop { status: u16, headers: Vec<(String, String)>, chunks: Vec<Bytes> },
    /// The head and `before`, then nothing until the file `gate` exists (a client
    /// touches it once it has read what `before` carried), then `after` and the
    /// end. `opened` is set when the file released it; after [`GATE_WAIT`]
    /// without the file the rest is sent anyway and `opened` stays false, so a
    /// test proves a delta reached its client before the upstream ended.
    StreamGated {
        status: u16,
        headers: Vec<(String, String)>,
        before: Vec<Bytes>,
        gate: std::path::PathBuf,
        opened: Arc<std::sync::atomic::AtomicBool>,
        after: Vec<Bytes>,
    },
}

/// How long a [`Scripted::StreamGated`] waits for its gate file.
pub const GATE_WAIT: Duration = Duration::from_secs(30);

impl Scripted {
    /// `self` after `delay`: shorthand for [`Scripted::Delay`].
    #[must_use]
    pub fn after(self, delay: Duration) -> Scripted {
        Scripted::Delay { delay, then: Box::new(self) }
    }
}

/// One request the fake received, recorded before it was answered.
#[derive(Debug, Clone)]
pub struct Received {
    pub method: String,
    /// The path without the query, e.g. `/v1/chat/completions`.
    pub path: String,
    /// The raw query string, if any (Azure-style `api-version=...`).
    pub query: Option<String>,
    /// In arrival order; names are lowercase (HTTP/1.1 names are case-insensitive).
    pub headers: Vec<(String, String)>,
    pub body: Bytes,
}

impl Received {
    /// The body as JSON; panics with the body text if it is not JSON, since every request a
    /// gateway sends to this fake should be.
    #[must_use]
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("request body is not JSON ({e}): {}", String::from_utf8_lossy(&self.body)))
    }

    /// The first value of header `name` (case-insensitive).
    #[must_use]
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }
}

#[derive(Default)]
struct State {
    queue: VecDeque<Scripted>,
    received: Vec<Received>,
    limiter: Option<RequestLimiter>,
    rate_limited: usize,
    /// Chunks of scripted streams that hyper has taken to write (it takes the next
    /// only when its write buffer has room, so this stalls behind a slow reader).
    chunks_sent: usize,
    /// Scripted answers whose connection closed before they were played whole.
    abandoned: usize,
    /// Scripted answers whose body was dropped before its end: the client closed
    /// the connection mid-answer.
    answers_cut: usize,
    /// How long every unscripted answer takes (an upstream doing real work).
    answer_delay: Duration,
    /// Unscripted requests being answered now, and the most at once.
    answering: usize,
    most_answering: usize,
    /// Set by [`FakeUpstream::write_answers_of`]: how long every unscripted
    /// chat answer is, in tokens, before the request's `max_tokens` cuts it.
    answer_tokens: Option<u64>,
}

/// OpenAI-style request limiting: a bucket of `rpm` requests refilled continuously
/// (`rpm / 60` per second), answering 429 `rate_limit_exceeded` when empty.
struct RequestLimiter {
    capacity: f64,
    level: f64,
    updated: std::time::Instant,
}

impl RequestLimiter {
    /// The gateway debits its bucket when it *grants* a call; this limiter debits
    /// when the request *arrives*, after the gateway's processing and loopback
    /// hops. Under a loaded debug build the first burst's arrival jitter reaches
    /// tens of milliseconds, so half a request (500 ms at 60 rpm) is forgiven: the
    /// limit stays strict against any real burst (without admission, 140 of 200
    /// simultaneous calls would be refused), but not against scheduling noise.
    const SKEW_ALLOWANCE: f64 = 0.5;

    fn admit(&mut self) -> bool {
        let now = std::time::Instant::now();
        let refill = now.duration_since(self.updated).as_secs_f64() * self.capacity / 60.0;
        self.level = (self.level + refill).min(self.capacity);
        self.updated = now;
        if self.level + Self::SKEW_ALLOWANCE >= 1.0 {
            self.level -= 1.0;
            true
        } else {
            false
        }
    }
}

#[derive(Default)]
struct Shared(Mutex<State>);

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A panicking test thread must not hide the requests from the next assertion.
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Records the request and takes its answer under one lock, so arrival order and
    /// script order agree even with concurrent connections.
    fn record(&self, request: Received) -> (usize, Option<Scripted>) {
        let mut state = self.lock();
        state.received.push(request);
        let seq = state.received.len() - 1;
        if let Some(script) = state.queue.pop_front() {
            return (seq, Some(script));
        }
        let limited = state.limiter.as_mut().is_some_and(|limiter| !limiter.admit());
        if limited {
            state.rate_limited += 1;
            return (seq, Some(crate::openai_wire::rate_limited(1)));
        }
        (seq, None)
    }
}

/// The arrival index of the request, handed to the echo handlers for deterministic ids.
#[derive(Debug, Clone, Copy)]
struct RequestSeq(usize);

/// How long the echo's chat answers are (see [`FakeUpstream::write_answers_of`]).
#[derive(Debug, Clone, Copy)]
struct AnswerTokens(Option<u64>);

/// A running fake OpenAI server. Stops (and joins its thread) on drop.
pub struct FakeUpstream {
    addr: SocketAddr,
    shared: Arc<Shared>,
    shutdown: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for FakeUpstream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FakeUpstream").field("addr", &self.addr).finish_non_exhaustive()
    }
}

impl FakeUpstream {
    /// Starts on `127.0.0.1:0` (a free port).
    pub async fn start() -> FakeUpstream {
        let addr = SocketAddr::from(([127, 0, 0, 1], 0));
        Self::bind(addr).await.unwrap_or_else(|e| panic!("fake upstream: cannot bind {addr}: {e}"))
    }

    /// Starts on the caller's runtime instead of a thread of its own: for tests
    /// under tokio's paused clock, where the fake's scripted delays must pass in
    /// virtual time too, and where the runtime must see the fake's work (a thread
    /// of its own would look idle, and idle paused time jumps ahead).
    pub async fn start_local() -> FakeUpstream {
        let listener =
            TcpListener::bind(("127.0.0.1", 0)).await.unwrap_or_else(|e| panic!("fake upstream: cannot bind: {e}"));
        let addr = listener.local_addr().expect("bound address");
        let shared = Arc::new(Shared::default());
        let (shutdown, shutdown_rx) = oneshot::channel::<()>();
        let task_shared = Arc::clone(&shared);
        tokio::spawn(async move {
            tokio::select! {
                () = accept_loop(listener, task_shared) => {}
                _ = shutdown_rx => {}
            }
        });
        FakeUpstream { addr, shared, shutdown: Some(shutdown), thread: None }
    }

    /// Starts on a given address (the `fake-upstream` binary uses a fixed port).
    ///
    /// # Errors
    /// Binding the listener or starting the server thread failed.
    pub async fn bind(addr: SocketAddr) -> std::io::Result<FakeUpstream> {
        // Bound here, synchronously, so the port is accepting before `start` returns.
        let listener = StdTcpListener::bind(addr)?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared::default());
        let (shutdown, shutdown_rx) = oneshot::channel::<()>();
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
        let thread_shared = Arc::clone(&shared);
        let thread = std::thread::Builder::new().name(format!("fake-upstream-{}", addr.port())).spawn(move || {
            runtime.block_on(async move {
                let listener = match TcpListener::from_std(listener) {
                    Ok(listener) => listener,
                    Err(e) => {
                        tracing::error!("fake upstream: listener: {e}");
                        return;
                    }
                };
                tokio::select! {
                    () = accept_loop(listener, thread_shared) => {}
                    _ = shutdown_rx => {}
                }
            });
            // Dropping the runtime here cancels every connection task: sockets close.
            drop(runtime);
        })?;
        Ok(FakeUpstream { addr, shared, shutdown: Some(shutdown), thread: Some(thread) })
    }

    /// The bound address.
    #[must_use]
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT/v1`: what an OpenAI client takes as its base URL.
    #[must_use]
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// Queues an answer for the next request that has none yet (any path).
    pub fn push(&self, response: Scripted) {
        self.shared.lock().queue.push_back(response);
    }

    /// How many pushed answers no request has consumed yet.
    #[must_use]
    pub fn queued(&self) -> usize {
        self.shared.lock().queue.len()
    }

    /// Drops the pushed answers no request has consumed yet (the next request
    /// gets the default answer); answers how many were dropped.
    pub fn clear_queue(&self) -> usize {
        let mut state = self.shared.lock();
        let dropped = state.queue.len();
        state.queue.clear();
        dropped
    }

    /// Every request so far, in arrival order.
    #[must_use]
    pub fn received(&self) -> Vec<Received> {
        self.shared.lock().received.clone()
    }

    /// Limits unscripted requests to `rpm` per minute the way OpenAI does (a
    /// continuously refilled bucket, full at first); the excess is answered 429.
    pub fn limit_requests_per_minute(&self, rpm: u64) {
        let capacity = rpm as f64;
        self.shared.lock().limiter =
            Some(RequestLimiter { capacity, level: capacity, updated: std::time::Instant::now() });
    }

    /// Makes every unscripted answer take `delay` (scripted answers keep their own).
    pub fn delay_answers(&self, delay: Duration) {
        self.shared.lock().answer_delay = delay;
    }

    /// Makes every unscripted (non-streamed) chat answer `tokens` tokens long,
    /// the way a model that has that much to say answers: a request whose
    /// `max_tokens` is smaller gets exactly `max_tokens` tokens and
    /// `finish_reason: "length"`; one whose `max_tokens` is at least `tokens`
    /// gets the whole answer and `finish_reason: "stop"` (so `max_tokens` equal
    /// to `tokens` is an answer that fills its budget and still stops
    /// naturally). `prompt_tokens` is the echo's estimate.
    pub fn write_answers_of(&self, tokens: u64) {
        self.shared.lock().answer_tokens = Some(tokens);
    }

    /// The most unscripted requests answered at once so far.
    #[must_use]
    pub fn most_concurrent(&self) -> usize {
        self.shared.lock().most_answering
    }

    /// How many requests the limiter answered 429.
    #[must_use]
    pub fn rate_limited_count(&self) -> usize {
        self.shared.lock().rate_limited
    }

    /// How many chunks of scripted streams were handed to the connection so far.
    #[must_use]
    pub fn chunks_sent(&self) -> usize {
        self.shared.lock().chunks_sent
    }

    /// How many scripted answers were cut short because the client closed the
    /// connection while the fake was still preparing them (during a `Delay`),
    /// e.g. a gateway cancelling a request at its deadline. A script ending in
    /// `Drop` is closed by the fake itself and never counts.
    #[must_use]
    pub fn abandoned(&self) -> usize {
        self.shared.lock().abandoned
    }

    /// How many scripted answers were cut: their body dropped before its end because
    /// the client (the gateway) closed the connection mid-answer.
    #[must_use]
    pub fn answers_cut(&self) -> usize {
        self.shared.lock().answers_cut
    }

    /// How many requests arrived so far.
    #[must_use]
    pub fn request_count(&self) -> usize {
        self.shared.lock().received.len()
    }

    /// Waits until at least `count` requests arrived and returns them all; panics after
    /// `timeout`. For requests sent by another process (the gateway) or task.
    pub async fn wait_for_requests(&self, count: usize, timeout: Duration) -> Vec<Received> {
        let deadline = Instant::now() + timeout;
        loop {
            let received = self.received();
            if received.len() >= count {
                return received;
            }
            assert!(
                Instant::now() < deadline,
                "fake upstream: expected {count} requests within {timeout:?}, got {}",
                received.len()
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

impl Drop for FakeUpstream {
    fn drop(&mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

async fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    let router = echo_router();
    loop {
        match listener.accept().await {
            Ok((stream, _peer)) => {
                let _ = stream.set_nodelay(true);
                let (shared, router) = (Arc::clone(&shared), router.clone());
                tokio::spawn(serve_connection(stream, move |request, kill| {
                    let (shared, router) = (Arc::clone(&shared), router.clone());
                    async move { handle(request, &shared, router, &kill).await }
                }));
            }
            Err(e) => {
                // EMFILE and friends: back off instead of spinning.
                tracing::warn!("fake upstream: accept: {e}");
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    }
}

/// Serves one connection with `handle`, for every fake. A handler that fires the
/// `Notify` it is given (playing `Scripted::Drop`) has the connection abandoned
/// without hyper writing anything.
pub(crate) async fn serve_connection<H, F>(stream: TcpStream, handle: H)
where
    H: Fn(Request<Incoming>, Arc<Notify>) -> F + Send + 'static,
    F: Future<Output = Response<Body>> + Send + 'static,
{
    let kill = Arc::new(Notify::new());
    let service_kill = Arc::clone(&kill);
    let service = hyper::service::service_fn(move |request: Request<Incoming>| {
        let response = handle(request, Arc::clone(&service_kill));
        async move { Ok::<_, Infallible>(response.await) }
    });
    let mut connection = hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(stream), service);
    tokio::select! {
        result = &mut connection => {
            if let Err(e) = result {
                tracing::debug!("fake server: connection ended: {e}");
            }
        }
        () = kill.notified() => {
            // A zero linger turns the close into a RST: the client sees a reset, as when an
            // upstream process dies mid-request, rather than a tidy end of stream.
            let stream = connection.into_parts().io.into_inner();
            let _ = stream.set_zero_linger();
            drop(stream);
        }
    }
}

async fn handle(request: Request<Incoming>, shared: &Arc<Shared>, router: Router, kill: &Notify) -> Response<Body> {
    let (parts, body) = request.into_parts();
    let body = match body.collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(e) => {
            // The client went away mid-body; nothing sensible to answer.
            tracing::debug!("fake upstream: reading request body: {e}");
            kill.notify_one();
            return std::future::pending().await;
        }
    };
    let received = Received {
        method: parts.method.to_string(),
        path: parts.uri.path().to_owned(),
        query: parts.uri.query().map(str::to_owned),
        headers: parts
            .headers
            .iter()
            .map(|(name, value)| (name.as_str().to_owned(), String::from_utf8_lossy(value.as_bytes()).into_owned()))
            .collect(),
        body: body.clone(),
    };
    tracing::debug!(method = %received.method, path = %received.path, "fake upstream: request");
    let (seq, script) = shared.record(received);
    match script {
        Some(script) => {
            // Dropped with the connection (hyper drops a pending answer when its
            // client closes) unless the answer was played whole.
            let mut watch = AbandonWatch { shared: Arc::clone(shared), armed: !ends_in_drop(&script) };
            let counted = Arc::clone(shared);
            let response = play(script, kill, Some(Arc::new(move || counted.lock().chunks_sent += 1))).await;
            watch.armed = false;
            let shared = Arc::clone(shared);
            response.map(|body| Body::new(CutWatch { inner: body, shared: Some(shared) }))
        }
        None => {
            let _answering = Answering::start(shared);
            let (delay, answer_tokens) = {
                let state = shared.lock();
                (state.answer_delay, state.answer_tokens)
            };
            if !delay.is_zero() {
                tokio::time::sleep(delay).await;
            }
            let mut request = Request::from_parts(parts, Body::from(body));
            request.extensions_mut().insert(RequestSeq(seq));
            request.extensions_mut().insert(AnswerTokens(answer_tokens));
            match router.oneshot(request).await {
                Ok(response) => response,
                Err(never) => match never {},
            }
        }
    }
}

/// Counts an unscripted request while it is answered (see [`FakeUpstream::most_concurrent`]).
struct Answering(Arc<Shared>);

impl Answering {
    fn start(shared: &Arc<Shared>) -> Self {
        let mut state = shared.lock();
        state.answering += 1;
        state.most_answering = state.most_answering.max(state.answering);
        drop(state);
        Self(Arc::clone(shared))
    }
}

impl Drop for Answering {
    fn drop(&mut self) {
        self.0.lock().answering -= 1;
    }
}

/// Counts a scripted answer abandoned by its client (see [`FakeUpstream::abandoned`]).
struct AbandonWatch {
    shared: Arc<Shared>,
    armed: bool,
}

impl Drop for AbandonWatch {
    fn drop(&mut self) {
        if self.armed {
            self.shared.lock().abandoned += 1;
        }
    }
}

/// A scripted answer's body that counts, in [`FakeUpstream::answers_cut`], being
/// dropped before its end.
struct CutWatch {
    inner: Body,
    /// Taken at the body's end, so a body that ended is not counted.
    shared: Option<Arc<Shared>>,
}

impl http_body::Body for CutWatch {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Bytes>, axum::Error>>> {
        let polled = http_body::Body::poll_frame(std::pin::Pin::new(&mut self.inner), cx);
        if let std::task::Poll::Ready(None) = polled {
            self.shared = None;
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        http_body::Body::is_end_stream(&self.inner)
    }

    fn size_hint(&self) -> http_body::SizeHint {
        http_body::Body::size_hint(&self.inner)
    }
}

impl Drop for CutWatch {
    fn drop(&mut self) {
        if let Some(shared) = self.shared.take()
            && !http_body::Body::is_end_stream(&self.inner)
        {
            shared.lock().answers_cut += 1;
        }
    }
}

fn ends_in_drop(script: &Scripted) -> bool {
    match script {
        Scripted::Drop => true,
        Scripted::Delay { then, .. } => ends_in_drop(then),
        Scripted::Respond { .. }
        | Scripted::Stream { .. }
        | Scripted::StreamThenDrop { .. }
        | Scripted::StreamGated { .. } => false,
    }
}

/// Called once for each chunk of a scripted stream the connection takes.
pub(crate) type ChunkCounter = Arc<dyn Fn() + Send + Sync>;

/// Plays a script as the answer, for every fake: waits, a reset (by firing `kill`), a
/// whole response, a stream (each chunk counted by `counter`), a stream then a reset.
pub(crate) async fn play(mut script: Scripted, kill: &Notify, counter: Option<ChunkCounter>) -> Response<Body> {
    loop {
        match script {
            Scripted::Delay { delay, then } => {
                tokio::time::sleep(delay).await;
                script = *then;
            }
            Scripted::Drop => {
                kill.notify_one();
                return std::future::pending().await;
            }
            Scripted::Respond { status, headers, body } => return build_response(status, &headers, Body::from(body)),
            Scripted::Stream { status, headers, chunks, pause } => {
                return build_response(status, &headers, chunked_body(chunks, pause, counter));
            }
            Scripted::StreamThenDrop { status, headers, chunks } => {
                return build_response(status, &headers, cut_body(chunks));
            }
            Scripted::StreamGated { status, headers, before, gate, opened, after } => {
                return build_response(status, &headers, gated_body(before, gate, opened, after));
            }
        }
    }
}

/// The chunks as a body, pausing between them; each chunk taken is counted in
/// `counter` when given.
fn chunked_body(chunks: Vec<Bytes>, pause: Duration, counter: Option<ChunkCounter>) -> Body {
    let start = (chunks.into_iter(), true, counter);
    let stream = futures_util::stream::unfold(start, move |(mut chunks, first, counter)| async move {
        let chunk = chunks.next()?;
        if !first && !pause.is_zero() {
            tokio::time::sleep(pause).await;
        }
        if let Some(count) = &counter {
            count();
        }
        Some((Ok::<Bytes, Infallible>(chunk), (chunks, false, counter)))
    });
    Body::from_stream(stream)
}

/// `before`, then (once `gate` exists, or [`GATE_WAIT`] passed) `after`.
fn gated_body(
    before: Vec<Bytes>,
    gate: std::path::PathBuf,
    opened: Arc<std::sync::atomic::AtomicBool>,
    after: Vec<Bytes>,
) -> Body {
    let first = futures_util::stream::iter(before.into_iter().map(Ok::<Bytes, Infallible>));
    let rest = futures_util::stream::once(async move {
        let waited = tokio::time::Instant::now();
        while waited.elapsed() < GATE_WAIT {
            if gate.exists() {
                opened.store(true, std::sync::atomic::Ordering::SeqCst);
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        futures_util::stream::iter(after.into_iter().map(Ok::<Bytes, Infallible>))
    });
    Body::from_stream(futures_util::StreamExt::chain(first, futures_util::StreamExt::flatten(rest)))
}

/// The chunks, then a body error: hyper aborts the connection mid-body. The error
/// comes a moment after the last chunk, so the chunks are on the wire first.
fn cut_body(chunks: Vec<Bytes>) -> Body {
    let chunks = futures_util::stream::iter(chunks.into_iter().map(Ok));
    let cut = futures_util::stream::once(async {
        tokio::time::sleep(Duration::from_millis(100)).await;
        Err(std::io::Error::other("dropped on purpose"))
    });
    Body::from_stream(futures_util::StreamExt::chain(chunks, cut))
}

fn build_response(status: u16, headers: &[(String, String)], body: Body) -> Response<Body> {
    let mut builder = Response::builder().status(status);
    for (name, value) in headers {
        builder = builder.header(name.as_str(), value.as_str());
    }
    builder.body(body).unwrap_or_else(|e| {
        // A broken script is a test bug: say so loudly in the answer itself.
        let mut response = Response::new(Body::from(format!("fake server: invalid scripted response: {e}")));
        *response.status_mut() = StatusCode::INTERNAL_SERVER_ERROR;
        response
    })
}

// ---------------------------------------------------------------------------------------
// Default behaviour: an OpenAI that echoes
// ---------------------------------------------------------------------------------------

/// Model ids the fake lists on `GET /v1/models`.
pub const LISTED_MODELS: &[&str] = &["gpt-4o-mini", "gpt-4o", "gpt-4.1", "text-embedding-3-small"];

fn echo_router() -> Router {
    Router::new()
        .route("/v1/chat/completions", post(echo_chat))
        .route("/v1/embeddings", post(echo_embeddings))
        .route("/v1/rerank", post(echo_rerank))
        .route("/v1/decisions", post(echo_decisions))
        .route("/v1/models", get(list_models))
        .fallback(invalid_url)
        .method_not_allowed_fallback(invalid_url)
}

async fn invalid_url(method: Method, uri: Uri) -> Response<Body> {
    openai_error_response(
        StatusCode::NOT_FOUND,
        openai_wire::error_body("invalid_request_error", None, None, &format!("Invalid URL ({method} {})", uri.path())),
    )
}

async fn list_models() -> Response<Body> {
    json_answer(StatusCode::OK, &openai_wire::models_body(LISTED_MODELS), openai_wire::REQUEST_ID)
}

fn json_answer(status: StatusCode, body: &Value, request_id: &str) -> Response<Body> {
    build_response(status.as_u16(), &openai_wire::json_headers(request_id), Body::from(body.to_string()))
}

fn openai_error_response(status: StatusCode, body: Value) -> Response<Body> {
    json_answer(status, &body, openai_wire::REQUEST_ID)
}

/// The text of a message `content`: a string, or the `text` parts of an array joined with a
/// space; other parts (images, audio) contribute nothing.
#[must_use]
pub fn content_text(content: &Value) -> String {
    match content {
        Value::String(text) => text.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter(|part| part.get("type").and_then(Value::as_str) == Some("text"))
            .filter_map(|part| part.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join(" "),
        _ => String::new(),
    }
}

/// What the echo answers for a request body: the reply text and the (prompt, completion)
/// token estimates. Public so tests can predict the fake's answer exactly.
#[must_use]
pub fn echo_reply(request: &Value) -> (String, u64, u64) {
    let messages = request.get("messages").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
    let all_text: String = messages.iter().filter_map(|m| m.get("content")).map(content_text).collect();
    let last_user = messages
        .iter()
        .rev()
        .find(|m| m.get("role").and_then(Value::as_str) == Some("user"))
        .and_then(|m| m.get("content"))
        .map(content_text)
        .unwrap_or_default();
    let reply = format!("echo: {last_user}");
    let completion = openai_wire::approx_tokens(&reply);
    (reply, openai_wire::approx_tokens(&all_text), completion)
}

async fn echo_chat(
    Extension(RequestSeq(seq)): Extension<RequestSeq>,
    Extension(AnswerTokens(answer_tokens)): Extension<AnswerTokens>,
    body: Bytes,
) -> Response<Body> {
    let Ok(request) = serde_json::from_slice::<Value>(&body) else {
        return unparseable_json();
    };
    let Some(model) = request.get("model").and_then(Value::as_str) else {
        return missing_model();
    };
    if !request.get("messages").is_some_and(Value::is_array) {
        return openai_error_response(
            StatusCode::BAD_REQUEST,
            openai_wire::error_body(
                "invalid_request_error",
                Some("missing_required_parameter"),
                Some("messages"),
                "Missing required parameter: 'messages'.",
            ),
        );
    }
    let (reply, prompt_tokens, completion_tokens) = echo_reply(&request);
    let usage = openai_wire::usage_json(prompt_tokens, completion_tokens, 0, 0);
    let id = format!("chatcmpl-weirfake{seq:020}");
    let request_id = format!("req_{seq:032x}");
    let streaming = request.get("stream").and_then(Value::as_bool) == Some(true);
    if !streaming && request.get("logprobs").and_then(Value::as_bool) == Some(true) {
        let top = request.get("top_logprobs").and_then(Value::as_u64).unwrap_or(0);
        let body = logprobs_completion(&id, model, top, prompt_tokens);
        return json_answer(StatusCode::OK, &body, &request_id);
    }
    if let (false, Some(length)) = (streaming, answer_tokens) {
        let body = answer_of(&request, length, prompt_tokens, &id, model);
        return json_answer(StatusCode::OK, &body, &request_id);
    }
    if !streaming {
        let body = openai_wire::completion_body(&id, model, openai_wire::text_message(&reply), "stop", usage);
        return json_answer(StatusCode::OK, &body, &request_id);
    }
    let include_usage = request.pointer("/stream_options/include_usage").and_then(Value::as_bool) == Some(true);
    // Word-sized deltas, like a real model's, so relays that buffer whole bodies show up.
    let pieces: Vec<&str> = reply.split_inclusive(' ').collect();
    let frames = openai_wire::sse_text_frames(&id, model, &pieces, "stop", include_usage.then_some(usage));
    build_response(200, &openai_wire::sse_headers(&request_id), chunked_body(frames, Duration::ZERO, None))
}

/// An answer `length` tokens long (one word of four characters per token),
/// cut at the request's `max_tokens` (or `max_completion_tokens`) with
/// `finish_reason: "length"` when that is smaller.
fn answer_of(request: &Value, length: u64, prompt_tokens: u64, id: &str, model: &str) -> Value {
    let asked = ["max_tokens", "max_completion_tokens"].iter().find_map(|field| request.get(*field)?.as_u64());
    let (tokens, finish_reason) = match asked {
        Some(asked) if asked < length => (asked, "length"),
        _ => (length, "stop"),
    };
    let text = vec!["word"; usize::try_from(tokens).unwrap_or(0)].join(" ");
    let usage = openai_wire::usage_json(prompt_tokens, tokens, 0, 0);
    openai_wire::completion_body(id, model, openai_wire::text_message(&text), finish_reason, usage)
}

/// The fake's answer to a request with `logprobs: true`: one output token, `A`,
/// its candidates [`LOGPROBS_CANDIDATES`] cut to `top_logprobs`, billed
/// `prompt_tokens` and one completion token.
fn logprobs_completion(id: &str, model: &str, top: u64, prompt_tokens: u64) -> Value {
    let listed: Vec<Value> = LOGPROBS_CANDIDATES
        .iter()
        .take(usize::try_from(top).unwrap_or(usize::MAX))
        .map(|(token, p)| serde_json::json!({"token": token, "logprob": p.ln(), "bytes": token.as_bytes()}))
        .collect();
    let (first, p) = LOGPROBS_CANDIDATES[0];
    let mut body = openai_wire::completion_body(
        id,
        model,
        openai_wire::text_message(first),
        "length",
        openai_wire::usage_json(prompt_tokens, 1, 0, 0),
    );
    body["choices"][0]["logprobs"] = serde_json::json!({"content": [
        {"token": first, "logprob": p.ln(), "bytes": first.as_bytes(), "top_logprobs": listed}
    ]});
    body
}

/// The first token's candidates the fake lists, most likely first.
pub const LOGPROBS_CANDIDATES: [(&str, f64); 3] = [("A", 0.7), ("B", 0.2), ("C", 0.1)];

/// OpenAI's 400 for a body that is not JSON.
fn unparseable_json() -> Response<Body> {
    openai_error_response(
        StatusCode::BAD_REQUEST,
        openai_wire::error_body(
            "invalid_request_error",
            None,
            None,
            "We could not parse the JSON body of your request. (HINT: This likely means \
             you aren't using your HTTP library correctly. The OpenAI API expects a JSON \
             payload, but what was sent was not valid JSON.)",
        ),
    )
}

fn missing_model() -> Response<Body> {
    openai_error_response(
        StatusCode::BAD_REQUEST,
        openai_wire::error_body("invalid_request_error", None, None, "you must provide a model parameter"),
    )
}

fn invalid_param(param: &str, message: &str) -> Response<Body> {
    openai_error_response(
        StatusCode::BAD_REQUEST,
        openai_wire::error_body("invalid_request_error", None, Some(param), message),
    )
}

// ---------------------------------------------------------------------------------------
// Default behaviour: embeddings and rankings derived from the text
// ---------------------------------------------------------------------------------------

/// The width of the fake's embeddings when no `dimensions` is asked for (that of
/// `text-embedding-3-small`); `dimensions` may ask for 1 up to it.
pub const NATIVE_EMBEDDING_WIDTH: usize = 1536;

/// The most inputs one embeddings request may carry, as at OpenAI.
pub const MAX_EMBEDDING_INPUTS: usize = 2048;

/// The fake's embedding of `text` at `dimensions` numbers: a unit vector derived from the
/// text alone (FNV-1a of its bytes seeds a SplitMix64 stream of numbers in [-1, 1)), so
/// inputs are told apart and their order checked. A narrower width is the leading part of
/// the native vector renormalized, as a Matryoshka model (`text-embedding-3-*`) answers.
/// Public so a test can predict the fake's answer exactly.
#[must_use]
pub fn fake_embedding(text: &str, dimensions: usize) -> Vec<f32> {
    let mut state = text
        .bytes()
        .fold(0xcbf2_9ce4_8422_2325_u64, |hash, byte| (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3));
    let mut next = || {
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    };
    let native: Vec<f64> =
        (0..NATIVE_EMBEDDING_WIDTH).map(|_| (next() >> 11) as f64 / (1_u64 << 53) as f64 * 2.0 - 1.0).collect();
    let leading = &native[..dimensions.min(NATIVE_EMBEDDING_WIDTH)];
    let norm = leading.iter().map(|x| x * x).sum::<f64>().sqrt();
    leading.iter().map(|x| (x / norm) as f32).collect()
}

/// The fake's relevance of `document` to `query`: the share of the query's distinct words
/// (lowercase, split at anything not alphanumeric) that the document contains, in [0, 1].
/// Public so a test can predict the fake's ranking exactly.
#[must_use]
pub fn fake_relevance(query: &str, document: &str) -> f64 {
    let words = |text: &str| -> std::collections::BTreeSet<String> {
        text.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()).map(str::to_lowercase).collect()
    };
    let (query, document) = (words(query), words(document));
    if query.is_empty() {
        return 0.0;
    }
    query.intersection(&document).count() as f64 / query.len() as f64
}

/// What the fake ranks for a query: every document's `(index, relevance)`, best first
/// (ties by index), cut to `top_n` when it is given and not 0 (vLLM's "all").
#[must_use]
pub fn fake_ranking(query: &str, documents: &[String], top_n: Option<usize>) -> Vec<(u32, f64)> {
    let mut ranked: Vec<(u32, f64)> =
        (0_u32..).zip(documents).map(|(index, document)| (index, fake_relevance(query, document))).collect();
    ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    if let Some(top_n) = top_n.filter(|n| *n > 0) {
        ranked.truncate(top_n);
    }
    ranked
}

/// The texts of `input`: a string or an array of strings, non-empty, each non-empty, at
/// most [`MAX_EMBEDDING_INPUTS`] (token arrays are valid at OpenAI but never sent by Weir).
fn embedding_inputs(input: Option<&Value>) -> Option<Vec<String>> {
    let texts = match input? {
        Value::String(text) => vec![text.clone()],
        Value::Array(items) => items.iter().map(|item| item.as_str().map(str::to_owned)).collect::<Option<_>>()?,
        _ => return None,
    };
    let valid = !texts.is_empty() && texts.len() <= MAX_EMBEDDING_INPUTS && texts.iter().all(|t| !t.is_empty());
    valid.then_some(texts)
}

/// OpenAI's `/v1/embeddings`: one [`fake_embedding`] per input, at `dimensions` when
/// given, as floats or base64 (`encoding_format`); `usage.prompt_tokens` is the sum of
/// `approx_tokens` of the inputs; `model` echoes the request's.
async fn echo_embeddings(Extension(RequestSeq(seq)): Extension<RequestSeq>, body: Bytes) -> Response<Body> {
    let Ok(request) = serde_json::from_slice::<Value>(&body) else {
        return unparseable_json();
    };
    let Some(model) = request.get("model").and_then(Value::as_str) else {
        return missing_model();
    };
    let Some(inputs) = embedding_inputs(request.get("input")) else {
        return invalid_param(
            "input",
            "'$.input' is invalid. Please check the API reference: https://platform.openai.com/docs/api-reference.",
        );
    };
    let dimensions = match request.get("dimensions") {
        None | Some(Value::Null) => NATIVE_EMBEDDING_WIDTH,
        Some(_) if model.starts_with("text-embedding-ada-") => {
            return invalid_param("dimensions", "This model does not support specifying dimensions.");
        }
        Some(value) => match value.as_u64().and_then(|d| usize::try_from(d).ok()) {
            Some(d) if (1..=NATIVE_EMBEDDING_WIDTH).contains(&d) => d,
            _ => {
                return invalid_param(
                    "dimensions",
                    &format!(
                        "Invalid value for 'dimensions' = {value}. Must be between 1 and {NATIVE_EMBEDDING_WIDTH}."
                    ),
                );
            }
        },
    };
    let encoding = match request.get("encoding_format") {
        None | Some(Value::Null) => openai_wire::Encoding::Float,
        Some(format) => match format.as_str() {
            Some("float") => openai_wire::Encoding::Float,
            Some("base64") => openai_wire::Encoding::Base64,
            _ => {
                return invalid_param(
                    "encoding_format",
                    "Invalid value for 'encoding_format': must be 'float' or 'base64'.",
                );
            }
        },
    };
    let vectors: Vec<Vec<f32>> = inputs.iter().map(|text| fake_embedding(text, dimensions)).collect();
    let tokens = inputs.iter().map(|text| openai_wire::approx_tokens(text)).sum();
    let answer = openai_wire::embeddings_body(model, &vectors, encoding, tokens);
    json_answer(StatusCode::OK, &answer, &format!("req_{seq:032x}"))
}

/// vLLM's `/v1/rerank`: `query` and `documents` required, `model` optional, `top_n`
/// (absent or 0: all) and `return_documents` (default true) honoured, ranked by
/// [`fake_ranking`]. `usage.prompt_tokens` counts each (query, document) pair a
/// cross-encoder reads: the sum over documents of `approx_tokens(query) +
/// approx_tokens(document)`. Errors in vLLM's envelope (integer `code`), since OpenAI
/// itself has no such route.
/// The decision wire's `/decisions` (see [`crate::decision_wire`]): the
/// fake's deterministic answer, or a 400 in the wire's error body for a
/// request that is not the wire's.
async fn echo_decisions(body: Bytes) -> Response<Body> {
    let answer =
        serde_json::from_slice::<Value>(&body).ok().and_then(|request| decision_wire::fake_decision(&request, &body));
    let (status, body) = match answer {
        Some(answer) => (200, answer),
        None => (400, serde_json::json!({"error": {"type": "invalid_request", "message": "not a decision request"}})),
    };
    build_response(status, &[("content-type".to_owned(), "application/json".to_owned())], Body::from(body.to_string()))
}

async fn echo_rerank(Extension(RequestSeq(seq)): Extension<RequestSeq>, body: Bytes) -> Response<Body> {
    let refuse = |message: &str| {
        build_response(
            400,
            &[("content-type".to_owned(), "application/json".to_owned())],
            Body::from(openai_wire::vllm_error_body(400, message).to_string()),
        )
    };
    let Ok(request) = serde_json::from_slice::<Value>(&body) else {
        return refuse("the request body is not JSON");
    };
    let model = request.get("model").and_then(Value::as_str).unwrap_or(openai_wire::RERANK_MODEL);
    let Some(query) = request.get("query").and_then(Value::as_str) else {
        return refuse("`query` must be a string");
    };
    let documents: Option<Vec<String>> = request
        .get("documents")
        .and_then(Value::as_array)
        .and_then(|items| items.iter().map(|item| item.as_str().map(str::to_owned)).collect());
    let Some(documents) = documents else {
        return refuse("`documents` must be a list of strings");
    };
    let top_n = match request.get("top_n") {
        None | Some(Value::Null) => None,
        Some(value) => match value.as_u64().and_then(|n| usize::try_from(n).ok()) {
            Some(n) => Some(n),
            None => return refuse("`top_n` must be a non-negative integer"),
        },
    };
    let return_documents = request.get("return_documents").and_then(Value::as_bool).unwrap_or(true);
    let ranking = fake_ranking(query, &documents, top_n);
    let query_tokens = openai_wire::approx_tokens(query);
    let tokens = documents.iter().map(|document| query_tokens + openai_wire::approx_tokens(document)).sum();
    let mut answer =
        openai_wire::rerank_body(model, &ranking, return_documents.then_some(documents.as_slice()), tokens);
    answer["id"] = Value::from(format!("rerank-weirfake{seq:020}"));
    let headers = [("content-type".to_owned(), "application/json".to_owned())];
    build_response(200, &headers, Body::from(answer.to_string()))
}
