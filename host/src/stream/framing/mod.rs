//! Transport framing: turns an upstream streaming body, as it arrives in chunks of
//! any size, into complete [`StreamEvent`]s for the provider component's stream
//! decoder. Two framings exist: server-sent events (`text/event-stream`, every
//! JSON API) and the AWS binary event stream (`application/vnd.amazon.eventstream`,
//! Bedrock).
//!
//! The decoders never see the network: the caller pushes each body chunk and, at
//! the end of the body, calls [`FrameDecoder::finish`]. Every buffer holds at most
//! one event of at most [`MAX_EVENT_BYTES`], so an upstream that never ends an event
//! costs a bounded amount of memory and a typed error, not an out-of-memory kill.

mod event_stream;
mod sse;

use crate::types::{StreamEvent, StreamFraming};

use event_stream::EventStreamDecoder;
use sse::SseDecoder;

/// The most bytes one event may occupy while it is being assembled: an SSE event's
/// pending line plus its joined `data`, or one whole AWS event-stream message.
///
/// 16 MiB is AWS's own limit for an event-stream payload, and three orders of
/// magnitude above any real model event (a few KiB of JSON). An upstream that sends
/// more is broken or hostile; without a limit it could make the host buffer forever.
pub const MAX_EVENT_BYTES: usize = 16 * 1024 * 1024;

/// Why an upstream body could not be framed. The stream is unusable after one.
#[derive(Debug, thiserror::Error)]
pub enum FramingError {
    /// One event outgrew [`MAX_EVENT_BYTES`].
    #[error("a stream event of at least {size} bytes exceeds the {limit}-byte limit")]
    TooLarge { size: usize, limit: usize },
    /// An event-stream prelude declared a total length below the 16 bytes that its
    /// prelude and message checksum alone take.
    #[error("an event-stream message declares a length of {0} bytes, below the 16-byte minimum")]
    InvalidLength(usize),
    /// An event-stream message failed its prelude or message CRC, or its headers
    /// are malformed. The crate's error names which (its kinds are not public).
    #[error("invalid event-stream message: {0}")]
    InvalidMessage(#[source] aws_smithy_eventstream::error::Error),
    /// The body ended in the middle of an event-stream message.
    #[error("the stream ended inside an event-stream message, {left} bytes left over")]
    Truncated { left: usize },
}

/// An incremental decoder for one response body in one framing.
#[derive(Debug)]
pub struct FrameDecoder {
    inner: Decoder,
}

#[derive(Debug)]
enum Decoder {
    Sse(SseDecoder),
    AwsEventStream(EventStreamDecoder),
}

impl FrameDecoder {
    /// A decoder for a fresh body in `framing`, the framing the provider component
    /// declared for its stream.
    pub fn new(framing: StreamFraming) -> Self {
        let inner = match framing {
            StreamFraming::Sse => Decoder::Sse(SseDecoder::default()),
            StreamFraming::AwsEventStream => Decoder::AwsEventStream(EventStreamDecoder::default()),
        };
        Self { inner }
    }

    /// Feeds the next chunk of the body; returns the events it completed, in order.
    pub fn push(&mut self, bytes: &[u8]) -> Result<Vec<StreamEvent>, FramingError> {
        match &mut self.inner {
            Decoder::Sse(decoder) => decoder.push(bytes),
            Decoder::AwsEventStream(decoder) => decoder.push(bytes),
        }
    }

    /// Ends the body: returns an SSE event that the body ended without a blank line
    /// after, or fails if an event-stream message was cut off.
    pub fn finish(&mut self) -> Result<Vec<StreamEvent>, FramingError> {
        match &mut self.inner {
            Decoder::Sse(decoder) => decoder.finish(),
            Decoder::AwsEventStream(decoder) => decoder.finish(),
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::event_stream::tests::{Value, frame, rendered};
    use super::*;

    /// Decodes `body` pushed in the given chunks, then finished.
    fn decode(framing: StreamFraming, chunks: &[&[u8]]) -> Vec<StreamEvent> {
        let mut decoder = FrameDecoder::new(framing);
        let mut events = Vec::new();
        for chunk in chunks {
            events.extend(decoder.push(chunk).unwrap());
        }
        events.extend(decoder.finish().unwrap());
        events
    }

    /// Splits `body` at the given cut points (taken modulo its length).
    fn split<'a>(body: &'a [u8], cuts: &[usize]) -> Vec<&'a [u8]> {
        let mut cuts: Vec<usize> = cuts.iter().map(|cut| cut % (body.len() + 1)).collect();
        cuts.sort_unstable();
        let mut chunks = Vec::new();
        let mut start = 0;
        for cut in cuts {
            chunks.push(&body[start..cut]);
            start = cut;
        }
        chunks.push(&body[start..]);
        chunks
    }

    /// One SSE line, standard or one of the non-standard forms servers really send.
    fn sse_line() -> impl Strategy<Value = String> {
        let text = "[a-z0-9 :{}\"\\[\\]é\u{FEFF}]{0,12}";
        prop_oneof![
            Just(String::new()),
            Just(String::new()),
            text.prop_map(|value| format!("data: {value}")),
            text.prop_map(|value| format!("data:{value}")),
            Just("data".to_owned()),
            "[a-z_]{0,10}".prop_map(|name| format!("event: {name}")),
            text.prop_map(|value| format!(": {value}")),
            text.prop_map(|value| format!("error: {value}")),
            text.prop_map(|value| format!("{{{value}")),
            Just("id: 7".to_owned()),
            Just("retry: 100".to_owned()),
            text.prop_map(|value| format!("unknown: {value}")),
        ]
    }

    fn sse_body() -> impl Strategy<Value = Vec<u8>> {
        let ending = prop_oneof![Just("\n"), Just("\r\n"), Just("\r")];
        (any::<bool>(), prop::collection::vec((sse_line(), ending), 0..24), any::<bool>()).prop_map(
            |(bom, lines, last_ended)| {
                let mut body = if bom { "\u{FEFF}".to_owned() } else { String::new() };
                let count = lines.len();
                for (index, (line, ending)) in lines.into_iter().enumerate() {
                    body.push_str(&line);
                    if last_ended || index + 1 < count {
                        body.push_str(ending);
                    }
                }
                body.into_bytes()
            },
        )
    }

    fn header_value() -> impl Strategy<Value = Value> {
        prop_oneof![
            any::<bool>().prop_map(Value::Bool),
            any::<i8>().prop_map(Value::Byte),
            any::<i16>().prop_map(Value::Int16),
            any::<i32>().prop_map(Value::Int32),
            any::<i64>().prop_map(Value::Int64),
            prop::collection::vec(any::<u8>(), 0..8).prop_map(Value::Bytes),
            "[a-zA-Z:/ -]{0,16}".prop_map(Value::String),
            any::<i64>().prop_map(Value::Timestamp),
            any::<u128>().prop_map(|uuid| Value::Uuid(uuid.to_be_bytes())),
        ]
    }

    /// One event-stream message: its headers (sometimes an `:event-type`) and payload.
    fn message() -> impl Strategy<Value = (Vec<(String, Value)>, Vec<u8>)> {
        let header = prop_oneof![
            "[a-zA-Z]{1,12}".prop_map(|name| (":event-type".to_owned(), Value::String(name))),
            "[a-zA-Z]{1,12}".prop_map(|name| (":exception-type".to_owned(), Value::String(name))),
            ("[a-z:-]{1,12}", header_value()),
        ];
        (prop::collection::vec(header, 0..5), prop::collection::vec(any::<u8>(), 0..64))
    }

    /// The event a message must decode to, written from the wire rules directly.
    fn expected((headers, payload): &(Vec<(String, Value)>, Vec<u8>)) -> StreamEvent {
        let find = |wanted: &str| {
            headers.iter().find_map(|(name, value)| match value {
                Value::String(text) if name == wanted => Some(text.clone()),
                _ => None,
            })
        };
        StreamEvent {
            name: find(":event-type").or_else(|| find(":exception-type")),
            headers: headers.iter().map(|(name, value)| (name.clone(), rendered(value))).collect(),
            data: payload.clone(),
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        /// Where the body's chunks end never changes what SSE events come out.
        #[test]
        fn sse_events_do_not_depend_on_chunking(
            body in sse_body(),
            cuts in prop::collection::vec(any::<usize>(), 0..12),
        ) {
            let whole = decode(StreamFraming::Sse, &[&body]);
            prop_assert_eq!(&decode(StreamFraming::Sse, &split(&body, &cuts)), &whole);
            let bytes: Vec<&[u8]> = body.chunks(1).collect();
            prop_assert_eq!(&decode(StreamFraming::Sse, &bytes), &whole);
        }

        /// Any split of a sequence of event-stream messages decodes to exactly the
        /// messages encoded, in order.
        #[test]
        fn event_stream_messages_do_not_depend_on_chunking(
            messages in prop::collection::vec(message(), 0..6),
            cuts in prop::collection::vec(any::<usize>(), 0..12),
        ) {
            let body: Vec<u8> = messages.iter().flat_map(|(headers, payload)| frame(headers, payload)).collect();
            let expected: Vec<StreamEvent> = messages.iter().map(expected).collect();
            prop_assert_eq!(&decode(StreamFraming::AwsEventStream, &[&body]), &expected);
            prop_assert_eq!(&decode(StreamFraming::AwsEventStream, &split(&body, &cuts)), &expected);
            let bytes: Vec<&[u8]> = body.chunks(1).collect();
            prop_assert_eq!(&decode(StreamFraming::AwsEventStream, &bytes), &expected);
        }
    }
}
