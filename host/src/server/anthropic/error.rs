//! Errors in the Messages API's envelope:
//! `{"type":"error","error":{"type":"<error type>","message":"..."}}`. The status
//! is the one every dialect answers with ([`Category::http_status`]); the error
//! type is the Anthropic word for the category, and Weir's own category rides
//! beside it as `weir_category` (the error types are coarser: a context overflow
//! and a malformed request are both `invalid_request_error`).

use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::error::CallError;
use crate::failure::Category;
use crate::server::error::ApiError;

/// An [`ApiError`] answered in the Anthropic envelope.
#[derive(Debug)]
pub struct AnthropicError(ApiError);

impl From<ApiError> for AnthropicError {
    fn from(error: ApiError) -> Self {
        Self(error)
    }
}

impl From<CallError> for AnthropicError {
    fn from(failure: CallError) -> Self {
        Self(ApiError::from(failure))
    }
}

impl IntoResponse for AnthropicError {
    fn into_response(self) -> Response {
        let body = envelope(self.0.category, &self.0.message, self.0.refusal_json());
        self.0.respond(body)
    }
}

/// The envelope for a failure of `category`, with a refusal's details when the
/// call was refused.
pub(super) fn envelope(category: Category, message: &str, refusal: Option<Value>) -> Value {
    let mut body = json!({"type": "error", "error": {
        "type": error_type(category), "message": message, "weir_category": category.as_str(),
    }});
    if let Some(refusal) = refusal {
        body["error"]["refusal"] = refusal;
    }
    body
}

/// The Messages API's error type for a category. 4xx categories without an
/// Anthropic word are `invalid_request_error`, as the API does for "other 4xx";
/// gateway-side failures are `api_error`. The gateway's own credential for the
/// provider missing or rejected is an `authentication_error`, answered with 424
/// (not 401) so a client does not take its own key for the culprit.
pub(super) fn error_type(category: Category) -> &'static str {
    match category {
        Category::InvalidRequest
        | Category::ContextOverflow
        | Category::CapacityExceeded
        | Category::Refused
        | Category::OutputTruncated
        | Category::InvalidResponse
        | Category::UnsupportedMediaType
        | Category::RequestTimeout
        | Category::CapabilityMismatch
        | Category::CallBudgetExceeded
        | Category::MisdirectedRequest => "invalid_request_error",
        Category::PayloadTooLarge | Category::HeadTooLarge => "request_too_large",
        Category::ModelNotFound | Category::NotFound => "not_found_error",
        Category::ComplianceRefused | Category::PermissionDenied | Category::ForbiddenOrigin => "permission_error",
        Category::InvalidApiKey => "authentication_error",
        Category::ProviderCreditExhausted => "billing_error",
        Category::RateLimited | Category::BudgetExhausted => "rate_limit_error",
        Category::AuthenticationFailed | Category::CredentialMissing => "authentication_error",
        Category::Overloaded | Category::GatewayBusy => "overloaded_error",
        Category::Timeout => "timeout_error",
        Category::UpstreamUnavailable
        | Category::UpstreamError
        | Category::ProviderUnavailable
        | Category::ProviderFault
        | Category::ProviderEmptyResponseExhausted
        | Category::LedgerUnavailable
        | Category::RoleUnavailable
        | Category::SharedStateUnavailable => "api_error",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_envelope_carries_the_anthropic_type_the_weir_category_and_the_shared_status() {
        let response = AnthropicError::from(ApiError::invalid_request("`max_tokens` is required")).into_response();
        assert_eq!(response.status(), 400);
        let body = envelope(Category::ModelNotFound, "unknown model `x`", None);
        assert_eq!(
            body,
            json!({"type": "error", "error": {"type": "not_found_error", "message": "unknown model `x`",
                                              "weir_category": "model_not_found"}})
        );
        let refused = envelope(Category::Refused, "refused", Some(json!({"category": "cyber", "explanation": null})));
        assert_eq!(refused["error"]["refusal"]["category"], "cyber");
    }

    #[test]
    fn categories_map_to_anthropic_error_types() {
        let pairs = [
            (Category::InvalidRequest, "invalid_request_error"),
            (Category::ContextOverflow, "invalid_request_error"),
            (Category::ModelNotFound, "not_found_error"),
            (Category::AuthenticationFailed, "authentication_error"),
            (Category::RateLimited, "rate_limit_error"),
            (Category::BudgetExhausted, "rate_limit_error"),
            (Category::CallBudgetExceeded, "invalid_request_error"),
            (Category::Overloaded, "overloaded_error"),
            (Category::ProviderCreditExhausted, "billing_error"),
            (Category::Timeout, "timeout_error"),
            (Category::UpstreamError, "api_error"),
            (Category::ProviderFault, "api_error"),
            (Category::PayloadTooLarge, "request_too_large"),
            (Category::UnsupportedMediaType, "invalid_request_error"),
            (Category::RequestTimeout, "invalid_request_error"),
            (Category::CapabilityMismatch, "invalid_request_error"),
            (Category::ForbiddenOrigin, "permission_error"),
            (Category::GatewayBusy, "overloaded_error"),
        ];
        for (category, word) in pairs {
            assert_eq!(error_type(category), word, "{category:?}");
        }
    }
}
