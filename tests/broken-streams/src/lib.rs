//! A streaming provider of the OpenAI Chat Completions dialect whose stream
//! decoder is broken one way per provider key, so the test suite can prove that
//! the conformance kit's stream checks catch each flaw and only it
//! (`conformance/tests/streams.rs` natively, `tests/tests/stream_checks.rs`
//! through `weir check`). Everything but the stream decoder behaves.
//!
//! | key | its decoder |
//! | --- | --- |
//! | `streams-sound` | works |
//! | `streams-refuse` | refuses every event as `unsupported` (a template's stub left in place) |
//! | `streams-drop-fragment` | drops the second tool-call fragment it sees |
//! | `streams-no-usage` | never reports usage |
//! | `streams-stop-when-cut` | answers a stream that ended early with an end-turn stop |
//! | `streams-error-as-text` | turns an error frame into text |
//! | `streams-custom` | works, but encodes to a path of no dialect the kit has samples of |

use serde_json::{Value, json};
use weir_sdk::errors::{ErrorFields, class_for_status};
use weir_sdk::fallback::block_as_text;
use weir_sdk::json::{parse_value, to_body};
use weir_sdk::types::{
    CallParams, Capabilities, ChatResponse, CodecError, ContentBlock, CredentialShape, ErrorClass, HttpRequest,
    HttpResponse, InBandError, PreparedConversation, ProviderInfo, Retry, StopInfo, StopReason, StreamDelta,
    StreamEvent, StreamFraming, ToolCallFragment, ToolCallStart, TurnRole, Usage,
};
use weir_sdk::{ChatProvider, StreamDecoder};

pub const SOUND: &str = "streams-sound";
pub const REFUSE: &str = "streams-refuse";
pub const DROP_FRAGMENT: &str = "streams-drop-fragment";
pub const NO_USAGE: &str = "streams-no-usage";
pub const STOP_WHEN_CUT: &str = "streams-stop-when-cut";
pub const ERROR_AS_TEXT: &str = "streams-error-as-text";
pub const CUSTOM: &str = "streams-custom";
pub const KEYS: [&str; 7] = [SOUND, REFUSE, DROP_FRAGMENT, NO_USAGE, STOP_WHEN_CUT, ERROR_AS_TEXT, CUSTOM];

#[derive(Debug)]
pub struct BrokenStreams;

impl ChatProvider for BrokenStreams {
    type StreamDecoder = Decoder;

    fn providers() -> Vec<ProviderInfo> {
        KEYS.iter()
            .map(|key| ProviderInfo {
                key: (*key).to_owned(),
                description: "a stream decoder broken on purpose (test suite only)".to_owned(),
                default_endpoint: None,
                credential: CredentialShape::None,
                capabilities: Capabilities::STREAMING | Capabilities::NATIVE_TOOLS,
                stream_framing: StreamFraming::Sse,
            })
            .collect()
    }

    fn encode(
        provider: &str,
        conversation: PreparedConversation,
        params: CallParams,
    ) -> Result<HttpRequest, CodecError> {
        let mut messages: Vec<Value> =
            conversation.system.iter().map(|text| json!({"role": "system", "content": text})).collect();
        for turn in &conversation.turns {
            let role = if turn.role == TurnRole::User { "user" } else { "assistant" };
            let texts: Vec<String> = turn
                .content
                .iter()
                .map(|block| match block {
                    ContentBlock::Text(text) => text.clone(),
                    other => block_as_text(other),
                })
                .collect();
            messages.push(json!({"role": role, "content": texts.join("\n\n")}));
        }
        let tools = conversation.tools.iter().map(|tool| {
            let parameters = parse_value(&tool.parameters_json, "tool parameters")?;
            Ok(json!({"type": "function", "function":
                {"name": tool.name, "description": tool.description, "parameters": parameters}}))
        });
        let mut body = json!({"model": params.wire_model_id, "messages": messages, "max_tokens": params.max_tokens,
            "tools": tools.collect::<Result<Vec<Value>, CodecError>>()?});
        if params.stream {
            body["stream"] = json!(true);
            body["stream_options"] = json!({"include_usage": true});
        }
        let path = if provider == CUSTOM { "/v1/generate" } else { "/chat/completions" };
        let headers = vec![("content-type".to_owned(), "application/json".to_owned())];
        Ok(HttpRequest { method: "POST".into(), path_and_query: path.into(), headers, body: to_body(&body)? })
    }

    fn decode(_: &str, response: HttpResponse) -> Result<ChatResponse, CodecError> {
        let body: Value = serde_json::from_slice(&response.body)
            .map_err(|e| CodecError::Malformed(format!("the body is not JSON: {e}")))?;
        let choice =
            body.pointer("/choices/0").ok_or_else(|| CodecError::Malformed("the body has no choices[0]".to_owned()))?;
        let text = choice.pointer("/message/content").and_then(Value::as_str).unwrap_or_default();
        let raw = choice.get("finish_reason").and_then(Value::as_str).map(str::to_owned);
        Ok(ChatResponse {
            content: vec![ContentBlock::Text(text.to_owned())],
            stop_reason: stop_reason(raw.as_deref()),
            raw_stop_reason: raw,
            usage: body.get("usage").map(usage),
            refusal: None,
            served_model: None,
            request_id: None,
        })
    }

    fn classify(_: &str, response: HttpResponse) -> ErrorClass {
        let detail = ErrorFields::parse(&response.body).detail(response.status);
        class_for_status(&response, detail)
    }
}

fn stop_reason(raw: Option<&str>) -> StopReason {
    match raw {
        Some("stop") => StopReason::EndTurn,
        Some("length") => StopReason::MaxTokens,
        Some("tool_calls") => StopReason::ToolUse,
        _ => StopReason::Other,
    }
}

fn usage(usage: &Value) -> Usage {
    let count = |key: &str| usage.get(key).and_then(Value::as_u64).unwrap_or(0);
    Usage {
        input: count("prompt_tokens"),
        output: count("completion_tokens"),
        cache_read: 0,
        cache_write: 0,
        reasoning: None,
    }
}

/// A Chat Completions SSE decoder (reference 2.4) with its key's flaw.
#[derive(Debug)]
pub struct Decoder {
    key: String,
    /// Tool calls started and not yet ended.
    open_calls: Vec<u32>,
    fragments: usize,
    finish_seen: bool,
}

impl StreamDecoder for Decoder {
    fn new(provider: &str) -> Self {
        Self { key: provider.to_owned(), open_calls: Vec::new(), fragments: 0, finish_seen: false }
    }

    fn feed(&mut self, event: StreamEvent) -> Result<Vec<StreamDelta>, CodecError> {
        if self.key == REFUSE {
            return Err(CodecError::Unsupported(format!("{REFUSE} does not stream")));
        }
        let data = event.data.trim_ascii();
        if data.is_empty() || data == b"[DONE]" {
            return Ok(Vec::new());
        }
        let chunk: Value = serde_json::from_slice(data)
            .map_err(|e| CodecError::Malformed(format!("stream event is not JSON: {e}")))?;
        if let Some(error) = chunk.get("error") {
            return Ok(vec![self.error(error)]);
        }
        let mut out = Vec::new();
        if let Some(choice) = chunk.pointer("/choices/0") {
            if let Some(text) = choice.pointer("/delta/content").and_then(Value::as_str).filter(|text| !text.is_empty())
            {
                out.push(StreamDelta::Text(text.to_owned()));
            }
            for call in choice.pointer("/delta/tool_calls").and_then(Value::as_array).into_iter().flatten() {
                self.tool_call(call, &mut out);
            }
            if let Some(raw) = choice.get("finish_reason").and_then(Value::as_str) {
                self.stop(Some(raw), &mut out);
            }
        }
        if let Some(counts) = chunk.get("usage").filter(|counts| counts.is_object())
            && self.key != NO_USAGE
        {
            out.push(StreamDelta::Usage(usage(counts)));
        }
        Ok(out)
    }

    fn finish(&mut self) -> Result<Vec<StreamDelta>, CodecError> {
        if self.key == REFUSE {
            return Err(CodecError::Unsupported(format!("{REFUSE} does not stream")));
        }
        if self.finish_seen {
            return Ok(Vec::new());
        }
        if self.key == STOP_WHEN_CUT {
            let mut out = Vec::new();
            self.stop(None, &mut out);
            return Ok(out);
        }
        Err(CodecError::Malformed("stream ended before finish_reason".to_owned()))
    }
}

impl Decoder {
    fn error(&self, error: &Value) -> StreamDelta {
        let detail = format!("error frame in a 200 stream: {error}");
        if self.key == ERROR_AS_TEXT {
            return StreamDelta::Text(detail);
        }
        let class = ErrorClass::Transient(Retry { hint: None, detail });
        StreamDelta::Error(InBandError { status: None, status_from_prose: false, class })
    }

    fn tool_call(&mut self, call: &Value, out: &mut Vec<StreamDelta>) {
        let index = call.get("index").and_then(Value::as_u64).and_then(|index| u32::try_from(index).ok()).unwrap_or(0);
        if let Some(id) = call.get("id").and_then(Value::as_str) {
            let name = call.pointer("/function/name").and_then(Value::as_str).unwrap_or_default().to_owned();
            self.open_calls.push(index);
            out.push(StreamDelta::ToolCallStart(ToolCallStart { index, id: id.to_owned(), name }));
        }
        let arguments = call.pointer("/function/arguments").and_then(Value::as_str).unwrap_or_default();
        if arguments.is_empty() {
            return;
        }
        self.fragments += 1;
        if self.key == DROP_FRAGMENT && self.fragments == 2 {
            return;
        }
        out.push(StreamDelta::ToolCallFragment(ToolCallFragment { index, json: arguments.to_owned() }));
    }

    fn stop(&mut self, raw: Option<&str>, out: &mut Vec<StreamDelta>) {
        out.extend(self.open_calls.drain(..).map(StreamDelta::ToolCallEnd));
        let reason = stop_reason(raw.or(Some("stop")));
        out.push(StreamDelta::Stop(StopInfo { reason, raw: raw.map(str::to_owned), refusal: None }));
        self.finish_seen = true;
    }
}

weir_sdk::export_provider!(BrokenStreams);
