//! One upstream attempt: admission, encode, transport, decode or classify, and
//! the upstream's verdict fed to the model's throttle. The streamed attempt
//! (`streaming.rs`) shares its first half and its failure handling.

use crate::admission::{Demand, Feedback, Grant, ModelGate, estimate_input};
use crate::error::WeirError;
use crate::transport::TransportError;
use crate::types::{CallParams, Conversation, DecodedResponse, HttpRequest, HttpResponse};

use super::classify;
use super::target::Target;

/// A whole (non-streaming) attempt.
pub(super) async fn run(
    target: &Target<'_>,
    conversation: &Conversation,
    params: &CallParams,
    deadline: Option<tokio::time::Instant>,
) -> Result<DecodedResponse, WeirError> {
    let (mut grant, http_request) = admit_and_encode(target, conversation, params, deadline).await?;
    grant.mark_sent();
    let response = target
        .weir
        .transport()
        .send(&target.endpoint, http_request, &target.credential)
        .await
        .map_err(|source| transport_failure(target, source))?;
    if !(200..300).contains(&response.status) {
        return Err(upstream_failure(target, &response).await);
    }
    feed_back(target.gate, Feedback::Success).await;
    target.provider.decode(&response).await.map_err(|source| WeirError::Plugin { model: model_id(target), source })
}

/// The first half of every attempt, whole or streamed: the demand admitted (one
/// request; the input's tokens plus the output reserve), then the request encoded
/// and finalized (retention bound, envelope re-checked: the last step before it
/// leaves). A failure here gives the grant back: nothing was sent.
pub(super) async fn admit_and_encode(
    target: &Target<'_>,
    conversation: &Conversation,
    params: &CallParams,
    deadline: Option<tokio::time::Instant>,
) -> Result<(Grant, HttpRequest), WeirError> {
    let input = estimate_input(target.model.tokenizer, conversation);
    let demand = Demand { requests: 1, tokens: input + u64::from(params.max_tokens) };
    let grant = target.gate.admit(demand, deadline).await?;
    let encoded = target
        .provider
        .encode_until(conversation, params, deadline)
        .await
        .map_err(|source| WeirError::Plugin { model: model_id(target), source })
        .and_then(|mut http_request| target.finalize(&mut http_request).map(|()| http_request));
    match encoded {
        Ok(http_request) => Ok((grant, http_request)),
        Err(error) => {
            grant.rollback().await;
            Err(error)
        }
    }
}

pub(super) fn transport_failure(target: &Target<'_>, source: TransportError) -> WeirError {
    tracing::warn!(model = %target.model.id, provider = target.provider.key(), error = %source, "upstream transport failed");
    WeirError::Transport { model: model_id(target), provider: target.provider.key().to_owned(), source }
}

/// A non-2xx response, classified by the component and fed to the throttle.
pub(super) async fn upstream_failure(target: &Target<'_>, response: &HttpResponse) -> WeirError {
    let error = classify::failure(target, response).await;
    feed_back(target.gate, Feedback::Backpressure(error.backpressure_weight())).await;
    error
}

fn model_id(target: &Target<'_>) -> String {
    target.model.id.clone()
}

/// Tells the throttle what the upstream said, and lets the head of the queue
/// recompute its wait under the new coefficient.
pub(crate) async fn feed_back(gate: &ModelGate, signal: Feedback) {
    if signal == Feedback::Backpressure(0) {
        return;
    }
    gate.account().feedback(signal).await;
    gate.wake_head();
}
