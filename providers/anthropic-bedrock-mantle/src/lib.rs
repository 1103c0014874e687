//! # weir-provider-anthropic-bedrock-mantle
//!
//! One provider key, `anthropic-bedrock-mantle`: Claude on Amazon Bedrock's Mantle
//! endpoint (`bedrock-mantle.{region}.api.aws/anthropic`), which serves the native
//! Messages API. Requests and streams are the direct API's, with Bedrock's bare ids
//! (`anthropic.claude-opus-5`); the host signs with SigV4; errors come in
//! Anthropic's envelope or as AWS error types.
//!
//! The data-retention header `anthropic-workspace-id` is not this component's: the
//! host binds it from the deployment's configuration and re-checks the compliance
//! envelope as the last step before the request leaves, so nothing a component
//! writes can choose where data is retained. `encode` never sets it.
//!
//! This file only describes the component and routes calls; the dialect lives in
//! `weir_sdk::anthropic`, shared with the other components that speak it.

use weir_sdk::anthropic::{Surface, SurfaceProvider};
use weir_sdk::bedrock;
use weir_sdk::types::{Capabilities, ProviderInfo, StreamFraming};

/// The surface this component serves.
const SURFACE: Surface = Surface::Mantle;

/// The provider key catalog entries name.
pub const ANTHROPIC_BEDROCK_MANTLE: &str = SURFACE.key();

/// The base URL; the host fills `{region}` with the deployment's resolved region.
pub const DEFAULT_ENDPOINT: &str = "https://bedrock-mantle.{region}.api.aws/anthropic";

/// The component's provider implementation.
#[derive(Debug)]
pub struct AnthropicBedrockMantle;

impl SurfaceProvider for AnthropicBedrockMantle {
    const SURFACE: Surface = SURFACE;

    /// The direct API's capabilities: Mantle is the same API. No `structured-output`,
    /// as there (the codec refuses response schemas).
    fn info() -> ProviderInfo {
        ProviderInfo {
            key: ANTHROPIC_BEDROCK_MANTLE.to_owned(),
            description: "Claude on Amazon Bedrock's Mantle endpoint (the Messages API at bedrock-mantle)".to_owned(),
            default_endpoint: Some(DEFAULT_ENDPOINT.to_owned()),
            credential: bedrock::credential_shape(),
            capabilities: Capabilities::STREAMING
                | Capabilities::NATIVE_TOOLS
                | Capabilities::INLINE_IMAGES
                | Capabilities::IMAGE_URLS
                | Capabilities::INLINE_DOCUMENTS
                | Capabilities::DOCUMENT_URLS
                | Capabilities::THINKING
                | Capabilities::PROMPT_CACHE,
            stream_framing: StreamFraming::Sse,
        }
    }
}

weir_sdk::export_provider!(AnthropicBedrockMantle, chat, native);

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::panic)] // a failing test should stop loudly
mod tests {
    use weir_sdk::ChatProvider;
    use weir_sdk::types::{CallParams, CodecError, PreparedConversation};

    use weir_sdk::types::{ContentBlock, CredentialShape, Sigv4, Turn};

    use super::*;

    #[test]
    fn describes_one_key_signed_for_bedrock() {
        let infos = AnthropicBedrockMantle::providers();
        assert_eq!(infos.len(), 1);
        let info = &infos[0];
        assert_eq!(info.key, "anthropic-bedrock-mantle");
        assert_eq!(info.default_endpoint.as_deref(), Some("https://bedrock-mantle.{region}.api.aws/anthropic"));
        assert_eq!(
            info.credential,
            CredentialShape::AwsSigv4(Sigv4 {
                service: "bedrock".into(),
                default_credential_id: "aws-access-key-id".into()
            })
        );
        assert!(info.capabilities.contains(
            Capabilities::STREAMING
                | Capabilities::THINKING
                | Capabilities::INLINE_DOCUMENTS
                | Capabilities::DOCUMENT_URLS
        ));
        assert!(!info.capabilities.contains(Capabilities::STRUCTURED_OUTPUT));
        assert_eq!(info.stream_framing, StreamFraming::Sse);
    }

    #[test]
    fn serves_bare_bedrock_ids_only() {
        let key = ANTHROPIC_BEDROCK_MANTLE;
        assert!(AnthropicBedrockMantle::serves(key, "anthropic.claude-opus-5"));
        assert!(!AnthropicBedrockMantle::serves(key, "us.anthropic.claude-opus-5"));
        assert!(!AnthropicBedrockMantle::serves(
            key,
            "arn:aws:bedrock:us-east-1::foundation-model/anthropic.claude-opus-5"
        ));
        assert!(!AnthropicBedrockMantle::serves(key, "claude-opus-5"));
        assert!(AnthropicBedrockMantle::serves(key, "anthropic.fable-5"), "any model Anthropic serves on Mantle");
        assert!(!AnthropicBedrockMantle::serves("anthropic-bedrock", "anthropic.claude-opus-5"));
        assert!(AnthropicBedrockMantle::claims(key, "anthropic.claude-opus-5"));
        assert!(!AnthropicBedrockMantle::claims(key, "claude-opus-5"));
    }

    fn params(stream: bool) -> CallParams {
        CallParams { stream, ..CallParams::new("anthropic.claude-opus-5", 64) }
    }

    fn hi() -> PreparedConversation {
        let turn = Turn::user(vec![ContentBlock::Text("Hi".into())]);
        PreparedConversation::of(vec![turn])
    }

    /// Data retention is bound by the host from deployment config, never here.
    #[test]
    fn never_sets_the_workspace_header() {
        for stream in [false, true] {
            let request = AnthropicBedrockMantle::encode(ANTHROPIC_BEDROCK_MANTLE, hi(), params(stream)).unwrap();
            let names: Vec<&str> = request.headers.iter().map(|(name, _)| name.as_str()).collect();
            assert!(!names.iter().any(|name| name.eq_ignore_ascii_case("anthropic-workspace-id")), "{names:?}");
            assert_eq!(request.path_and_query, "/v1/messages");
        }
    }

    #[test]
    fn unknown_key_does_not_encode() {
        let encoded = AnthropicBedrockMantle::encode("anthropic", hi(), params(false));
        assert!(matches!(encoded, Err(CodecError::Unsupported(m)) if m.contains("unknown provider key")));
    }
}
