//! The sandbox, proven with a component that misbehaves on purpose
//! (`tests/hostile`): each misbehaviour fails only its own call, with a typed
//! error naming the provider, while good calls keep flowing on other tasks.

// Test code: a failed step should stop the test with its message.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use weir_host::plugin::{PluginEngine, ProviderRegistry};
use weir_host::types::{CallParams, ContentBlock, Conversation, HttpResponse};
use weir_host::{Category, ChatRequest, Config, Weir, WeirError};
use weir_tests::FakeUpstream;

fn hostile_component() -> Vec<u8> {
    std::fs::read(env!("WEIR_HOSTILE_WASM")).expect("the hostile component is built by tests/build.rs")
}

fn cache() -> std::path::PathBuf {
    std::env::temp_dir().join("weir-sandbox-test-cache")
}

/// A Weir with the hostile component dropped into its folder, a model per
/// hostile key, and one good model, all routed to the fake upstream.
fn weir(upstream: &FakeUpstream, folder: &std::path::Path) -> Weir {
    std::fs::write(folder.join("hostile.wasm"), hostile_component()).unwrap();
    let mut toml = String::new();
    for key in ["loop", "alloc", "panic", "env", "header", "utf8", "huge", "wide", "memory", "alias"] {
        toml.push_str(&format!(
            "[[model]]\nid = \"{key}\"\nprovider = \"hostile-{key}\"\nendpoint = \"{url}\"\nmax_output_tokens = 10\ncontext_window = 10000\noutput_tokens = 5\nmax_retries = 0\n\n",
            url = upstream.base_url()
        ));
    }
    toml.push_str(&format!(
        "[[model]]\nid = \"good\"\nprovider = \"openai-compatible\"\nendpoint = \"{}\"\nmax_output_tokens = 10\ncontext_window = 10000\noutput_tokens = 5\n",
        upstream.base_url()
    ));
    Weir::builder()
        .config(Config::from_toml(&toml, "sandbox test").unwrap())
        .providers_dir(folder)
        .cache_dir(Some(cache()))
        .build()
        .unwrap()
}

async fn call(weir: &Weir, model: &str) -> Result<String, weir_host::CallError> {
    weir.chat(ChatRequest::new(model, Conversation::user("hi"))).await.map(|answer| answer.text())
}

fn assert_fault(result: Result<String, weir_host::CallError>, provider: &str, what: &str) {
    let failure = result.expect_err("the hostile call must fail");
    assert_eq!(failure.category(), Category::ProviderFault, "{failure}");
    let message = failure.error.to_string();
    assert!(message.contains(provider) && message.contains(what), "{message}");
    assert!(!failure.error.safe_message().contains(what) || what.is_empty(), "details stay in the log");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_misbehaviour_fails_only_its_own_call() {
    let upstream = FakeUpstream::start().await;
    let folder = tempfile::tempdir().unwrap();
    let weir = weir(&upstream, folder.path());

    // Good calls keep flowing on other tasks the whole time.
    let background = {
        let weir = weir.clone();
        tokio::spawn(async move {
            let mut answered = 0;
            for _ in 0..40 {
                assert_eq!(call(&weir, "good").await.unwrap(), "echo: hi");
                answered += 1;
                tokio::task::yield_now().await;
            }
            answered
        })
    };

    assert_fault(call(&weir, "loop").await, "hostile-loop", "CPU budget");
    assert_fault(call(&weir, "alloc").await, "hostile-alloc", "trapped");
    assert_fault(call(&weir, "panic").await, "hostile-panic", "trapped");
    // Twice: the trap poisoned only that call's instance.
    assert_fault(call(&weir, "panic").await, "hostile-panic", "trapped");

    let header = call(&weir, "header").await.expect_err("a header with a newline is refused");
    assert_eq!(header.category(), Category::ProviderFault, "{header}");
    assert!(header.error.to_string().contains("x-injected"), "{header}");

    assert_fault(call(&weir, "utf8").await, "hostile-utf8", "utf-8");
    // Refused from the lengths the component's result claims, before the host
    // copies any of it (`host/src/plugin/bounded.rs`).
    assert_fault(call(&weir, "huge").await, "hostile-huge", "returned 100001 headers (at most 64)");
    assert_fault(call(&weir, "wide").await, "hostile-wide", "returned 1048576 bytes in a method, path or header");

    // A decode whose 100 strings alias one 1 MiB buffer claims 100 MiB: the lift stops
    // at the host's per-call bound (`LIFT_BYTES_PER_CALL`, 96 MiB; wasmtime's default
    // of 128 would let it through) instead of copying it all.
    assert_fault(call(&weir, "alias").await, "hostile-alias", "too much data");

    assert_eq!(background.await.unwrap(), 40, "every good call succeeded meanwhile");
    // The same component's other keys still work after its faults.
    assert!(call(&weir, "env").await.is_ok());
    assert!(upstream.received().iter().all(|r| !r.headers.iter().any(|(_, v)| v.contains("stolen"))));
}

/// A component burning its whole CPU budget yields its worker between fuel
/// slices, so on a runtime with a single thread, shared by the in-process
/// gateway, the fake upstream and the clients, calls that start while three such
/// loops run all finish before any loop is cut off. Without the yields each loop
/// would hold the thread for its whole budget (about a second) at a time.
#[tokio::test(flavor = "current_thread")]
async fn looping_components_do_not_stall_the_runtime() {
    let upstream = FakeUpstream::start_local().await;
    let folder = tempfile::tempdir().unwrap();
    let weir = weir(&upstream, folder.path());
    let url =
        format!("{}/v1/chat/completions", weir_tests::serve_router(weir_host::server::router(weir.clone())).await);

    let finished: Arc<Mutex<Vec<String>>> = Arc::default();
    let mut calls = tokio::task::JoinSet::new();
    let client = reqwest::Client::new();
    let start = |calls: &mut tokio::task::JoinSet<()>, model: &'static str, n: usize| {
        let (client, url, finished) = (client.clone(), url.clone(), finished.clone());
        calls.spawn(async move {
            let body = json!({"model": model, "messages": [{"role": "user", "content": "hi"}]});
            let response = client.post(&url).json(&body).send().await.unwrap();
            let expected = if model == "good" { 200 } else { 500 };
            assert_eq!(response.status().as_u16(), expected, "{model} {n}: {}", response.text().await.unwrap());
            finished.lock().unwrap().push(format!("{model} {n}"));
        });
    };
    for n in 0..3 {
        start(&mut calls, "loop", n);
    }
    // The loops are inside their components before the good calls start.
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    for n in 0..6 {
        start(&mut calls, "good", n);
    }
    while let Some(joined) = calls.join_next().await {
        joined.unwrap();
    }

    let order = finished.lock().unwrap().clone();
    let first_loop = order.iter().position(|call| call.starts_with("loop")).unwrap();
    assert_eq!(first_loop, 6, "every good call finished before a loop was cut off: {order:?}");
    let faults = upstream.received().iter().filter(|r| r.json()["model"] == "hostile").count();
    assert_eq!(faults, 0, "no looping call reached the upstream");
}

#[tokio::test]
async fn the_environment_is_empty_inside_a_component() {
    let upstream = FakeUpstream::start().await;
    let folder = tempfile::tempdir().unwrap();
    let weir = weir(&upstream, folder.path());
    assert!(std::env::vars().next().is_some(), "the test process itself has an environment");
    call(&weir, "env").await.unwrap();
    let sent =
        upstream.received().into_iter().find(|r| r.json()["model"] == "hostile").expect("the env call went upstream");
    assert_eq!(sent.json()["messages"][0]["content"], "", "the component saw environment variables");
}

/// `hostile-memory` sends upstream whatever an earlier call left in its
/// memory, then keeps its own caller's text: every call gets a fresh instance,
/// so no caller ever sees another's prompt, one after another or at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_callers_calls_never_share_an_instances_memory() {
    let upstream = FakeUpstream::start().await;
    let folder = tempfile::tempdir().unwrap();
    let weir = weir(&upstream, folder.path());
    let say = |text: String| weir.chat(ChatRequest::new("memory", Conversation::user(text)));
    say("alice's secret plan".to_owned()).await.unwrap();
    say("bob's question".to_owned()).await.unwrap();
    let at_once = (0..16).map(|i| say(format!("caller {i}'s prompt")));
    for answer in futures_util::future::join_all(at_once).await {
        answer.unwrap();
    }
    let sent: Vec<_> = upstream
        .received()
        .into_iter()
        .filter(|r| r.json()["model"] == "hostile")
        .map(|r| r.json()["messages"][0]["content"].clone())
        .collect();
    assert_eq!(sent.len(), 18);
    assert!(sent.iter().all(|found| found == ""), "a call found an earlier caller's text: {sent:?}");
}

/// An attempt decodes in the instance that encoded its request while the
/// upstream answers within the hold (`hostile-memory`'s decode answers what its
/// own instance's encode kept); the next call still starts in a fresh one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_attempt_decodes_in_the_instance_that_encoded_it() {
    let upstream = FakeUpstream::start().await;
    let folder = tempfile::tempdir().unwrap();
    let weir = weir(&upstream, folder.path());
    let say = |text: &str| weir.chat(ChatRequest::new("memory", Conversation::user(text)));
    assert_eq!(say("alice's plan").await.unwrap().text(), "v1:kept:alice's plan");
    assert_eq!(say("bob's question").await.unwrap().text(), "v1:kept:bob's question");
    let sent: Vec<_> = upstream.received().iter().map(|r| r.json()["messages"][0]["content"].clone()).collect();
    assert_eq!(sent, [json!(""), json!("")], "each call's encode found a fresh instance");
}

/// An upstream slower than the hold gets a fresh instance for its decode:
/// the attempt gave its instance (and its memory) back while it waited.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_instance_is_not_kept_while_a_slow_upstream_works() {
    let upstream = FakeUpstream::start().await;
    upstream.delay_answers(weir_host::plugin::HOLD_WHILE_WAITING * 4);
    let folder = tempfile::tempdir().unwrap();
    let weir = weir(&upstream, folder.path());
    let answer = weir.chat(ChatRequest::new("memory", Conversation::user("carol's note"))).await.unwrap();
    assert_eq!(answer.text(), "v1:kept:", "decoded in a fresh instance");
}

/// Many callers at once, some keeping their instance while the upstream
/// works and some (past the engine's bound on kept instances, or after the
/// hold) decoding in a fresh one: none ever sees another caller's text.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn callers_at_once_never_decode_in_each_others_instance() {
    let upstream = FakeUpstream::start().await;
    let folder = tempfile::tempdir().unwrap();
    let weir = weir(&upstream, folder.path());
    let prompts: Vec<String> = (0..64).map(|i| format!("caller {i}'s prompt")).collect();
    let at_once = prompts.iter().map(|text| weir.chat(ChatRequest::new("memory", Conversation::user(text.as_str()))));
    let answers: Vec<String> =
        futures_util::future::join_all(at_once).await.into_iter().map(|answer| answer.unwrap().text()).collect();
    // Which attempts kept their instance depends on the machine's load (an
    // exchange past the hold gives it back); what none may do does not.
    for (answer, prompt) in answers.iter().zip(&prompts) {
        match answer.strip_prefix("v1:kept:") {
            Some(kept) if kept == prompt || kept.is_empty() => {}
            other => panic!("{prompt:?} got another instance's text: {other:?}"),
        }
    }
    let sent = upstream.received();
    assert!(sent.iter().all(|r| r.json()["messages"][0]["content"] == ""), "an encode found an earlier caller's text");
}

/// A session's instance is back in the session only once a call returned:
/// a call dropped midway (here a looping encode cut by a timeout) leaves no
/// half-run instance for the session's next call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_dropped_midway_leaves_no_instance_behind() {
    let folder = tempfile::tempdir().unwrap();
    std::fs::write(folder.path().join("hostile.wasm"), hostile_component()).unwrap();
    let engine = PluginEngine::new(Some(cache())).unwrap();
    let registry = ProviderRegistry::load(&engine, Some(folder.path())).unwrap();
    let provider = registry.get("hostile-loop").unwrap();
    let mut session = provider.session();
    let ok = HttpResponse { status: 200, headers: Vec::new(), body: b"fine".to_vec() };
    assert_eq!(session.decode(&ok).await.unwrap().content, [ContentBlock::Text("v1:fine".to_owned())]);
    assert!(session.holds_instance(), "a call that returned leaves its instance");
    let params = CallParams {
        wire_model_id: "m".to_owned(),
        max_tokens: 5,
        thinking_budget: None,
        reasoning_effort: None,
        temperature: None,
        stop: Vec::new(),
        response_schema: None,
        stream: false,
    };
    let conversation = Conversation::user("hi");
    let looping = session.encode(&conversation, &params, None);
    let cut = tokio::time::timeout(std::time::Duration::from_millis(20), looping).await;
    assert!(cut.is_err(), "the encode loops past the timeout");
    assert!(!session.holds_instance(), "the instance cut off midway is gone");
}

#[tokio::test]
async fn a_component_that_reads_files_is_refused_at_load() {
    let folder = tempfile::tempdir().unwrap();
    let path = folder.path().join("reads-files.wasm");
    std::fs::write(&path, std::fs::read(env!("WEIR_HOSTILE_FS_WASM")).unwrap()).unwrap();
    let engine = PluginEngine::new(Some(cache())).unwrap();
    let registry = ProviderRegistry::load(&engine, Some(folder.path())).unwrap();
    let failure = &registry.failures()[0];
    assert_eq!(failure.path, path);
    assert!(failure.reason.contains("wasi:filesystem"), "{}", failure.reason);
    assert!(registry.get("hostile-file").is_none());
    assert!(registry.get("openai").is_some(), "everything else still loads");
}

#[tokio::test]
async fn a_fault_reaches_the_gateway_as_a_safe_provider_fault() {
    let upstream = FakeUpstream::start().await;
    let folder = tempfile::tempdir().unwrap();
    let weir = weir(&upstream, folder.path());
    let failure = call(&weir, "panic").await.unwrap_err();
    assert!(matches!(failure.error, WeirError::Plugin { .. }));
    let answer: Value = json!({"message": failure.error.safe_message()});
    assert!(!answer.to_string().contains("panicked on purpose"), "{answer}");
    assert_eq!(failure.stamp.model, "panic");
    assert_eq!(failure.stamp.provider.as_deref(), Some("hostile-panic"));
}

fn refusal_reason(bytes_var: &str, name: &str) -> String {
    let folder = tempfile::tempdir().unwrap();
    std::fs::write(folder.path().join(name), std::fs::read(bytes_var).unwrap()).unwrap();
    let engine = PluginEngine::new(Some(cache())).unwrap();
    let registry = ProviderRegistry::load(&engine, Some(folder.path())).unwrap();
    assert!(registry.get("openai").is_some(), "the embedded providers still load");
    assert_eq!(registry.failures().len(), 1, "{:?}", registry.failures());
    registry.failures()[0].reason.clone()
}

#[test]
fn a_component_for_another_world_version_is_refused_naming_both() {
    let reason = refusal_reason(env!("WEIR_WRONG_VERSION_WASM"), "future.wasm");
    assert_eq!(
        reason,
        "it targets weir:provider@0.9.0; this host speaks weir:provider@0.1.0, 0.2.0, 0.3.0, 0.4.0, 0.5.0, 0.6.0 and 0.7.0"
    );
}

#[test]
fn a_component_mixing_world_versions_is_refused_naming_them() {
    let reason = refusal_reason(env!("WEIR_MIXED_VERSIONS_WASM"), "mixed.wasm");
    assert!(reason.starts_with("it mixes weir:provider versions 0.1.0 and 0.2.0"), "{reason}");
    assert!(
        reason.contains("weir:provider/describe@0.2.0") && reason.contains("weir:provider/chat@0.1.0"),
        "names the exports: {reason}"
    );
}

#[test]
fn a_component_whose_functions_have_other_types_is_refused_at_load() {
    let reason = refusal_reason(env!("WEIR_WRONG_TYPES_WASM"), "wrong-types.wasm");
    assert!(
        reason.starts_with("does not match the provider world: `describe.providers` does not have the world's type"),
        "{reason}"
    );
}

#[test]
fn a_component_exporting_describe_and_no_operation_is_refused() {
    let reason = refusal_reason(env!("WEIR_DESCRIBE_ONLY_WASM"), "describe-only.wasm");
    assert_eq!(
        reason,
        "it exports no operation: only `weir:provider/describe@0.2.0`, and none of chat, embeddings or rerank"
    );
}

#[test]
fn a_component_exporting_logprobs_without_chat_is_refused() {
    let reason = refusal_reason(env!("WEIR_LOGPROBS_ALONE_WASM"), "logprobs-alone.wasm");
    assert_eq!(
        reason,
        "it exports `weir:provider/logprobs@0.3.0` without `weir:provider/chat@0.3.0`: its failures are classified \
         by chat's `classify`"
    );
}

#[test]
fn a_component_for_another_world_is_refused_naming_its_exports() {
    let reason = refusal_reason(env!("WEIR_WRONG_WORLD_WASM"), "calculator.wasm");
    assert!(reason.starts_with("not a weir provider"), "{reason}");
    assert!(reason.contains("add"), "{reason}");
}
