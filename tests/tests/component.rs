//! Component tests: the real OpenAI provider `.wasm`, instantiated through
//! wasmtime by the host's plugin layer (fresh store per call), with the provider's
//! real wire bodies. No network: these exercise the boundary itself.

// Test code: a failed step should stop the test with its message.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use sha2::Digest as _;
use std::path::PathBuf;

use weir_host::plugin::{ComponentSource, PluginEngine, PluginError, Provider, ProviderRegistry, embedded_components};
use weir_host::types::{
    CallParams, CodecError, ContentBlock, Conversation, ErrorClass, HttpResponse, LeafBlock, RetryHint, StopReason,
    ToolChoice, ToolDefinition, ToolResult, ToolUse, Turn,
};

fn cache_dir() -> PathBuf {
    std::env::temp_dir().join("weir-component-test-cache")
}

fn registry() -> ProviderRegistry {
    let engine = PluginEngine::new(Some(cache_dir())).expect("engine");
    ProviderRegistry::load(&engine, None).expect("embedded components load")
}

fn params(wire: &str, max_tokens: u32) -> CallParams {
    CallParams {
        wire_model_id: wire.to_owned(),
        max_tokens,
        thinking_budget: None,
        reasoning_effort: None,
        temperature: Some(0.2),
        stop: Vec::new(),
        response_schema: None,
        stream: false,
    }
}

fn weather_tool() -> ToolDefinition {
    ToolDefinition {
        name: "get_weather".into(),
        description: "Current weather".into(),
        parameters_json: r#"{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}"#.into(),
    }
}

fn response(status: u16, headers: &[(&str, &str)], body: &str) -> HttpResponse {
    HttpResponse {
        status,
        headers: headers.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
        body: body.as_bytes().to_vec(),
    }
}

fn json_body(request: &weir_host::types::HttpRequest) -> serde_json::Value {
    serde_json::from_slice(&request.body).expect("request body is JSON")
}

#[tokio::test]
async fn embedded_component_describes_both_keys() {
    let registry = registry();
    let openai = registry.get("openai").expect("openai key");
    let compatible = registry.get("openai-compatible").expect("openai-compatible key");
    assert_eq!(openai.info().default_endpoint.as_deref(), Some("https://api.openai.com/v1"));
    assert_eq!(compatible.info().default_endpoint, None, "no invented endpoint");
    assert!(matches!(openai.component().source, ComponentSource::Embedded("openai")));
    assert_eq!(openai.component().digest.len(), 64);
}

#[tokio::test]
async fn tool_round_trip_through_the_component() {
    let registry = registry();
    let openai: &Provider = registry.get("openai").unwrap();
    let mut conversation = Conversation::user("Weather in Paris?").with_system("Be terse.").with_tool(weather_tool());
    conversation.tool_choice = Some(ToolChoice::Auto);
    conversation.turns.push(Turn::assistant(vec![ContentBlock::ToolUse(ToolUse {
        id: "call_1".into(),
        name: "get_weather".into(),
        input_json: r#"{"city":"Paris"}"#.into(),
    })]));
    conversation.turns.push(Turn::user(vec![ContentBlock::ToolResult(ToolResult {
        tool_use_id: "call_1".into(),
        content: vec![LeafBlock::Text("18C, sunny".into())],
        is_error: false,
    })]));

    let request = openai.encode(&conversation, &params("gpt-4.1", 300)).await.unwrap();
    assert_eq!(request.method, "POST");
    assert_eq!(request.path_and_query, "/chat/completions");
    assert!(
        request.headers.iter().all(|(name, _)| !name.eq_ignore_ascii_case("authorization")),
        "a component never sets the credential"
    );
    let body = json_body(&request);
    assert_eq!(body["model"], "gpt-4.1");
    assert_eq!(body["max_completion_tokens"], 300, "the host's reserve, written verbatim");
    assert_eq!(body["messages"][0]["role"], "system");
    assert_eq!(body["messages"][2]["tool_calls"][0]["function"]["arguments"], r#"{"city":"Paris"}"#);
    assert_eq!(body["messages"][3]["role"], "tool");
    assert_eq!(body["messages"][3]["tool_call_id"], "call_1");
    assert_eq!(body["tools"][0]["function"]["name"], "get_weather");

    let answer = response(
        200,
        &[("x-request-id", "req_123")],
        r#"{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"gpt-4.1-2025-04-14",
            "choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[
              {"id":"call_2","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Lyon\"}"}}]},
              "finish_reason":"tool_calls"}],
            "usage":{"prompt_tokens":1117,"completion_tokens":46,"total_tokens":1163,
              "prompt_tokens_details":{"cached_tokens":1024},"completion_tokens_details":{"reasoning_tokens":12}}}"#,
    );
    let decoded = openai.decode(&answer).await.unwrap();
    assert_eq!(decoded.stop_reason, StopReason::ToolUse);
    assert_eq!(decoded.raw_stop_reason.as_deref(), Some("tool_calls"));
    assert_eq!(decoded.request_id.as_deref(), Some("req_123"));
    assert_eq!(decoded.served_model.as_deref(), Some("gpt-4.1-2025-04-14"));
    let usage = decoded.usage.unwrap();
    assert_eq!((usage.input, usage.cache_read, usage.output, usage.reasoning), (93, 1024, 46, Some(12)));
    assert!(
        matches!(&decoded.content[0], ContentBlock::ToolUse(call) if call.id == "call_2" && call.input_json.contains("Lyon"))
    );
}

#[tokio::test]
async fn compatible_key_uses_max_tokens() {
    let registry = registry();
    let compatible = registry.get("openai-compatible").unwrap();
    let request = compatible.encode(&Conversation::user("hi"), &params("qwen3", 77)).await.unwrap();
    let body = json_body(&request);
    assert_eq!(body["max_tokens"], 77);
    assert!(body.get("max_completion_tokens").is_none());
}

/// Every error class, from the wire body OpenAI (or an OpenAI-compatible server)
/// really sends for it.
#[tokio::test]
async fn every_error_class_from_its_real_wire_error() {
    let registry = registry();
    let openai = registry.get("openai").unwrap();
    let classify = async |status, headers: &[(&str, &str)], body: &str| {
        openai.classify(&response(status, headers, body)).await.unwrap()
    };
    let error = |kind: &str, code: &str, message: &str| {
        format!(r#"{{"error":{{"message":"{message}","type":"{kind}","param":null,"code":"{code}"}}}}"#)
    };

    let quota = classify(
        429,
        &[],
        &error(
            "insufficient_quota",
            "insufficient_quota",
            "You exceeded your current quota, please check your plan and billing details.",
        ),
    )
    .await;
    assert!(matches!(quota, ErrorClass::QuotaExhausted(_)), "{quota:?}");

    let limited = classify(
        429,
        &[("retry-after", "18")],
        &error("tokens", "rate_limit_exceeded", "Rate limit reached for gpt-4o"),
    )
    .await;
    assert!(
        matches!(&limited, ErrorClass::RateLimited(r) if r.hint == Some(RetryHint::DelayMs(18_000))),
        "{limited:?}"
    );

    let overloaded =
        classify(529, &[], r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#).await;
    assert!(matches!(overloaded, ErrorClass::Overloaded(_)), "{overloaded:?}");

    let transient =
        classify(500, &[], &error("server_error", "", "The server had an error while processing your request.")).await;
    assert!(matches!(transient, ErrorClass::Transient(_)), "{transient:?}");

    let refused = classify(
        400,
        &[],
        r#"{"error":{"message":"filtered","type":null,"param":"prompt","code":"content_filter","status":400}}"#,
    )
    .await;
    assert!(matches!(refused, ErrorClass::Refused(_)), "{refused:?}");

    let invalid = classify(
        400,
        &[],
        r#"{"error":{"message":"Unsupported parameter: 'max_tokens'","type":"invalid_request_error","param":"max_tokens","code":"unsupported_parameter"}}"#,
    ).await;
    assert!(matches!(invalid, ErrorClass::InvalidRequest(_)), "{invalid:?}");

    let auth = classify(
        401,
        &[],
        r#"{"error":{"message":"Incorrect API key provided","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}"#,
    ).await;
    assert!(matches!(auth, ErrorClass::Authentication(_)), "{auth:?}");

    let not_found = classify(
        404,
        &[],
        r#"{"error":{"message":"The model `gpt-9` does not exist","type":"invalid_request_error","param":null,"code":"model_not_found"}}"#,
    ).await;
    assert!(matches!(not_found, ErrorClass::NotFound(_)), "{not_found:?}");

    let overflow = classify(
        400,
        &[],
        r#"{"error":{"message":"This model's maximum context length is 128000 tokens.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}"#,
    ).await;
    assert!(matches!(overflow, ErrorClass::ContextOverflow(_)), "{overflow:?}");

    let odd = classify(418, &[], "I'm a teapot").await;
    assert!(matches!(odd, ErrorClass::Uncorrectable(_)), "{odd:?}");
}

#[tokio::test]
async fn malformed_success_body_is_a_codec_error_not_a_trap() {
    let registry = registry();
    let openai = registry.get("openai").unwrap();
    let error = openai.decode(&response(200, &[], "<html>proxy page</html>")).await.unwrap_err();
    assert!(matches!(error, PluginError::Codec { error: CodecError::Malformed(_), .. }), "{error:?}");
    // The component is instantiated per call: the next call is unaffected.
    let ok = openai
        .decode(&response(200, &[], r#"{"choices":[{"message":{"content":"fine"},"finish_reason":"stop"}]}"#))
        .await;
    assert!(ok.is_ok(), "{ok:?}");
}

#[tokio::test]
async fn invalid_tool_schema_is_refused_by_encode() {
    let registry = registry();
    let openai = registry.get("openai").unwrap();
    let mut tool = weather_tool();
    tool.parameters_json = "{not json".into();
    let error = openai.encode(&Conversation::user("hi").with_tool(tool), &params("gpt-4.1", 10)).await.unwrap_err();
    assert!(matches!(error, PluginError::Codec { error: CodecError::Unsupported(_), .. }), "{error:?}");
}

#[tokio::test]
async fn broken_files_in_the_folder_are_reported_and_the_rest_keep_working() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("garbage.wasm"), b"this is not wasm").unwrap();
    let real = embedded_components()[0].bytes;
    std::fs::write(dir.path().join("truncated.wasm"), &real[..real.len() / 2]).unwrap();
    // A valid core module is still not a component.
    std::fs::write(dir.path().join("core-module.wasm"), b"\0asm\x01\0\0\0").unwrap();
    std::fs::write(dir.path().join("notes.txt"), b"ignored: not a .wasm").unwrap();

    let engine = PluginEngine::new(Some(cache_dir())).unwrap();
    let registry = ProviderRegistry::load(&engine, Some(dir.path())).unwrap();
    let failures = registry.failures();
    assert_eq!(failures.len(), 3, "{failures:?}");
    for failure in failures {
        assert!(failure.path.starts_with(dir.path()), "{failure}");
        assert!(!failure.reason.is_empty());
    }
    let openai = registry.get("openai").expect("the embedded provider still serves");
    assert!(openai.encode(&Conversation::user("hi"), &params("gpt-4.1", 5)).await.is_ok());
}

#[tokio::test]
async fn an_allow_listed_dropped_component_overrides_the_embedded_one_by_key() {
    let dir = tempfile::tempdir().unwrap();
    let real = embedded_components()[0].bytes;
    let dropped = dir.path().join("my-openai.wasm");
    std::fs::write(&dropped, real).unwrap();
    let engine = PluginEngine::new(Some(cache_dir())).unwrap();
    // Untrusted, the file may not take the embedded keys (tests/hostile_component.rs
    // checks what it may do); pinned by digest, it may.
    let untrusted = ProviderRegistry::load(&engine, Some(dir.path())).unwrap();
    assert!(!untrusted.failures().is_empty(), "an untrusted file cannot replace embedded keys");
    assert!(matches!(untrusted.get("openai").unwrap().component().source, ComponentSource::Embedded(_)));
    let digest = hex::encode(sha2::Sha256::digest(real));
    let registry = ProviderRegistry::load_with(&engine, Some(dir.path()), Some(&[digest]), None).unwrap();
    assert!(registry.failures().is_empty());
    for key in ["openai", "openai-compatible"] {
        let provider = registry.get(key).unwrap();
        assert_eq!(provider.component().source, ComponentSource::File(dropped.clone()));
    }
}

#[tokio::test]
async fn compiled_components_are_cached_by_digest_and_reused() {
    let cache = tempfile::tempdir().unwrap();
    let engine = PluginEngine::new(Some(cache.path().to_path_buf())).unwrap();
    let first = ProviderRegistry::load(&engine, None).unwrap();
    let digest = first.get("openai").unwrap().component().digest.clone();
    let artifacts: Vec<_> = std::fs::read_dir(cache.path()).unwrap().map(|e| e.unwrap().path()).collect();
    assert_eq!(artifacts.len(), embedded_components().len(), "one artifact per component: {artifacts:?}");
    let file_name = |path: &std::path::PathBuf| path.file_name().unwrap().to_str().unwrap().to_owned();
    let openai = artifacts.iter().find(|path| file_name(path).starts_with(&digest)).expect("the OpenAI artifact");
    assert!(file_name(openai).ends_with(".cwasm"), "{openai:?}");
    let written = std::fs::metadata(openai).unwrap().modified().unwrap();

    // A second load (a restart) deserializes the artifact instead of compiling again.
    let second = ProviderRegistry::load(&PluginEngine::new(Some(cache.path().to_path_buf())).unwrap(), None).unwrap();
    assert_eq!(second.get("openai").unwrap().component().digest, digest);
    assert_eq!(std::fs::metadata(openai).unwrap().modified().unwrap(), written, "not rewritten");
    assert!(second.get("openai").unwrap().encode(&Conversation::user("hi"), &params("gpt-4.1", 5)).await.is_ok());

    // A corrupt artifact is discarded and recompiled, not trusted.
    std::fs::write(&artifacts[0], b"garbage").unwrap();
    let third = ProviderRegistry::load(&PluginEngine::new(Some(cache.path().to_path_buf())).unwrap(), None).unwrap();
    assert!(third.get("openai").unwrap().encode(&Conversation::user("hi"), &params("gpt-4.1", 5)).await.is_ok());
    assert!(std::fs::metadata(&artifacts[0]).unwrap().len() > 1_000, "rewritten with a real artifact");
}

/// An attempt keeps its instance while the upstream works only when it is
/// small: a first-party Rust component's is (192 KiB of linear memory), an
/// interpreter's (componentize-py, 12.3 MiB) is given back before the wait.
#[tokio::test]
async fn only_a_small_instance_is_kept_while_the_upstream_works() {
    let folder = tempfile::tempdir().unwrap();
    std::fs::copy(env!("WEIR_HERMES_PY_WASM"), folder.path().join("hermes_text.wasm")).unwrap();
    let engine = PluginEngine::new(Some(cache_dir())).unwrap();
    let registry = ProviderRegistry::load(&engine, Some(folder.path())).unwrap();
    for (key, wire, kept) in [("openai", "gpt-4.1", true), ("hermes-text", "Qwen/Qwen3-8B", false)] {
        let provider = registry.get(key).unwrap_or_else(|| panic!("{key} loads: {:?}", registry.failures()));
        let mut session = provider.session();
        session.encode(&Conversation::user("hi"), &params(wire, 5), None).await.unwrap();
        assert!(session.holds_instance(), "{key}: the encode's instance is held until the wait");
        session.while_waiting(async {}).await;
        assert_eq!(session.holds_instance(), kept, "{key}");
    }
}
