//! A model's `max_concurrency` permits held fleet-wide: each call holds a
//! lease (`permits.lua`) that expires unless renewed. The gateway renews every
//! lease it holds each third of the lease time, so a running call keeps its
//! permit however long it runs, and the permits of a gateway that died return
//! within one lease time ([`FleetSettings::lease_secs`]).

use std::collections::HashSet;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;

use super::redis_store::Shared;
use crate::admission::{BoxFuture, Lease, PermitPool, PermitVerdict};

const SCRIPT: &str = include_str!("permits.lua");
/// The lease held under the `local` policy while Redis is out (counted here only).
const LOCAL_LEASE: &str = "local";

/// One model's shared permits.
pub struct RedisPermits {
    shared: Arc<Shared>,
    script: redis::Script,
    key: String,
    ttl: Duration,
    /// This process's unique part of every lease id.
    owner: String,
    next: AtomicU64,
    /// The leases this gateway holds now: renewed until released.
    held: Arc<Mutex<HashSet<String>>>,
    renewing: std::sync::Once,
    /// Under `local`: this gateway's share of the permits while Redis is out.
    local: Option<LocalPermits>,
}

struct LocalPermits {
    open: u32,
    held: AtomicU32,
}

impl std::fmt::Debug for RedisPermits {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisPermits").field("key", &self.key).field("ttl", &self.ttl).finish_non_exhaustive()
    }
}

impl RedisPermits {
    pub(super) fn new(shared: Arc<Shared>, key: String, ttl: Duration, local_share: Option<u32>) -> Self {
        let owner = format!("{}-{}", std::process::id(), uuid::Uuid::now_v7().simple());
        Self {
            shared,
            script: redis::Script::new(SCRIPT),
            key,
            ttl,
            owner,
            next: AtomicU64::new(0),
            held: Arc::default(),
            renewing: std::sync::Once::new(),
            local: local_share.map(|open| LocalPermits { open, held: AtomicU32::new(0) }),
        }
    }

    fn ttl_ms(&self) -> u64 {
        u64::try_from(self.ttl.as_millis()).unwrap_or(u64::MAX)
    }

    async fn invoke(&self, op: &str, args: &[String]) -> redis::RedisResult<i64> {
        let mut invocation = self.script.key(&self.key);
        invocation.arg(op).arg(self.ttl_ms());
        for arg in args {
            invocation.arg(arg);
        }
        self.shared.eval(&invocation).await
    }

    /// The permits held fleet-wide now (for tests and status).
    pub async fn held(&self) -> redis::RedisResult<i64> {
        self.invoke("held", &[]).await
    }

    fn hold(&self, id: &str) {
        self.held.lock().unwrap_or_else(PoisonError::into_inner).insert(id.to_owned());
        self.renewing.call_once(|| self.start_renewing());
    }

    /// Renews every held lease each third of the lease time, for as long as
    /// this pool lives.
    fn start_renewing(&self) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else { return };
        let held: Weak<Mutex<HashSet<String>>> = Arc::downgrade(&self.held);
        let (shared, script, key, ttl_ms) =
            (Arc::clone(&self.shared), self.script.clone(), self.key.clone(), self.ttl_ms());
        let every = self.ttl / 3;
        runtime.spawn(async move {
            let mut ticks = tokio::time::interval(every);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                ticks.tick().await;
                let Some(held) = held.upgrade() else { return };
                let ids: Vec<String> = held.lock().unwrap_or_else(PoisonError::into_inner).iter().cloned().collect();
                if ids.is_empty() {
                    continue;
                }
                let mut invocation = script.key(&key);
                invocation.arg("renew").arg(ttl_ms).arg(ids);
                let renewed: Option<i64> = shared.attempt(shared.eval(&invocation)).await;
                if renewed.is_none() {
                    tracing::warn!(key = %key, "cannot renew the fleet's permit leases; they expire unless Redis returns");
                }
            }
        });
    }

    fn acquire_locally(&self) -> PermitVerdict {
        let Some(local) = &self.local else { return PermitVerdict::Unavailable };
        let taken =
            local.held.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |held| (held < local.open).then_some(held + 1));
        match taken {
            Ok(_) => PermitVerdict::Acquired(Lease(LOCAL_LEASE.to_owned())),
            Err(_) => PermitVerdict::Full,
        }
    }
}

impl PermitPool for RedisPermits {
    fn acquire(&self, open: u32) -> BoxFuture<'_, PermitVerdict> {
        Box::pin(async move {
            let id = format!("{}:{}", self.owner, self.next.fetch_add(1, Ordering::Relaxed));
            match self.shared.attempt(self.invoke("acquire", &[id.clone(), open.to_string()])).await {
                Some(1) => {
                    self.hold(&id);
                    PermitVerdict::Acquired(Lease(id))
                }
                Some(_) => PermitVerdict::Full,
                None => self.acquire_locally(),
            }
        })
    }

    fn release(&self, lease: Lease) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            if lease.0 == LOCAL_LEASE {
                if let Some(local) = &self.local {
                    local.held.fetch_sub(1, Ordering::SeqCst);
                }
                return;
            }
            self.held.lock().unwrap_or_else(PoisonError::into_inner).remove(&lease.0);
            // Not released (Redis out): the lease expires by itself.
            let _ = self.shared.attempt(self.invoke("release", &[lease.0])).await;
        })
    }
}
