//! What the kit needs from a provider: the world's calls over neutral records.
//! One implementation calls a Rust provider natively (`native`), the host's calls a
//! loaded component through wasmtime (`weir check`).

use crate::fixture::{
    Classified, CodecFailure, Conversation, Decoded, DecodedEmbeddings, DecodedNative, DecodedRanking, EmbedParams,
    NativeFields, NativeSupportSummary, Params, ProviderSummary, RerankParams, Response, StreamInput, WireRequest,
};
use crate::stream::StreamRun;

/// A call that did not return at all: the component trapped, ran out of a limit or
/// broke the world's contract. Always a conformance failure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fault(pub String);

/// A call's result: the outer `Result` is whether the call returned, the inner
/// whether the component accepted the input.
pub type Answer<T> = Result<Result<T, CodecFailure>, Fault>;

/// One operation interface of the world. A component exports any non-empty mix;
/// the kit runs the checks of each one it exports, and only those.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Operation {
    Chat,
    Embeddings,
    Rerank,
}

impl Operation {
    pub const ALL: [Operation; 3] = [Operation::Chat, Operation::Embeddings, Operation::Rerank];

    /// The interface's name in the WIT package, as reports print it.
    pub fn name(self) -> &'static str {
        match self {
            Self::Chat => "chat",
            Self::Embeddings => "embeddings",
            Self::Rerank => "rerank",
        }
    }
}

impl std::fmt::Display for Operation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A provider under test. The kit drives one subject from one task, in order, and
/// calls an operation's functions only when [`Subject::operations`] lists it.
#[allow(async_fn_in_trait, reason = "the kit awaits a subject on its own task; no Send bound is needed")]
pub trait Subject {
    /// Every provider key the component serves.
    async fn providers(&self) -> Result<Vec<ProviderSummary>, Fault>;

    /// The operations the component exports, in [`Operation::ALL`]'s order.
    fn operations(&self) -> Vec<Operation>;

    /// `serves` of `operation`'s interface (`describe.serves` for chat).
    async fn serves(&self, operation: Operation, provider: &str, wire_id: &str) -> Result<bool, Fault>;

    /// What a failed response means, asked of `operation`'s `classify`.
    async fn classify(&self, operation: Operation, provider: &str, response: &Response) -> Result<Classified, Fault>;

    // ---------------------------------------------------------------- chat

    async fn encode(&self, provider: &str, conversation: &Conversation, params: &Params) -> Answer<WireRequest>;

    async fn decode(&self, provider: &str, response: &Response) -> Answer<Decoded>;

    /// Frames `input` as the host frames an upstream body, opens a fresh stream
    /// decoder of `provider` and feeds it the events as the host does
    /// ([`crate::stream::drive`]). A fault in the decoder, or a body the framing
    /// refuses, is a [`Fault`].
    async fn stream(&self, provider: &str, input: &StreamInput) -> Result<StreamRun, Fault>;

    // ---------------------------------------------------------------- embeddings

    /// `embeddings.max-batch`, asked of the component afresh on every call: no
    /// answer is kept from an earlier call, so asking twice shows whether it is
    /// stable. A 0 may come back as a [`Fault`] where the subject refuses it.
    async fn max_batch(&self, provider: &str, wire_id: &str) -> Result<u32, Fault>;

    /// `embeddings.needs-dimensions`.
    async fn needs_dimensions(&self, provider: &str, wire_id: &str) -> Result<bool, Fault>;

    async fn embed_encode(&self, provider: &str, inputs: &[String], params: &EmbedParams) -> Answer<WireRequest>;

    async fn embed_decode(&self, provider: &str, response: &Response) -> Answer<DecodedEmbeddings>;

    // ---------------------------------------------------------------- rerank

    async fn rerank_encode(
        &self,
        provider: &str,
        query: &str,
        documents: &[String],
        params: &RerankParams,
    ) -> Answer<WireRequest>;

    async fn rerank_decode(&self, provider: &str, response: &Response) -> Answer<DecodedRanking>;

    // ---------------------------------------------------------------- native (beside chat)

    /// How much of the `native` interface the component exports. A subject
    /// without it keeps the defaults below, which the kit never calls.
    fn native_level(&self) -> NativeLevel {
        NativeLevel::None
    }

    /// `native.support`.
    async fn native_support(&self, _provider: &str, _wire_id: &str) -> Result<Option<NativeSupportSummary>, Fault> {
        Err(no_native())
    }

    /// `native.encode`.
    async fn native_encode(
        &self,
        _provider: &str,
        _conversation: &Conversation,
        _params: &Params,
        _native: &NativeFields,
    ) -> Answer<WireRequest> {
        Err(no_native())
    }

    /// `native.count-tokens-encode`.
    async fn count_tokens_encode(
        &self,
        _provider: &str,
        _conversation: &Conversation,
        _params: &Params,
        _native: &NativeFields,
    ) -> Answer<WireRequest> {
        Err(no_native())
    }

    /// `native.count-tokens-decode`.
    async fn count_tokens_decode(&self, _provider: &str, _response: &Response) -> Answer<u64> {
        Err(no_native())
    }

    /// `native.decode-native` (0.6.0 on: [`NativeLevel::Answers`]).
    async fn decode_native(&self, _provider: &str, _response: &Response) -> Answer<DecodedNative> {
        Err(no_native())
    }
}

/// Which functions of the `native` interface a component exports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NativeLevel {
    /// No `native` interface.
    None,
    /// `support`, `encode` and the token count (0.4.0, 0.5.0).
    Fields,
    /// Those and `decode-native` (0.6.0 on).
    Answers,
}

fn no_native() -> Fault {
    Fault("does not export `native`".to_owned())
}
