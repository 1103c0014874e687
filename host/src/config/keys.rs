//! The shape a `[[key]]` entry must have, checked when the configuration
//! loads and again whenever the gateway's key ring is rebuilt from it (a
//! reload): non-empty id and member, a `sha256:` hash, an RFC 3339 expiry,
//! positive limits, and no id or hash twice.

use std::collections::BTreeSet;
use std::time::SystemTime;

use super::KeyEntry;

/// The prefix of a configured hash.
pub const HASH_PREFIX: &str = "sha256:";

/// What a checked entry's text says: the token's digest and the expiry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CheckedKey {
    pub digest: [u8; 32],
    pub expires: Option<SystemTime>,
}

impl KeyEntry {
    /// This entry's digest and expiry, or why the entry is not a key.
    pub fn checked(&self) -> Result<CheckedKey, String> {
        let named = |message: String| format!("key `{}`: {message}", self.id);
        if self.id.trim().is_empty() || self.member.trim().is_empty() {
            return Err(format!("key `{}`: `id` and `member` must not be empty", self.id));
        }
        let digest = parse_hash(&self.hash).map_err(named)?;
        let expires = self
            .expires
            .as_deref()
            .map(|text| {
                humantime::parse_rfc3339_weak(text)
                    .map_err(|error| named(format!("`expires` is not an RFC 3339 instant ({error}): `{text}`")))
            })
            .transpose()?;
        if self.rpm == Some(0) || self.tpm == Some(0) {
            return Err(named("`rpm` and `tpm` must be positive when set".to_owned()));
        }
        Ok(CheckedKey { digest, expires })
    }
}

/// Every entry checked, in order; the first failure is the answer. Two
/// entries may not share a hash (a token would be two keys) or an id. The
/// checked keys come back in the entries' order, for the ring to build from.
pub fn check_keys(entries: &[KeyEntry]) -> Result<Vec<CheckedKey>, String> {
    let mut digests = BTreeSet::new();
    let mut ids = BTreeSet::new();
    let mut checked_keys = Vec::with_capacity(entries.len());
    for entry in entries {
        let checked = entry.checked()?;
        if !digests.insert(checked.digest) {
            return Err(format!("key `{}`: the same hash appears on two keys", entry.id));
        }
        if !ids.insert(entry.id.as_str()) {
            return Err(format!("key id `{}` appears twice", entry.id));
        }
        checked_keys.push(checked);
    }
    Ok(checked_keys)
}

/// `sha256:<64 hex digits>`, as `weir keys new` prints it.
pub fn parse_hash(text: &str) -> Result<[u8; 32], String> {
    let hex_digits = text
        .strip_prefix(HASH_PREFIX)
        .ok_or_else(|| format!("`hash` must be `{HASH_PREFIX}<64 hex digits>` (see `weir keys new`)"))?;
    let mut digest = [0_u8; 32];
    hex::decode_to_slice(hex_digits.trim(), &mut digest)
        .map_err(|_| format!("`hash` must be `{HASH_PREFIX}<64 hex digits>` (see `weir keys new`)"))?;
    Ok(digest)
}
