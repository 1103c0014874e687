//! # weir-provider-openai
//!
//! One component, two provider keys, one wire dialect (Chat Completions):
//!
//! * `openai`: api.openai.com, with its current field names and model rules.
//! * `openai-compatible`: vLLM, llama.cpp, Ollama and any other server that speaks
//!   the dialect. It has no default endpoint (a catalog entry must name one: we
//!   never invent endpoints) and its credential is optional (local servers need none).
//!
//! This file only describes the component and routes calls; the dialect lives in
//! the modules, which use nothing but `weir_sdk::types` and helpers, so they test
//! natively.

mod dialect;
mod errors;
mod request;
mod response;
mod stream;

use weir_sdk::ChatProvider;
use weir_sdk::types::{
    CallParams, Capabilities, ChatResponse, CodecError, CredentialShape, ErrorClass, HeaderCredential, HttpRequest,
    HttpResponse, PreparedConversation, ProviderInfo, StreamFraming,
};

use dialect::Dialect;

/// The component's provider implementation.
#[derive(Debug)]
pub struct OpenAi;

impl ChatProvider for OpenAi {
    type StreamDecoder = stream::OpenAiStream;

    fn providers() -> Vec<ProviderInfo> {
        vec![openai_info(), compatible_info()]
    }

    /// Both keys speak the request shape of any model id: a compatible server may
    /// serve anything, and OpenAI's own ids change too often to list.
    fn serves(provider: &str, _wire_id: &str) -> bool {
        Dialect::from_key(provider).is_some()
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
        request::encode(provider, &conversation, &params)
    }

    /// Decoding is the same for every key: leniency costs OpenAI nothing.
    fn decode(_provider: &str, response: HttpResponse) -> Result<ChatResponse, CodecError> {
        response::decode(&response)
    }

    fn classify(_provider: &str, response: HttpResponse) -> ErrorClass {
        errors::classify(&response)
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

fn bearer(default_credential_id: &str, required: bool) -> CredentialShape {
    CredentialShape::Header(HeaderCredential {
        default_credential_id: default_credential_id.to_owned(),
        header_name: "authorization".to_owned(),
        prefix: "Bearer ".to_owned(),
        required,
    })
}

weir_sdk::export_provider!(OpenAi);

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::panic)] // a failing test should stop loudly
mod tests {
    use super::*;

    #[test]
    fn describes_both_keys() {
        let infos = OpenAi::providers();
        assert_eq!(infos.len(), 2);
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
    }

    #[test]
    fn serves_and_claims() {
        assert!(OpenAi::serves("openai", "gpt-4.1"));
        assert!(OpenAi::serves("openai-compatible", "Qwen/Qwen3-8B"));
        assert!(!OpenAi::serves("anthropic", "gpt-4.1"));
        assert!(OpenAi::claims("openai", "gpt-4.1"));
        assert!(OpenAi::claims("openai", "o3-mini"));
        assert!(OpenAi::claims("openai", "chatgpt-4o-latest"));
        assert!(!OpenAi::claims("openai", "claude-sonnet-4-5"));
        assert!(!OpenAi::claims("openai-compatible", "gpt-4.1"));
    }

    #[test]
    fn unknown_key_decodes_leniently_but_does_not_encode() {
        let body = br#"{"id":"x","model":"m","choices":[{"index":0,"message":{"content":"","reasoning":"hm"},"finish_reason":"stop"}]}"#;
        let response = HttpResponse { status: 200, headers: vec![], body: body.to_vec() };
        assert!(OpenAi::decode("my-gateway", response).is_ok());
        let conversation = PreparedConversation::of(vec![]);
        let params = CallParams::new("m", 16);
        let encoded = OpenAi::encode("my-gateway", conversation, params);
        assert!(matches!(encoded, Err(CodecError::Unsupported(m)) if m.contains("unknown provider key")));
    }
}
