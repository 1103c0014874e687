//! The output budget: one function decides how many output tokens a call
//! reserves, and the wire `max_tokens` is that same number, so what is metered
//! locally and what the provider pre-debits cannot drift apart.

use crate::catalog::ModelSpec;
use crate::types::Effort;

/// What a call reserves for its output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutputReserve {
    /// The wire `max_tokens` and the reservation: declared output plus the
    /// reasoning headroom, clamped at the model's ceiling.
    pub max_tokens: u32,
    /// The reasoning headroom booked for the call's effort (the thinking budget a
    /// provider that takes one is sent), never above `max_tokens`.
    pub thinking_budget: Option<u32>,
}

/// Why a call's output reserve could not be set: refused before admission.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReserveError {
    /// Nothing declares an output budget, and none is invented.
    #[error(
        "model `{model}`: no output budget is declared; set one on the request (`max_tokens`, \
         `max_completion_tokens` or `max_output_tokens`, as its API names it), or `output_tokens` on the catalog entry"
    )]
    Undeclared { model: String },
    #[error("invalid request: model `{model}`: the output budget must be at least one token")]
    Zero { model: String },
}

/// The declared output (the request's, else the catalog entry's) plus the
/// reasoning headroom the call's effort books in the catalog — only for an
/// entry whose `reasoning` says effort reaches its wire — clamped at the
/// model's ceiling. When the ceiling cuts, reasoning is cut first: the answer
/// keeps at least `min(declared, answer_reserve)`. Nothing declared anywhere is
/// an error saying where to declare it, never an invented default.
pub fn output_reserve(
    requested: Option<u32>,
    effort: Option<Effort>,
    model: &ModelSpec,
    answer_reserve: u32,
) -> Result<OutputReserve, ReserveError> {
    let declared =
        requested.or(model.output_tokens).ok_or_else(|| ReserveError::Undeclared { model: model.id.clone() })?;
    if declared == 0 {
        return Err(ReserveError::Zero { model: model.id.clone() });
    }
    let headroom = model.reasoning.and(effort).and_then(|effort| model.thinking_budget.for_effort(effort));
    let max_tokens = declared.saturating_add(headroom.unwrap_or(0)).min(model.max_output_tokens);
    let answer_keeps = declared.min(answer_reserve).min(max_tokens);
    let thinking_budget = headroom.map(|budget| budget.min(max_tokens - answer_keeps)).filter(|budget| *budget > 0);
    Ok(OutputReserve { max_tokens, thinking_budget })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::DEFAULT_ANSWER_RESERVE;

    fn model(output_tokens: Option<u32>) -> ModelSpec {
        ModelSpec { output_tokens, ..ModelSpec::sample() }
    }

    fn reserve(requested: Option<u32>, effort: Option<Effort>, model: &ModelSpec) -> u32 {
        output_reserve(requested, effort, model, DEFAULT_ANSWER_RESERVE).unwrap().max_tokens
    }

    #[test]
    fn request_declaration_wins_over_catalog() {
        assert_eq!(reserve(Some(300), None, &model(Some(500))), 300);
        assert_eq!(reserve(None, None, &model(Some(500))), 500);
    }

    #[test]
    fn reasoning_headroom_rides_above_the_declared_output() {
        let reserve = output_reserve(Some(300), Some(Effort::High), &model(None), 4_096).unwrap();
        assert_eq!(reserve, OutputReserve { max_tokens: 900, thinking_budget: Some(600) });
        let unbooked = output_reserve(Some(300), Some(Effort::Low), &model(None), 4_096).unwrap();
        assert_eq!(unbooked, OutputReserve { max_tokens: 300, thinking_budget: None }, "no entry books nothing");
    }

    #[test]
    fn an_entry_without_reasoning_books_no_headroom() {
        let plain = ModelSpec { reasoning: None, ..model(None) };
        let reserve = output_reserve(Some(300), Some(Effort::High), &plain, 4_096).unwrap();
        assert_eq!(reserve, OutputReserve { max_tokens: 300, thinking_budget: None });
    }

    #[test]
    fn clamped_at_the_model_ceiling_cutting_reasoning_first() {
        assert_eq!(reserve(Some(50_000), None, &model(None)), 1_000);
        // 700 declared + 600 headroom under a 1 000 ceiling: the answer keeps its 700.
        let reserve = output_reserve(Some(700), Some(Effort::High), &model(None), 4_096).unwrap();
        assert_eq!(reserve, OutputReserve { max_tokens: 1_000, thinking_budget: Some(300) });
        // A smaller answer reserve lets reasoning keep more of the ceiling.
        let reserve = output_reserve(Some(700), Some(Effort::High), &model(None), 500).unwrap();
        assert_eq!(reserve, OutputReserve { max_tokens: 1_000, thinking_budget: Some(500) });
        // A declared output at the ceiling leaves reasoning nothing: none is sent.
        let reserve = output_reserve(Some(1_000), Some(Effort::High), &model(None), 4_096).unwrap();
        assert_eq!(reserve, OutputReserve { max_tokens: 1_000, thinking_budget: None });
    }

    #[test]
    fn nothing_declared_is_an_error_that_says_where_to_declare() {
        let message = output_reserve(None, None, &model(None), 4_096).unwrap_err().to_string();
        assert!(message.contains("max_tokens") && message.contains("output_tokens"), "{message}");
        assert!(output_reserve(Some(0), None, &model(None), 4_096).is_err());
    }
}
