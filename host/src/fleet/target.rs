//! Where the fleet's Redis is: one server (`[fleet] redis_url`) or a Redis
//! Cluster (`[fleet] cluster_urls`, some of its nodes' URLs), and the one
//! connection a gateway keeps to it. On a cluster the client routes each
//! command by its key's slot, follows `MOVED` and `ASK` itself (refreshing
//! its slot map), and reconnects to a node that came back; what still fails
//! within the caller's time bound is an outage like a single server's.

use std::time::Duration;

use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use redis::cluster::{ClusterClient, ClusterConfig};
use redis::cluster_async::ClusterConnection;

use super::FleetSettings;
use crate::redact::redacted;

/// A cluster's retries of one command: a redirect (`MOVED`, `ASK`) or a lost
/// node's reconnection each take one, so three cover a slot that moved while
/// a node's connection was remade.
const CLUSTER_RETRIES: u32 = 3;
/// The cluster's waits between retries: 10, 20, 40 ms (at most 100), so its
/// retries fit well inside an operation's time bound.
const CLUSTER_RETRY_FACTOR_MS: u64 = 10;
const CLUSTER_RETRY_MAX_WAIT_MS: u64 = 100;

/// Why `[fleet]` names no usable Redis.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TargetError {
    #[error("[fleet] needs redis_url (one Redis server) or cluster_urls (a Redis Cluster)")]
    NoRedis,
    #[error("[fleet] has both redis_url and cluster_urls: name one Redis server or one cluster")]
    BothRedis,
    #[error("[fleet] cluster_urls is empty: name at least one of the cluster's nodes")]
    NoClusterNode,
    /// `url` is shown redacted; `kind` is the client's reason.
    #[error("[fleet] {field} `{url}` is not usable: {kind}")]
    UnusableUrl { field: &'static str, url: String, kind: String },
    /// The nodes disagree on the user, the password or the database.
    #[error("[fleet] cluster_urls are not one cluster's: {0}")]
    UnusableCluster(String),
    /// A `{` in the prefix would be every key's hash tag: one slot for all.
    #[error(
        "[fleet] key_prefix `{0}` holds `{{`: on a Redis Cluster it would be every key's hash tag, putting all of them in one slot"
    )]
    BraceInPrefix(String),
}

/// Where the fleet's Redis is.
#[derive(Clone)]
pub struct RedisTarget {
    kind: Kind,
    /// The URL (or the nodes' URLs) without passwords, for the log.
    shown: String,
}

#[derive(Clone)]
enum Kind {
    Single(redis::Client),
    /// The cluster's client (boxed: several times a single client's size),
    /// and a client per node named (a subscription is made to one node: a
    /// cluster carries `PUBLISH` to every node).
    Cluster {
        client: Box<ClusterClient>,
        nodes: Vec<redis::Client>,
    },
}

impl std::fmt::Debug for RedisTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisTarget").field("redis", &self.shown).field("cluster", &self.is_cluster()).finish()
    }
}

/// How long a connection may take to be made, and a command to be answered.
#[derive(Debug, Clone, Copy)]
pub struct Timeouts {
    pub connect: Duration,
    pub response: Duration,
}

impl RedisTarget {
    /// The Redis `settings` name: exactly one of `redis_url` and a non-empty
    /// `cluster_urls`, each URL one the client reads (and, on a cluster, a
    /// `key_prefix` without `{`). Connects to nothing.
    pub fn new(settings: &FleetSettings) -> Result<Self, TargetError> {
        match (&settings.redis_url, &settings.cluster_urls) {
            (None, None) => Err(TargetError::NoRedis),
            (Some(_), Some(_)) => Err(TargetError::BothRedis),
            (Some(url), None) => {
                let client = client("redis_url", url)?;
                Ok(Self { kind: Kind::Single(client), shown: redacted(url) })
            }
            (None, Some(urls)) => {
                if urls.is_empty() {
                    return Err(TargetError::NoClusterNode);
                }
                if let Some(prefix) = settings.key_prefix.as_deref().filter(|prefix| prefix.contains('{')) {
                    return Err(TargetError::BraceInPrefix(prefix.to_owned()));
                }
                let nodes = urls.iter().map(|url| client("cluster_urls", url)).collect::<Result<Vec<_>, _>>()?;
                let client = ClusterClient::builder(urls.iter().map(String::as_str))
                    .retries(CLUSTER_RETRIES)
                    .min_retry_wait(CLUSTER_RETRY_FACTOR_MS)
                    .max_retry_wait(CLUSTER_RETRY_MAX_WAIT_MS)
                    .retry_wait_formula(CLUSTER_RETRY_FACTOR_MS, 2)
                    .build()
                    // The client's message names no URL, so it shows no password.
                    .map_err(|error| TargetError::UnusableCluster(error.to_string()))?;
                let shown = urls.iter().map(|url| redacted(url)).collect::<Vec<_>>().join(", ");
                Ok(Self {
                    kind: Kind::Cluster { client: Box::new(client), nodes },
                    shown: format!("cluster [{shown}]"),
                })
            }
        }
    }

    /// Whether it is a Redis Cluster (keys are then hash-tagged, and a
    /// command or script touches one slot).
    pub fn is_cluster(&self) -> bool {
        matches!(self.kind, Kind::Cluster { .. })
    }

    /// The URL (or the cluster's nodes' URLs) without passwords.
    pub fn shown(&self) -> &str {
        &self.shown
    }

    /// The clients a subscription may be made through, in the order to try
    /// them: the server's, or one per node named.
    pub fn subscription_clients(&self) -> &[redis::Client] {
        match &self.kind {
            Kind::Single(client) => std::slice::from_ref(client),
            Kind::Cluster { nodes, .. } => nodes,
        }
    }

    /// A connection: multiplexed and reconnecting by itself once made (on a
    /// cluster, one per node, routed by slot).
    pub async fn connect(&self, timeouts: Timeouts) -> redis::RedisResult<Connection> {
        match &self.kind {
            Kind::Single(client) => {
                let config = ConnectionManagerConfig::new()
                    .set_connection_timeout(Some(timeouts.connect))
                    .set_response_timeout(Some(timeouts.response))
                    .set_number_of_retries(1)
                    .set_min_delay(Duration::from_millis(50))
                    .set_max_delay(Duration::from_millis(500));
                Ok(Connection::Single(ConnectionManager::new_with_config(client.clone(), config).await?))
            }
            Kind::Cluster { client, .. } => {
                let config = ClusterConfig::new()
                    .set_connection_timeout(timeouts.connect)
                    .set_response_timeout(timeouts.response);
                Ok(Connection::Cluster(client.get_async_connection_with_config(config).await?))
            }
        }
    }
}

fn client(field: &'static str, url: &str) -> Result<redis::Client, TargetError> {
    redis::Client::open(url).map_err(|error| TargetError::UnusableUrl {
        field,
        url: redacted(url),
        kind: format!("{:?}", error.kind()),
    })
}

/// A gateway's connection to the fleet's Redis, whichever kind it is.
#[derive(Clone)]
pub enum Connection {
    Single(ConnectionManager),
    Cluster(ClusterConnection),
}

impl ConnectionLike for Connection {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a redis::Cmd) -> redis::RedisFuture<'a, redis::Value> {
        match self {
            Self::Single(connection) => connection.req_packed_command(cmd),
            Self::Cluster(connection) => connection.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a redis::Pipeline,
        offset: usize,
        count: usize,
    ) -> redis::RedisFuture<'a, Vec<redis::Value>> {
        match self {
            Self::Single(connection) => connection.req_packed_commands(pipeline, offset, count),
            Self::Cluster(connection) => connection.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Self::Single(connection) => connection.get_db(),
            Self::Cluster(connection) => connection.get_db(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::SharedErrorPolicy;

    fn settings(redis_url: Option<&str>, cluster_urls: Option<&[&str]>) -> FleetSettings {
        FleetSettings {
            redis_url: redis_url.map(str::to_owned),
            cluster_urls: cluster_urls.map(|urls| urls.iter().map(|url| (*url).to_owned()).collect()),
            on_shared_error: SharedErrorPolicy::Refuse,
            fleet_size: None,
            key_prefix: None,
            lease_secs: None,
        }
    }

    #[test]
    fn exactly_one_redis_is_named_and_a_cluster_names_a_node() {
        assert_eq!(RedisTarget::new(&settings(None, None)).unwrap_err(), TargetError::NoRedis);
        let both = settings(Some("redis://127.0.0.1:1"), Some(&["redis://127.0.0.1:2"]));
        assert_eq!(RedisTarget::new(&both).unwrap_err(), TargetError::BothRedis);
        assert_eq!(RedisTarget::new(&settings(None, Some(&[]))).unwrap_err(), TargetError::NoClusterNode);
        assert!(!RedisTarget::new(&settings(Some("redis://127.0.0.1:1"), None)).unwrap().is_cluster());
        let cluster = RedisTarget::new(&settings(None, Some(&["redis://127.0.0.1:1", "redis://127.0.0.1:2"]))).unwrap();
        assert!(cluster.is_cluster());
        assert_eq!(cluster.subscription_clients().len(), 2, "a subscription may go through either node");
    }

    #[test]
    fn a_bad_node_url_is_named_without_its_password() {
        let bad = settings(None, Some(&["redis://127.0.0.1:1", "http://user:s3cret-X9@example.com"]));
        match RedisTarget::new(&bad).unwrap_err() {
            TargetError::UnusableUrl { field, url, .. } => {
                assert_eq!(field, "cluster_urls");
                assert_eq!(url, "http://<credentials>@example.com");
            }
            other => panic!("not an unusable URL: {other:?}"),
        }
        let mixed = settings(None, Some(&["redis://:one@127.0.0.1:1", "redis://:two-X9@127.0.0.1:2"]));
        let error = RedisTarget::new(&mixed).unwrap_err();
        assert!(matches!(error, TargetError::UnusableCluster(_)), "{error:?}");
        assert!(!error.to_string().contains("X9"), "{error}");
    }

    #[test]
    fn a_cluster_shows_its_nodes_without_passwords_and_refuses_a_brace_in_the_prefix() {
        let cluster = settings(None, Some(&["redis://:pw-X9@10.0.0.1:6379", "redis://:pw-X9@10.0.0.2:6379"]));
        let target = RedisTarget::new(&cluster).unwrap();
        assert_eq!(
            target.shown(),
            "cluster [redis://<credentials>@10.0.0.1:6379, redis://<credentials>@10.0.0.2:6379]"
        );
        let braced = FleetSettings { key_prefix: Some("{weir}".to_owned()), ..cluster };
        assert_eq!(RedisTarget::new(&braced).unwrap_err(), TargetError::BraceInPrefix("{weir}".to_owned()));
        let single = FleetSettings { redis_url: Some("redis://127.0.0.1:1".to_owned()), cluster_urls: None, ..braced };
        assert!(RedisTarget::new(&single).is_ok(), "one server hashes no slot: the prefix is as it was");
    }
}
