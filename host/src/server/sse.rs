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
use crate::types::{NativeDelta, StreamDelta};

/// How many ready deltas one write of a stream may carry: bounded, so a burst
/// still reaches the client in pieces.
const MAX_DELTAS_PER_WRITE: usize = 64;

/// A write stops taking deltas once its events reach this many bytes: what a
/// stream pulls from its upstream ahead of a client that stopped reading stays
/// about one such write, its channel and the socket's unsent bytes (16 KiB,
/// see the edge's `TCP_NOTSENT_LOWAT`).
const MAX_BYTES_PER_WRITE: usize = 16 << 10;

/// One dialect's rendering of a stream, as whole SSE events (`...\n\n`).
pub(super) trait EventWriter: Send + 'static {
    /// The events for one delta (none for deltas the dialect has no field for).
    fn delta(&mut self, delta: StreamDelta) -> Vec<String>;
    /// The events for one of the provider's own pieces in a live stream (see
    /// `ChatStream`): none for a dialect that has no field for them, or whose
    /// stream never carries them (they are another dialect's).
    fn own(&mut self, _piece: NativeDelta) -> Vec<String> {
        Vec::new()
    }
    /// The events that close a stream that completed.
    fn end(&mut self) -> Vec<String>;
    /// The event for a failure after the stream began; nothing follows it.
    fn error(&mut self, error: &WeirError) -> Vec<String>;
}

/// The stream as a `text/event-stream` response with the stamp headers.
pub(super) fn sse_response<W: EventWriter>(stream: ChatStream, writer: W) -> Response {
    let stamp = stream.stamp().clone();
    // The first write goes out with what is ready then; later ones gather.
    let events = futures_util::stream::unfold(Some((stream, writer, false)), |state| async move {
        let (mut stream, mut writer, gather) = state?;
        let (events, more) = next_write(&mut stream, &mut writer, gather).await;
        let chunk = Ok::<_, std::convert::Infallible>(Bytes::from(events.concat()));
        Some((chunk, more.then_some((stream, writer, true))))
    });
    let mut response = Response::new(Body::from_stream(events));
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    super::stamp_headers(headers, &stamp);
    response
}

/// The events of the next write, and whether the stream goes on after it: the
/// next delta, then whatever else is ready, one write for all of them (one write
/// per delta costs a syscall and a TCP segment each, for the client too).
///
/// With `gather`, "ready" includes what the tasks already woken on this thread
/// produce: the upstream connection hands over one chunk per wake-up, so a burst
/// the upstream sent at once reaches the stream one delta at a time. While
/// deltas keep arriving, the writer lets the thread's runnable tasks run first
/// ([`after_runnable_tasks`]) and takes what came meanwhile, up to
/// [`MAX_DELTAS_PER_WRITE`] and [`MAX_BYTES_PER_WRITE`]. A lone delta costs one
/// such wait (a tiny task spawned) before its write. Without `gather` (the
/// stream's first write, whose latency is the time to first byte) only what is
/// already queued goes with it.
async fn next_write<W: EventWriter>(stream: &mut ChatStream, writer: &mut W, gather: bool) -> (Vec<String>, bool) {
    let (mut events, mut more) = match stream.next_piece().await {
        Some(Ok(piece)) => (write(writer, piece), true),
        Some(Err(failure)) => (writer.error(&failure.error), false),
        None => (writer.end(), false),
    };
    let mut batched = 1;
    let mut bytes = byte_len(&events);
    let mut arrived_since_wait = gather;
    while more && batched < MAX_DELTAS_PER_WRITE && bytes < MAX_BYTES_PER_WRITE {
        match stream.ready() {
            Ready::Delta(piece) => {
                let delta_events = write(writer, piece);
                bytes += byte_len(&delta_events);
                events.extend(delta_events);
                batched += 1;
                arrived_since_wait = gather;
            }
            Ready::Failed(failure) => {
                events.extend(writer.error(&failure.error));
                more = false;
            }
            Ready::Ended => {
                events.extend(writer.end());
                more = false;
            }
            Ready::Nothing if arrived_since_wait => {
                arrived_since_wait = false;
                after_runnable_tasks().await;
            }
            Ready::Nothing => break,
        }
    }
    (events, more)
}

/// One piece's events: a neutral delta's, or an own piece's.
fn write<W: EventWriter>(writer: &mut W, piece: NativeDelta) -> Vec<String> {
    match piece {
        NativeDelta::Neutral(delta) => writer.delta(delta),
        own => writer.own(own),
    }
}

fn byte_len(events: &[String]) -> usize {
    events.iter().map(String::len).sum()
}

/// Resolves once the tasks already runnable on this thread have run and the
/// runtime found nothing more to run (or polled its driver): tokio's
/// `yield_now`, as a task of its own, because hyper polls a body more than once
/// per wake-up and a `yield_now` polled again returns at once.
async fn after_runnable_tasks() {
    let _ = tokio::spawn(tokio::task::yield_now()).await;
}

/// An unnamed event: `data: <json>` (OpenAI's chunks), serialized in place.
pub(super) fn data_event(value: &impl serde::Serialize) -> String {
    event_of(None, value)
}

/// A named event: `event: <name>` then `data: <json>` (Anthropic's and the
/// Responses API's events), serialized in place.
pub(super) fn named_event(name: &str, value: &impl serde::Serialize) -> String {
    event_of(Some(name), value)
}

/// One event, its data written straight into its buffer. Weir's answer types
/// always serialize (every map key is a string); were one not to, the event
/// would carry `null` rather than a torn object.
fn event_of(name: Option<&str>, value: &impl serde::Serialize) -> String {
    let mut event = Vec::with_capacity(256);
    if let Some(name) = name {
        event.extend_from_slice(b"event: ");
        event.extend_from_slice(name.as_bytes());
        event.push(b'\n');
    }
    event.extend_from_slice(b"data: ");
    let data_at = event.len();
    if serde_json::to_writer(&mut event, value).is_err() {
        event.truncate(data_at);
        event.extend_from_slice(b"null");
    }
    event.extend_from_slice(b"\n\n");
    String::from_utf8(event).unwrap_or_else(|invalid| String::from_utf8_lossy(invalid.as_bytes()).into_owned())
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, SystemTime};

    use http_body_util::BodyExt;
    use tokio::sync::mpsc;

    use super::*;
    use crate::chat::Stamp;
    use crate::stream::STREAM_BUFFER;

    /// Each text delta as `data: <text>`, the end as `data: end`, a failure as
    /// `data: error`.
    struct Plain;

    impl EventWriter for Plain {
        fn delta(&mut self, delta: StreamDelta) -> Vec<String> {
            match delta {
                StreamDelta::Text(text) => vec![format!("data: {text}\n\n")],
                _ => Vec::new(),
            }
        }
        fn end(&mut self) -> Vec<String> {
            vec!["data: end\n\n".to_owned()]
        }
        fn error(&mut self, _: &WeirError) -> Vec<String> {
            vec!["data: error\n\n".to_owned()]
        }
    }

    fn stamp() -> Stamp {
        Stamp {
            call_id: "call-1".into(),
            model: "m".into(),
            role: None,
            provider: None,
            requested_max_tokens: None,
            attempts: 1,
            latency: Duration::ZERO,
            ended_at: SystemTime::UNIX_EPOCH,
            cache_multipliers: None,
            native_dropped: crate::NativeDropped::default(),
            passed_over: Vec::new(),
            fallback_from: None,
            cache: None,
            native_answer: None,
        }
    }

    /// A stream fed as the gateway feeds one: an "upstream connection" task hands
    /// one chunk at a time (a channel of one) to a "pump" task, which sends one
    /// delta per chunk; `last` is the pump's final item (none: the stream ends).
    fn relayed(texts: Vec<String>, last: Option<WeirError>) -> ChatStream {
        let (chunks, mut chunk_receiver) = mpsc::channel::<String>(1);
        let (deltas, delta_receiver) = mpsc::channel(STREAM_BUFFER);
        tokio::spawn(async move {
            for text in texts {
                chunks.send(text).await.unwrap();
            }
        });
        tokio::spawn(async move {
            while let Some(text) = chunk_receiver.recv().await {
                deltas.send(Ok(NativeDelta::Neutral(StreamDelta::Text(text)))).await.unwrap();
            }
            if let Some(error) = last {
                deltas.send(Err(error)).await.unwrap();
            }
        });
        ChatStream::new(delta_receiver, stamp())
    }

    /// The body's writes (data frames), in order, each as text.
    async fn writes(response: Response) -> Vec<String> {
        let mut body = response.into_body();
        let mut writes = Vec::new();
        while let Some(frame) = body.frame().await {
            let data = frame.unwrap().into_data().unwrap();
            writes.push(String::from_utf8(data.to_vec()).unwrap());
        }
        writes
    }

    fn texts(count: usize) -> Vec<String> {
        (0..count).map(|i| format!("t{i}")).collect()
    }

    fn events(texts: &[String]) -> String {
        texts.iter().map(|text| format!("data: {text}\n\n")).collect()
    }

    #[tokio::test]
    async fn a_burst_relayed_one_delta_per_wake_up_goes_out_in_writes_of_up_to_64() {
        let sent = texts(200);
        let writes = writes(sse_response(relayed(sent.clone(), None), Plain)).await;
        assert_eq!(writes.concat(), events(&sent) + "data: end\n\n", "every delta, in order, then the end");
        assert!(writes.len() <= 8, "200 deltas in {} writes", writes.len());
        let largest = writes.iter().map(|write| write.matches("data: ").count()).max().unwrap();
        assert!(largest <= MAX_DELTAS_PER_WRITE + 1, "a write of {largest} events");
    }

    #[tokio::test]
    async fn a_write_stops_taking_deltas_at_16_kib() {
        let sent: Vec<String> = (0..40).map(|i| format!("{i:02}{}", "x".repeat(4000))).collect();
        let writes = writes(sse_response(relayed(sent.clone(), None), Plain)).await;
        assert_eq!(writes.concat(), events(&sent) + "data: end\n\n");
        let delta_bytes = events(&sent[..1]).len();
        for write in &writes {
            assert!(write.len() < MAX_BYTES_PER_WRITE + delta_bytes, "a write of {} bytes", write.len());
        }
        assert!(writes.len() >= 40 * delta_bytes / (MAX_BYTES_PER_WRITE + delta_bytes), "{} writes", writes.len());
    }

    #[tokio::test]
    async fn a_failure_after_a_burst_is_the_last_event() {
        let sent = texts(20);
        let failure = WeirError::DeadlineExceeded { model: "m".into() };
        let writes = writes(sse_response(relayed(sent.clone(), Some(failure)), Plain)).await;
        assert_eq!(writes.concat(), events(&sent) + "data: error\n\n");
        // The first write does not gather; the rest go together.
        assert!(writes.len() <= 3, "20 deltas and the failure in {} writes", writes.len());
    }

    #[tokio::test]
    async fn a_lone_delta_is_written_before_the_next_one_exists() {
        let (deltas, receiver) = mpsc::channel(STREAM_BUFFER);
        let mut body = sse_response(ChatStream::new(receiver, stamp()), Plain).into_body();
        deltas.send(Ok(NativeDelta::Neutral(StreamDelta::Text("first".into())))).await.unwrap();
        // The sender stays open: the first write may not wait for more.
        let first = tokio::time::timeout(Duration::from_secs(10), body.frame()).await.expect("written without more");
        assert_eq!(first.unwrap().unwrap().into_data().unwrap(), "data: first\n\n");
        drop(deltas);
        assert_eq!(body.frame().await.unwrap().unwrap().into_data().unwrap(), "data: end\n\n");
    }
}
