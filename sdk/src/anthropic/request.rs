//! Encoding: a prepared conversation and its parameters → one Messages API request.
//! The request never carries a credential: the host adds `x-api-key`, or signs
//! with SigV4 on Bedrock.
//!
//! The surfaces differ only in [`surface_fields`], [`path`] and [`headers`]:
//! where the model, the stream switch and the API version go. The codec enables no
//! beta of its own: the `anthropic-beta` header and InvokeModel's `anthropic_beta`
//! body field carry only a caller's betas, through `super::native`. Mantle's
//! data-retention header
//! `anthropic-workspace-id` is never written either: the host binds it from the
//! deployment and re-checks the compliance envelope before anything leaves.
//!
//! Two parameters are deliberately not written:
//!
//! * `reasoning-effort` without a thinking budget. The host turns an effort into a
//!   thinking budget from the catalog entry (its admission books that headroom), so
//!   an effort arriving alone means the entry books no thinking for this model.
//!   The wire's own effort knob (`output_config.effort`, adaptive thinking) is
//!   model-dependent and refused by older models, so guessing one would fail calls
//!   that work today.
//! * `response-schema`: refused as `unsupported`, so the host describes the schema
//!   in the prompt and validates the answer (`call::prompted_schema`). The API's own
//!   structured output (`output_config.format`) is model-dependent and refused by
//!   older models, and the forced-tool workaround would answer with a tool call
//!   instead of text (which a stateless `decode` cannot tell apart from a real one)
//!   and cannot be combined with extended thinking.

use serde_json::{Map, Value, json};

use super::Surface;
use crate::bedrock::model_path;
use crate::fallback::{block_as_text, leaf_as_text};
use crate::json::{parse_value, sampling_number, to_body};
use crate::types::{
    CallParams, CodecError, ContentBlock, Headers, HttpRequest, LeafBlock, Media, MediaSource, PreparedConversation,
    Thinking, ToolChoice, ToolDefinition, ToolResult, ToolUse, Turn, TurnRole,
};

/// The Messages API's path, appended to the endpoint's base URL
/// (`https://api.anthropic.com`, Mantle's `…/anthropic`).
const PATH: &str = "/v1/messages";

/// The API version the official SDKs send, as a header.
const API_VERSION: &str = "2023-06-01";

/// The API version InvokeModel takes, in the body.
const BEDROCK_API_VERSION: &str = "bedrock-2023-05-31";

/// The API version Vertex AI takes, in the body.
const VERTEX_API_VERSION: &str = "vertex-2023-10-16";

/// The smallest `budget_tokens` the API accepts.
const MIN_THINKING_BUDGET: u32 = 1024;

/// The only document type the API takes as base64 or by URL.
const PDF: &str = "application/pdf";

/// Builds the request for `surface`, or refuses what the Messages API cannot carry.
pub fn encode(
    surface: Surface,
    conversation: &PreparedConversation,
    params: &CallParams,
) -> Result<HttpRequest, CodecError> {
    encode_with(surface, conversation, params, |_, _| Ok(()))
}

/// [`encode`], with `extend` adding to the body and headers before they are
/// written (a caller's native fields and betas; see `super::native`).
pub(super) fn encode_with(
    surface: Surface,
    conversation: &PreparedConversation,
    params: &CallParams,
    extend: impl FnOnce(&mut Map<String, Value>, &mut Headers) -> Result<(), CodecError>,
) -> Result<HttpRequest, CodecError> {
    let mut body = body(conversation, params)?;
    surface_fields(surface, params, &mut body);
    let mut headers = headers(surface, params.stream);
    extend(&mut body, &mut headers)?;
    Ok(HttpRequest {
        method: "POST".to_owned(),
        path_and_query: path(surface, params),
        headers,
        body: to_body(&Value::Object(body))?,
    })
}

/// The Messages API names the model and asks for a stream in the body. InvokeModel
/// names both in the path (the model, and the operation that streams or not) and
/// refuses them in the body, which carries its API version instead.
fn surface_fields(surface: Surface, params: &CallParams, body: &mut Map<String, Value>) {
    match surface {
        Surface::Direct | Surface::Mantle => {
            body.insert("model".into(), json!(params.wire_model_id));
            if params.stream {
                body.insert("stream".into(), json!(true));
            }
        }
        Surface::BedrockInvoke => {
            body.insert("anthropic_version".into(), json!(BEDROCK_API_VERSION));
        }
        Surface::Vertex => {
            body.insert("anthropic_version".into(), json!(VERTEX_API_VERSION));
            if params.stream {
                body.insert("stream".into(), json!(true));
            }
        }
    }
}

fn path(surface: Surface, params: &CallParams) -> String {
    match surface {
        Surface::Direct | Surface::Mantle => PATH.to_owned(),
        Surface::BedrockInvoke if params.stream => model_path(&params.wire_model_id, "invoke-with-response-stream"),
        Surface::BedrockInvoke => model_path(&params.wire_model_id, "invoke"),
        Surface::Vertex if params.stream => vertex_path(&params.wire_model_id, "streamRawPredict"),
        Surface::Vertex => vertex_path(&params.wire_model_id, "rawPredict"),
    }
}

/// `/models/{model}:{method}`, appended to the entry's
/// `…/projects/{project}/locations/{region}/publishers/anthropic`; the model
/// id escaped as a path segment (`@` stays, as Google spells versions).
fn vertex_path(wire_id: &str, method: &str) -> String {
    let mut path = String::from("/models/");
    for byte in wire_id.bytes() {
        if byte.is_ascii_alphanumeric() || b"-._~@".contains(&byte) {
            path.push(char::from(byte));
        } else {
            path.push_str(&format!("%{byte:02X}"));
        }
    }
    path.push(':');
    path.push_str(method);
    path
}

/// Content type, plus the API version and `accept` for streams on the Messages
/// API; on InvokeModel, the event-stream `accept` and the model's own content type
/// inside it (`x-amzn-bedrock-accept`). Never a credential: the host owns secrets.
fn headers(surface: Surface, stream: bool) -> Headers {
    let mut headers = vec![("content-type".to_owned(), "application/json".to_owned())];
    let mut add = |name: &str, value: &str| headers.push((name.to_owned(), value.to_owned()));
    match surface {
        Surface::Direct | Surface::Mantle => {
            add("anthropic-version", API_VERSION);
            if stream {
                add("accept", "text/event-stream");
            }
        }
        Surface::BedrockInvoke if stream => {
            add("accept", "application/vnd.amazon.eventstream");
            add("x-amzn-bedrock-accept", "application/json");
        }
        Surface::BedrockInvoke => add("accept", "application/json"),
        Surface::Vertex if stream => add("accept", "text/event-stream"),
        Surface::Vertex => {}
    }
    headers
}

/// Everything but the surface's fields: the same on every surface.
fn body(conversation: &PreparedConversation, params: &CallParams) -> Result<Map<String, Value>, CodecError> {
    if let Some(schema) = &params.response_schema {
        return Err(CodecError::Unsupported(format!(
            "response schema {:?}: the Messages API has no structured output without a beta, \
             and a forced tool would answer with a tool call instead of text",
            schema.name
        )));
    }
    let thinking = thinking(params)?;
    let mut body = Map::new();
    body.insert("max_tokens".into(), json!(params.max_tokens));
    if let Some(system) = system(conversation) {
        body.insert("system".into(), system);
    }
    body.insert("messages".into(), messages(conversation)?);
    if !conversation.tools.is_empty() {
        body.insert("tools".into(), tools(&conversation.tools)?);
    }
    if let Some(choice) = tool_choice(conversation, thinking.is_some())? {
        body.insert("tool_choice".into(), choice);
    }
    match thinking {
        Some(thinking) => {
            // The API refuses any `temperature` other than the default while
            // thinking, so the caller's value is left out rather than failing the call.
            body.insert("thinking".into(), thinking);
        }
        None => {
            if let Some(temperature) = params.temperature {
                body.insert("temperature".into(), sampling_number(temperature, "temperature")?);
            }
        }
    }
    if !params.stop.is_empty() {
        body.insert("stop_sequences".into(), json!(params.stop));
    }
    Ok(body)
}

/// Extended thinking with the host's budget. Thinking tokens count inside
/// `max_tokens`, so a budget that is not below it would leave nothing for the
/// answer (and the API rejects it); below 1024 the API rejects it too.
fn thinking(params: &CallParams) -> Result<Option<Value>, CodecError> {
    let Some(budget) = params.thinking_budget else {
        return Ok(None);
    };
    if budget < MIN_THINKING_BUDGET {
        return Err(CodecError::Unsupported(format!(
            "thinking budget {budget} is below the Messages API's minimum of {MIN_THINKING_BUDGET} tokens"
        )));
    }
    if budget >= params.max_tokens {
        return Err(CodecError::Unsupported(format!(
            "thinking budget {budget} must be less than max_tokens {}: thinking counts inside max_tokens, \
             so nothing would be left for the answer",
            params.max_tokens
        )));
    }
    Ok(Some(json!({"type": "enabled", "budget_tokens": budget})))
}

/// System content as text blocks (the form that can carry `cache_control`).
/// Empty strings are left out: the API rejects empty text blocks.
fn system(conversation: &PreparedConversation) -> Option<Value> {
    let mut blocks: Vec<Value> =
        conversation.system.iter().filter(|text| !text.is_empty()).map(|text| text_block(text)).collect();
    if conversation.cache_system {
        mark_cache(&mut blocks);
    }
    (!blocks.is_empty()).then_some(Value::Array(blocks))
}

// ---------------------------------------------------------------- tools

fn tools(definitions: &[ToolDefinition]) -> Result<Value, CodecError> {
    definitions.iter().map(tool).collect::<Result<Vec<_>, _>>().map(Value::Array)
}

fn tool(definition: &ToolDefinition) -> Result<Value, CodecError> {
    let what = format!("parameters_json of tool {:?}", definition.name);
    let schema = parse_value(&definition.parameters_json, &what)?;
    let mut tool = Map::new();
    tool.insert("name".into(), json!(definition.name));
    if !definition.description.is_empty() {
        tool.insert("description".into(), json!(definition.description));
    }
    tool.insert("input_schema".into(), schema);
    Ok(Value::Object(tool))
}

/// The tool choice, left out when there are no tools and it would change nothing
/// (`auto`, `none`). Forcing a tool is refused while thinking: the API allows only
/// `auto` and `none` then, and says so with a 400 after the call was admitted.
fn tool_choice(conversation: &PreparedConversation, thinking: bool) -> Result<Option<Value>, CodecError> {
    let Some(choice) = &conversation.tool_choice else {
        return Ok(None);
    };
    let no_tools = conversation.tools.is_empty();
    let forced = |wire: Value| {
        if thinking {
            Err(CodecError::Unsupported(
                "forced tool use cannot be combined with extended thinking (only auto and none are allowed)".to_owned(),
            ))
        } else {
            Ok(Some(wire))
        }
    };
    match choice {
        ToolChoice::Auto | ToolChoice::None if no_tools => Ok(None),
        ToolChoice::Auto => Ok(Some(json!({"type": "auto"}))),
        ToolChoice::None => Ok(Some(json!({"type": "none"}))),
        ToolChoice::Required => forced(json!({"type": "any"})),
        ToolChoice::Named(name) => forced(json!({"type": "tool", "name": name})),
    }
}

// ---------------------------------------------------------------- messages

fn messages(conversation: &PreparedConversation) -> Result<Value, CodecError> {
    conversation.turns.iter().map(message).collect::<Result<Vec<_>, _>>().map(Value::Array)
}

/// One turn. Tool results go first, as the API expects them at the start of the
/// user message that follows the calls; everything else keeps its order (thinking
/// must stay before the `tool_use` it led to).
fn message(turn: &Turn) -> Result<Value, CodecError> {
    let (results, rest): (Vec<&ContentBlock>, Vec<&ContentBlock>) =
        turn.content.iter().partition(|block| matches!(block, ContentBlock::ToolResult(_)));
    let mut blocks = Vec::new();
    for block in results.into_iter().chain(rest) {
        blocks.extend(content_block(block)?);
    }
    if turn.cache {
        mark_cache(&mut blocks);
    }
    let role = match turn.role {
        TurnRole::User => "user",
        TurnRole::Assistant => "assistant",
    };
    Ok(json!({"role": role, "content": blocks}))
}

/// A block on the wire; `None` only for empty text, which the API rejects and
/// which carries nothing.
fn content_block(block: &ContentBlock) -> Result<Option<Value>, CodecError> {
    let value = match block {
        ContentBlock::Text(text) if text.is_empty() => return Ok(None),
        ContentBlock::Text(text) => text_block(text),
        ContentBlock::Image(media) => image_block(media),
        ContentBlock::Document(media) => document_block(media)?,
        ContentBlock::ToolUse(call) => tool_use_block(call)?,
        ContentBlock::ToolResult(result) => tool_result_block(result)?,
        ContentBlock::Thinking(thinking) => thinking_block(thinking, block),
    };
    Ok(Some(value))
}

fn text_block(text: &str) -> Value {
    json!({"type": "text", "text": text})
}

fn image_block(media: &Media) -> Value {
    json!({"type": "image", "source": source(media)})
}

/// PDFs only: the base64 and URL document sources take nothing else, and a text
/// rendering of other bytes would lose the document.
fn document_block(media: &Media) -> Result<Value, CodecError> {
    if !media.mime_type.eq_ignore_ascii_case(PDF) {
        return Err(CodecError::Unsupported(format!(
            "document of type {:?}: the Messages API takes PDF documents only",
            media.mime_type
        )));
    }
    Ok(json!({"type": "document", "source": source(media)}))
}

fn source(media: &Media) -> Value {
    match &media.source {
        MediaSource::Base64(data) => json!({"type": "base64", "media_type": media.mime_type, "data": data}),
        MediaSource::Url(url) => json!({"type": "url", "url": url}),
    }
}

/// `input` must be a JSON object on the wire; the host's text is parsed once.
fn tool_use_block(call: &ToolUse) -> Result<Value, CodecError> {
    let input = parse_value(&call.input_json, &format!("input_json of tool_use {:?}", call.id))?;
    if !input.is_object() {
        return Err(CodecError::Unsupported(format!("input_json of tool_use {:?} is not a JSON object", call.id)));
    }
    Ok(json!({"type": "tool_use", "id": call.id, "name": call.name, "input": input}))
}

fn tool_result_block(result: &ToolResult) -> Result<Value, CodecError> {
    let content: Vec<Value> = result.content.iter().filter_map(tool_result_leaf).collect();
    Ok(json!({
        "type": "tool_result",
        "tool_use_id": result.tool_use_id,
        "content": content,
        "is_error": result.is_error,
    }))
}

/// A tool result holds text and image blocks; a document there has no wire form,
/// so it goes as its text rendering.
fn tool_result_leaf(leaf: &LeafBlock) -> Option<Value> {
    match leaf {
        LeafBlock::Text(text) if text.is_empty() => None,
        LeafBlock::Text(text) => Some(text_block(text)),
        LeafBlock::Image(media) => Some(image_block(media)),
        LeafBlock::Document(_) => Some(text_block(&leaf_as_text(leaf))),
    }
}

/// Thinking is echoed exactly as received, signature and all. A thinking block
/// without a signature came from another provider; the API rejects unsigned
/// thinking, so it goes as its text rendering.
fn thinking_block(thinking: &Thinking, block: &ContentBlock) -> Value {
    match (&thinking.signature, thinking.redacted) {
        (_, true) => json!({"type": "redacted_thinking", "data": thinking.text}),
        (Some(signature), false) => json!({"type": "thinking", "thinking": thinking.text, "signature": signature}),
        (None, false) => text_block(&block_as_text(block)),
    }
}

/// Puts the cache breakpoint on the last block that can carry one: thinking blocks
/// cannot, and a turn of only thinking gets none.
fn mark_cache(blocks: &mut [Value]) {
    let cacheable = |block: &&mut Value| {
        !matches!(block.get("type").and_then(Value::as_str), Some("thinking" | "redacted_thinking"))
    };
    if let Some(Value::Object(block)) = blocks.iter_mut().rev().find(cacheable) {
        block.insert("cache_control".into(), json!({"type": "ephemeral"}));
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::panic)] // a failing test should stop loudly
mod tests {
    use super::*;
    use crate::types::{Effort, ResponseSchema};

    /// The direct surface, which most tests here are about: the body is the same on all.
    fn encode(conversation: &PreparedConversation, params: &CallParams) -> Result<HttpRequest, CodecError> {
        super::encode(Surface::Direct, conversation, params)
    }

    fn params() -> CallParams {
        CallParams::new("claude-sonnet-4-5", 4096)
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
            parameters_json: r#"{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}"#.into(),
        }
    }

    fn signed_thinking() -> ContentBlock {
        ContentBlock::Thinking(Thinking {
            text: "Paris first.".into(),
            signature: Some("EqQB".into()),
            redacted: false,
        })
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
        assert_eq!(request.path_and_query, "/v1/messages");
        assert_eq!(
            request.headers,
            vec![
                ("content-type".to_owned(), "application/json".to_owned()),
                ("anthropic-version".to_owned(), "2023-06-01".to_owned()),
            ]
        );
        assert_eq!(
            serde_json::from_slice::<Value>(&request.body).unwrap(),
            json!({
                "model": "claude-sonnet-4-5",
                "max_tokens": 4096,
                "messages": [{"role": "user", "content": [{"type": "text", "text": "Hi"}]}],
            })
        );
    }

    #[test]
    fn stream_request_shape() {
        let request = encode(&hi(), &CallParams { stream: true, ..params() }).unwrap();
        assert!(request.headers.contains(&("accept".to_owned(), "text/event-stream".to_owned())));
        let body: Value = serde_json::from_slice(&request.body).unwrap();
        assert_eq!(body["stream"], json!(true));
    }

    #[test]
    fn system_blocks_with_cache_breakpoint() {
        let mut conv = hi();
        conv.system = vec!["Answer briefly.".into(), String::new(), "Use metric units.".into()];
        assert_eq!(
            body_of(&conv, &params())["system"],
            json!([{"type": "text", "text": "Answer briefly."}, {"type": "text", "text": "Use metric units."}])
        );
        conv.cache_system = true;
        assert_eq!(
            body_of(&conv, &params())["system"],
            json!([
                {"type": "text", "text": "Answer briefly."},
                {"type": "text", "text": "Use metric units.", "cache_control": {"type": "ephemeral"}},
            ])
        );
        assert!(body_of(&hi(), &params()).get("system").is_none());
    }

    #[test]
    fn turn_cache_marks_its_last_cacheable_block() {
        let mut first = Turn::user(vec![text("Long document."), text("Question?")]);
        first.cache = true;
        let mut reply = Turn::assistant(vec![text("Answer."), signed_thinking()]);
        reply.cache = true;
        let body = body_of(&PreparedConversation::of(vec![first, reply, Turn::user(vec![text("More?")])]), &params());
        assert_eq!(
            body["messages"][0]["content"],
            json!([
                {"type": "text", "text": "Long document."},
                {"type": "text", "text": "Question?", "cache_control": {"type": "ephemeral"}},
            ])
        );
        // Thinking blocks cannot carry a breakpoint: it goes on the text before them.
        assert_eq!(body["messages"][1]["content"][0]["cache_control"], json!({"type": "ephemeral"}));
        assert!(body["messages"][1]["content"][1].get("cache_control").is_none());
        assert!(body["messages"][2]["content"][0].get("cache_control").is_none());
    }

    #[test]
    fn thinking_budget_and_temperature() {
        let with = CallParams { thinking_budget: Some(2048), temperature: Some(0.7), ..params() };
        let body = body_of(&hi(), &with);
        assert_eq!(body["thinking"], json!({"type": "enabled", "budget_tokens": 2048}));
        assert_eq!(body["max_tokens"], json!(4096));
        assert!(body.get("temperature").is_none());
        let without = CallParams { temperature: Some(0.7), ..params() };
        let body = body_of(&hi(), &without);
        assert_eq!(body["temperature"], json!(0.7));
        assert!(body.get("thinking").is_none());
    }

    #[test]
    fn thinking_budget_out_of_range_is_unsupported() {
        let small = unsupported(encode(&hi(), &CallParams { thinking_budget: Some(1023), ..params() }));
        assert!(small.contains("minimum of 1024"), "{small}");
        let equal = unsupported(encode(&hi(), &CallParams { thinking_budget: Some(4096), ..params() }));
        assert!(equal.contains("less than max_tokens 4096"), "{equal}");
        assert!(encode(&hi(), &CallParams { thinking_budget: Some(1024), ..params() }).is_ok());
    }

    #[test]
    fn effort_alone_is_not_written() {
        let body = body_of(&hi(), &CallParams { reasoning_effort: Some(Effort::High), ..params() });
        assert!(body.get("thinking").is_none());
        assert!(body.get("output_config").is_none());
    }

    #[test]
    fn response_schema_is_unsupported() {
        let schema = ResponseSchema { name: "city".into(), schema_json: r#"{"type":"object"}"#.into() };
        let message = unsupported(encode(&hi(), &CallParams { response_schema: Some(schema), ..params() }));
        assert!(message.contains("\"city\"") && message.contains("structured output"), "{message}");
    }

    #[test]
    fn stop_sequences() {
        let body = body_of(&hi(), &CallParams { stop: vec!["END".into()], ..params() });
        assert_eq!(body["stop_sequences"], json!(["END"]));
    }

    #[test]
    fn tools_and_tool_choice() {
        let mut conv = hi();
        conv.tools = vec![weather_tool(), ToolDefinition { description: String::new(), ..weather_tool() }];
        let choices = [
            (ToolChoice::Auto, json!({"type": "auto"})),
            (ToolChoice::None, json!({"type": "none"})),
            (ToolChoice::Required, json!({"type": "any"})),
            (ToolChoice::Named("get_weather".into()), json!({"type": "tool", "name": "get_weather"})),
        ];
        for (choice, wire) in choices {
            conv.tool_choice = Some(choice);
            let body = body_of(&conv, &params());
            assert_eq!(body["tool_choice"], wire);
            let schema = json!({"type":"object","properties":{"city":{"type":"string"}},"required":["city"]});
            assert_eq!(
                body["tools"],
                json!([
                    {"name": "get_weather", "description": "Current weather", "input_schema": schema},
                    {"name": "get_weather", "input_schema": schema},
                ])
            );
        }
    }

    #[test]
    fn neutral_tool_choice_without_tools_is_left_out() {
        let mut conv = hi();
        conv.tool_choice = Some(ToolChoice::Auto);
        let body = body_of(&conv, &params());
        assert!(body.get("tool_choice").is_none() && body.get("tools").is_none());
    }

    #[test]
    fn forced_tool_with_thinking_is_unsupported() {
        let mut conv = hi();
        conv.tools = vec![weather_tool()];
        let thinking = CallParams { thinking_budget: Some(1024), ..params() };
        for choice in [ToolChoice::Required, ToolChoice::Named("get_weather".into())] {
            conv.tool_choice = Some(choice);
            assert!(unsupported(encode(&conv, &thinking)).contains("extended thinking"));
        }
        conv.tool_choice = Some(ToolChoice::Auto);
        assert_eq!(body_of(&conv, &thinking)["tool_choice"], json!({"type": "auto"}));
    }

    #[test]
    fn images_and_pdf_documents() {
        let conv = PreparedConversation::of(vec![Turn::user(vec![
            ContentBlock::Image(Media { mime_type: "image/png".into(), source: MediaSource::Base64("iVBOR".into()) }),
            ContentBlock::Image(Media {
                mime_type: "image/jpeg".into(),
                source: MediaSource::Url("https://example.com/a.jpg".into()),
            }),
            ContentBlock::Document(Media { mime_type: PDF.into(), source: MediaSource::Base64("JVBERi0x".into()) }),
            ContentBlock::Document(Media {
                mime_type: PDF.into(),
                source: MediaSource::Url("https://example.com/a.pdf".into()),
            }),
            text("Describe."),
        ])]);
        assert_eq!(
            body_of(&conv, &params())["messages"][0]["content"],
            json!([
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBOR"}},
                {"type": "image", "source": {"type": "url", "url": "https://example.com/a.jpg"}},
                {"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBERi0x"}},
                {"type": "document", "source": {"type": "url", "url": "https://example.com/a.pdf"}},
                {"type": "text", "text": "Describe."},
            ])
        );
    }

    #[test]
    fn non_pdf_documents_are_unsupported() {
        let doc =
            ContentBlock::Document(Media { mime_type: "text/csv".into(), source: MediaSource::Base64("YQ==".into()) });
        let message = unsupported(encode(&PreparedConversation::of(vec![Turn::user(vec![doc])]), &params()));
        assert!(message.contains("text/csv") && message.contains("PDF"), "{message}");
    }

    #[test]
    fn tool_use_and_results_come_first() {
        let conv = PreparedConversation::of(vec![
            Turn::user(vec![text("Weather in Paris?")]),
            Turn::assistant(vec![
                signed_thinking(),
                ContentBlock::ToolUse(ToolUse {
                    id: "toolu_01A".into(),
                    name: "get_weather".into(),
                    input_json: r#"{"city":"Paris"}"#.into(),
                }),
            ]),
            Turn::user(vec![
                text("Thanks."),
                ContentBlock::ToolResult(ToolResult {
                    tool_use_id: "toolu_01A".into(),
                    content: vec![
                        LeafBlock::Text("18C".into()),
                        LeafBlock::Image(Media {
                            mime_type: "image/png".into(),
                            source: MediaSource::Url("https://x/map.png".into()),
                        }),
                        LeafBlock::Document(Media {
                            mime_type: PDF.into(),
                            source: MediaSource::Url("https://x/report.pdf".into()),
                        }),
                    ],
                    is_error: true,
                }),
            ]),
        ]);
        let body = body_of(&conv, &params());
        assert_eq!(
            body["messages"][1],
            json!({"role": "assistant", "content": [
                {"type": "thinking", "thinking": "Paris first.", "signature": "EqQB"},
                {"type": "tool_use", "id": "toolu_01A", "name": "get_weather", "input": {"city": "Paris"}},
            ]})
        );
        assert_eq!(
            body["messages"][2],
            json!({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_01A", "is_error": true, "content": [
                    {"type": "text", "text": "18C"},
                    {"type": "image", "source": {"type": "url", "url": "https://x/map.png"}},
                    {"type": "text", "text": "[document application/pdf: https://x/report.pdf]"},
                ]},
                {"type": "text", "text": "Thanks."},
            ]})
        );
    }

    #[test]
    fn redacted_and_unsigned_thinking() {
        let redacted = ContentBlock::Thinking(Thinking { text: "EmwKAhgB".into(), signature: None, redacted: true });
        let unsigned = ContentBlock::Thinking(Thinking { text: "Hmm.".into(), signature: None, redacted: false });
        let conv = PreparedConversation::of(vec![
            Turn::user(vec![text("Hi")]),
            Turn::assistant(vec![redacted, unsigned, text("Hello.")]),
        ]);
        assert_eq!(
            body_of(&conv, &params())["messages"][1]["content"],
            json!([
                {"type": "redacted_thinking", "data": "EmwKAhgB"},
                {"type": "text", "text": "<thinking>Hmm.</thinking>"},
                {"type": "text", "text": "Hello."},
            ])
        );
    }

    #[test]
    fn invalid_json_is_unsupported_and_named() {
        let mut conv = hi();
        conv.tools = vec![ToolDefinition { parameters_json: "{not json".into(), ..weather_tool() }];
        let message = unsupported(encode(&conv, &params()));
        assert!(message.contains("parameters_json") && message.contains("get_weather"), "{message}");
        for input in [r#"{"city":"#, "[1]"] {
            let conv = PreparedConversation::of(vec![
                Turn::user(vec![text("Hi")]),
                Turn::assistant(vec![ContentBlock::ToolUse(ToolUse {
                    id: "toolu_1".into(),
                    name: "get_weather".into(),
                    input_json: input.into(),
                })]),
            ]);
            let message = unsupported(encode(&conv, &params()));
            assert!(message.contains("input_json") && message.contains("toolu_1"), "{message}");
        }
    }

    fn header_pairs(pairs: &[(&str, &str)]) -> Headers {
        pairs.iter().map(|(name, value)| (name.to_string(), value.to_string())).collect()
    }

    fn json_body(request: &HttpRequest) -> Value {
        serde_json::from_slice(&request.body).unwrap()
    }

    #[test]
    fn bedrock_invoke_request_shape() {
        let bedrock = CallParams { wire_model_id: "us.anthropic.claude-opus-5".into(), ..params() };
        let request = super::encode(Surface::BedrockInvoke, &hi(), &bedrock).unwrap();
        assert_eq!(request.path_and_query, "/model/us.anthropic.claude-opus-5/invoke");
        assert_eq!(
            request.headers,
            header_pairs(&[("content-type", "application/json"), ("accept", "application/json")])
        );
        assert_eq!(
            json_body(&request),
            json!({
                "anthropic_version": "bedrock-2023-05-31",
                "max_tokens": 4096,
                "messages": [{"role": "user", "content": [{"type": "text", "text": "Hi"}]}],
            })
        );
    }

    #[test]
    fn bedrock_invoke_streams_by_operation_not_by_body() {
        let arn = "arn:aws:bedrock:us-east-1:123456789012:application-inference-profile/a1b2c3";
        let streaming = CallParams { wire_model_id: arn.into(), stream: true, ..params() };
        let request = super::encode(Surface::BedrockInvoke, &hi(), &streaming).unwrap();
        assert_eq!(
            request.path_and_query,
            "/model/arn:aws:bedrock:us-east-1:123456789012:application-inference-profile%2Fa1b2c3/invoke-with-response-stream"
        );
        assert_eq!(
            request.headers,
            header_pairs(&[
                ("content-type", "application/json"),
                ("accept", "application/vnd.amazon.eventstream"),
                ("x-amzn-bedrock-accept", "application/json"),
            ])
        );
        let body = json_body(&request);
        assert!(body.get("stream").is_none() && body.get("model").is_none(), "{body}");
        assert_eq!(body["anthropic_version"], json!("bedrock-2023-05-31"));
    }

    #[test]
    fn mantle_is_the_messages_api_without_a_workspace_header() {
        let mantle = CallParams { wire_model_id: "anthropic.claude-opus-5".into(), stream: true, ..params() };
        let request = super::encode(Surface::Mantle, &hi(), &mantle).unwrap();
        assert_eq!(request.path_and_query, "/v1/messages");
        assert_eq!(
            request.headers,
            header_pairs(&[
                ("content-type", "application/json"),
                ("anthropic-version", "2023-06-01"),
                ("accept", "text/event-stream"),
            ])
        );
        // Data retention is the host's to bind from the deployment, never the component's.
        assert!(!request.headers.iter().any(|(name, _)| name.eq_ignore_ascii_case("anthropic-workspace-id")));
        let body = json_body(&request);
        assert_eq!((&body["model"], &body["stream"]), (&json!("anthropic.claude-opus-5"), &json!(true)));
        assert!(body.get("anthropic_version").is_none());
    }

    #[test]
    fn vertex_names_the_model_and_method_in_the_path_and_its_version_in_the_body() {
        let vertex = CallParams { wire_model_id: "claude-sonnet-4-5@20250929".into(), ..params() };
        let request = super::encode(Surface::Vertex, &hi(), &vertex).unwrap();
        assert_eq!(request.path_and_query, "/models/claude-sonnet-4-5@20250929:rawPredict");
        let body: Value = serde_json::from_slice(&request.body).unwrap();
        assert_eq!(body["anthropic_version"], json!("vertex-2023-10-16"));
        assert!(body.get("model").is_none() && body.get("stream").is_none(), "{body}");
        assert!(!request.headers.iter().any(|(name, _)| name == "anthropic-version" || name == "authorization"));
        let streaming = CallParams { stream: true, ..vertex };
        let request = super::encode(Surface::Vertex, &hi(), &streaming).unwrap();
        assert_eq!(request.path_and_query, "/models/claude-sonnet-4-5@20250929:streamRawPredict");
        assert!(request.headers.contains(&("accept".to_owned(), "text/event-stream".to_owned())));
        let body: Value = serde_json::from_slice(&request.body).unwrap();
        assert_eq!(body["stream"], json!(true));
        assert_eq!(super::vertex_path("a/b c", "rawPredict"), "/models/a%2Fb%20c:rawPredict");
    }
}
