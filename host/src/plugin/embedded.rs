//! First-party components, built from `providers/*` by `build.rs` and compiled
//! into the binary so `weir` runs with no providers folder at all.

/// (name, component bytes)
pub const EMBEDDED: &[(&str, &[u8])] = &[
    ("openai", include_bytes!(env!("WEIR_EMBEDDED_OPENAI"))),
    ("anthropic", include_bytes!(env!("WEIR_EMBEDDED_ANTHROPIC"))),
    ("anthropic-bedrock", include_bytes!(env!("WEIR_EMBEDDED_ANTHROPIC_BEDROCK"))),
    ("anthropic-bedrock-mantle", include_bytes!(env!("WEIR_EMBEDDED_ANTHROPIC_BEDROCK_MANTLE"))),
    ("bedrock-converse", include_bytes!(env!("WEIR_EMBEDDED_BEDROCK_CONVERSE"))),
    ("bedrock-retrieval", include_bytes!(env!("WEIR_EMBEDDED_BEDROCK_RETRIEVAL"))),
];
