//! A provider's embeddings, rerank and log-probability calls, in an
//! attempt's [`Session`] like chat's: one instance for the attempt's encode
//! and its decode or classify, under the same fuel and memory limits, each
//! `encode`'s request capped while it is lifted ([`super::bounded`]). Calling
//! an operation the component does not export is a [`PluginError::Fault`]
//! naming it, made before any instance.

use tokio::time::Instant;

use super::convert::Records;
use super::exports::{EmbeddingExports, LogprobsExports, RerankExports};
use super::provider::{PluginError, Provider};
use super::session::Session;
use super::world::Operation;
use crate::types::{
    CallParams, EmbeddingParams, EmbeddingResponse, ErrorClass, FirstToken, HttpRequest, HttpResponse,
    PreparedConversation, RerankParams, RerankResponse,
};
use crate::wit::v0_4;
use wasmtime::component::Instance;

type Call<'s> = &'s mut wasmtime::Store<super::sandbox::CallState>;

impl Session<'_> {
    /// The HTTP request for one batch of `inputs`, without credentials. The
    /// wait for a free instance ends at `deadline` if that comes before
    /// [`super::provider::SLOT_WAIT`].
    pub async fn embed_encode(
        &mut self,
        inputs: &[String],
        params: &EmbeddingParams,
        deadline: Option<Instant>,
    ) -> Result<HttpRequest, PluginError> {
        let embeddings = self.provider().embeddings()?;
        let result = self
            .call(
                "embeddings.encode",
                deadline,
                |store, instance| embeddings.encode(store, instance),
                (self.provider().key(), inputs, params),
            )
            .await?;
        result.map(HttpRequest::from).map_err(|error| self.provider().codec(error))
    }

    /// A successful (2xx) embeddings response, normalized. Like chat's decode,
    /// it waits the whole slot wait: the answer is already paid for.
    pub async fn embed_decode(&mut self, response: &HttpResponse) -> Result<EmbeddingResponse, PluginError> {
        let embeddings = self.provider().embeddings()?;
        let result = self
            .call(
                "embeddings.decode",
                None,
                |store, instance| embeddings.decode(store, instance),
                (self.provider().key(), response),
            )
            .await?;
        result.map_err(|error| self.provider().codec(error))
    }

    /// What a failed (non-2xx) embeddings response means.
    pub async fn embed_classify(&mut self, response: &HttpResponse) -> Result<ErrorClass, PluginError> {
        let embeddings = self.provider().embeddings()?;
        self.call(
            "embeddings.classify",
            None,
            |store, instance| embeddings.classify(store, instance),
            (self.provider().key(), response),
        )
        .await
    }

    /// The HTTP request ranking `documents` against `query`, without
    /// credentials; `deadline` bounds the wait for an instance.
    pub async fn rerank_encode(
        &mut self,
        query: &str,
        documents: &[String],
        params: &RerankParams,
        deadline: Option<Instant>,
    ) -> Result<HttpRequest, PluginError> {
        let rerank = self.provider().rerank()?;
        let result = self
            .call(
                "rerank.encode",
                deadline,
                |store, instance| rerank.encode(store, instance),
                (self.provider().key(), query, documents, params),
            )
            .await?;
        result.map(HttpRequest::from).map_err(|error| self.provider().codec(error))
    }

    /// A successful (2xx) rerank response, normalized.
    pub async fn rerank_decode(&mut self, response: &HttpResponse) -> Result<RerankResponse, PluginError> {
        let rerank = self.provider().rerank()?;
        let result = self
            .call(
                "rerank.decode",
                None,
                |store, instance| rerank.decode(store, instance),
                (self.provider().key(), response),
            )
            .await?;
        result.map_err(|error| self.provider().codec(error))
    }

    /// What a failed (non-2xx) rerank response means.
    pub async fn rerank_classify(&mut self, response: &HttpResponse) -> Result<ErrorClass, PluginError> {
        let rerank = self.provider().rerank()?;
        self.call(
            "rerank.classify",
            None,
            |store, instance| rerank.classify(store, instance),
            (self.provider().key(), response),
        )
        .await
    }

    /// The chat request for `conversation` asking for the `top` most likely
    /// candidates of each output token, without credentials.
    pub async fn logprobs_encode(
        &mut self,
        conversation: &PreparedConversation,
        params: &CallParams,
        top: u8,
        deadline: Option<Instant>,
    ) -> Result<HttpRequest, PluginError> {
        let logprobs = self.provider().logprobs()?;
        let key = self.provider().key();
        let during = "logprobs.encode";
        let result = match logprobs.records() {
            Records::Current => {
                let encode = |store: Call<'_>, instance: &Instance| logprobs.encode(store, instance);
                self.call(during, deadline, encode, (key, conversation, params, top)).await?
            }
            Records::V0_4 => {
                let legacy = v0_4::CallParams::from(params);
                let encode = |store: Call<'_>, instance: &Instance| logprobs.encode_v0_4(store, instance);
                self.call(during, deadline, encode, (key, conversation, &legacy, top)).await?
            }
        };
        result.map(HttpRequest::from).map_err(|error| self.provider().codec(error))
    }

    /// The first output token's candidates from a successful (2xx) response.
    pub async fn logprobs_decode(&mut self, response: &HttpResponse) -> Result<FirstToken, PluginError> {
        let logprobs = self.provider().logprobs()?;
        let result = self
            .call(
                "logprobs.decode",
                None,
                |store, instance| logprobs.decode(store, instance),
                (self.provider().key(), response),
            )
            .await?;
        result.map_err(|error| self.provider().codec(error))
    }
}

impl Provider {
    fn logprobs(&self) -> Result<&LogprobsExports, PluginError> {
        self.component().exports.logprobs.as_ref().ok_or_else(|| self.missing(Operation::Logprobs))
    }

    fn embeddings(&self) -> Result<&EmbeddingExports, PluginError> {
        self.component().exports.embeddings.as_ref().ok_or_else(|| self.missing(Operation::Embeddings))
    }

    fn rerank(&self) -> Result<&RerankExports, PluginError> {
        self.component().exports.rerank.as_ref().ok_or_else(|| self.missing(Operation::Rerank))
    }
}
