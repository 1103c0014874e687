//! One upstream attempt: admission, encode, transport, decode or classify, and
//! the upstream's verdict fed to the model's throttle (a success only once the
//! answer decodes). The streamed attempt
//! (`streaming.rs`) shares its first half and its failure handling.
//!
//! The time an attempt spends upstream is bounded twice ([`in_flight`]): by the
//! attempt timeout, a transient signal the retry loop may re-run (an upstream
//! that trickles bytes never trips the read timeout), and by the caller's
//! deadline, which is final. Either drops the request, and dropping it closes
//! the socket: the upstream sees the caller leave.

use std::future::Future;

use crate::admission::{Demand, Feedback, Grant, Lane, ModelGate, estimate_input, input_bound};
use crate::error::WeirError;
use crate::plugin::Session;
use crate::transport::TransportError;
use crate::types::{CallParams, Conversation, DecodedResponse, HttpRequest, HttpResponse};

use super::attempt_log::{Ended, Observed};
use super::classify;
use super::spend::Spend;
use super::target::{Reached, Target};

/// A whole (non-streaming) attempt.
pub(super) async fn run(
    target: &Target<'_>,
    conversation: &Conversation,
    params: &CallParams,
    deadline: Option<tokio::time::Instant>,
    observed: &mut Observed,
) -> Result<DecodedResponse, WeirError> {
    let mut session = target.provider.session();
    let (grant, http_request) =
        admit_and_encode(target, &mut session, conversation, params, deadline, observed).await?;
    let response = session.while_waiting(send(target, grant, http_request, deadline, observed)).await?;
    if !(200..300).contains(&response.status) {
        return Err(upstream_failure(target, &mut session, &response).await);
    }
    let answer = match target.native_answer {
        true => {
            let native = session.decode_native(&response).await;
            let native = native.map_err(|source| classify::plugin_failure(target, source))?;
            observed.native = Some(own_blocks(target, &native));
            native.response
        }
        false => session.decode(&response).await.map_err(|source| classify::plugin_failure(target, source))?,
    };
    // Only an answer that decodes is a success: a 200 the component cannot read
    // (`malformed`) says nothing about the rate the upstream is willing to serve.
    feed_back(target.gate, Feedback::Success).await;
    Ok(answer)
}

/// What the route of the answer's dialect writes beside the neutral answer.
fn own_blocks(target: &Target<'_>, answer: &crate::types::NativeAnswer) -> crate::chat::NativeBlocks {
    let dialect = target.native.as_ref().map(|native| native.dialect.clone()).unwrap_or_default();
    // A usage object that is not JSON is the component's slip; the tokens
    // are still in the neutral usage, so only the extra is lost.
    let usage = answer.usage_json.as_deref().and_then(|usage| serde_json::from_str(usage).ok());
    let content = answer.response.content.clone();
    crate::chat::NativeBlocks { dialect, blocks: answer.blocks.clone(), content, usage }
}

/// Sends an admitted, encoded request and reads its whole response, within
/// the attempt timeout and the caller's deadline. The grant is spent as the
/// request leaves. A component's attempt runs it inside
/// [`Session::while_waiting`].
pub(super) async fn send(
    target: &Reached<'_>,
    mut grant: Grant,
    http_request: HttpRequest,
    deadline: Option<tokio::time::Instant>,
    observed: &mut Observed,
) -> Result<HttpResponse, WeirError> {
    grant.mark_sent();
    let transport = target.weir.transport();
    let sent = transport.send(&target.endpoint, http_request, &target.credential);
    let response =
        in_flight(target, deadline, async { sent.await.map_err(|source| transport_failure(target, source)) }).await?;
    observed.response(&response);
    Ok(response)
}

/// A whole attempt, logged in the call's spend with what it saw. The call's
/// budget hold covers it first ([`Spend::cover`]): an attempt it cannot cover
/// is logged with that category, nothing sent.
pub(super) async fn logged(
    target: &Target<'_>,
    conversation: &Conversation,
    params: &CallParams,
    deadline: Option<tokio::time::Instant>,
    spend: &mut Spend<'_>,
) -> Result<DecodedResponse, WeirError> {
    let began = std::time::Instant::now();
    let mut observed = Observed::default();
    let result = match spend.cover(target, conversation, params.max_tokens).await {
        Ok(()) => run(target, conversation, params, deadline, &mut observed).await,
        Err(error) => Err(error),
    };
    let ended = match &result {
        Ok(answer) => Ended::Answered(answer),
        Err(error) => Ended::Failed(error),
    };
    spend.log.push(began, observed, ended);
    result
}

/// The first half of every chat attempt, whole or streamed: the demand (one
/// request; the input's tokens plus the output reserve) within the context
/// window, then [`admit_and_finalize`], encoding in `session`.
pub(super) async fn admit_and_encode(
    target: &Target<'_>,
    session: &mut Session<'_>,
    conversation: &Conversation,
    params: &CallParams,
    deadline: Option<tokio::time::Instant>,
    observed: &mut Observed,
) -> Result<(Grant, HttpRequest), WeirError> {
    let input = input_demand(target, conversation, params.max_tokens)?;
    let demand = Demand { requests: 1, tokens: input + u64::from(params.max_tokens) };
    let encode = async {
        match &target.native {
            Some(native) => session.encode_native(conversation, params, native, deadline).await,
            None => session.encode(conversation, params, deadline).await,
        }
    };
    admit_and_finalize(target, demand, deadline, Lane::Interactive, observed, encode).await
}

/// Every operation's first half: `demand` admitted in `lane`, the request
/// `encode` gives finalized (retention bound, envelope re-checked), then the
/// call's opening settled in the record, the last step before it leaves. A
/// failure here gives the grant back: nothing was sent.
pub(super) async fn admit_and_finalize(
    target: &Reached<'_>,
    demand: Demand,
    deadline: Option<tokio::time::Instant>,
    lane: Lane,
    observed: &mut Observed,
    encode: impl Future<Output = Result<HttpRequest, crate::plugin::PluginError>>,
) -> Result<(Grant, HttpRequest), WeirError> {
    let waiting = std::time::Instant::now();
    let grant = admit(target, demand, deadline, lane).await?;
    observed.admission_wait = waiting.elapsed();
    let encoded = encode
        .await
        .map_err(|source| WeirError::Plugin { model: model_id(target), source })
        .and_then(|mut http_request| target.finalize(&mut http_request).map(|()| http_request));
    // The call's opening must be in the record before anything leaves.
    let encoded = match encoded {
        Ok(http_request) => target.opening.settled().await.map(|()| http_request),
        Err(error) => Err(error),
    };
    match encoded {
        Ok(http_request) => Ok((grant, http_request)),
        Err(error) => {
            grant.rollback().await;
            Err(error)
        }
    }
}

/// The demand admitted in `lane`: the caller key's buckets first (a call
/// parked on the model then holds only its own key's budget, never the
/// model's), then the model's; the grants are tied. A deployment's call is
/// admitted by its entry's gate (the sum of the deployments: a call that fits
/// none waits there), then by the deployment's own.
pub(super) async fn admit(
    target: &Reached<'_>,
    demand: Demand,
    deadline: Option<tokio::time::Instant>,
    lane: Lane,
) -> Result<Grant, WeirError> {
    let mut key_grant = match &target.key_gate {
        Some(gate) => Some(gate.admit_in(demand, deadline, lane).await?),
        None => None,
    };
    if let Some(deployed) = &target.deployment {
        match deployed.entry_gate.admit_in(demand, deadline, lane).await {
            Ok(grant) => key_grant = Some(grant.with_companion(key_grant)),
            Err(error) => {
                if let Some(key_grant) = key_grant {
                    key_grant.rollback().await;
                }
                return Err(error.into());
            }
        }
    }
    match target.gate.admit_in(demand, deadline, lane).await {
        Ok(grant) => Ok(grant.with_companion(key_grant)),
        Err(error) => {
            if let Some(key_grant) = key_grant {
                key_grant.rollback().await;
            }
            Err(error.into())
        }
    }
}

/// The input side of a chat demand, within the context window. Tokenized only
/// where the count matters: a token bucket debits it, or the byte bound
/// ([`input_bound`]) does not prove the window fits. Otherwise the bound
/// stands in, which only a token bucket would read.
fn input_demand(target: &Target<'_>, conversation: &Conversation, output: u32) -> Result<u64, WeirError> {
    if !target.counts_tokens {
        let bound = input_bound(conversation);
        if fits_window(target, bound, output).is_ok() {
            return Ok(bound);
        }
    }
    let input = estimate_input(target.model.tokenizer, conversation);
    fits_window(target, input, output)?;
    Ok(input)
}

/// The input estimate, the output reserve and the safety margin fit the model's
/// context window, or the call fails before admission with the numbers: a
/// request the model cannot hold would only come back as the provider's 400.
pub(super) fn fits_window(target: &Reached<'_>, input: u64, output: u32) -> Result<(), WeirError> {
    let model = target.model;
    let margin = target.weir.config().safety_margin();
    let needed = input + u64::from(output) + u64::from(margin);
    if needed <= u64::from(model.context_window) {
        return Ok(());
    }
    Err(WeirError::ContextOverflow { model: model.id.clone(), input, output, margin, window: model.context_window })
}

/// Runs the part of an attempt that waits on the upstream, until the attempt
/// timeout or the caller's deadline, whichever comes first.
pub(super) async fn in_flight<T>(
    target: &Reached<'_>,
    deadline: Option<tokio::time::Instant>,
    work: impl Future<Output = Result<T, WeirError>>,
) -> Result<T, WeirError> {
    let limit = target.weir.transport().attempt_timeout();
    let timed_out = tokio::time::Instant::now() + limit;
    let (until, is_deadline) = match deadline {
        Some(deadline) if deadline <= timed_out => (deadline, true),
        Some(_) | None => (timed_out, false),
    };
    match tokio::time::timeout_at(until, work).await {
        Ok(result) => result,
        Err(_) if is_deadline => {
            tracing::info!(model = %target.model.id, "the caller's deadline passed in flight; request cancelled");
            Err(WeirError::DeadlineExceeded { model: model_id(target) })
        }
        Err(_) => {
            tracing::warn!(model = %target.model.id, ?limit, "the upstream attempt timed out; request cancelled");
            Err(WeirError::AttemptTimedOut { model: model_id(target), limit })
        }
    }
}

pub(super) fn transport_failure(target: &Reached<'_>, source: TransportError) -> WeirError {
    let provider = &*target.provider_key;
    tracing::warn!(model = %target.model.id, provider, error = %source, "upstream transport failed");
    WeirError::Transport { model: model_id(target), provider: provider.to_owned(), source }
}

/// A non-2xx response, classified by the component (in the attempt's
/// session) and fed to the throttle.
pub(super) async fn upstream_failure(
    target: &Target<'_>,
    session: &mut Session<'_>,
    response: &HttpResponse,
) -> WeirError {
    let class = session.classify(response).await;
    classified_failure(target, response, class).await
}

/// A non-2xx response the component has classified (chat's `classify`, or
/// another operation's), fed to the throttle.
pub(super) async fn classified_failure(
    target: &Reached<'_>,
    response: &HttpResponse,
    class: Result<crate::types::ErrorClass, crate::plugin::PluginError>,
) -> WeirError {
    let error = classify::failure(target, response, class);
    feed_back(target.gate, Feedback::Backpressure(error.backpressure_weight())).await;
    error
}

fn model_id(target: &Reached<'_>) -> String {
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
