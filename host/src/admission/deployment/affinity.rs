//! A conversation's affinity: a stable hash of who calls and what the
//! conversation starts with, so its calls keep going to one deployment while
//! it can take them and the provider's prompt cache keeps hitting there.

use std::hash::{DefaultHasher, Hash, Hasher};

/// How much of the system prompt names a conversation: enough to tell
/// prompts apart, bounded so a long prompt costs no more to hash.
const SYSTEM_PREFIX_BYTES: usize = 1024;

/// The affinity of a call: its caller (key id, else nothing) with its
/// `prompt_cache_key`, else the first bytes of its system prompt. `None` when
/// the call names neither: it has no conversation to keep together, and goes
/// wherever headroom and weight send it.
pub fn affinity_of(caller: Option<&str>, prompt_cache_key: Option<&str>, system: Option<&str>) -> Option<u64> {
    let mut hasher = DefaultHasher::new();
    caller.hash(&mut hasher);
    match (prompt_cache_key, system) {
        (Some(key), _) => {
            0_u8.hash(&mut hasher);
            key.hash(&mut hasher);
        }
        (None, Some(system)) if !system.is_empty() => {
            1_u8.hash(&mut hasher);
            prefix(system, SYSTEM_PREFIX_BYTES).hash(&mut hasher);
        }
        (None, _) => return None,
    }
    Some(hasher.finish())
}

/// At most `bytes` of `text`, cut at a character boundary.
fn prefix(text: &str, bytes: usize) -> &str {
    if text.len() <= bytes {
        return text;
    }
    let mut end = bytes;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_conversation_hashes_the_same_and_another_caller_does_not() {
        let a = affinity_of(Some("k1"), Some("conv-1"), None);
        assert_eq!(a, affinity_of(Some("k1"), Some("conv-1"), Some("ignored when a cache key is given")));
        assert_ne!(a, affinity_of(Some("k2"), Some("conv-1"), None));
        assert_ne!(a, affinity_of(Some("k1"), Some("conv-2"), None));
        let long = "é".repeat(2000);
        let cut = format!("{long}tail that differs");
        assert_eq!(affinity_of(None, None, Some(&long)), affinity_of(None, None, Some(&cut)), "the prefix names it");
        assert_eq!(affinity_of(Some("k1"), None, None), None, "no conversation: no affinity");
        assert_eq!(affinity_of(Some("k1"), None, Some("")), None);
    }
}
