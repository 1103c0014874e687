//! A streamed answer as the library's callers see it: an async `next()`, or a
//! `futures::Stream` of the same items.

use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::sync::mpsc;

use super::assemble::Assembler;
use crate::chat::{ChatResponse, Stamp};
use crate::error::CallError;
use crate::error::WeirError;
use crate::types::{NativeDelta, StreamDelta};

/// Deltas queued between the upstream reader and the caller. Small on purpose:
/// when the caller stops reading, the reader stops reading the upstream socket.
pub(crate) const STREAM_BUFFER: usize = 8;

/// A live streamed answer: normalized deltas in order, then the end. Obtained
/// from [`crate::Weir::chat_stream`] once the first output is in hand. Dropping it
/// cancels the upstream request and releases what admission holds for it.
///
/// A stream with the provider's own blocks (see `call::streaming`) carries
/// them in place among the deltas; [`Self::next`] and the `Stream` skip them
/// (a library caller gets the neutral answer), the provider-shaped routes
/// read them ([`Self::next_piece`]).
#[derive(Debug)]
pub struct ChatStream {
    deltas: mpsc::Receiver<Result<NativeDelta, WeirError>>,
    stamp: Stamp,
    ended: bool,
}

impl ChatStream {
    pub(crate) fn new(deltas: mpsc::Receiver<Result<NativeDelta, WeirError>>, stamp: Stamp) -> Self {
        Self { deltas, stamp, ended: false }
    }

    /// The call's facts as of its first output: catalog id, provider, ceiling,
    /// attempts, and the latency to that first output.
    pub fn stamp(&self) -> &Stamp {
        &self.stamp
    }

    /// The next delta; `None` after the last. A failure after output began is the
    /// stream's last item: nothing is retried once a caller has seen output.
    pub async fn next(&mut self) -> Option<Result<StreamDelta, CallError>> {
        loop {
            match self.next_piece().await? {
                Ok(NativeDelta::Neutral(delta)) => return Some(Ok(delta)),
                Ok(_own) => {}
                Err(error) => return Some(Err(error)),
            }
        }
    }

    /// The next delta or own piece; `None` after the last.
    pub(crate) async fn next_piece(&mut self) -> Option<Result<NativeDelta, CallError>> {
        if self.ended {
            return None;
        }
        let received = self.deltas.recv().await;
        self.item(received)
    }

    /// A delta already waiting, without waiting for one: lets a writer put what is
    /// ready into one write instead of one write per delta.
    pub(crate) fn ready(&mut self) -> Ready {
        if self.ended {
            return Ready::Ended;
        }
        let received = match self.deltas.try_recv() {
            Ok(item) => Some(item),
            Err(mpsc::error::TryRecvError::Empty) => return Ready::Nothing,
            Err(mpsc::error::TryRecvError::Disconnected) => None,
        };
        match self.item(received) {
            Some(Ok(delta)) => Ready::Delta(delta),
            Some(Err(error)) => Ready::Failed(Box::new(error)),
            None => Ready::Ended,
        }
    }

    /// What one received item means for the caller, and whether the stream ended.
    fn item(&mut self, received: Option<Result<NativeDelta, WeirError>>) -> Option<Result<NativeDelta, CallError>> {
        match received {
            Some(Ok(delta)) => Some(Ok(delta)),
            Some(Err(error)) => {
                self.ended = true;
                Some(Err(CallError { error, stamp: self.stamp.clone() }))
            }
            None => {
                self.ended = true;
                None
            }
        }
    }

    /// Reads the stream to its end and assembles the whole answer.
    pub async fn into_answer(mut self) -> Result<ChatResponse, CallError> {
        let mut assembler = Assembler::default();
        while let Some(delta) = self.next().await {
            assembler.push(delta?);
        }
        Ok(ChatResponse::stamped(assembler.finish(), self.stamp))
    }
}

/// What [`ChatStream::ready`] found.
pub(crate) enum Ready {
    Delta(NativeDelta),
    Failed(Box<CallError>),
    Ended,
    Nothing,
}

impl futures_util::Stream for ChatStream {
    type Item = Result<StreamDelta, CallError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        loop {
            if self.ended {
                return Poll::Ready(None);
            }
            let item = match self.deltas.poll_recv(cx) {
                Poll::Ready(received) => self.item(received),
                Poll::Pending => return Poll::Pending,
            };
            match item {
                Some(Ok(NativeDelta::Neutral(delta))) => return Poll::Ready(Some(Ok(delta))),
                Some(Ok(_own)) => {}
                Some(Err(error)) => return Poll::Ready(Some(Err(error))),
                None => return Poll::Ready(None),
            }
        }
    }
}
