//! What streaming through Weir adds, against the same fake OpenAI upstream
//! called directly, in one run on loopback:
//!
//! - **time to first content**: from sending the request to the first SSE event
//!   whose `choices[0].delta.content` is a non-empty string (for Weir, whose first
//!   event also carries the role, that is its first event);
//! - **per-chunk cost**: a stream of 200 content chunks the upstream writes back to
//!   back, timed from sending the request to the end of the body.
//!
//! The gateway runs in this process on a runtime of its own, as `weir serve` does
//! (`host/src/bin/weir.rs`), served by `weir_host::server::serve` (which serves
//! each connection on one of its lanes, a thread per core); the fake
//! upstream runs on its own thread; the client is reqwest on a third runtime, with
//! the same settings for both paths. Direct and Weir samples alternate (and swap
//! which goes first) so that load from other work on this shared machine lands on
//! both; medians are reported.
//!
//! To attribute the per-chunk cost, the same 200-chunk body is also fed, in
//! memory, through the gateway's SSE framing and the provider component's stream
//! decoder (one instance per stream, one call per event), as the gateway does.
//!
//! `STREAM_BENCH_POLL_BEFORE_SLEEP_US` sets the gateway's `[server]
//! poll_before_sleep_us` (default: the gateway's default), to compare a lane
//! that sleeps at once (0) with one that watches for I/O first.
//!
//! A control gateway served without `TCP_NODELAY` on its client sockets (plain
//! `axum::serve` over the same router) shows what `serve`'s `tap_io` is for: the
//! ~40 ms that Nagle's algorithm waits for the client's delayed ACK.

// Benchmark setup: a failed step should stop the run with its message, and the
// figures are the output.
#![allow(clippy::expect_used, clippy::print_stderr, reason = "a benchmark reports on stderr")]

use std::time::{Duration, Instant};

use bytes::Bytes;
use serde_json::{Value, json};
use tokio::runtime::Runtime;
use weir_host::stream::framing::FrameDecoder;
use weir_host::types::StreamFraming;
use weir_tests::{FakeUpstream, openai_wire};

#[path = "support/gateway.rs"]
mod gateway;
use gateway::{cached_weir, chat_model, serve_on_loopback};

/// Time-to-first-content samples per path; even, so both orders occur equally.
const TTFB_SAMPLES: usize = 200;
/// Long-stream samples per path.
const STREAM_SAMPLES: usize = 30;
/// Content chunks in a long stream.
const STREAM_CHUNKS: usize = 200;
/// Rounds run and discarded first: connection pools, allocator, caches.
const WARMUP: usize = 20;
/// Samples per path in the Nagle control; each may cost ~40 ms or more.
const NAGLE_SAMPLES: usize = 20;

/// Where a request goes, and the model id that path knows.
struct Target {
    url: String,
    body: Bytes,
}

impl Target {
    fn new(base_url: &str, model: &str) -> Self {
        let body = json!({
            "model": model,
            "stream": true,
            "stream_options": {"include_usage": true},
            "messages": [{"role": "user", "content": "Hello"}],
        });
        Self {
            url: format!("{base_url}/chat/completions"),
            body: Bytes::from(serde_json::to_vec(&body).expect("request body serializes")),
        }
    }
}

/// One streamed request's timings, both from just before the request was sent.
struct Sample {
    first_content: Duration,
    last_byte: Duration,
}

fn main() {
    let client_runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("client runtime");
    // `start` binds synchronously and runs the server on a thread of its own.
    let upstream = client_runtime.block_on(FakeUpstream::start());
    // The gateway's own runtime, which accepts while this thread is the client:
    // `serve` runs each connection on its lanes, as in `weir serve`.
    let gateway_runtime = Runtime::new().expect("gateway runtime");
    let weir = build_weir(&upstream.base_url());
    let weir_base = gateway_runtime.block_on(spawn_gateway(weir.clone(), true));
    let nagle_base = gateway_runtime.block_on(spawn_gateway(weir.clone(), false));

    let direct = Target::new(&upstream.base_url(), "qwen3");
    let through_weir = Target::new(&weir_base, "chat");
    let without_nodelay = Target::new(&nagle_base, "chat");
    // Both paths use this one client: the same pool settings, `TCP_NODELAY` on
    // (reqwest's default, set explicitly so the comparison does not depend on it).
    let client = reqwest::Client::builder().tcp_nodelay(true).timeout(Duration::from_secs(10)).build().expect("client");

    let short = ["Hello", ", Weir"];
    let long_texts: Vec<String> = (0..STREAM_CHUNKS).map(|i| format!("tok{i} ")).collect();
    let long: Vec<&str> = long_texts.iter().map(String::as_str).collect();

    client_runtime.block_on(async {
        eprintln!("warming up ({WARMUP} rounds per case)...");
        paired(&client, &upstream, &direct, &through_weir, &short, WARMUP).await;
        paired(&client, &upstream, &direct, &through_weir, &long, WARMUP / 4).await;
        paired(&client, &upstream, &through_weir, &without_nodelay, &short, 2).await;

        let (direct_short, weir_short) = paired(&client, &upstream, &direct, &through_weir, &short, TTFB_SAMPLES).await;
        let (direct_long, weir_long) = paired(&client, &upstream, &direct, &through_weir, &long, STREAM_SAMPLES).await;
        let (nodelay_short, nagle_short) =
            paired(&client, &upstream, &through_weir, &without_nodelay, &short, NAGLE_SAMPLES).await;
        let (nodelay_long, nagle_long) =
            paired(&client, &upstream, &through_weir, &without_nodelay, &long, NAGLE_SAMPLES / 2).await;

        report_ttfb(&direct_short, &weir_short);
        report_stream(&direct_long, &weir_long);
        report_nagle(&nodelay_short, &nagle_short, &nodelay_long, &nagle_long);
        report_decode(&weir, &long).await;
    });
    assert_eq!(upstream.queued(), 0, "every scripted answer was used");
    // The gateway tasks end with their runtime.
    drop(gateway_runtime);
}

/// A gateway in front of `endpoint`: one `openai-compatible` model (no key, the
/// embedded OpenAI component), no providers folder, a cache of its own so the
/// component is compiled once across runs.
fn build_weir(endpoint: &str) -> weir_host::Weir {
    let poll_before_sleep = std::env::var("STREAM_BENCH_POLL_BEFORE_SLEEP_US")
        .map(|micros| format!("\n[server]\npoll_before_sleep_us = {micros}\n"))
        .unwrap_or_default();
    let toml = format!("read_timeout_secs = 10\n{poll_before_sleep}\n{}", chat_model(endpoint, 100));
    cached_weir(&toml, "stream_latency bench")
}

/// Serves `weir` on a free loopback port and returns its OpenAI base URL. With
/// `nodelay`, through `weir_host::server::serve` (what `weir serve` runs); without,
/// the same router on plain `axum::serve`, which leaves Nagle on.
async fn spawn_gateway(weir: weir_host::Weir, nodelay: bool) -> String {
    if nodelay {
        return serve_on_loopback(weir).await;
    }
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind gateway");
    let base = format!("http://{}/v1", listener.local_addr().expect("gateway address"));
    let router = weir_host::server::router(weir);
    tokio::spawn(async move { axum::serve(listener, router).await });
    base
}

/// `rounds` samples of each target, alternating which goes first, each with
/// `texts` scripted as the upstream's stream just before its request.
async fn paired(
    client: &reqwest::Client,
    upstream: &FakeUpstream,
    a: &Target,
    b: &Target,
    texts: &[&str],
    rounds: usize,
) -> (Vec<Sample>, Vec<Sample>) {
    let mut a_samples = Vec::with_capacity(rounds);
    let mut b_samples = Vec::with_capacity(rounds);
    for round in 0..rounds {
        if round % 2 == 0 {
            a_samples.push(sample(client, upstream, a, texts).await);
            b_samples.push(sample(client, upstream, b, texts).await);
        } else {
            b_samples.push(sample(client, upstream, b, texts).await);
            a_samples.push(sample(client, upstream, a, texts).await);
        }
    }
    (a_samples, b_samples)
}

/// Scripts the upstream, sends one streaming request and reads the body to its
/// end, noting when the first content event is complete. The body is checked
/// after the clock stopped.
async fn sample(client: &reqwest::Client, upstream: &FakeUpstream, target: &Target, texts: &[&str]) -> Sample {
    upstream.push(openai_wire::stream(openai_wire::sse_chunks(texts)));
    let started = Instant::now();
    let mut response = client
        .post(&target.url)
        .header("content-type", "application/json")
        .body(target.body.clone())
        .send()
        .await
        .expect("send");
    let mut first_content = None;
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.expect("read body") {
        body.extend_from_slice(&chunk);
        if first_content.is_none() && has_content_event(&body) {
            first_content = Some(started.elapsed());
        }
    }
    let last_byte = started.elapsed();
    let body = String::from_utf8(body).expect("UTF-8 body");
    assert_eq!(openai_wire::streamed_text(&body), texts.concat(), "{} streamed:\n{body}", target.url);
    assert!(body.ends_with("data: [DONE]\n\n"), "{} streamed:\n{body}", target.url);
    Sample { first_content: first_content.expect("a content event"), last_byte }
}

/// Whether the complete events in `body` include one with non-empty
/// `choices[0].delta.content`. Rescans from the start: it runs only until the
/// first such event, a few events in.
fn has_content_event(body: &[u8]) -> bool {
    let text = String::from_utf8_lossy(body);
    let complete = text.rfind("\n\n").map_or("", |end| &text[..end + 2]);
    openai_wire::sse_data(complete).iter().filter(|data| data.as_str() != "[DONE]").any(|data| {
        serde_json::from_str::<Value>(data)
            .ok()
            .and_then(|event| event.pointer("/choices/0/delta/content").and_then(Value::as_str).map(str::len))
            .is_some_and(|len| len > 0)
    })
}

fn report_ttfb(direct: &[Sample], weir: &[Sample]) {
    let (d, w) = (firsts(direct), firsts(weir));
    eprintln!();
    eprintln!("time to first content event (send → first `delta.content`), {} samples each:", d.len());
    eprintln!("  direct:       median {:>8.1} µs   p90 {:>8.1} µs", us(median(&d)), us(percentile(&d, 0.9)));
    eprintln!("  through weir: median {:>8.1} µs   p90 {:>8.1} µs", us(median(&w)), us(percentile(&w, 0.9)));
    eprintln!(
        "  added by weir: {:.1} µs ({:.2}× direct); median of per-round differences {:.1} µs   [target ≤ 300 µs]",
        us(median(&w)) - us(median(&d)),
        us(median(&w)) / us(median(&d)),
        median_difference(&d, &w),
    );
}

fn report_stream(direct: &[Sample], weir: &[Sample]) {
    let (d, w) = (lasts(direct), lasts(weir));
    let added = us(median(&w)) - us(median(&d));
    // After the first content event: the other chunks, the finish, usage and
    // `[DONE]`. The per-request cost (request parsing, encode, admission, the
    // upstream request) is all before it.
    let d_tail: Vec<Duration> = direct.iter().map(|s| s.last_byte - s.first_content).collect();
    let w_tail: Vec<Duration> = weir.iter().map(|s| s.last_byte - s.first_content).collect();
    let tail_added = us(median(&w_tail)) - us(median(&d_tail));
    eprintln!();
    eprintln!("{STREAM_CHUNKS} content chunks back to back (send → last byte), {} samples each:", d.len());
    eprintln!("  direct:       median {:>8.1} µs", us(median(&d)));
    eprintln!("  through weir: median {:>8.1} µs", us(median(&w)));
    eprintln!("  added by weir: {added:.1} µs ({:.2}× direct)", us(median(&w)) / us(median(&d)));
    eprintln!("  per chunk, (weir − direct) / {STREAM_CHUNKS}: {:.2} µs", added / STREAM_CHUNKS as f64);
    eprintln!(
        "  per chunk after the first content event (first → last byte: direct {:.1} µs, weir {:.1} µs): {:.2} µs   [target ≤ 5 µs]",
        us(median(&d_tail)),
        us(median(&w_tail)),
        tail_added / (STREAM_CHUNKS - 1) as f64
    );
}

fn report_nagle(nodelay_short: &[Sample], nagle_short: &[Sample], nodelay_long: &[Sample], nagle_long: &[Sample]) {
    let (on, off) = (firsts(nodelay_short), firsts(nagle_short));
    let (long_on, long_off) = (lasts(nodelay_long), lasts(nagle_long));
    eprintln!();
    eprintln!("TCP_NODELAY on the gateway's client sockets (`serve`) vs off (plain `axum::serve`):");
    eprintln!(
        "  first content, {} samples each: on median {:>8.1} µs (max {:>8.1} µs), off median {:>8.1} µs (min {:>8.1} µs)",
        on.len(),
        us(median(&on)),
        us(percentile(&on, 1.0)),
        us(median(&off)),
        us(percentile(&off, 0.0)),
    );
    eprintln!(
        "  {STREAM_CHUNKS} chunks, {} samples each: on median {:>8.1} µs, off median {:>8.1} µs",
        long_on.len(),
        us(median(&long_on)),
        us(median(&long_off)),
    );
}

/// SSE framing plus the component's stream decoder over the whole long-stream
/// body in memory: the part of the gateway's per-event work that is neither a
/// socket nor the chunk it writes back (repair and the OpenAI chunk JSON).
async fn report_decode(weir: &weir_host::Weir, texts: &[&str]) {
    let registry = weir.registry();
    let provider = registry.get("openai-compatible").expect("the openai-compatible provider");
    let body: Vec<u8> = openai_wire::sse_chunks(texts).concat();
    let mut per_stream = Vec::with_capacity(STREAM_SAMPLES);
    let mut events = 0;
    for round in 0..WARMUP + STREAM_SAMPLES {
        let started = Instant::now();
        let mut framer = FrameDecoder::new(StreamFraming::Sse);
        let mut decoder = provider.open_stream().await.expect("stream decoder");
        let opened = started.elapsed();
        let framed = framer.push(&body).expect("SSE framing");
        for event in &framed {
            decoder.feed(event).await.expect("feed");
        }
        decoder.finish().await.expect("finish");
        if round >= WARMUP {
            per_stream.push(started.elapsed() - opened);
        }
        events = framed.len();
    }
    eprintln!();
    eprintln!(
        "in memory, SSE framing + component stream decoder, {events} events, {} samples: median {:.1} µs = {:.2} µs per event",
        per_stream.len(),
        us(median(&per_stream)),
        us(median(&per_stream)) / events as f64
    );
}

fn firsts(samples: &[Sample]) -> Vec<Duration> {
    samples.iter().map(|s| s.first_content).collect()
}

fn lasts(samples: &[Sample]) -> Vec<Duration> {
    samples.iter().map(|s| s.last_byte).collect()
}

/// The median of `b[i] − a[i]` in µs: each round's pair saw the same moment of
/// the machine.
fn median_difference(a: &[Duration], b: &[Duration]) -> f64 {
    let mut differences: Vec<f64> = a.iter().zip(b).map(|(a, b)| us(*b) - us(*a)).collect();
    differences.sort_by(f64::total_cmp);
    differences[differences.len() / 2]
}

fn median(samples: &[Duration]) -> Duration {
    percentile(samples, 0.5)
}

/// The sample at fraction `p` of the sorted samples (0: the minimum, 1: the maximum).
fn percentile(samples: &[Duration], p: f64) -> Duration {
    let mut sorted = samples.to_vec();
    sorted.sort();
    let index = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[index]
}

fn us(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1e6
}
