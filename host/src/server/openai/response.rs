//! [`ChatResponse`] → an OpenAI `chat.completion` object. Usage is reported the
//! OpenAI way: `prompt_tokens` is the whole prompt, cached tokens a subset.

use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};

use crate::chat::ChatResponse;
use crate::types::{ContentBlock, StopReason, Usage};

/// A fresh completion id and the `created` time of an answer that ended at
/// `at`. The id is unique across a fleet (a time-ordered UUID with random
/// bits, not a per-process counter, which two gateways would repeat).
pub(super) fn completion_id(at: SystemTime) -> (String, u64) {
    let created = at.duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or_default();
    (format!("chatcmpl-weir-{}", uuid::Uuid::now_v7().simple()), created)
}

pub fn completion_body(response: &ChatResponse) -> Value {
    let (id, created) = completion_id(response.stamp.ended_at);
    json!({
        "id": id,
        "object": "chat.completion",
        "created": created,
        "model": response.stamp.model,
        "choices": [{
            "index": 0,
            "message": message(response),
            "logprobs": null,
            "finish_reason": finish_reason(response.stop_reason),
        }],
        "usage": response.usage.as_ref().map(usage),
    })
}

fn message(response: &ChatResponse) -> Value {
    let text = response.text();
    let reasoning: String = response
        .content
        .iter()
        .filter_map(|block| match block {
            ContentBlock::Thinking(thinking) if !thinking.redacted => Some(thinking.text.as_str()),
            _ => None,
        })
        .collect();
    let mut message = json!({
        "role": "assistant",
        "content": if text.is_empty() { Value::Null } else { Value::String(text) },
        "refusal": response.refusal.as_ref().and_then(|r| r.explanation.clone()),
    });
    let calls: Vec<Value> = response
        .tool_calls()
        .into_iter()
        .map(|call| json!({"id": call.id, "type": "function", "function": {"name": call.name, "arguments": call.input_json}}))
        .collect();
    if !calls.is_empty() {
        message["tool_calls"] = Value::Array(calls);
    }
    if !reasoning.is_empty() {
        message["reasoning_content"] = Value::String(reasoning);
    }
    message
}

pub(super) fn finish_reason(reason: StopReason) -> &'static str {
    match reason {
        StopReason::EndTurn | StopReason::StopSequence | StopReason::Pause | StopReason::Other => "stop",
        StopReason::MaxTokens | StopReason::ContextWindowExceeded => "length",
        StopReason::ToolUse => "tool_calls",
        StopReason::ContentFiltered => "content_filter",
    }
}

pub(super) fn usage(usage: &Usage) -> Value {
    let prompt = usage.total_input();
    json!({
        "prompt_tokens": prompt,
        "completion_tokens": usage.output,
        "total_tokens": prompt + usage.output,
        "prompt_tokens_details": {"cached_tokens": usage.cache_read},
        "completion_tokens_details": {"reasoning_tokens": usage.reasoning.unwrap_or(0)},
    })
}
