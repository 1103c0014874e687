//! The writer: one thread owns the file's write connection and commits in
//! groups.
//!
//! Calls hand rows over a channel and await a oneshot answer, so no async
//! worker ever blocks on SQLite. The thread takes everything waiting (up to
//! [`MAX_BATCH`]) into one transaction: under load, one commit (one sync)
//! carries many calls' rows. A failed batch is rolled back, every row in it
//! answered with the error, and the connection dropped; the next batch opens
//! the file again, so a ledger that could not be written recovers when it can.

use std::sync::Arc;
use std::sync::mpsc::{Receiver, TryRecvError};
use std::time::Instant;

use rusqlite::Connection;
use tokio::sync::oneshot;

use super::LedgerMeter;
use super::config::LedgerConfig;
use super::store::{self, Row};

/// The most rows committed in one transaction: bounds how long the first row
/// of a batch waits for the last.
pub(super) const MAX_BATCH: usize = 1024;

/// Why a row was not committed (the file's path and SQLite's text: for the
/// log, never for a caller).
pub(super) type WriteError = Arc<str>;

/// A row to append and where to say whether it was committed.
pub(super) struct Job {
    pub row: Row,
    pub reply: oneshot::Sender<Result<(), WriteError>>,
}

/// The writer thread's loop: runs until every sender is gone and the queue is
/// empty.
pub(super) fn run(config: LedgerConfig, meter: Option<Arc<dyn LedgerMeter>>, jobs: Receiver<Job>) {
    let mut connection: Option<Connection> = None;
    while let Ok(first) = jobs.recv() {
        let mut batch = vec![first];
        while batch.len() < MAX_BATCH {
            match jobs.try_recv() {
                Ok(job) => batch.push(job),
                Err(TryRecvError::Empty | TryRecvError::Disconnected) => break,
            }
        }
        let started = Instant::now();
        let outcome = commit(&config, &mut connection, &batch);
        match &outcome {
            Ok(()) => {
                if let Some(meter) = &meter {
                    meter.committed(batch.len(), started.elapsed());
                }
            }
            Err(reason) => {
                connection = None;
                tracing::error!(path = %config.path.display(), rows = batch.len(), %reason, "the ledger could not commit a batch");
                if let Some(meter) = &meter {
                    meter.failed(batch.len());
                }
            }
        }
        for job in batch {
            // A caller that stopped waiting no longer needs the answer.
            let _ = job.reply.send(outcome.clone());
        }
    }
}

/// Opens the file when no connection is held, then appends the batch.
fn commit(config: &LedgerConfig, connection: &mut Option<Connection>, batch: &[Job]) -> Result<(), WriteError> {
    let writer = match connection {
        Some(writer) => writer,
        None => connection.insert(
            store::open_writer(&config.path, config.sync, config.max_bytes).map_err(|error| error.to_string())?,
        ),
    };
    store::append(writer, batch.iter().map(|job| &job.row)).map_err(|error| WriteError::from(error.to_string()))
}
