//! Hostile callers at the real gateway's door: no key, a wrong key, an expired
//! key, a key outside its models, a key revoked by editing the file while the
//! server runs, an operator endpoint asked for without `admin`, and `weir serve`
//! refusing to open a non-loopback port with no keys. Every test asserts what the
//! upstream received, not only the status.

// Test code: a failed step should stop the test with its message.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use serde_json::{Value, json};
use weir_tests::{FakeUpstream, Gateway, run_cli};

const ANA: &str = "weir-ana-token-0123456789abcdef";
const BOB: &str = "weir-bob-token-0123456789abcdef";
const OLD: &str = "weir-old-token-0123456789abcdef";
const OPS: &str = "weir-ops-token-0123456789abcdef";

fn hash(token: &str) -> String {
    weir_host::identity::hash_of(token)
}

/// Two models on the fake; ana may call both, bob only `small`, old expired in
/// 2020, ops is an admin.
fn config(upstream: &FakeUpstream, keys: &str) -> String {
    format!(
        r#"
[[model]]
id = "big"
provider = "openai-compatible"
endpoint = "{url}"
max_output_tokens = 1000
context_window = 10000

[[model]]
id = "small"
provider = "openai-compatible"
endpoint = "{url}"
max_output_tokens = 1000
context_window = 10000
{keys}"#,
        url = upstream.base_url()
    )
}

fn all_keys() -> String {
    format!(
        r#"
[[key]]
id = "ana-key"
member = "ana"
team = "search"
hash = "{ana}"

[[key]]
id = "bob-key"
member = "bob"
hash = "{bob}"
models = ["small"]

[[key]]
id = "old-key"
member = "old"
hash = "{old}"
expires = "2020-01-01T00:00:00Z"

[[key]]
id = "ops-key"
member = "ops"
hash = "{ops}"
admin = true
"#,
        ana = hash(ANA),
        bob = hash(BOB),
        old = hash(OLD),
        ops = hash(OPS)
    )
}

fn hello(model: &str) -> Value {
    json!({"model": model, "max_tokens": 20, "messages": [{"role": "user", "content": "Hello"}]})
}

async fn openai(gateway: &Gateway, token: Option<&str>, model: &str) -> (u16, Value) {
    let mut request = reqwest::Client::new().post(gateway.url("/v1/chat/completions")).json(&hello(model));
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let response = request.send().await.unwrap();
    (response.status().as_u16(), response.json().await.unwrap())
}

async fn anthropic(gateway: &Gateway, token: Option<&str>, model: &str) -> (u16, Value) {
    let mut request = reqwest::Client::new().post(gateway.url("/v1/messages")).json(&hello(model));
    if let Some(token) = token {
        request = request.header("x-api-key", token);
    }
    let response = request.send().await.unwrap();
    (response.status().as_u16(), response.json().await.unwrap())
}

async fn get(gateway: &Gateway, token: Option<&str>, path: &str) -> (u16, Value) {
    let mut request = reqwest::Client::new().get(gateway.url(path));
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let response = request.send().await.unwrap();
    (response.status().as_u16(), response.json().await.unwrap())
}

#[tokio::test]
async fn a_missing_wrong_or_expired_key_is_a_401_in_each_envelope_and_nothing_goes_upstream() {
    let upstream = FakeUpstream::start().await;
    let gateway = Gateway::start(&config(&upstream, &all_keys())).await;
    for token in [None, Some("weir-not-a-key"), Some(OLD)] {
        let (status, body) = openai(&gateway, token, "small").await;
        assert_eq!(status, 401, "{body}");
        assert_eq!(body["error"]["code"], "invalid_api_key", "{body}");
        let (status, body) = anthropic(&gateway, token, "small").await;
        assert_eq!(status, 401, "{body}");
        assert_eq!(body["type"], "error", "{body}");
        assert_eq!(body["error"]["type"], "authentication_error", "{body}");
        if let Some(token) = token {
            assert!(!body.to_string().contains(token), "the token is never echoed: {body}");
        }
    }
    assert!(upstream.received().is_empty(), "nothing reached the upstream");
    let log = gateway.stderr();
    for token in ["weir-not-a-key", OLD] {
        assert!(!log.contains(token), "the token is never logged");
    }
    assert!(log.contains("old-key"), "the expired key is named by its id: {log}");
}

#[tokio::test]
async fn a_valid_key_passes_in_both_dialects_and_only_to_its_models() {
    let upstream = FakeUpstream::start().await;
    let gateway = Gateway::start(&config(&upstream, &all_keys())).await;
    assert_eq!(openai(&gateway, Some(ANA), "big").await.0, 200);
    assert_eq!(anthropic(&gateway, Some(BOB), "small").await.0, 200);
    assert_eq!(upstream.received().len(), 2);

    let (status, body) = openai(&gateway, Some(BOB), "big").await;
    assert_eq!(status, 403, "{body}");
    assert_eq!(body["error"]["code"], "permission_denied", "{body}");
    let (status, body) = anthropic(&gateway, Some(BOB), "big").await;
    assert_eq!(status, 403, "{body}");
    assert_eq!(body["error"]["type"], "permission_error", "{body}");
    assert_eq!(upstream.received().len(), 2, "a model outside the key's list sends nothing");

    // The model is named only by the body: a query parameter changes nothing.
    let response = reqwest::Client::new()
        .post(gateway.url("/v1/chat/completions?model=small"))
        .bearer_auth(BOB)
        .json(&hello("big"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 403);
    assert_eq!(upstream.received().len(), 2);
}

#[tokio::test]
async fn operator_endpoints_need_an_admin_key_and_models_show_only_what_a_key_may_call() {
    let upstream = FakeUpstream::start().await;
    let gateway = Gateway::start(&config(&upstream, &all_keys())).await;
    assert_eq!(get(&gateway, None, "/v1/providers").await.0, 401);
    let (status, body) = get(&gateway, Some(BOB), "/v1/providers").await;
    assert_eq!((status, body["error"]["code"].as_str()), (403, Some("permission_denied")), "{body}");
    let (status, body) = get(&gateway, Some(OPS), "/v1/providers").await;
    assert_eq!(status, 200, "{body}");
    assert!(body["providers"].as_array().is_some_and(|p| !p.is_empty()), "{body}");

    assert_eq!(get(&gateway, None, "/v1/models").await.0, 401);
    let (_, bob) = get(&gateway, Some(BOB), "/v1/models").await;
    let ids: Vec<&str> = bob["data"].as_array().unwrap().iter().filter_map(|m| m["id"].as_str()).collect();
    assert_eq!(ids, ["small"], "{bob}");
    assert!(bob["data"][0].get("weir").is_none(), "no operator details without admin: {bob}");
    let (_, ops) = get(&gateway, Some(OPS), "/v1/models").await;
    assert_eq!(ops["data"].as_array().unwrap().len(), 2);
    assert!(ops["data"][0]["weir"]["provider"].is_string(), "{ops}");
    assert!(upstream.received().is_empty());
}

#[tokio::test]
async fn a_key_revoked_by_editing_the_file_is_refused_without_a_restart_and_a_bad_file_keeps_the_old_keys() {
    let upstream = FakeUpstream::start().await;
    let gateway = Gateway::start(&config(&upstream, &all_keys())).await;
    assert_eq!(openai(&gateway, Some(BOB), "small").await.0, 200);

    // A broken file: the old keys stay in force, and the log says why.
    std::fs::write(gateway.config_path(), format!("{}\n[[key]]\nid = \"x\"\n", config(&upstream, &all_keys())))
        .unwrap();
    gateway.wait_for_stderr("caller keys not reloaded", Duration::from_secs(20)).await;
    assert_eq!(openai(&gateway, Some(BOB), "small").await.0, 200, "the previous keys still work");

    // Bob's key removed.
    let without_bob = all_keys().replace(&format!("hash = \"{}\"", hash(BOB)), &format!("hash = \"{}\"", hash("x")));
    std::fs::write(gateway.config_path(), config(&upstream, &without_bob)).unwrap();
    gateway.wait_for_stderr("caller keys reloaded", Duration::from_secs(20)).await;
    let (status, body) = openai(&gateway, Some(BOB), "small").await;
    assert_eq!(status, 401, "{body}");
    assert_eq!(openai(&gateway, Some(ANA), "small").await.0, 200, "other keys unaffected");
    assert_eq!(upstream.received().len(), 3, "the revoked key's call sent nothing");
}

#[tokio::test]
async fn without_keys_a_non_loopback_listen_refuses_to_start_unless_the_operator_allows_it() {
    let upstream = FakeUpstream::start().await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("weir.toml");
    std::fs::write(&path, config(&upstream, "")).unwrap();
    let output = run_cli(&["serve", "--config", path.to_str().unwrap(), "--listen", "0.0.0.0:0"], &[]);
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("no [[key]]") && stderr.contains("allow_unauthenticated"), "{stderr}");

    // With the operator's explicit choice it serves (and answers without a key).
    let open = format!("allow_unauthenticated = true\nlisten = \"0.0.0.0:0\"\n{}", config(&upstream, ""));
    let gateway = Gateway::start(&open).await;
    assert_eq!(openai(&gateway, None, "small").await.0, 200);
    assert_eq!(upstream.received().len(), 1);
}

#[test]
fn keys_new_prints_a_token_once_and_lines_that_admit_it() {
    let output = run_cli(&["keys", "new", "--member", "ana", "--id", "ana-laptop", "--team", "search"], &[]);
    assert!(output.status.success(), "{output:?}");
    let stdout = String::from_utf8(output.stdout).unwrap();
    let token =
        stdout.lines().find_map(|line| line.strip_prefix("# weir-")).map(|rest| format!("weir-{rest}")).unwrap();
    let lines: String = stdout.lines().filter(|line| !line.starts_with('#')).collect::<Vec<_>>().join("\n");
    assert!(!lines.contains(&token), "the lines to paste hold only the hash");
    let config = weir_host::Config::from_toml(&lines, "pasted").unwrap();
    assert_eq!(config.keys[0].id, "ana-laptop");
    assert_eq!(config.keys[0].team.as_deref(), Some("search"));
    assert_eq!(config.keys[0].hash, hash(&token));
}

#[tokio::test]
async fn a_keys_rpm_is_admitted_before_the_call_like_a_models() {
    let upstream = FakeUpstream::start().await;
    let keys = format!("[[key]]\nid = \"slow\"\nmember = \"ana\"\nhash = \"{}\"\nrpm = 2\n", hash(ANA));
    let gateway = Gateway::start(&config(&upstream, &keys)).await;
    let client = reqwest::Client::new();
    let mut statuses = Vec::new();
    for _ in 0..3 {
        let response = client
            .post(gateway.url("/v1/chat/completions"))
            .bearer_auth(ANA)
            .header("x-weir-deadline-ms", "2000")
            .json(&hello("small"))
            .send()
            .await
            .unwrap();
        statuses.push(response.status().as_u16());
    }
    // The third request cannot fit the key's bucket before its deadline (the
    // next slot is ~30 s away): it fails at once, and is never sent.
    assert_eq!(statuses, [200, 200, 504]);
    assert_eq!(upstream.received().len(), 2);
}
