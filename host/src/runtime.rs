//! The runtime's handle: a [`Weir`] built from a configuration (the catalog,
//! the loaded providers, admission, budgets, the ledger and the transport),
//! cheap to clone, that the call template runs on and the surfaces (the
//! library's callers, the gateway's routes) call through.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::Duration;

use crate::admission::{Admission, InProcessStore, RateStore};
use crate::answer_cache::{AnswerCache, AnswerCacheMeter};
use crate::compliance::ComplianceEnvelope;
use crate::identity::KeyRing;
use crate::ledger::Ledger;
use crate::plugin::{PluginEngine, ProviderRegistry};
use crate::record::{CallObserver, Observers};
use crate::routing::{DefaultPicker, ModelPicker, Roles};
use crate::transport::{
    AwsIdentity, ConfiguredIds, EnvSecretStore, HttpClient, ScopedSecrets, SecretCache, SecretStore, TokenCredentials,
    TransportSettings,
};

use crate::call::InputCount;
use crate::caller::Caller;
use crate::catalog::{Catalog, Config, ConfigError};
use crate::chat::{ChatRequest, ChatResponse};
use crate::error::{CallError, WeirError};
use crate::failure::Category;
use crate::metrics::Metrics;
use crate::stream::ChatStream;
use crate::{
    admin, budget, call, catalog, decision, fleet, ledger, plugin, reach, record, redact, retrieval, seal, stored,
    telemetry, transport, types,
};

/// Why a [`Weir`] could not be built.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("cannot start the component engine: {0:#}")]
    Engine(anyhow::Error),
    #[error("{0:#}")]
    Providers(anyhow::Error),
    #[error("cannot build the HTTP client: {0:#}")]
    Transport(anyhow::Error),
    /// A `[credentials.ID]` table's file cannot be read or does not parse.
    #[error("{origin}: {error}")]
    TokenCredential { origin: String, error: Box<transport::TokenSetupError> },
    /// The ledger exists but its spend could not be read back: budgets would
    /// start from zero, so the build fails instead.
    #[error("cannot rebuild the budgets from the ledger: {0}")]
    Budgets(ledger::ReadError),
    /// `[responses]`'s seal key cannot be read.
    #[error("{origin}: {error}")]
    SealKey { origin: String, error: seal::SealKeyError },
    /// `[ledger]`'s anchor key cannot be read.
    #[error("{origin}: {error}")]
    LedgerConfig { origin: String, error: ledger::LedgerConfigError },
    /// The ledger's tail fails its anchor check (`on_tampered = "refuse"`):
    /// budgets rebuilt from it would have lost the spend cut from it.
    #[error(
        "the ledger {path} is tampered: {reason}; not starting (run `weir ledger verify`; `[ledger] on_tampered = \"start\"` \
         starts anyway)"
    )]
    TamperedLedger { path: String, reason: String },
    /// The admin plane's state cannot be read, or conflicts with the file.
    #[error("the admin plane ({place}): {reason}")]
    Admin { place: String, reason: String },
}

/// A configured Weir: the catalog, the loaded providers, the transport. Cheap
/// to clone; share one per process.
#[derive(Clone)]
pub struct Weir {
    inner: Arc<Inner>,
}

struct Inner {
    config: Config,
    catalog: Catalog,
    /// The `[role.*]` table: what callers may name instead of a model.
    roles: Roles,
    /// Which entries may serve a role (the builder's, else [`DefaultPicker`]).
    picker: Arc<dyn ModelPicker>,
    /// Swapped whole by a reload; each call clones the `Arc` once and finishes on
    /// the components it started with.
    registry: RwLock<Arc<ProviderRegistry>>,
    admission: Admission,
    engine: PluginEngine,
    transport: HttpClient,
    secrets: Arc<dyn SecretStore>,
    /// The secrets read from `secrets`, kept between calls (see [`SecretCache`]).
    secret_cache: SecretCache,
    /// The secret ids the configuration names: the only ones `secrets` is asked for.
    secret_ids: ConfiguredIds,
    /// AWS's default chains, asked once and cached (credentials until they near expiry).
    aws: AwsIdentity,
    /// The `[credentials.*]` tables: tokens minted and kept per credential id.
    tokens: TokenCredentials,
    compliance: ComplianceEnvelope,
    providers_dir: PathBuf,
    /// The caller keys, swapped whole by [`Weir::replace_keys`].
    keys: RwLock<Arc<KeyRing>>,
    /// What the ring is built from: the config file's keys (replaced by a
    /// reload) and the admin plane's state (replaced by a change). One lock,
    /// so a reload and a change never build from a stale copy of the other.
    sources: Mutex<KeySources>,
    /// The admin plane's store: beside the ledger, so only with one.
    admin: Option<admin::AdminStore>,
    /// The fleet's channel of admin changes, under `[fleet]` with an admin plane.
    admin_notices: Option<fleet::AdminNotices>,
    /// The budgets the config file sets; the plane's are added to them.
    file_limits: HashMap<budget::Scope, budget::Limits>,
    /// Where key buckets live (the same store as the models').
    rate_store: Arc<dyn RateStore>,
    /// Who receives every call's opening and record (see [`record`]): the
    /// ledger first, then the builder's observers.
    observers: Observers,
    /// Bounds how many refused callers are recorded.
    refusals: record::RefusalWindow,
    /// The call ledger, when the config keeps one.
    ledger: Option<Ledger>,
    /// The stored responses: beside the ledger, so only with one (and not
    /// under `[responses] retention_secs = 0`).
    stored_responses: Option<stored::ResponseStore>,
    /// Complete answers kept for a repeat of the same request (`[cache]`).
    answer_cache: Option<AnswerCache>,
    /// The Prometheus exposition; one of the observers.
    /// `None` under `[metrics] enabled = false`.
    metrics: Option<Metrics>,
    /// The span exporter, when `[telemetry]` names a collector; one of the observers.
    telemetry: Option<Arc<telemetry::Telemetry>>,
    /// The budgets of keys, members and teams: held before each call, settled from its record.
    budgets: budget::BudgetBook,
    /// The key `POST /v1/responses` seals reasoning items with (see [`seal`]).
    reasoning_seal: seal::ReasoningSeal,
    /// The console's signed-in sessions (in this process's memory only).
    console_sessions: crate::identity::ConsoleSessions,
    /// The console's single sign-ons between the redirect to the provider and its answer.
    sign_ons: crate::identity::PendingSignOns,
}

/// The two sources of keys and budgets.
struct KeySources {
    file_keys: Vec<catalog::KeyEntry>,
    state: Arc<admin::State>,
}

impl std::fmt::Debug for Weir {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Weir").field("config", &self.inner.config.origin).finish_non_exhaustive()
    }
}

impl Weir {
    pub fn builder() -> WeirBuilder {
        WeirBuilder::default()
    }

    /// Runs one chat call through the funnel.
    pub async fn chat(&self, request: ChatRequest) -> Result<ChatResponse, CallError> {
        call::chat(self, request).await
    }

    /// Embeds texts: each returned L2-normalized at the deployment's one width
    /// (see [`retrieval::EmbedRequest`]), through the same admission, retry
    /// loop, record and budgets as chat.
    pub async fn embed(&self, request: retrieval::EmbedRequest) -> Result<retrieval::EmbedResponse, CallError> {
        call::embed(self, request).await
    }

    /// One text's vector: [`Weir::embed`] of a single input.
    pub async fn embed_vector(
        &self,
        model: &str,
        text: impl Into<String>,
        purpose: types::EmbeddingPurpose,
    ) -> Result<Vec<f32>, CallError> {
        let answer = self.embed(retrieval::EmbedRequest::new(model, vec![text.into()], purpose)).await?;
        let stamp = answer.stamp;
        answer.vectors.into_iter().next().ok_or_else(|| CallError {
            error: WeirError::UnusableAnswer { model: stamp.model.clone(), reason: "no vector came back".to_owned() },
            stamp,
        })
    }

    /// Orders documents by their relevance to a query.
    pub async fn rerank(&self, request: retrieval::RerankRequest) -> Result<retrieval::RerankResponse, CallError> {
        call::rerank(self, request).await
    }

    /// Answers typed questions about a state with a probability over the
    /// outcomes declared (see [`decision`]), through the same admission, retry
    /// loop, record and budgets as chat.
    pub async fn decide(&self, request: decision::DecideRequest) -> Result<decision::DecideResponse, CallError> {
        call::decide(self, request).await
    }

    /// Runs one chat call through the funnel as a stream. Resolves once the first
    /// output is in hand; everything before it is retried and gated like [`Weir::chat`].
    pub async fn chat_stream(&self, request: ChatRequest) -> Result<ChatStream, CallError> {
        call::chat_stream(self, request).await
    }

    /// The key reasoning items are sealed with on `POST /v1/responses`.
    pub fn reasoning_seal(&self) -> &seal::ReasoningSeal {
        &self.inner.reasoning_seal
    }

    /// The console's signed-in sessions (see `identity::console_sessions`).
    pub(crate) fn console_sessions(&self) -> &crate::identity::ConsoleSessions {
        &self.inner.console_sessions
    }

    /// The console's single sign-ons in flight (see `identity::sign_ons`).
    pub(crate) fn sign_ons(&self) -> &crate::identity::PendingSignOns {
        &self.inner.sign_ons
    }

    pub fn config(&self) -> &Config {
        &self.inner.config
    }

    pub fn catalog(&self) -> &Catalog {
        &self.inner.catalog
    }

    /// The configured roles.
    pub fn roles(&self) -> &Roles {
        &self.inner.roles
    }

    pub(crate) fn picker(&self) -> &dyn ModelPicker {
        self.inner.picker.as_ref()
    }

    /// The catalog id `name` (a role, or a catalog id) resolves to now for
    /// `caller`, resolved exactly as a library call would resolve it: the key,
    /// the envelope, the provider, the credential and the region (nothing is
    /// sent, nothing recorded).
    pub async fn resolve(&self, name: &str, caller: Option<Caller>) -> Result<String, WeirError> {
        call::preview(self, name, caller).await
    }

    /// `request`'s input tokens on the entry a call of it would resolve to
    /// now: the provider's own count where its component offers one, else
    /// Weir's estimate (see `POST /v1/messages/count_tokens`). Nothing is
    /// recorded or spent.
    pub async fn count_input_tokens(&self, request: &ChatRequest) -> Result<InputCount, WeirError> {
        call::count_input(self, request).await
    }

    /// The providers as of now.
    pub fn registry(&self) -> Arc<ProviderRegistry> {
        Arc::clone(&self.inner.registry.read().unwrap_or_else(PoisonError::into_inner))
    }

    /// Re-reads the providers folder and swaps the registry for new calls: files
    /// added, replaced or removed take effect; a file that fails keeps its previous
    /// version serving. Compiling is CPU work: call it off the async workers.
    pub fn reload_providers(&self) -> Result<Arc<ProviderRegistry>, BuildError> {
        let previous = self.registry();
        let allowed = self.inner.config.allowed_digests.as_deref();
        let mut next =
            ProviderRegistry::load_with(&self.inner.engine, Some(&self.inner.providers_dir), allowed, Some(&previous))
                .map_err(BuildError::Providers)?;
        // The links are made against the registry calls will use, before it serves.
        let routes = self.catalog().routes(&next, self.config());
        next.set_routes(routes);
        let next = Arc::new(next);
        self.log_refused_destinations(&next);
        *self.inner.registry.write().unwrap_or_else(PoisonError::into_inner) = Arc::clone(&next);
        tracing::info!(
            providers = next.providers().count(),
            rejected = next.failures().len(),
            dir = %self.inner.providers_dir.display(),
            "providers reloaded"
        );
        Ok(next)
    }

    /// A component that arrives by hot reload is not checked against the catalog
    /// as a start is (a bad drop-in must not stop the gateway): each entry it
    /// may not serve as configured is logged here, and its calls fail with
    /// [`WeirError::Reach`] naming the entry.
    fn log_refused_destinations(&self, registry: &ProviderRegistry) {
        for model in self.catalog().models() {
            let Some(route @ plugin::Route::Direct(provider)) = registry.route(&model.id) else { continue };
            // An entry with deployments goes only where they name, as at a start.
            let refused = if model.deployments.is_empty() {
                let source = &provider.component().source;
                reach::destination(model.reach(), provider.info(), provider.trust(), source)
                    .err()
                    .map(|reason| reason.to_string())
            } else {
                crate::catalog::check_deployments(model, route).err()
            };
            if let Some(reason) = refused {
                tracing::error!(model = %model.id, %reason, "after the reload, calls to this model will be refused");
            }
        }
    }

    /// Watches the providers folder, reloading when a `*.wasm` file is added,
    /// replaced or removed (polled every `every`: a folder of a few files costs a
    /// directory listing). Runs until the returned task is aborted.
    pub fn watch_providers(&self, every: Duration) -> tokio::task::JoinHandle<()> {
        let weir = self.clone();
        tokio::spawn(async move {
            let dir = weir.inner.providers_dir.clone();
            // No baseline: the folder may have changed between the registry's
            // build and this task's start, so the first look always reloads
            // (unchanged files are reused by digest, so that costs little). The
            // fingerprint is taken before each reload reads the folder, so a change
            // racing a reload is seen on the next look.
            let mut seen = None;
            loop {
                tokio::time::sleep(every).await;
                let now = Some(plugin::folder_fingerprint(&dir));
                if now == seen {
                    continue;
                }
                seen = now;
                let reloading = weir.clone();
                match tokio::task::spawn_blocking(move || reloading.reload_providers()).await {
                    Ok(Ok(_)) => {}
                    Ok(Err(error)) => {
                        tracing::error!(%error, "reloading providers failed; the previous ones keep serving")
                    }
                    Err(error) => tracing::error!(%error, "the reload task failed"),
                }
            }
        })
    }

    /// The caller keys as of now.
    pub fn keys(&self) -> Arc<KeyRing> {
        Arc::clone(&self.inner.keys.read().unwrap_or_else(PoisonError::into_inner))
    }

    /// Replaces the caller keys for new calls (a key removed is refused from
    /// the next call on; unchanged keys keep their buckets). A list that does not
    /// validate changes nothing and says why. The admin plane's keys stay; a
    /// list that defines one of their ids is refused.
    pub fn replace_keys(&self, entries: &[catalog::KeyEntry]) -> Result<Arc<KeyRing>, String> {
        let mut sources = self.inner.sources.lock().unwrap_or_else(PoisonError::into_inner);
        let next = self.build_ring(entries, &sources.state)?;
        sources.file_keys = entries.to_vec();
        Ok(next)
    }

    /// Builds and installs the ring of the file's `entries` and the plane's `state`.
    fn build_ring(&self, entries: &[catalog::KeyEntry], state: &admin::State) -> Result<Arc<KeyRing>, String> {
        let now = std::time::SystemTime::now();
        let runtime: Vec<_> =
            state.keys.values().filter(|key| key.revoked_ms.is_none()).map(|key| key.entry(now)).collect();
        let previous = self.keys();
        let next = Arc::new(KeyRing::with_runtime(entries, &runtime, Some(&previous), self.inner.rate_store.as_ref())?);
        *self.inner.keys.write().unwrap_or_else(PoisonError::into_inner) = Arc::clone(&next);
        Ok(next)
    }

    /// The config file's keys in force (as of its last good reload).
    pub fn file_keys(&self) -> Vec<catalog::KeyEntry> {
        self.inner.sources.lock().unwrap_or_else(PoisonError::into_inner).file_keys.clone()
    }

    /// The admin plane's store (`None` without a ledger).
    pub fn admin_store(&self) -> Option<&admin::AdminStore> {
        self.inner.admin.as_ref()
    }

    /// The fleet's channel of admin changes (`[fleet]` with an admin plane).
    pub fn admin_notices(&self) -> Option<&fleet::AdminNotices> {
        self.inner.admin_notices.as_ref()
    }

    /// The admin plane's state in force on this gateway.
    pub fn admin_state(&self) -> Arc<admin::State> {
        Arc::clone(&self.inner.sources.lock().unwrap_or_else(PoisonError::into_inner).state)
    }

    /// What a change by the admin key `actor` is checked against here.
    pub fn admin_context(&self, actor: &str) -> admin::Context {
        let sources = self.inner.sources.lock().unwrap_or_else(PoisonError::into_inner);
        let config = &self.inner.config;
        admin::Context {
            actor: actor.to_owned(),
            now: None,
            file_keys: sources.file_keys.iter().map(|key| key.id.clone()).collect(),
            file_members: config.members.keys().cloned().collect(),
            file_teams: config.teams.keys().cloned().collect(),
            models: self
                .inner
                .catalog
                .models()
                .map(|model| model.id.clone())
                .chain(self.inner.roles.iter().map(|role| role.name.clone()))
                .collect(),
        }
    }

    /// Applies the plane's `state` (blocking: a budget given at run time reads
    /// the period's spend back from the ledger's file): the ring and the
    /// budgets. A state older than the one in force is ignored. The ring is
    /// rebuilt whole, so an expired rotation grace ends here too.
    pub fn apply_admin(&self, state: admin::State) -> Result<(), String> {
        let mut sources = self.inner.sources.lock().unwrap_or_else(PoisonError::into_inner);
        if state.version < sources.state.version {
            return Ok(());
        }
        budget_clash(&self.inner.config, &state)?;
        self.build_ring(&sources.file_keys, &state)?;
        let added = self.inner.budgets.replace_limits(self.limits_with(&state));
        sources.state = Arc::new(state);
        drop(sources);
        if added.is_empty() || self.inner.budgets.is_shared() {
            return Ok(());
        }
        if let Some(ledger) = &self.inner.ledger {
            match ledger.reader() {
                Ok(reader) => budget::rebuild_scopes(&self.inner.budgets, &reader, &added)
                    .map_err(|error| format!("the new budgets' spend cannot be read back: {error}"))?,
                Err(ledger::ReadError::Missing(_)) => {}
                Err(error) => return Err(format!("the new budgets' spend cannot be read back: {error}")),
            }
        }
        Ok(())
    }

    /// Reads the store's newest change number and applies a newer state
    /// (blocking). Whether it applied one.
    pub fn refresh_admin(&self) -> Result<bool, String> {
        let Some(store) = &self.inner.admin else { return Ok(false) };
        let version = store.version().map_err(|error| error.to_string())?;
        if version == self.admin_state().version {
            return Ok(false);
        }
        let state = store.load().map_err(|error| error.to_string())?;
        self.apply_admin(state)?;
        Ok(true)
    }

    /// The file's budget limits with the plane's.
    fn limits_with(&self, state: &admin::State) -> HashMap<budget::Scope, budget::Limits> {
        limits_with(&self.inner.file_limits, state)
    }
}

impl Weir {
    /// Who receives every call's record.
    pub(crate) fn observers(&self) -> &Observers {
        &self.inner.observers
    }

    /// Records a gateway request refused for its caller key (up to
    /// [`record::REFUSALS_RECORDED_PER_SECOND`]; past it, only the log has it).
    /// Returns the record's call id when it was recorded.
    pub(crate) async fn record_refusal(
        &self,
        route: record::Route,
        category: Category,
        traceparent: Option<String>,
    ) -> Option<String> {
        if !self.inner.refusals.admit() {
            tracing::debug!(category = category.as_str(), "refused caller not recorded: over the recording rate");
            return None;
        }
        Some(call::refused(self, route, category, traceparent).await)
    }

    /// Whether records keep the prompt and the answer (`[ledger] record_content`).
    pub(crate) fn records_content(&self) -> bool {
        self.inner.config.ledger.as_ref().is_some_and(|ledger| ledger.record_content)
    }

    /// The budgets of keys, members and teams, and what each has spent and holds.
    pub fn budgets(&self) -> &budget::BudgetBook {
        &self.inner.budgets
    }

    /// The call ledger, when the config keeps one.
    pub fn ledger(&self) -> Option<&Ledger> {
        self.inner.ledger.as_ref()
    }

    /// Where `POST /v1/responses` keeps `store: true` responses: `None`
    /// without a ledger or under `[responses] retention_secs = 0`.
    pub fn stored_responses(&self) -> Option<&stored::ResponseStore> {
        self.inner.stored_responses.as_ref()
    }

    /// The answer cache, when `[cache]` is configured.
    pub fn answer_cache(&self) -> Option<&AnswerCache> {
        self.inner.answer_cache.as_ref()
    }

    /// Sends the spans still queued, when spans are exported (`weir serve`
    /// calls it once it has drained, so the last calls' spans are not lost).
    pub async fn flush_telemetry(&self) {
        if let Some(telemetry) = &self.inner.telemetry {
            telemetry.flush().await;
        }
    }

    /// Gives back the shared capacity this gateway leased and did not spend
    /// (`weir serve` calls it once it has drained, so the other gateways of
    /// the fleet can take it at once instead of waiting for the refill, or
    /// for an idle permit's lease to expire).
    pub async fn give_back_leased_capacity(&self) {
        self.inner.rate_store.give_back().await;
    }

    /// The metrics every call updates, rendered at `/metrics`; `None` under
    /// `[metrics] enabled = false`.
    pub fn metrics(&self) -> Option<&Metrics> {
        self.inner.metrics.as_ref()
    }

    pub fn admission(&self) -> &Admission {
        &self.inner.admission
    }

    /// A model's throttle coefficient (0.0–9.0), if the model exists.
    pub async fn throttle_coefficient(&self, model: &str) -> Option<f64> {
        match self.admission().gate(model) {
            Some(gate) => Some(gate.account().coefficient().await),
            None => None,
        }
    }

    pub fn providers_dir(&self) -> &std::path::Path {
        &self.inner.providers_dir
    }

    pub fn cache_dir(&self) -> Option<&std::path::Path> {
        self.inner.engine.cache_dir()
    }

    pub(crate) fn transport(&self) -> &HttpClient {
        &self.inner.transport
    }

    /// The secret store, answering only the ids the configuration names (see
    /// [`transport::ScopedSecrets`]): the entries' credentials, the trusted
    /// components' defaults as loaded now, and the AWS ids.
    pub(crate) fn secrets(&self) -> ScopedSecrets<'_> {
        let trusted = Arc::clone(self.registry().trusted_credential_ids());
        self.inner.secret_ids.scope(self.inner.secrets.as_ref(), &self.inner.secret_cache, trusted)
    }

    /// Drops the kept secret (or minted token) under `credential_id`: an
    /// upstream rejected it, so the next call reads the store (or mints) again.
    pub(crate) fn forget_secret(&self, credential_id: &str) {
        self.inner.secret_cache.forget(credential_id);
        self.inner.tokens.forget(credential_id);
    }

    pub(crate) fn aws_identity(&self) -> &AwsIdentity {
        &self.inner.aws
    }

    /// The minted credentials (`[credentials.*]`).
    pub(crate) fn tokens(&self) -> &TokenCredentials {
        &self.inner.tokens
    }

    /// The compliance envelope sealed when this Weir was built.
    pub fn compliance(&self) -> ComplianceEnvelope {
        self.inner.compliance
    }
}

/// A key reload ([`crate::identity::watch_keys`]) replaces this handle's ring.
impl crate::identity::KeyHolder for Weir {
    fn replace_keys(&self, entries: &[catalog::KeyEntry]) -> Result<Arc<KeyRing>, String> {
        Weir::replace_keys(self, entries)
    }
}

/// Builds a [`Weir`]. Every setting falls back to the config, then to a
/// documented default; none invents a credential, endpoint or budget.
#[derive(Default)]
pub struct WeirBuilder {
    config: Option<Config>,
    providers_dir: Option<PathBuf>,
    cache_dir: Option<Option<PathBuf>>,
    secrets: Option<Arc<dyn SecretStore>>,
    secret_refresh: Option<Duration>,
    rate_store: Option<Arc<dyn RateStore>>,
    transport: Option<TransportSettings>,
    compliance: Option<ComplianceEnvelope>,
    observers: Vec<Arc<dyn CallObserver>>,
    ledger_default: bool,
    picker: Option<Arc<dyn ModelPicker>>,
    clock: Option<Arc<dyn budget::Clock>>,
}

impl WeirBuilder {
    /// Adds an observer of every call's opening and closed record (after the
    /// ones the configuration sets up: the ledger, the metrics, the spans).
    pub fn observer(mut self, observer: Arc<dyn CallObserver>) -> Self {
        self.observers.push(observer);
        self
    }

    /// The picker that chooses which entries may serve a role (default:
    /// [`DefaultPicker`], the config's pins, then each grade's entries in order).
    pub fn picker(mut self, picker: Arc<dyn ModelPicker>) -> Self {
        self.picker = Some(picker);
        self
    }

    /// The clock budgets count their days and months by (default: the system's).
    pub fn budget_clock(mut self, clock: Arc<dyn budget::Clock>) -> Self {
        self.clock = Some(clock);
        self
    }

    /// Whether a config without a `[ledger]` table keeps a ledger (default
    /// false: a library records calls only when asked; `weir serve` does).
    pub fn ledger_default(mut self, on: bool) -> Self {
        self.ledger_default = on;
        self
    }

    /// The configuration (default: the embedded default catalog).
    pub fn config(mut self, config: Config) -> Self {
        self.config = Some(config);
        self
    }

    /// The folder of drop-in provider components (default: the config's
    /// `providers_dir`, else `providers/`).
    pub fn providers_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.providers_dir = Some(dir.into());
        self
    }

    /// Where precompiled components are cached; `None` compiles on every start.
    pub fn cache_dir(mut self, dir: Option<PathBuf>) -> Self {
        self.cache_dir = Some(dir);
        self
    }

    /// Where secrets come from (default: environment variables).
    pub fn secret_store(mut self, store: Arc<dyn SecretStore>) -> Self {
        self.secrets = Some(store);
        self
    }

    /// How long a secret read from the store is used before it is read again
    /// (default [`transport::DEFAULT_SECRET_REFRESH`]; `Duration::ZERO` reads
    /// the store on every call). A secret an upstream rejects is read again on
    /// the next call whatever this is.
    pub fn secret_refresh(mut self, refresh: Duration) -> Self {
        self.secret_refresh = Some(refresh);
        self
    }

    /// Where bucket levels and throttle coefficients live (default: this
    /// process's memory; a shared store lets a fleet share one budget).
    pub fn rate_store(mut self, store: Arc<dyn RateStore>) -> Self {
        self.rate_store = Some(store);
        self
    }

    /// The application's compliance envelope (default: the config's, else one
    /// that refuses data sharing). Fixed for the life of the built [`Weir`].
    pub fn compliance(mut self, envelope: ComplianceEnvelope) -> Self {
        self.compliance = Some(envelope);
        self
    }

    pub fn transport(mut self, settings: TransportSettings) -> Self {
        self.transport = Some(settings);
        self
    }

    /// Loads the components and resolves the catalog. CPU-heavy on a cold
    /// artifact cache: call it at startup, not per request.
    pub fn build(self) -> Result<Weir, BuildError> {
        self.prepare()?.start()
    }

    /// Everything [`build`](Self::build) checks (the config, the components,
    /// the catalog and its links, the keys, the budgets, the ledger's and the
    /// fleet's settings, the seal key, the credentials' files), with nothing
    /// opened: no ledger file, no connection, no listener. The [`Weir`] it
    /// returns records nothing and shares nothing (no ledger, no fleet spend
    /// read back): it is for commands that look at a configuration
    /// (`weir config check|show`), not for calls.
    pub fn inspect(self) -> Result<Weir, BuildError> {
        Ok(self.prepare()?.assemble(Recording::default()))
    }

    /// The checking half of the build: every step that can refuse a
    /// configuration and opens nothing.
    fn prepare(self) -> Result<Prepared, BuildError> {
        let config = match self.config {
            Some(config) => config,
            None => Config::embedded_default()?,
        };
        let providers_dir = self.providers_dir.unwrap_or_else(|| match &config.providers_dir {
            Some(dir) => config.resolve_path(dir),
            None => PathBuf::from("providers"),
        });
        let cache_dir = self.cache_dir.unwrap_or_else(|| default_cache_dir(&config));
        let engine = PluginEngine::with_slots(cache_dir, config.server.max_in_flight()).map_err(BuildError::Engine)?;
        let mut registry =
            ProviderRegistry::load_with(&engine, Some(&providers_dir), config.allowed_digests.as_deref(), None)
                .map_err(BuildError::Providers)?;
        let catalog = Catalog::resolve(&config, &mut registry)?;
        let metrics = config.metrics.enabled.then(|| Metrics::new(&config.metrics, &catalog));
        // The Redis client connects on first use, not here.
        let fleet_store = match &config.fleet {
            Some(fleet) => {
                fleet::check_limits(&config)
                    .map_err(|message| ConfigError::Invalid { origin: config.origin.clone(), message })?;
                let meter = metrics.clone().map(|metrics| Arc::new(metrics) as Arc<dyn fleet::FleetMeter>);
                let store = fleet::RedisStore::new(fleet, meter).map_err(|error| ConfigError::Invalid {
                    origin: config.origin.clone(),
                    message: error.to_string(),
                })?;
                Some(store)
            }
            None => None,
        };
        let rate_store: Arc<dyn RateStore> = match (self.rate_store, &fleet_store) {
            (Some(store), _) => store,
            (None, Some(fleet)) => Arc::new(fleet.clone()),
            (None, None) => Arc::new(InProcessStore),
        };
        let admission = Admission::new(&catalog, rate_store.as_ref());
        let settings = self.transport.unwrap_or_else(|| transport_settings(&config));
        let transport = HttpClient::new(settings).map_err(BuildError::Transport)?;
        let secrets = self.secrets.unwrap_or_else(|| Arc::new(EnvSecretStore));
        let secret_ids = ConfiguredIds::new(configured_secret_ids(&config));
        // Reads the credentials' key files; a token is minted at the first call.
        let tokens = TokenCredentials::from_config(&config)
            .map_err(|error| BuildError::TokenCredential { origin: config.origin.clone(), error: Box::new(error) })?;
        let compliance = self.compliance.unwrap_or(config.compliance);
        let keys = KeyRing::new(&config.keys, None, rate_store.as_ref())
            .map_err(|message| ConfigError::Invalid { origin: config.origin.clone(), message })?;
        check_shared_ledger(&config)?;
        let ledger_settings = ledger::ledger_config(&config, self.ledger_default)
            .map_err(|error| BuildError::LedgerConfig { origin: config.origin.clone(), error })?;
        // Its exporter starts on the first record's tokio runtime.
        let telemetry = telemetry::Telemetry::start(&config.telemetry)
            .map_err(|message| ConfigError::Invalid { origin: config.origin.clone(), message })?
            .map(Arc::new);
        let clock = self.clock.unwrap_or_else(|| Arc::new(budget::SystemClock));
        let budgets = budget::book(&config, clock)
            .map_err(|message| ConfigError::Invalid { origin: config.origin.clone(), message })?;
        let reasoning_seal = seal::ReasoningSeal::from_config(&config)
            .map_err(|error| BuildError::SealKey { origin: config.origin.clone(), error })?;
        let answer_cache = match &config.cache {
            Some(settings) => {
                let meter = metrics.clone().map(|metrics| Arc::new(metrics) as Arc<dyn AnswerCacheMeter>);
                let cache = AnswerCache::new(settings, config.fleet.as_ref(), meter)
                    .map_err(|message| ConfigError::Invalid { origin: config.origin.clone(), message })?;
                Some(cache)
            }
            None => None,
        };
        let roles = Roles::from_config(&config);
        let picker = self.picker.unwrap_or_else(|| Arc::new(DefaultPicker::new(&config)));
        Ok(Prepared {
            config,
            catalog,
            roles,
            picker,
            registry,
            admission,
            engine,
            transport,
            secrets,
            secret_refresh: self.secret_refresh,
            secret_ids,
            tokens,
            compliance,
            providers_dir,
            keys,
            rate_store,
            fleet_store,
            ledger_settings,
            answer_cache,
            metrics,
            telemetry,
            budgets,
            reasoning_seal,
            observers: self.observers,
        })
    }
}

/// A configuration every check of the build has passed, nothing opened yet.
struct Prepared {
    config: Config,
    catalog: Catalog,
    roles: Roles,
    picker: Arc<dyn ModelPicker>,
    registry: ProviderRegistry,
    admission: Admission,
    engine: PluginEngine,
    transport: HttpClient,
    secrets: Arc<dyn SecretStore>,
    secret_refresh: Option<Duration>,
    secret_ids: ConfiguredIds,
    tokens: TokenCredentials,
    compliance: ComplianceEnvelope,
    providers_dir: PathBuf,
    keys: KeyRing,
    rate_store: Arc<dyn RateStore>,
    fleet_store: Option<fleet::RedisStore>,
    ledger_settings: Option<ledger::LedgerConfig>,
    answer_cache: Option<AnswerCache>,
    metrics: Option<Metrics>,
    telemetry: Option<Arc<telemetry::Telemetry>>,
    budgets: budget::BudgetBook,
    reasoning_seal: seal::ReasoningSeal,
    /// The builder's observers (after the configuration's).
    observers: Vec<Arc<dyn CallObserver>>,
}

/// What a started Weir records into: the ledger and the responses stored
/// beside it. An inspecting Weir has neither.
#[derive(Default)]
struct Recording {
    ledger: Option<Ledger>,
    stored_responses: Option<stored::ResponseStore>,
    /// The admin plane's store (beside the ledger) and its state at start.
    admin: Option<admin::AdminStore>,
    admin_state: admin::State,
}

impl Prepared {
    /// The opening half of the build: the ledger file is opened (and its tail
    /// checked), the budgets are shared through the fleet and read back.
    fn start(mut self) -> Result<Weir, BuildError> {
        let meter = self.metrics.as_ref().map(Metrics::ledger_meter);
        let ledger = self.ledger_settings.clone().map(|settings| Ledger::open(settings, meter));
        if let Some(ledger) = &ledger {
            refuse_tampered(ledger)?;
        }
        // Under `[fleet]` the fleet's spend lives in Redis (this gateway's
        // ledger holds only its own calls), so nothing is read back here; with
        // the fleet's PostgreSQL ledger, an account Redis does not hold is
        // seeded from it at its first hold.
        if let Some(fleet) = &self.fleet_store {
            let shared = match ledger.as_ref().and_then(Ledger::postgres) {
                Some(target) => fleet.budgets().seeded_from(Arc::new(budget::FleetLedgerSpend::new(target.clone()))),
                None => fleet.budgets(),
            };
            self.budgets.share_through(shared, fleet.fleet_size());
        }
        // The admin plane's keys and budgets join the file's before the
        // spend is read back, so their budgets count it too.
        let admin = ledger.as_ref().map(|ledger| {
            admin::AdminStore::new(ledger.path(), ledger.postgres().cloned()).keyed(ledger.anchor_key().cloned())
        });
        let mut admin_state = admin::State::default();
        if let Some(store) = &admin {
            admin_state = load_admin(store, &self.config)?;
            let now = std::time::SystemTime::now();
            let runtime: Vec<_> =
                admin_state.keys.values().filter(|key| key.revoked_ms.is_none()).map(|key| key.entry(now)).collect();
            self.keys = KeyRing::with_runtime(&self.config.keys, &runtime, None, self.rate_store.as_ref())
                .map_err(|reason| BuildError::Admin { place: store.describe(), reason })?;
            self.budgets.replace_limits(limits_with(&budget::file_limits(&self.config), &admin_state));
        }
        // A restart resets no budget: the current periods' spend is read back.
        if let Some(ledger) = ledger.as_ref().filter(|_| !self.budgets.is_empty() && !self.budgets.is_shared()) {
            rebuild_budgets(&self.budgets, ledger)?;
        }
        let stored_responses = ledger
            .as_ref()
            .map(|ledger| stored::ResponseStore::new(ledger.path(), ledger.postgres().cloned(), &self.config.responses))
            .filter(stored::ResponseStore::enabled);
        Ok(self.assemble(Recording { ledger, stored_responses, admin, admin_state }))
    }

    fn assemble(self, recording: Recording) -> Weir {
        let Recording { ledger, stored_responses, admin, admin_state } = recording;
        let file_limits = budget::file_limits(&self.config);
        let file_keys = self.config.keys.clone();
        let admin_notices = admin.as_ref().and(self.fleet_store.as_ref()).map(fleet::RedisStore::admin_notices);
        // The configuration's observers first — the ledger (whose commit a
        // call waits for), the metrics, the spans when `[telemetry]` names a
        // collector — then the builder's.
        let mut observers = Observers::default();
        if let Some(ledger) = &ledger {
            observers.push(Arc::new(ledger.clone()));
        }
        if let Some(metrics) = &self.metrics {
            observers.push(Arc::new(metrics.clone()));
        }
        if let Some(telemetry) = &self.telemetry {
            observers.push(Arc::clone(telemetry) as Arc<dyn CallObserver>);
        }
        for observer in self.observers {
            observers.push(observer);
        }
        let inner = Inner {
            config: self.config,
            catalog: self.catalog,
            roles: self.roles,
            picker: self.picker,
            registry: RwLock::new(Arc::new(self.registry)),
            admission: self.admission,
            engine: self.engine,
            transport: self.transport,
            secrets: self.secrets,
            secret_cache: SecretCache::new(self.secret_refresh.unwrap_or(transport::DEFAULT_SECRET_REFRESH)),
            secret_ids: self.secret_ids,
            aws: AwsIdentity::default(),
            tokens: self.tokens,
            compliance: self.compliance,
            providers_dir: self.providers_dir,
            keys: RwLock::new(Arc::new(self.keys)),
            sources: Mutex::new(KeySources { file_keys, state: Arc::new(admin_state) }),
            admin,
            admin_notices,
            file_limits,
            rate_store: self.rate_store,
            observers,
            refusals: record::RefusalWindow::default(),
            ledger,
            stored_responses,
            answer_cache: self.answer_cache,
            metrics: self.metrics,
            telemetry: self.telemetry,
            budgets: self.budgets,
            reasoning_seal: self.reasoning_seal,
            console_sessions: crate::identity::ConsoleSessions::default(),
            sign_ons: crate::identity::PendingSignOns::default(),
        };
        Weir { inner: Arc::new(inner) }
    }
}

/// The secret-store ids a configuration names: its entries' and deployments'
/// credentials, the client secrets `[credentials.*]` tables read, and the
/// console's single sign-on client secret. The only ids the store is ever asked for.
pub(crate) fn configured_secret_ids(config: &Config) -> impl Iterator<Item = &str> {
    let sign_on_secret = config.console.oidc.as_ref().map(|oidc| oidc.client_secret.as_str());
    let client_secrets = config.token_credentials.values().filter_map(|spec| spec.secret_id()).chain(sign_on_secret);
    let deployment_secrets =
        config.models.iter().flat_map(|model| &model.deployments).filter_map(|d| d.credential.as_deref());
    config.models.iter().filter_map(|model| model.credential.as_deref()).chain(deployment_secrets).chain(client_secrets)
}

/// `[ledger] postgres_url` parses (its error shown without the password),
/// and `postgres_ca` is set only beside it.
fn check_shared_ledger(config: &Config) -> Result<(), ConfigError> {
    let Some(settings) = &config.ledger else { return Ok(()) };
    let invalid = |message: String| ConfigError::Invalid { origin: config.origin.clone(), message };
    match (&settings.postgres_url, &settings.postgres_ca) {
        (None, Some(_)) => Err(invalid(
            "`[ledger] postgres_ca` is set without `postgres_url`: there is no PostgreSQL to trust it for".to_owned(),
        )),
        (Some(url), _) => ledger::check_postgres_url(url)
            .map_err(|error| invalid(format!("{error} (in `{}`)", redact::redacted(url)))),
        (None, None) => Ok(()),
    }
}

/// Fails the build when the ledger's tail failed its anchor check at open
/// (see [`ledger::TailCheck`]) and `[ledger] on_tampered` is `refuse`: the
/// budgets rebuilt from it would miss the spend cut from it, and new rows
/// would be chained onto it. Under `start` the ledger has logged it.
fn refuse_tampered(ledger: &Ledger) -> Result<(), BuildError> {
    match (ledger.tail_check(), ledger.on_tampered()) {
        (Some(ledger::TailCheck::Tampered(reason)), catalog::LedgerOnTampered::Refuse) => {
            Err(BuildError::TamperedLedger { path: ledger.path().display().to_string(), reason: reason.clone() })
        }
        _ => Ok(()),
    }
}

/// Reads the current periods' spend back into `budgets`: from the fleet's
/// PostgreSQL ledger when the ledger ships to one (this file's rows shipped
/// first, so none is missing there), else, or when PostgreSQL cannot be
/// reached (logged), from this gateway's file. A file not created yet has
/// nothing to add.
fn rebuild_budgets(budgets: &budget::BudgetBook, ledger: &Ledger) -> Result<(), BuildError> {
    if let Some(target) = ledger.postgres() {
        ledger.ship_pending(SHIP_BEFORE_REBUILD);
        // A thread of its own: the blocking client must not run on a caller's
        // tokio worker (`build` may be called from one).
        let from_shared = std::thread::scope(|scope| {
            scope
                .spawn(|| ledger::SharedReader::connect(target).and_then(|reader| budget::rebuild(budgets, &reader)))
                .join()
        });
        match from_shared {
            Ok(Ok(())) => return Ok(()),
            Ok(Err(error)) => tracing::error!(%error,
                "cannot rebuild the budgets from the fleet's ledger; reading this gateway's own file"),
            Err(_) => tracing::error!(
                "the budgets' rebuild from the fleet's ledger panicked; reading this gateway's own file"
            ),
        }
    }
    match ledger.reader() {
        Ok(reader) => budget::rebuild(budgets, &reader).map_err(BuildError::Budgets),
        Err(ledger::ReadError::Missing(_)) => Ok(()),
        Err(error) => Err(BuildError::Budgets(error)),
    }
}

/// The admin plane's state at start, read on a thread of its own (the
/// blocking PostgreSQL client must not run on a tokio worker). A member or
/// team budget the file also defines is refused.
fn load_admin(store: &admin::AdminStore, config: &Config) -> Result<admin::State, BuildError> {
    let failed = |reason: String| BuildError::Admin { place: store.describe(), reason };
    let loaded = std::thread::scope(|scope| scope.spawn(|| store.load()).join());
    let state = match loaded {
        // A store that cannot be read (the fleet's PostgreSQL not up yet, an
        // unwritable folder, as the ledger's own file may be) does not stop
        // the gateway: it starts with the file's keys alone, failing closed,
        // and the poll applies the plane once it can be read.
        Ok(Err(error)) => {
            tracing::error!(%error, "the admin plane cannot be read yet: only the config file's keys are in force until it is");
            admin::State::default()
        }
        Ok(Ok(state)) => state,
        Err(_) => return Err(failed("reading it panicked".to_owned())),
    };
    budget_clash(config, &state).map_err(failed)?;
    Ok(state)
}

/// A member or team budget both the file and the plane define.
fn budget_clash(config: &Config, state: &admin::State) -> Result<(), String> {
    if let Some(name) = state.members.keys().find(|name| config.members.contains_key(*name)) {
        return Err(format!(
            "member `{name}` has a budget both in the config file and through the admin API; remove one of them"
        ));
    }
    if let Some(name) = state.teams.keys().find(|name| config.teams.contains_key(*name)) {
        return Err(format!(
            "team `{name}` has a budget both in the config file and through the admin API; remove one of them"
        ));
    }
    Ok(())
}

/// `file`'s budget limits with the plane's `state`'s.
fn limits_with(
    file: &HashMap<budget::Scope, budget::Limits>,
    state: &admin::State,
) -> HashMap<budget::Scope, budget::Limits> {
    let mut limits = file.clone();
    limits.extend(state.limits());
    limits
}

/// How long a starting gateway waits for its file's rows to reach
/// PostgreSQL before the budgets are read from there.
const SHIP_BEFORE_REBUILD: Duration = Duration::from_secs(5);

/// `cache_dir` from the config, else `WEIR_CACHE_DIR`, else the user's cache
/// folder (`$XDG_CACHE_HOME/weir`, `~/.cache/weir`), else none.
pub fn default_cache_dir(config: &Config) -> Option<PathBuf> {
    if let Some(dir) = &config.cache_dir {
        return Some(config.resolve_path(dir));
    }
    let env_dir = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty()).map(PathBuf::from);
    env_dir("WEIR_CACHE_DIR")
        .or_else(|| env_dir("XDG_CACHE_HOME").map(|d| d.join("weir")))
        .or_else(|| env_dir("HOME").map(|d| d.join(".cache").join("weir")))
}

fn transport_settings(config: &Config) -> TransportSettings {
    let defaults = TransportSettings::default();
    TransportSettings {
        connect_timeout: config.connect_timeout_secs.map_or(defaults.connect_timeout, Duration::from_secs),
        read_timeout: config.read_timeout_secs.map_or(defaults.read_timeout, Duration::from_secs),
        attempt_timeout: config.attempt_timeout_secs.map_or(defaults.attempt_timeout, Duration::from_secs),
        ..defaults
    }
}
