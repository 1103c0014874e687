//! The OpenAI answer shapes the gateway sends, as typed structs serialized
//! straight to bytes: a `chat.completion` and a `chat.completion.chunk`. Every
//! call and every streamed chunk is one of these, so they are not built as
//! `serde_json::Value` trees first (a map and an owned string per field, then
//! a walk to serialize them). Fields are borrowed from the answer.

use serde::Serialize;

use crate::types::Usage;

/// A whole answer.
#[derive(Debug, Serialize)]
pub struct Completion<'a> {
    pub id: String,
    pub object: &'static str,
    pub created: u64,
    pub model: &'a str,
    pub choices: [CompletionChoice<'a>; 1],
    pub usage: Option<UsageCounts>,
}

#[derive(Debug, Serialize)]
pub struct CompletionChoice<'a> {
    pub index: u32,
    pub message: Message<'a>,
    /// Always `null`: Weir does not return log-probabilities on this route.
    pub logprobs: Option<()>,
    pub finish_reason: &'static str,
}

#[derive(Debug, Serialize)]
pub struct Message<'a> {
    pub role: &'static str,
    /// `null` when the answer has no text.
    pub content: Option<String>,
    pub refusal: Option<&'a str>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall<'a>>,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub reasoning_content: String,
}

#[derive(Debug, Serialize)]
pub struct ToolCall<'a> {
    pub id: &'a str,
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub function: Function<'a>,
}

#[derive(Debug, Serialize)]
pub struct Function<'a> {
    pub name: &'a str,
    pub arguments: &'a str,
}

/// Usage the OpenAI way: `prompt_tokens` is the whole prompt, cached tokens a
/// subset of it.
#[derive(Debug, Serialize)]
pub struct UsageCounts {
    prompt_tokens: u64,
    completion_tokens: u64,
    total_tokens: u64,
    prompt_tokens_details: CachedTokens,
    completion_tokens_details: ReasoningTokens,
}

#[derive(Debug, Serialize)]
struct CachedTokens {
    cached_tokens: u64,
}

#[derive(Debug, Serialize)]
struct ReasoningTokens {
    reasoning_tokens: u64,
}

impl From<&Usage> for UsageCounts {
    fn from(usage: &Usage) -> Self {
        let prompt = usage.total_input();
        UsageCounts {
            prompt_tokens: prompt,
            completion_tokens: usage.output,
            total_tokens: prompt + usage.output,
            prompt_tokens_details: CachedTokens { cached_tokens: usage.cache_read },
            completion_tokens_details: ReasoningTokens { reasoning_tokens: usage.reasoning.unwrap_or(0) },
        }
    }
}

/// One streamed chunk: choice 0's delta.
#[derive(Debug, Serialize)]
pub struct Chunk<'a> {
    pub id: &'a str,
    pub object: &'static str,
    pub created: u64,
    pub model: &'a str,
    pub choices: [ChunkChoice<'a>; 1],
}

/// The chunk after the last delta when the caller asked for usage: no choice,
/// and the usage (`null` when the provider reported none).
#[derive(Debug, Serialize)]
pub struct UsageChunk<'a> {
    pub id: &'a str,
    pub object: &'static str,
    pub created: u64,
    pub model: &'a str,
    pub choices: [ChunkChoice<'a>; 0],
    pub usage: Option<UsageCounts>,
}

#[derive(Debug, Serialize)]
pub struct ChunkChoice<'a> {
    pub index: u32,
    pub delta: Delta<'a>,
    pub logprobs: Option<()>,
    pub finish_reason: Option<&'static str>,
}

/// A chunk's delta: only the fields it sets.
#[derive(Debug, Default, Serialize)]
pub struct Delta<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub role: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub content: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reasoning_content: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_calls: Option<[ToolCallDelta<'a>; 1]>,
}

/// A call's first chunk carries its id, type and name; later ones only more
/// argument text.
#[derive(Debug, Serialize)]
pub struct ToolCallDelta<'a> {
    pub index: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<&'a str>,
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    pub kind: Option<&'static str>,
    pub function: FunctionDelta<'a>,
}

#[derive(Debug, Serialize)]
pub struct FunctionDelta<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<&'a str>,
    pub arguments: &'a str,
}
