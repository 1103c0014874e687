//! Shared by the benches that configure caller keys.

use weir_host::identity::hash_of;

/// `count` `[[key]]` entries for a config (ids `k0`…, members `m0`…), the last
/// one accepting `last_token` and the others tokens no caller holds: a key
/// ring of any size whose matching key is the last one.
pub fn key_lines(count: usize, last_token: &str) -> String {
    (0..count)
        .map(|i| {
            let token = if i == count - 1 { last_token.to_owned() } else { format!("weir-other-{i}") };
            format!("[[key]]\nid = \"k{i}\"\nmember = \"m{i}\"\nhash = \"{}\"\n", hash_of(&token))
        })
        .collect()
}
