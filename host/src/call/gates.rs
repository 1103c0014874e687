//! The gates a decoded answer passes, in order: refusal, truncation, emptiness,
//! structure. Each decides from the facts the component supplied (stop reason,
//! usage, content), the same way for every provider.
//!
//! - **Refusal**: a content-filtered stop is final — a safety classifier is not
//!   re-rolled — and fails with the catalog id, the provider's category and its
//!   explanation, so a caller can resubmit the work elsewhere.
//! - **Truncation**: a max-tokens stop, or — only when the backend gave no
//!   typed stop reason (`other`) — output that reached the ceiling sent (the
//!   backstop), re-runs the call once with the budget escalated to the model's
//!   ceiling — reserved and sent through the one output-budget formula. An
//!   answer that ended naturally (end of turn, a stop sequence, a tool call) is
//!   never truncated, whatever its length. A call already at the ceiling fails
//!   at once: a second call would only repeat the truncation. Callers may opt
//!   out and accept the truncated answer; the gateway's default keeps an answer
//!   that has something and escalates only one that has nothing (see
//!   [`Truncation`]).
//! - **Emptiness**: no text and no tool call, without reaching the limit, is a
//!   pre-commit provider failure: re-run, bounded twice. Each payload gets one
//!   re-run (a correction or an escalation changes the payload and brings a
//!   fresh one); and a call-wide count of empty answers catches a payload that
//!   drifts between empty replies (empty, an answer sent back for correction,
//!   empty, …), which the per-payload bound alone would never end.
//! - **Structure**: with a response schema, text that does not parse or lacks a
//!   required field gets a correction turn and a re-ask, bounded.
//!
//! Every re-run takes an attempt from the call's one [`Spend`] first: when the
//! ceiling is reached the call fails naming what it still needed. Before it is
//! sent, the call's budget hold is topped up to cover it (see
//! [`Spend::cover`]); when the caller's budget cannot, the call fails with
//! `budget_exhausted` or `call_budget_exceeded` and the answer in hand is not
//! returned (what its attempt spent is settled from its usage).

use serde_json::Value;

use crate::admission::{OutputReserve, output_reserve};
use crate::catalog::{ModelSpec, Reasoning};
use crate::chat::{ChatRequest, Truncation};
use crate::error::{Pending, WeirError};
use crate::record::AttemptReason;
use crate::types::{CallParams, ContentBlock, DecodedResponse, Effort, StopReason, Turn, text_of};

use super::retry::with_retries;
use super::schema::{self, AnswerSchema, SchemaFailure};
use super::spend::Spend;
use super::target::Target;
use super::{Attempt, Outcome, Tally};
use super::{effort, policy};

/// Re-runs of one payload that came back empty (the budget latches once spent;
/// a new payload — a correction turn, an escalated budget — brings a fresh one).
const EMPTY_RETRIES_PER_PAYLOAD: u32 = 1;
/// Empty answers in a row across payloads: the call fails at this many. "In a
/// row" means with no accepted answer between them; the answers a call sends back
/// (for a correction or an escalation) are not accepted, and an accepted answer
/// ends the call, so within a call this counts every empty answer. Above the
/// per-payload bound (at most two empties per payload), so it fires only when the
/// payload drifts between empty replies.
const MAX_CONSECUTIVE_EMPTY: u32 = 3;
// The call-wide bound must sit above what one payload can reach alone, or it
// could never be the one that fires.
const _: () = assert!(MAX_CONSECUTIVE_EMPTY > EMPTY_RETRIES_PER_PAYLOAD + 1);

/// What goes on the wire beside the conversation.
#[derive(Debug, Clone, Copy)]
pub(super) struct Wire {
    /// The response schema goes to the component (else it is described in the
    /// prompt, see `call::prompted_schema`, and only the gate reads it).
    pub schema: bool,
}

/// What the gates have spent so far in this call.
#[derive(Debug, Default)]
struct Spent {
    escalated: bool,
    corrections: u32,
    /// Empty answers to the payload being sent now.
    empty_this_payload: u32,
    /// Empty answers since the last accepted one (see [`MAX_CONSECUTIVE_EMPTY`]).
    empty_in_a_row: u32,
}

impl Spent {
    /// The payload changes (a correction turn, an escalated budget): its own
    /// empty re-run is fresh; the call-wide count goes on.
    fn new_payload(&mut self) {
        self.empty_this_payload = 0;
    }
}

/// Runs attempts through the retry loop until an answer passes every gate. A
/// live stream returns at once: its first output is already in hand, and nothing
/// a caller has seen can be re-run. The stamp's attempt count is the call's
/// spend, whatever the outcome.
pub(super) async fn run<A: Attempt>(
    attempt: &A,
    target: &Target<'_>,
    request: &ChatRequest,
    tally: &mut Tally,
    wire: Wire,
) -> Result<Outcome<A::Live>, WeirError> {
    // The hold stays the call's (a call dropped mid-attempt settles it from
    // its record); its attempts borrow it to top it up.
    let Tally { started, requested_max_tokens, notes, hold, .. } = tally;
    let mut spend = Spend::for_call(target.model, request, *started).holding(
        hold.as_mut(),
        target.search_bound,
        target.search_price,
    );
    let mut noted = Noted { requested_max_tokens, notes };
    let result = gate(attempt, target, request, wire, &mut noted, &mut spend).await;
    tally.native_answer = spend.log.take_native().map(std::sync::Arc::new);
    let (attempts, records) = (spend.attempts(), spend.log.into_records());
    tally.attempts = attempts;
    tally.attempt_records = records;
    result
}

/// What the gates note for the stamp and the record while they run.
struct Noted<'t> {
    requested_max_tokens: &'t mut Option<u32>,
    notes: &'t mut Vec<&'static str>,
}

async fn gate<A: Attempt>(
    attempt: &A,
    target: &Target<'_>,
    request: &ChatRequest,
    wire: Wire,
    noted: &mut Noted<'_>,
    spend: &mut Spend<'_>,
) -> Result<Outcome<A::Live>, WeirError> {
    let model = target.model;
    let schema = request.response_schema.as_ref().map(|s| parse_schema(model, &s.schema_json)).transpose()?;
    let mut conversation = request.conversation.clone();
    let mut requested = request.max_output_tokens;
    let mut spent = Spent::default();
    let effort = effort::effective(target.weir, request);
    // An explicit thinking budget counts inside the declared output: no headroom.
    let booked = effort.filter(|_| request.thinking_budget.is_none());
    let answer_reserve = target.weir.config().answer_reserve();
    // A request that declares no budget fails before any attempt is counted.
    output_reserve(requested, booked, model, answer_reserve)?;
    if model.reasoning.is_none() && (effort.is_some() || request.thinking_budget.is_some()) {
        noted.notes.push(EFFORT_NOT_APPLIED);
    }
    spend.first_attempt();
    loop {
        let reserve = output_reserve(requested, booked, model, answer_reserve)?;
        *noted.requested_max_tokens = Some(reserve.max_tokens);
        let params = call_params(request, model, reserve, effort, wire);
        let mut answer = match with_retries(attempt, target, &conversation, &params, request, spend).await? {
            Outcome::Complete(answer) => answer,
            live @ Outcome::Live(_) => return Ok(live),
        };

        if answer.stop_reason == StopReason::ContentFiltered {
            return Err(refused(model, answer));
        }
        if was_truncated(&answer, reserve) && !keeps_truncated(request, &answer) {
            if spent.escalated || reserve.max_tokens >= model.max_output_tokens {
                return Err(WeirError::OutputTruncated {
                    model: model.id.clone(),
                    max_tokens: reserve.max_tokens,
                    ceiling: model.max_output_tokens,
                });
            }
            spend.next_attempt(AttemptReason::Escalation, || Pending::Escalation)?;
            tracing::info!(model = %model.id, from = reserve.max_tokens, to = model.max_output_tokens, "truncated; escalating");
            spent.escalated = true;
            spent.new_payload();
            requested = Some(model.max_output_tokens);
            continue;
        }
        // A paused server-tool turn may carry nothing but the provider's own blocks.
        let paused = answer.stop_reason == StopReason::Pause;
        if is_empty(&answer) && answer.stop_reason != StopReason::MaxTokens && !paused {
            spent.empty_this_payload += 1;
            spent.empty_in_a_row += 1;
            if spent.empty_this_payload > EMPTY_RETRIES_PER_PAYLOAD || spent.empty_in_a_row >= MAX_CONSECUTIVE_EMPTY {
                return Err(WeirError::EmptyResponses { model: model.id.clone(), count: spent.empty_in_a_row });
            }
            spend.next_attempt(AttemptReason::EmptyRerun, || Pending::EmptyRerun)?;
            tracing::info!(model = %model.id, "empty answer; re-running");
            continue;
        }
        let Some(schema) = &schema else { return Ok(Outcome::Complete(answer)) };
        let text = text_of(&answer.content);
        match schema::check(&text, schema) {
            Ok(instance) => {
                answer.content = structured_content(answer.content, instance);
                return Ok(Outcome::Complete(answer));
            }
            Err(failure) if spent.corrections < spend.max_corrections() => {
                let last = || invalid_answer(model, spent.corrections, failure.clone());
                spend.next_attempt(AttemptReason::Correction, || Pending::Correction(Box::new(last())))?;
                tracing::info!(model = %model.id, ?failure, "structured answer rejected; correcting");
                spent.corrections += 1;
                spent.new_payload();
                conversation.turns.push(Turn::assistant(vec![ContentBlock::Text(text)]));
                conversation.turns.push(Turn::user(vec![ContentBlock::Text(failure.correction())]));
            }
            Err(failure) => return Err(invalid_answer(model, spent.corrections, failure)),
        }
    }
}

/// The first attempt's wire parameters, exactly as [`gate`] builds them (the
/// caller's budget, the effort after every default, the entry's sampling
/// rule): what the answer cache keys a request by.
pub(super) fn first_params(target: &Target<'_>, request: &ChatRequest, wire: Wire) -> Result<CallParams, WeirError> {
    let model = target.model;
    let effort = effort::effective(target.weir, request);
    let booked = effort.filter(|_| request.thinking_budget.is_none());
    let reserve = output_reserve(request.max_output_tokens, booked, model, target.weir.config().answer_reserve())?;
    Ok(call_params(request, model, reserve, effort, wire))
}

/// The record's note for a call whose effort did not reach the wire: its entry
/// declares no `reasoning`.
const EFFORT_NOT_APPLIED: &str = "effort_not_applied";

/// The wire parameters. Effort reaches the wire as the entry declares: an
/// effort field (`reasoning = "effort"`), a thinking budget (`"thinking"`: the
/// caller's explicit budget, else the effort's headroom), or not at all.
fn call_params(
    request: &ChatRequest,
    model: &ModelSpec,
    reserve: OutputReserve,
    effort: Option<Effort>,
    wire: Wire,
) -> CallParams {
    let (reasoning_effort, thinking_budget) = match model.reasoning {
        Some(Reasoning::Effort) => (effort, None),
        // A caller's explicit budget counts inside its declared output, so it only
        // replaces the effort's; the ceiling still bounds it.
        Some(Reasoning::Thinking) => {
            (None, request.thinking_budget.map(|budget| budget.min(reserve.max_tokens)).or(reserve.thinking_budget))
        }
        None => (None, None),
    };
    CallParams {
        wire_model_id: model.wire_id.clone(),
        max_tokens: reserve.max_tokens,
        thinking_budget,
        reasoning_effort,
        // Omitted, never rewritten, where the deployment takes only its default.
        temperature: policy::temperature(model, request),
        stop: request.stop.clone(),
        response_schema: request.response_schema.clone().filter(|_| wire.schema),
        stream: false,
    }
}

fn parse_schema(model: &ModelSpec, text: &str) -> Result<AnswerSchema, WeirError> {
    let schema: Value = serde_json::from_str(text).map_err(|e| {
        WeirError::InvalidRequest(format!("model `{}`: the response schema is not JSON: {e}", model.id))
    })?;
    AnswerSchema::compile(&schema).map_err(|e| {
        WeirError::InvalidRequest(format!("model `{}`: the response schema is not a valid JSON Schema: {e}", model.id))
    })
}

fn refused(model: &ModelSpec, answer: DecodedResponse) -> WeirError {
    let refusal = answer.refusal.unwrap_or(crate::types::Refusal { category: None, explanation: None });
    tracing::warn!(model = %model.id, category = ?refusal.category, "the provider refused");
    WeirError::Refused { model: model.id.clone(), category: refusal.category, explanation: refusal.explanation }
}

/// A typed max-tokens stop; or, for a backend that gave no typed stop reason
/// (`other`), output that reached the ceiling sent. A natural end is never a
/// truncation, however long the answer.
fn was_truncated(answer: &DecodedResponse, reserve: OutputReserve) -> bool {
    match answer.stop_reason {
        StopReason::MaxTokens => true,
        StopReason::Other => answer.usage.as_ref().is_some_and(|usage| usage.output >= u64::from(reserve.max_tokens)),
        StopReason::EndTurn
        | StopReason::StopSequence
        | StopReason::ToolUse
        | StopReason::ContentFiltered
        | StopReason::Pause
        | StopReason::ContextWindowExceeded => false,
    }
}

/// Whether a truncated answer goes to the caller as it is (see [`Truncation`]).
fn keeps_truncated(request: &ChatRequest, answer: &DecodedResponse) -> bool {
    match request.truncation {
        Truncation::Accept => true,
        Truncation::Escalate => false,
        Truncation::KeepPartial => request.response_schema.is_none() && has_whole_content(answer),
    }
}

/// Text or a tool call, and no tool call whose arguments were cut off: an
/// unclosed call must never reach a tool, so such an answer counts as nothing.
fn has_whole_content(answer: &DecodedResponse) -> bool {
    let whole_calls = answer.content.iter().all(|block| match block {
        ContentBlock::ToolUse(call) => serde_json::from_str::<serde::de::IgnoredAny>(&call.input_json).is_ok(),
        _ => true,
    });
    whole_calls && !is_empty(answer)
}

fn is_empty(answer: &DecodedResponse) -> bool {
    answer.content.iter().all(|block| match block {
        ContentBlock::Text(text) => text.trim().is_empty(),
        ContentBlock::ToolUse(_) => false,
        ContentBlock::Thinking(_)
        | ContentBlock::Image(_)
        | ContentBlock::Document(_)
        | ContentBlock::ToolResult(_) => true,
    })
}

/// The validated instance replaces the answer's text (normalized: a fenced or
/// schema-echo answer becomes the bare JSON); other blocks stay.
fn structured_content(content: Vec<ContentBlock>, instance: Value) -> Vec<ContentBlock> {
    let mut blocks: Vec<ContentBlock> =
        content.into_iter().filter(|block| !matches!(block, ContentBlock::Text(_))).collect();
    blocks.push(ContentBlock::Text(instance.to_string()));
    blocks
}

fn invalid_answer(model: &ModelSpec, corrections: u32, failure: SchemaFailure) -> WeirError {
    let reason = match failure {
        SchemaFailure::Parse(reason) => format!("not JSON ({reason})"),
        SchemaFailure::Validation(reason) => reason,
    };
    WeirError::InvalidAnswer { model: model.id.clone(), corrections, reason }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::ThinkingBudget;
    use crate::types::Conversation;

    fn model(reasoning: Option<Reasoning>) -> ModelSpec {
        ModelSpec {
            max_output_tokens: 8_000,
            context_window: 100_000,
            thinking_budget: ThinkingBudget { high: Some(4_000), ..ThinkingBudget::default() },
            reasoning,
            ..ModelSpec::sample()
        }
    }

    fn params(request: &ChatRequest, model: &ModelSpec, effort: Option<Effort>) -> CallParams {
        let booked = effort.filter(|_| request.thinking_budget.is_none());
        let reserve = output_reserve(request.max_output_tokens, booked, model, 4_096).unwrap();
        call_params(request, model, reserve, effort, Wire { schema: true })
    }

    #[test]
    fn an_explicit_thinking_budget_replaces_the_efforts_and_counts_inside_the_declared_output() {
        let model = model(Some(Reasoning::Thinking));
        let mut request = ChatRequest::new("m", Conversation::user("hi")).max_output_tokens(3_000);
        request.thinking_budget = Some(2_048);
        let params_sent = params(&request, &model, Some(Effort::High));
        assert_eq!((params_sent.max_tokens, params_sent.thinking_budget), (3_000, Some(2_048)), "no headroom added");

        request.thinking_budget = None;
        let params_sent = params(&request, &model, Some(Effort::High));
        assert_eq!(
            (params_sent.max_tokens, params_sent.thinking_budget),
            (7_000, Some(4_000)),
            "the effort's headroom"
        );
        assert_eq!(params_sent.reasoning_effort, None, "a thinking entry gets a budget, not an effort field");
    }

    #[test]
    fn an_effort_entry_gets_the_effort_field_and_its_headroom_booked() {
        let request = ChatRequest::new("m", Conversation::user("hi")).max_output_tokens(3_000);
        let sent = params(&request, &model(Some(Reasoning::Effort)), Some(Effort::High));
        assert_eq!((sent.max_tokens, sent.reasoning_effort, sent.thinking_budget), (7_000, Some(Effort::High), None));
    }

    #[test]
    fn an_entry_without_reasoning_gets_no_reasoning_field() {
        let mut request = ChatRequest::new("m", Conversation::user("hi")).max_output_tokens(3_000);
        request.thinking_budget = Some(2_048);
        let sent = params(&request, &model(None), Some(Effort::High));
        assert_eq!((sent.max_tokens, sent.reasoning_effort, sent.thinking_budget), (3_000, None, None));
    }
}
