//! What a call cost, from the prices its catalog entry declares (USD per
//! million tokens). Nothing is guessed: without an input and an output price
//! there is no cost. Cache reads and writes use their own declared prices,
//! else the input price at the entry's cache multipliers (the catalog's
//! declared billing facts).

use serde::{Deserialize, Serialize};

use super::Tokens;
use crate::types::Usage;

/// An entry's declared prices, USD per million tokens.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Prices {
    pub input: Option<f64>,
    pub output: Option<f64>,
    pub cache_read: Option<f64>,
    pub cache_write: Option<f64>,
}

impl Prices {
    /// The cost of `tokens`, or `None` when the entry declares no input or
    /// output price. `multipliers` are the entry's cache read and write
    /// multipliers, used where no cache price is declared.
    pub fn cost(&self, tokens: &Tokens, multipliers: CacheMultipliers) -> Option<f64> {
        let input = self.input?;
        let output = self.output?;
        let cache_read = self.cache_read.unwrap_or(input * multipliers.read);
        let cache_write = self.cache_write.unwrap_or(input * multipliers.write);
        let micro = tokens.input as f64 * input
            + tokens.output as f64 * output
            + tokens.cache_read as f64 * cache_read
            + tokens.cache_write as f64 * cache_write;
        Some(micro / 1_000_000.0)
    }

    pub fn declared(&self) -> bool {
        self.input.is_some() && self.output.is_some()
    }
}

/// What cached input costs relative to uncached input, per catalog entry
/// (Anthropic: write 1.25, read 0.1; OpenAI: read per family; Converse: 1.0).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CacheMultipliers {
    pub read: f64,
    pub write: f64,
}

impl CacheMultipliers {
    /// Billable input tokens: uncached input at full price plus cache reads and
    /// writes at their multipliers.
    pub fn billable_input(&self, usage: &Usage) -> f64 {
        self.billable(&Tokens::of(usage))
    }

    /// [`CacheMultipliers::billable_input`] of token counts (a record's sums).
    pub fn billable(&self, tokens: &Tokens) -> f64 {
        tokens.input as f64 + self.read * tokens.cache_read as f64 + self.write * tokens.cache_write as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MULTIPLIERS: CacheMultipliers = CacheMultipliers { read: 0.1, write: 1.25 };

    #[test]
    fn no_declared_price_is_no_cost() {
        let tokens = Tokens { input: 1000, output: 1000, ..Tokens::default() };
        assert_eq!(Prices::default().cost(&tokens, MULTIPLIERS), None);
        assert_eq!(Prices { input: Some(3.0), ..Prices::default() }.cost(&tokens, MULTIPLIERS), None);
    }

    #[test]
    fn cost_sums_each_kind_at_its_price() {
        let prices = Prices { input: Some(3.0), output: Some(15.0), cache_read: None, cache_write: Some(4.0) };
        let tokens =
            Tokens { input: 1_000_000, output: 100_000, cache_read: 1_000_000, cache_write: 500_000, reasoning: 7 };
        // 3 + 1.5 + 0.3 (3 × 0.1) + 2
        let cost = prices.cost(&tokens, MULTIPLIERS).unwrap();
        assert!((cost - 6.8).abs() < 1e-9, "{cost}");
    }
}
