//! A Gemini thought signature as a thinking block's signature: the opaque
//! `thoughtSignature` of a part, behind a marker, so that `encode` sends back
//! only signatures Gemini gave (another provider's, or text a caller made up,
//! would be refused by Gemini as an invalid signature).
//!
//! Where the signature goes back is carried by the block's place: a thinking
//! block with a signature stands just before the part the signature came with
//! (see `response` and `request`). Two signatures with no content between them
//! (one on a thought part, one on the part after it) land on one thinking
//! block, joined as the host's stream assembler joins signature pieces: the
//! marker starts each, and base64 has no `:`, so [`parse`] splits them again.

/// The marker before every signature this component writes.
const MARKER: &str = "gemini:";

/// The signature text for a part's `thoughtSignature`.
pub fn wrap(thought_signature: &str) -> String {
    format!("{MARKER}{thought_signature}")
}

/// The `thoughtSignature`s a signature carries, in order; none for one this
/// module did not write.
pub fn parse(signature: &str) -> Vec<&str> {
    match signature.strip_prefix(MARKER) {
        Some(rest) => rest.split(MARKER).filter(|inner| !inner.is_empty()).collect(),
        None => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signatures_round_trip_joined_ones_split_and_foreign_text_is_none() {
        assert_eq!(parse(&wrap("c2ln")), ["c2ln"]);
        assert_eq!(parse(&format!("{}{}", wrap("b3du"), wrap("bmV4dA=="))), ["b3du", "bmV4dA=="]);
        assert!(parse("EqQBCkYIBxgCKkD-anthropic-signature").is_empty());
        assert!(parse("gemini:").is_empty());
    }
}
