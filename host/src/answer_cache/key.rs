//! The key an answer is stored under: a SHA-256 of everything that decides
//! what the upstream would answer, and of who may read it.
//!
//! What is hashed, in order, each part length-prefixed so no two different
//! requests write the same bytes:
//! - the key's version and this build's version: a gateway of another build
//!   (whose records may render differently) never reads this one's answers;
//! - the operation and the catalog entry (never the deployment: every
//!   deployment of an entry serves the same model);
//! - the scope and the name it binds (`member:alice`, `team:core`, `key:k1`,
//!   `global`), so no read crosses scopes;
//! - the request as it would be sent, after policy: the conversation the
//!   model reads (prompt-cache breakpoints placed), the wire parameters of the
//!   first attempt (output budget, effort as the entry sends it, temperature
//!   after the entry's sampling rule, stops, schema), how tools and schemas
//!   reach the model, and the caller's native fields and betas the serving
//!   provider is handed. These are the WIT records themselves, rendered by
//!   their derived `Debug`, which names every field: a field added to a record
//!   is in the key without anyone remembering to add it.

use std::fmt::Write as _;

use sha2::{Digest, Sha256};

use crate::caller::Caller;
use crate::config::CacheScope;

/// The version of how a key is made; bumped when the rendering changes.
const KEY_VERSION: &str = "weir-answer-cache/1";

/// A stored answer's key: 32 bytes of SHA-256.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CacheKey(pub [u8; 32]);

impl CacheKey {
    /// Lower-case hex, for the Redis key.
    pub fn hex(&self) -> String {
        hex::encode(self.0)
    }
}

/// Who may read an answer, as the entry's scope binds it for one caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScopeName(String);

impl ScopeName {
    /// The name `scope` binds for `caller`. A scope the caller cannot fill
    /// (a team scope for a caller without a team, a key scope for a library
    /// caller) narrows to the member; a call without any caller (a library
    /// call on a gateway with no keys) is its own `anonymous` member.
    pub fn of(scope: CacheScope, caller: Option<&Caller>) -> Self {
        let member = || match caller {
            Some(caller) => format!("member:{}", caller.member),
            None => "anonymous".to_owned(),
        };
        let name = match scope {
            CacheScope::Global => "global".to_owned(),
            CacheScope::Member => member(),
            CacheScope::Team => match caller.and_then(|caller| caller.team.as_deref()) {
                Some(team) => format!("team:{team}"),
                None => member(),
            },
            CacheScope::Key => match caller.and_then(|caller| caller.key_id.as_deref()) {
                Some(key) => format!("key:{key}"),
                None => member(),
            },
        };
        Self(name)
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// Builds a [`CacheKey`] from its parts, in a fixed order.
pub struct KeyWriter {
    hasher: Sha256,
    scratch: String,
}

impl KeyWriter {
    /// A key for `operation` on `entry`, readable within `scope`.
    pub fn new(operation: &str, entry: &str, scope: &ScopeName) -> Self {
        let mut writer = Self { hasher: Sha256::new(), scratch: String::new() };
        writer.part(KEY_VERSION);
        writer.part(env!("CARGO_PKG_VERSION"));
        writer.part(operation);
        writer.part(entry);
        writer.part(scope.as_str());
        writer
    }

    /// One part, length-prefixed.
    pub fn part(&mut self, text: &str) {
        self.hasher.update((text.len() as u64).to_le_bytes());
        self.hasher.update(text.as_bytes());
    }

    /// One record, by its derived `Debug` (see the module's comment).
    pub fn record(&mut self, record: &impl std::fmt::Debug) {
        self.scratch.clear();
        // Writing into a String cannot fail.
        let _ = write!(self.scratch, "{record:?}");
        let scratch = std::mem::take(&mut self.scratch);
        self.part(&scratch);
        self.scratch = scratch;
    }

    pub fn finish(self) -> CacheKey {
        CacheKey(self.hasher.finalize().into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn caller(member: &str, team: Option<&str>, key: Option<&str>) -> Caller {
        Caller { key_id: key.map(str::to_owned), member: member.to_owned(), team: team.map(str::to_owned) }
    }

    fn key(scope: &ScopeName, body: &str) -> CacheKey {
        let mut writer = KeyWriter::new("chat", "m", scope);
        writer.record(&body);
        writer.finish()
    }

    #[test]
    fn the_same_request_in_the_same_scope_is_the_same_key() {
        let alice = ScopeName::of(CacheScope::Member, Some(&caller("alice", None, Some("k1"))));
        let alice_other_key = ScopeName::of(CacheScope::Member, Some(&caller("alice", None, Some("k2"))));
        assert_eq!(key(&alice, "hi"), key(&alice_other_key, "hi"));
        assert_ne!(key(&alice, "hi"), key(&alice, "hi!"));
    }

    #[test]
    fn no_two_scopes_share_a_key() {
        let alice = caller("alice", Some("core"), Some("k1"));
        let bob = caller("bob", Some("core"), Some("k2"));
        let by = |scope, who: &Caller| key(&ScopeName::of(scope, Some(who)), "hi");
        assert_ne!(by(CacheScope::Member, &alice), by(CacheScope::Member, &bob));
        assert_ne!(by(CacheScope::Key, &alice), by(CacheScope::Key, &bob));
        assert_eq!(by(CacheScope::Team, &alice), by(CacheScope::Team, &bob));
        assert_eq!(by(CacheScope::Global, &alice), by(CacheScope::Global, &bob));
        assert_ne!(by(CacheScope::Team, &alice), by(CacheScope::Member, &alice));
        assert_ne!(by(CacheScope::Global, &alice), by(CacheScope::Team, &alice));
        // A member named like a team is still a member.
        let team_named = caller("team:core", None, None);
        assert_ne!(by(CacheScope::Member, &team_named), by(CacheScope::Team, &alice));
    }

    #[test]
    fn a_scope_the_caller_cannot_fill_narrows_to_its_member() {
        let teamless = caller("carol", None, None);
        assert_eq!(ScopeName::of(CacheScope::Team, Some(&teamless)).as_str(), "member:carol");
        assert_eq!(ScopeName::of(CacheScope::Key, Some(&teamless)).as_str(), "member:carol");
        assert_eq!(ScopeName::of(CacheScope::Member, None).as_str(), "anonymous");
    }

    #[test]
    fn parts_cannot_run_into_each_other() {
        let scope = ScopeName::of(CacheScope::Global, None);
        let mut one = KeyWriter::new("chat", "m", &scope);
        one.part("ab");
        one.part("c");
        let mut two = KeyWriter::new("chat", "m", &scope);
        two.part("a");
        two.part("bc");
        assert_ne!(one.finish(), two.finish());
    }
}
