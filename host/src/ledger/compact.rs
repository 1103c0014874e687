//! A row's body as the file stores it: without the fields its columns hold,
//! compressed against an earlier body of its kind and model.
//!
//! A body's JSON repeats the row's columns (call id, times, caller, model,
//! usage, cost, category), and the rest of it (keys, route, provider, wire
//! id, endpoint, notes) repeats from one call of a model to the next: ~600
//! bytes for a plain call's closing row. A compact body is the JSON with each
//! field a column holds replaced by a placeholder (`[]`: no column's value
//! is an array), its *residual*, compressed with zstd using the residual of
//! the first row of the same kind and model as the dictionary (its *shape*,
//! kept once in `ledger_shapes` and named by the row's `shape_id`, without
//! what the caller sent: [`NOT_IN_SHAPES`]): ~25 bytes for such a row. Reading it puts the columns' values back where the
//! placeholders are, in the same order and spelling, so the body read is the
//! body written, byte for byte: the chain's hash (`store::chain_digest`) is
//! over that body, and so covers every column, the shape and every stored
//! byte. A row is stored compact only when this holds for it (each column's
//! text is the body's field exactly, the body has no whitespace, the columns
//! a kind has no field for hold their one value) and a shape is at hand;
//! any other row keeps its body as text, and `verify` holds its columns to
//! it as before.
//!
//! Stored form: one format byte ([`FORMAT_1`]), then one zstd frame.

use std::cell::RefCell;
use std::collections::HashMap;
use std::io::Write as _;
use std::time::{Duration, UNIX_EPOCH};

use rusqlite::functions::FunctionFlags;
use rusqlite::types::ValueRef;
use rusqlite::{Connection, OptionalExtension, params};
use zstd::bulk::{Compressor, Decompressor};

use super::callid::CallId;
use super::store::{Kind, Row};
use crate::record::Tokens;

/// The stored form's first byte: placeholders, and one zstd frame whose
/// dictionary is the row's shape. A new layout takes a new byte; this one
/// stays readable.
pub(super) const FORMAT_1: u8 = 1;

/// zstd's level: on these bodies 1, 3 and 9 gave the same sizes (27 bytes a
/// row against its shape, measured with the zstd tool on 100 plain rows),
/// and 3 is zstd's default.
const LEVEL: i32 = 3;

/// The most shapes a file keeps: one per kind and model (the models a
/// catalog serves, and the names callers asked for that failed). Past it,
/// new models' rows are stored as text.
const MAX_SHAPES: i64 = 10_000;

/// The most a compact body may expand to: a body recording a call's content
/// can be large, but a stored frame claiming more than this is refused
/// rather than allocated.
const MAX_BODY_BYTES: usize = 64 << 20;

/// Compressors and decompressors kept per thread, by shape, before the
/// cache is emptied (a fill or a reader meets a handful of shapes).
const CACHED_SHAPES: usize = 64;

/// A column's field in the body.
const PLACEHOLDER: &str = "[]";

/// The shapes' table, append-only like the rows (a shape changed would
/// change every body read with it, and break the chain).
pub(super) const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS ledger_shapes (
    id INTEGER PRIMARY KEY,
    key TEXT NOT NULL UNIQUE,
    residual BLOB NOT NULL
);
CREATE TRIGGER IF NOT EXISTS ledger_shapes_no_update BEFORE UPDATE ON ledger_shapes
    BEGIN SELECT RAISE(ABORT, 'the ledger is append-only: shapes are never updated'); END;
CREATE TRIGGER IF NOT EXISTS ledger_shapes_no_delete BEFORE DELETE ON ledger_shapes
    BEGIN SELECT RAISE(ABORT, 'the ledger is append-only: shapes are never deleted'); END;
";

thread_local! {
    static COMPRESSORS: RefCell<HashMap<Vec<u8>, Compressor<'static>>> = RefCell::new(HashMap::new());
    static DECOMPRESSORS: RefCell<HashMap<Vec<u8>, Decompressor<'static>>> = RefCell::new(HashMap::new());
}

/// Why a stored compact body could not be read back.
#[derive(Debug, thiserror::Error)]
pub(super) enum CompactError {
    #[error("its body has the unknown stored format {0}")]
    Format(u8),
    #[error("its body is empty")]
    Empty,
    #[error("its body is compact, and its shape is missing")]
    NoShape,
    #[error("its body does not decompress: {0}")]
    Decompress(std::io::Error),
    #[error("its body does not parse: {0}")]
    Malformed(&'static str),
    #[error("its columns do not match its body ({0})")]
    Columns(String),
}

/// One column's field in a kind's body: its key, and how the row's columns
/// write its JSON text (`false`, nothing written: the body has no such field).
struct Field {
    key: &'static str,
    write: fn(&Row, &mut Vec<u8>) -> bool,
}

const CALL_ID: Field = Field { key: "call_id", write: |row, out| write_string(out, &row.call_id) };
const STARTED_AT: Field = Field { key: "started_at", write: |row, out| write_time(out, row.started_ms) };
const KEY_ID: Field =
    Field { key: "key_id", write: |row, out| row.key_id.as_deref().is_some_and(|id| write_string(out, id)) };
const MEMBER: Field =
    Field { key: "member", write: |row, out| row.member.as_deref().is_some_and(|m| write_string(out, m)) };
const TEAM: Field =
    Field { key: "team", write: |row, out| row.team.as_deref().is_some_and(|team| write_string(out, team)) };
const MODEL: Field = Field { key: "model", write: |row, out| write_string(out, &row.model) };

const OPEN_FIELDS: &[Field] = &[CALL_ID, STARTED_AT, KEY_ID, MEMBER, TEAM, MODEL];

const HOLD_FIELDS: &[Field] = &[
    CALL_ID,
    STARTED_AT,
    Field { key: "held_at", write: |row, out| write_time(out, row.at_ms) },
    KEY_ID,
    MEMBER,
    TEAM,
    MODEL,
    Field { key: "tokens", write: |row, out| write_json(out, &row.tokens.input) },
    Field { key: "usd", write: |row, out| row.cost_usd.is_some_and(|usd| write_json(out, &usd)) },
];

const CLOSE_FIELDS: &[Field] = &[
    CALL_ID,
    STARTED_AT,
    Field { key: "ended_at", write: |row, out| write_time(out, row.at_ms) },
    KEY_ID,
    MEMBER,
    TEAM,
    MODEL,
    Field { key: "usage", write: |row, out| write_tokens(out, &row.tokens) },
    Field { key: "cost_usd", write: |row, out| row.cost_usd.is_some_and(|usd| write_json(out, &usd)) },
    Field { key: "category", write: |row, out| row.category.as_deref().is_some_and(|c| write_string(out, c)) },
    Field {
        key: "charged_worst_case",
        write: |row, out| row.charged_worst.then(|| out.extend_from_slice(b"true")).is_some(),
    },
];

fn fields(kind: Kind) -> &'static [Field] {
    match kind {
        Kind::Open => OPEN_FIELDS,
        Kind::Hold => HOLD_FIELDS,
        Kind::Close => CLOSE_FIELDS,
    }
}

/// The columns a kind's body has no field for hold their one value: `None`
/// when they do, else which does not.
fn fixed_columns_differ(row: &Row) -> Option<&'static str> {
    let no_tokens_but_input = Tokens { input: row.tokens.input, ..Tokens::default() };
    match row.kind {
        Kind::Open if row.at_ms != row.started_ms => Some("at_ms"),
        Kind::Open if row.tokens != Tokens::default() || row.cost_usd.is_some() => Some("usage"),
        Kind::Hold if row.tokens != no_tokens_but_input => Some("usage"),
        Kind::Open | Kind::Hold if row.category.is_some() => Some("category"),
        Kind::Open | Kind::Hold if row.charged_worst => Some("charged_worst"),
        _ => None,
    }
}

/// A row's residual (see the module's doc), or `None` when the row cannot
/// be stored compact. The scan consumes every byte of the body, so the body
/// rebuilt from the residual is the body.
fn residual(row: &Row) -> Option<String> {
    if fixed_columns_differ(row).is_some() {
        return None;
    }
    let fields = fields(row.kind);
    let mut residual = String::with_capacity(row.body.len());
    let mut covered = Placed::default();
    let mut text = Vec::new();
    residual.push('{');
    for (index, entry) in Entries::new(&row.body).enumerate() {
        let (key, value) = entry.ok()?;
        if index > 0 {
            residual.push(',');
        }
        residual.push('"');
        residual.push_str(key);
        residual.push_str("\":");
        match fields.iter().position(|field| field.key == key) {
            Some(at) if covered.has(at) => return None,
            Some(at) => {
                text.clear();
                if !(fields[at].write)(row, &mut text) || text != value.as_bytes() {
                    return None;
                }
                covered.set(at);
                residual.push_str(PLACEHOLDER);
            }
            None => residual.push_str(value),
        }
    }
    residual.push('}');
    unplaced_column(fields, covered, row).is_none().then_some(residual)
}

/// Which of a kind's fields (by index) a body has placed.
#[derive(Clone, Copy, Default)]
struct Placed(u32);

impl Placed {
    fn has(self, at: usize) -> bool {
        self.0 & (1 << at) != 0
    }

    fn set(&mut self, at: usize) {
        self.0 |= 1 << at;
    }
}

/// The first field of `fields` not `placed` whose column has a value: a
/// column the body would not cover.
fn unplaced_column(fields: &'static [Field], placed: Placed, row: &Row) -> Option<&'static str> {
    let mut scratch = Vec::new();
    fields
        .iter()
        .enumerate()
        .find(|(at, field)| !placed.has(*at) && (field.write)(row, &mut scratch))
        .map(|(_, field)| field.key)
}

/// The shapes one fill's transaction has used, by kind and model (`None`:
/// none may be made, the file holding [`MAX_SHAPES`]). Kept for one
/// transaction only: a shape made in one rolled back is gone with it.
#[derive(Default)]
pub(super) struct Shapes {
    known: HashMap<String, Option<(i64, Vec<u8>)>>,
}

impl Shapes {
    /// `row`'s body in its stored compact form and its shape's id, or
    /// `None` when the row cannot be stored compact: it is then stored as
    /// text. The row's shape is made from its residual when its kind and
    /// model have none yet.
    pub(super) fn encode(&mut self, connection: &Connection, row: &Row) -> rusqlite::Result<Option<(i64, Vec<u8>)>> {
        let Some(residual) = residual(row) else { return Ok(None) };
        let key = format!("{}:{}", row.kind.as_str(), row.model);
        let shape = match self.known.get(&key) {
            Some(shape) => shape,
            None => {
                let found = find_or_make(connection, &key, &residual)?;
                self.known.entry(key).or_insert(found)
            }
        };
        let Some((id, shape)) = shape else { return Ok(None) };
        let Some(frame) = compress(residual.as_bytes(), shape) else { return Ok(None) };
        let mut stored = Vec::with_capacity(1 + frame.len());
        stored.push(FORMAT_1);
        stored.extend_from_slice(&frame);
        Ok(Some((*id, stored)))
    }
}

/// The shape named `key`, made from `residual` when there is none and the
/// file holds fewer than [`MAX_SHAPES`].
fn find_or_make(connection: &Connection, key: &str, residual: &str) -> rusqlite::Result<Option<(i64, Vec<u8>)>> {
    let found = connection
        .prepare_cached("SELECT id, residual FROM ledger_shapes WHERE key = ?1")?
        .query_row([key], |row| Ok((row.get(0)?, row.get(1)?)))
        .optional()?;
    if found.is_some() {
        return Ok(found);
    }
    let shapes: i64 =
        connection.prepare_cached("SELECT count(*) FROM ledger_shapes")?.query_row([], |row| row.get(0))?;
    if shapes >= MAX_SHAPES {
        return Ok(None);
    }
    let shape = shape_of(residual);
    connection
        .prepare_cached("INSERT INTO ledger_shapes (key, residual) VALUES (?1, ?2)")?
        .execute(params![key, shape.as_bytes()])?;
    Ok(Some((connection.last_insert_rowid(), shape.into_bytes())))
}

/// The fields a shape leaves out: what a caller sent (the prompt and answer
/// `record_content` keeps, the client's metadata, its trace context). A
/// shape is never deleted, so it must hold nothing that retention deletes
/// with the rows; it is only a dictionary, so any bytes serve.
const NOT_IN_SHAPES: [&str; 3] = ["content", "client", "traceparent"];

/// `residual` without the [`NOT_IN_SHAPES`] fields.
fn shape_of(residual: &str) -> String {
    let mut shape = String::with_capacity(residual.len());
    shape.push('{');
    for entry in Entries::new(residual) {
        let Ok((key, value)) = entry else { return String::new() };
        if NOT_IN_SHAPES.contains(&key) {
            continue;
        }
        if shape.len() > 1 {
            shape.push(',');
        }
        shape.push('"');
        shape.push_str(key);
        shape.push_str("\":");
        shape.push_str(value);
    }
    shape.push('}');
    shape
}

/// The body `stored` holds, rebuilt with `row`'s columns (its own `body`
/// is not read) and its shape's residual.
pub(super) fn decode(row: &Row, stored: &[u8], shape: Option<&[u8]>) -> Result<String, CompactError> {
    let mut residual = Vec::new();
    let frame = frame_of(stored)?;
    let shape = shape.ok_or(CompactError::NoShape)?;
    DECOMPRESSORS.with_borrow_mut(|decompressors| {
        if !decompressors.contains_key(shape) {
            if decompressors.len() >= CACHED_SHAPES {
                decompressors.clear();
            }
            let decompressor = Decompressor::with_dictionary(shape).map_err(CompactError::Decompress)?;
            decompressors.insert(shape.to_vec(), decompressor);
        }
        let decompressor = decompressors.get_mut(shape).ok_or(CompactError::NoShape)?;
        decompress_into(decompressor, frame, &mut residual)
    })?;
    let mut body = Vec::with_capacity(residual.len() + 160);
    rebuild_into(row, &residual, &mut body)?;
    // The residual was UTF-8 (checked as it was scanned), and so are the columns' texts.
    String::from_utf8(body).map_err(|error| CompactError::Decompress(invalid_data(error)))
}

/// A file's shapes, read once, and a decompressor for each: what `verify`'s
/// walk decodes compact bodies with (no lookup of the shape per row). Each
/// checking thread has its own.
pub(super) struct ShapeBook {
    shapes: HashMap<i64, (std::sync::Arc<[u8]>, Option<Decompressor<'static>>)>,
    /// The residual last decompressed, kept for its allocation.
    residual: Vec<u8>,
}

impl ShapeBook {
    /// Every shape `connection` sees now.
    pub(super) fn read(connection: &Connection) -> rusqlite::Result<Self> {
        let mut statement = connection.prepare("SELECT id, residual FROM ledger_shapes")?;
        let shapes = statement
            .query_map([], |row| Ok((row.get::<_, i64>(0)?, (row.get::<_, Vec<u8>>(1)?.into(), None))))?
            .collect::<rusqlite::Result<_>>()?;
        Ok(Self { shapes, residual: Vec::new() })
    }

    /// A book of the same shapes, for another thread (its decompressors are its own).
    pub(super) fn fork(&self) -> Self {
        let shapes = self.shapes.iter().map(|(id, (shape, _))| (*id, (shape.clone(), None))).collect();
        Self { shapes, residual: Vec::new() }
    }

    /// The body `stored` holds, rebuilt with the shape `shape_id` names and
    /// `row`'s columns into `body` (emptied first).
    pub(super) fn decode_into(
        &mut self,
        row: &Row,
        stored: &[u8],
        shape_id: Option<i64>,
        body: &mut Vec<u8>,
    ) -> Result<(), CompactError> {
        let frame = frame_of(stored)?;
        let (shape, decompressor) = shape_id.and_then(|id| self.shapes.get_mut(&id)).ok_or(CompactError::NoShape)?;
        if decompressor.is_none() {
            *decompressor = Some(Decompressor::with_dictionary(shape).map_err(CompactError::Decompress)?);
        }
        let decompressor = decompressor.as_mut().ok_or(CompactError::NoShape)?;
        decompress_into(decompressor, frame, &mut self.residual)?;
        rebuild_into(row, &self.residual, body)
    }
}

/// The zstd frame of a stored compact body: after its format byte, which
/// must be [`FORMAT_1`].
fn frame_of(stored: &[u8]) -> Result<&[u8], CompactError> {
    let (&format, frame) = stored.split_first().ok_or(CompactError::Empty)?;
    if format != FORMAT_1 {
        return Err(CompactError::Format(format));
    }
    Ok(frame)
}

/// `frame` decompressed into `residual` (emptied first): the size the
/// frame states, within [`MAX_BODY_BYTES`].
fn decompress_into(
    decompressor: &mut Decompressor<'_>,
    frame: &[u8],
    residual: &mut Vec<u8>,
) -> Result<(), CompactError> {
    let invalid = |what: &str| CompactError::Decompress(invalid_data(what));
    let size = zstd::zstd_safe::get_frame_content_size(frame)
        .ok()
        .flatten()
        .ok_or_else(|| invalid("the frame does not state its size"))?;
    let size = usize::try_from(size).ok().filter(|size| *size <= MAX_BODY_BYTES).ok_or_else(|| invalid("too large"))?;
    residual.clear();
    residual.reserve(size);
    let written = decompressor.decompress_to_buffer(frame, residual).map_err(CompactError::Decompress)?;
    if written != size {
        return Err(invalid("the frame holds fewer bytes than it states"));
    }
    Ok(())
}

fn invalid_data(error: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, error)
}

/// Writes into `body` (emptied first) the body whose residual is
/// `residual`: each placeholder of a column's field replaced by the text
/// `row`'s column writes there.
fn rebuild_into(row: &Row, residual: &[u8], body: &mut Vec<u8>) -> Result<(), CompactError> {
    let residual = std::str::from_utf8(residual).map_err(|error| CompactError::Decompress(invalid_data(error)))?;
    if let Some(column) = fixed_columns_differ(row) {
        return Err(CompactError::Columns(format!("{column} has a value its kind does not record")));
    }
    let fields = fields(row.kind);
    let mut placed = Placed::default();
    body.clear();
    body.push(b'{');
    for (index, entry) in Entries::new(residual).enumerate() {
        let (key, value) = entry?;
        if index > 0 {
            body.push(b',');
        }
        body.push(b'"');
        body.extend_from_slice(key.as_bytes());
        body.extend_from_slice(b"\":");
        match fields.iter().position(|field| field.key == key) {
            Some(at) if placed.has(at) || value != PLACEHOLDER => {
                return Err(CompactError::Columns(format!("`{key}` is stored twice")));
            }
            Some(at) => {
                if !(fields[at].write)(row, body) {
                    return Err(CompactError::Columns(format!("`{key}` has no column value")));
                }
                placed.set(at);
            }
            None => body.extend_from_slice(value.as_bytes()),
        }
    }
    body.push(b'}');
    match unplaced_column(fields, placed, row) {
        Some(key) => Err(CompactError::Columns(format!("the body has no place for `{key}`"))),
        None => Ok(()),
    }
}

/// Registers `ledger_body` ([`super::store::BODY_SQL`]) on `connection`: a
/// row's body as JSON text from its columns in the table's order (kind
/// through `charged_worst`), the stored body and its shape's residual; NULL
/// for a compact row of a kind this weir does not know.
pub(super) fn register(connection: &Connection) -> rusqlite::Result<()> {
    connection.create_scalar_function(
        "ledger_body",
        18,
        FunctionFlags::SQLITE_UTF8 | FunctionFlags::SQLITE_DETERMINISTIC,
        |context| {
            let stored = match context.get_raw(16) {
                ValueRef::Blob(stored) => stored,
                ValueRef::Text(text) => return Ok(Some(String::from_utf8_lossy(text).into_owned())),
                _ => return Err(function_error(CompactError::Empty)),
            };
            // A kind this weir does not know has no body it can rebuild: its
            // readers name the kind.
            let Some(kind) = Kind::parse(&context.get::<String>(0)?) else { return Ok(None) };
            let shape = match context.get_raw(17) {
                ValueRef::Blob(shape) => Some(shape),
                _ => None,
            };
            let row = Row {
                kind,
                call_id: context.get::<CallId>(1)?.0,
                at_ms: context.get(2)?,
                started_ms: context.get(3)?,
                key_id: context.get(4)?,
                member: context.get(5)?,
                team: context.get(6)?,
                model: context.get(7)?,
                category: context.get(8)?,
                tokens: Tokens {
                    input: context.get(9)?,
                    output: context.get(10)?,
                    cache_read: context.get(11)?,
                    cache_write: context.get(12)?,
                    reasoning: context.get(13)?,
                },
                cost_usd: context.get(14)?,
                body: String::new(),
                charged_worst: context.get(15)?,
                served: None,
                stands_alone: false,
            };
            decode(&row, stored, shape).map(Some).map_err(function_error)
        },
    )
}

fn function_error(error: CompactError) -> rusqlite::Error {
    rusqlite::Error::UserFunctionError(Box::new(error))
}

/// `residual` compressed with `shape` as the dictionary; `None` if zstd fails.
fn compress(residual: &[u8], shape: &[u8]) -> Option<Vec<u8>> {
    COMPRESSORS.with_borrow_mut(|compressors| {
        if !compressors.contains_key(shape) {
            if compressors.len() >= CACHED_SHAPES {
                compressors.clear();
            }
            compressors.insert(shape.to_vec(), Compressor::with_dictionary(LEVEL, shape).ok()?);
        }
        compressors.get_mut(shape)?.compress(residual).ok()
    })
}

/// A JSON object's top-level entries in order, each as its key and its
/// value's raw text, read from text without whitespace between them (what
/// `serde_json` writes): the entries with the `"`, `:` and `,` between them
/// and the braces around them are every byte of the text, so an object
/// rebuilt from them is the text. A key with an escape, whitespace where a
/// token is due, or a text that ends early is an error. Values are delimited,
/// not validated: a compact body's text is covered by its hash.
struct Entries<'a> {
    text: &'a str,
    /// Where the next entry's key starts; `None` once the object has ended
    /// (or failed).
    at: Option<usize>,
}

impl<'a> Entries<'a> {
    fn new(text: &'a str) -> Self {
        let at = match text.as_bytes() {
            [b'{', b'}'] => None,
            [b'{', ..] => Some(1),
            _ => Some(0),
        };
        Self { text, at }
    }

    /// The entry at `at`, and where the next starts (`None`: the object ends with it).
    fn entry(&self, at: usize) -> Result<(&'a str, &'a str, Option<usize>), CompactError> {
        let bytes = self.text.as_bytes();
        if at == 0 {
            return Err(malformed("not a JSON object"));
        }
        if bytes.get(at) != Some(&b'"') {
            return Err(malformed("a key is due"));
        }
        let key_end = at
            + 1
            + bytes[at + 1..]
                .iter()
                .position(|&byte| byte == b'"' || byte == b'\\')
                .ok_or(malformed("a key is not closed"))?;
        if bytes[key_end] != b'"' {
            return Err(malformed("a key has an escape"));
        }
        if bytes.get(key_end + 1) != Some(&b':') {
            return Err(malformed("a `:` is due"));
        }
        let value_start = key_end + 2;
        let value_end = value_end(bytes, value_start)?;
        let next = match bytes.get(value_end) {
            Some(b',') => Some(value_end + 1),
            Some(b'}') if value_end + 1 == bytes.len() => None,
            _ => return Err(malformed("a `,` or the object's end is due")),
        };
        Ok((&self.text[at + 1..key_end], &self.text[value_start..value_end], next))
    }
}

impl<'a> Iterator for Entries<'a> {
    type Item = Result<(&'a str, &'a str), CompactError>;

    fn next(&mut self) -> Option<Self::Item> {
        let at = self.at.take()?;
        match self.entry(at) {
            Ok((key, value, next)) => {
                self.at = next;
                Some(Ok((key, value)))
            }
            Err(error) => Some(Err(error)),
        }
    }
}

/// Where the JSON value starting at `start` ends: after its closing quote or
/// bracket, or at the `,` or `}` after a number or literal.
fn value_end(bytes: &[u8], start: usize) -> Result<usize, CompactError> {
    let unclosed = || malformed("a value is not closed");
    match bytes.get(start) {
        None => Err(unclosed()),
        Some(b'"') => string_end(bytes, start + 1).ok_or_else(unclosed),
        Some(b'{' | b'[') => {
            let mut depth = 0_usize;
            let mut at = start;
            while let Some(&byte) = bytes.get(at) {
                at += 1;
                match byte {
                    b'"' => at = string_end(bytes, at).ok_or_else(unclosed)?,
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return Ok(at);
                        }
                    }
                    _ => {}
                }
            }
            Err(unclosed())
        }
        Some(_) => {
            let end =
                start + bytes[start..].iter().position(|&byte| byte == b',' || byte == b'}').ok_or_else(unclosed)?;
            // A number or a literal: no whitespace around it.
            let scalar = |byte: &u8| byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'+' | b'.');
            match end > start && bytes[start..end].iter().all(scalar) {
                true => Ok(end),
                false => Err(malformed("a value is empty, or spaced")),
            }
        }
    }
}

/// After the closing quote of the string whose text starts at `at`. A
/// plain loop: a body's strings are short, and a `memchr` call for each
/// cost `verify` more than it saved.
fn string_end(bytes: &[u8], mut at: usize) -> Option<usize> {
    while let Some(&byte) = bytes.get(at) {
        match byte {
            b'"' => return Some(at + 1),
            b'\\' => at += 2,
            _ => at += 1,
        }
    }
    None
}

fn malformed(what: &'static str) -> CompactError {
    CompactError::Malformed(what)
}

/// `text` as a JSON string, as `serde_json` writes it. Always `true`.
fn write_string(out: &mut Vec<u8>, text: &str) -> bool {
    // serde_json escapes `"`, `\` and control characters only.
    if text.bytes().all(|byte| byte >= 0x20 && byte != b'"' && byte != b'\\') {
        out.push(b'"');
        out.extend_from_slice(text.as_bytes());
        out.push(b'"');
        true
    } else {
        write_json(out, text)
    }
}

/// `value` as `serde_json` writes it. `true`, unless it cannot be written.
fn write_json(out: &mut Vec<u8>, value: &(impl serde::Serialize + ?Sized)) -> bool {
    serde_json::to_writer(out, value).is_ok()
}

/// The last millisecond written with a four-digit year (9999-12-31T23:59:59.999Z).
const LAST_FOUR_DIGIT_YEAR_MS: u64 = 253_402_300_799_999;

/// A time column as the records write it: RFC 3339, milliseconds, UTC, as
/// `humantime::format_rfc3339_millis` writes it (`record::time`). Written
/// here digit by digit: through `fmt` it was a tenth of `verify`'s
/// rebuilding. A time past year 9999 goes through `humantime`. Always `true`.
fn write_time(out: &mut Vec<u8>, ms: i64) -> bool {
    let ms = u64::try_from(ms).unwrap_or(0);
    if ms > LAST_FOUR_DIGIT_YEAR_MS {
        let time = UNIX_EPOCH + Duration::from_millis(ms);
        let _ = write!(out, "\"{}\"", humantime::format_rfc3339_millis(time));
        return true;
    }
    let (secs, millis) = (ms / 1000, ms % 1000);
    let (days, day_secs) = (secs / 86_400, secs % 86_400);
    let (year, month, day) = civil_from_days(days);
    let mut text = *b"\"0000-00-00T00:00:00.000Z\"";
    let mut put = |at: usize, digits: usize, mut value: u64| {
        for place in (at..at + digits).rev() {
            text[place] = b"0123456789"[(value % 10) as usize];
            value /= 10;
        }
    };
    put(1, 4, year);
    put(6, 2, month);
    put(9, 2, day);
    put(12, 2, day_secs / 3_600);
    put(15, 2, day_secs % 3_600 / 60);
    put(18, 2, day_secs % 60);
    put(21, 3, millis);
    out.extend_from_slice(&text);
    true
}

/// The proleptic Gregorian date `days` after 1970-01-01: Howard Hinnant's
/// `civil_from_days`, for days on or after the epoch.
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    let shifted = days + 719_468;
    let era = shifted / 146_097;
    let day_of_era = shifted - era * 146_097;
    let year_of_era = (day_of_era - day_of_era / 1_460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_index = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * month_index + 2) / 5 + 1;
    let month = if month_index < 10 { month_index + 3 } else { month_index - 9 };
    (year_of_era + era * 400 + u64::from(month <= 2), month, day)
}

/// Token counts as `serde_json` writes [`Tokens`] (its fields in order),
/// without `serde`'s machinery. Every field is named, so a field added to
/// `Tokens` fails to compile here. Always `true`.
fn write_tokens(out: &mut Vec<u8>, tokens: &Tokens) -> bool {
    let Tokens { input, output, cache_read, cache_write, reasoning } = *tokens;
    let fields = [
        ("{\"input\":", input),
        (",\"output\":", output),
        (",\"cache_read\":", cache_read),
        (",\"cache_write\":", cache_write),
        (",\"reasoning\":", reasoning),
    ];
    for (name, count) in fields {
        out.extend_from_slice(name.as_bytes());
        write_count(out, count);
    }
    out.push(b'}');
    true
}

/// `count` in decimal, as `serde_json` writes an integer.
fn write_count(out: &mut Vec<u8>, mut count: u64) {
    let mut digits = [0_u8; 20];
    let mut at = digits.len();
    loop {
        at -= 1;
        digits[at] = b"0123456789"[(count % 10) as usize];
        count /= 10;
        if count == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[at..]);
}

#[cfg(test)]
#[path = "compact_tests.rs"]
mod tests;
