//! A stream whose answer carries the provider's own blocks (a server tool's
//! call and result, a cited text), taken whole (see `call::native`; a live
//! stream with them is [`super::Events`]'s, which writes each own block with
//! [`OwnBlockEvents::block`]): written here as the Messages API streams it, block
//! by block in the provider's order. Each block is `content_block_start`,
//! its deltas and `content_block_stop`: a text's `text_delta` (and a cited
//! text's `citations_delta`s, one per citation, after it), a thinking's
//! `thinking_delta` and `signature_delta`, a tool call's `input_json_delta`,
//! and an own block whole in its start (a `server_tool_use` with its whole
//! `input`, a result with its content).
//!
//! The replayed deltas are not what is written: adjacent texts merge in them,
//! so the blocks come from the answer's own copy ([`NativeBlocks::content`]);
//! only the usage and the stop are read from them.

use serde_json::{Value, json};

use super::error::envelope;
use super::response::{in_provider_order, message_id, stop_reason, stop_sequence, usage, usage_with};
use crate::chat::{NativeBlocks, Stamp};
use crate::error::WeirError;
use crate::server::sse::{EventWriter, named_event};
use crate::types::{StopInfo, StopReason, StreamDelta, Usage};

/// One stream's events, written at its end.
#[derive(Debug)]
pub struct OwnBlockEvents {
    model: String,
    stop_sequences: Vec<String>,
    omit_thinking: bool,
    own: std::sync::Arc<NativeBlocks>,
    usage: Option<Usage>,
    stop: Option<StopInfo>,
}

impl OwnBlockEvents {
    /// The writer for `stamp`'s answer, when it carries this dialect's own blocks.
    pub fn for_stamp(stamp: &Stamp, stop_sequences: Vec<String>, omit_thinking: bool) -> Option<Self> {
        let own = stamp.native_answer.clone().filter(|own| super::response::own_blocks(Some(own)).is_some())?;
        Some(Self { model: stamp.model.clone(), stop_sequences, omit_thinking, own, usage: None, stop: None })
    }

    fn event(name: &str, value: Value) -> String {
        named_event(name, &value)
    }

    /// One block's start, deltas and stop (the live writer's too:
    /// [`super::Events`]).
    pub(super) fn block(index: usize, block: Value, events: &mut Vec<String>) {
        let delta = |delta: Value| {
            Self::event("content_block_delta", json!({"type": "content_block_delta", "index": index, "delta": delta}))
        };
        let kind = block.get("type").and_then(Value::as_str).unwrap_or_default().to_owned();
        let (start, deltas) = match kind.as_str() {
            "text" => {
                let text = block.get("text").cloned().unwrap_or_else(|| json!(""));
                let citations = block.get("citations").and_then(Value::as_array).cloned();
                let mut start = json!({"type": "text", "text": ""});
                let mut deltas = vec![delta(json!({"type": "text_delta", "text": text}))];
                if let Some(citations) = citations {
                    start["citations"] = json!([]);
                    deltas.extend(
                        citations
                            .into_iter()
                            .map(|citation| delta(json!({"type": "citations_delta", "citation": citation}))),
                    );
                }
                (start, deltas)
            }
            "thinking" => {
                let start = json!({"type": "thinking", "thinking": "", "signature": ""});
                let deltas = vec![
                    delta(
                        json!({"type": "thinking_delta", "thinking": block.get("thinking").cloned().unwrap_or_default()}),
                    ),
                    delta(
                        json!({"type": "signature_delta", "signature": block.get("signature").cloned().unwrap_or_default()}),
                    ),
                ];
                (start, deltas)
            }
            "tool_use" => {
                let mut start = block.clone();
                let input = start.get("input").map(Value::to_string).unwrap_or_else(|| "{}".to_owned());
                start["input"] = json!({});
                (start, vec![delta(json!({"type": "input_json_delta", "partial_json": input}))])
            }
            _ => (block, Vec::new()),
        };
        events.push(Self::event(
            "content_block_start",
            json!({"type": "content_block_start", "index": index, "content_block": start}),
        ));
        events.extend(deltas);
        events.push(Self::event("content_block_stop", json!({"type": "content_block_stop", "index": index})));
    }
}

impl EventWriter for OwnBlockEvents {
    fn delta(&mut self, delta: StreamDelta) -> Vec<String> {
        match delta {
            StreamDelta::Usage(usage) => self.usage = Some(usage),
            StreamDelta::Stop(stop) => self.stop = Some(stop),
            StreamDelta::Text(_)
            | StreamDelta::Thinking(_)
            | StreamDelta::ThinkingSignature(_)
            | StreamDelta::ToolCallStart(_)
            | StreamDelta::ToolCallFragment(_)
            | StreamDelta::ToolCallEnd(_)
            | StreamDelta::ServedModel(_)
            | StreamDelta::RequestId(_)
            | StreamDelta::Error(_) => {}
        }
        Vec::new()
    }

    fn end(&mut self) -> Vec<String> {
        let mut events = vec![Self::event(
            "message_start",
            json!({"type": "message_start", "message": {
                "id": message_id(), "type": "message", "role": "assistant", "model": self.model, "content": [],
                "stop_reason": null, "stop_sequence": null, "usage": usage(self.usage.as_ref()),
            }}),
        )];
        let blocks = in_provider_order(&self.own.content, &self.own, self.omit_thinking);
        for (index, block) in blocks.into_iter().enumerate() {
            Self::block(index, block, &mut events);
        }
        let reason = self.stop.as_ref().map_or(StopReason::EndTurn, |stop| stop.reason);
        let mut delta = json!({
            "stop_reason": stop_reason(reason),
            "stop_sequence": stop_sequence(reason, &self.stop_sequences),
        });
        if let Some(refusal) = self.stop.as_ref().and_then(|stop| stop.refusal.as_ref()) {
            delta["stop_details"] =
                json!({"type": "refusal", "category": refusal.category, "explanation": refusal.explanation});
        }
        let usage = usage_with(self.usage.as_ref(), self.own.usage.as_ref());
        events.push(Self::event("message_delta", json!({"type": "message_delta", "delta": delta, "usage": usage})));
        events.push(Self::event("message_stop", json!({"type": "message_stop"})));
        events
    }

    fn error(&mut self, error: &WeirError) -> Vec<String> {
        vec![named_event("error", &envelope(error.category(), &error.safe_message(), None))]
    }
}
