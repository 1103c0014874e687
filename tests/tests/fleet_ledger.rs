//! One ledger for a fleet: real `weir serve` processes, each keeping its own
//! SQLite ledger and shipping it to one real PostgreSQL server, in front of
//! the fake OpenAI upstream.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use weir_tests::{FakeUpstream, Gateway, PostgresServer, run_cli};

const OPS: &str = "weir-ops-token-0123456789abcdef";
const ANA: &str = "weir-ana-token-0123456789abcdef";
/// Ana's daily budget in the budget test.
const DAILY_TOKENS: u64 = 200;

/// The model on the fake upstream, an admin key and ana's key, the ledger
/// table's `ledger` lines, then `tail`.
fn config(upstream: &FakeUpstream, ledger: &str, tail: &str) -> String {
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

[[key]]
id = "ops-key"
member = "ops"
hash = "{ops}"
admin = true

[[key]]
id = "ana-key"
member = "ana"
hash = "{ana}"

[ledger]
{ledger}

{tail}"#,
        url = upstream.base_url(),
        ops = weir_host::identity::hash_of(OPS),
        ana = weir_host::identity::hash_of(ANA),
    )
}

fn shipping_to(server: &PostgresServer) -> String {
    format!("postgres_url = \"{}\"", server.url())
}

async fn call(client: &reqwest::Client, gateway: &Gateway, token: &str) -> (u16, Value) {
    let body = json!({"model": "chat", "messages": [{"role": "user", "content": "hi"}]});
    let response = client
        .post(gateway.url("/v1/chat/completions"))
        .bearer_auth(token)
        .json(&body)
        .timeout(Duration::from_secs(60))
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

/// `calls` calls of the admin key spread round-robin over the gateways, 6 at
/// a time; every one answered.
async fn spread(gateways: &[&Gateway], calls: usize) {
    let client = reqwest::Client::new();
    let next = std::sync::atomic::AtomicUsize::new(0);
    let workers = (0..6).map(|_| async {
        loop {
            let i = next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            if i >= calls {
                return;
            }
            let (status, body) = call(&client, gateways[i % gateways.len()], OPS).await;
            assert_eq!(status, 200, "{body}");
        }
    });
    futures_util::future::join_all(workers).await;
}

/// Waits until the fleet's table holds `closed` closing rows (then checks it
/// holds no more).
async fn until_closed(server: &PostgresServer, closed: i64, within: Duration) {
    let deadline = Instant::now() + within;
    loop {
        // No table yet: no shipper has connected.
        let count = server.try_integer("SELECT COUNT(*) FROM ledger WHERE kind = 'close'").unwrap_or(0);
        if count == closed {
            return;
        }
        assert!(count < closed, "{count} closing rows, more than the {closed} calls made");
        assert!(Instant::now() < deadline, "only {count} of {closed} closing rows reached PostgreSQL");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Each file's rows (`files`: the local files) are there once each, numbered
/// 1 to its last without a gap: nothing lost, nothing twice.
fn assert_every_row_once(server: &PostgresServer, files: &[&Path]) {
    let rows: u64 = files.iter().map(|file| local_rows(file).0).sum();
    assert_eq!(server.integer("SELECT COUNT(*) FROM ledger"), i64::try_from(rows).unwrap());
    assert_eq!(server.integer("SELECT COUNT(DISTINCT source) FROM ledger"), i64::try_from(files.len()).unwrap());
    let gaps = "SELECT COUNT(*) FROM (SELECT source FROM ledger GROUP BY source
                HAVING MIN(source_seq) <> 1 OR MAX(source_seq) <> COUNT(*)) AS gapped";
    assert_eq!(server.integer(gaps), 0, "a file's rows are missing in PostgreSQL");
    // A quick call's opening is left out of its closing row's commit.
    let unpaired = "SELECT COUNT(*) FROM (SELECT call_id FROM ledger GROUP BY call_id
                    HAVING COUNT(*) FILTER (WHERE kind = 'close') <> 1
                        OR COUNT(*) FILTER (WHERE kind = 'open') > 1) AS odd";
    assert_eq!(server.integer(unpaired), 0, "every call has its closing row, and at most one opening");
}

async fn metric(gateway: &Gateway, name: &str) -> f64 {
    let client = reqwest::Client::new();
    let text = client.get(gateway.url("/metrics")).bearer_auth(OPS).send().await.unwrap().text().await.unwrap();
    text.lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or_else(|| panic!("no {name} in {text}"))
}

/// Three gateways started together on an empty database (the migration runs
/// once), each shipping its own file: every call's rows are in PostgreSQL
/// once, and `/v1/usage` and `weir ledger query` on any one of
/// them sum the whole fleet's calls.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_gateways_ship_every_record_once_and_any_one_reads_the_fleets() {
    let server = PostgresServer::start();
    let upstream = FakeUpstream::start().await;
    let config = config(&upstream, &shipping_to(&server), "");
    let gateways = futures_util::future::join_all((0..3).map(|_| Gateway::start(&config))).await;
    spread(&gateways.iter().collect::<Vec<_>>(), 60).await;
    until_closed(&server, 60, Duration::from_secs(20)).await;
    let files: Vec<_> = gateways.iter().map(|gateway| gateway.dir().join("data").join("ledger.db")).collect();
    assert_every_row_once(&server, &files.iter().map(PathBuf::as_path).collect::<Vec<_>>());
    assert_eq!(server.integer("SELECT COUNT(*) FROM refinery_schema_history"), 7, "seven migrations, each once");

    let client = reqwest::Client::new();
    let usage: Value =
        client.get(gateways[0].url("/v1/usage")).bearer_auth(OPS).send().await.unwrap().json().await.unwrap();
    assert_eq!(usage["total"]["calls"], 60, "the fleet's calls, not this gateway's 20: {usage}");
    let local = gateways[0].dir().join("data").join("ledger.db");
    let own = run_cli(&["ledger", "query", "--path", &local.display().to_string(), "--json"], &[]);
    let own: Value = serde_json::from_slice(&own.stdout).unwrap();
    assert_eq!(own["records"].as_array().unwrap().len(), 20, "--path reads the one file");

    let config_path = gateways[1].config_path().display().to_string();
    let shared = run_cli(&["ledger", "query", "--config", &config_path, "--json"], &[]);
    assert!(shared.status.success(), "{}", String::from_utf8_lossy(&shared.stderr));
    let shared: Value = serde_json::from_slice(&shared.stdout).unwrap();
    assert_eq!(shared["records"].as_array().unwrap().len(), 60);
    assert_eq!(shared["sums"]["total"]["calls"], 60);
    let verified = run_cli(&["ledger", "verify", "--config", &config_path], &[]);
    let text = String::from_utf8_lossy(&verified.stdout).to_string();
    assert!(verified.status.success(), "{text}{}", String::from_utf8_lossy(&verified.stderr));
    assert!(text.contains("ok: 3 source file(s)") && text.matches(" rows, 20 calls").count() == 3, "{text}");
}

/// PostgreSQL stopped while calls go on (they never wait for it), the
/// gateway then killed with its rows unshipped, PostgreSQL back, and a new
/// gateway started on the same file: every record reaches PostgreSQL once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_postgres_outage_and_a_killed_gateway_lose_and_duplicate_nothing() {
    let mut server = PostgresServer::start();
    let upstream = FakeUpstream::start().await;
    let folder = tempfile::tempdir().unwrap();
    let file = folder.path().join("ledger.db");
    let ledger = format!("path = \"{}\"\n{}", file.display(), shipping_to(&server));
    let config = config(&upstream, &ledger, "");
    let gateway = Gateway::start(&config).await;
    spread(&[&gateway], 10).await;
    until_closed(&server, 10, Duration::from_secs(20)).await;

    server.stop();
    spread(&[&gateway], 20).await;
    let deadline = Instant::now() + Duration::from_secs(20);
    while metric(&gateway, "weir_ledger_ship_failures_total").await < 1.0 {
        assert!(Instant::now() < deadline, "the outage was never counted");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(gateway.stderr().contains("rows wait in the local ledger"), "{}", gateway.stderr());
    assert!(!gateway.stderr().contains("postgres://weir@"), "the log names the URL without its user");
    let client = reqwest::Client::new();
    let usage = client.get(gateway.url("/v1/usage")).bearer_auth(OPS).send().await.unwrap();
    assert_eq!(usage.status(), 503);
    let usage = usage.text().await.unwrap();
    assert!(usage.contains("ledger_unavailable") && !usage.contains("postgres"), "{usage}");
    let config_path = gateway.config_path().display().to_string();
    let query = run_cli(&["ledger", "query", "--config", &config_path], &[]);
    assert!(!query.status.success(), "a query of the fleet's ledger while it is down fails");
    assert!(String::from_utf8_lossy(&query.stderr).contains("fleet's ledger"), "{query:?}");
    assert!(gateway.signal("KILL"));
    drop(gateway);
    assert_eq!(local_rows(&file).1, 30, "the file holds every call");

    // A gateway starts while PostgreSQL is still down, and ships once it is back.
    let restarted = Gateway::start(&config).await;
    spread(&[&restarted], 5).await;
    server.resume();
    until_closed(&server, 35, Duration::from_secs(30)).await;
    assert_every_row_once(&server, &[&file]);
}

/// The rows and the calls `weir ledger verify` counts in `file`.
fn local_rows(file: &Path) -> (u64, u64) {
    let query = run_cli(&["ledger", "verify", "--path", &file.display().to_string()], &[]);
    let text = String::from_utf8_lossy(&query.stdout).to_string();
    let counts = text.strip_prefix("ok: ").and_then(|rest| {
        let mut words = rest.split(' ');
        let rows = words.next()?.parse().ok()?;
        let calls = words.nth(1)?.parse().ok()?;
        Some((rows, calls))
    });
    counts.unwrap_or_else(|| panic!("{text}"))
}

/// Ana's calls on one gateway until her day's budget is spent; then a new
/// gateway, with an empty file of its own, rebuilds her spend from the
/// fleet's ledger and refuses her at once. The control (the same new gateway
/// reading only its own file) serves her.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_starting_gateway_rebuilds_the_budgets_from_the_fleets_ledger() {
    let server = PostgresServer::start();
    let upstream = FakeUpstream::start().await;
    let budget = format!("[member.ana]\ndaily_tokens = {DAILY_TOKENS}\n");
    let client = reqwest::Client::new();
    let mut first = Gateway::start(&config(&upstream, &shipping_to(&server), &budget)).await;
    let answered = spend_the_day(&client, &first).await;
    assert!(first.terminate(Duration::from_secs(10)).is_some_and(|status| status.success()));

    let control = Gateway::start(&config(&upstream, "", &budget)).await;
    assert_eq!(call(&client, &control, ANA).await.0, 200, "its own empty file knows no spend");

    let second = Gateway::start(&config(&upstream, &shipping_to(&server), &budget)).await;
    let (status, body) = call(&client, &second, ANA).await;
    assert_eq!(status, 429, "{body}");
    assert_eq!(body["error"]["type"], "budget_exhausted", "{body}");
    let usage = second.url("/v1/usage?member=ana&category=ok");
    let usage: Value = client.get(usage).bearer_auth(OPS).send().await.unwrap().json().await.unwrap();
    let ana = usage["budgets"].as_array().unwrap().iter().find(|budget| budget["name"] == "ana").unwrap().clone();
    assert!(ana["spent"].as_u64().unwrap() > DAILY_TOKENS / 2, "{ana}");
    // Every answered call of the first gateway (its last rows were shipped as it stopped).
    assert_eq!(usage["total"]["calls"].as_i64().unwrap(), answered, "{usage}");
}

/// Ana's calls until her day is spent, on one of two gateways sharing Redis
/// and shipping to PostgreSQL; then Redis loses its data (stopped, started
/// empty). The other gateway's next hold finds her account missing and seeds
/// it from the fleet's ledger: her day's spend is still there. The control,
/// without PostgreSQL, forgets it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_that_lost_its_data_is_seeded_from_the_fleets_ledger() {
    let server = PostgresServer::start();
    let mut redis = weir_tests::RedisServer::start().await;
    let upstream = FakeUpstream::start().await;
    let tail = format!("[member.ana]\ndaily_tokens = {DAILY_TOKENS}\n\n[fleet]\nredis_url = \"{}\"\n", redis.url());
    let config_with = |ledger: &str| config(&upstream, ledger, &tail);
    let client = reqwest::Client::new();

    let control = Gateway::start(&config_with("")).await;
    spend_the_day(&client, &control).await;
    let spent = settled_spend(&client, &control).await;
    redis.stop();
    redis.resume().await;
    assert_eq!(call_through_the_reconnection(&client, &control).await.0, 200, "an empty Redis forgot her spend");
    let forgotten = settled_spend(&client, &control).await;
    assert!(forgotten < spent / 4, "the control starts again from {forgotten}, not {spent}");
    drop(control);

    redis.stop();
    redis.resume().await;
    let shipping = config_with(&shipping_to(&server));
    let gateways = [Gateway::start(&shipping).await, Gateway::start(&shipping).await];
    let answered = spend_the_day(&client, &gateways[0]).await;
    let spent = settled_spend(&client, &gateways[0]).await;
    // Her calls and her refusal, shipped.
    let deadline = Instant::now() + Duration::from_secs(20);
    while server.try_integer("SELECT COUNT(*) FROM ledger WHERE kind = 'close' AND member = 'ana'") != Ok(answered + 1)
    {
        assert!(Instant::now() < deadline, "ana's records did not reach PostgreSQL");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    redis.stop();
    redis.resume().await;
    let (status, body) = call_through_the_reconnection(&client, &gateways[1]).await;
    // Refused, or served from what is left (the first gateway's refusal may
    // have counted a call still held at its worst case).
    assert!(status == 200 || body["error"]["type"] == "budget_exhausted", "{status}: {body}");
    let seeded = settled_spend(&client, &gateways[1]).await;
    assert!(seeded >= spent, "the seeded account has {seeded} of the {spent} spent before Redis lost it");
    assert!(gateways[1].stderr().contains("seeded from the fleet's ledger"), "{}", gateways[1].stderr());
}

/// Ana's daily budget's spend as `gateway` reads it from Redis, once no call
/// holds any (a settle reaches Redis just after its answer).
async fn settled_spend(client: &reqwest::Client, gateway: &Gateway) -> u64 {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let usage: Value =
            client.get(gateway.url("/v1/usage")).bearer_auth(OPS).send().await.unwrap().json().await.unwrap();
        let ana = usage["budgets"].as_array().unwrap().iter().find(|budget| budget["name"] == "ana").unwrap().clone();
        if ana["held"] == 0 {
            return ana["spent"].as_u64().unwrap();
        }
        assert!(Instant::now() < deadline, "a hold was never settled: {ana}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Ana's calls on `gateway` until one is refused for her budget; the answered count.
async fn spend_the_day(client: &reqwest::Client, gateway: &Gateway) -> i64 {
    let mut answered = 0;
    loop {
        let (status, body) = call(client, gateway, ANA).await;
        match status {
            200 => answered += 1,
            429 if body["error"]["type"] == "budget_exhausted" => return answered,
            other => panic!("{other}: {body}"),
        }
        assert!(answered < 400, "the budget never ran out");
    }
}

/// Ana's call, asked again while the gateway's Redis connection comes back
/// (`shared_state_unavailable` until it does).
async fn call_through_the_reconnection(client: &reqwest::Client, gateway: &Gateway) -> (u16, Value) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (status, body) = call(client, gateway, ANA).await;
        if status != 503 {
            return (status, body);
        }
        assert_eq!(body["error"]["type"], "shared_state_unavailable", "{body}");
        assert!(Instant::now() < deadline, "Redis never came back for the gateway");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
