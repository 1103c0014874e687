//! A deployment's health as every attempt sees it, in atomics: its attempts
//! in flight, a cool-down after a slow-down signal (its throttle engaged), a
//! bench after an authentication failure, and its circuit.
//!
//! The circuit opens after `failures` consecutive retryable failures (5xx,
//! 429, overload, timeouts, connection failures) and stays open for `open`;
//! then it is half-open: exactly one attempt (the probe) may go, and its
//! success closes the circuit while its failure opens it again for `open`.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

use tokio::time::Instant;

/// When a circuit opens and for how long (the entry's `circuit_failures` and
/// `circuit_open_secs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CircuitSettings {
    pub failures: u32,
    pub open: Duration,
}

impl CircuitSettings {
    pub const DEFAULT_FAILURES: u32 = 5;
    pub const DEFAULT_OPEN: Duration = Duration::from_secs(30);
}

impl Default for CircuitSettings {
    fn default() -> Self {
        Self { failures: Self::DEFAULT_FAILURES, open: Self::DEFAULT_OPEN }
    }
}

/// A circuit's state, as the status and metrics show it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CircuitState {
    Closed,
    /// No attempt goes until the time left has passed.
    Open {
        remaining: Duration,
    },
    /// One probe may go (or is on its way).
    HalfOpen,
}

impl CircuitState {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Closed => "closed",
            Self::Open { .. } => "open",
            Self::HalfOpen => "half_open",
        }
    }
}

/// One deployment's health.
#[derive(Debug)]
pub struct Health {
    settings: CircuitSettings,
    /// The instant the millisecond fields count from.
    epoch: Instant,
    in_flight: AtomicU32,
    /// Milliseconds after `epoch` until which a slow-down signal cools it.
    cooling_until: AtomicU64,
    /// An authentication failure benched it until the catalog is reloaded.
    benched: AtomicBool,
    consecutive_failures: AtomicU32,
    /// Milliseconds after `epoch` until which the circuit is open; 0: closed.
    open_until: AtomicU64,
    /// The half-open probe is on its way.
    probing: AtomicBool,
}

impl Health {
    pub fn new(settings: CircuitSettings) -> Self {
        Self {
            settings,
            epoch: Instant::now(),
            in_flight: AtomicU32::new(0),
            cooling_until: AtomicU64::new(0),
            benched: AtomicBool::new(false),
            consecutive_failures: AtomicU32::new(0),
            open_until: AtomicU64::new(0),
            probing: AtomicBool::new(false),
        }
    }

    /// Milliseconds since the epoch; at least 1, so 0 can mean "never".
    fn now_ms(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX).max(1)
    }

    fn later_ms(&self, by: Duration) -> u64 {
        self.now_ms().saturating_add(u64::try_from(by.as_millis()).unwrap_or(u64::MAX))
    }

    pub fn in_flight(&self) -> u32 {
        self.in_flight.load(Ordering::Relaxed)
    }

    /// Benched after an authentication failure.
    pub fn benched(&self) -> bool {
        self.benched.load(Ordering::Relaxed)
    }

    /// Cooling down after a slow-down signal.
    pub fn cooling(&self) -> bool {
        self.cooling_until.load(Ordering::Relaxed) > self.now_ms()
    }

    pub fn consecutive_failures(&self) -> u32 {
        self.consecutive_failures.load(Ordering::Relaxed)
    }

    pub fn circuit(&self) -> CircuitState {
        let until = self.open_until.load(Ordering::Relaxed);
        if until == 0 {
            return CircuitState::Closed;
        }
        let now = self.now_ms();
        if now < until {
            return CircuitState::Open { remaining: Duration::from_millis(until - now) };
        }
        CircuitState::HalfOpen
    }

    /// Whether an attempt may be sent here now, as far as the circuit goes:
    /// closed, or half-open with no probe on its way.
    pub fn admits(&self) -> bool {
        match self.circuit() {
            CircuitState::Closed => true,
            CircuitState::Open { .. } => false,
            CircuitState::HalfOpen => !self.probing.load(Ordering::Relaxed),
        }
    }

    /// Takes the attempt chosen for this deployment: the probe of a half-open
    /// circuit is claimed here (one attempt wins it; `false` for the others).
    pub(super) fn claim(&self) -> bool {
        match self.circuit() {
            CircuitState::Closed => true,
            CircuitState::Open { .. } => false,
            CircuitState::HalfOpen => {
                self.probing.compare_exchange(false, true, Ordering::AcqRel, Ordering::Relaxed).is_ok()
            }
        }
    }

    /// An answer came: the circuit closes and the failure count restarts.
    /// Answers whether this closed an open circuit.
    pub fn succeeded(&self) -> bool {
        self.consecutive_failures.store(0, Ordering::Relaxed);
        self.probing.store(false, Ordering::Release);
        self.open_until.swap(0, Ordering::AcqRel) != 0
    }

    /// A retryable failure (5xx, 429, overload, timeout, connection): a probe's
    /// failure opens the circuit again; the `failures`-th in a row opens it.
    /// `cool_for` is the wait a slow-down signal asks (none for a fault).
    /// Answers whether this failure opened the circuit.
    pub fn failed(&self, cool_for: Option<Duration>) -> bool {
        if let Some(wait) = cool_for {
            self.cooling_until.fetch_max(self.later_ms(wait), Ordering::Relaxed);
        }
        let failures = self.consecutive_failures.fetch_add(1, Ordering::AcqRel).saturating_add(1);
        let probe_failed = self.probing.swap(false, Ordering::AcqRel);
        if probe_failed || failures >= self.settings.failures {
            let was = self.open_until.swap(self.later_ms(self.settings.open), Ordering::AcqRel);
            return was == 0 || probe_failed;
        }
        false
    }

    /// An authentication failure: the credential is refused here, so no call
    /// goes here again until the catalog is reloaded.
    pub fn bench(&self) -> bool {
        !self.benched.swap(true, Ordering::AcqRel)
    }

    /// Counts an attempt in flight until the guard is dropped.
    pub fn start(&self) -> InFlight<'_> {
        self.in_flight.fetch_add(1, Ordering::Relaxed);
        InFlight { health: self }
    }
}

/// An attempt in flight on a deployment (its headroom counts it).
#[derive(Debug)]
pub struct InFlight<'h> {
    health: &'h Health,
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.health.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn health(failures: u32, open: Duration) -> Health {
        Health::new(CircuitSettings { failures, open })
    }

    #[tokio::test(start_paused = true)]
    async fn consecutive_failures_open_the_circuit_and_a_probe_closes_it() {
        let health = health(3, Duration::from_secs(10));
        assert!(!health.failed(None));
        assert!(!health.failed(None));
        assert!(!health.succeeded(), "nothing was open");
        assert!(!health.failed(None), "a success restarts the count");
        assert!(!health.failed(None));
        assert!(health.failed(None), "the third in a row opens it");
        assert!(matches!(health.circuit(), CircuitState::Open { .. }));
        assert!(!health.admits());
        tokio::time::advance(Duration::from_secs(11)).await;
        assert_eq!(health.circuit(), CircuitState::HalfOpen);
        assert!(health.admits());
        assert!(health.claim(), "the first attempt is the probe");
        assert!(!health.claim(), "one probe at a time");
        assert!(!health.admits());
        assert!(health.succeeded(), "the probe closed it");
        assert_eq!(health.circuit(), CircuitState::Closed);
        assert!(health.claim());
    }

    #[tokio::test(start_paused = true)]
    async fn a_failed_probe_opens_the_circuit_again() {
        let health = health(1, Duration::from_secs(5));
        assert!(health.failed(None));
        tokio::time::advance(Duration::from_secs(6)).await;
        assert!(health.claim());
        assert!(health.failed(None), "the probe failed: open again");
        assert!(matches!(health.circuit(), CircuitState::Open { .. }));
    }

    #[tokio::test(start_paused = true)]
    async fn a_slow_down_cools_and_a_bench_is_reported_once() {
        let health = health(5, Duration::from_secs(5));
        health.failed(Some(Duration::from_secs(2)));
        assert!(health.cooling());
        tokio::time::advance(Duration::from_secs(3)).await;
        assert!(!health.cooling());
        assert!(health.bench());
        assert!(!health.bench());
        assert!(health.benched());
        let guard = health.start();
        assert_eq!(health.in_flight(), 1);
        drop(guard);
        assert_eq!(health.in_flight(), 0);
    }
}
