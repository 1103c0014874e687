//! A provider key bound to the component that serves it. Every call gets a fresh
//! `Store` and instance: nothing leaks between calls, and a component that traps
//! poisons only the instance of the call that made it trap.

use std::collections::HashMap;
use std::sync::{Arc, PoisonError};
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

/// What a provider says about one wire id (`describe.serves` and `describe.claims`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WireAnswers {
    /// It speaks that model's request shape.
    pub serves: bool,
    /// It is written for that model's family (a catalog may link an entry to it).
    pub claims: bool,
}

/// A component's answers about wire ids, kept with the component so that a
/// reload reusing it asks nothing again.
#[derive(Debug, Default)]
pub(super) struct AnswerCache {
    by_wire_id: HashMap<(String, String), WireAnswers>,
    /// The first fault of a question to this component. Every later question
    /// gets it without a call: a hostile component costs one CPU budget at load,
    /// not one per catalog entry.
    fault: Option<PluginError>,
}

/// One provider key of a loaded component.
#[derive(Clone)]
pub struct Provider {
    info: ProviderInfo,
    component: Arc<LoadedComponent>,
    /// Whether the operator vouched for the component, so its defaults count.
    trust: Trust,
    /// The endpoint family its wire ids are spelled for (see
    /// [`crate::catalog::addressing_of`]); `None` without a default endpoint.
    addressing: Option<String>,
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
        let addressing = info.default_endpoint.as_deref().and_then(crate::catalog::addressing_of);
        Self { info, component, trust, addressing }
    }

    /// The endpoint family this provider's wire ids are spelled for: the host of
    /// its default endpoint, `{region}` kept (e.g. `bedrock-mantle.{region}.api.aws`).
    pub fn addressing(&self) -> Option<&str> {
        self.addressing.as_deref()
    }

    /// Whether this provider speaks `wire_id`'s request shape.
    pub fn serves(&self, wire_id: &str) -> Result<bool, PluginError> {
        self.answers(wire_id).map(|answers| answers.serves)
    }

    /// `describe.serves` and `describe.claims` for `wire_id`, asked of the
    /// component once (one instance for both) and then kept with it: this is
    /// load-time work, never a call's. A component that traps or runs out of a
    /// limit answers nothing more: its fault is kept and returned for every
    /// later question. Synchronous, like loading (its own minimal executor);
    /// call it off the async workers.
    pub fn answers(&self, wire_id: &str) -> Result<WireAnswers, PluginError> {
        let mut cache = self.component.answers.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(fault) = &cache.fault {
            return Err(fault.clone());
        }
        let key = (self.info.key.clone(), wire_id.to_owned());
        if let Some(answers) = cache.by_wire_id.get(&key) {
            return Ok(*answers);
        }
        match self.ask(wire_id) {
            Ok(answers) => {
                cache.by_wire_id.insert(key, answers);
                Ok(answers)
            }
            Err(Asked::Faulted(fault)) => {
                cache.fault = Some(fault.clone());
                Err(fault)
            }
            // No instance could be made (the pool was full during a reload):
            // not the component's doing, so not kept against it.
            Err(Asked::NotInstantiated(error)) => Err(error),
        }
    }

    fn ask(&self, wire_id: &str) -> Result<WireAnswers, Asked> {
        pollster::block_on(async {
            let mut store = new_store(&self.component.engine);
            let instance = self
                .component
                .pre
                .instantiate_async(&mut store)
                .await
                .map_err(|e| Asked::NotInstantiated(self.fault("instantiate", &e)))?;
            let describe = instance.weir_provider_describe();
            let serves = describe
                .call_serves(&mut store, &self.info.key, wire_id)
                .await
                .map_err(|e| Asked::Faulted(self.fault("describe.serves", &e)))?;
            refuel(&mut store, &self.component.engine);
            let claims = describe
                .call_claims(&mut store, &self.info.key, wire_id)
                .await
                .map_err(|e| Asked::Faulted(self.fault("describe.claims", &e)))?;
            Ok(WireAnswers { serves, claims })
        })
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

/// Why a question about a wire id got no answer.
enum Asked {
    /// The component trapped or ran out of a limit while answering.
    Faulted(PluginError),
    /// No instance could be made for it.
    NotInstantiated(PluginError),
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
