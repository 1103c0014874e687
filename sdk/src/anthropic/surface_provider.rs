//! A Claude component is one [`Surface`] plus what it declares: implementing
//! [`SurfaceProvider`] makes a type a whole [`ChatProvider`] over the shared codec,
//! so the components cannot differ in anything but their description.

use super::{AnthropicStream, Surface, classify, decode, encode, hosted, native};
use crate::types::{
    CallParams, ChatResponse, CodecError, ErrorClass, HttpRequest, HttpResponse, NativeAnswer, NativeRequest,
    NativeSupport, PreparedConversation, ProviderInfo,
};
use crate::{ChatProvider, NativeProvider};

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
        known(provider, T::SURFACE)?;
        encode(T::SURFACE, &conversation, &params)
    }

    fn decode(_provider: &str, response: HttpResponse) -> Result<ChatResponse, CodecError> {
        decode(T::SURFACE, &response)
    }

    fn classify(_provider: &str, response: HttpResponse) -> ErrorClass {
        classify(T::SURFACE, &response)
    }
}

/// Every surface takes Anthropic's own fields and betas as [`native`] lists
/// them for it.
impl<T: SurfaceProvider> NativeProvider for T {
    type NativeStream = super::AnthropicNativeStream;

    fn native_support(provider: &str, wire_id: &str) -> Option<NativeSupport> {
        (provider == T::SURFACE.key()).then(|| native::support(T::SURFACE, wire_id)).flatten()
    }

    fn encode_native(
        provider: &str,
        conversation: PreparedConversation,
        params: CallParams,
        request: NativeRequest,
    ) -> Result<HttpRequest, CodecError> {
        known(provider, T::SURFACE)?;
        native::encode(T::SURFACE, &conversation, &params, &request)
    }

    fn count_tokens_encode(
        provider: &str,
        conversation: PreparedConversation,
        params: CallParams,
        request: NativeRequest,
    ) -> Result<HttpRequest, CodecError> {
        known(provider, T::SURFACE)?;
        native::count_tokens_encode(T::SURFACE, &conversation, &params, &request)
    }

    fn count_tokens_decode(_provider: &str, response: HttpResponse) -> Result<u64, CodecError> {
        native::count_tokens_decode(&response)
    }

    fn decode_native(_provider: &str, response: HttpResponse) -> Result<NativeAnswer, CodecError> {
        hosted::decode_native(T::SURFACE, &response)
    }
}

/// Refuses a provider key that is not the surface's.
fn known(provider: &str, surface: Surface) -> Result<(), CodecError> {
    match provider == surface.key() {
        true => Ok(()),
        false => Err(CodecError::Unsupported(format!("unknown provider key {provider:?}"))),
    }
}
