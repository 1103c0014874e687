//! Provider-agnostic repair of a normalized delta stream.
//!
//! Two wire shapes from otherwise healthy OpenAI-compatible servers degrade a
//! delta-only consumer, so [`StreamRepair`] sits between a provider component's
//! stream decoder and the caller and fixes them from what the stream contains,
//! never from a model name:
//!
//! * **Cumulative snapshots.** Some servers resend the whole accumulated text (or
//!   reasoning) in every chunk. Appended, the answer visibly restarts and replays;
//!   only the unseen tail is forwarded instead.
//! * **Tool calls rendered as markup.** Without a server-side tool parser the
//!   model's `<tool_call>…</tool_call>` (Hermes JSON) or `<function=…>` (Qwen3-Coder
//!   XML) markup arrives as text, and the tool never runs. Completed blocks are
//!   withheld from the text and re-emitted as tool-call deltas.
//!
//! Both stages are conservative: an unclosed block is released as text (truncated
//! arguments must never reach a tool) once it has held [`MAX_HELD_MARKUP_BYTES`]
//! or the stream ends, and a stream that carries real tool calls is never
//! second-guessed. Markup is read incrementally: a delta costs the bytes it
//! brings, never a rescan of what is held.

use std::collections::VecDeque;

use serde_json::{Map, Value};

use crate::types::{StopInfo, StopReason, StreamDelta, ToolCallFragment, ToolCallStart};

/// A repeated fragment proves snapshot mode only once the accumulation it repeats
/// holds this many characters; shorter repeats ("ha", "ha") are ordinary language.
const SNAPSHOT_EVIDENCE_CHARS: usize = 24;

const TOOL_CALL_OPEN: &str = "<tool_call>";
const TOOL_CALL_CLOSE: &str = "</tool_call>";
const FUNCTION_OPEN: &str = "<function=";
const FUNCTION_CLOSE: &str = "</function>";
const PARAMETER_OPEN: &str = "<parameter=";
const PARAMETER_CLOSE: &str = "</parameter>";

/// The tags that can start a block of tool-call markup.
const OPENERS: [&str; 2] = [TOOL_CALL_OPEN, FUNCTION_OPEN];

/// Repairs one response stream: push every decoded delta in order, forward what
/// each call returns, and call [`StreamRepair::finish`] once when the stream ends
/// so that withheld text is released.
#[derive(Debug, Default)]
pub struct StreamRepair {
    cumulative: Cumulative,
    markup: Markup,
}

impl StreamRepair {
    pub fn new() -> Self {
        Self::default()
    }

    /// Takes one delta from the decoder; returns the deltas to forward now.
    pub fn push(&mut self, delta: StreamDelta) -> Vec<StreamDelta> {
        let mut out = Vec::new();
        for delta in self.cumulative.push(delta) {
            self.markup.push(delta, &mut out);
        }
        out
    }

    /// Ends the stream: releases everything still withheld, as text.
    pub fn finish(&mut self) -> Vec<StreamDelta> {
        let mut out = Vec::new();
        for delta in self.cumulative.finish() {
            self.markup.push(delta, &mut out);
        }
        self.markup.finish(&mut out);
        out
    }
}

// ------------------------------------------------------------ cumulative snapshots

/// The snapshot stage: one [`Field`] per accumulating delta kind. Any delta of
/// another kind releases what a field holds first, so the stage keeps input order.
#[derive(Debug, Default)]
struct Cumulative {
    text: Field,
    thinking: Field,
}

impl Cumulative {
    fn push(&mut self, delta: StreamDelta) -> Vec<StreamDelta> {
        let mut out = Vec::new();
        match delta {
            StreamDelta::Text(fragment) => {
                push_nonempty(&mut out, StreamDelta::Thinking, self.thinking.release());
                push_nonempty(&mut out, StreamDelta::Text, self.text.accept(&fragment));
            }
            StreamDelta::Thinking(fragment) => {
                push_nonempty(&mut out, StreamDelta::Text, self.text.release());
                push_nonempty(&mut out, StreamDelta::Thinking, self.thinking.accept(&fragment));
            }
            other => {
                out.extend(self.finish());
                out.push(other);
            }
        }
        out
    }

    fn finish(&mut self) -> Vec<StreamDelta> {
        let mut out = Vec::new();
        push_nonempty(&mut out, StreamDelta::Thinking, self.thinking.release());
        push_nonempty(&mut out, StreamDelta::Text, self.text.release());
        out
    }
}

fn push_nonempty(out: &mut Vec<StreamDelta>, kind: fn(String) -> StreamDelta, text: String) {
    if !text.is_empty() {
        out.push(kind(text));
    }
}

/// One accumulating field (text or reasoning).
///
/// The rule has no latch: every fragment is judged against the accumulation. A
/// fragment that starts with an accumulation of at least
/// [`SNAPSHOT_EVIDENCE_CHARS`] characters is a snapshot and only its unseen tail
/// is forwarded (an exact repeat forwards nothing). A snapshot stream stays
/// consistent with what was forwarded, so it keeps being recognized without a
/// mode flag; a fragment that does not extend the accumulation is appended,
/// because repeating text is recoverable for a reader and dropping it is not.
///
/// Below the threshold a snapshot server's first chunks ("The", "The quick", …)
/// would be appended and the forwarded text would never again be a prefix of a
/// snapshot. So a fragment that extends a short accumulation is *held* instead:
/// while each new fragment extends the previous one the stream could be either
/// shape. The first fragment that extends a held one of at least the threshold
/// proves snapshots (only the unseen tail goes out); anything else (a fragment
/// that does not extend it, another kind of delta, the end of the stream)
/// releases the held fragments as ordinary deltas, in order.
#[derive(Debug, Default)]
struct Field {
    /// Everything forwarded for this field so far.
    forwarded: String,
    /// Fragments that each extend the previous one (the first extends
    /// `forwarded`), not yet known to be snapshots or deltas.
    held: Vec<String>,
}

impl Field {
    /// Takes one fragment; returns the text to forward now.
    fn accept(&mut self, fragment: &str) -> String {
        let mut out = String::new();
        if self.held.last().is_some_and(|last| !fragment.starts_with(last.as_str())) {
            out = self.release();
        }
        let claimed = self.held.last().unwrap_or(&self.forwarded);
        let extends = !claimed.is_empty() && fragment.starts_with(claimed.as_str());
        let proven = extends && is_evidence(claimed);
        if proven {
            // `fragment` starts with `claimed`, which starts with `forwarded`.
            out.push_str(fragment.strip_prefix(self.forwarded.as_str()).unwrap_or_default());
            self.forwarded = fragment.to_string();
            self.held.clear();
        } else if extends {
            self.held.push(fragment.to_string());
        } else {
            self.forwarded.push_str(fragment);
            out.push_str(fragment);
        }
        out
    }

    /// Releases the held fragments as ordinary deltas.
    fn release(&mut self) -> String {
        let out: String = self.held.drain(..).collect();
        self.forwarded.push_str(&out);
        out
    }
}

/// Whether an accumulation is long enough that repeating it proves snapshots.
fn is_evidence(accumulated: &str) -> bool {
    accumulated.chars().nth(SNAPSHOT_EVIDENCE_CHARS - 1).is_some()
}

// ------------------------------------------------------------------ markup calls

/// A block of markup that has not closed within this many bytes is released as
/// text (its opening tag is text; scanning resumes after it). This is all the
/// stage ever holds back: a model that opens `<tool_call>` and never closes it
/// costs at most this much delay and memory, however long it talks.
pub const MAX_HELD_MARKUP_BYTES: usize = 64 << 10;

/// The markup stage. Text that might start a block is held; deltas of other kinds
/// that arrive meanwhile are parked at their position in the held text, so the
/// caller sees them in input order once the text around them is resolved.
///
/// Scanning is incremental: the block being read keeps its parser
/// ([`BlockParser`]) between deltas, so each delta costs the bytes it brings,
/// never a rescan of what is held.
#[derive(Debug, Default)]
struct Markup {
    /// Text not yet known to be plain text or markup; starts at a possible block.
    held: String,
    /// The parser of the block `held` starts with, once one has started.
    block: Option<BlockParser>,
    /// Non-text deltas that arrived after `held[..offset]`, in arrival order.
    parked: VecDeque<(usize, StreamDelta)>,
    /// How many calls were recovered from markup; also the next call's index.
    recovered: u32,
    /// Set by the first real tool-call delta: recovery is off from then on.
    real_calls: bool,
}

impl Markup {
    fn push(&mut self, delta: StreamDelta, out: &mut Vec<StreamDelta>) {
        match delta {
            StreamDelta::Text(text) if !self.real_calls => {
                self.held.push_str(&text);
                self.scan(out);
            }
            StreamDelta::ToolCallStart(_) | StreamDelta::ToolCallFragment(_) | StreamDelta::ToolCallEnd(_) => {
                self.stop_recovery(out);
                out.push(self.reindex(delta));
            }
            other if self.held.is_empty() => out.push(self.outgoing(other)),
            other => self.parked.push_back((self.held.len(), other)),
        }
    }

    fn finish(&mut self, out: &mut Vec<StreamDelta>) {
        self.release_all(out);
    }

    /// Resolves as much of the held text as it can: plain text goes out, each
    /// completed block becomes a call, and a possible block start stays held.
    fn scan(&mut self, out: &mut Vec<StreamDelta>) {
        // `held[..from]` has gone out during this scan.
        let mut from = 0;
        loop {
            let rest = self.held.get(from..).unwrap_or_default();
            match find_opener(rest) {
                Some(0) => {
                    let window = rest.get(..floor_char_boundary(rest, MAX_HELD_MARKUP_BYTES)).unwrap_or_default();
                    let over_cap = window.len() < rest.len() || rest.len() >= MAX_HELD_MARKUP_BYTES;
                    let block = self.block.get_or_insert_with(|| BlockParser::new(rest));
                    let opener_len = block.opener_len();
                    match block.advance(window) {
                        Parse::Done(call, len) => {
                            self.block = None;
                            self.emit_call(call, from + len, out);
                            from += len;
                        }
                        Parse::Partial if !over_cap => break,
                        // Not markup, or not closed within the cap: the opening
                        // tag is text, and what follows it is scanned afresh.
                        Parse::Partial | Parse::Invalid => {
                            self.block = None;
                            self.emit_text(from, from + opener_len, out);
                            from += opener_len;
                        }
                    }
                }
                Some(start) => {
                    self.emit_text(from, from + start, out);
                    from += start;
                }
                None => {
                    let plain = rest.len() - partial_opener_len(rest);
                    self.emit_text(from, from + plain, out);
                    from += plain;
                    break;
                }
            }
        }
        self.forget(from);
    }

    /// A real tool call means the server parses calls itself: held text is
    /// released as text, in order, and markup is text from now on.
    fn stop_recovery(&mut self, out: &mut Vec<StreamDelta>) {
        if !self.real_calls {
            self.real_calls = true;
            self.release_all(out);
        }
    }

    /// Everything held goes out as text, with the parked deltas in place.
    fn release_all(&mut self, out: &mut Vec<StreamDelta>) {
        self.block = None;
        self.emit_text(0, self.held.len(), out);
        self.forget(self.held.len());
    }

    /// Real calls follow recovered ones, so their indexes move past them: a caller
    /// assembling calls by index must not merge the two.
    fn reindex(&self, delta: StreamDelta) -> StreamDelta {
        let shift = |index: u32| index.saturating_add(self.recovered);
        match delta {
            StreamDelta::ToolCallStart(start) => {
                StreamDelta::ToolCallStart(ToolCallStart { index: shift(start.index), ..start })
            }
            StreamDelta::ToolCallFragment(fragment) => {
                StreamDelta::ToolCallFragment(ToolCallFragment { index: shift(fragment.index), ..fragment })
            }
            StreamDelta::ToolCallEnd(index) => StreamDelta::ToolCallEnd(shift(index)),
            other => other,
        }
    }

    /// Servers that leave calls in the text say `finish_reason: stop`; once calls
    /// were recovered, the turn ended to use them.
    fn outgoing(&self, delta: StreamDelta) -> StreamDelta {
        match delta {
            StreamDelta::Stop(stop) if self.recovered > 0 && stop.reason == StopReason::EndTurn => {
                StreamDelta::Stop(StopInfo { reason: StopReason::ToolUse, ..stop })
            }
            other => other,
        }
    }

    /// Emits `held[from..to]` as text, with the deltas parked within it in place.
    fn emit_text(&mut self, from: usize, to: usize, out: &mut Vec<StreamDelta>) {
        let mut at = from;
        while let Some((offset, delta)) = self.parked.pop_front() {
            if offset > to {
                self.parked.push_front((offset, delta));
                break;
            }
            push_nonempty(out, StreamDelta::Text, self.held.get(at..offset).unwrap_or_default().to_string());
            at = offset;
            out.push(self.outgoing(delta));
        }
        push_nonempty(out, StreamDelta::Text, self.held.get(at..to).unwrap_or_default().to_string());
    }

    /// Emits a call for the block ending at `held[..to]`; deltas parked inside
    /// the block follow the call.
    fn emit_call(&mut self, call: RecoveredCall, to: usize, out: &mut Vec<StreamDelta>) {
        let index = self.recovered;
        self.recovered = self.recovered.saturating_add(1);
        out.push(StreamDelta::ToolCallStart(ToolCallStart {
            index,
            id: format!("call_markup_{index}"),
            name: call.name,
        }));
        out.push(StreamDelta::ToolCallFragment(ToolCallFragment { index, json: call.arguments }));
        out.push(StreamDelta::ToolCallEnd(index));
        while self.parked.front().is_some_and(|(offset, _)| *offset <= to) {
            if let Some((_, delta)) = self.parked.pop_front() {
                out.push(self.outgoing(delta));
            }
        }
    }

    /// Drops `held[..len]`, which has gone out; parked offsets move with the text.
    fn forget(&mut self, len: usize) {
        if len == 0 {
            return;
        }
        scanned(self.held.len() - len);
        self.held.drain(..len);
        for (offset, _) in &mut self.parked {
            *offset = offset.saturating_sub(len);
        }
    }
}

/// The earliest byte offset at which a block could start, found in one pass.
fn find_opener(text: &str) -> Option<usize> {
    let mut from = 0;
    while let Some(found) = text.get(from..).and_then(|rest| rest.find('<')) {
        let at = from + found;
        let candidate = text.get(at..).unwrap_or_default();
        if OPENERS.iter().any(|opener| candidate.starts_with(opener)) {
            scanned(at + TOOL_CALL_OPEN.len());
            return Some(at);
        }
        from = at + 1;
    }
    scanned(text.len());
    None
}

/// The length of the longest suffix of `text` that is a proper prefix of an
/// opener (`<tool_`, `<func`): the next fragment decides whether it is a tag.
fn partial_opener_len(text: &str) -> usize {
    scanned(TOOL_CALL_OPEN.len() + FUNCTION_OPEN.len());
    OPENERS
        .iter()
        .flat_map(|opener| (1..opener.len()).filter_map(|len| opener.get(..len)))
        .filter(|prefix| text.ends_with(prefix))
        .map(str::len)
        .max()
        .unwrap_or(0)
}

/// The largest char boundary of `text` at or below `at`.
fn floor_char_boundary(text: &str, at: usize) -> usize {
    let mut at = at.min(text.len());
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

/// A call recovered from markup.
#[derive(Debug, PartialEq)]
struct RecoveredCall {
    name: String,
    /// The arguments object as compact JSON.
    arguments: String,
}

/// The outcome of reading the held block. Every decision depends only on the
/// text it consumed, so it is the same however the text was split.
enum Parse<T> {
    /// Parsed, consuming this many bytes.
    Done(T, usize),
    /// The text ends before the construct does.
    Partial,
    /// The text is not this construct.
    Invalid,
}

/// Reads one block of markup as it arrives: `<tool_call>` with Hermes JSON or
/// Qwen3-Coder XML inside, then `</tool_call>`; or a bare
/// `<function=NAME><parameter=P>VALUE</parameter>…</function>`.
///
/// It is resumable: [`BlockParser::advance`] is called with the block's text so
/// far, every time more has arrived, and picks up where it stopped. A step only
/// re-reads a tag it is in the middle of (at most a tag's length), so the whole
/// block is read once however finely it is split.
#[derive(Debug)]
struct BlockParser {
    /// Bytes of the block read so far.
    at: usize,
    step: Step,
    /// Whether the block opened with `<tool_call>` and so must close with `</tool_call>`.
    wrapped: bool,
    /// The function's name (XML form), once read.
    name: String,
    /// The parameters read so far (XML form).
    arguments: Map<String, Value>,
    /// The parameter whose value is being read.
    parameter: String,
    /// The call, once read, while the closing `</tool_call>` is awaited.
    call: Option<RecoveredCall>,
}

/// Where a [`BlockParser`] stands. Positions are byte offsets in the block.
#[derive(Debug, Clone, Copy)]
enum Step {
    /// After `<tool_call>`: whitespace, then a JSON object or `<function=`.
    Body,
    /// A JSON object from `start`, balanced outside strings so far up to `at`.
    Json { start: usize, depth: usize, in_string: bool, escaped: bool },
    /// `<function=` expected at `start`.
    Function { start: usize },
    /// A function's or parameter's name from `start`, up to `>`.
    Name { start: usize, parameter: bool },
    /// Between parameters: whitespace, then `<parameter=` or `</function>`.
    Tag,
    /// A parameter value from `start`, up to `</parameter>`.
    Value { start: usize },
    /// After the call: whitespace, then `</tool_call>`.
    Close,
}

impl BlockParser {
    /// A parser for the block `text` starts with (it starts with an opener).
    fn new(text: &str) -> Self {
        let wrapped = text.starts_with(TOOL_CALL_OPEN);
        let (at, step) = if wrapped { (TOOL_CALL_OPEN.len(), Step::Body) } else { (0, Step::Function { start: 0 }) };
        Self { at, step, wrapped, name: String::new(), arguments: Map::new(), parameter: String::new(), call: None }
    }

    /// The bytes of the opening tag, which are text when the block is not markup.
    fn opener_len(&self) -> usize {
        if self.wrapped { TOOL_CALL_OPEN.len() } else { FUNCTION_OPEN.len() }
    }

    /// Reads `text` (the whole block so far, a longer prefix of the same text on
    /// every call) from where the last call stopped.
    fn advance(&mut self, text: &str) -> Parse<RecoveredCall> {
        loop {
            let rest = text.get(self.at..).unwrap_or_default();
            match self.step {
                Step::Body => {
                    let Some(first) = self.skip_whitespace(rest) else { return Parse::Partial };
                    self.step = if first == '{' {
                        Step::Json { start: self.at, depth: 0, in_string: false, escaped: false }
                    } else {
                        Step::Function { start: self.at }
                    };
                }
                Step::Json { start, depth, in_string, escaped } => {
                    let Some(end) = self.scan_json(rest, depth, in_string, escaped) else { return Parse::Partial };
                    let object = text.get(start..end).unwrap_or_default();
                    scanned(object.len());
                    let call = serde_json::from_str(object).ok().and_then(call_from_json);
                    let Some(call) = call else { return Parse::Invalid };
                    self.at = end;
                    self.call = Some(call);
                    self.step = Step::Close;
                }
                Step::Function { start } => {
                    match expect(text.get(start..).unwrap_or_default(), FUNCTION_OPEN) {
                        Expect::Matched => {}
                        Expect::Partial => return Parse::Partial,
                        Expect::Mismatch => return Parse::Invalid,
                    }
                    self.at = start + FUNCTION_OPEN.len();
                    self.step = Step::Name { start: self.at, parameter: false };
                }
                Step::Name { start, parameter } => {
                    let Some(found) = rest.find(['>', '<', '\n']) else {
                        scanned(rest.len());
                        self.at = text.len();
                        return Parse::Partial;
                    };
                    scanned(found + 1);
                    let name = text.get(start..self.at + found).unwrap_or_default().trim();
                    if rest.as_bytes().get(found) != Some(&b'>') || name.is_empty() {
                        return Parse::Invalid;
                    }
                    if parameter {
                        self.parameter = name.to_string();
                    } else {
                        self.name = name.to_string();
                    }
                    self.at += found + 1;
                    self.step = if parameter { Step::Value { start: self.at } } else { Step::Tag };
                }
                Step::Tag => {
                    if self.skip_whitespace(rest).is_none() {
                        return Parse::Partial;
                    }
                    let tag = text.get(self.at..).unwrap_or_default();
                    scanned(PARAMETER_OPEN.len().max(FUNCTION_CLOSE.len()));
                    match (expect(tag, PARAMETER_OPEN), expect(tag, FUNCTION_CLOSE)) {
                        (_, Expect::Matched) => {
                            self.at += FUNCTION_CLOSE.len();
                            let arguments = Value::Object(std::mem::take(&mut self.arguments));
                            let call = RecoveredCall {
                                name: std::mem::take(&mut self.name),
                                arguments: arguments.to_string(),
                            };
                            if !self.wrapped {
                                return Parse::Done(call, self.at);
                            }
                            self.call = Some(call);
                            self.step = Step::Close;
                        }
                        (Expect::Matched, _) => {
                            self.at += PARAMETER_OPEN.len();
                            self.step = Step::Name { start: self.at, parameter: true };
                        }
                        (Expect::Partial, _) | (_, Expect::Partial) => return Parse::Partial,
                        (Expect::Mismatch, Expect::Mismatch) => return Parse::Invalid,
                    }
                }
                Step::Value { start } => {
                    // The closing tag may have begun in what was read last time.
                    let from = floor_char_boundary(text, self.at.saturating_sub(PARAMETER_CLOSE.len() - 1).max(start));
                    let Some(found) = text.get(from..).and_then(|tail| tail.find(PARAMETER_CLOSE)) else {
                        scanned(text.len() - from);
                        self.at = text.len();
                        return Parse::Partial;
                    };
                    scanned(found + PARAMETER_CLOSE.len());
                    let raw = text.get(start..from + found).unwrap_or_default();
                    scanned(raw.len());
                    self.arguments.insert(std::mem::take(&mut self.parameter), typed_value(raw));
                    self.at = from + found + PARAMETER_CLOSE.len();
                    self.step = Step::Tag;
                }
                Step::Close => {
                    if self.skip_whitespace(rest).is_none() {
                        return Parse::Partial;
                    }
                    scanned(TOOL_CALL_CLOSE.len());
                    match expect(text.get(self.at..).unwrap_or_default(), TOOL_CALL_CLOSE) {
                        Expect::Matched => {}
                        Expect::Partial => return Parse::Partial,
                        Expect::Mismatch => return Parse::Invalid,
                    }
                    self.at += TOOL_CALL_CLOSE.len();
                    return match self.call.take() {
                        Some(call) => Parse::Done(call, self.at),
                        None => Parse::Invalid,
                    };
                }
            }
        }
    }

    /// Moves past the whitespace `rest` starts with; the next character, if any.
    fn skip_whitespace(&mut self, rest: &str) -> Option<char> {
        let trimmed = rest.trim_start();
        let skipped = rest.len() - trimmed.len();
        scanned(skipped + 1);
        self.at += skipped;
        trimmed.chars().next()
    }

    /// Balances brackets outside strings from `at`, resuming the saved state; the
    /// end of the object, or `None` (state saved) while it is still open.
    /// Validity is left to the JSON parser, which then sees the whole value.
    fn scan_json(&mut self, rest: &str, mut depth: usize, mut in_string: bool, mut escaped: bool) -> Option<usize> {
        let Step::Json { start, .. } = self.step else { return None };
        for (offset, byte) in rest.bytes().enumerate() {
            if in_string {
                match byte {
                    _ if escaped => escaped = false,
                    b'\\' => escaped = true,
                    b'"' => in_string = false,
                    _ => {}
                }
                continue;
            }
            match byte {
                b'"' => in_string = true,
                b'{' | b'[' => depth += 1,
                b'}' | b']' => {
                    depth = depth.saturating_sub(1);
                    if depth == 0 {
                        scanned(offset + 1);
                        return Some(self.at + offset + 1);
                    }
                }
                _ => {}
            }
        }
        scanned(rest.len());
        self.at += rest.len();
        self.step = Step::Json { start, depth, in_string, escaped };
        None
    }
}

/// A Hermes call: a non-empty `name` and an `arguments` object, possibly encoded
/// as a JSON string holding the object; no `arguments` means none.
fn call_from_json(value: Value) -> Option<RecoveredCall> {
    let Value::Object(mut fields) = value else {
        return None;
    };
    let name = match fields.remove("name") {
        Some(Value::String(name)) if !name.trim().is_empty() => name,
        _ => return None,
    };
    let arguments = match fields.remove("arguments") {
        None => Value::Object(Map::new()),
        Some(Value::String(encoded)) => serde_json::from_str(&encoded).ok()?,
        Some(arguments) => arguments,
    };
    arguments.is_object().then(|| RecoveredCall { name, arguments: arguments.to_string() })
}

/// An XML parameter value: one leading and one trailing newline are layout. A
/// value that is JSON other than a string (number, bool, null, object, array)
/// keeps its type, as the server's schema-driven conversion would give it;
/// anything else is the text itself.
fn typed_value(raw: &str) -> Value {
    let value = raw.strip_prefix('\n').unwrap_or(raw);
    let value = value.strip_suffix('\n').unwrap_or(value);
    match serde_json::from_str::<Value>(value) {
        Ok(parsed) if !parsed.is_string() => parsed,
        _ => Value::String(value.to_string()),
    }
}

/// How text compares with a token it may start with.
enum Expect {
    /// It starts with the token.
    Matched,
    /// It is a proper prefix of the token (possibly empty).
    Partial,
    Mismatch,
}

fn expect(text: &str, token: &str) -> Expect {
    if text.starts_with(token) {
        Expect::Matched
    } else if token.starts_with(text) {
        Expect::Partial
    } else {
        Expect::Mismatch
    }
}

#[cfg(test)]
thread_local! {
    /// Bytes the markup scanners have read on this thread: the unit tests'
    /// measure of the work a delta costs.
    static SCANNED: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// Counts bytes read by a scanner (tests only; free otherwise).
#[inline]
fn scanned(bytes: usize) {
    #[cfg(test)]
    SCANNED.with(|total| total.set(total.get() + bytes));
    #[cfg(not(test))]
    let _ = bytes;
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::json;

    use super::*;
    use crate::types::Usage;

    fn text(fragment: &str) -> StreamDelta {
        StreamDelta::Text(fragment.to_string())
    }

    fn thinking(fragment: &str) -> StreamDelta {
        StreamDelta::Thinking(fragment.to_string())
    }

    fn stop(reason: StopReason) -> StreamDelta {
        StreamDelta::Stop(StopInfo { reason, raw: Some("stop".to_string()), refusal: None })
    }

    fn usage() -> StreamDelta {
        StreamDelta::Usage(Usage { input: 1, output: 2, cache_read: 0, cache_write: 0, reasoning: None })
    }

    /// Pushes every delta, then finishes.
    fn run(deltas: Vec<StreamDelta>) -> Vec<StreamDelta> {
        let mut repair = StreamRepair::new();
        let mut out: Vec<StreamDelta> = deltas.into_iter().flat_map(|delta| repair.push(delta)).collect();
        out.extend(repair.finish());
        out
    }

    fn run_texts(fragments: &[&str]) -> Vec<StreamDelta> {
        run(fragments.iter().map(|fragment| text(fragment)).collect())
    }

    fn joined_text(out: &[StreamDelta]) -> String {
        out.iter()
            .filter_map(|delta| match delta {
                StreamDelta::Text(text) => Some(text.as_str()),
                _ => None,
            })
            .collect()
    }

    fn joined_thinking(out: &[StreamDelta]) -> String {
        out.iter()
            .filter_map(|delta| match delta {
                StreamDelta::Thinking(text) => Some(text.as_str()),
                _ => None,
            })
            .collect()
    }

    /// The completed calls, in order: (index, id, name, arguments).
    fn calls(out: &[StreamDelta]) -> Vec<(u32, String, String, Value)> {
        let mut open: Vec<(u32, String, String, String)> = Vec::new();
        let mut done = Vec::new();
        for delta in out {
            match delta {
                StreamDelta::ToolCallStart(start) => {
                    open.push((start.index, start.id.clone(), start.name.clone(), String::new()))
                }
                StreamDelta::ToolCallFragment(fragment) => {
                    if let Some(call) = open.iter_mut().find(|call| call.0 == fragment.index) {
                        call.3.push_str(&fragment.json);
                    }
                }
                StreamDelta::ToolCallEnd(index) => {
                    if let Some(at) = open.iter().position(|call| call.0 == *index) {
                        let (index, id, name, json) = open.remove(at);
                        let arguments = serde_json::from_str(&json).unwrap_or(Value::Null);
                        done.push((index, id, name, arguments));
                    }
                }
                _ => {}
            }
        }
        done
    }

    fn names_and_arguments(out: &[StreamDelta]) -> Vec<(String, Value)> {
        calls(out).into_iter().map(|(_, _, name, arguments)| (name, arguments)).collect()
    }

    // ------------------------------------------------------------- snapshots

    #[test]
    fn deltas_pass_through_unchanged() {
        let out = run_texts(&["Hello", ", ", "world"]);
        assert_eq!(joined_text(&out), "Hello, world");
    }

    #[test]
    fn short_repeats_are_ordinary_language() {
        assert_eq!(joined_text(&run_texts(&["ha", "ha", "ha", "!"])), "hahaha!");
        assert_eq!(joined_text(&run_texts(&["ha", "ha"])), "haha");
        assert_eq!(joined_text(&run_texts(&["Hello", "Hello world", " again"])), "HelloHello world again");
    }

    #[test]
    fn a_held_short_repeat_is_released_before_the_next_delta() {
        let out = run(vec![text("ha"), text("ha"), usage(), text("!")]);
        assert_eq!(out, vec![text("ha"), text("ha"), usage(), text("!")]);
    }

    #[test]
    fn long_snapshots_forward_only_the_unseen_tail() {
        let first = "The quick brown fox jumps";
        let second = "The quick brown fox jumps over";
        let third = "The quick brown fox jumps over the lazy dog.";
        let out = run_texts(&[first, second, second, third]);
        assert_eq!(out, vec![text(first), text(" over"), text(" the lazy dog.")]);
    }

    #[test]
    fn snapshots_that_start_short_are_recognized_once_they_are_long() {
        let out = run_texts(&[
            "The",
            "The quick",
            "The quick brown",
            "The quick brown fox jumps",
            "The quick brown fox jumps over",
            "The quick brown fox jumps over the lazy dog.",
        ]);
        assert_eq!(joined_text(&out), "The quick brown fox jumps over the lazy dog.");
    }

    #[test]
    fn snapshots_still_short_at_the_end_are_kept_as_deltas() {
        assert_eq!(joined_text(&run_texts(&["The", "The quick"])), "TheThe quick");
    }

    #[test]
    fn a_fragment_that_does_not_extend_a_snapshot_is_appended() {
        let start = "A snapshot of twenty-four+";
        let out = run_texts(&[start, "Something else"]);
        assert_eq!(joined_text(&out), format!("{start}Something else"));
    }

    #[test]
    fn reasoning_snapshots_are_repaired_apart_from_text() {
        let reasoning = "Let me think about the question";
        let out = run(vec![
            thinking("Let me"),
            thinking("Let me think about"),
            thinking(reasoning),
            thinking(&format!("{reasoning} carefully.")),
            text("Answer"),
        ]);
        assert_eq!(joined_thinking(&out), format!("{reasoning} carefully."));
        assert_eq!(out.last(), Some(&text("Answer")));
    }

    #[test]
    fn the_threshold_counts_characters_not_bytes() {
        // Eight three-byte characters: 24 bytes, but only 8 characters.
        let short = "日本語日本語日本";
        assert_eq!(joined_text(&run_texts(&[short, short, "。"])), format!("{short}{short}。"));
        let long = "日本語".repeat(8);
        let longer = format!("{long}です");
        let out = run_texts(&[&long, &longer]);
        assert_eq!(out, vec![text(&long), text("です")]);
    }

    // --------------------------------------------------------------- markup

    const HERMES: &str = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>";
    const XML: &str = "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n\
                       <parameter=days>\n3\n</parameter>\n</function>\n</tool_call>";

    #[test]
    fn hermes_json_becomes_a_tool_call() {
        let out = run_texts(&[&format!("Checking.\n{HERMES}\nDone.")]);
        assert_eq!(joined_text(&out), "Checking.\n\nDone.");
        assert_eq!(
            calls(&out),
            vec![(0, "call_markup_0".to_string(), "get_weather".to_string(), json!({"city": "Paris"}))]
        );
    }

    #[test]
    fn arguments_may_be_a_json_string_holding_json() {
        let markup = r#"<tool_call>{"name": "f", "arguments": "{\"a\": [1, 2]}"}</tool_call>"#;
        let out = run_texts(&[markup]);
        assert_eq!(joined_text(&out), "");
        assert_eq!(names_and_arguments(&out), vec![("f".to_string(), json!({"a": [1, 2]}))]);
    }

    #[test]
    fn nested_json_with_braces_and_a_closing_tag_in_a_string() {
        let markup = concat!(
            r#"<tool_call>{"name": "write", "arguments": "#,
            r#"{"body": "}</tool_call>{", "deep": {"x": [{"y": "}"}]}}}</tool_call>"#
        );
        let out = run_texts(&["before ", markup, " after"]);
        assert_eq!(joined_text(&out), "before  after");
        assert_eq!(
            names_and_arguments(&out),
            vec![("write".to_string(), json!({"body": "}</tool_call>{", "deep": {"x": [{"y": "}"}]}}))]
        );
    }

    #[test]
    fn qwen_xml_becomes_a_tool_call() {
        let out = run_texts(&[&format!("{XML}tail")]);
        assert_eq!(joined_text(&out), "tail");
        assert_eq!(names_and_arguments(&out), vec![("get_weather".to_string(), json!({"city": "Paris", "days": 3}))]);
    }

    #[test]
    fn xml_values_keep_their_json_types() {
        let markup = "<function=f>\n<parameter=n>\n3\n</parameter>\n<parameter=b>\ntrue\n</parameter>\n\
                      <parameter=o>\n{\"a\":1}\n</parameter>\n<parameter=s>\nParis\n</parameter>\n\
                      <parameter=z>\nnull\n</parameter>\n<parameter=q>\n\"quoted\"\n</parameter>\n\
                      <parameter=m>\n\nline one\nline two\n\n</parameter>\n</function>";
        let out = run_texts(&[markup]);
        let expected = json!({
            "n": 3, "b": true, "o": {"a": 1}, "s": "Paris", "z": null, "q": "\"quoted\"", "m": "\nline one\nline two\n"
        });
        assert_eq!(names_and_arguments(&out), vec![("f".to_string(), expected)]);
        assert_eq!(joined_text(&out), "");
    }

    #[test]
    fn several_blocks_take_consecutive_indexes() {
        let out = run_texts(&[&format!("{HERMES}{XML}<function=g></function>")]);
        let found: Vec<(u32, String, String)> =
            calls(&out).into_iter().map(|(index, id, name, _)| (index, id, name)).collect();
        assert_eq!(
            found,
            vec![
                (0, "call_markup_0".to_string(), "get_weather".to_string()),
                (1, "call_markup_1".to_string(), "get_weather".to_string()),
                (2, "call_markup_2".to_string(), "g".to_string()),
            ]
        );
    }

    #[test]
    fn an_unclosed_block_is_released_as_text_at_the_end() {
        let truncated = "Sure. <tool_call>\n{\"name\": \"rm\", \"arguments\": {\"path\": \"/tmp/a";
        let out = run_texts(&[truncated]);
        assert_eq!(joined_text(&out), truncated);
        assert!(calls(&out).is_empty());
        let unclosed_xml = "<tool_call>\n<function=rm>\n<parameter=path>\n/tmp\n</parameter>\n</function>\n";
        let out = run_texts(&[unclosed_xml]);
        assert_eq!(joined_text(&out), unclosed_xml);
        assert!(calls(&out).is_empty());
    }

    #[test]
    fn blocks_of_neither_form_stay_in_the_text() {
        for written in [
            "<tool_call>just words</tool_call>",
            "<tool_call>{\"no_name\": 1}</tool_call>",
            "<tool_call>{\"name\": \"f\"} trailing</tool_call>",
            "<tool_call>{\"name\": \"f\", \"arguments\": [1]}</tool_call>",
            "<tool_call>{broken}</tool_call>",
            "Write <function=name> in prose.",
            "<function=f>\n<param>x</param>\n</function>",
        ] {
            let out = run_texts(&[written]);
            assert_eq!(joined_text(&out), written);
            assert!(calls(&out).is_empty(), "{written}");
        }
    }

    #[test]
    fn a_partial_tag_at_a_chunk_end_waits_for_the_next_chunk() {
        let mut repair = StreamRepair::new();
        assert_eq!(repair.push(text("see <tool_")), vec![text("see ")]);
        assert_eq!(repair.push(text("kit> here")), vec![text("<tool_kit> here")]);
        assert_eq!(repair.push(text(" <func")), vec![text(" ")]);
        assert_eq!(repair.finish(), vec![text("<func")]);
    }

    #[test]
    fn every_split_in_two_gives_the_unsplit_result() {
        for whole in [
            format!("Let me check. {HERMES} And {XML}. <tool_kit> <func"),
            r#"a<tool_call>{"name": "f", "arguments": {"s": "}</tool_call>"}}</tool_call>b"#.to_string(),
            "x<function=f>\n<parameter=v>\n1.5e3\n</parameter>\n</function>y<tool_call>oops".to_string(),
        ] {
            let expected = run_texts(&[&whole]);
            for (at, _) in whole.char_indices().skip(1) {
                let (head, tail) = whole.split_at(at);
                let out = run_texts(&[head, tail]);
                assert_eq!(joined_text(&out), joined_text(&expected), "split at {at}");
                assert_eq!(calls(&out), calls(&expected), "split at {at}");
            }
        }
    }

    #[test]
    fn a_real_tool_call_turns_recovery_off_and_releases_held_text_first() {
        let real = StreamDelta::ToolCallStart(ToolCallStart { index: 0, id: "call_1".into(), name: "real".into() });
        let out = run(vec![text("wait <tool_call>{\"name\""), real.clone(), text(HERMES)]);
        assert_eq!(out, vec![text("wait "), text("<tool_call>{\"name\""), real, text(HERMES)]);
    }

    #[test]
    fn real_calls_after_recovered_ones_take_the_following_indexes() {
        let out = run(vec![
            text(HERMES),
            StreamDelta::ToolCallStart(ToolCallStart { index: 0, id: "call_1".into(), name: "real".into() }),
            StreamDelta::ToolCallFragment(ToolCallFragment { index: 0, json: "{}".into() }),
            StreamDelta::ToolCallEnd(0),
        ]);
        let indexes: Vec<(u32, String)> = calls(&out).into_iter().map(|(index, id, ..)| (index, id)).collect();
        assert_eq!(indexes, vec![(0, "call_markup_0".to_string()), (1, "call_1".to_string())]);
    }

    #[test]
    fn end_turn_becomes_tool_use_only_after_recovery() {
        let out = run(vec![text(HERMES), usage(), stop(StopReason::EndTurn)]);
        // `raw` keeps what the server said.
        assert_eq!(out.last(), Some(&stop(StopReason::ToolUse)));
        let plain = run(vec![text("hi"), stop(StopReason::EndTurn)]);
        assert_eq!(plain.last(), Some(&stop(StopReason::EndTurn)));
        let truncated = run(vec![text(HERMES), stop(StopReason::MaxTokens)]);
        assert_eq!(truncated.last(), Some(&stop(StopReason::MaxTokens)));
    }

    #[test]
    fn deltas_arriving_while_text_is_held_keep_their_place() {
        let served = StreamDelta::ServedModel("m".into());
        let out = run(vec![text("a <tool"), served.clone(), text("s b"), usage()]);
        assert_eq!(out, vec![text("a "), text("<tool"), served, text("s b"), usage()]);

        let signature = StreamDelta::ThinkingSignature("sig".into());
        let half = HERMES.len() / 2;
        let out = run(vec![
            text(HERMES.get(..half).unwrap_or_default()),
            signature.clone(),
            text(HERMES.get(half..).unwrap_or_default()),
            stop(StopReason::EndTurn),
        ]);
        assert!(matches!(out.first(), Some(StreamDelta::ToolCallStart(_))));
        assert_eq!(out.get(3..), Some(&[signature, stop(StopReason::ToolUse)][..]));
    }

    #[test]
    fn an_open_block_holds_later_deltas_until_the_end() {
        let out = run(vec![text("<tool_call>{\"name\": \"f\""), stop(StopReason::EndTurn)]);
        assert_eq!(out, vec![text("<tool_call>{\"name\": \"f\""), stop(StopReason::EndTurn)]);
    }

    // ------------------------------------------------------- bounds on work

    /// Pushes `whole` in `size`-byte text deltas (at char boundaries); returns
    /// the output, the most bytes held back after any push, and the bytes the
    /// scanners read for each push.
    fn stream_in_pieces(whole: &str, size: usize) -> (Vec<StreamDelta>, usize, Vec<usize>) {
        let mut repair = StreamRepair::new();
        let (mut out, mut most_held, mut work) = (Vec::new(), 0, Vec::new());
        let (mut pushed, mut released, mut start) = (0, 0, 0);
        while start < whole.len() {
            let mut end = (start + size).min(whole.len());
            while !whole.is_char_boundary(end) {
                end += 1;
            }
            let before = SCANNED.with(std::cell::Cell::get);
            let forwarded = repair.push(text(&whole[start..end]));
            work.push(SCANNED.with(std::cell::Cell::get) - before);
            pushed += end - start;
            released += joined_text(&forwarded).len();
            most_held = most_held.max(pushed - released);
            out.extend(forwarded);
            start = end;
        }
        out.extend(repair.finish());
        (out, most_held, work)
    }

    #[test]
    fn an_unclosed_block_is_released_once_it_holds_64_kib() {
        let prose = "The model opened a tool call and then just kept talking. ".repeat(20_000);
        let whole = format!("Sure. <tool_call>\n{{\"name\": \"f\", \"arguments\": {{\"a\": \"{prose}");
        assert!(whole.len() > 1 << 20);
        let (out, most_held, _) = stream_in_pieces(&whole, 16);
        assert_eq!(joined_text(&out), whole, "all of it went out as text, in order");
        assert!(calls(&out).is_empty());
        assert!(most_held <= MAX_HELD_MARKUP_BYTES, "held {most_held} bytes");
        assert!(most_held >= MAX_HELD_MARKUP_BYTES - 16, "it was held until the cap: {most_held}");
    }

    #[test]
    fn a_block_longer_than_the_cap_is_text_however_it_is_split() {
        let value = "x".repeat(MAX_HELD_MARKUP_BYTES);
        let block = format!("<function=f>\n<parameter=v>\n{value}\n</parameter>\n</function>");
        for size in [7, 4096, block.len()] {
            let (out, most_held, _) = stream_in_pieces(&format!("a{block}b"), size);
            assert_eq!(joined_text(&out), format!("a{block}b"), "split every {size}");
            assert!(calls(&out).is_empty(), "split every {size}");
            assert!(most_held <= MAX_HELD_MARKUP_BYTES.max(size), "split every {size}: held {most_held}");
        }
        // Just under the cap it is still a call.
        let value = "x".repeat(MAX_HELD_MARKUP_BYTES - 100);
        let block = format!("<function=f>\n<parameter=v>\n{value}\n</parameter>\n</function>");
        let (out, ..) = stream_in_pieces(&block, 7);
        assert_eq!(names_and_arguments(&out), vec![("f".to_string(), json!({"v": value}))]);
    }

    /// Counts the bytes the scanners read per delta: each delta costs about its
    /// own length, however much is held, so a stream costs linear work. A rescan
    /// of the held block per delta would read ~32 KiB per delta here.
    #[test]
    fn the_work_per_delta_does_not_grow_with_what_is_held() {
        let long = "word ".repeat(12_000);
        let shapes = [
            // Held until the cap, then released: JSON, XML value, XML name.
            format!("<tool_call>{{\"name\": \"f\", \"arguments\": {{\"s\": \"{long}"),
            format!("<tool_call>\n<function=f>\n<parameter=p>\n{long}"),
            format!("<function={}", "n".repeat(100_000)),
            // Closed blocks just under the cap, recovered as calls.
            format!("<tool_call>{{\"name\": \"f\", \"arguments\": {{\"s\": \"{long}\"}}}}</tool_call>"),
            format!(
                "<function=f>\n<parameter=a>\n{long}\n</parameter>\n<parameter=b>\n{long}\n</parameter>\n</function>"
            )
            .replace(&long, &long[..25_000]),
            // Plain text full of near-openers.
            "<tool <func <b> a < b ".repeat(5_000),
        ];
        for (n, whole) in shapes.iter().enumerate() {
            let (out, _, work) = stream_in_pieces(whole, 16);
            let total: usize = work.iter().sum();
            let most = work.iter().copied().max().unwrap_or(0);
            let steady = work.iter().take(work.len() - 1).skip(1).filter(|w| **w > 16 * 16).count();
            assert!(total <= 12 * whole.len(), "shape {n}: read {total} bytes for {}", whole.len());
            assert!(most <= 3 * MAX_HELD_MARKUP_BYTES, "shape {n}: {most} bytes for one delta");
            // Only the delta that resolves a held block may read more than a few
            // times its own length (releasing or parsing what was held, once).
            assert!(steady <= 2, "shape {n}: {steady} deltas read more than 256 bytes");
            if (3..5).contains(&n) {
                assert_eq!(calls(&out).len(), 1, "shape {n} is a call");
            } else {
                assert_eq!(&joined_text(&out), whole, "shape {n} is text");
            }
        }
    }

    // ----------------------------------------------------------- properties

    /// Plain words, including ones that look like the start of markup.
    const WORDS: [&str; 14] =
        ["hello", " ", "world", "\n", "<", "<tool", "<func", "</tool_call>", "a > b", "{", "}", "é", "日本", "<b>"];

    /// One markup block of each form; `n` makes every block distinct.
    fn block(form: usize, n: usize) -> (String, String, Value) {
        let name = format!("tool_{n}");
        match form {
            0 => (
                format!(
                    "<tool_call>\n{{\"name\": \"{name}\", \
                     \"arguments\": {{\"n\": {n}, \"s\": \"}}</tool_call>\"}}}}\n</tool_call>"
                ),
                name,
                json!({"n": n, "s": "}</tool_call>"}),
            ),
            1 => (
                format!("<tool_call>{{\"name\": \"{name}\", \"arguments\": \"{{\\\"k\\\": [{n}]}}\"}}</tool_call>"),
                name,
                json!({"k": [n]}),
            ),
            2 => (
                format!(
                    "<tool_call>\n<function={name}>\n<parameter=city>\nParis\n</parameter>\n\
                     <parameter=days>\n{n}\n</parameter>\n</function>\n</tool_call>"
                ),
                name,
                json!({"city": "Paris", "days": n}),
            ),
            _ => (
                format!(
                    "<function={name}>\n<parameter=flag>\ntrue\n</parameter>\n\
                     <parameter=o>\n{{\"a\":{n}}}\n</parameter>\n</function>"
                ),
                name,
                json!({"flag": true, "o": {"a": n}}),
            ),
        }
    }

    /// A text with markup, the text a reader should see, and the calls in it.
    #[derive(Debug, Clone)]
    struct Case {
        whole: String,
        visible: String,
        blocks: Vec<String>,
        calls: Vec<(String, Value)>,
    }

    fn case() -> impl Strategy<Value = Case> {
        let segment = prop_oneof![
            prop::collection::vec(prop::sample::select(WORDS.to_vec()), 0..6).prop_map(|words| (words.concat(), None)),
            (0_usize..4).prop_map(|form| (String::new(), Some(form))),
        ];
        (prop::collection::vec(segment, 0..8), prop::option::of((0_usize..4, any::<prop::sample::Index>()))).prop_map(
            |(segments, truncated)| {
                let mut case = Case { whole: String::new(), visible: String::new(), blocks: vec![], calls: vec![] };
                for (n, (plain, form)) in segments.into_iter().enumerate() {
                    case.whole.push_str(&plain);
                    case.visible.push_str(&plain);
                    if let Some(form) = form {
                        let (markup, name, arguments) = block(form, n);
                        case.whole.push_str(&markup);
                        case.blocks.push(markup);
                        case.calls.push((name, arguments));
                    }
                }
                if let Some((form, cut)) = truncated {
                    let (markup, ..) = block(form, 99);
                    let unclosed = markup.get(..cut.index(markup.len() - 1) + 1).unwrap_or_default();
                    case.whole.push_str(unclosed);
                    case.visible.push_str(unclosed);
                }
                case
            },
        )
    }

    /// Whether `text` repeats a run of 24 or more bytes back to back: only such a
    /// text can be split so that a fragment looks like a cumulative snapshot.
    fn has_long_square(text: &str) -> bool {
        let bytes = text.as_bytes();
        (0..bytes.len()).any(|start| {
            (SNAPSHOT_EVIDENCE_CHARS..=(bytes.len() - start) / 2)
                .any(|len| bytes.get(start..start + len) == bytes.get(start + len..start + 2 * len))
        })
    }

    /// Splits `text` at the given character positions.
    fn split(text: &str, cuts: &[prop::sample::Index]) -> Vec<String> {
        let chars: Vec<char> = text.chars().collect();
        let mut at: Vec<usize> = cuts.iter().map(|cut| cut.index(chars.len() + 1)).collect();
        at.push(0);
        at.push(chars.len());
        at.sort_unstable();
        at.dedup();
        at.windows(2).map(|pair| chars.get(pair[0]..pair[1]).unwrap_or_default().iter().collect()).collect()
    }

    fn run_fragments(fragments: &[String]) -> Vec<StreamDelta> {
        run(fragments.iter().map(|fragment| text(fragment)).collect())
    }

    proptest! {
        #[test]
        fn any_split_gives_the_unsplit_text_and_calls(
            case in case(),
            cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..12),
        ) {
            prop_assume!(!has_long_square(&case.whole));
            let whole = run_fragments(std::slice::from_ref(&case.whole));
            let pieces = run_fragments(&split(&case.whole, &cuts));
            prop_assert_eq!(joined_text(&pieces), joined_text(&whole));
            prop_assert_eq!(calls(&pieces), calls(&whole));
        }

        #[test]
        fn recovered_blocks_never_reach_the_text(
            case in case(),
            cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..12),
        ) {
            prop_assume!(!has_long_square(&case.whole));
            let out = run_fragments(&split(&case.whole, &cuts));
            let visible = joined_text(&out);
            prop_assert_eq!(&visible, &case.visible);
            prop_assert_eq!(names_and_arguments(&out), case.calls);
            for block in &case.blocks {
                prop_assert!(!visible.contains(block.as_str()));
            }
        }

        #[test]
        fn cumulative_snapshots_give_the_text_and_calls_once(
            case in case(),
            cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..12),
        ) {
            let chars = case.whole.chars().count();
            prop_assume!(chars > SNAPSHOT_EVIDENCE_CHARS);
            // A snapshot of at least the threshold followed by a longer one: the evidence.
            let mut ends: Vec<usize> = cuts.iter().map(|cut| cut.index(chars) + 1).collect();
            ends.push(SNAPSHOT_EVIDENCE_CHARS);
            ends.push(chars);
            ends.sort_unstable();
            let snapshots: Vec<String> = ends.iter().map(|end| case.whole.chars().take(*end).collect()).collect();
            let out = run_fragments(&snapshots);
            prop_assert_eq!(joined_text(&out), case.visible);
            prop_assert_eq!(names_and_arguments(&out), case.calls);
        }
    }
}
