//! The stream decoder: Messages API stream events → normalized deltas.
//!
//! Order on the wire: `message_start`, then per content block `content_block_start`,
//! deltas, `content_block_stop`, then `message_delta` (stop reason, cumulative
//! usage) and `message_stop`; `ping` anywhere. Failures after the 200 arrive as an
//! `error` event. A stream that ends without `message_stop` or an error was cut,
//! and saying so is the decoder's job, not the host's guess.
//!
//! The framing is the surface's: named SSE events on the Messages API (direct and
//! Mantle); on InvokeModel, AWS event-stream `chunk` events that each wrap one of
//! the same events as base64 (see `invoke_stream`), and exception frames for
//! failures after the 200. Both feed the one state machine here, dispatched on the
//! JSON `type`.
//!
//! A `redacted_thinking` block has no delta: the world's stream deltas cannot mark
//! thinking as redacted, and sending the encrypted payload as thinking text would
//! show ciphertext to the caller and echo it back as an unsigned `thinking` block,
//! which the API rejects. A non-streamed answer (`decode`) keeps it.

use serde_json::Value;

use super::Surface;
use super::errors::in_band_error;
use super::invoke_stream::chunk_event;
use super::response::{NO_USAGE, stop_info, text, usage};
use crate::StreamDecoder;
use crate::bedrock::stream_exception;
use crate::errors::ErrorFields;
use crate::types::{
    CodecError, StopInfo, StopReason, StreamDelta, StreamEvent, ToolCallFragment, ToolCallStart, Usage,
};

/// Per-stream state: the surface's framing, the open tool blocks, the usage so far
/// and how it ended. [`Default`] decodes the direct API's stream.
#[derive(Debug)]
pub struct AnthropicStream {
    /// `None` when the host named a provider key no surface has: every event is refused.
    surface: Option<Surface>,
    /// Tool-use blocks started and not yet stopped.
    open_tools: Vec<OpenTool>,
    /// The counts so far: `message_start`'s input counts, then each `message_delta`'s.
    usage: Option<Usage>,
    stop_sent: bool,
    message_stopped: bool,
    error_seen: bool,
}

#[derive(Debug)]
struct OpenTool {
    /// The block's index, which is also the tool call's index.
    index: u32,
    /// Whether any input JSON was sent; if none, `{}` is sent at the end so a call
    /// without arguments still carries a JSON object, as in `decode`.
    has_input: bool,
}

impl Default for AnthropicStream {
    fn default() -> Self {
        Self::for_surface(Surface::Direct)
    }
}

impl StreamDecoder for AnthropicStream {
    /// The surface is the one the provider key names.
    fn new(provider: &str) -> Self {
        Self { surface: Surface::from_key(provider), ..Self::default() }
    }

    fn feed(&mut self, event: StreamEvent) -> Result<Vec<StreamDelta>, CodecError> {
        match self.surface {
            Some(Surface::Direct | Surface::Mantle | Surface::Vertex) => self.feed_sse(&event),
            Some(Surface::BedrockInvoke) => self.feed_event_stream(&event),
            None => Err(unknown_key()),
        }
    }

    fn finish(&mut self) -> Result<Vec<StreamDelta>, CodecError> {
        if self.surface.is_none() {
            Err(unknown_key())
        } else if self.message_stopped || self.error_seen {
            Ok(Vec::new())
        } else {
            Err(CodecError::Malformed("stream ended before message_stop".to_owned()))
        }
    }
}

impl AnthropicStream {
    /// A decoder for one stream from `surface`.
    pub fn for_surface(surface: Surface) -> Self {
        Self {
            surface: Some(surface),
            open_tools: Vec::new(),
            usage: None,
            stop_sent: false,
            message_stopped: false,
            error_seen: false,
        }
    }

    /// A named SSE event; its JSON `type` equals the name.
    pub(super) fn feed_sse(&mut self, event: &StreamEvent) -> Result<Vec<StreamDelta>, CodecError> {
        let data = event.data.trim_ascii();
        if event.name.as_deref() == Some("error") {
            return Ok(vec![self.error(ErrorFields::parse(data))]);
        }
        if data.is_empty() {
            return Ok(Vec::new());
        }
        let value: Value = serde_json::from_slice(data)
            .map_err(|e| CodecError::Malformed(format!("stream event is not JSON: {e}")))?;
        self.dispatch(&value, event.name.as_deref())
    }

    /// An AWS event-stream frame: an exception or error frame is an in-band error; a
    /// `chunk` carries one Messages event; other event types are ignored, as unknown
    /// SSE events are.
    fn feed_event_stream(&mut self, event: &StreamEvent) -> Result<Vec<StreamDelta>, CodecError> {
        if let Some(error) = stream_exception(event) {
            self.error_seen = true;
            return Ok(vec![StreamDelta::Error(error)]);
        }
        if event.name.as_deref() != Some("chunk") {
            return Ok(Vec::new());
        }
        self.dispatch(&chunk_event(&event.data)?, None)
    }

    /// One Messages stream event, by its JSON `type` (else the SSE event name).
    pub(super) fn dispatch(&mut self, value: &Value, name: Option<&str>) -> Result<Vec<StreamDelta>, CodecError> {
        match value.get("type").and_then(Value::as_str).or(name) {
            Some("message_start") => self.message_start(value),
            Some("content_block_start") => self.block_start(value),
            Some("content_block_delta") => self.block_delta(value),
            Some("content_block_stop") => self.block_stop(value),
            Some("message_delta") => Ok(self.message_delta(value)),
            Some("message_stop") => Ok(self.message_stop()),
            Some("error") => Ok(vec![self.error(ErrorFields::from_value(value))]),
            // `ping`, and event types added later: the API says to ignore them.
            _ => Ok(Vec::new()),
        }
    }

    pub(super) fn error(&mut self, fields: ErrorFields) -> StreamDelta {
        self.error_seen = true;
        StreamDelta::Error(in_band_error(&fields))
    }

    /// The served model, the message id and the input counts. Usage goes out now
    /// so that a stream failing later is still metered for its prompt.
    fn message_start(&mut self, value: &Value) -> Result<Vec<StreamDelta>, CodecError> {
        let message = value
            .get("message")
            .filter(|message| message.is_object())
            .ok_or_else(|| CodecError::Malformed("message_start has no message object".to_owned()))?;
        let mut out = Vec::new();
        out.extend(text(message.get("model")).map(StreamDelta::ServedModel));
        out.extend(text(message.get("id")).map(StreamDelta::RequestId));
        if let Some(found) = message.get("usage").and_then(|value| usage(value, &NO_USAGE)) {
            self.usage = Some(found);
            out.push(StreamDelta::Usage(found));
        }
        Ok(out)
    }

    fn block_start(&mut self, value: &Value) -> Result<Vec<StreamDelta>, CodecError> {
        let index = block_index(value)?;
        let block = value.get("content_block").unwrap_or(&Value::Null);
        let mut out = Vec::new();
        match block.get("type").and_then(Value::as_str) {
            Some("text") => out.extend(text(block.get("text")).map(StreamDelta::Text)),
            Some("thinking") => {
                out.extend(text(block.get("thinking")).map(StreamDelta::Thinking));
                out.extend(text(block.get("signature")).map(StreamDelta::ThinkingSignature));
            }
            // The `input: {}` here is a placeholder; the input arrives as deltas.
            Some("tool_use") => {
                let field = |key: &str| {
                    text(block.get(key))
                        .ok_or_else(|| CodecError::Malformed(format!("tool_use block {index} starts without `{key}`")))
                };
                let start = ToolCallStart { index, id: field("id")?, name: field("name")? };
                self.open_tools.push(OpenTool { index, has_input: false });
                out.push(StreamDelta::ToolCallStart(start));
            }
            // `redacted_thinking` (see the module doc) and server-tool blocks.
            _ => {}
        }
        Ok(out)
    }

    fn block_delta(&mut self, value: &Value) -> Result<Vec<StreamDelta>, CodecError> {
        let index = block_index(value)?;
        let delta = value.get("delta").unwrap_or(&Value::Null);
        let piece = |key: &str| text(delta.get(key));
        let out = match delta.get("type").and_then(Value::as_str) {
            Some("text_delta") => piece("text").map(StreamDelta::Text),
            Some("thinking_delta") => piece("thinking").map(StreamDelta::Thinking),
            Some("signature_delta") => piece("signature").map(StreamDelta::ThinkingSignature),
            Some("input_json_delta") => {
                let tool = self.open_tools.iter_mut().find(|tool| tool.index == index).ok_or_else(|| {
                    CodecError::Malformed(format!("input_json_delta for block {index}, which is no open tool_use"))
                })?;
                // A fragment may be empty; it carries nothing.
                piece("partial_json").map(|json| {
                    tool.has_input = true;
                    StreamDelta::ToolCallFragment(ToolCallFragment { index, json })
                })
            }
            // `citations_delta` and delta types added later.
            _ => None,
        };
        Ok(out.into_iter().collect())
    }

    /// Ends a tool call; other blocks need no end.
    fn block_stop(&mut self, value: &Value) -> Result<Vec<StreamDelta>, CodecError> {
        let index = block_index(value)?;
        let mut out = Vec::new();
        if let Some(position) = self.open_tools.iter().position(|tool| tool.index == index) {
            let tool = self.open_tools.remove(position);
            if !tool.has_input {
                out.push(StreamDelta::ToolCallFragment(ToolCallFragment { index, json: "{}".to_owned() }));
            }
            out.push(StreamDelta::ToolCallEnd(index));
        }
        Ok(out)
    }

    /// The stop (once), then the usage: cumulative on the wire, so each one
    /// replaces the last, keeping `message_start`'s input counts it does not repeat.
    fn message_delta(&mut self, value: &Value) -> Vec<StreamDelta> {
        let mut out = Vec::new();
        let delta = value.get("delta").unwrap_or(&Value::Null);
        if let Some(raw) = text(delta.get("stop_reason"))
            && !self.stop_sent
        {
            self.stop_sent = true;
            out.push(StreamDelta::Stop(stop_info(Some(raw), delta.get("stop_details"))));
        }
        let base = self.usage.unwrap_or(NO_USAGE);
        if let Some(found) = value.get("usage").and_then(|value| usage(value, &base)) {
            self.usage = Some(found);
            out.push(StreamDelta::Usage(found));
        }
        out
    }

    /// The end. A message that never said why it stopped still gets a stop.
    fn message_stop(&mut self) -> Vec<StreamDelta> {
        self.message_stopped = true;
        if self.stop_sent {
            return Vec::new();
        }
        self.stop_sent = true;
        vec![StreamDelta::Stop(StopInfo { reason: StopReason::Other, raw: None, refusal: None })]
    }
}

fn unknown_key() -> CodecError {
    CodecError::Unsupported("no Anthropic surface has this provider key".to_owned())
}

/// A block event's `index`: its position in the message's content.
pub(super) fn block_index(value: &Value) -> Result<u32, CodecError> {
    value
        .get("index")
        .and_then(Value::as_u64)
        .and_then(|index| u32::try_from(index).ok())
        .ok_or_else(|| CodecError::Malformed("content block event without an index".to_owned()))
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::panic)] // a failing test should stop loudly
mod tests {
    use super::*;
    use crate::types::{ErrorClass, InBandError, Refusal};

    /// An SSE event as the host frames it: the name equals the JSON `type`.
    fn event(data: &str) -> StreamEvent {
        let value: Value = serde_json::from_str(data).unwrap();
        let name = value.get("type").and_then(Value::as_str).map(str::to_owned);
        StreamEvent { name, headers: vec![], data: data.as_bytes().to_vec() }
    }

    fn feed_all(decoder: &mut AnthropicStream, events: &[&str]) -> Vec<StreamDelta> {
        events.iter().flat_map(|data| decoder.feed(event(data)).unwrap()).collect()
    }

    const START: &str = r#"{"type":"message_start","message":{"id":"msg_01","type":"message","role":"assistant","model":"claude-sonnet-4-5-20250929","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":25,"output_tokens":1,"cache_creation_input_tokens":7,"cache_read_input_tokens":2048}}}"#;

    fn usage(input: u64, output: u64) -> Usage {
        Usage { input, output, cache_read: 2048, cache_write: 7, reasoning: None }
    }

    #[test]
    fn text_and_tool_use() {
        let mut decoder = AnthropicStream::default();
        let deltas = feed_all(
            &mut decoder,
            &[
                START,
                r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#,
                r#"{"type":"ping"}"#,
                r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello"}}"#,
                r#"{"type":"content_block_stop","index":0}"#,
                r#"{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_01A","name":"get_weather","input":{}}}"#,
                r#"{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":""}}"#,
                r#"{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"city\": \"Pa"}}"#,
                r#"{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"ris\"}"}}"#,
                r#"{"type":"content_block_stop","index":1}"#,
                r#"{"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":42}}"#,
                r#"{"type":"message_stop"}"#,
            ],
        );
        let fragment = |json: &str| StreamDelta::ToolCallFragment(ToolCallFragment { index: 1, json: json.into() });
        assert_eq!(
            deltas,
            vec![
                StreamDelta::ServedModel("claude-sonnet-4-5-20250929".into()),
                StreamDelta::RequestId("msg_01".into()),
                StreamDelta::Usage(usage(25, 1)),
                StreamDelta::Text("Hello".into()),
                StreamDelta::ToolCallStart(ToolCallStart {
                    index: 1,
                    id: "toolu_01A".into(),
                    name: "get_weather".into()
                }),
                fragment(r#"{"city": "Pa"#),
                fragment(r#"ris"}"#),
                StreamDelta::ToolCallEnd(1),
                StreamDelta::Stop(StopInfo {
                    reason: StopReason::ToolUse,
                    raw: Some("tool_use".into()),
                    refusal: None
                }),
                StreamDelta::Usage(usage(25, 42)),
            ]
        );
        assert_eq!(decoder.finish().unwrap(), vec![]);
    }

    #[test]
    fn thinking_with_signature_and_redacted_thinking() {
        let mut decoder = AnthropicStream::default();
        let deltas = feed_all(
            &mut decoder,
            &[
                r#"{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":""}}"#,
                r#"{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"Compare."}}"#,
                r#"{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"EqQBCkg"}}"#,
                r#"{"type":"content_block_stop","index":0}"#,
                r#"{"type":"content_block_start","index":1,"content_block":{"type":"redacted_thinking","data":"EmwKAhgB"}}"#,
                r#"{"type":"content_block_stop","index":1}"#,
                r#"{"type":"content_block_start","index":2,"content_block":{"type":"text","text":""}}"#,
                r#"{"type":"content_block_delta","index":2,"delta":{"type":"citations_delta","citation":{}}}"#,
                r#"{"type":"content_block_delta","index":2,"delta":{"type":"text_delta","text":"9.8"}}"#,
                r#"{"type":"content_block_stop","index":2}"#,
            ],
        );
        assert_eq!(
            deltas,
            vec![
                StreamDelta::Thinking("Compare.".into()),
                StreamDelta::ThinkingSignature("EqQBCkg".into()),
                StreamDelta::Text("9.8".into()),
            ]
        );
    }

    #[test]
    fn tool_without_input_gets_an_empty_object() {
        let mut decoder = AnthropicStream::default();
        let deltas = feed_all(
            &mut decoder,
            &[
                r#"{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_1","name":"list","input":{}}}"#,
                r#"{"type":"content_block_stop","index":0}"#,
            ],
        );
        assert_eq!(
            &deltas[1..],
            &[
                StreamDelta::ToolCallFragment(ToolCallFragment { index: 0, json: "{}".into() }),
                StreamDelta::ToolCallEnd(0),
            ]
        );
    }

    #[test]
    fn refusal_with_details_and_cumulative_usage() {
        let mut decoder = AnthropicStream::default();
        let deltas = feed_all(
            &mut decoder,
            &[
                START,
                r#"{"type":"message_delta","delta":{"stop_reason":"refusal","stop_sequence":null,"stop_details":{"type":"refusal","category":"bio","explanation":null}},"usage":{"output_tokens":3}}"#,
                r#"{"type":"message_delta","delta":{"stop_reason":"refusal"},"usage":{"input_tokens":30,"output_tokens":4}}"#,
                r#"{"type":"message_stop"}"#,
            ],
        );
        assert_eq!(
            &deltas[3..],
            &[
                StreamDelta::Stop(StopInfo {
                    reason: StopReason::ContentFiltered,
                    raw: Some("refusal".into()),
                    refusal: Some(Refusal { category: Some("bio".into()), explanation: None }),
                }),
                StreamDelta::Usage(usage(25, 3)),
                StreamDelta::Usage(usage(30, 4)),
            ]
        );
        assert_eq!(decoder.finish().unwrap(), vec![]);
    }

    #[test]
    fn message_stop_without_a_stop_reason_still_stops() {
        let mut decoder = AnthropicStream::default();
        let deltas = feed_all(&mut decoder, &[START, r#"{"type":"message_stop"}"#]);
        assert_eq!(
            deltas.last(),
            Some(&StreamDelta::Stop(StopInfo { reason: StopReason::Other, raw: None, refusal: None }))
        );
    }

    fn single_error(decoder: &mut AnthropicStream, event: StreamEvent) -> InBandError {
        match decoder.feed(event).unwrap().as_slice() {
            [StreamDelta::Error(error)] => error.clone(),
            other => panic!("expected one error, got {other:?}"),
        }
    }

    #[test]
    fn error_events() {
        let mut decoder = AnthropicStream::default();
        feed_all(&mut decoder, &[START]);
        let overloaded = single_error(
            &mut decoder,
            event(r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#),
        );
        assert_eq!((overloaded.status, overloaded.status_from_prose), (Some(529), false));
        assert!(matches!(overloaded.class, ErrorClass::Overloaded(_)));
        // The error explains the end: no message_stop needed.
        assert_eq!(decoder.finish().unwrap(), vec![]);

        let rate = single_error(
            &mut decoder,
            event(r#"{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}"#),
        );
        assert_eq!(rate.status, Some(429));
        let api = single_error(&mut decoder, event(r#"{"type":"error","error":{"type":"api_error","message":"x"}}"#));
        assert_eq!(api.status, Some(500));
        assert!(matches!(api.class, ErrorClass::Transient(_)));
        let text = StreamEvent { name: Some("error".into()), headers: vec![], data: b"upstream died".to_vec() };
        let text = single_error(&mut decoder, text);
        assert_eq!(text.status, None);
        assert!(matches!(text.class, ErrorClass::Transient(_)));
    }

    #[test]
    fn truncated_stream_fails_at_finish() {
        let mut decoder = AnthropicStream::default();
        feed_all(
            &mut decoder,
            &[
                START,
                r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#,
                r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hel"}}"#,
            ],
        );
        match decoder.finish() {
            Err(CodecError::Malformed(message)) => assert_eq!(message, "stream ended before message_stop"),
            other => panic!("{other:?}"),
        }
        assert!(matches!(AnthropicStream::default().finish(), Err(CodecError::Malformed(_))));
    }

    #[test]
    fn malformed_events() {
        let mut decoder = AnthropicStream::default();
        assert!(matches!(decoder.feed(event(r#"{"type":"message_start"}"#)), Err(CodecError::Malformed(_))));
        let orphan =
            r#"{"type":"content_block_delta","index":3,"delta":{"type":"input_json_delta","partial_json":"{}"}}"#;
        assert!(matches!(decoder.feed(event(orphan)), Err(CodecError::Malformed(m)) if m.contains("block 3")));
        let nameless = r#"{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_1"}}"#;
        assert!(matches!(decoder.feed(event(nameless)), Err(CodecError::Malformed(m)) if m.contains("`name`")));
        let no_index = r#"{"type":"content_block_stop"}"#;
        assert!(matches!(decoder.feed(event(no_index)), Err(CodecError::Malformed(_))));
        let garbage = StreamEvent { name: Some("message_delta".into()), headers: vec![], data: b"{\"type\":".to_vec() };
        assert!(matches!(decoder.feed(garbage), Err(CodecError::Malformed(_))));
        let blank = StreamEvent { name: Some("ping".into()), headers: vec![], data: b"  ".to_vec() };
        assert_eq!(decoder.feed(blank).unwrap(), vec![]);
    }

    /// An InvokeModelWithResponseStream `chunk` as the host frames it: no SSE name,
    /// the event base64 in `bytes`, random padding in `p`.
    fn chunk(data: &str) -> StreamEvent {
        use base64::Engine;
        let encoded = base64::engine::general_purpose::STANDARD.encode(data);
        StreamEvent {
            name: Some("chunk".into()),
            headers: vec![
                (":message-type".into(), "event".into()),
                (":event-type".into(), "chunk".into()),
                (":content-type".into(), "application/json".into()),
            ],
            data: format!(r#"{{"bytes":"{encoded}","p":"abcdefghijklmnopq"}}"#).into_bytes(),
        }
    }

    fn exception(kind: &str, payload: &str) -> StreamEvent {
        StreamEvent {
            name: Some(kind.into()),
            headers: vec![(":message-type".into(), "exception".into()), (":exception-type".into(), kind.into())],
            data: payload.as_bytes().to_vec(),
        }
    }

    #[test]
    fn bedrock_chunks_feed_the_same_state_machine() {
        let mut decoder = AnthropicStream::new("anthropic-bedrock");
        let events = [
            START,
            r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#,
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello"}}"#,
            r#"{"type":"content_block_stop","index":0}"#,
            r#"{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":42}}"#,
            r#"{"type":"message_stop","amazon-bedrock-invocationMetrics":{"inputTokenCount":25,"outputTokenCount":42,"invocationLatency":1234,"firstByteLatency":321}}"#,
        ];
        let deltas: Vec<StreamDelta> = events.iter().flat_map(|data| decoder.feed(chunk(data)).unwrap()).collect();
        assert_eq!(
            deltas,
            vec![
                StreamDelta::ServedModel("claude-sonnet-4-5-20250929".into()),
                StreamDelta::RequestId("msg_01".into()),
                StreamDelta::Usage(usage(25, 1)),
                StreamDelta::Text("Hello".into()),
                StreamDelta::Stop(StopInfo {
                    reason: StopReason::EndTurn,
                    raw: Some("end_turn".into()),
                    refusal: None
                }),
                StreamDelta::Usage(usage(25, 42)),
            ]
        );
        assert_eq!(decoder.finish().unwrap(), vec![]);
    }

    #[test]
    fn bedrock_exception_frames_and_in_band_anthropic_errors() {
        let mut decoder = AnthropicStream::for_surface(Surface::BedrockInvoke);
        decoder.feed(chunk(START)).unwrap();
        let throttled =
            single_error(&mut decoder, exception("throttlingException", r#"{"message":"Too many tokens"}"#));
        assert_eq!(throttled.status, Some(429));
        assert!(matches!(throttled.class, ErrorClass::RateLimited(_)), "{throttled:?}");
        // The error explains the end: no message_stop needed.
        assert_eq!(decoder.finish().unwrap(), vec![]);

        let model = exception(
            "modelStreamErrorException",
            r#"{"message":"boom","originalStatusCode":529,"originalMessage":"Overloaded"}"#,
        );
        assert_eq!(single_error(&mut decoder, model).status, Some(529));
        let wrapped = chunk(r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#);
        let overloaded = single_error(&mut decoder, wrapped);
        assert_eq!(overloaded.status, Some(529));
        assert!(matches!(overloaded.class, ErrorClass::Overloaded(_)));
    }

    #[test]
    fn bedrock_ignores_other_event_types_and_refuses_bad_chunks() {
        let mut decoder = AnthropicStream::for_surface(Surface::BedrockInvoke);
        let other = StreamEvent {
            name: Some("metadata".into()),
            headers: vec![(":message-type".into(), "event".into())],
            data: b"{}".to_vec(),
        };
        assert_eq!(decoder.feed(other).unwrap(), vec![]);
        let bad = StreamEvent { data: br#"{"bytes":"%%%"}"#.to_vec(), ..chunk("{}") };
        assert!(matches!(decoder.feed(bad), Err(CodecError::Malformed(m)) if m.contains("base64")));
        assert!(matches!(decoder.finish(), Err(CodecError::Malformed(_))));
    }

    #[test]
    fn mantle_streams_sse_and_an_unknown_key_is_refused() {
        let mut mantle = AnthropicStream::new("anthropic-bedrock-mantle");
        let deltas = feed_all(&mut mantle, &[START, r#"{"type":"message_stop"}"#]);
        assert_eq!(deltas[0], StreamDelta::ServedModel("claude-sonnet-4-5-20250929".into()));
        assert_eq!(mantle.finish().unwrap(), vec![]);
        let mut unknown = AnthropicStream::new("bedrock-converse");
        assert!(matches!(unknown.feed(event(START)), Err(CodecError::Unsupported(_))));
        assert!(matches!(unknown.finish(), Err(CodecError::Unsupported(_))));
    }
}
