//! A role's `fallback` through the real gateway: another entry serves only
//! once the role's own entry is exhausted, only for a key that may call it,
//! and never silently (`x-weir-model`, `x-weir-fallback-from`, the record).

// Test code: a failed step should stop the test with its message.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use serde_json::{Value, json};
use weir_tests::{FakeUpstream, Gateway, Posted, openai_wire};

const ANA: &str = "weir-ana-token-0123456789abcdef";
const BOB: &str = "weir-bob-token-0123456789abcdef";

/// `primary` on one fake, `backup` on another, role `chat` = `primary` with
/// `backup` as its fallback; ana's key lists only the role, bob's the role
/// and the backup.
fn config(primary: &FakeUpstream, backup: &FakeUpstream) -> String {
    format!(
        r#"
[[model]]
id = "primary"
provider = "openai-compatible"
wire_id = "p"
endpoint = "{primary}"
max_output_tokens = 1000
context_window = 100000
output_tokens = 20
max_retries = 1

[[model]]
id = "backup"
provider = "openai-compatible"
wire_id = "b"
endpoint = "{backup}"
max_output_tokens = 1000
context_window = 100000
output_tokens = 20

[role.chat]
model = "primary"
fallback = ["backup"]

[[key]]
id = "ana-key"
member = "ana"
hash = "{ana}"
models = ["chat"]

[[key]]
id = "bob-key"
member = "bob"
hash = "{bob}"
models = ["chat", "backup"]

[ledger]
path = "ledger.db"
"#,
        primary = primary.base_url(),
        backup = backup.base_url(),
        ana = weir_host::identity::hash_of(ANA),
        bob = weir_host::identity::hash_of(BOB),
    )
}

async fn call(gateway: &Gateway, token: &str) -> Posted {
    let body = json!({"model": "chat", "messages": [{"role": "user", "content": "Hello"}]});
    let authorization = format!("Bearer {token}");
    gateway.post_json("/v1/chat/completions", &body, &[("authorization", authorization.as_str())]).await
}

fn header<'a>(posted: &'a Posted, name: &str) -> Option<&'a str> {
    posted.headers.get(name).map(|value| value.to_str().unwrap())
}

#[tokio::test]
async fn the_fallback_serves_only_an_exhausted_entry_and_says_so() {
    let (primary, backup) = (FakeUpstream::start().await, FakeUpstream::start().await);
    let gateway = Gateway::start(&config(&primary, &backup)).await;

    // The primary answers: no fallback.
    let answered = call(&gateway, BOB).await;
    assert_eq!(answered.status, 200, "{}", answered.body);
    assert_eq!(header(&answered, "x-weir-model"), Some("primary"));
    assert_eq!(header(&answered, "x-weir-fallback-from"), None);

    // Its retry budget spent on 500s: the backup serves, and says so.
    primary.push(openai_wire::server_error());
    primary.push(openai_wire::server_error());
    let fell_back = call(&gateway, BOB).await;
    assert_eq!(fell_back.status, 200, "{}", fell_back.body);
    assert_eq!(header(&fell_back, "x-weir-model"), Some("backup"));
    assert_eq!(header(&fell_back, "x-weir-fallback-from"), Some("primary"));
    assert_eq!(header(&fell_back, "x-weir-role"), Some("chat"));
    assert_eq!(header(&fell_back, "x-weir-attempts"), Some("3"), "two on the primary, one on the backup");
    assert_eq!((primary.request_count(), backup.request_count()), (3, 1));

    // An invalid request is the caller's: it never falls back.
    primary.push(openai_wire::error(400, "invalid_request_error", None, "RAW-INVALID"));
    let invalid = call(&gateway, BOB).await;
    assert_eq!(invalid.status, 400, "{}", invalid.body);
    assert_eq!(header(&invalid, "x-weir-fallback-from"), None);
    assert_eq!(backup.request_count(), 1, "the backup was not asked");

    let records = weir_tests::closed_records(&gateway.dir().join("ledger.db"));
    let record = records.iter().find(|record| record["model"] == "backup").unwrap();
    let notes: Vec<&str> = record["notes"].as_array().unwrap().iter().map(|note| note.as_str().unwrap()).collect();
    assert!(notes.contains(&"fallback_from:primary"), "{record}");
    assert_eq!(record["attempts"].as_array().unwrap().len(), 3, "{record}");
    assert_eq!(record["wire_id"], "b");
}

#[tokio::test]
async fn a_key_that_may_not_call_the_fallback_gets_the_primarys_failure() {
    let (primary, backup) = (FakeUpstream::start().await, FakeUpstream::start().await);
    let gateway = Gateway::start(&config(&primary, &backup)).await;
    primary.push(openai_wire::server_error());
    primary.push(openai_wire::server_error());
    let refused = call(&gateway, ANA).await;
    assert_eq!(refused.status, 502, "{}", refused.body);
    assert_eq!(refused.body["error"]["type"], "upstream_unavailable", "{}", refused.body);
    assert_eq!(header(&refused, "x-weir-fallback-from"), None);
    assert_eq!(header(&refused, "x-weir-model"), Some("primary"));
    assert_eq!(backup.request_count(), 0, "ana's key does not list the backup");
    let body: Value = refused.body;
    assert!(!body.to_string().contains("backup"), "the key learns nothing of the fallback: {body}");
}

/// The role's entry has deployments: once every one is out (its circuit
/// open), the fallback serves — on the call that opened it and on the next,
/// which finds none to resolve to.
#[tokio::test]
async fn an_entry_whose_deployments_are_all_out_falls_back() {
    let (dead, backup) = (FakeUpstream::start().await, FakeUpstream::start().await);
    for _ in 0..5 {
        dead.push(openai_wire::server_error());
    }
    let text = config(&dead, &backup)
        .replace(&format!("endpoint = \"{}\"\n", dead.base_url()), "circuit_failures = 1\ncircuit_open_secs = 600\n")
        .replace(
            "[role.chat]",
            &format!("[[model.deployment]]\nid = \"only\"\nendpoint = \"{}\"\n\n[role.chat]", dead.base_url()),
        );
    // The deployment belongs to `primary`: move it under that entry.
    let text = move_deployment_under_primary(&text);
    let gateway = Gateway::start(&text).await;
    for round in 0..2 {
        let answer = call(&gateway, BOB).await;
        assert_eq!(answer.status, 200, "round {round}: {}", answer.body);
        assert_eq!(header(&answer, "x-weir-model"), Some("backup"));
        assert_eq!(header(&answer, "x-weir-fallback-from"), Some("primary"));
    }
    assert_eq!(dead.request_count(), 1, "its circuit opened after the first failure");
    assert_eq!(backup.request_count(), 2);
}

/// `[[model.deployment]]` applies to the `[[model]]` above it: place the
/// deployment table right after `primary`'s fields.
fn move_deployment_under_primary(text: &str) -> String {
    let start = text.find("[[model.deployment]]").unwrap();
    let end = text.find("[role.chat]").unwrap();
    let deployment = &text[start..end];
    let without = format!("{}{}", &text[..start], &text[end..]);
    without.replacen("[[model]]\nid = \"backup\"", &format!("{deployment}[[model]]\nid = \"backup\""), 1)
}

/// The budget hold is taken again at the fallback's prices: a fallback whose
/// worst case is above the caller's per-call ceiling is refused, nothing sent.
#[tokio::test]
async fn the_budget_hold_is_taken_again_at_the_fallbacks_prices() {
    let (primary, backup) = (FakeUpstream::start().await, FakeUpstream::start().await);
    let text = config(&primary, &backup)
        .replace("wire_id = \"p\"\n", "wire_id = \"p\"\ninput_price = 1.0\noutput_price = 1.0\n")
        .replace("wire_id = \"b\"\n", "wire_id = \"b\"\ninput_price = 1.0\noutput_price = 100000.0\n")
        .replace("[ledger]", "[member.bob]\nmax_call_usd = 1.0\n\n[ledger]");
    let gateway = Gateway::start(&text).await;
    let cheap = call(&gateway, BOB).await;
    assert_eq!(cheap.status, 200, "the primary's worst case fits: {}", cheap.body);

    primary.push(openai_wire::server_error());
    primary.push(openai_wire::server_error());
    let refused = call(&gateway, BOB).await;
    assert_eq!(refused.body["error"]["type"], "call_budget_exceeded", "{}", refused.body);
    assert_eq!(backup.request_count(), 0, "nothing was sent to the fallback");
}

/// A stream whose entry is exhausted before its first byte falls back too;
/// its headers say so.
#[tokio::test]
async fn a_stream_falls_back_before_its_first_byte() {
    let (primary, backup) = (FakeUpstream::start().await, FakeUpstream::start().await);
    let gateway = Gateway::start(&config(&primary, &backup)).await;
    primary.push(openai_wire::server_error());
    primary.push(openai_wire::server_error());
    let body = json!({"model": "chat", "stream": true, "messages": [{"role": "user", "content": "Hello"}]});
    let response = reqwest::Client::new()
        .post(gateway.url("/v1/chat/completions"))
        .bearer_auth(BOB)
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 200);
    let headers = response.headers().clone();
    assert_eq!(headers["x-weir-model"].to_str().unwrap(), "backup");
    assert_eq!(headers["x-weir-fallback-from"].to_str().unwrap(), "primary");
    let text = response.text().await.unwrap();
    assert!(text.contains("[DONE]"), "{text}");
    assert_eq!(backup.request_count(), 1);
}
