//! The answer cache's cost and worth, in one run, interleaved in rounds so
//! drift on a shared machine falls on both sides alike:
//!
//! - a hit against a miss: the same `POST /v1/chat/completions` through the
//!   in-process router to the fake upstream (which answers at once), the hit
//!   repeating one body, the miss sending a new body each call (so it looks
//!   up, goes upstream and stores). Printed as calls per second and their ratio;
//! - the lookup and the hash alone on a miss: the key of a typical request
//!   (its wire parameters, a conversation of a system line and one user turn,
//!   the policy flags, no native fields) and a memory lookup that finds
//!   nothing, per call.
//!
//! Memory only (no `[fleet]`), no ledger: what is measured is the cache, not
//! Redis or the ledger's commit.

// Benchmark setup: a failed step should stop the run with its message.
#![allow(clippy::expect_used, clippy::print_stderr, reason = "a benchmark reports on stderr")]

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::Request;
use tower::ServiceExt;
use weir_host::answer_cache::{AnswerCache, CacheScope, KeyWriter, ScopeName};
use weir_host::transport::{Secret, SecretStore};
use weir_host::types::{CallParams, Conversation, NativeRequest};
use weir_host::{Config, Weir};
use weir_tests::FakeUpstream;

const ROUNDS: u32 = 20;
const CALLS_PER_ROUND: u32 = 100;
const LOOKUPS: u32 = 100_000;

#[derive(Debug)]
struct OneSecret;

impl SecretStore for OneSecret {
    fn get(&self, credential_id: &str) -> Option<Secret> {
        (credential_id == "bench-key").then(|| Secret::new("sk-bench"))
    }

    fn location(&self, credential_id: &str) -> String {
        format!("the bench's store `{credential_id}`")
    }
}

fn weir(endpoint: &str) -> Weir {
    let toml = format!(
        "[[model]]\nid = \"cached\"\nprovider = \"openai\"\nwire_id = \"qwen3\"\nendpoint = \"{endpoint}\"\n\
         credential = \"bench-key\"\nmax_output_tokens = 1000\ncontext_window = 10000\noutput_tokens = 20\n\
         cache_ttl_secs = 600\n\n[cache]\n"
    );
    Weir::builder()
        .config(Config::from_toml(&toml, "answer cache bench").expect("config"))
        .providers_dir("/nonexistent-weir-bench-providers")
        .secret_store(Arc::new(OneSecret))
        .build()
        .expect("weir")
}

async fn call(router: &axum::Router, text: &str) -> String {
    let request = Request::post("/v1/chat/completions").header("content-type", "application/json");
    let body = format!(r#"{{"model":"cached","messages":[{{"role":"user","content":"{text}"}}]}}"#);
    let response = router.clone().oneshot(request.body(Body::from(body)).expect("request")).await.expect("infallible");
    assert_eq!(response.status(), 200, "the benchmark call must succeed");
    let mark = response.headers().get("x-weir-cache").map(|v| v.to_str().unwrap_or_default().to_owned());
    black_box(axum::body::to_bytes(response.into_body(), 1 << 20).await.expect("body"));
    mark.unwrap_or_default()
}

/// `CALLS_PER_ROUND` hits of one body.
async fn hits(router: &axum::Router) -> Duration {
    let started = Instant::now();
    for _ in 0..CALLS_PER_ROUND {
        let mark = call(router, "What is the capital of France?").await;
        debug_assert_eq!(mark, "hit");
    }
    started.elapsed()
}

/// `CALLS_PER_ROUND` misses, each a body never sent before.
async fn misses(router: &axum::Router, round: u32) -> Duration {
    let started = Instant::now();
    for call_number in 0..CALLS_PER_ROUND {
        let mark = call(router, &format!("Question {round}-{call_number}: what is the capital of France?")).await;
        debug_assert_eq!(mark, "miss");
    }
    started.elapsed()
}

/// The key of a typical request and a lookup that finds nothing, per call.
async fn lookup_and_hash(cache: &AnswerCache) -> Duration {
    let conversation = Conversation::user("Question 7: what is the capital of France?").with_system("Answer briefly.");
    let mut params = CallParams::new("", 20);
    params.temperature = Some(0.2);
    let scope = ScopeName::of(CacheScope::Member, None);
    let native: Option<NativeRequest> = None;
    let started = Instant::now();
    for n in 0..LOOKUPS {
        let mut writer = KeyWriter::new("chat", "cached", &scope);
        writer.record(&params);
        writer.record(&conversation);
        writer.record(&(false, false));
        writer.record(&native);
        writer.part(&n.to_string());
        let key = writer.finish();
        black_box(cache.get(&key).await);
    }
    started.elapsed() / LOOKUPS
}

fn main() {
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    runtime.block_on(async {
        let upstream = FakeUpstream::start().await;
        let weir = weir(&upstream.base_url());
        let router = weir_host::server::router(weir.clone());
        // Store the hit's answer, then warm up both paths.
        assert_eq!(call(&router, "What is the capital of France?").await, "miss");
        for round in 0..2 {
            hits(&router).await;
            misses(&router, 1_000 + round).await;
        }
        let (mut hit, mut miss) = (Duration::ZERO, Duration::ZERO);
        for round in 0..ROUNDS {
            hit += hits(&router).await;
            miss += misses(&router, round).await;
        }
        let calls = f64::from(ROUNDS * CALLS_PER_ROUND);
        let (hit_rate, miss_rate) = (calls / hit.as_secs_f64(), calls / miss.as_secs_f64());
        eprintln!("one call through the router ({} calls each, interleaved):", ROUNDS * CALLS_PER_ROUND);
        eprintln!("  miss (lookup, upstream, store) {miss_rate:>10.0} calls/s");
        eprintln!("  hit                            {hit_rate:>10.0} calls/s");
        eprintln!("  ratio hit/miss                 {:>10.2}", hit_rate / miss_rate);

        let cache = weir.answer_cache().expect("[cache] is configured");
        let mut per_call = Duration::ZERO;
        for _ in 0..5 {
            per_call += lookup_and_hash(cache).await;
        }
        eprintln!("lookup + hash on a miss, a typical request: {:.2} µs per call", (per_call / 5).as_secs_f64() * 1e6);
    });
}
