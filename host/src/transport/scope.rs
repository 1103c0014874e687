//! The secret store as the host asks it: only for ids the configuration names.
//! The environment store maps any id to a variable (`database-url` is
//! `DATABASE_URL`), and an embedding service's own store may hold far more than
//! model keys; so the host, not each store, refuses every other id. The ids a
//! store is asked for are:
//!
//! - the `credential` of every `[[model]]` entry,
//! - the default credential ids of trusted components (embedded, or whose digest
//!   is in `allowed_digests`), as loaded now,
//! - the client-secret ids `[credentials.*]` tables name (`client_secret`),
//! - the AWS ids [`super::aws::ACCESS_KEY_ID`] and [`super::REGION_ID`].
//!
//! Any other id is unset: nothing is read, and the location says why. An empty
//! value is unset too, whichever store returned it.

use std::collections::BTreeSet;
use std::sync::Arc;

use super::aws::{ACCESS_KEY_ID, REGION_ID};
use super::credentials::{Secret, SecretStore};
use super::secret_cache::SecretCache;

/// The ids the configuration itself names (fixed for a built `Weir`).
#[derive(Debug, Clone, Default)]
pub struct ConfiguredIds {
    ids: BTreeSet<String>,
}

impl ConfiguredIds {
    /// The entries' credentials (and the client secrets token tables read),
    /// plus the AWS ids.
    pub fn new<'a>(entry_credentials: impl IntoIterator<Item = &'a str>) -> Self {
        let mut ids: BTreeSet<String> = entry_credentials.into_iter().map(str::to_owned).collect();
        ids.insert(ACCESS_KEY_ID.to_owned());
        ids.insert(REGION_ID.to_owned());
        Self { ids }
    }

    /// The store, answering only these ids and `trusted` (the trusted
    /// components' default ids as loaded now), through `cache`.
    pub fn scope<'a>(
        &'a self,
        store: &'a dyn SecretStore,
        cache: &'a SecretCache,
        trusted: Arc<BTreeSet<String>>,
    ) -> ScopedSecrets<'a> {
        ScopedSecrets { store, cache, configured: &self.ids, trusted }
    }
}

/// A [`SecretStore`] that forwards only configured ids to the store beneath.
#[derive(Debug, Clone)]
pub struct ScopedSecrets<'a> {
    store: &'a dyn SecretStore,
    cache: &'a SecretCache,
    configured: &'a BTreeSet<String>,
    trusted: Arc<BTreeSet<String>>,
}

impl ScopedSecrets<'_> {
    /// Whether the configuration names this id.
    pub fn is_named(&self, credential_id: &str) -> bool {
        self.configured.contains(credential_id) || self.trusted.contains(credential_id)
    }

    fn refuse(&self, credential_id: &str) {
        tracing::warn!(
            credential = credential_id,
            "secret id not named by the configuration: not looked up (treated as unset)"
        );
    }
}

impl SecretStore for ScopedSecrets<'_> {
    fn get(&self, credential_id: &str) -> Option<Secret> {
        if !self.is_named(credential_id) {
            self.refuse(credential_id);
            return None;
        }
        let read = || self.store.get(credential_id).filter(|secret| !secret.expose().is_empty());
        self.cache.get(credential_id, read)
    }

    fn location(&self, credential_id: &str) -> String {
        if self.is_named(credential_id) {
            self.store.location(credential_id)
        } else {
            format!(
                "not looked up: `{credential_id}` is not an id the configuration names (no entry's `credential`, no \
                 trusted component's default)"
            )
        }
    }

    fn get_pair(&self, credential_id: &str) -> Option<(String, Secret)> {
        if !self.is_named(credential_id) {
            self.refuse(credential_id);
            return None;
        }
        self.store.get_pair(credential_id).filter(|(user, secret)| !user.is_empty() && !secret.expose().is_empty())
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    /// A store that answers every id (as the environment store would) with a
    /// value, or an empty one for `empty`.
    #[derive(Debug)]
    struct Everything;
    impl SecretStore for Everything {
        fn get(&self, id: &str) -> Option<Secret> {
            Some(Secret::new(if id == "empty" { String::new() } else { format!("value-of-{id}") }))
        }
        fn location(&self, id: &str) -> String {
            format!("everything `{id}`")
        }
        fn get_pair(&self, id: &str) -> Option<(String, Secret)> {
            Some((format!("user-{id}"), Secret::new(if id == "empty" { "" } else { "pw" })))
        }
    }

    #[test]
    fn only_configured_and_trusted_ids_reach_the_store() {
        let configured = ConfiguredIds::new(["openai-api-key", "empty"]);
        let trusted = Arc::new(BTreeSet::from(["anthropic-api-key".to_owned()]));
        let cache = SecretCache::new(Duration::ZERO);
        let scoped = configured.scope(&Everything, &cache, trusted);
        assert_eq!(scoped.get("openai-api-key").unwrap().expose(), "value-of-openai-api-key");
        assert_eq!(scoped.get("anthropic-api-key").unwrap().expose(), "value-of-anthropic-api-key");
        assert_eq!(scoped.get(REGION_ID).unwrap().expose(), "value-of-aws-region");
        assert!(scoped.get_pair(ACCESS_KEY_ID).is_some());
        assert!(scoped.get("database-url").is_none(), "an id nothing configured is never looked up");
        assert!(scoped.get_pair("database-url").is_none());
        assert!(scoped.location("database-url").contains("not an id the configuration names"));
        assert_eq!(scoped.location("openai-api-key"), "everything `openai-api-key`");
    }

    #[test]
    fn an_empty_value_is_unset_whatever_the_store() {
        let configured = ConfiguredIds::new(["empty"]);
        let cache = SecretCache::new(Duration::ZERO);
        let scoped = configured.scope(&Everything, &cache, Arc::default());
        assert!(scoped.get("empty").is_none());
        assert!(scoped.get_pair("empty").is_none());
    }
}
