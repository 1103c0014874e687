//! A provider's own fixtures: conversations in with the wire shape they must give,
//! canned responses and error bodies with what they must mean. They live as JSON
//! files next to the provider (e.g. `providers/openai/conformance/*.json`), so the
//! same files run natively in `cargo test` and through the host in `weir check`.
//!
//! Each file holds one case or an array of cases:
//!
//! ```json
//! {"kind": "encode", "name": "tools become functions", "provider": "openai",
//!  "conversation": {"turns": [{"role": "user", "content": [{"type": "text", "text": "Hi"}]}]},
//!  "params": {"model": "gpt-4.1", "max_tokens": 64},
//!  "expect": {"method": "POST", "path": "/chat/completions", "body": {"max_completion_tokens": 64}}}
//! {"kind": "decode", "name": "...", "provider": "openai",
//!  "response": {"status": 200, "json": {...}}, "expect": {"text": "Hello", "stop": "end-turn"}}
//! {"kind": "classify", "name": "...", "provider": "openai",
//!  "response": {"status": 429, "headers": [["retry-after", "2"]], "json": {...}},
//!  "expect": {"class": "rate-limited", "hint": {"delay_ms": 2000}}}
//! ```
//!
//! The embeddings and rerank kinds are the same three, for their operation:
//!
//! ```json
//! {"kind": "embeddings_encode", "name": "...", "provider": "openai", "inputs": ["a", "b"],
//!  "params": {"model": "text-embedding-3-small", "purpose": "query", "dimensions": 512},
//!  "expect": {"method": "POST", "path": "/embeddings", "body": {"dimensions": 512}}}
//! {"kind": "embeddings_decode", "name": "...", "provider": "openai",
//!  "response": {"status": 200, "json": {...}}, "expect": {"count": 2, "width": 3, "input_tokens": 8}}
//! {"kind": "embeddings_classify", ...}
//! {"kind": "rerank_encode", "name": "...", "provider": "openai-compatible", "query": "q",
//!  "documents": ["a", "b"], "params": {"model": "BAAI/bge-reranker-v2-m3", "top_n": 1}, "expect": {...}}
//! {"kind": "rerank_decode", ..., "expect": {"results": [{"index": 1, "relevance_score": 0.9}]}}
//! {"kind": "rerank_classify", ...}
//! ```
//!
//! A `stream` case gives a stream's body as the upstream sends it, in the key's
//! framing, and what its decoder must make of it (a JSON subset of
//! [`crate::stream::DecodedStream`]): SSE text (one string, or an array of the
//! chunks it arrives in), or AWS event-stream messages (see
//! [`crate::fixture::EventFrame`]):
//!
//! ```json
//! {"kind": "stream", "name": "...", "provider": "openai",
//!  "sse": "data: {...}\n\ndata: [DONE]\n\n",
//!  "expect": {"ending": "complete", "text": "Hello", "stop": "end-turn", "usage": {"input": 9}}}
//! {"kind": "stream", "name": "...", "provider": "bedrock-converse",
//!  "event_stream": [{"event": "contentBlockDelta", "json": {...}}, {"exception": "throttlingException", "json": {...}}],
//!  "expect": {"ending": "in-band-error", "error": {"class": "rate-limited"}}}
//! ```
//!
//! An encode case's wire id must be one its key serves for that operation, and
//! the generic embeddings and rerank checks run on it too (see [`crate::target`]).
//!
//! `expect` bodies are JSON subsets (see [`crate::json::subset`]): list what the case
//! is about, not every field. A decode or encode expectation of
//! `{"codec_error": "malformed" | "unsupported"}` expects the component to decline.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::Value;

use crate::fixture::{
    CodecFailure, Conversation, EmbedParams, EventFrame, Params, ProviderSummary, RerankParams, Response, StreamInput,
    WireRequest,
};
use crate::json::subset;
use crate::report::Report;
use crate::subject::{Answer, Operation, Subject};

#[derive(Debug, Clone, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Case {
    Encode {
        name: String,
        provider: String,
        conversation: Box<Conversation>,
        params: Box<Params>,
        expect: Box<EncodeExpectation>,
    },
    Decode {
        name: String,
        provider: String,
        response: Response,
        expect: Value,
    },
    Classify {
        name: String,
        provider: String,
        response: Response,
        expect: Value,
    },
    EmbeddingsEncode {
        name: String,
        provider: String,
        inputs: Vec<String>,
        params: EmbedParams,
        expect: Box<EncodeExpectation>,
    },
    /// `expect` is a JSON subset of [`crate::fixture::DecodedEmbeddings`].
    EmbeddingsDecode {
        name: String,
        provider: String,
        response: Response,
        expect: Value,
    },
    EmbeddingsClassify {
        name: String,
        provider: String,
        response: Response,
        expect: Value,
    },
    RerankEncode {
        name: String,
        provider: String,
        query: String,
        documents: Vec<String>,
        params: RerankParams,
        expect: Box<EncodeExpectation>,
    },
    /// `expect` is a JSON subset of [`crate::fixture::DecodedRanking`].
    RerankDecode {
        name: String,
        provider: String,
        response: Response,
        expect: Value,
    },
    RerankClassify {
        name: String,
        provider: String,
        response: Response,
        expect: Value,
    },
    /// A stream's body in (`sse` or `event_stream`, in the key's framing);
    /// `expect` is a JSON subset of [`crate::stream::DecodedStream`].
    Stream {
        name: String,
        provider: String,
        #[serde(default)]
        sse: Option<SseBody>,
        #[serde(default)]
        event_stream: Option<Vec<EventFrame>>,
        expect: Value,
    },
}

/// A `stream` case's SSE body: one string, or the chunks it arrives in.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum SseBody {
    Whole(String),
    Chunks(Vec<String>),
}

impl SseBody {
    fn chunks(self) -> Vec<Vec<u8>> {
        match self {
            Self::Whole(text) => vec![text.into_bytes()],
            Self::Chunks(chunks) => chunks.into_iter().map(String::into_bytes).collect(),
        }
    }
}

impl Case {
    /// The operation whose functions the case calls.
    pub fn operation(&self) -> Operation {
        match self {
            Self::Encode { .. } | Self::Decode { .. } | Self::Classify { .. } | Self::Stream { .. } => Operation::Chat,
            Self::EmbeddingsEncode { .. } | Self::EmbeddingsDecode { .. } | Self::EmbeddingsClassify { .. } => {
                Operation::Embeddings
            }
            Self::RerankEncode { .. } | Self::RerankDecode { .. } | Self::RerankClassify { .. } => Operation::Rerank,
        }
    }
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EncodeExpectation {
    #[serde(default)]
    method: Option<String>,
    #[serde(default)]
    path: Option<String>,
    /// Header name (any case) → exact value.
    #[serde(default)]
    headers: BTreeMap<String, String>,
    #[serde(default)]
    body: Option<Value>,
    /// `unsupported` when the component must decline this conversation.
    #[serde(default)]
    codec_error: Option<String>,
}

/// Why a fixture folder could not be read. Distinct from a failed check: the kit
/// itself is misconfigured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FixtureError {
    pub path: PathBuf,
    pub reason: String,
}

impl std::fmt::Display for FixtureError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.path.display(), self.reason)
    }
}

impl std::error::Error for FixtureError {}

/// Every case in the `*.json` files of `dir`, in file-name order.
pub fn load_dir(dir: &Path) -> Result<Vec<Case>, FixtureError> {
    let error = |path: &Path, reason: String| FixtureError { path: path.to_owned(), reason };
    let entries = std::fs::read_dir(dir).map_err(|e| error(dir, e.to_string()))?;
    let mut files: Vec<PathBuf> = entries
        .filter_map(|entry| entry.ok().map(|entry| entry.path()))
        .filter(|path| path.extension().is_some_and(|ext| ext == "json"))
        .collect();
    files.sort();
    if files.is_empty() {
        return Err(error(dir, "no *.json fixture files".to_owned()));
    }
    let mut cases = Vec::new();
    for path in files {
        let text = std::fs::read_to_string(&path).map_err(|e| error(&path, e.to_string()))?;
        cases.extend(parse(&text).map_err(|e| error(&path, e.to_string()))?);
    }
    Ok(cases)
}

/// The cases in one fixture file's text: one case or an array of them.
pub fn parse(text: &str) -> Result<Vec<Case>, serde_json::Error> {
    let value: Value = serde_json::from_str(text)?;
    if value.is_array() { serde_json::from_value(value) } else { serde_json::from_value(value).map(|case| vec![case]) }
}

/// Runs every case whose provider key the subject serves; a case for a key it does
/// not serve, or of an operation it does not export, is itself a failure (the
/// fixture would silently never run). So is an encode case of embeddings or
/// rerank for a wire id its key does not serve for that operation, and a stream
/// case for a key that does not declare streaming (the host never streams from it).
pub async fn run<S: Subject>(subject: &S, providers: &[ProviderSummary], cases: Vec<Case>, report: &mut Report) {
    let served: Vec<String> = providers.iter().map(|provider| provider.key.clone()).collect();
    let served = served.as_slice();
    let operations = subject.operations();
    for case in cases {
        let operation = case.operation();
        let exported = operations.contains(&operation);
        let (provider, name, result) = match case {
            Case::Encode { name, provider, conversation, params, expect } => {
                let result = exported_and_served(exported, operation, served, &provider, async {
                    encode_matches(subject.encode(&provider, &conversation, &params).await, &expect)
                })
                .await;
                (provider, name, result)
            }
            Case::Decode { name, provider, response, expect } => {
                let result = exported_and_served(exported, operation, served, &provider, async {
                    decode_matches(subject.decode(&provider, &response).await, &expect)
                })
                .await;
                (provider, name, result)
            }
            Case::Classify { name, provider, response, expect }
            | Case::EmbeddingsClassify { name, provider, response, expect }
            | Case::RerankClassify { name, provider, response, expect } => {
                let result = exported_and_served(exported, operation, served, &provider, async {
                    let found = subject.classify(operation, &provider, &response).await.map_err(|fault| fault.0)?;
                    subset(&expect, &serde_json::to_value(found).map_err(|e| e.to_string())?)
                })
                .await;
                (provider, name, result)
            }
            Case::EmbeddingsEncode { name, provider, inputs, params, expect } => {
                let result = exported_and_served(exported, operation, served, &provider, async {
                    wire_id_served(subject, operation, &provider, &params.model).await?;
                    encode_matches(subject.embed_encode(&provider, &inputs, &params).await, &expect)
                })
                .await;
                (provider, name, result)
            }
            Case::EmbeddingsDecode { name, provider, response, expect } => {
                let result = exported_and_served(exported, operation, served, &provider, async {
                    decode_matches(subject.embed_decode(&provider, &response).await, &expect)
                })
                .await;
                (provider, name, result)
            }
            Case::RerankEncode { name, provider, query, documents, params, expect } => {
                let result = exported_and_served(exported, operation, served, &provider, async {
                    wire_id_served(subject, operation, &provider, &params.model).await?;
                    encode_matches(subject.rerank_encode(&provider, &query, &documents, &params).await, &expect)
                })
                .await;
                (provider, name, result)
            }
            Case::Stream { name, provider, sse, event_stream, expect } => {
                let result = exported_and_served(exported, operation, served, &provider, async {
                    let summary = providers.iter().find(|summary| summary.key == provider);
                    stream_matches(subject, summary, sse, event_stream, &expect).await
                })
                .await;
                (provider, name, result)
            }
            Case::RerankDecode { name, provider, response, expect } => {
                let result = exported_and_served(exported, operation, served, &provider, async {
                    decode_matches(subject.rerank_decode(&provider, &response).await, &expect)
                })
                .await;
                (provider, name, result)
            }
        };
        report.record(&provider, format!("fixture: {name}"), result);
    }
}

/// [`served_or`] for a case of an operation the component must also export.
async fn exported_and_served(
    exported: bool,
    operation: Operation,
    served: &[String],
    provider: &str,
    check: impl Future<Output = Result<(), String>>,
) -> Result<(), String> {
    if !exported {
        return Err(format!("the component does not export `{operation}`"));
    }
    served_or(served, provider, check).await
}

async fn served_or(
    served: &[String],
    provider: &str,
    check: impl Future<Output = Result<(), String>>,
) -> Result<(), String> {
    if served.iter().any(|key| key == provider) {
        check.await
    } else {
        Err(format!("the component does not serve `{provider}`"))
    }
}

/// Whether the case's key serves its wire id for `operation`.
async fn wire_id_served<S: Subject>(
    subject: &S,
    operation: Operation,
    provider: &str,
    wire_id: &str,
) -> Result<(), String> {
    match subject.serves(operation, provider, wire_id).await {
        Ok(true) => Ok(()),
        Ok(false) => Err(format!("`{provider}` does not serve `{wire_id}` for {operation}")),
        Err(fault) => Err(format!("fault in {operation} serves: {}", fault.0)),
    }
}

/// Whether the stream `sse` or `event_stream` holds decodes to `expect` through
/// `provider`'s decoder.
async fn stream_matches<S: Subject>(
    subject: &S,
    provider: Option<&ProviderSummary>,
    sse: Option<SseBody>,
    event_stream: Option<Vec<EventFrame>>,
    expect: &Value,
) -> Result<(), String> {
    let provider = provider.ok_or("the component does not serve this key")?;
    if !provider.streaming {
        return Err(format!("`{}` does not declare `streaming`: the host never streams from it", provider.key));
    }
    let input = match (sse, event_stream) {
        (Some(body), None) => StreamInput::Sse(body.chunks()),
        (None, Some(frames)) => StreamInput::EventStream(frames),
        _ => return Err("a stream case gives exactly one of `sse` and `event_stream`".to_owned()),
    };
    let decoded = crate::stream::decode(subject, provider, &input).await?;
    subset(expect, &serde_json::to_value(decoded).map_err(|e| e.to_string())?)
}

fn declined_as(expected: Option<&str>, answer_kind: Option<&CodecFailure>) -> Option<Result<(), String>> {
    match (expected, answer_kind) {
        (Some(want), Some(failure)) if want == failure.kind() => Some(Ok(())),
        (Some(want), Some(failure)) => {
            Some(Err(format!("declined as `{}` ({}), expected `{want}`", failure.kind(), failure.reason())))
        }
        (Some(want), None) => Some(Err(format!("answered; expected it to decline as `{want}`"))),
        (None, Some(failure)) => Some(Err(format!("declined ({}): {}", failure.kind(), failure.reason()))),
        (None, None) => None,
    }
}

fn encode_matches(answer: Answer<WireRequest>, expect: &EncodeExpectation) -> Result<(), String> {
    let answer = answer.map_err(|fault| format!("fault: {}", fault.0))?;
    if let Some(verdict) = declined_as(expect.codec_error.as_deref(), answer.as_ref().err()) {
        return verdict;
    }
    let Ok(request) = answer else { return Ok(()) };
    if let Some(method) = &expect.method
        && method != &request.method
    {
        return Err(format!("method {}, expected {method}", request.method));
    }
    if let Some(path) = &expect.path
        && path != &request.path_and_query
    {
        return Err(format!("path {}, expected {path}", request.path_and_query));
    }
    for (name, value) in &expect.headers {
        let found = request.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v);
        if found != Some(value) {
            return Err(format!("header {name} is {found:?}, expected {value:?}"));
        }
    }
    match &expect.body {
        Some(body) => {
            let actual: Value =
                serde_json::from_slice(&request.body).map_err(|e| format!("the body is not JSON: {e}"))?;
            subset(body, &actual)
        }
        None => Ok(()),
    }
}

/// Whether a decoded summary (chat's, embeddings' or rerank's) holds `expect`,
/// or the component declined as `expect`'s `codec_error` says.
fn decode_matches<T: serde::Serialize>(answer: Answer<T>, expect: &Value) -> Result<(), String> {
    let answer = answer.map_err(|fault| format!("fault: {}", fault.0))?;
    let wanted_error = expect.get("codec_error").and_then(Value::as_str);
    if let Some(verdict) = declined_as(wanted_error, answer.as_ref().err()) {
        return verdict;
    }
    let Ok(decoded) = answer else { return Ok(()) };
    subset(expect, &serde_json::to_value(decoded).map_err(|e| e.to_string())?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_holds_one_case_or_many() {
        let one = r#"{"kind": "classify", "name": "n", "provider": "p",
            "response": {"status": 429}, "expect": {"class": "rate-limited"}}"#;
        assert_eq!(parse(one).unwrap().len(), 1);
        let many = format!("[{one}, {one}]");
        assert_eq!(parse(&many).unwrap().len(), 2);
    }

    #[test]
    fn a_typo_in_a_case_is_an_error_naming_it() {
        let typo = r#"{"kind": "encode", "name": "n", "provider": "p",
            "conversation": {"turns": []}, "params": {"model": "m", "max_tokens": 1},
            "expect": {"bodyy": {}}}"#;
        let error = parse(typo).unwrap_err().to_string();
        assert!(error.contains("bodyy"), "{error}");
    }

    #[test]
    fn an_empty_or_missing_folder_is_an_error() {
        let dir = std::env::temp_dir().join("weir-conformance-empty-fixtures");
        std::fs::create_dir_all(&dir).unwrap();
        assert!(load_dir(&dir).unwrap_err().reason.contains("no *.json"));
        assert!(load_dir(&dir.join("missing")).is_err());
    }
}
