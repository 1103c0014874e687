//! Hot drop-in through the real gateway: a component added to, replaced in or
//! removed from the providers folder takes effect for new calls without a
//! restart; a file that fails keeps the previous version serving; an allow-list
//! of digests pins what may load.

// Test code: a failed step should stop the test with its message.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};
use weir_host::plugin::component_digest;
use weir_tests::{FakeUpstream, Gateway};

fn hostile() -> Vec<u8> {
    std::fs::read(env!("WEIR_HOSTILE_WASM")).unwrap()
}

fn config(upstream: &FakeUpstream, extra: &str) -> String {
    format!(
        r#"
watch_interval_ms = 100
{extra}

[[model]]
id = "dropped"
provider = "hostile-env"
endpoint = "{url}"
max_output_tokens = 10
context_window = 10000
output_tokens = 5
max_retries = 0
"#,
        url = upstream.base_url()
    )
}

async fn call(gateway: &Gateway) -> (u16, Value) {
    let response = reqwest::Client::new()
        .post(gateway.url("/v1/chat/completions"))
        .json(&json!({"model": "dropped", "messages": [{"role": "user", "content": "hi"}]}))
        .send()
        .await
        .unwrap();
    (response.status().as_u16(), response.json().await.unwrap())
}

/// Waits (bounded) until `/v1/providers` satisfies `ready`.
async fn until(gateway: &Gateway, what: &str, ready: impl Fn(&Value) -> bool) -> Value {
    for _ in 0..200 {
        let providers: Value = reqwest::get(gateway.url("/v1/providers")).await.unwrap().json().await.unwrap();
        if ready(&providers) {
            return providers;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("timed out waiting until {what}; stderr:\n{}", gateway.stderr());
}

fn serves(providers: &Value, key: &str) -> bool {
    providers["providers"].as_array().unwrap().iter().any(|p| p["key"] == key)
}

fn write(folder: &Path, name: &str, bytes: &[u8]) {
    // Write then rename, as a deployment tool would: the watcher never sees half a file.
    let temporary = folder.join(format!(".{name}.partial"));
    std::fs::write(&temporary, bytes).unwrap();
    std::fs::rename(&temporary, folder.join(name)).unwrap();
}

#[tokio::test]
async fn added_replaced_and_removed_components_take_effect_without_a_restart() {
    let upstream = FakeUpstream::start().await;
    let folder = tempfile::tempdir().unwrap();
    let gateway = Gateway::start_with(&config(&upstream, ""), &[], Some(folder.path())).await;

    let (status, body) = call(&gateway).await;
    assert_eq!(status, 503, "not loaded yet: {body}");

    write(folder.path(), "hostile.wasm", &hostile());
    until(&gateway, "the dropped component serves", |p| serves(p, "hostile-env")).await;
    let (status, body) = call(&gateway).await;
    assert_eq!(status, 200, "{body}");

    // A broken replacement is rejected by name; the previous version keeps serving.
    write(folder.path(), "hostile.wasm", b"not a component");
    let providers =
        until(&gateway, "the broken file is rejected", |p| !p["rejected"].as_array().unwrap().is_empty()).await;
    assert!(providers["rejected"][0]["path"].as_str().unwrap().ends_with("hostile.wasm"), "{providers}");
    assert!(serves(&providers, "hostile-env"), "the previous version keeps serving: {providers}");
    gateway.wait_for_stderr("provider component rejected", Duration::from_secs(5)).await;
    let (status, body) = call(&gateway).await;
    assert_eq!(status, 200, "{body}");

    std::fs::remove_file(folder.path().join("hostile.wasm")).unwrap();
    until(&gateway, "the removed component is gone", |p| !serves(p, "hostile-env")).await;
    let (status, body) = call(&gateway).await;
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["error"]["type"], "provider_unavailable");
}

#[tokio::test]
async fn an_allow_list_pins_which_files_may_load() {
    let upstream = FakeUpstream::start().await;
    let folder = tempfile::tempdir().unwrap();
    let bytes = hostile();
    let pinned = component_digest(&bytes);
    let gateway =
        Gateway::start_with(&config(&upstream, "allowed_digests = [\"0000\"]"), &[], Some(folder.path())).await;
    write(folder.path(), "hostile.wasm", &bytes);
    let providers =
        until(&gateway, "the unpinned file is rejected", |p| !p["rejected"].as_array().unwrap().is_empty()).await;
    let reason = providers["rejected"][0]["reason"].as_str().unwrap();
    assert!(reason.contains(&pinned) && reason.contains("allow-list"), "{reason}");
    assert!(!serves(&providers, "hostile-env"));
    drop(gateway);

    let allowed = format!("allowed_digests = [\"{pinned}\"]");
    let gateway = Gateway::start_with(&config(&upstream, &allowed), &[], Some(folder.path())).await;
    let (status, body) = call(&gateway).await;
    assert_eq!(status, 200, "a pinned digest loads: {body}");
}

/// A new version replaces the old under a running load of calls: no call fails,
/// and every call that starts after the swap is served by the new version.
///
/// Each caller goes on until it has had a few answers from v2 (the reload's
/// compile time varies with the machine), with a deadline so a reload that
/// never happens fails the test instead of hanging it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_component_replaced_under_load_fails_no_call() {
    const ANSWERS_AFTER_THE_SWAP: usize = 5;
    let upstream = FakeUpstream::start().await;
    let folder = tempfile::tempdir().unwrap();
    write(folder.path(), "hostile.wasm", &hostile());
    let gateway = Gateway::start_with(&config(&upstream, ""), &[], Some(folder.path())).await;
    let url = gateway.url("/v1/chat/completions");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);

    let load: Vec<_> = (0..4)
        .map(|_| {
            let url = url.clone();
            tokio::spawn(async move {
                let client = reqwest::Client::new();
                let mut texts: Vec<String> = Vec::new();
                while texts.iter().filter(|t| t.starts_with("v2:")).count() < ANSWERS_AFTER_THE_SWAP {
                    assert!(tokio::time::Instant::now() < deadline, "v2 never served: {texts:?}");
                    let response = client
                        .post(&url)
                        .json(&json!({"model": "dropped", "messages": [{"role": "user", "content": "hi"}]}))
                        .send()
                        .await
                        .unwrap();
                    assert_eq!(response.status(), 200, "a call failed during the swap");
                    let body: Value = response.json().await.unwrap();
                    texts.push(body["choices"][0]["message"]["content"].as_str().unwrap().to_owned());
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                texts
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(150)).await;
    write(folder.path(), "hostile.wasm", &std::fs::read(env!("WEIR_HOSTILE_V2_WASM")).unwrap());
    for calls in load {
        let texts = calls.await.unwrap();
        assert!(texts.first().unwrap().starts_with("v1:"), "the load started on v1: {texts:?}");
        assert!(texts.last().unwrap().starts_with("v2:"), "calls after the swap use v2: {texts:?}");
        let first_v2 = texts.iter().position(|t| t.starts_with("v2:")).unwrap();
        assert!(texts[first_v2..].iter().all(|t| t.starts_with("v2:")), "never back to v1: {texts:?}");
    }
}
