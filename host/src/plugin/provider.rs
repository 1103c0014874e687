//! A provider key bound to the component that serves it. Every call gets a fresh
//! `Store` and instance: nothing leaks between calls, and a component that traps
//! poisons only the instance of the call that made it trap.

use std::sync::Arc;

use super::bindings::ChatProvider as Bindings;
use super::engine::LoadedComponent;
use super::sandbox::{CallState, new_store, refuel};
use crate::reach::Trust;
use crate::types::{
    CallParams, CodecError, DecodedResponse, ErrorClass, HttpRequest, HttpResponse, PreparedConversation, ProviderInfo,
    StreamDelta, StreamEvent,
};

/// More headers than any provider's request carries by two orders of magnitude.
const MAX_REQUEST_HEADERS: usize = 64;
/// Anthropic's and Bedrock's request ceiling is 32 MB (20 MB on Bedrock's
/// Converse); no provider takes more, so a bigger encoded body is a component bug.
const MAX_REQUEST_BODY_BYTES: usize = 32 << 20;

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
        let (mut store, bindings) = self.instantiate().await?;
        let result = bindings
            .weir_provider_chat()
            .call_encode(&mut store, &self.info.key, conversation, params)
            .await
            .map_err(|e| self.fault("chat.encode", &e))?;
        let request = result.map_err(|error| self.codec(error))?;
        self.sane_size(&request)?;
        Ok(request)
    }

    /// A request no upstream would take is the component's fault, caught before
    /// anything is sent: the host never forwards an absurd size it was handed.
    fn sane_size(&self, request: &HttpRequest) -> Result<(), PluginError> {
        let absurd = if request.headers.len() > MAX_REQUEST_HEADERS {
            format!("{} headers (at most {MAX_REQUEST_HEADERS})", request.headers.len())
        } else if request.body.len() > MAX_REQUEST_BODY_BYTES {
            format!("a {} byte body (at most {MAX_REQUEST_BODY_BYTES})", request.body.len())
        } else {
            return Ok(());
        };
        let reason = format!("returned an absurd request from `chat.encode`: {absurd}");
        tracing::error!(provider = %self.info.key, component = %self.component.source, %reason, "provider component fault");
        Err(PluginError::Fault { provider: self.info.key.clone(), reason })
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
