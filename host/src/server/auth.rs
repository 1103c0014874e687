//! Who is calling the gateway: the key a request presents, checked against the
//! ring as of now. With no `[[key]]` configured the gateway is open (and `weir
//! serve` then binds loopback only, unless the operator says otherwise).
//!
//! Both official clients work unchanged: OpenAI's sends `Authorization: Bearer
//! <key>`, Anthropic's `x-api-key: <key>`. The token is never logged or echoed.

use std::sync::Arc;
use std::time::SystemTime;

use axum::http::HeaderMap;
use axum::http::header::AUTHORIZATION;

use super::ApiError;
use crate::Weir;
use crate::error::Category;
use crate::identity::Key;

/// The key behind a request: `Ok(None)` when the gateway has no keys.
pub(super) fn caller_key(weir: &Weir, headers: &HeaderMap) -> Result<Option<Arc<Key>>, ApiError> {
    let keys = weir.keys();
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

/// The key of an operator request: an `admin` key when the gateway has keys.
pub(super) fn require_admin(weir: &Weir, headers: &HeaderMap) -> Result<(), ApiError> {
    match caller_key(weir, headers)? {
        Some(key) if !key.admin => Err(ApiError::new(
            Category::PermissionDenied,
            format!("the API key `{}` may not read operator endpoints (it is not `admin`)", key.id),
        )),
        _ => Ok(()),
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
}
