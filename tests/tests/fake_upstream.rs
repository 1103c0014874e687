//! The fake upstream, exercised over real loopback HTTP with reqwest: if these pass, a
//! gateway test failing against the fake is the gateway's fault, not the fake's.

// Test code: a failed step should stop the test with its message.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use weir_tests::openai_wire::{self, approx_tokens};
use weir_tests::{FakeUpstream, Scripted};

fn client() -> reqwest::Client {
    reqwest::Client::builder().timeout(Duration::from_secs(10)).build().unwrap()
}

async fn post_chat(upstream: &FakeUpstream, body: &Value) -> reqwest::Response {
    client().post(format!("{}/chat/completions", upstream.base_url())).json(body).send().await.unwrap()
}

fn ask(text: &str) -> Value {
    json!({"model": "gpt-4o-mini", "messages": [{"role": "user", "content": text}]})
}

#[tokio::test]
async fn echo_answers_a_valid_chat_completion() {
    let upstream = FakeUpstream::start().await;
    let request = json!({
        "model": "gpt-4o-mini",
        "messages": [
            {"role": "system", "content": "Answer briefly."},
            {"role": "user", "content": "first question"},
            {"role": "assistant", "content": "first answer"},
            {"role": "user", "content": "Hello there"}
        ]
    });
    let response = post_chat(&upstream, &request).await;
    assert_eq!(response.status(), 200);
    assert!(response.headers().contains_key("x-request-id"));
    assert_eq!(response.headers()["content-type"], "application/json");
    let body: Value = response.json().await.unwrap();

    assert_eq!(body["object"], "chat.completion");
    assert!(body["id"].as_str().unwrap().starts_with("chatcmpl-"));
    assert_eq!(body["model"], "gpt-4o-mini", "echoes the requested model");
    let choice = &body["choices"][0];
    assert_eq!(choice["index"], 0);
    assert_eq!(choice["message"]["role"], "assistant");
    assert_eq!(choice["message"]["content"], "echo: Hello there");
    assert_eq!(choice["finish_reason"], "stop");

    let all = "Answer briefly.first questionfirst answerHello there";
    let usage = &body["usage"];
    assert_eq!(usage["prompt_tokens"], approx_tokens(all));
    assert_eq!(usage["completion_tokens"], approx_tokens("echo: Hello there"));
    assert_eq!(usage["total_tokens"], approx_tokens(all) + approx_tokens("echo: Hello there"));
    assert_eq!(usage["prompt_tokens_details"]["cached_tokens"], 0);
    assert_eq!(usage["completion_tokens_details"]["reasoning_tokens"], 0);
}

#[tokio::test]
async fn echo_joins_the_text_parts_of_array_content() {
    let upstream = FakeUpstream::start().await;
    let request = json!({"model": "m", "messages": [{"role": "user", "content": [
        {"type": "text", "text": "What is"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBOR"}},
        {"type": "text", "text": "in this image?"}
    ]}]});
    let body: Value = post_chat(&upstream, &request).await.json().await.unwrap();
    assert_eq!(body["choices"][0]["message"]["content"], "echo: What is in this image?");
}

#[tokio::test]
async fn echo_ids_are_deterministic_per_request() {
    let upstream = FakeUpstream::start().await;
    let first: Value = post_chat(&upstream, &ask("a")).await.json().await.unwrap();
    let second: Value = post_chat(&upstream, &ask("a")).await.json().await.unwrap();
    assert_ne!(first["id"], second["id"]);
    let again = FakeUpstream::start().await;
    let replay: Value = post_chat(&again, &ask("a")).await.json().await.unwrap();
    assert_eq!(first, replay, "same request sequence, same bodies");
}

#[tokio::test]
async fn echo_streams_openai_sse_with_usage_when_asked() {
    let upstream = FakeUpstream::start().await;
    let mut request = ask("stream me please");
    request["stream"] = json!(true);
    request["stream_options"] = json!({"include_usage": true});
    let response = post_chat(&upstream, &request).await;
    assert_eq!(response.status(), 200);
    assert!(response.headers()["content-type"].to_str().unwrap().starts_with("text/event-stream"));
    let body = response.text().await.unwrap();

    let events = openai_wire::sse_data(&body);
    assert_eq!(events.last().map(String::as_str), Some("[DONE]"));
    let chunks = openai_wire::sse_json(&body);
    assert!(chunks.iter().all(|c| c["object"] == "chat.completion.chunk" && c["id"] == chunks[0]["id"]));
    assert_eq!(chunks[0]["choices"][0]["delta"]["role"], "assistant");
    assert_eq!(openai_wire::streamed_text(&body), "echo: stream me please");
    assert!(chunks.len() > 4, "content arrives in several deltas");

    let finish = &chunks[chunks.len() - 2];
    assert_eq!(finish["choices"][0]["finish_reason"], "stop");
    assert!(finish["usage"].is_null());
    let usage_chunk = &chunks[chunks.len() - 1];
    assert_eq!(usage_chunk["choices"], json!([]));
    assert_eq!(usage_chunk["usage"]["completion_tokens"], approx_tokens("echo: stream me please"));
}

#[tokio::test]
async fn echo_stream_without_include_usage_has_no_usage_chunk() {
    let upstream = FakeUpstream::start().await;
    let mut request = ask("hi");
    request["stream"] = json!(true);
    let body = post_chat(&upstream, &request).await.text().await.unwrap();
    let chunks = openai_wire::sse_json(&body);
    assert!(chunks.iter().all(|c| c.get("usage").is_none()));
    assert_eq!(chunks.last().unwrap()["choices"][0]["finish_reason"], "stop");
}

#[tokio::test]
async fn scripted_answers_are_consumed_in_fifo_order_then_echo_resumes() {
    let upstream = FakeUpstream::start().await;
    upstream.push(openai_wire::rate_limited(3));
    upstream.push(openai_wire::completion("second"));
    assert_eq!(upstream.queued(), 2);

    let first = post_chat(&upstream, &ask("x")).await;
    assert_eq!(first.status(), 429);
    assert_eq!(first.headers()["retry-after"], "3");
    let error: Value = first.json().await.unwrap();
    assert_eq!(error["error"]["code"], "rate_limit_exceeded");

    let second: Value = post_chat(&upstream, &ask("x")).await.json().await.unwrap();
    assert_eq!(second["choices"][0]["message"]["content"], "second");

    let third: Value = post_chat(&upstream, &ask("x")).await.json().await.unwrap();
    assert_eq!(third["choices"][0]["message"]["content"], "echo: x");
    assert_eq!(upstream.queued(), 0);
    assert_eq!(upstream.request_count(), 3);
}

#[tokio::test]
async fn scripts_apply_to_any_path() {
    let upstream = FakeUpstream::start().await;
    upstream.push(openai_wire::completion("scripted"));
    let response = client().get(format!("{}/anything/else", upstream.base_url())).send().await.unwrap();
    assert_eq!(response.status(), 200);
}

#[tokio::test]
async fn received_records_method_path_query_headers_and_body() {
    let upstream = FakeUpstream::start().await;
    let request = ask("record me");
    let response = client()
        .post(format!("{}/chat/completions?api-version=2024-10-21", upstream.base_url()))
        .header("Authorization", "Bearer sk-test")
        .header("OpenAI-Project", "proj_1")
        .json(&request)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);

    let received = upstream.received();
    assert_eq!(received.len(), 1);
    let got = &received[0];
    assert_eq!(got.method, "POST");
    assert_eq!(got.path, "/v1/chat/completions");
    assert_eq!(got.query.as_deref(), Some("api-version=2024-10-21"));
    assert_eq!(got.header("authorization"), Some("Bearer sk-test"));
    assert_eq!(got.header("OPENAI-PROJECT"), Some("proj_1"), "lookup ignores case");
    assert!(got.headers.iter().any(|(name, _)| name == "openai-project"), "names are stored lowercase");
    assert_eq!(got.header("content-type"), Some("application/json"));
    assert_eq!(got.json(), request);
}

#[tokio::test]
async fn drop_closes_the_connection_without_a_response() {
    let upstream = FakeUpstream::start().await;
    upstream.push(Scripted::Drop);
    let error = post_chat_result(&upstream, &ask("x")).await.unwrap_err();
    assert!(error.status().is_none(), "no response head: {error:?}");
    assert!(!error.is_timeout(), "closed, not hung: {error:?}");
    assert!(is_connection_reset(&error), "a reset, not a tidy close: {error:?}");
    assert_eq!(upstream.request_count(), 1, "the request itself arrived");

    // The fake keeps serving new connections afterwards.
    let after = post_chat(&upstream, &ask("again")).await;
    assert_eq!(after.status(), 200);
}

#[tokio::test]
async fn a_client_leaving_during_a_delay_is_counted_as_abandoned() {
    let upstream = FakeUpstream::start().await;
    upstream.push(openai_wire::completion("late").after(Duration::from_secs(30)));
    let impatient = reqwest::Client::builder().timeout(Duration::from_millis(200)).build().unwrap();
    let url = format!("{}/chat/completions", upstream.base_url());
    let error = impatient.post(&url).json(&ask("x")).send().await.unwrap_err();
    assert!(error.is_timeout(), "{error:?}");
    let deadline = Instant::now() + Duration::from_secs(10);
    while upstream.abandoned() == 0 {
        assert!(Instant::now() < deadline, "the fake never saw the client leave");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(upstream.abandoned(), 1);

    // Answers played whole, and resets the fake makes itself, never count.
    assert_eq!(post_chat(&upstream, &ask("y")).await.status(), 200);
    upstream.push(Scripted::Drop.after(Duration::from_millis(10)));
    assert!(post_chat_result(&upstream, &ask("z")).await.is_err());
    upstream.push(openai_wire::completion("prompt"));
    assert_eq!(post_chat(&upstream, &ask("w")).await.status(), 200);
    assert_eq!(upstream.abandoned(), 1);
}

fn is_connection_reset(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut source = Some(error);
    while let Some(current) = source {
        if current.downcast_ref::<std::io::Error>().is_some_and(|io| io.kind() == std::io::ErrorKind::ConnectionReset) {
            return true;
        }
        source = current.source();
    }
    false
}

async fn post_chat_result(upstream: &FakeUpstream, body: &Value) -> reqwest::Result<reqwest::Response> {
    client().post(format!("{}/chat/completions", upstream.base_url())).json(body).send().await
}

#[tokio::test]
async fn delay_holds_the_response_back() {
    let upstream = FakeUpstream::start().await;
    let delay = Duration::from_millis(300);
    upstream.push(openai_wire::completion("late").after(delay));
    let started = Instant::now();
    let body: Value = post_chat(&upstream, &ask("x")).await.json().await.unwrap();
    assert!(started.elapsed() >= delay, "answered after {:?}", started.elapsed());
    assert_eq!(body["choices"][0]["message"]["content"], "late");
}

#[tokio::test]
async fn delay_longer_than_the_client_timeout_times_out() {
    let upstream = FakeUpstream::start().await;
    upstream.push(Scripted::Delay {
        delay: Duration::from_secs(30),
        then: Box::new(openai_wire::completion("never seen")),
    });
    let error = reqwest::Client::builder()
        .timeout(Duration::from_millis(200))
        .build()
        .unwrap()
        .post(format!("{}/chat/completions", upstream.base_url()))
        .json(&ask("x"))
        .send()
        .await
        .unwrap_err();
    assert!(error.is_timeout(), "{error:?}");
}

#[tokio::test]
async fn stream_script_sends_chunks_one_by_one_with_pauses() {
    let upstream = FakeUpstream::start().await;
    let frames = openai_wire::sse_chunks(&["Hel", "lo"]);
    let expected: Vec<u8> = frames.iter().flatten().copied().collect();
    let pause = Duration::from_millis(40);
    upstream.push(openai_wire::stream_with_pause(frames.clone(), pause));

    let started = Instant::now();
    let mut response = post_chat(&upstream, &ask("x")).await;
    assert_eq!(response.status(), 200);
    let mut received = Vec::new();
    let mut pieces = 0;
    while let Some(chunk) = response.chunk().await.unwrap() {
        received.extend_from_slice(&chunk);
        pieces += 1;
    }
    let pauses = u32::try_from(frames.len() - 1).unwrap();
    assert!(started.elapsed() >= pause * pauses);
    assert!(pieces > 1, "chunks are flushed separately, got {pieces} piece(s)");
    assert_eq!(received, expected, "bytes arrive exactly as scripted");

    let body = String::from_utf8(received).unwrap();
    assert_eq!(openai_wire::streamed_text(&body), "Hello");
}

#[tokio::test]
async fn stream_script_can_carry_an_in_band_error() {
    let upstream = FakeUpstream::start().await;
    let mut frames = openai_wire::sse_chunks(&["partial"]);
    frames.truncate(2); // role chunk and one delta, then the failure
    frames.push(openai_wire::sse_error_frame(&openai_wire::stream_error_json()));
    upstream.push(openai_wire::stream(frames));
    let body = post_chat(&upstream, &ask("x")).await.text().await.unwrap();
    let chunks = openai_wire::sse_json(&body);
    assert_eq!(chunks.last().unwrap()["error"]["type"], "server_error");
    assert!(!openai_wire::sse_data(&body).contains(&"[DONE]".to_owned()));
}

#[tokio::test]
async fn unknown_paths_get_openai_shaped_404s() {
    let upstream = FakeUpstream::start().await;
    let response = client().post(format!("{}/nope", upstream.base_url())).json(&json!({})).send().await.unwrap();
    assert_eq!(response.status(), 404);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["message"], "Invalid URL (POST /v1/nope)");
    assert_eq!(body["error"]["type"], "invalid_request_error");
    assert!(body["error"]["param"].is_null() && body["error"]["code"].is_null());

    let wrong_method = client().get(format!("{}/chat/completions", upstream.base_url())).send().await.unwrap();
    assert_eq!(wrong_method.status(), 404);
}

#[tokio::test]
async fn models_lists_openai_models() {
    let upstream = FakeUpstream::start().await;
    let body: Value =
        client().get(format!("{}/models", upstream.base_url())).send().await.unwrap().json().await.unwrap();
    assert_eq!(body["object"], "list");
    assert_eq!(body["data"][0]["object"], "model");
    assert!(body["data"].as_array().unwrap().iter().any(|m| m["id"] == "gpt-4o-mini"));
}

#[tokio::test]
async fn malformed_requests_get_openai_400s() {
    let upstream = FakeUpstream::start().await;
    let not_json =
        client().post(format!("{}/chat/completions", upstream.base_url())).body("{not json").send().await.unwrap();
    assert_eq!(not_json.status(), 400);
    let no_messages = post_chat(&upstream, &json!({"model": "m"})).await;
    assert_eq!(no_messages.status(), 400);
    let body: Value = no_messages.json().await.unwrap();
    assert_eq!(body["error"]["param"], "messages");
}

#[tokio::test]
async fn error_builders_arrive_with_their_status_and_shape() {
    let upstream = FakeUpstream::start().await;
    let cases = [
        (openai_wire::insufficient_quota(), 429, "insufficient_quota"),
        (openai_wire::invalid_api_key(), 401, "invalid_request_error"),
        (openai_wire::model_not_found("gpt-9"), 404, "invalid_request_error"),
        (openai_wire::context_length_exceeded(), 400, "invalid_request_error"),
        (openai_wire::server_error(), 500, "server_error"),
        (openai_wire::overloaded_503(), 503, "server_error"),
        (openai_wire::vllm_error(400, "bad"), 400, "BadRequestError"),
    ];
    for (script, _, _) in &cases {
        upstream.push(script.clone());
    }
    for (_, status, error_type) in cases {
        let response = post_chat(&upstream, &ask("x")).await;
        assert_eq!(response.status(), status);
        let body: Value = response.json().await.unwrap();
        assert_eq!(body["error"]["type"], error_type, "status {status}");
    }

    upstream.push(openai_wire::bad_gateway_html());
    let html = post_chat(&upstream, &ask("x")).await;
    assert_eq!(html.status(), 502);
    assert_eq!(html.headers()["content-type"], "text/html");
    assert!(html.text().await.unwrap().contains("502 Bad Gateway"));
}

#[tokio::test]
async fn dropping_the_fake_closes_its_port() {
    let upstream = FakeUpstream::start().await;
    let addr = upstream.addr();
    assert!(upstream.base_url().ends_with("/v1"));
    drop(upstream);
    let error = client().get(format!("http://{addr}/v1/models")).send().await.unwrap_err();
    assert!(error.is_connect(), "{error:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_requests_are_all_recorded() {
    let upstream = FakeUpstream::start().await;
    let url = format!("{}/chat/completions", upstream.base_url());
    let tasks: Vec<_> = (0..8)
        .map(|i| {
            let url = url.clone();
            tokio::spawn(
                async move { client().post(url).json(&ask(&format!("n{i}"))).send().await.map(|r| r.status()) },
            )
        })
        .collect();
    for task in tasks {
        assert_eq!(task.await.unwrap().unwrap(), 200);
    }
    let received = upstream.wait_for_requests(8, Duration::from_secs(5)).await;
    assert_eq!(received.len(), 8);
}
