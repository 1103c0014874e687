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
use rusqlite::types::ValueRef;

use super::compact::ShapeBook;
use super::query::{ChainBreak, ChainCheck, Content, Link, ReadError, VerifyError, check_content, stored_row};
use super::store::Row;

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

/// One row as read, before its check.
struct ReadRow {
    /// Its kind as stored (named when this weir does not know it).
    kind: String,
    call_id: String,
    /// The row as its columns hold it (`None`: a kind this weir does not
    /// know); a text body in its `body`.
    stored: Option<Row>,
    link: Link,
    /// A compact body's stored bytes and its shape.
    compact: Option<(Vec<u8>, Option<i64>)>,
}

/// Rows read in a row, and the hash of the row before the first.
struct Batch {
    index: u64,
    before: String,
    rows: Vec<ReadRow>,
}

/// A batch whose rows' content was checked: one verdict a row.
struct CheckedBatch {
    index: u64,
    rows: Vec<ReadRow>,
    verdicts: Vec<Content>,
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
    let book = ShapeBook::read(connection).map_err(ReadError::from)?;
    let mut statement = connection.prepare(WALK_COLUMNS).map_err(ReadError::from)?;
    let mut rows = statement.query([chain.last_seq()]).map_err(ReadError::from)?;
    let checkers = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
    let (batches, waiting) = sync_channel::<Batch>(checkers * WAITING_PER_CHECKER);
    let (done, finished) = sync_channel::<CheckedBatch>(checkers * WAITING_PER_CHECKER);
    let waiting = Mutex::new(waiting);
    let before = chain.head().to_owned();
    std::thread::scope(|scope| {
        for _ in 0..checkers {
            let (mut book, done, waiting) = (book.fork(), done.clone(), &waiting);
            scope.spawn(move || check_batches(&mut book, waiting, &done));
        }
        drop(done);
        let in_order = scope.spawn(move || in_order(chain, &finished, broken, checked));
        let read = read_batches(&mut rows, before, &batches);
        drop(batches);
        let chain = in_order.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic))?;
        read?;
        Ok(chain)
    })
}

/// Reads `rows` into batches for the checking threads until they end, or no
/// thread takes them any more (the walk failed: its error is the answer).
fn read_batches(
    rows: &mut rusqlite::Rows<'_>,
    mut before: String,
    batches: &SyncSender<Batch>,
) -> Result<(), ReadError> {
    let mut index = 0;
    let mut batch = Vec::with_capacity(BATCH_ROWS);
    while let Some(row) = rows.next()? {
        batch.push(read_row(row)?);
        if batch.len() == BATCH_ROWS {
            let last = batch.last().map(|row: &ReadRow| row.link.hash.clone()).unwrap_or_default();
            let rows = std::mem::replace(&mut batch, Vec::with_capacity(BATCH_ROWS));
            if batches.send(Batch { index, before: std::mem::replace(&mut before, last), rows }).is_err() {
                return Ok(());
            }
            index += 1;
        }
    }
    if !batch.is_empty() {
        // A refused last batch means the walk already failed: its error is the answer.
        let _stopped = batches.send(Batch { index, before, rows: batch });
    }
    Ok(())
}

/// One row of [`WALK_COLUMNS`].
fn read_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<ReadRow> {
    let kind: String = row.get(1)?;
    let call_id: String = row.get(2)?;
    let (text, compact) = match row.get_ref(16)? {
        ValueRef::Blob(bytes) => (None, Some((bytes.to_vec(), row.get(20)?))),
        ValueRef::Text(text) => (Some(String::from_utf8_lossy(text).into_owned()), None),
        _ => (None, None),
    };
    let stored = stored_row(row, &kind, &call_id, text.as_deref().unwrap_or_default())?;
    let prev_hash = match row.get_ref(17)? {
        ValueRef::Text(text) if !text.is_empty() => Some(String::from_utf8_lossy(text).into_owned()),
        _ => None,
    };
    let hash = match row.get_ref(18)? {
        ValueRef::Blob(bytes) => hex::encode(bytes),
        ValueRef::Text(text) => String::from_utf8_lossy(text).into_owned(),
        _ => String::new(),
    };
    let link = Link { seq: row.get(0)?, prev_hash, hash, covers_columns: compact.is_some() };
    Ok(ReadRow { kind, call_id, stored, link, compact })
}

/// A checking thread: takes batches until there are none, or until the
/// thread that takes them back stopped.
fn check_batches(book: &mut ShapeBook, waiting: &Mutex<Receiver<Batch>>, done: &SyncSender<CheckedBatch>) {
    let mut body = Vec::new();
    loop {
        let batch = waiting.lock().unwrap_or_else(PoisonError::into_inner).recv();
        let Ok(Batch { index, before, rows }) = batch else { return };
        let mut verdicts = Vec::with_capacity(rows.len());
        for (at, row) in rows.iter().enumerate() {
            let before = match at {
                0 => before.as_str(),
                _ => rows[at - 1].link.hash.as_str(),
            };
            verdicts.push(check_row(book, before, row, &mut body));
        }
        if done.send(CheckedBatch { index, rows, verdicts }).is_err() {
            return;
        }
    }
}

/// One row's content against the hash `before` it (see [`check_content`]),
/// a compact body rebuilt into `body` first.
fn check_row(book: &mut ShapeBook, before: &str, row: &ReadRow, body: &mut Vec<u8>) -> Content {
    let Some(stored) = &row.stored else { return Content::Sound };
    let body = match &row.compact {
        Some((bytes, shape_id)) => match book.decode_into(stored, bytes, *shape_id, body) {
            Ok(()) => body.as_slice(),
            Err(error) => return Content::Undecodable(error.to_string()),
        },
        None => stored.body.as_bytes(),
    };
    check_content(before, &row.link, &row.kind, stored, body)
}

/// Takes the checked batches back in order and runs the chain's check of
/// each row, then `checked`; the first failure is the answer.
fn in_order(
    mut chain: ChainCheck,
    finished: &Receiver<CheckedBatch>,
    broken: impl Fn(i64, ChainBreak) -> VerifyError,
    mut checked: impl FnMut(i64, &str) -> Result<(), VerifyError>,
) -> Result<ChainCheck, VerifyError> {
    let mut early = BTreeMap::new();
    let mut next = 0;
    for batch in finished {
        early.insert(batch.index, batch);
        while let Some(CheckedBatch { rows, verdicts, .. }) = early.remove(&next) {
            for (row, verdict) in rows.into_iter().zip(verdicts) {
                let expected = chain.last_seq() + 1;
                let ReadRow { kind, call_id, stored, link, compact: _ } = row;
                chain
                    .next_checked(&kind, &call_id, stored.is_some(), link, verdict)
                    .map_err(|chain_break| broken(expected, chain_break))?;
                let (seq, hash) = chain.last();
                checked(seq, hash)?;
            }
            next += 1;
        }
    }
    Ok(chain)
}
