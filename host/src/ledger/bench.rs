//! Rows appended straight into a ledger file, as the ledger's thread appends
//! them (`store::append_logged`), for the roll-ups' benchmark
//! (`benches/rollups.rs`): a large file built without the gateway's log, and
//! the append's cost with and without the roll-ups' upkeep. Not an API for
//! anything else: a file appended to without the upkeep no longer agrees with
//! its roll-ups.

use std::path::Path;

use rusqlite::Connection;

use super::store::{self, Row, Run};
use crate::catalog::LedgerSync;
use crate::record::CallRecord;

/// How a benchmark's closing rows are appended.
#[doc(hidden)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Upkeep {
    /// Without the roll-ups' upkeep (the baseline).
    Off,
    /// With it, the rows carrying nothing the writer knew (as rows read
    /// back): each body parsed again for its dims, each call's earlier rows
    /// looked up.
    Unmarked,
    /// With it, the rows marked as the ledger's observer marks the closing
    /// row of a call that held nothing: dims carried, no lookup.
    Marked,
}

/// A ledger file a benchmark appends closing rows to.
#[doc(hidden)]
pub struct BenchFile {
    connection: Connection,
    lines: u64,
    bodies: bool,
    compact: bool,
}

impl BenchFile {
    /// Opens (creating, or migrating) the file as a writer does.
    pub fn open(path: &Path) -> Result<Self, String> {
        let connection = store::open_writer(path, LedgerSync::Normal, None).map_err(|error| error.to_string())?;
        Ok(Self { connection, lines: 0, bodies: true, compact: true })
    }

    /// The rows appended from now on store an empty body (their columns and
    /// roll-ups as with one): a file of many millions of rows that fits a
    /// small disk, for reads that never open a body. Its chain does not verify.
    pub fn without_bodies(self) -> Self {
        Self { bodies: false, ..self }
    }

    /// The rows appended from now on store their bodies as text, as every
    /// row was stored before compact rows (see `compact`): the baseline of
    /// the compaction's cost and bytes.
    pub fn with_text_bodies(self) -> Self {
        Self { compact: false, ..self }
    }

    /// Appends `records`' closing rows in one transaction, with the
    /// roll-ups' `upkeep`; the rows appended.
    pub fn append(&mut self, records: &[CallRecord], upkeep: Upkeep) -> Result<usize, String> {
        let mark = |row: Row| {
            let row = match upkeep {
                Upkeep::Marked => Row { stands_alone: true, ..row },
                Upkeep::Off | Upkeep::Unmarked => Row { served: None, ..row },
            };
            match self.bodies {
                true => row,
                false => Row { body: String::new(), ..row },
            }
        };
        let rows = records
            .iter()
            .map(|record| Row::closing(record).map(mark))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|error| error.to_string())?;
        let run = Run { segment: "bench", first_line: self.lines, rows: rows.iter().map(Some).collect() };
        let how = store::Append { keep_rollups: upkeep != Upkeep::Off, compact: self.compact };
        let filled = store::append_logged_with(&self.connection, [run], how).map_err(|error| error.to_string())?;
        self.lines += rows.len() as u64;
        Ok(filled.rows)
    }

    /// Drops the day level and marks the file as version 3 wrote it, so the
    /// next [`BenchFile::open`] builds the roll-ups afresh from the rows (the
    /// upgrade's cost).
    pub fn forget_day_level(self) -> Result<(), String> {
        self.connection
            .execute_batch("DROP TABLE ledger_rollup_day; PRAGMA user_version = 3;")
            .map_err(|error| error.to_string())
    }
}
