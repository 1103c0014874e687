//! The admin API (`/admin/v1/...`) through the real gateway binary: keys
//! created, used, rotated, expired and revoked at run time; model lists,
//! limits and budgets changed between two calls; every change an audit row
//! of a chain `weir ledger verify` checks; the file's keys and the plane's
//! never sharing an id; non-admin keys refused; typed 400s; `weir admin`
//! against a running gateway; and two gateways sharing PostgreSQL and Redis
//! honouring each other's changes within a second.

// Test code: a failed step should stop the test with its message.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use weir_tests::{FakeUpstream, Gateway, PostgresServer, run_cli};

const ROOT: &str = "weir-root-admin-token-0123456789abcdef";
const PLAIN: &str = "weir-plain-caller-token-0123456789abcdef";

fn config(upstream: &FakeUpstream, ledger: &str, extra: &str) -> String {
    let hash = weir_host::identity::hash_of;
    format!(
        r#"[[model]]
id = "gpt"
provider = "openai"
wire_id = "gpt-4.1"
endpoint = "{url}"
credential = "weir-test-key"
max_output_tokens = 1000
context_window = 100000
output_tokens = 100
max_retries = 0

[[model]]
id = "gpt-mini"
provider = "openai"
wire_id = "gpt-4.1-mini"
endpoint = "{url}"
credential = "weir-test-key"
max_output_tokens = 1000
context_window = 100000
output_tokens = 100
max_retries = 0

[[key]]
id = "root"
member = "ops"
hash = "{root}"
admin = true

[[key]]
id = "plain"
member = "bob"
hash = "{plain}"

[ledger]
path = "ledger.db"
{ledger}
{extra}
"#,
        url = upstream.base_url(),
        root = hash(ROOT),
        plain = hash(PLAIN),
    )
}

async fn gateway(upstream: &FakeUpstream, extra: &str) -> Gateway {
    Gateway::start_with(&config(upstream, "", extra), &[("WEIR_TEST_KEY", "sk-upstream-0123456789")], None).await
}

async fn send(gateway: &Gateway, method: reqwest::Method, path: &str, token: &str, body: Option<&str>) -> (u16, Value) {
    let mut request = reqwest::Client::new().request(method, gateway.url(path)).bearer_auth(token);
    if let Some(body) = body {
        request = request.header("content-type", "application/json").body(body.to_owned());
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

async fn get(gateway: &Gateway, path: &str, token: &str) -> (u16, Value) {
    send(gateway, reqwest::Method::GET, path, token, None).await
}

async fn post(gateway: &Gateway, path: &str, token: &str, body: Value) -> (u16, Value) {
    send(gateway, reqwest::Method::POST, path, token, Some(&body.to_string())).await
}

/// One chat call with `token` on `model`: its status and body.
async fn call(gateway: &Gateway, token: &str, model: &str) -> (u16, Value) {
    let body = json!({"model": model, "messages": [{"role": "user", "content": "hello"}], "max_tokens": 50});
    post(gateway, "/v1/chat/completions", token, body).await
}

/// Creates a key through the API; its token.
async fn create(gateway: &Gateway, body: Value) -> String {
    let (status, created) = post(gateway, "/admin/v1/keys", ROOT, body).await;
    assert_eq!(status, 201, "{created}");
    created["token"].as_str().unwrap().to_owned()
}

/// Polls until `check` holds, for at most `within`; how long it took.
async fn until<F, Fut>(within: Duration, what: &str, mut check: F) -> Duration
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let started = Instant::now();
    loop {
        if check().await {
            return started.elapsed();
        }
        assert!(started.elapsed() < within, "{what} did not happen within {within:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn a_key_created_at_run_time_calls_and_once_revoked_is_refused_at_once() {
    let upstream = FakeUpstream::start().await;
    let gateway = gateway(&upstream, "").await;

    let (status, created) =
        post(&gateway, "/admin/v1/keys", ROOT, json!({"id": "ana-key", "member": "ana", "team": "search"})).await;
    assert_eq!(status, 201, "{created}");
    let token = created["token"].as_str().unwrap().to_owned();
    assert!(token.starts_with("weir-") && token.len() == 69, "{token}");
    assert_eq!(created["key"]["source"], "runtime");
    assert_eq!(created["key"]["status"], "active");
    assert_eq!(created["key"]["created_by"], "root");
    assert!(created["key"].get("hash").is_none(), "no hash is shown: {created}");

    let (status, answer) = call(&gateway, &token, "gpt").await;
    assert_eq!(status, 200, "{answer}");
    // Shown once: reading the key back answers no token.
    let (status, read) = get(&gateway, "/admin/v1/keys/ana-key", ROOT).await;
    assert_eq!(status, 200);
    assert!(!read.to_string().contains(&token), "{read}");
    let (_, listed) = get(&gateway, "/admin/v1/keys?member=ana", ROOT).await;
    assert_eq!(listed["data"].as_array().unwrap().len(), 1, "{listed}");
    assert!(!listed.to_string().contains(&token));

    let (status, revoked) = post(&gateway, "/admin/v1/keys/ana-key/revoke", ROOT, json!({})).await;
    assert_eq!(status, 200, "{revoked}");
    assert_eq!(revoked["key"]["status"], "revoked");
    let took = until(Duration::from_secs(1), "the revoked key's refusal", || async {
        call(&gateway, &token, "gpt").await.0 == 401
    })
    .await;
    assert!(took < Duration::from_secs(1));
    let (status, again) = post(&gateway, "/admin/v1/keys/ana-key/revoke", ROOT, json!({})).await;
    assert_eq!((status, again["error"]["code"].as_str()), (409, Some("key_revoked")));

    // Only the token's hash was stored: no file of the plane holds the token.
    for entry in std::fs::read_dir(gateway.dir()).unwrap() {
        let path = entry.unwrap().path();
        if path.file_name().unwrap().to_string_lossy().starts_with("admin.db") {
            let bytes = std::fs::read(&path).unwrap();
            assert!(
                !bytes.windows(token.len()).any(|window| window == token.as_bytes()),
                "{} holds the token",
                path.display()
            );
        }
    }
    let connection = rusqlite::Connection::open(gateway.dir().join("admin.db")).unwrap();
    let body: String = connection
        .query_row("SELECT body FROM admin_objects WHERE kind = 'key' AND id = 'ana-key'", [], |row| row.get(0))
        .unwrap();
    assert!(body.contains(&weir_host::identity::hash_of(&token)) && !body.contains(&token), "{body}");
}

#[tokio::test]
async fn a_rotation_keeps_both_tokens_for_its_grace_then_only_the_new_one() {
    let upstream = FakeUpstream::start().await;
    let gateway = gateway(&upstream, "").await;
    let old = create(&gateway, json!({"id": "svc", "member": "svc"})).await;
    let (status, rotated) = post(&gateway, "/admin/v1/keys/svc/rotate", ROOT, json!({"grace_secs": 2})).await;
    assert_eq!(status, 200, "{rotated}");
    let new = rotated["token"].as_str().unwrap().to_owned();
    assert_ne!(new, old);
    assert!(rotated["key"]["rotation_grace_until"].is_string(), "{rotated}");
    assert_eq!(call(&gateway, &old, "gpt").await.0, 200, "the old token works during the grace");
    assert_eq!(call(&gateway, &new, "gpt").await.0, 200);
    until(Duration::from_secs(4), "the end of the grace", || async { call(&gateway, &old, "gpt").await.0 == 401 })
        .await;
    assert_eq!(call(&gateway, &new, "gpt").await.0, 200, "the new token outlives the grace");

    // A revoke during a grace ends both tokens at once.
    let (_, rotated) = post(&gateway, "/admin/v1/keys/svc/rotate", ROOT, json!({"grace_secs": 600})).await;
    let newest = rotated["token"].as_str().unwrap().to_owned();
    assert_eq!(call(&gateway, &new, "gpt").await.0, 200, "in its grace");
    post(&gateway, "/admin/v1/keys/svc/revoke", ROOT, json!({})).await;
    assert_eq!(call(&gateway, &new, "gpt").await.0, 401);
    assert_eq!(call(&gateway, &newest, "gpt").await.0, 401);
    let (status, error) = post(&gateway, "/admin/v1/keys/svc/rotate", ROOT, json!({"grace_secs": 86_401})).await;
    assert_eq!((status, error["error"]["code"].as_str()), (400, Some("invalid_field")));
}

#[tokio::test]
async fn an_expired_key_is_refused_and_says_so() {
    let upstream = FakeUpstream::start().await;
    let gateway = gateway(&upstream, "").await;
    let token = create(&gateway, json!({"id": "temp", "member": "ana"})).await;
    assert_eq!(call(&gateway, &token, "gpt").await.0, 200);
    let (status, expired) = post(&gateway, "/admin/v1/keys/temp/expire", ROOT, json!({})).await;
    assert_eq!(status, 200, "{expired}");
    let (status, refused) = call(&gateway, &token, "gpt").await;
    assert_eq!(status, 401, "{refused}");
    assert!(refused["error"]["message"].as_str().unwrap().contains("expired"), "{refused}");
    let (_, listed) = get(&gateway, "/admin/v1/keys?status=expired", ROOT).await;
    assert_eq!(listed["data"][0]["id"], "temp", "{listed}");
    // A key created already past its expiry is refused from its first call.
    let past = create(&gateway, json!({"id": "past", "member": "ana", "expires": "2020-01-01T00:00:00Z"})).await;
    assert_eq!(call(&gateway, &past, "gpt").await.0, 401);
}

#[tokio::test]
async fn model_lists_and_limits_changed_at_run_time_hold_from_the_next_call() {
    let upstream = FakeUpstream::start().await;
    let gateway = gateway(&upstream, "").await;
    let token = create(&gateway, json!({"id": "narrow", "member": "ana", "models": ["gpt-mini"]})).await;
    assert_eq!(call(&gateway, &token, "gpt-mini").await.0, 200);
    let (status, refused) = call(&gateway, &token, "gpt").await;
    assert_eq!(status, 403, "{refused}");

    let (status, updated) =
        post(&gateway, "/admin/v1/keys/narrow", ROOT, json!({"models": ["gpt", "gpt-mini"], "rpm": 1})).await;
    assert_eq!(status, 200, "{updated}");
    assert_eq!(updated["key"]["rpm"], 1);
    let (status, answer) = call(&gateway, &token, "gpt").await;
    assert_eq!(status, 200, "the widened list admits the next call: {answer}");
    // The next slot is a minute away, past the call's deadline: refused at once, never sent.
    let sent = upstream.received().len();
    let limited = reqwest::Client::new()
        .post(gateway.url("/v1/chat/completions"))
        .bearer_auth(&token)
        .header("x-weir-deadline-ms", "2000")
        .json(&json!({"model": "gpt", "messages": [{"role": "user", "content": "hello"}], "max_tokens": 50}))
        .send()
        .await
        .unwrap();
    assert_eq!(limited.status().as_u16(), 504, "rpm = 1 holds from the next call");
    assert_eq!(upstream.received().len(), sent, "nothing was sent");

    let (status, _) = post(&gateway, "/admin/v1/keys/narrow", ROOT, json!({"rpm": null, "models": null})).await;
    assert_eq!(status, 200);
    assert_eq!(call(&gateway, &token, "gpt").await.0, 200, "no rpm, every model");

    let (status, unknown) = post(&gateway, "/admin/v1/keys/narrow", ROOT, json!({"models": ["gpt-9"]})).await;
    assert_eq!((status, unknown["error"]["code"].as_str()), (400, Some("unknown_model")), "{unknown}");
}

/// A runtime key's `default_effort` reaches the wire as a file key's does,
/// changes from the next call, and an unknown word is a typed 400.
#[tokio::test]
async fn a_runtime_keys_default_effort_reaches_the_wire_and_changes_at_run_time() {
    let upstream = FakeUpstream::start().await;
    let reasoning = format!(
        "[[model]]\nid = \"o3\"\nprovider = \"openai\"\nwire_id = \"o3\"\nendpoint = \"{}\"\n\
         credential = \"weir-test-key\"\nmax_output_tokens = 1000\ncontext_window = 100000\noutput_tokens = 100\n\
         max_retries = 0\nreasoning = \"effort\"\n",
        upstream.base_url()
    );
    let gateway = gateway(&upstream, &reasoning).await;
    let token = create(&gateway, json!({"id": "thinker", "member": "ana", "default_effort": "low"})).await;
    let sent_effort = || upstream.received().last().unwrap().json()["reasoning_effort"].clone();
    assert_eq!(call(&gateway, &token, "o3").await.0, 200);
    assert_eq!(sent_effort(), json!("low"), "the key's default");

    let (status, updated) = post(&gateway, "/admin/v1/keys/thinker", ROOT, json!({"default_effort": "high"})).await;
    assert_eq!((status, &updated["key"]["default_effort"]), (200, &json!("high")), "{updated}");
    assert_eq!(call(&gateway, &token, "o3").await.0, 200);
    assert_eq!(sent_effort(), json!("high"), "changed from the next call");

    let (status, refused) = post(&gateway, "/admin/v1/keys/thinker", ROOT, json!({"default_effort": "loud"})).await;
    assert_eq!(status, 400, "{refused}");
    assert!(refused["error"]["message"].as_str().unwrap().contains("default_effort"), "{refused}");
}

#[tokio::test]
async fn a_budget_raised_at_run_time_admits_the_call_it_refused() {
    let upstream = FakeUpstream::start().await;
    let gateway = gateway(&upstream, "").await;
    let token = create(&gateway, json!({"id": "tight", "member": "carla", "team": "lab"})).await;
    let (status, set) = post(&gateway, "/admin/v1/members/carla", ROOT, json!({"budget": {"daily_tokens": 20}})).await;
    assert_eq!(status, 200, "{set}");
    let (status, refused) = call(&gateway, &token, "gpt").await;
    assert_eq!(status, 429, "{refused}");
    assert_eq!(refused["error"]["type"], "budget_exhausted");

    post(&gateway, "/admin/v1/members/carla", ROOT, json!({"budget": {"daily_tokens": 1_000_000}})).await;
    let (status, answer) = call(&gateway, &token, "gpt").await;
    assert_eq!(status, 200, "the raised budget admits it: {answer}");
    let (_, budgets) = get(&gateway, "/admin/v1/budgets", ROOT).await;
    let carla = budgets["data"].as_array().unwrap().iter().find(|b| b["name"] == "carla").unwrap().clone();
    assert_eq!(carla["limit"], 1_000_000, "{budgets}");
    assert!(carla["spent"].as_u64().unwrap() > 0, "{carla}");
    // `weir ledger query --config` shows the plane's budgets beside the file's.
    let queried = run_cli(&["ledger", "query", "--config", gateway.config_path().to_str().unwrap()], &[]);
    let stdout = String::from_utf8_lossy(&queried.stdout);
    assert!(queried.status.success(), "{stdout}{}", String::from_utf8_lossy(&queried.stderr));
    let line = stdout.lines().find(|line| line.starts_with("member") && line.contains("carla")).unwrap_or_default();
    assert!(line.contains("1000000"), "{stdout}");

    // A team budget, and its removal.
    post(&gateway, "/admin/v1/teams/lab", ROOT, json!({"budget": {"max_call_tokens": 10}})).await;
    let (status, ceiling) = call(&gateway, &token, "gpt").await;
    assert_eq!((status, ceiling["error"]["type"].as_str()), (400, Some("call_budget_exceeded")), "{ceiling}");
    let (status, _) = send(&gateway, reqwest::Method::DELETE, "/admin/v1/teams/lab", ROOT, None).await;
    assert_eq!(status, 200);
    assert_eq!(call(&gateway, &token, "gpt").await.0, 200);
    let (_, teams) = get(&gateway, "/admin/v1/teams", ROOT).await;
    assert_eq!(teams["data"], json!([]), "{teams}");
}

#[tokio::test]
async fn every_admin_route_refuses_a_key_that_is_not_admin() {
    let upstream = FakeUpstream::start().await;
    let gateway = gateway(&upstream, "").await;
    let token = create(&gateway, json!({"id": "worker", "member": "ana"})).await;
    let routes: [(reqwest::Method, &str); 12] = [
        (reqwest::Method::GET, "/admin/v1/keys"),
        (reqwest::Method::POST, "/admin/v1/keys"),
        (reqwest::Method::GET, "/admin/v1/keys/worker"),
        (reqwest::Method::POST, "/admin/v1/keys/worker"),
        (reqwest::Method::POST, "/admin/v1/keys/worker/rotate"),
        (reqwest::Method::POST, "/admin/v1/keys/worker/revoke"),
        (reqwest::Method::POST, "/admin/v1/keys/worker/expire"),
        (reqwest::Method::GET, "/admin/v1/members"),
        (reqwest::Method::POST, "/admin/v1/members/ana"),
        (reqwest::Method::DELETE, "/admin/v1/teams/lab"),
        (reqwest::Method::GET, "/admin/v1/budgets"),
        (reqwest::Method::GET, "/admin/v1/changes"),
    ];
    for caller in [PLAIN, token.as_str()] {
        for (method, path) in &routes {
            let body = (*method == reqwest::Method::POST).then_some(r#"{"admin": true, "member": "x"}"#);
            let (status, refused) = send(&gateway, method.clone(), path, caller, body).await;
            assert_eq!(status, 403, "{method} {path}: {refused}");
            assert_eq!(refused["error"]["code"], "permission_denied");
        }
    }
    // It did not make itself admin.
    let (_, read) = get(&gateway, "/admin/v1/keys/worker", ROOT).await;
    assert_eq!(read["admin"], false);
    assert_eq!(get(&gateway, "/admin/v1/keys", "weir-not-a-key").await.0, 401);
}

#[tokio::test]
async fn malformed_requests_get_typed_400s() {
    let upstream = FakeUpstream::start().await;
    let gateway = gateway(&upstream, "").await;
    let cases: [(&str, &str, &str); 8] = [
        ("/admin/v1/keys", "not json", "malformed_body"),
        ("/admin/v1/keys", r#"{"member": "a", "colour": "blue"}"#, "malformed_body"),
        ("/admin/v1/keys", r#"{"member": 7}"#, "malformed_body"),
        ("/admin/v1/keys", r#"{"member": "a", "id": "no spaces"}"#, "invalid_field"),
        ("/admin/v1/keys", r#"{"member": "a", "expires": "next tuesday"}"#, "invalid_field"),
        ("/admin/v1/keys", r#"{"member": "a", "models": ["nothing-by-this-name"]}"#, "unknown_model"),
        ("/admin/v1/keys", r#"{"member": "a", "rpm": 0}"#, "invalid_field"),
        ("/admin/v1/members/ana", r#"{"budget": {"daily_usd": -5}}"#, "invalid_field"),
    ];
    for (path, body, code) in cases {
        let (status, refused) = send(&gateway, reqwest::Method::POST, path, ROOT, Some(body)).await;
        assert_eq!((status, refused["error"]["code"].as_str()), (400, Some(code)), "{body}: {refused}");
    }
    let (status, refused) = get(&gateway, "/admin/v1/keys?limit=0", ROOT).await;
    assert_eq!((status, refused["error"]["code"].as_str()), (400, Some("invalid_field")));
    let (status, refused) = get(&gateway, "/admin/v1/keys?status=sleeping", ROOT).await;
    assert_eq!((status, refused["error"]["code"].as_str()), (400, Some("invalid_field")));
    let (status, refused) = get(&gateway, "/admin/v1/changes?after=x", ROOT).await;
    assert_eq!((status, refused["error"]["code"].as_str()), (400, Some("invalid_field")));
    let (status, missing) = post(&gateway, "/admin/v1/keys/nobody/revoke", ROOT, json!({})).await;
    assert_eq!((status, missing["error"]["code"].as_str()), (404, Some("not_found")));
    let (_, listed) = get(&gateway, "/admin/v1/keys", ROOT).await;
    assert_eq!(listed["data"].as_array().unwrap().len(), 2, "nothing was created: {listed}");
}

#[tokio::test]
async fn the_file_owns_its_keys_and_an_admin_key_cannot_end_itself() {
    let upstream = FakeUpstream::start().await;
    let gateway = gateway(&upstream, "").await;
    for (path, code) in [
        ("/admin/v1/keys/plain/revoke", "defined_in_file"),
        ("/admin/v1/keys/root/revoke", "own_key"),
        ("/admin/v1/keys/root/expire", "own_key"),
    ] {
        let (status, refused) = post(&gateway, path, ROOT, json!({})).await;
        assert_eq!((status, refused["error"]["code"].as_str()), (409, Some(code)), "{path}: {refused}");
    }
    let (status, refused) = post(&gateway, "/admin/v1/keys", ROOT, json!({"id": "plain", "member": "x"})).await;
    assert_eq!((status, refused["error"]["code"].as_str()), (409, Some("defined_in_file")));
    // A runtime admin key cannot revoke or demote itself either.
    let second = create(&gateway, json!({"id": "second-admin", "member": "ops", "admin": true})).await;
    let (status, refused) = post(&gateway, "/admin/v1/keys/second-admin/revoke", &second, json!({})).await;
    assert_eq!((status, refused["error"]["code"].as_str()), (409, Some("own_key")));
    let (status, _) = post(&gateway, "/admin/v1/keys/second-admin", &second, json!({"admin": false})).await;
    assert_eq!(status, 409);
    let (_, listed) = get(&gateway, "/admin/v1/keys?source=file", &second).await;
    assert_eq!(listed["data"].as_array().unwrap().len(), 2, "{listed}");
    assert_eq!(call(&gateway, PLAIN, "gpt").await.0, 200, "the file's key is untouched");
}

/// A file that comes to define a runtime key's id is refused: at a reload
/// (SIGHUP; the previous keys stay, the runtime key too) and at a start.
#[tokio::test]
async fn a_file_defining_a_runtime_keys_id_is_refused_at_reload_and_at_start() {
    let upstream = FakeUpstream::start().await;
    let mut gateway = gateway(&upstream, "").await;
    let token = create(&gateway, json!({"id": "dup", "member": "ana"})).await;
    let clashing = format!(
        "{}\n[[key]]\nid = \"dup\"\nmember = \"eve\"\nhash = \"{}\"\n",
        std::fs::read_to_string(gateway.config_path()).unwrap(),
        weir_host::identity::hash_of("weir-eve-token-0123456789abcdef")
    );
    let original = std::fs::read_to_string(gateway.config_path()).unwrap();
    std::fs::write(gateway.config_path(), &clashing).unwrap();
    assert!(gateway.signal("HUP"));
    gateway.wait_for_stderr("caller keys not reloaded", Duration::from_secs(5)).await;
    assert!(
        gateway.stderr().contains("defined both in the config file and through the admin API"),
        "{}",
        gateway.stderr()
    );
    assert_eq!(call(&gateway, &token, "gpt").await.0, 200, "the runtime key stays");
    assert_eq!(
        call(&gateway, "weir-eve-token-0123456789abcdef", "gpt").await.0,
        401,
        "the file's clash is not in force"
    );

    // A reload racing runtime changes keeps both: the file's and the plane's.
    std::fs::write(gateway.config_path(), &original).unwrap();
    assert!(gateway.signal("HUP"));
    let later = create(&gateway, json!({"id": "later", "member": "ana"})).await;
    gateway.wait_for_stderr("caller keys reloaded", Duration::from_secs(5)).await;
    assert_eq!(call(&gateway, &later, "gpt").await.0, 200);
    assert_eq!(call(&gateway, &token, "gpt").await.0, 200);
    assert_eq!(call(&gateway, PLAIN, "gpt").await.0, 200);

    let folder = gateway.dir().to_path_buf();
    gateway.terminate(Duration::from_secs(10));
    std::fs::write(folder.join("clash.toml"), clashing).unwrap();
    let output = std::process::Command::new(weir_tests::weir_binary())
        .args(["serve", "--listen", "127.0.0.1:0", "--config"])
        .arg(folder.join("clash.toml"))
        .env("WEIR_TEST_KEY", "sk-upstream-0123456789")
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("key `dup` is defined both in the config file and through the admin API"), "{stderr}");
}

#[tokio::test]
async fn every_change_is_an_audit_row_that_weir_ledger_verify_proves() {
    let upstream = FakeUpstream::start().await;
    let gateway = gateway(&upstream, "").await;
    create(&gateway, json!({"id": "audited", "member": "ana"})).await;
    post(&gateway, "/admin/v1/keys/audited", ROOT, json!({"rpm": 5})).await;
    post(&gateway, "/admin/v1/keys/audited/revoke", ROOT, json!({})).await;
    post(&gateway, "/admin/v1/members/ana", ROOT, json!({"budget": {"daily_tokens": 100}})).await;

    let (status, changes) = get(&gateway, "/admin/v1/changes?kind=key&target=audited", ROOT).await;
    assert_eq!(status, 200, "{changes}");
    let rows = changes["data"].as_array().unwrap();
    let actions: Vec<&str> = rows.iter().map(|row| row["action"].as_str().unwrap()).collect();
    assert_eq!(actions, ["key.create", "key.update", "key.revoke"]);
    assert!(rows.iter().all(|row| row["actor"] == "root"));
    assert_eq!(rows[0]["before"], Value::Null);
    assert_eq!((rows[1]["before"]["rpm"].clone(), rows[1]["after"]["rpm"].clone()), (Value::Null, json!(5)));
    assert!(rows[2]["after"]["revoked_ms"].is_number());
    let (_, all) = get(&gateway, "/admin/v1/changes?after=3", ROOT).await;
    assert_eq!(all["data"][0]["action"], "member.put", "{all}");

    let ledger = gateway.dir().join("ledger.db");
    let verified = run_cli(&["ledger", "verify", "--path", ledger.to_str().unwrap()], &[]);
    let stdout = String::from_utf8_lossy(&verified.stdout);
    assert!(verified.status.success(), "{stdout}{}", String::from_utf8_lossy(&verified.stderr));
    assert!(stdout.contains("ok: admin changes: 4 rows, chain intact"), "{stdout}");
    assert!(stdout.contains("admin anchor: the newest anchored head, change 4, matches"), "{stdout}");

    // The newest change cut from the end: the chain alone still holds, the anchor does not.
    let connection = rusqlite::Connection::open(gateway.dir().join("admin.db")).unwrap();
    connection.execute("DELETE FROM admin_changes WHERE seq = 4", []).unwrap();
    drop(connection);
    let cut = run_cli(&["ledger", "verify", "--path", ledger.to_str().unwrap()], &[]);
    let stderr = String::from_utf8_lossy(&cut.stderr);
    assert!(!cut.status.success() && stderr.contains("rows were deleted from its end"), "{stderr}");

    // An edited row breaks the chain.
    let connection = rusqlite::Connection::open(gateway.dir().join("admin.db")).unwrap();
    connection.execute("UPDATE admin_changes SET actor = 'someone' WHERE seq = 2", []).unwrap();
    drop(connection);
    let broken = run_cli(&["ledger", "verify", "--path", ledger.to_str().unwrap()], &[]);
    assert!(!broken.status.success());
    assert!(
        String::from_utf8_lossy(&broken.stderr).contains("admin change 2"),
        "{}",
        String::from_utf8_lossy(&broken.stderr)
    );
}

#[tokio::test]
async fn weir_admin_speaks_the_api_to_a_running_gateway() {
    let upstream = FakeUpstream::start().await;
    let gateway = gateway(&upstream, "").await;
    let url = gateway.base_url.clone();
    let admin = |args: &[&str]| {
        let mut all = vec!["admin", "--url", url.as_str()];
        all.extend_from_slice(args);
        run_cli(&all, &[("WEIR_ADMIN_TOKEN", ROOT)])
    };
    let created = admin(&["keys", "create", "--member", "cli", "--id", "from-cli", "--models", "gpt,gpt-mini"]);
    assert!(created.status.success(), "{}", String::from_utf8_lossy(&created.stderr));
    let answer: Value = serde_json::from_slice(&created.stdout).unwrap();
    let token = answer["token"].as_str().unwrap().to_owned();
    assert_eq!(answer["key"]["models"], json!(["gpt", "gpt-mini"]));
    let (status, _) = call(&gateway, &token, "gpt").await;
    assert_eq!(status, 200);

    let listed = admin(&["keys", "list"]);
    assert!(String::from_utf8_lossy(&listed.stdout).contains("from-cli"));
    let budget = admin(&["budget", "member", "cli", "--daily-tokens", "500000"]);
    assert!(budget.status.success(), "{}", String::from_utf8_lossy(&budget.stderr));
    let revoked = admin(&["keys", "revoke", "from-cli"]);
    assert!(revoked.status.success(), "{}", String::from_utf8_lossy(&revoked.stderr));
    assert_eq!(call(&gateway, &token, "gpt").await.0, 401);
    let generic = admin(&["call", "GET", "/admin/v1/changes"]);
    assert!(String::from_utf8_lossy(&generic.stdout).contains("key.revoke"));

    let refused = run_cli(&["admin", "--url", &url, "--token", PLAIN, "keys", "list"], &[]);
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("403"), "{}", String::from_utf8_lossy(&refused.stderr));
    let again = admin(&["keys", "revoke", "from-cli"]);
    assert!(!again.status.success());
    assert!(String::from_utf8_lossy(&again.stderr).contains("key_revoked"));
    let no_token = run_cli(&["admin", "--url", &url, "keys", "list"], &[]);
    assert!(String::from_utf8_lossy(&no_token.stderr).contains("WEIR_ADMIN_TOKEN"));
}

/// Two gateways sharing PostgreSQL and Redis: a key created on one calls on
/// the other within a second; revoked on the other, it is refused on the
/// first within a second.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_gateways_sharing_postgres_honour_each_others_changes_within_a_second() {
    let server = PostgresServer::start();
    let redis = weir_tests::RedisServer::start().await;
    let upstream = FakeUpstream::start().await;
    let shared = format!("postgres_url = \"{}\"", server.url());
    let fleet = format!("[fleet]\nredis_url = \"{}\"\n", redis.url());
    let text = config(&upstream, &shared, &fleet);
    let env = [("WEIR_TEST_KEY", "sk-upstream-0123456789")];
    let first = Gateway::start_with(&text, &env, None).await;
    let second = Gateway::start_with(&text, &env, None).await;

    let token = create(&first, json!({"id": "fleet-key", "member": "ana"})).await;
    let took = until(Duration::from_secs(1), "the key on the second gateway", || async {
        call(&second, &token, "gpt").await.0 == 200
    })
    .await;
    assert!(took < Duration::from_secs(1));

    let (status, revoked) = post(&second, "/admin/v1/keys/fleet-key/revoke", ROOT, json!({})).await;
    assert_eq!(status, 200, "{revoked}");
    until(Duration::from_secs(1), "the revoke on the first gateway", || async {
        call(&first, &token, "gpt").await.0 == 401
    })
    .await;
    post(&first, "/admin/v1/members/ana", ROOT, json!({"budget": {"daily_tokens": 42}})).await;
    until(Duration::from_secs(1), "the budget on the second gateway", || async {
        let (_, budgets) = get(&second, "/admin/v1/budgets", ROOT).await;
        budgets["data"].as_array().is_some_and(|data| data.iter().any(|b| b["name"] == "ana" && b["limit"] == 42))
    })
    .await;
    assert_eq!(server.try_integer("SELECT COUNT(*) FROM admin_changes"), Ok(3));
    let verified = run_cli(&["ledger", "verify", "--config", first.config_path().to_str().unwrap()], &[]);
    let stdout = String::from_utf8_lossy(&verified.stdout);
    assert!(verified.status.success(), "{stdout}{}", String::from_utf8_lossy(&verified.stderr));
    assert!(stdout.contains("ok: admin changes: 3 rows, chain intact (the fleet's PostgreSQL)"), "{stdout}");
    // Three changes, heard through Redis (the poll could win a race once, not three times).
    second.wait_for_stderr("via=\"redis\"", Duration::from_secs(2)).await;

    // Redis out: the poll carries a change to the other gateway, within a second too.
    let mut redis = redis;
    redis.stop();
    let (status, created) =
        post(&first, "/admin/v1/keys", ROOT, json!({"id": "while-redis-is-out", "member": "ana"})).await;
    assert_eq!(status, 201, "{created}");
    until(Duration::from_secs(1), "the key on the second gateway by its poll", || async {
        get(&second, "/admin/v1/keys/while-redis-is-out", ROOT).await.0 == 200
    })
    .await;
    second.wait_for_stderr("via=\"poll\"", Duration::from_secs(2)).await;
}

/// A gateway that starts while the fleet's PostgreSQL is down starts with
/// the file's keys alone (a runtime key is refused, never guessed), and its
/// poll applies the plane once PostgreSQL is back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gateway_started_while_postgres_is_down_takes_the_plane_once_it_is_back() {
    let mut server = PostgresServer::start();
    let upstream = FakeUpstream::start().await;
    let text = config(&upstream, &format!("postgres_url = \"{}\"", server.url()), "");
    let env = [("WEIR_TEST_KEY", "sk-upstream-0123456789")];
    let first = Gateway::start_with(&text, &env, None).await;
    let token = create(&first, json!({"id": "made-before", "member": "ana"})).await;
    drop(first);
    // The test cluster commits without waiting for its WAL (`synchronous_commit = off`) and
    // stops like a crash: a moment for the WAL writer (every 200 ms) to write the change.
    tokio::time::sleep(Duration::from_secs(1)).await;

    server.stop();
    let late = Gateway::start_with(&text, &env, None).await;
    // (Its stderr is read by a thread of the harness: waited for, not read at once.)
    late.wait_for_stderr("the admin plane cannot be read yet", Duration::from_secs(5)).await;
    assert_eq!(call(&late, PLAIN, "gpt").await.0, 200, "the file's keys work");
    assert_eq!(call(&late, &token, "gpt").await.0, 401, "the plane's key is not known yet");
    server.resume();
    until(Duration::from_secs(10), "the plane applied after PostgreSQL came back", || async {
        call(&late, &token, "gpt").await.0 == 200
    })
    .await;
}

/// A key made through the admin API serves the official OpenAI client (its
/// Responses API) like a key of the file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_official_openai_client_calls_with_a_key_made_at_run_time() {
    let upstream = FakeUpstream::start().await;
    let gateway = gateway(&upstream, "").await;
    let token = create(&gateway, json!({"id": "python", "member": "ana", "models": ["gpt"]})).await;
    let base = gateway.url("/v1");
    let steps = tokio::task::spawn_blocking(move || {
        weir_tests::python::run_responses_client(&base, "gpt", "create", &[("WEIR_CALLER_KEY", &token)])
    })
    .await
    .unwrap();
    assert_eq!(steps[0]["step"], "create", "{steps:?}");
    assert!(steps[0]["output_text"].as_str().is_some_and(|text| !text.is_empty()), "{steps:?}");
    let records = weir_tests::closed_records(&gateway.dir().join("ledger.db"));
    assert!(
        records.iter().any(|record| record["key_id"] == "python" && record["member"] == "ana"),
        "the call is the key's: {records:?}"
    );
}

/// A keyless gateway has no admin key to accept (403), and a gateway that
/// keeps no ledger has no admin plane (503 `admin_unavailable`).
#[tokio::test]
async fn no_admin_plane_without_keys_or_without_a_ledger() {
    let upstream = FakeUpstream::start().await;
    let env = [("WEIR_TEST_KEY", "sk-upstream-0123456789")];
    let full = config(&upstream, "", "");
    let keyless: String = {
        let start = full.find("[[key]]").unwrap();
        let end = full.find("[ledger]").unwrap();
        format!("{}{}", &full[..start], &full[end..])
    };
    let open = Gateway::start_with(&keyless, &env, None).await;
    let (status, refused) = post(&open, "/admin/v1/keys", "anything", json!({"member": "ana", "admin": true})).await;
    assert_eq!((status, refused["error"]["code"].as_str()), (403, Some("permission_denied")), "{refused}");
    assert_eq!(get(&open, "/admin/v1/keys", "anything").await.0, 403);
    drop(open);

    let unledgered = Gateway::start_with(&config(&upstream, "enabled = false", ""), &env, None).await;
    let (status, refused) = post(&unledgered, "/admin/v1/keys", ROOT, json!({"member": "ana"})).await;
    assert_eq!((status, refused["error"]["code"].as_str()), (503, Some("admin_unavailable")), "{refused}");
    let (status, listed) = get(&unledgered, "/admin/v1/keys", ROOT).await;
    assert_eq!(status, 200, "the file's keys are still listed: {listed}");
    assert_eq!(listed["data"].as_array().unwrap().len(), 2);
}
