//! The trait a Rust provider implements, and the adapter that turns it into the
//! generated wit-bindgen exports (see [`crate::export_provider!`]).

use std::cell::RefCell;

use crate::bindings::exports::weir::provider::chat::GuestStreamDecoder;
use crate::types::{
    CallParams, ChatResponse, CodecError, ErrorClass, HttpRequest, HttpResponse, PreparedConversation, ProviderInfo,
    StreamDelta, StreamEvent,
};

/// One provider dialect. Every method is a pure function of its arguments: the
/// component has no network, filesystem, clock or secret.
pub trait ChatProvider {
    /// The per-stream decoder; it may hold state across events.
    type StreamDecoder: StreamDecoder + 'static;

    /// The provider keys this component serves.
    fn providers() -> Vec<ProviderInfo>;

    /// Whether `provider` speaks this wire model id's request shape.
    fn serves(_provider: &str, _wire_id: &str) -> bool {
        true
    }

    /// Whether `provider` is written for this wire model id's family.
    fn claims(_provider: &str, _wire_id: &str) -> bool {
        false
    }

    /// The HTTP request for a call, without credentials.
    fn encode(
        provider: &str,
        conversation: PreparedConversation,
        params: CallParams,
    ) -> Result<HttpRequest, CodecError>;

    /// A 2xx response, normalized.
    fn decode(provider: &str, response: HttpResponse) -> Result<ChatResponse, CodecError>;

    /// What a non-2xx response means.
    fn classify(provider: &str, response: HttpResponse) -> ErrorClass;
}

/// Decodes one stream's framed events into normalized deltas.
pub trait StreamDecoder {
    fn new(provider: &str) -> Self;
    fn feed(&mut self, event: StreamEvent) -> Result<Vec<StreamDelta>, CodecError>;
    fn finish(&mut self) -> Result<Vec<StreamDelta>, CodecError>;
}

/// The decoder of a provider that does not stream (it leaves `streaming` out of
/// its capabilities, so the host never asks it to): should a stream reach it
/// anyway, every event is refused as unsupported instead of being dropped.
#[derive(Debug)]
pub struct NoStreaming;

impl StreamDecoder for NoStreaming {
    fn new(_provider: &str) -> Self {
        Self
    }

    fn feed(&mut self, _event: StreamEvent) -> Result<Vec<StreamDelta>, CodecError> {
        Err(CodecError::Unsupported("this provider does not stream".to_owned()))
    }

    fn finish(&mut self) -> Result<Vec<StreamDelta>, CodecError> {
        Err(CodecError::Unsupported("this provider does not stream".to_owned()))
    }
}

/// Adapts a [`StreamDecoder`] to the WIT resource, whose methods take `&self`.
#[doc(hidden)]
pub struct StreamDecoderResource<D>(RefCell<D>);

impl<D: StreamDecoder + 'static> GuestStreamDecoder for StreamDecoderResource<D> {
    fn new(provider: String) -> Self {
        Self(RefCell::new(D::new(&provider)))
    }

    fn feed(&self, event: StreamEvent) -> Result<Vec<StreamDelta>, CodecError> {
        self.0.borrow_mut().feed(event)
    }

    fn finish(&self) -> Result<Vec<StreamDelta>, CodecError> {
        self.0.borrow_mut().finish()
    }
}
