//! Properties of admission over arbitrary sequences of demands, under synthetic
//! or paused time.

use std::sync::Arc;

use proptest::prelude::*;
use tokio::time::{Duration, Instant};

use super::*;

const RPM: u64 = 30;
const TPM: u64 = 1_000;

#[derive(Debug, Clone)]
enum Op {
    Wait(u64),
    Take(u64),
    RollBackLast,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![(1_u64..20_000).prop_map(Op::Wait), (0_u64..=TPM).prop_map(Op::Take), Just(Op::RollBackLast),]
}

/// One grant that stands (was not rolled back): when, how many tokens.
#[derive(Debug, Clone, Copy)]
struct Granted {
    at: Duration,
    tokens: u64,
}

/// Runs the ops against one account at a fixed throttle coefficient; returns the
/// grants that stand.
fn run(ops: &[Op], backpressure: u32) -> Vec<Granted> {
    let start = Instant::now();
    let mut state = InProcessAccount::new(Limits { rpm: Some(RPM), tpm: Some(TPM) }, start).snapshot();
    state.feedback(Feedback::Backpressure(backpressure), start);
    let mut now = start;
    let mut granted: Vec<Granted> = Vec::new();
    let mut last: Option<usize> = None;
    for op in ops {
        match *op {
            Op::Wait(ms) => now += Duration::from_millis(ms),
            Op::Take(tokens) => {
                let demand = Demand { requests: 1, tokens };
                if state.try_take(demand, now) == Verdict::Granted {
                    granted.push(Granted { at: now - start, tokens });
                    last = Some(granted.len() - 1);
                }
            }
            Op::RollBackLast => {
                if let Some(index) = last.take() {
                    let rolled = granted.remove(index);
                    state.give(Demand { requests: 1, tokens: rolled.tokens }, now);
                }
            }
        }
    }
    granted
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Over any window, what stands granted never exceeds what the bucket held at
    /// the window's start (at most its capacity) plus what it refilled during the
    /// window at the throttled rate — on both axes.
    #[test]
    fn grants_never_exceed_the_stretched_budget(ops in prop::collection::vec(op(), 1..200), weight in 0_u32..8) {
        let granted = run(&ops, weight);
        let stretch_tenths = u128::from(10 + (weight * 5).min(90));
        for (i, first) in granted.iter().enumerate() {
            let mut tokens = 0_u128;
            let mut requests = 0_u128;
            for later in &granted[i..] {
                tokens += u128::from(later.tokens);
                requests += 1;
                let window_ns = (later.at - first.at).as_nanos();
                // budget × (1 + window / (60 s × stretch)), kept in integers.
                let bound = |capacity: u64| {
                    let capacity = u128::from(capacity);
                    capacity * 600_000_000_000 * stretch_tenths / 10 + capacity * window_ns * 10
                };
                let scale = 600_000_000_000 * stretch_tenths / 10;
                prop_assert!(tokens * scale <= bound(TPM), "tokens {tokens} in {window_ns} ns");
                prop_assert!(requests * scale <= bound(RPM), "requests {requests} in {window_ns} ns");
            }
        }
    }

    /// A demand that does not fit changes nothing: no axis is taken alone.
    #[test]
    fn no_grant_holds_partial_resources(ops in prop::collection::vec(op(), 1..100), probe in 0_u64..=TPM) {
        let start = Instant::now();
        let mut state = InProcessAccount::new(Limits { rpm: Some(RPM), tpm: Some(TPM) }, start).snapshot();
        let mut now = start;
        for op in &ops {
            match *op {
                Op::Wait(ms) => now += Duration::from_millis(ms),
                Op::Take(tokens) => { let _ = state.try_take(Demand { requests: 1, tokens }, now); }
                Op::RollBackLast => {}
            }
            let before = state.clone();
            if state.try_take(Demand { requests: 1, tokens: probe }, now) != Verdict::Granted {
                prop_assert_eq!(&state, &before);
            }
        }
    }

    /// Taking and giving back the same demand at the same instant restores the
    /// account exactly.
    #[test]
    fn rollback_restores_exactly(waits in prop::collection::vec(0_u64..30_000, 1..20), tokens in 0_u64..=TPM) {
        let start = Instant::now();
        let mut state = InProcessAccount::new(Limits { rpm: Some(RPM), tpm: Some(TPM) }, start).snapshot();
        let mut now = start;
        for wait in waits {
            now += Duration::from_millis(wait);
            let _ = state.try_take(Demand { requests: 1, tokens: tokens / 2 }, now);
            let mut before = state.clone();
            for bucket in [&mut before.requests, &mut before.tokens].into_iter().flatten() {
                bucket.settle(now, 10);
            }
            let demand = Demand { requests: 1, tokens };
            if state.try_take(demand, now) == Verdict::Granted {
                state.give(demand, now);
                prop_assert_eq!(&state, &before);
            }
        }
    }

    /// Through the real gate: calls are granted in arrival order, and every one is
    /// granted (the head, however large, is not starved by small ones).
    #[test]
    fn fifo_order_holds_and_nobody_starves(demands in prop::collection::vec((1_u64..=TPM, 0_u64..3_000), 1..25)) {
        let order = fifo_run(&demands);
        prop_assert_eq!(order, (0..demands.len()).collect::<Vec<_>>());
    }
}

/// Callers arrive with (tokens, delay after the previous arrival) while the
/// bucket starts empty; returns the order in which they were granted.
fn fifo_run(demands: &[(u64, u64)]) -> Vec<usize> {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_time().start_paused(true).build().unwrap();
    runtime.block_on(async {
        let account = Arc::new(InProcessAccount::new(Limits { rpm: None, tpm: Some(TPM) }, Instant::now()));
        let gate = ModelGate::new("m", account as Arc<dyn RateAccount>, None, None);
        gate.admit(Demand { requests: 1, tokens: TPM }, None).await.unwrap().mark_sent();
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        for (index, &(tokens, delay_ms)) in demands.iter().enumerate() {
            tokio::time::sleep(Duration::from_millis(delay_ms)).await;
            let gate = Arc::clone(&gate);
            let tx = tx.clone();
            tokio::spawn(async move {
                let mut grant = gate.admit(Demand { requests: 1, tokens }, None).await.unwrap();
                grant.mark_sent();
                tx.send(index).unwrap();
            });
            tokio::task::yield_now().await;
        }
        drop(tx);
        let mut order = Vec::new();
        while let Some(index) = rx.recv().await {
            order.push(index);
        }
        order
    })
}
