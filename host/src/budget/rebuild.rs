//! The spend of the current day and month, read back from the ledger when a
//! [`crate::Weir`] is built, so a restart resets nothing. Calls count in the
//! period they started in (the hold's period), as the ledger's `started_ms`
//! says; a call held and never closed (a crash cut it off) counts its worst
//! case, from its hold row.

use std::time::SystemTime;

use super::book::BudgetBook;
use crate::accounting::{Period, Scope, Spend, total_tokens};
use crate::fleet::SpendSource;
use crate::ledger::{LedgerRead, PostgresTarget, ReadError, SharedReader};

/// Adds the ledger's spend in the current periods to `book`, per key, member
/// and team. A ledger file that does not exist yet has nothing to add.
pub fn rebuild(book: &BudgetBook, reader: &dyn LedgerRead) -> Result<(), ReadError> {
    rebuild_where(book, reader, |_| true)
}

/// [`rebuild`] for `scopes` alone: the budgets the admin plane just gave a
/// limit, whose spend this period was not being counted.
pub fn rebuild_scopes(book: &BudgetBook, reader: &dyn LedgerRead, scopes: &[Scope]) -> Result<(), ReadError> {
    rebuild_where(book, reader, |scope| scopes.contains(scope))
}

fn rebuild_where(book: &BudgetBook, reader: &dyn LedgerRead, wanted: impl Fn(&Scope) -> bool) -> Result<(), ReadError> {
    if book.is_empty() {
        return Ok(());
    }
    let now = book.now();
    for period in [Period::Day, Period::Month] {
        let (start, _) = book.timezone().bounds(period, now);
        for row in reader.spend_by_caller(start, true)? {
            let spent = Spend { tokens: total_tokens(&row.tokens), usd: Some(row.cost_usd) };
            let scopes = [row.key_id.map(Scope::Key), row.member.map(Scope::Member), row.team.map(Scope::Team)];
            for scope in scopes.into_iter().flatten().filter(|scope| wanted(scope)) {
                book.restore(&scope, period, start, spent);
            }
        }
    }
    Ok(())
}

/// What `scope` spent in the calls closed that started at or after `since`
/// (a call still running, or cut off, is left out: its hold is settled into
/// the account by its own gateway, or was lost with it).
pub fn spent_by(reader: &dyn LedgerRead, scope: &Scope, since: SystemTime) -> Result<Spend, ReadError> {
    let mut spent = Spend { tokens: 0, usd: Some(0.0) };
    for row in reader.spend_by_caller(since, false)? {
        let caller = match scope {
            Scope::Key(_) => row.key_id.as_deref(),
            Scope::Member(_) => row.member.as_deref(),
            Scope::Team(_) => row.team.as_deref(),
        };
        if caller == Some(scope.name()) {
            spent.tokens += total_tokens(&row.tokens);
            spent.usd = spent.usd.map(|usd| usd + row.cost_usd);
        }
    }
    Ok(spent)
}

/// The fleet's budget accounts seeded from the fleet's PostgreSQL ledger:
/// under `[fleet]` with `[ledger] postgres_url`, an account Redis does not
/// hold (a Redis that lost its data, a fleet started with an empty one)
/// starts from the period's spend there, not from zero.
#[derive(Debug, Clone)]
pub struct FleetLedgerSpend {
    target: PostgresTarget,
}

impl FleetLedgerSpend {
    pub fn new(target: PostgresTarget) -> Self {
        Self { target }
    }
}

impl SpendSource for FleetLedgerSpend {
    fn spent_since(&self, scope: &Scope, since: SystemTime) -> Result<Spend, String> {
        let reader = SharedReader::connect(&self.target).map_err(|error| error.to_string())?;
        spent_by(&reader, scope, since).map_err(|error| error.to_string())
    }
}
