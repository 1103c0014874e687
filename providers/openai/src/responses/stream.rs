//! The Responses API's typed SSE events → normalized deltas. Each event's
//! `data` names its `type`; the ones that carry the answer are read, the rest
//! (`response.in_progress`, `response.content_part.*`, the `.done` twins of
//! deltas) add nothing. A stream that ends without `response.completed`,
//! `response.incomplete`, `response.failed` or an `error` event was cut.

use serde_json::Value;
use weir_sdk::StreamDecoder;
use weir_sdk::errors::{ErrorFields, refusal};
use weir_sdk::types::{CodecError, StopInfo, StreamDelta, StreamEvent, ToolCallFragment, ToolCallStart};

use super::answer::{custom_tool_call, function_call, signature, stop, usage};
use crate::errors::in_band_error;
use crate::response::text;

/// Per-stream state.
#[derive(Debug, Default)]
pub struct ResponsesStream {
    announced: bool,
    /// Calls started, by their output index.
    calls: Vec<Call>,
    refusal: String,
    ended: bool,
}

#[derive(Debug)]
struct Call {
    output_index: u64,
    index: u32,
    has_arguments: bool,
    /// A custom tool's call: its text streams inside `{"input": "…"}`.
    custom: bool,
}

impl StreamDecoder for ResponsesStream {
    fn new(_provider: &str) -> Self {
        Self::default()
    }

    fn feed(&mut self, event: StreamEvent) -> Result<Vec<StreamDelta>, CodecError> {
        let data = event.data.trim_ascii();
        if data.is_empty() {
            return Ok(Vec::new());
        }
        let value: Value = serde_json::from_slice(data)
            .map_err(|e| CodecError::Malformed(format!("stream event is not JSON: {e}")))?;
        let kind = value.get("type").and_then(Value::as_str).or(event.name.as_deref()).unwrap_or_default();
        let mut out = Vec::new();
        self.event(kind, &value, &mut out)?;
        Ok(out)
    }

    fn finish(&mut self) -> Result<Vec<StreamDelta>, CodecError> {
        match self.ended {
            true => Ok(Vec::new()),
            false => Err(CodecError::Malformed("stream ended before response.completed".to_owned())),
        }
    }
}

impl ResponsesStream {
    fn event(&mut self, kind: &str, value: &Value, out: &mut Vec<StreamDelta>) -> Result<(), CodecError> {
        let delta = || value.get("delta").and_then(Value::as_str).unwrap_or_default().to_owned();
        match kind {
            "response.created" | "response.in_progress" => self.announce(value.get("response"), out),
            "response.output_item.added" => self.item_added(value, out)?,
            "response.output_item.done" => self.item_done(value, out),
            "response.output_text.delta" => out.push(StreamDelta::Text(delta())),
            "response.refusal.delta" => self.refusal.push_str(&delta()),
            "response.reasoning_summary_text.delta" => out.push(StreamDelta::Thinking(delta())),
            // Summaries of one item are joined by a blank line, as `decode` joins them.
            "response.reasoning_summary_part.added"
                if value.get("summary_index").and_then(Value::as_u64).is_some_and(|index| index > 0) =>
            {
                out.push(StreamDelta::Thinking("\n\n".to_owned()));
            }
            "response.function_call_arguments.delta" => self.arguments(value, delta(), out),
            "response.custom_tool_call_input.delta" => self.custom_input(value, &delta(), out),
            "response.completed" | "response.incomplete" => self.end(value.get("response"), out),
            "response.failed" => self.fail(value.get("response").unwrap_or(value), out),
            "error" => self.fail(value, out),
            _ => {}
        }
        Ok(())
    }

    fn announce(&mut self, response: Option<&Value>, out: &mut Vec<StreamDelta>) {
        let Some(response) = response.filter(|_| !self.announced) else { return };
        self.announced = true;
        out.extend(text(response.get("model")).map(StreamDelta::ServedModel));
        out.extend(text(response.get("id")).map(StreamDelta::RequestId));
    }

    fn item_added(&mut self, value: &Value, out: &mut Vec<StreamDelta>) -> Result<(), CodecError> {
        let Some(item) = value.get("item") else { return Ok(()) };
        let (call, custom) = match item.get("type").and_then(Value::as_str) {
            Some("function_call") => (function_call(item)?, false),
            Some("custom_tool_call") => (custom_tool_call(item)?, true),
            _ => return Ok(()),
        };
        let index = u32::try_from(self.calls.len()).unwrap_or(u32::MAX);
        let output_index = value.get("output_index").and_then(Value::as_u64).unwrap_or(u64::MAX);
        self.calls.push(Call { output_index, index, has_arguments: false, custom });
        out.push(StreamDelta::ToolCallStart(ToolCallStart { index, id: call.id, name: call.name }));
        Ok(())
    }

    /// The call an event's `output_index` names.
    fn call_at(&mut self, value: &Value) -> Option<&mut Call> {
        let output_index = value.get("output_index").and_then(Value::as_u64);
        self.calls.iter_mut().find(|call| Some(call.output_index) == output_index)
    }

    fn arguments(&mut self, value: &Value, json: String, out: &mut Vec<StreamDelta>) {
        if let Some(call) = self.call_at(value) {
            call.has_arguments |= !json.is_empty();
            out.push(StreamDelta::ToolCallFragment(ToolCallFragment { index: call.index, json }));
        }
    }

    /// A piece of a custom call's text, as a piece of its `{"input": "…"}`
    /// arguments: the opening with the first piece, the text escaped for JSON.
    fn custom_input(&mut self, value: &Value, piece: &str, out: &mut Vec<StreamDelta>) {
        let Some(call) = self.call_at(value).filter(|call| call.custom) else { return };
        let escaped = serde_json::Value::from(piece).to_string();
        let escaped = &escaped[1..escaped.len() - 1];
        let json = match call.has_arguments {
            true => escaped.to_owned(),
            false => format!("{{\"input\":\"{escaped}"),
        };
        call.has_arguments = true;
        out.push(StreamDelta::ToolCallFragment(ToolCallFragment { index: call.index, json }));
    }

    /// A finished item: a reasoning item's signature (its complete encrypted
    /// content arrives only now), a call's end (with its arguments whole when
    /// no delta carried them).
    fn item_done(&mut self, value: &Value, out: &mut Vec<StreamDelta>) {
        let Some(item) = value.get("item") else { return };
        match item.get("type").and_then(Value::as_str) {
            Some("reasoning") => out.extend(signature(item).map(StreamDelta::ThinkingSignature)),
            Some("function_call") => {
                let Some(call) = self.call_at(value) else { return };
                if !call.has_arguments {
                    let json = text(item.get("arguments")).unwrap_or_else(|| "{}".to_owned());
                    out.push(StreamDelta::ToolCallFragment(ToolCallFragment { index: call.index, json }));
                    call.has_arguments = true;
                }
                out.push(StreamDelta::ToolCallEnd(call.index));
            }
            Some("custom_tool_call") => {
                let Some(call) = self.call_at(value).filter(|call| call.custom) else { return };
                // The opened string closed, or the whole text when no piece came.
                let json = match call.has_arguments {
                    true => "\"}".to_owned(),
                    false => serde_json::json!({"input": text(item.get("input")).unwrap_or_default()}).to_string(),
                };
                call.has_arguments = true;
                out.push(StreamDelta::ToolCallFragment(ToolCallFragment { index: call.index, json }));
                out.push(StreamDelta::ToolCallEnd(call.index));
            }
            _ => {}
        }
    }

    fn end(&mut self, response: Option<&Value>, out: &mut Vec<StreamDelta>) {
        self.ended = true;
        let response = response.cloned().unwrap_or_default();
        if let Some(usage) = response.get("usage").and_then(usage) {
            out.push(StreamDelta::Usage(usage));
        }
        let refusal = (!self.refusal.is_empty()).then(|| refusal(None, Some(std::mem::take(&mut self.refusal))));
        let (reason, raw) = stop(&response, refusal.as_ref(), !self.calls.is_empty());
        out.push(StreamDelta::Stop(StopInfo { reason, raw, refusal }));
    }

    fn fail(&mut self, value: &Value, out: &mut Vec<StreamDelta>) {
        self.ended = true;
        out.push(StreamDelta::Error(in_band_error(&ErrorFields::from_value(value))));
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::panic)] // a failing test should stop loudly
mod tests {
    use serde_json::json;
    use weir_sdk::types::{ErrorClass, StopReason, Usage};

    use super::*;
    use crate::responses::signature::ReasoningSignature;
    use crate::responses::test_event as event;

    fn run(events: &[Value]) -> (Vec<StreamDelta>, Result<Vec<StreamDelta>, CodecError>) {
        let mut decoder = ResponsesStream::new("openai-responses");
        let deltas = events.iter().flat_map(|data| decoder.feed(event(data)).unwrap()).collect();
        (deltas, decoder.finish())
    }

    #[test]
    fn reasoning_then_a_call_stream_as_thinking_a_signature_and_a_tool_call() {
        let reasoning = json!({"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "enc-1"});
        let call = json!({"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "exec_command", "arguments": ""});
        let done_call = json!({"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "exec_command", "arguments": "{\"cmd\":\"ls\"}"});
        let (deltas, finish) = run(&[
            json!({"type": "response.created", "response": {"id": "resp_1", "model": "gpt-5", "status": "in_progress"}}),
            json!({"type": "response.in_progress", "response": {"id": "resp_1", "model": "gpt-5"}}),
            json!({"type": "response.output_item.added", "output_index": 0, "item": reasoning}),
            json!({"type": "response.reasoning_summary_part.added", "output_index": 0, "summary_index": 0}),
            json!({"type": "response.reasoning_summary_text.delta", "output_index": 0, "summary_index": 0, "delta": "List files."}),
            json!({"type": "response.reasoning_summary_part.added", "output_index": 0, "summary_index": 1}),
            json!({"type": "response.reasoning_summary_text.delta", "output_index": 0, "summary_index": 1, "delta": "Then answer."}),
            json!({"type": "response.output_item.done", "output_index": 0, "item": reasoning}),
            json!({"type": "response.output_item.added", "output_index": 1, "item": call}),
            json!({"type": "response.function_call_arguments.delta", "output_index": 1, "delta": "{\"cmd\":"}),
            json!({"type": "response.function_call_arguments.delta", "output_index": 1, "delta": "\"ls\"}"}),
            json!({"type": "response.function_call_arguments.done", "output_index": 1, "arguments": "{\"cmd\":\"ls\"}"}),
            json!({"type": "response.output_item.done", "output_index": 1, "item": done_call}),
            json!({"type": "response.completed", "response": {"id": "resp_1", "status": "completed",
                   "usage": {"input_tokens": 50, "input_tokens_details": {"cached_tokens": 10}, "output_tokens": 20,
                             "output_tokens_details": {"reasoning_tokens": 12}}}}),
        ]);
        let signature = ReasoningSignature { id: "rs_1".into(), encrypted_content: "enc-1".into() }.to_text().unwrap();
        assert_eq!(
            deltas,
            vec![
                StreamDelta::ServedModel("gpt-5".into()),
                StreamDelta::RequestId("resp_1".into()),
                StreamDelta::Thinking("List files.".into()),
                StreamDelta::Thinking("\n\n".into()),
                StreamDelta::Thinking("Then answer.".into()),
                StreamDelta::ThinkingSignature(signature),
                StreamDelta::ToolCallStart(ToolCallStart {
                    index: 0,
                    id: "call_1".into(),
                    name: "exec_command".into()
                }),
                StreamDelta::ToolCallFragment(ToolCallFragment { index: 0, json: "{\"cmd\":".into() }),
                StreamDelta::ToolCallFragment(ToolCallFragment { index: 0, json: "\"ls\"}".into() }),
                StreamDelta::ToolCallEnd(0),
                StreamDelta::Usage(Usage {
                    input: 40,
                    output: 20,
                    cache_read: 10,
                    cache_write: 0,
                    reasoning: Some(12)
                }),
                StreamDelta::Stop(StopInfo {
                    reason: StopReason::ToolUse,
                    raw: Some("completed".into()),
                    refusal: None
                }),
            ]
        );
        assert_eq!(finish.unwrap(), vec![]);
    }

    #[test]
    fn a_streamed_call_in_a_namespace_starts_under_its_flattened_name() {
        let added = json!({"type": "function_call", "id": "fc_1", "call_id": "call_n", "name": "lookup",
                           "namespace": "crm", "arguments": ""});
        let done = json!({"type": "function_call", "id": "fc_1", "call_id": "call_n", "name": "lookup",
                          "namespace": "crm", "arguments": "{\"id\":7}"});
        let (deltas, _) = run(&[
            json!({"type": "response.output_item.added", "output_index": 0, "item": added}),
            json!({"type": "response.function_call_arguments.delta", "output_index": 0, "delta": "{\"id\":7}"}),
            json!({"type": "response.output_item.done", "output_index": 0, "item": done}),
            json!({"type": "response.completed", "response": {"status": "completed", "output": []}}),
        ]);
        let start = ToolCallStart { index: 0, id: "call_n".into(), name: "crm__lookup".into() };
        assert_eq!(deltas[0], StreamDelta::ToolCallStart(start));
        assert_eq!(deltas[1], StreamDelta::ToolCallFragment(ToolCallFragment { index: 0, json: "{\"id\":7}".into() }));
        assert_eq!(deltas[2], StreamDelta::ToolCallEnd(0));
    }

    #[test]
    fn a_custom_tool_calls_text_streams_as_the_input_of_its_arguments() {
        let added =
            json!({"type": "custom_tool_call", "id": "ctc_1", "call_id": "call_c", "name": "apply_patch", "input": ""});
        let done = json!({"type": "custom_tool_call", "id": "ctc_1", "call_id": "call_c", "name": "apply_patch",
                          "input": "*** Begin Patch\n\"x\""});
        let completed = json!({"type": "response.completed", "response": {"status": "completed", "output": []}});
        let (deltas, finished) = run(&[
            json!({"type": "response.output_item.added", "output_index": 0, "item": added}),
            json!({"type": "response.custom_tool_call_input.delta", "output_index": 0, "delta": "*** Begin Patch\n"}),
            json!({"type": "response.custom_tool_call_input.delta", "output_index": 0, "delta": "\"x\""}),
            json!({"type": "response.output_item.done", "output_index": 0, "item": done}),
            completed.clone(),
        ]);
        assert!(finished.unwrap().is_empty());
        let start = ToolCallStart { index: 0, id: "call_c".into(), name: "apply_patch".into() };
        assert_eq!(deltas[0], StreamDelta::ToolCallStart(start));
        let json: String = deltas
            .iter()
            .filter_map(|delta| match delta {
                StreamDelta::ToolCallFragment(fragment) => Some(fragment.json.clone()),
                _ => None,
            })
            .collect();
        let arguments: Value = serde_json::from_str(&json).unwrap();
        assert_eq!(arguments, json!({"input": "*** Begin Patch\n\"x\""}));
        assert!(deltas.contains(&StreamDelta::ToolCallEnd(0)));
        assert!(matches!(deltas.last(), Some(StreamDelta::Stop(stop)) if stop.reason == StopReason::ToolUse));

        // No piece streamed: the whole text comes with the finished item.
        let (deltas, _) = run(&[
            json!({"type": "response.output_item.added", "output_index": 0, "item": added}),
            json!({"type": "response.output_item.done", "output_index": 0, "item": done}),
            completed,
        ]);
        let whole = ToolCallFragment { index: 0, json: json!({"input": "*** Begin Patch\n\"x\""}).to_string() };
        assert_eq!(deltas[1], StreamDelta::ToolCallFragment(whole));
    }

    #[test]
    fn text_an_incomplete_end_and_a_call_whose_arguments_come_whole() {
        let call = json!({"type": "function_call", "call_id": "call_9", "name": "noop", "arguments": "{}"});
        let (deltas, _) = run(&[
            json!({"type": "response.output_text.delta", "output_index": 0, "content_index": 0, "delta": "Hel"}),
            json!({"type": "response.output_text.delta", "output_index": 0, "content_index": 0, "delta": "lo"}),
            json!({"type": "response.output_item.added", "output_index": 1, "item": call}),
            json!({"type": "response.output_item.done", "output_index": 1, "item": call}),
            json!({"type": "response.incomplete", "response": {"status": "incomplete", "incomplete_details": {"reason": "max_output_tokens"}}}),
        ]);
        assert_eq!(deltas[0], StreamDelta::Text("Hel".into()));
        assert_eq!(deltas[3], StreamDelta::ToolCallFragment(ToolCallFragment { index: 0, json: "{}".into() }));
        assert_eq!(
            deltas.last().unwrap(),
            &StreamDelta::Stop(StopInfo {
                reason: StopReason::MaxTokens,
                raw: Some("max_output_tokens".into()),
                refusal: None
            })
        );
    }

    #[test]
    fn failures_in_the_stream_are_in_band_errors_and_a_cut_stream_is_malformed() {
        let (deltas, finish) =
            run(&[json!({"type": "error", "code": "rate_limit_exceeded", "message": "slow down", "param": null})]);
        assert!(matches!(&deltas[0], StreamDelta::Error(_)), "{deltas:?}");
        assert!(finish.unwrap().is_empty());

        let failed = json!({"type": "response.failed", "response": {"status": "failed", "error": {"code": "server_error", "message": "boom"}}});
        let (deltas, _) = run(&[failed]);
        let StreamDelta::Error(error) = &deltas[0] else { panic!("{deltas:?}") };
        assert!(matches!(error.class, ErrorClass::Transient(_)), "{error:?}");

        let (_, finish) = run(&[json!({"type": "response.output_text.delta", "delta": "cut"})]);
        assert!(matches!(finish, Err(CodecError::Malformed(_))));
        let mut decoder = ResponsesStream::new("openai-responses");
        let garbage = StreamEvent { name: None, headers: vec![], data: b"{not json".to_vec() };
        assert!(decoder.feed(garbage).is_err());
    }
}
