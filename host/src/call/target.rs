//! What a call is addressed to, resolved once before any attempt: the model,
//! its admission gate, its credential, endpoint and retention binding
//! ([`Reached`]), and the provider component that speaks its wire
//! ([`Target`]) unless the host speaks it itself (a decision entry).

use std::sync::Arc;

use crate::Weir;
use crate::admission::ModelGate;
use crate::admission::deployment::Pool;
use crate::caller::Caller;
use crate::catalog::{ModelChoice, ModelSpec, RoleKind};
use crate::chat::ChatRequest;
use crate::compliance::Binding;
use crate::error::WeirError;
use crate::identity::AuthError;
use crate::plugin::Provider;
pub(crate) use crate::reach::REGION_PLACEHOLDER;
use crate::reach::{self, Destination};
use crate::record::Route;
use crate::routing::Role;
use crate::transport::{Credential, CredentialError, SecretStore};
use crate::types::{CredentialShape, HeaderCredential, HttpRequest};

use super::opening::Opening;

/// Where a call goes and under what limits, whoever speaks its wire (a
/// component, or the host for a decision entry): all that admission, the
/// transport, classification and the retry loop read of a call.
pub(super) struct Reached<'a> {
    pub weir: &'a Weir,
    pub model: &'a ModelSpec,
    /// The key of whoever speaks the wire: the serving component's provider,
    /// or [`crate::catalog::DECISION_PROVIDER`].
    pub provider_key: Arc<str>,
    pub gate: &'a Arc<ModelGate>,
    /// The caller key's own buckets, when its `[[key]]` declares `rpm` / `tpm`.
    pub key_gate: Option<Arc<ModelGate>>,
    /// Whether a token bucket (the entry's or the key's `tpm`) debits the
    /// call's input, so it must be counted rather than bounded.
    pub counts_tokens: bool,
    pub credential: Credential,
    /// The credential's id, named in quota messages (never its value).
    pub credential_id: Option<String>,
    pub endpoint: String,
    pub binding: Binding<'a>,
    /// The role the caller named, when it named one.
    pub role: Option<&'a str>,
    /// The entries of that role passed over before this one because they
    /// could not be called now (an unpinned role's substitution, never
    /// silent: recorded, and answered in `x-weir-passed-over`).
    pub passed_over: Vec<String>,
    /// The call's opening in the record, settled before the first request leaves.
    pub opening: &'a Opening,
    /// The deployment this target goes to, when the entry has deployments:
    /// `model` and `gate` are then that deployment's.
    pub deployment: Option<Deployed<'a>>,
}

/// A target's deployment: which one of which entry, and the entry's own gate
/// (the sum of its deployments' limits) that admits a call first.
#[derive(Clone, Copy)]
pub(super) struct Deployed<'a> {
    pub entry: &'a ModelSpec,
    pub pool: &'a Pool,
    pub index: usize,
    pub entry_gate: &'a Arc<ModelGate>,
}

impl Reached<'_> {
    /// The last step before a request leaves the process: the host's retention
    /// binding is added and the compliance envelope checked once more.
    pub fn finalize(&self, request: &mut HttpRequest) -> Result<(), WeirError> {
        self.binding.apply(request)?;
        Ok(self.binding.recheck(request)?)
    }
}

/// A call whose wire a provider component speaks: where it goes, and the
/// component that encodes and decodes it. It reads as its [`Reached`] (the
/// shared stages take that), so the component is the only thing added.
pub(super) struct Target<'a> {
    reached: Reached<'a>,
    pub provider: Arc<Provider>,
    /// The caller's native fields this provider takes, sent with
    /// `native.encode` (see `call::native`); `None`: `chat.encode`.
    pub native: Option<crate::types::NativeRequest>,
    /// The native request carries hosted tools or a history's own blocks and
    /// the provider decodes its answer with its own blocks in place
    /// (`native.decode-native`): the answer is decoded that way.
    pub native_answer: bool,
    /// The most web searches one attempt may run (see `call::web_search`):
    /// the hold and the gates add their price to the worst case.
    pub search_bound: u64,
    /// USD per thousand of the call's web searches (see `call::web_search::price`).
    pub search_price: Option<f64>,
    /// A stream of this call goes live with the provider's own pieces in
    /// place (`native.native-stream`): set when the answer is native and the
    /// provider's streams carry them (see `call::run`).
    pub native_stream: bool,
}

impl<'a> Target<'a> {
    /// A target before its native plan (see `call::native`): nothing sent
    /// natively, no web search, the neutral stream.
    fn planless(reached: Reached<'a>, provider: Arc<Provider>) -> Self {
        Self {
            reached,
            provider,
            native: None,
            native_answer: false,
            search_bound: 0,
            search_price: None,
            native_stream: false,
        }
    }
}

impl<'a> std::ops::Deref for Target<'a> {
    type Target = Reached<'a>;

    fn deref(&self) -> &Reached<'a> {
        &self.reached
    }
}

/// What resolution produces for one catalog entry: a component's [`Target`],
/// or the host-spoken [`Reached`] of a decision entry.
pub(super) enum Resolution<'a> {
    Component(Target<'a>),
    Host(Reached<'a>),
}

impl<'a> Resolution<'a> {
    /// Where the call goes, whoever speaks its wire.
    pub fn reached(&self) -> &Reached<'a> {
        match self {
            Self::Component(target) => &target.reached,
            Self::Host(reached) => reached,
        }
    }

    fn reached_mut(&mut self) -> &mut Reached<'a> {
        match self {
            Self::Component(target) => &mut target.reached,
            Self::Host(reached) => reached,
        }
    }
}

/// What a call names and for whom: the inputs of resolution, whatever the
/// operation.
pub(super) struct Naming<'r> {
    pub model: &'r str,
    pub caller: Option<&'r Caller>,
    pub route: Route,
    /// What the call is: a role or entry of another kind is refused.
    pub kind: RoleKind,
}

impl<'r> Naming<'r> {
    pub fn chat(request: &'r ChatRequest) -> Self {
        Self { model: &request.model, caller: request.caller.as_ref(), route: request.route, kind: RoleKind::Chat }
    }
}

/// Resolves what the caller named — a role, or a catalog id while
/// `model_choice = "any"` — to the entry that serves this call, once. A role is
/// resolved through the picker (see [`crate::routing`]); an entry that fails
/// later is never swapped for another.
pub(super) async fn resolve<'a>(
    weir: &'a Weir,
    naming: &Naming<'_>,
    opening: &'a Opening,
) -> Result<Target<'a>, WeirError> {
    match resolve_any(weir, naming, opening).await? {
        Resolution::Component(target) => Ok(target),
        Resolution::Host(reached) => Err(resolved_for_another_kind(reached.model)),
    }
}

/// A decision entry resolved for a call of another kind: the kind checks in
/// [`resolve_any`] refuse this first, so it is only ever a defect.
fn resolved_for_another_kind(model: &ModelSpec) -> WeirError {
    tracing::error!(model = %model.id, "an entry resolved for a call of another kind");
    unavailable(model)
}

/// The resolution itself, whatever the operation (see [`resolve`]).
pub(super) async fn resolve_any<'a>(
    weir: &'a Weir,
    naming: &Naming<'_>,
    opening: &'a Opening,
) -> Result<Resolution<'a>, WeirError> {
    let caller = naming.caller;
    refuse_what_the_key_may_not_call(weir, naming)?;
    if let Some(role) = weir.roles().get(naming.model) {
        if role.kind != naming.kind {
            return Err(WeirError::InvalidRequest(format!(
                "role `{}` is a {} role, not a {} role",
                role.name,
                role.kind.as_str(),
                naming.kind.as_str()
            )));
        }
        return resolve_role(weir, role, caller, opening).await;
    }
    let model = weir.catalog().get(naming.model).ok_or_else(|| WeirError::UnknownModel(naming.model.to_owned()))?;
    if model.kind != naming.kind {
        return Err(WeirError::InvalidRequest(format!(
            "model `{}` is a {} entry, not a {} one",
            model.id,
            model.kind.as_str(),
            naming.kind.as_str()
        )));
    }
    if weir.config().model_choice == ModelChoice::Roles && naming.route != Route::Library {
        return Err(WeirError::ModelChoiceRefused { model: model.id.clone() });
    }
    resolve_entry(weir, model, None, caller, opening).await
}

/// A role's fallback entry `id`, resolved for `caller` (see `call::fallback`):
/// the caller's key must list the entry itself (the role's name does not
/// carry over to its fallbacks), then every check of [`resolve_entry`].
pub(super) async fn resolve_fallback<'a>(
    weir: &'a Weir,
    id: &str,
    role: &'a Role,
    caller: Option<&Caller>,
    opening: &'a Opening,
) -> Result<Target<'a>, WeirError> {
    let model = weir
        .catalog()
        .get(id)
        .filter(|model| model.kind == role.kind)
        .ok_or_else(|| WeirError::UnknownModel(id.to_owned()))?;
    if let Some(key_id) = caller.and_then(|caller| caller.key_id.as_deref()) {
        let keys = weir.keys();
        let key = keys.get(key_id).ok_or(WeirError::Unauthenticated(AuthError::Unknown))?;
        if !key.permits(&model.id) {
            return Err(WeirError::ModelNotPermitted { key: key.id.clone(), model: model.id.clone() });
        }
    }
    match resolve_entry(weir, model, Some(&role.name), caller, opening).await? {
        Resolution::Component(target) => Ok(target),
        Resolution::Host(reached) => Err(resolved_for_another_kind(reached.model)),
    }
}

/// A key restricted to some models learns nothing of the others: a name it
/// may not call (an entry, a role, or nothing the gateway has), whatever its
/// kind, is refused the same way, `permission_denied` naming the key and the
/// name, before any check that could tell them apart (unknown, wrong kind,
/// `model_choice`). A role passes if the key lists it or an entry the role may
/// resolve to for it; the entry that serves is checked again on resolution.
fn refuse_what_the_key_may_not_call(weir: &Weir, naming: &Naming<'_>) -> Result<(), WeirError> {
    let Some(key_id) = naming.caller.and_then(|caller| caller.key_id.as_deref()) else { return Ok(()) };
    let keys = weir.keys();
    let key = keys.get(key_id).ok_or(WeirError::Unauthenticated(AuthError::Unknown))?;
    if key.permits(naming.model) {
        return Ok(());
    }
    let through_role = weir
        .roles()
        .get(naming.model)
        .is_some_and(|role| weir.picker().pick(role, naming.caller).entries.iter().any(|id| key.permits(id)));
    if through_role {
        return Ok(());
    }
    tracing::info!(key = %key.id, model = ?naming.model, "a key named what it may not call (or nothing that exists)");
    Err(WeirError::ModelNotPermitted { key: key.id.clone(), model: naming.model.to_owned() })
}

/// Walks the picker's entries for `role`: what the caller's key or the
/// compliance envelope does not permit is passed over; of the rest, a pinned
/// choice serves the first or fails closed, an unpinned one serves the first
/// that can be called now (provider loaded, credential and region present).
async fn resolve_role<'a>(
    weir: &'a Weir,
    role: &'a Role,
    caller: Option<&Caller>,
    opening: &'a Opening,
) -> Result<Resolution<'a>, WeirError> {
    let picks = weir.picker().pick(role, caller);
    let catalog = weir.catalog();
    let mut refused = None;
    let mut unavailable = None;
    let mut passed_over = Vec::new();
    for id in picks.entries.iter() {
        let Some(model) = catalog.get(id).filter(|model| model.kind == role.kind) else {
            tracing::warn!(role = %role.name, entry = %id, "the picker named an entry the catalog does not have for its kind");
            continue;
        };
        let error = match resolve_entry(weir, model, Some(&role.name), caller, opening).await {
            Ok(mut target) => {
                target.reached_mut().passed_over = passed_over;
                return Ok(target);
            }
            Err(error) => error,
        };
        match error {
            WeirError::ModelNotPermitted { .. } | WeirError::Compliance { .. } => {
                refused.get_or_insert(error);
            }
            _ if picks.pinned => return Err(role_unavailable(role, error)),
            _ => {
                tracing::info!(role = %role.name, entry = %model.id, %error, "passed over: cannot be called now");
                passed_over.push(model.id.clone());
                unavailable.get_or_insert(error);
            }
        }
    }
    Err(match (unavailable, refused) {
        (Some(error), _) => role_unavailable(role, error),
        (None, Some(refused)) => refused,
        (None, None) => WeirError::RoleUnavailable {
            role: role.name.clone(),
            reason: Box::new(WeirError::InvalidRequest("no entry serves it".to_owned())),
        },
    })
}

fn role_unavailable(role: &Role, reason: WeirError) -> WeirError {
    tracing::warn!(role = %role.name, %reason, "role unavailable; nothing substituted");
    WeirError::RoleUnavailable { role: role.name.clone(), reason: Box::new(reason) }
}

/// Resolves one catalog entry for a caller. The caller's key, the compliance
/// envelope, where the call may go (see [`crate::reach`]: the provider serving
/// *now* decides, since a component can be swapped in at run time), and a
/// missing secret or region fail here, before the call waits for capacity it
/// could never use and before anything is sent.
async fn resolve_entry<'a>(
    weir: &'a Weir,
    model: &'a ModelSpec,
    role: Option<&'a str>,
    caller: Option<&Caller>,
    opening: &'a Opening,
) -> Result<Resolution<'a>, WeirError> {
    if model.host_spoken() {
        return resolve_decision_entry(weir, model, role, caller, opening).await.map(Resolution::Host);
    }
    resolve_component_entry(weir, model, role, caller, opening).await.map(Resolution::Component)
}

/// [`resolve_entry`] for an entry a provider component serves.
async fn resolve_component_entry<'a>(
    weir: &'a Weir,
    model: &'a ModelSpec,
    role: Option<&'a str>,
    caller: Option<&Caller>,
    opening: &'a Opening,
) -> Result<Target<'a>, WeirError> {
    let Admitted { gate, key_gate, counts_tokens } = admitted(weir, model, role, caller)?;
    // The entry's own provider or the one it is linked to, as of this registry.
    let provider = weir.registry().provider_for(&model.id).cloned().ok_or_else(|| unavailable(model))?;
    if !model.deployments.is_empty()
        && let Some(pool) = weir.admission().pool(&model.id)
    {
        let admitted = Admitted { gate, key_gate, counts_tokens };
        return resolve_deployed_entry(weir, model, provider, admitted, role, opening, pool).await;
    }
    let refused = |source: reach::ReachError| {
        tracing::error!(model = %model.id, provider = provider.key(), reason = %source, "call refused before sending");
        WeirError::Reach { model: model.id.clone(), source }
    };
    let Addressed { credential, credential_id, endpoint } = address(weir, model, &provider, None, refused).await?;
    let binding = Binding::new(weir.config().retention.get(provider.key()), model, weir.compliance());
    let reached = Reached {
        weir,
        model,
        provider_key: provider.shared_key(),
        gate,
        key_gate,
        counts_tokens,
        credential,
        credential_id,
        endpoint,
        binding,
        role,
        passed_over: Vec::new(),
        opening,
        deployment: None,
    };
    Ok(Target::planless(reached, provider))
}

/// [`resolve_component_entry`] for an entry with deployments: resolved against
/// its first deployment that may take calls and can be addressed; each attempt
/// then goes to the one it chooses (see [`for_deployment`]).
async fn resolve_deployed_entry<'a>(
    weir: &'a Weir,
    model: &'a ModelSpec,
    provider: Arc<Provider>,
    admitted: Admitted<'a>,
    role: Option<&'a str>,
    opening: &'a Opening,
    pool: &'a Pool,
) -> Result<Target<'a>, WeirError> {
    let Admitted { gate, key_gate, counts_tokens } = admitted;
    let reached = Reached {
        weir,
        model,
        provider_key: provider.shared_key(),
        gate,
        key_gate,
        counts_tokens,
        credential: Credential::None,
        credential_id: None,
        endpoint: String::new(),
        binding: Binding::new(None, model, weir.compliance()),
        role,
        passed_over: Vec::new(),
        opening,
        deployment: None,
    };
    let entry = Target::planless(reached, provider);
    let mut unaddressable = None;
    for index in pool.usable() {
        match Box::pin(for_deployment(&entry, Deployed { entry: model, pool, index, entry_gate: gate })).await {
            Ok(target) => return Ok(target),
            Err(error) => unaddressable = Some(error),
        }
    }
    Err(unaddressable.unwrap_or_else(|| every_deployment_unavailable(model)))
}

/// `target` (a call to an entry with deployments) sent to the deployment
/// `deployed` names: its endpoint, credential, region, wire id and gate, the
/// same reach rules as any entry's. The caller's key, the envelope and the
/// policy were settled for the entry and hold for each of its deployments.
pub(super) async fn for_deployment<'a>(target: &Target<'a>, deployed: Deployed<'a>) -> Result<Target<'a>, WeirError> {
    let weir = target.weir;
    let deployment = deployed.entry.deployments.get(deployed.index).ok_or_else(|| unavailable(deployed.entry))?;
    let gate = &deployed.pool.get(deployed.index).ok_or_else(|| unavailable(deployed.entry))?.gate;
    let model = &deployment.spec;
    let provider = &target.provider;
    let refused = |source: reach::ReachError| {
        tracing::error!(model = %model.id, deployment = %deployment.id, reason = %source, "call refused before sending");
        WeirError::Reach { model: model.id.clone(), source }
    };
    let region = deployment.region.as_deref();
    let Addressed { credential, credential_id, endpoint } = address(weir, model, provider, region, refused).await?;
    let reached = Reached {
        weir,
        model,
        provider_key: provider.shared_key(),
        gate,
        key_gate: target.key_gate.clone(),
        counts_tokens: target.counts_tokens || model.tpm.is_some(),
        credential,
        credential_id,
        endpoint,
        binding: Binding::new(weir.config().retention.get(provider.key()), model, weir.compliance()),
        role: target.role,
        passed_over: target.passed_over.clone(),
        opening: target.opening,
        deployment: Some(deployed),
    };
    Ok(Target {
        reached,
        provider: Arc::clone(provider),
        native: target.native.clone(),
        native_answer: target.native_answer,
        search_bound: target.search_bound,
        search_price: target.search_price,
        native_stream: target.native_stream,
    })
}

/// Where a call goes and what it carries, as [`address`] settled them.
struct Addressed {
    credential: Credential,
    /// The credential's id, named in quota messages (never its value).
    credential_id: Option<String>,
    endpoint: String,
}

/// Where a call to `model` on `provider` goes and what it carries: the reach
/// rules' destination, the credential (a minted token where the entry names
/// one), the endpoint with its region (`region` when a deployment names its
/// own, else resolved as [`fill_region`] does) and the final check. One path
/// for an entry and for each of its deployments, so both obey the same rules.
async fn address(
    weir: &Weir,
    model: &ModelSpec,
    provider: &Provider,
    region: Option<&str>,
    refused: impl Fn(reach::ReachError) -> WeirError,
) -> Result<Addressed, WeirError> {
    // The component's name is formatted only if the call is refused: not per call.
    let source = &provider.component().source;
    let destination = reach::destination(model.reach(), provider.info(), provider.trust(), source).map_err(&refused)?;
    let credential_error = |source| WeirError::Credential { model: model.id.clone(), source };
    let secrets = weir.secrets();
    let credential_id = destination.credential_id.as_deref();
    let minted = destination.minted.and(credential_id).and_then(|id| weir.tokens().get(id));
    let shape = &provider.info().credential;
    let mut credential =
        Credential::resolve(provider.key(), shape, credential_id, &secrets, weir.aws_identity(), minted)
            .await
            .map_err(credential_error)?;
    let endpoint = match (region, &mut credential) {
        (Some(region), Credential::Sigv4(signer)) => {
            region.clone_into(&mut signer.region);
            destination.endpoint.replace(REGION_PLACEHOLDER, region)
        }
        (Some(region), _) => destination.endpoint.replace(REGION_PLACEHOLDER, region),
        (None, _) => {
            fill_region(weir, &secrets, provider.key(), &destination, &credential).await.map_err(credential_error)?
        }
    };
    reach::check_final(&destination, &endpoint, model.allow_http, provider.key()).map_err(&refused)?;
    Ok(Addressed { credential, credential_id: destination.credential_id, endpoint })
}

/// Every deployment of the entry is benched or its circuit open.
pub(super) fn every_deployment_unavailable(model: &ModelSpec) -> WeirError {
    tracing::warn!(model = %model.id, "no deployment of the entry may take calls now");
    unavailable(model)
}

/// Resolves an entry whose wire the host speaks (a decision entry): the same
/// checks as [`resolve_component_entry`] — the caller's key, the envelope, where the call
/// may go — with the entry's own endpoint and credential, since no component
/// supplies either. Its credential is sent as `Authorization: Bearer` ([`bearer`]).
async fn resolve_decision_entry<'a>(
    weir: &'a Weir,
    model: &'a ModelSpec,
    role: Option<&'a str>,
    caller: Option<&Caller>,
    opening: &'a Opening,
) -> Result<Reached<'a>, WeirError> {
    let provider = crate::catalog::DECISION_PROVIDER;
    let Admitted { gate, key_gate, counts_tokens } = admitted(weir, model, role, caller)?;
    let refused = |source: reach::ReachError| {
        tracing::error!(model = %model.id, provider, reason = %source, "call refused before sending");
        WeirError::Reach { model: model.id.clone(), source }
    };
    let endpoint = model
        .endpoint
        .clone()
        .ok_or_else(|| refused(reach::ReachError::NoEndpoint { provider: provider.to_owned() }))?;
    let destination = Destination {
        endpoint,
        entry_named_endpoint: true,
        credential_id: model.credential.clone(),
        signing_service: None,
        minted: model.minted,
    };
    reach::check_final(&destination, &destination.endpoint, model.allow_http, provider).map_err(refused)?;
    let credential_id = destination.credential_id.as_deref();
    let secrets = weir.secrets();
    let credential = Credential::resolve(
        provider,
        &bearer(credential_id),
        credential_id,
        &secrets,
        weir.aws_identity(),
        destination.minted.and(credential_id).and_then(|id| weir.tokens().get(id)),
    )
    .await
    .map_err(|source| WeirError::Credential { model: model.id.clone(), source })?;
    Ok(Reached {
        weir,
        model,
        provider_key: Arc::from(provider),
        gate,
        key_gate,
        counts_tokens,
        credential,
        credential_id: destination.credential_id,
        endpoint: destination.endpoint,
        binding: Binding::new(weir.config().retention.get(provider), model, weir.compliance()),
        role,
        passed_over: Vec::new(),
        opening,
        deployment: None,
    })
}

/// What admits a call to an entry, whoever speaks its wire.
struct Admitted<'a> {
    gate: &'a Arc<ModelGate>,
    key_gate: Option<Arc<ModelGate>>,
    counts_tokens: bool,
}

/// The checks every entry's resolution starts with: the caller's key may call
/// it, the compliance envelope admits it; then its gate and the key's.
fn admitted<'a>(
    weir: &'a Weir,
    model: &ModelSpec,
    role: Option<&str>,
    caller: Option<&Caller>,
) -> Result<Admitted<'a>, WeirError> {
    let (key_gate, key_counts_tokens) = permit(weir, caller, &model.id, role)?;
    weir.compliance().admit(model)?;
    let gate = weir.admission().gate(&model.id).ok_or_else(|| unavailable(model))?;
    Ok(Admitted { gate, key_gate, counts_tokens: key_counts_tokens || model.tpm.is_some() })
}

fn unavailable(model: &ModelSpec) -> WeirError {
    WeirError::ProviderUnavailable { model: model.id.clone(), provider: model.provider.clone() }
}

/// A decision entry's credential shape: `Authorization: Bearer <secret>` of
/// the secret it names, resolved like any component's header credential;
/// none named, nothing is sent (an endpoint that takes no credential).
fn bearer(credential_id: Option<&str>) -> CredentialShape {
    match credential_id {
        None => CredentialShape::None,
        Some(id) => CredentialShape::Header(HeaderCredential {
            default_credential_id: id.to_owned(),
            header_name: "authorization".to_owned(),
            prefix: "Bearer ".to_owned(),
            required: true,
        }),
    }
}

/// The caller's key may call `model` (the entry actually dispatched), itself
/// or through the `role` it was named by: checked on every route, against the
/// keys as of now, so a key revoked after the gateway read it is refused here.
/// A library caller without a key is the embedding service's own. Answers the
/// key's buckets, if it has any, and whether they count tokens.
fn permit(
    weir: &Weir,
    caller: Option<&Caller>,
    model: &str,
    role: Option<&str>,
) -> Result<(Option<Arc<ModelGate>>, bool), WeirError> {
    let Some(key_id) = caller.and_then(|caller| caller.key_id.as_deref()) else { return Ok((None, false)) };
    let keys = weir.keys();
    let key = keys.get(key_id).ok_or(WeirError::Unauthenticated(AuthError::Unknown))?;
    if !key.permits(model) && !role.is_some_and(|role| key.permits(role)) {
        return Err(WeirError::ModelNotPermitted { key: key.id.clone(), model: model.to_owned() });
    }
    Ok((key.gate().cloned(), key.counts_tokens()))
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
