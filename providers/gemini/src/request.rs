//! Encoding: a prepared conversation and its parameters → one `generateContent`
//! (or `streamGenerateContent?alt=sse`) request. The model id goes in the path;
//! the body is the same on Google AI Studio and on Vertex AI, and carries no
//! credential (the host adds `x-goog-api-key` or `authorization`).
//!
//! How each block goes on the wire:
//!
//! * text → a `text` part; images and documents → `inlineData` (base64 and its
//!   `mimeType`), or `fileData` for an `https://` URL, which Google fetches
//!   itself (AI Studio's file input guide lists public and signed HTTPS URLs as
//!   `fileData`; Vertex takes them the same way). Any other URL (`http:`, `gs:`,
//!   `data:`) is refused: the component fetches nothing, and a `gs://` object is
//!   a deployment's bucket, never a caller's to name.
//! * tool use → a `functionCall` part (`name`, `args`, and the `id` when Gemini
//!   gave one); tool results → `functionResponse` parts in a user turn, named
//!   after the call they answer (Gemini matches results to calls by name and
//!   order, so the name is looked up from the call's id in the history).
//! * thinking → a `thought: true` text part (redacted thinking, another
//!   provider's opaque payload, as its text rendering); a signature this component wrote
//!   (see [`crate::signature`]) goes back as `thoughtSignature` on the part it
//!   came with: the next non-thinking part of the turn, or the thinking's own
//!   part when none follows; of joined signatures (see `signature`), the
//!   earlier go on the thinking's own part. Another provider's signature is
//!   not sent.
//!
//! `generationConfig` carries `maxOutputTokens` (the host's reserve, exactly),
//! `temperature`, `stopSequences`, a response schema as `responseMimeType:
//! application/json` + `responseJsonSchema` (full JSON Schema, unlike the
//! OpenAPI subset `responseSchema` takes), and `thinkingConfig` (see [`thinking`]).

use serde_json::{Map, Value, json};
use weir_sdk::fallback::block_as_text;
use weir_sdk::json::{parse_value, sampling_number, to_body};
use weir_sdk::types::{
    CallParams, CodecError, ContentBlock, Effort, Headers, HttpRequest, LeafBlock, Media, MediaSource,
    PreparedConversation, ToolChoice, ToolDefinition, ToolResult, ToolUse, Turn, TurnRole,
};

use crate::signature;

/// The non-streaming method, appended to `/models/{id}`.
pub const GENERATE: &str = ":generateContent";
/// The streaming method, answered as SSE: each `data:` a GenerateContentResponse.
pub const STREAM_GENERATE: &str = ":streamGenerateContent?alt=sse";

/// Gemini accepts at most this many stop sequences.
const MAX_STOP_SEQUENCES: usize = 5;

/// Builds the request, or refuses what Gemini cannot carry.
pub fn encode(conversation: &PreparedConversation, params: &CallParams) -> Result<HttpRequest, CodecError> {
    let method = if params.stream { STREAM_GENERATE } else { GENERATE };
    Ok(HttpRequest {
        method: "POST".to_owned(),
        path_and_query: model_path(&params.wire_model_id, method)?,
        headers: headers(params.stream),
        body: to_body(&body(conversation, params)?)?,
    })
}

/// `/models/{id}{method}`. The id lands in a path, so it is held to the
/// characters Google's model ids use: nothing a caller could steer into
/// another path or a query.
pub fn model_path(wire_id: &str, method: &str) -> Result<String, CodecError> {
    let plain = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '@');
    if wire_id.is_empty() || !wire_id.chars().all(plain) {
        return Err(CodecError::Unsupported(format!(
            "model id {wire_id:?}: Gemini model ids are letters, digits and `-_.@` only"
        )));
    }
    Ok(format!("/models/{wire_id}{method}"))
}

fn headers(stream: bool) -> Headers {
    let accept = if stream { "text/event-stream" } else { "application/json" };
    vec![("content-type".to_owned(), "application/json".to_owned()), ("accept".to_owned(), accept.to_owned())]
}

fn body(conversation: &PreparedConversation, params: &CallParams) -> Result<Value, CodecError> {
    let mut body = Map::new();
    body.insert("contents".into(), contents(&conversation.turns)?);
    if let Some(system) = system_instruction(&conversation.system) {
        body.insert("systemInstruction".into(), system);
    }
    if let Some((tools, tool_config)) = tools(conversation)? {
        body.insert("tools".into(), tools);
        if let Some(tool_config) = tool_config {
            body.insert("toolConfig".into(), tool_config);
        }
    }
    body.insert("generationConfig".into(), generation_config(params)?);
    Ok(Value::Object(body))
}

/// System text as one instruction of text parts; none when every block is empty.
fn system_instruction(system: &[String]) -> Option<Value> {
    let parts: Vec<Value> = system.iter().filter(|text| !text.is_empty()).map(|text| json!({"text": text})).collect();
    (!parts.is_empty()).then(|| json!({"parts": parts}))
}

// ---------------------------------------------------------------- generation config

fn generation_config(params: &CallParams) -> Result<Value, CodecError> {
    let mut config = Map::new();
    config.insert("maxOutputTokens".into(), json!(params.max_tokens));
    if let Some(temperature) = params.temperature {
        config.insert("temperature".into(), sampling_number(temperature, "temperature")?);
    }
    if !params.stop.is_empty() {
        if params.stop.len() > MAX_STOP_SEQUENCES {
            return Err(CodecError::Unsupported(format!(
                "{} stop sequences: Gemini takes at most {MAX_STOP_SEQUENCES}",
                params.stop.len()
            )));
        }
        config.insert("stopSequences".into(), json!(params.stop));
    }
    if let Some(schema) = &params.response_schema {
        let what = format!("response schema {:?}", schema.name);
        config.insert("responseMimeType".into(), json!("application/json"));
        config.insert("responseJsonSchema".into(), parse_value(&schema.schema_json, &what)?);
    }
    if let Some(thinking) = thinking(params, &params.wire_model_id) {
        config.insert("thinkingConfig".into(), thinking);
    }
    Ok(Value::Object(config))
}

/// `thinkingConfig`: the host's thinking budget as `thinkingBudget` (an entry
/// declared `reasoning = "thinking"`), else an effort (`reasoning = "effort"`):
/// on Gemini 3 and later as a `thinkingLevel` (see [`effort_level`]), on
/// Gemini 2.5 as the budget Google's OpenAI compatibility layer maps it to
/// (low 1 024, medium 8 192, high 24 576; minimal as low, max as high), never
/// above the output reserve, since Gemini counts thinking inside
/// `maxOutputTokens`. Never both fields: Google refuses a request with both.
/// Thought summaries are asked for (`includeThoughts`) whenever thinking is
/// configured, so the answer's reasoning reaches the caller. Neither given:
/// no `thinkingConfig`, and the model thinks as it does by default.
fn thinking(params: &CallParams, wire_id: &str) -> Option<Value> {
    match (params.thinking_budget, params.reasoning_effort) {
        (Some(budget), _) => Some(json!({"thinkingBudget": budget, "includeThoughts": true})),
        (None, Some(effort)) if takes_levels(wire_id) => {
            Some(json!({"thinkingLevel": effort_level(effort, wire_id), "includeThoughts": true}))
        }
        (None, Some(effort)) => {
            Some(json!({"thinkingBudget": effort_budget(effort).min(params.max_tokens), "includeThoughts": true}))
        }
        (None, None) => None,
    }
}

/// Whether `wire_id` names a model that takes its thinking as a level:
/// Gemini 3 and later (`gemini-3-flash-preview`, `gemini-3.1-pro-preview`),
/// and an alias without a version (`gemini-flash-latest`), which points at the
/// current family. Gemini 2.5 and older take a budget.
fn takes_levels(wire_id: &str) -> bool {
    let Some(rest) = wire_id.strip_prefix("gemini-") else { return false };
    let major: String = rest.chars().take_while(char::is_ascii_digit).collect();
    major.parse::<u32>().map_or(true, |major| major >= 3)
}

/// An effort as a `thinkingLevel` every Gemini 3 model takes: `low`, `medium`
/// and `high`. `minimal` is sent as `low` (Gemini 3.1 Pro refuses `minimal`),
/// `max` as `high` (the deepest level the family shares), and `medium` as
/// `high` on Gemini 3 Pro, which takes only `low` and `high`.
fn effort_level(effort: Effort, wire_id: &str) -> &'static str {
    let only_low_and_high = wire_id.starts_with("gemini-3-pro");
    match effort {
        Effort::Minimal | Effort::Low => "low",
        Effort::Medium if only_low_and_high => "high",
        Effort::Medium => "medium",
        Effort::High | Effort::Max => "high",
    }
}

fn effort_budget(effort: Effort) -> u32 {
    match effort {
        Effort::Minimal | Effort::Low => 1_024,
        Effort::Medium => 8_192,
        Effort::High | Effort::Max => 24_576,
    }
}

// ---------------------------------------------------------------- tools

/// `tools` and `toolConfig`, or `None` when no tools are declared.
/// `parametersJsonSchema` takes the caller's JSON Schema as it is (the older
/// `parameters` takes an OpenAPI subset and rejects common keywords).
fn tools(conversation: &PreparedConversation) -> Result<Option<(Value, Option<Value>)>, CodecError> {
    let choice = conversation.tool_choice.as_ref();
    if conversation.tools.is_empty() {
        return match choice {
            Some(ToolChoice::Required | ToolChoice::Named(_)) => {
                Err(CodecError::Unsupported("a tool call is required but no tools are given".to_owned()))
            }
            Some(ToolChoice::Auto | ToolChoice::None) | None => Ok(None),
        };
    }
    let declarations = conversation.tools.iter().map(declaration).collect::<Result<Vec<_>, _>>()?;
    let tools = json!([{"functionDeclarations": declarations}]);
    let config = match choice {
        // AUTO is the default: nothing to send.
        Some(ToolChoice::Auto) | None => None,
        Some(ToolChoice::None) => Some(json!({"functionCallingConfig": {"mode": "NONE"}})),
        Some(ToolChoice::Required) => Some(json!({"functionCallingConfig": {"mode": "ANY"}})),
        Some(ToolChoice::Named(name)) => {
            if !conversation.tools.iter().any(|tool| &tool.name == name) {
                return Err(CodecError::Unsupported(format!("tool choice names {name:?}, which is not a given tool")));
            }
            Some(json!({"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": [name]}}))
        }
    };
    Ok(Some((tools, config)))
}

fn declaration(tool: &ToolDefinition) -> Result<Value, CodecError> {
    let schema = parse_value(&tool.parameters_json, &format!("parameters_json of tool {:?}", tool.name))?;
    let mut declaration = Map::new();
    declaration.insert("name".into(), json!(tool.name));
    if !tool.description.is_empty() {
        declaration.insert("description".into(), json!(tool.description));
    }
    declaration.insert("parametersJsonSchema".into(), schema);
    Ok(Value::Object(declaration))
}

// ---------------------------------------------------------------- contents

fn contents(turns: &[Turn]) -> Result<Value, CodecError> {
    let mut contents = Vec::with_capacity(turns.len());
    for turn in turns {
        let parts = match turn.role {
            TurnRole::User => user_parts(turn, turns)?,
            TurnRole::Assistant => model_parts(turn)?,
        };
        if parts.is_empty() {
            continue;
        }
        let role = match turn.role {
            TurnRole::User => "user",
            TurnRole::Assistant => "model",
        };
        contents.push(json!({"role": role, "parts": parts}));
    }
    Ok(Value::Array(contents))
}

fn user_parts(turn: &Turn, history: &[Turn]) -> Result<Vec<Value>, CodecError> {
    let mut parts = Vec::new();
    for block in &turn.content {
        match block {
            ContentBlock::Text(text) if text.is_empty() => {}
            ContentBlock::Text(text) => parts.push(json!({"text": text})),
            ContentBlock::Image(media) => parts.push(media_part("image", media)?),
            ContentBlock::Document(media) => parts.push(media_part("document", media)?),
            ContentBlock::ToolResult(result) => parts.extend(tool_result_parts(result, history)?),
            ContentBlock::ToolUse(call) => {
                return Err(CodecError::Unsupported(format!("tool use {:?} in a user turn", call.id)));
            }
            ContentBlock::Thinking(_) => {
                return Err(CodecError::Unsupported("thinking in a user turn".to_owned()));
            }
        }
    }
    Ok(parts)
}

/// A model turn's parts, each signature on the part it came with (module doc).
fn model_parts(turn: &Turn) -> Result<Vec<Value>, CodecError> {
    let mut parts = Vec::new();
    // A signature waiting for the next non-thinking part.
    let mut pending: Option<String> = None;
    for block in &turn.content {
        let part = match block {
            ContentBlock::Thinking(thinking) => {
                let mut signatures: Vec<&str> = thinking.signature.as_deref().map(signature::parse).unwrap_or_default();
                // A new signature: the one still waiting was the previous block's own.
                if !signatures.is_empty()
                    && let Some(previous) = pending.take()
                {
                    sign_own_part(&mut parts, previous);
                }
                let next = signatures.pop();
                if thinking.redacted {
                    // Another provider's opaque reasoning: Gemini cannot read it, so
                    // its text rendering stands in for it, never the payload.
                    parts.push(json!({"text": block_as_text(block), "thought": true}));
                } else if !thinking.text.is_empty() {
                    parts.push(json!({"text": thinking.text, "thought": true}));
                }
                // Joined signatures: the earlier ones were this block's own parts'.
                for own in signatures {
                    sign_own_part(&mut parts, own.to_owned());
                }
                if let Some(next) = next {
                    pending = Some(next.to_owned());
                }
                continue;
            }
            ContentBlock::Text(text) if text.is_empty() => continue,
            ContentBlock::Text(text) => json!({"text": text}),
            ContentBlock::ToolUse(call) => function_call_part(call)?,
            ContentBlock::Image(media) => media_part("image", media)?,
            ContentBlock::Document(media) => media_part("document", media)?,
            ContentBlock::ToolResult(result) => {
                return Err(CodecError::Unsupported(format!(
                    "tool result for {:?} in an assistant turn",
                    result.tool_use_id
                )));
            }
        };
        parts.push(with_signature(part, pending.take()));
    }
    if let Some(signature) = pending {
        // No part followed: the signature rides its own (thought or empty) part.
        sign_own_part(&mut parts, signature);
    }
    Ok(parts)
}

/// A signature whose part is the thinking just written: on the last thought part
/// when it has none yet, else on an empty text part of its own.
fn sign_own_part(parts: &mut Vec<Value>, signature: String) {
    match parts.last_mut() {
        Some(last) if last.get("thought").is_some() && last.get("thoughtSignature").is_none() => {
            *last = with_signature(last.take(), Some(signature));
        }
        _ => parts.push(json!({"text": "", "thoughtSignature": signature})),
    }
}

fn with_signature(mut part: Value, signature: Option<String>) -> Value {
    if let (Some(signature), Some(object)) = (signature, part.as_object_mut()) {
        object.insert("thoughtSignature".into(), Value::String(signature));
    }
    part
}

/// `args` must be a JSON object; the id goes back only when Gemini gave one.
fn function_call_part(call: &ToolUse) -> Result<Value, CodecError> {
    let args = parse_value(&call.input_json, &format!("input_json of tool use {:?}", call.id))?;
    if !args.is_object() {
        return Err(CodecError::Unsupported(format!("input_json of tool use {:?} is not a JSON object", call.id)));
    }
    let mut function_call = Map::new();
    function_call.insert("name".into(), json!(call.name));
    function_call.insert("args".into(), args);
    if let Some(id) = crate::response::upstream_call_id(&call.id) {
        function_call.insert("id".into(), json!(id));
    }
    Ok(json!({"functionCall": function_call}))
}

/// A tool result as a `functionResponse` (its text as `output`, or `error` when
/// the tool failed), named after the call it answers; its images and documents
/// follow as parts of the same user turn.
fn tool_result_parts(result: &ToolResult, history: &[Turn]) -> Result<Vec<Value>, CodecError> {
    let name = call_name(&result.tool_use_id, history).ok_or_else(|| {
        CodecError::Unsupported(format!(
            "tool result for {:?}: no tool call with that id in the conversation, and Gemini matches results by name",
            result.tool_use_id
        ))
    })?;
    let mut text = Vec::new();
    let mut media = Vec::new();
    for leaf in &result.content {
        match leaf {
            LeafBlock::Text(piece) => text.push(piece.as_str()),
            LeafBlock::Image(item) => media.push(media_part("image", item)?),
            LeafBlock::Document(item) => media.push(media_part("document", item)?),
        }
    }
    let key = if result.is_error { "error" } else { "output" };
    let mut function_response = Map::new();
    function_response.insert("name".into(), json!(name));
    function_response.insert("response".into(), json!({key: text.join("\n")}));
    if let Some(id) = crate::response::upstream_call_id(&result.tool_use_id) {
        function_response.insert("id".into(), json!(id));
    }
    let mut parts = vec![json!({"functionResponse": function_response})];
    parts.extend(media);
    Ok(parts)
}

/// The name of the call `id` names, from the assistant turns of the history.
fn call_name<'a>(id: &str, history: &'a [Turn]) -> Option<&'a str> {
    history.iter().filter(|turn| turn.role == TurnRole::Assistant).flat_map(|turn| &turn.content).find_map(|block| {
        match block {
            ContentBlock::ToolUse(call) if call.id == id => Some(call.name.as_str()),
            _ => None,
        }
    })
}

fn media_part(kind: &str, media: &Media) -> Result<Value, CodecError> {
    let mime_type = media.mime_type.to_ascii_lowercase();
    let accepted = match kind {
        "image" => mime_type.starts_with("image/"),
        _ => mime_type == "application/pdf" || mime_type.starts_with("text/"),
    };
    if !accepted {
        return Err(CodecError::Unsupported(format!(
            "{kind} of type {:?}: Gemini takes images, PDF and text documents here",
            media.mime_type
        )));
    }
    match &media.source {
        MediaSource::Base64(data) => Ok(json!({"inlineData": {"mimeType": mime_type, "data": data}})),
        MediaSource::Url(url) if url.starts_with("https://") => {
            Ok(json!({"fileData": {"mimeType": mime_type, "fileUri": url}}))
        }
        MediaSource::Url(url) => Err(CodecError::Unsupported(format!(
            "{kind} by URL ({url}): Gemini fetches https:// URLs only, and the component fetches nothing"
        ))),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::panic)] // a failing test should stop loudly
mod tests {
    use super::*;
    use weir_sdk::types::{ResponseSchema, Thinking};

    fn text(text: &str) -> ContentBlock {
        ContentBlock::Text(text.to_owned())
    }

    fn body_of(conversation: &PreparedConversation, params: &CallParams) -> Value {
        serde_json::from_slice(&encode(conversation, params).unwrap().body).unwrap()
    }

    fn unsupported(result: Result<HttpRequest, CodecError>) -> String {
        match result {
            Err(CodecError::Unsupported(message)) => message,
            other => panic!("expected unsupported, got {other:?}"),
        }
    }

    fn weather() -> ToolDefinition {
        ToolDefinition {
            name: "get_weather".into(),
            description: "Current weather".into(),
            parameters_json:
                r#"{"type":"object","properties":{"city":{"type":"string"}},"additionalProperties":false}"#.into(),
        }
    }

    fn signed(thought: &str, sig: &str) -> ContentBlock {
        ContentBlock::Thinking(Thinking {
            text: thought.into(),
            signature: Some(signature::wrap(sig)),
            redacted: false,
        })
    }

    #[test]
    fn text_request_paths_and_headers() {
        let conversation = PreparedConversation::of(vec![Turn::user(vec![text("Hi")])]);
        let mut params = CallParams::new("gemini-2.5-flash", 321);
        let request = encode(&conversation, &params).unwrap();
        assert_eq!(request.path_and_query, "/models/gemini-2.5-flash:generateContent");
        assert_eq!(
            serde_json::from_slice::<Value>(&request.body).unwrap(),
            json!({"contents": [{"role": "user", "parts": [{"text": "Hi"}]}],
                   "generationConfig": {"maxOutputTokens": 321}})
        );
        params.stream = true;
        let request = encode(&conversation, &params).unwrap();
        assert_eq!(request.path_and_query, "/models/gemini-2.5-flash:streamGenerateContent?alt=sse");
        assert!(request.headers.contains(&("accept".to_owned(), "text/event-stream".to_owned())));
    }

    #[test]
    fn a_model_id_cannot_steer_the_path() {
        let conversation = PreparedConversation::of(vec![Turn::user(vec![text("Hi")])]);
        for id in ["../x", "gemini?key=1", "a/b", "", "gemini:generateContent"] {
            assert!(unsupported(encode(&conversation, &CallParams::new(id, 8))).contains("model id"), "{id}");
        }
    }

    #[test]
    fn system_config_schema_and_thinking() {
        let mut conversation = PreparedConversation::of(vec![Turn::user(vec![text("Hi")])]);
        conversation.system = vec!["Be brief.".into(), String::new()];
        let mut params = CallParams::new("gemini-2.5-pro", 2048);
        params.temperature = Some(0.7);
        params.stop = vec!["END".into()];
        params.thinking_budget = Some(1024);
        params.response_schema =
            Some(ResponseSchema { name: "answer".into(), schema_json: r#"{"type":"object"}"#.into() });
        let body = body_of(&conversation, &params);
        assert_eq!(body["systemInstruction"], json!({"parts": [{"text": "Be brief."}]}));
        assert_eq!(
            body["generationConfig"],
            json!({"maxOutputTokens": 2048, "temperature": 0.7, "stopSequences": ["END"],
                   "responseMimeType": "application/json", "responseJsonSchema": {"type": "object"},
                   "thinkingConfig": {"thinkingBudget": 1024, "includeThoughts": true}})
        );
        params.thinking_budget = None;
        params.reasoning_effort = Some(Effort::High);
        assert_eq!(body_of(&conversation, &params)["generationConfig"]["thinkingConfig"]["thinkingBudget"], 2048);
        params.reasoning_effort = Some(Effort::Low);
        assert_eq!(body_of(&conversation, &params)["generationConfig"]["thinkingConfig"]["thinkingBudget"], 1024);
        params.stop = (0..6).map(|n| n.to_string()).collect();
        assert!(unsupported(encode(&conversation, &params)).contains("at most 5"));
    }

    #[test]
    fn gemini_3_takes_its_effort_as_a_level_and_never_both_fields() {
        let conversation = PreparedConversation::of(vec![Turn::user(vec![text("Hi")])]);
        let level = |id: &str, effort: Effort| {
            let mut params = CallParams::new(id, 4096);
            params.reasoning_effort = Some(effort);
            body_of(&conversation, &params)["generationConfig"]["thinkingConfig"].clone()
        };
        let cases = [
            ("gemini-3.1-pro-preview", Effort::Minimal, "low"),
            ("gemini-3.1-pro-preview", Effort::Medium, "medium"),
            ("gemini-3.1-pro-preview", Effort::Max, "high"),
            ("gemini-3-flash-preview", Effort::Low, "low"),
            ("gemini-3-pro-preview", Effort::Medium, "high"),
            ("gemini-flash-latest", Effort::High, "high"),
        ];
        for (id, effort, expected) in cases {
            assert_eq!(level(id, effort), json!({"thinkingLevel": expected, "includeThoughts": true}), "{id}");
        }
        // Gemini 2.5 keeps the budget; a caller's own budget is sent alone on Gemini 3.
        assert_eq!(level("gemini-2.5-flash-lite", Effort::Medium)["thinkingBudget"], 4096);
        let mut params = CallParams::new("gemini-3.1-pro-preview", 4096);
        params.thinking_budget = Some(2000);
        params.reasoning_effort = Some(Effort::High);
        assert_eq!(
            body_of(&conversation, &params)["generationConfig"]["thinkingConfig"],
            json!({"thinkingBudget": 2000, "includeThoughts": true})
        );
    }

    #[test]
    fn tools_choice_calls_results_and_signatures() {
        let mut conversation = PreparedConversation::of(vec![
            Turn::user(vec![text("Weather in Paris?")]),
            Turn::assistant(vec![
                signed("Need the tool.", "c2lnLTE="),
                ContentBlock::ToolUse(ToolUse {
                    id: "gemini-call-0".into(),
                    name: "get_weather".into(),
                    input_json: r#"{"city":"Paris"}"#.into(),
                }),
            ]),
            Turn::user(vec![ContentBlock::ToolResult(ToolResult {
                tool_use_id: "gemini-call-0".into(),
                content: vec![LeafBlock::Text("18C".into())],
                is_error: false,
            })]),
        ]);
        conversation.tools = vec![weather()];
        conversation.tool_choice = Some(ToolChoice::Named("get_weather".into()));
        let body = body_of(&conversation, &CallParams::new("gemini-2.5-flash", 64));
        assert_eq!(body["tools"][0]["functionDeclarations"][0]["parametersJsonSchema"]["additionalProperties"], false);
        assert_eq!(
            body["toolConfig"],
            json!({"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["get_weather"]}})
        );
        assert_eq!(
            body["contents"][1],
            json!({"role": "model", "parts": [
                {"text": "Need the tool.", "thought": true},
                {"functionCall": {"name": "get_weather", "args": {"city": "Paris"}}, "thoughtSignature": "c2lnLTE="}]})
        );
        assert_eq!(
            body["contents"][2],
            json!({"role": "user", "parts": [
                {"functionResponse": {"name": "get_weather", "response": {"output": "18C"}}}]})
        );
    }

    #[test]
    fn a_trailing_signature_rides_its_own_part_and_a_foreign_one_is_not_sent() {
        let conversation = PreparedConversation::of(vec![
            Turn::user(vec![text("Hi")]),
            Turn::assistant(vec![
                ContentBlock::Thinking(Thinking {
                    text: "Claude's".into(),
                    signature: Some("EqQBanthropic".into()),
                    redacted: false,
                }),
                ContentBlock::Thinking(Thinking { text: "EmwKopaque".into(), signature: None, redacted: true }),
                text("Hello"),
                signed("", "dHJhaWw="),
            ]),
            Turn::user(vec![text("Again")]),
        ]);
        let body = body_of(&conversation, &CallParams::new("gemini-2.5-flash", 64));
        assert_eq!(
            body["contents"][1]["parts"],
            json!([{"text": "Claude's", "thought": true}, {"text": "[redacted reasoning]", "thought": true},
                   {"text": "Hello"},
                   {"text": "", "thoughtSignature": "dHJhaWw="}])
        );
    }

    #[test]
    fn joined_signatures_go_back_on_the_thought_and_the_part_after_it() {
        let joined = format!("{}{}", signature::wrap("b3du"), signature::wrap("bmV4dA=="));
        let conversation = PreparedConversation::of(vec![
            Turn::user(vec![text("Hi")]),
            Turn::assistant(vec![
                ContentBlock::Thinking(Thinking { text: "Think.".into(), signature: Some(joined), redacted: false }),
                text("Hello"),
            ]),
            Turn::user(vec![text("Again")]),
        ]);
        let body = body_of(&conversation, &CallParams::new("gemini-2.5-flash", 64));
        assert_eq!(
            body["contents"][1]["parts"],
            json!([{"text": "Think.", "thought": true, "thoughtSignature": "b3du"},
                   {"text": "Hello", "thoughtSignature": "bmV4dA=="}])
        );
    }

    #[test]
    fn media_inline_https_and_refusals() {
        let media = |mime: &str, source: MediaSource| Media { mime_type: mime.into(), source };
        let conversation = PreparedConversation::of(vec![Turn::user(vec![
            ContentBlock::Image(media("image/png", MediaSource::Base64("iVBOR".into()))),
            ContentBlock::Document(media("application/pdf", MediaSource::Url("https://example.com/a.pdf".into()))),
        ])]);
        let body = body_of(&conversation, &CallParams::new("gemini-2.5-flash", 64));
        assert_eq!(
            body["contents"][0]["parts"],
            json!([{"inlineData": {"mimeType": "image/png", "data": "iVBOR"}},
                   {"fileData": {"mimeType": "application/pdf", "fileUri": "https://example.com/a.pdf"}}])
        );
        for (kind, block) in [
            ("URL", ContentBlock::Image(media("image/png", MediaSource::Url("gs://bucket/a.png".into())))),
            ("URL", ContentBlock::Image(media("image/png", MediaSource::Url("http://example.com/a.png".into())))),
            ("type", ContentBlock::Document(media("application/zip", MediaSource::Base64("UEs=".into())))),
        ] {
            let conversation = PreparedConversation::of(vec![Turn::user(vec![block])]);
            assert!(unsupported(encode(&conversation, &CallParams::new("gemini-2.5-flash", 8))).contains(kind));
        }
    }

    #[test]
    fn a_result_for_an_unknown_call_and_a_required_call_without_tools_are_refused() {
        let orphan = PreparedConversation::of(vec![Turn::user(vec![ContentBlock::ToolResult(ToolResult {
            tool_use_id: "nope".into(),
            content: vec![],
            is_error: true,
        })])]);
        assert!(unsupported(encode(&orphan, &CallParams::new("gemini-2.5-flash", 8))).contains("no tool call"));
        let mut required = PreparedConversation::of(vec![Turn::user(vec![text("Hi")])]);
        required.tool_choice = Some(ToolChoice::Required);
        assert!(unsupported(encode(&required, &CallParams::new("gemini-2.5-flash", 8))).contains("no tools"));
    }
}
