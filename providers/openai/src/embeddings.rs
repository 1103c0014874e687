//! Embeddings (`POST {endpoint}/embeddings`): a batch of inputs → one request; a
//! response → the native vectors in input order.
//!
//! The same dialect serves both keys: OpenAI itself and the servers that copy
//! its route (vLLM, TEI, Ollama's `/v1/embeddings`). What differs is which ids
//! each key embeds with and how many inputs one request may carry
//! ([`serves`], [`max_batch`]).
//!
//! The response is read into typed structs, never a `serde_json::Value` tree: a
//! full OpenAI batch is millions of numbers, and a tree of them would not fit
//! the sandbox's memory, and even typed, decoding is what bounds a batch (see
//! [`OPENAI_MAX_BATCH`] for what was measured).

use serde::{Deserialize, Serialize};
use serde_json::Value;
use weir_sdk::json::{from_body, to_body};
use weir_sdk::types::{CodecError, EmbeddingParams, EmbeddingResponse, HttpRequest, HttpResponse};

use crate::answer::{input_tokens, refuse_error_object, request_id};
use crate::dialect;
use crate::keys;
use crate::response::text;

/// Appended to the endpoint's base URL (which ends in `/v1`), as chat appends
/// `/chat/completions`.
pub const PATH: &str = "/embeddings";

/// The most inputs one request to api.openai.com carries for a 1536-wide model
/// (`text-embedding-3-small`, `text-embedding-ada-002`). The API takes 2048;
/// what limits is decoding the answer inside the sandbox (10⁹ fuel and 64 MiB
/// per call), which costs about 1.15 M fuel per 1536-wide vector.
///
/// Measured with wasmtime 48.0.8 (fuel on, Cranelift `Speed`, the 64 MiB
/// ceiling), calling this component's `embeddings.decode` (built with the
/// `wasm` profile) on OpenAI-shaped bodies whose numbers are written as OpenAI
/// writes them, the shortest text that round-trips an `f32` (`-0.0069292835`,
/// about 12.4 bytes each); the fuel is the same on every run:
///
/// | vectors × width | body | fuel | peak memory |
/// | --- | --- | --- | --- |
/// | 256 × 1536 | 4.6 MiB | 0.30 × 10⁹ | 6.9 MiB |
/// | 512 × 1536 | 9.3 MiB | 0.59 × 10⁹ | 13.5 MiB |
/// | 1024 × 1536 | 18.6 MiB | 1.18 × 10⁹ (out of fuel) | 26.8 MiB |
/// | 2048 × 1536 | 37.1 MiB | 2.36 × 10⁹ (out of fuel) | 53.4 MiB |
/// | 128 × 3072 | 4.6 MiB | 0.29 × 10⁹ | 6.9 MiB |
/// | 256 × 3072 | 9.3 MiB | 0.59 × 10⁹ | 13.5 MiB |
///
/// So the largest power of two with 2× headroom on both (≤ 0.5 × 10⁹ fuel,
/// ≤ 32 MiB) is 256 at 1536 wide and [`OPENAI_WIDE_MAX_BATCH`] at 3072.
pub const OPENAI_MAX_BATCH: u32 = 256;

/// [`OPENAI_MAX_BATCH`] for `text-embedding-3-large` (3072 wide) and any
/// `text-embedding-*` id not known to be 1536 wide: the same budget of numbers
/// per request.
pub const OPENAI_WIDE_MAX_BATCH: u32 = 128;

/// The batch size for OpenAI-compatible servers: TEI's default
/// `--max-client-batch-size` (32; TEI answers a larger batch with a 413 unless
/// its operator raised the limit), the strictest default among the common
/// servers, so an entry works against any of them without tuning. It decodes
/// well within the sandbox even at 4096 wide
/// with vLLM's longer numbers (the `f64` text of each `f32`, about 21 bytes):
/// 32 × 4096 measured 0.14 × 10⁹ fuel and 3.4 MiB (see [`OPENAI_MAX_BATCH`]).
pub const COMPATIBLE_MAX_BATCH: u32 = 32;

/// Which of the keys that embed a call is for: they differ in the ids they
/// embed with, the batch they take and (Azure) where the request goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Embedder {
    OpenAi,
    Compatible,
    /// `azure-openai`: `/openai/deployments/{deployment}/embeddings?api-version=…`,
    /// no `model` in the body (the URL names the deployment).
    AzureDeployment,
}

impl Embedder {
    /// The embedder of a provider key; `None` for a key that does not embed.
    pub fn from_key(key: &str) -> Option<Self> {
        match key {
            dialect::OPENAI => Some(Self::OpenAi),
            dialect::COMPATIBLE => Some(Self::Compatible),
            keys::AZURE_DEPLOYMENT => Some(Self::AzureDeployment),
            _ => None,
        }
    }
}

/// Whether this key embeds with `wire_id`: OpenAI's own embedding models are
/// all named `text-embedding-*`; a compatible server may serve any name, and
/// an Azure deployment any name its operator gave it.
pub fn serves(embedder: Embedder, wire_id: &str) -> bool {
    match embedder {
        Embedder::OpenAi => wire_id.starts_with("text-embedding-"),
        Embedder::Compatible | Embedder::AzureDeployment => true,
    }
}

/// The most inputs one request may carry for this key and model. An Azure
/// deployment's width is not known from its name, so it takes the wider
/// models' budget.
pub fn max_batch(embedder: Embedder, wire_id: &str) -> u32 {
    match embedder {
        Embedder::OpenAi if is_1536_wide(wire_id) => OPENAI_MAX_BATCH,
        Embedder::OpenAi | Embedder::AzureDeployment => OPENAI_WIDE_MAX_BATCH,
        Embedder::Compatible => COMPATIBLE_MAX_BATCH,
    }
}

/// OpenAI's embedding models whose native width is 1536.
fn is_1536_wide(wire_id: &str) -> bool {
    matches!(wire_id, "text-embedding-3-small" | "text-embedding-ada-002")
}

/// The request body. `encoding_format` is always `float`, OpenAI's default:
/// every compatible server answers floats to it (some ignore the field; not
/// all know `base64`). `dimensions` only when the host asks for a width: models
/// that cannot shorten their vectors refuse the field (OpenAI's ada-002, vLLM
/// serving a model without Matryoshka training).
#[derive(Debug, Serialize)]
struct Body<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    model: Option<&'a str>,
    input: &'a [String],
    encoding_format: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    dimensions: Option<u32>,
}

/// Builds the request for one batch. The purpose (document or query) is not
/// sent: this dialect has no field for it. No credential: the host adds it.
pub fn encode(embedder: Embedder, inputs: &[String], params: &EmbeddingParams) -> Result<HttpRequest, CodecError> {
    if embedder == Embedder::OpenAi && params.dimensions.is_some() && !takes_dimensions(&params.wire_model_id) {
        return Err(CodecError::Unsupported(format!(
            "{} has a fixed width: OpenAI accepts `dimensions` only for text-embedding-3 and later",
            params.wire_model_id
        )));
    }
    let (path_and_query, model) = match embedder {
        Embedder::OpenAi | Embedder::Compatible => (PATH.to_owned(), Some(params.wire_model_id.as_str())),
        Embedder::AzureDeployment => (keys::azure_deployment_route(&params.wire_model_id, PATH)?, None),
    };
    let body = Body { model, input: inputs, encoding_format: "float", dimensions: params.dimensions };
    Ok(HttpRequest {
        method: "POST".to_owned(),
        path_and_query,
        headers: vec![("content-type".to_owned(), "application/json".to_owned())],
        body: to_body(&body)?,
    })
}

/// OpenAI's one fixed-width embedding model family; every later one takes
/// `dimensions`.
fn takes_dimensions(wire_id: &str) -> bool {
    !wire_id.starts_with("text-embedding-ada-")
}

/// The response body. `data` defaults to empty so an error object sent with a
/// 2xx status is reported as one rather than as a missing field. `usage` and
/// `model` are small and read leniently, as chat reads them.
#[derive(Debug, Deserialize)]
struct Answer {
    #[serde(default)]
    data: Vec<Item>,
    #[serde(default)]
    model: Option<Value>,
    #[serde(default)]
    usage: Option<Value>,
    #[serde(default)]
    id: Option<Value>,
    /// Present (and not null) when the body is an error object.
    #[serde(default)]
    error: Option<serde::de::IgnoredAny>,
    /// `"error"` in the flat error object of older vLLM.
    #[serde(default)]
    object: Option<Value>,
}

#[derive(Debug, Deserialize)]
struct Item {
    #[serde(default)]
    index: Option<u32>,
    embedding: Vec<f32>,
}

/// Normalizes a 2xx response: the vectors in input order, by each item's
/// `index` (never by array position: the API does not promise the order).
///
/// The component does not see the request, so the host checks that the count
/// equals the batch's inputs (and each width the one it asked for); here each
/// index must appear exactly once, and the vectors must be non-empty, finite
/// and of one width.
pub fn decode(response: &HttpResponse) -> Result<EmbeddingResponse, CodecError> {
    let answer: Answer = from_body(&response.body)?;
    refuse_error_object(response, answer.error.is_some(), answer.object.as_ref(), "embeddings")?;
    let vectors = in_index_order(answer.data)?;
    check_vectors(&vectors)?;
    Ok(EmbeddingResponse {
        vectors,
        input_tokens: input_tokens(answer.usage.as_ref()),
        served_model: text(answer.model.as_ref()),
        request_id: request_id(response, answer.id.as_ref()),
    })
}

/// The vectors placed by `index`: an index missing, repeated or past the end
/// (which means another one is missing) is malformed.
fn in_index_order(items: Vec<Item>) -> Result<Vec<Vec<f32>>, CodecError> {
    let count = items.len();
    let mut slots: Vec<Option<Vec<f32>>> = vec![None; count];
    for (position, item) in items.into_iter().enumerate() {
        let index = item.index.ok_or_else(|| CodecError::Malformed(format!("data[{position}] has no index")))?;
        let slot = usize::try_from(index).ok().and_then(|i| slots.get_mut(i)).ok_or_else(|| {
            CodecError::Malformed(format!("data[{position}] has index {index}, but there are only {count} embeddings"))
        })?;
        if slot.is_some() {
            return Err(CodecError::Malformed(format!("index {index} appears twice in data")));
        }
        *slot = Some(item.embedding);
    }
    // Every slot is filled: `count` distinct indices below `count`.
    Ok(slots.into_iter().flatten().collect())
}

/// One width for all, at least one number, every number finite (an `f32` read
/// from a larger JSON number is infinite).
fn check_vectors(vectors: &[Vec<f32>]) -> Result<(), CodecError> {
    let Some(width) = vectors.first().map(Vec::len) else {
        return Err(CodecError::Malformed("response has no embeddings".to_owned()));
    };
    if width == 0 {
        return Err(CodecError::Malformed("embedding 0 is empty".to_owned()));
    }
    for (index, vector) in vectors.iter().enumerate() {
        if vector.len() != width {
            return Err(CodecError::Malformed(format!(
                "embedding {index} has {} numbers, embedding 0 has {width}",
                vector.len()
            )));
        }
        if !vector.iter().all(|number| number.is_finite()) {
            return Err(CodecError::Malformed(format!("embedding {index} has a number out of range")));
        }
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::panic)] // a failing test should stop loudly
mod tests {
    use serde_json::json;
    use weir_sdk::types::EmbeddingPurpose;

    use super::*;

    fn params(wire_id: &str, dimensions: Option<u32>) -> EmbeddingParams {
        EmbeddingParams { wire_model_id: wire_id.to_owned(), purpose: EmbeddingPurpose::Document, dimensions }
    }

    fn inputs(texts: &[&str]) -> Vec<String> {
        texts.iter().map(|text| (*text).to_owned()).collect()
    }

    fn body_json(request: &HttpRequest) -> Value {
        serde_json::from_slice(&request.body).unwrap()
    }

    fn ok(body: &str) -> HttpResponse {
        HttpResponse { status: 200, headers: vec![], body: body.as_bytes().to_vec() }
    }

    fn malformed(body: &str) -> String {
        match decode(&ok(body)) {
            Err(CodecError::Malformed(message)) => message,
            other => panic!("expected malformed, got {other:?}"),
        }
    }

    #[test]
    fn serves_openai_embedding_ids_only() {
        assert!(serves(Embedder::OpenAi, "text-embedding-3-small"));
        assert!(serves(Embedder::OpenAi, "text-embedding-3-large"));
        assert!(serves(Embedder::OpenAi, "text-embedding-ada-002"));
        for id in ["gpt-4.1", "o3", "embedding-3", "Text-Embedding-3-small", "omni-moderation-latest"] {
            assert!(!serves(Embedder::OpenAi, id), "{id}");
        }
        for id in ["BAAI/bge-m3", "nomic-embed-text", "text-embedding-3-small", "gpt-4.1"] {
            assert!(serves(Embedder::Compatible, id), "{id}");
        }
    }

    #[test]
    fn batch_limits() {
        assert_eq!(max_batch(Embedder::OpenAi, "text-embedding-3-small"), 256);
        assert_eq!(max_batch(Embedder::OpenAi, "text-embedding-ada-002"), 256);
        assert_eq!(max_batch(Embedder::OpenAi, "text-embedding-3-large"), 128);
        assert_eq!(max_batch(Embedder::OpenAi, "text-embedding-4-huge"), 128);
        assert_eq!(max_batch(Embedder::Compatible, "BAAI/bge-m3"), 32);
    }

    #[test]
    fn encodes_the_batch_as_floats() {
        let request =
            encode(Embedder::OpenAi, &inputs(&["first text", "second text"]), &params("text-embedding-3-small", None))
                .unwrap();
        assert_eq!(request.method, "POST");
        assert_eq!(request.path_and_query, "/embeddings");
        assert_eq!(request.headers, vec![("content-type".to_owned(), "application/json".to_owned())]);
        assert_eq!(
            body_json(&request),
            json!({"model": "text-embedding-3-small", "input": ["first text", "second text"], "encoding_format": "float"})
        );
    }

    #[test]
    fn encodes_dimensions_only_when_asked() {
        let request = encode(Embedder::OpenAi, &inputs(&["a"]), &params("text-embedding-3-large", Some(512))).unwrap();
        assert_eq!(
            body_json(&request),
            json!({"model": "text-embedding-3-large", "input": ["a"], "encoding_format": "float", "dimensions": 512})
        );
        let compatible = encode(Embedder::Compatible, &inputs(&["a"]), &params("BAAI/bge-m3", Some(256))).unwrap();
        assert_eq!(
            body_json(&compatible),
            json!({"model": "BAAI/bge-m3", "input": ["a"], "encoding_format": "float", "dimensions": 256})
        );
    }

    #[test]
    fn the_purpose_is_not_sent() {
        let mut query = params("text-embedding-3-small", None);
        query.purpose = EmbeddingPurpose::Query;
        let for_query = encode(Embedder::OpenAi, &inputs(&["q"]), &query).unwrap();
        let for_document = encode(Embedder::OpenAi, &inputs(&["q"]), &params("text-embedding-3-small", None)).unwrap();
        assert_eq!(for_query.body, for_document.body);
    }

    #[test]
    fn ada_refuses_a_width() {
        let refused = encode(Embedder::OpenAi, &inputs(&["a"]), &params("text-embedding-ada-002", Some(512)));
        assert!(matches!(refused, Err(CodecError::Unsupported(m)) if m.contains("text-embedding-ada-002")));
        assert!(encode(Embedder::OpenAi, &inputs(&["a"]), &params("text-embedding-ada-002", None)).is_ok());
    }

    #[test]
    fn decodes_in_index_order_not_array_order() {
        let body = r#"{"object":"list","data":[
            {"object":"embedding","index":2,"embedding":[0.3,0.3]},
            {"object":"embedding","index":0,"embedding":[0.1,-0.1]},
            {"object":"embedding","index":1,"embedding":[0.2,0.2]}],
            "model":"text-embedding-3-small","usage":{"prompt_tokens":8,"total_tokens":8}}"#;
        let mut response = ok(body);
        response.headers.push(("x-request-id".to_owned(), "req_abc".to_owned()));
        let decoded = decode(&response).unwrap();
        assert_eq!(decoded.vectors, vec![vec![0.1, -0.1], vec![0.2, 0.2], vec![0.3, 0.3]]);
        assert_eq!(decoded.input_tokens, Some(8));
        assert_eq!(decoded.served_model.as_deref(), Some("text-embedding-3-small"));
        assert_eq!(decoded.request_id.as_deref(), Some("req_abc"));
    }

    #[test]
    fn usage_and_ids_of_compatible_servers() {
        // vLLM: an `id` in the body, `completion_tokens` 0, no x-request-id.
        let vllm = r#"{"id":"embd-7c1e","object":"list","created":1741569952,"model":"BAAI/bge-m3",
            "data":[{"index":0,"object":"embedding","embedding":[1.0]}],
            "usage":{"prompt_tokens":3,"total_tokens":3,"completion_tokens":0,"prompt_tokens_details":null}}"#;
        let decoded = decode(&ok(vllm)).unwrap();
        assert_eq!(decoded.request_id.as_deref(), Some("embd-7c1e"));
        assert_eq!(decoded.input_tokens, Some(3));
        // Only a total.
        let total = r#"{"data":[{"index":0,"embedding":[1.0]}],"usage":{"total_tokens":5}}"#;
        assert_eq!(decode(&ok(total)).unwrap().input_tokens, Some(5));
        // No usage at all, and no model.
        let bare = r#"{"data":[{"index":0,"embedding":[1.0]}]}"#;
        let decoded = decode(&ok(bare)).unwrap();
        assert_eq!(decoded.input_tokens, None);
        assert_eq!(decoded.served_model, None);
        assert_eq!(decoded.request_id, None);
    }

    #[test]
    fn a_missing_index_is_malformed() {
        let message = malformed(r#"{"data":[{"index":0,"embedding":[1.0]},{"embedding":[2.0]}]}"#);
        assert!(message.contains("data[1] has no index"), "{message}");
    }

    #[test]
    fn a_duplicate_index_is_malformed() {
        let message = malformed(r#"{"data":[{"index":0,"embedding":[1.0]},{"index":0,"embedding":[2.0]}]}"#);
        assert!(message.contains("index 0 appears twice"), "{message}");
    }

    #[test]
    fn a_gap_in_the_indices_is_malformed() {
        let message = malformed(r#"{"data":[{"index":0,"embedding":[1.0]},{"index":2,"embedding":[2.0]}]}"#);
        assert!(message.contains("index 2, but there are only 2"), "{message}");
        assert!(malformed(r#"{"data":[{"index":-1,"embedding":[1.0]}]}"#).contains("not the expected JSON"));
    }

    #[test]
    fn vectors_must_share_a_width_and_be_finite() {
        let ragged = malformed(r#"{"data":[{"index":0,"embedding":[1.0,2.0]},{"index":1,"embedding":[2.0]}]}"#);
        assert!(ragged.contains("embedding 1 has 1 numbers"), "{ragged}");
        assert!(malformed(r#"{"data":[{"index":0,"embedding":[]}]}"#).contains("empty"));
        assert!(malformed(r#"{"data":[{"index":0,"embedding":[1e300]}]}"#).contains("out of range"));
        assert!(malformed(r#"{"object":"list","data":[]}"#).contains("no embeddings"));
    }

    #[test]
    fn base64_or_garbage_is_malformed() {
        let base64 = malformed(r#"{"data":[{"index":0,"embedding":"AACAPwAAAEA="}]}"#);
        assert!(base64.contains("not the expected JSON"), "{base64}");
        assert!(malformed("<html>502</html>").contains("not the expected JSON"));
    }

    #[test]
    fn an_error_object_in_a_2xx_is_malformed_with_its_detail() {
        let body = r#"{"error":{"message":"model overloaded","type":"server_error","param":null,"code":null}}"#;
        let message = malformed(body);
        assert!(message.contains("error object") && message.contains("server_error"), "{message}");
        let flat = r#"{"object":"error","message":"boom","type":"InternalServerError","param":null,"code":500}"#;
        assert!(malformed(flat).contains("InternalServerError"));
        // `"error": null` is no error.
        assert!(decode(&ok(r#"{"error":null,"data":[{"index":0,"embedding":[1.0]}]}"#)).is_ok());
    }
}
