//! Azure OpenAI through the real gateway: the official `openai` client calls
//! Weir, Weir calls a fake Azure resource that speaks Azure's wire
//! (`weir_tests::azure_wire`). What reaches the resource (the deployment URL
//! and its `api-version`, the v1 URL, the `api-key` header, the body), and what
//! the caller gets for Azure's filter verdicts and 429s.

// Test code: a failed step should stop the test with its message.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use serde_json::{Value, json};
use weir_tests::python::run_openai_client;
use weir_tests::{FakeUpstream, Gateway, azure_wire};

const SECRET: &str = "azure-key-0123456789abcdef";
const FILTER_PROSE: &str = "SECRET-PROSE: the prompt triggered Azure OpenAI's content management policy";

/// `gpt4o` on the deployment URL shape (the component's GA `api-version`),
/// `pinned` on the same shape with the operator's `api-version` in the
/// endpoint, `v1` on the v1 API, `embed` an embedding deployment.
fn config(upstream: &FakeUpstream) -> String {
    let resource = format!("http://{}", upstream.addr());
    format!(
        r#"
read_timeout_secs = 5

[[model]]
id = "gpt4o"
provider = "azure-openai"
wire_id = "gpt-4o-prod"
endpoint = "{resource}"
credential = "azure-test-key"
max_output_tokens = 16384
context_window = 128000
output_tokens = 256
max_retries = 0

[[model]]
id = "pinned"
provider = "azure-openai"
wire_id = "gpt-4o-prod"
endpoint = "{resource}?api-version=2025-04-01-preview"
credential = "azure-test-key"
max_output_tokens = 16384
context_window = 128000
output_tokens = 256
max_retries = 0

[[model]]
id = "retried"
provider = "azure-openai"
wire_id = "gpt-4o-prod"
endpoint = "{resource}"
credential = "azure-test-key"
max_output_tokens = 16384
context_window = 128000
output_tokens = 256
max_retries = 1

[[model]]
id = "v1"
provider = "azure-openai-v1"
wire_id = "o4-mini-prod"
endpoint = "{resource}"
credential = "azure-test-key"
max_output_tokens = 100000
context_window = 200000
output_tokens = 256
max_retries = 0

[[model]]
id = "embed"
provider = "azure-openai"
kind = "embedding"
wire_id = "embedder-prod"
endpoint = "{resource}"
credential = "azure-test-key"
embedding_dimensions = 4
context_window = 8192
max_retries = 0
"#
    )
}

async fn gateway(upstream: &FakeUpstream) -> Gateway {
    Gateway::start_with(&config(upstream), &[("AZURE_TEST_KEY", SECRET)], None).await
}

/// Runs the client off the async runtime (it blocks on its own HTTP calls).
async fn client(gateway: &Gateway, model: &str, steps: &str) -> Vec<Value> {
    let (base_url, model, steps) = (gateway.url("/v1"), model.to_owned(), steps.to_owned());
    tokio::task::spawn_blocking(move || run_openai_client(&base_url, &model, &steps)).await.unwrap()
}

#[tokio::test]
async fn the_deployment_url_carries_the_deployment_and_the_api_version_and_the_key_goes_in_api_key() {
    let upstream = FakeUpstream::start().await;
    let gateway = gateway(&upstream).await;
    upstream.push(azure_wire::completion("Paris."));
    upstream.push(azure_wire::text_stream(&["One, ", "two, ", "three."], "stop"));
    let lines = client(&gateway, "gpt4o", "plain,stream").await;
    assert_eq!(lines[0]["text"], "Paris.");
    assert_eq!(lines[0]["finish_reason"], "stop");
    assert_eq!(lines[0]["usage"]["prompt_tokens"], 14);
    assert_eq!(lines[1]["text"], "One, two, three.", "the choice-less first chunk is read past");
    assert_eq!(lines[1]["finish_reason"], "stop");
    assert_eq!(lines[1]["usage"]["completion_tokens"], 5);

    let sent = upstream.received();
    for request in &sent {
        assert_eq!(request.path, "/openai/deployments/gpt-4o-prod/chat/completions");
        assert_eq!(request.query.as_deref(), Some("api-version=2024-10-21"));
        assert_eq!(request.header("api-key"), Some(SECRET));
        assert_eq!(request.header("authorization"), None);
        let body = request.json();
        assert_eq!(body.get("model"), None, "the URL names the deployment: {body}");
        assert!(body["max_completion_tokens"].is_u64(), "{body}");
    }
    assert_eq!(sent[1].json()["stream_options"], json!({"include_usage": true}));
}

#[tokio::test]
async fn an_endpoints_api_version_wins_over_the_components() {
    let upstream = FakeUpstream::start().await;
    let gateway = gateway(&upstream).await;
    upstream.push(azure_wire::completion("ok"));
    let lines = client(&gateway, "pinned", "plain").await;
    assert_eq!(lines[0]["text"], "ok");
    let sent = upstream.received();
    assert_eq!(sent[0].path, "/openai/deployments/gpt-4o-prod/chat/completions");
    assert_eq!(sent[0].query.as_deref(), Some("api-version=2025-04-01-preview"), "one api-version, the operator's");
}

#[tokio::test]
async fn the_v1_api_names_the_deployment_as_the_model_and_streams_a_tool_call() {
    let upstream = FakeUpstream::start().await;
    let gateway = gateway(&upstream).await;
    upstream.push(azure_wire::tool_call_stream("call_az1", "get_weather", &["{\"ci", "ty\":\"Paris\"}"]));
    let lines = client(&gateway, "v1", "stream_tools").await;
    assert_eq!(
        lines[0]["tool_calls"],
        json!([{"id": "call_az1", "name": "get_weather", "arguments": {"city": "Paris"}}])
    );
    assert_eq!(lines[0]["finish_reason"], "tool_calls");
    let sent = upstream.received();
    assert_eq!(sent[0].path, "/openai/v1/chat/completions");
    assert_eq!(sent[0].query, None);
    assert_eq!(sent[0].header("api-key"), Some(SECRET));
    let body = sent[0].json();
    assert_eq!(body["model"], "o4-mini-prod");
    assert_eq!(body["tools"][0]["function"]["name"], "get_weather");
}

/// The prompt filter's 400, the output filter's `finish_reason`, plain and
/// streamed: each is the refusal class (422 `refused`) and none of Azure's
/// prose reaches the caller.
#[tokio::test]
async fn content_filter_verdicts_are_refusals_without_azures_text() {
    let upstream = FakeUpstream::start().await;
    let gateway = gateway(&upstream).await;
    upstream.push(azure_wire::prompt_filtered_400(FILTER_PROSE));
    upstream.push(azure_wire::filtered_completion());
    let lines = client(&gateway, "gpt4o", "refused,refused").await;
    for line in &lines {
        assert_eq!(line["status"], 422, "{line}");
        let error = line["error"].get("error").unwrap_or(&line["error"]);
        assert_eq!(error["code"], "refused", "{line}");
        let text = line.to_string();
        assert!(!text.contains("SECRET-PROSE") && !text.contains("violence"), "{text}");
    }
    // Streamed: stopped before any output, the refusal is the call's answer;
    // after some, the stream ends with the typed stop (what was sent is sent).
    let stream = |gateway: &Gateway| {
        let body =
            json!({"model": "gpt4o", "stream": true, "messages": [{"role": "user", "content": "Tell me a story."}]});
        reqwest::Client::new().post(gateway.url("/v1/chat/completions")).json(&body).send()
    };
    upstream.push(azure_wire::text_stream(&[], "content_filter"));
    let answer = stream(&gateway).await.unwrap();
    assert_eq!(answer.status().as_u16(), 422);
    let body: Value = answer.json().await.unwrap();
    assert_eq!(body["error"]["type"], "refused", "{body}");
    assert!(!body.to_string().contains("violence"), "{body}");
    upstream.push(azure_wire::text_stream(&["Once upon"], "content_filter"));
    let answer = stream(&gateway).await.unwrap();
    assert_eq!(answer.status().as_u16(), 200);
    let text = answer.text().await.unwrap();
    assert!(text.contains("Once upon") && text.contains("\"finish_reason\":\"content_filter\""), "{text}");
    assert!(!text.contains("violence") && !text.contains("prompt_filter_results"), "{text}");
    gateway.wait_for_stderr("SECRET-PROSE", Duration::from_secs(5)).await;
}

/// Azure's 429 reaches the caller as `rate_limited` (none of its prose),
/// moves the model's adaptive throttle as OpenAI's 429 does, and its
/// `retry-after-ms` (over the coarser `retry-after`) sets the gateway's wait
/// before a retry: 2,345 ms is above the 429's jitter window (0.5–2 s), below
/// `retry-after: 3`, so the logged wait can only come from `retry-after-ms`.
#[tokio::test]
async fn azures_429_is_rate_limited_feeds_the_throttle_and_its_retry_after_ms_sets_the_wait() {
    let upstream = FakeUpstream::start().await;
    let gateway = gateway(&upstream).await;
    assert_eq!(throttle(&gateway, "gpt4o").await, 0.0);
    upstream.push(azure_wire::rate_limited(5_850));
    let hello = |model: &str| json!({"model": model, "messages": [{"role": "user", "content": "Hi"}]});
    let answer = gateway.post_json("/v1/chat/completions", &hello("gpt4o"), &[]).await;
    assert_eq!(answer.status, 429, "{}", answer.body);
    assert_eq!(answer.body["error"]["code"], "rate_limited", "{}", answer.body);
    assert!(!answer.body.to_string().contains("S0 pricing tier"), "{}", answer.body);
    assert_eq!(throttle(&gateway, "gpt4o").await, 0.5, "a 429 weighs 1 (0.5 of coefficient)");

    upstream.push(azure_wire::rate_limited(2_345));
    upstream.push(azure_wire::completion("after the wait"));
    let answer = gateway.post_json("/v1/chat/completions", &hello("retried"), &[]).await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert_eq!(answer.body["choices"][0]["message"]["content"], "after the wait");
    let log = gateway.wait_for_stderr("retrying", Duration::from_secs(5)).await;
    let line = log.lines().find(|line| line.contains("retrying") && line.contains("retried")).unwrap();
    assert!(line.contains("wait=2.345s"), "{line}");
}

async fn throttle(gateway: &Gateway, id: &str) -> f64 {
    let models: Value = reqwest::get(gateway.url("/v1/models")).await.unwrap().json().await.unwrap();
    let model = models["data"].as_array().unwrap().iter().find(|m| m["id"] == id).unwrap();
    model["weir"]["admission"]["throttle_coefficient"].as_f64().unwrap()
}

#[tokio::test]
async fn embeddings_go_to_the_embedding_deployment() {
    let upstream = FakeUpstream::start().await;
    let gateway = gateway(&upstream).await;
    upstream.push(azure_wire::embeddings(1, 4));
    let lines = client(&gateway, "embed", "embed_float").await;
    let vector: Vec<f64> = lines[0]["vectors"][0].as_array().unwrap().iter().map(|v| v.as_f64().unwrap()).collect();
    assert_eq!(vector.len(), 4);
    assert!((vector[3] / vector[0] - 4.0).abs() < 1e-4, "Azure's vector (0.001 … 0.004), normalized: {vector:?}");
    let sent = upstream.received();
    assert_eq!(sent[0].path, "/openai/deployments/embedder-prod/embeddings");
    assert_eq!(sent[0].query.as_deref(), Some("api-version=2024-10-21"));
    assert_eq!(sent[0].header("api-key"), Some(SECRET));
    assert_eq!(sent[0].json(), json!({"input": ["the first passage"], "encoding_format": "float", "dimensions": 4}));
}

/// Neither Azure key declares `documents`: a PDF is refused before anything
/// is sent.
#[tokio::test]
async fn a_pdf_is_refused_before_anything_is_sent() {
    let upstream = FakeUpstream::start().await;
    let gateway = gateway(&upstream).await;
    let file =
        json!({"type": "file", "file": {"filename": "a.pdf", "file_data": "data:application/pdf;base64,JVBERi0xLjQK"}});
    let body = json!({"model": "gpt4o", "messages": [{"role": "user", "content": [file, {"type": "text", "text": "Summarize."}]}]});
    let answer = gateway.post_json("/v1/chat/completions", &body, &[]).await;
    assert_eq!(answer.body["error"]["code"], "capability_mismatch", "{}", answer.body);
    assert!(upstream.received().is_empty());
}
