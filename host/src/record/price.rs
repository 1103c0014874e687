//! What a call cost, from the prices its catalog entry declares (USD per
//! million tokens, or per thousand searches for a reranker billed by the
//! search). Nothing is guessed: without an input and an output price (or a
//! search price) there is no cost. A chat call's web searches (a provider's hosted
//! search, billed per search) add their own price per thousand to the tokens'
//! cost, nothing where the entry declares none. Cache reads and writes use their own declared prices,
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
    /// USD per thousand searches (Cohere's search unit: one query with up to
    /// [`DOCUMENTS_PER_SEARCH`] documents). A rerank entry declares it instead
    /// of token prices (the configuration refuses both), so a call is priced
    /// by one rule only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub search: Option<f64>,
    /// USD per thousand web searches a chat call's provider ran itself
    /// (Anthropic's `web_search` server tool, OpenAI's hosted `web_search`),
    /// billed on top of the tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub web_search: Option<f64>,
    /// USD per thousand calls of OpenAI's `web_search_preview` tool, which
    /// OpenAI prices apart: a call that sends it is charged at this price
    /// (see [`Prices::for_searches`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub web_search_preview: Option<f64>,
}

/// The documents one search unit covers (Cohere: "one query with up to 100
/// documents to be ranked").
pub const DOCUMENTS_PER_SEARCH: usize = 100;

/// The search units a ranking of `documents` bills, as Cohere counts them
/// (each document one chunk: Rerank 3.5's default is one chunk per document,
/// a longer one truncated). What the hold reserves, and what a record counts
/// when the provider reports no units.
pub fn searches_for(documents: usize) -> u64 {
    documents.max(1).div_ceil(DOCUMENTS_PER_SEARCH) as u64
}

impl Prices {
    /// The cost of `tokens` and `searches`, or `None` when the entry declares
    /// neither a search price nor an input and an output price.
    /// `multipliers` are the entry's cache read and write multipliers, used
    /// where no cache price is declared.
    pub fn cost(&self, tokens: &Tokens, searches: u64, multipliers: CacheMultipliers) -> Option<f64> {
        if let Some(per_thousand) = self.search {
            return Some(searches as f64 * per_thousand / 1000.0);
        }
        self.token_cost(tokens, multipliers)
    }

    fn token_cost(&self, tokens: &Tokens, multipliers: CacheMultipliers) -> Option<f64> {
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

    /// These prices for a call that sends OpenAI's `web_search_preview` tool
    /// (`preview`) and/or another web search tool (`plain`): `web_search`
    /// becomes the price its searches are charged at — the preview price
    /// (else `web_search`) for the preview tool alone. OpenAI's answer does
    /// not say which tool ran a search, so a call that sends both is charged
    /// the higher of the two for each. A call that sends neither is unchanged.
    #[must_use]
    pub fn for_searches(self, plain: bool, preview: bool) -> Self {
        let plain_price = self.web_search.filter(|_| plain);
        let preview_price = self.web_search_preview.or(self.web_search).filter(|_| preview);
        let web_search = match (plain_price, preview_price) {
            (Some(plain), Some(preview)) => Some(plain.max(preview)),
            (None, None) if !preview => self.web_search,
            (plain, preview) => plain.or(preview),
        };
        Self { web_search, ..self }
    }

    /// What `searches` web searches add to a call's cost: nothing at an entry
    /// that declares no web search price.
    pub fn web_search_cost(&self, searches: u64) -> f64 {
        self.web_search.map_or(0.0, |per_thousand| searches as f64 * per_thousand / 1000.0)
    }

    pub fn declared(&self) -> bool {
        self.search.is_some() || (self.input.is_some() && self.output.is_some())
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
        assert_eq!(Prices::default().cost(&tokens, 0, MULTIPLIERS), None);
        assert_eq!(Prices { input: Some(3.0), ..Prices::default() }.cost(&tokens, 0, MULTIPLIERS), None);
    }

    #[test]
    fn cost_sums_each_kind_at_its_price() {
        let prices = Prices { input: Some(3.0), output: Some(15.0), cache_write: Some(4.0), ..Prices::default() };
        let tokens =
            Tokens { input: 1_000_000, output: 100_000, cache_read: 1_000_000, cache_write: 500_000, reasoning: 7 };
        // 3 + 1.5 + 0.3 (3 × 0.1) + 2
        let cost = prices.cost(&tokens, 0, MULTIPLIERS).unwrap();
        assert!((cost - 6.8).abs() < 1e-9, "{cost}");
    }

    #[test]
    fn a_search_price_prices_the_searches_and_not_the_tokens() {
        let prices = Prices { search: Some(2.0), ..Prices::default() };
        let tokens = Tokens { input: 5_000_000, ..Tokens::default() };
        assert!(prices.declared());
        assert_eq!(prices.cost(&tokens, 3, MULTIPLIERS), Some(0.006));
        assert_eq!(prices.cost(&tokens, 0, MULTIPLIERS), Some(0.0));
    }

    #[test]
    fn web_searches_cost_their_price_per_thousand_and_nothing_unpriced() {
        let prices = Prices { input: Some(3.0), output: Some(15.0), web_search: Some(10.0), ..Prices::default() };
        assert!((prices.web_search_cost(3) - 0.03).abs() < 1e-12);
        assert_eq!(prices.web_search_cost(0), 0.0);
        assert_eq!(Prices::default().web_search_cost(5), 0.0);
    }

    #[test]
    fn the_preview_tool_is_charged_its_own_price_and_both_tools_the_higher() {
        let prices = Prices { web_search: Some(10.0), web_search_preview: Some(25.0), ..Prices::default() };
        assert_eq!(prices.for_searches(true, false).web_search, Some(10.0));
        assert_eq!(prices.for_searches(false, true).web_search, Some(25.0));
        assert_eq!(prices.for_searches(true, true).web_search, Some(25.0));
        assert_eq!(prices.for_searches(false, false).web_search, Some(10.0), "no search tool: unchanged");
        let cheaper = Prices { web_search_preview: Some(5.0), ..prices };
        assert_eq!(cheaper.for_searches(false, true).web_search, Some(5.0), "the preview tool alone");
        assert_eq!(cheaper.for_searches(true, true).web_search, Some(10.0));
        let plain_only = Prices { web_search: Some(10.0), ..Prices::default() };
        assert_eq!(plain_only.for_searches(false, true).web_search, Some(10.0), "no preview price: web_search's");
        let preview_only = Prices { web_search_preview: Some(25.0), ..Prices::default() };
        assert_eq!(preview_only.for_searches(true, false).web_search, None, "web_search has no price");
        assert_eq!(preview_only.for_searches(true, true).web_search, Some(25.0));
    }

    #[test]
    fn a_search_covers_up_to_a_hundred_documents() {
        let units: Vec<u64> = [0, 1, 100, 101, 250].into_iter().map(searches_for).collect();
        assert_eq!(units, [1, 1, 1, 2, 3]);
    }
}
