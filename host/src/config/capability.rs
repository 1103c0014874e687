//! What a catalog entry can do, as its `capabilities` list declares it.
//!
//! A declaration is a fact about the deployed model, which a provider
//! component cannot know: the same `openai-compatible` component fronts a
//! vision model and a text-only one. Absent, an entry has everything its
//! provider component declares; declared, it has what it lists *and* its
//! component can carry (a declaration never makes a component encode what it
//! cannot). A model's name never grants a capability.

use serde::Deserialize;

use crate::types::Capabilities;

/// One capability a `[[model]]` may declare. The names are the config's (a
/// strict enum: an unknown name is a config error naming its line).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Capability {
    /// Images in the conversation (the provider's `images`).
    Vision,
    /// Documents such as PDFs in the conversation (the provider's `documents`).
    Documents,
    /// Native tool calling (the provider's `native-tools`); where the component
    /// has none, tools are described in the prompt instead.
    Tools,
    /// Tools described in the prompt by the host (see `call::prompted_tools`):
    /// for a model without native tool calling that follows the JSON protocol.
    PromptedTools,
    /// An explicit thinking budget (the provider's `thinking`).
    Thinking,
    /// A response schema (the provider's `structured-output`).
    JsonSchema,
    /// Streamed answers (the provider's `streaming`); without it a stream is
    /// answered whole and replayed as a stream.
    Streaming,
}

impl Capability {
    /// Every capability, in the config's order.
    pub const ALL: [Capability; 7] = [
        Self::Vision,
        Self::Documents,
        Self::Tools,
        Self::PromptedTools,
        Self::Thinking,
        Self::JsonSchema,
        Self::Streaming,
    ];

    /// The name the config uses, for messages.
    pub fn name(self) -> &'static str {
        match self {
            Self::Vision => "vision",
            Self::Documents => "documents",
            Self::Tools => "tools",
            Self::PromptedTools => "prompted_tools",
            Self::Thinking => "thinking",
            Self::JsonSchema => "json_schema",
            Self::Streaming => "streaming",
        }
    }

    const fn bit(self) -> u8 {
        1 << self as u8
    }
}

impl std::fmt::Display for Capability {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A set of capabilities: one byte, copied, never allocated.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CapabilitySet(u8);

impl CapabilitySet {
    /// Every capability: what an entry that declares none asks of its provider.
    pub fn all() -> Self {
        Self::of(Capability::ALL)
    }

    pub fn of(capabilities: impl IntoIterator<Item = Capability>) -> Self {
        Self(capabilities.into_iter().fold(0, |bits, capability| bits | capability.bit()))
    }

    /// What a provider component can carry, by its WIT flags. Prompted tools
    /// are the host's own work, so every component carries them. Images by
    /// either source give `vision` (documents likewise); which source a call's
    /// media may have is checked per block (`call::policy`).
    pub fn carried_by(provider: Capabilities) -> Self {
        let mapped = [
            (Capabilities::INLINE_IMAGES | Capabilities::IMAGE_URLS, Capability::Vision),
            (Capabilities::INLINE_DOCUMENTS | Capabilities::DOCUMENT_URLS, Capability::Documents),
            (Capabilities::NATIVE_TOOLS, Capability::Tools),
            (Capabilities::THINKING, Capability::Thinking),
            (Capabilities::STRUCTURED_OUTPUT, Capability::JsonSchema),
            (Capabilities::STREAMING, Capability::Streaming),
        ];
        let carried =
            mapped.into_iter().filter(|(flags, _)| provider.intersects(*flags)).map(|(_, capability)| capability);
        Self::of(carried).with(Capability::PromptedTools)
    }

    pub fn contains(self, capability: Capability) -> bool {
        self.0 & capability.bit() != 0
    }

    #[must_use]
    pub fn with(self, capability: Capability) -> Self {
        Self(self.0 | capability.bit())
    }

    #[must_use]
    pub fn without(self, capability: Capability) -> Self {
        Self(self.0 & !capability.bit())
    }

    #[must_use]
    pub fn intersection(self, other: Self) -> Self {
        Self(self.0 & other.0)
    }

    /// The names, in the config's order (for listings).
    pub fn names(self) -> impl Iterator<Item = &'static str> {
        Capability::ALL.into_iter().filter(move |capability| self.contains(*capability)).map(Capability::name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_provider_flags_map_one_to_one_and_prompted_tools_are_always_carried() {
        let none = CapabilitySet::carried_by(Capabilities::empty());
        assert_eq!(none, CapabilitySet::of([Capability::PromptedTools]));
        let ollama = CapabilitySet::carried_by(Capabilities::NATIVE_TOOLS | Capabilities::INLINE_IMAGES);
        assert_eq!(ollama.names().collect::<Vec<_>>(), ["vision", "tools", "prompted_tools"]);
        assert_eq!(CapabilitySet::carried_by(Capabilities::all()), CapabilitySet::all());
    }

    const ENTRY: &str =
        "[[model]]\nid = \"a\"\nprovider = \"openai-compatible\"\nmax_output_tokens = 1\ncontext_window = 2\n";

    fn declared(text: &str) -> Option<CapabilitySet> {
        let config = crate::Config::from_toml(text, "t.toml").unwrap();
        crate::Catalog::resolve(&config, &mut crate::plugin::ProviderRegistry::default())
            .unwrap()
            .get("a")
            .unwrap()
            .capabilities
    }

    #[test]
    fn the_config_declares_capabilities_by_name() {
        assert_eq!(declared(ENTRY), None, "absent: the provider's");
        let listed = format!("{ENTRY}capabilities = [\"vision\", \"json_schema\", \"prompted_tools\"]\n");
        let set = declared(&listed).unwrap();
        assert_eq!(set.names().collect::<Vec<_>>(), ["vision", "prompted_tools", "json_schema"]);
        assert_eq!(declared(&format!("{ENTRY}capabilities = []\n")), Some(CapabilitySet::default()));
    }

    #[test]
    fn an_unknown_capability_is_a_config_error_naming_its_line() {
        let text = format!("{ENTRY}capabilities = [\"vision\", \"telepathy\"]\n");
        let message = crate::Config::from_toml(&text, "t.toml").unwrap_err().to_string();
        assert!(message.contains("line 6") && message.contains("telepathy"), "{message}");
    }

    #[test]
    fn native_tools_and_capabilities_are_not_combined() {
        let text = format!("{ENTRY}native_tools = false\ncapabilities = [\"vision\"]\n");
        let message = crate::Config::from_toml(&text, "t.toml").unwrap_err().to_string();
        assert!(message.contains("model `a`") && message.contains("`native_tools` and `capabilities`"), "{message}");
        crate::Config::from_toml(&format!("{ENTRY}native_tools = false\n"), "t.toml").unwrap();
    }

    #[test]
    fn fixed_temperature_is_read_and_defaults_off() {
        let entry = |text: &str| crate::Config::from_toml(text, "t.toml").unwrap().models.remove(0);
        assert!(!entry(ENTRY).fixed_temperature);
        assert!(entry(&format!("{ENTRY}fixed_temperature = true\n")).fixed_temperature);
    }

    #[test]
    fn sets_combine_without_touching_other_bits() {
        let set = CapabilitySet::of([Capability::Vision, Capability::Streaming]);
        assert!(set.contains(Capability::Vision) && !set.contains(Capability::Documents));
        assert!(!set.without(Capability::Vision).contains(Capability::Vision));
        assert!(set.without(Capability::Vision).contains(Capability::Streaming));
        let narrowed = set.intersection(CapabilitySet::of([Capability::Streaming, Capability::Thinking]));
        assert_eq!(narrowed, CapabilitySet::of([Capability::Streaming]));
    }
}
