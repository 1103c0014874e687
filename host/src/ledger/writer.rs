//! The writer: one thread owns the file's write connection and commits in
//! groups.
//!
//! Calls hand rows over a channel, so no async worker ever blocks on SQLite.
//! A row someone waits for (a closing record, or an opening that must be in
//! the file before its request leaves) carries a oneshot and is committed at
//! once, with everything else waiting. A *deferred* row (an opening under
//! `sync = "normal"`) carries none: it waits up to [`OPEN_LINGER`] for company,
//! usually its own call's closing record, so a quick call costs one commit,
//! not two (measured in `benches/ledger.rs` and the gateway bench).
//!
//! A failed batch is rolled back, every waiting row in it answered with the
//! error, and the connection dropped; its deferred rows are kept and go first
//! into the next batch (so a closing row never lands without its opening),
//! up to [`MAX_CARRIED`]. The next batch opens the file again, so a ledger
//! that could not be written recovers when it can.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, TryRecvError};
use std::time::{Duration, Instant};

use rusqlite::Connection;
use tokio::sync::oneshot;

use super::LedgerMeter;
use super::config::LedgerConfig;
use super::shipper::Signal;
use super::store::{self, Row};

/// The most rows committed in one transaction: bounds how long the first row
/// of a batch waits for the last.
pub(super) const MAX_BATCH: usize = 1024;

/// Longest a deferred row waits for a row someone waits for before it is
/// committed alone. A process killed within this of a call's start may leave
/// no trace of that call (its answer was never returned).
pub(super) const OPEN_LINGER: Duration = Duration::from_millis(2);

/// Deferred rows kept across failed batches; beyond it the oldest are lost
/// (logged and counted as failures).
pub(super) const MAX_CARRIED: usize = 4 * MAX_BATCH;

/// How long the writer sleeps before taking what is waiting when a row was
/// already waiting as its last commit ended (rows come faster than commits):
/// the rows of that burst go into one commit, and the calls' tasks wake the
/// thread once per batch instead of once per row. It delays those answers
/// by at most this (+8–9 % gateway throughput at 32 callers, batches of 3.8
/// → 12.5 rows); a single caller, whose rows never wait, never waits for it.
pub(super) const GROUP_WINDOW: Duration = Duration::from_micros(500);

/// How often carried rows are tried again while no new row arrives.
const RETRY_CARRIED: Duration = Duration::from_secs(1);

/// Why a row was not committed (the file's path and SQLite's text: for the
/// log, never for a caller).
pub(super) type WriteError = Arc<str>;

/// A row to append and, unless it is deferred, where to say whether it was
/// committed.
pub(super) struct Job {
    pub row: Row,
    pub reply: Option<oneshot::Sender<Result<(), WriteError>>>,
}

/// What the writer thread owns.
pub(super) struct Writer {
    pub config: LedgerConfig,
    pub meter: Option<Arc<dyn LedgerMeter>>,
    /// Opened by [`super::Ledger::open`] when it could be.
    pub connection: Option<Connection>,
    /// Whether the last batch (or the first open) succeeded: while it is false,
    /// openings are written to be waited for.
    pub healthy: Arc<AtomicBool>,
    /// Woken after each commit, when rows are shipped to PostgreSQL.
    pub shipper: Option<SyncSender<Signal>>,
}

impl Writer {
    /// The thread's loop: runs until every sender is gone, the queue is empty
    /// and carried rows had their last try.
    pub(super) fn run(mut self, jobs: Receiver<Job>) {
        let mut carried: Vec<Row> = Vec::new();
        loop {
            let (batch, open) = gather(&jobs, !carried.is_empty());
            if !batch.is_empty() || !carried.is_empty() {
                self.write(&mut carried, batch);
            }
            if !open {
                if !carried.is_empty() {
                    tracing::error!(rows = carried.len(), "the ledger stopped with deferred rows it could not write");
                    self.meter_failed(carried.len());
                }
                return;
            }
        }
    }

    /// Commits the carried rows and then `batch`; answers every waiting row.
    fn write(&mut self, carried: &mut Vec<Row>, batch: Vec<Job>) {
        let started = Instant::now();
        let rows = carried.len() + batch.len();
        let outcome = self.commit(carried.iter().chain(batch.iter().map(|job| &job.row)));
        self.healthy.store(outcome.is_ok(), Ordering::Relaxed);
        match &outcome {
            Ok(()) => {
                carried.clear();
                if let Some(meter) = &self.meter {
                    meter.committed(rows, started.elapsed());
                }
                if let Some(shipper) = &self.shipper {
                    // Full: a wake-up is already waiting, and its pass ships these rows too.
                    let _ = shipper.try_send(Signal::Committed);
                }
            }
            Err(reason) => {
                self.connection = None;
                tracing::error!(path = %self.config.path.display(), rows, %reason, "the ledger could not commit a batch");
            }
        }
        let mut replies = Vec::with_capacity(batch.len());
        for job in batch {
            match (job.reply, &outcome) {
                (Some(reply), _) => replies.push(reply),
                (None, Ok(())) => {}
                (None, Err(_)) => carried.push(job.row),
            }
        }
        let mut lost = if outcome.is_err() { replies.len() } else { 0 };
        if carried.len() > MAX_CARRIED {
            let dropped = carried.len() - MAX_CARRIED;
            carried.drain(..dropped);
            tracing::error!(rows = dropped, "the ledger gave up on deferred rows it could not write");
            lost += dropped;
        }
        // Counted before anyone hears back, so a caller told of a failure finds it counted.
        self.meter_failed(lost);
        for reply in replies {
            // A caller that stopped waiting no longer needs the answer.
            let _ = reply.send(outcome.clone());
        }
    }

    fn meter_failed(&self, rows: usize) {
        if let (Some(meter), true) = (&self.meter, rows > 0) {
            meter.failed(rows);
        }
    }

    /// Opens the file when no connection is held, then appends the rows.
    fn commit<'a>(&mut self, rows: impl Iterator<Item = &'a Row>) -> Result<(), WriteError> {
        let writer = match &mut self.connection {
            Some(writer) => writer,
            None => self.connection.insert(
                store::open_writer(&self.config.path, self.config.sync, self.config.max_bytes)
                    .map_err(|error| error.to_string())?,
            ),
        };
        store::append(writer, rows).map_err(|error| WriteError::from(error.to_string()))
    }
}

/// The next batch: everything waiting (up to [`MAX_BATCH`]), and, while it
/// holds only deferred rows, whatever arrives within [`OPEN_LINGER`]. With
/// `retrying` (carried rows wait) an empty batch comes back after
/// [`RETRY_CARRIED`]. The flag is false once every sender is gone.
fn gather(jobs: &Receiver<Job>, retrying: bool) -> (Vec<Job>, bool) {
    // A row already waiting when the last commit ended: rows are coming
    // faster than commits, so the next ones are worth waiting for.
    let busy = jobs.try_recv();
    let first = match (busy, retrying) {
        (Ok(job), _) => {
            std::thread::sleep(GROUP_WINDOW);
            Ok(job)
        }
        (Err(_), false) => jobs.recv().map_err(|_| RecvTimeoutError::Disconnected),
        (Err(_), true) => jobs.recv_timeout(RETRY_CARRIED),
    };
    let mut batch = match first {
        Ok(job) => vec![job],
        Err(RecvTimeoutError::Timeout) => return (Vec::new(), true),
        Err(RecvTimeoutError::Disconnected) => return (Vec::new(), false),
    };
    let mut open = drain(jobs, &mut batch);
    let until = Instant::now() + OPEN_LINGER;
    while open && batch.len() < MAX_BATCH && batch.iter().all(|job| job.reply.is_none()) {
        match jobs.recv_timeout(until.saturating_duration_since(Instant::now())) {
            Ok(job) => {
                batch.push(job);
                open = drain(jobs, &mut batch);
            }
            Err(RecvTimeoutError::Timeout) => break,
            Err(RecvTimeoutError::Disconnected) => open = false,
        }
    }
    (batch, open)
}

/// Moves what is waiting into `batch`, up to [`MAX_BATCH`]; false once every
/// sender is gone.
fn drain(jobs: &Receiver<Job>, batch: &mut Vec<Job>) -> bool {
    while batch.len() < MAX_BATCH {
        match jobs.try_recv() {
            Ok(job) => batch.push(job),
            Err(TryRecvError::Empty) => return true,
            Err(TryRecvError::Disconnected) => return false,
        }
    }
    true
}
