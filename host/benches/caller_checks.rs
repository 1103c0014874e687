//! What the caller-key check and the edge checks add to one gateway call, in
//! one run, interleaved in rounds so drift on a shared machine falls on both
//! sides alike:
//!
//! - the same `POST /v1/chat/completions` through the in-process router (no
//!   sockets), to the same fake upstream, with and without `[[key]]`s;
//! - the same call over loopback HTTP with keep-alive: the bare router under
//!   `axum::serve` and no keys, against `weir serve`'s own edge
//!   (`server::serve`: connection watchdog, content-type, origin, body limit,
//!   in-flight cap) with a key;
//! - the ring's authentication alone (hash, prefix lookup, constant-time
//!   compare), for 10 and 1,000 configured keys.
//!
//! Printed as means, their difference and a ratio.
//!
//! The wall clock of this shared 2-core machine moves more between runs than
//! the few microseconds measured here, so the loopback pair also runs one
//! side alone for `valgrind --tool=callgrind`, whose instruction counts hold
//! still: `WEIR_EDGE_SIDE=bare|edge WEIR_EDGE_CALLS=N` makes N loopback calls
//! of that side after a warm-up, then exits. Per call and side:
//! (instructions at N = 600 − at N = 100) / 500, the client and the fake
//! upstream counted alike on both sides.

// Benchmark setup: a failed step should stop the run with its message.
#![allow(clippy::expect_used, clippy::print_stderr, reason = "a benchmark reports on stderr")]

use std::future::IntoFuture;
use std::hint::black_box;
use std::time::{Duration, Instant, SystemTime};

use axum::body::Body;
use axum::http::Request;
use tower::ServiceExt;
use weir_host::admission::InProcessStore;
use weir_host::identity::KeyRing;
use weir_host::{Config, Weir};
use weir_tests::FakeUpstream;

#[path = "support/gateway.rs"]
#[allow(dead_code, reason = "this bench takes only the model entry")]
mod gateway;
use gateway::chat_model;
#[path = "support/keys.rs"]
mod keys;
use keys::key_lines;

const TOKEN: &str = "weir-bench-token-0123456789abcdef0123456789abcdef";
const ROUNDS: u32 = 20;
const CALLS_PER_ROUND: u32 = 100;

fn config(endpoint: &str, keys: &str) -> Config {
    let toml = format!("{}{keys}", chat_model(endpoint, 20));
    Config::from_toml(&toml, "caller_checks bench").expect("config")
}

fn weir(config: Config) -> Weir {
    Weir::builder().config(config).providers_dir("/nonexistent-weir-bench-providers").build().expect("weir")
}

async fn call(router: &axum::Router, token: Option<&str>) {
    let mut request = Request::post("/v1/chat/completions").header("content-type", "application/json");
    if let Some(token) = token {
        request = request.header("authorization", format!("Bearer {token}"));
    }
    let body = r#"{"model":"chat","messages":[{"role":"user","content":"Hello"}]}"#;
    let response = router.clone().oneshot(request.body(Body::from(body)).expect("request")).await.expect("infallible");
    assert_eq!(response.status(), 200, "the benchmark call must succeed");
    let bytes = axum::body::to_bytes(response.into_body(), 1 << 20).await.expect("body");
    black_box(bytes);
}

async fn timed(router: &axum::Router, token: Option<&str>) -> Duration {
    let started = Instant::now();
    for _ in 0..CALLS_PER_ROUND {
        call(router, token).await;
    }
    started.elapsed()
}

async fn call_http(client: &reqwest::Client, base: &str, token: Option<&str>) {
    let mut request = client
        .post(format!("{base}/v1/chat/completions"))
        .header("content-type", "application/json")
        .body(r#"{"model":"chat","messages":[{"role":"user","content":"Hello"}]}"#);
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let response = request.send().await.expect("send");
    assert_eq!(response.status(), 200, "the benchmark call must succeed");
    black_box(response.bytes().await.expect("body"));
}

async fn timed_http(client: &reqwest::Client, base: &str, token: Option<&str>) -> Duration {
    let started = Instant::now();
    for _ in 0..CALLS_PER_ROUND {
        call_http(client, base, token).await;
    }
    started.elapsed()
}

async fn listener() -> (tokio::net::TcpListener, String) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let base = format!("http://{}", listener.local_addr().expect("address"));
    (listener, base)
}

fn report(what: &str, without: Duration, with: Duration) {
    let calls = ROUNDS * CALLS_PER_ROUND;
    let (without, with) = (without / calls, with / calls);
    let added = with.as_secs_f64() - without.as_secs_f64();
    eprintln!("{what} ({calls} calls each, interleaved):");
    eprintln!("  without                 {:>9.1} µs", without.as_secs_f64() * 1e6);
    eprintln!("  with                    {:>9.1} µs", with.as_secs_f64() * 1e6);
    eprintln!(
        "  added                   {:>9.1} µs  (ratio {:.3})",
        added * 1e6,
        with.as_secs_f64() / without.as_secs_f64()
    );
}

fn authenticate_alone(keys: usize) -> Duration {
    let entries = weir(config("http://127.0.0.1:9", &key_lines(keys, TOKEN))).config().keys.clone();
    let ring = KeyRing::new(&entries, None, &InProcessStore).expect("ring");
    let iterations = 20_000;
    let started = Instant::now();
    for _ in 0..iterations {
        black_box(ring.authenticate(Some(black_box(TOKEN)), SystemTime::now()).is_ok());
    }
    started.elapsed() / iterations
}

/// One side of the loopback pair alone, `calls` times (see the module doc):
/// `bare`, else the edge with a key.
async fn one_side(side: &str, calls: u32) {
    let upstream = FakeUpstream::start().await;
    let (listener, base) = listener().await;
    let token = match side {
        "bare" => {
            let open = weir_host::server::router(weir(config(&upstream.base_url(), "")));
            tokio::spawn(axum::serve(listener, open).into_future());
            None
        }
        _ => {
            let keyed = weir(config(&upstream.base_url(), &key_lines(10, TOKEN)));
            tokio::spawn(weir_host::server::serve(keyed, listener));
            Some(TOKEN)
        }
    };
    let client = reqwest::Client::builder().tcp_nodelay(true).build().expect("client");
    for _ in 0..CALLS_PER_ROUND + calls {
        call_http(&client, &base, token).await;
    }
}

fn main() {
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    if let Ok(side) = std::env::var("WEIR_EDGE_SIDE") {
        let calls = std::env::var("WEIR_EDGE_CALLS").ok().and_then(|n| n.parse().ok()).expect("WEIR_EDGE_CALLS=N");
        runtime.block_on(one_side(&side, calls));
        return;
    }
    runtime.block_on(async {
        let upstream = FakeUpstream::start().await;
        let open = weir_host::server::router(weir(config(&upstream.base_url(), "")));
        let keyed_weir = weir(config(&upstream.base_url(), &key_lines(10, TOKEN)));
        let keyed = weir_host::server::router(keyed_weir.clone());
        for _ in 0..CALLS_PER_ROUND {
            call(&open, None).await;
            call(&keyed, Some(TOKEN)).await;
        }
        let (mut without, mut with) = (Duration::ZERO, Duration::ZERO);
        for _ in 0..ROUNDS {
            without += timed(&open, None).await;
            with += timed(&keyed, Some(TOKEN)).await;
        }
        report("in-process router, a key (10 in the ring) vs none", without, with);

        let (bare_listener, bare) = listener().await;
        tokio::spawn(axum::serve(bare_listener, open.clone()).into_future());
        let (edge_listener, edged) = listener().await;
        tokio::spawn(weir_host::server::serve(keyed_weir, edge_listener));
        let client = reqwest::Client::builder().tcp_nodelay(true).build().expect("client");
        for _ in 0..CALLS_PER_ROUND {
            call_http(&client, &bare, None).await;
            call_http(&client, &edged, Some(TOKEN)).await;
        }
        let (mut without, mut with) = (Duration::ZERO, Duration::ZERO);
        for _ in 0..ROUNDS {
            without += timed_http(&client, &bare, None).await;
            with += timed_http(&client, &edged, Some(TOKEN)).await;
        }
        report("loopback HTTP, weir's edge and a key vs the bare router and none", without, with);
    });
    for keys in [10, 1_000] {
        eprintln!("authenticate alone, {keys:>5} keys: {:>7.2} µs", authenticate_alone(keys).as_secs_f64() * 1e6);
    }
}
