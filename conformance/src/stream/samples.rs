//! The kit's own streams, one set per dialect it knows, for the built-in stream
//! checks: what each upstream really sends (shared/reference/provider-wire.md 1.8,
//! 2.4, 3.4, 3.6, 4.5, and the fake upstreams in `tests/src`), carrying the same
//! answer in every dialect: the text [`TEXT`] in three pieces with an end-turn
//! stop and usage ([`INPUT_TOKENS`] in, [`OUTPUT_TOKENS`] out); a call to [`TOOL`]
//! whose arguments `{"city": "Paris"}` arrive in two fragments; text then an error
//! frame.
//!
//! A key's dialect is read from the streaming request it encodes (its path, and
//! for InvokeModel its body), never from its name, so a new component of a known
//! dialect is checked without fixtures.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Value, json};

use crate::fixture::{EventFrame, Framing, StreamInput, WireRequest};
use crate::json::has_key;

/// The text every text sample streams, in [`TEXT_PIECES`].
pub const TEXT: &str = "Hello, world!";
pub const TEXT_PIECES: [&str; 3] = ["Hel", "lo, wor", "ld!"];
/// The tool every tool-call sample calls, with [`ARGUMENTS`] in [`ARGUMENT_PIECES`].
pub const TOOL: &str = "get_weather";
pub const ARGUMENTS: &str = r#"{"city": "Paris"}"#;
pub const ARGUMENT_PIECES: [&str; 2] = [r#"{"city": "Pa"#, r#"ris"}"#];
/// The usage every text sample reports.
pub const INPUT_TOKENS: u64 = 11;
pub const OUTPUT_TOKENS: u64 = 7;
/// The text an error sample streams before its error frame.
pub const TEXT_BEFORE_ERROR: &str = "Hel";

/// A dialect the kit has samples of.
#[derive(Debug)]
pub struct Dialect {
    /// As reports print it.
    pub name: &'static str,
    pub framing: Framing,
    /// How its streaming request's path (without the query) ends.
    path_ends_with: &'static str,
    /// A key its streaming request's body has, when the path alone is not enough.
    body_key: Option<&'static str>,
    sample: fn() -> Sample,
}

impl Dialect {
    pub fn sample(&self) -> Sample {
        (self.sample)()
    }
}

/// Every dialect the kit has samples of.
pub const DIALECTS: [Dialect; 7] = [
    Dialect {
        name: "OpenAI Chat Completions (SSE)",
        framing: Framing::Sse,
        path_ends_with: "/chat/completions",
        body_key: None,
        sample: openai_chat,
    },
    Dialect {
        name: "OpenAI Responses (SSE)",
        framing: Framing::Sse,
        path_ends_with: "/responses",
        body_key: None,
        sample: openai_responses,
    },
    Dialect {
        name: "Anthropic Messages (SSE)",
        framing: Framing::Sse,
        path_ends_with: "/messages",
        body_key: None,
        sample: anthropic_messages,
    },
    Dialect {
        name: "Bedrock ConverseStream (AWS event stream)",
        framing: Framing::AwsEventStream,
        path_ends_with: "/converse-stream",
        body_key: None,
        sample: bedrock_converse,
    },
    Dialect {
        name: "Anthropic on Bedrock InvokeModelWithResponseStream (AWS event stream)",
        framing: Framing::AwsEventStream,
        path_ends_with: "/invoke-with-response-stream",
        body_key: Some("anthropic_version"),
        sample: bedrock_invoke_anthropic,
    },
    Dialect {
        name: "Gemini streamGenerateContent (SSE)",
        framing: Framing::Sse,
        path_ends_with: ":streamGenerateContent",
        body_key: None,
        sample: gemini,
    },
    // Claude on Vertex AI: the model and `:streamRawPredict` in the path, and the
    // Messages events as SSE.
    Dialect {
        name: "Anthropic Messages on Vertex AI streamRawPredict (SSE)",
        framing: Framing::Sse,
        path_ends_with: ":streamRawPredict",
        body_key: Some("anthropic_version"),
        sample: anthropic_messages,
    },
];

/// The dialect of a key that frames its streams as `framing` and encoded this
/// streaming request, if the kit has samples of it.
pub fn recognize(request: &WireRequest, framing: Framing) -> Option<&'static Dialect> {
    let path = request.path_and_query.split('?').next().unwrap_or_default();
    let body: Option<Value> = serde_json::from_slice(&request.body).ok();
    DIALECTS.iter().find(|dialect| {
        dialect.framing == framing
            && path.ends_with(dialect.path_ends_with)
            && dialect.body_key.is_none_or(|key| body.as_ref().is_some_and(|body| has_key(body, key)))
    })
}

/// One dialect's streams.
#[derive(Debug, Clone)]
pub struct Sample {
    /// [`TEXT`], an end-turn stop, the usage, the stream's end.
    pub text: Script,
    /// One call to [`TOOL`], its arguments in two fragments, a tool-use stop.
    pub tool_call: Script,
    /// [`TEXT_BEFORE_ERROR`], then an error frame.
    pub error: Script,
    /// The classes the error frame means (the world's spelling).
    pub error_classes: &'static [&'static str],
}

/// A stream as frames, and how many of the last ones end it (the stop, usage
/// and terminator frames a stream cut short never sends).
#[derive(Debug, Clone)]
pub struct Script {
    frames: Frames,
    ending: usize,
}

#[derive(Debug, Clone)]
enum Frames {
    /// Each SSE event's text, sent as a chunk of its own.
    Sse(Vec<String>),
    EventStream(Vec<EventFrame>),
}

impl Script {
    fn sse(frames: Vec<String>, ending: usize) -> Self {
        Self { frames: Frames::Sse(frames), ending }
    }

    fn event_stream(frames: Vec<EventFrame>, ending: usize) -> Self {
        Self { frames: Frames::EventStream(frames), ending }
    }

    /// The whole stream.
    pub fn input(&self) -> StreamInput {
        self.first(usize::MAX)
    }

    /// The stream without the frames that end it: an upstream that closed the
    /// connection cleanly before its end.
    pub fn cut_short(&self) -> StreamInput {
        let len = match &self.frames {
            Frames::Sse(frames) => frames.len(),
            Frames::EventStream(frames) => frames.len(),
        };
        self.first(len.saturating_sub(self.ending))
    }

    fn first(&self, count: usize) -> StreamInput {
        match &self.frames {
            Frames::Sse(frames) => {
                StreamInput::Sse(frames.iter().take(count).map(|frame| frame.as_bytes().to_vec()).collect())
            }
            Frames::EventStream(frames) => StreamInput::EventStream(frames.iter().take(count).cloned().collect()),
        }
    }
}

// ------------------------------------------------------------------ OpenAI Chat Completions

/// `data: {chunk}` (reference 2.4): only `data:` lines, `[DONE]` at the end.
fn data(value: &Value) -> String {
    format!("data: {value}\n\n")
}

fn chat_chunk(delta: Value, finish_reason: Option<&str>) -> String {
    data(&json!({"id": "chatcmpl-kit", "object": "chat.completion.chunk", "created": 1_800_000_000,
                 "model": "kit-model", "choices": [{"index": 0, "delta": delta, "logprobs": null,
                 "finish_reason": finish_reason}], "usage": null}))
}

fn chat_usage() -> String {
    data(&json!({"id": "chatcmpl-kit", "object": "chat.completion.chunk", "created": 1_800_000_000,
                 "model": "kit-model", "choices": [],
                 "usage": {"prompt_tokens": INPUT_TOKENS, "completion_tokens": OUTPUT_TOKENS,
                           "total_tokens": INPUT_TOKENS + OUTPUT_TOKENS}}))
}

const DONE: &str = "data: [DONE]\n\n";

fn openai_chat() -> Sample {
    let mut text = vec![chat_chunk(json!({"role": "assistant", "content": ""}), None)];
    text.extend(TEXT_PIECES.iter().map(|piece| chat_chunk(json!({"content": piece}), None)));
    text.extend([chat_chunk(json!({}), Some("stop")), chat_usage(), DONE.to_owned()]);

    let start = json!({"index": 0, "id": "call_kit_1", "type": "function",
                       "function": {"name": TOOL, "arguments": ""}});
    let mut tool_call = vec![chat_chunk(json!({"role": "assistant", "content": null, "tool_calls": [start]}), None)];
    tool_call.extend(
        ARGUMENT_PIECES
            .iter()
            .map(|piece| chat_chunk(json!({"tool_calls": [{"index": 0, "function": {"arguments": piece}}]}), None)),
    );
    tool_call.extend([chat_chunk(json!({}), Some("tool_calls")), chat_usage(), DONE.to_owned()]);

    let error = vec![
        chat_chunk(json!({"role": "assistant", "content": ""}), None),
        chat_chunk(json!({"content": TEXT_BEFORE_ERROR}), None),
        // Captured from api.openai.com (reference 2.4): an error object, no choices.
        data(&json!({"error": {"message": "The server had an error while processing your request. Sorry about that!",
                               "type": "server_error"}})),
    ];
    Sample {
        text: Script::sse(text, 3),
        tool_call: Script::sse(tool_call, 3),
        error: Script::sse(error, 0),
        error_classes: &["transient", "overloaded"],
    }
}

// ------------------------------------------------------------------ OpenAI Responses

/// `event: <type>` with a `data:` object naming the same type.
fn typed(value: &Value) -> String {
    let kind = value.get("type").and_then(Value::as_str).unwrap_or_default();
    format!("event: {kind}\ndata: {value}\n\n")
}

fn responses_usage() -> Value {
    json!({"input_tokens": INPUT_TOKENS, "input_tokens_details": {"cached_tokens": 0},
           "output_tokens": OUTPUT_TOKENS, "output_tokens_details": {"reasoning_tokens": 0},
           "total_tokens": INPUT_TOKENS + OUTPUT_TOKENS})
}

fn responses_created() -> String {
    typed(&json!({"type": "response.created", "sequence_number": 0,
                  "response": {"id": "resp_kit", "object": "response", "status": "in_progress",
                               "model": "kit-model", "output": []}}))
}

fn responses_completed(output: Value) -> String {
    typed(&json!({"type": "response.completed", "response": {"id": "resp_kit", "object": "response",
                  "status": "completed", "model": "kit-model", "error": null, "output": output,
                  "usage": responses_usage()}}))
}

fn openai_responses() -> Sample {
    let message = |text: &str, status: &str| {
        let content = match text {
            "" => json!([]),
            text => json!([{"type": "output_text", "text": text, "annotations": []}]),
        };
        json!({"type": "message", "id": "msg_kit", "role": "assistant", "status": status, "content": content})
    };
    let text_delta = |piece: &str| {
        typed(&json!({"type": "response.output_text.delta", "output_index": 0, "content_index": 0,
                      "item_id": "msg_kit", "delta": piece}))
    };
    let added = |item: Value| typed(&json!({"type": "response.output_item.added", "output_index": 0, "item": item}));
    let done = |item: &Value| typed(&json!({"type": "response.output_item.done", "output_index": 0, "item": item}));

    let mut text = vec![responses_created(), added(message("", "in_progress"))];
    text.extend(TEXT_PIECES.iter().map(|piece| text_delta(piece)));
    let whole = message(TEXT, "completed");
    text.extend([done(&whole), responses_completed(json!([whole]))]);

    let call = |arguments: &str| {
        json!({"type": "function_call", "id": "fc_kit_1", "call_id": "call_kit_1", "name": TOOL,
               "arguments": arguments, "status": "completed"})
    };
    let mut tool_call = vec![responses_created(), added(call(""))];
    tool_call.extend(ARGUMENT_PIECES.iter().map(|piece| {
        typed(&json!({"type": "response.function_call_arguments.delta", "output_index": 0,
                      "item_id": "fc_kit_1", "delta": piece}))
    }));
    tool_call.extend([done(&call(ARGUMENTS)), responses_completed(json!([call(ARGUMENTS)]))]);

    let error = vec![
        responses_created(),
        added(message("", "in_progress")),
        text_delta(TEXT_BEFORE_ERROR),
        typed(&json!({"type": "response.failed", "response": {"id": "resp_kit", "object": "response",
                      "status": "failed", "error": {"code": "server_error",
                      "message": "The server had an error while processing your request."}}})),
    ];
    Sample {
        text: Script::sse(text, 2),
        tool_call: Script::sse(tool_call, 2),
        error: Script::sse(error, 0),
        error_classes: &["transient", "overloaded"],
    }
}

// ------------------------------------------------------------------ Anthropic Messages

/// The Messages stream events (reference 1.8), as JSON: the SSE `data:` of each,
/// and what an InvokeModel `chunk` wraps.
fn message_start() -> Value {
    json!({"type": "message_start", "message": {"id": "msg_kit", "type": "message", "role": "assistant",
           "model": "kit-model", "content": [], "stop_reason": null, "stop_sequence": null,
           "usage": {"input_tokens": INPUT_TOKENS, "output_tokens": 1, "cache_creation_input_tokens": 0,
                     "cache_read_input_tokens": 0}}})
}

fn message_end(stop_reason: &str) -> [Value; 2] {
    [
        json!({"type": "message_delta", "delta": {"stop_reason": stop_reason, "stop_sequence": null},
               "usage": {"output_tokens": OUTPUT_TOKENS}}),
        json!({"type": "message_stop"}),
    ]
}

fn block_delta(index: u32, delta: Value) -> Value {
    json!({"type": "content_block_delta", "index": index, "delta": delta})
}

fn anthropic_text_events() -> Vec<Value> {
    let mut events = vec![
        message_start(),
        json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
        json!({"type": "ping"}),
    ];
    events.extend(TEXT_PIECES.iter().map(|piece| block_delta(0, json!({"type": "text_delta", "text": piece}))));
    events.push(json!({"type": "content_block_stop", "index": 0}));
    events.extend(message_end("end_turn"));
    events
}

fn anthropic_tool_events() -> Vec<Value> {
    let mut events = vec![
        message_start(),
        json!({"type": "content_block_start", "index": 0,
               "content_block": {"type": "tool_use", "id": "toolu_kit_1", "name": TOOL, "input": {}}}),
    ];
    events.extend(
        ARGUMENT_PIECES.iter().map(|piece| block_delta(0, json!({"type": "input_json_delta", "partial_json": piece}))),
    );
    events.push(json!({"type": "content_block_stop", "index": 0}));
    events.extend(message_end("tool_use"));
    events
}

fn anthropic_events_before_error() -> Vec<Value> {
    vec![
        message_start(),
        json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
        block_delta(0, json!({"type": "text_delta", "text": TEXT_BEFORE_ERROR})),
    ]
}

fn anthropic_messages() -> Sample {
    let sse = |events: Vec<Value>| events.iter().map(typed).collect::<Vec<String>>();
    let mut error = sse(anthropic_events_before_error());
    error.push(typed(&json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})));
    Sample {
        text: Script::sse(sse(anthropic_text_events()), 2),
        tool_call: Script::sse(sse(anthropic_tool_events()), 2),
        error: Script::sse(error, 0),
        error_classes: &["overloaded"],
    }
}

// ------------------------------------------------------------------ Bedrock

/// Bedrock's random-length padding, fixed here (reference 3.4, 3.6).
const PADDING: &str = "abcdefghij";

fn throttling() -> EventFrame {
    EventFrame::exception(
        "throttlingException",
        json!({"message": "Too many requests, please wait before trying again."}).to_string(),
    )
}

/// A Converse event: its JSON, with a `p` padding key.
fn converse(name: &str, mut event: Value) -> EventFrame {
    if let Some(object) = event.as_object_mut() {
        object.insert("p".to_owned(), json!(PADDING));
    }
    EventFrame::event(name, event.to_string())
}

fn converse_end(stop_reason: &str) -> [EventFrame; 2] {
    [
        converse("messageStop", json!({"stopReason": stop_reason})),
        converse(
            "metadata",
            json!({"usage": {"inputTokens": INPUT_TOKENS, "outputTokens": OUTPUT_TOKENS,
                             "totalTokens": INPUT_TOKENS + OUTPUT_TOKENS}, "metrics": {"latencyMs": 120}}),
        ),
    ]
}

fn bedrock_converse() -> Sample {
    let start = || converse("messageStart", json!({"role": "assistant"}));
    let text_delta =
        |piece: &str| converse("contentBlockDelta", json!({"contentBlockIndex": 0, "delta": {"text": piece}}));
    let block_stop = || converse("contentBlockStop", json!({"contentBlockIndex": 0}));

    let mut text = vec![start()];
    text.extend(TEXT_PIECES.iter().map(|piece| text_delta(piece)));
    text.push(block_stop());
    text.extend(converse_end("end_turn"));

    let mut tool_call = vec![
        start(),
        converse(
            "contentBlockStart",
            json!({"contentBlockIndex": 0, "start": {"toolUse": {"toolUseId": "tooluse_kit_1", "name": TOOL}}}),
        ),
    ];
    tool_call.extend(ARGUMENT_PIECES.iter().map(|piece| {
        converse("contentBlockDelta", json!({"contentBlockIndex": 0, "delta": {"toolUse": {"input": piece}}}))
    }));
    tool_call.push(block_stop());
    tool_call.extend(converse_end("tool_use"));

    Sample {
        text: Script::event_stream(text, 2),
        tool_call: Script::event_stream(tool_call, 2),
        error: Script::event_stream(vec![start(), text_delta(TEXT_BEFORE_ERROR), throttling()], 0),
        error_classes: &["rate-limited"],
    }
}

/// An InvokeModelWithResponseStream `chunk`: `{"bytes": base64(event), "p": …}`.
fn invoke_chunk(event: &Value) -> EventFrame {
    let payload = json!({"bytes": STANDARD.encode(event.to_string()), "p": PADDING});
    EventFrame::event("chunk", payload.to_string())
}

fn bedrock_invoke_anthropic() -> Sample {
    let chunks = |events: Vec<Value>| events.iter().map(invoke_chunk).collect::<Vec<EventFrame>>();
    let mut error = chunks(anthropic_events_before_error());
    error.push(throttling());
    Sample {
        text: Script::event_stream(chunks(anthropic_text_events()), 2),
        tool_call: Script::event_stream(chunks(anthropic_tool_events()), 2),
        error: Script::event_stream(error, 0),
        error_classes: &["rate-limited"],
    }
}

// ------------------------------------------------------------------ Gemini

/// One `streamGenerateContent?alt=sse` chunk: a whole GenerateContentResponse
/// on a `data:` line, no event name and no terminator (Google AI Studio and
/// Vertex AI alike).
fn gemini_chunk(parts: Value, finish_reason: Option<&str>, usage: bool) -> String {
    let mut candidate = json!({"content": {"role": "model", "parts": parts}, "index": 0});
    if let Some(reason) = finish_reason {
        candidate["finishReason"] = json!(reason);
    }
    let mut chunk = json!({"candidates": [candidate], "modelVersion": "kit-model", "responseId": "kit-response"});
    if usage {
        chunk["usageMetadata"] = json!({"promptTokenCount": INPUT_TOKENS, "candidatesTokenCount": OUTPUT_TOKENS,
                                        "totalTokenCount": INPUT_TOKENS + OUTPUT_TOKENS});
    }
    data(&chunk)
}

fn gemini() -> Sample {
    let mut text: Vec<String> =
        TEXT_PIECES.iter().map(|piece| gemini_chunk(json!([{"text": piece}]), None, false)).collect();
    text.push(gemini_chunk(json!([{"text": ""}]), Some("STOP"), true));

    // A call arrives whole, in one part: the kit's two fragments are one here.
    let arguments: Value = serde_json::from_str(ARGUMENTS).unwrap_or(Value::Null);
    let tool_call = vec![
        gemini_chunk(json!([{"functionCall": {"name": TOOL, "args": arguments}}]), None, false),
        gemini_chunk(json!([{"text": ""}]), Some("STOP"), true),
    ];

    let error = vec![
        gemini_chunk(json!([{"text": TEXT_BEFORE_ERROR}]), None, false),
        data(&json!({"error": {"code": 503, "message": "The model is overloaded. Please try again later.",
                               "status": "UNAVAILABLE"}})),
    ];
    Sample {
        text: Script::sse(text, 1),
        tool_call: Script::sse(tool_call, 1),
        error: Script::sse(error, 0),
        error_classes: &["transient", "overloaded"],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(path: &str, body: Value) -> WireRequest {
        WireRequest {
            method: "POST".to_owned(),
            path_and_query: path.to_owned(),
            headers: Vec::new(),
            body: body.to_string().into_bytes(),
        }
    }

    #[test]
    fn a_dialect_is_read_from_the_streaming_request_and_the_framing() {
        let name = |path: &str, body: Value, framing| recognize(&request(path, body), framing).map(|d| d.name);
        assert_eq!(name("/v1/chat/completions?x=1", json!({}), Framing::Sse), Some(DIALECTS[0].name));
        assert_eq!(name("/v1/responses", json!({}), Framing::Sse), Some(DIALECTS[1].name));
        assert_eq!(name("/v1/messages", json!({}), Framing::Sse), Some(DIALECTS[2].name));
        assert_eq!(name("/model/m/converse-stream", json!({}), Framing::AwsEventStream), Some(DIALECTS[3].name));
        let invoke = json!({"anthropic_version": "bedrock-2023-05-31"});
        assert_eq!(
            name("/model/m/invoke-with-response-stream", invoke, Framing::AwsEventStream),
            Some(DIALECTS[4].name)
        );
        assert_eq!(name("/model/m/invoke-with-response-stream", json!({}), Framing::AwsEventStream), None);
        let vertex = json!({"anthropic_version": "vertex-2023-10-16", "stream": true});
        assert_eq!(name("/models/claude-x@1:streamRawPredict", vertex, Framing::Sse), Some(DIALECTS[6].name));
        assert_eq!(name("/chat/completions", json!({}), Framing::AwsEventStream), None, "framing must match");
        assert_eq!(
            name("/v1beta/models/g:streamGenerateContent?alt=sse", json!({}), Framing::Sse),
            Some(DIALECTS[5].name)
        );
        assert_eq!(name("/v1beta/models/g:generateContent", json!({}), Framing::Sse), None);
    }

    #[test]
    fn a_cut_short_stream_keeps_everything_but_its_end() {
        let sample = openai_chat();
        let (StreamInput::Sse(whole), StreamInput::Sse(cut)) = (sample.text.input(), sample.text.cut_short()) else {
            panic!("SSE")
        };
        assert_eq!(cut.len(), whole.len() - 3);
        let cut = String::from_utf8(cut.concat()).unwrap();
        assert!(cut.contains("ld!") && !cut.contains("finish_reason\":\"stop") && !cut.contains("[DONE]"), "{cut}");
    }

    #[test]
    fn an_invoke_chunk_wraps_one_event_in_base64() {
        let frame = invoke_chunk(&json!({"type": "message_stop"}));
        let payload: Value = serde_json::from_slice(&frame.payload).unwrap();
        let event = STANDARD.decode(payload["bytes"].as_str().unwrap()).unwrap();
        assert_eq!(event, br#"{"type":"message_stop"}"#);
        assert_eq!(frame.to_event().name.as_deref(), Some("chunk"));
        assert_eq!(throttling().to_event().name.as_deref(), Some("throttlingException"));
    }
}
