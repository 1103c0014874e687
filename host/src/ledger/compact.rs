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
//! body written, byte for byte: the chain's hash (`store::chain_hash`) is
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
use std::fmt::Write as _;
use std::time::{Duration, UNIX_EPOCH};

use rusqlite::functions::FunctionFlags;
use rusqlite::types::ValueRef;
use rusqlite::{Connection, OptionalExtension, params};
use serde::de::{Deserializer, MapAccess, Visitor};
use serde_json::value::RawValue;
use zstd::bulk::{Compressor, Decompressor};

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
    Parse(serde_json::Error),
    #[error("its columns do not match its body ({0})")]
    Columns(String),
}

/// One column's field in a kind's body: its key, and the JSON text the
/// row's columns give it (`None`: the body has no such field).
struct Field {
    key: &'static str,
    text: fn(&Row) -> Option<String>,
}

const CALL_ID: Field = Field { key: "call_id", text: |row| Some(json_string(&row.call_id)) };
const STARTED_AT: Field = Field { key: "started_at", text: |row| Some(time_text(row.started_ms)) };
const KEY_ID: Field = Field { key: "key_id", text: |row| row.key_id.as_deref().map(json_string) };
const MEMBER: Field = Field { key: "member", text: |row| row.member.as_deref().map(json_string) };
const TEAM: Field = Field { key: "team", text: |row| row.team.as_deref().map(json_string) };
const MODEL: Field = Field { key: "model", text: |row| Some(json_string(&row.model)) };

const OPEN_FIELDS: &[Field] = &[CALL_ID, STARTED_AT, KEY_ID, MEMBER, TEAM, MODEL];

const HOLD_FIELDS: &[Field] = &[
    CALL_ID,
    STARTED_AT,
    Field { key: "held_at", text: |row| Some(time_text(row.at_ms)) },
    KEY_ID,
    MEMBER,
    TEAM,
    MODEL,
    Field { key: "tokens", text: |row| Some(row.tokens.input.to_string()) },
    Field { key: "usd", text: |row| row.cost_usd.map(float_text) },
];

const CLOSE_FIELDS: &[Field] = &[
    CALL_ID,
    STARTED_AT,
    Field { key: "ended_at", text: |row| Some(time_text(row.at_ms)) },
    KEY_ID,
    MEMBER,
    TEAM,
    MODEL,
    Field { key: "usage", text: |row| Some(tokens_text(&row.tokens)) },
    Field { key: "cost_usd", text: |row| row.cost_usd.map(float_text) },
    Field { key: "category", text: |row| row.category.as_deref().map(json_string) },
    Field { key: "charged_worst_case", text: |row| row.charged_worst.then(|| "true".to_owned()) },
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
/// be stored compact.
fn residual(row: &Row) -> Option<String> {
    if fixed_columns_differ(row).is_some() {
        return None;
    }
    let entries = top_level(&row.body).ok()?;
    let fields = fields(row.kind);
    let mut residual = String::with_capacity(row.body.len());
    let mut covered = vec![false; fields.len()];
    // The body rebuilt from these entries with no whitespace has this length:
    // equal to the body's only when the body has none.
    let mut rebuilt_len = 2 + entries.len().saturating_sub(1);
    residual.push('{');
    for (index, (key, value)) in entries.iter().enumerate() {
        rebuilt_len += key.len() + 3 + value.get().len();
        if index > 0 {
            residual.push(',');
        }
        let _ = write!(residual, "\"{key}\":");
        match fields.iter().position(|field| field.key == *key) {
            Some(at) if covered[at] => return None,
            Some(at) if (fields[at].text)(row).as_deref() == Some(value.get()) => {
                covered[at] = true;
                residual.push_str(PLACEHOLDER);
            }
            Some(_) => return None,
            None => residual.push_str(value.get()),
        }
    }
    residual.push('}');
    let uncovered_column = fields.iter().zip(&covered).any(|(field, covered)| !covered && (field.text)(row).is_some());
    (!uncovered_column && rebuilt_len == row.body.len()).then_some(residual)
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
    let Ok(entries) = top_level(residual) else { return String::new() };
    let kept: Vec<String> = entries
        .iter()
        .filter(|(key, _)| !NOT_IN_SHAPES.contains(key))
        .map(|(key, value)| format!("\"{key}\":{}", value.get()))
        .collect();
    format!("{{{}}}", kept.join(","))
}

/// The body `stored` holds, rebuilt with `row`'s columns (its own `body`
/// is not read) and its shape's residual.
pub(super) fn decode(row: &Row, stored: &[u8], shape: Option<&[u8]>) -> Result<String, CompactError> {
    rebuild(row, stored, |frame, size| decompress(frame, shape.ok_or(CompactError::NoShape)?, size))
}

/// A file's shapes, read once, and a decompressor for each: what `verify`'s
/// walk decodes compact bodies with (no lookup of the shape per row).
pub(super) struct ShapeBook {
    shapes: HashMap<i64, (Vec<u8>, Option<Decompressor<'static>>)>,
}

impl ShapeBook {
    /// Every shape `connection` sees now.
    pub(super) fn read(connection: &Connection) -> rusqlite::Result<Self> {
        let mut statement = connection.prepare("SELECT id, residual FROM ledger_shapes")?;
        let shapes = statement
            .query_map([], |row| Ok((row.get::<_, i64>(0)?, (row.get::<_, Vec<u8>>(1)?, None))))?
            .collect::<rusqlite::Result<_>>()?;
        Ok(Self { shapes })
    }

    /// [`decode`] with the shape `shape_id` names.
    pub(super) fn decode(&mut self, row: &Row, stored: &[u8], shape_id: Option<i64>) -> Result<String, CompactError> {
        rebuild(row, stored, |frame, size| {
            let (shape, decompressor) =
                shape_id.and_then(|id| self.shapes.get_mut(&id)).ok_or(CompactError::NoShape)?;
            if decompressor.is_none() {
                *decompressor = Some(Decompressor::with_dictionary(shape).map_err(CompactError::Decompress)?);
            }
            let decompressor = decompressor.as_mut().ok_or(CompactError::NoShape)?;
            decompressor.decompress(frame, size).map_err(CompactError::Decompress)
        })
    }
}

/// The body `stored` holds: its frame decompressed by `decompress` (given
/// the size the frame states, within [`MAX_BODY_BYTES`]), the columns put
/// back in place.
fn rebuild(
    row: &Row,
    stored: &[u8],
    decompress: impl FnOnce(&[u8], usize) -> Result<Vec<u8>, CompactError>,
) -> Result<String, CompactError> {
    let (&format, frame) = stored.split_first().ok_or(CompactError::Empty)?;
    if format != FORMAT_1 {
        return Err(CompactError::Format(format));
    }
    let invalid = |what: &str| CompactError::Decompress(std::io::Error::new(std::io::ErrorKind::InvalidData, what));
    let size = zstd::zstd_safe::get_frame_content_size(frame)
        .ok()
        .flatten()
        .ok_or_else(|| invalid("the frame does not state its size"))?;
    let size = usize::try_from(size).ok().filter(|size| *size <= MAX_BODY_BYTES).ok_or_else(|| invalid("too large"))?;
    let residual = decompress(frame, size)?;
    let residual = std::str::from_utf8(&residual)
        .map_err(|error| CompactError::Decompress(std::io::Error::new(std::io::ErrorKind::InvalidData, error)))?;
    let entries = top_level(residual).map_err(CompactError::Parse)?;
    if let Some(column) = fixed_columns_differ(row) {
        return Err(CompactError::Columns(format!("{column} has a value its kind does not record")));
    }
    let fields = fields(row.kind);
    let mut placed = vec![false; fields.len()];
    let mut body = String::with_capacity(residual.len() + 160);
    body.push('{');
    for (index, (key, value)) in entries.iter().enumerate() {
        if index > 0 {
            body.push(',');
        }
        let _ = write!(body, "\"{key}\":");
        match fields.iter().position(|field| field.key == *key) {
            Some(at) if placed[at] || value.get() != PLACEHOLDER => {
                return Err(CompactError::Columns(format!("`{key}` is stored twice")));
            }
            Some(at) => {
                let text = (fields[at].text)(row)
                    .ok_or_else(|| CompactError::Columns(format!("`{key}` has no column value")))?;
                placed[at] = true;
                body.push_str(&text);
            }
            None => body.push_str(value.get()),
        }
    }
    body.push('}');
    if let Some((field, _)) =
        fields.iter().zip(&placed).find(|(field, placed)| !**placed && (field.text)(row).is_some())
    {
        return Err(CompactError::Columns(format!("the body has no place for `{}`", field.key)));
    }
    Ok(body)
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
                call_id: context.get(1)?,
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

/// A frame [`compress`] made with `shape`, of `size` bytes.
fn decompress(frame: &[u8], shape: &[u8], size: usize) -> Result<Vec<u8>, CompactError> {
    DECOMPRESSORS.with_borrow_mut(|decompressors| {
        if !decompressors.contains_key(shape) {
            if decompressors.len() >= CACHED_SHAPES {
                decompressors.clear();
            }
            let decompressor = Decompressor::with_dictionary(shape).map_err(CompactError::Decompress)?;
            decompressors.insert(shape.to_vec(), decompressor);
        }
        let decompressor = decompressors.get_mut(shape).ok_or(CompactError::NoShape)?;
        decompressor.decompress(frame, size).map_err(CompactError::Decompress)
    })
}

/// A JSON object's top-level entries in order, each value as its raw text.
fn top_level(text: &str) -> Result<Vec<(&str, &RawValue)>, serde_json::Error> {
    let mut deserializer = serde_json::Deserializer::from_str(text);
    let entries = (&mut deserializer).deserialize_map(Entries)?;
    deserializer.end()?;
    Ok(entries)
}

struct Entries;

impl<'de> Visitor<'de> for Entries {
    type Value = Vec<(&'de str, &'de RawValue)>;

    fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut entries = Vec::with_capacity(map.size_hint().unwrap_or(32));
        while let Some(entry) = map.next_entry::<&'de str, &'de RawValue>()? {
            entries.push(entry);
        }
        Ok(entries)
    }
}

fn json_string(text: &str) -> String {
    serde_json::to_string(text).unwrap_or_default()
}

fn float_text(value: f64) -> String {
    serde_json::to_string(&value).unwrap_or_default()
}

fn tokens_text(tokens: &Tokens) -> String {
    serde_json::to_string(tokens).unwrap_or_default()
}

/// A time column as the records write it (RFC 3339, milliseconds, UTC).
fn time_text(ms: i64) -> String {
    let since = Duration::from_millis(u64::try_from(ms).unwrap_or(0));
    format!("\"{}\"", humantime::format_rfc3339_millis(UNIX_EPOCH + since))
}

#[cfg(test)]
#[path = "compact_tests.rs"]
mod tests;
