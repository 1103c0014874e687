//! Builders for what the Anthropic Messages API really sends: message bodies, error
//! envelopes, headers and SSE events, as described in `shared/reference/provider-wire.md`
//! section 1 (1.6 body, 1.7 stop reasons and usage, 1.8 streaming, 1.9 errors, 1.10
//! headers).
//!
//! Like [`crate::openai_wire`], every builder is deterministic (fixed ids, a fixed dated
//! model name that differs from any catalog id, so a test sees whether the gateway stamps
//! its own), and there are two layers: `*_body` / `*_json` / block functions return JSON,
//! the short-named functions wrap it into a ready [`Scripted`] answer.
//!
//! Streams differ from OpenAI's in one way that matters to a reader: every event carries an
//! SSE `event:` name equal to its JSON `type`, and an error inside a 200 stream is
//! `event: error`. [`sse_event`] writes both lines, so the builders here exercise a host's
//! handling of named events, not just `data:` lines.

use std::time::Duration;

use bytes::Bytes;
use serde_json::{Value, json};

use crate::fake_upstream::Scripted;

/// The model name scripted answers report (Anthropic answers with the dated snapshot name).
pub const MODEL: &str = "claude-sonnet-4-5-20250929";
/// The message id scripted answers carry.
pub const MESSAGE_ID: &str = "msg_01WeirFakeXFDUDYJgAACzvn";
/// The `request-id` header (and error-body `request_id`) scripted answers carry.
pub const REQUEST_ID: &str = "req_011CWeirFakeHoEeqs5C35K2U";
/// The `anthropic-version` every request must carry; the official SDKs hard-code it.
pub const API_VERSION: &str = "2023-06-01";
/// An RFC 3339 reset instant in the past, as the `anthropic-ratelimit-*-reset` headers carry
/// them: fixed so bodies compare, and past so a host honouring it waits for nothing.
pub const RESET: &str = "2025-03-10T01:25:52Z";
/// The message Anthropic sends with `overloaded_error` (HTTP 529 or an `error` event).
pub const OVERLOADED_MESSAGE: &str = "Overloaded";

// ---------------------------------------------------------------------------------------
// Headers
// ---------------------------------------------------------------------------------------

/// `anthropic-ratelimit-*` headers (requests, tokens, input tokens, output tokens), each
/// with its limit, what remains and an RFC 3339 reset instant.
#[must_use]
pub fn ratelimit_headers(remaining_requests: u64, remaining_tokens: u64, reset: &str) -> Vec<(String, String)> {
    let mut headers = vec![
        ("anthropic-ratelimit-requests-limit".to_owned(), "50".to_owned()),
        ("anthropic-ratelimit-requests-remaining".to_owned(), remaining_requests.to_string()),
        ("anthropic-ratelimit-requests-reset".to_owned(), reset.to_owned()),
    ];
    for kind in ["tokens", "input-tokens", "output-tokens"] {
        headers.push((format!("anthropic-ratelimit-{kind}-limit"), "40000".to_owned()));
        headers.push((format!("anthropic-ratelimit-{kind}-remaining"), remaining_tokens.to_string()));
        headers.push((format!("anthropic-ratelimit-{kind}-reset"), reset.to_owned()));
    }
    headers
}

/// Headers on every JSON answer: content type, `request-id`, and a window with room left.
#[must_use]
pub fn json_headers(request_id: &str) -> Vec<(String, String)> {
    let mut headers = vec![
        ("content-type".to_owned(), "application/json".to_owned()),
        ("request-id".to_owned(), request_id.to_owned()),
        ("anthropic-organization-id".to_owned(), "00000000-0000-0000-0000-00000000fake".to_owned()),
    ];
    headers.extend(ratelimit_headers(49, 39_000, RESET));
    headers
}

/// Headers on a streamed answer.
#[must_use]
pub fn sse_headers(request_id: &str) -> Vec<(String, String)> {
    let mut headers = vec![
        ("content-type".to_owned(), "text/event-stream; charset=utf-8".to_owned()),
        ("cache-control".to_owned(), "no-cache".to_owned()),
        ("request-id".to_owned(), request_id.to_owned()),
    ];
    headers.extend(ratelimit_headers(49, 39_000, RESET));
    headers
}

/// A JSON answer with Anthropic's headers.
#[must_use]
pub fn json_response(status: u16, body: &Value) -> Scripted {
    Scripted::Respond { status, headers: json_headers(REQUEST_ID), body: Bytes::from(body.to_string()) }
}

// ---------------------------------------------------------------------------------------
// Message bodies
// ---------------------------------------------------------------------------------------

/// `usage` as a message carries it. `input` excludes the cached tokens: the prompt was
/// `input + cache_write + cache_read` tokens (reference 1.7).
#[must_use]
pub fn usage_json(input: u64, output: u64, cache_write: u64, cache_read: u64) -> Value {
    json!({
        "input_tokens": input,
        "output_tokens": output,
        "cache_creation_input_tokens": cache_write,
        "cache_read_input_tokens": cache_read,
        "cache_creation": {"ephemeral_5m_input_tokens": cache_write, "ephemeral_1h_input_tokens": 0},
        "service_tier": "standard"
    })
}

/// A `text` content block.
#[must_use]
pub fn text_block(text: &str) -> Value {
    json!({"type": "text", "text": text})
}

/// A `tool_use` content block; `input` is a JSON object (not a string, unlike OpenAI).
#[must_use]
pub fn tool_use_block(id: &str, name: &str, input: Value) -> Value {
    json!({"type": "tool_use", "id": id, "name": name, "input": input})
}

/// A `thinking` content block with its signature.
#[must_use]
pub fn thinking_block(thinking: &str, signature: &str) -> Value {
    json!({"type": "thinking", "thinking": thinking, "signature": signature})
}

/// `stop_details` of a refusal: `category` (`cyber`, `bio`, ...) and `explanation`, either
/// of which may be null.
#[must_use]
pub fn refusal_details(category: Option<&str>, explanation: Option<&str>) -> Value {
    json!({"type": "refusal", "category": category, "explanation": explanation})
}

/// A whole `message` object. `stop_details` is left out when `None`, as older API versions
/// send it.
#[must_use]
pub fn message_body(content: Vec<Value>, stop_reason: &str, stop_details: Option<Value>, usage: Value) -> Value {
    let mut body = json!({
        "id": MESSAGE_ID,
        "type": "message",
        "role": "assistant",
        "model": MODEL,
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": null,
        "usage": usage
    });
    if let Some(details) = stop_details {
        body["stop_details"] = details;
    }
    body
}

/// A 200 message with these blocks, this stop reason and this usage.
#[must_use]
pub fn message(content: Vec<Value>, stop_reason: &str, usage: Value) -> Scripted {
    json_response(200, &message_body(content, stop_reason, None, usage))
}

/// A plain text answer (`end_turn`) with a small usage and no cache.
#[must_use]
pub fn text_message(text: &str) -> Scripted {
    message(vec![text_block(text)], "end_turn", usage_json(10, 5, 0, 0))
}

/// The classifiers stopped the answer: `stop_reason: refusal` with `stop_details`, and
/// the partial text the API sends before it (which is unusable).
#[must_use]
pub fn refusal(partial_text: &str, category: Option<&str>, explanation: Option<&str>) -> Scripted {
    let content = if partial_text.is_empty() { vec![] } else { vec![text_block(partial_text)] };
    let body = message_body(content, "refusal", Some(refusal_details(category, explanation)), usage_json(10, 3, 0, 0));
    json_response(200, &body)
}

// ---------------------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------------------

/// The error envelope `{"type":"error","error":{"type","message"},"request_id"}`.
#[must_use]
pub fn error_body(error_type: &str, message: &str) -> Value {
    json!({"type": "error", "error": {"type": error_type, "message": message}, "request_id": REQUEST_ID})
}

/// An error answer with `request-id` and the rate-limit headers.
#[must_use]
pub fn error(status: u16, error_type: &str, message: &str) -> Scripted {
    json_response(status, &error_body(error_type, message))
}

/// 529 `overloaded_error`: the platform, not the account, is saturated.
#[must_use]
pub fn overloaded() -> Scripted {
    error(529, "overloaded_error", OVERLOADED_MESSAGE)
}

/// 429 `rate_limit_error` with `retry-after` and exhausted `anthropic-ratelimit-*` headers.
#[must_use]
pub fn rate_limited(retry_after_secs: u64) -> Scripted {
    let mut headers = vec![
        ("content-type".to_owned(), "application/json".to_owned()),
        ("request-id".to_owned(), REQUEST_ID.to_owned()),
        ("retry-after".to_owned(), retry_after_secs.to_string()),
    ];
    headers.extend(ratelimit_headers(0, 0, RESET));
    let body = error_body(
        "rate_limit_error",
        "This request would exceed the rate limit for your organization of 50 requests per minute. \
         For details, refer to the documentation.",
    );
    Scripted::Respond { status: 429, headers, body: Bytes::from(body.to_string()) }
}

/// 401 `authentication_error`: a bad, revoked or expired key.
#[must_use]
pub fn authentication_error() -> Scripted {
    error(401, "authentication_error", "invalid x-api-key")
}

// ---------------------------------------------------------------------------------------
// Streams
// ---------------------------------------------------------------------------------------

/// One SSE event as Anthropic frames it: `event: NAME\ndata: JSON\n\n`.
#[must_use]
pub fn sse_event(name: &str, data: &Value) -> Bytes {
    Bytes::from(format!("event: {name}\ndata: {data}\n\n"))
}

/// `message_start`: the message with empty content, a null stop reason and the input
/// counts (`output_tokens` is already 1 at the start, as the API sends it).
#[must_use]
pub fn message_start(input: u64, cache_write: u64, cache_read: u64) -> Bytes {
    let mut message = message_body(vec![], "", None, usage_json(input, 1, cache_write, cache_read));
    message["stop_reason"] = Value::Null;
    sse_event("message_start", &json!({"type": "message_start", "message": message}))
}

/// `content_block_start` with the block's initial form: `{"type":"text","text":""}`,
/// `{"type":"thinking","thinking":""}`, or a `tool_use` with the placeholder `input: {}`.
#[must_use]
pub fn content_block_start(index: u32, content_block: &Value) -> Bytes {
    sse_event(
        "content_block_start",
        &json!({"type": "content_block_start", "index": index, "content_block": content_block}),
    )
}

/// The empty text block a text `content_block_start` carries.
#[must_use]
pub fn empty_text_block() -> Value {
    text_block("")
}

/// The empty thinking block a thinking `content_block_start` carries.
#[must_use]
pub fn empty_thinking_block() -> Value {
    json!({"type": "thinking", "thinking": ""})
}

/// The `tool_use` block a `content_block_start` carries: its input arrives as deltas.
#[must_use]
pub fn streamed_tool_use_block(id: &str, name: &str) -> Value {
    tool_use_block(id, name, json!({}))
}

fn content_block_delta(index: u32, delta: &Value) -> Bytes {
    sse_event("content_block_delta", &json!({"type": "content_block_delta", "index": index, "delta": delta}))
}

/// A `text_delta`.
#[must_use]
pub fn text_delta(index: u32, text: &str) -> Bytes {
    content_block_delta(index, &json!({"type": "text_delta", "text": text}))
}

/// An `input_json_delta`: a fragment of the tool input's JSON text (may be empty).
#[must_use]
pub fn input_json_delta(index: u32, partial_json: &str) -> Bytes {
    content_block_delta(index, &json!({"type": "input_json_delta", "partial_json": partial_json}))
}

/// A `thinking_delta`.
#[must_use]
pub fn thinking_delta(index: u32, thinking: &str) -> Bytes {
    content_block_delta(index, &json!({"type": "thinking_delta", "thinking": thinking}))
}

/// A `signature_delta`, sent just before the thinking block's stop.
#[must_use]
pub fn signature_delta(index: u32, signature: &str) -> Bytes {
    content_block_delta(index, &json!({"type": "signature_delta", "signature": signature}))
}

/// `content_block_stop`.
#[must_use]
pub fn content_block_stop(index: u32) -> Bytes {
    sse_event("content_block_stop", &json!({"type": "content_block_stop", "index": index}))
}

/// `message_delta`: the stop reason (with `stop_details` when given) and the cumulative
/// `output_tokens`.
#[must_use]
pub fn message_delta(stop_reason: &str, stop_details: Option<Value>, output_tokens: u64) -> Bytes {
    let mut delta = json!({"stop_reason": stop_reason, "stop_sequence": null});
    if let Some(details) = stop_details {
        delta["stop_details"] = details;
    }
    sse_event(
        "message_delta",
        &json!({"type": "message_delta", "delta": delta, "usage": {"output_tokens": output_tokens}}),
    )
}

/// `message_stop`: the last event of a complete stream.
#[must_use]
pub fn message_stop() -> Bytes {
    sse_event("message_stop", &json!({"type": "message_stop"}))
}

/// `ping`, which may appear anywhere.
#[must_use]
pub fn ping() -> Bytes {
    sse_event("ping", &json!({"type": "ping"}))
}

/// `event: error` inside a 200 stream (no `request_id` in the event, as captured).
#[must_use]
pub fn error_event(error_type: &str, message: &str) -> Bytes {
    sse_event("error", &json!({"type": "error", "error": {"type": error_type, "message": message}}))
}

/// A complete text stream: `message_start`, one text block with a `ping` and one delta per
/// piece, `message_delta` with `stop_reason`, `message_stop`.
#[must_use]
pub fn sse_text_events(texts: &[&str], stop_reason: &str, input: u64, output: u64) -> Vec<Bytes> {
    let mut events = vec![message_start(input, 0, 0), content_block_start(0, &empty_text_block()), ping()];
    events.extend(texts.iter().map(|text| text_delta(0, text)));
    events.push(content_block_stop(0));
    events.push(message_delta(stop_reason, None, output));
    events.push(message_stop());
    events
}

/// A `citations_delta`: one citation of the text block at `index`.
#[must_use]
pub fn citations_delta(index: u32, citation: &Value) -> Bytes {
    content_block_delta(index, &json!({"type": "citations_delta", "citation": citation}))
}

/// `message_delta` whose usage also carries the server tools' counts
/// (`server_tool_use: {web_search_requests}`), as a web search answer's does.
#[must_use]
pub fn message_delta_with_searches(stop_reason: &str, output_tokens: u64, web_search_requests: u64) -> Bytes {
    let usage =
        json!({"output_tokens": output_tokens, "server_tool_use": {"web_search_requests": web_search_requests}});
    sse_event(
        "message_delta",
        &json!({"type": "message_delta", "delta": {"stop_reason": stop_reason, "stop_sequence": null}, "usage": usage}),
    )
}

/// A web search answer as the Messages API streams it, split where a live test holds
/// it: up to the first text's delta (the narration), then the rest. `content` is the
/// whole answer's blocks: texts (a `citations` list makes its start carry
/// `citations: []` and its citations come as `citations_delta`s before its text), a
/// `server_tool_use` (its input as two `input_json_delta`s), a
/// `web_search_tool_result` (whole in its start).
#[must_use]
pub fn web_search_stream(content: &[Value], input: u64, output: u64, searches: u64) -> (Vec<Bytes>, Vec<Bytes>) {
    let mut before = vec![message_start(input, 0, 0)];
    let mut after = Vec::new();
    for (index, block) in content.iter().enumerate() {
        let index = u32::try_from(index).unwrap_or(u32::MAX);
        let events = if before.len() == 1 { &mut before } else { &mut after };
        match block["type"].as_str() {
            Some("text") => {
                let mut start = empty_text_block();
                if let Some(citations) = block["citations"].as_array() {
                    start["citations"] = json!([]);
                    events.push(content_block_start(index, &start));
                    events.extend(citations.iter().map(|citation| citations_delta(index, citation)));
                } else {
                    events.push(content_block_start(index, &start));
                }
                events.push(text_delta(index, block["text"].as_str().unwrap_or_default()));
            }
            Some("server_tool_use") => {
                let mut start = block.clone();
                start["input"] = json!({});
                events.push(content_block_start(index, &start));
                let input = block["input"].to_string();
                let (head, tail) = input.split_at(input.len() / 2);
                events.push(input_json_delta(index, head));
                events.push(input_json_delta(index, tail));
            }
            _ => events.push(content_block_start(index, block)),
        }
        events.push(content_block_stop(index));
    }
    after.push(message_delta_with_searches("end_turn", output, searches));
    after.push(message_stop());
    (before, after)
}

/// A 200 stream of these events, each flushed on its own with no pause.
#[must_use]
pub fn stream(events: Vec<Bytes>) -> Scripted {
    Scripted::Stream { status: 200, headers: sse_headers(REQUEST_ID), chunks: events, pause: Duration::ZERO }
}

// ---------------------------------------------------------------------------------------
// Reading streams
// ---------------------------------------------------------------------------------------

/// The (`event` name, `data` as JSON) of every event in an Anthropic-style SSE body; an
/// event without a name gets `""`. Panics on data that is not JSON. For unit tests and for
/// asserting on what a fake sent.
#[must_use]
pub fn sse_events(body: &str) -> Vec<(String, Value)> {
    let mut events = Vec::new();
    let mut name = String::new();
    let mut data: Option<String> = None;
    for line in body.split('\n') {
        let line = line.strip_suffix('\r').unwrap_or(line);
        if line.is_empty() {
            if let Some(data) = data.take() {
                let value =
                    serde_json::from_str(&data).unwrap_or_else(|e| panic!("SSE event data is not JSON ({e}): {data}"));
                events.push((std::mem::take(&mut name), value));
            }
            name.clear();
            continue;
        }
        let (field, value) = line.split_once(':').unwrap_or((line, ""));
        let value = value.strip_prefix(' ').unwrap_or(value);
        match field {
            "event" => value.clone_into(&mut name),
            "data" => match &mut data {
                Some(joined) => {
                    joined.push('\n');
                    joined.push_str(value);
                }
                None => data = Some(value.to_owned()),
            },
            _ => {}
        }
    }
    events
}

#[cfg(test)]
mod tests {
    use super::*;

    fn respond(scripted: &Scripted) -> (u16, Vec<(String, String)>, Value) {
        match scripted {
            Scripted::Respond { status, headers, body } => {
                (*status, headers.clone(), serde_json::from_slice(body).unwrap())
            }
            other => panic!("not a Respond: {other:?}"),
        }
    }

    fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
        headers.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }

    fn joined(events: &[Bytes]) -> String {
        events.iter().map(|b| String::from_utf8_lossy(b).into_owned()).collect()
    }

    #[test]
    fn a_message_has_the_documented_fields() {
        let content =
            vec![text_block("Let me check."), tool_use_block("toolu_01A", "get_weather", json!({"city": "Paris"}))];
        let (status, headers, body) = respond(&message(content, "tool_use", usage_json(412, 58, 100, 2048)));
        assert_eq!(status, 200);
        assert_eq!(header(&headers, "request-id"), Some(REQUEST_ID));
        assert_eq!(header(&headers, "anthropic-ratelimit-input-tokens-reset"), Some(RESET));
        assert_eq!(body["type"], "message");
        assert_eq!(body["role"], "assistant");
        assert_eq!(body["model"], MODEL);
        assert_eq!(body["stop_reason"], "tool_use");
        assert!(body.get("stop_details").is_none(), "absent unless given");
        assert_eq!(body["content"][1]["input"], json!({"city": "Paris"}));
        assert_eq!(body["usage"]["cache_read_input_tokens"], 2048);
        assert_eq!(body["usage"]["cache_creation_input_tokens"], 100);
    }

    #[test]
    fn a_refusal_carries_stop_details() {
        let (_, _, body) = respond(&refusal("I can", Some("cyber"), None));
        assert_eq!(body["stop_reason"], "refusal");
        assert_eq!(body["stop_details"], json!({"type": "refusal", "category": "cyber", "explanation": null}));
    }

    #[test]
    fn errors_use_the_envelope_and_headers() {
        let (status, headers, body) = respond(&rate_limited(0));
        assert_eq!(status, 429);
        assert_eq!(header(&headers, "retry-after"), Some("0"));
        assert_eq!(header(&headers, "anthropic-ratelimit-requests-remaining"), Some("0"));
        assert_eq!(body["type"], "error");
        assert_eq!(body["error"]["type"], "rate_limit_error");
        assert_eq!(body["request_id"], REQUEST_ID);
        let (status, _, body) = respond(&overloaded());
        assert_eq!((status, body["error"]["type"].as_str()), (529, Some("overloaded_error")));
        let (status, _, body) = respond(&authentication_error());
        assert_eq!((status, body["error"]["type"].as_str()), (401, Some("authentication_error")));
    }

    #[test]
    fn stream_events_are_named_after_their_type() {
        let events = vec![
            message_start(25, 7, 2048),
            content_block_start(0, &empty_thinking_block()),
            thinking_delta(0, "Hmm."),
            signature_delta(0, "EqQB"),
            content_block_stop(0),
            content_block_start(1, &streamed_tool_use_block("toolu_1", "get_weather")),
            input_json_delta(1, "{\"city\":"),
            message_delta("tool_use", None, 42),
            message_stop(),
            error_event("overloaded_error", OVERLOADED_MESSAGE),
        ];
        let body = joined(&events);
        assert!(body.starts_with("event: message_start\ndata: {"), "{body}");
        let parsed = sse_events(&body);
        assert_eq!(parsed.len(), events.len());
        for (name, data) in &parsed {
            assert_eq!(data["type"].as_str(), Some(name.as_str()), "{name}: {data}");
        }
        assert!(parsed[0].1["message"]["stop_reason"].is_null());
        assert_eq!(parsed[0].1["message"]["usage"]["cache_read_input_tokens"], 2048);
        assert_eq!(parsed[2].1["delta"], json!({"type": "thinking_delta", "thinking": "Hmm."}));
        assert_eq!(parsed[3].1["delta"]["type"], "signature_delta");
        assert_eq!(parsed[5].1["content_block"]["input"], json!({}));
        assert_eq!(parsed[6].1["delta"]["partial_json"], "{\"city\":");
        assert_eq!(parsed[7].1["delta"]["stop_reason"], "tool_use");
        assert_eq!(parsed[7].1["usage"]["output_tokens"], 42);
        assert_eq!(parsed[9].1["error"]["type"], "overloaded_error");
    }

    #[test]
    fn a_text_stream_is_complete() {
        let events = sse_text_events(&["Hel", "lo"], "end_turn", 10, 2);
        let names: Vec<String> = sse_events(&joined(&events)).into_iter().map(|(name, _)| name).collect();
        assert_eq!(
            names,
            [
                "message_start",
                "content_block_start",
                "ping",
                "content_block_delta",
                "content_block_delta",
                "content_block_stop",
                "message_delta",
                "message_stop"
            ]
        );
    }
}
