//! `weir check FILE.wasm`: validate a component against the world this host speaks,
//! then run the conformance kit on it — through the same engine, linker and limits
//! that serve calls, so a component that passes here behaves the same in `serve`.
//! The kit runs the checks of each operation the component exports (chat,
//! embeddings, rerank), and only those.
//!
//! A stream is checked as `serve` reads one: its body framed by the host's own
//! framing (SSE, or AWS event-stream messages written as bytes and read back),
//! each event fed to a stream decoder in its own instance, then `finish`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use aws_smithy_eventstream::frame::write_message_to;
use aws_smithy_types::event_stream::{Header, HeaderValue, Message};
use tokio::time::Instant;
use weir_conformance::fixture::{
    Classified, Conversation, Decoded, DecodedEmbeddings, DecodedNative, DecodedRanking, Delta, EmbedParams,
    EventFrame, NativeFields, NativeSupportSummary, Params, ProviderSummary, RerankParams, Response,
    StreamEvent as KitEvent, StreamInput, WireRequest,
};
use weir_conformance::stream::{self, StreamRun};
use weir_conformance::{Answer, Fault, FixtureError, NativeLevel, Operation as KitOperation, Report, Subject, dialect};

use crate::catalog::{Capability, CapabilitySet, declared_capabilities};
use crate::catalog::{ModelEntry, Reasoning, RoleKind};
use crate::plugin::{
    ComponentSource, ComponentStream, LoadedComponent, Operation, PluginEngine, PluginError, Provider, component_digest,
};
use crate::reach::Trust;
use crate::stream::framing::FrameDecoder;
use crate::types::{Capabilities, ErrorClass, ProviderInfo, StreamFraming};

weir_conformance::boundary_conversions!(crate::wit::records);

/// Why a check could not run at all (as opposed to checks that failed).
#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    /// (Neither this nor `Fixtures` names its error as a source: the message
    /// already holds it, and a chain would print it twice.)
    #[error("cannot read {path}: {error}")]
    Read { path: PathBuf, error: std::io::Error },
    /// Not a component this host can load: garbage bytes, another world or version,
    /// an import this host does not grant, a `describe` that fails.
    #[error("{path} is rejected: {reason}")]
    Rejected { path: PathBuf, reason: String },
    #[error("fixtures: {0}")]
    Fixtures(FixtureError),
    #[error("cannot start the component engine: {0:#}")]
    Engine(anyhow::Error),
}

/// What `weir check` found: the component's identity and the kit's report
/// (whose `operations` are those the component exports).
#[derive(Debug)]
pub struct CheckOutcome {
    pub digest: String,
    pub world_version: &'static str,
    pub report: Report,
}

/// Loads `path` as a provider component and runs the generic checks of each
/// operation it exports plus the cases of every folder in `fixtures`, in order;
/// then warns of each key that declares `thinking` no entry of `models` (the
/// catalog it would serve) could reach ([`thinking_reachable`]).
pub async fn check_component(
    path: &Path,
    fixtures: &[PathBuf],
    cache_dir: Option<PathBuf>,
    models: &[ModelEntry],
) -> Result<CheckOutcome, CheckError> {
    let mut cases = Vec::new();
    for dir in fixtures {
        cases.extend(dialect::load_dir(dir).map_err(CheckError::Fixtures)?);
    }
    let bytes = std::fs::read(path).map_err(|error| CheckError::Read { path: path.to_owned(), error })?;
    let engine = PluginEngine::new(cache_dir).map_err(CheckError::Engine)?;
    let digest = component_digest(&bytes);
    let loader = Loader { engine, path: path.to_owned(), bytes, digest: digest.clone() };
    let component = loader.load().map_err(|reason| CheckError::Rejected { path: path.to_owned(), reason })?;
    let world_version = component.world_version;
    let subject = HostSubject { providers: providers_of(&component), component, loader };
    let mut report = weir_conformance::run(&subject, cases).await;
    warn_of_unreachable_thinking(&subject.component.providers, models, &mut report);
    Ok(CheckOutcome { digest, world_version, report })
}

/// Whether a chat entry of `models` could reach the `thinking` that key `key`
/// declares (`component`'s flags). The host puts a thinking budget in
/// `call-params` only for an entry with `reasoning = "thinking"` (the caller's
/// explicit budget, else the one its `thinking_budget` books for the call's
/// effort; see `call::gates`), and refuses a caller's explicit budget unless
/// the entry's capabilities, narrowed to the component's, hold `thinking`
/// (`call::policy`). So an entry reaches it when it names `key` as its
/// provider, is a chat entry, says `reasoning = "thinking"`, and declares
/// `thinking` or no capabilities at all. (`reasoning = "effort"` sends an
/// effort, never a budget.)
pub fn thinking_reachable(models: &[ModelEntry], key: &str, component: Capabilities) -> bool {
    models.iter().any(|entry| {
        let declared = entry.capabilities.as_ref().map(|declared| CapabilitySet::of(declared.iter().copied()));
        let has = declared_capabilities(declared, entry.native_tools.unwrap_or(true))
            .intersection(CapabilitySet::carried_by(component));
        entry.provider == key
            && entry.kind == RoleKind::Chat
            && entry.reasoning == Some(Reasoning::Thinking)
            && has.contains(Capability::Thinking)
    })
}

fn warn_of_unreachable_thinking(providers: &[ProviderInfo], models: &[ModelEntry], report: &mut Report) {
    for info in providers {
        if info.capabilities.contains(Capabilities::THINKING)
            && !thinking_reachable(models, &info.key, info.capabilities)
        {
            report.warn(
                &info.key,
                "declares `thinking`, but no catalog entry could reach it: a thinking budget reaches the component \
                 only through a chat entry with `provider` this key, `reasoning = \"thinking\"` (its \
                 `thinking_budget` books one per effort) and `thinking` among its capabilities (or none declared)",
            );
        }
    }
}

/// Everything needed to load the component again: the host keeps a component's
/// load-time answers (`max-batch`, `serves`, ...) with the loaded component, so
/// a question asked afresh needs a fresh load, as a reload makes.
struct Loader {
    engine: PluginEngine,
    path: PathBuf,
    bytes: Vec<u8>,
    digest: String,
}

impl Loader {
    fn load(&self) -> Result<Arc<LoadedComponent>, String> {
        let source = ComponentSource::File(self.path.clone());
        self.engine.load(source, &self.bytes, self.digest.clone()).map(Arc::new)
    }
}

/// Each key the component describes, bound to it as `serve` binds it.
fn providers_of(component: &Arc<LoadedComponent>) -> HashMap<String, Provider> {
    component
        .providers
        .iter()
        .map(|info| (info.key.clone(), Provider::new(info.clone(), Arc::clone(component), Trust::Untrusted)))
        .collect()
}

/// The kit's view of a loaded component: every call is a fresh instance, as in `serve`.
struct HostSubject {
    component: Arc<LoadedComponent>,
    providers: HashMap<String, Provider>,
    loader: Loader,
}

impl HostSubject {
    fn provider(&self, key: &str) -> Result<&Provider, Fault> {
        self.providers.get(key).ok_or_else(|| Fault(format!("the component does not serve `{key}`")))
    }

    /// `key` of a freshly loaded copy of the component, whose answer cache is empty.
    fn reloaded(&self, key: &str) -> Result<Provider, Fault> {
        let component = self.loader.load().map_err(|reason| Fault(format!("cannot load it again: {reason}")))?;
        let info: &ProviderInfo = component
            .providers
            .iter()
            .find(|info| info.key == key)
            .ok_or_else(|| Fault(format!("loaded again, it no longer describes `{key}`")))?;
        Ok(Provider::new(info.clone(), Arc::clone(&component), Trust::Untrusted))
    }
}

/// A fault ends the call; a codec error is the component's answer.
fn answer<T, U>(result: Result<T, PluginError>, convert: impl FnOnce(T) -> U) -> Answer<U> {
    match result {
        Ok(value) => Ok(Ok(convert(value))),
        Err(PluginError::Codec { error, .. }) => Ok(Err(boundary::codec_failure(error))),
        Err(error) => Err(fault(error)),
    }
}

/// A call that did not return an answer of the component's own.
fn fault(error: PluginError) -> Fault {
    match error {
        PluginError::Fault { reason, .. } => Fault(reason),
        // Not the component's doing, but the check cannot go on without an instance.
        error @ (PluginError::NoFreeInstance { .. } | PluginError::Codec { .. }) => Fault(error.to_string()),
    }
}

/// The host's operation for the kit's.
fn operation(operation: KitOperation) -> Operation {
    match operation {
        KitOperation::Chat => Operation::Chat,
        KitOperation::Embeddings => Operation::Embeddings,
        KitOperation::Rerank => Operation::Rerank,
    }
}

fn classified(result: Result<ErrorClass, PluginError>) -> Result<Classified, Fault> {
    result.map(boundary::classified).map_err(fault)
}

/// The events the host's framing makes of `input`, pushed chunk by chunk (an
/// event-stream message is one chunk), then the end of the body.
fn framed(input: &StreamInput) -> Result<Vec<KitEvent>, String> {
    let (framing, chunks) = match input {
        StreamInput::Sse(chunks) => (StreamFraming::Sse, chunks.clone()),
        StreamInput::EventStream(frames) => {
            (StreamFraming::AwsEventStream, frames.iter().map(message_bytes).collect::<Result<_, _>>()?)
        }
    };
    let mut framer = FrameDecoder::new(framing);
    let mut events = Vec::new();
    for chunk in chunks {
        events.extend(framer.push(&chunk).map_err(|error| error.to_string())?);
    }
    events.extend(framer.finish().map_err(|error| error.to_string())?);
    Ok(events
        .into_iter()
        .map(|event| KitEvent { name: event.name, headers: event.headers, data: event.data })
        .collect())
}

/// One event-stream message as it travels: prelude, string headers, payload, CRCs.
fn message_bytes(frame: &EventFrame) -> Result<Vec<u8>, String> {
    let headers = frame
        .headers
        .iter()
        .map(|(name, value)| Header::new(name.clone(), HeaderValue::String(value.clone().into())))
        .collect();
    let message = Message::new_from_parts(headers, frame.payload.clone());
    let mut bytes = Vec::new();
    write_message_to(&message, &mut bytes).map_err(|error| format!("cannot write an event-stream message: {error}"))?;
    Ok(bytes)
}

/// A component's stream decoder, as the kit drives one.
struct HostStream(ComponentStream);

impl stream::Decoder for HostStream {
    async fn feed(&mut self, event: &KitEvent) -> Answer<Vec<Delta>> {
        answer(self.0.feed(&boundary::stream_event(event)).await, boundary::deltas)
    }

    async fn finish(&mut self) -> Answer<Vec<Delta>> {
        answer(self.0.finish().await, boundary::deltas)
    }
}

/// No deadline of its own: an encode waits for an instance as long as a call may.
const NO_DEADLINE: Option<Instant> = None;

impl Subject for HostSubject {
    async fn providers(&self) -> Result<Vec<ProviderSummary>, Fault> {
        // As the component described itself, duplicates and all: the kit checks them.
        Ok(self.component.providers.iter().map(boundary::summary).collect())
    }

    fn operations(&self) -> Vec<KitOperation> {
        KitOperation::ALL.into_iter().filter(|kit| self.component.exports(operation(*kit))).collect()
    }

    async fn serves(&self, kit: KitOperation, provider: &str, wire_id: &str) -> Result<bool, Fault> {
        // Load-time work, synchronous (its own minimal executor): it blocks this
        // worker, which runs nothing but the check.
        self.provider(provider)?.serves_operation(operation(kit), wire_id).map_err(fault)
    }

    async fn classify(&self, kit: KitOperation, provider: &str, response: &Response) -> Result<Classified, Fault> {
        let (provider, response) = (self.provider(provider)?, boundary::response(response));
        match kit {
            KitOperation::Chat => classified(provider.classify(&response).await),
            KitOperation::Embeddings => classified(provider.session().embed_classify(&response).await),
            KitOperation::Rerank => classified(provider.session().rerank_classify(&response).await),
        }
    }

    async fn encode(&self, provider: &str, conversation: &Conversation, params: &Params) -> Answer<WireRequest> {
        let provider = self.provider(provider)?;
        let result = provider.encode(&boundary::conversation(conversation), &boundary::params(params)).await;
        answer(result, boundary::request)
    }

    async fn decode(&self, provider: &str, response: &Response) -> Answer<Decoded> {
        let result = self.provider(provider)?.decode(&boundary::response(response)).await;
        answer(result, boundary::decoded)
    }

    async fn stream(&self, provider: &str, input: &StreamInput) -> Result<StreamRun, Fault> {
        let events = framed(input).map_err(|reason| Fault(format!("the host cannot frame the stream: {reason}")))?;
        let decoder = self.provider(provider)?.open_stream().await.map_err(fault)?;
        stream::drive(&mut HostStream(decoder), &events).await
    }

    /// Asked of a fresh load each time (see [`Loader`]), so a second question
    /// reaches the component rather than the first answer. A 0 comes back as the
    /// host's fault for it, which names `max-batch 0`.
    async fn max_batch(&self, provider: &str, wire_id: &str) -> Result<u32, Fault> {
        self.reloaded(provider)?.max_batch(wire_id).map_err(fault)
    }

    async fn needs_dimensions(&self, provider: &str, wire_id: &str) -> Result<bool, Fault> {
        self.provider(provider)?.needs_dimensions(wire_id).map_err(fault)
    }

    async fn embed_encode(&self, provider: &str, inputs: &[String], params: &EmbedParams) -> Answer<WireRequest> {
        let provider = self.provider(provider)?;
        let result = provider.session().embed_encode(inputs, &boundary::embed_params(params), NO_DEADLINE).await;
        answer(result, boundary::request)
    }

    async fn embed_decode(&self, provider: &str, response: &Response) -> Answer<DecodedEmbeddings> {
        let result = self.provider(provider)?.session().embed_decode(&boundary::response(response)).await;
        answer(result, boundary::embeddings)
    }

    async fn rerank_encode(
        &self,
        provider: &str,
        query: &str,
        documents: &[String],
        params: &RerankParams,
    ) -> Answer<WireRequest> {
        let provider = self.provider(provider)?;
        let result =
            provider.session().rerank_encode(query, documents, &boundary::rerank_params(params), NO_DEADLINE).await;
        answer(result, boundary::request)
    }

    fn native_level(&self) -> NativeLevel {
        match self.component.exports(Operation::Native) {
            false => NativeLevel::None,
            true if self.providers.values().any(Provider::decodes_native) => NativeLevel::Answers,
            true => NativeLevel::Fields,
        }
    }

    async fn native_support(&self, provider: &str, wire_id: &str) -> Result<Option<NativeSupportSummary>, Fault> {
        let support = self.provider(provider)?.native_support(wire_id).map_err(fault)?;
        Ok(support.map(|support| boundary::native_support((*support).clone())))
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
        let result =
            self.provider(provider)?.session().encode_native(&conversation, &params, &native, NO_DEADLINE).await;
        answer(result, boundary::request)
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
        let result =
            self.provider(provider)?.session().count_tokens_encode(&conversation, &params, &native, NO_DEADLINE).await;
        answer(result, boundary::request)
    }

    async fn count_tokens_decode(&self, provider: &str, response: &Response) -> Answer<u64> {
        let result = self.provider(provider)?.session().count_tokens_decode(&boundary::response(response)).await;
        answer(result, |count| count)
    }

    async fn decode_native(&self, provider: &str, response: &Response) -> Answer<DecodedNative> {
        let result = self.provider(provider)?.session().decode_native(&boundary::response(response)).await;
        answer(result, boundary::native_answer)
    }

    async fn rerank_decode(&self, provider: &str, response: &Response) -> Answer<DecodedRanking> {
        let result = self.provider(provider)?.session().rerank_decode(&boundary::response(response)).await;
        answer(result, boundary::ranking)
    }
}

#[cfg(test)]
mod tests {
    use weir_conformance::sse;
    use weir_conformance::stream::samples::DIALECTS;

    use super::*;

    fn models(toml: &str) -> Vec<ModelEntry> {
        crate::Config::from_toml(toml, "t.toml").unwrap().models
    }

    const ENTRY: &str = "[[model]]\nid = \"m\"\nprovider = \"k\"\nmax_output_tokens = 100\ncontext_window = 1000\n";

    /// An entry reaches a key's `thinking` only with the key as its provider,
    /// `reasoning = "thinking"`, and `thinking` among its capabilities (or
    /// none declared), narrowed to what the component carries.
    #[test]
    fn thinking_is_reachable_only_through_a_thinking_entry_of_the_key() {
        let thinking = Capabilities::THINKING | Capabilities::STREAMING;
        let reaches =
            |extra: &str, key: &str, component| thinking_reachable(&models(&format!("{ENTRY}{extra}")), key, component);
        assert!(reaches("reasoning = \"thinking\"\n", "k", thinking));
        assert!(reaches("reasoning = \"thinking\"\ncapabilities = [\"thinking\"]\n", "k", thinking));
        assert!(!reaches("reasoning = \"thinking\"\n", "other", thinking), "another key's entry");
        assert!(!reaches("reasoning = \"effort\"\n", "k", thinking), "an effort entry sends no budget");
        assert!(!reaches("", "k", thinking), "an entry without `reasoning` sends none");
        assert!(
            !reaches("reasoning = \"thinking\"\ncapabilities = [\"streaming\"]\n", "k", thinking),
            "a declaration without `thinking` refuses the caller's budget"
        );
        assert!(!reaches("reasoning = \"thinking\"\n", "k", Capabilities::STREAMING), "the component carries none");
        assert!(!thinking_reachable(&[], "k", thinking), "an empty catalog reaches nothing");
    }

    #[test]
    fn a_key_declaring_thinking_no_entry_reaches_is_warned_of_and_passes() {
        let info = |key: &str, capabilities| ProviderInfo {
            key: key.to_owned(),
            description: String::new(),
            default_endpoint: None,
            credential: crate::types::CredentialShape::None,
            capabilities,
            stream_framing: StreamFraming::Sse,
        };
        let providers = [
            info("k", Capabilities::THINKING),
            info("lone", Capabilities::THINKING),
            info("plain", Capabilities::empty()),
        ];
        let mut report = Report::default();
        report.record("k", "a check", Ok(()));
        warn_of_unreachable_thinking(&providers, &models(&format!("{ENTRY}reasoning = \"thinking\"\n")), &mut report);
        assert_eq!(report.warnings.len(), 1, "{report}");
        assert_eq!(report.warnings[0].provider, "lone");
        assert!(report.warnings[0].message.contains("reasoning = \"thinking\""), "{report}");
        assert!(report.passed(), "a warning fails nothing");
        let printed = report.to_string();
        assert!(printed.contains("warn  lone: declares `thinking`, but no catalog entry could reach it"), "{printed}");
        assert!(printed.ends_with("1 checks, 1 passed, 0 failed"), "{printed}");
    }

    /// What the native adapter feeds a decoder: the kit's own framing.
    fn kit_events(input: &StreamInput) -> Vec<KitEvent> {
        match input {
            StreamInput::Sse(chunks) => sse::frame(&chunks.concat()),
            StreamInput::EventStream(frames) => frames.iter().map(EventFrame::to_event).collect(),
        }
    }

    /// `cargo test` runs the kit natively with its own framing, `weir check` with
    /// the host's: both feed a decoder the same events for every built-in sample.
    #[test]
    fn the_kits_framing_gives_the_hosts_events_for_every_built_in_sample() {
        for dialect in &DIALECTS {
            let sample = dialect.sample();
            for input in [sample.text.input(), sample.text.cut_short(), sample.tool_call.input(), sample.error.input()]
            {
                let host = framed(&input).unwrap();
                // Two at least: Gemini sends a whole tool call in one chunk, then its end.
                assert!(host.len() >= 2, "{}: {host:?}", dialect.name);
                assert_eq!(host, kit_events(&input), "{}", dialect.name);
            }
        }
    }

    /// The lines servers really send, cut at every byte: the host reads chunks as
    /// they arrive, the kit the whole body, and they agree.
    #[test]
    fn the_kits_framing_agrees_with_the_hosts_at_every_split() {
        let body: &[u8] =
            b"\xEF\xBB\xBF: keep-alive\r\nevent: message_start\r\ndata: {\"a\":\r\ndata:1}\r\nid: 7\r\n\r\n\
            data: {\"x\":1}\nerror: {\"code\":400}\n{\"error\":{\"message\":\"m\"}}\n\nevent: ping\n\n\rdata: [DONE]";
        let whole = sse::frame(body);
        assert_eq!(whole.len(), 6, "{whole:?}");
        for cut in 0..=body.len() {
            let input = StreamInput::Sse(vec![body[..cut].to_vec(), body[cut..].to_vec()]);
            assert_eq!(framed(&input).unwrap(), whole, "cut at {cut}");
        }
    }

    #[test]
    fn an_event_stream_message_is_written_and_read_back_as_the_same_event() {
        let frame = EventFrame::exception("throttlingException", br#"{"message":"slow down"}"#.to_vec());
        let events = framed(&StreamInput::EventStream(vec![frame.clone()])).unwrap();
        assert_eq!(events, vec![frame.to_event()]);
        assert_eq!(events[0].name.as_deref(), Some("throttlingException"));
    }
}
