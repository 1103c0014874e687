//! Prompts and answers as the record keeps them (`record_content = true`):
//! text, tool calls and results, thinking text. Media is named by type and
//! size, never copied: a record is for reading, not for replaying images.

use serde_json::{Value, json};

use crate::types::{AnswerBlock, ContentBlock, Conversation, LeafBlock, Media, MediaSource, StopReason, TurnRole};

/// The request's system text, turns and tool names.
pub(crate) fn request(conversation: &Conversation) -> Value {
    let turns: Vec<Value> = conversation
        .turns
        .iter()
        .map(|turn| {
            let role = match turn.role {
                TurnRole::User => "user",
                TurnRole::Assistant => "assistant",
            };
            json!({"role": role, "content": blocks(&turn.content)})
        })
        .collect();
    let tools: Vec<&str> = conversation.tools.iter().map(|tool| tool.name.as_str()).collect();
    json!({"system": conversation.system, "turns": turns, "tools": tools})
}

/// An answer's content blocks.
pub(crate) fn answer(content: &[ContentBlock]) -> Value {
    Value::Array(blocks(content))
}

/// An answer with the provider's own blocks, in the provider's order: the
/// neutral ones as [`answer`] writes them, each own block as the provider
/// wrote it under `native` (with its `type` and the `dialect` beside it).
pub(crate) fn answer_with_own(content: &[ContentBlock], own: &[AnswerBlock], dialect: &str) -> Value {
    let written = own.iter().filter_map(|placed| match placed {
        AnswerBlock::Neutral(index) => usize::try_from(*index).ok().and_then(|index| content.get(index)).map(block),
        AnswerBlock::Native(raw) => {
            let native = serde_json::from_str::<Value>(raw).unwrap_or_else(|_| Value::String(raw.clone()));
            let kind = native.get("type").cloned().unwrap_or(Value::Null);
            Some(json!({"type": kind, "dialect": dialect, "native": native}))
        }
    });
    Value::Array(written.collect())
}

fn blocks(content: &[ContentBlock]) -> Vec<Value> {
    content.iter().map(block).collect()
}

fn block(block: &ContentBlock) -> Value {
    match block {
        ContentBlock::Text(text) => json!({"type": "text", "text": text}),
        ContentBlock::Image(media) => media_json("image", media),
        ContentBlock::Document(media) => media_json("document", media),
        ContentBlock::ToolUse(call) => {
            json!({"type": "tool_use", "id": call.id, "name": call.name, "input": call.input_json})
        }
        ContentBlock::ToolResult(result) => {
            let content: Vec<Value> = result
                .content
                .iter()
                .map(|leaf| match leaf {
                    LeafBlock::Text(text) => json!({"type": "text", "text": text}),
                    LeafBlock::Image(media) => media_json("image", media),
                    LeafBlock::Document(media) => media_json("document", media),
                })
                .collect();
            json!({"type": "tool_result", "tool_use_id": result.tool_use_id, "content": content, "is_error": result.is_error})
        }
        // Redacted thinking is an opaque payload, not text anyone can read.
        ContentBlock::Thinking(thinking) if thinking.redacted => json!({"type": "redacted_thinking"}),
        ContentBlock::Thinking(thinking) => json!({"type": "thinking", "text": thinking.text}),
    }
}

fn media_json(kind: &str, media: &Media) -> Value {
    match &media.source {
        MediaSource::Base64(data) => json!({"type": kind, "media_type": media.mime_type, "base64_bytes": data.len()}),
        MediaSource::Url(url) => json!({"type": kind, "media_type": media.mime_type, "url": url}),
    }
}

/// The stop reason's name in the record.
pub(crate) fn stop_reason(reason: StopReason) -> &'static str {
    match reason {
        StopReason::EndTurn => "end_turn",
        StopReason::MaxTokens => "max_tokens",
        StopReason::StopSequence => "stop_sequence",
        StopReason::ToolUse => "tool_use",
        StopReason::ContentFiltered => "content_filtered",
        StopReason::Pause => "pause",
        StopReason::ContextWindowExceeded => "context_window_exceeded",
        StopReason::Other => "other",
    }
}
