//! The catalog: every model callers can name, resolved against the providers
//! that are loaded.

mod capability;
mod config;

pub use capability::{Capability, CapabilitySet};
use std::collections::BTreeMap;

pub use config::TelemetrySettings;
pub use config::{
    Config, ConfigError, DEFAULT_ANSWER_RESERVE, DEFAULT_EFFORT, DEFAULT_MAX_ATTEMPTS, DEFAULT_MAX_QUEUE,
    DEFAULT_SAFETY_MARGIN, EMBEDDED_DEFAULT, KeyEntry, LedgerOnError, LedgerSettings, LedgerSync, MemberEntry,
    MetricsSettings, ModelChoice, ModelEntry, Reasoning, RoleEntry, RoleKind, ServerSettings, ThinkingBudget,
};

use crate::admission::Tokenizer;

use crate::plugin::{Provider, ProviderRegistry};
use crate::reach;

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
    pub cache_read_multiplier: f64,
    pub cache_write_multiplier: f64,
    /// A plain-`http` endpoint off loopback is allowed (see `allow_http`).
    pub allow_http: bool,
    pub max_queue: u32,
    /// Upstream attempts of every kind one call may make.
    pub max_attempts: u32,
    /// Declared prices, USD per million tokens (the ledger's cost).
    pub prices: crate::record::Prices,
    /// The rung this entry serves, for roles and pins.
    pub grade: Option<String>,
    /// How effort reaches the wire; `None`: it does not.
    pub reasoning: Option<Reasoning>,
}

impl ModelSpec {
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
            cache_read_multiplier: 1.0,
            cache_write_multiplier: 1.0,
            allow_http: false,
            max_queue: DEFAULT_MAX_QUEUE,
            max_attempts: DEFAULT_MAX_ATTEMPTS,
            prices: crate::record::Prices::default(),
            grade: None,
            reasoning: Some(Reasoning::Thinking),
        }
    }
}

/// The models by id.
#[derive(Debug, Clone, Default)]
pub struct Catalog {
    models: BTreeMap<String, ModelSpec>,
}

impl Catalog {
    /// Resolves entries against the loaded providers. An entry whose calls may
    /// not go where they would (no endpoint anywhere, an untrusted component's
    /// defaults, plain http off loopback, SigV4 for another service or host: see
    /// [`crate::reach`]) is a configuration error naming the entry; one whose
    /// provider is not loaded stays listed and fails its calls (a broken drop-in
    /// must not stop the gateway).
    pub fn resolve(config: &Config, providers: &ProviderRegistry) -> Result<Self, ConfigError> {
        let mut models = BTreeMap::new();
        for entry in &config.models {
            let model = spec(entry, config.max_output_ceiling);
            match providers.get(&entry.provider) {
                Some(provider) => {
                    let source = &provider.component().source;
                    reach::destination(&model, provider.info(), provider.trust(), source).map_err(|reason| {
                        ConfigError::Invalid {
                            origin: config.origin.clone(),
                            message: format!("model `{}`: {reason}", entry.id),
                        }
                    })?;
                }
                None => {
                    tracing::warn!(model = %entry.id, provider = %entry.provider, "model names a provider that is not loaded");
                }
            }
            models.insert(entry.id.clone(), model);
        }
        Ok(Self { models })
    }

    pub fn get(&self, id: &str) -> Option<&ModelSpec> {
        self.models.get(id)
    }

    pub fn models(&self) -> impl Iterator<Item = &ModelSpec> {
        self.models.values()
    }
}

fn spec(entry: &ModelEntry, operator_ceiling: Option<u32>) -> ModelSpec {
    let wire_id = entry.wire_id.clone().unwrap_or_else(|| entry.id.clone());
    let window_bound = entry.context_window.saturating_sub(1).max(1);
    let max_output_tokens = entry.max_output_tokens.min(operator_ceiling.unwrap_or(u32::MAX)).min(window_bound);
    ModelSpec {
        id: entry.id.clone(),
        provider: entry.provider.clone(),
        tokenizer: entry.tokenizer.unwrap_or_else(|| Tokenizer::default_for(&entry.provider, &wire_id)),
        wire_id,
        endpoint: entry.endpoint.clone(),
        credential: entry.credential.clone(),
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
        cache_read_multiplier: entry.cache_read_multiplier.unwrap_or(1.0),
        cache_write_multiplier: entry.cache_write_multiplier.unwrap_or(1.0),
        allow_http: entry.allow_http,
        max_queue: entry.max_queue.unwrap_or(DEFAULT_MAX_QUEUE),
        max_attempts: entry.max_attempts.unwrap_or(DEFAULT_MAX_ATTEMPTS),
        prices: crate::record::Prices {
            input: entry.input_price,
            output: entry.output_price,
            cache_read: entry.cache_read_price,
            cache_write: entry.cache_write_price,
        },
        grade: entry.grade.clone(),
        reasoning: entry.reasoning,
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
            config.models.iter().map(|entry| spec(entry, config.max_output_ceiling).max_output_tokens).collect()
        };
        assert_eq!(ceilings(&config), vec![3_999, 3_000], "one token less than the window");
        let capped = Config::from_toml(&format!("max_output_ceiling = 2000\n{text}"), "t").unwrap();
        assert_eq!(ceilings(&capped), vec![2_000, 2_000], "the operator's ceiling");
    }
}
