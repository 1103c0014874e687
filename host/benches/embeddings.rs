//! What an embeddings call costs through Weir, in one run on loopback:
//!
//! 1. **Gateway overhead**: the same embeddings request (8 inputs, then 1, at
//!    1536 wide) sent by reqwest straight to the fake OpenAI upstream, and
//!    sent as `POST /v1/embeddings` through the in-process router
//!    (`tower::ServiceExt::oneshot`, as `budgets.rs` does) to that same fake;
//!    and, to tell the call path from the HTTP route, the same texts through
//!    [`Weir::embed`] (the library). The direct body is the one the embedded
//!    component sends upstream (`encoding_format: "float"`, `dimensions:
//!    1536`); both HTTP sides read the answer's bytes and no more (each
//!    answer is parsed and checked once, before the clock). Interleaved in
//!    rounds so drift on a shared machine falls on every side alike; mean per
//!    call, difference and ratio against the direct call.
//! 2. **The width adapter** ([`weir_host::retrieval::adapt`]) per 1536-wide
//!    vector: a 1536 vector kept at 1536 (normalized only), 3072 folded to
//!    1536, 1024 padded to 1536. The input vectors are cloned before the clock
//!    starts and the outputs dropped after it stops, so only `adapt` is timed.
//! 3. **A 2,000-input bulk job** (`lane = Bulk` through [`Weir::embed`], the
//!    library) against the fake limiting requests at the entry's `rpm`, its
//!    wall time against the ideal that rate implies. Each job gets a fresh
//!    gateway and a fresh upstream limit, both full at the start. The entry's
//!    request bucket (`admission/bucket.rs`) starts full at `rpm` and refills
//!    `rpm / 60` per second; a bulk grant must leave `ceil(share × rpm)` in
//!    it. So `requests` bulk grants (plus `interactive` grants taken while the
//!    job runs) end no earlier than
//!    `(requests + interactive − (rpm − ceil(share × rpm))) × 60 / rpm`
//!    seconds after the start (zero when the burst covers them all). Three jobs:
//!    `interactive_share = 0`, where that ideal is exactly the upstream
//!    limit's own; the default share (0.5) alone, where bulk leaves half the
//!    burst unused by design; and the default share with an interactive caller
//!    embedding one query every 500 ms alongside, whose latency is set against
//!    the same call on an idle gateway. Each query is a grant from the same
//!    bucket, so it delays the bulk job by one refill and is counted in the
//!    ideal; a query begun after the job's last grant is counted too, so that
//!    ideal may be up to one refill high.
//!
//! Three runs on the shared 2-core machine (load 1–3) agreed in shape: the
//! router adds about 2.5 ms to an 8 × 1536 call (ratio ≈ 2.9), about 1 ms of
//! it the HTTP route beyond `Weir::embed`, and about 0.5 ms to a 1-input call
//! (ratio ≈ 2.6–3.3); `adapt` takes about 3 µs per vector (fold ≈ 1.3×,
//! pad ≈ 1.15× the normalize-only case); every bulk job ended within 20 ms of
//! its ideal (ratio ≤ 1.003) with no 429 from the fake, and interactive
//! queries during a job took about 1.5 ms against 0.7–0.8 ms idle.

// Benchmark setup: a failed step should stop the run with its message.
#![allow(clippy::expect_used, clippy::print_stderr, reason = "a benchmark reports on stderr")]

use std::hint::black_box;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::Request;
use bytes::Bytes;
use serde_json::{Value, json};
use tower::ServiceExt;
use weir_host::admission::Lane;
use weir_host::retrieval::{EmbedRequest, adapt};
use weir_host::types::EmbeddingPurpose;
use weir_host::{Config, Weir};
use weir_tests::FakeUpstream;
use weir_tests::fake_upstream::fake_embedding;

/// The deployment's one width, and the fake's native one.
const WIDTH: usize = 1536;
/// The wire id the entry sends, and the direct request names.
const WIRE_ID: &str = "text-embedding-3-small";

const ROUNDS: u32 = 20;
const CALLS_PER_ROUND: u32 = 25;

/// Vectors adapted per round, per case.
const VECTORS_PER_ROUND: usize = 1_000;
const ADAPT_ROUNDS: u32 = 30;

const BULK_INPUTS: usize = 2_000;
/// Inputs per upstream request in the bulk jobs: 2,000 inputs → 200 requests.
const BULK_BATCH: u32 = 10;
/// The interactive caller's pause between its queries.
const QUERY_EVERY: Duration = Duration::from_millis(500);
/// Idle interactive calls measured as the baseline for the caller's latency.
const IDLE_QUERIES: usize = 40;

/// One embedding entry, `embed`, pinned at [`WIDTH`], on `endpoint`; `limits`
/// is appended to it (`rpm`, `max_batch`, `interactive_share`).
fn weir(endpoint: &str, limits: &str) -> Weir {
    let toml = format!(
        "read_timeout_secs = 10\n\
         [[model]]\nid = \"embed\"\nkind = \"embedding\"\nprovider = \"openai-compatible\"\n\
         wire_id = \"{WIRE_ID}\"\nendpoint = \"{endpoint}\"\nembedding_dimensions = {WIDTH}\n\
         context_window = 8192\n{limits}"
    );
    Weir::builder()
        .config(Config::from_toml(&toml, "embeddings bench").expect("config"))
        .providers_dir("/nonexistent-weir-bench-providers")
        .cache_dir(Some(std::env::temp_dir().join("weir-bench-cache")))
        .build()
        .expect("weir")
}

fn texts(count: usize, what: &str) -> Vec<String> {
    (0..count).map(|i| format!("{what} {i}: an embedding carries the meaning of a passage as a point")).collect()
}

/// The same texts as the request each path sends: the body the embedded
/// component sends upstream, the texts the library takes, the body a client
/// sends Weir.
struct Bodies {
    direct: Bytes,
    texts: Vec<String>,
    gateway: Bytes,
}

impl Bodies {
    fn new(inputs: usize) -> Self {
        let texts = texts(inputs, "document");
        let direct = json!({"model": WIRE_ID, "input": texts, "encoding_format": "float", "dimensions": WIDTH});
        let gateway = json!({"model": "embed", "input": texts});
        Self {
            direct: Bytes::from(serde_json::to_vec(&direct).expect("body")),
            gateway: Bytes::from(serde_json::to_vec(&gateway).expect("body")),
            texts,
        }
    }
}

/// The three ways the same embeddings request is sent.
#[derive(Debug, Clone, Copy)]
enum Path {
    /// reqwest straight to the fake.
    Direct,
    /// [`Weir::embed`], the call path without the HTTP route.
    Library,
    /// `POST /v1/embeddings` through the in-process router.
    Router,
}

/// What each path needs, on one fake upstream.
struct Paths {
    client: reqwest::Client,
    url: String,
    weir: Weir,
    router: axum::Router,
}

impl Paths {
    /// One call on `path`. With `check`, its answer is parsed and must hold one
    /// vector per input at [`WIDTH`] (the bench times real work); timed calls
    /// only read the answer's bytes, on both HTTP paths alike.
    async fn call(&self, path: Path, bodies: &Bodies, check: bool) {
        let inputs = bodies.texts.len();
        match path {
            Path::Direct => {
                let response = self
                    .client
                    .post(&self.url)
                    .header("content-type", "application/json")
                    .body(bodies.direct.clone())
                    .send()
                    .await
                    .expect("send");
                assert_eq!(response.status(), 200, "the direct call must succeed");
                let answer = black_box(response.bytes().await.expect("body"));
                if check {
                    check_answer(&answer, inputs);
                }
            }
            Path::Library => {
                let request = EmbedRequest::new("embed", bodies.texts.clone(), EmbeddingPurpose::Document);
                let answer = black_box(self.weir.embed(request).await.expect("the library call succeeds"));
                if check {
                    assert_eq!(answer.vectors.len(), inputs, "one vector per input");
                    assert!(answer.vectors.iter().all(|vector| vector.len() == WIDTH), "every vector at the width");
                }
            }
            Path::Router => {
                let request = Request::post("/v1/embeddings").header("content-type", "application/json");
                let request = request.body(Body::from(bodies.gateway.clone())).expect("request");
                let response = self.router.clone().oneshot(request).await.expect("infallible");
                assert_eq!(response.status(), 200, "the gateway call must succeed");
                let answer = black_box(axum::body::to_bytes(response.into_body(), 64 << 20).await.expect("body"));
                if check {
                    check_answer(&answer, inputs);
                }
            }
        }
    }

    /// The time of `calls` calls on `path`, one after another.
    async fn timed(&self, path: Path, bodies: &Bodies, calls: u32) -> Duration {
        let started = Instant::now();
        for _ in 0..calls {
            self.call(path, bodies, false).await;
        }
        started.elapsed()
    }
}

/// An OpenAI embeddings answer holding `inputs` vectors, each at [`WIDTH`].
fn check_answer(answer: &[u8], inputs: usize) {
    let answer: Value = serde_json::from_slice(answer).expect("JSON answer");
    let data = answer["data"].as_array().expect("data");
    assert_eq!(data.len(), inputs, "one vector per input");
    for item in data {
        assert_eq!(item["embedding"].as_array().map(Vec::len), Some(WIDTH), "every vector at the width");
    }
}

async fn overhead(paths: &Paths, bodies: &Bodies) {
    const ALL: [Path; 3] = [Path::Direct, Path::Library, Path::Router];
    for path in ALL {
        paths.call(path, bodies, true).await;
        paths.timed(path, bodies, CALLS_PER_ROUND).await;
    }
    let mut totals = [Duration::ZERO; 3];
    for _ in 0..ROUNDS {
        for (path, total) in ALL.into_iter().zip(&mut totals) {
            *total += paths.timed(path, bodies, CALLS_PER_ROUND).await;
        }
    }
    let calls = ROUNDS * CALLS_PER_ROUND;
    let [direct, library, router] = totals.map(|total| total.as_secs_f64() * 1e6 / f64::from(calls));
    eprintln!("{} input(s) × {WIDTH} ({calls} calls each, interleaved):", bodies.texts.len());
    eprintln!("  direct to the fake      {direct:>9.1} µs");
    eprintln!(
        "  Weir::embed             {library:>9.1} µs  (+{:.1} µs, ratio {:.3})",
        library - direct,
        library / direct
    );
    eprintln!("  through the router      {router:>9.1} µs  (+{:.1} µs, ratio {:.3})", router - direct, router / direct);
}

/// A vector of `width` values that is not of unit length, so normalizing it
/// does real work: the fake's unit vectors (two joined past 1536), scaled.
fn native(width: usize) -> Vec<f32> {
    let mut values = fake_embedding("adapter input", WIDTH.min(width));
    if width > WIDTH {
        values.extend(fake_embedding("adapter input, second half", width - WIDTH));
    }
    values.iter().map(|value| value * 3.0).collect()
}

/// The time of [`VECTORS_PER_ROUND`] calls of `adapt(native.clone(), WIDTH)`,
/// the clones made before the clock starts and the outputs dropped after it
/// stops.
fn adapt_round(native: &[f32]) -> Duration {
    let inputs: Vec<Vec<f32>> = (0..VECTORS_PER_ROUND).map(|_| native.to_vec()).collect();
    let mut outputs = Vec::with_capacity(VECTORS_PER_ROUND);
    let started = Instant::now();
    for input in inputs {
        outputs.push(black_box(adapt(black_box(input), WIDTH).expect("adapts")));
    }
    let elapsed = started.elapsed();
    drop(black_box(outputs));
    elapsed
}

fn adapter() {
    let cases = [
        ("1536 → 1536 (normalize)", native(1536)),
        ("3072 → 1536 (fold)", native(3072)),
        ("1024 → 1536 (pad)", native(1024)),
    ];
    for (_, native) in &cases {
        adapt_round(native);
    }
    let mut totals = [Duration::ZERO; 3];
    for _ in 0..ADAPT_ROUNDS {
        for (case, total) in cases.iter().zip(&mut totals) {
            *total += adapt_round(&case.1);
        }
    }
    let vectors = u32::try_from(VECTORS_PER_ROUND).expect("small") * ADAPT_ROUNDS;
    let baseline = totals[0];
    eprintln!("the width adapter per vector ({vectors} vectors each, interleaved):");
    for ((name, _), total) in cases.iter().zip(totals) {
        eprintln!(
            "  {name:<24}{:>9.1} ns  (ratio {:.3})",
            total.as_secs_f64() * 1e9 / f64::from(vectors),
            total.as_secs_f64() / baseline.as_secs_f64()
        );
    }
}

/// The earliest the last of `requests` bulk grants can happen (see the
/// module doc): the bucket starts full at `rpm`, bulk leaves `reserved`, and
/// `interactive` grants taken meanwhile come out of the same bucket.
fn ideal(requests: u64, interactive: u64, rpm: u64, reserved: u64) -> Duration {
    let burst = rpm - reserved;
    let refilled = (requests + interactive).saturating_sub(burst);
    Duration::from_secs_f64(refilled as f64 * 60.0 / rpm as f64)
}

/// `ceil(share × rpm)`, the requests a bulk grant leaves in the bucket.
fn reserved(rpm: u64, share: f64) -> u64 {
    (share * rpm as f64).ceil() as u64
}

/// What one bulk job measured.
struct Job {
    rpm: u64,
    share: f64,
    wall: Duration,
    /// The latency of each interactive call begun before the job ended.
    latencies: Vec<Duration>,
    /// Requests the fake received during the job (retries included).
    sent: usize,
    /// Of those, the ones its limit answered 429.
    refused: usize,
}

/// One bulk job of [`BULK_INPUTS`] on a fresh gateway whose entry and the fake
/// both allow `rpm`; with `interactive`, a caller embeds one query every
/// [`QUERY_EVERY`] while it runs.
async fn bulk_job(upstream: &FakeUpstream, rpm: u64, share: f64, interactive: bool) -> Job {
    let limits = format!("rpm = {rpm}\nmax_batch = {BULK_BATCH}\ninteractive_share = {share}\n");
    let weir = weir(&upstream.base_url(), &limits);
    let inputs = texts(BULK_INPUTS, "passage");
    let done = Arc::new(AtomicBool::new(false));
    let caller = interactive.then(|| tokio::spawn(query_caller(weir.clone(), Arc::clone(&done))));
    upstream.limit_requests_per_minute(rpm);
    let (sent_before, refused_before) = (upstream.request_count(), upstream.rate_limited_count());
    let started = Instant::now();
    let answer = weir
        .embed(EmbedRequest::new("embed", inputs, EmbeddingPurpose::Document).lane(Lane::Bulk))
        .await
        .expect("the bulk job succeeds");
    let wall = started.elapsed();
    done.store(true, Ordering::Relaxed);
    assert_eq!(answer.vectors.len(), BULK_INPUTS, "one vector per input");
    assert!(answer.vectors.iter().all(|vector| vector.len() == WIDTH), "every vector at the width");
    let latencies = match caller {
        Some(caller) => caller.await.expect("the interactive caller"),
        None => Vec::new(),
    };
    let sent = upstream.request_count() - sent_before;
    let refused = upstream.rate_limited_count() - refused_before;
    Job { rpm, share, wall, latencies, sent, refused }
}

/// Embeds one query every [`QUERY_EVERY`] until `done`; the latency of each
/// call begun before then.
async fn query_caller(weir: Weir, done: Arc<AtomicBool>) -> Vec<Duration> {
    let mut latencies = Vec::new();
    while !done.load(Ordering::Relaxed) {
        latencies.push(query(&weir, latencies.len()).await);
        tokio::time::sleep(QUERY_EVERY).await;
    }
    latencies
}

async fn query(weir: &Weir, index: usize) -> Duration {
    let started = Instant::now();
    let vector = weir
        .embed_vector("embed", format!("query {index}: where does the meaning sit"), EmbeddingPurpose::Query)
        .await
        .expect("the interactive call succeeds");
    let latency = started.elapsed();
    assert_eq!(vector.len(), WIDTH, "the query's vector at the width");
    latency
}

fn report_job(job: &Job) {
    let (rpm, share) = (job.rpm, job.share);
    let requests = BULK_INPUTS.div_ceil(BULK_BATCH as usize);
    let interactive = job.latencies.len();
    let bulk_ideal = ideal(requests as u64, interactive as u64, rpm, reserved(rpm, share));
    let upstream_ideal = ideal(requests as u64, interactive as u64, rpm, 0);
    let alongside = match interactive {
        0 => String::new(),
        calls => format!(", {calls} interactive queries alongside (one every {} ms)", QUERY_EVERY.as_millis()),
    };
    eprintln!("  rpm {rpm}, interactive_share {share}{alongside}:");
    eprintln!("    wall                  {:>9.3} s", job.wall.as_secs_f64());
    eprintln!(
        "    ideal for bulk        {:>9.3} s  (ratio {:.3}; {} at once, then {} per s)",
        bulk_ideal.as_secs_f64(),
        job.wall.as_secs_f64() / bulk_ideal.as_secs_f64(),
        rpm - reserved(rpm, share),
        rpm as f64 / 60.0
    );
    if share > 0.0 {
        eprintln!(
            "    the upstream's own    {:>9.3} s  (it takes {rpm} at once; bulk leaves {} of them)",
            upstream_ideal.as_secs_f64(),
            reserved(rpm, share)
        );
    }
    eprintln!(
        "    upstream requests     {:>9}    ({requests} + {interactive} sent once each; answered 429: {})",
        job.sent, job.refused
    );
}

fn percentile(sorted: &[Duration], fraction: f64) -> Duration {
    let index = ((sorted.len() as f64 - 1.0) * fraction).round() as usize;
    sorted.get(index).copied().unwrap_or_default()
}

fn report_latency(what: &str, mut latencies: Vec<Duration>) {
    latencies.sort();
    let ms = |duration: Duration| duration.as_secs_f64() * 1e3;
    eprintln!(
        "    {what:<20}{:>8.2} ms median, {:>7.2} ms p90, {:>7.2} ms max ({} calls)",
        ms(percentile(&latencies, 0.5)),
        ms(percentile(&latencies, 0.9)),
        ms(latencies.last().copied().unwrap_or_default()),
        latencies.len()
    );
}

fn main() {
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    runtime.block_on(async {
        let upstream = FakeUpstream::start().await;
        let client =
            reqwest::Client::builder().tcp_nodelay(true).timeout(Duration::from_secs(10)).build().expect("client");
        let plain = weir(&upstream.base_url(), "");
        let paths = Paths {
            client,
            url: format!("{}/embeddings", upstream.base_url()),
            weir: plain.clone(),
            router: weir_host::server::router(plain.clone()),
        };
        overhead(&paths, &Bodies::new(8)).await;
        overhead(&paths, &Bodies::new(1)).await;

        adapter();

        let requests = BULK_INPUTS.div_ceil(BULK_BATCH as usize);
        eprintln!("a bulk job of {BULK_INPUTS} inputs, {BULK_BATCH} per request ({requests} requests):");
        report_job(&bulk_job(&upstream, 180, 0.0, false).await);
        report_job(&bulk_job(&upstream, 300, 0.5, false).await);
        let mut idle = Vec::with_capacity(IDLE_QUERIES);
        for index in 0..IDLE_QUERIES {
            idle.push(query(&plain, index).await);
        }
        let job = bulk_job(&upstream, 300, 0.5, true).await;
        report_job(&job);
        eprintln!("  one-query interactive calls:");
        report_latency("idle gateway", idle);
        report_latency("during the bulk job", job.latencies);
    });
}
