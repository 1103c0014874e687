//! Which deployment an attempt goes to.
//!
//! In order of preference, among deployments not benched and whose circuit
//! lets an attempt through:
//! 1. those this call has not tried and that are not cooling down after a
//!    slow-down signal (their throttle engaged);
//! 2. those this call has not tried;
//! 3. any, a deployment that failed this call included (only when nothing
//!    else is left).
//!
//! Within the first tier that has any, a call with an affinity (see
//! [`super::affinity_of`]) goes to its conversation's deployment — the
//! weighted rendezvous hash of the affinity, stable while the deployments are
//! — as long as that one has a free concurrency slot; otherwise, and for a
//! call without affinity, the deployment is drawn at random weighted by its
//! headroom: `weight × free share of its concurrency / (1 + attempts in
//! flight)`. A slow deployment holds more attempts in flight, so its share
//! drops.

use super::{Deployment, Pool};

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

impl Pool {
    /// The deployment the next attempt of a call goes to (its index), or
    /// `None` when none may take it (every one benched or its circuit open).
    /// The probe of a half-open circuit is claimed by the attempt it is chosen for.
    pub fn choose(&self, affinity: Option<u64>, tried: Tried) -> Option<usize> {
        let mut passed = Tried::default();
        // Each pass either returns or passes over one deployment whose probe
        // another attempt claimed first: bounded by the number of deployments.
        for _ in 0..=self.deployments.len() {
            let index = self.candidate(affinity, tried, passed)?;
            if self.deployments.get(index).is_some_and(|deployment| deployment.health.claim()) {
                return Some(index);
            }
            passed = passed.with(index);
        }
        None
    }

    /// Whether a deployment this call has not tried may take its next attempt.
    pub fn has_untried(&self, tried: Tried) -> bool {
        self.deployments.iter().enumerate().any(|(index, deployment)| {
            !tried.contains(index) && !deployment.health.benched() && deployment.health.admits()
        })
    }

    fn candidate(&self, affinity: Option<u64>, tried: Tried, passed: Tried) -> Option<usize> {
        let usable = |index: usize, deployment: &Deployment| {
            !passed.contains(index) && !deployment.health.benched() && deployment.health.admits()
        };
        let in_tier = |tier: Tier, index: usize, deployment: &Deployment| {
            usable(index, deployment)
                && match tier {
                    Tier::Fresh => !tried.contains(index) && !deployment.health.cooling(),
                    Tier::Untried => !tried.contains(index),
                    Tier::Any => true,
                }
        };
        for tier in [Tier::Fresh, Tier::Untried, Tier::Any] {
            let eligible = |index: usize, deployment: &Deployment| in_tier(tier, index, deployment);
            if let Some(affinity) = affinity
                && let Some(index) = self.conversation_home(affinity, eligible)
            {
                return Some(index);
            }
            if let Some(index) = self.by_headroom(eligible) {
                return Some(index);
            }
        }
        None
    }

    /// The eligible deployment the conversation hashes to, if it has room now.
    fn conversation_home(&self, affinity: u64, eligible: impl Fn(usize, &Deployment) -> bool) -> Option<usize> {
        let mut best: Option<(usize, f64)> = None;
        for (index, deployment) in self.deployments.iter().enumerate() {
            if !eligible(index, deployment) {
                continue;
            }
            let score = rendezvous(affinity, index, deployment.weight);
            if best.is_none_or(|(_, top)| score > top) {
                best = Some((index, score));
            }
        }
        let (index, _) = best?;
        let home = self.deployments.get(index)?;
        let has_room = home.max_concurrency.is_none_or(|max| home.health.in_flight() < max);
        has_room.then_some(index)
    }

    /// An eligible deployment drawn at random, weighted by its headroom.
    fn by_headroom(&self, eligible: impl Fn(usize, &Deployment) -> bool) -> Option<usize> {
        let total: f64 =
            self.deployments.iter().enumerate().filter(|(i, d)| eligible(*i, d)).map(|(_, d)| headroom(d)).sum();
        let mut last = None;
        let mut left = fastrand::f64() * total;
        for (index, deployment) in self.deployments.iter().enumerate() {
            if !eligible(index, deployment) {
                continue;
            }
            last = Some(index);
            left -= headroom(deployment);
            if left < 0.0 {
                return Some(index);
            }
        }
        last
    }
}

/// A deployment's weighted headroom; a full one keeps a sliver, so a call
/// finds one (and waits in its gate) when every deployment is full.
fn headroom(deployment: &Deployment) -> f64 {
    let in_flight = deployment.health.in_flight();
    let free = match deployment.max_concurrency {
        Some(max) => f64::from(max.saturating_sub(in_flight)) / f64::from(max),
        None => 1.0,
    };
    (f64::from(deployment.weight) * free / (1.0 + f64::from(in_flight))).max(1e-6)
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

    fn pool(weights: &[u32]) -> Pool {
        let deployments = weights
            .iter()
            .enumerate()
            .map(|(index, weight)| Deployment {
                id: format!("d{index}"),
                weight: *weight,
                max_concurrency: None,
                gate: ModelGate::new(
                    "m",
                    Arc::new(InProcessAccount::new(Limits::default(), tokio::time::Instant::now())),
                    None,
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

    fn shares(pool: &Pool, calls: usize, affinity: impl Fn(usize) -> Option<u64>) -> Vec<usize> {
        let mut counts = vec![0; pool.deployments.len()];
        for call in 0..calls {
            counts[pool.choose(affinity(call), Tried::default()).unwrap()] += 1;
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
        let home = pool.choose(Some(42), Tried::default()).unwrap();
        for _ in 0..50 {
            assert_eq!(pool.choose(Some(42), Tried::default()), Some(home));
        }
        let elsewhere = pool.choose(Some(42), Tried::default().with(home)).unwrap();
        assert_ne!(elsewhere, home, "after it failed this call, the next attempt goes elsewhere");
    }

    #[tokio::test]
    async fn benched_open_and_cooling_deployments_are_passed_over() {
        let pool = pool(&[1, 1, 1]);
        pool.deployments[0].health.bench();
        pool.deployments[1].health.failed(None);
        pool.deployments[1].health.failed(None);
        for _ in 0..50 {
            assert_eq!(pool.choose(None, Tried::default()), Some(2));
        }
        pool.deployments[2].health.failed(Some(Duration::from_secs(60)));
        assert_eq!(pool.choose(None, Tried::default()), Some(2), "cooling is passed over only for another");
        assert_eq!(pool.choose(None, Tried::default().with(2)), Some(2), "tried, but nothing else is left");
        pool.deployments[2].health.bench();
        assert_eq!(pool.choose(None, Tried::default()), None, "none may take it");
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
}
