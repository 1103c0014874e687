//! Builders for what OpenAI Chat Completions and Embeddings really send: bodies, error
//! envelopes, headers and SSE frames, as described in `shared/reference/provider-wire.md`
//! section 2 (and the OpenAI-compatible deviations of section 4 where a builder says so);
//! and the `/rerank` answer of OpenAI-compatible servers (the Jina / Cohere shape vLLM serves).
//!
//! Every builder is deterministic: fixed ids, a fixed `created` timestamp and a fixed model
//! name, so a test can compare whole bodies. The model name deliberately differs from the
//! catalog ids a gateway is configured with: a gateway must stamp its own id, never echo the
//! provider's (design invariant 6), and a fixed foreign name makes that visible.
//!
//! Two layers: `*_body` / `*_json` functions return the JSON (for tests that assemble their own
//! responses), and the short-named functions wrap them into a ready [`Scripted`] answer.

use std::time::Duration;

use base64::Engine as _;
use bytes::Bytes;
use serde_json::{Value, json};

use crate::fake_upstream::Scripted;

/// The model name scripted responses report (OpenAI answers with the dated snapshot name).
pub const MODEL: &str = "gpt-4o-mini-2024-07-18";
/// The completion id scripted responses carry.
pub const COMPLETION_ID: &str = "chatcmpl-weirfake0000000000000000000";
/// The `created` timestamp of every fake response; fixed so bodies compare byte for byte.
pub const CREATED: u64 = 1_741_569_952;
/// The `x-request-id` scripted responses carry.
pub const REQUEST_ID: &str = "req_0123456789abcdef0123456789abcdef";
/// OpenAI's `system_fingerprint` shape, marked as fake.
pub const SYSTEM_FINGERPRINT: &str = "fp_weirfake";
/// The message OpenAI sends for an exhausted quota (429 `insufficient_quota`).
pub const INSUFFICIENT_QUOTA_MESSAGE: &str =
    "You exceeded your current quota, please check your plan and billing details.";
/// The message OpenAI sends for a 500 and for an error inside a 200 stream.
pub const SERVER_ERROR_MESSAGE: &str = "The server had an error while processing your request. Sorry about that!";

/// The token estimate the fake uses: about four characters per token, rounded up.
///
/// Public so a test can compute the `usage` the echo will report for a given prompt.
#[must_use]
pub fn approx_tokens(text: &str) -> u64 {
    let chars = u64::try_from(text.chars().count()).unwrap_or(u64::MAX);
    chars.div_ceil(4)
}

// ---------------------------------------------------------------------------------------
// Headers
// ---------------------------------------------------------------------------------------

/// Headers OpenAI puts on every JSON answer.
#[must_use]
pub fn json_headers(request_id: &str) -> Vec<(String, String)> {
    vec![
        ("content-type".into(), "application/json".into()),
        ("x-request-id".into(), request_id.into()),
        ("openai-version".into(), "2020-10-01".into()),
        ("openai-processing-ms".into(), "1".into()),
    ]
}

/// Headers OpenAI puts on a streamed answer.
#[must_use]
pub fn sse_headers(request_id: &str) -> Vec<(String, String)> {
    vec![
        ("content-type".into(), "text/event-stream; charset=utf-8".into()),
        ("cache-control".into(), "no-cache".into()),
        ("x-request-id".into(), request_id.into()),
        ("openai-version".into(), "2020-10-01".into()),
        ("openai-processing-ms".into(), "1".into()),
    ]
}

/// `x-ratelimit-*` headers for a window with `remaining_requests` left; resets are Go-style
/// duration strings as OpenAI sends them (`1s`, `6m0s`).
#[must_use]
pub fn ratelimit_headers(remaining_requests: u64, remaining_tokens: u64, reset: &str) -> Vec<(String, String)> {
    vec![
        ("x-ratelimit-limit-requests".into(), "500".into()),
        ("x-ratelimit-limit-tokens".into(), "200000".into()),
        ("x-ratelimit-remaining-requests".into(), remaining_requests.to_string()),
        ("x-ratelimit-remaining-tokens".into(), remaining_tokens.to_string()),
        ("x-ratelimit-reset-requests".into(), reset.into()),
        ("x-ratelimit-reset-tokens".into(), reset.into()),
    ]
}

/// A JSON answer with OpenAI's headers.
#[must_use]
pub fn json_response(status: u16, body: &Value) -> Scripted {
    Scripted::Respond { status, headers: json_headers(REQUEST_ID), body: Bytes::from(body.to_string()) }
}

// ---------------------------------------------------------------------------------------
// Non-streaming bodies
// ---------------------------------------------------------------------------------------

/// A full `usage` object; `completion` includes `reasoning` as at OpenAI.
#[must_use]
pub fn usage_json(prompt: u64, completion: u64, cached: u64, reasoning: u64) -> Value {
    json!({
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": cached, "audio_tokens": 0},
        "completion_tokens_details": {
            "reasoning_tokens": reasoning,
            "audio_tokens": 0,
            "accepted_prediction_tokens": 0,
            "rejected_prediction_tokens": 0
        }
    })
}

/// An assistant message carrying text.
#[must_use]
pub fn text_message(text: &str) -> Value {
    json!({"role": "assistant", "content": text, "refusal": null, "annotations": []})
}

/// A `chat.completion` object with one choice.
#[must_use]
pub fn completion_body(id: &str, model: &str, message: Value, finish_reason: &str, usage: Value) -> Value {
    json!({
        "id": id,
        "object": "chat.completion",
        "created": CREATED,
        "model": model,
        "choices": [{
            "index": 0,
            "message": message,
            "logprobs": null,
            "finish_reason": finish_reason
        }],
        "usage": usage,
        "service_tier": "default",
        "system_fingerprint": SYSTEM_FINGERPRINT
    })
}

/// A successful completion with the given `finish_reason` and a usage estimated from `text`.
#[must_use]
pub fn completion_with_finish(text: &str, finish_reason: &str) -> Scripted {
    let usage = usage_json(10, approx_tokens(text), 0, 0);
    json_response(200, &completion_body(COMPLETION_ID, MODEL, text_message(text), finish_reason, usage))
}

/// A plain successful completion (`finish_reason: "stop"`).
#[must_use]
pub fn completion(text: &str) -> Scripted {
    completion_with_finish(text, "stop")
}

/// A successful completion with exact token counts (`completion` includes `reasoning`).
#[must_use]
pub fn completion_with_usage(text: &str, prompt: u64, completion: u64, cached: u64, reasoning: u64) -> Scripted {
    json_response(
        200,
        &completion_body(
            COMPLETION_ID,
            MODEL,
            text_message(text),
            "stop",
            usage_json(prompt, completion, cached, reasoning),
        ),
    )
}

/// The model called tools: `content` is null, `finish_reason` is `tool_calls`. Each call is
/// `(id, name, arguments)` where `arguments` is the JSON *string* OpenAI sends.
#[must_use]
pub fn tool_call_completion(calls: &[(&str, &str, &str)]) -> Scripted {
    let tool_calls: Vec<Value> = calls
        .iter()
        .map(|(id, name, arguments)| {
            json!({"id": id, "type": "function", "function": {"name": name, "arguments": arguments}})
        })
        .collect();
    let message = json!({
        "role": "assistant",
        "content": null,
        "tool_calls": tool_calls,
        "refusal": null,
        "annotations": []
    });
    json_response(200, &completion_body(COMPLETION_ID, MODEL, message, "tool_calls", usage_json(40, 18, 0, 0)))
}

/// The model refused: `content` is null and `refusal` holds the text; OpenAI still reports
/// `finish_reason: "stop"`, so only the `refusal` field tells.
#[must_use]
pub fn refusal(text: &str) -> Scripted {
    let message = json!({"role": "assistant", "content": null, "refusal": text, "annotations": []});
    json_response(
        200,
        &completion_body(COMPLETION_ID, MODEL, message, "stop", usage_json(10, approx_tokens(text), 0, 0)),
    )
}

/// The answer hit the token cap: partial text, `finish_reason: "length"`.
#[must_use]
pub fn length_truncated(text: &str) -> Scripted {
    completion_with_finish(text, "length")
}

/// The answer was withheld: `finish_reason: "content_filter"`.
#[must_use]
pub fn content_filtered(text: &str) -> Scripted {
    completion_with_finish(text, "content_filter")
}

/// `GET /v1/models` body.
#[must_use]
pub fn models_body(ids: &[&str]) -> Value {
    let data: Vec<Value> =
        ids.iter().map(|id| json!({"id": id, "object": "model", "created": CREATED, "owned_by": "system"})).collect();
    json!({"object": "list", "data": data})
}

// ---------------------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------------------

/// OpenAI's error envelope `{"error":{"message","type","param","code"}}`.
#[must_use]
pub fn error_body(error_type: &str, code: Option<&str>, param: Option<&str>, message: &str) -> Value {
    json!({"error": {"message": message, "type": error_type, "param": param, "code": code}})
}

/// An error answer with `param: null`.
#[must_use]
pub fn error(status: u16, error_type: &str, code: Option<&str>, message: &str) -> Scripted {
    json_response(status, &error_body(error_type, code, None, message))
}

/// 429 `insufficient_quota`: out of credits. Must not be retried.
#[must_use]
pub fn insufficient_quota() -> Scripted {
    error(429, "insufficient_quota", Some("insufficient_quota"), INSUFFICIENT_QUOTA_MESSAGE)
}

/// 429 `rate_limit_exceeded` with `retry-after` and exhausted `x-ratelimit-*` headers.
#[must_use]
pub fn rate_limited(retry_after_secs: u64) -> Scripted {
    let message = format!(
        "Rate limit reached for gpt-4o-mini in organization org-weirfake on requests per min (RPM): \
         Limit 500, Used 500, Requested 1. Please try again in {retry_after_secs}s. \
         Visit https://platform.openai.com/account/rate-limits to learn more."
    );
    let body = error_body("requests", Some("rate_limit_exceeded"), None, &message);
    let mut headers = json_headers(REQUEST_ID);
    headers.push(("retry-after".into(), retry_after_secs.to_string()));
    headers.push(("retry-after-ms".into(), (retry_after_secs.saturating_mul(1000)).to_string()));
    headers.extend(ratelimit_headers(0, 0, &format!("{retry_after_secs}s")));
    Scripted::Respond { status: 429, headers, body: Bytes::from(body.to_string()) }
}

/// 401 `invalid_api_key`.
#[must_use]
pub fn invalid_api_key() -> Scripted {
    error(
        401,
        "invalid_request_error",
        Some("invalid_api_key"),
        "Incorrect API key provided: sk-weir****fake. You can find your API key at \
         https://platform.openai.com/account/api-keys.",
    )
}

/// 404 `model_not_found`.
#[must_use]
pub fn model_not_found(model: &str) -> Scripted {
    error(
        404,
        "invalid_request_error",
        Some("model_not_found"),
        &format!("The model `{model}` does not exist or you do not have access to it."),
    )
}

/// 400 `context_length_exceeded` (OpenAI names `messages` as the offending param).
#[must_use]
pub fn context_length_exceeded() -> Scripted {
    json_response(
        400,
        &error_body(
            "invalid_request_error",
            Some("context_length_exceeded"),
            Some("messages"),
            "This model's maximum context length is 128000 tokens. However, your messages \
             resulted in 130532 tokens. Please reduce the length of the messages.",
        ),
    )
}

/// 500 `server_error`: retryable.
#[must_use]
pub fn server_error() -> Scripted {
    error(500, "server_error", None, SERVER_ERROR_MESSAGE)
}

/// 503 overloaded: retryable with backoff.
#[must_use]
pub fn overloaded_503() -> Scripted {
    error(503, "server_error", None, "The engine is currently overloaded, please try again later")
}

/// 502 with an HTML body, as a CDN in front of the API answers: a client must not try to
/// parse it as JSON, and no raw text of it may reach a caller.
#[must_use]
pub fn bad_gateway_html() -> Scripted {
    let html = "<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n\
                <center><h1>502 Bad Gateway</h1></center>\r\n<hr><center>cloudflare</center>\r\n\
                </body>\r\n</html>\r\n";
    Scripted::Respond {
        status: 502,
        headers: vec![("content-type".into(), "text/html".into())],
        body: Bytes::from(html),
    }
}

/// vLLM's error body: OpenAI's envelope, but `code` is the integer HTTP status and `type` a
/// Python exception name.
#[must_use]
pub fn vllm_error_body(status: u16, message: &str) -> Value {
    let error_type = match status {
        404 => "NotFoundError",
        500.. => "InternalServerError",
        _ => "BadRequestError",
    };
    json!({"error": {"message": message, "type": error_type, "param": null, "code": status}})
}

/// A vLLM error answer (no OpenAI diagnostic headers; vLLM sends none).
#[must_use]
pub fn vllm_error(status: u16, message: &str) -> Scripted {
    Scripted::Respond {
        status,
        headers: vec![("content-type".into(), "application/json".into())],
        body: Bytes::from(vllm_error_body(status, message).to_string()),
    }
}

// ---------------------------------------------------------------------------------------
// Streaming
// ---------------------------------------------------------------------------------------

/// One SSE event: `data: <json>\n\n`.
#[must_use]
pub fn sse_frame(value: &Value) -> Bytes {
    Bytes::from(format!("data: {value}\n\n"))
}

/// The terminator OpenAI sends last.
#[must_use]
pub fn sse_done() -> Bytes {
    Bytes::from_static(b"data: [DONE]\n\n")
}

/// A `chat.completion.chunk` with one choice. `usage` is `Some(Value::Null)` when the request
/// asked for usage (OpenAI then puts `"usage": null` on every chunk but the last), `None` to
/// leave the key out.
#[must_use]
pub fn chunk_json(id: &str, model: &str, delta: Value, finish_reason: Option<&str>, usage: Option<Value>) -> Value {
    let mut chunk = json!({
        "id": id,
        "object": "chat.completion.chunk",
        "created": CREATED,
        "model": model,
        "service_tier": "default",
        "system_fingerprint": SYSTEM_FINGERPRINT,
        "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish_reason}]
    });
    if let (Some(usage), Some(object)) = (usage, chunk.as_object_mut()) {
        object.insert("usage".into(), usage);
    }
    chunk
}

/// The usage-only chunk OpenAI sends before `[DONE]` when `stream_options.include_usage`.
#[must_use]
pub fn usage_chunk_json(id: &str, model: &str, usage: Value) -> Value {
    json!({
        "id": id,
        "object": "chat.completion.chunk",
        "created": CREATED,
        "model": model,
        "service_tier": "default",
        "system_fingerprint": SYSTEM_FINGERPRINT,
        "choices": [],
        "usage": usage
    })
}

/// The frames of a whole text stream as OpenAI sends it with `include_usage`: the role chunk,
/// one chunk per piece of `texts`, the finish chunk, a usage chunk and `data: [DONE]`.
#[must_use]
pub fn sse_text_frames(id: &str, model: &str, texts: &[&str], finish_reason: &str, usage: Option<Value>) -> Vec<Bytes> {
    // With include_usage every chunk but the last carries `"usage": null`; without it the
    // key is absent.
    let null_usage = usage.as_ref().map(|_| Value::Null);
    let mut frames = Vec::with_capacity(texts.len() + 4);
    frames.push(sse_frame(&chunk_json(
        id,
        model,
        json!({"role": "assistant", "content": "", "refusal": null}),
        None,
        null_usage.clone(),
    )));
    for text in texts {
        frames.push(sse_frame(&chunk_json(id, model, json!({"content": text}), None, null_usage.clone())));
    }
    frames.push(sse_frame(&chunk_json(id, model, json!({}), Some(finish_reason), null_usage)));
    if let Some(usage) = usage {
        frames.push(sse_frame(&usage_chunk_json(id, model, usage)));
    }
    frames.push(sse_done());
    frames
}

/// A complete text stream (`stop`, usage chunk with estimated counts, `[DONE]`).
#[must_use]
pub fn sse_chunks(texts: &[&str]) -> Vec<Bytes> {
    let completion: u64 = texts.iter().map(|t| approx_tokens(t)).sum();
    sse_text_frames(COMPLETION_ID, MODEL, texts, "stop", Some(usage_json(10, completion, 0, 0)))
}

/// The frames of one streamed tool call: the first fragment carries `id`, `type` and
/// `name`; the arguments arrive as the given string fragments; the finish chunk says
/// `tool_calls`.
#[must_use]
pub fn sse_tool_call_chunks(id: &str, name: &str, argument_fragments: &[&str]) -> Vec<Bytes> {
    let mut frames = vec![sse_frame(&chunk_json(
        COMPLETION_ID,
        MODEL,
        json!({"role": "assistant", "content": null, "tool_calls": [
            {"index": 0, "id": id, "type": "function", "function": {"name": name, "arguments": ""}}
        ]}),
        None,
        None,
    ))];
    for fragment in argument_fragments {
        frames.push(sse_frame(&chunk_json(
            COMPLETION_ID,
            MODEL,
            json!({"tool_calls": [{"index": 0, "function": {"arguments": fragment}}]}),
            None,
            None,
        )));
    }
    frames.push(sse_frame(&chunk_json(COMPLETION_ID, MODEL, json!({}), Some("tool_calls"), None)));
    frames.push(sse_done());
    frames
}

/// An error inside a 200 stream: `data: <json>\n\n` where `error` is the whole object to send
/// (normally `{"error": {...}}`, see [`stream_error_json`]).
#[must_use]
pub fn sse_error_frame(error: &Value) -> Bytes {
    sse_frame(error)
}

/// The mid-stream error OpenAI was captured sending (no `param`, no `code`).
#[must_use]
pub fn stream_error_json() -> Value {
    json!({"error": {"message": SERVER_ERROR_MESSAGE, "type": "server_error"}})
}

/// llama.cpp's mid-stream error: an SSE *field* named `error`, which spec-compliant SSE
/// parsers drop silently (reference section 4.5).
#[must_use]
pub fn llamacpp_error_line(code: u16, error_type: &str, message: &str) -> Bytes {
    let body = json!({"code": code, "message": message, "type": error_type});
    Bytes::from(format!("error: {body}\n\n"))
}

/// Ollama's mid-stream error: a raw JSON line with no `data:` prefix.
#[must_use]
pub fn ollama_error_line(message: &str) -> Bytes {
    let body = json!({"error": {"message": message, "type": "api_error", "param": null, "code": null}});
    Bytes::from(format!("{body}\n"))
}

/// A 200 SSE answer sending `chunks` back to back.
#[must_use]
pub fn stream(chunks: Vec<Bytes>) -> Scripted {
    stream_with_pause(chunks, Duration::ZERO)
}

/// A 200 SSE answer sending `chunks`, then cutting the connection without ending the body.
#[must_use]
pub fn stream_then_drop(chunks: Vec<Bytes>) -> Scripted {
    Scripted::StreamThenDrop { status: 200, headers: sse_headers(REQUEST_ID), chunks }
}

/// A 200 SSE answer pausing `pause` between chunks (to test timeouts and incremental relay).
#[must_use]
pub fn stream_with_pause(chunks: Vec<Bytes>, pause: Duration) -> Scripted {
    Scripted::Stream { status: 200, headers: sse_headers(REQUEST_ID), chunks, pause }
}

// ---------------------------------------------------------------------------------------
// Reading streams (for assertions on what a gateway or the fake sent)
// ---------------------------------------------------------------------------------------

/// The `data` of every SSE event in `body`, parsed as the WHATWG rules in the reference say:
/// a blank line dispatches, `:` lines are comments, one space after the colon is stripped,
/// several `data:` lines join with `\n`, other fields (`event`, `id`, llama.cpp's `error`)
/// are ignored. Includes the final `[DONE]`.
#[must_use]
pub fn sse_data(body: &str) -> Vec<String> {
    let mut events = Vec::new();
    let mut data: Option<String> = None;
    for line in body.split('\n') {
        let line = line.strip_suffix('\r').unwrap_or(line);
        if line.is_empty() {
            events.extend(data.take());
            continue;
        }
        if line.starts_with(':') {
            continue;
        }
        let (field, value) = line.split_once(':').unwrap_or((line, ""));
        let value = value.strip_prefix(' ').unwrap_or(value);
        if field == "data" {
            match &mut data {
                Some(joined) => {
                    joined.push('\n');
                    joined.push_str(value);
                }
                None => data = Some(value.to_owned()),
            }
        }
    }
    // A stream cut without the final blank line: the last event never dispatched.
    events
}

/// The JSON chunks of an OpenAI stream body, without `[DONE]`; panics on a non-JSON event.
#[must_use]
pub fn sse_json(body: &str) -> Vec<Value> {
    sse_data(body)
        .iter()
        .filter(|data| data.as_str() != "[DONE]")
        .map(|data| serde_json::from_str(data).unwrap_or_else(|e| panic!("SSE event is not JSON ({e}): {data}")))
        .collect()
}

/// The concatenated `choices[0].delta.content` of an OpenAI stream body.
#[must_use]
pub fn streamed_text(body: &str) -> String {
    sse_json(body)
        .iter()
        .filter_map(|chunk| chunk.pointer("/choices/0/delta/content").and_then(Value::as_str))
        .collect()
}

// ---------------------------------------------------------------------------------------
// Embeddings (reference 2.7) and rerank
// ---------------------------------------------------------------------------------------

/// The model scripted embeddings answers report.
pub const EMBEDDING_MODEL: &str = "text-embedding-3-small";
/// The model scripted rerank answers report.
pub const RERANK_MODEL: &str = "BAAI/bge-reranker-v2-m3";
/// The id scripted rerank answers carry (vLLM puts one in the body).
pub const RERANK_ID: &str = "rerank-weirfake0000000000000000000";

/// How an embeddings answer carries its vectors (`encoding_format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    /// JSON numbers.
    Float,
    /// The little-endian `f32` bytes of each vector, base64 (what the official Python
    /// client asks for by default).
    Base64,
}

/// A vector as `encoding_format: "base64"` sends it: its little-endian `f32` bytes, base64.
#[must_use]
pub fn base64_vector(vector: &[f32]) -> String {
    let bytes: Vec<u8> = vector.iter().flat_map(|number| number.to_le_bytes()).collect();
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// The inverse of [`base64_vector`]; panics on text that is not base64 of whole `f32`s.
#[must_use]
pub fn vector_from_base64(text: &str) -> Vec<f32> {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(text)
        .unwrap_or_else(|e| panic!("embedding is not base64 ({e}): {text}"));
    assert!(bytes.len().is_multiple_of(4), "base64 embedding of {} bytes is not whole f32s", bytes.len());
    bytes.chunks_exact(4).map(|chunk| f32::from_le_bytes([chunk[0], chunk[1], chunk[2], chunk[3]])).collect()
}

/// The `data` items of an embeddings answer, `index` = position in `vectors`, listed in
/// `order` (positions into `vectors`; the API does not promise index order).
#[must_use]
pub fn embedding_items(vectors: &[Vec<f32>], order: &[usize], encoding: Encoding) -> Vec<Value> {
    order
        .iter()
        .map(|&index| {
            let embedding = match encoding {
                Encoding::Float => json!(vectors[index]),
                Encoding::Base64 => json!(base64_vector(&vectors[index])),
            };
            json!({"object": "embedding", "index": index, "embedding": embedding})
        })
        .collect()
}

/// A whole embeddings answer in index order: `{"object":"list","data":[..],"model",
/// "usage":{"prompt_tokens","total_tokens"}}`.
#[must_use]
pub fn embeddings_body(model: &str, vectors: &[Vec<f32>], encoding: Encoding, prompt_tokens: u64) -> Value {
    let order: Vec<usize> = (0..vectors.len()).collect();
    embeddings_body_in_order(model, vectors, &order, encoding, prompt_tokens)
}

/// [`embeddings_body`] with the `data` items listed in `order`.
#[must_use]
pub fn embeddings_body_in_order(
    model: &str,
    vectors: &[Vec<f32>],
    order: &[usize],
    encoding: Encoding,
    prompt_tokens: u64,
) -> Value {
    json!({
        "object": "list",
        "data": embedding_items(vectors, order, encoding),
        "model": model,
        "usage": {"prompt_tokens": prompt_tokens, "total_tokens": prompt_tokens}
    })
}

/// A scripted 200 embeddings answer with these vectors (as floats, in index order).
#[must_use]
pub fn embeddings(vectors: &[Vec<f32>], prompt_tokens: u64) -> Scripted {
    json_response(200, &embeddings_body(EMBEDDING_MODEL, vectors, Encoding::Float, prompt_tokens))
}

/// A scripted 200 embeddings answer listing its items last index first: whoever reads it
/// must order by `index`.
#[must_use]
pub fn embeddings_reversed(vectors: &[Vec<f32>], prompt_tokens: u64) -> Scripted {
    let order: Vec<usize> = (0..vectors.len()).rev().collect();
    json_response(200, &embeddings_body_in_order(EMBEDDING_MODEL, vectors, &order, Encoding::Float, prompt_tokens))
}

/// The vectors of an OpenAI embeddings answer (a provider's or a gateway's), by `index`,
/// whether floats or base64; panics on anything else, or on a missing or repeated index.
#[must_use]
pub fn embedding_vectors(answer: &Value) -> Vec<Vec<f32>> {
    let items = answer["data"].as_array().unwrap_or_else(|| panic!("no data array in {answer}"));
    let mut vectors: Vec<Option<Vec<f32>>> = vec![None; items.len()];
    for item in items {
        let index = item["index"].as_u64().unwrap_or_else(|| panic!("item without index: {item}"));
        let vector = match &item["embedding"] {
            Value::String(text) => vector_from_base64(text),
            Value::Array(numbers) => {
                numbers.iter().map(|n| n.as_f64().unwrap_or_else(|| panic!("not a number: {n}")) as f32).collect()
            }
            other => panic!("embedding is neither floats nor base64: {other}"),
        };
        let slot = &mut vectors[usize::try_from(index).unwrap()];
        assert!(slot.is_none(), "index {index} twice in {answer}");
        *slot = Some(vector);
    }
    vectors.into_iter().enumerate().map(|(i, v)| v.unwrap_or_else(|| panic!("index {i} missing"))).collect()
}

/// A rerank answer as vLLM sends it: `results` of `{index, document: {text}, relevance_score}`
/// in the order given (best first, normally), `usage` with `prompt_tokens` and
/// `total_tokens`. `documents` supplies each result's echoed text (`None` leaves `document`
/// out, as Jina does with `return_documents: false`).
#[must_use]
pub fn rerank_body(model: &str, results: &[(u32, f64)], documents: Option<&[String]>, prompt_tokens: u64) -> Value {
    let results: Vec<Value> = results
        .iter()
        .map(|&(index, score)| {
            let mut result = json!({"index": index, "relevance_score": score});
            if let Some(documents) = documents {
                let text = documents.get(index as usize).cloned().unwrap_or_default();
                result["document"] = json!({"text": text});
            }
            result
        })
        .collect();
    json!({
        "id": RERANK_ID,
        "model": model,
        "usage": {"prompt_tokens": prompt_tokens, "total_tokens": prompt_tokens},
        "results": results
    })
}

/// A scripted 200 rerank answer with these `(index, relevance_score)` results as given.
#[must_use]
pub fn rerank(results: &[(u32, f64)], prompt_tokens: u64) -> Scripted {
    Scripted::Respond {
        status: 200,
        headers: vec![("content-type".into(), "application/json".into())],
        body: Bytes::from(rerank_body(RERANK_MODEL, results, None, prompt_tokens).to_string()),
    }
}

/// The `(index, relevance_score)` pairs of a rerank answer, in its order.
#[must_use]
pub fn rerank_results(answer: &Value) -> Vec<(u32, f64)> {
    answer["results"]
        .as_array()
        .unwrap_or_else(|| panic!("no results array in {answer}"))
        .iter()
        .map(|result| {
            let index = result["index"].as_u64().unwrap_or_else(|| panic!("result without index: {result}"));
            let score = result["relevance_score"].as_f64().unwrap_or_else(|| panic!("result without score: {result}"));
            (u32::try_from(index).unwrap(), score)
        })
        .collect()
}

/// A gateway config with two `openai-compatible` entries on `base_url`: `embed`, an
/// embeddings entry (wire id `text-embedding-3-small`) pinned at `dimensions`, and
/// `rerank`, a rerank entry (wire id `bge-reranker-v2-m3`); two retries to spare, a 5 s
/// read timeout.
pub fn embeddings_config(base_url: &str, dimensions: u32) -> String {
    format!(
        r#"
read_timeout_secs = 5

[[model]]
id = "embed"
provider = "openai-compatible"
kind = "embedding"
wire_id = "text-embedding-3-small"
endpoint = "{base_url}"
embedding_dimensions = {dimensions}
context_window = 8192
max_retries = 2

[[model]]
id = "rerank"
provider = "openai-compatible"
kind = "rerank"
wire_id = "bge-reranker-v2-m3"
endpoint = "{base_url}"
context_window = 8192
max_retries = 2
"#
    )
}

/// A gateway config with one `openai-compatible` entry, `chat` (wire id
/// `qwen3`), on `base_url`: 100 output tokens declared, two retries to spare,
/// a 5 s read timeout.
pub fn chat_config(base_url: &str) -> String {
    format!(
        r#"
read_timeout_secs = 5

[[model]]
id = "chat"
provider = "openai-compatible"
wire_id = "qwen3"
endpoint = "{base_url}"
max_output_tokens = 1000
context_window = 10000
output_tokens = 100
max_retries = 2
"#
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body_of(scripted: &Scripted) -> Value {
        match scripted {
            Scripted::Respond { body, .. } => serde_json::from_slice(body).unwrap(),
            other => panic!("not a Respond: {other:?}"),
        }
    }

    #[test]
    fn approx_tokens_rounds_up() {
        assert_eq!(approx_tokens(""), 0);
        assert_eq!(approx_tokens("abc"), 1);
        assert_eq!(approx_tokens("abcd"), 1);
        assert_eq!(approx_tokens("abcde"), 2);
        assert_eq!(approx_tokens("éééé"), 1, "counts characters, not bytes");
    }

    #[test]
    fn error_envelope_has_all_four_fields() {
        let body = body_of(&insufficient_quota());
        assert_eq!(body["error"]["type"], "insufficient_quota");
        assert_eq!(body["error"]["code"], "insufficient_quota");
        assert_eq!(body["error"]["message"], INSUFFICIENT_QUOTA_MESSAGE);
        assert!(body["error"]["param"].is_null());
        assert_eq!(body["error"].as_object().unwrap().len(), 4);
    }

    #[test]
    fn rate_limited_carries_retry_headers() {
        let Scripted::Respond { status, headers, .. } = rate_limited(7) else {
            panic!("not a Respond");
        };
        assert_eq!(status, 429);
        let get = |name: &str| headers.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone());
        assert_eq!(get("retry-after").as_deref(), Some("7"));
        assert_eq!(get("x-ratelimit-remaining-requests").as_deref(), Some("0"));
        assert_eq!(get("x-ratelimit-reset-requests").as_deref(), Some("7s"));
    }

    #[test]
    fn vllm_code_is_an_integer() {
        let body = vllm_error_body(400, "bad");
        assert_eq!(body["error"]["code"], 400);
        assert_eq!(body["error"]["type"], "BadRequestError");
        assert_eq!(vllm_error_body(503, "x")["error"]["type"], "InternalServerError");
    }

    #[test]
    fn tool_call_arguments_stay_a_string() {
        let body = body_of(&tool_call_completion(&[("call_1", "get_weather", r#"{"city":"Paris"}"#)]));
        let choice = &body["choices"][0];
        assert_eq!(choice["finish_reason"], "tool_calls");
        assert!(choice["message"]["content"].is_null());
        assert_eq!(choice["message"]["tool_calls"][0]["function"]["arguments"], r#"{"city":"Paris"}"#);
    }

    #[test]
    fn refusal_reports_stop_with_refusal_text() {
        let body = body_of(&refusal("I can't help with that."));
        assert_eq!(body["choices"][0]["finish_reason"], "stop");
        assert!(body["choices"][0]["message"]["content"].is_null());
        assert_eq!(body["choices"][0]["message"]["refusal"], "I can't help with that.");
    }

    #[test]
    fn sse_chunks_follow_openai_framing() {
        let frames = sse_chunks(&["Hel", "lo"]);
        assert_eq!(frames.len(), 6, "role, 2 content, finish, usage, done");
        for frame in &frames {
            assert!(frame.starts_with(b"data: ") && frame.ends_with(b"\n\n"));
        }
        assert_eq!(frames[5], sse_done());
        let usage: Value = serde_json::from_slice(&frames[4][6..]).unwrap();
        assert_eq!(usage["choices"], json!([]));
        assert_eq!(usage["usage"]["completion_tokens"], 2);
        let first: Value = serde_json::from_slice(&frames[0][6..]).unwrap();
        assert!(first["usage"].is_null() && first.get("usage").is_some());
    }

    #[test]
    fn sse_without_usage_omits_the_key() {
        let frames = sse_text_frames("id", "m", &["x"], "stop", None);
        let first: Value = serde_json::from_slice(&frames[0][6..]).unwrap();
        assert!(first.get("usage").is_none());
        assert_eq!(frames.len(), 4);
    }

    #[test]
    fn sse_parser_follows_the_whatwg_rules() {
        let body = ": keep-alive\n\ndata: a\ndata:b\n\nevent: x\r\ndata: {\"k\":1}\r\n\r\nerror: {}\n\ndata: cut";
        assert_eq!(sse_data(body), vec!["a\nb", "{\"k\":1}"]);
    }

    #[test]
    fn streamed_text_joins_deltas() {
        let body: String = sse_chunks(&["Hel", "lo"]).iter().map(|b| String::from_utf8_lossy(b).into_owned()).collect();
        assert_eq!(streamed_text(&body), "Hello");
        assert_eq!(sse_data(&body).last().map(String::as_str), Some("[DONE]"));
    }
    #[test]
    fn base64_is_little_endian_f32() {
        assert_eq!(base64_vector(&[1.0, 2.0]), "AACAPwAAAEA=");
        let vector = vec![0.1_f32, -0.25, 3.5e-8, f32::MIN_POSITIVE];
        assert_eq!(vector_from_base64(&base64_vector(&vector)), vector);
    }

    #[test]
    fn embedding_bodies_carry_index_usage_and_model() {
        let vectors = vec![vec![0.5_f32, -0.5], vec![0.25, 0.75]];
        let body = embeddings_body("m", &vectors, Encoding::Float, 7);
        assert_eq!(body["object"], "list");
        assert_eq!(body["model"], "m");
        assert_eq!(body["usage"], json!({"prompt_tokens": 7, "total_tokens": 7}));
        assert_eq!(body["data"][1], json!({"object": "embedding", "index": 1, "embedding": [0.25, 0.75]}));
        let base64 = embeddings_body("m", &vectors, Encoding::Base64, 7);
        assert_eq!(base64["data"][0]["embedding"], base64_vector(&vectors[0]));
        assert_eq!(embedding_vectors(&base64), vectors);
    }

    #[test]
    fn reversed_embeddings_read_back_by_index() {
        let vectors = vec![vec![1.0_f32], vec![2.0], vec![3.0]];
        let body = body_of(&embeddings_reversed(&vectors, 3));
        let listed: Vec<u64> = body["data"].as_array().unwrap().iter().map(|i| i["index"].as_u64().unwrap()).collect();
        assert_eq!(listed, vec![2, 1, 0]);
        assert_eq!(embedding_vectors(&body), vectors);
    }

    #[test]
    #[should_panic(expected = "index 0 twice")]
    fn embedding_vectors_refuse_a_repeated_index() {
        let _ =
            embedding_vectors(&json!({"data": [{"index": 0, "embedding": [1.0]}, {"index": 0, "embedding": [2.0]}]}));
    }

    #[test]
    fn rerank_bodies_echo_documents_when_given() {
        let documents = vec!["a".to_owned(), "b".to_owned()];
        let body = rerank_body("r", &[(1, 0.9), (0, 0.1)], Some(&documents), 4);
        assert_eq!(body["results"][0], json!({"index": 1, "relevance_score": 0.9, "document": {"text": "b"}}));
        assert_eq!(body["usage"]["prompt_tokens"], 4);
        assert_eq!(rerank_results(&body), vec![(1, 0.9), (0, 0.1)]);
        let bare = body_of(&rerank(&[(0, 0.5)], 2));
        assert!(bare["results"][0].get("document").is_none());
        assert_eq!(bare["model"], RERANK_MODEL);
    }
}
