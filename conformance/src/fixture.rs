//! The kit's neutral records: what a case feeds a provider and what it reads back.
//!
//! They mirror the WIT world's records but belong to neither side of the boundary,
//! so one fixture file drives a provider natively (through `weir-sdk`'s types) and
//! through the host (through wasmtime's): each side converts from these. Tool
//! arguments and schemas are JSON values here, serialized only at the boundary.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A conversation as the host prepares it: system content apart from the turns.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Conversation {
    #[serde(default)]
    pub system: Vec<String>,
    #[serde(default)]
    pub cache_system: bool,
    pub turns: Vec<Turn>,
    #[serde(default)]
    pub tools: Vec<Tool>,
    #[serde(default)]
    pub tool_choice: Option<ToolChoice>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    User,
    Assistant,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Turn {
    pub role: Role,
    pub content: Vec<Block>,
    #[serde(default)]
    pub cache: bool,
}

/// A content block, tagged by `type` in fixture files.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum Block {
    Text { text: String },
    Image(Media),
    Document(Media),
    ToolUse { id: String, name: String, input: Value },
    ToolResult { tool_use_id: String, content: Vec<Leaf>, is_error: bool },
    Thinking { text: String, signature: Option<String>, redacted: bool },
}

/// The blocks a tool result may hold (the world has no recursive types).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum Leaf {
    Text { text: String },
    Image(Media),
    Document(Media),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Media {
    pub mime_type: String,
    pub source: Source,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    /// Base64 of the raw bytes, no `data:` prefix.
    Base64(String),
    Url(String),
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Tool {
    pub name: String,
    #[serde(default)]
    pub description: String,
    /// JSON Schema of the arguments.
    pub parameters: Value,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolChoice {
    Auto,
    None,
    Required,
    Named(String),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Effort {
    Minimal,
    Low,
    Medium,
    High,
    Max,
}

/// Everything about a call that is not the conversation.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {
    pub model: String,
    pub max_tokens: u32,
    #[serde(default)]
    pub thinking_budget: Option<u32>,
    #[serde(default)]
    pub effort: Option<Effort>,
    #[serde(default)]
    pub temperature: Option<f32>,
    #[serde(default)]
    pub stop: Vec<String>,
    #[serde(default)]
    pub response_schema: Option<ResponseSchema>,
    #[serde(default)]
    pub stream: bool,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResponseSchema {
    pub name: String,
    pub schema: Value,
}

/// An HTTP response as the host hands it to a component. In a fixture file the
/// body is given as `json` or as raw `text`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(from = "ResponseFixture")]
pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Response {
    pub fn new(status: u16, body: impl Into<Vec<u8>>) -> Self {
        Self { status, headers: Vec::new(), body: body.into() }
    }

    pub fn with_header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.to_owned(), value.to_owned()));
        self
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct ResponseFixture {
    status: u16,
    #[serde(default)]
    headers: Vec<(String, String)>,
    #[serde(default)]
    json: Option<Value>,
    #[serde(default)]
    text: Option<String>,
}

impl From<ResponseFixture> for Response {
    fn from(fixture: ResponseFixture) -> Self {
        let body = match (fixture.json, fixture.text) {
            (Some(json), _) => json.to_string().into_bytes(),
            (None, Some(text)) => text.into_bytes(),
            (None, None) => Vec::new(),
        };
        Self { status: fixture.status, headers: fixture.headers, body }
    }
}

/// The HTTP request a component encoded (without credentials).
#[derive(Debug, Clone, PartialEq)]
pub struct WireRequest {
    pub method: String,
    pub path_and_query: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

/// A decoded answer, summarized for comparison: fixture expectations are JSON
/// subsets of this record serialized.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Decoded {
    pub content: Vec<Block>,
    /// Every text block joined, for expectations that do not care how text was split.
    pub text: String,
    /// The stop reason in the world's spelling, e.g. `end-turn`, `tool-use`.
    pub stop: String,
    pub raw_stop: Option<String>,
    pub usage: Option<Usage>,
    pub refusal: Option<Refusal>,
    pub served_model: Option<String>,
    pub request_id: Option<String>,
}

impl Decoded {
    /// The summary of these blocks; `text` is derived from them.
    pub fn new(content: Vec<Block>, stop: String) -> Self {
        let text = content
            .iter()
            .filter_map(|block| match block {
                Block::Text { text } => Some(text.as_str()),
                _ => None,
            })
            .collect();
        Self { content, text, stop, raw_stop: None, usage: None, refusal: None, served_model: None, request_id: None }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Usage {
    pub input: u64,
    pub output: u64,
    pub cache_read: u64,
    pub cache_write: u64,
    pub reasoning: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Refusal {
    pub category: Option<String>,
    pub explanation: Option<String>,
}

/// What a component said a failed response means.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Classified {
    /// The error class in the world's spelling, e.g. `rate-limited`.
    pub class: String,
    pub hint: Option<Hint>,
    /// The raw detail (or refusal explanation) meant for the server log.
    pub detail: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Hint {
    DelayMs(u64),
    AtUnixMs(u64),
}

/// Why a component declined, in the world's two cases.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CodecFailure {
    Unsupported(String),
    Malformed(String),
}

impl CodecFailure {
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Unsupported(_) => "unsupported",
            Self::Malformed(_) => "malformed",
        }
    }

    pub fn reason(&self) -> &str {
        match self {
            Self::Unsupported(reason) | Self::Malformed(reason) => reason,
        }
    }
}

/// What a provider key declares about itself, as far as the kit checks it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProviderSummary {
    pub key: String,
    pub default_endpoint: Option<String>,
    /// The header the host puts the secret in, when the credential is a header.
    pub credential_header: Option<String>,
    pub streaming: bool,
}

// ------------------------------------------------------------------ embeddings

/// What the vectors are for, as `embedding-purpose` spells it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Purpose {
    #[default]
    Document,
    Query,
}

/// One embeddings batch's parameters (`embedding-params`): the wire id, the
/// purpose (document unless a case says otherwise) and the width asked for, if any.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EmbedParams {
    pub model: String,
    #[serde(default)]
    pub purpose: Purpose,
    #[serde(default)]
    pub dimensions: Option<u32>,
}

/// A decoded embeddings answer, summarized for comparison: fixture expectations
/// are JSON subsets of this record serialized.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DecodedEmbeddings {
    /// How many vectors came back.
    pub count: usize,
    /// Their common length; `None` when there are none or their lengths differ.
    pub width: Option<usize>,
    /// Each `f32` as the shortest decimal that reads back as it (what a provider
    /// writes), so a fixture compares the numbers of its own body exactly.
    pub vectors: Vec<Vec<f64>>,
    pub input_tokens: Option<u64>,
    pub served_model: Option<String>,
    pub request_id: Option<String>,
}

impl DecodedEmbeddings {
    pub fn new(
        vectors: &[Vec<f32>],
        input_tokens: Option<u64>,
        served_model: Option<String>,
        request_id: Option<String>,
    ) -> Self {
        let width = match vectors.split_first() {
            Some((first, rest)) if rest.iter().all(|vector| vector.len() == first.len()) => Some(first.len()),
            _ => None,
        };
        let vectors: Vec<Vec<f64>> =
            vectors.iter().map(|vector| vector.iter().map(|number| shortest(*number)).collect()).collect();
        Self { count: vectors.len(), width, vectors, input_tokens, served_model, request_id }
    }
}

/// `number` as the `f64` of its shortest round-tripping decimal text (`0.1f32`
/// becomes `0.1`, not `0.10000000149011612`). A non-finite value stays as it is.
fn shortest(number: f32) -> f64 {
    number.to_string().parse().unwrap_or(f64::from(number))
}

// ------------------------------------------------------------------ rerank

/// The rerank parameters (`rerank-params`).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RerankParams {
    pub model: String,
    #[serde(default)]
    pub top_n: Option<u32>,
}

/// One ranked document: its position in the request and its score.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Ranked {
    pub index: u32,
    pub relevance_score: f64,
}

/// A decoded rerank answer, summarized for comparison like [`Decoded`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DecodedRanking {
    /// Best first, as the provider ranked them.
    pub results: Vec<Ranked>,
    pub input_tokens: Option<u64>,
    pub search_units: Option<u64>,
    pub served_model: Option<String>,
    pub request_id: Option<String>,
}
