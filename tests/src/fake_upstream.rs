//! A fake OpenAI Chat Completions server on loopback, scripted per request.
//!
//! Flow of one request: the connection task (one per TCP connection, hyper HTTP/1.1) reads the
//! whole request, records it in [`FakeUpstream::received`], then pops the next [`Scripted`]
//! answer from the FIFO queue. A scripted answer is played as is; with the queue empty the
//! request goes to an axum router that speaks OpenAI (echo completions, model list, 404s).
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

use crate::openai_wire;

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
}

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
            let mut request = Request::from_parts(parts, Body::from(body));
            request.extensions_mut().insert(RequestSeq(seq));
            match router.oneshot(request).await {
                Ok(response) => response,
                Err(never) => match never {},
            }
        }
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
        Scripted::Respond { .. } | Scripted::Stream { .. } | Scripted::StreamThenDrop { .. } => false,
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

async fn echo_chat(Extension(RequestSeq(seq)): Extension<RequestSeq>, body: Bytes) -> Response<Body> {
    let request: Value = match serde_json::from_slice(&body) {
        Ok(value) => value,
        Err(_) => {
            return openai_error_response(
                StatusCode::BAD_REQUEST,
                openai_wire::error_body(
                    "invalid_request_error",
                    None,
                    None,
                    "We could not parse the JSON body of your request. (HINT: This likely means \
                     you aren't using your HTTP library correctly. The OpenAI API expects a JSON \
                     payload, but what was sent was not valid JSON.)",
                ),
            );
        }
    };
    let Some(model) = request.get("model").and_then(Value::as_str) else {
        return openai_error_response(
            StatusCode::BAD_REQUEST,
            openai_wire::error_body("invalid_request_error", None, None, "you must provide a model parameter"),
        );
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
