//! The names of the fleet's keys in Redis, written in one place.
//!
//! On one server they are the names they always were, so a gateway upgraded
//! in place finds its buckets, permits and budgets where it left them. On a
//! Redis Cluster each key carries a hash tag (`{...}`, the part Redis hashes
//! to pick the slot): its owner. A rate account's, permits' or circuit's owner
//! is its model, deployment or caller key (`{model:gpt}`), so the keys of
//! different models spread over the cluster's nodes; a budget account's owner
//! is its scope (`{member:ana}`), so the periods of one scope share a slot and
//! a hold runs one script per scope (see `budgets.rs`).

use crate::accounting::{Period, Scope};

/// The names of one fleet's keys (`[fleet] key_prefix`), tagged on a cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct KeyNames {
    prefix: String,
    tagged: bool,
}

impl KeyNames {
    /// Under `prefix`; each key tagged by its owner when `tagged` (a cluster).
    pub fn new(prefix: &str, tagged: bool) -> Self {
        Self { prefix: prefix.to_owned(), tagged }
    }

    /// Whether keys are hash-tagged (the fleet's Redis is a cluster).
    pub fn tagged(&self) -> bool {
        self.tagged
    }

    /// `owner`'s name, in braces when tagged.
    fn owner(&self, owner: &str) -> String {
        if self.tagged { format!("{{{owner}}}") } else { owner.to_owned() }
    }

    /// The rate account (buckets and throttle) of `owner` (`model:<id>`,
    /// `key:<id>`, `model:<id>/deployment:<name>`).
    pub fn account(&self, owner: &str) -> String {
        format!("{}:account:{}", self.prefix, self.owner(owner))
    }

    /// The `max_concurrency` permits of `owner`.
    pub fn permits(&self, owner: &str) -> String {
        format!("{}:permits:{}", self.prefix, self.owner(owner))
    }

    /// The open circuit of `owner` (a deployment).
    pub fn circuit(&self, owner: &str) -> String {
        format!("{}:circuit:{}", self.prefix, self.owner(owner))
    }

    /// The budget account of `scope` in the `period` starting at `start`
    /// (seconds since the epoch).
    pub fn budget(&self, scope: &Scope, period: Period, start: u64) -> String {
        let owner = self.owner(&format!("{}:{}", scope.kind(), scope.name()));
        format!("{}:budget:{owner}:{}:{start}", self.prefix, period.as_str())
    }

    /// The channel of admin changes (a channel has no slot: a cluster carries
    /// a `PUBLISH` to every node).
    pub fn admin_channel(&self) -> String {
        format!("{}:admin", self.prefix)
    }
}

/// The part of `key` Redis Cluster hashes to pick its slot: the text between
/// the first `{` and the first `}` after it when that is not empty, else the
/// whole key. Keys with the same tag share a slot.
pub(super) fn hash_tag(key: &str) -> &str {
    let Some(open) = key.find('{') else { return key };
    match key[open + 1..].find('}') {
        Some(0) | None => key,
        Some(close) => &key[open + 1..open + 1 + close],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_server_keeps_the_names_it_always_had() {
        let names = KeyNames::new("weir", false);
        assert_eq!(names.account("model:gpt"), "weir:account:model:gpt");
        assert_eq!(names.permits("model:gpt"), "weir:permits:model:gpt");
        assert_eq!(names.circuit("model:gpt/deployment:eu"), "weir:circuit:model:gpt/deployment:eu");
        let ana = Scope::Member("ana".to_owned());
        assert_eq!(names.budget(&ana, Period::Day, 1_765_065_600), "weir:budget:member:ana:day:1765065600");
        assert_eq!(names.admin_channel(), "weir:admin");
    }

    #[test]
    fn a_cluster_tags_each_key_by_its_owner() {
        let names = KeyNames::new("weir", true);
        assert_eq!(names.account("model:gpt"), "weir:account:{model:gpt}");
        assert_eq!(hash_tag(&names.account("model:gpt")), hash_tag(&names.permits("model:gpt")));
        let ana = Scope::Member("ana".to_owned());
        let (day, month) = (names.budget(&ana, Period::Day, 1), names.budget(&ana, Period::Month, 0));
        assert_eq!(day, "weir:budget:{member:ana}:day:1");
        assert_eq!(hash_tag(&day), "member:ana");
        assert_eq!(hash_tag(&day), hash_tag(&month), "a scope's periods share a slot");
        let team = names.budget(&Scope::Team("ana".to_owned()), Period::Day, 1);
        assert_ne!(hash_tag(&day), hash_tag(&team), "scopes are tagged apart, so they spread");
    }

    /// A name holding braces still gives every key of one owner the same tag.
    #[test]
    fn the_tag_is_read_as_redis_reads_it() {
        assert_eq!(hash_tag("plain"), "plain");
        assert_eq!(hash_tag("a:{}:b"), "a:{}:b", "an empty tag: the whole key");
        assert_eq!(hash_tag("a:{x:b"), "a:{x:b", "no closing brace: the whole key");
        assert_eq!(hash_tag("a:{x}:{y}"), "x", "the first tag only");
        let names = KeyNames::new("weir", true);
        let odd = Scope::Key("k}{".to_owned());
        assert_eq!(hash_tag(&names.budget(&odd, Period::Day, 1)), hash_tag(&names.budget(&odd, Period::Month, 1)));
    }
}
