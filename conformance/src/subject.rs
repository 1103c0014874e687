//! What the kit needs from a provider: the world's four calls over neutral records.
//! One implementation calls a Rust provider natively (`native`), the host's calls a
//! loaded component through wasmtime (`weir check`).

use crate::fixture::{Classified, CodecFailure, Conversation, Decoded, Params, ProviderSummary, Response, WireRequest};

/// A call that did not return at all: the component trapped, ran out of a limit or
/// broke the world's contract. Always a conformance failure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fault(pub String);

/// A call's result: the outer `Result` is whether the call returned, the inner
/// whether the component accepted the input.
pub type Answer<T> = Result<Result<T, CodecFailure>, Fault>;

/// A provider under test. The kit drives one subject from one task, in order.
#[allow(async_fn_in_trait, reason = "the kit awaits a subject on its own task; no Send bound is needed")]
pub trait Subject {
    /// Every provider key the component serves.
    async fn providers(&self) -> Result<Vec<ProviderSummary>, Fault>;

    async fn encode(&self, provider: &str, conversation: &Conversation, params: &Params) -> Answer<WireRequest>;

    async fn decode(&self, provider: &str, response: &Response) -> Answer<Decoded>;

    async fn classify(&self, provider: &str, response: &Response) -> Result<Classified, Fault>;
}
