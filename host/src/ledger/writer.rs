//! The writer: who commits the ledger's rows, and when.
//!
//! Rows wait in one queue ([`Pending`], first in, first out) and one log
//! ([`Writer`], see `log`) takes them in groups. Whoever holds the log takes
//! every row that is due, in order: all of them, except a running call's
//! deferred rows younger than [`OPEN_LINGER`], which stay queued for their
//! own call's closing row (see [`Pending::take`]). A row is committed once
//! its batch is in the log; the ledger's thread later moves the log's rows
//! into SQLite in large batches (see `fill`).
//!
//! Under `sync = "normal"` the call that needs a row committed (a closing
//! record, or an opening that must be in the log before its request leaves)
//! appends it itself, on its own thread, with every row waiting (after one
//! yield when other calls are open, so that the calls ready beside it queue
//! theirs: see `ledger::committed`). Handing every row to the ledger's thread
//! and being woken back made the gateway 1.4× slower at 32 callers, and a
//! single writer's acknowledgement 341 µs instead of 73 (`benches/ledger.rs`,
//! when a commit was SQLite's). A call that finds the log taken leaves its
//! row to the holder, who looks at the queue again each time it lets go (so
//! no row is left without a committer). A call never opens a file: that, a
//! holder's passes beyond [`MAX_PASSES`], every commit under `sync = "full"`
//! (an fsync is too slow for an async worker) and every commit while SQLite
//! cannot be written (the thread tries the file first, so that a call is not
//! answered while its record cannot reach the file) go to the ledger's
//! thread.
//!
//! The thread also commits a *deferred* row (an opening or a hold under
//! `sync = "normal"`) that no commit took within [`OPEN_LINGER`], retries
//! rows carried over a failure, fills SQLite, and writes what is left when
//! the ledger closes.
//!
//! A failed batch is cut off the log, every waiting row in it answered with
//! the error; its deferred rows go back to the front of the queue (so a
//! closing row never lands without its opening), up to [`MAX_CARRIED`]. The
//! next commit opens a new segment, so a ledger that could not be written
//! recovers when it can.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, TryLockError};
use std::time::{Duration, Instant};

use rustc_hash::FxHashSet;
use tokio::sync::oneshot;

use super::LedgerMeter;
use super::fill::{Filler, Fills, Logged};
use super::log::{Appended, Log};
use super::store::{Kind, Row};
use crate::record::CallOpening;

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

/// Why a row was not committed (the file's path and SQLite's text: for the
/// server's log, never for a caller).
pub(super) type WriteError = Arc<str>;

/// A row to append and, unless it is deferred, where to say whether it was
/// committed.
pub(super) struct Job {
    pub entry: Entry,
    pub reply: Option<oneshot::Sender<Result<(), WriteError>>>,
    pub queued: Instant,
}

/// A queued row: encoded, or a deferred opening kept as the call gave it
/// until a commit writes it. Most deferred openings are never written (their
/// call's closing row comes within [`OPEN_LINGER`]: see [`redundant`]), and
/// encoding each when it was queued cost 0.6 % of the gateway's CPU at 32
/// callers (`perf`, 2026-12-03).
pub(super) enum Entry {
    Row(Row),
    Opening(CallOpening),
}

impl Entry {
    fn kind(&self) -> Kind {
        match self {
            Self::Row(row) => row.kind,
            Self::Opening(_) => Kind::Open,
        }
    }

    pub(super) fn call_id(&self) -> &str {
        match self {
            Self::Row(row) => &row.call_id,
            Self::Opening(opening) => &opening.call_id,
        }
    }

    /// Encodes a kept opening in place.
    fn encode(&mut self) -> serde_json::Result<()> {
        if let Self::Opening(opening) = self {
            let row = Row::opening(opening)?;
            *self = Self::Row(row);
        }
        Ok(())
    }

    fn row(&self) -> Option<&Row> {
        match self {
            Self::Row(row) => Some(row),
            Self::Opening(_) => None,
        }
    }
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
    /// The queue [`Self::take`] builds what it leaves in, kept for its capacity.
    spare: VecDeque<Job>,
    /// The thread is watching the deferred rows' age (it was woken for the
    /// first one and has not yet seen the queue without one).
    watched: bool,
    /// A commit the thread must make now (a hand-over, or `sync = "full"`).
    commit_asked: bool,
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
                .map(|job| job.reply.is_some() || lingered(job) || closing.contains(job.entry.call_id()))
                .collect()
        };
        let mut batch = Vec::with_capacity(taken.iter().filter(|take| **take).count().min(MAX_BATCH));
        let mut left = std::mem::take(&mut self.spare);
        for (job, take) in self.jobs.drain(..).zip(taken) {
            match take && batch.len() < MAX_BATCH {
                true => batch.push(job),
                false => left.push_back(job),
            }
        }
        self.spare = std::mem::replace(&mut self.jobs, left);
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
    fills: Mutex<Fills>,
}

/// What a pass left: rows for the front of the queue (a hand-over's whole
/// batch, or a failed batch's deferred rows), how it ended, and the rows it
/// logged for the filler.
struct Left {
    jobs: Vec<Job>,
    outcome: Outcome,
    logged: Option<Logged>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Committed,
    Failed,
    /// A call found no open log segment, or SQLite failing: nothing was
    /// written, and the thread takes over.
    HandedOver,
}

/// Locks `mutex`, whose data is consistent between statements: a panic
/// elsewhere leaves it usable.
pub(super) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Shared {
    pub(super) fn new(writer: Writer) -> Shared {
        Shared { pending: Mutex::new(Pending::default()), writer: Mutex::new(writer), fills: Mutex::default() }
    }

    fn pending(&self) -> MutexGuard<'_, Pending> {
        lock(&self.pending)
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

    /// Asks the thread to fill SQLite with every row logged so far; `done`
    /// hears whether it could.
    pub(super) fn ask_fill(&self, done: std::sync::mpsc::Sender<bool>, wake: &SyncSender<()>) {
        lock(&self.fills).ask(done);
        let _ = wake.try_send(());
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
            let outcome = left.outcome;
            self.settle(&writer, left, Some(wake));
            drop(writer);
            let released = Instant::now();
            if outcome == Outcome::HandedOver {
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
    /// rows given up), queues its logged rows for the filler (in the log's
    /// order: the writer is held) and notes what the thread must do; `wake`
    /// (a call's) wakes the thread for a first logged run.
    fn settle(&self, writer: &Writer, left: Left, wake: Option<&SyncSender<()>>) {
        if let Some(logged) = left.logged
            && lock(&self.fills).push(logged)
            && let Some(wake) = wake
        {
            let _ = wake.try_send(());
        }
        let mut pending = self.pending();
        pending.put_back(left.jobs);
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
    /// rows left to it while it held the log, until none is. While SQLite
    /// cannot be written, each batch first tries to fill it, and fails when
    /// that does. Carried rows alone are not retried in a loop: a failed pass
    /// ends it unless rows wait.
    fn commit_as_thread(&self, filler: &mut Filler) {
        let mut released = None;
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
            let store = match filler.stored.load(Ordering::Relaxed) {
                true => Ok(()),
                false => self.fill(filler),
            };
            let mut writer = lock(&self.writer);
            let batch = self.pending().take();
            if batch.is_empty() {
                return;
            }
            let left = match store {
                Ok(()) => writer.write(batch, Committer::Thread),
                Err(reason) => writer.refuse(batch, reason),
            };
            failed = left.outcome == Outcome::Failed;
            self.settle(&writer, left, None);
            drop(writer);
            released = Some(Instant::now());
        }
    }

    /// Fills SQLite with every run logged so far (see `fill`).
    fn fill(&self, filler: &mut Filler) -> Result<(), WriteError> {
        match filler.fill(&self.fills) {
            true => Ok(()),
            false => Err(WriteError::from("the ledger's file cannot be written (see the log's earlier error)")),
        }
    }

    /// Whether the filler is due (its delay passed, or someone asked).
    fn fill_due(&self, now: Instant) -> bool {
        lock(&self.fills).due_at().is_some_and(|at| now >= at)
    }

    /// The ledger is closing: logs everything queued, reports the deferred
    /// rows that could not be written, and fills SQLite (rows it cannot take
    /// stay in the log for the next start).
    fn close(&self, filler: &mut Filler) {
        let mut writer = lock(&self.writer);
        loop {
            let batch = self.pending().take_all();
            if batch.is_empty() {
                break;
            }
            let left = writer.write(batch, Committer::Thread);
            let failed = left.outcome == Outcome::Failed;
            let lost = left.jobs.len();
            self.settle(&writer, Left { jobs: Vec::new(), ..left }, None);
            if failed {
                let lost = lost + std::mem::take(&mut self.pending().jobs).len();
                tracing::error!(rows = lost, "the ledger stopped with deferred rows it could not write");
                writer.meter_failed(lost);
                break;
            }
        }
        drop(writer);
        let _ = self.fill(filler);
    }
}

#[cfg(test)]
impl Shared {
    /// Makes the log's next append fail, as a full disk would.
    pub(super) fn break_log(&self) {
        lock(&self.writer).log.break_segment();
    }
}

/// The thread's loop: sleeps until woken or until the queue's, the fill's
/// or the segments' upkeep's next deadline, commits what is due, fills
/// SQLite when due, keeps the segments when due; once every sender is gone,
/// writes what is left and ends.
pub(super) fn run(shared: Arc<Shared>, mut filler: Filler, wake: Receiver<()>) {
    loop {
        let look = shared.pending().next_look();
        let fill = lock(&shared.fills).due_at();
        let next = [look, fill, filler.upkeep_due_at()].into_iter().flatten().min();
        let woke = match next {
            Some(at) => wake.recv_timeout(at.saturating_duration_since(Instant::now())),
            None => wake.recv().map_err(|_| RecvTimeoutError::Disconnected),
        };
        if woke == Err(RecvTimeoutError::Disconnected) {
            shared.close(&mut filler);
            return;
        }
        shared.commit_as_thread(&mut filler);
        if shared.fill_due(Instant::now()) {
            let _ = shared.fill(&mut filler);
        }
        filler.upkeep_if_due(Instant::now());
    }
}

/// The calls whose closing row is among `jobs`.
fn closed_in<'a>(jobs: impl Iterator<Item = &'a Job>) -> FxHashSet<&'a str> {
    jobs.filter(|job| job.entry.kind() == Kind::Close).map(|job| job.entry.call_id()).collect()
}

/// Whether `job` is a deferred opening whose call's closing row is committed
/// in the same batch: the closing row holds everything the opening does, and
/// an opening only matters on its own (a call cut off before its end shows as
/// opened and never closed), so it is left out. Half the rows of a quick
/// call, and of their cost. Left out of a commit only: when the commit fails,
/// the opening is carried like any deferred row.
fn redundant(job: &Job, closed_here: &FxHashSet<&str>) -> bool {
    job.entry.kind() == Kind::Open && job.reply.is_none() && closed_here.contains(job.entry.call_id())
}

/// The log and what it reports to.
pub(super) struct Writer {
    pub meter: Option<Arc<dyn LedgerMeter>>,
    pub log: Log,
    /// Whether the last batch (or the first open) succeeded: while it is false,
    /// openings are written to be waited for.
    pub healthy: Arc<AtomicBool>,
    /// The filler's: whether SQLite is being written (a call hands its
    /// batch to the thread while it is not).
    pub stored: Arc<AtomicBool>,
}

/// Why a batch was not committed.
enum Failure {
    /// See [`Outcome::HandedOver`].
    NotForCall,
    Failed(WriteError),
}

impl Writer {
    /// Appends `batch` to the log; answers its waiting rows, unless a call
    /// met what it must not do (then every row is left for the thread).
    fn write(&mut self, mut batch: Vec<Job>, by: Committer) -> Left {
        let started = Instant::now();
        let mut written: Vec<bool> = {
            let closed_here = closed_in(batch.iter());
            batch.iter().map(|job| !redundant(job, &closed_here)).collect()
        };
        self.encode_openings(&mut batch, &mut written);
        let rows = batch.iter().zip(&written).filter(|(_, written)| **written).filter_map(|(job, _)| job.entry.row());
        let appended = match self.commit(rows, by) {
            Err(Failure::NotForCall) => {
                return Left { jobs: batch, outcome: Outcome::HandedOver, logged: None };
            }
            Err(Failure::Failed(reason)) => Err(reason),
            Ok(appended) => Ok(appended),
        };
        if let (Ok(_), Some(meter)) = (&appended, &self.meter) {
            meter.committed(written.iter().filter(|written| **written).count(), started.elapsed());
        }
        self.finish(batch, &written, appended)
    }

    /// Encodes the kept openings `batch` writes; one that cannot be encoded
    /// is logged, counted as a failure and left out (nobody waits for it).
    fn encode_openings(&self, batch: &mut [Job], written: &mut [bool]) {
        for (job, written) in batch.iter_mut().zip(written.iter_mut()).filter(|(_, written)| **written) {
            if let Err(error) = job.entry.encode() {
                tracing::error!(call_id = %job.entry.call_id(), %error, "the ledger cannot encode a call's opening");
                self.meter_failed(1);
                *written = false;
            }
        }
    }

    /// Fails `batch` without writing it: SQLite cannot be written (`reason`).
    fn refuse(&mut self, batch: Vec<Job>, reason: WriteError) -> Left {
        let written = vec![true; batch.len()];
        self.finish(batch, &written, Err(reason))
    }

    /// Answers `batch`'s waiting rows with `appended`'s outcome; the rows
    /// `written` become the filler's run, or (after a failure) its deferred
    /// rows are carried (an opening left out of the failed commit among them:
    /// see [`redundant`]).
    fn finish(&mut self, batch: Vec<Job>, written: &[bool], appended: Result<Appended, WriteError>) -> Left {
        self.healthy.store(appended.is_ok(), Ordering::Relaxed);
        let outcome = appended.as_ref().map(drop).map_err(WriteError::clone);
        if let Err(reason) = &outcome {
            tracing::error!(rows = batch.len(), %reason, "the ledger could not commit a batch");
        }
        let mut replies = Vec::with_capacity(batch.len());
        let mut carried = Vec::new();
        let mut rows = Vec::with_capacity(batch.len());
        for (job, written) in batch.into_iter().zip(written) {
            let Job { entry, reply, queued } = job;
            match (reply, &outcome, entry) {
                (Some(reply), Ok(()), Entry::Row(row)) => {
                    replies.push(reply);
                    rows.push(row);
                }
                (Some(reply), Err(_), _) => replies.push(reply),
                // Not written (a waited row is queued encoded: this is never met).
                (Some(reply), Ok(()), Entry::Opening(_)) => {
                    let _ = reply.send(Err(WriteError::from("the row was not encoded")));
                }
                (None, Ok(()), Entry::Row(row)) if *written => rows.push(row),
                (None, Ok(()), _) => {}
                // Carried rows are due at the next commit: aged past their linger.
                (None, Err(_), entry) => {
                    let queued = Instant::now().checked_sub(OPEN_LINGER).map_or(queued, |due| due.min(queued));
                    carried.push(Job { entry, reply: None, queued });
                }
            }
        }
        // Counted before anyone hears back, so a caller told of a failure finds it counted.
        self.meter_failed(if outcome.is_err() { replies.len() } else { 0 });
        for reply in replies {
            // A caller that stopped waiting no longer needs the answer.
            let _ = reply.send(outcome.clone());
        }
        match appended {
            Ok(Appended { segment, first_line, retired }) => Left {
                jobs: carried,
                outcome: Outcome::Committed,
                logged: Some(Logged { segment, first_line, rows, retired }),
            },
            Err(_) => Left { jobs: carried, outcome: Outcome::Failed, logged: None },
        }
    }

    fn meter_failed(&self, rows: usize) {
        if let (Some(meter), true) = (&self.meter, rows > 0) {
            meter.failed(rows);
        }
    }

    /// Appends the rows to the log; a call only to an open segment while
    /// SQLite is being written (the thread opens one, and sees to SQLite).
    fn commit<'a>(&mut self, rows: impl Iterator<Item = &'a Row>, by: Committer) -> Result<Appended, Failure> {
        if by == Committer::Call && !(self.log.is_open() && self.stored.load(Ordering::Relaxed)) {
            return Err(Failure::NotForCall);
        }
        self.log.append(rows).map_err(|error| Failure::Failed(WriteError::from(format!("the ledger's log: {error}"))))
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
        Job { entry: Entry::Row(row), reply, queued: Instant::now() }
    }

    fn opening(call: &str, queued: Instant) -> Job {
        let opening = crate::ledger::tests::opening(call, "alice", "m", 1);
        Job { entry: Entry::Opening(opening), reply: None, queued }
    }

    fn kinds_and_calls(jobs: &[Job]) -> Vec<(Kind, &str)> {
        jobs.iter().map(|job| (job.entry.kind(), job.entry.call_id())).collect()
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
        assert_eq!(pending.jobs[1].entry.call_id(), "call-4");
        assert_eq!(pending.trim_carried(), 0);
    }
}
