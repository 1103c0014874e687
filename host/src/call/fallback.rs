//! A role's `fallback`: other entries that serve the role once the entry it
//! resolved to is exhausted, only because the operator named them.
//!
//! It applies only to a call that named a role with a `fallback`, whose entry
//! failed with its capacity spent — the last upstream signal a retry would
//! have re-run (rate limit, overload, 5xx, timeout, connection) once the
//! retry budget or the attempt ceiling was spent, or no deployment able to
//! take calls. An invalid request, a refusal, an authentication failure or a
//! budget never falls back. Each fallback entry is resolved afresh for the
//! caller: its key must list the entry itself (a role's name does not carry
//! over), the compliance envelope must admit it and the request's needs must
//! fit its capabilities, else it is passed over. The budget hold of the entry
//! that failed is settled with what its attempts reported, and a new one is
//! taken at the fallback's prices. Never silent: the answer's `x-weir-model`
//! names the fallback that served and `x-weir-fallback-from` the entry it
//! stood in for; the record the same (`model`, and the note `fallback_from:`).

use crate::Weir;
use crate::chat::ChatRequest;
use crate::error::{Pending, WeirError};
use crate::routing::RoleTarget;

use super::opening::Opening;
use super::{Attempt, Outcome, Tally, run, target};

/// Serves the call from the role's fallback entries after `error`, or
/// answers `error` when no fallback applies or none can serve.
pub(super) async fn after<A: Attempt>(
    weir: &Weir,
    request: &mut ChatRequest,
    tally: &mut Tally,
    attempt: &A,
    opening: &Opening,
    error: WeirError,
) -> Result<Outcome<A::Live>, WeirError> {
    // The role the caller named (a call that resolved records it; one whose
    // role could not resolve at all names it as its model).
    let named = tally.resolved.as_ref().map_or(Some(request.model.as_str()), |resolved| resolved.role.as_deref());
    let Some(role) = named.and_then(|name| weir.roles().get(name)) else { return Err(error) };
    if role.fallback.is_empty() || !exhausted(&error) {
        return Err(error);
    }
    let primary = match (&tally.resolved, &role.serves) {
        (Some(resolved), _) => resolved.model.clone(),
        (None, RoleTarget::Entry(entry)) => entry.clone(),
        (None, RoleTarget::Grade(grade)) => grade.clone(),
    };
    let mut last = error;
    let mut records = Vec::new();
    let mut attempts = 0;
    for entry in &role.fallback {
        if !exhausted(&last) {
            break;
        }
        close_leg(tally, &mut records, &mut attempts);
        let target = match target::resolve_fallback(weir, entry, role, request.caller.as_ref(), opening).await {
            Ok(target) => target,
            Err(refused) => {
                tracing::info!(role = %role.name, fallback = %entry, reason = %refused, "fallback passed over");
                continue;
            }
        };
        tracing::warn!(
            role = %role.name,
            from = %primary,
            fallback = %entry,
            reason = %last,
            "the role's entry is exhausted: its fallback serves the call"
        );
        let result = run(weir, request, tally, attempt, opening, Some(target)).await;
        if let Some(resolved) = &mut tally.resolved {
            resolved.fallback_from = Some(primary.clone());
        }
        match result {
            Ok(outcome) => {
                merge(tally, records, attempts);
                return Ok(outcome);
            }
            Err(error @ (WeirError::CapabilityMismatch { .. } | WeirError::Compliance { .. })) => {
                tracing::info!(role = %role.name, fallback = %entry, reason = %error, "fallback passed over");
            }
            Err(error) => last = error,
        }
    }
    merge(tally, records, attempts);
    Err(last)
}

/// Whether `error` says the entry's capacity is spent, not that the request
/// or the caller is at fault.
fn exhausted(error: &WeirError) -> bool {
    match error {
        WeirError::RetriesExhausted { .. } | WeirError::ProviderUnavailable { .. } => true,
        WeirError::RoleUnavailable { reason, .. } => exhausted(reason),
        WeirError::AttemptCeiling { pending: Pending::Retry(_), .. } => true,
        other => other.retry_policy().is_some(),
    }
}

/// Ends one entry's part of the call: its budget hold settled with what its
/// attempts reported (at its prices), its attempts kept for the record.
fn close_leg(tally: &mut Tally, records: &mut Vec<crate::record::AttemptRecord>, attempts: &mut u32) {
    let leg = std::mem::take(&mut tally.attempt_records);
    if let Some(hold) = tally.hold.take() {
        let billed = crate::record::Billed::of(&leg);
        let cost = tally.resolved.as_ref().and_then(|resolved| resolved.cost(&billed));
        hold.settle(crate::budget::Spend::of(&billed.tokens, cost));
    }
    *attempts += tally.attempts;
    tally.attempts = 0;
    records.extend(leg);
}

/// Puts the earlier entries' attempts before the last one's, for the stamp
/// and the record.
fn merge(tally: &mut Tally, mut records: Vec<crate::record::AttemptRecord>, attempts: u32) {
    records.append(&mut tally.attempt_records);
    tally.attempt_records = records;
    tally.attempts += attempts;
}
