//! What a failed response means. Google AI Studio and Vertex AI answer errors
//! in the same shape, `{"error": {"code", "message", "status", "details"}}`
//! (Vertex sometimes wraps it in a one-element array), `status` being the
//! canonical gRPC code name. It decides the class; the HTTP status is the
//! fallback for a body without one.
//!
//! `RESOURCE_EXHAUSTED` (429) is two things: a per-minute limit, which passes
//! (rate-limited, with the `RetryInfo.retryDelay` Google gives), or a per-day
//! quota or spent prepaid credits, which no retry today will cure
//! (quota-exhausted). The `QuotaFailure` violations name the quota that ran
//! out (`quotaId: GenerateRequestsPerDayPerProjectPerModel-FreeTier` vs
//! `…PerMinute…`); a 429 that names no per-day quota (Vertex's shared-capacity
//! "Resource exhausted, please try again later" has no details) is a rate limit.
//!
//! A wrong API key is a 400 `INVALID_ARGUMENT` whose `ErrorInfo.reason` is
//! `API_KEY_INVALID`: authentication, not the caller's request. A prompt over
//! the window is a 400 whose message says the input token count exceeds the
//! maximum: context overflow. Detail strings are for the server log only.

use serde_json::Value;
use weir_sdk::errors::{class_for_status, text_message, truncate};
use weir_sdk::http::retry_hint;
use weir_sdk::types::{ErrorClass, HttpResponse, Retry, RetryHint};

/// What an error body says.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct GoogleError {
    /// The canonical code name, e.g. `RESOURCE_EXHAUSTED`.
    pub status: Option<String>,
    pub code: Option<u16>,
    pub message: Option<String>,
    /// `details[]`, as sent.
    pub details: Vec<Value>,
}

impl GoogleError {
    /// Reads the error from a body, `{"error": …}` or `[{"error": …}]`; a body
    /// that is neither yields its text as the message.
    pub fn parse(body: &[u8]) -> Self {
        match serde_json::from_slice::<Value>(body) {
            Ok(value) => Self::from_value(&value),
            Err(_) => Self { message: text_message(body), ..Self::default() },
        }
    }

    pub fn from_value(value: &Value) -> Self {
        let value = match value {
            Value::Array(items) => items.first().unwrap_or(&Value::Null),
            other => other,
        };
        let Some(error) = value.get("error").filter(|error| error.is_object()) else {
            return Self::default();
        };
        Self {
            status: error.get("status").and_then(Value::as_str).map(str::to_owned),
            code: error.get("code").and_then(Value::as_u64).and_then(|code| u16::try_from(code).ok()),
            message: error.get("message").and_then(Value::as_str).map(str::to_owned),
            details: error.get("details").and_then(Value::as_array).cloned().unwrap_or_default(),
        }
    }

    /// One bounded line for the server log.
    pub fn detail(&self, http_status: u16) -> String {
        let mut line = format!("HTTP {http_status}");
        if let Some(status) = &self.status {
            line.push_str(&format!(" {status}"));
        }
        if let Some(message) = &self.message {
            line.push_str(&format!(": {message}"));
        }
        truncate(line)
    }

    /// The details of one type, by the tail of their `@type`
    /// (`type.googleapis.com/google.rpc.QuotaFailure` → `QuotaFailure`).
    fn details_of<'a>(&'a self, kind: &'a str) -> impl Iterator<Item = &'a Value> + 'a {
        self.details.iter().filter(move |detail| {
            detail.get("@type").and_then(Value::as_str).is_some_and(|at| at.rsplit('.').next() == Some(kind))
        })
    }

    /// `RetryInfo.retryDelay`, a protobuf Duration in JSON (`"36s"`, `"1.5s"`).
    pub fn retry_delay(&self) -> Option<RetryHint> {
        let delay = self.details_of("RetryInfo").find_map(|info| info.get("retryDelay")?.as_str())?;
        let seconds: f64 = delay.strip_suffix('s')?.parse().ok()?;
        (seconds.is_finite() && seconds >= 0.0).then(|| RetryHint::DelayMs((seconds * 1000.0).ceil() as u64))
    }

    /// Whether the quota that ran out is one no retry today cures: a per-day
    /// quota named by a `QuotaFailure` violation or an `ErrorInfo`'s
    /// `quota_limit`, or prepaid credits spent.
    pub fn is_daily_or_spent(&self) -> bool {
        let per_day = |name: &str| name.contains("PerDay");
        let violation = self.details_of("QuotaFailure").any(|failure| {
            failure.get("violations").and_then(Value::as_array).is_some_and(|violations| {
                violations.iter().any(|violation| violation.get("quotaId").and_then(Value::as_str).is_some_and(per_day))
            })
        });
        let info = self
            .details_of("ErrorInfo")
            .any(|info| info.pointer("/metadata/quota_limit").and_then(Value::as_str).is_some_and(per_day));
        let spent = self.message.as_deref().is_some_and(|message| message.contains("prepayment credits are depleted"));
        violation || info || spent
    }

    fn has_reason(&self, reason: &str) -> bool {
        self.details_of("ErrorInfo").any(|info| info.get("reason").and_then(Value::as_str) == Some(reason))
    }

    fn is_context_overflow(&self) -> bool {
        self.message.as_deref().is_some_and(|message| {
            let message = message.to_ascii_lowercase();
            message.contains("input token count") && message.contains("exceeds the maximum")
        })
    }
}

/// The class of a failed response.
pub fn classify(response: &HttpResponse) -> ErrorClass {
    let error = GoogleError::parse(&response.body);
    class_of(&error, response.status, &response.headers)
}

/// The class of an error read from a body (a failed response's, or an error
/// frame inside a stream's 200).
pub fn class_of(error: &GoogleError, http_status: u16, headers: &weir_sdk::types::Headers) -> ErrorClass {
    let detail = error.detail(http_status);
    let retry = || Retry { hint: error.retry_delay().or_else(|| retry_hint(headers)), detail: detail.clone() };
    match error.status.as_deref() {
        Some("RESOURCE_EXHAUSTED") if error.is_daily_or_spent() => ErrorClass::QuotaExhausted(detail),
        Some("RESOURCE_EXHAUSTED") => ErrorClass::RateLimited(retry()),
        Some("INVALID_ARGUMENT") if error.has_reason("API_KEY_INVALID") => ErrorClass::Authentication(detail),
        Some("INVALID_ARGUMENT") if error.is_context_overflow() => ErrorClass::ContextOverflow(detail),
        Some("INVALID_ARGUMENT" | "OUT_OF_RANGE") => ErrorClass::InvalidRequest(detail),
        // Billing not enabled, or the API not offered where the deployment
        // runs: nothing a caller or a retry changes.
        Some("FAILED_PRECONDITION") => ErrorClass::Uncorrectable(detail),
        Some("UNAUTHENTICATED" | "PERMISSION_DENIED") => ErrorClass::Authentication(detail),
        Some("NOT_FOUND") => ErrorClass::NotFound(detail),
        Some("INTERNAL" | "UNAVAILABLE" | "DEADLINE_EXCEEDED" | "ABORTED" | "UNKNOWN") => {
            ErrorClass::Transient(retry())
        }
        _ => {
            let status = if http_status == 200 { error.code.unwrap_or(500) } else { http_status };
            let response = HttpResponse { status, headers: headers.clone(), body: Vec::new() };
            match class_for_status(&response, detail) {
                ErrorClass::RateLimited(mut rate) => {
                    rate.hint = error.retry_delay().or(rate.hint);
                    ErrorClass::RateLimited(rate)
                }
                other => other,
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::panic)] // a failing test should stop loudly
mod tests {
    use super::*;

    fn classified(status: u16, headers: &[(&str, &str)], body: &str) -> ErrorClass {
        let headers = headers.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
        classify(&HttpResponse { status, headers, body: body.as_bytes().to_vec() })
    }

    fn google(code: u16, status: &str, message: &str, details: &str) -> String {
        format!(r#"{{"error":{{"code":{code},"message":"{message}","status":"{status}","details":{details}}}}}"#)
    }

    const PER_MINUTE: &str = r#"[{"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[{"quotaMetric":"generativelanguage.googleapis.com/generate_content_free_tier_requests","quotaId":"GenerateRequestsPerMinutePerProjectPerModel-FreeTier","quotaValue":"10"}]},{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"36s"}]"#;
    const PER_DAY: &str = r#"[{"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[{"quotaMetric":"generativelanguage.googleapis.com/generate_content_free_tier_requests","quotaId":"GenerateRequestsPerDayPerProjectPerModel-FreeTier","quotaValue":"250"}]},{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"20s"}]"#;

    #[test]
    fn resource_exhausted_per_minute_is_a_rate_limit_with_its_delay() {
        let class =
            classified(429, &[], &google(429, "RESOURCE_EXHAUSTED", "You exceeded your current quota", PER_MINUTE));
        match class {
            ErrorClass::RateLimited(retry) => {
                assert_eq!(retry.hint, Some(RetryHint::DelayMs(36_000)));
                assert!(retry.detail.starts_with("HTTP 429 RESOURCE_EXHAUSTED: You exceeded"), "{}", retry.detail);
            }
            other => panic!("{other:?}"),
        }
        // Vertex's shared capacity: no details, the header's hint.
        let vertex = r#"[{"error":{"code":429,"message":"Resource exhausted. Please try again later.","status":"RESOURCE_EXHAUSTED"}}]"#;
        assert!(matches!(
            classified(429, &[("retry-after", "3")], vertex),
            ErrorClass::RateLimited(Retry { hint: Some(RetryHint::DelayMs(3_000)), .. })
        ));
    }

    #[test]
    fn resource_exhausted_per_day_or_spent_is_quota() {
        let class =
            classified(429, &[], &google(429, "RESOURCE_EXHAUSTED", "You exceeded your current quota", PER_DAY));
        assert!(matches!(class, ErrorClass::QuotaExhausted(_)), "{class:?}");
        let spent = google(429, "RESOURCE_EXHAUSTED", "Your prepayment credits are depleted.", "[]");
        assert!(matches!(classified(429, &[], &spent), ErrorClass::QuotaExhausted(_)));
    }

    /// Whether a class is the one a case expects.
    type Expected = fn(&ErrorClass) -> bool;

    #[test]
    fn every_status_has_its_class() {
        let key = r#"[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"API_KEY_INVALID","domain":"googleapis.com"}]"#;
        let cases: [(u16, &str, &str, &str, Expected); 10] = [
            (400, "INVALID_ARGUMENT", "API key not valid. Please pass a valid API key.", key, |c| {
                matches!(c, ErrorClass::Authentication(_))
            }),
            (
                400,
                "INVALID_ARGUMENT",
                "The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).",
                "[]",
                |c| matches!(c, ErrorClass::ContextOverflow(_)),
            ),
            (400, "INVALID_ARGUMENT", "Invalid JSON payload received.", "[]", |c| {
                matches!(c, ErrorClass::InvalidRequest(_))
            }),
            (400, "FAILED_PRECONDITION", "User location is not supported for the API use.", "[]", |c| {
                matches!(c, ErrorClass::Uncorrectable(_))
            }),
            (403, "PERMISSION_DENIED", "Permission denied.", "[]", |c| matches!(c, ErrorClass::Authentication(_))),
            (401, "UNAUTHENTICATED", "Request had invalid authentication credentials.", "[]", |c| {
                matches!(c, ErrorClass::Authentication(_))
            }),
            (404, "NOT_FOUND", "models/gemini-9 is not found.", "[]", |c| matches!(c, ErrorClass::NotFound(_))),
            (500, "INTERNAL", "An internal error has occurred.", "[]", |c| matches!(c, ErrorClass::Transient(_))),
            (503, "UNAVAILABLE", "The model is overloaded. Please try again later.", "[]", |c| {
                matches!(c, ErrorClass::Transient(_))
            }),
            (504, "DEADLINE_EXCEEDED", "Deadline expired before operation could complete.", "[]", |c| {
                matches!(c, ErrorClass::Transient(_))
            }),
        ];
        for (code, status, message, details, expected) in cases {
            let class = classified(code, &[], &google(code, status, message, details));
            assert!(expected(&class), "{status} {message}: {class:?}");
        }
    }

    #[test]
    fn a_body_without_a_google_error_falls_back_on_the_status() {
        assert!(matches!(classified(429, &[("retry-after", "2")], "<html>slow</html>"), ErrorClass::RateLimited(_)));
        assert!(matches!(classified(502, &[], ""), ErrorClass::Transient(_)));
        assert!(matches!(classified(418, &[], "{}"), ErrorClass::Uncorrectable(_)));
        assert_eq!(GoogleError::parse(b"[]"), GoogleError::default());
    }
}
