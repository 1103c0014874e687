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

/// The lanes' gate: four permits, half of every axis reserved (15 requests,
/// 500 tokens, 2 permits), so each reserve is a whole number and whole-token
/// levels check it exactly.
const PERMITS: u32 = 4;
const RESERVED_REQUESTS: u64 = RPM / 2;
const RESERVED_TOKENS: u64 = TPM / 2;
const RESERVED_PERMITS: u32 = PERMITS / 2;

/// One arrival: its lane, its tokens, the delay after the previous arrival and
/// how long it holds its grant.
#[derive(Debug, Clone, Copy)]
struct Arrival {
    lane: Lane,
    tokens: u64,
    delay_ms: u64,
    hold_ms: u64,
}

fn arrival() -> impl Strategy<Value = Arrival> {
    let lane = prop_oneof![Just(Lane::Interactive), Just(Lane::Bulk)];
    (lane, 0_u64..=TPM, 0_u64..4_000, 0_u64..10_000).prop_map(|(lane, tokens, delay_ms, hold_ms)| {
        // A bulk demand that fits beside the reserve, so every call is granted.
        let tokens = if lane == Lane::Bulk { tokens % (TPM - RESERVED_TOKENS + 1) } else { tokens };
        Arrival { lane, tokens, delay_ms, hold_ms }
    })
}

/// What one call saw, on a single clock of events (arrivals and grants).
#[derive(Debug, Clone, Copy)]
struct Seen {
    lane: Lane,
    arrived: u64,
    granted: u64,
    /// Nothing stood in its way at arrival (interactive only): no interactive
    /// call parked, a permit free, both buckets holding its demand.
    fit_at_arrival: bool,
    waited: Duration,
    /// Bulk only: what the grant left — requests, tokens, free permits — and
    /// how many interactive calls were parked at that instant.
    left: Option<(u64, u64, u32, usize)>,
}

/// Runs the arrivals through the real gate under paused time; returns what
/// each call saw, in arrival order.
fn lanes_run(arrivals: &[Arrival], drained: u64) -> Vec<Seen> {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_time().start_paused(true).build().unwrap();
    runtime.block_on(async {
        let account = Arc::new(InProcessAccount::new(Limits { rpm: Some(RPM), tpm: Some(TPM) }, Instant::now()));
        let gate = ModelGate::with_interactive_share(
            "m",
            Arc::clone(&account) as Arc<dyn RateAccount>,
            Some(PERMITS),
            None,
            InteractiveShare::DEFAULT,
        );
        gate.admit(Demand { requests: 1, tokens: drained }, None).await.unwrap().mark_sent();
        let clock = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let tick = |clock: &std::sync::atomic::AtomicU64| clock.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut tasks = Vec::new();
        for &Arrival { lane, tokens, delay_ms, hold_ms } in arrivals {
            tokio::time::sleep(Duration::from_millis(delay_ms)).await;
            let (gate, account, clock) = (Arc::clone(&gate), Arc::clone(&account), Arc::clone(&clock));
            tasks.push(tokio::spawn(async move {
                let demand = Demand { requests: 1, tokens };
                let now = Instant::now();
                let state = account.snapshot();
                let holds =
                    |bucket: &Option<Bucket>, amount: u64| bucket.as_ref().is_none_or(|b| b.level(now, 10) >= amount);
                let fit_at_arrival = lane == Lane::Interactive
                    && gate.parked_in(Lane::Interactive) == 0
                    && gate.in_flight() < PERMITS
                    && holds(&state.requests, 1)
                    && holds(&state.tokens, tokens);
                let arrived = tick(&clock);
                let mut grant = gate.admit_in(demand, None, lane).await.unwrap();
                let granted = tick(&clock);
                let waited = Instant::now() - now;
                let left = (lane == Lane::Bulk).then(|| {
                    let state = account.snapshot();
                    let level =
                        |bucket: &Option<Bucket>| bucket.as_ref().map_or(u64::MAX, |b| b.level(Instant::now(), 10));
                    (
                        level(&state.requests),
                        level(&state.tokens),
                        PERMITS - gate.in_flight(),
                        gate.parked_in(Lane::Interactive),
                    )
                });
                grant.mark_sent();
                tokio::time::sleep(Duration::from_millis(hold_ms)).await;
                drop(grant);
                Seen { lane, arrived, granted, fit_at_arrival, waited, left }
            }));
            tokio::task::yield_now().await;
        }
        let mut seen = Vec::new();
        for task in tasks {
            seen.push(task.await.unwrap());
        }
        seen
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    /// Under random arrivals of both lanes through the real gate:
    /// - no bulk grant leaves less than the reserve of any axis, and none
    ///   happens while an interactive call is parked;
    /// - an interactive call is granted before every bulk call that arrived
    ///   after it, and one that fit at arrival is granted at once;
    /// - each lane is granted in arrival order, and every call is granted.
    #[test]
    fn bulk_never_takes_the_reserve_nor_goes_before_interactive(
        arrivals in prop::collection::vec(arrival(), 1..40),
        drained in 0_u64..=TPM,
    ) {
        let seen = lanes_run(&arrivals, drained);
        prop_assert_eq!(seen.len(), arrivals.len());
        for call in &seen {
            if let Some((requests, tokens, free_permits, interactive_parked)) = call.left {
                prop_assert!(requests >= RESERVED_REQUESTS, "a bulk grant left {requests} requests");
                prop_assert!(tokens >= RESERVED_TOKENS, "a bulk grant left {tokens} tokens");
                prop_assert!(free_permits >= RESERVED_PERMITS, "a bulk grant left {free_permits} permits");
                prop_assert_eq!(interactive_parked, 0, "a bulk grant while interactive calls were parked");
            }
            if call.fit_at_arrival {
                prop_assert_eq!(call.waited, Duration::ZERO, "an interactive call that fit waited");
            }
        }
        for interactive in seen.iter().filter(|c| c.lane == Lane::Interactive) {
            for bulk in seen.iter().filter(|c| c.lane == Lane::Bulk && c.arrived > interactive.arrived) {
                prop_assert!(interactive.granted < bulk.granted, "{interactive:?} after {bulk:?}");
            }
        }
        let mut by_arrival = seen.clone();
        by_arrival.sort_by_key(|c| c.arrived);
        for lane in [Lane::Interactive, Lane::Bulk] {
            let grants: Vec<u64> = by_arrival.iter().filter(|c| c.lane == lane).map(|c| c.granted).collect();
            prop_assert!(grants.is_sorted(), "{lane} out of arrival order: {grants:?}");
        }
    }
}
