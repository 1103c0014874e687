//! Budget holds and settled spend in Redis (`budgets.lua`), so a member's
//! daily budget is exact across the fleet: the hold is one atomic script over
//! every account the call is held against, whole or nothing, as the
//! in-process book does it.
//!
//! **On a Redis Cluster** a script's keys must share a slot, and each budget
//! account is tagged by its scope (`keys.rs`), so a call held against its
//! key's, member's and team's budgets runs one hold per scope, at once, each
//! whole or nothing in its slot; when one is refused (or its node is out),
//! the holds the others took are given back at once. No budget is ever
//! overspent (each scope's check and hold stay one atomic step); what loosens
//! is only this: for that round trip, another call may be refused by a hold
//! that is then given back. A give-back Redis does not take stays held (less
//! to spend, never more) until the period's account expires, as a lost
//! settle does. Settles, releases and reads run one script per scope too.

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use super::SharedErrorPolicy;
use super::keys::hash_tag;
use super::redis_store::Shared;
use crate::accounting::{Amount, Kind, Period, Scope, Spend};

const SCRIPT: &str = include_str!("budgets.lua");
/// An account outlives its period by a day (for `/v1/usage` right after it).
const KEPT_AFTER_PERIOD_SECS: u64 = 86_400;

/// Where an account that Redis does not hold gets its spend: the fleet's
/// ledger (the spend of `scope` in calls started at or after `since`).
pub trait SpendSource: Send + Sync + 'static {
    /// Blocking (it asks a database): called on a blocking thread.
    fn spent_since(&self, scope: &Scope, since: SystemTime) -> Result<Spend, String>;
}

/// The fleet's budget accounts.
#[derive(Clone)]
pub struct SharedBudgets {
    shared: Arc<Shared>,
    script: redis::Script,
    /// With one, a hold never takes a missing account as empty: it is seeded
    /// from here first.
    seed_from: Option<Arc<dyn SpendSource>>,
}

impl std::fmt::Debug for SharedBudgets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedBudgets").field("keys", self.shared.keys()).finish_non_exhaustive()
    }
}

/// One budget a hold is checked against: the account of its scope and
/// period, and the limit.
#[derive(Debug, Clone)]
pub struct Check {
    pub scope: Scope,
    pub period: Period,
    pub start: SystemTime,
    pub end: SystemTime,
    pub limit: Amount,
}

/// Why a shared hold was not taken.
#[derive(Debug)]
pub enum HoldRefused {
    /// `checks[index]` has only `remaining` left.
    Exhausted { index: usize, remaining: Amount },
    /// Redis cannot be reached.
    Unavailable,
}

/// One account's numbers, as the script reads them.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct AccountNumbers {
    pub settled_tokens: u64,
    pub settled_usd: f64,
    pub held_tokens: u64,
    pub held_usd: f64,
}

/// What the hold script answered.
enum HoldAnswer {
    Held,
    /// These accounts (indices into the keys, from 1) do not exist yet.
    Missing(Vec<usize>),
    /// Check `check` (from 1) has only `left` (the script's text) left.
    Short {
        check: usize,
        left: String,
    },
}

/// The refusal for the `check`th check (from 1), which has `left` left.
fn exhausted(checks: &[Check], check: usize, left: &str) -> HoldRefused {
    let index = check.saturating_sub(1).min(checks.len().saturating_sub(1));
    let remaining = match checks.get(index).map(|check| check.limit.kind()) {
        Some(Kind::Usd) => Amount::Usd(left.parse().unwrap_or(0.0)),
        _ => Amount::Tokens(left.parse().unwrap_or(0)),
    };
    HoldRefused::Exhausted { index, remaining }
}

fn unix(at: SystemTime) -> u64 {
    at.duration_since(UNIX_EPOCH).map(|since| since.as_secs()).unwrap_or(0)
}

fn usd_text(usd: f64) -> String {
    // `{:?}` prints the shortest text that reads back as the same f64.
    format!("{usd:?}")
}

impl SharedBudgets {
    pub(super) fn new(shared: Arc<Shared>) -> Self {
        Self { shared, script: redis::Script::new(SCRIPT), seed_from: None }
    }

    /// Seeds every account Redis does not hold (a new period, a Redis that
    /// lost its data) from `source` before a hold takes it.
    pub fn seeded_from(self, source: Arc<dyn SpendSource>) -> Self {
        Self { seed_from: Some(source), ..self }
    }

    pub fn policy(&self) -> SharedErrorPolicy {
        self.shared.policy()
    }

    /// The Redis key of `scope`'s account in the period starting at `start`.
    pub fn account_key(&self, scope: &Scope, period: Period, start: SystemTime) -> String {
        self.shared.keys().budget(scope, period, unix(start))
    }

    /// The indices of `accounts` grouped by hash tag, in first-seen order:
    /// the groups a cluster's scripts run in (one script's keys share a slot).
    fn slot_groups<'a>(accounts: impl Iterator<Item = &'a str>) -> Vec<Vec<usize>> {
        let mut groups: Vec<(&str, Vec<usize>)> = Vec::new();
        for (index, account) in accounts.enumerate() {
            let tag = hash_tag(account);
            match groups.iter_mut().find(|(known, _)| *known == tag) {
                Some((_, members)) => members.push(index),
                None => groups.push((tag, vec![index])),
            }
        }
        groups.into_iter().map(|(_, members)| members).collect()
    }

    /// The indices of `accounts` in the parts one script each may touch: all
    /// of them on one server; one part per slot on a cluster.
    fn in_slots(&self, accounts: &[String]) -> Vec<Vec<usize>> {
        if !self.shared.keys().tagged() {
            return vec![(0..accounts.len()).collect()];
        }
        Self::slot_groups(accounts.iter().map(String::as_str))
    }

    /// The script's `op` on the `part` of `accounts` (indices).
    fn part_invocation(
        &self,
        accounts: &[String],
        part: &[usize],
        op: &str,
        amount: Option<Spend>,
    ) -> redis::ScriptInvocation<'_> {
        self.invocation(part.iter().map(|&index| &accounts[index]), op, amount)
    }

    /// The distinct accounts of `checks`, and each check's account index (from 1).
    fn accounts(&self, checks: &[Check]) -> (Vec<String>, Vec<usize>) {
        let mut keys: Vec<String> = Vec::new();
        let mut indexes = Vec::new();
        for check in checks {
            let key = self.account_key(&check.scope, check.period, check.start);
            let index = match keys.iter().position(|known| *known == key) {
                Some(position) => position + 1,
                None => {
                    keys.push(key);
                    keys.len()
                }
            };
            indexes.push(index);
        }
        (keys, indexes)
    }

    /// The script's `op` on `accounts`, with `amount` (tokens, then USD) as
    /// its first arguments when it takes one.
    fn invocation<'k>(
        &self,
        accounts: impl IntoIterator<Item = &'k String>,
        op: &str,
        amount: Option<Spend>,
    ) -> redis::ScriptInvocation<'_> {
        let mut invocation = self.script.prepare_invoke();
        for key in accounts {
            invocation.key(key);
        }
        invocation.arg(op);
        if let Some(amount) = amount {
            invocation.arg(amount.tokens).arg(usd_text(amount.usd.unwrap_or(0.0)));
        }
        invocation
    }

    /// Holds `worst` against every check's account, whole or not at all.
    /// Answers the accounts held (for the settle), or why not. With a spend
    /// source, accounts Redis does not hold are seeded first (a seed that
    /// cannot be read is an outage: the policy decides). On a cluster, one
    /// hold per slot, at once; a refused one gives the others back (see the
    /// module's doc).
    pub async fn hold(&self, checks: &[Check], worst: Spend) -> Result<Vec<String>, HoldRefused> {
        if !self.shared.keys().tagged() {
            return self.hold_in_one_slot(checks, worst).await;
        }
        let keys: Vec<String> =
            checks.iter().map(|check| self.account_key(&check.scope, check.period, check.start)).collect();
        let groups = Self::slot_groups(keys.iter().map(String::as_str));
        let parts = groups.iter().map(|group| {
            let part: Vec<Check> = group.iter().map(|&index| checks[index].clone()).collect();
            async move { self.hold_in_one_slot(&part, worst).await }
        });
        let answers = futures_util::future::join_all(parts).await;
        let mut held = Vec::new();
        let mut refused = None;
        for (group, answer) in groups.iter().zip(answers) {
            match answer {
                Ok(accounts) => held.extend(accounts),
                Err(HoldRefused::Exhausted { index, remaining }) if refused.is_none() => {
                    let index = group.get(index).copied().unwrap_or(index);
                    refused = Some(HoldRefused::Exhausted { index, remaining });
                }
                Err(other) if refused.is_none() => refused = Some(other),
                Err(_) => {}
            }
        }
        match refused {
            None => Ok(held),
            Some(refused) => {
                self.give_back_now(&held, worst).await;
                Err(refused)
            }
        }
    }

    /// Gives back the holds a refused call took on other slots. Not through
    /// the outage gate: a node still answering takes it even while another
    /// is out. One Redis does not take stays held (less to spend, never more).
    async fn give_back_now(&self, accounts: &[String], held: Spend) {
        for part in self.in_slots(accounts) {
            let invocation = self.part_invocation(accounts, &part, "release", Some(held));
            if let Err(error) = self.shared.eval::<()>(&invocation).await {
                tracing::error!(?accounts, %error, "a hold taken on one slot while another refused could not be given back: it stays held");
            }
        }
    }

    /// [`Self::hold`] in one script run: every account of `checks` in one slot
    /// (any accounts, on one server).
    async fn hold_in_one_slot(&self, checks: &[Check], worst: Spend) -> Result<Vec<String>, HoldRefused> {
        let (keys, indexes) = self.accounts(checks);
        let op = if self.seed_from.is_some() { "hold-seeded" } else { "hold" };
        let mut invocation = self.invocation(&keys, op, Some(worst));
        for (check, index) in checks.iter().zip(&indexes) {
            let (kind, limit) = match check.limit {
                Amount::Tokens(tokens) => ("t", tokens.to_string()),
                Amount::Usd(usd) => ("u", usd_text(usd)),
            };
            invocation.arg(*index).arg(kind).arg(limit).arg(unix(check.end) + KEPT_AFTER_PERIOD_SECS);
        }
        let mut seeded = false;
        loop {
            let answer = self.shared.attempt(self.held(&invocation)).await;
            match answer {
                None => return Err(HoldRefused::Unavailable),
                Some(HoldAnswer::Held) => return Ok(keys),
                Some(HoldAnswer::Missing(missing)) if !seeded => {
                    self.seed(&keys, &indexes, checks, &missing).await?;
                    seeded = true;
                }
                Some(HoldAnswer::Missing(_)) => return Err(HoldRefused::Unavailable),
                Some(HoldAnswer::Short { check, left }) => return Err(exhausted(checks, check, &left)),
            }
        }
    }

    async fn held(&self, invocation: &redis::ScriptInvocation<'_>) -> redis::RedisResult<HoldAnswer> {
        let value: Vec<redis::Value> = self.shared.eval(invocation).await?;
        let first: i64 = value.first().map(redis::from_redis_value_ref).transpose()?.unwrap_or(0);
        Ok(match first {
            0 => HoldAnswer::Held,
            -1 => HoldAnswer::Missing(value[1..].iter().map(redis::from_redis_value_ref).collect::<Result<_, _>>()?),
            check => HoldAnswer::Short {
                check: usize::try_from(check).unwrap_or(0),
                left: value.get(1).map(redis::from_redis_value_ref).transpose()?.unwrap_or_default(),
            },
        })
    }

    /// Seeds the `missing` accounts (indices into `keys`, from 1) from the
    /// spend source. Every gateway may do this at once: the script leaves an
    /// account another has seeded as it is.
    async fn seed(
        &self,
        keys: &[String],
        indexes: &[usize],
        checks: &[Check],
        missing: &[usize],
    ) -> Result<(), HoldRefused> {
        let Some(source) = &self.seed_from else { return Err(HoldRefused::Unavailable) };
        for &account in missing {
            let (Some(key), Some(check)) = (
                keys.get(account.wrapping_sub(1)),
                indexes.iter().position(|index| *index == account).map(|at| &checks[at]),
            ) else {
                return Err(HoldRefused::Unavailable);
            };
            let (source, scope, since) = (Arc::clone(source), check.scope.clone(), check.start);
            let spent = tokio::task::spawn_blocking(move || source.spent_since(&scope, since)).await;
            let spent = match spent {
                Ok(Ok(spent)) => spent,
                Ok(Err(error)) => {
                    tracing::error!(account = %key, %error, "a budget account Redis does not hold cannot be seeded from the fleet's ledger");
                    return Err(HoldRefused::Unavailable);
                }
                Err(error) => {
                    tracing::error!(account = %key, %error, "the budget seed's task failed");
                    return Err(HoldRefused::Unavailable);
                }
            };
            let mut invocation = self.invocation(std::slice::from_ref(key), "seed", Some(spent));
            invocation.arg(unix(check.end) + KEPT_AFTER_PERIOD_SECS);
            let done: Option<()> = self.shared.attempt(self.shared.eval(&invocation)).await;
            done.ok_or(HoldRefused::Unavailable)?;
            tracing::info!(account = %key, tokens = spent.tokens, usd = spent.usd.unwrap_or(0.0),
                "a budget account seeded from the fleet's ledger");
        }
        Ok(())
    }

    /// Replaces the hold on `accounts` with what the call spent.
    pub async fn settle(&self, accounts: &[String], held: Spend, spent: Spend) {
        for part in self.in_slots(accounts) {
            let mut invocation = self.part_invocation(accounts, &part, "settle", Some(held));
            invocation.arg(spent.tokens).arg(usd_text(spent.usd.unwrap_or(0.0)));
            let done: Option<()> = self.shared.attempt(self.shared.eval(&invocation)).await;
            if done.is_none() {
                let part: Vec<&String> = part.iter().map(|&index| &accounts[index]).collect();
                tracing::error!(accounts = ?part, "a settled call's spend could not reach the fleet's budgets");
            }
        }
    }

    /// Gives back a hold whose call spent nothing (it never reached its record).
    pub async fn release(&self, accounts: &[String], held: Spend) {
        for part in self.in_slots(accounts) {
            let invocation = self.part_invocation(accounts, &part, "release", Some(held));
            let _: Option<()> = self.shared.attempt(self.shared.eval(&invocation)).await;
        }
    }

    /// The numbers of each account, in order; `None` when Redis is out.
    pub async fn read(&self, accounts: &[String]) -> Option<Vec<AccountNumbers>> {
        let mut numbers = vec![AccountNumbers::default(); accounts.len()];
        for part in self.in_slots(accounts) {
            let invocation = self.part_invocation(accounts, &part, "status", None);
            let rows: Vec<(String, String, String, String)> =
                self.shared.attempt(self.shared.eval(&invocation)).await?;
            for (&index, (st, su, ht, hu)) in part.iter().zip(rows) {
                numbers[index] = AccountNumbers {
                    settled_tokens: st.parse().unwrap_or(0),
                    settled_usd: su.parse().unwrap_or(0.0),
                    held_tokens: ht.parse().unwrap_or(0),
                    held_usd: hu.parse().unwrap_or(0.0),
                };
            }
        }
        Some(numbers)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A cluster's hold runs one script per hash tag: a scope's periods
    /// together, scopes apart, in the order first seen.
    #[test]
    fn accounts_are_grouped_by_their_hash_tag() {
        let accounts = [
            "weir:budget:{member:ana}:day:1",
            "weir:budget:{team:red}:day:1",
            "weir:budget:{member:ana}:month:0",
            "weir:budget:{key:k1}:day:1",
        ];
        assert_eq!(SharedBudgets::slot_groups(accounts.into_iter()), vec![vec![0, 2], vec![1], vec![3]]);
    }
}
