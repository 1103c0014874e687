//! # weir-provider-openai
//!
//! One component, many provider keys, two wires, four operations:
//!
//! * `openai`: api.openai.com's Chat Completions, with its current field names and model rules.
//! * `azure-openai`, `azure-openai-v1`: the same models on an Azure resource,
//!   by deployment URL or through Azure's v1 API (see `keys`).
//! * `mistral`, `groq`, `deepseek`, `xai`, `together`, `openrouter`, `cerebras`:
//!   hosted OpenAI-compatible services, each with its default endpoint, its
//!   key and its wire's quirks (see `keys`).
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
//! | chat | `/chat/completions` | `openai`, `openai-compatible`, the presets |
//! | chat | `/openai/deployments/{d}/chat/completions?api-version=…`, `/openai/v1/chat/completions` | `azure-openai`, `azure-openai-v1` |
//! | chat | `/responses` | `openai-responses` |
//! | embeddings | `/embeddings` | `openai` for `text-embedding-*` ids, `openai-compatible` for any id |
//! | embeddings | `/openai/deployments/{d}/embeddings?api-version=…` | `azure-openai`, any deployment |
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
mod keys;
mod logprobs;
mod plain;
mod request;
mod rerank;
mod response;
mod responses;
mod stream;

use weir_sdk::types::{
    CallParams, ChatResponse, CodecError, CredentialShape, EmbeddingParams, EmbeddingResponse, ErrorClass, FirstToken,
    HeaderCredential, HttpRequest, HttpResponse, NativeAnswer, NativeRequest, NativeSupport, PreparedConversation,
    ProviderInfo, RerankParams, RerankResponse, StreamFraming,
};
use weir_sdk::{ChatProvider, EmbeddingProvider, LogprobsProvider, NativeProvider, RerankProvider};

use dialect::Dialect;
use embeddings::Embedder;

/// The component's provider implementation.
#[derive(Debug)]
pub struct OpenAi;

impl ChatProvider for OpenAi {
    type StreamDecoder = ChatStream;

    fn providers() -> Vec<ProviderInfo> {
        let mut infos: Vec<ProviderInfo> = keys::ALL.iter().map(info).collect();
        infos.insert(2, responses_info());
        infos
    }

    /// Every key speaks the request shape of any model id: a compatible server may
    /// serve anything, and OpenAI's own ids change too often to list.
    fn serves(provider: &str, _wire_id: &str) -> bool {
        keys::spec(provider).is_some() || provider == dialect::RESPONSES
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

    /// Chat Completions decode the same for every key: leniency costs OpenAI
    /// nothing, and Azure's extra `content_filter_results` are read past.
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
        Embedder::from_key(provider).is_some_and(|embedder| embeddings::serves(embedder, wire_id))
    }

    /// 1 for a key this component does not serve: the WIT promises at least 1,
    /// and the host never calls a key that `serves` nothing.
    fn max_batch(provider: &str, wire_id: &str) -> u32 {
        Embedder::from_key(provider).map_or(1, |embedder| embeddings::max_batch(embedder, wire_id))
    }

    fn encode(provider: &str, inputs: Vec<String>, params: EmbeddingParams) -> Result<HttpRequest, CodecError> {
        let embedder = Embedder::from_key(provider)
            .ok_or_else(|| CodecError::Unsupported(format!("unknown provider key {provider:?}")))?;
        embeddings::encode(embedder, &inputs, &params)
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

/// A Chat Completions key as the host sees it.
fn info(spec: &keys::KeySpec) -> ProviderInfo {
    let (header_name, prefix) = spec.credential_header;
    ProviderInfo {
        key: spec.key.to_owned(),
        description: spec.description.to_owned(),
        default_endpoint: spec.default_endpoint.map(str::to_owned),
        credential: CredentialShape::Header(HeaderCredential {
            default_credential_id: spec.credential_id.to_owned(),
            header_name: header_name.to_owned(),
            prefix: prefix.to_owned(),
            required: spec.credential_required,
        }),
        capabilities: spec.capabilities,
        stream_framing: StreamFraming::Sse,
    }
}

fn openai_info() -> ProviderInfo {
    info(keys::of_dialect(Dialect::OpenAi))
}

/// The same account, key and capabilities as `openai`, on the Responses wire.
fn responses_info() -> ProviderInfo {
    ProviderInfo {
        key: dialect::RESPONSES.to_owned(),
        description: "OpenAI Responses API (api.openai.com): reasoning kept across turns".to_owned(),
        ..openai_info()
    }
}

/// The Responses API's own fields, for `openai-responses` alone (see
/// [`responses::native`]); the Chat Completions keys take none.
impl NativeProvider for OpenAi {
    /// `openai-responses` streams its hosted items live; the Chat Completions
    /// keys open none (they carry no hosted tools).
    type NativeStream = responses::ResponsesNativeStream;

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

    /// OpenAI's hosted tools' items in place, for `openai-responses` (see
    /// [`responses::hosted`]); the Chat Completions keys are never sent any.
    fn decode_native(provider: &str, response: HttpResponse) -> Result<NativeAnswer, CodecError> {
        match provider {
            dialect::RESPONSES => responses::hosted::decode_native(&response),
            other => Err(CodecError::Unsupported(format!("{other} takes no hosted tools"))),
        }
    }
}

weir_sdk::export_provider!(OpenAi, chat, embeddings, rerank, logprobs, native);

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::panic)] // a failing test should stop loudly
mod tests {
    use super::*;

    use weir_sdk::types::Capabilities;

    fn bearer(default_credential_id: &str, required: bool) -> CredentialShape {
        CredentialShape::Header(HeaderCredential {
            default_credential_id: default_credential_id.to_owned(),
            header_name: "authorization".to_owned(),
            prefix: "Bearer ".to_owned(),
            required,
        })
    }

    #[test]
    fn describes_every_key() {
        let infos = OpenAi::providers();
        let keys: Vec<&str> = infos.iter().map(|info| info.key.as_str()).collect();
        assert_eq!(
            keys,
            [
                "openai",
                "openai-compatible",
                "openai-responses",
                "azure-openai",
                "azure-openai-v1",
                "mistral",
                "groq",
                "deepseek",
                "xai",
                "together",
                "openrouter",
                "cerebras"
            ]
        );
        let openai = &infos[0];
        assert_eq!(openai.key, "openai");
        assert_eq!(openai.default_endpoint.as_deref(), Some("https://api.openai.com/v1"));
        assert_eq!(openai.credential, bearer("openai-api-key", true));
        assert!(openai.capabilities.contains(Capabilities::INLINE_DOCUMENTS | Capabilities::THINKING));
        assert!(!openai.capabilities.contains(Capabilities::PROMPT_CACHE));
        let compatible = &infos[1];
        assert_eq!(compatible.key, "openai-compatible");
        assert_eq!(compatible.default_endpoint, None);
        assert_eq!(compatible.credential, bearer("openai-compatible-api-key", false));
        assert!(!compatible.capabilities.contains(Capabilities::INLINE_DOCUMENTS));
        assert!(compatible.capabilities.contains(Capabilities::STREAMING | Capabilities::NATIVE_TOOLS));
        assert_eq!(compatible.stream_framing, StreamFraming::Sse);
        let responses = &infos[2];
        assert_eq!(responses.key, "openai-responses");
        assert_eq!(responses.default_endpoint, openai.default_endpoint, "the same account and endpoint");
        assert_eq!(responses.credential, openai.credential, "the same key");
        assert_eq!(responses.capabilities, openai.capabilities);
        let azure = &infos[3];
        assert_eq!(azure.default_endpoint, None, "the resource is the deployment's fact");
        let api_key = CredentialShape::Header(HeaderCredential {
            default_credential_id: "azure-openai-api-key".to_owned(),
            header_name: "api-key".to_owned(),
            prefix: String::new(),
            required: true,
        });
        assert_eq!(azure.credential, api_key);
        assert_eq!(infos[4].credential, api_key);
        assert!(!azure.capabilities.contains(Capabilities::INLINE_DOCUMENTS), "file parts are api.openai.com's");
        let mistral = &infos[5];
        assert_eq!(mistral.default_endpoint.as_deref(), Some("https://api.mistral.ai/v1"));
        assert_eq!(mistral.credential, bearer("mistral-api-key", true));
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

    /// Azure's answer adds `prompt_filter_results` and each choice's
    /// `content_filter_results`; an answer its output filter stopped has no
    /// content and `finish_reason: "content_filter"`.
    #[test]
    fn azure_answers_decode_with_their_filter_results() {
        let body = br#"{"choices":[{"content_filter_results":{"violence":{"filtered":true,"severity":"high"}},"finish_reason":"content_filter","index":0,"logprobs":null,"message":{"content":null,"refusal":null,"role":"assistant"}}],"created":1733000000,"id":"chatcmpl-AZ2","model":"gpt-4o-2024-11-20","object":"chat.completion","prompt_filter_results":[{"prompt_index":0,"content_filter_results":{"violence":{"filtered":false,"severity":"safe"}}}],"system_fingerprint":"fp_1","usage":{"completion_tokens":3,"prompt_tokens":12,"total_tokens":15}}"#;
        let response = HttpResponse { status: 200, headers: vec![], body: body.to_vec() };
        let answer = <OpenAi as ChatProvider>::decode("azure-openai", response).unwrap();
        assert_eq!(answer.stop_reason, weir_sdk::types::StopReason::ContentFiltered);
        assert_eq!(answer.raw_stop_reason.as_deref(), Some("content_filter"));
        assert!(answer.content.is_empty(), "{:?}", answer.content);
    }

    #[test]
    fn azure_embeddings_go_to_the_deployment() {
        assert!(<OpenAi as EmbeddingProvider>::serves("azure-openai", "my-embedder"));
        assert!(!<OpenAi as EmbeddingProvider>::serves("azure-openai-v1", "my-embedder"));
        assert!(!<OpenAi as EmbeddingProvider>::serves("mistral", "mistral-embed"));
        assert_eq!(OpenAi::max_batch("azure-openai", "my-embedder"), 128);
        let inputs = vec!["a".to_owned()];
        let mut params = embedding_params("my-embedder");
        params.dimensions = Some(256);
        let request = <OpenAi as EmbeddingProvider>::encode("azure-openai", inputs.clone(), params).unwrap();
        assert_eq!(request.path_and_query, "/openai/deployments/my-embedder/embeddings?api-version=2024-10-21");
        let body: serde_json::Value = serde_json::from_slice(&request.body).unwrap();
        assert_eq!(body, serde_json::json!({"input": ["a"], "encoding_format": "float", "dimensions": 256}));
        let refused = <OpenAi as EmbeddingProvider>::encode("azure-openai", inputs, embedding_params("a b"));
        assert!(matches!(refused, Err(CodecError::Unsupported(m)) if m.contains("not an Azure deployment name")));
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
