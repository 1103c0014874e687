//! The second client family: embeddings and reranking, as a caller asks for
//! them and reads them back. The call itself goes through the same stages as
//! chat (see `call::retrieval`).

mod width;

pub use width::{WidthError, adapt};

use crate::admission::Lane;
use crate::caller::Caller;
use crate::chat::Stamp;
use crate::record::Route;
use crate::types::{EmbeddingPurpose, Ranked};

/// Texts to embed, each returned as one L2-normalized vector at the
/// deployment's one width.
#[derive(Debug, Clone)]
pub struct EmbedRequest {
    /// A role of kind `embedding`, or an embedding entry's catalog id.
    pub model: String,
    pub inputs: Vec<String>,
    pub purpose: EmbeddingPurpose,
    /// Interactive (query embedding: a short deadline, served first) or bulk
    /// (ingestion); absent: the role's lane, else interactive.
    pub lane: Option<Lane>,
    /// The width the caller expects: absent, or equal to the width it gets
    /// (an embedding call never changes the deployment's width per request).
    pub dimensions: Option<u32>,
    /// When the caller stops waiting; absent: the lane's deadline.
    pub deadline: Option<tokio::time::Instant>,
    /// Lowers the entry's retries of upstream signals, never raises them.
    pub max_retries: Option<u32>,
    pub caller: Option<Caller>,
    pub route: Route,
    pub traceparent: Option<String>,
    /// What the caller's `cache-control` asked of the answer cache (see
    /// [`crate::answer_cache`]): each input's vector is looked up and stored apart.
    pub cache: crate::answer_cache::CacheAsk,
}

impl EmbedRequest {
    pub fn new(model: impl Into<String>, inputs: Vec<String>, purpose: EmbeddingPurpose) -> Self {
        Self {
            model: model.into(),
            inputs,
            purpose,
            lane: None,
            dimensions: None,
            deadline: None,
            max_retries: None,
            caller: None,
            route: Route::Library,
            traceparent: None,
            cache: crate::answer_cache::CacheAsk::Use,
        }
    }

    pub fn lane(mut self, lane: Lane) -> Self {
        self.lane = Some(lane);
        self
    }

    pub fn caller(mut self, caller: Caller) -> Self {
        self.caller = Some(caller);
        self
    }
}

/// One vector per input, in the inputs' order.
#[derive(Debug, Clone)]
pub struct EmbedResponse {
    /// L2-normalized, each `dimensions` long.
    pub vectors: Vec<Vec<f32>>,
    pub dimensions: u32,
    /// Billed input tokens summed over the upstream requests (the ledger
    /// records the same number).
    pub input_tokens: u64,
    /// Some upstream request reported no count, so the host's estimate of its
    /// texts stands in for it (the record notes `input_tokens_estimated`).
    pub input_tokens_estimated: bool,
    pub stamp: Stamp,
}

/// Documents to order by their relevance to a query.
#[derive(Debug, Clone)]
pub struct RerankRequest {
    /// A role of kind `rerank`, or a rerank entry's catalog id.
    pub model: String,
    pub query: String,
    pub documents: Vec<String>,
    /// How many of the best to return; absent: all.
    pub top_n: Option<u32>,
    /// When the caller stops waiting; absent: the interactive deadline.
    pub deadline: Option<tokio::time::Instant>,
    pub max_retries: Option<u32>,
    pub caller: Option<Caller>,
    pub route: Route,
    pub traceparent: Option<String>,
    /// What the caller's `cache-control` asked of the answer cache (see
    /// [`crate::answer_cache`]).
    pub cache: crate::answer_cache::CacheAsk,
}

impl RerankRequest {
    pub fn new(model: impl Into<String>, query: impl Into<String>, documents: Vec<String>) -> Self {
        Self {
            model: model.into(),
            query: query.into(),
            documents,
            top_n: None,
            deadline: None,
            max_retries: None,
            caller: None,
            route: Route::Library,
            traceparent: None,
            cache: crate::answer_cache::CacheAsk::Use,
        }
    }
}

/// The documents' ranking, best first.
#[derive(Debug, Clone)]
pub struct RerankResponse {
    pub results: Vec<Ranked>,
    pub input_tokens: Option<u64>,
    pub search_units: Option<u64>,
    pub stamp: Stamp,
}
