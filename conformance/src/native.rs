//! Runs the kit on a Rust provider natively: the SDK trait functions are called
//! directly, so a provider crate's `cargo test` checks the same cases
//! `weir check` runs on its built component.
//!
//! One adapter per operation mix a Rust provider can have, since the mix is
//! which SDK traits it implements: [`Native`] (chat: [`ChatProvider`]),
//! [`NativeRetrieval`] (embeddings and rerank: [`Describe`] +
//! [`EmbeddingProvider`] + [`RerankProvider`]), [`NativeChatEmbeddings`] (chat
//! and embeddings) and [`NativeAll`] (all three).
//! Each answers for the operations of its mix only, as a component exports only
//! its own.

use std::marker::PhantomData;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::Path;

use weir_sdk::{ChatProvider, Describe, EmbeddingProvider, NativeProvider, RerankProvider, StreamDecoder};

use crate::fixture::{
    Classified, Conversation, Decoded, DecodedEmbeddings, DecodedNative, DecodedRanking, Delta, EmbedParams,
    EventFrame, NativeFields, NativeSupportSummary, Params, ProviderSummary, RerankParams, Response, StreamEvent,
    StreamInput, WireRequest,
};
use crate::stream::{self, StreamRun};
use crate::subject::{Answer, Fault, NativeLevel, Operation, Subject};
use crate::{FixtureError, Report, dialect};

crate::boundary_conversions!(weir_sdk::types);

/// The kit's view of chat provider `P`, called in-process.
#[derive(Debug)]
pub struct Native<P>(PhantomData<P>);

/// The kit's view of `P`, which embeds and reranks and has no chat.
#[derive(Debug)]
pub struct NativeRetrieval<P>(PhantomData<P>);

/// The kit's view of `P`, which chats and embeds and has no rerank.
#[derive(Debug)]
pub struct NativeChatEmbeddings<P>(PhantomData<P>);

/// The kit's view of `P`, which chats, embeds and reranks.
#[derive(Debug)]
pub struct NativeAll<P>(PhantomData<P>);

macro_rules! constructors {
    ($($adapter:ident),+) => {$(
        impl<P> $adapter<P> {
            pub fn new() -> Self {
                Self(PhantomData)
            }
        }

        impl<P> Default for $adapter<P> {
            fn default() -> Self {
                Self::new()
            }
        }
    )+};
}

/// The kit's view of chat provider `P` that also takes a dialect's own
/// fields (`native`): the chat checks and the `native` interface's.
#[derive(Debug)]
pub struct NativeDialect<P>(PhantomData<P>);

constructors!(Native, NativeRetrieval, NativeChatEmbeddings, NativeAll, NativeDialect);

/// The chat checks plus the fixtures in `fixtures` (when given), on `P`.
pub fn run<P: ChatProvider>(fixtures: Option<&Path>) -> Result<Report, FixtureError> {
    run_on(&Native::<P>::new(), fixtures)
}

/// The chat and `native` checks plus the fixtures in `fixtures`, on `P`.
pub fn run_dialect<P: NativeProvider>(fixtures: Option<&Path>) -> Result<Report, FixtureError> {
    run_on(&NativeDialect::<P>::new(), fixtures)
}

/// The embeddings and rerank checks plus the fixtures, on `P`.
pub fn run_retrieval<P: Describe + EmbeddingProvider + RerankProvider>(
    fixtures: Option<&Path>,
) -> Result<Report, FixtureError> {
    run_on(&NativeRetrieval::<P>::new(), fixtures)
}

/// The chat and embeddings checks plus the fixtures, on `P`.
pub fn run_chat_embeddings<P: ChatProvider + EmbeddingProvider>(
    fixtures: Option<&Path>,
) -> Result<Report, FixtureError> {
    run_on(&NativeChatEmbeddings::<P>::new(), fixtures)
}

/// The chat, embeddings and rerank checks plus the fixtures, on `P`.
pub fn run_all<P: ChatProvider + EmbeddingProvider + RerankProvider>(
    fixtures: Option<&Path>,
) -> Result<Report, FixtureError> {
    run_on(&NativeAll::<P>::new(), fixtures)
}

fn run_on<S: Subject>(subject: &S, fixtures: Option<&Path>) -> Result<Report, FixtureError> {
    let cases = fixtures.map(dialect::load_dir).transpose()?.unwrap_or_default();
    Ok(pollster::block_on(crate::run(subject, cases)))
}

/// A panic is what a trap is in a component: the call did not return.
fn guarded<T>(call: impl FnOnce() -> T) -> Result<T, Fault> {
    catch_unwind(AssertUnwindSafe(call)).map_err(|panic| {
        let message = panic
            .downcast_ref::<&str>()
            .map(|s| (*s).to_owned())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_default();
        Fault(format!("panicked: {message}"))
    })
}

/// The fault of asking an adapter for an operation its mix does not have, as
/// the host reports it for a component that does not export it.
fn missing<T>(operation: Operation) -> Result<T, Fault> {
    Err(Fault(format!("does not export `{operation}`")))
}

// ------------------------------------------------------------------ calls, once per trait

fn chat_encode<P: ChatProvider>(provider: &str, conversation: &Conversation, params: &Params) -> Answer<WireRequest> {
    let (conversation, params) = (boundary::conversation(conversation), boundary::params(params));
    guarded(|| P::encode(provider, conversation, params))
        .map(|result| result.map(boundary::request).map_err(boundary::codec_failure))
}

fn chat_decode<P: ChatProvider>(provider: &str, response: &Response) -> Answer<Decoded> {
    let response = boundary::response(response);
    guarded(|| P::decode(provider, response))
        .map(|result| result.map(boundary::decoded).map_err(boundary::codec_failure))
}

fn chat_classify<P: ChatProvider>(provider: &str, response: &Response) -> Result<Classified, Fault> {
    let response = boundary::response(response);
    guarded(|| P::classify(provider, response)).map(boundary::classified)
}

/// A Rust stream decoder under test: a panic is a fault, as a trap is.
struct NativeStream<D>(D);

impl<D: StreamDecoder> stream::Decoder for NativeStream<D> {
    async fn feed(&mut self, event: &StreamEvent) -> Answer<Vec<Delta>> {
        let event = boundary::stream_event(event);
        guarded(|| self.0.feed(event)).map(|result| result.map(boundary::deltas).map_err(boundary::codec_failure))
    }

    async fn finish(&mut self) -> Answer<Vec<Delta>> {
        guarded(|| self.0.finish()).map(|result| result.map(boundary::deltas).map_err(boundary::codec_failure))
    }
}

/// The events the host frames from `input`: the kit's SSE framing (the host's
/// rules, see [`crate::sse`]), or each event-stream message as the host names it.
fn framed(input: &StreamInput) -> Vec<StreamEvent> {
    match input {
        StreamInput::Sse(chunks) => crate::sse::frame(&chunks.concat()),
        StreamInput::EventStream(frames) => frames.iter().map(EventFrame::to_event).collect(),
    }
}

async fn chat_stream<P: ChatProvider>(provider: &str, input: &StreamInput) -> Result<StreamRun, Fault> {
    let events = framed(input);
    let mut decoder = NativeStream(guarded(|| <P::StreamDecoder as StreamDecoder>::new(provider))?);
    stream::drive(&mut decoder, &events).await
}

fn embed_encode<P: EmbeddingProvider>(provider: &str, inputs: &[String], params: &EmbedParams) -> Answer<WireRequest> {
    let params = boundary::embed_params(params);
    guarded(|| P::encode(provider, inputs.to_vec(), params))
        .map(|result| result.map(boundary::request).map_err(boundary::codec_failure))
}

fn embed_decode<P: EmbeddingProvider>(provider: &str, response: &Response) -> Answer<DecodedEmbeddings> {
    let response = boundary::response(response);
    guarded(|| P::decode(provider, response))
        .map(|result| result.map(boundary::embeddings).map_err(boundary::codec_failure))
}

fn embed_classify<P: EmbeddingProvider>(provider: &str, response: &Response) -> Result<Classified, Fault> {
    let response = boundary::response(response);
    guarded(|| P::classify(provider, response)).map(boundary::classified)
}

fn rerank_encode<P: RerankProvider>(
    provider: &str,
    query: &str,
    documents: &[String],
    params: &RerankParams,
) -> Answer<WireRequest> {
    let params = boundary::rerank_params(params);
    guarded(|| P::encode(provider, query.to_owned(), documents.to_vec(), params))
        .map(|result| result.map(boundary::request).map_err(boundary::codec_failure))
}

fn rerank_decode<P: RerankProvider>(provider: &str, response: &Response) -> Answer<DecodedRanking> {
    let response = boundary::response(response);
    guarded(|| P::decode(provider, response))
        .map(|result| result.map(boundary::ranking).map_err(boundary::codec_failure))
}

fn rerank_classify<P: RerankProvider>(provider: &str, response: &Response) -> Result<Classified, Fault> {
    let response = boundary::response(response);
    guarded(|| P::classify(provider, response)).map(boundary::classified)
}

// ------------------------------------------------------------------ the three mixes

impl<P: ChatProvider> Subject for Native<P> {
    async fn providers(&self) -> Result<Vec<ProviderSummary>, Fault> {
        guarded(|| P::providers().iter().map(boundary::summary).collect())
    }

    fn operations(&self) -> Vec<Operation> {
        vec![Operation::Chat]
    }

    async fn serves(&self, operation: Operation, provider: &str, wire_id: &str) -> Result<bool, Fault> {
        match operation {
            Operation::Chat => guarded(|| P::serves(provider, wire_id)),
            Operation::Embeddings | Operation::Rerank => missing(operation),
        }
    }

    async fn classify(&self, operation: Operation, provider: &str, response: &Response) -> Result<Classified, Fault> {
        match operation {
            Operation::Chat => chat_classify::<P>(provider, response),
            Operation::Embeddings | Operation::Rerank => missing(operation),
        }
    }

    async fn encode(&self, provider: &str, conversation: &Conversation, params: &Params) -> Answer<WireRequest> {
        chat_encode::<P>(provider, conversation, params)
    }

    async fn decode(&self, provider: &str, response: &Response) -> Answer<Decoded> {
        chat_decode::<P>(provider, response)
    }

    async fn stream(&self, provider: &str, input: &StreamInput) -> Result<StreamRun, Fault> {
        chat_stream::<P>(provider, input).await
    }

    async fn max_batch(&self, _: &str, _: &str) -> Result<u32, Fault> {
        missing(Operation::Embeddings)
    }

    async fn needs_dimensions(&self, _: &str, _: &str) -> Result<bool, Fault> {
        missing(Operation::Embeddings)
    }

    async fn embed_encode(&self, _: &str, _: &[String], _: &EmbedParams) -> Answer<WireRequest> {
        missing(Operation::Embeddings)
    }

    async fn embed_decode(&self, _: &str, _: &Response) -> Answer<DecodedEmbeddings> {
        missing(Operation::Embeddings)
    }

    async fn rerank_encode(&self, _: &str, _: &str, _: &[String], _: &RerankParams) -> Answer<WireRequest> {
        missing(Operation::Rerank)
    }

    async fn rerank_decode(&self, _: &str, _: &Response) -> Answer<DecodedRanking> {
        missing(Operation::Rerank)
    }
}

impl<P: Describe + EmbeddingProvider + RerankProvider> Subject for NativeRetrieval<P> {
    async fn providers(&self) -> Result<Vec<ProviderSummary>, Fault> {
        guarded(|| <P as Describe>::providers().iter().map(boundary::summary).collect())
    }

    fn operations(&self) -> Vec<Operation> {
        vec![Operation::Embeddings, Operation::Rerank]
    }

    async fn serves(&self, operation: Operation, provider: &str, wire_id: &str) -> Result<bool, Fault> {
        match operation {
            Operation::Chat => missing(operation),
            Operation::Embeddings => guarded(|| <P as EmbeddingProvider>::serves(provider, wire_id)),
            Operation::Rerank => guarded(|| <P as RerankProvider>::serves(provider, wire_id)),
        }
    }

    async fn classify(&self, operation: Operation, provider: &str, response: &Response) -> Result<Classified, Fault> {
        match operation {
            Operation::Chat => missing(operation),
            Operation::Embeddings => embed_classify::<P>(provider, response),
            Operation::Rerank => rerank_classify::<P>(provider, response),
        }
    }

    async fn encode(&self, _: &str, _: &Conversation, _: &Params) -> Answer<WireRequest> {
        missing(Operation::Chat)
    }

    async fn decode(&self, _: &str, _: &Response) -> Answer<Decoded> {
        missing(Operation::Chat)
    }

    async fn stream(&self, _: &str, _: &StreamInput) -> Result<StreamRun, Fault> {
        missing(Operation::Chat)
    }

    async fn max_batch(&self, provider: &str, wire_id: &str) -> Result<u32, Fault> {
        guarded(|| P::max_batch(provider, wire_id))
    }

    async fn needs_dimensions(&self, provider: &str, wire_id: &str) -> Result<bool, Fault> {
        guarded(|| P::needs_dimensions(provider, wire_id))
    }

    async fn embed_encode(&self, provider: &str, inputs: &[String], params: &EmbedParams) -> Answer<WireRequest> {
        embed_encode::<P>(provider, inputs, params)
    }

    async fn embed_decode(&self, provider: &str, response: &Response) -> Answer<DecodedEmbeddings> {
        embed_decode::<P>(provider, response)
    }

    async fn rerank_encode(
        &self,
        provider: &str,
        query: &str,
        documents: &[String],
        params: &RerankParams,
    ) -> Answer<WireRequest> {
        rerank_encode::<P>(provider, query, documents, params)
    }

    async fn rerank_decode(&self, provider: &str, response: &Response) -> Answer<DecodedRanking> {
        rerank_decode::<P>(provider, response)
    }
}

impl<P: ChatProvider + EmbeddingProvider> Subject for NativeChatEmbeddings<P> {
    async fn providers(&self) -> Result<Vec<ProviderSummary>, Fault> {
        guarded(|| <P as ChatProvider>::providers().iter().map(boundary::summary).collect())
    }

    fn operations(&self) -> Vec<Operation> {
        vec![Operation::Chat, Operation::Embeddings]
    }

    async fn serves(&self, operation: Operation, provider: &str, wire_id: &str) -> Result<bool, Fault> {
        match operation {
            Operation::Chat => guarded(|| <P as ChatProvider>::serves(provider, wire_id)),
            Operation::Embeddings => guarded(|| <P as EmbeddingProvider>::serves(provider, wire_id)),
            Operation::Rerank => missing(operation),
        }
    }

    async fn classify(&self, operation: Operation, provider: &str, response: &Response) -> Result<Classified, Fault> {
        match operation {
            Operation::Chat => chat_classify::<P>(provider, response),
            Operation::Embeddings => embed_classify::<P>(provider, response),
            Operation::Rerank => missing(operation),
        }
    }

    async fn encode(&self, provider: &str, conversation: &Conversation, params: &Params) -> Answer<WireRequest> {
        chat_encode::<P>(provider, conversation, params)
    }

    async fn decode(&self, provider: &str, response: &Response) -> Answer<Decoded> {
        chat_decode::<P>(provider, response)
    }

    async fn stream(&self, provider: &str, input: &StreamInput) -> Result<StreamRun, Fault> {
        chat_stream::<P>(provider, input).await
    }

    async fn max_batch(&self, provider: &str, wire_id: &str) -> Result<u32, Fault> {
        guarded(|| P::max_batch(provider, wire_id))
    }

    async fn needs_dimensions(&self, provider: &str, wire_id: &str) -> Result<bool, Fault> {
        guarded(|| P::needs_dimensions(provider, wire_id))
    }

    async fn embed_encode(&self, provider: &str, inputs: &[String], params: &EmbedParams) -> Answer<WireRequest> {
        embed_encode::<P>(provider, inputs, params)
    }

    async fn embed_decode(&self, provider: &str, response: &Response) -> Answer<DecodedEmbeddings> {
        embed_decode::<P>(provider, response)
    }

    async fn rerank_encode(&self, _: &str, _: &str, _: &[String], _: &RerankParams) -> Answer<WireRequest> {
        missing(Operation::Rerank)
    }

    async fn rerank_decode(&self, _: &str, _: &Response) -> Answer<DecodedRanking> {
        missing(Operation::Rerank)
    }
}

impl<P: ChatProvider + EmbeddingProvider + RerankProvider> Subject for NativeAll<P> {
    async fn providers(&self) -> Result<Vec<ProviderSummary>, Fault> {
        guarded(|| <P as ChatProvider>::providers().iter().map(boundary::summary).collect())
    }

    fn operations(&self) -> Vec<Operation> {
        Operation::ALL.to_vec()
    }

    async fn serves(&self, operation: Operation, provider: &str, wire_id: &str) -> Result<bool, Fault> {
        match operation {
            Operation::Chat => guarded(|| <P as ChatProvider>::serves(provider, wire_id)),
            Operation::Embeddings => guarded(|| <P as EmbeddingProvider>::serves(provider, wire_id)),
            Operation::Rerank => guarded(|| <P as RerankProvider>::serves(provider, wire_id)),
        }
    }

    async fn classify(&self, operation: Operation, provider: &str, response: &Response) -> Result<Classified, Fault> {
        match operation {
            Operation::Chat => chat_classify::<P>(provider, response),
            Operation::Embeddings => embed_classify::<P>(provider, response),
            Operation::Rerank => rerank_classify::<P>(provider, response),
        }
    }

    async fn encode(&self, provider: &str, conversation: &Conversation, params: &Params) -> Answer<WireRequest> {
        chat_encode::<P>(provider, conversation, params)
    }

    async fn decode(&self, provider: &str, response: &Response) -> Answer<Decoded> {
        chat_decode::<P>(provider, response)
    }

    async fn stream(&self, provider: &str, input: &StreamInput) -> Result<StreamRun, Fault> {
        chat_stream::<P>(provider, input).await
    }

    async fn max_batch(&self, provider: &str, wire_id: &str) -> Result<u32, Fault> {
        guarded(|| P::max_batch(provider, wire_id))
    }

    async fn needs_dimensions(&self, provider: &str, wire_id: &str) -> Result<bool, Fault> {
        guarded(|| P::needs_dimensions(provider, wire_id))
    }

    async fn embed_encode(&self, provider: &str, inputs: &[String], params: &EmbedParams) -> Answer<WireRequest> {
        embed_encode::<P>(provider, inputs, params)
    }

    async fn embed_decode(&self, provider: &str, response: &Response) -> Answer<DecodedEmbeddings> {
        embed_decode::<P>(provider, response)
    }

    async fn rerank_encode(
        &self,
        provider: &str,
        query: &str,
        documents: &[String],
        params: &RerankParams,
    ) -> Answer<WireRequest> {
        rerank_encode::<P>(provider, query, documents, params)
    }

    async fn rerank_decode(&self, provider: &str, response: &Response) -> Answer<DecodedRanking> {
        rerank_decode::<P>(provider, response)
    }
}

/// Chat as [`Native`] answers it, and the `native` interface's calls.
impl<P: NativeProvider> Subject for NativeDialect<P> {
    async fn providers(&self) -> Result<Vec<ProviderSummary>, Fault> {
        Native::<P>::new().providers().await
    }

    fn operations(&self) -> Vec<Operation> {
        vec![Operation::Chat]
    }

    async fn serves(&self, operation: Operation, provider: &str, wire_id: &str) -> Result<bool, Fault> {
        Native::<P>::new().serves(operation, provider, wire_id).await
    }

    async fn classify(&self, operation: Operation, provider: &str, response: &Response) -> Result<Classified, Fault> {
        Native::<P>::new().classify(operation, provider, response).await
    }

    async fn encode(&self, provider: &str, conversation: &Conversation, params: &Params) -> Answer<WireRequest> {
        chat_encode::<P>(provider, conversation, params)
    }

    async fn decode(&self, provider: &str, response: &Response) -> Answer<Decoded> {
        chat_decode::<P>(provider, response)
    }

    async fn stream(&self, provider: &str, input: &StreamInput) -> Result<StreamRun, Fault> {
        chat_stream::<P>(provider, input).await
    }

    async fn max_batch(&self, _: &str, _: &str) -> Result<u32, Fault> {
        missing(Operation::Embeddings)
    }

    async fn needs_dimensions(&self, _: &str, _: &str) -> Result<bool, Fault> {
        missing(Operation::Embeddings)
    }

    async fn embed_encode(&self, _: &str, _: &[String], _: &EmbedParams) -> Answer<WireRequest> {
        missing(Operation::Embeddings)
    }

    async fn embed_decode(&self, _: &str, _: &Response) -> Answer<DecodedEmbeddings> {
        missing(Operation::Embeddings)
    }

    async fn rerank_encode(&self, _: &str, _: &str, _: &[String], _: &RerankParams) -> Answer<WireRequest> {
        missing(Operation::Rerank)
    }

    async fn rerank_decode(&self, _: &str, _: &Response) -> Answer<DecodedRanking> {
        missing(Operation::Rerank)
    }

    /// The SDK's trait has `decode_native` (a default for dialects without
    /// blocks of their own), so every such provider answers all of it.
    fn native_level(&self) -> NativeLevel {
        NativeLevel::Answers
    }

    async fn native_support(&self, provider: &str, wire_id: &str) -> Result<Option<NativeSupportSummary>, Fault> {
        guarded(|| P::native_support(provider, wire_id)).map(|support| support.map(boundary::native_support))
    }

    async fn native_encode(
        &self,
        provider: &str,
        conversation: &Conversation,
        params: &Params,
        native: &NativeFields,
    ) -> Answer<WireRequest> {
        let (conversation, params) = (boundary::conversation(conversation), boundary::params(params));
        let native = boundary::native_request(native);
        guarded(|| P::encode_native(provider, conversation, params, native))
            .map(|result| result.map(boundary::request).map_err(boundary::codec_failure))
    }

    async fn count_tokens_encode(
        &self,
        provider: &str,
        conversation: &Conversation,
        params: &Params,
        native: &NativeFields,
    ) -> Answer<WireRequest> {
        let (conversation, params) = (boundary::conversation(conversation), boundary::params(params));
        let native = boundary::native_request(native);
        guarded(|| P::count_tokens_encode(provider, conversation, params, native))
            .map(|result| result.map(boundary::request).map_err(boundary::codec_failure))
    }

    async fn count_tokens_decode(&self, provider: &str, response: &Response) -> Answer<u64> {
        let response = boundary::response(response);
        guarded(|| P::count_tokens_decode(provider, response)).map(|result| result.map_err(boundary::codec_failure))
    }

    async fn decode_native(&self, provider: &str, response: &Response) -> Answer<DecodedNative> {
        let response = boundary::response(response);
        guarded(|| P::decode_native(provider, response))
            .map(|result| result.map(boundary::native_answer).map_err(boundary::codec_failure))
    }
}
