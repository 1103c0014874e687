//! The two lanes under tokio's paused clock: interactive first, bulk FIFO among
//! itself and never into the interactive share. Orders are asserted on grant
//! order and instants to the nanosecond, never on wall time.

use std::sync::Arc;

use tokio::sync::mpsc::UnboundedSender;
use tokio::task::JoinHandle;
use tokio::time::{Duration, Instant};

use super::*;

const HALF: InteractiveShare = InteractiveShare::DEFAULT;

fn gate(
    limits: Limits,
    max_concurrency: Option<u32>,
    max_queue: Option<u32>,
    share: InteractiveShare,
) -> Arc<ModelGate> {
    let account = Arc::new(InProcessAccount::new(limits, Instant::now()));
    ModelGate::with_interactive_share("m", account as Arc<dyn RateAccount>, max_concurrency, max_queue, share)
}

fn limits(rpm: Option<u64>, tpm: Option<u64>) -> Limits {
    Limits { rpm, tpm }
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

/// Spawns a call in `lane` that, once granted, sends `index` and when, then
/// spends its grant.
fn call(gate: &Arc<ModelGate>, lane: Lane, tokens: u64, index: usize, order: &UnboundedSender<(usize, Instant)>) {
    let gate = Arc::clone(gate);
    let order = order.clone();
    tokio::spawn(async move {
        let mut grant = gate.admit_in(demand(tokens), None, lane).await.unwrap();
        grant.mark_sent();
        order.send((index, Instant::now())).unwrap();
    });
}

/// A call in `lane` that holds its grant until told to let go.
fn holder(gate: &Arc<ModelGate>, lane: Lane) -> (JoinHandle<Instant>, tokio::sync::oneshot::Sender<()>) {
    let gate = Arc::clone(gate);
    let (release, released) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        let grant = gate.admit_in(demand(0), None, lane).await.unwrap();
        let at = Instant::now();
        released.await.unwrap();
        drop(grant);
        at
    });
    (task, release)
}

#[tokio::test(start_paused = true)]
async fn an_interactive_call_goes_before_a_hundred_parked_bulk_calls() {
    let gate = gate(limits(None, Some(1_000)), None, None, HALF);
    gate.admit(demand(1_000), None).await.unwrap().mark_sent();
    let start = Instant::now();
    let (order_tx, mut order_rx) = tokio::sync::mpsc::unbounded_channel();
    for index in 0..100 {
        call(&gate, Lane::Bulk, 10, index, &order_tx);
    }
    settle().await;
    assert_eq!(gate.parked_in(Lane::Bulk), 100);
    // The bulk head fits (510 tokens: its 10 and the 500 reserve) after 30.6 s;
    // this interactive call needs 600 tokens, 36 s. It still goes first.
    call(&gate, Lane::Interactive, 600, 100, &order_tx);
    settle().await;
    assert_eq!(gate.parked_in(Lane::Interactive), 1);
    drop(order_tx);
    let mut order = Vec::new();
    let mut times = Vec::new();
    while let Some((index, at)) = order_rx.recv().await {
        order.push(index);
        times.push(at - start);
    }
    let expected: Vec<usize> = std::iter::once(100).chain(0..100).collect();
    assert_eq!(order, expected, "the interactive call first, then bulk in arrival order");
    assert_eq!(times[0], Duration::from_secs(36), "nothing of bulk delayed it");
    assert_eq!(times[1], Duration::from_secs(36) + Duration::from_millis(30_600), "bulk waited for it");
}

#[tokio::test(start_paused = true)]
async fn an_interactive_arrival_takes_free_capacity_at_once_past_parked_bulk_calls() {
    let gate = gate(limits(Some(10), None), None, None, HALF);
    let start = Instant::now();
    for _ in 0..5 {
        gate.admit_in(demand(0), None, Lane::Bulk).await.unwrap().mark_sent();
    }
    assert_eq!(Instant::now(), start, "five bulk calls fit beside the reserve of five");
    let (order_tx, mut order_rx) = tokio::sync::mpsc::unbounded_channel();
    call(&gate, Lane::Bulk, 0, 0, &order_tx);
    settle().await;
    assert_eq!(gate.parked_in(Lane::Bulk), 1, "the sixth would dig into the reserve");
    for _ in 0..5 {
        gate.admit(demand(0), None).await.unwrap().mark_sent();
    }
    assert_eq!(Instant::now(), start, "interactive calls use the reserve at once");
    assert_eq!(gate.parked_in(Lane::Bulk), 1);
    drop(order_tx);
    let (index, at) = order_rx.recv().await.unwrap();
    // Empty at 10 per minute: six requests (its one and the reserve) take 36 s.
    assert_eq!((index, at - start), (0, Duration::from_secs(36)));
}

#[tokio::test(start_paused = true)]
async fn bulk_is_fifo_within_its_lane_and_its_head_is_not_starved() {
    let gate = gate(limits(None, Some(200)), None, None, HALF);
    gate.admit(demand(200), None).await.unwrap().mark_sent();
    let (order_tx, mut order_rx) = tokio::sync::mpsc::unbounded_channel();
    for (index, tokens) in [(0, 90), (1, 5), (2, 5), (3, 5)] {
        call(&gate, Lane::Bulk, tokens, index, &order_tx);
        settle().await;
    }
    drop(order_tx);
    let mut order = Vec::new();
    while let Some((index, _)) = order_rx.recv().await {
        order.push(index);
    }
    assert_eq!(order, vec![0, 1, 2, 3], "the large bulk head went first; no smaller bulk call overtook it");
}

#[tokio::test(start_paused = true)]
async fn bulk_leaves_the_reserved_permits_and_a_freed_permit_goes_to_interactive() {
    // Four permits, half reserved: bulk may hold two, and only while two stay free.
    let gate = gate(limits(None, None), Some(4), None, HALF);
    let (bulk_one, release_bulk_one) = holder(&gate, Lane::Bulk);
    let (bulk_two, release_bulk_two) = holder(&gate, Lane::Bulk);
    settle().await;
    assert_eq!(gate.in_flight(), 2);
    let (bulk_three, release_bulk_three) = holder(&gate, Lane::Bulk);
    settle().await;
    assert_eq!(gate.parked_in(Lane::Bulk), 1, "a third bulk call would leave one permit of the two reserved");
    let (one, release_one) = holder(&gate, Lane::Interactive);
    let (two, release_two) = holder(&gate, Lane::Interactive);
    settle().await;
    assert_eq!(gate.in_flight(), 4, "interactive calls may take the reserved permits");
    let (three, release_three) = holder(&gate, Lane::Interactive);
    settle().await;
    assert_eq!(gate.parked_in(Lane::Interactive), 1);

    let start = Instant::now();
    release_bulk_one.send(()).unwrap();
    bulk_one.await.unwrap();
    settle().await;
    assert_eq!(gate.parked_in(Lane::Interactive), 0, "the freed permit went to the interactive head");
    assert_eq!(gate.parked_in(Lane::Bulk), 1);

    // In flight: bulk two and interactive one to three. Bulk three may go only
    // once in flight falls below two.
    for (release, task) in [(release_one, one), (release_two, two)] {
        tokio::time::sleep(Duration::from_secs(1)).await;
        release.send(()).unwrap();
        task.await.unwrap();
        settle().await;
        assert_eq!(gate.parked_in(Lane::Bulk), 1, "{} in flight", gate.in_flight());
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    release_three.send(()).unwrap();
    three.await.unwrap();
    settle().await;
    assert_eq!(gate.parked_in(Lane::Bulk), 0);
    release_bulk_two.send(()).unwrap();
    release_bulk_three.send(()).unwrap();
    assert_eq!(bulk_two.await.unwrap(), start, "granted at once");
    assert_eq!(bulk_three.await.unwrap() - start, Duration::from_secs(3), "granted when in flight fell to one");
    assert_eq!(gate.in_flight(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_bulk_call_that_can_never_fit_beside_the_reserve_fails_at_once_naming_it() {
    let by_tokens = gate(limits(None, Some(1_000)), None, None, HALF);
    let error = by_tokens.admit_in(demand(600), None, Lane::Bulk).await.unwrap_err();
    assert!(matches!(error, AdmissionError::NeverFits { .. }), "{error:?}");
    let message = error.to_string();
    assert!(
        message.contains("600 tokens")
            && message.contains("1000 per minute")
            && message.contains("500 of it reserved for interactive calls"),
        "{message}"
    );
    assert_eq!(by_tokens.parked(), 0);
    by_tokens.admit(demand(600), None).await.unwrap().mark_sent();

    // Every permit reserved: of one permit, half is one.
    let by_permits = gate(limits(None, None), Some(1), None, HALF);
    let error = by_permits.admit_in(demand(0), None, Lane::Bulk).await.unwrap_err();
    let message = error.to_string();
    assert!(
        matches!(error, AdmissionError::NeverFits { shortfall, .. } if shortfall.axis == Axis::ConcurrentCalls),
        "{message}"
    );
    assert!(message.contains("1 of them reserved for interactive calls"), "{message}");
    drop(by_permits.admit(demand(0), None).await.unwrap());
}

#[tokio::test(start_paused = true)]
async fn deadlines_are_judged_per_lane_with_the_reserve_for_bulk() {
    let gate = gate(limits(None, Some(100)), None, None, HALF);
    gate.admit(demand(100), None).await.unwrap().mark_sent();
    let start = Instant::now();
    // Bulk needs its 10 tokens and the 50 reserved: 36 s from empty.
    let error = gate.admit_in(demand(10), Some(start + Duration::from_secs(10)), Lane::Bulk).await.unwrap_err();
    assert!(
        matches!(error, AdmissionError::DeadlineBeforeFit { wait, .. } if wait == Duration::from_secs(36)),
        "{error:?}"
    );
    assert_eq!((Instant::now(), gate.parked()), (start, 0), "refused at once, never parked");

    // A bulk call that does fit its deadline parks; an interactive call with a
    // shorter one is not counted behind it and goes first.
    let bulk = tokio::spawn({
        let gate = Arc::clone(&gate);
        async move { gate.admit_in(demand(10), Some(start + Duration::from_secs(40)), Lane::Bulk).await.map(drop) }
    });
    settle().await;
    assert_eq!(gate.parked_in(Lane::Bulk), 1);
    gate.admit(demand(10), Some(start + Duration::from_secs(10))).await.unwrap().mark_sent();
    assert_eq!(Instant::now() - start, Duration::from_secs(6), "ten tokens at 100 per minute");
    // The bulk call now needs 60 tokens from an empty bucket again: 6 + 36 s > 40 s.
    let error = bulk.await.unwrap().unwrap_err();
    assert!(matches!(error, AdmissionError::DeadlineBeforeFit { .. }), "{error:?}");

    // A bulk call whose deadline passes while an interactive call holds the turn.
    let interactive = tokio::spawn({
        let gate = Arc::clone(&gate);
        async move { gate.admit(demand(100), None).await.map(|mut grant| grant.mark_sent()) }
    });
    settle().await;
    let parked_at = Instant::now();
    let error = gate.admit_in(demand(0), Some(parked_at + Duration::from_secs(59)), Lane::Bulk).await.unwrap_err();
    assert!(matches!(error, AdmissionError::DeadlinePassed { .. }), "{error:?}");
    assert_eq!(Instant::now() - parked_at, Duration::from_secs(59));
    interactive.await.unwrap().unwrap();
}

#[tokio::test(start_paused = true)]
async fn each_lane_has_its_own_bounded_queue() {
    let gate = gate(limits(Some(60), None), None, Some(2), HALF);
    for _ in 0..60 {
        gate.admit(demand(0), None).await.unwrap().mark_sent();
    }
    let spawn = |lane: Lane| {
        let gate = Arc::clone(&gate);
        tokio::spawn(async move { gate.admit_in(demand(0), None, lane).await.map(|mut grant| grant.mark_sent()) })
    };
    let mut parked: Vec<_> = (0..2).map(|_| spawn(Lane::Bulk)).collect();
    settle().await;
    let started = Instant::now();
    let error = gate.admit_in(demand(0), None, Lane::Bulk).await.unwrap_err();
    // Two bulk calls queued plus this one, with 30 requests left: 33 s.
    let AdmissionError::QueueFull { lane, max_queue, retry_after, .. } = error else { panic!("{error:?}") };
    assert_eq!((lane, max_queue, retry_after), (Lane::Bulk, 2, Duration::from_secs(33)));

    // A full bulk queue turns no interactive call away.
    parked.extend((0..2).map(|_| spawn(Lane::Interactive)));
    settle().await;
    assert_eq!((gate.parked_in(Lane::Interactive), gate.parked_in(Lane::Bulk)), (2, 2));
    let error = gate.admit(demand(0), None).await.unwrap_err();
    assert!(error.to_string().contains("2 interactive calls are already waiting"), "{error}");
    let AdmissionError::QueueFull { lane, retry_after, .. } = error else { panic!("{error:?}") };
    assert_eq!((lane, retry_after), (Lane::Interactive, Duration::from_secs(3)));
    assert_eq!(Instant::now(), started, "both refused without waiting");
    for task in parked {
        task.await.unwrap().unwrap();
    }
    assert_eq!(gate.parked(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_share_of_zero_lets_bulk_use_everything_as_before() {
    let gate = gate(limits(Some(10), None), Some(3), None, InteractiveShare::NONE);
    let start = Instant::now();
    let mut held = Vec::new();
    for _ in 0..3 {
        held.push(gate.admit_in(demand(0), None, Lane::Bulk).await.unwrap());
    }
    assert_eq!(gate.in_flight(), 3, "no permit is reserved");
    for mut grant in held {
        grant.mark_sent();
    }
    for _ in 0..7 {
        gate.admit_in(demand(0), None, Lane::Bulk).await.unwrap().mark_sent();
    }
    assert_eq!(Instant::now(), start, "the whole budget at once");
    gate.admit_in(demand(0), None, Lane::Bulk).await.unwrap().mark_sent();
    assert_eq!(Instant::now() - start, Duration::from_secs(6), "one request per 6 s refills");

    // A rolled-back interactive grant wakes the bulk head when nothing
    // interactive is parked.
    let interactive = gate.admit(demand(0), Some(start + Duration::from_secs(60))).await.unwrap();
    let bulk = tokio::spawn({
        let gate = Arc::clone(&gate);
        async move { gate.admit_in(demand(0), None, Lane::Bulk).await.map(|_| Instant::now()) }
    });
    settle().await;
    assert_eq!(gate.parked_in(Lane::Bulk), 1);
    let rolled_back_at = Instant::now();
    drop(interactive);
    assert_eq!(bulk.await.unwrap().unwrap(), rolled_back_at, "granted the moment the request slot came back");
}

/// An in-process account whose every answer arrives after a yield, as a shared
/// store's would: other tasks run while a take is on its way.
#[derive(Debug)]
struct Remote(InProcessAccount);

impl RateAccount for Remote {
    fn try_take_reserving(&self, demand: Demand, share: InteractiveShare) -> BoxFuture<'_, Verdict> {
        Box::pin(async move {
            tokio::task::yield_now().await;
            self.0.try_take_reserving(demand, share).await
        })
    }
    fn forecast_reserving(&self, demand: Demand, share: InteractiveShare) -> BoxFuture<'_, Instant> {
        Box::pin(async move {
            tokio::task::yield_now().await;
            self.0.forecast_reserving(demand, share).await
        })
    }
    fn give(&self, demand: Demand) -> BoxFuture<'_, ()> {
        self.0.give(demand)
    }
    fn feedback(&self, signal: Feedback) -> BoxFuture<'_, ()> {
        self.0.feedback(signal)
    }
    fn coefficient(&self) -> BoxFuture<'_, f64> {
        self.0.coefficient()
    }
}

#[tokio::test(start_paused = true)]
async fn an_interactive_call_parked_behind_a_bulk_heads_try_is_woken_when_the_try_fails() {
    let account = Arc::new(Remote(InProcessAccount::new(limits(None, Some(100)), Instant::now())));
    let gate = ModelGate::new("m", account as Arc<dyn RateAccount>, Some(1), None);
    gate.admit(demand(60), None).await.unwrap().mark_sent();
    let start = Instant::now();
    // 40 tokens left: the bulk head (50) parks with a timer at 6 s.
    let bulk = tokio::spawn({
        let gate = Arc::clone(&gate);
        async move { gate.admit_in(demand(50), None, Lane::Bulk).await.map(|_| Instant::now()) }
    });
    settle().await;
    assert_eq!(gate.parked_in(Lane::Bulk), 1);
    // Woken early, the head takes the one permit and asks the account; while
    // the answer is on its way an interactive call finds no permit and parks.
    gate.wake_head();
    tokio::task::yield_now().await;
    assert_eq!(gate.in_flight(), 1, "the bulk head's tentative permit");
    // Unwoken, it and the bulk head would both sleep without a timer for ever:
    // the timeout turns that into a failure.
    let interactive = tokio::time::timeout(Duration::from_secs(60), gate.admit(demand(10), None)).await;
    interactive.expect("the interactive call was never woken").unwrap().mark_sent();
    assert_eq!(Instant::now(), start, "woken the moment the bulk head gave the permit back");
    // 30 tokens left: twenty more for the bulk head take 12 s.
    assert_eq!(bulk.await.unwrap().unwrap() - start, Duration::from_secs(12));
}

#[tokio::test(start_paused = true)]
async fn every_gate_of_the_catalog_reserves_its_models_share() {
    let text = "[[model]]\nid = \"m\"\nprovider = \"openai\"\nmax_output_tokens = 100\ncontext_window = 1000\n\
                rpm = 10\nmax_concurrency = 4\n";
    let config = crate::catalog::Config::from_toml(text, "t.toml").unwrap();
    let catalog = crate::catalog::Catalog::resolve(&config, &mut crate::plugin::ProviderRegistry::default()).unwrap();
    assert_eq!(catalog.get("m").unwrap().interactive_share, 0.5);
    let admission = Admission::new(&catalog, &InProcessStore);
    let gate = admission.gate("m").unwrap();
    assert_eq!(gate.interactive_share(), InteractiveShare::DEFAULT);
    // Four permits, two reserved: a third bulk call parks while an interactive one goes.
    let held = [gate.admit_in(demand(0), None, Lane::Bulk).await.unwrap(), gate.admit(demand(0), None).await.unwrap()];
    let bulk = tokio::spawn({
        let gate = Arc::clone(gate);
        async move { gate.admit_in(demand(0), None, Lane::Bulk).await.map(drop) }
    });
    settle().await;
    assert_eq!(gate.parked_in(Lane::Bulk), 1, "two in flight leave only the two reserved permits");
    drop(held);
    bulk.await.unwrap().unwrap();
}
