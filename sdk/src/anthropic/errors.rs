//! What a failure means: non-2xx responses, and `error` events inside a 200 stream.
//!
//! Categories come from structured fields: `error.type`, else the HTTP status.
//! The `message` is prose that Anthropic rewords at will, so it goes to the log
//! as detail and picks a category in one case only, the one the runtime seed
//! names:
//!
//! * "Your credit balance is too low" arrives as a 400 `invalid_request_error`
//!   whose only distinguishing mark is its message. The seed makes it quota
//!   (out of money never recovers by retrying, and the caller must be told to
//!   top up, not to fix the request), so a 400 `invalid_request_error` whose
//!   message says `credit balance` is quota-exhausted ([`CREDIT_BALANCE`]); if
//!   Anthropic rewords it, it falls back to invalid-request, which is not
//!   retried either. `billing_error` (402) is the structured signal for
//!   billing and is quota-exhausted too.
//! * An over-long prompt is a 400 `invalid_request_error` ("prompt is too long")
//!   with no structured field saying so: invalid-request. The one structured
//!   context signal the API gives is the `model_context_window_exceeded` stop
//!   reason of a successful answer, which `decode` maps.
//!
//! On the AWS surfaces (InvokeModel, Mantle) two kinds of error body arrive:
//! Anthropic's envelope (`{"type":"error","error":{"type":…}}`, from the service
//! that runs the model, and the one Mantle's native API documents) and AWS's own
//! restJson1 error, named by `x-amzn-errortype` or the body's `__type`. A body
//! naming a known Anthropic `error.type` is classified by it, exactly as on the
//! direct API: it is the finer verdict (`overloaded_error`, `billing_error`) from
//! the service that ran the model, while AWS's name is the front door's. Any other
//! body is AWS's, classified by [`crate::bedrock::classify`] (error name, then status).

use super::Surface;
use crate::bedrock;
use crate::errors::{ErrorFields, class_for_status, truncate};
use crate::http::{retry_hint, rfc3339_unix_ms};
use crate::types::{ErrorClass, Headers, HttpResponse, InBandError, Retry, RetryHint};

/// What the message of Anthropic's out-of-credit 400 says (lower case).
const CREDIT_BALANCE: &str = "credit balance";

/// Classifies a non-2xx response from `surface` (see the module doc for the order).
pub fn classify(surface: Surface, response: &HttpResponse) -> ErrorClass {
    let fields = ErrorFields::parse(&response.body);
    let anthropic_status = fields.kind.as_deref().and_then(status_of_type);
    // AWS's error types come only from the Bedrock surfaces; Vertex's own
    // envelope (`{"error": {"code", "message", "status"}}`) is classed by status.
    if anthropic_status.is_none() && matches!(surface, Surface::BedrockInvoke | Surface::Mantle) {
        return bedrock::classify(response);
    }
    let detail = match surface.request_id(&response.headers) {
        Some(id) => truncate(format!("{} request-id={id}", fields.detail(response.status))),
        None => fields.detail(response.status),
    };
    if out_of_credit(&fields) {
        return ErrorClass::QuotaExhausted(detail);
    }
    class_for(anthropic_status.unwrap_or(response.status), &response.headers, detail)
}

/// Anthropic's "Your credit balance is too low …": an `invalid_request_error`
/// that only its message tells apart (see the module doc).
fn out_of_credit(fields: &ErrorFields) -> bool {
    fields.kind.as_deref() == Some("invalid_request_error")
        && fields.message.as_deref().is_some_and(|message| message.to_ascii_lowercase().contains(CREDIT_BALANCE))
}

/// The HTTP status each documented `error.type` comes with. The type decides when
/// a proxy changed the status, and gives a stream's error event its status.
fn status_of_type(kind: &str) -> Option<u16> {
    let status = match kind {
        "invalid_request_error" => 400,
        "authentication_error" => 401,
        "billing_error" => 402,
        "permission_error" => 403,
        "not_found_error" => 404,
        "conflict_error" => 409,
        "request_too_large" => 413,
        "rate_limit_error" => 429,
        "api_error" => 500,
        "timeout_error" => 504,
        "overloaded_error" => 529,
        _ => return None,
    };
    Some(status)
}

/// The SDK's status defaults (402 quota, 403 authentication, 413 invalid request,
/// 529 overloaded, other 5xx transient), with Anthropic's reset headers as the
/// rate limit's fallback hint.
fn class_for(status: u16, headers: &Headers, detail: String) -> ErrorClass {
    if status == 429 {
        return ErrorClass::RateLimited(Retry { hint: rate_limit_hint(headers), detail });
    }
    let response = HttpResponse { status, headers: headers.clone(), body: Vec::new() };
    class_for_status(&response, detail)
}

/// `retry-after(-ms)` when sent; else the latest `anthropic-ratelimit-*-reset`
/// instant, since we cannot tell which limit was hit.
fn rate_limit_hint(headers: &Headers) -> Option<RetryHint> {
    retry_hint(headers).or_else(|| {
        headers
            .iter()
            .filter(|(name, _)| is_reset_header(name))
            .filter_map(|(_, value)| rfc3339_unix_ms(value))
            .max()
            .map(RetryHint::AtUnixMs)
    })
}

fn is_reset_header(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    name.starts_with("anthropic-ratelimit-") && name.ends_with("-reset")
}

/// An `error` event in a 200 stream. Its `error.type` gives the status it would
/// have had outside a stream (`overloaded_error` → 529) and the class that status
/// means; an unknown type is transient, with no status.
pub fn in_band_error(fields: &ErrorFields) -> InBandError {
    let detail = truncate(format!("error event in a 200 stream: {}", fields.detail(200)));
    let status = fields.kind.as_deref().and_then(status_of_type);
    let class = match status {
        Some(status) => class_for(status, &Vec::new(), detail),
        None => ErrorClass::Transient(Retry { hint: None, detail }),
    };
    InBandError { status, status_from_prose: false, class }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::panic)] // a failing test should stop loudly
mod tests {
    use super::*;

    /// The direct surface, which most tests here are about.
    fn classify(response: &HttpResponse) -> ErrorClass {
        super::classify(Surface::Direct, response)
    }

    fn response(status: u16, headers: &[(&str, &str)], body: &str) -> HttpResponse {
        HttpResponse {
            status,
            headers: headers.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            body: body.as_bytes().to_vec(),
        }
    }

    fn class(status: u16, headers: &[(&str, &str)], body: &str) -> ErrorClass {
        classify(&response(status, headers, body))
    }

    fn error_body(kind: &str, message: &str) -> String {
        format!(
            r#"{{"type":"error","error":{{"type":"{kind}","message":"{message}"}},"request_id":"req_011CSHoEeqs5C35K2UUqR7Fy"}}"#
        )
    }

    #[test]
    fn documented_types_and_statuses() {
        let cases = [
            (400, "invalid_request_error", "invalid-request"),
            (401, "authentication_error", "authentication"),
            (402, "billing_error", "quota-exhausted"),
            (403, "permission_error", "authentication"),
            (404, "not_found_error", "not-found"),
            (409, "conflict_error", "transient"),
            (413, "request_too_large", "invalid-request"),
            (429, "rate_limit_error", "rate-limited"),
            (500, "api_error", "transient"),
            (504, "timeout_error", "transient"),
            (529, "overloaded_error", "overloaded"),
        ];
        for (status, kind, expected) in cases {
            let found = class(status, &[], &error_body(kind, "x"));
            assert_eq!(name(&found), expected, "{status} {kind}: {found:?}");
        }
    }

    fn name(class: &ErrorClass) -> &'static str {
        match class {
            ErrorClass::RateLimited(_) => "rate-limited",
            ErrorClass::Overloaded(_) => "overloaded",
            ErrorClass::QuotaExhausted(_) => "quota-exhausted",
            ErrorClass::Transient(_) => "transient",
            ErrorClass::Refused(_) => "refused",
            ErrorClass::InvalidRequest(_) => "invalid-request",
            ErrorClass::Authentication(_) => "authentication",
            ErrorClass::NotFound(_) => "not-found",
            ErrorClass::ContextOverflow(_) => "context-overflow",
            ErrorClass::Uncorrectable(_) => "uncorrectable",
        }
    }

    #[test]
    fn the_type_wins_over_the_status() {
        assert!(matches!(class(500, &[], &error_body("overloaded_error", "Overloaded")), ErrorClass::Overloaded(_)));
        assert!(matches!(class(400, &[], &error_body("not_found_error", "model: x")), ErrorClass::NotFound(_)));
        // An unknown type falls back on the status.
        assert!(matches!(class(503, &[], &error_body("brand_new_error", "x")), ErrorClass::Transient(_)));
    }

    #[test]
    fn a_low_credit_balance_is_quota_and_a_long_prompt_an_invalid_request() {
        let credit = error_body(
            "invalid_request_error",
            "Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to upgrade or purchase credits.",
        );
        assert!(matches!(class(400, &[], &credit), ErrorClass::QuotaExhausted(d) if d.contains("credit balance")));
        // The same words under another type, or another type's words, are not it.
        let other_type = error_body("api_error", "Your credit balance is too low");
        assert!(matches!(class(500, &[], &other_type), ErrorClass::Transient(_)));
        let long = error_body("invalid_request_error", "prompt is too long: 210000 tokens > 200000 maximum");
        assert!(matches!(class(400, &[], &long), ErrorClass::InvalidRequest(_)));
        // On an AWS surface, Anthropic's envelope from the model's service decides the same way.
        let mantle = super::classify(Surface::Mantle, &response(400, &[], &credit));
        assert!(matches!(mantle, ErrorClass::QuotaExhausted(_)), "{mantle:?}");
    }

    #[test]
    fn rate_limit_prefers_retry_after() {
        let headers = [("retry-after", "12"), ("anthropic-ratelimit-tokens-reset", "2026-01-01T12:00:30Z")];
        let found = class(429, &headers, &error_body("rate_limit_error", "slow down"));
        assert!(
            matches!(&found, ErrorClass::RateLimited(r) if r.hint == Some(RetryHint::DelayMs(12_000))),
            "{found:?}"
        );
    }

    #[test]
    fn rate_limit_falls_back_on_the_latest_reset() {
        let headers = [
            ("anthropic-ratelimit-requests-reset", "1994-11-06T08:49:37Z"),
            ("Anthropic-RateLimit-Input-Tokens-Reset", "1994-11-06T08:50:37.5Z"),
            ("anthropic-ratelimit-output-tokens-reset", "not a date"),
            ("anthropic-ratelimit-tokens-remaining", "0"),
        ];
        let found = class(429, &headers, &error_body("rate_limit_error", "slow down"));
        let ErrorClass::RateLimited(retry) = found else { panic!("{found:?}") };
        assert_eq!(retry.hint, Some(RetryHint::AtUnixMs(784_111_837_500)));
        assert!(retry.detail.contains("rate_limit_error"));
        let found = class(429, &[], &error_body("rate_limit_error", "slow down"));
        assert!(matches!(found, ErrorClass::RateLimited(Retry { hint: None, .. })));
    }

    #[test]
    fn detail_names_type_message_and_request_id() {
        let found = class(401, &[("request-id", "req_018E")], &error_body("authentication_error", "invalid x-api-key"));
        let ErrorClass::Authentication(detail) = found else { panic!("{found:?}") };
        assert_eq!(detail, "HTTP 401 type=authentication_error message=invalid x-api-key request-id=req_018E");
    }

    #[test]
    fn unreadable_bodies_fall_back_on_the_status() {
        assert!(matches!(class(413, &[], "<html>413 Request Entity Too Large</html>"), ErrorClass::InvalidRequest(_)));
        assert!(
            matches!(class(529, &[("retry-after", "3")], ""), ErrorClass::Overloaded(r) if r.hint == Some(RetryHint::DelayMs(3_000)))
        );
        let huge = format!(r#"{{"type":"error","error":{{"type":"api_error","message":"{}"}}}}"#, "x".repeat(1 << 20));
        let found = classify(&response(500, &[("request-id", "req_1")], &huge));
        assert!(matches!(&found, ErrorClass::Transient(r) if r.detail.len() <= 2_100), "{}", name(&found));
    }

    #[test]
    fn in_band_errors_take_their_status_from_the_type() {
        let cases = [
            ("overloaded_error", 529, "overloaded"),
            ("rate_limit_error", 429, "rate-limited"),
            ("api_error", 500, "transient"),
            ("invalid_request_error", 400, "invalid-request"),
        ];
        for (kind, status, expected) in cases {
            let error = in_band_error(&ErrorFields::parse(error_body(kind, "x").as_bytes()));
            assert_eq!((error.status, error.status_from_prose), (Some(status), false), "{kind}");
            assert_eq!(name(&error.class), expected, "{kind}");
        }
        // A status in prose never picks anything.
        let unknown = in_band_error(&ErrorFields::parse(error_body("mystery_error", "HTTP 429").as_bytes()));
        assert_eq!((unknown.status, unknown.status_from_prose), (None, false));
        assert!(matches!(&unknown.class, ErrorClass::Transient(r) if r.detail.contains("mystery_error")));
    }

    #[test]
    fn aws_surfaces_prefer_the_anthropic_envelope() {
        let throttled =
            [("x-amzn-ErrorType", "ThrottlingException:http://internal.amazon.com/coral/com.amazon.bedrock/")];
        for surface in [Surface::BedrockInvoke, Surface::Mantle] {
            let envelope = response(503, &throttled, &error_body("overloaded_error", "Overloaded"));
            let found = super::classify(surface, &envelope);
            assert!(matches!(found, ErrorClass::Overloaded(_)), "{surface:?} {found:?}");
        }
    }

    #[test]
    fn aws_surfaces_fall_back_on_the_aws_error_name() {
        let cases = [
            (429, "ThrottlingException", "rate-limited"),
            (400, "ValidationException", "invalid-request"),
            (403, "AccessDeniedException", "authentication"),
            (404, "ResourceNotFoundException", "not-found"),
        ];
        for surface in [Surface::BedrockInvoke, Surface::Mantle] {
            for (status, kind, expected) in cases {
                let aws = response(status, &[("x-amzn-errortype", kind)], r#"{"message":"Too many requests"}"#);
                let found = super::classify(surface, &aws);
                assert_eq!(name(&found), expected, "{surface:?} {kind}: {found:?}");
            }
            // A type this table does not know is no Anthropic envelope: AWS rules.
            let unknown = response(429, &[], &error_body("brand_new_error", "x"));
            assert_eq!(name(&super::classify(surface, &unknown)), "rate-limited");
        }
    }

    #[test]
    fn aws_request_id_goes_to_the_detail() {
        let found = super::classify(
            Surface::BedrockInvoke,
            &response(401, &[("x-amzn-requestid", "3f1c")], &error_body("authentication_error", "no")),
        );
        let ErrorClass::Authentication(detail) = found else { panic!("{found:?}") };
        assert!(detail.ends_with("request-id=3f1c"), "{detail}");
    }
}
