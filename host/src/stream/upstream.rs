//! One upstream stream being read, one delta at a time:
//!
//! ```text
//! socket bytes ─► FrameDecoder (SSE / event-stream) ─► component stream decoder ─► StreamRepair ─► deltas
//! ```
//!
//! Nothing is read ahead: the next chunk is pulled from the socket only when the
//! deltas of the last one were taken, so a slow consumer slows the upstream read.

use std::collections::VecDeque;

use super::framing::{FrameDecoder, FramingError};
use super::repair::StreamRepair;
use crate::plugin::{ComponentStream, PluginError};
use crate::transport::{BodyStream, TransportError};
use crate::types::{StreamDelta, StreamFraming};

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
    pending: VecDeque<StreamDelta>,
    ended: bool,
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
            pending: VecDeque::new(),
            ended: false,
            saw_stop: false,
            bytes: 0,
        }
    }

    /// Body bytes read so far.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// The next delta; `None` once the stream ended with its stop. A failure ends
    /// the stream: call no further after one.
    pub async fn next(&mut self) -> Option<Result<StreamDelta, StreamFailure>> {
        loop {
            if let Some(delta) = self.pending.pop_front() {
                self.saw_stop |= matches!(delta, StreamDelta::Stop(_));
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
            if let Err(failure) = self.read_more().await {
                self.ended = true;
                self.saw_stop = true;
                return Some(Err(failure));
            }
        }
    }

    /// Reads one chunk (or the end) and queues the deltas it completes.
    async fn read_more(&mut self) -> Result<(), StreamFailure> {
        let events = match self.body.next_chunk().await.map_err(StreamFailure::Transport)? {
            Some(chunk) => {
                self.bytes += chunk.len() as u64;
                self.framer.push(&chunk).map_err(StreamFailure::Framing)?
            }
            None => {
                self.ended = true;
                self.framer.finish().map_err(StreamFailure::Framing)?
            }
        };
        for event in &events {
            let deltas = self.decoder.feed(event).await.map_err(StreamFailure::Plugin)?;
            self.repaired(deltas);
        }
        if self.ended {
            let deltas = self.decoder.finish().await.map_err(StreamFailure::Plugin)?;
            self.repaired(deltas);
            let flushed = self.repair.finish();
            self.pending.extend(flushed);
        }
        Ok(())
    }

    fn repaired(&mut self, deltas: Vec<StreamDelta>) {
        for delta in deltas {
            let repaired = self.repair.push(delta);
            self.pending.extend(repaired);
        }
    }
}
