//! Errors as the gateway answers them: OpenAI's error shape, a stable category
//! in `type` and `code`, a safe message. The full error goes to the log.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::chat::{CallError, Stamp};
use crate::error::{Category, WeirError};
use crate::types::Refusal;

/// An error ready to be answered.
#[derive(Debug)]
pub struct ApiError {
    status: StatusCode,
    category: &'static str,
    message: String,
    /// The refusal's category and explanation, so a client can resubmit elsewhere.
    refusal: Option<Box<Refusal>>,
    stamp: Option<Box<Stamp>>,
}

impl ApiError {
    /// The caller's own request is wrong; the message may quote it.
    pub fn invalid_request(message: impl Into<String>) -> Self {
        Self::new(Category::InvalidRequest, message.into())
    }

    fn new(category: Category, message: String) -> Self {
        Self {
            status: StatusCode::from_u16(category.http_status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
            category: category.as_str(),
            message,
            refusal: None,
            stamp: None,
        }
    }
}

impl From<CallError> for ApiError {
    fn from(failure: CallError) -> Self {
        let CallError { error, stamp } = failure;
        tracing::info!(error = %error, category = error.category().as_str(), attempts = stamp.attempts, "call failed");
        let mut api = Self::new(error.category(), error.safe_message());
        if let WeirError::Refused { category, explanation, .. } = error {
            api.refusal = Some(Box::new(Refusal { category, explanation }));
        }
        api.stamp = Some(Box::new(stamp));
        api
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut body = json!({
            "error": {
                "message": self.message,
                "type": self.category,
                "param": null,
                "code": self.category,
            }
        });
        if let Some(refusal) = self.refusal {
            body["error"]["refusal"] = json!({"category": refusal.category, "explanation": refusal.explanation});
        }
        let mut response = (self.status, axum::Json(body)).into_response();
        if let Some(stamp) = &self.stamp {
            super::stamp_headers(response.headers_mut(), stamp);
        }
        response
    }
}
