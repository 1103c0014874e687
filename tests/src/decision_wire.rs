//! The decision wire (`docs/src/providers/decision-wire.md`) as a fake endpoint speaks it:
//! a deterministic answer to any valid request ([`fake_decision`], what the
//! fake upstream's `POST /v1/decisions` answers when nothing is scripted), and
//! builders for scripted answers — a chosen distribution, an error status with
//! the wire's error body, and each kind of malformed answer.

use bytes::Bytes;
use serde_json::{Map, Value, json};

use crate::Scripted;

/// The served model the fake reports.
pub const SERVED_MODEL: &str = "fake-decider-2026-11";
/// The request id the fake reports.
pub const REQUEST_ID: &str = "dec_fake_0001";

/// A question's outcomes, as the wire defines them (`None` for a shape the
/// wire does not have).
#[must_use]
pub fn outcomes(question: &Value) -> Option<Vec<String>> {
    match question.get("shape")?.as_str()? {
        "choice" => question.get("options")?.as_array()?.iter().map(|o| o.as_str().map(str::to_owned)).collect(),
        "noul" => Some(vec!["true".into(), "false".into(), "null".into()]),
        "score" => {
            let (min, max) = (question.get("min")?.as_i64()?, question.get("max")?.as_i64()?);
            (min < max).then(|| (min..=max).map(|value| value.to_string()).collect())
        }
        _ => None,
    }
}

/// The fake's input tokens for a request body: one per four bytes, at least one.
#[must_use]
pub fn billed_tokens(body: &[u8]) -> u64 {
    (body.len() as u64).div_ceil(4).max(1)
}

/// The fake's answer to `request`: for each question, in the request's order,
/// a distribution whose weights come from FNV-1a of the state and the
/// question's id and outcome (so answers differ by state and question, and a
/// test can predict them exactly). `None` when the request is not the wire's.
#[must_use]
pub fn fake_decision(request: &Value, body: &[u8]) -> Option<Value> {
    request.get("model")?.as_str()?;
    let state = request.get("state")?.to_string();
    let answers: Option<Vec<Value>> = request
        .get("questions")?
        .as_array()?
        .iter()
        .map(|question| {
            let id = question.get("id")?.as_str()?;
            let outcomes = outcomes(question)?;
            let weights: Vec<f64> =
                outcomes.iter().map(|o| 1.0 + (fnv(&format!("{state}|{id}|{o}")) % 100) as f64).collect();
            let total: f64 = weights.iter().sum();
            let distribution: Map<String, Value> =
                outcomes.into_iter().zip(weights.iter().map(|w| json!(w / total))).collect();
            Some(json!({"id": id, "distribution": distribution}))
        })
        .collect();
    Some(json!({
        "answers": answers?,
        "usage": {"input_tokens": billed_tokens(body)},
        "model": SERVED_MODEL,
        "request_id": REQUEST_ID,
    }))
}

fn fnv(text: &str) -> u64 {
    text.bytes()
        .fold(0xcbf2_9ce4_8422_2325_u64, |hash, byte| (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3))
}

/// A 200 with `body` as the wire's answer.
#[must_use]
pub fn answer(body: &Value) -> Scripted {
    json_response(200, Vec::new(), body)
}

/// A 200 answering each `(id, distribution)` as given, billed `input_tokens`.
#[must_use]
pub fn distributions(answers: &[(&str, Value)], input_tokens: Option<u64>) -> Scripted {
    let answers: Vec<Value> = answers.iter().map(|(id, d)| json!({"id": id, "distribution": d})).collect();
    let mut body = json!({"answers": answers, "model": SERVED_MODEL, "request_id": REQUEST_ID});
    if let Some(tokens) = input_tokens {
        body["usage"] = json!({"input_tokens": tokens});
    }
    answer(&body)
}

/// An error status with the wire's error body, and `retry-after` when given.
#[must_use]
pub fn error(status: u16, kind: &str, message: &str, retry_after: Option<&str>) -> Scripted {
    let headers = retry_after.map(|value| vec![("retry-after".to_owned(), value.to_owned())]).unwrap_or_default();
    json_response(status, headers, &json!({"error": {"type": kind, "message": message}}))
}

fn json_response(status: u16, mut headers: Vec<(String, String)>, body: &Value) -> Scripted {
    headers.push(("content-type".to_owned(), "application/json".to_owned()));
    Scripted::Respond { status, headers, body: Bytes::from(body.to_string()) }
}

/// An OpenAI chat completion of one output token (the first of `candidates`)
/// whose `logprobs` list `candidates` as `(token, probability)` for it, billed
/// `prompt_tokens` and one completion token: what OpenAI, vLLM and llama.cpp
/// answer a request with `logprobs: true` and `top_logprobs`.
#[must_use]
pub fn top_logprobs(candidates: &[(&str, f64)], prompt_tokens: u64) -> Scripted {
    let top: Vec<Value> = candidates
        .iter()
        .map(|(token, p)| json!({"token": token, "logprob": p.ln(), "bytes": token.as_bytes()}))
        .collect();
    let (first, p) = candidates.first().copied().unwrap_or(("", 1.0));
    let body = json!({
        "id": "chatcmpl-logprobs-1",
        "object": "chat.completion",
        "created": 1,
        "model": "qwen3-8b-instruct",
        "choices": [{
            "index": 0,
            "message": {"role": "assistant", "content": first},
            "logprobs": {"content": [{"token": first, "logprob": p.ln(), "bytes": first.as_bytes(), "top_logprobs": top}]},
            "finish_reason": "length"
        }],
        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": 1, "total_tokens": prompt_tokens + 1}
    });
    answer(&body)
}
