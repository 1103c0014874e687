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
#[derive(Debug, Clone, Deserialize, PartialEq)]
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

/// `cache_scope`: who shares an entry's cached answers. Never wider than the
/// operator wrote for the entry.
#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq, Hash)]
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

/// The cache settings read together: an entry's `cache_ttl_secs` needs
/// `[cache]` and stays within its `max_ttl_secs`; `cache_scope` is read only
/// beside `cache_ttl_secs`; only chat entries cache (embedding, rerank and
/// decision entries are not cached by this gateway).
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
        let id = &model.id;
        match (model.cache_ttl_secs, &config.cache) {
            (None, _) if model.cache_scope.is_some() => {
                return Err(format!(
                    "model `{id}`: `cache_scope` is read only with `cache_ttl_secs` (the entry does not cache)"
                ));
            }
            (None, _) => {}
            (Some(_), None) => {
                return Err(format!("model `{id}`: `cache_ttl_secs` needs a `[cache]` table (its size and TTL bound)"));
            }
            (Some(0), Some(_)) => return Err(format!("model `{id}`: `cache_ttl_secs` must be positive")),
            (Some(ttl), Some(cache)) if ttl > cache.max_ttl_secs() => {
                return Err(format!(
                    "model `{id}`: `cache_ttl_secs` {ttl} is above `[cache] max_ttl_secs` {}",
                    cache.max_ttl_secs()
                ));
            }
            (Some(_), Some(_)) if model.kind != RoleKind::Chat || model.backend.is_some() => {
                return Err(format!("model `{id}`: `cache_ttl_secs` is read only for chat entries"));
            }
            (Some(_), Some(_)) => {}
        }
    }
    Ok(())
}
