//! The `streamGenerateContent?alt=sse` decoder. Each SSE event is a `data:`
//! line holding one whole GenerateContentResponse (no event names, no `[DONE]`):
//! text and thought parts arrive as pieces across chunks, a function call
//! arrives whole in one part (so a call is a start, one fragment and an end at
//! once), `usageMetadata` rides the chunks (the last one is final) and the last
//! chunk carries the candidate's `finishReason`. A prompt blocked before any
//! candidate is one chunk with `promptFeedback.blockReason`. A failure after the
//! 200 is a chunk holding Google's error object, read as an in-band error.
//!
//! The stream has ended properly only with a `finishReason` (or a block): a
//! body that closes without one was cut, and `finish` declines it.

use weir_sdk::StreamDecoder;
use weir_sdk::types::{
    CodecError, ContentBlock, InBandError, StopInfo, StopReason, StreamDelta, StreamEvent, ToolCallFragment,
    ToolCallStart,
};

use crate::errors::{GoogleError, class_of};
use crate::response::{Part, prompt_block, read_part, stop, usage};
use crate::wire::{self, GenerateContentResponse};

/// Per-stream state.
#[derive(Debug, Default)]
pub struct GeminiStream {
    /// The function calls read so far: numbers each call's index and made id.
    calls: u32,
    /// The `responseId`, from the first chunk that has one.
    response_id: Option<String>,
    served_model_sent: bool,
    stopped: bool,
    error_seen: bool,
}

impl StreamDecoder for GeminiStream {
    fn new(_provider: &str) -> Self {
        Self::default()
    }

    fn feed(&mut self, event: StreamEvent) -> Result<Vec<StreamDelta>, CodecError> {
        let data = event.data.trim_ascii();
        if data.is_empty() {
            return Ok(Vec::new());
        }
        let chunk = GenerateContentResponse::parse(data)?;
        if chunk.error.is_some() {
            return Ok(vec![self.error(data)]);
        }
        self.chunk(&chunk)
    }

    fn finish(&mut self) -> Result<Vec<StreamDelta>, CodecError> {
        if self.stopped || self.error_seen {
            Ok(Vec::new())
        } else {
            Err(CodecError::Malformed("stream ended before a finishReason".to_owned()))
        }
    }
}

impl GeminiStream {
    fn chunk(&mut self, chunk: &GenerateContentResponse<'_>) -> Result<Vec<StreamDelta>, CodecError> {
        let mut out = Vec::new();
        if self.response_id.is_none()
            && let Some(id) = wire::owned(&chunk.response_id)
        {
            out.push(StreamDelta::RequestId(id.clone()));
            self.response_id = Some(id);
        }
        if !self.served_model_sent
            && let Some(model) = wire::owned(&chunk.model_version)
        {
            self.served_model_sent = true;
            out.push(StreamDelta::ServedModel(model));
        }
        let candidate = chunk.candidate();
        if let Some(candidate) = candidate {
            for part in candidate.parts() {
                self.part(part, &mut out)?;
            }
        }
        out.extend(chunk.usage_metadata.as_ref().map(|metadata| StreamDelta::Usage(usage(metadata))));
        if self.stopped {
            return Ok(out);
        }
        if let Some(candidate) = candidate
            && let Some(raw) = wire::owned(&candidate.finish_reason)
        {
            let (reason, refusal) = stop(Some(&raw), self.calls > 0, candidate);
            self.stopped = true;
            out.push(StreamDelta::Stop(StopInfo { reason, raw: Some(raw), refusal }));
        } else if candidate.is_none()
            && let Some(blocked) = prompt_block(chunk)
        {
            self.stopped = true;
            let raw = blocked.category.clone();
            out.push(StreamDelta::Stop(StopInfo { reason: StopReason::ContentFiltered, raw, refusal: Some(blocked) }));
        }
        Ok(out)
    }

    fn part(&mut self, part: &wire::Part<'_>, out: &mut Vec<StreamDelta>) -> Result<(), CodecError> {
        let index = self.calls;
        match read_part(part, self.response_id.as_deref(), &mut self.calls)? {
            Part::Thought { text, signature } => {
                if !text.is_empty() {
                    out.push(StreamDelta::Thinking(text));
                }
                out.extend(signature.map(StreamDelta::ThinkingSignature));
            }
            Part::Answer { signature, block } => {
                out.extend(signature.map(StreamDelta::ThinkingSignature));
                match block {
                    Some(ContentBlock::Text(text)) => out.push(StreamDelta::Text(text)),
                    Some(ContentBlock::ToolUse(call)) => {
                        out.push(StreamDelta::ToolCallStart(ToolCallStart { index, id: call.id, name: call.name }));
                        out.push(StreamDelta::ToolCallFragment(ToolCallFragment { index, json: call.input_json }));
                        out.push(StreamDelta::ToolCallEnd(index));
                    }
                    // `read_part` answers with text or a call only.
                    Some(_) | None => {}
                }
            }
        }
        Ok(())
    }

    /// An error object after the 200, classed as `classify` would class it.
    fn error(&mut self, data: &[u8]) -> StreamDelta {
        self.error_seen = true;
        let error = GoogleError::parse(data);
        StreamDelta::Error(InBandError {
            status: error.code,
            status_from_prose: false,
            class: class_of(&error, 200, &Vec::new()),
        })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::panic)] // a failing test should stop loudly
mod tests {
    use super::*;
    use weir_sdk::types::{ErrorClass, Refusal, Usage};

    fn event(data: &str) -> StreamEvent {
        StreamEvent { name: None, headers: vec![], data: data.as_bytes().to_vec() }
    }

    fn feed_all(decoder: &mut GeminiStream, events: &[&str]) -> Vec<StreamDelta> {
        events.iter().flat_map(|data| decoder.feed(event(data)).unwrap()).collect()
    }

    #[test]
    fn thoughts_text_signature_usage_and_stop() {
        let mut decoder = GeminiStream::default();
        let deltas = feed_all(
            &mut decoder,
            &[
                r#"{"candidates":[{"content":{"role":"model","parts":[{"text":"Plan.","thought":true}]},"index":0}],"usageMetadata":{"promptTokenCount":9,"totalTokenCount":9},"modelVersion":"gemini-2.5-flash","responseId":"r1"}"#,
                r#"{"candidates":[{"content":{"role":"model","parts":[{"text":"Hel"}]},"index":0}],"modelVersion":"gemini-2.5-flash","responseId":"r1"}"#,
                r#"{"candidates":[{"content":{"role":"model","parts":[{"text":"lo","thoughtSignature":"c2ln"}]},"finishReason":"STOP","index":0}],"usageMetadata":{"promptTokenCount":9,"candidatesTokenCount":2,"thoughtsTokenCount":3,"totalTokenCount":14},"modelVersion":"gemini-2.5-flash","responseId":"r1"}"#,
            ],
        );
        let usage = Usage { input: 9, output: 5, cache_read: 0, cache_write: 0, reasoning: Some(3) };
        assert_eq!(
            deltas,
            vec![
                StreamDelta::RequestId("r1".into()),
                StreamDelta::ServedModel("gemini-2.5-flash".into()),
                StreamDelta::Thinking("Plan.".into()),
                StreamDelta::Usage(Usage { input: 9, output: 0, cache_read: 0, cache_write: 0, reasoning: None }),
                StreamDelta::Text("Hel".into()),
                StreamDelta::ThinkingSignature("gemini:c2ln".into()),
                StreamDelta::Text("lo".into()),
                StreamDelta::Usage(usage),
                StreamDelta::Stop(StopInfo { reason: StopReason::EndTurn, raw: Some("STOP".into()), refusal: None }),
            ]
        );
        assert_eq!(decoder.finish().unwrap(), vec![]);
    }

    #[test]
    fn a_whole_call_is_start_fragment_end_and_a_tool_use_stop() {
        let mut decoder = GeminiStream::default();
        let deltas = feed_all(
            &mut decoder,
            &[
                r#"{"candidates":[{"content":{"role":"model","parts":[{"functionCall":{"name":"get_weather","args":{"city":"Paris"}},"thoughtSignature":"c2ln"}]},"finishReason":"STOP"}],"responseId":"r2"}"#,
            ],
        );
        assert_eq!(
            deltas,
            vec![
                StreamDelta::RequestId("r2".into()),
                StreamDelta::ThinkingSignature("gemini:c2ln".into()),
                StreamDelta::ToolCallStart(ToolCallStart {
                    index: 0,
                    id: "gemini-call-r2-0".into(),
                    name: "get_weather".into()
                }),
                StreamDelta::ToolCallFragment(ToolCallFragment { index: 0, json: r#"{"city":"Paris"}"#.into() }),
                StreamDelta::ToolCallEnd(0),
                StreamDelta::Stop(StopInfo { reason: StopReason::ToolUse, raw: Some("STOP".into()), refusal: None }),
            ]
        );
    }

    #[test]
    fn a_blocked_prompt_and_a_safety_stop_are_refusals() {
        let mut decoder = GeminiStream::default();
        let deltas = feed_all(&mut decoder, &[r#"{"promptFeedback":{"blockReason":"SAFETY"}}"#]);
        assert_eq!(
            deltas,
            vec![StreamDelta::Stop(StopInfo {
                reason: StopReason::ContentFiltered,
                raw: Some("SAFETY".into()),
                refusal: Some(Refusal { category: Some("SAFETY".into()), explanation: None }),
            })]
        );
        let mut decoder = GeminiStream::default();
        let deltas = feed_all(&mut decoder, &[r#"{"candidates":[{"finishReason":"PROHIBITED_CONTENT"}]}"#]);
        assert!(matches!(&deltas[0], StreamDelta::Stop(stop) if stop.reason == StopReason::ContentFiltered));
    }

    #[test]
    fn an_error_chunk_is_an_in_band_error() {
        let mut decoder = GeminiStream::default();
        let deltas = feed_all(
            &mut decoder,
            &[
                r#"{"error":{"code":503,"message":"The model is overloaded. Please try again later.","status":"UNAVAILABLE"}}"#,
            ],
        );
        assert!(matches!(
            &deltas[..],
            [StreamDelta::Error(InBandError {
                status: Some(503),
                status_from_prose: false,
                class: ErrorClass::Transient(_)
            })]
        ));
        assert_eq!(decoder.finish().unwrap(), vec![]);
    }

    #[test]
    fn a_cut_stream_and_garbage_are_declined() {
        let mut decoder = GeminiStream::default();
        feed_all(&mut decoder, &[r#"{"candidates":[{"content":{"parts":[{"text":"Hel"}]}}]}"#]);
        assert!(matches!(decoder.finish(), Err(CodecError::Malformed(_))));
        for garbage in ["{", "[]", r#"{"candidates":7}"#, r#"{"candidates":[{"content":{"parts":[{"text":3}]}}]}"#] {
            assert!(matches!(GeminiStream::default().feed(event(garbage)), Err(CodecError::Malformed(_))), "{garbage}");
        }
    }
}
