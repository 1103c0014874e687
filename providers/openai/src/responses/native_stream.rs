//! A live Responses stream with OpenAI's own items in place (weir:provider
//! 0.7.0's `native-stream`), for a request that carried hosted tools or own
//! history items. Everything neutral is [`ResponsesStream`]'s; this adds, in
//! the provider's order:
//!
//! - each output item the neutral records have no case for (`web_search_call`,
//!   `file_search_call`, `code_interpreter_call`, ...) whole, at its
//!   `response.output_item.done` (its typed progress events add nothing);
//! - a text start at each message's `response.output_item.added`, so a
//!   writer keeps messages apart, and each `response.output_text.annotation.added`'s
//!   annotation as a citation in its place: an annotated message's text
//!   streams live like any text, its annotations beside it.
//!
//! The web searches are counted by the host from the `web_search_call` items;
//! OpenAI's usage has no count of its own.

use serde_json::Value;
use weir_sdk::types::{CodecError, NativeDelta, StreamEvent};
use weir_sdk::{NativeStreamDecoder, StreamDecoder};

use super::stream::ResponsesStream;
use crate::dialect;

/// Per-stream state: the neutral decoder.
#[derive(Debug, Default)]
pub struct ResponsesNativeStream {
    neutral: ResponsesStream,
}

/// The output item types the neutral records have a case for.
fn neutral_item(kind: Option<&str>) -> bool {
    matches!(kind, Some("message" | "reasoning" | "function_call" | "custom_tool_call"))
}

impl NativeStreamDecoder for ResponsesNativeStream {
    fn open(provider: &str) -> Option<Self> {
        (provider == dialect::RESPONSES).then(Self::default)
    }

    fn feed(&mut self, event: StreamEvent) -> Result<Vec<NativeDelta>, CodecError> {
        let data = event.data.trim_ascii();
        let value: Option<Value> = match data.is_empty() {
            true => None,
            false => Some(
                serde_json::from_slice(data)
                    .map_err(|e| CodecError::Malformed(format!("stream event is not JSON: {e}")))?,
            ),
        };
        let kind = value.as_ref().and_then(|value| value.get("type")).and_then(Value::as_str).map(str::to_owned);
        let item = value.as_ref().and_then(|value| value.get("item"));
        let item_kind = item.and_then(|item| item.get("type")).and_then(Value::as_str);
        let mut out = Vec::new();
        match kind.as_deref().or(event.name.as_deref()) {
            Some("response.output_item.added") if item_kind == Some("message") => {
                out.push(NativeDelta::TextStart(r#"{"type":"message"}"#.to_owned()));
            }
            Some("response.output_item.added") if !neutral_item(item_kind) => return Ok(out),
            Some("response.output_item.done") if !neutral_item(item_kind) => {
                if let Some(item) = item {
                    out.push(NativeDelta::Block(item.to_string()));
                }
                return Ok(out);
            }
            Some("response.output_text.annotation.added") => {
                if let Some(annotation) = value.as_ref().and_then(|value| value.get("annotation")) {
                    out.push(NativeDelta::Citation(annotation.to_string()));
                }
                return Ok(out);
            }
            _ => {}
        }
        out.extend(self.neutral.feed(event)?.into_iter().map(NativeDelta::Neutral));
        Ok(out)
    }

    fn finish(&mut self) -> Result<Vec<NativeDelta>, CodecError> {
        Ok(self.neutral.finish()?.into_iter().map(NativeDelta::Neutral).collect())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use serde_json::json;
    use weir_sdk::types::StreamDelta;

    use super::*;
    use crate::responses::test_event as event;

    #[test]
    fn a_web_search_call_comes_whole_in_place_and_annotations_as_citations() {
        let search = json!({"type": "web_search_call", "id": "ws_1", "status": "completed", "action": {"type": "search", "query": "q"}});
        let annotation = json!({"type": "url_citation", "url": "https://a.example/", "start_index": 0, "end_index": 1});
        let events = [
            json!({"type": "response.created", "response": {"id": "resp_1", "model": "gpt-5"}}),
            json!({"type": "response.output_item.added", "output_index": 0, "item": {"type": "web_search_call", "id": "ws_1", "status": "in_progress"}}),
            json!({"type": "response.web_search_call.searching", "output_index": 0, "item_id": "ws_1"}),
            json!({"type": "response.output_item.done", "output_index": 0, "item": search}),
            json!({"type": "response.output_item.added", "output_index": 1, "item": {"type": "message", "id": "msg_1", "content": []}}),
            json!({"type": "response.output_text.delta", "output_index": 1, "content_index": 0, "delta": "Weir."}),
            json!({"type": "response.output_text.annotation.added", "output_index": 1, "annotation_index": 0, "annotation": annotation}),
            json!({"type": "response.output_item.done", "output_index": 1, "item": {"type": "message", "id": "msg_1"}}),
            json!({"type": "response.completed", "response": {"status": "completed", "output": [], "usage": {"input_tokens": 5, "output_tokens": 2}}}),
        ];
        let mut decoder = ResponsesNativeStream::open("openai-responses").unwrap();
        let pieces: Vec<NativeDelta> = events.iter().flat_map(|value| decoder.feed(event(value)).unwrap()).collect();
        let block = pieces.iter().position(|piece| piece == &NativeDelta::Block(search.to_string())).unwrap();
        let start = pieces.iter().position(|piece| matches!(piece, NativeDelta::TextStart(_))).unwrap();
        let text =
            pieces.iter().position(|piece| piece == &NativeDelta::Neutral(StreamDelta::Text("Weir.".into()))).unwrap();
        let citation = pieces.iter().position(|piece| piece == &NativeDelta::Citation(annotation.to_string())).unwrap();
        assert!(block < start && start < text && text < citation, "{pieces:?}");
        assert!(pieces.iter().any(|piece| matches!(piece, NativeDelta::Neutral(StreamDelta::Stop(_)))));
        assert_eq!(decoder.finish().unwrap(), vec![]);
        assert!(ResponsesNativeStream::open("openai").is_none(), "Chat Completions carries no hosted items");
    }
}
