//! A provider component's `native` interface (weir:provider 0.4.0) misbehaving, through
//! the real gateway with the hostile component (`tests/hostile`, feature `native`) in its
//! providers folder: a `native.support` that panics is a typed `provider_fault`, kept as the
//! component's fault like any load-time question's; a `native.encode` that panics fails
//! only the calls with native fields (a request without them still goes through
//! `chat.encode`); a `native.count-tokens-encode` that panics falls back to Weir's estimate. (What Anthropic's
//! surfaces do with native fields is tested in `claude_code.rs` and `bedrock.rs`.)

// Test code: a failed step should stop the test with its message.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use serde_json::{Value, json};
use weir_tests::{FakeUpstream, Gateway};

/// One entry on the hostile component, with `wire_id` choosing its misbehaviour.
fn config(upstream: &FakeUpstream, wire_id: &str) -> String {
    format!(
        "[[model]]\nid = \"hostile\"\nprovider = \"hostile-memory\"\nwire_id = \"{wire_id}\"\nendpoint = \"{url}\"\n\
         max_output_tokens = 10\ncontext_window = 10000\noutput_tokens = 5\nmax_retries = 0\n",
        url = upstream.base_url()
    )
}

async fn gateway(upstream: &FakeUpstream, wire_id: &str) -> (Gateway, tempfile::TempDir) {
    let folder = tempfile::tempdir().unwrap();
    std::fs::copy(env!("WEIR_HOSTILE_NATIVE_WASM"), folder.path().join("hostile.wasm")).unwrap();
    let gateway = Gateway::start_with(&config(upstream, wire_id), &[], Some(folder.path())).await;
    (gateway, folder)
}

/// Posts a Messages request, with `top_k` (a native field) or without.
async fn message(gateway: &Gateway, native: bool) -> (u16, Value) {
    let mut body = json!({"model": "hostile", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]});
    if native {
        body["top_k"] = json!(3);
    }
    let response = reqwest::Client::new().post(gateway.url("/v1/messages")).json(&body).send().await.unwrap();
    (response.status().as_u16(), response.json().await.unwrap())
}

fn assert_provider_fault(status: u16, body: &Value) {
    assert_eq!(status, 500, "{body}");
    assert_eq!(body["type"], "error", "{body}");
    assert_eq!(body["error"]["weir_category"], "provider_fault", "{body}");
    assert!(!body.to_string().contains("on purpose"), "the component's panic text stays in the log: {body}");
}

/// `native.support` is a question asked once and kept, like `describe.serves`: its
/// fault is kept as the component's, so the second call fails the same way without
/// asking again.
#[tokio::test]
async fn a_native_support_that_panics_is_a_provider_fault_kept_as_the_components() {
    let upstream = FakeUpstream::start().await;
    let (gateway, _folder) = gateway(&upstream, "native-support-panics").await;
    for _ in 0..2 {
        let (status, body) = message(&gateway, true).await;
        assert_provider_fault(status, &body);
    }
    assert_eq!(upstream.request_count(), 0, "nothing was sent");
    gateway.wait_for_stderr("trapped in `native.support`", Duration::from_secs(5)).await;
}

#[tokio::test]
async fn a_native_encode_that_panics_fails_only_the_native_call_and_a_count_falls_back_to_the_estimate() {
    let upstream = FakeUpstream::start().await;
    let (gateway, _folder) = gateway(&upstream, "native-encode-panics").await;
    for _ in 0..2 {
        let (status, body) = message(&gateway, true).await;
        assert_provider_fault(status, &body);
    }
    assert_eq!(upstream.request_count(), 0, "nothing was sent for a failed encode");
    let (status, body) = message(&gateway, false).await;
    assert_eq!(status, 200, "without native fields the call takes `chat.encode`: {body}");
    assert_eq!(upstream.request_count(), 1);
    gateway.wait_for_stderr("trapped in `native.encode`", Duration::from_secs(5)).await;

    let body = json!({"model": "hostile", "messages": [{"role": "user", "content": "Hello there"}]});
    let response =
        reqwest::Client::new().post(gateway.url("/v1/messages/count_tokens")).json(&body).send().await.unwrap();
    assert_eq!(response.status().as_u16(), 200);
    assert_eq!(response.headers()["x-weir-token-count"], "estimate");
    let answer: Value = response.json().await.unwrap();
    assert!(answer["input_tokens"].as_u64().unwrap() > 0, "{answer}");
    assert_eq!(upstream.request_count(), 1, "the count sent nothing");
    gateway.wait_for_stderr("trapped in `native.count-tokens-encode`", Duration::from_secs(5)).await;
}
