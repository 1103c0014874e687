//! First-party components, built from `providers/*` by `build.rs` and compiled
//! into the binary so `weir` runs with no providers folder at all.

/// A first-party component compiled into the binary.
pub struct Embedded {
    pub name: &'static str,
    pub bytes: &'static [u8],
    /// The bytes' hex SHA-256, computed by `build.rs`: a gateway whose artifact
    /// cache holds the compiled component loads it without reading `bytes`,
    /// so those pages never become resident (hashing them at every start did).
    pub digest: &'static str,
}

/// A component whose path `build.rs` set in `$var` and its digest in `$var_SHA256`.
macro_rules! embedded {
    ($name:literal, $var:literal) => {
        Embedded { name: $name, bytes: include_bytes!(env!($var)), digest: env!(concat!($var, "_SHA256")) }
    };
}

pub const EMBEDDED: &[Embedded] = &[
    embedded!("openai", "WEIR_EMBEDDED_OPENAI"),
    embedded!("anthropic", "WEIR_EMBEDDED_ANTHROPIC"),
    embedded!("anthropic-bedrock", "WEIR_EMBEDDED_ANTHROPIC_BEDROCK"),
    embedded!("anthropic-bedrock-mantle", "WEIR_EMBEDDED_ANTHROPIC_BEDROCK_MANTLE"),
    embedded!("bedrock-converse", "WEIR_EMBEDDED_BEDROCK_CONVERSE"),
    embedded!("bedrock-retrieval", "WEIR_EMBEDDED_BEDROCK_RETRIEVAL"),
    embedded!("gemini", "WEIR_EMBEDDED_GEMINI"),
    embedded!("anthropic-vertex", "WEIR_EMBEDDED_ANTHROPIC_VERTEX"),
];

#[cfg(test)]
mod tests {
    use super::EMBEDDED;
    use crate::plugin::component_digest;

    #[test]
    fn each_build_time_digest_is_the_digest_of_the_embedded_bytes() {
        assert_eq!(EMBEDDED.len(), 8);
        for embedded in EMBEDDED {
            assert_eq!(embedded.digest, component_digest(embedded.bytes), "{}", embedded.name);
        }
    }
}
