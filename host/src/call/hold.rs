//! The budget hold: once the target and the caller are known, the call's worst
//! case is held against every budget of its key, member and team (see
//! [`crate::budget`]) before anything is admitted or sent, and the hold is
//! recorded (the ledger keeps it for a call a crash cuts off); the call's
//! record settles it.
//!
//! That first hold covers the first attempt. Every later attempt of a chat
//! call — a retry, the truncation escalation, a correction turn, an empty
//! answer's re-run, a stream's replay — tops it up before it is sent
//! ([`top_up`], from [`super::spend::Spend::cover`]): the hold must cover what
//! the attempts so far reported spending plus the next attempt's worst case,
//! checked like the first hold. Each top-up is recorded as one more hold row
//! of the amount it added, so a call a crash cuts off counts the sum.

use crate::Weir;
use crate::admission::{estimate_input, output_reserve};
use crate::budget::{self, Hold};
use crate::caller::Caller;
use crate::chat::ChatRequest;
use crate::error::WeirError;
use crate::record::Tokens;
use crate::types::Conversation;

use super::effort;
use super::opening::Opening;
use super::target::{Reached, Target};

/// Holds the call's worst case — its input estimate plus the output reserve
/// the gates will send (the same formula), priced at the entry's prices, and
/// the most web searches its web search tools may run (their `max_uses`) at
/// the entry's web search price — or refuses the call. `None` for a caller without budgets.
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
    let worst = budget::with_web_searches(target.search_price, worst, target.search_bound);
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

/// What a call's attempts spent so far, and the web searches each attempt
/// may run, for [`top_up`].
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Searched {
    pub tokens: Tokens,
    /// The web searches the attempts so far ran.
    pub web_searches: u64,
    /// The most web searches one attempt may run (its tools' `max_uses`).
    pub search_bound: u64,
    /// USD per thousand of the call's web searches.
    pub search_price: Option<f64>,
}

/// Tops `hold` up before an attempt after the first: to what the call's
/// attempts reported spending (`spent`, with the web searches they ran) plus
/// the worst case of the attempt about to go — the input estimate of
/// `conversation` as it will be sent and its output budget `max_tokens`,
/// priced at the entry's prices, and its web search bound. What it adds
/// is recorded as one more hold row. Refused (the amount does not fit a
/// budget, or the total passes a per-call ceiling), the attempt is not sent
/// and the call ends with that category.
pub(super) async fn top_up(
    target: &Reached<'_>,
    hold: &mut Hold,
    spent: &Searched,
    conversation: &Conversation,
    max_tokens: u32,
) -> Result<(), WeirError> {
    let model = target.model;
    let next = budget::worst_case(model, estimate_input(model.tokenizer, conversation), max_tokens);
    let next = budget::with_web_searches(spent.search_price, next, spent.search_bound);
    let spent_so_far =
        budget::with_web_searches(spent.search_price, budget::spent(model, &spent.tokens), spent.web_searches);
    let total = spent_so_far.plus(next);
    let added = match hold.top_up(total, &model.id).await {
        Ok(added) => added,
        Err(error) => {
            tracing::info!(model = %model.id, needed = total.tokens, held = hold.held().tokens, %error,
                "the next attempt does not fit the caller's budget: not sent");
            return Err(error.into());
        }
    };
    match added {
        Some(added) => target.opening.held(target.weir.observers(), added).await,
        None => Ok(()),
    }
}
