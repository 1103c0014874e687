//! Precompiled component artifacts on disk, keyed by the component's digest and
//! the engine's compatibility hash, so each component is compiled once per
//! machine instead of once per start (a cold compile costs ~0.2 s in a release
//! host and far more in a debug one; a cache hit costs well under a millisecond).
//!
//! An artifact is machine code loaded without re-validation, so whoever can
//! write the folder can run code in this process. The cache is therefore used
//! only from a folder owned by this process's user and not writable by group or
//! others ([`ArtifactCache::open`]); any other folder is ignored with a warning
//! and components are compiled in memory. Each artifact is written 0600 under a
//! temporary name and renamed into place, and one is loaded only when the
//! opened file is owned by this process's user with no group or other
//! permission bit; any other is recompiled (and rewritten), not loaded.

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

/// Why a cached artifact is not loaded (it is recompiled instead).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UntrustedArtifact {
    #[error("cannot be read: {0}")]
    Unreadable(String),
    #[error("is not a regular file")]
    NotAFile,
    #[error("is owned by user {owner}, not by this process's user {user}")]
    ForeignOwner { owner: u32, user: u32 },
    #[error("is open to group or others (mode {mode:o}; the cache writes 0600)")]
    SharedMode { mode: u32 },
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
        match read_trusted(&path) {
            Ok(Some(artifact)) => match deserialize(engine, &artifact) {
                Ok(component) => return Ok(component),
                Err(error) => {
                    tracing::warn!(path = %path.display(), %error, "discarding unusable precompiled artifact")
                }
            },
            Ok(None) => {}
            Err(reason) => {
                tracing::warn!(path = %path.display(), %reason, "not loading a precompiled artifact: recompiling it")
            }
        }
        let component = Component::new(engine, bytes)?;
        if let Err(error) = self.store(&component, &path) {
            tracing::warn!(dir = %self.dir.display(), %error, "cannot write precompiled artifact");
        }
        Ok(component)
    }

    /// Writes the artifact to a new 0600 file under a unique temporary name
    /// (removed if anything fails), then renames it over `path`: a reader
    /// never sees half an artifact, nor one open to others.
    fn store(&self, component: &Component, path: &Path) -> anyhow::Result<()> {
        use std::io::Write;
        std::fs::create_dir_all(&self.dir)?;
        let serialized = component.serialize()?;
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("artifact");
        let prefix = format!(".{name}.");
        let mut builder = tempfile::Builder::new();
        builder.prefix(&prefix).suffix(".tmp");
        #[cfg(unix)]
        builder.permissions(std::os::unix::fs::PermissionsExt::from_mode(0o600));
        let mut temporary = builder.tempfile_in(&self.dir)?;
        temporary.write_all(&serialized)?;
        temporary.persist(path)?;
        Ok(())
    }
}

/// The artifact at `path` when it may be loaded: a regular file owned by this
/// process's effective user with no group or other permission bit, judged on
/// the opened file itself (so what is read is what was checked). `None` when
/// there is none.
#[cfg(unix)]
fn read_trusted(path: &Path) -> Result<Option<Vec<u8>>, UntrustedArtifact> {
    use std::io::Read;
    use std::os::unix::fs::MetadataExt;
    let unreadable = |error: std::io::Error| UntrustedArtifact::Unreadable(error.to_string());
    let mut file = match std::fs::File::open(path) {
        Ok(file) => file,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(error) => return Err(unreadable(error)),
    };
    let metadata = file.metadata().map_err(unreadable)?;
    trusted(metadata.is_file(), metadata.uid(), metadata.mode(), rustix::process::geteuid().as_raw())?;
    let mut bytes = Vec::with_capacity(usize::try_from(metadata.len()).unwrap_or(0));
    file.read_to_end(&mut bytes).map_err(unreadable)?;
    Ok(Some(bytes))
}

#[cfg(not(unix))]
fn read_trusted(_path: &Path) -> Result<Option<Vec<u8>>, UntrustedArtifact> {
    Err(UntrustedArtifact::Unreadable("ownership cannot be checked on this platform".to_owned()))
}

/// Whether an artifact file with this kind, owner and mode may be loaded by `user`.
fn trusted(is_file: bool, owner: u32, mode: u32, user: u32) -> Result<(), UntrustedArtifact> {
    if !is_file {
        return Err(UntrustedArtifact::NotAFile);
    }
    if owner != user {
        return Err(UntrustedArtifact::ForeignOwner { owner, user });
    }
    let mode = mode & 0o7777;
    if mode & 0o077 != 0 {
        return Err(UntrustedArtifact::SharedMode { mode });
    }
    Ok(())
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

/// Loads an artifact this cache wrote, from its bytes.
///
/// The file was read into memory rather than mapped: a mapped artifact that
/// anything truncates in place (an operator, another process sharing the
/// directory) kills the whole process with SIGBUS, which a test reproduced.
///
/// SAFETY: `deserialize` trusts its input to be a wasmtime-produced artifact.
/// Only files named by a component digest and this engine's compatibility hash
/// are read, they are written by [`ArtifactCache::store`] alone, and wasmtime
/// still checks the artifact's header against the engine. The cache directory
/// is writable only by this process's user ([`ArtifactCache::open`] checks it),
/// and the file read was owned by that user and closed to group and others
/// ([`read_trusted`]).
#[allow(unsafe_code)]
fn deserialize(engine: &Engine, bytes: &[u8]) -> wasmtime::Result<Component> {
    unsafe { Component::deserialize(engine, bytes) }
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

    /// The smallest component: the preamble alone (compiles in microseconds).
    const EMPTY_COMPONENT: &[u8] = b"\0asm\x0d\0\x01\0";

    fn artifact(dir: &Path) -> (PathBuf, std::fs::Metadata) {
        use std::os::unix::fs::MetadataExt;
        let files: Vec<PathBuf> = std::fs::read_dir(dir).unwrap().map(|entry| entry.unwrap().path()).collect();
        assert_eq!(files.len(), 1, "one artifact and no temporary file left: {files:?}");
        let metadata = std::fs::metadata(&files[0]).unwrap();
        assert_eq!(metadata.mode() & 0o777, 0o600, "written owner-only");
        assert_eq!(metadata.uid(), rustix::process::geteuid().as_raw());
        (files[0].clone(), metadata)
    }

    /// An artifact is loaded as written; once open to group or others, or
    /// owned by another user, it is recompiled and written again (a new file,
    /// 0600, renamed over it), not loaded.
    #[test]
    fn an_artifact_of_the_wrong_mode_or_owner_is_recompiled_not_loaded() {
        use std::os::unix::fs::MetadataExt;
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("cache");
        let engine = Engine::default();
        let cache = ArtifactCache::open(dir.clone(), &engine).unwrap();
        cache.load_or_compile(&engine, EMPTY_COMPONENT, "d1").unwrap();
        let (path, written) = artifact(&dir);
        cache.load_or_compile(&engine, EMPTY_COMPONENT, "d1").unwrap();
        assert_eq!(artifact(&dir).1.ino(), written.ino(), "an owner-only artifact is loaded, not rewritten");

        set_mode(&path, 0o644);
        assert_eq!(read_trusted(&path), Err(UntrustedArtifact::SharedMode { mode: 0o644 }));
        cache.load_or_compile(&engine, EMPTY_COMPONENT, "d1").unwrap();
        let (_, rewritten) = artifact(&dir);
        assert_ne!(rewritten.ino(), written.ino(), "recompiled and written anew");

        if rustix::process::geteuid().is_root() {
            std::os::unix::fs::chown(&path, Some(65_534), None).unwrap();
            let user = rustix::process::geteuid().as_raw();
            assert_eq!(read_trusted(&path), Err(UntrustedArtifact::ForeignOwner { owner: 65_534, user }));
            cache.load_or_compile(&engine, EMPTY_COMPONENT, "d1").unwrap();
            assert_ne!(artifact(&dir).1.ino(), rewritten.ino(), "another owner's artifact is replaced");
        }
    }

    #[test]
    fn only_an_owner_only_regular_file_is_trusted() {
        assert_eq!(trusted(true, 1000, 0o100600, 1000), Ok(()));
        assert_eq!(trusted(true, 1000, 0o100400, 1000), Ok(()));
        assert_eq!(trusted(true, 0, 0o100600, 1000), Err(UntrustedArtifact::ForeignOwner { owner: 0, user: 1000 }));
        assert_eq!(trusted(true, 1000, 0o100640, 1000), Err(UntrustedArtifact::SharedMode { mode: 0o640 }));
        assert_eq!(trusted(true, 1000, 0o100604, 1000), Err(UntrustedArtifact::SharedMode { mode: 0o604 }));
        assert_eq!(trusted(false, 1000, 0o040700, 1000), Err(UntrustedArtifact::NotAFile));
        let missing = tempfile::tempdir().unwrap().path().join("none.cwasm");
        assert_eq!(read_trusted(&missing), Ok(None));
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
