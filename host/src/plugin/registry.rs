//! Every provider this process can call, by key: the embedded components first,
//! then each `*.wasm` in the providers folder, a file overriding an embedded
//! provider with the same key. A file that fails to load is reported with its
//! path and reason, and every other provider keeps working.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::embedded::EMBEDDED;
use super::engine::{ComponentSource, LoadedComponent, PluginEngine};
use super::provider::Provider;

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

/// The providers by key, and what failed to load.
#[derive(Debug, Default)]
pub struct ProviderRegistry {
    providers: BTreeMap<String, Provider>,
    failures: Vec<LoadFailure>,
}

impl ProviderRegistry {
    /// Loads the embedded components, then the folder's (if it exists).
    pub fn load(engine: &PluginEngine, providers_dir: Option<&Path>) -> anyhow::Result<Self> {
        let mut registry = Self::default();
        for (name, bytes) in EMBEDDED {
            let component = engine
                .load(ComponentSource::Embedded(name), bytes)
                .map_err(|reason| anyhow::anyhow!("embedded provider component `{name}` {reason}"))?;
            registry.insert(component);
        }
        if let Some(dir) = providers_dir {
            registry.load_folder(engine, dir);
        }
        Ok(registry)
    }

    fn load_folder(&mut self, engine: &PluginEngine, dir: &Path) {
        for path in wasm_files(dir, &mut self.failures) {
            let loaded = std::fs::read(&path)
                .map_err(|e| format!("cannot be read: {e}"))
                .and_then(|bytes| engine.load(ComponentSource::File(path.clone()), &bytes));
            match loaded {
                Ok(component) => self.insert(component),
                Err(reason) => {
                    tracing::error!(path = %path.display(), %reason, "provider component rejected");
                    self.failures.push(LoadFailure { path, reason });
                }
            }
        }
    }

    fn insert(&mut self, component: LoadedComponent) {
        let component = Arc::new(component);
        for info in &component.providers {
            if let Some(previous) = self.providers.get(&info.key) {
                tracing::info!(
                    provider = %info.key,
                    replaced = %previous.component().source,
                    by = %component.source,
                    "provider overridden"
                );
            }
            let provider = Provider::new(info.clone(), Arc::clone(&component));
            self.providers.insert(info.key.clone(), provider);
        }
    }

    pub fn get(&self, key: &str) -> Option<&Provider> {
        self.providers.get(key)
    }

    pub fn providers(&self) -> impl Iterator<Item = &Provider> {
        self.providers.values()
    }

    pub fn failures(&self) -> &[LoadFailure] {
        &self.failures
    }
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
