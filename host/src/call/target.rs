//! What a call is addressed to, resolved once before any attempt: the model, its
//! provider component, its admission gate, its credential and endpoint.

use std::sync::Arc;

use crate::Weir;
use crate::admission::ModelGate;
use crate::catalog::ModelSpec;
use crate::error::WeirError;
use crate::plugin::Provider;
use crate::transport::Credential;

pub(super) struct Target<'a> {
    pub weir: &'a Weir,
    pub model: &'a ModelSpec,
    pub provider: Arc<Provider>,
    pub gate: &'a Arc<ModelGate>,
    pub credential: Credential,
    /// The credential's id, named in quota messages (never its value).
    pub credential_id: Option<String>,
    pub endpoint: String,
}

/// Resolves a catalog id. A missing secret fails here, before the call waits
/// for capacity it could never use.
pub(super) fn resolve<'a>(weir: &'a Weir, model_id: &str) -> Result<Target<'a>, WeirError> {
    let model = weir.catalog().get(model_id).ok_or_else(|| WeirError::UnknownModel(model_id.to_owned()))?;
    let unavailable = || WeirError::ProviderUnavailable { model: model.id.clone(), provider: model.provider.clone() };
    let provider = weir.registry().get(&model.provider).cloned().ok_or_else(unavailable)?;
    let gate = weir.admission().gate(&model.id).ok_or_else(unavailable)?;
    let endpoint = model.endpoint_for(provider.info()).ok_or_else(unavailable)?;
    let shape = &provider.info().credential;
    let credential = Credential::resolve(provider.key(), shape, model.credential.as_deref(), weir.secrets())
        .map_err(|source| WeirError::Credential { model: model.id.clone(), source })?;
    let credential_id = model.credential.clone().or_else(|| shape.default_credential_id().map(str::to_owned));
    Ok(Target { weir, model, provider, gate, credential, credential_id, endpoint })
}
