//! Server-sent events framed as the host frames them (`host/src/stream/framing/sse.rs`),
//! for the native adapter, which has no host to frame a stream: the WHATWG rules
//! (fields accumulate into one event, a blank line dispatches it, `:` lines are
//! comments, one space after the colon is dropped, `data:` lines join with `\n`,
//! `id` and `retry` and unknown fields are ignored, a leading byte order mark is
//! dropped), plus the two error lines OpenAI-compatible servers send after a 200:
//! llama.cpp's `error: {json}` becomes an event named `error`, and Ollama's bare
//! `{json}` line an unnamed event of that line; each is dispatched at once, after
//! any event still pending. At the end of the body a pending event is dispatched
//! without its blank line. `weir check` frames with the host's own decoder; a host
//! test holds the two to the same events.

use crate::fixture::StreamEvent;

const BOM: &[u8] = b"\xEF\xBB\xBF";

/// The events of a whole `text/event-stream` body.
pub fn frame(body: &[u8]) -> Vec<StreamEvent> {
    let body = body.strip_prefix(BOM).unwrap_or(body);
    let mut pending = Pending::default();
    let mut events = Vec::new();
    for line in lines(body) {
        pending.line(line, &mut events);
    }
    pending.dispatch(&mut events);
    events
}

/// The lines of `body`, each without its ending (`\r\n`, `\r` or `\n`); an
/// unterminated last line counts, an empty one after the last ending does not.
fn lines(body: &[u8]) -> Vec<&[u8]> {
    let mut lines = Vec::new();
    let mut rest = body;
    while let Some(end) = rest.iter().position(|&byte| byte == b'\n' || byte == b'\r') {
        lines.push(&rest[..end]);
        rest = match &rest[end..] {
            [b'\r', b'\n', after @ ..] | [_, after @ ..] => after,
            [] => &[],
        };
    }
    if !rest.is_empty() {
        lines.push(rest);
    }
    lines
}

/// The event being assembled.
#[derive(Default)]
struct Pending {
    /// The last non-empty `event:` value.
    name: Option<String>,
    /// The `data:` lines so far; `None` until one arrives.
    data: Option<Vec<u8>>,
}

impl Pending {
    fn line(&mut self, line: &[u8], events: &mut Vec<StreamEvent>) {
        if line.is_empty() {
            self.dispatch(events);
            return;
        }
        if line.starts_with(b":") {
            return;
        }
        if line.starts_with(b"{") {
            self.dispatch(events);
            events.push(StreamEvent { name: None, headers: Vec::new(), data: line.to_vec() });
            return;
        }
        let (field, value) = match line.iter().position(|&byte| byte == b':') {
            Some(colon) => {
                let value = &line[colon + 1..];
                (&line[..colon], value.strip_prefix(b" ").unwrap_or(value))
            }
            None => (line, &[][..]),
        };
        match field {
            b"data" => match &mut self.data {
                Some(data) => {
                    data.push(b'\n');
                    data.extend_from_slice(value);
                }
                None => self.data = Some(value.to_vec()),
            },
            b"event" => self.name = (!value.is_empty()).then(|| String::from_utf8_lossy(value).into_owned()),
            b"error" => {
                self.dispatch(events);
                events.push(StreamEvent { name: Some("error".to_owned()), headers: Vec::new(), data: value.to_vec() });
            }
            _ => {}
        }
    }

    /// Emits the pending event, unless it has neither data nor a name.
    fn dispatch(&mut self, events: &mut Vec<StreamEvent>) {
        let (name, data) = (self.name.take(), self.data.take());
        if name.is_some() || data.is_some() {
            events.push(StreamEvent { name, headers: Vec::new(), data: data.unwrap_or_default() });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(name: Option<&str>, data: &str) -> StreamEvent {
        StreamEvent { name: name.map(str::to_owned), headers: Vec::new(), data: data.as_bytes().to_vec() }
    }

    #[test]
    fn fields_comments_and_line_endings() {
        let body = b"\xEF\xBB\xBF: keep-alive\r\nevent: message_start\r\ndata: {\"a\":\r\ndata:1}\r\nid: 7\r\n\r\ndata: [DONE]";
        assert_eq!(frame(body), vec![event(Some("message_start"), "{\"a\":\n1}"), event(None, "[DONE]")]);
    }

    #[test]
    fn the_error_lines_of_compatible_servers_are_events() {
        let body = b"data: {\"x\":1}\nerror: {\"code\":400}\n{\"error\":{\"message\":\"m\"}}\n\n";
        assert_eq!(
            frame(body),
            vec![
                event(None, "{\"x\":1}"),
                event(Some("error"), "{\"code\":400}"),
                event(None, "{\"error\":{\"message\":\"m\"}}")
            ]
        );
    }

    #[test]
    fn an_event_without_data_or_name_is_not_dispatched() {
        assert_eq!(frame(b"\n\nid: 1\n\nevent: ping\n\n"), vec![event(Some("ping"), "")]);
    }
}
