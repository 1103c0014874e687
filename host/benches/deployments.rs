//! Choosing a deployment: the cost of one choice per attempt at 3 and at 64
//! deployments, unlimited and with `rpm` / `tpm` buckets (read on every
//! choice), with and without a conversation's affinity, while a few attempts
//! are in flight (the bound: 1 µs at 3, 5 µs at 64), and the worst
//! case of the headroom draw (every deployment nearly full).

// Benchmark setup: a failed step should stop the run with its message.
#![allow(clippy::expect_used, reason = "benchmark setup")]

use std::hint::black_box;
use std::sync::Arc;

use criterion::{Criterion, criterion_group, criterion_main};
use weir_host::admission::deployment::{CircuitSettings, Deployment, Health, Pool, Tried};
use weir_host::admission::{Demand, InProcessAccount, Limits, ModelGate, RateAccount};

/// One request of a thousand tokens.
const DEMAND: Demand = Demand { requests: 1, tokens: 1_000 };

/// `count` deployments, each with `limits` (its buckets read on every choice).
fn pool(count: usize, limits: Limits) -> Pool {
    let deployments = (0..count)
        .map(|index| {
            let account = Arc::new(InProcessAccount::new(limits, tokio::time::Instant::now()));
            Deployment {
                id: format!("d{index}"),
                weight: 1 + u32::try_from(index % 4).expect("small"),
                max_concurrency: Some(64),
                gate: ModelGate::new("bench", account as Arc<dyn RateAccount>, Some(64), None),
                health: Health::new(CircuitSettings::default()),
            }
        })
        .collect();
    Pool::with_deployments("bench", deployments)
}

fn choosing(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_time().build().expect("runtime");
    let _entered = runtime.enter();
    let limited = Limits { rpm: Some(10_000), tpm: Some(2_000_000) };
    for (name, limits) in [("choose", Limits::default()), ("choose-rpm-tpm", limited)] {
        for count in [3, 64] {
            let pool = pool(count, limits);
            // A few attempts in flight, so headroom differs between deployments.
            let _busy: Vec<_> =
                pool.deployments().iter().step_by(2).map(|deployment| deployment.health.start()).collect();
            c.bench_function(&format!("{name}/{count}/no-affinity"), |b| {
                b.iter(|| black_box(pool.choose(None, Tried::default(), DEMAND)));
            });
            let mut conversation = 0_u64;
            c.bench_function(&format!("{name}/{count}/affinity"), |b| {
                b.iter(|| {
                    conversation = conversation.wrapping_add(1);
                    black_box(pool.choose(Some(conversation), Tried::default(), DEMAND))
                });
            });
            c.bench_function(&format!("{name}/{count}/after-a-failure"), |b| {
                b.iter(|| black_box(pool.choose(Some(7), Tried::default().with(0), DEMAND)));
            });
        }
    }
    // The worst case of the headroom draw: every deployment's tokens nearly
    // spent, so the draws by rejection fail and every room is read.
    let pool = pool(64, limited);
    for deployment in pool.deployments() {
        let spent = Demand { requests: 1, tokens: 1_990_000 };
        runtime.block_on(deployment.gate.account().try_take(spent));
    }
    c.bench_function("choose-nearly-full/64/no-affinity", |b| {
        b.iter(|| black_box(pool.choose(None, Tried::default(), DEMAND)));
    });
}

criterion_group!(benches, choosing);
criterion_main!(benches);
