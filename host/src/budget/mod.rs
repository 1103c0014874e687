//! Budgets: per-key, per-member and per-team ceilings on tokens and USD, by
//! day and by month, and per call — held before a call is made, like
//! admission, so concurrent calls cannot overspend them.
//!
//! ```text
//! run: target ─► policy ─► worst case (input estimate + output reserve, priced,
//!        plus a web search tool's bound at the entry's web search price)
//!   ─► BudgetBook::hold over every budget that applies (key, member, team): whole or nothing
//!   ─► the first attempt
//!   ─► each later attempt (retry, escalation, correction, empty re-run):
//!        Hold::top_up(spent so far + its worst case), the difference held, or the call ends
//!   ─► its record closes ─► Hold::settle(actual usage and cost)
//! ```
//!
//! - [`crate::accounting`]: scopes, kinds, amounts, spend; the clock the book reads and the
//!   calendar periods (UTC or a fixed offset).
//! - [`limits`]: the limits read from the config.
//! - [`book`]: the accounts, holds and settlement.
//! - [`rebuild`]: the spend of the current periods, read back from the ledger at start.

mod book;
mod limits;
mod rebuild;

#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::sync::Arc;

pub use crate::accounting::{
    Amount, Clock, Kind, ManualClock, Period, Scope, Spend, SystemClock, Timezone, total_tokens,
};
pub use book::{BudgetBook, BudgetError, BudgetStatus, Hold};
pub use limits::Limits;
pub use rebuild::{FleetLedgerSpend, rebuild, rebuild_scopes, spent_by};

use crate::catalog::{Config, ModelSpec};
use crate::record::CacheMultipliers;
use crate::record::Tokens;

/// The book of a (validated) configuration's budgets.
pub fn book(config: &Config, clock: Arc<dyn Clock>) -> Result<BudgetBook, String> {
    let timezone = timezone(config)?;
    Ok(BudgetBook::new(file_limits(config), timezone, clock))
}

/// The limits the config file sets, by scope (the admin plane adds its own).
pub fn file_limits(config: &Config) -> HashMap<Scope, Limits> {
    let mut limits = HashMap::new();
    for key in &config.keys {
        limits.insert(Scope::Key(key.id.clone()), Limits::from_fields(&key.budget()));
    }
    for (name, member) in &config.members {
        limits.insert(Scope::Member(name.clone()), Limits::from_fields(&member.budget()));
    }
    for (name, team) in &config.teams {
        limits.insert(Scope::Team(name.clone()), Limits::from_fields(team));
    }
    limits
}

fn timezone(config: &Config) -> Result<Timezone, String> {
    config.budget_timezone.as_deref().map_or(Ok(Timezone::UTC), Timezone::parse)
}

/// A call's worst case: the input estimate plus the output reserve, in
/// tokens, and priced at the entry's prices with the whole input at the
/// dearer of its uncached and cache-write prices (a call may write all of it
/// to the cache). `usd` is `None` for an entry without prices.
pub fn worst_case(model: &ModelSpec, input: u64, output: u32) -> Spend {
    let output = u64::from(output);
    let multipliers = CacheMultipliers { read: model.cache_read_multiplier, write: model.cache_write_multiplier };
    let plain = Tokens { input, output, ..Tokens::default() };
    let written = Tokens { cache_write: input, output, ..Tokens::default() };
    let usd = match (model.prices.cost(&plain, 0, multipliers), model.prices.cost(&written, 0, multipliers)) {
        (Some(plain), Some(written)) => Some(plain.max(written)),
        (plain, written) => plain.or(written),
    };
    Spend { tokens: input.saturating_add(output), usd }
}

/// A ranking's worst case: its input estimate, priced per search at
/// `searches` when the entry prices searches (see [`worst_case`] otherwise).
pub fn worst_case_of_searches(model: &ModelSpec, input: u64, searches: u64) -> Spend {
    let multipliers = CacheMultipliers { read: model.cache_read_multiplier, write: model.cache_write_multiplier };
    match model.prices.search {
        Some(_) => Spend { tokens: input, usd: model.prices.cost(&Tokens::default(), searches, multipliers) },
        None => worst_case(model, input, 0),
    }
}

/// What attempts that reported `usage` spent, priced at the entry's prices
/// as the call's record prices it.
pub fn spent(model: &ModelSpec, usage: &Tokens) -> Spend {
    let multipliers = CacheMultipliers { read: model.cache_read_multiplier, write: model.cache_write_multiplier };
    Spend::of(usage, model.prices.cost(usage, 0, multipliers))
}

/// `spend` with `searches` web searches added at `per_thousand` USD (the
/// call's web search price): nothing added without one, nor to a spend that
/// is not priced (an entry without token prices stays unpriced, as a USD
/// budget must see).
pub fn with_web_searches(per_thousand: Option<f64>, spend: Spend, searches: u64) -> Spend {
    let searched = per_thousand.map_or(0.0, |price| searches as f64 * price / 1000.0);
    Spend { usd: spend.usd.map(|usd| usd + searched), ..spend }
}
