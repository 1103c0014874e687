//! `[cache]` and the entries' `cache_ttl_secs` / `cache_scope`: the answer
//! cache's settings (see [`crate::answer_cache`]). The operator turns it on
//! per entry; a caller can only turn it off for its own call.

use serde::Deserialize;

use super::{Config, RoleKind};

/// What `[cache]` bounds when it says nothing: 64 MiB of answers in memory.
pub const DEFAULT_MAX_BYTES: u64 = 64 * 1024 * 1024;
/// No entry keeps an answer longer than this unless `[cache] max_ttl_secs` says: one day.
pub const DEFAULT_MAX_TTL_SECS: u64 = 24 * 60 * 60;
/// The largest answer stored unless `[cache] max_entry_bytes` says: 1 MiB.
pub const DEFAULT_MAX_ENTRY_BYTES: u64 = 1024 * 1024;

/// `[cache]`: the answer cache as a whole. Without it no entry caches.
#[derive(Debug, Clone, Deserialize, PartialEq, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AnswerCacheSettings {
    /// The answers kept in this process's memory, in bytes (default 64 MiB);
    /// past it the least useful are evicted.
    pub max_bytes: Option<u64>,
    /// The longest any entry's `cache_ttl_secs` may be (default one day): an
    /// entry asking for more is refused at load.
    pub max_ttl_secs: Option<u64>,
    /// An answer larger than this (its stored size) is not stored (default 1 MiB).
    pub max_entry_bytes: Option<u64>,
}

impl AnswerCacheSettings {
    pub fn max_bytes(&self) -> u64 {
        self.max_bytes.unwrap_or(DEFAULT_MAX_BYTES)
    }

    pub fn max_ttl_secs(&self) -> u64 {
        self.max_ttl_secs.unwrap_or(DEFAULT_MAX_TTL_SECS)
    }

    pub fn max_entry_bytes(&self) -> u64 {
        self.max_entry_bytes.unwrap_or(DEFAULT_MAX_ENTRY_BYTES)
    }
}

/// How an entry caches: set from its `cache_ttl_secs` and `cache_scope`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EntryCaching {
    pub ttl: std::time::Duration,
    pub scope: CacheScope,
}

/// `cache_scope`: who shares an entry's cached answers. Never wider than the
/// operator wrote for the entry.
#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq, Hash, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum CacheScope {
    /// The caller's member (the default): one member's answers are never
    /// another's.
    #[default]
    Member,
    /// The caller's team (a caller without a team: its member).
    Team,
    /// The caller's key (a caller without a key: its member).
    Key,
    /// Every caller of the entry.
    Global,
}

impl CacheScope {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Member => "member",
            Self::Team => "team",
            Self::Key => "key",
            Self::Global => "global",
        }
    }
}

/// One entry's or role's `cache_ttl_secs` and `cache_scope`, against `[cache]`.
fn check_opt_in(what: &str, ttl: Option<u64>, scoped: bool, kind: RoleKind, config: &Config) -> Result<(), String> {
    match (ttl, &config.cache) {
        (None, _) if scoped => {
            Err(format!("{what}: `cache_scope` is read only with `cache_ttl_secs` (nothing caches without it)"))
        }
        (None, _) => Ok(()),
        (Some(_), None) => Err(format!("{what}: `cache_ttl_secs` needs a `[cache]` table (its size and TTL bound)")),
        (Some(0), Some(_)) => Err(format!("{what}: `cache_ttl_secs` must be positive")),
        (Some(ttl), Some(cache)) if ttl > cache.max_ttl_secs() => {
            Err(format!("{what}: `cache_ttl_secs` {ttl} is above `[cache] max_ttl_secs` {}", cache.max_ttl_secs()))
        }
        (Some(_), Some(_)) if kind == RoleKind::Decision => Err(format!(
            "{what}: `cache_ttl_secs` is not read for decision entries (a decision's probability is asked afresh)"
        )),
        (Some(_), Some(_)) => Ok(()),
    }
}

/// The cache settings read together: an entry's `cache_ttl_secs` needs
/// `[cache]` and stays within its `max_ttl_secs`; `cache_scope` is read only
/// beside `cache_ttl_secs`; decision entries do not cache.
pub(super) fn validate(config: &Config) -> Result<(), String> {
    if let Some(cache) = &config.cache {
        if cache.max_bytes == Some(0) || cache.max_ttl_secs == Some(0) || cache.max_entry_bytes == Some(0) {
            return Err(
                "[cache]: `max_bytes`, `max_ttl_secs` and `max_entry_bytes` must be positive when set".to_owned()
            );
        }
        if cache.max_entry_bytes() > cache.max_bytes() {
            return Err("[cache]: `max_entry_bytes` cannot be above `max_bytes`".to_owned());
        }
    }
    for model in &config.models {
        let what = format!("model `{}`", model.id);
        check_opt_in(&what, model.cache_ttl_secs, model.cache_scope.is_some(), model.kind, config)?;
    }
    for (name, role) in &config.roles {
        let what = format!("[role.{name}]");
        check_opt_in(&what, role.cache_ttl_secs, role.cache_scope.is_some(), role.kind, config)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::config::Config;

    /// One entry (a chat entry unless `entry` names its kind) with `entry`'s
    /// lines, then `cache`.
    fn config(entry: &str, cache: &str) -> Result<Config, String> {
        let output = if entry.contains("kind") { "" } else { "max_output_tokens = 10\n" };
        let toml = format!(
            "[[model]]\nid = \"m\"\nprovider = \"openai-compatible\"\nendpoint = \"http://127.0.0.1:1/v1\"\n\
             {output}context_window = 1000\n{entry}\n{cache}\n"
        );
        Config::from_toml(&toml, "test").map_err(|error| error.to_string())
    }

    #[test]
    fn an_entry_caches_with_its_ttl_and_scope_under_a_cache_table() {
        let config = config("cache_ttl_secs = 60\ncache_scope = \"team\"", "[cache]\nmax_bytes = 10000000").unwrap();
        let cache = config.cache.as_ref().unwrap();
        assert_eq!((cache.max_bytes(), cache.max_ttl_secs()), (10_000_000, super::DEFAULT_MAX_TTL_SECS));
        let entry = &config.models[0];
        assert_eq!((entry.cache_ttl_secs, entry.cache_scope), (Some(60), Some(super::CacheScope::Team)));
        let plain = self::config("", "[cache]").unwrap();
        assert_eq!(plain.cache.as_ref().unwrap().max_entry_bytes(), super::DEFAULT_MAX_ENTRY_BYTES);
        assert!(plain.models[0].cache_ttl_secs.is_none());
    }

    #[test]
    fn the_cache_settings_are_checked_together_at_load() {
        let refused = |entry: &str, cache: &str, needle: &str| {
            let error = config(entry, cache).unwrap_err();
            assert!(error.contains(needle), "{needle}: {error}");
        };
        refused("cache_ttl_secs = 60", "", "needs a `[cache]` table");
        refused("cache_scope = \"global\"", "[cache]", "read only with `cache_ttl_secs`");
        refused("cache_ttl_secs = 0", "[cache]", "must be positive");
        refused("cache_ttl_secs = 100", "[cache]\nmax_ttl_secs = 50", "above `[cache] max_ttl_secs` 50");
        refused("cache_ttl_secs = 60", "[cache]\nmax_bytes = 0", "must be positive when set");
        refused("cache_ttl_secs = 60", "[cache]\nmax_bytes = 10\nmax_entry_bytes = 20", "cannot be above");
        let decision = "cache_ttl_secs = 60\nkind = \"decision\"\nbackend = \"logprobs\"";
        refused(decision, "[cache]", "not read for decision entries");
        refused(
            "",
            "[role.fast]\nmodel = \"m\"\ncache_ttl_secs = 60",
            "[role.fast]: `cache_ttl_secs` needs a `[cache]`",
        );
        refused(
            "",
            "[cache]\n[role.fast]\nmodel = \"m\"\ncache_scope = \"team\"",
            "[role.fast]: `cache_scope` is read only",
        );
        let role = config("", "[cache]\n[role.fast]\nmodel = \"m\"\ncache_ttl_secs = 30").unwrap();
        let caching = role.roles["fast"].caching().unwrap();
        assert_eq!((caching.ttl.as_secs(), caching.scope), (30, super::CacheScope::Member));
        refused("cache_ttl_secs = 60", "[cache]\nsize = 10", "unknown field `size`");
        refused("cache_ttl_secs = 60\ncache_scope = \"everyone\"", "[cache]", "unknown variant `everyone`");
    }
}
