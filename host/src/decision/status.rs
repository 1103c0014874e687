//! A decision endpoint's error status, classified by the host (the wire's
//! table in `docs/src/providers/decision-wire.md`): the same classes a component returns for
//! its provider, so the retry loop and the throttle treat decisions like every
//! other call. The endpoint's message is kept only as the log's detail.

use serde::Deserialize;

use crate::types::{ErrorClass, HttpResponse, Retry, RetryHint};

/// The most of an endpoint's error message the log keeps.
const DETAIL_CHARS: usize = 500;

/// The optional error body: `{"error": {"type": "...", "message": "..."}}`.
#[derive(Debug, Default, Deserialize)]
struct ErrorBody {
    #[serde(default)]
    error: ErrorFields,
}

#[derive(Debug, Default, Deserialize)]
struct ErrorFields {
    #[serde(default, rename = "type")]
    kind: Option<String>,
    #[serde(default)]
    message: Option<String>,
}

/// What a non-2xx response from a decision endpoint means.
pub fn classify(response: &HttpResponse) -> ErrorClass {
    let body: ErrorBody = serde_json::from_slice(&response.body).unwrap_or_default();
    let quota = body.error.kind.as_deref() == Some("quota_exhausted");
    let detail = detail(response.status, &body.error);
    let retry = || Retry { hint: retry_after(response), detail: detail.clone() };
    match response.status {
        429 if quota => ErrorClass::QuotaExhausted(detail),
        402 => ErrorClass::QuotaExhausted(detail),
        429 => ErrorClass::RateLimited(retry()),
        401 | 403 => ErrorClass::Authentication(detail),
        404 => ErrorClass::NotFound(detail),
        408 | 500..=599 => ErrorClass::Transient(retry()),
        400..=499 => ErrorClass::InvalidRequest(detail),
        // A redirect is not followed (the endpoint is the entry's) and nothing
        // else is an answer: asking again meets the same.
        _ => ErrorClass::Uncorrectable(detail),
    }
}

/// `retry-after` in seconds (an integer or a decimal), as a delay.
fn retry_after(response: &HttpResponse) -> Option<RetryHint> {
    let (_, value) = response.headers.iter().find(|(name, _)| name.eq_ignore_ascii_case("retry-after"))?;
    let seconds: f64 = value.trim().parse().ok()?;
    if !seconds.is_finite() || seconds < 0.0 {
        return None;
    }
    // Bounded by the retry loop's own ceiling on a wait; this only keeps the cast exact.
    let millis = (seconds * 1000.0).min(86_400_000.0);
    Some(RetryHint::DelayMs(millis as u64))
}

fn detail(status: u16, error: &ErrorFields) -> String {
    let kind = error.kind.as_deref().unwrap_or("-");
    let message: String = error.message.as_deref().unwrap_or_default().chars().take(DETAIL_CHARS).collect();
    format!("decision endpoint answered {status} ({kind}): {message}")
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::panic)]

    use super::*;

    fn response(status: u16, headers: &[(&str, &str)], body: &str) -> HttpResponse {
        let headers = headers.iter().map(|(name, value)| ((*name).to_owned(), (*value).to_owned())).collect();
        HttpResponse { status, headers, body: body.as_bytes().to_vec() }
    }

    #[test]
    fn each_status_of_the_wires_table_gets_its_class() {
        let rate = classify(&response(429, &[("Retry-After", "7")], ""));
        let ErrorClass::RateLimited(retry) = rate else { panic!("{rate:?}") };
        assert_eq!(retry.hint, Some(RetryHint::DelayMs(7_000)));
        let quota = r#"{"error": {"type": "quota_exhausted", "message": "out of credit"}}"#;
        assert!(matches!(classify(&response(429, &[], quota)), ErrorClass::QuotaExhausted(_)));
        assert!(matches!(classify(&response(402, &[], "")), ErrorClass::QuotaExhausted(_)));
        assert!(matches!(classify(&response(401, &[], "")), ErrorClass::Authentication(_)));
        assert!(matches!(classify(&response(403, &[], "")), ErrorClass::Authentication(_)));
        assert!(matches!(classify(&response(404, &[], "")), ErrorClass::NotFound(_)));
        assert!(matches!(classify(&response(400, &[], "")), ErrorClass::InvalidRequest(_)));
        assert!(matches!(classify(&response(422, &[], "")), ErrorClass::InvalidRequest(_)));
        assert!(matches!(classify(&response(408, &[], "")), ErrorClass::Transient(_)));
        let unavailable = classify(&response(503, &[("retry-after", "0.5")], "not json"));
        let ErrorClass::Transient(retry) = unavailable else { panic!("{unavailable:?}") };
        assert_eq!(retry.hint, Some(RetryHint::DelayMs(500)));
        assert!(matches!(classify(&response(302, &[], "")), ErrorClass::Uncorrectable(_)));
    }

    #[test]
    fn a_retry_after_that_is_no_delay_is_ignored_and_the_message_is_only_detail() {
        for value in ["soon", "-1", "NaN", "inf"] {
            let class = classify(&response(429, &[("retry-after", value)], ""));
            let ErrorClass::RateLimited(retry) = class else { panic!("{class:?}") };
            assert_eq!(retry.hint, None, "{value}");
        }
        let long = format!(r#"{{"error": {{"type": "overloaded", "message": "{}"}}}}"#, "x".repeat(5_000));
        let ErrorClass::Transient(retry) = classify(&response(500, &[], &long)) else { panic!() };
        assert!(retry.detail.starts_with("decision endpoint answered 500 (overloaded): xxx"), "{}", retry.detail);
        assert!(retry.detail.len() < DETAIL_CHARS + 100, "bounded");
    }
}
