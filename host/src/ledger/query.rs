//! Reading the ledger: records, calls left open, sums, the chain's check, and
//! an export. A [`Reader`] opens the file read-only; with WAL it reads a
//! consistent snapshot while a gateway keeps writing.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::LazyLock;
use std::time::{Duration, SystemTime};

use rusqlite::types::Value;
use rusqlite::{Connection, OpenFlags, OptionalExtension, params_from_iter};
use serde::Serialize;
use serde::ser::SerializeMap;

use super::anchor::{self, Anchor, AnchorKey, AnchorScan, Tampering};
use super::archive::{self, ArchiveError, ArchiveFile, Header};
use super::callid::CallId;
use super::log;
use super::rollup::{DayDim, Histogram};
use super::segments::{self, Segment, SegmentState};
use super::sql::{self, Dialect, Param, Span};
use super::store::{self, GENESIS, Kind, Row, SCHEMA_VERSION};
use super::summary::{self, DayRow, LatencyRow, Plan, SumRow};
use crate::catalog::LedgerSync;
use crate::record::{CallOpening, CallRecord, HoldRecord, Tokens};

/// Which calls to read. Every field narrows; times are on the call's start
/// (`since` inclusive, `until` exclusive).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Filter {
    pub member: Option<String>,
    pub key_id: Option<String>,
    pub model: Option<String>,
    /// `ok` or a failure's category (calls still open have none).
    pub category: Option<String>,
    pub since: Option<SystemTime>,
    pub until: Option<SystemTime>,
}

/// One caller's spend (see [`LedgerRead::spend_by_caller`]).
#[derive(Debug, Clone, PartialEq)]
pub struct CallerSpend {
    pub key_id: Option<String>,
    pub member: Option<String>,
    pub team: Option<String>,
    pub tokens: Tokens,
    pub cost_usd: f64,
}

/// What sums are grouped by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupBy {
    Member,
    Model,
    Key,
    /// The deployment that served the call (its last attempt's), for entries
    /// with deployments; calls of other entries group under none.
    Deployment,
    Team,
    /// The provider that served the call (none for a call refused before
    /// its model resolved).
    Provider,
}

impl GroupBy {
    /// The name in queries and JSON (`member`, `model`, `key`, `deployment`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Member => "member",
            Self::Model => "model",
            Self::Key => "key",
            Self::Deployment => "deployment",
            Self::Team => "team",
            Self::Provider => "provider",
        }
    }

    /// The day level's dimension this groups by.
    pub(super) fn day_dim(self) -> DayDim {
        match self {
            Self::Member => DayDim::Member,
            Self::Model => DayDim::Model,
            Self::Key => DayDim::Key,
            Self::Deployment => DayDim::Deployment,
            Self::Team => DayDim::Team,
            Self::Provider => DayDim::Provider,
        }
    }

    /// The roll-ups' dims column (`d`) this groups by.
    pub(super) fn dims_column(self) -> &'static str {
        match self {
            Self::Member => "d.member",
            Self::Model => "d.model",
            Self::Key => "d.key_id",
            Self::Deployment => "d.deployment",
            Self::Team => "d.team",
            Self::Provider => "d.provider",
        }
    }
}

impl std::str::FromStr for GroupBy {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        match text {
            "member" => Ok(Self::Member),
            "model" => Ok(Self::Model),
            "key" => Ok(Self::Key),
            "deployment" => Ok(Self::Deployment),
            "team" => Ok(Self::Team),
            "provider" => Ok(Self::Provider),
            other => Err(format!("cannot group by `{other}`: use member, model, key, team, provider or deployment")),
        }
    }
}

/// The width of a usage series' buckets (UTC hours and days).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bucket {
    Hour,
    Day,
}

impl std::str::FromStr for Bucket {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        match text {
            "hour" => Ok(Self::Hour),
            "day" => Ok(Self::Day),
            other => Err(format!("cannot bucket by `{other}`: use hour or day")),
        }
    }
}

/// What a usage query asks: which calls, grouped how, and (with `bucket`)
/// as a series over time.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct UsageQuery {
    pub filter: Filter,
    pub group_by: Option<GroupBy>,
    pub bucket: Option<Bucket>,
}

/// The closed calls' latency (end minus start) at two percentiles, in ms:
/// the upper bound of the histogram bucket holding each, so at most 19 %
/// above it (see `rollup`). `None` without calls.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Latency {
    pub p50: Option<f64>,
    pub p99: Option<f64>,
}

/// Closed calls summed.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Totals {
    pub calls: u64,
    pub tokens: Tokens,
    /// The sum of the costs that are known.
    pub cost_usd: f64,
    /// Calls whose entry declares no price: when not zero, `cost_usd` is partial.
    pub calls_without_cost: u64,
    /// The failed calls, by category (every category but `ok`).
    pub errors: BTreeMap<String, u64>,
    pub latency_ms: Latency,
}

/// The totals of one member, model or key (`None`: calls without one).
#[derive(Debug, Clone, PartialEq)]
pub struct Group {
    pub by: GroupBy,
    pub value: Option<String>,
    pub totals: Totals,
}

impl Serialize for Group {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(7))?;
        map.serialize_entry(self.by.as_str(), &self.value)?;
        map.serialize_entry("calls", &self.totals.calls)?;
        map.serialize_entry("tokens", &self.totals.tokens)?;
        map.serialize_entry("cost_usd", &self.totals.cost_usd)?;
        map.serialize_entry("calls_without_cost", &self.totals.calls_without_cost)?;
        map.serialize_entry("errors", &self.totals.errors)?;
        map.serialize_entry("latency_ms", &self.totals.latency_ms)?;
        map.end()
    }
}

/// Sums over the closed calls a filter selects.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Sums {
    /// One per value of the grouping, ordered by it (calls without one
    /// first); empty without one.
    pub groups: Vec<Group>,
    pub total: Totals,
    /// With a bucket: one point per bucket that holds calls, in time order.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub series: Option<Vec<Point>>,
}

/// One bucket of a usage series: its start, its totals and (grouped) its groups.
#[derive(Debug, Clone, PartialEq)]
pub struct Point {
    pub start: SystemTime,
    pub total: Totals,
    pub groups: Vec<Group>,
}

impl Serialize for Point {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(3))?;
        map.serialize_entry("start", &humantime::format_rfc3339(self.start).to_string())?;
        map.serialize_entry("total", &self.total)?;
        map.serialize_entry("groups", &self.groups)?;
        map.end()
    }
}

/// A chain that checks out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VerifyReport {
    pub rows: u64,
    /// Distinct call ids.
    pub calls: u64,
}

/// The first row where the chain does not hold.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("row {seq} (call {call_id}): {reason}")]
pub struct ChainBreak {
    pub seq: i64,
    pub call_id: String,
    pub reason: String,
}

/// Why the ledger could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("no ledger at {0}")]
    Missing(PathBuf),
    #[error(
        "{path} is not a ledger this weir reads (schema version {version}, expected {} to {SCHEMA_VERSION}; an older \
         file is migrated in place the first time a gateway or library opens it to write)",
        store::OLDEST_READ
    )]
    Schema { path: PathBuf, version: i64 },
    #[error("reading the ledger: {0}")]
    Sqlite(#[from] rusqlite::Error),
    #[error("{at} holds a body that does not parse: {error}")]
    Body { at: String, error: serde_json::Error },
    #[error("reading the fleet's ledger: {0}")]
    Postgres(String),
    #[error("writing the export: {0}")]
    Output(#[from] std::io::Error),
    #[error("reading the archive {file}: {error}")]
    Archive { file: String, error: ArchiveError },
    /// A thread checking rows failed (a bug, never a row's fault): the walk
    /// stops with this instead of an answer about the chain.
    #[error("checking the rows from {from_seq} on failed: {reason}")]
    Checker { from_seq: i64, reason: String },
}

/// What the anchor said of a chain that checks out (see `anchor`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AnchorState {
    /// The newest anchored head (row `seq`) is in the chain; `keyed`: its
    /// lines' MACs were checked with the anchor key.
    Anchored { seq: i64, keyed: bool },
    /// The anchor file exists and holds no line yet (no batch since it was made).
    Empty,
    /// No anchor file and no record of one: rows written before anchoring
    /// (a gateway anchors the head when it next opens the file).
    Unanchored,
}

/// A chain that checks out, and what its anchor said.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AnchoredReport {
    pub chain: VerifyReport,
    pub anchor: AnchorState,
    pub segments: SegmentCounts,
}

/// The segments of a file that checks out (see `segments`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SegmentCounts {
    /// Segments sealed, released or not.
    pub sealed: u64,
    /// Of them, those whose rows are deleted from the file.
    pub released: u64,
    /// The first row the file holds (1 when nothing is released).
    pub first_live: i64,
    /// Archive files walked (by [`Reader::verify_with_archive`]).
    pub archives: u64,
}

/// A segment (or its archive file) that does not hold: which, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{segment}: {reason}")]
pub struct SegmentBreak {
    pub segment: String,
    pub reason: String,
}

/// Why [`Reader::verify`] (or [`super::SharedReader::verify`]) did not pass.
#[derive(Debug, thiserror::Error)]
pub enum VerifyError {
    #[error("the chain is broken at {0}")]
    Broken(ChainBreak),
    /// The chain holds, but its anchor does not vouch for it.
    #[error("TAMPERED: {0}")]
    Tampered(Tampering),
    #[error("the anchor file {path} cannot be read: {error}")]
    AnchorUnreadable { path: String, error: std::io::Error },
    #[error("the fleet's ledger: the chain of {0}")]
    Shared(super::postgres::SourceBreak),
    #[error("TAMPERED: the fleet's ledger: {0}")]
    SharedTampered(super::postgres::SourceTampered),
    /// A segment or an archive file breaks the chain, or is missing.
    #[error("{0}")]
    Segment(SegmentBreak),
    #[error("the archive folder {path} cannot be read: {error}")]
    ArchiveFolder { path: String, error: std::io::Error },
    #[error(transparent)]
    Read(#[from] ReadError),
}

/// Every column, in the table's order (the indices [`stored_row`] reads):
/// the kind as its name, `at_ms` given back where stored as NULL, the body
/// as JSON text, the hash as hex (see `store::KIND_SQL`, `store::AT_SQL`,
/// `store::BODY_SQL` and `store::HASH_SQL`).
pub(super) static ALL_COLUMNS: LazyLock<String> = LazyLock::new(|| {
    format!(
        "SELECT seq, {}, call_id, {}, started_ms, key_id, member, team, model, category,
        input, output, cache_read, cache_write, reasoning, cost_usd, {}, prev_hash, {}, charged_worst FROM ledger",
        store::KIND_SQL,
        store::AT_SQL,
        store::BODY_SQL,
        store::HASH_SQL
    )
});

/// A row as the file holds it: its place in the chain and its content.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Committed {
    pub seq: i64,
    pub row: Row,
    pub prev_hash: String,
    pub hash: String,
}

/// A read-only view of a ledger file.
pub struct Reader {
    connection: Connection,
    path: PathBuf,
}

impl std::fmt::Debug for Reader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reader").field("path", &self.connection.path()).finish()
    }
}

impl Reader {
    /// Opens an existing ledger read-only (a missing file is an error, not a
    /// new ledger), after moving the rows its log holds into it with no size
    /// limit: see [`Self::open_within`] for a file with `max_bytes`.
    pub fn open(path: &Path) -> Result<Reader, ReadError> {
        Reader::open_within(path, None)
    }

    /// [`Self::open`], moving the log's rows in only while the file stays
    /// within `max_bytes` (the `[ledger]` setting): rows that do not fit stay
    /// in the log, as they do for the gateway.
    pub fn open_within(path: &Path, max_bytes: Option<u64>) -> Result<Reader, ReadError> {
        if !path.is_file() {
            return Err(ReadError::Missing(path.to_path_buf()));
        }
        catch_up(path, max_bytes);
        Reader::open_file(path)
    }

    /// Opens the file as it is, its log left alone (the shipper's reader:
    /// the ledger's thread fills the file before waking it).
    pub(super) fn open_file(path: &Path) -> Result<Reader, ReadError> {
        if !path.is_file() {
            return Err(ReadError::Missing(path.to_path_buf()));
        }
        let connection =
            Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX)?;
        connection.busy_timeout(Duration::from_secs(5))?;
        super::compact::register(&connection)?;
        super::callid::register(&connection)?;
        let version: i64 = connection.query_row("PRAGMA user_version", [], |row| row.get(0))?;
        if !(store::OLDEST_READ..=SCHEMA_VERSION).contains(&version) {
            return Err(ReadError::Schema { path: path.to_path_buf(), version });
        }
        Ok(Reader { connection, path: path.to_path_buf() })
    }

    /// Walks every row in order: `seq` without a gap from 1, each `prev_hash`
    /// the previous row's `hash`, each `hash` recomputed from the row, and the
    /// filter columns equal to the body's fields. A row cut off the end leaves
    /// a valid chain: [`Self::verify_anchored`] compares it with its anchor.
    ///
    /// With released segments (see `segments`), the walk starts at the first
    /// row the file holds, from the last released segment's head; the
    /// segments' table is checked as a chain of its own, and each sealed
    /// segment's head against its last row.
    pub fn verify(&self) -> Result<VerifyReport, VerifyError> {
        let transaction = self.connection.unchecked_transaction().map_err(ReadError::from)?;
        let (mut chain, segments) = live_start(&transaction)?;
        walk_live(&transaction, &mut chain, &segments, None)?;
        let calls = distinct_calls(&transaction)?;
        Ok(chain.report(calls))
    }

    /// [`Self::verify`], and the anchor's check (`weir ledger verify`): every
    /// anchor line is read (streamed), with `key` each line's MAC verifies
    /// (see [`anchor::MacRule`]), and the newest anchored row is in the chain
    /// with the anchored hash (a ledger shorter than its anchor, or a chain
    /// recomputed after rows were deleted, fails: each row's hash covers all
    /// the rows before it). No anchor file: tampering when the file records
    /// that anchoring started, else [`AnchorState::Unanchored`].
    ///
    /// Each released segment's head must be a line of the anchor file (a
    /// segment is sealed at a head just anchored): a segment row forged to
    /// stand for deleted rows is named.
    pub fn verify_anchored(&self, key: Option<&AnchorKey>) -> Result<AnchoredReport, VerifyError> {
        let transaction = self.connection.unchecked_transaction().map_err(ReadError::from)?;
        let (mut chain, segments) = live_start(&transaction)?;
        let counts = counts_of(&segments, chain.last_seq() + 1);
        let released_heads =
            segments.iter().filter(|s| s.state == SegmentState::Released).map(|s| s.last_seq).collect();
        let Some(scan) = self.anchor_scan(&transaction, key, true, &released_heads)? else {
            drop(transaction);
            let chain = self.verify()?;
            return Ok(AnchoredReport { chain, anchor: AnchorState::Unanchored, segments: counts });
        };
        check_released_heads(&segments, &scan)?;
        walk_live(&transaction, &mut chain, &segments, scan.newest.as_ref().map(|(_, newest)| newest))?;
        let anchor = match &scan.newest {
            Some((_, newest)) if newest.seq > chain.last_seq() => {
                return Err(VerifyError::Tampered(Tampering::Shorter { rows: chain.last_seq(), anchored: newest.seq }));
            }
            Some((_, newest)) => AnchorState::Anchored { seq: newest.seq, keyed: key.is_some() },
            None => AnchorState::Empty,
        };
        let calls = distinct_calls(&transaction)?;
        Ok(AnchoredReport { chain: chain.report(calls), anchor, segments: counts })
    }

    /// [`Self::verify_anchored`], after walking the archive files in `dir`
    /// (`weir ledger verify --archive DIR`): the files of the released
    /// segments, in order, as one chain from the first row, which must reach
    /// the file's first live row; each file's digest as recorded when it was
    /// written. A file of a segment still in the file is walked on its own.
    /// A missing, truncated, altered or reordered file fails, naming its segment.
    pub fn verify_with_archive(&self, key: Option<&AnchorKey>, dir: &Path) -> Result<AnchoredReport, VerifyError> {
        let transaction = self.connection.unchecked_transaction().map_err(ReadError::from)?;
        let (live, segments) = live_start(&transaction)?;
        drop(transaction);
        let folder_error = |error| VerifyError::ArchiveFolder { path: dir.display().to_string(), error };
        let files = archive::files(dir, &self.path).map_err(folder_error)?;
        let released_end = live.last_seq();
        let mut chain = ChainCheck::default();
        for path in &files {
            let (header, file) = ArchiveFile::open(path).map_err(|error| unreadable_archive(path, &error))?;
            let recorded = segments.iter().find(|segment| segment.first_seq == header.first_seq);
            if header.first_seq > released_end {
                let mut own = ChainCheck::after(header.first_seq - 1, header.prev_hash.clone());
                walk_archive(path, &header, file, &mut own)?;
            } else {
                if header.first_seq != chain.last_seq() + 1 {
                    return Err(archive_gap(&segments, chain.last_seq() + 1, Some(path)));
                }
                walk_archive(path, &header, file, &mut chain)?;
            }
            check_digest(path, &header, recorded)?;
        }
        if chain.last_seq() < released_end {
            return Err(archive_gap(&segments, chain.last_seq() + 1, None));
        }
        if released_end > 0 && chain.head() != live.head() {
            return Err(VerifyError::Segment(SegmentBreak {
                segment: format!("the archive's last row {released_end}"),
                reason: "its hash is not the one the file's first live row links to".to_owned(),
            }));
        }
        let mut report = self.verify_anchored(key)?;
        report.segments.archives = files.len() as u64;
        Ok(report)
    }

    /// The check a starting gateway makes, reading only the tail: the newest
    /// anchor line (from the anchor file's end; its MAC with `key`), the row
    /// at its sequence by the primary key (present, with the anchored hash),
    /// and the chain from there to the end. The rows before the anchored
    /// one are [`Self::verify_anchored`]'s (the CLI's) to walk.
    pub fn check_tail(&self, key: Option<&AnchorKey>) -> Result<AnchorState, VerifyError> {
        let transaction = self.connection.unchecked_transaction().map_err(ReadError::from)?;
        let Some(scan) = self.anchor_scan(&transaction, key, false, &std::collections::BTreeSet::new())? else {
            return Ok(AnchorState::Unanchored);
        };
        let Some((_, newest)) = scan.newest else { return Ok(AnchorState::Empty) };
        let mut at_anchor: Option<String> = transaction
            .query_row(&format!("SELECT {} FROM ledger WHERE seq = ?1", store::HASH_SQL), [newest.seq], |row| {
                row.get(0)
            })
            .optional()
            .map_err(ReadError::from)?;
        if at_anchor.is_none() {
            // The head anchored last may end a segment released since.
            at_anchor = segments::released_end(&transaction)
                .map_err(ReadError::from)?
                .filter(|(seq, _)| *seq == newest.seq)
                .map(|(_, hash)| hash);
        }
        match at_anchor {
            None => {
                let (rows, _) = store::chain_end(&transaction).map_err(ReadError::from)?;
                return Err(VerifyError::Tampered(Tampering::Shorter { rows, anchored: newest.seq }));
            }
            Some(hash) if hash != newest.hash => {
                return Err(VerifyError::Tampered(Tampering::HeadMismatch { seq: newest.seq }));
            }
            Some(_) => {}
        }
        super::walk::walk(
            &transaction,
            ChainCheck::after(newest.seq, newest.hash.clone()),
            |_, broken| VerifyError::Broken(broken),
            |_, _| Ok(()),
        )?;
        Ok(AnchorState::Anchored { seq: newest.seq, keyed: key.is_some() })
    }

    /// The anchor file read (`whole`: every line, else those of its end),
    /// the MACs checked with `key`; `None` without an anchor file where none
    /// was ever made.
    fn anchor_scan(
        &self,
        connection: &Connection,
        key: Option<&AnchorKey>,
        whole: bool,
        wanted: &std::collections::BTreeSet<i64>,
    ) -> Result<Option<AnchorScan>, VerifyError> {
        let path = anchor::anchor_path(&self.path);
        let unreadable = |error| VerifyError::AnchorUnreadable { path: path.display().to_string(), error };
        let read = match whole {
            true => anchor::read_all_wanting(&path, key, wanted),
            false => anchor::read_tail(&path, key),
        };
        match read.map_err(unreadable)? {
            Some(scan) => scan.map(Some).map_err(VerifyError::Tampered),
            None => match store::anchored_since(connection).map_err(ReadError::from)? {
                Some(since) => {
                    let path = path.display().to_string();
                    Err(VerifyError::Tampered(Tampering::MissingAnchorFile { since, path }))
                }
                None => Ok(None),
            },
        }
    }

    /// The hash of the file's first row: what names this file's rows in the
    /// fleet's ledger. `None` while the file holds no row.
    pub(super) fn first_hash(&self) -> Result<Option<String>, ReadError> {
        Ok(segments::first_row_hash(&self.connection)?)
    }

    /// Up to `limit` rows after `seq`, in order, as committed, each with
    /// its `prev_hash` (a row that stores none links to the row before).
    pub(super) fn rows_after(&self, seq: i64, limit: usize) -> Result<Vec<Committed>, ReadError> {
        let mut statement =
            self.connection.prepare_cached(&format!("{} WHERE seq > ?1 ORDER BY seq LIMIT ?2", *ALL_COLUMNS))?;
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let mut rows = statement.query(rusqlite::params![seq, limit])?;
        let mut committed: Vec<Committed> = Vec::new();
        while let Some(row) = rows.next()? {
            let (kind, _, stored, link) = committed_row(row)?;
            let Some(stored) = stored else {
                return Err(ReadError::Body {
                    at: format!("row {}", link.seq),
                    error: serde::de::Error::custom(format!("unknown kind `{kind}`")),
                });
            };
            let prev_hash = match (link.prev_hash, committed.last()) {
                (Some(prev_hash), _) => prev_hash,
                (None, Some(previous)) => previous.hash.clone(),
                (None, None) => store::hash_before(&self.connection, link.seq)?,
            };
            committed.push(Committed { seq: link.seq, row: stored, prev_hash, hash: link.hash });
        }
        Ok(committed)
    }

    /// Writes every row of calls started at or after `since` (all without it)
    /// as JSON lines, in `seq` order: `{"kind","seq","hash","record"}`, the
    /// record being the row's body as stored. Returns the rows written.
    pub fn export(&self, since: Option<SystemTime>, out: impl Write) -> Result<u64, ReadError> {
        self.export_with_archive(since, None, out)
    }

    /// [`Self::export`], preceded, with `archive`, by the rows of the
    /// released segments read from their files in that folder (rows the
    /// file no longer holds; the files are read as they are: `verify
    /// --archive` checks them).
    pub fn export_with_archive(
        &self,
        since: Option<SystemTime>,
        archive: Option<&Path>,
        mut out: impl Write,
    ) -> Result<u64, ReadError> {
        let since_ms = since.map_or(i64::MIN, store::unix_ms);
        let transaction = self.connection.unchecked_transaction()?;
        let mut written = 0;
        if let Some(dir) = archive {
            let released_end = segments::released_end(&transaction)?.map_or(0, |(seq, _)| seq);
            written += export_archived(dir, &self.path, released_end, since_ms, &mut out)?;
        }
        let mut statement = transaction.prepare(&format!(
            "SELECT {}, seq, {}, {} FROM ledger WHERE started_ms >= ?1 ORDER BY seq",
            store::KIND_SQL,
            store::HASH_SQL,
            store::BODY_SQL
        ))?;
        let mut rows = statement.query([since_ms])?;
        while let Some(row) = rows.next()? {
            let kind: String = row.get(0)?;
            let hash: String = row.get(2)?;
            let body: String = row.get(3)?;
            export_line(&mut out, &kind, row.get(1)?, &hash, &body)?;
            written += 1;
        }
        out.flush()?;
        Ok(written)
    }

    fn bodies<T: serde::de::DeserializeOwned>(&self, query: sql::Query) -> Result<Vec<T>, ReadError> {
        let mut statement = self.connection.prepare(&query.sql)?;
        let mut rows = statement.query(params_from_iter(values(query.params)))?;
        let mut bodies = Vec::new();
        while let Some(row) = rows.next()? {
            let at: String = row.get(0)?;
            let body: String = row.get(1)?;
            bodies.push(parse_body(at, &body)?);
        }
        Ok(bodies)
    }
}

/// Hours asked of the roll-ups at a time by [`newest`].
const HOURS_PAGE: usize = 48;

/// The newest `limit` closed calls `filter` selects, newest first. A filter
/// on a member, key, model or category is answered hour by hour: the
/// roll-ups name the hours holding such a call ([`sql::hours_with_calls`]),
/// and only those hours' rows are read, newest first, until `limit` calls
/// are found. Read through the index alone, a value no recent call has made
/// the search pass over every newer call (~2 s on a million calls for a
/// category none had). `hours` and `bodies` run a query on the store.
pub(super) fn newest(
    filter: &Filter,
    limit: usize,
    dialect: Dialect,
    hours: impl Fn(sql::Query) -> Result<Vec<i64>, ReadError>,
    bodies: impl Fn(sql::Query) -> Result<Vec<CallRecord>, ReadError>,
) -> Result<Vec<CallRecord>, ReadError> {
    let Filter { member, key_id, model, category, since: _, until: _ } = filter;
    if [member, key_id, model, category].iter().all(|value| value.is_none()) {
        return bodies(sql::newest(filter, limit, dialect));
    }
    let mut found = Vec::new();
    let mut before = None;
    while found.len() < limit {
        let page = hours(sql::hours_with_calls(filter, before, HOURS_PAGE, dialect))?;
        for &hour in &page {
            let within = within_hour(filter, hour);
            found.extend(bodies(sql::newest(&within, limit - found.len(), dialect))?);
            if found.len() >= limit {
                return Ok(found);
            }
        }
        match page.last() {
            Some(&last) if page.len() == HOURS_PAGE => before = Some(last),
            _ => return Ok(found),
        }
    }
    Ok(found)
}

/// `filter` narrowed to the hour starting at `hour` (ms).
fn within_hour(filter: &Filter, hour: i64) -> Filter {
    let at = |ms: i64| std::time::UNIX_EPOCH + Duration::from_millis(u64::try_from(ms).unwrap_or(0));
    let (start, end) = (at(hour), at(hour + super::rollup::HOUR_MS));
    Filter {
        since: Some(filter.since.map_or(start, |since| since.max(start))),
        until: Some(filter.until.map_or(end, |until| until.min(end))),
        ..filter.clone()
    }
}

/// One closed call by its id, from the window its id names (see
/// [`sql::closed_call`]) and, when it is not there, from every closing row.
pub(super) fn closed_call(
    call_id: &str,
    dialect: Dialect,
    bodies: impl Fn(sql::Query) -> Result<Vec<CallRecord>, ReadError>,
) -> Result<Option<CallRecord>, ReadError> {
    if let Some(query) = sql::closed_call(call_id, dialect)
        && let Some(record) = bodies(query)?.pop()
    {
        return Ok(Some(record));
    }
    Ok(bodies(sql::any_closed_call(call_id, dialect))?.pop())
}

/// A row's body, or which row holds one that does not parse.
pub(super) fn parse_body<T: serde::de::DeserializeOwned>(at: String, body: &str) -> Result<T, ReadError> {
    serde_json::from_str(body).map_err(|error| ReadError::Body { at, error })
}

/// One export line: `{"kind","seq","hash","record"}`.
fn export_line(out: &mut impl Write, kind: &str, seq: i64, hash: &str, body: &str) -> std::io::Result<()> {
    let kind = serde_json::Value::String(kind.to_owned());
    writeln!(out, r#"{{"kind":{kind},"seq":{seq},"hash":"{hash}","record":{body}}}"#)
}

/// Writes the archived rows up to `released_end` (the rows the file no
/// longer holds) of calls started at or after `since_ms`; returns how many.
fn export_archived(
    dir: &Path,
    ledger: &Path,
    released_end: i64,
    since_ms: i64,
    out: &mut impl Write,
) -> Result<u64, ReadError> {
    let unreadable = |path: &Path, error: ArchiveError| ReadError::Archive { file: path.display().to_string(), error };
    let files = archive::files(dir, ledger).map_err(|error| unreadable(dir, error.into()))?;
    let mut written = 0;
    for path in &files {
        let (header, mut file) = ArchiveFile::open(path).map_err(|error| unreadable(path, error))?;
        if header.first_seq > released_end {
            continue;
        }
        while let Some(row) = file.next_row().map_err(|error| unreadable(path, error))? {
            if row.seq <= released_end && row.started_ms >= since_ms {
                export_line(out, &row.kind, row.seq, &row.hash, &row.body)?;
                written += 1;
            }
        }
    }
    Ok(written)
}

/// The segments (their table checked: [`segments::check_table`]), and the
/// chain's check set to start after the last released one.
fn live_start(connection: &Connection) -> Result<(ChainCheck, Vec<Segment>), VerifyError> {
    let segments = segments::list(connection).map_err(ReadError::from)?;
    segments::check_table(&segments).map_err(|(segment, reason)| {
        VerifyError::Segment(SegmentBreak { segment: format!("{segment} in the segments' table"), reason })
    })?;
    let chain = match segments.iter().rev().find(|segment| segment.state == SegmentState::Released) {
        Some(last) => ChainCheck::after(last.last_seq, last.head_hash.clone()),
        None => ChainCheck::default(),
    };
    Ok((chain, segments))
}

fn counts_of(segments: &[Segment], first_live: i64) -> SegmentCounts {
    let released = segments.iter().filter(|segment| segment.state == SegmentState::Released).count();
    SegmentCounts { sealed: segments.len() as u64, released: released as u64, first_live, archives: 0 }
}

/// Walks the rows the file holds after `chain`'s start: the chain's check,
/// each sealed segment's head against its last row, and `newest` (the
/// newest anchored head) against its row. A break inside a segment names it.
fn walk_live(
    connection: &Connection,
    chain: &mut ChainCheck,
    segments: &[Segment],
    newest: Option<&Anchor>,
) -> Result<(), VerifyError> {
    let start = chain.last_seq();
    let mut heads = segments.iter().filter(|segment| segment.last_seq > start).peekable();
    let broken = |expected, broken| in_segment(segments, expected, broken);
    let heads_checked = |seq, hash: &str| {
        if let Some(newest) = newest
            && newest.seq == seq
            && newest.hash != hash
        {
            return Err(VerifyError::Tampered(Tampering::HeadMismatch { seq }));
        }
        match heads.next_if(|segment| segment.last_seq == seq) {
            Some(segment) if segment.head_hash != hash => {
                Err(segment_break(segment, "its head_hash is not its last row's hash".to_owned()))
            }
            _ => Ok(()),
        }
    };
    *chain = super::walk::walk(connection, std::mem::take(chain), broken, heads_checked)?;
    match heads.next() {
        Some(segment) => {
            Err(segment_break(segment, format!("the file's rows end at row {}, inside it", chain.last_seq())))
        }
        None => Ok(()),
    }
}

/// `broken`, named after the segment holding row `expected` when one does.
fn in_segment(segments: &[Segment], expected: i64, broken: ChainBreak) -> VerifyError {
    match segments.iter().find(|segment| (segment.first_seq..=segment.last_seq).contains(&expected)) {
        Some(segment) => segment_break(segment, broken.to_string()),
        None => VerifyError::Broken(broken),
    }
}

fn segment_break(segment: &Segment, reason: String) -> VerifyError {
    VerifyError::Segment(SegmentBreak { segment: segment.to_string(), reason })
}

/// Each released segment's head against the anchor's line at its sequence.
fn check_released_heads(segments: &[Segment], scan: &AnchorScan) -> Result<(), VerifyError> {
    for segment in segments.iter().filter(|segment| segment.state == SegmentState::Released) {
        match scan.found.get(&segment.last_seq) {
            Some(hash) if *hash == segment.head_hash => {}
            Some(_) => {
                return Err(segment_break(segment, "its head is not the hash anchored for its last row".to_owned()));
            }
            None => return Err(segment_break(segment, "its head is in no line of the anchor file".to_owned())),
        }
    }
    Ok(())
}

/// An archive file that cannot be opened or whose header does not parse.
fn unreadable_archive(path: &Path, error: &ArchiveError) -> VerifyError {
    VerifyError::Segment(SegmentBreak {
        segment: format!("the archive {}", path.display()),
        reason: format!("unreadable: {error}"),
    })
}

/// Row `expected` is in no archive file (the one at `path` starts later).
fn archive_gap(segments: &[Segment], expected: i64, path: Option<&Path>) -> VerifyError {
    let segment = segments.iter().find(|segment| segment.first_seq == expected);
    let missing = match segment {
        Some(segment) => format!("{segment}, released from the file"),
        None => format!("the segment starting at row {expected}"),
    };
    let reason = match path {
        Some(path) => format!(
            "its archive file is missing, or out of order: {} comes where it was due",
            path.file_name().map(|name| name.to_string_lossy().into_owned()).unwrap_or_default()
        ),
        None => "its archive file is missing".to_owned(),
    };
    VerifyError::Segment(SegmentBreak { segment: missing, reason })
}

/// Walks one archive file's rows through `chain`: a break, a cut (rows end
/// before the header's last) or a head other than the header's is named.
fn walk_archive(
    path: &Path,
    header: &Header,
    mut file: ArchiveFile,
    chain: &mut ChainCheck,
) -> Result<(), VerifyError> {
    let name = path.file_name().map(|name| name.to_string_lossy().into_owned()).unwrap_or_default();
    let named = |reason: String| {
        VerifyError::Segment(SegmentBreak {
            segment: format!("segment {} (rows {}-{}, archive {name})", header.id, header.first_seq, header.last_seq),
            reason,
        })
    };
    loop {
        let row = match file.next_row() {
            Ok(Some(row)) => row,
            Ok(None) => break,
            Err(error) => {
                return Err(named(format!("truncated or unreadable after row {}: {error}", chain.last_seq())));
            }
        };
        let (stored, link) = row.checked();
        chain.next(&row.kind, &row.call_id, stored, link).map_err(|broken| named(broken.to_string()))?;
    }
    if chain.last_seq() != header.last_seq {
        return Err(named(format!("truncated: its rows end at row {}", chain.last_seq())));
    }
    if chain.head() != header.head_hash {
        return Err(named("its last row's hash is not the head its header names".to_owned()));
    }
    Ok(())
}

/// The file's digest against the one recorded for its segment when it was
/// written (a file no segment records is left to the chain's check).
fn check_digest(path: &Path, header: &Header, recorded: Option<&Segment>) -> Result<(), VerifyError> {
    let Some(segment) = recorded else { return Ok(()) };
    let Some(sha256) = &segment.archive_sha256 else { return Ok(()) };
    let found = archive::digest(path).map_err(|error| unreadable_archive(path, &ArchiveError::Io(error)))?;
    if &found != sha256 || segment.last_seq != header.last_seq {
        return Err(segment_break(segment, format!("its archive {} is not the file written", path.display())));
    }
    Ok(())
}

/// The parameters as SQLite values.
pub(super) fn values(params: Vec<Param>) -> Vec<Value> {
    params
        .into_iter()
        .map(|param| match param {
            Param::Text(text) => Value::Text(text),
            Param::Integer(integer) => Value::Integer(integer),
        })
        .collect()
}

/// What budgets, `GET /v1/usage` and `weir ledger query` read: a gateway's
/// own file ([`Reader`]) or the fleet's table ([`super::SharedReader`]).
pub trait LedgerRead {
    /// The closed calls, by start time.
    fn records(&self, filter: &Filter) -> Result<Vec<CallRecord>, ReadError>;
    /// The newest `limit` closed calls the filter selects, newest first.
    fn newest(&self, filter: &Filter, limit: usize) -> Result<Vec<CallRecord>, ReadError>;
    /// One closed call by its id.
    fn closed_call(&self, call_id: &str) -> Result<Option<CallRecord>, ReadError>;
    /// The calls that opened and never closed: what a crash (or a call still
    /// running) leaves.
    fn unclosed(&self, filter: &Filter) -> Result<Vec<CallOpening>, ReadError>;
    /// Tokens and cost of the calls closed that started at or after `since`,
    /// by caller (key, member, team): what budgets are rebuilt from at start.
    /// With `cut_off_holds`, a call held and never closed (a crash cut it off)
    /// counts its worst case.
    fn spend_by_caller(&self, since: SystemTime, cut_off_holds: bool) -> Result<Vec<CallerSpend>, ReadError>;
    /// Calls, tokens by kind, cost, errors by category and latency over the
    /// closed calls, grouped or not, and as a series with a bucket.
    fn usage(&self, query: &UsageQuery) -> Result<Sums, ReadError>;
    /// [`Self::usage`] without a series.
    fn sums(&self, filter: &Filter, group_by: Option<GroupBy>) -> Result<Sums, ReadError> {
        self.usage(&UsageQuery { filter: filter.clone(), group_by, bucket: None })
    }
}

impl LedgerRead for Reader {
    fn records(&self, filter: &Filter) -> Result<Vec<CallRecord>, ReadError> {
        self.bodies(sql::records(filter, Dialect::Sqlite))
    }

    fn newest(&self, filter: &Filter, limit: usize) -> Result<Vec<CallRecord>, ReadError> {
        let hours = |query| run(&self.connection, query, |row| row.get(0));
        newest(filter, limit, Dialect::Sqlite, hours, |query| self.bodies(query))
    }

    fn closed_call(&self, call_id: &str) -> Result<Option<CallRecord>, ReadError> {
        closed_call(call_id, Dialect::Sqlite, |query| self.bodies(query))
    }

    fn unclosed(&self, filter: &Filter) -> Result<Vec<CallOpening>, ReadError> {
        self.bodies(sql::unclosed(filter, Dialect::Sqlite))
    }

    fn spend_by_caller(&self, since: SystemTime, cut_off_holds: bool) -> Result<Vec<CallerSpend>, ReadError> {
        self.spend(&Plan::of(Span::since(since)), cut_off_holds)
    }

    fn usage(&self, query: &UsageQuery) -> Result<Sums, ReadError> {
        let transaction = self.connection.unchecked_transaction()?;
        let span = summary::read_span(&query.filter, Dialect::Sqlite, |probe| {
            Ok::<_, ReadError>(!run(&transaction, probe, |_| Ok(()))?.is_empty())
        })?;
        let sums = usage_in(&transaction, query, &Plan::for_usage(query, span, true))?;
        transaction.finish()?;
        Ok(sums)
    }
}

impl Reader {
    /// [`LedgerRead::usage`] read from every row in its range, none from the
    /// roll-ups: the baseline the roll-ups answer as (the benchmark's and the
    /// tests' reference).
    pub fn usage_from_rows(&self, query: &UsageQuery) -> Result<Sums, ReadError> {
        let transaction = self.connection.unchecked_transaction()?;
        let sums = usage_in(&transaction, query, &Plan::rows_only(Span::of(&query.filter)))?;
        transaction.finish()?;
        Ok(sums)
    }

    /// [`LedgerRead::spend_by_caller`] read from every row since `since`.
    #[cfg(test)]
    pub(super) fn spend_from_rows(
        &self,
        since: SystemTime,
        cut_off_holds: bool,
    ) -> Result<Vec<CallerSpend>, ReadError> {
        self.spend(&Plan::rows_only(Span::since(since)), cut_off_holds)
    }

    fn spend(&self, plan: &Plan, cut_off_holds: bool) -> Result<Vec<CallerSpend>, ReadError> {
        let transaction = self.connection.unchecked_transaction()?;
        let mut rows = Vec::new();
        for query in plan.spend_queries(cut_off_holds, Dialect::Sqlite) {
            rows.extend(run(&transaction, query, caller_spend)?);
        }
        transaction.finish()?;
        Ok(summary::merge_spend(rows))
    }
}

/// `query` answered as `plan` says, inside the caller's transaction.
fn usage_in(connection: &Connection, query: &UsageQuery, plan: &Plan) -> Result<Sums, ReadError> {
    let queries = plan.usage_queries(query, Dialect::Sqlite);
    let mut sums = Vec::new();
    for query in queries.sums {
        sums.extend(run(connection, query, sum_row)?);
    }
    let mut latency = Vec::new();
    for query in queries.latency {
        latency.extend(run(connection, query, latency_row)?);
    }
    let days = match queries.days {
        Some(query) => run(connection, query, day_row)?,
        None => Vec::new(),
    };
    Ok(summary::assemble(query, &sums, &latency, &days))
}

/// Runs `query`, each row read by `read`.
fn run<T>(
    connection: &Connection,
    query: sql::Query,
    read: impl FnMut(&rusqlite::Row<'_>) -> rusqlite::Result<T>,
) -> Result<Vec<T>, ReadError> {
    let mut statement = connection.prepare(&query.sql)?;
    let rows = statement.query_map(params_from_iter(values(query.params)), read)?;
    Ok(rows.collect::<Result<_, _>>()?)
}

fn caller_spend(row: &rusqlite::Row<'_>) -> rusqlite::Result<CallerSpend> {
    Ok(CallerSpend {
        key_id: row.get(0)?,
        member: row.get(1)?,
        team: row.get(2)?,
        tokens: tokens_from(row, 3)?,
        cost_usd: row.get(8)?,
    })
}

fn sum_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<SumRow> {
    Ok(SumRow {
        bucket: row.get(0)?,
        group: row.get(1)?,
        category: row.get(2)?,
        latency_ms: row.get(3)?,
        calls: row.get(4)?,
        tokens: tokens_from(row, 5)?,
        cost_usd: row.get(10)?,
        calls_without_cost: row.get(11)?,
    })
}

fn day_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<DayRow> {
    Ok(DayRow {
        bucket: row.get(0)?,
        value: row.get(1)?,
        category: row.get(2)?,
        calls: row.get(3)?,
        tokens: tokens_from(row, 4)?,
        cost_usd: row.get(9)?,
        calls_without_cost: row.get(10)?,
        latency: Histogram::from_bytes(row.get_ref(11)?.as_blob()?),
    })
}

fn latency_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<LatencyRow> {
    Ok(LatencyRow { bucket: row.get(0)?, group: row.get(1)?, latency_bucket: row.get(2)?, calls: row.get(3)? })
}

/// A row's place in its chain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Link {
    pub seq: i64,
    /// `None` where the row stores none (schema version 5 on): the row
    /// before's hash.
    pub prev_hash: Option<String>,
    pub hash: String,
    /// The body read is rebuilt from the columns (a compact row: see
    /// `compact`), so the hash covers them and they need no comparing.
    pub covers_columns: bool,
}

/// Walks one chain, row by row in order: `seq` without a gap from 1, each
/// `prev_hash` the previous row's `hash`, each `hash` recomputed from the
/// row, and the columns equal to the body's fields. Shared by the file's
/// check and the fleet table's (one chain per source file). It holds the
/// last row's link only, so a walk's memory does not grow with the chain
/// (the distinct calls are counted apart: [`DISTINCT_CALLS`]).
#[derive(Debug)]
pub(super) struct ChainCheck {
    previous: (i64, String),
}

impl Default for ChainCheck {
    fn default() -> Self {
        Self { previous: (0, GENESIS.to_owned()) }
    }
}

/// The distinct calls of the rows: every row of a call carries the call's
/// start (the chain's check holds each row's columns to its body), so the
/// calls are the distinct `(started_ms, call_id)`, which SQLite counts by
/// walking its index on them in order, one key in memory at a time. A call
/// whose rows hold its id in both stored forms (see `callid`: only one whose
/// rows straddle the upgrade to schema version 6) counts twice here: telling
/// them apart would need a lookup per text row, or a table of every key.
pub(super) const DISTINCT_CALLS: &str = "SELECT COUNT(*) FROM (SELECT DISTINCT started_ms, call_id FROM ledger)";

impl ChainCheck {
    /// A check that starts after row `seq` whose hash is `hash` (the start's
    /// check of the rows after the anchored one).
    pub(super) fn after(seq: i64, hash: String) -> Self {
        Self { previous: (seq, hash) }
    }

    /// The `seq` of the last row that checked out (0 before any).
    pub(super) fn last_seq(&self) -> i64 {
        self.previous.0
    }

    /// The `seq` and hash of the last row that checked out.
    pub(super) fn last(&self) -> (i64, &str) {
        (self.previous.0, &self.previous.1)
    }

    /// The hash of the last row that checked out.
    pub(super) fn head(&self) -> &str {
        &self.previous.1
    }

    /// Checks the next row; `stored` is `None` for a kind this weir does not know.
    pub(super) fn next(
        &mut self,
        kind: &str,
        call_id: &str,
        stored: Option<Row>,
        link: Link,
    ) -> Result<(), ChainBreak> {
        let content = match &stored {
            Some(stored) => check_content(&self.previous.1, &link, kind, stored, stored.body.as_bytes()),
            None => Content::Sound,
        };
        self.next_checked(kind, call_id, stored.is_some(), &link, content)
    }

    /// Checks the next row, its content already checked against the hash of
    /// the row read before it (which is the last row checked, when the
    /// row's `seq` follows it): `known` is whether this weir knows its kind.
    pub(super) fn next_checked(
        &mut self,
        kind: &str,
        call_id: &str,
        known: bool,
        link: &Link,
        content: Content,
    ) -> Result<(), ChainBreak> {
        let Link { seq, prev_hash, hash, covers_columns: _ } = link;
        let seq = *seq;
        let broken = |reason: String| ChainBreak { seq, call_id: call_id.to_owned(), reason };
        if let Content::Undecodable(reason) = content {
            return Err(broken(reason));
        }
        if seq != self.previous.0 + 1 {
            return Err(broken(format!("the row before it (seq {}) is missing", seq - 1)));
        }
        if prev_hash.as_ref().is_some_and(|prev_hash| *prev_hash != self.previous.1) {
            return Err(broken(format!("its prev_hash does not link to row {}", self.previous.0)));
        }
        if !known {
            return Err(broken(format!("unknown kind `{kind}`")));
        }
        if let Content::Unsound(reason) = content {
            return Err(broken(reason));
        }
        // The hash is copied into the one kept: its allocation is reused.
        self.previous.0 = seq;
        self.previous.1.clone_from(hash);
        Ok(())
    }

    /// The report of a walk whose rows hold `calls` distinct calls.
    pub(super) fn report(&self, calls: u64) -> VerifyReport {
        VerifyReport { rows: u64::try_from(self.previous.0).unwrap_or(0), calls }
    }
}

/// What a row's content showed, checked against the hash of the row
/// before it ([`check_content`]).
pub(super) enum Content {
    Sound,
    /// A compact body that could not be rebuilt: named before anything else
    /// of its row, as nothing else of it can be read.
    Undecodable(String),
    /// Its hash, or a text body's columns, do not hold: why.
    Unsound(String),
}

/// A row's content against `before`, the hash of the row before it: its
/// hash recomputed over `body` (the body as stored, or a compact one
/// rebuilt), and a text body's columns held to it (a rebuilt body's hash
/// covers its columns).
pub(super) fn check_content(before: &str, link: &Link, kind: &str, stored: &Row, body: &[u8]) -> Content {
    if !store::is_hex_of(&link.hash, &store::chain_digest(before, link.seq, kind, body)) {
        return Content::Unsound("its hash does not match its content".to_owned());
    }
    if link.covers_columns {
        return Content::Sound;
    }
    let body = &stored.body;
    // The columns are derived without encoding the body again: it is
    // the stored one, which the hash above covers.
    let derived = match stored.kind {
        Kind::Open => serde_json::from_str::<CallOpening>(body).map(|opening| Row::opening_columns(&opening)),
        Kind::Hold => serde_json::from_str::<HoldRecord>(body).map(|hold| Row::hold_columns(&hold)),
        Kind::Close => serde_json::from_str::<CallRecord>(body).map(|record| Row::closing_columns(&record)),
    };
    match derived {
        Ok(derived) if same_columns(stored, &derived) => Content::Sound,
        Err(error) => Content::Unsound(format!("its body does not parse: {error}")),
        Ok(_) => Content::Unsound("its columns do not match its body".to_owned()),
    }
}

/// The file's distinct calls ([`DISTINCT_CALLS`]).
fn distinct_calls(connection: &Connection) -> Result<u64, ReadError> {
    Ok(connection.query_row(DISTINCT_CALLS, [], |row| row.get(0))?)
}

/// A row of [`ALL_COLUMNS`] as the chain's check takes it: its kind as stored, its
/// call, the row (`None` for an unknown kind; a NULL body read as empty) and
/// its link.
pub(super) fn committed_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<(String, String, Option<Row>, Link)> {
    let kind: String = row.get(1)?;
    let CallId(call_id) = row.get(2)?;
    let body: Option<String> = row.get(16)?;
    let stored = stored_row(row, &kind, &call_id, body.as_deref().unwrap_or_default())?;
    let prev_hash: String = row.get(17)?;
    // The body is read as text here: a check of the row holds its columns to it.
    let link = Link {
        seq: row.get(0)?,
        prev_hash: Some(prev_hash).filter(|prev_hash| !prev_hash.is_empty()),
        hash: row.get(18)?,
        covers_columns: false,
    };
    Ok((kind, call_id, stored, link))
}

/// The row as its columns hold it (`None` for an unknown kind).
pub(super) fn stored_row(
    row: &rusqlite::Row<'_>,
    kind: &str,
    call_id: &str,
    body: &str,
) -> rusqlite::Result<Option<Row>> {
    let Some(kind) = Kind::parse(kind) else { return Ok(None) };
    Ok(Some(Row {
        kind,
        call_id: call_id.to_owned(),
        at_ms: row.get(3)?,
        started_ms: row.get(4)?,
        key_id: row.get(5)?,
        member: row.get(6)?,
        team: row.get(7)?,
        model: row.get(8)?,
        category: row.get(9)?,
        tokens: tokens_from(row, 10)?,
        cost_usd: row.get(15)?,
        body: body.to_owned(),
        charged_worst: row.get(19)?,
        served: None,
        stands_alone: false,
    }))
}

/// Token counts from five columns in the table's order (input, output, cache
/// read, cache write, reasoning), the first at `first`.
pub(super) fn tokens_from(row: &rusqlite::Row<'_>, first: usize) -> rusqlite::Result<Tokens> {
    Ok(Tokens {
        input: row.get(first)?,
        output: row.get(first + 1)?,
        cache_read: row.get(first + 2)?,
        cache_write: row.get(first + 3)?,
        reasoning: row.get(first + 4)?,
    })
}

/// Whether two rows agree, the cost to within rounding: a cost read back
/// from the body's JSON text may differ from the stored float in its last bit.
fn same_columns(stored: &Row, derived: &Row) -> bool {
    // Every field named, so a column added later is compared here too. The
    // body is the stored one (hashed); `served` and `stands_alone` are what a
    // writer knew, not columns.
    let Row {
        kind,
        call_id,
        at_ms,
        started_ms,
        key_id,
        member,
        team,
        model,
        category,
        tokens,
        cost_usd,
        body: _,
        charged_worst,
        served: _,
        stands_alone: _,
    } = stored;
    let cost = match (*cost_usd, derived.cost_usd) {
        (Some(a), Some(b)) => (a - b).abs() <= 1e-12 * a.abs().max(b.abs()).max(1.0),
        (a, b) => a.is_none() && b.is_none(),
    };
    cost && *kind == derived.kind
        && *call_id == derived.call_id
        && (*at_ms, *started_ms) == (derived.at_ms, derived.started_ms)
        && (key_id, member, team) == (&derived.key_id, &derived.member, &derived.team)
        && (model, category) == (&derived.model, &derived.category)
        && *tokens == derived.tokens
        && *charged_worst == derived.charged_worst
}

/// A time as the CLI and `/v1/usage` take it: RFC 3339
/// (`2026-12-01T00:00:00Z`) or a duration back from now (`24h`, `30m`).
pub fn parse_time(text: &str) -> Result<SystemTime, String> {
    let text = text.trim();
    if let Ok(time) = humantime::parse_rfc3339_weak(text) {
        return Ok(time);
    }
    humantime::parse_duration(text).ok().and_then(|back| SystemTime::now().checked_sub(back)).ok_or_else(|| {
        format!("`{text}` is neither an RFC 3339 time (2026-12-01T00:00:00Z) nor a duration back from now (24h, 30m)")
    })
}

/// Moves the rows `path`'s log holds into the file before reading it (see
/// `log`: a running gateway's thread moves them in its own time), so a
/// reader sees every committed row. A reader that cannot write the file (its
/// folder is read-only to it) reads what the file holds, logged.
fn catch_up(path: &Path, max_bytes: Option<u64>) {
    if !log::has_segments(path) {
        return;
    }
    let caught_up = store::open_writer(path, LedgerSync::Full, max_bytes)
        .map_err(|error| error.to_string())
        .and_then(|connection| log::catch_up(&connection, path).map_err(|error| error.to_string()));
    if let Err(error) = caught_up {
        tracing::warn!(path = %path.display(), %error, "cannot apply the ledger's log before reading: rows it holds are not read");
    }
}
