//! The call template: the one path every chat call takes, in a fixed order.
//!
//! ```text
//! resolve model ─► output reserve ─► credential ─► admission (park until it fits)
//!   ─► component.encode ─► transport ─► 2xx: component.decode ─► throttle ◄ success ─► stamp
//!                                       else: component.classify ─► throttle ◄ weight ─► typed error
//! ```
//!
//! The order is the point. The output reserve is computed once, before
//! anything else, and both the admission demand and the wire `max_tokens` are
//! that number. The credential is resolved before admission (a missing secret
//! must not wait for capacity) but attached only after the component finished,
//! so the component never sees it. The grant is marked sent just before the
//! request leaves: anything failing earlier rolls it back in full. Stamping
//! happens here, once, so no provider can forget it.

mod classify;

use std::time::{Instant, SystemTime};

use crate::Weir;
use crate::admission::{
    Demand, Feedback, ModelGate, OutputReserve, estimate_input, output_reserve,
};
use crate::catalog::ModelSpec;
use crate::chat::{ChatRequest, ChatResponse};
use crate::error::WeirError;
use crate::plugin::Provider;
use crate::transport::Credential;
use crate::types::{CallParams, DecodedResponse};

/// Runs one chat call end to end.
pub(crate) async fn chat(weir: &Weir, request: ChatRequest) -> Result<ChatResponse, WeirError> {
    let started = Instant::now();
    let model = weir
        .catalog()
        .get(&request.model)
        .ok_or_else(|| WeirError::UnknownModel(request.model.clone()))?;
    let unavailable = || WeirError::ProviderUnavailable {
        model: model.id.clone(),
        provider: model.provider.clone(),
    };
    let provider = weir
        .registry()
        .get(&model.provider)
        .ok_or_else(unavailable)?;
    let gate = weir.admission().gate(&model.id).ok_or_else(unavailable)?;
    let reserve = output_reserve(request.max_output_tokens, request.reasoning_effort, model)?;
    let credential = Credential::resolve(
        provider.key(),
        &provider.info().credential,
        model.credential.as_deref(),
        weir.secrets(),
    )
    .map_err(|source| WeirError::Credential {
        model: model.id.clone(),
        source,
    })?;
    let endpoint = model.endpoint.as_deref().ok_or_else(unavailable)?;

    let input = estimate_input(model.tokenizer, &request.conversation);
    let demand = Demand {
        requests: 1,
        tokens: input + u64::from(reserve.max_tokens),
    };
    let mut grant = gate.admit(demand, request.deadline).await?;

    let params = call_params(&request, model, reserve);
    let http_request = match provider.encode(&request.conversation, &params) {
        Ok(http_request) => http_request,
        Err(source) => {
            grant.rollback().await;
            return Err(WeirError::Plugin {
                model: model.id.clone(),
                source,
            });
        }
    };
    grant.mark_sent();
    let response = weir.transport().send(endpoint, http_request, &credential).await.map_err(|source| {
        tracing::warn!(model = %model.id, provider = provider.key(), error = %source, "upstream transport failed");
        WeirError::Transport { model: model.id.clone(), provider: provider.key().to_owned(), source }
    })?;
    if !(200..300).contains(&response.status) {
        let error = classify::failure(model, provider, &response);
        if let WeirError::Upstream { class, .. } = &error {
            feed_back(gate, Feedback::Backpressure(class.backpressure_weight())).await;
        }
        return Err(error);
    }
    feed_back(gate, Feedback::Success).await;
    let decoded = provider
        .decode(&response)
        .map_err(|source| WeirError::Plugin {
            model: model.id.clone(),
            source,
        })?;
    drop(grant);
    Ok(stamp(decoded, model, provider, reserve, started))
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

fn call_params(request: &ChatRequest, model: &ModelSpec, reserve: OutputReserve) -> CallParams {
    CallParams {
        wire_model_id: model.wire_id.clone(),
        max_tokens: reserve.max_tokens,
        thinking_budget: reserve.thinking_budget,
        reasoning_effort: request.reasoning_effort,
        temperature: request.temperature,
        stop: request.stop.clone(),
        response_schema: request.response_schema.clone(),
        stream: false,
    }
}

/// The facts every response carries, set here and nowhere else.
fn stamp(
    decoded: DecodedResponse,
    model: &ModelSpec,
    provider: &Provider,
    reserve: OutputReserve,
    started: Instant,
) -> ChatResponse {
    ChatResponse {
        model: model.id.clone(),
        provider: provider.key().to_owned(),
        content: decoded.content,
        stop_reason: decoded.stop_reason,
        raw_stop_reason: decoded.raw_stop_reason,
        usage: decoded.usage,
        refusal: decoded.refusal,
        served_model: decoded.served_model,
        request_id: decoded.request_id,
        requested_max_tokens: reserve.max_tokens,
        attempts: 1,
        latency: started.elapsed(),
        ended_at: SystemTime::now(),
    }
}
