//! Errors as the gateway answers them: OpenAI's error shape, a stable category
//! in `type` and `code`, a safe message. The full error goes to the log.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::error::{Category, WeirError};

/// An error ready to be answered.
#[derive(Debug)]
pub struct ApiError {
    status: StatusCode,
    category: &'static str,
    message: String,
}

impl ApiError {
    /// The caller's own request is wrong; the message may quote it.
    pub fn invalid_request(message: impl Into<String>) -> Self {
        Self::new(Category::InvalidRequest, message.into())
    }

    fn new(category: Category, message: String) -> Self {
        Self {
            status: StatusCode::from_u16(category.http_status())
                .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
            category: category.as_str(),
            message,
        }
    }
}

impl From<WeirError> for ApiError {
    fn from(error: WeirError) -> Self {
        tracing::info!(error = %error, category = error.category().as_str(), "call failed");
        Self::new(error.category(), error.safe_message())
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = json!({
            "error": {
                "message": self.message,
                "type": self.category,
                "param": null,
                "code": self.category,
            }
        });
        (self.status, axum::Json(body)).into_response()
    }
}
