//! The fleet's accounts leased in blocks (`host/src/fleet/lease.rs`), in a
//! real `redis-server`: a block is taken in one script run and admitted from
//! in memory; what it still holds is given back (on demand, at a gateway's
//! stop, and when it expires), so another gateway can take it; a gateway that
//! dies holding one loses at most that block; and three gateways together
//! stay inside the stated bound: what the shared bucket grants in a window
//! plus at most `limit / BLOCK_SHARE_OF_LIMIT` per gateway.
//!
//! The shared level is read through a second gateway's per-call account (one
//! script run per take, answering what it left), and every comparison allows
//! for the bucket's refill over the interval the test measured around it.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;
use weir_host::admission::{Demand, InteractiveShare, Limits, ModelGate, RateAccount, RateStore, Verdict};
use weir_host::fleet::{
    BLOCK_LIFETIME, BLOCK_SHARE_OF_LIMIT, FleetSettings, LeasedAccount, RedisAccount, RedisStore, ScriptVerdict,
    SharedErrorPolicy,
};
use weir_tests::RedisServer;

/// 1,000 requests a second; a block holds at most 600 of them.
const RPM: u64 = 60_000;
const LIMITS: Limits = Limits { rpm: Some(RPM), tpm: None };
const ONE: Demand = Demand { requests: 1, tokens: 0 };

fn store(server: &RedisServer) -> RedisStore {
    let settings = FleetSettings {
        redis_url: Some(server.url()),
        cluster_urls: None,
        on_shared_error: SharedErrorPolicy::Refuse,
        fleet_size: None,
        key_prefix: Some("weir-test".to_owned()),
        lease_secs: None,
    };
    RedisStore::new(&settings, None).unwrap()
}

/// Requests refilled over `elapsed` (rounded down, or up).
fn refilled(elapsed: Duration, up: bool) -> u64 {
    let exact = elapsed.as_secs_f64() * RPM as f64 / 60.0;
    if up { exact.ceil() as u64 } else { exact.floor() as u64 }
}

/// A reading of the shared requests level: one request taken by the other
/// gateway, what it left, and the instants around the script run.
struct Reading {
    left: u64,
    sent: Instant,
    answered: Instant,
}

async fn read_level(other: &RedisAccount) -> Reading {
    let sent = Instant::now();
    let verdict = other.take_at(ONE, InteractiveShare::NONE, None).await.unwrap();
    let answered = Instant::now();
    assert_eq!(verdict, ScriptVerdict::Granted, "the reading's own request fits");
    Reading { left: other.last_left().unwrap().0.unwrap(), sent, answered }
}

/// Empties the shared bucket through `other`, then reads it.
async fn drain(other: &RedisAccount) -> Reading {
    // One left for the reading's own take.
    let left = read_level(other).await.left;
    let all = Demand { requests: left.saturating_sub(1), tokens: 0 };
    assert_eq!(other.take_at(all, InteractiveShare::NONE, None).await.unwrap(), ScriptVerdict::Granted);
    read_level(other).await
}

/// Takes one request at a time until the block holds at least `at_least`;
/// answers how many were admitted.
async fn warm(account: &LeasedAccount, at_least: u64) -> u64 {
    let mut admitted = 0;
    while account.block_left().requests < at_least {
        assert_eq!(account.try_take(ONE).await, Verdict::Granted);
        admitted += 1;
        assert!(admitted < 10_000, "the block never grew: {:?}", account.block_left());
    }
    admitted
}

/// Between two readings with `returned` given back between them, the level
/// grew by exactly `returned` plus the refill of the interval (bounded by the
/// instants measured around both readings), less the second reading's take.
fn assert_returned(before: &Reading, after: &Reading, returned: u64) {
    let grew = after.left + 1 - before.left;
    let least = returned + refilled(after.sent - before.answered, false);
    let most = returned + refilled(after.answered - before.sent, true) + 1;
    assert!((least.saturating_sub(1)..=most).contains(&grew), "grew {grew}, expected {least}..={most}");
}

/// A block given back at the gateway's stop (`RateStore::give_back`, as
/// `weir serve` calls it) is in the shared bucket for the next gateway.
#[tokio::test]
async fn a_block_given_back_at_stop_is_the_next_gateways() {
    let server = RedisServer::start().await;
    let (gateway, other) = (store(&server), store(&server));
    let account = gateway.leased_account("m", LIMITS);
    let reader = other.redis_account("m", LIMITS);
    warm(&account, 100).await;
    let held = account.block_left().requests;
    let before = drain(&reader).await;
    gateway.give_back().await;
    assert_eq!(account.block_left(), Demand::default(), "nothing held after the give-back");
    let after = read_level(&reader).await;
    assert_returned(&before, &after, held);
    assert!(held > refilled(after.answered - before.sent, true) + 2, "the block, not the refill, made the difference");
}

/// An account dropped holding a block (a reload replaced it) gives it back.
#[tokio::test]
async fn a_dropped_accounts_block_is_given_back() {
    let server = RedisServer::start().await;
    let (gateway, other) = (store(&server), store(&server));
    let account = gateway.leased_account("m", LIMITS);
    let reader = other.redis_account("m", LIMITS);
    warm(&account, 100).await;
    let held = account.block_left().requests;
    let before = drain(&reader).await;
    drop(account);
    tokio::time::sleep(Duration::from_millis(200)).await;
    let after = read_level(&reader).await;
    assert_returned(&before, &after, held);
}

/// A block left unused is given back on its own once [`BLOCK_LIFETIME`] has passed.
#[tokio::test]
async fn an_unused_block_is_given_back_when_it_expires() {
    let server = RedisServer::start().await;
    let (gateway, other) = (store(&server), store(&server));
    let account = gateway.leased_account("m", LIMITS);
    let reader = other.redis_account("m", LIMITS);
    warm(&account, 100).await;
    let held = account.block_left().requests;
    let before = drain(&reader).await;
    assert_eq!(account.block_left().requests, held, "still held just after");
    tokio::time::sleep(BLOCK_LIFETIME + Duration::from_millis(300)).await;
    assert_eq!(account.block_left(), Demand::default());
    let after = read_level(&reader).await;
    assert_returned(&before, &after, held);
}

/// A gateway that dies (its runtime gone: no timer, no drop, no stop runs)
/// holding a block loses that block and no more: the shared level is the
/// capacity less what it admitted, the block, and the reader's one request,
/// plus the refill since the gateway's first take.
#[tokio::test]
async fn a_gateway_killed_holding_a_block_loses_at_most_that_block() {
    let server = RedisServer::start().await;
    let url_server = server.url();
    let started = Instant::now();
    let (admitted, held) = std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let (account, admitted, held) = runtime.block_on(async {
            let settings = FleetSettings {
                redis_url: Some(url_server),
                cluster_urls: None,
                on_shared_error: SharedErrorPolicy::Refuse,
                fleet_size: None,
                key_prefix: Some("weir-test".to_owned()),
                lease_secs: None,
            };
            let account = RedisStore::new(&settings, None).unwrap().leased_account("m", LIMITS);
            let admitted = warm(&account, 100).await;
            let held = account.block_left().requests;
            (account, admitted, held)
        });
        // The process dies: its tasks stop, and nothing it holds runs again.
        runtime.shutdown_background();
        drop(account);
        (admitted, held)
    })
    .join()
    .unwrap();
    let reader = store(&server).redis_account("m", LIMITS);
    let reading = read_level(&reader).await;
    let used = RPM - reading.left;
    let refill = refilled(reading.answered - started, true);
    assert!(used <= admitted + held + 1, "lost more than the block: used {used}, admitted {admitted}, held {held}");
    assert!(used + refill >= admitted + held, "the block was lost, not returned: used {used}, refill {refill}");
    assert!(held <= RPM / BLOCK_SHARE_OF_LIMIT, "a block is at most the limit's share");
}

/// Three gateways, eight callers each, through their own gates, competing for
/// a drained bucket: in every half-second window the fleet admits at most the
/// bucket's refill plus one block per gateway (plus one waiting request per
/// caller that wakes as the refill reaches it), and in all no more than the
/// refill since the drain (no block was held then). (A drained bucket leases
/// little beyond each demand: the script runs then follow the limit's rate.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_gateways_stay_inside_the_stated_bound() {
    const GATEWAYS: u64 = 3;
    const CALLERS: u64 = 8;
    const WINDOW: Duration = Duration::from_millis(500);
    let server = RedisServer::start().await;
    let reader = store(&server).redis_account("m", LIMITS);
    let stores: Vec<_> = (0..GATEWAYS).map(|_| store(&server)).collect();
    let drained = drain(&reader).await;
    let until = drained.answered + Duration::from_millis(1_500);
    let grants = Arc::new(Mutex::new(Vec::new()));
    let mut callers = Vec::new();
    for store in &stores {
        let gate = ModelGate::new("m", store.account("m", LIMITS), None, None);
        for _ in 0..CALLERS {
            let (gate, grants) = (Arc::clone(&gate), Arc::clone(&grants));
            callers.push(tokio::spawn(async move {
                while Instant::now() < until {
                    let Ok(mut grant) = gate.admit(ONE, Some(until)).await else { break };
                    grant.mark_sent();
                    grants.lock().unwrap().push(Instant::now());
                }
            }));
        }
    }
    for caller in callers {
        caller.await.unwrap();
    }
    let mut grants = std::mem::take(&mut *grants.lock().unwrap());
    grants.sort();
    let admitted = grants.len() as u64;
    let since_drain = refilled(grants.last().copied().unwrap_or(until) - drained.sent, true);
    assert!(admitted <= since_drain + 1, "admitted {admitted}, the bucket refilled {since_drain}");
    assert!(admitted * 2 >= refilled(until - drained.answered, false), "the fleet kept up: {admitted}");
    let bound = refilled(WINDOW, true) + GATEWAYS * (RPM / BLOCK_SHARE_OF_LIMIT) + GATEWAYS * CALLERS;
    for (i, start) in grants.iter().enumerate() {
        let within = grants[i..].iter().take_while(|at| **at < *start + WINDOW).count() as u64;
        assert!(within <= bound, "{within} admitted in a window from {start:?}, bound {bound}");
    }
}

/// Under a limit the callers do not reach, a gateway's 32 callers run a
/// script for a small fraction of their calls.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn blocks_cut_the_script_runs_far_below_one_per_call() {
    const CALLS: u64 = 20_000;
    let server = RedisServer::start().await;
    let limits = Limits { rpm: Some(600_000_000), tpm: Some(600_000_000_000) };
    let gate = ModelGate::new("m", store(&server).account("m", limits), None, None);
    let call = move || {
        let gate = Arc::clone(&gate);
        async move { gate.admit(Demand { requests: 1, tokens: 100 }, None).await.unwrap().mark_sent() }
    };
    let scripts = server.script_runs_during(32, CALLS / 32, call).await;
    assert!(scripts * 50 < CALLS, "{scripts} script runs for {CALLS} admitted calls");
}

/// While Redis is out, a block still held is spent (it was taken from the
/// shared bucket), then the policy applies; a give-back Redis does not take
/// empties the block without waiting on Redis, and sharing comes back.
#[tokio::test]
async fn an_outage_spends_the_held_block_then_takes_the_policy() {
    let mut server = RedisServer::start().await;
    let gateway = store(&server);
    let account = gateway.leased_account("m", LIMITS);
    let kept = gateway.leased_account("k", LIMITS);
    warm(&account, 50).await;
    warm(&kept, 50).await;
    let held = account.block_left().requests;
    server.stop();
    for _ in 0..held {
        assert_eq!(account.try_take(ONE).await, Verdict::Granted, "the held block admits without Redis");
    }
    assert_eq!(account.try_take(ONE).await, Verdict::Unavailable, "then the refuse policy");
    assert_eq!(account.block_left(), Demand::default());
    gateway.give_back().await;
    assert_eq!(kept.block_left(), Demand::default(), "given up while Redis is out");
    server.resume().await;
    let back = Instant::now() + Duration::from_secs(10);
    while account.try_take(ONE).await != Verdict::Granted {
        assert!(Instant::now() < back, "sharing never came back");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A bulk take (leaving the interactive share) is never admitted from a
/// block: it asks the shared bucket, whose reserve counts the blocks as spent.
#[tokio::test]
async fn a_bulk_take_checks_the_reserve_in_redis_not_the_block() {
    let server = RedisServer::start().await;
    let account = store(&server).leased_account("m", LIMITS);
    warm(&account, 100).await;
    let held = account.block_left();
    let before = server.script_runs().await;
    assert_eq!(account.try_take_reserving(ONE, InteractiveShare::DEFAULT).await, Verdict::Granted);
    assert_eq!(server.script_runs().await - before, 1, "one script run");
    assert_eq!(account.block_left(), held, "the block untouched");
}

/// A demand above a limit is refused as a per-call take refuses it, and the
/// lease that found out gave the block's remainder back in the same run.
#[tokio::test]
async fn a_demand_that_never_fits_is_refused_and_the_block_given_back() {
    let server = RedisServer::start().await;
    let (gateway, other) = (store(&server), store(&server));
    let limits = Limits { rpm: Some(RPM), tpm: Some(1_000) };
    let account = gateway.leased_account("m", limits);
    let reader = other.redis_account("m", limits);
    warm(&account, 100).await;
    let held = account.block_left().requests;
    let before = drain(&reader).await;
    let verdict = account.try_take(Demand { requests: 1, tokens: 1_001 }).await;
    let Verdict::Never(shortfall) = verdict else { panic!("{verdict:?}") };
    assert_eq!((shortfall.axis, shortfall.demand, shortfall.limit), (weir_host::admission::Axis::Tokens, 1_001, 1_000));
    assert_eq!(account.block_left(), Demand::default());
    let after = read_level(&reader).await;
    assert_returned(&before, &after, held);
}
