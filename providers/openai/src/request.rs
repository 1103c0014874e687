//! Encoding: a prepared conversation and its parameters → one Chat Completions
//! request. The request never carries a credential; the host adds it.

use serde_json::{Map, Value, json};
use weir_sdk::fallback::{block_as_text, leaf_as_text};
use weir_sdk::json::{parse_value, to_body};
use weir_sdk::types::{
    CallParams, Capabilities, CodecError, ContentBlock, Effort, Headers, HttpRequest, Media, MediaSource,
    PreparedConversation, ResponseSchema, ToolChoice, ToolDefinition, ToolResult, ToolUse, Turn, TurnRole,
};

use crate::dialect::{self, Dialect};
use crate::keys::{self, KeySpec, ThinkingBack, ToolIds};

/// Appended to the endpoint's base URL (which ends in `/v1` for OpenAI).
pub const PATH: &str = "/chat/completions";

/// Builds the request, or refuses when the provider key or a JSON text the host
/// handed in cannot be encoded.
pub fn encode(
    provider: &str,
    conversation: &PreparedConversation,
    params: &CallParams,
) -> Result<HttpRequest, CodecError> {
    let spec =
        keys::spec(provider).ok_or_else(|| CodecError::Unsupported(format!("unknown provider key {provider:?}")))?;
    let path_and_query = path(spec, &params.wire_model_id)?;
    let body = body(spec, conversation, params)?;
    Ok(HttpRequest {
        method: "POST".to_owned(),
        path_and_query,
        headers: headers(params.stream),
        body: to_body(&body)?,
    })
}

fn path(spec: &KeySpec, wire_id: &str) -> Result<String, CodecError> {
    keys::route(spec, wire_id, PATH)
}

/// Content type, plus `accept` for streams. Never an auth header: the host owns secrets.
pub(crate) fn headers(stream: bool) -> Headers {
    let mut headers = vec![("content-type".to_owned(), "application/json".to_owned())];
    if stream {
        headers.push(("accept".to_owned(), "text/event-stream".to_owned()));
    }
    headers
}

pub(crate) fn body(
    spec: &KeySpec,
    conversation: &PreparedConversation,
    params: &CallParams,
) -> Result<Value, CodecError> {
    let mut body = Map::new();
    if spec.model_in_body {
        body.insert("model".into(), json!(params.wire_model_id));
    }
    let messages = messages(spec, conversation, &params.wire_model_id)?;
    body.insert("messages".into(), Value::Array(messages));
    if !conversation.tools.is_empty() {
        body.insert("tools".into(), tools(&conversation.tools)?);
    }
    if let Some(choice) = tool_choice(conversation) {
        body.insert("tool_choice".into(), choice);
    }
    body.insert(spec.max_tokens_field.into(), json!(params.max_tokens));
    if let Some(temperature) = temperature(params)? {
        body.insert("temperature".into(), temperature);
    }
    if !params.stop.is_empty() {
        body.insert("stop".into(), json!(params.stop));
    }
    if let Some(effort) = params.reasoning_effort {
        body.insert("reasoning_effort".into(), json!(effort_word(effort)));
    }
    if let Some(schema) = &params.response_schema {
        body.insert("response_format".into(), response_format(schema)?);
    }
    if params.stream {
        body.insert("stream".into(), json!(true));
        if spec.stream_usage_option {
            body.insert("stream_options".into(), json!({"include_usage": true}));
        }
    }
    Ok(Value::Object(body))
}

/// The temperature the host sends, as it sends it. Which deployments refuse an
/// explicit value (OpenAI's reasoning families, entries with
/// `fixed_temperature`) is the host's rule, for every provider: it leaves the
/// field out of the call parameters for them.
pub(crate) fn temperature(params: &CallParams) -> Result<Option<Value>, CodecError> {
    let Some(temperature) = params.temperature else {
        return Ok(None);
    };
    weir_sdk::json::sampling_number(temperature, "temperature").map(Some)
}

/// OpenAI has no `max` effort; `high` is the most it offers.
pub(crate) fn effort_word(effort: Effort) -> &'static str {
    match effort {
        Effort::Minimal => "minimal",
        Effort::Low => "low",
        Effort::Medium => "medium",
        Effort::High | Effort::Max => "high",
    }
}

fn response_format(schema: &ResponseSchema) -> Result<Value, CodecError> {
    let parsed = parse_value(&schema.schema_json, &format!("response schema {:?}", schema.name))?;
    Ok(json!({
        "type": "json_schema",
        "json_schema": {"name": schema.name, "schema": parsed, "strict": true},
    }))
}

// ---------------------------------------------------------------- tools

fn tools(definitions: &[ToolDefinition]) -> Result<Value, CodecError> {
    definitions.iter().map(tool).collect::<Result<Vec<_>, _>>().map(Value::Array)
}

fn tool(definition: &ToolDefinition) -> Result<Value, CodecError> {
    let what = format!("parameters_json of tool {:?}", definition.name);
    let parameters = parse_value(&definition.parameters_json, &what)?;
    let mut function = Map::new();
    function.insert("name".into(), json!(definition.name));
    if !definition.description.is_empty() {
        function.insert("description".into(), json!(definition.description));
    }
    function.insert("parameters".into(), parameters);
    Ok(json!({"type": "function", "function": function}))
}

/// The tool choice, left out when there are no tools and it would change nothing
/// (`auto`, `none`): OpenAI rejects `tool_choice` without `tools`.
fn tool_choice(conversation: &PreparedConversation) -> Option<Value> {
    let choice = conversation.tool_choice.as_ref()?;
    let no_tools = conversation.tools.is_empty();
    match choice {
        ToolChoice::Auto if no_tools => None,
        ToolChoice::None if no_tools => None,
        ToolChoice::Auto => Some(json!("auto")),
        ToolChoice::None => Some(json!("none")),
        ToolChoice::Required => Some(json!("required")),
        ToolChoice::Named(name) => Some(json!({"type": "function", "function": {"name": name}})),
    }
}

// ---------------------------------------------------------------- messages

fn messages(spec: &KeySpec, conversation: &PreparedConversation, model: &str) -> Result<Vec<Value>, CodecError> {
    let mut messages = Vec::new();
    if !conversation.system.is_empty() {
        let content = conversation.system.join("\n\n");
        messages.push(json!({"role": system_role(spec.dialect, model), "content": content}));
    }
    for turn in &conversation.turns {
        match turn.role {
            TurnRole::User => user_messages(spec, turn, &mut messages),
            TurnRole::Assistant => messages.push(assistant_message(spec, turn)?),
        }
    }
    Ok(messages)
}

/// OpenAI's reasoning models take instructions as `developer`; compatible servers'
/// chat templates often know only `system`.
fn system_role(dialect: Dialect, model: &str) -> &'static str {
    match dialect {
        Dialect::OpenAi if dialect::is_reasoning_family(model) => "developer",
        _ => "system",
    }
}

/// A user turn. Its tool results become `tool` messages placed first, because
/// OpenAI requires them right after the assistant message that made the calls.
fn user_messages(spec: &KeySpec, turn: &Turn, out: &mut Vec<Value>) {
    let mut parts = Vec::new();
    for block in &turn.content {
        match block {
            ContentBlock::ToolResult(result) => out.push(tool_message(spec.tool_ids, result)),
            other => parts.push(user_part(spec, other)),
        }
    }
    if let Some(content) = user_content(parts) {
        out.push(json!({"role": "user", "content": content}));
    }
}

/// A single text part goes out as a plain string, which every server accepts;
/// anything else needs the array form.
fn user_content(parts: Vec<Value>) -> Option<Value> {
    match parts.as_slice() {
        [] => None,
        [single] if single.get("type") == Some(&json!("text")) => single.get("text").cloned(),
        _ => Some(Value::Array(parts)),
    }
}

/// A document goes as a file part only to a key that reads them (`openai`);
/// elsewhere as its text fallback.
fn user_part(spec: &KeySpec, block: &ContentBlock) -> Value {
    match block {
        ContentBlock::Text(text) => text_part(text),
        ContentBlock::Image(media) => image_part(media),
        ContentBlock::Document(Media { mime_type, source: MediaSource::Base64(data) })
            if spec.capabilities.contains(Capabilities::INLINE_DOCUMENTS) =>
        {
            let file = json!({"filename": "document.pdf", "file_data": data_url(mime_type, data)});
            json!({"type": "file", "file": file})
        }
        // URL documents (OpenAI takes only inline data or uploaded file ids), tool
        // calls and thinking have no user-message form here.
        other => text_part(&block_as_text(other)),
    }
}

fn text_part(text: &str) -> Value {
    json!({"type": "text", "text": text})
}

fn image_part(media: &Media) -> Value {
    let url = match &media.source {
        MediaSource::Url(url) => url.clone(),
        MediaSource::Base64(data) => data_url(&media.mime_type, data),
    };
    json!({"type": "image_url", "image_url": {"url": url}})
}

pub(crate) fn data_url(mime_type: &str, data: &str) -> String {
    format!("data:{mime_type};base64,{data}")
}

/// A tool result as text: tool messages carry no images, so non-text leaves use
/// their text fallback.
fn tool_message(ids: ToolIds, result: &ToolResult) -> Value {
    let rendered: Vec<String> = result.content.iter().map(leaf_as_text).collect();
    let text = rendered.join("\n");
    let content = if result.is_error { format!("Error: {text}") } else { text };
    json!({"role": "tool", "tool_call_id": wire_tool_id(ids, &result.tool_use_id), "content": content})
}

/// An assistant turn: its text (and the text fallback of anything else) joined,
/// and its tool calls in `tool_calls`. Thinking goes in `reasoning_content`
/// for a key that takes it there (DeepSeek), never in `content`.
fn assistant_message(spec: &KeySpec, turn: &Turn) -> Result<Value, CodecError> {
    let mut texts = Vec::new();
    let mut calls = Vec::new();
    let mut reasoning = Vec::new();
    for block in &turn.content {
        match block {
            ContentBlock::Text(text) if text.is_empty() => {}
            ContentBlock::Text(text) => texts.push(text.clone()),
            ContentBlock::ToolUse(call) => calls.push(tool_call(spec.tool_ids, call)?),
            ContentBlock::Thinking(thinking) if spec.thinking_back == ThinkingBack::ReasoningContent => {
                // Redacted reasoning is another provider's opaque bytes: no text to send.
                if !thinking.redacted && !thinking.text.is_empty() {
                    reasoning.push(thinking.text.as_str());
                }
            }
            other => texts.push(block_as_text(other)),
        }
    }
    let mut message = Map::new();
    message.insert("role".into(), json!("assistant"));
    message.insert("content".into(), assistant_content(&texts, calls.is_empty()));
    if !reasoning.is_empty() {
        message.insert("reasoning_content".into(), json!(reasoning.join("\n\n")));
    }
    if !calls.is_empty() {
        message.insert("tool_calls".into(), Value::Array(calls));
    }
    Ok(Value::Object(message))
}

/// `null` when the message only calls tools; an empty string when it has nothing
/// at all, since OpenAI rejects an assistant message with neither.
fn assistant_content(texts: &[String], no_calls: bool) -> Value {
    match (texts.is_empty(), no_calls) {
        (true, true) => json!(""),
        (true, false) => Value::Null,
        (false, _) => json!(texts.join("\n\n")),
    }
}

/// The arguments go out as the host's JSON text, verbatim, once we know it is JSON.
fn tool_call(ids: ToolIds, call: &ToolUse) -> Result<Value, CodecError> {
    parse_value(&call.input_json, &format!("input_json of tool_use {:?}", call.id))?;
    Ok(json!({
        "id": wire_tool_id(ids, &call.id),
        "type": "function",
        "function": {"name": call.name, "arguments": call.input_json},
    }))
}

/// A tool call id as this key's server accepts it.
fn wire_tool_id(ids: ToolIds, id: &str) -> String {
    match ids {
        ToolIds::Verbatim => id.to_owned(),
        ToolIds::NineAlphanumeric => keys::nine_alphanumeric(id),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::panic)] // a failing test should stop loudly
mod tests {
    use super::*;
    use weir_sdk::types::{LeafBlock, Thinking};

    fn params(model: &str) -> CallParams {
        CallParams::new(model, 1024)
    }

    fn text(text: &str) -> ContentBlock {
        ContentBlock::Text(text.to_owned())
    }

    fn weather_tool() -> ToolDefinition {
        ToolDefinition {
            name: "get_weather".into(),
            description: "Current weather".into(),
            parameters_json: r#"{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}"#.into(),
        }
    }

    fn encode_ok(provider: &str, conversation: &PreparedConversation, params: &CallParams) -> (HttpRequest, Value) {
        let request = encode(provider, conversation, params).unwrap();
        let body: Value = serde_json::from_slice(&request.body).unwrap();
        (request, body)
    }

    fn body_of(provider: &str, conversation: &PreparedConversation, params: &CallParams) -> Value {
        encode_ok(provider, conversation, params).1
    }

    fn unsupported(result: Result<HttpRequest, CodecError>) -> String {
        match result {
            Err(CodecError::Unsupported(message)) => message,
            other => panic!("expected unsupported, got {other:?}"),
        }
    }

    #[test]
    fn text_only_request_shape() {
        let (request, body) =
            encode_ok("openai", &PreparedConversation::of(vec![Turn::user(vec![text("Hi")])]), &params("gpt-4.1"));
        assert_eq!(request.method, "POST");
        assert_eq!(request.path_and_query, "/chat/completions");
        assert_eq!(request.headers, vec![("content-type".to_owned(), "application/json".to_owned())]);
        assert_eq!(
            body,
            json!({
                "model": "gpt-4.1",
                "messages": [{"role": "user", "content": "Hi"}],
                "max_completion_tokens": 1024,
            })
        );
    }

    #[test]
    fn stream_request_shape() {
        let mut stream = params("gpt-4.1");
        stream.stream = true;
        let (request, body) =
            encode_ok("openai", &PreparedConversation::of(vec![Turn::user(vec![text("Hi")])]), &stream);
        assert!(request.headers.contains(&("accept".to_owned(), "text/event-stream".to_owned())));
        assert_eq!(body["stream"], json!(true));
        assert_eq!(body["stream_options"], json!({"include_usage": true}));
    }

    #[test]
    fn never_an_auth_header() {
        for provider in ["openai", "openai-compatible"] {
            for streaming in [false, true] {
                let mut p = params("gpt-4.1");
                p.stream = streaming;
                let (request, _) =
                    encode_ok(provider, &PreparedConversation::of(vec![Turn::user(vec![text("Hi")])]), &p);
                for (name, _) in &request.headers {
                    let name = name.to_ascii_lowercase();
                    assert!(name != "authorization" && !name.contains("key"), "{name}");
                }
            }
        }
    }

    #[test]
    fn system_role_per_model_and_dialect() {
        let mut conv = PreparedConversation::of(vec![Turn::user(vec![text("Hi")])]);
        conv.system = vec!["Answer briefly.".into(), "Use metric units.".into()];
        let cases = [
            ("openai", "o3", "developer"),
            ("openai", "o1-mini", "developer"),
            ("openai", "gpt-5", "developer"),
            ("openai", "gpt-4.1", "system"),
            ("openai-compatible", "o3", "system"),
            ("openai-compatible", "gpt-5", "system"),
        ];
        for (provider, model, role) in cases {
            let body = body_of(provider, &conv, &params(model));
            assert_eq!(
                body["messages"][0],
                json!({"role": role, "content": "Answer briefly.\n\nUse metric units."}),
                "{provider} {model}"
            );
        }
    }

    #[test]
    fn max_tokens_field_per_dialect() {
        let conv = PreparedConversation::of(vec![Turn::user(vec![text("Hi")])]);
        let openai = body_of("openai", &conv, &params("gpt-4.1"));
        assert_eq!(openai["max_completion_tokens"], json!(1024));
        assert!(openai.get("max_tokens").is_none());
        let compatible = body_of("openai-compatible", &conv, &params("llama3.1:8b"));
        assert_eq!(compatible["max_tokens"], json!(1024));
        assert!(compatible.get("max_completion_tokens").is_none());
    }

    /// The host owns which deployments take no temperature (it leaves it out of
    /// the call parameters); the component writes what it is given, for any model.
    #[test]
    fn temperature_is_written_as_the_host_sends_it() {
        let conv = PreparedConversation::of(vec![Turn::user(vec![text("Hi")])]);
        let with_temperature = |model: &str| {
            let mut p = params(model);
            p.temperature = Some(0.7);
            p
        };
        for provider in ["openai", "openai-compatible"] {
            for model in ["o3", "gpt-5-mini", "gpt-4.1", "llama3.1:8b"] {
                let body = body_of(provider, &conv, &with_temperature(model));
                assert_eq!(body["temperature"], json!(0.7), "{provider} {model}");
            }
            assert!(body_of(provider, &conv, &params("o3")).get("temperature").is_none(), "{provider}: none given");
        }
    }

    #[test]
    fn stop_effort_and_schema() {
        let mut p = params("o3");
        p.stop = vec!["END".into()];
        p.reasoning_effort = Some(Effort::Max);
        p.response_schema = Some(ResponseSchema {
            name: "weather".into(),
            schema_json: r#"{"type":"object","properties":{"c":{"type":"number"}},"required":["c"],"additionalProperties":false}"#.into(),
        });
        let body = body_of("openai", &PreparedConversation::of(vec![Turn::user(vec![text("Hi")])]), &p);
        assert_eq!(body["stop"], json!(["END"]));
        assert_eq!(body["reasoning_effort"], json!("high"));
        assert_eq!(
            body["response_format"],
            json!({"type": "json_schema", "json_schema": {
                "name": "weather",
                "schema": {"type":"object","properties":{"c":{"type":"number"}},"required":["c"],"additionalProperties":false},
                "strict": true,
            }})
        );
        p.reasoning_effort = Some(Effort::Minimal);
        p.stop.clear();
        let body = body_of("openai", &PreparedConversation::of(vec![Turn::user(vec![text("Hi")])]), &p);
        assert_eq!(body["reasoning_effort"], json!("minimal"));
        assert!(body.get("stop").is_none());
    }

    #[test]
    fn tools_and_tool_choice() {
        let mut conv = PreparedConversation::of(vec![Turn::user(vec![text("Weather in Paris?")])]);
        conv.tools = vec![weather_tool()];
        let choices = [
            (ToolChoice::Auto, json!("auto")),
            (ToolChoice::None, json!("none")),
            (ToolChoice::Required, json!("required")),
            (ToolChoice::Named("get_weather".into()), json!({"type": "function", "function": {"name": "get_weather"}})),
        ];
        for (choice, wire) in choices {
            conv.tool_choice = Some(choice);
            let body = body_of("openai", &conv, &params("gpt-4.1"));
            assert_eq!(body["tool_choice"], wire);
            assert_eq!(
                body["tools"],
                json!([{"type": "function", "function": {
                    "name": "get_weather",
                    "description": "Current weather",
                    "parameters": {"type":"object","properties":{"city":{"type":"string"}},"required":["city"]},
                }}])
            );
        }
    }

    #[test]
    fn neutral_tool_choice_without_tools_is_left_out() {
        let mut conv = PreparedConversation::of(vec![Turn::user(vec![text("Hi")])]);
        conv.tool_choice = Some(ToolChoice::None);
        let body = body_of("openai", &conv, &params("gpt-4.1"));
        assert!(body.get("tool_choice").is_none());
        assert!(body.get("tools").is_none());
    }

    #[test]
    fn images_by_url_and_base64() {
        let conv = PreparedConversation::of(vec![Turn::user(vec![
            text("What is in these images?"),
            ContentBlock::Image(Media {
                mime_type: "image/png".into(),
                source: MediaSource::Url("https://example.com/cat.png".into()),
            }),
            ContentBlock::Image(Media { mime_type: "image/png".into(), source: MediaSource::Base64("iVBOR".into()) }),
        ])]);
        let body = body_of("openai-compatible", &conv, &params("llava"));
        assert_eq!(
            body["messages"][0],
            json!({"role": "user", "content": [
                {"type": "text", "text": "What is in these images?"},
                {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBOR"}},
            ]})
        );
    }

    #[test]
    fn documents_native_for_openai_fallback_elsewhere() {
        let pdf = ContentBlock::Document(Media {
            mime_type: "application/pdf".into(),
            source: MediaSource::Base64("JVBERi0x".into()),
        });
        let conv = PreparedConversation::of(vec![Turn::user(vec![pdf.clone(), text("Summarize.")])]);
        let body = body_of("openai", &conv, &params("gpt-4.1"));
        assert_eq!(
            body["messages"][0]["content"][0],
            json!({"type": "file", "file": {"filename": "document.pdf", "file_data": "data:application/pdf;base64,JVBERi0x"}})
        );
        let body = body_of("openai-compatible", &conv, &params("qwen3"));
        assert_eq!(body["messages"][0]["content"][0], json!({"type": "text", "text": block_as_text(&pdf)}));
        let by_url = ContentBlock::Document(Media {
            mime_type: "application/pdf".into(),
            source: MediaSource::Url("https://example.com/a.pdf".into()),
        });
        let body = body_of("openai", &PreparedConversation::of(vec![Turn::user(vec![by_url])]), &params("gpt-4.1"));
        assert_eq!(body["messages"][0]["content"], json!("[document application/pdf: https://example.com/a.pdf]"));
    }

    #[test]
    fn tool_results_come_before_the_rest_of_the_user_turn() {
        let conv = PreparedConversation::of(vec![
            Turn::user(vec![text("Weather in Paris and Rome?")]),
            Turn::assistant(vec![
                ContentBlock::ToolUse(ToolUse {
                    id: "call_a".into(),
                    name: "get_weather".into(),
                    input_json: r#"{"city":"Paris"}"#.into(),
                }),
                ContentBlock::ToolUse(ToolUse {
                    id: "call_b".into(),
                    name: "get_weather".into(),
                    input_json: r#"{"city":"Rome"}"#.into(),
                }),
            ]),
            Turn::user(vec![
                text("Thanks."),
                ContentBlock::ToolResult(ToolResult {
                    tool_use_id: "call_a".into(),
                    content: vec![LeafBlock::Text("18C, sunny".into())],
                    is_error: false,
                }),
                ContentBlock::ToolResult(ToolResult {
                    tool_use_id: "call_b".into(),
                    content: vec![
                        LeafBlock::Text("station offline".into()),
                        LeafBlock::Image(Media {
                            mime_type: "image/png".into(),
                            source: MediaSource::Url("https://x/map.png".into()),
                        }),
                    ],
                    is_error: true,
                }),
            ]),
        ]);
        let body = body_of("openai", &conv, &params("gpt-4.1"));
        assert_eq!(
            body["messages"],
            json!([
                {"role": "user", "content": "Weather in Paris and Rome?"},
                {"role": "assistant", "content": null, "tool_calls": [
                    {"id": "call_a", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}},
                    {"id": "call_b", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":\"Rome\"}"}},
                ]},
                {"role": "tool", "tool_call_id": "call_a", "content": "18C, sunny"},
                {"role": "tool", "tool_call_id": "call_b", "content": "Error: station offline\n[image image/png: https://x/map.png]"},
                {"role": "user", "content": "Thanks."},
            ])
        );
    }

    #[test]
    fn assistant_text_thinking_and_images_fall_back_to_text() {
        let thinking =
            ContentBlock::Thinking(Thinking { text: "Paris first.".into(), signature: None, redacted: false });
        let image =
            ContentBlock::Image(Media { mime_type: "image/png".into(), source: MediaSource::Base64("AAAA".into()) });
        let conv = PreparedConversation::of(vec![
            Turn::user(vec![text("Hi")]),
            Turn::assistant(vec![
                thinking.clone(),
                text("Let me check."),
                image.clone(),
                ContentBlock::ToolUse(ToolUse {
                    id: "call_1".into(),
                    name: "get_weather".into(),
                    input_json: "{}".into(),
                }),
            ]),
        ]);
        let body = body_of("openai", &conv, &params("gpt-4.1"));
        let message = &body["messages"][1];
        let expected = format!("{}\n\nLet me check.\n\n{}", block_as_text(&thinking), block_as_text(&image));
        assert_eq!(message["content"], json!(expected));
        assert_eq!(message["tool_calls"][0]["function"]["arguments"], json!("{}"));
    }

    #[test]
    fn empty_assistant_turn_gets_empty_content() {
        let conv = PreparedConversation::of(vec![
            Turn::user(vec![text("Hi")]),
            Turn::assistant(vec![]),
            Turn::user(vec![text("Hello?")]),
        ]);
        let body = body_of("openai", &conv, &params("gpt-4.1"));
        assert_eq!(body["messages"][1], json!({"role": "assistant", "content": ""}));
    }

    #[test]
    fn invalid_json_is_unsupported_and_named() {
        let mut conv = PreparedConversation::of(vec![Turn::user(vec![text("Hi")])]);
        conv.tools = vec![ToolDefinition { parameters_json: "{not json".into(), ..weather_tool() }];
        let message = unsupported(encode("openai", &conv, &params("gpt-4.1")));
        assert!(message.contains("parameters_json") && message.contains("get_weather"), "{message}");

        let conv = PreparedConversation::of(vec![
            Turn::user(vec![text("Hi")]),
            Turn::assistant(vec![ContentBlock::ToolUse(ToolUse {
                id: "call_1".into(),
                name: "get_weather".into(),
                input_json: r#"{"city":"#.into(),
            })]),
        ]);
        let message = unsupported(encode("openai", &conv, &params("gpt-4.1")));
        assert!(message.contains("input_json") && message.contains("call_1"), "{message}");

        let mut p = params("gpt-4.1");
        p.response_schema = Some(ResponseSchema { name: "weather".into(), schema_json: "nope".into() });
        let message = unsupported(encode("openai", &PreparedConversation::of(vec![Turn::user(vec![text("Hi")])]), &p));
        assert!(message.contains("response schema"), "{message}");
    }

    #[test]
    fn unknown_provider_key_is_unsupported() {
        let message = unsupported(encode(
            "anthropic",
            &PreparedConversation::of(vec![Turn::user(vec![text("Hi")])]),
            &params("gpt-4.1"),
        ));
        assert!(message.contains("unknown provider key"), "{message}");
    }

    #[test]
    fn azure_deployment_names_the_deployment_in_the_url_not_the_body() {
        let conv = PreparedConversation::of(vec![Turn::user(vec![text("Hi")])]);
        let mut p = params("gpt-4o-prod");
        p.stream = true;
        let (request, body) = encode_ok("azure-openai", &conv, &p);
        assert_eq!(request.path_and_query, "/openai/deployments/gpt-4o-prod/chat/completions?api-version=2024-10-21");
        assert_eq!(body.get("model"), None);
        assert_eq!(body["max_completion_tokens"], json!(1024));
        assert_eq!(body["stream_options"], json!({"include_usage": true}));
        assert!(request.headers.iter().all(|(name, _)| name != "api-key" && name != "authorization"));
        let refused = unsupported(encode("azure-openai", &conv, &params("../other")));
        assert!(refused.contains("not an Azure deployment name"), "{refused}");
    }

    #[test]
    fn azure_v1_sends_the_deployment_as_the_model() {
        let conv = PreparedConversation::of(vec![Turn::user(vec![text("Hi")])]);
        let (request, body) = encode_ok("azure-openai-v1", &conv, &params("o4-mini-prod"));
        assert_eq!(request.path_and_query, "/openai/v1/chat/completions");
        assert_eq!(body["model"], json!("o4-mini-prod"));
        assert_eq!(body["max_completion_tokens"], json!(1024));
    }

    #[test]
    fn azure_reads_a_document_as_its_text_fallback() {
        let document = ContentBlock::Document(Media {
            mime_type: "application/pdf".into(),
            source: MediaSource::Base64("JVBERi0=".into()),
        });
        let conv = PreparedConversation::of(vec![Turn::user(vec![document.clone(), text("Summarize")])]);
        let body = body_of("azure-openai", &conv, &params("d"));
        let parts = &body["messages"][0]["content"];
        assert_eq!(parts[0], json!({"type": "text", "text": block_as_text(&document)}));
    }

    #[test]
    fn presets_field_names_and_stream_usage() {
        let conv = PreparedConversation::of(vec![Turn::user(vec![text("Hi")])]);
        let mut p = params("m");
        p.stream = true;
        let cases = [
            ("mistral", "max_tokens", false),
            ("groq", "max_completion_tokens", true),
            ("deepseek", "max_tokens", true),
            ("xai", "max_completion_tokens", true),
            ("together", "max_tokens", false),
            ("openrouter", "max_tokens", false),
            ("cerebras", "max_completion_tokens", false),
        ];
        for (key, field, stream_options) in cases {
            let (request, body) = encode_ok(key, &conv, &p);
            assert_eq!(request.path_and_query, "/chat/completions", "{key}");
            assert_eq!(body["model"], json!("m"), "{key}");
            assert_eq!(body[field], json!(1024), "{key}");
            let other = if field == "max_tokens" { "max_completion_tokens" } else { "max_tokens" };
            assert_eq!(body.get(other), None, "{key}");
            assert_eq!(body.get("stream_options").is_some(), stream_options, "{key}");
            assert_eq!(body["stream"], json!(true), "{key}");
        }
    }

    fn tool_loop() -> PreparedConversation {
        PreparedConversation::of(vec![
            Turn::user(vec![text("Weather in Paris?")]),
            Turn::assistant(vec![
                ContentBlock::Thinking(Thinking { text: "Look it up.".into(), signature: None, redacted: false }),
                ContentBlock::ToolUse(ToolUse {
                    id: "call_PTLP8xhu3uwZk4l3nlnrrJha".into(),
                    name: "get_weather".into(),
                    input_json: r#"{"city":"Paris"}"#.into(),
                }),
            ]),
            Turn::user(vec![ContentBlock::ToolResult(ToolResult {
                tool_use_id: "call_PTLP8xhu3uwZk4l3nlnrrJha".into(),
                content: vec![LeafBlock::Text("18C".into())],
                is_error: false,
            })]),
        ])
    }

    #[test]
    fn mistral_tool_ids_are_nine_alphanumerics_matched_between_call_and_result() {
        let body = body_of("mistral", &tool_loop(), &params("mistral-large-latest"));
        let call_id = body["messages"][1]["tool_calls"][0]["id"].as_str().unwrap().to_owned();
        assert_eq!(call_id.len(), 9);
        assert!(call_id.bytes().all(|byte| byte.is_ascii_alphanumeric()), "{call_id}");
        assert_eq!(body["messages"][2]["tool_call_id"], json!(call_id));
        let openai = body_of("openai", &tool_loop(), &params("gpt-4.1"));
        assert_eq!(openai["messages"][1]["tool_calls"][0]["id"], json!("call_PTLP8xhu3uwZk4l3nlnrrJha"));
    }

    #[test]
    fn deepseek_gets_its_reasoning_back_in_reasoning_content_never_in_content() {
        let body = body_of("deepseek", &tool_loop(), &params("deepseek-v4-pro"));
        let assistant = &body["messages"][1];
        assert_eq!(assistant["content"], Value::Null, "only the call: no thinking in the content");
        assert_eq!(assistant["reasoning_content"], json!("Look it up."));
        assert_eq!(body.to_string().matches("Look it up.").count(), 1);
        let compatible = body_of("openai-compatible", &tool_loop(), &params("m"));
        assert!(compatible.to_string().contains("Look it up."), "other keys keep the text fallback");
    }
}
