//! What a failure means: non-2xx responses, and error frames inside a 200 stream.
//!
//! Categories come from structured fields only (status, `error.type`,
//! `error.code`). The `message` is prose that servers reword at will, so it goes
//! to the log as detail and never picks a category.

use serde_json::Value;
use weir_sdk::errors::{ErrorFields, class_for_status, refusal};
use weir_sdk::http::{go_duration_ms, header, retry_hint};
use weir_sdk::types::{ErrorClass, Headers, HttpResponse, InBandError, Retry, RetryHint};

/// Classifies a non-2xx response.
pub fn classify(response: &HttpResponse) -> ErrorClass {
    let fields = ErrorFields::parse(&response.body);
    let detail = fields.detail(response.status);
    classify_status(response, &fields, detail)
}

/// The order matters: OpenAI sends "out of credits" as a 429, so quota is checked
/// before the rate limit it would otherwise look like.
fn classify_status(response: &HttpResponse, fields: &ErrorFields, detail: String) -> ErrorClass {
    let status = response.status;
    if is_quota(fields) || status == 402 {
        return ErrorClass::QuotaExhausted(detail);
    }
    if status == 429 {
        let hint = rate_limit_hint(&response.headers);
        return ErrorClass::RateLimited(Retry { hint, detail });
    }
    if let Some(code) = content_filter_code(fields) {
        return ErrorClass::Refused(refusal(Some(code.to_owned()), Some(detail)));
    }
    if is_context_overflow(fields) {
        return ErrorClass::ContextOverflow(detail);
    }
    if has_word(fields, "model_not_found") || status == 404 {
        return ErrorClass::NotFound(detail);
    }
    if status == 401 || status == 403 {
        return ErrorClass::Authentication(detail);
    }
    class_for_status(response, detail)
}

/// `retry-after(-ms)` when sent; else OpenAI's reset durations, the later of the
/// two since we cannot tell which limit was hit.
fn rate_limit_hint(headers: &Headers) -> Option<RetryHint> {
    retry_hint(headers).or_else(|| {
        let requests = header(headers, "x-ratelimit-reset-requests").and_then(go_duration_ms);
        let tokens = header(headers, "x-ratelimit-reset-tokens").and_then(go_duration_ms);
        requests.max(tokens).map(RetryHint::DelayMs)
    })
}

fn is_quota(fields: &ErrorFields) -> bool {
    has_word(fields, "insufficient_quota")
}

/// A prompt the provider's safety filter rejected: Azure OpenAI's 400
/// `content_filter`, OpenAI's `content_policy_violation`. Never worth retrying on
/// the same model, so it is a refusal, not an invalid request.
fn content_filter_code(fields: &ErrorFields) -> Option<&'static str> {
    ["content_filter", "content_policy_violation"].into_iter().find(|word| has_word(fields, word))
}

/// OpenAI's code, or llama.cpp's type.
fn is_context_overflow(fields: &ErrorFields) -> bool {
    has_word(fields, "context_length_exceeded") || has_word(fields, "exceed_context_size_error")
}

/// Whether `error.type` or `error.code` is exactly this word.
fn has_word(fields: &ErrorFields, word: &str) -> bool {
    fields.kind.as_deref() == Some(word) || fields.code.as_deref() == Some(word)
}

/// Whether a 200 body or stream frame is an error object rather than a completion:
/// a non-null top-level `error`, or the flat `{"object":"error"}` of older vLLM.
pub fn is_error_object(value: &Value) -> bool {
    value.get("error").is_some_and(|error| !error.is_null())
        || value.get("object").and_then(Value::as_str) == Some("error")
}

/// An error frame inside a 200 stream. A structured status classifies like an HTTP
/// status. A status found only in the prose is reported (flagged as such) but
/// does not pick the class: the frame is then transient unless a structured
/// type/code says quota or context overflow, which retrying cannot fix.
pub fn in_band_error(fields: &ErrorFields) -> InBandError {
    let detail = format!("error frame in a 200 stream: {}", fields.detail(200));
    if let Some(status) = fields.status {
        let response = HttpResponse { status, headers: Vec::new(), body: Vec::new() };
        return InBandError {
            status: Some(status),
            status_from_prose: false,
            class: classify_status(&response, fields, detail),
        };
    }
    let prose_status = fields.message.as_deref().and_then(status_in_prose);
    InBandError {
        status: prose_status,
        status_from_prose: prose_status.is_some(),
        class: class_without_status(fields, detail),
    }
}

fn class_without_status(fields: &ErrorFields, detail: String) -> ErrorClass {
    if is_quota(fields) {
        ErrorClass::QuotaExhausted(detail)
    } else if is_context_overflow(fields) {
        ErrorClass::ContextOverflow(detail)
    } else {
        ErrorClass::Transient(Retry { hint: None, detail })
    }
}

/// The first stand-alone 4xx/5xx number in a message ("Error code: 503", "(429)"),
/// skipping digits that are part of a longer number, a decimal or a word.
fn status_in_prose(message: &str) -> Option<u16> {
    let bytes = message.as_bytes();
    (0..bytes.len()).find_map(|start| status_at(bytes, start))
}

fn status_at(bytes: &[u8], start: usize) -> Option<u16> {
    let digits = bytes.get(start..start + 3)?;
    if !digits.iter().all(u8::is_ascii_digit) || joined_before(bytes, start) || joined_after(bytes, start + 3) {
        return None;
    }
    let status = digits.iter().fold(0_u16, |number, digit| number * 10 + u16::from(digit - b'0'));
    (400..=599).contains(&status).then_some(status)
}

/// Whether the byte before `start` continues a word or number (`x503`, `1.503`, `1,503`).
fn joined_before(bytes: &[u8], start: usize) -> bool {
    let Some(previous) = start.checked_sub(1).and_then(|i| bytes.get(i)) else {
        return false;
    };
    let separator_after_digit = matches!(previous, b'.' | b',')
        && start.checked_sub(2).and_then(|i| bytes.get(i)).is_some_and(u8::is_ascii_digit);
    previous.is_ascii_alphanumeric() || *previous == b'_' || separator_after_digit
}

/// Whether the byte at `end` continues a word or number (`503x`, `503.5`, `503,000`).
fn joined_after(bytes: &[u8], end: usize) -> bool {
    let Some(next) = bytes.get(end) else {
        return false;
    };
    let separator_before_digit = matches!(next, b'.' | b',') && bytes.get(end + 1).is_some_and(u8::is_ascii_digit);
    next.is_ascii_alphanumeric() || *next == b'_' || separator_before_digit
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::panic)] // a failing test should stop loudly
mod tests {
    use super::*;

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

    const QUOTA: &str = r#"{"error":{"message":"You exceeded your current quota, please check your plan and billing details.","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}"#;
    const RATE_LIMIT: &str = r#"{"error":{"message":"Rate limit reached for gpt-4o in organization org-abc on tokens per min (TPM): Limit 30000, Used 14567, Requested 24754. Please try again in 18.642s.","type":"tokens","param":null,"code":"rate_limit_exceeded"}}"#;

    #[test]
    fn insufficient_quota_429_is_quota_not_rate_limit() {
        let class = class(429, &[("retry-after", "20")], QUOTA);
        assert!(matches!(&class, ErrorClass::QuotaExhausted(d) if d.contains("insufficient_quota")), "{class:?}");
        // Older responses had `code: null`; the type alone decides.
        let old = r#"{"error":{"message":"You exceeded your current quota","type":"insufficient_quota","param":null,"code":null}}"#;
        assert!(matches!(super::classify(&response(429, &[], old)), ErrorClass::QuotaExhausted(_)));
        assert!(matches!(super::classify(&response(402, &[], "")), ErrorClass::QuotaExhausted(_)));
    }

    #[test]
    fn rate_limit_with_retry_after() {
        let class = class(429, &[("retry-after", "19")], RATE_LIMIT);
        let ErrorClass::RateLimited(retry) = class else { panic!("{class:?}") };
        assert_eq!(retry.hint, Some(RetryHint::DelayMs(19_000)));
        assert!(retry.detail.contains("rate_limit_exceeded"));
    }

    #[test]
    fn rate_limit_with_reset_headers_only() {
        let headers = [
            ("x-ratelimit-limit-requests", "500"),
            ("x-ratelimit-remaining-requests", "499"),
            ("x-ratelimit-reset-requests", "120ms"),
            ("x-ratelimit-reset-tokens", "18.642s"),
        ];
        let class = class(429, &headers, RATE_LIMIT);
        assert!(
            matches!(&class, ErrorClass::RateLimited(r) if r.hint == Some(RetryHint::DelayMs(18_642))),
            "{class:?}"
        );
        let only_requests = class_of_429(&[("x-ratelimit-reset-requests", "6m0s")]);
        assert_eq!(only_requests, Some(RetryHint::DelayMs(360_000)));
        assert_eq!(class_of_429(&[]), None);
    }

    fn class_of_429(headers: &[(&str, &str)]) -> Option<RetryHint> {
        match class(429, headers, RATE_LIMIT) {
            ErrorClass::RateLimited(retry) => retry.hint,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn authentication() {
        let invalid_key = r#"{"error":{"message":"Incorrect API key provided: sk-abc***xyz. You can find your API key at https://platform.openai.com/account/api-keys.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}"#;
        assert!(matches!(class(401, &[], invalid_key), ErrorClass::Authentication(_)));
        let region = r#"{"error":{"code":"unsupported_country_region_territory","message":"Country, region, or territory not supported","param":null,"type":"request_forbidden"}}"#;
        assert!(matches!(class(403, &[], region), ErrorClass::Authentication(_)));
    }

    #[test]
    fn not_found() {
        let body = r#"{"error":{"message":"The model `gpt-5-turbo` does not exist or you do not have access to it.","type":"invalid_request_error","param":null,"code":"model_not_found"}}"#;
        assert!(matches!(class(404, &[], body), ErrorClass::NotFound(_)));
        // The code decides even when a proxy changed the status.
        assert!(matches!(class(400, &[], body), ErrorClass::NotFound(_)));
        let ollama = r#"{"error":{"message":"model \"llama9\" not found, try pulling it first","type":"not_found_error","param":null,"code":null}}"#;
        assert!(matches!(class(404, &[], ollama), ErrorClass::NotFound(_)));
    }

    #[test]
    fn context_overflow() {
        let openai = r#"{"error":{"message":"This model's maximum context length is 128000 tokens. However, your messages resulted in 130012 tokens. Please reduce the length of the messages.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}"#;
        assert!(matches!(class(400, &[], openai), ErrorClass::ContextOverflow(_)));
        let llama_cpp = r#"{"error":{"code":400,"message":"the request exceeds the available context size, try increasing it","type":"exceed_context_size_error","n_prompt_tokens":5021,"n_ctx":4096}}"#;
        assert!(matches!(class(400, &[], llama_cpp), ErrorClass::ContextOverflow(_)));
    }

    #[test]
    fn invalid_request() {
        let body = r#"{"error":{"message":"Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.","type":"invalid_request_error","param":"max_tokens","code":"unsupported_parameter"}}"#;
        let class = class(400, &[], body);
        assert!(matches!(&class, ErrorClass::InvalidRequest(d) if d.contains("unsupported_parameter")), "{class:?}");
    }

    #[test]
    fn server_errors_are_transient() {
        let server = r#"{"error":{"message":"The server had an error while processing your request. Sorry about that!","type":"server_error","param":null,"code":null}}"#;
        assert!(matches!(class(500, &[], server), ErrorClass::Transient(_)));
        let overloaded = r#"{"error":{"message":"The engine is currently overloaded, please try again later","type":"server_error","param":null,"code":null}}"#;
        let class_503 = class(503, &[("retry-after", "2")], overloaded);
        assert!(
            matches!(&class_503, ErrorClass::Transient(r) if r.hint == Some(RetryHint::DelayMs(2_000))),
            "{class_503:?}"
        );
        let html = "<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n<center><h1>502 Bad Gateway</h1></center>\r\n</body>\r\n</html>\r\n";
        let class_502 = class(502, &[], html);
        assert!(
            matches!(&class_502, ErrorClass::Transient(r) if r.detail.contains("502 Bad Gateway")),
            "{class_502:?}"
        );
    }

    #[test]
    fn vllm_integer_codes() {
        let bad = r#"{"error":{"message":"This model's maximum context length is 4096 tokens. However, you requested 5000 tokens.","type":"BadRequestError","param":null,"code":400}}"#;
        // Prose says "context length", but no structured field does: invalid request.
        assert!(matches!(class(400, &[], bad), ErrorClass::InvalidRequest(_)));
        let missing = r#"{"error":{"message":"The model `llama-9` does not exist.","type":"NotFoundError","param":"model","code":404}}"#;
        assert!(matches!(class(404, &[], missing), ErrorClass::NotFound(_)));
        let flat = r#"{"object":"error","message":"boom","type":"InternalServerError","param":null,"code":500}"#;
        assert!(matches!(class(500, &[], flat), ErrorClass::Transient(_)));
    }

    #[test]
    fn prose_never_picks_the_class() {
        let body = r#"{"error":{"message":"You exceeded your current quota: rate limit 429","type":"invalid_request_error","param":null,"code":null}}"#;
        assert!(matches!(class(400, &[], body), ErrorClass::InvalidRequest(_)));
    }

    #[test]
    fn in_band_structured_status() {
        let frame = ErrorFields::parse(
            br#"{"error":{"message":"Too many requests","type":"RateLimitError","param":null,"code":429}}"#,
        );
        let error = in_band_error(&frame);
        assert_eq!(error.status, Some(429));
        assert!(!error.status_from_prose);
        assert!(matches!(error.class, ErrorClass::RateLimited(_)));
        let llama_cpp = ErrorFields::parse(
            br#"{"code":400,"message":"the request exceeds the available context size, try increasing it","type":"exceed_context_size_error"}"#,
        );
        assert!(matches!(in_band_error(&llama_cpp).class, ErrorClass::ContextOverflow(_)));
    }

    #[test]
    fn in_band_status_in_prose_is_flagged_and_transient() {
        let frame = ErrorFields::parse(br#"{"error":{"message":"Error code: 429 - upstream rate limited","type":"api_error","param":null,"code":null}}"#);
        let error = in_band_error(&frame);
        assert_eq!(error.status, Some(429));
        assert!(error.status_from_prose);
        assert!(matches!(error.class, ErrorClass::Transient(_)));
    }

    #[test]
    fn in_band_without_status() {
        let frame = ErrorFields::parse(
            br#"{"error": {"message": "The server had an error while processing your request. Sorry about that!", "type": "server_error"}}"#,
        );
        let error = in_band_error(&frame);
        assert_eq!(error.status, None);
        assert!(!error.status_from_prose);
        let ErrorClass::Transient(retry) = error.class else { panic!("{:?}", error.class) };
        assert!(retry.detail.contains("server_error"));
        let quota = in_band_error(&ErrorFields::parse(QUOTA.as_bytes()));
        assert!(matches!(quota.class, ErrorClass::QuotaExhausted(_)));
    }

    #[test]
    fn prose_status_extraction() {
        assert_eq!(status_in_prose("Error code: 503"), Some(503));
        assert_eq!(status_in_prose("upstream returned (429)."), Some(429));
        assert_eq!(status_in_prose("HTTP 500: boom"), Some(500));
        assert_eq!(status_in_prose("Limit 30000, Used 14567. Please try again in 1.503s."), None);
        assert_eq!(status_in_prose("model qwen-405b failed"), None);
        assert_eq!(status_in_prose("1,500 tokens"), None);
        assert_eq!(status_in_prose("status 200"), None);
        assert_eq!(status_in_prose(""), None);
        assert_eq!(status_in_prose("42"), None);
    }

    #[test]
    fn content_filter_is_a_refusal() {
        let body = br#"{"error":{"message":"The response was filtered due to the prompt triggering content management policy.","type":null,"param":"prompt","code":"content_filter","status":400}}"#;
        let response = HttpResponse { status: 400, headers: Vec::new(), body: body.to_vec() };
        match classify(&response) {
            ErrorClass::Refused(refusal) => {
                assert_eq!(refusal.category.as_deref(), Some("content_filter"))
            }
            other => panic!("expected a refusal, got {other:?}"),
        }
    }

    /// Azure OpenAI's prompt filter: a 400 whose `code` is `content_filter`,
    /// with the categories in `innererror.content_filter_result`. A refusal,
    /// its category the code; the prose stays detail for the log.
    #[test]
    fn azure_prompt_filter_400_is_a_refusal() {
        let body = r#"{"error":{"message":"The response was filtered due to the prompt triggering Azure OpenAI's content management policy. Please modify your prompt and retry.","type":null,"param":"prompt","code":"content_filter","status":400,"innererror":{"code":"ResponsibleAIPolicyViolation","content_filter_result":{"hate":{"filtered":false,"severity":"safe"},"jailbreak":{"filtered":true,"detected":true},"self_harm":{"filtered":false,"severity":"safe"},"sexual":{"filtered":false,"severity":"safe"},"violence":{"filtered":true,"severity":"high"}}}}}"#;
        let class = class(400, &[], body);
        let ErrorClass::Refused(refusal) = class else { panic!("{class:?}") };
        assert_eq!(refusal.category.as_deref(), Some("content_filter"));
    }

    /// Azure's own error bodies carry a code word (or the status as text) and
    /// no `type`: a deployment the resource does not have, a wrong key.
    #[test]
    fn azure_deployment_not_found_and_a_wrong_key() {
        let missing = r#"{"error":{"code":"DeploymentNotFound","message":"The API deployment for this resource does not exist. If you created the deployment within the last 5 minutes, please wait a moment and try again."}}"#;
        assert!(matches!(class(404, &[], missing), ErrorClass::NotFound(_)));
        let key = r#"{"error":{"code":"401","message":"Access denied due to invalid subscription key or wrong API endpoint. Make sure to provide a valid key for an active subscription and use a correct regional API endpoint for your resource."}}"#;
        assert!(matches!(class(401, &[], key), ErrorClass::Authentication(_)));
    }

    /// Azure's 429 names its wait in `retry-after-ms` and `retry-after`, with
    /// the remaining quota in `x-ratelimit-remaining-*`; the millisecond one wins.
    #[test]
    fn azure_rate_limit_takes_its_retry_after_ms() {
        let body = r#"{"error":{"code":"429","message":"Requests to the ChatCompletions_Create Operation under Azure OpenAI API version 2024-10-21 have exceeded token rate limit of your current OpenAI S0 pricing tier. Please retry after 6 seconds."}}"#;
        let headers = [
            ("retry-after-ms", "5850"),
            ("retry-after", "6"),
            ("x-ratelimit-remaining-requests", "0"),
            ("x-ratelimit-remaining-tokens", "0"),
        ];
        let class = class(429, &headers, body);
        let ErrorClass::RateLimited(retry) = class else { panic!("{class:?}") };
        assert_eq!(retry.hint, Some(RetryHint::DelayMs(5850)));
        let seconds_only = super::classify(&response(429, &[("retry-after", "6")], body));
        assert!(
            matches!(&seconds_only, ErrorClass::RateLimited(r) if r.hint == Some(RetryHint::DelayMs(6000))),
            "{seconds_only:?}"
        );
    }
}
