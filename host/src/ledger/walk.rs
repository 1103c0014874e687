//! `verify`'s walk over the file's rows, on every core: one thread reads the
//! rows in order and hands them out in batches; checking threads each take a
//! batch and check its rows' content (a compact body rebuilt, every hash
//! recomputed, a text body's columns held to it); one thread takes the
//! batches back in order and checks what depends on the rows before (no gap
//! in `seq`, each stored `prev_hash` the previous row's hash, the segments'
//! heads and the anchor through `checked`).
//!
//! A row's hash covers the hash of the row before it, and the walk knows that
//! one as stored: so a row's content is checked without waiting for the rows
//! before it, and the chain holds when every row checks out against the row
//! read before it and `seq` has no gap. The answer is the one the order
//! gives: the first failing row's, in `seq` order.

use std::collections::BTreeMap;
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::sync::{Mutex, PoisonError};

use rusqlite::Connection;
use rusqlite::types::{Type, ValueRef};

use super::compact::ShapeBook;
use super::query::{ChainBreak, ChainCheck, Content, Link, ReadError, VerifyError, check_content, tokens_from};
use super::store::{self, Kind, Row};
use crate::record::Tokens;

/// Rows in one batch: large enough that handing a batch over costs little
/// per row, small enough that the batches in flight stay a few MiB.
const BATCH_ROWS: usize = 512;

/// Batches waiting for a checking thread, per checking thread.
const WAITING_PER_CHECKER: usize = 2;

/// What the walk reads of each row after `?1`, in order: the columns of
/// `query::ALL_COLUMNS` with the body and the hash as stored (a compact body
/// as its bytes, column 20 its `shape_id`; a hash as 32 bytes or, before
/// schema version 5, as hex text).
const WALK_COLUMNS: &str = "SELECT seq, kind, call_id, at_ms, started_ms, key_id, member, team, model, category,
    input, output, cache_read, cache_write, reasoning, cost_usd,
    body, prev_hash, hash, charged_worst, shape_id FROM ledger WHERE seq > ?1 ORDER BY seq";

/// One row as read, before its check. Rows are filled in place and handed
/// back once checked (see [`walk`]): their strings keep their allocations
/// from one batch to the next, since allocating on the reading thread and
/// freeing on another cost a third of both threads' time.
struct ReadRow {
    /// Its kind as stored (named when this weir does not know it).
    kind: String,
    /// Whether this weir knows its kind: `row` then holds its columns.
    known: bool,
    /// The row as its columns hold it; a text body in its `body`.
    row: Row,
    link: Link,
    /// A compact body's stored bytes and its shape (`compact` is false: the
    /// body is text).
    compact: bool,
    stored: Vec<u8>,
    shape_id: Option<i64>,
}

impl ReadRow {
    fn empty() -> Self {
        let row = Row {
            kind: Kind::Close,
            call_id: String::new(),
            at_ms: 0,
            started_ms: 0,
            key_id: None,
            member: None,
            team: None,
            model: String::new(),
            category: None,
            tokens: Tokens::default(),
            cost_usd: None,
            body: String::new(),
            charged_worst: false,
            served: None,
            stands_alone: false,
        };
        let link = Link { seq: 0, prev_hash: None, hash: String::new(), covers_columns: false };
        Self { kind: String::new(), known: false, row, link, compact: false, stored: Vec::new(), shape_id: None }
    }
}

/// Rows read in a row, and the hash of the row before the first.
struct Batch {
    index: u64,
    before: String,
    rows: Vec<ReadRow>,
}

/// A batch whose rows' content was checked: one verdict a row, or why the
/// check failed (it panicked: see [`check_batches`]).
struct CheckedBatch {
    index: u64,
    rows: Vec<ReadRow>,
    verdicts: Result<Vec<Content>, String>,
}

/// How a checking thread checks one row's content against the hash before it.
type CheckRow = fn(&mut ShapeBook, &str, &ReadRow, &mut Vec<u8>) -> Content;

/// The walk's settings: [`walk`]'s are [`BATCH_ROWS`] and [`check_row`].
#[derive(Clone, Copy)]
struct Walk {
    batch_rows: usize,
    check: CheckRow,
}

/// Walks the rows after `chain`'s start through `chain` (see the module's
/// doc): a break is `broken` of the row expected and the break, and each row
/// that checks out is then given to `checked` with its `seq` and hash. The
/// first failure in row order is the answer; a failed read after it, the
/// read's. On a failure the threads stop at their next batch.
pub(super) fn walk(
    connection: &Connection,
    chain: ChainCheck,
    broken: impl Fn(i64, ChainBreak) -> VerifyError + Send,
    checked: impl FnMut(i64, &str) -> Result<(), VerifyError> + Send,
) -> Result<ChainCheck, VerifyError> {
    walk_with(Walk { batch_rows: BATCH_ROWS, check: check_row }, connection, chain, broken, checked)
}

fn walk_with(
    walk: Walk,
    connection: &Connection,
    chain: ChainCheck,
    broken: impl Fn(i64, ChainBreak) -> VerifyError + Send,
    checked: impl FnMut(i64, &str) -> Result<(), VerifyError> + Send,
) -> Result<ChainCheck, VerifyError> {
    let book = ShapeBook::read(connection).map_err(ReadError::from)?;
    let mut statement = connection.prepare(WALK_COLUMNS).map_err(ReadError::from)?;
    let mut rows = statement.query([chain.last_seq()]).map_err(ReadError::from)?;
    let checkers = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
    let (batches, waiting) = sync_channel::<Batch>(checkers * WAITING_PER_CHECKER);
    let (done, finished) = sync_channel::<CheckedBatch>(checkers * WAITING_PER_CHECKER);
    // The most batches there are: all of them fit, so one handed back is never refused.
    let most = checkers * (2 * WAITING_PER_CHECKER + 1) + 2;
    let (recycle, recycled) = sync_channel::<Vec<ReadRow>>(most);
    let waiting = Mutex::new(waiting);
    let before = chain.head().to_owned();
    std::thread::scope(|scope| {
        for _ in 0..checkers {
            let (mut book, done, waiting) = (book.fork(), done.clone(), &waiting);
            scope.spawn(move || check_batches(walk.check, &mut book, waiting, &done));
        }
        drop(done);
        let in_order = scope.spawn(move || in_order(chain, &finished, &recycle, broken, checked));
        let read = read_batches(&mut rows, before, walk.batch_rows, &batches, (&recycled, most));
        drop(batches);
        let chain = in_order.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic))?;
        read?;
        Ok(chain)
    })
}

/// Reads `rows` into batches for the checking threads until they end, or no
/// thread takes them any more (the walk failed: its error is the answer).
/// There are at most `most` batches: past them it waits for one handed back
/// (so the batches the ordering thread holds early, waiting for one a slow
/// checking thread has, stay bounded too).
fn read_batches(
    rows: &mut rusqlite::Rows<'_>,
    mut before: String,
    batch_rows: usize,
    batches: &SyncSender<Batch>,
    (recycled, most): (&Receiver<Vec<ReadRow>>, usize),
) -> Result<(), ReadError> {
    let mut index = 0;
    let mut made = 0;
    let mut next_batch = || match recycled.try_recv() {
        Ok(batch) => Some(batch),
        Err(_) if made < most => {
            made += 1;
            Some(Vec::with_capacity(batch_rows))
        }
        // The ordering thread stopped: the walk failed.
        Err(_) => recycled.recv().ok(),
    };
    let Some(mut batch) = next_batch() else { return Ok(()) };
    let mut filled = 0;
    while let Some(row) = rows.next()? {
        if filled == batch.len() {
            batch.push(ReadRow::empty());
        }
        read_row(row, &mut batch[filled])?;
        filled += 1;
        if filled == batch_rows {
            let last = batch[filled - 1].link.hash.clone();
            if batches.send(Batch { index, before: std::mem::replace(&mut before, last), rows: batch }).is_err() {
                return Ok(());
            }
            let Some(next) = next_batch() else { return Ok(()) };
            (batch, filled) = (next, 0);
            index += 1;
        }
    }
    if filled > 0 {
        batch.truncate(filled);
        // A refused last batch means the walk already failed: its error is the answer.
        let _stopped = batches.send(Batch { index, before, rows: batch });
    }
    Ok(())
}

/// One row of [`WALK_COLUMNS`], into `into` (its strings reused).
fn read_row(row: &rusqlite::Row<'_>, into: &mut ReadRow) -> rusqlite::Result<()> {
    // A kind is stored as its code since schema version 7, as its name before.
    let stored = row.get_ref(1)?;
    let kind = Kind::of_stored(stored);
    match (kind, stored) {
        (Some(kind), _) => set(&mut into.kind, kind.as_str()),
        (None, ValueRef::Integer(code)) => set(&mut into.kind, &code.to_string()),
        (None, _) => set(&mut into.kind, required(row, 1)?),
    }
    into.known = kind.is_some();
    let read = &mut into.row;
    read.kind = kind.unwrap_or(Kind::Close);
    super::callid::read_column(row, 2, &mut read.call_id)?;
    read.started_ms = row.get(4)?;
    // Stored NULL since version 7 where it is the start (see `store::AT_SQL`).
    read.at_ms = row.get::<_, Option<i64>>(3)?.unwrap_or(read.started_ms);
    set_optional(&mut read.key_id, text(row, 5)?);
    set_optional(&mut read.member, text(row, 6)?);
    set_optional(&mut read.team, text(row, 7)?);
    set(&mut read.model, required(row, 8)?);
    set_optional(&mut read.category, text(row, 9)?);
    read.tokens = tokens_from(row, 10)?;
    read.cost_usd = row.get(15)?;
    read.charged_worst = row.get(19)?;
    read.body.clear();
    into.compact = false;
    match row.get_ref(16)? {
        ValueRef::Blob(bytes) => {
            into.stored.clear();
            into.stored.extend_from_slice(bytes);
            (into.compact, into.shape_id) = (true, row.get(20)?);
        }
        // Checked as UTF-8 first: the lossy copy's scan cost the reading
        // thread a twentieth of its time, and a body is UTF-8 unless damaged.
        ValueRef::Text(body) => match std::str::from_utf8(body) {
            Ok(body) => read.body.push_str(body),
            Err(_) => read.body.push_str(&String::from_utf8_lossy(body)),
        },
        _ => {}
    }
    let link = &mut into.link;
    link.seq = row.get(0)?;
    set_optional(&mut link.prev_hash, text(row, 17)?.filter(|prev_hash| !prev_hash.is_empty()));
    link.hash.clear();
    match row.get_ref(18)? {
        ValueRef::Blob(bytes) => store::push_hex(&mut link.hash, bytes),
        ValueRef::Text(hash) => link.hash.push_str(&String::from_utf8_lossy(hash)),
        _ => {}
    }
    link.covers_columns = into.compact;
    Ok(())
}

/// Column `at` as text, `None` for NULL; any other type is an error.
fn text<'r>(row: &'r rusqlite::Row<'_>, at: usize) -> rusqlite::Result<Option<&'r str>> {
    match row.get_ref(at)? {
        ValueRef::Null => Ok(None),
        ValueRef::Text(text) => std::str::from_utf8(text).map(Some).map_err(rusqlite::Error::Utf8Error),
        other => Err(rusqlite::Error::InvalidColumnType(at, format!("column {at}"), other.data_type())),
    }
}

/// Column `at` as text, which it must be.
fn required<'r>(row: &'r rusqlite::Row<'_>, at: usize) -> rusqlite::Result<&'r str> {
    text(row, at)?.ok_or_else(|| rusqlite::Error::InvalidColumnType(at, format!("column {at}"), Type::Null))
}

fn set(field: &mut String, value: &str) {
    field.clear();
    field.push_str(value);
}

fn set_optional(field: &mut Option<String>, value: Option<&str>) {
    match (field.as_mut(), value) {
        (Some(field), Some(value)) => set(field, value),
        (_, value) => *field = value.map(str::to_owned),
    }
}

/// A checking thread: takes batches until there are none, or until the
/// thread that takes them back stopped. A check that panics (a bug) is
/// caught and handed back as the batch's failure, and the thread stops: a
/// batch that never came back would leave the ordering thread waiting for
/// it, and the reading thread for the batches it holds, for ever.
fn check_batches(
    check: CheckRow,
    book: &mut ShapeBook,
    waiting: &Mutex<Receiver<Batch>>,
    done: &SyncSender<CheckedBatch>,
) {
    let mut body = Vec::new();
    loop {
        let batch = waiting.lock().unwrap_or_else(PoisonError::into_inner).recv();
        let Ok(Batch { index, before, rows }) = batch else { return };
        let checking = std::panic::AssertUnwindSafe(|| check_batch(check, book, &before, &rows, &mut body));
        let verdicts = std::panic::catch_unwind(checking).map_err(|panic| panic_reason(panic.as_ref()));
        let failed = verdicts.is_err();
        if done.send(CheckedBatch { index, rows, verdicts }).is_err() || failed {
            return;
        }
    }
}

fn check_batch(
    check: CheckRow,
    book: &mut ShapeBook,
    before: &str,
    rows: &[ReadRow],
    body: &mut Vec<u8>,
) -> Vec<Content> {
    let mut verdicts = Vec::with_capacity(rows.len());
    for (at, row) in rows.iter().enumerate() {
        let before = match at {
            0 => before,
            _ => rows[at - 1].link.hash.as_str(),
        };
        verdicts.push(check(book, before, row, body));
    }
    verdicts
}

/// A panic's message, as far as it is text.
fn panic_reason(panic: &(dyn std::any::Any + Send)) -> String {
    let message = panic.downcast_ref::<&str>().copied().or_else(|| panic.downcast_ref::<String>().map(String::as_str));
    format!("a checking thread panicked: {}", message.unwrap_or("(no message)"))
}

/// One row's content against the hash `before` it (see [`check_content`]),
/// a compact body rebuilt into `body` first.
fn check_row(book: &mut ShapeBook, before: &str, row: &ReadRow, body: &mut Vec<u8>) -> Content {
    if !row.known {
        return Content::Sound;
    }
    let body = match row.compact {
        true => match book.decode_into(&row.row, &row.stored, row.shape_id, body) {
            Ok(()) => body.as_slice(),
            Err(error) => return Content::Undecodable(error.to_string()),
        },
        false => row.row.body.as_bytes(),
    };
    check_content(before, &row.link, &row.kind, &row.row, body)
}

/// Takes the checked batches back in order and runs the chain's check of
/// each row, then `checked`; the first failure is the answer. Each batch
/// done with goes back to the reading thread.
fn in_order(
    mut chain: ChainCheck,
    finished: &Receiver<CheckedBatch>,
    recycle: &SyncSender<Vec<ReadRow>>,
    broken: impl Fn(i64, ChainBreak) -> VerifyError,
    mut checked: impl FnMut(i64, &str) -> Result<(), VerifyError>,
) -> Result<ChainCheck, VerifyError> {
    let mut early = BTreeMap::new();
    let mut next = 0;
    for batch in finished {
        early.insert(batch.index, batch);
        while let Some(CheckedBatch { rows, verdicts, .. }) = early.remove(&next) {
            let from_seq = chain.last_seq() + 1;
            let verdicts = verdicts.map_err(|reason| ReadError::Checker { from_seq, reason })?;
            for (row, verdict) in rows.iter().zip(verdicts) {
                let expected = chain.last_seq() + 1;
                chain
                    .next_checked(&row.kind, &row.row.call_id, row.known, &row.link, verdict)
                    .map_err(|chain_break| broken(expected, chain_break))?;
                let (seq, hash) = chain.last();
                checked(seq, hash)?;
            }
            // Refused only once the reading thread has stopped.
            let _ = recycle.try_send(rows);
            next += 1;
        }
    }
    Ok(chain)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::panic)]
mod tests {
    use super::*;
    use crate::ledger::{CallObserver, Ledger, LedgerConfig};

    /// A text body that is not UTF-8 (a damaged file) is read lossily, as
    /// before the walk tried it as UTF-8 first: the body then differs from
    /// the one hashed, and the walk names its row.
    #[test]
    fn a_text_body_that_is_not_utf8_breaks_the_chain_at_its_row() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ledger.db");
        let writer = store::open_writer(&path, crate::catalog::LedgerSync::Normal, None).unwrap();
        let rows: Vec<Row> = (0..3)
            .map(|n| Row::closing(&crate::ledger::tests::record(&format!("call-{n}"), "ana", "m1", n, None)).unwrap())
            .collect();
        let run = store::Run { segment: "s", first_line: 0, rows: rows.iter().map(Some).collect() };
        store::append_logged_with(&writer, [run], store::Append { keep_rollups: true, compact: false }).unwrap();
        let verify = || crate::ledger::Reader::open(&path).unwrap().verify();
        assert_eq!(verify().unwrap().rows, 3);
        writer.execute_batch("DROP TRIGGER ledger_no_update").unwrap();
        writer.execute("UPDATE ledger SET body = CAST(x'7b22ff227d' AS TEXT) WHERE seq = 2", []).unwrap();
        match verify() {
            Err(VerifyError::Broken(broken)) => {
                assert_eq!((broken.seq, broken.call_id.as_str()), (2, "call-1"));
                assert!(broken.reason.contains("hash does not match"), "{broken}");
            }
            other => panic!("expected the break at row 2, got {other:?}"),
        }
    }

    /// Panics on row 30: a bug planted in the check.
    fn panics_at_thirty(book: &mut ShapeBook, before: &str, row: &ReadRow, body: &mut Vec<u8>) -> Content {
        assert_ne!(row.link.seq, 30, "planted");
        check_row(book, before, row, body)
    }

    /// A checking thread that panics ends the walk with a typed error naming
    /// where, on a file of more batches than the walk keeps in flight (one row
    /// a batch, 60 rows): it neither hangs (the batches after it held by the
    /// ordering thread, the reading thread waiting for one back) nor passes
    /// rows it did not check.
    #[tokio::test]
    async fn a_checker_that_panics_ends_the_walk_with_an_error_not_a_hang() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ledger.db");
        let ledger = Ledger::open(LedgerConfig::at(path.clone()), None);
        for n in 0..60 {
            let record = crate::ledger::tests::record(&format!("call-{n}"), "ana", "m1", n, None);
            ledger.closed(&record).await.unwrap();
        }
        let reader = ledger.reader().unwrap();
        for _ in 0..500 {
            if reader.verify().is_ok_and(|report| report.rows == 60) {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        let walked = tokio::task::spawn_blocking(move || {
            let connection = Connection::open(&path).unwrap();
            let walk = Walk { batch_rows: 1, check: panics_at_thirty };
            walk_with(walk, &connection, ChainCheck::default(), |_, found| VerifyError::Broken(found), |_, _| Ok(()))
        })
        .await
        .unwrap();
        match walked {
            Err(VerifyError::Read(ReadError::Checker { from_seq: 30, reason })) => {
                assert!(reason.contains("planted"), "{reason}");
            }
            other => panic!("expected the checker's failure at row 30, got {other:?}"),
        }
        let whole = Walk { batch_rows: 1, check: check_row };
        let connection = Connection::open(dir.path().join("ledger.db")).unwrap();
        let chain =
            walk_with(whole, &connection, ChainCheck::default(), |_, found| VerifyError::Broken(found), |_, _| Ok(()));
        assert_eq!(chain.unwrap().last_seq(), 60, "the same walk without the bug checks every row");
    }
}
