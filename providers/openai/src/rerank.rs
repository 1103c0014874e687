//! Reranking (`POST {endpoint}/rerank`), for `openai-compatible` only: OpenAI
//! itself has no rerank API.
//!
//! The shape is the one Jina and Cohere defined and vLLM copies on its
//! `/v1/rerank` (and `/rerank`) route: `{"model", "query", "documents": [..],
//! "top_n"}` in, `{"results": [{"index", "relevance_score"}], "usage"}` out.
//! TEI's native `/rerank` is a different shape (`texts` in, a bare array of
//! `{"index", "score"}` out) and is not spoken here: a TEI reranker is reached
//! through a server that offers this shape.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use weir_sdk::json::{from_body, to_body};
use weir_sdk::types::{CodecError, HttpRequest, HttpResponse, Ranked, RerankParams, RerankResponse};

use crate::answer::{input_tokens, refuse_error_object, request_id};
use crate::dialect::Dialect;
use crate::response::text;

/// Appended to the endpoint's base URL (which ends in `/v1`).
pub const PATH: &str = "/rerank";

/// Whether `dialect` reranks with `wire_id`: a compatible server may serve any
/// name; OpenAI serves none.
pub fn serves(dialect: Dialect, _wire_id: &str) -> bool {
    match dialect {
        Dialect::OpenAi => false,
        Dialect::Compatible => true,
    }
}

/// The request body; `top_n` only when the host limits the answer (servers
/// return every document without it).
#[derive(Debug, Serialize)]
struct Body<'a> {
    model: &'a str,
    query: &'a str,
    documents: &'a [String],
    #[serde(skip_serializing_if = "Option::is_none")]
    top_n: Option<u32>,
}

/// Builds the request. No credential: the host adds it.
pub fn encode(
    dialect: Dialect,
    query: &str,
    documents: &[String],
    params: &RerankParams,
) -> Result<HttpRequest, CodecError> {
    if dialect == Dialect::OpenAi {
        return Err(CodecError::Unsupported("api.openai.com has no rerank API".to_owned()));
    }
    let body = Body { model: &params.wire_model_id, query, documents, top_n: params.top_n };
    Ok(HttpRequest {
        method: "POST".to_owned(),
        path_and_query: PATH.to_owned(),
        headers: vec![("content-type".to_owned(), "application/json".to_owned())],
        body: to_body(&body)?,
    })
}

/// The response body; `results` defaults to empty so an error object sent with
/// a 2xx status is reported as one. Each result's `document` echo is ignored.
#[derive(Debug, Deserialize)]
struct Answer {
    #[serde(default)]
    results: Vec<Scored>,
    #[serde(default)]
    model: Option<Value>,
    #[serde(default)]
    usage: Option<Value>,
    #[serde(default)]
    id: Option<Value>,
    #[serde(default)]
    error: Option<serde::de::IgnoredAny>,
    #[serde(default)]
    object: Option<Value>,
}

#[derive(Debug, Deserialize)]
struct Scored {
    index: u32,
    relevance_score: f64,
}

/// Normalizes a 2xx response, best first. Servers send the results sorted;
/// they are sorted again here (stably, by descending score) so the order the
/// host relies on does not depend on every server getting it right.
///
/// The component does not see the request, so the host checks each index
/// against the documents it sent (and the count against `top_n`); here an
/// index may appear only once.
pub fn decode(response: &HttpResponse) -> Result<RerankResponse, CodecError> {
    // serde fills a struct from a JSON array too: a ranking is an object.
    if response.body.iter().find(|byte| !byte.is_ascii_whitespace()) != Some(&b'{') {
        return Err(CodecError::Malformed(
            "the body is not the expected JSON: a rerank answer is an object".to_owned(),
        ));
    }
    let answer: Answer = from_body(&response.body)?;
    refuse_error_object(response, answer.error.is_some(), answer.object.as_ref(), "a ranking")?;
    let mut results: Vec<Ranked> = answer
        .results
        .into_iter()
        .map(|result| Ranked { index: result.index, relevance_score: result.relevance_score })
        .collect();
    check_unique(&results)?;
    results.sort_by(|a, b| b.relevance_score.total_cmp(&a.relevance_score));
    Ok(RerankResponse {
        results,
        input_tokens: input_tokens(answer.usage.as_ref()),
        search_units: None,
        served_model: text(answer.model.as_ref()),
        request_id: request_id(response, answer.id.as_ref()),
    })
}

fn check_unique(results: &[Ranked]) -> Result<(), CodecError> {
    let mut seen: Vec<u32> = results.iter().map(|result| result.index).collect();
    seen.sort_unstable();
    match seen.windows(2).find(|pair| pair[0] == pair[1]) {
        Some(pair) => Err(CodecError::Malformed(format!("index {} appears twice in results", pair[0]))),
        None => Ok(()),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::panic)] // a failing test should stop loudly
mod tests {
    use serde_json::json;

    use super::*;

    fn params(top_n: Option<u32>) -> RerankParams {
        RerankParams { wire_model_id: "BAAI/bge-reranker-v2-m3".to_owned(), top_n }
    }

    fn documents(texts: &[&str]) -> Vec<String> {
        texts.iter().map(|text| (*text).to_owned()).collect()
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
    fn only_compatible_servers_rerank() {
        assert!(serves(Dialect::Compatible, "BAAI/bge-reranker-v2-m3"));
        assert!(serves(Dialect::Compatible, "jina-reranker-v2-base-multilingual"));
        assert!(!serves(Dialect::OpenAi, "BAAI/bge-reranker-v2-m3"));
        assert!(!serves(Dialect::OpenAi, "text-embedding-3-small"));
    }

    #[test]
    fn encodes_query_documents_and_top_n() {
        let request =
            encode(Dialect::Compatible, "capital?", &documents(&["Paris", "a cat"]), &params(Some(1))).unwrap();
        assert_eq!(request.method, "POST");
        assert_eq!(request.path_and_query, "/rerank");
        assert_eq!(request.headers, vec![("content-type".to_owned(), "application/json".to_owned())]);
        let body: Value = serde_json::from_slice(&request.body).unwrap();
        assert_eq!(
            body,
            json!({"model": "BAAI/bge-reranker-v2-m3", "query": "capital?", "documents": ["Paris", "a cat"], "top_n": 1})
        );
    }

    #[test]
    fn top_n_is_left_out_when_unset() {
        let request = encode(Dialect::Compatible, "q", &documents(&["d"]), &params(None)).unwrap();
        let body: Value = serde_json::from_slice(&request.body).unwrap();
        assert_eq!(body, json!({"model": "BAAI/bge-reranker-v2-m3", "query": "q", "documents": ["d"]}));
    }

    #[test]
    fn openai_refuses_to_encode() {
        let refused = encode(Dialect::OpenAi, "q", &documents(&["d"]), &params(None));
        assert!(matches!(refused, Err(CodecError::Unsupported(m)) if m.contains("no rerank")));
    }

    #[test]
    fn decodes_a_vllm_ranking() {
        let body = r#"{"id":"rerank-5f2b","model":"BAAI/bge-reranker-v2-m3",
            "usage":{"prompt_tokens":41,"total_tokens":41},
            "results":[
              {"index":1,"document":{"text":"Paris is the capital of France.","multi_modal":null},"relevance_score":0.98},
              {"index":0,"document":{"text":"A cat.","multi_modal":null},"relevance_score":0.0001}]}"#;
        let decoded = decode(&ok(body)).unwrap();
        assert_eq!(
            decoded.results,
            vec![Ranked { index: 1, relevance_score: 0.98 }, Ranked { index: 0, relevance_score: 0.0001 }]
        );
        assert_eq!(decoded.input_tokens, Some(41));
        assert_eq!(decoded.search_units, None);
        assert_eq!(decoded.served_model.as_deref(), Some("BAAI/bge-reranker-v2-m3"));
        assert_eq!(decoded.request_id.as_deref(), Some("rerank-5f2b"), "the body id without x-request-id");
    }

    #[test]
    fn decodes_a_jina_ranking_with_total_tokens_only() {
        let body = r#"{"model":"jina-reranker-v2-base-multilingual","usage":{"total_tokens":15},
            "results":[{"index":2,"relevance_score":0.7},{"index":0,"relevance_score":0.2}]}"#;
        let mut response = ok(body);
        response.headers.push(("x-request-id".to_owned(), "req_9".to_owned()));
        let decoded = decode(&response).unwrap();
        assert_eq!(decoded.input_tokens, Some(15));
        assert_eq!(decoded.request_id.as_deref(), Some("req_9"));
        assert_eq!(decoded.results.iter().map(|r| r.index).collect::<Vec<_>>(), vec![2, 0]);
    }

    #[test]
    fn results_come_out_best_first_ties_in_server_order() {
        let body = r#"{"results":[{"index":0,"relevance_score":0.1},{"index":3,"relevance_score":0.5},
            {"index":1,"relevance_score":0.5},{"index":2,"relevance_score":0.9}]}"#;
        let decoded = decode(&ok(body)).unwrap();
        assert_eq!(decoded.results.iter().map(|r| r.index).collect::<Vec<_>>(), vec![2, 3, 1, 0]);
        assert_eq!(decoded.input_tokens, None);
    }

    #[test]
    fn a_duplicate_index_is_malformed() {
        let message = malformed(r#"{"results":[{"index":1,"relevance_score":0.9},{"index":1,"relevance_score":0.1}]}"#);
        assert!(message.contains("index 1 appears twice"), "{message}");
    }

    #[test]
    fn a_missing_or_negative_index_or_score_is_malformed() {
        assert!(malformed(r#"{"results":[{"relevance_score":0.9}]}"#).contains("not the expected JSON"));
        assert!(malformed(r#"{"results":[{"index":-1,"relevance_score":0.9}]}"#).contains("not the expected JSON"));
        assert!(malformed(r#"{"results":[{"index":0}]}"#).contains("not the expected JSON"));
        // TEI's native answer is a bare array: not this shape, and no array is an
        // empty ranking (serde would fill the struct from one).
        assert!(malformed(r#"[{"index":0,"score":0.9}]"#).contains("not the expected JSON"));
        assert!(malformed(" []").contains("not the expected JSON"));
    }

    #[test]
    fn an_error_object_in_a_2xx_is_malformed() {
        let message = malformed(r#"{"error":{"message":"no","type":"BadRequestError","param":null,"code":400}}"#);
        assert!(message.contains("error object") && message.contains("BadRequestError"), "{message}");
    }

    #[test]
    fn no_results_is_an_empty_ranking() {
        let decoded = decode(&ok(r#"{"results":[],"usage":{"total_tokens":0}}"#)).unwrap();
        assert!(decoded.results.is_empty());
        assert_eq!(decoded.input_tokens, Some(0));
    }
}
