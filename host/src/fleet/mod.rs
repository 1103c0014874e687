//! A fleet of gateways sharing one set of limits: each model's (and caller
//! key's) request and token buckets and its throttle coefficient live in Redis
//! (`[fleet] redis_url`, or a Redis Cluster: `cluster_urls`, its keys
//! hash-tagged per owner, `keys.rs`), taken whole-demand by one atomic script
//! (`account.lua`, the in-process arithmetic to the unit), so N gateways admit
//! what one would. `max_concurrency` permits are leases in Redis that expire
//! unless renewed (`permits.lua`), so the permits of a gateway that died come
//! back; a gateway keeps a few its calls released, idle, for its next calls
//! (`permits.rs`). The queues and the parking stay each gateway's own.
//!
//! When Redis cannot be reached, the declared policy decides
//! (`on_shared_error`): `refuse` answers the call `shared_state_unavailable`
//! (503) before anything is sent; `local` admits against this gateway's share
//! of each limit (`1 / fleet_size`, rounded down) in memory. Either way the
//! failure is logged and counted (`weir_shared_state_failures_total`), and
//! Redis is tried again after [`RETRY_AFTER_OUTAGE`], so its return restores
//! the shared state without a restart.

mod budgets;
mod circuits;
mod keys;
mod lease;
mod notices;
mod permits;
mod redis_store;
mod target;

pub use crate::config::{FleetSettings, SharedErrorPolicy};
pub use budgets::{AccountNumbers, Check, HoldRefused, SharedBudgets, SpendSource};
pub use lease::{BLOCK_LIFETIME, BLOCK_SHARE_OF_LIMIT, BLOCK_SPAN, LeasedAccount};
pub use notices::AdminNotices;
pub use permits::{PERMIT_BLOCK_MOST, PERMIT_BLOCK_SHARE, PERMIT_GIVE_BACK_WINDOW, RedisPermits, spare_permits};
pub use redis_store::{
    DEFAULT_LEASE_SECS, LeaseAnswer, RETRY_AFTER_OUTAGE, RedisAccount, RedisStore, ScriptTime, ScriptVerdict,
    SettingsError,
};
pub use target::{Connection, RedisTarget, TargetError, Timeouts};

/// The largest `tpm` the fleet's script computes exactly (its divisions keep
/// every partial below 2^53 up to this capacity).
pub const MAX_SHARED_LIMIT: u64 = 9_000_000_000;

/// Refuses a limit the shared script could not compute exactly: checked at
/// load when `[fleet]` is set.
pub fn check_limits(config: &crate::config::Config) -> Result<(), String> {
    let models = config.models.iter().map(|model| (format!("model `{}`", model.id), model.tpm));
    let keys = config.keys.iter().map(|key| (format!("key `{}`", key.id), key.tpm));
    match models.chain(keys).find(|(_, tpm)| tpm.is_some_and(|tpm| tpm > MAX_SHARED_LIMIT)) {
        Some((owner, tpm)) => Err(format!(
            "{owner}: tpm {} is above the {MAX_SHARED_LIMIT} a fleet's shared buckets hold",
            tpm.unwrap_or_default()
        )),
        None => Ok(()),
    }
}

/// Counts the shared state's failures (the metrics implement it).
pub trait FleetMeter: Send + Sync {
    fn shared_state_failed(&self);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_settings_debug_shows_the_urls_without_their_passwords() {
        let settings = FleetSettings {
            redis_url: Some("redis://default:p@ss-X9@10.0.0.1:6379/0".to_owned()),
            cluster_urls: Some(vec!["redis://:n0de-Y8@10.0.0.2:6379".to_owned()]),
            on_shared_error: SharedErrorPolicy::Refuse,
            fleet_size: None,
            key_prefix: None,
            lease_secs: None,
        };
        let shown = format!("{settings:?}");
        assert!(shown.contains("redis://<credentials>@10.0.0.1:6379/0") && !shown.contains("X9"), "{shown}");
        assert!(shown.contains("redis://<credentials>@10.0.0.2:6379") && !shown.contains("Y8"), "{shown}");
    }

    #[test]
    fn a_token_limit_beyond_the_scripts_exact_range_is_refused_at_load() {
        let toml = |tpm: u64| {
            format!(
                "[[model]]\nid = \"m\"\nprovider = \"openai-compatible\"\nendpoint = \"http://127.0.0.1:1/v1\"\n\
                 max_output_tokens = 10\ncontext_window = 1000\ntpm = {tpm}\n"
            )
        };
        let config = |tpm| crate::catalog::Config::from_toml(&toml(tpm), "test").unwrap();
        assert!(check_limits(&config(MAX_SHARED_LIMIT)).is_ok());
        let error = check_limits(&config(MAX_SHARED_LIMIT + 1)).unwrap_err();
        assert!(error.contains("model `m`") && error.contains("9000000000"), "{error}");
    }
}
