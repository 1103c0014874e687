//! The output budget: one function decides how many output tokens a call
//! reserves, and the wire `max_tokens` is that same number, so what is metered
//! locally and what the provider pre-debits cannot drift apart.

use crate::catalog::ModelSpec;
use crate::error::WeirError;

/// The declared output (the request's, else the catalog entry's), clamped at the
/// model's ceiling. Nothing declared anywhere is an error, never an invented
/// default. (Reasoning headroom joins this sum when effort budgets land.)
pub fn output_reserve(requested: Option<u32>, model: &ModelSpec) -> Result<u32, WeirError> {
    let declared =
        requested
            .or(model.output_tokens)
            .ok_or_else(|| WeirError::OutputUndeclared {
                model: model.id.clone(),
            })?;
    if declared == 0 {
        return Err(WeirError::InvalidRequest(format!(
            "model `{}`: the output budget must be at least one token",
            model.id
        )));
    }
    Ok(declared.min(model.max_output_tokens))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn model(output_tokens: Option<u32>) -> ModelSpec {
        ModelSpec {
            id: "m".into(),
            provider: "p".into(),
            wire_id: "m".into(),
            endpoint: None,
            credential: None,
            max_output_tokens: 1_000,
            context_window: 10_000,
            rpm: None,
            tpm: None,
            output_tokens,
        }
    }

    #[test]
    fn request_declaration_wins_over_catalog() {
        assert_eq!(output_reserve(Some(300), &model(Some(500))).unwrap(), 300);
        assert_eq!(output_reserve(None, &model(Some(500))).unwrap(), 500);
    }

    #[test]
    fn clamped_at_the_model_ceiling() {
        assert_eq!(output_reserve(Some(50_000), &model(None)).unwrap(), 1_000);
    }

    #[test]
    fn nothing_declared_is_an_error_that_says_where_to_declare() {
        let message = output_reserve(None, &model(None)).unwrap_err().to_string();
        assert!(
            message.contains("max_tokens") && message.contains("output_tokens"),
            "{message}"
        );
        assert!(output_reserve(Some(0), &model(None)).is_err());
    }
}
