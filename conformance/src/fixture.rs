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
    pub temperature: Option<f64>,
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

/// A fixture's body as bytes: its `json` serialized when given (it wins), else
/// its `text`, else nothing.
fn body_bytes(json: Option<Value>, text: Option<String>) -> Vec<u8> {
    match (json, text) {
        (Some(json), _) => json.to_string().into_bytes(),
        (None, Some(text)) => text.into_bytes(),
        (None, None) => Vec::new(),
    }
}

impl From<ResponseFixture> for Response {
    fn from(fixture: ResponseFixture) -> Self {
        let body = body_bytes(fixture.json, fixture.text);
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
    /// How the key's streams are framed: what a stream case must give.
    pub framing: Framing,
    /// Which media sources the key declares it takes (weir:provider 0.5.0's
    /// `inline-images`, `image-urls`, `inline-documents`, `document-urls`):
    /// what each media case's outcome is compared with.
    pub media: MediaSources,
    /// Whether the key declares `thinking`.
    pub thinking: bool,
}

/// The media flags of a key's declaration, by their WIT names.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MediaSources {
    pub inline_images: bool,
    pub image_urls: bool,
    pub inline_documents: bool,
    pub document_urls: bool,
}

/// One media flag (see [`MediaSources`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MediaFlag {
    InlineImages,
    ImageUrls,
    InlineDocuments,
    DocumentUrls,
}

impl MediaFlag {
    /// The flag's WIT name, as reports name it.
    pub fn name(self) -> &'static str {
        match self {
            Self::InlineImages => "inline-images",
            Self::ImageUrls => "image-urls",
            Self::InlineDocuments => "inline-documents",
            Self::DocumentUrls => "document-urls",
        }
    }
}

impl MediaSources {
    pub fn declares(self, flag: MediaFlag) -> bool {
        match flag {
            MediaFlag::InlineImages => self.inline_images,
            MediaFlag::ImageUrls => self.image_urls,
            MediaFlag::InlineDocuments => self.inline_documents,
            MediaFlag::DocumentUrls => self.document_urls,
        }
    }
}

// ------------------------------------------------------------------ streams

/// How a provider key's streams are framed (`stream-framing`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// `text/event-stream`.
    Sse,
    /// `application/vnd.amazon.eventstream` (Bedrock).
    AwsEventStream,
}

impl Framing {
    /// The WIT enum case's name, as reports print it.
    pub fn name(self) -> &'static str {
        match self {
            Self::Sse => "sse",
            Self::AwsEventStream => "aws-event-stream",
        }
    }
}

/// One transport event as the host hands it to a stream decoder (`stream-event`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamEvent {
    /// SSE `event:` name, or the event-stream `:event-type` (else `:exception-type`).
    pub name: Option<String>,
    /// Event-stream headers as text; empty for SSE.
    pub headers: Vec<(String, String)>,
    /// SSE `data:` lines joined by `\n`, or the event-stream payload.
    pub data: Vec<u8>,
}

/// One AWS event-stream message before the host frames it: string headers and a
/// payload. A fixture file writes one as `{"event": "contentBlockDelta", "json": {...}}`,
/// `{"exception": "throttlingException", "json": {...}}` (each adds the three
/// headers Bedrock sends with it), with optional further `headers` (`[name, value]`
/// pairs) and the payload as `json` or raw `text`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(from = "EventFrameFixture")]
pub struct EventFrame {
    pub headers: Vec<(String, String)>,
    pub payload: Vec<u8>,
}

impl EventFrame {
    /// A normal frame: `:event-type`, `:content-type` JSON, `:message-type` event.
    pub fn event(event_type: &str, payload: impl Into<Vec<u8>>) -> Self {
        Self { headers: typed_headers(":event-type", event_type, "event"), payload: payload.into() }
    }

    /// An error after the 200: `:exception-type`, `:content-type` JSON,
    /// `:message-type` exception.
    pub fn exception(exception_type: &str, payload: impl Into<Vec<u8>>) -> Self {
        Self { headers: typed_headers(":exception-type", exception_type, "exception"), payload: payload.into() }
    }

    /// The event the host makes of this message: named by its `:event-type`, else
    /// its `:exception-type`, every header kept, the payload as data.
    pub fn to_event(&self) -> StreamEvent {
        let header =
            |wanted: &str| self.headers.iter().find(|(name, _)| name == wanted).map(|(_, value)| value.clone());
        StreamEvent {
            name: header(":event-type").or_else(|| header(":exception-type")),
            headers: self.headers.clone(),
            data: self.payload.clone(),
        }
    }
}

fn typed_headers(type_header: &str, type_name: &str, message_type: &str) -> Vec<(String, String)> {
    vec![
        (type_header.to_owned(), type_name.to_owned()),
        (":content-type".to_owned(), "application/json".to_owned()),
        (":message-type".to_owned(), message_type.to_owned()),
    ]
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct EventFrameFixture {
    #[serde(default)]
    event: Option<String>,
    #[serde(default)]
    exception: Option<String>,
    #[serde(default)]
    headers: Vec<(String, String)>,
    #[serde(default)]
    json: Option<Value>,
    #[serde(default)]
    text: Option<String>,
}

impl From<EventFrameFixture> for EventFrame {
    fn from(fixture: EventFrameFixture) -> Self {
        let payload = body_bytes(fixture.json, fixture.text);
        let mut frame = match (fixture.event, fixture.exception) {
            (Some(event), _) => Self::event(&event, payload),
            (None, Some(exception)) => Self::exception(&exception, payload),
            (None, None) => Self { headers: Vec::new(), payload },
        };
        frame.headers.extend(fixture.headers);
        frame
    }
}

/// A stream's body as the upstream sends it, before the host frames it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StreamInput {
    /// `text/event-stream` bytes, in the chunks they arrive in.
    Sse(Vec<Vec<u8>>),
    /// AWS event-stream messages, in order.
    EventStream(Vec<EventFrame>),
}

impl StreamInput {
    pub fn framing(&self) -> Framing {
        match self {
            Self::Sse(_) => Framing::Sse,
            Self::EventStream(_) => Framing::AwsEventStream,
        }
    }
}

/// One normalized delta (`stream-delta`). Serialized tagged by its case, e.g.
/// `{"text": "Hel"}`, `{"tool_call_fragment": {"index": 0, "json": "{\"ci"}}`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Delta {
    Text(String),
    Thinking(String),
    ThinkingSignature(String),
    ToolCallStart { index: u32, id: String, name: String },
    ToolCallFragment { index: u32, json: String },
    ToolCallEnd(u32),
    Usage(Usage),
    Stop(Stop),
    ServedModel(String),
    RequestId(String),
    Error(InBand),
}

/// Why the stream stopped (`stop-info`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Stop {
    /// In the world's spelling, e.g. `end-turn`.
    pub reason: String,
    pub raw: Option<String>,
    pub refusal: Option<Refusal>,
}

/// An error frame inside an HTTP-200 stream (`in-band-error`): its status and
/// what the component says it means.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct InBand {
    pub status: Option<u16>,
    pub status_from_prose: bool,
    #[serde(flatten)]
    pub class: Classified,
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

/// What `native.support` answered for one key and wire id (weir:provider
/// 0.4.0's `native-support`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NativeSupportSummary {
    pub dialect: String,
    pub fields: Vec<String>,
    pub betas: Vec<String>,
    pub count_tokens: bool,
}

/// A caller's native fields as the host sends them (`native-request`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NativeFields {
    pub dialect: String,
    /// A JSON object of fields.
    pub fields_json: String,
    pub betas: Vec<String>,
}

/// One block of a native answer (`answer-block`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AnswerBlock {
    /// The index of a block of the neutral answer.
    Neutral(u32),
    /// The dialect's own block, a JSON object as the provider wrote it.
    Native(String),
}

/// What `native.decode-native` answered (`native-answer`).
#[derive(Debug, Clone, PartialEq)]
pub struct DecodedNative {
    pub response: Decoded,
    pub blocks: Vec<AnswerBlock>,
    pub usage_json: Option<String>,
}
