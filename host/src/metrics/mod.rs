//! The Prometheus exposition: what the gateway did, per model, provider and
//! outcome, for a scraper at `/metrics`.
//!
//! ```text
//! call opens  ─► observer.rs: weir_calls_in_flight +1
//! call closes ─► observer.rs: calls, tokens, cost, latency, attempts, retries, faults; in flight −1
//! ledger      ─► ledger.rs:   commit latency, batch size, failures (the writer's LedgerMeter)
//! scrape      ─► render:      admission gauges read from each model's gate, then the whole registry
//! ```
//!
//! Every label value is bounded (see `labels.rs`): a scanner sending garbage
//! model names moves `model="unknown"`, never the number of series.

mod answer_cache;
mod labels;
mod ledger;
mod observer;
mod series;
#[cfg(test)]
mod tests;

use std::sync::Arc;

use prometheus_client::registry::Registry;

use crate::admission::Admission;
use crate::catalog::{Catalog, MetricsSettings};
use crate::ledger::LedgerMeter;

use crate::admission::deployment::CircuitState;
use labels::{DeploymentLabels, Labels, ModelLabels};
use series::Series;

/// The `Content-Type` of [`Metrics::render`]'s text.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// A [`Weir`]'s metrics: a [`crate::record::CallObserver`], the ledger's
/// [`LedgerMeter`], and the registry a scrape renders. Cheap to clone (one
/// `Arc`); on unless `[metrics] enabled = false` (an update is a few atomic
/// operations).
#[derive(Clone)]
pub struct Metrics {
    inner: Arc<Inner>,
}

struct Inner {
    settings: MetricsSettings,
    labels: Labels,
    series: Series,
    answer_cache: answer_cache::AnswerCacheSeries,
    registry: Registry,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").field("settings", &self.inner.settings).finish_non_exhaustive()
    }
}

impl Metrics {
    /// Metrics for `catalog`'s models: only its ids and providers become label
    /// values, so it is fixed here, before any record arrives.
    pub fn new(settings: &MetricsSettings, catalog: &Catalog) -> Metrics {
        let mut registry = Registry::with_prefix("weir");
        let series = Series::register(&mut registry);
        let answer_cache = answer_cache::AnswerCacheSeries::register(&mut registry);
        let inner = Inner { settings: settings.clone(), labels: Labels::new(catalog), series, answer_cache, registry };
        Metrics { inner: Arc::new(inner) }
    }

    /// This as the ledger writer's meter, so the ledger can be built before
    /// (and observe calls ahead of) the metrics.
    pub fn ledger_meter(&self) -> Arc<dyn LedgerMeter> {
        Arc::new(self.clone())
    }

    /// The OpenMetrics text exposition ([`CONTENT_TYPE`]). Admission's gauges
    /// are read from the gates of `catalog`'s models now: queue depth, permits
    /// held and the throttle coefficient are states, not events.
    pub async fn render(&self, catalog: &Catalog, admission: &Admission) -> String {
        self.read_gates(catalog, admission).await;
        self.encode()
    }

    async fn read_gates(&self, catalog: &Catalog, admission: &Admission) {
        let (labels, series) = (&self.inner.labels, &self.inner.series);
        for model in catalog.models() {
            let Some(gate) = admission.gate(&model.id) else { continue };
            let by_model = ModelLabels { model: labels.model(&model.id) };
            series.queue_depth.get_or_create(&by_model).set(i64::try_from(gate.parked()).unwrap_or(i64::MAX));
            series.permits_held.get_or_create(&by_model).set(i64::from(gate.in_flight()));
            let coefficient = gate.account().coefficient().await;
            series.throttle.get_or_create(&by_model).set(coefficient);
        }
        for pool in admission.pools() {
            let model = labels.model(pool.entry());
            for deployment in pool.deployments() {
                let by_deployment = DeploymentLabels {
                    model: Arc::clone(&model),
                    deployment: labels.deployments.get(Some(&deployment.id)),
                };
                let circuit = match deployment.health.circuit() {
                    CircuitState::Closed => 0,
                    CircuitState::HalfOpen => 1,
                    CircuitState::Open { .. } => 2,
                };
                series.deployment_circuit.get_or_create(&by_deployment).set(circuit);
                series.deployment_in_flight.get_or_create(&by_deployment).set(i64::from(deployment.health.in_flight()));
                series.deployment_benched.get_or_create(&by_deployment).set(i64::from(deployment.health.benched()));
            }
        }
    }

    fn encode(&self) -> String {
        let mut text = String::new();
        if let Err(error) = prometheus_client::encoding::text::encode(&mut text, &self.inner.registry) {
            // Only a metric's own encoder can fail (a String takes any write);
            // the text then lacks `# EOF`, so a scraper rejects it rather than
            // storing a partial scrape.
            tracing::error!(%error, "cannot encode the metrics");
        }
        text
    }
}
