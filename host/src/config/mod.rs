//! The TOML configuration: top-level settings and the `[[model]]` catalog.
//! Strict: an unknown key or a wrong type is an error naming its line.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::estimate::Tokenizer;
use crate::types::Effort;

mod answer_cache;
mod budgets;
mod capability;
mod console;
mod credentials;
mod deployments;
mod key_source;
mod keys;
mod prices;
mod schema;
mod settings;

pub use answer_cache::{AnswerCacheSettings, CacheScope, EntryCaching};
pub use capability::{Capability, CapabilitySet};
pub use console::{ConsoleSettings, OIDC_CALLBACK_PATH, OidcSettings};
pub use credentials::{TokenCredentialEntry, TokenKind, TokenSourceSpec};
pub use deployments::{CircuitSettings, DeploymentEntry, MAX_DEPLOYMENTS, MIN_WINDOW_ATTEMPTS};
pub use key_source::{KeySource, KeySourceError, read_key};
pub use keys::{CheckedKey, HASH_PREFIX, check_keys, parse_hash};
pub use prices::{PriceFile, PriceRow};
pub use schema::{config_reference, config_schema};
pub use settings::{
    ComplianceEnvelope, DECISION_PROVIDER, FleetSettings, Lane, MANTLE, RetentionProjects, SharedErrorPolicy,
    UNBINDABLE_SURFACES, binds_retention,
};

/// The catalog compiled into the binary, used when no config file is given.
pub const EMBEDDED_DEFAULT: &str = include_str!("../../catalog/default.toml");

/// Why a configuration could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config {path}: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("config {origin}: {message}")]
    Parse { origin: String, message: String },
    #[error("config {origin}: {message}")]
    Invalid { origin: String, message: String },
}

/// A whole configuration file.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Address `weir serve` binds, e.g. `127.0.0.1:8080`.
    pub listen: Option<SocketAddr>,
    /// Folder of provider `.wasm` files (default `providers/`).
    pub providers_dir: Option<PathBuf>,
    /// Folder of precompiled component artifacts.
    pub cache_dir: Option<PathBuf>,
    /// Seconds to wait for a TCP + TLS connection to an upstream.
    pub connect_timeout_secs: Option<u64>,
    /// Seconds an upstream may stay silent while a response is awaited or read.
    pub read_timeout_secs: Option<u64>,
    /// How often `weir serve` checks the providers folder for changes, in
    /// milliseconds (default 2000; 0 turns the watch off).
    pub watch_interval_ms: Option<u64>,
    /// When set, only component files with these SHA-256 digests may load from
    /// the providers folder.
    pub allowed_digests: Option<Vec<String>>,
    /// The application's compliance envelope (default: refuses data sharing).
    #[serde(default)]
    pub compliance: ComplianceEnvelope,
    /// Retention projects by provider key, for surfaces that bind one per request.
    #[serde(default)]
    pub retention: BTreeMap<String, RetentionProjects>,
    /// The catalog (`[[model]]`): each entry is a model on one endpoint
    /// (or several deployments), under the id callers use.
    #[serde(default, rename = "model")]
    pub models: Vec<ModelEntry>,
    /// The callers allowed through the gateway (`[[key]]`). With none, `weir
    /// serve` binds loopback only unless `allow_unauthenticated` is set.
    #[serde(default, rename = "key")]
    pub keys: Vec<KeyEntry>,
    /// Serve a non-loopback address with no `[[key]]` (anyone who reaches the
    /// port spends the operator's credit). Default false.
    #[serde(default)]
    pub allow_unauthenticated: bool,
    /// The gateway's edge: client timeouts, body limit, origins, caps, drain.
    #[serde(default)]
    pub server: ServerSettings,
    /// `[console]`: how operators sign in to `/console` (an admin key, and
    /// single sign-on through `[console.oidc]`).
    #[serde(default)]
    pub console: ConsoleSettings,
    /// Longest a single upstream attempt may take in all (a whole answer: until
    /// its body is read; a stream: until its first output), in seconds.
    pub attempt_timeout_secs: Option<u64>,
    /// `[ledger]`: the durable record of every call.
    pub ledger: Option<LedgerSettings>,
    /// `[fleet]`: the limits shared by several gateways (Redis). Absent: this
    /// process's memory holds them.
    pub fleet: Option<FleetSettings>,
    /// `[cache]`: the answer cache's size and longest TTL. Absent: no entry
    /// caches (see [`crate::answer_cache`]).
    pub cache: Option<AnswerCacheSettings>,
    /// `[metrics]`: the Prometheus exposition.
    #[serde(default)]
    pub metrics: MetricsSettings,
    /// `[responses]`: how `POST /v1/responses` seals reasoning and what it
    /// keeps under `store: true`.
    #[serde(default)]
    pub responses: ResponsesSettings,
    /// `[telemetry]`: OpenTelemetry spans over OTLP (off without an endpoint).
    #[serde(default)]
    pub telemetry: TelemetrySettings,
    /// Whether a gateway caller may name a catalog entry (`any`, the default)
    /// or only a role (`roles`).
    #[serde(default)]
    pub model_choice: ModelChoice,
    /// Which provider prompt caches calls may use (`off`, `member`, the
    /// default, or `shared`); an entry's own `prompt_cache` wins for it.
    #[serde(default)]
    pub prompt_cache: PromptCache,
    /// What a hosted tool in a request (a server tool Anthropic or OpenAI runs
    /// itself: web search, code execution, ...) becomes when no provider can
    /// be handed it: `drop` (the default: left out, noted on the record and
    /// in `x-weir-dropped-tools`) or `refuse` (`capability_mismatch`).
    #[serde(default)]
    pub hosted_tools: HostedTools,
    /// How a streamed call is served when its hosted tools (or a history's
    /// own blocks) go to the provider that runs them. `native` (the default):
    /// live, with the provider's own blocks in place, where the serving
    /// component's stream carries them (`native.native-stream`, 0.7.0: the
    /// Anthropic direct API, Mantle and Vertex, OpenAI's Responses API);
    /// elsewhere the answer is taken
    /// whole and replayed as a stream (note `stream_replayed_whole`). `whole`:
    /// always taken whole and replayed, its own blocks in place; nothing
    /// reaches the caller until it is complete. `live`: live everywhere; where
    /// the component's stream cannot carry the own blocks, the caller gets
    /// text, reasoning and tool calls but not those blocks (note
    /// `hosted_items_not_streamed`), and a call whose USD budget holds web
    /// searches is taken whole there (such a stream reports no search count).
    #[serde(default)]
    pub hosted_tool_streams: HostedToolStreams,
    /// `[pins]`: grade → the entry id (or the `identity`) that serves it.
    #[serde(default)]
    pub pins: BTreeMap<String, String>,
    /// `[role.NAME]`: what callers name instead of a model.
    #[serde(default, rename = "role")]
    pub roles: BTreeMap<String, RoleEntry>,
    /// `[member.NAME]`: per-member defaults.
    #[serde(default, rename = "member")]
    pub members: BTreeMap<String, MemberEntry>,
    /// `[team.NAME]`: a team's budgets (a key names its team).
    #[serde(default, rename = "team")]
    pub teams: BTreeMap<String, TeamEntry>,
    /// The day and month boundaries budgets count in: `"UTC"` (default) or a
    /// fixed offset like `"+02:00"` (no time-zone names, no daylight saving).
    pub budget_timezone: Option<String>,
    /// The effort a call runs at when neither it, its key nor its member says
    /// (default `medium`, as the gateway seed's `LLM_DEFAULT_EFFORT`).
    #[serde(default, deserialize_with = "effort_word")]
    #[schemars(with = "Option<schema::EffortWord>")]
    pub default_effort: Option<Effort>,
    /// Output tokens an answer keeps when the model's ceiling cuts a reservation
    /// that includes reasoning: reasoning is cut first (default 4096).
    pub answer_reserve: Option<u32>,
    /// Tokens kept free of the context window beyond the input estimate and the
    /// output reserve (default 512): the estimate is not the provider's count.
    pub safety_margin: Option<u32>,
    /// The operator's ceiling on any call's output, below every entry's own.
    pub max_output_ceiling: Option<u32>,
    /// `[embeddings]`: the one width every vector is returned at, and the two
    /// lanes' deadlines.
    #[serde(default)]
    pub embeddings: EmbeddingSettings,
    /// `[credentials.ID]`: credential ids whose value the host mints (OAuth
    /// tokens from Google or Microsoft Entra ID; see `credentials`).
    #[serde(default)]
    #[schemars(with = "BTreeMap<String, TokenCredentialEntry>")]
    pub credentials: BTreeMap<String, toml::Spanned<TokenCredentialEntry>>,
    /// The `[credentials.*]` tables, checked: the one source each names.
    #[serde(skip)]
    pub token_credentials: BTreeMap<String, TokenSourceSpec>,
    /// Where this configuration came from, for messages.
    #[serde(skip)]
    pub origin: String,
    /// The config file's folder: relative paths in it are relative to the file.
    #[serde(skip)]
    pub base_dir: Option<PathBuf>,
}

/// One `[[model]]`: a model on one endpoint, under the id callers use.
#[derive(Debug, Clone, Deserialize, PartialEq, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ModelEntry {
    /// The name callers use.
    pub id: String,
    /// The provider key whose component speaks to this model.
    pub provider: String,
    /// The model's name on the provider's wire (default: `id`).
    pub wire_id: Option<String>,
    /// Base URL (default: the provider's own, only when its component is
    /// embedded or allow-listed; see `crate::reach`).
    pub endpoint: Option<String>,
    /// The secret's id (default: the provider's own, on the same terms).
    pub credential: Option<String>,
    /// The output ceiling (chat entries; an embedding or rerank entry writes
    /// nothing and declares none).
    #[serde(default)]
    pub max_output_tokens: u32,
    /// Tokens the model reads in one request (an embedding entry: per input).
    pub context_window: u32,
    /// What the entry serves (default chat): an embedding or rerank entry is
    /// called only through `/v1/embeddings`, `/v1/rerank` and their library calls.
    #[serde(default)]
    pub kind: RoleKind,
    /// Embedding entries: the width the endpoint is asked for and must answer
    /// (pinned); absent, vectors are folded or padded to `[embeddings] dimensions`.
    pub embedding_dimensions: Option<u32>,
    /// Embedding entries: the most inputs one upstream request carries (absent:
    /// the provider component's own limit; never more than it).
    pub max_batch: Option<u32>,
    /// The share of each capacity axis (requests, tokens, concurrency) bulk
    /// calls leave free for interactive ones, in `[0, 1)` (default 0.5).
    pub interactive_share: Option<f64>,
    /// Requests per minute (absent: unlimited).
    pub rpm: Option<u32>,
    /// Tokens per minute (absent: unlimited).
    pub tpm: Option<u64>,
    /// The declared output when a request gives none.
    pub output_tokens: Option<u32>,
    /// Calls in flight at once (absent: unlimited).
    pub max_concurrency: Option<u32>,
    /// How input is counted before the call (default: by provider and family).
    pub tokenizer: Option<Tokenizer>,
    /// Reasoning headroom booked per effort, on top of the declared output.
    pub thinking_budget: Option<ThinkingBudget>,
    /// Transparent retries of upstream signals per call (default 3).
    pub max_retries: Option<u32>,
    /// Correction turns for structured answers per call (default 2).
    pub max_corrections: Option<u32>,
    /// The logical model this entry is one endpoint of: the same model on
    /// several surfaces is several entries sharing one identity.
    pub identity: Option<String>,
    /// `false` for a model that has no tool calling although its provider has
    /// (tools are then described in the prompt; default true). The older
    /// spelling of `capabilities` without `tools`: the two are not combined.
    pub native_tools: Option<bool>,
    /// What the deployed model can do (absent: whatever its provider component
    /// declares); see [`capability`]. A request needing anything else is
    /// refused before the call.
    pub capabilities: Option<Vec<Capability>>,
    /// The deployment accepts only its own default sampling: `temperature` and
    /// `top_p` are never sent (as for OpenAI reasoning families by wire id).
    #[serde(default)]
    pub fixed_temperature: bool,
    /// Which provider prompt caches this entry's calls may use (absent: the
    /// top-level `prompt_cache`).
    pub prompt_cache: Option<PromptCache>,
    /// The model is served only under provider data sharing; see `compliance`.
    #[serde(default)]
    pub requires_lax: bool,
    /// What a cache-read input token costs, as a fraction of an input token
    /// (absent: the serving provider's, see [`crate::catalog::provider_cache_multipliers`]).
    pub cache_read_multiplier: Option<f64>,
    /// What a cache-write input token costs, as a multiple of an input token
    /// (absent: the serving provider's).
    pub cache_write_multiplier: Option<f64>,
    /// Allow a plain-`http` endpoint that is not on loopback (default false: a
    /// secret must not cross a network in clear).
    #[serde(default)]
    pub allow_http: bool,
    /// Calls parked in this model's admission queue at once (default
    /// [`DEFAULT_MAX_QUEUE`]); one more answers 503 with `retry-after`.
    pub max_queue: Option<u32>,
    /// Upstream attempts one call may make in all — retries, corrections,
    /// escalation and replays share this counter (default [`DEFAULT_MAX_ATTEMPTS`]).
    pub max_attempts: Option<u32>,
    /// USD per million uncached input tokens; with `output_price`, the ledger
    /// records each call's cost (absent: no cost is recorded, none is guessed).
    pub input_price: Option<f64>,
    /// USD per million output tokens (reasoning included).
    pub output_price: Option<f64>,
    /// USD per million cache-read input tokens (absent: `input_price` at the
    /// entry's `cache_read_multiplier`).
    pub cache_read_price: Option<f64>,
    /// USD per million cache-write input tokens (absent: `input_price` at the
    /// entry's `cache_write_multiplier`).
    pub cache_write_price: Option<f64>,
    /// USD per thousand searches, for a rerank entry billed by the search
    /// (Cohere Rerank: one search is a query with up to 100 documents) rather
    /// than by the token; declared instead of `input_price`.
    pub search_price: Option<f64>,
    /// USD per thousand web searches a chat entry's provider runs itself
    /// (Anthropic's `web_search` server tool, OpenAI's hosted `web_search`),
    /// billed on top of the tokens: the record's cost adds them, and a budget
    /// holds and settles them (absent: the searches cost nothing here, and a
    /// caller under a USD budget is refused a web search on this entry).
    pub web_search_price: Option<f64>,
    /// USD per thousand calls of OpenAI's older hosted `web_search_preview`
    /// tool, which OpenAI lists apart (USD 25 on non-reasoning models, against
    /// `web_search`'s 10): a call that sends it is charged and held at this
    /// price instead of `web_search_price` (absent: at `web_search_price`).
    pub web_search_preview_price: Option<f64>,
    /// The day the prices were taken from the provider's published page
    /// (`YYYY-MM-DD`), shown beside them so a reader knows how old they are.
    pub prices_as_of: Option<String>,
    /// The rung this entry serves (`fast`, `standard`, `deep`, ...): roles and
    /// pins name grades.
    pub grade: Option<String>,
    /// How effort reaches this model's wire (absent: it does not; no reasoning
    /// field is sent and no headroom is booked).
    pub reasoning: Option<Reasoning>,
    /// What answers a decision entry: absent, the endpoint speaks the decision
    /// wire (`provider = "decision"`); `logprobs`, the entry's chat model,
    /// asked through its provider component for token log-probabilities.
    pub backend: Option<DecisionBackend>,
    /// The same model on several endpoints (`[[model.deployment]]`); empty:
    /// the entry is its one endpoint.
    #[serde(default, rename = "deployment")]
    pub deployments: Vec<DeploymentEntry>,
    /// Consecutive retryable failures that open a deployment's circuit
    /// (default 5; read only with deployments).
    pub circuit_failures: Option<u32>,
    /// How long an open circuit stays open before one probe may go (default 30).
    pub circuit_open_secs: Option<u64>,
    /// The share of a window's attempts failing that opens a deployment's
    /// circuit, in `(0, 1]` (default 0.5; judged from 10 attempts).
    pub circuit_error_rate: Option<f64>,
    /// The window the error rate is judged over, in seconds (default 60).
    pub circuit_window_secs: Option<u64>,
    /// How long this entry's complete answers are kept for a repeat of the
    /// same request (see [`crate::answer_cache`]); absent: not cached. Needs `[cache]`.
    pub cache_ttl_secs: Option<u64>,
    /// Who shares the entry's cached answers (default `member`).
    pub cache_scope: Option<CacheScope>,
}

/// What answers a decision entry's questions.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum DecisionBackend {
    /// A chat model's first-token log-probabilities over single-token labels.
    Logprobs,
}

/// How a call's effort reaches a model.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Reasoning {
    /// An effort field on the wire (OpenAI's `reasoning_effort`); the entry's
    /// `thinking_budget` books the reasoning headroom per effort.
    Effort,
    /// A thinking token budget per effort, from the entry's `thinking_budget`.
    Thinking,
}

/// Which provider prompt caches a call may use. A provider's cache is its
/// account's: a prefix one member's call wrote is read by any call on the same
/// account that starts the same way (its `cached_tokens` tell the caller so).
/// Only a cache key the provider routes by can keep members apart.
#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum PromptCache {
    /// No breakpoint and no cache key is sent (a caller's own are dropped and
    /// noted); a provider that caches on its own (OpenAI) still does.
    Off,
    /// Members kept apart where the provider allows it: a member-scoped
    /// `prompt_cache_key` where the provider takes one, and no breakpoint (a
    /// breakpoint's cache is shared by every member of the account).
    #[default]
    Member,
    /// The member-scoped key, and breakpoints too (the system prefix the host
    /// plans and the caller's own flags): any member may read what another
    /// wrote on the same account.
    Shared,
}

impl PromptCache {
    /// Whether breakpoints are rendered.
    pub fn breakpoints(self) -> bool {
        self == Self::Shared
    }
}

/// Whether a gateway caller may name a catalog entry.
#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ModelChoice {
    /// A role or a catalog id.
    #[default]
    Any,
    /// Roles only: a catalog id from a gateway caller is refused (403).
    Roles,
}

/// See [`Config::hosted_tools`].
#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum HostedTools {
    #[default]
    Drop,
    Refuse,
}

/// See [`Config::hosted_tool_streams`].
#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum HostedToolStreams {
    #[default]
    Native,
    Whole,
    Live,
}

/// What a role serves.
#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum RoleKind {
    #[default]
    Chat,
    Embedding,
    Rerank,
    /// Typed questions answered with probabilities, on the host's decision
    /// wire (`provider = "decision"`).
    Decision,
}

impl RoleKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Chat => "chat",
            Self::Embedding => "embedding",
            Self::Rerank => "rerank",
            Self::Decision => "decision",
        }
    }
}

/// One `[role.NAME]`: a grade (served through the pins and the picker) or one
/// entry, and its kind.
#[derive(Debug, Clone, Deserialize, PartialEq, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RoleEntry {
    /// A grade: the role is served by its pin, else the grade's first
    /// callable entry (exactly one of `grade` and `model`).
    pub grade: Option<String>,
    /// A catalog id: the role is that entry and nothing else.
    pub model: Option<String>,
    /// What the role serves (default chat); its entries must be of this kind.
    #[serde(default)]
    pub kind: RoleKind,
    /// An embedding role's lane when the caller names none: `interactive`
    /// (default) or `bulk`.
    #[serde(default, deserialize_with = "lane_word")]
    #[schemars(with = "Option<schema::LaneWord>")]
    pub lane: Option<Lane>,
    /// Entries that serve the role, in order, once the entry it resolved to
    /// is exhausted (chat roles; see `call::fallback`).
    #[serde(default)]
    pub fallback: Vec<String>,
    /// Calls naming the role cache the entry's answers this long, when the
    /// entry has no `cache_ttl_secs` of its own (see [`crate::answer_cache`]).
    pub cache_ttl_secs: Option<u64>,
    /// Who shares them (default `member`).
    pub cache_scope: Option<CacheScope>,
}

impl RoleEntry {
    /// How calls naming this role cache, when it says.
    pub fn caching(&self) -> Option<EntryCaching> {
        let ttl = std::time::Duration::from_secs(self.cache_ttl_secs?);
        Some(EntryCaching { ttl, scope: self.cache_scope.unwrap_or_default() })
    }
}

/// `lane = "interactive" | "bulk"`.
fn lane_word<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<Option<Lane>, D::Error> {
    let word = String::deserialize(deserializer)?;
    Lane::parse(&word)
        .map(Some)
        .ok_or_else(|| serde::de::Error::custom(format!("`lane` is `interactive` or `bulk`, not `{word}`")))
}

/// One `[member.NAME]`: defaults for every key of that member.
#[derive(Debug, Clone, Default, Deserialize, PartialEq, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MemberEntry {
    /// The member's effort when a call names none (below a key's own).
    #[serde(default, deserialize_with = "effort_word")]
    #[schemars(with = "Option<schema::EffortWord>")]
    pub default_effort: Option<Effort>,
    /// Tokens per day (every kind summed); absent or 0: unlimited.
    pub daily_tokens: Option<u64>,
    /// Tokens per month; absent or 0: unlimited.
    pub monthly_tokens: Option<u64>,
    /// USD per day, from the entries' prices; absent or 0: unlimited.
    pub daily_usd: Option<f64>,
    /// USD per month; absent or 0: unlimited.
    pub monthly_usd: Option<f64>,
    /// The most one call may hold (its input estimate plus output reserve).
    pub max_call_tokens: Option<u64>,
    /// The most one call's worst case may cost.
    pub max_call_usd: Option<f64>,
}

/// The budget fields of a `[[key]]`, `[member.NAME]` or `[team.NAME]`, read
/// together (see [`crate::budget`]); a `[team.NAME]` is nothing else.
#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BudgetFields {
    /// Tokens per day (every kind summed); absent or 0: unlimited.
    pub daily_tokens: Option<u64>,
    /// Tokens per month; absent or 0: unlimited.
    pub monthly_tokens: Option<u64>,
    /// USD per day, from the entries' prices; absent or 0: unlimited.
    pub daily_usd: Option<f64>,
    /// USD per month; absent or 0: unlimited.
    pub monthly_usd: Option<f64>,
    /// The most one call may hold (its input estimate plus output reserve).
    pub max_call_tokens: Option<u64>,
    /// The most one call's worst case may cost.
    pub max_call_usd: Option<f64>,
}

/// One `[team.NAME]`: the budgets every key naming that team shares.
pub type TeamEntry = BudgetFields;

macro_rules! budget_fields {
    ($($entry:ty),*) => {$(
        impl $entry {
            /// This entry's budget fields.
            pub fn budget(&self) -> BudgetFields {
                BudgetFields {
                    daily_tokens: self.daily_tokens,
                    monthly_tokens: self.monthly_tokens,
                    daily_usd: self.daily_usd,
                    monthly_usd: self.monthly_usd,
                    max_call_tokens: self.max_call_tokens,
                    max_call_usd: self.max_call_usd,
                }
            }
        }
    )*};
}
budget_fields!(KeyEntry, MemberEntry);

/// An effort as the config spells it: `minimal`, `low`, `medium`, `high`, `max`.
fn effort_word<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<Option<Effort>, D::Error> {
    let word = String::deserialize(deserializer)?;
    crate::types::effort_from_word(&word)
        .map(Some)
        .ok_or_else(|| serde::de::Error::custom(format!("unknown effort `{word}` (minimal, low, medium, high or max)")))
}

/// Attempts one call may make in all, when an entry declares none.
pub const DEFAULT_MAX_ATTEMPTS: u32 = 6;
/// Calls one model may park, when an entry declares none.
pub const DEFAULT_MAX_QUEUE: u32 = 1_024;
/// The effort of a call nobody chose one for (the gateway seed's default).
pub const DEFAULT_EFFORT: Effort = Effort::Medium;
/// Output an answer keeps when the ceiling cuts reasoning, when the config says none.
pub const DEFAULT_ANSWER_RESERVE: u32 = 4_096;
/// Tokens kept free of the context window, when the config says none.
pub const DEFAULT_SAFETY_MARGIN: u32 = 512;

/// One `[[key]]`: a caller of the gateway. The token itself is never stored,
/// only its SHA-256.
#[derive(Debug, Clone, Deserialize, PartialEq, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct KeyEntry {
    /// Shown in logs and records; never the secret.
    pub id: String,
    /// The member (person or service) the key belongs to.
    pub member: String,
    /// The team the key belongs to (its `[team.NAME]` budgets apply).
    pub team: Option<String>,
    /// `sha256:<64 hex>` of the token.
    pub hash: String,
    /// Catalog ids (or roles) this key may call; absent: every model.
    pub models: Option<Vec<String>>,
    /// Requests per minute admitted for this key (absent: unlimited).
    pub rpm: Option<u32>,
    /// Tokens per minute admitted for this key (absent: unlimited).
    pub tpm: Option<u64>,
    /// RFC 3339 instant after which the key is refused, e.g. `2027-01-31T00:00:00Z`.
    pub expires: Option<String>,
    /// May read the operator endpoints (`/v1/providers`, detailed `/v1/models`).
    #[serde(default)]
    pub admin: bool,
    /// The effort this key's calls run at when they name none (above the
    /// member's and the config's defaults).
    #[serde(default, deserialize_with = "effort_word")]
    #[schemars(with = "Option<schema::EffortWord>")]
    pub default_effort: Option<Effort>,
    /// Tokens per day (every kind summed); absent or 0: unlimited.
    pub daily_tokens: Option<u64>,
    /// Tokens per month; absent or 0: unlimited.
    pub monthly_tokens: Option<u64>,
    /// USD per day, from the entries' prices; absent or 0: unlimited.
    pub daily_usd: Option<f64>,
    /// USD per month; absent or 0: unlimited.
    pub monthly_usd: Option<f64>,
    /// The most one call may hold (its input estimate plus output reserve).
    pub max_call_tokens: Option<u64>,
    /// The most one call's worst case may cost.
    pub max_call_usd: Option<f64>,
}

/// `[ledger]`: where every call's record is kept, and what happens when it
/// cannot be written. `weir serve` keeps a ledger unless `enabled = false`; a
/// library [`crate::Weir`] keeps one only when the config has this table.
/// Its `Debug` shows `postgres_url` redacted ([`crate::redact`]).
#[derive(Clone, Default, Deserialize, PartialEq, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LedgerSettings {
    /// Default true where the table is present.
    pub enabled: Option<bool>,
    /// The SQLite file (default: `data/ledger.db` next to the config file; with
    /// the embedded config, `$WEIR_DATA_DIR`, else `$XDG_DATA_HOME/weir`, else
    /// `~/.local/share/weir`).
    pub path: Option<PathBuf>,
    /// `normal` (default: a commit survives the process being killed, not the
    /// machine losing power) or `full` (every commit is flushed to the disk).
    pub sync: Option<LedgerSync>,
    /// What a call does when its record cannot be written (default `refuse`).
    pub on_error: Option<LedgerOnError>,
    /// Largest the ledger file may grow, in bytes (absent: no cap). A full
    /// ledger is a write failure, handled by `on_error`.
    pub max_bytes: Option<u64>,
    /// Keep the prompt and the answer in the record (default false).
    #[serde(default)]
    pub record_content: bool,
    /// A fleet's shared ledger: every committed row is also shipped to this
    /// PostgreSQL database (`postgres://user:password@host:port/db`), and
    /// `GET /v1/usage`, `weir ledger query --config` and the budgets' rebuild
    /// read it.
    pub postgres_url: Option<String>,
    /// A PEM file of CA certificates trusted for PostgreSQL's TLS, beside
    /// the platform's roots (with `sslmode=require` in the URL to insist on TLS).
    pub postgres_ca: Option<PathBuf>,
    /// The environment variable holding the anchor key (at least 32 bytes):
    /// each anchor line then carries an HMAC-SHA256 of the chain's head. The
    /// key itself is never written in the config.
    pub anchor_key_env: Option<String>,
    /// A file holding the anchor key (its surrounding whitespace ignored), as
    /// `anchor_key_env` (set one or the other).
    pub anchor_key_file: Option<PathBuf>,
    /// What a gateway does when the ledger's tail fails its anchor check at
    /// start (default `refuse`).
    pub on_tampered: Option<LedgerOnTampered>,
    /// Seal the rows stored since the last sealed segment into a new segment
    /// once their stored size (each row's body plus ~200 bytes of columns and
    /// hashes) reaches this many bytes. Absent, with `segment_hours` absent
    /// too: nothing is sealed, archived or deleted.
    pub segment_bytes: Option<u64>,
    /// Seal the rows stored since the last sealed segment once the first of
    /// them is this many hours old (checked each time rows are stored).
    pub segment_hours: Option<u32>,
    /// A folder each sealed segment is written to, as one zstd-compressed file
    /// of JSON lines (`weir ledger verify --archive DIR` checks them).
    pub archive_dir: Option<PathBuf>,
    /// Delete from the file the sealed segments whose newest row is older than
    /// this many days, once each is archived (`archive_dir`) and shipped
    /// (`postgres_url`); needs one of the two.
    pub retain_days: Option<u32>,
    /// Delete from the file the oldest sealed segments while the rows it
    /// holds (sealed or not, sized as for `segment_bytes`) pass this many
    /// bytes, with the conditions of `retain_days`.
    pub retain_bytes: Option<u64>,
}

/// Lists the fields that hold no secret, and the URL redacted; a field added
/// later is left out until it is listed here (`..` shows one was).
impl std::fmt::Debug for LedgerSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LedgerSettings")
            .field("enabled", &self.enabled)
            .field("path", &self.path)
            .field("sync", &self.sync)
            .field("on_error", &self.on_error)
            .field("max_bytes", &self.max_bytes)
            .field("record_content", &self.record_content)
            .field("postgres_url", &self.postgres_url.as_deref().map(crate::redact::redacted))
            .field("postgres_ca", &self.postgres_ca)
            .field("on_tampered", &self.on_tampered)
            .field("segment_bytes", &self.segment_bytes)
            .field("segment_hours", &self.segment_hours)
            .field("archive_dir", &self.archive_dir)
            .field("retain_days", &self.retain_days)
            .field("retain_bytes", &self.retain_bytes)
            .finish_non_exhaustive()
    }
}

/// How hard a ledger commit is pushed to the disk.
#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum LedgerSync {
    #[default]
    Normal,
    Full,
}

/// What a call does when the ledger cannot be written.
#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum LedgerOnError {
    /// New calls answer 503 `ledger_unavailable`: an unrecorded call cannot be accounted.
    #[default]
    Refuse,
    /// Calls go on; each lost record is logged and counted in the metrics.
    Continue,
}

/// What a starting gateway does with a ledger whose tail its anchor does not
/// vouch for (rows cut from its end, a recomputed chain, a forged anchor).
#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum LedgerOnTampered {
    /// Logs why and does not start: budgets would be rebuilt from a ledger
    /// that lost spend.
    #[default]
    Refuse,
    /// Logs why and starts (the operator has looked); the current head is
    /// anchored from then on.
    Start,
}

/// `[embeddings]`: what every embedding call shares.
#[derive(Debug, Clone, Default, Deserialize, PartialEq, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EmbeddingSettings {
    /// The width every vector is returned at when its entry pins none (required
    /// once any embedding entry is unpinned: nothing is invented).
    pub dimensions: Option<u32>,
    /// The deadline of an interactive call (query embedding, rerank) when the
    /// caller gives none, in seconds (default 5).
    pub interactive_deadline_secs: Option<u64>,
    /// The deadline of a bulk call (ingestion) when the caller gives none, in
    /// seconds (default 120).
    pub bulk_deadline_secs: Option<u64>,
}

/// Default deadline of an interactive embedding or rerank call (the gateway
/// seed's query-embedding budget).
pub const DEFAULT_INTERACTIVE_DEADLINE_SECS: u64 = 5;
/// Default deadline of a bulk embedding call (the seed's ingestion budget).
pub const DEFAULT_BULK_DEADLINE_SECS: u64 = 120;
/// The share of capacity bulk calls leave to interactive ones by default.
pub const DEFAULT_INTERACTIVE_SHARE: f64 = 0.5;

impl EmbeddingSettings {
    pub fn interactive_deadline(&self) -> std::time::Duration {
        std::time::Duration::from_secs(self.interactive_deadline_secs.unwrap_or(DEFAULT_INTERACTIVE_DEADLINE_SECS))
    }

    pub fn bulk_deadline(&self) -> std::time::Duration {
        std::time::Duration::from_secs(self.bulk_deadline_secs.unwrap_or(DEFAULT_BULK_DEADLINE_SECS))
    }

    fn validate(&self) -> Result<(), String> {
        if self.dimensions == Some(0) || self.interactive_deadline_secs == Some(0) || self.bulk_deadline_secs == Some(0)
        {
            return Err("`dimensions` and the deadlines must be positive when set".to_owned());
        }
        Ok(())
    }
}

/// `[responses]`: the Responses API route's own policy.
#[derive(Clone, Default, Deserialize, PartialEq, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ResponsesSettings {
    /// The environment variable holding the key (32 bytes, hex or base64) that
    /// seals reasoning items' `encrypted_content`. The key itself is never
    /// written in the config. Neither this nor `seal_key_file`: a random key
    /// per process (items do not survive a restart).
    pub seal_key_env: Option<String>,
    /// A file holding the seal key, as `seal_key_env` (set one or the other).
    pub seal_key_file: Option<PathBuf>,
    /// How long a stored response is kept, in seconds (default 30 days, as
    /// OpenAI keeps them); 0 keeps none (`store: true` is answered `store: false`).
    /// Stored responses need a ledger: they live beside its file, or in its
    /// PostgreSQL database (see `crate::stored`).
    pub retention_secs: Option<u64>,
    /// Who may read, continue or delete a stored response: `key` (default: the
    /// key that made it) or `member` (any key of the same member).
    pub visible_to: Option<ResponsesVisibility>,
}

/// Names the fields; none holds a secret, but the key's source is all a log needs.
impl std::fmt::Debug for ResponsesSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResponsesSettings")
            .field("seal_key_env", &self.seal_key_env)
            .field("seal_key_file", &self.seal_key_file)
            .field("retention_secs", &self.retention_secs)
            .field("visible_to", &self.visible_to)
            .finish()
    }
}

/// `[metrics]`: the Prometheus exposition at `/metrics` (for `admin` keys, or
/// anyone on `listen`).
#[derive(Debug, Clone, Deserialize, PartialEq, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MetricsSettings {
    /// False: no metrics are kept (no observer, no meter) and `/metrics`
    /// answers 404. Default true: an update is a few atomic operations, and a
    /// deployment that scrapes nothing (or counts calls through an observer of
    /// its own) may still want to spend none of them.
    #[serde(default = "metrics_enabled_default")]
    pub enabled: bool,
    /// A separate address serving only `/metrics`, without a key (bind it where
    /// only the scraper reaches).
    pub listen: Option<SocketAddr>,
    /// Label call series with the member (bounded by the keys configured). Default false.
    #[serde(default)]
    pub member_labels: bool,
    /// Label call series with the key id. Default false.
    #[serde(default)]
    pub key_labels: bool,
}

fn metrics_enabled_default() -> bool {
    true
}

impl Default for MetricsSettings {
    fn default() -> Self {
        MetricsSettings { enabled: true, listen: None, member_labels: false, key_labels: false }
    }
}

impl MetricsSettings {
    /// With metrics off, a field only metrics read would be read by nothing.
    fn validate(&self) -> Result<(), String> {
        if !self.enabled && (self.listen.is_some() || self.member_labels || self.key_labels) {
            return Err("`listen`, `member_labels` and `key_labels` are read only with metrics on: remove them, or \
                        `enabled = false`"
                .to_owned());
        }
        Ok(())
    }
}

/// `[telemetry]`: OpenTelemetry spans, one per call and one per attempt.
#[derive(Debug, Clone, Default, Deserialize, PartialEq, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TelemetrySettings {
    /// The OTLP/HTTP traces endpoint, e.g. `http://127.0.0.1:4318/v1/traces`
    /// (absent: no spans are exported).
    pub otlp_endpoint: Option<String>,
    /// `service.name` on the spans (default `weir`).
    pub service_name: Option<String>,
}

/// `[responses] visible_to`.
#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ResponsesVisibility {
    #[default]
    Key,
    Member,
}

/// `[server]`: what the gateway's edge allows a client. Every limit has a
/// default; see each field.
#[derive(Debug, Clone, Default, Deserialize, PartialEq, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ServerSettings {
    /// Largest request body, in bytes (default 32 MiB: real images and PDFs).
    pub max_body_bytes: Option<u64>,
    /// Browser origins allowed to call (`https://app.example.com`); a request
    /// carrying any other `Origin` is refused. Default: none.
    #[serde(default)]
    pub cors_origins: Vec<String>,
    /// Seconds a client has to send its request head (default 10).
    pub header_timeout_secs: Option<u64>,
    /// Seconds a client has to send its request body (default 60).
    pub body_timeout_secs: Option<u64>,
    /// Seconds an idle keep-alive connection is kept (default 75).
    pub idle_timeout_secs: Option<u64>,
    /// Client connections open at once (default 4096); more wait in the backlog.
    pub max_connections: Option<u32>,
    /// Calls in flight at once across the gateway (default 2048); more answer 503.
    pub max_in_flight: Option<u32>,
    /// Seconds a streaming client may take no chunk before it is dropped and its
    /// instance, permit and upstream socket freed (default 60).
    pub stream_idle_secs: Option<u64>,
    /// Seconds SIGTERM waits for calls in flight to finish (default 25).
    pub drain_secs: Option<u64>,
    /// Microseconds a connection lane out of work watches for I/O before its
    /// thread sleeps (default 50; 0: sleep at once; at most 1000). Each sleep
    /// and wake-up costs more than the watch where the next event comes soon,
    /// as it does at low load; see the book's performance chapter, docs/src/performance.md.
    pub poll_before_sleep_us: Option<u64>,
}

impl ServerSettings {
    /// 32 MiB: a request with real images or PDFs as base64 fits.
    pub const DEFAULT_MAX_BODY_BYTES: u64 = 32 << 20;
    pub const DEFAULT_HEADER_TIMEOUT_SECS: u64 = 10;
    pub const DEFAULT_BODY_TIMEOUT_SECS: u64 = 60;
    pub const DEFAULT_IDLE_TIMEOUT_SECS: u64 = 75;
    pub const DEFAULT_MAX_CONNECTIONS: u32 = 4_096;
    pub const DEFAULT_MAX_IN_FLIGHT: u32 = 2_048;
    pub const DEFAULT_STREAM_IDLE_SECS: u64 = 60;
    pub const DEFAULT_DRAIN_SECS: u64 = 25;
    pub const DEFAULT_POLL_BEFORE_SLEEP_US: u64 = 50;
    /// A watch longer than this is a core spent waiting, not a wake-up saved.
    pub const MAX_POLL_BEFORE_SLEEP_US: u64 = 1_000;

    /// Largest request body, in bytes.
    pub fn max_body_bytes(&self) -> u64 {
        self.max_body_bytes.unwrap_or(Self::DEFAULT_MAX_BODY_BYTES)
    }

    /// Whether a browser page served from `origin` may call.
    pub fn allows_origin(&self, origin: &[u8]) -> bool {
        self.cors_origins.iter().any(|allowed| allowed.as_bytes() == origin)
    }

    /// How long a client has to send a request head, from its first byte (or,
    /// on a fresh connection, from the accept).
    pub fn header_timeout(&self) -> Duration {
        Duration::from_secs(self.header_timeout_secs.unwrap_or(Self::DEFAULT_HEADER_TIMEOUT_SECS))
    }

    /// How long a client has to send a request body, from its head.
    pub fn body_timeout(&self) -> Duration {
        Duration::from_secs(self.body_timeout_secs.unwrap_or(Self::DEFAULT_BODY_TIMEOUT_SECS))
    }

    /// How long a keep-alive connection may wait for its next request.
    pub fn idle_timeout(&self) -> Duration {
        Duration::from_secs(self.idle_timeout_secs.unwrap_or(Self::DEFAULT_IDLE_TIMEOUT_SECS))
    }

    /// Client connections served at once.
    pub fn max_connections(&self) -> u32 {
        self.max_connections.unwrap_or(Self::DEFAULT_MAX_CONNECTIONS)
    }

    /// Calls (POST routes) in flight at once across the gateway.
    pub fn max_in_flight(&self) -> u32 {
        self.max_in_flight.unwrap_or(Self::DEFAULT_MAX_IN_FLIGHT)
    }

    /// How long a client may take none of its answer's bytes before it is dropped.
    pub fn stream_idle(&self) -> Duration {
        Duration::from_secs(self.stream_idle_secs.unwrap_or(Self::DEFAULT_STREAM_IDLE_SECS))
    }

    /// How long SIGTERM waits for calls in flight.
    pub fn drain(&self) -> Duration {
        Duration::from_secs(self.drain_secs.unwrap_or(Self::DEFAULT_DRAIN_SECS))
    }

    /// How long a connection lane out of work watches for I/O before it sleeps.
    pub fn poll_before_sleep(&self) -> Duration {
        Duration::from_micros(self.poll_before_sleep_us.unwrap_or(Self::DEFAULT_POLL_BEFORE_SLEEP_US))
    }

    /// Zero limits would refuse every call or close every connection at once;
    /// an origin is a browser's `scheme://host[:port]`, compared byte for byte.
    fn validate(&self) -> Result<(), String> {
        let zero_u64 = [self.max_body_bytes, self.header_timeout_secs, self.body_timeout_secs, self.idle_timeout_secs]
            .into_iter()
            .chain([self.stream_idle_secs])
            .any(|value| value == Some(0));
        if zero_u64 || self.max_connections == Some(0) || self.max_in_flight == Some(0) {
            return Err("every limit but `drain_secs` and `poll_before_sleep_us` must be positive when set".to_owned());
        }
        if self.poll_before_sleep_us.is_some_and(|micros| micros > Self::MAX_POLL_BEFORE_SLEEP_US) {
            return Err(format!("`poll_before_sleep_us` is at most {}", Self::MAX_POLL_BEFORE_SLEEP_US));
        }
        for origin in &self.cors_origins {
            let scheme_ok = origin.starts_with("http://") || origin.starts_with("https://");
            if !scheme_ok || origin.ends_with('/') || origin.chars().any(|c| c.is_whitespace() || c.is_control()) {
                return Err(format!(
                    "`cors_origins`: `{origin}` is not an origin (`https://host[:port]`, no path, no trailing `/`)"
                ));
            }
        }
        Ok(())
    }
}

/// Tokens of reasoning a call books for its effort. An effort with no entry
/// books none: nothing is invented.
#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ThinkingBudget {
    /// Reasoning tokens booked at effort `minimal`.
    pub minimal: Option<u32>,
    /// Reasoning tokens booked at effort `low`.
    pub low: Option<u32>,
    /// Reasoning tokens booked at effort `medium`.
    pub medium: Option<u32>,
    /// Reasoning tokens booked at effort `high`.
    pub high: Option<u32>,
    /// Reasoning tokens booked at effort `max`.
    pub max: Option<u32>,
}

impl ThinkingBudget {
    pub fn for_effort(&self, effort: Effort) -> Option<u32> {
        match effort {
            Effort::Minimal => self.minimal,
            Effort::Low => self.low,
            Effort::Medium => self.medium,
            Effort::High => self.high,
            Effort::Max => self.max,
        }
    }
}

impl Config {
    /// The kind of token minted under `credential_id`, when a
    /// `[credentials.ID]` table declares it (else it is a secret-store id).
    pub fn token_kind(&self, credential_id: &str) -> Option<TokenKind> {
        self.token_credentials.get(credential_id).map(TokenSourceSpec::kind)
    }

    /// The embedded default catalog.
    pub fn embedded_default() -> Result<Self, ConfigError> {
        Self::from_toml(EMBEDDED_DEFAULT, "(embedded default)")
    }

    pub fn from_file(path: &Path) -> Result<Self, ConfigError> {
        let text =
            std::fs::read_to_string(path).map_err(|source| ConfigError::Read { path: path.to_path_buf(), source })?;
        let mut config = Self::from_toml(&text, &path.display().to_string())?;
        config.base_dir = path.parent().map(Path::to_path_buf);
        Ok(config)
    }

    /// A path from this file, made relative to the file's folder.
    pub fn resolve_path(&self, path: &Path) -> PathBuf {
        match &self.base_dir {
            Some(base) if path.is_relative() => base.join(path),
            _ => path.to_path_buf(),
        }
    }

    /// Parses and validates a configuration; `origin` names it in errors.
    pub fn from_toml(text: &str, origin: &str) -> Result<Self, ConfigError> {
        let mut config: Config = toml::from_str(text)
            .map_err(|e| ConfigError::Parse { origin: origin.to_owned(), message: parse_message(text, &e) })?;
        config.origin = origin.to_owned();
        config.token_credentials =
            credentials::check(text, &config.credentials).map_err(|message| config.invalid(message))?;
        config.validate()?;
        Ok(config)
    }

    /// The effort of a call that, its key and its member name none.
    pub fn default_effort(&self) -> Effort {
        self.default_effort.unwrap_or(DEFAULT_EFFORT)
    }

    /// Output an answer keeps when the ceiling cuts a reservation with reasoning.
    pub fn answer_reserve(&self) -> u32 {
        self.answer_reserve.unwrap_or(DEFAULT_ANSWER_RESERVE)
    }

    /// Tokens kept free of the context window beyond input and output.
    pub fn safety_margin(&self) -> u32 {
        self.safety_margin.unwrap_or(DEFAULT_SAFETY_MARGIN)
    }

    fn validate(&self) -> Result<(), ConfigError> {
        check_keys(&self.keys).map_err(|message| self.invalid(message))?;
        if self.attempt_timeout_secs == Some(0) {
            return Err(self.invalid("`attempt_timeout_secs` must be positive when set".to_owned()));
        }
        if self.answer_reserve == Some(0) || self.max_output_ceiling == Some(0) {
            return Err(self.invalid("`answer_reserve` and `max_output_ceiling` must be positive when set".to_owned()));
        }
        self.server.validate().map_err(|message| self.invalid(format!("[server]: {message}")))?;
        self.embeddings.validate().map_err(|message| self.invalid(format!("[embeddings]: {message}")))?;
        self.metrics.validate().map_err(|message| self.invalid(format!("[metrics]: {message}")))?;
        self.console.check().map_err(|message| self.invalid(message))?;
        let unpinned = self.models.iter().find(|m| m.kind == RoleKind::Embedding && m.embedding_dimensions.is_none());
        if let Some(model) = unpinned
            && self.embeddings.dimensions.is_none()
        {
            return Err(self.invalid(format!(
                "model `{}`: an embedding entry without `embedding_dimensions` is adapted to the deployment's one \
                 width, so `[embeddings] dimensions` is required (none is invented)",
                model.id
            )));
        }
        if let Some(key) = self.retention.keys().find(|key| !binds_retention(key)) {
            return Err(self.invalid(format!(
                "[retention.{key}]: provider `{key}` is a surface that binds no retention project per request \
                 (Bedrock's bedrock-runtime takes no project header; retention there is the account's setting): \
                 remove the table"
            )));
        }
        let mut seen = std::collections::BTreeSet::new();
        for model in &self.models {
            model.validate().map_err(|message| self.invalid(format!("model `{}`: {message}", model.id)))?;
            if !seen.insert(model.id.as_str()) {
                return Err(self.invalid(format!("model id `{}` appears twice", model.id)));
            }
            if model.requires_lax && !binds_retention(&model.provider) {
                return Err(self.invalid(format!(
                    "model `{}` requires data sharing (`requires_lax`), but provider `{}` is a surface that binds no \
                     retention project (Bedrock's bedrock-runtime takes no project header): such an entry could never \
                     be called under its terms; serve the model on a surface that binds one (`{}`)",
                    model.id, model.provider, MANTLE
                )));
            }
            if model.requires_lax && !self.retention.contains_key(&model.provider) {
                return Err(self.invalid(format!(
                    "model `{}` requires data sharing (`requires_lax`), but provider `{}` binds no retention project \
                     (no `[retention.{}]`): such an entry could never be called under its terms",
                    model.id, model.provider, model.provider
                )));
            }
        }
        self.validate_roles().map_err(|message| self.invalid(message))?;
        answer_cache::validate(self).map_err(|message| self.invalid(message))?;
        budgets::validate(self).map_err(|message| self.invalid(message))
    }

    /// Every role and pin names something that exists, and no role shadows a
    /// catalog id (a name must mean one thing).
    fn validate_roles(&self) -> Result<(), String> {
        let has_grade = |grade: &str| self.models.iter().any(|m| m.grade.as_deref() == Some(grade));
        for (name, role) in &self.roles {
            if self.models.iter().any(|m| &m.id == name) {
                return Err(format!("role `{name}` has the name of a catalog id: a name must mean one thing"));
            }
            match (&role.grade, &role.model) {
                (Some(grade), None) if has_grade(grade) => {}
                (Some(grade), None) => return Err(format!("role `{name}`: no `[[model]]` has grade `{grade}`")),
                (None, Some(model)) if self.models.iter().any(|m| &m.id == model) => {}
                (None, Some(model)) => return Err(format!("role `{name}`: `{model}` is not a catalog id")),
                _ => return Err(format!("role `{name}` names exactly one of `grade` or `model`")),
            }
            let of_kind = |m: &&ModelEntry| m.kind == role.kind;
            let served = self.models.iter().filter(of_kind).any(|m| match (&role.grade, &role.model) {
                (Some(grade), _) => m.grade.as_ref() == Some(grade),
                (None, model) => model.as_ref() == Some(&m.id),
            });
            if !served {
                return Err(format!(
                    "role `{name}` is a {} role, and no {} entry serves it",
                    role.kind.as_str(),
                    role.kind.as_str()
                ));
            }
            if role.lane.is_some() && role.kind != RoleKind::Embedding {
                return Err(format!("role `{name}`: `lane` is read only for embedding roles"));
            }
            if !role.fallback.is_empty() && role.kind != RoleKind::Chat {
                return Err(format!("role `{name}`: `fallback` is read only for chat roles"));
            }
            for (index, entry) in role.fallback.iter().enumerate() {
                if !self.models.iter().any(|m| &m.id == entry && m.kind == RoleKind::Chat) {
                    return Err(format!("role `{name}`: fallback `{entry}` is not a chat entry of the catalog"));
                }
                if role.model.as_ref() == Some(entry) || role.fallback[..index].contains(entry) {
                    return Err(format!(
                        "role `{name}`: fallback `{entry}` is named twice (or is the role's own entry)"
                    ));
                }
            }
        }
        for (grade, target) in &self.pins {
            if !has_grade(grade) {
                return Err(format!("[pins]: no `[[model]]` has grade `{grade}`"));
            }
            let named = |m: &ModelEntry| &m.id == target || m.identity.as_ref().unwrap_or(&m.id) == target;
            if !self.models.iter().any(named) {
                return Err(format!("[pins]: `{grade}` is pinned to `{target}`, neither a catalog id nor an identity"));
            }
        }
        Ok(())
    }

    fn invalid(&self, message: String) -> ConfigError {
        ConfigError::Invalid { origin: self.origin.clone(), message }
    }
}

impl ModelEntry {
    /// Whether every call of this entry gets a cost: an input and an output
    /// price where calls output tokens (chat, a log-probability decision), an
    /// input price where they do not (their output is free), or a search
    /// price for a ranking billed by the search.
    pub fn priced(&self) -> bool {
        let outputs = self.kind == RoleKind::Chat || self.backend == Some(DecisionBackend::Logprobs);
        match outputs {
            true => self.input_price.is_some() && self.output_price.is_some(),
            false => self.input_price.is_some() || self.search_price.is_some(),
        }
    }

    /// What each kind reads: a chat entry's output ceiling; an embedding
    /// entry's width and batch. A field the entry's kind never reads is refused.
    fn validate_kind(&self) -> Result<(), String> {
        let chat = self.kind == RoleKind::Chat;
        if chat && self.max_output_tokens == 0 {
            return Err("`max_output_tokens` must be positive (a chat entry declares it)".to_owned());
        }
        if !chat && self.max_output_tokens != 0 {
            return Err(format!(
                "`max_output_tokens` is read only for chat entries, not `kind = \"{}\"`",
                self.kind.as_str()
            ));
        }
        let embedding = self.kind == RoleKind::Embedding;
        if !embedding && (self.embedding_dimensions.is_some() || self.max_batch.is_some()) {
            return Err(
                "`embedding_dimensions` and `max_batch` are read only for `kind = \"embedding\"` entries".to_owned()
            );
        }
        if self.embedding_dimensions == Some(0) || self.max_batch == Some(0) {
            return Err("`embedding_dimensions` and `max_batch` must be positive when set".to_owned());
        }
        if self.interactive_share.is_some_and(|share| !(0.0..1.0).contains(&share)) {
            return Err("`interactive_share` must be at least 0 and below 1".to_owned());
        }
        let chat_only = self.reasoning.is_some() || self.thinking_budget.is_some() || self.capabilities.is_some();
        if !chat && chat_only {
            return Err("`reasoning`, `thinking_budget` and `capabilities` are read only for chat entries".to_owned());
        }
        Ok(())
    }

    /// A decision entry is the host's decision wire and nothing else: it names
    /// `provider = "decision"` and its endpoint (no component supplies one),
    /// and no other kind names that provider.
    fn validate_decision(&self) -> Result<(), String> {
        let decision_provider = self.provider == DECISION_PROVIDER;
        let decision = self.kind == RoleKind::Decision;
        if self.backend.is_some() && (!decision || decision_provider) {
            return Err(format!(
                "`backend = \"logprobs\"` is read only for a `kind = \"decision\"` entry whose provider is a chat \
                 component (not `{}`)",
                DECISION_PROVIDER
            ));
        }
        if self.backend.is_some() {
            return Ok(());
        }
        match (decision, decision_provider) {
            (true, false) => Err(format!(
                "`kind = \"decision\"` is served by the host's decision wire (`provider = \"{}\"`) or by a chat \
                 model's log-probabilities (`backend = \"logprobs\"`); provider `{}` names neither",
                DECISION_PROVIDER, self.provider
            )),
            (false, true) => Err(format!(
                "`provider = \"{}\"` is the host's decision wire: write `kind = \"decision\"`",
                DECISION_PROVIDER
            )),
            (true, true) if self.endpoint.is_none() => {
                Err("a decision entry names its `endpoint` (no component supplies a default)".to_owned())
            }
            (true, true) if self.tokenizer.is_some() || self.output_tokens.is_some() => {
                Err("`tokenizer` and `output_tokens` are not read for decision entries".to_owned())
            }
            _ => Ok(()),
        }
    }

    fn validate(&self) -> Result<(), String> {
        if self.id.trim().is_empty() {
            return Err("`id` is empty".to_owned());
        }
        if self.provider.trim().is_empty() {
            return Err("`provider` is empty".to_owned());
        }
        if self.context_window == 0 {
            return Err("`context_window` must be positive".to_owned());
        }
        self.validate_decision()?;
        self.validate_kind()?;
        if self.rpm == Some(0)
            || self.tpm == Some(0)
            || self.output_tokens == Some(0)
            || self.max_concurrency == Some(0)
            || self.max_queue == Some(0)
            || self.max_attempts == Some(0)
        {
            return Err(
                "`rpm`, `tpm`, `output_tokens`, `max_concurrency`, `max_queue` and `max_attempts` must be positive when set"
                    .to_owned(),
            );
        }
        let multipliers = [self.cache_read_multiplier, self.cache_write_multiplier];
        if multipliers.into_iter().flatten().any(|m| !m.is_finite() || m < 0.0) {
            return Err("cache multipliers must be finite and not negative".to_owned());
        }
        let prices = [
            self.input_price,
            self.output_price,
            self.cache_read_price,
            self.cache_write_price,
            self.search_price,
            self.web_search_price,
            self.web_search_preview_price,
        ];
        if prices.into_iter().flatten().any(|p| !p.is_finite() || p < 0.0) {
            return Err("prices must be finite and not negative".to_owned());
        }
        if self.search_price.is_some() && self.kind != RoleKind::Rerank {
            return Err(
                "`search_price` is read only for rerank entries (only a ranking is billed by the search)".to_owned()
            );
        }
        if (self.web_search_price.is_some() || self.web_search_preview_price.is_some()) && self.kind != RoleKind::Chat {
            return Err("`web_search_price` and `web_search_preview_price` are read only for chat entries (only a \
                        chat call runs a web search)"
                .to_owned());
        }
        if self.search_price.is_some()
            && [self.input_price, self.cache_read_price, self.cache_write_price].iter().any(Option::is_some)
        {
            return Err(
                "`search_price` and token prices are not declared together: a ranking is billed by the search or by \
                 the token, and pricing both would charge it twice"
                    .to_owned(),
            );
        }
        if let Some(date) = &self.prices_as_of
            && !prices::is_date(date)
        {
            return Err(format!("`prices_as_of` is a date written YYYY-MM-DD, not `{date}`"));
        }
        let logprobs = self.backend == Some(DecisionBackend::Logprobs);
        if self.kind != RoleKind::Chat && !logprobs && self.output_price.is_some() {
            return Err(
                "`output_price` is read only for chat entries (an embedding, rerank or decision call outputs no \
                 tokens)"
                    .to_owned(),
            );
        }
        if (self.kind == RoleKind::Chat || logprobs) && self.input_price.is_some() != self.output_price.is_some() {
            return Err("`input_price` and `output_price` are declared together (one alone prices no call)".to_owned());
        }
        if let Some(endpoint) = &self.endpoint
            && !(endpoint.starts_with("http://") || endpoint.starts_with("https://"))
        {
            return Err(format!(
                "`endpoint` must be an http(s) URL, not `{}`",
                crate::redact::redacted_endpoint(endpoint)
            ));
        }
        if let Some(endpoint) = &self.endpoint {
            crate::reach::check_entry_endpoint(endpoint, self.allow_http).map_err(|reason| reason.to_string())?;
        }
        if self.credential.as_deref().is_some_and(|id| id.trim().is_empty()) {
            return Err("`credential` is empty".to_owned());
        }
        if self.grade.as_deref().is_some_and(|grade| grade.trim().is_empty()) {
            return Err("`grade` is empty".to_owned());
        }
        if self.thinking_budget.is_some() && self.reasoning.is_none() {
            return Err("`thinking_budget` is read only with `reasoning = \"effort\"` or `\"thinking\"`".to_owned());
        }
        let entry_fields = deployments::EntryFields {
            endpoint: self.endpoint.is_some(),
            credential: self.credential.is_some(),
            rpm: self.rpm.is_some(),
            tpm: self.tpm.is_some(),
            max_concurrency: self.max_concurrency.is_some(),
        };
        let chat = self.kind == RoleKind::Chat;
        deployments::validate(&self.deployments, chat, &entry_fields, self.allow_http)?;
        let circuit_set = self.circuit_failures.is_some()
            || self.circuit_open_secs.is_some()
            || self.circuit_error_rate.is_some()
            || self.circuit_window_secs.is_some();
        if circuit_set && self.deployments.is_empty() {
            return Err("`circuit_failures`, `circuit_open_secs`, `circuit_error_rate` and `circuit_window_secs` are \
                        read only for an entry with deployments"
                .to_owned());
        }
        if self.circuit_failures == Some(0) || self.circuit_open_secs == Some(0) || self.circuit_window_secs == Some(0)
        {
            return Err("`circuit_failures`, `circuit_open_secs` and `circuit_window_secs` must be positive when set"
                .to_owned());
        }
        if self.circuit_error_rate.is_some_and(|rate| !(rate > 0.0 && rate <= 1.0)) {
            return Err("`circuit_error_rate` is a share above 0 and at most 1".to_owned());
        }
        if self.capabilities.is_some() && self.native_tools.is_some() {
            return Err("`native_tools` and `capabilities` are not combined: list `tools` (native tool calling) \
                        or `prompted_tools` (tools described in the prompt) in `capabilities` instead"
                .to_owned());
        }
        Ok(())
    }
}

/// A parse error as the log may show it: where it is (line and column, from 1)
/// and what is wrong, without the source line the parser quotes — a line of a
/// configuration can hold a password (`redis_url = "redis://:pw@…"`). Any value
/// the message itself quotes goes through the one redaction.
fn parse_message(text: &str, error: &toml::de::Error) -> String {
    let message = crate::redact::redacted(error.message().trim_end());
    let Some(span) = error.span() else { return message };
    let before = text.get(..span.start).unwrap_or(text);
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |tail| tail.chars().count()) + 1;
    format!("line {line}, column {column}: {message}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedded_default_parses() {
        let config = Config::embedded_default().unwrap();
        assert!(config.models.iter().any(|m| m.id == "gpt-4.1" && m.provider == "openai"));
        assert!(config.models.iter().all(|m| m.output_tokens.is_none()), "no invented output budget");
    }

    #[test]
    fn unknown_key_names_its_line() {
        let text = "listen = \"127.0.0.1:1\"\n\n[[model]]\nid = \"a\"\nprovider = \"openai\"\nmax_output_tokens = 1\ncontext_window = 2\ncolour = \"red\"\n";
        let message = Config::from_toml(text, "t.toml").unwrap_err().to_string();
        assert!(message.contains("line 8"), "{message}");
        assert!(message.contains("colour"), "{message}");
    }

    #[test]
    fn a_syntax_error_names_its_place_without_quoting_the_line() {
        let text = "listen = \"127.0.0.1:1\"\n[fleet]\nredis_url = \"redis://:hunter2@h:6379\" junk\n";
        let message = Config::from_toml(text, "t.toml").unwrap_err().to_string();
        assert!(message.contains("line 3, column"), "{message}");
        assert!(!message.contains("hunter2"), "the line holding a password is not quoted: {message}");
    }

    #[test]
    fn metrics_off_refuses_the_fields_only_metrics_read() {
        assert!(Config::from_toml("", "t").unwrap().metrics.enabled, "metrics are on by default");
        assert!(!Config::from_toml("[metrics]\nenabled = false\n", "t").unwrap().metrics.enabled);
        for field in ["listen = \"127.0.0.1:9464\"", "member_labels = true", "key_labels = true"] {
            let message = Config::from_toml(&format!("[metrics]\nenabled = false\n{field}\n"), "t").unwrap_err();
            assert!(message.to_string().contains("[metrics]: `listen`, `member_labels` and `key_labels`"), "{message}");
            Config::from_toml(&format!("[metrics]\n{field}\n"), "t").unwrap();
        }
    }

    #[test]
    fn wrong_type_names_its_line() {
        let text = "[[model]]\nid = \"a\"\nprovider = \"openai\"\nmax_output_tokens = \"lots\"\ncontext_window = 2\n";
        let message = Config::from_toml(text, "t.toml").unwrap_err().to_string();
        assert!(message.contains("line 4"), "{message}");
    }

    #[test]
    fn a_data_sharing_entry_needs_a_surface_that_binds_retention() {
        let entry = "[[model]]\nid = \"fable\"\nprovider = \"anthropic-bedrock\"\nmax_output_tokens = 1\n\
                     context_window = 2\nrequires_lax = true\n";
        let message = Config::from_toml(entry, "t").unwrap_err().to_string();
        assert!(message.contains("model `fable`") && message.contains("binds no retention project"), "{message}");
        // Legacy Bedrock cannot bind one: a retention table for it changes nothing.
        let bound = format!("[retention.anthropic-bedrock]\nheader = \"anthropic-workspace-id\"\n{entry}");
        let message = Config::from_toml(&bound, "t").unwrap_err().to_string();
        assert!(message.contains("binds no retention project"), "{message}");
        // Mantle binds one, once the config gives it its table.
        let mantle = entry.replace("anthropic-bedrock", "anthropic-bedrock-mantle");
        let message = Config::from_toml(&mantle, "t").unwrap_err().to_string();
        assert!(message.contains("(no `[retention.anthropic-bedrock-mantle]`)"), "{message}");
        Config::from_toml(&format!("[retention.anthropic-bedrock-mantle]\nheader = \"h\"\n{mantle}"), "t").unwrap();
    }

    #[test]
    fn a_retention_table_for_a_surface_that_cannot_bind_is_refused() {
        for key in crate::compliance::UNBINDABLE_SURFACES {
            let text = format!("[retention.{key}]\nheader = \"anthropic-workspace-id\"\n");
            let message = Config::from_toml(&text, "t").unwrap_err().to_string();
            assert!(
                message.contains(&format!("[retention.{key}]")) && message.contains("remove the table"),
                "{message}"
            );
        }
    }

    #[test]
    fn a_decision_entry_is_the_host_wire_and_names_its_endpoint() {
        let entry = "[[model]]\nid = \"d\"\nprovider = \"decision\"\nkind = \"decision\"\n\
                     endpoint = \"https://decide.example/v1\"\ncontext_window = 4096\n";
        let config = Config::from_toml(entry, "t").unwrap();
        assert_eq!(config.models[0].kind, RoleKind::Decision);
        let refused = |text: &str| Config::from_toml(text, "t").unwrap_err().to_string();
        let other_provider = entry.replace("provider = \"decision\"", "provider = \"openai\"");
        let message = refused(&other_provider);
        assert!(message.contains("provider `openai` names neither") && message.contains("backend = \"logprobs\""));
        let backend = other_provider.replace("kind = \"decision\"", "kind = \"decision\"\nbackend = \"logprobs\"");
        assert!(Config::from_toml(&backend, "t").is_ok(), "a chat provider with the logprobs backend");
        let priced = backend.replace("context_window", "input_price = 1.0\ncontext_window");
        assert!(refused(&priced).contains("declared together"), "the logprobs backend bills its output token");
        let wire_backend = entry.replace("kind = \"decision\"", "kind = \"decision\"\nbackend = \"logprobs\"");
        assert!(refused(&wire_backend).contains("whose provider is a chat component"));
        let chat_backend = "[[model]]\nid = \"c\"\nprovider = \"openai\"\nbackend = \"logprobs\"\n\
                            max_output_tokens = 10\ncontext_window = 4096\n";
        assert!(refused(chat_backend).contains("read only for a `kind = \"decision\"` entry"));
        let no_kind = entry.replace("kind = \"decision\"\n", "");
        assert!(refused(&no_kind).contains("write `kind = \"decision\"`"));
        let no_endpoint = entry.replace("endpoint = \"https://decide.example/v1\"\n", "");
        assert!(refused(&no_endpoint).contains("names its `endpoint`"));
        let output = entry.replace("context_window", "max_output_tokens = 10\ncontext_window");
        assert!(refused(&output).contains("read only for chat entries"));
        let priced = entry.replace("context_window", "input_price = 1.0\noutput_price = 2.0\ncontext_window");
        assert!(refused(&priced).contains("`output_price` is read only for chat entries"));
        let plain = entry.replace("https://decide.example", "http://decide.example");
        assert!(refused(&plain).contains("https"), "{}", refused(&plain));
        let tokenizer = entry.replace("context_window", "output_tokens = 5\ncontext_window");
        assert!(refused(&tokenizer).contains("not read for decision entries"));
    }

    #[test]
    fn duplicate_ids_and_bad_values_are_rejected() {
        let entry = "[[model]]\nid = \"a\"\nprovider = \"openai\"\nmax_output_tokens = 1\ncontext_window = 2\n";
        let twice = format!("{entry}{entry}");
        assert!(Config::from_toml(&twice, "t").unwrap_err().to_string().contains("appears twice"));
        let zero = entry.replace("max_output_tokens = 1", "max_output_tokens = 0");
        assert!(Config::from_toml(&zero, "t").is_err());
        let ftp = format!("{entry}endpoint = \"ftp://x\"\n");
        assert!(Config::from_toml(&ftp, "t").unwrap_err().to_string().contains("http(s) URL"));
        let empty = format!("{entry}credential = \"\"\n");
        assert!(Config::from_toml(&empty, "t").unwrap_err().to_string().contains("`credential` is empty"));
    }

    #[test]
    fn the_ledger_settings_debug_shows_the_url_without_its_password() {
        let settings = LedgerSettings {
            postgres_url: Some("host=h user=u password='a b X9' dbname=d".to_owned()),
            ..LedgerSettings::default()
        };
        let shown = format!("{settings:?}");
        assert!(shown.contains("password=<redacted> dbname=d") && !shown.contains("X9"), "{shown}");
    }

    #[test]
    fn an_endpoint_with_a_fragment_is_refused_and_its_query_values_never_shown() {
        let entry = "[[model]]\nid = \"a\"\nprovider = \"openai\"\nmax_output_tokens = 1\ncontext_window = 2\n";
        let fragment = format!("{entry}endpoint = \"https://h.example/v1?api-key=K3Y#part\"\n");
        let message = Config::from_toml(&fragment, "t").unwrap_err().to_string();
        assert!(message.contains("fragment") && message.contains("api-key=<redacted>"), "{message}");
        assert!(!message.contains("K3Y"), "{message}");
        let plain = format!("{entry}endpoint = \"http://10.0.0.7/v1?api-version=1&api-key=K3Y\"\n");
        let message = Config::from_toml(&plain, "t").unwrap_err().to_string();
        assert!(
            message.contains("plain http") && message.contains("api-version=<redacted>&api-key=<redacted>"),
            "{message}"
        );
        assert!(!message.contains("K3Y"), "{message}");
        let not_http = format!("{entry}endpoint = \"ftp://u:pw@h/?token=K3Y\"\n");
        let message = Config::from_toml(&not_http, "t").unwrap_err().to_string();
        assert!(message.contains("http(s) URL") && !message.contains("K3Y") && !message.contains("pw"), "{message}");
        Config::from_toml(&format!("{entry}endpoint = \"https://h.example/v1?api-version=2024-10-21\"\n"), "t")
            .unwrap();
    }

    #[test]
    fn plain_http_off_loopback_needs_allow_http() {
        let entry = "[[model]]\nid = \"a\"\nprovider = \"openai\"\nmax_output_tokens = 1\ncontext_window = 2\n";
        let remote = format!("{entry}endpoint = \"http://10.0.0.7:8000/v1\"\n");
        let message = Config::from_toml(&remote, "t").unwrap_err().to_string();
        assert!(message.contains("model `a`") && message.contains("plain http"), "{message}");
        Config::from_toml(&format!("{remote}allow_http = true\n"), "t").unwrap();
        Config::from_toml(&format!("{entry}endpoint = \"http://127.0.0.1:9/v1\"\n"), "t").unwrap();
        Config::from_toml(&format!("{entry}endpoint = \"http://localhost:9/v1\"\n"), "t").unwrap();
    }

    #[test]
    fn spend_limits_must_be_positive() {
        let entry = "[[model]]\nid = \"a\"\nprovider = \"openai\"\nmax_output_tokens = 1\ncontext_window = 2\n";
        for bad in ["max_attempts = 0\n", "max_queue = 0\n"] {
            let message = Config::from_toml(&format!("{entry}{bad}"), "t").unwrap_err().to_string();
            assert!(message.contains("must be positive"), "{message}");
        }
        let message = Config::from_toml(&format!("attempt_timeout_secs = 0\n{entry}"), "t").unwrap_err().to_string();
        assert!(message.contains("attempt_timeout_secs"), "{message}");
        let fine = format!("attempt_timeout_secs = 30\n{entry}max_attempts = 2\nmax_queue = 1\n");
        let config = Config::from_toml(&fine, "t").unwrap();
        assert_eq!((config.attempt_timeout_secs, config.models[0].max_attempts), (Some(30), Some(2)));
    }

    const GRADED: &str = "[[model]]\nid = \"a\"\nprovider = \"openai\"\ngrade = \"fast\"\nidentity = \"mini\"\n\
                          max_output_tokens = 1\ncontext_window = 2\n";

    #[test]
    fn roles_and_pins_name_what_exists() {
        let good =
            format!("[pins]\nfast = \"mini\"\n[role.chat]\ngrade = \"fast\"\n[role.one]\nmodel = \"a\"\n{GRADED}");
        let config = Config::from_toml(&good, "t").unwrap();
        assert_eq!(config.roles["chat"].kind, RoleKind::Chat);
        for (bad, expected) in [
            ("[role.chat]\ngrade = \"deep\"\n", "no `[[model]]` has grade `deep`"),
            ("[role.chat]\nmodel = \"b\"\n", "`b` is not a catalog id"),
            ("[role.chat]\ngrade = \"fast\"\nmodel = \"a\"\n", "exactly one of"),
            ("[role.chat]\n", "exactly one of"),
            ("[role.a]\ngrade = \"fast\"\n", "has the name of a catalog id"),
            ("[pins]\ndeep = \"a\"\n", "no `[[model]]` has grade `deep`"),
            ("[pins]\nfast = \"nothing\"\n", "neither a catalog id nor an identity"),
            ("[role.chat]\ngrade = \"fast\"\nkind = \"vision\"\n", "unknown variant"),
        ] {
            let message = Config::from_toml(&format!("{bad}{GRADED}"), "t").unwrap_err().to_string();
            assert!(message.contains(expected), "{bad}: {message}");
        }
    }

    /// An embedding entry, unpinned, and a rerank entry: what each kind may declare.
    const RETRIEVAL: &str = "[[model]]\nid = \"e\"\nprovider = \"openai\"\nkind = \"embedding\"\ncontext_window = 8192\n\
                             [[model]]\nid = \"r\"\nprovider = \"openai-compatible\"\nkind = \"rerank\"\n\
                             context_window = 4096\n";

    #[test]
    fn embedding_and_rerank_entries_declare_only_what_their_kind_reads() {
        let good = format!(
            "[embeddings]\ndimensions = 256\n[role.search]\nmodel = \"e\"\nkind = \"embedding\"\nlane = \"bulk\"\n{RETRIEVAL}"
        );
        let config = Config::from_toml(&good, "t").unwrap();
        assert_eq!(config.roles["search"].lane, Some(Lane::Bulk));
        assert_eq!(crate::routing::Roles::from_config(&config).get("search").unwrap().lane, Some(Lane::Bulk));
        for (bad, expected) in [
            ("", "`[embeddings] dimensions` is required"),
            ("[embeddings]\ndimensions = 0\n", "must be positive"),
            (
                "[embeddings]\ndimensions = 8\n[role.search]\nmodel = \"e\"\nkind = \"embedding\"\nlane = \"fast\"\n",
                "`lane` is `interactive` or `bulk`",
            ),
            (
                "[embeddings]\ndimensions = 8\n[role.search]\nmodel = \"r\"\nkind = \"rerank\"\nlane = \"bulk\"\n",
                "read only for embedding roles",
            ),
            ("[embeddings]\ndimensions = 8\n[role.search]\nmodel = \"e\"\n", "no chat entry serves it"),
        ] {
            let message = Config::from_toml(&format!("{bad}{RETRIEVAL}"), "t").unwrap_err().to_string();
            assert!(message.contains(expected), "{bad}: {message}");
        }
        let fields = [
            ("max_output_tokens = 10", "read only for chat entries"),
            ("output_price = 1.0", "read only for chat entries"),
            ("reasoning = \"effort\"", "read only for chat entries"),
            ("interactive_share = 1.0", "at least 0 and below 1"),
            ("max_batch = 0", "must be positive"),
        ];
        for (field, expected) in fields {
            let entry = format!(
                "[embeddings]\ndimensions = 8\n[[model]]\nid = \"x\"\nprovider = \"openai\"\nkind = \"embedding\"\ncontext_window = 10\n{field}\n"
            );
            let message = Config::from_toml(&entry, "t").unwrap_err().to_string();
            assert!(message.contains(expected), "{field}: {message}");
        }
        let chat =
            "[[model]]\nid = \"c\"\nprovider = \"openai\"\nmax_output_tokens = 1\ncontext_window = 2\nmax_batch = 4\n";
        assert!(Config::from_toml(chat, "t").unwrap_err().to_string().contains("read only for `kind = \"embedding\"`"));
    }

    #[test]
    fn hosted_tools_drop_by_default_and_refuse_when_asked() {
        assert_eq!(Config::from_toml(GRADED, "t").unwrap().hosted_tools, HostedTools::Drop);
        assert_eq!(Config::from_toml(GRADED, "t").unwrap().hosted_tool_streams, HostedToolStreams::Native);
        let whole = Config::from_toml(&format!("hosted_tool_streams = \"whole\"\n{GRADED}"), "t").unwrap();
        assert_eq!(whole.hosted_tool_streams, HostedToolStreams::Whole);
        let live = Config::from_toml(&format!("hosted_tool_streams = \"live\"\n{GRADED}"), "t").unwrap();
        assert_eq!(live.hosted_tool_streams, HostedToolStreams::Live);
        assert!(Config::from_toml("hosted_tool_streams = \"partly\"\n", "t").is_err());
        let refuse = Config::from_toml(&format!("hosted_tools = \"refuse\"\n{GRADED}"), "t").unwrap();
        assert_eq!(refuse.hosted_tools, HostedTools::Refuse);
        let unknown = Config::from_toml("hosted_tools = \"forward\"\n", "t").unwrap_err().to_string();
        assert!(unknown.contains("forward"), "{unknown}");
    }

    #[test]
    fn effort_settings_are_read_and_checked() {
        let text = format!(
            "default_effort = \"high\"\nanswer_reserve = 100\nsafety_margin = 0\n[member.ana]\ndefault_effort = \"low\"\n{GRADED}"
        );
        let config = Config::from_toml(&text, "t").unwrap();
        assert_eq!((config.default_effort(), config.answer_reserve(), config.safety_margin()), (Effort::High, 100, 0));
        assert_eq!(config.members["ana"].default_effort, Some(Effort::Low));
        let defaults = Config::from_toml(GRADED, "t").unwrap();
        assert_eq!(
            (defaults.default_effort(), defaults.answer_reserve(), defaults.safety_margin()),
            (Effort::Medium, 4096, 512)
        );
        let unknown = Config::from_toml("default_effort = \"extreme\"\n", "t").unwrap_err().to_string();
        assert!(unknown.contains("unknown effort `extreme`"), "{unknown}");
        let unread = format!("{GRADED}thinking_budget = {{ high = 10 }}\n");
        let message = Config::from_toml(&unread, "t").unwrap_err().to_string();
        assert!(message.contains("`thinking_budget` is read only with `reasoning"), "{message}");
        Config::from_toml(&format!("{unread}reasoning = \"thinking\"\n"), "t").unwrap();
        let zero = Config::from_toml("answer_reserve = 0\n", "t").unwrap_err().to_string();
        assert!(zero.contains("must be positive"), "{zero}");
    }

    #[test]
    fn server_settings_default_to_the_documented_limits() {
        let server = Config::from_toml("", "t.toml").unwrap().server;
        assert_eq!(server.max_body_bytes(), 32 * 1024 * 1024);
        assert!(!server.allows_origin(b"https://app.example.com"));
        assert_eq!(server.header_timeout(), Duration::from_secs(10));
        assert_eq!(server.body_timeout(), Duration::from_secs(60));
        assert_eq!(server.idle_timeout(), Duration::from_secs(75));
        assert_eq!(server.max_connections(), 4096);
        assert_eq!(server.max_in_flight(), 2048);
        assert_eq!(server.stream_idle(), Duration::from_secs(60));
        assert_eq!(server.drain(), Duration::from_secs(25));
        assert_eq!(server.poll_before_sleep(), Duration::from_micros(50));
    }

    #[test]
    fn server_settings_are_read_and_checked() {
        let text = "[server]\nmax_body_bytes = 1000\ncors_origins = [\"https://app.example.com\"]\ndrain_secs = 0\n";
        let server = Config::from_toml(text, "t.toml").unwrap().server;
        assert_eq!(server.max_body_bytes(), 1000);
        assert!(server.allows_origin(b"https://app.example.com"));
        assert!(!server.allows_origin(b"https://app.example.com.evil.test"));
        assert_eq!(server.drain(), Duration::ZERO);
        for (micros, expected) in [(0, Duration::ZERO), (1000, Duration::from_millis(1))] {
            let text = format!("[server]\npoll_before_sleep_us = {micros}\n");
            assert_eq!(Config::from_toml(&text, "t.toml").unwrap().server.poll_before_sleep(), expected);
        }
        let too_long = Config::from_toml("[server]\npoll_before_sleep_us = 1001\n", "t.toml").unwrap_err().to_string();
        assert!(too_long.contains("poll_before_sleep_us") && too_long.contains("1000"), "{too_long}");
        for bad in ["[server]\nmax_in_flight = 0\n", "[server]\nheader_timeout_secs = 0\n"] {
            let message = Config::from_toml(bad, "t.toml").unwrap_err().to_string();
            assert!(message.contains("[server]") && message.contains("positive"), "{message}");
        }
        for origin in ["app.example.com", "https://app.example.com/", "https://a b"] {
            let text = format!("[server]\ncors_origins = [\"{origin}\"]\n");
            let message = Config::from_toml(&text, "t.toml").unwrap_err().to_string();
            assert!(message.contains("cors_origins"), "{message}");
        }
        let unknown = Config::from_toml("[server]\nmax_bodies = 1\n", "t.toml").unwrap_err().to_string();
        assert!(unknown.contains("max_bodies"), "{unknown}");
    }
}

#[cfg(test)]
mod role_fallback_tests {
    use crate::config::Config;

    fn roles(role: &str) -> Result<Config, String> {
        let text = format!(
            "[[model]]\nid = \"a\"\nprovider = \"openai\"\nmax_output_tokens = 10\ncontext_window = 100\n\
             [[model]]\nid = \"b\"\nprovider = \"openai\"\nmax_output_tokens = 10\ncontext_window = 100\n\
             [[model]]\nid = \"e\"\nprovider = \"openai\"\nkind = \"embedding\"\ncontext_window = 100\n\
             embedding_dimensions = 8\n{role}"
        );
        Config::from_toml(&text, "t").map_err(|error| error.to_string())
    }

    #[test]
    fn a_role_names_its_fallbacks_among_the_catalogs_chat_entries() {
        let config = roles("[role.chat]\nmodel = \"a\"\nfallback = [\"b\"]\n").unwrap();
        assert_eq!(config.roles["chat"].fallback, vec!["b".to_owned()]);
        let cases = [
            ("[role.chat]\nmodel = \"a\"\nfallback = [\"zz\"]\n", "fallback `zz` is not a chat entry"),
            ("[role.chat]\nmodel = \"a\"\nfallback = [\"e\"]\n", "fallback `e` is not a chat entry"),
            ("[role.chat]\nmodel = \"a\"\nfallback = [\"a\"]\n", "named twice (or is the role's own entry)"),
            ("[role.chat]\nmodel = \"a\"\nfallback = [\"b\", \"b\"]\n", "named twice"),
            ("[role.emb]\nmodel = \"e\"\nkind = \"embedding\"\nfallback = [\"b\"]\n", "read only for chat roles"),
        ];
        for (role, expected) in cases {
            let error = roles(role).unwrap_err();
            assert!(error.contains(expected), "{role}: {error}");
        }
    }
}
