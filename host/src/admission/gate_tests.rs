//! The gate under tokio's paused clock: time only moves when every task waits,
//! so "parks until the exact fit" is asserted to the nanosecond, with no sleeps.

use std::sync::Arc;

use tokio::time::{Duration, Instant};

use super::*;

fn limits(rpm: Option<u64>, tpm: Option<u64>) -> Limits {
    Limits { rpm, tpm }
}

fn gate_with(limits: Limits, max_concurrency: Option<u32>) -> (Arc<ModelGate>, Arc<InProcessAccount>) {
    let account = Arc::new(InProcessAccount::new(limits, Instant::now()));
    let gate = ModelGate::new("m", Arc::clone(&account) as Arc<dyn RateAccount>, max_concurrency, None);
    (gate, account)
}

fn demand(tokens: u64) -> Demand {
    Demand { requests: 1, tokens }
}

/// Lets spawned tasks run until they park.
async fn settle() {
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
}

#[tokio::test(start_paused = true)]
async fn grants_while_capacity_lasts_then_parks_until_the_exact_fit() {
    let (gate, _) = gate_with(limits(Some(60), None), None);
    for _ in 0..60 {
        gate.admit(demand(0), None).await.unwrap().mark_sent();
    }
    let start = Instant::now();
    let grant = gate.admit(demand(0), None).await.unwrap();
    assert_eq!(Instant::now() - start, Duration::from_secs(1), "one request per second refills");
    drop(grant);
}

#[tokio::test(start_paused = true)]
async fn the_whole_demand_or_nothing() {
    let (gate, account) = gate_with(limits(Some(10), Some(100)), None);
    gate.admit(demand(90), None).await.unwrap().mark_sent();
    let before = account.snapshot();
    // Requests are plentiful, tokens are not: the call parks holding neither.
    let waiting = tokio::spawn({
        let gate = Arc::clone(&gate);
        async move { gate.admit(demand(40), None).await.map(|mut g| g.mark_sent()) }
    });
    settle().await;
    assert_eq!(gate.parked(), 1);
    let now = Instant::now();
    let mut expected = before.clone();
    expected.requests.as_mut().unwrap().settle(now, 10);
    expected.tokens.as_mut().unwrap().settle(now, 10);
    let mut actual = account.snapshot();
    actual.requests.as_mut().unwrap().settle(now, 10);
    actual.tokens.as_mut().unwrap().settle(now, 10);
    assert_eq!(actual, expected, "a parked call holds nothing");
    waiting.await.unwrap().unwrap();
    // 30 more tokens at 100/min take 18 s.
    assert_eq!(Instant::now() - now, Duration::from_secs(18));
}

#[tokio::test(start_paused = true)]
async fn a_demand_that_can_never_fit_fails_at_once_stating_both_numbers() {
    let (gate, _) = gate_with(limits(None, Some(1_000)), None);
    let error = gate.admit(demand(1_500), None).await.unwrap_err();
    assert!(matches!(error, AdmissionError::NeverFits { .. }));
    let message = error.to_string();
    assert!(message.contains("1500 tokens") && message.contains("1000 per minute"), "{message}");
}

#[tokio::test(start_paused = true)]
async fn fifo_order_and_the_head_is_not_starved() {
    let (gate, _) = gate_with(limits(None, Some(100)), None);
    gate.admit(demand(100), None).await.unwrap().mark_sent();
    let (order_tx, mut order_rx) = tokio::sync::mpsc::unbounded_channel();
    // A large demand first, then small ones that would fit much sooner.
    for (index, tokens) in [(0, 90), (1, 5), (2, 5), (3, 5)] {
        let gate = Arc::clone(&gate);
        let order = order_tx.clone();
        tokio::spawn(async move {
            let mut grant = gate.admit(demand(tokens), None).await.unwrap();
            grant.mark_sent();
            order.send(index).unwrap();
        });
        settle().await;
    }
    drop(order_tx);
    let mut order = Vec::new();
    while let Some(index) = order_rx.recv().await {
        order.push(index);
    }
    assert_eq!(order, vec![0, 1, 2, 3], "the large head went first; nobody overtook it");
}

#[tokio::test(start_paused = true)]
async fn a_deadline_before_the_earliest_fit_fails_at_once() {
    let (gate, _) = gate_with(limits(None, Some(60)), None);
    gate.admit(demand(60), None).await.unwrap().mark_sent();
    let start = Instant::now();
    let error = gate.admit(demand(30), Some(start + Duration::from_secs(10))).await.unwrap_err();
    assert!(
        matches!(error, AdmissionError::DeadlineBeforeFit { wait, .. } if wait == Duration::from_secs(30)),
        "{error:?}"
    );
    assert_eq!(Instant::now(), start, "no time was spent finding out");
    assert_eq!(gate.parked(), 0);

    // Queued behind another caller: the wait counts everything ahead.
    let ahead = tokio::spawn({
        let gate = Arc::clone(&gate);
        async move { gate.admit(demand(30), None).await.map(|mut g| g.mark_sent()) }
    });
    settle().await;
    let error = gate.admit(demand(20), Some(start + Duration::from_secs(40))).await.unwrap_err();
    assert!(
        matches!(error, AdmissionError::DeadlineBeforeFit { wait, .. } if wait == Duration::from_secs(50)),
        "{error:?}"
    );
    ahead.await.unwrap().unwrap();
}

#[tokio::test(start_paused = true)]
async fn concurrency_permits_and_a_deadline_that_passes_while_parked() {
    let (gate, _) = gate_with(limits(None, None), Some(2));
    let first = gate.admit(demand(1), None).await.unwrap();
    let _second = gate.admit(demand(1), None).await.unwrap();
    assert_eq!(gate.in_flight(), 2);

    let start = Instant::now();
    let error = gate.admit(demand(1), Some(start + Duration::from_secs(5))).await.unwrap_err();
    assert!(matches!(error, AdmissionError::DeadlinePassed { .. }), "{error:?}");
    assert_eq!(Instant::now() - start, Duration::from_secs(5));

    let third = tokio::spawn({
        let gate = Arc::clone(&gate);
        async move { gate.admit(demand(1), None).await.map(|_| Instant::now()) }
    });
    settle().await;
    tokio::time::sleep(Duration::from_secs(7)).await;
    drop(first);
    let granted_at = third.await.unwrap().unwrap();
    assert_eq!(granted_at - start, Duration::from_secs(12), "granted when the permit came back");
}

#[tokio::test(start_paused = true)]
async fn an_unsent_grant_rolls_back_exactly_and_a_sent_one_is_spent() {
    let (gate, account) = gate_with(limits(Some(10), Some(1_000)), None);
    let before = account.snapshot();
    let grant = gate.admit(demand(400), None).await.unwrap();
    drop(grant);
    settle().await;
    assert_eq!(account.snapshot().tokens.unwrap().level(Instant::now(), 10), 1_000);
    assert_eq!(account.snapshot().requests.unwrap().level(Instant::now(), 10), 10);
    let mut rolled = account.snapshot();
    let mut expected = before;
    for state in [&mut rolled, &mut expected] {
        state.tokens.as_mut().unwrap().settle(Instant::now(), 10);
        state.requests.as_mut().unwrap().settle(Instant::now(), 10);
    }
    assert_eq!(rolled, expected);

    let mut sent = gate.admit(demand(400), None).await.unwrap();
    sent.mark_sent();
    drop(sent);
    settle().await;
    assert_eq!(account.snapshot().tokens.unwrap().level(Instant::now(), 10), 600, "spent, refills with time");
    assert_eq!(gate.in_flight(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_cancelled_parked_call_leaves_the_queue() {
    let (gate, _) = gate_with(limits(None, None), Some(1));
    let held = gate.admit(demand(1), None).await.unwrap();
    let cancelled = tokio::spawn({
        let gate = Arc::clone(&gate);
        async move { gate.admit(demand(1), None).await.map(drop) }
    });
    settle().await;
    let behind = tokio::spawn({
        let gate = Arc::clone(&gate);
        async move { gate.admit(demand(1), None).await.map(drop) }
    });
    settle().await;
    assert_eq!(gate.parked(), 2);
    cancelled.abort();
    settle().await;
    assert_eq!(gate.parked(), 1, "the cancelled call left the queue");
    drop(held);
    behind.await.unwrap().unwrap();
    assert_eq!(gate.parked(), 0);
    assert_eq!(gate.in_flight(), 0);
}

#[tokio::test(start_paused = true)]
async fn backpressure_stretches_the_wait() {
    let (gate, _) = gate_with(limits(Some(60), None), None);
    for _ in 0..60 {
        gate.admit(demand(0), None).await.unwrap().mark_sent();
    }
    gate.account().feedback(Feedback::Backpressure(3)).await;
    assert_eq!(gate.account().coefficient().await, 1.5);
    let start = Instant::now();
    gate.admit(demand(0), None).await.unwrap().mark_sent();
    assert_eq!(Instant::now() - start, Duration::from_millis(2_500), "refill 2.5x slower");
}

#[tokio::test(start_paused = true)]
async fn a_full_queue_refuses_at_once_with_the_wait_for_everything_queued() {
    let account = Arc::new(InProcessAccount::new(limits(Some(60), None), Instant::now()));
    let gate = ModelGate::new("m", Arc::clone(&account) as Arc<dyn RateAccount>, None, Some(2));
    for _ in 0..60 {
        gate.admit(demand(0), None).await.unwrap().mark_sent();
    }
    let parked: Vec<_> = (0..2)
        .map(|_| {
            let gate = Arc::clone(&gate);
            tokio::spawn(async move { gate.admit(demand(0), None).await.map(|mut g| g.mark_sent()) })
        })
        .collect();
    settle().await;
    assert_eq!(gate.parked(), 2);
    let started = Instant::now();
    let error = gate.admit(demand(0), None).await.unwrap_err();
    assert_eq!(Instant::now(), started, "refused without waiting");
    // Two queued plus this one at one request per second.
    let AdmissionError::QueueFull { max_queue, retry_after, .. } = error else { panic!("{error:?}") };
    assert_eq!((max_queue, retry_after), (2, Duration::from_secs(3)));
    assert_eq!(gate.parked(), 2, "the refused call never joined");
    for task in parked {
        task.await.unwrap().unwrap();
    }
}

#[tokio::test(start_paused = true)]
async fn a_queue_held_by_concurrency_alone_says_one_second() {
    let account = Arc::new(InProcessAccount::new(limits(None, None), Instant::now()));
    let gate = ModelGate::new("m", account as Arc<dyn RateAccount>, Some(1), Some(1));
    let held = gate.admit(demand(0), None).await.unwrap();
    let waiting = tokio::spawn({
        let gate = Arc::clone(&gate);
        async move { gate.admit(demand(0), None).await.map(drop) }
    });
    settle().await;
    let error = gate.admit(demand(0), None).await.unwrap_err();
    assert!(matches!(error, AdmissionError::QueueFull { retry_after, .. } if retry_after == Duration::from_secs(1)));
    drop(held);
    waiting.await.unwrap().unwrap();
}
