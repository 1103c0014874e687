//! A shared account leased in blocks, so the fleet's Redis runs one script
//! per block instead of one per call (issue 52, item 4b).
//!
//! An interactive take that the gateway's block cannot cover runs one `lease`
//! of `account.lua`: it gives the block's remainder back, takes the demand
//! whole exactly as a per-call take would (or answers the same wait), and
//! takes up to an extra on each axis from what is left. The next calls are
//! admitted from that extra in memory. The extra is sized to
//! [`BLOCK_SPAN`] of this gateway's recent admission rate, at most twice the
//! last block plus the demand (so it ramps up over a few leases) and at most
//! `1 /` [`BLOCK_SHARE_OF_LIMIT`] of each limit. What a block still holds
//! [`BLOCK_LIFETIME`] after it was leased is given back, and so is a block
//! whose account is dropped (a reload) or whose gateway stops
//! ([`crate::admission::RateStore::give_back`]).
//!
//! **What it loosens.** Every admitted call was taken from the shared bucket,
//! so over the fleet's life nothing is over-admitted; but a call admitted from
//! a block spends capacity taken earlier. Over any window, the fleet sends at
//! most what the shared bucket grants in that window plus what was leased and
//! unspent when the window opened: at most N gateways ×
//! `limit /` [`BLOCK_SHARE_OF_LIMIT`] per axis. A limit under
//! [`BLOCK_SHARE_OF_LIMIT`] has no extra at all, and every call is taken
//! exactly as before. A gateway killed holding a block loses at most that
//! block; the bucket's refill replaces it within `60 s /`
//! [`BLOCK_SHARE_OF_LIMIT`] (0.6 s) at the normal rate.
//!
//! A bulk take (one that must leave the interactive share) is not admitted
//! from a block: it runs the per-call `take`, whose reserve is checked against
//! the shared level (blocks count as spent there, so the reserve holds).

use std::sync::{Arc, Mutex, PoisonError, Weak};

use tokio::time::{Duration, Instant};

use super::redis_store::{LeaseAnswer, RedisAccount};
use crate::admission::{BoxFuture, Demand, Feedback, InteractiveShare, RateAccount, Room, Verdict};

/// A block is sized to this long of the gateway's recent admission.
pub const BLOCK_SPAN: Duration = Duration::from_millis(100);
/// What a block still holds this long after it was leased is given back.
pub const BLOCK_LIFETIME: Duration = Duration::from_secs(1);
/// A block holds at most `1 /` this of each limit per minute.
pub const BLOCK_SHARE_OF_LIMIT: u64 = 100;

/// A [`RedisAccount`] whose interactive takes are admitted from blocks.
#[derive(Clone)]
pub struct LeasedAccount {
    leased: Arc<Leased>,
}

impl std::fmt::Debug for LeasedAccount {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeasedAccount").field("account", &self.leased.account).finish_non_exhaustive()
    }
}

pub(super) struct Leased {
    account: Arc<RedisAccount>,
    block: Mutex<Block>,
    /// One lease at a time per account: callers the block cannot cover wait
    /// for the lease in flight and try its block before leasing again.
    leasing: tokio::sync::Mutex<()>,
}

/// This gateway's block of one account, and its recent admission rate.
#[derive(Debug, Default)]
struct Block {
    /// What is left to admit from (on the limited axes).
    left: Demand,
    /// When the block is given back; `None`: no block.
    expires: Option<Instant>,
    /// Which lease `left` came from, so a late expiry leaves a newer block alone.
    generation: u64,
    /// When the last lease was granted.
    leased_at: Option<Instant>,
    /// Admitted since then (the lease's own demand included).
    spent: Demand,
    /// The last block's extra.
    size: Demand,
}

impl Block {
    fn live(&self, now: Instant) -> bool {
        self.expires.is_some_and(|expires| now < expires)
    }

    /// Whether it is live and holds `demand` on each `limited` axis
    /// (requests, tokens): an unlimited axis is never leased nor checked.
    fn covers(&self, demand: Demand, limited: (bool, bool), now: Instant) -> bool {
        self.live(now)
            && (!limited.0 || self.left.requests >= demand.requests)
            && (!limited.1 || self.left.tokens >= demand.tokens)
    }

    /// Adds `amount` (taken out, or given back) on each `limited` axis.
    fn credit(&mut self, amount: Demand, limited: (bool, bool)) {
        if limited.0 {
            self.left.requests += amount.requests;
        }
        if limited.1 {
            self.left.tokens += amount.tokens;
        }
    }

    /// Takes the remainder out (to give back).
    fn empty(&mut self) -> Demand {
        self.expires = None;
        std::mem::take(&mut self.left)
    }
}

impl LeasedAccount {
    pub(super) fn new(account: RedisAccount) -> Self {
        let leased = Leased {
            account: Arc::new(account),
            block: Mutex::new(Block::default()),
            leasing: tokio::sync::Mutex::new(()),
        };
        Self { leased: Arc::new(leased) }
    }

    /// The shared state behind it, for the store's list of blocks to give back.
    pub(super) fn downgrade(&self) -> Weak<Leased> {
        Arc::downgrade(&self.leased)
    }

    /// What the block holds now (on the limited axes; nothing once expired).
    pub fn block_left(&self) -> Demand {
        let now = Instant::now();
        self.leased.with_block(|block| if block.live(now) { block.left } else { Demand::default() })
    }

    /// Gives the block's remainder back now.
    pub async fn give_back(&self) {
        self.leased.give_back(None).await;
    }
}

impl Leased {
    fn with_block<T>(&self, f: impl FnOnce(&mut Block) -> T) -> T {
        let mut block = self.block.lock().unwrap_or_else(PoisonError::into_inner);
        f(&mut block)
    }

    fn limited(&self) -> (bool, bool) {
        let limits = self.account.limits();
        (limits.rpm.is_some(), limits.tpm.is_some())
    }

    /// Admits `demand` from a live block, if it holds that much.
    fn take_from_block(&self, demand: Demand, now: Instant) -> bool {
        let limited = self.limited();
        self.with_block(|block| {
            if !block.covers(demand, limited, now) {
                return false;
            }
            if limited.0 {
                block.left.requests -= demand.requests;
            }
            if limited.1 {
                block.left.tokens -= demand.tokens;
            }
            block.spent = block.spent + demand;
            true
        })
    }

    /// The extra to lease beside `demand`: [`BLOCK_SPAN`] of the rate since
    /// the last lease, at most twice the last block plus the demand, at most
    /// the limit's share; nothing before a first lease or on an unlimited axis.
    fn next_extra(&self, block: &Block, demand: Demand, now: Instant) -> Demand {
        let Some(since) = block.leased_at else { return Demand::default() };
        let elapsed = now.saturating_duration_since(since).as_nanos().max(1);
        let limits = self.account.limits();
        let axis = |limit: Option<u64>, spent: u64, size: u64, demand: u64| {
            let Some(limit) = limit else { return 0 };
            let rate_based = u128::from(spent + demand) * BLOCK_SPAN.as_nanos() / elapsed;
            let ramp = 2 * u128::from(size + demand);
            let cap = u128::from(limit / BLOCK_SHARE_OF_LIMIT);
            let target = u64::try_from(rate_based.min(ramp).min(cap)).unwrap_or(0);
            target.saturating_sub(demand)
        };
        Demand {
            requests: axis(limits.rpm, block.spent.requests, block.size.requests, demand.requests),
            tokens: axis(limits.tpm, block.spent.tokens, block.size.tokens, demand.tokens),
        }
    }

    /// The block cannot cover `demand`: give its remainder back and lease
    /// the demand with the next block, in one script run.
    async fn lease(self: &Arc<Self>, demand: Demand) -> Verdict {
        let _turn = self.leasing.lock().await;
        let now = Instant::now();
        if self.take_from_block(demand, now) {
            return Verdict::Granted;
        }
        let (returned, extra) = self.with_block(|block| (block.empty(), self.next_extra(block, demand, now)));
        match self.account.lease(returned, demand, extra).await {
            Some(LeaseAnswer::Granted { extra }) => {
                self.hold(demand, extra, now);
                Verdict::Granted
            }
            Some(LeaseAnswer::Wait(wait)) => {
                self.with_block(|block| block.size = Demand::default());
                Verdict::NotBefore(Instant::now() + wait)
            }
            Some(LeaseAnswer::Never(shortfall)) => Verdict::Never(shortfall),
            None => {
                // Redis is out: the remainder is still this gateway's to spend.
                self.with_block(|block| {
                    block.left = returned;
                    block.expires = Some(now + BLOCK_LIFETIME);
                });
                self.account.try_take_reserving(demand, InteractiveShare::NONE).await
            }
        }
    }

    /// Holds a new block of `extra` (leased with `demand` at `now`), and
    /// schedules its give-back.
    fn hold(self: &Arc<Self>, demand: Demand, extra: Demand, now: Instant) {
        let expires = now + BLOCK_LIFETIME;
        let generation = self.with_block(|block| {
            *block = Block {
                left: extra,
                expires: Some(expires),
                generation: block.generation + 1,
                leased_at: Some(now),
                spent: demand,
                size: extra,
            };
            block.generation
        });
        if extra == Demand::default() {
            return;
        }
        let leased = Arc::downgrade(self);
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            drop(runtime.spawn(async move {
                tokio::time::sleep_until(expires).await;
                if let Some(leased) = leased.upgrade() {
                    leased.give_back(Some(generation)).await;
                }
            }));
        }
    }

    /// Gives the block back (only if it is still `generation`'s, when given).
    /// A give-back Redis does not take is lost: the fleet then has fewer
    /// tokens until the bucket refills, never more.
    pub(super) async fn give_back(&self, generation: Option<u64>) {
        let returned = self.with_block(|block| {
            if generation.is_some_and(|generation| generation != block.generation) {
                return Demand::default();
            }
            block.empty()
        });
        if returned != Demand::default() {
            self.account.give_back(returned).await;
        }
    }
}

impl Drop for Leased {
    /// A dropped account (a reload replaced it) gives its block back.
    fn drop(&mut self) {
        let returned = self.with_block(Block::empty);
        if returned == Demand::default() {
            return;
        }
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            let account = Arc::clone(&self.account);
            drop(runtime.spawn(async move { account.give_back(returned).await }));
        }
    }
}

impl RateAccount for LeasedAccount {
    fn try_take_reserving(&self, demand: Demand, share: InteractiveShare) -> BoxFuture<'_, Verdict> {
        Box::pin(async move {
            if self.leased.account.unlimited() {
                return Verdict::Granted;
            }
            if share != InteractiveShare::NONE {
                return self.leased.account.try_take_reserving(demand, share).await;
            }
            if self.leased.take_from_block(demand, Instant::now()) {
                return Verdict::Granted;
            }
            self.leased.lease(demand).await
        })
    }

    fn forecast_reserving(&self, demand: Demand, share: InteractiveShare) -> BoxFuture<'_, Instant> {
        self.leased.account.forecast_reserving(demand, share)
    }

    /// A live block takes the demand back (no script run); without one, the
    /// shared bucket does.
    fn give(&self, demand: Demand) -> BoxFuture<'_, ()> {
        let now = Instant::now();
        let limited = self.leased.limited();
        let kept = self.leased.with_block(|block| {
            let live = block.live(now);
            if live {
                block.credit(demand, limited);
            }
            live
        });
        if kept { Box::pin(std::future::ready(())) } else { self.leased.account.give(demand) }
    }

    fn feedback(&self, signal: Feedback) -> BoxFuture<'_, ()> {
        self.leased.account.feedback(signal)
    }

    fn coefficient(&self) -> BoxFuture<'_, f64> {
        self.leased.account.coefficient()
    }

    /// A block that holds the demand fits now; otherwise what the last
    /// lease learned of the shared buckets.
    fn room(&self, demand: Demand, now: Instant) -> Room {
        let shared = self.leased.account.room(demand, now);
        let limited = self.leased.limited();
        let covered = self.leased.with_block(|block| block.covers(demand, limited, now));
        if covered { Room::Now { free: shared.free() } } else { shared }
    }
}
