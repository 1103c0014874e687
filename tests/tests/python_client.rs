//! The official `openai` Python package against the fake upstream: proves the fake speaks
//! OpenAI well enough for the real client, and that `tests/python/openai_client.py` works,
//! before the same script is pointed at Weir.
//!
//! Needs a Python with the pinned `openai` package (see `weir_tests::python`); without
//! one the test fails with the install command.

// Test code: a failed step should stop the test with its message.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use serde_json::json;
use weir_tests::FakeUpstream;
use weir_tests::openai_wire::{self, approx_tokens};
use weir_tests::python::run_openai_client;

#[tokio::test]
async fn openai_python_client_reads_the_echo_and_its_usage() {
    let upstream = FakeUpstream::start().await;
    let lines = run_openai_client(&upstream.base_url(), "gpt-4o-mini", "plain,stream");

    let plain = &lines[0];
    assert_eq!(plain["text"], "echo: What is the capital of France?");
    assert_eq!(plain["finish_reason"], "stop");
    assert_eq!(plain["usage"]["completion_tokens"], approx_tokens("echo: What is the capital of France?"));
    assert_eq!(plain["usage"]["prompt_tokens_details"]["cached_tokens"], 0);

    let stream = &lines[1];
    assert_eq!(stream["text"], "echo: Count to three.");
    assert_eq!(stream["finish_reason"], "stop");
    assert_eq!(stream["usage"]["completion_tokens"], approx_tokens("echo: Count to three."));

    let received = upstream.received();
    assert_eq!(received[0].path, "/v1/chat/completions");
    assert_eq!(received[0].header("authorization"), Some("Bearer unused-by-weir"));
    assert_eq!(received[1].json()["stream_options"], json!({"include_usage": true}));
}

#[tokio::test]
async fn openai_python_client_reads_tool_calls() {
    let upstream = FakeUpstream::start().await;
    upstream.push(openai_wire::tool_call_completion(&[("call_abc", "get_weather", r#"{"city":"Paris"}"#)]));
    let lines = run_openai_client(&upstream.base_url(), "gpt-4o-mini", "tools");
    assert_eq!(
        lines[0]["tool_calls"],
        json!([{"id": "call_abc", "name": "get_weather", "arguments": {"city": "Paris"}}])
    );
    assert_eq!(lines[0]["finish_reason"], "tool_calls");

    let request = upstream.received()[0].json();
    assert_eq!(request["tools"][0]["function"]["name"], "get_weather");
}
