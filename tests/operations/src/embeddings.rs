//! `describe` + `embeddings` of `weir:provider@0.3.0`, no chat. Key
//! `embed-only`; it speaks `POST /embeddings` with `{"model", "input",
//! "input_type", "dimensions"}` and reads OpenAI's answer shape
//! (`data[].embedding`, `usage.prompt_tokens`, `model`).

use serde_json::{Value, json};

use exports::weir::provider::describe::Guest as Describe;
use exports::weir::provider::embeddings::Guest as Embeddings;
use weir::provider::types::{
    Capabilities, CodecError, CredentialShape, EmbeddingParams, EmbeddingPurpose, EmbeddingResponse, ErrorClass,
    HttpRequest, HttpResponse, ProviderInfo, Retry, RetryHint, StreamFraming,
};

wit_bindgen::generate!({
    path: "../../wit/frozen/0.3.0",
    world: "embedding-provider",
});

struct EmbedOnly;

impl Describe for EmbedOnly {
    fn providers() -> Vec<ProviderInfo> {
        vec![ProviderInfo {
            key: "embed-only".to_owned(),
            description: "embeddings and nothing else (test suite only)".to_owned(),
            default_endpoint: None,
            credential: CredentialShape::None,
            capabilities: Capabilities::empty(),
            stream_framing: StreamFraming::Sse,
        }]
    }

    /// It chats with nothing.
    fn serves(_: String, _: String) -> bool {
        false
    }

    fn claims(_: String, _: String) -> bool {
        false
    }
}

impl Embeddings for EmbedOnly {
    fn serves(_: String, wire_id: String) -> bool {
        if wire_id == crate::SERVES_PANICS {
            panic!("embeddings.serves panicked on purpose");
        }
        wire_id != crate::NOT_SERVED
    }

    fn max_batch(_: String, wire_id: String) -> u32 {
        match wire_id.as_str() {
            crate::MAX_BATCH_PANICS => panic!("embeddings.max-batch panicked on purpose"),
            crate::MAX_BATCH_ZERO => 0,
            crate::ONE_PER_REQUEST => 1,
            _ => crate::MAX_BATCH,
        }
    }

    fn needs_dimensions(_: String, _: String) -> bool {
        false
    }

    fn encode(_: String, inputs: Vec<String>, params: EmbeddingParams) -> Result<HttpRequest, CodecError> {
        if inputs.is_empty() {
            return Err(CodecError::Unsupported("no inputs".to_owned()));
        }
        let mut headers = vec![("content-type".to_owned(), "application/json".to_owned())];
        if params.wire_model_id == crate::TOO_MANY_HEADERS {
            headers.extend((0..crate::ABSURD_HEADER_COUNT).map(|i| (format!("x-{i}"), "v".to_owned())));
        }
        let input_type = match params.purpose {
            EmbeddingPurpose::Document => "document",
            EmbeddingPurpose::Query => "query",
        };
        let body = json!({
            "model": params.wire_model_id,
            "input": inputs,
            "input_type": input_type,
            "dimensions": params.dimensions,
        });
        Ok(HttpRequest {
            method: "POST".to_owned(),
            path_and_query: "/embeddings".to_owned(),
            headers,
            body: crate::body(&body),
        })
    }

    fn decode(_: String, response: HttpResponse) -> Result<EmbeddingResponse, CodecError> {
        let value: Value =
            serde_json::from_slice(&response.body).map_err(|e| CodecError::Malformed(format!("not JSON: {e}")))?;
        let data = value["data"].as_array().ok_or_else(|| CodecError::Malformed("no `data`".to_owned()))?;
        let vectors = data
            .iter()
            .map(|item| {
                let numbers =
                    item["embedding"].as_array().ok_or_else(|| CodecError::Malformed("no `embedding`".to_owned()))?;
                numbers
                    .iter()
                    .map(|n| {
                        n.as_f64().map(|n| n as f32).ok_or_else(|| CodecError::Malformed("not a number".to_owned()))
                    })
                    .collect::<Result<Vec<f32>, CodecError>>()
            })
            .collect::<Result<Vec<_>, CodecError>>()?;
        Ok(EmbeddingResponse {
            vectors,
            input_tokens: value["usage"]["prompt_tokens"].as_u64(),
            served_model: value["model"].as_str().map(str::to_owned),
            request_id: crate::header(&response.headers, "x-request-id").map(str::to_owned),
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

export!(EmbedOnly);
