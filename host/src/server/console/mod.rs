//! `/console`: the operator's pages, served from files embedded in the binary
//! (`host/console/`: plain HTML, CSS and JavaScript; nothing is fetched from
//! anywhere but this gateway).
//!
//! - `GET /console`, `/console/console.js`, `/console/console.css` — the page and its assets
//! - `POST /console/session` `{"token"}` — signs in with an `admin` key's token:
//!   sets the session cookie, answers the CSRF token
//! - `GET /console/session` — the signed-in session's key, CSRF token and expiry (401 without one)
//! - `DELETE /console/session` — signs out (needs the CSRF token)
//! - `GET /console/sign-in` — which ways in this gateway offers (`key`, `oidc`);
//!   `[console] key_sign_in = false` turns the key's sign-in off
//! - `GET /console/oidc/login`, `/console/oidc/callback` — single sign-on through
//!   the OpenID Connect provider `[console.oidc]` names (see [`oidc`]); it opens
//!   the same session a key's sign-in opens
//! - `/console/api/...` — the routes the page reads and changes through, with
//!   the session instead of a key: `/admin/v1/...`, `/v1/usage`, `/v1/models`,
//!   `/v1/providers` under this prefix (see [`session_key`])
//!
//! The cookie is `HttpOnly; SameSite=Strict; Path=/console`: the page's script
//! never holds the admin token after sign-in, and the browser sends the cookie
//! to these paths alone. Every `/console` answer is `Cache-Control: no-store`
//! under a strict `Content-Security-Policy` (scripts and styles from this
//! origin only, nothing inline). A request to `/console` from a browser
//! `Origin` other than the gateway's own (its `Host`) is refused, whatever
//! `cors_origins` allows.

use std::sync::Arc;
use std::time::SystemTime;

use axum::Json;
use axum::extract::{Request, State};
use axum::http::header::{CACHE_CONTROL, CONTENT_TYPE, COOKIE, HOST, ORIGIN, SET_COOKIE};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::json;

use super::ApiError;
use crate::Weir;
use crate::failure::Category;
use crate::identity::console_sessions::{Opened, Principal, SESSION_LIFETIME, Session};
use crate::identity::{Key, KeyRing};

/// The path every console route is under.
const PREFIX: &str = "/console";
/// The session cookie's name.
const COOKIE_NAME: &str = "weir_console";
/// The header a change carries the session's CSRF token in.
const CSRF_HEADER: &str = "x-weir-csrf";
/// The largest sign-in body read.
const MAX_SIGN_IN_BYTES: usize = 4 << 10;

const INDEX_HTML: &str = include_str!("../../../console/index.html");
const CONSOLE_JS: &str = include_str!("../../../console/console.js");
const CONSOLE_CSS: &str = include_str!("../../../console/console.css");

/// Scripts, styles and requests to this origin only; nothing inline, no
/// frames, no forms posted anywhere.
const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; \
     connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// Whether `path` is one of the console's.
pub(super) fn is_console_path(path: &str) -> bool {
    path == PREFIX || path.starts_with("/console/")
}

/// Whether `path` is one the page calls with its session (`/console/api/...`).
pub(super) fn is_api_path(path: &str) -> bool {
    path.starts_with("/console/api/")
}

pub(super) async fn index() -> Response {
    asset("text/html; charset=utf-8", INDEX_HTML)
}

pub(super) async fn script() -> Response {
    asset("text/javascript; charset=utf-8", CONSOLE_JS)
}

pub(super) async fn style() -> Response {
    asset("text/css; charset=utf-8", CONSOLE_CSS)
}

fn asset(content_type: &'static str, body: &'static str) -> Response {
    ([(CONTENT_TYPE, HeaderValue::from_static(content_type))], body).into_response()
}

/// Adds the console's headers to every answer under `/console`.
pub(super) async fn secure_headers(request: Request, next: Next) -> Response {
    let console = is_console_path(request.uri().path());
    let mut response = next.run(request).await;
    if console {
        let headers = response.headers_mut();
        headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
        headers.insert("content-security-policy", HeaderValue::from_static(CONTENT_SECURITY_POLICY));
        headers.insert("x-content-type-options", HeaderValue::from_static("nosniff"));
        headers.insert("referrer-policy", HeaderValue::from_static("no-referrer"));
        headers.insert("x-frame-options", HeaderValue::from_static("DENY"));
    }
    response
}

/// Whether a console request's `Origin` (when the browser sent one) is the
/// gateway's own: `http://` or `https://` and the request's `Host`.
pub(super) fn same_origin(head: &Parts) -> bool {
    let Some(origin) = head.headers.get(ORIGIN) else { return true };
    let Some(host) = head.headers.get(HOST).and_then(|host| host.to_str().ok()) else { return false };
    let Ok(origin) = origin.to_str() else { return false };
    origin.strip_prefix("http://").or_else(|| origin.strip_prefix("https://")) == Some(host)
}

/// The refusal of a console request from another origin.
pub(super) fn foreign_origin() -> ApiError {
    ApiError::new(
        Category::ForbiddenOrigin,
        "the console answers only pages of its own origin: this request's `Origin` is another".to_owned(),
    )
}

fn signed_out() -> ApiError {
    ApiError::new(Category::InvalidApiKey, "no console session: sign in again".to_owned())
}

/// The session cookie's value, when the request carries one.
fn cookie(headers: &HeaderMap) -> Option<&str> {
    cookie_named(headers, COOKIE_NAME)
}

/// The value of the cookie `name`, when the request carries one.
fn cookie_named<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find_map(|(found, value)| (found == name).then_some(value))
}

/// The admin key a `/console/api/...` request acts as: its cookie's live
/// session, whose key is still in `keys`, still `admin` and not expired; a
/// change (anything but `GET` / `HEAD`) also needs the session's CSRF token
/// in `x-weir-csrf`; the request's `Origin`, when sent, must be the gateway's own.
pub(super) fn session_key(weir: &Weir, keys: &KeyRing, head: &Parts) -> Result<Arc<Key>, ApiError> {
    if !same_origin(head) {
        return Err(foreign_origin());
    }
    let now = SystemTime::now();
    let id = cookie(&head.headers).ok_or_else(signed_out)?;
    let session = weir.console_sessions().find(id, now).ok_or_else(signed_out)?;
    let key = match &session.principal {
        Principal::Key(key_id) => {
            Arc::clone(keys.get(key_id).filter(|key| key.admin && key.live_at(now)).ok_or_else(|| {
                ApiError::new(
                    Category::InvalidApiKey,
                    format!("the key `{key_id}` this session signed in with is no longer an active admin key"),
                )
            })?)
        }
        Principal::SignOn(person) => Arc::new(Key::signed_on_admin(person.actor())),
    };
    let reads = head.method == Method::GET || head.method == Method::HEAD;
    if !reads && !session.csrf_matches(csrf_header(&head.headers)) {
        return Err(missing_csrf());
    }
    Ok(key)
}

fn csrf_header(headers: &HeaderMap) -> Option<&str> {
    headers.get(CSRF_HEADER).and_then(|value| value.to_str().ok())
}

fn missing_csrf() -> ApiError {
    ApiError::new(
        Category::PermissionDenied,
        format!("a console change needs the session's CSRF token in `{CSRF_HEADER}`"),
    )
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SignIn {
    token: String,
}

/// `POST /console/session`: signs in with an admin key's token.
pub(super) async fn sign_in(State(weir): State<Weir>, request: Request) -> Result<Response, ApiError> {
    let (head, body) = request.into_parts();
    if !same_origin(&head) {
        return Err(foreign_origin());
    }
    let body = axum::body::to_bytes(body, MAX_SIGN_IN_BYTES)
        .await
        .map_err(|_| ApiError::invalid_request("the sign-in body could not be read"))?;
    let sign_in: SignIn = serde_json::from_slice(&body)
        .map_err(|_| ApiError::invalid_request("the sign-in body must be {\"token\": \"...\"}"))?;
    if !weir.config().console.key_sign_in {
        return Err(ApiError::new(
            Category::PermissionDenied,
            "signing in with a key is turned off on this gateway: sign in with single sign-on".to_owned(),
        ));
    }
    let keys = weir.keys();
    if keys.is_empty() {
        return Err(ApiError::new(
            Category::PermissionDenied,
            "this gateway has no keys: the console needs an `admin` key to sign in".to_owned(),
        ));
    }
    let now = SystemTime::now();
    let key = keys.authenticate(Some(&sign_in.token), now).map_err(|error| {
        tracing::info!(%error, "a console sign-in was refused");
        ApiError::new(Category::InvalidApiKey, error.to_string())
    })?;
    if !key.admin {
        return Err(ApiError::new(
            Category::PermissionDenied,
            format!("the API key `{}` may not sign in to the console (it is not `admin`)", key.id),
        ));
    }
    let opened = open_session(&weir, Principal::Key(key.id.clone()), now)?;
    let mut answer = Json(session_json(&opened.session)).into_response();
    answer.headers_mut().insert(SET_COOKIE, session_cookie(&opened.id));
    Ok(answer)
}

/// Opens a console session for `principal` (a key's sign-in or a single sign-on's).
fn open_session(weir: &Weir, principal: Principal, now: SystemTime) -> Result<Opened, ApiError> {
    weir.console_sessions().open(principal, now).map_err(|error| {
        tracing::error!(%error, "a console session could not be opened");
        ApiError::new(Category::GatewayBusy, "a console session could not be opened; retry shortly".to_owned())
    })
}

/// The `Set-Cookie` that hands a browser its session: the same for either
/// way of signing in.
fn session_cookie(id: &str) -> HeaderValue {
    let cookie =
        format!("{COOKIE_NAME}={id}; HttpOnly; SameSite=Strict; Path={PREFIX}; Max-Age={}", SESSION_LIFETIME.as_secs());
    // A session id is `weir-` and hex: always a valid header value.
    HeaderValue::from_str(&cookie).unwrap_or_else(|_| HeaderValue::from_static("weir_console=; Max-Age=0"))
}

fn session_json(session: &Session) -> serde_json::Value {
    let (key, who, via) = match &session.principal {
        Principal::Key(key_id) => (Some(key_id.clone()), key_id.clone(), "key"),
        Principal::SignOn(person) => (None, person.actor(), "oidc"),
    };
    json!({
        "key": key,
        "who": who,
        "via": via,
        "csrf": session.csrf,
        "expires_at": crate::admin::model::rfc3339_ms(crate::admin::model::to_ms(session.expires)),
    })
}

/// `GET /console/sign-in`: which ways of signing in this gateway offers, so
/// the page shows the key form, the single sign-on link, or both.
pub(super) async fn sign_in_methods(State(weir): State<Weir>) -> Response {
    let console = &weir.config().console;
    Json(json!({"key": console.key_sign_in, "oidc": console.oidc.is_some()})).into_response()
}

/// `GET /console/session`: the session the cookie names, for a page (re)loaded.
pub(super) async fn current(State(weir): State<Weir>, request: Request) -> Result<Response, ApiError> {
    let (head, _) = request.into_parts();
    session_key(&weir, &weir.keys(), &head)?;
    let id = cookie(&head.headers).ok_or_else(signed_out)?;
    let session = weir.console_sessions().find(id, SystemTime::now()).ok_or_else(signed_out)?;
    Ok(Json(session_json(&session)).into_response())
}

/// `DELETE /console/session`: signs out; the cookie is cleared.
pub(super) async fn sign_out(State(weir): State<Weir>, request: Request) -> Result<Response, ApiError> {
    let (head, _) = request.into_parts();
    if !same_origin(&head) {
        return Err(foreign_origin());
    }
    let id = cookie(&head.headers).ok_or_else(signed_out)?;
    let session = weir.console_sessions().find(id, SystemTime::now()).ok_or_else(signed_out)?;
    if !session.csrf_matches(csrf_header(&head.headers)) {
        return Err(missing_csrf());
    }
    weir.console_sessions().close(id);
    let clear = format!("{COOKIE_NAME}=; HttpOnly; SameSite=Strict; Path={PREFIX}; Max-Age=0");
    let mut answer = StatusCode::NO_CONTENT.into_response();
    if let Ok(value) = HeaderValue::from_str(&clear) {
        answer.headers_mut().insert(SET_COOKIE, value);
    }
    Ok(answer)
}

mod oidc;

pub(super) use oidc::{sign_on_callback, sign_on_start};

#[cfg(test)]
mod tests;
