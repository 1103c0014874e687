//! The fake upstream, exercised over real loopback HTTP with reqwest: if these pass, a
//! gateway test failing against the fake is the gateway's fault, not the fake's. Chat
//! first, then embeddings and rerank.

// Test code: a failed step should stop the test with its message.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use weir_tests::fake_upstream::{NATIVE_EMBEDDING_WIDTH, fake_embedding, fake_ranking, fake_relevance};
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

// ---------------------------------------------------------------------------------------
// Embeddings and rerank
// ---------------------------------------------------------------------------------------

async fn post(upstream: &FakeUpstream, path: &str, body: &Value) -> reqwest::Response {
    client().post(format!("{}{path}", upstream.base_url())).json(body).send().await.unwrap()
}

fn norm(vector: &[f32]) -> f64 {
    vector.iter().map(|x| f64::from(*x) * f64::from(*x)).sum::<f64>().sqrt()
}

fn strings(texts: &[&str]) -> Vec<String> {
    texts.iter().map(|text| (*text).to_owned()).collect()
}

#[tokio::test]
async fn embeddings_answer_one_unit_vector_per_input_in_input_order() {
    let upstream = FakeUpstream::start().await;
    let inputs = ["the first text", "a second, longer text", "third"];
    let request = json!({"model": "text-embedding-3-small", "input": inputs, "encoding_format": "float"});
    let response = post(&upstream, "/embeddings", &request).await;
    assert_eq!(response.status(), 200);
    assert!(response.headers()["x-request-id"].to_str().unwrap().starts_with("req_"));
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["object"], "list");
    assert_eq!(body["model"], "text-embedding-3-small", "echoes the requested model");
    let items = body["data"].as_array().unwrap();
    assert_eq!(items.len(), 3);
    for (index, item) in items.iter().enumerate() {
        assert_eq!(item["object"], "embedding");
        assert_eq!(item["index"], index);
    }
    let vectors = openai_wire::embedding_vectors(&body);
    for (vector, text) in vectors.iter().zip(inputs) {
        assert_eq!(vector.len(), NATIVE_EMBEDDING_WIDTH);
        assert_eq!(*vector, fake_embedding(text, NATIVE_EMBEDDING_WIDTH), "predictable from the text");
        assert!((norm(vector) - 1.0).abs() < 1e-5, "unit length, as OpenAI's");
    }
    assert_ne!(vectors[0], vectors[1]);
    assert_ne!(vectors[1], vectors[2]);
    let tokens: u64 = inputs.iter().map(|text| approx_tokens(text)).sum();
    assert_eq!(body["usage"], json!({"prompt_tokens": tokens, "total_tokens": tokens}));

    let received = upstream.received();
    assert_eq!(received.len(), 1);
    assert_eq!((received[0].method.as_str(), received[0].path.as_str()), ("POST", "/v1/embeddings"));
    assert_eq!(received[0].json(), request, "the request is recorded as sent");
}

#[tokio::test]
async fn embeddings_are_the_same_for_the_same_text() {
    let upstream = FakeUpstream::start().await;
    let request = json!({"model": "m", "input": ["same", "other", "same"]});
    let first: Value = post(&upstream, "/embeddings", &request).await.json().await.unwrap();
    let again = FakeUpstream::start().await;
    let second: Value = post(&again, "/embeddings", &request).await.json().await.unwrap();
    assert_eq!(first, second);
    let vectors = openai_wire::embedding_vectors(&first);
    assert_eq!(vectors[0], vectors[2]);
    assert_ne!(vectors[0], vectors[1]);
}

#[tokio::test]
async fn a_string_input_is_one_embedding() {
    let upstream = FakeUpstream::start().await;
    let body: Value =
        post(&upstream, "/embeddings", &json!({"model": "m", "input": "just one"})).await.json().await.unwrap();
    assert_eq!(openai_wire::embedding_vectors(&body), vec![fake_embedding("just one", NATIVE_EMBEDDING_WIDTH)]);
    assert_eq!(body["usage"]["prompt_tokens"], approx_tokens("just one"));
}

#[tokio::test]
async fn dimensions_give_the_leading_part_renormalized() {
    let upstream = FakeUpstream::start().await;
    let request = json!({"model": "text-embedding-3-large", "input": ["fold me"], "dimensions": 256});
    let body: Value = post(&upstream, "/embeddings", &request).await.json().await.unwrap();
    let vector = &openai_wire::embedding_vectors(&body)[0];
    assert_eq!(vector.len(), 256);
    assert!((norm(vector) - 1.0).abs() < 1e-5);
    let native = fake_embedding("fold me", NATIVE_EMBEDDING_WIDTH);
    let prefix_norm = norm(&native[..256]);
    for (short, long) in vector.iter().zip(&native) {
        assert!((f64::from(*short) - f64::from(*long) / prefix_norm).abs() < 1e-6, "same direction as the prefix");
    }
}

#[tokio::test]
async fn base64_embeddings_are_the_float_ones_as_little_endian_bytes() {
    let upstream = FakeUpstream::start().await;
    let inputs = ["one", "two"];
    let floats: Value =
        post(&upstream, "/embeddings", &json!({"model": "m", "input": inputs})).await.json().await.unwrap();
    let base64: Value =
        post(&upstream, "/embeddings", &json!({"model": "m", "input": inputs, "encoding_format": "base64"}))
            .await
            .json()
            .await
            .unwrap();
    let text = base64["data"][0]["embedding"].as_str().expect("base64 is a string");
    assert_eq!(openai_wire::vector_from_base64(text), fake_embedding("one", NATIVE_EMBEDDING_WIDTH));
    assert_eq!(openai_wire::embedding_vectors(&base64), openai_wire::embedding_vectors(&floats));
    assert_eq!(base64["usage"], floats["usage"]);
}

#[tokio::test]
async fn embeddings_refuse_what_openai_refuses() {
    let upstream = FakeUpstream::start().await;
    let too_many: Vec<String> = (0..2049).map(|i| format!("text {i}")).collect();
    let cases = [
        (json!({"input": ["a"]}), None),
        (json!({"model": "m", "input": []}), Some("input")),
        (json!({"model": "m", "input": ["a", ""]}), Some("input")),
        (json!({"model": "m", "input": [[1, 2, 3]]}), Some("input")),
        (json!({"model": "m"}), Some("input")),
        (json!({"model": "m", "input": too_many}), Some("input")),
        (json!({"model": "m", "input": ["a"], "dimensions": 0}), Some("dimensions")),
        (json!({"model": "m", "input": ["a"], "dimensions": 1537}), Some("dimensions")),
        (json!({"model": "text-embedding-ada-002", "input": ["a"], "dimensions": 512}), Some("dimensions")),
        (json!({"model": "m", "input": ["a"], "encoding_format": "int8"}), Some("encoding_format")),
    ];
    for (request, param) in cases {
        let response = post(&upstream, "/embeddings", &request).await;
        assert_eq!(response.status(), 400, "{request}");
        let body: Value = response.json().await.unwrap();
        assert_eq!(body["error"]["type"], "invalid_request_error", "{request}");
        assert_eq!(body["error"]["param"].as_str(), param, "{request}");
    }
    let exactly_the_limit: Vec<String> = (0..2048).map(|i| format!("t{i}")).collect();
    let response =
        post(&upstream, "/embeddings", &json!({"model": "m", "input": exactly_the_limit, "dimensions": 4})).await;
    assert_eq!(response.status(), 200, "2048 inputs are allowed");
    let garbage = client().post(format!("{}/embeddings", upstream.base_url())).body("{nope").send().await.unwrap();
    assert_eq!(garbage.status(), 400);
}

#[test]
fn relevance_is_the_share_of_query_words_found() {
    assert_eq!(fake_relevance("capital of France", "Paris is the capital of France."), 1.0);
    assert!((fake_relevance("capital of France", "The capital of Peru") - 2.0 / 3.0).abs() < 1e-12);
    assert_eq!(fake_relevance("capital", "a cat"), 0.0);
    assert_eq!(fake_relevance("Capital CAPITAL", "capital"), 1.0, "case-folded, distinct words");
    assert_eq!(fake_relevance("", "anything"), 0.0);
}

#[tokio::test]
async fn rerank_ranks_best_first_and_honours_top_n() {
    let upstream = FakeUpstream::start().await;
    let documents = strings(&["a cat sat", "the capital of Peru", "Paris is the capital of France", "France"]);
    let request = json!({"model": "BAAI/bge-reranker-v2-m3", "query": "capital of France", "documents": documents});
    let response = post(&upstream, "/rerank", &request).await;
    assert_eq!(response.status(), 200);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["model"], "BAAI/bge-reranker-v2-m3");
    assert!(body["id"].as_str().unwrap().starts_with("rerank-"));
    let results = openai_wire::rerank_results(&body);
    assert_eq!(results.iter().map(|(index, _)| *index).collect::<Vec<_>>(), vec![2, 1, 3, 0]);
    assert_eq!(results, fake_ranking("capital of France", &documents, None));
    assert_eq!(results[0].1, 1.0);
    assert_eq!(body["results"][0]["document"]["text"], "Paris is the capital of France");
    let query_tokens = approx_tokens("capital of France");
    let tokens: u64 = documents.iter().map(|d| query_tokens + approx_tokens(d)).sum();
    assert_eq!(body["usage"], json!({"prompt_tokens": tokens, "total_tokens": tokens}));

    let mut top = request.clone();
    top["top_n"] = json!(2);
    top["return_documents"] = json!(false);
    let body: Value = post(&upstream, "/rerank", &top).await.json().await.unwrap();
    assert_eq!(openai_wire::rerank_results(&body), results[..2].to_vec());
    assert!(body["results"][0].get("document").is_none());
    let mut all = request.clone();
    all["top_n"] = json!(0);
    let body: Value = post(&upstream, "/rerank", &all).await.json().await.unwrap();
    assert_eq!(openai_wire::rerank_results(&body).len(), 4, "top_n 0 is all, as at vLLM");

    let received = upstream.received();
    assert_eq!(received.len(), 3);
    assert!(received.iter().all(|r| r.path == "/v1/rerank"));
    assert_eq!(received[1].json()["top_n"], 2);
}

#[tokio::test]
async fn rerank_refuses_in_vllm_shape() {
    let upstream = FakeUpstream::start().await;
    for request in [
        json!({"documents": ["d"]}),
        json!({"query": "q"}),
        json!({"query": "q", "documents": [1]}),
        json!({"query": "q", "documents": ["d"], "top_n": -1}),
    ] {
        let response = post(&upstream, "/rerank", &request).await;
        assert_eq!(response.status(), 400, "{request}");
        let body: Value = response.json().await.unwrap();
        assert_eq!(body["error"]["code"], 400, "{request}");
        assert_eq!(body["error"]["type"], "BadRequestError", "{request}");
    }
}

#[tokio::test]
async fn scripted_answers_replace_embeddings_and_rerank_then_the_fake_resumes() {
    let upstream = FakeUpstream::start().await;
    upstream.push(openai_wire::rate_limited(3));
    upstream.push(openai_wire::server_error());
    upstream.push(openai_wire::embeddings_reversed(&[vec![1.0], vec![2.0]], 2));
    upstream.push(openai_wire::rerank(&[(1, 0.75), (0, 0.25)], 9));
    let embed = json!({"model": "m", "input": ["x", "y"]});
    let rank = json!({"model": "r", "query": "q", "documents": ["a", "b"]});

    let limited = post(&upstream, "/embeddings", &embed).await;
    assert_eq!(limited.status(), 429);
    assert_eq!(limited.headers()["retry-after"], "3");
    let body: Value = limited.json().await.unwrap();
    assert_eq!(body["error"]["code"], "rate_limit_exceeded");

    let failed = post(&upstream, "/rerank", &rank).await;
    assert_eq!(failed.status(), 500);
    assert_eq!(failed.json::<Value>().await.unwrap()["error"]["type"], "server_error");

    let reversed: Value = post(&upstream, "/embeddings", &embed).await.json().await.unwrap();
    assert_eq!(reversed["data"][0]["index"], 1, "played as scripted: last index first");
    assert_eq!(openai_wire::embedding_vectors(&reversed), vec![vec![1.0], vec![2.0]]);

    let ranked: Value = post(&upstream, "/rerank", &rank).await.json().await.unwrap();
    assert_eq!(openai_wire::rerank_results(&ranked), vec![(1, 0.75), (0, 0.25)]);
    assert_eq!(ranked["usage"]["total_tokens"], 9);

    let echoed: Value = post(&upstream, "/embeddings", &embed).await.json().await.unwrap();
    assert_eq!(openai_wire::embedding_vectors(&echoed)[0], fake_embedding("x", NATIVE_EMBEDDING_WIDTH));
    let paths: Vec<String> = upstream.received().into_iter().map(|r| r.path).collect();
    assert_eq!(paths, ["/v1/embeddings", "/v1/rerank", "/v1/embeddings", "/v1/rerank", "/v1/embeddings"]);
}
