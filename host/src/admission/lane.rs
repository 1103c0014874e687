//! The two lanes of a model's admission, and the share of its capacity the
//! interactive lane keeps for itself.
//!
//! Interactive calls (chat, query embeddings) have a person waiting; bulk calls
//! (ingestion, reindexing) have a job waiting. The gate serves the interactive
//! lane first and lets bulk use at most `1 - share` of each capacity axis, so a
//! large reindex cannot make interactive calls slow: it neither queues ahead of
//! them nor drains what they need.

/// Parts per million in a whole.
const MILLION: u64 = 1_000_000;

/// The fraction of each capacity axis that a bulk grant must leave available,
/// in `[0, 1)`. Kept in whole millionths (rounded up from the configured
/// fraction) so that every store, in-process or a shared one running a script,
/// computes the reserve in integers and agrees to the unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct InteractiveShare {
    millionths: u32,
}

/// A configured `interactive_share` outside `[0, 1)` (or not a number).
#[derive(Debug, Clone, Copy, PartialEq, thiserror::Error)]
#[error("interactive_share must be at least 0 and below 1, got {0}")]
pub struct ShareOutOfRange(pub f64);

impl InteractiveShare {
    /// No reserve: bulk may use everything (priority still applies).
    pub const NONE: InteractiveShare = InteractiveShare { millionths: 0 };
    /// Half of each axis, the catalog's default.
    pub const DEFAULT: InteractiveShare = InteractiveShare { millionths: 500_000 };

    /// Validates a configured fraction. A fraction so close to 1 that it rounds
    /// up to a whole is refused too: bulk could then never be admitted.
    pub fn new(fraction: f64) -> Result<Self, ShareOutOfRange> {
        if !(0.0..1.0).contains(&fraction) {
            return Err(ShareOutOfRange(fraction));
        }
        // In range, so the product lies in [0, 1 000 000] and the cast loses
        // nothing (a float-to-int `as` saturates in any case).
        let millionths = (fraction * MILLION as f64).ceil() as u32;
        if u64::from(millionths) >= MILLION {
            return Err(ShareOutOfRange(fraction));
        }
        Ok(Self { millionths })
    }

    pub fn millionths(self) -> u32 {
        self.millionths
    }

    /// The share as a fraction, for display.
    pub fn fraction(self) -> f64 {
        f64::from(self.millionths) / MILLION as f64
    }

    /// The share of `whole`, rounded up: the reserve never shrinks by rounding.
    pub fn of(self, whole: u128) -> u128 {
        (whole * u128::from(self.millionths)).div_ceil(u128::from(MILLION))
    }

    /// Concurrency permits held back for interactive calls out of `max`:
    /// `ceil(share × max)`.
    pub fn permits_of(self, max: u32) -> u32 {
        u32::try_from(self.of(u128::from(max))).unwrap_or(max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admission::Lane;

    #[test]
    fn a_lane_reads_back_its_own_name() {
        for lane in [Lane::Interactive, Lane::Bulk] {
            assert_eq!(Lane::parse(lane.as_str()), Some(lane));
        }
        assert_eq!(Lane::parse("Bulk"), None);
    }

    #[test]
    fn shares_are_validated_and_rounded_up() {
        assert_eq!(InteractiveShare::new(0.5), Ok(InteractiveShare::DEFAULT));
        assert_eq!(InteractiveShare::new(0.0), Ok(InteractiveShare::NONE));
        assert_eq!(InteractiveShare::new(0.000_000_1).map(InteractiveShare::millionths), Ok(1));
        for bad in [1.0, 1.5, -0.1, f64::NAN, f64::INFINITY, 0.999_999_9] {
            assert!(InteractiveShare::new(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_reserve_is_rounded_up() {
        let share = InteractiveShare::DEFAULT;
        assert_eq!(share.of(10), 5);
        assert_eq!(share.of(11), 6);
        assert_eq!(share.permits_of(1), 1);
        assert_eq!(share.permits_of(4), 2);
        assert_eq!(InteractiveShare::NONE.permits_of(7), 0);
    }
}
