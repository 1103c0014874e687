//! The budgets' checks at load (see `crate::budget` for what they do at run
//! time).

use super::{BudgetFields, Config, KeyEntry, ModelEntry};
use crate::accounting::Timezone;

/// Config checks at load: the timezone reads, no amount is negative or not a
/// number, and a USD budget (or `max_call_usd`)
/// that could apply to a call on an entry without prices is an error naming
/// the budget and the entry. A key reaches every entry its `models` does not
/// exclude; a member or team reaches what its keys reach, or every entry when
/// none of the keys names it (a library caller may name any member).
pub fn validate(config: &Config) -> Result<(), String> {
    config.budget_timezone.as_deref().map_or(Ok(Timezone::UTC), Timezone::parse)?;
    let mut scopes: Vec<(String, BudgetFields)> = Vec::new();
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
    fields: &BudgetFields,
    reaches: impl Fn(&ModelEntry) -> bool,
) -> Result<(), String> {
    // 0 is unlimited, as the budget book reads it.
    let set = |usd: Option<f64>| usd.is_some_and(|usd| usd > 0.0);
    let Some(budget) =
        [(fields.daily_usd, "daily_usd"), (fields.monthly_usd, "monthly_usd"), (fields.max_call_usd, "max_call_usd")]
            .into_iter()
            .find_map(|(usd, name)| set(usd).then_some(name))
    else {
        return Ok(());
    };
    match config.models.iter().find(|entry| reaches(entry) && !entry.priced()) {
        Some(entry) => Err(format!(
            "{scope} has `{budget}`, and model `{}`, which it can call, declares no price (`input_price` \
             and `output_price`; `input_price` alone for embeddings; `search_price` for a reranker billed by the \
             search): its calls could not be counted against a USD budget (price the entry, or leave it \
             out of the key's `models`)",
            entry.id
        )),
        None => Ok(()),
    }
}

/// Whether `key` may call `entry`: its `models` list the entry, or a role
/// that names the entry or its grade; no list reaches everything.
fn reaches(config: &Config, key: &KeyEntry, entry: &ModelEntry) -> bool {
    let Some(models) = &key.models else { return true };
    models.iter().any(|name| {
        name == &entry.id
            || config.roles.get(name).is_some_and(|role| {
                role.model.as_ref() == Some(&entry.id)
                    || role.grade.as_ref().is_some_and(|grade| entry.grade.as_ref() == Some(grade))
            })
    })
}
