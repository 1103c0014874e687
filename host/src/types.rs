//! The records a caller builds conversations from and reads answers with. They
//! are the WIT world's own records, re-exported: one set of types runs from the
//! gateway's ingress to the component, with no lossy copy in between.

pub use crate::wit::records::{
    AnswerBlock, CallParams, Capabilities, ChatResponse as DecodedResponse, CodecError, ContentBlock, CredentialShape,
    Effort, EmbeddingParams, EmbeddingPurpose, EmbeddingResponse, ErrorClass, FirstToken, HeaderCredential,
    HttpRequest, HttpResponse, InBandError, LeafBlock, Media, MediaSource, NativeAnswer, NativeDelta, NativeRequest,
    NativeSupport, PreparedConversation, ProviderInfo, Ranked, Refusal, RerankParams, RerankResponse, ResponseSchema,
    Retry, RetryHint, Sigv4, StopInfo, StopReason, StreamDelta, StreamEvent, StreamFraming, Thinking, TokenCandidate,
    ToolCallFragment, ToolCallStart, ToolChoice, ToolDefinition, ToolResult, ToolUse, Turn, TurnRole, Usage,
};

/// A conversation in the shape providers render: system content apart from the
/// turns. The gateway's ingress and embedding services build it alike.
pub type Conversation = PreparedConversation;

impl CallParams {
    /// A call to `wire_model_id` writing `max_tokens`, with nothing else set
    /// (the SDK's `CallParams::new`, for the host's side of the same record).
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

impl PreparedConversation {
    /// A conversation of one user turn holding `text`. Its system prefix is
    /// cached by default (the breakpoint only exists once system blocks do).
    pub fn user(text: impl Into<String>) -> Self {
        Self {
            system: Vec::new(),
            cache_system: true,
            turns: vec![Turn::user(vec![ContentBlock::Text(text.into())])],
            tools: Vec::new(),
            tool_choice: None,
        }
    }

    /// Adds a system block.
    pub fn with_system(mut self, text: impl Into<String>) -> Self {
        self.system.push(text.into());
        self
    }

    /// Appends a turn, merged into the last one when it has the same role, so turns
    /// alternate as providers expect. `cache` marks the (merged) turn as a
    /// prompt-cache breakpoint; a merge keeps a mark already there.
    pub fn push_turn(&mut self, role: TurnRole, content: Vec<ContentBlock>, cache: bool) {
        match self.turns.last_mut() {
            Some(last) if last.role == role => {
                last.content.extend(content);
                last.cache |= cache;
            }
            _ => self.turns.push(Turn { role, content, cache }),
        }
    }

    /// Offers a tool the model may call.
    pub fn with_tool(mut self, tool: ToolDefinition) -> Self {
        self.tools.push(tool);
        self
    }
}

/// The text blocks of some content, concatenated.
pub fn text_of(content: &[ContentBlock]) -> String {
    content
        .iter()
        .filter_map(|block| match block {
            ContentBlock::Text(text) => Some(text.as_str()),
            _ => None,
        })
        .collect()
}

impl Turn {
    pub fn user(content: Vec<ContentBlock>) -> Self {
        Self { role: TurnRole::User, content, cache: false }
    }

    pub fn assistant(content: Vec<ContentBlock>) -> Self {
        Self { role: TurnRole::Assistant, content, cache: false }
    }
}

impl Usage {
    /// The whole prompt: uncached input plus cache reads and writes.
    pub fn total_input(&self) -> u64 {
        self.input + self.cache_read + self.cache_write
    }
}

/// An effort as callers and the config spell it (`xhigh` is OpenAI's word for
/// the top rung).
pub fn effort_from_word(word: &str) -> Option<Effort> {
    match word {
        "minimal" => Some(Effort::Minimal),
        "low" => Some(Effort::Low),
        "medium" => Some(Effort::Medium),
        "high" => Some(Effort::High),
        "max" | "xhigh" => Some(Effort::Max),
        _ => None,
    }
}

/// An effort's word, as [`effort_from_word`] reads it back.
pub fn effort_name(effort: Effort) -> &'static str {
    match effort {
        Effort::Minimal => "minimal",
        Effort::Low => "low",
        Effort::Medium => "medium",
        Effort::High => "high",
        Effort::Max => "max",
    }
}
