//! The ledger writer's own health (how long a batch takes to commit to the
//! log and to move into the file, how large batches are, and how many could
//! not be written), its shipping to the
//! fleet's PostgreSQL ledger, and the fleet's shared state's failures.

use std::time::Duration;

use super::Metrics;
use crate::fleet::FleetMeter;
use crate::ledger::LedgerMeter;

impl LedgerMeter for Metrics {
    fn committed(&self, records: usize, elapsed: Duration) {
        let series = &self.inner.series;
        series.ledger_commit.observe(elapsed.as_secs_f64());
        // Batches are far below 2^52 records: the conversion is exact.
        series.ledger_batch.observe(records as f64);
    }

    fn stored(&self, records: usize, elapsed: Duration) {
        let series = &self.inner.series;
        series.ledger_store.observe(elapsed.as_secs_f64());
        series.ledger_store_batch.observe(records as f64);
    }

    fn failed(&self, _records: usize) {
        self.inner.series.ledger_failures.inc();
    }

    fn shipped(&self, records: usize, lag: Option<Duration>) {
        let series = &self.inner.series;
        series.ledger_shipped.inc_by(records as u64);
        if let Some(lag) = lag {
            series.ledger_ship_lag.observe(lag.as_secs_f64());
        }
    }

    fn ship_failed(&self) {
        self.inner.series.ledger_ship_failures.inc();
    }
}

impl FleetMeter for Metrics {
    fn shared_state_failed(&self) {
        self.inner.series.shared_state_failures.inc();
    }
}
