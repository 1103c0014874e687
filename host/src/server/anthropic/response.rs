//! [`ChatResponse`] → an Anthropic `message` object. Usage is reported the
//! Anthropic way, which is Weir's own: additive, `input_tokens` the uncached
//! part, cache writes and reads beside it.

use serde_json::{Value, json};

use crate::chat::{ChatResponse, NativeBlocks};
use crate::types::{AnswerBlock, ContentBlock, StopReason, Thinking, ToolUse, Usage};

/// A fresh message id: `msg_` and letters and digits, unique across a fleet
/// (a time-ordered UUID with random bits, not a per-process counter, which two
/// gateways started in the same second would repeat).
pub(super) fn message_id() -> String {
    format!("msg_weir{}", uuid::Uuid::now_v7().simple())
}

/// The whole answer. `stop` is the request's `stop_sequences`, to name the one
/// that matched when that is unambiguous; `omit_thinking` (`thinking.display:
/// "omitted"`) answers thinking blocks without their text, signatures kept.
///
/// An answer decoded with its own blocks ([`own_blocks`]) is written in the
/// provider's order with them in place, and its usage carries the provider's
/// own counts (`server_tool_use`).
pub fn message_body(response: &ChatResponse, stop: &[String], omit_thinking: bool) -> Value {
    let (content, usage) = match own_blocks(response.stamp.native_answer.as_deref()) {
        Some(own) => (
            in_provider_order(&response.content, own, omit_thinking),
            usage_with(response.usage.as_ref(), own.usage.as_ref()),
        ),
        None => (
            response.content.iter().filter_map(|block| content_block(block, omit_thinking)).collect(),
            usage(response.usage.as_ref()),
        ),
    };
    json!({
        "id": message_id(),
        "type": "message",
        "role": "assistant",
        "model": response.stamp.model,
        "content": content,
        "stop_reason": stop_reason(response.stop_reason),
        "stop_sequence": stop_sequence(response.stop_reason, stop),
        "usage": usage,
    })
}

/// The answer's own blocks, when they are written in this dialect (another
/// dialect's never reach this route's caller).
pub(super) fn own_blocks(native: Option<&NativeBlocks>) -> Option<&NativeBlocks> {
    native.filter(|native| native.dialect == super::DIALECT)
}

/// `content`'s blocks and the provider's own, in the provider's order. A
/// neutral index past `content` (never written by a component that keeps its
/// promise) is left out; an own block that is not a JSON object likewise.
pub(super) fn in_provider_order(content: &[ContentBlock], own: &NativeBlocks, omit_thinking: bool) -> Vec<Value> {
    own.blocks
        .iter()
        .filter_map(|block| match block {
            AnswerBlock::Neutral(index) => usize::try_from(*index)
                .ok()
                .and_then(|index| content.get(index))
                .and_then(|block| content_block(block, omit_thinking)),
            AnswerBlock::Native(json) => match serde_json::from_str::<Value>(json) {
                Ok(block @ Value::Object(_)) => Some(block),
                _ => {
                    tracing::warn!("a provider's own answer block is not a JSON object; left out");
                    None
                }
            },
        })
        .collect()
}

/// [`usage`] with the provider's own counts beside the tokens.
pub(super) fn usage_with(tokens: Option<&Usage>, own: Option<&Value>) -> Value {
    let mut written = usage(tokens);
    if let (Value::Object(written), Some(Value::Object(own))) = (&mut written, own) {
        for (name, value) in own {
            written.entry(name.clone()).or_insert_with(|| value.clone());
        }
    }
    written
}

/// An answer block as the Messages API shows it; inputs (images, documents,
/// tool results) never appear in an answer.
pub(super) fn content_block(block: &ContentBlock, omit_thinking: bool) -> Option<Value> {
    match block {
        ContentBlock::Text(text) => Some(json!({"type": "text", "text": text})),
        ContentBlock::ToolUse(call) => Some(tool_use(call)),
        ContentBlock::Thinking(Thinking { text, redacted: true, .. }) => {
            Some(json!({"type": "redacted_thinking", "data": text}))
        }
        ContentBlock::Thinking(Thinking { text, signature, redacted: false }) => {
            let text = if omit_thinking { "" } else { text.as_str() };
            Some(json!({"type": "thinking", "thinking": text, "signature": signature.as_deref().unwrap_or_default()}))
        }
        ContentBlock::Image(_) | ContentBlock::Document(_) | ContentBlock::ToolResult(_) => None,
    }
}

/// `input` is an object; arguments that do not parse as one (a call cut off by
/// the output limit) are logged and sent as an empty object.
fn tool_use(call: &ToolUse) -> Value {
    let input = match serde_json::from_str::<Value>(&call.input_json) {
        Ok(input @ Value::Object(_)) => input,
        _ => {
            if !call.input_json.trim().is_empty() {
                tracing::warn!(tool = %call.name, id = %call.id, "tool call arguments are not a JSON object; sent as {{}}");
            }
            json!({})
        }
    };
    json!({"type": "tool_use", "id": call.id, "name": call.name, "input": input})
}

pub(super) fn stop_reason(reason: StopReason) -> &'static str {
    match reason {
        StopReason::EndTurn | StopReason::Other => "end_turn",
        StopReason::MaxTokens => "max_tokens",
        StopReason::StopSequence => "stop_sequence",
        StopReason::ToolUse => "tool_use",
        StopReason::ContentFiltered => "refusal",
        StopReason::Pause => "pause_turn",
        StopReason::ContextWindowExceeded => "model_context_window_exceeded",
    }
}

/// The matched stop sequence: Weir's stop reason does not carry it, so it is
/// named only when the request gave exactly one.
pub(super) fn stop_sequence(reason: StopReason, stop: &[String]) -> Option<&str> {
    match (reason, stop) {
        (StopReason::StopSequence, [only]) => Some(only.as_str()),
        _ => None,
    }
}

pub(super) fn usage(usage: Option<&Usage>) -> Value {
    let usage = usage.cloned().unwrap_or(Usage { input: 0, output: 0, cache_read: 0, cache_write: 0, reasoning: None });
    json!({
        "input_tokens": usage.input,
        "output_tokens": usage.output,
        "cache_creation_input_tokens": usage.cache_write,
        "cache_read_input_tokens": usage.cache_read,
    })
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, SystemTime};

    use super::*;

    /// Ids carry random bits: two gateways started in the same instant do not
    /// repeat each other's (a per-process counter did).
    #[test]
    fn message_ids_are_letters_and_digits_and_never_repeat() {
        let ids: std::collections::HashSet<String> = (0..1000).map(|_| message_id()).collect();
        assert_eq!(ids.len(), 1000);
        assert!(
            ids.iter()
                .all(|id| id.strip_prefix("msg_").is_some_and(|rest| rest.bytes().all(|b| b.is_ascii_alphanumeric())))
        );
    }
    use crate::chat::Stamp;

    fn response(content: Vec<ContentBlock>, stop_reason: StopReason, usage: Option<Usage>) -> ChatResponse {
        ChatResponse {
            content,
            stop_reason,
            raw_stop_reason: None,
            usage,
            refusal: None,
            served_model: Some("gpt-4.1-2025-04-14".into()),
            request_id: None,
            stamp: Stamp {
                call_id: "call-1".into(),
                model: "chat".into(),
                role: None,
                provider: Some("openai".into()),
                requested_max_tokens: Some(100),
                attempts: 1,
                latency: Duration::ZERO,
                ended_at: SystemTime::UNIX_EPOCH,
                cache_multipliers: None,
                native_dropped: crate::NativeDropped::default(),
                passed_over: Vec::new(),
                fallback_from: None,
                cache: None,
                native_answer: None,
            },
        }
    }

    #[test]
    fn a_message_with_every_block_kind_and_additive_usage() {
        let content = vec![
            ContentBlock::Thinking(Thinking { text: "hmm".into(), signature: Some("sig".into()), redacted: false }),
            ContentBlock::Thinking(Thinking { text: "EmwK".into(), signature: None, redacted: true }),
            ContentBlock::Text("Let me check.".into()),
            ContentBlock::ToolUse(ToolUse { id: "toolu_1".into(), name: "f".into(), input_json: r#"{"a":1}"#.into() }),
        ];
        let usage = Usage { input: 12, output: 6, cache_read: 2048, cache_write: 100, reasoning: Some(3) };
        let body = message_body(&response(content.clone(), StopReason::ToolUse, Some(usage)), &[], false);
        assert!(body["id"].as_str().unwrap().starts_with("msg_"));
        assert_eq!(body["type"], "message");
        assert_eq!(body["role"], "assistant");
        assert_eq!(body["model"], "chat", "the catalog id, never the provider's echo");
        assert_eq!(
            body["content"],
            json!([
                {"type": "thinking", "thinking": "hmm", "signature": "sig"},
                {"type": "redacted_thinking", "data": "EmwK"},
                {"type": "text", "text": "Let me check."},
                {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {"a": 1}},
            ])
        );
        assert_eq!(body["stop_reason"], "tool_use");
        assert_eq!(body["stop_sequence"], Value::Null);
        assert_eq!(
            body["usage"],
            json!({"input_tokens": 12, "output_tokens": 6, "cache_creation_input_tokens": 100,
                   "cache_read_input_tokens": 2048})
        );
        let other = message_body(&response(Vec::new(), StopReason::EndTurn, None), &[], false);
        assert_ne!(other["id"], body["id"], "ids are unique");
        assert_eq!(other["usage"]["input_tokens"], 0);
        let omitted = message_body(&response(content, StopReason::ToolUse, Some(usage)), &[], true);
        assert_eq!(omitted["content"][0], json!({"type": "thinking", "thinking": "", "signature": "sig"}));
        assert_eq!(omitted["content"][1], body["content"][1], "redacted thinking is opaque already");
    }

    #[test]
    fn stop_reasons_and_the_matched_sequence() {
        let pairs = [
            (StopReason::EndTurn, "end_turn"),
            (StopReason::Other, "end_turn"),
            (StopReason::MaxTokens, "max_tokens"),
            (StopReason::StopSequence, "stop_sequence"),
            (StopReason::ToolUse, "tool_use"),
            (StopReason::ContentFiltered, "refusal"),
            (StopReason::Pause, "pause_turn"),
            (StopReason::ContextWindowExceeded, "model_context_window_exceeded"),
        ];
        for (reason, word) in pairs {
            assert_eq!(stop_reason(reason), word);
        }
        let one = ["END".to_owned()];
        assert_eq!(stop_sequence(StopReason::StopSequence, &one), Some("END"));
        assert_eq!(stop_sequence(StopReason::StopSequence, &["A".to_owned(), "B".to_owned()]), None);
        assert_eq!(stop_sequence(StopReason::EndTurn, &one), None);
    }

    #[test]
    fn unparsable_tool_arguments_become_an_empty_object() {
        let call = ToolUse { id: "t".into(), name: "f".into(), input_json: r#"{"city": "Pa"#.into() };
        assert_eq!(tool_use(&call)["input"], json!({}));
        let empty = ToolUse { input_json: String::new(), ..call };
        assert_eq!(tool_use(&empty)["input"], json!({}));
    }
}
