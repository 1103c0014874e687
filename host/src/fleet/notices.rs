//! Admin changes announced through Redis: the gateway that made a change
//! publishes its sequence number on `<prefix>:admin`; every gateway of the
//! fleet subscribes and reloads the admin plane at once. It only hurries the
//! poll (`crate::admin::sync`): a lost notice, or a Redis that is out, leaves
//! each gateway its poll. On a Redis Cluster a gateway subscribes through one
//! of the nodes `cluster_urls` names (the cluster carries every `PUBLISH` to
//! every node), and through the next one when that subscription is lost.

use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;

use super::redis_store::Shared;

/// How long a lost subscription waits before it subscribes again.
const RESUBSCRIBE_AFTER: Duration = Duration::from_secs(1);

/// The fleet's channel of admin changes.
#[derive(Clone)]
pub struct AdminNotices {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for AdminNotices {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AdminNotices").field("channel", &self.channel()).finish()
    }
}

impl AdminNotices {
    pub(super) fn new(shared: Arc<Shared>) -> Self {
        Self { shared }
    }

    fn channel(&self) -> String {
        self.shared.keys().admin_channel()
    }

    /// Announces change `seq` to the fleet (a Redis that is out is logged
    /// and counted like any shared-state failure; the others' polls find it).
    pub async fn announce(&self, seq: i64) {
        let mut command = redis::pipe();
        command.cmd("PUBLISH").arg(self.channel()).arg(seq).ignore();
        self.shared.attempt(self.shared.query::<()>(&command)).await;
    }

    /// Calls `heard` for every change announced, for ever: subscribes, and
    /// subscribes again [`RESUBSCRIBE_AFTER`] after the subscription is lost
    /// (on a cluster, through the next node named).
    pub async fn listen(&self, heard: impl Fn(i64)) {
        let clients = self.shared.target().subscription_clients();
        let mut lost = false;
        for client in clients.iter().cycle() {
            match self.subscribe(client, &heard, &mut lost).await {
                Ok(()) => {}
                Err(error) if !lost => {
                    lost = true;
                    tracing::warn!(%error, "the admin changes' channel in Redis is lost; the poll goes on");
                }
                Err(_) => {}
            }
            tokio::time::sleep(RESUBSCRIBE_AFTER).await;
        }
    }

    async fn subscribe(&self, client: &redis::Client, heard: &impl Fn(i64), lost: &mut bool) -> redis::RedisResult<()> {
        let mut pubsub = client.get_async_pubsub().await?;
        pubsub.subscribe(self.channel()).await?;
        if std::mem::take(lost) {
            tracing::info!("the admin changes' channel in Redis is back");
        }
        let mut messages = pubsub.on_message();
        while let Some(message) = messages.next().await {
            match message.get_payload::<i64>() {
                Ok(seq) => heard(seq),
                Err(error) => tracing::warn!(%error, "an admin notice that is not a change number"),
            }
        }
        Err(redis::RedisError::from((redis::ErrorKind::Io, "the subscription ended")))
    }
}
