//! A provider key bound to the component that serves it. Every call gets a fresh
//! `Store` and instance: nothing leaks between calls, and a component that traps
//! poisons only the instance of the call that made it trap.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::OwnedSemaphorePermit;
use tokio::time::Instant;

use super::bindings::ChatProvider as Bindings;
use super::bounded::EncodedRequest;
use super::engine::LoadedComponent;
use super::sandbox::{CallState, new_store, refuel};
use crate::reach::Trust;
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
    /// Every slot of the instance pool stayed in use for as long as the call could
    /// wait (see [`SLOT_WAIT`]). Nothing was sent for it.
    #[error(
        "provider `{provider}`: every component instance of the gateway stayed in use for {}s; retry shortly",
        .waited.as_secs()
    )]
    NoFreeInstance { provider: String, waited: Duration },
}

/// Longest a call waits for a free component instance: long enough for a burst
/// of streams to end or be dropped (`stream_idle_secs`), short enough that a
/// caller hears back. A caller's earlier deadline shortens it.
pub const SLOT_WAIT: Duration = Duration::from_secs(10);

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
    /// Whether the operator vouched for the component, so its defaults count.
    trust: Trust,
}

impl std::fmt::Debug for Provider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Provider")
            .field("key", &self.info.key)
            .field("source", &self.component.source)
            .field("trust", &self.trust)
            .finish()
    }
}

impl Provider {
    pub fn new(info: ProviderInfo, component: Arc<LoadedComponent>, trust: Trust) -> Self {
        Self { info, component, trust }
    }

    /// Whether this provider's component may supply its own endpoint and
    /// credential id (see [`crate::reach`]).
    pub fn trust(&self) -> Trust {
        self.trust
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
        self.encode_until(conversation, params, None).await
    }

    /// [`Self::encode`] for a caller with a deadline: the wait for a free
    /// instance ends there if that comes before [`SLOT_WAIT`].
    pub async fn encode_until(
        &self,
        conversation: &PreparedConversation,
        params: &CallParams,
        deadline: Option<Instant>,
    ) -> Result<HttpRequest, PluginError> {
        let slot = self.take_slot(deadline).await?;
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
        // The pooled instance goes back before its slot does.
        drop(store);
        drop(slot);
        result.map(HttpRequest::from).map_err(|error| self.codec(error))
    }

    /// Decodes a response. The answer is already paid for, so it waits the
    /// whole [`SLOT_WAIT`] for an instance, whatever the caller's deadline.
    pub async fn decode(&self, response: &HttpResponse) -> Result<DecodedResponse, PluginError> {
        let mut instance = self.instantiate(None).await?;
        let result = instance
            .bindings
            .weir_provider_chat()
            .call_decode(&mut instance.store, &self.info.key, response)
            .await
            .map_err(|e| self.fault("chat.decode", &e))?;
        result.map_err(|error| self.codec(error))
    }

    pub async fn classify(&self, response: &HttpResponse) -> Result<ErrorClass, PluginError> {
        let mut instance = self.instantiate(None).await?;
        instance
            .bindings
            .weir_provider_chat()
            .call_classify(&mut instance.store, &self.info.key, response)
            .await
            .map_err(|e| self.fault("chat.classify", &e))
    }

    /// A stream decoder: one instance held for the stream's life, so the decoder
    /// may keep state between events. Each event gets a fresh CPU budget. It
    /// holds its instance slot until dropped.
    pub async fn open_stream(&self) -> Result<ComponentStream, PluginError> {
        self.open_stream_until(None).await
    }

    /// [`Self::open_stream`] for a caller with a deadline, which bounds the wait
    /// for a free instance.
    pub async fn open_stream_until(&self, deadline: Option<Instant>) -> Result<ComponentStream, PluginError> {
        let mut instance = self.instantiate(deadline).await?;
        let decoder = instance
            .bindings
            .weir_provider_chat()
            .stream_decoder()
            .call_constructor(&mut instance.store, &self.info.key)
            .await
            .map_err(|e| self.fault("chat.stream-decoder", &e))?;
        let Instance { store, bindings, slot } = instance;
        Ok(ComponentStream { provider: self.clone(), store, bindings, decoder, _slot: slot })
    }

    /// A fresh store and instance in a slot of the pool, waiting for a slot until
    /// the earlier of `deadline` and [`SLOT_WAIT`] from now.
    async fn instantiate(&self, deadline: Option<Instant>) -> Result<Instance, PluginError> {
        let _slot = self.take_slot(deadline).await?;
        let mut store = new_store(&self.component.engine);
        let bindings =
            self.component.pre.instantiate_async(&mut store).await.map_err(|e| self.fault("instantiate", &e))?;
        Ok(Instance { store, bindings, slot: _slot })
    }

    /// A slot of the engine's instance pool, waited for until `deadline` or
    /// [`SLOT_WAIT`], whichever comes first.
    async fn take_slot(&self, deadline: Option<Instant>) -> Result<OwnedSemaphorePermit, PluginError> {
        let started = Instant::now();
        let until = deadline.map_or(started + SLOT_WAIT, |deadline| deadline.min(started + SLOT_WAIT));
        self.component.slots.take(until).await.ok_or_else(|| {
            let waited = started.elapsed();
            tracing::warn!(provider = %self.info.key, ?waited, "no free component instance");
            PluginError::NoFreeInstance { provider: self.info.key.clone(), waited }
        })
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

/// A live instance and the pool slot it occupies. Fields drop in order, so the
/// store (and its pooled instance) is gone before the slot's permit is returned.
struct Instance {
    store: wasmtime::Store<CallState>,
    bindings: Bindings,
    /// Held, never read: returned to the pool when the instance is dropped.
    slot: OwnedSemaphorePermit,
}

/// One stream's decoder inside its own component instance. Dropping it drops the
/// instance, then frees its slot; a trap poisons only this stream.
pub struct ComponentStream {
    provider: Provider,
    store: wasmtime::Store<CallState>,
    bindings: Bindings,
    decoder: wasmtime::component::ResourceAny,
    _slot: OwnedSemaphorePermit,
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
