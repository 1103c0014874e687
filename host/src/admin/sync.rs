//! Every gateway sharing an admin store applies its changes: the gateway
//! that makes a change applies it at once and, under `[fleet]`, announces it
//! through Redis ([`crate::fleet::AdminNotices`]); every other gateway
//! reloads the state when it hears the notice, and in any case reads the
//! store's newest change number every [`POLL_EVERY`] and reloads when it
//! moved. So a change made on one gateway holds on every other within a
//! notice's trip and one load, or, when Redis is out (or there is no
//! `[fleet]`), within `POLL_EVERY` and one load.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;

use crate::Weir;

/// How often a gateway asks the store whether the plane changed.
pub const POLL_EVERY: Duration = Duration::from_millis(500);

/// Polls the store every `every` (and at once on a fleet's notice) and
/// applies a newer state. Runs until the returned task is aborted; a store
/// that cannot be read is logged once and asked again at the next poll (the
/// state in force stays).
pub fn watch(weir: Weir, every: Duration) -> tokio::task::JoinHandle<()> {
    let notice = Arc::new(Notify::new());
    if let Some(notices) = weir.admin_notices().cloned() {
        let heard = Arc::clone(&notice);
        // Detached: it listens for the life of the server.
        drop(tokio::spawn(async move { notices.listen(|_seq| heard.notify_one()).await }));
    }
    tokio::spawn(async move {
        let mut failing = false;
        loop {
            let via = tokio::select! {
                () = tokio::time::sleep(every) => "poll",
                () = notice.notified() => "redis",
            };
            let polled = weir.clone();
            match tokio::task::spawn_blocking(move || polled.refresh_admin()).await {
                Ok(Ok(applied)) => {
                    failing = false;
                    if applied {
                        let version = weir.admin_state().version;
                        tracing::info!(version, via, "admin plane changes applied");
                    }
                }
                Ok(Err(reason)) if !failing => {
                    failing = true;
                    tracing::error!(%reason, "the admin plane's changes cannot be read; the state in force stays");
                }
                Ok(Err(_)) => {}
                Err(error) => tracing::error!(%error, "the admin plane's poll failed"),
            }
        }
    })
}
