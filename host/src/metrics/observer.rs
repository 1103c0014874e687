//! The call observer: each opening and closed record becomes increments and
//! observations, on the call's task, at once (atomics, and a family's read
//! lock while a series is looked up; a write lock only for a series' first
//! sample).

use std::sync::Arc;

use super::Metrics;
use super::labels::{
    CallLabels, DeploymentAttemptLabels, ModelLabels, ProviderLabels, ReasonLabels, RetryLabels, TokenLabels,
};
use crate::failure::Category;
use crate::record::{Acknowledged, AttemptReason, CallObserver, CallOpening, CallRecord, acknowledged};

impl CallObserver for Metrics {
    fn opened(&self, _opening: &CallOpening) -> Acknowledged {
        self.inner.series.calls_in_flight.inc();
        acknowledged()
    }

    fn closed(&self, record: &Arc<CallRecord>) -> Acknowledged {
        self.count(record);
        self.inner.series.calls_in_flight.dec();
        acknowledged()
    }
}

impl Metrics {
    fn count(&self, record: &CallRecord) {
        let (labels, series) = (&self.inner.labels, &self.inner.series);
        let settings = &self.inner.settings;
        let model = labels.model(&record.model);
        let provider = labels.provider(record.provider.as_deref());
        series
            .calls
            .get_or_create(&CallLabels {
                model: Arc::clone(&model),
                provider: Arc::clone(&provider),
                category: labels.categories.get(Some(record.category.as_str())),
                route: record.route.as_str(),
                operation: record.operation.as_str(),
                member: settings.member_labels.then(|| labels.members.get(record.who.member.as_deref())),
                key: settings.key_labels.then(|| labels.keys.get(record.who.key_id.as_deref())),
            })
            .inc();

        let usage = &record.usage;
        for (kind, tokens) in [
            ("input", usage.input),
            ("output", usage.output),
            ("cache_read", usage.cache_read),
            ("cache_write", usage.cache_write),
            ("reasoning", usage.reasoning),
        ] {
            series.tokens.get_or_create(&TokenLabels { model: Arc::clone(&model), kind }).inc_by(tokens);
        }

        let by_model = ModelLabels { model: Arc::clone(&model) };
        // A counter only rises: a negative or non-finite cost (a bad price) is not added.
        if let Some(cost) = record.cost_usd.filter(|cost| cost.is_finite() && *cost >= 0.0) {
            series.cost_usd.get_or_create(&by_model).inc_by(cost);
        }
        series.call_duration.get_or_create(&by_model).observe(seconds(record.latency_ms));
        if let Some(first) = record.first_output_ms.filter(|_| record.stream) {
            series.first_output.get_or_create(&by_model).observe(seconds(first));
        }

        let fault = Category::ProviderFault.as_str();
        let mut previous: Option<&str> = None;
        for attempt in &record.attempts {
            series.admission_wait.get_or_create(&by_model).observe(seconds(attempt.admission_wait_ms));
            series.attempts.get_or_create(&ReasonLabels { reason: attempt.reason.as_str() }).inc();
            if let (AttemptReason::Retry, Some(signal)) = (attempt.reason, previous) {
                let signal = labels.categories.get(Some(signal));
                series.retries.get_or_create(&RetryLabels { model: Arc::clone(&model), signal }).inc();
            }
            if attempt.category == fault {
                series.component_faults.get_or_create(&ProviderLabels { provider: Arc::clone(&provider) }).inc();
            }
            if let Some(deployment) = attempt.deployment.as_deref() {
                let by_deployment = DeploymentAttemptLabels {
                    model: Arc::clone(&model),
                    deployment: labels.deployments.get(Some(deployment)),
                    category: labels.categories.get(Some(&attempt.category)),
                };
                series.deployment_attempts.get_or_create(&by_deployment).inc();
            }
            previous = Some(attempt.category.as_str());
        }
        // A fault before any attempt ran (the component failed to encode the
        // request) shows only on the call; one an attempt shows is counted there.
        if record.category == fault && !record.attempts.iter().any(|attempt| attempt.category == fault) {
            series.component_faults.get_or_create(&ProviderLabels { provider }).inc();
        }
    }
}

/// Milliseconds as the seconds a Prometheus histogram expects.
fn seconds(millis: u64) -> f64 {
    std::time::Duration::from_millis(millis).as_secs_f64()
}
