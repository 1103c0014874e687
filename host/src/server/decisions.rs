//! `POST /v1/decisions`: the decision wire's request in (`docs/src/providers/decision-wire.md`,
//! its `model` a decision role or entry), [`Weir::decide`], the wire's answer
//! out. Errors answer in OpenAI's envelope, as the other non-Anthropic routes
//! do; knobs ride in the same headers (`x-weir-deadline-ms`,
//! `x-weir-max-retries`).

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Extension, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use serde::Serialize;

use super::{ApiError, Authenticated, deadline, number_header, stamp_headers, traceparent};
use crate::Weir;
use crate::decision::{AnsweredQuestion, DecideRequest, DecideResponse, DecisionRequest};
use crate::record::Route;

pub(super) async fn decisions(
    State(weir): State<Weir>,
    Extension(caller): Extension<Authenticated>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    let caller = caller.caller()?;
    let question: DecisionRequest = serde_json::from_slice(&body)
        .map_err(|error| ApiError::invalid_request(format!("the request body is not valid: {error}")))?;
    let mut request = DecideRequest::new(question);
    request.deadline = deadline(&headers)?;
    request.max_retries = number_header(&headers, "x-weir-max-retries")?;
    request.caller = caller;
    request.route = Route::Decisions;
    request.traceparent = traceparent(&headers);
    let answer = weir.decide(request).await?;
    let mut response = Json(answer_body(&answer)).into_response();
    stamp_headers(response.headers_mut(), &answer.stamp);
    Ok(response)
}

/// The wire's answer: each question's distribution in its outcomes' declared
/// order, the billed input, the served model (the endpoint's word for it, else
/// the catalog id) and the call id as the request id. Serialized as written
/// here, not through a `serde_json::Value`, whose objects sort their keys: a
/// `noul` would come back `false, null, true`.
fn answer_body(answer: &DecideResponse) -> AnswerBody<'_> {
    AnswerBody {
        answers: answer.decision.answered(),
        usage: Usage { input_tokens: answer.input_tokens },
        model: answer.decision.served_model.as_deref().unwrap_or(&answer.stamp.model),
        request_id: &answer.stamp.call_id,
    }
}

/// The decision wire's answer, in its field order.
#[derive(Serialize)]
struct AnswerBody<'a> {
    answers: Vec<AnsweredQuestion>,
    usage: Usage,
    model: &'a str,
    request_id: &'a str,
}

#[derive(Serialize)]
struct Usage {
    input_tokens: u64,
}
