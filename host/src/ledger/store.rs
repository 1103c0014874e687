//! The ledger's file: one SQLite table of rows, append-only by construction.
//!
//! The code only ever INSERTs, and triggers abort any UPDATE or DELETE, so a
//! row once committed stays as written. Each row's `hash` covers the previous
//! row's hash, its `seq`, its kind and its body: editing, removing or
//! reordering a row breaks the chain that [`super::Reader::verify`] walks.
//! The other columns are copies of the body's fields, indexed for filters.

use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rusqlite::types::{ToSqlOutput, ValueRef};
use rusqlite::{Connection, OpenFlags, OptionalExtension, TransactionBehavior, params};
use serde::ser::SerializeTuple;
use serde::{Deserialize, Serialize, Serializer};
use sha2::{Digest, Sha256};

use super::callid::Stored;
use super::rollup::{Rollup, Served};
use super::rollup_store;
use crate::catalog::LedgerSync;
use crate::record::{CallOpening, CallRecord, HoldRecord, Tokens};

/// The schema this code writes and reads (`PRAGMA user_version`). A version 1
/// file (no hold rows, no `charged_worst`), 2 (no roll-ups) or 3 (no day
/// level) is migrated when a writer opens it; a reader refuses it until then.
/// (Versions 3 and 4 keep the rows as 2 wrote them and add roll-ups: a weir
/// that writes an older version refuses the file, since it would append rows
/// the roll-ups miss. Version 5 adds compact rows (see `compact`) and the
/// segments' table (see `segments`), which an older weir cannot read: a
/// version 4 file is version 5 as it is, and its rows stay as written.
/// Version 6 stores a call id that is a UUID as its 16 bytes (see `callid`),
/// which an older weir would misread: a version 5 file is version 6 as it
/// is, its rows keep their text ids, and a reader reads it unchanged.
/// Version 7 stores a row's `kind` as its code ([`Kind::code`]) and its
/// `at_ms` as NULL when it equals `started_ms` (see [`KIND_SQL`], [`AT_SQL`]),
/// which an older weir would misread: a writer upgrades a version 6 (or 5, 4)
/// file by loosening the two columns' declarations ([`loosen_columns`]), its
/// rows stay as written, and a reader reads it unchanged.)
pub(super) const SCHEMA_VERSION: i64 = 7;

/// The oldest version a reader reads as it is (see [`SCHEMA_VERSION`]).
pub(super) const OLDEST_READ: i64 = 5;

/// The first row's `prev_hash`.
pub(super) const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// A writer waiting for another process's transaction gives up after this.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS ledger (
    seq INTEGER PRIMARY KEY,
    kind NOT NULL CHECK (kind IN (0, 1, 2, 'open', 'close', 'hold')),
    call_id TEXT NOT NULL,
    at_ms INTEGER,
    started_ms INTEGER NOT NULL,
    key_id TEXT,
    member TEXT,
    team TEXT,
    model TEXT NOT NULL,
    category TEXT,
    input INTEGER NOT NULL,
    output INTEGER NOT NULL,
    cache_read INTEGER NOT NULL,
    cache_write INTEGER NOT NULL,
    reasoning INTEGER NOT NULL,
    cost_usd REAL,
    body TEXT NOT NULL,
    prev_hash TEXT NOT NULL,
    hash TEXT NOT NULL,
    charged_worst INTEGER NOT NULL DEFAULT 0 CHECK (charged_worst IN (0, 1)),
    shape_id INTEGER
);
CREATE TRIGGER IF NOT EXISTS ledger_no_update BEFORE UPDATE ON ledger
    BEGIN SELECT RAISE(ABORT, 'the ledger is append-only: rows are never updated'); END;
CREATE TRIGGER IF NOT EXISTS ledger_no_delete BEFORE DELETE ON ledger
    BEGIN SELECT RAISE(ABORT, 'the ledger is append-only: rows are never deleted'); END;
";

/// The one index, made (and the two it replaced dropped) each time a writer
/// opens the file, beside the log's bookkeeping (`ledger_applied`: how many
/// lines of each log segment the file holds; see `log`) and the anchor's
/// (`ledger_anchored`: from which row the chain's head is anchored; see
/// `anchor`). Time filters read it
/// by `started_ms`, and a call's other rows are found by `(started_ms,
/// call_id)`: every row of a call carries the call's start time. It replaced
/// an index on `(call_id, kind)`: a closing row lands among the ids of the
/// calls still open, not after the last one, so that index split pages in the
/// middle (traced commits rewrote up to four of its leaves and their parent);
/// dropping it measured 1.04–1.05× the gateway's calls per second with the
/// ledger on at 32 callers (paired runs, 2026-12-02).
const INDEXES: &str = "
DROP INDEX IF EXISTS ledger_started;
DROP INDEX IF EXISTS ledger_call;
CREATE INDEX IF NOT EXISTS ledger_started_call ON ledger (started_ms, call_id);
CREATE TABLE IF NOT EXISTS ledger_applied (segment TEXT PRIMARY KEY, lines INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS ledger_anchored (id INTEGER PRIMARY KEY CHECK (id = 1), since_seq INTEGER NOT NULL);
";

/// The columns of version 1, in order (version 2 adds `charged_worst`).
const VERSION_1_COLUMNS: &str = "seq, kind, call_id, at_ms, started_ms, key_id, member, team, model, category,
    input, output, cache_read, cache_write, reasoning, cost_usd, body, prev_hash, hash";

/// Version 1 to 2: hold rows, and `charged_worst`. SQLite cannot change a CHECK in place, so the
/// rows move, unchanged and in order, into a table created by [`SCHEMA`]
/// (the old one is renamed first, and dropped once copied: its indexes and
/// triggers go with it, and dropping a table fires no DELETE trigger).
const FROM_VERSION_1: &str = "
ALTER TABLE ledger RENAME TO ledger_version_1;
DROP TRIGGER IF EXISTS ledger_no_update;
DROP TRIGGER IF EXISTS ledger_no_delete;
";

/// Which end of a call a row records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(super) enum Kind {
    /// Body: a [`CallOpening`].
    Open,
    /// Body: a [`CallRecord`].
    Close,
    /// Body: a [`HoldRecord`].
    Hold,
}

impl Kind {
    pub(super) fn as_str(self) -> &'static str {
        match self {
            Self::Open => "open",
            Self::Close => "close",
            Self::Hold => "hold",
        }
    }

    pub(super) fn parse(text: &str) -> Option<Self> {
        match text {
            "open" => Some(Self::Open),
            "close" => Some(Self::Close),
            "hold" => Some(Self::Hold),
            _ => None,
        }
    }

    /// The kind as a row written since schema version 7 stores it: SQLite
    /// stores the integers 0 and 1 in no byte at all (a call's opening and
    /// closing rows), where the names took 9 bytes a call.
    pub(super) fn code(self) -> i64 {
        match self {
            Self::Open => 0,
            Self::Close => 1,
            Self::Hold => 2,
        }
    }

    /// The kind a stored `kind` value names: a code (version 7) or a name
    /// (before); `None` for any other value.
    pub(super) fn of_stored(value: ValueRef<'_>) -> Option<Self> {
        match value {
            ValueRef::Integer(0) => Some(Self::Open),
            ValueRef::Integer(1) => Some(Self::Close),
            ValueRef::Integer(2) => Some(Self::Hold),
            ValueRef::Text(text) => std::str::from_utf8(text).ok().and_then(Self::parse),
            _ => None,
        }
    }

    /// SQL that holds when `column` (a row's `kind`, as `ledger.kind` or
    /// through an alias) is this kind, in either of its stored forms.
    pub(super) fn is_sql(self, column: &str) -> String {
        format!("({column} = {} OR {column} = '{}')", self.code(), self.as_str())
    }
}

/// A stored `kind` as text: its name, whether stored as its code or its
/// name; any other value as SQLite writes it, so that readers name a kind
/// they do not know. Used in the SELECT lists of rows read as text.
macro_rules! kind_sql {
    () => {
        "(CASE kind WHEN 0 THEN 'open' WHEN 1 THEN 'close' WHEN 2 THEN 'hold' ELSE CAST(kind AS TEXT) END)"
    };
}

/// A row's `at_ms`: stored NULL since version 7 when it equals `started_ms`
/// (every opening row: 6 bytes a call).
macro_rules! at_sql {
    () => {
        "coalesce(at_ms, started_ms)"
    };
}

/// [`kind_sql`]'s SQL.
pub(super) const KIND_SQL: &str = kind_sql!();

/// [`at_sql`]'s SQL.
pub(super) const AT_SQL: &str = at_sql!();

/// A row before it has a place in the chain: the body and the columns copied
/// from it. The columns serialize as a log line's head (see `log`), the body
/// verbatim after them.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub(super) struct Row {
    pub kind: Kind,
    pub call_id: String,
    pub at_ms: i64,
    pub started_ms: i64,
    pub key_id: Option<String>,
    pub member: Option<String>,
    pub team: Option<String>,
    pub model: String,
    pub category: Option<String>,
    pub tokens: Tokens,
    pub cost_usd: Option<f64>,
    #[serde(skip)]
    pub body: String,
    /// A closing row whose budgets were charged the hold's worst case
    /// ([`CallRecord::charged_worst_case`]).
    pub charged_worst: bool,
    /// A closing row's provider and last attempt's deployment (roll-up
    /// dims the columns lack), taken from the record as the row is made so
    /// that the fill does not parse the body a second time. `None` in a row
    /// read back from the file, or from a log line an older weir wrote: the
    /// roll-ups then read them from the body. Not a column.
    #[serde(default)]
    pub served: Option<Served>,
    /// The writer knows that no earlier row of the call changes this row's
    /// roll-up change ([`Rollup::apply`]): a hold of a call still running (it
    /// has not closed), or the closing row of a call that held nothing. The
    /// fill then skips the lookup of the call's earlier rows. `false` when
    /// not known (every row read back, and rows made outside the ledger's
    /// observer). Not a column.
    #[serde(default)]
    pub stands_alone: bool,
}

/// A log line's head: the columns as one JSON array, in the order `Row`
/// declares them (without the body), which the derived `Deserialize` reads as
/// it reads the object with field names that heads were before: ~120 bytes
/// instead of ~300, serialized and written for every row. A head an older
/// weir wrote ends before `served` and `stands_alone`: they read as their
/// defaults (not known).
impl Serialize for Row {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let tokens = &self.tokens;
        let tokens = (tokens.input, tokens.output, tokens.cache_read, tokens.cache_write, tokens.reasoning);
        let served = self.served.as_ref().map(|served| (&served.provider, &served.deployment));
        let mut columns = serializer.serialize_tuple(14)?;
        columns.serialize_element(&self.kind)?;
        columns.serialize_element(&self.call_id)?;
        columns.serialize_element(&self.at_ms)?;
        columns.serialize_element(&self.started_ms)?;
        columns.serialize_element(&self.key_id)?;
        columns.serialize_element(&self.member)?;
        columns.serialize_element(&self.team)?;
        columns.serialize_element(&self.model)?;
        columns.serialize_element(&self.category)?;
        columns.serialize_element(&tokens)?;
        columns.serialize_element(&self.cost_usd)?;
        columns.serialize_element(&self.charged_worst)?;
        columns.serialize_element(&served)?;
        columns.serialize_element(&self.stands_alone)?;
        columns.end()
    }
}

impl Row {
    pub(super) fn opening(opening: &CallOpening) -> serde_json::Result<Self> {
        Ok(Self { body: serde_json::to_string(opening)?, ..Self::opening_columns(opening) })
    }

    /// [`Self::opening`] without its body (empty): the columns alone, as
    /// `verify` compares them with a stored row's.
    pub(super) fn opening_columns(opening: &CallOpening) -> Self {
        let started_ms = unix_ms(opening.started_at);
        Self {
            kind: Kind::Open,
            call_id: opening.call_id.clone(),
            at_ms: started_ms,
            started_ms,
            key_id: opening.who.key_id.clone(),
            member: opening.who.member.clone(),
            team: opening.who.team.clone(),
            model: opening.model.clone(),
            category: None,
            tokens: Tokens::default(),
            cost_usd: None,
            body: String::new(),
            charged_worst: false,
            served: None,
            stands_alone: false,
        }
    }

    /// A hold's row: its tokens are the worst case held (all kinds together,
    /// in the `input` column), its cost the worst case priced.
    pub(super) fn hold(hold: &HoldRecord) -> serde_json::Result<Self> {
        Ok(Self { body: serde_json::to_string(hold)?, ..Self::hold_columns(hold) })
    }

    /// [`Self::hold`] without its body (empty).
    pub(super) fn hold_columns(hold: &HoldRecord) -> Self {
        Self {
            kind: Kind::Hold,
            call_id: hold.call_id.clone(),
            at_ms: unix_ms(hold.held_at),
            started_ms: unix_ms(hold.started_at),
            key_id: hold.who.key_id.clone(),
            member: hold.who.member.clone(),
            team: hold.who.team.clone(),
            model: hold.model.clone(),
            category: None,
            tokens: Tokens { input: hold.tokens, ..Tokens::default() },
            cost_usd: hold.usd,
            body: String::new(),
            charged_worst: false,
            served: None,
            stands_alone: false,
        }
    }

    pub(super) fn closing(record: &CallRecord) -> serde_json::Result<Self> {
        Ok(Self { body: encode_body(record)?, ..Self::closing_columns(record) })
    }

    /// [`Self::closing`] without its body (empty).
    pub(super) fn closing_columns(record: &CallRecord) -> Self {
        Self {
            kind: Kind::Close,
            call_id: record.call_id.clone(),
            at_ms: unix_ms(record.ended_at),
            started_ms: unix_ms(record.started_at),
            key_id: record.who.key_id.clone(),
            member: record.who.member.clone(),
            team: record.who.team.clone(),
            model: record.model.clone(),
            category: Some(record.category.clone()),
            tokens: record.usage,
            cost_usd: record.cost_usd,
            body: String::new(),
            charged_worst: record.charged_worst_case,
            served: Some(Served::of_record(record)),
            stands_alone: false,
        }
    }
}

/// Room for a closing record's JSON (a quick call's is ~800 bytes):
/// `serde_json::to_string` starts at 128 and grew it three times per record.
const BODY_CAPACITY: usize = 1024;

fn encode_body(record: &CallRecord) -> serde_json::Result<String> {
    let mut body = Vec::with_capacity(BODY_CAPACITY);
    serde_json::to_writer(&mut body, record)?;
    // serde_json writes UTF-8 only: the lossy copy is never made.
    Ok(String::from_utf8(body).unwrap_or_else(|error| String::from_utf8_lossy(error.as_bytes()).into_owned()))
}

/// Milliseconds since the Unix epoch (0 for a time before it).
pub(super) fn unix_ms(time: SystemTime) -> i64 {
    time.duration_since(UNIX_EPOCH).map_or(0, |since| i64::try_from(since.as_millis()).unwrap_or(i64::MAX))
}

/// [`chain_digest`] as lower-case hex, for the tests' rows: the ledger
/// stores the digest's bytes, and `verify` compares its own digest with a
/// stored hash's text through [`is_hex_of`].
#[cfg(test)]
pub(super) fn chain_hash(prev_hash: &str, seq: i64, kind: &str, body: &[u8]) -> String {
    hex_of(&chain_digest(prev_hash, seq, kind, body))
}

/// `bytes` as lower-case hex. `hex::encode` goes through a `char` iterator
/// collected into a `String`, which was a twentieth of `verify`'s time.
pub(super) fn hex_of(bytes: &[u8]) -> String {
    let mut text = String::with_capacity(bytes.len() * 2);
    push_hex(&mut text, bytes);
    text
}

const HEX_DIGITS: &[u8; 16] = b"0123456789abcdef";

/// `bytes` as lower-case hex, after `text`: `verify`'s walk reads each
/// row's hash into the string it read the last row's into.
pub(super) fn push_hex(text: &mut String, bytes: &[u8]) {
    for &byte in bytes {
        text.push(char::from(HEX_DIGITS[usize::from(byte >> 4)]));
        text.push(char::from(HEX_DIGITS[usize::from(byte & 0xf)]));
    }
}

/// Whether `text` is `bytes` in lower-case hex ([`hex_of`]), without
/// writing it out: `verify` compares every row's stored hash with the one
/// it computes.
pub(super) fn is_hex_of(text: &str, bytes: &[u8]) -> bool {
    text.len() == bytes.len() * 2
        && text
            .as_bytes()
            .chunks_exact(2)
            .zip(bytes)
            .all(|(pair, &byte)| pair == [HEX_DIGITS[usize::from(byte >> 4)], HEX_DIGITS[usize::from(byte & 0xf)]])
}

/// A row's hash, `sha256(prev_hash "\n" seq "\n" kind "\n" body)`: the 32
/// bytes a row written since schema version 5 stores.
pub(super) fn chain_digest(prev_hash: &str, seq: i64, kind: &str, body: &[u8]) -> [u8; 32] {
    let mut hasher = Sha256::new();
    hasher.update(prev_hash.as_bytes());
    hasher.update(b"\n");
    let mut digits = [0_u8; 20];
    hasher.update(decimal(seq, &mut digits));
    hasher.update(b"\n");
    hasher.update(kind.as_bytes());
    hasher.update(b"\n");
    hasher.update(body);
    hasher.finalize().into()
}

/// `value` in decimal, written at the end of `digits` (as `to_string`
/// writes it, without allocating: `verify` hashes every row's `seq`).
fn decimal(value: i64, digits: &mut [u8; 20]) -> &[u8] {
    let mut rest = value.unsigned_abs();
    let mut at = digits.len();
    loop {
        at -= 1;
        digits[at] = b'0' + (rest % 10) as u8;
        rest /= 10;
        if rest == 0 {
            break;
        }
    }
    if value < 0 {
        at -= 1;
        digits[at] = b'-';
    }
    &digits[at..]
}

/// A row's `hash` as lower-case hex, in SQL: a row written since version 5
/// stores the 32 bytes, an older one the hex text.
pub(super) const HASH_SQL: &str = "(CASE typeof(hash) WHEN 'blob' THEN lower(hex(hash)) ELSE hash END)";

/// A row's body as JSON text, in SQL: a compact body rebuilt from its
/// columns (see `compact`; the function is registered on every connection
/// the ledger opens), a text body as stored.
pub const BODY_SQL: &str = concat!(
    "ledger_body(",
    kind_sql!(),
    ", call_id, ",
    at_sql!(),
    ", started_ms, key_id, member, team, model, category,
    input, output, cache_read, cache_write, reasoning, cost_usd, charged_worst, body,
    (SELECT residual FROM ledger_shapes WHERE id = shape_id))"
);

/// Why the ledger file could not be opened or written.
#[derive(Debug, thiserror::Error)]
pub(super) enum StoreError {
    #[error("cannot create the ledger's folder {path}: {source}")]
    Folder { path: String, source: std::io::Error },
    #[error("cannot create the ledger file {path}: {source}")]
    File { path: String, source: std::io::Error },
    #[error("{0}")]
    Sqlite(#[from] rusqlite::Error),
    #[error("the ledger file has schema version {0}, newer than this weir's {SCHEMA_VERSION}")]
    Schema(i64),
    #[error(
        "the ledger file's table is not declared as this weir upgrades it to schema version {SCHEMA_VERSION}: \
         `{0}` is not in its declaration"
    )]
    Declaration(&'static str),
}

/// Opens (creating when missing) the file for writing: WAL, the sync level,
/// the busy timeout, the size cap, and the schema.
pub(super) fn open_writer(path: &Path, sync: LedgerSync, max_bytes: Option<u64>) -> Result<Connection, StoreError> {
    if let Some(folder) = path.parent().filter(|folder| !folder.as_os_str().is_empty()) {
        super::modes::create_folder(folder)
            .map_err(|source| StoreError::Folder { path: folder.display().to_string(), source })?;
    }
    super::modes::prepare_database(path)
        .map_err(|source| StoreError::File { path: path.display().to_string(), source })?;
    let mut connection = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    connection.busy_timeout(BUSY_TIMEOUT)?;
    let _mode: String = connection.query_row("PRAGMA journal_mode = WAL", [], |row| row.get(0))?;
    let synchronous = match sync {
        LedgerSync::Normal => "NORMAL",
        LedgerSync::Full => "FULL",
    };
    connection.pragma_update(None, "synchronous", synchronous)?;
    if let Some(max_bytes) = max_bytes {
        let page_size: u64 = connection.query_row("PRAGMA page_size", [], |row| row.get(0))?;
        let pages = (max_bytes / page_size.max(1)).max(1);
        let _pages: u64 = connection.query_row(&format!("PRAGMA max_page_count = {pages}"), [], |row| row.get(0))?;
    }
    rollup_store::register_functions(&connection)?;
    super::compact::register(&connection)?;
    super::callid::register(&connection)?;
    migrate(&mut connection)?;
    // This connection only writes typed rows (a `Kind`, a bool), so it skips
    // the CHECKs that guard the file against other writers: the three-value
    // `kind IN (...)` check built and dropped an ephemeral table on every insert.
    connection.pragma_update(None, "ignore_check_constraints", true)?;
    Ok(connection)
}

/// Creates the schema in a new file, or migrates a version 1, 2 or 3 file
/// (inside a write transaction, so two processes starting together do not
/// both do it), and refuses a file of a newer version; then sees to the
/// [`INDEXES`]. A file without roll-ups, or without their day level, gets
/// them all built afresh from its rows ([`rollup_store::build_afresh`]: one
/// walk of its holds and closings).
fn migrate(connection: &mut Connection) -> Result<(), StoreError> {
    let transaction = connection.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let version: i64 = transaction.query_row("PRAGMA user_version", [], |row| row.get(0))?;
    match version {
        0 => transaction.execute_batch(SCHEMA)?,
        1 => {
            transaction.execute_batch(FROM_VERSION_1)?;
            transaction.execute_batch(SCHEMA)?;
            transaction.execute_batch(&format!(
                "INSERT INTO ledger ({VERSION_1_COLUMNS}) SELECT {VERSION_1_COLUMNS} FROM ledger_version_1 ORDER BY seq;
                 DROP TABLE ledger_version_1;"
            ))?;
        }
        2..=6 | SCHEMA_VERSION => {}
        other => return Err(StoreError::Schema(other)),
    }
    add_shape_column(&transaction)?;
    if version != SCHEMA_VERSION {
        loosen_columns(&transaction)?;
    }
    transaction.execute_batch(INDEXES)?;
    transaction.execute_batch(super::compact::SCHEMA)?;
    super::segments::install(&transaction)?;
    transaction.execute_batch(rollup_store::SCHEMA)?;
    if (1..=3).contains(&version) {
        let started = std::time::Instant::now();
        let rows = rollup_store::build_afresh(&transaction)?;
        let elapsed_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        tracing::info!(rows, elapsed_ms, "built the ledger's roll-ups from its rows");
    }
    if version != SCHEMA_VERSION {
        transaction.pragma_update(None, "user_version", SCHEMA_VERSION)?;
    }
    transaction.commit()?;
    Ok(())
}

/// How versions 1 to 6 declare `kind` and `at_ms`, and how version 7 does.
const KIND_BEFORE_7: &str = "kind TEXT NOT NULL CHECK (kind IN ('open', 'close', 'hold'))";
const KIND_SINCE_7: &str = "kind NOT NULL CHECK (kind IN (0, 1, 2, 'open', 'close', 'hold'))";
const AT_BEFORE_7: &str = "at_ms INTEGER NOT NULL,";
const AT_SINCE_7: &str = "at_ms INTEGER,";

/// Declares an older file's `kind` and `at_ms` as version 7 does: `kind`
/// without the TEXT affinity (which would store a code as its digit's text)
/// and taking codes, `at_ms` taking NULL. Only the table's declaration
/// changes, in place (SQLite's documented `writable_schema` procedure for
/// constraints, with the schema's version raised so that other connections
/// read it anew): no row is rewritten, and the old rows meet the new
/// declaration as they are. A file whose table is declared otherwise is
/// refused, naming what was not found.
fn loosen_columns(connection: &Connection) -> Result<(), StoreError> {
    let declared = ledger_declaration(connection)?;
    if declared.contains(KIND_SINCE_7) && declared.contains(AT_SINCE_7) {
        return Ok(());
    }
    for expected in [KIND_BEFORE_7, AT_BEFORE_7] {
        if !declared.contains(expected) {
            return Err(StoreError::Declaration(expected));
        }
    }
    let loosened = declared.replace(KIND_BEFORE_7, KIND_SINCE_7).replace(AT_BEFORE_7, AT_SINCE_7);
    Ok(redeclare_ledger(connection, &loosened)?)
}

/// The `CREATE TABLE` statement the file declares its `ledger` table with.
fn ledger_declaration(connection: &Connection) -> rusqlite::Result<String> {
    connection.query_row("SELECT sql FROM sqlite_schema WHERE type = 'table' AND name = 'ledger'", [], |row| row.get(0))
}

/// Declares the `ledger` table as `declared` without rewriting a row:
/// SQLite's documented `writable_schema` procedure, with the schema's
/// version raised so that other connections read it anew (and
/// `writable_schema` reset whether or not the change went in).
fn redeclare_ledger(connection: &Connection, declared: &str) -> rusqlite::Result<()> {
    let schema_version: i64 = connection.query_row("PRAGMA schema_version", [], |row| row.get(0))?;
    connection.pragma_update(None, "writable_schema", true)?;
    let updated = connection
        .execute("UPDATE sqlite_schema SET sql = ?1 WHERE type = 'table' AND name = 'ledger'", [declared])
        .and_then(|_| connection.pragma_update(None, "schema_version", schema_version + 1));
    connection.execute_batch("PRAGMA writable_schema = RESET")?;
    updated
}

/// Gives a file of version 4 or older the `shape_id` column (see
/// `compact`): its rows read it as NULL, stored as they were.
fn add_shape_column(connection: &Connection) -> Result<(), rusqlite::Error> {
    let present: bool = connection.query_row(
        "SELECT EXISTS (SELECT 1 FROM pragma_table_info('ledger') WHERE name = 'shape_id')",
        [],
        |row| row.get(0),
    )?;
    if !present {
        connection.execute_batch("ALTER TABLE ledger ADD COLUMN shape_id INTEGER")?;
    }
    Ok(())
}

/// One row's insert, as [`append`] runs it.
const INSERT: &str = "INSERT INTO ledger (seq, kind, call_id, at_ms, started_ms, key_id, member, team, model, category,
        input, output, cache_read, cache_write, reasoning, cost_usd, body, prev_hash, hash, charged_worst, shape_id)
    VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21)";

/// Rows of one log segment, from its line `first_line` on (`None`: a line
/// that did not parse, counted and left out).
pub(super) struct Run<'a> {
    pub segment: &'a str,
    pub first_line: u64,
    pub rows: Vec<Option<&'a Row>>,
}

/// What [`append_logged`] did: the rows it inserted, and the chain's head
/// after them (its last row's `seq` and `hash`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Filled {
    pub rows: usize,
    pub head: (i64, String),
}

/// Appends the lines of `runs` the file does not hold yet (by each segment's
/// count in `ledger_applied`, raised in the same transaction), in one
/// transaction rolled back when any of it fails.
/// The chain's end is read inside it: other processes may append to the same
/// file, so no hash is remembered between batches. BEGIN and COMMIT are
/// cached statements, where a `rusqlite::Transaction` prepares and finalizes
/// both for every batch.
pub(super) fn append_logged<'a>(
    connection: &Connection,
    runs: impl IntoIterator<Item = Run<'a>>,
) -> Result<Filled, rusqlite::Error> {
    append_logged_with(connection, runs, Append::FULL)
}

/// How [`append_logged_with`] writes: what the gateway does ([`Self::FULL`]),
/// or, for the benchmark's comparisons only (`bench`), without the roll-ups'
/// upkeep or with every body stored as text (the format before compact rows).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Append {
    pub keep_rollups: bool,
    pub compact: bool,
}

impl Append {
    pub(super) const FULL: Self = Self { keep_rollups: true, compact: true };
}

/// [`append_logged`], written as `how` says.
pub(super) fn append_logged_with<'a>(
    connection: &Connection,
    runs: impl IntoIterator<Item = Run<'a>>,
    how: Append,
) -> Result<Filled, rusqlite::Error> {
    connection.prepare_cached("BEGIN IMMEDIATE")?.execute([])?;
    let appended = insert_runs(connection, runs, how)
        .and_then(|inserted| connection.prepare_cached("COMMIT")?.execute([]).map(|_| inserted));
    if appended.is_err() && !connection.is_autocommit() {
        // The writer answers every row of the batch with the error: none may stay.
        let _ = connection.execute_batch("ROLLBACK");
    }
    appended
}

/// Inserts what `runs` add after the chain's end, and their change to the
/// roll-ups, inside [`append_logged`]'s transaction.
fn insert_runs<'a>(
    connection: &Connection,
    runs: impl IntoIterator<Item = Run<'a>>,
    how: Append,
) -> Result<Filled, rusqlite::Error> {
    let keep_rollups = how.keep_rollups;
    let (mut seq, mut prev_hash) = chain_end(connection)?;
    let mut insert = connection.prepare_cached(INSERT)?;
    let mut applied_lines = connection.prepare_cached("SELECT lines FROM ledger_applied WHERE segment = ?1")?;
    let mut set_applied = connection.prepare_cached(
        "INSERT INTO ledger_applied (segment, lines) VALUES (?1, ?2)
         ON CONFLICT (segment) DO UPDATE SET lines = excluded.lines",
    )?;
    let mut inserted = 0;
    let mut rollup = Rollup::default();
    let mut shapes = how.compact.then(super::compact::Shapes::default);
    for run in runs {
        let applied: u64 = applied_lines.query_row([run.segment], |row| row.get(0)).optional()?.unwrap_or(0);
        let end = run.first_line + run.rows.len() as u64;
        if end <= applied {
            continue;
        }
        let skip = usize::try_from(applied.saturating_sub(run.first_line)).unwrap_or(usize::MAX);
        for row in run.rows.iter().skip(skip).flatten() {
            seq += 1;
            let earlier = match keep_rollups && !row.stands_alone {
                true => rollup_store::earlier(connection, row, seq)?,
                false => Vec::new(),
            };
            let stored = match &mut shapes {
                Some(shapes) => shapes.encode(connection, row)?,
                None => None,
            };
            prev_hash = insert_row(&mut insert, seq, &prev_hash, row, stored)?;
            if keep_rollups {
                rollup.apply(row, &earlier);
            }
            inserted += 1;
        }
        set_applied.execute(params![run.segment, end])?;
    }
    rollup_store::write(connection, &rollup)?;
    Ok(Filled { rows: inserted, head: (seq, prev_hash) })
}

/// Inserts `row` as `seq` after `prev_hash`; returns its hash. The row's
/// `prev_hash` is stored empty: it is the row before's `hash` (a row of
/// schema version 4 or older stores it again), its hash as 32 bytes, its
/// call id as 16 bytes when it is a UUID (see `callid`), its kind as its
/// code and its `at_ms` as NULL when it is `started_ms` (see [`KIND_SQL`]).
/// The body is stored compact (`compact`: the stored form and its shape)
/// where it can be, else as text.
fn insert_row(
    insert: &mut rusqlite::CachedStatement<'_>,
    seq: i64,
    prev_hash: &str,
    row: &Row,
    compact: Option<(i64, Vec<u8>)>,
) -> Result<String, rusqlite::Error> {
    let digest = chain_digest(prev_hash, seq, row.kind.as_str(), row.body.as_bytes());
    let (body, shape_id) = match &compact {
        Some((shape_id, stored)) => (ToSqlOutput::Borrowed(ValueRef::Blob(stored)), Some(*shape_id)),
        None => (ToSqlOutput::Borrowed(ValueRef::Text(row.body.as_bytes())), None),
    };
    insert.execute(params![
        seq,
        row.kind.code(),
        Stored::of(&row.call_id),
        (row.at_ms != row.started_ms).then_some(row.at_ms),
        row.started_ms,
        row.key_id,
        row.member,
        row.team,
        row.model,
        row.category,
        row.tokens.input,
        row.tokens.output,
        row.tokens.cache_read,
        row.tokens.cache_write,
        row.tokens.reasoning,
        row.cost_usd,
        body,
        "",
        digest.as_slice(),
        row.charged_worst,
        shape_id,
    ])?;
    Ok(hex_of(&digest))
}

/// The last row's `seq` and `hash` (the last released row's when the file
/// holds none), or `(0, GENESIS)` for an empty ledger.
pub(super) fn chain_end(connection: &Connection) -> Result<(i64, String), rusqlite::Error> {
    let last = connection
        .prepare_cached(&format!("SELECT seq, {HASH_SQL} FROM ledger ORDER BY seq DESC LIMIT 1"))?
        .query_row([], |row| Ok((row.get::<_, i64>(0)?, row.get::<_, String>(1)?)))
        .optional()?;
    match last {
        Some(last) => Ok(last),
        // Every row may be released (see `segments`): the chain goes on from the last one.
        None => Ok(super::segments::released_end(connection)?.unwrap_or_else(|| (0, GENESIS.to_owned()))),
    }
}

/// The hash of the row before `seq`: the genesis for row 1, else that row's,
/// from the file or (rows released: see `segments`) the last released
/// segment's head. A row written since version 5 stores none of its own.
pub(super) fn hash_before(connection: &Connection, seq: i64) -> Result<String, rusqlite::Error> {
    if seq <= 1 {
        return Ok(GENESIS.to_owned());
    }
    let in_file = connection
        .prepare_cached(&format!("SELECT {HASH_SQL} FROM ledger WHERE seq = ?1"))?
        .query_row([seq - 1], |row| row.get(0))
        .optional()?;
    match (in_file, super::segments::released_end(connection)?) {
        (Some(hash), _) => Ok(hash),
        (None, Some((released, hash))) if released == seq - 1 => Ok(hash),
        (None, _) => Err(rusqlite::Error::QueryReturnedNoRows),
    }
}

/// The row from which the file's head is anchored (see `anchor`), if
/// anchoring has started: `None` in a file written before it (or one whose
/// writer never opened it since).
pub(super) fn anchored_since(connection: &Connection) -> Result<Option<i64>, rusqlite::Error> {
    let table: Option<String> = connection
        .query_row("SELECT name FROM sqlite_master WHERE type = 'table' AND name = 'ledger_anchored'", [], |row| {
            row.get(0)
        })
        .optional()?;
    if table.is_none() {
        return Ok(None);
    }
    connection.query_row("SELECT since_seq FROM ledger_anchored WHERE id = 1", [], |row| row.get(0)).optional()
}

/// Records that the head is anchored from row `since` on (kept when already
/// recorded).
pub(super) fn mark_anchored(connection: &Connection, since: i64) -> Result<(), rusqlite::Error> {
    connection.execute("INSERT OR IGNORE INTO ledger_anchored (id, since_seq) VALUES (1, ?1)", [since])?;
    Ok(())
}

#[cfg(test)]
pub(super) mod tests {
    #![allow(clippy::unwrap_used)]

    use rusqlite::{Connection, params};

    use super::{GENESIS, Row, chain_hash};

    /// The writer's inserts skip the CHECKs (no ephemeral table is built per
    /// row for the `kind IN (...)` list), while any other connection still
    /// meets them.
    #[test]
    fn only_the_writers_typed_inserts_skip_the_checks() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ledger.db");
        let writer = super::open_writer(&path, crate::catalog::LedgerSync::Normal, None).unwrap();
        let mut explain = writer.prepare(&format!("EXPLAIN {}", super::INSERT)).unwrap();
        let unbound = rusqlite::params_from_iter(std::iter::repeat_n(None::<String>, 21));
        let program: Vec<String> = explain.query_map(unbound, |row| row.get(1)).unwrap().map(Result::unwrap).collect();
        assert!(program.iter().any(|op| op == "Insert"), "{program:?}");
        assert!(!program.iter().any(|op| op == "OpenEphemeral"), "{program:?}");

        let other = Connection::open(&path).unwrap();
        let none = None::<String>;
        let refused = other
            .execute(
                super::INSERT,
                params![
                    1, "bogus", "c", 0, 0, none, none, none, "m", none, 0, 0, 0, 0, 0, none, "{}", GENESIS, "h", false,
                    none
                ],
            )
            .unwrap_err();
        assert!(refused.to_string().contains("CHECK constraint failed"), "{refused}");
    }

    /// A hash's text and the `seq` hashed are written without `hex` and
    /// `to_string` (`push_hex`, `decimal`): the same text as theirs; and a
    /// hash's text is taken as its digest's only when it is the digest's
    /// lower-case hex, as comparing it with `chain_hash`'s text did.
    #[test]
    fn hashes_and_seqs_are_written_as_hex_and_to_string_write_them() {
        let bytes: Vec<u8> = (0..=255).collect();
        assert_eq!(super::hex_of(&bytes), hex::encode(&bytes));
        let digest = super::chain_digest(GENESIS, 7, "close", b"{}");
        assert_eq!(hex::encode(digest), chain_hash(GENESIS, 7, "close", b"{}"));
        assert!(super::is_hex_of(&hex::encode(digest), &digest));
        assert!(!super::is_hex_of(&hex::encode_upper(digest), &digest), "upper case");
        assert!(!super::is_hex_of(&hex::encode(&digest[..31]), &digest), "a digit pair short");
        assert!(!super::is_hex_of(&format!("{}0", hex::encode(digest)), &digest), "a digit long");
        let other = super::chain_digest(GENESIS, 8, "close", b"{}");
        assert!(!super::is_hex_of(&hex::encode(other), &digest), "another digest");
        for seq in [0, 1, 9, 10, 99, 100, 1_234_567, i64::MAX, -1, -10, i64::MIN] {
            let mut digits = [0; 20];
            assert_eq!(super::decimal(seq, &mut digits), seq.to_string().as_bytes(), "{seq}");
        }
    }

    /// `rows` as one segment's run from line 0.
    fn run<'a>(segment: &'a str, rows: &'a [Row]) -> super::Run<'a> {
        super::Run { segment, first_line: 0, rows: rows.iter().map(Some).collect() }
    }

    fn closings(calls: std::ops::Range<usize>) -> Vec<Row> {
        let record = |n| crate::ledger::tests::record(&format!("c{n}"), "alice", "m", 1, None);
        calls.map(|n| Row::closing(&record(n)).unwrap()).collect()
    }

    fn count(connection: &Connection, table: &str) -> i64 {
        connection.query_row(&format!("SELECT count(*) FROM {table}"), [], |r| r.get(0)).unwrap()
    }

    /// A batch whose insert fails midway (here a trigger added to the file
    /// refuses one row) leaves none of its rows, no count of applied lines
    /// and no transaction open: the same connection appends the next batch.
    #[test]
    fn a_failed_batch_is_rolled_back_whole() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ledger.db");
        let writer = super::open_writer(&path, crate::catalog::LedgerSync::Normal, None).unwrap();
        Connection::open(&path)
            .unwrap()
            .execute_batch(
                "CREATE TRIGGER refuse_c5 BEFORE INSERT ON ledger WHEN NEW.call_id = 'c5'
                 BEGIN SELECT RAISE(ABORT, 'refused'); END;",
            )
            .unwrap();
        let rows = closings(0..10);
        let refused = super::append_logged(&writer, [run("first", &rows)]).unwrap_err();
        assert!(refused.to_string().contains("refused"), "{refused}");
        assert!(writer.is_autocommit(), "no transaction is left open");
        assert_eq!(count(&writer, "ledger"), 0, "none of the failed batch's rows stayed");
        assert_eq!(count(&writer, "ledger_applied"), 0, "nor its count of applied lines");
        assert_eq!(super::append_logged(&writer, [run("second", &rows[6..8])]).unwrap().rows, 2);
        assert_eq!(count(&writer, "ledger"), 2);
    }

    /// A segment's lines are applied once, however often and in whatever
    /// overlapping runs they come (the thread's own run after a reader's
    /// catch-up, two catch-ups): only the lines past the count applied are.
    #[test]
    fn a_segments_lines_are_applied_once() {
        let dir = tempfile::tempdir().unwrap();
        let writer =
            super::open_writer(&dir.path().join("ledger.db"), crate::catalog::LedgerSync::Normal, None).unwrap();
        let rows = closings(0..6);
        assert_eq!(super::append_logged(&writer, [run("s", &rows[..4])]).unwrap().rows, 4);
        assert_eq!(super::append_logged(&writer, [run("s", &rows[..4])]).unwrap().rows, 0, "the same run again");
        let overlapping = super::Run { segment: "s", first_line: 2, rows: rows[2..].iter().map(Some).collect() };
        assert_eq!(super::append_logged(&writer, [overlapping]).unwrap().rows, 2, "lines 4 and 5 only");
        let other = super::append_logged(&writer, [run("t", &rows[..1])]).unwrap().rows;
        assert_eq!(other, 1, "another segment counts its own lines");
        let calls: Vec<String> = writer
            .prepare("SELECT call_id FROM ledger ORDER BY seq")
            .unwrap()
            .query_map([], |row| row.get(0))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        assert_eq!(calls, ["c0", "c1", "c2", "c3", "c4", "c5", "c0"]);
    }

    /// The schema as version 1 wrote it (for the migration's test).
    pub(crate) fn version_1_schema() -> String {
        super::SCHEMA
            .replace(super::KIND_SINCE_7, "kind TEXT NOT NULL CHECK (kind IN ('open', 'close'))")
            .replace(super::AT_SINCE_7, super::AT_BEFORE_7)
            .replace(",\n    charged_worst INTEGER NOT NULL DEFAULT 0 CHECK (charged_worst IN (0, 1))", "")
            + OLD_INDEXES
    }

    /// Turns a file this weir wrote into one as version 6 wrote it: every
    /// kind stored as its name, every `at_ms` written out, the two columns
    /// declared as before version 7 (and `user_version` 6).
    pub(crate) fn as_version_6(connection: &Connection) {
        connection
            .execute_batch(&format!(
                "DROP TRIGGER ledger_no_update;
                 UPDATE ledger SET kind = {}, at_ms = {};
                 CREATE TRIGGER ledger_no_update BEFORE UPDATE ON ledger
                     BEGIN SELECT RAISE(ABORT, 'the ledger is append-only: rows are never updated'); END;",
                super::KIND_SQL,
                super::AT_SQL
            ))
            .unwrap();
        let declared = super::ledger_declaration(connection).unwrap();
        let before =
            declared.replace(super::KIND_SINCE_7, super::KIND_BEFORE_7).replace(super::AT_SINCE_7, super::AT_BEFORE_7);
        assert_ne!(before, declared, "declared as version 7");
        super::redeclare_ledger(connection, &before).unwrap();
        connection.pragma_update(None, "user_version", 6).unwrap();
    }

    /// The indexes versions 1 and 2 made before [`super::INDEXES`] replaced them.
    pub(crate) const OLD_INDEXES: &str = "
CREATE INDEX IF NOT EXISTS ledger_started ON ledger (started_ms);
CREATE INDEX IF NOT EXISTS ledger_call ON ledger (call_id, kind);
";

    /// The indexes of the `ledger` table, by name.
    pub(crate) fn indexes(connection: &Connection) -> Vec<String> {
        let mut names = connection
            .prepare("SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'ledger' ORDER BY name")
            .unwrap();
        names.query_map([], |row| row.get(0)).unwrap().map(Result::unwrap).collect()
    }

    /// Appends `rows` to a version 1 file as version 1 wrote them.
    pub(crate) fn append_version_1(connection: &Connection, rows: &[Row]) {
        let mut prev_hash = GENESIS.to_owned();
        for (seq, row) in (1_i64..).zip(rows) {
            let hash = chain_hash(&prev_hash, seq, row.kind.as_str(), row.body.as_bytes());
            connection
                .execute(
                    &format!("INSERT INTO ledger ({}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19)", super::VERSION_1_COLUMNS),
                    params![
                        seq, row.kind.as_str(), row.call_id, row.at_ms, row.started_ms, row.key_id, row.member,
                        row.team, row.model, row.category, row.tokens.input, row.tokens.output,
                        row.tokens.cache_read, row.tokens.cache_write, row.tokens.reasoning, row.cost_usd,
                        row.body, prev_hash, hash,
                    ],
                )
                .expect("a version 1 row");
            prev_hash = hash;
        }
    }
}
