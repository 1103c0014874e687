//! What every AWS Bedrock Runtime surface shares, whatever the body dialect
//! (Converse, or InvokeModel with a model's native body): the endpoint, SigV4
//! signing, the model path, the error names and what they mean, and the
//! event-stream frames that carry an error after the 200.
//!
//! Errors are `restJson1`: the error name rides the `x-amzn-errortype` header (or
//! the body's `__type` / `code`), the prose rides `message` / `Message`. The name
//! picks the class; the status decides only when the name is missing or unknown.
//! The prose is log detail and never picks anything.

use serde_json::Value;

use crate::errors::{ErrorFields, truncate};
use crate::http::{header, retry_hint};
use crate::types::{CredentialShape, ErrorClass, HttpResponse, InBandError, Retry, RetryHint, Sigv4, StreamEvent};

/// The runtime endpoint with the `{region}` placeholder the host fills from the resolved region.
pub const RUNTIME_ENDPOINT: &str = "https://bedrock-runtime.{region}.amazonaws.com";

/// SigV4 signing name of every Bedrock surface (not `bedrock-runtime`, the host prefix).
pub const SIGNING_SERVICE: &str = "bedrock";

/// Default credential id (the host's secret store record: access key id + secret).
pub const CREDENTIAL_ID: &str = "aws-access-key-id";

/// The geography prefixes of system inference-profile ids (`us.amazon.nova-pro-v1:0`).
const PROFILE_PREFIXES: [&str; 7] = ["us.", "eu.", "apac.", "jp.", "au.", "us-gov.", "global."];

/// `CredentialShape::AwsSigv4` for Bedrock.
pub fn credential_shape() -> CredentialShape {
    CredentialShape::AwsSigv4(Sigv4 {
        service: SIGNING_SERVICE.to_owned(),
        default_credential_id: CREDENTIAL_ID.to_owned(),
    })
}

/// `/model/{id}/{operation}` with the id percent-encoded for the path: an ARN's `/`
/// becomes `%2F` so it stays one segment; `:` goes raw, as the Anthropic SDK sends
/// it (the host signs the path as sent, so either spelling works).
pub fn model_path(wire_id: &str, operation: &str) -> String {
    let mut path = String::from("/model/");
    for byte in wire_id.bytes() {
        if byte.is_ascii_alphanumeric() || b"-._~:".contains(&byte) {
            path.push(char::from(byte));
        } else {
            path.push_str(&format!("%{byte:02X}"));
        }
    }
    path.push('/');
    path.push_str(operation);
    path
}

/// Whether a wire id is a Bedrock inference-profile id (geo prefix us./eu./apac./jp./au./us-gov./global.) — helper for `serves`.
pub fn has_profile_prefix(wire_id: &str) -> bool {
    PROFILE_PREFIXES.iter().any(|prefix| wire_id.starts_with(prefix))
}

/// The AWS error name: `x-amzn-errortype` header (any case), else body `__type` / `code`; cut from the first `:`, keep what follows `#`.
///
/// This is the AWS SDKs' rule: `ThrottlingException:http://internal.amazon.com/…`
/// and `com.amazon.coral#ThrottlingException` both name `ThrottlingException`.
pub fn error_type(response: &HttpResponse) -> Option<String> {
    let raw = match header(&response.headers, "x-amzn-errortype").filter(|value| !value.is_empty()) {
        Some(value) => value.to_owned(),
        None => body_error_type(&response.body)?,
    };
    let before_colon = raw.split(':').next().unwrap_or_default();
    let name = before_colon.split_once('#').map_or(before_colon, |(_, after)| after).trim();
    (!name.is_empty()).then(|| name.to_owned())
}

fn body_error_type(body: &[u8]) -> Option<String> {
    let value: Value = serde_json::from_slice(body).ok()?;
    ["__type", "code"].iter().find_map(|key| value.get(key).and_then(Value::as_str).map(str::to_owned))
}

/// A failed Bedrock response (any operation) → ErrorClass, by error type first, status second.
///
/// See [`class_of_type`] for each name's class and [`class_of_status`] for the
/// fallback. A `retry-after` header, when a proxy or a future Bedrock sends one,
/// becomes the retry hint: Bedrock documents no rate-limit headers of its own.
pub fn classify(response: &HttpResponse) -> ErrorClass {
    let kind = error_type(response);
    let detail = response_detail(response, kind.clone());
    let hint = retry_hint(&response.headers);
    match kind.as_deref().and_then(|kind| class_of_type(kind, hint, detail.clone())) {
        Some(class) => class,
        None => class_of_status(response.status, hint, detail),
    }
}

/// Status, error name, message and request id, bounded, for the server log.
fn response_detail(response: &HttpResponse, kind: Option<String>) -> String {
    let fields = ErrorFields { kind, code: None, message: ErrorFields::parse(&response.body).message, status: None };
    let line = fields.detail(response.status);
    match header(&response.headers, "x-amzn-requestid").filter(|id| !id.is_empty()) {
        Some(id) => truncate(format!("{line} request-id={id}")),
        None => line,
    }
}

/// The class of each documented Bedrock Runtime error name; `None` for a name this
/// table does not know, which then falls back on the status.
///
/// * `ThrottlingException` (429): the account's request or token rate → rate-limited.
/// * `ModelNotReadyException` (429, but the AWS SDKs mark it non-throttling and retry
///   it): the model is loading, not the account over its limit → transient, so it
///   does not slow every other caller down.
/// * `ServiceUnavailableException` (503): Bedrock's capacity signal for the model →
///   overloaded (the wider retry window and the throttle push).
/// * `InternalServerException` (500), `ModelTimeoutException` (408),
///   `ModelErrorException` / `ModelStreamErrorException` (424, the model itself
///   failed): faults that a retry may clear → transient.
/// * `ValidationException` (400) → invalid-request. An over-long prompt is a
///   `ValidationException` whose only mark is its prose, which never picks a class,
///   so it stays invalid-request (neither is retried).
/// * `ServiceQuotaExceededException` (400): a Bedrock service quota — tokens or
///   requests per minute (or per day) for a model — is used up. That is capacity,
///   not an exhausted account: it clears as the window passes ("Too many tokens,
///   please wait before trying again"), so it stays on the retryable path and feeds
///   the throttle → rate-limited. (An out-of-money account is never a service
///   quota on Bedrock: billing is AWS's, not the runtime's.)
/// * `AccessDeniedException` (IAM, or model access not granted),
///   `UnrecognizedClientException`, `InvalidSignatureException`,
///   `SignatureDoesNotMatch`, `ExpiredTokenException`, `IncompleteSignature`,
///   `MissingAuthenticationToken` → authentication: the credential or its rights.
/// * `ResourceNotFoundException` (404, unknown model or profile) → not-found.
fn class_of_type(kind: &str, hint: Option<RetryHint>, detail: String) -> Option<ErrorClass> {
    let retry = Retry { hint, detail };
    let class = match kind {
        "ThrottlingException" | "ServiceQuotaExceededException" => ErrorClass::RateLimited(retry),
        "ServiceUnavailableException" => ErrorClass::Overloaded(retry),
        "ModelNotReadyException"
        | "InternalServerException"
        | "ModelTimeoutException"
        | "ModelErrorException"
        | "ModelStreamErrorException" => ErrorClass::Transient(retry),
        "ValidationException" => ErrorClass::InvalidRequest(retry.detail),
        "AccessDeniedException"
        | "UnrecognizedClientException"
        | "InvalidSignatureException"
        | "SignatureDoesNotMatch"
        | "ExpiredTokenException"
        | "IncompleteSignature"
        | "MissingAuthenticationToken" => ErrorClass::Authentication(retry.detail),
        "ResourceNotFoundException" => ErrorClass::NotFound(retry.detail),
        _ => return None,
    };
    Some(class)
}

/// The class a status implies when no known error name says more: 429 rate-limited,
/// 401/403 authentication, 404 not-found, 408 and 5xx transient, other 4xx
/// invalid-request. 529 is overloaded: Bedrock never sends it, but a proxy in front
/// may, and it means overload everywhere it is used. Anything else (a 1xx or 3xx
/// reaching `classify`) is uncorrectable.
fn class_of_status(status: u16, hint: Option<RetryHint>, detail: String) -> ErrorClass {
    let retry = Retry { hint, detail };
    match status {
        429 => ErrorClass::RateLimited(retry),
        529 => ErrorClass::Overloaded(retry),
        401 | 403 => ErrorClass::Authentication(retry.detail),
        404 => ErrorClass::NotFound(retry.detail),
        408 | 500..=599 => ErrorClass::Transient(retry),
        400..=499 => ErrorClass::InvalidRequest(retry.detail),
        _ => ErrorClass::Uncorrectable(retry.detail),
    }
}

/// The HTTP status each error name is documented with (botocore's service model):
/// what an in-band exception would have been outside the stream.
fn status_of_type(kind: &str) -> Option<u16> {
    let status = match kind {
        "ValidationException" | "ServiceQuotaExceededException" => 400,
        "AccessDeniedException" => 403,
        "ResourceNotFoundException" => 404,
        "ModelTimeoutException" => 408,
        "ModelErrorException" | "ModelStreamErrorException" => 424,
        "ThrottlingException" | "ModelNotReadyException" => 429,
        "InternalServerException" => 500,
        "ServiceUnavailableException" => 503,
        _ => return None,
    };
    Some(status)
}

/// An AWS event-stream frame that is not an event (`:message-type` = `exception` or `error`) → the in-band error it means; None for `event` frames.
///
/// * `exception` frames name the error in `:exception-type` (the host also puts it
///   in `event.name`) with a lowercase first letter (`throttlingException`); the
///   class and status are those of the same error outside a stream. A
///   `modelStreamErrorException` carries the model's own status as
///   `originalStatusCode`, which is the status when present.
/// * `error` frames carry `:error-code` and `:error-message` headers; a code that
///   names a known error is classed as that error, any other is transient.
/// * Any other non-`event` message type is an error too, as botocore and the
///   Anthropic SDK treat it. A frame without `:message-type` is an event unless it
///   carries an `:exception-type`.
pub fn stream_exception(event: &StreamEvent) -> Option<InBandError> {
    let exception_type = header(&event.headers, ":exception-type");
    let message_type =
        header(&event.headers, ":message-type").or_else(|| exception_type.map(|_| "exception")).unwrap_or("event");
    match message_type {
        "event" => None,
        "exception" => Some(exception(event, exception_type.or(event.name.as_deref()).unwrap_or_default())),
        _ => Some(error_frame(event, message_type)),
    }
}

fn exception(event: &StreamEvent, wire_name: &str) -> InBandError {
    let kind = capitalized(wire_name);
    let payload: Option<Value> = serde_json::from_slice(&event.data).ok();
    let message = payload
        .as_ref()
        .map_or_else(|| ErrorFields::parse(&event.data).message, |value| ErrorFields::from_value(value).message);
    let original_status = payload
        .as_ref()
        .and_then(|value| value.get("originalStatusCode"))
        .and_then(Value::as_u64)
        .and_then(|status| u16::try_from(status).ok())
        .filter(|status| (100..=599).contains(status));
    let detail = in_band_detail("exception", &kind, message.as_deref());
    in_band(&kind, original_status, detail)
}

fn error_frame(event: &StreamEvent, message_type: &str) -> InBandError {
    let code = header(&event.headers, ":error-code").unwrap_or_default();
    let message =
        header(&event.headers, ":error-message").map(str::to_owned).or_else(|| ErrorFields::parse(&event.data).message);
    let detail = in_band_detail(message_type, code, message.as_deref());
    in_band(&capitalized(code), None, detail)
}

/// The class and status of a named in-band error: the name's class and documented
/// status (or the carried one), else transient with no status.
fn in_band(kind: &str, carried_status: Option<u16>, detail: String) -> InBandError {
    let status = carried_status.or_else(|| status_of_type(kind));
    let class =
        class_of_type(kind, None, detail.clone()).unwrap_or(ErrorClass::Transient(Retry { hint: None, detail }));
    InBandError { status, status_from_prose: false, class }
}

fn in_band_detail(message_type: &str, kind: &str, message: Option<&str>) -> String {
    let mut line = format!("{message_type} frame in a 200 stream: type={kind}");
    if let Some(message) = message {
        line.push_str(&format!(" message={message}"));
    }
    truncate(line)
}

/// `throttlingException` → `ThrottlingException`: event-stream names start lowercase.
fn capitalized(name: &str) -> String {
    let mut chars = name.chars();
    match chars.next() {
        Some(first) => first.to_ascii_uppercase().to_string() + chars.as_str(),
        None => String::new(),
    }
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

    fn detail(class: &ErrorClass) -> &str {
        match class {
            ErrorClass::RateLimited(retry) | ErrorClass::Overloaded(retry) | ErrorClass::Transient(retry) => {
                &retry.detail
            }
            ErrorClass::QuotaExhausted(detail)
            | ErrorClass::InvalidRequest(detail)
            | ErrorClass::Authentication(detail)
            | ErrorClass::NotFound(detail)
            | ErrorClass::ContextOverflow(detail)
            | ErrorClass::Uncorrectable(detail) => detail,
            ErrorClass::Refused(refusal) => refusal.explanation.as_deref().unwrap_or_default(),
        }
    }

    #[test]
    fn describes_bedrock() {
        assert_eq!(
            credential_shape(),
            CredentialShape::AwsSigv4(Sigv4 {
                service: "bedrock".into(),
                default_credential_id: "aws-access-key-id".into()
            })
        );
        assert_eq!(RUNTIME_ENDPOINT, "https://bedrock-runtime.{region}.amazonaws.com");
    }

    #[test]
    fn model_paths() {
        let cases = [
            ("amazon.nova-pro-v1:0", "converse", "/model/amazon.nova-pro-v1:0/converse"),
            (
                "us.meta.llama3-3-70b-instruct-v1:0",
                "converse-stream",
                "/model/us.meta.llama3-3-70b-instruct-v1:0/converse-stream",
            ),
            (
                "arn:aws:bedrock:us-east-1:123456789012:inference-profile/us.amazon.nova-lite-v1:0",
                "invoke",
                "/model/arn:aws:bedrock:us-east-1:123456789012:inference-profile%2Fus.amazon.nova-lite-v1:0/invoke",
            ),
            ("odd id?#%", "converse", "/model/odd%20id%3F%23%25/converse"),
            ("é", "converse", "/model/%C3%A9/converse"),
        ];
        for (id, operation, path) in cases {
            assert_eq!(model_path(id, operation), path, "{id}");
        }
    }

    #[test]
    fn profile_prefixes() {
        let cases = [
            ("us.amazon.nova-pro-v1:0", true),
            ("eu.meta.llama3-2-3b-instruct-v1:0", true),
            ("apac.amazon.nova-lite-v1:0", true),
            ("jp.anthropic.claude-sonnet-4-5-20250929-v1:0", true),
            ("au.anthropic.claude-sonnet-4-5-20250929-v1:0", true),
            ("us-gov.anthropic.claude-3-5-sonnet-20240620-v1:0", true),
            ("global.anthropic.claude-sonnet-4-5-20250929-v1:0", true),
            ("amazon.nova-pro-v1:0", false),
            ("user.model", false),
            ("arn:aws:bedrock:us-east-1::foundation-model/amazon.nova-pro-v1:0", false),
        ];
        for (id, expected) in cases {
            assert_eq!(has_profile_prefix(id), expected, "{id}");
        }
    }

    /// Response headers, body, and the error name they give.
    type ErrorTypeCase<'a> = (&'a [(&'a str, &'a str)], &'a str, Option<&'a str>);

    #[test]
    fn error_type_sources_and_sanitizing() {
        let cases: [ErrorTypeCase; 8] = [
            (
                &[("X-Amzn-ErrorType", "ThrottlingException:http://internal.amazon.com/coral/com.amazon.bedrock/")],
                "{}",
                Some("ThrottlingException"),
            ),
            (&[("x-amzn-errortype", "ValidationException")], r#"{"__type":"Other"}"#, Some("ValidationException")),
            (
                &[],
                r#"{"__type":"com.amazon.coral.service#ExpiredTokenException","message":"x"}"#,
                Some("ExpiredTokenException"),
            ),
            (&[], r#"{"code":"AccessDeniedException"}"#, Some("AccessDeniedException")),
            (&[], r#"{"__type":"a#B:c","code":"D"}"#, Some("B")),
            (&[("x-amzn-errortype", "")], r#"{"code":500}"#, None),
            (&[], "<html>502</html>", None),
            (&[("x-amzn-errortype", ":http://x")], "{}", None),
        ];
        for (headers, body, expected) in cases {
            assert_eq!(error_type(&response(400, headers, body)).as_deref(), expected, "{headers:?} {body}");
        }
    }

    #[test]
    fn every_error_type_has_its_class() {
        let cases = [
            ("ThrottlingException", 429, "rate-limited"),
            ("ModelNotReadyException", 429, "transient"),
            ("ServiceUnavailableException", 503, "overloaded"),
            ("InternalServerException", 500, "transient"),
            ("ModelTimeoutException", 408, "transient"),
            ("ModelErrorException", 424, "transient"),
            ("ModelStreamErrorException", 424, "transient"),
            ("ValidationException", 400, "invalid-request"),
            ("ServiceQuotaExceededException", 400, "rate-limited"),
            ("AccessDeniedException", 403, "authentication"),
            ("UnrecognizedClientException", 403, "authentication"),
            ("InvalidSignatureException", 403, "authentication"),
            ("SignatureDoesNotMatch", 403, "authentication"),
            ("ExpiredTokenException", 403, "authentication"),
            ("IncompleteSignature", 403, "authentication"),
            ("MissingAuthenticationToken", 403, "authentication"),
            ("ResourceNotFoundException", 404, "not-found"),
        ];
        for (kind, status, expected) in cases {
            let header = format!("{kind}:http://internal.amazon.com/coral/com.amazon.bedrock/");
            let found = classify(&response(status, &[("x-amzn-errortype", &header)], r#"{"message":"x"}"#));
            assert_eq!(name(&found), expected, "{kind} by header");
            let body = format!(r#"{{"__type":"{kind}","Message":"x"}}"#);
            // The name wins over a status a proxy may have changed.
            assert_eq!(name(&classify(&response(500, &[], &body))), expected, "{kind} by body");
        }
    }

    #[test]
    fn unknown_types_fall_back_on_the_status() {
        let cases = [
            (429, "rate-limited"),
            (529, "overloaded"),
            (500, "transient"),
            (502, "transient"),
            (503, "transient"),
            (401, "authentication"),
            (403, "authentication"),
            (404, "not-found"),
            (408, "transient"),
            (400, "invalid-request"),
            (402, "invalid-request"),
            (413, "invalid-request"),
            (302, "uncorrectable"),
        ];
        for (status, expected) in cases {
            let body = r#"{"__type":"BrandNewException","message":"x"}"#;
            assert_eq!(name(&classify(&response(status, &[], body))), expected, "{status}");
            assert_eq!(name(&classify(&response(status, &[], "upstream exploded"))), expected, "{status} text");
        }
    }

    #[test]
    fn retry_after_is_honoured() {
        let throttled = response(
            429,
            &[("x-amzn-errortype", "ThrottlingException"), ("retry-after", "7")],
            r#"{"message":"Too many tokens, please wait before trying again."}"#,
        );
        let found = classify(&throttled);
        assert!(matches!(&found, ErrorClass::RateLimited(r) if r.hint == Some(RetryHint::DelayMs(7_000))), "{found:?}");
        let unavailable = response(503, &[("Retry-After", "Wed, 21 Oct 2037 07:28:00 GMT")], "{}");
        let found = classify(&unavailable);
        assert!(
            matches!(&found, ErrorClass::Transient(r) if r.hint == Some(RetryHint::AtUnixMs(2_139_722_880_000))),
            "{found:?}"
        );
        let bare = classify(&response(429, &[("x-amzn-errortype", "ThrottlingException")], "{}"));
        assert!(matches!(bare, ErrorClass::RateLimited(Retry { hint: None, .. })));
    }

    #[test]
    fn detail_names_type_message_and_request_id_and_is_bounded() {
        let found = classify(&response(
            400,
            &[("x-amzn-errortype", "ValidationException:http://x"), ("x-amzn-RequestId", "3f1c-aa")],
            r#"{"Message":"Malformed input request"}"#,
        ));
        assert_eq!(
            detail(&found),
            "HTTP 400 type=ValidationException message=Malformed input request request-id=3f1c-aa"
        );
        let huge = format!(r#"{{"message":"{}"}}"#, "x".repeat(1 << 20));
        let found = classify(&response(500, &[("x-amzn-requestid", "r1")], &huge));
        assert!(detail(&found).len() <= 2_100, "{}", detail(&found).len());
    }

    fn frame(headers: &[(&str, &str)], payload: &str) -> StreamEvent {
        let find = |wanted: &str| headers.iter().find(|(name, _)| *name == wanted).map(|(_, v)| v.to_string());
        StreamEvent {
            name: find(":event-type").or_else(|| find(":exception-type")),
            headers: headers.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            data: payload.as_bytes().to_vec(),
        }
    }

    fn exception_frame(kind: &str, payload: &str) -> StreamEvent {
        frame(
            &[(":message-type", "exception"), (":exception-type", kind), (":content-type", "application/json")],
            payload,
        )
    }

    #[test]
    fn events_are_not_exceptions() {
        let event = frame(
            &[(":message-type", "event"), (":event-type", "contentBlockDelta")],
            r#"{"contentBlockIndex":0,"delta":{"text":"Hi"}}"#,
        );
        assert_eq!(stream_exception(&event), None);
        assert_eq!(stream_exception(&frame(&[(":event-type", "messageStop")], "{}")), None);
    }

    #[test]
    fn in_band_exceptions() {
        let cases = [
            ("throttlingException", r#"{"message":"Too many requests"}"#, Some(429), "rate-limited"),
            ("modelStreamErrorException", r#"{"message":"x","originalStatusCode":503}"#, Some(503), "transient"),
            ("modelStreamErrorException", r#"{"message":"x"}"#, Some(424), "transient"),
            ("internalServerException", r#"{"message":"x"}"#, Some(500), "transient"),
            ("serviceUnavailableException", r#"{"message":"x"}"#, Some(503), "overloaded"),
            ("validationException", r#"{"message":"x"}"#, Some(400), "invalid-request"),
            ("modelTimeoutException", r#"{"message":"x"}"#, Some(408), "transient"),
            ("brandNewException", r#"{"message":"HTTP 429"}"#, None, "transient"),
            ("throttlingException", "not json", Some(429), "rate-limited"),
        ];
        for (kind, payload, status, expected) in cases {
            let error = stream_exception(&exception_frame(kind, payload)).unwrap();
            assert_eq!((error.status, error.status_from_prose), (status, false), "{kind} {payload}");
            assert_eq!(name(&error.class), expected, "{kind}");
            assert!(detail(&error.class).contains(&capitalized(kind)), "{kind}");
        }
        let throttled = stream_exception(&exception_frame("throttlingException", r#"{"message":"slow down"}"#));
        let ErrorClass::RateLimited(retry) = throttled.unwrap().class else { panic!("not rate-limited") };
        assert_eq!(retry.detail, "exception frame in a 200 stream: type=ThrottlingException message=slow down");
    }

    #[test]
    fn error_frames() {
        let internal =
            frame(&[(":message-type", "error"), (":error-code", "InternalFailure"), (":error-message", "boom")], "");
        let error = stream_exception(&internal).unwrap();
        assert_eq!(error.status, None);
        assert!(
            matches!(&error.class, ErrorClass::Transient(r) if r.detail == "error frame in a 200 stream: type=InternalFailure message=boom")
        );
        let throttled = frame(&[(":message-type", "error"), (":error-code", "ThrottlingException")], "");
        let error = stream_exception(&throttled).unwrap();
        assert_eq!(error.status, Some(429));
        assert!(matches!(error.class, ErrorClass::RateLimited(_)));
        // Any non-event message type is an error, and an exception type alone marks one.
        assert!(stream_exception(&frame(&[(":message-type", "surprise")], "")).is_some());
        let unmarked = frame(&[(":exception-type", "validationException")], r#"{"message":"x"}"#);
        assert!(matches!(stream_exception(&unmarked).unwrap().class, ErrorClass::InvalidRequest(_)));
    }

    #[test]
    fn in_band_detail_is_bounded() {
        let payload = format!(r#"{{"message":"{}"}}"#, "y".repeat(1 << 20));
        let error = stream_exception(&exception_frame("internalServerException", &payload)).unwrap();
        assert!(detail(&error.class).len() <= 2_100);
    }
}
