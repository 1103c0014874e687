//! Builders for what Google's Gemini API sends, on Google AI Studio and Vertex AI alike:
//! GenerateContentResponse bodies (candidates of `content.parts`, `finishReason`,
//! `usageMetadata`, `promptFeedback`), `streamGenerateContent?alt=sse` streams (one whole
//! GenerateContentResponse per `data:` line, `\r\n\r\n` between events, no terminator),
//! Google's error envelope (`{"error": {"code", "message", "status", "details"}}`) and
//! `batchEmbedContents` answers.
//!
//! Deterministic like the other wire modules: a fixed `responseId` and a dated
//! `modelVersion` that differs from any catalog id.

use std::time::Duration;

use bytes::Bytes;
use serde_json::{Value, json};

use crate::fake_upstream::Scripted;

/// The `modelVersion` scripted answers report.
pub const MODEL_VERSION: &str = "gemini-2.5-flash-preview-09-2025";
/// The `responseId` scripted answers carry.
pub const RESPONSE_ID: &str = "Xh7SaOWbCoKnz7IPtLHu0Qo";

fn json_headers() -> Vec<(String, String)> {
    vec![("content-type".to_owned(), "application/json; charset=UTF-8".to_owned())]
}

/// A text part.
#[must_use]
pub fn text_part(text: &str) -> Value {
    json!({"text": text})
}

/// A thought summary part.
#[must_use]
pub fn thought_part(text: &str) -> Value {
    json!({"text": text, "thought": true})
}

/// A function call part (whole: Gemini never splits one), with its thought signature.
#[must_use]
pub fn call_part(name: &str, args: Value, signature: Option<&str>) -> Value {
    let mut part = json!({"functionCall": {"name": name, "args": args}});
    if let Some(signature) = signature {
        part["thoughtSignature"] = json!(signature);
    }
    part
}

/// `usageMetadata`: prompt (cached included), candidates, thoughts and cached counts.
#[must_use]
pub fn usage(prompt: u64, candidates: u64, thoughts: u64, cached: u64) -> Value {
    let mut usage = json!({"promptTokenCount": prompt, "candidatesTokenCount": candidates,
                           "totalTokenCount": prompt + candidates + thoughts});
    if thoughts > 0 {
        usage["thoughtsTokenCount"] = json!(thoughts);
    }
    if cached > 0 {
        usage["cachedContentTokenCount"] = json!(cached);
    }
    usage
}

/// A GenerateContentResponse with one candidate.
#[must_use]
pub fn response_body(parts: Vec<Value>, finish_reason: Option<&str>, usage: Option<Value>) -> Value {
    let mut candidate = json!({"content": {"role": "model", "parts": parts}, "index": 0});
    if let Some(reason) = finish_reason {
        candidate["finishReason"] = json!(reason);
    }
    let mut body = json!({"candidates": [candidate], "modelVersion": MODEL_VERSION, "responseId": RESPONSE_ID});
    if let Some(usage) = usage {
        body["usageMetadata"] = usage;
    }
    body
}

/// A 200 answer with this body.
#[must_use]
pub fn json_response(status: u16, body: &Value) -> Scripted {
    Scripted::Respond { status, headers: json_headers(), body: Bytes::from(body.to_string()) }
}

/// A whole `generateContent` answer.
#[must_use]
pub fn answer(parts: Vec<Value>, finish_reason: &str, usage: Value) -> Scripted {
    json_response(200, &response_body(parts, Some(finish_reason), Some(usage)))
}

/// A prompt blocked before any candidate.
#[must_use]
pub fn blocked_prompt(reason: &str, prompt_tokens: u64) -> Scripted {
    json_response(
        200,
        &json!({"promptFeedback": {"blockReason": reason},
                "usageMetadata": {"promptTokenCount": prompt_tokens, "totalTokenCount": prompt_tokens},
                "modelVersion": MODEL_VERSION, "responseId": RESPONSE_ID}),
    )
}

/// One `alt=sse` event: `data: <GenerateContentResponse>` and a CRLF blank line.
#[must_use]
pub fn sse_chunk(body: &Value) -> Bytes {
    Bytes::from(format!("data: {body}\r\n\r\n"))
}

/// A streamed answer: each text piece a chunk, the last chunk carrying the finish reason
/// and the usage.
#[must_use]
pub fn text_stream(pieces: &[&str], finish_reason: &str, usage: Value) -> Vec<Bytes> {
    let last = pieces.len().saturating_sub(1);
    pieces
        .iter()
        .enumerate()
        .map(|(i, piece)| {
            let end = i == last;
            sse_chunk(&response_body(vec![text_part(piece)], end.then_some(finish_reason), end.then(|| usage.clone())))
        })
        .collect()
}

/// The stream's scripted answer (`text/event-stream`).
#[must_use]
pub fn stream(chunks: Vec<Bytes>) -> Scripted {
    Scripted::Stream {
        status: 200,
        headers: vec![("content-type".to_owned(), "text/event-stream".to_owned())],
        chunks,
        pause: Duration::from_millis(5),
    }
}

/// Google's error envelope.
#[must_use]
pub fn error_body(code: u16, status: &str, message: &str, details: Value) -> Value {
    json!({"error": {"code": code, "message": message, "status": status, "details": details}})
}

/// A failed answer with Google's error envelope and these extra headers.
#[must_use]
pub fn error(code: u16, status: &str, message: &str, details: Value, headers: &[(&str, &str)]) -> Scripted {
    let mut all = json_headers();
    all.extend(headers.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())));
    Scripted::Respond {
        status: code,
        headers: all,
        body: Bytes::from(error_body(code, status, message, details).to_string()),
    }
}

/// AI Studio's 429 for a quota named `quota_id` (`…PerMinute…` or `…PerDay…`), with its
/// `RetryInfo`.
#[must_use]
pub fn resource_exhausted(quota_id: &str, retry_delay: &str) -> Scripted {
    error(
        429,
        "RESOURCE_EXHAUSTED",
        "You exceeded your current quota, please check your plan and billing details.",
        json!([
            {"@type": "type.googleapis.com/google.rpc.QuotaFailure",
             "violations": [{"quotaMetric": "generativelanguage.googleapis.com/generate_content_paid_tier_requests",
                             "quotaId": quota_id, "quotaValue": "1000"}]},
            {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": retry_delay}
        ]),
        &[],
    )
}

/// A `batchEmbedContents` answer: one `values` list per vector.
#[must_use]
pub fn batch_embeddings(vectors: &[Vec<f32>]) -> Scripted {
    let embeddings: Vec<Value> = vectors.iter().map(|values| json!({"values": values})).collect();
    json_response(200, &json!({"embeddings": embeddings}))
}
