//! Stream decoders, checked: a stream's body in, framed as the host frames it, fed
//! to a fresh decoder event by event as the host feeds it, and what comes out
//! summarized for comparison.
//!
//! ```text
//! StreamInput ─► Subject::stream (the host's framing, or the kit's natively) ─► drive ─► StreamRun ─► DecodedStream
//! ```
//!
//! [`drive`] follows the host's reading of an upstream stream
//! (`host/src/stream/upstream.rs`): events are fed in order; the first in-band
//! error delta ends the stream (the host reads no further: no later event, no
//! `finish`, no delta after it); a codec error ends it too; a stream that got
//! through every event ends with `finish`. A trap or a limit is a [`Fault`].
//!
//! - [`checks`]: the built-in stream checks every streaming key passes, on the
//!   kit's samples of its dialect ([`samples`]).
//! - [`summary`]: what a `stream` fixture's `expect` is compared with.

pub mod checks;
pub mod samples;
pub mod summary;

use std::fmt;

use crate::fixture::{CodecFailure, Delta, ProviderSummary, StreamEvent, StreamInput};
use crate::subject::{Answer, Fault, Subject};

pub use summary::DecodedStream;

/// One stream decoder under test: the WIT resource's two methods.
#[allow(async_fn_in_trait, reason = "the kit awaits a decoder on its own task; no Send bound is needed")]
pub trait Decoder {
    async fn feed(&mut self, event: &StreamEvent) -> Answer<Vec<Delta>>;
    async fn finish(&mut self) -> Answer<Vec<Delta>>;
}

/// Where in a stream a decoder was: an event (1-based) or `finish`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    Event { number: usize, of: usize },
    Finish,
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Event { number, of } => write!(f, "event {number} of {of}"),
            Self::Finish => f.write_str("finish"),
        }
    }
}

/// What a decoder made of one stream, as far as the host would read it.
#[derive(Debug, Clone, PartialEq)]
pub struct StreamRun {
    /// How many events the body framed into.
    pub events: usize,
    /// Every delta the host would pass on, in order: up to and including the
    /// first in-band error.
    pub deltas: Vec<Delta>,
    /// Where the decoder declined and why; nothing ran after it.
    pub refused: Option<(Step, CodecFailure)>,
    /// `finish` ran: no in-band error or codec error came before the body's end.
    pub finished: bool,
}

impl StreamRun {
    /// Takes one step's answer; `true` when the host would read no further.
    fn take(&mut self, step: Step, answer: Answer<Vec<Delta>>) -> Result<bool, Fault> {
        match answer.map_err(|fault| Fault(format!("at {step}: {}", fault.0)))? {
            Err(failure) => {
                self.refused = Some((step, failure));
                Ok(true)
            }
            Ok(deltas) => {
                for delta in deltas {
                    let in_band_error = matches!(delta, Delta::Error(_));
                    self.deltas.push(delta);
                    if in_band_error {
                        return Ok(true);
                    }
                }
                Ok(false)
            }
        }
    }
}

/// Feeds `events` to `decoder` as the host does, then `finish` if the stream got
/// that far (see the module doc).
pub async fn drive(decoder: &mut impl Decoder, events: &[StreamEvent]) -> Result<StreamRun, Fault> {
    let mut run = StreamRun { events: events.len(), deltas: Vec::new(), refused: None, finished: false };
    for (i, event) in events.iter().enumerate() {
        let step = Step::Event { number: i + 1, of: events.len() };
        if run.take(step, decoder.feed(event).await)? {
            return Ok(run);
        }
    }
    run.finished = true;
    run.take(Step::Finish, decoder.finish().await)?;
    Ok(run)
}

/// `input` through a fresh stream decoder of `provider`, summarized; `Err` says
/// why there is no summary (the input is not in the key's framing, or a fault).
pub async fn decode<S: Subject>(
    subject: &S,
    provider: &ProviderSummary,
    input: &StreamInput,
) -> Result<DecodedStream, String> {
    if input.framing() != provider.framing {
        return Err(format!(
            "`{}` frames its streams as {}; this stream is {}",
            provider.key,
            provider.framing.name(),
            input.framing().name()
        ));
    }
    let run = subject.stream(&provider.key, input).await.map_err(|fault| format!("fault {}", fault.0))?;
    Ok(DecodedStream::of(run))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixture::{Classified, InBand};

    /// A decoder that answers each step from a script.
    struct Scripted(Vec<Answer<Vec<Delta>>>);

    impl Decoder for Scripted {
        async fn feed(&mut self, _: &StreamEvent) -> Answer<Vec<Delta>> {
            self.0.remove(0)
        }

        async fn finish(&mut self) -> Answer<Vec<Delta>> {
            self.0.remove(0)
        }
    }

    fn events(n: usize) -> Vec<StreamEvent> {
        (0..n).map(|_| StreamEvent { name: None, headers: Vec::new(), data: b"{}".to_vec() }).collect()
    }

    fn text(text: &str) -> Delta {
        Delta::Text(text.to_owned())
    }

    fn error() -> Delta {
        let class = Classified { class: "overloaded".to_owned(), hint: None, detail: "d".to_owned() };
        Delta::Error(InBand { status: None, status_from_prose: false, class })
    }

    #[test]
    fn every_event_then_finish() {
        let mut decoder = Scripted(vec![Ok(Ok(vec![text("a")])), Ok(Ok(vec![text("b")])), Ok(Ok(vec![text("c")]))]);
        let run = pollster::block_on(drive(&mut decoder, &events(2))).unwrap();
        assert_eq!(run.deltas, vec![text("a"), text("b"), text("c")]);
        assert!(run.finished && run.refused.is_none());
    }

    #[test]
    fn an_in_band_error_ends_the_stream_there_as_the_host_reads_it() {
        let mut decoder = Scripted(vec![Ok(Ok(vec![text("a"), error(), text("dropped")]))]);
        let run = pollster::block_on(drive(&mut decoder, &events(3))).unwrap();
        assert_eq!(run.deltas, vec![text("a"), error()]);
        assert!(!run.finished, "no finish after an in-band error");
    }

    #[test]
    fn a_refusal_names_its_step_and_a_fault_fails_the_run() {
        let refusal = CodecFailure::Unsupported("no".to_owned());
        let mut decoder = Scripted(vec![Ok(Ok(vec![])), Ok(Err(refusal.clone()))]);
        let run = pollster::block_on(drive(&mut decoder, &events(3))).unwrap();
        assert_eq!(run.refused, Some((Step::Event { number: 2, of: 3 }, refusal)));
        assert_eq!(run.refused.map(|(step, _)| step.to_string()).as_deref(), Some("event 2 of 3"));

        let mut decoder = Scripted(vec![Ok(Ok(vec![])), Err(Fault("trapped".to_owned()))]);
        let fault = pollster::block_on(drive(&mut decoder, &events(1))).unwrap_err();
        assert_eq!(fault.0, "at finish: trapped");
    }
}
