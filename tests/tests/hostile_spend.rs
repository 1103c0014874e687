//! A caller cannot multiply the operator's spend, and a slow or untrusted
//! upstream cannot hold a call forever: asking for 1,000 retries gets the
//! entry's limit; retries, corrections and re-runs share one attempt ceiling
//! (`max_attempts`) and one retry budget per call; a full admission queue
//! answers 503 with `retry-after` before anything is sent; the caller's
//! deadline cancels a request in flight; the attempt timeout re-runs a stalled
//! upstream; a TLS upstream with a self-signed certificate is refused after one
//! handshake. Each test asserts what the fake upstream received.
//!
//! Most tests run the gateway's router in process with the fake on one runtime
//! under tokio's paused clock (as `retry_and_gates.rs` does), so waits and
//! stalls pass in virtual time; one runs the real `weir serve`.

// Test code: a failed step should stop the test with its message.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::time::Instant;
use weir_host::types::Conversation;
use weir_host::{Category, ChatRequest, Config, Weir};
use weir_tests::{FakeUpstream, Gateway, Scripted, openai_wire};

struct Rig {
    upstream: FakeUpstream,
    weir: Weir,
    base: String,
    client: reqwest::Client,
}

/// An in-process gateway for one `openai-compatible` model `m` routed to the
/// fake; `top` goes before the entry, `extra` inside it.
async fn rig(top: &str, extra: &str) -> Rig {
    let upstream = FakeUpstream::start_local().await;
    let endpoint = upstream.base_url();
    rig_at(upstream, &endpoint, top, extra).await
}

async fn rig_at(upstream: FakeUpstream, endpoint: &str, top: &str, extra: &str) -> Rig {
    let toml = format!(
        r#"
read_timeout_secs = 60
{top}

[[model]]
id = "m"
provider = "openai-compatible"
wire_id = "qwen3"
endpoint = "{endpoint}"
max_output_tokens = 4000
context_window = 100000
output_tokens = 100
{extra}
"#
    );
    let weir = Weir::builder()
        .config(Config::from_toml(&toml, "test").unwrap())
        .providers_dir("/nonexistent-weir-providers")
        .cache_dir(Some(std::env::temp_dir().join("weir-spend-test-cache")))
        .build()
        .unwrap();
    let base = weir_tests::serve_router(weir_host::server::router(weir.clone())).await;
    Rig { upstream, weir, base, client: reqwest::Client::new() }
}

struct Answer {
    status: u16,
    headers: reqwest::header::HeaderMap,
    body: String,
}

impl Answer {
    fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.body))
    }

    fn attempts(&self) -> u32 {
        self.headers["x-weir-attempts"].to_str().unwrap().parse().unwrap()
    }

    fn category(&self) -> String {
        self.json()["error"]["type"].as_str().unwrap_or_default().to_owned()
    }

    fn message(&self) -> String {
        self.json()["error"]["message"].as_str().unwrap_or_default().to_owned()
    }
}

impl Rig {
    async fn post(&self, path: &str, body: Value, headers: &[(&str, &str)]) -> Answer {
        post(&self.client, &format!("{}{path}", self.base), body, headers).await
    }

    async fn call(&self, body: Value, headers: &[(&str, &str)]) -> Answer {
        self.post("/v1/chat/completions", body, headers).await
    }
}

async fn post(client: &reqwest::Client, url: &str, body: Value, headers: &[(&str, &str)]) -> Answer {
    let mut request = client.post(url).json(&body);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    Answer { status, headers, body: response.text().await.unwrap() }
}

fn hello() -> Value {
    json!({"model": "m", "messages": [{"role": "user", "content": "Hello"}]})
}

fn structured() -> Value {
    json!({
        "model": "m",
        "messages": [{"role": "user", "content": "Weather in Paris as JSON"}],
        "response_format": {"type": "json_schema", "json_schema": {"name": "weather", "schema": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "celsius": {"type": "number"}},
            "required": ["city", "celsius"]
        }}}
    })
}

fn text_answer(text: &str) -> Scripted {
    openai_wire::json_response(
        200,
        &json!({"id": "chatcmpl-x", "object": "chat.completion", "created": 1, "model": "qwen3",
                "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 10, "completion_tokens": 8, "total_tokens": 18}}),
    )
}

/// Waits (in the rig's time) until `check` holds; panics after `bound` tries.
async fn until(bound: usize, what: &str, check: impl Fn() -> bool) {
    for _ in 0..bound {
        if check() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    panic!("never happened: {what}");
}

// ------------------------------------------------------------------ knobs lower, never raise

#[tokio::test(start_paused = true)]
async fn a_thousand_retries_asked_for_get_the_entrys_limit() {
    let rig = rig("", "").await;
    for _ in 0..20 {
        rig.upstream.push(openai_wire::rate_limited(1));
    }
    let answer = rig.call(hello(), &[("x-weir-max-retries", "1000")]).await;
    assert_eq!(answer.status, 429, "{}", answer.body);
    assert_eq!(answer.category(), "rate_limited");
    assert_eq!(answer.attempts(), 4, "the entry's default of 3 retries, plus the first attempt");
    assert!(answer.message().contains("gave up after 4 attempts"), "{}", answer.message());
    assert_eq!(rig.upstream.request_count(), 4, "what the fake received: the entry's limit + 1");
    assert_eq!(rig.upstream.queued(), 16);

    // The library's field is clamped the same way.
    let mut request = ChatRequest::new("m", Conversation::user("Hello"));
    request.max_retries = Some(1_000);
    let failure = rig.weir.chat(request).await.unwrap_err();
    assert_eq!(failure.category(), Category::RateLimited);
    assert_eq!(failure.stamp.attempts, 4);
    assert_eq!(rig.upstream.request_count(), 8);
}

#[tokio::test(start_paused = true)]
async fn a_lower_knob_is_honoured() {
    let rig = rig("", "max_retries = 3\nmax_corrections = 2").await;
    for _ in 0..2 {
        rig.upstream.push(openai_wire::rate_limited(1));
    }
    let answer = rig.call(hello(), &[("x-weir-max-retries", "1")]).await;
    assert_eq!(answer.category(), "rate_limited");
    assert_eq!(answer.attempts(), 2);
    assert_eq!(rig.upstream.request_count(), 2);

    // Corrections too: none asked for, none made.
    rig.upstream.push(text_answer("not json"));
    let answer = rig.call(structured(), &[("x-weir-max-corrections", "0")]).await;
    assert_eq!(answer.status, 422, "{}", answer.body);
    assert_eq!(answer.category(), "invalid_response");
    assert_eq!(rig.upstream.request_count(), 3, "one request, no correction turn");
    assert_eq!(rig.upstream.queued(), 0);
}

#[tokio::test(start_paused = true)]
async fn more_corrections_asked_for_get_the_entrys_limit() {
    let rig = rig("", "max_corrections = 1").await;
    for _ in 0..4 {
        rig.upstream.push(text_answer("not json"));
    }
    let answer = rig.call(structured(), &[("x-weir-max-corrections", "50")]).await;
    assert_eq!(answer.category(), "invalid_response");
    assert!(answer.message().contains("1 correction"), "{}", answer.message());
    assert_eq!(rig.upstream.request_count(), 2, "the first answer and one correction turn");
    assert_eq!(rig.upstream.queued(), 2);
}

// ------------------------------------------------------------------ one counter per call

#[tokio::test(start_paused = true)]
async fn corrections_and_retries_share_one_attempt_ceiling() {
    // Alone, these limits would allow 1 + 5 retries + 3 corrections = 9 requests.
    let rig = rig("", "max_retries = 5\nmax_corrections = 3\nmax_attempts = 6").await;
    for _ in 0..3 {
        rig.upstream.push(text_answer("not json"));
        rig.upstream.push(openai_wire::server_error());
    }
    rig.upstream.push(text_answer(r#"{"city": "Paris", "celsius": 18}"#));
    let answer = rig.call(structured(), &[]).await;
    assert_eq!(answer.status, 502, "{}", answer.body);
    assert_eq!(answer.category(), "upstream_unavailable", "the last failure's category");
    assert_eq!(answer.attempts(), 6);
    let message = answer.message();
    assert!(message.contains("ceiling of 6 upstream attempts") && message.contains("a retry"), "{message}");
    assert!(!message.contains("Internal"), "no upstream text: {message}");
    assert_eq!(rig.upstream.request_count(), 6, "exactly max_attempts requests upstream");
    assert_eq!(rig.upstream.queued(), 1, "the good answer was never asked for");
}

#[tokio::test(start_paused = true)]
async fn a_correction_past_the_ceiling_fails_as_invalid_response() {
    let rig = rig("", "max_corrections = 2\nmax_attempts = 2").await;
    for _ in 0..3 {
        rig.upstream.push(text_answer("not json"));
    }
    let answer = rig.call(structured(), &[]).await;
    assert_eq!(answer.status, 422, "{}", answer.body);
    assert_eq!(answer.category(), "invalid_response");
    let message = answer.message();
    assert!(message.contains("ceiling of 2 upstream attempts") && message.contains("a correction turn"), "{message}");
    assert_eq!(rig.upstream.request_count(), 2);
}

#[tokio::test(start_paused = true)]
async fn escalation_and_empty_reruns_count_against_the_ceiling() {
    let rig = rig("", "max_attempts = 1").await;
    // Cut off with nothing said: the one answer the gateway's default escalates.
    rig.upstream.push(openai_wire::length_truncated(""));
    let answer = rig.call(hello(), &[]).await;
    assert_eq!(answer.status, 422, "{}", answer.body);
    assert_eq!(answer.category(), "output_truncated");
    assert!(answer.message().contains("ceiling of 1 upstream attempts"), "{}", answer.message());
    assert_eq!(rig.upstream.request_count(), 1, "no escalation past the ceiling");

    rig.upstream.push(text_answer(""));
    let answer = rig.call(hello(), &[]).await;
    assert_eq!(answer.status, 502, "{}", answer.body);
    assert_eq!(answer.category(), "provider_empty_response_exhausted");
    assert_eq!(rig.upstream.request_count(), 2, "no re-run past the ceiling");
}

#[tokio::test(start_paused = true)]
async fn the_retry_budget_is_per_call_not_per_correction() {
    let rig = rig("", "max_retries = 2\nmax_corrections = 2\nmax_attempts = 20").await;
    rig.upstream.push(openai_wire::server_error());
    rig.upstream.push(text_answer("not json"));
    rig.upstream.push(openai_wire::server_error());
    rig.upstream.push(text_answer("not json"));
    rig.upstream.push(openai_wire::server_error());
    rig.upstream.push(text_answer(r#"{"city": "Paris", "celsius": 18}"#));
    let answer = rig.call(structured(), &[]).await;
    assert_eq!(answer.status, 502, "{}", answer.body);
    assert_eq!(answer.category(), "upstream_unavailable");
    assert!(answer.message().contains("gave up after 5 attempts"), "{}", answer.message());
    assert_eq!(rig.upstream.request_count(), 5, "the third 5xx found both retries spent");
    assert_eq!(rig.upstream.queued(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_streams_replay_is_an_attempt_under_the_ceiling() {
    let rig = rig("", "max_attempts = 1").await;
    // An in-band 5xx before any output earns a replay, but the ceiling is 1.
    let frames = vec![openai_wire::sse_error_frame(&openai_wire::stream_error_json())];
    rig.upstream.push(openai_wire::stream(frames));
    rig.upstream.push(openai_wire::completion("replayed"));
    let mut body = hello();
    body["stream"] = json!(true);
    let answer = rig.call(body, &[]).await;
    assert_eq!(answer.status, 502, "{}", answer.body);
    assert!(answer.message().contains("ceiling of 1 upstream attempts"), "{}", answer.message());
    assert_eq!(rig.upstream.request_count(), 1, "no replay past the ceiling");
    assert_eq!(rig.upstream.queued(), 1);
}

// ------------------------------------------------------------------ the admission queue

#[tokio::test(start_paused = true)]
async fn a_full_queue_answers_503_with_retry_after_and_sends_nothing() {
    let rig = rig("", "rpm = 1\nmax_queue = 1").await;
    let gate = Arc::clone(rig.weir.admission().gate("m").unwrap());
    // The first call takes the minute's one request; the second parks for the next.
    let first = rig.call(hello(), &[]).await;
    assert_eq!(first.status, 200, "{}", first.body);
    let parked = tokio::spawn({
        let (client, url) = (rig.client.clone(), format!("{}/v1/chat/completions", rig.base));
        async move { post(&client, &url, hello(), &[]).await }
    });
    until(200, "the second call parks", || gate.parked() == 1).await;

    let refused = rig.call(hello(), &[]).await;
    assert_eq!(refused.status, 503, "{}", refused.body);
    assert_eq!(refused.category(), "overloaded");
    assert!(refused.message().contains("already waiting"), "{}", refused.message());
    let retry_after: u64 = refused.headers["retry-after"].to_str().unwrap().parse().unwrap();
    assert!((60..=120).contains(&retry_after), "the wait for the queued call and this one: {retry_after}");
    assert_eq!(refused.attempts(), 1, "refused at admission");

    let refused = rig
        .post(
            "/v1/messages",
            json!({"model": "m", "max_tokens": 50, "messages": [{"role": "user", "content": "Hi"}]}),
            &[],
        )
        .await;
    assert_eq!(refused.status, 503, "{}", refused.body);
    assert_eq!(refused.json()["error"]["type"], "overloaded_error");
    assert!(refused.headers.contains_key("retry-after"));
    assert_eq!(rig.upstream.request_count(), 1, "only the admitted call reached the upstream so far");

    let second = parked.await.unwrap();
    assert_eq!(second.status, 200, "{}", second.body);
    assert_eq!(rig.upstream.request_count(), 2, "the admitted calls, and nothing else");
}

// ------------------------------------------------------------------ deadline and attempt timeout

#[tokio::test(start_paused = true)]
async fn a_deadline_passing_in_flight_cancels_the_request() {
    let rig = rig("", "").await;
    rig.upstream.push(openai_wire::completion("too late").after(Duration::from_secs(30)));
    let started = Instant::now();
    let answer = rig.call(hello(), &[("x-weir-deadline-ms", "2000")]).await;
    assert_eq!(answer.status, 504, "{}", answer.body);
    assert_eq!(answer.category(), "timeout");
    assert!(answer.message().contains("deadline passed while the upstream was answering"), "{}", answer.message());
    assert_eq!(answer.attempts(), 1, "a passed deadline is not retried");
    let elapsed = started.elapsed();
    assert!(elapsed >= Duration::from_secs(2) && elapsed < Duration::from_secs(30), "{elapsed:?}");
    until(200, "the fake sees the connection closed", || rig.upstream.abandoned() == 1).await;
    assert_eq!(rig.upstream.request_count(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_deadline_cuts_a_stream_before_and_after_its_first_output() {
    let rig = rig("", "").await;
    rig.upstream.push(openai_wire::stream(openai_wire::sse_chunks(&["late"])).after(Duration::from_secs(30)));
    let mut body = hello();
    body["stream"] = json!(true);
    let answer = rig.call(body.clone(), &[("x-weir-deadline-ms", "2000")]).await;
    assert_eq!(answer.status, 504, "{}", answer.body);
    assert_eq!(answer.category(), "timeout");
    until(200, "the fake sees the connection closed", || rig.upstream.abandoned() == 1).await;

    // Output flows (the first text at 10 s), then the upstream stalls past the
    // deadline: the stream ends with a timeout error event, never `[DONE]`.
    let chunks = openai_wire::sse_chunks(&["Hel", "lo", " there"]);
    rig.upstream.push(openai_wire::stream_with_pause(chunks, Duration::from_secs(10)));
    let answer = rig.call(body, &[("x-weir-deadline-ms", "15000")]).await;
    assert_eq!(answer.status, 200);
    assert!(answer.body.contains("Hel"), "{}", answer.body);
    assert!(answer.body.contains("\"timeout\""), "{}", answer.body);
    assert!(!answer.body.contains("[DONE]"), "{}", answer.body);
    assert!(!answer.body.contains("lo\""), "nothing after the deadline: {}", answer.body);
    assert_eq!(rig.upstream.request_count(), 2);
}

#[tokio::test(start_paused = true)]
async fn the_attempt_timeout_retries_a_stalled_upstream_then_succeeds() {
    let rig = rig("attempt_timeout_secs = 5", "").await;
    rig.upstream.push(openai_wire::completion("stalled").after(Duration::from_secs(30)));
    let started = Instant::now();
    let answer = rig.call(hello(), &[]).await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert_eq!(answer.json()["choices"][0]["message"]["content"], "echo: Hello");
    assert_eq!(answer.attempts(), 2);
    assert!(started.elapsed() >= Duration::from_secs(5), "{:?}", started.elapsed());
    assert_eq!(rig.upstream.request_count(), 2);
    until(200, "the stalled request was cancelled", || rig.upstream.abandoned() == 1).await;
}

#[tokio::test(start_paused = true)]
async fn an_upstream_that_trickles_trips_the_attempt_timeout_not_the_read_timeout() {
    // read_timeout_secs = 60 never fires: a byte every 2 s. The body takes 20 s.
    let rig = rig("attempt_timeout_secs = 5", "max_retries = 1").await;
    let trickle = || {
        let body = openai_wire::completion_body(
            "chatcmpl-x",
            "qwen3",
            openai_wire::text_message("slow"),
            "stop",
            openai_wire::usage_json(1, 1, 0, 0),
        )
        .to_string();
        let chunks: Vec<bytes::Bytes> =
            body.as_bytes().chunks(body.len() / 10 + 1).map(bytes::Bytes::copy_from_slice).collect();
        Scripted::Stream {
            status: 200,
            headers: openai_wire::json_headers("req_trickle"),
            chunks,
            pause: Duration::from_secs(2),
        }
    };
    rig.upstream.push(trickle());
    rig.upstream.push(trickle());
    let answer = rig.call(hello(), &[]).await;
    assert_eq!(answer.status, 504, "{}", answer.body);
    assert_eq!(answer.category(), "timeout");
    let message = answer.message();
    assert!(
        message.contains("took longer than 5s in all") && message.contains("gave up after 2 attempts"),
        "{message}"
    );
    assert_eq!(rig.upstream.request_count(), 2, "retried once (max_retries = 1), then spent");
}

// ------------------------------------------------------------------ TLS

/// A TLS server on loopback with a fresh self-signed certificate for
/// 127.0.0.1: it counts TCP connections and completes no handshake a verifying
/// client would accept.
async fn self_signed_tls_server() -> (String, Arc<AtomicUsize>) {
    use tokio_rustls::rustls;
    let certified = rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_owned()]).unwrap();
    let key = rustls::pki_types::PrivatePkcs8KeyDer::from(certified.signing_key.serialize_der());
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![certified.cert.der().clone()], key.into())
        .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let endpoint = format!("https://{}/v1", listener.local_addr().unwrap());
    let connections = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&connections);
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            counted.fetch_add(1, Ordering::SeqCst);
            let acceptor = acceptor.clone();
            // The client aborts the handshake; whatever happens here is its business.
            tokio::spawn(async move { drop(acceptor.accept(stream).await) });
        }
    });
    (endpoint, connections)
}

#[tokio::test]
async fn a_self_signed_upstream_is_refused_after_one_handshake() {
    let (endpoint, connections) = self_signed_tls_server().await;
    // The fake is unused: the entry points at the TLS server.
    let upstream = FakeUpstream::start_local().await;
    let rig = rig_at(upstream, &endpoint, "", "max_retries = 3").await;
    let answer = rig.call(hello(), &[]).await;
    assert_eq!(answer.status, 502, "{}", answer.body);
    assert_eq!(answer.category(), "upstream_unavailable");
    assert!(answer.message().contains("TLS certificate does not verify"), "{}", answer.message());
    assert_eq!(answer.attempts(), 1, "a certificate error is not retried");
    assert_eq!(connections.load(Ordering::SeqCst), 1, "exactly one connection attempt");
}

// ------------------------------------------------------------------ the real gateway

#[tokio::test]
async fn through_the_real_gateway_a_thousand_retries_get_the_entrys_limit() {
    let upstream = FakeUpstream::start().await;
    for _ in 0..10 {
        upstream.push(openai_wire::rate_limited(0));
    }
    let config = format!(
        r#"
[[model]]
id = "m"
provider = "openai-compatible"
endpoint = "{}"
max_output_tokens = 1000
context_window = 100000
output_tokens = 100
max_retries = 1
"#,
        upstream.base_url()
    );
    let gateway = Gateway::start_with(&config, &[], None).await;
    let answer =
        post(&reqwest::Client::new(), &gateway.url("/v1/chat/completions"), hello(), &[("x-weir-max-retries", "1000")])
            .await;
    assert_eq!(answer.status, 429, "{}", answer.body);
    assert_eq!(answer.category(), "rate_limited");
    assert_eq!(answer.attempts(), 2);
    assert_eq!(upstream.request_count(), 2, "the entry's limit + 1, whatever the header asked");
    assert_eq!(upstream.queued(), 8);
}
