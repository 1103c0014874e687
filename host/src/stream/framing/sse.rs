//! Server-sent events, parsed by hand: the WHATWG rules, plus the two non-standard
//! lines OpenAI-compatible servers use to report an error after a 200, which a
//! standard parser silently drops (provider-wire.md 4.5):
//!
//! - llama.cpp writes `error: {json}`, a field named `error`: it becomes an event
//!   named `error` with that data;
//! - Ollama writes the error JSON as a bare line with no field: a line starting with
//!   `{` becomes an unnamed event whose data is the whole line.
//!
//! Both are dispatched as soon as their line ends, after any event still pending.

use super::{FramingError, MAX_EVENT_BYTES};
use crate::types::StreamEvent;

/// The UTF-8 byte order mark, dropped at the very start of a stream.
const BOM: &[u8] = b"\xEF\xBB\xBF";

/// Incremental SSE state: the unfinished line and the event being assembled.
#[derive(Debug)]
pub(super) struct SseDecoder {
    /// Bytes of a line whose end has not arrived yet.
    line: Vec<u8>,
    /// The last byte seen was a CR, so an LF starting the next chunk belongs to the
    /// same line ending (CRLF split across chunks).
    after_cr: bool,
    /// No line has been completed yet: a BOM at its start is dropped.
    at_start: bool,
    /// The last non-empty `event:` value of the pending event.
    name: Option<String>,
    /// The pending event's `data:` lines joined with `\n`; `None` until one arrives,
    /// so that an empty `data:` line still counts as data.
    data: Option<Vec<u8>>,
}

impl Default for SseDecoder {
    fn default() -> Self {
        Self { line: Vec::new(), after_cr: false, at_start: true, name: None, data: None }
    }
}

impl SseDecoder {
    pub(super) fn push(&mut self, mut bytes: &[u8]) -> Result<Vec<StreamEvent>, FramingError> {
        let mut events = Vec::new();
        if self.after_cr && !bytes.is_empty() {
            self.after_cr = false;
            if let Some(rest) = bytes.strip_prefix(b"\n") {
                bytes = rest;
            }
        }
        while let Some(end) = bytes.iter().position(|&byte| byte == b'\n' || byte == b'\r') {
            let (line, rest) = bytes.split_at(end);
            if self.line.is_empty() {
                self.take_line(line, &mut events)?;
            } else {
                self.check_size(line.len())?;
                let mut pending = std::mem::take(&mut self.line);
                pending.extend_from_slice(line);
                self.take_line(&pending, &mut events)?;
                pending.clear();
                self.line = pending;
            }
            bytes = match rest {
                [b'\r', b'\n', rest @ ..] => rest,
                [b'\r'] => {
                    self.after_cr = true;
                    &[]
                }
                [_, rest @ ..] => rest,
                [] => &[],
            };
        }
        self.check_size(bytes.len())?;
        self.line.extend_from_slice(bytes);
        Ok(events)
    }

    /// End of body: an unterminated last line counts as a line, and a pending event
    /// is dispatched even without the blank line that should have followed it.
    pub(super) fn finish(&mut self) -> Result<Vec<StreamEvent>, FramingError> {
        let mut events = Vec::new();
        let line = std::mem::take(&mut self.line);
        if !line.is_empty() {
            self.take_line(&line, &mut events)?;
        }
        self.dispatch(&mut events);
        Ok(events)
    }

    /// Fails if buffering `incoming` more bytes would take this event over the limit.
    /// Checked before buffering, so a rejected stream never grows.
    fn check_size(&self, incoming: usize) -> Result<(), FramingError> {
        let data = self.data.as_ref().map_or(0, Vec::len);
        let size = self.line.len() + data + incoming;
        if size > MAX_EVENT_BYTES {
            return Err(FramingError::TooLarge { size, limit: MAX_EVENT_BYTES });
        }
        Ok(())
    }

    /// Handles one complete line, given without its ending.
    fn take_line(&mut self, mut line: &[u8], events: &mut Vec<StreamEvent>) -> Result<(), FramingError> {
        if self.at_start {
            self.at_start = false;
            if let Some(rest) = line.strip_prefix(BOM) {
                line = rest;
            }
        }
        if line.is_empty() {
            self.dispatch(events);
            return Ok(());
        }
        if line.starts_with(b":") {
            return Ok(());
        }
        if line.starts_with(b"{") {
            self.dispatch(events);
            events.push(StreamEvent { name: None, headers: Vec::new(), data: line.to_vec() });
            return Ok(());
        }
        let (field, value) = match line.iter().position(|&byte| byte == b':') {
            Some(colon) => {
                let value = &line[colon + 1..];
                (&line[..colon], value.strip_prefix(b" ").unwrap_or(value))
            }
            None => (line, &[][..]),
        };
        match field {
            b"data" => {
                self.check_size(value.len() + 1)?;
                match &mut self.data {
                    Some(data) => {
                        data.push(b'\n');
                        data.extend_from_slice(value);
                    }
                    None => self.data = Some(value.to_vec()),
                }
            }
            b"event" => self.name = (!value.is_empty()).then(|| String::from_utf8_lossy(value).into_owned()),
            b"error" => {
                self.dispatch(events);
                events.push(StreamEvent { name: Some("error".to_owned()), headers: Vec::new(), data: value.to_vec() });
            }
            // `id` and `retry` steer a browser's reconnection, which a gateway never
            // does; unknown fields are ignored, as the spec says.
            _ => {}
        }
        Ok(())
    }

    /// Emits the pending event, unless it has neither data nor a name, and starts
    /// a new one.
    fn dispatch(&mut self, events: &mut Vec<StreamEvent>) {
        let name = self.name.take();
        let data = self.data.take();
        if name.is_none() && data.is_none() {
            return;
        }
        events.push(StreamEvent { name, headers: Vec::new(), data: data.unwrap_or_default() });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pushes each chunk in turn, then finishes.
    fn decode(chunks: &[&[u8]]) -> Vec<StreamEvent> {
        let mut decoder = SseDecoder::default();
        let mut events = Vec::new();
        for chunk in chunks {
            events.extend(decoder.push(chunk).unwrap());
        }
        events.extend(decoder.finish().unwrap());
        events
    }

    fn event(name: Option<&str>, data: &str) -> StreamEvent {
        StreamEvent { name: name.map(str::to_owned), headers: Vec::new(), data: data.as_bytes().to_vec() }
    }

    #[test]
    fn anthropic_named_events() {
        let body = "event: message_start\ndata: {\"type\":\"message_start\"}\n\n\
                    event: ping\ndata: {\"type\":\"ping\"}\n\n\
                    event: content_block_delta\ndata: {\"type\":\"content_block_delta\"}\n\n";
        assert_eq!(
            decode(&[body.as_bytes()]),
            [
                event(Some("message_start"), r#"{"type":"message_start"}"#),
                event(Some("ping"), r#"{"type":"ping"}"#),
                event(Some("content_block_delta"), r#"{"type":"content_block_delta"}"#),
            ]
        );
    }

    #[test]
    fn openai_data_lines_and_done() {
        let body = b"data: {\"choices\":[]}\n\ndata: [DONE]\n\n";
        assert_eq!(decode(&[body]), [event(None, r#"{"choices":[]}"#), event(None, "[DONE]")]);
    }

    #[test]
    fn data_lines_are_joined_with_newlines() {
        let body = b"data: first\ndata:second\ndata\ndata:  indented\n\n";
        assert_eq!(decode(&[body]), [event(None, "first\nsecond\n\n indented")]);
    }

    #[test]
    fn lf_crlf_and_cr_line_endings_frame_alike() {
        let lf = "event: a\ndata: 1\ndata: 2\n\ndata: 3\n\n";
        let expected = [event(Some("a"), "1\n2"), event(None, "3")];
        assert_eq!(decode(&[lf.as_bytes()]), expected);
        assert_eq!(decode(&[lf.replace('\n', "\r\n").as_bytes()]), expected);
        assert_eq!(decode(&[lf.replace('\n', "\r").as_bytes()]), expected);
    }

    #[test]
    fn a_crlf_split_across_chunks_is_one_line_ending() {
        let events = decode(&[b"data: a\r", b"\ndata: b\r", b"\n\r", b"\n"]);
        assert_eq!(events, [event(None, "a\nb")]);
    }

    #[test]
    fn a_cr_at_a_chunk_end_followed_by_another_line_ends_its_line() {
        assert_eq!(decode(&[b"data: a\r", b"\r"]), [event(None, "a")]);
        assert_eq!(decode(&[b"data: a\r", b"", b"data: b\r\r"]), [event(None, "a\nb")]);
    }

    #[test]
    fn comments_id_retry_and_unknown_fields_are_ignored() {
        let body = b": keep-alive\n\nid: 7\nretry: 100\n: inside\nwhatever: x\ndata: kept\n\n";
        assert_eq!(decode(&[body]), [event(None, "kept")]);
    }

    #[test]
    fn a_leading_bom_is_dropped_even_split_but_not_later() {
        let body = "\u{FEFF}data: x\n\n\u{FEFF}data: y\n\n";
        let expected = [event(None, "x")];
        assert_eq!(decode(&[body.as_bytes()]), expected);
        let bytes: Vec<&[u8]> = body.as_bytes().chunks(1).collect();
        assert_eq!(decode(&bytes), expected);
    }

    #[test]
    fn the_last_event_name_wins_and_an_empty_one_clears_it() {
        assert_eq!(decode(&[b"event: a\nevent: b\ndata: 1\n\n"]), [event(Some("b"), "1")]);
        assert_eq!(decode(&[b"event: a\nevent:\ndata: 1\n\n"]), [event(None, "1")]);
    }

    #[test]
    fn a_name_without_data_is_dispatched_but_an_empty_event_is_not() {
        assert_eq!(decode(&[b"event: ping\n\n\n\n"]), [event(Some("ping"), "")]);
    }

    #[test]
    fn a_llama_cpp_error_field_becomes_an_error_event() {
        let body = b"data: {\"choices\":[]}\n\n\
                     error: {\"code\":400,\"type\":\"exceed_context_size_error\"}\n\n\
                     data: [DONE]\n\n";
        assert_eq!(
            decode(&[body]),
            [
                event(None, r#"{"choices":[]}"#),
                event(Some("error"), r#"{"code":400,"type":"exceed_context_size_error"}"#),
                event(None, "[DONE]"),
            ]
        );
    }

    #[test]
    fn an_ollama_bare_json_line_becomes_an_event_at_once() {
        let error = r#"{"error":{"message":"model not found","type":"api_error"}}"#;
        let body = format!("data: {{\"choices\":[]}}\n\n{error}\n");
        let mut decoder = SseDecoder::default();
        assert_eq!(decoder.push(body.as_bytes()).unwrap(), [event(None, r#"{"choices":[]}"#), event(None, error)]);
        assert!(decoder.finish().unwrap().is_empty());
        // Without a final line ending, the end of the body ends the line.
        assert_eq!(decode(&[error.as_bytes()]), [event(None, error)]);
    }

    #[test]
    fn a_non_standard_line_first_dispatches_the_pending_event() {
        let body = b"data: partial\n{\"error\":\"x\"}\nerror: y\n";
        assert_eq!(
            decode(&[body]),
            [event(None, "partial"), event(None, r#"{"error":"x"}"#), event(Some("error"), "y")]
        );
    }

    #[test]
    fn finish_dispatches_an_event_without_a_trailing_blank_line() {
        let mut decoder = SseDecoder::default();
        assert!(decoder.push(b"event: message_stop\ndata: {\"type\":\"message_stop\"}").unwrap().is_empty());
        assert_eq!(decoder.finish().unwrap(), [event(Some("message_stop"), r#"{"type":"message_stop"}"#)]);
        assert_eq!(decode(&[b"data: x\n"]), [event(None, "x")]);
    }

    #[test]
    fn an_oversized_line_fails_without_growing() {
        let mut decoder = SseDecoder::default();
        assert!(decoder.push(b"data: ").unwrap().is_empty());
        let error = decoder.push(&vec![b'a'; MAX_EVENT_BYTES]).unwrap_err();
        assert!(matches!(error, FramingError::TooLarge { limit: MAX_EVENT_BYTES, .. }), "{error:?}");
        assert_eq!(decoder.line.len(), b"data: ".len());
    }

    #[test]
    fn an_oversized_event_of_many_lines_fails() {
        let line = format!("data: {}\n", "a".repeat(1024 * 1024));
        let mut decoder = SseDecoder::default();
        let mut outcome = Ok(Vec::new());
        for _ in 0..17 {
            outcome = decoder.push(line.as_bytes());
            if outcome.is_err() {
                break;
            }
        }
        assert!(matches!(outcome, Err(FramingError::TooLarge { .. })), "{outcome:?}");
    }
}
