//! The spend of the current day and month, read back from the ledger when a
//! [`crate::Weir`] is built, so a restart resets nothing. Calls count in the
//! period they started in (the hold's period), as the ledger's `started_ms` says.

use super::book::BudgetBook;
use super::clock::Period;
use super::limits::{Scope, Spend, total_tokens};
use crate::ledger::{LedgerRead, ReadError};

/// Adds the ledger's spend in the current periods to `book`, per key, member
/// and team. A ledger file that does not exist yet has nothing to add.
pub fn rebuild(book: &BudgetBook, reader: &dyn LedgerRead) -> Result<(), ReadError> {
    if book.is_empty() {
        return Ok(());
    }
    let now = book.now();
    for period in [Period::Day, Period::Month] {
        let (start, _) = book.timezone().bounds(period, now);
        for row in reader.spend_by_caller(start)? {
            let spent = Spend { tokens: total_tokens(&row.tokens), usd: Some(row.cost_usd) };
            let scopes = [row.key_id.map(Scope::Key), row.member.map(Scope::Member), row.team.map(Scope::Team)];
            for scope in scopes.into_iter().flatten() {
                book.restore(&scope, period, start, spent);
            }
        }
    }
    Ok(())
}
