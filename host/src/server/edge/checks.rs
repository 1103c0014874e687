//! The checks every request passes before a route sees it, in this order:
//!
//! ```text
//! (draining) /health ─► head size ─► Origin ─► (keyless, over loopback) Host ─► key ─┐
//!   503 draining        431         403        421                                 401, connection closed
//! ┌─────────────────────────────────────────────────────────────────────────────────┘
//! ├─ not a POST: the route, its body never read (the answer closes the connection if one was sent)
//! └─ POST: content-type ─► draining / max_in_flight ─► Content-Length ─► body read (max_body_bytes, body_timeout)
//!          415             503 gateway_busy              413               413 / 408 / 400
//!          ─► route ─► the call's permit rides on the response body
//! ```
//!
//! Everything up to the key is decided from the head alone, so a request that
//! is refused there, the unauthenticated one above all, never takes a call
//! slot nor costs a body read: it is answered at once and, when it has a body,
//! its connection is closed after the answer (a refused key's always is), so
//! the body's bytes are never read. Only an authenticated call's body is read,
//! under its limit as it arrives. Nothing refused here has reached admission
//! or an upstream. A refusal answers in the route's own envelope (Anthropic's
//! on `/v1/messages`, OpenAI's elsewhere).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::DefaultBodyLimit;
use axum::http::header::{CONNECTION, CONTENT_LENGTH, CONTENT_TYPE, ORIGIN, RETRY_AFTER};
use axum::http::request::Parts;
use axum::http::{HeaderName, HeaderValue, Method, Request, StatusCode};
use axum::response::{IntoResponse, Response};
use http_body::Body as _;
use http_body_util::{BodyExt, LengthLimitError, Limited};
use hyper::body::Incoming;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tower::ServiceExt;
use tower_http::cors::{AllowHeaders, AllowOrigin, CorsLayer};

use super::connection::{Handler, ResponseEnd};
use super::holding::Holding;
use crate::Weir;
use crate::catalog::ServerSettings;
use crate::failure::Category;
use crate::server::ApiError;
use crate::server::auth;
use crate::server::error::Dialect;

/// The largest request head accepted: the request line and the headers, each
/// counted as `name: value` and its line end (the spaces around a value, which
/// are not kept, are not counted). hyper's read buffer is exactly this size,
/// so hyper never refuses a head within it; a larger head hyper happened to
/// read whole is refused here.
pub(super) const MAX_HEAD_BYTES: usize = 64 << 10;

/// The router behind the checks, and what the checks share across connections.
pub(super) struct Edge {
    weir: Weir,
    router: Router,
    settings: ServerSettings,
    in_flight: Arc<Semaphore>,
    draining: AtomicBool,
}

impl Edge {
    pub(super) fn new(weir: Weir, settings: ServerSettings) -> Self {
        // The body is read here, under `max_body_bytes`; axum's own 2 MB default
        // would refuse real images and PDFs in plain text.
        let mut router = crate::server::router(weir.clone()).layer(DefaultBodyLimit::disable());
        if let Some(cors) = cors_layer(&settings) {
            router = router.layer(cors);
        }
        let in_flight = Arc::new(Semaphore::new(settings.max_in_flight() as usize));
        Self { weir, router, settings, in_flight, draining: AtomicBool::new(false) }
    }

    /// From now on `/health` answers 503 `draining`, new calls are refused and
    /// every answer closes its connection.
    pub(super) fn start_draining(&self) {
        self.draining.store(true, Ordering::SeqCst);
    }

    fn draining(&self) -> bool {
        self.draining.load(Ordering::SeqCst)
    }

    /// Calls (POST routes) in flight, streams included until their last byte.
    pub(super) fn calls_in_flight(&self) -> usize {
        (self.settings.max_in_flight() as usize).saturating_sub(self.in_flight.available_permits())
    }

    /// Resolves once no call is in flight. Only for a draining gateway: while
    /// it waits it holds the permits that free up, so no new call could start.
    pub(super) async fn no_calls_in_flight(&self) {
        // The semaphore is never closed.
        let _all = self.in_flight.acquire_many(self.settings.max_in_flight()).await;
    }

    /// One request through the checks and, if it passes, the route. The
    /// answer's body holds `end` (the connection's "the response ended") until
    /// its last frame is sent, with the call's permit.
    async fn handle(&self, request: Request<Incoming>, end: ResponseEnd, on_loopback: bool) -> Response {
        if self.draining() && request.method() == Method::GET && request.uri().path() == "/health" {
            return self.finish(draining_health(), (end, None));
        }
        let dialect = Dialect::of(request.uri().path());
        let (mut head, body) = request.into_parts();
        let has_body = !body.is_end_stream();
        // From here on the body is dropped unread unless a call's checks all pass.
        // One read of the ring decides both the `Host` check and the key.
        let keys = self.weir.keys();
        if let Err(refused) = check_head(&head, &self.settings, keys.is_empty() && on_loopback) {
            return self.refuse(dialect, refused, end, has_body);
        }
        match auth::authenticate(&self.weir, &keys, &head).await {
            Ok(authenticated) => head.extensions.insert(authenticated),
            // Nothing more is read from a caller without a valid key.
            Err(refused) => return self.refuse(dialect, refused, end, true),
        };
        if head.method != Method::POST {
            // Only a call's body is read: any other request's is not (the
            // route gets none), and the connection closes after the answer.
            drop(body);
            let response = self.route(head, Body::empty()).await;
            let response = self.finish(response, (end, None));
            return if has_body { closing(response) } else { response };
        }
        let permit = match self.check_call_head(&head) {
            Ok(permit) => permit,
            Err(refused) => return self.refuse(dialect, refused, end, has_body),
        };
        let body = match self.read_body(body).await {
            Ok(body) => body,
            // The body was read in part, or not at all.
            Err(refused) => return self.refuse(dialect, refused, end, true),
        };
        let response = self.route(head, Body::from(body)).await;
        self.finish(response, (end, Some(permit)))
    }

    /// A refusal in the route's envelope; `close`: the connection closes
    /// after it, so what is left of the request is never read.
    fn refuse(&self, dialect: Dialect, refused: ApiError, end: ResponseEnd, close: bool) -> Response {
        let response = self.finish(dialect.answer(refused), (end, None));
        if close { closing(response) } else { response }
    }

    async fn route(&self, head: Parts, body: Body) -> Response {
        match self.router.clone().oneshot(Request::from_parts(head, body)).await {
            Ok(response) => response,
            Err(never) => match never {},
        }
    }

    /// The checks of an authenticated call's head (a POST); it gets its
    /// in-flight permit here.
    fn check_call_head(&self, head: &Parts) -> Result<OwnedSemaphorePermit, ApiError> {
        if !is_json(head.headers.get(CONTENT_TYPE)) {
            return Err(ApiError::new(
                Category::UnsupportedMediaType,
                "the request body must be declared `content-type: application/json`".to_owned(),
            ));
        }
        if self.draining() {
            return Err(ApiError::new(Category::GatewayBusy, "the gateway is shutting down; retry shortly".to_owned()));
        }
        let Ok(permit) = Arc::clone(&self.in_flight).try_acquire_owned() else {
            return Err(ApiError::new(
                Category::GatewayBusy,
                format!(
                    "the gateway has {} calls in flight, its limit (`max_in_flight`); retry shortly",
                    self.settings.max_in_flight()
                ),
            ));
        };
        let declared = head.headers.get(CONTENT_LENGTH).and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
        if declared.is_some_and(|length| length > self.settings.max_body_bytes()) {
            return Err(too_large(self.settings.max_body_bytes()));
        }
        Ok(permit)
    }

    /// The whole body, within `max_body_bytes` (also when no length was
    /// declared: counted as it arrives, so no more than the limit is ever
    /// held) and within `body_timeout` of the head.
    async fn read_body(&self, body: Incoming) -> Result<axum::body::Bytes, ApiError> {
        let limit = self.settings.max_body_bytes();
        let limited = Limited::new(body, usize::try_from(limit).unwrap_or(usize::MAX));
        let timeout = self.settings.body_timeout();
        match tokio::time::timeout(timeout, limited.collect()).await {
            Ok(Ok(collected)) => Ok(collected.to_bytes()),
            Ok(Err(error)) if error.downcast_ref::<LengthLimitError>().is_some() => Err(too_large(limit)),
            Ok(Err(error)) => {
                tracing::info!(%error, "a client's request body could not be read");
                Err(ApiError::invalid_request("the request body could not be read"))
            }
            Err(_elapsed) => Err(ApiError::new(
                Category::RequestTimeout,
                format!("the request body did not arrive within {} s", whole_secs(timeout)),
            )),
        }
    }

    /// The answer as sent: while draining it closes its connection; what it
    /// holds (a call's permit among it) is held until its body (a stream: the
    /// last event) is sent.
    fn finish(&self, mut response: Response, held: (ResponseEnd, Option<OwnedSemaphorePermit>)) -> Response {
        if self.draining() {
            response.headers_mut().insert(CONNECTION, HeaderValue::from_static("close"));
            if response.status() == StatusCode::SERVICE_UNAVAILABLE && !response.headers().contains_key(RETRY_AFTER) {
                response.headers_mut().insert(RETRY_AFTER, HeaderValue::from_static("1"));
            }
        }
        response.map(|body| Body::new(Holding::new(body, held)))
    }
}

impl Handler for Edge {
    fn handle(
        &self,
        request: Request<Incoming>,
        end: ResponseEnd,
        on_loopback: bool,
    ) -> impl Future<Output = Response> + Send {
        Edge::handle(self, request, end, on_loopback)
    }
}

/// What every listener checks on a head before anything else: its size and,
/// when `loopback_only` (a keyless gateway reached over loopback), its `Host`
/// ([`super::host`]); then, on the gateway, a browser's `Origin`.
pub(super) fn check_head(head: &Parts, settings: &ServerSettings, loopback_only: bool) -> Result<(), ApiError> {
    if head_size(head) > MAX_HEAD_BYTES {
        return Err(ApiError::new(
            Category::HeadTooLarge,
            format!("the request line and headers are larger than the gateway's limit of {MAX_HEAD_BYTES} bytes"),
        ));
    }
    // The console's pages are the gateway's own: they answer their own origin
    // and no other, whatever `cors_origins` allows (see `console`).
    if crate::server::console::is_console_path(head.uri.path()) {
        if !crate::server::console::same_origin(head) {
            return Err(crate::server::console::foreign_origin());
        }
    } else if let Some(origin) = head.headers.get(ORIGIN)
        && !settings.allows_origin(origin.as_bytes())
    {
        return Err(ApiError::new(
            Category::ForbiddenOrigin,
            "requests from this browser origin are refused: it is not in the gateway's `cors_origins`".to_owned(),
        ));
    }
    if loopback_only && !super::host::names_loopback(head) {
        return Err(ApiError::new(
            Category::MisdirectedRequest,
            "this gateway has no keys and answers only requests addressed to the loopback \
             (`Host: localhost`, `127.0.0.1` or `[::1]`)"
                .to_owned(),
        ));
    }
    Ok(())
}

/// The head's size as [`MAX_HEAD_BYTES`] counts it: `METHOD target HTTP/1.1`,
/// each header's `name: value`, every line's CRLF and the blank line's.
fn head_size(head: &Parts) -> usize {
    const VERSION_AND_SPACES: usize = " HTTP/1.1".len() + 1;
    const CRLF: usize = 2;
    let uri = &head.uri;
    let target = uri.scheme_str().map_or(0, |scheme| scheme.len() + "://".len())
        + uri.authority().map_or(0, |authority| authority.as_str().len())
        + uri.path_and_query().map_or(0, |path| path.as_str().len());
    let request_line = head.method.as_str().len() + VERSION_AND_SPACES + target + CRLF;
    let headers: usize =
        head.headers.iter().map(|(name, value)| name.as_str().len() + ": ".len() + value.len() + CRLF).sum();
    request_line + headers + CRLF
}

/// `response`, marked to close its connection once sent: the request's body,
/// if any, is never read.
fn closing(mut response: Response) -> Response {
    response.headers_mut().insert(CONNECTION, HeaderValue::from_static("close"));
    response
}

/// `/health` while draining: the plain status a load balancer reads, not an
/// error envelope.
fn draining_health() -> Response {
    (StatusCode::SERVICE_UNAVAILABLE, axum::Json(serde_json::json!({"status": "draining"}))).into_response()
}

fn too_large(limit: u64) -> ApiError {
    ApiError::new(
        Category::PayloadTooLarge,
        format!("the request body is larger than the gateway's limit of {limit} bytes"),
    )
}

fn whole_secs(duration: Duration) -> u64 {
    duration.as_secs().max(1)
}

/// `application/json`, with any parameters (`; charset=utf-8`), any case.
fn is_json(content_type: Option<&HeaderValue>) -> bool {
    let Some(value) = content_type.and_then(|value| value.to_str().ok()) else { return false };
    let essence = value.split(';').next().unwrap_or_default().trim();
    essence.eq_ignore_ascii_case("application/json")
}

/// Preflight answers and `access-control-allow-origin` for the allowed origins;
/// none when no origin is allowed (every `Origin` is refused before it).
fn cors_layer(settings: &ServerSettings) -> Option<CorsLayer> {
    let origins: Vec<HeaderValue> =
        settings.cors_origins.iter().filter_map(|origin| HeaderValue::from_str(origin).ok()).collect();
    if origins.is_empty() {
        return None;
    }
    let exposed = ["x-weir-model", "x-weir-provider", "x-weir-attempts", "x-weir-max-tokens", "x-weir-latency-ms"]
        .map(HeaderName::from_static);
    Some(
        CorsLayer::new()
            .allow_origin(AllowOrigin::list(origins))
            .allow_methods([Method::GET, Method::POST])
            .allow_headers(AllowHeaders::mirror_request())
            .expose_headers(exposed.into_iter().chain([RETRY_AFTER]).collect::<Vec<_>>())
            .max_age(Duration::from_secs(600)),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_is_recognised_with_parameters_and_in_any_case() {
        let json = |value: &str| is_json(Some(&HeaderValue::from_str(value).unwrap()));
        assert!(json("application/json"));
        assert!(json("application/json; charset=utf-8"));
        assert!(json("Application/JSON;charset=UTF-8"));
        assert!(!json("text/plain"));
        assert!(!json("application/jsonx"));
        assert!(!json("application/x-www-form-urlencoded"));
        assert!(!json("multipart/form-data; boundary=x"));
        assert!(!is_json(None));
    }

    #[test]
    fn refusals_are_written_in_the_route_envelope() {
        assert_eq!(Dialect::of("/v1/messages"), Dialect::Anthropic);
        assert_eq!(Dialect::of("/v1/messages/count_tokens"), Dialect::Anthropic);
        assert_eq!(Dialect::of("/v1/chat/completions"), Dialect::OpenAi);
        assert_eq!(Dialect::of("/health"), Dialect::OpenAi);
        let anthropic = Dialect::Anthropic.answer(too_large(1));
        assert_eq!(anthropic.status(), 413);
        let openai = Dialect::OpenAi.answer(ApiError::new(Category::GatewayBusy, "busy".into()));
        assert_eq!(openai.status(), 503);
        assert_eq!(openai.headers().get(RETRY_AFTER).unwrap(), "1");
    }

    #[test]
    fn the_head_size_counts_the_request_line_and_each_header_as_sent() {
        let head = axum::http::Request::post("/v1/chat/completions?x=1")
            .header("host", "localhost")
            .header("content-type", "application/json")
            .body(())
            .unwrap()
            .into_parts()
            .0;
        let sent =
            "POST /v1/chat/completions?x=1 HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\n\r\n";
        assert_eq!(head_size(&head), sent.len());
    }
}
