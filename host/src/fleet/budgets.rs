//! Budget holds and settled spend in Redis (`budgets.lua`), so a member's
//! daily budget is exact across the fleet: the hold is one atomic script over
//! every account the call is held against, whole or nothing, as the
//! in-process book does it.

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use super::SharedErrorPolicy;
use super::redis_store::Shared;
use crate::budget::{Amount, Kind, Period, Scope, Spend};

const SCRIPT: &str = include_str!("budgets.lua");
/// An account outlives its period by a day (for `/v1/usage` right after it).
const KEPT_AFTER_PERIOD_SECS: u64 = 86_400;

/// The fleet's budget accounts.
#[derive(Clone)]
pub struct SharedBudgets {
    shared: Arc<Shared>,
    script: redis::Script,
    prefix: String,
}

impl std::fmt::Debug for SharedBudgets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedBudgets").field("prefix", &self.prefix).finish_non_exhaustive()
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

fn unix(at: SystemTime) -> u64 {
    at.duration_since(UNIX_EPOCH).map(|since| since.as_secs()).unwrap_or(0)
}

fn usd_text(usd: f64) -> String {
    // `{:?}` prints the shortest text that reads back as the same f64.
    format!("{usd:?}")
}

impl SharedBudgets {
    pub(super) fn new(shared: Arc<Shared>, prefix: String) -> Self {
        Self { shared, script: redis::Script::new(SCRIPT), prefix }
    }

    pub fn policy(&self) -> SharedErrorPolicy {
        self.shared.policy()
    }

    /// The Redis key of `scope`'s account in the period starting at `start`.
    pub fn account_key(&self, scope: &Scope, period: Period, start: SystemTime) -> String {
        format!("{}:budget:{}:{}:{}:{}", self.prefix, scope.kind(), scope.name(), period.as_str(), unix(start))
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
    fn invocation(&self, accounts: &[String], op: &str, amount: Option<Spend>) -> redis::ScriptInvocation<'_> {
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
    /// Answers the accounts held (for the settle), or why not.
    pub async fn hold(&self, checks: &[Check], worst: Spend) -> Result<Vec<String>, HoldRefused> {
        let (keys, indexes) = self.accounts(checks);
        let mut invocation = self.invocation(&keys, "hold", Some(worst));
        for (check, index) in checks.iter().zip(&indexes) {
            let (kind, limit) = match check.limit {
                Amount::Tokens(tokens) => ("t", tokens.to_string()),
                Amount::Usd(usd) => ("u", usd_text(usd)),
            };
            invocation.arg(*index).arg(kind).arg(limit).arg(unix(check.end) + KEPT_AFTER_PERIOD_SECS);
        }
        let answer: Option<(usize, Option<String>)> = self
            .shared
            .attempt(async {
                let value: Vec<redis::Value> = self.shared.eval(&invocation).await?;
                let index: usize = value.first().map(redis::from_redis_value_ref).transpose()?.unwrap_or(0);
                let left: Option<String> = value.get(1).map(redis::from_redis_value_ref).transpose()?;
                Ok((index, left))
            })
            .await;
        match answer {
            None => Err(HoldRefused::Unavailable),
            Some((0, _)) => Ok(keys),
            Some((check, left)) => {
                let index = check.saturating_sub(1).min(checks.len().saturating_sub(1));
                let left = left.unwrap_or_default();
                let remaining = match checks.get(index).map(|check| check.limit.kind()) {
                    Some(Kind::Usd) => Amount::Usd(left.parse().unwrap_or(0.0)),
                    _ => Amount::Tokens(left.parse().unwrap_or(0)),
                };
                Err(HoldRefused::Exhausted { index, remaining })
            }
        }
    }

    /// Replaces the hold on `accounts` with what the call spent.
    pub async fn settle(&self, accounts: &[String], held: Spend, spent: Spend) {
        let mut invocation = self.invocation(accounts, "settle", Some(held));
        invocation.arg(spent.tokens).arg(usd_text(spent.usd.unwrap_or(0.0)));
        let done: Option<()> = self.shared.attempt(self.shared.eval(&invocation)).await;
        if done.is_none() {
            tracing::error!(?accounts, "a settled call's spend could not reach the fleet's budgets");
        }
    }

    /// Gives back a hold whose call spent nothing (it never reached its record).
    pub async fn release(&self, accounts: &[String], held: Spend) {
        let invocation = self.invocation(accounts, "release", Some(held));
        let _: Option<()> = self.shared.attempt(self.shared.eval(&invocation)).await;
    }

    /// The numbers of each account, in order; `None` when Redis is out.
    pub async fn read(&self, accounts: &[String]) -> Option<Vec<AccountNumbers>> {
        let invocation = self.invocation(accounts, "status", None);
        let rows: Vec<(String, String, String, String)> = self.shared.attempt(self.shared.eval(&invocation)).await?;
        Some(
            rows.into_iter()
                .map(|(st, su, ht, hu)| AccountNumbers {
                    settled_tokens: st.parse().unwrap_or(0),
                    settled_usd: su.parse().unwrap_or(0.0),
                    held_tokens: ht.parse().unwrap_or(0),
                    held_usd: hu.parse().unwrap_or(0.0),
                })
                .collect(),
        )
    }
}
