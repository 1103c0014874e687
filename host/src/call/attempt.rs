//! One upstream attempt: admission, encode, transport, decode or classify, and
//! the upstream's verdict fed to the model's throttle.

use crate::admission::{Demand, Feedback, ModelGate, estimate_input};
use crate::error::WeirError;
use crate::types::{CallParams, Conversation, DecodedResponse};

use super::classify;
use super::target::Target;

pub(super) async fn run(
    target: &Target<'_>,
    conversation: &Conversation,
    params: &CallParams,
    deadline: Option<tokio::time::Instant>,
) -> Result<DecodedResponse, WeirError> {
    let model = target.model;
    let input = estimate_input(model.tokenizer, conversation);
    let demand = Demand { requests: 1, tokens: input + u64::from(params.max_tokens) };
    let mut grant = target.gate.admit(demand, deadline).await?;

    let http_request = match target.provider.encode(conversation, params).await {
        Ok(http_request) => http_request,
        Err(source) => {
            grant.rollback().await;
            return Err(WeirError::Plugin { model: model.id.clone(), source });
        }
    };
    grant.mark_sent();
    let response = target
        .weir
        .transport()
        .send(&target.endpoint, http_request, &target.credential)
        .await
        .map_err(|source| {
            tracing::warn!(model = %model.id, provider = target.provider.key(), error = %source, "upstream transport failed");
            WeirError::Transport { model: model.id.clone(), provider: target.provider.key().to_owned(), source }
        })?;
    if !(200..300).contains(&response.status) {
        let error = classify::failure(target, &response).await;
        if let WeirError::Upstream { class, .. } = &error {
            feed_back(target.gate, Feedback::Backpressure(class.backpressure_weight())).await;
        }
        return Err(error);
    }
    feed_back(target.gate, Feedback::Success).await;
    target.provider.decode(&response).await.map_err(|source| WeirError::Plugin { model: model.id.clone(), source })
}

/// Tells the throttle what the upstream said, and lets the head of the queue
/// recompute its wait under the new coefficient.
async fn feed_back(gate: &ModelGate, signal: Feedback) {
    if signal == Feedback::Backpressure(0) {
        return;
    }
    gate.account().feedback(signal).await;
    gate.wake_head();
}
