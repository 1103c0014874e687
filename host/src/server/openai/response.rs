//! [`ChatResponse`] → an OpenAI `chat.completion` object. Usage is reported the
//! OpenAI way: `prompt_tokens` is the whole prompt, cached tokens a subset.

use std::time::{SystemTime, UNIX_EPOCH};

use super::wire::{Completion, CompletionChoice, Function, Message, ToolCall, UsageCounts};
use crate::chat::ChatResponse;
use crate::types::{ContentBlock, StopReason};

/// A fresh completion id and the `created` time of an answer that ended at
/// `at`. The id is unique across a fleet (a time-ordered UUID with random
/// bits, not a per-process counter, which two gateways would repeat).
pub(super) fn completion_id(at: SystemTime) -> (String, u64) {
    let created = at.duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or_default();
    (format!("chatcmpl-weir-{}", uuid::Uuid::now_v7().simple()), created)
}

pub fn completion_body(response: &ChatResponse) -> Completion<'_> {
    let (id, created) = completion_id(response.stamp.ended_at);
    Completion {
        id,
        object: "chat.completion",
        created,
        model: &response.stamp.model,
        choices: [CompletionChoice {
            index: 0,
            message: message(response),
            logprobs: None,
            finish_reason: finish_reason(response.stop_reason),
        }],
        usage: response.usage.as_ref().map(UsageCounts::from),
    }
}

fn message(response: &ChatResponse) -> Message<'_> {
    let text = response.text();
    let reasoning_content: String = response
        .content
        .iter()
        .filter_map(|block| match block {
            ContentBlock::Thinking(thinking) if !thinking.redacted => Some(thinking.text.as_str()),
            _ => None,
        })
        .collect();
    let tool_calls = response
        .tool_calls()
        .into_iter()
        .map(|call| ToolCall {
            id: &call.id,
            kind: "function",
            function: Function { name: &call.name, arguments: &call.input_json },
        })
        .collect();
    Message {
        role: "assistant",
        content: (!text.is_empty()).then_some(text),
        refusal: response.refusal.as_ref().and_then(|refusal| refusal.explanation.as_deref()),
        tool_calls,
        reasoning_content,
    }
}

pub(super) fn finish_reason(reason: StopReason) -> &'static str {
    match reason {
        StopReason::EndTurn | StopReason::StopSequence | StopReason::Pause | StopReason::Other => "stop",
        StopReason::MaxTokens | StopReason::ContextWindowExceeded => "length",
        StopReason::ToolUse => "tool_calls",
        StopReason::ContentFiltered => "content_filter",
    }
}
