//! The fleet on a real three-master Redis Cluster (`[fleet] cluster_urls`,
//! `tests/src/redis_cluster.rs`): two gateways' stores sharing it admit
//! exactly one `rpm` limit; the accounts of different models land on every
//! node; budgets held across a call's key, member and team (one script per
//! scope) hold exactly and leave nothing held by a refused call; permits
//! never over-admit; an admin notice reaches the other gateway; a slot moved
//! mid-use (`ASK`, then `MOVED`) is followed with the bucket's level; a node
//! stopped takes `on_shared_error` (through a real gateway: `refuse` answers
//! `shared_state_unavailable`) and its return restores sharing without a
//! restart.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::time::Instant;
use weir_host::admission::{Demand, InteractiveShare, Limits, ModelGate, RateAccount, RateStore, Verdict};
use weir_host::budget::{Amount, BudgetBook, Limits as Budget, Scope, Spend, SystemClock, Timezone};
use weir_host::fleet::{FleetMeter, FleetSettings, RedisStore, SharedErrorPolicy};
use weir_tests::{FakeUpstream, Gateway, RedisCluster};

const PREFIX: &str = "weir-test";
const ONE: Demand = Demand { requests: 1, tokens: 0 };

fn settings(cluster: &RedisCluster) -> FleetSettings {
    FleetSettings {
        redis_url: None,
        cluster_urls: Some(cluster.urls()),
        on_shared_error: SharedErrorPolicy::Refuse,
        fleet_size: None,
        key_prefix: Some(PREFIX.to_owned()),
        lease_secs: None,
    }
}

fn store(cluster: &RedisCluster) -> RedisStore {
    RedisStore::new(&settings(cluster), None).unwrap()
}

/// Counts the shared state's failures, as the gateway's metrics do.
#[derive(Default)]
struct Failures(AtomicUsize);

impl FleetMeter for Failures {
    fn shared_state_failed(&self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// Two stores (two gateways) on one cluster take from one bucket: of 40
/// takes at once against `rpm = 20`, exactly 20 are granted, as one gateway
/// alone would grant.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_gateways_on_a_cluster_admit_exactly_one_rpm_limit() {
    let cluster = RedisCluster::start().await;
    let limits = Limits { rpm: Some(20), tpm: None };
    let (a, b) = (store(&cluster), store(&cluster));
    let accounts: [Arc<dyn RateAccount>; 2] = [a.account("model:chat", limits), b.account("model:chat", limits)];
    let takes = (0..40).map(|i| accounts[i % 2].try_take(ONE));
    let verdicts = futures_util::future::join_all(takes).await;
    let granted = verdicts.iter().filter(|verdict| **verdict == Verdict::Granted).count();
    assert_eq!(granted, 20, "{verdicts:?}");
    assert!(verdicts.iter().all(|verdict| matches!(verdict, Verdict::Granted | Verdict::NotBefore(_))), "{verdicts:?}");
}

/// Each model's account is tagged by its model, so thirty models' accounts
/// spread over all three nodes; each key is on the node its slot names.
#[tokio::test]
async fn the_accounts_of_different_models_spread_over_the_nodes() {
    let cluster = RedisCluster::start().await;
    let fleet = store(&cluster);
    let limits = Limits { rpm: Some(100), tpm: None };
    for model in 0..30 {
        let account = fleet.redis_account(&format!("model:m{model}"), limits);
        assert_eq!(account.try_take(ONE).await, Verdict::Granted);
    }
    let mut on_nodes = Vec::new();
    for node in 0..weir_tests::redis_cluster::NODES {
        on_nodes.push(cluster.keys_on(node).await);
    }
    assert_eq!(on_nodes.iter().sum::<u64>(), 30, "{on_nodes:?}");
    assert!(on_nodes.iter().all(|keys| *keys > 0), "every node holds some models' accounts: {on_nodes:?}");
    for model in [0, 7, 29] {
        let key = format!("{PREFIX}:account:{{model:m{model}}}");
        let mut connection = cluster.node_connection(cluster.node_of(&key).await).await;
        let exists: bool = redis::cmd("EXISTS").arg(&key).query_async(&mut connection).await.unwrap();
        assert!(exists, "{key} is on the node serving its slot");
    }
}

/// `worst` held against `scopes` by `books` at once, `attempts` times: how many were held.
async fn hold_at_once(books: &[BudgetBook], scopes: &[Scope], attempts: usize) -> Vec<weir_host::budget::Hold> {
    let worst = Spend { tokens: 10, usd: None };
    let takes = (0..attempts).map(|i| books[i % books.len()].take(scopes, worst, "m"));
    let answers = futures_util::future::join_all(takes).await;
    let mut held = Vec::new();
    for answer in answers {
        match answer {
            Ok(hold) => held.push(hold),
            Err(error) => assert_eq!(error.category(), weir_host::Category::BudgetExhausted, "{error}"),
        }
    }
    held
}

/// Each scope's tokens held now, in the fleet's accounts.
async fn held(book: &BudgetBook) -> HashMap<String, u64> {
    let status = book.current_status().await;
    status
        .iter()
        .map(|budget| match budget.held {
            Amount::Tokens(tokens) => (budget.scope.to_string(), tokens),
            Amount::Usd(usd) => panic!("a token budget held {usd} USD"),
        })
        .collect()
}

/// A call held against its key's, member's and team's daily budgets, from
/// two gateways at once, on a cluster where each scope is its own slot:
/// exactly as many are held as the binding budget allows, first a key's
/// (the first scope), then a team's (the last), and every scope holds
/// exactly what the held calls hold: a call refused on one scope left
/// nothing on the others. (The other scopes have room for every attempt: a
/// refused call's holds on them, given back within its round trip, may
/// refuse a concurrent call there, which is the bound this loosens.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn budgets_across_key_member_and_team_hold_exactly_on_a_cluster() {
    let cluster = RedisCluster::start().await;
    let (k1, k2) = (Scope::Key("k1".to_owned()), Scope::Key("k2".to_owned()));
    let ana = Scope::Member("ana".to_owned());
    let (red, blue) = (Scope::Team("red".to_owned()), Scope::Team("blue".to_owned()));
    let daily = |tokens| Budget { daily_tokens: Some(tokens), ..Budget::default() };
    let limits = HashMap::from([
        (k1.clone(), daily(60)),
        (k2.clone(), daily(1_000)),
        (ana.clone(), daily(1_000)),
        (red.clone(), daily(1_000)),
        (blue.clone(), daily(20)),
    ]);
    let book = || {
        let book = BudgetBook::new(limits.clone(), Timezone::UTC, Arc::new(SystemClock));
        let fleet = store(&cluster);
        book.share_through(fleet.budgets(), fleet.fleet_size());
        book
    };
    let books = [book(), book()];

    let first = hold_at_once(&books, &[k1.clone(), ana.clone(), red.clone()], 20).await;
    assert_eq!(first.len(), 6, "k1's 60 binds");
    let now = held(&books[1]).await;
    for scope in [&k1, &ana, &red] {
        assert_eq!(now[&scope.to_string()], 60, "{scope}: {now:?}");
    }

    let second = hold_at_once(&books, &[k2.clone(), ana.clone(), blue.clone()], 20).await;
    assert_eq!(second.len(), 2, "blue's 20 binds");
    let now = held(&books[0]).await;
    assert_eq!((now[&k2.to_string()], now[&ana.to_string()], now[&blue.to_string()]), (20, 80, 20), "{now:?}");
    assert_eq!(now[&red.to_string()], 60, "{now:?}");

    drop((first, second));
    let released = Instant::now() + Duration::from_secs(10);
    while held(&books[0]).await.values().any(|tokens| *tokens > 0) {
        assert!(Instant::now() < released, "holds were given back: {:?}", held(&books[0]).await);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Two gateways of 16 callers each on a model whose `max_concurrency` is 32
/// (each keeping up to two idle): never more than 32 calls in flight.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn permits_on_a_cluster_never_over_admit() {
    const MAX: u32 = 32;
    let cluster = RedisCluster::start().await;
    let stores = [store(&cluster), store(&cluster)];
    let (in_flight, most) = (Arc::new(AtomicU32::new(0)), Arc::new(AtomicU32::new(0)));
    let until = Instant::now() + Duration::from_millis(1_500);
    let mut callers = Vec::new();
    for store in &stores {
        let account = store.account("model:m", Limits::default());
        let pool = store.redis_permits("model:m", MAX);
        let gate = ModelGate::with_permits("m", account, Some(MAX), None, InteractiveShare::NONE, Some(Arc::new(pool)));
        for caller in 0..16u64 {
            let (gate, in_flight, most) = (Arc::clone(&gate), Arc::clone(&in_flight), Arc::clone(&most));
            callers.push(tokio::spawn(async move {
                while Instant::now() < until {
                    let mut grant = gate.admit(Demand::default(), None).await.unwrap();
                    grant.mark_sent();
                    let now = in_flight.fetch_add(1, Ordering::SeqCst) + 1;
                    most.fetch_max(now, Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_millis(1 + caller % 3)).await;
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
    assert!(most <= MAX, "{most} calls in flight across the fleet, max_concurrency {MAX}");
    assert!(most > 16, "both gateways' callers were in flight together: {most}");
    tokio::time::sleep(Duration::from_millis(200)).await;
    for store in &stores {
        store.give_back().await;
    }
    assert_eq!(store(&cluster).per_call_permits("model:m", MAX).held().await.unwrap(), 0, "every permit given back");
}

/// A change one gateway announces reaches the other, subscribed through
/// one of the cluster's nodes.
#[tokio::test]
async fn an_admin_notice_reaches_the_other_gateway_through_a_cluster() {
    let cluster = RedisCluster::start().await;
    let (announcer, listener) = (store(&cluster).admin_notices(), store(&cluster).admin_notices());
    let (sender, mut heard) = tokio::sync::mpsc::unbounded_channel();
    let listening = tokio::spawn(async move {
        listener
            .listen(move |seq| {
                let _ = sender.send(seq);
            })
            .await;
    });
    // The subscription is made in the background: announce until one is heard.
    let deadline = Instant::now() + Duration::from_secs(10);
    let seq = loop {
        announcer.announce(7).await;
        if let Ok(Some(seq)) = tokio::time::timeout(Duration::from_millis(200), heard.recv()).await {
            break seq;
        }
        assert!(Instant::now() < deadline, "no notice was heard");
    };
    assert_eq!(seq, 7);
    listening.abort();
}

/// A model's slot moved to another node while two gateways use it: first
/// its key alone (the old node answers `ASK`), then the slot (`MOVED`). The
/// client follows both; nothing fails, and the bucket moved with its level:
/// the fleet still grants exactly `rpm`.
#[tokio::test]
async fn a_slot_moved_mid_use_is_followed_with_the_buckets_level() {
    let cluster = RedisCluster::start().await;
    let failures = Arc::new(Failures::default());
    let gateway = RedisStore::new(&settings(&cluster), Some(failures.clone())).unwrap();
    let limits = Limits { rpm: Some(10), tpm: None };
    let account = gateway.redis_account("model:chat", limits);
    let key = format!("{PREFIX}:account:{{model:chat}}");
    for take in 0..4 {
        assert_eq!(account.try_take(ONE).await, Verdict::Granted, "take {take}");
    }
    let (slot, from) = (cluster.slot_of(&key).await, cluster.node_of(&key).await);
    let to = (from + 1) % weir_tests::redis_cluster::NODES;
    cluster.begin_moving(slot, to).await;
    for take in 4..7 {
        assert_eq!(account.try_take(ONE).await, Verdict::Granted, "take {take}, through ASK");
    }
    cluster.finish_moving(slot, to).await;
    assert_eq!(cluster.node_of(&key).await, to);
    for take in 7..10 {
        assert_eq!(account.try_take(ONE).await, Verdict::Granted, "take {take}, after MOVED");
    }
    assert!(matches!(account.try_take(ONE).await, Verdict::NotBefore(_)), "the level moved with the key: 10 taken");
    let other = store(&cluster).redis_account("model:chat", limits);
    assert!(matches!(other.try_take(ONE).await, Verdict::NotBefore(_)), "a new gateway finds it on the new node");
    assert_eq!(failures.0.load(Ordering::SeqCst), 0, "a redirect is not an outage");
}

const OPS: &str = "weir-ops-token-0123456789abcdef";

fn gateway_config(upstream: &FakeUpstream, fleet: &str) -> String {
    format!(
        r#"
[[model]]
id = "chat"
provider = "openai-compatible"
endpoint = "{url}"
max_output_tokens = 100
context_window = 10000
output_tokens = 10
max_retries = 0
rpm = 600

[[key]]
id = "ops-key"
member = "ops"
hash = "{ops}"
admin = true

[ledger]
enabled = false

[fleet]
key_prefix = "{PREFIX}"
{fleet}
"#,
        url = upstream.base_url(),
        ops = weir_host::identity::hash_of(OPS),
    )
}

async fn call(client: &reqwest::Client, gateway: &Gateway) -> (u16, Value) {
    let body = json!({"model": "chat", "messages": [{"role": "user", "content": "hi"}]});
    let response = client.post(gateway.url("/v1/chat/completions")).bearer_auth(OPS).json(&body).send().await.unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

/// A real gateway on the cluster (`cluster_urls` in its TOML, shown without
/// credentials at start): the node serving its model's account stopped,
/// `refuse` answers `shared_state_unavailable` and sends nothing; the node
/// back, calls are shared again without a restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_node_takes_the_policy_and_its_return_restores_sharing() {
    let mut cluster = RedisCluster::start().await;
    let upstream = FakeUpstream::start().await;
    let gateway = Gateway::start(&gateway_config(&upstream, &cluster.urls_toml())).await;
    gateway.wait_for_stderr("shared_limits=cluster [redis://127.0.0.1:", Duration::from_secs(5)).await;
    let client = reqwest::Client::new();
    assert_eq!(call(&client, &gateway).await.0, 200);

    let node = cluster.node_of(&format!("{PREFIX}:account:{{model:chat}}")).await;
    cluster.stop(node);
    let refused = Instant::now() + Duration::from_secs(10);
    // Calls admitted from the gateway's leased block need no Redis: once it
    // is spent (or expired, within 1 s), the next lease meets the outage.
    let body = loop {
        let sent = upstream.request_count();
        let (status, body) = call(&client, &gateway).await;
        if status == 503 {
            assert_eq!(upstream.request_count(), sent, "a refused call sends nothing");
            break body;
        }
        assert_eq!(status, 200, "{body}");
        assert!(Instant::now() < refused, "the outage was never met");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(body["error"]["type"], "shared_state_unavailable", "{body}");
    gateway.wait_for_stderr("shared state unreachable", Duration::from_secs(5)).await;

    cluster.resume(node).await;
    let back = Instant::now() + Duration::from_secs(15);
    while call(&client, &gateway).await.0 != 200 {
        assert!(Instant::now() < back, "sharing never came back");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    gateway.wait_for_stderr("shared state reachable again", Duration::from_secs(5)).await;
}

/// `cluster_urls` that name no usable cluster are refused at start, typed,
/// without a password: an empty list, a URL the client cannot read, and
/// both `redis_url` and `cluster_urls`.
#[test]
fn cluster_settings_that_name_no_usable_cluster_are_refused() {
    use weir_host::fleet::{SettingsError, TargetError};
    let base = FleetSettings {
        redis_url: None,
        cluster_urls: Some(Vec::new()),
        on_shared_error: SharedErrorPolicy::Refuse,
        fleet_size: None,
        key_prefix: None,
        lease_secs: None,
    };
    let error = RedisStore::new(&base, None).unwrap_err();
    assert_eq!(error, SettingsError::Target(TargetError::NoClusterNode));
    let bad = FleetSettings {
        cluster_urls: Some(vec!["redis://127.0.0.1:7000".to_owned(), "redis://:pw-X9@".to_owned()]),
        ..base.clone()
    };
    let error = RedisStore::new(&bad, None).unwrap_err();
    assert!(
        matches!(&error, SettingsError::Target(TargetError::UnusableUrl { field: "cluster_urls", .. })),
        "{error:?}"
    );
    assert!(!error.to_string().contains("X9"), "{error}");
    let both = FleetSettings { redis_url: Some("redis://127.0.0.1:6379".to_owned()), ..bad };
    assert_eq!(RedisStore::new(&both, None).unwrap_err(), SettingsError::Target(TargetError::BothRedis));
}
