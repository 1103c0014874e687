//! Settings the schema shares with the subsystems that read them: the
//! fleet's `[fleet]`, the compliance envelope and retention projects, a
//! caller's admission lane, and the provider keys the schema's checks name.
//! Each subsystem is built from these; none of them builds anything.

use std::fmt;

use serde::Deserialize;

/// The provider key of Bedrock's Mantle surface, whose entries derive `rpm`
/// from `tpm` (see [`mantle_rpm`]).
pub const MANTLE: &str = "anthropic-bedrock-mantle";

/// The provider key of a decision entry: the host speaks the decision wire
/// itself (see [`crate::decision`]), so no component may declare it.
pub const DECISION_PROVIDER: &str = "decision";

/// Which of a model's two queues a call joins.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Lane {
    /// Served first; may use all of the model's capacity.
    #[default]
    Interactive,
    /// Served when no interactive call is parked; never takes the interactive share.
    Bulk,
}

impl Lane {
    /// `interactive` or `bulk` (a header's or a config's word).
    pub fn parse(word: &str) -> Option<Self> {
        match word {
            "interactive" => Some(Self::Interactive),
            "bulk" => Some(Self::Bulk),
            _ => None,
        }
    }

    /// The lane's name as callers and configuration spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            Lane::Interactive => "interactive",
            Lane::Bulk => "bulk",
        }
    }
}

impl fmt::Display for Lane {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The application's one compliance domain, fixed when the [`crate::Weir`] is
/// built. The default refuses every model that requires data sharing: no
/// application shares data by omission.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ComplianceEnvelope {
    /// Whether models served only under provider data sharing may be called.
    #[serde(default)]
    pub allow_data_sharing: bool,
}

impl ComplianceEnvelope {
    /// The envelope that permits data sharing.
    pub fn permitting_data_sharing() -> Self {
        Self { allow_data_sharing: true }
    }
}

/// Provider keys whose surface cannot bind a retention project per request:
/// Bedrock's `bedrock-runtime` endpoint (InvokeModel for Claude, Converse for
/// the others) takes no project header, so retention there is the account's
/// setting alone. A `[retention.X]` for one of them is refused (the header would
/// bind nothing), and so is a `requires_lax` entry on one: such a model could
/// never be called under its terms there (it belongs on Mantle).
///
/// The host keeps this list because WIT 0.1.0 lets no component declare it.
/// Every other key is taken to bind when the config gives it a `[retention.X]`:
/// that table is the operator's statement that the surface honours the header.
pub const UNBINDABLE_SURFACES: [&str; 2] = ["anthropic-bedrock", "bedrock-converse"];

/// Whether a provider key's surface can bind a retention project per request.
pub fn binds_retention(provider_key: &str) -> bool {
    !UNBINDABLE_SURFACES.contains(&provider_key)
}

/// A provider's retention projects (`[retention.<provider>]` in the config).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RetentionProjects {
    /// The header that names the project, e.g. `anthropic-workspace-id`.
    pub header: String,
    /// The zero-retention project; absent sends no header for ordinary traffic.
    pub strict_project: Option<String>,
    /// The data-sharing project; absent sends no header for `requires_lax` models.
    pub lax_project: Option<String>,
}

/// `[fleet]`: where the fleet's shared state lives: one Redis server
/// (`redis_url`) or a Redis Cluster (`cluster_urls`), exactly one of them.
/// Its `Debug` shows every URL redacted ([`crate::redact`]).
#[derive(Clone, Deserialize, PartialEq, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FleetSettings {
    /// One Redis server: `redis://[user:password@]host:port[/db]`
    /// (`rediss://` for TLS is not built in). The password never appears in
    /// a log or message: it is shown through [`crate::redact::redacted`].
    pub redis_url: Option<String>,
    /// A Redis Cluster instead: the URLs of some of its nodes
    /// (`redis://[user:password@]host:port`, the same user and password in
    /// each; at least one), from which the gateway learns the others. Keys
    /// are hash-tagged by their owner so each script stays in one slot.
    /// Passwords are redacted as in `redis_url`.
    pub cluster_urls: Option<Vec<String>>,
    /// What a call meets while Redis cannot be reached (default `refuse`).
    #[serde(default)]
    pub on_shared_error: SharedErrorPolicy,
    /// How many gateways share the limits: under `local`, each admits
    /// `1 / fleet_size` of every limit. Required with `local`.
    pub fleet_size: Option<u32>,
    /// The prefix of every key Weir writes (default `weir`): fleets sharing one
    /// Redis keep apart by it. On a cluster it may not hold `{` (it would be
    /// every key's hash tag).
    pub key_prefix: Option<String>,
    /// How long a `max_concurrency` permit's lease lasts unless its gateway
    /// renews it (default 15 s, at least 3): the permits of a gateway that
    /// died return within it.
    pub lease_secs: Option<u64>,
}

impl std::fmt::Debug for FleetSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FleetSettings")
            .field("redis_url", &self.redis_url.as_deref().map(crate::redact::redacted))
            .field(
                "cluster_urls",
                &self
                    .cluster_urls
                    .as_ref()
                    .map(|urls| urls.iter().map(|url| crate::redact::redacted(url)).collect::<Vec<_>>()),
            )
            .field("on_shared_error", &self.on_shared_error)
            .field("fleet_size", &self.fleet_size)
            .field("key_prefix", &self.key_prefix)
            .field("lease_secs", &self.lease_secs)
            .finish_non_exhaustive()
    }
}

/// `on_shared_error`.
#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum SharedErrorPolicy {
    /// Calls answer `shared_state_unavailable` (503): no gateway can overspend.
    #[default]
    Refuse,
    /// Each gateway admits its share (`1 / fleet_size`) of every limit alone.
    Local,
}
