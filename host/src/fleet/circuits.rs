//! Deployments' circuits shared through Redis (see
//! [`crate::admission::deployment::CircuitBoard`]): an open circuit is the key
//! `<prefix>:circuit:model:<id>/deployment:<name>` (on a cluster, tagged:
//! `<prefix>:circuit:{model:<id>/deployment:<name>}`, see `keys.rs`), set with
//! the time it stays open as its expiry (`SET … PX`), read back with `PTTL`
//! (one pipeline; on a cluster one command per deployment, whose keys may sit
//! on different nodes), deleted when a probe closes it. A Redis that is out
//! leaves each gateway its own circuits; the failure is logged and counted as
//! any shared-state failure.

use std::sync::Arc;
use std::time::Duration;

use super::redis_store::Shared;
use crate::admission::BoxFuture;
use crate::admission::deployment::CircuitBoard;

pub(super) struct RedisCircuits {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for RedisCircuits {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisCircuits").finish_non_exhaustive()
    }
}

impl RedisCircuits {
    pub(super) fn new(shared: Arc<Shared>) -> Self {
        Self { shared }
    }

    fn key(&self, key: &str) -> String {
        self.shared.keys().circuit(key)
    }
}

impl CircuitBoard for RedisCircuits {
    fn opened(&self, key: &str, open_for: Duration) -> BoxFuture<'_, ()> {
        let key = self.key(key);
        let millis = u64::try_from(open_for.as_millis()).unwrap_or(u64::MAX).max(1);
        Box::pin(async move {
            let mut command = redis::pipe();
            command.cmd("SET").arg(&key).arg(1).arg("PX").arg(millis).ignore();
            self.shared.attempt(self.shared.query::<()>(&command)).await;
        })
    }

    fn closed(&self, key: &str) -> BoxFuture<'_, ()> {
        let key = self.key(key);
        Box::pin(async move {
            let mut command = redis::pipe();
            command.cmd("DEL").arg(&key).ignore();
            self.shared.attempt(self.shared.query::<()>(&command)).await;
        })
    }

    fn open_now<'a>(&'a self, keys: &'a [String]) -> BoxFuture<'a, Vec<Option<Duration>>> {
        Box::pin(async move {
            let commands = keys.iter().map(|key| redis::cmd("PTTL").arg(self.key(key)).clone()).collect();
            let answers: Vec<i64> = self.shared.attempt(self.shared.query_each(commands)).await.unwrap_or_default();
            // PTTL: -2 no key, -1 no expiry (never written so), else the milliseconds left.
            answers
                .into_iter()
                .map(|ms| u64::try_from(ms).ok().filter(|ms| *ms > 0).map(Duration::from_millis))
                .collect()
        })
    }
}
