//! What an embeddings answer and a rerank answer read alike: an error object
//! sent with a 2xx status, the billed input tokens, the request id.

use serde_json::Value;
use weir_sdk::errors::ErrorFields;
use weir_sdk::http::header;
use weir_sdk::types::{CodecError, HttpResponse};

use crate::response::text;

/// A 2xx body that is an error object (`error` present, or vLLM's older flat
/// `"object": "error"`) is malformed, not `what`; its detail goes to the log.
pub fn refuse_error_object(
    response: &HttpResponse,
    error: bool,
    object: Option<&Value>,
    what: &str,
) -> Result<(), CodecError> {
    if !error && object.and_then(Value::as_str) != Some("error") {
        return Ok(());
    }
    let detail = ErrorFields::parse(&response.body).detail(response.status);
    Err(CodecError::Malformed(format!("HTTP {} body is an error object, not {what}: {detail}", response.status)))
}

/// `usage.prompt_tokens`, else `usage.total_tokens`: embeddings and rankings
/// generate nothing, so the two agree where both are sent (some servers send
/// only the total: Jina, older vLLM).
pub fn input_tokens(usage: Option<&Value>) -> Option<u64> {
    let usage = usage?;
    usage.get("prompt_tokens").and_then(Value::as_u64).or_else(|| usage.get("total_tokens").and_then(Value::as_u64))
}

/// `x-request-id`, else the body's `id` (vLLM).
pub fn request_id(response: &HttpResponse, id: Option<&Value>) -> Option<String> {
    header(&response.headers, "x-request-id").filter(|id| !id.is_empty()).map(str::to_owned).or_else(|| text(id))
}
