//! Decisions through the real `weir serve` to a fake decision endpoint over
//! loopback (`POST /v1/decisions` on both sides, `docs/src/providers/decision-wire.md`):
//! what the caller got and what the endpoint received, the wire's error
//! statuses through the one retry loop, every kind of malformed answer, an
//! unknown host, the throttle, the ledger's record and a budget.

// Test code: a failed step should stop the test with its message.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use weir_tests::decision_wire::{self, fake_decision};
use weir_tests::{FakeUpstream, Gateway, Posted, Received, Scripted};

const SECRET: &str = "sk-decider-secret-0123456789";
const ENV: [(&str, &str); 1] = [("DECIDER_KEY", SECRET)];

/// A decision entry `triage` on `endpoint`, and whatever `extra` adds to it.
fn config(endpoint: &str, extra: &str) -> String {
    format!(
        r#"
read_timeout_secs = 5

[[model]]
id = "triage"
provider = "decision"
kind = "decision"
wire_id = "jev-2-large"
endpoint = "{endpoint}"
credential = "decider-key"
context_window = 8192
max_retries = 2
{extra}

[[model]]
id = "chat"
provider = "openai-compatible"
wire_id = "qwen3"
endpoint = "{endpoint}"
max_output_tokens = 100
context_window = 8192

[role.router]
model = "triage"
kind = "decision"
"#
    )
}

fn question(model: &str) -> Value {
    json!({
        "model": model,
        "state": {
            "text": "Customer writes: my card was charged twice for March.",
            "fields": {"plan": "pro", "tenure_months": 14, "flagged": false, "region": null}
        },
        "questions": [
            {"id": "intent", "shape": "choice", "options": ["billing", "bug", "feature", "other"]},
            {"id": "refund_owed", "shape": "noul"},
            {"id": "urgency", "shape": "score", "min": 1, "max": 5}
        ]
    })
}

/// What a test reads of an answer beyond [`Posted`]'s fields.
trait Read {
    fn attempts(&self) -> u32;
    fn code(&self) -> &str;
}

impl Read for Posted {
    fn attempts(&self) -> u32 {
        self.headers["x-weir-attempts"].to_str().unwrap().parse().unwrap()
    }

    fn code(&self) -> &str {
        self.body["error"]["code"].as_str().unwrap_or_default()
    }
}

async fn decide(gateway: &Gateway, body: &Value, headers: &[(&str, &str)]) -> Posted {
    gateway.post_json("/v1/decisions", body, headers).await
}

fn decision_requests(upstream: &FakeUpstream) -> Vec<Received> {
    upstream.received().into_iter().filter(|r| r.path == "/v1/decisions").collect()
}

async fn gateway_for(upstream: &FakeUpstream, extra: &str) -> Gateway {
    Gateway::start_with(&config(&upstream.base_url(), extra), &ENV, None).await
}

#[tokio::test]
async fn a_decision_is_answered_by_question_id_with_what_the_endpoint_billed() {
    let upstream = FakeUpstream::start().await;
    let gateway = gateway_for(&upstream, "").await;
    let answer = decide(&gateway, &question("triage"), &[]).await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    let sent = decision_requests(&upstream);
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].method, "POST");
    assert_eq!(sent[0].header("authorization"), Some(format!("Bearer {SECRET}").as_str()));
    assert_eq!(sent[0].header("content-type"), Some("application/json"));
    let received = sent[0].json();
    assert_eq!(received["model"], "jev-2-large", "the entry's wire id");
    assert_eq!(received["questions"], question("triage")["questions"]);
    assert_eq!(received["state"], question("triage")["state"]);
    let expected = fake_decision(&received, &sent[0].body).unwrap();
    assert_eq!(answer.body["answers"], expected["answers"], "distributions as the endpoint gave them");
    assert_eq!(answer.body["usage"]["input_tokens"], decision_wire::billed_tokens(&sent[0].body));
    assert_eq!(answer.body["model"], decision_wire::SERVED_MODEL);
    assert_eq!(answer.body["request_id"], answer.headers["x-weir-call-id"].to_str().unwrap());
    assert_eq!(answer.headers["x-weir-model"], "triage");
    assert_eq!(answer.attempts(), 1);
    let outcomes: Vec<&str> =
        answer.body["answers"][2]["distribution"].as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(outcomes.len(), 5, "a score's five integers");
    assert!(!answer.body.to_string().contains(SECRET));
}

#[tokio::test]
async fn a_decision_role_resolves_to_its_entry_and_a_chat_name_is_refused_before_sending() {
    let upstream = FakeUpstream::start().await;
    let gateway = gateway_for(&upstream, "").await;
    let answer = decide(&gateway, &question("router"), &[]).await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert_eq!(answer.headers["x-weir-model"], "triage");
    let chat = decide(&gateway, &question("chat"), &[]).await;
    assert_eq!(chat.status, 400, "{}", chat.body);
    assert!(chat.body["error"]["message"].as_str().unwrap().contains("not a decision one"), "{}", chat.body);
    let unknown = decide(&gateway, &question("nobody"), &[]).await;
    assert_eq!(unknown.status, 404, "{}", unknown.body);
    assert_eq!(decision_requests(&upstream).len(), 1, "only the role's call was sent");
}

#[tokio::test]
async fn a_request_that_breaks_the_wire_is_refused_and_nothing_is_sent() {
    let upstream = FakeUpstream::start().await;
    let gateway = gateway_for(&upstream, "").await;
    let mut twice = question("triage");
    twice["questions"][1]["id"] = json!("intent");
    let mut reversed = question("triage");
    reversed["questions"][2] = json!({"id": "urgency", "shape": "score", "min": 5, "max": 1});
    let mut no_state = question("triage");
    no_state["state"] = json!({});
    let mut unknown_field = question("triage");
    unknown_field["temperature"] = json!(0.2);
    let mut unknown_shape = question("triage");
    unknown_shape["questions"][0]["shape"] = json!("ranking");
    for (name, body, words) in [
        ("id twice", twice, "used twice"),
        ("score reversed", reversed, "must be below"),
        ("no state", no_state, "nothing to decide about"),
        ("unknown field", unknown_field, "unknown field"),
        ("unknown shape", unknown_shape, "ranking"),
    ] {
        let answer = decide(&gateway, &body, &[]).await;
        assert_eq!(answer.status, 400, "{name}: {}", answer.body);
        assert_eq!(answer.code(), "invalid_request", "{name}");
        assert!(answer.body["error"]["message"].as_str().unwrap().contains(words), "{name}: {}", answer.body);
    }
    assert!(decision_requests(&upstream).is_empty());
}

#[tokio::test]
async fn a_429_is_retried_after_its_retry_after_and_a_quota_or_a_4xx_is_not() {
    let upstream = FakeUpstream::start().await;
    let gateway = gateway_for(&upstream, "").await;
    upstream.push(decision_wire::error(429, "rate_limited", "RAW-DECIDER-TEXT slow down", Some("1")));
    let started = Instant::now();
    let answer = decide(&gateway, &question("triage"), &[]).await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert_eq!(answer.attempts(), 2);
    assert!(started.elapsed() >= Duration::from_secs(1), "waited out retry-after: {:?}", started.elapsed());
    for (status, kind, code) in [
        (429, "quota_exhausted", "provider_credit_exhausted"),
        (402, "payment_required", "provider_credit_exhausted"),
        (401, "unauthorized", "authentication_failed"),
        (404, "not_found", "model_not_found"),
        (422, "invalid", "invalid_request"),
    ] {
        upstream.push(decision_wire::error(status, kind, "RAW-DECIDER-TEXT", None));
        let answer = decide(&gateway, &question("triage"), &[]).await;
        assert_eq!(answer.code(), code, "{status} {kind}: {}", answer.body);
        assert_eq!(answer.attempts(), 1, "{status} {kind} is not retried");
        assert!(!answer.body.to_string().contains("RAW-DECIDER-TEXT"), "{}", answer.body);
    }
}

#[tokio::test]
async fn a_5xx_is_transient_and_retried_until_the_budget_is_spent() {
    let upstream = FakeUpstream::start().await;
    let gateway = gateway_for(&upstream, "").await;
    for _ in 0..3 {
        upstream.push(decision_wire::error(503, "overloaded", "RAW-DECIDER-TEXT", None));
    }
    let answer = decide(&gateway, &question("triage"), &[]).await;
    assert_eq!(answer.status, 502, "{}", answer.body);
    assert_eq!(answer.code(), "upstream_unavailable");
    assert_eq!(answer.attempts(), 3, "the first and the entry's two retries");
    assert!(answer.body["error"]["message"].as_str().unwrap().contains("gave up after 3 attempts"));
    assert!(!answer.body.to_string().contains("RAW-DECIDER-TEXT"));
    upstream.push(Scripted::Drop);
    let reset = decide(&gateway, &question("triage"), &[]).await;
    assert_eq!(reset.status, 200, "a reset connection is retried: {}", reset.body);
    assert_eq!(reset.attempts(), 2);
}

/// Each way an answer can break the wire, as raw JSON text (a key given twice
/// cannot be written as a `Value`).
fn malformed_answers() -> Vec<(&'static str, String, &'static str)> {
    let good = |intent: &str| {
        format!(
            r#"{{"answers": [{{"id": "intent", "distribution": {intent}}},
            {{"id": "refund_owed", "distribution": {{"true": 0.5, "false": 0.25, "null": 0.25}}}},
            {{"id": "urgency", "distribution": {{"1": 0.2, "2": 0.2, "3": 0.2, "4": 0.2, "5": 0.2}}}}]}}"#
        )
    };
    vec![
        ("not JSON", "the answer is coming".to_owned(), "not the decision wire's JSON"),
        ("a question missing", r#"{"answers": []}"#.to_owned(), "has no answer"),
        (
            "an outcome missing",
            good(r#"{"billing": 0.5, "bug": 0.25, "feature": 0.25}"#),
            "outcome `other` has no probability",
        ),
        (
            "an undeclared outcome",
            good(r#"{"billing": 0.4, "bug": 0.2, "feature": 0.2, "other": 0.1, "BOGUS-OUTCOME": 0.1}"#),
            "an outcome that was not declared",
        ),
        (
            "a negative probability",
            good(r#"{"billing": 1.2, "bug": -0.2, "feature": 0.0, "other": 0.0}"#),
            "has probability -0.2",
        ),
        ("a sum off 1", good(r#"{"billing": 0.5, "bug": 0.25, "feature": 0.25, "other": 0.25}"#), "sum to 1.25"),
        (
            "an outcome twice",
            good(r#"{"billing": 0.25, "billing": 0.25, "bug": 0.25, "feature": 0.25, "other": 0.0}"#),
            "outcome `billing` is given twice",
        ),
        (
            "a question not asked",
            good(r#"{"billing": 1.0, "bug": 0.0, "feature": 0.0, "other": 0.0}"#)
                .replace(r#"{"answers": ["#, r#"{"answers": [{"id": "BOGUS-ID", "distribution": {}}, "#),
            "a question that was not asked",
        ),
        (
            "a question answered twice",
            good(r#"{"billing": 1.0, "bug": 0.0, "feature": 0.0, "other": 0.0}"#).replace(
                r#"{"answers": ["#,
                r#"{"answers": [{"id": "urgency", "distribution": {"1": 1, "2": 0, "3": 0, "4": 0, "5": 0}}, "#,
            ),
            "question `urgency` is answered twice",
        ),
    ]
}

#[tokio::test]
async fn a_malformed_answer_of_each_kind_fails_as_upstream_error_unrepaired_and_unretried() {
    let upstream = FakeUpstream::start().await;
    let gateway = gateway_for(&upstream, "").await;
    for (name, body, words) in malformed_answers() {
        upstream.push(Scripted::Respond {
            status: 200,
            headers: vec![("content-type".into(), "application/json".into())],
            body: body.into(),
        });
        let answer = decide(&gateway, &question("triage"), &[]).await;
        assert_eq!(answer.status, 502, "{name}: {}", answer.body);
        assert_eq!(answer.code(), "upstream_error", "{name}");
        assert_eq!(answer.attempts(), 1, "{name}: never retried");
        let message = answer.body["error"]["message"].as_str().unwrap();
        assert!(message.contains(words), "{name}: {message}");
        assert!(!message.contains("BOGUS"), "{name}: the endpoint's own words are not repeated: {message}");
    }
    assert_eq!(decision_requests(&upstream).len(), malformed_answers().len());
    let good = decide(&gateway, &question("triage"), &[]).await;
    assert_eq!(good.status, 200, "the gateway is healthy after them: {}", good.body);
}

/// An endpoint that echoes the key it was sent — in an error's message, and
/// as a question id in a malformed answer — has it logged as `<credential>`.
#[tokio::test]
async fn the_key_an_endpoint_echoes_is_logged_scrubbed() {
    let upstream = FakeUpstream::start().await;
    let gateway = gateway_for(&upstream, "").await;
    upstream.push(decision_wire::error(401, "authentication_error", &format!("bad key Bearer {SECRET}"), None));
    upstream.push(decision_wire::answer(&json!({"answers": [{"id": SECRET, "distribution": {}}]})));
    let rejected = decide(&gateway, &question("triage"), &[]).await;
    assert_eq!(rejected.code(), "authentication_failed", "{}", rejected.body);
    assert_eq!(decide(&gateway, &question("triage"), &[]).await.status, 502);
    let sent = decision_requests(&upstream);
    assert_eq!(sent[0].header("authorization"), Some(format!("Bearer {SECRET}").as_str()));
    let log = gateway.wait_for_stderr("the decision endpoint's answer is malformed", Duration::from_secs(10)).await;
    assert!(log.contains("bad key <credential>"), "{log}");
    assert!(log.contains("an answer is given for `<credential>`"), "{log}");
    assert!(!log.contains(SECRET), "{log}");
}

#[tokio::test]
async fn an_endpoint_whose_host_does_not_exist_is_refused_as_uncorrectable() {
    let gateway = Gateway::start_with(&config("https://no-such-decider.invalid/v1", ""), &ENV, None).await;
    let answer = decide(&gateway, &question("triage"), &[]).await;
    assert_eq!(answer.status, 502, "{}", answer.body);
    assert_eq!(answer.code(), "upstream_error");
    assert_eq!(answer.attempts(), 1, "a name that does not resolve is not retried");
    let message = answer.body["error"]["message"].as_str().unwrap();
    assert!(message.contains("host that does not exist") && !message.contains("no-such-decider"), "{message}");
}

/// The throttle coefficient `/v1/models` reports for `model`.
async fn coefficient(gateway: &Gateway, model: &str) -> f64 {
    let models: Value = reqwest::get(gateway.url("/v1/models")).await.unwrap().json().await.unwrap();
    let entry = models["data"].as_array().unwrap().iter().find(|m| m["id"] == model).unwrap();
    entry["weir"]["admission"]["throttle_coefficient"].as_f64().unwrap()
}

#[tokio::test]
async fn a_concurrency_capped_entry_feeds_no_throttle_and_a_rate_limited_one_does() {
    let upstream = FakeUpstream::start().await;
    let extra = format!(
        "max_concurrency = 2\n\n[[model]]\nid = \"paced\"\nprovider = \"decision\"\nkind = \"decision\"\n\
         wire_id = \"jev-2-large\"\nendpoint = \"{}\"\ncredential = \"decider-key\"\ncontext_window = 8192\n\
         rpm = 600\n",
        upstream.base_url()
    );
    let gateway = gateway_for(&upstream, &extra).await;
    assert_eq!(coefficient(&gateway, "triage").await, 0.0);
    upstream.push(decision_wire::error(429, "rate_limited", "slow down", Some("0")));
    let capped = decide(&gateway, &question("triage"), &[]).await;
    assert_eq!((capped.status, capped.attempts()), (200, 2), "{}", capped.body);
    assert_eq!(coefficient(&gateway, "triage").await, 0.0, "a gate and nothing adaptive to feed");
    upstream.push(decision_wire::error(429, "rate_limited", "slow down", Some("0")));
    let paced = decide(&gateway, &question("paced"), &[]).await;
    assert_eq!((paced.status, paced.attempts()), (200, 2), "{}", paced.body);
    assert!(coefficient(&gateway, "paced").await > 0.0, "the 429 moved the rpm bucket's throttle");
}

#[tokio::test]
async fn the_call_is_in_the_ledger_with_billed_input_no_output_and_its_distributions() {
    let upstream = FakeUpstream::start().await;
    let extra = "input_price = 2.0\n";
    let text =
        format!("{}\n[ledger]\npath = \"ledger.db\"\nrecord_content = true\n", config(&upstream.base_url(), extra));
    let gateway = Gateway::start_with(&text, &ENV, None).await;
    let answer = decide(&gateway, &question("triage"), &[]).await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    upstream.push(decision_wire::error(401, "unauthorized", "bad key", None));
    assert_eq!(decide(&gateway, &question("triage"), &[]).await.code(), "authentication_failed");
    let ledger = gateway.dir().join("ledger.db");
    let records = weir_tests::closed_records(&ledger);
    assert_eq!(records.len(), 2, "{records:?}");
    let ok = records.iter().find(|r| r["category"] == "ok").unwrap();
    let billed = decision_wire::billed_tokens(&decision_requests(&upstream)[0].body);
    assert_eq!(ok["operation"], "decide");
    assert_eq!(ok["route"], "decisions");
    assert_eq!(ok["provider"], "decision");
    assert_eq!(ok["model"], "triage");
    assert_eq!(ok["usage"]["input"], billed);
    assert_eq!(ok["usage"]["output"], 0);
    let cost = ok["cost_usd"].as_f64().unwrap();
    assert!((cost - billed as f64 * 2.0 / 1e6).abs() < 1e-12, "{cost}");
    assert_eq!(ok["content"]["answer"]["answers"], answer.body["answers"], "the distributions, recorded");
    assert_eq!(ok["call_id"], answer.headers["x-weir-call-id"].to_str().unwrap());
    let failed = records.iter().find(|r| r["category"] != "ok").unwrap();
    assert_eq!(failed["category"], "authentication_failed");
    assert_eq!(failed["operation"], "decide");
    assert!(!serde_json::to_string(&records).unwrap().contains(SECRET));
    let metrics = reqwest::get(gateway.url("/metrics")).await.unwrap().text().await.unwrap();
    let calls =
        r#"weir_calls_total{model="triage",provider="decision",category="ok",route="decisions",operation="decide"} 1"#;
    assert!(metrics.lines().any(|line| line == calls), "{metrics}");
    let tokens = format!(r#"weir_tokens_total{{model="triage",kind="input"}} {billed}"#);
    assert!(metrics.lines().any(|line| line == tokens), "{metrics}");
}

#[tokio::test]
async fn a_member_budget_caps_decision_spend_before_the_call() {
    let upstream = FakeUpstream::start().await;
    let token = "sk-weir-decide-budget";
    let extra = format!(
        "\n[[key]]\nid = \"k\"\nmember = \"ana\"\nhash = \"{}\"\n\n[member.ana]\ndaily_tokens = 200\n",
        weir_host::identity::hash_of(token)
    );
    let text = format!("{}{extra}", config(&upstream.base_url(), ""));
    let gateway = Gateway::start_with(&text, &ENV, None).await;
    let auth = format!("Bearer {token}");
    let mut answered = 0;
    let mut refused = None;
    for _ in 0..10 {
        let answer = decide(&gateway, &question("triage"), &[("authorization", &auth)]).await;
        match answer.status {
            200 => answered += 1,
            _ => {
                refused = Some(answer);
                break;
            }
        }
    }
    let refused = refused.expect("the budget ran out within ten calls");
    assert_eq!(refused.status, 429, "{}", refused.body);
    assert_eq!(refused.code(), "budget_exhausted");
    assert!(answered >= 1, "the first calls fit");
    assert_eq!(decision_requests(&upstream).len(), answered, "the refused call sent nothing");
    let anonymous = decide(&gateway, &question("triage"), &[]).await;
    assert_eq!(anonymous.status, 401, "keys are on: {}", anonymous.body);
}

/// The library's `decide`, in process: the answer read back by the shape
/// asked, the caller's identity on the call, and an entry that names no
/// credential sends none.
#[tokio::test]
async fn the_library_decides_and_reads_each_answer_back_by_its_shape() {
    use weir_host::decision::{DecideRequest, DecisionRequest};
    let upstream = FakeUpstream::start().await;
    let text = config(&upstream.base_url(), "").replace("credential = \"decider-key\"\n", "");
    let weir = weir_host::Weir::builder()
        .config(weir_host::catalog::Config::from_toml(&text, "test").unwrap())
        .providers_dir("/nonexistent-weir-providers")
        .cache_dir(Some(std::env::temp_dir().join("weir-decisions-test-cache")))
        .build()
        .unwrap();
    let question: DecisionRequest = serde_json::from_value(question("triage")).unwrap();
    let caller = weir_host::Caller { key_id: None, member: "svc-billing".into(), team: None };
    let answer = weir.decide(DecideRequest::new(question).caller(caller)).await.unwrap();
    let sent = decision_requests(&upstream);
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].header("authorization"), None, "no credential named, none sent");
    let expected = fake_decision(&sent[0].json(), &sent[0].body).unwrap();
    let intent = answer.decision.choice("intent").unwrap();
    let options: Vec<&str> = intent.iter().map(|(option, _)| *option).collect();
    assert_eq!(options, ["billing", "bug", "feature", "other"]);
    assert_eq!(intent[0].1, expected["answers"][0]["distribution"]["billing"].as_f64().unwrap());
    let noul = answer.decision.noul("refund_owed").unwrap();
    assert!((noul.r#true + noul.r#false + noul.null - 1.0).abs() < 1e-9);
    let urgency = answer.decision.score("urgency").unwrap();
    assert_eq!(urgency.iter().map(|(value, _)| *value).collect::<Vec<_>>(), [1, 2, 3, 4, 5]);
    assert!(answer.decision.noul("intent").is_none(), "read back by the shape asked only");
    assert_eq!(answer.input_tokens, decision_wire::billed_tokens(&sent[0].body));
    assert!(!answer.input_tokens_estimated);
    assert_eq!(answer.stamp.model, "triage");
    assert_eq!(answer.stamp.provider.as_deref(), Some("decision"));
}

#[tokio::test]
async fn an_endpoint_that_reports_no_usage_is_billed_at_the_hosts_estimate() {
    let upstream = FakeUpstream::start().await;
    let gateway = gateway_for(&upstream, "").await;
    let uniform = |n: usize| {
        let keys: Vec<String> = match n {
            3 => vec!["true".into(), "false".into(), "null".into()],
            4 => vec!["billing".into(), "bug".into(), "feature".into(), "other".into()],
            _ => (1..=5).map(|v: i32| v.to_string()).collect(),
        };
        Value::Object(keys.into_iter().map(|k| (k, json!(1.0 / n as f64))).collect())
    };
    upstream.push(decision_wire::distributions(
        &[("intent", uniform(4)), ("refund_owed", uniform(3)), ("urgency", uniform(5))],
        None,
    ));
    let answer = decide(&gateway, &question("triage"), &[]).await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    let billed = answer.body["usage"]["input_tokens"].as_u64().unwrap();
    assert!(billed > 0, "the estimate stands in, never zero");
    assert_eq!(answer.body["answers"][0]["distribution"]["bug"], 0.25);
}

#[tokio::test]
async fn a_key_may_decide_only_with_the_entries_it_lists() {
    let upstream = FakeUpstream::start().await;
    let (chat_only, decider) = ("sk-weir-chat-only", "sk-weir-decider");
    let keys = format!(
        "\n[[key]]\nid = \"chat-only\"\nmember = \"ana\"\nhash = \"{}\"\nmodels = [\"chat\"]\n\
         \n[[key]]\nid = \"decider\"\nmember = \"bo\"\nhash = \"{}\"\nmodels = [\"router\"]\n",
        weir_host::identity::hash_of(chat_only),
        weir_host::identity::hash_of(decider)
    );
    let text = format!("{}{keys}", config(&upstream.base_url(), ""));
    let gateway = Gateway::start_with(&text, &ENV, None).await;
    let refused = decide(&gateway, &question("triage"), &[("authorization", &format!("Bearer {chat_only}"))]).await;
    assert_eq!(refused.status, 403, "{}", refused.body);
    assert_eq!(refused.code(), "permission_denied");
    assert!(decision_requests(&upstream).is_empty(), "nothing sent for a refused key");
    let by_role = decide(&gateway, &question("router"), &[("x-api-key", decider)]).await;
    assert_eq!(by_role.status, 200, "a key listing the role may call its entry: {}", by_role.body);
    let by_id = decide(&gateway, &question("triage"), &[("x-api-key", decider)]).await;
    assert_eq!(by_id.status, 403, "the role, not the entry by its id: {}", by_id.body);
    assert_eq!(decision_requests(&upstream).len(), 1);
}

/// A decision entry answered by an OpenAI-dialect chat model's log-probabilities.
fn logprobs_config(endpoint: &str) -> String {
    format!(
        r#"
read_timeout_secs = 5

[[model]]
id = "by-logprobs"
provider = "openai-compatible"
kind = "decision"
backend = "logprobs"
wire_id = "qwen3-8b"
endpoint = "{endpoint}"
context_window = 8192
max_retries = 2
input_price = 1.0
output_price = 4.0

[ledger]
path = "ledger.db"
"#
    )
}

fn assert_distribution(got: &Value, want: &[(&str, f64)]) {
    let got = got.as_object().unwrap();
    assert_eq!(got.len(), want.len(), "{got:?}");
    for (outcome, p) in want {
        let value = got[*outcome].as_f64().unwrap();
        assert!((value - p).abs() < 1e-9, "{outcome}: {value} vs {p} in {got:?}");
    }
}

/// `question("by-logprobs")` asking only its question number `index`.
fn only(index: usize) -> Value {
    let mut body = question("by-logprobs");
    body["questions"] = json!([body["questions"][index].clone()]);
    body
}

#[tokio::test]
async fn a_chat_model_answers_by_its_first_tokens_log_probabilities() {
    let upstream = FakeUpstream::start().await;
    let gateway = Gateway::start(&logprobs_config(&upstream.base_url())).await;
    // intent: D is not listed; 0.05 is unlisted and the least listed is 0.05, so D gets 0.05.
    upstream.push(decision_wire::top_logprobs(&[("A", 0.6), ("B", 0.2), ("C", 0.1), ("The", 0.05)], 120));
    let intent = decide(&gateway, &only(0), &[]).await;
    assert_eq!(intent.status, 200, "{}", intent.body);
    let sum = 0.95;
    assert_distribution(
        &intent.body["answers"][0]["distribution"],
        &[("billing", 0.6 / sum), ("bug", 0.2 / sum), ("feature", 0.1 / sum), ("other", 0.05 / sum)],
    );
    assert_eq!(intent.body["usage"]["input_tokens"], 120, "the prompt as billed");
    assert_eq!(intent.body["model"], "qwen3-8b-instruct");
    // refund_owed: " A" counts for A; C is not listed: 0.03 is unlisted, but the least listed
    // is 0.02, so C gets 0.02.
    upstream.push(decision_wire::top_logprobs(&[("A", 0.85), (" A", 0.05), ("B", 0.05), ("x", 0.02)], 110));
    let refund = decide(&gateway, &only(1), &[]).await;
    let sum = 0.9 + 0.05 + 0.02;
    assert_distribution(
        &refund.body["answers"][0]["distribution"],
        &[("true", 0.9 / sum), ("false", 0.05 / sum), ("null", 0.02 / sum)],
    );
    // urgency 1–5: one letter per integer, every one listed.
    upstream.push(decision_wire::top_logprobs(&[("C", 0.4), ("B", 0.2), ("D", 0.2), ("A", 0.1), ("E", 0.1)], 130));
    let urgency = decide(&gateway, &only(2), &[]).await;
    assert_distribution(
        &urgency.body["answers"][0]["distribution"],
        &[("1", 0.1), ("2", 0.2), ("3", 0.4), ("4", 0.2), ("5", 0.1)],
    );
    let sent: Vec<Received> = upstream.received().into_iter().filter(|r| r.path == "/v1/chat/completions").collect();
    assert_eq!(sent.len(), 3);
    for request in &sent {
        let body = request.json();
        assert_eq!(body["model"], "qwen3-8b");
        assert_eq!(body["logprobs"], true);
        assert_eq!(body["top_logprobs"], 20);
        assert_eq!(body["max_tokens"], 1);
        assert_eq!(body["temperature"], 0.0);
    }
    let prompt = |i: usize| sent[i].json()["messages"][1]["content"].as_str().unwrap().to_owned();
    assert!(prompt(0).contains("my card was charged twice") && prompt(0).contains("- plan: pro"), "{}", prompt(0));
    assert!(prompt(0).contains("Question: intent\nA: billing\nB: bug\nC: feature\nD: other\n"), "{}", prompt(0));
    assert!(prompt(1).contains("Question: refund owed? (A: yes, B: no, C: the state does not say)"), "{}", prompt(1));
    assert!(prompt(2).contains("A: 1\nB: 2\nC: 3\nD: 4\nE: 5\n"), "{}", prompt(2));
    let records = weir_tests::closed_records(&gateway.dir().join("ledger.db"));
    let record = records.iter().find(|r| r["operation"] == "decide").unwrap();
    assert_eq!(record["provider"], "openai-compatible");
    assert_eq!(record["usage"]["input"], 120);
    assert_eq!(record["usage"]["output"], 1, "the question's one label token, as billed");
    let cost = record["cost_usd"].as_f64().unwrap();
    assert!((cost - (120.0 * 1.0 + 1.0 * 4.0) / 1e6).abs() < 1e-12, "{cost}");
}

/// The fake's own answer to a log-probability request (`A` 0.7, `B` 0.2, `C` 0.1), for
/// every question of one call at once.
#[tokio::test]
async fn the_questions_of_one_call_are_asked_at_once_and_answered_in_order() {
    let upstream = FakeUpstream::start().await;
    upstream.delay_answers(Duration::from_millis(500));
    let gateway = Gateway::start(&logprobs_config(&upstream.base_url())).await;
    let answer = decide(&gateway, &question("by-logprobs"), &[]).await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert_eq!(answer.attempts(), 3, "one request per question");
    assert!(upstream.most_concurrent() >= 2, "asked at once: {}", upstream.most_concurrent());
    let answers = answer.body["answers"].as_array().unwrap();
    let ids: Vec<&str> = answers.iter().map(|a| a["id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["intent", "refund_owed", "urgency"], "the request's order");
    assert_distribution(
        &answers[0]["distribution"],
        &[("billing", 0.7), ("bug", 0.2), ("feature", 0.1), ("other", 0.0)],
    );
    assert_distribution(&answers[1]["distribution"], &[("true", 0.7), ("false", 0.2), ("null", 0.1)]);
    assert_distribution(&answers[2]["distribution"], &[("1", 0.7), ("2", 0.2), ("3", 0.1), ("4", 0.0), ("5", 0.0)]);
    let records = weir_tests::closed_records(&gateway.dir().join("ledger.db"));
    let record = records.iter().find(|r| r["operation"] == "decide").unwrap();
    assert_eq!(record["usage"]["output"], 3, "each question's one label token");
    assert_eq!(record["attempts"].as_array().unwrap().len(), 3);
    let input = record["usage"]["input"].as_u64().unwrap();
    assert_eq!(answer.body["usage"]["input_tokens"], input);
    let cost = record["cost_usd"].as_f64().unwrap();
    assert!((cost - (input as f64 * 1.0 + 3.0 * 4.0) / 1e6).abs() < 1e-12, "{cost}");
}

#[tokio::test]
async fn a_first_token_that_is_no_label_fails_the_call_and_a_429_is_retried() {
    let upstream = FakeUpstream::start().await;
    let gateway = Gateway::start(&logprobs_config(&upstream.base_url())).await;
    let one = json!({"model": "by-logprobs", "state": {"text": "hi"}, "questions": [{"id": "q", "shape": "noul"}]});
    upstream.push(decision_wire::top_logprobs(&[("SECRET-WORD", 0.9), ("Yes", 0.05)], 20));
    let refused = decide(&gateway, &one, &[]).await;
    assert_eq!(refused.status, 502, "{}", refused.body);
    assert_eq!(refused.code(), "upstream_error");
    assert_eq!(refused.attempts(), 1, "not retried: the same prompt gets the same token");
    let message = refused.body["error"]["message"].as_str().unwrap();
    assert!(message.contains("none of the labels") && !message.contains("SECRET-WORD"), "{message}");
    upstream.push(Scripted::Respond {
        status: 429,
        headers: vec![("retry-after".into(), "0".into()), ("content-type".into(), "application/json".into())],
        body: weir_tests::openai_wire::error_body("rate_limit_exceeded", None, None, "slow down").to_string().into(),
    });
    upstream.push(decision_wire::top_logprobs(&[("B", 0.7), ("A", 0.2), ("C", 0.1)], 20));
    let retried = decide(&gateway, &one, &[]).await;
    assert_eq!(retried.status, 200, "{}", retried.body);
    assert_eq!(retried.attempts(), 2);
    assert_distribution(&retried.body["answers"][0]["distribution"], &[("true", 0.2), ("false", 0.7), ("null", 0.1)]);
    let many: Vec<String> = (0..27).map(|i| format!("option {i}")).collect();
    let wide = json!({"model": "by-logprobs", "state": {"text": "hi"},
        "questions": [{"id": "q", "shape": "choice", "options": many}]});
    let too_wide = decide(&gateway, &wide, &[]).await;
    assert_eq!(too_wide.status, 400, "{}", too_wide.body);
    assert!(too_wide.body["error"]["message"].as_str().unwrap().contains("26 letters"), "{}", too_wide.body);
}

#[test]
fn a_logprobs_entry_its_provider_cannot_answer_is_refused_at_load() {
    let cases = [
        ("anthropic", "https://api.anthropic.com/v1", "qwen3-8b", "does not export"),
        ("openai", "https://api.openai.com/v1", "o3-mini", "says it does not speak"),
    ];
    for (provider, endpoint, wire_id, words) in cases {
        let text = logprobs_config(endpoint)
            .replace("provider = \"openai-compatible\"", &format!("provider = \"{provider}\""))
            .replace("wire_id = \"qwen3-8b\"", &format!("wire_id = \"{wire_id}\""))
            .replace("[ledger]\npath = \"ledger.db\"\n", "");
        let built = weir_host::Weir::builder()
            .config(weir_host::catalog::Config::from_toml(&text, "test").unwrap())
            .providers_dir("/nonexistent-weir-providers")
            .cache_dir(Some(std::env::temp_dir().join("weir-decisions-test-cache")))
            .build();
        let Err(error) = built else { panic!("{provider} {wire_id}: must be refused at load") };
        let message = error.to_string();
        assert!(
            message.contains("by-logprobs") && message.contains("logprobs") && message.contains(words),
            "{message}"
        );
    }
}

#[tokio::test]
async fn a_failed_question_fails_the_call_those_in_flight_finish_and_no_more_are_sent() {
    let upstream = FakeUpstream::start().await;
    let gateway = Gateway::start(&logprobs_config(&upstream.base_url())).await;
    let questions: Vec<Value> = (0..6).map(|i| json!({"id": format!("q{i}"), "shape": "noul"})).collect();
    let six = json!({"model": "by-logprobs", "state": {"text": "hi"}, "questions": questions});
    // Whichever question arrives first is answered at once with no label; the other three
    // of the first four are answered later, after the failure is known.
    upstream.push(decision_wire::top_logprobs(&[("Hello", 0.9)], 20));
    for _ in 0..3 {
        upstream.push(decision_wire::top_logprobs(&[("A", 0.9), ("B", 0.1)], 20).after(Duration::from_millis(500)));
    }
    let answer = decide(&gateway, &six, &[]).await;
    assert_eq!(answer.status, 502, "{}", answer.body);
    assert_eq!(answer.code(), "upstream_error");
    assert_eq!(answer.attempts(), 4, "the four in flight finished, and are counted");
    let sent = upstream.received().into_iter().filter(|r| r.path == "/v1/chat/completions").count();
    assert_eq!(sent, 4, "no question started after the failure");
    let records = weir_tests::closed_records(&gateway.dir().join("ledger.db"));
    let record = records.iter().find(|r| r["operation"] == "decide").unwrap();
    assert_eq!(record["category"], "upstream_error");
    assert_eq!(record["attempts"].as_array().unwrap().len(), 4, "every attempt made is on the record");
}

/// Each distribution comes back in its question's declared outcome order, as
/// the wire's text (not a parsed object, whose keys a JSON library may sort):
/// a `choice` declared `other, billing, bug`, a `noul` as `true, false, null`,
/// a score from 1 to 12 numerically (sorted text would put `10` before `2`).
#[tokio::test]
async fn distributions_come_back_in_declared_outcome_order() {
    let upstream = FakeUpstream::start().await;
    let gateway = gateway_for(&upstream, "").await;
    let body = json!({
        "model": "triage",
        "state": {"text": "Customer writes: my card was charged twice."},
        "questions": [
            {"id": "intent", "shape": "choice", "options": ["other", "billing", "bug"]},
            {"id": "refund_owed", "shape": "noul"},
            {"id": "urgency", "shape": "score", "min": 1, "max": 12}
        ]
    });
    let response = reqwest::Client::new().post(gateway.url("/v1/decisions")).json(&body).send().await.unwrap();
    assert_eq!(response.status(), 200);
    let text = response.text().await.unwrap();
    let parsed: Value = serde_json::from_str(&text).unwrap();
    let answers = parsed["answers"].as_array().unwrap();
    assert_eq!(answers.len(), 3, "{text}");
    let scores: Vec<String> = (1..=12).map(|n| n.to_string()).collect();
    let declared =
        [vec!["other", "billing", "bug"], vec!["true", "false", "null"], scores.iter().map(String::as_str).collect()];
    for (answer, outcomes) in answers.iter().zip(&declared) {
        // The distribution's keys as the gateway wrote them, in order, from the raw body.
        let id = answer["id"].as_str().unwrap();
        let start = text.find(&format!("\"id\":\"{id}\"")).unwrap();
        let object = &text[start..];
        let object = &object[object.find("\"distribution\":{").unwrap()..];
        let object = &object[..=object.find('}').unwrap()];
        let keys: Vec<&str> = object.split('"').skip(3).step_by(2).collect();
        assert_eq!(&keys, outcomes, "{id}: {object}");
    }
}
