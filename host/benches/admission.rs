//! Admission's costs: uncontended admit + release per second; the same while
//! 10 000 calls are parked and both cores contend; and the memory one parked call
//! costs (measured by a counting allocator, plus the admit future itself).

// Benchmark setup: a failed step should stop the run with its message.
#![allow(clippy::expect_used, clippy::print_stderr, reason = "a benchmark reports on stderr")]

use std::future::Future;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use weir_host::admission::{Demand, InProcessAccount, Limits, ModelGate, RateAccount};

#[path = "support/counting.rs"]
mod counting;
use counting::live_bytes;

const ONE: Demand = Demand { requests: 1, tokens: 100 };

fn gate(limits: Limits, max_concurrency: Option<u32>) -> Arc<ModelGate> {
    let account = Arc::new(InProcessAccount::new(limits, tokio::time::Instant::now()));
    ModelGate::new("bench", account as Arc<dyn RateAccount>, max_concurrency, None)
}

/// Budgets so large the benchmark never waits on them, but real buckets, so every
/// grant still does the bucket arithmetic.
fn unlimited() -> Limits {
    Limits { rpm: Some(1_000_000_000_000), tpm: Some(1_000_000_000_000_000) }
}

/// Bytes one parked call holds: its pinned admit future plus what parking
/// allocated (its queue entry), averaged over `count` parked calls.
fn memory_per_parked_call(count: usize) -> usize {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_time().build().expect("runtime");
    runtime.block_on(async {
        let gate = gate(unlimited(), Some(1));
        let _held = gate.admit(ONE, None).await.expect("first grant");
        let before = live_bytes();
        let mut parked = Vec::with_capacity(count);
        let after_vec = live_bytes();
        let mut context = Context::from_waker(Waker::noop());
        for _ in 0..count {
            let mut call = Box::pin(gate.admit(ONE, None));
            assert!(matches!(call.as_mut().poll(&mut context), Poll::Pending), "parks");
            parked.push(call);
        }
        assert_eq!(gate.parked(), count);
        let bytes = live_bytes() - after_vec - (after_vec - before);
        drop(parked);
        bytes / count
    })
}

fn uncontended(c: &mut Criterion) {
    eprintln!("memory per parked call: {} bytes", memory_per_parked_call(10_000));
    let runtime = tokio::runtime::Builder::new_current_thread().enable_time().build().expect("runtime");
    let gate = gate(unlimited(), None);
    c.bench_function("admission/uncontended admit+release", |b| {
        b.iter_custom(|iterations| {
            runtime.block_on(async {
                let start = Instant::now();
                for _ in 0..iterations {
                    let mut grant = gate.admit(ONE, None).await.expect("grant");
                    grant.mark_sent();
                }
                start.elapsed()
            })
        })
    });
}

/// 10 000 calls arrive at once at a model allowing 8 in flight: nearly all of
/// them park, and permits cycle through the queue on both cores.
fn contended(c: &mut Criterion) {
    const CALLS: u64 = 10_000;
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_time().build().expect("runtime");
    let mut group = c.benchmark_group("admission/contended");
    group.sample_size(10).measurement_time(Duration::from_secs(10));
    group.bench_function("10k calls through 8 permits, 2 cores (time per grant)", |b| {
        b.iter_custom(|iterations| {
            runtime.block_on(async {
                let mut total = Duration::ZERO;
                for _ in 0..iterations {
                    let gate = gate(unlimited(), Some(8));
                    let start = Instant::now();
                    let tasks: Vec<_> = (0..CALLS)
                        .map(|_| {
                            let gate = Arc::clone(&gate);
                            tokio::spawn(async move {
                                let mut grant = gate.admit(ONE, None).await.expect("grant");
                                grant.mark_sent();
                                tokio::task::yield_now().await;
                            })
                        })
                        .collect();
                    for task in tasks {
                        task.await.expect("task");
                    }
                    total += start.elapsed() / u32::try_from(CALLS).expect("fits");
                }
                total
            })
        })
    });
    group.finish();
}

criterion_group!(benches, uncontended, contended);
criterion_main!(benches);
