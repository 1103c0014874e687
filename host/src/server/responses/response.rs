//! The `response` object: the whole answer, and the items and shell the
//! stream's events carry. One [`Answer`] per call holds what every rendering
//! needs: the ids, the request's echo, the way back from tool names, and the
//! seal for reasoning.
//!
//! Output items in the order the content came: consecutive thinking blocks are
//! one `reasoning` item (the readable thinking as its summary, every block
//! sealed in `encrypted_content`), consecutive text one `message`, each tool
//! call a `function_call` or `custom_tool_call`.
//!
//! Everything here is a typed [`Serialize`] written straight to the wire: a
//! stream writes the response object three times (`response.created`,
//! `.in_progress`, `.completed`), and building `serde_json::Value` maps for it
//! cost more than the rest of the route (issue 46's benchmark). The request's
//! echoed settings are serialized once per call ([`Echo`]) and spliced in.

use std::time::{SystemTime, UNIX_EPOCH};

use serde::Serialize;
use serde::ser::{SerializeMap, Serializer};
use serde_json::Value;
use serde_json::value::RawValue;

use super::tools::{ToolKind, ToolNames, custom_input};
use crate::chat::{ChatResponse, NativeBlocks, Stamp};
use crate::seal::ReasoningSeal;
use crate::types::{AnswerBlock, ContentBlock, Refusal, StopReason, Thinking, Usage};

/// The response id of a call: `resp_` and the call id's hex digits, so the
/// ledger's record (and a stored response, later) can be found from it.
pub fn response_id(call_id: &str) -> String {
    format!("resp_{}", call_id.replace('-', ""))
}

/// The request's settings as the `response` object repeats them, each
/// serialized once when the request is mapped: a stream repeats them in three
/// events, and Codex's `tools` alone are kilobytes.
#[derive(Debug, Clone, Default)]
pub struct Echo {
    fields: Vec<(&'static str, Box<RawValue>)>,
    /// Whether the response is stored: the route's to say, once it has tried.
    pub store: bool,
}

impl Echo {
    /// Adds `key` with `value` as JSON. A value that cannot be serialized (a
    /// map with a non-string key, which no request field holds) is `null`.
    pub fn put(&mut self, key: &'static str, value: &impl Serialize) {
        let raw = serde_json::value::to_raw_value(value).unwrap_or_else(|_| RawValue::NULL.to_owned());
        self.fields.push((key, raw));
    }

    /// The field `key` as a `Value`, for tests.
    #[cfg(test)]
    pub fn get(&self, key: &str) -> Option<Value> {
        let (_, raw) = self.fields.iter().find(|(name, _)| *name == key)?;
        serde_json::from_str(raw.get()).ok()
    }
}

/// What every rendering of one call's answer needs.
#[derive(Debug, Clone)]
pub struct Answer {
    id: String,
    created_at: u64,
    /// The catalog entry that served the call: the reasoning seal's binding.
    entry: String,
    echo: Echo,
    pub(super) names: ToolNames,
    seal: ReasoningSeal,
}

impl Answer {
    pub fn new(stamp: &Stamp, echo: Echo, names: ToolNames, seal: ReasoningSeal) -> Self {
        let created_at = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |elapsed| elapsed.as_secs());
        Self { id: response_id(&stamp.call_id), created_at, entry: stamp.model.clone(), echo, names, seal }
    }

    /// An output item's id: its kind's prefix, the response's digits, its place.
    pub fn item_id(&self, prefix: &str, index: usize) -> String {
        format!("{prefix}_{}_{index}", self.id.trim_start_matches("resp_"))
    }

    /// The `response` object around `output`.
    pub fn response<'a>(
        &'a self,
        status: &'a str,
        output: &'a [Item],
        usage: Option<&'a Usage>,
        stop: Option<StopReason>,
    ) -> ResponseObject<'a> {
        ResponseObject { answer: self, status, output, usage, stop, error: None }
    }

    /// A failed response: what was produced so far, and the error.
    pub fn failed<'a>(
        &'a self,
        output: &'a [Item],
        usage: Option<&'a Usage>,
        code: &'a str,
        message: &'a str,
    ) -> ResponseObject<'a> {
        ResponseObject { error: Some(Failure { code, message }), ..self.response("failed", output, usage, None) }
    }

    /// A reasoning item: the readable thinking as one summary part, every
    /// block sealed. A seal that fails (the random source) leaves the item
    /// without `encrypted_content`, which the next turn then leaves out.
    pub fn reasoning_item(&self, id: &str, blocks: &[Thinking]) -> Item {
        let summary: String = blocks.iter().filter(|b| !b.redacted).map(|b| b.text.as_str()).collect();
        let summary = if summary.is_empty() { Vec::new() } else { vec![Summary::SummaryText { text: summary }] };
        let encrypted = match self.seal.seal(&self.entry, blocks) {
            Ok(sealed) => Some(sealed),
            Err(error) => {
                tracing::warn!(%error, "reasoning item sent without encrypted_content");
                None
            }
        };
        Item::Reasoning { id: id.to_owned(), summary, encrypted_content: Some(encrypted), status: "completed" }
    }

    /// A tool call as the caller's tool shapes it; `done` says whether its arguments are complete.
    pub fn call_item(&self, id: &str, call_id: &str, wire_name: &str, arguments: &str, done: bool) -> Item {
        let status = if done { "completed" } else { "in_progress" };
        let origin = self.names.origin(wire_name);
        let (name, namespace) = origin.map_or((wire_name, None), |o| (o.name.as_str(), o.namespace.as_deref()));
        let call = Call {
            id: id.to_owned(),
            call_id: call_id.to_owned(),
            name: name.to_owned(),
            status,
            namespace: namespace.map(str::to_owned),
        };
        match origin.map(|o| o.kind) {
            Some(ToolKind::Custom) => {
                Item::CustomToolCall { call, input: if done { custom_input(arguments) } else { String::new() } }
            }
            _ => Item::FunctionCall { call, arguments: if done { arguments.to_owned() } else { String::new() } },
        }
    }
}

/// One output item, as the Responses API writes it (`type` first).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Item {
    Message {
        id: String,
        role: &'static str,
        status: &'static str,
        content: Vec<Content>,
    },
    Reasoning {
        id: String,
        summary: Vec<Summary>,
        /// Absent while the item is open; `null` when sealing failed.
        #[serde(skip_serializing_if = "Option::is_none")]
        encrypted_content: Option<Option<String>>,
        status: &'static str,
    },
    FunctionCall {
        #[serde(flatten)]
        call: Call,
        arguments: String,
    },
    CustomToolCall {
        #[serde(flatten)]
        call: Call,
        input: String,
    },
    /// An item of OpenAI's own (a hosted tool's call, a message with
    /// annotations), as it came.
    #[serde(untagged)]
    Own(Value),
}

/// What a function call and a custom tool call share.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Call {
    id: String,
    call_id: String,
    /// The tool's own name (inside its namespace, when it has one).
    pub(super) name: String,
    status: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    namespace: Option<String>,
}

/// A part of an assistant message.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Content {
    OutputText { text: String, annotations: [(); 0], logprobs: [(); 0] },
    Refusal { refusal: String },
}

/// A part of a reasoning item's summary.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Summary {
    SummaryText { text: String },
}

/// An assistant message of one text part (none while it is open).
pub fn message_item(id: &str, text: &str, done: bool) -> Item {
    let (status, content) = match done {
        true => ("completed", vec![Content::OutputText { text: text.to_owned(), annotations: [], logprobs: [] }]),
        false => ("in_progress", Vec::new()),
    };
    Item::Message { id: id.to_owned(), role: "assistant", status, content }
}

/// An open reasoning item: no summary and no seal yet.
pub fn open_reasoning_item(id: &str) -> Item {
    Item::Reasoning { id: id.to_owned(), summary: Vec::new(), encrypted_content: None, status: "in_progress" }
}

/// An assistant message holding the model's refusal.
pub fn refusal_item(id: &str, refusal: &Refusal) -> Item {
    let text = refusal.explanation.as_deref().unwrap_or("The model refused to answer.");
    let content = vec![Content::Refusal { refusal: text.to_owned() }];
    Item::Message { id: id.to_owned(), role: "assistant", status: "completed", content }
}

/// The `response` object: the answer's fixed fields, its output and usage,
/// then the request's echo as serialized once (see [`Echo`]).
#[derive(Debug)]
pub struct ResponseObject<'a> {
    answer: &'a Answer,
    status: &'a str,
    output: &'a [Item],
    usage: Option<&'a Usage>,
    stop: Option<StopReason>,
    error: Option<Failure<'a>>,
}

impl ResponseObject<'_> {
    /// The object as a `Value`, for what keeps it (a stored response). A
    /// failure (which typed fields cannot cause) is `null`, which is not kept.
    pub fn to_value(&self) -> Value {
        serde_json::to_value(self).unwrap_or_else(|error| {
            tracing::error!(%error, "a response object did not serialize");
            Value::Null
        })
    }
}

impl Serialize for ResponseObject<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let answer = self.answer;
        let mut map = serializer.serialize_map(Some(10 + answer.echo.fields.len()))?;
        map.serialize_entry("id", &answer.id)?;
        map.serialize_entry("object", "response")?;
        map.serialize_entry("created_at", &answer.created_at)?;
        map.serialize_entry("status", self.status)?;
        map.serialize_entry("error", &self.error)?;
        map.serialize_entry("incomplete_details", &incomplete_reason(self.stop).map(|reason| Incomplete { reason }))?;
        map.serialize_entry("model", &answer.entry)?;
        map.serialize_entry("output", self.output)?;
        map.serialize_entry("usage", &self.usage.map(UsageBody::of))?;
        for (key, value) in &answer.echo.fields {
            map.serialize_entry(key, value)?;
        }
        map.serialize_entry("store", &answer.echo.store)?;
        map.end()
    }
}

/// A failed response's `error`: Weir's category and safe message.
#[derive(Debug, Serialize)]
struct Failure<'a> {
    code: &'a str,
    message: &'a str,
}

#[derive(Serialize)]
struct Incomplete {
    reason: &'static str,
}

/// `completed`, or `incomplete` when the answer was cut off or filtered.
pub fn status(stop: Option<StopReason>) -> &'static str {
    match incomplete_reason(stop) {
        Some(_) => "incomplete",
        None => "completed",
    }
}

fn incomplete_reason(stop: Option<StopReason>) -> Option<&'static str> {
    match stop? {
        StopReason::MaxTokens => Some("max_output_tokens"),
        StopReason::ContentFiltered => Some("content_filter"),
        StopReason::EndTurn
        | StopReason::StopSequence
        | StopReason::ToolUse
        | StopReason::Pause
        | StopReason::ContextWindowExceeded
        | StopReason::Other => None,
    }
}

/// Usage the Responses way: `input_tokens` is the whole prompt, cache reads
/// (and writes) broken out beside it; reasoning is a part of the output.
#[derive(Serialize)]
struct UsageBody {
    input_tokens: u64,
    input_tokens_details: InputDetails,
    output_tokens: u64,
    output_tokens_details: OutputDetails,
    total_tokens: u64,
}

#[derive(Serialize)]
struct InputDetails {
    cached_tokens: u64,
    cache_write_tokens: u64,
}

#[derive(Serialize)]
struct OutputDetails {
    reasoning_tokens: u64,
}

impl UsageBody {
    fn of(usage: &Usage) -> Self {
        let input = usage.total_input();
        Self {
            input_tokens: input,
            input_tokens_details: InputDetails {
                cached_tokens: usage.cache_read,
                cache_write_tokens: usage.cache_write,
            },
            output_tokens: usage.output,
            output_tokens_details: OutputDetails { reasoning_tokens: usage.reasoning.unwrap_or(0) },
            total_tokens: input + usage.output,
        }
    }
}

/// One piece of the answer's output: a neutral block, or an item of
/// OpenAI's own (a hosted tool's call, a message with annotations) as it came.
enum Piece<'a> {
    Neutral(&'a ContentBlock),
    Own(Value),
}

/// The answer's own items, when it was decoded with them in this dialect.
pub(super) fn own_items(own: Option<&NativeBlocks>) -> Option<&NativeBlocks> {
    own.filter(|own| own.dialect == super::request::DIALECT)
}

/// The answer's pieces in the provider's order: with its own items in place
/// when it was decoded with them (`native.decode-native`), else its blocks.
fn pieces<'a>(content: &'a [ContentBlock], own: Option<&NativeBlocks>) -> Vec<Piece<'a>> {
    let Some(own) = own_items(own) else { return content.iter().map(Piece::Neutral).collect() };
    own.blocks
        .iter()
        .filter_map(|block| match block {
            AnswerBlock::Neutral(index) => {
                usize::try_from(*index).ok().and_then(|index| content.get(index)).map(Piece::Neutral)
            }
            AnswerBlock::Native(json) => match serde_json::from_str::<Value>(json) {
                Ok(item @ Value::Object(_)) => Some(Piece::Own(item)),
                _ => {
                    tracing::warn!("a provider's own output item is not a JSON object; left out");
                    None
                }
            },
        })
        .collect()
}

/// The whole answer's output items (see [`output_of`]).
pub fn output(response: &ChatResponse, answer: &Answer) -> Vec<Item> {
    let own = response.stamp.native_answer.as_deref();
    output_of(&response.content, own, response.refusal.as_ref(), answer)
}

/// The whole answer as a `response` object around its [`output`]. OpenAI's
/// own items (see [`pieces`]) go in their places, as OpenAI wrote them.
pub fn response_body<'a>(response: &'a ChatResponse, answer: &'a Answer, output: &'a [Item]) -> ResponseObject<'a> {
    let stop = Some(response.stop_reason);
    answer.response(status(stop), output, response.usage.as_ref(), stop)
}

/// The output items of an answer's content (and its own items, when it has
/// them), then its refusal.
pub(super) fn output_of(
    content: &[ContentBlock],
    own: Option<&NativeBlocks>,
    refusal: Option<&Refusal>,
    answer: &Answer,
) -> Vec<Item> {
    let mut output = Vec::new();
    let mut thinking: Vec<Thinking> = Vec::new();
    let mut text = String::new();
    let flush = |output: &mut Vec<Item>, thinking: &mut Vec<Thinking>, text: &mut String| {
        if !thinking.is_empty() {
            let id = answer.item_id("rs", output.len());
            output.push(answer.reasoning_item(&id, thinking));
            thinking.clear();
        }
        if !text.is_empty() {
            let id = answer.item_id("msg", output.len());
            output.push(message_item(&id, text, true));
            text.clear();
        }
    };
    for piece in pieces(content, own) {
        let block = match piece {
            Piece::Neutral(block) => block,
            Piece::Own(item) => {
                flush(&mut output, &mut thinking, &mut text);
                output.push(Item::Own(item));
                continue;
            }
        };
        match block {
            ContentBlock::Thinking(block) => {
                if !text.is_empty() {
                    flush(&mut output, &mut thinking, &mut text);
                }
                thinking.push(block.clone());
            }
            ContentBlock::Text(more) => {
                if !thinking.is_empty() {
                    flush(&mut output, &mut thinking, &mut text);
                }
                text.push_str(more);
            }
            ContentBlock::ToolUse(call) => {
                flush(&mut output, &mut thinking, &mut text);
                let id = answer.item_id("fc", output.len());
                output.push(answer.call_item(&id, &call.id, &call.name, &call.input_json, true));
            }
            ContentBlock::Image(_) | ContentBlock::Document(_) | ContentBlock::ToolResult(_) => {}
        }
    }
    flush(&mut output, &mut thinking, &mut text);
    if let Some(refusal) = refusal {
        let id = answer.item_id("msg", output.len());
        output.push(refusal_item(&id, refusal));
    }
    output
}

#[cfg(test)]
pub(super) mod tests {
    #![allow(clippy::unwrap_used)]

    use std::time::Duration;

    use serde_json::json;

    use super::*;
    use crate::types::ToolUse;

    pub(crate) fn stamp() -> Stamp {
        Stamp {
            call_id: "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b".into(),
            model: "claude".into(),
            role: None,
            provider: Some("anthropic".into()),
            requested_max_tokens: Some(100),
            attempts: 1,
            latency: Duration::ZERO,
            ended_at: UNIX_EPOCH,
            cache_multipliers: None,
            native_dropped: crate::NativeDropped::default(),
            passed_over: Vec::new(),
            fallback_from: None,
            cache: None,
            native_answer: None,
        }
    }

    /// An answer to a request with every echoed setting set, as the route maps it.
    pub(crate) fn answer(seal: &ReasoningSeal) -> Answer {
        let body = json!({"model": "m", "input": "x", "instructions": "Be brief.",
            "tools": [{"type": "custom", "name": "apply_patch"},
                {"type": "namespace", "name": "crm", "description": "", "tools": [{"type": "function", "name": "lookup"}]},
                {"type": "function", "name": "f", "parameters": {"type": "object", "properties": {}}}],
            "tool_choice": "auto", "parallel_tool_calls": false,
            "text": {"format": {"type": "text"}, "verbosity": "low"}, "reasoning": {"effort": "low", "summary": "auto"},
            "max_output_tokens": 100, "metadata": {"a": "b"}, "prompt_cache_key": "k", "temperature": 0.5,
            "top_p": 0.25, "user": "u", "max_tool_calls": 3, "store": false});
        let body = super::super::request::Body::parse(body.to_string().as_bytes()).unwrap();
        let ingress = super::super::request::into_chat_request(body, None, crate::catalog::HostedTools::Drop).unwrap();
        Answer::new(&stamp(), ingress.echo, ingress.names, seal.clone())
    }

    #[test]
    fn the_answer_maps_to_items_usage_and_the_echo() {
        let seal = ReasoningSeal::random().unwrap();
        let thinking = Thinking { text: "Let me see.".into(), signature: Some("sig".into()), redacted: false };
        let redacted = Thinking { text: "EmwK".into(), signature: None, redacted: true };
        let response = ChatResponse {
            content: vec![
                ContentBlock::Thinking(thinking.clone()),
                ContentBlock::Thinking(redacted.clone()),
                ContentBlock::Text("Hello".into()),
                ContentBlock::Text(" there".into()),
                ContentBlock::ToolUse(ToolUse {
                    id: "t1".into(),
                    name: "crm__lookup".into(),
                    input_json: "{\"q\":1}".into(),
                }),
                ContentBlock::ToolUse(ToolUse {
                    id: "t2".into(),
                    name: "apply_patch".into(),
                    input_json: "{\"input\":\"diff\"}".into(),
                }),
            ],
            stop_reason: StopReason::ToolUse,
            raw_stop_reason: None,
            usage: Some(Usage { input: 10, output: 20, cache_read: 5, cache_write: 1, reasoning: Some(7) }),
            refusal: None,
            served_model: None,
            request_id: None,
            stamp: stamp(),
        };
        let answer = answer(&seal);
        let output = output(&response, &answer);
        let body = response_body(&response, &answer, &output).to_value();
        assert_eq!(body["id"], "resp_0190a1b2c3d47e5f8a9b0c1d2e3f4a5b");
        assert_eq!(body["object"], "response");
        assert_eq!(body["status"], "completed");
        assert_eq!(body["model"], "claude");
        assert_eq!(body["store"], false);
        assert_eq!(body["instructions"], "Be brief.");
        let output = body["output"].as_array().unwrap();
        assert_eq!(output.len(), 4);
        assert_eq!(output[0]["type"], "reasoning");
        assert_eq!(output[0]["summary"], json!([{"type": "summary_text", "text": "Let me see."}]));
        let sealed = output[0]["encrypted_content"].as_str().unwrap();
        assert_eq!(seal.open("claude", sealed).unwrap(), vec![thinking, redacted]);
        assert_eq!(output[1]["content"][0]["text"], "Hello there");
        assert_eq!(output[1]["content"][0]["annotations"], json!([]));
        assert_eq!(output[2]["type"], "function_call");
        assert_eq!(
            (&output[2]["name"], &output[2]["namespace"], &output[2]["call_id"]),
            (&json!("lookup"), &json!("crm"), &json!("t1"))
        );
        assert_eq!(output[3]["type"], "custom_tool_call");
        assert_eq!(output[3]["input"], "diff");
        assert_eq!(
            body["usage"],
            json!({"input_tokens": 16, "input_tokens_details": {"cached_tokens": 5, "cache_write_tokens": 1},
                   "output_tokens": 20, "output_tokens_details": {"reasoning_tokens": 7}, "total_tokens": 36})
        );
    }

    #[test]
    fn cut_off_and_filtered_answers_are_incomplete_and_a_refusal_is_a_refusal_part() {
        assert_eq!(
            (status(Some(StopReason::MaxTokens)), status(Some(StopReason::EndTurn))),
            ("incomplete", "completed")
        );
        assert_eq!(incomplete_reason(Some(StopReason::ContentFiltered)), Some("content_filter"));
        let refusal = refusal_item("msg_1", &Refusal { category: None, explanation: Some("No.".into()) });
        let refusal = serde_json::to_value(refusal).unwrap();
        assert_eq!(refusal["content"][0], json!({"type": "refusal", "refusal": "No."}));
    }
}
