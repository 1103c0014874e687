//! The budget book: per scope and period, what was settled and what is held
//! by calls in flight. A hold is taken whole or not at all across every
//! budget that applies to a call, under one mutex that is never held across
//! an await, so concurrent calls cannot together overspend what one check
//! would allow.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError, RwLock};
use std::time::{Duration, SystemTime};

use super::limits::Limits;
use crate::accounting::Amount;
use crate::accounting::{Clock, Kind, Period, Scope, Spend, Timezone};
use crate::admission::AdmissionError;
use crate::failure::Category;
use crate::fleet::{Check, HoldRefused, SharedBudgets, SharedErrorPolicy};

/// Why a budget refused a call; every refusal comes before anything is sent.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum BudgetError {
    /// A budget that applies to the caller has not enough left for the
    /// call's worst case.
    #[error(
        "{scope}: the {} budget in {} has {remaining} left and this call may need {needed}; it resets at {}",
        .period.as_str(),
        .kind.as_str(),
        humantime::format_rfc3339_seconds(*.resets_at)
    )]
    Exhausted {
        scope: Scope,
        kind: Kind,
        period: Period,
        remaining: Amount,
        needed: Amount,
        resets_at: SystemTime,
        /// From the refusal to the reset, for `retry-after`.
        resets_in: Duration,
    },
    /// The call's worst case is above a per-call ceiling of its key, member or team.
    #[error("{scope}: this call may need {needed}, above the per-call ceiling of {ceiling}")]
    CallCeiling { scope: Scope, ceiling: Amount, needed: Amount },
    /// A USD budget applies and the entry declares no prices.
    #[error(
        "invalid request: model `{model}` declares no prices, and {scope} has a USD budget: the call cannot be priced"
    )]
    Unpriced { model: String, scope: Scope },
    /// The fleet's shared budgets cannot be reached and the policy is to refuse.
    #[error(transparent)]
    Shared(AdmissionError),
}

impl BudgetError {
    /// The category a caller sees (the call's error answers the same).
    pub fn category(&self) -> Category {
        match self {
            Self::Exhausted { .. } => Category::BudgetExhausted,
            Self::CallCeiling { .. } => Category::CallBudgetExceeded,
            Self::Unpriced { .. } => Category::InvalidRequest,
            Self::Shared(error) => error.category(),
        }
    }
}

/// Budgets by scope, and what each has spent and holds.
#[derive(Clone)]
pub struct BudgetBook {
    shared: Arc<Shared>,
}

struct Shared {
    /// Replaced whole when the admin plane changes a budget
    /// ([`BudgetBook::replace_limits`]); each hold reads one snapshot.
    limits: RwLock<Arc<HashMap<Scope, Limits>>>,
    timezone: Timezone,
    clock: Arc<dyn Clock>,
    accounts: Mutex<HashMap<(Scope, Period), Account>>,
    /// Set under `[fleet]`: holds and spend live in Redis, not in `accounts`.
    fleet: OnceLock<FleetBudgets>,
}

struct FleetBudgets {
    budgets: SharedBudgets,
    /// Under `on_shared_error = "local"`: this gateway's share of every
    /// budget, held in memory while Redis is out.
    local_share: Option<BudgetBook>,
    fleet_size: u32,
}

/// One scope's spend in one period. A new period starts from zero: the
/// account rolls over the first time it is touched after the boundary.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Account {
    start: SystemTime,
    settled_tokens: u64,
    settled_usd: f64,
    held_tokens: u64,
    held_usd: f64,
}

impl Account {
    fn new(start: SystemTime) -> Self {
        Self { start, settled_tokens: 0, settled_usd: 0.0, held_tokens: 0, held_usd: 0.0 }
    }

    /// What is spent or held, in `kind`.
    fn used(&self, kind: Kind) -> Amount {
        match kind {
            Kind::Tokens => Amount::Tokens(self.settled_tokens.saturating_add(self.held_tokens)),
            Kind::Usd => Amount::Usd(self.settled_usd + self.held_usd),
        }
    }
}

/// What one budget holds for one call.
#[derive(Debug, Clone)]
struct HeldPart {
    scope: Scope,
    period: Period,
    start: SystemTime,
    tokens: u64,
    usd: f64,
}

/// A call's hold on every budget that applies to it. Settle it with what the
/// call spent; dropped unsettled (a call that never reached its record), it is
/// released. A call that makes another attempt raises it first with
/// [`Hold::top_up`], never lowers it.
pub struct Hold {
    shared: Arc<Shared>,
    parts: Vec<HeldPart>,
    /// A hold on the fleet's accounts in Redis instead.
    fleet: Option<FleetHold>,
    /// What the hold covers in all, every top-up included: a top-up holds
    /// only the difference over it, and a call settled at its worst case is
    /// charged it.
    held: Spend,
    /// The scopes it was taken for, whose per-call ceilings a top-up checks.
    scopes: Vec<Scope>,
}

struct FleetHold {
    budgets: SharedBudgets,
    /// The budgets it was checked against (a top-up is checked against the
    /// same accounts: a call counts in the periods it started in).
    checks: Vec<Check>,
    accounts: Vec<String>,
    worst: Spend,
    /// What a top-up held against this gateway's share while Redis was out
    /// (`on_shared_error = "local"`). Released when the hold settles: the
    /// call's spend is settled in Redis with the rest.
    outage: Option<Box<Hold>>,
}

impl std::fmt::Debug for Hold {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hold").field("parts", &self.parts).field("held", &self.held).finish_non_exhaustive()
    }
}

/// One budget as it stands now (for `/v1/usage` and embedders).
#[derive(Debug, Clone, PartialEq)]
pub struct BudgetStatus {
    pub scope: Scope,
    pub period: Period,
    pub limit: Amount,
    pub spent: Amount,
    pub held: Amount,
    pub remaining: Amount,
    pub resets_at: SystemTime,
}

impl BudgetStatus {
    /// As `GET /v1/usage` and `weir ledger query --json` show it: amounts in
    /// tokens or USD, as the budget's kind.
    pub fn to_json(&self) -> serde_json::Value {
        let number = |amount: Amount| match amount {
            Amount::Tokens(tokens) => serde_json::json!(tokens),
            Amount::Usd(usd) => serde_json::json!(usd),
        };
        serde_json::json!({
            "scope": self.scope.kind(),
            "name": self.scope.name(),
            "period": self.period.as_str(),
            "kind": self.limit.kind().as_str(),
            "limit": number(self.limit),
            "spent": number(self.spent),
            "held": number(self.held),
            "remaining": number(self.remaining),
            "resets_at": humantime::format_rfc3339_seconds(self.resets_at).to_string(),
        })
    }
}

impl std::fmt::Debug for BudgetBook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BudgetBook").field("scopes", &self.shared.limits().len()).finish()
    }
}

impl BudgetBook {
    /// A book over `limits` (scopes without any limit are left out).
    pub fn new(limits: HashMap<Scope, Limits>, timezone: Timezone, clock: Arc<dyn Clock>) -> Self {
        let limits = RwLock::new(Arc::new(limited(limits)));
        let accounts = Mutex::new(HashMap::new());
        Self { shared: Arc::new(Shared { limits, timezone, clock, accounts, fleet: OnceLock::new() }) }
    }

    /// Keeps holds and spend in the fleet's Redis from now on. Under the
    /// `local` policy, a `1 / fleet_size` share of every budget is held in
    /// memory while Redis is out.
    pub fn share_through(&self, budgets: SharedBudgets, fleet_size: u32) {
        let local_share = (budgets.policy() == SharedErrorPolicy::Local).then(|| {
            BudgetBook::new(
                shares(&self.shared.limits(), fleet_size),
                self.shared.timezone,
                Arc::clone(&self.shared.clock),
            )
        });
        if self.shared.fleet.set(FleetBudgets { budgets, local_share, fleet_size }).is_err() {
            tracing::warn!("the budget book was already shared; the first fleet is kept");
        }
    }

    /// Replaces every scope's limits (the admin plane changed a budget): the
    /// next hold is checked against them. Holds already taken stay and settle
    /// as they would: a budget lowered under what is held refuses new calls
    /// until spend and holds fit under it again. Answers the scopes that had
    /// no limit before; their accounts start empty (see
    /// [`Self::restore`] to count the period's spend the ledger holds).
    pub fn replace_limits(&self, limits: HashMap<Scope, Limits>) -> Vec<Scope> {
        let limits = limited(limits);
        let before = self.shared.limits();
        let added: Vec<Scope> = limits.keys().filter(|scope| !before.contains_key(*scope)).cloned().collect();
        if let Some(fleet) = self.shared.fleet.get()
            && let Some(local) = &fleet.local_share
        {
            local.replace_limits(shares(&limits, fleet.fleet_size));
        }
        {
            // A scope that had no limit kept no account: one left from an
            // earlier limit is stale, and starts again from the ledger.
            let mut accounts = self.shared.lock();
            accounts.retain(|(scope, _), _| !added.contains(scope));
        }
        *self.shared.limits.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(limits);
        added
    }

    /// Whether holds and spend live in the fleet's Redis.
    pub fn is_shared(&self) -> bool {
        self.shared.fleet.get().is_some()
    }

    /// Whether any budget is declared at all.
    pub fn is_empty(&self) -> bool {
        self.shared.limits().is_empty()
    }

    pub fn timezone(&self) -> Timezone {
        self.shared.timezone
    }

    pub fn now(&self) -> SystemTime {
        self.shared.clock.now()
    }

    /// The scopes with a budget among a caller's key, member and team, in that order.
    pub fn applicable(&self, key_id: Option<&str>, member: &str, team: Option<&str>) -> Vec<Scope> {
        if self.is_empty() {
            return Vec::new();
        }
        let candidates = [
            key_id.map(|id| Scope::Key(id.to_owned())),
            Some(Scope::Member(member.to_owned())),
            team.map(|team| Scope::Team(team.to_owned())),
        ];
        let limits = self.shared.limits();
        candidates.into_iter().flatten().filter(|scope| limits.contains_key(scope)).collect()
    }

    /// The limits of any scope in `scopes` are counted in USD.
    pub fn counts_usd(&self, scopes: &[Scope]) -> bool {
        let limits = self.shared.limits();
        scopes.iter().filter_map(|scope| limits.get(scope)).any(Limits::counts_usd)
    }

    /// Holds `worst` against every period budget of every scope in `scopes`,
    /// whole or not at all. A worst case above a scope's per-call ceiling is
    /// `call_budget_exceeded`; one above what a budget has left is
    /// `budget_exhausted` (the first such budget, in the order of `scopes`).
    /// `model` names the entry in the error for a USD budget the call cannot be
    /// priced under.
    pub fn hold(&self, scopes: &[Scope], worst: Spend, model: &str) -> Result<Hold, BudgetError> {
        self.shared.check_ceilings(scopes, worst, model)?;
        self.hold_in_memory(scopes, worst)
    }

    /// [`Self::hold`], against the fleet's Redis when the book is shared: one
    /// atomic script over every account, whole or nothing. While Redis is out
    /// the policy decides: `refuse` is `shared_state_unavailable`, `local`
    /// holds against this gateway's share in memory.
    pub async fn take(&self, scopes: &[Scope], worst: Spend, model: &str) -> Result<Hold, BudgetError> {
        let Some(fleet) = self.shared.fleet.get() else { return self.hold(scopes, worst, model) };
        self.shared.check_ceilings(scopes, worst, model)?;
        let now = self.shared.clock.now();
        let checks = self.checks(scopes, now);
        if checks.is_empty() {
            return Ok(self.shared.holding(Vec::new(), None, worst, scopes));
        }
        match fleet.budgets.hold(&checks, worst).await {
            Ok(accounts) => {
                let held = FleetHold { budgets: fleet.budgets.clone(), checks, accounts, worst, outage: None };
                Ok(self.shared.holding(Vec::new(), Some(held), worst, scopes))
            }
            Err(HoldRefused::Exhausted { index, remaining }) => {
                Err(fleet_exhausted(&checks[index], remaining, worst, now))
            }
            Err(HoldRefused::Unavailable) => match &fleet.local_share {
                Some(local) => local.hold(scopes, worst, model),
                None => Err(unavailable(model)),
            },
        }
    }

    /// Every period budget of `scopes` at `now`, in the order a hold checks them.
    fn checks(&self, scopes: &[Scope], now: SystemTime) -> Vec<Check> {
        let shared = &self.shared;
        let every = shared.limits();
        let mut checks = Vec::new();
        for scope in scopes {
            let Some(limits) = every.get(scope) else { continue };
            for (period, limit) in limits.periodic() {
                let (start, end) = shared.timezone.bounds(period, now);
                checks.push(Check { scope: scope.clone(), period, start, end, limit });
            }
        }
        checks
    }

    fn hold_in_memory(&self, scopes: &[Scope], worst: Spend) -> Result<Hold, BudgetError> {
        let shared = &self.shared;
        let now = shared.clock.now();
        let usd = worst.usd.unwrap_or(0.0);
        let mut parts = Vec::new();
        let every = shared.limits();
        let mut accounts = shared.lock();
        for scope in scopes {
            let Some(limits) = every.get(scope) else { continue };
            for (period, limit) in limits.periodic() {
                let (start, end) = shared.timezone.bounds(period, now);
                let account = account(&mut accounts, scope, period, start);
                let needed = needed(limit.kind(), worst);
                if let Some(remaining) = shortfall(limit, account.used(limit.kind()), needed) {
                    return Err(exhausted(scope, limit, period, remaining, needed, end, now));
                }
                if !parts.iter().any(|part: &HeldPart| &part.scope == scope && part.period == period) {
                    parts.push(HeldPart { scope: scope.clone(), period, start, tokens: worst.tokens, usd });
                }
            }
        }
        for part in &parts {
            if let Some(account) = accounts.get_mut(&(part.scope.clone(), part.period)) {
                account.held_tokens = account.held_tokens.saturating_add(part.tokens);
                account.held_usd += part.usd;
            }
        }
        drop(accounts);
        Ok(shared.holding(parts, None, worst, scopes))
    }

    /// Adds spend the ledger recorded in the period starting at `start` (the
    /// rebuild at start); ignored for a scope without a budget or a period
    /// that is not the current one.
    pub fn restore(&self, scope: &Scope, period: Period, start: SystemTime, spent: Spend) {
        let shared = &self.shared;
        let every = shared.limits();
        let Some(limits) = every.get(scope) else { return };
        if !limits.periodic().any(|(p, _)| p == period) {
            return;
        }
        let now = shared.clock.now();
        let (current, _) = shared.timezone.bounds(period, now);
        if current != start {
            return;
        }
        let mut accounts = shared.lock();
        let account = account(&mut accounts, scope, period, start);
        account.settled_tokens = account.settled_tokens.saturating_add(spent.tokens);
        account.settled_usd += spent.usd.unwrap_or(0.0);
    }

    /// Every period budget as it stands now, by scope then period.
    pub fn status(&self) -> Vec<BudgetStatus> {
        let shared = &self.shared;
        let now = shared.clock.now();
        let every = shared.limits();
        let mut scopes: Vec<(&Scope, &Limits)> = every.iter().collect();
        scopes.sort_by(|a, b| a.0.cmp(b.0));
        let mut accounts = shared.lock();
        let mut out = Vec::new();
        for (scope, limits) in scopes {
            for (period, limit) in limits.periodic() {
                let (start, end) = shared.timezone.bounds(period, now);
                let account = *account(&mut accounts, scope, period, start);
                let (spent, held) = match limit.kind() {
                    Kind::Tokens => (Amount::Tokens(account.settled_tokens), Amount::Tokens(account.held_tokens)),
                    Kind::Usd => (Amount::Usd(account.settled_usd), Amount::Usd(account.held_usd)),
                };
                let remaining = remaining(limit, account.used(limit.kind()));
                out.push(BudgetStatus { scope: scope.clone(), period, limit, spent, held, remaining, resets_at: end });
            }
        }
        out
    }

    /// [`Self::status`], read from the fleet's Redis when the book is shared
    /// (this gateway's memory then holds nothing); while Redis is out, what
    /// the `local` share holds, else nothing is known and nothing is shown.
    pub async fn current_status(&self) -> Vec<BudgetStatus> {
        let Some(fleet) = self.shared.fleet.get() else { return self.status() };
        let now = self.shared.clock.now();
        let every = self.shared.limits();
        let mut scopes: Vec<&Scope> = every.keys().collect();
        scopes.sort();
        let owned: Vec<Scope> = scopes.into_iter().cloned().collect();
        let checks = self.checks(&owned, now);
        let accounts: Vec<String> =
            checks.iter().map(|check| fleet.budgets.account_key(&check.scope, check.period, check.start)).collect();
        let Some(numbers) = fleet.budgets.read(&accounts).await else {
            return fleet.local_share.as_ref().map(BudgetBook::status).unwrap_or_default();
        };
        checks
            .into_iter()
            .zip(numbers)
            .map(|(check, numbers)| {
                let (spent, held, used) = match check.limit.kind() {
                    Kind::Tokens => (
                        Amount::Tokens(numbers.settled_tokens),
                        Amount::Tokens(numbers.held_tokens),
                        Amount::Tokens(numbers.settled_tokens.saturating_add(numbers.held_tokens)),
                    ),
                    Kind::Usd => (
                        Amount::Usd(numbers.settled_usd),
                        Amount::Usd(numbers.held_usd),
                        Amount::Usd(numbers.settled_usd + numbers.held_usd),
                    ),
                };
                let remaining = remaining(check.limit, used);
                BudgetStatus {
                    scope: check.scope,
                    period: check.period,
                    limit: check.limit,
                    spent,
                    held,
                    remaining,
                    resets_at: check.end,
                }
            })
            .collect()
    }

    /// The budgets of one member (for embedders): what each has left now.
    pub fn member_status(&self, member: &str) -> Vec<BudgetStatus> {
        self.status().into_iter().filter(|status| status.scope == Scope::Member(member.to_owned())).collect()
    }
}

impl Shared {
    /// The limits as of now (one snapshot per use).
    fn limits(&self) -> Arc<HashMap<Scope, Limits>> {
        Arc::clone(&self.limits.read().unwrap_or_else(PoisonError::into_inner))
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<(Scope, Period), Account>> {
        // The map stays consistent across a panic (every update is a few
        // additions), so a poisoned lock is still used.
        self.accounts.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A hold of `worst` on this book, in `parts` or in the fleet's `fleet`.
    fn holding(
        self: &Arc<Self>,
        parts: Vec<HeldPart>,
        fleet: Option<FleetHold>,
        worst: Spend,
        scopes: &[Scope],
    ) -> Hold {
        Hold { shared: Arc::clone(self), parts, fleet, held: worst, scopes: scopes.to_vec() }
    }

    /// A USD budget the call cannot be priced under, or a per-call ceiling
    /// below its worst case, refuses it before any budget is touched.
    fn check_ceilings(&self, scopes: &[Scope], worst: Spend, model: &str) -> Result<(), BudgetError> {
        let every = self.limits();
        for scope in scopes {
            let Some(limits) = every.get(scope) else { continue };
            if limits.counts_usd() && worst.usd.is_none() {
                return Err(BudgetError::Unpriced { model: model.to_owned(), scope: scope.clone() });
            }
            if let Some(ceiling) = limits.max_call_tokens.filter(|ceiling| worst.tokens > *ceiling) {
                return Err(BudgetError::CallCeiling {
                    scope: scope.clone(),
                    ceiling: Amount::Tokens(ceiling),
                    needed: Amount::Tokens(worst.tokens),
                });
            }
            let usd = worst.usd.unwrap_or(0.0);
            if let Some(ceiling) = limits.max_call_usd.filter(|ceiling| usd > *ceiling) {
                return Err(BudgetError::CallCeiling {
                    scope: scope.clone(),
                    ceiling: Amount::Usd(ceiling),
                    needed: Amount::Usd(usd),
                });
            }
        }
        Ok(())
    }
}

/// The scopes of `limits` that limit anything.
fn limited(limits: HashMap<Scope, Limits>) -> HashMap<Scope, Limits> {
    limits.into_iter().filter(|(_, limits)| !limits.is_unlimited()).collect()
}

/// One gateway's share of every scope's limits in a fleet of `fleet_size`.
fn shares(limits: &HashMap<Scope, Limits>, fleet_size: u32) -> HashMap<Scope, Limits> {
    limits.iter().map(|(scope, limits)| (scope.clone(), limits.share(fleet_size))).collect()
}

/// `amount` in a budget's `kind`.
fn needed(kind: Kind, amount: Spend) -> Amount {
    match kind {
        Kind::Tokens => Amount::Tokens(amount.tokens),
        Kind::Usd => Amount::Usd(amount.usd.unwrap_or(0.0)),
    }
}

/// The refusal of a hold that `limit` of `scope` in `period` (ending at
/// `end`) cannot take: it has `remaining` left and `needed` was asked.
fn exhausted(
    scope: &Scope,
    limit: Amount,
    period: Period,
    remaining: Amount,
    needed: Amount,
    end: SystemTime,
    now: SystemTime,
) -> BudgetError {
    BudgetError::Exhausted {
        scope: scope.clone(),
        kind: limit.kind(),
        period,
        remaining,
        needed,
        resets_at: end,
        resets_in: end.duration_since(now).unwrap_or(Duration::ZERO),
    }
}

/// The refusal of a fleet hold of `worst` that `check` cannot take.
fn fleet_exhausted(check: &Check, remaining: Amount, worst: Spend, now: SystemTime) -> BudgetError {
    let needed = needed(check.limit.kind(), worst);
    exhausted(&check.scope, check.limit, check.period, remaining, needed, check.end, now)
}

/// The refusal of a fleet hold while Redis is out under the `refuse` policy.
fn unavailable(model: &str) -> BudgetError {
    BudgetError::Shared(AdmissionError::SharedStateUnavailable { model: model.to_owned() })
}

/// The account of `scope` in the period starting at `start`, rolled over when
/// the stored one belongs to an earlier period.
fn account<'a>(
    accounts: &'a mut HashMap<(Scope, Period), Account>,
    scope: &Scope,
    period: Period,
    start: SystemTime,
) -> &'a mut Account {
    let account = accounts.entry((scope.clone(), period)).or_insert_with(|| Account::new(start));
    if account.start < start {
        *account = Account::new(start);
    }
    account
}

/// What is left of `limit` after `used` (never below zero).
fn remaining(limit: Amount, used: Amount) -> Amount {
    match (limit, used) {
        (Amount::Tokens(limit), Amount::Tokens(used)) => Amount::Tokens(limit.saturating_sub(used)),
        (Amount::Usd(limit), Amount::Usd(used)) => Amount::Usd((limit - used).max(0.0)),
        (limit, _) => limit,
    }
}

/// What is left, when `needed` does not fit in it.
fn shortfall(limit: Amount, used: Amount, needed: Amount) -> Option<Amount> {
    let left = remaining(limit, used);
    let fits = match (left, needed) {
        (Amount::Tokens(left), Amount::Tokens(needed)) => needed <= left,
        (Amount::Usd(left), Amount::Usd(needed)) => needed <= left,
        _ => true,
    };
    (!fits).then_some(left)
}

impl Hold {
    /// A hold on nothing (a caller without budgets).
    pub fn is_empty(&self) -> bool {
        self.parts.is_empty() && self.fleet.is_none()
    }

    /// Replaces the held amounts with what the call spent. Spend in a period
    /// that has rolled over since the hold stays with that period (gone).
    pub fn settle(mut self, actual: Spend) {
        if let Some(held) = self.fleet.take() {
            let FleetHold { budgets, accounts, worst, outage, .. } = held;
            // The outage's part is given back: the whole spend goes to Redis.
            drop(outage);
            spawn_or_warn(async move { budgets.settle(&accounts, worst, actual).await });
            return;
        }
        let parts = std::mem::take(&mut self.parts);
        let mut accounts = self.shared.lock();
        for part in parts {
            let Some(account) = accounts.get_mut(&(part.scope, part.period)) else { continue };
            if account.start != part.start {
                continue;
            }
            account.held_tokens = account.held_tokens.saturating_sub(part.tokens);
            account.held_usd = (account.held_usd - part.usd).max(0.0);
            account.settled_tokens = account.settled_tokens.saturating_add(actual.tokens);
            account.settled_usd += actual.usd.unwrap_or(0.0);
        }
    }
}

impl Hold {
    /// Settles the hold at its own worst case: for a call whose spend the
    /// upstream never reported (a stream the caller left before its usage
    /// arrived), which is counted at what it could have cost, never as zero.
    pub fn settle_at_worst(self) {
        let worst = self.held;
        self.settle(worst);
    }

    /// What the hold covers in all (its first worst case and every top-up).
    pub fn held(&self) -> Spend {
        self.held
    }

    /// Raises the hold so that it covers `total` — what the call has spent
    /// so far plus the worst case of its next attempt — and answers the
    /// amount added (`None` when the hold already covers it; it is never
    /// lowered). The same rules as the first hold: `total` above a per-call
    /// ceiling is `call_budget_exceeded`, and the amount added must fit every
    /// period budget the hold was taken against (in the periods it was taken
    /// in: a call counts where it started), whole or not at all, else
    /// `budget_exhausted`. A refused top-up leaves the hold as it was. A
    /// fleet hold adds the amount with one more atomic hold on the same
    /// accounts; while Redis is out the policy decides, as for a first hold.
    pub async fn top_up(&mut self, total: Spend, model: &str) -> Result<Option<Spend>, BudgetError> {
        let extra = Spend {
            tokens: total.tokens.saturating_sub(self.held.tokens),
            usd: match (total.usd, self.held.usd) {
                (Some(total), Some(held)) => Some((total - held).max(0.0)),
                (total, _) => total,
            },
        };
        if extra.tokens == 0 && extra.usd.is_none_or(|usd| usd <= 0.0) {
            return Ok(None);
        }
        self.shared.check_ceilings(&self.scopes, total, model)?;
        match &mut self.fleet {
            Some(fleet) => self.shared.top_up_fleet(fleet, &self.scopes, extra, model).await?,
            None => self.top_up_in_memory(extra)?,
        }
        self.held = Spend {
            tokens: self.held.tokens.max(total.tokens),
            usd: match (self.held.usd, total.usd) {
                (Some(held), Some(total)) => Some(held.max(total)),
                (held, total) => held.or(total),
            },
        };
        Ok(Some(extra))
    }

    /// Adds `extra` to every in-memory part, whole or not at all. A part whose
    /// period has rolled over since the hold is left as it is: the period it
    /// counted in is gone, and its settlement is skipped the same way.
    fn top_up_in_memory(&mut self, extra: Spend) -> Result<(), BudgetError> {
        let shared = Arc::clone(&self.shared);
        let now = shared.clock.now();
        let every = shared.limits();
        let mut accounts = shared.lock();
        let current = |accounts: &HashMap<(Scope, Period), Account>, part: &HeldPart| {
            accounts.get(&(part.scope.clone(), part.period)).copied().filter(|account| account.start == part.start)
        };
        for part in &self.parts {
            let Some(limits) = every.get(&part.scope) else { continue };
            let Some(account) = current(&accounts, part) else { continue };
            for (period, limit) in limits.periodic().filter(|(period, _)| *period == part.period) {
                let needed = needed(limit.kind(), extra);
                if let Some(remaining) = shortfall(limit, account.used(limit.kind()), needed) {
                    let (_, end) = shared.timezone.bounds(period, part.start);
                    return Err(exhausted(&part.scope, limit, period, remaining, needed, end, now));
                }
            }
        }
        let usd = extra.usd.unwrap_or(0.0);
        for part in &mut self.parts {
            if current(&accounts, part).is_none() {
                continue;
            }
            if let Some(account) = accounts.get_mut(&(part.scope.clone(), part.period)) {
                account.held_tokens = account.held_tokens.saturating_add(extra.tokens);
                account.held_usd += usd;
                part.tokens = part.tokens.saturating_add(extra.tokens);
                part.usd += usd;
            }
        }
        Ok(())
    }
}

impl Shared {
    /// Adds `extra` to a fleet hold: one more atomic hold on its accounts,
    /// merged into it so that its settle and release move the total. While
    /// Redis is out, `local` holds the extra against this gateway's share
    /// (kept beside the fleet hold, released when it settles) and `refuse`
    /// is `shared_state_unavailable`.
    async fn top_up_fleet(
        &self,
        held: &mut FleetHold,
        scopes: &[Scope],
        extra: Spend,
        model: &str,
    ) -> Result<(), BudgetError> {
        match held.budgets.hold(&held.checks, extra).await {
            Ok(_) => {
                held.worst = held.worst.plus(extra);
                Ok(())
            }
            Err(HoldRefused::Exhausted { index, remaining }) => {
                let check = held.checks.get(index).ok_or_else(|| unavailable(model))?;
                Err(fleet_exhausted(check, remaining, extra, self.clock.now()))
            }
            Err(HoldRefused::Unavailable) => {
                let local = self.fleet.get().and_then(|fleet| fleet.local_share.as_ref());
                let Some(local) = local else { return Err(unavailable(model)) };
                match &mut held.outage {
                    Some(outage) => {
                        outage.top_up_in_memory(extra)?;
                        outage.held = outage.held.plus(extra);
                        Ok(())
                    }
                    None => {
                        held.outage = Some(Box::new(local.hold(scopes, extra, model)?));
                        Ok(())
                    }
                }
            }
        }
    }
}

/// Runs a settle or release of the fleet's accounts as its own task (a hold
/// is settled from synchronous code, and Redis is remote).
fn spawn_or_warn(work: impl std::future::Future<Output = ()> + Send + 'static) {
    match tokio::runtime::Handle::try_current() {
        Ok(runtime) => {
            runtime.spawn(work);
        }
        Err(_) => tracing::error!("a fleet budget hold was settled outside a runtime: its spend is not recorded"),
    }
}

impl Drop for Hold {
    fn drop(&mut self) {
        if let Some(held) = self.fleet.take() {
            let FleetHold { budgets, accounts, worst, outage, .. } = held;
            drop(outage);
            spawn_or_warn(async move { budgets.release(&accounts, worst).await });
            return;
        }
        if self.parts.is_empty() {
            return;
        }
        let parts = std::mem::take(&mut self.parts);
        let mut accounts = self.shared.lock();
        for part in parts {
            let Some(account) = accounts.get_mut(&(part.scope, part.period)) else { continue };
            if account.start == part.start {
                account.held_tokens = account.held_tokens.saturating_sub(part.tokens);
                account.held_usd = (account.held_usd - part.usd).max(0.0);
            }
        }
    }
}
