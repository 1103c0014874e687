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
