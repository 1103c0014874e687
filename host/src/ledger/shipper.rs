//! The shipper: one thread per gateway that copies the rows its ledger file
//! has committed into the fleet's PostgreSQL table.
//!
//! The file stays the write-ahead record: an answer waits for its local
//! commit only, never for PostgreSQL. The writer wakes the shipper after each
//! commit; the shipper reads the rows after the last one PostgreSQL holds for
//! this file (asked of PostgreSQL on each connection, so a restart or an
//! outage resumes where the table ends) and appends them in batches, each
//! batch's last row anchored there too (see `postgres/ship.rs`). A row
//! already there is skipped by its key (`call_id`, `kind`), so a batch sent
//! twice (its commit's answer lost) is stored once. While PostgreSQL cannot
//! be reached the rows wait in the file and the shipper tries again, backing
//! off to [`MAX_BACKOFF`].

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use postgres::Client;

use super::LedgerMeter;
use super::anchor::AnchorKey;
use super::postgres::{self as shared, PostgresTarget, SharedError};
use super::query::{Committed, ReadError, Reader};
use super::store::Kind;

/// The most rows sent in one statement.
const SHIP_BATCH: usize = 1000;

/// How often the file is looked at when no commit woke the shipper (rows
/// another process appended to the same file, a wake that was coalesced).
const IDLE_POLL: Duration = Duration::from_secs(1);

/// After a pass that shipped rows the shipper waits this long before the
/// next, so a busy gateway ships larger batches rather than one statement
/// per commit. Measured at 32 callers with PostgreSQL on the same 2 cores:
/// 10 ms gave ~33 rows a batch and 0.08–0.10 ms of PostgreSQL CPU per call,
/// 50 ms ~70–100 rows and 0.06–0.07 ms, for a lag still under 0.1 s.
const SPACING: Duration = Duration::from_millis(50);

const FIRST_BACKOFF: Duration = Duration::from_millis(250);
const MAX_BACKOFF: Duration = Duration::from_secs(10);

/// What wakes the shipper.
pub(super) enum Signal {
    /// The writer committed rows.
    Committed,
    /// Ship everything committed now (whatever the backoff), then answer.
    Flush(std::sync::mpsc::Sender<()>),
}

#[derive(Debug, thiserror::Error)]
enum ShipError {
    #[error("reading the local ledger: {0}")]
    Local(#[from] ReadError),
    #[error(transparent)]
    Shared(#[from] SharedError),
}

/// The shipper thread's state.
pub(super) struct Shipper {
    target: PostgresTarget,
    path: PathBuf,
    meter: Option<Arc<dyn LedgerMeter>>,
    /// The anchor key the shipped anchors' MACs are made with.
    key: Option<AnchorKey>,
    reader: Option<Reader>,
    /// The file's name in the table (its first row's hash), once it has one.
    source: Option<String>,
    client: Option<Client>,
    /// The last `seq` PostgreSQL holds for this file, while connected.
    shipped: Option<i64>,
    backoff: Duration,
    retry_at: Option<Instant>,
    /// The last `seq` PostgreSQL is known to hold, shared with the ledger's
    /// thread: retention releases only segments shipped through it.
    progress: Arc<AtomicI64>,
}

impl Shipper {
    pub(super) fn new(
        target: PostgresTarget,
        path: PathBuf,
        meter: Option<Arc<dyn LedgerMeter>>,
        key: Option<AnchorKey>,
        progress: Arc<AtomicI64>,
    ) -> Self {
        Self {
            target,
            path,
            meter,
            key,
            reader: None,
            source: None,
            client: None,
            shipped: None,
            backoff: FIRST_BACKOFF,
            retry_at: None,
            progress,
        }
    }

    /// Ships on every signal (and every [`IDLE_POLL`]) until the writer and
    /// every ledger handle are gone, then makes a last pass.
    pub(super) fn run(mut self, signals: Receiver<Signal>) {
        loop {
            let wait = self.retry_at.map_or(IDLE_POLL, |at| at.saturating_duration_since(Instant::now()));
            match signals.recv_timeout(wait) {
                Ok(Signal::Committed) | Err(RecvTimeoutError::Timeout) => {
                    if self.pass(false) > 0 {
                        std::thread::sleep(SPACING);
                    }
                }
                Ok(Signal::Flush(done)) => {
                    self.pass(true);
                    let _ = done.send(());
                }
                Err(RecvTimeoutError::Disconnected) => {
                    self.pass(true);
                    return;
                }
            }
        }
    }

    /// Ships what is waiting unless a failure's backoff has not run out
    /// (`now` ignores it). Returns the rows shipped.
    fn pass(&mut self, now: bool) -> u64 {
        if !now && self.retry_at.is_some_and(|at| Instant::now() < at) {
            return 0;
        }
        match self.ship_waiting() {
            Ok(shipped) => {
                if self.retry_at.take().is_some() {
                    tracing::info!(url = %self.target.redacted(), "the ledger's shipper reached PostgreSQL again");
                }
                self.backoff = FIRST_BACKOFF;
                shipped
            }
            Err(error) => {
                self.client = None;
                self.shipped = None;
                if let ShipError::Local(_) = error {
                    self.reader = None;
                }
                if let Some(meter) = &self.meter {
                    meter.ship_failed();
                }
                // Said once per outage (and again as it ends), not every retry.
                if self.retry_at.is_none() {
                    tracing::error!(url = %self.target.redacted(), %error,
                        "the ledger's shipper cannot ship; rows wait in the local ledger");
                }
                self.retry_at = Some(Instant::now() + self.backoff);
                self.backoff = (self.backoff * 2).min(MAX_BACKOFF);
                0
            }
        }
    }

    fn ship_waiting(&mut self) -> Result<u64, ShipError> {
        let reader = match &mut self.reader {
            Some(reader) => reader,
            None => match Reader::open_file(&self.path) {
                Ok(reader) => self.reader.insert(reader),
                // The writer has not created it yet: nothing to ship.
                Err(ReadError::Missing(_)) => return Ok(0),
                Err(error) => return Err(error.into()),
            },
        };
        let source = match &self.source {
            Some(source) => source.clone(),
            None => match reader.first_hash()? {
                Some(hash) => self.source.insert(hash).clone(),
                None => return Ok(0),
            },
        };
        let client = match &mut self.client {
            Some(client) => client,
            None => self.client.insert(shared::connect_shipper(&self.target)?),
        };
        let mut after = match self.shipped {
            Some(seq) => seq,
            None => *self.shipped.insert(shared::shipped_through(client, &source)?),
        };
        self.progress.fetch_max(after, Ordering::Relaxed);
        let mut total = 0;
        loop {
            let rows = reader.rows_after(after, SHIP_BATCH)?;
            let Some(last) = rows.last().map(|row| row.seq) else { return Ok(total) };
            let lag = oldest_close_age(&rows);
            shared::ship(client, &source, &rows, self.key.as_ref())?;
            after = last;
            self.shipped = Some(last);
            self.progress.fetch_max(last, Ordering::Relaxed);
            total += rows.len() as u64;
            if let Some(meter) = &self.meter {
                meter.shipped(rows.len(), lag);
            }
        }
    }
}

/// How long ago the oldest closing row of `rows` ended (its commit was
/// moments after): how far the fleet's table is behind the file. Openings
/// are left out (their time is the call's start, not their commit).
fn oldest_close_age(rows: &[Committed]) -> Option<Duration> {
    let oldest = rows.iter().filter(|row| row.row.kind == Kind::Close).map(|row| row.row.at_ms).min()?;
    let now = SystemTime::now().duration_since(UNIX_EPOCH).ok()?;
    let at = Duration::from_millis(u64::try_from(oldest).ok()?);
    Some(now.saturating_sub(at))
}
