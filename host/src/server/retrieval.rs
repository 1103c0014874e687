//! `POST /v1/embeddings` (OpenAI's shape) and `POST /v1/rerank` (the Cohere /
//! Jina shape that vLLM and TEI serve): parse, call [`Weir::embed`] /
//! [`Weir::rerank`], answer in the same shape. Errors answer in OpenAI's
//! envelope, as the other non-Anthropic routes do.
//!
//! Knobs ride in headers, as for chat: `x-weir-lane` (`interactive` / `bulk`),
//! `x-weir-purpose` (`query` / `document`, over the body's `input_type`),
//! `x-weir-deadline-ms`, `x-weir-max-retries`.

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Extension, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use base64::Engine;
use serde::Deserialize;
use serde_json::{Value, json};

use super::{ApiError, Authenticated, cache_ask, deadline, number_header, stamp_headers, traceparent};
use crate::Weir;
use crate::admission::Lane;
use crate::record::Route;
use crate::retrieval::{EmbedRequest, EmbedResponse, RerankRequest, RerankResponse};
use crate::types::EmbeddingPurpose;

const LANE_HEADER: &str = "x-weir-lane";
const PURPOSE_HEADER: &str = "x-weir-purpose";

/// OpenAI's embeddings request body. Unknown fields are refused: a field
/// Weir would silently ignore is a request it does not understand.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct EmbeddingsBody {
    model: String,
    input: Value,
    dimensions: Option<u32>,
    encoding_format: Option<String>,
    /// Weir's own: `query` or `document` (default). Cohere's and vLLM's word.
    input_type: Option<String>,
    /// OpenAI's end-user id: accepted, not forwarded (the caller key says who).
    #[serde(rename = "user")]
    _user: Option<serde::de::IgnoredAny>,
}

pub(super) async fn embeddings(
    State(weir): State<Weir>,
    Extension(caller): Extension<Authenticated>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    let caller = caller.caller()?;
    let body: EmbeddingsBody = parse(&body)?;
    let base64 = match body.encoding_format.as_deref() {
        None | Some("float") => false,
        Some("base64") => true,
        Some(other) => {
            return Err(ApiError::invalid_request(format!("`encoding_format` is `float` or `base64`, not `{other}`")));
        }
    };
    let inputs = texts(&body.input)?;
    let mut request = EmbedRequest::new(body.model, inputs, purpose(&headers, body.input_type.as_deref())?);
    request.dimensions = body.dimensions;
    request.lane = lane(&headers)?;
    request.deadline = deadline(&headers)?;
    request.max_retries = number_header(&headers, "x-weir-max-retries")?;
    request.caller = caller;
    request.route = Route::OpenaiEmbeddings;
    request.traceparent = traceparent(&headers);
    request.cache = cache_ask(&headers);
    let answer = weir.embed(request).await?;
    let mut response = Json(embeddings_body(&answer, base64)).into_response();
    stamp_headers(response.headers_mut(), &answer.stamp);
    Ok(response)
}

/// `input`: one string or a list of strings. Token arrays (OpenAI accepts
/// them) are refused: the token ids of one model mean nothing to another.
fn texts(input: &Value) -> Result<Vec<String>, ApiError> {
    let token_arrays = || {
        ApiError::invalid_request(
            "`input` must be a string or an array of strings: token arrays are not accepted (send the text)",
        )
    };
    match input {
        Value::String(text) => Ok(vec![text.clone()]),
        Value::Array(items) => items
            .iter()
            .map(|item| match item {
                Value::String(text) => Ok(text.clone()),
                _ => Err(token_arrays()),
            })
            .collect(),
        _ => Err(token_arrays()),
    }
}

/// The purpose: `x-weir-purpose`, else the body's `input_type`, else document.
fn purpose(headers: &HeaderMap, input_type: Option<&str>) -> Result<EmbeddingPurpose, ApiError> {
    let header = headers.get(PURPOSE_HEADER).map(|value| value.to_str().unwrap_or_default().trim());
    match header.or(input_type) {
        None | Some("document") => Ok(EmbeddingPurpose::Document),
        Some("query") => Ok(EmbeddingPurpose::Query),
        Some(other) => Err(ApiError::invalid_request(format!(
            "the purpose (`input_type` or `{PURPOSE_HEADER}`) is `query` or `document`, not `{other}`"
        ))),
    }
}

fn lane(headers: &HeaderMap) -> Result<Option<Lane>, ApiError> {
    let Some(value) = headers.get(LANE_HEADER) else { return Ok(None) };
    let word = value.to_str().unwrap_or_default().trim();
    Lane::parse(word)
        .map(Some)
        .ok_or_else(|| ApiError::invalid_request(format!("`{LANE_HEADER}` is `interactive` or `bulk`, not `{word}`")))
}

fn embeddings_body(answer: &EmbedResponse, base64: bool) -> Value {
    let data: Vec<Value> = answer
        .vectors
        .iter()
        .enumerate()
        .map(|(index, vector)| {
            let embedding = if base64 { Value::String(little_endian_base64(vector)) } else { json!(vector) };
            json!({"object": "embedding", "index": index, "embedding": embedding})
        })
        .collect();
    json!({
        "object": "list",
        "data": data,
        "model": answer.stamp.model,
        "usage": {"prompt_tokens": answer.input_tokens, "total_tokens": answer.input_tokens},
    })
}

/// A vector as OpenAI's `encoding_format: "base64"` sends it: the f32 values'
/// little-endian bytes, base64-encoded.
fn little_endian_base64(vector: &[f32]) -> String {
    let bytes: Vec<u8> = vector.iter().flat_map(|value| value.to_le_bytes()).collect();
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// The rerank request body: `documents` as strings or `{"text": ...}` objects.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RerankBody {
    model: String,
    query: String,
    documents: Vec<Document>,
    top_n: Option<u32>,
    #[serde(default)]
    return_documents: bool,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum Document {
    Text(String),
    Object { text: String },
}

impl Document {
    fn into_text(self) -> String {
        match self {
            Self::Text(text) | Self::Object { text } => text,
        }
    }
}

pub(super) async fn rerank(
    State(weir): State<Weir>,
    Extension(caller): Extension<Authenticated>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    let caller = caller.caller()?;
    let body: RerankBody = parse(&body)?;
    let documents: Vec<String> = body.documents.into_iter().map(Document::into_text).collect();
    let mut request = RerankRequest::new(body.model, body.query, documents);
    request.top_n = body.top_n;
    request.deadline = deadline(&headers)?;
    request.max_retries = number_header(&headers, "x-weir-max-retries")?;
    request.caller = caller;
    request.route = Route::Rerank;
    request.traceparent = traceparent(&headers);
    request.cache = cache_ask(&headers);
    let documents = body.return_documents.then(|| request.documents.clone());
    let answer = weir.rerank(request).await?;
    let mut response = Json(rerank_body(&answer, documents.as_deref())).into_response();
    stamp_headers(response.headers_mut(), &answer.stamp);
    Ok(response)
}

fn rerank_body(answer: &RerankResponse, documents: Option<&[String]>) -> Value {
    let results: Vec<Value> = answer
        .results
        .iter()
        .map(|result| {
            let mut item = json!({"index": result.index, "relevance_score": result.relevance_score});
            let text = documents.and_then(|docs| docs.get(usize::try_from(result.index).unwrap_or(usize::MAX)));
            if let Some(text) = text {
                item["document"] = json!({"text": text});
            }
            item
        })
        .collect();
    let mut body = json!({"id": answer.stamp.call_id, "model": answer.stamp.model, "results": results});
    if let Some(tokens) = answer.input_tokens {
        body["usage"] = json!({"total_tokens": tokens});
    }
    if let Some(units) = answer.search_units {
        body["meta"] = json!({"billed_units": {"search_units": units}});
    }
    body
}

fn parse<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, ApiError> {
    serde_json::from_slice(body)
        .map_err(|error| ApiError::invalid_request(format!("the request body is not valid: {error}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn input_is_a_string_or_strings_and_never_token_ids() {
        assert_eq!(texts(&json!("hi")).unwrap(), vec!["hi"]);
        assert_eq!(texts(&json!(["a", "b"])).unwrap(), vec!["a", "b"]);
        assert!(texts(&json!([1, 2, 3])).is_err());
        assert!(texts(&json!([[1, 2], [3]])).is_err());
        assert!(texts(&json!(7)).is_err());
    }

    #[test]
    fn base64_is_the_little_endian_floats() {
        let encoded = little_endian_base64(&[1.0, -2.5]);
        let bytes = base64::engine::general_purpose::STANDARD.decode(encoded).unwrap();
        assert_eq!(bytes, [1.0f32.to_le_bytes(), (-2.5f32).to_le_bytes()].concat());
    }

    #[test]
    fn the_purpose_header_wins_over_the_body() {
        let mut headers = HeaderMap::new();
        assert!(matches!(purpose(&headers, None), Ok(EmbeddingPurpose::Document)));
        assert!(matches!(purpose(&headers, Some("query")), Ok(EmbeddingPurpose::Query)));
        headers.insert(PURPOSE_HEADER, "document".parse().unwrap());
        assert!(matches!(purpose(&headers, Some("query")), Ok(EmbeddingPurpose::Document)));
        headers.insert(PURPOSE_HEADER, "search".parse().unwrap());
        assert!(purpose(&headers, None).is_err());
    }
}
