//! # weir-provider-gemini
//!
//! Google's Gemini models through `generateContent`, on two surfaces that share
//! one request and answer shape:
//!
//! - `gemini`: Google AI Studio (`https://generativelanguage.googleapis.com/v1beta`),
//!   the API key in `x-goog-api-key`.
//! - `vertex-gemini`: Vertex AI. Its endpoint names the deployment's project and
//!   location, so an entry must give it:
//!   `https://{location}-aiplatform.googleapis.com/v1/projects/{project}/locations/{location}/publishers/google`.
//!   The credential goes as `authorization: Bearer …` (a token the host mints
//!   from a Google credential, or a plain secret).
//!
//! Both append `/models/{id}:generateContent` (`:streamGenerateContent?alt=sse`
//! for a stream). Embeddings differ by surface (see `embeddings`).
//!
//! This file only describes the component and routes calls; the dialect lives in
//! the modules, which use nothing but `weir_sdk::types` and helpers, so they test
//! natively.

mod embeddings;
mod errors;
mod request;
mod response;
mod signature;
mod stream;
mod wire;

use weir_sdk::types::{
    CallParams, Capabilities, ChatResponse, CodecError, CredentialShape, EmbeddingParams, EmbeddingResponse,
    ErrorClass, HeaderCredential, HttpRequest, HttpResponse, PreparedConversation, ProviderInfo, StreamFraming,
};
use weir_sdk::{ChatProvider, EmbeddingProvider};

pub use stream::GeminiStream;

/// Google AI Studio's key.
pub const GEMINI: &str = "gemini";
/// Vertex AI's key.
pub const VERTEX_GEMINI: &str = "vertex-gemini";

/// AI Studio's base URL.
pub const STUDIO_ENDPOINT: &str = "https://generativelanguage.googleapis.com/v1beta";

/// The component's provider implementation.
#[derive(Debug)]
pub struct Gemini;

/// Which surface a key names; `None` for a key this component does not serve.
fn surface(provider: &str) -> Option<Surface> {
    match provider {
        GEMINI => Some(Surface::Studio),
        VERTEX_GEMINI => Some(Surface::Vertex),
        _ => None,
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Surface {
    Studio,
    Vertex,
}

fn known(provider: &str) -> Result<Surface, CodecError> {
    surface(provider).ok_or_else(|| CodecError::Unsupported(format!("unknown provider key {provider:?}")))
}

impl ChatProvider for Gemini {
    type StreamDecoder = GeminiStream;

    fn providers() -> Vec<ProviderInfo> {
        vec![studio(), vertex()]
    }

    /// The Gemini models, and the Gemma models AI Studio serves through the
    /// same method; not the embedding models (chat on them fails).
    fn serves(provider: &str, wire_id: &str) -> bool {
        surface(provider).is_some()
            && (wire_id.starts_with("gemini-") || wire_id.starts_with("gemma-"))
            && !embeddings::serves(wire_id)
    }

    /// The Gemini family, the one this component is written for.
    fn claims(provider: &str, wire_id: &str) -> bool {
        <Self as ChatProvider>::serves(provider, wire_id) && wire_id.starts_with("gemini-")
    }

    fn encode(
        provider: &str,
        conversation: PreparedConversation,
        params: CallParams,
    ) -> Result<HttpRequest, CodecError> {
        known(provider)?;
        request::encode(&conversation, &params)
    }

    fn decode(_provider: &str, response: HttpResponse) -> Result<ChatResponse, CodecError> {
        response::decode(&response)
    }

    fn classify(_provider: &str, response: HttpResponse) -> ErrorClass {
        errors::classify(&response)
    }
}

impl EmbeddingProvider for Gemini {
    fn serves(provider: &str, wire_id: &str) -> bool {
        surface(provider).is_some() && embeddings::serves(wire_id)
    }

    fn max_batch(provider: &str, wire_id: &str) -> u32 {
        embeddings::max_batch(surface(provider) == Some(Surface::Vertex), wire_id)
    }

    fn encode(provider: &str, inputs: Vec<String>, params: EmbeddingParams) -> Result<HttpRequest, CodecError> {
        let surface = known(provider)?;
        embeddings::encode(surface == Surface::Vertex, inputs, &params)
    }

    fn decode(provider: &str, response: HttpResponse) -> Result<EmbeddingResponse, CodecError> {
        embeddings::decode(surface(provider) == Some(Surface::Vertex), &response)
    }

    fn classify(_provider: &str, response: HttpResponse) -> ErrorClass {
        errors::classify(&response)
    }
}

/// What both keys carry: streaming, function calling, images and PDFs, a
/// thinking budget, structured answers. No `prompt-cache`: Gemini caches
/// implicitly (reported as cache reads) or through cached-content objects this
/// component does not create, so a host cache breakpoint changes nothing.
fn capabilities() -> Capabilities {
    Capabilities::STREAMING
        | Capabilities::NATIVE_TOOLS
        | Capabilities::INLINE_IMAGES
        | Capabilities::INLINE_DOCUMENTS
        | Capabilities::THINKING
        | Capabilities::STRUCTURED_OUTPUT
}

fn studio() -> ProviderInfo {
    ProviderInfo {
        key: GEMINI.to_owned(),
        description: "Google Gemini on Google AI Studio (generateContent, batchEmbedContents)".to_owned(),
        default_endpoint: Some(STUDIO_ENDPOINT.to_owned()),
        credential: CredentialShape::Header(HeaderCredential {
            default_credential_id: "gemini-api-key".to_owned(),
            header_name: "x-goog-api-key".to_owned(),
            prefix: String::new(),
            required: true,
        }),
        capabilities: capabilities(),
        stream_framing: StreamFraming::Sse,
    }
}

fn vertex() -> ProviderInfo {
    ProviderInfo {
        key: VERTEX_GEMINI.to_owned(),
        description: "Google Gemini on Vertex AI (generateContent, predict for embeddings)".to_owned(),
        default_endpoint: None,
        credential: CredentialShape::Header(HeaderCredential {
            default_credential_id: "vertex-ai-token".to_owned(),
            header_name: "authorization".to_owned(),
            prefix: "Bearer ".to_owned(),
            required: true,
        }),
        capabilities: capabilities(),
        stream_framing: StreamFraming::Sse,
    }
}

weir_sdk::export_provider!(Gemini, chat, embeddings);

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::panic)] // a failing test should stop loudly
mod tests {
    use super::*;

    #[test]
    fn describes_two_keys() {
        let infos = Gemini::providers();
        let keys: Vec<&str> = infos.iter().map(|info| info.key.as_str()).collect();
        assert_eq!(keys, ["gemini", "vertex-gemini"]);
        assert_eq!(infos[0].default_endpoint.as_deref(), Some("https://generativelanguage.googleapis.com/v1beta"));
        assert!(
            matches!(&infos[0].credential, CredentialShape::Header(h) if h.header_name == "x-goog-api-key" && h.prefix.is_empty() && h.default_credential_id == "gemini-api-key")
        );
        assert_eq!(infos[1].default_endpoint, None);
        assert!(
            matches!(&infos[1].credential, CredentialShape::Header(h) if h.header_name == "authorization" && h.prefix == "Bearer ")
        );
        assert!(!infos[0].capabilities.contains(Capabilities::PROMPT_CACHE));
    }

    #[test]
    fn serves_chat_and_embedding_ids_apart() {
        assert!(<Gemini as ChatProvider>::serves("gemini", "gemini-2.5-flash"));
        assert!(<Gemini as ChatProvider>::serves("vertex-gemini", "gemma-3-27b-it"));
        assert!(!<Gemini as ChatProvider>::claims("gemini", "gemma-3-27b-it"));
        assert!(!<Gemini as ChatProvider>::serves("gemini", "gemini-embedding-001"));
        assert!(!<Gemini as ChatProvider>::serves("openai", "gemini-2.5-flash"));
        assert!(<Gemini as EmbeddingProvider>::serves("gemini", "gemini-embedding-001"));
        assert!(!<Gemini as EmbeddingProvider>::serves("gemini", "gemini-2.5-flash"));
        let unknown = <Gemini as ChatProvider>::encode(
            "anthropic",
            PreparedConversation::of(vec![]),
            CallParams::new("gemini-2.5-flash", 8),
        );
        assert!(matches!(unknown, Err(CodecError::Unsupported(m)) if m.contains("unknown provider key")));
    }
}
