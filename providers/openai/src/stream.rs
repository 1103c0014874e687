//! The SSE stream decoder: `chat.completion.chunk` events → normalized deltas.
//!
//! OpenAI sends only `data:` events and ends with `data: [DONE]`. Compatible
//! servers add error frames the host also hands us as events: llama.cpp's
//! `error:` lines arrive named `error`, and a top-level `error` key marks an error
//! in any chunk. A stream that ends without a `finish_reason` or `[DONE]` was cut,
//! and saying so is the decoder's job, not the host's guess.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::Value;
use weir_sdk::StreamDecoder;
use weir_sdk::errors::{ErrorFields, refusal};
use weir_sdk::types::{CodecError, StopInfo, StreamDelta, StreamEvent, ToolCallFragment, ToolCallStart};

use crate::errors::{in_band_error, is_error_object};
use crate::plain::{Object, PlainBody, PlainMessage, PlainToolCall, nonempty};
use crate::response::{stop_reason, usage};

/// Per-stream state: what was already announced, which tool calls are open, and
/// how the stream ended.
#[derive(Debug, Default)]
pub struct OpenAiStream {
    served_model_sent: bool,
    request_id_sent: bool,
    /// Calls started and not yet ended, in start order.
    open_calls: Vec<OpenCall>,
    /// `delta.refusal` pieces so far.
    refusal: String,
    finish_seen: bool,
    done_seen: bool,
    error_seen: bool,
}

#[derive(Debug)]
struct OpenCall {
    index: u32,
    /// Whether any argument text was sent; if none, `{}` is sent at the end so a
    /// call without arguments still carries a JSON object, as in `decode`.
    has_arguments: bool,
}

impl StreamDecoder for OpenAiStream {
    /// Every key decodes the same way: leniency costs OpenAI nothing.
    fn new(_provider: &str) -> Self {
        Self::default()
    }

    fn feed(&mut self, event: StreamEvent) -> Result<Vec<StreamDelta>, CodecError> {
        if event.name.as_deref() == Some("error") {
            return Ok(vec![self.error(ErrorFields::parse(&event.data))]);
        }
        let data = event.data.trim_ascii();
        if data.is_empty() {
            return Ok(Vec::new());
        }
        if data == b"[DONE]" {
            self.done_seen = true;
            return Ok(Vec::new());
        }
        match PlainChunk::parse(data) {
            Some(plain) => self.plain_chunk(plain),
            None => self.tree_chunk(data),
        }
    }

    /// A stream with neither `finish_reason` nor `[DONE]` (nor an error frame that
    /// explains it) was truncated. One with `[DONE]` but no `finish_reason` still
    /// gets its open calls closed and a stop, so the host sees a complete stream.
    fn finish(&mut self) -> Result<Vec<StreamDelta>, CodecError> {
        if self.finish_seen || self.error_seen {
            return Ok(Vec::new());
        }
        if self.done_seen {
            let mut out = Vec::new();
            self.stop(None, &mut out);
            return Ok(out);
        }
        Err(CodecError::Malformed("stream ended before finish_reason".to_owned()))
    }
}

impl OpenAiStream {
    /// Any chunk, read as a [`Value`] tree.
    fn tree_chunk(&mut self, data: &[u8]) -> Result<Vec<StreamDelta>, CodecError> {
        let chunk: Value = serde_json::from_slice(data)
            .map_err(|e| CodecError::Malformed(format!("stream event is not JSON: {e}")))?;
        if is_error_object(&chunk) {
            return Ok(vec![self.error(ErrorFields::from_value(&chunk))]);
        }
        self.chunk(&chunk)
    }

    fn error(&mut self, fields: ErrorFields) -> StreamDelta {
        self.error_seen = true;
        StreamDelta::Error(in_band_error(&fields))
    }

    /// One chunk: identity, then choice 0's delta and finish, then usage (which
    /// OpenAI sends in its own chunk after the finish).
    fn chunk(&mut self, chunk: &Value) -> Result<Vec<StreamDelta>, CodecError> {
        let mut out = Vec::new();
        self.identity(chunk, &mut out);
        if let Some(choice) = first_choice(chunk) {
            if let Some(delta) = choice.get("delta") {
                self.delta(delta, &mut out)?;
            }
            // Some servers repeat the finish on a trailing chunk; one stop is enough.
            if let Some(raw) = choice.get("finish_reason").and_then(Value::as_str)
                && !self.finish_seen
            {
                self.stop(Some(raw), &mut out);
            }
        }
        if let Some(usage) = chunk.get("usage").and_then(usage) {
            out.push(StreamDelta::Usage(usage));
        }
        Ok(out)
    }

    /// A [`PlainChunk`]: what [`Self::chunk`] makes of the same chunk, without
    /// its tree.
    fn plain_chunk(&mut self, chunk: PlainChunk<'_>) -> Result<Vec<StreamDelta>, CodecError> {
        let mut out = Vec::new();
        self.announce(chunk.model.as_deref(), chunk.id.as_deref(), &mut out);
        let first = chunk.choices.iter().flatten().find(|choice| choice.index.unwrap_or(0) == 0);
        if let Some(choice) = first {
            if let Some(delta) = &choice.delta {
                let reasoning = nonempty(delta.reasoning_content.as_deref()).or(delta.reasoning.as_deref());
                self.words(reasoning, delta.content.as_deref(), delta.refusal.as_deref(), &mut out);
                for (position, call) in delta.tool_calls.iter().flatten().enumerate() {
                    self.tool_call(position, CallPiece::plain(call), &mut out)?;
                }
            }
            if let Some(raw) = &choice.finish_reason
                && !self.finish_seen
            {
                self.stop(Some(raw), &mut out);
            }
        }
        if let Some(usage) = &chunk.usage {
            out.push(StreamDelta::Usage(usage.usage()));
        }
        Ok(out)
    }

    fn identity(&mut self, chunk: &Value, out: &mut Vec<StreamDelta>) {
        let field = |key| chunk.get(key).and_then(Value::as_str);
        self.announce(field("model"), field("id"), out);
    }

    /// Every chunk repeats `model` and `id`; the host needs them once (an empty
    /// one says nothing).
    fn announce(&mut self, model: Option<&str>, id: Option<&str>, out: &mut Vec<StreamDelta>) {
        if !self.served_model_sent
            && let Some(model) = nonempty(model)
        {
            self.served_model_sent = true;
            out.push(StreamDelta::ServedModel(model.to_owned()));
        }
        if !self.request_id_sent
            && let Some(id) = nonempty(id)
        {
            self.request_id_sent = true;
            out.push(StreamDelta::RequestId(id.to_owned()));
        }
    }

    /// A delta's reasoning, text and refusal piece (an empty one says nothing).
    fn words(
        &mut self,
        reasoning: Option<&str>,
        content: Option<&str>,
        refusal: Option<&str>,
        out: &mut Vec<StreamDelta>,
    ) {
        if let Some(reasoning) = nonempty(reasoning) {
            out.push(StreamDelta::Thinking(reasoning.to_owned()));
        }
        if let Some(content) = nonempty(content) {
            out.push(StreamDelta::Text(content.to_owned()));
        }
        if let Some(piece) = refusal {
            self.refusal.push_str(piece);
        }
    }

    fn delta(&mut self, delta: &Value, out: &mut Vec<StreamDelta>) -> Result<(), CodecError> {
        let field = |key| delta.get(key).and_then(Value::as_str);
        let reasoning = nonempty(field("reasoning_content")).or(field("reasoning"));
        self.words(reasoning, field("content"), field("refusal"), out);
        let calls = delta.get("tool_calls").and_then(Value::as_array);
        for (position, call) in calls.into_iter().flatten().enumerate() {
            self.tool_call(position, CallPiece::tree(call), out)?;
        }
        Ok(())
    }

    /// One `tool_calls[]` item. The first fragment of a call carries its `id` and
    /// name; later ones only `index` and more argument text. A server that repeats
    /// the id on every fragment is handled, since an open index is never restarted.
    fn tool_call(
        &mut self,
        position: usize,
        call: CallPiece<'_>,
        out: &mut Vec<StreamDelta>,
    ) -> Result<(), CodecError> {
        let index = call.index.and_then(|index| u32::try_from(index).ok()).unwrap_or(position as u32);
        if !self.is_open(index) {
            self.start_call(index, &call, out)?;
        }
        if !call.arguments.is_empty() {
            self.mark_arguments(index);
            out.push(StreamDelta::ToolCallFragment(ToolCallFragment { index, json: call.arguments.into_owned() }));
        }
        Ok(())
    }

    /// Starts a call. A first fragment without an id but with a name gets an id
    /// made from its index (as `decode` does); one with neither cannot be used.
    fn start_call(&mut self, index: u32, call: &CallPiece<'_>, out: &mut Vec<StreamDelta>) -> Result<(), CodecError> {
        let id = match (call.id, call.name) {
            (Some(id), _) => id.to_owned(),
            (None, Some(_)) => format!("call_{index}"),
            (None, None) => {
                return Err(CodecError::Malformed(format!(
                    "tool call {index} fragment arrived before its id and name"
                )));
            }
        };
        self.open_calls.push(OpenCall { index, has_arguments: false });
        let name = call.name.unwrap_or_default().to_owned();
        out.push(StreamDelta::ToolCallStart(ToolCallStart { index, id, name }));
        Ok(())
    }

    fn is_open(&self, index: u32) -> bool {
        self.open_calls.iter().any(|call| call.index == index)
    }

    fn mark_arguments(&mut self, index: u32) {
        for call in self.open_calls.iter_mut().filter(|call| call.index == index) {
            call.has_arguments = true;
        }
    }

    /// Closes every open call, then reports the stop. A refusal seen in the deltas
    /// makes it content-filtered, whatever the raw reason says.
    fn stop(&mut self, raw: Option<&str>, out: &mut Vec<StreamDelta>) {
        let had_calls = !self.open_calls.is_empty();
        for call in self.open_calls.drain(..) {
            if !call.has_arguments {
                out.push(StreamDelta::ToolCallFragment(ToolCallFragment { index: call.index, json: "{}".to_owned() }));
            }
            out.push(StreamDelta::ToolCallEnd(call.index));
        }
        let refusal = (!self.refusal.is_empty()).then(|| refusal(None, Some(std::mem::take(&mut self.refusal))));
        let reason = stop_reason(refusal.as_ref(), raw, had_calls);
        out.push(StreamDelta::Stop(StopInfo { reason, raw: raw.map(str::to_owned), refusal }));
        self.finish_seen = true;
    }
}

/// The chunk nearly every event is: choice 0's text, reasoning, refusal or
/// tool-call fragments whose arguments are text, its finish, usage, the chunk's
/// `id` and `model`. Read into borrowed fields, not a [`Value`] tree: building
/// the tree's maps and strings was most of the component's work per event (the
/// host's SSE framing plus this decoder went from 4.6 to 2.6 µs per event in
/// `host/benches/stream_latency.rs`, same run, when the tree was left for the
/// rest). Anything else — an error, a field of a type this does not expect, a
/// key twice — is left to the tree ([`PlainChunk::parse`] answers `None`), so
/// both paths say the same of every chunk (a property test holds them to it).
type PlainChunk<'a> = PlainBody<'a, PlainChoice<'a>>;

#[derive(Debug, Deserialize)]
struct PlainChoice<'a> {
    #[serde(default)]
    index: Option<u64>,
    #[serde(borrow, default)]
    delta: Option<Object<PlainMessage<'a>>>,
    #[serde(borrow, default)]
    finish_reason: Option<Cow<'a, str>>,
}

/// One tool-call fragment, from either reading.
struct CallPiece<'a> {
    index: Option<u64>,
    /// Non-empty, like the name.
    id: Option<&'a str>,
    name: Option<&'a str>,
    /// Empty when the fragment carries none.
    arguments: Cow<'a, str>,
}

impl<'a> CallPiece<'a> {
    fn plain(call: &'a PlainToolCall<'a>) -> Self {
        CallPiece {
            index: call.index,
            id: nonempty(call.id.as_deref()),
            name: call.name(),
            arguments: Cow::Borrowed(call.arguments().unwrap_or_default()),
        }
    }

    fn tree(call: &'a Value) -> Self {
        let function = call.get("function").unwrap_or(&Value::Null);
        let field = |value: &'a Value, key| nonempty(value.get(key).and_then(Value::as_str));
        CallPiece {
            index: call.get("index").and_then(Value::as_u64),
            id: field(call, "id"),
            name: field(function, "name"),
            arguments: fragment_text(function.get("arguments")),
        }
    }
}

/// The chunk's choice 0. With `n > 1` a chunk may carry another choice first, so
/// the `index` field decides; a choice without one counts as 0.
fn first_choice(chunk: &Value) -> Option<&Value> {
    chunk
        .get("choices")?
        .as_array()?
        .iter()
        .find(|choice| choice.get("index").and_then(Value::as_u64).unwrap_or(0) == 0)
}

/// An arguments fragment: normally a string; Ollama-style servers may send the
/// whole arguments object at once.
fn fragment_text(value: Option<&Value>) -> Cow<'_, str> {
    match value {
        Some(Value::String(text)) => Cow::Borrowed(text),
        None | Some(Value::Null) => Cow::Borrowed(""),
        Some(other) => Cow::Owned(other.to_string()),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::panic)] // a failing test should stop loudly
mod tests {
    use weir_sdk::types::StopReason;

    use super::*;
    use weir_sdk::types::{ErrorClass, Refusal, Usage};

    fn data(payload: &str) -> StreamEvent {
        StreamEvent { name: None, headers: vec![], data: payload.as_bytes().to_vec() }
    }

    fn feed_all(decoder: &mut OpenAiStream, lines: &[&str]) -> Vec<StreamDelta> {
        lines.iter().flat_map(|line| decoder.feed(data(line)).unwrap()).collect()
    }

    fn decoder() -> OpenAiStream {
        OpenAiStream::new("openai")
    }

    #[test]
    fn text_chunks_usage_and_done() {
        let mut decoder = decoder();
        let deltas = feed_all(
            &mut decoder,
            &[
                r#"{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4.1","choices":[{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}],"usage":null}"#,
                r#"{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4.1","choices":[{"index":0,"delta":{"content":"Hel"},"logprobs":null,"finish_reason":null}],"usage":null}"#,
                r#"{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4.1","choices":[{"index":0,"delta":{"content":"lo"},"logprobs":null,"finish_reason":null}],"usage":null,"obfuscation":"x1"}"#,
                r#"{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4.1","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}],"usage":null}"#,
                r#"{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4.1","choices":[],"usage":{"prompt_tokens":9,"completion_tokens":2,"total_tokens":11,"prompt_tokens_details":{"cached_tokens":0},"completion_tokens_details":{"reasoning_tokens":0}}}"#,
                "[DONE]",
            ],
        );
        assert_eq!(
            deltas,
            vec![
                StreamDelta::ServedModel("gpt-4.1".into()),
                StreamDelta::RequestId("chatcmpl-1".into()),
                StreamDelta::Text("Hel".into()),
                StreamDelta::Text("lo".into()),
                StreamDelta::Stop(StopInfo { reason: StopReason::EndTurn, raw: Some("stop".into()), refusal: None }),
                StreamDelta::Usage(Usage { input: 9, output: 2, cache_read: 0, cache_write: 0, reasoning: Some(0) }),
            ]
        );
        assert_eq!(decoder.finish().unwrap(), vec![]);
    }

    #[test]
    fn two_parallel_tool_calls() {
        let mut decoder = decoder();
        let head = r#""id":"chatcmpl-2","object":"chat.completion.chunk","created":1,"model":"gpt-4.1""#;
        let lines = [
            format!(
                r#"{{{head},"choices":[{{"index":0,"delta":{{"role":"assistant","content":null,"tool_calls":[{{"index":0,"id":"call_abc","type":"function","function":{{"name":"get_weather","arguments":""}}}}]}},"finish_reason":null}}]}}"#
            ),
            format!(
                r#"{{{head},"choices":[{{"index":0,"delta":{{"tool_calls":[{{"index":0,"function":{{"arguments":"{{\"city\":"}}}}]}},"finish_reason":null}}]}}"#
            ),
            format!(
                r#"{{{head},"choices":[{{"index":0,"delta":{{"tool_calls":[{{"index":1,"id":"call_def","type":"function","function":{{"name":"get_time","arguments":"{{\"tz\":"}}}}]}},"finish_reason":null}}]}}"#
            ),
            format!(
                r#"{{{head},"choices":[{{"index":0,"delta":{{"tool_calls":[{{"index":0,"function":{{"arguments":"\"Paris\"}}"}}}}]}},"finish_reason":null}}]}}"#
            ),
            format!(
                r#"{{{head},"choices":[{{"index":0,"delta":{{"tool_calls":[{{"index":1,"function":{{"arguments":"\"CET\"}}"}}}}]}},"finish_reason":null}}]}}"#
            ),
            format!(r#"{{{head},"choices":[{{"index":0,"delta":{{}},"finish_reason":"tool_calls"}}]}}"#),
            "[DONE]".to_owned(),
        ];
        let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
        let deltas = feed_all(&mut decoder, &lines);
        let fragment = |index, json: &str| StreamDelta::ToolCallFragment(ToolCallFragment { index, json: json.into() });
        assert_eq!(
            deltas,
            vec![
                StreamDelta::ServedModel("gpt-4.1".into()),
                StreamDelta::RequestId("chatcmpl-2".into()),
                StreamDelta::ToolCallStart(ToolCallStart {
                    index: 0,
                    id: "call_abc".into(),
                    name: "get_weather".into()
                }),
                fragment(0, r#"{"city":"#),
                StreamDelta::ToolCallStart(ToolCallStart { index: 1, id: "call_def".into(), name: "get_time".into() }),
                fragment(1, r#"{"tz":"#),
                fragment(0, r#""Paris"}"#),
                fragment(1, r#""CET"}"#),
                StreamDelta::ToolCallEnd(0),
                StreamDelta::ToolCallEnd(1),
                StreamDelta::Stop(StopInfo {
                    reason: StopReason::ToolUse,
                    raw: Some("tool_calls".into()),
                    refusal: None
                }),
            ]
        );
        assert_eq!(decoder.finish().unwrap(), vec![]);
    }

    #[test]
    fn ollama_whole_call_forced_stop_and_empty_arguments() {
        let mut decoder = decoder();
        let deltas = feed_all(
            &mut decoder,
            &[
                r#"{"id":"chatcmpl-9","object":"chat.completion.chunk","model":"llama3.1:8b","choices":[{"index":0,"delta":{"role":"assistant","content":"","tool_calls":[{"id":"call_x","index":0,"function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}},{"id":"call_y","index":1,"function":{"name":"list_cities","arguments":""}}]},"finish_reason":null}]}"#,
                r#"{"id":"chatcmpl-9","object":"chat.completion.chunk","model":"llama3.1:8b","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":"stop"}]}"#,
            ],
        );
        assert_eq!(
            &deltas[2..],
            &[
                StreamDelta::ToolCallStart(ToolCallStart { index: 0, id: "call_x".into(), name: "get_weather".into() }),
                StreamDelta::ToolCallFragment(ToolCallFragment { index: 0, json: r#"{"city":"Paris"}"#.into() }),
                StreamDelta::ToolCallStart(ToolCallStart { index: 1, id: "call_y".into(), name: "list_cities".into() }),
                StreamDelta::ToolCallEnd(0),
                StreamDelta::ToolCallFragment(ToolCallFragment { index: 1, json: "{}".into() }),
                StreamDelta::ToolCallEnd(1),
                StreamDelta::Stop(StopInfo { reason: StopReason::ToolUse, raw: Some("stop".into()), refusal: None }),
            ]
        );
        // Finished without [DONE]: fine.
        assert_eq!(decoder.finish().unwrap(), vec![]);
    }

    #[test]
    fn fragment_before_start_is_malformed() {
        let mut decoder = decoder();
        let result = decoder.feed(data(
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{}"}}]}}]}"#,
        ));
        assert!(matches!(result, Err(CodecError::Malformed(_))));
    }

    #[test]
    fn reasoning_and_refusal() {
        let mut decoder = decoder();
        let deltas = feed_all(
            &mut decoder,
            &[
                r#"{"id":"c","model":"deepseek-r1","choices":[{"index":0,"delta":{"reasoning_content":"Think"},"finish_reason":null}]}"#,
                r#"{"id":"c","model":"deepseek-r1","choices":[{"index":0,"delta":{"reasoning":"ing.","content":null},"finish_reason":null}]}"#,
                r#"{"id":"c","model":"deepseek-r1","choices":[{"index":0,"delta":{"refusal":"I can't "},"finish_reason":null}]}"#,
                r#"{"id":"c","model":"deepseek-r1","choices":[{"index":0,"delta":{"refusal":"help with that."},"finish_reason":"stop"}]}"#,
            ],
        );
        assert_eq!(
            &deltas[2..],
            &[
                StreamDelta::Thinking("Think".into()),
                StreamDelta::Thinking("ing.".into()),
                StreamDelta::Stop(StopInfo {
                    reason: StopReason::ContentFiltered,
                    raw: Some("stop".into()),
                    refusal: Some(Refusal { category: None, explanation: Some("I can't help with that.".into()) }),
                }),
            ]
        );
    }

    #[test]
    fn finish_reason_and_content_in_one_chunk() {
        let mut decoder = decoder();
        let deltas = feed_all(
            &mut decoder,
            &[
                r#"{"id":"c","model":"m","choices":[{"index":0,"delta":{"content":"end"},"finish_reason":"length"}],"usage":{"prompt_tokens":5,"completion_tokens":7,"total_tokens":12}}"#,
            ],
        );
        assert_eq!(
            &deltas[2..],
            &[
                StreamDelta::Text("end".into()),
                StreamDelta::Stop(StopInfo {
                    reason: StopReason::MaxTokens,
                    raw: Some("length".into()),
                    refusal: None
                }),
                StreamDelta::Usage(Usage { input: 5, output: 7, cache_read: 0, cache_write: 0, reasoning: None }),
            ]
        );
    }

    #[test]
    fn a_repeated_finish_reason_stops_once() {
        let mut decoder = decoder();
        let deltas = feed_all(
            &mut decoder,
            &[
                r#"{"choices":[{"index":0,"delta":{"content":"x"},"finish_reason":"stop"}]}"#,
                r#"{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1}}"#,
            ],
        );
        let stops = deltas.iter().filter(|d| matches!(d, StreamDelta::Stop(_))).count();
        assert_eq!(stops, 1);
        assert!(matches!(deltas.last(), Some(StreamDelta::Usage(_))));
    }

    /// Azure's stream: a first chunk with no choices carrying the prompt's
    /// filter results (and empty `id` / `model`), `content_filter_results` on
    /// every choice, and a stop its output filter made.
    #[test]
    fn azure_filter_results_are_read_past_and_a_filtered_stop_is_content_filtered() {
        let mut decoder = decoder();
        let filters = r#"{"hate":{"filtered":false,"severity":"safe"},"self_harm":{"filtered":false,"severity":"safe"},"sexual":{"filtered":false,"severity":"safe"},"violence":{"filtered":false,"severity":"safe"}}"#;
        let prompt = format!(
            r#"{{"choices":[],"created":0,"id":"","model":"","object":"","prompt_filter_results":[{{"prompt_index":0,"content_filter_results":{filters}}}]}}"#
        );
        let head = r#""created":1733000000,"id":"chatcmpl-AZ1","model":"gpt-4o-2024-11-20","object":"chat.completion.chunk","system_fingerprint":"fp_1""#;
        let role = format!(
            r#"{{"choices":[{{"content_filter_results":{{}},"delta":{{"content":"","refusal":null,"role":"assistant"}},"finish_reason":null,"index":0,"logprobs":null}}],{head}}}"#
        );
        let words = format!(
            r#"{{"choices":[{{"content_filter_results":{filters},"delta":{{"content":"Once"}},"finish_reason":null,"index":0,"logprobs":null}}],{head}}}"#
        );
        let filtered = format!(
            r#"{{"choices":[{{"content_filter_results":{{"violence":{{"filtered":true,"severity":"medium"}}}},"delta":{{}},"finish_reason":"content_filter","index":0,"logprobs":null}}],{head}}}"#
        );
        let deltas = feed_all(&mut decoder, &[&prompt, &role, &words, &filtered, "[DONE]"]);
        assert_eq!(
            deltas,
            vec![
                StreamDelta::ServedModel("gpt-4o-2024-11-20".into()),
                StreamDelta::RequestId("chatcmpl-AZ1".into()),
                StreamDelta::Text("Once".into()),
                StreamDelta::Stop(StopInfo {
                    reason: StopReason::ContentFiltered,
                    raw: Some("content_filter".into()),
                    refusal: None
                }),
            ]
        );
        assert_eq!(decoder.finish().unwrap(), vec![]);
    }

    #[test]
    fn other_choices_are_ignored() {
        let mut decoder = decoder();
        let deltas = feed_all(
            &mut decoder,
            &[r#"{"choices":[{"index":1,"delta":{"content":"B"}},{"index":0,"delta":{"content":"A"}}]}"#],
        );
        assert_eq!(deltas, vec![StreamDelta::Text("A".into())]);
    }

    fn single_error(decoder: &mut OpenAiStream, event: StreamEvent) -> weir_sdk::types::InBandError {
        match decoder.feed(event).unwrap().as_slice() {
            [StreamDelta::Error(error)] => error.clone(),
            other => panic!("expected one error, got {other:?}"),
        }
    }

    #[test]
    fn in_band_error_with_structured_status() {
        let mut decoder = decoder();
        let error = single_error(
            &mut decoder,
            data(r#"{"error":{"message":"Too many requests","type":"RateLimitError","param":null,"code":429}}"#),
        );
        assert_eq!((error.status, error.status_from_prose), (Some(429), false));
        assert!(matches!(error.class, ErrorClass::RateLimited(_)));
        feed_all(&mut decoder, &["[DONE]"]);
        assert_eq!(decoder.finish().unwrap(), vec![]);
    }

    #[test]
    fn in_band_error_with_status_in_prose() {
        let mut decoder = decoder();
        let error = single_error(
            &mut decoder,
            data(
                r#"{"error":{"message":"upstream error: 503 Service Unavailable","type":"api_error","param":null,"code":null}}"#,
            ),
        );
        assert_eq!((error.status, error.status_from_prose), (Some(503), true));
        assert!(matches!(error.class, ErrorClass::Transient(_)));
        // Ollama sends no [DONE] after an error; the error explains the end.
        assert_eq!(decoder.finish().unwrap(), vec![]);
    }

    #[test]
    fn in_band_error_without_status() {
        let mut decoder = decoder();
        let error = single_error(
            &mut decoder,
            data(
                r#"{"error": {"message": "The server had an error while processing your request. Sorry about that!", "type": "server_error"}}"#,
            ),
        );
        assert_eq!((error.status, error.status_from_prose), (None, false));
        assert!(matches!(error.class, ErrorClass::Transient(_)));
    }

    #[test]
    fn llama_cpp_error_line_is_an_error_event() {
        let mut decoder = decoder();
        let event = StreamEvent {
            name: Some("error".into()),
            headers: vec![],
            data: br#"{"code":400,"message":"the request exceeds the available context size, try increasing it","type":"exceed_context_size_error"}"#.to_vec(),
        };
        let error = single_error(&mut decoder, event);
        assert_eq!((error.status, error.status_from_prose), (Some(400), false));
        assert!(matches!(error.class, ErrorClass::ContextOverflow(_)));
        let text = StreamEvent { name: Some("error".into()), headers: vec![], data: b"backend crashed".to_vec() };
        assert!(matches!(single_error(&mut decoder, text).class, ErrorClass::Transient(_)));
    }

    #[test]
    fn truncated_stream_fails_at_finish() {
        let mut decoder = decoder();
        feed_all(
            &mut decoder,
            &[r#"{"id":"c","model":"gpt-4.1","choices":[{"index":0,"delta":{"content":"Hel"},"finish_reason":null}]}"#],
        );
        match decoder.finish() {
            Err(CodecError::Malformed(message)) => assert!(message.contains("finish_reason")),
            other => panic!("{other:?}"),
        }
        assert!(matches!(OpenAiStream::new("openai").finish(), Err(CodecError::Malformed(_))));
    }

    #[test]
    fn done_without_finish_reason_closes_calls() {
        let mut decoder = decoder();
        feed_all(
            &mut decoder,
            &[
                r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","function":{"name":"f","arguments":"{}"}}]}}]}"#,
                "[DONE]",
            ],
        );
        assert_eq!(
            decoder.finish().unwrap(),
            vec![
                StreamDelta::ToolCallEnd(0),
                StreamDelta::Stop(StopInfo { reason: StopReason::Other, raw: None, refusal: None }),
            ]
        );
    }

    #[test]
    fn malformed_json_and_blank_events() {
        let mut decoder = decoder();
        assert!(matches!(decoder.feed(data("{\"choices\":[")), Err(CodecError::Malformed(_))));
        assert_eq!(decoder.feed(data("  ")).unwrap(), vec![]);
    }

    mod plain_and_tree {
        //! Whatever a chunk holds, the plain reading and the tree say the same of it.
        use proptest::prelude::*;
        use serde_json::{Value, json};

        use super::*;
        use crate::plain::strategies::{body, field, fragment_name, message, object, plain_share};

        fn choice() -> impl Strategy<Value = Value> {
            let index = field(vec![json!(0), json!(1), Value::Null], vec![json!("0"), json!(-1)]);
            let finish = field(vec![Value::Null, json!("stop"), json!("length"), json!("tool_calls")], vec![json!(5)]);
            let delta = prop_oneof![
                8 => message(fragment_name()),
                1 => Just(Value::Null),
                1 => Just(json!("text")),
                1 => Just(json!(["Hel", null, null, "no"])),
            ];
            (index, proptest::option::of(delta), finish, field(vec![Value::Null], vec![json!({"content": []})]))
                .prop_map(|(index, delta, finish_reason, logprobs)| {
                    object(vec![
                        ("index", index),
                        ("delta", delta),
                        ("finish_reason", finish_reason),
                        ("logprobs", logprobs),
                    ])
                })
        }

        fn chunk() -> impl Strategy<Value = Value> {
            let choice = prop_oneof![12 => choice(), 1 => Just(json!([0, {"content": "Hel"}, "stop"]))];
            let choices = prop_oneof![
                8 => proptest::collection::vec(choice, 0..3).prop_map(Value::Array),
                1 => Just(Value::Null),
                1 => Just(json!({})),
            ];
            body("chat.completion.chunk", json!({"message": "slow down", "code": 429}), proptest::option::of(choices))
        }

        proptest! {
            // Many cases: a difference may need a rare mix (a tool call's empty
            // id in a chunk with no odd field), and each case takes microseconds.
            #![proptest_config(ProptestConfig::with_cases(4096))]

            #[test]
            fn a_stream_decodes_the_same_either_way(chunks in proptest::collection::vec(chunk(), 1..6)) {
                let (mut either, mut tree) = (decoder(), decoder());
                for chunk in &chunks {
                    let payload = chunk.to_string();
                    let by_feed = either.feed(data(&payload));
                    let by_tree = tree.tree_chunk(payload.as_bytes());
                    prop_assert_eq!(by_feed, by_tree, "chunk {}", payload);
                }
                prop_assert_eq!(either.finish(), tree.finish());
            }
        }

        /// The property above means something only if many generated chunks take
        /// the plain reading and many the tree.
        #[test]
        fn the_generated_chunks_take_both_readings() {
            let plain = plain_share(chunk(), |chunk| PlainChunk::parse(chunk).is_some());
            assert!((250..=750).contains(&plain), "{plain} of 1000 generated chunks are plain");
        }

        #[test]
        fn a_plain_chunk_is_read_without_the_tree() {
            for plain in [
                r#"{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"Hel"},"logprobs":null,"finish_reason":null}],"usage":null}"#,
                r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"f","arguments":""}}]}}]}"#,
                r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"a\""}}]}}]}"#,
                r#"{"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":2,"prompt_tokens_details":{"cached_tokens":0}}}"#,
            ] {
                assert!(PlainChunk::parse(plain.as_bytes()).is_some(), "{plain}");
            }
            for left_to_the_tree in [
                r#"{"error":{"message":"x"}}"#,
                r#"{"object":"error","message":"x"}"#,
                r#"{"model":"a","model":"b"}"#,
                r#"{"choices":[{"index":"0"}]}"#,
                r#"{"choices":[{"index":0,"delta":["Hel"]}]}"#,
                r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":{"a":1}}}]}}]}"#,
                r#"{"choices":[],"usage":[1,2]}"#,
                r#"["c","m"]"#,
            ] {
                assert!(PlainChunk::parse(left_to_the_tree.as_bytes()).is_none(), "{left_to_the_tree}");
            }
        }
    }
}
