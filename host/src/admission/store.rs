//! Where bucket levels and throttle coefficients live, behind a small trait: the
//! in-process store is the embedded default; a shared store (Redis, with the same
//! arithmetic in an atomic script) implements the same trait so several gateway
//! instances share one budget. The queue, the parking and the concurrency permits
//! stay local to each process: only the levels are shared.

use std::fmt::Debug;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::time::Instant;

use super::bucket::Bucket;
use super::throttle::Throttle;

pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// What one call asks of a model's budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Demand {
    pub requests: u64,
    pub tokens: u64,
}

impl std::ops::Add for Demand {
    type Output = Demand;
    fn add(self, other: Demand) -> Demand {
        Demand { requests: self.requests + other.requests, tokens: self.tokens + other.tokens }
    }
}

/// A model's per-minute budgets; `None` is unlimited on that axis.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Limits {
    pub rpm: Option<u64>,
    pub tpm: Option<u64>,
}

/// A demand larger than a budget can ever hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shortfall {
    /// `requests` or `tokens`.
    pub axis: &'static str,
    pub demand: u64,
    pub limit: u64,
}

/// The answer to "may this demand go now?".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Granted,
    /// Not before this instant (the exact moment the shortfall closes at the
    /// current throttle).
    NotBefore(Instant),
    Never(Shortfall),
}

/// An upstream's verdict, fed to the throttle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Feedback {
    /// A slow-down signal of this weight (429: 1, overload: 3).
    Backpressure(u32),
    Success,
}

/// Creates the account of each model.
pub trait RateStore: Send + Sync + Debug {
    fn account(&self, key: &str, limits: Limits) -> Arc<dyn RateAccount>;
}

/// One model's buckets and throttle. Every operation is atomic on its own.
pub trait RateAccount: Send + Sync + Debug {
    /// Takes the whole demand if it fits now (both axes or neither).
    fn try_take(&self, demand: Demand) -> BoxFuture<'_, Verdict>;
    /// When a total of `demand` could be supplied, counting refill past the
    /// capacity: a lower bound for a caller queued behind others.
    fn forecast(&self, demand: Demand) -> BoxFuture<'_, Instant>;
    /// Returns a demand whose call never happened.
    fn give(&self, demand: Demand) -> BoxFuture<'_, ()>;
    fn feedback(&self, signal: Feedback) -> BoxFuture<'_, ()>;
    fn coefficient(&self) -> BoxFuture<'_, f64>;
}

/// Accounts in this process's memory.
#[derive(Debug, Default, Clone, Copy)]
pub struct InProcessStore;

impl RateStore for InProcessStore {
    fn account(&self, _key: &str, limits: Limits) -> Arc<dyn RateAccount> {
        Arc::new(InProcessAccount::new(limits, Instant::now()))
    }
}

/// One model's levels under a mutex (held only for arithmetic, never across an await).
#[derive(Debug)]
pub struct InProcessAccount {
    state: Mutex<AccountState>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccountState {
    pub requests: Option<Bucket>,
    pub tokens: Option<Bucket>,
    pub throttle: Throttle,
}

impl InProcessAccount {
    pub fn new(limits: Limits, now: Instant) -> Self {
        let state = AccountState {
            requests: limits.rpm.map(|rpm| Bucket::per_minute(rpm, now)),
            tokens: limits.tpm.map(|tpm| Bucket::per_minute(tpm, now)),
            throttle: Throttle::default(),
        };
        Self { state: Mutex::new(state) }
    }

    fn with<T>(&self, f: impl FnOnce(&mut AccountState) -> T) -> T {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        f(&mut state)
    }

    /// The state, for tests and invariants.
    pub fn snapshot(&self) -> AccountState {
        self.with(|state| state.clone())
    }
}

impl AccountState {
    /// Both axes or neither, decided at `now`.
    pub fn try_take(&mut self, demand: Demand, now: Instant) -> Verdict {
        let stretch = self.throttle.stretch_tenths();
        let axes = [(&self.requests, demand.requests, "requests"), (&self.tokens, demand.tokens, "tokens")];
        let mut not_before = now;
        for (bucket, amount, axis) in axes {
            let Some(bucket) = bucket else { continue };
            match bucket.earliest_fit(amount, now, stretch) {
                None => {
                    return Verdict::Never(Shortfall { axis, demand: amount, limit: bucket.capacity() });
                }
                Some(at) => not_before = not_before.max(at),
            }
        }
        if not_before > now {
            return Verdict::NotBefore(not_before);
        }
        for (bucket, amount) in [(&mut self.requests, demand.requests), (&mut self.tokens, demand.tokens)] {
            if let Some(bucket) = bucket {
                let taken = bucket.try_take(amount, now, stretch);
                debug_assert!(taken, "earliest_fit said it fits");
            }
        }
        Verdict::Granted
    }

    pub fn forecast(&self, demand: Demand, now: Instant) -> Instant {
        let stretch = self.throttle.stretch_tenths();
        [(&self.requests, demand.requests), (&self.tokens, demand.tokens)]
            .into_iter()
            .filter_map(|(bucket, amount)| bucket.as_ref().map(|b| b.supply_time(amount, now, stretch)))
            .max()
            .unwrap_or(now)
    }

    pub fn give(&mut self, demand: Demand, now: Instant) {
        let stretch = self.throttle.stretch_tenths();
        for (bucket, amount) in [(&mut self.requests, demand.requests), (&mut self.tokens, demand.tokens)] {
            if let Some(bucket) = bucket {
                bucket.give(amount, now, stretch);
            }
        }
    }

    /// Settles both buckets at the old stretch before the coefficient moves.
    pub fn feedback(&mut self, signal: Feedback, now: Instant) {
        let stretch = self.throttle.stretch_tenths();
        for bucket in [&mut self.requests, &mut self.tokens].into_iter().flatten() {
            bucket.settle(now, stretch);
        }
        match signal {
            Feedback::Backpressure(weight) => self.throttle.record_backpressure(weight, now),
            Feedback::Success => self.throttle.record_success(now),
        }
    }
}

impl RateAccount for InProcessAccount {
    fn try_take(&self, demand: Demand) -> BoxFuture<'_, Verdict> {
        let verdict = self.with(|state| state.try_take(demand, Instant::now()));
        Box::pin(std::future::ready(verdict))
    }

    fn forecast(&self, demand: Demand) -> BoxFuture<'_, Instant> {
        let at = self.with(|state| state.forecast(demand, Instant::now()));
        Box::pin(std::future::ready(at))
    }

    fn give(&self, demand: Demand) -> BoxFuture<'_, ()> {
        self.with(|state| state.give(demand, Instant::now()));
        Box::pin(std::future::ready(()))
    }

    fn feedback(&self, signal: Feedback) -> BoxFuture<'_, ()> {
        self.with(|state| state.feedback(signal, Instant::now()));
        Box::pin(std::future::ready(()))
    }

    fn coefficient(&self) -> BoxFuture<'_, f64> {
        let coefficient = self.with(|state| state.throttle.coefficient());
        Box::pin(std::future::ready(coefficient))
    }
}
