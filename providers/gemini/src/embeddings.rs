//! Embeddings, in each surface's own method:
//!
//! - `gemini` (AI Studio): `POST /models/{id}:batchEmbedContents`, one
//!   `EmbedContentRequest` per input (`model: models/{id}`, the text as one
//!   part, `taskType`, `outputDimensionality`), answered `{"embeddings":
//!   [{"values": [...]}]}` in input order. At most [`BATCH_EMBED_MAX`] requests
//!   per call.
//! - `vertex-gemini`: Vertex serves its embedding models through `:predict`
//!   (`{"instances": [{"content", "task_type"}], "parameters":
//!   {"outputDimensionality", "autoTruncate": false}}`, answered
//!   `predictions[].embeddings.values` with a `statistics.token_count` each).
//!   `gemini-embedding-001` takes one instance per request there; the
//!   `text-embedding-*` models take [`VERTEX_TEXT_EMBEDDING_MAX`].
//!
//! The purpose picks the task type: a document is `RETRIEVAL_DOCUMENT`, a
//! query `RETRIEVAL_QUERY`. A width asked for is sent as
//! `outputDimensionality` (the models are trained to be cut, Matryoshka style;
//! the host normalizes what comes back), so no entry must pin one.
//!
//! The answer is read into typed structs, never a `serde_json::Value` tree: a
//! batch of 100 vectors 3 072 wide is 307 200 numbers, within what the
//! sandbox decodes (see the OpenAI component's measurements, 128 × 3 072).

use serde::{Deserialize, Serialize};
use weir_sdk::json::{from_body, to_body};
use weir_sdk::types::{CodecError, EmbeddingParams, EmbeddingPurpose, EmbeddingResponse, HttpRequest, HttpResponse};

use crate::request::model_path;

/// `batchEmbedContents` takes at most 100 requests.
pub const BATCH_EMBED_MAX: u32 = 100;
/// Vertex's `text-embedding-*` models take up to 250 instances per request.
pub const VERTEX_TEXT_EMBEDDING_MAX: u32 = 250;

/// The embedding models: Gemini's, and the `text-embedding-*` /
/// `text-multilingual-embedding-*` models Google serves beside them.
pub fn serves(wire_id: &str) -> bool {
    wire_id.starts_with("gemini-embedding-")
        || wire_id.starts_with("text-embedding-")
        || wire_id.starts_with("text-multilingual-embedding-")
}

pub fn max_batch(vertex: bool, wire_id: &str) -> u32 {
    match (vertex, wire_id.starts_with("gemini-embedding-")) {
        (false, _) => BATCH_EMBED_MAX,
        (true, true) => 1,
        (true, false) => VERTEX_TEXT_EMBEDDING_MAX,
    }
}

fn task_type(purpose: EmbeddingPurpose) -> &'static str {
    match purpose {
        EmbeddingPurpose::Document => "RETRIEVAL_DOCUMENT",
        EmbeddingPurpose::Query => "RETRIEVAL_QUERY",
    }
}

pub fn encode(vertex: bool, inputs: Vec<String>, params: &EmbeddingParams) -> Result<HttpRequest, CodecError> {
    if inputs.is_empty() {
        return Err(CodecError::Unsupported("an embeddings batch with no inputs".to_owned()));
    }
    let (path, body) = if vertex { vertex_request(inputs, params)? } else { studio_request(inputs, params)? };
    Ok(HttpRequest {
        method: "POST".to_owned(),
        path_and_query: path,
        headers: vec![("content-type".to_owned(), "application/json".to_owned())],
        body,
    })
}

// ---------------------------------------------------------------- AI Studio

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct BatchEmbed {
    requests: Vec<EmbedContent>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct EmbedContent {
    model: String,
    content: Content,
    task_type: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    output_dimensionality: Option<u32>,
}

#[derive(Serialize)]
struct Content {
    parts: [TextPart; 1],
}

#[derive(Serialize)]
struct TextPart {
    text: String,
}

fn studio_request(inputs: Vec<String>, params: &EmbeddingParams) -> Result<(String, Vec<u8>), CodecError> {
    let path = model_path(&params.wire_model_id, ":batchEmbedContents")?;
    let model = format!("models/{}", params.wire_model_id);
    let requests = inputs
        .into_iter()
        .map(|text| EmbedContent {
            model: model.clone(),
            content: Content { parts: [TextPart { text }] },
            task_type: task_type(params.purpose),
            output_dimensionality: params.dimensions,
        })
        .collect();
    Ok((path, to_body(&BatchEmbed { requests })?))
}

#[derive(Deserialize)]
struct BatchEmbedAnswer {
    embeddings: Vec<Values>,
    #[serde(default, rename = "usageMetadata")]
    usage: Option<PromptUsage>,
}

#[derive(Deserialize)]
struct Values {
    values: Vec<f32>,
}

#[derive(Deserialize)]
struct PromptUsage {
    #[serde(rename = "promptTokenCount")]
    prompt_token_count: Option<u64>,
}

// ---------------------------------------------------------------- Vertex

#[derive(Serialize)]
struct Predict {
    instances: Vec<Instance>,
    parameters: Parameters,
}

#[derive(Serialize)]
struct Instance {
    content: String,
    task_type: &'static str,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Parameters {
    /// A text over the model's input limit fails instead of being cut silently.
    auto_truncate: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    output_dimensionality: Option<u32>,
}

fn vertex_request(inputs: Vec<String>, params: &EmbeddingParams) -> Result<(String, Vec<u8>), CodecError> {
    let path = model_path(&params.wire_model_id, ":predict")?;
    let instances =
        inputs.into_iter().map(|content| Instance { content, task_type: task_type(params.purpose) }).collect();
    let parameters = Parameters { auto_truncate: false, output_dimensionality: params.dimensions };
    Ok((path, to_body(&Predict { instances, parameters })?))
}

#[derive(Deserialize)]
struct PredictAnswer {
    predictions: Vec<Prediction>,
}

#[derive(Deserialize)]
struct Prediction {
    embeddings: VertexEmbedding,
}

#[derive(Deserialize)]
struct VertexEmbedding {
    values: Vec<f32>,
    #[serde(default)]
    statistics: Option<Statistics>,
}

#[derive(Deserialize)]
struct Statistics {
    token_count: Option<f64>,
}

// ---------------------------------------------------------------- decode

pub fn decode(vertex: bool, response: &HttpResponse) -> Result<EmbeddingResponse, CodecError> {
    if vertex {
        let answer: PredictAnswer = from_body(&response.body)?;
        let mut tokens = Some(0_u64);
        let mut vectors = Vec::with_capacity(answer.predictions.len());
        for prediction in answer.predictions {
            let count = prediction.embeddings.statistics.and_then(|statistics| statistics.token_count);
            tokens = tokens.zip(count).map(|(sum, count)| sum + count.max(0.0) as u64);
            vectors.push(prediction.embeddings.values);
        }
        return Ok(EmbeddingResponse { vectors, input_tokens: tokens, served_model: None, request_id: None });
    }
    let answer: BatchEmbedAnswer = from_body(&response.body)?;
    Ok(EmbeddingResponse {
        vectors: answer.embeddings.into_iter().map(|embedding| embedding.values).collect(),
        input_tokens: answer.usage.and_then(|usage| usage.prompt_token_count),
        served_model: None,
        request_id: None,
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::panic)] // a failing test should stop loudly
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn params(dimensions: Option<u32>, purpose: EmbeddingPurpose) -> EmbeddingParams {
        EmbeddingParams { wire_model_id: "gemini-embedding-001".into(), purpose, dimensions }
    }

    #[test]
    fn studio_batch_request_and_answer() {
        let request = encode(false, vec!["a".into(), "b".into()], &params(Some(768), EmbeddingPurpose::Query)).unwrap();
        assert_eq!(request.path_and_query, "/models/gemini-embedding-001:batchEmbedContents");
        let body: Value = serde_json::from_slice(&request.body).unwrap();
        assert_eq!(
            body["requests"][1],
            json!({"model": "models/gemini-embedding-001", "content": {"parts": [{"text": "b"}]},
                   "taskType": "RETRIEVAL_QUERY", "outputDimensionality": 768})
        );
        let response = HttpResponse {
            status: 200,
            headers: vec![],
            body: br#"{"embeddings":[{"values":[0.1,-0.2]},{"values":[0.3,0.4]}]}"#.to_vec(),
        };
        let answer = decode(false, &response).unwrap();
        assert_eq!(answer.vectors, vec![vec![0.1, -0.2], vec![0.3, 0.4]]);
        assert_eq!(answer.input_tokens, None);
    }

    #[test]
    fn vertex_predict_request_and_answer() {
        let request = encode(true, vec!["a".into()], &params(None, EmbeddingPurpose::Document)).unwrap();
        assert_eq!(request.path_and_query, "/models/gemini-embedding-001:predict");
        let body: Value = serde_json::from_slice(&request.body).unwrap();
        assert_eq!(
            body,
            json!({"instances": [{"content": "a", "task_type": "RETRIEVAL_DOCUMENT"}],
                   "parameters": {"autoTruncate": false}})
        );
        let response = HttpResponse {
            status: 200,
            headers: vec![],
            body: br#"{"predictions":[{"embeddings":{"statistics":{"truncated":false,"token_count":6},"values":[0.5,0.5]}}],"metadata":{"billableCharacterCount":1}}"#.to_vec(),
        };
        let answer = decode(true, &response).unwrap();
        assert_eq!((answer.vectors, answer.input_tokens), (vec![vec![0.5, 0.5]], Some(6)));
        assert_eq!((max_batch(true, "gemini-embedding-001"), max_batch(true, "text-embedding-005")), (1, 250));
        assert_eq!(max_batch(false, "gemini-embedding-001"), 100);
    }

    #[test]
    fn garbage_is_malformed_and_an_empty_batch_refused() {
        let garbage = HttpResponse { status: 200, headers: vec![], body: br#"{"embeddings":7}"#.to_vec() };
        assert!(matches!(decode(false, &garbage), Err(CodecError::Malformed(_))));
        assert!(matches!(decode(true, &garbage), Err(CodecError::Malformed(_))));
        assert!(matches!(
            encode(false, vec![], &params(None, EmbeddingPurpose::Query)),
            Err(CodecError::Unsupported(_))
        ));
    }
}
