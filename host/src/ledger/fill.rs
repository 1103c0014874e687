//! The filler: moves the rows the log holds into SQLite, on the ledger's
//! thread, off every call's path.
//!
//! Each batch appended to the log (see `writer`) queues here as a [`Logged`]
//! run; the thread takes every run queued [`FILL_DELAY`] after the first
//! came (sooner once [`FILL_ROWS`] wait) and commits them in one
//! transaction, so a commit carries hundreds of rows instead of the few a
//! call's own batch holds. A run is
//! applied by its lines (`store::append_logged`), so a line a reader or a
//! restarted gateway applied first from the log's file is not applied twice.
//!
//! After each fill, the chain's new head is appended to the anchor file
//! (`anchor`): one line per fill. When the file opens, its tail is checked
//! against the anchor first ([`super::Reader::check_tail`]); a tail the
//! anchor does not vouch for is logged, and nothing more is anchored, so the
//! evidence stays as found; unless `[ledger] on_tampered = "start"`: then the
//! anchor file is renamed aside (`<file>.anchor.tampered-<seconds>`, kept as
//! the evidence) and anchoring starts afresh from the current head.
//!
//! A failed fill keeps its runs (their rows are safe in the log) and is tried
//! again after [`RETRY`]; meanwhile the ledger counts as failing (`on_error`
//! decides what calls do). The file is opened again at the next try, and
//! each open first catches up on the log's segments (`log::catch_up`): what
//! an earlier process logged and never applied.

use std::collections::{BTreeMap, VecDeque};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::mpsc::{Sender, SyncSender};
use std::time::{Duration, Instant};

use rusqlite::Connection;

use super::LedgerMeter;
use super::anchor::{self, AnchorLog};
use super::config::LedgerConfig;
use super::log;
use super::query::{AnchorState, Reader, VerifyError};
use super::rollup_store;
use super::segments::{self, Segment, SegmentState, Segmenter};
use super::shipper::Signal;
use super::store::{self, Row, Run};
use super::writer::WriteError;
use crate::catalog::{LedgerOnTampered, LedgerSync};

/// How long the first run queued waits for others before the thread commits
/// them all. Readers do not wait for it (they catch up on the log
/// themselves), and a row is durable before it is queued; the delay only
/// sizes the commits.
///
/// At 20 ms a fill carried ~34 rows at one caller on the gateway bench and
/// cost 28 µs of the thread per row (BEGIN, the chain's end, the WAL frames
/// and their checksums are paid per fill); at 200 ms it carried ~320–400
/// rows at 17–21 µs per row, and the thread's CPU per call fell from 21–23
/// to 11–15 µs (2026-12-03).
pub(super) const FILL_DELAY: Duration = Duration::from_millis(200);

/// Rows waiting at which the thread fills without waiting for
/// [`FILL_DELAY`]: bounds the memory the waiting rows hold (about 1 KiB
/// each) at a high call rate. Fills of over 1,000 rows (32 callers, no
/// bound) cost no less per row than fills of ~130 (24 and 22 µs).
pub(super) const FILL_ROWS: usize = 512;

/// How often a failed fill is tried again.
pub(super) const RETRY: Duration = Duration::from_secs(1);

/// One append's rows, in the log's order, and where they are there.
pub(super) struct Logged {
    pub segment: Arc<str>,
    pub first_line: u64,
    pub rows: Vec<Row>,
    /// A segment left full by this append (deleted once the run is applied).
    pub retired: Option<Arc<str>>,
}

impl Logged {
    fn run(&self) -> Run<'_> {
        Run { segment: &self.segment, first_line: self.first_line, rows: self.rows.iter().map(Some).collect() }
    }

    /// Whether `next` continues this run in the same segment.
    fn continued_by(&self, next: &Logged) -> bool {
        self.retired.is_none()
            && self.segment == next.segment
            && self.first_line + self.rows.len() as u64 == next.first_line
    }
}

/// The runs waiting for the thread.
#[derive(Default)]
pub(super) struct Fills {
    runs: VecDeque<Logged>,
    /// When the oldest run waiting was queued.
    since: Option<Instant>,
    /// When the last fill failed; cleared by one that succeeds.
    failed_at: Option<Instant>,
    /// Who waits for everything queued to be filled (told whether it was).
    asked: Vec<Sender<bool>>,
    /// When the first of them asked.
    asked_at: Option<Instant>,
    /// How many rows the runs hold.
    rows: usize,
}

impl Fills {
    /// Queues `logged` (joined to the last run when it continues it); true
    /// when the thread must be woken: to time the first run waiting, or to
    /// fill now that [`FILL_ROWS`] are.
    pub(super) fn push(&mut self, logged: Logged) -> bool {
        let before = self.rows;
        self.rows += logged.rows.len();
        match self.runs.back_mut() {
            Some(last) if last.continued_by(&logged) => {
                last.rows.extend(logged.rows);
                last.retired = logged.retired;
            }
            _ => self.runs.push_back(logged),
        }
        let first = self.since.is_none();
        if first {
            self.since = Some(Instant::now());
        }
        first || (before < FILL_ROWS && self.rows >= FILL_ROWS)
    }

    /// Someone waits for a fill: the thread fills at once.
    pub(super) fn ask(&mut self, done: Sender<bool>) {
        self.asked.push(done);
        self.asked_at.get_or_insert_with(Instant::now);
    }

    /// When the thread should fill next (`None`: when woken): when someone
    /// asked, else the first run's delay (at once past [`FILL_ROWS`]), or a
    /// failed fill's retry.
    pub(super) fn due_at(&self) -> Option<Instant> {
        let unasked = self.since.map(|since| match (self.failed_at, self.rows >= FILL_ROWS) {
            (Some(failed_at), _) => failed_at + RETRY,
            (None, true) => since,
            (None, false) => since + FILL_DELAY,
        });
        match (self.asked_at, unasked) {
            (Some(asked_at), Some(unasked)) => Some(asked_at.min(unasked)),
            (asked_at, unasked) => asked_at.or(unasked),
        }
    }

    /// Every run waiting, and who asked for them to be filled.
    fn take(&mut self) -> (Vec<Logged>, Vec<Sender<bool>>) {
        self.since = None;
        self.asked_at = None;
        self.rows = 0;
        (self.runs.drain(..).collect(), std::mem::take(&mut self.asked))
    }

    /// A failed fill's runs back at the front, in their order.
    fn put_back(&mut self, runs: Vec<Logged>) {
        if runs.is_empty() {
            return;
        }
        for run in runs.into_iter().rev() {
            self.rows += run.rows.len();
            self.runs.push_front(run);
        }
        self.since.get_or_insert_with(Instant::now);
    }
}

/// What the check of the file's tail against its anchor found when the
/// file was last opened (see [`super::Reader::check_tail`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TailCheck {
    /// The anchor vouches for the tail (or there is none yet to check).
    Vouched(AnchorState),
    /// The tail was cut or rewritten, or the anchor forged or removed: why.
    Tampered(String),
}

/// The file's write connection, held by the ledger's thread.
pub(super) struct Filler {
    pub config: LedgerConfig,
    pub meter: Option<Arc<dyn LedgerMeter>>,
    pub connection: Option<Connection>,
    /// Woken after each fill, when rows are shipped to PostgreSQL.
    pub shipper: Option<SyncSender<Signal>>,
    /// Whether the last fill (or the first open) succeeded: while it is
    /// false, every row is written by the thread, after a fill that succeeds.
    pub stored: Arc<AtomicBool>,
    anchor: AnchorLog,
    /// Whether fills are anchored: not after the tail's check found
    /// tampering that `on_tampered = "refuse"` keeps as found.
    anchoring: bool,
    /// Whether the last anchor line could not be written (logged once).
    anchor_failing: bool,
    /// The last head this filler anchored: a fill whose rows a reader had
    /// applied first inserts none, and its head is anchored all the same.
    last_anchored: i64,
    /// What the tail's check found at the last open.
    pub tail: Option<TailCheck>,
    /// Seals, archives and releases segments after each fill (see `segments`).
    segmenter: Option<Segmenter>,
    /// Whether the segments' last upkeep failed (logged once until one succeeds).
    segments_failing: bool,
    /// The last `seq` the shipper has in PostgreSQL (0: none, or no shipper).
    shipped: Arc<AtomicI64>,
    /// When the segments' upkeep last ran (after a fill, or idle: see
    /// [`Self::upkeep_due_at`]).
    last_upkeep: Instant,
}

/// The longest a ledger with segments sealed by age or released by age goes
/// without their upkeep while no fill comes: an idle gateway still seals a
/// segment `segment_hours` old and releases one past `retain_days`.
const IDLE_UPKEEP: Duration = Duration::from_secs(60);

impl Filler {
    pub(super) fn new(
        config: LedgerConfig,
        meter: Option<Arc<dyn LedgerMeter>>,
        shipper: Option<SyncSender<Signal>>,
        stored: Arc<AtomicBool>,
        shipped: Arc<AtomicI64>,
    ) -> Self {
        let anchor = AnchorLog::new(&config.path, config.anchor_key.clone(), config.sync == LedgerSync::Full);
        let segmenter = config.segments.clone().map(|policy| Segmenter::new(policy, &config.path));
        Self {
            config,
            meter,
            connection: None,
            shipper,
            stored,
            anchor,
            anchoring: false,
            anchor_failing: false,
            last_anchored: 0,
            tail: None,
            segmenter,
            segments_failing: false,
            shipped,
            last_upkeep: Instant::now(),
        }
    }

    /// When the segments' upkeep is next due with no fill: [`IDLE_UPKEEP`]
    /// (or half the shortest age that seals or releases, when shorter) after
    /// the last one; `None` when no segment is sealed or released by age.
    pub(super) fn upkeep_due_at(&self) -> Option<Instant> {
        let policy = self.segmenter.as_ref()?.policy();
        let ages = [policy.max_age, policy.retention.as_ref().and_then(|retention| retention.max_age)];
        let shortest = ages.into_iter().flatten().min()?;
        Some(self.last_upkeep + IDLE_UPKEEP.min(shortest / 2))
    }

    /// Runs the segments' upkeep at the chain's head when it is due and no
    /// fill ran it since ([`Self::upkeep_due_at`]).
    pub(super) fn upkeep_if_due(&mut self, now: Instant) {
        if self.upkeep_due_at().is_none_or(|due| now < due) {
            return;
        }
        // Due again only after another interval, whatever happens below (a
        // file not open yet must not wake the thread at once, over and over).
        self.last_upkeep = now;
        let Some(connection) = &self.connection else { return };
        match store::chain_end(connection) {
            Ok(head) => self.keep_segments(&head),
            Err(error) => tracing::warn!(%error, "the ledger's head could not be read for the segments' upkeep"),
        }
    }

    /// Opens the file and catches up on the log (what an earlier process, or
    /// this one before a failure, logged and never applied), then checks the
    /// tail against the anchor and anchors the current head.
    pub(super) fn open(&mut self) -> Result<(), WriteError> {
        let failed = |error: &dyn std::fmt::Display| WriteError::from(error.to_string());
        let connection = store::open_writer(&self.config.path, self.config.sync, self.config.max_bytes)
            .map_err(|error| failed(&error))?;
        if let Some(folder) = self.config.path.parent().filter(|folder| !folder.as_os_str().is_empty()) {
            super::modes::warn_if_shared(folder);
        }
        let applied = log::catch_up(&connection, &self.config.path).map_err(|error| failed(&error))?;
        if applied > 0 {
            tracing::info!(path = %self.config.path.display(), rows = applied, "the ledger applied rows its log held");
        }
        self.check_tail(&connection)?;
        if let Some(segmenter) = &mut self.segmenter {
            segmenter.reset();
            segmenter.recover();
        }
        self.connection = Some(connection);
        Ok(())
    }

    /// Checks the tail against the anchor ([`Reader::check_tail`]), then,
    /// unless tampering was found and `on_tampered` is `refuse`, anchors the
    /// head as it is (so the rows an older weir wrote, and those a catch-up
    /// applied, are anchored from now on) and records in the file that
    /// anchoring started. Starting on a tampered tail rebuilds the roll-ups
    /// from the rows (the budgets and usage read what the gateway goes on with).
    fn check_tail(&mut self, connection: &Connection) -> Result<(), WriteError> {
        let path = self.config.path.display().to_string();
        let found = Reader::open_file(&self.config.path)
            .map_err(VerifyError::from)
            .and_then(|reader| reader.check_tail(self.config.anchor_key.as_ref()));
        let (head, _) = store::chain_end(connection).map_err(|error| WriteError::from(error.to_string()))?;
        let tail = match found {
            Ok(state) => {
                if state == AnchorState::Unanchored && head > 0 {
                    tracing::warn!(%path, rows = head,
                        "the ledger's rows were written before anchoring: their tail cannot be checked; anchoring starts now");
                }
                TailCheck::Vouched(state)
            }
            Err(error @ (VerifyError::Tampered(_) | VerifyError::Broken(_))) => TailCheck::Tampered(error.to_string()),
            Err(error) => return Err(WriteError::from(error.to_string())),
        };
        self.anchoring = match (&tail, self.config.on_tampered) {
            (TailCheck::Vouched(_), _) => true,
            (TailCheck::Tampered(reason), LedgerOnTampered::Start) => {
                let kept = self.start_tampered(connection)?;
                let kept = kept.map_or_else(|| "(none)".to_owned(), |kept| kept.display().to_string());
                tracing::error!(%path, %reason, %kept,
                    "the ledger's tail does not match its anchor; starting anyway (on_tampered = start): the anchor file is kept aside and anchoring starts afresh from the current head");
                true
            }
            (TailCheck::Tampered(reason), LedgerOnTampered::Refuse) => {
                tracing::error!(%path, %reason,
                    "the ledger's tail does not match its anchor: nothing is anchored over it (on_tampered = refuse)");
                false
            }
        };
        self.tail = Some(tail);
        if self.anchoring {
            self.start_anchoring(connection)?;
        }
        Ok(())
    }

    /// Starts on a tampered tail: sets the anchor file aside (returning
    /// where it went), carries into the fresh one the old lines that vouch
    /// for the heads of segments released from the file (their rows are gone,
    /// so only those lines vouch for them; see [`anchor::vouching_lines`]),
    /// and builds the roll-ups again from the rows it goes on with, keeping
    /// the hours of released rows (see [`rollup_store::rebuild`]).
    fn start_tampered(&mut self, connection: &Connection) -> Result<Option<PathBuf>, WriteError> {
        let path = self.config.path.display().to_string();
        let failed = |what: &str, error: &dyn std::fmt::Display| WriteError::from(format!("{what}: {error}"));
        let released: Vec<Segment> = segments::list(connection)
            .map_err(|e| failed("cannot read the released segments", &e))?
            .into_iter()
            .filter(|segment| segment.state == SegmentState::Released)
            .collect();
        let heads: BTreeMap<i64, String> =
            released.iter().map(|segment| (segment.last_seq, segment.head_hash.clone())).collect();
        let kept = self.anchor.set_aside().map_err(|e| failed("cannot set the tampered anchor file aside", &e))?;
        if let (Some(kept), false) = (&kept, heads.is_empty()) {
            let lines = anchor::vouching_lines(kept, self.config.anchor_key.as_ref(), &heads)
                .and_then(|lines| self.anchor.carry(&lines).map(|()| lines.len()))
                .map_err(|e| failed("cannot carry the released segments' anchors", &e))?;
            tracing::warn!(%path, carried = lines, released = heads.len(),
                "the anchors of segments released from the ledger were carried into its fresh anchor file");
        }
        // The newest `at_ms` among the released rows: no row of a call started later was released.
        let released_until = released.iter().map(|segment| segment.last_ms).max();
        let rows = rollup_store::rebuild(connection, released_until)
            .map_err(|e| failed("cannot rebuild the roll-ups from the rows", &e))?;
        tracing::warn!(%path, rows, ?released_until,
            "the ledger's roll-ups were rebuilt from the rows it starts with (the hours of released rows kept)");
        Ok(kept)
    }

    /// Creates the anchor file, anchors the head, then records in the file
    /// that anchoring started (in that order: the record never exists
    /// without the file).
    fn start_anchoring(&mut self, connection: &Connection) -> Result<(), WriteError> {
        let failed = |error: &dyn std::fmt::Display| WriteError::from(error.to_string());
        let (seq, hash) = store::chain_end(connection).map_err(|error| failed(&error))?;
        let anchored = match seq {
            0 => self.anchor.open(),
            _ => self.anchor.append(seq, &hash),
        };
        anchored
            .map_err(|error| failed(&format!("cannot write the anchor {}: {error}", self.anchor.path().display())))?;
        self.last_anchored = seq;
        store::mark_anchored(connection, seq).map_err(|error| failed(&error))
    }

    /// Appends the head after a fill to the anchor file, when it moved past the
    /// last one anchored (rows another process applied count too); a failure is logged
    /// (once until one succeeds): the rows are in the file, and the next
    /// fill's line anchors them.
    fn anchor_head(&mut self, head: &(i64, String)) {
        if !self.anchoring || head.0 <= self.last_anchored {
            return;
        }
        match self.anchor.append(head.0, &head.1) {
            Ok(()) => {
                self.anchor_failing = false;
                self.last_anchored = head.0;
            }
            Err(error) if !self.anchor_failing => {
                self.anchor_failing = true;
                tracing::error!(path = %self.anchor.path().display(), %error, "cannot append the ledger's head to its anchor");
            }
            Err(_) => {}
        }
    }

    /// The segments' upkeep after a fill whose head is `head` (see
    /// `segments`): sealed only at a head this filler anchored. A failure
    /// is logged (once until an upkeep succeeds): the rows are stored, and
    /// the next fill tries again.
    fn keep_segments(&mut self, head: &(i64, String)) {
        self.last_upkeep = Instant::now();
        let (Some(connection), Some(segmenter)) = (&self.connection, &mut self.segmenter) else { return };
        let anchored = self.anchoring && self.last_anchored == head.0;
        let shipped = self.shipped.load(Ordering::Relaxed);
        let now_ms = store::unix_ms(std::time::SystemTime::now());
        match segmenter.after_fill(connection, head, anchored, shipped, now_ms) {
            Ok(()) => self.segments_failing = false,
            Err(error) if !self.segments_failing => {
                self.segments_failing = true;
                segmenter.reset();
                tracing::error!(path = %self.config.path.display(), %error, "the ledger's segments could not be kept up");
            }
            Err(_) => segmenter.reset(),
        }
    }

    /// Fills what `fills` holds (all of it, whether due or not); answers who
    /// asked. Returns whether the store is now written (true with nothing to
    /// fill and a file open).
    pub(super) fn fill(&mut self, fills: &std::sync::Mutex<Fills>) -> bool {
        let (runs, asked) = super::writer::lock(fills).take();
        let outcome = self.commit(&runs);
        let stored = outcome.is_ok();
        self.stored.store(stored, Ordering::Relaxed);
        match outcome {
            Ok(()) => {
                super::writer::lock(fills).failed_at = None;
                for retired in runs.iter().filter_map(|run| run.retired.as_deref()) {
                    log::remove(&log::segment_path(&self.config.path, retired));
                }
            }
            Err(reason) => {
                tracing::error!(path = %self.config.path.display(), %reason,
                    "the ledger cannot move its log's rows into the file; they stay in the log");
                let mut fills = super::writer::lock(fills);
                fills.failed_at = Some(Instant::now());
                fills.put_back(runs);
            }
        }
        for done in asked {
            let _ = done.send(stored);
        }
        stored
    }

    /// One transaction of `runs` (an open with nothing to commit when none).
    fn commit(&mut self, runs: &[Logged]) -> Result<(), WriteError> {
        if self.connection.is_none() {
            self.open()?;
        }
        let (Some(connection), false) = (&self.connection, runs.is_empty()) else { return Ok(()) };
        let started = Instant::now();
        match store::append_logged(connection, runs.iter().map(Logged::run)) {
            Ok(filled) => {
                self.anchor_head(&filled.head);
                self.keep_segments(&filled.head);
                if let Some(meter) = &self.meter {
                    meter.stored(filled.rows, started.elapsed());
                }
                if let Some(shipper) = &self.shipper {
                    // Full: a wake-up is already waiting, and its pass ships these rows too.
                    let _ = shipper.try_send(Signal::Committed);
                }
                Ok(())
            }
            Err(error) => {
                self.connection = None;
                Err(WriteError::from(error.to_string()))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::sync::Arc;
    use std::time::Instant;

    use super::{FILL_DELAY, FILL_ROWS, Fills, Logged};
    use crate::ledger::store::Row;

    fn logged(first_line: u64, rows: usize) -> Logged {
        let record = crate::ledger::tests::record("c", "alice", "m", 1, None);
        let row = Row::closing(&record).unwrap();
        Logged { segment: Arc::from("s"), first_line, rows: vec![row; rows], retired: None }
    }

    #[test]
    fn runs_wait_for_the_delay_until_enough_rows_wait() {
        let mut fills = Fills::default();
        let before = Instant::now();
        assert!(fills.push(logged(0, 10)), "the first run wakes the thread to time it");
        let due = fills.due_at().unwrap();
        assert!(due >= before + FILL_DELAY, "a few rows wait for the delay");
        assert!(!fills.push(logged(10, FILL_ROWS - 20)), "below the bound, no wake-up");
        assert!(fills.push(logged(FILL_ROWS as u64 - 10, 10)), "reaching the bound wakes the thread");
        assert!(fills.due_at().unwrap() < before + FILL_DELAY, "then the fill is due at once");
        assert!(!fills.push(logged(FILL_ROWS as u64, 1)), "past the bound, no second wake-up");
    }

    #[test]
    fn a_failed_fills_rows_still_count_toward_the_bound() {
        let mut fills = Fills::default();
        fills.push(logged(0, FILL_ROWS));
        let (runs, _) = fills.take();
        assert_eq!(fills.due_at(), None, "nothing waits once taken");
        fills.put_back(runs);
        fills.failed_at = Some(Instant::now());
        let retry = fills.due_at().unwrap();
        assert!(retry > Instant::now(), "a failed fill waits for its retry, even past the bound");
        fills.failed_at = None;
        assert!(fills.due_at().unwrap() <= Instant::now(), "the rows put back are counted");
    }
}
