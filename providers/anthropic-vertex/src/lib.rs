//! # weir-provider-anthropic-vertex
//!
//! One provider key, `anthropic-vertex`: Claude on Google Vertex AI. The
//! entry's endpoint names the project and region
//! (`https://{region}-aiplatform.googleapis.com/v1/projects/{project}/locations/{region}/publishers/anthropic`;
//! there is no default), and a call goes to `…/models/{model}:rawPredict` or
//! `:streamRawPredict`. The body is the Messages API's without `model`, with
//! `anthropic_version: "vertex-2023-10-16"`; streams are Anthropic's SSE. The
//! host sends `authorization: Bearer <token>`: a Google access token it mints
//! when the entry's `credential` names a `[credentials.ID]` table of kind
//! `google` (or a token kept in the secret store).
//!
//! This file only describes the component and routes calls; the dialect lives in
//! `weir_sdk::anthropic`, shared with the other components that speak it.

use weir_sdk::anthropic::{Surface, SurfaceProvider};
use weir_sdk::types::{Capabilities, CredentialShape, HeaderCredential, ProviderInfo, StreamFraming};

/// The surface this component serves.
const SURFACE: Surface = Surface::Vertex;

/// The provider key catalog entries name.
pub const ANTHROPIC_VERTEX: &str = SURFACE.key();

/// The secret-store id used when an entry names no credential: a Google
/// access token kept there (the entry normally names a minted `google`
/// credential instead).
pub const DEFAULT_CREDENTIAL_ID: &str = "google-access-token";

/// The component's provider implementation.
#[derive(Debug)]
pub struct AnthropicVertex;

impl SurfaceProvider for AnthropicVertex {
    const SURFACE: Surface = SURFACE;

    /// The direct API's capabilities: rawPredict carries the same body. No
    /// `structured-output`, as there (the codec refuses response schemas).
    fn info() -> ProviderInfo {
        ProviderInfo {
            key: ANTHROPIC_VERTEX.to_owned(),
            description: "Claude on Google Vertex AI (rawPredict / streamRawPredict)".to_owned(),
            default_endpoint: None,
            credential: CredentialShape::Header(HeaderCredential {
                default_credential_id: DEFAULT_CREDENTIAL_ID.to_owned(),
                header_name: "authorization".to_owned(),
                prefix: "Bearer ".to_owned(),
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

weir_sdk::export_provider!(AnthropicVertex, chat, native);

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::panic)] // a failing test should stop loudly
mod tests {
    use weir_sdk::types::{CallParams, CodecError, ContentBlock, PreparedConversation, Turn};
    use weir_sdk::{ChatProvider, NativeProvider};

    use super::*;

    #[test]
    fn describes_one_key_with_no_endpoint_and_a_bearer_credential() {
        let infos = AnthropicVertex::providers();
        assert_eq!(infos.len(), 1);
        let info = &infos[0];
        assert_eq!(info.key, "anthropic-vertex");
        assert_eq!(info.default_endpoint, None, "the project and region are the entry's");
        let CredentialShape::Header(header) = &info.credential else { panic!("a header credential") };
        assert_eq!((header.header_name.as_str(), header.prefix.as_str()), ("authorization", "Bearer "));
        assert_eq!(info.stream_framing, StreamFraming::Sse);
        assert!(!info.capabilities.contains(Capabilities::STRUCTURED_OUTPUT));
    }

    #[test]
    fn serves_google_spelled_claude_ids_only() {
        let key = ANTHROPIC_VERTEX;
        assert!(AnthropicVertex::serves(key, "claude-sonnet-4-5@20250929"));
        assert!(AnthropicVertex::claims(key, "claude-haiku-4-5@20251001"));
        assert!(!AnthropicVertex::serves(key, "anthropic.claude-opus-5"));
        assert!(!AnthropicVertex::serves(key, "us.anthropic.claude-opus-5"));
        assert!(!AnthropicVertex::serves(key, "gemini-2.5-pro"));
        assert!(!AnthropicVertex::serves("anthropic", "claude-sonnet-4-5@20250929"));
    }

    #[test]
    fn unknown_key_does_not_encode_and_no_token_count_is_offered() {
        let turn = Turn::user(vec![ContentBlock::Text("Hi".into())]);
        let conversation = PreparedConversation::of(vec![turn]);
        let params = CallParams::new("claude-sonnet-4-5@20250929", 16);
        let encoded = AnthropicVertex::encode("anthropic", conversation, params);
        assert!(matches!(encoded, Err(CodecError::Unsupported(m)) if m.contains("unknown provider key")));
        let support = AnthropicVertex::native_support(ANTHROPIC_VERTEX, "claude-sonnet-4-5@20250929").unwrap();
        assert!(!support.count_tokens);
    }
}
