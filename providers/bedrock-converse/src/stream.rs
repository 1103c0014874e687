//! The ConverseStream decoder: AWS event-stream frames → normalized deltas.
//!
//! The host parses the binary framing; each event arrives named by its
//! `:event-type` with the event's JSON as payload (no wrapper). Order on the wire:
//! `messageStart`, then per content block an optional `contentBlockStart` (tool use
//! only: text blocks begin with their first delta), deltas, `contentBlockStop`, then
//! `messageStop` (the stop reason) and `metadata` (usage, metrics). Failures after
//! the 200 arrive as exception or error frames, read by `weir_sdk::bedrock`. A
//! stream that ends without `messageStop` or an error was cut, and saying so is the
//! decoder's job.
//!
//! A tool call's index is its content block's index, as in the Anthropic decoder.
//! Redacted reasoning has no delta: the world's stream deltas cannot mark thinking as
//! redacted, and the opaque payload shown as thinking text would be wrong twice (to
//! the caller, and echoed back unredacted). A non-streamed answer keeps it.

use serde_json::Value;
use weir_sdk::StreamDecoder;
use weir_sdk::bedrock::stream_exception;
use weir_sdk::types::{CodecError, StopInfo, StreamDelta, StreamEvent, ToolCallFragment, ToolCallStart};

use crate::response::{stop_reason, text, usage};

/// Per-stream state: the open tool blocks and how the stream ended.
#[derive(Debug, Default)]
pub struct ConverseStream {
    /// Tool-use blocks started and not yet stopped.
    open_tools: Vec<OpenTool>,
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

impl StreamDecoder for ConverseStream {
    fn new(_provider: &str) -> Self {
        Self::default()
    }

    fn feed(&mut self, event: StreamEvent) -> Result<Vec<StreamDelta>, CodecError> {
        if let Some(error) = stream_exception(&event) {
            self.error_seen = true;
            return Ok(vec![StreamDelta::Error(error)]);
        }
        let data = event.data.trim_ascii();
        if data.is_empty() {
            return Ok(Vec::new());
        }
        let value: Value = serde_json::from_slice(data)
            .map_err(|e| CodecError::Malformed(format!("stream event is not JSON: {e}")))?;
        if !value.is_object() {
            return Err(CodecError::Malformed("stream event is not a JSON object".to_owned()));
        }
        match event.name.as_deref() {
            Some("contentBlockStart") => self.block_start(&value),
            Some("contentBlockDelta") => self.block_delta(&value),
            Some("contentBlockStop") => self.block_stop(&value),
            Some("messageStop") => Ok(self.message_stop(&value)),
            Some("metadata") => Ok(value.get("usage").and_then(usage).map(StreamDelta::Usage).into_iter().collect()),
            // `messageStart` (only the role), and event types added later.
            _ => Ok(Vec::new()),
        }
    }

    fn finish(&mut self) -> Result<Vec<StreamDelta>, CodecError> {
        if self.message_stopped || self.error_seen {
            Ok(Vec::new())
        } else {
            Err(CodecError::Malformed("stream ended before messageStop".to_owned()))
        }
    }
}

impl ConverseStream {
    /// Starts a tool call; other start members (added later) start nothing.
    fn block_start(&mut self, value: &Value) -> Result<Vec<StreamDelta>, CodecError> {
        let index = block_index(value)?;
        let Some(tool) = value.pointer("/start/toolUse") else {
            return Ok(Vec::new());
        };
        let field = |key: &str| {
            text(tool.get(key))
                .ok_or_else(|| CodecError::Malformed(format!("toolUse block {index} starts without `{key}`")))
        };
        let start = ToolCallStart { index, id: field("toolUseId")?, name: field("name")? };
        self.open_tools.push(OpenTool { index, has_input: false });
        Ok(vec![StreamDelta::ToolCallStart(start)])
    }

    fn block_delta(&mut self, value: &Value) -> Result<Vec<StreamDelta>, CodecError> {
        let index = block_index(value)?;
        let delta = value.get("delta").unwrap_or(&Value::Null);
        if let Some(tool_input) = delta.get("toolUse") {
            return self.tool_fragment(index, tool_input);
        }
        if let Some(reasoning) = delta.get("reasoningContent") {
            let mut out = Vec::new();
            out.extend(text(reasoning.get("text")).map(StreamDelta::Thinking));
            out.extend(text(reasoning.get("signature")).map(StreamDelta::ThinkingSignature));
            return Ok(out);
        }
        // `citation` and delta members added later carry nothing here.
        Ok(text(delta.get("text")).map(StreamDelta::Text).into_iter().collect())
    }

    fn tool_fragment(&mut self, index: u32, tool_input: &Value) -> Result<Vec<StreamDelta>, CodecError> {
        let tool = self.open_tools.iter_mut().find(|tool| tool.index == index).ok_or_else(|| {
            CodecError::Malformed(format!("toolUse delta for block {index}, which is no open toolUse block"))
        })?;
        // A fragment may be empty; it carries nothing.
        Ok(text(tool_input.get("input"))
            .map(|json| {
                tool.has_input = true;
                StreamDelta::ToolCallFragment(ToolCallFragment { index, json })
            })
            .into_iter()
            .collect())
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

    /// The stop, once; usage follows in `metadata`.
    fn message_stop(&mut self, value: &Value) -> Vec<StreamDelta> {
        if self.message_stopped {
            return Vec::new();
        }
        self.message_stopped = true;
        let raw = text(value.get("stopReason"));
        vec![StreamDelta::Stop(StopInfo { reason: stop_reason(raw.as_deref()), raw, refusal: None })]
    }
}

/// A block event's `contentBlockIndex`: its position in the message's content.
fn block_index(value: &Value) -> Result<u32, CodecError> {
    value
        .get("contentBlockIndex")
        .and_then(Value::as_u64)
        .and_then(|index| u32::try_from(index).ok())
        .ok_or_else(|| CodecError::Malformed("content block event without a contentBlockIndex".to_owned()))
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::panic)] // a failing test should stop loudly
mod tests {
    use super::*;
    use weir_sdk::types::{ErrorClass, StopReason, Usage};

    /// An event frame as the host hands it over: named by `:event-type`.
    fn event(name: &str, data: &str) -> StreamEvent {
        StreamEvent {
            name: Some(name.to_owned()),
            headers: vec![
                (":event-type".to_owned(), name.to_owned()),
                (":content-type".to_owned(), "application/json".to_owned()),
                (":message-type".to_owned(), "event".to_owned()),
            ],
            data: data.as_bytes().to_vec(),
        }
    }

    fn feed_all(decoder: &mut ConverseStream, events: &[(&str, &str)]) -> Vec<StreamDelta> {
        events.iter().flat_map(|(name, data)| decoder.feed(event(name, data)).unwrap()).collect()
    }

    fn fragment(index: u32, json: &str) -> StreamDelta {
        StreamDelta::ToolCallFragment(ToolCallFragment { index, json: json.into() })
    }

    #[test]
    fn text_tool_use_stop_and_usage() {
        let mut decoder = ConverseStream::default();
        let deltas = feed_all(
            &mut decoder,
            &[
                ("messageStart", r#"{"role":"assistant","p":"abcdefgh"}"#),
                ("contentBlockDelta", r#"{"contentBlockIndex":0,"delta":{"text":"Hello"},"p":"abc"}"#),
                ("contentBlockStop", r#"{"contentBlockIndex":0}"#),
                (
                    "contentBlockStart",
                    r#"{"contentBlockIndex":1,"start":{"toolUse":{"toolUseId":"tooluse_abc","name":"get_weather"}}}"#,
                ),
                ("contentBlockDelta", r#"{"contentBlockIndex":1,"delta":{"toolUse":{"input":""}}}"#),
                ("contentBlockDelta", r#"{"contentBlockIndex":1,"delta":{"toolUse":{"input":"{\"city\": \"Par"}}}"#),
                ("contentBlockDelta", r#"{"contentBlockIndex":1,"delta":{"toolUse":{"input":"is\"}"}}}"#),
                ("contentBlockStop", r#"{"contentBlockIndex":1}"#),
                ("messageStop", r#"{"stopReason":"tool_use"}"#),
                (
                    "metadata",
                    r#"{"usage":{"inputTokens":30,"outputTokens":48,"totalTokens":1102,"cacheReadInputTokens":1024},"metrics":{"latencyMs":1175}}"#,
                ),
            ],
        );
        assert_eq!(
            deltas,
            vec![
                StreamDelta::Text("Hello".into()),
                StreamDelta::ToolCallStart(ToolCallStart {
                    index: 1,
                    id: "tooluse_abc".into(),
                    name: "get_weather".into()
                }),
                fragment(1, r#"{"city": "Par"#),
                fragment(1, r#"is"}"#),
                StreamDelta::ToolCallEnd(1),
                StreamDelta::Stop(StopInfo {
                    reason: StopReason::ToolUse,
                    raw: Some("tool_use".into()),
                    refusal: None
                }),
                StreamDelta::Usage(Usage { input: 30, output: 48, cache_read: 1024, cache_write: 0, reasoning: None }),
            ]
        );
        assert_eq!(decoder.finish().unwrap(), vec![]);
    }

    #[test]
    fn reasoning_text_signature_and_redacted() {
        let mut decoder = ConverseStream::default();
        let deltas = feed_all(
            &mut decoder,
            &[
                ("contentBlockDelta", r#"{"contentBlockIndex":0,"delta":{"reasoningContent":{"text":"Compare."}}}"#),
                ("contentBlockDelta", r#"{"contentBlockIndex":0,"delta":{"reasoningContent":{"signature":"c2ln"}}}"#),
                ("contentBlockStop", r#"{"contentBlockIndex":0}"#),
                (
                    "contentBlockDelta",
                    r#"{"contentBlockIndex":1,"delta":{"reasoningContent":{"redactedContent":"ZW5j"}}}"#,
                ),
                ("contentBlockDelta", r#"{"contentBlockIndex":2,"delta":{"citation":{"title":"x"}}}"#),
                ("contentBlockDelta", r#"{"contentBlockIndex":2,"delta":{"text":"9.8"}}"#),
                ("messageStop", r#"{"stopReason":"end_turn"}"#),
            ],
        );
        assert_eq!(
            deltas,
            vec![
                StreamDelta::Thinking("Compare.".into()),
                StreamDelta::ThinkingSignature("c2ln".into()),
                StreamDelta::Text("9.8".into()),
                StreamDelta::Stop(StopInfo {
                    reason: StopReason::EndTurn,
                    raw: Some("end_turn".into()),
                    refusal: None
                }),
            ]
        );
    }

    #[test]
    fn tool_without_input_gets_an_empty_object() {
        let mut decoder = ConverseStream::default();
        let deltas = feed_all(
            &mut decoder,
            &[
                (
                    "contentBlockStart",
                    r#"{"contentBlockIndex":0,"start":{"toolUse":{"toolUseId":"t1","name":"list"}}}"#,
                ),
                ("contentBlockStop", r#"{"contentBlockIndex":0}"#),
            ],
        );
        assert_eq!(&deltas[1..], &[fragment(0, "{}"), StreamDelta::ToolCallEnd(0)]);
    }

    #[test]
    fn each_stop_reason_and_unknown_events() {
        for (raw, reason) in [
            ("max_tokens", StopReason::MaxTokens),
            ("guardrail_intervened", StopReason::ContentFiltered),
            ("model_context_window_exceeded", StopReason::ContextWindowExceeded),
            ("malformed_tool_use", StopReason::Other),
        ] {
            let mut decoder = ConverseStream::default();
            let stop = format!(r#"{{"stopReason":"{raw}"}}"#);
            let deltas = feed_all(&mut decoder, &[("somethingNew", r#"{"x":1}"#), ("messageStop", &stop)]);
            assert_eq!(deltas, vec![StreamDelta::Stop(StopInfo { reason, raw: Some(raw.into()), refusal: None })]);
        }
    }

    #[test]
    fn exceptions_become_errors_and_explain_the_end() {
        let mut decoder = ConverseStream::default();
        feed_all(&mut decoder, &[("contentBlockDelta", r#"{"contentBlockIndex":0,"delta":{"text":"Hel"}}"#)]);
        let frame = StreamEvent {
            name: Some("throttlingException".into()),
            headers: vec![
                (":exception-type".into(), "throttlingException".into()),
                (":message-type".into(), "exception".into()),
            ],
            data: br#"{"message":"Too many tokens, please wait before trying again."}"#.to_vec(),
        };
        match decoder.feed(frame).unwrap().as_slice() {
            [StreamDelta::Error(error)] => {
                assert_eq!(error.status, Some(429));
                assert!(matches!(error.class, ErrorClass::RateLimited(_)));
            }
            other => panic!("expected one error, got {other:?}"),
        }
        assert_eq!(decoder.finish().unwrap(), vec![]);
    }

    #[test]
    fn truncated_stream_fails_at_finish() {
        let mut decoder = ConverseStream::default();
        feed_all(&mut decoder, &[("contentBlockDelta", r#"{"contentBlockIndex":0,"delta":{"text":"Hel"}}"#)]);
        match decoder.finish() {
            Err(CodecError::Malformed(message)) => assert_eq!(message, "stream ended before messageStop"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn malformed_events() {
        let mut decoder = ConverseStream::default();
        let orphan = r#"{"contentBlockIndex":3,"delta":{"toolUse":{"input":"{}"}}}"#;
        assert!(
            matches!(decoder.feed(event("contentBlockDelta", orphan)), Err(CodecError::Malformed(m)) if m.contains("block 3"))
        );
        let nameless = r#"{"contentBlockIndex":0,"start":{"toolUse":{"toolUseId":"t1"}}}"#;
        assert!(
            matches!(decoder.feed(event("contentBlockStart", nameless)), Err(CodecError::Malformed(m)) if m.contains("`name`"))
        );
        assert!(matches!(decoder.feed(event("contentBlockStop", "{}")), Err(CodecError::Malformed(_))));
        assert!(matches!(decoder.feed(event("messageStop", "{\"stop")), Err(CodecError::Malformed(_))));
        assert!(matches!(decoder.feed(event("messageStop", "[]")), Err(CodecError::Malformed(_))));
        assert_eq!(decoder.feed(event("messageStart", "  ")).unwrap(), vec![]);
    }
}
