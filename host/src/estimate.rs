//! The input side of a call's demand, counted before the call. A real tokenizer
//! where one exists for the model family (OpenAI's `o200k_base` / `cl100k_base`,
//! via tiktoken), and a conservative character estimate otherwise. After the
//! call, the provider's reported usage is what the audit and the throttle see;
//! this number only sizes the reservation.
//!
//! The character estimate counts the pieces a byte-pair tokenizer splits text
//! into, erring high (see [`char_estimate`]). Measured against `o200k_base` on
//! the sample prompts in this module's tests (`estimate_error_on_sample_prompts`
//! prints the table) it never under-counts, and over-counts English prose by
//! ~10–15%, German by ~10%, code, JSON and markdown by ~25–65%, CJK text by
//! ~40–50%, number-heavy text by ~0–10%.
//! Reserving a little too much parks a call slightly early; reserving too little
//! would let a burst through to a 429.

use serde::Deserialize;

use crate::types::{ContentBlock, Conversation, LeafBlock, Media};

/// Tokens every message costs beyond its text (role and separators), and the
/// reply's priming, per OpenAI's published counting recipe.
const PER_MESSAGE: u64 = 4;
const REPLY_PRIMING: u64 = 3;
const PER_TOOL: u64 = 8;
/// An image at the largest size the high-detail tiling bills (85 + 8 × 170).
const PER_IMAGE: u64 = 1_445;

/// How a model's input is counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Tokenizer {
    /// GPT-4o, GPT-4.1, GPT-5, o-series.
    O200kBase,
    /// GPT-4 and GPT-3.5.
    Cl100kBase,
    /// No tokenizer for the family: the conservative character estimate.
    Estimate,
}

impl Tokenizer {
    /// The tokenizer an OpenAI wire id uses; other providers' families default to
    /// the estimate (a catalog entry's `tokenizer` overrides either).
    pub fn default_for(provider: &str, wire_id: &str) -> Self {
        if !matches!(provider, "openai" | "openai-responses") {
            return Self::Estimate;
        }
        let legacy = wire_id.starts_with("gpt-3.5")
            || (wire_id.starts_with("gpt-4") && !wire_id.starts_with("gpt-4o") && !wire_id.starts_with("gpt-4.1"));
        if legacy { Self::Cl100kBase } else { Self::O200kBase }
    }

    pub fn count(self, text: &str) -> u64 {
        match self {
            Self::O200kBase => tiktoken_rs::o200k_base_singleton().encode_ordinary(text).len() as u64,
            Self::Cl100kBase => tiktoken_rs::cl100k_base_singleton().encode_ordinary(text).len() as u64,
            Self::Estimate => char_estimate(text),
        }
    }
}

/// Counts the pieces a byte-pair tokenizer splits text into, erring high: a run
/// of letters costs one token per six letters (common words are one token), a
/// run of digits one per three (numbers split in threes), every symbol,
/// newline and non-ASCII character one each; a space rides along with the word
/// that follows it, but before a number it is a token of its own.
pub fn char_estimate(text: &str) -> u64 {
    let mut tokens = 0_u64;
    let mut run = Run::None;
    let mut previous = '\n';
    for c in text.chars() {
        let next = Run::of(c);
        if previous == ' ' && c.is_ascii_digit() {
            // A space before a number is a token of its own.
            tokens += 1;
        }
        previous = c;
        if std::mem::discriminant(&next) != std::mem::discriminant(&run) || run.length_hit() {
            tokens += run.close();
            run = next;
        }
        run.grow();
        if matches!(run, Run::Single) {
            tokens += run.close();
            run = Run::None;
        }
    }
    tokens + run.close()
}

/// The run of characters being counted and its length so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Run {
    None,
    Letters(u32),
    Digits(u32),
    /// A symbol, newline or non-ASCII character: a token of its own.
    Single,
}

impl Run {
    fn of(c: char) -> Self {
        if c.is_ascii_alphabetic() {
            Self::Letters(0)
        } else if c.is_ascii_digit() {
            Self::Digits(0)
        } else if c == ' ' || c == '\t' {
            Self::None
        } else {
            Self::Single
        }
    }

    fn grow(&mut self) {
        match self {
            Self::Letters(n) | Self::Digits(n) => *n += 1,
            Self::None | Self::Single => {}
        }
    }

    /// A run that reached one token's worth starts a new token.
    fn length_hit(self) -> bool {
        matches!(self, Self::Letters(6) | Self::Digits(3))
    }

    fn close(self) -> u64 {
        match self {
            Self::None => 0,
            Self::Letters(n) | Self::Digits(n) => u64::from(n > 0),
            Self::Single => 1,
        }
    }
}

/// The input tokens a conversation will cost.
pub fn estimate_input(tokenizer: Tokenizer, conversation: &Conversation) -> u64 {
    count_input(conversation, &|text| tokenizer.count(text))
}

/// An upper bound on [`estimate_input`] under every tokenizer, from the
/// texts' lengths alone: each token of a byte-pair tokenizer, and each piece
/// [`char_estimate`] counts, covers at least one byte. Where no token bucket
/// needs the count, a call whose bound fits the context window is never
/// tokenized.
pub fn input_bound(conversation: &Conversation) -> u64 {
    count_input(conversation, &|text| text.len() as u64)
}

/// The recipe both share: every text counted by `count`, plus the message,
/// tool, image and document allowances.
fn count_input(conversation: &Conversation, count: &dyn Fn(&str) -> u64) -> u64 {
    let system: u64 = conversation.system.iter().map(|text| PER_MESSAGE + count(text)).sum();
    let turns: u64 = conversation
        .turns
        .iter()
        .map(|turn| PER_MESSAGE + turn.content.iter().map(|block| block_tokens(count, block)).sum::<u64>())
        .sum();
    let tools: u64 = conversation
        .tools
        .iter()
        .map(|tool| PER_TOOL + count(&tool.name) + count(&tool.description) + count(&tool.parameters_json))
        .sum();
    system + turns + tools + REPLY_PRIMING
}

fn block_tokens(count: &dyn Fn(&str) -> u64, block: &ContentBlock) -> u64 {
    match block {
        ContentBlock::Text(text) => count(text),
        ContentBlock::Image(_) => PER_IMAGE,
        ContentBlock::Document(media) => media_tokens(media),
        ContentBlock::ToolUse(call) => count(&call.name) + count(&call.input_json) + PER_MESSAGE,
        ContentBlock::ToolResult(result) => {
            PER_MESSAGE + result.content.iter().map(|leaf| leaf_tokens(count, leaf)).sum::<u64>()
        }
        ContentBlock::Thinking(thinking) => count(&thinking.text),
    }
}

fn leaf_tokens(count: &dyn Fn(&str) -> u64, leaf: &LeafBlock) -> u64 {
    match leaf {
        LeafBlock::Text(text) => count(text),
        LeafBlock::Image(_) => PER_IMAGE,
        LeafBlock::Document(media) => media_tokens(media),
    }
}

/// A document's extracted text is unknown before the provider reads it: count one
/// token per three bytes of its content (base64 is 4 characters per 3 bytes).
fn media_tokens(media: &Media) -> u64 {
    match &media.source {
        crate::types::MediaSource::Base64(data) => (data.len() as u64 / 4).max(1),
        crate::types::MediaSource::Url(_) => PER_IMAGE,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{ToolDefinition, Turn};

    const SAMPLES: [(&str, &str); 9] = [
        (
            "english prose",
            "Summarize the quarterly report in three bullet points, focusing on revenue growth, \
             customer churn and the outlook for the next fiscal year. Keep each point under twenty words.",
        ),
        (
            "english chat",
            "Hey! Can you help me write a polite email to my landlord asking whether the heating \
             can be fixed before the weekend? It has been cold for three days now.",
        ),
        (
            "rust code",
            "fn main() {\n    let values: Vec<u64> = (1..=10).map(|x| x * x).collect();\n    \
             println!(\"{:?}\", values.iter().sum::<u64>());\n}\n",
        ),
        (
            "json",
            r#"{"order_id": 48213, "items": [{"sku": "A-1002", "qty": 3}, {"sku": "B-7781", "qty": 1}], "express": true}"#,
        ),
        ("chinese", "请用三句话总结这份季度报告，重点说明收入增长、客户流失以及下一财年的展望。"),
        ("japanese", "次の会議の議題を三つ提案してください。予算、採用計画、そして新製品の発売日についてです。"),
        (
            "markdown",
            "## Release notes\n\n- Fixed a crash in `parse_config()` when the file is empty\n\
             - See https://example.com/docs/v2.3.1/changelog#fixes for details\n- Thanks @jane-doe!\n",
        ),
        (
            "german",
            "Bitte fassen Sie die Ergebnisse der Kundenzufriedenheitsumfrage zusammen und nennen Sie \
             die drei wichtigsten Verbesserungsvorschläge.",
        ),
        ("numbers", "Invoice 2026-11-30: 3 x 129.99 EUR, 12 x 4.50 EUR, total 443.97 EUR, ref 88120934."),
    ];

    #[test]
    fn openai_families_get_their_tokenizer() {
        assert_eq!(Tokenizer::default_for("openai", "gpt-4.1-mini"), Tokenizer::O200kBase);
        assert_eq!(Tokenizer::default_for("openai-responses", "gpt-5"), Tokenizer::O200kBase);
        assert_eq!(Tokenizer::default_for("openai", "gpt-4o"), Tokenizer::O200kBase);
        assert_eq!(Tokenizer::default_for("openai", "o3"), Tokenizer::O200kBase);
        assert_eq!(Tokenizer::default_for("openai", "gpt-4-turbo"), Tokenizer::Cl100kBase);
        assert_eq!(Tokenizer::default_for("openai", "gpt-3.5-turbo"), Tokenizer::Cl100kBase);
        assert_eq!(Tokenizer::default_for("openai-compatible", "qwen3"), Tokenizer::Estimate);
    }

    #[test]
    fn real_tokenizer_counts() {
        assert_eq!(Tokenizer::O200kBase.count("hello world"), 2);
        assert_eq!(Tokenizer::Cl100kBase.count("hello world"), 2);
        assert_eq!(char_estimate("hello world"), 2);
        assert_eq!(char_estimate("internationalization"), 4);
        assert_eq!(char_estimate("48213"), 2);
        assert_eq!(char_estimate("a, b."), 4);
        assert_eq!(char_estimate("日本語"), 3);
    }

    /// The documented error of the character estimate: never below the real count
    /// on these samples, and within the stated bounds. Run with `--nocapture` to
    /// see the table.
    #[test]
    fn estimate_error_on_sample_prompts() {
        for (name, text) in SAMPLES {
            let real = Tokenizer::O200kBase.count(text);
            let estimate = char_estimate(text);
            let error = (estimate as f64 - real as f64) / real as f64;
            println!("{name:<14} o200k {real:>4}  estimate {estimate:>4}  error {:+.0}%", error * 100.0);
            assert!(estimate >= real, "{name}: the estimate must not under-count ({estimate} < {real})");
            assert!(error <= 0.8, "{name}: over-count {error:.2} is beyond the documented bound");
        }
    }

    #[test]
    fn a_conversation_counts_its_overheads() {
        let mut conversation = Conversation::user("hello world").with_system("Be terse.");
        conversation.turns.push(Turn::assistant(vec![ContentBlock::Text("ok".into())]));
        let tokens = estimate_input(Tokenizer::O200kBase, &conversation);
        let text = Tokenizer::O200kBase.count("hello world") + Tokenizer::O200kBase.count("Be terse.") + 1;
        assert_eq!(tokens, text + 3 * PER_MESSAGE + REPLY_PRIMING);
        let with_tool = conversation.with_tool(ToolDefinition {
            name: "f".into(),
            description: String::new(),
            parameters_json: "{}".into(),
        });
        assert!(estimate_input(Tokenizer::O200kBase, &with_tool) > tokens);
    }

    #[test]
    fn the_byte_bound_holds_on_every_sample_and_tokenizer() {
        for (name, text) in SAMPLES {
            let conversation = Conversation::user(text).with_system("Be terse.");
            let bound = input_bound(&conversation);
            for tokenizer in [Tokenizer::O200kBase, Tokenizer::Cl100kBase, Tokenizer::Estimate] {
                let counted = estimate_input(tokenizer, &conversation);
                assert!(counted <= bound, "{name} under {tokenizer:?}: {counted} > {bound}");
            }
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]
        /// Any text, any tokenizer: the count never exceeds the byte bound.
        #[test]
        fn the_byte_bound_is_an_upper_bound(text in "\\PC{0,200}", code in "[ -~\\n]{0,200}") {
            let conversation = Conversation::user(&text).with_system(&code);
            let bound = input_bound(&conversation);
            for tokenizer in [Tokenizer::O200kBase, Tokenizer::Cl100kBase, Tokenizer::Estimate] {
                proptest::prop_assert!(estimate_input(tokenizer, &conversation) <= bound);
            }
        }
    }
}
