//! Sealed segments, their archives and retention.
//!
//! The file's rows stay one chain, in one table. With `[ledger]
//! segment_bytes` or `segment_hours`, the ledger's thread seals, after a
//! fill, the rows stored since the last segment into a new one: a row of
//! `ledger_segments` naming its range of `seq`, the hash before its first
//! row (`prev_hash`), its first and last rows' hashes, its rows, size and
//! times. A segment ends at the head the fill has just anchored (see
//! `anchor`), so every segment's head is a line of the anchor file: a
//! segment row forged to stand for deleted rows names a head the anchor
//! does not hold.
//!
//! With `archive_dir`, each sealed segment is then written there as one file
//! (see `archive`) and marked archived. With `retain_days` or `retain_bytes`,
//! the oldest sealed segment past them is released: in one transaction
//! marked released and its rows deleted (the delete trigger lets only a
//! released segment's rows go). Segments are released oldest first only, so
//! the live rows are always one unbroken run after the released ones. A
//! segment is released only when its history exists elsewhere: archived
//! (with `archive_dir`: its file read back with the digest recorded) and
//! shipped (with `postgres_url`: the shipper's last `seq` at or past its
//! end); and never while it holds rows the budgets read from the rows
//! rather than from the roll-ups ([`protected`]).
//!
//! A kill at any point leaves a state the next fill finishes: a seal or a
//! release is one transaction; an archive is written to a temporary name,
//! synced and renamed before the segment is marked, so a segment still
//! `sealed` has its file written again (the content is the same) and a
//! temporary file left over is removed when the ledger opens.

use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::{Connection, OptionalExtension, params};

use super::archive::{self, ArchiveError};
use super::rollup::HOUR_MS;
use super::store::{self, GENESIS, Kind};
use crate::accounting::{Period, Timezone};

/// The segments' table, made each time a writer opens the file.
const TABLE: &str = "
CREATE TABLE IF NOT EXISTS ledger_segments (
    id INTEGER PRIMARY KEY,
    first_seq INTEGER NOT NULL UNIQUE,
    last_seq INTEGER NOT NULL,
    prev_hash TEXT NOT NULL,
    first_hash TEXT NOT NULL,
    head_hash TEXT NOT NULL,
    rows INTEGER NOT NULL,
    bytes INTEGER NOT NULL,
    first_ms INTEGER NOT NULL,
    last_ms INTEGER NOT NULL,
    sealed_ms INTEGER NOT NULL,
    archive TEXT,
    archive_sha256 TEXT,
    state TEXT NOT NULL CHECK (state IN ('sealed', 'archived', 'released'))
);
";

/// The delete trigger that lets a released segment's rows (only theirs) be
/// deleted, in place of `store::SCHEMA`'s that let none go.
const DELETE_TRIGGER: &str = "
DROP TRIGGER IF EXISTS ledger_no_delete;
CREATE TRIGGER ledger_no_delete BEFORE DELETE ON ledger
    WHEN NOT EXISTS (SELECT 1 FROM ledger_segments
        WHERE state = 'released' AND OLD.seq BETWEEN first_seq AND last_seq)
    BEGIN SELECT RAISE(ABORT, 'the ledger is append-only: only a released segment''s rows are deleted'); END;
";

/// Makes the segments' table, and replaces the delete trigger `store`'s
/// schema made with [`DELETE_TRIGGER`] (once: a trigger someone dropped is
/// not made again here, as `store` does not either; the chain shows what
/// was deleted).
pub(super) fn install(connection: &Connection) -> rusqlite::Result<()> {
    connection.execute_batch(TABLE)?;
    let trigger: Option<String> = connection
        .query_row("SELECT sql FROM sqlite_master WHERE type = 'trigger' AND name = 'ledger_no_delete'", [], |row| {
            row.get(0)
        })
        .optional()?;
    if trigger.is_some_and(|sql| !sql.contains("ledger_segments")) {
        connection.execute_batch(DELETE_TRIGGER)?;
    }
    Ok(())
}

/// What a row adds to a segment's size beside its stored body: its hash, its
/// columns and its index entry, roughly (a compact closing row measured ~220
/// bytes beside a ~40-byte body: `compact`'s tests; a row stored as text
/// before schema version 5 has its two hashes as hex, 128 bytes, besides).
pub(super) const ROW_OVERHEAD: i64 = 200;

/// How long a call may run: a segment holding the hold row of a call that
/// started within this and has not closed is kept, since the call's closing
/// row reads its hold to settle the roll-ups (`rollup_store::earlier`).
const OPEN_CALL_HORIZON_MS: i64 = 24 * 3_600_000;

/// Where a segment is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SegmentState {
    /// Its rows are read-only and live.
    Sealed,
    /// Its archive file is written; its rows are still live.
    Archived,
    /// Its rows are deleted from the file (archived or shipped first).
    Released,
}

impl SegmentState {
    fn as_str(self) -> &'static str {
        match self {
            Self::Sealed => "sealed",
            Self::Archived => "archived",
            Self::Released => "released",
        }
    }

    fn parse(text: &str) -> Option<Self> {
        match text {
            "sealed" => Some(Self::Sealed),
            "archived" => Some(Self::Archived),
            "released" => Some(Self::Released),
            _ => None,
        }
    }
}

/// One segment as `ledger_segments` holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Segment {
    pub id: i64,
    pub first_seq: i64,
    pub last_seq: i64,
    pub prev_hash: String,
    pub first_hash: String,
    pub head_hash: String,
    pub rows: i64,
    pub bytes: i64,
    pub first_ms: i64,
    pub last_ms: i64,
    pub archive: Option<String>,
    pub archive_sha256: Option<String>,
    pub state: SegmentState,
}

impl std::fmt::Display for Segment {
    /// How errors name a segment: its id and its rows.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "segment {} (rows {}-{})", self.id, self.first_seq, self.last_seq)
    }
}

/// `[ledger]`'s segment settings, resolved (see `config`).
#[derive(Debug, Clone, PartialEq)]
pub struct SegmentPolicy {
    /// Seal once the open rows' size reaches this (bytes, see [`ROW_OVERHEAD`]).
    pub max_bytes: Option<u64>,
    /// Seal once the open rows' first is this old.
    pub max_age: Option<Duration>,
    /// Where sealed segments are archived.
    pub archive_dir: Option<PathBuf>,
    /// When sealed segments are released from the file.
    pub retention: Option<Retention>,
    /// The budgets' day and month boundaries (`budget_timezone`): rows the
    /// budgets read raw are never released ([`protected`]).
    pub budget_timezone: Timezone,
}

/// `retain_days` and `retain_bytes`, and what must hold a segment's copy.
#[derive(Debug, Clone, PartialEq)]
pub struct Retention {
    pub max_age: Option<Duration>,
    pub max_bytes: Option<u64>,
    /// `postgres_url` is set: a segment is released only once shipped.
    pub shipped: bool,
}

/// Why the segments' upkeep failed (logged; the rows are stored either way).
#[derive(Debug, thiserror::Error)]
pub(super) enum SegmentError {
    #[error("{0}")]
    Sqlite(#[from] rusqlite::Error),
    #[error("archiving {segment}: {error}")]
    Archive { segment: String, error: ArchiveError },
}

/// Whether the file has the segments' table (a file no writer of this weir
/// has opened has none).
pub(super) fn table_exists(connection: &Connection) -> rusqlite::Result<bool> {
    let name: Option<String> = connection
        .query_row("SELECT name FROM sqlite_master WHERE type = 'table' AND name = 'ledger_segments'", [], |row| {
            row.get(0)
        })
        .optional()?;
    Ok(name.is_some())
}

const COLUMNS: &str = "SELECT id, first_seq, last_seq, prev_hash, first_hash, head_hash, rows, bytes, first_ms,
    last_ms, archive, archive_sha256, state FROM ledger_segments";

/// Every segment, in order (none without the table).
pub(super) fn list(connection: &Connection) -> rusqlite::Result<Vec<Segment>> {
    if !table_exists(connection)? {
        return Ok(Vec::new());
    }
    let mut statement = connection.prepare_cached(&format!("{COLUMNS} ORDER BY first_seq"))?;
    let segments = statement.query_map([], segment_row)?;
    segments.collect()
}

fn segment_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<Segment> {
    let state: String = row.get(12)?;
    let state = SegmentState::parse(&state).ok_or_else(|| {
        rusqlite::Error::FromSqlConversionFailure(12, rusqlite::types::Type::Text, format!("state `{state}`").into())
    })?;
    Ok(Segment {
        id: row.get(0)?,
        first_seq: row.get(1)?,
        last_seq: row.get(2)?,
        prev_hash: row.get(3)?,
        first_hash: row.get(4)?,
        head_hash: row.get(5)?,
        rows: row.get(6)?,
        bytes: row.get(7)?,
        first_ms: row.get(8)?,
        last_ms: row.get(9)?,
        archive: row.get(10)?,
        archive_sha256: row.get(11)?,
        state,
    })
}

/// The end of the released segments: the last released row's `seq` and
/// hash, which the first live row links to (`None`: nothing released).
pub(super) fn released_end(connection: &Connection) -> rusqlite::Result<Option<(i64, String)>> {
    if !table_exists(connection)? {
        return Ok(None);
    }
    connection
        .prepare_cached(
            "SELECT last_seq, head_hash FROM ledger_segments WHERE state = 'released' ORDER BY last_seq DESC LIMIT 1",
        )?
        .query_row([], |row| Ok((row.get(0)?, row.get(1)?)))
        .optional()
}

/// The hash of row 1, live or in a released segment (what names the file's
/// rows in the fleet's ledger).
pub(super) fn first_row_hash(connection: &Connection) -> rusqlite::Result<Option<String>> {
    let live: Option<String> = connection
        .prepare_cached(&format!("SELECT {} FROM ledger WHERE seq = 1", store::HASH_SQL))?
        .query_row([], |row| row.get(0))
        .optional()?;
    if live.is_some() || !table_exists(connection)? {
        return Ok(live);
    }
    connection
        .prepare_cached("SELECT first_hash FROM ledger_segments WHERE first_seq = 1")?
        .query_row([], |row| row.get(0))
        .optional()
}

/// The rows stored since the last segment, as far as counted.
#[derive(Debug, Clone, PartialEq, Eq)]
struct OpenRange {
    first_seq: i64,
    /// The last `seq` counted into the sums below.
    counted: i64,
    bytes: i64,
    first_ms: Option<i64>,
}

/// Seals, archives and releases after each fill, on the ledger's thread.
#[derive(Debug)]
pub(super) struct Segmenter {
    policy: SegmentPolicy,
    ledger: PathBuf,
    open: Option<OpenRange>,
}

impl Segmenter {
    /// What this segmenter keeps to.
    pub(super) fn policy(&self) -> &SegmentPolicy {
        &self.policy
    }

    pub(super) fn new(policy: SegmentPolicy, ledger: &Path) -> Self {
        Self { policy, ledger: ledger.to_path_buf(), open: None }
    }

    /// Forgets what was counted (the connection was opened again, and
    /// another process may have sealed meanwhile).
    pub(super) fn reset(&mut self) {
        self.open = None;
    }

    /// When the ledger opens: removes archive files a kill left half
    /// written (their segments are still `sealed`, and are archived again).
    pub(super) fn recover(&self) {
        if let Some(dir) = &self.policy.archive_dir {
            archive::remove_leftovers(dir, &self.ledger);
        }
    }

    /// After a fill whose head is `head` (anchored, when `anchored`):
    /// seals the open rows when they are due, archives what is sealed, and
    /// releases what retention lets go. `shipped`: the last `seq` the
    /// shipper has in PostgreSQL.
    pub(super) fn after_fill(
        &mut self,
        connection: &Connection,
        head: &(i64, String),
        anchored: bool,
        shipped: i64,
        now_ms: i64,
    ) -> Result<(), SegmentError> {
        if anchored {
            self.seal_if_due(connection, head, now_ms)?;
        }
        if let Some(dir) = self.policy.archive_dir.clone() {
            archive_sealed(connection, &dir, &self.ledger)?;
        }
        if let Some(retention) = self.policy.retention.clone() {
            self.release_due(connection, &retention, shipped, now_ms)?;
        }
        Ok(())
    }

    /// Counts the rows up to `head` and seals them when their size or age
    /// is due.
    fn seal_if_due(&mut self, connection: &Connection, head: &(i64, String), now_ms: i64) -> rusqlite::Result<()> {
        let open = match self.open.take() {
            Some(open) => open,
            None => {
                let first_seq = sealed_end(connection)? + 1;
                OpenRange { first_seq, counted: first_seq - 1, bytes: 0, first_ms: None }
            }
        };
        let open = count(connection, open, head.0)?;
        let by_size = self.policy.max_bytes.is_some_and(|max| open.bytes >= i64::try_from(max).unwrap_or(i64::MAX));
        let age_ms = |age: Duration| i64::try_from(age.as_millis()).unwrap_or(i64::MAX);
        let by_age = match (self.policy.max_age, open.first_ms) {
            (Some(age), Some(first_ms)) => now_ms.saturating_sub(first_ms) >= age_ms(age),
            _ => false,
        };
        if open.counted < open.first_seq || !(by_size || by_age) {
            self.open = Some(open);
            return Ok(());
        }
        if seal(connection, &open, head, now_ms)? {
            tracing::info!(first = open.first_seq, last = head.0, bytes = open.bytes, "sealed a ledger segment");
        }
        // Sealed here or by another process: counted afresh from the new end.
        self.open = None;
        Ok(())
    }

    /// Releases the oldest segments, one at a time, while retention asks
    /// and each may go.
    fn release_due(
        &mut self,
        connection: &Connection,
        retention: &Retention,
        shipped: i64,
        now_ms: i64,
    ) -> Result<(), SegmentError> {
        let segments = list(connection)?;
        let open_bytes = self.open.as_ref().map_or(0, |open| open.bytes);
        let mut live_bytes: i64 =
            segments.iter().filter(|s| s.state != SegmentState::Released).map(|s| s.bytes).sum::<i64>() + open_bytes;
        for segment in segments.iter().filter(|s| s.state != SegmentState::Released) {
            if !due(retention, segment, live_bytes, now_ms) {
                return Ok(());
            }
            if let Some(reason) = self.kept_because(connection, retention, segment, shipped, now_ms)? {
                tracing::debug!(%segment, reason, "a ledger segment past retention is kept");
                return Ok(());
            }
            release(connection, segment)?;
            tracing::info!(%segment, "released a ledger segment: its rows are deleted from the file");
            live_bytes -= segment.bytes;
        }
        Ok(())
    }

    /// Why `segment` may not be released yet (`None`: it may).
    fn kept_because(
        &self,
        connection: &Connection,
        retention: &Retention,
        segment: &Segment,
        shipped: i64,
        now_ms: i64,
    ) -> Result<Option<&'static str>, SegmentError> {
        if let Some(dir) = &self.policy.archive_dir {
            if segment.state != SegmentState::Archived {
                return Ok(Some("not archived yet"));
            }
            let intact = archive::matches(dir, segment).map_err(|error| SegmentError::Archive {
                segment: segment.to_string(),
                error: ArchiveError::Io(error),
            })?;
            if !intact {
                return Ok(Some("its archive file is missing or does not match its digest"));
            }
        }
        if retention.shipped && shipped < segment.last_seq {
            return Ok(Some("not shipped to PostgreSQL yet"));
        }
        if let Some(reason) = protected(connection, segment, self.policy.budget_timezone, now_ms)? {
            return Ok(Some(reason));
        }
        Ok(None)
    }
}

/// Whether retention asks for `segment` to go: older than `retain_days`, or
/// the live segments' size (`live_bytes`) past `retain_bytes`.
fn due(retention: &Retention, segment: &Segment, live_bytes: i64, now_ms: i64) -> bool {
    let by_age = retention.max_age.is_some_and(|age| {
        let age_ms = i64::try_from(age.as_millis()).unwrap_or(i64::MAX);
        segment.last_ms < now_ms.saturating_sub(age_ms)
    });
    let by_size = retention.max_bytes.is_some_and(|max| live_bytes > i64::try_from(max).unwrap_or(i64::MAX));
    by_age || by_size
}

/// Why the rows of `segment` are still needed in the file (`None`: they are
/// not): the budgets' period sums read the roll-ups for every whole hour
/// and the rows only for the part hour a period starts in when it does not
/// start on the hour (a `budget_timezone` offset in half hours), so a
/// segment holding a row started in the current day's or month's first
/// part hour is kept; and a segment holding the hold of a call that may
/// still close ([`OPEN_CALL_HORIZON_MS`]) is kept, since its closing row
/// reads the hold to settle the roll-ups.
pub(super) fn protected(
    connection: &Connection,
    segment: &Segment,
    timezone: Timezone,
    now_ms: i64,
) -> rusqlite::Result<Option<&'static str>> {
    let now = std::time::UNIX_EPOCH + Duration::from_millis(u64::try_from(now_ms).unwrap_or(0));
    for period in [Period::Day, Period::Month] {
        let start = super::store::unix_ms(timezone.bounds(period, now).0);
        let whole_hour = start - start.rem_euclid(HOUR_MS) + HOUR_MS;
        if start.rem_euclid(HOUR_MS) == 0 {
            continue;
        }
        let raw: Option<i64> = connection
            .prepare_cached(
                "SELECT seq FROM ledger WHERE started_ms >= ?1 AND started_ms < ?2 AND seq BETWEEN ?3 AND ?4 LIMIT 1",
            )?
            .query_row(params![start, whole_hour, segment.first_seq, segment.last_seq], |row| row.get(0))
            .optional()?;
        if raw.is_some() {
            return Ok(Some("it holds rows a current budget period reads from the rows"));
        }
    }
    let call = super::callid::same_call("c.call_id", "h.call_id");
    let (held, closed) = (Kind::Hold.is_sql("h.kind"), Kind::Close.is_sql("c.kind"));
    let open_hold: Option<i64> = connection
        .prepare_cached(&format!(
            "SELECT h.seq FROM ledger AS h WHERE h.seq BETWEEN ?1 AND ?2 AND {held}
             AND coalesce(h.at_ms, h.started_ms) >= ?3
             AND NOT EXISTS (SELECT 1 FROM ledger AS c WHERE c.started_ms = h.started_ms AND {call} AND {closed})
             LIMIT 1"
        ))?
        .query_row(params![segment.first_seq, segment.last_seq, now_ms - OPEN_CALL_HORIZON_MS], |row| row.get(0))
        .optional()?;
    Ok(open_hold.map(|_| "it holds the hold of a call that may still close"))
}

/// The last sealed `seq` (0 before any segment).
fn sealed_end(connection: &Connection) -> rusqlite::Result<i64> {
    connection.query_row("SELECT COALESCE(MAX(last_seq), 0) FROM ledger_segments", [], |row| row.get(0))
}

/// Adds the rows after `open.counted`, up to `head`, to the sums.
fn count(connection: &Connection, open: OpenRange, head: i64) -> rusqlite::Result<OpenRange> {
    if head <= open.counted {
        return Ok(open);
    }
    let (rows, bytes, first_ms): (i64, i64, Option<i64>) = connection
        .prepare_cached(
            "SELECT COUNT(*), COALESCE(SUM(length(body)), 0), MIN(coalesce(at_ms, started_ms)) FROM ledger
             WHERE seq > ?1 AND seq <= ?2",
        )?
        .query_row([open.counted, head], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)))?;
    let first_ms = match (open.first_ms, first_ms) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
    Ok(OpenRange { counted: head, bytes: open.bytes + bytes + rows * ROW_OVERHEAD, first_ms, ..open })
}

/// Runs `work` in an immediate transaction, committed when it succeeds and
/// rolled back when it fails.
fn immediate<T>(connection: &Connection, work: impl FnOnce(&Connection) -> rusqlite::Result<T>) -> rusqlite::Result<T> {
    connection.execute_batch("BEGIN IMMEDIATE")?;
    let done = work(connection).and_then(|value| connection.execute_batch("COMMIT").map(|()| value));
    if done.is_err() && !connection.is_autocommit() {
        let _ = connection.execute_batch("ROLLBACK");
    }
    done
}

/// Seals `open`'s rows through `head` as one segment; false when another
/// process sealed first (nothing is written).
fn seal(connection: &Connection, open: &OpenRange, head: &(i64, String), now_ms: i64) -> rusqlite::Result<bool> {
    immediate(connection, |connection| {
        if sealed_end(connection)? + 1 != open.first_seq {
            return Ok(false);
        }
        let prev_hash = store::hash_before(connection, open.first_seq)?;
        let first_hash: String = connection.query_row(
            &format!("SELECT {} FROM ledger WHERE seq = ?1", store::HASH_SQL),
            [open.first_seq],
            |row| row.get(0),
        )?;
        let (rows, first_ms, last_ms): (i64, i64, i64) = connection.query_row(
            "SELECT COUNT(*), MIN(coalesce(at_ms, started_ms)), MAX(coalesce(at_ms, started_ms)) FROM ledger
             WHERE seq BETWEEN ?1 AND ?2",
            [open.first_seq, head.0],
            |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)),
        )?;
        connection.execute(
            "INSERT INTO ledger_segments (first_seq, last_seq, prev_hash, first_hash, head_hash, rows, bytes,
                 first_ms, last_ms, sealed_ms, state)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, 'sealed')",
            params![open.first_seq, head.0, prev_hash, first_hash, head.1, rows, open.bytes, first_ms, last_ms, now_ms],
        )?;
        Ok(true)
    })
}

/// Archives every sealed segment not archived yet, oldest first.
fn archive_sealed(connection: &Connection, dir: &Path, ledger: &Path) -> Result<(), SegmentError> {
    for segment in list(connection)?.iter().filter(|s| s.state == SegmentState::Sealed) {
        archive_one(connection, dir, ledger, segment)?;
    }
    Ok(())
}

/// Writes `segment`'s archive file (see `archive::write`), then marks it
/// archived with the file's name and digest.
pub(super) fn archive_one(
    connection: &Connection,
    dir: &Path,
    ledger: &Path,
    segment: &Segment,
) -> Result<(), SegmentError> {
    let written = archive::write(connection, dir, ledger, segment)
        .map_err(|error| SegmentError::Archive { segment: segment.to_string(), error })?;
    mark_archived(connection, segment, &written.name, &written.sha256)?;
    tracing::info!(%segment, file = %written.name, "archived a ledger segment");
    Ok(())
}

/// Records that `segment`'s archive is the file `name` with digest `sha256`.
pub(super) fn mark_archived(
    connection: &Connection,
    segment: &Segment,
    name: &str,
    sha256: &str,
) -> rusqlite::Result<()> {
    connection.execute(
        "UPDATE ledger_segments SET state = ?1, archive = ?2, archive_sha256 = ?3 WHERE id = ?4 AND state = ?5",
        params![SegmentState::Archived.as_str(), name, sha256, segment.id, SegmentState::Sealed.as_str()],
    )?;
    Ok(())
}

/// Marks `segment` released and deletes its rows, in one transaction.
pub(super) fn release(connection: &Connection, segment: &Segment) -> rusqlite::Result<()> {
    immediate(connection, |connection| {
        connection.execute("UPDATE ledger_segments SET state = 'released' WHERE id = ?1", [segment.id])?;
        connection.execute("DELETE FROM ledger WHERE seq BETWEEN ?1 AND ?2", [segment.first_seq, segment.last_seq])?;
        Ok(())
    })
}

/// Checks the segments' table as a chain of its own: the first segment
/// starts at row 1 after the genesis hash, each next one right after the one
/// before and from its head, and the released ones come first.
/// A break names the segment and says why.
pub(super) fn check_table(segments: &[Segment]) -> Result<(), (String, String)> {
    let mut previous: (i64, String, bool) = (0, GENESIS.to_owned(), true);
    for segment in segments {
        let broken = |reason: String| Err((segment.to_string(), reason));
        if segment.first_seq != previous.0 + 1 {
            return broken(format!("it starts at row {}, and row {} was due", segment.first_seq, previous.0 + 1));
        }
        if segment.prev_hash != previous.1 {
            return broken(format!("its prev_hash does not link to row {}", previous.0));
        }
        let released = segment.state == SegmentState::Released;
        if released && !previous.2 {
            return broken("it is released after a segment that is not".to_owned());
        }
        previous = (segment.last_seq, segment.head_hash.clone(), released);
    }
    Ok(())
}

/// `retain_days` as a duration.
pub(super) fn days(days: u32) -> Duration {
    Duration::from_secs(u64::from(days) * 86_400)
}
