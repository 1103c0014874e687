//! Which deployment an attempt goes to.
//!
//! Each deployment's room for the attempt's demand is read once
//! ([`Deployment::room`]: its concurrency permits, and its buckets' levels as
//! far as they are known without asking anyone). Among deployments not
//! benched and whose circuit lets an attempt through, in order of preference:
//! 1. those this call has not tried and that are not cooling down after a
//!    slow-down signal (their throttle engaged);
//! 2. those this call has not tried;
//! 3. any, a deployment that failed this call included (only when nothing
//!    else is left).
//!
//! The first tier with a deployment where the demand fits now wins: a call
//! with an affinity (see [`super::affinity_of`]) goes to its conversation's
//! deployment — the weighted rendezvous hash of the affinity over the tier's
//! deployments, stable while the deployments are — as long as the demand fits
//! there now; otherwise, and for a call without affinity, the deployment is
//! drawn at random weighted by its headroom: `weight × the smallest free share
//! of its concurrency, requests and tokens / (1 + attempts in flight)`. A slow
//! deployment holds more attempts in flight, so its share drops. A room (a
//! lock and its buckets' arithmetic) is read only when a pass needs it: the
//! conversation's home first, and the headroom draw by rejection (see
//! [`View::by_headroom`]), so most choices read one or two. Only when the
//! demand fits nowhere now does the attempt go, in the same tier order, to the
//! deployment whose room comes soonest (its buckets' refill first; then, among
//! those whose permits are all held, the one with the fewest attempts already
//! waiting per permit), and wait there.

use std::cell::Cell;

use tokio::time::Instant;

use super::super::{Demand, Room};
use super::{Deployment, Pool};
use crate::config::MAX_DEPLOYMENTS;

/// The deployments a call has tried (bit `i`: the `i`-th), so the next
/// attempt goes elsewhere while another has headroom.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tried(u64);

impl Tried {
    pub fn with(self, index: usize) -> Self {
        Self(self.0 | bit(index))
    }

    pub fn contains(self, index: usize) -> bool {
        self.0 & bit(index) != 0
    }

    /// The mask as a number, for a call that keeps it in an atomic.
    pub fn bits(self) -> u64 {
        self.0
    }

    pub fn from_bits(bits: u64) -> Self {
        Self(bits)
    }
}

fn bit(index: usize) -> u64 {
    u32::try_from(index).ok().and_then(|index| 1_u64.checked_shl(index)).unwrap_or(0)
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Tier {
    Fresh,
    Untried,
    Any,
}

const TIERS: [Tier; 3] = [Tier::Fresh, Tier::Untried, Tier::Any];

/// How many headroom draws read a drawn deployment's buckets before the
/// choice reads every deployment's (see [`Pool::by_headroom`]).
const DRAWS: usize = 4;

/// What one choice reads of a deployment: its atomics once, up front; its
/// room (a lock and its buckets' arithmetic) only when a pass needs it, and
/// then once. Most choices read one or two deployments' buckets, not all.
#[derive(Debug, Clone)]
struct Seen {
    /// Not benched, and its circuit lets an attempt through.
    usable: bool,
    cooling: bool,
    in_flight: u32,
    room: Cell<Option<Room>>,
}

type Snapshot = [Seen; MAX_DEPLOYMENTS];

impl Seen {
    /// A slot past the pool's deployments.
    fn not_there() -> Self {
        Self { usable: false, cooling: false, in_flight: 0, room: Cell::new(Some(Room::Never)) }
    }
}

/// One choice's view of the pool: what it has read, and what it asks.
struct View<'a> {
    pool: &'a Pool,
    seen: &'a [Seen],
    demand: Demand,
    now: Instant,
}

impl View<'_> {
    fn room(&self, index: usize) -> Room {
        let Some(seen) = self.seen.get(index) else { return Room::Never };
        if let Some(room) = seen.room.get() {
            return room;
        }
        let room = match self.pool.deployments.get(index) {
            Some(deployment) => deployment.room_with(seen.in_flight, self.demand, self.now),
            None => Room::Never,
        };
        seen.room.set(Some(room));
        room
    }

    fn fits(&self, index: usize) -> bool {
        self.room(index).fits()
    }

    /// The deployments that pass `eligible`, with their places.
    fn candidates<'v>(
        &'v self,
        eligible: &'v impl Fn(usize, &Seen) -> bool,
    ) -> impl Iterator<Item = (usize, &'v Deployment, &'v Seen)> + 'v {
        self.pool
            .deployments
            .iter()
            .zip(self.seen)
            .enumerate()
            .filter(move |(index, (_, seen))| eligible(*index, seen))
            .map(|(index, (deployment, seen))| (index, deployment, seen))
    }
}

impl Deployment {
    /// Its room for `demand` at `now`: [`Room::Busy`] while as many attempts
    /// as it has concurrency permits are assigned to it (those waiting at its
    /// gate count), else what its account knows of its buckets, with the free
    /// share of its permits folded in.
    pub fn room(&self, demand: Demand, now: Instant) -> Room {
        self.room_with(self.health.in_flight(), demand, now)
    }

    fn room_with(&self, in_flight: u32, demand: Demand, now: Instant) -> Room {
        let permits_free = match self.max_concurrency {
            Some(max) if in_flight >= max => return Room::Busy { waiting: in_flight - max, slots: max },
            Some(max) => f64::from(max - in_flight) / f64::from(max),
            None => 1.0,
        };
        match self.gate.account().room(demand, now) {
            Room::Now { free } => Room::Now { free: free.min(permits_free) },
            Room::Unknown if permits_free < 1.0 => Room::Now { free: permits_free },
            room => room,
        }
    }

    fn seen(&self) -> Seen {
        Seen {
            usable: self.health.usable(),
            cooling: self.health.cooling(),
            in_flight: self.health.in_flight(),
            room: Cell::new(None),
        }
    }
}

impl Pool {
    /// The deployment the next attempt of a call goes to (its index), for an
    /// attempt asking `demand`, or `None` when none may take it (every one
    /// benched or its circuit open). The probe of a half-open circuit is
    /// claimed by the attempt it is chosen for.
    pub fn choose(&self, affinity: Option<u64>, tried: Tried, demand: Demand) -> Option<usize> {
        let mut seen: Snapshot =
            std::array::from_fn(|index| self.deployments.get(index).map_or_else(Seen::not_there, Deployment::seen));
        let count = self.deployments.len().min(MAX_DEPLOYMENTS);
        let seen = &mut seen[..count];
        let now = Instant::now();
        // Each pass either returns or passes over one deployment whose probe
        // another attempt claimed first: bounded by the number of deployments.
        for _ in 0..=count {
            let view = View { pool: self, seen, demand, now };
            let index = view.candidate(affinity, tried)?;
            if self.deployments.get(index).is_some_and(|deployment| deployment.health.claim()) {
                return Some(index);
            }
            if let Some(passed) = seen.get_mut(index) {
                passed.usable = false;
            }
        }
        None
    }

    /// Whether a deployment this call has not tried may take its next attempt.
    pub fn has_untried(&self, tried: Tried) -> bool {
        self.deployments
            .iter()
            .enumerate()
            .any(|(index, deployment)| !tried.contains(index) && deployment.health.usable())
    }
}

impl View<'_> {
    fn candidate(&self, affinity: Option<u64>, tried: Tried) -> Option<usize> {
        let in_tier = |tier: Tier, index: usize, seen: &Seen| {
            seen.usable
                && match tier {
                    Tier::Fresh => !tried.contains(index) && !seen.cooling,
                    Tier::Untried => !tried.contains(index),
                    Tier::Any => true,
                }
        };
        for tier in TIERS {
            let in_this_tier = |index: usize, seen: &Seen| in_tier(tier, index, seen);
            if let Some(affinity) = affinity {
                // The home first: only its buckets are read when the demand
                // fits there; else the best-hashed one where it fits.
                let home = self.conversation_home(affinity, &in_this_tier);
                if let Some(home) = home.filter(|home| self.fits(*home)) {
                    return Some(home);
                }
                let fitting = |index: usize, seen: &Seen| in_this_tier(index, seen) && self.fits(index);
                if let Some(index) = home.and_then(|_| self.conversation_home(affinity, &fitting)) {
                    return Some(index);
                }
            }
            if let Some(index) = self.by_headroom(&in_this_tier) {
                return Some(index);
            }
        }
        TIERS.into_iter().find_map(|tier| self.soonest(|index, seen| in_tier(tier, index, seen)))
    }

    /// The eligible deployment the conversation hashes to.
    fn conversation_home(&self, affinity: u64, eligible: &impl Fn(usize, &Seen) -> bool) -> Option<usize> {
        let mut best: Option<(usize, f64)> = None;
        for (index, deployment, _) in self.candidates(eligible) {
            let score = rendezvous(affinity, index, deployment.weight);
            if best.is_none_or(|(_, top)| score > top) {
                best = Some((index, score));
            }
        }
        best.map(|(index, _)| index)
    }

    /// An eligible deployment where the demand fits now, drawn at random
    /// weighted by its headroom (`weight × free share / (1 + in flight)`).
    ///
    /// Drawn by rejection first: a deployment is drawn by `weight / (1 + in
    /// flight)`, which needs no bucket, and kept with its free share as the
    /// probability (0 where the demand does not fit) — exactly the headroom
    /// draw, reading one deployment's buckets per draw. After [`DRAWS`]
    /// rejections (most deployments nearly full, or none fitting) every
    /// eligible deployment's room is read and the draw is made over them.
    fn by_headroom(&self, eligible: &impl Fn(usize, &Seen) -> bool) -> Option<usize> {
        let shares = Draw::new(self.candidates(eligible).map(|(index, deployment, seen)| {
            (index, f64::from(deployment.weight) / (1.0 + f64::from(seen.in_flight)))
        }));
        for _ in 0..DRAWS {
            let index = shares.draw()?;
            if fastrand::f64() < self.room(index).free() {
                return Some(index);
            }
        }
        // A full one keeps a sliver, so its share never reaches exactly nothing.
        let headrooms = Draw::new(
            shares
                .entries()
                .filter(|(index, _)| self.fits(*index))
                .map(|(index, share)| (index, (share * self.room(index).free()).max(1e-6))),
        );
        headrooms.draw()
    }

    /// The eligible deployment whose room comes soonest (the first listed of equals).
    fn soonest(&self, eligible: impl Fn(usize, &Seen) -> bool) -> Option<usize> {
        self.candidates(&eligible).map(|(index, _, _)| index).min_by_key(|index| self.room(*index).wait_rank())
    }
}

/// Places with their weights and running sums (on the stack), for draws
/// at random by weight.
struct Draw {
    places: [usize; MAX_DEPLOYMENTS],
    weights: [f64; MAX_DEPLOYMENTS],
    sums: [f64; MAX_DEPLOYMENTS],
    len: usize,
}

impl Draw {
    /// The first [`MAX_DEPLOYMENTS`] of `weighted`.
    fn new(weighted: impl Iterator<Item = (usize, f64)>) -> Self {
        let mut draw = Self {
            places: [0; MAX_DEPLOYMENTS],
            weights: [0.0; MAX_DEPLOYMENTS],
            sums: [0.0; MAX_DEPLOYMENTS],
            len: 0,
        };
        let mut sum = 0.0;
        for ((place, weight), slot) in weighted.zip(0..MAX_DEPLOYMENTS) {
            sum += weight;
            draw.places[slot] = place;
            draw.weights[slot] = weight;
            draw.sums[slot] = sum;
            draw.len = slot + 1;
        }
        draw
    }

    fn entries(&self) -> impl Iterator<Item = (usize, f64)> + '_ {
        self.places.iter().copied().zip(self.weights.iter().copied()).take(self.len)
    }

    /// A place drawn at random by its weight; `None` when there is none.
    fn draw(&self) -> Option<usize> {
        let sums = self.sums.get(..self.len)?;
        let target = fastrand::f64() * sums.last()?;
        let slot = sums.partition_point(|sum| *sum <= target).min(self.len.checked_sub(1)?);
        self.places.get(slot).copied()
    }
}

/// Weighted rendezvous hashing: each deployment draws a stable number from
/// the affinity and its place; the largest `weight / -ln(u)` wins, so over many
/// conversations each deployment's share is its weight's.
fn rendezvous(affinity: u64, index: usize, weight: u32) -> f64 {
    let mixed = splitmix64(affinity ^ (index as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    // 53 bits into (0, 1): never 0, so the logarithm is finite.
    let unit = ((mixed >> 11) as f64 + 0.5) / (1_u64 << 53) as f64;
    f64::from(weight) / -unit.ln()
}

fn splitmix64(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use super::*;
    use crate::admission::deployment::{CircuitSettings, Health};
    use crate::admission::{InProcessAccount, Limits, ModelGate};

    /// One request of ten tokens.
    const ONE: Demand = Demand { requests: 1, tokens: 10 };

    fn pool(weights: &[u32]) -> Pool {
        limited(&weights.iter().map(|weight| (*weight, Limits::default(), None)).collect::<Vec<_>>())
    }

    /// A pool whose deployments have these weights, limits and concurrency.
    fn limited(deployments: &[(u32, Limits, Option<u32>)]) -> Pool {
        let deployments = deployments
            .iter()
            .enumerate()
            .map(|(index, (weight, limits, max_concurrency))| Deployment {
                id: format!("d{index}"),
                weight: *weight,
                max_concurrency: *max_concurrency,
                gate: ModelGate::new(
                    "m",
                    Arc::new(InProcessAccount::new(*limits, tokio::time::Instant::now())),
                    *max_concurrency,
                    None,
                ),
                health: Health::new(CircuitSettings {
                    failures: 2,
                    open: Duration::from_secs(30),
                    ..CircuitSettings::default()
                }),
            })
            .collect();
        Pool::with_deployments("m", deployments)
    }

    /// Takes `demand` from the `index`-th deployment's buckets, as a call admitted there would.
    async fn take(pool: &Pool, index: usize, demand: Demand) {
        let verdict = pool.deployments[index].gate.account().try_take(demand).await;
        assert_eq!(verdict, crate::admission::Verdict::Granted);
    }

    fn shares(pool: &Pool, calls: usize, affinity: impl Fn(usize) -> Option<u64>) -> Vec<usize> {
        let mut counts = vec![0; pool.deployments.len()];
        for call in 0..calls {
            counts[pool.choose(affinity(call), Tried::default(), ONE).unwrap()] += 1;
        }
        counts
    }

    #[tokio::test]
    async fn the_spread_follows_the_weights_with_and_without_affinity() {
        let pool = pool(&[1, 3]);
        for counts in [shares(&pool, 4000, |_| None), shares(&pool, 4000, |call| Some(call as u64))] {
            let heavy = counts[1] as f64 / 4000.0;
            assert!((0.70..0.80).contains(&heavy), "weight 3 of 4 takes about 75 %: {counts:?}");
        }
    }

    #[tokio::test]
    async fn a_conversation_stays_on_one_deployment_while_it_can() {
        let pool = pool(&[1, 1, 1]);
        let home = pool.choose(Some(42), Tried::default(), ONE).unwrap();
        for _ in 0..50 {
            assert_eq!(pool.choose(Some(42), Tried::default(), ONE), Some(home));
        }
        let elsewhere = pool.choose(Some(42), Tried::default().with(home), ONE).unwrap();
        assert_ne!(elsewhere, home, "after it failed this call, the next attempt goes elsewhere");
    }

    #[tokio::test]
    async fn benched_open_and_cooling_deployments_are_passed_over() {
        let pool = pool(&[1, 1, 1]);
        pool.deployments[0].health.bench();
        pool.deployments[1].health.failed(None);
        pool.deployments[1].health.failed(None);
        for _ in 0..50 {
            assert_eq!(pool.choose(None, Tried::default(), ONE), Some(2));
        }
        pool.deployments[2].health.failed(Some(Duration::from_secs(60)));
        assert_eq!(pool.choose(None, Tried::default(), ONE), Some(2), "cooling is passed over only for another");
        assert_eq!(pool.choose(None, Tried::default().with(2), ONE), Some(2), "tried, but nothing else is left");
        pool.deployments[2].health.bench();
        assert_eq!(pool.choose(None, Tried::default(), ONE), None, "none may take it");
    }

    #[tokio::test]
    async fn busy_deployments_get_a_smaller_share() {
        let pool = pool(&[1, 1]);
        let _busy: Vec<_> = (0..9).map(|_| pool.deployments[0].health.start()).collect();
        let counts = shares(&pool, 2000, |_| None);
        assert!(counts[1] > counts[0] * 5, "ten times the headroom: {counts:?}");
    }

    #[test]
    fn tried_handles_every_index() {
        let tried = Tried::default().with(0).with(63);
        assert!(tried.contains(0) && tried.contains(63) && !tried.contains(1));
        assert!(!Tried::default().with(64).contains(64), "out of range is never marked");
    }

    fn rpm(rpm: u64) -> Limits {
        Limits { rpm: Some(rpm), ..Limits::default() }
    }

    #[tokio::test(start_paused = true)]
    async fn a_deployment_whose_requests_are_spent_is_passed_over_for_one_with_room() {
        let pool = limited(&[(1, rpm(2), None), (1, rpm(100), None)]);
        take(&pool, 0, Demand { requests: 2, tokens: 0 }).await;
        for call in 0..50 {
            assert_eq!(pool.choose(Some(call), Tried::default(), ONE), Some(1), "d0 has no request left");
        }
        // A minute later d0 is full again and takes its share.
        tokio::time::advance(Duration::from_secs(60)).await;
        let counts = shares(&pool, 400, |_| None);
        assert!(counts[0] > 100, "both have room again: {counts:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn the_spread_reads_the_buckets_levels() {
        let tokens = |tpm| Limits { tpm: Some(tpm), ..Limits::default() };
        let pool = limited(&[(1, tokens(10_000), None), (1, tokens(10_000), None)]);
        take(&pool, 0, Demand { requests: 1, tokens: 9_000 }).await;
        let counts = shares(&pool, 2000, |_| None);
        assert!(counts[1] > counts[0] * 5, "d0 keeps a tenth of its tokens: {counts:?}");
    }

    /// The draw by rejection (most deployments with room) and the draw over
    /// every room (all nearly full, so draws are rejected) give the same
    /// shares: weight × free share / (1 + in flight).
    #[tokio::test(start_paused = true)]
    async fn the_headroom_draw_gives_each_its_share_whether_or_not_draws_are_rejected() {
        let tokens = |tpm| Limits { tpm: Some(tpm), ..Limits::default() };
        let pool = limited(&[(1, tokens(10_000), None), (1, tokens(10_000), None), (2, tokens(10_000), None)]);
        take(&pool, 1, Demand { requests: 1, tokens: 5_000 }).await;
        take(&pool, 2, Demand { requests: 1, tokens: 9_000 }).await;
        // Headrooms 1, 0.5 and 2 × 0.1: shares 1/1.7, 0.5/1.7, 0.2/1.7.
        let counts = shares(&pool, 6000, |_| None);
        for (count, expected) in counts.iter().zip([1.0 / 1.7, 0.5 / 1.7, 0.2 / 1.7]) {
            let share = *count as f64 / 6000.0;
            assert!((share - expected).abs() < 0.03, "{counts:?} against {expected}");
        }
        let nearly_full = limited(&[(1, tokens(10_000), None), (1, tokens(10_000), None)]);
        take(&nearly_full, 0, Demand { requests: 1, tokens: 9_800 }).await;
        take(&nearly_full, 1, Demand { requests: 1, tokens: 9_900 }).await;
        // Free shares 0.02 and 0.01: almost every draw is rejected.
        let counts = shares(&nearly_full, 3000, |_| None);
        let share = counts[0] as f64 / 3000.0;
        assert!((share - 2.0 / 3.0).abs() < 0.04, "two to one: {counts:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn a_demand_no_deployment_takes_now_waits_where_room_comes_soonest() {
        let pool = limited(&[(1, rpm(60), None), (1, rpm(6), None), (1, rpm(60), Some(1))]);
        take(&pool, 0, Demand { requests: 60, tokens: 0 }).await;
        take(&pool, 1, Demand { requests: 6, tokens: 0 }).await;
        let _busy = pool.deployments[2].health.start();
        // d0 refills one request a second, d1 one in ten seconds, d2's one permit is held.
        for call in 0..20 {
            assert_eq!(pool.choose(Some(call), Tried::default(), ONE), Some(0));
        }
        assert_eq!(pool.choose(None, Tried::default().with(0), ONE), Some(1), "an untried deployment first");
    }

    #[tokio::test]
    async fn a_deployment_that_can_never_take_the_demand_is_passed_over() {
        let tokens = |tpm| Limits { tpm: Some(tpm), ..Limits::default() };
        let pool = limited(&[(5, tokens(1_000), None), (1, tokens(100_000), None)]);
        let large = Demand { requests: 1, tokens: 5_000 };
        for call in 0..30 {
            assert_eq!(pool.choose(Some(call), Tried::default(), large), Some(1));
        }
    }

    #[tokio::test]
    async fn a_conversation_whose_home_is_full_goes_to_the_same_second_home() {
        let pool = limited(&[
            (1, Limits::default(), Some(1)),
            (1, Limits::default(), Some(1)),
            (1, Limits::default(), Some(1)),
        ]);
        let home = pool.choose(Some(9), Tried::default(), ONE).unwrap();
        let _busy = pool.deployments[home].health.start();
        let second = pool.choose(Some(9), Tried::default(), ONE).unwrap();
        assert_ne!(second, home, "its home's one permit is held");
        for _ in 0..20 {
            assert_eq!(pool.choose(Some(9), Tried::default(), ONE), Some(second), "stable while the home is full");
        }
    }

    #[tokio::test]
    async fn when_every_slot_is_held_an_attempt_waits_where_fewest_wait_per_slot() {
        let pool = limited(&[(1, Limits::default(), Some(1)), (1, Limits::default(), Some(2))]);
        let _held: Vec<_> = (0..3).map(|_| pool.deployments[0].health.start()).collect();
        let _also: Vec<_> = (0..3).map(|_| pool.deployments[1].health.start()).collect();
        // d0: two waiting on one slot; d1: one waiting on two slots.
        assert_eq!(pool.deployments[0].room(ONE, Instant::now()), Room::Busy { waiting: 2, slots: 1 });
        assert_eq!(pool.choose(None, Tried::default(), ONE), Some(1));
        let _more: Vec<_> = (0..4).map(|_| pool.deployments[1].health.start()).collect();
        assert_eq!(pool.choose(None, Tried::default(), ONE), Some(0), "d1 now has 2.5 waiting per slot");
    }
}
