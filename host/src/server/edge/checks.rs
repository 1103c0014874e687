//! The checks every request passes before a route sees it, in this order:
//!
//! ```text
//! (draining) /health ─► Origin ─► (POST) content-type ─► (POST) draining / max_in_flight ─► Content-Length
//!   503 draining      403          415                   503 gateway_busy               413
//!   ─► body read (max_body_bytes, body_timeout) ─► route ─► (POST) the call's permit rides on the response body
//!        413 / 408 / 400
//! ```
//!
//! Cheap refusals come first, so a refused request never costs a body read, and
//! nothing refused here has reached admission or an upstream. A refusal answers
//! in the route's own envelope (Anthropic's on `/v1/messages`, OpenAI's elsewhere).

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
use http_body_util::{BodyExt, LengthLimitError, Limited};
use hyper::body::Incoming;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tower::ServiceExt;
use tower_http::cors::{AllowHeaders, AllowOrigin, CorsLayer};

use super::holding::Holding;
use crate::catalog::ServerSettings;
use crate::error::Category;
use crate::server::ApiError;
use crate::server::anthropic::AnthropicError;

/// The route whose envelope a refusal is written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Dialect {
    OpenAi,
    Anthropic,
}

impl Dialect {
    fn of(path: &str) -> Self {
        if path == "/v1/messages" { Self::Anthropic } else { Self::OpenAi }
    }

    fn refuse(self, category: Category, message: String) -> Response {
        let error = ApiError::new(category, message);
        match self {
            Self::OpenAi => error.into_response(),
            Self::Anthropic => AnthropicError::from(error).into_response(),
        }
    }
}

/// The router behind the checks, and what the checks share across connections.
pub(super) struct Edge {
    router: Router,
    settings: ServerSettings,
    in_flight: Arc<Semaphore>,
    draining: AtomicBool,
}

impl Edge {
    pub(super) fn new(router: Router, settings: ServerSettings) -> Self {
        // The body is read here, under `max_body_bytes`; axum's own 2 MB default
        // would refuse real images and PDFs in plain text.
        let mut router = router.layer(DefaultBodyLimit::disable());
        if let Some(cors) = cors_layer(&settings) {
            router = router.layer(cors);
        }
        let in_flight = Arc::new(Semaphore::new(settings.max_in_flight() as usize));
        Self { router, settings, in_flight, draining: AtomicBool::new(false) }
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
    pub(super) async fn handle<E: Send + Unpin + 'static>(&self, request: Request<Incoming>, end: E) -> Response {
        if self.draining() && request.method() == Method::GET && request.uri().path() == "/health" {
            return self.finish(draining_health(), (end, None));
        }
        let dialect = Dialect::of(request.uri().path());
        let (parts, body) = request.into_parts();
        let permit = match self.check_head(&parts) {
            Ok(permit) => permit,
            Err((category, message)) => return self.finish(dialect.refuse(category, message), (end, None)),
        };
        let body = match self.read_body(body).await {
            Ok(body) => body,
            Err((category, message)) => return self.finish(dialect.refuse(category, message), (end, None)),
        };
        let response = match self.router.clone().oneshot(Request::from_parts(parts, Body::from(body))).await {
            Ok(response) => response,
            Err(never) => match never {},
        };
        self.finish(response, (end, permit))
    }

    /// Everything decided from the head alone; a call (POST) gets its in-flight
    /// permit here.
    fn check_head(&self, parts: &Parts) -> Result<Option<OwnedSemaphorePermit>, (Category, String)> {
        if let Some(origin) = parts.headers.get(ORIGIN)
            && !self.settings.allows_origin(origin.as_bytes())
        {
            return Err((
                Category::ForbiddenOrigin,
                "requests from this browser origin are refused: it is not in the gateway's `cors_origins`".to_owned(),
            ));
        }
        let mut permit = None;
        if parts.method == Method::POST {
            if !is_json(parts.headers.get(CONTENT_TYPE)) {
                return Err((
                    Category::UnsupportedMediaType,
                    "the request body must be declared `content-type: application/json`".to_owned(),
                ));
            }
            if self.draining() {
                return Err((Category::GatewayBusy, "the gateway is shutting down; retry shortly".to_owned()));
            }
            let Ok(taken) = Arc::clone(&self.in_flight).try_acquire_owned() else {
                return Err((
                    Category::GatewayBusy,
                    format!(
                        "the gateway has {} calls in flight, its limit (`max_in_flight`); retry shortly",
                        self.settings.max_in_flight()
                    ),
                ));
            };
            permit = Some(taken);
        }
        let declared = parts.headers.get(CONTENT_LENGTH).and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
        if declared.is_some_and(|length| length > self.settings.max_body_bytes()) {
            return Err(too_large(self.settings.max_body_bytes()));
        }
        Ok(permit)
    }

    /// The whole body, within `max_body_bytes` (also when no length was
    /// declared) and within `body_timeout` of the head.
    async fn read_body(&self, body: Incoming) -> Result<axum::body::Bytes, (Category, String)> {
        let limit = self.settings.max_body_bytes();
        let limited = Limited::new(body, usize::try_from(limit).unwrap_or(usize::MAX));
        let timeout = self.settings.body_timeout();
        match tokio::time::timeout(timeout, limited.collect()).await {
            Ok(Ok(collected)) => Ok(collected.to_bytes()),
            Ok(Err(error)) if error.downcast_ref::<LengthLimitError>().is_some() => Err(too_large(limit)),
            Ok(Err(error)) => {
                tracing::info!(%error, "a client's request body could not be read");
                Err((Category::InvalidRequest, "the request body could not be read".to_owned()))
            }
            Err(_elapsed) => Err((
                Category::RequestTimeout,
                format!("the request body did not arrive within {} s", whole_secs(timeout)),
            )),
        }
    }

    /// The answer as sent: while draining it closes its connection; what it
    /// holds (a call's permit among it) is held until its body (a stream: the
    /// last event) is sent.
    fn finish<E: Send + Unpin + 'static>(
        &self,
        mut response: Response,
        held: (E, Option<OwnedSemaphorePermit>),
    ) -> Response {
        if self.draining() {
            response.headers_mut().insert(CONNECTION, HeaderValue::from_static("close"));
            if response.status() == StatusCode::SERVICE_UNAVAILABLE && !response.headers().contains_key(RETRY_AFTER) {
                response.headers_mut().insert(RETRY_AFTER, HeaderValue::from_static("1"));
            }
        }
        response.map(|body| Body::new(Holding::new(body, held)))
    }
}

/// `/health` while draining: the plain status a load balancer reads, not an
/// error envelope.
fn draining_health() -> Response {
    (StatusCode::SERVICE_UNAVAILABLE, axum::Json(serde_json::json!({"status": "draining"}))).into_response()
}

fn too_large(limit: u64) -> (Category, String) {
    (Category::PayloadTooLarge, format!("the request body is larger than the gateway's limit of {limit} bytes"))
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
        assert_eq!(Dialect::of("/v1/chat/completions"), Dialect::OpenAi);
        assert_eq!(Dialect::of("/health"), Dialect::OpenAi);
        let anthropic = Dialect::Anthropic.refuse(Category::PayloadTooLarge, "big".into());
        assert_eq!(anthropic.status(), 413);
        let openai = Dialect::OpenAi.refuse(Category::GatewayBusy, "busy".into());
        assert_eq!(openai.status(), 503);
        assert_eq!(openai.headers().get(RETRY_AFTER).unwrap(), "1");
    }
}
