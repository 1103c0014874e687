//! The budget hold: once the target and the caller are known, the call's worst
//! case is held against every budget of its key, member and team (see
//! [`crate::budget`]) before anything is admitted or sent, and the hold is
//! recorded (the ledger keeps it for a call a crash cuts off); the call's
//! record settles it.

use crate::Weir;
use crate::admission::{estimate_input, output_reserve};
use crate::budget::{self, Hold};
use crate::chat::ChatRequest;
use crate::error::WeirError;
use crate::identity::Caller;

use super::effort;
use super::opening::Opening;
use super::target::{Reached, Target};

/// Holds the call's worst case — its input estimate plus the output reserve
/// the gates will send (the same formula), priced at the entry's prices —
/// or refuses the call. `None` for a caller without budgets.
pub(super) async fn take(
    weir: &Weir,
    request: &ChatRequest,
    target: &Target<'_>,
    opening: &Opening,
) -> Result<Option<Hold>, WeirError> {
    let Some(caller) = &request.caller else { return Ok(None) };
    if !applies(weir, caller) {
        return Ok(None);
    }
    let model = target.model;
    let booked = effort::effective(weir, request).filter(|_| request.thinking_budget.is_none());
    let reserve = output_reserve(request.max_output_tokens, booked, model, weir.config().answer_reserve())?;
    let input = estimate_input(model.tokenizer, &request.conversation);
    let worst = budget::worst_case(model, input, reserve.max_tokens);
    take_worst(weir, Some(caller), target, worst, opening).await
}

/// Whether any budget applies to `caller` (so a worst case is worth working out).
pub(super) fn applies(weir: &Weir, caller: &Caller) -> bool {
    !weir.budgets().applicable(caller.key_id.as_deref(), &caller.member, caller.team.as_deref()).is_empty()
}

/// Holds `worst` against every budget of the caller's key, member and team,
/// whole or not at all; `None` for a caller without budgets.
pub(super) async fn take_worst(
    weir: &Weir,
    caller: Option<&Caller>,
    target: &Reached<'_>,
    worst: budget::Spend,
    opening: &Opening,
) -> Result<Option<Hold>, WeirError> {
    let Some(caller) = caller else { return Ok(None) };
    let book = weir.budgets();
    let scopes = book.applicable(caller.key_id.as_deref(), &caller.member, caller.team.as_deref());
    if scopes.is_empty() {
        return Ok(None);
    }
    let hold = book.take(&scopes, worst, &target.model.id).await?;
    // Dropped on a refusal, the hold is given back.
    opening.held(weir.observers(), worst).await?;
    Ok(Some(hold))
}
