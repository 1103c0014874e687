//! The ledger's log: where a committed row is durable before SQLite holds it.
//!
//! Why: a SQLite commit on the answer's path (BEGIN's read lock, the WAL
//! frames' `pwrite`s, six `fcntl` lock calls, COMMIT) cost a call 40–70 µs of
//! its worker's CPU at one caller. One `write(2)` of the batch's lines costs a
//! few µs and is as durable against a killed process: the kernel holds the
//! bytes once the call returns, as it holds SQLite's WAL frames under
//! `synchronous = NORMAL`. Under `sync = "full"` the log is also
//! `fdatasync`ed before the batch is acknowledged. The ledger's thread then
//! moves the logged rows into SQLite in large batches (see `writer`), where
//! the chain, the queries and the shipper read them.
//!
//! Layout: segment files beside the ledger file, named `<file>-log-<time>-<pid>-<n>`
//! (so `ls ledger.db*` shows them, and a name sorts by when it was opened),
//! one row a line: the row's columns as a JSON array (an object with field
//! names in segments written before 2026-12-03, still read), a tab, then the
//! row's body verbatim (compact JSON holds no raw tab or newline). A process writes only
//! its own segments and holds an exclusive lock (`flock`) on the one it
//! appends to; it starts a new one past [`SEGMENT_BYTES`].
//!
//! Which lines SQLite holds is in the file's `ledger_applied` table (a
//! segment's name and how many of its lines are applied), changed in the same
//! transaction as the rows. So whoever applies a segment's lines (the ledger's
//! thread, a reader catching up, a gateway starting after a crash: see
//! [`catch_up`]) applies each line once. A segment is deleted once it is
//! applied whole and no process holds its lock; its `ledger_applied` row
//! stays, so that no line is applied twice.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use rusqlite::Connection;

use super::store::{self, Row, Run};

/// A segment past this size is retired and the next batch starts a new one.
pub(super) const SEGMENT_BYTES: u64 = 8 * 1024 * 1024;

/// Segments opened by this process, for unique names.
static OPENED: AtomicU64 = AtomicU64::new(0);

/// The segment this ledger appends to, and how to sync it.
pub(super) struct Log {
    db: PathBuf,
    /// `sync = "full"`: each append is `fdatasync`ed.
    durable: bool,
    active: Option<Segment>,
    /// The encoded lines of a batch, kept between batches for its capacity.
    buffer: Vec<u8>,
}

struct Segment {
    name: Arc<str>,
    /// Held with an exclusive lock while this process appends to it.
    file: File,
    lines: u64,
    bytes: u64,
}

/// Where an append's lines went.
pub(super) struct Appended {
    pub segment: Arc<str>,
    /// The line number (from 0) of the batch's first row.
    pub first_line: u64,
    /// The segment this append filled and left: deleted once applied.
    pub retired: Option<Arc<str>>,
}

impl Log {
    pub(super) fn new(db: &Path, durable: bool) -> Log {
        Log { db: db.to_path_buf(), durable, active: None, buffer: Vec::new() }
    }

    /// Whether a segment is open (a call appends only then; the ledger's
    /// thread opens one).
    pub(super) fn is_open(&self) -> bool {
        self.active.is_some()
    }

    /// Starts a new segment: created under a name no catch-up looks at,
    /// locked, then renamed into place, so no other process can take (and
    /// delete) it between its creation and its lock.
    pub(super) fn open(&mut self) -> io::Result<()> {
        let name = segment_name(&self.db);
        let folder = folder(&self.db);
        let hidden = folder.join(format!(".{name}.new"));
        let mut options = OpenOptions::new();
        options.append(true).create_new(true);
        // Owner-only whatever the umask: a segment holds rows (see `modes`).
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        let file = options.open(&hidden)?;
        file.lock()?;
        std::fs::rename(&hidden, segment_path(&self.db, &name))?;
        self.active = Some(Segment { name: Arc::from(name), file, lines: 0, bytes: 0 });
        Ok(())
    }

    /// Appends `rows` as lines with one write (and an `fdatasync` under
    /// `sync = "full"`). A failed write is cut back off the segment, which is
    /// then left (the next append opens another), so a row refused to its
    /// caller is never applied later.
    pub(super) fn append<'a>(&mut self, rows: impl Iterator<Item = &'a Row>) -> io::Result<Appended> {
        if self.active.is_none() {
            self.open()?;
        }
        let Some(segment) = self.active.as_mut() else { return Err(io::Error::other("no log segment")) };
        self.buffer.clear();
        let mut count = 0;
        for row in rows {
            encode(row, &mut self.buffer)?;
            count += 1;
        }
        let written = segment.file.write_all(&self.buffer).and_then(|()| match self.durable {
            true => segment.file.sync_data(),
            false => Ok(()),
        });
        if let Err(error) = written {
            let _ = segment.file.set_len(segment.bytes);
            self.active = None;
            return Err(error);
        }
        let first_line = segment.lines;
        segment.lines += count;
        segment.bytes += self.buffer.len() as u64;
        let name = segment.name.clone();
        let retired = match segment.bytes >= SEGMENT_BYTES {
            true => self.active.take().map(|segment| segment.name),
            false => None,
        };
        Ok(Appended { segment: name, first_line, retired })
    }
}

#[cfg(test)]
impl Log {
    /// Makes the next append fail, as a full disk would: the segment's handle
    /// becomes one that cannot write.
    pub(super) fn break_segment(&mut self) {
        if let Some(segment) = &mut self.active {
            segment.file = File::open(segment_path(&self.db, &segment.name)).expect("the segment reopens read-only");
        }
    }
}

/// The folder the ledger file (and so its log) is in.
fn folder(db: &Path) -> &Path {
    db.parent().filter(|folder| !folder.as_os_str().is_empty()).unwrap_or(Path::new("."))
}

/// What every segment of `db`'s log is named from.
fn prefix(db: &Path) -> String {
    let file = db.file_name().map(|name| name.to_string_lossy().into_owned()).unwrap_or_default();
    format!("{file}-log-")
}

fn segment_name(db: &Path) -> String {
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |since| since.as_nanos());
    let n = OPENED.fetch_add(1, Ordering::Relaxed);
    format!("{}{nanos:020}-{}-{n}", prefix(db), std::process::id())
}

/// A row's line: its columns, a tab, its body, a newline.
fn encode(row: &Row, into: &mut Vec<u8>) -> io::Result<()> {
    serde_json::to_writer(&mut *into, row)?;
    into.push(b'\t');
    into.extend_from_slice(row.body.as_bytes());
    into.push(b'\n');
    Ok(())
}

/// A line (without its newline) back into its row.
fn decode(line: &[u8]) -> Result<Row, String> {
    let tab = line.iter().position(|byte| *byte == b'\t').ok_or("no tab")?;
    let mut row: Row = serde_json::from_slice(&line[..tab]).map_err(|error| error.to_string())?;
    row.body = std::str::from_utf8(&line[tab + 1..]).map_err(|error| error.to_string())?.to_owned();
    Ok(row)
}

/// The segments of `db`'s log, oldest first.
fn segments(db: &Path) -> io::Result<Vec<(String, PathBuf)>> {
    let prefix = prefix(db);
    let mut found = Vec::new();
    for entry in std::fs::read_dir(folder(db))? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with(&prefix) {
            found.push((name, entry.path()));
        }
    }
    found.sort();
    Ok(found)
}

/// Whether `db` has a log segment (a reader then catches up first).
pub(super) fn has_segments(db: &Path) -> bool {
    segments(db).is_ok_and(|found| !found.is_empty())
}

/// Why a catch-up stopped.
#[derive(Debug, thiserror::Error)]
pub(super) enum CatchUpError {
    #[error("reading the ledger's log: {0}")]
    Io(#[from] io::Error),
    #[error("applying the ledger's log: {0}")]
    Sqlite(#[from] rusqlite::Error),
}

/// Applies the lines of every segment of `db`'s log that the file does not
/// hold yet, on `connection` (a write connection to `db`), and deletes each
/// segment applied whole that no process holds. A segment's unfinished last
/// line (a write cut off by a killed process: that call's answer was never
/// returned) and a line that does not parse are left out, logged. Returns the
/// rows applied.
pub(super) fn catch_up(connection: &Connection, db: &Path) -> Result<usize, CatchUpError> {
    let mut applied = 0;
    for (name, path) in segments(db)? {
        let mut file = match File::open(&path) {
            Ok(file) => file,
            // Deleted meanwhile by another catch-up, which applied it.
            Err(error) if error.kind() == io::ErrorKind::NotFound => continue,
            Err(error) => return Err(error.into()),
        };
        let owned = match file.try_lock() {
            Ok(()) => true,
            Err(TryLockError::WouldBlock) => false,
            Err(TryLockError::Error(error)) => return Err(error.into()),
        };
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes)?;
        let (rows, torn) = parse(&name, &bytes);
        let run = Run { segment: &name, first_line: 0, rows: rows.iter().map(Option::as_ref).collect() };
        applied += store::append_logged(connection, [run])?.rows;
        if owned {
            if torn {
                tracing::warn!(segment = %name, "the ledger's log ended in an unfinished line (a killed writer); it is left out");
            }
            remove(&path);
        }
    }
    Ok(applied)
}

/// A segment's complete lines as rows (one per line, a line that does not
/// parse left out and logged), and whether an unfinished line follows them.
fn parse(name: &str, bytes: &[u8]) -> (Vec<Option<Row>>, bool) {
    let complete = bytes.iter().rposition(|byte| *byte == b'\n').map_or(0, |last| last + 1);
    let rows = bytes[..complete]
        .split(|byte| *byte == b'\n')
        .take_while(|line| !line.is_empty())
        .enumerate()
        .map(|(number, line)| {
            decode(line)
                .inspect_err(|error| tracing::error!(segment = %name, line = number, %error, "a ledger log line does not parse; it is left out"))
                .ok()
        })
        .collect();
    (rows, complete < bytes.len())
}

/// Deletes an applied segment (one another catch-up deleted first is fine).
pub(super) fn remove(path: &Path) {
    if let Err(error) = std::fs::remove_file(path)
        && error.kind() != io::ErrorKind::NotFound
    {
        tracing::warn!(path = %path.display(), %error, "cannot delete an applied ledger log segment");
    }
}

/// The path of `db`'s segment `name`.
pub(super) fn segment_path(db: &Path, name: &str) -> PathBuf {
    folder(db).join(name)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::ledger::tests::{opening, record};

    /// A line reads back as the row it was made from, its head a JSON array.
    #[test]
    fn a_line_reads_back_as_its_row() {
        let mut closing = Row::closing(&record("call-1", "alice", "m", 1, Some(0.25))).unwrap();
        closing.charged_worst = true;
        closing.stands_alone = true;
        assert!(closing.served.is_some());
        let rows = [Row::opening(&opening("call-1", "alice", "m", 1)).unwrap(), closing];
        for row in rows {
            let mut line = Vec::new();
            encode(&row, &mut line).unwrap();
            assert!(line.starts_with(b"[\""), "the head is an array: {}", String::from_utf8_lossy(&line));
            assert_eq!(line.pop(), Some(b'\n'));
            assert_eq!(decode(&line).unwrap(), row);
        }
    }

    /// A line written before the head became an array (an object with field
    /// names), or before it carried `served` and `stands_alone`, still reads
    /// back, so a segment an older weir left is applied.
    #[test]
    fn a_head_with_field_names_still_reads() {
        let row = Row::closing(&record("call-2", "bob", "m", 2, None)).unwrap();
        let head = serde_json::json!({
            "kind": "close", "call_id": row.call_id, "at_ms": row.at_ms, "started_ms": row.started_ms,
            "key_id": row.key_id, "member": row.member, "team": row.team, "model": row.model,
            "category": row.category,
            "tokens": {"input": 100, "output": 20, "cache_read": 10, "cache_write": 5, "reasoning": 2},
            "cost_usd": null, "charged_worst": false,
        });
        let line = format!("{head}\t{}", row.body);
        // What the older head does not carry reads as not known: the fill
        // parses the body for the dims and looks up the call's earlier rows.
        assert_eq!(decode(line.as_bytes()).unwrap(), Row { served: None, stands_alone: false, ..row.clone() });
        // The array head of the weir before them: twelve columns.
        let mut array = serde_json::to_value(&row).unwrap();
        array.as_array_mut().unwrap().truncate(12);
        let line = format!("{array}\t{}", row.body);
        assert_eq!(decode(line.as_bytes()).unwrap(), Row { served: None, stands_alone: false, ..row });
    }
}
