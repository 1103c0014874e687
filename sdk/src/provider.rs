//! The trait a Rust provider implements, and the adapter that turns it into the
//! generated wit-bindgen exports (see [`crate::export_provider!`]).

use std::cell::RefCell;

use crate::types::{
    AnswerBlock, CallParams, ChatResponse, CodecError, EmbeddingParams, EmbeddingResponse, ErrorClass, FirstToken,
    HttpRequest, HttpResponse, NativeAnswer, NativeDelta, NativeRequest, NativeSupport, PreparedConversation,
    ProviderInfo, RerankParams, RerankResponse, StreamDelta, StreamEvent,
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

/// Decodes one live stream of a request that carried hosted tools or the
/// dialect's own history blocks (weir:provider 0.7.0's `native-stream`): the
/// neutral deltas, with the provider's own blocks and usage in their place.
pub trait NativeStreamDecoder: Sized {
    /// A decoder for one stream of `provider`; `None` when its streams carry
    /// no own blocks (the host then takes such a call whole).
    fn open(provider: &str) -> Option<Self>;
    fn feed(&mut self, event: StreamEvent) -> Result<Vec<NativeDelta>, CodecError>;
    fn finish(&mut self) -> Result<Vec<NativeDelta>, CodecError>;
}

/// The native stream of a dialect whose streams carry no own blocks: it never
/// opens, so the host takes a stream with hosted tools whole.
#[derive(Debug)]
pub enum NoNativeStream {}

impl NativeStreamDecoder for NoNativeStream {
    fn open(_provider: &str) -> Option<Self> {
        None
    }

    fn feed(&mut self, _event: StreamEvent) -> Result<Vec<NativeDelta>, CodecError> {
        match *self {}
    }

    fn finish(&mut self) -> Result<Vec<NativeDelta>, CodecError> {
        match *self {}
    }
}

/// What a component that serves no chat says about itself (a chat component
/// says it through [`ChatProvider`]).
pub trait Describe {
    /// The provider keys this component serves.
    fn providers() -> Vec<ProviderInfo>;

    /// Whether `provider` is written for this wire model id's family.
    fn claims(_provider: &str, _wire_id: &str) -> bool {
        false
    }
}

/// One embeddings dialect: a batch of inputs in, one native vector per input
/// out. The host batches, adapts the width and normalizes; the component
/// returns the vectors exactly as the provider sent them.
pub trait EmbeddingProvider {
    /// Whether `provider` embeds with this wire model id.
    fn serves(provider: &str, wire_id: &str) -> bool;

    /// The most inputs one upstream request may carry (at least 1).
    fn max_batch(provider: &str, wire_id: &str) -> u32;

    /// Whether the model is only called at a width the host asks for, so a
    /// catalog entry must pin `embedding_dimensions` (Cohere Embed).
    fn needs_dimensions(_provider: &str, _wire_id: &str) -> bool {
        false
    }

    /// The HTTP request for one batch, without credentials.
    fn encode(provider: &str, inputs: Vec<String>, params: EmbeddingParams) -> Result<HttpRequest, CodecError>;

    /// A 2xx response, normalized.
    fn decode(provider: &str, response: HttpResponse) -> Result<EmbeddingResponse, CodecError>;

    /// What a non-2xx response means.
    fn classify(provider: &str, response: HttpResponse) -> ErrorClass;
}

/// One rerank dialect: a query and documents in, the documents' ranking out.
pub trait RerankProvider {
    /// Whether `provider` reranks with this wire model id.
    fn serves(provider: &str, wire_id: &str) -> bool;

    /// The HTTP request, without credentials.
    fn encode(
        provider: &str,
        query: String,
        documents: Vec<String>,
        params: RerankParams,
    ) -> Result<HttpRequest, CodecError>;

    /// A 2xx response, normalized.
    fn decode(provider: &str, response: HttpResponse) -> Result<RerankResponse, CodecError>;

    /// What a non-2xx response means.
    fn classify(provider: &str, response: HttpResponse) -> ErrorClass;
}

/// Chat with token log-probabilities, beside [`ChatProvider`]: the request
/// asks for each output token's most likely candidates, and the answer's first
/// token is read back (the host's decision backend reads its labels from it).
/// A non-2xx answer is classified by [`ChatProvider::classify`].
pub trait LogprobsProvider: ChatProvider {
    /// Whether `provider` returns log-probabilities for this wire model id.
    fn serves_logprobs(provider: &str, wire_id: &str) -> bool;

    /// The chat request `encode` would build, asking for the `top` most likely
    /// candidates of each output token.
    fn encode_logprobs(
        provider: &str,
        conversation: PreparedConversation,
        params: CallParams,
        top: u8,
    ) -> Result<HttpRequest, CodecError>;

    /// The first output token's candidates from a 2xx response.
    fn decode_logprobs(provider: &str, response: HttpResponse) -> Result<FirstToken, CodecError>;
}

/// A dialect's own request fields (weir:provider 0.4.0's `native`): what a
/// caller on one of the host's provider-shaped routes asked that the neutral
/// request has no slot for. The host sends only what [`Self::native_support`]
/// lists for the wire id, so `encode_native` may refuse anything else.
pub trait NativeProvider: ChatProvider {
    /// The live stream decoder of a request with hosted tools or own blocks
    /// ([`NoNativeStream`] for a dialect whose streams carry none).
    type NativeStream: NativeStreamDecoder + 'static;

    /// What `provider` takes natively for this wire model id, if anything.
    fn native_support(provider: &str, wire_id: &str) -> Option<NativeSupport>;

    /// The request `encode` would build, with the native fields and betas added.
    fn encode_native(
        provider: &str,
        conversation: PreparedConversation,
        params: CallParams,
        native: NativeRequest,
    ) -> Result<HttpRequest, CodecError>;

    /// The provider's own token count request (only when `native_support` said
    /// `count_tokens`).
    fn count_tokens_encode(
        provider: &str,
        conversation: PreparedConversation,
        params: CallParams,
        native: NativeRequest,
    ) -> Result<HttpRequest, CodecError>;

    /// The input tokens a 2xx count response reports.
    fn count_tokens_decode(provider: &str, response: HttpResponse) -> Result<u64, CodecError>;

    /// A 2xx answer to a request that carried hosted tools or the dialect's
    /// own history blocks (0.6.0): the neutral answer and every block in the
    /// provider's order. The default is for a dialect with no blocks of its
    /// own: [`ChatProvider::decode`]'s answer, every block neutral.
    fn decode_native(provider: &str, response: HttpResponse) -> Result<NativeAnswer, CodecError> {
        let response = Self::decode(provider, response)?;
        Ok(NativeAnswer { blocks: neutral_blocks(&response), response, usage_json: None })
    }
}

/// Every block of `response` as a neutral one, in order.
pub fn neutral_blocks(response: &ChatResponse) -> Vec<AnswerBlock> {
    (0..response.content.len()).filter_map(|index| u32::try_from(index).ok()).map(AnswerBlock::Neutral).collect()
}

/// Adapts a [`StreamDecoder`] to the WIT resource, whose methods take `&self`.
#[doc(hidden)]
pub struct StreamDecoderResource<D>(RefCell<D>);

#[cfg(feature = "chat")]
impl<D: StreamDecoder + 'static> crate::bindings::exports::weir::provider::chat::GuestStreamDecoder
    for StreamDecoderResource<D>
{
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

/// Adapts a [`NativeStreamDecoder`] to the WIT resource, whose methods take `&self`.
#[doc(hidden)]
pub struct NativeStreamResource<D>(RefCell<D>);

#[cfg(feature = "native")]
impl<D: NativeStreamDecoder + 'static> crate::bindings::exports::weir::provider::native::GuestNativeStream
    for NativeStreamResource<D>
{
    fn open(provider: String) -> Option<crate::bindings::exports::weir::provider::native::NativeStream> {
        D::open(&provider).map(|decoder| {
            crate::bindings::exports::weir::provider::native::NativeStream::new(Self(RefCell::new(decoder)))
        })
    }

    fn feed(&self, event: StreamEvent) -> Result<Vec<NativeDelta>, CodecError> {
        self.0.borrow_mut().feed(event)
    }

    fn finish(&self) -> Result<Vec<NativeDelta>, CodecError> {
        self.0.borrow_mut().finish()
    }
}
