//! Between a stream of deltas and a whole answer, both ways: a caller that wants
//! the answer whole collects a stream ([`Assembler`]); an answer obtained whole
//! (a non-streaming replay) is delivered as a stream ([`deltas_of`]). A live
//! stream with the provider's own pieces is assembled for its record with
//! those blocks in place ([`InPlace`]).

use crate::types::{
    AnswerBlock, ContentBlock, DecodedResponse, NativeDelta, StopInfo, StopReason, StreamDelta, Thinking,
    ToolCallFragment, ToolCallStart, ToolUse,
};

/// A live stream's answer with the provider's own blocks in place, as a whole
/// answer's `decode-native` gives it: the neutral deltas are assembled segment
/// by segment between the own pieces (a text start ends a segment too, so two
/// text blocks stay two), each own block kept where it came.
#[derive(Debug, Default)]
pub struct InPlace {
    segment: Assembler,
    content: Vec<ContentBlock>,
    blocks: Vec<AnswerBlock>,
    own: bool,
}

impl InPlace {
    pub fn push(&mut self, piece: &NativeDelta) {
        match piece {
            NativeDelta::Neutral(delta) => self.segment.push(delta.clone()),
            NativeDelta::Block(json) => {
                self.flush();
                self.blocks.push(AnswerBlock::Native(json.clone()));
                self.own = true;
            }
            NativeDelta::TextStart(_) => self.flush(),
            NativeDelta::Citation(_) | NativeDelta::Usage(_) => {}
        }
    }

    fn flush(&mut self) {
        let segment = std::mem::take(&mut self.segment).finish();
        for block in segment.content {
            self.blocks.push(AnswerBlock::Neutral(u32::try_from(self.content.len()).unwrap_or(u32::MAX)));
            self.content.push(block);
        }
    }

    /// The neutral blocks and every block in the provider's order; `None`
    /// when no own block came (the neutral answer says it all).
    pub fn finish(mut self) -> Option<(Vec<ContentBlock>, Vec<AnswerBlock>)> {
        self.flush();
        self.own.then_some((self.content, self.blocks))
    }
}

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

    #[test]
    fn own_blocks_keep_their_place_and_texts_stay_apart() {
        let text = |text: &str| NativeDelta::Neutral(StreamDelta::Text(text.into()));
        let mut in_place = InPlace::default();
        for piece in [
            text("Searching"),
            text("."),
            NativeDelta::Block(r#"{"type":"server_tool_use"}"#.into()),
            NativeDelta::TextStart("{}".into()),
            text("Cited."),
            NativeDelta::Citation("{}".into()),
            NativeDelta::TextStart("{}".into()),
            text("Plain."),
        ] {
            in_place.push(&piece);
        }
        let (content, blocks) = in_place.finish().unwrap();
        let texts = ["Searching.", "Cited.", "Plain."].map(|text| ContentBlock::Text(text.into()));
        assert_eq!(content, texts);
        let native = AnswerBlock::Native(r#"{"type":"server_tool_use"}"#.into());
        let expected = [AnswerBlock::Neutral(0), native, AnswerBlock::Neutral(1), AnswerBlock::Neutral(2)];
        assert_eq!(blocks, expected);
        let mut plain = InPlace::default();
        plain.push(&text("no own block"));
        assert!(plain.finish().is_none(), "the neutral answer says it all");
    }

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
