//! The Gemini stream decoder's cost per event, against the OpenAI Chat
//! Completions decoder measured in the same run: the same answer (200 text
//! pieces, then the finish and the usage) written in each dialect as its
//! upstream sends it, fed in memory through the gateway's SSE framing and the
//! embedded component's stream decoder (one instance per stream, one call per
//! event), as the gateway does. No socket, no caller: the part of a streamed
//! call's per-event work that is the decoder's.
//!
//! The two dialects alternate (and swap which goes first) so that load from
//! other work on this shared machine lands on both; medians are reported, and
//! the ratio Gemini / OpenAI of the per-event medians.

// Benchmark setup: a failed step should stop the run with its message, and the
// figures are the output.
#![allow(clippy::expect_used, clippy::print_stderr, reason = "a benchmark reports on stderr")]

use std::time::{Duration, Instant};

use tokio::runtime::Runtime;
use weir_host::stream::framing::FrameDecoder;
use weir_host::types::StreamFraming;
use weir_tests::{gemini_wire, openai_wire};

/// Text pieces in each stream.
const PIECES: usize = 200;
/// Samples per dialect.
const SAMPLES: usize = 60;
/// Rounds run and discarded first: compilation caches, allocator, instances.
const WARMUP: usize = 10;

/// Both dialects' entries; nothing is ever sent (the endpoints are never called).
fn build_weir() -> weir_host::Weir {
    let toml = r#"
[[model]]
id = "chat"
provider = "openai-compatible"
wire_id = "qwen3"
endpoint = "http://127.0.0.1:9/v1"
max_output_tokens = 1000
context_window = 10000

[[model]]
id = "flash"
provider = "gemini"
wire_id = "gemini-2.5-flash"
endpoint = "http://127.0.0.1:9/v1beta"
max_output_tokens = 1000
context_window = 10000
"#;
    weir_host::Weir::builder()
        .config(weir_host::Config::from_toml(toml, "gemini_stream bench").expect("config"))
        .providers_dir("/nonexistent-weir-bench-providers")
        .cache_dir(Some(std::env::temp_dir().join("weir-bench-cache")))
        .build()
        .expect("gateway")
}

/// One stream through framing and `key`'s decoder: the time after the decoder
/// was opened, and the events framed.
async fn decode_once(weir: &weir_host::Weir, key: &str, body: &[u8]) -> (Duration, usize) {
    let registry = weir.registry();
    let provider = registry.get(key).expect("the provider is loaded");
    let mut decoder = provider.open_stream().await.expect("stream decoder");
    let started = Instant::now();
    let mut framer = FrameDecoder::new(StreamFraming::Sse);
    let framed = framer.push(body).expect("SSE framing");
    for event in &framed {
        decoder.feed(event).await.expect("feed");
    }
    decoder.finish().await.expect("finish");
    (started.elapsed(), framed.len())
}

fn main() {
    let runtime = Runtime::new().expect("runtime");
    let weir = build_weir();
    let words: Vec<String> = (0..PIECES).map(|i| format!("word{i} ")).collect();
    let texts: Vec<&str> = words.iter().map(String::as_str).collect();
    let openai: Vec<u8> = openai_wire::sse_chunks(&texts).concat();
    let gemini: Vec<u8> =
        gemini_wire::text_stream(&texts, "STOP", gemini_wire::usage(10, PIECES as u64, 0, 0)).concat();

    let (mut on_openai, mut on_gemini) = (Vec::new(), Vec::new());
    let (mut openai_events, mut gemini_events) = (0, 0);
    runtime.block_on(async {
        for round in 0..WARMUP + SAMPLES {
            let order: [&str; 2] = if round % 2 == 0 { ["openai", "gemini"] } else { ["gemini", "openai"] };
            for which in order {
                let (elapsed, events) = match which {
                    "openai" => decode_once(&weir, "openai-compatible", &openai).await,
                    _ => decode_once(&weir, "gemini", &gemini).await,
                };
                if round < WARMUP {
                    continue;
                }
                if which == "openai" {
                    on_openai.push(elapsed / events as u32);
                    openai_events = events;
                } else {
                    on_gemini.push(elapsed / events as u32);
                    gemini_events = events;
                }
            }
        }
    });
    let (openai_us, gemini_us) = (us(median(&on_openai)), us(median(&on_gemini)));
    eprintln!(
        "in memory, SSE framing + component stream decoder, {SAMPLES} samples each (medians):\n  \
         OpenAI Chat Completions: {openai_events} events, {openai_us:.2} µs per event\n  \
         Gemini streamGenerateContent: {gemini_events} events, {gemini_us:.2} µs per event\n  \
         Gemini / OpenAI: {:.2}",
        gemini_us / openai_us
    );
}

fn us(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1e6
}

fn median(samples: &[Duration]) -> Duration {
    let mut sorted = samples.to_vec();
    sorted.sort();
    sorted[sorted.len() / 2]
}
