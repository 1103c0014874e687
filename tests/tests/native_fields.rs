//! A provider component's `native` interface (weir:provider 0.4.0) misbehaving, through
//! the real gateway with the hostile component (`tests/hostile`, feature `native`) in its
//! providers folder: a `native.support` that panics is a typed `provider_fault`, kept as the
//! component's fault like any load-time question's; a `native.encode` that panics fails
//! only the calls with native fields (a request without them still goes through
//! `chat.encode`); a `native.count-tokens-encode` that panics falls back to Weir's estimate; a
//! `native-stream` (weir:provider 0.7.0) whose own block is not JSON or is over the host's bound
//! fails its stream alone, as a `provider_fault` recorded on the call. (What Anthropic's
//! surfaces do with native fields is tested in `claude_code.rs` and `bedrock.rs`.)

// Test code: a failed step should stop the test with its message.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use serde_json::{Value, json};
use weir_tests::gateway::closed_records;
use weir_tests::{FakeUpstream, Gateway, Scripted};

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

/// A streamed call with a hosted tool on the hostile component's native-stream key; the
/// body the gateway streamed back.
async fn stream_with_web_search(gateway: &Gateway) -> String {
    let body = json!({"model": "hostile", "max_tokens": 5, "stream": true,
        "tools": [{"type": "web_search_20250305", "name": "web_search", "max_uses": 1}],
        "messages": [{"role": "user", "content": "hi"}]});
    let response = reqwest::Client::new().post(gateway.url("/v1/messages")).json(&body).send().await.unwrap();
    assert_eq!(response.status().as_u16(), 200);
    response.text().await.unwrap()
}

/// The upstream's SSE events, one per data line.
fn sse(data: &[&str]) -> Scripted {
    let chunks = data.iter().map(|data| bytes::Bytes::from(format!("data: {data}\n\n"))).collect();
    let headers = vec![("content-type".to_owned(), "text/event-stream".to_owned())];
    Scripted::Stream { status: 200, headers, chunks, pause: Duration::ZERO }
}

/// A native stream that hands over an own block that is not a JSON object, or one over
/// the host's 1 MiB bound, fails its stream after the text it had sent, as a
/// `provider_fault` (nothing of the block reaches the caller); each call is recorded,
/// and the gateway streams the next call as before.
#[tokio::test]
async fn a_native_stream_whose_block_is_not_json_or_too_big_fails_its_stream_alone() {
    let upstream = FakeUpstream::start().await;
    let folder = tempfile::tempdir().unwrap();
    std::fs::copy(env!("WEIR_HOSTILE_NATIVE_WASM"), folder.path().join("hostile.wasm")).unwrap();
    let config = format!(
        "[[model]]\nid = \"hostile\"\nprovider = \"hostile-native-stream\"\nwire_id = \"blocks\"\n\
         endpoint = \"{url}\"\nmax_output_tokens = 10\ncontext_window = 10000\noutput_tokens = 5\n\
         max_retries = 0\n\n[ledger]\npath = \"ledger.db\"\n",
        url = upstream.base_url()
    );
    let gateway = Gateway::start_with(&config, &[], Some(folder.path())).await;
    for broken in ["not-json", "huge"] {
        upstream.push(sse(&["before", broken, "[DONE]"]));
        let text = stream_with_web_search(&gateway).await;
        assert!(text.contains(r#""text":"before""#), "the text went out first: {text}");
        assert!(text.contains("event: error") && text.contains("provider_fault"), "{broken}: {text}");
        assert!(!text.contains("server_tool_use") && !text.contains("xxxx"), "nothing of the block: {text}");
        assert!(!text.contains("message_stop"), "{text}");
    }
    gateway.wait_for_stderr("broke the world's contract in `native-stream.feed`", Duration::from_secs(5)).await;
    upstream.push(sse(&["fine", "[DONE]"]));
    let text = stream_with_web_search(&gateway).await;
    assert!(text.contains(r#""text":"fine""#) && text.contains("message_stop"), "the next stream is whole: {text}");
    let records = closed_records(&gateway.dir().join("ledger.db"));
    let categories: Vec<&str> = records.iter().map(|record| record["category"].as_str().unwrap()).collect();
    assert_eq!(categories, ["provider_fault", "provider_fault", "ok"], "{records:?}");
}
