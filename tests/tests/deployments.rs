//! Deployments through the real gateway: one catalog entry served by three
//! fake upstreams as its `[[model.deployment]]`s. The spread follows the
//! weights; a deployment answering 500, 429 or closing connections costs no
//! call, and its circuit opens and closes again; an authentication failure
//! benches its deployment; a stream moves before its first byte, never after.

// Test code: a failed step should stop the test with its message.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use serde_json::{Value, json};
use weir_tests::{FakeUpstream, Gateway, Scripted, openai_wire};

/// An entry `m` whose deployments are the upstreams, with these weights.
fn config(upstreams: &[&FakeUpstream], weights: &[u32], extra: &str) -> String {
    let mut text = format!(
        r#"
[[model]]
id = "m"
provider = "openai-compatible"
wire_id = "any"
max_output_tokens = 1000
context_window = 100000
output_tokens = 20
{extra}
"#
    );
    for (index, (upstream, weight)) in upstreams.iter().zip(weights).enumerate() {
        text.push_str(&format!(
            "\n[[model.deployment]]\nid = \"d{index}\"\nendpoint = \"{}\"\nweight = {weight}\n",
            upstream.base_url()
        ));
    }
    text
}

fn hello() -> Value {
    json!({"model": "m", "messages": [{"role": "user", "content": "Hello"}]})
}

async fn three() -> (FakeUpstream, FakeUpstream, FakeUpstream) {
    (FakeUpstream::start().await, FakeUpstream::start().await, FakeUpstream::start().await)
}

/// Sixty calls without a conversation to keep together: each deployment
/// takes some, the one of weight 6 the most; each attempt's deployment is in
/// the ledger's record.
#[tokio::test]
async fn the_spread_follows_the_weights_and_the_record_names_each_deployment() {
    let (a, b, c) = three().await;
    let text = format!("{}\n[ledger]\npath = \"ledger.db\"\n", config(&[&a, &b, &c], &[1, 1, 6], ""));
    let gateway = Gateway::start(&text).await;
    for _ in 0..60 {
        let answer = gateway.post_json("/v1/chat/completions", &hello(), &[]).await;
        assert_eq!(answer.status, 200, "{}", answer.body);
    }
    let counts = [a.request_count(), b.request_count(), c.request_count()];
    assert_eq!(counts.iter().sum::<usize>(), 60, "{counts:?}");
    assert!(counts[2] > counts[0] && counts[2] > counts[1], "weight 6 of 8 takes the most: {counts:?}");
    assert!(counts[0] > 0 && counts[1] > 0, "every deployment takes some: {counts:?}");

    let records = weir_tests::closed_records(&gateway.dir().join("ledger.db"));
    assert_eq!(records.len(), 60);
    let mut recorded = [0_usize; 3];
    let hosts = [a.addr().to_string(), b.addr().to_string(), c.addr().to_string()];
    for record in &records {
        let deployment = record["attempts"][0]["deployment"].as_str().unwrap();
        let index = deployment.trim_start_matches('d').parse::<usize>().unwrap();
        recorded[index] += 1;
        assert_eq!(record["endpoint_host"], hosts[index], "the record names the serving deployment's host");
    }
    assert_eq!(recorded, counts, "the record names where each call went");

    let usage: Value = reqwest::get(gateway.url("/v1/usage?group_by=deployment")).await.unwrap().json().await.unwrap();
    let groups = usage["groups"].as_array().unwrap();
    assert_eq!(groups.len(), 3, "{usage}");
    for (index, count) in counts.iter().enumerate() {
        let group = groups.iter().find(|group| group["deployment"] == format!("d{index}")).unwrap();
        assert_eq!(group["calls"].as_u64().unwrap(), *count as u64, "{usage}");
    }
    assert_eq!(usage["total"]["calls"], 60);
}

/// A conversation (one system prompt, one caller) stays on one deployment.
#[tokio::test]
async fn a_conversation_stays_on_one_deployment() {
    let (a, b, c) = three().await;
    let gateway = Gateway::start(&config(&[&a, &b, &c], &[1, 1, 1], "")).await;
    let body = json!({"model": "m", "messages": [
        {"role": "system", "content": "You are the reviewer of pull request 48."},
        {"role": "user", "content": "Hello"}]});
    for _ in 0..12 {
        let answer = gateway.post_json("/v1/chat/completions", &body, &[]).await;
        assert_eq!(answer.status, 200, "{}", answer.body);
    }
    let mut counts = [a.request_count(), b.request_count(), c.request_count()];
    counts.sort_unstable();
    assert_eq!(counts, [0, 0, 12], "the provider's prompt cache keeps hitting on one deployment");
}

/// One deployment answers 500, 429 and resets: 50 concurrent callers all get
/// their answer, its circuit opens, and once it answers again a probe closes it.
///
/// It fails every attempt of the burst (more failures are queued than the 50
/// calls can send it): with successes of its own among them, completions could
/// interleave so that no three failures are consecutive and the circuit rightly
/// stays closed (seen under load). After the burst its failures left are
/// dropped, so the next probe it gets answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_deployment_costs_no_call_and_its_circuit_opens_then_closes() {
    let (bad, b, c) = three().await;
    for round in 0..60 {
        bad.push(match round % 3 {
            0 => openai_wire::server_error(),
            1 => openai_wire::rate_limited(5),
            _ => Scripted::Drop,
        });
    }
    let extra = "max_retries = 4\ncircuit_failures = 3\ncircuit_open_secs = 1\n";
    let gateway = Gateway::start(&config(&[&bad, &b, &c], &[1, 1, 1], extra)).await;
    let client = reqwest::Client::builder().timeout(Duration::from_secs(60)).build().unwrap();
    let calls: Vec<_> = (0..50)
        .map(|_| {
            let (client, url) = (client.clone(), gateway.url("/v1/chat/completions"));
            tokio::spawn(async move {
                let response = client.post(url).json(&hello()).send().await.unwrap();
                response.status().as_u16()
            })
        })
        .collect();
    for call in calls {
        assert_eq!(call.await.unwrap(), 200, "no call failed");
    }
    gateway.wait_for_stderr("deployment circuit opened", Duration::from_secs(10)).await;
    let failed = bad.request_count();
    assert!(failed < 50, "the open circuit kept calls away: {failed}");
    assert!(bad.queued() > 0, "every attempt it took in the burst failed");

    // It answers again: the next probe (a second after the circuit opened,
    // when the spread picks it) closes it.
    bad.clear_queue();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    let mut closed = false;
    while !closed && tokio::time::Instant::now() < deadline {
        let answer = gateway.post_json("/v1/chat/completions", &hello(), &[]).await;
        assert_eq!(answer.status, 200, "{}", answer.body);
        closed = gateway.stderr().contains("deployment circuit closed");
        if !closed {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    assert!(closed, "the circuit closed after a probe answered");
    assert!(bad.request_count() > failed, "the probe reached it");
}

/// A providers reload checks an entry with deployments where its deployments
/// go, as a start does: the entry names no endpoint of its own, and no error
/// says its calls will be refused while they are answered.
#[tokio::test]
async fn a_reload_checks_each_deployment_not_the_entry() {
    let (a, b, c) = three().await;
    let gateway = Gateway::start(&format!("watch_interval_ms = 100\n{}", config(&[&a, &b, &c], &[1, 1, 1], ""))).await;
    gateway.wait_for_stderr("providers reloaded", Duration::from_secs(10)).await;
    let answer = gateway.post_json("/v1/chat/completions", &hello(), &[]).await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert!(!gateway.stderr().contains("will be refused"), "{}", gateway.stderr());
}

/// One deployment's credential is refused: that call fails (an invalid
/// credential is not a signal to retry), the deployment takes no call again,
/// the others go on.
#[tokio::test]
async fn an_authentication_failure_benches_its_deployment() {
    let (bad, b, c) = three().await;
    for _ in 0..5 {
        bad.push(openai_wire::invalid_api_key());
    }
    let gateway = Gateway::start(&config(&[&bad, &b, &c], &[50, 1, 1], "")).await;
    let mut failed = 0;
    for _ in 0..20 {
        let answer = gateway.post_json("/v1/chat/completions", &hello(), &[]).await;
        if answer.status != 200 {
            assert_eq!(answer.body["error"]["type"], "authentication_failed", "{}", answer.body);
            failed += 1;
        }
    }
    assert_eq!(bad.request_count(), 1, "benched after its first refusal");
    assert_eq!(failed, 1, "only the call that met it failed");
    assert_eq!(b.request_count() + c.request_count(), 19);
    gateway.wait_for_stderr("it takes no calls until the catalog is reloaded", Duration::from_secs(5)).await;
}

async fn stream(gateway: &Gateway) -> (u16, String) {
    let body = json!({"model": "m", "stream": true, "messages": [{"role": "user", "content": "Hello"}]});
    let response = reqwest::Client::new().post(gateway.url("/v1/chat/completions")).json(&body).send().await.unwrap();
    let status = response.status().as_u16();
    (status, response.text().await.unwrap_or_default())
}

/// A stream whose deployment fails before its first byte moves to another;
/// one that fails after its first byte reached the client does not.
#[tokio::test]
async fn a_stream_moves_before_its_first_byte_and_not_after() {
    let (first, other) = (FakeUpstream::start().await, FakeUpstream::start().await);
    let gateway = Gateway::start(&config(&[&first, &other], &[100_000, 1], "")).await;

    first.push(openai_wire::server_error());
    let (status, body) = stream(&gateway).await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("[DONE]"), "the other deployment answered whole: {body}");
    assert_eq!((first.request_count(), other.request_count()), (1, 1), "moved once, before any byte");

    // The role frame and two text frames, then the connection is cut.
    let frames = openai_wire::sse_chunks(&["Hel", "lo"]);
    first.push(openai_wire::stream_then_drop(frames[..3].to_vec()));
    let (status, body) = stream(&gateway).await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("Hel"), "the first bytes reached the client: {body}");
    assert!(!body.contains("[DONE]"), "the stream ended in an error, not a finish: {body}");
    assert_eq!((first.request_count(), other.request_count()), (2, 1), "not moved after its first byte");
}

/// One deployment answers slowly: it holds more attempts in flight, so its
/// share of the calls drops below each fast one's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_deployment_gets_a_smaller_share() {
    let (slow, b, c) = three().await;
    slow.delay_answers(Duration::from_millis(800));
    let gateway = Gateway::start(&config(&[&slow, &b, &c], &[1, 1, 1], "")).await;
    let client = reqwest::Client::builder().timeout(Duration::from_secs(60)).build().unwrap();
    let workers: Vec<_> = (0..10)
        .map(|_| {
            let (client, url) = (client.clone(), gateway.url("/v1/chat/completions"));
            tokio::spawn(async move {
                for _ in 0..6 {
                    let response = client.post(&url).json(&hello()).send().await.unwrap();
                    assert_eq!(response.status().as_u16(), 200);
                }
            })
        })
        .collect();
    for worker in workers {
        worker.await.unwrap();
    }
    let counts = [slow.request_count(), b.request_count(), c.request_count()];
    assert_eq!(counts.iter().sum::<usize>(), 60, "{counts:?}");
    assert!(counts[0] < counts[1] && counts[0] < counts[2], "the slow one takes the least: {counts:?}");
    assert!(counts[0] < 20, "below an even third: {counts:?}");
}

/// The circuit's state is visible: `/v1/models` (a keyless gateway shows the
/// operator's view), `/metrics`, and `weir providers` lists the deployments.
#[tokio::test]
async fn an_open_circuit_shows_in_models_metrics_and_providers() {
    let (bad, b) = (FakeUpstream::start().await, FakeUpstream::start().await);
    for _ in 0..20 {
        bad.push(openai_wire::server_error());
    }
    let extra = "max_retries = 2\ncircuit_failures = 2\ncircuit_open_secs = 600\n";
    let gateway = Gateway::start(&config(&[&bad, &b], &[1, 1], extra)).await;
    // Until the bad deployment has failed twice in a row (each call still answers).
    for _ in 0..40 {
        let answer = gateway.post_json("/v1/chat/completions", &hello(), &[]).await;
        assert_eq!(answer.status, 200, "{}", answer.body);
        if bad.request_count() >= 2 {
            break;
        }
    }
    assert_eq!(bad.request_count(), 2, "the circuit opened after its second failure");
    for _ in 0..10 {
        let answer = gateway.post_json("/v1/chat/completions", &hello(), &[]).await;
        assert_eq!(answer.status, 200, "{}", answer.body);
    }
    assert_eq!(bad.request_count(), 2, "an open circuit takes no attempt");

    let models: Value = reqwest::get(gateway.url("/v1/models")).await.unwrap().json().await.unwrap();
    let entry = models["data"].as_array().unwrap().iter().find(|model| model["id"] == "m").unwrap();
    let deployments = entry["weir"]["deployments"].as_array().unwrap();
    assert_eq!(deployments[0]["id"], "d0");
    assert_eq!(deployments[0]["circuit"], "open", "{entry}");
    assert!(deployments[0]["circuit_open_secs_left"].as_u64().unwrap() > 500);
    assert_eq!(deployments[0]["consecutive_failures"], 2);
    assert_eq!(deployments[0]["window_error_rate"], 1.0, "both its attempts failed");
    assert_eq!(deployments[1]["circuit"], "closed");
    assert_eq!(deployments[1]["benched"], false);

    let metrics = reqwest::get(gateway.url("/metrics")).await.unwrap().text().await.unwrap();
    assert!(metrics.contains(r#"weir_deployment_circuit_state{model="m",deployment="d0"} 2"#), "{metrics}");
    assert!(metrics.contains(r#"weir_deployment_circuit_state{model="m",deployment="d1"} 0"#), "{metrics}");
    let failed = r#"weir_deployment_attempts_total{model="m",deployment="d0",category="upstream_unavailable"} 2"#;
    assert!(metrics.contains(failed), "{metrics}");

    let config = gateway.config_path().to_str().unwrap().to_owned();
    let listing = weir_tests::run_cli(&["providers", "--config", &config], &[]);
    let text = String::from_utf8_lossy(&listing.stdout);
    assert!(listing.status.success(), "{text}");
    assert!(text.contains("deployment d0: endpoint http://127.0.0.1:"), "{text}");
    assert!(text.contains("deployment d1: endpoint"), "{text}");
}

/// With the fleet's PostgreSQL ledger, `/v1/usage?group_by=deployment` reads
/// the shipped records and groups them by the deployment that served each.
#[tokio::test]
async fn usage_groups_by_deployment_in_the_fleets_postgres_ledger() {
    let server = weir_tests::PostgresServer::start();
    let (a, b) = (FakeUpstream::start().await, FakeUpstream::start().await);
    let ledger = format!("\n[ledger]\npath = \"ledger.db\"\npostgres_url = \"{}\"\n", server.url());
    let gateway = Gateway::start(&format!("{}{ledger}", config(&[&a, &b], &[1, 1], ""))).await;
    for _ in 0..12 {
        let answer = gateway.post_json("/v1/chat/completions", &hello(), &[]).await;
        assert_eq!(answer.status, 200, "{}", answer.body);
    }
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while server.try_integer("SELECT COUNT(*) FROM ledger WHERE kind = 'close'").unwrap_or(0) < 12 {
        assert!(std::time::Instant::now() < deadline, "the records reached PostgreSQL");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let usage: Value = reqwest::get(gateway.url("/v1/usage?group_by=deployment")).await.unwrap().json().await.unwrap();
    let calls = |name: &str| {
        let groups = usage["groups"].as_array().unwrap();
        groups.iter().find(|group| group["deployment"] == name).map_or(0, |group| group["calls"].as_u64().unwrap())
    };
    assert_eq!(calls("d0"), a.request_count() as u64, "{usage}");
    assert_eq!(calls("d1"), b.request_count() as u64, "{usage}");
    assert_eq!(usage["total"]["calls"], 12);
}

/// With `[fleet]`, a circuit one gateway opened is open in the others: the
/// second gateway sends the dead deployment nothing.
#[tokio::test]
async fn with_a_fleet_one_gateways_open_circuit_is_seen_by_the_others() {
    let redis = weir_tests::RedisServer::start().await;
    let (bad, good) = (FakeUpstream::start().await, FakeUpstream::start().await);
    for _ in 0..20 {
        bad.push(openai_wire::server_error());
    }
    let extra = "max_retries = 2\ncircuit_failures = 2\ncircuit_open_secs = 600\n";
    let fleet = format!("\n[fleet]\nredis_url = \"{}\"\n", redis.url());
    let text = format!("{}{fleet}", config(&[&bad, &good], &[1, 1], extra));
    let (first, second) = (Gateway::start(&text).await, Gateway::start(&text).await);
    for _ in 0..40 {
        let answer = first.post_json("/v1/chat/completions", &hello(), &[]).await;
        assert_eq!(answer.status, 200, "{}", answer.body);
        if bad.request_count() >= 2 {
            break;
        }
    }
    assert_eq!(bad.request_count(), 2, "the first gateway opened the circuit");

    let circuit = |models: &Value| {
        let entry = models["data"].as_array().unwrap().iter().find(|model| model["id"] == "m").unwrap().clone();
        entry["weir"]["deployments"][0]["circuit"].as_str().unwrap().to_owned()
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let models: Value = reqwest::get(second.url("/v1/models")).await.unwrap().json().await.unwrap();
        if circuit(&models) == "open" {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "the second gateway never saw the circuit open");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for _ in 0..10 {
        let answer = second.post_json("/v1/chat/completions", &hello(), &[]).await;
        assert_eq!(answer.status, 200, "{}", answer.body);
    }
    assert_eq!(bad.request_count(), 2, "the second gateway sent the dead deployment nothing");
    second.wait_for_stderr("deployment circuit opened by another gateway of the fleet", Duration::from_secs(5)).await;
}

/// Each deployment keeps its own `max_concurrency`, and the entry admits their
/// sum: eight callers at once against two deployments of one slot each never
/// have more than one call in flight on either, and all are answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_deployment_keeps_its_own_concurrency_and_admission_sees_the_sum() {
    let (a, b) = (FakeUpstream::start().await, FakeUpstream::start().await);
    a.delay_answers(Duration::from_millis(200));
    b.delay_answers(Duration::from_millis(200));
    let mut text = config(&[&a, &b], &[1, 1], "");
    text = text.replace("weight = 1\n", "weight = 1\nmax_concurrency = 1\n");
    let gateway = Gateway::start(&text).await;
    let models: Value = reqwest::get(gateway.url("/v1/models")).await.unwrap().json().await.unwrap();
    let entry = models["data"].as_array().unwrap().iter().find(|model| model["id"] == "m").unwrap().clone();
    assert_eq!(entry["weir"]["deployments"].as_array().unwrap().len(), 2, "{entry}");

    let client = reqwest::Client::builder().timeout(Duration::from_secs(60)).build().unwrap();
    let calls: Vec<_> = (0..8)
        .map(|_| {
            let (client, url) = (client.clone(), gateway.url("/v1/chat/completions"));
            tokio::spawn(async move { client.post(url).json(&hello()).send().await.unwrap().status().as_u16() })
        })
        .collect();
    for call in calls {
        assert_eq!(call.await.unwrap(), 200);
    }
    assert_eq!(a.request_count() + b.request_count(), 8);
    assert!(a.most_concurrent() <= 1 && b.most_concurrent() <= 1, "{} {}", a.most_concurrent(), b.most_concurrent());
}

/// A deployment whose secret is not set cannot be addressed: calls go to the
/// others, nothing is sent to it, and nothing fails.
#[tokio::test]
async fn a_deployment_without_its_secret_is_passed_over() {
    let (unset, set) = (FakeUpstream::start().await, FakeUpstream::start().await);
    let text = format!(
        r#"
[[model]]
id = "m"
provider = "openai"
wire_id = "gpt-4.1-mini"
max_output_tokens = 1000
context_window = 100000
output_tokens = 20

[[model.deployment]]
id = "unset"
endpoint = "{unset}"
credential = "weir_deployment_test_unset_key"
weight = 100

[[model.deployment]]
id = "set"
endpoint = "{set}"
credential = "weir_deployment_test_set_key"
"#,
        unset = unset.base_url(),
        set = set.base_url()
    );
    let gateway = Gateway::start_with(&text, &[("WEIR_DEPLOYMENT_TEST_SET_KEY", "sk-test-set")], None).await;
    for _ in 0..5 {
        let answer = gateway.post_json("/v1/chat/completions", &hello(), &[]).await;
        assert_eq!(answer.status, 200, "{}", answer.body);
    }
    assert_eq!((unset.request_count(), set.request_count()), (0, 5));
    assert_eq!(set.received()[0].header("authorization"), Some("Bearer sk-test-set"), "its own credential");
}

/// A deployment whose requests per minute are spent is passed over while
/// another has room, instead of holding calls at its gate until it refills:
/// the heavier deployment takes its two requests, the rest go to the other at
/// once, and no call waited in admission.
#[tokio::test]
async fn a_deployment_whose_rpm_is_spent_is_passed_over_without_a_wait() {
    rpm_spent_is_passed_over("").await;
}

/// The same with the buckets in Redis (`[fleet]`): the gateway reads the
/// levels its own last take left there, so it asks Redis nothing more to choose.
#[tokio::test]
async fn with_a_fleet_a_deployment_whose_rpm_is_spent_is_passed_over_without_a_wait() {
    let redis = weir_tests::RedisServer::start().await;
    rpm_spent_is_passed_over(&format!("\n[fleet]\nredis_url = \"{}\"\n", redis.url())).await;
}

async fn rpm_spent_is_passed_over(fleet: &str) {
    let (small, large) = (FakeUpstream::start().await, FakeUpstream::start().await);
    let mut text = config(&[&small, &large], &[10, 1], "");
    text = text.replacen("weight = 10\n", "weight = 10\nrpm = 2\n", 1).replacen(
        "weight = 1\n",
        "weight = 1\nrpm = 100\n",
        1,
    );
    let gateway = Gateway::start(&format!("{text}\n[ledger]\npath = \"ledger.db\"\n{fleet}")).await;
    for _ in 0..20 {
        let answer = gateway.post_json("/v1/chat/completions", &hello(), &[]).await;
        assert_eq!(answer.status, 200, "{}", answer.body);
    }
    assert_eq!((small.request_count(), large.request_count()), (2, 18), "two calls spend d0's minute");
    let records = weir_tests::closed_records(&gateway.dir().join("ledger.db"));
    assert_eq!(records.len(), 20);
    for record in &records {
        let wait = record["attempts"][0]["admission_wait_ms"].as_u64().unwrap();
        assert!(wait < 1_000, "no call waits for d0's refill (30 s a request): {record}");
    }
}
