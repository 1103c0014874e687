//! Keys change without a restart: the config file is re-read when its bytes
//! change (polled) or on SIGHUP, and only its `[[key]]` list is taken. A file
//! that does not parse or validate keeps the previous keys, and the log says
//! why; other settings in it take effect at the next start.

use std::path::{Path, PathBuf};
use std::time::Duration;

use sha2::{Digest, Sha256};

use super::KeyRing;
use crate::config::{Config, KeyEntry};

/// What holds the key ring a reload replaces: the runtime's handle
/// ([`crate::Weir`]) implements it, so the reload depends on the ring, not on
/// the runtime it sits in.
pub trait KeyHolder: Clone + Send + Sync + 'static {
    /// Replaces the keys for new calls; a list that does not validate changes
    /// nothing and says why.
    fn replace_keys(&self, entries: &[KeyEntry]) -> Result<std::sync::Arc<KeyRing>, String>;
}

/// Re-reads `path` and replaces the keys. `allow_empty` is false when the
/// gateway listens beyond loopback without `allow_unauthenticated`: a file with
/// no key would open it to anyone, so it is refused like a broken one.
pub fn reload_keys(holder: &impl KeyHolder, path: &Path, allow_empty: bool) -> Result<usize, String> {
    let config = Config::from_file(path).map_err(|error| error.to_string())?;
    if config.keys.is_empty() && !allow_empty {
        return Err(format!(
            "{} has no [[key]] while the gateway listens beyond loopback; that would let anyone call it",
            path.display()
        ));
    }
    Ok(holder.replace_keys(&config.keys)?.len())
}

/// Watches `path` (every `every`, and on SIGHUP) and reloads the keys when the
/// file's bytes change. Runs until the returned task is aborted.
pub fn watch_keys(
    holder: impl KeyHolder,
    path: PathBuf,
    every: Duration,
    allow_empty: bool,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut hangup = hangup_signal();
        let mut seen = fingerprint(&path);
        loop {
            let forced = tokio::select! {
                () = tokio::time::sleep(every) => false,
                () = next_hangup(&mut hangup) => true,
            };
            let now = fingerprint(&path);
            if now == seen && !forced {
                continue;
            }
            seen = now;
            match reload_keys(&holder, &path, allow_empty) {
                Ok(count) => tracing::info!(keys = count, file = %path.display(), "caller keys reloaded"),
                Err(reason) => tracing::error!(%reason, "caller keys not reloaded; the previous keys stay in force"),
            }
        }
    })
}

/// The file's content digest; `None` while it cannot be read.
fn fingerprint(path: &Path) -> Option<[u8; 32]> {
    std::fs::read(path).ok().map(|bytes| Sha256::digest(&bytes).into())
}

#[cfg(unix)]
type Hangup = Option<tokio::signal::unix::Signal>;
#[cfg(not(unix))]
type Hangup = ();

#[cfg(unix)]
fn hangup_signal() -> Hangup {
    match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()) {
        Ok(signal) => Some(signal),
        Err(error) => {
            tracing::warn!(%error, "cannot listen for SIGHUP; keys reload when the file changes");
            None
        }
    }
}

#[cfg(unix)]
async fn next_hangup(hangup: &mut Hangup) {
    match hangup {
        Some(signal) => {
            signal.recv().await;
        }
        None => std::future::pending().await,
    }
}

#[cfg(not(unix))]
fn hangup_signal() -> Hangup {}

#[cfg(not(unix))]
async fn next_hangup(_: &mut Hangup) {
    std::future::pending().await
}
