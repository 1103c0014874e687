//! Precompiled component artifacts on disk, keyed by the component's digest and
//! the engine's compatibility hash, so each component is compiled once per
//! machine instead of once per start (a cold compile costs ~0.2 s in a release
//! host and far more in a debug one; a cache hit costs well under a millisecond).
//!
//! An artifact is machine code loaded without re-validation, so whoever can
//! write the folder can run code in this process. The cache is therefore used
//! only from a folder owned by this process's user and not writable by group or
//! others ([`ArtifactCache::open`]); any other folder is ignored with a warning
//! and components are compiled in memory.

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

/// Why a cache folder is not used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UnsafeCacheDir {
    #[error("cannot be created or read: {0}")]
    Unreadable(String),
    #[error("is not a directory")]
    NotADirectory,
    #[error("is owned by user {owner}, not by this process's user {user}")]
    ForeignOwner { owner: u32, user: u32 },
    #[error("is writable by group or others (mode {mode:o})")]
    SharedWritable { mode: u32 },
}

impl ArtifactCache {
    /// The cache in `dir` (created owner-only when missing), or `None` with a
    /// warning when the folder is not safe to load machine code from.
    pub fn open(dir: PathBuf, engine: &Engine) -> Option<Self> {
        match check_dir(&dir) {
            Ok(()) => Some(Self::new(dir, engine)),
            Err(reason) => {
                tracing::warn!(
                    dir = %dir.display(),
                    %reason,
                    "not using the precompiled-component cache: components are compiled in memory"
                );
                None
            }
        }
    }

    fn new(dir: PathBuf, engine: &Engine) -> Self {
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

/// Creates `dir` (owner-only) when missing, then checks it is a directory owned
/// by this process's effective user and not writable by group or others. The
/// folder is opened as is, symlinks followed: what matters is the folder the
/// artifacts are read from.
#[cfg(unix)]
fn check_dir(dir: &Path) -> Result<(), UnsafeCacheDir> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt};
    if !dir.exists() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|e| UnsafeCacheDir::Unreadable(e.to_string()))?;
    }
    let metadata = std::fs::metadata(dir).map_err(|e| UnsafeCacheDir::Unreadable(e.to_string()))?;
    if !metadata.is_dir() {
        return Err(UnsafeCacheDir::NotADirectory);
    }
    let user = rustix::process::geteuid().as_raw();
    if metadata.uid() != user {
        return Err(UnsafeCacheDir::ForeignOwner { owner: metadata.uid(), user });
    }
    let mode = metadata.mode() & 0o7777;
    if mode & 0o022 != 0 {
        return Err(UnsafeCacheDir::SharedWritable { mode });
    }
    Ok(())
}

/// Without Unix ownership and modes there is nothing to check the folder
/// against, so no cache is used.
#[cfg(not(unix))]
fn check_dir(_dir: &Path) -> Result<(), UnsafeCacheDir> {
    Err(UnsafeCacheDir::Unreadable("ownership cannot be checked on this platform".to_owned()))
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
/// is writable only by this process's user ([`ArtifactCache::open`] checks it).
#[allow(unsafe_code)]
fn deserialize(engine: &Engine, path: &Path) -> wasmtime::Result<Component> {
    let bytes = std::fs::read(path)?;
    unsafe { Component::deserialize(engine, &bytes) }
}

#[cfg(all(test, unix))]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    fn set_mode(dir: &Path, mode: u32) {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    #[test]
    fn only_an_owner_only_folder_is_used() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("cache");
        check_dir(&dir).unwrap();
        let created = std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777;
        assert_eq!(created, 0o700, "a missing folder is created owner-only");
        set_mode(&dir, 0o755);
        check_dir(&dir).unwrap();
        set_mode(&dir, 0o775);
        assert_eq!(check_dir(&dir), Err(UnsafeCacheDir::SharedWritable { mode: 0o775 }));
        set_mode(&dir, 0o757);
        assert_eq!(check_dir(&dir), Err(UnsafeCacheDir::SharedWritable { mode: 0o757 }));
        set_mode(&dir, 0o700);
        let file = dir.join("file");
        std::fs::write(&file, b"x").unwrap();
        assert_eq!(check_dir(&file), Err(UnsafeCacheDir::NotADirectory));
    }

    #[test]
    fn a_folder_owned_by_another_user_is_refused() {
        let root = tempfile::tempdir().unwrap();
        // As root, give a folder away to `nobody`; as anyone else, `/` is root's.
        let (dir, owner) = if rustix::process::geteuid().is_root() {
            let dir = root.path().join("foreign");
            std::fs::create_dir(&dir).unwrap();
            set_mode(&dir, 0o755);
            std::os::unix::fs::chown(&dir, Some(65_534), None).unwrap();
            (dir, 65_534)
        } else {
            (PathBuf::from("/"), 0)
        };
        let refused = check_dir(&dir);
        assert!(matches!(refused, Err(UnsafeCacheDir::ForeignOwner { owner: o, .. }) if o == owner), "{refused:?}");
    }
}
