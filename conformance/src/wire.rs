//! What every operation's checks share: the shape an encoded request must have
//! (no credential, within the host's caps), the garbage bodies every `decode`
//! must call `malformed`, and the `classify` checks, which hold for a failed
//! response whichever operation it answered.

use serde_json::Value;

use crate::fixture::{Classified, CodecFailure, Hint, ProviderSummary, Response, WireRequest};
use crate::report::Report;
use crate::subject::{Answer, Fault, Operation, Subject};

/// How long a classification's detail may be: it goes to every log line.
pub const DETAIL_LIMIT: usize = 4_096;
/// The most headers the host copies out of one encoded request.
pub const HEADER_LIMIT: usize = 64;
/// The largest encoded body the host copies out of a component (no provider
/// takes more than 32 MB in one request).
pub const BODY_LIMIT: usize = 32 << 20;
/// Headers a component must never write: the host owns credentials.
const CREDENTIAL_HEADERS: [&str; 6] =
    ["authorization", "proxy-authorization", "x-api-key", "api-key", "x-goog-api-key", "x-amz-security-token"];

/// A request's body as JSON, after the shape checks every request must pass: an
/// HTTP method, a path, valid headers within the host's caps and none of them a
/// credential (neither a well-known one nor the one the key declares), a body
/// within the cap.
pub fn well_formed(request: &WireRequest, provider: &ProviderSummary) -> Result<Value, String> {
    let method_ok = !request.method.is_empty() && request.method.bytes().all(|b| b.is_ascii_uppercase());
    if !method_ok {
        return Err(format!("method {:?} is not an HTTP method", request.method));
    }
    let path = &request.path_and_query;
    if !path.starts_with('/') || path.bytes().any(|b| b.is_ascii_control() || b == b' ') {
        return Err(format!("path {path:?} must start with `/` and hold no spaces or control characters"));
    }
    if request.headers.len() > HEADER_LIMIT {
        return Err(format!("{} headers; the host takes at most {HEADER_LIMIT}", request.headers.len()));
    }
    for (name, value) in &request.headers {
        let name_ok = !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b));
        if !name_ok || value.bytes().any(|b| b == b'\r' || b == b'\n' || b == 0) {
            return Err(format!("header {name:?} is not a valid header"));
        }
        let lower = name.to_ascii_lowercase();
        let declared = provider.credential_header.as_deref().is_some_and(|h| h.eq_ignore_ascii_case(name));
        if declared || CREDENTIAL_HEADERS.contains(&lower.as_str()) {
            return Err(format!("the request carries `{name}`: credentials are the host's to add"));
        }
    }
    if request.body.len() > BODY_LIMIT {
        return Err(format!("the body is {} bytes; the host takes at most {BODY_LIMIT}", request.body.len()));
    }
    serde_json::from_slice(&request.body).map_err(|e| format!("the body is not JSON: {e}"))
}

/// Whether `path` names `wire_id`, as is or percent-encoded (Bedrock puts the
/// model id in the path, its `:` escaped).
pub fn path_names(path: &str, wire_id: &str) -> bool {
    path.contains(wire_id) || percent_decoded(path).is_some_and(|decoded| decoded.contains(wire_id))
}

/// `text` with every `%XX` escape decoded; `None` when that is not UTF-8.
fn percent_decoded(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let escaped = bytes.get(i + 1..i + 3).and_then(|hex| std::str::from_utf8(hex).ok());
        match (bytes[i], escaped.and_then(|hex| u8::from_str_radix(hex, 16).ok())) {
            (b'%', Some(byte)) => {
                out.push(byte);
                i += 3;
            }
            (byte, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8(out).ok()
}

/// An encoded request the case needs, or why there is none.
pub fn encoded(answer: Answer<WireRequest>) -> Result<WireRequest, String> {
    match answer {
        Err(fault) => Err(format!("fault: {}", fault.0)),
        Ok(Err(failure)) => Err(format!("refused to encode ({}): {}", failure.kind(), failure.reason())),
        Ok(Ok(request)) => Ok(request),
    }
}

pub fn require(found: bool, what: &str) -> Result<(), String> {
    if found { Ok(()) } else { Err(format!("the body does not carry {what}")) }
}

/// Bodies no dialect can read: each must decode as `malformed`.
pub fn garbage_bodies() -> Vec<(&'static str, Vec<u8>)> {
    vec![
        ("an empty body", Vec::new()),
        ("an HTML error page", b"<html><body>502 Bad Gateway</body></html>".to_vec()),
        ("invalid UTF-8", vec![0xff, 0xfe, 0x00, 0x80, 0xc3]),
        ("truncated JSON", br#"{"id":"x","choices":[{"message":{"content":"hel"#.to_vec()),
        ("a JSON array", b"[]".to_vec()),
        ("JSON null", b"null".to_vec()),
        ("JSON nested 100 000 deep", "[".repeat(100_000).into_bytes()),
    ]
}

/// A 200 with a garbage body, as the decode checks send it.
pub fn garbage_response(body: Vec<u8>) -> Response {
    Response::new(200, body).with_header("content-type", "application/json")
}

/// The verdict on decoding garbage: `malformed` passes; an answer (described by
/// `shown`), another codec error or a fault fails.
pub fn malformed<T>(answer: Answer<T>, shown: impl FnOnce(&T) -> String) -> Result<(), String> {
    match answer {
        Ok(Err(CodecFailure::Malformed(_))) => Ok(()),
        Ok(Err(failure)) => Err(format!("said `{}` instead of `malformed`", failure.kind())),
        Ok(Ok(decoded)) => Err(format!("decoded it into an answer: {}", shown(&decoded))),
        Err(fault) => Err(format!("fault: {}", fault.0)),
    }
}

/// (status, acceptable classes) with a body that is not JSON: status alone decides.
const STATUS_CLASSES: [(u16, &[&str]); 8] = [
    (400, &["invalid-request"]),
    (401, &["authentication"]),
    (403, &["authentication"]),
    (404, &["not-found"]),
    (429, &["rate-limited"]),
    (500, &["transient", "overloaded"]),
    (503, &["transient", "overloaded"]),
    (529, &["overloaded"]),
];

/// The classify checks of `operation` for `key`, each named after `prefix`
/// (empty for chat, whose check names predate the other operations).
pub async fn classify_checks<S: Subject>(
    subject: &S,
    operation: Operation,
    key: &str,
    prefix: &str,
    report: &mut Report,
) {
    for (status, classes) in STATUS_CLASSES {
        let response = Response::new(status, "upstream exploded").with_header("content-type", "text/plain");
        let result = classified(subject.classify(operation, key, &response).await).and_then(|found| {
            if classes.contains(&found.class.as_str()) {
                Ok(())
            } else {
                Err(format!("classified as `{}`, expected one of {classes:?}", found.class))
            }
        });
        report.record(key, format!("{prefix}classify: HTTP {status} with an unreadable body"), result);
    }

    for (what, value, hint) in [
        ("seconds", "7", Hint::DelayMs(7_000)),
        ("an HTTP date", "Wed, 21 Oct 2037 07:28:00 GMT", Hint::AtUnixMs(2_139_722_880_000)),
    ] {
        let response = Response::new(429, "{}").with_header("retry-after", value);
        let result = classified(subject.classify(operation, key, &response).await).and_then(|found| match found.hint {
            Some(found) if found == hint => Ok(()),
            other => Err(format!("hint {other:?}, expected {hint:?}")),
        });
        report.record(key, format!("{prefix}classify: retry-after in {what} becomes a hint"), result);
    }

    let huge = format!(r#"{{"error":{{"message":"{}","type":"server_error"}}}}"#, "x".repeat(1 << 20));
    let result = classified(subject.classify(operation, key, &Response::new(500, huge)).await).and_then(|found| {
        if found.detail.len() <= DETAIL_LIMIT {
            Ok(())
        } else {
            Err(format!("the detail is {} bytes; at most {DETAIL_LIMIT} go to a log line", found.detail.len()))
        }
    });
    report.record(key, format!("{prefix}classify: a 1 MiB error body gives a bounded detail"), result);

    for (what, body) in garbage_bodies() {
        let result = classified(subject.classify(operation, key, &Response::new(400, body)).await).map(|_| ());
        report.record(key, format!("{prefix}classify: {what} is not a fault"), result);
    }
}

fn classified(result: Result<Classified, Fault>) -> Result<Classified, String> {
    result.map_err(|fault| format!("fault: {}", fault.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_names_an_escaped_wire_id() {
        assert!(path_names("/model/cohere.embed-v4%3A0/invoke", "cohere.embed-v4:0"));
        assert!(path_names("/model/cohere.embed-v4:0/invoke", "cohere.embed-v4:0"));
        assert!(!path_names("/model/cohere.embed-v3/invoke", "cohere.embed-v4:0"));
        assert!(!path_names("/broken%ZZ%", "x"), "a stray `%` is kept, not a panic");
    }
}
