//! What serving a component of a retired world version costs per call: the
//! same chat component (`tests/operations`, key `versioned`) built against the
//! frozen `weir:provider@0.4.0`, whose `call-params` the host converts on
//! every encode (`plugin::convert`), and against the current 0.5.0, which
//! needs no conversion. Each round trip instantiates, encodes a ~4 KB
//! conversation with a temperature and decodes a small answer, as a call does.
//! Both run in this process, in this run, so their ratio is the conversion's
//! share; a paired median of per-round ratios is printed beside criterion's
//! figures (a burst of other load moves it far less).

// Benchmark setup: a failed step should stop the run with its message.
#![allow(clippy::expect_used, clippy::print_stderr)]

use std::hint::black_box;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use tokio::runtime::Runtime;
use weir_host::plugin::{ComponentSource, PluginEngine, Provider, component_digest};
use weir_host::reach::Trust;
use weir_host::types as host;

fn sentence(turn: usize) -> String {
    format!("Turn {turn}: the quick brown fox jumps over the lazy dog while the gateway meters tokens. ").repeat(6)
}

/// Six text turns and a system prompt: ~4 KB, as `component_round_trip.rs`'s.
fn conversation() -> host::Conversation {
    let mut conversation =
        host::Conversation::user(sentence(0)).with_system("You are a careful assistant. ".repeat(12));
    for turn in 1..6 {
        let block = vec![host::ContentBlock::Text(sentence(turn))];
        conversation.turns.push(if turn % 2 == 1 { host::Turn::assistant(block) } else { host::Turn::user(block) });
    }
    conversation
}

fn load(engine: &PluginEngine, path: &str) -> Provider {
    let bytes = std::fs::read(path).expect("built by tests/build.rs");
    let component = engine
        .load(ComponentSource::File(PathBuf::from(path)), &bytes, component_digest(&bytes))
        .expect("the versioned component loads");
    let component = Arc::new(component);
    Provider::new(component.providers[0].clone(), Arc::clone(&component), Trust::Untrusted)
}

fn round_trip(
    runtime: &Runtime,
    provider: &Provider,
    conversation: &host::Conversation,
    params: &host::CallParams,
    response: &host::HttpResponse,
) {
    runtime.block_on(async {
        let request = provider.encode(black_box(conversation), black_box(params)).await.expect("encode");
        let decoded = provider.decode(black_box(response)).await.expect("decode");
        black_box((request, decoded));
    });
}

/// The median of 41 per-round ratios (legacy / current) of 100 calls each,
/// alternating which goes first.
fn paired_ratio(mut legacy: impl FnMut(), mut current: impl FnMut()) -> f64 {
    const ROUNDS: usize = 41;
    let time = |call: &mut dyn FnMut()| {
        let started = Instant::now();
        for _ in 0..100 {
            call();
        }
        started.elapsed().as_secs_f64()
    };
    let mut ratios: Vec<f64> = (0..ROUNDS)
        .map(|round| match round % 2 {
            0 => {
                let old = time(&mut legacy);
                old / time(&mut current)
            }
            _ => {
                let new = time(&mut current);
                time(&mut legacy) / new
            }
        })
        .collect();
    ratios.sort_by(f64::total_cmp);
    ratios[ROUNDS / 2]
}

fn legacy_conversion(c: &mut Criterion) {
    let engine = PluginEngine::new(Some(std::env::temp_dir().join("weir-bench-cache"))).expect("engine");
    let legacy = load(&engine, weir_tests::components::CHAT_0_4);
    let current = load(&engine, weir_tests::components::CHAT_0_5);
    assert_eq!((legacy.component().world_version, current.component().world_version), ("0.4.0", "0.5.0"));
    let conversation = conversation();
    let params = host::CallParams {
        temperature: Some(0.3),
        stop: vec!["END".into()],
        ..host::CallParams::new("versioned-small", 1024)
    };
    let response = host::HttpResponse {
        status: 200,
        headers: vec![("x-request-id".into(), "req_1".into())],
        body: br#"{"text":"A short answer.","input":900,"output":4}"#.to_vec(),
    };
    let runtime = tokio::runtime::Builder::new_current_thread().enable_time().build().expect("runtime");

    let mut group = c.benchmark_group("legacy_conversion_4k");
    group.measurement_time(Duration::from_secs(4));
    group.bench_function("0.4.0 component (call-params converted): instantiate + encode + decode", |b| {
        b.iter(|| round_trip(&runtime, &legacy, &conversation, &params, &response))
    });
    group.bench_function("0.5.0 component (no conversion): instantiate + encode + decode", |b| {
        b.iter(|| round_trip(&runtime, &current, &conversation, &params, &response))
    });
    group.finish();
    let ratio = paired_ratio(
        || round_trip(&runtime, &legacy, &conversation, &params, &response),
        || round_trip(&runtime, &current, &conversation, &params, &response),
    );
    eprintln!("legacy conversion: a 0.4.0 round trip takes {ratio:.3}× a 0.5.0 one (paired median of 41 rounds)");
}

criterion_group!(benches, legacy_conversion);
criterion_main!(benches);
