//! What budgets add to one gateway call, in one run, interleaved in rounds so
//! drift on a shared machine falls on both sides alike: the same
//! `POST /v1/chat/completions` through the in-process router to the same fake
//! upstream, by the same key, once on a gateway whose member has daily token
//! and USD budgets (a hold before the call, settled from its record) and once
//! on one without budgets.
//!
//! Both without a ledger and with one (the production default: a budgeted
//! call also writes its hold's row).
//!
//! - one caller: mean latency per call, their difference and a ratio;
//! - 32 concurrent callers on that one member (one shared budget): calls per
//!   second with the budget and without, so a lock convoy would show as lost
//!   throughput;
//! - the book alone: `applicable` + `hold` + `settle` per call, on one thread
//!   and on 32 threads sharing the one member's budget.

// Benchmark setup: a failed step should stop the run with its message.
#![allow(clippy::expect_used, clippy::print_stderr, reason = "a benchmark reports on stderr")]

use std::hint::black_box;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::Request;
use tower::ServiceExt;
use weir_host::budget::Spend;
use weir_host::identity::hash_of;
use weir_host::{Config, Weir};
use weir_tests::FakeUpstream;

const TOKEN: &str = "weir-bench-token-0123456789abcdef0123456789abcdef";
const ROUNDS: u32 = 20;
const CALLS_PER_ROUND: u32 = 100;
const CONCURRENT: usize = 32;
const CALLS_PER_CALLER: u32 = 60;

fn weir(endpoint: &str, budgets: bool, ledger: Option<&std::path::Path>) -> Weir {
    let member = match budgets {
        true => "[member.ana]\ndaily_tokens = 1000000000\ndaily_usd = 1000000.0\n",
        false => "",
    };
    let ledger = ledger.map_or_else(String::new, |path| format!("[ledger]\npath = {:?}\n", path.display().to_string()));
    let toml = format!(
        "{member}{ledger}[[key]]\nid = \"k\"\nmember = \"ana\"\nhash = \"{}\"\n\
         [[model]]\nid = \"chat\"\nprovider = \"openai-compatible\"\nwire_id = \"qwen3\"\nendpoint = \"{endpoint}\"\n\
         max_output_tokens = 1000\ncontext_window = 10000\noutput_tokens = 20\ninput_price = 2.0\noutput_price = 8.0\n",
        hash_of(TOKEN)
    );
    Weir::builder()
        .config(Config::from_toml(&toml, "budgets bench").expect("config"))
        .providers_dir("/nonexistent-weir-bench-providers")
        .build()
        .expect("weir")
}

async fn call(router: &axum::Router) {
    let request = Request::post("/v1/chat/completions")
        .header("content-type", "application/json")
        .header("authorization", format!("Bearer {TOKEN}"));
    let body = r#"{"model":"chat","messages":[{"role":"user","content":"Hello"}]}"#;
    let response = router.clone().oneshot(request.body(Body::from(body)).expect("request")).await.expect("infallible");
    assert_eq!(response.status(), 200, "the benchmark call must succeed");
    black_box(axum::body::to_bytes(response.into_body(), 1 << 20).await.expect("body"));
}

async fn timed(router: &axum::Router) -> Duration {
    let started = Instant::now();
    for _ in 0..CALLS_PER_ROUND {
        call(router).await;
    }
    started.elapsed()
}

/// Calls per second with `CONCURRENT` callers sharing the router.
async fn throughput(router: &axum::Router) -> f64 {
    let started = Instant::now();
    let mut callers = tokio::task::JoinSet::new();
    for _ in 0..CONCURRENT {
        let router = router.clone();
        callers.spawn(async move {
            for _ in 0..CALLS_PER_CALLER {
                call(&router).await;
            }
        });
    }
    while callers.join_next().await.is_some() {}
    f64::from(CALLS_PER_CALLER) * CONCURRENT as f64 / started.elapsed().as_secs_f64()
}

/// Mean time of `applicable` + `hold` + `settle` on the budgeted gateway's
/// book, with `threads` threads sharing the one member's budget.
fn book_alone(weir: &Weir, threads: usize) -> Duration {
    const ITERATIONS: u32 = 50_000;
    let book = weir.budgets();
    let started = Instant::now();
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| {
                for _ in 0..ITERATIONS {
                    let scopes = book.applicable(Some("k"), "ana", None);
                    let worst = Spend { tokens: 120, usd: Some(0.000_4) };
                    let hold = book.hold(&scopes, worst, "chat").expect("fits");
                    hold.settle(Spend { tokens: 30, usd: Some(0.000_1) });
                }
            });
        }
    });
    started.elapsed() / ITERATIONS
}

/// The two gateways' figures, one caller and then `CONCURRENT`, interleaved.
async fn compare(label: &str, plain: &axum::Router, budgeted: &axum::Router) {
    for _ in 0..CALLS_PER_ROUND {
        call(plain).await;
        call(budgeted).await;
    }
    let (mut without, mut with) = (Duration::ZERO, Duration::ZERO);
    for _ in 0..ROUNDS {
        without += timed(plain).await;
        with += timed(budgeted).await;
    }
    let calls = ROUNDS * CALLS_PER_ROUND;
    let (without, with) = (without / calls, with / calls);
    eprintln!("{label}, one caller ({calls} calls each, interleaved):");
    eprintln!("  without budgets         {:>9.2} µs", without.as_secs_f64() * 1e6);
    eprintln!("  with budgets            {:>9.2} µs", with.as_secs_f64() * 1e6);
    eprintln!(
        "  added                   {:>9.2} µs  (ratio {:.3})",
        (with.as_secs_f64() - without.as_secs_f64()) * 1e6,
        with.as_secs_f64() / without.as_secs_f64()
    );
    let (mut plain_rate, mut budget_rate) = (0.0, 0.0);
    for _ in 0..3 {
        plain_rate += throughput(plain).await;
        budget_rate += throughput(budgeted).await;
    }
    eprintln!("{label}, {CONCURRENT} concurrent callers, one member:");
    eprintln!("  without budgets         {:>9.0} calls/s", plain_rate / 3.0);
    eprintln!("  one shared budget       {:>9.0} calls/s  (ratio {:.3})", budget_rate / 3.0, budget_rate / plain_rate);
}

fn main() {
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let files = tempfile::tempdir().expect("a folder for the ledgers");
    runtime.block_on(async {
        let upstream = FakeUpstream::start().await;
        let url = upstream.base_url();
        let plain = weir_host::server::router(weir(&url, false, None));
        let budgeted = weir_host::server::router(weir(&url, true, None));
        compare("no ledger", &plain, &budgeted).await;
        let plain = weir_host::server::router(weir(&url, false, Some(&files.path().join("plain.db"))));
        let budgeted = weir_host::server::router(weir(&url, true, Some(&files.path().join("budgeted.db"))));
        compare("with the ledger", &plain, &budgeted).await;
    });
    let book_owner = weir("http://127.0.0.1:9", true, None);
    for threads in [1, CONCURRENT] {
        let per_call = book_alone(&book_owner, threads);
        eprintln!(
            "the book alone, {threads:>2} thread(s): {:>7.3} µs per hold and settle (wall, per thread's call)",
            per_call.as_secs_f64() * 1e6
        );
    }
}
