//! Admission for one model: the whole demand — a request slot, the tokens and a
//! concurrency permit — is granted at once, or the call parks holding nothing.
//!
//! Parked calls form two FIFO queues, one per [`Lane`]. The interactive head is
//! served before any bulk waiter: a bulk head may try only while no interactive
//! call is parked, and an interactive arrival checks only the interactive queue,
//! so it takes free capacity at once however many bulk calls are parked. Bulk
//! grants also leave the interactive share of every axis behind (the account
//! enforces the bucket part inside its atomic take; the gate keeps
//! `ceil(share × max_concurrency)` permits out of bulk's reach), so a reindex
//! can neither queue ahead of interactive calls nor drain what they need.
//!
//! Only a lane's head watches a timer (until the account's earliest fit, or
//! until a permit is released), and a bulk head only while it is its turn: at
//! most two timers per gate. Every other parked call sleeps on its own
//! notification, so ten thousand parked calls are ten thousand small queue
//! entries, not ten thousand timers, threads or spinning loops. A head keeping
//! its place is its reservation: capacity that accumulates goes to it first, so
//! a large demand is never starved by smaller ones of its lane queued behind it.
//!
//! Each queue is bounded by `max_queue` on its own: a call that would park
//! beyond it is refused at once with an estimate of when to come back, holding
//! nothing and having sent nothing, so a flood of callers cannot grow memory or
//! latency without bound — and a flood of bulk calls cannot get interactive
//! calls refused.
//!
//! A [`Grant`] that is dropped before [`Grant::mark_sent`] gives its tokens and
//! request slot back (the call never happened); after it, they are spent and
//! refill with time. Either way the permit returns when the grant is dropped.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::Notify;
use tokio::time::{Duration, Instant};

use super::Lane;
use super::lane::InteractiveShare;
use super::store::{Axis, Demand, Lease, PermitPool, PermitVerdict, RateAccount, Shortfall, Verdict};
use crate::failure::Category;

/// How often a lane's head asks again for a permit the whole fleet holds: a
/// release in another gateway cannot wake it.
const SHARED_PERMIT_POLL: Duration = Duration::from_millis(50);

/// Why a call was not admitted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AdmissionError {
    #[error("model `{model}`: {shortfall}, so it can never be admitted")]
    NeverFits { model: String, shortfall: Shortfall },
    #[error("model `{model}`: capacity frees up in {wait:?}, after the caller's deadline")]
    DeadlineBeforeFit { model: String, wait: Duration },
    #[error("model `{model}`: the caller's deadline passed while waiting for capacity")]
    DeadlinePassed { model: String },
    #[error(
        "model `{model}`: {max_queue} {lane} calls are already waiting for capacity; retry in {} s",
        retry_after.as_secs()
    )]
    QueueFull { model: String, lane: Lane, max_queue: u32, retry_after: Duration },
    /// The fleet's shared limits cannot be read, and the declared policy is to
    /// refuse rather than risk overspending them.
    #[error("model `{model}`: the fleet's shared limits are unreachable, and the policy is to refuse")]
    SharedStateUnavailable { model: String },
}

impl AdmissionError {
    /// The category a caller sees (the call's error answers the same).
    pub fn category(&self) -> Category {
        match self {
            Self::NeverFits { .. } => Category::CapacityExceeded,
            Self::DeadlineBeforeFit { .. } | Self::DeadlinePassed { .. } => Category::Timeout,
            // The gateway's own queue for this model is full: the same advice
            // as an upstream overload (come back later), with a `retry-after`.
            Self::QueueFull { .. } => Category::Overloaded,
            Self::SharedStateUnavailable { .. } => Category::SharedStateUnavailable,
        }
    }
}

/// One model's admission queues.
pub struct ModelGate {
    model: String,
    account: Arc<dyn RateAccount>,
    max_concurrency: Option<u32>,
    /// Calls that may park at once in each lane; `None` is unbounded.
    max_queue: Option<u32>,
    /// What a bulk grant leaves of each bucket (enforced by the account).
    share: InteractiveShare,
    /// Permits a bulk call may not take: `ceil(share × max_concurrency)`.
    reserved_permits: u32,
    /// The fleet's permits, when a shared store holds them: a grant holds a
    /// lease on one besides this gateway's own count.
    shared_permits: Option<Arc<dyn PermitPool>>,
    state: Mutex<GateState>,
}

impl std::fmt::Debug for ModelGate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModelGate").field("model", &self.model).finish_non_exhaustive()
    }
}

#[derive(Default)]
struct GateState {
    in_flight: u32,
    interactive: VecDeque<Arc<Waiter>>,
    bulk: VecDeque<Arc<Waiter>>,
    next_id: u64,
}

impl GateState {
    fn queue(&self, lane: Lane) -> &VecDeque<Arc<Waiter>> {
        match lane {
            Lane::Interactive => &self.interactive,
            Lane::Bulk => &self.bulk,
        }
    }

    fn queue_mut(&mut self, lane: Lane) -> &mut VecDeque<Arc<Waiter>> {
        match lane {
            Lane::Interactive => &mut self.interactive,
            Lane::Bulk => &mut self.bulk,
        }
    }

    /// Whether a new arrival in `lane` may try at once: nobody it must let go
    /// first is parked (for interactive, no interactive call; for bulk, nobody).
    fn open_to_arrival(&self, lane: Lane) -> bool {
        match lane {
            Lane::Interactive => self.interactive.is_empty(),
            Lane::Bulk => self.interactive.is_empty() && self.bulk.is_empty(),
        }
    }

    /// Whether `waiter` may try now: it heads its lane, and for bulk no
    /// interactive call is parked.
    fn is_turn(&self, waiter: &Waiter) -> bool {
        let heads = |queue: &VecDeque<Arc<Waiter>>| queue.front().is_some_and(|head| head.id == waiter.id);
        match waiter.lane {
            Lane::Interactive => heads(&self.interactive),
            Lane::Bulk => self.interactive.is_empty() && heads(&self.bulk),
        }
    }
}

/// A parked call's place in its lane.
struct Waiter {
    id: u64,
    lane: Lane,
    demand: Demand,
    wake: Notify,
}

impl ModelGate {
    /// A gate whose bulk calls have no reserve to respect (they still queue
    /// behind interactive ones): for budgets that are not split between lanes,
    /// such as a caller key's.
    pub fn new(
        model: impl Into<String>,
        account: Arc<dyn RateAccount>,
        max_concurrency: Option<u32>,
        max_queue: Option<u32>,
    ) -> Arc<Self> {
        Self::with_interactive_share(model, account, max_concurrency, max_queue, InteractiveShare::NONE)
    }

    /// A gate whose bulk calls leave `share` of every capacity axis to interactive ones.
    pub fn with_interactive_share(
        model: impl Into<String>,
        account: Arc<dyn RateAccount>,
        max_concurrency: Option<u32>,
        max_queue: Option<u32>,
        share: InteractiveShare,
    ) -> Arc<Self> {
        Self::with_permits(model, account, max_concurrency, max_queue, share, None)
    }

    /// [`Self::with_interactive_share`] whose `max_concurrency` permits are
    /// held fleet-wide in `shared_permits` (when given) as well as counted here.
    pub fn with_permits(
        model: impl Into<String>,
        account: Arc<dyn RateAccount>,
        max_concurrency: Option<u32>,
        max_queue: Option<u32>,
        share: InteractiveShare,
        shared_permits: Option<Arc<dyn PermitPool>>,
    ) -> Arc<Self> {
        let reserved_permits = max_concurrency.map_or(0, |max| share.permits_of(max));
        let state = Mutex::new(GateState::default());
        let model = model.into();
        Arc::new(Self { model, account, max_concurrency, max_queue, share, reserved_permits, shared_permits, state })
    }

    pub fn account(&self) -> &Arc<dyn RateAccount> {
        &self.account
    }

    pub fn interactive_share(&self) -> InteractiveShare {
        self.share
    }

    /// Calls currently holding a permit.
    pub fn in_flight(&self) -> u32 {
        self.with(|state| state.in_flight)
    }

    /// Calls currently parked, both lanes.
    pub fn parked(&self) -> usize {
        self.with(|state| state.interactive.len() + state.bulk.len())
    }

    /// Calls currently parked in `lane`.
    pub fn parked_in(&self, lane: Lane) -> usize {
        self.with(|state| state.queue(lane).len())
    }

    /// [`Self::admit_in`] the interactive lane (every chat call is interactive).
    pub async fn admit(self: &Arc<Self>, demand: Demand, deadline: Option<Instant>) -> Result<Grant, AdmissionError> {
        self.admit_in(demand, deadline, Lane::Interactive).await
    }

    /// Grants the whole demand, parking in `lane` until it fits. A `deadline`
    /// before the earliest possible fit fails at once rather than waiting to
    /// find out, and so does a full queue.
    pub async fn admit_in(
        self: &Arc<Self>,
        demand: Demand,
        deadline: Option<Instant>,
        lane: Lane,
    ) -> Result<Grant, AdmissionError> {
        if lane == Lane::Bulk
            && let Some(shortfall) = self.bulk_permit_shortfall()
        {
            return Err(self.never(shortfall));
        }
        if let Some(result) = self.try_immediately(demand, lane).await {
            return result;
        }
        match self.park(demand, lane) {
            Some(parked) => parked.await_turn(deadline).await,
            None => Err(self.queue_full(demand, lane).await),
        }
    }

    /// The fast path: nobody the call must let go first is queued, a permit is
    /// free, the account grants now.
    async fn try_immediately(self: &Arc<Self>, demand: Demand, lane: Lane) -> Option<Result<Grant, AdmissionError>> {
        if !self.with(|state| state.open_to_arrival(lane) && self.take_permit(state, lane)) {
            return None;
        }
        let (verdict, lease) = self.take(demand, lane).await;
        match verdict {
            Verdict::Granted => Some(Ok(Grant::new(Arc::clone(self), demand, lease))),
            Verdict::NotBefore(_) => {
                self.release_permit();
                None
            }
            Verdict::Never(shortfall) => {
                self.release_permit();
                Some(Err(self.never(shortfall)))
            }
            Verdict::Unavailable => {
                self.release_permit();
                Some(Err(self.unavailable()))
            }
        }
    }

    /// The whole demand from the account and, when the fleet holds the
    /// permits, a lease on one: both or neither (a lease taken for a demand
    /// the buckets refuse is released at once). A fleet whose permits are all
    /// held answers a short wait.
    async fn take(&self, demand: Demand, lane: Lane) -> (Verdict, Option<Lease>) {
        let lease = match (&self.shared_permits, self.max_concurrency) {
            (Some(pool), Some(max)) => match pool.acquire(self.open_permits(lane, max)).await {
                PermitVerdict::Acquired(lease) => Some(lease),
                PermitVerdict::Full => return (Verdict::NotBefore(Instant::now() + SHARED_PERMIT_POLL), None),
                PermitVerdict::Unavailable => return (Verdict::Unavailable, None),
            },
            _ => None,
        };
        let verdict = self.account.try_take_reserving(demand, self.share_for(lane)).await;
        match (verdict, lease) {
            (Verdict::Granted, lease) => (Verdict::Granted, lease),
            (verdict, Some(lease)) => {
                self.release_lease(lease);
                (verdict, None)
            }
            (verdict, None) => (verdict, None),
        }
    }

    /// Returns a lease to the fleet's pool: in place when the pool keeps it in
    /// memory, else as its own task (the pool is remote).
    fn release_lease(&self, lease: Lease) {
        let Some(pool) = self.shared_permits.clone() else { return };
        let Err(lease) = pool.release_in_place(lease) else { return };
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move { pool.release(lease).await });
        } else {
            tracing::warn!(model = %self.model, "lease dropped outside a runtime; it returns when it expires");
        }
    }

    /// Permits `lane` may hold of `max`: bulk leaves the reserved ones.
    fn open_permits(&self, lane: Lane, max: u32) -> u32 {
        match lane {
            Lane::Interactive => max,
            Lane::Bulk => max.saturating_sub(self.reserved_permits),
        }
    }

    /// Joins `lane`'s queue, unless it is full (checked and joined under one lock).
    fn park(self: &Arc<Self>, demand: Demand, lane: Lane) -> Option<Parked> {
        let waiter = self.with(|state| {
            if self.max_queue.is_some_and(|max| state.queue(lane).len() >= max as usize) {
                return None;
            }
            let waiter = Arc::new(Waiter { id: state.next_id, lane, demand, wake: Notify::new() });
            state.next_id += 1;
            state.queue_mut(lane).push_back(Arc::clone(&waiter));
            Some(waiter)
        })?;
        Some(Parked { gate: Arc::clone(self), waiter })
    }

    /// The refusal of a call its lane's full queue cannot take. Its
    /// `retry_after` is the wait until the account could supply everything
    /// queued in that lane plus this call at the current throttle (for bulk,
    /// with the interactive share still left), in whole seconds and at least one
    /// (a queue held up by concurrency alone forecasts no wait: one second is
    /// the small constant then).
    async fn queue_full(&self, demand: Demand, lane: Lane) -> AdmissionError {
        let queued = self.with(|state| state.queue(lane).iter().fold(demand, |total, waiter| total + waiter.demand));
        let at = self.account.forecast_reserving(queued, self.share_for(lane)).await;
        let wait = at.saturating_duration_since(Instant::now());
        let seconds = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
        let retry_after = Duration::from_secs(seconds.max(1));
        let max_queue = self.max_queue.unwrap_or(u32::MAX);
        tracing::warn!(model = %self.model, %lane, max_queue, ?retry_after, "admission queue full; call refused");
        AdmissionError::QueueFull { model: self.model.clone(), lane, max_queue, retry_after }
    }

    fn with<T>(&self, f: impl FnOnce(&mut GateState) -> T) -> T {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        f(&mut state)
    }

    /// What `lane` must leave of each bucket.
    fn share_for(&self, lane: Lane) -> InteractiveShare {
        match lane {
            Lane::Interactive => InteractiveShare::NONE,
            Lane::Bulk => self.share,
        }
    }

    /// Takes a permit if `lane` may have one: interactive up to
    /// `max_concurrency`, bulk only while the reserved permits stay free.
    fn take_permit(&self, state: &mut GateState, lane: Lane) -> bool {
        let Some(max) = self.max_concurrency else {
            state.in_flight += 1;
            return true;
        };
        if state.in_flight >= self.open_permits(lane, max) {
            return false;
        }
        state.in_flight += 1;
        true
    }

    /// A bulk call can never hold a permit when the reserve is every permit.
    fn bulk_permit_shortfall(&self) -> Option<Shortfall> {
        let max = self.max_concurrency?;
        (self.reserved_permits >= max).then_some(Shortfall {
            axis: Axis::ConcurrentCalls,
            demand: 1,
            limit: u64::from(max),
            reserved: u64::from(self.reserved_permits),
        })
    }

    /// Returns a permit and wakes whoever's turn it is, who may have been waiting for it.
    fn release_permit(&self) {
        self.with(|state| {
            state.in_flight = state.in_flight.saturating_sub(1);
            wake_turn(state);
        });
    }

    /// Wakes the head whose turn it is (the interactive head, else the bulk
    /// head): capacity came back (a rollback, a throttle change).
    pub fn wake_head(&self) {
        self.with(wake_turn);
    }

    fn never(&self, shortfall: Shortfall) -> AdmissionError {
        AdmissionError::NeverFits { model: self.model.clone(), shortfall }
    }

    fn unavailable(&self) -> AdmissionError {
        AdmissionError::SharedStateUnavailable { model: self.model.clone() }
    }

    fn deadline_before_fit(&self, at: Instant) -> AdmissionError {
        let wait = at.saturating_duration_since(Instant::now());
        AdmissionError::DeadlineBeforeFit { model: self.model.clone(), wait }
    }
}

/// Wakes the interactive head, or the bulk head when no interactive call is parked.
fn wake_turn(state: &mut GateState) {
    if let Some(head) = state.interactive.front().or_else(|| state.bulk.front()) {
        head.wake.notify_one();
    }
}

/// A call in a queue. Dropping it (the caller gave up) leaves the queue and
/// hands the head's place on.
struct Parked {
    gate: Arc<ModelGate>,
    waiter: Arc<Waiter>,
}

impl Parked {
    async fn await_turn(self, deadline: Option<Instant>) -> Result<Grant, AdmissionError> {
        if let Some(deadline) = deadline {
            self.fail_fast(deadline).await?;
        }
        let lane = self.waiter.lane;
        loop {
            if !self.gate.with(|state| state.is_turn(&self.waiter) && self.gate.take_permit(state, lane)) {
                self.sleep(None, deadline).await?;
                continue;
            }
            let (verdict, lease) = self.gate.take(self.waiter.demand, lane).await;
            match verdict {
                Verdict::Granted => return Ok(self.into_grant(lease)),
                Verdict::NotBefore(at) => {
                    self.return_tentative_permit();
                    if deadline.is_some_and(|deadline| at > deadline) {
                        return Err(self.gate.deadline_before_fit(at));
                    }
                    self.sleep(Some(at), deadline).await?;
                }
                Verdict::Never(shortfall) => {
                    self.return_tentative_permit();
                    return Err(self.gate.never(shortfall));
                }
                Verdict::Unavailable => {
                    self.return_tentative_permit();
                    return Err(self.gate.unavailable());
                }
            }
        }
    }

    /// Gives back the permit taken for a try that did not succeed. Nobody of
    /// this call's lane waits on it (only the head tries), and waking ourselves
    /// would spin; but while a bulk head held it, an interactive arrival may
    /// have found no permit and parked, so that head is woken.
    fn return_tentative_permit(&self) {
        self.gate.with(|state| {
            state.in_flight = state.in_flight.saturating_sub(1);
            if self.waiter.lane == Lane::Bulk
                && let Some(head) = state.interactive.front()
            {
                head.wake.notify_one();
            }
        });
    }

    /// Everything queued in this call's lane up to and including it must be
    /// supplied before it can go (for bulk, with the interactive share still
    /// left): if even that cannot happen by the deadline, say so now. Parked
    /// interactive calls are not counted against a bulk call: they may leave
    /// on their short deadlines, and the forecast must stay a lower bound.
    async fn fail_fast(&self, deadline: Instant) -> Result<(), AdmissionError> {
        let lane = self.waiter.lane;
        let through = self.gate.with(|state| {
            state
                .queue(lane)
                .iter()
                .take_while(|w| w.id != self.waiter.id)
                .fold(self.waiter.demand, |total, w| total + w.demand)
        });
        let at = self.gate.account.forecast_reserving(through, self.gate.share_for(lane)).await;
        if at > deadline { Err(self.gate.deadline_before_fit(at)) } else { Ok(()) }
    }

    /// Sleeps until woken, until `until` (the head's earliest fit), or until the
    /// caller's deadline, which ends the wait with an error.
    async fn sleep(&self, until: Option<Instant>, deadline: Option<Instant>) -> Result<(), AdmissionError> {
        let timer = match (until, deadline) {
            (Some(until), Some(deadline)) => Some((until.min(deadline), until >= deadline)),
            (Some(until), None) => Some((until, false)),
            (None, Some(deadline)) => Some((deadline, true)),
            (None, None) => None,
        };
        match timer {
            None => {
                self.waiter.wake.notified().await;
                Ok(())
            }
            Some((at, is_deadline)) => {
                tokio::select! {
                    () = self.waiter.wake.notified() => Ok(()),
                    () = tokio::time::sleep_until(at) => {
                        if is_deadline {
                            Err(AdmissionError::DeadlinePassed { model: self.gate.model.clone() })
                        } else {
                            Ok(())
                        }
                    }
                }
            }
        }
    }

    /// Leaves the queue holding the grant; the next call becomes the head.
    fn into_grant(self, lease: Option<Lease>) -> Grant {
        let gate = Arc::clone(&self.gate);
        let demand = self.waiter.demand;
        drop(self);
        Grant::new(gate, demand, lease)
    }
}

impl Drop for Parked {
    fn drop(&mut self) {
        let lane = self.waiter.lane;
        self.gate.with(|state| {
            // Usually the head leaving with its grant: O(1). A cancelled call
            // elsewhere in the queue is found by its id.
            let queue = state.queue_mut(lane);
            if queue.front().is_some_and(|head| head.id == self.waiter.id) {
                queue.pop_front();
                // A bulk head leaving changes nothing for a parked interactive
                // call; it is the next bulk head's turn only if none is parked.
                if lane == Lane::Interactive || state.interactive.is_empty() {
                    wake_turn(state);
                }
            } else if let Some(position) = queue.iter().position(|w| w.id == self.waiter.id) {
                queue.remove(position);
            }
        });
    }
}

/// The whole demand, held. See the module docs for what dropping it returns.
pub struct Grant {
    gate: Arc<ModelGate>,
    demand: Demand,
    sent: bool,
    /// The fleet-wide permit, when the gate's permits are shared.
    lease: Option<Lease>,
    /// A grant taken for the same call from another gate (the caller key's),
    /// sent and rolled back with this one.
    companion: Option<Box<Grant>>,
}

impl std::fmt::Debug for Grant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Grant").field("demand", &self.demand).field("sent", &self.sent).finish()
    }
}

impl Grant {
    fn new(gate: Arc<ModelGate>, demand: Demand, lease: Option<Lease>) -> Self {
        Self { gate, demand, sent: false, lease, companion: None }
    }

    /// Ties `companion` (a grant of the same call from another gate) to this one.
    pub fn with_companion(mut self, companion: Option<Grant>) -> Self {
        self.companion = companion.map(Box::new);
        self
    }

    pub fn demand(&self) -> Demand {
        self.demand
    }

    /// The request is leaving the process: its tokens are spent from now on.
    pub fn mark_sent(&mut self) {
        self.sent = true;
        if let Some(companion) = &mut self.companion {
            companion.mark_sent();
        }
    }

    /// Gives an unsent grant back now, and waits until the account has it.
    pub async fn rollback(mut self) {
        if let Some(companion) = self.companion.take() {
            Box::pin(companion.rollback()).await;
        }
        if !self.sent {
            self.sent = true;
            self.gate.account.give(self.demand).await;
        }
    }
}

impl Drop for Grant {
    fn drop(&mut self) {
        if !self.sent {
            // Dropped unsent (cancelled before sending): give everything back. The
            // account may be remote, so the give runs as its own task.
            let gate = Arc::clone(&self.gate);
            let demand = self.demand;
            if let Ok(runtime) = tokio::runtime::Handle::try_current() {
                runtime.spawn(async move {
                    gate.account.give(demand).await;
                    gate.wake_head();
                });
            } else {
                tracing::warn!(model = %self.gate.model, "grant dropped outside a runtime; its tokens refill with time");
            }
        }
        if let Some(lease) = self.lease.take() {
            self.gate.release_lease(lease);
        }
        self.gate.release_permit();
    }
}
