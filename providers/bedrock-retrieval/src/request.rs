//! Encoding: a batch of inputs (or a query and its documents) → one InvokeModel
//! request, `POST /model/{id}/invoke` with the model's native JSON body
//! (reference `provider-wire.md` 3.8). The id goes in the path, escaped as every
//! Bedrock component escapes it (`weir_sdk::bedrock::model_path`); the request
//! carries no credential, since the host signs it with SigV4.
//!
//! Refused as `unsupported`, each before anything is sent:
//!
//! * Titan with other than exactly one input: Titan embeds one `inputText` per
//!   request, and several inputs are never joined into one text (that would
//!   answer one vector for several inputs). `max_batch` is 1, so the host never
//!   asks for more.
//! * Titan `dimensions` other than 256, 512 or 1024, Cohere v4
//!   `output_dimension` other than 256, 512, 1024 or 1536: the values the
//!   reference lists.
//! * Cohere without a width: `output_dimension` is always sent, so the host can
//!   check every vector's length against what was asked for; an entry must pin
//!   `embedding_dimensions`.
//! * Cohere with no input or more than 96: the documented limit of `texts`.
//! * Rerank with no document or `top_n` 0, which have no answer.

use serde_json::{Map, Value, json};
use weir_sdk::bedrock::model_path;
use weir_sdk::json::to_body;
use weir_sdk::types::{CodecError, EmbeddingParams, EmbeddingPurpose, Headers, HttpRequest, RerankParams};

use crate::model::Family;

/// InvokeModel, the only Bedrock operation these models answer (no streaming).
const INVOKE: &str = "invoke";

/// The most `texts` one Cohere Embed request may carry (v3 and v4).
pub const COHERE_MAX_TEXTS: u32 = 96;

/// Titan Text Embeddings V2's `dimensions` values.
const TITAN_DIMENSIONS: [u32; 3] = [256, 512, 1024];

/// Cohere Embed v4's `output_dimension` values.
const COHERE_V4_DIMENSIONS: [u32; 4] = [256, 512, 1024, 1536];

/// The rerank API version Cohere Rerank 3.5 on Bedrock takes. The reference has
/// no rerank section; this follows AWS's InvokeModel example for
/// `cohere.rerank-v3-5:0` (`{"query", "documents", "top_n", "api_version": 2}`).
const RERANK_API_VERSION: u32 = 2;

/// The request for one batch of inputs to an embedding family.
pub fn embeddings(family: Family, inputs: Vec<String>, params: &EmbeddingParams) -> Result<HttpRequest, CodecError> {
    let body = match family {
        Family::TitanEmbedV2 => titan_body(inputs, params)?,
        Family::CohereEmbedV3 | Family::CohereEmbedV4 => cohere_body(family, inputs, params)?,
        Family::CohereRerank => {
            return Err(CodecError::Unsupported(format!(
                "{} is a rerank model, not an embedding model",
                params.wire_model_id
            )));
        }
    };
    invoke(&params.wire_model_id, &body)
}

/// The request ranking `documents` against `query`.
pub fn rerank(query: String, documents: Vec<String>, params: &RerankParams) -> Result<HttpRequest, CodecError> {
    if documents.is_empty() {
        return Err(CodecError::Unsupported("rerank needs at least one document".to_owned()));
    }
    let mut body = Map::new();
    body.insert("query".to_owned(), Value::String(query));
    body.insert("documents".to_owned(), json!(documents));
    match params.top_n {
        Some(0) => return Err(CodecError::Unsupported("rerank top_n must be at least 1".to_owned())),
        Some(top_n) => {
            body.insert("top_n".to_owned(), json!(top_n));
        }
        None => {}
    }
    body.insert("api_version".to_owned(), json!(RERANK_API_VERSION));
    invoke(&params.wire_model_id, &Value::Object(body))
}

/// `{"inputText", "dimensions"?, "normalize": true}`. `normalize` is Titan's
/// default, sent so the body says what the vectors are; `embeddingTypes` is left
/// out, so `embedding` carries floats.
fn titan_body(inputs: Vec<String>, params: &EmbeddingParams) -> Result<Value, CodecError> {
    let count = inputs.len();
    let Ok([input]) = <[String; 1]>::try_from(inputs) else {
        return Err(CodecError::Unsupported(format!(
            "Titan Text Embeddings takes exactly one input per request, not {count}"
        )));
    };
    let mut body = Map::new();
    body.insert("inputText".to_owned(), Value::String(input));
    if let Some(dimensions) = params.dimensions {
        if !TITAN_DIMENSIONS.contains(&dimensions) {
            return Err(CodecError::Unsupported(format!(
                "Titan Text Embeddings V2 dimensions must be 256, 512 or 1024, not {dimensions}"
            )));
        }
        body.insert("dimensions".to_owned(), json!(dimensions));
    }
    body.insert("normalize".to_owned(), Value::Bool(true));
    Ok(Value::Object(body))
}

/// `{"texts", "input_type", "truncate": "NONE", "output_dimension",
/// "embedding_types": ["float"]}`, the same for v3 and v4 (the reference's v4
/// body carries its texts in `texts` too).
///
/// `truncate` is always `NONE`: an over-long input is an error, never an
/// embedding of part of it (`NONE` is spelled the same in v3's `START | END`
/// and v4's `LEFT | RIGHT` lists). `output_dimension` is always sent, v3
/// included, so the width is what the entry pinned; the reference documents the
/// field for v4 only and is silent on v3 accepting it.
fn cohere_body(family: Family, inputs: Vec<String>, params: &EmbeddingParams) -> Result<Value, CodecError> {
    if inputs.is_empty() || inputs.len() > COHERE_MAX_TEXTS as usize {
        return Err(CodecError::Unsupported(format!(
            "Cohere Embed takes 1 to {COHERE_MAX_TEXTS} inputs per request, not {}",
            inputs.len()
        )));
    }
    let Some(dimensions) = params.dimensions else {
        return Err(CodecError::Unsupported("Cohere Embed needs a pinned embedding_dimensions".to_owned()));
    };
    if family == Family::CohereEmbedV4 && !COHERE_V4_DIMENSIONS.contains(&dimensions) {
        return Err(CodecError::Unsupported(format!(
            "Cohere Embed v4 output_dimension must be 256, 512, 1024 or 1536, not {dimensions}"
        )));
    }
    let input_type = match params.purpose {
        EmbeddingPurpose::Document => "search_document",
        EmbeddingPurpose::Query => "search_query",
    };
    Ok(json!({
        "texts": inputs,
        "input_type": input_type,
        "truncate": "NONE",
        "output_dimension": dimensions,
        "embedding_types": ["float"],
    }))
}

fn invoke(wire_id: &str, body: &Value) -> Result<HttpRequest, CodecError> {
    Ok(HttpRequest {
        method: "POST".to_owned(),
        path_and_query: model_path(wire_id, INVOKE),
        headers: headers(),
        body: to_body(body)?,
    })
}

/// JSON in, JSON out. Never a credential: the host owns secrets and signs.
fn headers() -> Headers {
    vec![
        ("content-type".to_owned(), "application/json".to_owned()),
        ("accept".to_owned(), "application/json".to_owned()),
    ]
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::panic)] // a failing test should stop loudly
mod tests {
    use super::*;

    fn params(wire_id: &str, purpose: EmbeddingPurpose, dimensions: Option<u32>) -> EmbeddingParams {
        EmbeddingParams { wire_model_id: wire_id.to_owned(), purpose, dimensions }
    }

    fn texts(items: &[&str]) -> Vec<String> {
        items.iter().map(|item| (*item).to_owned()).collect()
    }

    fn body(request: &HttpRequest) -> Value {
        serde_json::from_slice(&request.body).unwrap()
    }

    fn unsupported(result: Result<HttpRequest, CodecError>) -> String {
        match result {
            Err(CodecError::Unsupported(message)) => message,
            other => panic!("expected unsupported, got {other:?}"),
        }
    }

    #[test]
    fn titan_one_input_with_dimensions() {
        let p = params("amazon.titan-embed-text-v2:0", EmbeddingPurpose::Query, Some(512));
        let request = embeddings(Family::TitanEmbedV2, texts(&["hello"]), &p).unwrap();
        assert_eq!(request.method, "POST");
        assert_eq!(request.path_and_query, "/model/amazon.titan-embed-text-v2:0/invoke");
        assert_eq!(
            request.headers,
            vec![
                ("content-type".to_owned(), "application/json".to_owned()),
                ("accept".to_owned(), "application/json".to_owned())
            ]
        );
        assert_eq!(body(&request), json!({"inputText": "hello", "dimensions": 512, "normalize": true}));
    }

    #[test]
    fn titan_without_dimensions_sends_none() {
        let p = params("us.amazon.titan-embed-text-v2:0", EmbeddingPurpose::Document, None);
        let request = embeddings(Family::TitanEmbedV2, texts(&["hello"]), &p).unwrap();
        assert_eq!(request.path_and_query, "/model/us.amazon.titan-embed-text-v2:0/invoke");
        assert_eq!(body(&request), json!({"inputText": "hello", "normalize": true}));
    }

    #[test]
    fn titan_refuses_any_count_but_one() {
        let p = params("amazon.titan-embed-text-v2:0", EmbeddingPurpose::Document, None);
        let message = unsupported(embeddings(Family::TitanEmbedV2, texts(&["a", "b"]), &p));
        assert!(message.contains("exactly one input") && message.contains("not 2"), "{message}");
        let message = unsupported(embeddings(Family::TitanEmbedV2, vec![], &p));
        assert!(message.contains("not 0"), "{message}");
    }

    #[test]
    fn titan_dimensions_are_checked() {
        for dimensions in [256, 512, 1024] {
            let p = params("amazon.titan-embed-text-v2:0", EmbeddingPurpose::Document, Some(dimensions));
            assert!(embeddings(Family::TitanEmbedV2, texts(&["x"]), &p).is_ok(), "{dimensions}");
        }
        for dimensions in [0, 384, 1536] {
            let p = params("amazon.titan-embed-text-v2:0", EmbeddingPurpose::Document, Some(dimensions));
            let message = unsupported(embeddings(Family::TitanEmbedV2, texts(&["x"]), &p));
            assert!(message.contains("256, 512 or 1024") && message.contains(&dimensions.to_string()), "{message}");
        }
    }

    #[test]
    fn cohere_purpose_maps_onto_input_type_and_every_rule_is_sent() {
        let cases = [
            (Family::CohereEmbedV3, "cohere.embed-english-v3", EmbeddingPurpose::Document, "search_document", 1024),
            (Family::CohereEmbedV3, "cohere.embed-multilingual-v3", EmbeddingPurpose::Query, "search_query", 1024),
            (Family::CohereEmbedV4, "cohere.embed-v4:0", EmbeddingPurpose::Document, "search_document", 1536),
            (Family::CohereEmbedV4, "us.cohere.embed-v4:0", EmbeddingPurpose::Query, "search_query", 256),
        ];
        for (family, id, purpose, input_type, dimensions) in cases {
            let p = params(id, purpose, Some(dimensions));
            let request = embeddings(family, texts(&["first", "second"]), &p).unwrap();
            assert_eq!(request.path_and_query, format!("/model/{id}/invoke"));
            assert_eq!(
                body(&request),
                json!({
                    "texts": ["first", "second"],
                    "input_type": input_type,
                    "truncate": "NONE",
                    "output_dimension": dimensions,
                    "embedding_types": ["float"],
                }),
                "{id}"
            );
        }
    }

    #[test]
    fn cohere_needs_pinned_dimensions() {
        for (family, id) in
            [(Family::CohereEmbedV3, "cohere.embed-english-v3"), (Family::CohereEmbedV4, "cohere.embed-v4:0")]
        {
            let p = params(id, EmbeddingPurpose::Document, None);
            let message = unsupported(embeddings(family, texts(&["x"]), &p));
            assert_eq!(message, "Cohere Embed needs a pinned embedding_dimensions");
        }
    }

    #[test]
    fn cohere_v4_dimensions_are_checked() {
        let p = params("cohere.embed-v4:0", EmbeddingPurpose::Document, Some(768));
        let message = unsupported(embeddings(Family::CohereEmbedV4, texts(&["x"]), &p));
        assert!(message.contains("256, 512, 1024 or 1536") && message.contains("768"), "{message}");
    }

    #[test]
    fn cohere_input_counts() {
        let p = params("cohere.embed-v4:0", EmbeddingPurpose::Document, Some(1024));
        let message = unsupported(embeddings(Family::CohereEmbedV4, vec![], &p));
        assert!(message.contains("1 to 96") && message.contains("not 0"), "{message}");
        let many: Vec<String> = (0..97).map(|i| format!("text {i}")).collect();
        let message = unsupported(embeddings(Family::CohereEmbedV4, many, &p));
        assert!(message.contains("not 97"), "{message}");
        let most: Vec<String> = (0..96).map(|i| format!("text {i}")).collect();
        let request = embeddings(Family::CohereEmbedV4, most, &p).unwrap();
        assert_eq!(body(&request)["texts"].as_array().unwrap().len(), 96);
    }

    #[test]
    fn a_rerank_id_does_not_embed() {
        let p = params("cohere.rerank-v3-5:0", EmbeddingPurpose::Document, Some(1024));
        let message = unsupported(embeddings(Family::CohereRerank, texts(&["x"]), &p));
        assert!(message.contains("rerank model"), "{message}");
    }

    #[test]
    fn rerank_body() {
        let p = RerankParams { wire_model_id: "cohere.rerank-v3-5:0".to_owned(), top_n: Some(2) };
        let request = rerank("capital?".to_owned(), texts(&["Paris", "Berlin", "Rome"]), &p).unwrap();
        assert_eq!(request.path_and_query, "/model/cohere.rerank-v3-5:0/invoke");
        assert_eq!(
            body(&request),
            json!({"query": "capital?", "documents": ["Paris", "Berlin", "Rome"], "top_n": 2, "api_version": 2})
        );
        let all = RerankParams { top_n: None, ..p };
        let request = rerank("capital?".to_owned(), texts(&["Paris"]), &all).unwrap();
        assert_eq!(body(&request), json!({"query": "capital?", "documents": ["Paris"], "api_version": 2}));
    }

    #[test]
    fn rerank_refusals() {
        let p = RerankParams { wire_model_id: "cohere.rerank-v3-5:0".to_owned(), top_n: None };
        assert!(unsupported(rerank("q".to_owned(), vec![], &p)).contains("at least one document"));
        let zero = RerankParams { top_n: Some(0), ..p };
        assert!(unsupported(rerank("q".to_owned(), texts(&["d"]), &zero)).contains("top_n"));
    }

    #[test]
    fn an_arn_is_one_path_segment() {
        let id = "arn:aws:bedrock:us-east-1::foundation-model/cohere.rerank-v3-5:0";
        let p = RerankParams { wire_model_id: id.to_owned(), top_n: None };
        let request = rerank("q".to_owned(), texts(&["d"]), &p).unwrap();
        assert_eq!(
            request.path_and_query,
            "/model/arn:aws:bedrock:us-east-1::foundation-model%2Fcohere.rerank-v3-5:0/invoke"
        );
    }
}
