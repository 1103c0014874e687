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
    PermitVerdict, RateAccount, RateStore, Shortfall, Verdict,
};
pub use throttle::Throttle;

use crate::catalog::Catalog;

/// Every model's gate, built once from the catalog.
#[derive(Debug, Default)]
pub struct Admission {
    gates: HashMap<String, Arc<ModelGate>>,
}

impl Admission {
    pub fn new(catalog: &Catalog, store: &dyn RateStore) -> Self {
        let gates = catalog
            .models()
            .map(|model| {
                let limits = Limits { rpm: model.rpm.map(u64::from), tpm: model.tpm };
                // Caller keys' accounts are `key:<id>`; a model's are `model:<id>`,
                // so no key id and model id can name one shared account.
                let account = store.account(&format!("model:{}", model.id), limits);
                // The catalog validates the share at load; a value that slipped
                // past it still gets a working gate, and a warning naming it.
                let share = InteractiveShare::new(model.interactive_share).unwrap_or_else(|error| {
                    tracing::warn!(model = %model.id, %error, "using the default interactive share");
                    InteractiveShare::DEFAULT
                });
                let (max_concurrency, max_queue) = (model.max_concurrency, Some(model.max_queue));
                let permits = max_concurrency.and_then(|max| store.permits(&format!("model:{}", model.id), max));
                let gate =
                    ModelGate::with_permits(model.id.clone(), account, max_concurrency, max_queue, share, permits);
                (model.id.clone(), gate)
            })
            .collect();
        Self { gates }
    }

    pub fn gate(&self, model: &str) -> Option<&Arc<ModelGate>> {
        self.gates.get(model)
    }
}
