//! What a call is addressed to, resolved once before any attempt: the model, its
//! provider component, its admission gate, its credential, endpoint and
//! retention binding.

use std::sync::Arc;

use crate::Weir;
use crate::admission::ModelGate;
use crate::catalog::ModelSpec;
use crate::compliance::Binding;
use crate::error::WeirError;
use crate::identity::{AuthError, Caller};
use crate::plugin::Provider;
pub(crate) use crate::reach::REGION_PLACEHOLDER;
use crate::reach::{self, Destination};
use crate::transport::{Credential, CredentialError, SecretStore};
use crate::types::HttpRequest;

use super::opening::Opening;

pub(super) struct Target<'a> {
    pub weir: &'a Weir,
    pub model: &'a ModelSpec,
    pub provider: Arc<Provider>,
    pub gate: &'a Arc<ModelGate>,
    /// The caller key's own buckets, when its `[[key]]` declares `rpm` / `tpm`.
    pub key_gate: Option<Arc<ModelGate>>,
    pub credential: Credential,
    /// The credential's id, named in quota messages (never its value).
    pub credential_id: Option<String>,
    pub endpoint: String,
    pub binding: Binding<'a>,
    /// The call's opening in the record, settled before the first request leaves.
    pub opening: &'a Opening,
}

impl Target<'_> {
    /// The last step before a request leaves the process: the host's retention
    /// binding is added and the compliance envelope checked once more.
    pub fn finalize(&self, request: &mut HttpRequest) -> Result<(), WeirError> {
        self.binding.apply(request)?;
        self.binding.recheck(request)
    }
}

/// Resolves a catalog id for a caller. The caller's key, the compliance
/// envelope, where the call may go (see [`crate::reach`]: the provider serving
/// *now* decides, since a component can be swapped in at run time), and a
/// missing secret or region fail here, before the call waits for capacity it
/// could never use and before anything is sent.
pub(super) async fn resolve<'a>(
    weir: &'a Weir,
    model_id: &str,
    caller: Option<&Caller>,
    opening: &'a Opening,
) -> Result<Target<'a>, WeirError> {
    let model = weir.catalog().get(model_id).ok_or_else(|| WeirError::UnknownModel(model_id.to_owned()))?;
    let key_gate = permit(weir, caller, &model.id)?;
    weir.compliance().admit(model)?;
    let unavailable = || WeirError::ProviderUnavailable { model: model.id.clone(), provider: model.provider.clone() };
    // The entry's own provider or the one it is linked to, as of this registry.
    let provider = weir.registry().provider_for(model).cloned().ok_or_else(unavailable)?;
    let gate = weir.admission().gate(&model.id).ok_or_else(unavailable)?;
    let refused = |source: reach::ReachError| {
        tracing::error!(model = %model.id, provider = provider.key(), reason = %source, "call refused before sending");
        WeirError::Reach { model: model.id.clone(), source }
    };
    // The component's name is formatted only if the call is refused: not per call.
    let source = &provider.component().source;
    let destination = reach::destination(model, provider.info(), provider.trust(), source).map_err(refused)?;
    let shape = &provider.info().credential;
    let credential_error = |source| WeirError::Credential { model: model.id.clone(), source };
    let secrets = weir.secrets();
    let credential_id = destination.credential_id.as_deref();
    let credential = Credential::resolve(provider.key(), shape, credential_id, &secrets, weir.aws_identity())
        .await
        .map_err(credential_error)?;
    let endpoint =
        fill_region(weir, &secrets, provider.key(), &destination, &credential).await.map_err(credential_error)?;
    reach::check_final(&destination, &endpoint, model.allow_http, provider.key()).map_err(refused)?;
    let credential_id = destination.credential_id;
    let binding = Binding::new(weir.config().retention.get(provider.key()), model, weir.compliance());
    Ok(Target { weir, model, provider, gate, key_gate, credential, credential_id, endpoint, binding, opening })
}

/// The caller's key may call `model` (the entry actually dispatched): checked on
/// every route, against the keys as of now, so a key revoked after the gateway
/// read it is refused here. A library caller without a key is the embedding
/// service's own. Answers the key's buckets, if it has any.
fn permit(weir: &Weir, caller: Option<&Caller>, model: &str) -> Result<Option<Arc<ModelGate>>, WeirError> {
    let Some(key_id) = caller.and_then(|caller| caller.key_id.as_deref()) else { return Ok(None) };
    let keys = weir.keys();
    let key = keys.get(key_id).ok_or(WeirError::Unauthenticated(AuthError::Unknown))?;
    if !key.permits(model) {
        return Err(WeirError::ModelNotPermitted { key: key.id.clone(), model: model.to_owned() });
    }
    Ok(key.gate().cloned())
}

/// Puts the resolved region into an endpoint that names one: the signer's own
/// region when the call is signed, else the same sources the signer uses.
async fn fill_region(
    weir: &Weir,
    secrets: &dyn SecretStore,
    provider: &str,
    destination: &Destination,
    credential: &Credential,
) -> Result<String, CredentialError> {
    let endpoint = &destination.endpoint;
    if !endpoint.contains(REGION_PLACEHOLDER) {
        return Ok(endpoint.clone());
    }
    let region = match credential {
        Credential::Sigv4(signer) => Some(signer.region.clone()),
        _ => weir.aws_identity().region(secrets).await,
    };
    let region = region.ok_or_else(|| CredentialError::NoRegion {
        provider: provider.to_owned(),
        location: secrets.location(crate::transport::REGION_ID),
    })?;
    Ok(endpoint.replace(REGION_PLACEHOLDER, &region))
}
