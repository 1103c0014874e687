//! Where bucket levels and throttle coefficients live, behind a small trait: the
//! in-process store is the embedded default; a shared store (Redis, with the same
//! arithmetic in an atomic script) implements the same trait so several gateway
//! instances share one budget. The queue, the parking and the concurrency permits
//! stay local to each process: only the levels are shared. A bulk call's take
//! carries the interactive share it must leave in every bucket, so a store checks
//! that reserve in the same atomic step as the debit.

use std::fmt::Debug;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::time::Instant;

use super::bucket::Bucket;
use super::lane::InteractiveShare;
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

/// A capacity axis of a model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Axis {
    /// The `rpm` budget.
    Requests,
    /// The `tpm` budget.
    Tokens,
    /// The `max_concurrency` permits.
    ConcurrentCalls,
}

impl std::fmt::Display for Axis {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Axis::Requests => "requests",
            Axis::Tokens => "tokens",
            Axis::ConcurrentCalls => "concurrent calls",
        })
    }
}

/// A demand larger than a budget can ever hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shortfall {
    pub axis: Axis,
    pub demand: u64,
    pub limit: u64,
    /// The part of `limit` the caller's lane may not use (the interactive
    /// share, for a bulk call); 0 when the whole limit was open to it.
    pub reserved: u64,
}

impl std::fmt::Display for Shortfall {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let Self { axis, demand, limit, reserved } = *self;
        match axis {
            Axis::Requests | Axis::Tokens => {
                write!(f, "the call needs {demand} {axis} but the model's budget is {limit} per minute")?;
                if reserved > 0 {
                    write!(f, ", {reserved} of it reserved for interactive calls")?;
                }
            }
            Axis::ConcurrentCalls => {
                write!(f, "the call needs {demand} of the model's {limit} {axis}")?;
                if reserved > 0 {
                    write!(f, ", {reserved} of them reserved for interactive calls")?;
                }
            }
        }
        Ok(())
    }
}

/// The answer to "may this demand go now?".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Granted,
    /// Not before this instant (the exact moment the shortfall closes at the
    /// current throttle).
    NotBefore(Instant),
    Never(Shortfall),
    /// The store cannot answer (a shared store that is out, whose declared
    /// policy is to refuse): nothing was taken.
    Unavailable,
}

/// What an account knows of its room for a demand without taking anything or
/// asking anyone: read when an attempt chooses among an entry's deployments,
/// so it goes where the demand fits now rather than waiting at a full one.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Room {
    /// The demand fits now; `free` is the smallest free share (0–1) of a
    /// limited axis (1 when nothing is limited).
    Now { free: f64 },
    /// A shared account that has not said otherwise: taken as fitting.
    Unknown,
    /// Not before this instant (the buckets refill to it).
    Later(Instant),
    /// Every concurrency permit is held: when one frees is not known.
    /// `waiting` attempts beyond its `slots` are already assigned to it.
    Busy { waiting: u32, slots: u32 },
    /// The demand never fits (it exceeds a bucket's capacity).
    Never,
}

impl Room {
    /// Whether an attempt sent there now would be admitted without waiting,
    /// as far as is known.
    pub fn fits(self) -> bool {
        matches!(self, Self::Now { .. } | Self::Unknown)
    }

    /// The free share headroom is weighted by (1 where not known).
    pub fn free(self) -> f64 {
        match self {
            Self::Now { free } => free,
            Self::Unknown => 1.0,
            Self::Later(_) | Self::Busy { .. } | Self::Never => 0.0,
        }
    }

    /// Orders rooms that do not fit by how soon they might: a known instant
    /// first (the earliest first), then held permits (the fewest attempts
    /// waiting per slot first, so waiting calls spread), then never.
    pub fn wait_rank(self) -> (u8, Option<Instant>, u64) {
        match self {
            Self::Now { .. } | Self::Unknown => (0, None, 0),
            Self::Later(at) => (1, Some(at), 0),
            Self::Busy { waiting, slots } => (2, None, u64::from(waiting) * 1_000_000 / u64::from(slots.max(1))),
            Self::Never => (3, None, 0),
        }
    }
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

    /// The `max` concurrency permits of `key`, when this store holds them for
    /// several processes; `None` (the default): each gateway counts its own.
    fn permits(&self, _key: &str, _max: u32) -> Option<Arc<dyn PermitPool>> {
        None
    }

    /// Where deployments' circuits are shared with other processes; `None`
    /// (the default): each gateway keeps its own.
    fn circuits(&self) -> Option<Arc<dyn crate::admission::deployment::CircuitBoard>> {
        None
    }

    /// Gives back what this process holds of shared capacity and has not
    /// spent (a stopping gateway's leased blocks and idle permits); nothing
    /// by default.
    fn give_back(&self) -> BoxFuture<'_, ()> {
        Box::pin(std::future::ready(()))
    }
}

/// A permit held in a [`PermitPool`], returned when its call ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease(pub String);

/// The answer to "may this call hold one more permit?".
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PermitVerdict {
    Acquired(Lease),
    /// Every open permit is held somewhere: try again shortly (a release in
    /// another process wakes nobody here).
    Full,
    /// The pool cannot answer, and its policy is to refuse.
    Unavailable,
}

/// A model's concurrency permits shared by several processes.
pub trait PermitPool: Send + Sync + Debug {
    /// One permit, if fewer than `open` are held.
    fn acquire(&self, open: u32) -> BoxFuture<'_, PermitVerdict>;
    fn release(&self, lease: Lease) -> BoxFuture<'_, ()>;
    /// Releases `lease` without waiting when that needs no remote step (it
    /// is kept idle in memory, or was counted locally); otherwise hands it
    /// back for [`Self::release`]. A release that waits for its own task
    /// would leave the permit held meanwhile, and under a burst that lag made
    /// the pool take blocks it then returned one script run at a time.
    fn release_in_place(&self, lease: Lease) -> Result<(), Lease> {
        Err(lease)
    }
}

/// One model's buckets and throttle. Every operation is atomic on its own.
pub trait RateAccount: Send + Sync + Debug {
    /// Takes the whole demand if it fits now (both axes or neither).
    fn try_take(&self, demand: Demand) -> BoxFuture<'_, Verdict> {
        self.try_take_reserving(demand, InteractiveShare::NONE)
    }
    /// Takes the whole demand if it fits now *and* leaves `share` of each
    /// limited axis's capacity available (both axes or neither). The reserve is
    /// checked inside the same atomic step as the debit: a check followed by a
    /// separate take would let two bulk callers pass the check together and
    /// both dig into the reserve. `NotBefore` is the instant the demand fits
    /// with the reserve; `Never` names the reserve.
    fn try_take_reserving(&self, demand: Demand, share: InteractiveShare) -> BoxFuture<'_, Verdict>;
    /// When a total of `demand` could be supplied, counting refill past the
    /// capacity: a lower bound for a caller queued behind others.
    fn forecast(&self, demand: Demand) -> BoxFuture<'_, Instant> {
        self.forecast_reserving(demand, InteractiveShare::NONE)
    }
    /// [`Self::forecast`] for callers that must leave `share` of each axis
    /// behind: when `demand` could be supplied with the reserve still there.
    fn forecast_reserving(&self, demand: Demand, share: InteractiveShare) -> BoxFuture<'_, Instant>;
    /// Returns a demand whose call never happened.
    fn give(&self, demand: Demand) -> BoxFuture<'_, ()>;
    fn feedback(&self, signal: Feedback) -> BoxFuture<'_, ()>;
    fn coefficient(&self) -> BoxFuture<'_, f64>;
    /// Its room for `demand` at `now`, as far as it knows without asking
    /// anyone (never a remote call): [`Room::Unknown`] unless an account says more.
    fn room(&self, _demand: Demand, _now: Instant) -> Room {
        Room::Unknown
    }
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
    /// Whether it has a bucket at all: an unlimited account's room needs no lock.
    limited: bool,
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
        let limited = limits.rpm.is_some() || limits.tpm.is_some();
        Self { state: Mutex::new(state), limited }
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
        self.try_take_reserving(demand, InteractiveShare::NONE, now)
    }

    /// Both axes or neither, each leaving `share` of its capacity, decided at `now`.
    pub fn try_take_reserving(&mut self, demand: Demand, share: InteractiveShare, now: Instant) -> Verdict {
        let stretch = self.throttle.stretch_tenths();
        let axes = [(&self.requests, demand.requests, Axis::Requests), (&self.tokens, demand.tokens, Axis::Tokens)];
        let mut not_before = now;
        for (bucket, amount, axis) in axes {
            let Some(bucket) = bucket else { continue };
            match bucket.earliest_fit_keeping(amount, share, now, stretch) {
                None => {
                    let (limit, reserved) = (bucket.capacity(), bucket.reserved(share));
                    return Verdict::Never(Shortfall { axis, demand: amount, limit, reserved });
                }
                Some(at) => not_before = not_before.max(at),
            }
        }
        if not_before > now {
            return Verdict::NotBefore(not_before);
        }
        for (bucket, amount) in [(&mut self.requests, demand.requests), (&mut self.tokens, demand.tokens)] {
            if let Some(bucket) = bucket {
                let taken = bucket.try_take_keeping(amount, share, now, stretch);
                debug_assert!(taken, "earliest_fit_keeping said it fits");
            }
        }
        Verdict::Granted
    }

    /// Its room for `demand` at `now` (the whole capacity open: a chat call
    /// is interactive), nothing taken: an estimate ([`Bucket::room_estimate`]).
    pub fn room(&self, demand: Demand, now: Instant) -> Room {
        room_in(self.requests.as_ref(), self.tokens.as_ref(), demand, now, self.throttle.stretch_tenths())
    }

    pub fn forecast(&self, demand: Demand, now: Instant) -> Instant {
        self.forecast_reserving(demand, InteractiveShare::NONE, now)
    }

    pub fn forecast_reserving(&self, demand: Demand, share: InteractiveShare, now: Instant) -> Instant {
        let stretch = self.throttle.stretch_tenths();
        [(&self.requests, demand.requests), (&self.tokens, demand.tokens)]
            .into_iter()
            .filter_map(|(bucket, amount)| bucket.as_ref().map(|b| b.supply_time_keeping(amount, share, now, stretch)))
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

/// The room for `demand` in a requests and a tokens bucket (`None`:
/// unlimited) at `now`, refilling at stretch `tenths`: both axes must fit,
/// and the free share is the smaller.
pub fn room_in(requests: Option<&Bucket>, tokens: Option<&Bucket>, demand: Demand, now: Instant, tenths: u32) -> Room {
    let (mut at, mut free) = (now, 1.0_f64);
    for (bucket, amount) in [(requests, demand.requests), (tokens, demand.tokens)] {
        let Some(bucket) = bucket else { continue };
        let Some((bucket_free, fits_at)) = bucket.room_estimate(amount, now, tenths) else { return Room::Never };
        at = at.max(fits_at);
        free = free.min(bucket_free);
    }
    if at > now { Room::Later(at) } else { Room::Now { free } }
}

impl RateAccount for InProcessAccount {
    fn room(&self, demand: Demand, now: Instant) -> Room {
        if !self.limited {
            return Room::Now { free: 1.0 };
        }
        self.with(|state| state.room(demand, now))
    }

    fn try_take_reserving(&self, demand: Demand, share: InteractiveShare) -> BoxFuture<'_, Verdict> {
        let verdict = self.with(|state| state.try_take_reserving(demand, share, Instant::now()));
        Box::pin(std::future::ready(verdict))
    }

    fn forecast_reserving(&self, demand: Demand, share: InteractiveShare) -> BoxFuture<'_, Instant> {
        let at = self.with(|state| state.forecast_reserving(demand, share, Instant::now()));
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
