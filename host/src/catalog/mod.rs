//! The catalog: every model callers can name, resolved against the providers
//! that are loaded.

mod cache_prices;
mod deployments;
mod links;

pub use crate::config::{Capability, CapabilitySet, PriceFile, PriceRow};
pub use cache_prices::provider_cache_multipliers;
pub use deployments::DeploymentSpec;
use std::collections::{BTreeMap, BTreeSet, HashMap};

pub use crate::config::TelemetrySettings;
pub use crate::config::{BudgetFields, TeamEntry};
pub use crate::config::{
    Config, ConfigError, DEFAULT_ANSWER_RESERVE, DEFAULT_EFFORT, DEFAULT_MAX_ATTEMPTS, DEFAULT_MAX_QUEUE,
    DEFAULT_SAFETY_MARGIN, DecisionBackend, EMBEDDED_DEFAULT, EmbeddingSettings, HostedTools, KeyEntry, LedgerOnError,
    LedgerOnTampered, LedgerSettings, LedgerSync, MemberEntry, MetricsSettings, ModelChoice, ModelEntry, PromptCache,
    Reasoning, ResponsesSettings, ResponsesVisibility, RoleEntry, RoleKind, ServerSettings, ThinkingBudget,
};
pub use crate::config::{KeySource, KeySourceError, read_key};
pub use crate::config::{config_reference, config_schema};

use crate::estimate::Tokenizer;

pub use crate::plugin::addressing_of;
pub(crate) use links::{Routing, route};

use crate::plugin::{Provider, ProviderRegistry, Route};
use crate::reach;

pub use crate::config::MANTLE;

/// The provider key of Claude on Bedrock's bedrock-runtime surface: what a
/// Mantle call is recorded under (see [`recorded_provider`]).
pub const BEDROCK_ANTHROPIC: &str = "anthropic-bedrock";

/// The provider a call is recorded and stamped under (its record, its
/// `x-weir-provider`, the metrics' `provider` label), given the key that
/// served it. Mantle is one of Bedrock's surfaces, billed by the same account
/// at the same prices, so, as the runtime seed keeps its provider key as
/// Bedrock's, its calls are recorded as `anthropic-bedrock`: per-provider sums
/// keep Bedrock whole, and the entry id (`…-mantle`) tells the surfaces apart.
pub fn recorded_provider(serving: &str) -> &str {
    if serving == MANTLE { BEDROCK_ANTHROPIC } else { serving }
}

pub use crate::config::DECISION_PROVIDER;

/// A catalog entry as calls use it.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelSpec {
    pub id: String,
    pub provider: String,
    pub wire_id: String,
    /// The entry's own endpoint, as configured; see [`ModelSpec::endpoint_for`].
    pub endpoint: Option<String>,
    /// The entry's credential id; `None` means a trusted provider's default.
    pub credential: Option<String>,
    /// The kind of token minted for `credential`, when a `[credentials.ID]`
    /// table declares it (see [`crate::reach`], rule 4).
    pub minted: Option<crate::config::TokenKind>,
    /// The output ceiling: the entry's declared `max_output_tokens`, bounded by
    /// the operator's `max_output_ceiling` and by one token less than the
    /// context window (an answer needs at least one token of input room).
    pub max_output_tokens: u32,
    pub context_window: u32,
    pub rpm: Option<u32>,
    pub tpm: Option<u64>,
    pub output_tokens: Option<u32>,
    pub max_concurrency: Option<u32>,
    pub tokenizer: Tokenizer,
    pub thinking_budget: ThinkingBudget,
    pub max_retries: Option<u32>,
    pub max_corrections: Option<u32>,
    /// The logical model (default: the entry's id).
    pub identity: String,
    pub requires_lax: bool,
    /// Whether the model calls tools natively when its provider can (see `native_tools`).
    pub native_tools: bool,
    /// What the entry declares it can do; `None`: its provider's (see [`capability`]).
    pub capabilities: Option<CapabilitySet>,
    /// The deployment takes no explicit `temperature` or `top_p` (`fixed_temperature`).
    pub fixed_temperature: bool,
    /// Which provider prompt caches its calls may use (the entry's, else the
    /// configuration's).
    pub prompt_cache: PromptCache,
    pub cache_read_multiplier: f64,
    pub cache_write_multiplier: f64,
    /// A plain-`http` endpoint off loopback is allowed (see `allow_http`).
    pub allow_http: bool,
    pub max_queue: u32,
    /// The share of each capacity axis bulk calls leave to interactive ones.
    pub interactive_share: f64,
    /// What the entry serves: chat, embeddings or reranking.
    pub kind: RoleKind,
    /// Embedding entries: the width the endpoint is asked for and must answer.
    pub embedding_dimensions: Option<u32>,
    /// Embedding entries: the most inputs one upstream request carries, as the
    /// entry declares it (the provider's own limit bounds it per call).
    pub max_batch: Option<u32>,
    /// Upstream attempts of every kind one call may make.
    pub max_attempts: u32,
    /// Declared prices, USD per million tokens (the ledger's cost).
    pub prices: crate::record::Prices,
    /// The day the prices were taken (`YYYY-MM-DD`), when the entry says.
    pub prices_as_of: Option<String>,
    /// The rung this entry serves, for roles and pins.
    pub grade: Option<String>,
    /// How effort reaches the wire; `None`: it does not.
    pub reasoning: Option<Reasoning>,
    /// A decision entry's backend: `None` is the decision wire, spoken by the host.
    pub backend: Option<DecisionBackend>,
    /// The entry's deployments (`[[model.deployment]]`); empty: the entry is
    /// its own one endpoint, and its limits are its own.
    pub deployments: Vec<DeploymentSpec>,
    /// When a deployment's circuit opens and for how long.
    pub circuit: crate::config::CircuitSettings,
    /// How the entry's complete answers are kept for a repeat (`cache_ttl_secs`,
    /// `cache_scope`); `None`: the entry does not cache.
    pub answer_cache: Option<crate::config::EntryCaching>,
}

impl ModelSpec {
    /// What the reach rules read of this entry (see [`crate::reach`]).
    pub fn reach(&self) -> crate::reach::EntryReach<'_> {
        crate::reach::EntryReach {
            endpoint: self.endpoint.as_deref(),
            credential: self.credential.as_deref(),
            allow_http: self.allow_http,
            minted: self.minted,
        }
    }

    /// A decision entry whose endpoint speaks the decision wire: the host
    /// encodes and reads it, and no component is involved.
    pub fn host_spoken(&self) -> bool {
        self.kind == RoleKind::Decision && self.backend.is_none()
    }

    /// What the entry declares it may be asked for: its `capabilities`, else
    /// everything (without native tools when `native_tools = false`).
    pub fn declared_capabilities(&self) -> CapabilitySet {
        declared_capabilities(self.capabilities, self.native_tools)
    }

    /// What the entry may be asked for when a component declaring `provider`
    /// serves it: its declaration, narrowed to what the component carries.
    pub fn capabilities_with(&self, provider: crate::types::Capabilities) -> CapabilitySet {
        self.declared_capabilities().intersection(CapabilitySet::carried_by(provider))
    }

    /// Where calls go: the entry's endpoint, else the provider's default when
    /// its component is trusted (see [`crate::reach`]). Derived from the provider
    /// serving now, so a component swapped in at run time brings its own default.
    pub fn endpoint_for(&self, provider: &Provider) -> Option<String> {
        let default = provider.info().default_endpoint.clone().filter(|_| provider.trust().honours_defaults());
        self.endpoint.clone().or(default)
    }
}

#[cfg(test)]
impl ModelSpec {
    /// A spec for unit tests: model `m` on provider `p`, 1 000 output tokens of
    /// 10 000, no limits, no declared output, thinking: high effort booking 600.
    pub(crate) fn sample() -> Self {
        Self {
            id: "m".into(),
            provider: "p".into(),
            wire_id: "m".into(),
            endpoint: None,
            credential: None,
            minted: None,
            max_output_tokens: 1_000,
            context_window: 10_000,
            rpm: None,
            tpm: None,
            output_tokens: None,
            max_concurrency: None,
            tokenizer: Tokenizer::Estimate,
            thinking_budget: ThinkingBudget { high: Some(600), ..ThinkingBudget::default() },
            max_retries: None,
            max_corrections: None,
            identity: "m".into(),
            requires_lax: false,
            native_tools: true,
            capabilities: None,
            fixed_temperature: false,
            prompt_cache: PromptCache::Member,
            cache_read_multiplier: 1.0,
            cache_write_multiplier: 1.0,
            allow_http: false,
            max_queue: DEFAULT_MAX_QUEUE,
            interactive_share: crate::config::DEFAULT_INTERACTIVE_SHARE,
            kind: RoleKind::Chat,
            embedding_dimensions: None,
            max_batch: None,
            max_attempts: DEFAULT_MAX_ATTEMPTS,
            prices: crate::record::Prices::default(),
            prices_as_of: None,
            grade: None,
            reasoning: Some(Reasoning::Thinking),
            backend: None,
            deployments: Vec::new(),
            answer_cache: None,
            circuit: crate::config::CircuitSettings::default(),
        }
    }
}

/// The models by id.
#[derive(Debug, Clone, Default)]
pub struct Catalog {
    models: BTreeMap<String, ModelSpec>,
    /// The provider keys calls can name in their records: the entries' own and
    /// those they were linked to at load.
    provider_keys: BTreeSet<String>,
}

impl Catalog {
    /// Resolves entries against the loaded providers and installs each entry's
    /// route in `providers` (see [`ProviderRegistry::provider_for`]).
    ///
    /// Configuration errors, each naming the entry: a wire id its loaded
    /// provider says it does not serve (`describe.serves`: a direct Claude id
    /// on a Bedrock surface, a Bedrock id on the direct API), and calls that may
    /// not go where they would (no endpoint anywhere, an untrusted component's
    /// defaults, plain http off loopback, SigV4 for another service or host: see
    /// [`crate::reach`]). An entry whose provider key no component has is linked
    /// to one that serves and claims its wire id with the same addressing (see
    /// `links`), else it stays listed, unavailable with the reason, and fails its
    /// calls; so does an entry whose provider faulted while answering. Neither
    /// stops the gateway: a broken drop-in must not.
    pub fn resolve(config: &Config, providers: &mut ProviderRegistry) -> Result<Self, ConfigError> {
        let invalid = |message: String| ConfigError::Invalid { origin: config.origin.clone(), message };
        let mut models = BTreeMap::new();
        let mut routes = HashMap::new();
        let mut provider_keys = BTreeSet::new();
        for entry in &config.models {
            let mut model = spec(entry, config.max_output_ceiling, config.prompt_cache);
            model.minted = entry.credential.as_deref().and_then(|id| config.token_kind(id));
            let route = match route(&model, providers, &config.retention) {
                Routing::NotServed(message) => return Err(invalid(message)),
                Routing::Route(route) => route,
            };
            // An entry with deployments goes only where they name (checked below).
            if let Route::Direct(provider) = &route
                && entry.deployments.is_empty()
            {
                let source = &provider.component().source;
                reach::destination(model.reach(), provider.info(), provider.trust(), source)
                    .map_err(|reason| invalid(format!("model `{}`: {reason}", entry.id)))?;
            }
            report(&model, &route);
            // Facts that follow from the provider actually serving the entry.
            if let Route::Linked(provider) = &route {
                if entry.tokenizer.is_none() {
                    model.tokenizer = Tokenizer::default_for(provider.key(), &model.wire_id);
                }
                let billing = provider_cache_multipliers(provider.key());
                model.cache_read_multiplier = entry.cache_read_multiplier.unwrap_or(billing.read);
                model.cache_write_multiplier = entry.cache_write_multiplier.unwrap_or(billing.write);
            }
            let serving = route.provider().map_or(model.provider.as_str(), |provider| provider.key());
            if serving == MANTLE || model.provider == MANTLE {
                model.rpm = mantle_rpm(model.rpm, model.tpm);
            }
            if !entry.deployments.is_empty() {
                model.deployments = deployments::specs(entry, &model, config);
                check_deployments(&model, &route).map_err(invalid)?;
                model.rpm = deployments::sum(&model.deployments, |spec| spec.rpm);
                model.tpm = deployments::sum(&model.deployments, |spec| spec.tpm);
                model.max_concurrency = deployments::sum(&model.deployments, |spec| spec.max_concurrency);
            }
            provider_keys.insert(model.provider.clone());
            provider_keys.insert(serving.to_owned());
            provider_keys.insert(recorded_provider(serving).to_owned());
            routes.insert(entry.id.clone(), route);
            models.insert(entry.id.clone(), model);
        }
        providers.set_routes(routes);
        Ok(Self { models, provider_keys })
    }

    /// The routes of this catalog against another registry (a reload): the
    /// same rules as [`Catalog::resolve`], but nothing stops the gateway: a
    /// wire id the new component does not serve leaves its entry unavailable,
    /// logged with the reason.
    pub(crate) fn routes(&self, providers: &ProviderRegistry, config: &Config) -> HashMap<String, Route> {
        self.models
            .values()
            .map(|model| {
                let route = match route(model, providers, &config.retention) {
                    Routing::Route(route) => route,
                    Routing::NotServed(reason) => Route::Unavailable(reason),
                };
                report(model, &route);
                (model.id.clone(), route)
            })
            .collect()
    }

    pub fn get(&self, id: &str) -> Option<&ModelSpec> {
        self.models.get(id)
    }

    pub fn models(&self) -> impl Iterator<Item = &ModelSpec> {
        self.models.values()
    }

    /// The provider keys the entries name, those they were linked to at load,
    /// and those their calls are recorded under (what a call's record can carry
    /// as its provider, see [`recorded_provider`]).
    pub fn provider_keys(&self) -> impl Iterator<Item = &str> {
        self.provider_keys.iter().map(String::as_str)
    }
}

/// Each deployment of an entry served by a loaded component may go where it
/// names (see [`crate::reach`]) and speaks a wire id the component serves: a
/// configuration error naming the entry and the deployment otherwise. An
/// entry left unavailable fails its calls as any entry does.
pub(crate) fn check_deployments(model: &ModelSpec, route: &Route) -> Result<(), String> {
    let Some(provider) = route.provider() else { return Ok(()) };
    let source = &provider.component().source;
    for deployment in &model.deployments {
        let named = |reason: String| format!("model `{}`, deployment `{}`: {reason}", model.id, deployment.id);
        reach::destination(deployment.spec.reach(), provider.info(), provider.trust(), source)
            .map_err(|reason| named(reason.to_string()))?;
        if deployment.spec.wire_id != model.wire_id && matches!(provider.serves(&deployment.spec.wire_id), Ok(false)) {
            return Err(named(format!(
                "provider `{}` does not serve wire id `{}`",
                provider.key(),
                deployment.spec.wire_id
            )));
        }
    }
    Ok(())
}

/// Says at load what is not plain: a link, and an entry left unavailable.
fn report(model: &ModelSpec, route: &Route) {
    match route {
        Route::Direct(_) | Route::Host => {}
        Route::Linked(provider) => tracing::info!(
            model = %model.id,
            provider = %model.provider,
            linked_provider = %provider.key(),
            wire_id = %model.wire_id,
            "model linked to a loaded provider that serves and claims its wire id"
        ),
        Route::Unavailable(reason) => tracing::warn!(model = %model.id, %reason, "model unavailable"),
    }
}

/// Mantle publishes no requests-per-minute limit, only tokens per minute: an
/// entry with `tpm` and no `rpm` admits `tpm / 1000` requests a minute (at
/// least one), as the runtime seed derives it. A declared `rpm` stays.
pub fn mantle_rpm(rpm: Option<u32>, tpm: Option<u64>) -> Option<u32> {
    rpm.or_else(|| tpm.map(|tpm| u32::try_from(tpm / 1000).unwrap_or(u32::MAX).max(1)))
}

/// What an entry asks of its provider: its `capabilities` declaration, else
/// everything (less native tools when `native_tools = false`, the older
/// spelling). The one rule for a resolved entry and a config's (`weir check`).
pub fn declared_capabilities(declared: Option<CapabilitySet>, native_tools: bool) -> CapabilitySet {
    match declared {
        Some(declared) => declared,
        None if native_tools => CapabilitySet::all(),
        None => CapabilitySet::all().without(Capability::Tools),
    }
}

fn spec(entry: &ModelEntry, operator_ceiling: Option<u32>, prompt_cache: PromptCache) -> ModelSpec {
    let wire_id = entry.wire_id.clone().unwrap_or_else(|| entry.id.clone());
    let window_bound = entry.context_window.saturating_sub(1).max(1);
    let max_output_tokens = entry.max_output_tokens.min(operator_ceiling.unwrap_or(u32::MAX)).min(window_bound);
    let billing = provider_cache_multipliers(&entry.provider);
    ModelSpec {
        id: entry.id.clone(),
        provider: entry.provider.clone(),
        tokenizer: entry.tokenizer.unwrap_or_else(|| Tokenizer::default_for(&entry.provider, &wire_id)),
        wire_id,
        endpoint: entry.endpoint.clone(),
        credential: entry.credential.clone(),
        minted: None,
        max_output_tokens,
        context_window: entry.context_window,
        rpm: entry.rpm,
        tpm: entry.tpm,
        output_tokens: entry.output_tokens,
        max_concurrency: entry.max_concurrency,
        thinking_budget: entry.thinking_budget.unwrap_or_default(),
        max_retries: entry.max_retries,
        max_corrections: entry.max_corrections,
        identity: entry.identity.clone().unwrap_or_else(|| entry.id.clone()),
        requires_lax: entry.requires_lax,
        native_tools: entry.native_tools.unwrap_or(true),
        capabilities: entry.capabilities.as_ref().map(|declared| CapabilitySet::of(declared.iter().copied())),
        fixed_temperature: entry.fixed_temperature,
        prompt_cache: entry.prompt_cache.unwrap_or(prompt_cache),
        cache_read_multiplier: entry.cache_read_multiplier.unwrap_or(billing.read),
        cache_write_multiplier: entry.cache_write_multiplier.unwrap_or(billing.write),
        allow_http: entry.allow_http,
        max_queue: entry.max_queue.unwrap_or(DEFAULT_MAX_QUEUE),
        interactive_share: entry.interactive_share.unwrap_or(crate::config::DEFAULT_INTERACTIVE_SHARE),
        kind: entry.kind,
        embedding_dimensions: entry.embedding_dimensions,
        max_batch: entry.max_batch,
        max_attempts: entry.max_attempts.unwrap_or(DEFAULT_MAX_ATTEMPTS),
        prices: crate::record::Prices {
            input: entry.input_price,
            // An embedding or rerank call generates nothing: its output is free.
            // A chat model answering decisions bills its one output token.
            output: match (entry.kind, entry.backend) {
                (RoleKind::Chat, _) | (RoleKind::Decision, Some(DecisionBackend::Logprobs)) => entry.output_price,
                (RoleKind::Embedding | RoleKind::Rerank | RoleKind::Decision, _) => entry.input_price.map(|_| 0.0),
            },
            cache_read: entry.cache_read_price,
            cache_write: entry.cache_write_price,
            search: entry.search_price,
            web_search: entry.web_search_price,
            web_search_preview: entry.web_search_preview_price,
        },
        prices_as_of: entry.prices_as_of.clone(),
        grade: entry.grade.clone(),
        reasoning: entry.reasoning,
        backend: entry.backend,
        deployments: Vec::new(),
        circuit: crate::config::CircuitSettings {
            failures: entry.circuit_failures.unwrap_or(crate::config::CircuitSettings::DEFAULT_FAILURES),
            open: entry
                .circuit_open_secs
                .map_or(crate::config::CircuitSettings::DEFAULT_OPEN, std::time::Duration::from_secs),
            error_rate: entry.circuit_error_rate.unwrap_or(crate::config::CircuitSettings::DEFAULT_ERROR_RATE),
            window: entry
                .circuit_window_secs
                .map_or(crate::config::CircuitSettings::DEFAULT_WINDOW, std::time::Duration::from_secs),
        },
        answer_cache: entry.cache_ttl_secs.map(|ttl| crate::config::EntryCaching {
            ttl: std::time::Duration::from_secs(ttl),
            scope: entry.cache_scope.unwrap_or_default(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_output_ceiling_is_bounded_by_the_operator_and_the_context_window() {
        let text = "[[model]]\nid = \"a\"\nprovider = \"openai\"\nmax_output_tokens = 5000\ncontext_window = 4000\n\
                    [[model]]\nid = \"b\"\nprovider = \"openai\"\nmax_output_tokens = 3000\ncontext_window = 100000\n";
        let config = Config::from_toml(text, "t").unwrap();
        let ceilings = |config: &Config| -> Vec<u32> {
            config
                .models
                .iter()
                .map(|entry| spec(entry, config.max_output_ceiling, config.prompt_cache).max_output_tokens)
                .collect()
        };
        assert_eq!(ceilings(&config), vec![3_999, 3_000], "one token less than the window");
        let capped = Config::from_toml(&format!("max_output_ceiling = 2000\n{text}"), "t").unwrap();
        assert_eq!(ceilings(&capped), vec![2_000, 2_000], "the operator's ceiling");
    }

    #[test]
    fn cache_multipliers_default_by_provider_and_a_declared_one_wins() {
        let entry = |provider: &str, extra: &str| {
            let text = format!(
                "[[model]]\nid = \"a\"\nprovider = \"{provider}\"\nmax_output_tokens = 10\ncontext_window = 100\n{extra}"
            );
            let model = spec(&Config::from_toml(&text, "t").unwrap().models[0], None, PromptCache::Member);
            (model.cache_read_multiplier, model.cache_write_multiplier)
        };
        assert_eq!(entry("anthropic", ""), (0.1, 1.25));
        assert_eq!(entry("anthropic-bedrock-mantle", ""), (0.1, 1.25));
        assert_eq!(entry("openai", ""), (0.5, 1.0));
        assert_eq!(entry("bedrock-converse", ""), (1.0, 1.0));
        assert_eq!(entry("anthropic", "cache_read_multiplier = 0.3\n"), (0.3, 1.25), "each declared value wins");
        assert_eq!(entry("openai", "cache_write_multiplier = 2.0\n"), (0.5, 2.0));
    }

    #[test]
    fn mantle_is_recorded_as_bedrock_and_every_other_key_as_itself() {
        assert_eq!(recorded_provider(MANTLE), BEDROCK_ANTHROPIC);
        for key in ["anthropic-bedrock", "anthropic", "bedrock-converse", "openai", "decision"] {
            assert_eq!(recorded_provider(key), key);
        }
    }

    #[test]
    fn mantle_derives_rpm_from_tpm_and_keeps_a_declared_one() {
        assert_eq!(mantle_rpm(None, Some(2_000_000)), Some(2_000));
        assert_eq!(mantle_rpm(None, Some(999)), Some(1), "at least one request a minute");
        assert_eq!(mantle_rpm(Some(7), Some(2_000_000)), Some(7));
        assert_eq!(mantle_rpm(None, None), None);
        assert_eq!(mantle_rpm(None, Some(u64::MAX)), Some(u32::MAX));
    }
}
