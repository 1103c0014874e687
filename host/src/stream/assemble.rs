//! Between a stream of deltas and a whole answer, both ways: a caller that wants
//! the answer whole collects a stream ([`Assembler`]); an answer obtained whole
//! (a non-streaming replay) is delivered as a stream ([`deltas_of`]).

use crate::types::{
    ContentBlock, DecodedResponse, StopInfo, StopReason, StreamDelta, Thinking, ToolCallFragment, ToolCallStart,
    ToolUse,
};

/// Builds a whole answer from deltas in order.
#[derive(Debug, Default)]
pub struct Assembler {
    content: Vec<ContentBlock>,
    /// Position in `content` of each tool call by its stream index.
    calls: Vec<(u32, usize)>,
    stop: Option<StopInfo>,
    usage: Option<crate::types::Usage>,
    served_model: Option<String>,
    request_id: Option<String>,
}

impl Assembler {
    pub fn push(&mut self, delta: StreamDelta) {
        match delta {
            StreamDelta::Text(text) => match self.content.last_mut() {
                Some(ContentBlock::Text(current)) => current.push_str(&text),
                _ => self.content.push(ContentBlock::Text(text)),
            },
            StreamDelta::Thinking(text) => self.with_thinking(|thinking| thinking.text.push_str(&text)),
            StreamDelta::ThinkingSignature(signature) => {
                self.with_thinking(|thinking| thinking.signature.get_or_insert_with(String::new).push_str(&signature));
            }
            StreamDelta::ToolCallStart(start) => {
                self.calls.push((start.index, self.content.len()));
                let call = ToolUse { id: start.id, name: start.name, input_json: String::new() };
                self.content.push(ContentBlock::ToolUse(call));
            }
            StreamDelta::ToolCallFragment(fragment) => {
                if let Some(ContentBlock::ToolUse(call)) = self.call(fragment.index) {
                    call.input_json.push_str(&fragment.json);
                }
            }
            StreamDelta::ToolCallEnd(_) | StreamDelta::Error(_) => {}
            StreamDelta::Usage(usage) => self.usage = Some(usage),
            StreamDelta::Stop(stop) => self.stop = Some(stop),
            StreamDelta::ServedModel(model) => self.served_model = Some(model),
            StreamDelta::RequestId(id) => self.request_id = Some(id),
        }
    }

    /// The answer; a stream that never said why it stopped reads as `other`.
    pub fn finish(self) -> DecodedResponse {
        let (stop_reason, raw_stop_reason, refusal) = match self.stop {
            Some(stop) => (stop.reason, stop.raw, stop.refusal),
            None => (StopReason::Other, None, None),
        };
        DecodedResponse {
            content: self.content,
            stop_reason,
            raw_stop_reason,
            usage: self.usage,
            refusal,
            served_model: self.served_model,
            request_id: self.request_id,
        }
    }

    /// Applies `change` to the thinking block being streamed, opening one if the
    /// last block is another kind.
    fn with_thinking(&mut self, change: impl FnOnce(&mut Thinking)) {
        match self.content.last_mut() {
            Some(ContentBlock::Thinking(thinking)) => change(thinking),
            _ => {
                let mut thinking = Thinking { text: String::new(), signature: None, redacted: false };
                change(&mut thinking);
                self.content.push(ContentBlock::Thinking(thinking));
            }
        }
    }

    fn call(&mut self, index: u32) -> Option<&mut ContentBlock> {
        let position = self.calls.iter().rev().find(|(i, _)| *i == index).map(|(_, position)| *position)?;
        self.content.get_mut(position)
    }
}

/// A whole answer as the deltas a stream of it would have carried.
pub fn deltas_of(answer: DecodedResponse) -> Vec<StreamDelta> {
    let mut deltas = Vec::new();
    deltas.extend(answer.served_model.map(StreamDelta::ServedModel));
    deltas.extend(answer.request_id.map(StreamDelta::RequestId));
    let mut index = 0;
    for block in answer.content {
        match block {
            ContentBlock::Text(text) => deltas.push(StreamDelta::Text(text)),
            ContentBlock::Thinking(thinking) => {
                deltas.push(StreamDelta::Thinking(thinking.text));
                deltas.extend(thinking.signature.map(StreamDelta::ThinkingSignature));
            }
            ContentBlock::ToolUse(call) => {
                deltas.push(StreamDelta::ToolCallStart(ToolCallStart { index, id: call.id, name: call.name }));
                deltas.push(StreamDelta::ToolCallFragment(ToolCallFragment { index, json: call.input_json }));
                deltas.push(StreamDelta::ToolCallEnd(index));
                index += 1;
            }
            // Not something a model answers with.
            ContentBlock::Image(_) | ContentBlock::Document(_) | ContentBlock::ToolResult(_) => {}
        }
    }
    deltas.extend(answer.usage.map(StreamDelta::Usage));
    let stop = StopInfo { reason: answer.stop_reason, raw: answer.raw_stop_reason, refusal: answer.refusal };
    deltas.push(StreamDelta::Stop(stop));
    deltas
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::Usage;

    fn answer() -> DecodedResponse {
        DecodedResponse {
            content: vec![
                ContentBlock::Thinking(Thinking { text: "hmm".into(), signature: Some("sig".into()), redacted: false }),
                ContentBlock::Text("Checking.".into()),
                ContentBlock::ToolUse(ToolUse { id: "c1".into(), name: "f".into(), input_json: r#"{"a":1}"#.into() }),
                ContentBlock::ToolUse(ToolUse { id: "c2".into(), name: "g".into(), input_json: "{}".into() }),
            ],
            stop_reason: StopReason::ToolUse,
            raw_stop_reason: Some("tool_calls".into()),
            usage: Some(Usage { input: 3, output: 4, cache_read: 0, cache_write: 0, reasoning: None }),
            refusal: None,
            served_model: Some("m".into()),
            request_id: Some("r".into()),
        }
    }

    #[test]
    fn an_answer_survives_the_round_trip_through_deltas() {
        let mut assembler = Assembler::default();
        deltas_of(answer()).into_iter().for_each(|delta| assembler.push(delta));
        assert_eq!(assembler.finish(), answer());
    }

    #[test]
    fn fragments_join_and_text_pieces_merge() {
        let mut assembler = Assembler::default();
        for delta in [
            StreamDelta::Text("Hel".into()),
            StreamDelta::Text("lo".into()),
            StreamDelta::ToolCallStart(ToolCallStart { index: 0, id: "c".into(), name: "f".into() }),
            StreamDelta::ToolCallFragment(ToolCallFragment { index: 0, json: r#"{"ci"#.into() }),
            StreamDelta::ToolCallFragment(ToolCallFragment { index: 0, json: r#"ty":"Paris"}"#.into() }),
            StreamDelta::ToolCallEnd(0),
        ] {
            assembler.push(delta);
        }
        let answer = assembler.finish();
        assert_eq!(answer.content[0], ContentBlock::Text("Hello".into()));
        assert_eq!(
            answer.content[1],
            ContentBlock::ToolUse(ToolUse {
                id: "c".into(),
                name: "f".into(),
                input_json: r#"{"city":"Paris"}"#.into()
            })
        );
        assert_eq!(answer.stop_reason, StopReason::Other, "no stop was streamed");
    }
}
