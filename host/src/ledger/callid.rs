//! A call id as the file stores it (since schema version 6): an id that is a
//! canonical UUID (lower-case and hyphenated, as `record::new_call_id`
//! makes it) as its 16 bytes, any other id as its text.
//!
//! The id is stored twice per row, in the row and in its entry of the
//! `(started_ms, call_id)` index: as bytes it takes 16 of the text's 36 in
//! each. Only an id that reads back as the same text is stored so (so the
//! body rebuilt from the columns, which the chain's hash covers, is the body
//! written): a UUID in capitals, or an id of the caller's own, stays text.
//! Rows written before version 6 keep their text ids, so every reader takes
//! either form and every lookup by id matches either ([`same_call`]): the two
//! rows of one call may even differ, when a weir of version 5 stored the
//! opening and this one the closing it had left in the log.

use rusqlite::functions::FunctionFlags;
use rusqlite::types::{FromSql, FromSqlError, FromSqlResult, ToSql, ToSqlOutput, Value, ValueRef};
use rusqlite::{Connection, Row};
use uuid::Uuid;
use uuid::fmt::Hyphenated;

/// The SQL function that gives a stored id's other form (see [`register`]).
const TWIN: &str = "ledger_call_id_twin";

/// A call id in the form a new row stores it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Stored<'a> {
    /// A canonical UUID's 16 bytes.
    Uuid([u8; 16]),
    /// Any other id, as its text.
    Text(&'a str),
}

impl<'a> Stored<'a> {
    pub(super) fn of(call_id: &'a str) -> Self {
        uuid_bytes(call_id).map_or(Self::Text(call_id), Self::Uuid)
    }
}

impl ToSql for Stored<'_> {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(match self {
            Self::Uuid(bytes) => ToSqlOutput::Borrowed(ValueRef::Blob(bytes)),
            Self::Text(text) => ToSqlOutput::Borrowed(ValueRef::Text(text.as_bytes())),
        })
    }
}

/// The 16 bytes of `call_id` if it is a canonical UUID: one that its bytes
/// give back as the same text. `None` for any other id.
fn uuid_bytes(call_id: &str) -> Option<[u8; 16]> {
    if call_id.len() != Hyphenated::LENGTH {
        return None;
    }
    let id = Uuid::try_parse(call_id).ok()?;
    let mut text = [0; Hyphenated::LENGTH];
    (id.hyphenated().encode_lower(&mut text).as_bytes() == call_id.as_bytes()).then(|| id.into_bytes())
}

/// A stored id's text, into `into` (cleared first): a text id as it is, a
/// 16-byte one as its canonical UUID. Anything else is not a call id.
pub(super) fn read_into(value: ValueRef<'_>, into: &mut String) -> FromSqlResult<()> {
    into.clear();
    match value {
        ValueRef::Text(text) => {
            into.push_str(std::str::from_utf8(text).map_err(|error| FromSqlError::Other(Box::new(error)))?)
        }
        ValueRef::Blob(bytes) => {
            let bytes = <[u8; 16]>::try_from(bytes)
                .map_err(|_| FromSqlError::InvalidBlobSize { expected_size: 16, blob_size: bytes.len() })?;
            let mut text = [0; Hyphenated::LENGTH];
            into.push_str(Uuid::from_bytes(bytes).hyphenated().encode_lower(&mut text));
        }
        _ => return Err(FromSqlError::InvalidType),
    }
    Ok(())
}

/// Column `at` of `row`, a stored call id, as text into `into` (its
/// allocation kept).
pub(super) fn read_column(row: &Row<'_>, at: usize, into: &mut String) -> rusqlite::Result<()> {
    let value = row.get_ref(at)?;
    read_into(value, into).map_err(|error| match error {
        FromSqlError::InvalidType => rusqlite::Error::InvalidColumnType(at, "call_id".to_owned(), value.data_type()),
        other => rusqlite::Error::FromSqlConversionFailure(at, value.data_type(), Box::new(other)),
    })
}

/// A call id read from the file, as its text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct CallId(pub String);

impl FromSql for CallId {
    fn column_result(value: ValueRef<'_>) -> FromSqlResult<Self> {
        let mut text = String::new();
        read_into(value, &mut text)?;
        Ok(Self(text))
    }
}

/// SQL: whether the call id in `column` is the one `id` (an expression: a
/// parameter, another row's column) holds, in either form. SQLite searches
/// the `(started_ms, call_id)` index once per value of the `IN` list, as it
/// did the one `=` (the plans are held to that by
/// `ledger::tests::a_calls_closing_row_is_looked_up_through_the_index`).
pub(super) fn same_call(column: &str, id: &str) -> String {
    format!("{column} IN ({id}, {TWIN}({id}))")
}

/// Registers [`TWIN`] on `connection`: the other form of a stored id (a
/// canonical UUID's text gives its bytes, 16 bytes their text), NULL for an
/// id that has only one (which then matches nothing more).
pub(super) fn register(connection: &Connection) -> rusqlite::Result<()> {
    connection.create_scalar_function(
        TWIN,
        1,
        FunctionFlags::SQLITE_UTF8 | FunctionFlags::SQLITE_DETERMINISTIC,
        |context| {
            Ok(match context.get_raw(0) {
                ValueRef::Text(text) => {
                    std::str::from_utf8(text).ok().and_then(uuid_bytes).map(|bytes| Value::Blob(bytes.to_vec()))
                }
                value @ ValueRef::Blob(_) => {
                    let mut text = String::new();
                    read_into(value, &mut text).ok().map(|()| Value::Text(text))
                }
                _ => None,
            })
        },
    )
}
