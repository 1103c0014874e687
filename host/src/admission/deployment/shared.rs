//! Circuits a fleet shares: when one gateway opens a deployment's circuit it
//! tells the others (a key in `[fleet]`'s Redis that expires when the circuit
//! would half-open), and each gateway reads the open ones every second, so
//! three gateways do not each rediscover a dead region. A probe's success
//! clears the key. Choosing stays local: only this follower and the moments a
//! circuit opens or closes touch the network.

use std::sync::{Arc, Weak};
use std::time::Duration;

use super::Pool;
use crate::admission::BoxFuture;

/// How often a gateway reads the fleet's open circuits.
pub const FOLLOW_EVERY: Duration = Duration::from_secs(1);

/// Where a fleet's gateways tell each other of open circuits. Each operation
/// is best effort: a store that cannot be reached leaves each gateway with its
/// own circuits (its failures are logged and counted by the store).
pub trait CircuitBoard: Send + Sync + std::fmt::Debug {
    /// `key`'s circuit opened here for `open_for`.
    fn opened(&self, key: &str, open_for: Duration) -> BoxFuture<'_, ()>;
    /// `key`'s circuit closed here (its probe answered).
    fn closed(&self, key: &str) -> BoxFuture<'_, ()>;
    /// For each of `keys`, how much longer the fleet holds its circuit open
    /// (`None`: it does not); an empty list when the store cannot answer.
    fn open_now<'a>(&'a self, keys: &'a [String]) -> BoxFuture<'a, Vec<Option<Duration>>>;
}

/// Reads the fleet's open circuits for `pools` every `every`, until every
/// pool is gone (a catalog replaced): a circuit another gateway opened is open
/// here for as long as it is there.
pub async fn follow(pools: Vec<Weak<Pool>>, every: Duration) {
    loop {
        tokio::time::sleep(every).await;
        let mut alive = false;
        for pool in &pools {
            let Some(pool) = pool.upgrade() else { continue };
            alive = true;
            apply(&pool).await;
        }
        if !alive {
            return;
        }
    }
}

async fn apply(pool: &Arc<Pool>) {
    let Some(board) = &pool.board else { return };
    let open = board.open_now(&pool.shared_keys).await;
    for (deployment, remaining) in pool.deployments.iter().zip(open) {
        let Some(remaining) = remaining else { continue };
        if deployment.health.open_for(remaining) {
            tracing::warn!(
                model = %pool.entry,
                deployment = %deployment.id,
                ?remaining,
                "deployment circuit opened by another gateway of the fleet"
            );
        }
    }
}
