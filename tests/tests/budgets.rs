//! Budgets through the real gateway binary: callers with keys, a fake upstream
//! whose usage is known, and budgets held before the call (see
//! `weir_host::budget`). Each test asserts what the upstream received: a
//! refused call sends nothing.

// Test code: a failed step should stop the test with its message.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use serde_json::{Value, json};
use weir_tests::{FakeUpstream, Gateway, openai_wire};

const ANA_TOKEN: &str = "sk-weir-ana-1";
const ANA_OTHER_TOKEN: &str = "sk-weir-ana-2";

fn hash(token: &str) -> String {
    weir_host::identity::hash_of(token)
}

/// One priced entry on the fake upstream, member `ana` with two keys, and
/// `budgets` appended (TOML tables or key fields through `{k1}` / `{k2}`).
fn config(upstream: &FakeUpstream, k1_fields: &str, budgets: &str, ledger: &str) -> String {
    format!(
        r#"
[[model]]
id = "m"
provider = "openai-compatible"
wire_id = "qwen3"
endpoint = "{url}"
max_output_tokens = 4000
context_window = 100000
input_price = 2.0
output_price = 8.0
cache_read_multiplier = 0.1

[[key]]
id = "k1"
member = "ana"
team = "search"
hash = "{h1}"
{k1_fields}

[[key]]
id = "k2"
member = "ana"
team = "search"
hash = "{h2}"

{budgets}

[ledger]
{ledger}
"#,
        url = upstream.base_url(),
        h1 = hash(ANA_TOKEN),
        h2 = hash(ANA_OTHER_TOKEN),
    )
}

/// A call whose worst case is 1 000 output tokens plus a small input estimate.
fn call() -> Value {
    json!({"model": "m", "max_tokens": 1000, "messages": [{"role": "user", "content": "Hi"}]})
}

/// A completion the upstream reports as 1 000 tokens (10 in, 990 out).
fn thousand() -> weir_tests::Scripted {
    openai_wire::completion_with_usage("Hello", 10, 990, 0, 0)
}

struct Answer {
    status: u16,
    retry_after: Option<u64>,
    body: Value,
}

async fn post(client: &reqwest::Client, gateway: &Gateway, token: &str, body: &Value) -> Answer {
    let response = client.post(gateway.url("/v1/chat/completions")).bearer_auth(token).json(body).send().await.unwrap();
    let status = response.status().as_u16();
    let retry_after =
        response.headers().get("retry-after").map(|value| value.to_str().unwrap().parse::<u64>().unwrap());
    let body = response.json().await.unwrap();
    Answer { status, retry_after, body }
}

fn ledger_path(dir: &tempfile::TempDir) -> String {
    format!("path = {:?}", dir.path().join("ledger.db").to_str().unwrap())
}

/// The closed records of the ledger, read with `weir ledger query`.
fn records(dir: &tempfile::TempDir) -> Vec<Value> {
    let path = dir.path().join("ledger.db");
    let output = weir_tests::run_cli(&["ledger", "query", "--path", path.to_str().unwrap(), "--json"], &[]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let value: Value = serde_json::from_slice(&output.stdout).unwrap();
    value["records"].as_array().unwrap().clone()
}

fn total_tokens(record: &Value) -> u64 {
    let usage = &record["usage"];
    ["input", "output", "cache_read", "cache_write"].iter().map(|kind| usage[kind].as_u64().unwrap()).sum()
}

/// A member's daily tokens are spent by sequential calls; the next call is
/// refused 429 with the numbers and a `retry-after`, recorded, and nothing
/// reaches the upstream.
#[tokio::test]
async fn a_member_exhausted_by_sequential_calls_is_refused_with_the_numbers() {
    let upstream = FakeUpstream::start().await;
    let dir = tempfile::tempdir().unwrap();
    let gateway =
        Gateway::start(&config(&upstream, "", "[member.ana]\ndaily_tokens = 2500\n", &ledger_path(&dir))).await;
    let client = reqwest::Client::new();
    for _ in 0..2 {
        upstream.push(thousand());
        let answer = post(&client, &gateway, ANA_TOKEN, &call()).await;
        assert_eq!(answer.status, 200, "{}", answer.body);
    }
    let refused = post(&client, &gateway, ANA_TOKEN, &call()).await;
    assert_eq!(refused.status, 429, "{}", refused.body);
    assert_eq!(refused.body["error"]["code"], "budget_exhausted");
    let message = refused.body["error"]["message"].as_str().unwrap();
    for part in ["member `ana`", "the day budget in tokens has 500 tokens left", "resets at"] {
        assert!(message.contains(part), "{part}: {message}");
    }
    let retry_after = refused.retry_after.expect("a retry-after");
    assert!(retry_after > 0 && retry_after <= 86_400, "{retry_after}");
    assert_eq!(upstream.request_count(), 2, "the refused call sent nothing");

    let records = records(&dir);
    let categories: Vec<&str> = records.iter().map(|r| r["category"].as_str().unwrap()).collect();
    assert_eq!(categories, ["ok", "ok", "budget_exhausted"]);
    assert_eq!(records[2]["attempts"].as_array().unwrap().len(), 0);
    assert_eq!(records[2]["member"], "ana");
}

/// 50 concurrent calls against a budget that fits 10 worst cases: 10 are
/// answered, 40 refused, the refused ones sent nothing, and the recorded usage
/// stays within the budget.
#[tokio::test]
async fn fifty_concurrent_calls_cannot_overspend_a_budget_that_fits_ten() {
    let upstream = FakeUpstream::start().await;
    for _ in 0..50 {
        // Slow enough that every call is held before any settles.
        upstream.push(thousand().after(Duration::from_millis(300)));
    }
    let dir = tempfile::tempdir().unwrap();
    let gateway =
        Gateway::start(&config(&upstream, "", "[member.ana]\ndaily_tokens = 10500\n", &ledger_path(&dir))).await;
    let client = reqwest::Client::builder().pool_max_idle_per_host(64).build().unwrap();
    let calls: Vec<_> = (0..50)
        .map(|_| {
            let client = client.clone();
            let url = gateway.url("/v1/chat/completions");
            tokio::spawn(async move {
                let response = client.post(url).bearer_auth(ANA_TOKEN).json(&call()).send().await.unwrap();
                response.status().as_u16()
            })
        })
        .collect();
    let mut statuses = Vec::new();
    for call in calls {
        statuses.push(call.await.unwrap());
    }
    let ok = statuses.iter().filter(|status| **status == 200).count();
    let refused = statuses.iter().filter(|status| **status == 429).count();
    assert_eq!((ok, refused), (10, 40), "{statuses:?}");
    assert_eq!(upstream.request_count(), 10, "the refused calls sent nothing");
    let records = records(&dir);
    let spent: u64 = records.iter().map(total_tokens).sum();
    assert!(spent <= 10_500, "recorded usage {spent} is within the budget");
    assert_eq!(records.iter().filter(|r| r["category"] == "budget_exhausted").count(), 40);
}

/// A key and its member both capped: the tighter one refuses, naming itself;
/// the member's other key still calls.
#[tokio::test]
async fn with_a_key_and_its_member_capped_the_tighter_wins() {
    let upstream = FakeUpstream::start().await;
    let dir = tempfile::tempdir().unwrap();
    let toml = config(&upstream, "daily_tokens = 1500", "[member.ana]\ndaily_tokens = 10000\n", &ledger_path(&dir));
    let gateway = Gateway::start(&toml).await;
    let client = reqwest::Client::new();
    upstream.push(thousand());
    assert_eq!(post(&client, &gateway, ANA_TOKEN, &call()).await.status, 200);
    let refused = post(&client, &gateway, ANA_TOKEN, &call()).await;
    assert_eq!(refused.status, 429);
    let message = refused.body["error"]["message"].as_str().unwrap();
    assert!(message.starts_with("key `k1`: the day budget in tokens has 500 tokens left"), "{message}");
    upstream.push(thousand());
    assert_eq!(post(&client, &gateway, ANA_OTHER_TOKEN, &call()).await.status, 200, "the member has room left");
    assert_eq!(upstream.request_count(), 2);
}

/// A per-call ceiling: a worst case above it is a 400 with nothing sent, and
/// a smaller call passes.
#[tokio::test]
async fn a_call_above_its_per_call_ceiling_is_refused_400() {
    let upstream = FakeUpstream::start().await;
    let dir = tempfile::tempdir().unwrap();
    let gateway =
        Gateway::start(&config(&upstream, "", "[team.search]\nmax_call_tokens = 600\n", &ledger_path(&dir))).await;
    let client = reqwest::Client::new();
    let refused = post(&client, &gateway, ANA_TOKEN, &call()).await;
    assert_eq!(refused.status, 400);
    assert_eq!(refused.body["error"]["code"], "call_budget_exceeded");
    let message = refused.body["error"]["message"].as_str().unwrap();
    assert!(message.contains("team `search`") && message.contains("per-call ceiling of 600 tokens"), "{message}");
    assert_eq!(upstream.request_count(), 0);
    upstream.push(openai_wire::completion_with_usage("Hello", 10, 90, 0, 0));
    let small = json!({"model": "m", "max_tokens": 100, "messages": [{"role": "user", "content": "Hi"}]});
    assert_eq!(post(&client, &gateway, ANA_TOKEN, &small).await.status, 200);
    assert_eq!(upstream.request_count(), 1);
}

/// The gateway killed and restarted on the same ledger: the spent budget
/// stays spent.
#[tokio::test]
async fn a_restart_keeps_the_spend() {
    let upstream = FakeUpstream::start().await;
    let dir = tempfile::tempdir().unwrap();
    let toml = config(&upstream, "", "[member.ana]\ndaily_tokens = 2500\n", &ledger_path(&dir));
    let client = reqwest::Client::new();
    let mut gateway = Gateway::start(&toml).await;
    for _ in 0..2 {
        upstream.push(thousand());
        assert_eq!(post(&client, &gateway, ANA_TOKEN, &call()).await.status, 200);
    }
    assert!(gateway.signal("KILL"), "SIGKILL delivered");
    gateway.wait_for_exit(Duration::from_secs(10));
    drop(gateway);

    let gateway = Gateway::start(&toml).await;
    let refused = post(&client, &gateway, ANA_OTHER_TOKEN, &call()).await;
    assert_eq!(refused.status, 429, "{}", refused.body);
    assert!(refused.body["error"]["message"].as_str().unwrap().contains("500 tokens left"), "{}", refused.body);
    assert_eq!(upstream.request_count(), 2);
}

/// A call in flight when the gateway is killed has its hold in the ledger:
/// the restarted gateway counts its worst case (what it spent upstream is not
/// known, what it could spend is), so a kill does not hand the budget back.
#[tokio::test]
async fn a_call_cut_off_by_a_kill_counts_its_worst_case() {
    let upstream = FakeUpstream::start().await;
    let dir = tempfile::tempdir().unwrap();
    let toml = config(&upstream, "", "[member.ana]\ndaily_tokens = 2500\n", &ledger_path(&dir));
    let client = reqwest::Client::new();
    let mut gateway = Gateway::start(&toml).await;
    upstream.push(thousand());
    assert_eq!(post(&client, &gateway, ANA_TOKEN, &call()).await.status, 200);
    upstream.push(thousand().after(Duration::from_secs(60)));
    let url = gateway.url("/v1/chat/completions");
    let cut_off = tokio::spawn(async move {
        reqwest::Client::new().post(url).bearer_auth(ANA_TOKEN).json(&call()).send().await.map(|r| r.status())
    });
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while upstream.request_count() < 2 {
        assert!(std::time::Instant::now() < deadline, "the second call never reached the upstream");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // The hold's row is committed within the ledger's 2 ms linger.
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(gateway.signal("KILL"), "SIGKILL delivered");
    gateway.wait_for_exit(Duration::from_secs(10));
    drop(gateway);
    assert!(cut_off.await.unwrap().is_err(), "the caller lost its connection");

    let gateway = Gateway::start(&toml).await;
    let refused = post(&client, &gateway, ANA_OTHER_TOKEN, &call()).await;
    assert_eq!(refused.status, 429, "1 000 spent and ~1 008 held when cut off: {}", refused.body);
    let message = refused.body["error"]["message"].as_str().unwrap();
    let left: u64 = message.split(" tokens left").next().unwrap().rsplit(' ').next().unwrap().parse().unwrap();
    assert!(left < 500, "the cut-off call's worst case is counted: {message}");
    assert_eq!(upstream.request_count(), 2);
}

/// A USD budget counts cache reads at their price: each call reports 1 000
/// input tokens of which 900 were cache reads (at 0.1 of the input price), so
/// four calls fit a budget that would hold two at the full input price.
#[tokio::test]
async fn a_usd_budget_counts_cache_priced_tokens() {
    let upstream = FakeUpstream::start().await;
    for _ in 0..5 {
        upstream.push(openai_wire::completion_with_usage("Hello", 1000, 100, 900, 0));
    }
    let dir = tempfile::tempdir().unwrap();
    let gateway = Gateway::start(&config(&upstream, "", "[member.ana]\ndaily_usd = 0.012\n", &ledger_path(&dir))).await;
    let client = reqwest::Client::new();
    let mut statuses = Vec::new();
    for _ in 0..5 {
        statuses.push(post(&client, &gateway, ANA_TOKEN, &call()).await.status);
    }
    // Each worst case is about $0.008 (1 000 output tokens at $8/M); each call
    // costs $0.00118 (100 × 2 + 900 × 0.2 + 100 × 8, per million).
    assert_eq!(statuses, [200, 200, 200, 200, 429]);
    assert_eq!(upstream.request_count(), 4);
    let records = records(&dir);
    let cost: f64 = records.iter().filter_map(|r| r["cost_usd"].as_f64()).sum();
    assert!((cost - 4.0 * 0.00118).abs() < 1e-9, "{cost}");
}

fn streamed() -> Value {
    json!({"model": "m", "max_tokens": 1000, "stream": true, "stream_options": {"include_usage": true},
           "messages": [{"role": "user", "content": "Hi"}]})
}

/// Waits until the ledger holds `count` closed records (a stream's record is
/// committed by its own task).
async fn wait_for_records(dir: &tempfile::TempDir, count: usize) -> Vec<Value> {
    for _ in 0..100 {
        let found = records(dir);
        if found.len() >= count {
            return found;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the ledger never held {count} records");
}

/// Streamed calls hold and settle like whole ones: from the usage the stream reported.
#[tokio::test]
async fn streamed_calls_settle_from_their_reported_usage() {
    let upstream = FakeUpstream::start().await;
    let dir = tempfile::tempdir().unwrap();
    let gateway =
        Gateway::start(&config(&upstream, "", "[member.ana]\ndaily_tokens = 2500\n", &ledger_path(&dir))).await;
    let client = reqwest::Client::new();
    for _ in 0..2 {
        let usage = Some(openai_wire::usage_json(10, 990, 0, 0));
        upstream.push(openai_wire::stream(openai_wire::sse_text_frames("c", "qwen3", &["He", "llo"], "stop", usage)));
        let response =
            client.post(gateway.url("/v1/chat/completions")).bearer_auth(ANA_TOKEN).json(&streamed()).send().await;
        let response = response.unwrap();
        assert_eq!(response.status(), 200);
        assert!(response.text().await.unwrap().ends_with("data: [DONE]\n\n"));
    }
    let refused = post(&client, &gateway, ANA_TOKEN, &streamed()).await;
    assert_eq!(refused.status, 429, "{}", refused.body);
    assert!(refused.body["error"]["message"].as_str().unwrap().contains("500 tokens left"), "{}", refused.body);
    assert_eq!(upstream.request_count(), 2);
}

/// A stream the caller leaves before the upstream reported its usage is
/// counted at its worst case, never as zero: the next call does not fit, nor
/// after a restart (the record says it was charged its hold).
#[tokio::test]
async fn a_stream_the_client_leaves_unreported_counts_at_its_worst_case() {
    let upstream = FakeUpstream::start().await;
    let dir = tempfile::tempdir().unwrap();
    let toml = config(&upstream, "", "[member.ana]\ndaily_tokens = 1500\n", &ledger_path(&dir));
    let gateway = Gateway::start(&toml).await;
    let client = reqwest::Client::new();
    let frame = |text: &str| {
        openai_wire::sse_frame(&openai_wire::chunk_json("c", "qwen3", json!({"content": text}), None, None))
    };
    upstream.push(weir_tests::Scripted::Stream {
        status: 200,
        headers: openai_wire::sse_headers("req-left"),
        chunks: (0..50).map(|i| frame(&format!("part {i} "))).collect(),
        pause: Duration::from_millis(50),
    });
    let mut response =
        client.post(gateway.url("/v1/chat/completions")).bearer_auth(ANA_TOKEN).json(&streamed()).send().await.unwrap();
    assert_eq!(response.status(), 200);
    assert!(!response.chunk().await.unwrap().unwrap().is_empty());
    drop(response);
    let records = wait_for_records(&dir, 1).await;
    assert_eq!(records[0]["category"], "client_left");
    assert_eq!(records[0]["charged_worst_case"], true, "{}", records[0]);

    let refused = post(&client, &gateway, ANA_TOKEN, &call()).await;
    assert_eq!(refused.status, 429, "{}", refused.body);
    drop(gateway);
    let restarted = Gateway::start(&toml).await;
    let refused = post(&client, &restarted, ANA_TOKEN, &call()).await;
    assert_eq!(refused.status, 429, "the worst case still counts after a restart: {}", refused.body);
    assert_eq!(upstream.request_count(), 1);
}
