//! Encoding: a prepared conversation and its parameters → one Converse (or
//! ConverseStream) request. The model id goes in the path, never in the body; the
//! request carries no credential, since the host signs it with SigV4.
//!
//! Refused as `unsupported`, each for a reason:
//!
//! * `response-schema`: Converse's JSON-schema output (`outputConfig`) is recent and
//!   model-dependent, and the forced-tool workaround would answer with a tool call
//!   instead of text, which a stateless `decode` cannot tell apart from a real one.
//! * `thinking-budget`: Converse has no portable thinking field. The budget-shaped
//!   knob is Claude's `thinking` in `additionalModelRequestFields`, and Claude goes
//!   to `anthropic-bedrock`; Nova's `reasoningConfig` takes an effort level, not a
//!   budget, and other families think on their own or not at all. A budget sent to
//!   a model that ignores it would book headroom for thinking that never happens.
//! * images and documents by URL (Converse takes bytes or S3 locations only), and
//!   media types Converse has no `format` for.
//!
//! `reasoning-effort` goes in `additionalModelRequestFields`, in the spelling of the
//! model's family: Nova's `reasoningConfig` (`type: enabled`, `maxReasoningEffort`)
//! for an `amazon.nova` id, else the OpenAI-style `reasoning_effort` that gpt-oss
//! takes on Converse. The host passes an effort only to an entry that declares
//! `reasoning = "effort"`; the id picks the spelling, never whether one is sent.
//!
//! Tool choice `none` has no Converse form (`auto`, `any`, `tool` only), so it
//! leaves the tools out: a model that is given no tools calls none. Bedrock rejects
//! `toolUse` / `toolResult` blocks in a request without a `toolConfig`, so whenever
//! no tools are sent, tool blocks in the history go as their text rendering.

use serde_json::{Map, Value, json};
use weir_sdk::bedrock::model_path;
use weir_sdk::fallback::block_as_text;
use weir_sdk::json::{parse_value, sampling_number, to_body};
use weir_sdk::types::{
    CallParams, CodecError, ContentBlock, Effort, Headers, HttpRequest, LeafBlock, Media, MediaSource,
    PreparedConversation, Thinking, ToolChoice, ToolDefinition, ToolResult, ToolUse, Turn, TurnRole,
};

/// The non-streaming operation, `POST /model/{id}/converse`.
pub const CONVERSE: &str = "converse";
/// The streaming operation: the same body, answered as an AWS event stream.
pub const CONVERSE_STREAM: &str = "converse-stream";

/// A cache breakpoint: Converse's own block, placed after the content to cache.
const CACHE_POINT: &str = "cachePoint";

/// Builds the request, or refuses what Converse cannot carry.
pub fn encode(conversation: &PreparedConversation, params: &CallParams) -> Result<HttpRequest, CodecError> {
    refuse_unsupported_params(params)?;
    let operation = if params.stream { CONVERSE_STREAM } else { CONVERSE };
    Ok(HttpRequest {
        method: "POST".to_owned(),
        path_and_query: model_path(&params.wire_model_id, operation),
        headers: headers(params.stream),
        body: to_body(&body(conversation, params)?)?,
    })
}

/// JSON in; JSON out, or the event stream for ConverseStream. Never a credential:
/// the host owns secrets and signs the request.
fn headers(stream: bool) -> Headers {
    let accept = if stream { "application/vnd.amazon.eventstream" } else { "application/json" };
    vec![("content-type".to_owned(), "application/json".to_owned()), ("accept".to_owned(), accept.to_owned())]
}

fn refuse_unsupported_params(params: &CallParams) -> Result<(), CodecError> {
    if let Some(schema) = &params.response_schema {
        return Err(CodecError::Unsupported(format!(
            "response schema {:?}: Converse has no portable structured output, and a forced tool would answer \
             with a tool call instead of text",
            schema.name
        )));
    }
    if let Some(budget) = params.thinking_budget {
        return Err(CodecError::Unsupported(format!(
            "thinking budget {budget}: Converse has no thinking budget for the models this provider serves"
        )));
    }
    Ok(())
}

fn body(conversation: &PreparedConversation, params: &CallParams) -> Result<Value, CodecError> {
    let tool_config = tool_config(conversation)?;
    let mut renderer = Renderer { native_tools: tool_config.is_some(), documents: 0 };
    let mut body = Map::new();
    body.insert("messages".into(), renderer.messages(&conversation.turns)?);
    if let Some(system) = system(conversation) {
        body.insert("system".into(), system);
    }
    body.insert("inferenceConfig".into(), inference_config(params)?);
    if let Some(tool_config) = tool_config {
        body.insert("toolConfig".into(), tool_config);
    }
    if let Some(effort) = params.reasoning_effort {
        body.insert("additionalModelRequestFields".into(), effort_fields(&params.wire_model_id, effort));
    }
    Ok(Value::Object(body))
}

/// The effort in the model family's field (see the module doc). Both take
/// `low`, `medium` and `high`: `minimal` is sent as the least there is, `max`
/// as the most.
fn effort_fields(wire_model_id: &str, effort: Effort) -> Value {
    let level = match effort {
        Effort::Minimal | Effort::Low => "low",
        Effort::Medium => "medium",
        Effort::High | Effort::Max => "high",
    };
    if is_nova(wire_model_id) {
        json!({"reasoningConfig": {"type": "enabled", "maxReasoningEffort": level}})
    } else {
        json!({"reasoning_effort": level})
    }
}

/// `amazon.nova-…`, or the same behind a cross-region profile (`us.amazon.nova-…`,
/// `global.amazon.nova-…`).
fn is_nova(wire_model_id: &str) -> bool {
    let behind_profile = wire_model_id.split_once('.').is_some_and(|(_, rest)| rest.starts_with("amazon.nova"));
    wire_model_id.starts_with("amazon.nova") || behind_profile
}

/// `maxTokens` is the host's output reserve, written exactly.
fn inference_config(params: &CallParams) -> Result<Value, CodecError> {
    let mut config = Map::new();
    config.insert("maxTokens".into(), json!(params.max_tokens));
    if let Some(temperature) = params.temperature {
        config.insert("temperature".into(), sampling_number(temperature, "temperature")?);
    }
    if !params.stop.is_empty() {
        config.insert("stopSequences".into(), json!(params.stop));
    }
    Ok(Value::Object(config))
}

/// System text blocks, then a cache point when the host planned one on the last.
/// Empty strings are left out: Bedrock rejects blank text.
fn system(conversation: &PreparedConversation) -> Option<Value> {
    let mut blocks: Vec<Value> =
        conversation.system.iter().filter(|text| !text.is_empty()).map(|text| json!({"text": text})).collect();
    if conversation.cache_system && !blocks.is_empty() {
        blocks.push(cache_point());
    }
    (!blocks.is_empty()).then_some(Value::Array(blocks))
}

fn cache_point() -> Value {
    json!({CACHE_POINT: {"type": "default"}})
}

// ---------------------------------------------------------------- tools

/// The tools and the choice, or `None` when no tools go on the wire (none given,
/// or choice `none`; see the module doc).
fn tool_config(conversation: &PreparedConversation) -> Result<Option<Value>, CodecError> {
    let choice = conversation.tool_choice.as_ref();
    if conversation.tools.is_empty() {
        return match choice {
            Some(ToolChoice::Required | ToolChoice::Named(_)) => {
                Err(CodecError::Unsupported("a tool call is required but no tools are given".to_owned()))
            }
            Some(ToolChoice::Auto | ToolChoice::None) | None => Ok(None),
        };
    }
    let tools = conversation.tools.iter().map(tool_spec).collect::<Result<Vec<_>, _>>()?;
    let mut config = Map::new();
    config.insert("tools".into(), Value::Array(tools));
    match choice {
        Some(ToolChoice::None) => return Ok(None),
        // `auto` is Converse's default, and only some families (Claude, Mistral
        // Large, Nova) accept a `toolChoice` at all: leaving it out keeps the others working.
        Some(ToolChoice::Auto) | None => {}
        Some(ToolChoice::Required) => {
            config.insert("toolChoice".into(), json!({"any": {}}));
        }
        Some(ToolChoice::Named(name)) => {
            config.insert("toolChoice".into(), json!({"tool": {"name": name}}));
        }
    }
    Ok(Some(Value::Object(config)))
}

fn tool_spec(definition: &ToolDefinition) -> Result<Value, CodecError> {
    let what = format!("parameters_json of tool {:?}", definition.name);
    let schema = parse_value(&definition.parameters_json, &what)?;
    let mut spec = Map::new();
    spec.insert("name".into(), json!(definition.name));
    if !definition.description.is_empty() {
        spec.insert("description".into(), json!(definition.description));
    }
    spec.insert("inputSchema".into(), json!({"json": schema}));
    Ok(json!({"toolSpec": spec}))
}

// ---------------------------------------------------------------- messages

/// Renders turns; holds what spans the whole request.
struct Renderer {
    /// Whether tool blocks go natively (a `toolConfig` is sent) or as text.
    native_tools: bool,
    /// Documents rendered so far: each gets a distinct name.
    documents: u32,
}

impl Renderer {
    fn messages(&mut self, turns: &[Turn]) -> Result<Value, CodecError> {
        turns.iter().map(|turn| self.message(turn)).collect::<Result<Vec<_>, _>>().map(Value::Array)
    }

    fn message(&mut self, turn: &Turn) -> Result<Value, CodecError> {
        let mut blocks = Vec::new();
        for block in &turn.content {
            blocks.extend(self.content_block(block)?);
        }
        if turn.cache && !blocks.is_empty() {
            blocks.push(cache_point());
        }
        let role = match turn.role {
            TurnRole::User => "user",
            TurnRole::Assistant => "assistant",
        };
        Ok(json!({"role": role, "content": blocks}))
    }

    /// A block on the wire; `None` only for empty text, which Bedrock rejects and
    /// which carries nothing.
    fn content_block(&mut self, block: &ContentBlock) -> Result<Option<Value>, CodecError> {
        let value = match block {
            ContentBlock::Text(text) if text.is_empty() => return Ok(None),
            ContentBlock::Text(text) => json!({"text": text}),
            ContentBlock::Image(media) => image_block(media)?,
            ContentBlock::Document(media) => self.document_block(media)?,
            ContentBlock::ToolUse(_) | ContentBlock::ToolResult(_) if !self.native_tools => {
                json!({"text": block_as_text(block)})
            }
            ContentBlock::ToolUse(call) => tool_use_block(call)?,
            ContentBlock::ToolResult(result) => self.tool_result_block(result)?,
            ContentBlock::Thinking(thinking) => reasoning_block(thinking),
        };
        Ok(Some(value))
    }

    /// Converse requires a document name and reads it as part of the prompt, so the
    /// name is neutral and derived (`document-1`, `document-2`, ...), distinct per request.
    fn document_block(&mut self, media: &Media) -> Result<Value, CodecError> {
        let format = document_format(&media.mime_type).ok_or_else(|| {
            CodecError::Unsupported(format!("document of type {:?}: Converse has no format for it", media.mime_type))
        })?;
        let bytes = media_bytes("document", media)?;
        self.documents += 1;
        let name = format!("document-{}", self.documents);
        Ok(json!({"document": {"format": format, "name": name, "source": {"bytes": bytes}}}))
    }

    fn tool_result_block(&mut self, result: &ToolResult) -> Result<Value, CodecError> {
        let mut content = Vec::new();
        for leaf in &result.content {
            content.extend(self.tool_result_leaf(leaf)?);
        }
        let status = if result.is_error { "error" } else { "success" };
        Ok(json!({"toolResult": {"toolUseId": result.tool_use_id, "content": content, "status": status}}))
    }

    fn tool_result_leaf(&mut self, leaf: &LeafBlock) -> Result<Option<Value>, CodecError> {
        let value = match leaf {
            LeafBlock::Text(text) if text.is_empty() => return Ok(None),
            LeafBlock::Text(text) => json!({"text": text}),
            LeafBlock::Image(media) => image_block(media)?,
            LeafBlock::Document(media) => self.document_block(media)?,
        };
        Ok(Some(value))
    }
}

fn image_block(media: &Media) -> Result<Value, CodecError> {
    let format = image_format(&media.mime_type).ok_or_else(|| {
        CodecError::Unsupported(format!(
            "image of type {:?}: Converse takes png, jpeg, gif and webp only",
            media.mime_type
        ))
    })?;
    let bytes = media_bytes("image", media)?;
    Ok(json!({"image": {"format": format, "source": {"bytes": bytes}}}))
}

/// The base64 bytes: Converse takes no URLs (only bytes or an S3 location, and the
/// component fetches nothing).
fn media_bytes<'a>(kind: &str, media: &'a Media) -> Result<&'a str, CodecError> {
    match &media.source {
        MediaSource::Base64(data) => Ok(data),
        MediaSource::Url(url) => Err(CodecError::Unsupported(format!(
            "{kind} by URL ({url}): Converse takes the bytes only, and the component fetches nothing"
        ))),
    }
}

fn image_format(mime_type: &str) -> Option<&'static str> {
    let format = match mime_type.to_ascii_lowercase().as_str() {
        "image/png" => "png",
        "image/jpeg" | "image/jpg" => "jpeg",
        "image/gif" => "gif",
        "image/webp" => "webp",
        _ => return None,
    };
    Some(format)
}

fn document_format(mime_type: &str) -> Option<&'static str> {
    let format = match mime_type.to_ascii_lowercase().as_str() {
        "application/pdf" => "pdf",
        "text/csv" => "csv",
        "application/msword" => "doc",
        "application/vnd.openxmlformats-officedocument.wordprocessingml.document" => "docx",
        "application/vnd.ms-excel" => "xls",
        "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet" => "xlsx",
        "text/html" => "html",
        "text/plain" => "txt",
        "text/markdown" => "md",
        _ => return None,
    };
    Some(format)
}

/// `input` must be a JSON object on the wire; the host's text is parsed once.
fn tool_use_block(call: &ToolUse) -> Result<Value, CodecError> {
    let input = parse_value(&call.input_json, &format!("input_json of tool use {:?}", call.id))?;
    if !input.is_object() {
        return Err(CodecError::Unsupported(format!("input_json of tool use {:?} is not a JSON object", call.id)));
    }
    Ok(json!({"toolUse": {"toolUseId": call.id, "name": call.name, "input": input}}))
}

/// Reasoning is echoed as received: redacted as its opaque payload, otherwise the
/// text with its signature when it has one (models that return reasoning without a
/// signature, such as DeepSeek-R1, take it back the same way).
fn reasoning_block(thinking: &Thinking) -> Value {
    if thinking.redacted {
        return json!({"reasoningContent": {"redactedContent": thinking.text}});
    }
    let mut text = Map::new();
    text.insert("text".into(), json!(thinking.text));
    if let Some(signature) = &thinking.signature {
        text.insert("signature".into(), json!(signature));
    }
    json!({"reasoningContent": {"reasoningText": text}})
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::panic)] // a failing test should stop loudly
mod tests {
    use super::*;
    use weir_sdk::types::{Effort, ResponseSchema};

    fn params() -> CallParams {
        CallParams::new("us.amazon.nova-pro-v1:0", 4096)
    }

    fn text(text: &str) -> ContentBlock {
        ContentBlock::Text(text.to_owned())
    }

    fn hi() -> PreparedConversation {
        PreparedConversation::of(vec![Turn::user(vec![text("Hi")])])
    }

    fn weather_tool() -> ToolDefinition {
        ToolDefinition {
            name: "get_weather".into(),
            description: "Current weather".into(),
            parameters_json: r#"{"type":"object","properties":{"city":{"type":"string"}}}"#.into(),
        }
    }

    fn media(mime_type: &str, data: &str) -> Media {
        Media { mime_type: mime_type.into(), source: MediaSource::Base64(data.into()) }
    }

    fn tool_exchange() -> Vec<Turn> {
        vec![
            Turn::user(vec![text("Weather in Paris?")]),
            Turn::assistant(vec![ContentBlock::ToolUse(ToolUse {
                id: "tooluse_1".into(),
                name: "get_weather".into(),
                input_json: r#"{"city":"Paris"}"#.into(),
            })]),
            Turn::user(vec![ContentBlock::ToolResult(ToolResult {
                tool_use_id: "tooluse_1".into(),
                content: vec![LeafBlock::Text("18C".into())],
                is_error: false,
            })]),
        ]
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

    #[test]
    fn text_only_request_shape() {
        let request = encode(&hi(), &params()).unwrap();
        assert_eq!(request.method, "POST");
        assert_eq!(request.path_and_query, "/model/us.amazon.nova-pro-v1:0/converse");
        assert_eq!(
            request.headers,
            vec![
                ("content-type".to_owned(), "application/json".to_owned()),
                ("accept".to_owned(), "application/json".to_owned()),
            ]
        );
        assert_eq!(
            serde_json::from_slice::<Value>(&request.body).unwrap(),
            json!({
                "messages": [{"role": "user", "content": [{"text": "Hi"}]}],
                "inferenceConfig": {"maxTokens": 4096},
            })
        );
    }

    #[test]
    fn stream_uses_converse_stream_with_the_same_body() {
        let plain = encode(&hi(), &params()).unwrap();
        let stream = encode(&hi(), &CallParams { stream: true, ..params() }).unwrap();
        assert_eq!(stream.path_and_query, "/model/us.amazon.nova-pro-v1:0/converse-stream");
        assert_eq!(stream.body, plain.body);
        assert!(stream.headers.contains(&("accept".to_owned(), "application/vnd.amazon.eventstream".to_owned())));
    }

    #[test]
    fn arn_ids_are_one_path_segment() {
        let arn = "arn:aws:bedrock:us-east-1:123456789012:application-inference-profile/abc123";
        let request = encode(&hi(), &CallParams { wire_model_id: arn.into(), ..params() }).unwrap();
        assert_eq!(
            request.path_and_query,
            "/model/arn:aws:bedrock:us-east-1:123456789012:application-inference-profile%2Fabc123/converse"
        );
    }

    #[test]
    fn inference_config() {
        let with = CallParams { temperature: Some(0.7), stop: vec!["###".into()], ..params() };
        assert_eq!(
            body_of(&hi(), &with)["inferenceConfig"],
            json!({"maxTokens": 4096, "temperature": 0.7, "stopSequences": ["###"]})
        );
        let body = body_of(&hi(), &CallParams { reasoning_effort: Some(Effort::High), ..params() });
        assert_eq!(body["inferenceConfig"], json!({"maxTokens": 4096}), "the effort is not an inference setting");
        assert!(body_of(&hi(), &params()).get("additionalModelRequestFields").is_none(), "no effort, no field");
    }

    #[test]
    fn an_effort_goes_in_the_model_familys_spelling() {
        let with = |id: &str, effort| {
            let params = CallParams { wire_model_id: id.into(), reasoning_effort: Some(effort), ..params() };
            body_of(&hi(), &params)["additionalModelRequestFields"].clone()
        };
        assert_eq!(with("openai.gpt-oss-120b-1:0", Effort::Medium), json!({"reasoning_effort": "medium"}));
        assert_eq!(with("openai.gpt-oss-20b-1:0", Effort::Minimal), json!({"reasoning_effort": "low"}));
        assert_eq!(with("openai.gpt-oss-20b-1:0", Effort::Max), json!({"reasoning_effort": "high"}));
        let nova = json!({"reasoningConfig": {"type": "enabled", "maxReasoningEffort": "high"}});
        assert_eq!(with("amazon.nova-2-lite-v1:0", Effort::High), nova);
        assert_eq!(with("us.amazon.nova-2-lite-v1:0", Effort::High), nova, "behind a cross-region profile");
        assert_eq!(with("global.amazon.nova-2-lite-v1:0", Effort::High), nova);
        assert_eq!(with("meta.llama3-3-70b-instruct-v1:0", Effort::Low), json!({"reasoning_effort": "low"}));
    }

    #[test]
    fn system_with_cache_point() {
        let mut conv = hi();
        conv.system = vec!["Be terse.".into(), String::new(), "Use metric units.".into()];
        assert_eq!(body_of(&conv, &params())["system"], json!([{"text": "Be terse."}, {"text": "Use metric units."}]));
        conv.cache_system = true;
        assert_eq!(
            body_of(&conv, &params())["system"],
            json!([{"text": "Be terse."}, {"text": "Use metric units."}, {"cachePoint": {"type": "default"}}])
        );
        let mut empty = hi();
        empty.cache_system = true;
        assert!(body_of(&empty, &params()).get("system").is_none());
    }

    #[test]
    fn turn_cache_appends_a_cache_point() {
        let mut first = Turn::user(vec![text("Long document."), text("Question?")]);
        first.cache = true;
        let body = body_of(&PreparedConversation::of(vec![first, Turn::assistant(vec![text("Answer.")])]), &params());
        assert_eq!(
            body["messages"][0]["content"],
            json!([{"text": "Long document."}, {"text": "Question?"}, {"cachePoint": {"type": "default"}}])
        );
        assert_eq!(body["messages"][1]["content"], json!([{"text": "Answer."}]));
    }

    #[test]
    fn tool_config_and_choices() {
        let mut conv = hi();
        conv.tools = vec![weather_tool(), ToolDefinition { description: String::new(), ..weather_tool() }];
        let schema = json!({"type": "object", "properties": {"city": {"type": "string"}}});
        let tools = json!([
            {"toolSpec": {"name": "get_weather", "description": "Current weather", "inputSchema": {"json": schema}}},
            {"toolSpec": {"name": "get_weather", "inputSchema": {"json": schema}}},
        ]);
        let choices = [
            (None, None),
            (Some(ToolChoice::Auto), None),
            (Some(ToolChoice::Required), Some(json!({"any": {}}))),
            (Some(ToolChoice::Named("get_weather".into())), Some(json!({"tool": {"name": "get_weather"}}))),
        ];
        for (choice, wire) in choices {
            conv.tool_choice = choice.clone();
            let config = body_of(&conv, &params())["toolConfig"].clone();
            assert_eq!(config["tools"], tools, "{choice:?}");
            assert_eq!(config.get("toolChoice"), wire.as_ref(), "{choice:?}");
        }
    }

    #[test]
    fn tool_blocks_go_native_with_tools() {
        let mut conv = PreparedConversation::of(tool_exchange());
        conv.tools = vec![weather_tool()];
        let body = body_of(&conv, &params());
        assert_eq!(
            body["messages"][1]["content"],
            json!([{"toolUse": {"toolUseId": "tooluse_1", "name": "get_weather", "input": {"city": "Paris"}}}])
        );
        assert_eq!(
            body["messages"][2]["content"],
            json!([{"toolResult": {"toolUseId": "tooluse_1", "content": [{"text": "18C"}], "status": "success"}}])
        );
    }

    #[test]
    fn choice_none_or_no_tools_sends_no_tool_config_and_tool_blocks_as_text() {
        let mut with_none = PreparedConversation::of(tool_exchange());
        with_none.tools = vec![weather_tool()];
        with_none.tool_choice = Some(ToolChoice::None);
        let without_tools = PreparedConversation::of(tool_exchange());
        for conv in [with_none, without_tools] {
            let body = body_of(&conv, &params());
            assert!(body.get("toolConfig").is_none());
            assert_eq!(
                body["messages"][1]["content"],
                json!([{"text": r#"[tool call tooluse_1 get_weather: {"city":"Paris"}]"#}])
            );
            assert_eq!(body["messages"][2]["content"], json!([{"text": "[tool result tooluse_1: 18C]"}]));
        }
    }

    #[test]
    fn forced_tool_without_tools_is_unsupported() {
        for choice in [ToolChoice::Required, ToolChoice::Named("get_weather".into())] {
            let mut conv = hi();
            conv.tool_choice = Some(choice);
            assert!(unsupported(encode(&conv, &params())).contains("no tools"));
        }
    }

    #[test]
    fn tool_results_with_errors_images_and_documents() {
        let mut conv = PreparedConversation::of(vec![Turn::user(vec![ContentBlock::ToolResult(ToolResult {
            tool_use_id: "tooluse_2".into(),
            content: vec![
                LeafBlock::Text(String::new()),
                LeafBlock::Text("failed".into()),
                LeafBlock::Image(media("image/jpeg", "/9j/")),
                LeafBlock::Document(media("text/csv", "YSxi")),
            ],
            is_error: true,
        })])]);
        conv.tools = vec![weather_tool()];
        assert_eq!(
            body_of(&conv, &params())["messages"][0]["content"][0],
            json!({"toolResult": {"toolUseId": "tooluse_2", "status": "error", "content": [
                {"text": "failed"},
                {"image": {"format": "jpeg", "source": {"bytes": "/9j/"}}},
                {"document": {"format": "csv", "name": "document-1", "source": {"bytes": "YSxi"}}},
            ]}})
        );
    }

    #[test]
    fn images_by_format() {
        let cases = [
            ("image/png", "png"),
            ("image/jpeg", "jpeg"),
            ("IMAGE/JPG", "jpeg"),
            ("image/gif", "gif"),
            ("image/webp", "webp"),
        ];
        for (mime, format) in cases {
            let conv = PreparedConversation::of(vec![Turn::user(vec![
                ContentBlock::Image(media(mime, "AAAA")),
                text("Describe."),
            ])]);
            assert_eq!(
                body_of(&conv, &params())["messages"][0]["content"],
                json!([{"image": {"format": format, "source": {"bytes": "AAAA"}}}, {"text": "Describe."}]),
                "{mime}"
            );
        }
    }

    #[test]
    fn documents_get_formats_and_distinct_names() {
        let conv = PreparedConversation::of(vec![
            Turn::user(vec![ContentBlock::Document(media("application/pdf", "JVBERi0x")), text("Summarize.")]),
            Turn::assistant(vec![text("Done.")]),
            Turn::user(vec![ContentBlock::Document(media("text/markdown", "IyBh")), text("And this?")]),
        ]);
        let body = body_of(&conv, &params());
        assert_eq!(
            body["messages"][0]["content"][0],
            json!({"document": {"format": "pdf", "name": "document-1", "source": {"bytes": "JVBERi0x"}}})
        );
        assert_eq!(
            body["messages"][2]["content"][0],
            json!({"document": {"format": "md", "name": "document-2", "source": {"bytes": "IyBh"}}})
        );
    }

    #[test]
    fn urls_and_unknown_media_types_are_unsupported() {
        let url = Media { mime_type: "image/png".into(), source: MediaSource::Url("https://x/cat.png".into()) };
        let cases = [
            (ContentBlock::Image(url.clone()), "URL"),
            (ContentBlock::Document(Media { mime_type: "application/pdf".into(), ..url }), "URL"),
            (ContentBlock::Image(media("image/tiff", "AAAA")), "image/tiff"),
            (ContentBlock::Document(media("application/zip", "UEsD")), "application/zip"),
        ];
        for (block, expected) in cases {
            let message = unsupported(encode(&PreparedConversation::of(vec![Turn::user(vec![block])]), &params()));
            assert!(message.contains(expected), "{message}");
        }
    }

    #[test]
    fn reasoning_in_history() {
        let conv = PreparedConversation::of(vec![
            Turn::user(vec![text("Hi")]),
            Turn::assistant(vec![
                ContentBlock::Thinking(Thinking {
                    text: "Greet.".into(),
                    signature: Some("sig1".into()),
                    redacted: false,
                }),
                ContentBlock::Thinking(Thinking { text: "Hmm.".into(), signature: None, redacted: false }),
                ContentBlock::Thinking(Thinking { text: "ZW5j".into(), signature: None, redacted: true }),
                text("Hello."),
            ]),
        ]);
        assert_eq!(
            body_of(&conv, &params())["messages"][1]["content"],
            json!([
                {"reasoningContent": {"reasoningText": {"text": "Greet.", "signature": "sig1"}}},
                {"reasoningContent": {"reasoningText": {"text": "Hmm."}}},
                {"reasoningContent": {"redactedContent": "ZW5j"}},
                {"text": "Hello."},
            ])
        );
    }

    #[test]
    fn schema_and_thinking_budget_are_unsupported() {
        let schema = ResponseSchema { name: "city".into(), schema_json: r#"{"type":"object"}"#.into() };
        let message = unsupported(encode(&hi(), &CallParams { response_schema: Some(schema), ..params() }));
        assert!(message.contains("\"city\""), "{message}");
        let message = unsupported(encode(&hi(), &CallParams { thinking_budget: Some(2048), ..params() }));
        assert!(message.contains("2048"), "{message}");
    }

    #[test]
    fn invalid_json_is_unsupported_and_named() {
        let mut conv = hi();
        conv.tools = vec![ToolDefinition { parameters_json: "{not json".into(), ..weather_tool() }];
        let message = unsupported(encode(&conv, &params()));
        assert!(message.contains("parameters_json") && message.contains("get_weather"), "{message}");
        let mut conv = PreparedConversation::of(tool_exchange());
        conv.tools = vec![weather_tool()];
        conv.turns[1].content = vec![ContentBlock::ToolUse(ToolUse {
            id: "tooluse_9".into(),
            name: "get_weather".into(),
            input_json: "[1]".into(),
        })];
        let message = unsupported(encode(&conv, &params()));
        assert!(message.contains("tooluse_9") && message.contains("object"), "{message}");
    }
}
