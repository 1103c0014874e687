//! Normalized stream deltas → the Responses API's typed SSE events, each
//! `event: <type>` with a `data:` object carrying `type` and a monotonic
//! `sequence_number`:
//!
//! `response.created`, `response.in_progress`, then per output item
//! `response.output_item.added`, its own events, `response.output_item.done`:
//! - text: `response.content_part.added`, `response.output_text.delta`…,
//!   `response.output_text.done`, `response.content_part.done`;
//! - reasoning: `response.reasoning_summary_part.added`,
//!   `response.reasoning_summary_text.delta`…, `.done`,
//!   `response.reasoning_summary_part.done`; the item is sealed when it closes
//!   (its `encrypted_content` is only in `output_item.done`);
//! - function call: `response.function_call_arguments.delta`…, `.done`;
//!   custom tool call: `response.custom_tool_call_input.delta` (once, whole:
//!   the input is a string inside the provider's JSON arguments) and `.done`;
//!
//! then `response.completed` (or `response.incomplete`) with the whole response
//! and its usage. A failure after the stream began is `response.failed` with
//! Weir's category and safe message, and nothing after it.
//!
//! One item is open at a time; a new one starts when the kind of delta
//! changes, a tool call starts, or thinking continues after its signature.
//!
//! An answer with OpenAI's own items (a hosted tool's call, a message with
//! annotations; see [`Events::replaying`]) was taken whole: its deltas are a
//! replay, so the writer reads only their usage and stop, and writes every
//! item at the end in the provider's order, each with its events — a hosted
//! tool's typed progress (`response.web_search_call.in_progress`,
//! `.searching`, `.completed`, and the like for file search, code interpreter,
//! image generation and MCP), a message's text (and one
//! `response.output_text.annotation.added` per annotation), a call's
//! arguments.
//!
//! A live stream with OpenAI's own pieces (a call that carried hosted tools,
//! see `call::streaming`) writes them in place with the same writers: each
//! hosted item whole (`whole_item`: its added, typed progress and done events),
//! a text start closing the open item (so two messages stay apart), and each
//! citation as `response.output_text.annotation.added` on the open message,
//! whose done item then carries its annotations.

use std::sync::Arc;

use serde::Serialize;
use serde_json::{Value, json};

use super::response::{Answer, Item, message_item, open_reasoning_item, output_of, own_items, refusal_item, status};
use super::tools::ToolKind;
use crate::chat::{NativeBlocks, Stamp};
use crate::error::WeirError;
use crate::server::sse::{EventWriter, named_event};
use crate::types::{NativeDelta, StopInfo, StreamDelta, Thinking, ToolCallFragment, ToolCallStart, Usage};

/// The item being written.
#[derive(Debug)]
enum Open {
    Message { index: usize, id: String, text: String, annotations: Vec<Value> },
    Reasoning { index: usize, id: String, text: String, signature: Option<String>, summary_open: bool },
    Call { index: usize, id: String, stream_index: u32, call_id: String, name: String, arguments: String },
}

/// One event's data: its `type` and `sequence_number`, then its own fields,
/// written as they are (no map is built).
#[derive(Serialize)]
struct Event<'a, D> {
    #[serde(rename = "type")]
    kind: &'a str,
    sequence_number: u64,
    #[serde(flatten)]
    data: D,
}

/// The data of an event about a place in an item, and what it says there:
/// each event kind sets the fields the Responses API gives it.
#[derive(Default, Serialize)]
struct At<'a> {
    item_id: &'a str,
    output_index: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    content_index: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    summary_index: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    delta: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    text: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    part: Option<Part<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    arguments: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    name: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    input: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    logprobs: Option<[(); 0]>,
}

impl<'a> At<'a> {
    fn item(item_id: &'a str, output_index: usize) -> Self {
        Self { item_id, output_index, ..Self::default() }
    }

    /// The text part of a message.
    fn content(item_id: &'a str, output_index: usize) -> Self {
        Self { content_index: Some(0), ..Self::item(item_id, output_index) }
    }

    /// The summary part of a reasoning item.
    fn summary(item_id: &'a str, output_index: usize) -> Self {
        Self { summary_index: Some(0), ..Self::item(item_id, output_index) }
    }
}

/// A content part as the `content_part.*` and `reasoning_summary_part.*` events carry it.
#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Part<'a> {
    OutputText { text: &'a str, annotations: [(); 0], logprobs: [(); 0] },
    SummaryText { text: &'a str },
}

impl<'a> Part<'a> {
    fn output_text(text: &'a str) -> Self {
        Self::OutputText { text, annotations: [], logprobs: [] }
    }
}

/// `output_item.added` and `.done`.
#[derive(Serialize)]
struct ItemEvent<'a> {
    output_index: usize,
    item: &'a Item,
}

/// The events that carry the whole response.
#[derive(Serialize)]
struct ResponseEvent<R> {
    response: R,
}

/// One stream's events.
pub struct Events {
    answer: Answer,
    sequence: u64,
    started: bool,
    open: Option<Open>,
    /// Finished items, in order: the final response's `output`.
    output: Vec<Item>,
    usage: Option<Usage>,
    stop: Option<StopInfo>,
    /// Handed the final response once `response.completed` (or
    /// `.incomplete`) is written: how the route stores it.
    on_end: Option<OnEnd>,
    /// The answer's own items, when it has them: written whole at the end.
    own: Option<Arc<NativeBlocks>>,
}

impl std::fmt::Debug for Events {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Events").field("sequence", &self.sequence).field("open", &self.open).finish_non_exhaustive()
    }
}

/// What [`Events::on_end`] runs.
type OnEnd = Box<dyn FnOnce(Value) + Send>;

impl Events {
    pub fn new(answer: Answer) -> Self {
        Self {
            answer,
            sequence: 0,
            started: false,
            open: None,
            output: Vec::new(),
            usage: None,
            stop: None,
            on_end: None,
            own: None,
        }
    }

    /// Writes `stamp`'s answer from its own copy when it carries OpenAI's own
    /// items (see the module's comment); otherwise changes nothing.
    pub fn replaying(mut self, stamp: &Stamp) -> Self {
        self.own = stamp.native_answer.clone().filter(|own| own_items(Some(own)).is_some());
        self
    }

    /// One whole item at `index`, with the events the Responses API streams
    /// for its kind between `output_item.added` and `output_item.done`. A
    /// replay's items are read as JSON, since most of them are OpenAI's own.
    fn whole_item(&mut self, events: &mut Vec<String>, index: usize, item: Item) {
        let item = match item {
            Item::Own(item) => item,
            typed => match serde_json::to_value(&typed) {
                Ok(item) => item,
                Err(error) => {
                    tracing::error!(%error, "an output item did not serialize; left out");
                    return;
                }
            },
        };
        let kind = item.get("type").and_then(Value::as_str).unwrap_or_default().to_owned();
        let id = item.get("id").cloned().unwrap_or(Value::Null);
        let at = json!({"item_id": id, "output_index": index});
        let mut added = item.clone();
        match kind.as_str() {
            "message" => {
                added["status"] = json!("in_progress");
                added["content"] = json!([]);
            }
            "function_call" => added["arguments"] = json!(""),
            "custom_tool_call" => added["input"] = json!(""),
            _ if added.get("status").is_some() => added["status"] = json!("in_progress"),
            _ => {}
        }
        self.added(events, index, &Item::Own(added));
        match kind.as_str() {
            "message" => self.whole_message(events, &at, &item),
            "function_call" => {
                let arguments = item.get("arguments").cloned().unwrap_or_else(|| json!(""));
                self.with(events, "response.function_call_arguments.delta", &at, "delta", arguments.clone());
                self.with(events, "response.function_call_arguments.done", &at, "arguments", arguments);
            }
            "custom_tool_call" => {
                let input = item.get("input").cloned().unwrap_or_else(|| json!(""));
                self.with(events, "response.custom_tool_call_input.delta", &at, "delta", input.clone());
                self.with(events, "response.custom_tool_call_input.done", &at, "input", input);
            }
            hosted => {
                for stage in progress(hosted) {
                    self.event(events, &format!("response.{hosted}.{stage}"), &at);
                }
            }
        }
        self.done(events, index, Item::Own(item));
    }

    /// `at` with `key: value`, as the event `kind`.
    fn with(&mut self, events: &mut Vec<String>, kind: &str, at: &Value, key: &str, value: Value) {
        let mut data = at.clone();
        data[key] = value;
        self.event(events, kind, &data);
    }

    /// A message's parts: each text with its delta, its annotations, its done.
    fn whole_message(&mut self, events: &mut Vec<String>, at: &Value, item: &Value) {
        let parts = item.get("content").and_then(Value::as_array).cloned().unwrap_or_default();
        for (content_index, part) in parts.into_iter().enumerate() {
            let mut at = at.clone();
            at["content_index"] = json!(content_index);
            let text = part.get("text").cloned().unwrap_or_else(|| json!(""));
            let mut empty = part.clone();
            if empty.get("text").is_some() {
                empty["text"] = json!("");
            }
            if empty.get("annotations").is_some() {
                empty["annotations"] = json!([]);
            }
            self.with(events, "response.content_part.added", &at, "part", empty);
            self.with(events, "response.output_text.delta", &at, "delta", text.clone());
            let annotations = part.get("annotations").and_then(Value::as_array).cloned().unwrap_or_default();
            for (annotation_index, annotation) in annotations.into_iter().enumerate() {
                let mut data = at.clone();
                data["annotation_index"] = json!(annotation_index);
                data["annotation"] = annotation;
                self.event(events, "response.output_text.annotation.added", &data);
            }
            let mut done = at.clone();
            done["text"] = text;
            done["logprobs"] = json!([]);
            self.event(events, "response.output_text.done", &done);
            self.with(events, "response.content_part.done", &at, "part", part);
        }
    }

    /// Runs `then` with the final response of a stream that completes (not
    /// of one that fails).
    pub fn on_end(mut self, then: impl FnOnce(Value) + Send + 'static) -> Self {
        self.on_end = Some(Box::new(then));
        self
    }

    /// One event: `data` after `type` and the next `sequence_number`.
    fn event(&mut self, events: &mut Vec<String>, kind: &str, data: impl Serialize) {
        write_event(events, &mut self.sequence, kind, data);
    }

    /// `response.created` and `response.in_progress`, once, before anything else.
    fn start(&mut self, events: &mut Vec<String>) {
        if self.started {
            return;
        }
        self.started = true;
        for kind in ["response.created", "response.in_progress"] {
            let response = self.answer.response("in_progress", &[], None, None);
            write_event(events, &mut self.sequence, kind, ResponseEvent { response });
        }
    }

    /// The next item's place and id, after closing the open one.
    fn next_item(&mut self, events: &mut Vec<String>, prefix: &str) -> (usize, String) {
        self.start(events);
        self.close(events);
        let index = self.output.len();
        (index, self.answer.item_id(prefix, index))
    }

    fn added(&mut self, events: &mut Vec<String>, output_index: usize, item: &Item) {
        self.event(events, "response.output_item.added", ItemEvent { output_index, item });
    }

    fn done(&mut self, events: &mut Vec<String>, output_index: usize, item: Item) {
        self.event(events, "response.output_item.done", ItemEvent { output_index, item: &item });
        self.output.push(item);
    }

    /// Closes the open item, if any, with its closing events.
    fn close(&mut self, events: &mut Vec<String>) {
        match self.open.take() {
            None => {}
            Some(Open::Message { index, id, text, annotations }) => {
                let at = At::content(&id, index);
                let text_done = At { text: Some(&text), logprobs: Some([]), ..at };
                self.event(events, "response.output_text.done", text_done);
                let part_done = At { part: Some(Part::output_text(&text)), ..At::content(&id, index) };
                self.event(events, "response.content_part.done", part_done);
                self.done(events, index, annotated(message_item(&id, &text, true), annotations));
            }
            Some(Open::Reasoning { index, id, text, signature, summary_open }) => {
                if summary_open {
                    let text_done = At { text: Some(&text), ..At::summary(&id, index) };
                    self.event(events, "response.reasoning_summary_text.done", text_done);
                    let part_done = At { part: Some(Part::SummaryText { text: &text }), ..At::summary(&id, index) };
                    self.event(events, "response.reasoning_summary_part.done", part_done);
                }
                let block = Thinking { text, signature, redacted: false };
                let item = self.answer.reasoning_item(&id, std::slice::from_ref(&block));
                self.done(events, index, item);
            }
            Some(Open::Call { index, id, call_id, name, arguments, .. }) => {
                let item = self.answer.call_item(&id, &call_id, &name, &arguments, true);
                match &item {
                    Item::CustomToolCall { input, .. } => {
                        let delta = At { delta: Some(input), ..At::item(&id, index) };
                        self.event(events, "response.custom_tool_call_input.delta", delta);
                        let done = At { input: Some(input), ..At::item(&id, index) };
                        self.event(events, "response.custom_tool_call_input.done", done);
                    }
                    Item::FunctionCall { call, .. } => {
                        let done = At { arguments: Some(&arguments), name: Some(&call.name), ..At::item(&id, index) };
                        self.event(events, "response.function_call_arguments.done", done);
                    }
                    Item::Message { .. } | Item::Reasoning { .. } | Item::Own(_) => {}
                }
                self.done(events, index, item);
            }
        }
    }

    fn text(&mut self, delta: String) -> Vec<String> {
        let mut events = Vec::new();
        if !matches!(self.open, Some(Open::Message { .. })) {
            if delta.is_empty() {
                return events;
            }
            let (index, id) = self.next_item(&mut events, "msg");
            self.added(&mut events, index, &message_item(&id, "", false));
            let part = At { part: Some(Part::output_text("")), ..At::content(&id, index) };
            self.event(&mut events, "response.content_part.added", part);
            self.open = Some(Open::Message { index, id, text: String::new(), annotations: Vec::new() });
        }
        // The open item and the sequence are borrowed apart: no copy of the id per delta.
        if let Some(Open::Message { index, id, text, .. }) = &mut self.open {
            text.push_str(&delta);
            let data = At { delta: Some(&delta), logprobs: Some([]), ..At::content(id, *index) };
            write_event(&mut events, &mut self.sequence, "response.output_text.delta", data);
        }
        events
    }

    /// Opens a reasoning item (no summary part yet).
    fn open_reasoning(&mut self, events: &mut Vec<String>) {
        let (index, id) = self.next_item(events, "rs");
        self.added(events, index, &open_reasoning_item(&id));
        self.open = Some(Open::Reasoning { index, id, text: String::new(), signature: None, summary_open: false });
    }

    fn thinking(&mut self, delta: String) -> Vec<String> {
        let mut events = Vec::new();
        let continues = matches!(&self.open, Some(Open::Reasoning { signature: None, .. }));
        if !continues {
            if delta.is_empty() {
                return events;
            }
            self.open_reasoning(&mut events);
        }
        let Some(Open::Reasoning { index, id, text, summary_open, .. }) = &mut self.open else { return events };
        text.push_str(&delta);
        if !*summary_open {
            *summary_open = true;
            let part = At { part: Some(Part::SummaryText { text: "" }), ..At::summary(id, *index) };
            write_event(&mut events, &mut self.sequence, "response.reasoning_summary_part.added", part);
        }
        let data = At { delta: Some(&delta), ..At::summary(id, *index) };
        write_event(&mut events, &mut self.sequence, "response.reasoning_summary_text.delta", data);
        events
    }

    fn signature(&mut self, signature: String) -> Vec<String> {
        let mut events = Vec::new();
        if !matches!(&self.open, Some(Open::Reasoning { signature: None, .. })) {
            self.open_reasoning(&mut events);
        }
        if let Some(Open::Reasoning { signature: slot, .. }) = &mut self.open {
            *slot = Some(signature);
        }
        events
    }

    fn tool_start(&mut self, start: ToolCallStart) -> Vec<String> {
        let mut events = Vec::new();
        let (index, id) = self.next_item(&mut events, "fc");
        let item = self.answer.call_item(&id, &start.id, &start.name, "", false);
        self.added(&mut events, index, &item);
        self.open = Some(Open::Call {
            index,
            id,
            stream_index: start.index,
            call_id: start.id,
            name: start.name,
            arguments: String::new(),
        });
        events
    }

    /// Arguments go to the open call they name; a custom tool's are held for its end.
    fn tool_fragment(&mut self, fragment: ToolCallFragment) -> Vec<String> {
        let mut events = Vec::new();
        let Some(Open::Call { index, id, stream_index, name, arguments, .. }) = &mut self.open else {
            tracing::warn!(call = fragment.index, "tool-call arguments without an open call; dropped");
            return events;
        };
        if *stream_index != fragment.index {
            tracing::warn!(call = fragment.index, "tool-call arguments for a call already closed; dropped");
            return events;
        }
        arguments.push_str(&fragment.json);
        let custom = self.answer.names.origin(name).is_some_and(|origin| origin.kind == ToolKind::Custom);
        if !custom {
            let data = At { delta: Some(&fragment.json), ..At::item(id, *index) };
            write_event(&mut events, &mut self.sequence, "response.function_call_arguments.delta", data);
        }
        events
    }

    /// A citation (an annotation) of the open message's text, in its place.
    fn annotation(&mut self, annotation: Value) -> Vec<String> {
        let mut events = Vec::new();
        let Some(Open::Message { index, id, annotations, .. }) = &mut self.open else {
            tracing::warn!("an annotation without an open message; dropped");
            return events;
        };
        let data = json!({
            "item_id": id, "output_index": index, "content_index": 0,
            "annotation_index": annotations.len(), "annotation": annotation,
        });
        annotations.push(annotation);
        write_event(&mut events, &mut self.sequence, "response.output_text.annotation.added", data);
        events
    }

    fn tool_end(&mut self, call: u32) -> Vec<String> {
        let mut events = Vec::new();
        if matches!(&self.open, Some(Open::Call { stream_index, .. }) if *stream_index == call) {
            self.close(&mut events);
        }
        events
    }
}

impl EventWriter for Events {
    fn delta(&mut self, delta: StreamDelta) -> Vec<String> {
        if self.own.is_some() {
            match delta {
                StreamDelta::Usage(usage) => self.usage = Some(usage),
                StreamDelta::Stop(stop) => self.stop = Some(stop),
                _ => {}
            }
            return Vec::new();
        }
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
                self.start(&mut events);
                self.close(&mut events);
                self.stop = Some(stop);
                events
            }
            StreamDelta::ServedModel(_) | StreamDelta::RequestId(_) | StreamDelta::Error(_) => Vec::new(),
        }
    }

    /// The open item's end, then `response.completed` (or `.incomplete`) with
    /// the whole response.
    fn own(&mut self, piece: NativeDelta) -> Vec<String> {
        // Each own piece was checked a JSON object as it left the component.
        let parsed = |json: &str| serde_json::from_str::<Value>(json).ok();
        match piece {
            NativeDelta::Neutral(delta) => self.delta(delta),
            NativeDelta::Block(json) => {
                let Some(item) = parsed(&json) else { return Vec::new() };
                let mut events = Vec::new();
                let (index, _) = self.next_item(&mut events, "own");
                self.whole_item(&mut events, index, Item::Own(item));
                events
            }
            NativeDelta::TextStart(_) => {
                let mut events = Vec::new();
                self.start(&mut events);
                self.close(&mut events);
                events
            }
            NativeDelta::Citation(json) => parsed(&json).map(|note| self.annotation(note)).unwrap_or_default(),
            NativeDelta::Usage(_) => Vec::new(),
        }
    }

    fn end(&mut self) -> Vec<String> {
        let mut events = Vec::new();
        self.start(&mut events);
        self.close(&mut events);
        // A replayed answer's refusal is written with its items.
        let replayed = self.own.is_some();
        if let Some(own) = self.own.take() {
            let refusal = self.stop.as_ref().and_then(|stop| stop.refusal.as_ref());
            let items = output_of(&own.content, Some(&own), refusal, &self.answer);
            for (index, item) in items.into_iter().enumerate() {
                self.whole_item(&mut events, index, item);
            }
        }
        let stop = self.stop.as_ref().map(|stop| stop.reason);
        let status = status(stop);
        if let Some(refusal) = self.stop.as_ref().and_then(|stop| stop.refusal.as_ref()).filter(|_| !replayed) {
            let id = self.answer.item_id("msg", self.output.len());
            self.output.push(refusal_item(&id, refusal));
        }
        let response = self.answer.response(status, &self.output, self.usage.as_ref(), stop);
        if let Some(then) = self.on_end.take() {
            then(response.to_value());
        }
        let kind = if status == "completed" { "response.completed" } else { "response.incomplete" };
        write_event(&mut events, &mut self.sequence, kind, ResponseEvent { response });
        events
    }

    /// `response.failed` with Weir's category and safe message; nothing after it.
    fn error(&mut self, error: &WeirError) -> Vec<String> {
        let mut events = Vec::new();
        self.start(&mut events);
        let message = error.safe_message();
        let response = self.answer.failed(&self.output, self.usage.as_ref(), error.category().as_str(), &message);
        write_event(&mut events, &mut self.sequence, "response.failed", ResponseEvent { response });
        events
    }
}

/// Writes one event: `data` after `type` and the next `sequence_number`.
fn write_event(events: &mut Vec<String>, sequence: &mut u64, kind: &str, data: impl Serialize) {
    events.push(named_event(kind, &Event { kind, sequence_number: *sequence, data }));
    *sequence += 1;
}

/// The progress events a hosted tool's item streams between its
/// `output_item.added` and `.done`, as the Responses API names them
/// (`response.<type>.<stage>`); none for a type without any.
/// A finished message with the annotations its live stream carried, if any.
fn annotated(item: Item, annotations: Vec<Value>) -> Item {
    if annotations.is_empty() {
        return item;
    }
    match serde_json::to_value(&item) {
        Ok(mut value) => {
            value["content"][0]["annotations"] = Value::Array(annotations);
            Item::Own(value)
        }
        Err(error) => {
            tracing::error!(%error, "a message item did not serialize; written without its annotations");
            item
        }
    }
}

fn progress(kind: &str) -> &'static [&'static str] {
    match kind {
        "web_search_call" | "file_search_call" => &["in_progress", "searching", "completed"],
        "code_interpreter_call" => &["in_progress", "interpreting", "completed"],
        "image_generation_call" => &["in_progress", "generating", "completed"],
        "mcp_call" | "mcp_list_tools" => &["in_progress", "completed"],
        _ => &[],
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::seal::ReasoningSeal;
    use crate::server::responses::response::tests::answer;
    use crate::types::StopReason;

    fn parse(events: &[String]) -> Vec<(String, Value)> {
        events
            .iter()
            .map(|event| {
                let (head, data) = event.trim_end().split_once('\n').unwrap();
                let name = head.strip_prefix("event: ").unwrap().to_owned();
                let data: Value = serde_json::from_str(data.strip_prefix("data: ").unwrap()).unwrap();
                assert_eq!(data["type"], name.as_str());
                (name, data)
            })
            .collect()
    }

    /// A namespaced function's call in two fragments, then a custom tool's call.
    fn two_calls() -> Vec<StreamDelta> {
        vec![
            StreamDelta::ToolCallStart(ToolCallStart { index: 0, id: "t1".into(), name: "crm__lookup".into() }),
            StreamDelta::ToolCallFragment(ToolCallFragment { index: 0, json: "{\"q\":".into() }),
            StreamDelta::ToolCallFragment(ToolCallFragment { index: 0, json: "1}".into() }),
            StreamDelta::ToolCallEnd(0),
            StreamDelta::ToolCallStart(ToolCallStart { index: 1, id: "t2".into(), name: "apply_patch".into() }),
            StreamDelta::ToolCallFragment(ToolCallFragment { index: 1, json: "{\"input\":\"diff\"}".into() }),
            StreamDelta::ToolCallEnd(1),
        ]
    }

    fn run(writer: &mut Events, deltas: Vec<StreamDelta>) -> Vec<(String, Value)> {
        let mut events: Vec<String> = deltas.into_iter().flat_map(|delta| writer.delta(delta)).collect();
        events.extend(writer.end());
        parse(&events)
    }

    /// A live stream's own pieces: the hosted item whole with its typed progress, in
    /// place; a text start keeping two messages apart; an annotation on the open message,
    /// carried by its done item.
    #[test]
    fn own_pieces_are_written_in_place() {
        let seal = ReasoningSeal::random().unwrap();
        let mut writer = Events::new(answer(&seal));
        let text = |text: &str| NativeDelta::Neutral(StreamDelta::Text(text.into()));
        let pieces = vec![
            text("Searching."),
            NativeDelta::Block(r#"{"type":"web_search_call","id":"ws_1","status":"completed"}"#.into()),
            NativeDelta::TextStart(r#"{"type":"message"}"#.into()),
            text("Weir."),
            NativeDelta::Citation(r#"{"type":"url_citation","url":"u"}"#.into()),
            NativeDelta::TextStart(r#"{"type":"message"}"#.into()),
            text("More."),
            NativeDelta::Neutral(StreamDelta::Stop(StopInfo { reason: StopReason::EndTurn, raw: None, refusal: None })),
        ];
        let mut events: Vec<String> = pieces.into_iter().flat_map(|piece| writer.own(piece)).collect();
        events.extend(writer.end());
        let events = parse(&events);
        let done: Vec<&Value> = events
            .iter()
            .filter(|(name, _)| name == "response.output_item.done")
            .map(|(_, data)| &data["item"])
            .collect();
        assert_eq!(done.len(), 4, "{events:?}");
        assert_eq!(done[1]["id"], "ws_1", "the hosted item whole, in its place");
        assert_eq!(done[2]["content"][0]["annotations"], json!([{"type": "url_citation", "url": "u"}]));
        assert_eq!(done[3]["content"][0]["text"], "More.", "a message of its own");
        let names: Vec<&str> = events.iter().map(|(name, _)| name.as_str()).collect();
        assert!(names.contains(&"response.web_search_call.searching"), "{names:?}");
        assert!(names.contains(&"response.output_text.annotation.added"), "{names:?}");
    }

    #[test]
    fn thinking_text_and_calls_stream_as_typed_items_in_order() {
        let seal = ReasoningSeal::random().unwrap();
        let mut writer = Events::new(answer(&seal));
        let events = run(
            &mut writer,
            vec![
                StreamDelta::Thinking("Hmm".into()),
                StreamDelta::Thinking(", yes.".into()),
                StreamDelta::ThinkingSignature("sig".into()),
                StreamDelta::Text("Hi".into()),
                StreamDelta::Text(" there".into()),
            ]
            .into_iter()
            .chain(two_calls())
            .chain([
                StreamDelta::Usage(Usage { input: 3, output: 4, cache_read: 0, cache_write: 0, reasoning: None }),
                StreamDelta::Stop(StopInfo { reason: StopReason::ToolUse, raw: None, refusal: None }),
            ])
            .collect(),
        );
        let names: Vec<&str> = events.iter().map(|(name, _)| name.as_str()).collect();
        assert_eq!(
            names,
            [
                "response.created",
                "response.in_progress",
                "response.output_item.added",
                "response.reasoning_summary_part.added",
                "response.reasoning_summary_text.delta",
                "response.reasoning_summary_text.delta",
                "response.reasoning_summary_text.done",
                "response.reasoning_summary_part.done",
                "response.output_item.done",
                "response.output_item.added",
                "response.content_part.added",
                "response.output_text.delta",
                "response.output_text.delta",
                "response.output_text.done",
                "response.content_part.done",
                "response.output_item.done",
                "response.output_item.added",
                "response.function_call_arguments.delta",
                "response.function_call_arguments.delta",
                "response.function_call_arguments.done",
                "response.output_item.done",
                "response.output_item.added",
                "response.custom_tool_call_input.delta",
                "response.custom_tool_call_input.done",
                "response.output_item.done",
                "response.completed",
            ]
        );
        let sequence: Vec<u64> = events.iter().map(|(_, data)| data["sequence_number"].as_u64().unwrap()).collect();
        assert_eq!(sequence, (0..events.len() as u64).collect::<Vec<_>>());
        let reasoning = &events[8].1["item"];
        let blocks = seal.open("claude", reasoning["encrypted_content"].as_str().unwrap()).unwrap();
        assert_eq!(blocks, vec![Thinking { text: "Hmm, yes.".into(), signature: Some("sig".into()), redacted: false }]);
        assert_eq!(events[13].1["text"], "Hi there");
        assert_eq!(
            (events[13].1["output_index"].as_u64(), events[13].1["item_id"].clone()),
            (Some(1), events[11].1["item_id"].clone())
        );
        let call = &events[20].1["item"];
        assert_eq!(
            (&call["name"], &call["namespace"], &call["arguments"]),
            (&json!("lookup"), &json!("crm"), &json!("{\"q\":1}"))
        );
        assert_eq!(events[24].1["item"]["input"], "diff");
        let completed = &events[25].1["response"];
        assert_eq!(completed["status"], "completed");
        assert_eq!(completed["output"].as_array().unwrap().len(), 4);
        assert_eq!(completed["usage"]["total_tokens"], 7);
    }

    /// What a recording keeps of an event: everything but the time and the
    /// sealed bytes (random each run; opened in the tests above).
    fn recorded(mut value: Value) -> Value {
        match &mut value {
            Value::Object(map) => {
                for (key, field) in map.iter_mut() {
                    match key.as_str() {
                        "created_at" => *field = json!(0),
                        "encrypted_content" if field.is_string() => *field = json!("<sealed>"),
                        _ => *field = recorded(field.take()),
                    }
                }
            }
            Value::Array(items) => items.iter_mut().for_each(|item| *item = recorded(item.take())),
            _ => {}
        }
        value
    }

    /// Every kind of stream the writer knows (reasoning, text, a namespaced
    /// call, a custom call, a refusal, a failure, a replayed answer with
    /// OpenAI's own items) and a whole answer, each event as its data.
    fn every_rendering() -> Value {
        use crate::chat::{ChatResponse, NativeBlocks};
        use crate::server::responses::response::{output, response_body, tests::stamp};
        use crate::types::{AnswerBlock, ContentBlock, Refusal};
        let seal = ReasoningSeal::random().unwrap();
        let datas = |events: Vec<(String, Value)>| Value::Array(events.into_iter().map(|(_, data)| data).collect());
        let usage = Usage { input: 3, output: 4, cache_read: 1, cache_write: 0, reasoning: Some(2) };
        let mixed = run(
            &mut Events::new(answer(&seal)),
            vec![
                StreamDelta::Thinking("Hmm".into()),
                StreamDelta::ThinkingSignature("sig".into()),
                StreamDelta::Thinking("More".into()),
                StreamDelta::Text("Hi".into()),
                StreamDelta::Text(" there".into()),
            ]
            .into_iter()
            .chain(two_calls())
            .chain([
                StreamDelta::Usage(usage),
                StreamDelta::Stop(StopInfo { reason: StopReason::ToolUse, raw: None, refusal: None }),
            ])
            .collect(),
        );
        let refusal = crate::types::Refusal { category: None, explanation: Some("No.".into()) };
        let refused = run(
            &mut Events::new(answer(&seal)),
            vec![
                StreamDelta::Text("I".into()),
                StreamDelta::Stop(StopInfo { reason: StopReason::ContentFiltered, raw: None, refusal: Some(refusal) }),
            ],
        );
        let mut failing = Events::new(answer(&seal));
        let mut raw = failing.delta(StreamDelta::Text("Hi".into()));
        raw.extend(failing.delta(StreamDelta::Stop(StopInfo {
            reason: StopReason::EndTurn,
            raw: None,
            refusal: None,
        })));
        raw.extend(failing.error(&WeirError::DeadlineExceeded { model: "claude".into() }));
        let failed = parse(&raw);
        let search =
            r#"{"id":"ws_1","type":"web_search_call","status":"completed","action":{"type":"search","query":"q"}}"#;
        let noted = r#"{"id":"msg_9","type":"message","role":"assistant","status":"completed","content":[{"type":"output_text","text":"See [1].","annotations":[{"type":"url_citation","url":"https://example.com","start_index":4,"end_index":7}],"logprobs":[]}]}"#;
        let content = vec![ContentBlock::Text("Looking.".into()), ContentBlock::Text("See [1].".into())];
        let own = NativeBlocks {
            dialect: "openai-responses".into(),
            blocks: vec![
                AnswerBlock::Neutral(0),
                AnswerBlock::Native(search.into()),
                AnswerBlock::Native(noted.into()),
            ],
            content: content.clone(),
            usage: None,
        };
        let mut replay_stamp = stamp();
        replay_stamp.native_answer = Some(Arc::new(own));
        let replayed = run(
            &mut Events::new(answer(&seal)).replaying(&replay_stamp),
            vec![
                StreamDelta::Text("Looking.See [1].".into()),
                StreamDelta::Usage(usage),
                StreamDelta::Stop(StopInfo { reason: StopReason::EndTurn, raw: None, refusal: None }),
            ],
        );
        let whole = ChatResponse {
            content: vec![
                ContentBlock::Thinking(Thinking { text: "Hmm".into(), signature: Some("s".into()), redacted: false }),
                ContentBlock::Text("Hello".into()),
                ContentBlock::ToolUse(crate::types::ToolUse {
                    id: "t1".into(),
                    name: "crm__lookup".into(),
                    input_json: "{\"q\":1}".into(),
                }),
            ],
            stop_reason: StopReason::MaxTokens,
            raw_stop_reason: None,
            usage: Some(usage),
            refusal: Some(Refusal { category: None, explanation: None }),
            served_model: None,
            request_id: None,
            stamp: stamp(),
        };
        let answer = answer(&seal);
        let body = response_body(&whole, &answer, &output(&whole, &answer)).to_value();
        recorded(json!({
            "mixed": datas(mixed), "refused": datas(refused), "failed": datas(failed),
            "replayed": datas(replayed), "whole": body,
        }))
    }

    /// The events as recorded from the writer that built `serde_json::Value`
    /// maps (before the typed events): the same fields and values, whatever
    /// their order. `WEIR_BLESS=1` records them anew.
    #[test]
    fn every_rendering_matches_its_recording() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/src/server/responses/testdata/renderings.json");
        let now = every_rendering();
        if std::env::var_os("WEIR_BLESS").is_some() {
            std::fs::write(path, serde_json::to_string_pretty(&now).unwrap() + "\n").unwrap();
        }
        let recording: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        for kind in ["mixed", "refused", "failed", "replayed", "whole"] {
            assert_eq!(now[kind], recording[kind], "{kind}");
        }
    }

    #[test]
    fn a_cut_off_stream_is_incomplete_and_a_failure_is_response_failed() {
        let seal = ReasoningSeal::random().unwrap();
        let mut writer = Events::new(answer(&seal));
        let events = run(
            &mut writer,
            vec![
                StreamDelta::Text("Hi".into()),
                StreamDelta::Stop(StopInfo { reason: StopReason::MaxTokens, raw: None, refusal: None }),
            ],
        );
        let last = &events.last().unwrap().1;
        assert_eq!(last["type"], "response.incomplete");
        assert_eq!(last["response"]["incomplete_details"]["reason"], "max_output_tokens");

        let mut refused = Events::new(answer(&seal));
        let refusal = crate::types::Refusal { category: Some("cyber".into()), explanation: Some("No.".into()) };
        let stop = StopInfo { reason: StopReason::ContentFiltered, raw: None, refusal: Some(refusal) };
        let events = run(&mut refused, vec![StreamDelta::Stop(stop)]);
        let last = &events.last().unwrap().1;
        assert_eq!(last["type"], "response.incomplete");
        assert_eq!(last["response"]["incomplete_details"]["reason"], "content_filter");
        assert_eq!(last["response"]["output"][0]["content"][0], json!({"type": "refusal", "refusal": "No."}));

        let mut failing = Events::new(answer(&seal));
        let mut raw = failing.delta(StreamDelta::Text("Hi".into()));
        raw.extend(failing.error(&WeirError::DeadlineExceeded { model: "claude".into() }));
        let events = parse(&raw);
        let last = &events.last().unwrap().1;
        assert_eq!(last["type"], "response.failed");
        assert_eq!(last["response"]["status"], "failed");
        assert_eq!(last["response"]["error"]["code"], "timeout");
    }
}
