//! Prices an operator keeps outside the catalog: a TOML file of tables keyed
//! by entry id, applied over the entries' own prices when the gateway starts
//! (`--prices FILE`), so a price change needs no rebuild and no catalog edit.
//!
//! ```toml
//! ["gpt-4.1"]        # quoted: a bare key with a dot would be a nested table
//! input_price = 2.0
//! output_price = 8.0
//! cache_read_price = 0.5
//! prices_as_of = "2026-12-06"
//! ```
//!
//! A row replaces the fields it names and keeps the others. A row that sets a
//! price but no `prices_as_of` leaves the entry without a date: the catalog's
//! date described the price it replaced. An id the catalog does not have, a
//! key the row does not know, or a price that is negative or not finite is an
//! error naming the id; the whole configuration is then validated again, so a
//! row that leaves an entry with one of `input_price` / `output_price` fails
//! as that entry would.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;

use super::{Config, ConfigError, ModelEntry};

/// One entry's row.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct PriceRow {
    pub input_price: Option<f64>,
    pub output_price: Option<f64>,
    pub cache_read_price: Option<f64>,
    pub cache_write_price: Option<f64>,
    pub search_price: Option<f64>,
    pub web_search_price: Option<f64>,
    pub web_search_preview_price: Option<f64>,
    pub prices_as_of: Option<String>,
}

impl PriceRow {
    fn prices(&self) -> [Option<f64>; 7] {
        [
            self.input_price,
            self.output_price,
            self.cache_read_price,
            self.cache_write_price,
            self.search_price,
            self.web_search_price,
            self.web_search_preview_price,
        ]
    }

    fn sets_a_price(&self) -> bool {
        self.prices().iter().any(Option::is_some)
    }

    fn apply(&self, entry: &mut ModelEntry) {
        let prices = [
            (self.input_price, &mut entry.input_price),
            (self.output_price, &mut entry.output_price),
            (self.cache_read_price, &mut entry.cache_read_price),
            (self.cache_write_price, &mut entry.cache_write_price),
            (self.search_price, &mut entry.search_price),
            (self.web_search_price, &mut entry.web_search_price),
            (self.web_search_preview_price, &mut entry.web_search_preview_price),
        ];
        for (row, field) in prices {
            if row.is_some() {
                *field = row;
            }
        }
        if self.prices_as_of.is_some() || self.sets_a_price() {
            entry.prices_as_of.clone_from(&self.prices_as_of);
        }
    }
}

/// A prices file: entry id → its row.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PriceFile {
    /// The file's path, for messages.
    origin: String,
    rows: BTreeMap<String, PriceRow>,
}

impl PriceFile {
    pub fn from_file(path: &Path) -> Result<Self, ConfigError> {
        let text =
            std::fs::read_to_string(path).map_err(|source| ConfigError::Read { path: path.to_path_buf(), source })?;
        Self::from_toml(&text, &path.display().to_string())
    }

    /// Parses a prices file; `origin` names it in errors.
    pub fn from_toml(text: &str, origin: &str) -> Result<Self, ConfigError> {
        let rows: BTreeMap<String, PriceRow> = toml::from_str(text).map_err(|error| ConfigError::Parse {
            origin: format!("prices {origin}"),
            message: super::parse_message(text, &error),
        })?;
        Ok(Self { origin: origin.to_owned(), rows })
    }

    fn invalid(&self, message: String) -> ConfigError {
        ConfigError::Invalid { origin: format!("prices {}", self.origin), message }
    }
}

impl Config {
    /// Applies a prices file over the entries' own prices, then validates the
    /// whole configuration again (see the module's doc).
    pub fn apply_prices(&mut self, file: &PriceFile) -> Result<(), ConfigError> {
        for (id, row) in &file.rows {
            if row.prices().into_iter().flatten().any(|price| !price.is_finite() || price < 0.0) {
                return Err(file.invalid(format!("`{id}`: prices must be finite and not negative")));
            }
            let Some(entry) = self.models.iter_mut().find(|entry| entry.id == *id) else {
                return Err(file.invalid(format!("`{id}` is not a catalog entry")));
            };
            row.apply(entry);
        }
        self.validate()
    }
}

/// Whether `date` is a calendar date written `YYYY-MM-DD`.
pub(super) fn is_date(date: &str) -> bool {
    let bytes = date.as_bytes();
    let shape = bytes.len() == 10
        && bytes
            .iter()
            .enumerate()
            .all(|(i, byte)| if i == 4 || i == 7 { *byte == b'-' } else { byte.is_ascii_digit() });
    if !shape {
        return false;
    }
    let number = |range: std::ops::Range<usize>| date[range].parse::<u32>().unwrap_or(0);
    let (year, month, day) = (number(0..4), number(5..7), number(8..10));
    let leap = year.is_multiple_of(4) && (!year.is_multiple_of(100) || year.is_multiple_of(400));
    let days = match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => return false,
    };
    (1..=days).contains(&day)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::panic)] // a failing test should stop loudly
mod tests {
    use super::*;

    const CATALOG: &str = r#"
[[model]]
id = "chat"
provider = "openai"
max_output_tokens = 100
context_window = 1000
input_price = 1.0
output_price = 2.0
cache_read_price = 0.5
prices_as_of = "2026-01-02"

[[model]]
id = "unpriced"
provider = "openai"
max_output_tokens = 100
context_window = 1000
"#;

    fn applied(prices: &str) -> Result<Config, ConfigError> {
        let mut config = Config::from_toml(CATALOG, "t").unwrap();
        let file = PriceFile::from_toml(prices, "p.toml")?;
        config.apply_prices(&file).map(|()| config)
    }

    fn entry<'a>(config: &'a Config, id: &str) -> &'a ModelEntry {
        config.models.iter().find(|entry| entry.id == id).unwrap()
    }

    #[test]
    fn a_row_replaces_what_it_names_and_keeps_the_rest() {
        let config = applied("[chat]\noutput_price = 3.5\nprices_as_of = \"2026-12-06\"\n").unwrap();
        let chat = entry(&config, "chat");
        assert_eq!((chat.input_price, chat.output_price, chat.cache_read_price), (Some(1.0), Some(3.5), Some(0.5)));
        assert_eq!(chat.prices_as_of.as_deref(), Some("2026-12-06"));
        let config = applied("[unpriced]\ninput_price = 0.1\noutput_price = 0.2\n").unwrap();
        let priced = entry(&config, "unpriced");
        assert_eq!((priced.input_price, priced.output_price), (Some(0.1), Some(0.2)));
    }

    #[test]
    fn a_new_price_without_a_date_leaves_the_entry_undated() {
        let config = applied("[chat]\ninput_price = 1.5\n").unwrap();
        assert_eq!(entry(&config, "chat").prices_as_of, None);
        let config = applied("[chat]\nprices_as_of = \"2026-12-01\"\n").unwrap();
        assert_eq!(entry(&config, "chat").prices_as_of.as_deref(), Some("2026-12-01"));
    }

    fn refused(prices: &str) -> String {
        match applied(prices) {
            Err(error) => error.to_string(),
            Ok(_) => panic!("{prices} was applied"),
        }
    }

    #[test]
    fn an_unknown_id_a_bad_price_or_key_and_a_lone_price_are_errors_naming_the_id() {
        let message = refused("[gpt-99]\ninput_price = 1.0\noutput_price = 1.0\n");
        assert!(message.contains("prices p.toml") && message.contains("`gpt-99` is not a catalog entry"), "{message}");
        let message = refused("[chat]\ninput_price = -1.0\n");
        assert!(message.contains("`chat`: prices must be finite and not negative"), "{message}");
        let message = refused("[chat]\ninput_price = nan\n");
        assert!(message.contains("`chat`: prices must be finite"), "{message}");
        let message = refused("[chat]\ninput_prize = 1.0\n");
        assert!(message.contains("prices p.toml") && message.contains("input_prize"), "{message}");
        let message = refused("[chat]\ninput_price = \"cheap\"\n");
        assert!(message.contains("prices p.toml: line 2") && message.contains("expected f64"), "{message}");
        let message = refused("[unpriced]\ninput_price = 1.0\n");
        assert!(message.contains("model `unpriced`") && message.contains("declared together"), "{message}");
        let message = refused("[chat]\nprices_as_of = \"2026-13-01\"\n");
        assert!(message.contains("model `chat`") && message.contains("prices_as_of"), "{message}");
    }

    #[test]
    fn a_web_search_price_is_kept_for_a_chat_entry_and_refused_when_bad() {
        let config = applied("[chat]\nweb_search_price = 10.0\n").unwrap();
        let chat = entry(&config, "chat");
        assert_eq!((chat.web_search_price, chat.input_price), (Some(10.0), Some(1.0)));
        for bad in ["-1.0", "nan", "inf"] {
            let message = refused(&format!("[chat]\nweb_search_price = {bad}\n"));
            assert!(message.contains("`chat`: prices must be finite and not negative"), "{message}");
        }
    }

    #[test]
    fn a_web_search_price_in_the_catalog_is_validated_like_the_others() {
        let entry =
            |extra: &str| format!("[[model]]\nid = \"m\"\nprovider = \"anthropic\"\ncontext_window = 1000\n{extra}\n");
        let chat = entry("max_output_tokens = 100\ninput_price = 3.0\noutput_price = 15.0\nweb_search_price = 10.0");
        let config = Config::from_toml(&chat, "t").unwrap();
        assert_eq!(config.models[0].web_search_price, Some(10.0));
        let negative = entry("max_output_tokens = 100\nweb_search_price = -10.0");
        let message = Config::from_toml(&negative, "t").unwrap_err().to_string();
        assert!(message.contains("prices must be finite and not negative"), "{message}");
        let preview = entry("max_output_tokens = 100\nweb_search_preview_price = 25.0");
        assert_eq!(Config::from_toml(&preview, "t").unwrap().models[0].web_search_preview_price, Some(25.0));
        let negative = entry("max_output_tokens = 100\nweb_search_preview_price = -25.0");
        let message = Config::from_toml(&negative, "t").unwrap_err().to_string();
        assert!(message.contains("prices must be finite and not negative"), "{message}");
        for price in ["web_search_price = 10.0", "web_search_preview_price = 25.0"] {
            let embedding =
                entry(&format!("kind = \"embedding\"\nembedding_dimensions = 8\ninput_price = 0.1\n{price}"));
            let message = Config::from_toml(&embedding, "t").unwrap_err().to_string();
            assert!(message.contains("are read only for chat entries"), "{message}");
        }
    }

    #[test]
    fn dates() {
        for good in ["2026-12-06", "2024-02-29", "2000-02-29", "1999-12-31"] {
            assert!(is_date(good), "{good}");
        }
        for bad in ["2026-12-6", "2026/12/06", "2025-02-29", "1900-02-29", "2026-00-10", "2026-04-31", "", "today"] {
            assert!(!is_date(bad), "{bad}");
        }
    }
}
