//! `POST /v1/chat/completions` bodies → [`ChatRequest`]. System and developer
//! messages become system content; `tool` messages become tool results in a
//! user turn, so every provider receives the same prepared shape.

use serde::Deserialize;
use serde_json::Value;

use crate::chat::ChatRequest;
use crate::server::error::ApiError;
use crate::types::{
    ContentBlock, Conversation, Effort, LeafBlock, Media, MediaSource, ResponseSchema, ToolChoice, ToolDefinition,
    ToolResult, ToolUse, TurnRole,
};

#[derive(Debug, Deserialize)]
struct Body {
    model: String,
    messages: Vec<Message>,
    #[serde(default)]
    tools: Vec<Tool>,
    tool_choice: Option<Value>,
    max_tokens: Option<u32>,
    max_completion_tokens: Option<u32>,
    temperature: Option<f64>,
    top_p: Option<f32>,
    stop: Option<Stop>,
    response_format: Option<Value>,
    reasoning_effort: Option<String>,
    #[serde(default)]
    stream: bool,
    stream_options: Option<StreamOptions>,
    n: Option<u32>,
}

/// What a streaming caller asked for beyond the deltas.
#[derive(Debug, Clone, Copy, Default, Deserialize)]
pub struct StreamOptions {
    /// A final chunk with the usage, before `[DONE]`.
    #[serde(default)]
    pub include_usage: bool,
}

/// A parsed request, and its stream options when it asked to stream.
#[derive(Debug)]
pub struct Ingress {
    pub request: ChatRequest,
    pub stream: Option<StreamOptions>,
}

#[derive(Debug, Deserialize)]
struct Message {
    role: String,
    content: Option<Value>,
    #[serde(default)]
    tool_calls: Vec<ToolCall>,
    tool_call_id: Option<String>,
}

#[derive(Debug, Deserialize)]
struct ToolCall {
    id: String,
    function: FunctionCall,
}

#[derive(Debug, Deserialize)]
struct FunctionCall {
    name: String,
    #[serde(default)]
    arguments: String,
}

#[derive(Debug, Deserialize)]
struct Tool {
    function: FunctionDefinition,
}

#[derive(Debug, Deserialize)]
struct FunctionDefinition {
    name: String,
    #[serde(default)]
    description: String,
    parameters: Option<Value>,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum Stop {
    One(String),
    Many(Vec<String>),
}

/// Parses and maps a request body. Errors quote only the caller's own input.
pub fn into_chat_request(body: &[u8]) -> Result<Ingress, ApiError> {
    let body: Body =
        serde_json::from_slice(body).map_err(|e| ApiError::invalid_request(format!("invalid body: {e}")))?;
    let stream = body.stream.then(|| body.stream_options.unwrap_or_default());
    if body.n.is_some_and(|n| n != 1) {
        return Err(ApiError::invalid_request("only `n: 1` is supported"));
    }
    let mut request = ChatRequest::new(body.model, conversation(body.messages, body.tools, body.tool_choice)?);
    request.max_output_tokens = body.max_completion_tokens.or(body.max_tokens);
    request.temperature = body.temperature;
    request.top_p = crate::server::sampling::top_p(body.top_p)?;
    request.stop = match body.stop {
        None => Vec::new(),
        Some(Stop::One(stop)) => vec![stop],
        Some(Stop::Many(stops)) => stops,
    };
    request.response_schema = body.response_format.as_ref().map(response_schema).transpose()?.flatten();
    request.reasoning_effort = body.reasoning_effort.as_deref().map(effort).transpose()?.flatten();
    request.reasoning_off = body.reasoning_effort.as_deref() == Some("none");
    Ok(Ingress { request, stream })
}

fn conversation(
    messages: Vec<Message>,
    tools: Vec<Tool>,
    tool_choice: Option<Value>,
) -> Result<Conversation, ApiError> {
    let mut conversation = Conversation {
        system: Vec::new(),
        cache_system: true,
        turns: Vec::new(),
        tools: tools.into_iter().map(tool_definition).collect(),
        tool_choice: tool_choice.as_ref().map(self::tool_choice).transpose()?,
    };
    for (index, message) in messages.into_iter().enumerate() {
        add_message(&mut conversation, message)
            .map_err(|e| ApiError::invalid_request(format!("messages[{index}]: {e}")))?;
    }
    if conversation.turns.is_empty() {
        return Err(ApiError::invalid_request("`messages` holds no user or assistant message"));
    }
    Ok(conversation)
}

fn add_message(conversation: &mut Conversation, message: Message) -> Result<(), String> {
    match message.role.as_str() {
        "system" | "developer" => {
            conversation.system.push(text_only(message.content.as_ref())?);
            Ok(())
        }
        "user" => {
            let blocks = content_blocks(message.content.as_ref())?;
            conversation.push_turn(TurnRole::User, blocks, false);
            Ok(())
        }
        "assistant" => {
            let mut blocks = content_blocks(message.content.as_ref())?;
            blocks.extend(message.tool_calls.into_iter().map(|call| {
                ContentBlock::ToolUse(ToolUse {
                    id: call.id,
                    name: call.function.name,
                    input_json: if call.function.arguments.trim().is_empty() {
                        "{}".to_owned()
                    } else {
                        call.function.arguments
                    },
                })
            }));
            conversation.push_turn(TurnRole::Assistant, blocks, false);
            Ok(())
        }
        "tool" => {
            let tool_use_id = message.tool_call_id.ok_or("a `tool` message needs `tool_call_id`")?;
            let content = vec![LeafBlock::Text(text_only(message.content.as_ref())?)];
            let result = ContentBlock::ToolResult(ToolResult { tool_use_id, content, is_error: false });
            conversation.push_turn(TurnRole::User, vec![result], false);
            Ok(())
        }
        other => Err(format!("unknown role `{other}`")),
    }
}

fn text_only(content: Option<&Value>) -> Result<String, String> {
    let blocks = content_blocks(content)?;
    blocks
        .into_iter()
        .map(|block| match block {
            ContentBlock::Text(text) => Ok(text),
            _ => Err("only text is allowed here".to_owned()),
        })
        .collect::<Result<Vec<_>, _>>()
        .map(|parts| parts.join("\n"))
}

fn content_blocks(content: Option<&Value>) -> Result<Vec<ContentBlock>, String> {
    match content {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::String(text)) => Ok(vec![ContentBlock::Text(text.clone())]),
        Some(Value::Array(parts)) => parts.iter().map(content_part).collect(),
        Some(_) => Err("`content` must be a string or an array of parts".to_owned()),
    }
}

fn content_part(part: &Value) -> Result<ContentBlock, String> {
    let kind = part.get("type").and_then(Value::as_str).unwrap_or_default();
    let text_at = |pointer: &str| part.pointer(pointer).and_then(Value::as_str);
    match kind {
        "text" => Ok(ContentBlock::Text(text_at("/text").ok_or("a text part needs `text`")?.to_owned())),
        "image_url" => {
            let url = text_at("/image_url/url").ok_or("an image part needs `image_url.url`")?;
            Ok(ContentBlock::Image(media_from_url(url, "image/*")))
        }
        "file" => {
            let data =
                text_at("/file/file_data").ok_or("a file part needs `file.file_data` (file ids are not supported)")?;
            Ok(ContentBlock::Document(media_from_url(data, "application/octet-stream")))
        }
        other => Err(format!("content part type `{other}` is not supported")),
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

fn tool_definition(tool: Tool) -> ToolDefinition {
    let parameters =
        tool.function.parameters.unwrap_or_else(|| serde_json::json!({"type": "object", "properties": {}}));
    ToolDefinition {
        name: tool.function.name,
        description: tool.function.description,
        parameters_json: parameters.to_string(),
    }
}

fn tool_choice(value: &Value) -> Result<ToolChoice, ApiError> {
    match value {
        Value::String(word) => match word.as_str() {
            "auto" => Ok(ToolChoice::Auto),
            "none" => Ok(ToolChoice::None),
            "required" => Ok(ToolChoice::Required),
            other => Err(ApiError::invalid_request(format!("unknown tool_choice `{other}`"))),
        },
        Value::Object(_) => value
            .pointer("/function/name")
            .and_then(Value::as_str)
            .map(|name| ToolChoice::Named(name.to_owned()))
            .ok_or_else(|| ApiError::invalid_request("tool_choice object needs `function.name`")),
        _ => Err(ApiError::invalid_request("tool_choice must be a string or an object")),
    }
}

fn response_schema(format: &Value) -> Result<Option<ResponseSchema>, ApiError> {
    match format.get("type").and_then(Value::as_str) {
        Some("text") | None => Ok(None),
        Some("json_object") => {
            Ok(Some(ResponseSchema { name: "json_object".to_owned(), schema_json: r#"{"type":"object"}"#.to_owned() }))
        }
        Some("json_schema") => {
            let schema = format
                .pointer("/json_schema/schema")
                .ok_or_else(|| ApiError::invalid_request("json_schema needs `schema`"))?;
            let name = format.pointer("/json_schema/name").and_then(Value::as_str).unwrap_or("response");
            Ok(Some(ResponseSchema { name: name.to_owned(), schema_json: schema.to_string() }))
        }
        Some(other) => Err(ApiError::invalid_request(format!("unknown response_format type `{other}`"))),
    }
}

/// `none` turns reasoning off (no default applies); the other words are levels.
fn effort(word: &str) -> Result<Option<Effort>, ApiError> {
    if word == "none" {
        return Ok(None);
    }
    crate::types::effort_from_word(word)
        .map(Some)
        .ok_or_else(|| ApiError::invalid_request(format!("unknown reasoning_effort `{word}`")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(body: serde_json::Value) -> ChatRequest {
        into_chat_request(body.to_string().as_bytes()).unwrap().request
    }

    #[test]
    fn top_p_is_read_for_the_policy_and_checked_for_range() {
        let messages = serde_json::json!([{"role": "user", "content": "x"}]);
        assert_eq!(parse(serde_json::json!({"model": "m", "top_p": 0.5, "messages": messages})).top_p, Some(0.5));
        assert_eq!(parse(serde_json::json!({"model": "m", "messages": messages})).top_p, None);
        let bad = serde_json::json!({"model": "m", "top_p": 2, "messages": messages}).to_string();
        assert!(into_chat_request(bad.as_bytes()).unwrap_err().message.contains("`top_p` 2 is outside"));
    }

    #[test]
    fn stream_and_its_usage_option_are_read() {
        let messages = serde_json::json!([{"role": "user", "content": "x"}]);
        let ingress = |body: serde_json::Value| into_chat_request(body.to_string().as_bytes()).unwrap().stream;
        assert!(ingress(serde_json::json!({"model": "m", "messages": messages})).is_none());
        let plain = ingress(serde_json::json!({"model": "m", "stream": true, "messages": messages})).unwrap();
        assert!(!plain.include_usage);
        let with_usage = serde_json::json!({"model": "m", "stream": true, "stream_options": {"include_usage": true},
            "messages": messages});
        assert!(ingress(with_usage).unwrap().include_usage);
    }

    #[test]
    fn system_developer_and_tool_messages_map_to_the_prepared_shape() {
        let request = parse(serde_json::json!({
            "model": "m",
            "max_tokens": 10,
            "max_completion_tokens": 20,
            "messages": [
                {"role": "system", "content": "Be terse."},
                {"role": "developer", "content": [{"type": "text", "text": "No emoji."}]},
                {"role": "user", "content": "Weather in Paris?"},
                {"role": "assistant", "content": null, "tool_calls": [
                    {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}}]},
                {"role": "tool", "tool_call_id": "call_1", "content": "18C"},
                {"role": "user", "content": "Thanks"}
            ]
        }));
        assert_eq!(request.max_output_tokens, Some(20));
        let conversation = &request.conversation;
        assert_eq!(conversation.system, vec!["Be terse.".to_owned(), "No emoji.".to_owned()]);
        assert_eq!(conversation.turns.len(), 3, "tool result and the next user message share a turn");
        assert!(matches!(&conversation.turns[1].content[0], ContentBlock::ToolUse(call) if call.name == "get_weather"));
        assert!(matches!(&conversation.turns[2].content[0], ContentBlock::ToolResult(r) if r.tool_use_id == "call_1"));
        assert!(matches!(&conversation.turns[2].content[1], ContentBlock::Text(t) if t == "Thanks"));
    }

    #[test]
    fn images_tools_and_formats() {
        let request = parse(serde_json::json!({
            "model": "m",
            "messages": [{"role": "user", "content": [
                {"type": "text", "text": "What is this?"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBOR"}},
                {"type": "image_url", "image_url": {"url": "https://x/y.jpg"}}
            ]}],
            "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}],
            "tool_choice": {"type": "function", "function": {"name": "f"}},
            "response_format": {"type": "json_schema", "json_schema": {"name": "out", "schema": {"type": "object"}}},
            "reasoning_effort": "low",
            "stop": "END"
        }));
        let blocks = &request.conversation.turns[0].content;
        assert!(
            matches!(&blocks[1], ContentBlock::Image(m) if m.mime_type == "image/png" && matches!(m.source, MediaSource::Base64(_)))
        );
        assert!(
            matches!(&blocks[2], ContentBlock::Image(m) if matches!(&m.source, MediaSource::Url(u) if u == "https://x/y.jpg"))
        );
        assert_eq!(request.conversation.tool_choice, Some(ToolChoice::Named("f".into())));
        assert_eq!(request.response_schema.unwrap().name, "out");
        assert_eq!(request.reasoning_effort, Some(Effort::Low));
        assert_eq!(request.stop, vec!["END".to_owned()]);
    }

    #[test]
    fn bad_requests_are_refused_with_the_reason() {
        let cases = [
            (serde_json::json!({"model": "m"}), "invalid body"),
            (serde_json::json!({"model": "m", "stream": "yes", "messages": []}), "invalid body"),
            (serde_json::json!({"model": "m", "messages": [{"role": "robot", "content": "x"}]}), "unknown role"),
            (serde_json::json!({"model": "m", "messages": [{"role": "system", "content": "x"}]}), "no user"),
            (serde_json::json!({"model": "m", "messages": [{"role": "tool", "content": "x"}]}), "tool_call_id"),
        ];
        for (body, expected) in cases {
            let error = into_chat_request(body.to_string().as_bytes()).unwrap_err();
            assert!(format!("{error:?}").contains(expected), "{error:?} should mention {expected}");
        }
    }
}
