//! Common error-body shapes and the status-code defaults every dialect starts from.
//!
//! Providers check their specific signals (quota words, overload types) first and
//! fall back on [`class_for_status`]. The detail strings are for the server log:
//! the host never shows them to a caller.

use serde_json::Value;

use crate::http::retry_hint;
use crate::types::{ErrorClass, HttpResponse, Refusal, Retry};

/// Longest raw detail kept for the log, in bytes.
const DETAIL_LIMIT: usize = 2_048;

/// What an error body says, whatever its wrapping: `{"error":{...}}`,
/// `{"type":"error","error":{...}}`, a flat `{"object":"error",...}`, or `{"error":"text"}`.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct ErrorFields {
    /// `error.type`, e.g. `rate_limit_error`, `insufficient_quota`.
    pub kind: Option<String>,
    /// `error.code`, as text even when the server sent a number.
    pub code: Option<String>,
    pub message: Option<String>,
    /// A status carried in the body as a number (`code: 429`, `status: 503`).
    pub status: Option<u16>,
}

/// An error body that is not JSON, as its message: its text, unless blank.
/// What every error parser falls back on (a proxy's HTML page, a plain-text
/// 502), so a dialect's own parser need not repeat it.
pub fn text_message(body: &[u8]) -> Option<String> {
    Some(String::from_utf8_lossy(body).into_owned()).filter(|message| !message.trim().is_empty())
}

impl ErrorFields {
    /// Reads the fields from a body; a body that is not JSON yields only its text.
    pub fn parse(body: &[u8]) -> Self {
        match serde_json::from_slice::<Value>(body) {
            Ok(value) => Self::from_value(&value),
            Err(_) => Self { message: text_message(body), ..Self::default() },
        }
    }

    /// Reads the fields from a parsed error object or its wrapper.
    pub fn from_value(value: &Value) -> Self {
        let inner = match value.get("error") {
            Some(Value::String(text)) => {
                return Self { message: Some(text.clone()), ..Self::default() };
            }
            Some(object @ Value::Object(_)) => object,
            _ => value,
        };
        let code = inner.get("code");
        Self {
            kind: text_field(inner, "type"),
            code: code.and_then(scalar_text),
            message: text_field(inner, "message").or_else(|| text_field(inner, "Message")),
            status: code
                .and_then(Value::as_u64)
                .or_else(|| inner.get("status").and_then(Value::as_u64))
                .and_then(|n| u16::try_from(n).ok())
                .filter(|n| (100..=599).contains(n)),
        }
    }

    /// One line for the server log: status, type, code and message, bounded.
    pub fn detail(&self, status: u16) -> String {
        let mut line = format!("HTTP {status}");
        for (label, value) in [("type", &self.kind), ("code", &self.code), ("message", &self.message)] {
            if let Some(value) = value {
                line.push_str(&format!(" {label}={value}"));
            }
        }
        truncate(line)
    }
}

fn text_field(value: &Value, key: &str) -> Option<String> {
    value.get(key).and_then(Value::as_str).map(str::to_owned)
}

fn scalar_text(value: &Value) -> Option<String> {
    match value {
        Value::String(text) => Some(text.clone()),
        Value::Number(number) => Some(number.to_string()),
        _ => None,
    }
}

/// Cuts a log detail to [`DETAIL_LIMIT`] bytes on a character boundary.
pub fn truncate(mut text: String) -> String {
    if text.len() > DETAIL_LIMIT {
        let mut end = DETAIL_LIMIT;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
        text.push('…');
    }
    text
}

/// The class a status code implies when the body says nothing more specific.
///
/// 503 is transient, not overload: only dialects with a dedicated overload status
/// (Anthropic's 529) report overload; others' capacity pressure rides the signal
/// they actually send.
pub fn class_for_status(response: &HttpResponse, detail: String) -> ErrorClass {
    let retry = || Retry { hint: retry_hint(&response.headers), detail: detail.clone() };
    match response.status {
        429 => ErrorClass::RateLimited(retry()),
        529 => ErrorClass::Overloaded(retry()),
        402 => ErrorClass::QuotaExhausted(detail),
        401 | 403 => ErrorClass::Authentication(detail),
        404 => ErrorClass::NotFound(detail),
        408 | 409 | 425 => ErrorClass::Transient(retry()),
        400 | 413 | 415 | 422 => ErrorClass::InvalidRequest(detail),
        500..=599 => ErrorClass::Transient(retry()),
        _ => ErrorClass::Uncorrectable(detail),
    }
}

/// A refusal with the provider's words, for `refused` classes and stop details.
pub fn refusal(category: Option<String>, explanation: Option<String>) -> Refusal {
    Refusal { category, explanation: explanation.map(truncate) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn openai_shape() {
        let fields = ErrorFields::parse(
            br#"{"error":{"message":"You exceeded your current quota","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}"#,
        );
        assert_eq!(fields.kind.as_deref(), Some("insufficient_quota"));
        assert_eq!(fields.code.as_deref(), Some("insufficient_quota"));
        assert_eq!(fields.status, None);
    }

    #[test]
    fn vllm_integer_code_and_flat_shape() {
        let wrapped = ErrorFields::parse(br#"{"error":{"message":"bad","type":"BadRequestError","code":400}}"#);
        assert_eq!(wrapped.status, Some(400));
        assert_eq!(wrapped.code.as_deref(), Some("400"));
        let flat =
            ErrorFields::parse(br#"{"object":"error","message":"boom","type":"InternalServerError","code":500}"#);
        assert_eq!(flat.status, Some(500));
        assert_eq!(flat.message.as_deref(), Some("boom"));
    }

    #[test]
    fn string_error_and_non_json() {
        assert_eq!(ErrorFields::parse(br#"{"error":"nope"}"#).message.as_deref(), Some("nope"));
        assert_eq!(
            ErrorFields::parse(b"<html>bad gateway</html>").message.as_deref(),
            Some("<html>bad gateway</html>")
        );
        assert_eq!(ErrorFields::parse(b"").message, None);
    }

    #[test]
    fn detail_is_bounded() {
        let fields = ErrorFields { message: Some("x".repeat(10_000)), ..ErrorFields::default() };
        assert!(fields.detail(500).len() <= DETAIL_LIMIT + '…'.len_utf8());
    }

    #[test]
    fn status_defaults() {
        let response = |status| HttpResponse { status, headers: vec![], body: vec![] };
        assert!(matches!(class_for_status(&response(429), String::new()), ErrorClass::RateLimited(_)));
        assert!(matches!(class_for_status(&response(529), String::new()), ErrorClass::Overloaded(_)));
        assert!(matches!(class_for_status(&response(503), String::new()), ErrorClass::Transient(_)));
        assert!(matches!(class_for_status(&response(402), String::new()), ErrorClass::QuotaExhausted(_)));
        assert!(matches!(class_for_status(&response(418), String::new()), ErrorClass::Uncorrectable(_)));
    }
}
