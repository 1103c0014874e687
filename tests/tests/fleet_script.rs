//! The fleet's admission script (`host/src/fleet/account.lua`) in a real
//! `redis-server`, against the in-process arithmetic (`AccountState`): for the
//! same limits, demands, signals and clock, every take, forecast, give and
//! throttle step answers the same, to the nanosecond. Plus the policies when
//! Redis is out and back.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use proptest::prelude::*;
use proptest::test_runner::{Config as RunnerConfig, TestCaseError, TestRunner};
use tokio::time::Instant;
use weir_host::admission::{
    AccountState, Demand, Feedback, InProcessAccount, InteractiveShare, Limits, RateStore, Verdict,
};
use weir_host::fleet::{FleetSettings, RedisStore, ScriptTime, ScriptVerdict, SharedErrorPolicy};
use weir_tests::RedisServer;

/// The script's clock starts here (any instant after 1970 would do).
const BASE_SECONDS: u64 = 1_800_000_000;

fn store(server: &RedisServer, policy: SharedErrorPolicy, fleet_size: Option<u32>) -> RedisStore {
    let settings = FleetSettings {
        redis_url: Some(server.url()),
        cluster_urls: None,
        on_shared_error: policy,
        fleet_size,
        key_prefix: Some("weir-test".to_owned()),
        lease_secs: None,
    };
    RedisStore::new(&settings, None).unwrap()
}

#[derive(Debug, Clone)]
enum Op {
    Take(Demand, bool),
    Forecast(Demand, bool),
    Give(Demand),
    Feedback(Feedback),
}

fn limit(range: std::ops::RangeInclusive<u64>) -> impl Strategy<Value = Option<u64>> {
    prop_oneof![1 => Just(None), 4 => range.prop_map(Some)]
}

fn limits() -> impl Strategy<Value = Limits> {
    // Token limits up to a billion per minute: levels far beyond 2^53 units.
    (limit(1..=600), prop_oneof![limit(1..=20_000), limit(1..=1_000_000_000)])
        .prop_map(|(rpm, tpm)| Limits { rpm, tpm })
}

fn demand() -> impl Strategy<Value = Demand> {
    (0..=3u64, prop_oneof![0..=50u64, 0..=30_000u64, 0..=2_000_000_000u64])
        .prop_map(|(requests, tokens)| Demand { requests, tokens })
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        5 => (demand(), any::<bool>()).prop_map(|(d, bulk)| Op::Take(d, bulk)),
        1 => (demand(), any::<bool>()).prop_map(|(d, bulk)| Op::Forecast(d, bulk)),
        1 => demand().prop_map(Op::Give),
        1 => (0..=3u32).prop_map(|w| Op::Feedback(Feedback::Backpressure(w))),
        2 => Just(Op::Feedback(Feedback::Success)),
    ]
}

/// How far the clock moves before an operation: often not at all, often a
/// fraction of a second, sometimes past a full refill or the five quiet minutes.
fn advance() -> impl Strategy<Value = u64> {
    prop_oneof![
        3 => Just(0u64),
        4 => 0..2_000_000_000u64,
        1 => 0..400_000_000_000u64,
    ]
}

fn share(bulk: bool) -> InteractiveShare {
    if bulk { InteractiveShare::new(0.3).unwrap() } else { InteractiveShare::NONE }
}

fn script_time(offset: u64) -> ScriptTime {
    ScriptTime { seconds: BASE_SECONDS + offset / 1_000_000_000, nanos: (offset % 1_000_000_000) as u32 }
}

static CASE: AtomicU64 = AtomicU64::new(0);

async fn same_answers(store: &RedisStore, limits: Limits, ops: Vec<(u64, Op)>) -> Result<(), TestCaseError> {
    let key = format!("case-{}", CASE.fetch_add(1, Ordering::SeqCst));
    let account = store.redis_account(&key, limits);
    let start = Instant::now();
    let mut local: AccountState = InProcessAccount::new(limits, start).snapshot();
    let mut offset = 0u64;
    for (step, (advance, op)) in ops.into_iter().enumerate() {
        offset += advance;
        let (now, at) = (start + Duration::from_nanos(offset), Some(script_time(offset)));
        match op {
            Op::Take(demand, bulk) => {
                let expected = match local.try_take_reserving(demand, share(bulk), now) {
                    Verdict::Granted => ScriptVerdict::Granted,
                    Verdict::NotBefore(then) => ScriptVerdict::Wait(then - now),
                    Verdict::Never(shortfall) => ScriptVerdict::Never(shortfall),
                    Verdict::Unavailable => unreachable!("the in-process account always answers"),
                };
                let got = account.take_at(demand, share(bulk), at).await.unwrap();
                prop_assert_eq!(&got, &expected, "step {} take {:?} bulk {}", step, demand, bulk);
                if got == ScriptVerdict::Granted {
                    // What the take left, as the gateway reads it to choose a deployment.
                    let stretch = local.throttle.stretch_tenths();
                    let left = |bucket: &Option<weir_host::admission::Bucket>| {
                        bucket.as_ref().map(|bucket| bucket.level(now, stretch))
                    };
                    let expected = (left(&local.requests), left(&local.tokens));
                    prop_assert_eq!(account.last_left(), Some(expected), "step {} levels after the take", step);
                }
            }
            Op::Forecast(demand, bulk) => {
                // A forecast is asked only for demands each of which fits (a
                // queue's): a larger one was refused as `Never` before.
                let fit = |amount: u64, limit: Option<u64>| limit.map_or(amount, |limit| amount.min(limit));
                let demand =
                    Demand { requests: fit(demand.requests, limits.rpm), tokens: fit(demand.tokens, limits.tpm) };
                let expected = local.forecast_reserving(demand, share(bulk), now) - now;
                let got = account.forecast_at(demand, share(bulk), at).await.unwrap();
                prop_assert_eq!(got, expected, "step {} forecast {:?}", step, demand);
            }
            Op::Give(demand) => {
                local.give(demand, now);
                account.give_at(demand, at).await.unwrap();
            }
            Op::Feedback(signal) => {
                local.feedback(signal, now);
                let tenths = account.feedback_at(signal, at).await.unwrap();
                prop_assert_eq!(tenths as f64 / 10.0, local.throttle.coefficient(), "step {} {:?}", step, signal);
            }
        }
    }
    Ok(())
}

#[test]
fn the_script_answers_what_the_in_process_account_answers() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let server = runtime.block_on(RedisServer::start());
    let store = runtime.block_on(async { store(&server, SharedErrorPolicy::Refuse, None) });
    let mut runner = TestRunner::new(RunnerConfig { cases: 128, ..RunnerConfig::default() });
    let cases = (limits(), proptest::collection::vec((advance(), op()), 1..40));
    runner.run(&cases, |(limits, ops)| runtime.block_on(same_answers(&store, limits, ops))).unwrap();
}

/// Two gateways' accounts for one model share one bucket: what one takes, the
/// other cannot; and the throttle one of them feeds slows both.
#[tokio::test]
async fn two_gateways_share_one_bucket_and_one_throttle() {
    let server = RedisServer::start().await;
    let limits = Limits { rpm: Some(10), tpm: None };
    let (a, b) = (store(&server, SharedErrorPolicy::Refuse, None), store(&server, SharedErrorPolicy::Refuse, None));
    let (a, b) = (a.account("m", limits), b.account("m", limits));
    let one = Demand { requests: 1, tokens: 0 };
    for i in 0..10 {
        let account = if i % 2 == 0 { &a } else { &b };
        assert_eq!(account.try_take(one).await, Verdict::Granted, "take {i}");
    }
    assert!(matches!(a.try_take(one).await, Verdict::NotBefore(_)), "the ten were the fleet's ten");
    assert!(matches!(b.try_take(one).await, Verdict::NotBefore(_)));
    a.feedback(Feedback::Backpressure(3)).await;
    assert_eq!(b.coefficient().await, 1.5, "an overload seen by one gateway slows the other");
}

/// Redis stopped mid-use: `refuse` answers Unavailable, `local` admits this
/// gateway's share alone; once Redis is back the accounts are shared again,
/// without a restart.
#[tokio::test]
async fn an_outage_takes_the_policy_and_the_return_restores_sharing() {
    let mut server = RedisServer::start().await;
    let limits = Limits { rpm: Some(30), tpm: None };
    let one = Demand { requests: 1, tokens: 0 };
    let refusing = store(&server, SharedErrorPolicy::Refuse, None).account("m", limits);
    let local = store(&server, SharedErrorPolicy::Local, Some(3)).account("m", limits);
    assert_eq!(refusing.try_take(one).await, Verdict::Granted);

    server.stop();
    assert_eq!(refusing.try_take(one).await, Verdict::Unavailable);
    let mut granted = 0;
    while local.try_take(one).await == Verdict::Granted {
        granted += 1;
        assert!(granted <= 10, "the local share is a third of 30");
    }
    assert_eq!(granted, 10);

    server.resume().await;
    // The first tries after the return may meet the connection still
    // reconnecting; each failure waits out the retry interval.
    let back = Instant::now() + Duration::from_secs(10);
    while refusing.try_take(one).await != Verdict::Granted {
        assert!(Instant::now() < back, "sharing never came back");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let mut shared = 1;
    while refusing.try_take(one).await == Verdict::Granted {
        shared += 1;
        assert!(shared <= 32, "more than the fleet's bucket");
    }
    // The restarted server is empty: a fresh full bucket of 30 (the seconds
    // spent reconnecting may refill one or two).
    assert!((30..=32).contains(&shared), "shared again after the return: {shared}");
    assert!(matches!(local.try_take(one).await, Verdict::NotBefore(_)), "the local policy reads the shared bucket too");
}

/// Permits are leases: held up to the open count fleet-wide, released at
/// once, renewed while held, and expired when no gateway renews them.
#[tokio::test]
async fn permits_are_leases_that_expire_unless_renewed() {
    use weir_host::admission::{PermitPool, PermitVerdict};
    let server = RedisServer::start().await;
    let settings = |lease_secs| FleetSettings {
        redis_url: Some(server.url()),
        cluster_urls: None,
        on_shared_error: SharedErrorPolicy::Refuse,
        fleet_size: None,
        key_prefix: Some("weir-test".to_owned()),
        lease_secs: Some(lease_secs),
    };
    let (a, b) = (RedisStore::new(&settings(3), None).unwrap(), RedisStore::new(&settings(3), None).unwrap());
    let (a, b) = (a.redis_permits("m", 2), b.redis_permits("m", 2));
    let PermitVerdict::Acquired(first) = a.acquire(2).await else { panic!("a permit was free") };
    assert!(matches!(b.acquire(2).await, PermitVerdict::Acquired(_)));
    assert_eq!(a.acquire(2).await, PermitVerdict::Full, "two of two held across both gateways");
    assert_eq!(b.held().await.unwrap(), 2);
    a.release(first).await;
    assert!(matches!(a.acquire(2).await, PermitVerdict::Acquired(_)), "a release frees one at once");

    // Both pools renew their leases every second: after two lease times
    // they are still held. Dropped pools renew nothing: the leases expire.
    tokio::time::sleep(Duration::from_secs(6)).await;
    assert_eq!(a.held().await.unwrap(), 2, "renewed while held");
    drop(b);
    let watcher = RedisStore::new(&settings(3), None).unwrap().redis_permits("m", 2);
    drop(a);
    tokio::time::sleep(Duration::from_millis(3_500)).await;
    assert_eq!(watcher.held().await.unwrap(), 0, "nobody renewed them: they expired");
}

/// A gateway's budget book with one budget, `ana`'s 90 tokens a day, shared
/// through `server` under `policy`.
fn ana_daily_90(
    server: &RedisServer,
    ana: &weir_host::budget::Scope,
    policy: SharedErrorPolicy,
    fleet_size: Option<u32>,
) -> weir_host::budget::BudgetBook {
    use weir_host::budget::{BudgetBook, Limits, SystemClock, Timezone};
    let limits =
        std::collections::HashMap::from([(ana.clone(), Limits { daily_tokens: Some(90), ..Limits::default() })]);
    let book = BudgetBook::new(limits, Timezone::UTC, std::sync::Arc::new(SystemClock));
    let fleet = store(server, policy, fleet_size);
    book.share_through(fleet.budgets(), fleet.fleet_size());
    book
}

/// Budgets shared through Redis: two books (two gateways) hold against one
/// account, whole or nothing; with Redis out, `refuse` refuses and `local`
/// holds this gateway's share in memory.
#[tokio::test]
async fn budget_holds_are_shared_and_an_outage_takes_the_policy() {
    use weir_host::budget::{Scope, Spend};
    let mut server = RedisServer::start().await;
    let ana = Scope::Member("ana".to_owned());
    let scopes = [ana.clone()];
    let book = |policy, fleet_size| ana_daily_90(&server, &ana, policy, fleet_size);
    let (a, b) = (book(SharedErrorPolicy::Refuse, None), book(SharedErrorPolicy::Local, Some(3)));
    let worst = Spend { tokens: 40, usd: None };
    let first = a.take(&scopes, worst, "m").await.unwrap();
    let second = b.take(&scopes, worst, "m").await.unwrap();
    let third = a.take(&scopes, worst, "m").await.unwrap_err();
    assert_eq!(third.category(), weir_host::Category::BudgetExhausted, "80 of 90 held across both: {third}");
    first.settle(Spend { tokens: 10, usd: None });
    tokio::time::sleep(Duration::from_millis(200)).await;
    let status = a.current_status().await;
    assert_eq!(status[0].spent, weir_host::budget::Amount::Tokens(10));
    assert_eq!(status[0].held, weir_host::budget::Amount::Tokens(40));
    drop(second);

    server.stop();
    let refused = a.take(&scopes, worst, "m").await.unwrap_err();
    assert_eq!(refused.category(), weir_host::Category::SharedStateUnavailable, "{refused}");
    let small = Spend { tokens: 30, usd: None };
    let local = b.take(&scopes, small, "m").await.expect("a third of 90, in memory");
    let over = b.take(&scopes, small, "m").await.unwrap_err();
    assert_eq!(over.category(), weir_host::Category::BudgetExhausted, "{over}");
    drop(local);
}

/// A fleet hold topped up before a call's next attempt (issue 44): one more
/// atomic hold of the difference on the same Redis accounts, whole or
/// nothing, so another gateway sees it; settle and release move the total.
/// While Redis is out the policy decides, as for a first hold: `refuse` is
/// `shared_state_unavailable`, `local` holds the difference against this
/// gateway's share.
#[tokio::test]
async fn a_fleet_hold_is_topped_up_atomically_and_settles_the_total() {
    use weir_host::budget::{Amount, Scope, Spend};
    let mut server = RedisServer::start().await;
    let ana = Scope::Member("ana".to_owned());
    let scopes = [ana.clone()];
    let book = |policy, fleet_size| ana_daily_90(&server, &ana, policy, fleet_size);
    let tokens = |tokens| Spend { tokens, usd: None };
    let (a, b) = (book(SharedErrorPolicy::Refuse, None), book(SharedErrorPolicy::Local, Some(3)));
    let mut hold = a.take(&scopes, tokens(20), "m").await.unwrap();
    assert_eq!(hold.top_up(tokens(50), "m").await.unwrap(), Some(tokens(30)));
    assert_eq!(b.current_status().await[0].held, Amount::Tokens(50), "the other gateway sees the top-up");
    let other = b.take(&scopes, tokens(40), "m").await.expect("40 of the 40 left");
    let refused = hold.top_up(tokens(51), "m").await.unwrap_err();
    assert_eq!(refused.category(), weir_host::Category::BudgetExhausted, "{refused}");
    assert_eq!(a.current_status().await[0].held, Amount::Tokens(90), "a refused top-up adds nothing");
    drop(other);
    hold.settle(tokens(45));
    tokio::time::sleep(Duration::from_millis(200)).await;
    let status = a.current_status().await;
    assert_eq!((status[0].spent, status[0].held), (Amount::Tokens(45), Amount::Tokens(0)), "the whole 50 moved");

    let mut refusing = a.take(&scopes, tokens(10), "m").await.unwrap();
    let mut local = b.take(&scopes, tokens(10), "m").await.unwrap();
    server.stop();
    let refused = refusing.top_up(tokens(20), "m").await.unwrap_err();
    assert_eq!(refused.category(), weir_host::Category::SharedStateUnavailable, "{refused}");
    assert_eq!(local.top_up(tokens(40), "m").await.unwrap(), Some(tokens(30)), "a third of 90, in memory");
    let over = local.top_up(tokens(41), "m").await.unwrap_err();
    assert_eq!(over.category(), weir_host::Category::BudgetExhausted, "{over}");
    assert_eq!(local.held(), tokens(40));
    drop((refusing, local));
}

/// A gateway skips sending successes only while the shared coefficient is 0;
/// one raised by another gateway is learnt at the next take, and this
/// gateway's successes walk it back again.
#[tokio::test]
async fn successes_walk_back_a_coefficient_another_gateway_raised() {
    let server = RedisServer::start().await;
    let limits = Limits { rpm: Some(1_000), tpm: None };
    let (a, b) = (store(&server, SharedErrorPolicy::Refuse, None), store(&server, SharedErrorPolicy::Refuse, None));
    let (a, b) = (a.account("m", limits), b.account("m", limits));
    let one = Demand { requests: 1, tokens: 0 };
    assert_eq!(b.try_take(one).await, Verdict::Granted, "b has seen the coefficient at 0");
    a.feedback(Feedback::Backpressure(3)).await;
    assert_eq!(b.try_take(one).await, Verdict::Granted, "b learns 1.5 here");
    for _ in 0..3 {
        b.feedback(Feedback::Success).await;
    }
    assert_eq!(a.coefficient().await, 1.3, "b's third success reached the shared throttle");
}

/// With a spend source, a hold never takes a missing account as empty: it is
/// seeded first, once (an account that exists is left as it is), and a seed
/// that cannot be read takes the outage policy.
#[tokio::test]
async fn a_missing_budget_account_is_seeded_before_it_is_held() {
    use std::collections::HashMap;
    use std::sync::Arc;
    use weir_host::budget::{BudgetBook, Limits as Budget, Scope, Spend, SystemClock, Timezone};
    use weir_host::fleet::SpendSource;

    struct Spent(Result<u64, &'static str>);
    impl SpendSource for Spent {
        fn spent_since(&self, _: &Scope, _: std::time::SystemTime) -> Result<Spend, String> {
            self.0.map(|tokens| Spend { tokens, usd: Some(0.0) }).map_err(str::to_owned)
        }
    }

    let server = RedisServer::start().await;
    let book = |member: &str, spent: Result<u64, &'static str>| {
        let scope = Scope::Member(member.to_owned());
        let limits = HashMap::from([(scope, Budget { daily_tokens: Some(100), ..Budget::default() })]);
        let book = BudgetBook::new(limits, Timezone::UTC, Arc::new(SystemClock));
        let fleet = store(&server, SharedErrorPolicy::Refuse, None);
        book.share_through(fleet.budgets().seeded_from(Arc::new(Spent(spent))), fleet.fleet_size());
        book
    };
    let ana = [Scope::Member("ana".to_owned())];
    let seeded = book("ana", Ok(70));
    let refused = seeded.take(&ana, Spend { tokens: 40, usd: None }, "m").await.unwrap_err();
    assert_eq!(refused.category(), weir_host::Category::BudgetExhausted, "70 spent before: {refused}");
    let held = seeded.take(&ana, Spend { tokens: 30, usd: None }, "m").await.expect("30 of the 30 left");
    let other = book("ana", Ok(0));
    let refused = other.take(&ana, Spend { tokens: 10, usd: None }, "m").await.unwrap_err();
    assert_eq!(refused.category(), weir_host::Category::BudgetExhausted, "not seeded again: {refused}");
    drop(held);

    let unreadable = book("bo", Err("the fleet's ledger is down"));
    let bo = [Scope::Member("bo".to_owned())];
    let refused = unreadable.take(&bo, Spend { tokens: 1, usd: None }, "m").await.unwrap_err();
    assert_eq!(refused.category(), weir_host::Category::SharedStateUnavailable, "{refused}");
}
