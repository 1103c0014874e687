//! Hostile callers at the real gateway's edge (`weir serve` as a child process, the
//! fake OpenAI upstream behind it): a browser's `text/plain` JSON and foreign
//! `Origin`, bodies over the limit, heads trickled a byte a second, a stalled body,
//! idle keep-alives, calls over `max_in_flight` or `max_connections`, 1,100 streams
//! whose clients never read, and SIGTERM's drain. Each test asserts what the
//! upstream received, not only what the caller got.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};
use weir_tests::raw_socket::read_until_closed;
use weir_tests::{FakeUpstream, Gateway, Scripted, openai_wire};

/// One `openai` model on the fake, and the given `[server]` table.
fn config(upstream: &FakeUpstream, server: &str) -> String {
    format!(
        r#"
[server]
{server}

[[model]]
id = "chat"
provider = "openai"
wire_id = "gpt-4.1"
endpoint = "{url}"
max_output_tokens = 1000
context_window = 100000
output_tokens = 100
max_retries = 0
"#,
        url = upstream.base_url()
    )
}

async fn gateway(upstream: &FakeUpstream, server: &str) -> Gateway {
    Gateway::start_with(&config(upstream, server), &[("OPENAI_API_KEY", "sk-test")], None).await
}

fn chat_body(text: &str) -> Value {
    json!({"model": "chat", "messages": [{"role": "user", "content": text}]})
}

fn messages_body(text: &str) -> Value {
    json!({"model": "chat", "max_tokens": 50, "messages": [{"role": "user", "content": text}]})
}

/// POSTs raw bytes with the given headers; status, headers and JSON body.
async fn post_raw(
    gateway: &Gateway,
    path: &str,
    headers: &[(&str, &str)],
    body: Vec<u8>,
) -> (u16, reqwest::header::HeaderMap, Value) {
    let mut request = reqwest::Client::new().post(gateway.url(path)).body(body);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let body = response.json().await.unwrap_or(Value::Null);
    (status, headers, body)
}

const JSON: (&str, &str) = ("content-type", "application/json");

#[tokio::test]
async fn a_call_not_declared_json_is_refused_415_and_nothing_goes_upstream() {
    let upstream = FakeUpstream::start().await;
    let gateway = gateway(&upstream, "").await;
    let body = serde_json::to_vec(&chat_body("hi")).unwrap();

    // What a browser page can send without a preflight.
    let (status, _, answer) =
        post_raw(&gateway, "/v1/chat/completions", &[("content-type", "text/plain")], body.clone()).await;
    assert_eq!(status, 415);
    assert_eq!(answer["error"]["type"], "unsupported_media_type");
    assert_eq!(answer["error"]["code"], "unsupported_media_type");
    let (status, _, answer) = post_raw(&gateway, "/v1/chat/completions", &[], body.clone()).await;
    assert_eq!(status, 415, "no content-type at all: {answer}");
    let messages = serde_json::to_vec(&messages_body("hi")).unwrap();
    let (status, _, answer) =
        post_raw(&gateway, "/v1/messages", &[("content-type", "application/x-www-form-urlencoded")], messages.clone())
            .await;
    assert_eq!(status, 415);
    assert_eq!(answer["type"], "error");
    assert_eq!(answer["error"]["type"], "invalid_request_error");
    assert_eq!(answer["error"]["weir_category"], "unsupported_media_type");
    assert_eq!(upstream.request_count(), 0, "nothing refused reached the upstream");

    // JSON with a charset is JSON.
    let (status, _, answer) =
        post_raw(&gateway, "/v1/chat/completions", &[("content-type", "application/json; charset=utf-8")], body).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["choices"][0]["message"]["content"], "echo: hi");
    let sent = upstream.received();
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].json()["model"], "gpt-4.1");
}

#[tokio::test]
async fn a_foreign_origin_is_refused_403_and_an_allowed_one_passes_with_cors_headers() {
    let upstream = FakeUpstream::start().await;
    let gateway = gateway(&upstream, r#"cors_origins = ["https://app.example.com"]"#).await;
    let body = serde_json::to_vec(&chat_body("from a page")).unwrap();

    let evil = ("origin", "https://evil.example");
    let (status, _, answer) = post_raw(&gateway, "/v1/chat/completions", &[JSON, evil], body.clone()).await;
    assert_eq!(status, 403);
    assert_eq!(answer["error"]["type"], "forbidden_origin");
    let messages = serde_json::to_vec(&messages_body("from a page")).unwrap();
    let (status, _, answer) = post_raw(&gateway, "/v1/messages", &[JSON, evil], messages).await;
    assert_eq!(status, 403);
    assert_eq!(answer["error"]["type"], "permission_error");
    assert_eq!(answer["error"]["weir_category"], "forbidden_origin");
    // A look-alike is not the allowed origin.
    let (status, _, _) = post_raw(
        &gateway,
        "/v1/chat/completions",
        &[JSON, ("origin", "https://app.example.com.evil.example")],
        body.clone(),
    )
    .await;
    assert_eq!(status, 403);
    let client = reqwest::Client::new();
    let preflight = |origin: &'static str| {
        client
            .request(reqwest::Method::OPTIONS, gateway.url("/v1/chat/completions"))
            .header("origin", origin)
            .header("access-control-request-method", "POST")
            .header("access-control-request-headers", "content-type, authorization")
            .send()
    };
    assert_eq!(preflight("https://evil.example").await.unwrap().status(), 403);
    assert_eq!(upstream.request_count(), 0, "nothing refused reached the upstream");

    let allowed = preflight("https://app.example.com").await.unwrap();
    assert!(allowed.status().is_success(), "{}", allowed.status());
    assert_eq!(allowed.headers()["access-control-allow-origin"], "https://app.example.com");
    assert!(allowed.headers()["access-control-allow-methods"].to_str().unwrap().contains("POST"));
    let (status, headers, answer) =
        post_raw(&gateway, "/v1/chat/completions", &[JSON, ("origin", "https://app.example.com")], body.clone()).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(headers["access-control-allow-origin"], "https://app.example.com");
    assert_eq!(answer["choices"][0]["message"]["content"], "echo: from a page");
    // No Origin: not a browser, allowed.
    let (status, _, _) = post_raw(&gateway, "/v1/chat/completions", &[JSON], body).await;
    assert_eq!(status, 200);
    assert_eq!(upstream.request_count(), 2, "the preflight never reaches the upstream");
}

#[tokio::test]
async fn a_body_over_the_limit_is_413_in_each_route_envelope() {
    let upstream = FakeUpstream::start().await;
    let gateway = gateway(&upstream, "max_body_bytes = 2048").await;
    let big = "x".repeat(4096);

    let (status, _, answer) =
        post_raw(&gateway, "/v1/chat/completions", &[JSON], serde_json::to_vec(&chat_body(&big)).unwrap()).await;
    assert_eq!(status, 413);
    assert_eq!(answer["error"]["type"], "payload_too_large");
    assert!(answer["error"]["message"].as_str().unwrap().contains("2048 bytes"), "{answer}");
    let (status, _, answer) =
        post_raw(&gateway, "/v1/messages", &[JSON], serde_json::to_vec(&messages_body(&big)).unwrap()).await;
    assert_eq!(status, 413);
    assert_eq!(answer["type"], "error");
    assert_eq!(answer["error"]["type"], "request_too_large");
    assert_eq!(answer["error"]["weir_category"], "payload_too_large");

    // No length declared (chunked): the limit holds while the body is read.
    let mut stream = TcpStream::connect(gateway.addr()).await.unwrap();
    let head = "POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n";
    stream.write_all(head.as_bytes()).await.unwrap();
    for _ in 0..8 {
        let chunk = format!("200\r\n{:512}\r\n", "");
        if stream.write_all(chunk.as_bytes()).await.is_err() {
            break; // refused and closed mid-body
        }
    }
    let (answer, _) = read_until_closed(&mut stream, Duration::from_secs(60)).await;
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    assert!(answer.contains("\"payload_too_large\""), "{answer}");
    assert_eq!(upstream.request_count(), 0, "nothing over the limit reached the upstream");

    let (status, _, _) =
        post_raw(&gateway, "/v1/chat/completions", &[JSON], serde_json::to_vec(&chat_body("small")).unwrap()).await;
    assert_eq!(status, 200);
    assert_eq!(upstream.received()[0].json()["messages"][0]["content"], "small");
}

#[tokio::test]
async fn a_head_trickled_one_byte_a_second_is_closed_at_the_header_timeout() {
    let upstream = FakeUpstream::start().await;
    let gateway = gateway(&upstream, "header_timeout_secs = 2").await;
    let head = "POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n\r\n";
    let stream = TcpStream::connect(gateway.addr()).await.unwrap();
    let (mut reader, mut writer) = stream.into_split();
    let started = Instant::now();
    let trickle = tokio::spawn(async move {
        let mut sent = 0;
        for byte in head.as_bytes() {
            if writer.write_all(&[*byte]).await.is_err() {
                break;
            }
            sent += 1;
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        sent
    });
    let mut buffer = [0_u8; 1024];
    let read = tokio::time::timeout(Duration::from_secs(60), reader.read(&mut buffer)).await;
    let closed_after = started.elapsed();
    assert!(matches!(read, Ok(Ok(0) | Err(_))), "the gateway closed the connection without answering: {read:?}");
    assert!(closed_after >= Duration::from_millis(1900), "not before the timeout: {closed_after:?}");
    trickle.abort();
    assert!(
        closed_after < Duration::from_secs(head.len() as u64),
        "closed before the head was complete ({} bytes)",
        head.len()
    );
    assert_eq!(upstream.request_count(), 0);
    // The gateway itself is fine.
    let health = reqwest::get(gateway.url("/health")).await.unwrap();
    assert_eq!(health.status(), 200);
}

#[tokio::test]
async fn a_stalled_body_is_answered_408_and_its_connection_closed() {
    let upstream = FakeUpstream::start().await;
    let gateway = gateway(&upstream, "body_timeout_secs = 2").await;
    let mut stream = TcpStream::connect(gateway.addr()).await.unwrap();
    let head = "POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{\"model\":";
    stream.write_all(head.as_bytes()).await.unwrap();
    let started = Instant::now();
    let (answer, closed) = read_until_closed(&mut stream, Duration::from_secs(60)).await;
    assert!(started.elapsed() >= Duration::from_millis(1900), "not before the timeout");
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(answer.contains("\"request_timeout\""), "{answer}");
    assert!(closed, "the connection is closed after the answer");
    assert_eq!(upstream.request_count(), 0);
}

#[tokio::test]
async fn a_body_cut_short_is_answered_400_and_nothing_goes_upstream() {
    let upstream = FakeUpstream::start().await;
    let gateway = gateway(&upstream, "").await;
    let mut stream = TcpStream::connect(gateway.addr()).await.unwrap();
    let head = "POST /v1/messages HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{\"model\":";
    stream.write_all(head.as_bytes()).await.unwrap();
    stream.shutdown().await.unwrap(); // FIN: the body ends 91 bytes early
    let (answer, _) = read_until_closed(&mut stream, Duration::from_secs(60)).await;
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
    assert!(answer.contains("could not be read") && answer.contains("invalid_request_error"), "{answer}");
    assert_eq!(upstream.request_count(), 0);
}

#[tokio::test]
async fn an_idle_keep_alive_is_closed_at_the_idle_timeout_not_the_header_timeout() {
    let upstream = FakeUpstream::start().await;
    let gateway = gateway(&upstream, "header_timeout_secs = 1\nidle_timeout_secs = 4").await;
    let mut stream = TcpStream::connect(gateway.addr()).await.unwrap();
    stream.write_all(b"GET /health HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n").await.unwrap();
    let mut buffer = [0_u8; 4096];
    let n = tokio::time::timeout(Duration::from_secs(30), stream.read(&mut buffer)).await.unwrap().unwrap();
    assert!(String::from_utf8_lossy(&buffer[..n]).starts_with("HTTP/1.1 200"));
    let answered = Instant::now();
    let (_, closed) = read_until_closed(&mut stream, Duration::from_secs(60)).await;
    assert!(closed);
    let idle = answered.elapsed();
    assert!(idle >= Duration::from_millis(3500), "kept for the idle timeout, not the header timeout: {idle:?}");
    assert_eq!(upstream.request_count(), 0);
}

#[tokio::test]
async fn calls_over_max_in_flight_are_503_with_retry_after_and_never_reach_the_upstream() {
    let upstream = FakeUpstream::start().await;
    upstream.push(openai_wire::completion("slow").after(Duration::from_secs(3)));
    let gateway = gateway(&upstream, "max_in_flight = 1").await;
    let client = reqwest::Client::new();
    let slow = tokio::spawn(client.post(gateway.url("/v1/chat/completions")).json(&chat_body("first")).send());
    upstream.wait_for_requests(1, Duration::from_secs(30)).await;

    let (status, headers, answer) =
        post_raw(&gateway, "/v1/chat/completions", &[JSON], serde_json::to_vec(&chat_body("second")).unwrap()).await;
    assert_eq!(status, 503);
    assert_eq!(headers["retry-after"], "1");
    assert_eq!(answer["error"]["type"], "gateway_busy");
    assert!(answer["error"]["message"].as_str().unwrap().contains("max_in_flight"), "{answer}");
    let (status, headers, answer) =
        post_raw(&gateway, "/v1/messages", &[JSON], serde_json::to_vec(&messages_body("third")).unwrap()).await;
    assert_eq!(status, 503);
    assert_eq!(headers["retry-after"], "1");
    assert_eq!(answer["error"]["type"], "overloaded_error");
    // Reads are not calls: they pass while the call runs.
    assert_eq!(client.get(gateway.url("/health")).send().await.unwrap().status(), 200);

    let first: Value = slow.await.unwrap().unwrap().json().await.unwrap();
    assert_eq!(first["choices"][0]["message"]["content"], "slow");
    let (status, _, _) =
        post_raw(&gateway, "/v1/chat/completions", &[JSON], serde_json::to_vec(&chat_body("after")).unwrap()).await;
    assert_eq!(status, 200, "the permit came back with the answer");
    let sent = upstream.received();
    let texts: Vec<String> =
        sent.iter().map(|r| r.json()["messages"][0]["content"].as_str().unwrap().to_owned()).collect();
    assert_eq!(texts, ["first", "after"], "the refused calls sent nothing");
    assert_eq!(upstream.queued(), 0);
}

#[tokio::test]
async fn connections_over_max_connections_wait_for_a_free_slot() {
    let upstream = FakeUpstream::start().await;
    let gateway = gateway(&upstream, "max_connections = 1\nheader_timeout_secs = 3").await;
    // Takes the only slot and says nothing: closed at the header timeout.
    let silent = TcpStream::connect(gateway.addr()).await.unwrap();
    let opened = Instant::now();
    let health = reqwest::Client::new().get(gateway.url("/health")).timeout(Duration::from_secs(60)).send().await;
    let waited = opened.elapsed();
    assert_eq!(health.unwrap().status(), 200, "served once the slot freed");
    assert!(waited >= Duration::from_millis(2500), "it waited in the backlog for the slot: {waited:?}");
    drop(silent);
    assert_eq!(upstream.request_count(), 0);
}

/// An SSE stream long enough that a client which never reads fills every buffer
/// on the way (its socket, the gateway's socket, hyper's buffer, the stream's
/// queue) while the upstream still has more to send. Each frame's text is its own
/// (identical frames would read as cumulative snapshots and be folded away). The
/// frames are built once and shared, so 1,100 scripts cost little memory.
fn long_stream() -> Scripted {
    let texts: Vec<String> =
        (0..160).map(|i| format!("[{i:03}] {}", "lorem ipsum dolor sit amet ".repeat(150))).collect();
    let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
    Scripted::Stream {
        status: 200,
        headers: vec![("content-type".into(), "text/event-stream".into())],
        // ~650 KB over ~24 s: still sending when the gateway drops it, with room for a
        // slow machine (a debug gateway relaying 1,100 streams at once is CPU-bound here).
        chunks: openai_wire::sse_chunks(&texts),
        pause: Duration::from_millis(150),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_whose_clients_never_read_are_dropped_and_a_fresh_call_still_succeeds() {
    const STREAMS: usize = 1_100;
    let upstream = FakeUpstream::start().await;
    let stream = long_stream();
    for _ in 0..STREAMS {
        upstream.push(stream.clone());
    }
    let gateway = gateway(&upstream, "stream_idle_secs = 2").await;
    let body = serde_json::to_string(&json!({"model": "chat", "stream": true,
        "messages": [{"role": "user", "content": "never read"}]}))
    .unwrap();
    let request = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    let mut stalled = Vec::with_capacity(STREAMS);
    for _ in 0..STREAMS {
        let socket = TcpSocket::new_v4().unwrap();
        // A small window, so the gateway's writes block soon after the client stops reading.
        socket.set_recv_buffer_size(4096).unwrap();
        let mut stream = socket.connect(gateway.addr()).await.unwrap();
        stream.write_all(request.as_bytes()).await.unwrap();
        stalled.push(stream); // never read
    }
    upstream.wait_for_requests(STREAMS, Duration::from_secs(300)).await;

    // Instance slots (1,000), admission and the upstream are all held by streams
    // nobody reads; a fresh call still gets through, at worst after a wait.
    let asked = Instant::now();
    let fresh = reqwest::Client::new()
        .post(gateway.url("/v1/chat/completions"))
        .timeout(Duration::from_secs(120))
        .json(&chat_body("fresh"))
        .send()
        .await
        .unwrap();
    assert_eq!(fresh.status(), 200, "{:?}", fresh.text().await);
    let answer: Value = fresh.json().await.unwrap();
    assert_eq!(answer["choices"][0]["message"]["content"], "echo: fresh");
    eprintln!("the fresh call was answered {:?} after it was sent", asked.elapsed());

    // Every stalled stream was dropped: the upstream saw each connection closed mid-answer.
    let deadline = Instant::now() + Duration::from_secs(300);
    while upstream.answers_cut() < STREAMS {
        assert!(
            Instant::now() < deadline,
            "only {} of {STREAMS} stalled streams had their upstream connection closed",
            upstream.answers_cut()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(upstream.request_count(), STREAMS + 1);
    assert_eq!(upstream.received()[STREAMS].json()["messages"][0]["content"], "fresh");
    assert_eq!(upstream.queued(), 0);
    // And nothing is held for them any more.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let models: Value = reqwest::get(gateway.url("/v1/models")).await.unwrap().json().await.unwrap();
        let in_flight = models["data"][0]["weir"]["admission"]["in_flight"].as_u64().unwrap();
        if in_flight == 0 {
            break;
        }
        assert!(Instant::now() < deadline, "{in_flight} calls still admitted");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // The stalled clients find their connections closed.
    let (_, closed) = read_until_closed(&mut stalled[0], Duration::from_secs(30)).await;
    assert!(closed);
    // The gateway logged why it closed them (its stderr is drained by a thread: waited for).
    gateway.wait_for_stderr("Unread", Duration::from_secs(5)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_drains_a_call_in_flight_answers_health_draining_and_exits_zero() {
    let upstream = FakeUpstream::start().await;
    upstream.push(openai_wire::completion("finished during the drain").after(Duration::from_secs(4)));
    let mut gateway = gateway(&upstream, "drain_secs = 30").await;
    let client = reqwest::Client::new();
    let slow = tokio::spawn(client.post(gateway.url("/v1/chat/completions")).json(&chat_body("slow")).send());
    upstream.wait_for_requests(1, Duration::from_secs(30)).await;

    assert!(gateway.signal("TERM"));
    gateway.wait_for_stderr("draining", Duration::from_secs(30)).await;
    let health = reqwest::get(gateway.url("/health")).await.unwrap();
    assert_eq!(health.status(), 503);
    assert_eq!(health.json::<Value>().await.unwrap(), json!({"status": "draining"}));
    let (status, headers, answer) =
        post_raw(&gateway, "/v1/chat/completions", &[JSON], serde_json::to_vec(&chat_body("late")).unwrap()).await;
    assert_eq!(status, 503, "no new call starts while draining: {answer}");
    assert_eq!(answer["error"]["type"], "gateway_busy");
    assert!(headers.contains_key("retry-after"));

    let first: Value = slow.await.unwrap().unwrap().json().await.unwrap();
    assert_eq!(first["choices"][0]["message"]["content"], "finished during the drain");
    let status = tokio::task::block_in_place(|| gateway.wait_for_exit(Duration::from_secs(60)));
    assert_eq!(status.map(|s| s.code()), Some(Some(0)), "{}", gateway.stderr());
    assert!(TcpStream::connect(gateway.addr()).await.is_err(), "no connection is accepted after the exit");
    assert_eq!(upstream.request_count(), 1, "the refused call sent nothing");
    assert_eq!(upstream.queued(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_signal_during_the_drain_stops_at_once() {
    let upstream = FakeUpstream::start().await;
    upstream.push(openai_wire::completion("never").after(Duration::from_secs(120)));
    let mut gateway = gateway(&upstream, "drain_secs = 120").await;
    let slow =
        tokio::spawn(reqwest::Client::new().post(gateway.url("/v1/chat/completions")).json(&chat_body("slow")).send());
    upstream.wait_for_requests(1, Duration::from_secs(30)).await;

    assert!(gateway.signal("TERM"));
    gateway.wait_for_stderr("draining", Duration::from_secs(30)).await;
    assert!(gateway.signal("INT"));
    let started = Instant::now();
    let status = tokio::task::block_in_place(|| gateway.wait_for_exit(Duration::from_secs(60)));
    let status = status.expect("exited on the second signal");
    assert!(started.elapsed() < Duration::from_secs(60));
    assert_eq!(status.code(), Some(1), "a cut drain is not a clean exit");
    gateway.wait_for_stderr("second signal", Duration::from_secs(5)).await;
    assert!(slow.await.unwrap().is_err(), "the cut call's connection was closed");
    assert_eq!(upstream.request_count(), 1);
}

/// `weir serve` started, as from most shells, at a soft open-file limit far
/// below what `[server]` admits: a soft limit of 300 would fail `accept` past
/// ~300 connections while `max_connections` says 4,096. The gateway raises its
/// soft limit to the hard one, and warns when the hard limit itself is below
/// what its settings may hold (4,096 + 2,048 + 256).
#[test]
fn weir_serve_raises_its_open_file_limit_and_warns_when_the_hard_one_is_short() {
    for (limits, soft, log) in [
        ("300:20000", "20000", "raised the open-files soft limit"),
        ("300:1000", "1000", "the open-files hard limit is below what [server] max_connections"),
    ] {
        let mut child = std::process::Command::new("prlimit")
            .arg(format!("--nofile={limits}"))
            .arg("--")
            .arg(weir_tests::weir_binary())
            .args(["serve", "--listen", "127.0.0.1:0"])
            .env("WEIR_CACHE_DIR", weir_tests::gateway::shared_cache_dir())
            .env("RUST_LOG", "info")
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("prlimit runs weir serve");
        let mut line = String::new();
        let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
        std::io::BufRead::read_line(&mut stdout, &mut line).unwrap();
        assert!(line.starts_with("listening on "), "{line}");
        let proc_limits = std::fs::read_to_string(format!("/proc/{}/limits", child.id())).unwrap();
        let open_files = proc_limits.lines().find(|l| l.starts_with("Max open files")).unwrap().to_owned();
        child.kill().unwrap();
        let output = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        let fields: Vec<&str> = open_files.split_whitespace().collect();
        assert_eq!(fields[3], soft, "{limits}: {open_files}");
        assert!(stderr.contains(log), "{limits}: {stderr}");
    }
}

/// More live streams than the engine's old fixed pool of 1,000 instances, each
/// outlasting the 10 s a call waits for a free instance: the pool is sized
/// from `max_in_flight` (here 1,100), so every stream is served whole and none
/// is answered `gateway_busy` (with a pool of 1,000, the last 50 were).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn more_live_streams_than_a_thousand_are_all_served_when_max_in_flight_admits_them() {
    const STREAMS: usize = 1_050;
    let upstream = FakeUpstream::start().await;
    let texts: Vec<String> = (0..12).map(|i| format!("part {i} ")).collect();
    let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
    let stream = Scripted::Stream {
        status: 200,
        headers: vec![("content-type".into(), "text/event-stream".into())],
        chunks: openai_wire::sse_chunks(&texts),
        pause: Duration::from_millis(1_000),
    };
    for _ in 0..STREAMS {
        upstream.push(stream.clone());
    }
    let gateway = gateway(&upstream, "max_in_flight = 1100\nmax_connections = 1200").await;
    let client = reqwest::Client::builder().pool_max_idle_per_host(0).build().unwrap();
    let body = json!({"model": "chat", "stream": true, "messages": [{"role": "user", "content": "long"}]});
    let calls: Vec<_> = (0..STREAMS)
        .map(|_| {
            let request = client.post(gateway.url("/v1/chat/completions")).json(&body).send();
            tokio::spawn(async move {
                let response = request.await.unwrap();
                (response.status().as_u16(), response.text().await.unwrap_or_default())
            })
        })
        .collect();
    let mut statuses = std::collections::BTreeMap::new();
    let mut whole = 0;
    for call in calls {
        let (status, text) = call.await.unwrap();
        *statuses.entry(status).or_insert(0) += 1;
        if status != 200 {
            eprintln!("{status}: {text}");
        }
        whole += usize::from(text.contains("part 11") && text.contains("[DONE]"));
    }
    assert_eq!(statuses, std::collections::BTreeMap::from([(200, STREAMS)]), "no stream refused");
    assert_eq!(whole, STREAMS, "every stream reached its end");
}
