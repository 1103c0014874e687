//! The call template: the one path every chat call takes, in a fixed order.
//!
//! ```text
//! resolve model ─► output reserve ─► component.encode ─► credential ─► transport
//!   ─► 2xx: component.decode ─► stamp          else: component.classify ─► typed error
//! ```
//!
//! The order is the point: the output reserve is computed once, before anything
//! is encoded, so the wire `max_tokens` is the reserved number; the credential is
//! attached after the component has finished, so it never sees it; stamping
//! happens here, once, so no provider can forget it. Retries, gates and
//! admission wrap this path as later stages.

mod classify;

use std::time::{Instant, SystemTime};

use crate::Weir;
use crate::admission::output_reserve;
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
    let provider =
        weir.registry()
            .get(&model.provider)
            .ok_or_else(|| WeirError::ProviderUnavailable {
                model: model.id.clone(),
                provider: model.provider.clone(),
            })?;
    let max_tokens = output_reserve(request.max_output_tokens, model)?;
    let params = call_params(&request, model, max_tokens);
    let http_request = provider
        .encode(&request.conversation, &params)
        .map_err(|source| WeirError::Plugin {
            model: model.id.clone(),
            source,
        })?;
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
    let endpoint = endpoint(model, provider)?;
    let response = weir
        .transport()
        .send(endpoint, http_request, &credential)
        .await
        .map_err(|source| {
            tracing::warn!(model = %model.id, provider = provider.key(), error = %source, "upstream transport failed");
            WeirError::Transport { model: model.id.clone(), provider: provider.key().to_owned(), source }
        })?;
    if !(200..300).contains(&response.status) {
        return Err(classify::failure(model, provider, &response));
    }
    let decoded = provider
        .decode(&response)
        .map_err(|source| WeirError::Plugin {
            model: model.id.clone(),
            source,
        })?;
    Ok(stamp(decoded, model, provider, max_tokens, started))
}

fn call_params(request: &ChatRequest, model: &ModelSpec, max_tokens: u32) -> CallParams {
    CallParams {
        wire_model_id: model.wire_id.clone(),
        max_tokens,
        thinking_budget: None,
        reasoning_effort: request.reasoning_effort,
        temperature: request.temperature,
        stop: request.stop.clone(),
        response_schema: request.response_schema.clone(),
        stream: false,
    }
}

fn endpoint<'a>(model: &'a ModelSpec, provider: &Provider) -> Result<&'a str, WeirError> {
    model
        .endpoint
        .as_deref()
        .ok_or_else(|| WeirError::ProviderUnavailable {
            model: model.id.clone(),
            provider: provider.key().to_owned(),
        })
}

/// The facts every response carries, set here and nowhere else.
fn stamp(
    decoded: DecodedResponse,
    model: &ModelSpec,
    provider: &Provider,
    max_tokens: u32,
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
        requested_max_tokens: max_tokens,
        attempts: 1,
        latency: started.elapsed(),
        ended_at: SystemTime::now(),
    }
}
