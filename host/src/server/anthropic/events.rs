//! Normalized stream deltas → the Messages API's named SSE events, the sequence
//! the official clients reassemble: `message_start` (an empty message with the
//! usage known so far), then per content block `content_block_start`, its
//! deltas (`text_delta`, `thinking_delta`, `signature_delta`, `input_json_delta`)
//! and `content_block_stop`, then `message_delta` (stop reason, cumulative usage)
//! and `message_stop`. A failure is an `error` event with the error envelope and
//! nothing after it.
//!
//! One block is open at a time; a new one starts whenever the kind of delta
//! changes, a tool call starts, or thinking continues after its signature. Block
//! indices count from 0 in the order blocks start, so they are positions in the
//! final `content` array.
//!
//! A live stream with the provider's own pieces (a call that carried server
//! tools, see `call::streaming`) writes them in place: each own block whole,
//! as the whole replay does ([`super::OwnBlockEvents`]); a text start opens a
//! text block as the provider started it (its `citations: []`), so adjacent
//! text blocks stay apart; a citation is a `citations_delta` on the open
//! text block; the own usage (`server_tool_use`) rides in `message_delta`.

use serde_json::{Value, json};

use super::error::envelope;
use super::own_blocks::OwnBlockEvents;
use super::response::{message_id, stop_reason, stop_sequence, usage, usage_with};
use crate::chat::Stamp;
use crate::error::WeirError;
use crate::server::sse::{EventWriter, named_event};
use crate::types::{NativeDelta, StopInfo, StopReason, StreamDelta, ToolCallFragment, ToolCallStart, Usage};

/// The block being written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Open {
    Text { block: u32 },
    Thinking { block: u32, signed: bool },
    ToolUse { block: u32, call: u32 },
}

impl Open {
    fn block(self) -> u32 {
        match self {
            Self::Text { block } | Self::Thinking { block, .. } | Self::ToolUse { block, .. } => block,
        }
    }
}

/// One stream's events.
#[derive(Debug)]
pub struct Events {
    id: String,
    model: String,
    /// The request's stop sequences, to name the one that matched.
    stop_sequences: Vec<String>,
    started: bool,
    open: Option<Open>,
    next_block: u32,
    /// The block index of each tool call, by its stream index.
    calls: Vec<(u32, u32)>,
    usage: Option<Usage>,
    /// The provider's own usage (`server_tool_use`), from a live stream's own pieces.
    own_usage: Option<Value>,
    stop: Option<StopInfo>,
    /// `thinking.display: "omitted"`: thinking blocks open and carry their
    /// signature, never their text.
    omit_thinking: bool,
}

impl Events {
    pub fn new(stamp: &Stamp, stop_sequences: Vec<String>, omit_thinking: bool) -> Self {
        Self {
            id: message_id(),
            model: stamp.model.clone(),
            stop_sequences,
            started: false,
            open: None,
            next_block: 0,
            calls: Vec::new(),
            usage: None,
            own_usage: None,
            stop: None,
            omit_thinking,
        }
    }

    /// `message_start`, once, before anything else: held until the first content
    /// so that usage reported ahead of it (the input count) rides in it.
    fn start(&mut self, events: &mut Vec<String>) {
        if self.started {
            return;
        }
        self.started = true;
        events.push(named_event(
            "message_start",
            &json!({"type": "message_start", "message": {
                "id": self.id, "type": "message", "role": "assistant", "model": self.model, "content": [],
                "stop_reason": null, "stop_sequence": null, "usage": usage(self.usage.as_ref()),
            }}),
        ));
    }

    /// Closes the open block, if any.
    fn close(&mut self, events: &mut Vec<String>) {
        if let Some(open) = self.open.take() {
            let index = open.block();
            events.push(named_event("content_block_stop", &json!({"type": "content_block_stop", "index": index})));
        }
    }

    /// Closes the open block and starts `content_block` as the next one.
    fn open(&mut self, events: &mut Vec<String>, content_block: Value, open: impl FnOnce(u32) -> Open) -> u32 {
        self.start(events);
        self.close(events);
        let index = self.next_block;
        self.next_block += 1;
        self.open = Some(open(index));
        events.push(named_event(
            "content_block_start",
            &json!({"type": "content_block_start", "index": index, "content_block": content_block}),
        ));
        index
    }

    fn block_delta(index: u32, delta: Value) -> String {
        named_event("content_block_delta", &json!({"type": "content_block_delta", "index": index, "delta": delta}))
    }

    fn text(&mut self, text: String) -> Vec<String> {
        let mut events = Vec::new();
        let index = match self.open {
            Some(Open::Text { block }) => block,
            _ if text.is_empty() => return events,
            _ => self.open(&mut events, json!({"type": "text", "text": ""}), |block| Open::Text { block }),
        };
        events.push(Self::block_delta(index, json!({"type": "text_delta", "text": text})));
        events
    }

    fn thinking(&mut self, text: String) -> Vec<String> {
        let mut events = Vec::new();
        let index = match self.open {
            Some(Open::Thinking { block, signed: false }) => block,
            _ if text.is_empty() => return events,
            _ => self.open_thinking(&mut events),
        };
        if !self.omit_thinking {
            events.push(Self::block_delta(index, json!({"type": "thinking_delta", "thinking": text})));
        }
        events
    }

    fn signature(&mut self, signature: String) -> Vec<String> {
        let mut events = Vec::new();
        let index = match self.open {
            Some(Open::Thinking { block, .. }) => block,
            _ => self.open_thinking(&mut events),
        };
        self.open = Some(Open::Thinking { block: index, signed: true });
        events.push(Self::block_delta(index, json!({"type": "signature_delta", "signature": signature})));
        events
    }

    fn open_thinking(&mut self, events: &mut Vec<String>) -> u32 {
        let block = json!({"type": "thinking", "thinking": "", "signature": ""});
        self.open(events, block, |block| Open::Thinking { block, signed: false })
    }

    fn tool_start(&mut self, start: ToolCallStart) -> Vec<String> {
        let mut events = Vec::new();
        let block = json!({"type": "tool_use", "id": start.id, "name": start.name, "input": {}});
        let call = start.index;
        let index = self.open(&mut events, block, |block| Open::ToolUse { block, call });
        self.calls.push((call, index));
        events
    }

    /// Arguments go to their call's block. Providers stream calls one after the
    /// other; a server that interleaves them gets its fragments sent to the
    /// earlier block by index, which the official clients accumulate by.
    fn tool_fragment(&mut self, fragment: ToolCallFragment) -> Vec<String> {
        let Some(&(_, index)) = self.calls.iter().find(|(call, _)| *call == fragment.index) else {
            tracing::warn!(call = fragment.index, "tool-call arguments without a start; dropped");
            return Vec::new();
        };
        vec![Self::block_delta(index, json!({"type": "input_json_delta", "partial_json": fragment.json}))]
    }

    /// An own block, whole, in its place.
    fn own_block(&mut self, block: Value) -> Vec<String> {
        let mut events = Vec::new();
        self.start(&mut events);
        self.close(&mut events);
        let index = self.next_block;
        self.next_block += 1;
        OwnBlockEvents::block(index as usize, block, &mut events);
        events
    }

    /// A text block as the provider started it; its text is never in the start.
    fn text_start(&mut self, mut start: Value) -> Vec<String> {
        let mut events = Vec::new();
        start["text"] = json!("");
        self.open(&mut events, start, |block| Open::Text { block });
        events
    }

    /// A citation of the open text block (of a new one if none is open).
    fn citation(&mut self, citation: Value) -> Vec<String> {
        let mut events = Vec::new();
        let index = match self.open {
            Some(Open::Text { block }) => block,
            _ => {
                let start = json!({"type": "text", "text": "", "citations": []});
                self.open(&mut events, start, |block| Open::Text { block })
            }
        };
        events.push(Self::block_delta(index, json!({"type": "citations_delta", "citation": citation})));
        events
    }

    fn tool_end(&mut self, call: u32) -> Vec<String> {
        let mut events = Vec::new();
        if matches!(self.open, Some(Open::ToolUse { call: open, .. }) if open == call) {
            self.close(&mut events);
        }
        events
    }
}

impl EventWriter for Events {
    fn delta(&mut self, delta: StreamDelta) -> Vec<String> {
        match delta {
            StreamDelta::Text(text) => self.text(text),
            StreamDelta::Thinking(text) => self.thinking(text),
            StreamDelta::ThinkingSignature(signature) => self.signature(signature),
            StreamDelta::ToolCallStart(start) => self.tool_start(start),
            StreamDelta::ToolCallFragment(fragment) => self.tool_fragment(fragment),
            StreamDelta::ToolCallEnd(call) => self.tool_end(call),
            StreamDelta::Usage(usage) => {
                self.usage = Some(usage);
                Vec::new()
            }
            StreamDelta::Stop(stop) => {
                let mut events = Vec::new();
                self.close(&mut events);
                self.stop = Some(stop);
                events
            }
            StreamDelta::ServedModel(_) | StreamDelta::RequestId(_) | StreamDelta::Error(_) => Vec::new(),
        }
    }

    fn own(&mut self, piece: NativeDelta) -> Vec<String> {
        // Each own piece was checked a JSON object as it left the component.
        let parsed = |json: &str| serde_json::from_str::<Value>(json).ok();
        match piece {
            NativeDelta::Neutral(delta) => self.delta(delta),
            NativeDelta::Block(json) => parsed(&json).map(|block| self.own_block(block)).unwrap_or_default(),
            NativeDelta::TextStart(json) => parsed(&json).map(|start| self.text_start(start)).unwrap_or_default(),
            NativeDelta::Citation(json) => parsed(&json).map(|citation| self.citation(citation)).unwrap_or_default(),
            NativeDelta::Usage(json) => {
                self.own_usage = parsed(&json);
                Vec::new()
            }
        }
    }

    /// The open block's stop, `message_delta` with the stop reason (a refusal's
    /// details with it) and the cumulative usage, then `message_stop`.
    fn end(&mut self) -> Vec<String> {
        let mut events = Vec::new();
        self.start(&mut events);
        self.close(&mut events);
        let reason = self.stop.as_ref().map_or(StopReason::EndTurn, |stop| stop.reason);
        let mut delta = json!({
            "stop_reason": stop_reason(reason),
            "stop_sequence": stop_sequence(reason, &self.stop_sequences),
        });
        if let Some(refusal) = self.stop.as_ref().and_then(|stop| stop.refusal.as_ref()) {
            delta["stop_details"] =
                json!({"type": "refusal", "category": refusal.category, "explanation": refusal.explanation});
        }
        events.push(named_event(
            "message_delta",
            &json!({
                "type": "message_delta", "delta": delta,
                "usage": usage_with(self.usage.as_ref(), self.own_usage.as_ref()),
            }),
        ));
        events.push(named_event("message_stop", &json!({"type": "message_stop"})));
        events
    }

    /// A failure after the stream began, as the Messages API sends one: an `error`
    /// event with the envelope, and no `message_stop` after it.
    fn error(&mut self, error: &WeirError) -> Vec<String> {
        vec![named_event("error", &envelope(error.category(), &error.safe_message(), None))]
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, SystemTime};

    use super::*;
    use crate::types::Refusal;

    fn writer(stop_sequences: &[&str]) -> Events {
        writer_with(stop_sequences, false)
    }

    fn writer_with(stop_sequences: &[&str], omit_thinking: bool) -> Events {
        let stamp = Stamp {
            call_id: "call-1".into(),
            model: "chat".into(),
            role: None,
            provider: Some("openai".into()),
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
        Events::new(&stamp, stop_sequences.iter().map(|s| (*s).to_owned()).collect(), omit_thinking)
    }

    /// Each event as (name, data), checking the name equals the data's `type`.
    fn parse(events: &[String]) -> Vec<(String, Value)> {
        events
            .iter()
            .map(|event| {
                let (name, data) = event.strip_suffix("\n\n").unwrap().split_once('\n').unwrap();
                let name = name.strip_prefix("event: ").unwrap().to_owned();
                let data: Value = serde_json::from_str(data.strip_prefix("data: ").unwrap()).unwrap();
                assert_eq!(data["type"], name.as_str(), "the event name is the data's type");
                (name, data)
            })
            .collect()
    }

    fn run(writer: &mut Events, deltas: Vec<StreamDelta>) -> Vec<(String, Value)> {
        let mut events: Vec<String> = deltas.into_iter().flat_map(|delta| writer.delta(delta)).collect();
        events.extend(writer.end());
        parse(&events)
    }

    /// A live stream's own pieces: the text starts keep two texts apart, the citation
    /// goes on the cited text, the own block is written whole in its place, the own
    /// usage rides in `message_delta`.
    #[test]
    fn own_pieces_are_written_in_place() {
        let mut writer = writer(&[]);
        let text = |text: &str| NativeDelta::Neutral(StreamDelta::Text(text.into()));
        let pieces = vec![
            NativeDelta::TextStart(r#"{"type":"text","text":""}"#.into()),
            text("Searching."),
            NativeDelta::Block(
                r#"{"type":"server_tool_use","id":"s1","name":"web_search","input":{"query":"q"}}"#.into(),
            ),
            NativeDelta::TextStart(r#"{"type":"text","text":"","citations":[]}"#.into()),
            NativeDelta::Citation(r#"{"type":"web_search_result_location","url":"u"}"#.into()),
            text("Cited."),
            NativeDelta::TextStart(r#"{"type":"text","text":""}"#.into()),
            text("Plain."),
            NativeDelta::Usage(r#"{"server_tool_use":{"web_search_requests":1}}"#.into()),
            NativeDelta::Neutral(stop(StopReason::EndTurn)),
        ];
        let mut events: Vec<String> = pieces.into_iter().flat_map(|piece| writer.own(piece)).collect();
        events.extend(writer.end());
        let events = parse(&events);
        let starts: Vec<&Value> =
            events.iter().filter(|(name, _)| name == "content_block_start").map(|(_, data)| data).collect();
        assert_eq!(starts.len(), 4, "{events:?}");
        assert_eq!(starts[1]["content_block"]["input"], json!({"query": "q"}), "the own block whole in its start");
        assert_eq!(starts[2]["content_block"]["citations"], json!([]));
        let citation = events.iter().find(|(_, data)| data["delta"]["type"] == "citations_delta").unwrap();
        assert_eq!(citation.1["index"], 2, "on the cited text");
        let plain = events.iter().find(|(_, data)| data["delta"]["text"] == "Plain.").unwrap();
        assert_eq!(plain.1["index"], 3, "a text of its own, not merged into the cited one");
        let (_, message_delta) = events.iter().find(|(name, _)| name == "message_delta").unwrap();
        assert_eq!(message_delta["usage"]["server_tool_use"], json!({"web_search_requests": 1}));
    }

    fn names(events: &[(String, Value)]) -> Vec<&str> {
        events.iter().map(|(name, _)| name.as_str()).collect()
    }

    fn usage(input: u64, output: u64, cache_read: u64, cache_write: u64) -> Usage {
        Usage { input, output, cache_read, cache_write, reasoning: None }
    }

    fn stop(reason: StopReason) -> StreamDelta {
        StreamDelta::Stop(StopInfo { reason, raw: None, refusal: None })
    }

    #[test]
    fn text_streams_as_one_block_between_message_start_and_message_stop() {
        let mut writer = writer(&["END"]);
        let events = run(
            &mut writer,
            vec![
                StreamDelta::Usage(usage(25, 1, 2048, 0)),
                StreamDelta::ServedModel("claude-sonnet-4-5-20250929".into()),
                StreamDelta::Text("Hel".into()),
                StreamDelta::Text("lo".into()),
                stop(StopReason::StopSequence),
                StreamDelta::Usage(usage(25, 7, 2048, 0)),
            ],
        );
        assert_eq!(
            names(&events),
            [
                "message_start",
                "content_block_start",
                "content_block_delta",
                "content_block_delta",
                "content_block_stop",
                "message_delta",
                "message_stop"
            ]
        );
        let message = &events[0].1["message"];
        assert!(message["id"].as_str().unwrap().starts_with("msg_"));
        assert_eq!(message["model"], "chat");
        assert_eq!(message["content"], json!([]));
        assert_eq!(message["stop_reason"], Value::Null);
        assert_eq!(message["usage"]["input_tokens"], 25, "usage seen before the first content rides in the start");
        assert_eq!(message["usage"]["cache_read_input_tokens"], 2048);
        assert_eq!(events[1].1["content_block"], json!({"type": "text", "text": ""}));
        assert_eq!(events[2].1["delta"], json!({"type": "text_delta", "text": "Hel"}));
        assert!(events[1..5].iter().all(|(_, data)| data["index"] == 0));
        let delta = &events[5].1;
        assert_eq!(delta["delta"], json!({"stop_reason": "stop_sequence", "stop_sequence": "END"}));
        assert_eq!(delta["usage"]["output_tokens"], 7, "the final, cumulative usage");
        assert_eq!(delta["usage"]["input_tokens"], 25);
    }

    #[test]
    fn thinking_text_and_tool_calls_get_a_block_each_with_rising_indices() {
        let mut writer = writer(&[]);
        let events = run(
            &mut writer,
            vec![
                StreamDelta::Thinking("Compare.".into()),
                StreamDelta::ThinkingSignature("EqQB".into()),
                StreamDelta::Text("Checking.".into()),
                StreamDelta::ToolCallStart(ToolCallStart { index: 0, id: "toolu_1".into(), name: "f".into() }),
                StreamDelta::ToolCallFragment(ToolCallFragment { index: 0, json: "{\"city\": \"Pa".into() }),
                StreamDelta::ToolCallFragment(ToolCallFragment { index: 0, json: "ris\"}".into() }),
                StreamDelta::ToolCallEnd(0),
                StreamDelta::ToolCallStart(ToolCallStart { index: 1, id: "toolu_2".into(), name: "g".into() }),
                StreamDelta::ToolCallFragment(ToolCallFragment { index: 1, json: "{}".into() }),
                stop(StopReason::ToolUse),
            ],
        );
        let sequence: Vec<(String, Value)> = events
            .iter()
            .map(|(name, data)| (name.clone(), data.get("index").cloned().unwrap_or(Value::Null)))
            .collect();
        let expected = [
            ("message_start", Value::Null),
            ("content_block_start", json!(0)),
            ("content_block_delta", json!(0)),
            ("content_block_delta", json!(0)),
            ("content_block_stop", json!(0)),
            ("content_block_start", json!(1)),
            ("content_block_delta", json!(1)),
            ("content_block_stop", json!(1)),
            ("content_block_start", json!(2)),
            ("content_block_delta", json!(2)),
            ("content_block_delta", json!(2)),
            ("content_block_stop", json!(2)),
            ("content_block_start", json!(3)),
            ("content_block_delta", json!(3)),
            ("content_block_stop", json!(3)),
            ("message_delta", Value::Null),
            ("message_stop", Value::Null),
        ];
        let expected: Vec<(String, Value)> = expected.into_iter().map(|(n, i)| (n.to_owned(), i)).collect();
        assert_eq!(sequence, expected);
        assert_eq!(events[1].1["content_block"], json!({"type": "thinking", "thinking": "", "signature": ""}));
        assert_eq!(events[2].1["delta"], json!({"type": "thinking_delta", "thinking": "Compare."}));
        assert_eq!(events[3].1["delta"], json!({"type": "signature_delta", "signature": "EqQB"}));
        assert_eq!(
            events[8].1["content_block"],
            json!({"type": "tool_use", "id": "toolu_1", "name": "f", "input": {}})
        );
        assert_eq!(events[9].1["delta"], json!({"type": "input_json_delta", "partial_json": "{\"city\": \"Pa"}));
        assert_eq!(events[15].1["delta"]["stop_reason"], "tool_use");
        assert_eq!(events[15].1["usage"]["output_tokens"], 0, "no usage reported: zeros");
    }

    #[test]
    fn omitted_thinking_streams_its_block_and_signature_without_its_text() {
        let mut writer = writer_with(&[], true);
        let events = run(
            &mut writer,
            vec![
                StreamDelta::Thinking("secret plan".into()),
                StreamDelta::ThinkingSignature("EqQB".into()),
                StreamDelta::Text("Hi".into()),
                stop(StopReason::EndTurn),
            ],
        );
        let names: Vec<&str> = events.iter().map(|(name, _)| name.as_str()).collect();
        assert_eq!(
            names,
            [
                "message_start",
                "content_block_start",
                "content_block_delta",
                "content_block_stop",
                "content_block_start",
                "content_block_delta",
                "content_block_stop",
                "message_delta",
                "message_stop"
            ]
        );
        assert_eq!(events[1].1["content_block"], json!({"type": "thinking", "thinking": "", "signature": ""}));
        assert_eq!(events[2].1["delta"], json!({"type": "signature_delta", "signature": "EqQB"}));
        assert!(!events.iter().any(|(_, data)| data.to_string().contains("secret plan")), "{events:?}");
    }

    #[test]
    fn thinking_after_its_signature_is_a_new_block() {
        let mut writer = writer(&[]);
        let events = run(
            &mut writer,
            vec![
                StreamDelta::Thinking("one".into()),
                StreamDelta::ThinkingSignature("s1".into()),
                StreamDelta::Thinking("two".into()),
                stop(StopReason::EndTurn),
            ],
        );
        let starts: Vec<&Value> =
            events.iter().filter(|(name, _)| name == "content_block_start").map(|(_, d)| &d["index"]).collect();
        assert_eq!(starts, [&json!(0), &json!(1)]);
    }

    #[test]
    fn a_refusal_after_output_is_the_final_stop_reason_with_its_details() {
        let mut writer = writer(&[]);
        let refusal = Refusal { category: Some("cyber".into()), explanation: None };
        let stop = StreamDelta::Stop(StopInfo {
            reason: StopReason::ContentFiltered,
            raw: Some("refusal".into()),
            refusal: Some(refusal),
        });
        let events = run(&mut writer, vec![StreamDelta::Text("Sure, ".into()), stop]);
        let delta = &events.iter().find(|(name, _)| name == "message_delta").unwrap().1["delta"];
        assert_eq!(delta["stop_reason"], "refusal");
        assert_eq!(delta["stop_details"], json!({"type": "refusal", "category": "cyber", "explanation": null}));
    }

    #[test]
    fn a_failure_is_an_error_event_and_nothing_follows() {
        let mut writer = writer(&[]);
        let mut events = writer.delta(StreamDelta::Text("Hi".into()));
        let failure = WeirError::MidStream {
            model: "chat".into(),
            deltas: 1,
            bytes: 2,
            source: Box::new(WeirError::Transport {
                model: "chat".into(),
                provider: "openai".into(),
                source: crate::transport::TransportError::Timeout,
            }),
        };
        events.extend(writer.error(&failure));
        let events = parse(&events);
        assert_eq!(names(&events), ["message_start", "content_block_start", "content_block_delta", "error"]);
        let error = &events[3].1;
        assert_eq!(error["error"]["type"], "timeout_error");
        assert!(error["error"]["message"].as_str().unwrap().contains("after 1 deltas"), "{error}");
    }
}
