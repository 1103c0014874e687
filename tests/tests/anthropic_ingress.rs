//! `POST /v1/messages` — the Anthropic Messages API at the gateway's door — through the real
//! `weir` binary, to a model the `openai` provider serves (the fake OpenAI upstream) and to
//! one the `anthropic` provider serves (the fake speaking `weir_tests::anthropic_wire`). On
//! both sides what matters: the Anthropic `message`, events and error envelopes the caller
//! gets, and what each upstream received in its own dialect. The official `anthropic` Python
//! client runs against both models too.

// Test code: a failed step should stop the test with its message.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use serde_json::{Value, json};
use weir_tests::anthropic_wire::{
    self, content_block_start, content_block_stop, empty_text_block, empty_thinking_block, error_event,
    input_json_delta, message_delta, message_start, message_stop, ping, signature_delta, sse_events,
    streamed_tool_use_block, text_block, text_delta, thinking_block, thinking_delta, tool_use_block, usage_json,
};
use weir_tests::python::run_anthropic_client;
use weir_tests::{FakeUpstream, Gateway, openai_wire};

const OPENAI_KEY: &str = "sk-weir-test-secret-0123456789";
const ANTHROPIC_KEY: &str = "sk-ant-weir-test-0123456789";

/// Two upstreams: the fake OpenAI one behind model `gpt`, the Anthropic-wire one behind
/// `claude`.
struct Upstreams {
    openai: FakeUpstream,
    anthropic: FakeUpstream,
}

impl Upstreams {
    async fn start() -> Self {
        Self { openai: FakeUpstream::start().await, anthropic: FakeUpstream::start().await }
    }

    fn config(&self) -> String {
        format!(
            r#"
read_timeout_secs = 5
# The breakpoints these tests read are rendered only under `shared`.
prompt_cache = "shared"

[[model]]
id = "gpt"
provider = "openai"
wire_id = "gpt-4.1"
endpoint = "{openai}"
credential = "weir-test-key"
max_output_tokens = 8000
context_window = 100000
max_retries = 0

[[model]]
id = "claude"
provider = "anthropic"
wire_id = "claude-sonnet-4-5"
endpoint = "http://{anthropic}"
credential = "weir-anthropic-key"
max_output_tokens = 8000
context_window = 200000
max_retries = 0
reasoning = "thinking"
"#,
            openai = self.openai.base_url(),
            anthropic = self.anthropic.addr(),
        )
    }

    async fn gateway(&self) -> Gateway {
        let env = [("WEIR_TEST_KEY", OPENAI_KEY), ("WEIR_ANTHROPIC_KEY", ANTHROPIC_KEY)];
        Gateway::start_with(&self.config(), &env, None).await
    }
}

/// Posts to `/v1/messages` with the headers the official client sends; returns the status,
/// the headers and the body text.
async fn post(gateway: &Gateway, body: impl Into<reqwest::Body>) -> (u16, reqwest::header::HeaderMap, String) {
    let response = reqwest::Client::new()
        .post(gateway.url("/v1/messages"))
        .header("content-type", "application/json")
        .header("x-api-key", "sk-ant-caller-key-not-used")
        .header("anthropic-version", "2023-06-01")
        .header("anthropic-beta", "interleaved-thinking-2025-05-14")
        .body(body)
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    (status, headers, response.text().await.unwrap())
}

async fn post_json(gateway: &Gateway, body: &Value) -> (u16, reqwest::header::HeaderMap, Value) {
    let (status, headers, text) = post(gateway, body.to_string()).await;
    let body = serde_json::from_str(&text).unwrap_or_else(|e| panic!("answer is not JSON ({e}): {text}"));
    (status, headers, body)
}

fn weather_tool() -> Value {
    json!({
        "name": "get_weather",
        "description": "Current weather for a city",
        "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    })
}

fn assert_message(body: &Value, model: &str) {
    assert_eq!(body["type"], "message", "{body}");
    assert_eq!(body["role"], "assistant");
    assert_eq!(body["model"], model, "the catalog id, never the provider's echo");
    assert!(body["id"].as_str().unwrap().starts_with("msg_"), "{body}");
}

fn assert_error(status: u16, body: &Value, expected_status: u16, error_type: &str) {
    assert_eq!(status, expected_status, "{body}");
    assert_eq!(body["type"], "error", "{body}");
    assert_eq!(body["error"]["type"], error_type, "{body}");
    assert!(body["error"]["message"].is_string(), "{body}");
}

/// (event name, block index or null) of every event, and a check that each name equals the
/// data's `type`.
fn sequence(events: &[(String, Value)]) -> Vec<(String, Value)> {
    events
        .iter()
        .map(|(name, data)| {
            assert_eq!(data["type"], name.as_str(), "{data}");
            (name.clone(), data.get("index").cloned().unwrap_or(Value::Null))
        })
        .collect()
}

fn expected(pairs: &[(&str, Option<u32>)]) -> Vec<(String, Value)> {
    pairs.iter().map(|(name, index)| ((*name).to_owned(), index.map_or(Value::Null, |i| json!(i)))).collect()
}

/// The concatenated `field` of every delta of block `index`.
fn block_text(events: &[(String, Value)], index: u32, field: &str) -> String {
    events
        .iter()
        .filter(|(name, data)| name == "content_block_delta" && data["index"] == index)
        .filter_map(|(_, data)| data["delta"][field].as_str())
        .collect()
}

#[tokio::test]
async fn plain_text_through_the_openai_provider() {
    let upstreams = Upstreams::start().await;
    let gateway = upstreams.gateway().await;
    let (status, headers, body) = post_json(
        &gateway,
        &json!({"model": "gpt", "max_tokens": 50, "system": "Be terse.", "metadata": {"user_id": "u-1"},
                "messages": [{"role": "user", "content": "Hello"}]}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_message(&body, "gpt");
    assert_eq!(body["content"], json!([{"type": "text", "text": "echo: Hello"}]));
    assert_eq!(body["stop_reason"], "end_turn");
    assert_eq!(body["stop_sequence"], Value::Null);
    let usage = &body["usage"];
    assert_eq!(usage["output_tokens"], openai_wire::approx_tokens("echo: Hello"), "{usage}");
    assert!(usage["input_tokens"].as_u64().unwrap() > 0, "{usage}");
    assert_eq!(usage["cache_read_input_tokens"], 0);
    assert_eq!(headers["x-weir-provider"], "openai");
    assert_eq!(headers["x-weir-model"], "gpt");
    assert_eq!(headers["x-weir-max-tokens"], "50");

    let sent = &upstreams.openai.received()[0];
    assert_eq!(sent.path, "/v1/chat/completions");
    assert_eq!(
        sent.header("authorization"),
        Some(format!("Bearer {OPENAI_KEY}").as_str()),
        "the gateway's secret; the caller's x-api-key goes nowhere"
    );
    assert_eq!(sent.header("x-api-key"), None);
    let sent = sent.json();
    assert_eq!(sent["model"], "gpt-4.1");
    assert_eq!(sent["max_completion_tokens"], 50, "max_tokens is the declared output");
    assert_eq!(sent["messages"][0]["role"], "system");
    assert_eq!(sent["messages"][1], json!({"role": "user", "content": "Hello"}));
}

#[tokio::test]
async fn plain_text_with_thinking_and_cache_through_the_anthropic_provider() {
    let upstreams = Upstreams::start().await;
    let gateway = upstreams.gateway().await;
    upstreams.anthropic.push(anthropic_wire::message(
        vec![thinking_block("The user greets.", "EqQBCkg"), text_block("Hello from Claude.")],
        "end_turn",
        usage_json(12, 60, 100, 2048),
    ));
    let request = json!({
        "model": "claude",
        "max_tokens": 4096,
        "thinking": {"type": "enabled", "budget_tokens": 2048},
        "system": [{"type": "text", "text": "You are terse.", "cache_control": {"type": "ephemeral"}}],
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "A long document.", "cache_control": {"type": "ephemeral"}}]},
            {"role": "assistant", "content": "Noted."},
            {"role": "user", "content": "Hello"}
        ]
    });
    let (status, headers, body) = post_json(&gateway, &request).await;
    assert_eq!(status, 200, "{body}");
    assert_message(&body, "claude");
    assert_eq!(
        body["content"],
        json!([
            {"type": "thinking", "thinking": "The user greets.", "signature": "EqQBCkg"},
            {"type": "text", "text": "Hello from Claude."}
        ])
    );
    assert_eq!(
        body["usage"],
        json!({"input_tokens": 12, "output_tokens": 60, "cache_creation_input_tokens": 100,
               "cache_read_input_tokens": 2048}),
        "additive, as the provider reported it"
    );
    assert_eq!(headers["x-weir-provider"], "anthropic");
    assert_eq!(headers["x-weir-max-tokens"], "4096", "the thinking budget counts inside max_tokens");

    let sent = &upstreams.anthropic.received()[0];
    assert_eq!(sent.path, "/v1/messages");
    assert_eq!(sent.header("x-api-key"), Some(ANTHROPIC_KEY), "the gateway's key, not the caller's");
    let sent = sent.json();
    assert_eq!(sent["max_tokens"], 4096);
    assert_eq!(sent["thinking"], json!({"type": "enabled", "budget_tokens": 2048}));
    assert_eq!(
        sent["system"],
        json!([{"type": "text", "text": "You are terse.", "cache_control": {"type": "ephemeral"}}])
    );
    let turns = sent["messages"].as_array().unwrap();
    assert_eq!(turns.len(), 3, "{sent}");
    assert!(turns[0]["content"].as_array().unwrap().last().unwrap().get("cache_control").is_some(), "{sent}");
    assert!(turns[2]["content"].as_array().unwrap().iter().all(|b| b.get("cache_control").is_none()), "{sent}");
}

#[tokio::test]
async fn a_tool_use_round_trip_through_the_openai_provider() {
    let upstreams = Upstreams::start().await;
    let gateway = upstreams.gateway().await;
    upstreams.openai.push(openai_wire::tool_call_completion(&[("call_abc", "get_weather", r#"{"city":"Paris"}"#)]));
    let mut messages = vec![json!({"role": "user", "content": "Weather in Paris?"})];
    let request = |messages: &[Value]| {
        json!({"model": "gpt", "max_tokens": 200, "tools": [weather_tool()], "tool_choice": {"type": "any"},
               "messages": messages})
    };
    let (status, _, body) = post_json(&gateway, &request(&messages)).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["stop_reason"], "tool_use");
    let call = body["content"].as_array().unwrap().iter().find(|b| b["type"] == "tool_use").unwrap().clone();
    assert_eq!(call, tool_use_block("call_abc", "get_weather", json!({"city": "Paris"})), "input is an object");
    let sent = upstreams.openai.received()[0].json();
    assert_eq!(sent["tools"][0]["function"]["name"], "get_weather");
    assert_eq!(sent["tools"][0]["function"]["parameters"]["required"], json!(["city"]));
    assert_eq!(sent["tool_choice"], "required", "`any` is OpenAI's `required`");

    messages.push(json!({"role": "assistant", "content": body["content"]}));
    messages.push(json!({"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "call_abc", "content": "18C, sunny"}]}));
    upstreams.openai.push(openai_wire::completion("It is 18C and sunny in Paris."));
    let (status, _, body) = post_json(&gateway, &request(&messages)).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["content"][0]["text"], "It is 18C and sunny in Paris.");
    let sent = upstreams.openai.received()[1].json();
    let turns = sent["messages"].as_array().unwrap();
    let assistant = turns.iter().find(|m| m["role"] == "assistant").unwrap();
    assert_eq!(assistant["tool_calls"][0]["id"], "call_abc");
    assert_eq!(assistant["tool_calls"][0]["function"]["name"], "get_weather");
    let tool = turns.iter().find(|m| m["role"] == "tool").unwrap();
    assert_eq!(tool["tool_call_id"], "call_abc");
    assert!(tool["content"].to_string().contains("18C, sunny"), "{tool}");
}

#[tokio::test]
async fn a_tool_use_round_trip_through_the_anthropic_provider() {
    let upstreams = Upstreams::start().await;
    let gateway = upstreams.gateway().await;
    upstreams.anthropic.push(anthropic_wire::message(
        vec![text_block("Let me check."), tool_use_block("toolu_01A", "get_weather", json!({"city": "Paris"}))],
        "tool_use",
        usage_json(412, 58, 0, 0),
    ));
    let mut messages = vec![json!({"role": "user", "content": "Weather in Paris?"})];
    let request = |messages: &[Value]| json!({"model": "claude", "max_tokens": 200, "tools": [weather_tool()], "messages": messages});
    let (status, _, body) = post_json(&gateway, &request(&messages)).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["stop_reason"], "tool_use");
    assert_eq!(
        body["content"],
        json!([text_block("Let me check."), tool_use_block("toolu_01A", "get_weather", json!({"city": "Paris"}))])
    );

    messages.push(json!({"role": "assistant", "content": body["content"]}));
    messages.push(json!({"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_01A", "is_error": true,
         "content": [{"type": "text", "text": "station offline"}]}]}));
    upstreams.anthropic.push(anthropic_wire::text_message("The station is offline."));
    let (status, _, body) = post_json(&gateway, &request(&messages)).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["content"], json!([text_block("The station is offline.")]));
    let sent = upstreams.anthropic.received()[1].json();
    let turns = sent["messages"].as_array().unwrap();
    assert_eq!(turns.len(), 3, "{sent}");
    let tool_use = turns[1]["content"].as_array().unwrap().iter().find(|b| b["type"] == "tool_use").unwrap();
    assert_eq!(tool_use, &tool_use_block("toolu_01A", "get_weather", json!({"city": "Paris"})));
    assert_eq!(
        turns[2]["content"][0],
        json!({"type": "tool_result", "tool_use_id": "toolu_01A",
               "content": [{"type": "text", "text": "station offline"}], "is_error": true})
    );
}

#[tokio::test]
async fn streamed_text_and_tool_use_through_the_openai_provider() {
    let upstreams = Upstreams::start().await;
    let gateway = upstreams.gateway().await;
    upstreams.openai.push(openai_wire::stream(openai_wire::sse_chunks(&["Hel", "lo", " there"])));
    let (status, headers, body) = post(
        &gateway,
        json!({"model": "gpt", "max_tokens": 50, "stream": true, "messages": [{"role": "user", "content": "Hi"}]})
            .to_string(),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(headers["content-type"], "text/event-stream");
    let events = sse_events(&body);
    assert_eq!(
        sequence(&events),
        expected(&[
            ("message_start", None),
            ("content_block_start", Some(0)),
            ("content_block_delta", Some(0)),
            ("content_block_delta", Some(0)),
            ("content_block_delta", Some(0)),
            ("content_block_stop", Some(0)),
            ("message_delta", None),
            ("message_stop", None),
        ]),
        "{body}"
    );
    assert_eq!(events[0].1["message"]["model"], "gpt");
    assert_eq!(events[0].1["message"]["content"], json!([]));
    assert_eq!(events[1].1["content_block"], json!({"type": "text", "text": ""}));
    assert_eq!(block_text(&events, 0, "text"), "Hello there");
    assert_eq!(events[6].1["delta"]["stop_reason"], "end_turn");
    let output: u64 = ["Hel", "lo", " there"].into_iter().map(openai_wire::approx_tokens).sum();
    assert_eq!(events[6].1["usage"]["output_tokens"], output, "the usage the upstream reported last");
    assert_eq!(upstreams.openai.received()[0].json()["stream"], true);

    upstreams.openai.push(openai_wire::stream(openai_wire::sse_tool_call_chunks(
        "call_1",
        "get_weather",
        &["{\"city\":", "\"Paris\"}"],
    )));
    let request = json!({"model": "gpt", "max_tokens": 50, "stream": true, "tools": [weather_tool()],
                         "messages": [{"role": "user", "content": "Weather in Paris?"}]});
    let (status, _, body) = post(&gateway, request.to_string()).await;
    assert_eq!(status, 200, "{body}");
    let events = sse_events(&body);
    assert_eq!(
        sequence(&events),
        expected(&[
            ("message_start", None),
            ("content_block_start", Some(0)),
            ("content_block_delta", Some(0)),
            ("content_block_delta", Some(0)),
            ("content_block_stop", Some(0)),
            ("message_delta", None),
            ("message_stop", None),
        ]),
        "{body}"
    );
    assert_eq!(
        events[1].1["content_block"],
        json!({"type": "tool_use", "id": "call_1", "name": "get_weather", "input": {}})
    );
    let arguments: Value = serde_json::from_str(&block_text(&events, 0, "partial_json")).unwrap();
    assert_eq!(arguments, json!({"city": "Paris"}));
    assert_eq!(events[5].1["delta"]["stop_reason"], "tool_use");
}

#[tokio::test]
async fn streamed_thinking_text_and_tool_use_through_the_anthropic_provider() {
    let upstreams = Upstreams::start().await;
    let gateway = upstreams.gateway().await;
    upstreams.anthropic.push(anthropic_wire::stream(vec![
        message_start(25, 0, 2048),
        content_block_start(0, &empty_thinking_block()),
        thinking_delta(0, "Paris, "),
        thinking_delta(0, "check weather."),
        signature_delta(0, "EqQBCkg"),
        content_block_stop(0),
        content_block_start(1, &empty_text_block()),
        ping(),
        text_delta(1, "Let me check."),
        content_block_stop(1),
        content_block_start(2, &streamed_tool_use_block("toolu_01A", "get_weather")),
        input_json_delta(2, ""),
        input_json_delta(2, "{\"city\": \"Pa"),
        input_json_delta(2, "ris\"}"),
        content_block_stop(2),
        message_delta("tool_use", None, 42),
        message_stop(),
    ]));
    let request = json!({"model": "claude", "max_tokens": 4096, "stream": true, "tools": [weather_tool()],
                         "thinking": {"type": "enabled", "budget_tokens": 1024},
                         "messages": [{"role": "user", "content": "Weather in Paris?"}]});
    let (status, _, body) = post(&gateway, request.to_string()).await;
    assert_eq!(status, 200, "{body}");
    let events = sse_events(&body);
    let sequence = sequence(&events);
    assert_eq!(sequence.first().unwrap().0, "message_start", "{body}");
    assert_eq!(sequence.last().unwrap().0, "message_stop", "{body}");
    let starts: Vec<(Value, Value)> = events
        .iter()
        .filter(|(name, _)| name == "content_block_start")
        .map(|(_, data)| (data["index"].clone(), data["content_block"]["type"].clone()))
        .collect();
    assert_eq!(starts, [(json!(0), json!("thinking")), (json!(1), json!("text")), (json!(2), json!("tool_use"))]);
    let stops: Vec<&Value> =
        events.iter().filter(|(name, _)| name == "content_block_stop").map(|(_, data)| &data["index"]).collect();
    assert_eq!(stops, [&json!(0), &json!(1), &json!(2)], "every block is closed once, in order");
    assert_eq!(block_text(&events, 0, "thinking"), "Paris, check weather.");
    assert_eq!(block_text(&events, 0, "signature"), "EqQBCkg");
    assert_eq!(block_text(&events, 1, "text"), "Let me check.");
    let input: Value = serde_json::from_str(&block_text(&events, 2, "partial_json")).unwrap();
    assert_eq!(input, json!({"city": "Paris"}));
    let start = &events[0].1["message"];
    assert_eq!(start["usage"]["input_tokens"], 25, "the input count rides in message_start");
    assert_eq!(start["usage"]["cache_read_input_tokens"], 2048);
    let delta = &events[events.len() - 2].1;
    assert_eq!(delta["type"], "message_delta");
    assert_eq!(delta["delta"]["stop_reason"], "tool_use");
    assert_eq!(delta["usage"]["output_tokens"], 42);

    let sent = upstreams.anthropic.received()[0].json();
    assert_eq!(sent["stream"], true);
    assert_eq!(sent["thinking"], json!({"type": "enabled", "budget_tokens": 1024}));
}

#[tokio::test]
async fn a_failure_after_output_is_an_error_event_and_no_message_stop() {
    let upstreams = Upstreams::start().await;
    let gateway = upstreams.gateway().await;
    upstreams.anthropic.push(anthropic_wire::stream(vec![
        message_start(10, 0, 0),
        content_block_start(0, &empty_text_block()),
        text_delta(0, "Partial"),
        error_event("overloaded_error", anthropic_wire::OVERLOADED_MESSAGE),
    ]));
    let request = json!({"model": "claude", "max_tokens": 100, "stream": true,
                         "messages": [{"role": "user", "content": "Hi"}]});
    let (status, _, body) = post(&gateway, request.to_string()).await;
    assert_eq!(status, 200, "the stream had begun: {body}");
    let events = sse_events(&body);
    let names: Vec<&str> = events.iter().map(|(name, _)| name.as_str()).collect();
    assert_eq!(names, ["message_start", "content_block_start", "content_block_delta", "error"], "{body}");
    let error = &events[3].1;
    assert_eq!(error["type"], "error");
    assert_eq!(error["error"]["type"], "api_error", "an overload after output is not retryable here: {error}");
    assert_eq!(error["error"]["weir_category"], "upstream_error");
    let message = error["error"]["message"].as_str().unwrap();
    assert!(message.contains("the stream failed after"), "Weir's own message: {message}");
}

#[tokio::test]
async fn upstream_and_catalog_errors_come_in_the_anthropic_envelope() {
    let upstreams = Upstreams::start().await;
    let gateway = upstreams.gateway().await;
    let hello =
        |model: &str| json!({"model": model, "max_tokens": 50, "messages": [{"role": "user", "content": "Hi"}]});

    upstreams.anthropic.push(anthropic_wire::authentication_error());
    let (status, headers, body) = post_json(&gateway, &hello("claude")).await;
    assert_error(status, &body, 424, "authentication_error");
    assert_eq!(body["error"]["weir_category"], "authentication_failed");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(!message.contains("invalid x-api-key"), "no raw provider text: {message}");
    assert_eq!(headers["x-weir-provider"], "anthropic", "errors carry the stamp");

    upstreams.openai.push(openai_wire::invalid_api_key());
    let (status, _, body) = post_json(&gateway, &hello("gpt")).await;
    assert_error(status, &body, 424, "authentication_error");

    let (status, _, body) = post_json(&gateway, &hello("no-such-model")).await;
    assert_error(status, &body, 404, "not_found_error");
    assert!(body["error"]["message"].as_str().unwrap().contains("no-such-model"), "{body}");

    // A streamed call that fails before any output answers with the status and envelope.
    upstreams.anthropic.push(anthropic_wire::authentication_error());
    let mut streamed = hello("claude");
    streamed["stream"] = json!(true);
    let (status, _, body) = post_json(&gateway, &streamed).await;
    assert_error(status, &body, 424, "authentication_error");
}

#[tokio::test]
async fn malformed_requests_are_invalid_request_errors_naming_the_problem() {
    let upstreams = Upstreams::start().await;
    let gateway = upstreams.gateway().await;
    let (status, _, text) = post(&gateway, "{\"model\": ").await;
    let body: Value = serde_json::from_str(&text).unwrap();
    assert_error(status, &body, 400, "invalid_request_error");
    assert!(body["error"]["message"].as_str().unwrap().starts_with("invalid body"), "{body}");

    let user = json!([{"role": "user", "content": "Hi"}]);
    let cases = [
        (json!({"model": "gpt", "messages": user}), "`max_tokens` is required"),
        (
            json!({"model": "gpt", "max_tokens": 10, "messages": [{"role": "system", "content": [{"type": "image"}]}]}),
            "a system message holds text blocks only",
        ),
        (json!({"model": "gpt", "max_tokens": 10, "messages": [{"role": "tool", "content": "x"}]}), "unknown role"),
        (json!({"model": "gpt", "max_tokens": 10, "top_j": 40, "messages": user}), "unknown field `top_j`"),
        (
            json!({"model": "claude", "max_tokens": 2000, "thinking": {"type": "enabled", "budget_tokens": 4000},
                   "messages": user}),
            "less than `max_tokens`",
        ),
    ];
    for (request, expected) in cases {
        let (status, _, body) = post_json(&gateway, &request).await;
        assert_error(status, &body, 400, "invalid_request_error");
        let message = body["error"]["message"].as_str().unwrap();
        assert!(message.contains(expected), "{request}: {message:?} should mention {expected:?}");
    }
    assert_eq!(upstreams.openai.request_count() + upstreams.anthropic.request_count(), 0, "nothing went upstream");
}

#[tokio::test]
async fn the_official_anthropic_python_client_through_both_providers() {
    let upstreams = Upstreams::start().await;
    let gateway = upstreams.gateway().await;
    let base_url = gateway.base_url.clone();

    // The openai provider: plain, tools (a call, then the answer to its result), a streamed
    // text, a streamed tool call.
    upstreams.openai.push(openai_wire::completion("Paris."));
    upstreams.openai.push(openai_wire::tool_call_completion(&[("call_abc", "get_weather", r#"{"city":"Paris"}"#)]));
    upstreams.openai.push(openai_wire::completion("It is 18C and sunny."));
    upstreams.openai.push(openai_wire::stream(openai_wire::sse_chunks(&["One, ", "two, ", "three."])));
    upstreams.openai.push(openai_wire::stream(openai_wire::sse_tool_call_chunks(
        "call_s",
        "get_weather",
        &["{\"city\":", "\"Paris\"}"],
    )));
    let base = base_url.clone();
    let lines =
        tokio::task::spawn_blocking(move || run_anthropic_client(&base, "gpt", "plain,tools,stream,stream_tools"))
            .await
            .unwrap();
    assert_eq!(lines[0]["text"], "Paris.");
    assert_eq!(lines[0]["model"], "gpt");
    assert_eq!(lines[0]["stop_reason"], "end_turn");
    assert_eq!(lines[1]["tool_calls"], json!([{"id": "call_abc", "name": "get_weather", "input": {"city": "Paris"}}]));
    assert_eq!(lines[1]["stop_reason"], "tool_use");
    assert_eq!(lines[1]["answer"], "It is 18C and sunny.");
    assert_eq!(lines[2]["text"], "One, two, three.");
    assert_eq!(lines[2]["final_text"], "One, two, three.");
    assert_eq!(lines[2]["stop_reason"], "end_turn");
    assert_eq!(lines[2]["events"][0], "message_start");
    assert_eq!(lines[3]["tool_calls"], json!([{"id": "call_s", "name": "get_weather", "input": {"city": "Paris"}}]));
    assert_eq!(lines[3]["stop_reason"], "tool_use");
    let tool_turn = upstreams.openai.received()[2].json();
    let tool = tool_turn["messages"].as_array().unwrap().iter().find(|m| m["role"] == "tool").cloned().unwrap();
    assert_eq!(tool["tool_call_id"], "call_abc");

    // The anthropic provider: the same steps, scripted in its own wire.
    upstreams.anthropic.push(anthropic_wire::text_message("Paris."));
    upstreams.anthropic.push(anthropic_wire::message(
        vec![tool_use_block("toolu_01A", "get_weather", json!({"city": "Paris"}))],
        "tool_use",
        usage_json(50, 20, 0, 0),
    ));
    upstreams.anthropic.push(anthropic_wire::text_message("It is 18C and sunny."));
    upstreams.anthropic.push(anthropic_wire::stream(anthropic_wire::sse_text_events(
        &["One, ", "two."],
        "end_turn",
        9,
        4,
    )));
    upstreams.anthropic.push(anthropic_wire::stream(vec![
        message_start(30, 0, 0),
        content_block_start(0, &streamed_tool_use_block("toolu_02B", "get_weather")),
        input_json_delta(0, "{\"city\":"),
        input_json_delta(0, " \"Paris\"}"),
        content_block_stop(0),
        message_delta("tool_use", None, 12),
        message_stop(),
    ]));
    let lines = tokio::task::spawn_blocking(move || {
        run_anthropic_client(&base_url, "claude", "plain,tools,stream,stream_tools")
    })
    .await
    .unwrap();
    assert_eq!(lines[0]["text"], "Paris.");
    assert_eq!(lines[0]["usage"]["input_tokens"], 10);
    assert_eq!(lines[1]["tool_calls"], json!([{"id": "toolu_01A", "name": "get_weather", "input": {"city": "Paris"}}]));
    assert_eq!(lines[1]["answer"], "It is 18C and sunny.");
    assert_eq!(lines[2]["text"], "One, two.");
    assert_eq!(lines[2]["usage"]["input_tokens"], 9);
    assert_eq!(lines[2]["usage"]["output_tokens"], 4);
    assert_eq!(lines[3]["tool_calls"], json!([{"id": "toolu_02B", "name": "get_weather", "input": {"city": "Paris"}}]));
    let sent = upstreams.anthropic.received()[2].json();
    assert_eq!(sent["messages"][2]["content"][0]["type"], "tool_result");
    assert_eq!(sent["messages"][2]["content"][0]["tool_use_id"], "toolu_01A");
}
