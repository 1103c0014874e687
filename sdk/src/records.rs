//! Constructors for the boundary records providers and their tests build most
//! often: the plain case, with every optional part empty.

use crate::types::{CallParams, ContentBlock, PreparedConversation, Turn, TurnRole};

impl Turn {
    /// A user turn without a cache breakpoint.
    pub fn user(content: Vec<ContentBlock>) -> Self {
        Self { role: TurnRole::User, content, cache: false }
    }

    /// An assistant turn without a cache breakpoint.
    pub fn assistant(content: Vec<ContentBlock>) -> Self {
        Self { role: TurnRole::Assistant, content, cache: false }
    }
}

impl PreparedConversation {
    /// These turns, with no system content, tools, tool choice or cache breakpoints.
    pub fn of(turns: Vec<Turn>) -> Self {
        Self { system: Vec::new(), cache_system: false, turns, tools: Vec::new(), tool_choice: None }
    }
}

impl CallParams {
    /// A call to `wire_model_id` writing `max_tokens`, with nothing else set.
    pub fn new(wire_model_id: impl Into<String>, max_tokens: u32) -> Self {
        Self {
            wire_model_id: wire_model_id.into(),
            max_tokens,
            thinking_budget: None,
            reasoning_effort: None,
            temperature: None,
            stop: Vec::new(),
            response_schema: None,
            stream: false,
        }
    }
}
