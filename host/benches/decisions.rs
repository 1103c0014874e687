//! What a decision call costs through Weir, in one run on loopback: the same
//! three-question decision (`choice` over four options, `noul`, a 1–5 `score`)
//! sent by reqwest straight to the fake decision endpoint (the body the host
//! sends it: the wire's request with the entry's wire id), through
//! [`Weir::decide`] (the library: the call path without the HTTP route), and
//! as `POST /v1/decisions` through the in-process router (`oneshot`, as the
//! embeddings bench does) to that same fake.
//!
//! 1. **One caller**: calls one after another, the three paths interleaved in
//!    rounds so drift on a shared machine falls on every path alike; mean per
//!    call, difference and ratio against the direct call.
//! 2. **32 callers**: 32 tasks calling as fast as they can for a fixed time on
//!    each path in turn (direct, router; twice, interleaved); calls per second
//!    and the ratio to direct.
//! 3. **The log-probability backend**: one `noul` question through
//!    [`Weir::decide`] on an entry with `backend = "logprobs"` (the embedded
//!    OpenAI component's `logprobs` interface, against the fake's chat route),
//!    beside the same-sized chat request sent straight to the fake.
//!
//! Both HTTP paths read the answer's bytes and no more in the timed calls;
//! every path's answer is parsed and checked once before the clock. The fake
//! runs on its own thread in this process, so at 32 callers the fake, the
//! gateway and the callers share the machine's cores.
//!
//! Two runs on the shared 2-core machine (2026-12-01): one caller, the router
//! +127.6 / +134.6 µs over direct (ratios 1.53 / 1.48; `Weir::decide` +74.7 /
//! +70.0 µs); 32 callers, the router at 0.44 / 0.57 of direct's calls per
//! second (10,062 / 14,060 against 22,826 / 24,734; the fake shares the cores).
//! The log-probability backend (second run): one question +221.2 µs over its
//! chat request sent direct (422.8 against 201.7 µs, ratio 2.10): two
//! component calls (encode, decode), the prompt rendered and the record.

// Benchmark setup: a failed step should stop the run with its message.
#![allow(clippy::expect_used, clippy::print_stderr, reason = "a benchmark reports on stderr")]

use std::hint::black_box;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::Request;
use bytes::Bytes;
use serde_json::{Value, json};
use tower::ServiceExt;
use weir_host::decision::{DecideRequest, DecisionRequest};
use weir_host::{Config, Weir};
use weir_tests::FakeUpstream;

const WIRE_ID: &str = "jev-2-large";
const ROUNDS: u32 = 20;
const CALLS_PER_ROUND: u32 = 50;
const CALLERS: usize = 32;
const CONCURRENT_FOR: Duration = Duration::from_secs(4);

fn weir(endpoint: &str) -> Weir {
    let toml = format!(
        "read_timeout_secs = 10\n\
         [[model]]\nid = \"triage\"\nprovider = \"decision\"\nkind = \"decision\"\nwire_id = \"{WIRE_ID}\"\n\
         endpoint = \"{endpoint}\"\ncontext_window = 8192\n\
         [[model]]\nid = \"by-logprobs\"\nprovider = \"openai-compatible\"\nkind = \"decision\"\n\
         backend = \"logprobs\"\nwire_id = \"qwen3-8b\"\nendpoint = \"{endpoint}\"\ncontext_window = 8192\n"
    );
    Weir::builder()
        .config(Config::from_toml(&toml, "decisions bench").expect("config"))
        .providers_dir("/nonexistent-weir-bench-providers")
        .cache_dir(Some(std::env::temp_dir().join("weir-bench-cache")))
        .build()
        .expect("weir")
}

fn question(model: &str) -> Value {
    json!({
        "model": model,
        "state": {"text": "Customer writes: my card was charged twice for March.", "fields": {"plan": "pro"}},
        "questions": [
            {"id": "intent", "shape": "choice", "options": ["billing", "bug", "feature", "other"]},
            {"id": "refund_owed", "shape": "noul"},
            {"id": "urgency", "shape": "score", "min": 1, "max": 5}
        ]
    })
}

#[derive(Debug, Clone, Copy)]
enum Path {
    Direct,
    Library,
    Router,
}

struct Paths {
    client: reqwest::Client,
    url: String,
    weir: Weir,
    router: axum::Router,
    direct: Bytes,
    gateway: Bytes,
    library: DecisionRequest,
}

impl Paths {
    async fn call(&self, path: Path, check: bool) {
        match path {
            Path::Direct => {
                let sent = self.client.post(&self.url).header("content-type", "application/json");
                let response = sent.body(self.direct.clone()).send().await.expect("send");
                assert_eq!(response.status(), 200, "the direct call must succeed");
                let answer = black_box(response.bytes().await.expect("body"));
                if check {
                    check_answer(&answer);
                }
            }
            Path::Library => {
                let request = DecideRequest::new(self.library.clone());
                let answer = black_box(self.weir.decide(request).await.expect("the library call succeeds"));
                if check {
                    assert_eq!(answer.decision.answers.len(), 3, "every question answered");
                }
            }
            Path::Router => {
                let request = Request::post("/v1/decisions").header("content-type", "application/json");
                let request = request.body(Body::from(self.gateway.clone())).expect("request");
                let response = self.router.clone().oneshot(request).await.expect("infallible");
                assert_eq!(response.status(), 200, "the gateway call must succeed");
                let answer = black_box(axum::body::to_bytes(response.into_body(), 1 << 20).await.expect("body"));
                if check {
                    check_answer(&answer);
                }
            }
        }
    }

    async fn timed(&self, path: Path, calls: u32) -> Duration {
        let started = Instant::now();
        for _ in 0..calls {
            self.call(path, false).await;
        }
        started.elapsed()
    }
}

fn check_answer(answer: &[u8]) {
    let answer: Value = serde_json::from_slice(answer).expect("JSON answer");
    assert_eq!(answer["answers"].as_array().map(Vec::len), Some(3), "every question answered: {answer}");
}

async fn one_caller(paths: &Paths) {
    const ALL: [Path; 3] = [Path::Direct, Path::Library, Path::Router];
    for path in ALL {
        paths.call(path, true).await;
        paths.timed(path, CALLS_PER_ROUND).await;
    }
    let mut totals = [Duration::ZERO; 3];
    for _ in 0..ROUNDS {
        for (path, total) in ALL.into_iter().zip(&mut totals) {
            *total += paths.timed(path, CALLS_PER_ROUND).await;
        }
    }
    let calls = ROUNDS * CALLS_PER_ROUND;
    let [direct, library, router] = totals.map(|total| total.as_secs_f64() * 1e6 / f64::from(calls));
    eprintln!("one caller ({calls} calls each, interleaved):");
    eprintln!("  direct to the fake      {direct:>8.1} µs");
    eprintln!(
        "  Weir::decide            {library:>8.1} µs  (+{:.1} µs, ratio {:.3})",
        library - direct,
        library / direct
    );
    eprintln!("  through the router      {router:>8.1} µs  (+{:.1} µs, ratio {:.3})", router - direct, router / direct);
}

/// Calls per second on `path` with [`CALLERS`] tasks for [`CONCURRENT_FOR`].
async fn throughput(paths: &Arc<Paths>, path: Path) -> f64 {
    let done = Arc::new(AtomicU64::new(0));
    let until = Instant::now() + CONCURRENT_FOR;
    let tasks: Vec<_> = (0..CALLERS)
        .map(|_| {
            let (paths, done) = (Arc::clone(paths), Arc::clone(&done));
            tokio::spawn(async move {
                while Instant::now() < until {
                    paths.call(path, false).await;
                    done.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.expect("caller");
    }
    done.load(Ordering::Relaxed) as f64 / CONCURRENT_FOR.as_secs_f64()
}

async fn many_callers(paths: &Arc<Paths>) {
    let mut direct = 0.0;
    let mut router = 0.0;
    for _ in 0..2 {
        direct += throughput(paths, Path::Direct).await / 2.0;
        router += throughput(paths, Path::Router).await / 2.0;
    }
    eprintln!("{CALLERS} callers ({:?} per path, twice, interleaved):", CONCURRENT_FOR);
    eprintln!("  direct to the fake      {direct:>8.0} calls/s");
    eprintln!("  through the router      {router:>8.0} calls/s  (ratio {:.3})", router / direct);
}

/// One `noul` question through the log-probability backend (`Weir::decide`),
/// against the chat request it sends, sent straight to the fake.
async fn logprobs(weir: &Weir, client: &reqwest::Client, base: &str) {
    let question: DecisionRequest = serde_json::from_value(json!({
        "model": "by-logprobs",
        "state": {"text": "Customer writes: my card was charged twice for March."},
        "questions": [{"id": "refund_owed", "shape": "noul"}]
    }))
    .expect("a valid request");
    let direct = Bytes::from(
        json!({"model": "qwen3-8b", "max_tokens": 1, "temperature": 0.0, "logprobs": true, "top_logprobs": 20,
            "messages": [{"role": "system", "content": "Answer with one letter."},
                {"role": "user", "content": "State:\nCustomer writes: my card was charged twice for March.\n\
                 \nQuestion: refund owed? (A: yes, B: no, C: the state does not say)\nA: yes\nB: no\n\
                 C: the state does not say\n\nAnswer with one letter."}]})
        .to_string(),
    );
    let url = format!("{base}/chat/completions");
    let answer = weir.decide(DecideRequest::new(question.clone())).await.expect("the logprobs decision succeeds");
    assert_eq!(answer.decision.answers.len(), 1, "the question answered");
    let mut totals = [Duration::ZERO; 2];
    for _ in 0..ROUNDS {
        let started = Instant::now();
        for _ in 0..CALLS_PER_ROUND {
            let sent = client.post(&url).header("content-type", "application/json").body(direct.clone());
            black_box(sent.send().await.expect("send").bytes().await.expect("body"));
        }
        totals[0] += started.elapsed();
        let started = Instant::now();
        for _ in 0..CALLS_PER_ROUND {
            black_box(weir.decide(DecideRequest::new(question.clone())).await.expect("decides"));
        }
        totals[1] += started.elapsed();
    }
    let calls = ROUNDS * CALLS_PER_ROUND;
    let [direct, library] = totals.map(|total| total.as_secs_f64() * 1e6 / f64::from(calls));
    eprintln!("one noul question by log-probabilities, one caller ({calls} calls each, interleaved):");
    eprintln!("  the chat request, direct {direct:>8.1} µs");
    eprintln!(
        "  Weir::decide             {library:>8.1} µs  (+{:.1} µs, ratio {:.3})",
        library - direct,
        library / direct
    );
}

fn main() {
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    runtime.block_on(async {
        let upstream = FakeUpstream::start().await;
        let client =
            reqwest::Client::builder().tcp_nodelay(true).timeout(Duration::from_secs(10)).build().expect("client");
        let weir = weir(&upstream.base_url());
        let paths = Arc::new(Paths {
            client,
            url: format!("{}/decisions", upstream.base_url()),
            router: weir_host::server::router(weir.clone()),
            weir,
            direct: Bytes::from(question(WIRE_ID).to_string()),
            gateway: Bytes::from(question("triage").to_string()),
            library: serde_json::from_value(question("triage")).expect("a valid request"),
        });
        one_caller(&paths).await;
        many_callers(&paths).await;
        logprobs(&paths.weir, &paths.client, &upstream.base_url()).await;
    });
}
