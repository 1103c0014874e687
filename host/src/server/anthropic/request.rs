//! `POST /v1/messages` bodies → [`ChatRequest`]. The Messages API already keeps
//! system content apart and alternates user and assistant turns, so the mapping
//! is close to one-to-one: blocks become content blocks, consecutive same-role
//! messages merge into one turn, a `cache_control` on any block of a message marks
//! its turn as a cache breakpoint.
//!
//! Every top-level field the Messages API defines (its beta surface included,
//! as the `anthropic` SDK's `MessageCreateParams` lists them) is accepted, and
//! then translated into the neutral request, carried as a native field, or
//! dropped with a note — the book's per-field table (docs/src/routes/anthropic.md) says which. A native
//! field ([`NativeAsk`]: `top_k`, `context_management`, `container`,
//! `mcp_servers`, `service_tier`, the cache TTL) goes to a provider whose
//! component takes it (WIT 0.4.0's `native`: Anthropic's surfaces); for any
//! other, and for the fields never sent, the call's record notes it
//! (`field_dropped:NAME`) and the answer names it in `x-weir-dropped-fields`.
//! Hosted tools (server tools Anthropic runs, and its schema-less tool types)
//! are native too (`server_tools.<type>`): sent to a provider that runs them
//! (the direct API's server tools), dropped for any other (`tool_dropped:TYPE`,
//! `x-weir-dropped-tools`) or, under `hosted_tools = "refuse"`, refused. A
//! history's own blocks (`server_tool_use`, `web_search_tool_result`, ..., and
//! a text's `citations`) are native as well (`native_blocks`, in place; see
//! [`own_block`]). A top-level field that is not
//! Anthropic's is a 400 naming it: it may change what the caller is asking for.
//! Inside blocks and tools, unknown keys (`citations`, `title`, ...) are
//! ignored as the reference advises.

use serde::Deserialize;
use serde_json::{Value, json};

use crate::catalog::HostedTools;
use std::sync::Arc;

use crate::chat::{ChatRequest, HOSTED_TOOL_FIELD, NATIVE_BLOCKS_FIELD, NativeAsk};
use crate::failure::Category;
use crate::record::ClientFacts;
use crate::server::error::ApiError;
use crate::types::{
    ContentBlock, Conversation, LeafBlock, Media, MediaSource, ResponseSchema, Thinking, ToolChoice, ToolDefinition,
    ToolResult, ToolUse, TurnRole,
};

/// The smallest `budget_tokens` the Messages API accepts.
const MIN_THINKING_BUDGET: u32 = 1024;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Body {
    model: String,
    max_tokens: Option<u32>,
    messages: Vec<Message>,
    system: Option<Value>,
    #[serde(default)]
    stop_sequences: Vec<String>,
    temperature: Option<f64>,
    #[serde(default)]
    stream: bool,
    #[serde(default)]
    tools: Vec<Value>,
    tool_choice: Option<Value>,
    thinking: Option<Value>,
    /// Top-level automatic caching: a breakpoint on the last turn.
    cache_control: Option<Value>,
    top_p: Option<f32>,
    /// Recorded (`user_id`); never who the caller is.
    metadata: Option<Metadata>,
    output_config: Option<OutputConfig>,
    /// The deprecated spelling of `output_config.format`.
    output_format: Option<Value>,
    // Anthropic's own fields with no slot in the neutral request: sent to a
    // provider that takes them (see `native_fields`), else dropped and noted;
    // the last five are never sent (see `never_sent`).
    top_k: Option<Value>,
    context_management: Option<Value>,
    container: Option<Value>,
    mcp_servers: Option<Value>,
    service_tier: Option<Value>,
    speed: Option<Value>,
    inference_geo: Option<Value>,
    diagnostics: Option<Value>,
    fallbacks: Option<Value>,
    fallback_credit_token: Option<Value>,
}

impl Body {
    /// The fields present that a provider taking Anthropic's own fields is
    /// sent as written (`native.support` says which it takes; the call drops
    /// and notes the rest). A `null` is absent.
    fn native_fields(&self) -> Vec<(String, Value)> {
        let fields = [
            ("top_k", &self.top_k),
            ("context_management", &self.context_management),
            ("container", &self.container),
            ("mcp_servers", &self.mcp_servers),
            ("service_tier", &self.service_tier),
        ];
        fields
            .into_iter()
            .filter(|(_, value)| present(value.as_ref()))
            .filter_map(|(name, value)| value.clone().map(|value| (name.to_owned(), value)))
            .collect()
    }

    /// The fields present that no provider is sent, by name, in the order the
    /// README's table lists them: each would change what the call costs or
    /// where it runs behind the gateway's back (`speed`'s fast mode is priced
    /// apart, `inference_geo` overrides the deployment's data residency,
    /// `fallbacks` serves another model than the entry's), or is
    /// Anthropic's own bookkeeping (`diagnostics`, `fallback_credit_token`).
    fn never_sent(&self) -> Vec<&'static str> {
        let fields: [(&'static str, &Option<Value>); 5] = [
            ("speed", &self.speed),
            ("inference_geo", &self.inference_geo),
            ("diagnostics", &self.diagnostics),
            ("fallbacks", &self.fallbacks),
            ("fallback_credit_token", &self.fallback_credit_token),
        ];
        fields.into_iter().filter(|(_, value)| present(value.as_ref())).map(|(name, _)| name).collect()
    }

    /// The longest prompt-cache TTL the request asks for anywhere (`1h` over
    /// `5m`): the gateway plans its own breakpoints, so one TTL applies to
    /// all of them. A TTL that is neither is the caller's error.
    fn cache_ttl(&self) -> Result<Option<&'static str>, ApiError> {
        let system = self.system.as_ref().and_then(Value::as_array).into_iter().flatten();
        let messages = self.messages.iter().filter_map(|m| m.content.as_array()).flatten();
        let blocks = system.chain(messages).chain(self.tools.iter());
        let asked = blocks.filter_map(|block| block.get("cache_control")).chain(self.cache_control.as_ref());
        let mut longest = None;
        for ttl in asked.filter_map(|cache| cache.get("ttl")).filter(|ttl| !ttl.is_null()) {
            match ttl.as_str() {
                Some("1h") => longest = Some("1h"),
                Some("5m") => longest = longest.or(Some("5m")),
                _ => {
                    return Err(ApiError::invalid_request(format!(
                        "`cache_control.ttl` {ttl} is not \"5m\" or \"1h\""
                    )));
                }
            }
        }
        Ok(longest)
    }
}

/// The dialect name `native.support` answers for Anthropic's fields.
pub const DIALECT: &str = "anthropic-messages";

/// The native field naming the prompt-cache TTL (see [`Body::cache_ttl`]).
const CACHE_TTL: &str = "cache_control.ttl";

/// `metadata`: the API defines `user_id` alone and refuses other keys.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Metadata {
    user_id: Option<String>,
}

/// The longest `metadata.user_id` the record keeps, in characters: the body
/// limit alone would let one call write megabytes into the ledger. A longer
/// one is cut and the record notes `metadata_truncated`.
const MAX_USER_ID_CHARS: usize = 512;

/// `output_config`: strict like the top level, since each key changes the answer.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct OutputConfig {
    effort: Option<String>,
    format: Option<Value>,
    task_budget: Option<Value>,
}

#[derive(Debug, Deserialize)]
struct Message {
    role: String,
    content: Value,
}

/// What the request is parsed for: a call, or `count_tokens` (no `max_tokens`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Purpose {
    Call,
    Count,
}

/// A parsed request, and what its answer must say about it.
#[derive(Debug)]
pub struct Ingress {
    pub request: ChatRequest,
    pub stream: bool,
    /// `thinking.display: "omitted"`: thinking blocks are answered without
    /// their text, signatures kept (as Anthropic answers them).
    pub omit_thinking: bool,
    /// Top-level (and `tools[].`, `output_config.`) fields accepted and never
    /// sent, for `x-weir-dropped-fields`; the native fields and hosted tools
    /// the serving provider does not take are added from the call's stamp.
    pub dropped_fields: Vec<&'static str>,
}

/// Parses and maps a request body. Errors quote only the caller's own input.
pub fn into_chat_request(body: &[u8], hosted_tools: HostedTools, purpose: Purpose) -> Result<Ingress, ApiError> {
    let body: Body =
        serde_json::from_slice(body).map_err(|e| ApiError::invalid_request(format!("invalid body: {e}")))?;
    let mut dropped_fields = body.never_sent();
    let mut native_fields = body.native_fields();
    if let Some(ttl) = body.cache_ttl()? {
        native_fields.push((CACHE_TTL.to_owned(), Value::from(ttl)));
    }
    let top_p = crate::server::sampling::top_p(body.top_p)?;
    let max_tokens = match (body.max_tokens, purpose) {
        (Some(max_tokens), _) => Some(max_tokens),
        (None, Purpose::Count) => None,
        (None, Purpose::Call) => return Err(ApiError::invalid_request("`max_tokens` is required")),
    };
    if let Some(temperature) = body.temperature
        && !(0.0..=1.0).contains(&temperature)
    {
        return Err(ApiError::invalid_request(format!("`temperature` {temperature} is outside 0.0–1.0")));
    }
    let user_id = body.metadata.and_then(|metadata| metadata.user_id);
    let metadata_truncated = user_id.as_ref().is_some_and(|id| id.chars().count() > MAX_USER_ID_CHARS);
    let metadata = user_id.map(|id| json!({"user_id": id.chars().take(MAX_USER_ID_CHARS).collect::<String>()}));
    let thinking = thinking(body.thinking.as_ref(), max_tokens)?;
    let (effort, schema) = output_config(body.output_config, body.output_format.as_ref(), &mut dropped_fields)?;
    let Tools { offered, hosted, hosted_names } = tools(body.tools, &mut dropped_fields)?;
    native_fields.extend(hosted);
    let tool_choice = body.tool_choice.as_ref().map(tool_choice).transpose()?;
    refuse_choice_of_hosted(tool_choice.as_ref(), &offered, &hosted_names)?;
    let mut conversation = Conversation {
        system: system(body.system.as_ref())?,
        // As on the OpenAI route: the host plans a breakpoint on the system prompt
        // for every call, so a `cache_control` on a system block asks for nothing more.
        cache_system: true,
        turns: Vec::new(),
        tools: offered,
        tool_choice,
    };
    let mut system_as_user = false;
    let mut own_blocks = Vec::new();
    for (index, message) in body.messages.into_iter().enumerate() {
        system_as_user |= message.role == "system";
        add_message(&mut conversation, message, &mut own_blocks)
            .map_err(|e| ApiError::invalid_request(format!("messages[{index}]: {e}")))?;
    }
    if !own_blocks.is_empty() {
        native_fields.push((NATIVE_BLOCKS_FIELD.to_owned(), Value::Array(own_blocks)));
    }
    if conversation.turns.is_empty() {
        return Err(ApiError::invalid_request("`messages` is empty"));
    }
    if present(body.cache_control.as_ref())
        && let Some(last) = conversation.turns.last_mut()
    {
        last.cache = true;
    }
    let mut request = ChatRequest::new(body.model, conversation);
    request.max_output_tokens = max_tokens;
    request.temperature = body.temperature;
    request.top_p = top_p;
    request.stop = body.stop_sequences;
    request.thinking_budget = thinking.budget;
    request.reasoning_off = thinking.off;
    request.reasoning_effort = effort;
    request.response_schema = schema;
    request.route_notes = dropped_fields
        .iter()
        .map(|field| format!("field_dropped:{field}"))
        .chain(system_as_user.then(|| SYSTEM_MESSAGE_AS_USER.to_owned()))
        .chain(metadata_truncated.then(|| METADATA_TRUNCATED.to_owned()))
        .collect();
    request.client = Some(ClientFacts { metadata, betas: Vec::new() });
    if !native_fields.is_empty() {
        let refuse_hosted_tools = hosted_tools == HostedTools::Refuse;
        let ask = NativeAsk { dialect: DIALECT, fields: native_fields, refuse_hosted_tools, ..NativeAsk::default() };
        request.native = Some(Arc::new(ask));
    }
    Ok(Ingress { request, stream: body.stream, omit_thinking: thinking.omitted, dropped_fields })
}

/// The record's note for a request with a mid-conversation `system` message,
/// sent as user text (see [`add_message`]).
const SYSTEM_MESSAGE_AS_USER: &str = "system_message_as_user";

/// The record's note for a `metadata.user_id` longer than [`MAX_USER_ID_CHARS`].
const METADATA_TRUNCATED: &str = "metadata_truncated";

/// A value that is there: `null` counts as absent, as the API takes it.
fn present(value: Option<&Value>) -> bool {
    value.is_some_and(|value| !value.is_null())
}

/// What `thinking` asks for.
#[derive(Debug, Default)]
struct ThinkingAsked {
    /// An explicit budget (`enabled`).
    budget: Option<u32>,
    /// `disabled`: reasoning off, no default applies.
    off: bool,
    /// `display: "omitted"`.
    omitted: bool,
}

/// `{"type":"enabled","budget_tokens":N}` with the API's own bounds (at least
/// 1024, below `max_tokens`, inside which thinking counts); `adaptive`:
/// reasoning on at the call's effort, with no budget of the caller's;
/// `disabled`: off. `display` (`summarized`, `omitted`) on either of the first two.
fn thinking(thinking: Option<&Value>, max_tokens: Option<u32>) -> Result<ThinkingAsked, ApiError> {
    let Some(thinking) = thinking.filter(|thinking| !thinking.is_null()) else { return Ok(ThinkingAsked::default()) };
    let omitted = match thinking.get("display") {
        None | Some(Value::Null) => false,
        Some(Value::String(display)) if display == "summarized" => false,
        Some(Value::String(display)) if display == "omitted" => true,
        Some(other) => {
            return Err(ApiError::invalid_request(format!(
                "unknown `thinking.display` {other} (expected `summarized` or `omitted`)"
            )));
        }
    };
    match kind(thinking) {
        "disabled" => Ok(ThinkingAsked { off: true, ..ThinkingAsked::default() }),
        "adaptive" => Ok(ThinkingAsked { omitted, ..ThinkingAsked::default() }),
        "enabled" => {
            let budget = thinking
                .get("budget_tokens")
                .and_then(Value::as_u64)
                .and_then(|budget| u32::try_from(budget).ok())
                .ok_or_else(|| ApiError::invalid_request("`thinking.budget_tokens` must be a positive integer"))?;
            if budget < MIN_THINKING_BUDGET {
                return Err(ApiError::invalid_request(format!(
                    "`thinking.budget_tokens` must be at least {MIN_THINKING_BUDGET}, got {budget}"
                )));
            }
            if let Some(max_tokens) = max_tokens
                && budget >= max_tokens
            {
                return Err(ApiError::invalid_request(format!(
                    "`thinking.budget_tokens` ({budget}) must be less than `max_tokens` ({max_tokens}): thinking \
                     counts inside it"
                )));
            }
            Ok(ThinkingAsked { budget: Some(budget), off: false, omitted })
        }
        other => Err(ApiError::invalid_request(format!(
            "unknown thinking type `{other}` (expected `enabled`, `adaptive` or `disabled`)"
        ))),
    }
}

/// `output_config.effort` (through the effort policy, as OpenAI's
/// `reasoning_effort`), `output_config.format` or the older `output_format`
/// (a JSON-schema answer, through the structured-answer gate);
/// `task_budget` has no neutral slot and is dropped.
fn output_config(
    config: Option<OutputConfig>,
    output_format: Option<&Value>,
    dropped: &mut Vec<&'static str>,
) -> Result<(Option<crate::types::Effort>, Option<ResponseSchema>), ApiError> {
    let (effort, format) = match config {
        Some(OutputConfig { effort, format, task_budget }) => {
            if present(task_budget.as_ref()) {
                dropped.push("output_config.task_budget");
            }
            (effort, format)
        }
        None => (None, None),
    };
    let effort = effort
        .map(|word| {
            crate::types::effort_from_word(&word).ok_or_else(|| {
                ApiError::invalid_request(format!(
                    "unknown `output_config.effort` `{word}` (expected low, medium, high, xhigh or max)"
                ))
            })
        })
        .transpose()?;
    let format = format.filter(|format| !format.is_null()).or_else(|| output_format.filter(|f| !f.is_null()).cloned());
    let schema = format
        .map(|format| match (kind(&format), format.get("schema")) {
            ("json_schema", Some(schema)) => {
                Ok(ResponseSchema { name: "response".to_owned(), schema_json: schema.to_string() })
            }
            ("json_schema", None) => Err(ApiError::invalid_request("a `json_schema` output format needs `schema`")),
            (other, _) => {
                Err(ApiError::invalid_request(format!("unknown output format type `{other}` (expected `json_schema`)")))
            }
        })
        .transpose()?;
    Ok((effort, schema))
}

/// A string, or an array of `text` blocks.
fn system(system: Option<&Value>) -> Result<Vec<String>, ApiError> {
    match system {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::String(text)) => Ok(vec![text.clone()]),
        Some(Value::Array(blocks)) => blocks
            .iter()
            .enumerate()
            .map(|(index, block)| match (kind(block), block.get("text").and_then(Value::as_str)) {
                ("text", Some(text)) => Ok(text.to_owned()),
                ("text", None) => Err(ApiError::invalid_request(format!("system[{index}]: a text block needs `text`"))),
                (other, _) => Err(ApiError::invalid_request(format!(
                    "system[{index}]: only text blocks are allowed in `system`, not `{other}`"
                ))),
            })
            .collect(),
        Some(_) => Err(ApiError::invalid_request("`system` must be a string or an array of text blocks")),
    }
}

/// Adds a message to the conversation; its own blocks (see [`own_block`])
/// go to `own_blocks`, placed by turn and position.
fn add_message(conversation: &mut Conversation, message: Message, own_blocks: &mut Vec<Value>) -> Result<(), String> {
    let role = match message.role.as_str() {
        "user" => TurnRole::User,
        "assistant" => TurnRole::Assistant,
        "system" => return add_system_message(conversation, &message.content),
        other => return Err(format!("unknown role `{other}` (expected `user`, `assistant` or `system`)")),
    };
    // Where this message's blocks land: merged into the last turn when it
    // has the same role, else a turn of its own.
    let (turn, offset) = match conversation.turns.last() {
        Some(last) if last.role == role => {
            let turn = conversation.turns.len() - 1;
            (turn, last.content.len() + crate::chat::inserted_into(own_blocks, turn))
        }
        _ => (conversation.turns.len(), 0),
    };
    let (blocks, cache) = match message.content {
        Value::String(text) => (vec![ContentBlock::Text(text)], false),
        Value::Array(blocks) => {
            let cache = blocks.iter().any(has_cache_control);
            let mut neutral = Vec::with_capacity(blocks.len());
            for (index, block) in blocks.iter().enumerate() {
                let at = offset + index;
                match own_block(block) {
                    Some(OwnBlock::Alone) => {
                        own_blocks.push(json!({"turn": turn, "at": at, "block": block, "replaces": false}));
                        continue;
                    }
                    Some(OwnBlock::OverNeutral) => {
                        own_blocks.push(json!({"turn": turn, "at": at, "block": block, "replaces": true}));
                    }
                    None => {}
                }
                neutral.push(content_block(block, role).map_err(|e| format!("content[{index}]: {e}"))?);
            }
            (neutral, cache)
        }
        _ => return Err("`content` must be a string or an array of blocks".to_owned()),
    };
    conversation.push_turn(role, blocks, cache);
    Ok(())
}

/// The blocks only Anthropic's own API reads: server tools' calls and
/// results (the block types of the `anthropic` SDK's `ContentBlock` that the
/// neutral records have no case for, and MCP's), sent back as the caller
/// wrote them.
const OWN_BLOCK_TYPES: &[&str] = &[
    "server_tool_use",
    "web_search_tool_result",
    "web_fetch_tool_result",
    "code_execution_tool_result",
    "bash_code_execution_tool_result",
    "text_editor_code_execution_tool_result",
    "tool_search_tool_result",
    "container_upload",
    "mcp_tool_use",
    "mcp_tool_result",
];

/// How a history block of Anthropic's own goes.
enum OwnBlock {
    /// Only as itself: a provider that does not read it cannot be sent the call.
    Alone,
    /// In place of its neutral rendering (a text with `citations`): a provider
    /// that does not read it gets the text.
    OverNeutral,
}

fn own_block(block: &Value) -> Option<OwnBlock> {
    match kind(block) {
        "text" if present(block.get("citations")) => Some(OwnBlock::OverNeutral),
        own if OWN_BLOCK_TYPES.contains(&own) => Some(OwnBlock::Alone),
        _ => None,
    }
}

/// A mid-conversation `system` message (Anthropic's beta: privileged context
/// from that point on). The neutral conversation holds system text only ahead
/// of the turns, and moving it there would change every earlier turn's cache
/// prefix, so it goes as user text in a `<system-reminder>` tag — the form
/// Claude Code itself gives the same context for models without such messages
/// — merged into the user turn it follows. The record notes
/// `system_message_as_user`.
fn add_system_message(conversation: &mut Conversation, content: &Value) -> Result<(), String> {
    let (texts, cache) = match content {
        Value::String(text) => (vec![text.as_str()], false),
        Value::Array(blocks) => {
            let texts = blocks
                .iter()
                .enumerate()
                .map(|(index, block)| match (kind(block), text_at(block, "text")) {
                    ("text", Some(text)) => Ok(text),
                    ("text", None) => Err(format!("content[{index}]: a text block needs `text`")),
                    (other, _) => {
                        Err(format!("content[{index}]: a system message holds text blocks only, not `{other}`"))
                    }
                })
                .collect::<Result<Vec<_>, _>>()?;
            (texts, blocks.iter().any(has_cache_control))
        }
        _ => return Err("`content` must be a string or an array of blocks".to_owned()),
    };
    let text = format!("<system-reminder>\n{}\n</system-reminder>", texts.join("\n"));
    conversation.push_turn(TurnRole::User, vec![ContentBlock::Text(text)], cache);
    Ok(())
}

fn has_cache_control(block: &Value) -> bool {
    block.get("cache_control").is_some_and(|value| !value.is_null())
}

fn kind(block: &Value) -> &str {
    block.get("type").and_then(Value::as_str).unwrap_or_default()
}

fn text_at<'a>(block: &'a Value, field: &str) -> Option<&'a str> {
    block.get(field).and_then(Value::as_str)
}

fn content_block(block: &Value, role: TurnRole) -> Result<ContentBlock, String> {
    let only = |wanted: TurnRole, what: &str| {
        if role == wanted {
            Ok(())
        } else {
            let place = if wanted == TurnRole::User { "a user" } else { "an assistant" };
            Err(format!("a `{what}` block belongs in {place} message"))
        }
    };
    match kind(block) {
        "text" => Ok(ContentBlock::Text(text_at(block, "text").ok_or("a text block needs `text`")?.to_owned())),
        "image" => Ok(ContentBlock::Image(image(block)?)),
        "document" => document(block),
        "tool_use" => {
            only(TurnRole::Assistant, "tool_use")?;
            let input = match block.get("input") {
                None | Some(Value::Null) => "{}".to_owned(),
                Some(input @ Value::Object(_)) => input.to_string(),
                Some(_) => return Err("a tool_use block's `input` must be an object".to_owned()),
            };
            Ok(ContentBlock::ToolUse(ToolUse {
                id: text_at(block, "id").ok_or("a tool_use block needs `id`")?.to_owned(),
                name: text_at(block, "name").ok_or("a tool_use block needs `name`")?.to_owned(),
                input_json: input,
            }))
        }
        "tool_result" => {
            only(TurnRole::User, "tool_result")?;
            let tool_use_id = text_at(block, "tool_use_id").ok_or("a tool_result block needs `tool_use_id`")?;
            Ok(ContentBlock::ToolResult(ToolResult {
                tool_use_id: tool_use_id.to_owned(),
                content: tool_result_content(block.get("content"))?,
                is_error: block.get("is_error").and_then(Value::as_bool).unwrap_or(false),
            }))
        }
        "thinking" => {
            only(TurnRole::Assistant, "thinking")?;
            Ok(ContentBlock::Thinking(Thinking {
                text: text_at(block, "thinking").ok_or("a thinking block needs `thinking`")?.to_owned(),
                signature: text_at(block, "signature").map(str::to_owned),
                redacted: false,
            }))
        }
        "redacted_thinking" => {
            only(TurnRole::Assistant, "redacted_thinking")?;
            Ok(ContentBlock::Thinking(Thinking {
                text: text_at(block, "data").ok_or("a redacted_thinking block needs `data`")?.to_owned(),
                signature: None,
                redacted: true,
            }))
        }
        "" => Err("a content block needs `type`".to_owned()),
        other => Err(format!("content block type `{other}` is not supported")),
    }
}

/// `source`: `base64` (with `media_type`) or `url`.
fn image(block: &Value) -> Result<Media, String> {
    let source = block.get("source").ok_or("an image block needs `source`")?;
    match kind(source) {
        "base64" => Ok(Media {
            mime_type: text_at(source, "media_type").ok_or("a base64 source needs `media_type`")?.to_owned(),
            source: MediaSource::Base64(text_at(source, "data").ok_or("a base64 source needs `data`")?.to_owned()),
        }),
        "url" => Ok(Media {
            mime_type: "image/*".to_owned(),
            source: MediaSource::Url(text_at(source, "url").ok_or("a url source needs `url`")?.to_owned()),
        }),
        other => Err(format!("image source type `{other}` is not supported (use `base64` or `url`)")),
    }
}

/// A PDF as `base64` or `url`; a plain-text document is its text.
fn document(block: &Value) -> Result<ContentBlock, String> {
    let source = block.get("source").ok_or("a document block needs `source`")?;
    match kind(source) {
        "base64" => Ok(ContentBlock::Document(Media {
            mime_type: text_at(source, "media_type").ok_or("a base64 source needs `media_type`")?.to_owned(),
            source: MediaSource::Base64(text_at(source, "data").ok_or("a base64 source needs `data`")?.to_owned()),
        })),
        "url" => Ok(ContentBlock::Document(Media {
            mime_type: "application/pdf".to_owned(),
            source: MediaSource::Url(text_at(source, "url").ok_or("a url source needs `url`")?.to_owned()),
        })),
        "text" => Ok(ContentBlock::Text(text_at(source, "data").ok_or("a text source needs `data`")?.to_owned())),
        other => Err(format!("document source type `{other}` is not supported (use `base64`, `url` or `text`)")),
    }
}

/// A string, or an array of text / image / document blocks.
fn tool_result_content(content: Option<&Value>) -> Result<Vec<LeafBlock>, String> {
    match content {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::String(text)) => Ok(vec![LeafBlock::Text(text.clone())]),
        Some(Value::Array(blocks)) => blocks
            .iter()
            .map(|block| match kind(block) {
                "text" => Ok(LeafBlock::Text(text_at(block, "text").ok_or("a text block needs `text`")?.to_owned())),
                "image" => Ok(LeafBlock::Image(image(block)?)),
                "document" => match document(block)? {
                    ContentBlock::Document(media) => Ok(LeafBlock::Document(media)),
                    ContentBlock::Text(text) => Ok(LeafBlock::Text(text)),
                    _ => Err("unexpected document content".to_owned()),
                },
                // Tool search's answer: the named (deferred) tool is offered from
                // now on. Every tool is offered from the start here (see `tools`),
                // so the reference is kept as text naming it.
                "tool_reference" => Ok(LeafBlock::Text(format!(
                    "tool_reference: {}",
                    text_at(block, "tool_name").ok_or("a tool_reference block needs `tool_name`")?
                ))),
                other => Err(format!("tool_result content block type `{other}` is not supported")),
            })
            .collect(),
        Some(_) => Err("a tool_result's `content` must be a string or an array of blocks".to_owned()),
    }
}

/// The tools the model is offered, and the hosted ones.
struct Tools {
    offered: Vec<ToolDefinition>,
    /// One native field per hosted tool type (`server_tools.<type>`), its
    /// value the caller's definitions of that type, in order.
    hosted: Vec<(String, Value)>,
    /// By name, to check `tool_choice` against.
    hosted_names: Vec<String>,
}

/// The longest hosted tool type accepted: every Anthropic type is a short
/// identifier, and the type is echoed in a header and the record.
const MAX_TOOL_TYPE_LEN: usize = 64;

/// A `tool_choice` that can only be met by a hosted tool is refused: the
/// neutral choice names a function, and a provider that drops the hosted tool
/// would be asked to call a tool it was not offered.
fn refuse_choice_of_hosted(
    choice: Option<&ToolChoice>,
    offered: &[ToolDefinition],
    hosted_names: &[String],
) -> Result<(), ApiError> {
    let unmet = match choice {
        Some(ToolChoice::Named(name)) => hosted_names.contains(name).then(|| format!("names the hosted tool `{name}`")),
        Some(ToolChoice::Required) if offered.is_empty() && !hosted_names.is_empty() => {
            Some("is `any`, and every tool offered is a hosted one".to_owned())
        }
        _ => None,
    };
    match unmet {
        Some(what) => Err(ApiError::new(
            Category::CapabilityMismatch,
            format!("`tool_choice` {what}, which cannot be handed to the provider"),
        )),
        None => Ok(()),
    }
}

/// Client tool keys with no neutral slot: the tool is offered without them.
/// `defer_loading` (tool search loads the tool later) included: every tool is
/// offered from the start.
const CLIENT_TOOL_EXTRAS: [(&str, &str); 5] = [
    ("defer_loading", "tools.defer_loading"),
    ("strict", "tools.strict"),
    ("eager_input_streaming", "tools.eager_input_streaming"),
    ("input_examples", "tools.input_examples"),
    ("allowed_callers", "tools.allowed_callers"),
];

/// Client tools (no `type`, or `custom`: a name and an `input_schema`) are
/// offered; every other type is a tool Anthropic defines and runs or
/// schemas itself (web search, code execution, tool search, MCP toolsets,
/// bash, text editor, ...), which goes as a native field: to a provider
/// that takes its type as written, dropped (or refused under
/// `hosted_tools = "refuse"`) for any other (see `call::native`).
fn tools(tools: Vec<Value>, dropped_fields: &mut Vec<&'static str>) -> Result<Tools, ApiError> {
    let mut offered = Vec::with_capacity(tools.len());
    let mut hosted: Vec<(String, Value)> = Vec::new();
    let mut hosted_names = Vec::new();
    for (index, tool) in tools.into_iter().enumerate() {
        match tool.get("type").and_then(Value::as_str) {
            None | Some("custom") => {}
            Some(kind) => {
                let identifier = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_';
                if kind.len() > MAX_TOOL_TYPE_LEN || !kind.chars().all(identifier) {
                    return Err(ApiError::invalid_request(format!(
                        "tools[{index}]: `type` must be `custom` or one of Anthropic's tool types (a lower-case \
                         identifier)"
                    )));
                }
                hosted_names.extend(text_at(&tool, "name").map(str::to_owned));
                let field = format!("{HOSTED_TOOL_FIELD}{kind}");
                match hosted.iter_mut().find(|(name, _)| *name == field) {
                    Some((_, Value::Array(definitions))) => definitions.push(tool),
                    _ => hosted.push((field, Value::Array(vec![tool]))),
                }
                continue;
            }
        }
        for (key, field) in CLIENT_TOOL_EXTRAS {
            if present(tool.get(key)) && tool.get(key) != Some(&Value::Bool(false)) && !dropped_fields.contains(&field)
            {
                dropped_fields.push(field);
            }
        }
        let name = text_at(&tool, "name")
            .ok_or_else(|| ApiError::invalid_request(format!("tools[{index}]: a tool needs `name`")))?
            .to_owned();
        let schema = tool
            .get("input_schema")
            .filter(|schema| !schema.is_null())
            .ok_or_else(|| ApiError::invalid_request(format!("tools[{index}]: a tool needs `input_schema`")))?;
        let description = text_at(&tool, "description").unwrap_or_default().to_owned();
        offered.push(ToolDefinition { name, description, parameters_json: schema.to_string() });
    }
    Ok(Tools { offered, hosted, hosted_names })
}

/// `auto`, `any` (some tool: required), `tool` (that one), `none`. Limiting the
/// model to one call (`disable_parallel_tool_use`) has no equivalent everywhere.
fn tool_choice(choice: &Value) -> Result<ToolChoice, ApiError> {
    if choice.get("disable_parallel_tool_use").and_then(Value::as_bool) == Some(true) {
        return Err(ApiError::invalid_request(
            "`tool_choice.disable_parallel_tool_use` is not supported: the gateway cannot honour it on every provider",
        ));
    }
    match kind(choice) {
        "auto" => Ok(ToolChoice::Auto),
        "any" => Ok(ToolChoice::Required),
        "none" => Ok(ToolChoice::None),
        "tool" => text_at(choice, "name")
            .map(|name| ToolChoice::Named(name.to_owned()))
            .ok_or_else(|| ApiError::invalid_request("`tool_choice` of type `tool` needs `name`")),
        other => Err(ApiError::invalid_request(format!(
            "unknown tool_choice type `{other}` (expected `auto`, `any`, `tool` or `none`)"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::types::Effort;

    fn parse(body: Value) -> Ingress {
        into_chat_request(body.to_string().as_bytes(), HostedTools::Drop, Purpose::Call).unwrap()
    }

    fn error(body: Value) -> String {
        let error = into_chat_request(body.to_string().as_bytes(), HostedTools::Drop, Purpose::Call).unwrap_err();
        assert_eq!(error.category, crate::failure::Category::InvalidRequest);
        error.message
    }

    #[test]
    fn a_plain_request_maps_model_budget_system_and_knobs() {
        let ingress = parse(json!({
            "model": "claude", "max_tokens": 300, "system": "Be terse.", "temperature": 0.5, "top_p": 0.75,
            "stop_sequences": ["END"], "stream": true, "metadata": {"user_id": "u1"}, "service_tier": "auto",
            "messages": [{"role": "user", "content": "Hello"}]
        }));
        assert!(ingress.stream);
        let request = ingress.request;
        assert_eq!(request.model, "claude");
        assert_eq!(request.max_output_tokens, Some(300));
        assert_eq!(request.temperature, Some(0.5));
        assert_eq!(request.top_p, Some(0.75), "read as on the OpenAI route; the policy decides");
        assert_eq!(request.stop, vec!["END".to_owned()]);
        assert_eq!(request.thinking_budget, None);
        assert_eq!(request.conversation.system, vec!["Be terse.".to_owned()]);
        assert!(request.conversation.cache_system, "the system prompt is a breakpoint as on the OpenAI route");
        assert_eq!(request.conversation.turns.len(), 1);
        assert!(!request.conversation.turns[0].cache);
    }

    #[test]
    fn cache_control_marks_the_turn_and_the_top_level_one_the_last_turn() {
        let request = parse(json!({
            "model": "m", "max_tokens": 10,
            "system": [{"type": "text", "text": "A"}, {"type": "text", "text": "B", "cache_control": {"type": "ephemeral"}}],
            "messages": [
                {"role": "user", "content": [{"type": "text", "text": "long", "cache_control": {"type": "ephemeral", "ttl": "1h"}}]},
                {"role": "assistant", "content": "ok"},
                {"role": "user", "content": "next"}
            ]
        }))
        .request;
        let conversation = &request.conversation;
        assert_eq!(conversation.system, vec!["A".to_owned(), "B".to_owned()]);
        assert!(conversation.cache_system);
        let caches: Vec<bool> = conversation.turns.iter().map(|t| t.cache).collect();
        assert_eq!(caches, vec![true, false, false]);

        let automatic = parse(json!({"model": "m", "max_tokens": 10, "cache_control": {"type": "ephemeral"},
            "messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}, {"role": "user", "content": "c"}]}))
        .request;
        let caches: Vec<bool> = automatic.conversation.turns.iter().map(|t| t.cache).collect();
        assert_eq!(caches, vec![false, false, true]);
    }

    #[test]
    fn tool_use_and_tool_results_round_trip_and_same_role_messages_merge() {
        let request = parse(json!({
            "model": "m", "max_tokens": 100,
            "tools": [{"name": "get_weather", "description": "Weather", "cache_control": {"type": "ephemeral"},
                       "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}],
            "tool_choice": {"type": "any"},
            "messages": [
                {"role": "user", "content": "Weather in Paris and Rome?"},
                {"role": "assistant", "content": [
                    {"type": "thinking", "thinking": "Two cities.", "signature": "sig=="},
                    {"type": "redacted_thinking", "data": "EmwK"},
                    {"type": "text", "text": "Checking."},
                    {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}},
                    {"type": "tool_use", "id": "toolu_2", "name": "get_weather", "input": {"city": "Rome"}}
                ]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "18C"}]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_2", "is_error": true,
                     "content": [{"type": "text", "text": "no data"}]},
                    {"type": "text", "text": "Summarize."}
                ]}
            ]
        }))
        .request;
        let conversation = &request.conversation;
        assert_eq!(conversation.tool_choice, Some(ToolChoice::Required));
        assert_eq!(conversation.tools[0].name, "get_weather");
        let schema: Value = serde_json::from_str(&conversation.tools[0].parameters_json).unwrap();
        assert_eq!(schema["properties"]["city"]["type"], "string");
        assert_eq!(conversation.turns.len(), 3, "the two user messages after the tool calls are one turn");
        let assistant = &conversation.turns[1].content;
        assert_eq!(
            assistant[0],
            ContentBlock::Thinking(Thinking {
                text: "Two cities.".into(),
                signature: Some("sig==".into()),
                redacted: false
            })
        );
        assert_eq!(
            assistant[1],
            ContentBlock::Thinking(Thinking { text: "EmwK".into(), signature: None, redacted: true })
        );
        assert!(matches!(&assistant[3], ContentBlock::ToolUse(call)
            if call.id == "toolu_1" && serde_json::from_str::<Value>(&call.input_json).unwrap() == json!({"city": "Paris"})));
        let results = &conversation.turns[2].content;
        assert_eq!(
            results[0],
            ContentBlock::ToolResult(ToolResult {
                tool_use_id: "toolu_1".into(),
                content: vec![LeafBlock::Text("18C".into())],
                is_error: false
            })
        );
        assert!(matches!(&results[1], ContentBlock::ToolResult(r) if r.is_error && r.tool_use_id == "toolu_2"));
        assert_eq!(results[2], ContentBlock::Text("Summarize.".into()));
    }

    #[test]
    fn images_documents_and_tool_choices() {
        let request = parse(json!({
            "model": "m", "max_tokens": 10, "tool_choice": {"type": "tool", "name": "f"},
            "tools": [{"name": "f", "input_schema": {"type": "object"}, "type": "custom"}],
            "messages": [{"role": "user", "content": [
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBOR"}},
                {"type": "image", "source": {"type": "url", "url": "https://x/y.jpg"}},
                {"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBE"},
                 "title": "Spec", "citations": {"enabled": true}},
                {"type": "document", "source": {"type": "url", "url": "https://x/a.pdf"}},
                {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "plain"}}
            ]}]
        }))
        .request;
        let blocks = &request.conversation.turns[0].content;
        assert!(matches!(&blocks[0], ContentBlock::Image(m)
            if m.mime_type == "image/png" && m.source == MediaSource::Base64("iVBOR".into())));
        assert!(matches!(&blocks[1], ContentBlock::Image(m) if m.source == MediaSource::Url("https://x/y.jpg".into())));
        assert!(matches!(&blocks[2], ContentBlock::Document(m) if m.mime_type == "application/pdf"));
        assert!(matches!(&blocks[3], ContentBlock::Document(m)
            if m.mime_type == "application/pdf" && m.source == MediaSource::Url("https://x/a.pdf".into())));
        assert_eq!(blocks[4], ContentBlock::Text("plain".into()));
        assert_eq!(request.conversation.tool_choice, Some(ToolChoice::Named("f".into())));
        let choice = |value: Value| tool_choice(&value).unwrap();
        assert_eq!(choice(json!({"type": "auto", "disable_parallel_tool_use": false})), ToolChoice::Auto);
        assert_eq!(choice(json!({"type": "none"})), ToolChoice::None);
    }

    #[test]
    fn thinking_enabled_is_the_calls_budget_and_disabled_is_none() {
        let body = |thinking: Value| json!({"model": "m", "max_tokens": 4096, "thinking": thinking, "messages": [{"role": "user", "content": "x"}]});
        let enabled = parse(body(json!({"type": "enabled", "budget_tokens": 2048}))).request;
        assert_eq!(enabled.thinking_budget, Some(2048));
        assert_eq!(enabled.max_output_tokens, Some(4096), "the budget counts inside max_tokens");
        assert_eq!(enabled.reasoning_effort, None);
        assert_eq!(parse(body(json!({"type": "disabled"}))).request.thinking_budget, None);
        assert!(error(body(json!({"type": "enabled", "budget_tokens": 512}))).contains("at least 1024"));
        assert!(error(body(json!({"type": "enabled", "budget_tokens": 4096}))).contains("less than `max_tokens`"));
        assert!(error(body(json!({"type": "enabled"}))).contains("budget_tokens"));
        assert!(error(body(json!({"type": "sometimes"}))).contains("unknown thinking type `sometimes`"));
        assert!(error(body(json!({"type": "adaptive", "display": "full"}))).contains("thinking.display"));
    }

    #[test]
    fn adaptive_thinking_runs_at_the_effort_asked_and_display_omitted_is_kept_for_the_answer() {
        let ingress = parse(json!({"model": "m", "max_tokens": 4096,
            "thinking": {"type": "adaptive", "display": "omitted"}, "output_config": {"effort": "high"},
            "messages": [{"role": "user", "content": "x"}]}));
        assert!(ingress.omit_thinking);
        let request = ingress.request;
        assert_eq!(
            (request.reasoning_effort, request.thinking_budget, request.reasoning_off),
            (Some(Effort::High), None, false)
        );
        let defaulted = parse(json!({"model": "m", "max_tokens": 4096, "thinking": {"type": "adaptive"},
            "messages": [{"role": "user", "content": "x"}]}));
        assert!(!defaulted.omit_thinking);
        assert_eq!(defaulted.request.reasoning_effort, None, "the effort policy's default applies");
        let enabled = parse(json!({"model": "m", "max_tokens": 32000,
            "thinking": {"type": "enabled", "budget_tokens": 31999, "display": "omitted"},
            "messages": [{"role": "user", "content": "x"}]}));
        assert!(enabled.omit_thinking);
        assert_eq!(enabled.request.thinking_budget, Some(31999));
        let xhigh = parse(json!({"model": "m", "max_tokens": 10, "output_config": {"effort": "xhigh"},
            "messages": [{"role": "user", "content": "x"}]}));
        assert_eq!(xhigh.request.reasoning_effort, Some(Effort::Max));
        let bad = error(json!({"model": "m", "max_tokens": 10, "output_config": {"effort": "huge"},
            "messages": [{"role": "user", "content": "x"}]}));
        assert!(bad.contains("output_config.effort"), "{bad}");
        let unknown = error(json!({"model": "m", "max_tokens": 10, "output_config": {"verbosity": "low"},
            "messages": [{"role": "user", "content": "x"}]}));
        assert!(unknown.contains("unknown field `verbosity`"), "{unknown}");
    }

    #[test]
    fn output_format_is_a_structured_answer() {
        let schema = json!({"type": "object", "properties": {"a": {"type": "integer"}}});
        for body in [
            json!({"model": "m", "max_tokens": 10, "output_config": {"format": {"type": "json_schema", "schema": schema}},
                "messages": [{"role": "user", "content": "x"}]}),
            json!({"model": "m", "max_tokens": 10, "output_format": {"type": "json_schema", "schema": schema},
                "messages": [{"role": "user", "content": "x"}]}),
        ] {
            let request = parse(body).request;
            let asked: Value = serde_json::from_str(&request.response_schema.unwrap().schema_json).unwrap();
            assert_eq!(asked, schema);
        }
        let bad = error(json!({"model": "m", "max_tokens": 10, "output_config": {"format": {"type": "json_schema"}},
            "messages": [{"role": "user", "content": "x"}]}));
        assert!(bad.contains("needs `schema`"), "{bad}");
        let other = error(json!({"model": "m", "max_tokens": 10, "output_config": {"format": {"type": "xml"}},
            "messages": [{"role": "user", "content": "x"}]}));
        assert!(other.contains("unknown output format type `xml`"), "{other}");
    }

    #[test]
    fn anthropics_fields_are_carried_natively_or_never_sent_and_noted() {
        let ingress = parse(json!({
            "model": "m", "max_tokens": 10, "top_k": 5, "context_management": {"edits": []},
            "container": "c", "mcp_servers": [{"type": "url", "url": "https://mcp", "name": "x"}],
            "service_tier": "auto", "speed": "fast", "inference_geo": "us", "diagnostics": {"previous_message_id": null},
            "fallbacks": "default", "fallback_credit_token": "t", "output_config": {"task_budget": {"type": "tokens", "total": 5}},
            "metadata": {"user_id": "device-1"},
            "messages": [{"role": "user", "content": "x"}]
        }));
        assert_eq!(
            ingress.dropped_fields,
            [
                "speed",
                "inference_geo",
                "diagnostics",
                "fallbacks",
                "fallback_credit_token",
                "output_config.task_budget"
            ]
        );
        assert_eq!(ingress.request.route_notes[0], "field_dropped:speed");
        assert_eq!(ingress.request.route_notes.len(), 6);
        let native = ingress.request.native.as_deref().unwrap();
        assert_eq!(native.dialect, DIALECT);
        let names: Vec<&str> = native.fields.iter().map(|(name, _)| name.as_str()).collect();
        assert_eq!(names, ["top_k", "context_management", "container", "mcp_servers", "service_tier"]);
        assert_eq!(native.fields[3].1, json!([{"type": "url", "url": "https://mcp", "name": "x"}]));
        assert_eq!(ingress.request.client.unwrap().metadata, Some(json!({"user_id": "device-1"})));
        let long = parse(json!({"model": "m", "max_tokens": 10, "metadata": {"user_id": "é".repeat(600)},
            "messages": [{"role": "user", "content": "x"}]}));
        let kept = long.request.client.unwrap().metadata.unwrap();
        assert_eq!(kept["user_id"].as_str().unwrap().chars().count(), MAX_USER_ID_CHARS);
        assert_eq!(long.request.route_notes, ["metadata_truncated"]);
        assert!(error(json!({"model": "m", "max_tokens": 5, "metadata": {"user": "u"}, "messages": [{"role": "user", "content": "x"}]}))
            .contains("unknown field `user`"));
        let nulls = parse(json!({"model": "m", "max_tokens": 10, "top_k": null, "container": null,
            "messages": [{"role": "user", "content": "x"}]}));
        assert!(nulls.dropped_fields.is_empty() && nulls.request.route_notes.is_empty(), "null is absent");
        assert!(nulls.request.native.is_none(), "nothing native asked");
        assert!(
            error(
                json!({"model": "m", "max_tokens": 5, "metadata": "u", "messages": [{"role": "user", "content": "x"}]})
            )
            .contains("invalid body")
        );
    }

    #[test]
    fn the_longest_cache_ttl_asked_anywhere_is_carried_and_an_unknown_one_refused() {
        let ttl = |system_ttl: &str, message_ttl: &str| {
            let body = json!({"model": "m", "max_tokens": 10,
                "system": [{"type": "text", "text": "s", "cache_control": {"type": "ephemeral", "ttl": system_ttl}}],
                "messages": [{"role": "user", "content": [
                    {"type": "text", "text": "x", "cache_control": {"type": "ephemeral", "ttl": message_ttl}}]}]});
            into_chat_request(body.to_string().as_bytes(), HostedTools::Drop, Purpose::Call)
        };
        let carried = |ingress: Ingress| ingress.request.native.as_deref().unwrap().fields[0].1.clone();
        assert_eq!(carried(ttl("5m", "1h").unwrap()), "1h");
        assert_eq!(carried(ttl("1h", "5m").unwrap()), "1h");
        assert_eq!(carried(ttl("5m", "5m").unwrap()), "5m");
        let refused = ttl("5m", "2h").unwrap_err();
        assert!(refused.message.contains("`cache_control.ttl` \"2h\""), "{}", refused.message);
    }

    #[test]
    fn a_historys_own_blocks_are_placed_by_turn_and_position() {
        let search = json!({"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {}});
        let result = json!({"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": []});
        let cited = json!({"type": "text", "text": "Cited.", "citations": [{"type": "web_search_result_location"}]});
        let body = json!({"model": "m", "max_tokens": 10, "messages": [
            {"role": "user", "content": "q"},
            {"role": "assistant", "content": [{"type": "text", "text": "Looking."}, search]},
            {"role": "assistant", "content": [result, cited]},
            {"role": "user", "content": "thanks"}
        ]});
        let ingress = parse(body);
        let turns = &ingress.request.conversation.turns;
        assert_eq!(turns.len(), 3, "the two assistant messages merge");
        assert_eq!(turns[1].content, [ContentBlock::Text("Looking.".into()), ContentBlock::Text("Cited.".into())]);
        let native = ingress.request.native.as_deref().unwrap();
        let (name, placed) = &native.fields[0];
        assert_eq!(name, "native_blocks");
        assert_eq!(
            placed,
            &json!([
                {"turn": 1, "at": 1, "block": search, "replaces": false},
                {"turn": 1, "at": 2, "block": result, "replaces": false},
                {"turn": 1, "at": 3, "block": cited, "replaces": true}
            ])
        );
    }

    #[test]
    fn hosted_tools_go_natively_by_type_and_refusal_is_asked_of_the_plan() {
        let body = json!({"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": "x"}],
        "tools": [
            {"type": "web_search_20250305", "name": "web_search", "max_uses": 3},
            {"name": "f", "input_schema": {"type": "object"}, "defer_loading": true, "strict": false,
             "cache_control": {"type": "ephemeral", "ttl": "1h"}},
            {"type": "tool_search_tool_regex_20251119", "name": "tool_search_tool_regex"}
        ]});
        let ingress = parse(body.clone());
        assert_eq!(ingress.dropped_fields, ["tools.defer_loading"]);
        let native = ingress.request.native.as_deref().unwrap();
        assert_eq!(
            native.fields,
            [
                ("cache_control.ttl".to_owned(), json!("1h")),
                ("server_tools.web_search_20250305".to_owned(), json!([body["tools"][0]])),
                ("server_tools.tool_search_tool_regex_20251119".to_owned(), json!([body["tools"][2]])),
            ],
            "carried natively, by type"
        );
        assert!(!native.refuse_hosted_tools);
        assert_eq!(ingress.request.conversation.tools.len(), 1);
        assert_eq!(ingress.request.conversation.tools[0].name, "f");
        let refusing = into_chat_request(body.to_string().as_bytes(), HostedTools::Refuse, Purpose::Call).unwrap();
        assert!(refusing.request.native.as_deref().unwrap().refuse_hosted_tools, "the plan refuses what is dropped");

        let search = json!({"type": "web_search_20250305", "name": "web_search"});
        let choosing = |choice: Value, tools: Value| {
            let body = json!({"model": "m", "max_tokens": 10, "tool_choice": choice, "tools": tools,
                "messages": [{"role": "user", "content": "x"}]});
            into_chat_request(body.to_string().as_bytes(), HostedTools::Drop, Purpose::Call)
        };
        let named = choosing(json!({"type": "tool", "name": "web_search"}), json!([search])).unwrap_err();
        assert_eq!(named.category, Category::CapabilityMismatch);
        assert!(named.message.contains("names the hosted tool `web_search`"), "{}", named.message);
        let any = choosing(json!({"type": "any"}), json!([search])).unwrap_err();
        assert!(any.message.contains("every tool offered is a hosted one"), "{}", any.message);
        let client = json!({"name": "f", "input_schema": {"type": "object"}});
        assert!(choosing(json!({"type": "any"}), json!([search, client])).is_ok());
        assert!(choosing(json!({"type": "auto"}), json!([search])).is_ok());
        let odd = choosing(json!({"type": "auto"}), json!([{"type": "Web Search!", "name": "s"}])).unwrap_err();
        assert!(odd.message.contains("lower-case identifier"), "{}", odd.message);
        assert!(choosing(json!({"type": "auto"}), json!([{"type": "x".repeat(65)}])).is_err());
    }

    #[test]
    fn a_system_message_mid_conversation_is_user_text_and_tool_references_are_named() {
        let ingress = parse(json!({"model": "m", "max_tokens": 10, "messages": [
            {"role": "user", "content": "run it"},
            {"role": "system", "content": [{"type": "text", "text": "# Environment"}]},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "ToolSearch", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1",
                "content": [{"type": "tool_reference", "tool_name": "WebFetch"}]}]}
        ]}));
        let turns = &ingress.request.conversation.turns;
        assert_eq!(turns.len(), 3, "the system message joins the user turn it follows");
        assert_eq!(
            turns[0].content[1],
            ContentBlock::Text("<system-reminder>\n# Environment\n</system-reminder>".into())
        );
        assert!(matches!(&turns[2].content[0], ContentBlock::ToolResult(r)
            if r.content == vec![LeafBlock::Text("tool_reference: WebFetch".into())]));
        assert_eq!(ingress.request.route_notes, ["system_message_as_user"]);
        let image = error(json!({"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "x"},
            {"role": "system", "content": [{"type": "image"}]}]}));
        assert!(image.contains("text blocks only"), "{image}");
        let textless = error(json!({"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "x"},
            {"role": "system", "content": [{"type": "text"}]}]}));
        assert!(textless.contains("a text block needs `text`"), "{textless}");
        let nameless = error(json!({"model": "m", "max_tokens": 5, "messages": [
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "ToolSearch", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": [{"type": "tool_reference"}]}]}
        ]}));
        assert!(nameless.contains("needs `tool_name`"), "{nameless}");
    }

    #[test]
    fn count_tokens_needs_no_max_tokens() {
        let body = json!({"model": "m", "thinking": {"type": "enabled", "budget_tokens": 2048},
            "messages": [{"role": "user", "content": "x"}]});
        let ingress = into_chat_request(body.to_string().as_bytes(), HostedTools::Drop, Purpose::Count).unwrap();
        assert_eq!(ingress.request.max_output_tokens, None);
        assert!(error(body).contains("`max_tokens` is required"));
    }

    #[test]
    fn bad_requests_are_refused_naming_the_problem() {
        let user = json!([{"role": "user", "content": "x"}]);
        let cases = [
            (json!({"model": "m", "messages": user}), "`max_tokens` is required"),
            (json!({"model": "m", "max_tokens": 5}), "missing field `messages`"),
            (json!({"model": "m", "max_tokens": 5, "messages": []}), "`messages` is empty"),
            (
                json!({"model": "m", "max_tokens": 5, "messages": [{"role": "system", "content": 5}]}),
                "`content` must be",
            ),
            (json!({"model": "m", "max_tokens": 5, "messages": [{"role": "robot", "content": "x"}]}), "unknown role"),
            (json!({"model": "m", "max_tokens": 5, "top_p": 1.5, "messages": user}), "`top_p` 1.5 is outside 0.0–1.0"),
            (json!({"model": "m", "max_tokens": 5, "verbosity": "c", "messages": user}), "unknown field `verbosity`"),
            (json!({"model": "m", "max_tokens": 5, "temperature": 1.5, "messages": user}), "temperature"),
            (json!({"model": "m", "max_tokens": 5, "system": [{"type": "image"}], "messages": user}), "only text"),
            (
                json!({"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": [
                    {"type": "tool_use", "id": "t", "name": "f", "input": {}}]}]}),
                "messages[0]: content[0]: a `tool_use` block belongs in an assistant message",
            ),
            (
                json!({"model": "m", "max_tokens": 5, "messages": [{"role": "assistant", "content": [
                    {"type": "tool_result", "tool_use_id": "t"}]}]}),
                "belongs in a user message",
            ),
            (
                json!({"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": [
                    {"type": "mid_conv_system"}]}]}),
                "`mid_conv_system` is not supported",
            ),
            (
                json!({"model": "m", "max_tokens": 5, "tools": [{"name": "s"}], "messages": user}),
                "needs `input_schema`",
            ),
            (
                json!({"model": "m", "max_tokens": 5, "tool_choice": {"type": "any", "disable_parallel_tool_use": true},
                    "messages": user}),
                "disable_parallel_tool_use",
            ),
            (json!({"model": "m", "max_tokens": 5, "tool_choice": {"type": "tool"}, "messages": user}), "needs `name`"),
        ];
        for (body, expected) in cases {
            let message = error(body.clone());
            assert!(message.contains(expected), "{body}: {message:?} should mention {expected:?}");
        }
        let malformed = into_chat_request(b"{not json", HostedTools::Drop, Purpose::Call).unwrap_err();
        assert!(malformed.message.starts_with("invalid body"), "{}", malformed.message);
    }
}
