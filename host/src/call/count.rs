//! A request's input tokens for `POST /v1/messages/count_tokens`: the
//! provider's own count where its component offers one (`native.support`'s
//! `count-tokens`: Anthropic's direct API), else Weir's estimate — the one
//! its budget hold and admission use. Either way on the entry a call would
//! resolve to now, with nothing recorded and nothing spent: a count is not
//! a model call, so it takes no admission and no budget hold. A count the
//! provider fails to give (an error status, an answer the component cannot
//! read, a transport failure) falls back to the estimate, said in the
//! server log.

use crate::Weir;
use crate::error::WeirError;
use crate::types::{CallParams, NativeRequest};

use super::native;
use super::opening::Opening;
use super::target::{self, Naming, Target};
use crate::chat::{ChatRequest, NativeDropped};

/// Who counted a request's input tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CountedBy {
    /// The provider's own count endpoint.
    Provider,
    /// Weir's estimate (the entry's tokenizer, else the character estimate).
    Estimate,
}

/// A request's input tokens, on the entry a call of it would resolve to now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InputCount {
    /// The entry's catalog id.
    pub model: String,
    pub tokens: u64,
    pub counted_by: CountedBy,
    /// The caller's native fields and betas the count did not take into
    /// account: all of them for an estimate.
    pub native_dropped: NativeDropped,
}

/// Counts `request`'s input (see the module's documentation).
pub(crate) async fn count_input(weir: &Weir, request: &ChatRequest) -> Result<InputCount, WeirError> {
    let opening = Opening::none();
    let target = target::resolve(weir, &Naming::chat(request), &opening).await?;
    let model = target.model.id.clone();
    let Some((native, native_dropped)) = counting_request(&target, request)? else {
        return Ok(estimate(&target, request));
    };
    match provider_count(&target, request, &native).await {
        Ok(tokens) => Ok(InputCount { model, tokens, counted_by: CountedBy::Provider, native_dropped }),
        Err(error) => {
            tracing::warn!(%model, %error, "the provider's token count failed; answering Weir's estimate");
            Ok(estimate(&target, request))
        }
    }
}

/// Weir's estimate, which reads none of the caller's native fields and betas.
fn estimate(target: &Target<'_>, request: &ChatRequest) -> InputCount {
    InputCount {
        model: target.model.id.clone(),
        tokens: crate::admission::estimate_input(target.model.tokenizer, &request.conversation),
        counted_by: CountedBy::Estimate,
        native_dropped: request.native.as_deref().map(|ask| native::split(ask, None).dropped).unwrap_or_default(),
    }
}

/// The native request a count carries (the caller's fields and betas the
/// provider takes) and what it leaves out, when the provider counts in the
/// request's dialect.
fn counting_request(
    target: &Target<'_>,
    request: &ChatRequest,
) -> Result<Option<(NativeRequest, NativeDropped)>, WeirError> {
    let Some(ask) = request.native.as_deref() else { return Ok(None) };
    let Some(support) =
        native::support(target)?.filter(|support| support.count_tokens && support.dialect == ask.dialect)
    else {
        return Ok(None);
    };
    Ok(Some(native::split_request(ask, &support)))
}

/// Why the provider's count was not had; logged, never a caller's error (the
/// estimate answers instead).
#[derive(Debug, thiserror::Error)]
enum CountFailed {
    #[error(transparent)]
    Plugin(#[from] crate::plugin::PluginError),
    #[error(transparent)]
    Refused(#[from] WeirError),
    #[error(transparent)]
    Transport(#[from] crate::transport::TransportError),
    /// The count endpoint's answer was not a success. Not fed to the model's
    /// throttle: the count endpoint's limits are not the model's.
    #[error("the count endpoint answered HTTP {0}")]
    Status(u16),
}

/// The provider's count: encoded by the component, finalized like a call's
/// request (the retention binding, the compliance envelope), sent, decoded.
async fn provider_count(
    target: &Target<'_>,
    request: &ChatRequest,
    native: &NativeRequest,
) -> Result<u64, CountFailed> {
    // `max_tokens` is not sent: a count has no output.
    let params = CallParams::new(target.model.wire_id.clone(), 1);
    let mut session = target.provider.session();
    let mut http_request =
        session.count_tokens_encode(&request.conversation, &params, native, request.deadline).await?;
    target.finalize(&mut http_request)?;
    let response = target.weir.transport().send(&target.endpoint, http_request, &target.credential).await?;
    if !(200..300).contains(&response.status) {
        return Err(CountFailed::Status(response.status));
    }
    Ok(session.count_tokens_decode(&response).await?)
}
