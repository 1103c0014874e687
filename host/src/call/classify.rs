//! A failed upstream response becomes a typed error. The component reads the
//! response; the raw detail it returns goes to the server log here and nowhere
//! else — scrubbed first of the credential the request carried, since an
//! upstream may echo the key it rejected — and what the caller sees is derived
//! from the class alone.

use crate::error::{UpstreamClass, WeirError};
use crate::types::{ErrorClass, HttpResponse, InBandError, RetryHint};

use super::streaming::Origin;
use super::target::Reached;

pub(super) fn failure(
    target: &Reached<'_>,
    response: &HttpResponse,
    class: Result<ErrorClass, crate::plugin::PluginError>,
) -> WeirError {
    let model = &target.model.id;
    let class = match class {
        Ok(class) => class,
        Err(source) => return plugin_failure(target, source),
    };
    let (class, retry_hint, detail) = split(class);
    let detail = target.credential.scrub(&detail);
    if class == UpstreamClass::Authentication
        && let Some(credential) = &target.credential_id
    {
        // The kept value may be one rotated away: the next call reads the store.
        target.weir.forget_secret(credential);
    }
    tracing::warn!(
        model = %model,
        provider = &*target.provider_key,
        status = response.status,
        class = ?class,
        detail = %detail,
        "upstream call failed"
    );
    WeirError::Upstream {
        model: model.clone(),
        provider: target.provider_key.to_string(),
        credential: target.credential_id.clone(),
        status: response.status,
        class,
        retry_hint,
    }
}

/// An error frame inside an HTTP-200 stream, classified like an HTTP error from
/// the class the component read. A status the component read from prose is kept
/// out of the error (it may steer a replay, never what the caller sees). Returns
/// the raw detail too, for the replay decision; it is logged here and goes
/// nowhere else.
pub(super) fn in_band(origin: &Origin, in_band: InBandError) -> (WeirError, String) {
    let (class, retry_hint, detail) = split(in_band.class);
    let detail = origin.sent.scrub(&detail).into_owned();
    tracing::warn!(
        model = %origin.model,
        provider = %origin.provider,
        status = ?in_band.status,
        status_from_prose = in_band.status_from_prose,
        class = ?class,
        detail = %detail,
        "in-band error frame in the upstream stream"
    );
    let status = in_band.status.filter(|_| !in_band.status_from_prose).unwrap_or(200);
    let error = WeirError::Upstream {
        model: origin.model.clone(),
        provider: origin.provider.clone(),
        credential: origin.credential.clone(),
        status,
        class,
        retry_hint,
    };
    (error, detail)
}

/// A component's failure on an upstream's answer, its text scrubbed of the
/// credential the request carried.
pub(super) fn plugin_failure(target: &Reached<'_>, source: crate::plugin::PluginError) -> WeirError {
    let source = source.scrubbed(|text| target.credential.scrub(text).into_owned());
    WeirError::Plugin { model: target.model.id.clone(), source }
}

/// Separates what the host acts on from the raw detail it only logs.
fn split(class: ErrorClass) -> (UpstreamClass, Option<RetryHint>, String) {
    match class {
        ErrorClass::RateLimited(retry) => (UpstreamClass::RateLimited, retry.hint, retry.detail),
        ErrorClass::Overloaded(retry) => (UpstreamClass::Overloaded, retry.hint, retry.detail),
        ErrorClass::Transient(retry) => (UpstreamClass::Transient, retry.hint, retry.detail),
        ErrorClass::QuotaExhausted(detail) => (UpstreamClass::QuotaExhausted, None, detail),
        ErrorClass::Refused(refusal) => {
            let detail = refusal.explanation.unwrap_or_default();
            (UpstreamClass::Refused { category: refusal.category }, None, detail)
        }
        ErrorClass::InvalidRequest(detail) => (UpstreamClass::InvalidRequest, None, detail),
        ErrorClass::Authentication(detail) => (UpstreamClass::Authentication, None, detail),
        ErrorClass::NotFound(detail) => (UpstreamClass::NotFound, None, detail),
        ErrorClass::ContextOverflow(detail) => (UpstreamClass::ContextOverflow, None, detail),
        ErrorClass::Uncorrectable(detail) => (UpstreamClass::Uncorrectable, None, detail),
    }
}
