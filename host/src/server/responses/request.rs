//! `POST /v1/responses` bodies → [`ChatRequest`].
//!
//! `input` is a string (one user message) or items: messages (`developer` and
//! `system` become system content, after `instructions`), `function_call` /
//! `custom_tool_call` (assistant tool use), their outputs (tool results in a
//! user turn), and `reasoning`. A reasoning item whose `encrypted_content`
//! Weir sealed is opened and put back as the thinking blocks of the assistant
//! turn it precedes; one that does not open is refused; one without
//! `encrypted_content` (a summary only) is left out, since a summary is not
//! what a provider verifies.
//!
//! Top-level fields are strict: an unknown one is a 400 naming it. Recorded
//! (the record's `client.metadata`) and not sent anywhere: `metadata`,
//! `client_metadata`, `safety_identifier`, `user` (never an identity: the
//! caller is its key's). Carried as native fields (see [`native`]): the
//! custom tools, the namespaces and `prompt_cache_key`, sent to a provider
//! that takes them (`openai-responses`). Accepted and not sent: `prompt_cache_retention`,
//! `service_tier`, `stream_options`, `text.verbosity`, `reasoning.summary`,
//! `parallel_tool_calls`.
//! `store` and `previous_response_id` are the route's (see
//! `crate::server::stored`): a continuation's stored items are put before
//! `input` ([`Body::continue_from`]) before the mapping; `background: true` is refused.

use std::sync::Arc;

use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_json::{Map, Value, json};

use super::choice::Choice;
use super::response::Echo;
use super::tools::{self, MappedTools, custom_arguments, kind, text, wire_name};
use crate::catalog::HostedTools;
use crate::chat::{ChatRequest, HOSTED_TOOL_CHOICE_FIELD, MAX_TOOL_CALLS_FIELD, NATIVE_BLOCKS_FIELD, NativeAsk};
use crate::record::ClientFacts;
use crate::seal::ReasoningSeal;
use crate::server::error::ApiError;
use crate::types::{
    ContentBlock, Conversation, LeafBlock, Media, MediaSource, ResponseSchema, ToolResult, ToolUse, TurnRole,
};

/// `include` values that only add detail to items of hosted tools, which no
/// answer through Weir holds: accepted, and they change nothing.
const INCLUDES_WITHOUT_EFFECT: [&str; 6] = [
    "reasoning.encrypted_content",
    "web_search_call.action.sources",
    "web_search_call.results",
    "code_interpreter_call.outputs",
    "computer_call_output.output.image_url",
    "file_search_call.results",
];

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Body {
    model: String,
    input: Option<Value>,
    instructions: Option<String>,
    #[serde(default)]
    tools: Vec<Value>,
    tool_choice: Option<Value>,
    parallel_tool_calls: Option<bool>,
    text: Option<Value>,
    reasoning: Option<Value>,
    max_output_tokens: Option<u32>,
    temperature: Option<f64>,
    top_p: Option<f32>,
    #[serde(default)]
    stream: Option<bool>,
    #[serde(rename = "stream_options")]
    _stream_options: Option<IgnoredAny>,
    #[serde(default)]
    include: Option<Vec<String>>,
    prompt_cache_key: Option<String>,
    #[serde(rename = "prompt_cache_retention")]
    _prompt_cache_retention: Option<IgnoredAny>,
    metadata: Option<Value>,
    client_metadata: Option<Value>,
    safety_identifier: Option<String>,
    user: Option<String>,
    store: Option<bool>,
    previous_response_id: Option<String>,
    background: Option<bool>,
    #[serde(rename = "service_tier")]
    _service_tier: Option<IgnoredAny>,
    truncation: Option<String>,
    /// OpenAI's bound on the calls to its hosted tools in one response: sent
    /// natively, and the bound a web search is held at under a USD budget.
    max_tool_calls: Option<u32>,
    /// OpenAI's server-side compaction settings: sent natively, dropped (and
    /// noted) for a provider that has no such thing.
    context_management: Option<Value>,
    /// Fields OpenAI defines that the gateway cannot honour for any provider:
    /// refused with a reason, not taken as unknown (see [`UNSERVED`]).
    conversation: Option<IgnoredAny>,
    prompt: Option<IgnoredAny>,
    moderation: Option<IgnoredAny>,
    top_logprobs: Option<u32>,
}

impl Body {
    /// Parses a request body. Errors quote only the caller's own input.
    pub fn parse(body: &[u8]) -> Result<Self, ApiError> {
        serde_json::from_slice(body).map_err(|e| ApiError::invalid_request(format!("invalid body: {e}")))
    }

    /// The model the caller named.
    pub fn model(&self) -> &str {
        &self.model
    }

    /// The stored response the request continues from, if any.
    pub fn previous_response_id(&self) -> Option<&str> {
        self.previous_response_id.as_deref()
    }

    /// Whether the caller asked to store the response: OpenAI's default is yes.
    pub fn asks_to_store(&self) -> bool {
        self.store != Some(false)
    }

    /// The request's own `input`, as sent (a string or items).
    pub fn input(&self) -> Value {
        self.input.clone().unwrap_or(Value::Null)
    }

    /// Puts a stored conversation's items before this request's own input.
    pub fn continue_from(&mut self, mut context: Vec<Value>) {
        context.extend(input_items(self.input.take().unwrap_or(Value::Null)));
        self.input = Some(Value::Array(context));
    }

    /// Whether an input item carries `encrypted_content`: then the entry the
    /// model resolves to must be known to open it.
    pub fn carries_sealed_reasoning(&self) -> bool {
        match &self.input {
            Some(Value::Array(items)) => {
                items.iter().any(|item| kind(item) == "reasoning" && text(item, "encrypted_content").is_some())
            }
            _ => false,
        }
    }
}

/// An `input` as items: a string is one user message of one `input_text` part
/// (how OpenAI lists it), a list is its items, nothing is none.
pub fn input_items(input: Value) -> Vec<Value> {
    match input {
        Value::Array(items) => items,
        Value::String(text) => {
            vec![json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]})]
        }
        Value::Null => Vec::new(),
        other => vec![other],
    }
}

/// What opens sealed reasoning: the gateway's key and the entry the call resolves to.
#[derive(Debug, Clone, Copy)]
pub struct Unseal<'a> {
    pub seal: &'a ReasoningSeal,
    pub entry: &'a str,
}

/// A mapped request and what its answer needs.
#[derive(Debug)]
pub struct Ingress {
    pub request: ChatRequest,
    pub stream: bool,
    /// The request's settings as the answer's `response` object echoes them.
    pub echo: Echo,
    pub names: tools::ToolNames,
}

/// Maps a parsed body. `unseal` is needed when [`Body::carries_sealed_reasoning`];
/// `hosted_tools` decides what a hosted tool the serving provider does not
/// take does (see `call::native`).
pub fn into_chat_request(
    body: Body,
    unseal: Option<Unseal<'_>>,
    hosted_tools: HostedTools,
) -> Result<Ingress, ApiError> {
    if body.background == Some(true) {
        return Err(ApiError::invalid_request(
            "`background: true` is not supported: the gateway answers while the connection is open",
        ));
    }
    if let Some(reason) = unserved(&body) {
        return Err(ApiError::invalid_request(reason));
    }
    if let Some(truncation) = body.truncation.as_deref().filter(|t| *t != "disabled") {
        return Err(ApiError::invalid_request(format!(
            "`truncation: {truncation}` is not supported: the gateway never drops input items; use `disabled`"
        )));
    }
    for include in body.include.iter().flatten() {
        if !INCLUDES_WITHOUT_EFFECT.contains(&include.as_str()) {
            return Err(ApiError::invalid_request(format!(
                "`include` value `{include}` is not supported (accepted: {})",
                INCLUDES_WITHOUT_EFFECT.join(", ")
            )));
        }
    }
    let stream = body.stream.unwrap_or(false);
    let mut mapped = tools::map_tools(&body.tools)?;
    let choice = body.tool_choice.as_ref().map(Choice::parse).transpose()?;
    let hosted_choice = choice.as_ref().and_then(Choice::hosted);
    let tool_choice = choice.map(|choice| choice.apply(&mut mapped)).transpose()?.flatten();
    let MappedTools { definitions, names, echoed, hosted_fields, custom, namespaces } = mapped;
    let mut conversation = Conversation {
        system: body.instructions.iter().filter(|text| !text.is_empty()).cloned().collect(),
        cache_system: true,
        turns: Vec::new(),
        tools: definitions,
        tool_choice,
    };
    let mut own_items = Vec::new();
    match &body.input {
        Some(Value::String(text)) => {
            conversation.push_turn(TurnRole::User, vec![ContentBlock::Text(text.clone())], false)
        }
        Some(Value::Array(items)) => {
            for (index, item) in items.iter().enumerate() {
                add_item(&mut conversation, item, unseal, &mut own_items)
                    .map_err(|e| ApiError::invalid_request(format!("input[{index}]: {e}")))?;
            }
        }
        None | Some(Value::Null) => return Err(ApiError::invalid_request("`input` is required")),
        Some(_) => return Err(ApiError::invalid_request("`input` must be a string or an array of items")),
    }
    if conversation.turns.is_empty() {
        return Err(ApiError::invalid_request("`input` holds no user or assistant item"));
    }
    let format = body.text.as_ref().and_then(|text| text.get("format"));
    let response_schema = format.map(response_schema).transpose()?.flatten();
    let effort_word = body.reasoning.as_ref().and_then(|r| text(r, "effort")).map(str::to_owned);
    let mut request = ChatRequest::new(body.model.clone(), conversation);
    request.max_output_tokens = body.max_output_tokens;
    request.temperature = body.temperature;
    request.top_p = crate::server::sampling::top_p(body.top_p)?;
    request.response_schema = response_schema;
    match effort_word.as_deref() {
        None => {}
        Some("none") => request.reasoning_off = true,
        Some(word) => {
            request.reasoning_effort = Some(crate::types::effort_from_word(word).ok_or_else(|| {
                ApiError::invalid_request(format!(
                    "unknown `reasoning.effort` `{word}` (none, minimal, low, medium, high or xhigh)"
                ))
            })?);
        }
    }
    let own = Own { tools: hosted_fields, items: own_items, refuse: hosted_tools == HostedTools::Refuse };
    let settings = Settings { hosted_choice, ..Settings::of(&body)? };
    request.native = native(custom, namespaces, settings, own);
    let (client, note) = client_facts(&body);
    request.client = client;
    request.route_notes.extend(note.map(str::to_owned));
    let echo = echo(&body, &echoed, &request);
    Ok(Ingress { request, stream, echo, names })
}

/// Why a request asks what the gateway cannot do for any provider (each of
/// these is OpenAI's own state or service), or `None`. Refused by name, so a
/// caller learns what to send instead of reading "unknown field".
fn unserved(body: &Body) -> Option<&'static str> {
    if body.conversation.is_some() {
        return Some(
            "`conversation` is not supported: the gateway keeps no conversations; continue one with `previous_response_id`",
        );
    }
    if body.prompt.is_some() {
        return Some(
            "`prompt` (a prompt template stored with OpenAI) is not supported: send its text as `instructions` and `input`",
        );
    }
    if body.moderation.is_some() {
        return Some("`moderation` is not supported: the gateway runs no moderation of its own");
    }
    if body.top_logprobs.is_some_and(|top| top > 0) {
        return Some("`top_logprobs` is not supported: answers through the gateway carry no log probabilities");
    }
    None
}

/// The dialect name `native.support` answers for the Responses API's fields.
pub const DIALECT: &str = "openai-responses";

/// The Responses API's own fields a provider may take natively: the custom
/// tools and the namespaces (both rendered as functions for every provider,
/// so not dropped where they are not taken), `prompt_cache_key`,
/// `max_tool_calls` and `context_management` (the request's [`Settings`]).
fn native(custom: Vec<Value>, namespaces: Vec<Value>, settings: Settings, own: Own) -> Option<Arc<NativeAsk>> {
    let mut fields = own.tools;
    if !custom.is_empty() {
        fields.push(("custom_tools".to_owned(), Value::Array(custom)));
    }
    if !namespaces.is_empty() {
        fields.push(("namespace_tools".to_owned(), Value::Array(namespaces)));
    }
    if let Some(key) = settings.prompt_cache_key {
        fields.push(("prompt_cache_key".to_owned(), json!(key)));
    }
    if let Some(bound) = settings.max_tool_calls {
        fields.push((MAX_TOOL_CALLS_FIELD.to_owned(), json!(bound)));
    }
    if let Some(compaction) = settings.context_management {
        fields.push(("context_management".to_owned(), compaction));
    }
    if let Some(choice) = settings.hosted_choice {
        fields.push((HOSTED_TOOL_CHOICE_FIELD.to_owned(), choice));
    }
    if !own.items.is_empty() {
        fields.push((NATIVE_BLOCKS_FIELD.to_owned(), Value::Array(own.items)));
    }
    let rendered_neutrally: &'static [&'static str] = &["custom_tools", "namespace_tools"];
    (!fields.is_empty()).then(|| {
        Arc::new(NativeAsk {
            dialect: DIALECT,
            fields,
            betas: Vec::new(),
            rendered_neutrally,
            refuse_hosted_tools: own.refuse,
        })
    })
}

/// The request's settings sent as native fields.
struct Settings {
    prompt_cache_key: Option<String>,
    max_tool_calls: Option<u32>,
    /// A list (checked by [`Settings::of`]).
    context_management: Option<Value>,
    /// A forced hosted tool (see `choice`).
    hosted_choice: Option<Value>,
}

impl Settings {
    fn of(body: &Body) -> Result<Self, ApiError> {
        if body.max_tool_calls == Some(0) {
            return Err(ApiError::invalid_request("`max_tool_calls` must be at least 1"));
        }
        let context_management = body.context_management.clone().filter(|value| !value.is_null());
        if context_management.as_ref().is_some_and(|value| !value.is_array()) {
            return Err(ApiError::invalid_request("`context_management` must be a list"));
        }
        Ok(Self {
            prompt_cache_key: body.prompt_cache_key.clone(),
            max_tool_calls: body.max_tool_calls,
            context_management,
            hosted_choice: None,
        })
    }
}

/// A whole request's hosted tools and history items (see `tools` and
/// [`add_item`]), and whether a hosted tool the provider does not take
/// refuses the call.
struct Own {
    tools: Vec<(String, Value)>,
    items: Vec<Value>,
    refuse: bool,
}

/// The output items of OpenAI's hosted tools, sent back as input as they came.
const OWN_ITEM_TYPES: &[&str] = &[
    "web_search_call",
    "file_search_call",
    "code_interpreter_call",
    "image_generation_call",
    "mcp_call",
    "mcp_list_tools",
    "mcp_approval_request",
    "mcp_approval_response",
];

/// Where the next assistant block lands: (turn, neutral blocks before it). A turn is opened
/// for it when the last one is not the assistant's, so the items that follow
/// merge into it.
fn assistant_place(conversation: &mut Conversation) -> (usize, usize) {
    match conversation.turns.last() {
        Some(last) if last.role == TurnRole::Assistant => (conversation.turns.len() - 1, last.content.len()),
        _ => {
            conversation.push_turn(TurnRole::Assistant, Vec::new(), false);
            (conversation.turns.len() - 1, 0)
        }
    }
}

/// What the `response` object repeats of the request, serialized once here
/// from the body's own fields (see [`Echo`]).
fn echo(body: &Body, tools: &[Value], request: &ChatRequest) -> Echo {
    let mut echo = Echo::default();
    echo.put("instructions", &body.instructions);
    echo.put("tools", &tools);
    match &body.tool_choice {
        Some(choice) => echo.put("tool_choice", choice),
        None => echo.put("tool_choice", &"auto"),
    }
    echo.put("parallel_tool_calls", &body.parallel_tool_calls.unwrap_or(true));
    match &body.text {
        Some(text) => echo.put("text", text),
        None => echo.put("text", &json!({"format": {"type": "text"}})),
    }
    match &body.reasoning {
        Some(reasoning) => echo.put("reasoning", reasoning),
        None => echo.put("reasoning", &json!({"effort": null, "summary": null})),
    }
    echo.put("max_output_tokens", &request.max_output_tokens);
    match &body.metadata {
        Some(metadata) => echo.put("metadata", metadata),
        None => echo.put("metadata", &json!({})),
    }
    echo.put("temperature", &body.temperature);
    echo.put("top_p", &body.top_p);
    echo.put("prompt_cache_key", &body.prompt_cache_key);
    echo.put("safety_identifier", &body.safety_identifier);
    echo.put("user", &body.user);
    echo.put("previous_response_id", &body.previous_response_id);
    echo.put("background", &false);
    echo.put("truncation", &"disabled");
    echo.put("service_tier", &"default");
    echo.put(MAX_TOOL_CALLS_FIELD, &body.max_tool_calls);
    echo
}

/// The most of the caller's self-description (`metadata`, `client_metadata`,
/// `safety_identifier`, `user`) a record keeps, serialized: Codex's
/// `client_metadata` is about 1 KiB; a caller cannot grow every record past this.
const MAX_RECORDED_CLIENT_BYTES: usize = 4096;

/// What the request said about its caller, for the record's `client.metadata`
/// (never who calls, never sent upstream); over [`MAX_RECORDED_CLIENT_BYTES`]
/// none of it is kept and the record notes `client_facts_too_large`.
fn client_facts(body: &Body) -> (Option<ClientFacts>, Option<&'static str>) {
    let words = |word: &Option<String>| word.clone().map(Value::String);
    let fields = [
        ("metadata", body.metadata.clone()),
        ("client_metadata", body.client_metadata.clone()),
        ("safety_identifier", words(&body.safety_identifier)),
        ("user", words(&body.user)),
    ];
    let facts: Map<String, Value> = fields
        .into_iter()
        .filter_map(|(name, value)| value.filter(|value| !value.is_null()).map(|value| (name.to_owned(), value)))
        .collect();
    if facts.is_empty() {
        return (None, None);
    }
    let facts = Value::Object(facts);
    if facts.to_string().len() > MAX_RECORDED_CLIENT_BYTES {
        return (None, Some("client_facts_too_large"));
    }
    (Some(ClientFacts { metadata: Some(facts), betas: Vec::new() }), None)
}

/// Adds one input item. A hosted tool's item goes to `own`, placed by turn
/// and position, and an assistant message whose text carries `annotations`
/// goes there too, over its neutral text (one text block, so it is one item
/// on the provider's side).
fn add_item(
    conversation: &mut Conversation,
    item: &Value,
    unseal: Option<Unseal<'_>>,
    own: &mut Vec<Value>,
) -> Result<(), String> {
    let annotated_reply = kind(item) == "message" && text(item, "role") == Some("assistant") && annotated(item);
    if OWN_ITEM_TYPES.contains(&kind(item)) || annotated_reply {
        let (turn, neutral) = assistant_place(conversation);
        let at = neutral + crate::chat::inserted_into(own, turn);
        own.push(json!({"turn": turn, "at": at, "block": item, "replaces": annotated_reply}));
        if annotated_reply {
            let texts = item.get("content").and_then(Value::as_array).into_iter().flatten();
            let text: String = texts.filter_map(|part| part.get("text").and_then(Value::as_str)).collect();
            conversation.push_turn(TurnRole::Assistant, vec![ContentBlock::Text(text)], false);
        }
        return Ok(());
    }
    let required = |field: &str| text(item, field).ok_or_else(|| format!("a `{}` item needs `{field}`", kind(item)));
    match kind(item) {
        "message" | "" if item.get("role").is_some() => add_message(conversation, item),
        "message" => Err("a message needs `role`".to_owned()),
        "function_call" => {
            let arguments = required("arguments")?;
            let call = ToolUse {
                id: required("call_id")?.to_owned(),
                name: wire_name(text(item, "namespace"), required("name")?),
                input_json: if arguments.trim().is_empty() { "{}".to_owned() } else { arguments.to_owned() },
            };
            conversation.push_turn(TurnRole::Assistant, vec![ContentBlock::ToolUse(call)], false);
            Ok(())
        }
        "custom_tool_call" => {
            let call = ToolUse {
                id: required("call_id")?.to_owned(),
                name: wire_name(text(item, "namespace"), required("name")?),
                input_json: custom_arguments(required("input")?),
            };
            conversation.push_turn(TurnRole::Assistant, vec![ContentBlock::ToolUse(call)], false);
            Ok(())
        }
        "function_call_output" | "custom_tool_call_output" => {
            let result = ToolResult {
                tool_use_id: required("call_id")?.to_owned(),
                content: tool_output(item.get("output"))?,
                is_error: false,
            };
            conversation.push_turn(TurnRole::User, vec![ContentBlock::ToolResult(result)], false);
            Ok(())
        }
        "reasoning" => {
            let Some(sealed) = text(item, "encrypted_content") else { return Ok(()) };
            let unseal = unseal.ok_or("its `encrypted_content` cannot be opened here")?;
            let blocks = unseal.seal.open(unseal.entry, sealed).map_err(|error| {
                format!(
                    "the reasoning item's `encrypted_content` does not open for model `{}`: {error}; send reasoning \
                     only back to the model that produced it, unchanged",
                    unseal.entry
                )
            })?;
            let blocks = blocks.into_iter().map(ContentBlock::Thinking).collect();
            conversation.push_turn(TurnRole::Assistant, blocks, false);
            Ok(())
        }
        "item_reference" => {
            Err("`item_reference` items are not supported: send the item itself, or continue a stored response with \
                 `previous_response_id`"
                .to_owned())
        }
        "" => Err("an item needs `type` (or `role` for a message)".to_owned()),
        other => Err(format!("input item type `{other}` is not supported")),
    }
}

/// A message one of whose text parts carries annotations (a search's citations).
fn annotated(item: &Value) -> bool {
    let parts = item.get("content").and_then(Value::as_array).into_iter().flatten();
    parts.filter_map(|part| part.get("annotations").and_then(Value::as_array)).any(|notes| !notes.is_empty())
}

fn add_message(conversation: &mut Conversation, item: &Value) -> Result<(), String> {
    let role = text(item, "role").unwrap_or_default();
    let blocks = match item.get("content") {
        Some(Value::String(text)) => vec![ContentBlock::Text(text.clone())],
        Some(Value::Array(parts)) => parts
            .iter()
            .enumerate()
            .map(|(index, part)| content_part(part).map_err(|e| format!("content[{index}]: {e}")))
            .collect::<Result<Vec<_>, _>>()?,
        _ => return Err("a message's `content` must be a string or an array of parts".to_owned()),
    };
    match role {
        "system" | "developer" => {
            let texts = blocks
                .into_iter()
                .map(|block| match block {
                    ContentBlock::Text(text) => Ok(text),
                    _ => Err(format!("a `{role}` message holds text only")),
                })
                .collect::<Result<Vec<_>, _>>()?;
            conversation.system.push(texts.join("\n"));
        }
        "user" => conversation.push_turn(TurnRole::User, blocks, false),
        "assistant" => conversation.push_turn(TurnRole::Assistant, blocks, false),
        other => return Err(format!("unknown role `{other}` (user, assistant, system or developer)")),
    }
    Ok(())
}

fn content_part(part: &Value) -> Result<ContentBlock, String> {
    match kind(part) {
        "input_text" | "output_text" => {
            Ok(ContentBlock::Text(text(part, "text").ok_or("a text part needs `text`")?.to_owned()))
        }
        "refusal" => Ok(ContentBlock::Text(text(part, "refusal").ok_or("a refusal part needs `refusal`")?.to_owned())),
        "input_image" => Ok(ContentBlock::Image(image(part)?)),
        "input_file" => Ok(ContentBlock::Document(file(part)?)),
        other => Err(format!("content part type `{other}` is not supported")),
    }
}

/// `image_url`: a `data:` URL or a URL; file ids need the Files API, which Weir does not serve.
fn image(part: &Value) -> Result<Media, String> {
    if let Some(url) = text(part, "image_url") {
        return Ok(media_from_url(url, "image/*"));
    }
    if text(part, "file_id").is_some() {
        return Err("an `input_image` by `file_id` is not supported; send `image_url` (a URL or data URL)".to_owned());
    }
    Err("an `input_image` needs `image_url`".to_owned())
}

/// `file_data` (a `data:` URL, or bare base64 of a PDF) or `file_url`; file ids are refused.
fn file(part: &Value) -> Result<Media, String> {
    if let Some(data) = text(part, "file_data") {
        if data.starts_with("data:") {
            return Ok(media_from_url(data, "application/pdf"));
        }
        return Ok(Media { mime_type: mime_of(text(part, "filename")), source: MediaSource::Base64(data.to_owned()) });
    }
    if let Some(url) = text(part, "file_url") {
        return Ok(Media { mime_type: mime_of(text(part, "filename")), source: MediaSource::Url(url.to_owned()) });
    }
    if text(part, "file_id").is_some() {
        return Err("an `input_file` by `file_id` is not supported; send `file_data` or `file_url`".to_owned());
    }
    Err("an `input_file` needs `file_data` or `file_url`".to_owned())
}

/// PDF unless the file name says plain text.
fn mime_of(filename: Option<&str>) -> String {
    match filename.and_then(|name| name.rsplit_once('.')).map(|(_, extension)| extension.to_ascii_lowercase()) {
        Some(extension) if extension == "txt" || extension == "md" => "text/plain".to_owned(),
        _ => "application/pdf".to_owned(),
    }
}

/// A `data:<mime>;base64,<data>` URL becomes inline media; anything else a URL.
fn media_from_url(url: &str, fallback_mime: &str) -> Media {
    if let Some(rest) = url.strip_prefix("data:")
        && let Some((mime, data)) = rest.split_once(";base64,")
    {
        return Media { mime_type: mime.to_owned(), source: MediaSource::Base64(data.to_owned()) };
    }
    Media { mime_type: fallback_mime.to_owned(), source: MediaSource::Url(url.to_owned()) }
}

/// A tool output: a string, or `input_text` / `input_image` / `input_file` parts.
fn tool_output(output: Option<&Value>) -> Result<Vec<LeafBlock>, String> {
    match output {
        Some(Value::String(text)) => Ok(vec![LeafBlock::Text(text.clone())]),
        Some(Value::Array(parts)) => parts
            .iter()
            .map(|part| match content_part(part)? {
                ContentBlock::Text(text) => Ok(LeafBlock::Text(text)),
                ContentBlock::Image(media) => Ok(LeafBlock::Image(media)),
                ContentBlock::Document(media) => Ok(LeafBlock::Document(media)),
                _ => Err("a tool output holds text, images and files only".to_owned()),
            })
            .collect(),
        _ => Err("a tool output's `output` must be a string or an array of parts".to_owned()),
    }
}

/// `text.format`: `text` (none), `json_object`, or `json_schema` through the
/// structured-answer gate.
fn response_schema(format: &Value) -> Result<Option<ResponseSchema>, ApiError> {
    match kind(format) {
        "text" | "" => Ok(None),
        "json_object" => {
            Ok(Some(ResponseSchema { name: "json_object".to_owned(), schema_json: r#"{"type":"object"}"#.to_owned() }))
        }
        "json_schema" => {
            let schema = format
                .get("schema")
                .filter(|schema| schema.is_object())
                .ok_or_else(|| ApiError::invalid_request("`text.format` json_schema needs a `schema` object"))?;
            let name = text(format, "name").unwrap_or("response");
            Ok(Some(ResponseSchema { name: name.to_owned(), schema_json: schema.to_string() }))
        }
        other => Err(ApiError::invalid_request(format!(
            "unknown `text.format` type `{other}` (text, json_object or json_schema)"
        ))),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::types::{Effort, Thinking, ToolChoice};

    fn map(body: Value) -> Ingress {
        into_chat_request(Body::parse(body.to_string().as_bytes()).unwrap(), None, HostedTools::Drop).unwrap()
    }

    fn error(body: Value) -> String {
        let parsed = Body::parse(body.to_string().as_bytes());
        let error = parsed.and_then(|body| into_chat_request(body, None, HostedTools::Drop)).unwrap_err();
        assert_eq!(error.category, crate::failure::Category::InvalidRequest);
        error.message
    }

    #[test]
    fn a_string_input_with_instructions_and_knobs() {
        let ingress = map(json!({
            "model": "m", "input": "Hello", "instructions": "Be terse.", "max_output_tokens": 300,
            "temperature": 0.5, "top_p": 1.0, "stream": true, "store": false, "metadata": {"a": "b"},
            "client_metadata": {"x": 1}, "prompt_cache_key": "k", "safety_identifier": "s", "user": "u",
            "include": ["reasoning.encrypted_content"], "parallel_tool_calls": false,
            "reasoning": {"effort": "high", "summary": "auto"}, "service_tier": "auto", "truncation": "disabled",
            "text": {"format": {"type": "json_schema", "name": "out", "schema": {"type": "object"}, "strict": true},
                     "verbosity": "low"}
        }));
        assert!(ingress.stream);
        let request = &ingress.request;
        assert_eq!(request.conversation.system, vec!["Be terse.".to_owned()]);
        assert_eq!(request.conversation.turns[0].content, vec![ContentBlock::Text("Hello".into())]);
        assert_eq!(request.max_output_tokens, Some(300));
        assert_eq!(request.temperature, Some(0.5));
        assert_eq!(request.reasoning_effort, Some(Effort::High));
        assert_eq!(request.response_schema.as_ref().unwrap().name, "out");
        assert_eq!(ingress.echo.get("parallel_tool_calls"), Some(json!(false)));
        assert_eq!(ingress.echo.get("metadata"), Some(json!({"a": "b"})));
        assert!(!ingress.echo.store, "storing is the route's to say");
        assert!(request.caller.is_none(), "`user` never sets who calls");
        let recorded = request.client.as_ref().and_then(|client| client.metadata.clone()).unwrap();
        assert_eq!(
            recorded,
            json!({"metadata": {"a": "b"}, "client_metadata": {"x": 1}, "safety_identifier": "s", "user": "u"})
        );
        let off = map(json!({"model": "m", "input": "x", "reasoning": {"effort": "none"}})).request;
        assert!(off.reasoning_off);
    }

    /// `max_tool_calls` and `context_management` go as native fields (a
    /// provider that does not take them has them dropped and noted), the bound
    /// is echoed, and the fields OpenAI sends empty by default are accepted.
    #[test]
    fn max_tool_calls_and_context_management_go_natively() {
        let compaction = json!([{"type": "compaction", "compact_threshold": 1000}]);
        let ingress = map(json!({"model": "m", "input": "x", "max_tool_calls": 2, "context_management": compaction,
                                 "conversation": null, "prompt": null, "top_logprobs": 0}));
        let native = ingress.request.native.as_deref().unwrap();
        let fields: Vec<(&str, &Value)> = native.fields.iter().map(|(name, value)| (name.as_str(), value)).collect();
        assert_eq!(fields, [("max_tool_calls", &json!(2)), ("context_management", &compaction)]);
        assert_eq!(native.dialect, DIALECT);
        assert_eq!(ingress.echo.get("max_tool_calls"), Some(json!(2)));
        assert_eq!(map(json!({"model": "m", "input": "x"})).echo.get("max_tool_calls"), Some(Value::Null));
    }

    #[test]
    fn a_hosted_tools_items_are_placed_in_the_assistant_turn_they_follow() {
        let search = json!({"type": "web_search_call", "id": "ws_1", "status": "completed"});
        let cited = json!({"type": "message", "role": "assistant", "content": [
            {"type": "output_text", "text": "Cited.", "annotations": [{"type": "url_citation"}]}]});
        let ingress = map(json!({"model": "m", "input": [
            {"role": "user", "content": "q"}, search, cited, {"role": "user", "content": "thanks"}
        ]}));
        let turns = &ingress.request.conversation.turns;
        assert_eq!(turns.len(), 3);
        assert_eq!(turns[1].content, [ContentBlock::Text("Cited.".into())], "the annotated text, neutrally");
        let native = ingress.request.native.as_deref().unwrap();
        assert_eq!(
            native.fields,
            [(
                "native_blocks".to_owned(),
                json!([
                    {"turn": 1, "at": 0, "block": search, "replaces": false},
                    {"turn": 1, "at": 1, "block": cited, "replaces": true}
                ])
            )]
        );
    }

    #[test]
    fn items_map_to_turns_tools_and_results() {
        let ingress = map(json!({
            "model": "m",
            "tools": [{"type": "function", "name": "get_weather", "parameters": {"type": "object"}},
                      {"type": "custom", "name": "apply_patch"},
                      {"type": "namespace", "name": "crm", "description": "", "tools": [
                          {"type": "function", "name": "lookup"}]},
                      {"type": "web_search"}],
            "tool_choice": {"type": "function", "name": "get_weather"},
            "input": [
                {"role": "developer", "content": "No emoji."},
                {"type": "message", "role": "system", "content": [{"type": "input_text", "text": "Be kind."}]},
                {"role": "user", "content": [
                    {"type": "input_text", "text": "What is this?"},
                    {"type": "input_image", "image_url": "data:image/png;base64,iVBOR", "detail": "auto"},
                    {"type": "input_file", "file_data": "data:application/pdf;base64,JVBE", "filename": "a.pdf"}]},
                {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "hm"}]},
                {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Checking.", "annotations": []}]},
                {"type": "function_call", "call_id": "call_1", "name": "get_weather", "arguments": "{\"city\":\"Paris\"}"},
                {"type": "function_call", "call_id": "call_2", "name": "lookup", "namespace": "crm", "arguments": ""},
                {"type": "custom_tool_call", "call_id": "call_3", "name": "apply_patch", "input": "patch"},
                {"type": "function_call_output", "call_id": "call_1", "output": "18C"},
                {"type": "function_call_output", "call_id": "call_2", "output": [{"type": "input_text", "text": "found"}]},
                {"type": "custom_tool_call_output", "call_id": "call_3", "output": "done"}
            ]
        }));
        let native = ingress.request.native.as_deref().unwrap();
        let fields: Vec<(&str, &Value)> = native.fields.iter().map(|(name, value)| (name.as_str(), value)).collect();
        assert_eq!(fields[0], ("server_tools.web_search", &json!([{"type": "web_search"}])));
        assert_eq!(fields[2], ("namespace_tools", &json!([{"name": "crm", "description": "", "tools": ["lookup"]}])));
        assert_eq!(native.rendered_neutrally, ["custom_tools", "namespace_tools"], "both go as functions elsewhere");
        let conversation = &ingress.request.conversation;
        assert_eq!(conversation.system, vec!["No emoji.".to_owned(), "Be kind.".to_owned()]);
        assert_eq!(conversation.tool_choice, Some(ToolChoice::Named("get_weather".into())));
        assert_eq!(conversation.turns.len(), 3, "a summary-only reasoning item is left out");
        let user = &conversation.turns[0].content;
        assert!(matches!(&user[1], ContentBlock::Image(m) if m.mime_type == "image/png"));
        assert!(matches!(&user[2], ContentBlock::Document(m) if m.mime_type == "application/pdf"));
        let assistant = &conversation.turns[1].content;
        assert_eq!(assistant[0], ContentBlock::Text("Checking.".into()));
        assert!(matches!(&assistant[2], ContentBlock::ToolUse(c) if c.name == "crm__lookup" && c.input_json == "{}"));
        assert!(matches!(&assistant[3], ContentBlock::ToolUse(c)
            if c.name == "apply_patch" && serde_json::from_str::<Value>(&c.input_json).unwrap() == json!({"input": "patch"})));
        let results = &conversation.turns[2].content;
        assert_eq!(results.len(), 3);
        assert!(matches!(&results[1], ContentBlock::ToolResult(r)
            if r.tool_use_id == "call_2" && r.content == vec![LeafBlock::Text("found".into())]));
    }

    #[test]
    fn sealed_reasoning_opens_into_the_assistant_turn_and_a_foreign_item_is_refused() {
        let seal = ReasoningSeal::random().unwrap();
        let thinking = Thinking { text: "Think.".into(), signature: Some("sig".into()), redacted: false };
        let sealed = seal.seal("claude", std::slice::from_ref(&thinking)).unwrap();
        let body = |content: &str| {
            json!({"model": "claude", "input": [
                {"role": "user", "content": "Hi"},
                {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": content},
                {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"},
                {"type": "function_call_output", "call_id": "c", "output": "ok"}
            ]})
        };
        let parsed = Body::parse(body(&sealed).to_string().as_bytes()).unwrap();
        assert!(parsed.carries_sealed_reasoning());
        let ingress =
            into_chat_request(parsed, Some(Unseal { seal: &seal, entry: "claude" }), HostedTools::Drop).unwrap();
        let assistant = &ingress.request.conversation.turns[1].content;
        assert_eq!(assistant[0], ContentBlock::Thinking(thinking));
        assert!(matches!(&assistant[1], ContentBlock::ToolUse(_)));

        for (content, entry) in [(sealed.as_str(), "gpt"), ("gAAAAABforeign", "claude")] {
            let parsed = Body::parse(body(content).to_string().as_bytes()).unwrap();
            let error = into_chat_request(parsed, Some(Unseal { seal: &seal, entry }), HostedTools::Drop).unwrap_err();
            assert!(error.message.starts_with("input[1]: the reasoning item's `encrypted_content` does not open"));
        }
    }

    #[test]
    fn bad_requests_are_refused_naming_the_problem() {
        let cases = [
            (json!({"model": "m"}), "`input` is required"),
            (json!({"model": "m", "input": "x", "frequency_penalty": 1}), "unknown field `frequency_penalty`"),
            (json!({"model": "m", "input": "x", "background": true}), "`background: true` is not supported"),
            (json!({"model": "m", "input": "x", "truncation": "auto"}), "`truncation: auto`"),
            (json!({"model": "m", "input": "x", "conversation": "conv_1"}), "continue one with `previous_response_id`"),
            (json!({"model": "m", "input": "x", "prompt": {"id": "pmpt_1"}}), "send its text as `instructions`"),
            (json!({"model": "m", "input": "x", "moderation": {"mode": "block"}}), "`moderation` is not supported"),
            (json!({"model": "m", "input": "x", "top_logprobs": 3}), "carry no log probabilities"),
            (json!({"model": "m", "input": "x", "max_tool_calls": 0}), "`max_tool_calls` must be at least 1"),
            (json!({"model": "m", "input": "x", "max_tool_calls": -1}), "invalid body"),
            (json!({"model": "m", "input": "x", "context_management": {}}), "`context_management` must be a list"),
            (json!({"model": "m", "input": "x", "include": ["message.output_text.logprobs"]}), "not supported"),
            (json!({"model": "m", "input": "x", "top_p": 2}), "`top_p` 2 is outside"),
            (json!({"model": "m", "input": "x", "reasoning": {"effort": "huge"}}), "unknown `reasoning.effort`"),
            (json!({"model": "m", "input": "x", "text": {"format": {"type": "xml"}}}), "unknown `text.format`"),
            (json!({"model": "m", "input": "x", "text": {"format": {"type": "json_schema"}}}), "`schema` object"),
            (json!({"model": "m", "input": "x", "tool_choice": {"type": "web_search"}}), "not supported"),
            (json!({"model": "m", "input": []}), "holds no user or assistant item"),
            (json!({"model": "m", "input": [{"role": "robot", "content": "x"}]}), "input[0]: unknown role"),
            (json!({"model": "m", "input": [{"type": "item_reference", "id": "x"}]}), "`previous_response_id`"),
            (json!({"model": "m", "input": [{"type": "computer_call"}]}), "`computer_call` is not supported"),
            (json!({"model": "m", "input": [{"type": "function_call", "name": "f"}]}), "needs `arguments`"),
            (
                json!({"model": "m", "input": [{"role": "user", "content": [{"type": "input_file", "file_id": "f"}]}]}),
                "`file_id` is not supported",
            ),
            (
                json!({"model": "m", "input": [{"type": "reasoning", "summary": [], "encrypted_content": "x"}]}),
                "cannot be opened here",
            ),
            (json!({"model": "m", "input": 3}), "`input` must be a string or an array of items"),
            (json!({"model": "m", "input": [{"content": "x"}]}), "an item needs `type`"),
            (json!({"model": "m", "input": [{"type": "message", "content": "x"}]}), "a message needs `role`"),
            (json!({"model": "m", "input": [{"role": "user", "content": 3}]}), "a string or an array of parts"),
            (
                json!({"model": "m", "input": [{"role": "user", "content": [{"type": "audio"}]}]}),
                "`audio` is not supported",
            ),
            (
                json!({"model": "m", "input": [{"role": "developer", "content": [
                    {"type": "input_image", "image_url": "https://x/y.png"}]}]}),
                "a `developer` message holds text only",
            ),
            (
                json!({"model": "m", "input": [{"role": "user", "content": [{"type": "input_image"}]}]}),
                "needs `image_url`",
            ),
            (
                json!({"model": "m", "input": [{"role": "user", "content": [{"type": "input_image", "file_id": "f"}]}]}),
                "by `file_id` is not supported",
            ),
            (
                json!({"model": "m", "input": [{"role": "user", "content": [{"type": "input_file"}]}]}),
                "`file_data` or `file_url`",
            ),
            (
                json!({"model": "m", "input": [{"type": "custom_tool_call", "call_id": "c", "name": "f"}]}),
                "needs `input`",
            ),
            (
                json!({"model": "m", "input": [{"type": "function_call_output", "call_id": "c", "output": 3}]}),
                "`output` must be",
            ),
            (
                json!({"model": "m", "input": [{"type": "function_call_output", "call_id": "c", "output": [
                    {"type": "refusal", "refusal": "no"}, {"type": "input_image"}]}]}),
                "needs `image_url`",
            ),
            (json!({"model": "m", "input": "x", "tool_choice": "sometimes"}), "unknown tool_choice `sometimes`"),
            (json!({"model": "m", "input": "x", "tool_choice": {"type": "function"}}), "needs `name`"),
            (json!({"model": "m", "input": "x", "tool_choice": 3}), "a string or an object"),
        ];
        for (body, expected) in cases {
            let message = error(body.clone());
            assert!(message.contains(expected), "{body}: {message:?} should mention {expected:?}");
        }
    }
}
