//! `describe` + `rerank` of `weir:provider@0.3.0`, no chat. Key
//! `rerank-only`; it speaks the `/rerank` shape vLLM, TEI and Jina serve
//! (`{"model", "query", "documents", "top_n"}` in, `results[]` of `index` and
//! `relevance_score` out) with Cohere's `meta.billed_units.search_units`.

use serde_json::{Value, json};

use exports::weir::provider::describe::Guest as Describe;
use exports::weir::provider::rerank::Guest as Rerank;
use weir::provider::types::{
    Capabilities, CodecError, CredentialShape, ErrorClass, HttpRequest, HttpResponse, ProviderInfo, Ranked,
    RerankParams, RerankResponse, Retry, RetryHint, StreamFraming,
};

wit_bindgen::generate!({
    path: "../../wit/frozen/0.3.0",
    world: "rerank-provider",
});

struct RerankOnly;

impl Describe for RerankOnly {
    fn providers() -> Vec<ProviderInfo> {
        vec![ProviderInfo {
            key: "rerank-only".to_owned(),
            description: "reranking and nothing else (test suite only)".to_owned(),
            default_endpoint: None,
            credential: CredentialShape::None,
            capabilities: Capabilities::empty(),
            stream_framing: StreamFraming::Sse,
        }]
    }

    fn serves(_: String, _: String) -> bool {
        false
    }

    fn claims(_: String, _: String) -> bool {
        false
    }
}

impl Rerank for RerankOnly {
    fn serves(_: String, wire_id: String) -> bool {
        wire_id != crate::NOT_SERVED
    }

    fn encode(
        _: String,
        query: String,
        documents: Vec<String>,
        params: RerankParams,
    ) -> Result<HttpRequest, CodecError> {
        let body = json!({
            "model": params.wire_model_id,
            "query": query,
            "documents": documents,
            "top_n": params.top_n,
        });
        Ok(HttpRequest {
            method: "POST".to_owned(),
            path_and_query: "/rerank".to_owned(),
            headers: vec![("content-type".to_owned(), "application/json".to_owned())],
            body: crate::body(&body),
        })
    }

    fn decode(_: String, response: HttpResponse) -> Result<RerankResponse, CodecError> {
        let value: Value =
            serde_json::from_slice(&response.body).map_err(|e| CodecError::Malformed(format!("not JSON: {e}")))?;
        let results = value["results"].as_array().ok_or_else(|| CodecError::Malformed("no `results`".to_owned()))?;
        let results = results
            .iter()
            .map(|result| {
                let index = result["index"].as_u64().and_then(|index| u32::try_from(index).ok());
                match (index, result["relevance_score"].as_f64()) {
                    (Some(index), Some(relevance_score)) => Ok(Ranked { index, relevance_score }),
                    _ => Err(CodecError::Malformed("a result without `index` or `relevance_score`".to_owned())),
                }
            })
            .collect::<Result<Vec<_>, CodecError>>()?;
        Ok(RerankResponse {
            results,
            input_tokens: value["usage"]["total_tokens"].as_u64(),
            search_units: value["meta"]["billed_units"]["search_units"].as_u64(),
            served_model: value["model"].as_str().map(str::to_owned),
            request_id: value["id"].as_str().map(str::to_owned),
        })
    }

    fn classify(_: String, response: HttpResponse) -> ErrorClass {
        use crate::failure::{Class, Hint, class, detail, retry_after};
        let detail = detail(&response.body);
        let retry = |detail| Retry {
            hint: retry_after(&response.headers).map(|hint| match hint {
                Hint::DelayMs(ms) => RetryHint::DelayMs(ms),
                Hint::AtUnixMs(ms) => RetryHint::AtUnixMs(ms),
            }),
            detail,
        };
        match class(response.status) {
            Class::RateLimited => ErrorClass::RateLimited(retry(detail)),
            Class::Overloaded => ErrorClass::Overloaded(retry(detail)),
            Class::Transient => ErrorClass::Transient(retry(detail)),
            Class::Authentication => ErrorClass::Authentication(detail),
            Class::NotFound => ErrorClass::NotFound(detail),
            Class::InvalidRequest => ErrorClass::InvalidRequest(detail),
        }
    }
}

export!(RerankOnly);
