//! A Gemini thought signature as a thinking block's signature: the opaque
//! `thoughtSignature` of a part, behind a marker, so that `encode` sends back
//! only signatures Gemini gave (another provider's, or text a caller made up,
//! would be refused by Gemini as an invalid signature).
//!
//! Where the signature goes back is carried by the block's place: a thinking
//! block with a signature stands just before the part the signature came with
//! (see `response` and `request`).

/// The marker before every signature this component writes.
const MARKER: &str = "gemini:";

/// The signature text for a part's `thoughtSignature`.
pub fn wrap(thought_signature: &str) -> String {
    format!("{MARKER}{thought_signature}")
}

/// The `thoughtSignature` a signature carries; `None` for one this module did
/// not write.
pub fn parse(signature: &str) -> Option<&str> {
    signature.strip_prefix(MARKER).filter(|inner| !inner.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_signature_round_trips_and_foreign_text_is_not_one() {
        assert_eq!(parse(&wrap("c2ln")), Some("c2ln"));
        assert_eq!(parse("EqQBCkYIBxgCKkD-anthropic-signature"), None);
        assert_eq!(parse("gemini:"), None);
    }
}
