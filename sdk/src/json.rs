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

/// A sampling number as JSON, through its shortest decimal text: the call
/// parameters carry an `f32`, so 0.7 arrives as 0.699999988079071 in `f64`, and
/// a component that wrote that would send a number the caller never wrote.
/// `0.7f32` goes out as `0.7`. A number that is not finite is refused.
pub fn sampling_number(value: f32, what: &str) -> Result<serde_json::Value, CodecError> {
    let wide = value.to_string().parse::<f64>().unwrap_or(f64::from(value));
    serde_json::Number::from_f64(wide)
        .map(serde_json::Value::Number)
        .ok_or_else(|| CodecError::Unsupported(format!("{what} {value} is not finite")))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_sampling_number_goes_out_as_its_shortest_decimal() {
        assert_eq!(sampling_number(0.7, "temperature").unwrap().to_string(), "0.7");
        assert_eq!(sampling_number(0.3, "temperature").unwrap().to_string(), "0.3");
        assert_eq!(sampling_number(1.0, "temperature").unwrap().to_string(), "1.0");
        let refused = sampling_number(f32::NAN, "top_p").unwrap_err();
        assert!(matches!(refused, CodecError::Unsupported(ref reason) if reason.contains("top_p")), "{refused:?}");
    }
}
