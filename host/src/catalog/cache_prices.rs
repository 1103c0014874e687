//! What a cached input token costs when an entry declares no multiplier: a
//! fact of the provider's billing, so the provider key that serves the entry
//! decides it, never the model's name. An entry's own `cache_read_multiplier`
//! / `cache_write_multiplier` always wins (an OpenAI family with another
//! discount, a negotiated price).

use crate::record::CacheMultipliers;

use super::MANTLE;

/// The runtime seed's per-provider prices: Anthropic writes at 125 % and
/// reads at 10 % of an input token on every surface (direct, InvokeModel,
/// Mantle); OpenAI reads at about half price (its families differ: the
/// embedded catalog states each) and charges nothing extra to write; Bedrock
/// Converse, and any provider Weir knows no price of, bill cached tokens as
/// plain input (1.0), so no discount is ever assumed.
pub fn provider_cache_multipliers(provider: &str) -> CacheMultipliers {
    match provider {
        "anthropic" | "anthropic-bedrock" | MANTLE => CacheMultipliers { read: 0.1, write: 1.25 },
        "openai" | "openai-responses" => CacheMultipliers { read: 0.5, write: 1.0 },
        _ => CacheMultipliers { read: 1.0, write: 1.0 },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_provider_key_has_its_billing_and_an_unknown_one_none() {
        let of = |key: &str| {
            let multipliers = provider_cache_multipliers(key);
            (multipliers.read, multipliers.write)
        };
        for anthropic in ["anthropic", "anthropic-bedrock", "anthropic-bedrock-mantle"] {
            assert_eq!(of(anthropic), (0.1, 1.25), "{anthropic}");
        }
        assert_eq!(of("openai"), (0.5, 1.0));
        assert_eq!(of("openai-responses"), (0.5, 1.0), "the same account, billed alike");
        for plain in ["bedrock-converse", "openai-compatible", "ollama", "my-drop-in"] {
            assert_eq!(of(plain), (1.0, 1.0), "{plain}");
        }
    }
}
