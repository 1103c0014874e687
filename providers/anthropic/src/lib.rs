//! # weir-provider-anthropic
//!
//! One provider key, `anthropic`: the Messages API at api.anthropic.com, with
//! prompt caching, extended thinking and native tools.
//!
//! This file only describes the component and routes calls; the dialect lives in
//! `weir_sdk::anthropic`, shared with the other components that speak it.

use weir_sdk::anthropic::{Surface, SurfaceProvider};
use weir_sdk::types::{Capabilities, CredentialShape, HeaderCredential, ProviderInfo, StreamFraming};

/// The surface this component serves.
const SURFACE: Surface = Surface::Direct;

/// The provider key catalog entries name.
pub const ANTHROPIC: &str = SURFACE.key();

/// The component's provider implementation.
#[derive(Debug)]
pub struct Anthropic;

impl SurfaceProvider for Anthropic {
    const SURFACE: Surface = SURFACE;

    /// No `structured-output`: the Messages API has no schema-constrained answer
    /// without a beta, and the codec refuses response schemas.
    fn info() -> ProviderInfo {
        ProviderInfo {
            key: ANTHROPIC.to_owned(),
            description: "Anthropic Messages API (api.anthropic.com)".to_owned(),
            default_endpoint: Some("https://api.anthropic.com".to_owned()),
            credential: CredentialShape::Header(HeaderCredential {
                default_credential_id: "anthropic-api-key".to_owned(),
                header_name: "x-api-key".to_owned(),
                prefix: String::new(),
                required: true,
            }),
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

weir_sdk::export_provider!(Anthropic, chat, native);

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::panic)] // a failing test should stop loudly
mod tests {
    use weir_sdk::ChatProvider;
    use weir_sdk::types::{CallParams, CodecError, PreparedConversation};

    use super::*;

    #[test]
    fn describes_one_key() {
        let infos = Anthropic::providers();
        assert_eq!(infos.len(), 1);
        let info = &infos[0];
        assert_eq!(info.key, "anthropic");
        assert_eq!(info.default_endpoint.as_deref(), Some("https://api.anthropic.com"));
        assert_eq!(
            info.credential,
            CredentialShape::Header(HeaderCredential {
                default_credential_id: "anthropic-api-key".into(),
                header_name: "x-api-key".into(),
                prefix: "".into(),
                required: true,
            })
        );
        assert!(info.capabilities.contains(
            Capabilities::STREAMING
                | Capabilities::NATIVE_TOOLS
                | Capabilities::INLINE_IMAGES
                | Capabilities::IMAGE_URLS
                | Capabilities::INLINE_DOCUMENTS
                | Capabilities::DOCUMENT_URLS
                | Capabilities::THINKING
                | Capabilities::PROMPT_CACHE
        ));
        assert!(!info.capabilities.contains(Capabilities::STRUCTURED_OUTPUT));
        assert_eq!(info.stream_framing, StreamFraming::Sse);
    }

    #[test]
    fn serves_and_claims() {
        assert!(Anthropic::serves("anthropic", "claude-sonnet-4-5"));
        assert!(!Anthropic::serves("openai", "claude-sonnet-4-5"));
        assert!(!Anthropic::serves("anthropic", "anthropic.claude-opus-5"));
        assert!(!Anthropic::serves("anthropic", "us.anthropic.claude-opus-5"));
        assert!(Anthropic::claims("anthropic", "claude-opus-4-1-20250805"));
        assert!(!Anthropic::claims("anthropic", "gpt-4.1"));
        assert!(!Anthropic::claims("bedrock", "claude-sonnet-4-5"));
    }

    #[test]
    fn unknown_key_does_not_encode() {
        let conversation = PreparedConversation::of(vec![]);
        let params = CallParams::new("claude-sonnet-4-5", 16);
        let encoded = Anthropic::encode("openai", conversation, params);
        assert!(matches!(encoded, Err(CodecError::Unsupported(m)) if m.contains("unknown provider key")));
    }
}
