//! A provider key bound to the component that serves it. Every call gets a fresh
//! `Store` and instance: nothing leaks between calls, and a component that traps
//! poisons only the instance of the call that made it trap.

use std::collections::HashMap;
use std::sync::{Arc, PoisonError};
use std::time::Duration;

use tokio::sync::OwnedSemaphorePermit;
use tokio::time::Instant;

use wasmtime::Store;
use wasmtime::component::{ComponentType, Instance as ComponentInstance, Lift, ResourceAny};

use super::engine::LoadedComponent;
use super::exports::{ChatExports, NativeStreamExports, Question, Typed};
use super::sandbox::{CallState, new_store, refuel};
use super::session::Session;
use super::world::Operation;
use crate::reach::Trust;
use crate::types::{
    CallParams, CodecError, DecodedResponse, ErrorClass, HttpRequest, HttpResponse, NativeDelta, NativeSupport,
    PreparedConversation, ProviderInfo, StreamDelta, StreamEvent,
};

/// The longest own piece (a block, a text start, a citation, an own usage) a
/// native stream may hand over, in bytes: a web search result with its
/// encrypted contents is tens of KiB; anything past this is a broken or
/// hostile component, not an answer.
pub const MAX_OWN_PIECE: usize = 1 << 20;

/// The addressing of an endpoint URL (the endpoint family a provider's wire
/// ids are spelled for; see `catalog::links`): its host, lowercase, without userinfo or
/// port, `{region}` kept as written. `None` when the URL has no host.
pub fn addressing_of(url: &str) -> Option<String> {
    let (_, rest) = url.split_once("://")?;
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, host)| host);
    let host = match host_port.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or_default(),
        None => host_port.split(':').next().unwrap_or_default(),
    };
    (!host.is_empty()).then(|| host.to_ascii_lowercase())
}

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

impl PluginError {
    /// The error with `scrub` applied to the text a component wrote (a fault's
    /// reason, a codec error's): a component that read an upstream's answer
    /// may quote it, and the call layer scrubs that of the credential it sent
    /// before the error reaches a log.
    pub fn scrubbed(self, scrub: impl Fn(&str) -> String) -> Self {
        match self {
            Self::Fault { provider, reason } => Self::Fault { provider, reason: scrub(&reason) },
            Self::Codec { provider, error: CodecError::Unsupported(reason) } => {
                Self::Codec { provider, error: CodecError::Unsupported(scrub(&reason)) }
            }
            Self::Codec { provider, error: CodecError::Malformed(reason) } => {
                Self::Codec { provider, error: CodecError::Malformed(scrub(&reason)) }
            }
            Self::NoFreeInstance { .. } => self,
        }
    }
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
    /// `describe.serves` and `describe.claims`, by (provider key, wire id).
    by_wire_id: HashMap<(String, String), WireAnswers>,
    /// `embeddings.serves` and `rerank.serves`, by operation, provider key and wire id.
    serves: HashMap<(Operation, String, String), bool>,
    /// `embeddings.max-batch`, as answered (a 0 is kept, and refused each time).
    max_batch: HashMap<(String, String), u32>,
    /// `embeddings.needs-dimensions`, as answered.
    needs_dimensions: HashMap<(String, String), bool>,
    /// `native.support`, as answered, by provider key and then wire id: unlike
    /// the load-time questions above it is read on every chat call, and a
    /// nested map is looked up by `&str`, so a hit allocates nothing.
    native_support: HashMap<String, HashMap<String, Option<Arc<NativeSupport>>>>,
    /// Whether `native-stream.open` opens one, by provider key.
    streams_native: HashMap<String, bool>,
    /// The first fault of a question to this component. Every later question
    /// gets it without a call: a hostile component costs one CPU budget at load,
    /// not one per catalog entry.
    fault: Option<PluginError>,
}

/// One provider key of a loaded component.
#[derive(Clone)]
pub struct Provider {
    info: ProviderInfo,
    /// `info.key`, shared: a call's target carries it without copying it.
    shared_key: Arc<str>,
    component: Arc<LoadedComponent>,
    /// Whether the operator vouched for the component, so its defaults count.
    trust: Trust,
    /// The endpoint family its wire ids are spelled for (see
    /// [`addressing_of`]); `None` without a default endpoint.
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
        let addressing = info.default_endpoint.as_deref().and_then(addressing_of);
        let shared_key = Arc::from(info.key.as_str());
        Self { info, shared_key, component, trust, addressing }
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
        let key = (self.info.key.clone(), wire_id.to_owned());
        self.cached(
            |cache| cache.by_wire_id.get(&key).copied(),
            |cache, answers| {
                cache.by_wire_id.insert(key.clone(), answers);
            },
            || self.ask_describe(wire_id),
        )
    }

    /// Which operation interfaces the serving component exports.
    pub fn exports(&self, operation: Operation) -> bool {
        self.component.exports(operation)
    }

    /// `embeddings.serves` / `rerank.serves` / `logprobs.serves` for this key and `wire_id` (for
    /// [`Operation::Chat`], `describe.serves`), asked once and kept with the
    /// component like [`Self::answers`], faults included. False when the
    /// component does not export the operation.
    pub fn serves_operation(&self, operation: Operation, wire_id: &str) -> Result<bool, PluginError> {
        let exports = &self.component.exports;
        match (operation, &exports.chat, &exports.embeddings, &exports.rerank) {
            (Operation::Chat, Some(_), _, _) => self.serves(wire_id),
            (Operation::Embeddings, _, Some(embeddings), _) => {
                self.operation_serves(operation, wire_id, |store, instance| embeddings.serves(store, instance))
            }
            (Operation::Rerank, _, _, Some(rerank)) => {
                self.operation_serves(operation, wire_id, |store, instance| rerank.serves(store, instance))
            }
            (Operation::Logprobs, ..) => match &exports.logprobs {
                Some(logprobs) => {
                    self.operation_serves(operation, wire_id, |store, instance| logprobs.serves(store, instance))
                }
                None => Ok(false),
            },
            // `native` has no `serves`: its `support` answers per wire id (see
            // [`Self::native_support`]).
            (Operation::Native, ..) => Ok(false),
            (Operation::Chat | Operation::Embeddings | Operation::Rerank, _, _, _) => Ok(false),
        }
    }

    /// `serves` of an operation interface, through the answer cache.
    fn operation_serves<'a>(
        &'a self,
        operation: Operation,
        wire_id: &'a str,
        question: impl FnOnce(&mut Store<CallState>, &ComponentInstance) -> Question<'a, bool>,
    ) -> Result<bool, PluginError> {
        let key = (operation, self.info.key.clone(), wire_id.to_owned());
        self.cached(
            |cache| cache.serves.get(&key).copied(),
            |cache, serves| {
                cache.serves.insert(key.clone(), serves);
            },
            || self.ask_one(&format!("{operation}.serves"), wire_id, question),
        )
    }

    /// `embeddings.max-batch` for this key and `wire_id`: the most inputs one
    /// upstream request may carry. Asked once and kept like [`Self::answers`];
    /// a 0 breaks the world's contract (at least 1) and is a fault.
    pub fn max_batch(&self, wire_id: &str) -> Result<u32, PluginError> {
        let Some(embeddings) = &self.component.exports.embeddings else {
            return Err(self.missing(Operation::Embeddings));
        };
        let key = (self.info.key.clone(), wire_id.to_owned());
        let max_batch = self.cached(
            |cache| cache.max_batch.get(&key).copied(),
            |cache, max_batch| {
                cache.max_batch.insert(key.clone(), max_batch);
            },
            || self.ask_one("embeddings.max-batch", wire_id, |store, instance| embeddings.max_batch(store, instance)),
        )?;
        match max_batch {
            0 => Err(PluginError::Fault {
                provider: self.info.key.clone(),
                reason: format!("answered `embeddings.max-batch` 0 for `{wire_id}` (max-batch 0; at least 1)"),
            }),
            max_batch => Ok(max_batch),
        }
    }

    /// `embeddings.needs-dimensions` for this key and `wire_id`: whether the
    /// model is only called at a width it is asked for, so its entry must pin
    /// one. Asked once and kept like [`Self::answers`].
    pub fn needs_dimensions(&self, wire_id: &str) -> Result<bool, PluginError> {
        let Some(embeddings) = &self.component.exports.embeddings else {
            return Err(self.missing(Operation::Embeddings));
        };
        let key = (self.info.key.clone(), wire_id.to_owned());
        self.cached(
            |cache| cache.needs_dimensions.get(&key).copied(),
            |cache, needs| {
                cache.needs_dimensions.insert(key.clone(), needs);
            },
            || {
                self.ask_one("embeddings.needs-dimensions", wire_id, |store, instance| {
                    embeddings.needs_dimensions(store, instance)
                })
            },
        )
    }

    /// `native.support` for this key and `wire_id`: which of a dialect's own
    /// fields and betas it sends for that model. Asked once and kept like
    /// [`Self::answers`]; `None` when the component does not export `native`.
    pub fn native_support(&self, wire_id: &str) -> Result<Option<Arc<NativeSupport>>, PluginError> {
        let Some(native) = &self.component.exports.native else { return Ok(None) };
        let key = self.info.key.as_str();
        self.cached(
            |cache| cache.native_support.get(key).and_then(|by_wire_id| by_wire_id.get(wire_id)).cloned(),
            |cache, support| {
                let by_wire_id = cache.native_support.entry(key.to_owned()).or_default();
                by_wire_id.insert(wire_id.to_owned(), support);
            },
            || {
                let support =
                    self.ask_one("native.support", wire_id, |store, instance| native.support(store, instance));
                support.map(|support| support.map(Arc::new))
            },
        )
    }

    /// Whether this key's streams carry its own blocks: the component has
    /// `native.native-stream` (0.7.0 on) and its `open` gives one for this
    /// key. Asked once and kept like [`Self::native_support`].
    pub fn streams_native(&self) -> Result<bool, PluginError> {
        let Some(native) = &self.component.exports.native else { return Ok(false) };
        let Some(stream) = native.stream() else { return Ok(false) };
        let key = self.info.key.as_str();
        self.cached(
            |cache| cache.streams_native.get(key).copied(),
            |cache, opens| {
                cache.streams_native.insert(key.to_owned(), opens);
            },
            || {
                pollster::block_on(async {
                    let (mut store, instance) = self.load_time_instance().await?;
                    let during = "native.native-stream.open";
                    let fault = |e: &wasmtime::Error| Asked::Faulted(self.fault(during, e));
                    let open = stream.open(native.typed(), &mut store, &instance).map_err(|e| fault(&e))?;
                    let (opened,) = open.call_async(&mut store, (key,)).await.map_err(|e| fault(&e))?;
                    // The decoder asked about is dropped with its store.
                    Ok(opened.is_some())
                })
            },
        )
    }

    /// One load-time answer: from the cache, else asked and kept; a fault of
    /// the component is kept too, and answers every later question.
    fn cached<T: Clone>(
        &self,
        get: impl FnOnce(&AnswerCache) -> Option<T>,
        put: impl FnOnce(&mut AnswerCache, T),
        ask: impl FnOnce() -> Result<T, Asked>,
    ) -> Result<T, PluginError> {
        let mut cache = self.component.answers.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(fault) = &cache.fault {
            return Err(fault.clone());
        }
        if let Some(answer) = get(&cache) {
            return Ok(answer);
        }
        match ask() {
            Ok(answer) => {
                put(&mut cache, answer.clone());
                Ok(answer)
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

    fn ask_describe(&self, wire_id: &str) -> Result<WireAnswers, Asked> {
        let describe = &self.component.exports.describe;
        pollster::block_on(async {
            let (mut store, instance) = self.load_time_instance().await?;
            let fault = |during: &str, e: &wasmtime::Error| Asked::Faulted(self.fault(during, e));
            let serves = describe.serves(&mut store, &instance).map_err(|e| fault("describe.serves", &e))?;
            let (serves,) = serves
                .call_async(&mut store, (&self.info.key, wire_id))
                .await
                .map_err(|e| fault("describe.serves", &e))?;
            refuel(&mut store, &self.component.engine);
            let claims = describe.claims(&mut store, &instance).map_err(|e| fault("describe.claims", &e))?;
            let (claims,) = claims
                .call_async(&mut store, (&self.info.key, wire_id))
                .await
                .map_err(|e| fault("describe.claims", &e))?;
            Ok(WireAnswers { serves, claims })
        })
    }

    /// One `(provider, wire-id)` question in an instance of its own.
    fn ask_one<'a, T>(
        &'a self,
        during: &str,
        wire_id: &'a str,
        question: impl FnOnce(&mut Store<CallState>, &ComponentInstance) -> Question<'a, T>,
    ) -> Result<T, Asked>
    where
        T: ComponentType + Lift + Send + Sync + 'static,
    {
        pollster::block_on(async {
            let (mut store, instance) = self.load_time_instance().await?;
            let fault = |e: &wasmtime::Error| Asked::Faulted(self.fault(during, e));
            let question = question(&mut store, &instance).map_err(|e| fault(&e))?;
            let (answer,) = question.call_async(&mut store, (&self.info.key, wire_id)).await.map_err(|e| fault(&e))?;
            Ok(answer)
        })
    }

    /// An instance for a load-time question. It takes no pool slot: loading
    /// asks one question at a time per component.
    async fn load_time_instance(&self) -> Result<(Store<CallState>, ComponentInstance), Asked> {
        let mut store = new_store(&self.component.engine);
        let instance = self
            .component
            .pre
            .instantiate_async(&mut store)
            .await
            .map_err(|e| Asked::NotInstantiated(self.fault("instantiate", &e)))?;
        Ok((store, instance))
    }

    /// Whether this provider's component may supply its own endpoint and
    /// credential id (see [`crate::reach`]).
    pub fn trust(&self) -> Trust {
        self.trust
    }

    pub fn key(&self) -> &str {
        &self.info.key
    }

    /// The provider key as a shared string (see [`Self::key`]).
    pub fn shared_key(&self) -> Arc<str> {
        Arc::clone(&self.shared_key)
    }

    pub fn info(&self) -> &ProviderInfo {
        &self.info
    }

    pub fn component(&self) -> &LoadedComponent {
        &self.component
    }

    /// An instance for one attempt: its encode, then its decode or classify
    /// (see [`Session`]).
    pub fn session(&self) -> Session<'_> {
        Session::new(self)
    }

    /// [`Session::encode`] in a session of its own.
    pub async fn encode(
        &self,
        conversation: &PreparedConversation,
        params: &CallParams,
    ) -> Result<HttpRequest, PluginError> {
        self.session().encode(conversation, params, None).await
    }

    /// [`Session::decode`] in a session of its own.
    pub async fn decode(&self, response: &HttpResponse) -> Result<DecodedResponse, PluginError> {
        self.session().decode(response).await
    }

    /// [`Session::classify`] in a session of its own.
    pub async fn classify(&self, response: &HttpResponse) -> Result<ErrorClass, PluginError> {
        self.session().classify(response).await
    }

    /// A stream decoder: one instance held for the stream's life, so the decoder
    /// may keep state between events. Each event gets a fresh CPU budget. It
    /// holds its instance slot until dropped.
    pub async fn open_stream(&self) -> Result<ComponentStream, PluginError> {
        self.session().into_stream(None).await
    }

    pub(super) fn chat(&self) -> Result<&ChatExports, PluginError> {
        self.component.exports.chat.as_ref().ok_or_else(|| self.missing(Operation::Chat))
    }

    /// The fault of asking a component for an operation it does not export:
    /// a caller's mistake, caught before any instance is made.
    pub(super) fn missing(&self, operation: Operation) -> PluginError {
        let reason = format!(
            "its component ({}, weir:provider@{}) does not export `{operation}`",
            self.component.source, self.component.world_version
        );
        tracing::warn!(provider = %self.info.key, %reason, "operation not exported");
        PluginError::Fault { provider: self.info.key.clone(), reason }
    }

    /// A function of `operation` that the component's version does not have.
    pub(super) fn missing_function(&self, operation: Operation, function: &str) -> PluginError {
        let reason = format!(
            "its component ({}, weir:provider@{}) has no `{operation}.{function}`",
            self.component.source, self.component.world_version
        );
        tracing::warn!(provider = %self.info.key, %reason, "function not exported");
        PluginError::Fault { provider: self.info.key.clone(), reason }
    }

    /// A fresh store and instance in a slot of the pool, waiting for a slot until
    /// the earlier of `deadline` and [`SLOT_WAIT`] from now.
    pub(super) async fn instantiate(&self, deadline: Option<Instant>) -> Result<CallInstance, PluginError> {
        let slot = self.take_slot(deadline).await?;
        let mut store = new_store(&self.component.engine);
        let instance =
            self.component.pre.instantiate_async(&mut store).await.map_err(|e| self.fault("instantiate", &e))?;
        Ok(CallInstance { store, instance, _slot: slot })
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

    pub(super) fn fault(&self, during: &str, error: &wasmtime::Error) -> PluginError {
        let reason = match error.downcast_ref::<wasmtime::Trap>() {
            Some(wasmtime::Trap::OutOfFuel) => format!("exceeded its CPU budget in `{during}`"),
            Some(trap) => format!("trapped in `{during}`: {trap}"),
            None => format!("failed in `{during}`: {error:#}"),
        };
        tracing::error!(provider = %self.info.key, component = %self.component.source, %reason, "provider component fault");
        PluginError::Fault { provider: self.info.key.clone(), reason }
    }

    pub(super) fn codec(&self, error: CodecError) -> PluginError {
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
pub(super) struct CallInstance {
    pub store: Store<CallState>,
    pub instance: ComponentInstance,
    /// Held, never read: returned to the pool when the instance is dropped.
    _slot: OwnedSemaphorePermit,
}

/// One stream's decoder inside its own component instance. Dropping it drops the
/// instance, then frees its slot; a trap poisons only this stream.
pub struct ComponentStream {
    provider: Provider,
    store: Store<CallState>,
    instance: ComponentInstance,
    decoder: Decoder,
    _slot: OwnedSemaphorePermit,
}

/// Which resource decodes the stream.
enum Decoder {
    /// `chat.stream-decoder`: neutral deltas only.
    Neutral { chat: ChatExports, resource: ResourceAny },
    /// `native.native-stream` (0.7.0): the provider's own pieces in place.
    Native { exports: NativeStreamExports, typed: Typed, resource: ResourceAny },
}

impl ComponentStream {
    pub(super) fn new(provider: Provider, held: CallInstance, chat: ChatExports, decoder: ResourceAny) -> Self {
        let CallInstance { store, instance, _slot } = held;
        Self { provider, store, instance, decoder: Decoder::Neutral { chat, resource: decoder }, _slot }
    }

    pub(super) fn native(
        provider: Provider,
        held: CallInstance,
        exports: NativeStreamExports,
        typed: Typed,
        resource: ResourceAny,
    ) -> Self {
        let CallInstance { store, instance, _slot } = held;
        Self { provider, store, instance, decoder: Decoder::Native { exports, typed, resource }, _slot }
    }
}

impl std::fmt::Debug for ComponentStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ComponentStream").field("provider", &self.provider).finish_non_exhaustive()
    }
}

impl ComponentStream {
    /// One framed event in, the deltas it completes out (a native stream's own
    /// pieces left out: [`Self::feed_pieces`] keeps them).
    pub async fn feed(&mut self, event: &StreamEvent) -> Result<Vec<StreamDelta>, PluginError> {
        Ok(neutral(self.feed_pieces(event).await?))
    }

    /// The transport ended cleanly: whatever the decoder held back (its
    /// deltas; see [`Self::feed`]).
    pub async fn finish(&mut self) -> Result<Vec<StreamDelta>, PluginError> {
        Ok(neutral(self.finish_pieces().await?))
    }

    /// One framed event in, the pieces it completes out (every one neutral
    /// from a `chat.stream-decoder`).
    pub(crate) async fn feed_pieces(&mut self, event: &StreamEvent) -> Result<Vec<NativeDelta>, PluginError> {
        refuel(&mut self.store, &self.provider.component.engine);
        match &self.decoder {
            Decoder::Neutral { chat, resource } => {
                let during = "stream-decoder.feed";
                let feed =
                    chat.stream_feed(&mut self.store, &self.instance).map_err(|e| self.provider.fault(during, &e))?;
                let (result,) = feed
                    .call_async(&mut self.store, (*resource, event))
                    .await
                    .map_err(|e| self.provider.fault(during, &e))?;
                let deltas = result.map_err(|error| self.provider.codec(error))?;
                Ok(deltas.into_iter().map(NativeDelta::Neutral).collect())
            }
            Decoder::Native { exports, typed, resource } => {
                let during = "native-stream.feed";
                let feed = exports
                    .feed(*typed, &mut self.store, &self.instance)
                    .map_err(|e| self.provider.fault(during, &e))?;
                let (result,) = feed
                    .call_async(&mut self.store, (*resource, event))
                    .await
                    .map_err(|e| self.provider.fault(during, &e))?;
                self.checked(during, result)
            }
        }
    }

    /// The transport ended cleanly: whatever the decoder held back.
    pub(crate) async fn finish_pieces(&mut self) -> Result<Vec<NativeDelta>, PluginError> {
        refuel(&mut self.store, &self.provider.component.engine);
        match &self.decoder {
            Decoder::Neutral { chat, resource } => {
                let during = "stream-decoder.finish";
                let finish =
                    chat.stream_finish(&mut self.store, &self.instance).map_err(|e| self.provider.fault(during, &e))?;
                let (result,) = finish
                    .call_async(&mut self.store, (*resource,))
                    .await
                    .map_err(|e| self.provider.fault(during, &e))?;
                let deltas = result.map_err(|error| self.provider.codec(error))?;
                Ok(deltas.into_iter().map(NativeDelta::Neutral).collect())
            }
            Decoder::Native { exports, typed, resource } => {
                let during = "native-stream.finish";
                let finish = exports
                    .finish(*typed, &mut self.store, &self.instance)
                    .map_err(|e| self.provider.fault(during, &e))?;
                let (result,) = finish
                    .call_async(&mut self.store, (*resource,))
                    .await
                    .map_err(|e| self.provider.fault(during, &e))?;
                self.checked(during, result)
            }
        }
    }

    /// A native stream's pieces, each own one checked: a JSON object of at
    /// most [`MAX_OWN_PIECE`] bytes, else the component broke the world's
    /// contract (a fault: the stream fails, nothing of the piece is written).
    fn checked(
        &self,
        during: &str,
        result: Result<Vec<NativeDelta>, CodecError>,
    ) -> Result<Vec<NativeDelta>, PluginError> {
        let pieces = result.map_err(|error| self.provider.codec(error))?;
        for piece in &pieces {
            if let Some(problem) = own_piece_problem(piece) {
                let reason = format!("broke the world's contract in `{during}`: {problem}");
                tracing::error!(provider = %self.provider.info.key, component = %self.provider.component.source, %reason, "provider component fault");
                return Err(PluginError::Fault { provider: self.provider.info.key.clone(), reason });
            }
        }
        Ok(pieces)
    }
}

/// The neutral deltas among `pieces`.
fn neutral(pieces: Vec<NativeDelta>) -> Vec<StreamDelta> {
    pieces
        .into_iter()
        .filter_map(|piece| match piece {
            NativeDelta::Neutral(delta) => Some(delta),
            _ => None,
        })
        .collect()
}

/// What is wrong with one own piece of a native stream, if anything.
pub(crate) fn own_piece_problem(piece: &NativeDelta) -> Option<String> {
    let (what, json) = match piece {
        NativeDelta::Neutral(_) => return None,
        NativeDelta::Block(json) => ("a block", json),
        NativeDelta::TextStart(json) => ("a text start", json),
        NativeDelta::Citation(json) => ("a citation", json),
        NativeDelta::Usage(json) => ("an own usage", json),
    };
    if json.len() > MAX_OWN_PIECE {
        return Some(format!("{what} of {} bytes (at most {MAX_OWN_PIECE})", json.len()));
    }
    match serde_json::from_str::<serde_json::Value>(json) {
        Ok(serde_json::Value::Object(_)) => None,
        Ok(_) | Err(_) => Some(format!("{what} that is not a JSON object")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_own_piece_must_be_a_bounded_json_object() {
        assert_eq!(own_piece_problem(&NativeDelta::Block(r#"{"type":"x"}"#.into())), None);
        let not_json = own_piece_problem(&NativeDelta::Block("not json".into()));
        assert_eq!(not_json.as_deref(), Some("a block that is not a JSON object"));
        let array = own_piece_problem(&NativeDelta::Usage("[1]".into()));
        assert_eq!(array.as_deref(), Some("an own usage that is not a JSON object"));
        let huge = format!(r#"{{"t":"{}"}}"#, "x".repeat(MAX_OWN_PIECE));
        assert!(own_piece_problem(&NativeDelta::Citation(huge)).is_some_and(|problem| problem.contains("bytes")));
        assert_eq!(own_piece_problem(&NativeDelta::Neutral(crate::types::StreamDelta::Text("t".into()))), None);
    }

    #[test]
    fn a_components_text_is_scrubbed_and_a_pool_wait_kept() {
        let scrub = |text: &str| text.replace("sk-1", "<credential>");
        let codec = PluginError::Codec { provider: "p".into(), error: CodecError::Malformed("body: sk-1".into()) };
        assert_eq!(codec.scrubbed(scrub).to_string(), "provider `p`: cannot read the response: body: <credential>");
        let unsupported = PluginError::Codec { provider: "p".into(), error: CodecError::Unsupported("sk-1".into()) };
        assert!(unsupported.scrubbed(scrub).to_string().ends_with("cannot encode the request: <credential>"));
        let fault = PluginError::Fault { provider: "p".into(), reason: "trapped: sk-1".into() };
        assert_eq!(fault.scrubbed(scrub).to_string(), "provider `p` failed: trapped: <credential>");
        let busy = PluginError::NoFreeInstance { provider: "p".into(), waited: Duration::from_secs(1) };
        assert!(matches!(busy.scrubbed(scrub), PluginError::NoFreeInstance { .. }));
    }
}
