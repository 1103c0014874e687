//! A clocked token bucket: the level at any instant is the stored level plus what
//! the rate has refilled since it was stored, capped at the capacity. Nothing
//! ticks; there is no refill task.
//!
//! Levels are integers in units of 1/600 000 000 000 of a token: at that scale a
//! bucket of capacity `C` per minute refills exactly `C × 100 / s` units per
//! nanosecond, where `s` is the throttle's stretch in tenths (10 = normal speed,
//! 100 = ten times slower). Integer levels make a rollback restore exactly, and
//! the one rounding there is (refill, rounded down) only ever errs toward fewer
//! tokens, never more.

use tokio::time::{Duration, Instant};

use super::lane::InteractiveShare;

/// Units per token (60 s × 10⁹ ns × 10 tenths).
const UNITS_PER_TOKEN: u128 = 600_000_000_000;

/// A bucket refilling `capacity` tokens per minute.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bucket {
    capacity: u64,
    level: u128,
    updated: Instant,
}

impl Bucket {
    /// A full bucket.
    pub fn per_minute(capacity: u64, now: Instant) -> Self {
        Self { capacity, level: u128::from(capacity) * UNITS_PER_TOKEN, updated: now }
    }

    /// A bucket of `capacity` holding `tokens` (at most its capacity) at
    /// `at`: one another process reported, read here to estimate its room.
    pub fn holding(capacity: u64, tokens: u64, at: Instant) -> Self {
        Self { capacity, level: u128::from(tokens.min(capacity)) * UNITS_PER_TOKEN, updated: at }
    }

    pub fn capacity(&self) -> u64 {
        self.capacity
    }

    fn max_units(&self) -> u128 {
        u128::from(self.capacity) * UNITS_PER_TOKEN
    }

    /// Units refilled over `elapsed` at stretch `tenths` (rounded down).
    fn refill(&self, elapsed: Duration, tenths: u32) -> u128 {
        elapsed.as_nanos() * u128::from(self.capacity) * 100 / u128::from(tenths.max(10))
    }

    fn level_units(&self, now: Instant, tenths: u32) -> u128 {
        let elapsed = now.saturating_duration_since(self.updated);
        (self.level + self.refill(elapsed, tenths)).min(self.max_units())
    }

    /// Whole tokens available at `now`.
    pub fn level(&self, now: Instant, tenths: u32) -> u64 {
        u64::try_from(self.level_units(now, tenths) / UNITS_PER_TOKEN).unwrap_or(u64::MAX)
    }

    /// Stores the level reached at `now`: required before the stretch changes, so
    /// time already elapsed keeps the rate it elapsed at.
    pub fn settle(&mut self, now: Instant, tenths: u32) {
        self.level = self.level_units(now, tenths);
        self.updated = self.updated.max(now);
    }

    /// Whole tokens of `share` of the capacity, rounded up (what a bulk grant
    /// must leave in the bucket).
    pub fn reserved(&self, share: InteractiveShare) -> u64 {
        u64::try_from(self.reserved_units(share).div_ceil(UNITS_PER_TOKEN)).unwrap_or(u64::MAX)
    }

    fn reserved_units(&self, share: InteractiveShare) -> u128 {
        share.of(self.max_units())
    }

    /// The instant `demand` tokens are available, or `None` when the bucket can
    /// never hold that many.
    pub fn earliest_fit(&self, demand: u64, now: Instant, tenths: u32) -> Option<Instant> {
        self.earliest_fit_keeping(demand, InteractiveShare::NONE, now, tenths)
    }

    /// The instant `demand` tokens can be taken leaving `share` of the capacity
    /// in the bucket, or `None` when `demand` exceeds the rest of the capacity.
    pub fn earliest_fit_keeping(
        &self,
        demand: u64,
        share: InteractiveShare,
        now: Instant,
        tenths: u32,
    ) -> Option<Instant> {
        let needed = u128::from(demand) * UNITS_PER_TOKEN + self.reserved_units(share);
        (needed <= self.max_units()).then(|| self.supply_units_time(needed, now, tenths))
    }

    /// When a total of `amount` tokens could have been supplied from now on,
    /// counting refill past the capacity (for a caller queued behind others,
    /// whose predecessors drain the bucket as it fills).
    pub fn supply_time(&self, amount: u64, now: Instant, tenths: u32) -> Instant {
        self.supply_time_keeping(amount, InteractiveShare::NONE, now, tenths)
    }

    /// [`Self::supply_time`] for takers that must leave `share` of the
    /// capacity behind: the bucket supplies `amount` and still holds the reserve.
    pub fn supply_time_keeping(&self, amount: u64, share: InteractiveShare, now: Instant, tenths: u32) -> Instant {
        let needed = u128::from(amount) * UNITS_PER_TOKEN + self.reserved_units(share);
        self.supply_units_time(needed, now, tenths)
    }

    fn supply_units_time(&self, needed: u128, now: Instant, tenths: u32) -> Instant {
        let level = self.level_units(now, tenths);
        if level >= needed {
            return now;
        }
        let per_ns = u128::from(self.capacity).max(1) * 100;
        let nanos = ((needed - level) * u128::from(tenths.max(10))).div_ceil(per_ns);
        now.max(self.updated) + Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX))
    }

    /// The free share of the capacity at `now`, and when `demand` fits (`now`
    /// when it does), or `None` when it never does. In floating point: an
    /// estimate for choosing where to send an attempt (one of several read per
    /// choice), never for taking, which stays exact.
    pub fn room_estimate(&self, demand: u64, now: Instant, tenths: u32) -> Option<(f64, Instant)> {
        if demand > self.capacity {
            return None;
        }
        // Conversions from u64 and seconds, not u128 (a library call each).
        let max = self.capacity as f64 * UNITS_PER_TOKEN as f64;
        let per_ns = (self.capacity as f64 * 100.0 / f64::from(tenths.max(10))).max(f64::MIN_POSITIVE);
        let elapsed = now.saturating_duration_since(self.updated).as_secs_f64() * 1e9;
        let stored = u64::try_from(self.level).map_or_else(|_| self.level as f64, |level| level as f64);
        let level = (stored + elapsed * per_ns).min(max);
        let needed = demand as f64 * UNITS_PER_TOKEN as f64;
        let at = if level >= needed {
            now
        } else {
            now.max(self.updated) + Duration::from_secs_f64((needed - level) / per_ns / 1e9)
        };
        Some((level / max.max(1.0), at))
    }

    /// Takes `demand` tokens if they are there now.
    pub fn try_take(&mut self, demand: u64, now: Instant, tenths: u32) -> bool {
        self.try_take_keeping(demand, InteractiveShare::NONE, now, tenths)
    }

    /// Takes `demand` tokens if they are there now with `share` of the capacity
    /// to spare: the check and the debit are one step.
    pub fn try_take_keeping(&mut self, demand: u64, share: InteractiveShare, now: Instant, tenths: u32) -> bool {
        self.settle(now, tenths);
        let needed = u128::from(demand) * UNITS_PER_TOKEN;
        if self.level >= needed + self.reserved_units(share) {
            self.level -= needed;
            true
        } else {
            false
        }
    }

    /// Returns tokens whose call never happened.
    pub fn give(&mut self, amount: u64, now: Instant, tenths: u32) {
        self.settle(now, tenths);
        self.level = (self.level + u128::from(amount) * UNITS_PER_TOKEN).min(self.max_units());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NORMAL: u32 = 10;

    #[test]
    fn starts_full_and_refills_with_time() {
        let start = Instant::now();
        let mut bucket = Bucket::per_minute(60, start);
        assert!(bucket.try_take(60, start, NORMAL));
        assert_eq!(bucket.level(start, NORMAL), 0);
        assert_eq!(bucket.level(start + Duration::from_secs(1), NORMAL), 1);
        assert_eq!(bucket.level(start + Duration::from_secs(30), NORMAL), 30);
        assert_eq!(bucket.level(start + Duration::from_secs(600), NORMAL), 60, "capped");
    }

    #[test]
    fn earliest_fit_is_exact() {
        let start = Instant::now();
        let mut bucket = Bucket::per_minute(60, start);
        assert!(bucket.try_take(60, start, NORMAL));
        let fit = bucket.earliest_fit(3, start, NORMAL).unwrap();
        assert_eq!(fit, start + Duration::from_secs(3));
        assert!(!bucket.clone().try_take(3, fit - Duration::from_nanos(1), NORMAL));
        assert!(bucket.try_take(3, fit, NORMAL));
    }

    #[test]
    fn the_throttle_stretches_the_refill() {
        let start = Instant::now();
        let mut bucket = Bucket::per_minute(60, start);
        assert!(bucket.try_take(60, start, NORMAL));
        // Coefficient 1.5: refill 2.5x slower.
        assert_eq!(bucket.earliest_fit(2, start, 25).unwrap(), start + Duration::from_secs(5));
        assert_eq!(bucket.level(start + Duration::from_secs(10), 25), 4);
    }

    #[test]
    fn a_demand_above_capacity_never_fits() {
        let bucket = Bucket::per_minute(100, Instant::now());
        assert_eq!(bucket.earliest_fit(101, Instant::now(), NORMAL), None);
    }

    #[test]
    fn a_reserving_take_leaves_the_share_behind() {
        let start = Instant::now();
        let half = InteractiveShare::DEFAULT;
        let mut bucket = Bucket::per_minute(100, start);
        assert_eq!(bucket.reserved(half), 50);
        assert!(!bucket.clone().try_take_keeping(51, half, start, NORMAL), "would leave 49");
        assert!(bucket.try_take_keeping(30, half, start, NORMAL));
        assert!(bucket.try_take_keeping(20, half, start, NORMAL));
        assert_eq!(bucket.level(start, NORMAL), 50);
        // One more token needs one refilled: 0.6 s at 100 per minute.
        let fit = bucket.earliest_fit_keeping(1, half, start, NORMAL).unwrap();
        assert_eq!(fit, start + Duration::from_millis(600));
        assert!(!bucket.clone().try_take_keeping(1, half, fit - Duration::from_nanos(1), NORMAL));
        assert!(bucket.clone().try_take_keeping(1, half, fit, NORMAL));
        // Two tokens queued behind that one: the supply counts the reserve too.
        assert_eq!(bucket.supply_time_keeping(3, half, start, NORMAL), start + Duration::from_millis(1_800));
        // The unreserved take may use the reserve.
        assert!(bucket.try_take(50, start, NORMAL));
    }

    #[test]
    fn a_demand_above_the_unreserved_part_never_fits() {
        let bucket = Bucket::per_minute(100, Instant::now());
        let half = InteractiveShare::DEFAULT;
        assert!(bucket.earliest_fit_keeping(50, half, Instant::now(), NORMAL).is_some());
        assert_eq!(bucket.earliest_fit_keeping(51, half, Instant::now(), NORMAL), None);
    }

    #[test]
    fn give_restores_exactly() {
        let start = Instant::now();
        let mut bucket = Bucket::per_minute(1_000, start);
        let later = start + Duration::from_millis(1_234);
        assert!(bucket.try_take(700, start, NORMAL));
        let before = bucket.clone();
        assert!(bucket.try_take(250, later, NORMAL));
        bucket.give(250, later, NORMAL);
        let mut expected = before;
        expected.settle(later, NORMAL);
        assert_eq!(bucket, expected);
    }

    #[test]
    fn the_room_estimate_agrees_with_the_exact_arithmetic() {
        let start = Instant::now();
        let mut bucket = Bucket::per_minute(600, start);
        assert!(bucket.try_take(500, start, 10));
        for (after_ms, demand, tenths) in
            [(0, 50, 10), (0, 300, 10), (250, 300, 10), (1_000, 600, 25), (90_000, 10, 10)]
        {
            let now = start + Duration::from_millis(after_ms);
            let (free, at) = bucket.room_estimate(demand, now, tenths).unwrap();
            let exact = bucket.earliest_fit(demand, now, tenths).unwrap();
            let gap = if at > exact { at - exact } else { exact - at };
            assert!(gap < Duration::from_micros(1), "{after_ms} ms, {demand}: {at:?} against {exact:?}");
            let level = bucket.level(now, tenths) as f64 / 600.0;
            assert!((free - level).abs() < 1.0 / 600.0, "{after_ms} ms: {free} against {level}");
        }
        assert_eq!(bucket.room_estimate(601, start, 10), None, "above the capacity it never fits");
    }
}
