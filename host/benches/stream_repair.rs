//! The per-chunk cost of stream repair while it holds an unclosed block of
//! markup: 64 text chunks of 16 bytes pushed into a `<tool_call>` that has held
//! 1, 8, 32 and 60 KiB so far. Repair scans incrementally, so the cost should stay
//! flat as the held block grows (a rescan per chunk would grow with it); plain
//! text with nothing held is the baseline. Ratios to the 1 KiB case are printed
//! at the end.

#![allow(clippy::expect_used, clippy::print_stderr, reason = "a benchmark reports on stderr")]

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use weir_host::stream::repair::StreamRepair;
use weir_host::types::StreamDelta;

const CHUNK: &str = "sixteen bytes ok";
const HELD_KIB: [usize; 4] = [1, 8, 32, 60];

/// A repair holding an unclosed Hermes block of about `held` bytes, after one
/// chunk more: that first chunk grows the buffers (a copy amortized over a
/// doubling's worth of chunks in a real stream), which is not the scanning cost
/// measured here.
fn holding(held: usize) -> StreamRepair {
    let mut repair = StreamRepair::new();
    let open = r#"<tool_call>{"name": "write", "arguments": {"body": ""#;
    let forwarded = repair.push(StreamDelta::Text(format!("{open}{}", "x".repeat(held - open.len()))));
    assert!(forwarded.is_empty(), "the block is held");
    assert!(repair.push(StreamDelta::Text(CHUNK.to_owned())).is_empty(), "still held");
    repair
}

/// The median time of one chunk pushed into a repair holding `held` bytes.
fn per_chunk(held: usize) -> Duration {
    const SAMPLES: usize = 2_001;
    let mut times: Vec<Duration> = (0..SAMPLES)
        .map(|_| {
            let mut repair = holding(held);
            let started = Instant::now();
            for _ in 0..64 {
                black_box(repair.push(StreamDelta::Text(CHUNK.to_owned())));
            }
            started.elapsed() / 64
        })
        .collect();
    times.sort();
    times[SAMPLES / 2]
}

fn repair(c: &mut Criterion) {
    let mut group = c.benchmark_group("stream_repair_chunk");
    group.bench_function("64 chunks of 16 B of plain text, nothing held", |b| {
        let mut repair = StreamRepair::new();
        b.iter(|| {
            for _ in 0..64 {
                black_box(repair.push(StreamDelta::Text(CHUNK.to_owned())));
            }
        })
    });
    for kib in HELD_KIB {
        group.bench_function(format!("64 chunks of 16 B into an unclosed block holding {kib} KiB"), |b| {
            b.iter_batched_ref(
                || holding(kib << 10),
                |repair| {
                    for _ in 0..64 {
                        black_box(repair.push(StreamDelta::Text(CHUNK.to_owned())));
                    }
                },
                BatchSize::SmallInput,
            )
        });
    }
    group.finish();

    let base = per_chunk(1 << 10).as_secs_f64();
    eprintln!("per-chunk cost while holding N KiB / while holding 1 KiB (median of 64-chunk runs):");
    for kib in HELD_KIB {
        eprintln!("  {kib:>2} KiB: {:.2}", per_chunk(kib << 10).as_secs_f64() / base);
    }
}

criterion_group!(benches, repair);
criterion_main!(benches);
