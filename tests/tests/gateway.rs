//! The real `weir` binary over HTTP, in front of the fake OpenAI upstream: what a
//! client sends, what the upstream receives, what the client gets back.

// Test code: a failed step should stop the test with its message.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use serde_json::{Value, json};
use weir_tests::openai_wire;
use weir_tests::python::run_openai_client;
use weir_tests::{FakeUpstream, Gateway, Scripted, run_cli};

const SECRET: &str = "sk-weir-test-secret-0123456789";

/// A catalog routing to the fake upstream: an `openai` model with a declared output
/// budget, its own credential and no retries, an `openai-compatible` one with neither, and one
/// whose provider does not exist.
fn config(upstream: &FakeUpstream) -> String {
    format!(
        r#"
read_timeout_secs = 1

[[model]]
id = "chat"
provider = "openai"
wire_id = "gpt-4.1"
endpoint = "{url}"
credential = "weir-test-key"
max_output_tokens = 1000
context_window = 10000
output_tokens = 200
# One scripted failure per call here: retries have their own tests.
max_retries = 0

[[model]]
id = "local"
provider = "openai-compatible"
wire_id = "qwen3"
endpoint = "{url}"
max_output_tokens = 500
context_window = 10000

[[model]]
id = "ghost"
provider = "no-such-provider"
endpoint = "{url}"
max_output_tokens = 10
context_window = 10
"#,
        url = upstream.base_url()
    )
}

async fn gateway(upstream: &FakeUpstream) -> Gateway {
    Gateway::start_with(&config(upstream), &[("WEIR_TEST_KEY", SECRET)], None).await
}

async fn post(gateway: &Gateway, body: &Value) -> (u16, Value, reqwest::header::HeaderMap) {
    let response = reqwest::Client::new().post(gateway.url("/v1/chat/completions")).json(body).send().await.unwrap();
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    (status, response.json().await.unwrap(), headers)
}

async fn get(gateway: &Gateway, path: &str) -> Value {
    reqwest::get(gateway.url(path)).await.unwrap().json().await.unwrap()
}

fn hello(model: &str) -> Value {
    json!({"model": model, "max_tokens": 50, "messages": [{"role": "user", "content": "Hello"}]})
}

fn assert_error(body: &Value, category: &str) {
    assert_eq!(body["error"]["type"], category, "{body}");
    assert_eq!(body["error"]["code"], category, "{body}");
    assert!(body["error"]["message"].is_string(), "{body}");
    assert!(body["error"].get("param").is_some(), "OpenAI's error shape: {body}");
}

#[tokio::test]
async fn a_completion_with_tools_round_trips() {
    let upstream = FakeUpstream::start().await;
    let gateway = gateway(&upstream).await;
    upstream.push(openai_wire::tool_call_completion(&[("call_abc", "get_weather", r#"{"city":"Paris"}"#)]));

    let request = json!({
        "model": "chat",
        "max_tokens": 50,
        "messages": [
            {"role": "system", "content": "Be terse."},
            {"role": "user", "content": "Weather in Paris?"}
        ],
        "tools": [{"type": "function", "function": {
            "name": "get_weather", "description": "Current weather",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}],
        "tool_choice": "auto"
    });
    let (status, body, headers) = post(&gateway, &request).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["object"], "chat.completion");
    assert_eq!(body["model"], "chat", "the catalog id, never the provider's echo");
    let choice = &body["choices"][0];
    assert_eq!(choice["finish_reason"], "tool_calls");
    assert_eq!(choice["message"]["tool_calls"][0]["id"], "call_abc");
    assert_eq!(choice["message"]["tool_calls"][0]["function"]["name"], "get_weather");
    assert_eq!(choice["message"]["tool_calls"][0]["function"]["arguments"], r#"{"city":"Paris"}"#);
    assert!(body["usage"]["prompt_tokens"].as_u64().unwrap() > 0, "{body}");
    assert_eq!(headers["x-weir-provider"], "openai");

    let received = upstream.received();
    assert_eq!(received.len(), 1);
    assert_eq!(received[0].path, "/v1/chat/completions");
    assert_eq!(received[0].header("authorization"), Some(format!("Bearer {SECRET}").as_str()));
    let sent = received[0].json();
    assert_eq!(sent["model"], "gpt-4.1", "the wire id");
    assert_eq!(sent["max_completion_tokens"], 50);
    assert_eq!(sent["tools"][0]["function"]["name"], "get_weather");
    assert_eq!(sent["messages"][0], json!({"role": "system", "content": "Be terse."}));

    // The tool result goes back as a `tool` message.
    let follow_up = json!({
        "model": "chat", "max_tokens": 50,
        "messages": [
            {"role": "user", "content": "Weather in Paris?"},
            {"role": "assistant", "content": null, "tool_calls": [
                {"id": "call_abc", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}}]},
            {"role": "tool", "tool_call_id": "call_abc", "content": "18C, sunny"}
        ]
    });
    let (status, body, _) = post(&gateway, &follow_up).await;
    assert_eq!(status, 200, "{body}");
    let sent = upstream.received()[1].json();
    assert_eq!(sent["messages"][2], json!({"role": "tool", "tool_call_id": "call_abc", "content": "18C, sunny"}));
}

#[tokio::test]
async fn the_output_budget_comes_from_the_request_or_the_catalog_never_a_default() {
    let upstream = FakeUpstream::start().await;
    let gateway = gateway(&upstream).await;

    let mut request = hello("chat");
    request.as_object_mut().unwrap().remove("max_tokens");
    let (status, body, _) = post(&gateway, &request).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(upstream.received()[0].json()["max_completion_tokens"], 200, "the catalog's output_tokens");

    let mut huge = hello("chat");
    huge["max_tokens"] = json!(50_000);
    post(&gateway, &huge).await;
    assert_eq!(upstream.received()[1].json()["max_completion_tokens"], 1000, "clamped at max_output_tokens");

    let mut undeclared = hello("local");
    undeclared.as_object_mut().unwrap().remove("max_tokens");
    let (status, body, _) = post(&gateway, &undeclared).await;
    assert_eq!(status, 400);
    assert_error(&body, "invalid_request");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains("max_tokens") && message.contains("output_tokens"), "{message}");
    assert_eq!(upstream.request_count(), 2, "nothing was sent upstream");
}

/// Each upstream failure, in its real wire form, reaches the caller as a stable
/// category and status with a safe message: never the provider's own words.
#[tokio::test]
async fn every_upstream_error_class_maps_to_a_safe_category() {
    let upstream = FakeUpstream::start().await;
    let gateway = gateway(&upstream).await;
    let json_error = |status, body: Value| openai_wire::json_response(status, &body);
    let cases: Vec<(Scripted, u16, &str)> = vec![
        (openai_wire::insufficient_quota(), 402, "provider_credit_exhausted"),
        (openai_wire::rate_limited(7), 429, "rate_limited"),
        (openai_wire::invalid_api_key(), 424, "authentication_failed"),
        (openai_wire::model_not_found("gpt-4.1"), 404, "model_not_found"),
        (openai_wire::context_length_exceeded(), 400, "context_overflow"),
        (
            openai_wire::error(
                400,
                "invalid_request_error",
                Some("unsupported_parameter"),
                "Unsupported parameter: 'max_tokens'",
            ),
            400,
            "invalid_request",
        ),
        (
            json_error(
                400,
                json!({"error": {"message": "SECRET-PROSE filtered by policy", "type": null, "param": "prompt", "code": "content_filter", "status": 400}}),
            ),
            422,
            "refused",
        ),
        (openai_wire::server_error(), 502, "upstream_unavailable"),
        (openai_wire::overloaded_503(), 502, "upstream_unavailable"),
        (openai_wire::bad_gateway_html(), 502, "upstream_unavailable"),
        (
            json_error(
                529,
                json!({"type": "error", "error": {"type": "overloaded_error", "message": "SECRET-PROSE overloaded"}}),
            ),
            503,
            "overloaded",
        ),
        (json_error(418, json!({"error": {"message": "SECRET-PROSE teapot"}})), 502, "upstream_error"),
    ];
    for (scripted, status, category) in cases {
        let upstream_text = scripted_text(&scripted);
        upstream.push(scripted);
        let (got_status, body, _) = post(&gateway, &hello("chat")).await;
        assert_eq!(got_status, status, "{category}: {body}");
        assert_error(&body, category);
        let answer = body.to_string();
        assert!(!answer.contains("SECRET-PROSE"), "raw upstream text leaked: {answer}");
        if let Some(text) = upstream_text {
            assert!(!answer.contains(&text), "raw upstream message {text:?} leaked: {answer}");
        }
        assert!(body["error"]["message"].as_str().unwrap().contains("`chat`"), "names the model: {body}");
    }
    // The raw detail is for the operator: it is in the server log.
    gateway.wait_for_stderr("You exceeded your current quota", Duration::from_secs(5)).await;
}

/// The upstream's own error message, if the scripted body has one.
fn scripted_text(scripted: &Scripted) -> Option<String> {
    let Scripted::Respond { body, .. } = scripted else {
        return None;
    };
    let value: Value = serde_json::from_slice(body).ok()?;
    value.pointer("/error/message").and_then(Value::as_str).map(str::to_owned)
}

#[tokio::test]
async fn a_missing_credential_fails_naming_its_id_and_sends_nothing() {
    let upstream = FakeUpstream::start().await;
    let gateway = Gateway::start_with(&config(&upstream), &[], None).await;
    let (status, body, _) = post(&gateway, &hello("chat")).await;
    assert_eq!(status, 424);
    assert_error(&body, "credential_missing");
    // The caller learns the credential is unset; which one, and where it was looked
    // for, is the operator's to read in the log.
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains("credential") && message.contains("not set"), "{message}");
    assert!(!message.contains("weir-test-key") && !message.contains("WEIR_TEST_KEY"), "{message}");
    let log = gateway.wait_for_stderr("WEIR_TEST_KEY", std::time::Duration::from_secs(5)).await;
    assert!(log.contains("weir-test-key"), "{log}");
    assert_eq!(upstream.request_count(), 0);

    // A provider whose credential is optional calls without one.
    let (status, body, _) = post(&gateway, &hello("local")).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["choices"][0]["message"]["content"], "echo: Hello");
    let received = upstream.received();
    assert_eq!(received[0].header("authorization"), None);
    assert_eq!(received[0].json()["max_tokens"], 50, "openai-compatible sends max_tokens");
}

#[tokio::test]
async fn request_errors_answer_in_openai_shape() {
    let upstream = FakeUpstream::start().await;
    let gateway = gateway(&upstream).await;

    let (status, body, _) = post(&gateway, &hello("no-such-model")).await;
    assert_eq!(status, 404);
    assert_error(&body, "model_not_found");

    let (status, body, _) = post(&gateway, &hello("ghost")).await;
    assert_eq!(status, 503);
    assert_error(&body, "provider_unavailable");

    let mut several = hello("chat");
    several["n"] = json!(2);
    let (status, body, _) = post(&gateway, &several).await;
    assert_eq!(status, 400);
    assert_error(&body, "invalid_request");

    let response = reqwest::Client::new()
        .post(gateway.url("/v1/chat/completions"))
        .header("content-type", "application/json")
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 400);
    assert_error(&response.json().await.unwrap(), "invalid_request");
    assert_eq!(upstream.request_count(), 0);
}

#[tokio::test]
async fn transport_failures_are_typed() {
    let upstream = FakeUpstream::start().await;
    let gateway = gateway(&upstream).await;

    upstream.push(Scripted::Drop);
    let (status, body, _) = post(&gateway, &hello("chat")).await;
    assert_eq!(status, 502, "{body}");
    assert_error(&body, "upstream_unavailable");

    // read_timeout_secs = 1 in the config; the upstream stays silent for 3 s.
    upstream.push(openai_wire::completion("late").after(Duration::from_secs(3)));
    let (status, body, _) = post(&gateway, &hello("chat")).await;
    assert_eq!(status, 504, "{body}");
    assert_error(&body, "timeout");

    // The gateway is healthy afterwards.
    let (status, _, _) = post(&gateway, &hello("chat")).await;
    assert_eq!(status, 200);
    assert_eq!(get(&gateway, "/health").await["status"], "ok");
}

/// The arena of the gateway's allocator would otherwise be folded into 2 MiB pages by
/// `khugepaged` where the kernel's THP mode is `madvise` or `always`, and the process's
/// resident memory would grow in 2 MiB steps (see `refuse_transparent_huge_pages`).
#[cfg(target_os = "linux")]
#[tokio::test]
async fn the_gateway_process_refuses_transparent_huge_pages() {
    let upstream = FakeUpstream::start().await;
    let gateway = gateway(&upstream).await;
    let status = std::fs::read_to_string(format!("/proc/{}/status", gateway.pid())).unwrap();
    let line = status.lines().find(|line| line.starts_with("THP_enabled:")).expect("THP_enabled in /proc/PID/status");
    assert_eq!(line.split_whitespace().nth(1), Some("0"), "{line}");
}

#[tokio::test]
async fn a_broken_component_is_reported_and_every_other_provider_keeps_working() {
    let upstream = FakeUpstream::start().await;
    let folder = tempfile::tempdir().unwrap();
    let broken = folder.path().join("broken.wasm");
    std::fs::write(&broken, b"\0asm but not really").unwrap();
    let gateway = Gateway::start_with(&config(&upstream), &[("WEIR_TEST_KEY", SECRET)], Some(folder.path())).await;

    gateway.wait_for_stderr("broken.wasm", Duration::from_secs(5)).await;
    let providers = get(&gateway, "/v1/providers").await;
    let rejected = providers["rejected"].as_array().unwrap();
    assert_eq!(rejected.len(), 1, "{providers}");
    assert_eq!(rejected[0]["path"], broken.display().to_string());
    assert!(rejected[0]["reason"].as_str().unwrap().contains("not a valid component"), "{providers}");
    assert_eq!(get(&gateway, "/health").await["rejected_components"], 1);

    let (status, body, _) = post(&gateway, &hello("chat")).await;
    assert_eq!(status, 200, "{body}");
}

#[tokio::test]
async fn a_component_dropped_into_the_folder_is_listed_after_restart() {
    let upstream = FakeUpstream::start().await;
    let folder = tempfile::tempdir().unwrap();
    let config = config(&upstream);
    let source_of = |models: &Value| {
        models["data"].as_array().unwrap().iter().find(|m| m["id"] == "chat").unwrap()["weir"]["provider_source"]
            .clone()
    };

    let before = Gateway::start_with(&config, &[("WEIR_TEST_KEY", SECRET)], Some(folder.path())).await;
    assert_eq!(source_of(&get(&before, "/v1/models").await), "embedded:openai");
    drop(before);

    let dropped = folder.path().join("openai-custom.wasm");
    let bytes = weir_host::plugin::embedded_components()[0].bytes;
    std::fs::write(&dropped, bytes).unwrap();

    // Only a file the operator vouched for (its digest allow-listed) may replace an
    // embedded provider key.
    let config = format!("allowed_digests = [\"{}\"]\n{config}", weir_host::plugin::component_digest(bytes));
    let after = Gateway::start_with(&config, &[("WEIR_TEST_KEY", SECRET)], Some(folder.path())).await;
    let models = get(&after, "/v1/models").await;
    assert_eq!(source_of(&models), dropped.display().to_string());
    let (status, _, _) = post(&after, &hello("chat")).await;
    assert_eq!(status, 200, "the dropped component serves calls");

    let output = run_cli(
        &[
            "providers",
            "--config",
            after.config_path().to_str().unwrap(),
            "--providers-dir",
            folder.path().to_str().unwrap(),
        ],
        &[],
    );
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let table = String::from_utf8_lossy(&output.stdout);
    assert!(table.contains(&dropped.display().to_string()), "{table}");
    assert!(table.lines().any(|line| line.starts_with("openai ") && line.contains(" file ")), "{table}");
}

#[tokio::test]
async fn the_official_openai_python_client_gets_text_tool_calls_and_usage() {
    let upstream = FakeUpstream::start().await;
    let gateway = gateway(&upstream).await;
    let base_url = gateway.url("/v1");

    let plain = run_openai_client(&base_url, "chat", "plain");
    assert_eq!(plain[0]["text"], "echo: What is the capital of France?");
    assert_eq!(plain[0]["finish_reason"], "stop");
    assert_eq!(
        plain[0]["usage"]["completion_tokens"],
        openai_wire::approx_tokens("echo: What is the capital of France?")
    );
    assert!(plain[0]["usage"]["prompt_tokens"].as_u64().unwrap() > 0);

    upstream.push(openai_wire::tool_call_completion(&[("call_abc", "get_weather", r#"{"city":"Paris"}"#)]));
    let tools = run_openai_client(&base_url, "chat", "tools");
    assert_eq!(
        tools[0]["tool_calls"],
        json!([{"id": "call_abc", "name": "get_weather", "arguments": {"city": "Paris"}}])
    );
    assert_eq!(tools[0]["finish_reason"], "tool_calls");
    assert_eq!(upstream.received()[1].json()["tools"][0]["function"]["name"], "get_weather");
}
