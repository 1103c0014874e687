//! A GenerateContentResponse read into typed fields, not a `serde_json::Value`
//! tree: every stream event is one, and building a tree's maps and strings for
//! each would be most of the decoder's work. Only a call's `args` stays a tree
//! (it is re-serialized as the call's arguments). Fields Weir does not read
//! (`safetyRatings`, `citationMetadata`, `avgLogprobs`, …) are skipped; a field
//! of another type fails the parse, and the body is malformed.

use std::borrow::Cow;

use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_json::Value;
use weir_sdk::types::CodecError;

/// One `generateContent` body, or one `streamGenerateContent` event.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GenerateContentResponse<'a> {
    #[serde(borrow, default)]
    pub candidates: Option<Vec<Candidate<'a>>>,
    #[serde(borrow, default)]
    pub prompt_feedback: Option<PromptFeedback<'a>>,
    #[serde(default)]
    pub usage_metadata: Option<UsageMetadata>,
    #[serde(borrow, default)]
    pub model_version: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    pub response_id: Option<Cow<'a, str>>,
    /// Present only on an error object (inside a stream's 200).
    #[serde(default)]
    pub error: Option<IgnoredAny>,
}

impl<'a> GenerateContentResponse<'a> {
    /// Parses a body; only a JSON object is one.
    pub fn parse(body: &'a [u8]) -> Result<Self, CodecError> {
        if body.trim_ascii_start().first() != Some(&b'{') {
            return Err(CodecError::Malformed("response is not a JSON object".to_owned()));
        }
        serde_json::from_slice(body)
            .map_err(|e| CodecError::Malformed(format!("response is not a GenerateContentResponse: {e}")))
    }

    /// The first candidate (Weir asks for one), if any.
    pub fn candidate(&self) -> Option<&Candidate<'a>> {
        self.candidates.as_ref().and_then(|candidates| candidates.first())
    }
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Candidate<'a> {
    #[serde(borrow, default)]
    pub content: Option<Content<'a>>,
    #[serde(borrow, default)]
    pub finish_reason: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    pub finish_message: Option<Cow<'a, str>>,
}

impl<'a> Candidate<'a> {
    /// Its parts; none when it has no content (a safety stop).
    pub fn parts(&self) -> &[Part<'a>] {
        self.content.as_ref().and_then(|content| content.parts.as_deref()).unwrap_or_default()
    }
}

#[derive(Debug, Deserialize)]
pub struct Content<'a> {
    #[serde(borrow, default)]
    pub parts: Option<Vec<Part<'a>>>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Part<'a> {
    #[serde(borrow, default)]
    pub text: Option<Cow<'a, str>>,
    #[serde(default)]
    pub thought: Option<bool>,
    #[serde(borrow, default)]
    pub thought_signature: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    pub function_call: Option<FunctionCall<'a>>,
}

#[derive(Debug, Deserialize)]
pub struct FunctionCall<'a> {
    #[serde(borrow, default)]
    pub name: Option<Cow<'a, str>>,
    #[serde(default)]
    pub args: Option<Value>,
    #[serde(borrow, default)]
    pub id: Option<Cow<'a, str>>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PromptFeedback<'a> {
    #[serde(borrow, default)]
    pub block_reason: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    pub block_reason_message: Option<Cow<'a, str>>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UsageMetadata {
    #[serde(default)]
    pub prompt_token_count: Option<u64>,
    #[serde(default)]
    pub candidates_token_count: Option<u64>,
    #[serde(default)]
    pub thoughts_token_count: Option<u64>,
    #[serde(default)]
    pub cached_content_token_count: Option<u64>,
    #[serde(default)]
    pub tool_use_prompt_token_count: Option<u64>,
}

/// A present, non-empty string, owned.
pub fn owned(text: &Option<Cow<'_, str>>) -> Option<String> {
    text.as_deref().filter(|text| !text.is_empty()).map(str::to_owned)
}
