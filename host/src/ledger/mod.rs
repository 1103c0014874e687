//! The ledger: every call's record, durable, append-only, hash-chained.

use std::time::Duration;

/// What the ledger's writer reports about itself (the metrics implement it).
pub trait LedgerMeter: Send + Sync + 'static {
    /// A batch of `records` was committed in `elapsed`.
    fn committed(&self, records: usize, elapsed: Duration);
    /// A batch of `records` could not be written.
    fn failed(&self, records: usize);
}
