//! Decoding a 2xx InvokeModel body. `decode` sees the response only, never the
//! request or the wire id, so the family is read from the body's shape:
//!
//! * Titan: `{"embedding": [..], "inputTextTokenCount", "embeddingsByType"}`,
//!   one vector (the float `embedding`; `embeddingsByType.float` when it is
//!   missing).
//! * Cohere Embed (v3 and v4): `{"embeddings": ..}`, a list of vectors when no
//!   `embedding_types` was asked, else an object keyed by type whose `float` is
//!   that list. When the body echoes `texts`, their count must match.
//! * Cohere Rerank: `{"results": [{"index", "relevance_score"}], "meta":
//!   {"billed_units": {"search_units"}}}`.
//!
//! Billed input tokens: Bedrock's `X-Amzn-Bedrock-Input-Token-Count` header
//! when present and a number, else the body's count (Titan's
//! `inputTextTokenCount`; Cohere's bodies carry none), else none. The request id
//! is `x-amzn-requestid`. None of these bodies names the model, so
//! `served-model` is none.
//!
//! The host checks what only it can: one vector per input, each of the width it
//! asked for, and every rerank `index` below the number of documents it sent.
//! This decoder refuses what the body alone shows is wrong: a vector that is not
//! all numbers, an `index` that is not a whole number in `u32`, the same index
//! twice, a score that is not a finite number.

use serde_json::Value;
use weir_sdk::http::header;
use weir_sdk::json::from_body;
use weir_sdk::types::{CodecError, EmbeddingResponse, HttpResponse, Ranked, RerankResponse};

/// The response header Bedrock counts billed input tokens in.
const INPUT_TOKEN_HEADER: &str = "x-amzn-bedrock-input-token-count";

/// Normalizes a Titan or Cohere Embed response.
pub fn embeddings(response: &HttpResponse) -> Result<EmbeddingResponse, CodecError> {
    let body = object(response)?;
    let (vectors, body_tokens) = if body.get("embedding").is_some() || body.get("embeddingsByType").is_some() {
        titan(&body)?
    } else if let Some(embeddings) = body.get("embeddings") {
        (cohere(&body, embeddings)?, None)
    } else {
        return Err(CodecError::Malformed(
            "response has neither `embedding` (Titan) nor `embeddings` (Cohere)".to_owned(),
        ));
    };
    Ok(EmbeddingResponse {
        vectors,
        input_tokens: header_tokens(response).or(body_tokens),
        served_model: None,
        request_id: request_id(response),
    })
}

/// Normalizes a Cohere Rerank response, best first as Cohere ranked it.
pub fn rerank(response: &HttpResponse) -> Result<RerankResponse, CodecError> {
    let body = object(response)?;
    let results = body
        .get("results")
        .and_then(Value::as_array)
        .ok_or_else(|| CodecError::Malformed("response has no `results` array".to_owned()))?;
    let mut ranked: Vec<Ranked> = Vec::with_capacity(results.len());
    for (position, result) in results.iter().enumerate() {
        let malformed = |what: &str| CodecError::Malformed(format!("result {position}: {what}"));
        let index = result
            .get("index")
            .and_then(whole_number)
            .and_then(|index| u32::try_from(index).ok())
            .ok_or_else(|| malformed("`index` is not a document position"))?;
        if ranked.iter().any(|earlier| earlier.index == index) {
            return Err(malformed(&format!("document {index} is ranked twice")));
        }
        let relevance_score = result
            .get("relevance_score")
            .and_then(Value::as_f64)
            .filter(|score| score.is_finite())
            .ok_or_else(|| malformed("`relevance_score` is not a number"))?;
        ranked.push(Ranked { index, relevance_score });
    }
    Ok(RerankResponse {
        results: ranked,
        input_tokens: header_tokens(response),
        search_units: body.pointer("/meta/billed_units/search_units").and_then(whole_number),
        served_model: None,
        request_id: request_id(response),
    })
}

fn object(response: &HttpResponse) -> Result<Value, CodecError> {
    let body: Value = from_body(&response.body)?;
    if body.is_object() { Ok(body) } else { Err(CodecError::Malformed("response is not a JSON object".to_owned())) }
}

/// Titan's one vector and its `inputTextTokenCount`.
fn titan(body: &Value) -> Result<(Vec<Vec<f32>>, Option<u64>), CodecError> {
    let vector = match body.get("embedding") {
        Some(embedding) => embedding,
        None => body
            .pointer("/embeddingsByType/float")
            .ok_or_else(|| CodecError::Malformed("Titan response has no float embedding".to_owned()))?,
    };
    let vector =
        floats(vector).ok_or_else(|| CodecError::Malformed("`embedding` is not a list of numbers".to_owned()))?;
    Ok((vec![vector], body.get("inputTextTokenCount").and_then(whole_number)))
}

/// Cohere's vectors from `embeddings`, a list or an object keyed by type.
fn cohere(body: &Value, embeddings: &Value) -> Result<Vec<Vec<f32>>, CodecError> {
    let list = match embeddings {
        Value::Array(list) => list,
        Value::Object(by_type) => by_type
            .get("float")
            .and_then(Value::as_array)
            .ok_or_else(|| CodecError::Malformed("`embeddings` is keyed by type but has no `float` list".to_owned()))?,
        _ => return Err(CodecError::Malformed("`embeddings` is neither a list nor keyed by type".to_owned())),
    };
    let mut vectors = Vec::with_capacity(list.len());
    for (position, vector) in list.iter().enumerate() {
        let vector = floats(vector)
            .ok_or_else(|| CodecError::Malformed(format!("embedding {position} is not a list of numbers")))?;
        vectors.push(vector);
    }
    if let Some(texts) = body.get("texts").and_then(Value::as_array)
        && texts.len() != vectors.len()
    {
        return Err(CodecError::Malformed(format!(
            "{} embeddings for {} texts echoed in the response",
            vectors.len(),
            texts.len()
        )));
    }
    Ok(vectors)
}

/// A list of numbers as `f32`s (the WIT vector type); `None` when anything else.
fn floats(value: &Value) -> Option<Vec<f32>> {
    value.as_array()?.iter().map(|number| number.as_f64().map(|number| number as f32)).collect()
}

/// A non-negative whole number, written as an integer or as a float with no
/// fraction (`2` or `2.0`).
fn whole_number(value: &Value) -> Option<u64> {
    if let Some(number) = value.as_u64() {
        return Some(number);
    }
    let number = value.as_f64()?;
    (number.is_finite() && number >= 0.0 && number.fract() == 0.0 && number <= u64::MAX as f64).then_some(number as u64)
}

/// The header's count; an absent or unparseable header says nothing.
fn header_tokens(response: &HttpResponse) -> Option<u64> {
    header(&response.headers, INPUT_TOKEN_HEADER).and_then(|count| count.parse().ok())
}

fn request_id(response: &HttpResponse) -> Option<String> {
    header(&response.headers, "x-amzn-requestid").filter(|id| !id.is_empty()).map(str::to_owned)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::panic)] // a failing test should stop loudly
mod tests {
    use serde_json::json;

    use super::*;

    fn response(headers: &[(&str, &str)], body: &Value) -> HttpResponse {
        HttpResponse {
            status: 200,
            headers: headers.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect(),
            body: body.to_string().into_bytes(),
        }
    }

    fn malformed<T: std::fmt::Debug>(result: Result<T, CodecError>) -> String {
        match result {
            Err(CodecError::Malformed(message)) => message,
            other => panic!("expected malformed, got {other:?}"),
        }
    }

    #[test]
    fn titan_vector_body_tokens_and_request_id() {
        let body = json!({"embedding": [0.5, -0.25, 0.125], "inputTextTokenCount": 3,
                          "embeddingsByType": {"float": [0.5, -0.25, 0.125]}});
        let decoded = embeddings(&response(&[("x-amzn-RequestId", "req-1")], &body)).unwrap();
        assert_eq!(decoded.vectors, vec![vec![0.5, -0.25, 0.125]]);
        assert_eq!(decoded.input_tokens, Some(3));
        assert_eq!(decoded.served_model, None);
        assert_eq!(decoded.request_id.as_deref(), Some("req-1"));
    }

    #[test]
    fn the_token_header_is_preferred_in_any_case() {
        let body = json!({"embedding": [1.0], "inputTextTokenCount": 3});
        let decoded = embeddings(&response(&[("X-Amzn-Bedrock-Input-Token-Count", "7")], &body)).unwrap();
        assert_eq!(decoded.input_tokens, Some(7));
        let decoded = embeddings(&response(&[("x-amzn-bedrock-input-token-count", " 8 ")], &body)).unwrap();
        assert_eq!(decoded.input_tokens, Some(8));
        // An unparseable header says nothing: the body's count stands.
        let decoded = embeddings(&response(&[("x-amzn-bedrock-input-token-count", "many")], &body)).unwrap();
        assert_eq!(decoded.input_tokens, Some(3));
    }

    #[test]
    fn titan_by_type_only() {
        let body = json!({"embeddingsByType": {"float": [0.25, 0.75], "binary": [1, 0]}, "inputTextTokenCount": 2.0});
        let decoded = embeddings(&response(&[], &body)).unwrap();
        assert_eq!(decoded.vectors, vec![vec![0.25, 0.75]]);
        assert_eq!(decoded.input_tokens, Some(2));
        let no_float = json!({"embeddingsByType": {"binary": [1, 0]}});
        assert!(malformed(embeddings(&response(&[], &no_float))).contains("no float embedding"));
    }

    #[test]
    fn cohere_as_a_list() {
        let body = json!({"embeddings": [[0.1, 0.2], [0.3, 0.4]], "id": "e1", "response_type": "embeddings_floats",
                          "texts": ["a", "b"]});
        let decoded = embeddings(&response(&[("x-amzn-bedrock-input-token-count", "4")], &body)).unwrap();
        assert_eq!(decoded.vectors, vec![vec![0.1, 0.2], vec![0.3, 0.4]]);
        assert_eq!(decoded.input_tokens, Some(4));
    }

    #[test]
    fn cohere_keyed_by_type() {
        let body = json!({"embeddings": {"float": [[0.1, 0.2], [0.3, 0.4]], "int8": [[12, 25], [38, 51]]},
                          "id": "e2", "response_type": "embeddings_by_type", "texts": ["a", "b"]});
        let decoded = embeddings(&response(&[], &body)).unwrap();
        assert_eq!(decoded.vectors, vec![vec![0.1, 0.2], vec![0.3, 0.4]]);
        assert_eq!(decoded.input_tokens, None, "Cohere's body counts no tokens");
        assert_eq!(decoded.request_id, None);
    }

    #[test]
    fn cohere_malformed_bodies() {
        let cases = [
            (json!({"embeddings": {"int8": [[1]]}}), "no `float` list"),
            (json!({"embeddings": "floats"}), "neither a list nor keyed by type"),
            (json!({"embeddings": [[0.1], ["x"]]}), "embedding 1 is not a list of numbers"),
            (json!({"embeddings": [[0.1]], "texts": ["a", "b"]}), "1 embeddings for 2 texts"),
            (json!({"vectors": []}), "neither `embedding` (Titan) nor `embeddings` (Cohere)"),
            (json!({"embedding": "x"}), "not a list of numbers"),
            (json!([1, 2]), "not a JSON object"),
        ];
        for (body, expected) in cases {
            let message = malformed(embeddings(&response(&[], &body)));
            assert!(message.contains(expected), "{body}: {message}");
        }
        let not_json = HttpResponse { status: 200, headers: vec![], body: b"<html>".to_vec() };
        assert!(malformed(embeddings(&not_json)).contains("not the expected JSON"));
    }

    #[test]
    fn rerank_results_search_units_and_tokens() {
        let body = json!({
            "id": "r1",
            "results": [{"index": 2, "relevance_score": 0.98}, {"index": 0, "relevance_score": 0.125}],
            "meta": {"api_version": {"version": "2"}, "billed_units": {"search_units": 1}}
        });
        let headers = [("x-amzn-requestid", "req-2"), ("X-Amzn-Bedrock-Input-Token-Count", "31")];
        let decoded = rerank(&response(&headers, &body)).unwrap();
        assert_eq!(
            decoded.results,
            vec![Ranked { index: 2, relevance_score: 0.98 }, Ranked { index: 0, relevance_score: 0.125 }]
        );
        assert_eq!(decoded.search_units, Some(1));
        assert_eq!(decoded.input_tokens, Some(31));
        assert_eq!(decoded.request_id.as_deref(), Some("req-2"));
        assert_eq!(decoded.served_model, None);

        let bare = rerank(&response(&[], &json!({"results": []}))).unwrap();
        assert_eq!((bare.results.len(), bare.search_units, bare.input_tokens), (0, None, None));
    }

    #[test]
    fn rerank_malformed_bodies() {
        let cases = [
            (json!({"results": [{"index": -1, "relevance_score": 0.5}]}), "not a document position"),
            (json!({"results": [{"index": 4_294_967_296_u64, "relevance_score": 0.5}]}), "not a document position"),
            (json!({"results": [{"index": 1.5, "relevance_score": 0.5}]}), "not a document position"),
            (json!({"results": [{"relevance_score": 0.5}]}), "not a document position"),
            (json!({"results": [{"index": 0, "relevance_score": "high"}]}), "not a number"),
            (
                json!({"results": [{"index": 0, "relevance_score": 0.5}, {"index": 0, "relevance_score": 0.4}]}),
                "document 0 is ranked twice",
            ),
            (json!({"ranking": []}), "no `results` array"),
        ];
        for (body, expected) in cases {
            let message = malformed(rerank(&response(&[], &body)));
            assert!(message.contains(expected), "{body}: {message}");
        }
    }
}
