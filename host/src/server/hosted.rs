//! Hosted tools — ones a provider would run itself (web search, code
//! execution, file search, MCP, ...) — that a route drops itself: those of a
//! streamed Responses call (its writer has no events for their items yet).
//! Each is dropped (named in `x-weir-dropped-tools`, the record noting
//! `tool_dropped:TYPE`) or, under `hosted_tools = "refuse"`, the request is
//! refused with `capability_mismatch` before any call. Every other hosted
//! tool is a native field (`server_tools.<type>`) whose provider decides, with
//! the same policy (`call::native`).

use super::ApiError;
use crate::catalog::HostedTools;
use crate::failure::Category;

/// Lets the hosted tool of type `kind` at `tools[index]` be dropped, or
/// refuses the request under `hosted_tools = "refuse"`.
pub(super) fn admit(policy: HostedTools, index: usize, kind: &str) -> Result<(), ApiError> {
    match policy {
        HostedTools::Drop => Ok(()),
        HostedTools::Refuse => Err(ApiError::new(
            Category::CapabilityMismatch,
            format!(
                "tools[{index}]: the hosted tool `{kind}` cannot be handed to the provider \
                 (`hosted_tools = \"refuse\"`); leave it out"
            ),
        )),
    }
}

/// The record's note for a dropped hosted tool of type `kind`.
pub(super) fn dropped_note(kind: &str) -> String {
    format!("tool_dropped:{kind}")
}
