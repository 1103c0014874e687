//! A response body that holds something until its last frame is sent: a call's
//! in-flight permit, a connection's "the response ended" signal. A stream's
//! handler returns long before its body ends, so the body is what must hold them.

use std::pin::Pin;
use std::task::{Context, Poll};

use axum::body::{Body, Bytes};
use http_body::{Frame, SizeHint};

/// `inner`, then `held` dropped at its end (or when the body is dropped unsent).
pub(super) struct Holding<T> {
    inner: Body,
    held: Option<T>,
}

impl<T> Holding<T> {
    pub(super) fn new(inner: Body, held: T) -> Self {
        Self { inner, held: Some(held) }
    }
}

impl<T: Send + Unpin + 'static> http_body::Body for Holding<T> {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        if let Poll::Ready(None) = polled {
            self.held = None;
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
