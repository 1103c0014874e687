//! How many refused callers are recorded. A request with a bad key costs the
//! gateway nothing upstream, but each one recorded is a ledger row anyone who
//! reaches the port could write: past a rate, refusals go to the log only.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// Refused callers recorded per second, at most.
pub const RECORDED_PER_SECOND: u64 = 20;

/// A one-second window over refused callers.
#[derive(Debug, Default)]
pub struct RefusalWindow {
    /// The current second (high 32 bits) and the count in it (low 32 bits),
    /// one word so a window moves and counts atomically.
    state: AtomicU64,
}

impl RefusalWindow {
    /// Whether this refusal is recorded.
    pub fn admit(&self) -> bool {
        let now = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |since| since.as_secs()) & 0xFFFF_FFFF;
        let mut current = self.state.load(Ordering::Relaxed);
        loop {
            let (second, count) = (current >> 32, current & 0xFFFF_FFFF);
            let next = if second == now { (now << 32) | (count + 1) } else { (now << 32) | 1 };
            if second == now && count >= RECORDED_PER_SECOND {
                return false;
            }
            match self.state.compare_exchange_weak(current, next, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => return true,
                Err(seen) => current = seen,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flood_is_recorded_up_to_the_rate() {
        let window = RefusalWindow::default();
        let recorded = (0..1_000).filter(|_| window.admit()).count() as u64;
        // The second may turn during the loop: at most two windows' worth.
        assert!((RECORDED_PER_SECOND..=2 * RECORDED_PER_SECOND).contains(&recorded), "{recorded}");
    }
}
