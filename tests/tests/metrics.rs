//! `/metrics` on the real `weir` binary: `admin` keys only on the gateway, alone
//! and keyless on `[metrics] listen`, and parsed by the Prometheus project's own
//! Python parser (strict OpenMetrics), which must find every family with bounded
//! label sets.

// Test code: a failed step should stop the test with its message.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeSet;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use weir_tests::python::parse_metrics;
use weir_tests::{FakeUpstream, Gateway, openai_wire, weir_binary};

const ANA: &str = "weir-ana-token-0123456789abcdef";
const OPS: &str = "weir-ops-token-0123456789abcdef";

/// Every family `/metrics` declares, with its OpenMetrics type. A family without a
/// series yet (no call closed) is left out of the text; the first five are always there.
const FAMILIES: [(&str, &str); 16] = [
    ("weir_calls_in_flight", "gauge"),
    ("weir_ledger_commit_seconds", "histogram"),
    ("weir_ledger_batch_records", "histogram"),
    ("weir_ledger_failures", "counter"),
    ("weir_admission_queue_depth", "gauge"),
    ("weir_calls", "counter"),
    ("weir_tokens", "counter"),
    ("weir_cost_usd", "counter"),
    ("weir_call_duration_seconds", "histogram"),
    ("weir_time_to_first_output_seconds", "histogram"),
    ("weir_admission_wait_seconds", "histogram"),
    ("weir_admission_in_flight", "gauge"),
    ("weir_admission_throttle_coefficient", "gauge"),
    ("weir_retries", "counter"),
    ("weir_attempts", "counter"),
    ("weir_component_faults", "counter"),
];

/// The family named `name`, if the text has it.
fn find<'a>(families: &'a Value, name: &str) -> Option<&'a Value> {
    families.as_array().unwrap().iter().find(|family| family["name"] == name)
}

/// One model on the fake upstream with declared prices and a retry; a caller key
/// (`ana`) and an `admin` one (`ops`); member labels on.
fn config(upstream: &FakeUpstream, extra: &str) -> String {
    format!(
        r#"
[[model]]
id = "chat"
provider = "openai-compatible"
endpoint = "{url}"
max_output_tokens = 1000
context_window = 10000
max_retries = 2
input_price = 1.0
output_price = 2.0

[[key]]
id = "ana-key"
member = "ana"
hash = "{ana}"

[[key]]
id = "ops-key"
member = "ops"
hash = "{ops}"
admin = true

[metrics]
member_labels = true
{extra}"#,
        url = upstream.base_url(),
        ana = weir_host::identity::hash_of(ANA),
        ops = weir_host::identity::hash_of(OPS),
    )
}

async fn get(url: &str, token: Option<&str>) -> (u16, String, String) {
    let mut request = reqwest::Client::new().get(url);
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let content_type =
        response.headers().get("content-type").map(|value| value.to_str().unwrap().to_owned()).unwrap_or_default();
    (status, content_type, response.text().await.unwrap())
}

async fn call(gateway: &Gateway, model: &str, stream: bool) -> u16 {
    let body = json!({
        "model": model, "max_tokens": 50, "stream": stream,
        "messages": [{"role": "user", "content": "Hello"}]
    });
    let response = reqwest::Client::new()
        .post(gateway.url("/v1/chat/completions"))
        .bearer_auth(ANA)
        .json(&body)
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    // Read to the end: a stream's call closes with its last byte.
    let _ = response.bytes().await.unwrap();
    status
}

/// The parsed family named `name`, or a panic listing the names there are.
fn family<'a>(families: &'a Value, name: &str) -> &'a Value {
    families.as_array().unwrap().iter().find(|family| family["name"] == name).unwrap_or_else(|| {
        let names: Vec<&Value> = families.as_array().unwrap().iter().map(|family| &family["name"]).collect();
        panic!("no family `{name}` among {names:?}")
    })
}

/// The value of the sample `name` whose labels include `labels`, if any.
fn sample(families: &Value, family_name: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    family(families, family_name)["samples"].as_array().unwrap().iter().find_map(|sample| {
        let matches = sample["name"] == name && labels.iter().all(|(key, value)| sample["labels"][*key] == *value);
        matches.then(|| sample["value"].as_f64().unwrap())
    })
}

/// Every label name a family's samples carry (`le` aside: a histogram's bucket); none
/// when the family has no series yet.
fn label_names(families: &Value, name: &str) -> BTreeSet<String> {
    let Some(family) = find(families, name) else { return BTreeSet::new() };
    family["samples"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|sample| sample["labels"].as_object().unwrap().keys().cloned())
        .filter(|label| label != "le")
        .collect()
}

/// The gateway's `/metrics`, read with the admin key and parsed.
async fn scrape(gateway: &Gateway) -> Value {
    let (status, content_type, text) = get(&gateway.url("/metrics"), Some(OPS)).await;
    assert_eq!(status, 200, "{text}");
    assert_eq!(content_type, "application/openmetrics-text; version=1.0.0; charset=utf-8");
    parse_metrics(&text)
}

#[tokio::test]
async fn metrics_need_an_admin_key_and_parse_as_openmetrics() {
    let upstream = FakeUpstream::start().await;
    let gateway = Gateway::start(&config(&upstream, "")).await;

    let (status, _, body) = get(&gateway.url("/metrics"), None).await;
    assert_eq!(status, 401, "no key: {body}");
    assert!(body.contains("invalid_api_key"), "{body}");
    let (status, _, body) = get(&gateway.url("/metrics"), Some(ANA)).await;
    assert_eq!(status, 403, "a caller key is not an operator's: {body}");
    assert!(body.contains("permission_denied"), "{body}");

    upstream.push(openai_wire::completion("Hi"));
    assert_eq!(call(&gateway, "chat", false).await, 200);
    assert_eq!(call(&gateway, "no-such-model", false).await, 404);

    let families = scrape(&gateway).await;
    for (name, kind) in &FAMILIES[..5] {
        assert_eq!(family(&families, name)["type"], *kind, "{name}");
    }
    for (name, kind) in FAMILIES {
        if let Some(family) = find(&families, name) {
            assert_eq!(family["type"], kind, "{name}");
        }
    }
    assert_eq!(family(&families, "weir_ledger_commit_seconds")["unit"], "seconds");
    // Admission's gauges are read at the scrape, one series per catalog model.
    for name in ["weir_admission_queue_depth", "weir_admission_in_flight", "weir_admission_throttle_coefficient"] {
        assert_eq!(sample(&families, name, name, &[("model", "chat")]), Some(0.0), "{name}");
        assert_eq!(label_names(&families, name), BTreeSet::from(["model".to_owned()]), "{name}");
    }
    assert_eq!(sample(&families, "weir_calls_in_flight", "weir_calls_in_flight", &[]), Some(0.0));
    // Bounded label sets: whatever a series holds, these are its only label names.
    let bounded: [(&str, &[&str]); 8] = [
        ("weir_calls", &["model", "provider", "category", "route", "operation", "member"]),
        ("weir_tokens", &["model", "kind"]),
        ("weir_cost_usd", &["model"]),
        ("weir_call_duration_seconds", &["model"]),
        ("weir_admission_wait_seconds", &["model"]),
        ("weir_retries", &["model", "signal"]),
        ("weir_attempts", &["reason"]),
        ("weir_component_faults", &["provider"]),
    ];
    for (name, allowed) in bounded {
        let allowed: BTreeSet<String> = allowed.iter().map(|label| (*label).to_owned()).collect();
        assert!(label_names(&families, name).is_subset(&allowed), "{name}: {:?}", label_names(&families, name));
    }
    for sample in find(&families, "weir_calls").map_or(&[][..], |family| family["samples"].as_array().unwrap()) {
        assert!(["chat", "unknown"].contains(&sample["labels"]["model"].as_str().unwrap()), "{sample}");
    }
}

/// The counts after four calls: one plain, one retried after a 429, one stream,
/// one for a model the catalog does not have. Needs the call path to hand its
/// records to the observers.
#[tokio::test]
async fn calls_are_counted_by_model_outcome_and_member() {
    let upstream = FakeUpstream::start().await;
    let gateway = Gateway::start(&config(&upstream, "")).await;
    upstream.push(openai_wire::completion_with_usage("Hi", 10, 4, 0, 0));
    assert_eq!(call(&gateway, "chat", false).await, 200);
    upstream.push(openai_wire::rate_limited(0));
    upstream.push(openai_wire::completion_with_usage("Hi again", 20, 6, 0, 0));
    assert_eq!(call(&gateway, "chat", false).await, 200);
    upstream.push(openai_wire::stream(openai_wire::sse_chunks(&["Hel", "lo"])));
    assert_eq!(call(&gateway, "chat", true).await, 200);
    assert_eq!(call(&gateway, "../../etc/passwd", false).await, 404);

    let families = scrape(&gateway).await;
    // Every family but the component faults (none happened: no series yet).
    for (name, kind) in FAMILIES.iter().filter(|(name, _)| *name != "weir_component_faults") {
        assert_eq!(family(&families, name)["type"], *kind, "{name}");
    }
    assert_eq!(family(&families, "weir_call_duration_seconds")["unit"], "seconds");
    assert_eq!(family(&families, "weir_cost_usd")["unit"], "usd");
    let ok = [("model", "chat"), ("provider", "openai-compatible"), ("category", "ok"), ("route", "openai_chat")];
    let ana = [ok.as_slice(), &[("member", "ana")]].concat();
    assert_eq!(sample(&families, "weir_calls", "weir_calls_total", &ana), Some(3.0));
    let lost = [("model", "unknown"), ("provider", "none"), ("category", "model_not_found")];
    assert_eq!(sample(&families, "weir_calls", "weir_calls_total", &lost), Some(1.0));
    assert_eq!(
        sample(&families, "weir_tokens", "weir_tokens_total", &[("model", "chat"), ("kind", "input")])
            .map(|n| n >= 30.0),
        Some(true)
    );
    assert_eq!(
        sample(&families, "weir_retries", "weir_retries_total", &[("model", "chat"), ("signal", "rate_limited")]),
        Some(1.0)
    );
    assert_eq!(sample(&families, "weir_attempts", "weir_attempts_total", &[("reason", "first")]), Some(3.0));
    assert_eq!(sample(&families, "weir_attempts", "weir_attempts_total", &[("reason", "retry")]), Some(1.0));
    assert_eq!(
        sample(&families, "weir_call_duration_seconds", "weir_call_duration_seconds_count", &[("model", "chat")]),
        Some(3.0)
    );
    assert_eq!(
        sample(
            &families,
            "weir_time_to_first_output_seconds",
            "weir_time_to_first_output_seconds_count",
            &[("model", "chat")]
        ),
        Some(1.0)
    );
    assert_eq!(
        sample(&families, "weir_admission_wait_seconds", "weir_admission_wait_seconds_count", &[("model", "chat")]),
        Some(4.0)
    );
    let cost = sample(&families, "weir_cost_usd", "weir_cost_usd_total", &[("model", "chat")]);
    assert!(cost.is_some_and(|cost| cost > 0.0), "declared prices give a cost: {cost:?}");
    assert_eq!(sample(&families, "weir_calls_in_flight", "weir_calls_in_flight", &[]), Some(0.0));
    let text = get(&gateway.url("/metrics"), Some(OPS)).await.2;
    assert!(!text.contains("passwd"), "a caller's model name never becomes a label");
}

/// `[metrics] enabled = false`: nothing to expose, so `/metrics` is 404 even to an
/// admin key, and calls go on (and are recorded) without it.
#[tokio::test]
async fn metrics_off_answers_404_and_calls_go_on() {
    let upstream = FakeUpstream::start().await;
    let dir = tempfile::tempdir().unwrap();
    let ledger = dir.path().join("ledger.db");
    let text = config(&upstream, &format!("[ledger]\npath = {:?}\n", ledger.to_str().unwrap()))
        .replace("member_labels = true", "enabled = false");
    let gateway = Gateway::start(&text).await;
    upstream.push(openai_wire::completion("Hi"));
    assert_eq!(call(&gateway, "chat", false).await, 200);
    let (status, _, body) = get(&gateway.url("/metrics"), Some(OPS)).await;
    assert_eq!(status, 404, "{body}");
    assert!(!body.contains("weir_"), "{body}");
    let usage: Value = reqwest::Client::new()
        .get(gateway.url("/v1/usage"))
        .bearer_auth(OPS)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(usage["total"]["calls"], 1, "the call is still on the record: {usage}");
}

/// A port nothing listens on now (bound, then released).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

#[tokio::test]
async fn metrics_listen_serves_only_metrics_without_a_key() {
    let upstream = FakeUpstream::start().await;
    let port = free_port();
    let gateway = Gateway::start(&config(&upstream, &format!("listen = \"127.0.0.1:{port}\"\n"))).await;
    let base = format!("http://127.0.0.1:{port}");

    let (status, content_type, text) = get(&format!("{base}/metrics"), None).await;
    assert_eq!(status, 200, "{text}");
    assert_eq!(content_type, "application/openmetrics-text; version=1.0.0; charset=utf-8");
    let families = parse_metrics(&text);
    assert_eq!(family(&families, "weir_calls_in_flight")["type"], "gauge");
    for path in ["/health", "/v1/models", "/v1/providers", "/metrics/", "/"] {
        assert_eq!(get(&format!("{base}{path}"), None).await.0, 404, "{path}");
    }
    let posted = reqwest::Client::new()
        .post(format!("{base}/v1/chat/completions"))
        .json(&json!({"model": "chat", "messages": [{"role": "user", "content": "Hi"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(posted.status().as_u16(), 404, "no calls on the metrics address");
    assert!(upstream.received().is_empty());
    // The gateway's own /metrics still wants the admin key.
    assert_eq!(get(&gateway.url("/metrics"), None).await.0, 401);
}

#[tokio::test]
async fn metrics_listen_on_the_gateway_address_is_refused() {
    let upstream = FakeUpstream::start().await;
    let port = free_port();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("weir.toml");
    std::fs::write(&path, config(&upstream, &format!("listen = \"127.0.0.1:{port}\"\n"))).unwrap();
    let mut child = Command::new(weir_binary())
        .args(["serve", "--config", path.to_str().unwrap(), "--listen", &format!("127.0.0.1:{port}")])
        .env("WEIR_CACHE_DIR", weir_tests::gateway::shared_cache_dir())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > Duration::from_secs(60) {
            child.kill().unwrap();
            panic!("weir serve did not refuse [metrics] listen on its own address");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(stderr.contains("[metrics] listen") && stderr.contains("the gateway's own address"), "{stderr}");
    assert!(output.stdout.is_empty(), "it never listened");
}
