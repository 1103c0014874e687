//! OpenAI's Responses API as an upstream speaks it (`POST /v1/responses`): whole
//! `response` objects and the typed SSE events, each `event: <type>` with a
//! `data:` object naming the same `type` and its `sequence_number`, as the
//! official clients parse them. The fake upstream plays them as scripted answers.

use bytes::Bytes;
use serde_json::{Value, json};

use crate::Scripted;
use crate::openai_wire::{json_response, sse_headers};

/// A `usage` object: `input` includes `cached`, `output` includes `reasoning`.
#[must_use]
pub fn usage(input: u64, output: u64, cached: u64, reasoning: u64) -> Value {
    json!({
        "input_tokens": input,
        "input_tokens_details": {"cached_tokens": cached},
        "output_tokens": output,
        "output_tokens_details": {"reasoning_tokens": reasoning},
        "total_tokens": input + output,
    })
}

/// A reasoning item with no summary (what OpenAI returns without `reasoning.summary`).
#[must_use]
pub fn reasoning_item(id: &str, encrypted_content: &str) -> Value {
    json!({"type": "reasoning", "id": id, "summary": [], "encrypted_content": encrypted_content})
}

/// An assistant message item with one `output_text` part.
#[must_use]
pub fn message_item(id: &str, text: &str) -> Value {
    json!({"type": "message", "id": id, "role": "assistant", "status": "completed",
           "content": [{"type": "output_text", "text": text, "annotations": []}]})
}

/// A finished `function_call` item.
#[must_use]
pub fn function_call_item(call_id: &str, name: &str, arguments: &str) -> Value {
    json!({"type": "function_call", "id": format!("fc_{call_id}"), "call_id": call_id, "name": name,
           "arguments": arguments, "status": "completed"})
}

/// A call to a custom tool (free-form `input`), as OpenAI answers it.
#[must_use]
pub fn custom_tool_call_item(call_id: &str, name: &str, input: &str) -> Value {
    json!({"type": "custom_tool_call", "id": format!("ctc_{call_id}"), "call_id": call_id, "name": name,
           "input": input, "status": "completed"})
}

/// A whole `response` object.
#[must_use]
pub fn response_body(status: &str, output: Vec<Value>, usage: Value) -> Value {
    json!({"id": "resp_upstream_1", "object": "response", "created_at": 1_800_000_000, "status": status,
           "error": null, "incomplete_details": null, "model": "gpt-5-2025-08-07", "output": output, "usage": usage})
}

/// A whole answer with OpenAI's headers.
#[must_use]
pub fn response(output: Vec<Value>, usage: Value) -> Scripted {
    json_response(200, &response_body("completed", output, usage))
}

/// One typed event, its `sequence_number` set.
#[must_use]
pub fn event(sequence_number: u64, mut data: Value) -> Bytes {
    data["sequence_number"] = json!(sequence_number);
    let kind = data["type"].as_str().unwrap_or_default().to_owned();
    Bytes::from(format!("event: {kind}\ndata: {data}\n\n"))
}

/// The events of a stream whose output is `items` (reasoning items, messages and calls,
/// each as its done form), as OpenAI sends them: `response.created`, per item `added`,
/// its text (and one `response.output_text.annotation.added` per annotation) or argument
/// deltas, `done`, then `response.completed` with `usage`.
#[must_use]
pub fn stream_events(items: &[Value], usage: Value) -> Vec<Bytes> {
    let mut events = Vec::new();
    let mut seq = 0;
    let mut next = |data: Value| {
        seq += 1;
        event(seq, data)
    };
    let shell = json!({"id": "resp_upstream_1", "object": "response", "status": "in_progress", "model": "gpt-5-2025-08-07", "output": []});
    events.push(next(json!({"type": "response.created", "response": shell})));
    events.push(next(json!({"type": "response.in_progress", "response": shell})));
    for (index, item) in items.iter().enumerate() {
        let mut added = item.clone();
        match item["type"].as_str() {
            Some("function_call") => added["arguments"] = json!(""),
            Some("custom_tool_call") => added["input"] = json!(""),
            Some("message") => added["content"] = json!([]),
            Some("reasoning") => added["encrypted_content"] = Value::Null,
            _ => {}
        }
        events.push(next(json!({"type": "response.output_item.added", "output_index": index, "item": added})));
        if item["type"] == "message" {
            let text = item["content"][0]["text"].as_str().unwrap_or_default();
            events.push(next(json!({"type": "response.output_text.delta", "output_index": index, "content_index": 0,
                                    "item_id": item["id"], "delta": text})));
            let annotations = item["content"][0]["annotations"].as_array().cloned().unwrap_or_default();
            for (annotation_index, annotation) in annotations.into_iter().enumerate() {
                events.push(next(json!({"type": "response.output_text.annotation.added", "output_index": index,
                                        "content_index": 0, "item_id": item["id"],
                                        "annotation_index": annotation_index, "annotation": annotation})));
            }
        }
        if item["type"] == "function_call" {
            events.push(next(json!({"type": "response.function_call_arguments.delta", "output_index": index,
                                    "item_id": item["id"], "delta": item["arguments"]})));
        }
        if item["type"] == "custom_tool_call" {
            // The text in two pieces, as a long patch arrives.
            let input = item["input"].as_str().unwrap_or_default();
            let middle = (0..=input.len() / 2).rev().find(|at| input.is_char_boundary(*at)).unwrap_or(0);
            let (first, rest) = input.split_at(middle);
            for piece in [first, rest] {
                events.push(next(json!({"type": "response.custom_tool_call_input.delta", "output_index": index,
                                        "item_id": item["id"], "delta": piece})));
            }
        }
        events.push(next(json!({"type": "response.output_item.done", "output_index": index, "item": item})));
    }
    let mut done = json!({"id": "resp_upstream_1", "object": "response", "status": "completed", "model": "gpt-5-2025-08-07",
                          "output": items, "usage": usage});
    done["error"] = Value::Null;
    events.push(next(json!({"type": "response.completed", "response": done})));
    events
}

/// A 200 SSE answer of these events.
#[must_use]
pub fn stream(events: Vec<Bytes>) -> Scripted {
    Scripted::Stream {
        status: 200,
        headers: sse_headers("req_responses_1"),
        chunks: events,
        pause: std::time::Duration::ZERO,
    }
}
