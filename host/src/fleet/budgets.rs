//! Budget holds and settled spend in Redis (`budgets.lua`), so a member's
//! daily budget is exact across the fleet: the hold is one atomic script over
//! every account the call is held against, whole or nothing, as the
//! in-process book does it.

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use super::SharedErrorPolicy;
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
    prefix: String,
    /// With one, a hold never takes a missing account as empty: it is seeded
    /// from here first.
    seed_from: Option<Arc<dyn SpendSource>>,
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
    pub(super) fn new(shared: Arc<Shared>, prefix: String) -> Self {
        Self { shared, script: redis::Script::new(SCRIPT), prefix, seed_from: None }
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
    /// Answers the accounts held (for the settle), or why not. With a spend
    /// source, accounts Redis does not hold are seeded first (a seed that
    /// cannot be read is an outage: the policy decides).
    pub async fn hold(&self, checks: &[Check], worst: Spend) -> Result<Vec<String>, HoldRefused> {
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
