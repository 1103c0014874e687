//! Admission: capacity is debited *before* a call goes upstream, so callers
//! almost never see a 429.
//!
//! ```text
//! output_reserve ─┐
//! estimate_input ─┴► Demand { 1 request, input + output tokens }
//!   ─► ModelGate::admit_in(lane): request slot + tokens + concurrency permit, all or
//!      nothing; park FIFO in the lane until the earliest fit (RateAccount: clocked
//!      RPM/TPM buckets, stretched by the adaptive throttle); interactive first, and
//!      bulk leaves the interactive share of every axis
//!   ─► Grant: dropped unsent = rolled back; sent = spent, refills with time
//! ```

mod bucket;
mod budget;
pub mod deployment;
mod gate;
mod lane;
mod store;
mod throttle;

#[cfg(test)]
mod gate_tests;
#[cfg(test)]
mod lane_tests;
#[cfg(test)]
mod properties;

use std::collections::HashMap;
use std::sync::Arc;

pub use crate::config::Lane;
pub use crate::estimate::{Tokenizer, char_estimate, estimate_input, input_bound};
pub use bucket::Bucket;
pub use budget::{OutputReserve, ReserveError, output_reserve};
pub use gate::{AdmissionError, Grant, ModelGate};
pub use lane::{InteractiveShare, ShareOutOfRange};
pub use store::{
    AccountState, Axis, BoxFuture, Demand, Feedback, InProcessAccount, InProcessStore, Lease, Limits, PermitPool,
    PermitVerdict, RateAccount, RateStore, Room, Shortfall, Verdict, room_in,
};
pub use throttle::Throttle;

use crate::catalog::{Catalog, ModelSpec};
use deployment::Pool;

/// Every model's gate, and every deployment's, built once from the catalog.
#[derive(Debug, Default)]
pub struct Admission {
    gates: HashMap<String, Arc<ModelGate>>,
    /// The entries with deployments: each deployment's own gate and health.
    pools: HashMap<String, Arc<Pool>>,
}

impl Admission {
    pub fn new(catalog: &Catalog, store: &dyn RateStore) -> Self {
        // Caller keys' accounts are `key:<id>`; a model's are `model:<id>`,
        // so no key id and model id can name one shared account. A
        // deployment's are `model:<id>/deployment:<name>`.
        let gates = catalog
            .models()
            .map(|model| (model.id.clone(), gate(model, &format!("model:{}", model.id), store)))
            .collect();
        let pools = catalog
            .models()
            .filter(|model| !model.deployments.is_empty())
            .map(|model| {
                let key = |deployment: &str| format!("model:{}/deployment:{deployment}", model.id);
                let pool = Pool::new(model, store.circuits(), key, |key, spec| gate(spec, key, store));
                (model.id.clone(), Arc::new(pool))
            })
            .collect();
        Self { gates, pools }
    }

    pub fn gate(&self, model: &str) -> Option<&Arc<ModelGate>> {
        self.gates.get(model)
    }

    /// The deployments of `model`, when it has some.
    pub fn pool(&self, model: &str) -> Option<&Arc<Pool>> {
        self.pools.get(model)
    }

    /// Every entry's deployments.
    pub fn pools(&self) -> impl Iterator<Item = &Arc<Pool>> {
        self.pools.values()
    }

    /// Follows the fleet's open circuits (see [`deployment::follow`])
    /// on the current runtime, when some entry's deployments share them:
    /// until this admission's pools are gone.
    pub fn follow_fleet_circuits(&self) -> Option<tokio::task::JoinHandle<()>> {
        let shared: Vec<_> = self.pools.values().filter(|pool| pool.shared()).map(Arc::downgrade).collect();
        if shared.is_empty() {
            return None;
        }
        let runtime = tokio::runtime::Handle::try_current().ok()?;
        Some(runtime.spawn(deployment::follow(shared, deployment::FOLLOW_EVERY)))
    }
}

/// The gate of `model`'s limits, its account named `key` in `store`.
fn gate(model: &ModelSpec, key: &str, store: &dyn RateStore) -> Arc<ModelGate> {
    let limits = Limits { rpm: model.rpm.map(u64::from), tpm: model.tpm };
    let account = store.account(key, limits);
    // The catalog validates the share at load; a value that slipped
    // past it still gets a working gate, and a warning naming it.
    let share = InteractiveShare::new(model.interactive_share).unwrap_or_else(|error| {
        tracing::warn!(model = %model.id, %error, "using the default interactive share");
        InteractiveShare::DEFAULT
    });
    let (max_concurrency, max_queue) = (model.max_concurrency, Some(model.max_queue));
    let permits = max_concurrency.and_then(|max| store.permits(key, max));
    ModelGate::with_permits(model.id.clone(), account, max_concurrency, max_queue, share, permits)
}
