//! Secrets read once and kept, so a call does not ask the store (an environment
//! read, or an embedding service's vault) every time. A kept value is noticed
//! to have changed two ways:
//!
//! - it is read again once it is older than the refresh interval
//!   ([`DEFAULT_SECRET_REFRESH`] unless the builder sets another), so a rotated
//!   key is in use within that interval;
//! - an upstream that rejects the credential (an `authentication_failed`
//!   answer) drops it at once, so the next call reads the store again: a key
//!   rotated at the provider and in the store is picked up by the call after
//!   the first rejection, not after the interval.
//!
//! An unset secret is never kept: a call that finds none reads again, so a
//! secret set after start is used by the next call. Only the ids the
//! configuration names reach this cache ([`super::ScopedSecrets`]), so it is
//! bounded by the configuration.

use std::collections::HashMap;
use std::sync::{PoisonError, RwLock};
use std::time::{Duration, Instant};

use super::credentials::Secret;

/// How long a secret read from the store is used before it is read again.
pub const DEFAULT_SECRET_REFRESH: Duration = Duration::from_secs(30);

#[derive(Debug)]
pub struct SecretCache {
    kept: RwLock<HashMap<String, Kept>>,
    refresh: Duration,
}

#[derive(Debug, Clone)]
struct Kept {
    secret: Secret,
    read_at: Instant,
}

impl SecretCache {
    /// A cache that reads a kept secret again once it is `refresh` old
    /// (`Duration::ZERO`: every call reads the store).
    pub fn new(refresh: Duration) -> Self {
        Self { kept: RwLock::default(), refresh }
    }

    /// The secret under `id`: the kept one while it is fresh, else `read`'s,
    /// kept if it is set.
    pub fn get(&self, id: &str, read: impl FnOnce() -> Option<Secret>) -> Option<Secret> {
        if let Some(kept) = self.kept.read().unwrap_or_else(PoisonError::into_inner).get(id)
            && kept.read_at.elapsed() < self.refresh
        {
            return Some(kept.secret.clone());
        }
        let Some(secret) = read() else {
            self.forget(id);
            return None;
        };
        let kept = Kept { secret: secret.clone(), read_at: Instant::now() };
        self.kept.write().unwrap_or_else(PoisonError::into_inner).insert(id.to_owned(), kept);
        Some(secret)
    }

    /// Drops the secret kept under `id`: the upstream rejected it.
    pub fn forget(&self, id: &str) {
        self.kept.write().unwrap_or_else(PoisonError::into_inner).remove(id);
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use super::*;

    fn counting<'a>(reads: &'a Cell<u32>, value: &'a str) -> impl FnOnce() -> Option<Secret> + 'a {
        move || {
            reads.set(reads.get() + 1);
            (!value.is_empty()).then(|| Secret::new(value))
        }
    }

    #[test]
    fn a_fresh_secret_is_read_once_and_a_forgotten_one_again() {
        let cache = SecretCache::new(Duration::from_secs(3600));
        let reads = Cell::new(0);
        assert_eq!(cache.get("k", counting(&reads, "one")).unwrap().expose(), "one");
        assert_eq!(cache.get("k", counting(&reads, "two")).unwrap().expose(), "one", "kept while fresh");
        assert_eq!(reads.get(), 1);
        cache.forget("k");
        assert_eq!(cache.get("k", counting(&reads, "two")).unwrap().expose(), "two", "read again once forgotten");
        assert_eq!(reads.get(), 2);
    }

    #[test]
    fn a_stale_secret_is_read_again() {
        let cache = SecretCache::new(Duration::ZERO);
        let reads = Cell::new(0);
        assert_eq!(cache.get("k", counting(&reads, "one")).unwrap().expose(), "one");
        assert_eq!(cache.get("k", counting(&reads, "two")).unwrap().expose(), "two");
        assert_eq!(reads.get(), 2);
    }

    #[test]
    fn an_unset_secret_is_never_kept_and_unsetting_drops_the_kept_one() {
        let cache = SecretCache::new(Duration::ZERO);
        let reads = Cell::new(0);
        assert!(cache.get("k", counting(&reads, "")).is_none());
        assert_eq!(cache.get("k", counting(&reads, "set-later")).unwrap().expose(), "set-later");
        assert!(cache.get("k", counting(&reads, "")).is_none(), "an unset value is unset, not the kept one");
        assert_eq!(reads.get(), 3);
    }
}
