//! The budget hold: once the target and the caller are known, the call's worst
//! case is held against every budget of its key, member and team (see
//! [`crate::budget`]) before anything is admitted or sent; the record settles it.

use crate::Weir;
use crate::admission::{estimate_input, output_reserve};
use crate::budget::{self, Hold};
use crate::chat::ChatRequest;
use crate::error::WeirError;

use super::effort;
use super::target::Target;

/// Holds the call's worst case — its input estimate plus the output reserve
/// the gates will send (the same formula), priced at the entry's prices —
/// or refuses the call. `None` for a caller without budgets.
pub(super) fn take(weir: &Weir, request: &ChatRequest, target: &Target<'_>) -> Result<Option<Hold>, WeirError> {
    let Some(caller) = &request.caller else { return Ok(None) };
    let book = weir.budgets();
    let scopes = book.applicable(caller.key_id.as_deref(), &caller.member, caller.team.as_deref());
    if scopes.is_empty() {
        return Ok(None);
    }
    let model = target.model;
    let booked = effort::effective(weir, request).filter(|_| request.thinking_budget.is_none());
    let reserve = output_reserve(request.max_output_tokens, booked, model, weir.config().answer_reserve())?;
    let input = estimate_input(model.tokenizer, &request.conversation);
    let worst = budget::worst_case(model, input, reserve.max_tokens);
    book.hold(&scopes, worst, &model.id).map(Some)
}
