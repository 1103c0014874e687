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
//! An attempt reads the deployments' fixed list (built once per catalog), their
//! health's atomics, and each one's room for its demand: an in-process
//! account's levels under its lock (arithmetic only), a fleet account's from
//! its own last take (never Redis). Choosing allocates nothing.

mod affinity;
mod choose;
mod health;
mod shared;

use std::sync::Arc;
use std::time::Duration;

pub use affinity::affinity_of;
pub use choose::Tried;
pub use health::{CircuitSettings, CircuitState, Health, InFlight, MIN_WINDOW_ATTEMPTS};
pub use shared::{CircuitBoard, FOLLOW_EVERY, follow};

use crate::admission::ModelGate;
use crate::catalog::ModelSpec;
use crate::failure::{Category, SignalPolicy};

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
    /// Where the fleet shares its circuits, when `[fleet]` is on.
    board: Option<Arc<dyn CircuitBoard>>,
    /// Each deployment's name in the fleet's store (its account's key).
    shared_keys: Box<[String]>,
}

impl Pool {
    /// The pool of `model` (whose `deployments` are not empty): each
    /// deployment's gate and its name in the fleet's store come from `key`
    /// and `gate`; `board` shares its circuits when the fleet is on.
    pub fn new(
        model: &ModelSpec,
        board: Option<Arc<dyn CircuitBoard>>,
        key: impl Fn(&str) -> String,
        gate: impl Fn(&str, &ModelSpec) -> Arc<ModelGate>,
    ) -> Self {
        let shared_keys = model.deployments.iter().map(|deployment| key(&deployment.id)).collect();
        let deployments = model
            .deployments
            .iter()
            .map(|deployment| Deployment {
                id: deployment.id.clone(),
                weight: deployment.weight,
                max_concurrency: deployment.spec.max_concurrency,
                gate: gate(&key(&deployment.id), &deployment.spec),
                health: Health::new(model.circuit),
            })
            .collect();
        Self { entry: model.id.clone(), deployments, board, shared_keys }
    }

    /// A pool of deployments already built (benchmarks and tests).
    pub fn with_deployments(entry: impl Into<String>, deployments: Vec<Deployment>) -> Self {
        let shared_keys = deployments.iter().map(|deployment| deployment.id.clone()).collect();
        Self { entry: entry.into(), deployments: deployments.into_boxed_slice(), board: None, shared_keys }
    }

    /// Whether the fleet shares this pool's circuits.
    pub fn shared(&self) -> bool {
        self.board.is_some()
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

    /// The deployments, in the entry's order, that are not benched and whose
    /// circuit lets an attempt through (nothing is claimed).
    pub fn usable(&self) -> impl Iterator<Item = usize> + '_ {
        self.deployments.iter().enumerate().filter(|(_, deployment)| deployment.health.usable()).map(|(index, _)| index)
    }
}

impl Pool {
    /// An answer came from the `index`-th deployment: its circuit closes (and
    /// the fleet is told, when it shares circuits).
    pub fn answered(&self, index: usize) {
        let Some(deployment) = self.deployments.get(index) else { return };
        if deployment.health.succeeded() {
            tracing::info!(model = %self.entry, deployment = %deployment.id, "deployment circuit closed: its probe answered");
            self.tell(index, None);
        }
    }

    /// Tells the fleet (when it shares circuits) that the `index`-th
    /// deployment's circuit opened for `open_for`, or closed (`None`), without
    /// holding up the call: the store is written by a task of its own.
    fn tell(&self, index: usize, open_for: Option<Duration>) {
        let (Some(board), Some(key)) = (&self.board, self.shared_keys.get(index)) else { return };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else { return };
        let (board, key) = (Arc::clone(board), key.clone());
        drop(runtime.spawn(async move {
            match open_for {
                Some(open_for) => board.opened(&key, open_for).await,
                None => board.closed(&key).await,
            }
        }));
    }
}

/// What a failed attempt (its failure's category and retry policy) says of
/// the deployment it went to, and whether the
/// call's next attempt should go elsewhere (`true`): an upstream signal the
/// retry loop re-runs (a rate limit, an overload, a 5xx, a timeout, a
/// connection failure) counts toward its circuit (a slow-down also cools it
/// for the signal's wait), and moves the next attempt; an authentication
/// failure benches it until the catalog is reloaded (the call itself is not
/// retried); anything else (an invalid request, a refusal, the call's own
/// quota) says nothing about the deployment.
impl Pool {
    pub fn judge(&self, index: usize, category: Category, retry_policy: Option<SignalPolicy>) -> bool {
        let Some(deployment) = self.deployments.get(index) else { return false };
        if category == Category::AuthenticationFailed {
            if deployment.health.bench() {
                tracing::warn!(
                    model = %self.entry,
                    deployment = %deployment.id,
                    "the deployment's credential was refused: it takes no calls until the catalog is reloaded"
                );
            }
            return false;
        }
        let Some(policy) = retry_policy else { return false };
        let cool_for = (policy.backpressure_weight > 0).then_some(policy.jitter_max);
        if deployment.health.failed(cool_for) {
            tracing::warn!(
                model = %self.entry,
                deployment = %deployment.id,
                failures = deployment.health.consecutive_failures(),
                error_rate = deployment.health.window_error_rate(),
                "deployment circuit opened"
            );
            if let crate::admission::deployment::CircuitState::Open { remaining } = deployment.health.circuit() {
                self.tell(index, Some(remaining));
            }
        }
        true
    }
}
