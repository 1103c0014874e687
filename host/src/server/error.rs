//! Errors as the gateway answers them: a stable category, the status it maps to
//! (one mapping, [`Category::http_status`], for every dialect) and a safe message.
//! The OpenAI shape is the default rendering: the category in `type` and `code`;
//! other dialects render the same [`ApiError`] in their own envelope. The full
//! error goes to the log.

use axum::http::header::RETRY_AFTER;
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::chat::Stamp;
use crate::error::CallError;
use crate::error::WeirError;
use crate::failure::Category;
use crate::types::Refusal;

/// `retry-after` on a `gateway_busy` answer, in seconds.
const GATEWAY_BUSY_RETRY_AFTER_SECS: &str = "1";

/// An error ready to be answered.
#[derive(Debug)]
pub struct ApiError {
    pub(super) category: Category,
    pub(super) message: String,
    /// The refusal's category and explanation, so a client can resubmit elsewhere.
    pub(super) refusal: Option<Box<Refusal>>,
    stamp: Option<Box<Stamp>>,
    /// When to come back, for failures that know (a full admission queue):
    /// answered as `retry-after` in whole seconds.
    retry_after: Option<std::time::Duration>,
    /// The record of a request refused before it became a call.
    call_id: Option<String>,
}

impl ApiError {
    /// The caller's own request is wrong; the message may quote it.
    pub fn invalid_request(message: impl Into<String>) -> Self {
        Self::new(Category::InvalidRequest, message.into())
    }

    /// A failure the gateway's edge answers itself, before any call exists.
    pub(super) fn new(category: Category, message: String) -> Self {
        Self { category, message, refusal: None, stamp: None, retry_after: None, call_id: None }
    }

    /// Names the ledger record of this refusal (`x-weir-call-id`).
    pub(super) fn recorded_as(mut self, call_id: Option<String>) -> Self {
        self.call_id = call_id;
        self
    }

    /// The refusal as a JSON object, when the call was refused.
    pub(super) fn refusal_json(&self) -> Option<Value> {
        self.refusal.as_ref().map(|r| json!({"category": r.category, "explanation": r.explanation}))
    }

    /// The response with `body` in this error's status and the stamp headers: how
    /// every dialect answers an error.
    pub(super) fn respond(&self, body: Value) -> Response {
        let status = StatusCode::from_u16(self.category.http_status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let mut response = (status, axum::Json(body)).into_response();
        if let Some(stamp) = &self.stamp {
            super::stamp_headers(response.headers_mut(), stamp);
        }
        if let Some(value) = self.call_id.as_deref().and_then(|id| HeaderValue::from_str(id).ok()) {
            response.headers_mut().insert(super::CALL_ID_HEADER, value);
        }
        // The upstream's own wait (a full admission queue), else, for the
        // gateway's own capacity, a moment: a call ends, an instance returns.
        if let Some(retry_after) = self.retry_after {
            response.headers_mut().insert(RETRY_AFTER, retry_after.as_secs().into());
        } else if self.category == Category::GatewayBusy {
            response.headers_mut().insert(RETRY_AFTER, HeaderValue::from_static(GATEWAY_BUSY_RETRY_AFTER_SECS));
        }
        response
    }
}

/// The envelope an error is written in: the route's own (Anthropic's on
/// `/v1/messages`, OpenAI's elsewhere), also for the edge's refusals, which
/// come before any route runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Dialect {
    OpenAi,
    Anthropic,
}

impl Dialect {
    pub(super) fn of(path: &str) -> Self {
        if path == "/v1/messages" || path == "/v1/messages/count_tokens" { Self::Anthropic } else { Self::OpenAi }
    }

    pub(super) fn answer(self, error: ApiError) -> Response {
        match self {
            Self::OpenAi => error.into_response(),
            Self::Anthropic => super::anthropic::AnthropicError::from(error).into_response(),
        }
    }
}

impl From<CallError> for ApiError {
    fn from(failure: CallError) -> Self {
        let CallError { error, stamp } = failure;
        tracing::info!(error = %error, category = error.category().as_str(), attempts = stamp.attempts, "call failed");
        let mut api = Self::new(error.category(), error.safe_message());
        api.retry_after = error.retry_after();
        if let WeirError::Refused { category, explanation, .. } = error {
            api.refusal = Some(Box::new(Refusal { category, explanation }));
        }
        api.stamp = Some(Box::new(stamp));
        api
    }
}

/// A failure outside any call (a `count_tokens` resolution): the same
/// category and safe message a call's failure answers, without a stamp.
impl From<WeirError> for ApiError {
    fn from(error: WeirError) -> Self {
        tracing::info!(error = %error, category = error.category().as_str(), "request failed");
        Self::new(error.category(), error.safe_message())
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let category = self.category.as_str();
        let mut body = json!({
            "error": {
                "message": self.message,
                "type": category,
                "param": null,
                "code": category,
            }
        });
        if let Some(refusal) = self.refusal_json() {
            body["error"]["refusal"] = refusal;
        }
        self.respond(body)
    }
}
