//! The writer the `weir` binary's log goes through: every control character
//! of a formatted event is written escaped (`\n`, `\r`, `\t`, `\x1b`, …),
//! except the newline that ends the event. Caller-supplied text (a model
//! name, a header, an id) reaches many log fields; escaping each field where
//! it is logged would leave the next field added unescaped, so it is done
//! once, here, on the whole formatted line: a `model` holding `\n` or an ANSI
//! sequence cannot forge a second log line or recolour a terminal, and every
//! line of the log is one event.
//!
//! The formatter must not add colour codes of its own (they would be escaped
//! too): the binary turns ANSI off where it installs this writer. An embedder
//! that installs its own subscriber chooses its own writer; it can wrap it in
//! [`EscapingWriter`] the same way.
//!
//! tracing-subscriber's `fmt` layer formats an event into one buffer and
//! writes it with a single `write_all`, which [`Escaping::write`] takes whole:
//! so each `write` is one event and its last newline is the event's end.

use std::borrow::Cow;
use std::io;

use tracing_subscriber::fmt::MakeWriter;

/// Makes writers that escape control characters (see the module's doc).
#[derive(Debug, Clone)]
pub struct EscapingWriter<M> {
    inner: M,
}

impl<M> EscapingWriter<M> {
    /// Escapes what `inner`'s writers are given (e.g. `std::io::stderr`).
    pub fn new(inner: M) -> Self {
        Self { inner }
    }
}

impl<'a, M: MakeWriter<'a>> MakeWriter<'a> for EscapingWriter<M> {
    type Writer = Escaping<M::Writer>;

    fn make_writer(&'a self) -> Self::Writer {
        Escaping(self.inner.make_writer())
    }

    fn make_writer_for(&'a self, meta: &tracing::Metadata<'_>) -> Self::Writer {
        Escaping(self.inner.make_writer_for(meta))
    }
}

/// One event's writer: escapes, then writes to the inner writer.
#[derive(Debug)]
pub struct Escaping<W>(W);

impl<W: io::Write> io::Write for Escaping<W> {
    fn write(&mut self, event: &[u8]) -> io::Result<usize> {
        self.0.write_all(escaped(event).as_bytes())?;
        Ok(event.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.0.flush()
    }
}

/// `event` with every control character (and the Unicode line and paragraph
/// separators, which some viewers break lines at) escaped, but a single
/// newline at its very end. Bytes that are not UTF-8 (the formatter writes
/// UTF-8) become U+FFFD.
pub fn escaped(event: &[u8]) -> Cow<'_, str> {
    let text = String::from_utf8_lossy(event);
    let (body, ending) = match text.strip_suffix('\n') {
        Some(body) => (body, "\n"),
        None => (&*text, ""),
    };
    if !body.chars().any(needs_escape) {
        return text;
    }
    let mut shown = String::with_capacity(text.len() + 16);
    for c in body.chars() {
        match c {
            '\n' => shown.push_str("\\n"),
            '\r' => shown.push_str("\\r"),
            '\t' => shown.push_str("\\t"),
            c if needs_escape(c) && u32::from(c) <= 0xff => shown.push_str(&format!("\\x{:02x}", u32::from(c))),
            c if needs_escape(c) => shown.push_str(&format!("\\u{{{:x}}}", u32::from(c))),
            c => shown.push(c),
        }
    }
    shown.push_str(ending);
    Cow::Owned(shown)
}

fn needs_escape(c: char) -> bool {
    c.is_control() || c == '\u{2028}' || c == '\u{2029}'
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    #[test]
    fn control_characters_are_escaped_and_the_ending_newline_kept() {
        assert_eq!(escaped(b"plain line\n"), "plain line\n");
        assert!(matches!(escaped(b"plain line\n"), Cow::Borrowed(_)));
        assert_eq!(escaped(b"a\nb\r\tc\x1b[31md\x7f\n"), "a\\nb\\r\\tc\\x1b[31md\\x7f\n");
        assert_eq!(escaped("c1 \u{85} sep \u{2028}\n".as_bytes()), "c1 \\x85 sep \\u{2028}\n");
        assert_eq!(escaped(b"two endings\n\n"), "two endings\\n\n", "only the last newline ends the event");
        assert_eq!(escaped(b"no ending \x07"), "no ending \\x07");
    }

    /// A writer into a shared buffer, for a subscriber in a test.
    #[derive(Clone, Default)]
    struct Buffer(Arc<Mutex<Vec<u8>>>);

    impl io::Write for Buffer {
        fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    impl<'a> MakeWriter<'a> for Buffer {
        type Writer = Buffer;
        fn make_writer(&'a self) -> Buffer {
            self.clone()
        }
    }

    /// Through the formatter the binary uses: a caller's `model` with a
    /// newline and an ANSI sequence, as a Display field and in the message,
    /// leaves one line per event and no control character.
    #[test]
    fn a_forged_line_in_a_field_stays_inside_its_event() {
        let buffer = Buffer::default();
        let subscriber =
            tracing_subscriber::fmt().with_ansi(false).with_writer(EscapingWriter::new(buffer.clone())).finish();
        let model = "gpt\n2026-01-01T00:00:00Z  INFO weir: forged\x1b[31m red";
        tracing::subscriber::with_default(subscriber, || {
            tracing::info!(model = %model, "first {model}");
            tracing::warn!(caller = ?model, "second");
        });
        let log = String::from_utf8(buffer.0.lock().unwrap().clone()).unwrap();
        let lines: Vec<&str> = log.lines().collect();
        assert_eq!(lines.len(), 2, "{log}");
        assert!(lines[0].contains("INFO") && lines[0].contains("first gpt\\n2026") && lines[0].contains("\\x1b[31m"));
        assert!(lines[1].contains("WARN") && lines[1].contains("second"), "{log}");
        assert!(lines.iter().all(|line| !line.contains(char::is_control)), "{log:?}");
    }
}
