//! Roles, pins and the picker, effort and the context window, through the
//! gateway's router over real HTTP to a fake upstream: every test asserts what
//! the upstream received (which wire id, which reasoning fields, or nothing at
//! all), what the caller got, and what the record says. The embedded catalog's own roles
//! are tested on the real `weir serve`.

// Test code: a failed step should stop the test with its message.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use weir_host::record::{Acknowledged, CallObserver, CallOpening, CallRecord, acknowledged};
use weir_host::transport::{Secret, SecretStore};
use weir_host::{ChatRequest, Config, Weir, types::Conversation};
use weir_tests::anthropic_wire::{self, message_body, text_block, usage_json};
use weir_tests::{FakeUpstream, Gateway};

const KEY_ALL: &str = "weir-all-token-0123456789abcdef";
const KEY_B: &str = "weir-bob-token-0123456789abcdef";
const KEY_ROLE: &str = "weir-rol-token-0123456789abcdef";
const KEY_LOW: &str = "weir-low-token-0123456789abcdef";

/// Collects closed records, as an embedding service's observer would.
#[derive(Default)]
struct Collect(Mutex<Vec<Arc<CallRecord>>>);

impl CallObserver for Collect {
    fn opened(&self, _opening: &CallOpening) -> Acknowledged {
        acknowledged()
    }

    fn closed(&self, record: &Arc<CallRecord>) -> Acknowledged {
        self.0.lock().unwrap().push(Arc::clone(record));
        acknowledged()
    }
}

/// Holds `present-key` only: an entry naming `missing-key` cannot be called.
#[derive(Debug)]
struct OneSecret;

impl SecretStore for OneSecret {
    fn get(&self, credential_id: &str) -> Option<Secret> {
        (credential_id == "present-key").then(|| Secret::new("sk-test"))
    }

    fn location(&self, credential_id: &str) -> String {
        format!("the test's store `{credential_id}`")
    }
}

struct Rig {
    upstream: FakeUpstream,
    weir: Weir,
    records: Arc<Collect>,
    base: String,
}

struct Answer {
    status: u16,
    headers: reqwest::header::HeaderMap,
    body: Value,
}

/// An entry on the fake upstream: `openai` needs the test's credential, the
/// compatible provider none.
fn entry(upstream: &FakeUpstream, id: &str, provider: &str, extra: &str) -> String {
    format!(
        "[[model]]\nid = \"{id}\"\nprovider = \"{provider}\"\nwire_id = \"wire-{id}\"\nendpoint = \"{url}\"\n\
         max_output_tokens = 4000\ncontext_window = 100000\noutput_tokens = 100\nmax_retries = 0\n{extra}\n",
        url = upstream.base_url()
    )
}

fn keys() -> String {
    let hash = weir_host::identity::hash_of;
    format!(
        "[[key]]\nid = \"all\"\nmember = \"ana\"\nhash = \"{}\"\nadmin = true\n\
         [[key]]\nid = \"only-b\"\nmember = \"bob\"\nhash = \"{}\"\nmodels = [\"b\"]\n\
         [[key]]\nid = \"role\"\nmember = \"cy\"\nhash = \"{}\"\nmodels = [\"chat\"]\n\
         [[key]]\nid = \"low\"\nmember = \"dee\"\nhash = \"{}\"\ndefault_effort = \"low\"\n",
        hash(KEY_ALL),
        hash(KEY_B),
        hash(KEY_ROLE),
        hash(KEY_LOW)
    )
}

async fn rig(upstream: FakeUpstream, toml: &str) -> Rig {
    let records = Arc::new(Collect::default());
    let weir = Weir::builder()
        .config(Config::from_toml(toml, "test").unwrap())
        .providers_dir("/nonexistent-weir-providers")
        .cache_dir(Some(std::env::temp_dir().join("weir-roles-test-cache")))
        .secret_store(Arc::new(OneSecret))
        .observer(Arc::clone(&records) as Arc<dyn CallObserver>)
        .build()
        .unwrap();
    let base = weir_tests::serve_router(weir_host::server::router(weir.clone())).await;
    Rig { upstream, weir, records, base }
}

impl Rig {
    async fn call(&self, token: Option<&str>, body: Value, headers: &[(&str, &str)]) -> Answer {
        let mut request = reqwest::Client::new().post(format!("{}/v1/chat/completions", self.base)).json(&body);
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let response = request.send().await.unwrap();
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let text = response.text().await.unwrap();
        let body = serde_json::from_str(&text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"));
        Answer { status, headers, body }
    }

    async fn models(&self, token: Option<&str>) -> Value {
        let mut request = reqwest::Client::new().get(format!("{}/v1/models", self.base));
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        request.send().await.unwrap().json().await.unwrap()
    }

    /// The wire model ids the upstream received, in order.
    fn wire_ids(&self) -> Vec<String> {
        self.upstream.received().iter().map(|r| r.json()["model"].as_str().unwrap_or_default().to_owned()).collect()
    }

    fn last_record(&self) -> Arc<CallRecord> {
        Arc::clone(self.records.0.lock().unwrap().last().expect("a record"))
    }
}

fn hello(model: &str) -> Value {
    json!({"model": model, "messages": [{"role": "user", "content": "Hello"}]})
}

fn header<'a>(answer: &'a Answer, name: &str) -> &'a str {
    answer.headers.get(name).map_or("", |value| value.to_str().unwrap())
}

/// Two entries of grade `fast`, then a third the test's store has no secret for.
fn graded(upstream: &FakeUpstream, extra: &str) -> String {
    format!(
        "{extra}\n[role.chat]\ngrade = \"fast\"\n{}{}{}",
        entry(upstream, "gone", "openai", "grade = \"fast\"\ncredential = \"missing-key\""),
        entry(upstream, "a", "openai", "grade = \"fast\"\ncredential = \"present-key\""),
        entry(upstream, "b", "openai-compatible", "grade = \"fast\""),
    )
}

#[tokio::test]
async fn a_role_is_served_by_its_pin() {
    let upstream = FakeUpstream::start_local().await;
    let toml = graded(&upstream, "[pins]\nfast = \"b\"\n");
    let rig = rig(upstream, &toml).await;

    let answer = rig.call(None, hello("chat"), &[]).await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert_eq!(rig.wire_ids(), ["wire-b"]);
    assert_eq!((header(&answer, "x-weir-model"), header(&answer, "x-weir-role")), ("b", "chat"));
    assert!(answer.headers.get("x-weir-passed-over").is_none(), "nothing was passed over");
    let record = rig.last_record();
    assert_eq!((record.model.as_str(), record.role.as_deref()), ("b", Some("chat")));
    assert!(!record.notes.iter().any(|note| note.starts_with("passed_over:")), "{:?}", record.notes);
}

#[tokio::test]
async fn an_unpinned_grade_is_served_by_its_first_entry_that_can_be_called() {
    let upstream = FakeUpstream::start_local().await;
    let toml = graded(&upstream, "");
    let rig = rig(upstream, &toml).await;

    let answer = rig.call(None, hello("chat"), &[]).await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    // `gone` comes first but has no secret: passed over, nothing sent for it.
    assert_eq!(rig.wire_ids(), ["wire-a"]);
    assert_eq!(rig.upstream.received()[0].header("authorization"), Some("Bearer sk-test"));
    assert_eq!(rig.weir.resolve("chat", None).await.unwrap(), "a");
    // Never a silent substitution: the answer and the record name what was passed over.
    assert_eq!((header(&answer, "x-weir-model"), header(&answer, "x-weir-passed-over")), ("a", "gone"));
    let record = rig.last_record();
    assert_eq!((record.model.as_str(), record.role.as_deref()), ("a", Some("chat")));
    let passed: Vec<&String> = record.notes.iter().filter(|note| note.starts_with("passed_over:")).collect();
    assert_eq!(passed, ["passed_over:gone"], "{:?}", record.notes);
}

#[tokio::test]
async fn the_picker_passes_over_what_the_callers_key_does_not_permit() {
    let upstream = FakeUpstream::start_local().await;
    let toml = format!("{}{}", keys(), graded(&upstream, ""));
    let rig = rig(upstream, &toml).await;

    let only_b = rig.call(Some(KEY_B), hello("chat"), &[]).await;
    assert_eq!(only_b.status, 200, "{}", only_b.body);
    let everything = rig.call(Some(KEY_ALL), hello("chat"), &[]).await;
    assert_eq!(everything.status, 200, "{}", everything.body);
    let by_role = rig.call(Some(KEY_ROLE), hello("chat"), &[]).await;
    assert_eq!(by_role.status, 200, "a key listing the role may call what it resolves to: {}", by_role.body);
    assert_eq!(rig.wire_ids(), ["wire-b", "wire-a", "wire-a"]);

    // The role key may not name an entry itself.
    let direct = rig.call(Some(KEY_ROLE), hello("a"), &[]).await;
    assert_eq!((direct.status, direct.body["error"]["type"].as_str()), (403, Some("permission_denied")));
    assert_eq!(rig.upstream.request_count(), 3, "nothing sent for a refused call");
}

#[tokio::test]
async fn model_choice_roles_refuses_a_catalog_id_from_a_caller_with_nothing_sent() {
    let upstream = FakeUpstream::start_local().await;
    let toml = format!("model_choice = \"roles\"\n{}{}", keys(), graded(&upstream, ""));
    let rig = rig(upstream, &toml).await;

    let direct = rig.call(Some(KEY_ALL), hello("b"), &[]).await;
    assert_eq!(direct.status, 403, "{}", direct.body);
    assert_eq!(direct.body["error"]["type"], "permission_denied");
    assert!(direct.body["error"]["message"].as_str().unwrap().contains("roles only"), "{}", direct.body);
    assert_eq!(rig.upstream.request_count(), 0);
    assert_eq!(rig.last_record().category, "permission_denied", "the refusal is on the record");

    let role = rig.call(Some(KEY_ALL), hello("chat"), &[]).await;
    assert_eq!(role.status, 200, "{}", role.body);
    // A non-admin key's list shows roles only.
    let listed = rig.models(Some(KEY_LOW)).await;
    let ids: Vec<&str> = listed["data"].as_array().unwrap().iter().map(|m| m["id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["chat"], "{listed}");
    // The embedding service itself (the library) still names entries.
    let library = rig.weir.chat(ChatRequest::new("b", Conversation::user("hi"))).await.unwrap();
    assert_eq!(library.stamp.model, "b");
}

#[tokio::test]
async fn a_pinned_entry_that_cannot_be_called_fails_closed_with_no_substitute() {
    let upstream = FakeUpstream::start_local().await;
    let toml = graded(&upstream, "[pins]\nfast = \"gone\"\n");
    let rig = rig(upstream, &toml).await;

    let answer = rig.call(None, hello("chat"), &[]).await;
    assert_eq!(answer.status, 503, "{}", answer.body);
    assert_eq!(answer.body["error"]["type"], "role_unavailable");
    let message = answer.body["error"]["message"].as_str().unwrap();
    assert!(message.contains("role `chat`") && !message.contains("missing-key"), "{message}");
    assert_eq!(rig.upstream.request_count(), 0, "no other entry was called instead");
    assert_eq!(rig.last_record().category, "role_unavailable");
}

#[tokio::test]
async fn v1_models_lists_each_role_and_what_it_resolves_to_now() {
    let upstream = FakeUpstream::start_local().await;
    let toml = format!("{}[role.pinned-gone]\nmodel = \"gone\"\n", graded(&upstream, ""));
    let rig = rig(upstream, &toml).await;

    let listed = rig.models(None).await;
    let find = |id: &str| listed["data"].as_array().unwrap().iter().find(|m| m["id"] == id).cloned().unwrap();
    assert_eq!(find("chat")["weir"], json!({"role": "chat", "resolves_to": "a", "unavailable": null}));
    assert_eq!(find("pinned-gone")["weir"]["unavailable"], "role_unavailable");
    assert_eq!(find("b")["weir"]["grade"], "fast");
    let capabilities = find("b")["weir"]["capabilities"].clone();
    assert!(capabilities.as_array().unwrap().contains(&json!("prompted_tools")), "{capabilities}");
    assert_eq!(rig.upstream.request_count(), 0, "listing sends nothing");
}

/// `o3` takes an effort field, `llama` has no reasoning declared.
fn effort_entries(upstream: &FakeUpstream) -> String {
    format!(
        "{}{}{}",
        keys(),
        entry(upstream, "o3", "openai-compatible", "reasoning = \"effort\""),
        entry(upstream, "llama", "openai-compatible", ""),
    )
}

#[tokio::test]
async fn effort_reaches_the_wire_only_as_the_entry_declares() {
    let upstream = FakeUpstream::start_local().await;
    let toml = effort_entries(&upstream);
    let rig = rig(upstream, &toml).await;

    let sent_effort = |index: usize| rig.upstream.received()[index].json().get("reasoning_effort").cloned();
    assert_eq!(rig.call(Some(KEY_ALL), hello("o3"), &[]).await.status, 200);
    assert_eq!(sent_effort(0), Some(json!("medium")), "the config's default, medium");
    assert_eq!(rig.call(Some(KEY_ALL), hello("o3"), &[("x-weir-effort", "high")]).await.status, 200);
    assert_eq!(sent_effort(1), Some(json!("high")), "the header overrides");
    assert_eq!(rig.call(Some(KEY_LOW), hello("o3"), &[]).await.status, 200);
    assert_eq!(sent_effort(2), Some(json!("low")), "the key's default");
    let off = json!({"model": "o3", "reasoning_effort": "none", "messages": [{"role": "user", "content": "Hi"}]});
    assert_eq!(rig.call(Some(KEY_LOW), off, &[]).await.status, 200);
    assert_eq!(sent_effort(3), None, "turned off: no default applies");
    assert!(rig.last_record().notes.is_empty());

    let llama = rig.call(Some(KEY_ALL), hello("llama"), &[("x-weir-effort", "high")]).await;
    assert_eq!(llama.status, 200, "{}", llama.body);
    assert_eq!(sent_effort(4), None, "no reasoning field for an entry that declares none");
    assert_eq!(rig.last_record().notes, ["effort_not_applied"]);

    let bad = rig.call(Some(KEY_ALL), hello("o3"), &[("x-weir-effort", "extreme")]).await;
    assert_eq!((bad.status, bad.body["error"]["type"].as_str()), (400, Some("invalid_request")));
    assert_eq!(rig.upstream.request_count(), 5);
}

#[tokio::test]
async fn a_member_default_applies_below_the_keys() {
    let upstream = FakeUpstream::start_local().await;
    let toml =
        format!("default_effort = \"minimal\"\n[member.ana]\ndefault_effort = \"high\"\n{}", effort_entries(&upstream));
    let rig = rig(upstream, &toml).await;

    assert_eq!(rig.call(Some(KEY_ALL), hello("o3"), &[]).await.status, 200);
    assert_eq!(rig.call(Some(KEY_B), hello("o3"), &[]).await.status, 403, "bob's key lists only `b`");
    assert_eq!(rig.call(Some(KEY_LOW), hello("o3"), &[]).await.status, 200);
    let efforts: Vec<Value> = rig.upstream.received().iter().map(|r| r.json()["reasoning_effort"].clone()).collect();
    assert_eq!(efforts, [json!("high"), json!("low")], "ana's member default; dee's key default over the config's");
}

#[tokio::test]
async fn a_thinking_entry_keeps_the_answer_reserve_under_a_small_ceiling() {
    let upstream = FakeUpstream::start_local().await;
    let answer = message_body(vec![text_block("Hi.")], "end_turn", None, usage_json(10, 5, 0, 0));
    upstream.push(anthropic_wire::json_response(200, &answer));
    let toml = format!(
        "[[model]]\nid = \"claude\"\nprovider = \"anthropic\"\nwire_id = \"claude-opus-5\"\nendpoint = \"http://{}\"\n\
         credential = \"present-key\"\nmax_output_tokens = 3000\ncontext_window = 200000\nmax_retries = 0\n\
         reasoning = \"thinking\"\nthinking_budget = {{ high = 4096 }}\n",
        upstream.addr()
    );
    let rig = rig(upstream, &toml).await;

    let request = json!({"model": "claude", "max_tokens": 1000, "messages": [{"role": "user", "content": "Hi"}]});
    let answer = rig.call(None, request, &[("x-weir-effort", "high")]).await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    let sent = rig.upstream.received()[0].json();
    // 1 000 declared + 4 096 of thinking under a 3 000 ceiling: thinking is cut
    // first, and the answer keeps its 1 000.
    assert_eq!(sent["max_tokens"], 3000, "{sent}");
    assert_eq!(sent["thinking"], json!({"type": "enabled", "budget_tokens": 2000}), "{sent}");
}

#[tokio::test]
async fn a_prompt_too_large_for_the_window_is_refused_with_the_numbers_and_nothing_sent() {
    let upstream = FakeUpstream::start_local().await;
    let toml =
        entry(&upstream, "small", "openai-compatible", "").replace("context_window = 100000", "context_window = 1000");
    let rig = rig(upstream, &toml).await;

    let long = "word ".repeat(800);
    let answer = rig.call(None, json!({"model": "small", "messages": [{"role": "user", "content": long}]}), &[]).await;
    assert_eq!(answer.status, 400, "{}", answer.body);
    assert_eq!(answer.body["error"]["type"], "context_overflow");
    let message = answer.body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("output reserve (100)") && message.contains("of 512") && message.contains("1000 tokens"),
        "{message}"
    );
    assert_eq!(rig.upstream.request_count(), 0);
    // A prompt that fits goes.
    assert_eq!(rig.call(None, hello("small"), &[]).await.status, 200);
}

#[tokio::test]
async fn what_policy_withheld_is_noted_on_the_record() {
    let upstream = FakeUpstream::start_local().await;
    let toml = entry(&upstream, "fixed", "openai-compatible", "fixed_temperature = true");
    let rig = rig(upstream, &toml).await;

    let body = json!({"model": "fixed", "temperature": 0.3, "messages": [{"role": "user", "content": "Hi"}]});
    let answer = rig.call(None, body, &[("x-weir-effort", "none")]).await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert!(rig.upstream.received()[0].json().get("temperature").is_none(), "omitted, never rewritten");
    assert_eq!(rig.last_record().notes, ["temperature_omitted"]);
}

/// `weir serve` on the embedded defaults (its two OpenAI chat entries pointed at the fake,
/// no AWS identity) ships the roles `chat`, `fast`, `embed` and `rerank`: `/v1/models` lists what each resolves to, a call to `chat` is served by
/// `gpt-4.1` (the fake standing in for OpenAI), and `rerank`, whose one entry needs an AWS
/// region this gateway lacks, fails closed as `role_unavailable` with nothing substituted.
#[tokio::test]
async fn the_embedded_catalog_ships_roles_and_serves_chat() {
    let upstream = FakeUpstream::start().await;
    let env = [("OPENAI_API_KEY", "sk-weir-embedded-roles")];
    let gateway = Gateway::start_with(
        &weir_tests::gateway::embedded_catalog_at(&["gpt-4.1", "gpt-4.1-mini"], &upstream.base_url()),
        &env,
        None,
    )
    .await;

    let listed: Value = reqwest::get(gateway.url("/v1/models")).await.unwrap().json().await.unwrap();
    let find = |id: &str| listed["data"].as_array().unwrap().iter().find(|m| m["id"] == id).cloned().unwrap();
    for (role, entry) in [("chat", "gpt-4.1"), ("fast", "gpt-4.1-mini"), ("embed", "text-embedding-3-small")] {
        assert_eq!(find(role)["weir"]["resolves_to"], entry, "{role}: {listed}");
    }
    assert_eq!(find("rerank")["weir"]["unavailable"], "role_unavailable", "{listed}");

    upstream.push(weir_tests::openai_wire::completion("From the chat role."));
    let body = json!({"model": "chat", "max_tokens": 50, "messages": [{"role": "user", "content": "Hello"}]});
    let response = reqwest::Client::new().post(gateway.url("/v1/chat/completions")).json(&body).send().await.unwrap();
    assert_eq!(response.status().as_u16(), 200);
    assert_eq!(response.headers()["x-weir-model"], "gpt-4.1");
    assert_eq!(response.headers()["x-weir-role"], "chat");
    let answer: Value = response.json().await.unwrap();
    assert_eq!(answer["choices"][0]["message"]["content"], "From the chat role.", "{answer}");
    assert_eq!(upstream.received()[0].json()["model"], "gpt-4.1");

    let rerank = json!({"model": "rerank", "query": "q", "documents": ["a", "b"]});
    let response = reqwest::Client::new().post(gateway.url("/v1/rerank")).json(&rerank).send().await.unwrap();
    assert_eq!(response.status().as_u16(), 503);
    let refused: Value = response.json().await.unwrap();
    assert_eq!(refused["error"]["code"], "role_unavailable", "{refused}");
    assert_eq!(upstream.request_count(), 1, "nothing else was sent");
}
