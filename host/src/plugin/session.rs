//! One attempt's component instance: the instance an attempt encodes its
//! request in is the one that decodes (or classifies) its response.
//!
//! Every attempt still gets a fresh `Store` and instance of its own, so
//! nothing passes between two attempts, two calls or two callers; what an
//! attempt no longer does is instantiate twice. Instantiating and tearing an
//! instance down was the larger part of what a component cost a call (two
//! each per call before; see `benches/component_round_trip.rs`).
//!
//! Holding the instance while the upstream works would hold its pool slot
//! and its memory for as long as a model takes to answer, so an attempt holds
//! it only for [`HOLD_WHILE_WAITING`], only when it is small
//! ([`KEPT_MEMORY_MAX`]), and only while fewer than the engine's bound are
//! held (see `engine::HELD_WHILE_WAITING`): otherwise the decode gets a
//! fresh instance, as every attempt's did before.
//!
//! Each function call gets a fresh CPU budget (as each event of a stream
//! does). A call that traps or runs out of a limit leaves the instance in a
//! state nothing may enter again: it is dropped, and a later call of the same
//! session gets a fresh one.

use std::future::Future;
use std::time::Duration;

use tokio::sync::OwnedSemaphorePermit;
use tokio::time::Instant;
use wasmtime::Store;
use wasmtime::component::{ComponentNamedList, ComponentType, Instance as ComponentInstance, Lift, Lower, TypedFunc};

use super::convert::Records;
use super::provider::{CallInstance, ComponentStream, PluginError, Provider};
use super::sandbox::{CallState, refuel};
use super::world::Operation;
use crate::types::{CallParams, DecodedResponse, ErrorClass, HttpRequest, HttpResponse, PreparedConversation};
use crate::wit::v0_4;

/// Longest an attempt keeps its instance while its request is upstream. An
/// answer within it is decoded in the instance that encoded the request; a
/// later one in a fresh instance, whose cost is then small beside the wait.
/// Bounds what slow upstreams make the gateway hold: one slot and the
/// instance's memory per call, for this long at most.
pub const HOLD_WHILE_WAITING: Duration = Duration::from_millis(50);

/// The most linear memory an instance kept while an upstream works may have.
/// A first-party Rust component's instance has 192 KiB; an interpreter's
/// (componentize-py: 12.3 MiB) is given back and decodes in a fresh one, so
/// kept instances stay a small, bounded part of the memory (32 MiB at most).
pub const KEPT_MEMORY_MAX: usize = 1 << 20;

/// A provider's instance for one attempt, made on its first function call.
pub struct Session<'p> {
    provider: &'p Provider,
    held: Option<CallInstance>,
    /// Leave to keep `held` while the upstream works (see [`Self::while_waiting`]).
    waiting: Option<OwnedSemaphorePermit>,
}

impl std::fmt::Debug for Session<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session").field("provider", &self.provider).field("held", &self.held.is_some()).finish()
    }
}

impl<'p> Session<'p> {
    pub(super) fn new(provider: &'p Provider) -> Self {
        Self { provider, held: None, waiting: None }
    }

    /// The provider whose component this session instantiates.
    pub(super) fn provider(&self) -> &'p Provider {
        self.provider
    }

    /// Whether an instance is held now (for tests).
    pub fn holds_instance(&self) -> bool {
        self.held.is_some()
    }

    /// Gives the instance and its slot back to the pool; the next call makes
    /// a fresh one.
    pub fn release(&mut self) {
        self.held = None;
        self.waiting = None;
    }

    /// Runs `work` (an upstream exchange), keeping a small instance for the
    /// first [`HOLD_WHILE_WAITING`] of it only, and only while few enough
    /// instances of the engine are kept (its memory stays bounded under any
    /// load); any other is given back before the wait.
    pub async fn while_waiting<T>(&mut self, work: impl Future<Output = T>) -> T {
        let small = self.held.as_ref().is_some_and(|held| held.store.data().memory_bytes() <= KEPT_MEMORY_MAX);
        if !small {
            self.release();
            return work.await;
        }
        self.waiting = self.provider.component().slots.hold();
        if self.waiting.is_none() {
            self.release();
            return work.await;
        }
        tokio::pin!(work);
        tokio::select! {
            done = &mut work => done,
            () = tokio::time::sleep(HOLD_WHILE_WAITING) => {
                self.release();
                work.await
            }
        }
    }

    /// The HTTP request for `conversation`, without credentials. The wait for
    /// a free instance ends at `deadline` if that comes before
    /// [`super::provider::SLOT_WAIT`].
    pub async fn encode(
        &mut self,
        conversation: &PreparedConversation,
        params: &CallParams,
        deadline: Option<Instant>,
    ) -> Result<HttpRequest, PluginError> {
        let chat = self.provider.chat()?;
        // The result type caps every string and list before it is copied: a
        // request no upstream would take is the component's fault, caught
        // before anything is sent or even copied out of the guest.
        let key = self.provider.key();
        let result = match chat.records() {
            Records::Current => {
                let encode = |store: &mut Store<CallState>, instance: &ComponentInstance| chat.encode(store, instance);
                self.call("chat.encode", deadline, encode, (key, conversation, params)).await?
            }
            Records::V0_4 => {
                // A 0.1.0–0.4.0 component takes 0.4.0's record (see `super::convert`).
                let legacy = v0_4::CallParams::from(params);
                let encode =
                    |store: &mut Store<CallState>, instance: &ComponentInstance| chat.encode_v0_4(store, instance);
                self.call("chat.encode", deadline, encode, (key, conversation, &legacy)).await?
            }
        };
        result.map(HttpRequest::from).map_err(|error| self.provider.codec(error))
    }

    /// Decodes a response. The answer is already paid for, so a fresh instance
    /// is waited for the whole [`super::provider::SLOT_WAIT`], whatever the
    /// caller's deadline.
    pub async fn decode(&mut self, response: &HttpResponse) -> Result<DecodedResponse, PluginError> {
        let chat = self.provider.chat()?;
        let key = self.provider.key();
        let result =
            self.call("chat.decode", None, |store, instance| chat.decode(store, instance), (key, response)).await?;
        result.map_err(|error| self.provider.codec(error))
    }

    /// What a failed (non-2xx) chat response means.
    pub async fn classify(&mut self, response: &HttpResponse) -> Result<ErrorClass, PluginError> {
        let chat = self.provider.chat()?;
        let key = self.provider.key();
        self.call("chat.classify", None, |store, instance| chat.classify(store, instance), (key, response)).await
    }

    /// A stream decoder in this session's instance (a fresh one when none is
    /// held), held for the stream's life; `deadline` bounds the wait for one.
    pub async fn into_stream(mut self, deadline: Option<Instant>) -> Result<ComponentStream, PluginError> {
        let provider = self.provider;
        let chat = provider.chat()?.clone();
        let mut held = self.ready(deadline).await?;
        let during = "chat.stream-decoder";
        let constructor = chat.stream_new(&mut held.store, &held.instance).map_err(|e| provider.fault(during, &e))?;
        let (decoder,) =
            constructor.call_async(&mut held.store, (provider.key(),)).await.map_err(|e| provider.fault(during, &e))?;
        Ok(ComponentStream::new(provider.clone(), held, chat, decoder))
    }

    /// A native stream decoder (`native.native-stream`, 0.7.0) in this
    /// session's instance, held like [`Self::into_stream`]'s: for a stream
    /// whose provider [`Provider::streams_native`]. A component whose `open`
    /// now gives none after it gave one at load broke the world's contract.
    pub async fn into_native_stream(mut self, deadline: Option<Instant>) -> Result<ComponentStream, PluginError> {
        let provider = self.provider;
        let during = "native.native-stream.open";
        let native = provider.component().exports.native.as_ref().ok_or_else(|| provider.missing(Operation::Native))?;
        let stream = native.stream().ok_or_else(|| provider.missing_function(Operation::Native, "native-stream"))?;
        let typed = native.typed();
        let mut held = self.ready(deadline).await?;
        let open = stream.open(typed, &mut held.store, &held.instance).map_err(|e| provider.fault(during, &e))?;
        let (opened,) =
            open.call_async(&mut held.store, (provider.key(),)).await.map_err(|e| provider.fault(during, &e))?;
        let resource = opened.ok_or_else(|| PluginError::Fault {
            provider: provider.key().to_owned(),
            reason: format!("`{during}` opened no stream for a key it opened one for at load"),
        })?;
        Ok(ComponentStream::native(provider.clone(), held, stream, typed, resource))
    }

    /// The held instance, taken out of the session with a fresh CPU budget,
    /// or a fresh instance (its slot waited for until `deadline` or
    /// [`super::provider::SLOT_WAIT`]).
    async fn ready(&mut self, deadline: Option<Instant>) -> Result<CallInstance, PluginError> {
        match self.held.take() {
            Some(mut held) => {
                refuel(&mut held.store, &self.provider.component().engine);
                Ok(held)
            }
            None => self.provider.instantiate(deadline).await,
        }
    }

    /// One function of the session's instance (see [`Self::ready`]): looks the
    /// function up with its type (`typed`, one of [`super::exports`]'s) and
    /// calls it. The instance is back in the session only once the call
    /// returned: a fault, or a call dropped midway, drops it.
    pub(super) async fn call<P, R>(
        &mut self,
        during: &str,
        deadline: Option<Instant>,
        typed: impl FnOnce(&mut Store<CallState>, &ComponentInstance) -> wasmtime::Result<TypedFunc<P, (R,)>>,
        params: P,
    ) -> Result<R, PluginError>
    where
        P: ComponentNamedList + Lower + Send + Sync,
        R: ComponentType + Lift + Send + Sync + 'static,
    {
        let mut held = self.ready(deadline).await?;
        let called = match typed(&mut held.store, &held.instance) {
            Ok(func) => func.call_async(&mut held.store, params).await,
            Err(error) => Err(error),
        };
        match called {
            Ok((result,)) => {
                self.held = Some(held);
                Ok(result)
            }
            Err(error) => {
                // The instance, then its slot, go back before the leave to keep it.
                drop(held);
                self.release();
                Err(self.provider.fault(during, &error))
            }
        }
    }
}
