//! The call's policy through the real gateway (`weir serve` and the fake
//! OpenAI-dialect upstream): what an entry cannot do is refused before the
//! call with `capability_mismatch` and nothing sent; a stream an entry cannot
//! give is taken whole and replayed; sampling a deployment refuses is withheld,
//! keyed on the wire id (or `fixed_temperature`); `top_p` is handled the same
//! on both ingress routes. Each test asserts what the upstream received.

// Test code: a failed step should stop the test with its message.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use weir_host::record::{Acknowledged, CallObserver, CallOpening, CallRecord, acknowledged};
use weir_host::{Config, Weir};
use weir_tests::openai_wire::{self, completion};
use weir_tests::{FakeUpstream, Gateway, Scripted};

const PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==";
const PDF: &str = "JVBERi0xLjQKJcfsj6IKMSAwIG9iago8PD4+CmVuZG9iagp0cmFpbGVyCjw8Pj4KJSVFT0YK";

/// One `openai-compatible` entry per case, all on `upstream`.
fn config(upstream: &FakeUpstream) -> String {
    let entries = [
        // Declares neither vision, documents, a schema nor thinking.
        ("text-only", "llama3.1:8b", "capabilities = [\"tools\", \"streaming\"]"),
        ("no-stream", "qwen3", "capabilities = [\"tools\", \"vision\"]"),
        ("no-tools", "qwen3", "capabilities = [\"streaming\"]"),
        ("prompted", "qwen3", "capabilities = [\"prompted_tools\", \"streaming\"]"),
        ("o3", "o3", ""),
        ("gpt-5-mini", "gpt-5-mini", ""),
        ("llama", "meta-llama/Llama-3.3-70B-Instruct", ""),
        ("fixed", "llama3.1:8b", "fixed_temperature = true"),
    ];
    let mut toml = String::from("read_timeout_secs = 5\n");
    for (id, wire_id, extra) in entries {
        toml.push_str(&format!(
            "\n[[model]]\nid = \"{id}\"\nprovider = \"openai-compatible\"\nwire_id = \"{wire_id}\"\n\
             endpoint = \"{}\"\nmax_output_tokens = 4000\ncontext_window = 32000\noutput_tokens = 50\n\
             max_retries = 0\n{extra}\n",
            upstream.base_url()
        ));
    }
    toml
}

async fn post(gateway: &Gateway, path: &str, body: &Value) -> (u16, String) {
    let response = reqwest::Client::new().post(gateway.url(path)).json(body).send().await.unwrap();
    (response.status().as_u16(), response.text().await.unwrap())
}

fn parse(body: &str) -> Value {
    serde_json::from_str(body).unwrap_or_else(|e| panic!("answer is not JSON ({e}): {body}"))
}

fn openai(model: &str, content: Value) -> Value {
    json!({"model": model, "messages": [{"role": "user", "content": content}]})
}

fn anthropic(model: &str, content: Value) -> Value {
    json!({"model": model, "max_tokens": 50, "messages": [{"role": "user", "content": content}]})
}

/// A 400 `capability_mismatch` naming the capability and the model, in the
/// OpenAI envelope.
fn assert_openai_mismatch(status: u16, body: &str, model: &str, capability: &str) {
    assert_eq!(status, 400, "{body}");
    let error = &parse(body)["error"];
    assert_eq!(
        (error["type"].as_str(), error["code"].as_str()),
        (Some("capability_mismatch"), Some("capability_mismatch"))
    );
    let message = error["message"].as_str().unwrap();
    assert!(message.contains(&format!("`{model}`")) && message.contains(&format!("`{capability}`")), "{message}");
}

/// The same in the Anthropic envelope.
fn assert_anthropic_mismatch(status: u16, body: &str, model: &str, capability: &str) {
    assert_eq!(status, 400, "{body}");
    let body = parse(body);
    assert_eq!(body["type"], "error");
    assert_eq!(body["error"]["type"], "invalid_request_error", "{body}");
    assert_eq!(body["error"]["weir_category"], "capability_mismatch", "{body}");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains(&format!("`{model}`")) && message.contains(&format!("`{capability}`")), "{message}");
}

#[tokio::test]
async fn an_image_to_an_entry_without_vision_is_refused_before_anything_is_sent_on_both_routes() {
    let upstream = FakeUpstream::start().await;
    let gateway = Gateway::start(&config(&upstream)).await;

    let image = json!([{"type": "text", "text": "What is this?"},
        {"type": "image_url", "image_url": {"url": format!("data:image/png;base64,{PNG}")}}]);
    let (status, body) = post(&gateway, "/v1/chat/completions", &openai("text-only", image)).await;
    assert_openai_mismatch(status, &body, "text-only", "vision");

    let image = json!([{"type": "text", "text": "What is this?"},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}}]);
    let (status, body) = post(&gateway, "/v1/messages", &anthropic("text-only", image)).await;
    assert_anthropic_mismatch(status, &body, "text-only", "vision");

    assert!(upstream.received().is_empty(), "nothing was sent: {:?}", upstream.received());
}

/// WIT 0.5.0's media by source: the Gemini component declares images and
/// documents inline only, so an image or a document by URL is refused under
/// `vision` / `documents`, saying which source, before anything is sent, on
/// both routes (the host fetches no caller's URL).
#[tokio::test]
async fn media_by_url_to_an_inline_only_component_is_refused_before_anything_is_sent() {
    let upstream = FakeUpstream::start().await;
    let config = format!(
        "read_timeout_secs = 5\n\n[[model]]\nid = \"flash\"\nprovider = \"gemini\"\nwire_id = \"gemini-2.5-flash\"\n\
         endpoint = \"http://{}/v1beta\"\ncredential = \"weir-gemini-key\"\nmax_output_tokens = 8000\n\
         context_window = 1048576\noutput_tokens = 100\nmax_retries = 0\n",
        upstream.addr()
    );
    let gateway = Gateway::start_with(&config, &[("WEIR_GEMINI_KEY", "gemini-test-key")], None).await;

    let image = json!([{"type": "text", "text": "What is this?"},
        {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}}]);
    let (status, body) = post(&gateway, "/v1/chat/completions", &openai("flash", image)).await;
    assert_openai_mismatch(status, &body, "flash", "vision");
    assert!(body.contains("image by URL") && body.contains("inline only"), "{body}");

    let image = json!([{"type": "text", "text": "What is this?"},
        {"type": "image", "source": {"type": "url", "url": "https://example.com/cat.png"}}]);
    let (status, body) = post(&gateway, "/v1/messages", &anthropic("flash", image)).await;
    assert_anthropic_mismatch(status, &body, "flash", "vision");

    let pdf = json!([{"type": "text", "text": "Summarize."},
        {"type": "document", "source": {"type": "url", "url": "https://example.com/report.pdf"}}]);
    let (status, body) = post(&gateway, "/v1/messages", &anthropic("flash", pdf)).await;
    assert_anthropic_mismatch(status, &body, "flash", "documents");
    assert!(body.contains("document by URL"), "{body}");

    assert!(upstream.received().is_empty(), "nothing was sent: {:?}", upstream.received());
}

#[tokio::test]
async fn a_pdf_to_an_entry_without_documents_is_refused_before_anything_is_sent_on_both_routes() {
    let upstream = FakeUpstream::start().await;
    let gateway = Gateway::start(&config(&upstream)).await;

    let pdf = json!([{"type": "text", "text": "Summarize."},
        {"type": "file", "file": {"filename": "a.pdf", "file_data": format!("data:application/pdf;base64,{PDF}")}}]);
    let (status, body) = post(&gateway, "/v1/chat/completions", &openai("text-only", pdf)).await;
    assert_openai_mismatch(status, &body, "text-only", "documents");

    let pdf = json!([{"type": "text", "text": "Summarize."},
        {"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": PDF}}]);
    let (status, body) = post(&gateway, "/v1/messages", &anthropic("text-only", pdf)).await;
    assert_anthropic_mismatch(status, &body, "text-only", "documents");

    assert!(upstream.received().is_empty(), "nothing was sent: {:?}", upstream.received());
}

#[tokio::test]
async fn a_schema_a_thinking_budget_and_tools_the_entry_lacks_are_refused_with_nothing_sent() {
    let upstream = FakeUpstream::start().await;
    let gateway = Gateway::start(&config(&upstream)).await;

    let mut schema = openai("text-only", json!("Weather?"));
    schema["response_format"] = json!({"type": "json_schema", "json_schema": {"name": "w",
        "schema": {"type": "object", "properties": {"t": {"type": "number"}}, "required": ["t"]}}});
    let (status, body) = post(&gateway, "/v1/chat/completions", &schema).await;
    assert_openai_mismatch(status, &body, "text-only", "json_schema");

    let mut thinking = anthropic("text-only", json!("Think first."));
    thinking["max_tokens"] = json!(4000);
    thinking["thinking"] = json!({"type": "enabled", "budget_tokens": 1024});
    let (status, body) = post(&gateway, "/v1/messages", &thinking).await;
    assert_anthropic_mismatch(status, &body, "text-only", "thinking");

    // Neither native nor prompted tools.
    let mut tools = openai("no-tools", json!("Weather in Paris?"));
    tools["tools"] = json!([{"type": "function", "function": {"name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]);
    let (status, body) = post(&gateway, "/v1/chat/completions", &tools).await;
    assert_openai_mismatch(status, &body, "no-tools", "tools");

    assert!(upstream.received().is_empty(), "nothing was sent: {:?}", upstream.received());
}

#[tokio::test]
async fn declared_prompted_tools_describe_the_tools_in_the_prompt() {
    let upstream = FakeUpstream::start().await;
    upstream.push(completion(r#"{"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]}"#));
    let gateway = Gateway::start(&config(&upstream)).await;

    let mut request = openai("prompted", json!("Weather in Paris?"));
    request["tools"] = json!([{"type": "function", "function": {"name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]);
    let (status, body) = post(&gateway, "/v1/chat/completions", &request).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(parse(&body)["choices"][0]["message"]["tool_calls"][0]["function"]["name"], "get_weather");
    let sent = upstream.received()[0].json();
    assert!(sent.get("tools").is_none(), "described in the prompt, not sent as tools: {sent}");
}

/// SSE `data:` payloads, `[DONE]` excluded.
fn events(body: &str) -> Vec<Value> {
    body.lines()
        .filter_map(|line| line.strip_prefix("data: "))
        .filter(|data| *data != "[DONE]")
        .map(|data| serde_json::from_str(data).unwrap())
        .collect()
}

#[tokio::test]
async fn a_stream_asked_of_an_entry_that_cannot_stream_is_answered_whole_and_replayed() {
    let upstream = FakeUpstream::start().await;
    upstream.push(completion("Paris is sunny."));
    upstream.push(completion("Still sunny."));
    let gateway = Gateway::start(&config(&upstream)).await;

    let mut request = openai("no-stream", json!("Weather in Paris?"));
    request["stream"] = json!(true);
    request["stream_options"] = json!({"include_usage": true});
    let (status, body) = post(&gateway, "/v1/chat/completions", &request).await;
    assert_eq!(status, 200, "{body}");
    assert!(body.ends_with("data: [DONE]\n\n"), "{body}");
    let text: String =
        events(&body).iter().filter_map(|event| event["choices"][0]["delta"]["content"].as_str()).collect();
    assert_eq!(text, "Paris is sunny.");
    assert!(events(&body).iter().any(|event| event["choices"][0]["finish_reason"] == "stop"), "{body}");

    let mut request = anthropic("no-stream", json!("And now?"));
    request["stream"] = json!(true);
    let (status, body) = post(&gateway, "/v1/messages", &request).await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("event: message_stop") && body.contains("Still sunny."), "{body}");

    let received = upstream.received();
    assert_eq!(received.len(), 2, "one whole request per call: {received:?}");
    for request in received {
        let sent = request.json();
        assert_ne!(sent["stream"], json!(true), "never asked upstream as a stream: {sent}");
        assert!(sent.get("stream_options").is_none(), "{sent}");
    }
}

/// A reply on Ollama's native wire (the template provider's).
fn ollama_reply(text: &str) -> Scripted {
    openai_wire::json_response(
        200,
        &json!({"model": "llama3.1:8b", "message": {"role": "assistant", "content": text},
                "done_reason": "stop", "prompt_eval_count": 5, "eval_count": 3}),
    )
}

/// The provider itself does not stream (the Ollama template declares no
/// `streaming`). Before the policy, the streamed request went out, was paid
/// for, and the caller got a 400 "this provider does not stream" from the
/// component's stream decoder.
#[tokio::test]
async fn a_stream_to_a_provider_that_does_not_stream_is_answered_whole_and_replayed() {
    let component = Path::new(env!("WEIR_TEMPLATE_WASM"));
    weir_tests::gateway::precompile(component);
    let folder = tempfile::tempdir().unwrap();
    std::fs::copy(component, folder.path().join("ollama.wasm")).unwrap();
    let upstream = FakeUpstream::start().await;
    upstream.push(ollama_reply("Paris is sunny."));
    let config = format!(
        "read_timeout_secs = 5\n\n[[model]]\nid = \"local\"\nprovider = \"ollama\"\nwire_id = \"llama3.1:8b\"\n\
         endpoint = \"{}\"\ncredential = \"ollama-api-key\"\nmax_output_tokens = 100\ncontext_window = 1000\n\
         output_tokens = 10\nmax_retries = 0\n",
        upstream.base_url()
    );
    let gateway = Gateway::start_with(&config, &[], Some(folder.path())).await;

    let mut request = openai("local", json!("Weather in Paris?"));
    request["stream"] = json!(true);
    let (status, body) = post(&gateway, "/v1/chat/completions", &request).await;
    assert_eq!(status, 200, "{body}");
    let text: String =
        events(&body).iter().filter_map(|event| event["choices"][0]["delta"]["content"].as_str()).collect();
    assert_eq!(text, "Paris is sunny.", "{body}");
    assert!(body.ends_with("data: [DONE]\n\n"), "{body}");
    let received = upstream.received();
    assert_eq!(received.len(), 1, "one whole request: {received:?}");
    assert!(received[0].path.ends_with("/api/chat"), "{}", received[0].path);
    assert_eq!(received[0].json()["stream"], json!(false));
}

/// What a call with `temperature` sent upstream for `model`.
async fn sent_with_temperature(gateway: &Gateway, upstream: &FakeUpstream, model: &str) -> Value {
    let before = upstream.received().len();
    let mut request = openai(model, json!("Hi"));
    request["temperature"] = json!(0.3);
    let (status, body) = post(gateway, "/v1/chat/completions", &request).await;
    assert_eq!(status, 200, "{model}: {body}");
    let received = upstream.received();
    assert_eq!(received.len(), before + 1, "{model}: one request");
    received[before].json()
}

#[tokio::test]
async fn temperature_is_omitted_for_reasoning_families_and_fixed_entries_and_sent_for_the_rest() {
    let upstream = FakeUpstream::start().await;
    let gateway = Gateway::start(&config(&upstream)).await;

    for model in ["o3", "gpt-5-mini", "fixed"] {
        let sent = sent_with_temperature(&gateway, &upstream, model).await;
        assert!(sent.get("temperature").is_none(), "{model}: omitted, not rewritten: {sent}");
    }
    let sent = sent_with_temperature(&gateway, &upstream, "llama").await;
    assert_eq!(sent["temperature"], json!(0.3), "{sent}");
    assert_eq!(sent["model"], "meta-llama/Llama-3.3-70B-Instruct");
}

/// One rule, on the wire: for `openai` entries, the component gives system text the
/// `developer` role exactly where the host omits the temperature (the reasoning
/// families), so the component's copy of the family list cannot drift from the host's.
#[tokio::test]
async fn the_developer_role_and_an_omitted_temperature_follow_one_rule() {
    let upstream = FakeUpstream::start().await;
    let cases = [
        ("o3", true),
        ("gpt-5-mini", true),
        ("gpt-5.1", true),
        ("O3-MINI", true),
        ("gpt-5-chat-latest", false),
        ("gpt-4.1", false),
        ("gpt-4o", false),
    ];
    let mut toml = String::from("read_timeout_secs = 5\n");
    for (index, (wire_id, _)) in cases.iter().enumerate() {
        toml.push_str(&format!(
            "\n[[model]]\nid = \"m{index}\"\nprovider = \"openai\"\nwire_id = \"{wire_id}\"\nendpoint = \"{}\"\n\
             credential = \"weir-test-key\"\nmax_output_tokens = 4000\ncontext_window = 32000\noutput_tokens = 50\n\
             max_retries = 0\n",
            upstream.base_url()
        ));
    }
    let gateway = Gateway::start_with(&toml, &[("WEIR_TEST_KEY", "sk-test")], None).await;
    for (index, (wire_id, reasoning)) in cases.iter().enumerate() {
        upstream.push(completion("ok"));
        let mut request = openai(&format!("m{index}"), json!("Hi"));
        request["messages"] = json!([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]);
        request["temperature"] = json!(0.3);
        let (status, body) = post(&gateway, "/v1/chat/completions", &request).await;
        assert_eq!(status, 200, "{wire_id}: {body}");
        let sent = upstream.received()[index].json();
        let role = sent["messages"][0]["role"].as_str().unwrap_or_default().to_owned();
        assert_eq!(role == "developer", *reasoning, "{wire_id}: {sent}");
        assert_eq!(sent.get("temperature").is_none(), *reasoning, "{wire_id}: {sent}");
    }
}

#[tokio::test]
async fn top_p_is_handled_alike_on_both_routes() {
    let upstream = FakeUpstream::start().await;
    let gateway = Gateway::start(&config(&upstream)).await;
    let routes =
        [("/v1/chat/completions", openai("llama", json!("Hi"))), ("/v1/messages", anthropic("llama", json!("Hi")))];

    // Anything but 1.0 on an entry with free sampling: the same 400 on both routes, nothing sent.
    for (path, request) in &routes {
        let mut request = request.clone();
        request["top_p"] = json!(0.9);
        let (status, body) = post(&gateway, path, &request).await;
        assert_eq!(status, 400, "{path}: {body}");
        assert!(body.contains("Weir does not carry `top_p` yet") && body.contains("`llama`"), "{path}: {body}");
    }
    assert!(upstream.received().is_empty(), "nothing was sent: {:?}", upstream.received());

    // 1.0 is a no-op; on a fixed-sampling entry any value is dropped with the temperature.
    let mut expected = 0;
    for (path, request) in &routes {
        for (model, top_p) in [("llama", 1.0), ("o3", 0.9)] {
            let mut request = request.clone();
            request["model"] = json!(model);
            request["top_p"] = json!(top_p);
            request["temperature"] = json!(0.5);
            upstream.push(completion("ok"));
            let (status, body) = post(&gateway, path, &request).await;
            assert_eq!(status, 200, "{path} {model}: {body}");
            expected += 1;
            let received = upstream.received();
            assert_eq!(received.len(), expected);
            let sent = received[expected - 1].json();
            assert!(sent.get("top_p").is_none(), "{path} {model}: Weir never sends top_p: {sent}");
            assert_eq!(sent.get("temperature").is_some(), model == "llama", "{path} {model}: {sent}");
        }
    }

    // Out of range is malformed on either route.
    for (path, request) in &routes {
        let mut request = request.clone();
        request["top_p"] = json!(1.5);
        let (status, body) = post(&gateway, path, &request).await;
        assert_eq!(status, 400, "{path}: {body}");
        assert!(body.contains("`top_p` 1.5 is outside 0.0–1.0"), "{path}: {body}");
    }
    assert_eq!(upstream.received().len(), expected);
}

/// Collects closed records, as an embedding service's observer would.
#[derive(Default)]
struct Collect {
    closed: Mutex<Vec<Arc<CallRecord>>>,
}

impl CallObserver for Collect {
    fn opened(&self, _: &CallOpening) -> Acknowledged {
        acknowledged()
    }

    fn closed(&self, record: &Arc<CallRecord>) -> Acknowledged {
        self.closed.lock().unwrap().push(Arc::clone(record));
        acknowledged()
    }
}

#[tokio::test]
async fn a_refused_call_is_recorded_with_its_category_and_no_attempt() {
    let upstream = FakeUpstream::start_local().await;
    let records = Arc::new(Collect::default());
    let weir = Weir::builder()
        .config(Config::from_toml(&config(&upstream), "test").unwrap())
        .providers_dir("/nonexistent-weir-providers")
        .cache_dir(Some(std::env::temp_dir().join("weir-policy-test-cache")))
        .observer(Arc::clone(&records) as Arc<dyn CallObserver>)
        .build()
        .unwrap();
    let base = weir_tests::serve_router(weir_host::server::router(weir)).await;

    let image = json!([{"type": "image_url", "image_url": {"url": format!("data:image/png;base64,{PNG}")}}]);
    let response = reqwest::Client::new()
        .post(format!("{base}/v1/chat/completions"))
        .json(&openai("text-only", image))
        .send()
        .await;
    let response = response.unwrap();
    assert_eq!(response.status().as_u16(), 400);
    let call_id = response.headers()["x-weir-call-id"].to_str().unwrap().to_owned();

    let closed = records.closed.lock().unwrap();
    assert_eq!(closed.len(), 1, "{closed:#?}");
    let record = &closed[0];
    assert_eq!(record.call_id, call_id);
    assert_eq!((record.model.as_str(), record.category.as_str()), ("text-only", "capability_mismatch"));
    assert_eq!(record.provider.as_deref(), Some("openai-compatible"), "refused after the target resolved");
    assert!(record.attempts.is_empty(), "no attempt: {record:#?}");
    assert!(upstream.received().is_empty());
}
