//! A provider key bound to the component that serves it. Every call gets a fresh
//! `Store` and instance: nothing leaks between calls, and a component that traps
//! poisons only the instance of the call that made it trap.

use std::sync::Arc;

use super::bindings::ChatProvider as Bindings;
use super::bounded::EncodedRequest;
use super::engine::LoadedComponent;
use super::sandbox::{CallState, new_store, refuel};
use crate::types::{
    CallParams, CodecError, DecodedResponse, ErrorClass, HttpRequest, HttpResponse, PreparedConversation, ProviderInfo,
    StreamDelta, StreamEvent,
};

/// Why a call into a component did not produce an answer.
#[derive(Debug, Clone, thiserror::Error)]
pub enum PluginError {
    /// The component trapped, ran out of a limit, or broke the world's contract.
    #[error("provider `{provider}` failed: {reason}")]
    Fault { provider: String, reason: String },
    /// The component declined: it cannot encode this, or cannot read that response.
    #[error("provider `{provider}`: {}", codec_message(.error))]
    Codec { provider: String, error: CodecError },
}

fn codec_message(error: &CodecError) -> String {
    match error {
        CodecError::Unsupported(reason) => format!("cannot encode the request: {reason}"),
        CodecError::Malformed(reason) => format!("cannot read the response: {reason}"),
    }
}

/// One provider key of a loaded component.
#[derive(Clone)]
pub struct Provider {
    info: ProviderInfo,
    component: Arc<LoadedComponent>,
}

impl std::fmt::Debug for Provider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Provider").field("key", &self.info.key).field("source", &self.component.source).finish()
    }
}

impl Provider {
    pub fn new(info: ProviderInfo, component: Arc<LoadedComponent>) -> Self {
        Self { info, component }
    }

    pub fn key(&self) -> &str {
        &self.info.key
    }

    pub fn info(&self) -> &ProviderInfo {
        &self.info
    }

    pub fn component(&self) -> &LoadedComponent {
        &self.component
    }

    pub async fn encode(
        &self,
        conversation: &PreparedConversation,
        params: &CallParams,
    ) -> Result<HttpRequest, PluginError> {
        let mut store = new_store(&self.component.engine);
        let instance = self
            .component
            .pre
            .instance_pre()
            .instantiate_async(&mut store)
            .await
            .map_err(|e| self.fault("instantiate", &e))?;
        // The result type caps every string and list before it is copied: a
        // request no upstream would take is the component's fault, caught
        // before anything is sent or even copied out of the guest.
        let encode = instance
            .get_typed_func::<(&str, &PreparedConversation, &CallParams), (Result<EncodedRequest, CodecError>,)>(
                &mut store,
                &self.component.encode,
            )
            .map_err(|e| self.fault("chat.encode", &e))?;
        let (result,) = encode
            .call_async(&mut store, (&self.info.key, conversation, params))
            .await
            .map_err(|e| self.fault("chat.encode", &e))?;
        result.map(HttpRequest::from).map_err(|error| self.codec(error))
    }

    pub async fn decode(&self, response: &HttpResponse) -> Result<DecodedResponse, PluginError> {
        let (mut store, bindings) = self.instantiate().await?;
        let result = bindings
            .weir_provider_chat()
            .call_decode(&mut store, &self.info.key, response)
            .await
            .map_err(|e| self.fault("chat.decode", &e))?;
        result.map_err(|error| self.codec(error))
    }

    pub async fn classify(&self, response: &HttpResponse) -> Result<ErrorClass, PluginError> {
        let (mut store, bindings) = self.instantiate().await?;
        bindings
            .weir_provider_chat()
            .call_classify(&mut store, &self.info.key, response)
            .await
            .map_err(|e| self.fault("chat.classify", &e))
    }

    /// A stream decoder: one instance held for the stream's life, so the decoder
    /// may keep state between events. Each event gets a fresh CPU budget.
    pub async fn open_stream(&self) -> Result<ComponentStream, PluginError> {
        let (mut store, bindings) = self.instantiate().await?;
        let decoder = bindings
            .weir_provider_chat()
            .stream_decoder()
            .call_constructor(&mut store, &self.info.key)
            .await
            .map_err(|e| self.fault("chat.stream-decoder", &e))?;
        Ok(ComponentStream { provider: self.clone(), store, bindings, decoder })
    }

    async fn instantiate(&self) -> Result<(wasmtime::Store<CallState>, Bindings), PluginError> {
        let mut store = new_store(&self.component.engine);
        let bindings =
            self.component.pre.instantiate_async(&mut store).await.map_err(|e| self.fault("instantiate", &e))?;
        Ok((store, bindings))
    }

    fn fault(&self, during: &str, error: &wasmtime::Error) -> PluginError {
        let reason = match error.downcast_ref::<wasmtime::Trap>() {
            Some(wasmtime::Trap::OutOfFuel) => format!("exceeded its CPU budget in `{during}`"),
            Some(trap) => format!("trapped in `{during}`: {trap}"),
            None => format!("failed in `{during}`: {error:#}"),
        };
        tracing::error!(provider = %self.info.key, component = %self.component.source, %reason, "provider component fault");
        PluginError::Fault { provider: self.info.key.clone(), reason }
    }

    fn codec(&self, error: CodecError) -> PluginError {
        PluginError::Codec { provider: self.info.key.clone(), error }
    }
}

/// One stream's decoder inside its own component instance. Dropping it drops the
/// instance; a trap poisons only this stream.
pub struct ComponentStream {
    provider: Provider,
    store: wasmtime::Store<CallState>,
    bindings: Bindings,
    decoder: wasmtime::component::ResourceAny,
}

impl std::fmt::Debug for ComponentStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ComponentStream").field("provider", &self.provider).finish_non_exhaustive()
    }
}

impl ComponentStream {
    /// One framed event in, the deltas it completes out.
    pub async fn feed(&mut self, event: &StreamEvent) -> Result<Vec<StreamDelta>, PluginError> {
        refuel(&mut self.store, &self.provider.component.engine);
        let result = self
            .bindings
            .weir_provider_chat()
            .stream_decoder()
            .call_feed(&mut self.store, self.decoder, event)
            .await
            .map_err(|e| self.provider.fault("stream-decoder.feed", &e))?;
        result.map_err(|error| self.provider.codec(error))
    }

    /// The transport ended cleanly: whatever the decoder held back.
    pub async fn finish(&mut self) -> Result<Vec<StreamDelta>, PluginError> {
        refuel(&mut self.store, &self.provider.component.engine);
        let result = self
            .bindings
            .weir_provider_chat()
            .stream_decoder()
            .call_finish(&mut self.store, self.decoder)
            .await
            .map_err(|e| self.provider.fault("stream-decoder.finish", &e))?;
        result.map_err(|error| self.provider.codec(error))
    }
}
