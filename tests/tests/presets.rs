//! The embedded catalog's OpenAI-compatible presets through the real gateway:
//! each entry as shipped, its endpoint pointed at the fake upstream, its
//! provider's key set in the environment under the name the preset reads
//! (`MISTRAL_API_KEY`, ...), called with the official `openai` client. What
//! reaches the upstream is each provider's wire: its field names, whether
//! `stream_options` is sent, Mistral's tool call ids, DeepSeek's reasoning.

// Test code: a failed step should stop the test with its message.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use serde_json::{Value, json};
use weir_tests::gateway::embedded_catalog_at;
use weir_tests::openai_wire::{self, COMPLETION_ID, MODEL};
use weir_tests::python::run_openai_client;
use weir_tests::{FakeUpstream, Gateway};

/// Every preset entry in the embedded catalog.
const PRESETS: [&str; 13] = [
    "mistral-large",
    "mistral-medium",
    "groq-gpt-oss-120b",
    "groq-llama-3.3-70b",
    "deepseek-v4-pro",
    "deepseek-flash",
    "grok-4",
    "grok-4-1-fast",
    "together-gpt-oss-120b",
    "together-llama-3.3-70b",
    "openrouter-claude-sonnet-4.5",
    "openrouter-gpt-5-mini",
    "cerebras-gpt-oss-120b",
];

/// The env names the presets' default credential ids resolve to, each with a
/// value of its own so a test can tell which key went out.
const KEYS: [(&str, &str); 7] = [
    ("MISTRAL_API_KEY", "mistral-key"),
    ("GROQ_API_KEY", "groq-key"),
    ("DEEPSEEK_API_KEY", "deepseek-key"),
    ("XAI_API_KEY", "xai-key"),
    ("TOGETHER_API_KEY", "together-key"),
    ("OPENROUTER_API_KEY", "openrouter-key"),
    ("CEREBRAS_API_KEY", "cerebras-key"),
];

/// The embedded catalog with the presets on the fake, each with an output
/// budget (the shipped entries declare none, and the client sends none).
async fn gateway(upstream: &FakeUpstream, keys: &[(&str, &str)]) -> Gateway {
    let mut catalog = embedded_catalog_at(&PRESETS, &upstream.base_url());
    for id in PRESETS {
        let line = format!("id = \"{id}\"\n");
        catalog = catalog.replace(&line, &format!("{line}output_tokens = 256\n"));
    }
    Gateway::start_with(&catalog, keys, None).await
}

async fn client(gateway: &Gateway, model: &str, steps: &str) -> Vec<Value> {
    let (base_url, model, steps) = (gateway.url("/v1"), model.to_owned(), steps.to_owned());
    tokio::task::spawn_blocking(move || run_openai_client(&base_url, &model, &steps)).await.unwrap()
}

/// One plain and one streamed call per preset: the model's wire id, the
/// provider's own key, its output field and whether it asks for stream usage.
#[tokio::test]
async fn each_preset_sends_its_wire_id_its_key_and_its_field_names() {
    let upstream = FakeUpstream::start().await;
    let gateway = gateway(&upstream, &KEYS).await;
    let cases = [
        ("mistral-large", "mistral-large-latest", "mistral-key", "max_tokens", false),
        ("groq-gpt-oss-120b", "openai/gpt-oss-120b", "groq-key", "max_completion_tokens", true),
        ("deepseek-v4-pro", "deepseek-v4-pro", "deepseek-key", "max_tokens", true),
        ("grok-4", "grok-4", "xai-key", "max_completion_tokens", true),
        ("together-llama-3.3-70b", "meta-llama/Llama-3.3-70B-Instruct-Turbo", "together-key", "max_tokens", false),
        ("openrouter-gpt-5-mini", "openai/gpt-5-mini", "openrouter-key", "max_tokens", false),
        ("cerebras-gpt-oss-120b", "gpt-oss-120b", "cerebras-key", "max_completion_tokens", false),
    ];
    for (id, wire_id, key, field, stream_options) in cases {
        let before = upstream.received().len();
        let lines = client(&gateway, id, "plain,stream").await;
        assert_eq!(lines[0]["text"], "echo: What is the capital of France?", "{id}");
        assert_eq!(lines[1]["text"], "echo: Count to three.", "{id}");
        let sent = upstream.received();
        for request in &sent[before..] {
            let body = request.json();
            assert_eq!(request.path, "/v1/chat/completions", "{id}");
            assert_eq!(request.header("authorization"), Some(format!("Bearer {key}").as_str()), "{id}");
            assert_eq!(body["model"], wire_id, "{id}");
            assert!(body[field].is_u64(), "{id}: {body}");
            let other = if field == "max_tokens" { "max_completion_tokens" } else { "max_tokens" };
            assert_eq!(body.get(other), None, "{id}: {body}");
        }
        let streamed = sent[before + 1].json();
        assert_eq!(streamed["stream"], true, "{id}");
        assert_eq!(streamed.get("stream_options").is_some(), stream_options, "{id}: {streamed}");
    }
}

/// One streamed tool call per preset key, reassembled by the client.
#[tokio::test]
async fn each_preset_streams_a_tool_call() {
    let upstream = FakeUpstream::start().await;
    let gateway = gateway(&upstream, &KEYS).await;
    let ids = [
        "mistral-large",
        "groq-gpt-oss-120b",
        "deepseek-flash",
        "grok-4-1-fast",
        "together-gpt-oss-120b",
        "openrouter-claude-sonnet-4.5",
        "cerebras-gpt-oss-120b",
    ];
    for id in ids {
        upstream.push(openai_wire::stream(openai_wire::sse_tool_call_chunks(
            "Xy7call01",
            "get_weather",
            &["{\"city\"", ":\"Paris\"}"],
        )));
        let lines = client(&gateway, id, "stream_tools").await;
        let expected = json!([{"id": "Xy7call01", "name": "get_weather", "arguments": {"city": "Paris"}}]);
        assert_eq!(lines[0]["tool_calls"], expected, "{id}");
        assert_eq!(lines[0]["finish_reason"], "tool_calls", "{id}");
        let body = upstream.received().last().unwrap().json();
        assert_eq!(body["tools"][0]["function"]["name"], "get_weather", "{id}");
    }
}

/// A preset whose key is not set fails before anything is sent, as every
/// embedded entry does; the others still answer.
#[tokio::test]
async fn a_preset_without_its_key_fails_as_credential_missing_and_sends_nothing() {
    let upstream = FakeUpstream::start().await;
    let gateway = gateway(&upstream, &[("GROQ_API_KEY", "groq-key")]).await;
    let hello =
        |model: &str| json!({"model": model, "max_tokens": 20, "messages": [{"role": "user", "content": "Hi"}]});
    let answer = gateway.post_json("/v1/chat/completions", &hello("mistral-large"), &[]).await;
    assert_eq!(answer.status, 424, "{}", answer.body);
    assert_eq!(answer.body["error"]["code"], "credential_missing", "{}", answer.body);
    assert!(upstream.received().is_empty(), "nothing was sent without the key");
    let answer = gateway.post_json("/v1/chat/completions", &hello("groq-llama-3.3-70b"), &[]).await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert_eq!(upstream.received().len(), 1);
}

/// Mistral refuses a tool call id that is not nine letters or digits: the
/// caller's `call_…` id from another provider goes out mapped, the same in
/// the assistant's call and in the tool result. Its own ids come back as sent.
#[tokio::test]
async fn mistral_gets_nine_character_tool_call_ids_matched_between_call_and_result() {
    let upstream = FakeUpstream::start().await;
    let gateway = gateway(&upstream, &KEYS).await;
    upstream.push(openai_wire::completion("It is 18 degrees and sunny in Paris."));
    let lines = client(&gateway, "mistral-large", "tool_result").await;
    assert_eq!(lines[0]["text"], "It is 18 degrees and sunny in Paris.");
    let body = upstream.received()[0].json();
    let messages = body["messages"].as_array().unwrap();
    let call_id = messages[1]["tool_calls"][0]["id"].as_str().unwrap();
    assert_eq!(call_id.len(), 9, "{body}");
    assert!(call_id.bytes().all(|byte| byte.is_ascii_alphanumeric()), "{call_id}");
    assert_eq!(messages[2]["tool_call_id"], call_id, "{body}");
    assert!(!body.to_string().contains("call_PTLP8xhu3uwZk4l3nlnrrJha"), "{body}");

    upstream.push(openai_wire::tool_call_completion(&[("aB3xK9mP2", "get_weather", r#"{"city":"Paris"}"#)]));
    let lines = client(&gateway, "mistral-large", "tools").await;
    assert_eq!(
        lines[0]["tool_calls"],
        json!([{"id": "aB3xK9mP2", "name": "get_weather", "arguments": {"city": "Paris"}}])
    );
}

/// DeepSeek's `reasoning_content` is its thinking: the answer's text is its
/// `content` alone, plain and streamed.
#[tokio::test]
async fn deepseeks_reasoning_content_is_thinking_not_text() {
    let upstream = FakeUpstream::start().await;
    let gateway = gateway(&upstream, &KEYS).await;
    let message =
        json!({"role": "assistant", "content": "Paris.", "reasoning_content": "The capital of France is Paris."});
    upstream.push(openai_wire::json_response(
        200,
        &openai_wire::completion_body(COMPLETION_ID, MODEL, message, "stop", openai_wire::usage_json(12, 9, 0, 6)),
    ));
    let frames = vec![
        openai_wire::sse_frame(&openai_wire::chunk_json(
            COMPLETION_ID,
            MODEL,
            json!({"role": "assistant", "content": null, "reasoning_content": "Counting: "}),
            None,
            None,
        )),
        openai_wire::sse_frame(&openai_wire::chunk_json(
            COMPLETION_ID,
            MODEL,
            json!({"reasoning_content": "1, 2, 3."}),
            None,
            None,
        )),
        openai_wire::sse_frame(&openai_wire::chunk_json(
            COMPLETION_ID,
            MODEL,
            json!({"content": "One, two, three."}),
            None,
            None,
        )),
        openai_wire::sse_frame(&openai_wire::chunk_json(COMPLETION_ID, MODEL, json!({}), Some("stop"), None)),
        openai_wire::sse_done(),
    ];
    upstream.push(openai_wire::stream(frames));
    let lines = client(&gateway, "deepseek-v4-pro", "plain,stream").await;
    assert_eq!(lines[0]["text"], "Paris.");
    assert_eq!(lines[1]["text"], "One, two, three.");
    assert_eq!(lines[1]["finish_reason"], "stop");
}

/// The presets are listed with their prices and the date they were taken.
#[tokio::test]
async fn the_presets_are_listed_with_their_prices() {
    let upstream = FakeUpstream::start().await;
    let gateway = gateway(&upstream, &KEYS).await;
    let models: Value = reqwest::get(gateway.url("/v1/models")).await.unwrap().json().await.unwrap();
    for id in PRESETS {
        let model = models["data"].as_array().unwrap().iter().find(|m| m["id"] == id).unwrap();
        assert_eq!(model["weir"]["available"], true, "{id}");
        let prices = &model["weir"]["prices"];
        assert!(prices["input"].as_f64().unwrap() > 0.0 && prices["output"].as_f64().unwrap() > 0.0, "{id}");
        assert_eq!(prices["as_of"], "2026-12-06", "{id}");
    }
}
