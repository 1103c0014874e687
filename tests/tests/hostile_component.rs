//! A component never chooses where a secret goes, proven through the real gateway
//! with the component `tests/reach`: every key of it names an attacker's endpoint
//! as its default (a fake bound here at the fixed loopback address compiled into
//! the component) and asks for a secret or a signature it should not get. The
//! gateway's environment holds `OPENAI_API_KEY` and `DATABASE_URL`.
//!
//! - dropped as is (untrusted), the file may not replace the embedded `openai`,
//!   and its other keys reach only the endpoint and secret their entry names;
//!   an entry that leaves either to it is a config error naming the entry, or,
//!   for a file that arrives while the gateway runs, a refused call and a log
//!   line saying why;
//! - the same file allow-listed by digest is honoured;
//! - SigV4 for another service, or to a host outside AWS, is refused;
//! - `AWS_REGION=""` is no region;
//! - a plain-http endpoint off loopback is a config error without `allow_http`.
//!
//! Every test asserts what each upstream received; the attacker receives nothing
//! except where the operator allow-listed the file.

// Test code: a failed step should stop the test with its message.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};
use weir_host::plugin::component_digest;
use weir_tests::bedrock_wire::{ACCESS_KEY_ID, FakeBedrock, SECRET_ACCESS_KEY};
use weir_tests::{FakeUpstream, Gateway, run_cli};

/// The address compiled into `tests/reach` (`ATTACKER` there) as every key's
/// default endpoint.
const ATTACKER: &str = "127.87.65.43:47813";

const OPENAI_KEY: &str = "sk-operator-openai";
const DATABASE_URL: &str = "postgres://admin:hunter2@db.internal/prod";

/// The one attacker fake at a time: the address is fixed, and the tests of this
/// file run in parallel threads.
static ATTACKER_SLOT: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

struct Attacker {
    fake: FakeUpstream,
    _slot: tokio::sync::MutexGuard<'static, ()>,
}

impl Attacker {
    async fn bind() -> Self {
        let slot = ATTACKER_SLOT.lock().await;
        let addr: SocketAddr = ATTACKER.parse().unwrap();
        let fake = FakeUpstream::bind(addr).await.unwrap_or_else(|e| panic!("cannot bind the attacker {addr}: {e}"));
        Self { fake, _slot: slot }
    }

    fn assert_received_nothing(&self) {
        let received = self.fake.received();
        assert!(received.is_empty(), "the attacker received {} request(s): {:?}", received.len(), received);
    }
}

fn reach_wasm() -> Vec<u8> {
    std::fs::read(env!("WEIR_REACH_WASM")).unwrap()
}

fn folder_with_reach() -> tempfile::TempDir {
    let folder = tempfile::tempdir().unwrap();
    std::fs::write(folder.path().join("reach.wasm"), reach_wasm()).unwrap();
    folder
}

fn secrets_env() -> Vec<(&'static str, &'static str)> {
    vec![("OPENAI_API_KEY", OPENAI_KEY), ("DATABASE_URL", DATABASE_URL), ("REACH_KEY", "sk-reach-operator")]
}

fn entry(id: &str, provider: &str, more: &str) -> String {
    format!(
        "[[model]]\nid = \"{id}\"\nprovider = \"{provider}\"\nmax_output_tokens = 100\ncontext_window = 1000\n\
         output_tokens = 10\nmax_retries = 0\n{more}\n"
    )
}

async fn call(gateway: &Gateway, model: &str) -> (u16, Value) {
    let response = reqwest::Client::new()
        .post(gateway.url("/v1/chat/completions"))
        .json(&json!({"model": model, "messages": [{"role": "user", "content": "hi"}]}))
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    let text = response.text().await.unwrap();
    (status, serde_json::from_str(&text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}")))
}

async fn providers(gateway: &Gateway) -> Value {
    reqwest::get(gateway.url("/v1/providers")).await.unwrap().json().await.unwrap()
}

fn provider<'a>(providers: &'a Value, key: &str) -> &'a Value {
    providers["providers"].as_array().unwrap().iter().find(|p| p["key"] == key).unwrap_or_else(|| {
        panic!("provider {key} is not loaded: {providers}");
    })
}

/// Nothing a caller sees names a secret, a variable, or the attacker.
fn assert_safe(body: &Value) {
    let text = body.to_string();
    for leak in [OPENAI_KEY, DATABASE_URL, "OPENAI_API_KEY", "DATABASE_URL", "127.87.65.43", "http://"] {
        assert!(!text.contains(leak), "the caller sees `{leak}`: {text}");
    }
}

/// `weir providers` with this config and the reach file in the folder: how a
/// config error shows before anything could be sent.
fn providers_cli(config: &str, folder: &Path) -> (bool, String) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("weir.toml");
    std::fs::write(&path, config).unwrap();
    let output = run_cli(
        &["providers", "--config", path.to_str().unwrap(), "--providers-dir", folder.to_str().unwrap()],
        &secrets_env(),
    );
    let text = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    (output.status.success(), text)
}

#[tokio::test]
async fn a_dropped_file_may_not_replace_the_embedded_openai_and_the_attacker_gets_nothing() {
    let attacker = Attacker::bind().await;
    let operator = FakeUpstream::start().await;
    let folder = folder_with_reach();
    let config = entry("gpt", "openai", &format!("endpoint = \"{}\"", operator.base_url()));
    let gateway = Gateway::start_with(&config, &secrets_env(), Some(folder.path())).await;

    let (status, body) = call(&gateway, "gpt").await;
    assert_eq!(status, 200, "{body}");
    let sent = operator.received();
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].header("authorization"), Some(format!("Bearer {OPENAI_KEY}").as_str()));
    assert_eq!(sent[0].json()["messages"][0]["content"], "hi", "the embedded component encoded it, not the file");
    attacker.assert_received_nothing();

    let listed = providers(&gateway).await;
    let openai = provider(&listed, "openai");
    assert_eq!(openai["source"], "embedded:openai", "{listed}");
    assert_eq!(openai["trust"], "embedded");
    let rejected = listed["rejected"].as_array().unwrap();
    let reason = rejected.iter().find_map(|r| r["reason"].as_str().filter(|r| r.contains("`openai`"))).unwrap();
    assert!(reason.contains("embedded") && reason.contains("allowed_digests"), "{reason}");
    // The file's other keys load, untrusted.
    assert_eq!(provider(&listed, "reach-database")["trust"], "untrusted");

    let (ok, table) = providers_cli(&config, folder.path());
    assert!(ok, "{table}");
    assert!(table.contains("`openai`") && table.contains("may not replace it"), "{table}");
}

#[tokio::test]
async fn no_file_may_declare_the_hosts_decision_key_and_decisions_go_where_their_entry_says() {
    let attacker = Attacker::bind().await;
    let operator = FakeUpstream::start().await;
    let folder = folder_with_reach();
    let config = format!(
        "[[model]]\nid = \"triage\"\nprovider = \"decision\"\nkind = \"decision\"\nendpoint = \"{}\"\n\
         credential = \"decider-key\"\ncontext_window = 1000\nmax_retries = 0\n",
        operator.base_url()
    );
    let mut env = secrets_env();
    env.push(("DECIDER_KEY", "sk-decider-operator"));
    let gateway = Gateway::start_with(&config, &env, Some(folder.path())).await;
    let question = json!({
        "model": "triage",
        "state": {"text": "hi"},
        "questions": [{"id": "q", "shape": "noul"}],
    });
    let response = reqwest::Client::new().post(gateway.url("/v1/decisions")).json(&question).send().await.unwrap();
    assert_eq!(response.status(), 200, "{}", response.text().await.unwrap());
    let sent = operator.received();
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].path, "/v1/decisions");
    assert_eq!(sent[0].header("authorization"), Some("Bearer sk-decider-operator"));
    attacker.assert_received_nothing();
    let listed = providers(&gateway).await;
    assert!(listed["providers"].as_array().unwrap().iter().all(|p| p["key"] != "decision"), "{listed}");
    let rejected = listed["rejected"].as_array().unwrap();
    let reason = rejected.iter().find_map(|r| r["reason"].as_str().filter(|r| r.contains("`decision`"))).unwrap();
    assert!(reason.contains("the host's own decision wire"), "{reason}");
}

#[tokio::test]
async fn an_untrusted_file_reaches_only_the_endpoint_and_secret_its_entry_names() {
    let attacker = Attacker::bind().await;
    let operator = FakeUpstream::start().await;
    let folder = folder_with_reach();
    let config = entry(
        "named",
        "reach-database",
        &format!("endpoint = \"{}\"\ncredential = \"reach-key\"", operator.base_url()),
    );
    let gateway = Gateway::start_with(&config, &secrets_env(), Some(folder.path())).await;

    let (status, body) = call(&gateway, "named").await;
    assert_eq!(status, 200, "{body}");
    let sent = operator.received();
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].header("authorization"), Some("Bearer sk-reach-operator"));
    assert_eq!(sent[0].json()["messages"][0]["content"], "from reach-database");
    let everything = format!("{:?}", sent[0].headers) + &String::from_utf8_lossy(&sent[0].body);
    assert!(!everything.contains(DATABASE_URL) && !everything.contains(OPENAI_KEY), "{everything}");
    attacker.assert_received_nothing();

    // `weir providers` does not show the file's own default as where calls go.
    let (ok, text) = providers_cli(&config, folder.path());
    assert!(ok, "{text}");
    assert!(
        text.contains(&format!(
            "default endpoint: (declared http://{ATTACKER}/v1, never used: an untrusted component's entries set `endpoint`)"
        )),
        "{text}"
    );
}

#[tokio::test]
async fn an_entry_that_leaves_endpoint_or_credential_to_an_untrusted_file_is_a_config_error() {
    let attacker = Attacker::bind().await;
    let operator = FakeUpstream::start().await;
    let folder = folder_with_reach();

    let no_endpoint = entry("stolen", "reach-database", "credential = \"reach-key\"");
    let (ok, text) = providers_cli(&no_endpoint, folder.path());
    assert!(!ok, "{text}");
    assert!(text.contains("model `stolen`") && text.contains("must name `endpoint`"), "{text}");

    let no_credential = entry("stolen", "reach-database", &format!("endpoint = \"{}\"", operator.base_url()));
    let (ok, text) = providers_cli(&no_credential, folder.path());
    assert!(!ok, "{text}");
    assert!(text.contains("model `stolen`") && text.contains("must name `credential`"), "{text}");
    for secret in [DATABASE_URL, OPENAI_KEY] {
        assert!(!text.contains(secret), "{text}");
    }

    assert!(operator.received().is_empty());
    attacker.assert_received_nothing();
}

#[tokio::test]
async fn the_same_file_allow_listed_by_digest_is_honoured() {
    let attacker = Attacker::bind().await;
    let folder = folder_with_reach();
    let config =
        format!("allowed_digests = [\"{}\"]\n{}", component_digest(&reach_wasm()), entry("vouched", "openai", ""));
    let gateway = Gateway::start_with(&config, &secrets_env(), Some(folder.path())).await;

    let listed = providers(&gateway).await;
    let openai = provider(&listed, "openai");
    assert_eq!(openai["trust"], "allow-listed", "{listed}");
    assert!(openai["source"].as_str().unwrap().ends_with("reach.wasm"), "{listed}");

    let (status, body) = call(&gateway, "vouched").await;
    assert_eq!(status, 200, "{body}");
    let sent = attacker.fake.received();
    assert_eq!(sent.len(), 1, "the operator vouched for the file: its endpoint is used");
    assert_eq!(sent[0].header("authorization"), Some(format!("Bearer {OPENAI_KEY}").as_str()));
    assert_eq!(sent[0].json()["messages"][0]["content"], "from openai");
}

/// Waits (bounded) until `/v1/providers` lists `key`.
async fn until_served(gateway: &Gateway, key: &str) {
    for _ in 0..200 {
        let listed = providers(gateway).await;
        if listed["providers"].as_array().unwrap().iter().any(|p| p["key"] == key) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("timed out waiting for {key}; stderr:\n{}", gateway.stderr());
}

fn aws_env() -> Vec<(&'static str, &'static str)> {
    let mut env = secrets_env();
    env.extend([
        ("AWS_ACCESS_KEY_ID", ACCESS_KEY_ID),
        ("AWS_SECRET_ACCESS_KEY", SECRET_ACCESS_KEY),
        ("AWS_REGION", "us-east-1"),
    ]);
    env
}

/// A file that arrives while the gateway runs is not checked against the catalog
/// at start: its calls are refused before anything is sent, and the log says why.
#[tokio::test]
async fn an_untrusted_file_dropped_while_serving_is_refused_per_call_and_the_log_says_why() {
    let attacker = Attacker::bind().await;
    let bedrock = FakeBedrock::start().await;
    let folder = tempfile::tempdir().unwrap();
    let config = [
        "watch_interval_ms = 100\n".to_owned(),
        entry("stolen", "reach-database", ""),
        entry(
            "s3",
            "reach-sigv4-s3",
            &format!("endpoint = \"{}\"\ncredential = \"aws-access-key-id\"", bedrock.base_url()),
        ),
    ]
    .concat();
    let gateway = Gateway::start_with(&config, &aws_env(), Some(folder.path())).await;
    std::fs::write(folder.path().join(".reach.partial"), reach_wasm()).unwrap();
    std::fs::rename(folder.path().join(".reach.partial"), folder.path().join("reach.wasm")).unwrap();
    until_served(&gateway, "reach-database").await;
    gateway.wait_for_stderr("calls to this model will be refused", Duration::from_secs(10)).await;

    let (status, body) = call(&gateway, "stolen").await;
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["error"]["code"], "provider_unavailable", "{body}");
    assert_safe(&body);

    let (status, body) = call(&gateway, "s3").await;
    assert_eq!(status, 500, "{body}");
    assert_eq!(body["error"]["code"], "provider_fault", "{body}");
    assert!(body["error"]["message"].as_str().unwrap().contains("nothing was sent"), "{body}");
    assert_safe(&body);

    let log = gateway.stderr();
    assert!(log.contains("must name `endpoint`") && log.contains("stolen"), "{log}");
    assert!(log.contains("for service `s3`"), "{log}");
    assert!(bedrock.received().is_empty(), "nothing was signed or sent");
    attacker.assert_received_nothing();
}

#[tokio::test]
async fn sigv4_for_another_service_or_a_host_outside_aws_is_refused_at_load() {
    let attacker = Attacker::bind().await;
    let bedrock = FakeBedrock::start().await;
    let folder = folder_with_reach();
    let named = format!("endpoint = \"{}\"\ncredential = \"aws-access-key-id\"", bedrock.base_url());
    let (ok, text) = providers_cli(&entry("s3", "reach-sigv4-s3", &named), folder.path());
    assert!(!ok, "{text}");
    assert!(text.contains("model `s3`") && text.contains("service `s3`"), "{text}");

    // Allow-listed, its default endpoint counts, but SigV4 goes only to AWS hosts.
    let pinned = format!("allowed_digests = [\"{}\"]\n", component_digest(&reach_wasm()));
    let (ok, text) = providers_cli(&format!("{pinned}{}", entry("elsewhere", "reach-sigv4-host", "")), folder.path());
    assert!(!ok, "{text}");
    assert!(text.contains("model `elsewhere`") && text.contains("not under `amazonaws.com`"), "{text}");

    assert!(bedrock.received().is_empty());
    attacker.assert_received_nothing();
}

/// Allow-listed, the SigV4 file arrives while serving: its calls to the attacker's
/// host are refused before any signature exists.
#[tokio::test]
async fn an_allow_listed_sigv4_file_dropped_while_serving_signs_nothing_for_a_foreign_host() {
    let attacker = Attacker::bind().await;
    let folder = tempfile::tempdir().unwrap();
    let config = format!(
        "watch_interval_ms = 100\nallowed_digests = [\"{}\"]\n{}",
        component_digest(&reach_wasm()),
        entry("elsewhere", "reach-sigv4-host", "")
    );
    let gateway = Gateway::start_with(&config, &aws_env(), Some(folder.path())).await;
    std::fs::write(folder.path().join(".reach.partial"), reach_wasm()).unwrap();
    std::fs::rename(folder.path().join(".reach.partial"), folder.path().join("reach.wasm")).unwrap();
    until_served(&gateway, "reach-sigv4-host").await;

    let (status, body) = call(&gateway, "elsewhere").await;
    assert_eq!(status, 500, "{body}");
    assert_eq!(body["error"]["code"], "provider_fault", "{body}");
    assert_safe(&body);
    let log = gateway.wait_for_stderr("not under `amazonaws.com`", Duration::from_secs(5)).await;
    assert!(log.contains("127.87.65.43"), "the log names the host: {log}");
    attacker.assert_received_nothing();
}

#[tokio::test]
async fn an_empty_aws_region_is_no_region_and_nothing_is_sent() {
    let bedrock = FakeBedrock::start().await;
    let config = entry(
        "nova",
        "bedrock-converse",
        &format!("wire_id = \"us.amazon.nova-pro-v1:0\"\nendpoint = \"{}\"", bedrock.base_url()),
    );
    let env = [
        ("AWS_ACCESS_KEY_ID", ACCESS_KEY_ID),
        ("AWS_SECRET_ACCESS_KEY", SECRET_ACCESS_KEY),
        ("AWS_REGION", ""),
        ("AWS_DEFAULT_REGION", "eu-west-3"),
    ];
    let gateway = Gateway::start_with(&config, &env, None).await;
    let (status, body) = call(&gateway, "nova").await;
    assert_eq!(status, 424, "{body}");
    assert_eq!(body["error"]["code"], "credential_missing", "{body}");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains("no AWS region"), "{message}");
    assert!(!message.contains("AWS_REGION"), "no variable names for callers: {message}");
    let log = gateway.wait_for_stderr("no region is chosen", Duration::from_secs(5)).await;
    assert!(log.contains("AWS_REGION"), "the log says where it looked: {log}");
    assert!(bedrock.received().is_empty(), "nothing was signed or sent");
}

#[tokio::test]
async fn a_plain_http_endpoint_off_loopback_is_a_config_error_unless_allowed() {
    let folder = tempfile::tempdir().unwrap();
    // A non-routable documentation address: nothing may be sent there, and nothing is.
    let remote = entry("remote", "openai", "endpoint = \"http://192.0.2.10:8000/v1\"");
    let (ok, text) = providers_cli(&remote, folder.path());
    assert!(!ok, "{text}");
    assert!(text.contains("model `remote`") && text.contains("plain http"), "{text}");
    let (ok, text) = providers_cli(&format!("{remote}allow_http = true\n"), folder.path());
    assert!(ok, "allowed by the entry: {text}");

    // Loopback stays allowed, and serves.
    let operator = FakeUpstream::start().await;
    let local = entry("local", "openai", &format!("endpoint = \"{}\"", operator.base_url()));
    let gateway = Gateway::start_with(&local, &secrets_env(), Some(folder.path())).await;
    let (status, body) = call(&gateway, "local").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(operator.received().len(), 1);
}
