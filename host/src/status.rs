//! What an operator asks about a running Weir: which providers are loaded from
//! where, whether each has its credential, which models are callable.

use serde::Serialize;

use crate::Weir;
use crate::call::REGION_PLACEHOLDER;
use crate::plugin::{Provider, Route};
use crate::reach::Trust;
use crate::redact::redacted_endpoint;
use crate::transport::{EnvSecretStore, REGION_ID, SecretStore};
use crate::types::{Capabilities, CredentialShape};

/// One loaded provider.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ProviderStatus {
    pub key: String,
    pub description: String,
    /// `embedded:<name>` or the component file's path.
    pub source: String,
    /// `embedded`, `allow-listed` or `untrusted`: whether the component's own
    /// endpoint and credential id are used (see `crate::reach`).
    pub trust: Trust,
    pub digest: String,
    pub world_version: String,
    pub capabilities: Vec<&'static str>,
    /// Where the host puts the secret, e.g. `header authorization: Bearer <openai-api-key>`.
    pub credential: String,
    /// Whether a call could be authenticated now (its secret is set or not needed).
    pub configured: bool,
    /// False when a fact depended on AWS's default chains and they were not asked
    /// ([`Resolution::Local`]): `configured` and the region then reflect the
    /// secret store alone.
    pub resolved: bool,
    /// Without its query's values ([`crate::redact::redacted_endpoint`]).
    pub default_endpoint: Option<String>,
    /// Non-secret facts about where calls go, resolved the way a call resolves
    /// them (the endpoint's host; the AWS region for signed providers). A fact
    /// that cannot be resolved carries the reason as its value: a deployment
    /// can hold a credential and still point somewhere wrong.
    pub connection: Vec<ConnectionFact>,
}

/// One connection fact, e.g. `region` = `eu-west-1`.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ConnectionFact {
    pub name: &'static str,
    pub value: String,
}

/// One catalog model.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ModelStatus {
    pub id: String,
    pub provider: String,
    pub wire_id: String,
    /// Without its query's values ([`crate::redact::redacted_endpoint`]).
    pub endpoint: Option<String>,
    /// Whether a loaded provider serves it (its own, or the one it is linked to).
    pub available: bool,
    /// The rung it serves, for roles and pins.
    pub grade: Option<String>,
    /// What it may be asked for now (its declaration narrowed to what the
    /// serving component carries); empty while no provider serves it, and for
    /// an embedding or rerank entry (chat capabilities mean nothing there).
    pub capabilities: Vec<&'static str>,
    /// What it serves: `chat`, `embedding` or `rerank`.
    pub kind: &'static str,
    /// An embedding entry's pinned width.
    pub embedding_dimensions: Option<u32>,
    /// The loaded provider the entry is linked to, when its own provider key is
    /// not loaded (see `Catalog::resolve`).
    pub linked_provider: Option<String>,
    /// Why it is unavailable, when it is.
    pub unavailable_reason: Option<String>,
    /// Its prices, USD per million tokens, as declared (an embedding or rerank
    /// entry's output is free: 0 once it has an input price).
    pub prices: crate::record::Prices,
    /// The day the prices were taken, when the entry says.
    pub prices_as_of: Option<String>,
    /// Its deployments and their health in this gateway (empty: one endpoint).
    pub deployments: Vec<DeploymentStatus>,
}

/// One deployment of an entry, as `/v1/models` (admin) and `weir providers` show it.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct DeploymentStatus {
    pub id: String,
    /// Without its query's values ([`crate::redact::redacted_endpoint`]).
    pub endpoint: Option<String>,
    pub wire_id: String,
    pub region: Option<String>,
    pub weight: u32,
    /// `closed`, `open` or `half_open`.
    pub circuit: &'static str,
    /// How long an open circuit stays open, in whole seconds (rounded up).
    pub circuit_open_secs_left: Option<u64>,
    /// Retryable failures in a row (what opens the circuit at the entry's `circuit_failures`).
    pub consecutive_failures: u32,
    /// The failed share of the current window's attempts (what opens it at `circuit_error_rate`).
    pub window_error_rate: f64,
    /// Its credential was refused: it takes no calls until the catalog is reloaded.
    pub benched: bool,
    pub in_flight: u32,
}

/// How far a status may look for AWS facts. AWS's default chains end in the EC2
/// instance-metadata endpoint, a network call (and, off EC2, a wait and warnings),
/// so a listing command asks them only when told to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resolution {
    /// The secret store, then AWS's default chains, as a call resolves them.
    Full,
    /// The secret store only: no network, no AWS chain.
    Local,
}

impl Weir {
    /// Every loaded provider, resolved as a call would resolve it.
    pub async fn provider_statuses(&self) -> Vec<ProviderStatus> {
        self.provider_statuses_with(Resolution::Full).await
    }

    pub async fn provider_statuses_with(&self, resolution: Resolution) -> Vec<ProviderStatus> {
        let registry = self.registry();
        let mut statuses = Vec::new();
        for provider in registry.providers() {
            statuses.push(self.provider_status(provider, resolution).await);
        }
        statuses
    }

    pub fn model_statuses(&self) -> Vec<ModelStatus> {
        let registry = self.registry();
        self.catalog()
            .models()
            .map(|model| {
                let provider = registry.provider_for(&model.id);
                let route = registry.route(&model.id);
                ModelStatus {
                    id: model.id.clone(),
                    provider: model.provider.clone(),
                    wire_id: model.wire_id.clone(),
                    endpoint: provider
                        .and_then(|provider| model.endpoint_for(provider))
                        .or(model.endpoint.clone())
                        .map(|endpoint| redacted_endpoint(&endpoint)),
                    available: provider.is_some() || matches!(route, Some(Route::Host)),
                    grade: model.grade.clone(),
                    capabilities: provider
                        .filter(|_| model.kind == crate::catalog::RoleKind::Chat)
                        .map(|provider| model.capabilities_with(provider.info().capabilities).names().collect())
                        .unwrap_or_default(),
                    kind: model.kind.as_str(),
                    embedding_dimensions: model.embedding_dimensions,
                    linked_provider: match route {
                        Some(Route::Linked(linked)) => Some(linked.key().to_owned()),
                        _ => None,
                    },
                    unavailable_reason: match route {
                        Some(Route::Unavailable(reason)) => Some(reason.clone()),
                        Some(_) => None,
                        None => Some(format!("provider `{}` is not loaded", model.provider)),
                    },
                    prices: model.prices,
                    prices_as_of: model.prices_as_of.clone(),
                    deployments: self.deployment_statuses(model),
                }
            })
            .collect()
    }

    fn deployment_statuses(&self, model: &crate::catalog::ModelSpec) -> Vec<DeploymentStatus> {
        let Some(pool) = self.admission().pool(&model.id) else { return Vec::new() };
        model
            .deployments
            .iter()
            .zip(pool.deployments())
            .map(|(spec, deployment)| {
                let health = &deployment.health;
                let circuit = health.circuit();
                DeploymentStatus {
                    id: spec.id.clone(),
                    endpoint: spec.spec.endpoint.as_deref().map(redacted_endpoint),
                    wire_id: spec.spec.wire_id.clone(),
                    region: spec.region.clone(),
                    weight: spec.weight,
                    circuit: circuit.as_str(),
                    circuit_open_secs_left: match circuit {
                        crate::admission::deployment::CircuitState::Open { remaining } => {
                            Some(remaining.as_secs() + u64::from(remaining.subsec_nanos() > 0))
                        }
                        _ => None,
                    },
                    consecutive_failures: health.consecutive_failures(),
                    window_error_rate: health.window_error_rate(),
                    benched: health.benched(),
                    in_flight: health.in_flight(),
                }
            })
            .collect()
    }

    async fn provider_status(&self, provider: &Provider, resolution: Resolution) -> ProviderStatus {
        let info = provider.info();
        let component = provider.component();
        // Only a provider that names a region asks AWS's chain for one.
        let signed = matches!(info.credential, CredentialShape::AwsSigv4(_));
        let placeholder = info.default_endpoint.as_deref().is_some_and(|url| url.contains(REGION_PLACEHOLDER));
        let region = match (signed || placeholder, resolution) {
            (false, _) => None,
            (true, Resolution::Full) => self.aws_identity().region(&self.secrets()).await,
            (true, Resolution::Local) => self.secrets().get(REGION_ID).map(|region| region.expose().trim().to_owned()),
        };
        let configured = match (&info.credential, resolution) {
            (CredentialShape::AwsSigv4(sigv4), Resolution::Local) => {
                provider.trust().honours_defaults() && self.secrets().get_pair(&sigv4.default_credential_id).is_some()
            }
            (shape, _) => self.is_configured(shape, provider.trust()).await,
        };
        let resolved = resolution == Resolution::Full || !(signed || placeholder);
        ProviderStatus {
            key: info.key.clone(),
            description: info.description.clone(),
            source: component.source.to_string(),
            trust: provider.trust(),
            digest: component.digest.clone(),
            world_version: component.world_version.to_owned(),
            capabilities: capability_names(info.capabilities),
            credential: describe_credential(&info.credential),
            configured,
            resolved,
            default_endpoint: info.default_endpoint.as_deref().map(redacted_endpoint),
            connection: self.connection_facts(
                info.default_endpoint.as_deref(),
                &info.credential,
                region.as_deref().filter(|region| !region.is_empty()),
                resolution,
            ),
        }
    }

    /// An untrusted component's default credential id is never looked up: its
    /// entries name their own, so it is "configured" only if it needs none.
    async fn is_configured(&self, shape: &CredentialShape, trust: Trust) -> bool {
        if !trust.honours_defaults() {
            return match shape {
                CredentialShape::None => true,
                CredentialShape::Header(header) => !header.required,
                CredentialShape::AwsSigv4(_) => false,
            };
        }
        match shape {
            CredentialShape::None => true,
            CredentialShape::Header(header) => {
                !header.required || self.secrets().get(&header.default_credential_id).is_some()
            }
            CredentialShape::AwsSigv4(sigv4) => {
                self.aws_identity().credentials(&self.secrets(), &sigv4.default_credential_id).await.is_ok()
            }
        }
    }

    fn connection_facts(
        &self,
        endpoint: Option<&str>,
        shape: &CredentialShape,
        region: Option<&str>,
        resolution: Resolution,
    ) -> Vec<ConnectionFact> {
        let missing_region = || match resolution {
            Resolution::Full => format!(
                "unresolved: no region chosen (secret store: {}; then AWS's default chain: AWS_REGION, a profile, \
                 instance metadata)",
                self.secrets().location(REGION_ID)
            ),
            Resolution::Local => format!(
                "not resolved: not in the secret store ({}); AWS's default chain (AWS_REGION, a profile, instance \
                 metadata) is asked only with `--resolve`",
                self.secrets().location(REGION_ID)
            ),
        };
        let mut facts = Vec::new();
        if let Some(endpoint) = endpoint {
            let host = match region {
                Some(region) => Ok(endpoint.replace(REGION_PLACEHOLDER, region)),
                None if endpoint.contains(REGION_PLACEHOLDER) => Err(missing_region()),
                None => Ok(endpoint.to_owned()),
            };
            let value = host.map_or_else(|reason| reason, |url| host_of(&url));
            facts.push(ConnectionFact { name: "host", value });
        }
        if matches!(shape, CredentialShape::AwsSigv4(_)) {
            facts.push(ConnectionFact { name: "region", value: region.map_or_else(missing_region, str::to_owned) });
        }
        facts
    }
}

fn describe_credential(shape: &CredentialShape) -> String {
    match shape {
        CredentialShape::None => "none".to_owned(),
        CredentialShape::Header(header) => format!(
            "header {}: {}<{}> ({}{})",
            header.header_name,
            header.prefix,
            header.default_credential_id,
            EnvSecretStore::variable(&header.default_credential_id),
            if header.required { "" } else { ", optional" }
        ),
        CredentialShape::AwsSigv4(sigv4) => format!(
            "aws-sigv4 service {}: the secret store's pair <{}>, else AWS's default chain (environment, profile, role)",
            sigv4.service, sigv4.default_credential_id
        ),
    }
}

/// The host part of a URL (the URL itself when it has none).
fn host_of(url: &str) -> String {
    reqwest::Url::parse(url)
        .ok()
        .and_then(|url| url.host_str().map(str::to_owned))
        .unwrap_or_else(|| redacted_endpoint(url))
}

fn capability_names(capabilities: Capabilities) -> Vec<&'static str> {
    [
        (Capabilities::STREAMING, "streaming"),
        (Capabilities::NATIVE_TOOLS, "native-tools"),
        (Capabilities::INLINE_IMAGES, "inline-images"),
        (Capabilities::IMAGE_URLS, "image-urls"),
        (Capabilities::INLINE_DOCUMENTS, "inline-documents"),
        (Capabilities::DOCUMENT_URLS, "document-urls"),
        (Capabilities::THINKING, "thinking"),
        (Capabilities::PROMPT_CACHE, "prompt-cache"),
        (Capabilities::STRUCTURED_OUTPUT, "structured-output"),
    ]
    .into_iter()
    .filter(|(flag, _)| capabilities.contains(*flag))
    .map(|(_, name)| name)
    .collect()
}

/// A secret the configuration needs that the secret store does not hold now
/// (`weir config check` warns of it): by id and where it is looked for,
/// never a value.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct UnsetCredential {
    pub credential_id: String,
    /// Where the store looks for it (e.g. `environment variable OPENAI_API_KEY`).
    pub location: String,
    /// The entries (`id` or `id/deployment`) and `[credentials.*]` tables
    /// whose calls need it.
    pub needed_by: Vec<String>,
    /// An AWS key pair: at a call, AWS's default chain (environment, profile,
    /// role) is asked when the store has none, so it may still be found.
    pub aws_chain: bool,
}

impl Weir {
    /// Every secret-store id a call could need that is unset now, from the
    /// store alone (no AWS chain, no token endpoint: no network). An id a
    /// `[credentials.*]` table mints is not a secret; the client secret it
    /// reads is.
    pub fn unset_credentials(&self) -> Vec<UnsetCredential> {
        let registry = self.registry();
        let secrets = self.secrets();
        let mut unset: std::collections::BTreeMap<String, UnsetCredential> = std::collections::BTreeMap::new();
        let mut note = |id: &str, needed_by: String, aws_chain: bool| {
            let present = match aws_chain {
                true => secrets.get_pair(id).is_some(),
                false => secrets.get(id).is_some(),
            };
            if present {
                return;
            }
            unset
                .entry(id.to_owned())
                .or_insert_with(|| UnsetCredential {
                    credential_id: id.to_owned(),
                    location: secrets.location(id),
                    needed_by: Vec::new(),
                    aws_chain,
                })
                .needed_by
                .push(needed_by);
        };
        for model in self.catalog().models() {
            let Some(provider) = registry.provider_for(&model.id) else { continue };
            let shape = &provider.info().credential;
            let aws_chain = matches!(shape, CredentialShape::AwsSigv4(_));
            let needed = |credential: Option<&str>| -> Option<String> {
                // An id the entry names is one the operator means to be
                // used, even where the component's own header is optional.
                let id = match (credential, shape) {
                    (_, CredentialShape::None) => return None,
                    (Some(id), _) => id,
                    (None, CredentialShape::Header(header)) if !header.required => return None,
                    // An untrusted component's default is never looked up (its
                    // entries are refused at load without their own).
                    (None, _) if !provider.trust().honours_defaults() => return None,
                    (None, shape) => shape.default_credential_id()?,
                };
                self.config().token_kind(id).is_none().then(|| id.to_owned())
            };
            if model.deployments.is_empty()
                && let Some(id) = needed(model.credential.as_deref())
            {
                note(&id, model.id.clone(), aws_chain);
            }
            for deployment in &model.deployments {
                if let Some(id) = needed(deployment.spec.credential.as_deref()) {
                    note(&id, format!("{}/{}", model.id, deployment.id), aws_chain);
                }
            }
        }
        for (table, spec) in &self.config().token_credentials {
            if let Some(id) = spec.secret_id() {
                note(id, format!("[credentials.{table}]"), false);
            }
        }
        unset.into_values().collect()
    }
}

/// One `[role.*]` and what it resolves to, as `weir config show` lists it.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct RoleStatus {
    pub name: String,
    /// `chat`, `embedding` or `rerank`.
    pub kind: &'static str,
    /// `grade NAME` or `entry ID`.
    pub serves: String,
    /// The entries the picker offers, best first.
    pub candidates: Vec<String>,
    /// Whether the first permitted candidate serves or nothing does (a pin).
    pub pinned: bool,
    /// The candidate a call without a caller's restrictions would take now,
    /// judged by the secret store alone: the first whose provider is loaded
    /// and whose credential is set (only the first, when pinned). `None`:
    /// none is callable.
    pub resolves_to: Option<String>,
    /// The operator's fallback entries, in order.
    pub fallback: Vec<String>,
}

impl Weir {
    /// Every role with its candidates (see [`RoleStatus`]); no network.
    pub fn role_statuses(&self) -> Vec<RoleStatus> {
        let registry = self.registry();
        let unset = self.unset_credentials();
        let callable = |id: &str| {
            registry.provider_for(id).is_some()
                && !unset.iter().any(|credential| {
                    !credential.aws_chain
                        && credential.needed_by.iter().any(|by| by == id || by.starts_with(&format!("{id}/")))
                })
        };
        self.roles()
            .iter()
            .map(|role| {
                let picks = self.picker().pick(role, None);
                let candidates = picks.entries.to_vec();
                let considered = if picks.pinned { &candidates[..candidates.len().min(1)] } else { &candidates[..] };
                RoleStatus {
                    name: role.name.clone(),
                    kind: role.kind.as_str(),
                    serves: match &role.serves {
                        crate::routing::RoleTarget::Grade(grade) => format!("grade {grade}"),
                        crate::routing::RoleTarget::Entry(entry) => format!("entry {entry}"),
                    },
                    resolves_to: considered.iter().find(|id| callable(id)).cloned(),
                    pinned: picks.pinned,
                    candidates,
                    fallback: role.fallback.clone(),
                }
            })
            .collect()
    }
}
