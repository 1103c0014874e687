//! Streaming through the real `weir` binary, in front of the fake upstream
//! streaming scripted SSE with faults at chosen positions: what the client's SSE
//! carries, how many requests the upstream saw and with which `stream` flag.
//!
//! The first-chunk rule: before the first output a failure is retried (and an
//! in-band error frame may earn one replay without streaming); after it nothing
//! is retried and the stream ends with a normalized error event.

// Test code: a failed step should stop the test with its message.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use bytes::Bytes;
use serde_json::{Value, json};
use weir_tests::openai_wire::{self, COMPLETION_ID, MODEL, chunk_json, sse_frame, sse_json, streamed_text};
use weir_tests::python::run_openai_client;
use weir_tests::{FakeUpstream, Gateway};

fn config(upstream: &FakeUpstream) -> String {
    openai_wire::chat_config(&upstream.base_url())
}

async fn gateway(upstream: &FakeUpstream) -> Gateway {
    Gateway::start_with(&config(upstream), &[], None).await
}

fn request() -> Value {
    json!({
        "model": "chat",
        "stream": true,
        "stream_options": {"include_usage": true},
        "messages": [{"role": "user", "content": "Hello"}]
    })
}

/// Posts a streaming request; returns the status, the headers and the whole body.
async fn post(gateway: &Gateway, headers: &[(&str, &str)]) -> (u16, reqwest::header::HeaderMap, String) {
    let mut builder = reqwest::Client::new().post(gateway.url("/v1/chat/completions")).json(&request());
    for (name, value) in headers {
        builder = builder.header(*name, *value);
    }
    let response = builder.send().await.unwrap();
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    (status, headers, response.text().await.unwrap())
}

fn text_chunk(text: &str) -> Bytes {
    sse_frame(&chunk_json(COMPLETION_ID, MODEL, json!({"content": text}), None, None))
}

fn role_chunk() -> Bytes {
    sse_frame(&chunk_json(COMPLETION_ID, MODEL, json!({"role": "assistant", "content": ""}), None, None))
}

fn finish_chunk(reason: &str) -> Bytes {
    sse_frame(&chunk_json(COMPLETION_ID, MODEL, json!({}), Some(reason), None))
}

/// An in-band error frame as vLLM sends it: the status as an integer `code`.
fn vllm_error_frame(code: u16, message: &str) -> Bytes {
    sse_frame(&json!({"error": {"message": message, "type": "Error", "param": null, "code": code}}))
}

fn stream_flags(upstream: &FakeUpstream) -> Vec<bool> {
    upstream.received().iter().map(|r| r.json()["stream"].as_bool().unwrap_or(false)).collect()
}

fn error_event(body: &str) -> Value {
    sse_json(body)
        .into_iter()
        .find(|event| event.get("error").is_some())
        .unwrap_or_else(|| panic!("no error event in:\n{body}"))
}

#[tokio::test]
async fn text_streams_as_openai_chunks_with_usage_and_done() {
    let upstream = FakeUpstream::start().await;
    let gateway = gateway(&upstream).await;
    upstream.push(openai_wire::stream(openai_wire::sse_chunks(&["Hel", "lo, ", "Weir"])));

    let (status, headers, body) = post(&gateway, &[]).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(headers["content-type"], "text/event-stream");
    assert_eq!(headers["x-weir-model"], "chat");
    assert_eq!(headers["x-weir-max-tokens"], "100");
    assert_eq!(streamed_text(&body), "Hello, Weir");
    let chunks = sse_json(&body);
    assert_eq!(chunks[0]["choices"][0]["delta"]["role"], "assistant");
    assert!(chunks.iter().all(|c| c["object"] == "chat.completion.chunk" && c["model"] == "chat"), "{body}");
    let finish = chunks.iter().find_map(|c| c.pointer("/choices/0/finish_reason").and_then(Value::as_str));
    assert_eq!(finish, Some("stop"));
    let usage = chunks.last().unwrap();
    assert_eq!(usage["choices"], json!([]));
    assert_eq!(usage["usage"]["prompt_tokens"], 10, "{body}");
    assert!(body.ends_with("data: [DONE]\n\n"), "{body}");
    let sent = upstream.received()[0].json();
    assert_eq!(sent["stream"], true);
    assert_eq!(sent["max_tokens"], 100, "the one output reserve, streamed too");
}

#[tokio::test]
async fn tool_call_fragments_stream_as_tool_calls() {
    let upstream = FakeUpstream::start().await;
    let gateway = gateway(&upstream).await;
    upstream.push(openai_wire::stream(openai_wire::sse_tool_call_chunks(
        "call_7",
        "get_weather",
        &["{\"ci", "ty\": \"Paris\"}"],
    )));

    let (status, _, body) = post(&gateway, &[]).await;
    assert_eq!(status, 200, "{body}");
    let calls: Vec<Value> =
        sse_json(&body).iter().filter_map(|c| c.pointer("/choices/0/delta/tool_calls/0").cloned()).collect();
    assert_eq!(calls[0]["id"], "call_7");
    assert_eq!(calls[0]["function"]["name"], "get_weather");
    let arguments: String = calls.iter().filter_map(|c| c.pointer("/function/arguments")?.as_str()).collect();
    assert_eq!(arguments, "{\"city\": \"Paris\"}");
    assert!(body.contains("\"finish_reason\":\"tool_calls\""), "{body}");
}

#[tokio::test]
async fn reasoning_snapshots_and_markup_tool_calls_are_repaired() {
    let upstream = FakeUpstream::start().await;
    let gateway = gateway(&upstream).await;
    let snapshot = "The capital of France is Paris, which I will now look up.";
    let reasoning =
        |text: &str| sse_frame(&chunk_json(COMPLETION_ID, MODEL, json!({"reasoning_content": text}), None, None));
    upstream.push(openai_wire::stream(vec![
        reasoning("Thinking"),
        reasoning(" about it."),
        // A server in snapshot mode: every chunk resends the whole text so far.
        text_chunk(&snapshot[..30]),
        text_chunk(&snapshot[..45]),
        text_chunk(snapshot),
        text_chunk("\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 3}}\n</tool_call>"),
        finish_chunk("stop"),
        openai_wire::sse_done(),
    ]));

    let (status, _, body) = post(&gateway, &[]).await;
    assert_eq!(status, 200, "{body}");
    let chunks = sse_json(&body);
    let reasoning: String =
        chunks.iter().filter_map(|c| c.pointer("/choices/0/delta/reasoning_content")?.as_str()).collect();
    assert_eq!(reasoning, "Thinking about it.");
    let text = streamed_text(&body);
    assert!(text.starts_with(snapshot), "only the unseen tail is forwarded: {text:?}");
    assert_eq!(text.matches("The capital").count(), 1, "{text:?}");
    assert!(!text.contains("<tool_call>"), "the markup is withheld: {text:?}");
    let call = chunks.iter().find_map(|c| c.pointer("/choices/0/delta/tool_calls/0").cloned()).expect("a tool call");
    assert_eq!(call["function"]["name"], "get_weather");
    let arguments: String =
        chunks.iter().filter_map(|c| c.pointer("/choices/0/delta/tool_calls/0/function/arguments")?.as_str()).collect();
    assert_eq!(serde_json::from_str::<Value>(&arguments).unwrap(), json!({"city": "Paris", "days": 3}));
    assert!(body.contains("\"finish_reason\":\"tool_calls\""), "{body}");
}

#[tokio::test]
async fn an_in_band_5xx_before_output_earns_one_replay_without_streaming() {
    let upstream = FakeUpstream::start().await;
    let gateway = gateway(&upstream).await;
    upstream.push(openai_wire::stream(vec![
        role_chunk(),
        vllm_error_frame(500, "engine died"),
        openai_wire::sse_done(),
    ]));
    upstream.push(openai_wire::completion("Recovered whole."));

    let (status, headers, body) = post(&gateway, &[]).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(streamed_text(&body), "Recovered whole.");
    assert!(body.ends_with("data: [DONE]\n\n"), "{body}");
    assert_eq!(stream_flags(&upstream), vec![true, false], "the same request, replayed once without streaming");
    assert_eq!(headers["x-weir-attempts"], "2", "the replay is an upstream request of its own: counted");
}

#[tokio::test]
async fn an_error_frame_without_a_status_earns_the_replay_too() {
    let upstream = FakeUpstream::start().await;
    let gateway = gateway(&upstream).await;
    upstream.push(openai_wire::stream(vec![openai_wire::sse_error_frame(&openai_wire::stream_error_json())]));
    upstream.push(openai_wire::completion("Fine."));

    let (status, _, body) = post(&gateway, &[]).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(streamed_text(&body), "Fine.");
    assert_eq!(stream_flags(&upstream), vec![true, false]);
}

#[tokio::test]
async fn an_in_band_4xx_is_answered_from_the_first_attempt_unless_it_names_streaming() {
    let upstream = FakeUpstream::start().await;
    let gateway = gateway(&upstream).await;
    upstream.push(openai_wire::stream(vec![vllm_error_frame(400, "SECRET-PROSE bad parameter")]));
    let (status, _, body) = post(&gateway, &[]).await;
    assert_eq!(status, 400, "{body}");
    let error: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(error["error"]["type"], "invalid_request", "{body}");
    assert!(!body.contains("SECRET-PROSE"), "raw provider text never reaches the caller: {body}");
    assert_eq!(stream_flags(&upstream), vec![true], "a 4xx would survive the replay: not replayed");

    upstream.push(openai_wire::stream(vec![vllm_error_frame(400, "streaming is not supported for this model")]));
    upstream.push(openai_wire::completion("Whole instead."));
    let (status, _, body) = post(&gateway, &[]).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(streamed_text(&body), "Whole instead.");
    assert_eq!(stream_flags(&upstream), vec![true, true, false], "a rejection of streaming itself is replayed");
}

#[tokio::test]
async fn opting_out_of_the_replay_makes_no_second_attempt_of_any_kind() {
    let upstream = FakeUpstream::start().await;
    let gateway = gateway(&upstream).await;
    upstream.push(openai_wire::stream(vec![vllm_error_frame(503, "busy")]));
    upstream.push(openai_wire::stream(openai_wire::sse_chunks(&["Second ", "stream."])));

    let (status, headers, body) = post(&gateway, &[("x-weir-stream-replay", "false")]).await;
    assert_eq!(status, 502, "{body}");
    let error: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(error["error"]["type"], "upstream_unavailable", "{body}");
    assert_eq!(stream_flags(&upstream), vec![true], "neither replayed whole nor retried as a stream");
    assert_eq!(headers["x-weir-attempts"], "1");
    assert_eq!(upstream.queued(), 1, "the second answer was never asked for");
}

#[tokio::test]
async fn an_error_frame_after_output_ends_the_stream_with_a_normalized_error() {
    let upstream = FakeUpstream::start().await;
    let gateway = gateway(&upstream).await;
    upstream.push(openai_wire::stream(vec![
        role_chunk(),
        text_chunk("Half an ans"),
        vllm_error_frame(429, "SECRET-PROSE slow down"),
        openai_wire::sse_done(),
    ]));

    let (status, _, body) = post(&gateway, &[]).await;
    assert_eq!(status, 200, "the stream had begun");
    assert_eq!(streamed_text(&body), "Half an ans");
    let error = error_event(&body);
    assert_eq!(error["error"]["type"], "upstream_error", "a capacity signal mid-stream is uncorrectable: {body}");
    let message = error["error"]["message"].as_str().unwrap();
    assert!(message.contains("deltas (") && message.contains("bytes) were delivered"), "names the position: {message}");
    assert!(!body.contains("SECRET-PROSE"), "{body}");
    assert!(!body.contains("[DONE]"), "{body}");
    assert_eq!(upstream.request_count(), 1, "nothing is retried after output");
}

/// A stream the upstream accepted and then dropped before any output ends the
/// turn (the gateway seed): the request may have been processed and billed, so
/// neither a retry nor the replay sends it again.
#[tokio::test]
async fn a_socket_drop_before_output_ends_the_turn_neither_retried_nor_replayed() {
    let upstream = FakeUpstream::start().await;
    let gateway = gateway(&upstream).await;
    upstream.push(openai_wire::stream_then_drop(vec![role_chunk()]));
    upstream.push(openai_wire::stream(openai_wire::sse_chunks(&["Paid twice."])));

    let (status, headers, body) = post(&gateway, &[]).await;
    assert_eq!(status, 502, "{body}");
    let error: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(error["error"]["type"], "upstream_unavailable", "{body}");
    assert!(!body.contains("Paid twice."), "{body}");
    assert_eq!(headers["x-weir-attempts"], "1");
    assert_eq!(upstream.request_count(), 1, "the second answer was never asked for");
    assert_eq!(upstream.queued(), 1);
}

#[tokio::test]
async fn a_socket_drop_after_output_ends_the_stream_with_an_error() {
    let upstream = FakeUpstream::start().await;
    let gateway = gateway(&upstream).await;
    upstream.push(openai_wire::stream_then_drop(vec![role_chunk(), text_chunk("Cut "), text_chunk("off")]));

    let (status, _, body) = post(&gateway, &[]).await;
    assert_eq!(status, 200);
    assert_eq!(streamed_text(&body), "Cut off");
    assert_eq!(error_event(&body)["error"]["type"], "upstream_unavailable", "{body}");
    assert_eq!(upstream.request_count(), 1);
}

#[tokio::test]
async fn a_stream_that_ends_without_a_stop_is_reported_not_passed_off_as_complete() {
    let upstream = FakeUpstream::start().await;
    let gateway = gateway(&upstream).await;
    upstream.push(openai_wire::stream(vec![role_chunk(), text_chunk("Trunc")]));

    let (status, _, body) = post(&gateway, &[]).await;
    assert_eq!(status, 200);
    assert_eq!(streamed_text(&body), "Trunc");
    assert!(error_event(&body)["error"]["message"].as_str().unwrap().contains("after"), "{body}");
    assert!(!body.contains("[DONE]"), "{body}");
}

#[tokio::test]
async fn an_http_429_before_the_stream_is_retried_like_any_call() {
    let upstream = FakeUpstream::start().await;
    let gateway = gateway(&upstream).await;
    upstream.push(openai_wire::rate_limited(0));
    upstream.push(openai_wire::stream(openai_wire::sse_chunks(&["After the wait."])));

    let (status, headers, body) = post(&gateway, &[]).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(streamed_text(&body), "After the wait.");
    assert_eq!(headers["x-weir-attempts"], "2");
}

#[tokio::test]
async fn a_refusal_before_output_is_a_typed_error_and_a_cut_after_output_a_typed_stop() {
    let upstream = FakeUpstream::start().await;
    let gateway = gateway(&upstream).await;
    upstream.push(openai_wire::stream(vec![role_chunk(), finish_chunk("content_filter"), openai_wire::sse_done()]));
    let (status, _, body) = post(&gateway, &[]).await;
    assert_eq!(status, 422, "{body}");
    assert_eq!(serde_json::from_str::<Value>(&body).unwrap()["error"]["type"], "refused");

    upstream.push(openai_wire::stream(vec![
        role_chunk(),
        text_chunk("Once upon"),
        finish_chunk("length"),
        openai_wire::sse_done(),
    ]));
    let (status, _, body) = post(&gateway, &[]).await;
    assert_eq!(status, 200);
    assert!(body.contains("\"finish_reason\":\"length\""), "the truncation reaches the caller as a typed stop: {body}");
}

#[tokio::test]
async fn a_client_that_leaves_cancels_the_upstream_and_releases_admission() {
    let upstream = FakeUpstream::start().await;
    let gateway = gateway(&upstream).await;
    let mut chunks = vec![role_chunk()];
    chunks.extend((0..200).map(|i| text_chunk(&format!("piece {i} "))));
    upstream.push(openai_wire::stream_with_pause(chunks, Duration::from_millis(50)));

    let mut response =
        reqwest::Client::new().post(gateway.url("/v1/chat/completions")).json(&request()).send().await.unwrap();
    assert_eq!(response.status(), 200);
    let first = response.chunk().await.unwrap().unwrap();
    assert!(String::from_utf8_lossy(&first).contains("chat.completion.chunk"));
    let in_flight = |models: Value| models["data"][0]["weir"]["admission"]["in_flight"].as_u64().unwrap();
    let models = reqwest::get(gateway.url("/v1/models")).await.unwrap().json().await.unwrap();
    assert_eq!(in_flight(models), 1, "the live stream holds its permit");
    drop(response);

    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    loop {
        let models = reqwest::get(gateway.url("/v1/models")).await.unwrap().json().await.unwrap();
        if in_flight(models) == 0 {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "the permit was not released after the client left");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    gateway.wait_for_stderr("the caller left; cancelling the upstream stream", Duration::from_secs(5)).await;
}

/// A structured answer is validated whole (with correction turns), which a stream
/// already shown to the caller cannot be: it is refused up front.
#[tokio::test]
async fn a_structured_answer_is_not_streamed() {
    let upstream = FakeUpstream::start().await;
    let gateway = gateway(&upstream).await;
    let mut body = request();
    body["response_format"] =
        json!({"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "object"}}});
    let response = reqwest::Client::new().post(gateway.url("/v1/chat/completions")).json(&body).send().await.unwrap();
    assert_eq!(response.status(), 400);
    let error: Value = response.json().await.unwrap();
    assert!(error["error"]["message"].as_str().unwrap().contains("cannot be streamed"), "{error}");
    assert_eq!(upstream.request_count(), 0);
}

/// The official `openai` Python client's streaming API on the gateway's SSE: text,
/// usage and tool calls reassembled from their deltas, a markup tool call among them.
#[tokio::test]
async fn the_official_python_client_reassembles_streamed_text_and_tool_calls() {
    let upstream = FakeUpstream::start().await;
    let gateway = gateway(&upstream).await;
    let base_url = gateway.url("/v1");
    upstream.push(openai_wire::stream(openai_wire::sse_chunks(&["One, ", "two, ", "three."])));
    upstream.push(openai_wire::stream(openai_wire::sse_tool_call_chunks(
        "call_py",
        "get_weather",
        &["{\"city\"", ": \"Paris\"}"],
    )));
    upstream.push(openai_wire::stream(vec![
        role_chunk(),
        text_chunk("Let me check. <tool_call>{\"name\": \"get_weather\", "),
        text_chunk("\"arguments\": {\"city\": \"Lyon\"}}</tool_call>"),
        finish_chunk("stop"),
        openai_wire::sse_done(),
    ]));

    let lines = run_openai_client(&base_url, "chat", "stream,stream_tools,stream_tools");
    assert_eq!(lines[0]["text"], "One, two, three.");
    assert_eq!(lines[0]["finish_reason"], "stop");
    assert_eq!(lines[0]["usage"]["prompt_tokens"], 10);
    assert_eq!(
        lines[1]["tool_calls"],
        json!([{"id": "call_py", "name": "get_weather", "arguments": {"city": "Paris"}}])
    );
    assert_eq!(lines[1]["finish_reason"], "tool_calls");
    assert_eq!(lines[2]["text"], "Let me check. ");
    assert_eq!(lines[2]["tool_calls"][0]["name"], "get_weather");
    assert_eq!(lines[2]["tool_calls"][0]["arguments"], json!({"city": "Lyon"}));
    assert_eq!(lines[2]["finish_reason"], "tool_calls");
}

/// The library's stream, embedded in a service: the same deltas as a
/// `futures::Stream`, and `into_answer` for the whole answer.
#[tokio::test]
async fn the_library_streams_deltas_and_collects_the_answer() {
    use futures_util::StreamExt;
    use weir_host::types::{Conversation, StreamDelta};

    let upstream = FakeUpstream::start().await;
    let weir = weir_host::Weir::builder()
        .config(weir_host::Config::from_toml(&config(&upstream), "streaming test").unwrap())
        .providers_dir(tempfile::tempdir().unwrap().path())
        .build()
        .unwrap();
    upstream.push(openai_wire::stream(openai_wire::sse_chunks(&["A", "B", "C"])));
    upstream.push(openai_wire::stream(openai_wire::sse_chunks(&["Whole ", "answer."])));

    let stream = weir.chat_stream(weir_host::ChatRequest::new("chat", Conversation::user("Hi"))).await.unwrap();
    assert_eq!(stream.stamp().provider.as_deref(), Some("openai-compatible"));
    let texts: Vec<String> = stream
        .filter_map(|item| async move {
            match item.unwrap() {
                StreamDelta::Text(text) => Some(text),
                _ => None,
            }
        })
        .collect()
        .await;
    assert_eq!(texts.concat(), "ABC");

    let answer = weir.chat_stream(weir_host::ChatRequest::new("chat", Conversation::user("Hi"))).await.unwrap();
    let answer = answer.into_answer().await.unwrap();
    assert_eq!(answer.text(), "Whole answer.");
    assert_eq!(answer.usage.unwrap().input, 10);
}

/// A client that stops reading stops the upstream read: the gateway pulls the next
/// upstream bytes only as the client takes chunks, so the fake upstream cannot hand
/// its whole stream to the socket while nobody reads.
#[tokio::test]
async fn a_slow_client_slows_the_upstream_read() {
    let upstream = FakeUpstream::start().await;
    let gateway = gateway(&upstream).await;
    // 40 MB: far more than the kernel's loopback socket buffers can hold. Each piece
    // starts differently, so none looks like a cumulative snapshot of the last.
    const CHUNKS: usize = 20_000;
    const PIECE: usize = 2_000;
    let mut chunks = vec![role_chunk()];
    chunks.extend((0..CHUNKS).map(|i| text_chunk(&format!("{i:06} {}", "x".repeat(PIECE - 7)))));
    chunks.push(finish_chunk("stop"));
    chunks.push(openai_wire::sse_done());
    let total = chunks.len();
    upstream.push(openai_wire::stream(chunks));

    let mut response =
        reqwest::Client::new().post(gateway.url("/v1/chat/completions")).json(&request()).send().await.unwrap();
    response.chunk().await.unwrap().unwrap();
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let sent_while_paused = upstream.chunks_sent();
    eprintln!("upstream chunks taken while the client paused: {sent_while_paused} of {total}");
    assert!(
        sent_while_paused < total / 2,
        "{sent_while_paused} of {total} upstream chunks went out while the client read nothing"
    );

    let mut received = 0;
    while let Some(bytes) = response.chunk().await.unwrap() {
        received += bytes.len();
    }
    assert_eq!(upstream.chunks_sent(), total, "everything flows once the client reads");
    assert!(received > CHUNKS * PIECE, "{received} bytes");
}

/// An in-band 429 before any output earns the replay without streaming (a second
/// attempt can change a rate limit's outcome).
#[tokio::test]
async fn an_in_band_429_before_output_is_replayed_whole() {
    let upstream = FakeUpstream::start().await;
    let gateway = gateway(&upstream).await;
    upstream.push(openai_wire::stream(vec![role_chunk(), vllm_error_frame(429, "slow down")]));
    upstream.push(openai_wire::completion("After the replay."));

    let (status, _, body) = post(&gateway, &[]).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(streamed_text(&body), "After the replay.");
    assert_eq!(stream_flags(&upstream), vec![true, false]);
}
