//! A [`ChatStream`] as a server-sent-events body, for any dialect. A dialect
//! supplies an [`EventWriter`] (what each delta, the end and a failure look like
//! on its wire); the flow control and batching live here once.
//!
//! The body is pulled by hyper as the client reads, so a slow client slows the
//! upstream read, and a client that leaves drops the [`ChatStream`], which
//! cancels the upstream request. Deltas already waiting go out in one write.

use axum::body::{Body, Bytes};
use axum::http::HeaderValue;
use axum::http::header::{CACHE_CONTROL, CONTENT_TYPE};
use axum::response::Response;

use crate::error::WeirError;
use crate::stream::{ChatStream, Ready};
use crate::types::StreamDelta;

/// How many ready deltas one write of a stream may carry: bounded, so a burst
/// still reaches the client in pieces.
const MAX_DELTAS_PER_WRITE: usize = 64;

/// One dialect's rendering of a stream, as whole SSE events (`...\n\n`).
pub(super) trait EventWriter: Send + 'static {
    /// The events for one delta (none for deltas the dialect has no field for).
    fn delta(&mut self, delta: StreamDelta) -> Vec<String>;
    /// The events that close a stream that completed.
    fn end(&mut self) -> Vec<String>;
    /// The event for a failure after the stream began; nothing follows it.
    fn error(&mut self, error: &WeirError) -> Vec<String>;
}

/// The stream as a `text/event-stream` response with the stamp headers.
pub(super) fn sse_response<W: EventWriter>(stream: ChatStream, writer: W) -> Response {
    let stamp = stream.stamp().clone();
    let events = futures_util::stream::unfold(Some((stream, writer)), |state| async move {
        let (mut stream, mut writer) = state?;
        let (mut events, mut more) = match stream.next().await {
            Some(Ok(delta)) => (writer.delta(delta), true),
            Some(Err(failure)) => (writer.error(&failure.error), false),
            None => (writer.end(), false),
        };
        // Whatever else is ready goes into the same write: one write per delta
        // costs a syscall and a TCP segment each.
        let mut batched = 0;
        while more && batched < MAX_DELTAS_PER_WRITE {
            batched += 1;
            match stream.ready() {
                Ready::Delta(delta) => events.extend(writer.delta(delta)),
                Ready::Failed(failure) => {
                    events.extend(writer.error(&failure.error));
                    more = false;
                }
                Ready::Ended => {
                    events.extend(writer.end());
                    more = false;
                }
                Ready::Nothing => break,
            }
        }
        let chunk = Ok::<_, std::convert::Infallible>(Bytes::from(events.concat()));
        Some((chunk, more.then_some((stream, writer))))
    });
    let mut response = Response::new(Body::from_stream(events));
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    super::stamp_headers(headers, &stamp);
    response
}

/// An unnamed event: `data: <json>` (OpenAI's chunks), serialized in place.
/// Weir's answer types always serialize (every map key is a string); were one
/// not to, the event would carry `null` rather than a torn object.
pub(super) fn data_event(value: &impl serde::Serialize) -> String {
    let mut event = Vec::with_capacity(256);
    event.extend_from_slice(b"data: ");
    if serde_json::to_writer(&mut event, value).is_err() {
        event.truncate(b"data: ".len());
        event.extend_from_slice(b"null");
    }
    event.extend_from_slice(b"\n\n");
    String::from_utf8(event).unwrap_or_else(|invalid| String::from_utf8_lossy(invalid.as_bytes()).into_owned())
}

/// A named event: `event: <name>` then `data: <json>` (Anthropic's events).
pub(super) fn named_event(name: &str, value: &serde_json::Value) -> String {
    format!("event: {name}\ndata: {value}\n\n")
}
