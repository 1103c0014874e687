//! Encoding for the Responses API: the prepared conversation as `input` items,
//! the system blocks as `instructions`, and the call parameters in the
//! Responses shape (`max_output_tokens`, `reasoning.effort`, `text.format`).

use serde_json::{Map, Value, json};
use weir_sdk::fallback::{block_as_text, leaf_as_text};
use weir_sdk::json::{parse_value, to_body};
use weir_sdk::types::{
    CallParams, CodecError, ContentBlock, HttpRequest, LeafBlock, Media, MediaSource, PreparedConversation,
    ResponseSchema, Thinking, ToolChoice, ToolDefinition, ToolResult, ToolUse, Turn, TurnRole,
};

use super::signature::ReasoningSignature;
use crate::request::{data_url, effort_word, headers, temperature};

/// Appended to the endpoint's base URL (which ends in `/v1` for OpenAI).
pub const PATH: &str = "/responses";

/// Builds the request. Stop sequences are refused: the Responses API has no
/// field for them, and dropping one would change where the answer ends.
pub fn encode(conversation: &PreparedConversation, params: &CallParams) -> Result<HttpRequest, CodecError> {
    encode_with(conversation, params, |_| Ok(()))
}

/// [`encode`], with `extend` changing the body before it is written (the
/// caller's native fields; see `super::native`).
pub(super) fn encode_with(
    conversation: &PreparedConversation,
    params: &CallParams,
    extend: impl FnOnce(&mut Map<String, Value>) -> Result<(), CodecError>,
) -> Result<HttpRequest, CodecError> {
    if !params.stop.is_empty() {
        return Err(CodecError::Unsupported(
            "OpenAI's Responses API takes no stop sequences; use an `openai` entry for them".to_owned(),
        ));
    }
    Ok(HttpRequest {
        method: "POST".to_owned(),
        path_and_query: PATH.to_owned(),
        headers: headers(params.stream),
        body: {
            let mut body = body(conversation, params)?;
            extend(&mut body)?;
            to_body(&Value::Object(body))?
        },
    })
}

fn body(conversation: &PreparedConversation, params: &CallParams) -> Result<Map<String, Value>, CodecError> {
    let mut body = Map::new();
    body.insert("model".into(), json!(params.wire_model_id));
    if !conversation.system.is_empty() {
        body.insert("instructions".into(), json!(conversation.system.join("\n\n")));
    }
    body.insert("input".into(), Value::Array(input(conversation)?));
    if !conversation.tools.is_empty() {
        let tools = conversation.tools.iter().map(tool).collect::<Result<Vec<_>, _>>()?;
        body.insert("tools".into(), Value::Array(tools));
    }
    if let Some(choice) = tool_choice(conversation) {
        body.insert("tool_choice".into(), choice);
    }
    body.insert("max_output_tokens".into(), json!(params.max_tokens));
    if let Some(temperature) = temperature(params)? {
        body.insert("temperature".into(), temperature);
    }
    if let Some(effort) = params.reasoning_effort {
        // No `summary`: OpenAI refuses reasoning summaries to an organization it
        // has not verified, and the encrypted item alone carries the reasoning on.
        body.insert("reasoning".into(), json!({"effort": effort_word(effort)}));
        // Without it a reasoning item cannot be sent back when nothing is stored.
        body.insert("include".into(), json!(["reasoning.encrypted_content"]));
    }
    if let Some(schema) = &params.response_schema {
        body.insert("text".into(), json!({"format": text_format(schema)?}));
    }
    body.insert("store".into(), json!(false));
    if params.stream {
        body.insert("stream".into(), json!(true));
    }
    Ok(body)
}

fn text_format(schema: &ResponseSchema) -> Result<Value, CodecError> {
    let parsed = parse_value(&schema.schema_json, &format!("response schema {:?}", schema.name))?;
    Ok(json!({"type": "json_schema", "name": schema.name, "schema": parsed, "strict": true}))
}

fn tool(definition: &ToolDefinition) -> Result<Value, CodecError> {
    let what = format!("parameters_json of tool {:?}", definition.name);
    let parameters = parse_value(&definition.parameters_json, &what)?;
    let mut tool = Map::new();
    tool.insert("type".into(), json!("function"));
    tool.insert("name".into(), json!(definition.name));
    if !definition.description.is_empty() {
        tool.insert("description".into(), json!(definition.description));
    }
    tool.insert("parameters".into(), parameters);
    // The host's schemas are not written for strict mode (every property required).
    tool.insert("strict".into(), json!(false));
    Ok(Value::Object(tool))
}

/// As on Chat Completions: left out when there are no tools and it would change nothing.
fn tool_choice(conversation: &PreparedConversation) -> Option<Value> {
    let choice = conversation.tool_choice.as_ref()?;
    let no_tools = conversation.tools.is_empty();
    match choice {
        ToolChoice::Auto | ToolChoice::None if no_tools => None,
        ToolChoice::Auto => Some(json!("auto")),
        ToolChoice::None => Some(json!("none")),
        ToolChoice::Required => Some(json!("required")),
        ToolChoice::Named(name) => Some(json!({"type": "function", "name": name})),
    }
}

/// How many `input` items each turn renders to, in order.
pub(super) fn items_per_turn(conversation: &PreparedConversation) -> Result<Vec<usize>, CodecError> {
    let mut counts = Vec::with_capacity(conversation.turns.len());
    for turn in &conversation.turns {
        let mut items = Vec::new();
        match turn.role {
            TurnRole::User => user_items(turn, &mut items),
            TurnRole::Assistant => assistant_items(turn, &mut items)?,
        }
        counts.push(items.len());
    }
    Ok(counts)
}

/// The turns as items, in order.
fn input(conversation: &PreparedConversation) -> Result<Vec<Value>, CodecError> {
    let mut items = Vec::new();
    for turn in &conversation.turns {
        match turn.role {
            TurnRole::User => user_items(turn, &mut items),
            TurnRole::Assistant => assistant_items(turn, &mut items)?,
        }
    }
    Ok(items)
}

/// A user turn: its tool results as `function_call_output` items, the rest as
/// one user message, each where it stood.
fn user_items(turn: &Turn, out: &mut Vec<Value>) {
    let mut parts = Vec::new();
    for block in &turn.content {
        match block {
            ContentBlock::ToolResult(result) => {
                flush_user_message(&mut parts, out);
                out.push(tool_output(result));
            }
            other => parts.extend(user_part(other)),
        }
    }
    flush_user_message(&mut parts, out);
}

fn flush_user_message(parts: &mut Vec<Value>, out: &mut Vec<Value>) {
    if !parts.is_empty() {
        out.push(json!({"type": "message", "role": "user", "content": std::mem::take(parts)}));
    }
}

fn user_part(block: &ContentBlock) -> Option<Value> {
    match block {
        ContentBlock::Text(text) => Some(json!({"type": "input_text", "text": text})),
        ContentBlock::Image(media) => Some(image_part(media)),
        ContentBlock::Document(media) => Some(file_part(media)),
        // A user turn holds neither calls nor thinking; a result is handled apart.
        ContentBlock::ToolUse(_) | ContentBlock::ToolResult(_) | ContentBlock::Thinking(_) => None,
    }
}

fn image_part(media: &Media) -> Value {
    let url = match &media.source {
        MediaSource::Url(url) => url.clone(),
        MediaSource::Base64(data) => data_url(&media.mime_type, data),
    };
    json!({"type": "input_image", "image_url": url, "detail": "auto"})
}

fn file_part(media: &Media) -> Value {
    match &media.source {
        MediaSource::Url(url) => json!({"type": "input_file", "file_url": url}),
        MediaSource::Base64(data) => {
            json!({"type": "input_file", "filename": "document.pdf", "file_data": data_url(&media.mime_type, data)})
        }
    }
}

/// A tool result: text alone as a string; with images, the list of parts.
fn tool_output(result: &ToolResult) -> Value {
    let has_media = result.content.iter().any(|leaf| !matches!(leaf, LeafBlock::Text(_)));
    let output = if has_media && !result.is_error {
        Value::Array(result.content.iter().map(leaf_part).collect())
    } else {
        let text = result.content.iter().map(leaf_as_text).collect::<Vec<_>>().join("\n");
        json!(if result.is_error { format!("Error: {text}") } else { text })
    };
    json!({"type": "function_call_output", "call_id": result.tool_use_id, "output": output})
}

fn leaf_part(leaf: &LeafBlock) -> Value {
    match leaf {
        LeafBlock::Text(text) => json!({"type": "input_text", "text": text}),
        LeafBlock::Image(media) => image_part(media),
        LeafBlock::Document(media) => file_part(media),
    }
}

/// An assistant turn: reasoning items, text as assistant messages and calls as
/// `function_call` items, each where it stood.
fn assistant_items(turn: &Turn, out: &mut Vec<Value>) -> Result<(), CodecError> {
    for block in &turn.content {
        match block {
            ContentBlock::Thinking(thinking) => match reasoning_item(thinking) {
                Some(item) => out.push(item),
                None => out.push(assistant_text(&block_as_text(block))),
            },
            ContentBlock::Text(text) if text.is_empty() => {}
            ContentBlock::Text(text) => out.push(assistant_text(text)),
            ContentBlock::ToolUse(call) => out.push(function_call(call)?),
            other => out.push(assistant_text(&block_as_text(other))),
        }
    }
    Ok(())
}

fn assistant_text(text: &str) -> Value {
    json!({"type": "message", "role": "assistant", "content": text})
}

/// A reasoning item back from the signature this component wrote. Thinking
/// without one (another provider's, or none) cannot be replayed as an item
/// (OpenAI rejects one it cannot decrypt): it goes as text, like any block
/// this wire has no form for.
fn reasoning_item(thinking: &Thinking) -> Option<Value> {
    let signature = ReasoningSignature::parse(thinking.signature.as_deref()?)?;
    let summary: Vec<Value> = match thinking.text.is_empty() || thinking.redacted {
        true => Vec::new(),
        false => vec![json!({"type": "summary_text", "text": thinking.text})],
    };
    Some(json!({
        "type": "reasoning",
        "id": signature.id,
        "summary": summary,
        "encrypted_content": signature.encrypted_content,
    }))
}

fn function_call(call: &ToolUse) -> Result<Value, CodecError> {
    parse_value(&call.input_json, &format!("input_json of tool_use {:?}", call.id))?;
    Ok(json!({"type": "function_call", "call_id": call.id, "name": call.name, "arguments": call.input_json}))
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::panic)] // a failing test should stop loudly
mod tests {
    use weir_sdk::types::Effort;

    use super::*;

    fn text(text: &str) -> ContentBlock {
        ContentBlock::Text(text.to_owned())
    }

    fn body_of(conversation: &PreparedConversation, params: &CallParams) -> Value {
        let request = encode(conversation, params).unwrap();
        assert_eq!(request.path_and_query, "/responses");
        serde_json::from_slice(&request.body).unwrap()
    }

    fn signed(id: &str, secret: &str) -> Option<String> {
        ReasoningSignature { id: id.to_owned(), encrypted_content: secret.to_owned() }.to_text()
    }

    #[test]
    fn a_tool_loop_goes_out_as_items_with_its_reasoning_first() {
        let weather = ToolDefinition {
            name: "get_weather".into(),
            description: "Weather".into(),
            parameters_json: r#"{"type":"object","properties":{"city":{"type":"string"}}}"#.into(),
        };
        let mut conversation = PreparedConversation::of(vec![
            Turn::user(vec![text("Weather in Paris?")]),
            Turn::assistant(vec![
                ContentBlock::Thinking(Thinking {
                    text: "Use the tool.".into(),
                    signature: signed("rs_1", "enc-1"),
                    redacted: false,
                }),
                ContentBlock::Thinking(Thinking {
                    text: "claude's".into(),
                    signature: Some("EqQB-anthropic".into()),
                    redacted: false,
                }),
                ContentBlock::ToolUse(ToolUse {
                    id: "call_1".into(),
                    name: "get_weather".into(),
                    input_json: r#"{"city":"Paris"}"#.into(),
                }),
            ]),
            Turn::user(vec![ContentBlock::ToolResult(ToolResult {
                tool_use_id: "call_1".into(),
                content: vec![LeafBlock::Text("18C".into())],
                is_error: false,
            })]),
        ]);
        conversation.system = vec!["Be brief.".into()];
        conversation.tools = vec![weather];
        conversation.tool_choice = Some(ToolChoice::Named("get_weather".into()));
        let mut params = CallParams::new("gpt-5", 2048);
        params.reasoning_effort = Some(Effort::Max);
        params.stream = true;

        let body = body_of(&conversation, &params);
        assert_eq!(body["instructions"], "Be brief.");
        assert_eq!(body["max_output_tokens"], 2048);
        assert_eq!(body["store"], false);
        assert_eq!(body["stream"], true);
        assert_eq!(body["reasoning"], json!({"effort": "high"}));
        assert_eq!(body["include"], json!(["reasoning.encrypted_content"]));
        assert_eq!(
            body["tools"][0],
            json!({"type": "function", "name": "get_weather", "description": "Weather",
            "parameters": {"type":"object","properties":{"city":{"type":"string"}}}, "strict": false})
        );
        assert_eq!(body["tool_choice"], json!({"type": "function", "name": "get_weather"}));
        assert_eq!(
            body["input"],
            json!([
                {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Weather in Paris?"}]},
                {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "Use the tool."}], "encrypted_content": "enc-1"},
                {"type": "message", "role": "assistant", "content": "<thinking>claude's</thinking>"},
                {"type": "function_call", "call_id": "call_1", "name": "get_weather", "arguments": "{\"city\":\"Paris\"}"},
                {"type": "function_call_output", "call_id": "call_1", "output": "18C"},
            ])
        );
    }

    #[test]
    fn media_go_as_input_parts_and_a_schema_as_the_text_format() {
        let png = Media { mime_type: "image/png".into(), source: MediaSource::Base64("iVBOR".into()) };
        let pdf = Media { mime_type: "application/pdf".into(), source: MediaSource::Url("https://x/doc.pdf".into()) };
        let conversation = PreparedConversation::of(vec![Turn::user(vec![
            text("Look"),
            ContentBlock::Image(png),
            ContentBlock::Document(pdf),
        ])]);
        let mut params = CallParams::new("gpt-4.1", 100);
        params.response_schema =
            Some(ResponseSchema { name: "answer".into(), schema_json: r#"{"type":"object"}"#.into() });
        let body = body_of(&conversation, &params);
        assert_eq!(
            body["input"][0]["content"][1],
            json!({"type": "input_image", "image_url": "data:image/png;base64,iVBOR", "detail": "auto"})
        );
        assert_eq!(body["input"][0]["content"][2], json!({"type": "input_file", "file_url": "https://x/doc.pdf"}));
        assert_eq!(
            body["text"]["format"],
            json!({"type": "json_schema", "name": "answer", "schema": {"type": "object"}, "strict": true})
        );
        assert!(body.get("reasoning").is_none() && body.get("include").is_none() && body.get("stream").is_none());
    }

    #[test]
    fn stop_sequences_and_broken_arguments_are_refused() {
        let conversation = PreparedConversation::of(vec![Turn::user(vec![text("Hi")])]);
        let mut params = CallParams::new("gpt-4.1", 100);
        params.stop = vec!["END".into()];
        assert!(matches!(encode(&conversation, &params), Err(CodecError::Unsupported(_))));

        let broken = PreparedConversation::of(vec![
            Turn::user(vec![text("Hi")]),
            Turn::assistant(vec![ContentBlock::ToolUse(ToolUse {
                id: "c".into(),
                name: "f".into(),
                input_json: "{not json".into(),
            })]),
        ]);
        assert!(encode(&broken, &CallParams::new("gpt-4.1", 100)).is_err());
    }
}
