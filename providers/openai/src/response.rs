//! Decoding a 2xx Chat Completions body. Lenient on purpose: compatible servers
//! add keys, drop keys and send `""` for `null`, and none of that should fail a call.
//! The stop-reason and usage mappings here are shared with the stream decoder.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::Value;
use weir_sdk::errors::{ErrorFields, refusal};
use weir_sdk::http::header;
use weir_sdk::json::from_body;
use weir_sdk::types::{
    ChatResponse, CodecError, ContentBlock, HttpResponse, Refusal, StopReason, Thinking, ToolUse, Usage,
};

use crate::errors::is_error_object;
use crate::plain::{Object, PlainBody, PlainMessage, PlainToolCall, PlainUsage, additive_usage, nonempty};

/// Normalizes a successful response. Only choice 0 is read: the host never asks
/// for more than one. The answer nearly every response is goes through
/// [`PlainCompletion`]; anything else, and every malformed body, through the tree.
pub fn decode(response: &HttpResponse) -> Result<ChatResponse, CodecError> {
    match PlainAnswer::parse(&response.body) {
        Some(plain) => Ok(plain.decode(response)),
        None => tree_decode(response),
    }
}

/// Any body, read as a [`Value`] tree.
fn tree_decode(response: &HttpResponse) -> Result<ChatResponse, CodecError> {
    let body: Value = from_body(&response.body)?;
    if is_error_object(&body) {
        let detail = ErrorFields::from_value(&body).detail(response.status);
        return Err(CodecError::Malformed(format!(
            "HTTP {} body is an error object, not a completion: {detail}",
            response.status
        )));
    }
    let choice = first_choice(&body)?;
    let message = choice
        .get("message")
        .filter(|message| message.is_object())
        .ok_or_else(|| CodecError::Malformed("choices[0] has no message object".to_owned()))?;
    let calls = tool_calls(message)?;
    let refusal = message_refusal(message);
    let raw_stop_reason = text(choice.get("finish_reason"));
    let reason = stop_reason(refusal.as_ref(), raw_stop_reason.as_deref(), !calls.is_empty());
    Ok(ChatResponse {
        content: content(message, calls),
        stop_reason: reason,
        raw_stop_reason,
        usage: body.get("usage").and_then(usage),
        refusal,
        served_model: text(body.get("model")),
        request_id: request_id(response, body.get("id").and_then(Value::as_str)),
    })
}

/// The upstream's request id: its `x-request-id` header, else the body's `id`.
fn request_id(response: &HttpResponse, body_id: Option<&str>) -> Option<String> {
    header(&response.headers, "x-request-id").filter(|id| !id.is_empty()).or(nonempty(body_id)).map(str::to_owned)
}

/// The completion nearly every answer is: choice 0's message with text,
/// reasoning, refusal or tool calls whose arguments are text, its finish, usage,
/// `id` and `model`, read into borrowed fields instead of a [`Value`] tree (see
/// [`crate::plain`]). Anything else (an error object, no choice or message, a
/// call without a name, content as parts, a field of another type, a key twice)
/// is left to the tree: [`PlainAnswer::parse`] answers `None`.
type PlainCompletion<'a> = PlainBody<'a, PlainChoice<'a>>;

#[derive(Debug, Deserialize)]
struct PlainChoice<'a> {
    #[serde(borrow, default)]
    message: Option<Object<PlainMessage<'a>>>,
    #[serde(borrow, default)]
    finish_reason: Option<Cow<'a, str>>,
}

/// A [`PlainCompletion`] whose choice 0 has a message.
struct PlainAnswer<'a> {
    id: Option<Cow<'a, str>>,
    model: Option<Cow<'a, str>>,
    usage: Option<Object<PlainUsage>>,
    message: PlainMessage<'a>,
    finish_reason: Option<Cow<'a, str>>,
}

impl<'a> PlainAnswer<'a> {
    /// The body's answer, when it is plain (see [`PlainCompletion`]); `None`
    /// leaves it to the tree.
    fn parse(body: &'a [u8]) -> Option<PlainAnswer<'a>> {
        let completion = PlainCompletion::parse(body)?;
        let choice = completion.choices?.into_iter().next()?.into_inner();
        let message = choice.message?.into_inner();
        if !message.tool_calls.iter().flatten().all(|call| call.name().is_some()) {
            return None;
        }
        Some(PlainAnswer {
            id: completion.id,
            model: completion.model,
            usage: completion.usage,
            message,
            finish_reason: choice.finish_reason,
        })
    }

    /// What [`tree_decode`] makes of the same body.
    fn decode(self, response: &HttpResponse) -> ChatResponse {
        let message = self.message;
        let raw_stop_reason = nonempty(self.finish_reason.as_deref()).map(str::to_owned);
        let calls: Vec<ToolUse> = message.tool_calls.iter().flatten().enumerate().map(plain_tool_use).collect();
        let refusal =
            nonempty(message.refusal.as_deref()).map(|explanation| refusal(None, Some(explanation.to_owned())));
        let stop_reason = stop_reason(refusal.as_ref(), raw_stop_reason.as_deref(), !calls.is_empty());
        let reasoning = nonempty(message.reasoning_content.as_deref()).or(nonempty(message.reasoning.as_deref()));
        ChatResponse {
            content: blocks(
                reasoning.map(str::to_owned),
                nonempty(message.content.as_deref()).map(str::to_owned),
                calls,
            ),
            stop_reason,
            raw_stop_reason,
            usage: self.usage.as_ref().map(|usage| usage.usage()),
            refusal,
            served_model: nonempty(self.model.as_deref()).map(str::to_owned),
            request_id: request_id(response, self.id.as_deref()),
        }
    }
}

/// A plain call: `parse` made sure it has a name.
fn plain_tool_use((position, call): (usize, &Object<PlainToolCall<'_>>)) -> ToolUse {
    ToolUse {
        id: nonempty(call.id.as_deref()).map_or_else(|| format!("call_{position}"), str::to_owned),
        name: call.name().unwrap_or_default().to_owned(),
        input_json: argument_text(call.arguments()),
    }
}

/// `choices[0]`: the host never asks for more than one.
pub(crate) fn first_choice(body: &Value) -> Result<&Value, CodecError> {
    body.get("choices")
        .and_then(Value::as_array)
        .and_then(|choices| choices.first())
        .ok_or_else(|| CodecError::Malformed("response has no choices[0]".to_owned()))
}

fn content(message: &Value, calls: Vec<ToolUse>) -> Vec<ContentBlock> {
    blocks(reasoning_text(message), message_text(message.get("content")), calls)
}

/// Reasoning first (it came first), then the visible text, then the calls.
fn blocks(reasoning: Option<String>, answer: Option<String>, calls: Vec<ToolUse>) -> Vec<ContentBlock> {
    let mut content = Vec::new();
    if let Some(reasoning) = reasoning {
        content.push(ContentBlock::Thinking(Thinking { text: reasoning, signature: None, redacted: false }));
    }
    if let Some(answer) = answer {
        content.push(ContentBlock::Text(answer));
    }
    content.extend(calls.into_iter().map(ContentBlock::ToolUse));
    content
}

/// A non-empty string field, owned.
pub(crate) fn text(value: Option<&Value>) -> Option<String> {
    nonempty(value.and_then(Value::as_str)).map(str::to_owned)
}

/// The reasoning text of a message or delta: DeepSeek and llama.cpp call it
/// `reasoning_content`, vLLM and Ollama `reasoning`.
pub(crate) fn reasoning_text(message: &Value) -> Option<String> {
    text(message.get("reasoning_content")).or_else(|| text(message.get("reasoning")))
}

/// `content` as text: a string, or (from some servers) an array of text parts.
fn message_text(content: Option<&Value>) -> Option<String> {
    match content? {
        Value::String(text) => Some(text.clone()),
        Value::Array(parts) => {
            Some(parts.iter().filter_map(|part| part.get("text").and_then(Value::as_str)).collect::<String>())
        }
        _ => None,
    }
    .filter(|text| !text.is_empty())
}

/// The model's refusal, which OpenAI sends in place of an answer.
fn message_refusal(message: &Value) -> Option<Refusal> {
    text(message.get("refusal")).map(|explanation| refusal(None, Some(explanation)))
}

fn tool_calls(message: &Value) -> Result<Vec<ToolUse>, CodecError> {
    let Some(items) = message.get("tool_calls").and_then(Value::as_array) else {
        return Ok(Vec::new());
    };
    items.iter().enumerate().map(|(position, item)| tool_use(position, item)).collect()
}

/// One call. `type` is not checked (some servers leave it out); a missing id is
/// made up from the position so a later tool result can still refer to it.
fn tool_use(position: usize, item: &Value) -> Result<ToolUse, CodecError> {
    let function = item.get("function").unwrap_or(&Value::Null);
    let name = text(function.get("name"))
        .ok_or_else(|| CodecError::Malformed(format!("tool call {position} has no function name")))?;
    let id = text(item.get("id")).unwrap_or_else(|| format!("call_{position}"));
    Ok(ToolUse { id, name, input_json: arguments(function.get("arguments")) })
}

/// The arguments text as sent. Empty means "no arguments", i.e. `{}`. Invalid JSON
/// is kept verbatim: whether to repair or reject it is the host's call. Some
/// servers send an object instead of a string; that is serialized.
fn arguments(value: Option<&Value>) -> String {
    match value {
        None | Some(Value::Null) => argument_text(None),
        Some(Value::String(text)) => argument_text(Some(text)),
        Some(other) => other.to_string(),
    }
}

/// Arguments sent as text: blank means `{}`.
fn argument_text(text: Option<&str>) -> String {
    text.filter(|text| !text.trim().is_empty()).unwrap_or("{}").to_owned()
}

/// The stop reason: a refusal makes it content-filtered, whatever the raw
/// reason says; otherwise [`finish_reason`] reads the raw one.
pub(crate) fn stop_reason(refusal: Option<&Refusal>, raw: Option<&str>, has_tool_calls: bool) -> StopReason {
    match refusal {
        Some(_) => StopReason::ContentFiltered,
        None => finish_reason(raw, has_tool_calls),
    }
}

/// `finish_reason` → stop reason. A `stop` with tool calls is a tool-use stop:
/// OpenAI reports `stop` for a forced (named) call, and so do some servers for any
/// call. A `stop` caused by a stop sequence cannot be told apart, so it stays end-turn.
fn finish_reason(raw: Option<&str>, has_tool_calls: bool) -> StopReason {
    match raw {
        Some("stop") if has_tool_calls => StopReason::ToolUse,
        Some("stop") => StopReason::EndTurn,
        Some("length") => StopReason::MaxTokens,
        Some("tool_calls" | "function_call") => StopReason::ToolUse,
        Some("content_filter") => StopReason::ContentFiltered,
        _ => StopReason::Other,
    }
}

/// OpenAI's `prompt_tokens` includes the cached part; Weir's usage is additive, so
/// the cached tokens move from `input` to `cache-read`. `None` for a null usage.
pub(crate) fn usage(value: &Value) -> Option<Usage> {
    let usage = value.as_object()?;
    let count =
        |parent: &str, key: &str| usage.get(parent).and_then(|details| details.get(key)).and_then(Value::as_u64);
    Some(additive_usage(
        usage.get("prompt_tokens").and_then(Value::as_u64).unwrap_or(0),
        usage.get("completion_tokens").and_then(Value::as_u64).unwrap_or(0),
        count("prompt_tokens_details", "cached_tokens").unwrap_or(0),
        count("completion_tokens_details", "reasoning_tokens"),
    ))
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::panic)] // a failing test should stop loudly
mod tests {
    use super::*;

    fn ok(body: &str) -> HttpResponse {
        HttpResponse { status: 200, headers: vec![], body: body.as_bytes().to_vec() }
    }

    fn decoded(body: &str) -> ChatResponse {
        decode(&ok(body)).unwrap()
    }

    fn malformed(body: &str) -> String {
        match decode(&ok(body)) {
            Err(CodecError::Malformed(message)) => message,
            other => panic!("expected malformed, got {other:?}"),
        }
    }

    fn with_choice(message: &str, finish_reason: &str) -> String {
        format!(
            r#"{{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"gpt-4.1","choices":[{{"index":0,"message":{message},"logprobs":null,"finish_reason":{finish_reason}}}]}}"#
        )
    }

    const TEXT_BODY: &str = r#"{
      "id": "chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT",
      "object": "chat.completion",
      "created": 1741569952,
      "model": "gpt-4.1-2025-04-14",
      "choices": [{
        "index": 0,
        "message": {"role":"assistant","content":"Hi!","refusal":null,"annotations":[]},
        "logprobs": null,
        "finish_reason": "stop"
      }],
      "usage": {
        "prompt_tokens": 1117, "completion_tokens": 46, "total_tokens": 1163,
        "prompt_tokens_details": {"cached_tokens": 1024, "audio_tokens": 0},
        "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0,
          "accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0}
      },
      "service_tier": "default",
      "system_fingerprint": "fp_51e1070cf2"
    }"#;

    #[test]
    fn text_response() {
        let response = decoded(TEXT_BODY);
        assert_eq!(response.content, vec![ContentBlock::Text("Hi!".into())]);
        assert_eq!(response.stop_reason, StopReason::EndTurn);
        assert_eq!(response.raw_stop_reason.as_deref(), Some("stop"));
        assert_eq!(response.served_model.as_deref(), Some("gpt-4.1-2025-04-14"));
        assert_eq!(response.request_id.as_deref(), Some("chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT"));
        assert_eq!(response.refusal, None);
    }

    #[test]
    fn usage_with_cached_and_reasoning_tokens() {
        let response = decoded(TEXT_BODY);
        assert_eq!(
            response.usage,
            Some(Usage { input: 93, output: 46, cache_read: 1024, cache_write: 0, reasoning: Some(0) })
        );
        // Ollama: the bare counts only.
        let ollama = r#"{"id":"chatcmpl-7","model":"llama3.1:8b","system_fingerprint":"fp_ollama","choices":[{"index":0,"message":{"role":"assistant","content":"Hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":26,"completion_tokens":9,"total_tokens":35}}"#;
        assert_eq!(
            decoded(ollama).usage,
            Some(Usage { input: 26, output: 9, cache_read: 0, cache_write: 0, reasoning: None })
        );
        let o3 = r#"{"id":"c","model":"o3","choices":[{"index":0,"message":{"content":"4"},"finish_reason":"stop"}],"usage":{"prompt_tokens":10,"completion_tokens":300,"prompt_tokens_details":{"cached_tokens":0},"completion_tokens_details":{"reasoning_tokens":256}}}"#;
        assert_eq!(decoded(o3).usage.and_then(|u| u.reasoning), Some(256));
        assert_eq!(decoded(&with_choice(r#"{"content":"x"}"#, r#""stop""#)).usage, None);
    }

    #[test]
    fn request_id_prefers_the_header() {
        let mut response = ok(TEXT_BODY);
        response.headers = vec![("X-Request-Id".into(), "req_123".into())];
        assert_eq!(decode(&response).unwrap().request_id.as_deref(), Some("req_123"));
    }

    #[test]
    fn tool_calls() {
        let message = r#"{"role":"assistant","content":null,"tool_calls":[
            {"id":"call_abc","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}},
            {"id":"chatcmpl-tool-9f","function":{"name":"get_time","arguments":""}},
            {"id":"call_bad","type":"function","function":{"name":"get_weather","arguments":"{\"city\":"}}
        ]}"#;
        let response = decoded(&with_choice(message, r#""tool_calls""#));
        assert_eq!(response.stop_reason, StopReason::ToolUse);
        assert_eq!(
            response.content,
            vec![
                ContentBlock::ToolUse(ToolUse {
                    id: "call_abc".into(),
                    name: "get_weather".into(),
                    input_json: r#"{"city":"Paris"}"#.into(),
                }),
                ContentBlock::ToolUse(ToolUse {
                    id: "chatcmpl-tool-9f".into(),
                    name: "get_time".into(),
                    input_json: "{}".into()
                }),
                ContentBlock::ToolUse(ToolUse {
                    id: "call_bad".into(),
                    name: "get_weather".into(),
                    input_json: r#"{"city":"#.into(),
                }),
            ]
        );
    }

    #[test]
    fn forced_call_reported_as_stop_is_tool_use() {
        let message = r#"{"role":"assistant","content":"","tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{}"}}]}"#;
        let response = decoded(&with_choice(message, r#""stop""#));
        assert_eq!(response.stop_reason, StopReason::ToolUse);
        assert_eq!(response.raw_stop_reason.as_deref(), Some("stop"));
        assert_eq!(response.content.len(), 1);
    }

    #[test]
    fn tool_call_without_name_is_malformed() {
        let message = r#"{"tool_calls":[{"id":"call_1","function":{"arguments":"{}"}}]}"#;
        assert!(malformed(&with_choice(message, r#""tool_calls""#)).contains("no function name"));
    }

    #[test]
    fn refusal_response() {
        let message = r#"{"role":"assistant","content":null,"refusal":"I'm sorry, I can't help with that."}"#;
        let response = decoded(&with_choice(message, r#""stop""#));
        assert_eq!(response.stop_reason, StopReason::ContentFiltered);
        assert_eq!(response.raw_stop_reason.as_deref(), Some("stop"));
        assert_eq!(
            response.refusal,
            Some(Refusal { category: None, explanation: Some("I'm sorry, I can't help with that.".into()) })
        );
        assert!(response.content.is_empty());
    }

    #[test]
    fn reasoning_content_and_reasoning() {
        let deepseek = r#"{"role":"assistant","content":"9.11 < 9.8","reasoning_content":"Compare decimals."}"#;
        let response = decoded(&with_choice(deepseek, r#""stop""#));
        assert_eq!(
            response.content,
            vec![
                ContentBlock::Thinking(Thinking { text: "Compare decimals.".into(), signature: None, redacted: false }),
                ContentBlock::Text("9.11 < 9.8".into()),
            ]
        );
        let vllm = r#"{"role":"assistant","content":"Yes.","reasoning":"Think.","reasoning_content":null}"#;
        let response = decoded(&with_choice(vllm, r#""stop""#));
        assert!(matches!(&response.content[0], ContentBlock::Thinking(t) if t.text == "Think."));
    }

    #[test]
    fn finish_reason_mappings() {
        let cases = [
            (r#""stop""#, StopReason::EndTurn, Some("stop")),
            (r#""length""#, StopReason::MaxTokens, Some("length")),
            (r#""tool_calls""#, StopReason::ToolUse, Some("tool_calls")),
            (r#""function_call""#, StopReason::ToolUse, Some("function_call")),
            (r#""content_filter""#, StopReason::ContentFiltered, Some("content_filter")),
            (r#""abort""#, StopReason::Other, Some("abort")),
            ("null", StopReason::Other, None),
        ];
        for (finish, reason, raw) in cases {
            let response = decoded(&with_choice(r#"{"content":"x"}"#, finish));
            assert_eq!(response.stop_reason, reason, "{finish}");
            assert_eq!(response.raw_stop_reason.as_deref(), raw, "{finish}");
        }
    }

    #[test]
    fn empty_and_null_content() {
        assert!(decoded(&with_choice(r#"{"content":""}"#, r#""stop""#)).content.is_empty());
        assert!(decoded(&with_choice(r#"{"content":null}"#, r#""stop""#)).content.is_empty());
        let parts = decoded(&with_choice(
            r#"{"content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}"#,
            r#""stop""#,
        ));
        assert_eq!(parts.content, vec![ContentBlock::Text("ab".into())]);
    }

    #[test]
    fn malformed_bodies() {
        assert!(malformed("<html>502 Bad Gateway</html>").contains("not the expected JSON"));
        assert!(malformed(r#"{"id":"x","choices":[]}"#).contains("choices[0]"));
        assert!(malformed(r#"{"id":"x"}"#).contains("choices[0]"));
        assert!(malformed(r#"{"choices":[{"index":0,"finish_reason":"stop"}]}"#).contains("message"));
        let error = malformed(
            r#"{"error":{"message":"The server had an error while processing your request.","type":"server_error"}}"#,
        );
        assert!(error.contains("error object") && error.contains("server_error"), "{error}");
        assert!(
            malformed(r#"{"object":"error","message":"boom","type":"InternalServerError","code":500}"#)
                .contains("error object")
        );
    }

    mod plain_and_tree {
        //! Whatever a body holds, the plain reading and the tree say the same of it.
        use proptest::prelude::*;
        use serde_json::{Value, json};

        use super::*;
        use crate::plain::strategies::{body, call_name, field, message, object, plain_share};

        fn choice() -> impl Strategy<Value = Value> {
            let message = prop_oneof![
                32 => message(call_name()).prop_map(Some),
                1 => Just(None),
                1 => Just(Some(Value::Null)),
                1 => Just(Some(json!("text"))),
                1 => Just(Some(json!(["Hel", null, null, "no"]))),
            ];
            let finish = field(
                vec![Value::Null, json!(""), json!("stop"), json!("length"), json!("tool_calls")],
                vec![json!(5)],
            );
            (field(vec![json!(0), json!(1)], vec![json!("0")]), message, finish).prop_map(
                |(index, message, finish_reason)| {
                    object(vec![("index", index), ("message", message), ("finish_reason", finish_reason)])
                },
            )
        }

        fn completion() -> impl Strategy<Value = Value> {
            let choice = prop_oneof![24 => choice(), 1 => Just(json!([{"content": "Hel"}, "stop"]))];
            let choices = prop_oneof![
                32 => proptest::collection::vec(choice, 1..3).prop_map(|choices| Some(Value::Array(choices))),
                1 => Just(Some(json!([]))),
                1 => Just(Some(Value::Null)),
                1 => Just(None),
            ];
            body("chat.completion", json!({"message": "overloaded", "type": "server_error"}), choices)
        }

        fn response(body: &Value, header_id: Option<&str>) -> HttpResponse {
            let headers = header_id.map(|id| ("x-request-id".to_owned(), id.to_owned())).into_iter().collect();
            HttpResponse { status: 200, headers, body: body.to_string().into_bytes() }
        }

        proptest! {
            // Many cases: a difference may need a rare mix, and each case takes
            // microseconds.
            #![proptest_config(ProptestConfig::with_cases(4096))]

            #[test]
            fn a_response_decodes_the_same_either_way(
                body in completion(),
                header_id in proptest::option::of(proptest::sample::select(vec!["", "req_1"])),
            ) {
                let response = response(&body, header_id);
                prop_assert_eq!(decode(&response), tree_decode(&response), "body {}", body);
            }
        }

        /// The property above means something only if many generated bodies take
        /// the plain reading and many the tree.
        #[test]
        fn the_generated_bodies_take_both_readings() {
            let plain = plain_share(completion(), |body| PlainAnswer::parse(body).is_some());
            assert!((250..=750).contains(&plain), "{plain} of 1000 generated bodies are plain");
        }

        #[test]
        fn a_plain_body_is_read_without_the_tree() {
            let tool_calls = r#"{"content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"f","arguments":"{}"}}]}"#;
            for plain in [TEXT_BODY.to_owned(), with_choice(tool_calls, r#""tool_calls""#)] {
                assert!(PlainAnswer::parse(plain.as_bytes()).is_some(), "{plain}");
            }
            for left_to_the_tree in [
                with_choice(r#"{"content":[{"type":"text","text":"a"}]}"#, r#""stop""#),
                with_choice(r#"{"tool_calls":[{"function":{"name":"f","arguments":{"a":1}}}]}"#, "null"),
                with_choice(r#"{"tool_calls":[{"id":"call_1","function":{"arguments":"{}"}}]}"#, "null"),
                with_choice(r#"["Hel"]"#, r#""stop""#),
                r#"{"choices":[]}"#.to_owned(),
                r#"{"error":{"message":"x"},"choices":[{"message":{"content":"x"}}]}"#.to_owned(),
                format!("{} trailing", with_choice(r#"{"content":"x"}"#, "null")),
            ] {
                assert!(PlainAnswer::parse(left_to_the_tree.as_bytes()).is_none(), "{left_to_the_tree}");
            }
        }
    }
}
