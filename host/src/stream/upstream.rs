//! One upstream stream being read, one delta at a time:
//!
//! ```text
//! socket bytes ─► FrameDecoder (SSE / event-stream) ─► component stream decoder ─► StreamRepair ─► deltas
//! ```
//!
//! A native stream decoder (`native.native-stream`) hands the provider's own
//! pieces (blocks, text starts, citations, own usage) among its deltas: they
//! pass the repair untouched, in their place after the deltas the repair has
//! released before them (the repair holds text back only while it may be a
//! tool call written as markup, which a provider with own blocks never writes).
//!
//! Nothing is read ahead: the next chunk is pulled from the socket only when the
//! deltas of the last one were taken, so a slow consumer slows the upstream read.
//! Events are decoded one at a time, so the first delta of a large read is handed
//! out without waiting for the component to decode the whole read.

use std::collections::VecDeque;

use super::framing::{FrameDecoder, FramingError};
use super::repair::StreamRepair;
use crate::plugin::{ComponentStream, PluginError};
use crate::transport::{BodyStream, TransportError};
use crate::types::{NativeDelta, StreamDelta, StreamEvent, StreamFraming};

/// Why an upstream stream could not go on.
#[derive(Debug, thiserror::Error)]
pub enum StreamFailure {
    #[error(transparent)]
    Transport(TransportError),
    #[error("the upstream's stream framing is broken: {0}")]
    Framing(FramingError),
    #[error(transparent)]
    Plugin(PluginError),
    /// The body ended cleanly but no stop reason came: the answer is cut short.
    #[error("the upstream stream ended without a stop reason")]
    EndedWithoutStop,
}

#[derive(Debug)]
pub struct UpstreamStream {
    body: BodyStream,
    framer: FrameDecoder,
    decoder: ComponentStream,
    repair: StreamRepair,
    /// Framed but not yet decoded.
    events: VecDeque<StreamEvent>,
    /// Decoded and repaired, not yet taken.
    pending: VecDeque<NativeDelta>,
    /// The body ended and everything was decoded and flushed.
    ended: bool,
    /// The body ended; `events` may still hold its last events.
    body_done: bool,
    saw_stop: bool,
    bytes: u64,
}

impl UpstreamStream {
    pub fn new(body: BodyStream, framing: StreamFraming, decoder: ComponentStream) -> Self {
        Self {
            body,
            framer: FrameDecoder::new(framing),
            decoder,
            repair: StreamRepair::new(),
            events: VecDeque::new(),
            pending: VecDeque::new(),
            ended: false,
            body_done: false,
            saw_stop: false,
            bytes: 0,
        }
    }

    /// Body bytes read so far.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// The next delta (or own piece); `None` once the stream ended with its
    /// stop. A failure ends the stream: call no further after one.
    pub async fn next(&mut self) -> Option<Result<NativeDelta, StreamFailure>> {
        loop {
            if let Some(delta) = self.pending.pop_front() {
                self.saw_stop |= matches!(delta, NativeDelta::Neutral(StreamDelta::Stop(_)));
                return Some(Ok(delta));
            }
            if self.ended {
                if self.saw_stop {
                    return None;
                }
                // Reported once; the stream is over either way.
                self.saw_stop = true;
                return Some(Err(StreamFailure::EndedWithoutStop));
            }
            if let Err(failure) = self.advance().await {
                self.ended = true;
                self.saw_stop = true;
                return Some(Err(failure));
            }
        }
    }

    /// One step: decode the next framed event, or read the next chunk, or (at the
    /// end of the body) flush the decoder and the repair.
    async fn advance(&mut self) -> Result<(), StreamFailure> {
        if let Some(event) = self.events.pop_front() {
            // Boxed (one allocation per event), like the record's close in
            // `call::streaming`: inline, the largest future a stream's task
            // awaits sizes that task for the stream's whole life, waits between
            // events included. The two boxed took a stream's task from 10.6 to
            // 6.5 KiB ("Long streams" in docs/src/performance.md).
            let deltas = Box::pin(self.decoder.feed_pieces(&event)).await.map_err(StreamFailure::Plugin)?;
            self.repaired(deltas);
        } else if !self.body_done {
            self.read_more().await?;
        } else {
            // Boxed for the same reason as `feed_pieces` above.
            let deltas = Box::pin(self.decoder.finish_pieces()).await.map_err(StreamFailure::Plugin)?;
            self.repaired(deltas);
            let flushed = self.repair.finish();
            self.pending.extend(flushed.into_iter().map(NativeDelta::Neutral));
            self.ended = true;
        }
        Ok(())
    }

    /// Reads one chunk (or the end) and frames the events it completes.
    async fn read_more(&mut self) -> Result<(), StreamFailure> {
        let events = match self.body.next_chunk().await.map_err(StreamFailure::Transport)? {
            Some(chunk) => {
                self.bytes += chunk.len() as u64;
                self.framer.push(&chunk).map_err(StreamFailure::Framing)?
            }
            None => {
                self.body_done = true;
                self.framer.finish().map_err(StreamFailure::Framing)?
            }
        };
        self.events.extend(events);
        Ok(())
    }

    fn repaired(&mut self, pieces: Vec<NativeDelta>) {
        for piece in pieces {
            match piece {
                NativeDelta::Neutral(delta) => {
                    let repaired = self.repair.push(delta);
                    self.pending.extend(repaired.into_iter().map(NativeDelta::Neutral));
                }
                own => self.pending.push_back(own),
            }
        }
    }
}
