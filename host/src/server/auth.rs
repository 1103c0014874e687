//! Who is calling the gateway: the key a request presents, checked against the
//! ring as of now. With no `[[key]]` configured the gateway is open (and `weir
//! serve` then binds loopback only, unless the operator says otherwise).
//!
//! Both official clients work unchanged: OpenAI's sends `Authorization: Bearer
//! <key>`, Anthropic's `x-api-key: <key>`. The token is never logged or echoed.
//!
//! A request is authenticated once, on its head: by the edge (`edge/checks.rs`),
//! before it takes a call slot or reads a byte of its body, or, when the router
//! is served without the edge (tests, benches, an embedder's own server), by
//! [`layer`]. Either hands the result to the routes as the request's
//! [`Authenticated`] extension; no route hashes a token again.

use std::sync::Arc;
use std::time::SystemTime;

use axum::extract::{Request, State};
use axum::http::header::AUTHORIZATION;
use axum::http::request::Parts;
use axum::http::{HeaderMap, Method};
use axum::middleware::Next;
use axum::response::Response;

use super::console;
use super::error::Dialect;
use super::{ApiError, traceparent};
use crate::Weir;
use crate::failure::Category;
use crate::identity::{Key, KeyRing};
use crate::record::Route;

/// What the head's authentication found, as a request extension.
#[derive(Debug, Clone)]
pub(super) enum Authenticated {
    /// The gateway has no keys: every caller is let in.
    Open,
    /// The caller presented this key, valid now.
    Key(Arc<Key>),
    /// Not checked: a request that needs no key (`/health`, a CORS preflight).
    NotChecked,
}

impl Authenticated {
    /// The caller's key (`None` on an open gateway). A request that was not
    /// checked never reaches a route that asks, but if one did it is refused.
    pub(super) fn key(&self) -> Result<Option<&Arc<Key>>, ApiError> {
        match self {
            Self::Open => Ok(None),
            Self::Key(key) => Ok(Some(key)),
            Self::NotChecked => {
                tracing::error!("a route asked for the key of a request that was not authenticated");
                Err(ApiError::new(Category::InvalidApiKey, "the request was not authenticated".to_owned()))
            }
        }
    }

    /// The caller, as a call records it.
    pub(super) fn caller(&self) -> Result<Option<crate::Caller>, ApiError> {
        Ok(self.key()?.map(|key| key.caller()))
    }

    /// For an admin-plane request: an `admin` key, also refused on a keyless
    /// gateway (as `/admin/v1/...` is: the plane acts as a key).
    pub(super) fn require_admin_key(&self) -> Result<(), ApiError> {
        match self.key()? {
            Some(_) => self.require_admin(),
            None => Err(ApiError::new(
                Category::PermissionDenied,
                "the admin API needs an `admin` key; this gateway has no keys".to_owned(),
            )),
        }
    }

    /// For an operator request: an `admin` key when the gateway has keys.
    pub(super) fn require_admin(&self) -> Result<(), ApiError> {
        match self.key()? {
            Some(key) if !key.admin => Err(ApiError::new(
                Category::PermissionDenied,
                format!("the API key `{}` may not read operator endpoints (it is not `admin`)", key.id),
            )),
            _ => Ok(()),
        }
    }
}

/// Whether a request needs a key: all but `/health` (a load balancer's probe),
/// a CORS preflight (`OPTIONS`: a browser sends no credentials with it) and
/// the console's own paths (its page, its assets and its sign-in, which checks
/// the token itself; `/console/api/...` is authenticated by its session).
fn needs_key(method: &Method, path: &str) -> bool {
    path != "/health" && method != Method::OPTIONS && !console::is_console_path(path)
}

/// The route a refused call is recorded under: the POST routes that make calls.
fn call_route(method: &Method, path: &str) -> Option<Route> {
    if method != Method::POST {
        return None;
    }
    match path {
        "/v1/chat/completions" => Some(Route::OpenaiChat),
        "/v1/messages" => Some(Route::AnthropicMessages),
        "/v1/responses" => Some(Route::Responses),
        "/v1/embeddings" => Some(Route::OpenaiEmbeddings),
        "/v1/rerank" => Some(Route::Rerank),
        "/v1/decisions" => Some(Route::Decisions),
        _ => None,
    }
}

/// Authenticates a request from its head alone. A refused call (a POST to a
/// call route) is recorded, as a call that never reached a model, and named
/// in the answer's `x-weir-call-id`. `keys` is the ring as the caller read it
/// once for this request (the edge also decides the `Host` check from it).
pub(super) async fn authenticate(weir: &Weir, keys: &KeyRing, head: &Parts) -> Result<Authenticated, ApiError> {
    let path = head.uri.path();
    if console::is_api_path(path) {
        return console::session_key(weir, keys, head).map(Authenticated::Key);
    }
    if !needs_key(&head.method, path) {
        return Ok(Authenticated::NotChecked);
    }
    let refused = match caller_key(keys, &head.headers) {
        Ok(Some(key)) => return Ok(Authenticated::Key(key)),
        Ok(None) => return Ok(Authenticated::Open),
        Err(refused) => refused,
    };
    match call_route(&head.method, path) {
        Some(route) => {
            let call_id = weir.record_refusal(route, refused.category, traceparent(&head.headers)).await;
            Err(refused.recorded_as(call_id))
        }
        None => Err(refused),
    }
}

/// The router's own authentication, for a request the edge did not
/// authenticate (the router served without it).
pub(super) async fn layer(State(weir): State<Weir>, request: Request, next: Next) -> Response {
    if request.extensions().get::<Authenticated>().is_some() {
        return next.run(request).await;
    }
    let (mut head, body) = request.into_parts();
    match authenticate(&weir, &weir.keys(), &head).await {
        Ok(authenticated) => {
            head.extensions.insert(authenticated);
            next.run(Request::from_parts(head, body)).await
        }
        Err(refused) => Dialect::of(head.uri.path()).answer(refused),
    }
}

/// The key behind a request: `Ok(None)` when the gateway has no keys.
fn caller_key(keys: &KeyRing, headers: &HeaderMap) -> Result<Option<Arc<Key>>, ApiError> {
    if keys.is_empty() {
        return Ok(None);
    }
    match keys.authenticate(presented_token(headers), SystemTime::now()) {
        Ok(key) => Ok(Some(Arc::clone(key))),
        Err(error) => {
            tracing::info!(%error, "caller refused");
            Err(ApiError::new(Category::InvalidApiKey, error.to_string()))
        }
    }
}

/// `Authorization: Bearer <token>`, else `x-api-key: <token>`.
fn presented_token(headers: &HeaderMap) -> Option<&str> {
    let bearer = headers.get(AUTHORIZATION).and_then(|value| value.to_str().ok()).and_then(|value| {
        let (scheme, token) = value.trim().split_once(' ')?;
        scheme.eq_ignore_ascii_case("bearer").then_some(token)
    });
    bearer.or_else(|| headers.get("x-api-key").and_then(|value| value.to_str().ok()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    #[test]
    fn bearer_then_x_api_key() {
        let mut headers = HeaderMap::new();
        assert_eq!(presented_token(&headers), None);
        headers.insert("x-api-key", HeaderValue::from_static("from-anthropic"));
        assert_eq!(presented_token(&headers), Some("from-anthropic"));
        headers.insert(AUTHORIZATION, HeaderValue::from_static("bearer  from-openai"));
        assert_eq!(presented_token(&headers), Some(" from-openai"), "trimmed by the ring, not here");
        headers.insert(AUTHORIZATION, HeaderValue::from_static("Basic abc"));
        assert_eq!(presented_token(&headers), Some("from-anthropic"), "only the bearer scheme carries a key");
    }

    #[test]
    fn every_request_needs_a_key_but_health_and_a_preflight() {
        assert!(!needs_key(&Method::GET, "/health"));
        assert!(!needs_key(&Method::OPTIONS, "/v1/chat/completions"));
        assert!(needs_key(&Method::HEAD, "/v1/models"));
        assert!(needs_key(&Method::GET, "/v1/usage"));
        assert!(needs_key(&Method::POST, "/no/such/path"));
        assert!(!needs_key(&Method::GET, "/console"), "the console's page and sign-in check for themselves");
        assert!(!needs_key(&Method::POST, "/console/session"));
        assert!(needs_key(&Method::GET, "/consoles"));
    }

    #[test]
    fn a_request_not_checked_has_no_key_to_give_a_route() {
        let refused = Authenticated::NotChecked.key().unwrap_err();
        assert_eq!(refused.category, Category::InvalidApiKey);
        assert_eq!(Authenticated::NotChecked.require_admin().unwrap_err().category, Category::InvalidApiKey);
        assert!(Authenticated::Open.key().unwrap().is_none(), "an open gateway has no key");
        assert!(Authenticated::Open.require_admin().is_ok());
    }

    #[test]
    fn refusals_are_recorded_only_on_call_routes() {
        assert_eq!(call_route(&Method::POST, "/v1/messages"), Some(Route::AnthropicMessages));
        assert_eq!(call_route(&Method::POST, "/v1/decisions"), Some(Route::Decisions));
        assert_eq!(call_route(&Method::POST, "/v1/responses"), Some(Route::Responses));
        assert_eq!(call_route(&Method::GET, "/v1/chat/completions"), None);
        assert_eq!(call_route(&Method::POST, "/v1/models"), None);
    }
}
