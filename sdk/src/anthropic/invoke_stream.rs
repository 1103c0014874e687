//! InvokeModelWithResponseStream's `chunk` payload: `{"bytes": "<base64>", "p": "…"}`,
//! where `bytes` is exactly one Messages API stream event as JSON (the `data:` of
//! an SSE event; its name is not sent, the JSON `type` says it) and `p` is
//! random-length padding that hides the event's size. The host has already cut
//! the AWS event-stream frames; this only unwraps what one carries.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::Value;

use crate::types::CodecError;

/// The Messages stream event a `chunk` payload carries.
pub(super) fn chunk_event(payload: &[u8]) -> Result<Value, CodecError> {
    let chunk: Value = serde_json::from_slice(payload)
        .map_err(|e| CodecError::Malformed(format!("event-stream chunk is not JSON: {e}")))?;
    let encoded = chunk
        .get("bytes")
        .and_then(Value::as_str)
        .ok_or_else(|| CodecError::Malformed("event-stream chunk has no `bytes` string".to_owned()))?;
    let event = STANDARD
        .decode(encoded)
        .map_err(|e| CodecError::Malformed(format!("event-stream chunk `bytes` is not base64: {e}")))?;
    serde_json::from_slice(&event)
        .map_err(|e| CodecError::Malformed(format!("event-stream chunk does not hold a JSON event: {e}")))
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::panic)] // a failing test should stop loudly
mod tests {
    use serde_json::json;

    use super::*;

    fn malformed(payload: &str) -> String {
        match chunk_event(payload.as_bytes()) {
            Err(CodecError::Malformed(message)) => message,
            other => panic!("expected malformed, got {other:?}"),
        }
    }

    #[test]
    fn unwraps_base64_with_padding_and_ignores_p() {
        // `{"type":"ping"}` is 15 bytes: no padding; `{"type":"message_stop"}` needs some.
        let payload = r#"{"bytes":"eyJ0eXBlIjoicGluZyJ9","p":"abcdefghijklmnopqrstuvwxyzABCDEF"}"#;
        assert_eq!(chunk_event(payload.as_bytes()).unwrap(), json!({"type": "ping"}));
        let padded = format!(r#"{{"bytes":"{}","p":"ab"}}"#, STANDARD.encode(r#"{"type":"message_stop"}"#));
        assert!(padded.contains("=\""), "{padded}");
        assert_eq!(chunk_event(padded.as_bytes()).unwrap(), json!({"type": "message_stop"}));
    }

    #[test]
    fn malformed_chunks_say_what_is_wrong() {
        assert!(malformed("not json").contains("not JSON"));
        assert!(malformed(r#"{"p":"abc"}"#).contains("no `bytes`"));
        assert!(malformed(r#"{"bytes":"***"}"#).contains("not base64"));
        assert!(malformed(&format!(r#"{{"bytes":"{}"}}"#, STANDARD.encode("{\"type\":"))).contains("JSON event"));
    }
}
