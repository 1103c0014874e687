//! Budgets: per-key, per-member and per-team ceilings on tokens and USD, by
//! day and by month, and per call — held before a call is made, like
//! admission, so concurrent calls cannot overspend them.
//!
//! ```text
//! run: target ─► policy ─► worst case (input estimate + output reserve, priced)
//!   ─► BudgetBook::hold over every budget that applies (key, member, team): whole or nothing
//!   ─► the first attempt
//!   ─► each later attempt (retry, escalation, correction, empty re-run):
//!        Hold::top_up(spent so far + its worst case), the difference held, or the call ends
//!   ─► its record closes ─► Hold::settle(actual usage and cost)
//! ```
//!
//! - [`limits`]: scopes, kinds, amounts, the limits read from the config.
//! - [`clock`]: the clock the book reads and the calendar periods (UTC or a fixed offset).
//! - [`book`]: the accounts, holds and settlement.
//! - [`rebuild`]: the spend of the current periods, read back from the ledger at start.

mod book;
mod clock;
mod limits;
mod rebuild;

#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::sync::Arc;

pub use book::{BudgetBook, BudgetStatus, Hold};
pub use clock::{Clock, ManualClock, Period, SystemClock, Timezone};
pub use limits::{Amount, Kind, Limits, Scope, Spend, total_tokens};
pub use rebuild::{FleetLedgerSpend, rebuild, spent_by};

use crate::catalog::{Config, ModelEntry, ModelSpec};
use crate::record::CacheMultipliers;
use crate::record::Tokens;

/// The book of a (validated) configuration's budgets.
pub fn book(config: &Config, clock: Arc<dyn Clock>) -> Result<BudgetBook, String> {
    let timezone = timezone(config)?;
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
    Ok(BudgetBook::new(limits, timezone, clock))
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
    let usd = match (model.prices.cost(&plain, multipliers), model.prices.cost(&written, multipliers)) {
        (Some(plain), Some(written)) => Some(plain.max(written)),
        (plain, written) => plain.or(written),
    };
    Spend { tokens: input.saturating_add(output), usd }
}

/// What attempts that reported `usage` spent, priced at the entry's prices
/// as the call's record prices it.
pub fn spent(model: &ModelSpec, usage: &Tokens) -> Spend {
    let multipliers = CacheMultipliers { read: model.cache_read_multiplier, write: model.cache_write_multiplier };
    Spend::of(usage, model.prices.cost(usage, multipliers))
}

/// Config checks at load: the timezone reads, no amount is negative or not a
/// number, and a USD budget (or `max_call_usd`)
/// that could apply to a call on an entry without prices is an error naming
/// the budget and the entry. A key reaches every entry its `models` does not
/// exclude; a member or team reaches what its keys reach, or every entry when
/// none of the keys names it (a library caller may name any member).
pub fn validate(config: &Config) -> Result<(), String> {
    timezone(config)?;
    let mut scopes: Vec<(String, crate::catalog::BudgetFields)> = Vec::new();
    scopes.extend(config.keys.iter().map(|key| (format!("key `{}`", key.id), key.budget())));
    scopes.extend(config.members.iter().map(|(name, member)| (format!("[member.{name}]"), member.budget())));
    scopes.extend(config.teams.iter().map(|(name, team)| (format!("[team.{name}]"), *team)));
    for (scope, fields) in &scopes {
        let amounts = [fields.daily_usd, fields.monthly_usd, fields.max_call_usd];
        if amounts.into_iter().flatten().any(|usd| !usd.is_finite() || usd < 0.0) {
            return Err(format!("{scope}: USD budgets must be finite and not negative"));
        }
    }
    for key in &config.keys {
        usd_needs_prices(config, &format!("key `{}`", key.id), &key.budget(), |entry| reaches(config, key, entry))?;
    }
    for (name, member) in &config.members {
        let keys: Vec<_> = config.keys.iter().filter(|key| &key.member == name).collect();
        usd_needs_prices(config, &format!("[member.{name}]"), &member.budget(), |entry| {
            keys.is_empty() || keys.iter().any(|key| reaches(config, key, entry))
        })?;
    }
    for (name, team) in &config.teams {
        let keys: Vec<_> = config.keys.iter().filter(|key| key.team.as_ref() == Some(name)).collect();
        usd_needs_prices(config, &format!("[team.{name}]"), team, |entry| {
            keys.is_empty() || keys.iter().any(|key| reaches(config, key, entry))
        })?;
    }
    Ok(())
}

fn usd_needs_prices(
    config: &Config,
    scope: &str,
    fields: &crate::catalog::BudgetFields,
    reaches: impl Fn(&ModelEntry) -> bool,
) -> Result<(), String> {
    let limits = Limits::from_fields(fields);
    if !limits.counts_usd() {
        return Ok(());
    }
    let budget = [
        (limits.daily_usd.is_some(), "daily_usd"),
        (limits.monthly_usd.is_some(), "monthly_usd"),
        (limits.max_call_usd.is_some(), "max_call_usd"),
    ]
    .into_iter()
    .find_map(|(set, name)| set.then_some(name))
    .unwrap_or("a USD budget");
    match config
        .models
        .iter()
        .find(|entry| reaches(entry) && (entry.input_price.is_none() || entry.output_price.is_none()))
    {
        Some(entry) => Err(format!(
            "{scope} has `{budget}`, and model `{}`, which it can call, declares no `input_price` and \
             `output_price`: its calls could not be counted against a USD budget (price the entry, or leave it \
             out of the key's `models`)",
            entry.id
        )),
        None => Ok(()),
    }
}

/// Whether `key` may call `entry`: its `models` list the entry, or a role
/// that names the entry or its grade; no list reaches everything.
fn reaches(config: &Config, key: &crate::catalog::KeyEntry, entry: &ModelEntry) -> bool {
    let Some(models) = &key.models else { return true };
    models.iter().any(|name| {
        name == &entry.id
            || config.roles.get(name).is_some_and(|role| {
                role.model.as_ref() == Some(&entry.id)
                    || role.grade.as_ref().is_some_and(|grade| entry.grade.as_ref() == Some(grade))
            })
    })
}
