//! The retry loop and the answer gates, end to end over HTTP, under tokio's
//! paused clock: the fake upstream, the gateway's router and the client share
//! one runtime, so retry waits, `retry-after` and read stalls pass in virtual
//! time — the assertions on elapsed time are exact and cost nothing.

// Test code: a failed step should stop the test with its message.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use serde_json::{Value, json};
use tokio::time::Instant;
use weir_host::{Config, Weir};
use weir_tests::{FakeUpstream, Scripted, openai_wire};

const CEILING: u32 = 4000;

struct Rig {
    upstream: FakeUpstream,
    weir: Weir,
    base: String,
    client: reqwest::Client,
}

/// An in-process gateway for one `openai-compatible` model routed to the fake.
async fn rig(extra: &str) -> Rig {
    let upstream = FakeUpstream::start_local().await;
    let toml = format!(
        r#"
read_timeout_secs = 1

[[model]]
id = "m"
provider = "openai-compatible"
wire_id = "qwen3"
endpoint = "{url}"
max_output_tokens = {CEILING}
context_window = 100000
output_tokens = 100
{extra}
"#,
        url = upstream.base_url()
    );
    let weir = Weir::builder()
        .config(Config::from_toml(&toml, "test").unwrap())
        .providers_dir("/nonexistent-weir-providers")
        .cache_dir(Some(std::env::temp_dir().join("weir-retry-test-cache")))
        .build()
        .unwrap();
    let base = weir_tests::serve_router(weir_host::server::router(weir.clone())).await;
    Rig { upstream, weir, base, client: reqwest::Client::new() }
}

struct Answer {
    status: u16,
    body: Value,
    attempts: u32,
}

impl Rig {
    async fn call(&self, body: Value, headers: &[(&str, &str)]) -> Answer {
        let mut request = self.client.post(format!("{}/v1/chat/completions", self.base)).json(&body);
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let response = request.send().await.unwrap();
        let status = response.status().as_u16();
        let attempts = response.headers()["x-weir-attempts"].to_str().unwrap().parse().unwrap();
        Answer { status, body: response.json().await.unwrap(), attempts }
    }

    async fn hello(&self) -> Answer {
        self.call(hello(), &[]).await
    }

    async fn coefficient(&self) -> f64 {
        self.weir.throttle_coefficient("m").await.unwrap()
    }

    fn sent(&self, index: usize) -> Value {
        self.upstream.received()[index].json()
    }
}

fn hello() -> Value {
    json!({"model": "m", "messages": [{"role": "user", "content": "Hello"}]})
}

fn assert_category(answer: &Answer, status: u16, category: &str) {
    assert_eq!(answer.status, status, "{}", answer.body);
    assert_eq!(answer.body["error"]["type"], category, "{}", answer.body);
}

fn assert_no_raw_text(answer: &Answer, raw: &str) {
    assert!(!answer.body.to_string().contains(raw), "raw upstream text leaked: {}", answer.body);
}

fn json_answer(status: u16, body: Value) -> Scripted {
    openai_wire::json_response(status, &body)
}

fn completion(content: Value, finish_reason: &str, completion_tokens: u64) -> Scripted {
    json_answer(
        200,
        json!({"id": "chatcmpl-x", "object": "chat.completion", "created": 1, "model": "qwen3",
               "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": finish_reason}],
               "usage": {"prompt_tokens": 10, "completion_tokens": completion_tokens, "total_tokens": 10 + completion_tokens}}),
    )
}

// ------------------------------------------------------------------ retry loop

#[tokio::test(start_paused = true)]
async fn a_429_with_retry_after_then_success() {
    let rig = rig("").await;
    rig.upstream.push(openai_wire::rate_limited(7));
    let started = Instant::now();
    let answer = rig.hello().await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert_eq!(answer.attempts, 2);
    assert!(started.elapsed() >= Duration::from_secs(7), "honoured retry-after: {:?}", started.elapsed());
    assert_eq!(rig.coefficient().await, 0.5, "the 429 fed the throttle; one success moves nothing yet");
    assert_eq!(rig.upstream.request_count(), 2);
}

#[tokio::test(start_paused = true)]
async fn a_run_of_529s_spends_the_budget_and_names_the_last_signal() {
    let rig = rig("max_retries = 3").await;
    let overloaded = || {
        json_answer(
            529,
            json!({"type": "error", "error": {"type": "overloaded_error", "message": "RAW-OVERLOAD-TEXT"}}),
        )
    };
    for _ in 0..4 {
        rig.upstream.push(overloaded());
    }
    let started = Instant::now();
    let answer = rig.hello().await;
    assert_category(&answer, 503, "overloaded");
    assert_eq!(answer.attempts, 4);
    let message = answer.body["error"]["message"].as_str().unwrap();
    assert!(message.contains("`m`") && message.contains("gave up after 4 attempts"), "{message}");
    assert_no_raw_text(&answer, "RAW-OVERLOAD-TEXT");
    assert_eq!(rig.coefficient().await, 6.0, "four overloads at 1.5 each");
    // Overload waits in its wide window, doubling: at least 2 + 4 + 8 s.
    assert!(started.elapsed() >= Duration::from_secs(14), "{:?}", started.elapsed());
}

#[tokio::test(start_paused = true)]
async fn a_500_then_success_feeds_the_throttle_nothing() {
    let rig = rig("").await;
    rig.upstream.push(openai_wire::server_error());
    let answer = rig.hello().await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert_eq!(answer.attempts, 2);
    assert_eq!(rig.coefficient().await, 0.0);
}

#[tokio::test(start_paused = true)]
async fn rate_limits_until_the_budget_is_spent_are_never_a_bare_429() {
    let rig = rig("max_retries = 5").await;
    for _ in 0..3 {
        rig.upstream.push(openai_wire::rate_limited(1));
    }
    let answer = rig.call(hello(), &[("x-weir-max-retries", "2")]).await;
    assert_category(&answer, 429, "rate_limited");
    assert_eq!(answer.attempts, 3, "the request's budget wins over the catalog's");
    assert!(answer.body["error"]["message"].as_str().unwrap().contains("gave up after 3 attempts"));
    assert_eq!(rig.coefficient().await, 1.5);
}

#[tokio::test(start_paused = true)]
async fn a_connection_reset_and_a_read_stall_are_transient() {
    let rig = rig("").await;
    rig.upstream.push(Scripted::Drop);
    // read_timeout_secs = 1: the upstream stays silent for 30 s.
    rig.upstream.push(openai_wire::completion("late").after(Duration::from_secs(30)));
    let answer = rig.hello().await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert_eq!(answer.attempts, 3, "reset, stall, success");
    assert_eq!(answer.body["choices"][0]["message"]["content"], "echo: Hello");

    for _ in 0..4 {
        rig.upstream.push(Scripted::Drop);
    }
    let answer = rig.hello().await;
    assert_category(&answer, 502, "upstream_unavailable");
    assert_eq!(answer.attempts, 4);
}

#[tokio::test(start_paused = true)]
async fn quota_exhaustion_is_never_retried_and_names_the_provider_not_the_credential() {
    let rig = rig("").await;
    rig.upstream.push(openai_wire::insufficient_quota());
    let answer = rig.hello().await;
    assert_category(&answer, 402, "provider_credit_exhausted");
    assert_eq!(answer.attempts, 1);
    assert_eq!(rig.upstream.request_count(), 1);
    let message = answer.body["error"]["message"].as_str().unwrap();
    // The credential id is the operator's to read (in the log); the caller learns the provider.
    assert!(!message.contains("openai-compatible-api-key") && message.contains("`openai-compatible`"), "{message}");
    assert!(message.contains("top up"), "{message}");
    assert_no_raw_text(&answer, "You exceeded your current quota");
    assert_eq!(rig.coefficient().await, 0.0, "quota is not backpressure");

    rig.upstream.push(json_answer(402, json!({"error": {"message": "RAW-BILLING", "type": "billing_error"}})));
    let answer = rig.hello().await;
    assert_category(&answer, 402, "provider_credit_exhausted");
    assert_eq!(answer.attempts, 1);
    assert_no_raw_text(&answer, "RAW-BILLING");
}

// ------------------------------------------------------------------ truncation

/// The gateway's default (the gateway seed's rule): an answer cut off with
/// text is returned as it is, its stop `length`; nothing is re-run.
#[tokio::test(start_paused = true)]
async fn a_truncated_answer_with_text_is_returned_as_it_is_by_default() {
    let rig = rig("").await;
    rig.upstream.push(completion(json!("Half an ans"), "length", 100));
    let answer = rig.hello().await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert_eq!(answer.body["choices"][0]["message"]["content"], "Half an ans");
    assert_eq!(answer.body["choices"][0]["finish_reason"], "length");
    assert_eq!(answer.attempts, 1);
    assert_eq!(rig.upstream.request_count(), 1);
}

/// An answer that spent its whole budget and said nothing (a reasoning model's
/// budget gone to thinking) gets the one re-run at the ceiling, at the same
/// effort, by default.
#[tokio::test(start_paused = true)]
async fn a_truncated_answer_with_nothing_is_rerun_once_at_the_ceiling() {
    let rig = rig("").await;
    rig.upstream.push(completion(json!(""), "length", 100));
    rig.upstream.push(completion(json!("A whole answer."), "stop", 350));
    let mut body = hello();
    body["reasoning_effort"] = json!("high");
    let answer = rig.call(body, &[]).await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert_eq!(answer.body["choices"][0]["message"]["content"], "A whole answer.");
    assert_eq!(answer.attempts, 2);
    assert_eq!(rig.sent(0)["max_tokens"], 100, "the declared output first");
    assert_eq!(rig.sent(1)["max_tokens"], CEILING, "then the model's ceiling, reserved and sent alike");
    assert_eq!(rig.sent(0)["reasoning_effort"], rig.sent(1)["reasoning_effort"], "at the same effort");
}

/// A tool call whose arguments were cut off is no answer: an unclosed call
/// must never reach a tool, so it is re-run like an answer with nothing.
#[tokio::test(start_paused = true)]
async fn a_truncated_tool_call_with_cut_off_arguments_is_rerun_not_returned() {
    let rig = rig("").await;
    let call = |arguments: &str, finish: &str| {
        json_answer(
            200,
            json!({"id": "chatcmpl-x", "object": "chat.completion", "created": 1, "model": "qwen3",
                   "choices": [{"index": 0, "finish_reason": finish, "message": {"role": "assistant", "content": null,
                       "tool_calls": [{"id": "call_1", "type": "function",
                                       "function": {"name": "lookup", "arguments": arguments}}]}}],
                   "usage": {"prompt_tokens": 10, "completion_tokens": 100, "total_tokens": 110}}),
        )
    };
    rig.upstream.push(call(r#"{"city": "Par"#, "length"));
    rig.upstream.push(call(r#"{"city": "Paris"}"#, "tool_calls"));
    let mut body = hello();
    body["tools"] = json!([{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}]);
    let answer = rig.call(body, &[]).await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    let arguments = &answer.body["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"];
    assert_eq!(arguments, r#"{"city": "Paris"}"#, "{}", answer.body);
    assert_eq!(answer.attempts, 2);
    assert_eq!(rig.sent(1)["max_tokens"], CEILING);
}

/// With a response schema a cut-off structure is no answer: the default
/// escalates it as the runtime's rule does.
#[tokio::test(start_paused = true)]
async fn a_truncated_structured_answer_is_rerun_at_the_ceiling_by_default() {
    let rig = rig("").await;
    rig.upstream.push(completion(json!(r#"{"answer": "Half"#), "length", 100));
    rig.upstream.push(completion(json!(r#"{"answer": "Whole"}"#), "stop", 300));
    let mut body = hello();
    body["response_format"] = json!({"type": "json_schema", "json_schema": {"name": "a", "schema": {
        "type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}}});
    let answer = rig.call(body, &[]).await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert_eq!(answer.attempts, 2);
    assert_eq!(rig.sent(1)["max_tokens"], CEILING);
}

/// `x-weir-truncation: escalate` asks for the runtime seed's rule (the
/// library's default): any truncated answer is re-run once at the ceiling.
#[tokio::test(start_paused = true)]
async fn a_caller_may_ask_for_every_truncation_to_be_escalated() {
    let rig = rig("").await;
    rig.upstream.push(completion(json!("Half an ans"), "length", 100));
    rig.upstream.push(completion(json!("A whole answer."), "stop", 350));
    let answer = rig.call(hello(), &[("x-weir-truncation", "escalate")]).await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert_eq!(answer.body["choices"][0]["message"]["content"], "A whole answer.");
    assert_eq!(answer.attempts, 2);
    assert_eq!(rig.sent(1)["max_tokens"], CEILING);
}

#[tokio::test(start_paused = true)]
async fn an_unknown_truncation_rule_is_a_400_before_any_call() {
    let rig = rig("").await;
    let response = rig
        .client
        .post(format!("{}/v1/chat/completions", rig.base))
        .header("x-weir-truncation", "sometimes")
        .json(&hello())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 400);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["type"], "invalid_request", "{body}");
    assert!(body["error"]["message"].as_str().unwrap().contains("x-weir-truncation"), "{body}");
    assert_eq!(rig.upstream.request_count(), 0);
}

/// The backstop, for a backend that gives no typed stop reason (here no
/// `finish_reason` at all): output that reached the budget sent is truncation.
#[tokio::test(start_paused = true)]
async fn output_reaching_the_ceiling_is_truncation_when_the_stop_is_not_typed() {
    let rig = rig("").await;
    let mut untyped = completion(json!(""), "stop", 100);
    if let Scripted::Respond { body, .. } = &mut untyped {
        let mut value: Value = serde_json::from_slice(body).unwrap();
        value["choices"][0]["finish_reason"] = Value::Null;
        *body = serde_json::to_vec(&value).unwrap().into();
    }
    rig.upstream.push(untyped);
    rig.upstream.push(completion(json!("fine"), "stop", 20));
    let answer = rig.hello().await;
    assert_eq!(answer.status, 200);
    assert_eq!(answer.attempts, 2);
    assert_eq!(rig.sent(1)["max_tokens"], CEILING);
}

/// A natural stop is not truncation, however long the answer: one that fills
/// its budget exactly with `finish_reason: "stop"` is answered as it is
/// (issue 44; the backstop above applies only without a typed stop).
#[tokio::test(start_paused = true)]
async fn a_stop_answer_that_fills_max_tokens_exactly_is_not_escalated() {
    let rig = rig("").await;
    rig.upstream.push(completion(json!("exactly one hundred tokens"), "stop", 100));
    let answer = rig.hello().await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert_eq!(answer.attempts, 1);
    assert_eq!(answer.body["choices"][0]["finish_reason"], "stop");
    assert_eq!(rig.upstream.request_count(), 1);
    assert_eq!(rig.sent(0)["max_tokens"], 100);
}

#[tokio::test(start_paused = true)]
async fn a_truncation_at_the_ceiling_fails_without_a_second_call() {
    let rig = rig("").await;
    // Nothing said at the ceiling: the output is exhausted, and a second call
    // would only repeat it.
    rig.upstream.push(completion(json!(""), "length", u64::from(CEILING)));
    let mut body = hello();
    body["max_tokens"] = json!(CEILING);
    let answer = rig.call(body, &[]).await;
    assert_category(&answer, 422, "output_truncated");
    assert_eq!(rig.upstream.request_count(), 1);
    assert!(answer.body["error"]["message"].as_str().unwrap().contains(&CEILING.to_string()));
}

#[tokio::test(start_paused = true)]
async fn a_caller_may_accept_the_truncated_answer() {
    let rig = rig("").await;
    rig.upstream.push(completion(json!("Half an ans"), "length", 100));
    let answer = rig.call(hello(), &[("x-weir-accept-truncated", "true")]).await;
    assert_eq!(answer.status, 200);
    assert_eq!(answer.body["choices"][0]["finish_reason"], "length");
    assert_eq!(rig.upstream.request_count(), 1);
}

// ------------------------------------------------------------------ refusal and emptiness

#[tokio::test(start_paused = true)]
async fn a_refusal_fails_with_its_category_and_is_never_retried() {
    let rig = rig("").await;
    rig.upstream.push(openai_wire::refusal("I can't help with that."));
    let answer = rig.hello().await;
    assert_category(&answer, 422, "refused");
    assert_eq!(answer.body["error"]["refusal"]["explanation"], "I can't help with that.");
    assert!(answer.body["error"]["message"].as_str().unwrap().contains("`m`"));
    assert_eq!(rig.upstream.request_count(), 1);

    rig.upstream.push(openai_wire::content_filtered("partial"));
    let answer = rig.hello().await;
    assert_category(&answer, 422, "refused");
    assert_eq!(rig.upstream.request_count(), 2);
}

#[tokio::test(start_paused = true)]
async fn empty_answers_are_rerun_then_exhausted() {
    let rig = rig("").await;
    rig.upstream.push(completion(json!(""), "stop", 1));
    let answer = rig.hello().await;
    assert_eq!(answer.status, 200, "an empty answer, then content: {}", answer.body);
    assert_eq!(answer.attempts, 2);

    rig.upstream.push(completion(Value::Null, "stop", 1));
    rig.upstream.push(completion(json!("   "), "stop", 1));
    let answer = rig.hello().await;
    assert_category(&answer, 502, "provider_empty_response_exhausted");
    assert_eq!(answer.attempts, 2, "one re-run per payload");
    assert_eq!(rig.upstream.request_count(), 4);
}

// ------------------------------------------------------------------ structured answers

fn structured() -> Value {
    json!({
        "model": "m",
        "messages": [{"role": "user", "content": "Weather in Paris as JSON"}],
        "response_format": {"type": "json_schema", "json_schema": {"name": "weather", "schema": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "celsius": {"type": "number"}},
            "required": ["city", "celsius"]
        }}}
    })
}

#[tokio::test(start_paused = true)]
async fn a_malformed_structured_answer_gets_a_correction_turn() {
    let rig = rig("").await;
    rig.upstream.push(completion(json!("Paris is 18C today"), "stop", 8));
    rig.upstream.push(completion(json!(r#"{"city": "Paris"}"#), "stop", 8));
    rig.upstream.push(completion(json!(r#"{"city": "Paris", "celsius": 18}"#), "stop", 8));
    let answer = rig.call(structured(), &[]).await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    let content: Value =
        serde_json::from_str(answer.body["choices"][0]["message"]["content"].as_str().unwrap()).unwrap();
    assert_eq!(content, json!({"city": "Paris", "celsius": 18}));
    assert_eq!(answer.attempts, 3);

    let second = rig.sent(1);
    let messages = second["messages"].as_array().unwrap();
    assert_eq!(messages[1], json!({"role": "assistant", "content": "Paris is 18C today"}));
    let correction = messages[2]["content"].as_str().unwrap();
    assert!(correction.contains("not valid JSON"), "{correction}");
    let third = rig.sent(2);
    let correction = third["messages"].as_array().unwrap()[4]["content"].as_str().unwrap().to_owned();
    assert!(correction.contains(r#"at the top level: "celsius" is a required property"#), "{correction}");
}

#[tokio::test(start_paused = true)]
async fn corrections_are_bounded_and_exhaustion_names_the_failure() {
    let rig = rig("max_corrections = 1").await;
    rig.upstream.push(completion(json!("nope"), "stop", 2));
    rig.upstream.push(completion(json!(r#"{"city": 3}"#), "stop", 2));
    let answer = rig.call(structured(), &[]).await;
    assert_category(&answer, 422, "invalid_response");
    assert_eq!(rig.upstream.request_count(), 2);
    let message = answer.body["error"]["message"].as_str().unwrap();
    // Every failure, each with its path: the wrong type and the missing field.
    assert!(message.contains(r#"at `/city`: the value is not of type "string""#), "{message}");
    assert!(message.contains(r#""celsius" is a required property"#) && message.contains("1 correction"), "{message}");
}

#[tokio::test(start_paused = true)]
async fn a_schema_echo_answer_is_normalized() {
    let rig = rig("").await;
    let echo = r#"{"@type": "object", "@fields": {"city": "Paris", "celsius": 18}}"#;
    rig.upstream.push(completion(json!(echo), "stop", 8));
    let answer = rig.call(structured(), &[]).await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    let content: Value =
        serde_json::from_str(answer.body["choices"][0]["message"]["content"].as_str().unwrap()).unwrap();
    assert_eq!(content, json!({"city": "Paris", "celsius": 18}));
    assert_eq!(rig.upstream.request_count(), 1);
}

// ------------------------------------------------------------------ stamping

#[tokio::test(start_paused = true)]
async fn every_answer_and_error_is_stamped_with_the_catalog_id() {
    let rig = rig("").await;
    let response = rig.client.post(format!("{}/v1/chat/completions", rig.base)).json(&hello()).send().await.unwrap();
    let headers = response.headers().clone();
    assert_eq!(headers["x-weir-model"], "m");
    assert_eq!(headers["x-weir-provider"], "openai-compatible");
    assert_eq!(headers["x-weir-max-tokens"], "100");
    assert!(headers.contains_key("x-weir-latency-ms"));
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["model"], "m", "not the provider's echo `{}`", "qwen3");

    rig.upstream.push(openai_wire::invalid_api_key());
    let response = rig.client.post(format!("{}/v1/chat/completions", rig.base)).json(&hello()).send().await.unwrap();
    assert_eq!(response.status(), 424);
    let headers = response.headers();
    assert_eq!(headers["x-weir-model"], "m");
    assert_eq!(headers["x-weir-provider"], "openai-compatible");
    assert_eq!(headers["x-weir-attempts"], "1");
}
