//! The ledger: every call's record, durable, append-only, hash-chained.
//!
//! Flow: a call's [`CallOpening`], its budget hold ([`HoldRecord`], when a
//! budget applies) and then its [`CallRecord`] reach the [`Ledger`] as an
//! observer; each becomes a row ([`store`]) queued for the writer
//! ([`writer`]), which commits rows in groups to the ledger's log ([`log`]):
//! under `sync = "normal"` on the thread of the call that waits for its row,
//! else on the ledger's thread. A closing record's acknowledgement resolves
//! once its row is in the log. An opening's and a hold's resolve at once
//! under `sync = "normal"`: they wait for their call's closing row (then an
//! opening is left out), and are committed with the next batch once
//! [`writer::OPEN_LINGER`] has passed (see [`Ledger::opened`]). The ledger's
//! thread moves the log's rows into the SQLite file in large batches
//! ([`fill`]), where the hash chain is made, and appends the chain's new head
//! to the anchor file beside it ([`anchor`]; checked against the tail when
//! the file opens: [`Ledger::tail_check`]). Every file is owner-only
//! ([`modes`]). Readers ([`Reader`]: the CLI,
//! `GET /v1/usage`) read the file beside a running gateway, after applying
//! what its log holds. With `[ledger] postgres_url`, a [`shipper`] copies
//! the file's rows to the fleet's PostgreSQL table ([`postgres`]), which
//! [`SharedReader`] reads. `[ledger] on_error` decides what a failed write
//! (to the log, or of the log's rows into the file) means to the call:
//! `refuse` fails it (an unrecorded call cannot be accounted), `continue`
//! logs the loss and lets it go on.

mod anchor;
mod archive;
#[doc(hidden)]
pub mod bench;
mod callid;
mod compact;
mod config;
mod fill;
mod held;
mod log;
mod modes;
mod postgres;
mod query;
mod rollup;
mod rollup_store;
mod segments;
mod shipper;
mod sql;
mod store;
mod summary;
mod walk;
mod writer;

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

pub use anchor::{AnchorKey, AnchorKeyError, AnchorVerdict, ChainAnchor, MIN_KEY_BYTES, Tampering, anchor_path};
pub use archive::ArchiveError;
pub use config::{LedgerConfig, LedgerConfigError, ledger_config};
pub use postgres::{
    PostgresTarget, SharedError, SharedReader, SourceBreak, SourceReport, SourceTampered,
    check_url as check_postgres_url,
};
pub use query::{
    AnchorState, AnchoredReport, Bucket, CallerSpend, ChainBreak, Filter, Group, GroupBy, Latency, LedgerRead, Point,
    ReadError, Reader, SegmentBreak, SegmentCounts, Sums, Totals, UsageQuery, VerifyError, VerifyReport, parse_time,
};
pub use segments::{Retention, SegmentPolicy};

use crate::catalog::{LedgerOnError, LedgerOnTampered, LedgerSync};
use crate::record::{Acknowledged, CallObserver, CallOpening, CallRecord, HoldRecord, ObserverError, acknowledged};
use fill::Filler;
pub use fill::TailCheck;
use held::HeldCalls;
pub(crate) use modes::{create_folder as create_owner_only_folder, prepare_database as prepare_owner_only_database};
pub(crate) use postgres::connect as connect_postgres;
use shipper::{Shipper, Signal};
use store::Row;
use writer::{Entry, Job, Shared, WriteError, Writer};

/// Registers `ledger_body` on a connection to a ledger file: [`BODY_SQL`]
/// then reads a row's body as JSON text however it is stored (see
/// `compact`). For tests and tools that read the file with SQL.
#[doc(hidden)]
pub fn register_sql_functions(connection: &rusqlite::Connection) -> rusqlite::Result<()> {
    compact::register(connection)?;
    callid::register(connection)
}

#[doc(hidden)]
pub use store::BODY_SQL;

/// What the ledger's writer reports about itself (the metrics implement it).
pub trait LedgerMeter: Send + Sync + 'static {
    /// A batch of `records` was committed (appended to the log) in `elapsed`.
    fn committed(&self, records: usize, elapsed: Duration);
    /// The ledger's thread moved `records` from the log into the file in
    /// `elapsed` (one transaction).
    fn stored(&self, records: usize, elapsed: Duration) {
        let _ = (records, elapsed);
    }
    /// A batch of `records` could not be written.
    fn failed(&self, records: usize);
    /// The shipper appended `records` to the fleet's ledger; `lag`: how long
    /// ago the oldest call among them ended (none without a closing row).
    fn shipped(&self, records: usize, lag: Option<Duration>) {
        let _ = (records, lag);
    }
    /// A shipping pass failed (PostgreSQL or the file could not be read).
    fn ship_failed(&self) {}
}

/// What a caller is told when `on_error = "refuse"` fails its call: no path,
/// no SQLite text (those go to the log).
const REFUSED: &str = "the call ledger cannot be written";

/// The call ledger's writing end. Cheap to clone: clones share the queue and
/// the writer's thread, which ends once the last clone is dropped and the
/// queue is written.
#[derive(Clone)]
pub struct Ledger {
    shared: Arc<Shared>,
    /// Wakes the writer's thread; its end is gone when the thread is.
    wake: mpsc::SyncSender<()>,
    /// Whether the writer's thread started: without it nothing is written.
    running: bool,
    path: Arc<Path>,
    /// `[ledger] max_bytes`, which a reader's catch-up keeps to as well.
    max_bytes: Option<u64>,
    on_error: LedgerOnError,
    /// `sync = "full"`: every opening is committed before its call's first
    /// request leaves, as every closing record is before its answer, and every
    /// commit is the writer's thread's (else a call commits the rows it waits
    /// for itself).
    full_sync: bool,
    /// Whether the writer's last commit (or its first open) succeeded.
    healthy: Arc<AtomicBool>,
    /// Whether the ledger's thread is writing the file (see `fill`).
    stored: Arc<AtomicBool>,
    /// Calls opened and not yet closed: a call closing with none beside it
    /// commits at once, since no other record can join its commit. (A record
    /// closed without an opening, such as a refused key's, counts down to
    /// zero at most; a miscount only changes how rows are grouped.)
    open_calls: Arc<AtomicUsize>,
    /// The calls that wrote a hold and have not closed (see `held`).
    held_calls: Arc<HeldCalls>,
    /// The shipper's wake-up, when rows are shipped to PostgreSQL.
    shipper: Option<mpsc::SyncSender<Signal>>,
    postgres: Option<PostgresTarget>,
    /// What the tail's check found at open (see [`Ledger::tail_check`]).
    tail: Option<TailCheck>,
    on_tampered: LedgerOnTampered,
    /// `[ledger]`'s anchor key, which the admin plane's anchor is keyed with too.
    anchor_key: Option<AnchorKey>,
}

impl std::fmt::Debug for Ledger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ledger").field("path", &self.path).field("on_error", &self.on_error).finish_non_exhaustive()
    }
}

impl Ledger {
    /// Starts the writer, having tried to open the file (so a ledger that
    /// cannot be written is known before the first call) and checked its
    /// tail against its anchor (see [`Ledger::tail_check`]). Never fails: a file
    /// that cannot be opened now is tried again at each write (the gateway
    /// starts either way, and `on_error` decides what its calls do meanwhile).
    pub fn open(config: LedgerConfig, meter: Option<Arc<dyn LedgerMeter>>) -> Ledger {
        // One waiting wake-up is enough: the thread reads the queue's flags when it wakes.
        let (wake, woken) = mpsc::sync_channel(1);
        // What the shipper has shipped, which retention waits for (see `segments`).
        let shipped = Arc::new(AtomicI64::new(0));
        let shipper =
            config.postgres.as_ref().and_then(|target| start_shipper(target, &config, meter.clone(), shipped.clone()));
        let sync = config.sync;
        let ledger_path: Arc<Path> = Arc::from(config.path.as_path());
        let (on_error, postgres, max_bytes) = (config.on_error, config.postgres.clone(), config.max_bytes);
        let stored = Arc::new(AtomicBool::new(false));
        let on_tampered = config.on_tampered;
        let anchor_key = config.anchor_key.clone();
        let mut filler = Filler::new(config, meter.clone(), shipper.clone(), stored.clone(), shipped);
        let mut log = log::Log::new(&ledger_path, sync == LedgerSync::Full);
        let opened = filler.open().and_then(|()| log.open().map_err(|error| WriteError::from(error.to_string())));
        if let Err(error) = &opened {
            tracing::error!(path = %ledger_path.display(), %error, "the ledger cannot be opened");
        }
        let tail = filler.tail.clone();
        stored.store(filler.connection.is_some(), Ordering::Relaxed);
        let healthy = Arc::new(AtomicBool::new(opened.is_ok()));
        let writer = Writer { meter, log, healthy: healthy.clone(), stored: stored.clone() };
        let shared = Arc::new(Shared::new(writer));
        let thread_shared = shared.clone();
        let spawned = std::thread::Builder::new()
            .name("weir-ledger".to_owned())
            .spawn(move || writer::run(thread_shared, filler, woken));
        if let Err(error) = &spawned {
            // Every write fails, and is handled by `on_error`.
            tracing::error!(%error, "cannot start the ledger's writer thread");
        }
        Ledger {
            shared,
            wake,
            running: spawned.is_ok(),
            path: ledger_path,
            max_bytes,
            on_error,
            full_sync: sync == LedgerSync::Full,
            healthy,
            stored,
            open_calls: Arc::new(AtomicUsize::new(0)),
            held_calls: Arc::default(),
            shipper,
            postgres,
            tail,
            on_tampered,
            anchor_key,
        }
    }

    /// The anchor key `[ledger]` names, if any.
    pub fn anchor_key(&self) -> Option<&AnchorKey> {
        self.anchor_key.as_ref()
    }

    /// What the check of the file's tail against its anchor found when the
    /// ledger opened (`None`: the file could not be opened then).
    pub fn tail_check(&self) -> Option<&TailCheck> {
        self.tail.as_ref()
    }

    /// `[ledger] on_tampered`: whether a gateway starts on a tampered ledger.
    pub fn on_tampered(&self) -> LedgerOnTampered {
        self.on_tampered
    }

    /// Waits up to `timeout` (blocking) for the ledger's thread to move every
    /// row logged so far into the file; true when it did.
    pub fn fill_pending(&self, timeout: Duration) -> bool {
        let (done, filled) = mpsc::channel();
        self.shared.ask_fill(done, &self.wake);
        filled.recv_timeout(timeout).unwrap_or(false)
    }

    /// The SQLite file (for a [`Reader`]).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// A reader of this ledger's file.
    pub fn reader(&self) -> Result<Reader, ReadError> {
        Reader::open_within(&self.path, self.max_bytes)
    }

    /// The fleet's PostgreSQL ledger this one ships to, if any.
    pub fn postgres(&self) -> Option<&PostgresTarget> {
        self.postgres.as_ref()
    }

    /// What queries read: the fleet's ledger when there is one (blocking:
    /// it connects), else this file.
    pub fn shared_or_local(&self) -> Result<Box<dyn LedgerRead>, ReadError> {
        Ok(match self.postgres() {
            Some(target) => Box::new(SharedReader::connect(target)?),
            None => Box::new(self.reader()?),
        })
    }

    /// Ships every row committed so far, waiting up to `timeout` (blocking).
    /// True when the shipper finished its pass in time (whether or not
    /// PostgreSQL took the rows: those left wait in the file); false without
    /// a shipper or when the time ran out.
    pub fn ship_pending(&self, timeout: Duration) -> bool {
        let Some(shipper) = &self.shipper else { return false };
        self.fill_pending(timeout);
        let (done, finished) = mpsc::channel();
        shipper.send(Signal::Flush(done)).is_ok() && finished.recv_timeout(timeout).is_ok()
    }

    /// Queues `entry` for the writer. A row that is `waited` for resolves once
    /// committed (under `sync = "normal"` this call commits it, unless
    /// another holds the log, after yielding first when `company`
    /// says other calls may add theirs); any other resolves at once (a
    /// failure to queue it aside).
    fn write(&self, call_id: &str, entry: serde_json::Result<Entry>, waited: bool, company: bool) -> Acknowledged {
        let (reply, answer) = match waited {
            true => {
                let (reply, answer) = oneshot::channel();
                (Some(reply), Some(answer))
            }
            false => (None, None),
        };
        // While the file cannot be written, the thread commits every row, after trying it.
        let for_thread = waited && (self.full_sync || !self.stored.load(Ordering::Relaxed));
        let sent: Result<(), WriteError> = match (entry, self.running) {
            (Ok(entry), true) => {
                self.shared.push(Job { entry, reply, queued: Instant::now() }, for_thread, &self.wake);
                Ok(())
            }
            (Ok(_), false) => Err(WriteError::from("the ledger's writer has stopped")),
            (Err(error), _) => Err(WriteError::from(format!("cannot encode the record: {error}"))),
        };
        let answer = match (sent, answer) {
            (Ok(()), None) => return acknowledged(),
            (Ok(()), Some(answer)) => Ok(answer),
            (Err(reason), _) => Err(reason),
        };
        let call_id = call_id.to_owned();
        let on_error = self.on_error;
        let commit = (!for_thread && answer.is_ok()).then(|| CallCommit::new(&self.shared, &self.wake, company));
        Box::pin(async move {
            let outcome = match answer {
                Ok(answer) => committed(answer, commit).await,
                Err(reason) => Err(reason),
            };
            match (outcome, on_error) {
                (Ok(()), _) => Ok(()),
                (Err(reason), LedgerOnError::Refuse) => {
                    tracing::error!(call_id = %call_id, %reason, "the call's record was not written; the call is refused");
                    Err(ObserverError(REFUSED.to_owned()))
                }
                (Err(reason), LedgerOnError::Continue) => {
                    tracing::error!(call_id = %call_id, %reason, "the call's record was not written; the call goes on (on_error = continue)");
                    Ok(())
                }
            }
        })
    }

    /// Whether openings and holds are waited for: under `sync = "full"`, and
    /// while the log or the file is failing (so that `on_error = "refuse"`
    /// refuses a call before anything is sent for it).
    fn strict(&self) -> bool {
        self.full_sync || !self.healthy.load(Ordering::Relaxed) || !self.stored.load(Ordering::Relaxed)
    }
}

/// A waited row's commit by its own call (under `sync = "normal"`), made when
/// the acknowledgement is first polled after a yield, or when it is dropped
/// unpolled (a record closed by a drop is still committed).
struct CallCommit {
    shared: Arc<Shared>,
    wake: mpsc::SyncSender<()>,
    armed: bool,
    /// Whether to yield before committing (other calls are open).
    company: bool,
}

impl CallCommit {
    fn new(shared: &Arc<Shared>, wake: &mpsc::SyncSender<()>, company: bool) -> CallCommit {
        CallCommit { shared: shared.clone(), wake: wake.clone(), armed: true, company }
    }

    fn run(mut self) {
        self.armed = false;
        self.shared.commit_as_call(&self.wake);
    }

    fn disarm(mut self) {
        self.armed = false;
    }
}

impl Drop for CallCommit {
    fn drop(&mut self) {
        if self.armed {
            self.shared.commit_as_call(&self.wake);
        }
    }
}

/// Waits for a row's commit. With `commit` the call commits it: first, when
/// other calls are open, it yields, so that the calls ready on this worker
/// queue their rows too and one commit carries them all (at 32 callers on the
/// gateway bench, without the yield, a commit carried 2.4 rows: one call's
/// opening and closing). A call alone does not yield: nothing can join its
/// commit, and the yield cost it ~13 µs (`benches/ledger.rs`, one writer:
/// acknowledgement 82 → 69 µs).
async fn committed(
    mut answer: oneshot::Receiver<Result<(), WriteError>>,
    commit: Option<CallCommit>,
) -> Result<(), WriteError> {
    let stopped = || Err(WriteError::from("the ledger's writer has stopped"));
    if let Some(commit) = commit {
        if commit.company {
            tokio::task::yield_now().await;
        }
        match answer.try_recv() {
            Ok(outcome) => {
                commit.disarm();
                return outcome;
            }
            Err(oneshot::error::TryRecvError::Empty) => commit.run(),
            Err(oneshot::error::TryRecvError::Closed) => {
                commit.disarm();
                return stopped();
            }
        }
    }
    answer.await.unwrap_or_else(|_| stopped())
}

/// Starts the shipper's thread; `None` (logged) when the thread cannot start,
/// and rows then stay in the file.
fn start_shipper(
    target: &PostgresTarget,
    config: &LedgerConfig,
    meter: Option<Arc<dyn LedgerMeter>>,
    shipped: Arc<AtomicI64>,
) -> Option<mpsc::SyncSender<Signal>> {
    // One waiting wake-up is enough: a pass ships everything committed.
    let (wake, signals) = mpsc::sync_channel(1);
    let shipper = Shipper::new(target.clone(), config.path.clone(), meter, config.anchor_key.clone(), shipped);
    match std::thread::Builder::new().name("weir-ledger-ship".to_owned()).spawn(move || shipper.run(signals)) {
        Ok(_) => Some(wake),
        Err(error) => {
            tracing::error!(%error, "cannot start the ledger's shipper thread: rows stay in the local ledger");
            None
        }
    }
}

impl CallObserver for Ledger {
    /// Under `sync = "normal"` an opening is deferred: the call does not wait
    /// for it, and the writer commits it with the call's own closing record
    /// (which makes it redundant: it is left out), or with the first batch
    /// after [`writer::OPEN_LINGER`] when the call runs longer. It
    /// is waited for before the request leaves under `sync = "full"`, and
    /// while the ledger is failing, so that `on_error = "refuse"` refuses a
    /// call before anything is sent for it.
    fn opened(&self, opening: &CallOpening) -> Acknowledged {
        self.open_calls.fetch_add(1, Ordering::Relaxed);
        let waited = self.strict();
        let entry = match waited {
            true => Row::opening(opening).map(Entry::Row),
            false => Ok(Entry::Opening(opening.clone())),
        };
        self.write(&opening.call_id, entry, waited, true)
    }

    /// Deferred and waited for as an opening is (see [`Self::opened`]).
    /// A hold stands alone for the roll-ups: its call is running, so no
    /// closing row of it precedes it (see `held`).
    fn held(&self, hold: &HoldRecord) -> Acknowledged {
        let waited = self.strict();
        self.held_calls.held(&hold.call_id);
        let row = Row::hold(hold).map(|row| Row { stands_alone: true, ..row });
        self.write(&hold.call_id, row.map(Entry::Row), waited, true)
    }

    /// A closing row stands alone for the roll-ups when its call held nothing.
    fn closed(&self, record: &Arc<CallRecord>) -> Acknowledged {
        let (Ok(before) | Err(before)) =
            self.open_calls.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |open| Some(open.saturating_sub(1)));
        let others = before.saturating_sub(1);
        let stands_alone = !self.held_calls.closing(&record.call_id);
        let row = Row::closing(record).map(|row| Row { stands_alone, ..row });
        self.write(&record.call_id, row.map(Entry::Row), true, others > 0)
    }
}

#[cfg(test)]
pub(crate) mod tests;

#[cfg(test)]
mod anchor_tests;
#[cfg(test)]
mod callid_tests;
#[cfg(test)]
mod rollup_tests;
#[cfg(test)]
mod segment_tests;
#[cfg(test)]
mod version_tests;
