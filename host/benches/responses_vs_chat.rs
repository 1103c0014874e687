//! What the Responses route costs beside the same call on
//! `/v1/chat/completions` (issue 46: ≤ 10 % more CPU per call, ≤ 5 µs per
//! streamed event), in one run on loopback, one caller:
//!
//! - **a whole answer**: the same scripted completion answered on both routes;
//! - **a stream of 200 content chunks** the upstream writes back to back: chat
//!   writes one chunk per content delta, Responses one `response.output_text.delta`
//!   event, plus its item and response events around them.
//!
//! The gateway runs in this process on a runtime of its own, served by
//! `weir_host::server::serve` as `weir serve` does; the fake upstream and the
//! client (reqwest) run beside it. Chat and Responses samples alternate (and
//! swap which goes first) so that other load on this shared machine lands on
//! both; medians are reported, and the process's CPU time per call over each
//! route's samples (the client's and the upstream's work is the same on both
//! routes, so the difference is the gateway's).

// Benchmark setup: a failed step should stop the run with its message, and the
// figures are the output.
#![allow(clippy::expect_used, clippy::print_stderr, reason = "a benchmark reports on stderr")]

use std::time::{Duration, Instant};

use bytes::Bytes;
use serde_json::json;
use tokio::runtime::Runtime;
use weir_tests::{FakeUpstream, openai_wire};

#[path = "support/gateway.rs"]
mod gateway;
use gateway::{cached_weir, chat_model, serve_on_loopback};

/// Calls of one route in a row: one CPU reading each side of them.
const BLOCK: usize = 20;
/// Whole-answer blocks per route; even, so both orders occur equally.
const WHOLE_ROUNDS: usize = 100;
/// Long-stream blocks per route.
const STREAM_ROUNDS: usize = 10;
/// Content chunks in a long stream.
const STREAM_CHUNKS: usize = 200;
/// Blocks run and discarded first: connection pools, allocator, caches.
const WARMUP: usize = 4;

/// A route: its URL and a request body for it.
struct Route {
    url: String,
    body: Bytes,
}

impl Route {
    fn chat(base: &str, stream: bool) -> Self {
        let body = json!({"model": "chat", "stream": stream, "max_tokens": 16,
                          "messages": [{"role": "user", "content": "Say hello."}]});
        Self::new(format!("{base}/chat/completions"), &body)
    }

    fn responses(base: &str, stream: bool) -> Self {
        let body = json!({"model": "chat", "stream": stream, "max_output_tokens": 16, "store": false,
                          "input": "Say hello."});
        Self::new(format!("{base}/responses"), &body)
    }

    fn new(url: String, body: &serde_json::Value) -> Self {
        Self { url, body: Bytes::from(serde_json::to_vec(body).expect("request body serializes")) }
    }
}

/// One route's samples: each call's wall time, and the process's CPU time over all of them.
struct Samples {
    wall: Vec<Duration>,
    cpu: Duration,
}

fn main() {
    let client_runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("client runtime");
    let upstream = client_runtime.block_on(FakeUpstream::start());
    let gateway_runtime = Runtime::new().expect("gateway runtime");
    let toml = format!("read_timeout_secs = 10\n{}", chat_model(&upstream.base_url(), 100));
    let base = gateway_runtime.block_on(serve_on_loopback(cached_weir(&toml, "responses_vs_chat bench")));
    let client = reqwest::Client::builder().tcp_nodelay(true).timeout(Duration::from_secs(10)).build().expect("client");
    let texts: Vec<String> = (0..STREAM_CHUNKS).map(|i| format!("tok{i} ")).collect();
    let long: Vec<&str> = texts.iter().map(String::as_str).collect();

    client_runtime.block_on(async {
        let (chat, responses) = (Route::chat(&base, false), Route::responses(&base, false));
        eprintln!("warming up ({WARMUP} blocks of {BLOCK} per case)...");
        paired(&client, &upstream, &chat, &responses, None, WARMUP).await;
        let (chat_whole, responses_whole) = paired(&client, &upstream, &chat, &responses, None, WHOLE_ROUNDS).await;
        report("whole answer", &chat_whole, &responses_whole, 1);

        let (chat, responses) = (Route::chat(&base, true), Route::responses(&base, true));
        paired(&client, &upstream, &chat, &responses, Some(&long), 1).await;
        let (chat_long, responses_long) =
            paired(&client, &upstream, &chat, &responses, Some(&long), STREAM_ROUNDS).await;
        report(&format!("stream of {STREAM_CHUNKS} content chunks"), &chat_long, &responses_long, STREAM_CHUNKS);
    });
    assert_eq!(upstream.queued(), 0, "every scripted answer was used");
    drop(gateway_runtime);
}

/// `rounds` blocks of [`BLOCK`] calls of each route, alternating which goes
/// first; `stream` scripts the upstream's stream of those texts, else a whole
/// completion. CPU time is read around each block, not each call, so reading
/// it costs next to nothing.
async fn paired(
    client: &reqwest::Client,
    upstream: &FakeUpstream,
    a: &Route,
    b: &Route,
    stream: Option<&[&str]>,
    rounds: usize,
) -> (Samples, Samples) {
    let mut a_samples = Samples { wall: Vec::with_capacity(rounds * BLOCK), cpu: Duration::ZERO };
    let mut b_samples = Samples { wall: Vec::with_capacity(rounds * BLOCK), cpu: Duration::ZERO };
    for round in 0..rounds {
        let order = match round % 2 {
            0 => [(a, &mut a_samples), (b, &mut b_samples)],
            _ => [(b, &mut b_samples), (a, &mut a_samples)],
        };
        for (route, samples) in order {
            let cpu = process_cpu();
            for _ in 0..BLOCK {
                samples.wall.push(call(client, upstream, route, stream).await);
            }
            samples.cpu += process_cpu().saturating_sub(cpu);
        }
    }
    (a_samples, b_samples)
}

/// Scripts the upstream, sends one request and reads its answer whole.
async fn call(client: &reqwest::Client, upstream: &FakeUpstream, route: &Route, stream: Option<&[&str]>) -> Duration {
    let last_text = match stream {
        Some(texts) => {
            upstream.push(openai_wire::stream(openai_wire::sse_chunks(texts)));
            texts.last().copied().unwrap_or_default()
        }
        None => {
            upstream.push(openai_wire::completion("hello"));
            "hello"
        }
    };
    let started = Instant::now();
    let response =
        client.post(&route.url).header("content-type", "application/json").body(route.body.clone()).send().await;
    let response = response.expect("send");
    assert_eq!(response.status(), 200, "{}", route.url);
    let answer = response.bytes().await.expect("read body");
    let elapsed = started.elapsed();
    let text = String::from_utf8_lossy(&answer);
    assert!(text.contains(last_text.trim()), "{} answered:\n{text}", route.url);
    elapsed
}

fn report(what: &str, chat: &Samples, responses: &Samples, chunks: usize) {
    let (chat_wall, responses_wall) = (us(median(&chat.wall)), us(median(&responses.wall)));
    let (chat_cpu, responses_cpu) = (cpu_per_call(chat), cpu_per_call(responses));
    eprintln!();
    eprintln!("{what}, one caller, {} samples each:", chat.wall.len());
    eprintln!("  chat:      median {chat_wall:>8.1} µs   CPU {chat_cpu:>8.1} µs per call (whole process)");
    eprintln!("  responses: median {responses_wall:>8.1} µs   CPU {responses_cpu:>8.1} µs per call (whole process)");
    eprintln!(
        "  responses / chat: {:.2}× the time, {:.2}× the CPU; +{:.1} µs CPU per call",
        responses_wall / chat_wall,
        responses_cpu / chat_cpu,
        responses_cpu - chat_cpu
    );
    if chunks > 1 {
        eprintln!(
            "  per content chunk beyond chat's: {:.2} µs time, {:.2} µs CPU   [target ≤ 5 µs per event]",
            (responses_wall - chat_wall) / chunks as f64,
            (responses_cpu - chat_cpu) / chunks as f64
        );
    }
}

fn cpu_per_call(samples: &Samples) -> f64 {
    us(samples.cpu) / samples.wall.len() as f64
}

/// The CPU time this process has used (all threads: gateway, upstream,
/// client), from `/proc/self/schedstat` (nanoseconds, not clock ticks).
fn process_cpu() -> Duration {
    let mut total = 0u64;
    for task in std::fs::read_dir("/proc/self/task").expect("/proc/self/task").flatten() {
        let schedstat = std::fs::read_to_string(task.path().join("schedstat")).unwrap_or_default();
        total += schedstat.split_whitespace().next().and_then(|ns| ns.parse::<u64>().ok()).unwrap_or(0);
    }
    Duration::from_nanos(total)
}

fn median(samples: &[Duration]) -> Duration {
    let mut sorted = samples.to_vec();
    sorted.sort();
    sorted[sorted.len() / 2]
}

fn us(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1e6
}
