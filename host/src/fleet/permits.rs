//! A model's `max_concurrency` permits held fleet-wide: each permit is a
//! lease in Redis (`permits.lua`) that expires unless renewed. The gateway
//! renews every lease it holds each third of the lease time, so a running
//! call keeps its permit however long it runs, and the permits of a gateway
//! that died return within one lease time ([`FleetSettings::lease_secs`]).
//!
//! **Blocks** (issue 52, item 4b). One script run to acquire and one to
//! release each call made Redis the fleet's ceiling, so a gateway keeps the
//! permits its calls release, idle, and hands them to its next calls in
//! memory. Each permit is still its own lease (a member of the one sorted set
//! the script counts), so the sum of calls in flight across gateways never
//! exceeds `max_concurrency`: a call is handed only a lease Redis holds. When
//! no idle permit is left, one script run takes the call's permit and up to
//! [`spare_permits`] more. What blocks loosen is fairness, and only this
//! far: a gateway holds at most [`spare_permits`] idle at any instant (a
//! release beyond that goes back to Redis at once), and what stayed idle
//! through a whole [`PERMIT_GIVE_BACK_WINDOW`] is given back at its end, so
//! no permit waits idle in one gateway longer than two windows while another
//! is refused. A model whose `max_concurrency` is under
//! [`PERMIT_BLOCK_SHARE`] keeps no idle permit: one script run per acquire
//! and per release, as before blocks. A bulk call (whose open count leaves the
//! interactive reserve) always asks Redis, which counts idle permits as held.
//!
//! An idle permit is handed out only while its lease is known to be held: it
//! was confirmed (taken or renewed) less than a lease time ago, less a margin,
//! and no Redis operation of this gateway has failed since (a Redis that
//! restarted is empty). Otherwise it is given back (or expires), and the call
//! asks Redis, whose outage takes `on_shared_error` as before.
//!
//! [`FleetSettings::lease_secs`]: super::FleetSettings::lease_secs

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};

use tokio::time::{Duration, Instant};

use super::redis_store::Shared;
use crate::admission::{BoxFuture, Lease, PermitPool, PermitVerdict};

const SCRIPT: &str = include_str!("permits.lua");
/// The lease held under the `local` policy while Redis is out (counted here only).
const LOCAL_LEASE: &str = "local";

/// A gateway keeps at most `max_concurrency /` this of a model's permits idle.
pub const PERMIT_BLOCK_SHARE: u32 = 16;
/// ... and never more than this many (each is a member the script adds).
pub const PERMIT_BLOCK_MOST: u32 = 64;
/// Idle permits not needed through a whole window this long are given back
/// at its end.
pub const PERMIT_GIVE_BACK_WINDOW: Duration = Duration::from_millis(500);

/// The idle permits a gateway may keep of `max_concurrency` (0 below
/// [`PERMIT_BLOCK_SHARE`]: every permit goes through Redis, as before blocks).
pub fn spare_permits(max_concurrency: u32) -> u32 {
    (max_concurrency / PERMIT_BLOCK_SHARE).min(PERMIT_BLOCK_MOST)
}

/// One model's shared permits.
pub struct RedisPermits {
    inner: Arc<Inner>,
}

pub(super) struct Inner {
    shared: Arc<Shared>,
    script: redis::Script,
    key: String,
    ttl: Duration,
    /// The model's `max_concurrency`: an acquire that may use all of it (an
    /// interactive one) may be handed an idle permit.
    max: u32,
    /// How many idle permits this gateway may keep.
    spare: usize,
    /// This process's unique part of every lease id.
    owner: String,
    next: AtomicU64,
    held: Mutex<Held>,
    /// One block taken at a time: callers finding no idle permit wait for the
    /// block in flight and try it before taking another.
    leasing: tokio::sync::Mutex<()>,
    background: std::sync::Once,
    /// Under `local`: this gateway's share of the permits while Redis is out.
    local: Option<LocalPermits>,
}

/// The leases this gateway holds.
#[derive(Default)]
struct Held {
    /// Every lease held (its calls' and its idle ones), renewed until released.
    leases: HashMap<String, Confirmed>,
    /// The idle ones, the longest idle first.
    idle: Vec<String>,
    /// The fewest idle since the give-back window opened.
    low_water: usize,
    /// Idle ones no longer known to be held: given back at the next window.
    stale: Vec<String>,
}

/// When a lease was last known to be held in Redis.
#[derive(Debug, Clone, Copy)]
struct Confirmed {
    /// Before its expiry in Redis, by a margin.
    until: Instant,
    /// The store's failure count when it was confirmed.
    failures: u64,
}

impl Confirmed {
    fn holds(self, now: Instant, failures: u64) -> bool {
        now < self.until && failures == self.failures
    }
}

struct LocalPermits {
    open: u32,
    held: AtomicU32,
}

impl std::fmt::Debug for RedisPermits {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisPermits")
            .field("key", &self.inner.key)
            .field("ttl", &self.inner.ttl)
            .field("spare", &self.inner.spare)
            .finish_non_exhaustive()
    }
}

impl RedisPermits {
    /// `max` permits under `key`, keeping up to `spare` idle.
    pub(super) fn new(
        shared: Arc<Shared>,
        key: String,
        ttl: Duration,
        max: u32,
        spare: u32,
        local_share: Option<u32>,
    ) -> Self {
        let owner = format!("{}-{}", std::process::id(), uuid::Uuid::now_v7().simple());
        let inner = Inner {
            shared,
            script: redis::Script::new(SCRIPT),
            key,
            ttl,
            max,
            spare: usize::try_from(spare).unwrap_or(0),
            owner,
            next: AtomicU64::new(0),
            held: Mutex::default(),
            leasing: tokio::sync::Mutex::new(()),
            background: std::sync::Once::new(),
            local: local_share.map(|open| LocalPermits { open, held: AtomicU32::new(0) }),
        };
        Self { inner: Arc::new(inner) }
    }

    /// The shared state behind it, for the store's list of blocks to give back.
    pub(super) fn downgrade(&self) -> Weak<Inner> {
        Arc::downgrade(&self.inner)
    }

    /// The permits held fleet-wide now, idle ones included (for tests and status).
    pub async fn held(&self) -> redis::RedisResult<i64> {
        self.inner.invoke("held", &[]).await
    }

    /// The permits this gateway holds idle now.
    pub fn idle(&self) -> usize {
        self.inner.with_held(|held| held.idle.len())
    }

    /// Gives every idle permit back now.
    pub async fn give_back(&self) {
        self.inner.give_back_all().await;
    }
}

impl Inner {
    fn with_held<T>(&self, f: impl FnOnce(&mut Held) -> T) -> T {
        let mut held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        f(&mut held)
    }

    fn ttl_ms(&self) -> u64 {
        u64::try_from(self.ttl.as_millis()).unwrap_or(u64::MAX)
    }

    /// How long a lease confirmed at an instant is trusted: its lease time,
    /// less a tenth (the script's clock counts whole milliseconds, and the
    /// two clocks may drift a little).
    fn trusted_for(&self) -> Duration {
        self.ttl - self.ttl / 10
    }

    async fn invoke<T: redis::FromRedisValue>(&self, op: &str, args: &[String]) -> redis::RedisResult<T> {
        let mut invocation = self.script.key(&self.key);
        invocation.arg(op).arg(self.ttl_ms());
        for arg in args {
            invocation.arg(arg);
        }
        self.shared.eval(&invocation).await
    }

    fn new_id(&self) -> String {
        format!("{}:{}", self.owner, self.next.fetch_add(1, Ordering::Relaxed))
    }

    /// An idle permit still known to be held, if there is one; the ones no
    /// longer known to be held are set aside to be given back.
    fn take_idle(&self) -> Option<String> {
        let (now, failures) = (Instant::now(), self.shared.failures());
        self.with_held(|held| {
            let found = loop {
                let Some(id) = held.idle.pop() else { break None };
                if held.leases.get(&id).is_some_and(|confirmed| confirmed.holds(now, failures)) {
                    break Some(id);
                }
                held.leases.remove(&id);
                held.stale.push(id);
            };
            held.low_water = held.low_water.min(held.idle.len());
            found
        })
    }

    /// Takes the call's permit and up to `extra` more in one script run.
    async fn acquire_taking(self: &Arc<Self>, open: u32, extra: usize) -> PermitVerdict {
        let ids: Vec<String> = (0..=extra).map(|_| self.new_id()).collect();
        let (sent, failures) = (Instant::now(), self.shared.failures());
        let mut args = vec![open.to_string()];
        args.extend(ids.iter().cloned());
        let taken: Option<i64> = self.shared.attempt(self.invoke("acquire", &args)).await;
        let Some(taken) = taken else { return self.acquire_locally() };
        let mut taken = ids.into_iter().take(usize::try_from(taken).unwrap_or(0));
        let Some(first) = taken.next() else { return PermitVerdict::Full };
        let confirmed = Confirmed { until: sent + self.trusted_for(), failures };
        self.with_held(|held| {
            held.leases.insert(first.clone(), confirmed);
            for id in taken {
                held.leases.insert(id.clone(), confirmed);
                held.idle.push(id);
            }
        });
        self.background.call_once(|| self.start_background());
        PermitVerdict::Acquired(Lease(first))
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

    /// Keeps a released lease idle when there is room and it is still known
    /// to be held; otherwise it stops being this gateway's (`false`).
    fn keep_idle(&self, id: &str) -> bool {
        let (now, failures) = (Instant::now(), self.shared.failures());
        self.with_held(|held| {
            let holds = held.leases.get(id).is_some_and(|confirmed| confirmed.holds(now, failures));
            if holds && held.idle.len() < self.spare {
                held.idle.push(id.to_owned());
                return true;
            }
            held.leases.remove(id);
            false
        })
    }

    /// Releases `ids` in Redis. Not released (Redis out): they expire by themselves.
    async fn release_ids(&self, ids: Vec<String>) {
        if ids.is_empty() {
            return;
        }
        let released: Option<i64> = self.shared.attempt(self.invoke("release", &ids)).await;
        if released.is_none() {
            tracing::debug!(key = %self.key, permits = ids.len(), "permits not given back; they expire with their lease");
        }
    }

    /// Gives back what stayed idle through the window now closing, and the
    /// idle permits no longer known to be held; opens the next window.
    async fn give_back_unneeded(&self) {
        let (now, failures) = (Instant::now(), self.shared.failures());
        let returned = self.with_held(|held| {
            let unneeded = held.low_water.min(held.idle.len());
            let mut returned = std::mem::take(&mut held.stale);
            returned.extend(held.idle.drain(..unneeded));
            let Held { leases, idle, .. } = held;
            idle.retain(|id| {
                let holds = leases.get(id).is_some_and(|confirmed| confirmed.holds(now, failures));
                if !holds {
                    returned.push(id.clone());
                }
                holds
            });
            for id in &returned {
                held.leases.remove(id);
            }
            held.low_water = held.idle.len();
            returned
        });
        self.release_ids(returned).await;
    }

    /// The idle and stale permits, no longer this gateway's.
    fn take_all_idle(&self) -> Vec<String> {
        self.with_held(|held| {
            let mut returned = std::mem::take(&mut held.stale);
            returned.append(&mut held.idle);
            for id in &returned {
                held.leases.remove(id);
            }
            held.low_water = 0;
            returned
        })
    }

    pub(super) async fn give_back_all(&self) {
        let returned = self.take_all_idle();
        self.release_ids(returned).await;
    }

    /// Renews every held lease each third of the lease time, and gives back
    /// unneeded idle permits each [`PERMIT_GIVE_BACK_WINDOW`], for as long as
    /// this pool lives.
    fn start_background(self: &Arc<Self>) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else { return };
        let pool = Arc::downgrade(self);
        runtime.spawn(async move {
            let mut ticks = tokio::time::interval(PERMIT_GIVE_BACK_WINDOW);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            let mut renewed_at = Instant::now();
            loop {
                ticks.tick().await;
                let Some(pool) = pool.upgrade() else { return };
                if pool.spare > 0 {
                    pool.give_back_unneeded().await;
                }
                if renewed_at.elapsed() >= pool.ttl / 3 {
                    renewed_at = Instant::now();
                    pool.renew().await;
                }
            }
        });
    }

    /// Renews every lease held; forgets those Redis no longer holds.
    async fn renew(&self) {
        let ids: Vec<String> = self.with_held(|held| held.leases.keys().cloned().collect());
        if ids.is_empty() {
            return;
        }
        let (sent, failures) = (Instant::now(), self.shared.failures());
        let lost: Option<Vec<String>> = self.shared.attempt(self.invoke("renew", &ids)).await;
        let Some(lost) = lost else {
            tracing::warn!(key = %self.key, "cannot renew the fleet's permit leases; they expire unless Redis returns");
            return;
        };
        let confirmed = Confirmed { until: sent + self.trusted_for(), failures };
        // A lease released while the renewal ran is gone from both: not lost.
        let lost = self.with_held(|held| {
            let lost = lost.iter().filter(|id| held.leases.remove(id.as_str()).is_some()).count();
            held.idle.retain(|id| held.leases.contains_key(id));
            for id in &ids {
                if let Some(lease) = held.leases.get_mut(id) {
                    *lease = confirmed;
                }
            }
            lost
        });
        if lost > 0 {
            tracing::warn!(key = %self.key, lost, "permit leases expired in Redis before their renewal");
        }
    }
}

impl Drop for Inner {
    /// A dropped pool (a reload replaced it) gives its idle permits back.
    fn drop(&mut self) {
        let returned = self.take_all_idle();
        if returned.is_empty() {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else { return };
        let (shared, script, key, ttl_ms) =
            (Arc::clone(&self.shared), self.script.clone(), self.key.clone(), self.ttl_ms());
        drop(runtime.spawn(async move {
            let mut invocation = script.key(&key);
            invocation.arg("release").arg(ttl_ms).arg(returned);
            let released: Option<i64> = shared.attempt(shared.eval(&invocation)).await;
            if released.is_none() {
                tracing::debug!(%key, "a dropped pool's permits were not given back; they expire with their lease");
            }
        }));
    }
}

impl PermitPool for RedisPermits {
    fn acquire(&self, open: u32) -> BoxFuture<'_, PermitVerdict> {
        Box::pin(async move {
            let inner = &self.inner;
            if inner.spare == 0 || open < inner.max {
                return inner.acquire_taking(open, 0).await;
            }
            if let Some(id) = inner.take_idle() {
                return PermitVerdict::Acquired(Lease(id));
            }
            let _turn = inner.leasing.lock().await;
            if let Some(id) = inner.take_idle() {
                return PermitVerdict::Acquired(Lease(id));
            }
            inner.acquire_taking(open, inner.spare).await
        })
    }

    fn release(&self, lease: Lease) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            if let Err(lease) = self.release_in_place(lease) {
                self.inner.release_ids(vec![lease.0]).await;
            }
        })
    }

    fn release_in_place(&self, lease: Lease) -> Result<(), Lease> {
        let inner = &self.inner;
        if lease.0 == LOCAL_LEASE {
            if let Some(local) = &inner.local {
                local.held.fetch_sub(1, Ordering::SeqCst);
            }
            return Ok(());
        }
        if inner.keep_idle(&lease.0) { Ok(()) } else { Err(lease) }
    }
}
