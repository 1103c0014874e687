//! The series: each family, its name, help, unit and buckets, registered once.
//! Names follow the OpenMetrics conventions: the `weir_` prefix, the unit
//! last, and `_total` on counters (added by the encoder).

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::{Registry, Unit};

use std::sync::atomic::AtomicU64;

use super::labels::{
    CallLabels, DeploymentAttemptLabels, DeploymentLabels, ModelLabels, ProviderLabels, ReasonLabels, RetryLabels,
    TokenLabels,
};

type Histograms<L> = Family<L, Histogram, fn() -> Histogram>;

/// Every family the metrics update. Each handle shares its values with the
/// registry's copy, so updating one is what a scrape then reads.
pub(super) struct Series {
    pub(super) calls: Family<CallLabels, Counter>,
    pub(super) calls_in_flight: Gauge,
    pub(super) tokens: Family<TokenLabels, Counter>,
    pub(super) cost_usd: Family<ModelLabels, Counter<f64, AtomicU64>>,
    pub(super) call_duration: Histograms<ModelLabels>,
    pub(super) first_output: Histograms<ModelLabels>,
    pub(super) admission_wait: Histograms<ModelLabels>,
    pub(super) queue_depth: Family<ModelLabels, Gauge>,
    pub(super) permits_held: Family<ModelLabels, Gauge>,
    pub(super) throttle: Family<ModelLabels, Gauge<f64, AtomicU64>>,
    pub(super) retries: Family<RetryLabels, Counter>,
    pub(super) attempts: Family<ReasonLabels, Counter>,
    pub(super) component_faults: Family<ProviderLabels, Counter>,
    pub(super) ledger_commit: Histogram,
    pub(super) ledger_batch: Histogram,
    pub(super) ledger_store: Histogram,
    pub(super) ledger_store_batch: Histogram,
    pub(super) ledger_failures: Counter,
    pub(super) ledger_shipped: Counter,
    pub(super) ledger_ship_lag: Histogram,
    pub(super) ledger_ship_failures: Counter,
    pub(super) shared_state_failures: Counter,
    pub(super) deployment_attempts: Family<DeploymentAttemptLabels, Counter>,
    pub(super) deployment_circuit: Family<DeploymentLabels, Gauge>,
    pub(super) deployment_in_flight: Family<DeploymentLabels, Gauge>,
    pub(super) deployment_benched: Family<DeploymentLabels, Gauge>,
}

/// A model call: from a fast cached answer to a long reasoning run.
fn call_seconds() -> Histogram {
    Histogram::new([0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0])
}

/// A stream's first output: well under a second when healthy.
fn first_output_seconds() -> Histogram {
    Histogram::new([0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0])
}

/// Admission: zero when the model has room, up to a deadline when it queues.
fn wait_seconds() -> Histogram {
    Histogram::new([0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0])
}

impl Series {
    pub(super) fn register(registry: &mut Registry) -> Self {
        let series = Self {
            calls: Family::default(),
            calls_in_flight: Gauge::default(),
            tokens: Family::default(),
            cost_usd: Family::default(),
            call_duration: Family::new_with_constructor(call_seconds),
            first_output: Family::new_with_constructor(first_output_seconds),
            admission_wait: Family::new_with_constructor(wait_seconds),
            queue_depth: Family::default(),
            permits_held: Family::default(),
            throttle: Family::default(),
            retries: Family::default(),
            attempts: Family::default(),
            component_faults: Family::default(),
            // A commit of one batch to the log: one write (microseconds), or
            // under `sync = "full"` a disk sync (milliseconds).
            ledger_commit: Histogram::new([
                0.000_005, 0.000_01, 0.000_025, 0.000_05, 0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01,
                0.025, 0.05, 0.1, 0.25, 1.0,
            ]),
            ledger_batch: Histogram::new([1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0]),
            // One SQLite transaction of the rows logged over the filler's delay.
            ledger_store: Histogram::new([0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0]),
            ledger_store_batch: Histogram::new([1.0, 4.0, 16.0, 64.0, 256.0, 1024.0, 4096.0]),
            ledger_failures: Counter::default(),
            ledger_shipped: Counter::default(),
            // From a call's end to its row in PostgreSQL: milliseconds while
            // it keeps up, up to an outage's length.
            ledger_ship_lag: Histogram::new([0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0, 30.0, 300.0]),
            ledger_ship_failures: Counter::default(),
            shared_state_failures: Counter::default(),
            deployment_attempts: Family::default(),
            deployment_circuit: Family::default(),
            deployment_in_flight: Family::default(),
            deployment_benched: Family::default(),
        };
        let r = registry;
        r.register("calls", "Calls closed, by outcome category", series.calls.clone());
        r.register("calls_in_flight", "Calls opened and not yet closed", series.calls_in_flight.clone());
        r.register("tokens", "Tokens used, summed over every attempt", series.tokens.clone());
        r.register_with_unit(
            "cost",
            "Cost from the catalog's declared prices",
            Unit::Other("usd".to_owned()),
            series.cost_usd.clone(),
        );
        r.register_with_unit("call_duration", "Call latency", Unit::Seconds, series.call_duration.clone());
        r.register_with_unit(
            "time_to_first_output",
            "Streams: time from the call's open to its first output",
            Unit::Seconds,
            series.first_output.clone(),
        );
        r.register_with_unit(
            "admission_wait",
            "Time each upstream attempt waited for admission",
            Unit::Seconds,
            series.admission_wait.clone(),
        );
        r.register("admission_queue_depth", "Calls parked waiting for admission", series.queue_depth.clone());
        r.register("admission_in_flight", "Calls holding an admission permit", series.permits_held.clone());
        r.register(
            "admission_throttle_coefficient",
            "Throttle coefficient from upstream pushback (0 none, 9 most)",
            series.throttle.clone(),
        );
        r.register("retries", "Retried attempts, by the signal that caused them", series.retries.clone());
        r.register("attempts", "Upstream attempts, by why they ran", series.attempts.clone());
        r.register(
            "component_faults",
            "Provider component faults (traps, limits, malformed output)",
            series.component_faults.clone(),
        );
        r.register_with_unit(
            "ledger_commit",
            "Time to commit one ledger batch",
            Unit::Seconds,
            series.ledger_commit.clone(),
        );
        r.register("ledger_batch_records", "Records per committed ledger batch", series.ledger_batch.clone());
        r.register_with_unit(
            "ledger_store",
            "Time to move one batch of logged ledger records into the ledger's file",
            Unit::Seconds,
            series.ledger_store.clone(),
        );
        r.register(
            "ledger_store_batch_records",
            "Records per batch moved from the ledger's log into its file",
            series.ledger_store_batch.clone(),
        );
        r.register("ledger_failures", "Ledger batches that could not be written", series.ledger_failures.clone());
        r.register(
            "ledger_shipped_records",
            "Ledger records shipped to the fleet's PostgreSQL ledger",
            series.ledger_shipped.clone(),
        );
        r.register_with_unit(
            "ledger_ship_lag",
            "Per shipped batch, how long ago its oldest call ended",
            Unit::Seconds,
            series.ledger_ship_lag.clone(),
        );
        r.register(
            "ledger_ship_failures",
            "Shipping passes that failed (PostgreSQL or the local file could not be read); rows wait in the file",
            series.ledger_ship_failures.clone(),
        );
        r.register(
            "shared_state_failures",
            "Operations on the fleet's shared state (Redis) that failed and took the declared policy",
            series.shared_state_failures.clone(),
        );
        r.register(
            "deployment_attempts",
            "Upstream attempts per deployment of an entry, by outcome category",
            series.deployment_attempts.clone(),
        );
        r.register(
            "deployment_circuit_state",
            "A deployment's circuit: 0 closed, 1 half-open, 2 open",
            series.deployment_circuit.clone(),
        );
        r.register(
            "deployment_in_flight",
            "Attempts in flight on a deployment (until a stream's first output)",
            series.deployment_in_flight.clone(),
        );
        r.register(
            "deployment_benched",
            "1 when a deployment's credential was refused and it takes no calls until a reload",
            series.deployment_benched.clone(),
        );
        series
    }
}
