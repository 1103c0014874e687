//! Reasoning sealed by the gateway. A provider's thinking (Anthropic's text
//! and signature, redacted thinking) must come back verbatim on the next turn,
//! but a Responses API client only carries an opaque `encrypted_content`. Weir
//! seals the thinking blocks into that string with authenticated encryption
//! (AES-256-GCM, a random 96-bit nonce per item) under the operator's key, bound
//! to the catalog entry that produced them (the associated data), and opens
//! them on the next turn. An item that does not open — sealed for another
//! entry, under another key, edited, or not Weir's at all — is refused: what a
//! caller wrote never reaches a provider as a signature.
//!
//! The key comes from `[responses] seal_key_env` or `seal_key_file` (32 bytes,
//! hex or base64), read as the ledger's anchor key is; without either, a random
//! key is drawn for the process and items do not survive a restart.

use std::sync::Arc;

use aws_lc_rs::aead::{AES_256_GCM, Aad, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};
use base64::Engine;
use serde::{Deserialize, Serialize};

use crate::catalog::{Config, KeySource, KeySourceError, read_key};
use crate::types::Thinking;

/// What every sealed item starts with: the format's version, so a future one
/// can be told apart.
const PREFIX: &str = "weir1.";

/// Bound into every item beside the entry id, so a sealed item is not mistaken
/// for any other use of the key.
const DOMAIN: &[u8] = b"weir reasoning seal v1\0";

/// The key length AES-256-GCM takes.
const KEY_BYTES: usize = 32;

const BASE64: base64::engine::GeneralPurpose = base64::engine::general_purpose::URL_SAFE_NO_PAD;

/// The process's sealing key. Cheap to clone; never printed.
#[derive(Clone)]
pub struct ReasoningSeal {
    key: Arc<LessSafeKey>,
    /// The key was drawn at start, not configured.
    ephemeral: bool,
}

impl std::fmt::Debug for ReasoningSeal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReasoningSeal").field("ephemeral", &self.ephemeral).finish_non_exhaustive()
    }
}

/// Why the configured key cannot be used (never holds the key).
#[derive(Debug, thiserror::Error)]
pub enum SealKeyError {
    #[error(transparent)]
    Source(#[from] KeySourceError),
    #[error("`[responses]` seal key from {from}: it must be {KEY_BYTES} bytes written as hex (64 digits) or base64")]
    Malformed { from: String },
    #[error("the cryptographic library refused the seal key")]
    Unusable,
    #[error("the operating system's random source failed: {0}")]
    Random(String),
}

/// Why an item does not open. The caller is told which item, never why in
/// more detail than this: all of them mean "not sealed here for this entry".
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum OpenError {
    #[error("it is not an item this gateway sealed")]
    NotSealedHere,
    #[error("it was not sealed by this gateway for this model, or it was changed")]
    DoesNotOpen,
}

/// One thinking block as sealed.
#[derive(Serialize, Deserialize)]
struct Block {
    text: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    signature: Option<String>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    redacted: bool,
}

impl ReasoningSeal {
    /// The key `[responses]` names, or a random one (logged as a warning) when
    /// it names none.
    pub fn from_config(config: &Config) -> Result<Self, SealKeyError> {
        Self::from_config_with(config, |name| std::env::var_os(name))
    }

    fn from_config_with(
        config: &Config,
        env: impl Fn(&str) -> Option<std::ffi::OsString>,
    ) -> Result<Self, SealKeyError> {
        let settings = &config.responses;
        let source = KeySource {
            table: "responses",
            env_field: "seal_key_env",
            file_field: "seal_key_file",
            env: settings.seal_key_env.as_deref(),
            file: settings.seal_key_file.as_deref(),
        };
        match read_key(config, source, &env)? {
            Some((text, from)) => {
                let bytes = key_bytes(&text).ok_or(SealKeyError::Malformed { from })?;
                Self::with_key(&bytes, false)
            }
            // The gateway says so at start (`weir serve`); a command that seals
            // nothing has nothing to warn about.
            None => Self::random(),
        }
    }

    /// A key drawn from the operating system's random source.
    pub fn random() -> Result<Self, SealKeyError> {
        let mut bytes = [0u8; KEY_BYTES];
        getrandom::fill(&mut bytes).map_err(|error| SealKeyError::Random(error.to_string()))?;
        Self::with_key(&bytes, true)
    }

    fn with_key(bytes: &[u8; KEY_BYTES], ephemeral: bool) -> Result<Self, SealKeyError> {
        let key = UnboundKey::new(&AES_256_GCM, bytes).map_err(|_| SealKeyError::Unusable)?;
        Ok(Self { key: Arc::new(LessSafeKey::new(key)), ephemeral })
    }

    /// Whether the key was drawn at start rather than configured.
    pub fn is_ephemeral(&self) -> bool {
        self.ephemeral
    }

    /// The blocks sealed for `entry`: `weir1.` and base64url of nonce, ciphertext and tag.
    pub fn seal(&self, entry: &str, blocks: &[Thinking]) -> Result<String, SealError> {
        let blocks: Vec<Block> = blocks
            .iter()
            .map(|b| Block { text: b.text.clone(), signature: b.signature.clone(), redacted: b.redacted })
            .collect();
        let mut in_out = serde_json::to_vec(&blocks).map_err(|_| SealError)?;
        let mut nonce = [0u8; NONCE_LEN];
        getrandom::fill(&mut nonce).map_err(|_| SealError)?;
        self.key
            .seal_in_place_append_tag(Nonce::assume_unique_for_key(nonce), Aad::from(aad(entry)), &mut in_out)
            .map_err(|_| SealError)?;
        let mut sealed = Vec::with_capacity(NONCE_LEN + in_out.len());
        sealed.extend_from_slice(&nonce);
        sealed.extend_from_slice(&in_out);
        Ok(format!("{PREFIX}{}", BASE64.encode(sealed)))
    }

    /// The blocks `sealed` holds, when it was sealed under this key for `entry`.
    pub fn open(&self, entry: &str, sealed: &str) -> Result<Vec<Thinking>, OpenError> {
        let encoded = sealed.strip_prefix(PREFIX).ok_or(OpenError::NotSealedHere)?;
        let mut bytes = BASE64.decode(encoded).map_err(|_| OpenError::NotSealedHere)?;
        if bytes.len() < NONCE_LEN {
            return Err(OpenError::NotSealedHere);
        }
        let mut nonce = [0u8; NONCE_LEN];
        nonce.copy_from_slice(&bytes[..NONCE_LEN]);
        let plain = self
            .key
            .open_in_place(Nonce::assume_unique_for_key(nonce), Aad::from(aad(entry)), &mut bytes[NONCE_LEN..])
            .map_err(|_| OpenError::DoesNotOpen)?;
        let blocks: Vec<Block> = serde_json::from_slice(plain).map_err(|_| OpenError::DoesNotOpen)?;
        Ok(blocks
            .into_iter()
            .map(|b| Thinking { text: b.text, signature: b.signature, redacted: b.redacted })
            .collect())
    }
}

/// Sealing failed (the random source, or a serializer that cannot fail on these types).
#[derive(Debug, Clone, Copy, thiserror::Error)]
#[error("the reasoning could not be sealed")]
pub struct SealError;

fn aad(entry: &str) -> Vec<u8> {
    let mut aad = Vec::with_capacity(DOMAIN.len() + entry.len());
    aad.extend_from_slice(DOMAIN);
    aad.extend_from_slice(entry.as_bytes());
    aad
}

/// 32 bytes from hex (64 digits) or base64 (standard or URL-safe, padded or
/// not), surrounding whitespace ignored.
fn key_bytes(text: &[u8]) -> Option<[u8; KEY_BYTES]> {
    let text = std::str::from_utf8(text.trim_ascii()).ok()?;
    let decoded = hex::decode(text)
        .ok()
        .or_else(|| base64::engine::general_purpose::STANDARD.decode(text).ok())
        .or_else(|| base64::engine::general_purpose::URL_SAFE.decode(text).ok())
        .or_else(|| base64::engine::general_purpose::STANDARD_NO_PAD.decode(text).ok())
        .or_else(|| BASE64.decode(text).ok())?;
    decoded.try_into().ok()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn blocks() -> Vec<Thinking> {
        vec![
            Thinking { text: "Two cities.".into(), signature: Some("sig==".into()), redacted: false },
            Thinking { text: "EmwK".into(), signature: None, redacted: true },
        ]
    }

    #[test]
    fn a_sealed_item_opens_for_its_entry_only() {
        let seal = ReasoningSeal::random().unwrap();
        let sealed = seal.seal("claude", &blocks()).unwrap();
        assert!(sealed.starts_with(PREFIX));
        assert!(!sealed.contains("Two cities"), "the thinking is not readable");
        assert_eq!(seal.open("claude", &sealed).unwrap(), blocks());
        assert_eq!(seal.open("claude-other", &sealed), Err(OpenError::DoesNotOpen));
        let other_key = ReasoningSeal::random().unwrap();
        assert_eq!(other_key.open("claude", &sealed), Err(OpenError::DoesNotOpen));
        assert_ne!(seal.seal("claude", &blocks()).unwrap(), sealed, "a fresh nonce per item");
    }

    #[test]
    fn an_edited_or_foreign_item_does_not_open() {
        let seal = ReasoningSeal::random().unwrap();
        let sealed = seal.seal("m", &blocks()).unwrap();
        let mut bytes = BASE64.decode(&sealed[PREFIX.len()..]).unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 1;
        let tampered = format!("{PREFIX}{}", BASE64.encode(bytes));
        assert_eq!(seal.open("m", &tampered), Err(OpenError::DoesNotOpen));
        assert_eq!(seal.open("m", "gAAAAABo-openai-own-item"), Err(OpenError::NotSealedHere));
        assert_eq!(seal.open("m", "weir1.!!"), Err(OpenError::NotSealedHere));
        assert_eq!(seal.open("m", "weir1.AAAA"), Err(OpenError::NotSealedHere));
    }

    #[test]
    fn the_key_comes_from_the_config_as_hex_or_base64() {
        let hex_key = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";
        let config = Config::from_toml("[responses]\nseal_key_env = \"SEAL\"\n", "(test)").unwrap();
        let env = |value: &'static str| move |name: &str| (name == "SEAL").then(|| std::ffi::OsString::from(value));
        let by_hex = ReasoningSeal::from_config_with(&config, env(hex_key)).unwrap();
        assert!(!by_hex.is_ephemeral());
        let b64 = base64::engine::general_purpose::STANDARD.encode(hex::decode(hex_key).unwrap());
        let b64: &'static str = Box::leak(b64.into_boxed_str());
        let by_b64 = ReasoningSeal::from_config_with(&config, env(b64)).unwrap();
        let sealed = by_hex.seal("m", &blocks()).unwrap();
        assert_eq!(by_b64.open("m", &sealed).unwrap(), blocks(), "the same key either way");

        let short = ReasoningSeal::from_config_with(&config, env("abcd")).unwrap_err();
        assert!(short.to_string().contains("$SEAL") && !short.to_string().contains("abcd"), "{short}");
        let missing = ReasoningSeal::from_config_with(&config, |_| None).unwrap_err();
        assert_eq!(missing.to_string(), "`[responses] seal_key_env` names SEAL, which is not set");
        let none = Config::from_toml("", "(test)").unwrap();
        assert!(ReasoningSeal::from_config_with(&none, |_| None).unwrap().is_ephemeral());
        let both = Config::from_toml("[responses]\nseal_key_env = \"A\"\nseal_key_file = \"b\"\n", "(test)").unwrap();
        assert!(ReasoningSeal::from_config_with(&both, |_| None).unwrap_err().to_string().contains("set one"));
    }
}
