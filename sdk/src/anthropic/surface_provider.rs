//! A Claude component is one [`Surface`] plus what it declares: implementing
//! [`SurfaceProvider`] makes a type a whole [`ChatProvider`] over the shared codec,
//! so the components cannot differ in anything but their description.

use super::{AnthropicStream, Surface, classify, decode, encode};
use crate::ChatProvider;
use crate::types::{
    CallParams, ChatResponse, CodecError, ErrorClass, HttpRequest, HttpResponse, PreparedConversation, ProviderInfo,
};

/// One Claude surface as a component: its surface and its description. The
/// component is then `info()` and `weir_sdk::export_provider!(Type)`.
pub trait SurfaceProvider {
    const SURFACE: Surface;

    /// What the component declares: key (`SURFACE.key()`), endpoint, credential,
    /// capabilities, framing.
    fn info() -> ProviderInfo;
}

impl<T: SurfaceProvider> ChatProvider for T {
    type StreamDecoder = AnthropicStream;

    fn providers() -> Vec<ProviderInfo> {
        vec![T::info()]
    }

    /// Each surface refuses the others' id forms (see [`Surface::serves`]).
    fn serves(provider: &str, wire_id: &str) -> bool {
        provider == T::SURFACE.key() && T::SURFACE.serves(wire_id)
    }

    fn claims(provider: &str, wire_id: &str) -> bool {
        provider == T::SURFACE.key() && T::SURFACE.claims(wire_id)
    }

    fn encode(
        provider: &str,
        conversation: PreparedConversation,
        params: CallParams,
    ) -> Result<HttpRequest, CodecError> {
        if provider != T::SURFACE.key() {
            return Err(CodecError::Unsupported(format!("unknown provider key {provider:?}")));
        }
        encode(T::SURFACE, &conversation, &params)
    }

    fn decode(_provider: &str, response: HttpResponse) -> Result<ChatResponse, CodecError> {
        decode(T::SURFACE, &response)
    }

    fn classify(_provider: &str, response: HttpResponse) -> ErrorClass {
        classify(T::SURFACE, &response)
    }
}
