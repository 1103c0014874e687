//! Deployments at run time: the same model on several endpoints, each with
//! its own admission gate (buckets and throttle) and health, and the choice of
//! the one an attempt goes to.
//!
//! ```text
//! call ─► entry gate (the sum of the deployments' limits; the call waits here)
//!      ─► attempt: choose (health, headroom, weight, the conversation's affinity)
//!      ─► the deployment's own gate ─► its endpoint, with its credential
//!      ─► verdict ─► health: success closes; a retryable signal moves the
//!         next attempt elsewhere; an authentication failure benches it
//! ```
//!
//! Everything an attempt reads here is atomics and the deployments' fixed
//! list, built once per catalog: choosing takes no lock and allocates nothing.

mod affinity;
mod choose;
mod health;

use std::sync::Arc;

pub use affinity::affinity_of;
pub use choose::Tried;
pub use health::{CircuitSettings, CircuitState, Health, InFlight};

use crate::admission::ModelGate;
use crate::catalog::ModelSpec;
use crate::error::WeirError;
use crate::failure::Category;

/// One deployment of an entry, as admission and the call path hold it.
#[derive(Debug)]
pub struct Deployment {
    /// Its name, unique in its entry.
    pub id: String,
    pub weight: u32,
    /// Its own calls in flight at once, when limited (its headroom's scale).
    pub max_concurrency: Option<u32>,
    /// Its own buckets, throttle and permits.
    pub gate: Arc<ModelGate>,
    pub health: Health,
}

/// Every deployment of one entry, in the order the entry lists them.
#[derive(Debug)]
pub struct Pool {
    entry: String,
    deployments: Box<[Deployment]>,
}

impl Pool {
    /// The pool of `model` (whose `deployments` are not empty), with a gate
    /// per deployment made by `gate`.
    pub fn new(
        model: &ModelSpec,
        settings: CircuitSettings,
        mut gate: impl FnMut(&str, &ModelSpec) -> Arc<ModelGate>,
    ) -> Self {
        let deployments = model
            .deployments
            .iter()
            .map(|deployment| Deployment {
                id: deployment.id.clone(),
                weight: deployment.weight,
                max_concurrency: deployment.spec.max_concurrency,
                gate: gate(&deployment.id, &deployment.spec),
                health: Health::new(settings),
            })
            .collect();
        Self { entry: model.id.clone(), deployments }
    }

    /// A pool of deployments already built (benchmarks and tests).
    pub fn with_deployments(entry: impl Into<String>, deployments: Vec<Deployment>) -> Self {
        Self { entry: entry.into(), deployments: deployments.into_boxed_slice() }
    }

    /// The catalog id of the entry.
    pub fn entry(&self) -> &str {
        &self.entry
    }

    pub fn deployments(&self) -> &[Deployment] {
        &self.deployments
    }

    pub fn get(&self, index: usize) -> Option<&Deployment> {
        self.deployments.get(index)
    }

    /// The first deployment, in the entry's order, that is not benched and
    /// whose circuit lets an attempt through (nothing is claimed).
    pub fn first_usable(&self) -> Option<usize> {
        self.deployments.iter().position(|deployment| !deployment.health.benched() && deployment.health.admits())
    }
}

/// An answer came from `deployment`: its circuit closes.
pub fn answered(entry: &str, deployment: &Deployment) {
    if deployment.health.succeeded() {
        tracing::info!(model = entry, deployment = %deployment.id, "deployment circuit closed: its probe answered");
    }
}

/// What a failed attempt says of the deployment it went to, and whether the
/// call's next attempt should go elsewhere (`true`): an upstream signal the
/// retry loop re-runs (a rate limit, an overload, a 5xx, a timeout, a
/// connection failure) counts toward its circuit (a slow-down also cools it
/// for the signal's wait), and moves the next attempt; an authentication
/// failure benches it until the catalog is reloaded (the call itself is not
/// retried); anything else (an invalid request, a refusal, the call's own
/// quota) says nothing about the deployment.
pub fn judge(entry: &str, deployment: &Deployment, error: &WeirError) -> bool {
    if error.category() == Category::AuthenticationFailed {
        if deployment.health.bench() {
            tracing::warn!(
                model = entry,
                deployment = %deployment.id,
                "the deployment's credential was refused: it takes no calls until the catalog is reloaded"
            );
        }
        return false;
    }
    let Some(policy) = error.retry_policy() else { return false };
    let cool_for = (policy.backpressure_weight > 0).then_some(policy.jitter_max);
    if deployment.health.failed(cool_for) {
        tracing::warn!(
            model = entry,
            deployment = %deployment.id,
            failures = deployment.health.consecutive_failures(),
            "deployment circuit opened"
        );
    }
    true
}
