//! A fleet on one machine: three real `weir serve` processes sharing one real
//! `redis-server`, in front of one fake upstream that enforces the account's
//! requests per minute the way OpenAI does (and counts every 429 it answers).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use serde_json::{Value, json};
use weir_tests::{FakeUpstream, Gateway, RedisServer, openai_wire};

const OPS: &str = "weir-ops-token-0123456789abcdef";
/// The account's limit, in the catalog and at the fake upstream.
const RPM: u64 = 120;

fn config(upstream: &FakeUpstream, fleet: &str) -> String {
    config_with(upstream, &format!("rpm = {RPM}"), fleet)
}

fn config_with(upstream: &FakeUpstream, limits: &str, fleet: &str) -> String {
    gateway_config(upstream, limits, &format!("[ledger]\nenabled = false\n{fleet}"))
}

/// The model on the fake upstream with `limits`, the admin key, then `tail`.
fn gateway_config(upstream: &FakeUpstream, limits: &str, tail: &str) -> String {
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
max_queue = 1000
{limits}

[[key]]
id = "ops-key"
member = "ops"
hash = "{ops}"
admin = true

{tail}"#,
        url = upstream.base_url(),
        ops = weir_host::identity::hash_of(OPS),
    )
}

fn fleet_table(redis: &RedisServer, extra: &str) -> String {
    format!("\n[fleet]\nredis_url = \"{}\"\n{extra}\n", redis.url())
}

async fn start_three(config: &str) -> Vec<Gateway> {
    let mut gateways = Vec::new();
    for _ in 0..3 {
        gateways.push(Gateway::start(config).await);
    }
    gateways
}

async fn call(client: &reqwest::Client, gateway: &Gateway) -> (u16, Value) {
    let body = json!({"model": "chat", "messages": [{"role": "user", "content": "hi"}]});
    let response = client
        .post(gateway.url("/v1/chat/completions"))
        .bearer_auth(OPS)
        .json(&body)
        .timeout(Duration::from_secs(120))
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

/// `calls` calls spread round-robin over the gateways, `concurrency` at a time;
/// the statuses in order.
async fn spread(gateways: &[Gateway], calls: usize, concurrency: usize) -> Vec<u16> {
    let client = reqwest::Client::new();
    let next = std::sync::atomic::AtomicUsize::new(0);
    let workers = (0..concurrency).map(|_| async {
        let mut statuses = Vec::new();
        loop {
            let i = next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            if i >= calls {
                return statuses;
            }
            statuses.push(call(&client, &gateways[i % gateways.len()]).await.0);
        }
    });
    futures_util::future::join_all(workers).await.into_iter().flatten().collect()
}

/// The control: three gateways each admitting the whole limit send three
/// times too much, and the upstream answers 429s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_fleet_three_gateways_overspend_the_account() {
    let upstream = FakeUpstream::start().await;
    upstream.limit_requests_per_minute(RPM);
    let gateways = start_three(&config(&upstream, "")).await;
    let statuses = spread(&gateways, 180, 30).await;
    assert!(upstream.rate_limited_count() >= 50, "the upstream refused {}", upstream.rate_limited_count());
    assert!(statuses.iter().any(|status| *status != 200));
}

/// 1.5 times the account's minute across three gateways: every call admitted
/// in time, none refused by the upstream.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_gateways_sharing_redis_never_meet_a_429() {
    let redis = RedisServer::start().await;
    let upstream = FakeUpstream::start().await;
    upstream.limit_requests_per_minute(RPM);
    let gateways = start_three(&config(&upstream, &fleet_table(&redis, ""))).await;
    let statuses = spread(&gateways, 180, 30).await;
    assert_eq!(upstream.rate_limited_count(), 0, "the fleet sent more than the account allows");
    assert!(statuses.iter().all(|status| *status == 200), "{statuses:?}");
    assert_eq!(upstream.request_count(), 180);
}

/// The throttle coefficient a gateway reads from its `/metrics`.
async fn coefficient(gateway: &Gateway) -> f64 {
    let client = reqwest::Client::new();
    let text = client.get(gateway.url("/metrics")).bearer_auth(OPS).send().await.unwrap().text().await.unwrap();
    let line = text
        .lines()
        .find(|line| line.starts_with("weir_admission_throttle_coefficient{") && line.contains("model=\"chat\""))
        .unwrap_or_else(|| panic!("no throttle gauge in {text}"));
    line.rsplit(' ').next().unwrap().parse().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_429_seen_by_one_gateway_slows_the_other_two() {
    let redis = RedisServer::start().await;
    let upstream = FakeUpstream::start().await;
    let gateways = start_three(&config(&upstream, &fleet_table(&redis, ""))).await;
    upstream.push(openai_wire::rate_limited(1));
    let client = reqwest::Client::new();
    let (status, body) = call(&client, &gateways[0]).await;
    assert_eq!(status, 429, "{body}");
    let seen = coefficient(&gateways[0]).await;
    assert_eq!(seen, 0.5, "the 429 moved the throttle by its weight");
    assert_eq!(coefficient(&gateways[1]).await, seen);
    assert_eq!(coefficient(&gateways[2]).await, seen);
}

/// Redis stopped while the fleet serves: under `refuse` calls answer
/// `shared_state_unavailable` and nothing is sent; under `local` each gateway
/// admits its third alone. Redis back: calls are shared again, no restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_outage_takes_each_declared_policy_and_its_return_restores_sharing() {
    let mut redis = RedisServer::start().await;
    let upstream = FakeUpstream::start().await;
    let refusing = Gateway::start(&config(&upstream, &fleet_table(&redis, ""))).await;
    let local =
        Gateway::start(&config(&upstream, &fleet_table(&redis, "on_shared_error = \"local\"\nfleet_size = 3"))).await;
    let client = reqwest::Client::new();
    refusing.wait_for_stderr(&format!("shared_limits={} (Refuse when out)", redis.url()), Duration::from_secs(5)).await;
    local.wait_for_stderr("(Local when out)", Duration::from_secs(5)).await;
    assert_eq!(call(&client, &refusing).await.0, 200);
    assert_eq!(call(&client, &local).await.0, 200);

    redis.stop();
    let sent = upstream.request_count();
    let (status, body) = call(&client, &refusing).await;
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["error"]["type"], "shared_state_unavailable", "{body}");
    assert_eq!(upstream.request_count(), sent, "nothing was sent");
    // A third of 120 per minute, alone: 40 at once, then it waits.
    let statuses = spread(std::slice::from_ref(&local), 40, 8).await;
    assert!(statuses.iter().all(|status| *status == 200), "{statuses:?}");
    refusing.wait_for_stderr("shared state unreachable", Duration::from_secs(5)).await;

    redis.resume().await;
    let back = std::time::Instant::now() + Duration::from_secs(15);
    while call(&client, &refusing).await.0 != 200 {
        assert!(std::time::Instant::now() < back, "sharing never came back");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    refusing.wait_for_stderr("shared state reachable again", Duration::from_secs(5)).await;
}

/// `max_concurrency = 2` across three gateways: the upstream never answers more
/// than two of the fleet's calls at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_gateways_hold_max_concurrency_between_them() {
    let redis = RedisServer::start().await;
    let upstream = FakeUpstream::start().await;
    upstream.delay_answers(Duration::from_millis(300));
    let gateways = start_three(&config_with(&upstream, "max_concurrency = 2", &fleet_table(&redis, ""))).await;
    let statuses = spread(&gateways, 12, 12).await;
    assert!(statuses.iter().all(|status| *status == 200), "{statuses:?}");
    assert_eq!(upstream.most_concurrent(), 2, "the fleet held two permits, not two per gateway");
}

/// A gateway killed (SIGKILL) while its call holds the fleet's only permit:
/// the lease is not renewed, expires, and another gateway's call goes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_gateways_permit_returns_after_its_lease() {
    let redis = RedisServer::start().await;
    let upstream = FakeUpstream::start().await;
    upstream.delay_answers(Duration::from_secs(2));
    let config = config_with(&upstream, "max_concurrency = 1", &fleet_table(&redis, "lease_secs = 3"));
    let mut doomed = Gateway::start(&config).await;
    let survivor = Gateway::start(&config).await;
    let client = reqwest::Client::new();
    let held = tokio::spawn({
        let (client, url) = (client.clone(), doomed.url("/v1/chat/completions"));
        async move {
            let body = json!({"model": "chat", "messages": [{"role": "user", "content": "hi"}]});
            client.post(url).bearer_auth(OPS).json(&body).send().await
        }
    });
    upstream.wait_for_requests(1, Duration::from_secs(10)).await;
    assert!(doomed.signal("KILL"), "the doomed gateway was killed");
    doomed.wait_for_exit(Duration::from_secs(5));
    assert!(held.await.unwrap().is_err(), "the killed gateway's caller lost its connection");

    let (status, body) = call(&client, &survivor).await;
    assert_eq!(status, 200, "the permit came back when its lease expired: {body}");
    assert_eq!(upstream.request_count(), 2);
    assert_eq!(upstream.most_concurrent(), 1, "the survivor's call went only after the dead one's permit expired");
}

const ANA: &str = "weir-ana-token-0123456789abcdef";
/// The member's daily budget in the budget test.
const DAILY_TOKENS: u64 = 600;

/// Ana's key and daily budget beside the admin key; the ledger on (for `/v1/usage`).
fn budget_config(upstream: &FakeUpstream, fleet: &str) -> String {
    let ana = weir_host::identity::hash_of(ANA);
    let tail = format!(
        "[[key]]\nid = \"ana-key\"\nmember = \"ana\"\nhash = \"{ana}\"\n\n[member.ana]\ndaily_tokens = {DAILY_TOKENS}\n{fleet}"
    );
    gateway_config(upstream, "", &tail)
}

/// `calls` of ana's spread over the gateways, 15 at a time: the tokens the
/// answered ones used (from their `usage`), and how many were refused as
/// `budget_exhausted`.
async fn spend(gateways: &[Gateway], calls: usize) -> (u64, usize) {
    let client = reqwest::Client::new();
    let next = std::sync::atomic::AtomicUsize::new(0);
    let workers = (0..15).map(|_| async {
        let (mut used, mut refused) = (0u64, 0usize);
        loop {
            let i = next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            if i >= calls {
                return (used, refused);
            }
            let body = json!({"model": "chat", "messages": [{"role": "user", "content": format!("question {i}")}]});
            let response = client
                .post(gateways[i % gateways.len()].url("/v1/chat/completions"))
                .bearer_auth(ANA)
                .json(&body)
                .send()
                .await
                .unwrap();
            let status = response.status().as_u16();
            let body: Value = response.json().await.unwrap();
            match status {
                200 => used += body["usage"]["total_tokens"].as_u64().unwrap(),
                429 => {
                    assert_eq!(body["error"]["type"], "budget_exhausted", "{body}");
                    refused += 1;
                }
                other => panic!("unexpected {other}: {body}"),
            }
        }
    });
    futures_util::future::join_all(workers)
        .await
        .into_iter()
        .fold((0, 0), |(used, refused), (u, r)| (used + u, refused + r))
}

/// A member's daily budget spent across three gateways stops at the budget
/// (holds are taken in Redis, whole or nothing, before each call); each
/// gateway alone would have let the member spend it three times over.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_members_daily_budget_spent_across_three_gateways_stops_at_the_budget() {
    let upstream = FakeUpstream::start().await;
    let alone = start_three(&budget_config(&upstream, "")).await;
    let (used_alone, _) = spend(&alone, 150).await;
    assert!(used_alone > DAILY_TOKENS * 3 / 2, "three separate books let ana spend {used_alone}");
    drop(alone);

    let redis = RedisServer::start().await;
    let gateways = start_three(&budget_config(&upstream, &fleet_table(&redis, ""))).await;
    let (used, refused) = spend(&gateways, 150).await;
    assert!(used <= DAILY_TOKENS, "the fleet let ana spend {used} of {DAILY_TOKENS}");
    assert!(used > DAILY_TOKENS / 2, "the budget was used, not refused wholesale: {used}");
    assert!(refused > 0);
    let client = reqwest::Client::new();
    // Every gateway reads the same account. A settle reaches Redis just after
    // its answer (until then the account holds the call's worst case, never
    // less), so the last ones are waited for.
    for gateway in &gateways {
        let settled = std::time::Instant::now() + Duration::from_secs(10);
        let budget = loop {
            let usage: Value =
                client.get(gateway.url("/v1/usage")).bearer_auth(OPS).send().await.unwrap().json().await.unwrap();
            let budget = usage["budgets"].as_array().unwrap().iter().find(|b| b["name"] == "ana").unwrap().clone();
            if budget["held"] == 0 || std::time::Instant::now() > settled {
                break budget;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        assert_eq!(budget["held"], 0, "{budget}");
        assert_eq!(budget["spent"], used, "{budget}");
    }
}
