//! A live stream with Anthropic's own blocks in place (weir:provider 0.7.0's
//! `native-stream`), for a request that carried server tools or own history
//! blocks. Everything neutral is [`AnthropicStream`]'s; this adds, in the
//! provider's order:
//!
//! - each own block (`server_tool_use`, `web_search_tool_result`, any block
//!   type the neutral records have no case for) once it is complete, at its
//!   `content_block_stop`: a result comes whole in its `content_block_start`,
//!   a `server_tool_use`'s `input` as `input_json_delta`s, joined here;
//! - each text block's start (`text-start`), so a dialect's writer keeps text
//!   blocks apart, and each `citations_delta`'s citation (`citation`) in its
//!   place: a cited text streams live like any text, its citations beside it;
//! - the own usage (`server_tool_use`, with `web_search_requests`) from each
//!   `message_delta` that carries it.
//!
//! Only the SSE surfaces open one (direct, Mantle, Vertex); InvokeModel's
//! framing carries no server tools, and its streams with own history blocks
//! are taken whole.

use serde_json::Value;

use super::Surface;
use super::stream::{AnthropicStream, block_index};
use crate::errors::ErrorFields;
use crate::types::{CodecError, NativeDelta, StreamEvent};
use crate::{NativeStreamDecoder, StreamDecoder};

/// Per-stream state: the neutral decoder and the own blocks not yet complete.
#[derive(Debug)]
pub struct AnthropicNativeStream {
    neutral: AnthropicStream,
    open: Vec<OwnBlock>,
}

/// An own block started and not yet stopped.
#[derive(Debug)]
struct OwnBlock {
    index: u32,
    block: Value,
    /// The `input_json_delta`s so far.
    input: String,
}

impl NativeStreamDecoder for AnthropicNativeStream {
    fn open(provider: &str) -> Option<Self> {
        match Surface::from_key(provider)? {
            Surface::Direct | Surface::Mantle | Surface::Vertex => {
                Some(Self { neutral: AnthropicStream::new(provider), open: Vec::new() })
            }
            Surface::BedrockInvoke => None,
        }
    }

    fn feed(&mut self, event: StreamEvent) -> Result<Vec<NativeDelta>, CodecError> {
        let data = event.data.trim_ascii();
        if event.name.as_deref() == Some("error") {
            return Ok(vec![NativeDelta::Neutral(self.neutral.error(ErrorFields::parse(data)))]);
        }
        if data.is_empty() {
            return Ok(Vec::new());
        }
        let value: Value = serde_json::from_slice(data)
            .map_err(|e| CodecError::Malformed(format!("stream event is not JSON: {e}")))?;
        let mut out = Vec::new();
        match value.get("type").and_then(Value::as_str).or(event.name.as_deref()) {
            Some("content_block_start") => self.block_start(&value, &mut out)?,
            Some("content_block_delta") => self.block_delta(&value, &mut out)?,
            Some("content_block_stop") => self.block_stop(&value, &mut out)?,
            Some("message_delta") => {
                out.extend(self.neutral(&value, &event)?);
                if let Some(own) = value.pointer("/usage/server_tool_use").filter(|own| own.is_object()) {
                    out.push(NativeDelta::Usage(serde_json::json!({"server_tool_use": own}).to_string()));
                }
            }
            _ => out.extend(self.neutral(&value, &event)?),
        }
        Ok(out)
    }

    fn finish(&mut self) -> Result<Vec<NativeDelta>, CodecError> {
        Ok(self.neutral.finish()?.into_iter().map(NativeDelta::Neutral).collect())
    }
}

impl AnthropicNativeStream {
    /// The neutral decoder's deltas for one event.
    fn neutral(&mut self, value: &Value, event: &StreamEvent) -> Result<Vec<NativeDelta>, CodecError> {
        let deltas = self.neutral.dispatch(value, event.name.as_deref())?;
        Ok(deltas.into_iter().map(NativeDelta::Neutral).collect())
    }

    fn block_start(&mut self, value: &Value, out: &mut Vec<NativeDelta>) -> Result<(), CodecError> {
        let block = value.get("content_block").unwrap_or(&Value::Null);
        match block.get("type").and_then(Value::as_str) {
            Some("text") => {
                let mut start = block.clone();
                start["text"] = Value::String(String::new());
                out.push(NativeDelta::TextStart(start.to_string()));
                out.extend(self.neutral.dispatch(value, None)?.into_iter().map(NativeDelta::Neutral));
            }
            Some("thinking" | "redacted_thinking" | "tool_use") | None => {
                out.extend(self.neutral.dispatch(value, None)?.into_iter().map(NativeDelta::Neutral));
            }
            Some(_) => {
                let index = block_index(value)?;
                self.open.push(OwnBlock { index, block: block.clone(), input: String::new() });
            }
        }
        Ok(())
    }

    fn block_delta(&mut self, value: &Value, out: &mut Vec<NativeDelta>) -> Result<(), CodecError> {
        let index = block_index(value)?;
        let delta = value.get("delta").unwrap_or(&Value::Null);
        if let Some(own) = self.open.iter_mut().find(|own| own.index == index) {
            if let Some(json) = delta.get("partial_json").and_then(Value::as_str) {
                own.input.push_str(json);
            }
            return Ok(());
        }
        if delta.get("type").and_then(Value::as_str) == Some("citations_delta")
            && let Some(citation) = delta.get("citation").filter(|citation| citation.is_object())
        {
            out.push(NativeDelta::Citation(citation.to_string()));
            return Ok(());
        }
        out.extend(self.neutral.dispatch(value, None)?.into_iter().map(NativeDelta::Neutral));
        Ok(())
    }

    /// An own block is complete: its input joined (when it came as deltas) and
    /// handed out whole.
    fn block_stop(&mut self, value: &Value, out: &mut Vec<NativeDelta>) -> Result<(), CodecError> {
        let index = block_index(value)?;
        let Some(position) = self.open.iter().position(|own| own.index == index) else {
            out.extend(self.neutral.dispatch(value, None)?.into_iter().map(NativeDelta::Neutral));
            return Ok(());
        };
        let OwnBlock { mut block, input, .. } = self.open.remove(position);
        if !input.trim().is_empty() {
            let parsed: Value = serde_json::from_str(&input)
                .map_err(|e| CodecError::Malformed(format!("block {index}'s input is not JSON: {e}")))?;
            block["input"] = parsed;
        }
        out.push(NativeDelta::Block(block.to_string()));
        Ok(())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::types::StreamDelta;

    /// A stream's neutral deltas alone.
    fn neutral_only(pieces: &[NativeDelta]) -> Vec<StreamDelta> {
        pieces
            .iter()
            .filter_map(|piece| match piece {
                NativeDelta::Neutral(delta) => Some(delta.clone()),
                _ => None,
            })
            .collect()
    }

    fn event(value: &Value) -> StreamEvent {
        let name = value.get("type").and_then(Value::as_str).map(str::to_owned);
        StreamEvent { name, headers: vec![], data: value.to_string().into_bytes() }
    }

    /// A web search answer as Anthropic streams it: a text, the search's call
    /// with its input in deltas, its result whole, a cited text, the usage.
    fn web_search_events() -> Vec<Value> {
        vec![
            json!({"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-x","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":10,"output_tokens":1}}}),
            json!({"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}),
            json!({"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Searching."}}),
            json!({"type":"content_block_stop","index":0}),
            json!({"type":"content_block_start","index":1,"content_block":{"type":"server_tool_use","id":"srvtoolu_1","name":"web_search","input":{}}}),
            json!({"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"query\": \"wei"}}),
            json!({"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"r\"}"}}),
            json!({"type":"content_block_stop","index":1}),
            json!({"type":"content_block_start","index":2,"content_block":{"type":"web_search_tool_result","tool_use_id":"srvtoolu_1","content":[{"type":"web_search_result","url":"https://a.example","title":"A","encrypted_content":"e1"}]}}),
            json!({"type":"content_block_stop","index":2}),
            json!({"type":"content_block_start","index":3,"content_block":{"type":"text","text":"","citations":[]}}),
            json!({"type":"content_block_delta","index":3,"delta":{"type":"citations_delta","citation":{"type":"web_search_result_location","url":"https://a.example","cited_text":"x","encrypted_index":"i1"}}}),
            json!({"type":"content_block_delta","index":3,"delta":{"type":"text_delta","text":"A weir."}}),
            json!({"type":"content_block_stop","index":3}),
            json!({"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":20,"server_tool_use":{"web_search_requests":1}}}),
            json!({"type":"message_stop"}),
        ]
    }

    #[test]
    fn own_blocks_come_whole_in_place_with_the_neutral_deltas_around_them() {
        let mut decoder = AnthropicNativeStream::open("anthropic").unwrap();
        let pieces: Vec<NativeDelta> =
            web_search_events().iter().flat_map(|value| decoder.feed(event(value)).unwrap()).collect();
        let own: Vec<(usize, Value)> = pieces
            .iter()
            .enumerate()
            .filter_map(|(at, piece)| match piece {
                NativeDelta::Block(json) => Some((at, serde_json::from_str(json).unwrap())),
                _ => None,
            })
            .collect();
        assert_eq!(own.len(), 2);
        assert_eq!(own[0].1["input"], json!({"query": "weir"}), "the input deltas joined");
        assert_eq!(own[1].1["type"], "web_search_tool_result");
        let first_text =
            pieces.iter().position(|piece| piece == &NativeDelta::Neutral(StreamDelta::Text("Searching.".into())));
        assert!(first_text.unwrap() < own[0].0, "the first text comes before the search");
        let cited = pieces.iter().position(|piece| piece == &NativeDelta::Neutral(StreamDelta::Text("A weir.".into())));
        assert!(own[1].0 < cited.unwrap());
        assert!(
            pieces.iter().any(|piece| matches!(piece, NativeDelta::Citation(json) if json.contains("encrypted_index")))
        );
        let text_starts = pieces.iter().filter(|piece| matches!(piece, NativeDelta::TextStart(_))).count();
        assert_eq!(text_starts, 2, "each text block's start");
        let usage = pieces.iter().find_map(|piece| match piece {
            NativeDelta::Usage(json) => Some(serde_json::from_str::<Value>(json).unwrap()),
            _ => None,
        });
        assert_eq!(usage.unwrap(), json!({"server_tool_use": {"web_search_requests": 1}}));
        assert!(neutral_only(&pieces).iter().any(|delta| matches!(delta, StreamDelta::Stop(_))));
        assert_eq!(decoder.finish().unwrap(), vec![]);
    }

    #[test]
    fn a_server_tool_input_that_is_not_json_is_malformed() {
        let mut decoder = AnthropicNativeStream::open("anthropic").unwrap();
        let events = [
            json!({"type":"content_block_start","index":0,"content_block":{"type":"server_tool_use","id":"s","name":"web_search","input":{}}}),
            json!({"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"query\": "}}),
        ];
        for value in &events {
            decoder.feed(event(value)).unwrap();
        }
        let stop = decoder.feed(event(&json!({"type":"content_block_stop","index":0})));
        assert!(matches!(stop, Err(CodecError::Malformed(message)) if message.contains("not JSON")));
    }

    #[test]
    fn invoke_model_opens_no_native_stream() {
        assert!(AnthropicNativeStream::open("anthropic-bedrock").is_none());
        assert!(AnthropicNativeStream::open("nobody").is_none());
        assert!(AnthropicNativeStream::open("anthropic-vertex").is_some());
    }
}
