//! # weir-provider-bedrock-converse
//!
//! One provider key, `bedrock-converse`: AWS Bedrock's Converse and ConverseStream
//! operations for the models that are not Claude (Nova, Llama, Mistral, Cohere,
//! AI21, ...). Claude on Bedrock goes to `anthropic-bedrock`, which speaks the
//! Messages dialect through InvokeModel. What every Bedrock surface shares
//! (endpoint, SigV4, model path, errors, exception frames) is `weir_sdk::bedrock`.
//!
//! This file only describes the component and routes calls; the dialect lives in
//! the modules, which use nothing but `weir_sdk::types` and helpers, so they test
//! natively.

mod request;
mod response;
mod stream;

use weir_sdk::ChatProvider;
use weir_sdk::bedrock;
use weir_sdk::types::{
    CallParams, Capabilities, ChatResponse, CodecError, ErrorClass, HttpRequest, HttpResponse, PreparedConversation,
    ProviderInfo, StreamFraming,
};

/// The provider key catalog entries name.
pub const BEDROCK_CONVERSE: &str = "bedrock-converse";

/// The model vendors this component is written for (`amazon.nova-pro-v1:0`).
const CLAIMED_VENDORS: [&str; 5] = ["amazon", "meta", "mistral", "cohere", "ai21"];

/// The component's provider implementation.
#[derive(Debug)]
pub struct BedrockConverse;

impl ChatProvider for BedrockConverse {
    type StreamDecoder = stream::ConverseStream;

    fn providers() -> Vec<ProviderInfo> {
        vec![info()]
    }

    /// Any Bedrock id that is not Claude's: Converse speaks one request shape for
    /// every model, and the vendor list grows too often to enumerate. An opaque
    /// ARN (an application inference profile) is served, since nothing in it says
    /// Claude. An id with no vendor part (`claude-opus-5`, the direct API's
    /// spelling) is no Bedrock id at all.
    fn serves(provider: &str, wire_id: &str) -> bool {
        let bedrock_id = vendor(wire_id).is_some() || wire_id.starts_with("arn:");
        provider == BEDROCK_CONVERSE && bedrock_id && vendor(wire_id) != Some("anthropic")
    }

    /// The Nova, Llama, Mistral, Cohere and AI21 families, by the vendor of the id
    /// with or without a geography prefix (or in a foundation-model or profile
    /// ARN). Other vendors (DeepSeek, Qwen, ...) are served but not claimed.
    fn claims(provider: &str, wire_id: &str) -> bool {
        provider == BEDROCK_CONVERSE && vendor(wire_id).is_some_and(|vendor| CLAIMED_VENDORS.contains(&vendor))
    }

    fn encode(
        provider: &str,
        conversation: PreparedConversation,
        params: CallParams,
    ) -> Result<HttpRequest, CodecError> {
        if provider != BEDROCK_CONVERSE {
            return Err(CodecError::Unsupported(format!("unknown provider key {provider:?}")));
        }
        request::encode(&conversation, &params)
    }

    fn decode(_provider: &str, response: HttpResponse) -> Result<ChatResponse, CodecError> {
        response::decode(&response)
    }

    fn classify(_provider: &str, response: HttpResponse) -> ErrorClass {
        bedrock::classify(&response)
    }
}

/// The vendor of a wire id: `us.meta.llama3-3-70b-instruct-v1:0` → `meta`. An ARN
/// names the model after its last `/`. `None` when there is no vendor part.
fn vendor(wire_id: &str) -> Option<&str> {
    let model = wire_id.rsplit('/').next().unwrap_or(wire_id);
    let model =
        if bedrock::has_profile_prefix(model) { model.split_once('.').map_or(model, |(_, rest)| rest) } else { model };
    model.split_once('.').map(|(vendor, _)| vendor)
}

/// Declares only what `encode` writes: no `thinking` (no budget can be encoded for
/// these families, though reasoning they return is decoded and echoed) and no
/// `structured-output` (response schemas are refused); see `request`.
fn info() -> ProviderInfo {
    ProviderInfo {
        key: BEDROCK_CONVERSE.to_owned(),
        description: "AWS Bedrock Converse (Nova, Llama, Mistral and other non-Claude models)".to_owned(),
        default_endpoint: Some(bedrock::RUNTIME_ENDPOINT.to_owned()),
        credential: bedrock::credential_shape(),
        capabilities: Capabilities::STREAMING
            | Capabilities::NATIVE_TOOLS
            | Capabilities::INLINE_IMAGES
            | Capabilities::INLINE_DOCUMENTS
            | Capabilities::PROMPT_CACHE,
        stream_framing: StreamFraming::AwsEventStream,
    }
}

weir_sdk::export_provider!(BedrockConverse);

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::panic)] // a failing test should stop loudly
mod tests {
    use super::*;
    use weir_sdk::types::{CredentialShape, Sigv4};

    #[test]
    fn describes_one_key() {
        let infos = BedrockConverse::providers();
        assert_eq!(infos.len(), 1);
        let info = &infos[0];
        assert_eq!(info.key, "bedrock-converse");
        assert_eq!(info.default_endpoint.as_deref(), Some("https://bedrock-runtime.{region}.amazonaws.com"));
        assert_eq!(
            info.credential,
            CredentialShape::AwsSigv4(Sigv4 {
                service: "bedrock".into(),
                default_credential_id: "aws-access-key-id".into()
            })
        );
        assert_eq!(
            info.capabilities,
            Capabilities::STREAMING
                | Capabilities::NATIVE_TOOLS
                | Capabilities::INLINE_IMAGES
                | Capabilities::INLINE_DOCUMENTS
                | Capabilities::PROMPT_CACHE
        );
        assert_eq!(info.stream_framing, StreamFraming::AwsEventStream);
    }

    #[test]
    fn serves_everything_but_claude() {
        let cases = [
            ("amazon.nova-pro-v1:0", true),
            ("us.meta.llama3-3-70b-instruct-v1:0", true),
            ("deepseek.r1-v1:0", true),
            ("arn:aws:bedrock:us-east-1:123456789012:application-inference-profile/abc123", true),
            ("anthropic.claude-3-5-haiku-20241022-v1:0", false),
            ("global.anthropic.claude-sonnet-4-5-20250929-v1:0", false),
            ("arn:aws:bedrock:us-east-1::foundation-model/anthropic.claude-3-haiku-20240307-v1:0", false),
            ("claude-opus-5", false),
            ("nova-pro", false),
        ];
        for (id, expected) in cases {
            assert_eq!(BedrockConverse::serves("bedrock-converse", id), expected, "{id}");
        }
        assert!(!BedrockConverse::serves("anthropic-bedrock", "amazon.nova-pro-v1:0"));
    }

    #[test]
    fn claims_the_families_it_is_written_for() {
        let cases = [
            ("amazon.nova-pro-v1:0", true),
            ("us.amazon.nova-lite-v1:0", true),
            ("eu.meta.llama3-2-3b-instruct-v1:0", true),
            ("mistral.mistral-large-2407-v1:0", true),
            ("cohere.command-r-plus-v1:0", true),
            ("ai21.jamba-1-5-large-v1:0", true),
            ("arn:aws:bedrock:us-east-1:123456789012:inference-profile/us.amazon.nova-pro-v1:0", true),
            ("deepseek.r1-v1:0", false),
            ("us.anthropic.claude-sonnet-4-5-20250929-v1:0", false),
            ("nova-pro", false),
        ];
        for (id, expected) in cases {
            assert_eq!(BedrockConverse::claims("bedrock-converse", id), expected, "{id}");
        }
        assert!(!BedrockConverse::claims("openai", "amazon.nova-pro-v1:0"));
    }

    #[test]
    fn unknown_key_does_not_encode() {
        let conversation = PreparedConversation::of(vec![]);
        let params = CallParams::new("amazon.nova-pro-v1:0", 16);
        let encoded = BedrockConverse::encode("anthropic", conversation, params);
        assert!(matches!(encoded, Err(CodecError::Unsupported(m)) if m.contains("unknown provider key")));
    }
}
