//! The Python provider (`providers/hermes-py`, built by `build.rs` with componentize-py)
//! dropped into a providers folder of the real `weir` binary, in front of the fake
//! upstream playing a vLLM without a tool parser: tool-call markup and `<think>` in
//! the content reach the caller as OpenAI `tool_calls` and `reasoning_content`, the
//! upstream gets the exact budget and wire id, a 429 is normalized, and the
//! component is listed with its file. Its stream decoder is covered by the codec's
//! unit tests (`python_codec.rs`): the gateway does not serve streams yet.

// Test code: a failed step should stop the test with its message.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};

use bytes::Bytes;
use serde_json::{Value, json};
use weir_tests::gateway::precompile;
use weir_tests::openai_wire::{self, COMPLETION_ID, MODEL};
use weir_tests::{FakeUpstream, Gateway, Scripted};

/// A fresh providers folder holding only the Python component (compiled once into the
/// shared artifact cache first: see [`precompile`]).
fn providers_folder() -> (tempfile::TempDir, PathBuf) {
    precompile(Path::new(env!("WEIR_HERMES_PY_WASM")));
    let folder = tempfile::tempdir().unwrap();
    let file = folder.path().join("hermes_text.wasm");
    std::fs::copy(env!("WEIR_HERMES_PY_WASM"), &file).unwrap();
    (folder, file)
}

fn config(upstream: &FakeUpstream) -> String {
    format!(
        r#"
[[model]]
id = "hermes"
provider = "hermes-text"
wire_id = "Qwen/Qwen3-8B"
endpoint = "{url}"
# A dropped (untrusted) component's default credential id is never used: the entry names it.
credential = "hermes-text-api-key"
max_output_tokens = 2000
context_window = 32000
# One scripted answer per call: retries have their own tests.
max_retries = 0
"#,
        url = upstream.base_url()
    )
}

async fn gateway(upstream: &FakeUpstream, folder: &Path) -> Gateway {
    Gateway::start_with(&config(upstream), &[], Some(folder)).await
}

async fn post(gateway: &Gateway, body: &Value) -> (u16, Value, reqwest::header::HeaderMap) {
    let response = reqwest::Client::new().post(gateway.url("/v1/chat/completions")).json(body).send().await.unwrap();
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    (status, response.json().await.unwrap(), headers)
}

fn weather_request() -> Value {
    json!({
        "model": "hermes",
        "max_tokens": 321,
        "messages": [{"role": "user", "content": "Weather in Paris?"}],
        "tools": [{"type": "function", "function": {
            "name": "get_weather", "description": "Current weather",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
    })
}

#[tokio::test]
async fn markup_tool_calls_and_think_come_back_as_openai_fields() {
    let upstream = FakeUpstream::start().await;
    let (folder, _) = providers_folder();
    let gateway = gateway(&upstream, folder.path()).await;
    let content = "<think>\nThe user wants the weather.\n</think>\n\nLet me check.\n<tool_call>\n\
                   {\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>";
    let message = json!({"role": "assistant", "content": content, "tool_calls": [], "reasoning_content": null});
    let usage = openai_wire::usage_json(40, 30, 0, 0);
    upstream.push(openai_wire::json_response(
        200,
        &openai_wire::completion_body(COMPLETION_ID, MODEL, message, "stop", usage),
    ));

    let (status, body, headers) = post(&gateway, &weather_request()).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(headers["x-weir-provider"], "hermes-text");
    let choice = &body["choices"][0];
    assert_eq!(choice["finish_reason"], "tool_calls", "{body}");
    let message = &choice["message"];
    assert_eq!(message["content"], "Let me check.", "the markup is stripped: {body}");
    assert_eq!(message["reasoning_content"], "The user wants the weather.", "{body}");
    let call = &message["tool_calls"][0];
    assert_eq!(call["type"], "function");
    assert_eq!(call["function"]["name"], "get_weather");
    let arguments: Value = serde_json::from_str(call["function"]["arguments"].as_str().unwrap()).unwrap();
    assert_eq!(arguments, json!({"city": "Paris"}));
    assert!(call["id"].as_str().unwrap().starts_with("call_"), "{body}");

    // What the upstream received: the exact budget the gateway reserved, the wire id.
    let received = upstream.received();
    assert_eq!(received.len(), 1);
    assert_eq!(received[0].path, "/v1/chat/completions");
    assert_eq!(received[0].header("authorization"), None, "no key configured, none required");
    let sent = received[0].json();
    assert_eq!(sent["model"], "Qwen/Qwen3-8B");
    assert_eq!(sent["max_tokens"], 321);
    assert_eq!(headers["x-weir-max-tokens"].to_str().unwrap(), "321");
    assert_eq!(sent["tools"][0]["function"]["name"], "get_weather");
    assert_eq!(sent["messages"], json!([{"role": "user", "content": "Weather in Paris?"}]));
    assert_eq!(upstream.queued(), 0);
}

#[tokio::test]
async fn a_vllm_429_reaches_the_caller_as_rate_limited() {
    let upstream = FakeUpstream::start().await;
    let (folder, _) = providers_folder();
    let gateway = gateway(&upstream, folder.path()).await;
    let body = openai_wire::vllm_error_body(429, "SECRET-PROSE too many requests");
    upstream.push(Scripted::Respond {
        status: 429,
        headers: vec![("content-type".into(), "application/json".into()), ("retry-after".into(), "1".into())],
        body: Bytes::from(body.to_string()),
    });

    let (status, body, headers) = post(&gateway, &weather_request()).await;
    assert_eq!(status, 429, "{body}");
    assert_eq!(body["error"]["type"], "rate_limited", "{body}");
    assert_eq!(body["error"]["code"], "rate_limited", "{body}");
    assert!(!body.to_string().contains("SECRET-PROSE"), "raw upstream text leaked: {body}");
    assert_eq!(headers["x-weir-provider"], "hermes-text");
    assert_eq!(upstream.queued(), 0);
}

#[tokio::test]
async fn the_component_is_listed_with_its_file() {
    let upstream = FakeUpstream::start().await;
    let (folder, file) = providers_folder();
    let gateway = gateway(&upstream, folder.path()).await;
    let providers: Value = reqwest::get(gateway.url("/v1/providers")).await.unwrap().json().await.unwrap();
    assert_eq!(providers["rejected"], json!([]), "{providers}");
    let hermes = providers["providers"].as_array().unwrap().iter().find(|p| p["key"] == "hermes-text");
    let hermes = hermes.unwrap_or_else(|| panic!("hermes-text is not listed: {providers}"));
    assert_eq!(hermes["source"], file.display().to_string(), "{providers}");
}
