//! Precompiled component artifacts on disk, keyed by the component's digest and
//! the engine's compatibility hash, so each component is compiled once per
//! machine instead of once per start (a cold compile costs ~0.2 s in a release
//! host and far more in a debug one; a cache hit costs well under a millisecond).

use std::hash::{DefaultHasher, Hash, Hasher};
use std::path::{Path, PathBuf};

use wasmtime::Engine;
use wasmtime::component::Component;

/// A directory of `<digest>-<engine>.cwasm` files.
#[derive(Debug, Clone)]
pub struct ArtifactCache {
    dir: PathBuf,
    engine_tag: String,
}

impl ArtifactCache {
    pub fn new(dir: PathBuf, engine: &Engine) -> Self {
        let mut hasher = DefaultHasher::new();
        engine.precompile_compatibility_hash().hash(&mut hasher);
        Self { dir, engine_tag: format!("{:016x}", hasher.finish()) }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The compiled component: from the cache when present and loadable, else
    /// compiled now and written back (a write failure only costs the next start).
    pub fn load_or_compile(&self, engine: &Engine, bytes: &[u8], digest: &str) -> wasmtime::Result<Component> {
        let path = self.dir.join(format!("{digest}-{}.cwasm", self.engine_tag));
        if path.is_file() {
            match deserialize(engine, &path) {
                Ok(component) => return Ok(component),
                Err(error) => {
                    tracing::warn!(path = %path.display(), %error, "discarding unusable precompiled artifact")
                }
            }
        }
        let component = Component::new(engine, bytes)?;
        if let Err(error) = self.store(&component, &path) {
            tracing::warn!(dir = %self.dir.display(), %error, "cannot write precompiled artifact");
        }
        Ok(component)
    }

    fn store(&self, component: &Component, path: &Path) -> anyhow::Result<()> {
        std::fs::create_dir_all(&self.dir)?;
        let serialized = component.serialize()?;
        let temporary = tempfile_in(&self.dir, path)?;
        std::fs::write(&temporary, serialized)?;
        std::fs::rename(&temporary, path)?;
        Ok(())
    }
}

/// A unique sibling name, so concurrent writers never see each other's halves.
fn tempfile_in(dir: &Path, path: &Path) -> anyhow::Result<PathBuf> {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("artifact");
    Ok(dir.join(format!(".{name}.{}.tmp", std::process::id())))
}

/// Loads an artifact this cache wrote.
///
/// The file is read into memory rather than mapped: a mapped artifact that
/// anything truncates in place (an operator, another process sharing the
/// directory) kills the whole process with SIGBUS, which a test reproduced.
///
/// SAFETY: `deserialize` trusts its input to be a wasmtime-produced artifact.
/// Only files named by a component digest and this engine's compatibility hash
/// are read, they are written by [`ArtifactCache::store`] alone, and wasmtime
/// still checks the artifact's header against the engine. The cache directory
/// must be writable only by the operator (documented in the README).
#[allow(unsafe_code)]
fn deserialize(engine: &Engine, path: &Path) -> wasmtime::Result<Component> {
    let bytes = std::fs::read(path)?;
    unsafe { Component::deserialize(engine, &bytes) }
}
