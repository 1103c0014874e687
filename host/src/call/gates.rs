//! The gates a decoded answer passes, in order: refusal, truncation, emptiness,
//! structure. Each decides from the facts the component supplied (stop reason,
//! usage, content), the same way for every provider.
//!
//! - **Refusal**: a content-filtered stop is final — a safety classifier is not
//!   re-rolled — and fails with the catalog id, the provider's category and its
//!   explanation, so a caller can resubmit the work elsewhere.
//! - **Truncation**: a max-tokens stop, or output that reached the ceiling sent
//!   (the backstop for backends without a typed stop reason), re-runs the call
//!   once with the budget escalated to the model's ceiling — reserved and sent
//!   through the one output-budget formula. A call already at the ceiling fails
//!   at once: a second call would only repeat the truncation. Callers may opt
//!   out and accept the truncated answer.
//! - **Emptiness**: no text and no tool call, without reaching the limit, is a
//!   pre-commit provider failure: re-run, bounded once per payload and by a
//!   count of consecutive empty answers across payloads.
//! - **Structure**: with a response schema, text that does not parse or lacks a
//!   required field gets a correction turn and a re-ask, bounded.
//!
//! Every re-run takes an attempt from the call's one [`Spend`] first: when the
//! ceiling is reached the call fails naming what it still needed.

use serde_json::Value;

use crate::admission::{OutputReserve, output_reserve};
use crate::catalog::ModelSpec;
use crate::chat::ChatRequest;
use crate::error::{Pending, WeirError};
use crate::record::AttemptReason;
use crate::types::{CallParams, ContentBlock, DecodedResponse, StopReason, Turn, text_of};

use super::policy;
use super::retry::with_retries;
use super::schema::{self, AnswerSchema, SchemaFailure};
use super::spend::Spend;
use super::target::Target;
use super::{Attempt, Outcome, Tally};

/// Re-runs of one payload that came back empty (the budget latches once spent).
const EMPTY_RETRIES_PER_PAYLOAD: u32 = 1;
/// Empty answers in a row across payloads (corrections change the payload).
const MAX_CONSECUTIVE_EMPTY: u32 = 3;

/// What the gates have spent so far in this call.
#[derive(Debug, Default)]
struct Spent {
    escalated: bool,
    corrections: u32,
    empty_this_payload: u32,
    empty_in_a_row: u32,
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
) -> Result<Outcome<A::Live>, WeirError> {
    let mut spend = Spend::for_call(target.model, request, tally.started);
    let result = gate(attempt, target, request, tally, &mut spend).await;
    tally.attempts = spend.attempts();
    tally.attempt_records = spend.log.into_records();
    result
}

async fn gate<A: Attempt>(
    attempt: &A,
    target: &Target<'_>,
    request: &ChatRequest,
    tally: &mut Tally,
    spend: &mut Spend,
) -> Result<Outcome<A::Live>, WeirError> {
    let model = target.model;
    let schema = request.response_schema.as_ref().map(|s| parse_schema(model, &s.schema_json)).transpose()?;
    let mut conversation = request.conversation.clone();
    let mut requested = request.max_output_tokens;
    let mut spent = Spent::default();
    // A request that declares no budget fails before any attempt is counted.
    output_reserve(requested, request.reasoning_effort, model)?;
    spend.first_attempt();
    loop {
        let reserve = output_reserve(requested, request.reasoning_effort, model)?;
        tally.requested_max_tokens = Some(reserve.max_tokens);
        let params = call_params(request, model, reserve);
        let mut answer = match with_retries(attempt, target, &conversation, &params, request, spend).await? {
            Outcome::Complete(answer) => answer,
            live @ Outcome::Live(_) => return Ok(live),
        };

        if answer.stop_reason == StopReason::ContentFiltered {
            return Err(refused(model, answer));
        }
        if was_truncated(&answer, reserve) && !request.accept_truncated {
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
            requested = Some(model.max_output_tokens);
            continue;
        }
        if is_empty(&answer) && answer.stop_reason != StopReason::MaxTokens {
            spent.empty_this_payload += 1;
            spent.empty_in_a_row += 1;
            if spent.empty_this_payload > EMPTY_RETRIES_PER_PAYLOAD || spent.empty_in_a_row >= MAX_CONSECUTIVE_EMPTY {
                return Err(WeirError::EmptyResponses { model: model.id.clone(), count: spent.empty_in_a_row });
            }
            spend.next_attempt(AttemptReason::EmptyRerun, || Pending::EmptyRerun)?;
            tracing::info!(model = %model.id, "empty answer; re-running");
            continue;
        }
        spent.empty_in_a_row = 0;
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
                spent.empty_this_payload = 0;
                conversation.turns.push(Turn::assistant(vec![ContentBlock::Text(text)]));
                conversation.turns.push(Turn::user(vec![ContentBlock::Text(failure.correction())]));
            }
            Err(failure) => return Err(invalid_answer(model, spent.corrections, failure)),
        }
    }
}

fn call_params(request: &ChatRequest, model: &ModelSpec, reserve: OutputReserve) -> CallParams {
    CallParams {
        wire_model_id: model.wire_id.clone(),
        max_tokens: reserve.max_tokens,
        // A caller's explicit budget counts inside its declared output, so it only
        // replaces the effort's; the ceiling still bounds it.
        thinking_budget: request
            .thinking_budget
            .map(|budget| budget.min(reserve.max_tokens))
            .or(reserve.thinking_budget),
        reasoning_effort: request.reasoning_effort,
        // Omitted, never rewritten, where the deployment takes only its default.
        temperature: policy::temperature(model, request),
        stop: request.stop.clone(),
        response_schema: request.response_schema.clone(),
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

/// A typed max-tokens stop, or output that reached the ceiling sent.
fn was_truncated(answer: &DecodedResponse, reserve: OutputReserve) -> bool {
    answer.stop_reason == StopReason::MaxTokens
        || answer.usage.as_ref().is_some_and(|usage| usage.output >= u64::from(reserve.max_tokens))
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
    use crate::types::{Conversation, Effort};

    fn model() -> ModelSpec {
        ModelSpec {
            max_output_tokens: 8_000,
            context_window: 100_000,
            thinking_budget: ThinkingBudget { high: Some(4_000), ..ThinkingBudget::default() },
            ..ModelSpec::sample()
        }
    }

    #[test]
    fn an_explicit_thinking_budget_replaces_the_efforts_and_counts_inside_the_declared_output() {
        let model = model();
        let mut request = ChatRequest::new("m", Conversation::user("hi")).max_output_tokens(3_000);
        request.thinking_budget = Some(2_048);
        let reserve = output_reserve(request.max_output_tokens, request.reasoning_effort, &model).unwrap();
        let params = call_params(&request, &model, reserve);
        assert_eq!((params.max_tokens, params.thinking_budget), (3_000, Some(2_048)), "no headroom added");

        request.thinking_budget = None;
        request.reasoning_effort = Some(Effort::High);
        let reserve = output_reserve(request.max_output_tokens, request.reasoning_effort, &model).unwrap();
        let params = call_params(&request, &model, reserve);
        assert_eq!((params.max_tokens, params.thinking_budget), (7_000, Some(4_000)), "the effort's headroom");
    }
}
