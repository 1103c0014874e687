//! The AWS binary event stream (`application/vnd.amazon.eventstream`, Bedrock's
//! `InvokeModelWithResponseStream` and `ConverseStream`): length-prefixed messages
//! with a CRC-checked prelude, typed headers, a payload and a CRC over the whole
//! message (provider-wire.md 3.4). `aws-smithy-eventstream`, the AWS SDK's own
//! implementation, parses a message and checks both CRCs; this module only buffers
//! one message at a time and maps it to a [`StreamEvent`].

use aws_smithy_eventstream::frame::read_message_from;

use super::{FramingError, MAX_EVENT_BYTES};
use crate::types::StreamEvent;

/// A message's first field, its total length in bytes, a big-endian `u32`.
const LENGTH_BYTES: usize = 4;

/// The prelude (total length, headers length, prelude CRC) and the trailing message
/// CRC: the smallest possible message, one with no headers and no payload.
const MIN_MESSAGE_BYTES: usize = 16;

/// Incremental event-stream state: the bytes of the one message being received.
#[derive(Debug, Default)]
pub(super) struct EventStreamDecoder {
    /// Never longer than the message's declared length, which is never above
    /// [`MAX_EVENT_BYTES`].
    message: Vec<u8>,
}

impl EventStreamDecoder {
    pub(super) fn push(&mut self, mut bytes: &[u8]) -> Result<Vec<StreamEvent>, FramingError> {
        let mut events = Vec::new();
        while !bytes.is_empty() {
            // Until the length is known, read only the length; then exactly the rest
            // of this message, so the buffer never holds more than one.
            let wanted = self.declared_length()?.unwrap_or(LENGTH_BYTES);
            let (head, rest) = bytes.split_at((wanted - self.message.len()).min(bytes.len()));
            self.message.extend_from_slice(head);
            bytes = rest;
            if self.declared_length()? == Some(self.message.len()) {
                events.push(decode(&self.message)?);
                self.message.clear();
            }
        }
        Ok(events)
    }

    /// End of body: anything buffered is a message cut off in the middle.
    pub(super) fn finish(&mut self) -> Result<Vec<StreamEvent>, FramingError> {
        if self.message.is_empty() {
            return Ok(Vec::new());
        }
        Err(FramingError::Truncated { left: self.message.len() })
    }

    /// The total length the buffered message declares, once its first four bytes
    /// are in; checked against the limit before any more of it is buffered.
    fn declared_length(&self) -> Result<Option<usize>, FramingError> {
        let Some(length) = self.message.first_chunk::<LENGTH_BYTES>() else {
            return Ok(None);
        };
        let length = u32::from_be_bytes(*length) as usize;
        if length > MAX_EVENT_BYTES {
            return Err(FramingError::TooLarge { size: length, limit: MAX_EVENT_BYTES });
        }
        if length < MIN_MESSAGE_BYTES {
            return Err(FramingError::InvalidLength(length));
        }
        Ok(Some(length))
    }
}

/// Parses and CRC-checks one complete message and maps it to an event: every header
/// as (name, value as text), the name from the first string `:event-type` (a normal
/// frame) or else `:exception-type` (an error after the 200), the payload as data.
fn decode(message: &[u8]) -> Result<StreamEvent, FramingError> {
    let message = read_message_from(message).map_err(FramingError::InvalidMessage)?;
    let mut headers = Vec::with_capacity(message.headers().len());
    for header in message.headers() {
        // Values as text: strings as they are, booleans and integers in decimal,
        // timestamps as epoch milliseconds (their wire form), byte arrays in lowercase
        // hex, UUIDs hyphenated. The crate does not re-export its value enum, so its
        // accessors are tried in turn; a type added later falls back to its Debug form.
        let value = header.value();
        let text = if let Ok(text) = value.as_string() {
            text.as_str().to_owned()
        } else if let Ok(flag) = value.as_bool() {
            flag.to_string()
        } else if let Ok(number) = value.as_byte() {
            number.to_string()
        } else if let Ok(number) = value.as_int16() {
            number.to_string()
        } else if let Ok(number) = value.as_int32() {
            number.to_string()
        } else if let Ok(number) = value.as_int64() {
            number.to_string()
        } else if let Ok(bytes) = value.as_byte_array() {
            hex::encode(bytes)
        } else if let Ok(Ok(millis)) = value.as_timestamp().map(|time| time.to_millis()) {
            millis.to_string()
        } else if let Ok(uuid) = value.as_uuid() {
            format!(
                "{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
                uuid >> 96,
                (uuid >> 80) & 0xffff,
                (uuid >> 64) & 0xffff,
                (uuid >> 48) & 0xffff,
                uuid & 0xffff_ffff_ffff
            )
        } else {
            format!("{value:?}")
        };
        headers.push((header.name().as_str().to_owned(), text));
    }
    let header = |wanted: &str| {
        message
            .headers()
            .iter()
            .filter(|header| header.name().as_str() == wanted)
            .find_map(|header| header.value().as_string().ok())
    };
    let name = header(":event-type").or_else(|| header(":exception-type")).map(|name| name.as_str().to_owned());
    Ok(StreamEvent { name, headers, data: message.payload().to_vec() })
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// Frames are written by the fake Bedrock's hand-made writer (independent of
    /// the crate under test); a header value of each wire type is a `Value`.
    pub(in super::super) use weir_tests::bedrock_wire::FrameHeaderValue as Value;
    use weir_tests::bedrock_wire::frame_typed;

    /// The text the decoder must render a header value as.
    pub(in super::super) fn rendered(value: &Value) -> String {
        match value {
            Value::Bool(flag) => flag.to_string(),
            Value::Byte(number) => number.to_string(),
            Value::Int16(number) => number.to_string(),
            Value::Int32(number) => number.to_string(),
            Value::Int64(number) | Value::Timestamp(number) => number.to_string(),
            Value::Bytes(bytes) => bytes.iter().map(|byte| format!("{byte:02x}")).collect(),
            Value::String(text) => text.clone(),
            Value::Uuid(uuid) => {
                let hex: String = uuid.iter().map(|byte| format!("{byte:02x}")).collect();
                format!("{}-{}-{}-{}-{}", &hex[..8], &hex[8..12], &hex[12..16], &hex[16..20], &hex[20..])
            }
        }
    }

    /// One complete message with these headers and payload.
    pub(in super::super) fn frame(headers: &[(String, Value)], payload: &[u8]) -> Vec<u8> {
        let headers: Vec<(&str, Value)> = headers.iter().map(|(name, value)| (name.as_str(), value.clone())).collect();
        frame_typed(&headers, payload).to_vec()
    }

    /// One message with string headers only.
    fn string_frame(headers: &[(&str, &str)], payload: &[u8]) -> Vec<u8> {
        weir_tests::bedrock_wire::frame(headers, payload).to_vec()
    }

    /// A Bedrock `InvokeModelWithResponseStream` frame carrying one Anthropic event.
    fn bedrock_chunk() -> Vec<u8> {
        string_frame(
            &[(":event-type", "chunk"), (":content-type", "application/json"), (":message-type", "event")],
            br#"{"bytes":"eyJ0eXBlIjoibWVzc2FnZV9zdG9wIn0=","p":"abcdefghij"}"#,
        )
    }

    fn throttling() -> Vec<u8> {
        string_frame(
            &[
                (":exception-type", "throttlingException"),
                (":content-type", "application/json"),
                (":message-type", "exception"),
            ],
            br#"{"message":"Too many requests, please wait before trying again."}"#,
        )
    }

    fn decoder() -> EventStreamDecoder {
        EventStreamDecoder::default()
    }

    #[test]
    fn a_bedrock_chunk_is_an_event_named_by_its_event_type() {
        let events = decoder().push(&bedrock_chunk()).unwrap();
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].name.as_deref(), Some("chunk"));
        assert_eq!(
            events[0].headers,
            [
                (":event-type".to_owned(), "chunk".to_owned()),
                (":content-type".to_owned(), "application/json".to_owned()),
                (":message-type".to_owned(), "event".to_owned()),
            ]
        );
        assert_eq!(events[0].data, br#"{"bytes":"eyJ0eXBlIjoibWVzc2FnZV9zdG9wIn0=","p":"abcdefghij"}"#);
    }

    #[test]
    fn an_exception_is_an_event_named_by_its_exception_type() {
        let mut decoder = decoder();
        let events = decoder.push(&throttling()).unwrap();
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].name.as_deref(), Some("throttlingException"));
        assert!(events[0].headers.contains(&(":message-type".to_owned(), "exception".to_owned())));
        assert_eq!(events[0].data, br#"{"message":"Too many requests, please wait before trying again."}"#);
        assert!(decoder.finish().unwrap().is_empty());
    }

    #[test]
    fn an_error_frame_has_no_name_but_keeps_its_headers() {
        let body = string_frame(
            &[(":message-type", "error"), (":error-code", "InternalFailure"), (":error-message", "x")],
            b"",
        );
        let events = decoder().push(&body).unwrap();
        assert_eq!(events[0].name, None);
        assert_eq!(events[0].headers[1], (":error-code".to_owned(), "InternalFailure".to_owned()));
        assert!(events[0].data.is_empty());
    }

    #[test]
    fn messages_split_into_single_bytes_decode_in_order() {
        let body = [bedrock_chunk(), throttling(), bedrock_chunk()].concat();
        let mut decoder = decoder();
        let mut names = Vec::new();
        for byte in body.chunks(1) {
            names.extend(decoder.push(byte).unwrap().into_iter().map(|event| event.name));
        }
        assert!(decoder.finish().unwrap().is_empty());
        assert_eq!(names, [Some("chunk".to_owned()), Some("throttlingException".to_owned()), Some("chunk".to_owned())]);
    }

    #[test]
    fn every_header_type_is_rendered_as_text() {
        let values = [
            Value::Bool(true),
            Value::Bool(false),
            Value::Byte(-7),
            Value::Int16(-300),
            Value::Int32(70_000),
            Value::Int64(-5_000_000_000),
            Value::Bytes(vec![0x00, 0xab, 0xff]),
            Value::String("text".to_owned()),
            Value::Timestamp(1_700_000_000_123),
            Value::Uuid(0x0123_4567_89ab_cdef_0123_4567_89ab_cdef_u128.to_be_bytes()),
        ];
        let headers: Vec<(String, Value)> =
            values.iter().enumerate().map(|(index, value)| (format!("h{index}"), value.clone())).collect();
        let events = decoder().push(&frame(&headers, b"{}")).unwrap();
        let rendered: Vec<&str> = events[0].headers.iter().map(|(_, value)| value.as_str()).collect();
        assert_eq!(
            rendered,
            [
                "true",
                "false",
                "-7",
                "-300",
                "70000",
                "-5000000000",
                "00abff",
                "text",
                "1700000000123",
                "01234567-89ab-cdef-0123-456789abcdef",
            ]
        );
        assert_eq!(events[0].name, None);
    }

    #[test]
    fn a_corrupted_payload_byte_fails_the_message_crc() {
        let mut body = bedrock_chunk();
        let last_payload_byte = body.len() - 5;
        body[last_payload_byte] ^= 0x01;
        let error = decoder().push(&body).unwrap_err();
        assert!(matches!(error, FramingError::InvalidMessage(_)), "{error:?}");
        assert!(error.to_string().contains("message checksum"), "{error}");
    }

    #[test]
    fn a_corrupted_prelude_fails_the_prelude_crc() {
        let mut body = throttling();
        body[7] ^= 0x01;
        let error = decoder().push(&body).unwrap_err();
        assert!(matches!(error, FramingError::InvalidMessage(_)), "{error:?}");
        assert!(error.to_string().contains("prelude checksum"), "{error}");
    }

    #[test]
    fn a_body_cut_inside_a_message_fails_at_finish() {
        let body = [bedrock_chunk(), throttling()].concat();
        let cut = body.len() - 3;
        let mut decoder = decoder();
        assert_eq!(decoder.push(&body[..cut]).unwrap().len(), 1);
        let error = decoder.finish().unwrap_err();
        assert!(matches!(error, FramingError::Truncated { left } if left == throttling().len() - 3), "{error:?}");
    }

    #[test]
    fn a_body_cut_inside_a_prelude_fails_at_finish() {
        let mut decoder = decoder();
        assert!(decoder.push(&bedrock_chunk()[..2]).unwrap().is_empty());
        assert!(matches!(decoder.finish(), Err(FramingError::Truncated { left: 2 })));
    }

    #[test]
    fn an_oversized_message_fails_before_it_is_buffered() {
        let length = u32::try_from(MAX_EVENT_BYTES + 1).unwrap();
        let mut decoder = decoder();
        let error = decoder.push(&length.to_be_bytes()).unwrap_err();
        assert!(matches!(error, FramingError::TooLarge { size, .. } if size == MAX_EVENT_BYTES + 1), "{error:?}");
        assert!(decoder.push(&[0; 1024]).is_err());
        assert_eq!(decoder.message.len(), LENGTH_BYTES);
    }

    #[test]
    fn a_length_below_the_minimum_is_rejected() {
        let error = decoder().push(&8_u32.to_be_bytes()).unwrap_err();
        assert!(matches!(error, FramingError::InvalidLength(8)), "{error:?}");
    }
}
