//! What a call may use, decided once, after its target resolved and before
//! admission: nothing is reserved or sent for a request its model cannot serve.
//!
//! - **Capabilities.** A request that needs what the entry does not have — an
//!   image (`vision`), a document (`documents`), tools where the entry has
//!   neither native nor prompted tools (`tools`), a response schema where the
//!   entry declares other capabilities and not `json_schema` (a component
//!   without native structured output gets the schema in its prompt instead),
//!   an explicit thinking budget (`thinking`) — fails as
//!   `capability_mismatch`. The entry has what it declares narrowed to what its
//!   provider component carries, or, declaring nothing, its provider's (see
//!   [`crate::catalog::Capability`]). A model's name never grants anything.
//!   An image or document whose source (inline or URL) the component does not
//!   declare (WIT 0.5.0's media flags) fails the same way, under `vision` or
//!   `documents`: the host fetches no caller's URL and cannot make bytes one.
//! - **Streaming.** An entry that cannot stream is never asked to: the caller's
//!   stream is answered whole and replayed (the caller decides, see `call::run`).
//! - **Sampling.** OpenAI's reasoning families accept only their own default
//!   sampling and refuse the whole call for an explicit value, so the host omits
//!   `temperature` for them, keyed on the entry's wire id, for every provider;
//!   `fixed_temperature = true` does the same for any entry. Omitted, never
//!   rewritten: the provider owns its default. This withholds a parameter; it
//!   grants nothing. `top_p` has no field in WIT 0.1.0's call parameters, so it
//!   is never sent: absent or 1.0 is a no-op, on a fixed-sampling entry it is
//!   dropped like `temperature`, and anything else is refused.
//!
//! The check is a scan of the conversation's blocks: no allocation unless it
//! refuses.

use crate::catalog::{Capability, ModelSpec};
use crate::chat::ChatRequest;
use crate::error::WeirError;
use crate::types::{Capabilities, ContentBlock, Conversation, LeafBlock, Media, MediaSource};

/// What the policy decided for one call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Policy {
    /// Tools are in play and the entry has no native tool calling: the host
    /// describes them in the prompt (see `call::prompted_tools`).
    pub prompted_tools: bool,
    /// The request has a response schema the component cannot carry: the host
    /// describes it in the prompt (see `call::prompted_schema`).
    pub prompted_schema: bool,
    /// The entry can stream (its declaration and its provider component).
    pub streams: bool,
    /// What the record notes about the call.
    pub notes: PolicyNotes,
}

/// What the policy changed about a call, for its record: each flag is a stable
/// note name (see [`PolicyNotes::names`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct PolicyNotes {
    /// The caller's `temperature` was not sent (fixed sampling).
    pub temperature_omitted: bool,
    /// The caller's `top_p` was dropped (fixed sampling).
    pub top_p_omitted: bool,
    /// A stream was answered whole and replayed (no streaming, or prompted tools).
    pub stream_replayed_whole: bool,
    /// The response schema was described in the prompt, not sent as a field.
    pub schema_prompted: bool,
    /// A live stream whose provider runs hosted tools: their own blocks are
    /// not relayed (`hosted_tool_streams = "live"`).
    pub hosted_items_not_streamed: bool,
}

impl PolicyNotes {
    /// The notes' stable names, in a fixed order.
    pub fn names(self) -> impl Iterator<Item = &'static str> {
        [
            (self.temperature_omitted, "temperature_omitted"),
            (self.top_p_omitted, "top_p_omitted"),
            (self.stream_replayed_whole, "stream_replayed_whole"),
            (self.schema_prompted, "schema_prompted"),
            (self.hosted_items_not_streamed, "hosted_items_not_streamed"),
        ]
        .into_iter()
        .filter_map(|(noted, name)| noted.then_some(name))
    }
}

/// Decides what a call to `model` (served by a component declaring `provider`)
/// may use, or refuses it before anything is reserved or sent.
pub(super) fn check(model: &ModelSpec, provider: Capabilities, request: &ChatRequest) -> Result<Policy, WeirError> {
    let wanted = model.declared_capabilities();
    let has = model.capabilities_with(provider);
    let needs = Needs::of(&request.conversation);
    let mismatch =
        |capability, needed_for| WeirError::CapabilityMismatch { model: model.id.clone(), capability, needed_for };
    if needs.image && !has.contains(Capability::Vision) {
        return Err(mismatch(Capability::Vision, "the conversation holds an image"));
    }
    if needs.document && !has.contains(Capability::Documents) {
        return Err(mismatch(Capability::Documents, "the conversation holds a document"));
    }
    // The component carries the kind, but perhaps not from this source: the
    // host fetches no caller's URL (that would make it a proxy to wherever the
    // caller points) and cannot make bytes a URL, so it refuses.
    if let Some((capability, needed_for)) = needs.unsupported_source(provider) {
        return Err(mismatch(capability, needed_for));
    }
    let native_tools = has.contains(Capability::Tools);
    let tools_in_play = needs.tool_blocks || !request.conversation.tools.is_empty();
    // A model that can call tools but whose component cannot carry native calls
    // gets them in the prompt, as one that declares only prompted tools does.
    let prompted_allowed = wanted.contains(Capability::Tools) || wanted.contains(Capability::PromptedTools);
    if tools_in_play && !native_tools && !prompted_allowed {
        return Err(mismatch(Capability::Tools, "the request offers tools or carries tool calls"));
    }
    // A model that may answer to a schema but whose component cannot carry one
    // gets it in the prompt, as tools are.
    let native_schema = has.contains(Capability::JsonSchema);
    let prompted_schema = request.response_schema.is_some() && !native_schema;
    if prompted_schema && !wanted.contains(Capability::JsonSchema) {
        return Err(mismatch(Capability::JsonSchema, "the request asks for a response schema"));
    }
    if request.thinking_budget.is_some() && !has.contains(Capability::Thinking) {
        return Err(mismatch(Capability::Thinking, "the request sets a thinking budget"));
    }
    let fixed = fixed_sampling(model);
    let top_p_omitted = match request.top_p {
        None => false,
        Some(1.0) => false,
        Some(_) if fixed => true,
        Some(top_p) => return Err(top_p_refused(model, top_p)),
    };
    Ok(Policy {
        prompted_tools: tools_in_play && !native_tools,
        prompted_schema,
        streams: has.contains(Capability::Streaming),
        notes: PolicyNotes {
            temperature_omitted: fixed && request.temperature.is_some(),
            top_p_omitted,
            stream_replayed_whole: false,
            schema_prompted: prompted_schema,
            hosted_items_not_streamed: false,
        },
    })
}

/// The temperature a call sends: the caller's, except on an entry whose
/// sampling is fixed (where nothing is sent).
pub(super) fn temperature(model: &ModelSpec, request: &ChatRequest) -> Option<f64> {
    request.temperature.filter(|_| !fixed_sampling(model))
}

/// The entry accepts only its provider's default sampling: it says so
/// (`fixed_temperature`), or its wire id is an OpenAI reasoning model's. The
/// one rule for every path that sets a temperature (a call's, the decision
/// path's 0).
pub(super) fn fixed_sampling(model: &ModelSpec) -> bool {
    model.fixed_temperature || is_reasoning_family(&model.wire_id)
}

/// What the entry asks of its provider: its declaration, else everything (less
/// native tools when `native_tools = false`, the older spelling).
fn top_p_refused(model: &ModelSpec, top_p: f32) -> WeirError {
    WeirError::InvalidRequest(format!(
        "model `{}`: `top_p` {top_p} cannot be honoured: Weir does not carry `top_p` yet; leave it out (or send 1.0)",
        model.id
    ))
}

/// Whether a wire id names an OpenAI reasoning model (gpt-5, o1, o3, o4, dated
/// or with a platform prefix such as `azure/`), which refuses any explicit
/// sampling value. `gpt-5-chat` is not a reasoning model and keeps it; so do
/// `gpt-4o`, `gpt-4.1`, `gpt-oss-*`, `omni-*` and everyone else's models.
fn is_reasoning_family(wire_id: &str) -> bool {
    // A platform prefix names where the model runs, not what it is.
    let id = wire_id.rsplit('/').next().unwrap_or(wire_id);
    if member_of(id, "gpt-5-chat") {
        return false;
    }
    ["gpt-5", "o1", "o3", "o4"].into_iter().any(|family| member_of(id, family))
}

/// `id` is `family` itself or a variant of it (`family-…`, `family.…`,
/// `family:…`, `family_…`), compared without regard to ASCII case.
fn member_of(id: &str, family: &str) -> bool {
    let (id, family) = (id.as_bytes(), family.as_bytes());
    id.len() >= family.len()
        && id[..family.len()].eq_ignore_ascii_case(family)
        && matches!(id.get(family.len()), None | Some(b'-' | b'.' | b':' | b'_'))
}

/// What a conversation's blocks need, from one pass over them.
#[derive(Debug, Clone, Copy)]
struct Needs {
    image: bool,
    document: bool,
    /// Which media sources the blocks use: the component flags that must carry
    /// them (`inline-images`, `image-urls`, ...).
    sources: Capabilities,
    /// Earlier tool calls or results (which need tools even with none offered).
    tool_blocks: bool,
}

impl Needs {
    fn of(conversation: &Conversation) -> Self {
        let mut needs = Self { image: false, document: false, sources: Capabilities::empty(), tool_blocks: false };
        for block in conversation.turns.iter().flat_map(|turn| &turn.content) {
            match block {
                ContentBlock::Image(media) => needs.image(media),
                ContentBlock::Document(media) => needs.document(media),
                ContentBlock::ToolUse(_) => needs.tool_blocks = true,
                ContentBlock::ToolResult(result) => {
                    needs.tool_blocks = true;
                    for leaf in &result.content {
                        match leaf {
                            LeafBlock::Image(media) => needs.image(media),
                            LeafBlock::Document(media) => needs.document(media),
                            LeafBlock::Text(_) => {}
                        }
                    }
                }
                ContentBlock::Text(_) | ContentBlock::Thinking(_) => {}
            }
        }
        needs
    }

    fn image(&mut self, media: &Media) {
        self.image = true;
        self.sources |= match media.source {
            MediaSource::Base64(_) => Capabilities::INLINE_IMAGES,
            MediaSource::Url(_) => Capabilities::IMAGE_URLS,
        };
    }

    fn document(&mut self, media: &Media) {
        self.document = true;
        self.sources |= match media.source {
            MediaSource::Base64(_) => Capabilities::INLINE_DOCUMENTS,
            MediaSource::Url(_) => Capabilities::DOCUMENT_URLS,
        };
    }

    /// The first media source the blocks use that `provider`'s component does
    /// not declare, as the capability it falls under and why.
    fn unsupported_source(self, provider: Capabilities) -> Option<(Capability, &'static str)> {
        [
            (
                Capabilities::IMAGE_URLS,
                Capability::Vision,
                "the conversation holds an image by URL, and the provider component takes images inline only",
            ),
            (
                Capabilities::INLINE_IMAGES,
                Capability::Vision,
                "the conversation holds an inline image, and the provider component takes images by URL only",
            ),
            (
                Capabilities::DOCUMENT_URLS,
                Capability::Documents,
                "the conversation holds a document by URL, and the provider component takes documents inline only",
            ),
            (
                Capabilities::INLINE_DOCUMENTS,
                Capability::Documents,
                "the conversation holds an inline document, and the provider component takes documents by URL only",
            ),
        ]
        .into_iter()
        .find(|(flag, ..)| self.sources.contains(*flag) && !provider.contains(*flag))
        .map(|(_, capability, needed_for)| (capability, needed_for))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::CapabilitySet;
    use crate::types::{Media, MediaSource, ResponseSchema, ToolDefinition, ToolResult, ToolUse, Turn, TurnRole};

    fn media(mime: &str) -> Media {
        Media { mime_type: mime.into(), source: MediaSource::Base64("AAAA".into()) }
    }

    fn request_with(blocks: Vec<ContentBlock>) -> ChatRequest {
        let mut conversation = Conversation::user("hi");
        conversation.push_turn(TurnRole::User, blocks, false);
        ChatRequest::new("m", conversation)
    }

    fn declared(capabilities: &[Capability]) -> ModelSpec {
        ModelSpec { capabilities: Some(CapabilitySet::of(capabilities.iter().copied())), ..ModelSpec::sample() }
    }

    fn refused_for(result: Result<Policy, WeirError>) -> Capability {
        match result {
            Err(WeirError::CapabilityMismatch { capability, .. }) => capability,
            other => panic!("expected a capability mismatch, got {other:?}"),
        }
    }

    fn tool() -> ToolDefinition {
        ToolDefinition { name: "f".into(), description: String::new(), parameters_json: "{}".into() }
    }

    #[test]
    fn reasoning_families_are_recognized_by_wire_id_however_they_are_named() {
        for id in [
            "o1",
            "o1-mini",
            "o1-preview",
            "o3",
            "o3-mini",
            "o3-pro",
            "o3-2025-04-16",
            "o4-mini",
            "o4-mini-2025-04-16",
            "gpt-5",
            "gpt-5-mini",
            "gpt-5-nano",
            "gpt-5.1",
            "gpt-5.1-codex",
            "gpt-5-2025-08-07",
            "GPT-5-Mini",
            "openai/o3",
            "azure/gpt-5-mini",
            "openrouter/openai/o4-mini",
            "o3:latest",
        ] {
            assert!(is_reasoning_family(id), "{id} is a reasoning family");
        }
        for id in [
            "gpt-4o",
            "gpt-4o-mini",
            "gpt-4.1",
            "gpt-4.1-mini",
            "gpt-oss-120b",
            "gpt-oss-20b",
            "openai/gpt-oss-120b",
            "o",
            "o5x",
            "o30",
            "omni-moderation-latest",
            "gpt-5-chat-latest",
            "gpt-50",
            "llama3.1:8b",
            "meta-llama/Llama-3.3-70B-Instruct",
            "claude-sonnet-4-5",
            "qwen3",
            "",
            "azure/",
        ] {
            assert!(!is_reasoning_family(id), "{id} keeps its temperature");
        }
    }

    #[test]
    fn temperature_is_omitted_for_fixed_sampling_and_kept_elsewhere() {
        let mut request = ChatRequest::new("m", Conversation::user("hi"));
        request.temperature = Some(0.2);
        let o3 = ModelSpec { wire_id: "o3".into(), ..ModelSpec::sample() };
        let llama = ModelSpec { wire_id: "llama3.1:8b".into(), ..ModelSpec::sample() };
        let fixed = ModelSpec { wire_id: "llama3.1:8b".into(), fixed_temperature: true, ..ModelSpec::sample() };
        assert_eq!(temperature(&o3, &request), None);
        assert_eq!(temperature(&fixed, &request), None);
        assert_eq!(temperature(&llama, &request), Some(0.2));
        let notes =
            |model: &ModelSpec, request: &ChatRequest| check(model, Capabilities::all(), request).unwrap().notes;
        assert!(notes(&o3, &request).temperature_omitted && notes(&fixed, &request).temperature_omitted);
        assert_eq!(notes(&o3, &request).names().collect::<Vec<_>>(), ["temperature_omitted"]);
        assert_eq!(notes(&llama, &request), PolicyNotes::default());
        request.temperature = None;
        assert_eq!(notes(&o3, &request), PolicyNotes::default(), "nothing asked, nothing omitted");
    }

    #[test]
    fn top_p_is_a_no_op_at_one_dropped_on_fixed_sampling_and_refused_elsewhere() {
        let llama = ModelSpec { wire_id: "llama3.1:8b".into(), ..ModelSpec::sample() };
        let o3 = ModelSpec { wire_id: "o3".into(), ..ModelSpec::sample() };
        let mut request = ChatRequest::new("m", Conversation::user("hi"));
        request.top_p = Some(1.0);
        assert_eq!(check(&llama, Capabilities::all(), &request).unwrap().notes, PolicyNotes::default());
        request.top_p = Some(0.9);
        let notes = check(&o3, Capabilities::all(), &request).unwrap().notes;
        assert!(notes.top_p_omitted && !notes.temperature_omitted);
        assert_eq!(notes.names().collect::<Vec<_>>(), ["top_p_omitted"]);
        match check(&llama, Capabilities::all(), &request) {
            Err(WeirError::InvalidRequest(message)) => {
                assert!(message.contains("`m`") && message.contains("does not carry `top_p` yet"), "{message}");
            }
            other => panic!("expected a refusal, got {other:?}"),
        }
    }

    #[test]
    fn an_image_or_a_document_needs_the_capability_also_inside_a_tool_result() {
        let text_only = declared(&[Capability::Tools, Capability::Streaming]);
        let image = request_with(vec![ContentBlock::Image(media("image/png"))]);
        assert_eq!(refused_for(check(&text_only, Capabilities::all(), &image)), Capability::Vision);
        let pdf = request_with(vec![ContentBlock::Document(media("application/pdf"))]);
        assert_eq!(refused_for(check(&text_only, Capabilities::all(), &pdf)), Capability::Documents);
        let nested = request_with(vec![ContentBlock::ToolResult(ToolResult {
            tool_use_id: "t".into(),
            content: vec![LeafBlock::Document(media("application/pdf"))],
            is_error: false,
        })]);
        assert_eq!(refused_for(check(&text_only, Capabilities::all(), &nested)), Capability::Documents);
        let seeing = declared(&[Capability::Vision, Capability::Documents]);
        assert!(check(&seeing, Capabilities::all(), &image).is_ok());
        assert!(check(&seeing, Capabilities::all(), &pdf).is_ok());
    }

    #[test]
    fn a_declaration_is_narrowed_to_what_the_provider_carries_and_absent_means_the_providers() {
        let image = request_with(vec![ContentBlock::Image(media("image/png"))]);
        let sees = declared(&[Capability::Vision]);
        assert_eq!(refused_for(check(&sees, Capabilities::empty(), &image)), Capability::Vision);
        let undeclared = ModelSpec::sample();
        assert!(check(&undeclared, Capabilities::INLINE_IMAGES | Capabilities::IMAGE_URLS, &image).is_ok());
        assert_eq!(refused_for(check(&undeclared, Capabilities::empty(), &image)), Capability::Vision);
        let plain = ChatRequest::new("m", Conversation::user("hi"));
        assert!(check(&undeclared, Capabilities::STREAMING, &plain).unwrap().streams);
        assert!(!check(&undeclared, Capabilities::empty(), &plain).unwrap().streams);
        assert!(!check(&declared(&[]), Capabilities::all(), &plain).unwrap().streams, "not declared");
    }

    #[test]
    fn tools_are_native_prompted_or_refused() {
        let mut offered = ChatRequest::new("m", Conversation::user("hi"));
        offered.conversation.tools.push(tool());
        let prompted =
            |model: &ModelSpec, provider| check(model, provider, &offered).map(|policy| policy.prompted_tools);
        // Undeclared: native where the provider has it, else prompted (as before).
        assert!(!prompted(&ModelSpec::sample(), Capabilities::NATIVE_TOOLS).unwrap());
        assert!(prompted(&ModelSpec::sample(), Capabilities::empty()).unwrap());
        let turned_off = ModelSpec { native_tools: false, ..ModelSpec::sample() };
        assert!(prompted(&turned_off, Capabilities::NATIVE_TOOLS).unwrap(), "`native_tools = false`");
        // Declared: `tools` is native when carried, else prompted; `prompted_tools` always prompted.
        assert!(!prompted(&declared(&[Capability::Tools]), Capabilities::NATIVE_TOOLS).unwrap());
        assert!(prompted(&declared(&[Capability::Tools]), Capabilities::empty()).unwrap());
        assert!(prompted(&declared(&[Capability::PromptedTools]), Capabilities::NATIVE_TOOLS).unwrap());
        assert_eq!(refused_for(check(&declared(&[]), Capabilities::all(), &offered)), Capability::Tools);
        // Earlier calls need tools too, with none offered now.
        let history = request_with(vec![ContentBlock::ToolUse(ToolUse {
            id: "t".into(),
            name: "f".into(),
            input_json: "{}".into(),
        })]);
        assert_eq!(refused_for(check(&declared(&[]), Capabilities::all(), &history)), Capability::Tools);
        let plain = ChatRequest::new("m", Conversation::user("hi"));
        assert!(!check(&declared(&[]), Capabilities::all(), &plain).unwrap().prompted_tools, "no tools in play");
    }

    #[test]
    fn a_schema_and_a_thinking_budget_need_their_capabilities() {
        let mut schema = ChatRequest::new("m", Conversation::user("hi"));
        schema.response_schema = Some(ResponseSchema { name: "s".into(), schema_json: "{}".into() });
        let prompted =
            |model: &ModelSpec, provider| check(model, provider, &schema).map(|policy| policy.prompted_schema);
        assert_eq!(
            refused_for(check(&declared(&[Capability::Tools]), Capabilities::all(), &schema)),
            Capability::JsonSchema
        );
        // Native where the component carries it; else in the prompt, declared or not.
        assert!(!prompted(&declared(&[Capability::JsonSchema]), Capabilities::STRUCTURED_OUTPUT).unwrap());
        assert!(prompted(&declared(&[Capability::JsonSchema]), Capabilities::empty()).unwrap());
        assert!(prompted(&ModelSpec::sample(), Capabilities::empty()).unwrap());
        assert!(!prompted(&ModelSpec::sample(), Capabilities::STRUCTURED_OUTPUT).unwrap());
        let plain = ChatRequest::new("m", Conversation::user("hi"));
        assert!(!check(&ModelSpec::sample(), Capabilities::empty(), &plain).unwrap().prompted_schema, "no schema");
        let mut thinking = ChatRequest::new("m", Conversation::user("hi"));
        thinking.thinking_budget = Some(2_048);
        assert_eq!(refused_for(check(&declared(&[]), Capabilities::all(), &thinking)), Capability::Thinking);
        assert!(check(&ModelSpec::sample(), Capabilities::THINKING, &thinking).is_ok());
    }

    /// 0.5.0's media flags: a component that takes images (documents) from
    /// one source only has a block from the other refused before any encode,
    /// also inside a tool result; one with both flags (a legacy `images`)
    /// takes either.
    #[test]
    fn a_media_source_the_component_does_not_declare_is_refused() {
        let by_url = |mime: &str| Media { mime_type: mime.into(), source: MediaSource::Url("https://x/a".into()) };
        let url_image = request_with(vec![ContentBlock::Image(by_url("image/png"))]);
        let inline_image = request_with(vec![ContentBlock::Image(media("image/png"))]);
        let url_pdf = request_with(vec![ContentBlock::Document(by_url("application/pdf"))]);
        let inline_pdf = request_with(vec![ContentBlock::Document(media("application/pdf"))]);
        let gemini_like = Capabilities::INLINE_IMAGES | Capabilities::INLINE_DOCUMENTS;
        let entry = ModelSpec::sample();
        assert!(check(&entry, gemini_like, &inline_image).is_ok());
        assert!(check(&entry, gemini_like, &inline_pdf).is_ok());
        match check(&entry, gemini_like, &url_image) {
            Err(WeirError::CapabilityMismatch { capability, needed_for, .. }) => {
                assert_eq!(capability, Capability::Vision);
                assert!(needed_for.contains("image by URL") && needed_for.contains("inline only"), "{needed_for}");
            }
            other => panic!("expected a refusal, got {other:?}"),
        }
        assert_eq!(refused_for(check(&entry, gemini_like, &url_pdf)), Capability::Documents);
        let nested = request_with(vec![ContentBlock::ToolResult(ToolResult {
            tool_use_id: "t".into(),
            content: vec![LeafBlock::Image(by_url("image/png"))],
            is_error: false,
        })]);
        assert_eq!(refused_for(check(&entry, gemini_like, &nested)), Capability::Vision);
        let urls_only = Capabilities::IMAGE_URLS | Capabilities::DOCUMENT_URLS;
        assert!(check(&entry, urls_only, &url_image).is_ok());
        assert_eq!(refused_for(check(&entry, urls_only, &inline_image)), Capability::Vision);
        assert_eq!(refused_for(check(&entry, urls_only, &inline_pdf)), Capability::Documents);
        let both = gemini_like | urls_only;
        for request in [&url_image, &inline_image, &url_pdf, &inline_pdf] {
            assert!(check(&entry, both, request).is_ok());
        }
    }

    #[test]
    fn the_refusal_names_the_capability_and_the_model() {
        let image = request_with(vec![ContentBlock::Image(media("image/png"))]);
        let error = check(&declared(&[]), Capabilities::all(), &image).unwrap_err();
        assert_eq!(error.category(), crate::Category::CapabilityMismatch);
        assert_eq!(error.http_status(), 400);
        let message = error.safe_message();
        assert!(message.contains("`m`") && message.contains("`vision`"), "{message}");
    }

    #[test]
    fn turns_without_media_or_tools_need_nothing() {
        let mut conversation = Conversation::user("hi");
        conversation.turns.push(Turn::assistant(vec![ContentBlock::Text("hello".into())]));
        let needs = Needs::of(&conversation);
        assert!(!needs.image && !needs.document && !needs.tool_blocks);
    }
}
