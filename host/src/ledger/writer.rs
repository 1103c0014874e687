//! The writer: who commits the ledger's rows, and when.
//!
//! Rows wait in one queue ([`Pending`], first in, first out) and one
//! connection ([`Writer`]) commits them in groups. Whoever holds the
//! connection takes every row that is due, in order: all of them, except a
//! running call's deferred rows younger than [`OPEN_LINGER`], which stay
//! queued for their own call's closing row (see [`Pending::take`]).
//!
//! Under `sync = "normal"` the call that needs a row committed (a closing
//! record, or an opening that must be in the file before its request leaves)
//! commits it itself, on its own thread, with every row waiting (after one
//! yield when other calls are open, so that the calls ready beside it queue
//! theirs: see `ledger::committed`). Handing every row to the ledger's thread and being
//! woken back made the gateway 1.4× slower at 32 callers, and a single
//! writer's acknowledgement 341 µs instead of 73 (`benches/ledger.rs`). A
//! call that finds the connection taken leaves its row to the holder, who
//! looks at the queue again each time it lets go of the connection (so no
//! row is left without a committer). A call never waits for another
//! process's lock, never opens the file and never checkpoints: those, a
//! holder's passes beyond [`MAX_PASSES`], and every commit under `sync =
//! "full"` (an fsync is too slow for an async worker) go to the ledger's
//! thread.
//!
//! The thread also commits a *deferred* row (an opening or a hold under
//! `sync = "normal"`) that no commit took within [`OPEN_LINGER`], retries
//! rows carried over a failure, runs the WAL checkpoints (so no call's
//! commit runs one: calls that come meanwhile leave their rows to it), and
//! writes what is left when the ledger closes.
//!
//! A failed batch is rolled back, every waiting row in it answered with the
//! error, and the connection dropped; its deferred rows go back to the front
//! of the queue (so a closing row never lands without its opening), up to
//! [`MAX_CARRIED`]. The next commit opens the file again, so a ledger that
//! could not be written recovers when it can.

use std::collections::{HashSet, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, TryLockError};
use std::time::{Duration, Instant};

use rusqlite::Connection;
use tokio::sync::oneshot;

use super::LedgerMeter;
use super::config::LedgerConfig;
use super::shipper::Signal;
use super::store::{self, Kind, Row};

/// The most rows committed in one transaction: bounds how long the first row
/// of a batch waits for the last.
pub(super) const MAX_BATCH: usize = 1024;

/// How long a deferred row (an opening, a hold) waits for its own call's
/// closing row before any commit takes it (the thread commits it alone if no
/// other commit comes). A call quicker than this leaves one row, its closing
/// one; a process killed within this of a call's start may leave no trace of
/// that call (its answer was never returned; `sync = "full"` leaves none
/// such). At 2 ms, calls at 32 callers on the gateway bench (~4 ms each)
/// outlived it, and holding their openings back cost more commits than it
/// saved rows (0.95x the calls/s); at 50 ms no opening of that bench is
/// written, and the gateway served 1.10-1.17x the calls/s at 0.87-0.90x the
/// CPU per call (paired runs, 2026-12-02).
pub(super) const OPEN_LINGER: Duration = Duration::from_millis(50);

/// Deferred rows kept across failed batches; beyond it the oldest are lost
/// (logged and counted as failures).
pub(super) const MAX_CARRIED: usize = 4 * MAX_BATCH;

/// How many times in a row a call commits what others left in the queue
/// before it hands the rest to the thread: bounds how long one call's answer
/// waits for other calls' rows.
pub(super) const MAX_PASSES: usize = 4;

/// How long the thread sleeps before its next commit when rows arrived
/// during its last one (rows come faster than commits): the rows of that
/// burst go into one commit. Under `sync = "full"` this grouped 3.8 → 12.5
/// rows per commit at 32 callers (+8–9 % gateway throughput); under
/// `sync = "normal"` calls commit their own rows meanwhile.
pub(super) const GROUP_WINDOW: Duration = Duration::from_micros(500);

/// How often carried rows are tried again while the ledger is failing.
const RETRY_CARRIED: Duration = Duration::from_secs(1);

/// Commits between two WAL checkpoints. A commit of a row or two writes
/// three or four pages, so this is about SQLite's own default of 1,000
/// pages.
const CHECKPOINT_EVERY: usize = 256;

/// Why a row was not committed (the file's path and SQLite's text: for the
/// log, never for a caller).
pub(super) type WriteError = Arc<str>;

/// A row to append and, unless it is deferred, where to say whether it was
/// committed.
pub(super) struct Job {
    pub row: Row,
    pub reply: Option<oneshot::Sender<Result<(), WriteError>>>,
    pub queued: Instant,
}

/// Who commits a batch: a call on its own (async) thread, which must not
/// block, or the ledger's thread, which may.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Committer {
    Call,
    Thread,
}

/// The queue and what the thread has been asked to do.
#[derive(Default)]
struct Pending {
    jobs: VecDeque<Job>,
    /// The thread is watching the deferred rows' age (it was woken for the
    /// first one and has not yet seen the queue without one).
    watched: bool,
    /// A commit the thread must make now (a hand-over, or `sync = "full"`).
    commit_asked: bool,
    checkpoint_asked: bool,
    /// When the last commit failed; cleared by a commit that succeeds.
    failed_at: Option<Instant>,
}

impl Pending {
    /// The next batch: every row someone waits for, with the deferred rows of
    /// the calls closing in it (their openings left out: see [`redundant`])
    /// and those whose linger has passed. A younger deferred row of a call
    /// still running stays queued, in order, to ride with its own call's
    /// closing row.
    fn take(&mut self) -> Vec<Job> {
        let due = Instant::now().checked_sub(OPEN_LINGER);
        let taken: Vec<bool> = {
            let closing = closed_in(self.jobs.iter());
            let lingered = |job: &Job| due.is_none_or(|due| job.queued <= due);
            self.jobs
                .iter()
                .map(|job| job.reply.is_some() || lingered(job) || closing.contains(job.row.call_id.as_str()))
                .collect()
        };
        let mut batch = Vec::new();
        let mut left = VecDeque::with_capacity(self.jobs.len());
        for (job, take) in self.jobs.drain(..).zip(taken) {
            match take && batch.len() < MAX_BATCH {
                true => batch.push(job),
                false => left.push_back(job),
            }
        }
        self.jobs = left;
        batch
    }

    /// Everything queued, up to [`MAX_BATCH`] (the ledger is closing).
    fn take_all(&mut self) -> Vec<Job> {
        let count = self.jobs.len().min(MAX_BATCH);
        self.jobs.drain(..count).collect()
    }

    /// Puts rows a pass did not commit back at the front, in their order.
    fn put_back(&mut self, jobs: Vec<Job>) {
        for job in jobs.into_iter().rev() {
            self.jobs.push_front(job);
        }
    }

    /// Whether a row queued before `released` waits for a commit: its call
    /// may have found the connection held until then, and left it to the
    /// holder.
    fn has_waited_before(&self, released: Instant) -> bool {
        self.jobs.iter().take_while(|job| job.queued < released).any(|job| job.reply.is_some())
    }

    fn oldest_deferred(&self) -> Option<Instant> {
        self.jobs.iter().find(|job| job.reply.is_none()).map(|job| job.queued)
    }

    /// When the thread should next look at the queue (`None`: when woken);
    /// clears `watched` once no deferred row is left to watch (while failing,
    /// once the queue is empty).
    fn next_look(&mut self) -> Option<Instant> {
        if self.jobs.is_empty() || self.failed_at.is_none() {
            self.watched = self.oldest_deferred().is_some();
        }
        self.deadline()
    }

    /// When the thread commits without being asked: while failing, the
    /// carried rows' retry; else the oldest deferred row's linger.
    fn deadline(&self) -> Option<Instant> {
        if self.jobs.is_empty() {
            return None;
        }
        match self.failed_at {
            Some(failed_at) => Some(failed_at + RETRY_CARRIED),
            None => self.oldest_deferred().map(|queued| queued + OPEN_LINGER),
        }
    }

    /// Whether the thread should commit now: it was asked to, or its
    /// [`Self::deadline`] has come.
    fn due_for_thread(&mut self, now: Instant) -> bool {
        let asked = std::mem::take(&mut self.commit_asked);
        !self.jobs.is_empty() && (asked || self.deadline().is_some_and(|deadline| now >= deadline))
    }

    /// Gives up the oldest deferred rows beyond [`MAX_CARRIED`] (after a
    /// failure: the rows carried over it); returns how many.
    fn trim_carried(&mut self) -> usize {
        let deferred = self.jobs.iter().filter(|job| job.reply.is_none()).count();
        let dropped = deferred.saturating_sub(MAX_CARRIED);
        let mut excess = dropped;
        self.jobs.retain(|job| {
            let give_up = excess > 0 && job.reply.is_none();
            excess -= usize::from(give_up);
            !give_up
        });
        dropped
    }
}

/// What the calls and the thread share.
pub(super) struct Shared {
    pending: Mutex<Pending>,
    writer: Mutex<Writer>,
}

/// What a pass left: rows for the front of the queue (a hand-over's whole
/// batch, or a failed batch's deferred rows), how it ended, and whether a
/// checkpoint is due.
struct Left {
    jobs: Vec<Job>,
    outcome: Outcome,
    checkpoint: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Committed,
    Failed,
    /// A call met a lock it must not wait for, or no open file: nothing was
    /// written, and the thread takes over.
    HandedOver,
}

impl Shared {
    pub(super) fn new(writer: Writer) -> Shared {
        Shared { pending: Mutex::new(Pending::default()), writer: Mutex::new(writer) }
    }

    fn pending(&self) -> MutexGuard<'_, Pending> {
        // The queue is consistent between statements: a panic elsewhere leaves it usable.
        self.pending.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Queues `job`; wakes the thread when it must watch a first deferred
    /// row, or commit it (`for_thread`).
    pub(super) fn push(&self, job: Job, for_thread: bool, wake: &SyncSender<()>) {
        let mut pending = self.pending();
        let deferred = job.reply.is_none();
        pending.jobs.push_back(job);
        let signal = match (for_thread, deferred && !pending.watched) {
            (true, _) => {
                pending.commit_asked = true;
                true
            }
            (false, true) => {
                pending.watched = true;
                true
            }
            (false, false) => false,
        };
        drop(pending);
        if signal {
            // Full: a wake-up is already waiting, and the thread reads the flags when it wakes.
            let _ = wake.try_send(());
        }
    }

    /// A call commits what is queued (its own row among it), passing the
    /// rows others left meanwhile, up to [`MAX_PASSES`]; see the module doc.
    pub(super) fn commit_as_call(&self, wake: &SyncSender<()>) {
        for _ in 0..MAX_PASSES {
            let mut writer = match self.writer.try_lock() {
                Ok(writer) => writer,
                Err(TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
                // The holder looks at the queue again when it lets go.
                Err(TryLockError::WouldBlock) => return,
            };
            let batch = self.pending().take();
            if batch.is_empty() {
                return;
            }
            let left = writer.write(batch, Committer::Call);
            let (outcome, checkpoint) = (left.outcome, left.checkpoint);
            self.settle(&writer, left);
            drop(writer);
            let released = Instant::now();
            if checkpoint || outcome == Outcome::HandedOver {
                let _ = wake.try_send(());
            }
            if outcome == Outcome::HandedOver || !self.pending().has_waited_before(released) {
                return;
            }
        }
        self.pending().commit_asked = true;
        let _ = wake.try_send(());
    }

    /// Puts back what a pass left (`writer`, still held, counts the carried
    /// rows given up) and notes what the thread must do.
    fn settle(&self, writer: &Writer, left: Left) {
        let mut pending = self.pending();
        pending.put_back(left.jobs);
        pending.checkpoint_asked |= left.checkpoint;
        match left.outcome {
            Outcome::Committed => pending.failed_at = None,
            Outcome::HandedOver => pending.commit_asked = true,
            Outcome::Failed => {
                pending.failed_at = Some(Instant::now());
                let dropped = pending.trim_carried();
                drop(pending);
                if dropped > 0 {
                    tracing::error!(rows = dropped, "the ledger gave up on deferred rows it could not write");
                    writer.meter_failed(dropped);
                }
            }
        }
    }

    /// The thread's commits: what is due, then (after [`GROUP_WINDOW`]) the
    /// rows left to it while it held the connection, until none is. Carried
    /// rows alone are not retried in a loop: a failed pass ends it unless
    /// rows wait.
    fn commit_as_thread(&self, held_until: Option<Instant>) {
        let mut released = held_until;
        let mut failed = false;
        loop {
            let due = {
                let mut pending = self.pending();
                let left_to_us = released.is_some_and(|released| pending.has_waited_before(released));
                let due = pending.due_for_thread(Instant::now());
                (due && !failed) || left_to_us
            };
            if !due {
                return;
            }
            if released.is_some() {
                std::thread::sleep(GROUP_WINDOW);
            }
            let mut writer = self.writer.lock().unwrap_or_else(PoisonError::into_inner);
            let batch = self.pending().take();
            if batch.is_empty() {
                return;
            }
            let left = writer.write(batch, Committer::Thread);
            failed = left.outcome == Outcome::Failed;
            self.settle(&writer, left);
            drop(writer);
            released = Some(Instant::now());
        }
    }

    /// Copies the WAL's pages into the file on the write connection, holding
    /// it: with no write in between the checkpoint completes, and the next
    /// commit starts the WAL again from its beginning (a checkpoint on
    /// another connection, racing the commits, never completed, and the WAL
    /// grew without bound: 764 MB in 20 s of the gateway bench).
    /// Returns when it let go of the connection.
    fn checkpoint(&self) -> Instant {
        let mut writer = self.writer.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(connection) = &writer.connection
            && let Err(error) = store::checkpoint(connection)
        {
            tracing::error!(path = %writer.config.path.display(), %error, "the ledger's WAL checkpoint failed");
            writer.connection = None;
        }
        drop(writer);
        Instant::now()
    }

    /// Whether a checkpoint was asked for (and clears the request).
    fn checkpoint_asked(&self) -> bool {
        std::mem::take(&mut self.pending().checkpoint_asked)
    }

    /// The ledger is closing: commits everything queued, and reports the
    /// deferred rows that could not be written.
    fn close(&self) {
        let mut writer = self.writer.lock().unwrap_or_else(PoisonError::into_inner);
        loop {
            let batch = self.pending().take_all();
            if batch.is_empty() {
                return;
            }
            let left = writer.write(batch, Committer::Thread);
            if left.outcome == Outcome::Failed {
                let mut lost = left.jobs.len();
                lost += std::mem::take(&mut self.pending().jobs).len();
                tracing::error!(rows = lost, "the ledger stopped with deferred rows it could not write");
                writer.meter_failed(lost);
                return;
            }
        }
    }
}

/// The thread's loop: sleeps until woken or until the queue's next deadline,
/// commits what is due, checkpoints when asked; once every sender is gone,
/// writes what is left and ends.
pub(super) fn run(shared: Arc<Shared>, wake: Receiver<()>) {
    loop {
        let next = shared.pending().next_look();
        let woke = match next {
            Some(at) => wake.recv_timeout(at.saturating_duration_since(Instant::now())),
            None => wake.recv().map_err(|_| RecvTimeoutError::Disconnected),
        };
        if woke == Err(RecvTimeoutError::Disconnected) {
            shared.close();
            return;
        }
        shared.commit_as_thread(None);
        if shared.checkpoint_asked() {
            // Rows that came while the checkpoint held the connection are left to this thread.
            let released = shared.checkpoint();
            shared.commit_as_thread(Some(released));
        }
    }
}

/// The calls whose closing row is among `jobs`.
fn closed_in<'a>(jobs: impl Iterator<Item = &'a Job>) -> HashSet<&'a str> {
    jobs.filter(|job| job.row.kind == Kind::Close).map(|job| job.row.call_id.as_str()).collect()
}

/// Whether `job` is a deferred opening whose call's closing row is committed
/// in the same transaction: the closing row holds everything the opening
/// does, and an opening only matters on its own (a call cut off before its
/// end shows as opened and never closed), so it is left out. Half the rows of
/// a quick call, and of their cost. Left out of a commit only: when the commit
/// fails, the opening is carried like any deferred row.
fn redundant(job: &Job, closed_here: &HashSet<&str>) -> bool {
    job.row.kind == Kind::Open && job.reply.is_none() && closed_here.contains(job.row.call_id.as_str())
}

/// The file's write connection and what it reports to.
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
    /// Whether the connection waits for another process's lock (set for the
    /// thread) or gives up at once (for a call).
    pub waits_for_locks: bool,
    pub commits_since_checkpoint: usize,
}

/// Why a batch was not committed.
enum Failure {
    /// See [`Outcome::HandedOver`].
    NotForCall,
    Failed(WriteError),
}

impl Writer {
    /// Commits `batch`; answers its waiting rows, unless a call met what it
    /// must not wait for (then every row is left for the thread).
    fn write(&mut self, batch: Vec<Job>, by: Committer) -> Left {
        let started = Instant::now();
        let closed_here = closed_in(batch.iter());
        let written = || batch.iter().filter(|job| !redundant(job, &closed_here)).map(|job| &job.row);
        let rows = written().count();
        let outcome = match self.commit(written(), by) {
            Err(Failure::NotForCall) => {
                return Left { jobs: batch, outcome: Outcome::HandedOver, checkpoint: false };
            }
            Err(Failure::Failed(reason)) => Err(reason),
            Ok(()) => Ok(()),
        };
        self.healthy.store(outcome.is_ok(), Ordering::Relaxed);
        let checkpoint = outcome.is_ok() && self.committed(rows, started.elapsed());
        if let Err(reason) = &outcome {
            self.connection = None;
            tracing::error!(path = %self.config.path.display(), rows, %reason, "the ledger could not commit a batch");
        }
        let (replies, carried) = self.answerable(batch, outcome.is_err());
        // Counted before anyone hears back, so a caller told of a failure finds it counted.
        self.meter_failed(if outcome.is_err() { replies.len() } else { 0 });
        for reply in replies {
            // A caller that stopped waiting no longer needs the answer.
            let _ = reply.send(outcome.clone());
        }
        let outcome = if outcome.is_ok() { Outcome::Committed } else { Outcome::Failed };
        Left { jobs: carried, outcome, checkpoint }
    }

    /// The batch's replies, and (after a failure) its deferred rows to carry
    /// (an opening left out of the failed commit among them: see [`redundant`]).
    fn answerable(&self, batch: Vec<Job>, failed: bool) -> (Vec<oneshot::Sender<Result<(), WriteError>>>, Vec<Job>) {
        let mut replies = Vec::with_capacity(batch.len());
        let mut carried = Vec::new();
        for job in batch {
            match (job.reply, failed) {
                (Some(reply), _) => replies.push(reply),
                (None, false) => {}
                (None, true) => carried.push(Job { reply: None, ..job }),
            }
        }
        (replies, carried)
    }

    /// Reports a commit; true when a checkpoint is due.
    fn committed(&mut self, rows: usize, elapsed: Duration) -> bool {
        if let Some(meter) = &self.meter {
            meter.committed(rows, elapsed);
        }
        if let Some(shipper) = &self.shipper {
            // Full: a wake-up is already waiting, and its pass ships these rows too.
            let _ = shipper.try_send(Signal::Committed);
        }
        self.commits_since_checkpoint += 1;
        let due = self.commits_since_checkpoint >= CHECKPOINT_EVERY;
        if due {
            self.commits_since_checkpoint = 0;
        }
        due
    }

    fn meter_failed(&self, rows: usize) {
        if let (Some(meter), true) = (&self.meter, rows > 0) {
            meter.failed(rows);
        }
    }

    /// Appends the rows; the thread opens the file when no connection is held.
    fn commit<'a>(&mut self, rows: impl Iterator<Item = &'a Row>, by: Committer) -> Result<(), Failure> {
        let failed = |error: &dyn std::fmt::Display| Failure::Failed(WriteError::from(error.to_string()));
        let connection = match (self.connection.take(), by) {
            (Some(connection), _) => connection,
            (None, Committer::Call) => return Err(Failure::NotForCall),
            (None, Committer::Thread) => {
                let opened = store::open_writer(&self.config.path, self.config.sync, self.config.max_bytes)
                    .map_err(|error| failed(&error))?;
                self.waits_for_locks = true;
                opened
            }
        };
        let writer = self.connection.insert(connection);
        let waits = by == Committer::Thread;
        if self.waits_for_locks != waits {
            store::wait_for_locks(writer, waits).map_err(|error| failed(&error))?;
            self.waits_for_locks = waits;
        }
        store::append(writer, rows).map_err(|error| match (by, store::is_busy(&error)) {
            (Committer::Call, true) => Failure::NotForCall,
            _ => failed(&error),
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    /// A closing row of `call`, waited for or not.
    fn closing(call: &str, waited: bool) -> Job {
        let row = Row::closing(&crate::ledger::tests::record(call, "alice", "m", 1, None)).unwrap();
        let reply = waited.then(|| oneshot::channel().0);
        Job { row, reply, queued: Instant::now() }
    }

    fn opening(call: &str, queued: Instant) -> Job {
        let row = Row::opening(&crate::ledger::tests::opening(call, "alice", "m", 1)).unwrap();
        Job { row, reply: None, queued }
    }

    fn kinds_and_calls(jobs: &[Job]) -> Vec<(Kind, &str)> {
        jobs.iter().map(|job| (job.row.kind, job.row.call_id.as_str())).collect()
    }

    /// A batch takes the rows waited for, the deferred rows of the calls
    /// closing in it and those whose linger passed; a younger opening of a
    /// call still running stays queued for its own closing row, in order.
    #[test]
    fn a_young_opening_waits_for_its_own_closing_row() {
        let now = Instant::now();
        let mut pending = Pending::default();
        pending.jobs.push_back(opening("old", now - OPEN_LINGER * 2));
        pending.jobs.push_back(opening("running", now));
        pending.jobs.push_back(opening("quick", now));
        pending.jobs.push_back(opening("later", now));
        pending.jobs.push_back(closing("quick", true));
        let batch = pending.take();
        assert_eq!(kinds_and_calls(&batch), [(Kind::Open, "old"), (Kind::Open, "quick"), (Kind::Close, "quick")]);
        let left: Vec<Job> = pending.jobs.drain(..).collect();
        assert_eq!(kinds_and_calls(&left), [(Kind::Open, "running"), (Kind::Open, "later")]);
        let closed = closed_in(batch.iter());
        let written: Vec<_> = batch.iter().filter(|job| !redundant(job, &closed)).collect();
        assert_eq!(written.len(), 2, "quick's opening is left out of the commit, old's is not");
    }

    /// Over a failure the queue keeps at most [`MAX_CARRIED`] deferred rows,
    /// giving up the oldest, and every row someone waits for.
    #[test]
    fn carried_rows_beyond_the_bound_are_given_up_oldest_first() {
        let mut pending = Pending::default();
        pending.jobs.push_back(closing("call-0", true));
        pending.jobs.extend((1..=MAX_CARRIED + 3).map(|n| closing(&format!("call-{n}"), false)));
        assert_eq!(pending.trim_carried(), 3);
        assert_eq!(pending.jobs.len(), MAX_CARRIED + 1);
        assert!(pending.jobs[0].reply.is_some(), "a waited row is never given up");
        assert_eq!(pending.jobs[1].row.call_id, "call-4");
        assert_eq!(pending.trim_carried(), 0);
    }
}
