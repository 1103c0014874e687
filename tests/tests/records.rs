//! Every call leaves one record, whatever happened to it: the real call path
//! over HTTP to a fake upstream speaking OpenAI's wire, with an observer
//! added through the library's public [`CallObserver`] (what an embedding
//! service does) collecting the closed records. Each record is checked for who,
//! what, every attempt and why it ran, the usage summed over all of them, the
//! cost from the entry's prices, and how the call ended.

// Test code: a failed step should stop the test with its message.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use serde_json::{Value, json};
use weir_host::record::{
    Acknowledged, AttemptReason, CallObserver, CallOpening, CallRecord, Route, Tokens, acknowledged,
};
use weir_host::{Config, Weir};
use weir_tests::openai_wire::{self, chunk_json, sse_frame};
use weir_tests::{FakeUpstream, Scripted};

/// Collects openings and closed records, as an embedding service's observer would.
#[derive(Default)]
struct Collect {
    opened: Mutex<Vec<CallOpening>>,
    closed: Mutex<Vec<Arc<CallRecord>>>,
}

impl CallObserver for Collect {
    fn opened(&self, opening: &CallOpening) -> Acknowledged {
        self.opened.lock().unwrap().push(opening.clone());
        acknowledged()
    }

    fn closed(&self, record: &Arc<CallRecord>) -> Acknowledged {
        self.closed.lock().unwrap().push(Arc::clone(record));
        acknowledged()
    }
}

struct Rig {
    upstream: FakeUpstream,
    records: Arc<Collect>,
    base: String,
    client: reqwest::Client,
}

const MARKER: &str = "RAW-PROVIDER-MARKER-7731";

/// A Weir on `toml` (no providers folder) with a collecting observer.
fn observed_weir(toml: &str) -> (Weir, Arc<Collect>) {
    let records = Arc::new(Collect::default());
    let weir = Weir::builder()
        .config(Config::from_toml(toml, "test").unwrap())
        .providers_dir("/nonexistent-weir-providers")
        .cache_dir(Some(std::env::temp_dir().join("weir-records-test-cache")))
        .observer(Arc::clone(&records) as Arc<dyn CallObserver>)
        .build()
        .unwrap();
    (weir, records)
}

async fn rig(extra: &str) -> Rig {
    let upstream = FakeUpstream::start_local().await;
    let toml = format!(
        r#"
read_timeout_secs = 1

[[model]]
id = "m"
provider = "openai-compatible"
wire_id = "qwen3"
identity = "qwen3-family"
endpoint = "{url}"
max_output_tokens = 4000
context_window = 100000
output_tokens = 100
input_price = 2.0
output_price = 8.0
{extra}
"#,
        url = upstream.base_url()
    );
    let (weir, records) = observed_weir(&toml);
    let base = weir_tests::serve_router(weir_host::server::router(weir)).await;
    Rig { upstream, records, base, client: reqwest::Client::new() }
}

struct Answer {
    status: u16,
    call_id: String,
    body: String,
}

impl Rig {
    async fn post(&self, body: Value) -> Answer {
        let response = self.client.post(format!("{}/v1/chat/completions", self.base)).json(&body).send().await.unwrap();
        let status = response.status().as_u16();
        let call_id = response.headers()["x-weir-call-id"].to_str().unwrap().to_owned();
        Answer { status, call_id, body: response.text().await.unwrap() }
    }

    /// The one closed record; a whole call's is in before its answer returns.
    fn only_record(&self) -> Arc<CallRecord> {
        let closed = self.records.closed.lock().unwrap();
        assert_eq!(closed.len(), 1, "one record per call: {closed:#?}");
        Arc::clone(&closed[0])
    }

    /// Waits for the record of a stream whose end the test did not read.
    async fn record_eventually(&self) -> Arc<CallRecord> {
        for _ in 0..200 {
            if let Some(record) = self.records.closed.lock().unwrap().first() {
                return Arc::clone(record);
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("no record arrived");
    }
}

fn hello() -> Value {
    json!({"model": "m", "messages": [{"role": "user", "content": "Hello"}]})
}

fn streamed() -> Value {
    json!({"model": "m", "stream": true, "stream_options": {"include_usage": true},
           "messages": [{"role": "user", "content": "Hello"}]})
}

fn reasons(record: &CallRecord) -> Vec<AttemptReason> {
    record.attempts.iter().map(|attempt| attempt.reason).collect()
}

fn categories(record: &CallRecord) -> Vec<&str> {
    record.attempts.iter().map(|attempt| attempt.category.as_str()).collect()
}

fn completion(text: &str, finish: &str, prompt: u64, completion: u64) -> Scripted {
    let body = openai_wire::completion_body(
        "chatcmpl-x",
        "qwen3",
        openai_wire::text_message(text),
        finish,
        openai_wire::usage_json(prompt, completion, 0, 0),
    );
    openai_wire::json_response(200, &body)
}

fn text_frame(text: &str) -> Bytes {
    sse_frame(&chunk_json("chatcmpl-s", "qwen3", json!({"content": text}), None, None))
}

#[tokio::test]
async fn a_whole_answer_is_recorded_with_its_usage_cost_and_request_id() {
    let rig = rig("").await;
    rig.upstream.push(completion("Hi there", "stop", 1_000, 50));
    let answer = rig.post(hello()).await;
    assert_eq!(answer.status, 200, "{}", answer.body);

    let record = rig.only_record();
    assert_eq!(record.call_id, answer.call_id, "x-weir-call-id names the record");
    assert_eq!(rig.records.opened.lock().unwrap()[0].call_id, record.call_id, "opened, then closed");
    assert_eq!((record.route, record.model.as_str(), record.stream), (Route::OpenaiChat, "m", false));
    assert_eq!(record.identity.as_deref(), Some("qwen3-family"));
    assert_eq!(record.provider.as_deref(), Some("openai-compatible"));
    assert_eq!(record.wire_id.as_deref(), Some("qwen3"));
    assert_eq!(record.endpoint_host.as_deref(), Some(rig.upstream.addr().to_string().as_str()));
    assert_eq!(record.served_model.as_deref(), Some("qwen3"));
    assert_eq!(record.category, "ok");
    assert_eq!(record.stop_reason.as_deref(), Some("end_turn"));
    assert_eq!(record.max_tokens, Some(100));
    assert_eq!(reasons(&record), [AttemptReason::First]);
    let attempt = &record.attempts[0];
    assert_eq!((attempt.status, attempt.category.as_str()), (Some(200), "ok"));
    assert_eq!(attempt.request_id.as_deref(), Some(openai_wire::REQUEST_ID));
    assert_eq!(record.usage, Tokens { input: 1_000, output: 50, ..Tokens::default() });
    assert_eq!(record.billable_input, Some(1_000.0));
    // 1,000 × $2/M + 50 × $8/M
    assert!((record.cost_usd.unwrap() - 0.0024).abs() < 1e-12, "{:?}", record.cost_usd);
    assert!(record.ended_at >= record.started_at);
    assert!(record.content.is_none(), "no content unless the operator records it");
    assert!(record.who.key_id.is_none() && record.who.member.is_none(), "no keys: nobody to name");
}

#[tokio::test]
async fn without_declared_prices_there_is_no_cost() {
    let upstream = FakeUpstream::start_local().await;
    let toml = format!(
        "[[model]]\nid = \"m\"\nprovider = \"openai-compatible\"\nendpoint = \"{}\"\nmax_output_tokens = 100\ncontext_window = 1000\noutput_tokens = 10\n",
        upstream.base_url()
    );
    let (weir, records) = observed_weir(&toml);
    upstream.push(completion("Hi", "stop", 10, 5));
    let request = weir_host::ChatRequest::new("m", weir_host::types::Conversation::user("Hello"));
    let answer = weir.chat(request).await.unwrap();
    let record = Arc::clone(&records.closed.lock().unwrap()[0]);
    assert_eq!(record.call_id, answer.stamp.call_id);
    assert_eq!(record.route, Route::Library, "the library API is its own route");
    assert_eq!(record.usage.output, 5);
    assert_eq!(record.cost_usd, None, "no declared price, no cost: never a guessed one");
}

#[tokio::test]
async fn a_retried_call_lists_each_attempt_and_sums_their_usage() {
    let rig = rig("").await;
    rig.upstream.push(openai_wire::rate_limited(0));
    rig.upstream.push(openai_wire::server_error());
    rig.upstream.push(completion("Hi", "stop", 10, 5));
    let answer = rig.post(hello()).await;
    assert_eq!(answer.status, 200, "{}", answer.body);

    let record = rig.only_record();
    assert_eq!(reasons(&record), [AttemptReason::First, AttemptReason::Retry, AttemptReason::Retry]);
    assert_eq!(categories(&record), ["rate_limited", "upstream_unavailable", "ok"]);
    let statuses: Vec<_> = record.attempts.iter().map(|a| a.status).collect();
    assert_eq!(statuses, [Some(429), Some(500), Some(200)]);
    assert!(record.attempts.windows(2).all(|w| w[1].started_ms >= w[0].started_ms), "in order");
    assert_eq!(record.usage.input, 10);
    assert_eq!(record.category, "ok");
}

#[tokio::test]
async fn a_truncation_escalation_bills_both_attempts() {
    let rig = rig("").await;
    // The budget went to reasoning: nothing said, the one answer the default escalates.
    rig.upstream.push(completion("", "length", 10, 100));
    rig.upstream.push(completion("whole answer", "stop", 10, 300));
    let answer = rig.post(hello()).await;
    assert_eq!(answer.status, 200, "{}", answer.body);

    let record = rig.only_record();
    assert_eq!(reasons(&record), [AttemptReason::First, AttemptReason::Escalation]);
    assert_eq!(
        record.usage,
        Tokens { input: 20, output: 400, ..Tokens::default() },
        "the discarded attempt was billed too"
    );
    assert_eq!(record.max_tokens, Some(4000), "the last attempt ran at the ceiling");
}

#[tokio::test]
async fn a_correction_is_an_attempt_of_its_own() {
    let rig = rig("").await;
    rig.upstream.push(completion("not json", "stop", 10, 3));
    rig.upstream.push(completion("{\"city\": \"Paris\"}", "stop", 20, 6));
    let mut body = hello();
    body["response_format"] = json!({"type": "json_schema", "json_schema": {"name": "c", "schema": {
        "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}});
    let answer = rig.post(body).await;
    assert_eq!(answer.status, 200, "{}", answer.body);

    let record = rig.only_record();
    assert_eq!(reasons(&record), [AttemptReason::First, AttemptReason::Correction]);
    assert_eq!(record.usage.input, 30);
    assert_eq!(record.usage.output, 9);
}

#[tokio::test]
async fn a_refusal_is_recorded_as_a_failure() {
    let rig = rig("").await;
    rig.upstream.push(openai_wire::content_filtered("no"));
    let answer = rig.post(hello()).await;
    assert_eq!(answer.status, 422, "{}", answer.body);
    let record = rig.only_record();
    assert_eq!(record.category, "refused");
    assert_eq!(record.call_id, answer.call_id, "a failure names its record too");
    assert_eq!(categories(&record), ["ok"], "the upstream answered; the gate refused it");
}

#[tokio::test]
async fn a_quota_failure_is_recorded_as_a_failure() {
    let rig = rig("").await;
    rig.upstream.push(openai_wire::insufficient_quota());
    let answer = rig.post(hello()).await;
    assert_eq!(answer.status, 402, "{}", answer.body);
    let record = rig.only_record();
    assert_eq!(record.category, "provider_credit_exhausted");
    assert_eq!(categories(&record), ["provider_credit_exhausted"]);
    assert_eq!(record.attempts[0].status, Some(429));
    assert_eq!(record.usage, Tokens::default());
}

#[tokio::test]
async fn a_provider_error_body_never_reaches_the_record() {
    let rig = rig("max_retries = 0").await;
    rig.upstream.push(openai_wire::error(400, "invalid_request_error", None, &format!("bad thing {MARKER}")));
    let answer = rig.post(hello()).await;
    assert_eq!(answer.status, 400, "{}", answer.body);
    let record = rig.only_record();
    assert_eq!(record.category, "invalid_request");
    let json = serde_json::to_string(&*record).unwrap();
    assert!(!json.contains(MARKER), "raw provider text in the record: {json}");
    assert!(!answer.body.contains(MARKER), "raw provider text in the answer: {}", answer.body);
}

#[tokio::test]
async fn an_unknown_model_is_recorded_without_an_attempt() {
    let rig = rig("").await;
    let answer = rig.post(json!({"model": "nope", "messages": [{"role": "user", "content": "x"}]})).await;
    assert_eq!(answer.status, 404, "{}", answer.body);
    let record = rig.only_record();
    assert_eq!((record.model.as_str(), record.category.as_str()), ("nope", "model_not_found"));
    assert!(record.attempts.is_empty() && record.provider.is_none() && record.cost_usd.is_none());
}

#[tokio::test]
async fn a_stream_is_recorded_before_its_end_reaches_the_caller() {
    let rig = rig("").await;
    rig.upstream.push(openai_wire::stream(openai_wire::sse_text_frames(
        "chatcmpl-s",
        "qwen3",
        &["Hel", "lo"],
        "stop",
        Some(openai_wire::usage_json(12, 4, 0, 0)),
    )));
    let answer = rig.post(streamed()).await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert!(answer.body.ends_with("data: [DONE]\n\n"), "{}", answer.body);

    // The body is read to its end: the record was committed before `[DONE]`.
    let record = rig.only_record();
    assert_eq!(record.call_id, answer.call_id);
    assert!(record.stream);
    assert_eq!(record.category, "ok");
    assert_eq!(record.stop_reason.as_deref(), Some("end_turn"));
    assert_eq!(record.usage, Tokens { input: 12, output: 4, ..Tokens::default() });
    assert!(record.first_output_ms.is_some());
    let end = record.stream_end.as_ref().unwrap();
    assert!(end.completed && !end.client_left, "{end:?}");
    assert!(end.delivered >= 2 && end.upstream_bytes > 0, "{end:?}");
    assert_eq!(record.attempts[0].request_id.as_deref(), Some(openai_wire::REQUEST_ID));
}

#[tokio::test]
async fn a_stream_the_client_abandons_says_what_was_delivered() {
    let rig = rig("").await;
    let mut frames = vec![text_frame("first")];
    frames.extend((0..50).map(|i| text_frame(&format!(" more {i}"))));
    rig.upstream.push(Scripted::Stream {
        status: 200,
        headers: openai_wire::sse_headers("req-abandoned"),
        chunks: frames,
        pause: Duration::from_millis(50),
    });
    let mut response =
        rig.client.post(format!("{}/v1/chat/completions", rig.base)).json(&streamed()).send().await.unwrap();
    let call_id = response.headers()["x-weir-call-id"].to_str().unwrap().to_owned();
    let first = response.chunk().await.unwrap().unwrap();
    assert!(!first.is_empty());
    drop(response);

    let record = rig.record_eventually().await;
    assert_eq!(record.call_id, call_id);
    assert_eq!(record.category, "client_left");
    let end = record.stream_end.as_ref().unwrap();
    assert!(end.client_left && !end.completed, "{end:?}");
    assert!(end.delivered >= 1 && end.delivered < 51, "{end:?}");
}

#[tokio::test]
async fn a_stream_that_fails_after_output_is_a_failure_with_what_was_delivered() {
    let rig = rig("").await;
    rig.upstream.push(Scripted::StreamThenDrop {
        status: 200,
        headers: openai_wire::sse_headers("req-cut"),
        chunks: vec![text_frame("partial "), text_frame("answer")],
    });
    let answer = rig.post(streamed()).await;
    assert_eq!(answer.status, 200, "the stream had begun: {}", answer.body);
    assert!(answer.body.contains("\"error\""), "the stream ends with an error event: {}", answer.body);

    let record = rig.only_record();
    assert_eq!(record.category, "upstream_unavailable");
    assert_eq!(reasons(&record), [AttemptReason::First], "nothing is retried after output");
    let end = record.stream_end.as_ref().unwrap();
    assert!(!end.completed && !end.client_left && end.delivered >= 2, "{end:?}");
}

#[tokio::test]
async fn an_in_band_error_before_output_and_its_replay_are_two_attempts() {
    let rig = rig("").await;
    rig.upstream.push(openai_wire::stream(vec![
        sse_frame(&json!({"error": {"message": format!("engine died {MARKER}"), "type": "Error", "code": 500}})),
        openai_wire::sse_done(),
    ]));
    rig.upstream.push(completion("Recovered whole.", "stop", 7, 3));
    let answer = rig.post(streamed()).await;
    assert_eq!(answer.status, 200, "{}", answer.body);

    let record = rig.only_record();
    assert_eq!(reasons(&record), [AttemptReason::First, AttemptReason::Replay]);
    assert_eq!(record.attempts[0].category, "upstream_unavailable");
    assert_eq!(record.attempts[0].status, Some(500), "the in-band status");
    assert_eq!(record.attempts[1].category, "ok");
    assert_eq!(record.usage.output, 3);
    assert!(!serde_json::to_string(&*record).unwrap().contains(MARKER));
}

#[tokio::test]
async fn a_refused_caller_key_is_recorded_with_no_model_call() {
    let token = "weir-test-token-records";
    let hash = format!("sha256:{}", hex_sha256(token));
    let rig =
        rig(&format!("[[key]]\nid = \"alice-key\"\nmember = \"alice\"\nteam = \"research\"\nhash = \"{hash}\"\n"))
            .await;
    let response = rig.client.post(format!("{}/v1/chat/completions", rig.base)).json(&hello()).send().await.unwrap();
    assert_eq!(response.status().as_u16(), 401);
    let call_id = response.headers()["x-weir-call-id"].to_str().unwrap().to_owned();
    let record = rig.only_record();
    assert_eq!((record.call_id.as_str(), record.category.as_str()), (call_id.as_str(), "invalid_api_key"));
    assert!(record.attempts.is_empty() && record.model.is_empty());
    assert_eq!(rig.upstream.request_count(), 0);

    // The same gateway with the key: who called is on the record.
    rig.upstream.push(completion("Hi", "stop", 10, 5));
    let response = rig
        .client
        .post(format!("{}/v1/chat/completions", rig.base))
        .bearer_auth(token)
        .json(&hello())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 200);
    let record = Arc::clone(&rig.records.closed.lock().unwrap()[1]);
    assert_eq!(record.who.key_id.as_deref(), Some("alice-key"));
    assert_eq!(record.who.member.as_deref(), Some("alice"));
    assert_eq!(record.who.team.as_deref(), Some("research"));
}

#[tokio::test]
async fn content_is_recorded_only_when_the_operator_asks() {
    let rig = rig("[ledger]\nenabled = false\nrecord_content = true\n").await;
    rig.upstream.push(completion("Bonjour", "stop", 10, 5));
    let answer = rig.post(hello()).await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    let record = rig.only_record();
    let content = record.content.as_ref().expect("record_content = true keeps the prompt and the answer");
    assert_eq!(content.request["turns"][0]["content"][0]["text"], "Hello");
    assert_eq!(content.answer.as_ref().unwrap()[0]["text"], "Bonjour");
}

fn hex_sha256(text: &str) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(text.as_bytes()))
}
