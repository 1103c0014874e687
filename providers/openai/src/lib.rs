//! # weir-provider-openai
//!
//! One component, three provider keys, two wires, four operations:
//!
//! * `openai`: api.openai.com's Chat Completions, with its current field names and model rules.
//! * `openai-responses`: the same models through api.openai.com's Responses API
//!   (chat only), which carries a reasoning model's encrypted reasoning from one
//!   turn to the next (see `responses`).
//! * `openai-compatible`: vLLM, llama.cpp, Ollama, TEI and any other server that
//!   speaks the dialect. It has no default endpoint (a catalog entry must name
//!   one: we never invent endpoints) and its credential is optional (local
//!   servers need none).
//!
//! | operation | route | keys |
//! | --- | --- | --- |
//! | chat | `/chat/completions` | `openai`, `openai-compatible` |
//! | chat | `/responses` | `openai-responses` |
//! | embeddings | `/embeddings` | `openai` for `text-embedding-*` ids, `openai-compatible` for any id |
//! | rerank | `/rerank` (the Jina / Cohere / vLLM shape) | `openai-compatible` only |
//! | logprobs | `/chat/completions` with `logprobs`, `top_logprobs` | both (`openai`: not its reasoning families) |
//!
//! This file only describes the component and routes calls; the dialect lives in
//! the modules (`request`, `response`, `stream` for chat, `embeddings`,
//! `rerank`, and `errors` for every operation's failures), which use nothing
//! but `weir_sdk::types` and helpers, so they test natively.

mod answer;
mod dialect;
mod embeddings;
mod errors;
mod logprobs;
mod plain;
mod request;
mod rerank;
mod response;
mod responses;
mod stream;

use weir_sdk::types::{
    CallParams, Capabilities, ChatResponse, CodecError, CredentialShape, EmbeddingParams, EmbeddingResponse,
    ErrorClass, FirstToken, HeaderCredential, HttpRequest, HttpResponse, NativeRequest, NativeSupport,
    PreparedConversation, ProviderInfo, RerankParams, RerankResponse, StreamFraming,
};
use weir_sdk::{ChatProvider, EmbeddingProvider, LogprobsProvider, NativeProvider, RerankProvider};

use dialect::Dialect;

/// The component's provider implementation.
#[derive(Debug)]
pub struct OpenAi;

impl ChatProvider for OpenAi {
    type StreamDecoder = ChatStream;

    fn providers() -> Vec<ProviderInfo> {
        vec![openai_info(), compatible_info(), responses_info()]
    }

    /// Every key speaks the request shape of any model id: a compatible server may
    /// serve anything, and OpenAI's own ids change too often to list.
    fn serves(provider: &str, _wire_id: &str) -> bool {
        Dialect::from_key(provider).is_some() || provider == dialect::RESPONSES
    }

    /// Only `openai` claims a family: a compatible server can host anything, so it
    /// is linked by the catalog entry's endpoint, not by model name.
    fn claims(provider: &str, wire_id: &str) -> bool {
        provider == dialect::OPENAI && dialect::is_openai_family(wire_id)
    }

    fn encode(
        provider: &str,
        conversation: PreparedConversation,
        params: CallParams,
    ) -> Result<HttpRequest, CodecError> {
        match provider {
            dialect::RESPONSES => responses::encode(&conversation, &params),
            _ => request::encode(provider, &conversation, &params),
        }
    }

    /// Chat Completions decode the same for both of its keys: leniency costs
    /// OpenAI nothing.
    fn decode(provider: &str, response: HttpResponse) -> Result<ChatResponse, CodecError> {
        match provider {
            dialect::RESPONSES => responses::decode(&response),
            _ => response::decode(&response),
        }
    }

    fn classify(_provider: &str, response: HttpResponse) -> ErrorClass {
        errors::classify(&response)
    }
}

impl LogprobsProvider for OpenAi {
    fn serves_logprobs(provider: &str, wire_id: &str) -> bool {
        Dialect::from_key(provider).is_some_and(|dialect| logprobs::serves(dialect, wire_id))
    }

    fn encode_logprobs(
        provider: &str,
        conversation: PreparedConversation,
        params: CallParams,
        top: u8,
    ) -> Result<HttpRequest, CodecError> {
        logprobs::encode(known(provider)?, &conversation, &params, top)
    }

    fn decode_logprobs(_provider: &str, response: HttpResponse) -> Result<FirstToken, CodecError> {
        logprobs::decode(&response)
    }
}

impl EmbeddingProvider for OpenAi {
    fn serves(provider: &str, wire_id: &str) -> bool {
        Dialect::from_key(provider).is_some_and(|dialect| embeddings::serves(dialect, wire_id))
    }

    /// 1 for a key this component does not serve: the WIT promises at least 1,
    /// and the host never calls a key that `serves` nothing.
    fn max_batch(provider: &str, wire_id: &str) -> u32 {
        Dialect::from_key(provider).map_or(1, |dialect| embeddings::max_batch(dialect, wire_id))
    }

    fn encode(provider: &str, inputs: Vec<String>, params: EmbeddingParams) -> Result<HttpRequest, CodecError> {
        embeddings::encode(known(provider)?, &inputs, &params)
    }

    fn decode(_provider: &str, response: HttpResponse) -> Result<EmbeddingResponse, CodecError> {
        embeddings::decode(&response)
    }

    fn classify(_provider: &str, response: HttpResponse) -> ErrorClass {
        errors::classify(&response)
    }
}

impl RerankProvider for OpenAi {
    fn serves(provider: &str, wire_id: &str) -> bool {
        Dialect::from_key(provider).is_some_and(|dialect| rerank::serves(dialect, wire_id))
    }

    fn encode(
        provider: &str,
        query: String,
        documents: Vec<String>,
        params: RerankParams,
    ) -> Result<HttpRequest, CodecError> {
        rerank::encode(known(provider)?, &query, &documents, &params)
    }

    fn decode(_provider: &str, response: HttpResponse) -> Result<RerankResponse, CodecError> {
        rerank::decode(&response)
    }

    fn classify(_provider: &str, response: HttpResponse) -> ErrorClass {
        errors::classify(&response)
    }
}

/// The dialect of a provider key, or the refusal `encode` answers for a key
/// this component does not serve.
fn known(provider: &str) -> Result<Dialect, CodecError> {
    Dialect::from_key(provider).ok_or_else(|| CodecError::Unsupported(format!("unknown provider key {provider:?}")))
}

/// A stream of either wire, chosen by the provider key.
#[derive(Debug)]
pub enum ChatStream {
    Completions(stream::OpenAiStream),
    Responses(responses::ResponsesStream),
}

impl weir_sdk::StreamDecoder for ChatStream {
    fn new(provider: &str) -> Self {
        match provider {
            dialect::RESPONSES => Self::Responses(responses::ResponsesStream::new(provider)),
            _ => Self::Completions(stream::OpenAiStream::new(provider)),
        }
    }

    fn feed(&mut self, event: weir_sdk::types::StreamEvent) -> Result<Vec<weir_sdk::types::StreamDelta>, CodecError> {
        match self {
            Self::Completions(decoder) => decoder.feed(event),
            Self::Responses(decoder) => decoder.feed(event),
        }
    }

    fn finish(&mut self) -> Result<Vec<weir_sdk::types::StreamDelta>, CodecError> {
        match self {
            Self::Completions(decoder) => decoder.finish(),
            Self::Responses(decoder) => decoder.finish(),
        }
    }
}

fn openai_info() -> ProviderInfo {
    ProviderInfo {
        key: dialect::OPENAI.to_owned(),
        description: "OpenAI Chat Completions (api.openai.com)".to_owned(),
        default_endpoint: Some("https://api.openai.com/v1".to_owned()),
        credential: bearer("openai-api-key", true),
        capabilities: Capabilities::STREAMING
            | Capabilities::NATIVE_TOOLS
            | Capabilities::IMAGES
            | Capabilities::DOCUMENTS
            | Capabilities::THINKING
            | Capabilities::STRUCTURED_OUTPUT,
        stream_framing: StreamFraming::Sse,
    }
}

/// No documents: file parts are an OpenAI feature; compatible servers get the
/// text fallback instead.
fn compatible_info() -> ProviderInfo {
    ProviderInfo {
        key: dialect::COMPATIBLE.to_owned(),
        description: "Any OpenAI-dialect server (vLLM, llama.cpp, Ollama, ...), read leniently".to_owned(),
        default_endpoint: None,
        credential: bearer("openai-compatible-api-key", false),
        capabilities: Capabilities::STREAMING
            | Capabilities::NATIVE_TOOLS
            | Capabilities::IMAGES
            | Capabilities::THINKING
            | Capabilities::STRUCTURED_OUTPUT,
        stream_framing: StreamFraming::Sse,
    }
}

/// The same account, key and capabilities as `openai`, on the Responses wire.
fn responses_info() -> ProviderInfo {
    ProviderInfo {
        key: dialect::RESPONSES.to_owned(),
        description: "OpenAI Responses API (api.openai.com): reasoning kept across turns".to_owned(),
        ..openai_info()
    }
}

fn bearer(default_credential_id: &str, required: bool) -> CredentialShape {
    CredentialShape::Header(HeaderCredential {
        default_credential_id: default_credential_id.to_owned(),
        header_name: "authorization".to_owned(),
        prefix: "Bearer ".to_owned(),
        required,
    })
}

/// The Responses API's own fields, for `openai-responses` alone (see
/// [`responses::native`]); the Chat Completions keys take none.
impl NativeProvider for OpenAi {
    fn native_support(provider: &str, _wire_id: &str) -> Option<NativeSupport> {
        (provider == dialect::RESPONSES).then(responses::native::support)
    }

    fn encode_native(
        provider: &str,
        conversation: PreparedConversation,
        params: CallParams,
        native: NativeRequest,
    ) -> Result<HttpRequest, CodecError> {
        match provider {
            dialect::RESPONSES => responses::native::encode(&conversation, &params, &native),
            other => Err(CodecError::Unsupported(format!("{other} takes no native fields"))),
        }
    }

    fn count_tokens_encode(
        provider: &str,
        _conversation: PreparedConversation,
        _params: CallParams,
        _native: NativeRequest,
    ) -> Result<HttpRequest, CodecError> {
        Err(CodecError::Unsupported(format!("{provider} has no token count")))
    }

    fn count_tokens_decode(provider: &str, _response: HttpResponse) -> Result<u64, CodecError> {
        Err(CodecError::Unsupported(format!("{provider} has no token count")))
    }
}

weir_sdk::export_provider!(OpenAi, chat, embeddings, rerank, logprobs, native);

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::panic)] // a failing test should stop loudly
mod tests {
    use super::*;

    #[test]
    fn describes_the_three_keys() {
        let infos = OpenAi::providers();
        assert_eq!(infos.len(), 3);
        let openai = &infos[0];
        assert_eq!(openai.key, "openai");
        assert_eq!(openai.default_endpoint.as_deref(), Some("https://api.openai.com/v1"));
        assert_eq!(openai.credential, bearer("openai-api-key", true));
        assert!(openai.capabilities.contains(Capabilities::DOCUMENTS | Capabilities::THINKING));
        assert!(!openai.capabilities.contains(Capabilities::PROMPT_CACHE));
        let compatible = &infos[1];
        assert_eq!(compatible.key, "openai-compatible");
        assert_eq!(compatible.default_endpoint, None);
        assert_eq!(compatible.credential, bearer("openai-compatible-api-key", false));
        assert!(!compatible.capabilities.contains(Capabilities::DOCUMENTS));
        assert!(compatible.capabilities.contains(Capabilities::STREAMING | Capabilities::NATIVE_TOOLS));
        assert_eq!(compatible.stream_framing, StreamFraming::Sse);
        let responses = &infos[2];
        assert_eq!(responses.key, "openai-responses");
        assert_eq!(responses.default_endpoint, openai.default_endpoint, "the same account and endpoint");
        assert_eq!(responses.credential, openai.credential, "the same key");
        assert_eq!(responses.capabilities, openai.capabilities);
    }

    #[test]
    fn the_responses_key_encodes_decodes_and_streams_its_own_wire() {
        use weir_sdk::StreamDecoder;
        let conversation =
            PreparedConversation::of(vec![weir_sdk::types::Turn::user(vec![weir_sdk::types::ContentBlock::Text(
                "Hi".into(),
            )])]);
        let request = <OpenAi as ChatProvider>::encode("openai-responses", conversation, CallParams::new("gpt-5", 16));
        assert_eq!(request.unwrap().path_and_query, "/responses");
        let body = br#"{"status":"completed","output":[{"type":"message","content":[{"type":"output_text","text":"Hello"}]}]}"#;
        let response = HttpResponse { status: 200, headers: vec![], body: body.to_vec() };
        let answer = <OpenAi as ChatProvider>::decode("openai-responses", response).unwrap();
        assert_eq!(answer.content, vec![weir_sdk::types::ContentBlock::Text("Hello".into())]);
        assert!(matches!(ChatStream::new("openai-responses"), ChatStream::Responses(_)));
        assert!(matches!(ChatStream::new("openai"), ChatStream::Completions(_)));
        assert!(!<OpenAi as EmbeddingProvider>::serves("openai-responses", "text-embedding-3-small"));
    }

    #[test]
    fn serves_and_claims() {
        assert!(<OpenAi as ChatProvider>::serves("openai", "gpt-4.1"));
        assert!(<OpenAi as ChatProvider>::serves("openai-compatible", "Qwen/Qwen3-8B"));
        assert!(!<OpenAi as ChatProvider>::serves("anthropic", "gpt-4.1"));
        assert!(OpenAi::claims("openai", "gpt-4.1"));
        assert!(OpenAi::claims("openai", "o3-mini"));
        assert!(OpenAi::claims("openai", "chatgpt-4o-latest"));
        assert!(!OpenAi::claims("openai", "claude-sonnet-4-5"));
        assert!(!OpenAi::claims("openai-compatible", "gpt-4.1"));
        assert!(<OpenAi as ChatProvider>::serves("openai-responses", "gpt-5"));
        assert!(!OpenAi::claims("openai-responses", "gpt-5"), "only `openai` links an unloaded key's entries");
    }

    #[test]
    fn unknown_key_decodes_leniently_but_does_not_encode() {
        let body = br#"{"id":"x","model":"m","choices":[{"index":0,"message":{"content":"","reasoning":"hm"},"finish_reason":"stop"}]}"#;
        let response = HttpResponse { status: 200, headers: vec![], body: body.to_vec() };
        assert!(<OpenAi as ChatProvider>::decode("my-gateway", response).is_ok());
        let conversation = PreparedConversation::of(vec![]);
        let params = CallParams::new("m", 16);
        let encoded = <OpenAi as ChatProvider>::encode("my-gateway", conversation, params);
        assert!(matches!(encoded, Err(CodecError::Unsupported(m)) if m.contains("unknown provider key")));
    }

    fn embedding_params(wire_id: &str) -> EmbeddingParams {
        EmbeddingParams {
            wire_model_id: wire_id.to_owned(),
            purpose: weir_sdk::types::EmbeddingPurpose::Document,
            dimensions: None,
        }
    }

    #[test]
    fn embeddings_by_key() {
        assert!(<OpenAi as EmbeddingProvider>::serves("openai", "text-embedding-3-small"));
        assert!(!<OpenAi as EmbeddingProvider>::serves("openai", "gpt-4.1"));
        assert!(<OpenAi as EmbeddingProvider>::serves("openai-compatible", "nomic-embed-text"));
        assert!(!<OpenAi as EmbeddingProvider>::serves("anthropic", "text-embedding-3-small"));
        assert_eq!(OpenAi::max_batch("openai", "text-embedding-3-small"), 256);
        assert_eq!(OpenAi::max_batch("openai", "text-embedding-3-large"), 128);
        assert_eq!(OpenAi::max_batch("openai-compatible", "BAAI/bge-m3"), 32);
        assert_eq!(OpenAi::max_batch("anthropic", "x"), 1);
        let inputs = vec!["a".to_owned()];
        let refused = <OpenAi as EmbeddingProvider>::encode("anthropic", inputs.clone(), embedding_params("m"));
        assert!(matches!(refused, Err(CodecError::Unsupported(m)) if m.contains("unknown provider key")));
        let request =
            <OpenAi as EmbeddingProvider>::encode("openai", inputs, embedding_params("text-embedding-3-small"));
        assert_eq!(request.unwrap().path_and_query, "/embeddings");
    }

    #[test]
    fn rerank_by_key() {
        assert!(<OpenAi as RerankProvider>::serves("openai-compatible", "BAAI/bge-reranker-v2-m3"));
        assert!(!<OpenAi as RerankProvider>::serves("openai", "BAAI/bge-reranker-v2-m3"));
        assert!(!<OpenAi as RerankProvider>::serves("anthropic", "x"));
        let params = RerankParams { wire_model_id: "m".to_owned(), top_n: None };
        let refused = <OpenAi as RerankProvider>::encode("anthropic", "q".to_owned(), vec![], params.clone());
        assert!(matches!(refused, Err(CodecError::Unsupported(m)) if m.contains("unknown provider key")));
        let request = <OpenAi as RerankProvider>::encode("openai-compatible", "q".to_owned(), vec![], params);
        assert_eq!(request.unwrap().path_and_query, "/rerank");
    }

    fn failure(status: u16, headers: &[(&str, &str)], body: &str) -> HttpResponse {
        HttpResponse {
            status,
            headers: headers.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect(),
            body: body.as_bytes().to_vec(),
        }
    }

    /// Embeddings fail with chat's envelope and headers (reference 2.7), so the
    /// same classification applies; these are embeddings bodies.
    #[test]
    fn classifies_embeddings_errors() {
        let rate = r#"{"error":{"message":"Rate limit reached for text-embedding-3-small in organization org-abc on tokens per min (TPM): Limit 1000000, Used 999000, Requested 8000. Please try again in 420ms.","type":"tokens","param":null,"code":"rate_limit_exceeded"}}"#;
        let class = <OpenAi as EmbeddingProvider>::classify("openai", failure(429, &[("retry-after-ms", "420")], rate));
        assert!(
            matches!(&class, ErrorClass::RateLimited(r) if r.hint == Some(weir_sdk::types::RetryHint::DelayMs(420))),
            "{class:?}"
        );
        let too_long = r#"{"error":{"message":"This model's maximum context length is 8192 tokens, however you requested 9001 tokens (9001 in your prompt; 0 for the completion). Please reduce your prompt; or completion length.","type":"invalid_request_error","param":null,"code":null}}"#;
        let class = <OpenAi as EmbeddingProvider>::classify("openai", failure(400, &[], too_long));
        assert!(matches!(class, ErrorClass::InvalidRequest(_)), "{class:?}");
        let dimensions = r#"{"error":{"message":"This model does not support specifying dimensions.","type":"invalid_request_error","param":null,"code":null}}"#;
        let class = <OpenAi as EmbeddingProvider>::classify("openai", failure(400, &[], dimensions));
        assert!(matches!(class, ErrorClass::InvalidRequest(_)), "{class:?}");
        let key = r#"{"error":{"message":"Incorrect API key provided: sk-abc***xyz. You can find your API key at https://platform.openai.com/account/api-keys.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}"#;
        let class = <OpenAi as EmbeddingProvider>::classify("openai", failure(401, &[], key));
        assert!(matches!(class, ErrorClass::Authentication(_)), "{class:?}");
        // TEI refusing a batch above its `max_client_batch_size`.
        let tei = r#"{"error":"batch size 64 > maximum allowed batch size 32","error_type":"validation"}"#;
        let class = <OpenAi as EmbeddingProvider>::classify("openai-compatible", failure(413, &[], tei));
        assert!(matches!(&class, ErrorClass::InvalidRequest(d) if d.contains("batch size 64")), "{class:?}");
    }

    #[test]
    fn classifies_rerank_errors() {
        let vllm = r#"{"error":{"message":"The model does not support Rerank (Score) API","type":"BadRequestError","param":null,"code":400}}"#;
        let class = <OpenAi as RerankProvider>::classify("openai-compatible", failure(400, &[], vllm));
        assert!(matches!(class, ErrorClass::InvalidRequest(_)), "{class:?}");
        let busy = r#"{"error":{"message":"Too many requests","type":"RateLimitError","param":null,"code":429}}"#;
        let class =
            <OpenAi as RerankProvider>::classify("openai-compatible", failure(429, &[("retry-after", "3")], busy));
        assert!(matches!(class, ErrorClass::RateLimited(_)), "{class:?}");
    }
}
