//! A chat call as the library's callers see it: what they ask, what they get.

use std::time::{Duration, SystemTime};

use crate::types::{
    ContentBlock, Conversation, Effort, Refusal, ResponseSchema, StopReason, ToolUse, Usage,
};

/// One chat call, addressed to a catalog id.
#[derive(Debug, Clone, PartialEq)]
pub struct ChatRequest {
    /// The catalog id (never a provider's wire name).
    pub model: String,
    pub conversation: Conversation,
    /// The declared output budget; absent falls back to the catalog entry's.
    pub max_output_tokens: Option<u32>,
    pub reasoning_effort: Option<Effort>,
    pub temperature: Option<f32>,
    pub stop: Vec<String>,
    pub response_schema: Option<ResponseSchema>,
    /// When the caller stops waiting. Admission fails at once if capacity cannot
    /// free up before it, instead of parking to find out.
    pub deadline: Option<tokio::time::Instant>,
}

impl ChatRequest {
    pub fn new(model: impl Into<String>, conversation: Conversation) -> Self {
        Self {
            model: model.into(),
            conversation,
            max_output_tokens: None,
            reasoning_effort: None,
            temperature: None,
            stop: Vec::new(),
            response_schema: None,
            deadline: None,
        }
    }

    pub fn max_output_tokens(mut self, tokens: u32) -> Self {
        self.max_output_tokens = Some(tokens);
        self
    }
}

/// A normalized answer, stamped by the host.
#[derive(Debug, Clone, PartialEq)]
pub struct ChatResponse {
    /// The catalog id that was called, never the provider's echo.
    pub model: String,
    pub provider: String,
    pub content: Vec<ContentBlock>,
    pub stop_reason: StopReason,
    pub raw_stop_reason: Option<String>,
    pub usage: Option<Usage>,
    pub refusal: Option<Refusal>,
    /// The model name the provider echoed, for the log.
    pub served_model: Option<String>,
    pub request_id: Option<String>,
    /// The output ceiling sent on the wire.
    pub requested_max_tokens: u32,
    pub attempts: u32,
    pub latency: Duration,
    pub ended_at: SystemTime,
}

impl ChatResponse {
    /// The answer's text blocks, concatenated.
    pub fn text(&self) -> String {
        self.content
            .iter()
            .filter_map(|block| match block {
                ContentBlock::Text(text) => Some(text.as_str()),
                _ => None,
            })
            .collect()
    }

    /// The tool calls the model asked for, in order.
    pub fn tool_calls(&self) -> Vec<&ToolUse> {
        self.content
            .iter()
            .filter_map(|block| match block {
                ContentBlock::ToolUse(call) => Some(call),
                _ => None,
            })
            .collect()
    }
}
