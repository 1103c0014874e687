//! The embedded `anthropic` component driven through the gateway, in front of the fake
//! upstream scripted with the real Anthropic Messages wire (`weir_tests::anthropic_wire`):
//! OpenAI requests in, and on both sides what matters — what the caller gets (content,
//! tool calls, finish reasons, usage with cached tokens, typed errors, OpenAI chunks) and
//! what the upstream received (`POST /v1/messages`, `x-api-key`, `anthropic-version`, the
//! exact `max_tokens`, `system`, `tool_result` blocks, the `stream` flag).
//!
//! Most tests run the real `weir serve` child process with no providers folder (so the
//! component is the embedded one). The two retry tests run the same gateway in process under
//! tokio's paused clock instead, as `retry_and_gates.rs` does: an overload waits 2–10 s
//! before its retry, which virtual time skips, and which lets the test assert the wait came
//! from the overload policy rather than the rate-limit one.

// Test code: a failed step should stop the test with its message.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use weir_host::transport::{Secret, SecretStore};
use weir_host::{Config, Weir};
use weir_tests::anthropic_wire::{
    self, OVERLOADED_MESSAGE, content_block_start, content_block_stop, empty_text_block, empty_thinking_block,
    error_event, input_json_delta, message_delta, message_start, message_stop, ping, signature_delta,
    streamed_tool_use_block, text_block, text_delta, thinking_delta, tool_use_block, usage_json,
};
use weir_tests::openai_wire::{sse_json, streamed_text};
use weir_tests::{FakeUpstream, Gateway};

/// The fake key the gateway reads from `WEIR_ANTHROPIC_KEY` (credential `weir-anthropic-key`).
const KEY: &str = "sk-ant-weir-test-0123456789";
const CREDENTIAL: &str = "weir-anthropic-key";
const WIRE_ID: &str = "claude-sonnet-4-5";

/// The endpoint is the API's root, not the fake's OpenAI-style `/v1` base URL: the
/// component appends `/v1/messages` to it, as to `https://api.anthropic.com`.
fn endpoint(upstream: &FakeUpstream) -> String {
    format!("http://{}", upstream.addr())
}

/// One `anthropic` model routed to the fake; `extra` adds keys to the entry. Its
/// prompt cache is `shared`, so the breakpoints these tests read are rendered (the
/// default, `member`, renders none: see `the_default_prompt_cache_sends_no_breakpoint`).
fn config(upstream: &FakeUpstream, extra: &str) -> String {
    format!(
        r#"
read_timeout_secs = 5
prompt_cache = "shared"

[[model]]
id = "claude"
provider = "anthropic"
wire_id = "{WIRE_ID}"
endpoint = "{url}"
credential = "{CREDENTIAL}"
max_output_tokens = 8000
context_window = 200000
output_tokens = 100
{extra}
"#,
        url = endpoint(upstream)
    )
}

/// The real binary, no retries (one scripted failure per call; retries have their own tests).
async fn gateway(upstream: &FakeUpstream) -> Gateway {
    Gateway::start_with(&config(upstream, "max_retries = 0"), &[("WEIR_ANTHROPIC_KEY", KEY)], None).await
}

/// Posts a request; returns the status, the headers and the body text.
async fn post(gateway: &Gateway, body: &Value) -> (u16, reqwest::header::HeaderMap, String) {
    let response = reqwest::Client::new().post(gateway.url("/v1/chat/completions")).json(body).send().await.unwrap();
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    (status, headers, response.text().await.unwrap())
}

fn parse(body: &str) -> Value {
    serde_json::from_str(body).unwrap_or_else(|e| panic!("answer is not JSON ({e}): {body}"))
}

fn weather_tool() -> Value {
    json!({"type": "function", "function": {
        "name": "get_weather",
        "description": "Current weather for a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    }})
}

fn stream_flags(upstream: &FakeUpstream) -> Vec<bool> {
    upstream.received().iter().map(|r| r.json()["stream"].as_bool().unwrap_or(false)).collect()
}

fn error_event_of(body: &str) -> Value {
    sse_json(body)
        .into_iter()
        .find(|event| event.get("error").is_some())
        .unwrap_or_else(|| panic!("no error event in:\n{body}"))
}

#[tokio::test]
async fn a_text_answer_goes_out_as_messages_and_comes_back_as_openai_with_cached_usage() {
    let upstream = FakeUpstream::start().await;
    let gateway = gateway(&upstream).await;
    upstream.push(anthropic_wire::message(
        vec![text_block("Hello from Claude.")],
        "end_turn",
        usage_json(12, 6, 100, 2048),
    ));

    let request = json!({
        "model": "claude",
        "max_tokens": 300,
        "messages": [
            {"role": "system", "content": "You are terse."},
            {"role": "user", "content": "Hello"}
        ]
    });
    let (status, headers, body) = post(&gateway, &request).await;
    assert_eq!(status, 200, "{body}");
    let body = parse(&body);
    assert_eq!(body["model"], "claude", "the catalog id, never the provider's echo");
    assert_eq!(body["choices"][0]["message"]["content"], "Hello from Claude.");
    assert_eq!(body["choices"][0]["finish_reason"], "stop");
    let usage = &body["usage"];
    assert_eq!(usage["prompt_tokens"], 12 + 100 + 2048, "input + cache write + cache read: {usage}");
    assert_eq!(usage["completion_tokens"], 6);
    assert_eq!(usage["total_tokens"], 12 + 100 + 2048 + 6);
    assert_eq!(usage["prompt_tokens_details"]["cached_tokens"], 2048, "{usage}");
    assert_eq!(headers["x-weir-provider"], "anthropic");
    assert_eq!(headers["x-weir-model"], "claude");
    assert_eq!(headers["x-weir-attempts"], "1");
    assert_eq!(headers["x-weir-max-tokens"], "300");

    let sent = &upstream.received()[0];
    assert_eq!((sent.method.as_str(), sent.path.as_str()), ("POST", "/v1/messages"));
    assert_eq!(sent.header("x-api-key"), Some(KEY));
    assert_eq!(sent.header("authorization"), None, "the key goes in x-api-key only");
    assert_eq!(sent.header("anthropic-version"), Some(anthropic_wire::API_VERSION));
    let sent = sent.json();
    assert_eq!(sent["model"], WIRE_ID);
    assert_eq!(sent["max_tokens"], 300, "exactly the request's budget");
    // The gateway marks the system prompt as a cache breakpoint (the caching the usage reports).
    assert_eq!(
        sent["system"],
        json!([{"type": "text", "text": "You are terse.", "cache_control": {"type": "ephemeral"}}])
    );
    assert_eq!(sent["messages"], json!([{"role": "user", "content": [{"type": "text", "text": "Hello"}]}]));
    assert!(sent.get("stream").is_none(), "{sent}");
    assert_eq!(upstream.queued(), 0, "every scripted answer was used");
}

/// An Anthropic entry that declares no cache multipliers bills cache reads at 0.1 and
/// writes at 1.25 of its input price (Anthropic's own billing, by provider key); an entry
/// that declares one keeps it. Read back from the ledger the gateway wrote.
#[tokio::test]
async fn an_anthropic_entry_without_multipliers_bills_cached_input_at_anthropics_prices() {
    let upstream = FakeUpstream::start().await;
    let prices = "input_price = 3.0\noutput_price = 15.0\n";
    let declared = config(&upstream, prices)
        .replace("id = \"claude\"", "id = \"claude-declared\"")
        .replace("read_timeout_secs = 5", "")
        .replace(prices, &format!("{prices}cache_read_multiplier = 0.5\n"));
    let text = format!("{}{declared}\n[ledger]\npath = \"ledger.db\"\n", config(&upstream, prices));
    let gateway = Gateway::start_with(&text, &[("WEIR_ANTHROPIC_KEY", KEY)], None).await;
    for model in ["claude", "claude-declared"] {
        upstream.push(anthropic_wire::message(vec![text_block("Cached.")], "end_turn", usage_json(100, 10, 200, 1000)));
        let (status, _, body) =
            post(&gateway, &json!({"model": model, "messages": [{"role": "user", "content": "Hi"}]})).await;
        assert_eq!(status, 200, "{body}");
    }

    let records = weir_tests::closed_records(&gateway.dir().join("ledger.db"));
    let record = |model: &str| records.iter().find(|record| record["model"] == model).unwrap().clone();
    let default = record("claude");
    assert_eq!(default["usage"]["cache_read"], 1000, "{default}");
    assert_eq!(default["usage"]["cache_write"], 200, "{default}");
    let billable = default["billable_input"].as_f64().unwrap();
    assert!((billable - (100.0 + 0.1 * 1000.0 + 1.25 * 200.0)).abs() < 1e-9, "{billable}");
    // 100 × $3 + 10 × $15 + 1,000 × $0.30 (0.1) + 200 × $3.75 (1.25), per million.
    let cost = default["cost_usd"].as_f64().unwrap();
    assert!((cost - 1_500.0 / 1e6).abs() < 1e-12, "{cost}");

    let declared = record("claude-declared");
    let billable = declared["billable_input"].as_f64().unwrap();
    assert!((billable - (100.0 + 0.5 * 1000.0 + 1.25 * 200.0)).abs() < 1e-9, "the declared read wins: {billable}");
    // 100 × $3 + 10 × $15 + 1,000 × $1.50 (0.5, declared) + 200 × $3.75, per million.
    let cost = declared["cost_usd"].as_f64().unwrap();
    assert!((cost - 2_700.0 / 1e6).abs() < 1e-12, "{cost}");
}

#[tokio::test]
async fn tool_use_becomes_tool_calls_and_a_tool_result_goes_back_as_a_block() {
    let upstream = FakeUpstream::start().await;
    let gateway = gateway(&upstream).await;
    upstream.push(anthropic_wire::message(
        vec![text_block("Let me check."), tool_use_block("toolu_01A", "get_weather", json!({"city": "Paris"}))],
        "tool_use",
        usage_json(412, 58, 0, 0),
    ));
    let mut messages = vec![json!({"role": "user", "content": "Weather in Paris?"})];
    let (status, _, body) =
        post(&gateway, &json!({"model": "claude", "messages": messages, "tools": [weather_tool()]})).await;
    assert_eq!(status, 200, "{body}");
    let body = parse(&body);
    let choice = &body["choices"][0];
    assert_eq!(choice["finish_reason"], "tool_calls");
    let call = &choice["message"]["tool_calls"][0];
    assert_eq!(call["id"], "toolu_01A");
    assert_eq!(call["type"], "function");
    assert_eq!(call["function"]["name"], "get_weather");
    let arguments: Value = serde_json::from_str(call["function"]["arguments"].as_str().unwrap()).unwrap();
    assert_eq!(arguments, json!({"city": "Paris"}));
    let sent = upstream.received()[0].json();
    assert_eq!(sent["tools"][0]["name"], "get_weather");
    assert_eq!(sent["tools"][0]["input_schema"]["required"], json!(["city"]));

    // The caller runs the tool and sends its result back.
    messages.push(choice["message"].clone());
    messages.push(json!({"role": "tool", "tool_call_id": "toolu_01A", "content": "18C, sunny"}));
    upstream.push(anthropic_wire::text_message("It is 18C and sunny in Paris."));
    let (status, _, body) =
        post(&gateway, &json!({"model": "claude", "messages": messages, "tools": [weather_tool()]})).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(parse(&body)["choices"][0]["message"]["content"], "It is 18C and sunny in Paris.");

    let sent = upstream.received()[1].json();
    let turns = sent["messages"].as_array().unwrap();
    assert_eq!(turns.len(), 3, "{sent}");
    assert_eq!(turns[1]["role"], "assistant");
    let tool_use = turns[1]["content"].as_array().unwrap().iter().find(|b| b["type"] == "tool_use").unwrap();
    assert_eq!(tool_use, &tool_use_block("toolu_01A", "get_weather", json!({"city": "Paris"})));
    assert_eq!(turns[2]["role"], "user");
    assert_eq!(
        turns[2]["content"][0],
        json!({"type": "tool_result", "tool_use_id": "toolu_01A",
               "content": [{"type": "text", "text": "18C, sunny"}], "is_error": false})
    );
    assert_eq!(upstream.queued(), 0);
}

#[tokio::test]
async fn a_refusal_is_a_422_naming_its_category_and_is_not_retried() {
    let upstream = FakeUpstream::start().await;
    let gateway =
        Gateway::start_with(&config(&upstream, "max_retries = 2"), &[("WEIR_ANTHROPIC_KEY", KEY)], None).await;
    upstream.push(anthropic_wire::refusal("I can help with th", Some("cyber"), Some("Declined by policy.")));

    let (status, headers, body) =
        post(&gateway, &json!({"model": "claude", "messages": [{"role": "user", "content": "Hello"}]})).await;
    assert_eq!(status, 422, "{body}");
    let body = parse(&body);
    assert_eq!(body["error"]["type"], "refused", "{body}");
    assert_eq!(body["error"]["code"], "refused", "{body}");
    assert_eq!(body["error"]["refusal"]["category"], "cyber", "{body}");
    assert!(!body.to_string().contains("I can help with th"), "the partial text is unusable: {body}");
    assert_eq!(headers["x-weir-attempts"], "1");
    assert_eq!(upstream.request_count(), 1, "a refusal is never retried on the same model");
}

#[tokio::test]
async fn a_rejected_key_is_authentication_failed_without_the_provider_text() {
    let upstream = FakeUpstream::start().await;
    let gateway = gateway(&upstream).await;
    upstream.push(anthropic_wire::error(401, "authentication_error", "SECRET-PROSE invalid x-api-key"));

    let (status, _, body) =
        post(&gateway, &json!({"model": "claude", "messages": [{"role": "user", "content": "Hello"}]})).await;
    assert_eq!(status, 424, "{body}");
    let parsed = parse(&body);
    assert_eq!(parsed["error"]["type"], "authentication_failed", "{body}");
    assert!(!body.contains("SECRET-PROSE") && !body.contains("x-api-key"), "raw provider text leaked: {body}");
    assert!(!body.contains(KEY), "{body}");
    // The detail is for the operator, with the upstream's request id.
    gateway.wait_for_stderr(anthropic_wire::REQUEST_ID, Duration::from_secs(5)).await;
    assert_eq!(upstream.request_count(), 1);
}

/// The runtime seed: Anthropic's 400 "credit balance is too low" is out of
/// money (quota), not a bad request: `provider_credit_exhausted`, not retried,
/// the provider's words only in the log.
#[tokio::test]
async fn a_low_credit_balance_is_provider_credit_exhausted_and_never_retried() {
    let upstream = FakeUpstream::start().await;
    let gateway = gateway(&upstream).await;
    upstream.push(anthropic_wire::error(
        400,
        "invalid_request_error",
        "Your credit balance is too low to access the Anthropic API. SECRET-PROSE Plans & Billing.",
    ));

    let (status, headers, body) =
        post(&gateway, &json!({"model": "claude", "messages": [{"role": "user", "content": "Hello"}]})).await;
    assert_eq!(status, 402, "{body}");
    assert_eq!(parse(&body)["error"]["type"], "provider_credit_exhausted", "{body}");
    assert!(!body.contains("SECRET-PROSE") && !body.contains("credit balance is too low"), "{body}");
    assert_eq!(headers["x-weir-attempts"], "1");
    assert_eq!(upstream.request_count(), 1, "out of money is never retried");
    gateway.wait_for_stderr("SECRET-PROSE", Duration::from_secs(5)).await;
}

#[tokio::test]
async fn a_stream_with_thinking_text_and_a_tool_call_becomes_openai_chunks() {
    let upstream = FakeUpstream::start().await;
    let gateway = gateway(&upstream).await;
    upstream.push(anthropic_wire::stream(vec![
        message_start(25, 7, 2048),
        content_block_start(0, &empty_thinking_block()),
        thinking_delta(0, "The user wants "),
        thinking_delta(0, "the weather."),
        signature_delta(0, "EqQBCkgIARABGAIiQL"),
        content_block_stop(0),
        content_block_start(1, &empty_text_block()),
        ping(),
        text_delta(1, "Let me "),
        text_delta(1, "check."),
        content_block_stop(1),
        content_block_start(2, &streamed_tool_use_block("toolu_01A", "get_weather")),
        input_json_delta(2, ""),
        input_json_delta(2, "{\"city\": \"Pa"),
        input_json_delta(2, "ris\"}"),
        content_block_stop(2),
        message_delta("tool_use", None, 42),
        message_stop(),
    ]));

    let request = json!({
        "model": "claude",
        "max_tokens": 500,
        "stream": true,
        "stream_options": {"include_usage": true},
        "messages": [{"role": "user", "content": "Weather in Paris?"}],
        "tools": [weather_tool()]
    });
    let (status, headers, body) = post(&gateway, &request).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(headers["content-type"], "text/event-stream");
    assert_eq!(headers["x-weir-provider"], "anthropic");
    let chunks = sse_json(&body);
    assert!(chunks.iter().all(|c| c["object"] == "chat.completion.chunk" && c["model"] == "claude"), "{body}");
    let reasoning: String =
        chunks.iter().filter_map(|c| c.pointer("/choices/0/delta/reasoning_content")?.as_str()).collect();
    assert_eq!(reasoning, "The user wants the weather.");
    assert!(!body.contains("EqQBCkgIARABGAIiQL"), "a signature is not reasoning text: {body}");
    assert_eq!(streamed_text(&body), "Let me check.");
    let calls: Vec<Value> = chunks.iter().filter_map(|c| c.pointer("/choices/0/delta/tool_calls/0").cloned()).collect();
    assert_eq!(calls[0]["id"], "toolu_01A", "{body}");
    assert_eq!(calls[0]["function"]["name"], "get_weather");
    let arguments: String = calls.iter().filter_map(|c| c.pointer("/function/arguments")?.as_str()).collect();
    assert_eq!(serde_json::from_str::<Value>(&arguments).unwrap(), json!({"city": "Paris"}));
    let finish = chunks.iter().find_map(|c| c.pointer("/choices/0/finish_reason").and_then(Value::as_str));
    assert_eq!(finish, Some("tool_calls"));
    let usage = chunks.iter().rev().find_map(|c| c.get("usage").filter(|u| !u.is_null())).expect("a usage chunk");
    assert_eq!(usage["prompt_tokens"], 25 + 7 + 2048, "{usage}");
    assert_eq!(usage["completion_tokens"], 42, "the last cumulative count: {usage}");
    assert_eq!(usage["prompt_tokens_details"]["cached_tokens"], 2048, "{usage}");
    assert!(body.ends_with("data: [DONE]\n\n"), "{body}");

    let sent = &upstream.received()[0];
    assert_eq!(sent.path, "/v1/messages");
    assert_eq!(sent.header("x-api-key"), Some(KEY));
    let sent = sent.json();
    assert_eq!(sent["stream"], true);
    assert_eq!(sent["max_tokens"], 500, "the one output reserve, streamed too");
    assert_eq!(upstream.queued(), 0);
}

#[tokio::test]
async fn an_overload_event_before_output_is_replayed_once_without_streaming() {
    let upstream = FakeUpstream::start().await;
    let gateway = gateway(&upstream).await;
    upstream.push(anthropic_wire::stream(vec![
        message_start(10, 0, 0),
        ping(),
        error_event("overloaded_error", OVERLOADED_MESSAGE),
    ]));
    upstream.push(anthropic_wire::text_message("Recovered whole."));

    let request = json!({
        "model": "claude",
        "stream": true,
        "stream_options": {"include_usage": true},
        "messages": [{"role": "user", "content": "Hello"}]
    });
    let (status, headers, body) = post(&gateway, &request).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(streamed_text(&body), "Recovered whole.");
    assert!(body.ends_with("data: [DONE]\n\n"), "{body}");
    assert_eq!(stream_flags(&upstream), vec![true, false], "the same request, replayed once without streaming");
    let received = upstream.received();
    assert!(received[1].json().get("stream").is_none(), "no `stream` key at all on the replay");
    assert_eq!(received[1].path, "/v1/messages");
    assert_eq!(headers["x-weir-attempts"], "2", "the replay is an upstream request of its own: counted");
    assert_eq!(upstream.queued(), 0);
}

#[tokio::test]
async fn an_error_event_after_output_ends_the_stream_with_an_error_and_no_done() {
    let upstream = FakeUpstream::start().await;
    let gateway = gateway(&upstream).await;
    upstream.push(anthropic_wire::stream(vec![
        message_start(10, 0, 0),
        content_block_start(0, &empty_text_block()),
        text_delta(0, "Half an ans"),
        error_event("overloaded_error", "SECRET-PROSE overloaded"),
    ]));

    let request = json!({"model": "claude", "stream": true, "messages": [{"role": "user", "content": "Hello"}]});
    let (status, _, body) = post(&gateway, &request).await;
    assert_eq!(status, 200, "the stream had begun");
    assert_eq!(streamed_text(&body), "Half an ans");
    let error = error_event_of(&body);
    assert_eq!(error["error"]["type"], "upstream_error", "a capacity signal mid-stream: {body}");
    assert!(!body.contains("SECRET-PROSE"), "{body}");
    assert!(!body.contains("[DONE]"), "{body}");
    assert_eq!(upstream.request_count(), 1, "nothing is retried after output");
}

#[tokio::test]
async fn the_component_is_embedded_and_configured_with_no_providers_folder() {
    let upstream = FakeUpstream::start().await;
    let gateway = gateway(&upstream).await;
    let providers: Value = reqwest::get(gateway.url("/v1/providers")).await.unwrap().json().await.unwrap();
    let anthropic = providers["providers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["key"] == "anthropic")
        .unwrap_or_else(|| panic!("no anthropic provider: {providers:#}"));
    assert_eq!(anthropic["source"], "embedded:anthropic", "{anthropic}");
    assert_eq!(anthropic["default_endpoint"], "https://api.anthropic.com", "{anthropic}");
    let models: Value = reqwest::get(gateway.url("/v1/models")).await.unwrap().json().await.unwrap();
    let claude = models["data"].as_array().unwrap().iter().find(|m| m["id"] == "claude").expect("the model");
    assert_eq!(claude["weir"]["provider"], "anthropic", "{claude}");
    assert_eq!(claude["weir"]["available"], true, "{claude}");
}

// ------------------------------------------------------------------ retries, in virtual time

/// The test key for the in-process gateway (no environment variables in process).
#[derive(Debug)]
struct TestKey;

impl SecretStore for TestKey {
    fn get(&self, credential_id: &str) -> Option<Secret> {
        (credential_id == CREDENTIAL).then(|| Secret::new(KEY))
    }

    fn location(&self, credential_id: &str) -> String {
        format!("the test's store `{credential_id}`")
    }
}

/// The in-process gateway on the caller's runtime, one retry allowed; returns the fake and
/// the gateway's base URL. Keeps the `Weir` alive inside the router it serves.
async fn paused_rig() -> (FakeUpstream, String) {
    let upstream = FakeUpstream::start_local().await;
    let weir = Weir::builder()
        .config(Config::from_toml(&config(&upstream, "max_retries = 1"), "test").unwrap())
        .providers_dir("/nonexistent-weir-providers")
        .cache_dir(Some(std::env::temp_dir().join("weir-anthropic-test-cache")))
        .secret_store(Arc::new(TestKey))
        .build()
        .unwrap();
    let base = weir_tests::serve_router(weir_host::server::router(weir)).await;
    (upstream, base)
}

/// Posts a plain call; returns the status, `x-weir-attempts` and the body.
async fn call(base: &str) -> (u16, String, Value) {
    let response = reqwest::Client::new()
        .post(format!("{base}/v1/chat/completions"))
        .json(&json!({"model": "claude", "messages": [{"role": "user", "content": "Hello"}]}))
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    let attempts = response.headers()["x-weir-attempts"].to_str().unwrap().to_owned();
    (status, attempts, response.json().await.unwrap())
}

#[tokio::test(start_paused = true)]
async fn a_529_overload_is_retried_with_the_overload_wait() {
    let (upstream, base) = paused_rig().await;
    upstream.push(anthropic_wire::overloaded());
    upstream.push(anthropic_wire::text_message("After the overload."));

    let started = tokio::time::Instant::now();
    let (status, attempts, body) = call(&base).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["choices"][0]["message"]["content"], "After the overload.");
    assert_eq!(attempts, "2");
    let waited = started.elapsed();
    assert!(waited >= Duration::from_secs(2), "an overload waits in the wider window: {waited:?}");
    let received = upstream.received();
    assert_eq!(received.len(), 2);
    assert!(received.iter().all(|r| r.path == "/v1/messages" && r.header("x-api-key") == Some(KEY)));
    assert_eq!(upstream.queued(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_429_with_retry_after_zero_is_retried_as_a_rate_limit() {
    let (upstream, base) = paused_rig().await;
    upstream.push(anthropic_wire::rate_limited(0));
    upstream.push(anthropic_wire::text_message("After the rate limit."));

    let started = tokio::time::Instant::now();
    let (status, attempts, body) = call(&base).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["choices"][0]["message"]["content"], "After the rate limit.");
    assert_eq!(attempts, "2");
    let waited = started.elapsed();
    assert!(
        (Duration::from_millis(500)..Duration::from_secs(3)).contains(&waited),
        "the rate-limit window (0.5–2 s), the past reset instants adding nothing: {waited:?}"
    );
    assert_eq!(upstream.request_count(), 2);
    assert_eq!(upstream.queued(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_spent_retry_budget_answers_the_last_signal() {
    let (upstream, base) = paused_rig().await;
    upstream.push(anthropic_wire::overloaded());
    upstream.push(anthropic_wire::overloaded());

    let (status, attempts, body) = call(&base).await;
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["error"]["type"], "overloaded", "{body}");
    assert_eq!(attempts, "2");
    assert_eq!(upstream.request_count(), 2);
}

/// A response schema to Claude (issue 49, item 9), whichever door it comes in by
/// (`response_format` here, `output_config.format` on `/v1/messages`): described in the
/// system prompt, and the answer validated by the structured-answer gate.
#[tokio::test]
async fn a_response_schema_to_claude_is_described_in_the_prompt_and_its_answer_validated() {
    let upstream = FakeUpstream::start().await;
    let gateway = gateway(&upstream).await;
    let schema = json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]});
    for _ in 0..2 {
        upstream.push(anthropic_wire::text_message(r#"{"city": "Paris"}"#));
    }

    let request = json!({"model": "claude", "max_tokens": 300, "messages": [{"role": "user", "content": "Where?"}],
        "response_format": {"type": "json_schema", "json_schema": {"name": "place", "schema": schema}}});
    let (status, _, body) = post(&gateway, &request).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(parse(&body)["choices"][0]["message"]["content"], r#"{"city":"Paris"}"#);

    let messages = json!({"model": "claude", "max_tokens": 300, "messages": [{"role": "user", "content": "Where?"}],
        "output_config": {"format": {"type": "json_schema", "schema": schema}}});
    let response = reqwest::Client::new().post(gateway.url("/v1/messages")).json(&messages).send().await.unwrap();
    assert_eq!(response.status(), 200);
    let answer: Value = response.json().await.unwrap();
    assert_eq!(answer["content"][0]["text"], r#"{"city":"Paris"}"#, "{answer}");

    for sent in upstream.received().iter().map(|r| r.json()) {
        let system = sent["system"].to_string();
        assert!(system.contains("JSON Schema") && system.contains("\\\"city\\\""), "{sent}");
        assert!(sent.get("output_config").is_none() && sent.get("tools").is_none(), "{sent}");
    }
}
