//! Every gateway sharing an admin store applies its changes: the gateway
//! that makes a change applies it at once; the others read the store's
//! newest change number every [`POLL_EVERY`] and, when it moved, load the
//! state and apply it. So a change made on one gateway holds on every other
//! within `POLL_EVERY` plus one load (one query of a few rows).

use std::time::Duration;

use crate::Weir;

/// How often a gateway asks the store whether the plane changed.
pub const POLL_EVERY: Duration = Duration::from_millis(250);

/// Polls the store every `every` and applies a newer state. Runs until the
/// returned task is aborted; a store that cannot be read is logged and
/// asked again at the next poll (the state in force stays).
pub fn watch(weir: Weir, every: Duration) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut failing = false;
        loop {
            tokio::time::sleep(every).await;
            let polled = weir.clone();
            match tokio::task::spawn_blocking(move || polled.refresh_admin()).await {
                Ok(Ok(_)) => failing = false,
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
