//! `POST /v1/messages` bodies → [`ChatRequest`]. The Messages API already keeps
//! system content apart and alternates user and assistant turns, so the mapping
//! is close to one-to-one: blocks become content blocks, consecutive same-role
//! messages merge into one turn, a `cache_control` on any block of a message marks
//! its turn as a cache breakpoint.
//!
//! Top-level fields are strict: an unknown one is a 400 naming it, because a field
//! the gateway does not know may change what the caller is asking for. `metadata`
//! and `service_tier` are accepted and ignored (they do not change the answer);
//! `top_k` is refused, since not every provider can honour it; `top_p` is read
//! as on the OpenAI route (see `server::sampling`).
//! Inside blocks and tools, unknown keys (`citations`, `title`, `ttl`, ...) are
//! ignored as the reference advises.

use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_json::Value;

use crate::chat::ChatRequest;
use crate::server::error::ApiError;
use crate::types::{
    ContentBlock, Conversation, LeafBlock, Media, MediaSource, Thinking, ToolChoice, ToolDefinition, ToolResult,
    ToolUse, TurnRole,
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
    temperature: Option<f32>,
    #[serde(default)]
    stream: bool,
    #[serde(default)]
    tools: Vec<Tool>,
    tool_choice: Option<Value>,
    thinking: Option<Value>,
    /// Top-level automatic caching: a breakpoint on the last turn.
    cache_control: Option<Value>,
    top_k: Option<IgnoredAny>,
    top_p: Option<f32>,
    #[serde(default, rename = "metadata")]
    _metadata: Option<IgnoredAny>,
    #[serde(default, rename = "service_tier")]
    _service_tier: Option<IgnoredAny>,
}

#[derive(Debug, Deserialize)]
struct Message {
    role: String,
    content: Value,
}

#[derive(Debug, Deserialize)]
struct Tool {
    name: String,
    #[serde(default)]
    description: String,
    input_schema: Option<Value>,
    /// `custom` (or absent) for client tools; server tools carry a versioned type.
    #[serde(rename = "type")]
    kind: Option<String>,
}

/// A parsed request, and whether it asked to stream.
#[derive(Debug)]
pub struct Ingress {
    pub request: ChatRequest,
    pub stream: bool,
}

/// Parses and maps a request body. Errors quote only the caller's own input.
pub fn into_chat_request(body: &[u8]) -> Result<Ingress, ApiError> {
    let body: Body =
        serde_json::from_slice(body).map_err(|e| ApiError::invalid_request(format!("invalid body: {e}")))?;
    if body.top_k.is_some() {
        return Err(ApiError::invalid_request(
            "`top_k` is not supported: the gateway cannot honour it on every provider; leave it out",
        ));
    }
    let top_p = crate::server::sampling::top_p(body.top_p)?;
    let max_tokens = body.max_tokens.ok_or_else(|| ApiError::invalid_request("`max_tokens` is required"))?;
    if let Some(temperature) = body.temperature
        && !(0.0..=1.0).contains(&temperature)
    {
        return Err(ApiError::invalid_request(format!("`temperature` {temperature} is outside 0.0–1.0")));
    }
    let mut conversation = Conversation {
        system: system(body.system.as_ref())?,
        // As on the OpenAI route: the host plans a breakpoint on the system prompt
        // for every call, so a `cache_control` on a system block asks for nothing more.
        cache_system: true,
        turns: Vec::new(),
        tools: body.tools.into_iter().enumerate().map(tool_definition).collect::<Result<_, _>>()?,
        tool_choice: body.tool_choice.as_ref().map(tool_choice).transpose()?,
    };
    for (index, message) in body.messages.into_iter().enumerate() {
        add_message(&mut conversation, message)
            .map_err(|e| ApiError::invalid_request(format!("messages[{index}]: {e}")))?;
    }
    if conversation.turns.is_empty() {
        return Err(ApiError::invalid_request("`messages` is empty"));
    }
    if body.cache_control.as_ref().is_some_and(|value| !value.is_null())
        && let Some(last) = conversation.turns.last_mut()
    {
        last.cache = true;
    }
    let mut request = ChatRequest::new(body.model, conversation);
    request.max_output_tokens = Some(max_tokens);
    request.temperature = body.temperature;
    request.top_p = top_p;
    request.stop = body.stop_sequences;
    request.thinking_budget = body.thinking.as_ref().map(|t| thinking_budget(t, max_tokens)).transpose()?.flatten();
    request.reasoning_off = body.thinking.as_ref().is_some_and(|thinking| kind(thinking) == "disabled");
    Ok(Ingress { request, stream: body.stream })
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

fn add_message(conversation: &mut Conversation, message: Message) -> Result<(), String> {
    let role = match message.role.as_str() {
        "user" => TurnRole::User,
        "assistant" => TurnRole::Assistant,
        "system" => return Err("role `system` is not a message role: put system content in `system`".to_owned()),
        other => return Err(format!("unknown role `{other}` (expected `user` or `assistant`)")),
    };
    let (blocks, cache) = match message.content {
        Value::String(text) => (vec![ContentBlock::Text(text)], false),
        Value::Array(blocks) => {
            let cache = blocks.iter().any(has_cache_control);
            let blocks = blocks
                .iter()
                .enumerate()
                .map(|(index, block)| content_block(block, role).map_err(|e| format!("content[{index}]: {e}")))
                .collect::<Result<_, _>>()?;
            (blocks, cache)
        }
        _ => return Err("`content` must be a string or an array of blocks".to_owned()),
    };
    conversation.push_turn(role, blocks, cache);
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
                other => Err(format!("tool_result content block type `{other}` is not supported")),
            })
            .collect(),
        Some(_) => Err("a tool_result's `content` must be a string or an array of blocks".to_owned()),
    }
}

fn tool_definition((index, tool): (usize, Tool)) -> Result<ToolDefinition, ApiError> {
    if let Some(kind) = tool.kind.as_deref().filter(|kind| *kind != "custom") {
        return Err(ApiError::invalid_request(format!(
            "tools[{index}]: server tool type `{kind}` is not supported; only client tools (`input_schema`) are"
        )));
    }
    let schema = tool
        .input_schema
        .ok_or_else(|| ApiError::invalid_request(format!("tools[{index}]: a tool needs `input_schema`")))?;
    Ok(ToolDefinition { name: tool.name, description: tool.description, parameters_json: schema.to_string() })
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

/// `{"type":"enabled","budget_tokens":N}` with the API's own bounds (at least
/// 1024, below `max_tokens`, inside which thinking counts); `disabled`: none.
fn thinking_budget(thinking: &Value, max_tokens: u32) -> Result<Option<u32>, ApiError> {
    match kind(thinking) {
        "disabled" => Ok(None),
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
            if budget >= max_tokens {
                return Err(ApiError::invalid_request(format!(
                    "`thinking.budget_tokens` ({budget}) must be less than `max_tokens` ({max_tokens}): thinking \
                     counts inside it"
                )));
            }
            Ok(Some(budget))
        }
        "adaptive" => Err(ApiError::invalid_request(
            "`thinking.type` `adaptive` is not supported; use `enabled` with `budget_tokens`",
        )),
        other => Err(ApiError::invalid_request(format!(
            "unknown thinking type `{other}` (expected `enabled` or `disabled`)"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn parse(body: Value) -> Ingress {
        into_chat_request(body.to_string().as_bytes()).unwrap()
    }

    fn error(body: Value) -> String {
        let error = into_chat_request(body.to_string().as_bytes()).unwrap_err();
        assert_eq!(error.category, crate::error::Category::InvalidRequest);
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
        assert!(error(body(json!({"type": "adaptive"}))).contains("adaptive"));
    }

    #[test]
    fn bad_requests_are_refused_naming_the_problem() {
        let user = json!([{"role": "user", "content": "x"}]);
        let cases = [
            (json!({"model": "m", "messages": user}), "`max_tokens` is required"),
            (json!({"model": "m", "max_tokens": 5}), "missing field `messages`"),
            (json!({"model": "m", "max_tokens": 5, "messages": []}), "`messages` is empty"),
            (json!({"model": "m", "max_tokens": 5, "messages": [{"role": "system", "content": "x"}]}), "`system`"),
            (json!({"model": "m", "max_tokens": 5, "messages": [{"role": "robot", "content": "x"}]}), "unknown role"),
            (json!({"model": "m", "max_tokens": 5, "top_k": 5, "messages": user}), "`top_k` is not supported"),
            (json!({"model": "m", "max_tokens": 5, "top_p": 1.5, "messages": user}), "`top_p` 1.5 is outside 0.0–1.0"),
            (json!({"model": "m", "max_tokens": 5, "container": "c", "messages": user}), "unknown field `container`"),
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
                    {"type": "server_tool_use"}]}]}),
                "`server_tool_use` is not supported",
            ),
            (
                json!({"model": "m", "max_tokens": 5, "tools": [{"name": "s", "type": "web_search_20250305"}],
                    "messages": user}),
                "server tool type",
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
        let malformed = into_chat_request(b"{not json").unwrap_err();
        assert!(malformed.message.starts_with("invalid body"), "{}", malformed.message);
    }
}
