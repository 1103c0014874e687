//! The fleet's `max_concurrency` permits held in blocks
//! (`host/src/fleet/permits.rs`), in a real `redis-server`: gateways keep the
//! permits their calls release, idle, up to `spare_permits(max)`, and hand them
//! to their next calls in memory; the calls in flight across gateways never
//! exceed `max_concurrency`; idle permits go back to Redis when not needed
//! (within two give-back windows), at a release beyond the spare, on drop and
//! at stop; a gateway that dies holding a block loses it until its lease
//! expires; renewals keep a long call's permit; a Redis that is gone or
//! answers a script error takes the declared policy.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

use tokio::time::Instant;
use weir_host::admission::{InteractiveShare, Lease, Limits, ModelGate, PermitPool, PermitVerdict, RateStore};
use weir_host::fleet::{
    FleetSettings, PERMIT_BLOCK_SHARE, PERMIT_GIVE_BACK_WINDOW, RedisPermits, RedisStore, SharedErrorPolicy,
    spare_permits,
};
use weir_tests::RedisServer;

/// Keeps up to 4 idle.
const MAX: u32 = 64;
const SPARE: u32 = 4;

fn settings(server: &RedisServer, policy: SharedErrorPolicy, lease_secs: Option<u64>) -> FleetSettings {
    FleetSettings {
        redis_url: Some(server.url()),
        cluster_urls: None,
        on_shared_error: policy,
        fleet_size: (policy == SharedErrorPolicy::Local).then_some(2),
        key_prefix: Some("weir-test".to_owned()),
        lease_secs,
    }
}

fn store(server: &RedisServer) -> RedisStore {
    RedisStore::new(&settings(server, SharedErrorPolicy::Refuse, None), None).unwrap()
}

async fn acquired(pool: &RedisPermits, open: u32) -> Lease {
    match pool.acquire(open).await {
        PermitVerdict::Acquired(lease) => lease,
        other => panic!("a permit was open: {other:?}"),
    }
}

/// Acquires (one script run each, no idle permit kept) until the fleet is full.
async fn fill(pool: &RedisPermits) -> Vec<Lease> {
    let mut leases = Vec::new();
    while let PermitVerdict::Acquired(lease) = pool.acquire(MAX).await {
        leases.push(lease);
        assert!(leases.len() <= MAX as usize, "more than max_concurrency");
    }
    leases
}

/// Waits (up to `within`) until `pool` holds no idle permit; answers how long it took.
async fn until_no_idle(pool: &RedisPermits, within: Duration) -> Duration {
    let start = Instant::now();
    while pool.idle() > 0 {
        assert!(start.elapsed() < within, "{} permits still idle after {within:?}", pool.idle());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    start.elapsed()
}

#[test]
fn the_spare_is_a_sixteenth_of_the_limit_at_most_64_and_none_below_16() {
    assert_eq!(spare_permits(PERMIT_BLOCK_SHARE - 1), 0);
    assert_eq!(spare_permits(PERMIT_BLOCK_SHARE), 1);
    assert_eq!(spare_permits(MAX), SPARE);
    assert_eq!(spare_permits(1_000_000), 64);
}

/// Three gateways of 32 callers each through their own gates, two keeping
/// blocks and one taking a permit per call (a gateway as before blocks, on
/// the same sorted set): the calls in flight across them never exceed
/// `max_concurrency`, though they reach it; at their stop nothing stays held.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_calls_in_flight_across_three_gateways_never_exceed_the_limit() {
    let server = RedisServer::start().await;
    let stores = [store(&server), store(&server), store(&server)];
    let pools =
        [stores[0].redis_permits("m", MAX), stores[1].redis_permits("m", MAX), stores[2].per_call_permits("m", MAX)];
    let (in_flight, most, admitted) =
        (Arc::new(AtomicU32::new(0)), Arc::new(AtomicU32::new(0)), Arc::new(AtomicU64::new(0)));
    let until = Instant::now() + Duration::from_millis(2_000);
    let mut callers = Vec::new();
    for (store, pool) in stores.iter().zip(pools) {
        let account = store.account("m", Limits::default());
        let gate = ModelGate::with_permits("m", account, Some(MAX), None, InteractiveShare::NONE, Some(Arc::new(pool)));
        for caller in 0..32u64 {
            let (gate, in_flight, most, admitted) =
                (Arc::clone(&gate), Arc::clone(&in_flight), Arc::clone(&most), Arc::clone(&admitted));
            callers.push(tokio::spawn(async move {
                while Instant::now() < until {
                    let mut grant = gate.admit(weir_host::admission::Demand::default(), None).await.unwrap();
                    grant.mark_sent();
                    let now = in_flight.fetch_add(1, Ordering::SeqCst) + 1;
                    most.fetch_max(now, Ordering::SeqCst);
                    admitted.fetch_add(1, Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_millis(1 + caller % 5)).await;
                    in_flight.fetch_sub(1, Ordering::SeqCst);
                    drop(grant);
                }
            }));
        }
    }
    for caller in callers {
        caller.await.unwrap();
    }
    let most = most.load(Ordering::SeqCst);
    println!("most in flight {most} of {MAX}, {} admitted", admitted.load(Ordering::SeqCst));
    assert!(most <= MAX, "{most} calls in flight across the fleet, max_concurrency {MAX}");
    assert!(most > 48, "more than two gateways' callers in flight together: {most}");
    tokio::time::sleep(Duration::from_millis(200)).await;
    for store in &stores {
        store.give_back().await;
    }
    let watcher = store(&server).per_call_permits("m", MAX);
    assert_eq!(watcher.held().await.unwrap(), 0, "every permit released or given back");
}

/// A release beyond the spare goes back to Redis at once; the spare left
/// idle goes back within two give-back windows, and another gateway then
/// takes those permits.
#[tokio::test]
async fn idle_permits_are_given_back_and_another_gateway_takes_them() {
    let server = RedisServer::start().await;
    let (gateway, other) = (store(&server).redis_permits("m", MAX), store(&server).per_call_permits("m", MAX));
    let mut leases = Vec::new();
    for _ in 0..10 {
        leases.push(acquired(&gateway, MAX).await);
    }
    assert_eq!((gateway.held().await.unwrap(), gateway.idle()), (10, 0), "two blocks of 1 + 4, all in use");
    for lease in leases {
        gateway.release(lease).await;
    }
    assert_eq!(gateway.idle(), SPARE as usize, "the spare kept");
    assert_eq!(gateway.held().await.unwrap(), i64::from(SPARE), "the rest released at once");
    let others = fill(&other).await;
    assert_eq!(others.len(), (MAX - SPARE) as usize, "the idle spare counts as held");
    let took = until_no_idle(&gateway, PERMIT_GIVE_BACK_WINDOW * 2 + Duration::from_secs(2)).await;
    println!("the idle spare was given back after {took:?}");
    let taken = fill(&other).await;
    assert_eq!(taken.len(), SPARE as usize, "the other gateway took the given-back permits");
}

/// A model whose limit is under `PERMIT_BLOCK_SHARE` keeps nothing idle: one
/// permit per call, released at once, exactly as before blocks.
#[tokio::test]
async fn a_small_limit_keeps_no_idle_permit() {
    let server = RedisServer::start().await;
    let small = PERMIT_BLOCK_SHARE - 1;
    let (gateway, other) = (store(&server).redis_permits("m", small), store(&server).redis_permits("m", small));
    let lease = acquired(&gateway, small).await;
    assert_eq!((gateway.held().await.unwrap(), gateway.idle()), (1, 0));
    gateway.release(lease).await;
    assert_eq!((gateway.held().await.unwrap(), gateway.idle()), (0, 0), "released at once");
    let mut held = Vec::new();
    while let PermitVerdict::Acquired(lease) = other.acquire(small).await {
        held.push(lease);
    }
    assert_eq!(held.len(), small as usize);
}

/// A gateway that dies holding a block (its runtime gone: no timer, no drop,
/// no stop runs) loses its permits until their lease expires, then another
/// gateway takes them.
#[tokio::test]
async fn a_dead_gateways_block_returns_when_its_lease_expires() {
    const LEASE_SECS: u64 = 3;
    let server = RedisServer::start().await;
    let settings = settings(&server, SharedErrorPolicy::Refuse, Some(LEASE_SECS));
    let died = std::thread::spawn(move || {
        let runtime = tokio::runtime::Runtime::new().unwrap();
        let pool = runtime.block_on(async {
            let pool = RedisStore::new(&settings, None).unwrap().redis_permits("m", MAX);
            // Its call is still in flight when it dies.
            let _in_flight = acquired(&pool, MAX).await;
            pool
        });
        runtime.shutdown_background();
        drop(pool);
        Instant::now()
    })
    .join()
    .unwrap();
    let other = RedisStore::new(&settings_with_lease(&server, LEASE_SECS), None).unwrap().per_call_permits("m", MAX);
    let mut others = fill(&other).await;
    assert_eq!(others.len(), (MAX - 1 - SPARE) as usize, "the dead gateway's call and block still held");
    let start = Instant::now();
    while others.len() < MAX as usize {
        assert!(start.elapsed() < Duration::from_secs(LEASE_SECS + 3), "the dead block never came back");
        tokio::time::sleep(Duration::from_millis(100)).await;
        others.extend(fill(&other).await);
    }
    let returned = died.elapsed();
    println!("the dead gateway's 5 permits came back {returned:?} after it died (lease {LEASE_SECS} s)");
    assert!(returned >= Duration::from_secs(LEASE_SECS) - Duration::from_millis(500), "back before its lease expired");
}

fn settings_with_lease(server: &RedisServer, lease_secs: u64) -> FleetSettings {
    settings(server, SharedErrorPolicy::Refuse, Some(lease_secs))
}

/// A call holding its permit for more than two lease times keeps it (the
/// gateway renews it), while the block's idle permits went back.
#[tokio::test]
async fn renewals_keep_a_long_calls_permit() {
    const LEASE_SECS: u64 = 3;
    let server = RedisServer::start().await;
    let settings = settings_with_lease(&server, LEASE_SECS);
    let gateway = RedisStore::new(&settings, None).unwrap().redis_permits("m", MAX);
    let other = RedisStore::new(&settings, None).unwrap().per_call_permits("m", MAX);
    let long_call = acquired(&gateway, MAX).await;
    assert_eq!(gateway.idle(), SPARE as usize);
    tokio::time::sleep(Duration::from_secs(2 * LEASE_SECS + 1)).await;
    assert_eq!(gateway.idle(), 0, "the unneeded block was given back");
    assert_eq!(gateway.held().await.unwrap(), 1, "the long call's permit renewed");
    assert_eq!(fill(&other).await.len(), (MAX - 1) as usize);
    gateway.release(long_call).await;
    assert_eq!((gateway.idle(), other.held().await.unwrap()), (1, i64::from(MAX)), "kept idle, still held");
}

/// A bulk acquire (its open count leaves the interactive reserve) always
/// asks Redis, where the idle permits count as held.
#[tokio::test]
async fn a_bulk_acquire_asks_redis_where_idle_permits_count() {
    let server = RedisServer::start().await;
    let gateway = store(&server).redis_permits("m", MAX);
    let first = acquired(&gateway, MAX).await;
    gateway.release(first).await;
    assert_eq!(gateway.idle(), SPARE as usize);
    let before = server.script_runs().await;
    assert_eq!(gateway.acquire(SPARE).await, PermitVerdict::Full, "the idle spare fills a bulk open count of 4");
    let bulk = acquired(&gateway, SPARE + 1).await;
    assert_eq!(server.script_runs().await - before, 2, "each bulk acquire one script run");
    assert_eq!(gateway.idle(), SPARE as usize, "the block untouched");
    drop(bulk);
}

/// A pool dropped with idle permits (a reload replaced it) gives them back,
/// and so does the store at the gateway's stop.
#[tokio::test]
async fn idle_permits_are_given_back_on_drop_and_at_stop() {
    let server = RedisServer::start().await;
    let (gateway, watcher) = (store(&server), store(&server).per_call_permits("m", MAX));
    let dropped = gateway.redis_permits("m", MAX);
    let lease = acquired(&dropped, MAX).await;
    dropped.release(lease).await;
    assert_eq!(watcher.held().await.unwrap(), i64::from(SPARE));
    drop(dropped);
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(watcher.held().await.unwrap(), 0, "given back on drop");

    let kept = gateway.redis_permits("k", MAX);
    let lease = acquired(&kept, MAX).await;
    kept.release(lease).await;
    assert_eq!(kept.idle(), SPARE as usize);
    gateway.give_back().await;
    assert_eq!(kept.idle(), 0);
    assert_eq!(store(&server).per_call_permits("k", MAX).held().await.unwrap(), 0, "given back at stop");
}

/// Many callers through one gateway's gate, far below the limit: a script
/// runs for a small fraction of the calls.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn blocks_cut_the_script_runs_far_below_two_per_call() {
    const CALLS: u64 = 10_000;
    let server = RedisServer::start().await;
    let gateway = store(&server);
    let pool: Arc<dyn PermitPool> = Arc::new(gateway.redis_permits("m", 1_000));
    let account = gateway.account("m", Limits::default());
    let gate = ModelGate::with_permits("m", account, Some(1_000), None, InteractiveShare::NONE, Some(pool));
    let call = move || {
        let gate = Arc::clone(&gate);
        async move { gate.admit(weir_host::admission::Demand::default(), None).await.unwrap().mark_sent() }
    };
    let scripts = server.script_runs_during(32, CALLS / 32, call).await;
    println!("{scripts} script runs for {CALLS} admitted calls");
    // Two per call would be 20,000. A released permit goes idle in place, so
    // the first block serves every call: 3 runs seen, idle or beside three
    // CPU burners. The bound leaves room for the windows' give-backs and
    // re-takes (two runs each half second) on a slow machine. When releases
    // went idle in their own task, 195-515 runs were seen.
    assert!(scripts * 200 < CALLS, "{scripts} script runs for {CALLS} admitted calls");
}

/// A call's permit is idle again the moment its grant drops, with nothing
/// awaited: no task has to run before the next call can take it.
#[tokio::test]
async fn a_dropped_grant_leaves_its_permit_idle_at_once() {
    let server = RedisServer::start().await;
    let gateway = store(&server);
    let permits = Arc::new(gateway.redis_permits("m", 1_000));
    let pool: Arc<dyn PermitPool> = Arc::clone(&permits) as Arc<dyn PermitPool>;
    let account = gateway.account("m", Limits::default());
    let gate = ModelGate::with_permits("m", account, Some(1_000), None, InteractiveShare::NONE, Some(pool));
    // The first call's block leaves the idle list full; a second call makes room.
    let mut first = gate.admit(weir_host::admission::Demand::default(), None).await.unwrap();
    first.mark_sent();
    let mut grant = gate.admit(weir_host::admission::Demand::default(), None).await.unwrap();
    grant.mark_sent();
    let idle = permits.idle();
    assert!(idle < spare_permits(1_000) as usize, "room for one more idle permit");
    drop(grant);
    assert_eq!(permits.idle(), idle + 1, "the permit is idle before anything is awaited");
    let before = server.script_runs().await;
    let mut grant = gate.admit(weir_host::admission::Demand::default(), None).await.unwrap();
    grant.mark_sent();
    assert_eq!(server.script_runs().await - before, 0, "the next call takes it without Redis");
    assert_eq!(permits.idle(), idle);
    drop(first);
}

/// Redis gone while a block is held: once the gateway has seen a failure, its
/// idle permits are no longer handed out (a restarted Redis is empty), and
/// calls take the policy: `refuse` answers unavailable, `local` counts this
/// gateway's share in memory. A give-back Redis does not take empties the
/// block without waiting; once Redis is back, a new block is taken.
#[tokio::test]
async fn redis_gone_mid_block_takes_the_policy() {
    let mut server = RedisServer::start().await;
    let refusing = RedisStore::new(&settings(&server, SharedErrorPolicy::Refuse, None), None).unwrap();
    let local = RedisStore::new(&settings(&server, SharedErrorPolicy::Local, None), None).unwrap();
    let (refusing, local) = (refusing.redis_permits("m", MAX), local.redis_permits("l", MAX));
    for pool in [&refusing, &local] {
        let lease = acquired(pool, MAX).await;
        pool.release(lease).await;
        assert_eq!(pool.idle(), SPARE as usize);
    }
    server.stop();
    // A bulk acquire asks Redis: the failure that tells the gateway.
    assert_eq!(refusing.acquire(MAX - 1).await, PermitVerdict::Unavailable);
    assert_eq!(refusing.acquire(MAX).await, PermitVerdict::Unavailable, "the idle block is not trusted any more");
    // The local policy's first failure, counted in memory too.
    assert_eq!(local.acquire(MAX - 1).await, PermitVerdict::Acquired(Lease("local".to_owned())));
    let mut locals = 1;
    while let PermitVerdict::Acquired(lease) = local.acquire(MAX).await {
        assert_eq!(lease.0, "local", "counted in memory, not from the block");
        locals += 1;
        assert!(locals <= MAX, "more than the local share");
    }
    assert_eq!(locals, MAX / 2, "the local share of a fleet of 2");
    refusing.give_back().await;
    assert_eq!(refusing.idle(), 0);
    server.resume().await;
    let back = Instant::now() + Duration::from_secs(10);
    let lease = loop {
        if let PermitVerdict::Acquired(lease) = refusing.acquire(MAX).await {
            break lease;
        }
        assert!(Instant::now() < back, "sharing never came back");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(refusing.held().await.unwrap(), i64::from(1 + SPARE), "a new block in the restarted Redis");
    refusing.release(lease).await;
}

/// A script error (the permits' key holds something else) is a failure like
/// an outage: the policy answers and the idle block stops being trusted; once
/// the key is usable again, permits are shared.
#[tokio::test]
async fn a_script_error_takes_the_policy() {
    let server = RedisServer::start().await;
    let gateway = RedisStore::new(&settings_with_lease(&server, 3), None).unwrap().redis_permits("m", MAX);
    let lease = acquired(&gateway, MAX).await;
    gateway.release(lease).await;
    let mut connection = server.connection().await;
    let _: () = redis::cmd("SET")
        .arg("weir-test:permits:m")
        .arg("not a sorted set")
        .query_async(&mut connection)
        .await
        .unwrap();
    assert_eq!(gateway.acquire(MAX - 1).await, PermitVerdict::Unavailable, "WRONGTYPE answered as unavailable");
    assert_eq!(gateway.acquire(MAX).await, PermitVerdict::Unavailable, "the idle block no longer handed out");
    let _: () = redis::cmd("DEL").arg("weir-test:permits:m").query_async(&mut connection).await.unwrap();
    tokio::time::sleep(weir_host::fleet::RETRY_AFTER_OUTAGE).await;
    let lease = acquired(&gateway, MAX).await;
    assert_eq!(gateway.held().await.unwrap(), i64::from(1 + SPARE));
    gateway.release(lease).await;
}

/// Redis losing the leases without a failed operation (the key deleted, as
/// by a restart between two calls): the gateway's calls keep using its idle
/// permits (so none is given back as unneeded) until the next renewal finds
/// them gone; then they are forgotten and the calls take a block Redis counts.
#[tokio::test]
async fn a_renewal_forgets_the_idle_permits_redis_lost() {
    const LEASE_SECS: u64 = 3;
    let server = RedisServer::start().await;
    let gateway = RedisStore::new(&settings_with_lease(&server, LEASE_SECS), None).unwrap().redis_permits("m", MAX);
    let lease = acquired(&gateway, MAX).await;
    gateway.release(lease).await;
    assert_eq!(gateway.idle(), SPARE as usize);
    let mut connection = server.connection().await;
    let _: () = redis::cmd("DEL").arg("weir-test:permits:m").query_async(&mut connection).await.unwrap();
    // The renewal runs within a third of the lease and a give-back window.
    let until = Instant::now() + Duration::from_secs(LEASE_SECS) / 3 + PERMIT_GIVE_BACK_WINDOW * 2;
    while Instant::now() < until {
        let mut leases = Vec::new();
        for _ in 0..SPARE {
            leases.push(acquired(&gateway, MAX).await);
        }
        for lease in leases {
            gateway.release(lease).await;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(gateway.idle() > 0);
    assert_eq!(gateway.held().await.unwrap(), gateway.idle() as i64, "every idle permit counted in Redis again");
}
