//! A stream's deltas summarized for comparison: a `stream` fixture's `expect` is a
//! JSON subset of [`DecodedStream`] serialized. The answer is assembled as the
//! host assembles a streamed answer (`host/src/stream/assemble.rs`): text pieces
//! joined into one block until another kind comes, thinking likewise, a tool
//! call's fragments joined by its index, the last usage, stop, model and id.

use serde::Serialize;
use serde_json::Value;

use super::StreamRun;
use crate::fixture::{Block, Delta, InBand, Refusal, Usage};

/// How a stream ended, as the host sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Ending {
    /// The stream ended with a stop: the answer is whole.
    Complete,
    /// An error frame: the host classifies it (and may replay the call whole when
    /// no output was out yet).
    InBandError,
    /// The body ended and no stop came: the host fails the stream as cut short.
    CutShort,
    /// The decoder declined an event or `finish`: the call fails with its reason.
    CodecError,
}

/// Where and why the decoder declined.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StreamCodecError {
    /// `malformed` or `unsupported`.
    pub kind: String,
    /// `event N of M` or `finish`.
    pub at: String,
    pub reason: String,
}

/// A streamed answer, summarized.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DecodedStream {
    pub ending: Ending,
    /// Every delta the host would pass on, in order.
    pub deltas: Vec<Delta>,
    /// The assembled blocks (`text`, `thinking`, `tool_use` with its input parsed,
    /// or as the raw string when it is not JSON).
    pub content: Vec<Block>,
    /// Every text piece joined.
    pub text: String,
    pub stop: Option<String>,
    pub raw_stop: Option<String>,
    pub refusal: Option<Refusal>,
    /// The last usage reported.
    pub usage: Option<Usage>,
    pub served_model: Option<String>,
    pub request_id: Option<String>,
    /// The in-band error that ended the stream.
    pub error: Option<InBand>,
    pub codec_error: Option<StreamCodecError>,
}

impl DecodedStream {
    pub fn of(run: StreamRun) -> Self {
        let mut summary = Self {
            ending: Ending::CutShort,
            deltas: Vec::new(),
            content: Vec::new(),
            text: String::new(),
            stop: None,
            raw_stop: None,
            refusal: None,
            usage: None,
            served_model: None,
            request_id: None,
            error: None,
            codec_error: None,
        };
        let mut calls = Calls::default();
        for delta in &run.deltas {
            summary.take(delta, &mut calls);
        }
        summary.content = calls.blocks(std::mem::take(&mut summary.content));
        summary.codec_error = run.refused.map(|(step, failure)| StreamCodecError {
            kind: failure.kind().to_owned(),
            at: step.to_string(),
            reason: failure.reason().to_owned(),
        });
        summary.ending = match (&summary.codec_error, &summary.error, &summary.stop) {
            (Some(_), _, _) => Ending::CodecError,
            (None, Some(_), _) => Ending::InBandError,
            (None, None, Some(_)) => Ending::Complete,
            (None, None, None) => Ending::CutShort,
        };
        summary.deltas = run.deltas;
        summary
    }

    fn take(&mut self, delta: &Delta, calls: &mut Calls) {
        match delta {
            Delta::Text(text) => {
                self.text.push_str(text);
                match self.content.last_mut() {
                    Some(Block::Text { text: current }) => current.push_str(text),
                    _ => self.content.push(Block::Text { text: text.clone() }),
                }
            }
            Delta::Thinking(text) => self.with_thinking(|thinking, _| thinking.push_str(text)),
            Delta::ThinkingSignature(piece) => {
                self.with_thinking(|_, signature| signature.get_or_insert_with(String::new).push_str(piece));
            }
            Delta::ToolCallStart { index, id, name } => {
                calls.started.push((*index, self.content.len(), String::new()));
                let input = Value::Null;
                self.content.push(Block::ToolUse { id: id.clone(), name: name.clone(), input });
            }
            Delta::ToolCallFragment { index, json } => {
                if let Some((_, _, arguments)) = calls.started.iter_mut().rev().find(|(i, _, _)| i == index) {
                    arguments.push_str(json);
                }
            }
            Delta::ToolCallEnd(_) => {}
            Delta::Usage(usage) => self.usage = Some(usage.clone()),
            Delta::Stop(stop) => {
                self.stop = Some(stop.reason.clone());
                self.raw_stop.clone_from(&stop.raw);
                self.refusal.clone_from(&stop.refusal);
            }
            Delta::ServedModel(model) => self.served_model = Some(model.clone()),
            Delta::RequestId(id) => self.request_id = Some(id.clone()),
            Delta::Error(error) => self.error = Some(error.clone()),
        }
    }

    /// Applies `change` (to the text and the signature) to the thinking block
    /// being streamed, opening one when the last block is another kind.
    fn with_thinking(&mut self, change: impl FnOnce(&mut String, &mut Option<String>)) {
        if !matches!(self.content.last(), Some(Block::Thinking { .. })) {
            self.content.push(Block::Thinking { text: String::new(), signature: None, redacted: false });
        }
        if let Some(Block::Thinking { text, signature, .. }) = self.content.last_mut() {
            change(text, signature);
        }
    }

    /// The arguments each call's fragments joined into, in start order, by the
    /// call's index.
    pub fn call_arguments(&self, name: &str) -> Vec<&Value> {
        self.content
            .iter()
            .filter_map(|block| match block {
                Block::ToolUse { name: found, input, .. } if found == name => Some(input),
                _ => None,
            })
            .collect()
    }
}

/// The tool calls started so far: (index, position in `content`, arguments so far).
#[derive(Default)]
struct Calls {
    started: Vec<(u32, usize, String)>,
}

impl Calls {
    /// `content` with each call's input set from its joined fragments.
    fn blocks(self, mut content: Vec<Block>) -> Vec<Block> {
        for (_, position, arguments) in self.started {
            if let Some(Block::ToolUse { input, .. }) = content.get_mut(position) {
                // Arguments that are not JSON stay visible as the raw string.
                *input = serde_json::from_str(&arguments).unwrap_or(Value::String(arguments));
            }
        }
        content
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::fixture::{CodecFailure, Stop};
    use crate::stream::Step;

    fn run(deltas: Vec<Delta>, refused: Option<(Step, CodecFailure)>) -> StreamRun {
        StreamRun { events: 3, deltas, refused, finished: true }
    }

    fn stop(reason: &str) -> Delta {
        Delta::Stop(Stop { reason: reason.to_owned(), raw: None, refusal: None })
    }

    #[test]
    fn pieces_are_assembled_as_the_host_assembles_them() {
        let summary = DecodedStream::of(run(
            vec![
                Delta::Thinking("hm".into()),
                Delta::ThinkingSignature("sig".into()),
                Delta::Text("Hel".into()),
                Delta::Text("lo".into()),
                Delta::ToolCallStart { index: 3, id: "c".into(), name: "f".into() },
                Delta::ToolCallFragment { index: 3, json: "{\"a\":".into() },
                Delta::ToolCallFragment { index: 3, json: "1}".into() },
                Delta::ToolCallEnd(3),
                stop("tool-use"),
            ],
            None,
        ));
        assert_eq!(summary.ending, Ending::Complete);
        assert_eq!(summary.text, "Hello");
        let content = serde_json::to_value(&summary.content).unwrap();
        assert_eq!(
            content,
            json!([{"type": "thinking", "text": "hm", "signature": "sig", "redacted": false},
                   {"type": "text", "text": "Hello"},
                   {"type": "tool_use", "id": "c", "name": "f", "input": {"a": 1}}])
        );
        assert_eq!(summary.call_arguments("f"), vec![&json!({"a": 1})]);
        assert_eq!(serde_json::to_value(&summary.deltas[7]).unwrap(), json!({"tool_call_end": 3}));
    }

    #[test]
    fn the_ending_says_what_the_host_does_with_the_stream() {
        assert_eq!(DecodedStream::of(run(vec![Delta::Text("a".into())], None)).ending, Ending::CutShort);
        let refused = Some((Step::Finish, CodecFailure::Malformed("cut".into())));
        let summary = DecodedStream::of(run(vec![stop("end-turn")], refused));
        assert_eq!(summary.ending, Ending::CodecError);
        assert_eq!(
            serde_json::to_value(&summary.codec_error).unwrap(),
            json!({"kind": "malformed", "at": "finish", "reason": "cut"})
        );
        assert_eq!(serde_json::to_value(Ending::InBandError).unwrap(), json!("in-band-error"));
    }
}
