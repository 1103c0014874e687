//! Every provider this process can call, by key: the embedded components first,
//! then each `*.wasm` in the providers folder, a file overriding an embedded
//! provider with the same key. A file that fails to load is reported with its
//! path and reason, and every other provider keeps working.
//!
//! Each provider carries its component's [`Trust`]: embedded components and
//! files whose digest is in `allowed_digests` are trusted; any other file is
//! not, and may not take over a key an embedded component serves (the
//! embedded one keeps serving, the file is listed as rejected for that key).
//!
//! A registry is immutable; reloading builds the next one from the folder as it
//! is now. Files whose digest did not change are reused without compiling; a
//! file that now fails keeps its previous version serving; an optional
//! allow-list of digests pins which files may load at all.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::embedded::EMBEDDED;
use super::engine::{ComponentSource, LoadedComponent, PluginEngine, component_digest};
use super::provider::Provider;
use crate::reach::Trust;

pub use crate::config::DECISION_PROVIDER;

/// A component file that could not be loaded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadFailure {
    pub path: PathBuf,
    pub reason: String,
}

impl std::fmt::Display for LoadFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.path.display(), self.reason)
    }
}

/// How one catalog entry reaches a provider of this registry.
#[derive(Debug, Clone)]
pub enum Route {
    /// The provider the entry names.
    Direct(Arc<Provider>),
    /// Another provider, linked because the entry's own is not loaded (see
    /// [`crate::Catalog::resolve`]).
    Linked(Arc<Provider>),
    /// No provider: calls fail as `provider_unavailable`; the reason is shown.
    Unavailable(String),
    /// No component: the host speaks the entry's wire itself (a decision
    /// entry, `provider = "decision"`; see [`crate::decision`]).
    Host,
}

impl Route {
    /// The provider calls go to, if any.
    pub fn provider(&self) -> Option<&Arc<Provider>> {
        match self {
            Self::Direct(provider) | Self::Linked(provider) => Some(provider),
            Self::Unavailable(_) | Self::Host => None,
        }
    }
}

/// The providers by key, and what failed to load.
#[derive(Debug, Default)]
pub struct ProviderRegistry {
    providers: BTreeMap<String, Arc<Provider>>,
    /// Each catalog entry's route, by model id, computed against this registry
    /// (see [`crate::Catalog::resolve`]): a reload computes its own, so a call
    /// that holds a registry also holds the links made for it.
    routes: HashMap<String, Route>,
    /// The embedded components, reused as they are by every reload.
    embedded: Vec<Arc<LoadedComponent>>,
    /// The folder's components by path, to reuse and to fall back on.
    files: BTreeMap<PathBuf, Arc<LoadedComponent>>,
    failures: Vec<LoadFailure>,
    /// The default credential ids of trusted providers: the secret ids a
    /// component (rather than the configuration) may name.
    trusted_credential_ids: Arc<BTreeSet<String>>,
}

impl ProviderRegistry {
    /// Loads the embedded components, then the folder's (if it exists).
    pub fn load(engine: &PluginEngine, providers_dir: Option<&Path>) -> anyhow::Result<Self> {
        Self::load_with(engine, providers_dir, None, None)
    }

    /// Like [`ProviderRegistry::load`], reusing unchanged files from `previous`
    /// and keeping the previous version of any file that now fails, and admitting
    /// folder files only when their digest is in `allowed` (if given).
    pub fn load_with(
        engine: &PluginEngine,
        providers_dir: Option<&Path>,
        allowed: Option<&[String]>,
        previous: Option<&ProviderRegistry>,
    ) -> anyhow::Result<Self> {
        let embedded = match previous {
            Some(previous) => previous.embedded.clone(),
            None => load_embedded(engine)?,
        };
        let mut registry = Self { embedded, ..Self::default() };
        for component in registry.embedded.clone() {
            registry.insert(component, Trust::Embedded);
        }
        if let Some(dir) = providers_dir {
            registry.load_folder(engine, dir, allowed, previous);
        }
        registry.trusted_credential_ids = Arc::new(
            registry
                .providers
                .values()
                .filter(|provider| provider.trust().honours_defaults())
                .filter_map(|provider| provider.info().credential.default_credential_id().map(str::to_owned))
                .collect(),
        );
        Ok(registry)
    }

    fn load_folder(
        &mut self,
        engine: &PluginEngine,
        dir: &Path,
        allowed: Option<&[String]>,
        previous: Option<&ProviderRegistry>,
    ) {
        // With an allow-list, every file that loads passed it; without one, none is vouched for.
        let trust = if allowed.is_some() { Trust::AllowListed } else { Trust::Untrusted };
        for path in wasm_files(dir, &mut self.failures) {
            let earlier = previous.and_then(|registry| registry.files.get(&path));
            match load_file(engine, &path, allowed, earlier) {
                Ok(component) => {
                    self.files.insert(path, Arc::clone(&component));
                    self.insert(component, trust);
                }
                Err(reason) => {
                    tracing::error!(path = %path.display(), %reason, "provider component rejected");
                    if let Some(earlier) = earlier {
                        tracing::warn!(path = %path.display(), "the previous version keeps serving");
                        self.files.insert(path.clone(), Arc::clone(earlier));
                        self.insert(Arc::clone(earlier), trust);
                    }
                    self.failures.push(LoadFailure { path, reason });
                }
            }
        }
    }

    fn insert(&mut self, component: Arc<LoadedComponent>, trust: Trust) {
        for info in &component.providers {
            if info.key == DECISION_PROVIDER {
                let reason =
                    format!("provider key `{}` is the host's own decision wire: no component may declare it", info.key);
                self.reject(&component, reason);
                continue;
            }
            if trust == Trust::Untrusted && self.is_embedded_key(&info.key) {
                let reason = format!(
                    "provider key `{}` is served by an embedded component, and a file not in `allowed_digests` may \
                     not replace it (the embedded one keeps serving)",
                    info.key
                );
                self.reject(&component, reason);
                continue;
            }
            if let Some(previous) = self.providers.get(&info.key) {
                tracing::info!(
                    provider = %info.key,
                    replaced = %previous.component().source,
                    by = %component.source,
                    "provider overridden"
                );
            }
            let provider = Arc::new(Provider::new(info.clone(), Arc::clone(&component), trust));
            self.providers.insert(info.key.clone(), provider);
        }
    }

    /// One provider key of `component` is refused; its other keys may load.
    fn reject(&mut self, component: &LoadedComponent, reason: String) {
        tracing::error!(path = %component.source, %reason, "provider key rejected");
        let path = match &component.source {
            super::engine::ComponentSource::File(path) => path.clone(),
            super::engine::ComponentSource::Embedded(name) => PathBuf::from(name),
        };
        self.failures.push(LoadFailure { path, reason });
    }

    fn is_embedded_key(&self, key: &str) -> bool {
        self.embedded.iter().any(|component| component.providers.iter().any(|info| info.key == key))
    }

    /// The default credential ids of the trusted providers loaded now.
    pub fn trusted_credential_ids(&self) -> &Arc<BTreeSet<String>> {
        &self.trusted_credential_ids
    }

    pub fn get(&self, key: &str) -> Option<&Arc<Provider>> {
        self.providers.get(key)
    }

    /// The provider a catalog entry's calls go to: its own, or the one it is
    /// linked to. The one accessor the call path uses: a map lookup, with no
    /// component call and no allocation.
    pub fn provider_for(&self, model_id: &str) -> Option<&Arc<Provider>> {
        self.routes.get(model_id).and_then(Route::provider)
    }

    /// A catalog entry's route (`None` for an id this registry was not routed for).
    pub fn route(&self, model_id: &str) -> Option<&Route> {
        self.routes.get(model_id)
    }

    /// Installs the catalog's routes, computed against this registry.
    pub(crate) fn set_routes(&mut self, routes: HashMap<String, Route>) {
        self.routes = routes;
    }

    pub fn providers(&self) -> impl Iterator<Item = &Arc<Provider>> {
        self.providers.values()
    }

    pub fn failures(&self) -> &[LoadFailure] {
        &self.failures
    }
}

fn load_embedded(engine: &PluginEngine) -> anyhow::Result<Vec<Arc<LoadedComponent>>> {
    EMBEDDED
        .iter()
        .map(|embedded| {
            let name = embedded.name;
            engine
                .load(ComponentSource::Embedded(name), embedded.bytes, embedded.digest.to_owned())
                .map(Arc::new)
                .map_err(|reason| anyhow::anyhow!("embedded provider component `{name}` {reason}"))
        })
        .collect()
}

/// One folder file: reused when its digest is unchanged, refused when the
/// allow-list does not name it, else compiled (or taken from the artifact cache).
fn load_file(
    engine: &PluginEngine,
    path: &Path,
    allowed: Option<&[String]>,
    earlier: Option<&Arc<LoadedComponent>>,
) -> Result<Arc<LoadedComponent>, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("cannot be read: {e}"))?;
    let digest = component_digest(&bytes);
    if let Some(allowed) = allowed
        && !allowed.iter().any(|pinned| pinned.eq_ignore_ascii_case(&digest))
    {
        return Err(format!("digest {digest} is not in the configured allow-list"));
    }
    if let Some(earlier) = earlier.filter(|earlier| earlier.digest == digest) {
        return Ok(Arc::clone(earlier));
    }
    engine.load(ComponentSource::File(path.to_path_buf()), &bytes, digest).map(Arc::new)
}

/// The folder's `*.wasm` files in name order. A missing folder holds none; an
/// unreadable one is a failure on record.
fn wasm_files(dir: &Path, failures: &mut Vec<LoadFailure>) -> Vec<PathBuf> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Vec::new(),
        Err(e) => {
            failures.push(LoadFailure { path: dir.to_path_buf(), reason: format!("cannot be listed: {e}") });
            return Vec::new();
        }
    };
    let mut files: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .filter(|path| path.is_file() && path.extension().is_some_and(|ext| ext == "wasm"))
        .collect();
    files.sort();
    files
}

/// What the folder looks like now: names, sizes and modification times. A change
/// in it is what makes the watcher reload.
pub fn folder_fingerprint(dir: &Path) -> Vec<(PathBuf, u64, Option<std::time::SystemTime>)> {
    wasm_files(dir, &mut Vec::new())
        .into_iter()
        .map(|path| {
            let metadata = std::fs::metadata(&path).ok();
            let size = metadata.as_ref().map_or(0, std::fs::Metadata::len);
            let modified = metadata.and_then(|m| m.modified().ok());
            (path, size, modified)
        })
        .collect()
}
