//! A reasoning item as a thinking block's signature: `{"id", "encrypted_content"}`
//! as compact JSON. Both are needed to send the item back (the API requires the
//! `id`; with `store: false` only `encrypted_content` holds the reasoning).

use serde::{Deserialize, Serialize};

/// The parts of a reasoning item that must go back verbatim.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReasoningSignature {
    pub id: String,
    pub encrypted_content: String,
}

impl ReasoningSignature {
    /// The signature text; `None` only if serializing two strings failed.
    pub fn to_text(&self) -> Option<String> {
        serde_json::to_string(self).ok()
    }

    /// The item a signature names; `None` for a signature this module did not
    /// write (another provider's, or text a caller made up).
    pub fn parse(text: &str) -> Option<Self> {
        serde_json::from_str(text).ok()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_signature_round_trips_and_foreign_text_is_not_one() {
        let signature = ReasoningSignature { id: "rs_1".into(), encrypted_content: "gAAAA".into() };
        assert_eq!(ReasoningSignature::parse(&signature.to_text().unwrap()), Some(signature));
        assert_eq!(ReasoningSignature::parse("EqQBCkYIBxgCKkD-anthropic-signature"), None);
    }
}
