//! How the cost of one gateway call grows, in one run:
//!
//! - with the prompt: a whole `POST /v1/chat/completions` through the
//!   in-process router (no sockets between caller and gateway, loopback HTTP
//!   to the fake upstream) for a user prompt of 1 KB, 16 KB, 256 KB and 1 MB
//!   of text, and the component boundary alone for the same prompts (the
//!   embedded OpenAI component's `encode` of the prompt, then its `decode` of
//!   the small answer); each printed with its slope in µs per KB between 1 KB
//!   and 1 MB and the per-call fixed cost that slope leaves;
//! - with the catalog: the same small call with 1, 100 and 1,000 `[[model]]`
//!   entries, naming the last one;
//! - with the keys: the same small call with 1, 1,000 and 10,000 `[[key]]`s,
//!   presenting the last key's token.
//!
//! Nothing in the call path should grow with the catalog or the key count: the
//! ratios 1,000 / 1 and 10,000 / 1 should stay near 1.
//!
//! Every call must answer 200 (asserted, so a refused call cannot pass as a
//! fast one). The fake upstream plays a small scripted completion for every
//! call, whatever the prompt, so the answer's size stays fixed. The gateway is
//! a library `Weir` behind `server::router`: no `[ledger]` (nothing is
//! recorded to disk), no `[metrics]` or `[telemetry]` endpoint, no edge
//! (`server::serve`'s checks and body limit are not in the path; axum's own
//! 2 MB body limit is, which a 1 MB prompt fits), no budgets, no rate limits;
//! keys only in the keys cases. Cases of one kind run interleaved in rounds,
//! each round starting at the next case, so drift on a shared machine falls on
//! all of them alike; the printed figures are means.

// Benchmark setup: a failed step should stop the run with its message.
#![allow(clippy::expect_used, clippy::print_stderr, reason = "a benchmark reports on stderr")]

use std::hint::black_box;
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use axum::http::Request;
use tower::ServiceExt;
use weir_host::plugin::{PluginEngine, Provider, ProviderRegistry};
use weir_host::types as host;
use weir_host::{Config, Weir};
use weir_tests::{FakeUpstream, Scripted, openai_wire};

#[path = "support/keys.rs"]
mod keys;
use keys::key_lines;

const TOKEN: &str = "weir-bench-token-0123456789abcdef0123456789abcdef";
const ROUNDS: usize = 30;
/// Large enough for a 1 MB prompt's estimate (about a token per 4 bytes).
const CONTEXT_WINDOW: u32 = 4_000_000;
/// Prompt sizes in KB, each with its calls per round: fewer for the big ones
/// (the fake upstream keeps every request body it received, ~250 MB in all).
const PROMPTS: [(usize, u32); 4] = [(1, 200), (16, 60), (256, 12), (1024, 4)];
/// Encode + decode alone is cheaper than a call: more of them per round.
const CODEC_CALLS: [u32; 4] = [400, 150, 30, 10];
const CATALOG_SIZES: [usize; 3] = [1, 100, 1_000];
const KEY_COUNTS: [usize; 3] = [1, 1_000, 10_000];
const SMALL_CALLS_PER_ROUND: u32 = 200;

fn model_id(index: usize) -> String {
    format!("chat-{index}")
}

fn model_lines(endpoint: &str, count: usize) -> String {
    (0..count)
        .map(|i| {
            format!(
                "[[model]]\nid = \"{}\"\nprovider = \"openai-compatible\"\nwire_id = \"qwen3\"\n\
                 endpoint = \"{endpoint}\"\nmax_output_tokens = 1000\ncontext_window = {CONTEXT_WINDOW}\n\
                 output_tokens = 20\n",
                model_id(i)
            )
        })
        .collect()
}

fn router(endpoint: &str, models: usize, keys: usize) -> axum::Router {
    let toml = format!("{}{}", model_lines(endpoint, models), key_lines(keys, TOKEN));
    let config = Config::from_toml(&toml, "growth bench").expect("config");
    let weir = Weir::builder().config(config).providers_dir("/nonexistent-weir-bench-providers").build().expect("weir");
    weir_host::server::router(weir)
}

/// `kb` KB of plain ASCII prose (nothing JSON must escape).
fn prompt(kb: usize) -> String {
    let sentence = "The quick brown fox jumps over the lazy dog while the gateway meters tokens. ";
    let bytes = kb * 1024;
    let mut text = sentence.repeat(bytes / sentence.len() + 1);
    text.truncate(bytes);
    text
}

fn request_body(model: &str, prompt: &str) -> Bytes {
    let body = serde_json::json!({"model": model, "messages": [{"role": "user", "content": prompt}]});
    Bytes::from(body.to_string())
}

/// The small completion the fake answers, its usage counting the prompt.
fn answer_body(prompt: &str) -> Bytes {
    let usage = openai_wire::usage_json(openai_wire::approx_tokens(prompt), 2, 0, 0);
    let message = openai_wire::text_message("All done.");
    let body = openai_wire::completion_body(openai_wire::COMPLETION_ID, "qwen3", message, "stop", usage);
    Bytes::from(body.to_string())
}

fn answer(body: &Bytes) -> Scripted {
    Scripted::Respond { status: 200, headers: openai_wire::json_headers(openai_wire::REQUEST_ID), body: body.clone() }
}

async fn call(router: &axum::Router, body: Bytes, token: Option<&str>) {
    let mut request = Request::post("/v1/chat/completions").header("content-type", "application/json");
    if let Some(token) = token {
        request = request.header("authorization", format!("Bearer {token}"));
    }
    let response = router.clone().oneshot(request.body(Body::from(body)).expect("request")).await.expect("infallible");
    assert_eq!(response.status(), 200, "the benchmark call must succeed");
    let bytes = axum::body::to_bytes(response.into_body(), 1 << 20).await.expect("body");
    black_box(bytes);
}

/// Running totals of one case.
#[derive(Default)]
struct Tally {
    spent: Duration,
    calls: u32,
}

impl Tally {
    fn add(&mut self, spent: Duration, calls: u32) {
        self.spent += spent;
        self.calls += calls;
    }

    fn mean_us(&self) -> f64 {
        self.spent.as_secs_f64() * 1e6 / f64::from(self.calls)
    }
}

/// One kind of call through the router, repeated in batches.
struct RouterCase {
    label: String,
    router: axum::Router,
    body: Bytes,
    answer: Scripted,
    token: Option<&'static str>,
    calls_per_round: u32,
    tally: Tally,
}

impl RouterCase {
    fn new(label: String, router: axum::Router, body: Bytes, answer: Scripted, calls_per_round: u32) -> Self {
        Self { label, router, body, answer, token: None, calls_per_round, tally: Tally::default() }
    }

    /// A batch of calls, each with its scripted answer queued beforehand.
    async fn batch(&self, upstream: &FakeUpstream) -> Duration {
        for _ in 0..self.calls_per_round {
            upstream.push(self.answer.clone());
        }
        let started = Instant::now();
        for _ in 0..self.calls_per_round {
            call(&self.router, self.body.clone(), self.token).await;
        }
        started.elapsed()
    }

    async fn round(&mut self, upstream: &FakeUpstream) {
        let spent = self.batch(upstream).await;
        self.tally.add(spent, self.calls_per_round);
    }
}

/// The component boundary alone: encode a prompt, decode the small answer.
struct CodecCase {
    conversation: host::Conversation,
    response: host::HttpResponse,
    calls_per_round: u32,
    tally: Tally,
}

impl CodecCase {
    async fn batch(&self, provider: &Provider, params: &host::CallParams) -> Duration {
        let started = Instant::now();
        for _ in 0..self.calls_per_round {
            let request = provider.encode(black_box(&self.conversation), black_box(params)).await.expect("encode");
            let decoded = provider.decode(black_box(&self.response)).await.expect("decode");
            black_box((request, decoded));
        }
        started.elapsed()
    }

    async fn round(&mut self, provider: &Provider, params: &host::CallParams) {
        let spent = self.batch(provider, params).await;
        self.tally.add(spent, self.calls_per_round);
    }
}

/// The cases' indexes for one round, starting one further each round.
fn order(len: usize, round: usize) -> impl Iterator<Item = usize> {
    (0..len).map(move |i| (i + round) % len)
}

async fn run_router_cases(cases: &mut [RouterCase], upstream: &FakeUpstream) {
    for case in cases.iter() {
        black_box(case.batch(upstream).await);
    }
    for round in 0..ROUNDS {
        for i in order(cases.len(), round) {
            cases[i].round(upstream).await;
        }
    }
}

fn codec_params() -> host::CallParams {
    host::CallParams {
        wire_model_id: "qwen3".into(),
        max_tokens: 20,
        thinking_budget: None,
        reasoning_effort: None,
        temperature: None,
        stop: Vec::new(),
        response_schema: None,
        stream: false,
    }
}

fn openai_registry() -> ProviderRegistry {
    let engine = PluginEngine::new(Some(std::env::temp_dir().join("weir-bench-cache"))).expect("engine");
    ProviderRegistry::load(&engine, None).expect("embedded components")
}

/// The prompt-size cases: whole calls and the component boundary alone,
/// interleaved in the same rounds.
async fn prompt_growth(upstream: &FakeUpstream) {
    let router = router(&upstream.base_url(), 1, 0);
    let mut calls = Vec::new();
    let mut codecs = Vec::new();
    for ((kb, calls_per_round), codec_calls) in PROMPTS.into_iter().zip(CODEC_CALLS) {
        let text = prompt(kb);
        let answer_bytes = answer_body(&text);
        let body = request_body(&model_id(0), &text);
        calls.push(RouterCase::new(format!("{kb} KB"), router.clone(), body, answer(&answer_bytes), calls_per_round));
        let response = host::HttpResponse { status: 200, headers: Vec::new(), body: answer_bytes.to_vec() };
        let conversation = host::Conversation::user(text);
        codecs.push(CodecCase { conversation, response, calls_per_round: codec_calls, tally: Tally::default() });
    }
    let registry = openai_registry();
    let provider = registry.get("openai").expect("openai provider");
    let params = codec_params();
    for codec in &codecs {
        black_box(codec.batch(provider, &params).await);
    }
    for case in &calls {
        black_box(case.batch(upstream).await);
    }
    for round in 0..ROUNDS {
        for i in order(calls.len(), round) {
            calls[i].round(upstream).await;
            codecs[i].round(provider, &params).await;
        }
    }
    let call_means: Vec<f64> = calls.iter().map(|case| case.tally.mean_us()).collect();
    let codec_means: Vec<f64> = codecs.iter().map(|case| case.tally.mean_us()).collect();
    report_prompt_sizes("whole call through the in-process router", &call_means);
    report_prompt_sizes("component boundary alone: OpenAI encode (the prompt) + decode (the answer)", &codec_means);
    let share = slope(&codec_means) / slope(&call_means);
    eprintln!("  share of the call's per-KB cost at the component boundary: {:.0}%", share * 100.0);
}

/// µs per KB between the smallest and the largest prompt.
fn slope(means: &[f64]) -> f64 {
    let (first, last) = (PROMPTS[0].0 as f64, PROMPTS[PROMPTS.len() - 1].0 as f64);
    (means[means.len() - 1] - means[0]) / (last - first)
}

fn report_prompt_sizes(what: &str, means: &[f64]) {
    eprintln!("prompt size, {what} ({ROUNDS} rounds, interleaved):");
    for ((kb, _), mean) in PROMPTS.iter().zip(means) {
        eprintln!("  {kb:>5} KB             {mean:>10.1} µs  ({:>7.2} µs per KB)", mean / *kb as f64);
    }
    let per_kb = slope(means);
    let fixed = means[0] - per_kb * PROMPTS[0].0 as f64;
    eprintln!("  slope 1 KB → 1 MB     {per_kb:>10.2} µs per KB");
    eprintln!("  fixed cost per call   {fixed:>10.1} µs");
}

fn report_growth(what: &str, cases: &[RouterCase]) {
    eprintln!("{what} ({ROUNDS} rounds, interleaved):");
    for case in cases {
        eprintln!("  {:<20} {:>9.1} µs  ({} calls)", case.label, case.tally.mean_us(), case.tally.calls);
    }
    let (first, last) = (&cases[0], &cases[cases.len() - 1]);
    eprintln!("  ratio {} / {}: {:.3}", last.label, first.label, last.tally.mean_us() / first.tally.mean_us());
}

async fn catalog_growth(upstream: &FakeUpstream) {
    let mut cases: Vec<RouterCase> = CATALOG_SIZES
        .into_iter()
        .map(|models| {
            let router = router(&upstream.base_url(), models, 0);
            let text = prompt(1);
            let body = request_body(&model_id(models - 1), &text);
            let label = format!("{models} entries");
            RouterCase::new(label, router, body, answer(&answer_body(&text)), SMALL_CALLS_PER_ROUND)
        })
        .collect();
    run_router_cases(&mut cases, upstream).await;
    report_growth("catalog size, a 1 KB call naming the last entry", &cases);
}

async fn key_growth(upstream: &FakeUpstream) {
    let mut cases: Vec<RouterCase> = KEY_COUNTS
        .into_iter()
        .map(|keys| {
            let router = router(&upstream.base_url(), 1, keys);
            let text = prompt(1);
            let body = request_body(&model_id(0), &text);
            let mut case = RouterCase::new(
                format!("{keys} keys"),
                router,
                body,
                answer(&answer_body(&text)),
                SMALL_CALLS_PER_ROUND,
            );
            case.token = Some(TOKEN);
            case
        })
        .collect();
    run_router_cases(&mut cases, upstream).await;
    report_growth("keys, a 1 KB call with the last key's token", &cases);
}

fn main() {
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    runtime.block_on(async {
        let upstream = FakeUpstream::start().await;
        let started = Instant::now();
        prompt_growth(&upstream).await;
        catalog_growth(&upstream).await;
        key_growth(&upstream).await;
        eprintln!("({} requests in {:.1} s)", upstream.request_count(), started.elapsed().as_secs_f64());
    });
}
