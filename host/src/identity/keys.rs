//! The gateway's caller keys: `[[key]]` entries turned into a ring that answers
//! "who presented this token, and may they call this model?".
//!
//! Only the SHA-256 of a token is configured or held. A presented token is
//! hashed once; its digest's first eight bytes pick the candidate keys (a map
//! lookup, so a ring of thousands costs what a ring of ten does) and the whole
//! digest is compared with each candidate in constant time. The timing can at
//! most reveal whether SHA-256 of a guess shares a prefix with some key's
//! digest, which says nothing about any token.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::SystemTime;

use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use super::Caller;
use crate::admission::{Limits, ModelGate, RateStore};
use crate::config::{CheckedKey, DEFAULT_MAX_QUEUE, HASH_PREFIX, KeyEntry, check_keys};

/// One configured key, as calls use it.
#[derive(Debug)]
pub struct Key {
    pub id: String,
    pub member: String,
    pub team: Option<String>,
    digest: [u8; 32],
    /// The catalog ids this key may call; `None`: every model.
    models: Option<BTreeSet<String>>,
    expires: Option<SystemTime>,
    /// A rotated runtime key's old digest and the instant its grace ends:
    /// until then the old token is this key too.
    previous: Option<([u8; 32], SystemTime)>,
    /// Where the key is defined: the config file or the admin plane.
    pub source: KeySource,
    pub admin: bool,
    /// The effort this key's calls run at when they name none.
    pub default_effort: Option<crate::types::Effort>,
    /// The key's own request and token buckets, when it declares `rpm` / `tpm`.
    gate: Option<Arc<ModelGate>>,
    limits: Limits,
}

impl Key {
    /// The admin a console session opened by single sign-on acts as: `id`
    /// names the person (the admin audit's actor). It is in no ring, so no
    /// token is ever this key (its digest is no token's hash); it may call no
    /// model and has no buckets: it reads and changes through the admin
    /// routes only.
    pub(crate) fn signed_on_admin(id: String) -> Self {
        Key {
            member: id.clone(),
            id,
            team: None,
            digest: [0; 32],
            models: Some(BTreeSet::new()),
            expires: None,
            previous: None,
            source: KeySource::Runtime,
            admin: true,
            default_effort: None,
            gate: None,
            limits: Limits::default(),
        }
    }

    /// The identity a call made with this key carries.
    pub fn caller(&self) -> Caller {
        Caller { key_id: Some(self.id.clone()), member: self.member.clone(), team: self.team.clone() }
    }

    /// Whether the key's own buckets debit tokens (it declares `tpm`), so its
    /// calls' input must be counted.
    pub fn counts_tokens(&self) -> bool {
        self.limits.tpm.is_some()
    }

    /// Whether this key may call catalog entry (or role) `model`.
    pub fn permits(&self, model: &str) -> bool {
        self.models.as_ref().is_none_or(|models| models.contains(model))
    }

    /// Whether the key may be used at `now` (not past its expiry).
    pub fn live_at(&self, now: SystemTime) -> bool {
        self.expires.is_none_or(|expires| now < expires)
    }

    /// The key's admission gate, when it has rate limits.
    pub fn gate(&self) -> Option<&Arc<ModelGate>> {
        self.gate.as_ref()
    }
}

/// Where a key is defined.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeySource {
    /// A `[[key]]` in the config file (reloaded on change or SIGHUP).
    File,
    /// Created through the admin API (`/admin/v1/keys`), kept beside the ledger.
    Runtime,
}

impl KeySource {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::File => "file",
            Self::Runtime => "runtime",
        }
    }
}

/// A key the admin plane defines: its `[[key]]`-shaped entry, and the old
/// hash a rotation keeps working until its grace ends.
#[derive(Debug, Clone, PartialEq)]
pub struct RuntimeKeyEntry {
    pub entry: KeyEntry,
    pub previous: Option<(String, SystemTime)>,
}

/// Why a presented token was not accepted. The token never appears in it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    #[error("no API key was presented (send `Authorization: Bearer <key>` or `x-api-key: <key>`)")]
    Missing,
    #[error("the API key is not valid")]
    Unknown,
    #[error("the API key `{key}` has expired")]
    Expired { key: String },
}

/// Every configured key. Swapped whole when the file changes.
#[derive(Debug, Default)]
pub struct KeyRing {
    keys: Vec<Arc<Key>>,
    by_id: HashMap<String, Arc<Key>>,
    /// Keys by the first eight bytes of their digest.
    by_prefix: HashMap<u64, Vec<Arc<Key>>>,
}

impl KeyRing {
    /// Builds the ring from `[[key]]` entries. `previous` lends its buckets to
    /// keys whose id and limits are unchanged, so a reload does not refill them.
    /// The entries' shape is checked first ([`check_keys`], as the config's
    /// load checks it), so a reload meets the same errors a start does.
    pub fn new(entries: &[KeyEntry], previous: Option<&KeyRing>, store: &dyn RateStore) -> Result<Self, String> {
        Self::with_runtime(entries, &[], previous, store)
    }

    /// The ring of the file's keys and the admin plane's. An id defined in
    /// both is refused (neither source silently wins), as is a token hash
    /// that two keys share, a rotated key's old hash included.
    pub fn with_runtime(
        file: &[KeyEntry],
        runtime: &[RuntimeKeyEntry],
        previous: Option<&KeyRing>,
        store: &dyn RateStore,
    ) -> Result<Self, String> {
        if let Some(both) = runtime.iter().find(|key| file.iter().any(|entry| entry.id == key.entry.id)) {
            return Err(format!(
                "key `{}` is defined both in the config file and through the admin API; remove one of them",
                both.entry.id
            ));
        }
        let entries: Vec<KeyEntry> = file.iter().cloned().chain(runtime.iter().map(|key| key.entry.clone())).collect();
        let checked = check_keys(&entries)?;
        let mut digests: std::collections::HashSet<[u8; 32]> = checked.iter().map(|key| key.digest).collect();
        let mut ring = Self::default();
        for (index, (entry, checked)) in entries.iter().zip(checked).enumerate() {
            let mut key = key(entry, checked, previous, store);
            if let Some(runtime) = index.checked_sub(file.len()).and_then(|at| runtime.get(at)) {
                key.source = KeySource::Runtime;
                if let Some((hash, until)) = &runtime.previous {
                    let old =
                        crate::config::parse_hash(hash).map_err(|error| format!("key `{}`: {error}", entry.id))?;
                    if !digests.insert(old) {
                        return Err(format!("key `{}`: the same hash appears on two keys", entry.id));
                    }
                    key.previous = Some((old, *until));
                }
            }
            let key = Arc::new(key);
            ring.by_id.insert(key.id.clone(), Arc::clone(&key));
            ring.by_prefix.entry(prefix(&key.digest)).or_default().push(Arc::clone(&key));
            if let Some((old, _)) = &key.previous {
                let candidates = ring.by_prefix.entry(prefix(old)).or_default();
                if !candidates.iter().any(|candidate| Arc::ptr_eq(candidate, &key)) {
                    candidates.push(Arc::clone(&key));
                }
            }
            ring.keys.push(key);
        }
        Ok(ring)
    }

    /// Every key, the file's first.
    pub fn iter(&self) -> impl Iterator<Item = &Arc<Key>> {
        self.keys.iter()
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    pub fn len(&self) -> usize {
        self.keys.len()
    }

    pub fn get(&self, id: &str) -> Option<&Arc<Key>> {
        self.by_id.get(id)
    }

    /// The key a presented token belongs to: the candidates sharing its
    /// digest's prefix, each compared in full in constant time.
    pub fn authenticate(&self, token: Option<&str>, now: SystemTime) -> Result<&Arc<Key>, AuthError> {
        let token = token.map(str::trim).filter(|token| !token.is_empty()).ok_or(AuthError::Missing)?;
        let digest: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        let candidates = self.by_prefix.get(&prefix(&digest)).map_or(&[][..], Vec::as_slice);
        let mut found = None;
        for key in candidates {
            let current = bool::from(key.digest.ct_eq(&digest));
            // The old token of a rotation counts until its grace ends.
            let old = key.previous.is_some_and(|(old, until)| bool::from(old.ct_eq(&digest)) && now < until);
            if current || old {
                found = Some(key);
            }
        }
        let key = found.ok_or(AuthError::Unknown)?;
        match key.expires {
            Some(expires) if now >= expires => Err(AuthError::Expired { key: key.id.clone() }),
            _ => Ok(key),
        }
    }
}

fn prefix(digest: &[u8; 32]) -> u64 {
    let mut bytes = [0_u8; 8];
    bytes.copy_from_slice(&digest[..8]);
    u64::from_le_bytes(bytes)
}

fn key(entry: &KeyEntry, checked: CheckedKey, previous: Option<&KeyRing>, store: &dyn RateStore) -> Key {
    let CheckedKey { digest, expires } = checked;
    let limits = Limits { rpm: entry.rpm.map(u64::from), tpm: entry.tpm };
    let reused = previous.and_then(|ring| ring.get(&entry.id)).filter(|old| old.limits == limits);
    let gate = match reused {
        Some(old) => old.gate.clone(),
        None if limits.rpm.is_some() || limits.tpm.is_some() => {
            let account = store.account(&format!("key:{}", entry.id), limits);
            Some(ModelGate::new(format!("key:{}", entry.id), account, None, Some(DEFAULT_MAX_QUEUE)))
        }
        None => None,
    };
    Key {
        id: entry.id.clone(),
        member: entry.member.clone(),
        team: entry.team.clone(),
        digest,
        models: entry.models.as_ref().map(|models| models.iter().cloned().collect()),
        expires,
        previous: None,
        source: KeySource::File,
        admin: entry.admin,
        default_effort: entry.default_effort,
        gate,
        limits,
    }
}

/// A fresh key: the token (shown once) and the `[[key]]` lines that admit it.
#[derive(Debug)]
pub struct NewKey {
    pub token: String,
    pub hash: String,
}

/// Mints a token of 32 bytes from the operating system's random source.
pub fn new_key() -> Result<NewKey, String> {
    let mut bytes = [0_u8; 32];
    getrandom::fill(&mut bytes).map_err(|error| format!("the operating system's random source failed: {error}"))?;
    let token = format!("weir-{}", hex::encode(bytes));
    Ok(NewKey { hash: hash_of(&token), token })
}

/// The configured form of a token's hash.
pub fn hash_of(token: &str) -> String {
    format!("{HASH_PREFIX}{}", hex::encode(Sha256::digest(token.as_bytes())))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admission::InProcessStore;
    use std::time::Duration;

    fn entry(id: &str, token: &str) -> KeyEntry {
        KeyEntry {
            id: id.into(),
            member: "ana".into(),
            team: Some("search".into()),
            hash: hash_of(token),
            models: None,
            rpm: None,
            tpm: None,
            expires: None,
            admin: false,
            default_effort: None,
            daily_tokens: None,
            monthly_tokens: None,
            daily_usd: None,
            monthly_usd: None,
            max_call_tokens: None,
            max_call_usd: None,
        }
    }

    #[test]
    fn a_signed_on_admin_calls_no_model_and_no_token_is_it() {
        let key = Key::signed_on_admin("oidc:s-1 <ana@example.com>".to_owned());
        assert!(key.admin && key.live_at(SystemTime::now()));
        assert!(!key.permits("gpt-4.1") && key.gate().is_none());
        assert_eq!(key.caller().member, "oidc:s-1 <ana@example.com>");
    }

    #[test]
    fn a_token_finds_its_key_and_its_caller() {
        let ring = KeyRing::new(&[entry("a", "tok-a"), entry("b", "tok-b")], None, &InProcessStore).unwrap();
        let key = ring.authenticate(Some("tok-b"), SystemTime::now()).unwrap();
        assert_eq!(
            key.caller(),
            Caller { key_id: Some("b".into()), member: "ana".into(), team: Some("search".into()) }
        );
    }

    #[test]
    fn missing_unknown_and_expired_tokens_are_refused_without_echoing_them() {
        let mut expiring = entry("old", "tok-old");
        expiring.expires = Some("2026-01-01T00:00:00Z".into());
        let ring = KeyRing::new(&[entry("a", "tok-a"), expiring], None, &InProcessStore).unwrap();
        let now = humantime::parse_rfc3339("2026-06-01T00:00:00Z").unwrap();
        assert_eq!(ring.authenticate(None, now).unwrap_err(), AuthError::Missing);
        assert_eq!(ring.authenticate(Some("  "), now).unwrap_err(), AuthError::Missing);
        let unknown = ring.authenticate(Some("tok-zzz"), now).unwrap_err();
        assert_eq!(unknown, AuthError::Unknown);
        assert!(!unknown.to_string().contains("tok-zzz"));
        let expired = ring.authenticate(Some("tok-old"), now).unwrap_err();
        assert_eq!(expired, AuthError::Expired { key: "old".into() });
        assert!(!expired.to_string().contains("tok-old"));
        let before = now - Duration::from_secs(365 * 86_400);
        assert!(ring.authenticate(Some("tok-old"), before).is_ok(), "valid until it expires");
    }

    #[test]
    fn the_model_list_is_exact() {
        let mut limited = entry("a", "tok-a");
        limited.models = Some(vec!["gpt-4.1-mini".into()]);
        let ring = KeyRing::new(&[limited, entry("b", "tok-b")], None, &InProcessStore).unwrap();
        let now = SystemTime::now();
        assert!(ring.authenticate(Some("tok-a"), now).unwrap().permits("gpt-4.1-mini"));
        assert!(!ring.authenticate(Some("tok-a"), now).unwrap().permits("gpt-4.1"));
        assert!(ring.authenticate(Some("tok-b"), now).unwrap().permits("anything"));
    }

    #[test]
    fn bad_entries_are_named() {
        let mut bad_hash = entry("a", "t");
        bad_hash.hash = "md5:00".into();
        assert!(KeyRing::new(&[bad_hash], None, &InProcessStore).unwrap_err().contains("key `a`: `hash` must be"));
        let mut short = entry("a", "t");
        short.hash = "sha256:abcd".into();
        assert!(KeyRing::new(&[short], None, &InProcessStore).is_err());
        let mut bad_date = entry("a", "t");
        bad_date.expires = Some("next tuesday".into());
        assert!(KeyRing::new(&[bad_date], None, &InProcessStore).unwrap_err().contains("RFC 3339"));
        let twice = KeyRing::new(&[entry("a", "t"), entry("a", "u")], None, &InProcessStore).unwrap_err();
        assert!(twice.contains("appears twice"), "{twice}");
        let same_hash = KeyRing::new(&[entry("a", "t"), entry("b", "t")], None, &InProcessStore).unwrap_err();
        assert!(same_hash.contains("same hash"), "{same_hash}");
    }

    #[test]
    fn a_reload_keeps_the_buckets_of_unchanged_keys() {
        let mut limited = entry("a", "tok-a");
        limited.rpm = Some(10);
        let first = KeyRing::new(std::slice::from_ref(&limited), None, &InProcessStore).unwrap();
        let second = KeyRing::new(std::slice::from_ref(&limited), Some(&first), &InProcessStore).unwrap();
        let (old, new) = (first.get("a").unwrap().gate().unwrap(), second.get("a").unwrap().gate().unwrap());
        assert!(Arc::ptr_eq(old, new));
        limited.rpm = Some(20);
        let third = KeyRing::new(&[limited], Some(&second), &InProcessStore).unwrap();
        assert!(!Arc::ptr_eq(new, third.get("a").unwrap().gate().unwrap()), "new limits, new buckets");
    }

    #[test]
    fn new_keys_are_distinct_and_hash_as_configured() {
        let (a, b) = (new_key().unwrap(), new_key().unwrap());
        assert_ne!(a.token, b.token);
        assert_eq!(a.token.len(), "weir-".len() + 64);
        let ring =
            KeyRing::new(&[KeyEntry { hash: a.hash.clone(), ..entry("a", "unused") }], None, &InProcessStore).unwrap();
        assert!(ring.authenticate(Some(&a.token), SystemTime::now()).is_ok());
    }

    #[test]
    fn a_rotated_keys_old_token_works_until_its_grace_ends() {
        let now = SystemTime::now();
        let rotated = RuntimeKeyEntry {
            entry: entry("svc", "tok-new"),
            previous: Some((hash_of("tok-old"), now + Duration::from_secs(60))),
        };
        let ring = KeyRing::with_runtime(&[entry("file", "tok-file")], &[rotated], None, &InProcessStore).unwrap();
        assert_eq!(ring.authenticate(Some("tok-new"), now).unwrap().id, "svc");
        let old = ring.authenticate(Some("tok-old"), now).unwrap();
        assert_eq!((old.id.as_str(), old.source), ("svc", KeySource::Runtime));
        assert_eq!(ring.authenticate(Some("tok-file"), now).unwrap().source, KeySource::File);
        let later = now + Duration::from_secs(61);
        assert_eq!(ring.authenticate(Some("tok-old"), later).unwrap_err(), AuthError::Unknown);
        assert!(ring.authenticate(Some("tok-new"), later).is_ok());
    }

    #[test]
    fn an_id_or_a_token_of_both_sources_is_refused() {
        let runtime = |id: &str, token: &str| RuntimeKeyEntry { entry: entry(id, token), previous: None };
        let same_id =
            KeyRing::with_runtime(&[entry("dup", "a")], &[runtime("dup", "b")], None, &InProcessStore).unwrap_err();
        assert!(same_id.contains("defined both in the config file and through the admin API"), "{same_id}");
        let same_token =
            KeyRing::with_runtime(&[entry("f", "a")], &[runtime("r", "a")], None, &InProcessStore).unwrap_err();
        assert!(same_token.contains("same hash"), "{same_token}");
        let old_is_file = RuntimeKeyEntry { entry: entry("r", "b"), previous: Some((hash_of("a"), SystemTime::now())) };
        let clash = KeyRing::with_runtime(&[entry("f", "a")], &[old_is_file], None, &InProcessStore).unwrap_err();
        assert!(clash.contains("same hash"), "{clash}");
    }
}
