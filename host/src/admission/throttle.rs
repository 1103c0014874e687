//! The adaptive throttle: upstream slow-down signals stretch a model's refill,
//! successes walk it back. The coefficient lives in tenths (0–90): the bucket
//! refills `1 + coefficient` times slower.
//!
//! - backpressure of weight `w` adds `0.5 × w` (a 429 weighs 1, an overload 3);
//! - a success subtracts 0.2 every third success, or 0.5 per success once five
//!   minutes have passed without a backpressure signal;
//! - transient 5xx faults weigh 0 and feed nothing.

use tokio::time::{Duration, Instant};

const MAX_TENTHS: u32 = 90;
const TENTHS_PER_WEIGHT: u32 = 5;
const EVERY_THIRD_SUCCESS_TENTHS: u32 = 2;
const QUIET_SUCCESS_TENTHS: u32 = 5;
const QUIET_AFTER: Duration = Duration::from_secs(300);

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Throttle {
    tenths: u32,
    successes: u32,
    last_backpressure: Option<Instant>,
}

impl Throttle {
    /// The coefficient, 0.0–9.0.
    pub fn coefficient(&self) -> f64 {
        f64::from(self.tenths) / 10.0
    }

    /// The refill stretch in tenths: 10 + coefficient × 10.
    pub fn stretch_tenths(&self) -> u32 {
        10 + self.tenths
    }

    pub fn record_backpressure(&mut self, weight: u32, now: Instant) {
        if weight == 0 {
            return;
        }
        self.tenths = (self.tenths + weight * TENTHS_PER_WEIGHT).min(MAX_TENTHS);
        self.last_backpressure = Some(now);
        self.successes = 0;
    }

    pub fn record_success(&mut self, now: Instant) {
        let quiet = self.last_backpressure.is_none_or(|last| now.saturating_duration_since(last) >= QUIET_AFTER);
        if quiet {
            self.tenths = self.tenths.saturating_sub(QUIET_SUCCESS_TENTHS);
            return;
        }
        self.successes += 1;
        if self.successes.is_multiple_of(3) {
            self.tenths = self.tenths.saturating_sub(EVERY_THIRD_SUCCESS_TENTHS);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signals_move_the_coefficient_by_their_weight() {
        let now = Instant::now();
        let mut throttle = Throttle::default();
        throttle.record_backpressure(1, now);
        assert_eq!(throttle.coefficient(), 0.5);
        throttle.record_backpressure(3, now);
        assert_eq!(throttle.coefficient(), 2.0);
        throttle.record_backpressure(0, now);
        assert_eq!(throttle.coefficient(), 2.0, "a transient fault feeds nothing");
        for _ in 0..20 {
            throttle.record_backpressure(3, now);
        }
        assert_eq!(throttle.coefficient(), 9.0, "capped");
    }

    #[test]
    fn every_third_success_subtracts_a_fifth() {
        let now = Instant::now();
        let mut throttle = Throttle::default();
        throttle.record_backpressure(3, now);
        throttle.record_success(now);
        throttle.record_success(now);
        assert_eq!(throttle.coefficient(), 1.5);
        throttle.record_success(now);
        assert_eq!(throttle.coefficient(), 1.3);
    }

    #[test]
    fn after_five_quiet_minutes_each_success_subtracts_half() {
        let now = Instant::now();
        let mut throttle = Throttle::default();
        throttle.record_backpressure(3, now);
        let later = now + QUIET_AFTER;
        throttle.record_success(later);
        assert_eq!(throttle.coefficient(), 1.0);
        throttle.record_success(later);
        throttle.record_success(later);
        throttle.record_success(later);
        assert_eq!(throttle.coefficient(), 0.0, "floored at zero");
    }
}
