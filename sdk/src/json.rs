//! JSON bodies in and out.

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::types::CodecError;

/// Serializes a request body. Serialization of plain data cannot fail; if it
/// somehow does, the call fails as unsupported rather than sending garbage.
pub fn to_body<T: Serialize>(value: &T) -> Result<Vec<u8>, CodecError> {
    serde_json::to_vec(value).map_err(|e| CodecError::Unsupported(format!("cannot serialize body: {e}")))
}

/// Parses a response body, reporting a malformed one with the parser's reason.
pub fn from_body<T: DeserializeOwned>(body: &[u8]) -> Result<T, CodecError> {
    serde_json::from_slice(body).map_err(|e| CodecError::Malformed(format!("response is not the expected JSON: {e}")))
}

/// Parses a JSON text the host handed in (tool arguments, schemas).
pub fn parse_value(text: &str, what: &str) -> Result<serde_json::Value, CodecError> {
    serde_json::from_str(text).map_err(|e| CodecError::Unsupported(format!("{what} is not valid JSON: {e}")))
}

/// A sampling number as JSON, exactly as the host handed it. Since
/// weir:provider 0.5.0 the call parameters carry an `f64`, the caller's own
/// number, so the caller's 0.3 is written as 0.3 (serde_json prints the
/// shortest decimal that reads back as the same `f64`). One helper for every
/// component so that each refuses a number that is not finite alike.
pub fn sampling_number(value: f64, what: &str) -> Result<serde_json::Value, CodecError> {
    serde_json::Number::from_f64(value)
        .map(serde_json::Value::Number)
        .ok_or_else(|| CodecError::Unsupported(format!("{what} {value} is not finite")))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_sampling_number_goes_out_as_the_caller_wrote_it() {
        assert_eq!(sampling_number(0.7, "temperature").unwrap().to_string(), "0.7");
        assert_eq!(sampling_number(0.3, "temperature").unwrap().to_string(), "0.3");
        assert_eq!(sampling_number(1.0, "temperature").unwrap().to_string(), "1.0");
        // What an f32 made of 0.3 is written as what it is: the helper adds
        // nothing and takes nothing away.
        assert_eq!(sampling_number(f64::from(0.3_f32), "temperature").unwrap().to_string(), "0.30000001192092896");
        let refused = sampling_number(f64::NAN, "top_p").unwrap_err();
        assert!(matches!(refused, CodecError::Unsupported(ref reason) if reason.contains("top_p")), "{refused:?}");
    }
}
