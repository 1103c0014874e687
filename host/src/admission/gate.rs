//! Admission for one model: the whole demand — a request slot, the tokens and a
//! concurrency permit — is granted at once, or the call parks holding nothing.
//!
//! Parked calls form a FIFO queue. Only the head watches a timer (until the
//! account's earliest fit, or until a permit is released); every other parked
//! call sleeps on its own notification, so ten thousand parked calls are ten
//! thousand small queue entries, not ten thousand timers, threads or spinning
//! loops. The head keeping its place is its reservation: capacity that
//! accumulates goes to it first, so a large demand is never starved by small
//! ones queued behind it.
//!
//! The queue is bounded (`max_queue`): a call that would park beyond it is
//! refused at once with an estimate of when to come back, holding nothing and
//! having sent nothing, so a flood of callers cannot grow memory or latency
//! without bound.
//!
//! A [`Grant`] that is dropped before [`Grant::mark_sent`] gives its tokens and
//! request slot back (the call never happened); after it, they are spent and
//! refill with time. Either way the permit returns when the grant is dropped.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::Notify;
use tokio::time::{Duration, Instant};

use super::store::{Demand, RateAccount, Shortfall, Verdict};

/// Why a call was not admitted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AdmissionError {
    #[error(
        "model `{model}`: the call needs {} {} but the model's budget is {} per minute, so it can never be admitted",
        shortfall.demand, shortfall.axis, shortfall.limit
    )]
    NeverFits { model: String, shortfall: Shortfall },
    #[error("model `{model}`: capacity frees up in {wait:?}, after the caller's deadline")]
    DeadlineBeforeFit { model: String, wait: Duration },
    #[error("model `{model}`: the caller's deadline passed while waiting for capacity")]
    DeadlinePassed { model: String },
    #[error(
        "model `{model}`: {max_queue} calls are already waiting for capacity; retry in {} s",
        retry_after.as_secs()
    )]
    QueueFull { model: String, max_queue: u32, retry_after: Duration },
}

/// One model's admission queue.
pub struct ModelGate {
    model: String,
    account: Arc<dyn RateAccount>,
    max_concurrency: Option<u32>,
    /// Calls that may park at once; `None` is unbounded.
    max_queue: Option<u32>,
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
    queue: VecDeque<Arc<Waiter>>,
    next_id: u64,
}

/// A parked call's place in the queue.
struct Waiter {
    id: u64,
    demand: Demand,
    wake: Notify,
}

impl ModelGate {
    pub fn new(
        model: impl Into<String>,
        account: Arc<dyn RateAccount>,
        max_concurrency: Option<u32>,
        max_queue: Option<u32>,
    ) -> Arc<Self> {
        let state = Mutex::new(GateState::default());
        Arc::new(Self { model: model.into(), account, max_concurrency, max_queue, state })
    }

    pub fn account(&self) -> &Arc<dyn RateAccount> {
        &self.account
    }

    /// Calls currently holding a permit.
    pub fn in_flight(&self) -> u32 {
        self.with(|state| state.in_flight)
    }

    /// Calls currently parked.
    pub fn parked(&self) -> usize {
        self.with(|state| state.queue.len())
    }

    /// Grants the whole demand, parking until it fits. A `deadline` before the
    /// earliest possible fit fails at once rather than waiting to find out, and
    /// so does a full queue.
    pub async fn admit(self: &Arc<Self>, demand: Demand, deadline: Option<Instant>) -> Result<Grant, AdmissionError> {
        if let Some(result) = self.try_immediately(demand).await {
            return result;
        }
        match self.park(demand) {
            Some(parked) => parked.await_turn(deadline).await,
            None => Err(self.queue_full(demand).await),
        }
    }

    /// [`Self::admit`] in a lane.
    pub async fn admit_in(
        self: &Arc<Self>,
        demand: Demand,
        deadline: Option<Instant>,
        _lane: super::Lane,
    ) -> Result<Grant, AdmissionError> {
        self.admit(demand, deadline).await
    }

    /// The fast path: nobody is queued, a permit is free, the account grants now.
    async fn try_immediately(self: &Arc<Self>, demand: Demand) -> Option<Result<Grant, AdmissionError>> {
        if !self.with(|state| state.queue.is_empty() && self.take_permit(state)) {
            return None;
        }
        match self.account.try_take(demand).await {
            Verdict::Granted => Some(Ok(Grant::new(Arc::clone(self), demand))),
            Verdict::NotBefore(_) => {
                self.release_permit();
                None
            }
            Verdict::Never(shortfall) => {
                self.release_permit();
                Some(Err(self.never(shortfall)))
            }
        }
    }

    /// Joins the queue, unless it is full (checked and joined under one lock).
    fn park(self: &Arc<Self>, demand: Demand) -> Option<Parked> {
        let waiter = self.with(|state| {
            if self.max_queue.is_some_and(|max| state.queue.len() >= max as usize) {
                return None;
            }
            let waiter = Arc::new(Waiter { id: state.next_id, demand, wake: Notify::new() });
            state.next_id += 1;
            state.queue.push_back(Arc::clone(&waiter));
            Some(waiter)
        })?;
        Some(Parked { gate: Arc::clone(self), waiter })
    }

    /// The refusal of a call the full queue cannot take. Its `retry_after` is the
    /// wait until the account could supply everything queued plus this call at
    /// the current throttle, in whole seconds and at least one (a queue held up
    /// by concurrency alone forecasts no wait: one second is the small constant
    /// then).
    async fn queue_full(&self, demand: Demand) -> AdmissionError {
        let queued = self.with(|state| state.queue.iter().fold(demand, |total, waiter| total + waiter.demand));
        let wait = self.account.forecast(queued).await.saturating_duration_since(Instant::now());
        let seconds = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
        let retry_after = Duration::from_secs(seconds.max(1));
        let max_queue = self.max_queue.unwrap_or(u32::MAX);
        tracing::warn!(model = %self.model, max_queue, ?retry_after, "admission queue full; call refused");
        AdmissionError::QueueFull { model: self.model.clone(), max_queue, retry_after }
    }

    fn with<T>(&self, f: impl FnOnce(&mut GateState) -> T) -> T {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        f(&mut state)
    }

    fn take_permit(&self, state: &mut GateState) -> bool {
        if self.max_concurrency.is_some_and(|max| state.in_flight >= max) {
            return false;
        }
        state.in_flight += 1;
        true
    }

    /// Returns a permit and wakes the head, which may have been waiting for it.
    fn release_permit(&self) {
        self.with(|state| {
            state.in_flight = state.in_flight.saturating_sub(1);
            wake_head(state);
        });
    }

    /// Wakes the head: capacity came back (a rollback, a throttle change).
    pub fn wake_head(&self) {
        self.with(wake_head);
    }

    fn never(&self, shortfall: Shortfall) -> AdmissionError {
        AdmissionError::NeverFits { model: self.model.clone(), shortfall }
    }

    fn deadline_before_fit(&self, at: Instant) -> AdmissionError {
        let wait = at.saturating_duration_since(Instant::now());
        AdmissionError::DeadlineBeforeFit { model: self.model.clone(), wait }
    }
}

fn wake_head(state: &mut GateState) {
    if let Some(head) = state.queue.front() {
        head.wake.notify_one();
    }
}

/// A call in the queue. Dropping it (the caller gave up) leaves the queue and
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
        loop {
            if !self.is_head() || !self.gate.with(|state| self.gate.take_permit(state)) {
                self.sleep(None, deadline).await?;
                continue;
            }
            match self.gate.account.try_take(self.waiter.demand).await {
                Verdict::Granted => return Ok(self.into_grant()),
                Verdict::NotBefore(at) => {
                    // Our own tentative permit: nobody else waits on it.
                    self.gate.with(|state| state.in_flight = state.in_flight.saturating_sub(1));
                    if deadline.is_some_and(|deadline| at > deadline) {
                        return Err(self.gate.deadline_before_fit(at));
                    }
                    self.sleep(Some(at), deadline).await?;
                }
                Verdict::Never(shortfall) => {
                    self.gate.with(|state| state.in_flight = state.in_flight.saturating_sub(1));
                    return Err(self.gate.never(shortfall));
                }
            }
        }
    }

    /// Everything queued up to and including this call must be supplied before
    /// it can go: if even that cannot happen by the deadline, say so now.
    async fn fail_fast(&self, deadline: Instant) -> Result<(), AdmissionError> {
        let through = self.gate.with(|state| {
            state
                .queue
                .iter()
                .take_while(|w| w.id != self.waiter.id)
                .fold(self.waiter.demand, |total, w| total + w.demand)
        });
        let at = self.gate.account.forecast(through).await;
        if at > deadline { Err(self.gate.deadline_before_fit(at)) } else { Ok(()) }
    }

    fn is_head(&self) -> bool {
        self.gate.with(|state| state.queue.front().is_some_and(|head| head.id == self.waiter.id))
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
    fn into_grant(self) -> Grant {
        let gate = Arc::clone(&self.gate);
        let demand = self.waiter.demand;
        drop(self);
        Grant::new(gate, demand)
    }
}

impl Drop for Parked {
    fn drop(&mut self) {
        self.gate.with(|state| {
            // Usually the head leaving with its grant: O(1). A cancelled call
            // elsewhere in the queue is found by its id.
            if state.queue.front().is_some_and(|head| head.id == self.waiter.id) {
                state.queue.pop_front();
                wake_head(state);
            } else if let Some(position) = state.queue.iter().position(|w| w.id == self.waiter.id) {
                state.queue.remove(position);
            }
        });
    }
}

/// The whole demand, held. See the module docs for what dropping it returns.
pub struct Grant {
    gate: Arc<ModelGate>,
    demand: Demand,
    sent: bool,
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
    fn new(gate: Arc<ModelGate>, demand: Demand) -> Self {
        Self { gate, demand, sent: false, companion: None }
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
        self.gate.release_permit();
    }
}
