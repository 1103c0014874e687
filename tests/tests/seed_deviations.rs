//! Issue 13, point 7: where the call template differed from the seeds, through the
//! real `weir` binary in front of the fake upstreams (SSE for the OpenAI dialect, AWS
//! event-stream for Bedrock). Each test asserts what the upstream received (how many
//! requests, streamed or whole) and what the caller got (status, category).
//!
//! - an in-band error before output with the replay opted out: no second attempt;
//! - a 402 named only in a frame's prose keeps the replay, whose real status picks
//!   the billing category;
//! - an in-band 4xx other than 408/425/429 (409 included) is answered from the
//!   first attempt;
//! - the call-wide bound on empty answers fires when corrections drift the payload;
//! - a 200 that fails to decode feeds the throttle no success;
//! - a Bedrock `ServiceQuotaExceededException` is retried and feeds the throttle;
//! - a 529 from any dialect and Bedrock's `ServiceUnavailableException` are overload
//!   (the seed keeps overload for the Anthropic dialects' 529);
//! - no 65,536 output ceiling and no 8,192 window fallback are invented (the gateway
//!   seed's defaults; see the book's "Defaults the seeds name", docs/src/seed-deviations.md);
//! - the 402 guidance names the response size;
//! - the embedded catalog keeps `model_choice = "any"`: a caller may name a catalog id
//!   as well as a role (the gateway seed accepts no model choice from a request body);
//! - an entry that declares no `capabilities` has what its component carries (the seed:
//!   declared or absent, with a bounded fallback for modality only);
//! - a call parked on a model's queue keeps its member's budget hold (the seed's parked
//!   call holds nothing);
//! - `bedrock-converse` sends native tools (the runtime seed's table: none).

// Test code: a failed step should stop the test with its message.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use bytes::Bytes;
use serde_json::{Value, json};
use weir_tests::bedrock_wire::{self, ACCESS_KEY_ID, FakeBedrock, MODEL_ID, Operation, REGION, SECRET_ACCESS_KEY};
use weir_tests::openai_wire::{self, sse_frame, streamed_text};
use weir_tests::{FakeUpstream, Gateway, Scripted};

/// One `openai-compatible` entry on the fake, with retries to spare: a test that
/// sees one upstream request saw no retry because none was made, not because the
/// budget was empty.
fn config(upstream: &FakeUpstream) -> String {
    openai_wire::chat_config(&upstream.base_url())
}

async fn gateway(upstream: &FakeUpstream) -> Gateway {
    Gateway::start(&config(upstream)).await
}

/// What the caller got.
struct Answer {
    status: u16,
    attempts: u32,
    body: String,
}

impl Answer {
    fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.body))
    }

    fn category(&self) -> String {
        self.json()["error"]["type"].as_str().unwrap_or_default().to_owned()
    }

    fn message(&self) -> String {
        self.json()["error"]["message"].as_str().unwrap_or_default().to_owned()
    }
}

async fn post(gateway: &Gateway, body: &Value, headers: &[(&str, &str)]) -> Answer {
    let mut request = reqwest::Client::new().post(gateway.url("/v1/chat/completions")).json(body);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let attempts = response.headers()["x-weir-attempts"].to_str().unwrap().parse().unwrap();
    Answer { status, attempts, body: response.text().await.unwrap() }
}

fn hello(model: &str) -> Value {
    json!({"model": model, "messages": [{"role": "user", "content": "Hello"}]})
}

fn streamed(model: &str) -> Value {
    json!({"model": model, "stream": true, "messages": [{"role": "user", "content": "Hello"}]})
}

/// Whether each request the fake received asked for a stream.
fn stream_flags(upstream: &FakeUpstream) -> Vec<bool> {
    upstream.received().iter().map(|r| r.json()["stream"].as_bool().unwrap_or(false)).collect()
}

/// An in-band error frame carrying its status as a structured integer `code` (vLLM).
fn structured_error_frame(code: u16, message: &str) -> Bytes {
    sse_frame(&json!({"error": {"message": message, "type": "Error", "param": null, "code": code}}))
}

/// An in-band error frame whose only status is in its prose (a proxy's wording).
fn prose_error_frame(message: &str) -> Bytes {
    sse_frame(&json!({"error": {"message": message, "type": "api_error", "param": null, "code": null}}))
}

/// A stream that would answer, if anyone asked again.
fn good_stream() -> Scripted {
    openai_wire::stream(openai_wire::sse_chunks(&["Second ", "stream."]))
}

/// The model's throttle coefficient, as `/metrics` reports it (the gateway has no
/// keys, so the route is open on loopback).
async fn coefficient(gateway: &Gateway, model: &str) -> f64 {
    let text = reqwest::get(gateway.url("/metrics")).await.unwrap().text().await.unwrap();
    let prefix = format!("weir_admission_throttle_coefficient{{model=\"{model}\"}} ");
    let value = text.lines().find_map(|line| line.strip_prefix(&prefix));
    value.unwrap_or_else(|| panic!("no coefficient for {model} in:\n{text}")).trim().parse().unwrap()
}

// ------------------------------------------------------------------ 1. delegated authority

/// `x-weir-stream-replay: false` (the delegated-authority opt-out): an in-band error
/// before output is final, whatever it says — a 5xx and a 429 would each have
/// earned the replay and the retry loop, and get neither.
#[tokio::test]
async fn an_opted_out_stream_makes_no_second_attempt_after_an_in_band_error() {
    let upstream = FakeUpstream::start().await;
    let gateway = gateway(&upstream).await;
    let opt_out = [("x-weir-stream-replay", "false")];

    upstream.push(openai_wire::stream(vec![structured_error_frame(429, "slow down")]));
    let answer = post(&gateway, &streamed("chat"), &opt_out).await;
    assert_eq!((answer.status, answer.category().as_str()), (429, "rate_limited"), "{}", answer.body);
    assert_eq!(answer.attempts, 1);
    assert_eq!(stream_flags(&upstream), [true], "the rate limit is neither replayed nor retried");
    assert_eq!(coefficient(&gateway, "chat").await, 0.5, "the slow-down signal still fed the throttle");

    // The fake answers in order: the good stream is there for a second attempt only.
    upstream.push(openai_wire::stream(vec![structured_error_frame(503, "RAW-BUSY")]));
    upstream.push(good_stream());
    let answer = post(&gateway, &streamed("chat"), &opt_out).await;
    assert_eq!((answer.status, answer.category().as_str()), (502, "upstream_unavailable"), "{}", answer.body);
    assert_eq!(answer.attempts, 1);
    assert_eq!(stream_flags(&upstream), [true, true], "no replay, no retry");
    assert!(!answer.body.contains("RAW-BUSY"), "{}", answer.body);
    assert_eq!(upstream.queued(), 1, "the good stream was never asked for");
}

// ------------------------------------------------------------------ 2. 402 in prose

/// A frame whose only status is a 402 in its prose keeps the replay; the replay's
/// real HTTP 402 is what picks `provider_credit_exhausted`. Without the replay the
/// same frame never selects the billing category (prose steers, never labels).
#[tokio::test]
async fn a_402_named_only_in_prose_keeps_the_replay_so_the_real_status_picks_the_category() {
    let upstream = FakeUpstream::start().await;
    let gateway = gateway(&upstream).await;
    let frame = || prose_error_frame("Error code: 402 - RAW-PROSE insufficient credits");

    upstream.push(openai_wire::stream(vec![frame()]));
    upstream.push(openai_wire::json_response(
        402,
        &json!({"error": {"message": "RAW-BILLING", "type": "insufficient_credits", "code": null}}),
    ));
    let answer = post(&gateway, &streamed("chat"), &[]).await;
    assert_eq!((answer.status, answer.category().as_str()), (402, "provider_credit_exhausted"), "{}", answer.body);
    assert_eq!(answer.attempts, 2, "the stream and its replay");
    assert_eq!(stream_flags(&upstream), [true, false], "replayed once without streaming, then not retried");
    assert!(!answer.body.contains("RAW-PROSE") && !answer.body.contains("RAW-BILLING"), "{}", answer.body);

    upstream.push(openai_wire::stream(vec![frame()]));
    let answer = post(&gateway, &streamed("chat"), &[("x-weir-stream-replay", "false")]).await;
    assert_eq!((answer.status, answer.category().as_str()), (502, "upstream_unavailable"), "{}", answer.body);
    assert_eq!(stream_flags(&upstream), [true, false, true], "opted out: the one stream only");
}

// ------------------------------------------------------------------ 3. in-band 4xx

/// Any in-band 4xx but 408, 425 and 429 — a structured 409, and a 400 only the prose
/// names — would survive a second attempt: answered from the first, no replay and
/// no retry, though the entry has retries to spare.
#[tokio::test]
async fn an_in_band_409_is_answered_from_the_first_attempt() {
    let upstream = FakeUpstream::start().await;
    let gateway = gateway(&upstream).await;

    upstream.push(openai_wire::stream(vec![prose_error_frame("upstream said HTTP 400: bad parameter")]));
    let answer = post(&gateway, &streamed("chat"), &[]).await;
    assert_eq!(answer.status, 502, "{}", answer.body);
    assert_eq!(answer.attempts, 1);
    assert_eq!(stream_flags(&upstream), [true], "a 4xx read from prose steers the decision too");

    // The fake answers in order: the good stream is there for a second attempt only.
    upstream.push(openai_wire::stream(vec![structured_error_frame(409, "RAW-CONFLICT")]));
    upstream.push(good_stream());
    let answer = post(&gateway, &streamed("chat"), &[]).await;
    assert_eq!(answer.status, 502, "{}", answer.body);
    assert_eq!(answer.category(), "upstream_unavailable");
    assert_eq!(answer.attempts, 1);
    assert_eq!(stream_flags(&upstream), [true, true], "no replay, no retry");
    assert!(!answer.body.contains("RAW-CONFLICT"), "{}", answer.body);
    assert_eq!(upstream.queued(), 1, "the good stream was never asked for");
}

// ------------------------------------------------------------------ 4. empty answers

fn structured_request() -> Value {
    json!({
        "model": "chat",
        "messages": [{"role": "user", "content": "Weather in Paris as JSON"}],
        "response_format": {"type": "json_schema", "json_schema": {"name": "weather", "schema": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "celsius": {"type": "number"}},
            "required": ["city", "celsius"]
        }}}
    })
}

/// Empty, not JSON, empty, not JSON, empty: each correction changes the payload and
/// restores its one empty re-run, so the per-payload bound never fires; the
/// call-wide count of empty answers ends the call at the third.
#[tokio::test]
async fn the_call_wide_empty_bound_fires_when_corrections_drift_the_payload() {
    let upstream = FakeUpstream::start().await;
    let gateway = gateway(&upstream).await;
    for answer in ["", "Paris is 18C", "", "Still 18C in Paris", "", r#"{"city": "Paris", "celsius": 18}"#] {
        upstream.push(openai_wire::completion(answer));
    }

    let answer = post(&gateway, &structured_request(), &[]).await;
    assert_eq!(answer.status, 502, "{}", answer.body);
    assert_eq!(answer.category(), "provider_empty_response_exhausted");
    assert!(answer.message().contains("no content 3 times"), "{}", answer.message());
    assert_eq!(answer.attempts, 5);
    assert_eq!(upstream.request_count(), 5);
    assert_eq!(upstream.queued(), 1, "the valid answer was never asked for");

    let messages = |index: usize| upstream.received()[index].json()["messages"].as_array().unwrap().len();
    assert_eq!(upstream.received()[0].json(), upstream.received()[1].json(), "an empty answer re-runs its payload");
    assert_eq!((messages(1), messages(2)), (1, 3), "a correction turn drifts the payload");
    assert_eq!(upstream.received()[2].json(), upstream.received()[3].json());
    assert_eq!(messages(4), 5, "the fifth request carries the second correction");
}

// ------------------------------------------------------------------ 5. malformed 200

/// A 200 whose body the component cannot read is no success for the throttle: a
/// 429 pushes the coefficient to 0.5, three unreadable 200s leave it there, and
/// three readable answers (every third success takes 0.2) walk it back.
#[tokio::test]
async fn a_200_that_fails_to_decode_feeds_the_throttle_no_success() {
    let upstream = FakeUpstream::start().await;
    let gateway = gateway(&upstream).await;
    let no_retries = [("x-weir-max-retries", "0")];

    upstream.push(openai_wire::rate_limited(1));
    let answer = post(&gateway, &hello("chat"), &no_retries).await;
    assert_eq!((answer.status, answer.category().as_str()), (429, "rate_limited"), "{}", answer.body);
    assert_eq!(coefficient(&gateway, "chat").await, 0.5);

    for _ in 0..3 {
        upstream.push(Scripted::Respond {
            status: 200,
            headers: openai_wire::json_headers(openai_wire::REQUEST_ID),
            body: Bytes::from_static(b"RAW-NOT-JSON <html>"),
        });
        let answer = post(&gateway, &hello("chat"), &no_retries).await;
        assert_eq!((answer.status, answer.category().as_str()), (502, "upstream_error"), "{}", answer.body);
        assert!(!answer.body.contains("RAW-NOT-JSON"), "{}", answer.body);
    }
    assert_eq!(upstream.request_count(), 4);
    assert_eq!(coefficient(&gateway, "chat").await, 0.5, "an unreadable 200 is not a success");

    for _ in 0..3 {
        upstream.push(openai_wire::completion("fine"));
        assert_eq!(post(&gateway, &hello("chat"), &no_retries).await.status, 200);
    }
    assert_eq!(coefficient(&gateway, "chat").await, 0.3, "readable answers are");
}

// ------------------------------------------------------------------ 6. Bedrock service quota

fn bedrock_config(bedrock: &FakeBedrock) -> String {
    let base = bedrock.base_url();
    let entry = |id: &str, provider: &str, wire: &str| {
        format!(
            "[[model]]\nid = \"{id}\"\nprovider = \"{provider}\"\nwire_id = \"{wire}\"\nendpoint = \"{base}\"\n\
             max_output_tokens = 8000\ncontext_window = 200000\noutput_tokens = 100\nmax_retries = 1\n"
        )
    };
    [
        "read_timeout_secs = 5\n".to_owned(),
        entry("claude-bedrock", "anthropic-bedrock", MODEL_ID),
        entry("nova", "bedrock-converse", "us.amazon.nova-pro-v1:0"),
    ]
    .concat()
}

fn aws_env() -> Vec<(&'static str, &'static str)> {
    vec![("AWS_ACCESS_KEY_ID", ACCESS_KEY_ID), ("AWS_SECRET_ACCESS_KEY", SECRET_ACCESS_KEY), ("AWS_REGION", REGION)]
}

fn service_quota() -> Scripted {
    bedrock_wire::aws_error(400, "ServiceQuotaExceededException", "Too many tokens, please wait before trying again.")
}

fn operations(bedrock: &FakeBedrock) -> Vec<Operation> {
    bedrock.received().iter().map(|request| request.operation).collect()
}

/// `ServiceQuotaExceededException` is a capacity signal, not an exhausted account: on
/// both Bedrock dialects it is retried (a whole call) or replayed (an exception frame
/// before output), and each time it feeds the model's throttle like a 429.
#[tokio::test]
async fn a_bedrock_service_quota_is_retried_and_feeds_the_throttle() {
    let bedrock = FakeBedrock::start().await;
    let gateway = Gateway::start_with(&bedrock_config(&bedrock), &aws_env(), None).await;

    bedrock.push(service_quota());
    bedrock.push(bedrock_wire::converse_text("after the quota"));
    let answer = post(&gateway, &hello("nova"), &[]).await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert_eq!(answer.json()["choices"][0]["message"]["content"], "after the quota");
    assert_eq!(answer.attempts, 2);
    assert_eq!(operations(&bedrock), [Operation::Converse, Operation::Converse]);
    assert_eq!(coefficient(&gateway, "nova").await, 0.5);

    bedrock.push(service_quota());
    bedrock.push(bedrock_wire::invoke_text("Claude after the quota"));
    let answer = post(&gateway, &hello("claude-bedrock"), &[]).await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert_eq!(answer.attempts, 2);
    assert_eq!(operations(&bedrock)[2..], [Operation::InvokeModel, Operation::InvokeModel]);
    assert_eq!(coefficient(&gateway, "claude-bedrock").await, 0.5);

    // In band: the exception's documented status is 400, and it still earns the replay.
    let frames = vec![bedrock_wire::exception("ServiceQuotaExceededException", "Too many tokens")];
    bedrock.push(bedrock_wire::event_stream(frames));
    bedrock.push(bedrock_wire::converse_text("replayed whole"));
    let answer = post(&gateway, &streamed("nova"), &[]).await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert_eq!(streamed_text(&answer.body), "replayed whole");
    assert_eq!(operations(&bedrock)[4..], [Operation::ConverseStream, Operation::Converse]);
    assert_eq!(coefficient(&gateway, "nova").await, 1.0, "the frame fed the throttle too");

    // With no retry left, the caller is told to slow down, not to top up an account.
    bedrock.push(service_quota());
    let answer = post(&gateway, &hello("nova"), &[("x-weir-max-retries", "0")]).await;
    assert_eq!((answer.status, answer.category().as_str()), (429, "rate_limited"), "{}", answer.body);
    assert_eq!(bedrock.request_count(), 7);
}

// ------------------------------------------------------------------ 6b. overload beyond Anthropic

/// Deviation (issue 49, item 11): the runtime seed keeps overload (the wider wait,
/// throttle weight 3) for the Anthropic dialects' dedicated 529. Weir also reads a
/// 529 from any dialect and Bedrock's `ServiceUnavailableException` as overload;
/// a plain 503 from the OpenAI dialect stays transient and feeds nothing.
#[tokio::test]
async fn a_529_from_any_dialect_and_a_bedrock_service_unavailable_are_overload() {
    let upstream = FakeUpstream::start().await;
    let gateway = gateway(&upstream).await;
    let no_retries = [("x-weir-max-retries", "0")];

    upstream.push(openai_wire::overloaded_503());
    let answer = post(&gateway, &hello("chat"), &no_retries).await;
    assert_eq!((answer.status, answer.category().as_str()), (502, "upstream_unavailable"), "{}", answer.body);
    assert_eq!(coefficient(&gateway, "chat").await, 0.0, "a plain 503 is transient: weight 0");

    upstream
        .push(openai_wire::json_response(529, &json!({"error": {"message": "RAW-OVERLOAD", "type": "server_error"}})));
    let answer = post(&gateway, &hello("chat"), &no_retries).await;
    assert_eq!((answer.status, answer.category().as_str()), (503, "overloaded"), "{}", answer.body);
    assert!(!answer.body.contains("RAW-OVERLOAD"), "{}", answer.body);
    assert_eq!(coefficient(&gateway, "chat").await, 1.5, "an OpenAI-dialect 529 is overload: weight 3");

    let bedrock = FakeBedrock::start().await;
    let gateway = Gateway::start_with(&bedrock_config(&bedrock), &aws_env(), None).await;
    bedrock.push(bedrock_wire::aws_error(503, "ServiceUnavailableException", "RAW-UNAVAILABLE"));
    let answer = post(&gateway, &hello("nova"), &no_retries).await;
    assert_eq!((answer.status, answer.category().as_str()), (503, "overloaded"), "{}", answer.body);
    assert_eq!(coefficient(&gateway, "nova").await, 1.5, "Bedrock's 503 is overload: weight 3");
}

// ------------------------------------------------------------------ 6c. defaults the gateway seed names

/// The gateway seed's `PI_MODEL_MAX_OUTPUT_TOKENS = 65536` is an operator ceiling;
/// Weir's `max_output_ceiling` is unset by default, so an entry whose own
/// `max_output_tokens` is larger is asked for more than 65,536 when the call wants it.
#[tokio::test]
async fn the_output_ceiling_is_the_entrys_own_with_no_invented_cap() {
    let upstream = FakeUpstream::start().await;
    let toml = openai_wire::chat_config(&upstream.base_url())
        .replace("max_output_tokens = 1000", "max_output_tokens = 128000")
        .replace("context_window = 10000", "context_window = 400000");
    let gateway = Gateway::start(&toml).await;
    upstream.push(openai_wire::completion("long enough"));
    let body = json!({"model": "chat", "max_tokens": 100000, "messages": [{"role": "user", "content": "Hi"}]});
    let answer = post(&gateway, &body, &[]).await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    let sent = upstream.received()[0].json();
    let asked = sent.get("max_tokens").or_else(|| sent.get("max_completion_tokens")).and_then(Value::as_u64);
    assert_eq!(asked, Some(100_000), "{sent}");
}

/// `CHAT_CONTEXT_DEFAULT_WINDOW_TOKENS = 8192` is the gateway seed's "assumed window
/// when unknown"; a chat entry's `context_window` is required, so it is never assumed.
#[test]
fn a_chat_entry_without_a_context_window_is_refused_at_load() {
    let toml = openai_wire::chat_config("http://127.0.0.1:9").replace("context_window = 10000\n", "");
    let error = weir_host::Config::from_toml(&toml, "weir.toml").unwrap_err().to_string();
    assert!(error.contains("context_window"), "{error}");
}

// ------------------------------------------------------------------ 7. the 402 guidance

/// `provider_credit_exhausted` tells the caller what to correct: the balance, the
/// spend limit, the response size (`max_tokens`) or the model.
#[tokio::test]
async fn the_credit_guidance_names_the_response_size() {
    let upstream = FakeUpstream::start().await;
    let gateway = gateway(&upstream).await;
    upstream.push(openai_wire::json_response(402, &json!({"error": {"message": "RAW-CREDIT", "type": "billing"}})));

    let answer = post(&gateway, &hello("chat"), &[]).await;
    assert_eq!((answer.status, answer.category().as_str()), (402, "provider_credit_exhausted"), "{}", answer.body);
    assert_eq!(upstream.request_count(), 1, "never retried");
    let message = answer.message();
    for correction in ["balance", "spend limit", "response size", "`max_tokens`", "another model"] {
        assert!(message.contains(correction), "{correction}: {message}");
    }
    assert!(!message.contains("RAW-CREDIT"), "{message}");
}

/// Kept deviation (README, "Roles, grades and pins"): "`model_choice` defaults to `any`,
/// in the embedded catalog too: a caller may name a catalog id as well as a role." The
/// gateway seed accepts no model choice from a request body; `model_choice = "roles"` is
/// the operator's switch to it.
#[tokio::test]
async fn the_embedded_catalog_lets_a_caller_name_a_catalog_id_as_well_as_a_role() {
    let config = weir_host::Config::embedded_default().unwrap();
    assert_eq!(config.model_choice, weir_host::catalog::ModelChoice::Any);
    let upstream = FakeUpstream::start().await;
    let text = weir_tests::gateway::embedded_catalog_at(&["gpt-4.1"], &upstream.base_url());
    let gateway = Gateway::start_with(&text, &[("OPENAI_API_KEY", "sk-weir-deviation")], None).await;
    for model in ["chat", "gpt-4.1"] {
        upstream.push(openai_wire::completion("Served."));
        let mut request = hello(model);
        request["max_tokens"] = json!(20);
        let answer = post(&gateway, &request, &[]).await;
        assert_eq!(answer.status, 200, "{model}: {}", answer.body);
    }
    let sent: Vec<Value> = upstream.received().iter().map(|request| request.json()["model"].clone()).collect();
    assert_eq!(sent, [json!("gpt-4.1"), json!("gpt-4.1")], "the role and the id reach the same entry");
}

/// Kept deviation (README, "Capabilities"): "an entry that declares no `capabilities` has
/// everything its provider component carries, not nothing." Here an `openai-compatible`
/// entry with no list is sent an image, which its component carries.
#[tokio::test]
async fn an_entry_without_a_capability_list_has_what_its_component_carries() {
    let upstream = FakeUpstream::start().await;
    let gateway = gateway(&upstream).await;
    upstream.push(openai_wire::completion("A pixel."));
    let png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==";
    let request = json!({"model": "chat", "messages": [{"role": "user", "content": [
        {"type": "text", "text": "What is this?"},
        {"type": "image_url", "image_url": {"url": format!("data:image/png;base64,{png}")}}
    ]}]});
    let answer = post(&gateway, &request, &[]).await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    let sent = upstream.received()[0].json();
    let parts = sent["messages"][0]["content"].as_array().unwrap().clone();
    assert!(parts.iter().any(|part| part["type"] == "image_url"), "the image went out: {sent}");
}

/// Kept deviation (README, "Admission"): "a parked call holds nothing of the model's;
/// it keeps what it took before it parked: its key's rate grant and its member's
/// budget hold." The seed's parked call holds nothing at all. Here the model admits
/// one call at a time: while the first is answered, the second parks on the model's
/// queue with its budget hold counted, so the member's `held` is both calls' and the
/// upstream has seen one request.
#[tokio::test]
async fn a_parked_call_keeps_its_members_budget_hold_while_it_waits() {
    const ANA: &str = "sk-weir-ana-parked-1";
    const OPS: &str = "sk-weir-ops-parked-1";
    let upstream = FakeUpstream::start().await;
    upstream.push(openai_wire::completion("First.").after(std::time::Duration::from_millis(1_500)));
    upstream.push(openai_wire::completion("Second."));
    let dir = tempfile::tempdir().unwrap();
    let config = format!(
        "{chat}max_concurrency = 1\n\n[[key]]\nid = \"ana-key\"\nmember = \"ana\"\nhash = \"{ana}\"\n\n[[key]]\n\
         id = \"ops-key\"\nmember = \"ops\"\nhash = \"{ops}\"\nadmin = true\n\n[member.ana]\ndaily_tokens = 100000\n\n\
         [ledger]\npath = {ledger:?}\n",
        chat = config(&upstream),
        ana = weir_host::identity::hash_of(ANA),
        ops = weir_host::identity::hash_of(OPS),
        ledger = dir.path().join("ledger.db").to_str().unwrap(),
    );
    let gateway = Gateway::start(&config).await;
    let client = reqwest::Client::new();
    let send = |client: reqwest::Client| {
        let url = gateway.url("/v1/chat/completions");
        tokio::spawn(
            async move { client.post(url).bearer_auth(ANA).json(&hello("chat")).send().await.unwrap().status() },
        )
    };
    let held = |client: reqwest::Client| {
        let url = gateway.url("/v1/usage");
        async move {
            let usage: Value = client.get(url).bearer_auth(OPS).send().await.unwrap().json().await.unwrap();
            let ana = usage["budgets"].as_array().unwrap().iter().find(|b| b["name"] == "ana").unwrap().clone();
            ana["held"].as_u64().unwrap()
        }
    };
    let first = send(client.clone());
    upstream.wait_for_requests(1, std::time::Duration::from_secs(10)).await;
    let one_call = held(client.clone()).await;
    let second = send(client.clone());
    // The second call is admitted by its key and held, then parks on the model:
    // sampled while the first is still being answered.
    let mut samples = Vec::new();
    while upstream.request_count() == 1 && !first.is_finished() {
        let sample = held(client.clone()).await;
        if upstream.request_count() == 1 {
            samples.push(sample);
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert!(one_call >= 100, "the call in flight holds its reserve: {one_call}");
    assert_eq!(samples.iter().max(), Some(&(2 * one_call)), "the parked call's hold is counted beside it: {samples:?}");
    assert_eq!(first.await.unwrap(), 200);
    assert_eq!(second.await.unwrap(), 200);
    assert_eq!(upstream.request_count(), 2);
}

/// Kept deviation (README, "Tools without native support"): "`bedrock-converse` carries
/// native tools (`toolConfig`)", where the runtime seed's table says Converse has none; an
/// entry listing `prompted_tools` and not `tools` gets the seed's prompted tools instead.
#[tokio::test]
async fn converse_sends_native_tools_unless_the_entry_asks_for_prompted_ones() {
    let bedrock = FakeBedrock::start().await;
    let base = bedrock.base_url();
    let entry = |id: &str, more: &str| {
        format!(
            "[[model]]\nid = \"{id}\"\nprovider = \"bedrock-converse\"\nwire_id = \"us.amazon.nova-pro-v1:0\"\n\
             endpoint = \"{base}\"\nmax_output_tokens = 8000\ncontext_window = 200000\noutput_tokens = 100\n{more}\n"
        )
    };
    let toml = [
        "read_timeout_secs = 5\n".to_owned(),
        entry("nova", ""),
        entry("nova-prompted", "capabilities = [\"prompted_tools\"]"),
    ]
    .concat();
    let gateway = Gateway::start_with(&toml, &aws_env(), None).await;
    for model in ["nova", "nova-prompted"] {
        bedrock.push(bedrock_wire::converse_text("No tool needed."));
        let mut request = hello(model);
        request["tools"] = json!([{"type": "function", "function": {"name": "get_weather",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]);
        let answer = post(&gateway, &request, &[]).await;
        assert_eq!(answer.status, 200, "{model}: {}", answer.body);
    }
    let sent: Vec<Value> = bedrock.received().iter().map(|r| r.json()).collect();
    assert_eq!(sent[0]["toolConfig"]["tools"][0]["toolSpec"]["name"], "get_weather", "native: {}", sent[0]);
    assert!(sent[1].get("toolConfig").is_none(), "prompted: {}", sent[1]);
    assert!(sent[1]["system"].to_string().contains("get_weather"), "described in the prompt: {}", sent[1]);
}
