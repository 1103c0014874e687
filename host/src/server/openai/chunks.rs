//! Normalized stream deltas → OpenAI `chat.completion.chunk` SSE events, the
//! shape the official clients reassemble: the role first, then content,
//! `reasoning_content` and `tool_calls` deltas, the finish reason, the usage
//! chunk when `stream_options.include_usage` asked for it, and `[DONE]`.

use serde_json::json;

use super::response::{completion_id, finish_reason};
use super::wire::{Chunk, ChunkChoice, Delta, FunctionDelta, ToolCallDelta, UsageChunk, UsageCounts};
use crate::chat::Stamp;
use crate::error::WeirError;
use crate::server::sse::{EventWriter, data_event as sse};
use crate::types::{StreamDelta, Usage};

/// One stream's chunks: the same id, creation time and model on every chunk.
#[derive(Debug)]
pub struct ChunkWriter {
    id: String,
    created: u64,
    model: String,
    include_usage: bool,
    usage: Option<Usage>,
    role_sent: bool,
}

const CHUNK: &str = "chat.completion.chunk";

impl ChunkWriter {
    pub fn new(stamp: &Stamp, include_usage: bool) -> Self {
        let (id, created) = completion_id(stamp.ended_at);
        Self { id, created, model: stamp.model.clone(), include_usage, usage: None, role_sent: false }
    }

    fn event(&mut self, mut delta: Delta<'_>, finish: Option<&'static str>) -> String {
        if !self.role_sent {
            self.role_sent = true;
            delta.role = Some("assistant");
        }
        sse(&Chunk {
            id: &self.id,
            object: CHUNK,
            created: self.created,
            model: &self.model,
            choices: [ChunkChoice { index: 0, delta, logprobs: None, finish_reason: finish }],
        })
    }
}

impl EventWriter for ChunkWriter {
    /// The SSE events for one delta (none for deltas a chunk has no field for).
    fn delta(&mut self, delta: StreamDelta) -> Vec<String> {
        let event = match &delta {
            StreamDelta::Text(text) => self.event(Delta { content: Some(text), ..Delta::default() }, None),
            StreamDelta::Thinking(text) => {
                self.event(Delta { reasoning_content: Some(text), ..Delta::default() }, None)
            }
            StreamDelta::ToolCallStart(start) => {
                let call = ToolCallDelta {
                    index: start.index,
                    id: Some(&start.id),
                    kind: Some("function"),
                    function: FunctionDelta { name: Some(&start.name), arguments: "" },
                };
                self.event(Delta { tool_calls: Some([call]), ..Delta::default() }, None)
            }
            StreamDelta::ToolCallFragment(fragment) => {
                let call = ToolCallDelta {
                    index: fragment.index,
                    id: None,
                    kind: None,
                    function: FunctionDelta { name: None, arguments: &fragment.json },
                };
                self.event(Delta { tool_calls: Some([call]), ..Delta::default() }, None)
            }
            StreamDelta::Stop(stop) => self.event(Delta::default(), Some(finish_reason(stop.reason))),
            StreamDelta::Usage(usage) => {
                self.usage = Some(*usage);
                return Vec::new();
            }
            StreamDelta::ThinkingSignature(_)
            | StreamDelta::ToolCallEnd(_)
            | StreamDelta::ServedModel(_)
            | StreamDelta::RequestId(_)
            | StreamDelta::Error(_) => return Vec::new(),
        };
        vec![event]
    }

    /// The end of a stream that completed: the usage chunk if asked for, `[DONE]`.
    fn end(&mut self) -> Vec<String> {
        let mut events = Vec::new();
        if self.include_usage {
            events.push(sse(&UsageChunk {
                id: &self.id,
                object: CHUNK,
                created: self.created,
                model: &self.model,
                choices: [],
                usage: self.usage.as_ref().map(UsageCounts::from),
            }));
        }
        events.push("data: [DONE]\n\n".to_owned());
        events
    }

    /// A failure after the stream began, as OpenAI sends one: an `error` object
    /// with the category and a safe message, and no `[DONE]` after it.
    fn error(&mut self, error: &WeirError) -> Vec<String> {
        let category = error.category().as_str();
        vec![sse(&json!({"error": {
            "message": error.safe_message(), "type": category, "code": category, "param": null,
        }}))]
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, SystemTime};

    use serde_json::Value;

    use super::*;
    use crate::types::{StopInfo, StopReason, ToolCallFragment, ToolCallStart};

    fn writer(include_usage: bool) -> ChunkWriter {
        let stamp = Stamp {
            call_id: "call-1".into(),
            model: "m".into(),
            role: None,
            provider: Some("p".into()),
            requested_max_tokens: Some(10),
            attempts: 1,
            latency: Duration::ZERO,
            ended_at: SystemTime::UNIX_EPOCH,
            cache_multipliers: None,
            native_dropped: crate::NativeDropped::default(),
            passed_over: Vec::new(),
            fallback_from: None,
            cache: None,
            native_answer: None,
        };
        ChunkWriter::new(&stamp, include_usage)
    }

    fn data(event: &str) -> Value {
        serde_json::from_str(event.strip_prefix("data: ").unwrap().trim_end()).unwrap()
    }

    #[test]
    fn the_first_chunk_carries_the_role_and_tool_calls_stream_by_index() {
        let mut writer = writer(false);
        let first = data(&writer.delta(StreamDelta::Text("Hi".into()))[0]);
        assert_eq!(first["object"], "chat.completion.chunk");
        assert_eq!(first["choices"][0]["delta"], json!({"role": "assistant", "content": "Hi"}));
        let start = ToolCallStart { index: 0, id: "c1".into(), name: "f".into() };
        let start = data(&writer.delta(StreamDelta::ToolCallStart(start))[0]);
        assert_eq!(start["choices"][0]["delta"]["tool_calls"][0]["id"], "c1");
        assert!(start["choices"][0]["delta"].get("role").is_none(), "the role is sent once");
        let fragment = ToolCallFragment { index: 0, json: "{\"a\":1}".into() };
        let fragment = data(&writer.delta(StreamDelta::ToolCallFragment(fragment))[0]);
        assert_eq!(fragment["choices"][0]["delta"]["tool_calls"][0]["function"]["arguments"], "{\"a\":1}");
        assert_eq!(first["id"], fragment["id"], "one id per stream");
    }

    /// Every chunk has OpenAI's fields, and its delta only the fields its
    /// delta sets (a fragment has no id, type or name).
    #[test]
    fn each_chunk_has_openais_fields_and_only_what_its_delta_sets() {
        let mut writer = writer(false);
        let first = data(&writer.delta(StreamDelta::Thinking("hm".into()))[0]);
        let id = first["id"].clone();
        let chunk = |delta: Value, finish: Value| {
            json!({"id": id, "object": "chat.completion.chunk", "created": 0, "model": "m",
                   "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}]})
        };
        assert_eq!(first, chunk(json!({"role": "assistant", "reasoning_content": "hm"}), Value::Null));
        let start = ToolCallStart { index: 1, id: "c1".into(), name: "f\"g".into() };
        assert_eq!(
            data(&writer.delta(StreamDelta::ToolCallStart(start))[0]),
            chunk(
                json!({"tool_calls": [{"index": 1, "id": "c1", "type": "function",
                                       "function": {"name": "f\"g", "arguments": ""}}]}),
                Value::Null
            )
        );
        let fragment = ToolCallFragment { index: 1, json: "{\"a\":\n1}".into() };
        assert_eq!(
            data(&writer.delta(StreamDelta::ToolCallFragment(fragment))[0]),
            chunk(json!({"tool_calls": [{"index": 1, "function": {"arguments": "{\"a\":\n1}"}}]}), Value::Null)
        );
        assert_eq!(
            data(&writer.delta(StreamDelta::Text("é\u{1F600}".into()))[0]),
            chunk(json!({"content": "é\u{1F600}"}), Value::Null)
        );
        let stop = StopInfo { reason: StopReason::EndTurn, raw: None, refusal: None };
        let last = writer.delta(StreamDelta::Stop(stop)).remove(0);
        assert!(last.starts_with("data: {") && last.ends_with("}\n\n"), "one SSE event: {last:?}");
        assert_eq!(data(&last), chunk(json!({}), json!("stop")));
    }

    #[test]
    fn usage_waits_for_the_end_and_done_closes_it() {
        let mut writer = writer(true);
        let usage = Usage { input: 5, output: 2, cache_read: 3, cache_write: 0, reasoning: None };
        assert!(writer.delta(StreamDelta::Usage(usage)).is_empty());
        let stop = StopInfo { reason: StopReason::MaxTokens, raw: None, refusal: None };
        assert_eq!(data(&writer.delta(StreamDelta::Stop(stop))[0])["choices"][0]["finish_reason"], "length");
        let end = writer.end();
        let usage_chunk = data(&end[0]);
        assert_eq!(usage_chunk["choices"], json!([]));
        assert_eq!(usage_chunk["usage"]["prompt_tokens"], 8);
        assert_eq!(end[1], "data: [DONE]\n\n");
        assert_eq!(self::writer(false).end(), vec!["data: [DONE]\n\n".to_owned()]);
    }
}
