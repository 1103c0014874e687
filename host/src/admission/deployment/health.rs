//! A deployment's health as every attempt sees it, in atomics: its attempts
//! in flight, a cool-down after a slow-down signal (its throttle engaged), a
//! bench after an authentication failure, and its circuit.
//!
//! The circuit opens after `failures` consecutive retryable failures (5xx,
//! 429, overload, timeouts, connection failures), or when at least
//! [`MIN_WINDOW_ATTEMPTS`] attempts in the current `window` failed at
//! `error_rate` or more, and stays open for `open`; then it is half-open:
//! exactly one attempt (the probe) may go, and its success closes the circuit
//! while its failure opens it again for `open`. The window is a fixed one,
//! restarted by the first outcome after it ends.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

use tokio::time::Instant;

pub use crate::config::{CircuitSettings, MIN_WINDOW_ATTEMPTS};

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
    /// Milliseconds after `epoch` when the current window began.
    window_start: AtomicU64,
    window_attempts: AtomicU32,
    window_failures: AtomicU32,
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
            window_start: AtomicU64::new(0),
            window_attempts: AtomicU32::new(0),
            window_failures: AtomicU32::new(0),
        }
    }

    /// Counts one outcome in the current window (restarting it when it has
    /// ended) and answers whether the window's error rate opens the circuit.
    fn count_in_window(&self, failed: bool) -> bool {
        let now = self.now_ms();
        let window = u64::try_from(self.settings.window.as_millis()).unwrap_or(u64::MAX);
        let start = self.window_start.load(Ordering::Acquire);
        if now.saturating_sub(start) >= window
            && self.window_start.compare_exchange(start, now, Ordering::AcqRel, Ordering::Relaxed).is_ok()
        {
            self.window_attempts.store(0, Ordering::Relaxed);
            self.window_failures.store(0, Ordering::Relaxed);
        }
        let attempts = self.window_attempts.fetch_add(1, Ordering::AcqRel).saturating_add(1);
        let failures = if failed {
            self.window_failures.fetch_add(1, Ordering::AcqRel).saturating_add(1)
        } else {
            self.window_failures.load(Ordering::Acquire)
        };
        failed
            && attempts >= MIN_WINDOW_ATTEMPTS
            && f64::from(failures) >= self.settings.error_rate * f64::from(attempts)
    }

    /// The failed share of the current window's attempts (0 without any).
    pub fn window_error_rate(&self) -> f64 {
        let attempts = self.window_attempts.load(Ordering::Relaxed);
        if attempts == 0 {
            return 0.0;
        }
        f64::from(self.window_failures.load(Ordering::Relaxed)) / f64::from(attempts)
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
        // Never cooled: no clock to read (a choice asks this of every deployment).
        let until = self.cooling_until.load(Ordering::Relaxed);
        until != 0 && until > self.now_ms()
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

    /// Whether it may take an attempt now: not benched, and its circuit lets
    /// one through.
    pub fn usable(&self) -> bool {
        !self.benched() && self.admits()
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
        self.count_in_window(false);
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
        let rate_exceeded = self.count_in_window(true);
        if probe_failed || failures >= self.settings.failures || rate_exceeded {
            let was = self.open_until.swap(self.later_ms(self.settings.open), Ordering::AcqRel);
            return was == 0 || probe_failed;
        }
        false
    }

    /// The fleet holds this circuit open for `remaining` more: open here at
    /// least as long. Answers whether it was not open here before.
    pub fn open_for(&self, remaining: Duration) -> bool {
        let until = self.later_ms(remaining);
        let was = self.open_until.fetch_max(until, Ordering::AcqRel);
        self.probing.store(false, Ordering::Release);
        was == 0 || was <= self.now_ms()
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
        Health::new(CircuitSettings { failures, open, ..CircuitSettings::default() })
    }

    #[tokio::test(start_paused = true)]
    async fn an_error_rate_over_the_window_opens_the_circuit_without_a_run_of_failures() {
        let health = Health::new(CircuitSettings {
            failures: 100,
            open: Duration::from_secs(5),
            error_rate: 0.5,
            window: Duration::from_secs(60),
        });
        // Alternating: never two failures in a row, half of them failed.
        for _ in 0..4 {
            assert!(!health.failed(None));
            health.succeeded();
        }
        assert!(!health.failed(None), "9 attempts: too few to judge");
        assert_eq!(health.circuit(), CircuitState::Closed);
        health.succeeded();
        assert!(health.failed(None), "6 of 11 failed: over half");
        assert!(matches!(health.circuit(), CircuitState::Open { .. }));
        assert!(health.window_error_rate() > 0.5);
    }

    #[tokio::test(start_paused = true)]
    async fn a_new_window_forgets_the_old_ones_failures() {
        let health = Health::new(CircuitSettings {
            failures: 100,
            open: Duration::from_secs(5),
            error_rate: 0.5,
            window: Duration::from_secs(10),
        });
        for _ in 0..9 {
            health.failed(None);
        }
        tokio::time::advance(Duration::from_secs(11)).await;
        for _ in 0..9 {
            health.succeeded();
        }
        assert!(!health.failed(None), "1 of 10 in this window");
        assert_eq!(health.circuit(), CircuitState::Closed);
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
    async fn the_fleet_opens_a_circuit_here_for_as_long_as_it_holds_it() {
        let health = health(5, Duration::from_secs(30));
        assert!(health.open_for(Duration::from_secs(4)), "it was closed here");
        assert!(!health.open_for(Duration::from_secs(2)), "already open: never shortened");
        assert!(matches!(health.circuit(), CircuitState::Open { remaining } if remaining > Duration::from_secs(3)));
        tokio::time::advance(Duration::from_secs(5)).await;
        assert_eq!(health.circuit(), CircuitState::HalfOpen);
        assert!(health.claim(), "a probe goes from here too");
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
