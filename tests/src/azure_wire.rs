//! What Azure OpenAI really sends (learn.microsoft.com, "Azure OpenAI REST API
//! reference" and "Content filtering"): Chat Completions bodies with
//! `prompt_filter_results` and each choice's `content_filter_results`, streams
//! whose first chunk has no choices and carries the prompt's filter results,
//! the prompt filter's 400 (`code: "content_filter"` with
//! `innererror.content_filter_result`), and the 429 with `retry-after-ms`,
//! `retry-after` and `x-ratelimit-remaining-*`.
//!
//! Deterministic like [`crate::openai_wire`]: fixed ids, model and `created`.

use bytes::Bytes;
use serde_json::{Value, json};

use crate::fake_upstream::Scripted;
use crate::openai_wire::{CREATED, json_headers, sse_done, sse_frame, sse_headers};

/// The model Azure reports: the deployed model's snapshot, not the deployment's name.
pub const MODEL: &str = "gpt-4o-2024-11-20";
/// The completion id scripted answers carry.
pub const COMPLETION_ID: &str = "chatcmpl-azurefake000000000000000000";
/// Azure's request id header, on every answer.
pub const REQUEST_ID: &str = "0f5c6d2e-azure-fake-request-000000000000";

/// Every category Azure's default filter reports, none of them filtered.
#[must_use]
pub fn safe_filter_results() -> Value {
    json!({
        "hate": {"filtered": false, "severity": "safe"},
        "self_harm": {"filtered": false, "severity": "safe"},
        "sexual": {"filtered": false, "severity": "safe"},
        "violence": {"filtered": false, "severity": "safe"}
    })
}

/// The output filter's verdict on a stopped answer: violence, high.
#[must_use]
pub fn violent_filter_results() -> Value {
    json!({
        "hate": {"filtered": false, "severity": "safe"},
        "self_harm": {"filtered": false, "severity": "safe"},
        "sexual": {"filtered": false, "severity": "safe"},
        "violence": {"filtered": true, "severity": "high"}
    })
}

fn prompt_filter_results() -> Value {
    json!([{"prompt_index": 0, "content_filter_results": safe_filter_results()}])
}

/// A `chat.completion` as Azure sends it: `content` may be null (filtered).
#[must_use]
pub fn completion_body(content: Option<&str>, finish_reason: &str, filters: Value) -> Value {
    json!({
        "choices": [{
            "content_filter_results": filters,
            "finish_reason": finish_reason,
            "index": 0,
            "logprobs": null,
            "message": {"content": content, "refusal": null, "role": "assistant"}
        }],
        "created": CREATED,
        "id": COMPLETION_ID,
        "model": MODEL,
        "object": "chat.completion",
        "prompt_filter_results": prompt_filter_results(),
        "system_fingerprint": "fp_azurefake",
        "usage": {"completion_tokens": 7, "prompt_tokens": 14, "total_tokens": 21,
                  "prompt_tokens_details": {"cached_tokens": 0}, "completion_tokens_details": {"reasoning_tokens": 0}}
    })
}

fn headers() -> Vec<(String, String)> {
    let mut headers = json_headers(REQUEST_ID);
    headers.push(("apim-request-id".into(), REQUEST_ID.into()));
    headers.push(("x-ratelimit-remaining-requests".into(), "99".into()));
    headers.push(("x-ratelimit-remaining-tokens".into(), "99000".into()));
    headers
}

/// A plain answer.
#[must_use]
pub fn completion(text: &str) -> Scripted {
    let body = completion_body(Some(text), "stop", safe_filter_results());
    Scripted::Respond { status: 200, headers: headers(), body: Bytes::from(body.to_string()) }
}

/// An answer the output filter stopped: no content, `finish_reason: "content_filter"`.
#[must_use]
pub fn filtered_completion() -> Scripted {
    let body = completion_body(None, "content_filter", violent_filter_results());
    Scripted::Respond { status: 200, headers: headers(), body: Bytes::from(body.to_string()) }
}

/// The prompt filter's 400. Its message is prose the gateway must never show.
#[must_use]
pub fn prompt_filtered_400(message: &str) -> Scripted {
    let body = json!({"error": {
        "message": message,
        "type": null,
        "param": "prompt",
        "code": "content_filter",
        "status": 400,
        "innererror": {
            "code": "ResponsibleAIPolicyViolation",
            "content_filter_result": {
                "hate": {"filtered": false, "severity": "safe"},
                "jailbreak": {"filtered": true, "detected": true},
                "self_harm": {"filtered": false, "severity": "safe"},
                "sexual": {"filtered": false, "severity": "safe"},
                "violence": {"filtered": false, "severity": "safe"}
            }
        }
    }});
    Scripted::Respond { status: 400, headers: headers(), body: Bytes::from(body.to_string()) }
}

/// Azure's 429: the wait in `retry-after-ms` and `retry-after`, the quota spent.
#[must_use]
pub fn rate_limited(retry_after_ms: u64) -> Scripted {
    let seconds = retry_after_ms.div_ceil(1000);
    let body = json!({"error": {
        "code": "429",
        "message": format!(
            "Requests to the ChatCompletions_Create Operation under Azure OpenAI API version 2024-10-21 have \
             exceeded token rate limit of your current OpenAI S0 pricing tier. Please retry after {seconds} seconds."
        )
    }});
    let mut headers = json_headers(REQUEST_ID);
    headers.push(("retry-after-ms".into(), retry_after_ms.to_string()));
    headers.push(("retry-after".into(), seconds.to_string()));
    headers.push(("x-ratelimit-remaining-requests".into(), "0".into()));
    headers.push(("x-ratelimit-remaining-tokens".into(), "0".into()));
    Scripted::Respond { status: 429, headers, body: Bytes::from(body.to_string()) }
}

fn chunk(delta: Value, finish_reason: Option<&str>, filters: Value) -> Value {
    json!({
        "choices": [{"content_filter_results": filters, "delta": delta, "finish_reason": finish_reason,
                     "index": 0, "logprobs": null}],
        "created": CREATED,
        "id": COMPLETION_ID,
        "model": MODEL,
        "object": "chat.completion.chunk",
        "system_fingerprint": "fp_azurefake"
    })
}

/// The first frame of every Azure stream: no choices, empty id and model, the
/// prompt's filter results.
fn prompt_frame() -> Bytes {
    sse_frame(&json!({
        "choices": [],
        "created": 0,
        "id": "",
        "model": "",
        "object": "",
        "prompt_filter_results": prompt_filter_results()
    }))
}

fn stream(frames: Vec<Bytes>) -> Scripted {
    Scripted::Stream { status: 200, headers: sse_headers(REQUEST_ID), chunks: frames, pause: std::time::Duration::ZERO }
}

/// A streamed text answer ending with `finish_reason`, then a usage chunk and `[DONE]`.
#[must_use]
pub fn text_stream(texts: &[&str], finish_reason: &str) -> Scripted {
    let mut frames =
        vec![prompt_frame(), sse_frame(&chunk(json!({"content": "", "role": "assistant"}), None, json!({})))];
    for text in texts {
        frames.push(sse_frame(&chunk(json!({"content": text}), None, safe_filter_results())));
    }
    let filters = if finish_reason == "content_filter" { violent_filter_results() } else { json!({}) };
    frames.push(sse_frame(&chunk(json!({}), Some(finish_reason), filters)));
    frames.push(sse_frame(&json!({
        "choices": [], "created": CREATED, "id": COMPLETION_ID, "model": MODEL, "object": "chat.completion.chunk",
        "usage": {"completion_tokens": 5, "prompt_tokens": 14, "total_tokens": 19}
    })));
    frames.push(sse_done());
    stream(frames)
}

/// One streamed tool call: its id and name first, the arguments in `fragments`.
#[must_use]
pub fn tool_call_stream(id: &str, name: &str, fragments: &[&str]) -> Scripted {
    let mut frames = vec![
        prompt_frame(),
        sse_frame(&chunk(
            json!({"content": null, "role": "assistant", "tool_calls": [
                {"index": 0, "id": id, "type": "function", "function": {"name": name, "arguments": ""}}
            ]}),
            None,
            json!({}),
        )),
    ];
    for fragment in fragments {
        frames.push(sse_frame(&chunk(
            json!({"tool_calls": [{"index": 0, "function": {"arguments": fragment}}]}),
            None,
            json!({}),
        )));
    }
    frames.push(sse_frame(&chunk(json!({}), Some("tool_calls"), json!({}))));
    frames.push(sse_done());
    stream(frames)
}

/// An embeddings answer for `count` inputs of `width` values.
#[must_use]
pub fn embeddings(count: usize, width: usize) -> Scripted {
    let data: Vec<Value> = (0..count)
        .map(|index| {
            let vector: Vec<f64> = (0..width).map(|i| ((index + 1) * (i + 1)) as f64 / 1000.0).collect();
            json!({"object": "embedding", "index": index, "embedding": vector})
        })
        .collect();
    let body = json!({"object": "list", "data": data, "model": "text-embedding-3-small",
                      "usage": {"prompt_tokens": 8, "total_tokens": 8}});
    Scripted::Respond { status: 200, headers: headers(), body: Bytes::from(body.to_string()) }
}
