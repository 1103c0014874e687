//! What naming a role costs against naming the entry it resolves to, in one
//! run, interleaved in rounds so drift on a shared machine falls on both sides
//! alike:
//!
//! - the same `POST /v1/chat/completions` through the in-process router to the
//!   same fake upstream, `"model": "a"` (the entry) vs `"model": "chat"` (a
//!   role whose grade's first entry has no secret and is passed over, the
//!   worst ordinary case: two entries resolved for one call);
//! - resolution alone ([`Weir::resolve`]: key, envelope, provider, reach,
//!   credential and region, as a call resolves them), the entry vs the role,
//!   and a pinned role.
//!
//! The policy stages (effort, answer reserve, context window) run on both
//! sides of the first pair alike. Printed as means, their difference and a ratio.

// Benchmark setup: a failed step should stop the run with its message.
#![allow(clippy::expect_used, clippy::print_stderr, reason = "a benchmark reports on stderr")]

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::Request;
use tower::ServiceExt;
use weir_host::transport::{Secret, SecretStore};
use weir_host::{Config, Weir};
use weir_tests::FakeUpstream;

const ROUNDS: u32 = 20;
const CALLS_PER_ROUND: u32 = 100;
const RESOLVES: u32 = 20_000;

/// Holds `present-key` only.
#[derive(Debug)]
struct OneSecret;

impl SecretStore for OneSecret {
    fn get(&self, credential_id: &str) -> Option<Secret> {
        (credential_id == "present-key").then(|| Secret::new("sk-bench"))
    }

    fn location(&self, credential_id: &str) -> String {
        format!("the bench's store `{credential_id}`")
    }
}

fn weir(endpoint: &str) -> Weir {
    let entry = |id: &str, credential: &str| {
        format!(
            "[[model]]\nid = \"{id}\"\nprovider = \"openai\"\nwire_id = \"qwen3\"\nendpoint = \"{endpoint}\"\n\
             credential = \"{credential}\"\ngrade = \"fast\"\nmax_output_tokens = 1000\ncontext_window = 10000\n\
             output_tokens = 20\n"
        )
    };
    let toml = format!(
        "[role.chat]\ngrade = \"fast\"\n[role.pinned]\nmodel = \"a\"\n{}{}",
        entry("gone", "missing-key"),
        entry("a", "present-key")
    );
    Weir::builder()
        .config(Config::from_toml(&toml, "roles bench").expect("config"))
        .providers_dir("/nonexistent-weir-bench-providers")
        .secret_store(Arc::new(OneSecret))
        .build()
        .expect("weir")
}

async fn call(router: &axum::Router, model: &str) {
    let request = Request::post("/v1/chat/completions").header("content-type", "application/json");
    let body = format!(r#"{{"model":"{model}","messages":[{{"role":"user","content":"Hello"}}]}}"#);
    let response = router.clone().oneshot(request.body(Body::from(body)).expect("request")).await.expect("infallible");
    assert_eq!(response.status(), 200, "the benchmark call must succeed");
    black_box(axum::body::to_bytes(response.into_body(), 1 << 20).await.expect("body"));
}

async fn timed(router: &axum::Router, model: &str) -> Duration {
    let started = Instant::now();
    for _ in 0..CALLS_PER_ROUND {
        call(router, model).await;
    }
    started.elapsed()
}

async fn resolve_alone(weir: &Weir, name: &str) -> Duration {
    let started = Instant::now();
    for _ in 0..RESOLVES {
        black_box(weir.resolve(black_box(name), None).await.expect("resolves"));
    }
    started.elapsed() / RESOLVES
}

fn report(what: &str, without: Duration, with: Duration) {
    let added = with.as_secs_f64() - without.as_secs_f64();
    eprintln!("{what}:");
    eprintln!("  entry named             {:>9.2} µs", without.as_secs_f64() * 1e6);
    eprintln!("  role named              {:>9.2} µs", with.as_secs_f64() * 1e6);
    eprintln!(
        "  added                   {:>9.2} µs  (ratio {:.3})",
        added * 1e6,
        with.as_secs_f64() / without.as_secs_f64()
    );
}

fn main() {
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    runtime.block_on(async {
        let upstream = FakeUpstream::start().await;
        let weir = weir(&upstream.base_url());
        let router = weir_host::server::router(weir.clone());
        for _ in 0..CALLS_PER_ROUND {
            call(&router, "a").await;
            call(&router, "chat").await;
        }
        let (mut entry, mut role) = (Duration::ZERO, Duration::ZERO);
        for _ in 0..ROUNDS {
            entry += timed(&router, "a").await;
            role += timed(&router, "chat").await;
        }
        let calls = ROUNDS * CALLS_PER_ROUND;
        report(&format!("one call through the router ({calls} calls each, interleaved)"), entry / calls, role / calls);

        let (mut entry, mut role, mut pinned) = (Duration::ZERO, Duration::ZERO, Duration::ZERO);
        for _ in 0..5 {
            entry += resolve_alone(&weir, "a").await;
            role += resolve_alone(&weir, "chat").await;
            pinned += resolve_alone(&weir, "pinned").await;
        }
        report("resolution alone, a grade whose first entry is passed over", entry / 5, role / 5);
        report("resolution alone, a role naming the entry", entry / 5, pinned / 5);
    });
}
