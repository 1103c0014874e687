//! Which Anthropic betas a Claude model takes on Amazon Bedrock (InvokeModel
//! and Mantle), by the model family its wire id names.
//!
//! Bedrock checks a request's betas against the model: one the model does not
//! take is a 400 ("invalid beta flag"), so [`for_wire_id`] answers per model,
//! and the host names the rest as dropped (`beta_dropped:NAME`) instead of
//! sending a call Bedrock refuses.
//!
//! The source is AWS's `anthropic_beta` table in the Bedrock user guide
//! ("Anthropic Claude Messages API", Request and Response; read in a
//! markdown copy of the page from after Claude Opus 4.5's launch), which
//! names the models each beta is compatible with:
//!
//! | beta | AWS's table |
//! | --- | --- |
//! | `computer-use-2025-01-24` | Claude 3.7 Sonnet |
//! | `token-efficient-tools-2025-02-19` | Claude 3.7 Sonnet and Claude 4+ |
//! | `interleaved-thinking-2025-05-14` | Claude 4+ models |
//! | `output-128k-2025-02-19` | Claude 3.7 Sonnet |
//! | `dev-full-thinking-2025-05-14` | Claude 4+ models only |
//! | `context-1m-2025-08-07` | Claude Sonnet 4 |
//! | `context-management-2025-06-27` | Claude Sonnet 4.5 and Claude Haiku 4.5 |
//! | `effort-2025-11-24` | Claude Opus 4.5 |
//! | `tool-search-tool-2025-10-19` | Claude Opus 4.5 |
//! | `tool-examples-2025-10-29` | Claude Opus 4.5 |
//!
//! Where another source names more models, the table is taken as ambiguous
//! and those models keep the beta (Bedrock judges, as before):
//!
//! * `computer-use-2025-01-24`: Anthropic's computer-use docs give its tool
//!   (`computer_20250124`) to Sonnet 4.5, Haiku 4.5, Opus 4.1, Sonnet 4, Opus
//!   4 and 3.7 Sonnet, so those keep it; neither names Opus 4.5 (its tool is
//!   `computer_20251124`, beta `computer-use-2025-11-24`, not in the list).
//! * `context-1m-2025-08-07`: Anthropic gives the 1M window to Sonnet 4.5
//!   too, so Sonnet 4.5 keeps it.
//! * `context-management-2025-06-27`: a published transcription of AWS's
//!   table names every Claude 4 model, so every Claude 4 model keeps it
//!   (Claude Code sends it with every request).
//! * `tool-search-tool-2025-10-19`: the same transcription names Sonnet 4.5,
//!   which keeps it.
//!
//! The Claude 3 models before 3.7 Sonnet take none of the list (3.5 Sonnet
//! v2's computer use is `computer-use-2024-10-22`, not in the list).
//!
//! A family the table does not name (a newer Claude, such as Opus 4.6, or an
//! application inference profile's ARN, which names no model) is given every
//! beta of [`BEDROCK_BETAS`], as before: AWS's table says nothing of it, so
//! Bedrock judges (and a beta it refuses is its 400, `invalid_request`).

use super::{arn_model, is_arn, without_profile};

/// The betas Amazon Bedrock accepts for Claude at all, as AWS's InvokeModel
/// request reference lists them; others fail with a 400 "invalid beta flag".
pub const BEDROCK_BETAS: &[&str] = &[
    COMPUTER_USE,
    TOKEN_EFFICIENT_TOOLS,
    INTERLEAVED_THINKING,
    OUTPUT_128K,
    DEV_FULL_THINKING,
    CONTEXT_1M,
    CONTEXT_MANAGEMENT,
    EFFORT,
    TOOL_SEARCH_TOOL,
    TOOL_EXAMPLES,
];

const COMPUTER_USE: &str = "computer-use-2025-01-24";
const TOKEN_EFFICIENT_TOOLS: &str = "token-efficient-tools-2025-02-19";
const INTERLEAVED_THINKING: &str = "interleaved-thinking-2025-05-14";
const OUTPUT_128K: &str = "output-128k-2025-02-19";
const DEV_FULL_THINKING: &str = "dev-full-thinking-2025-05-14";
const CONTEXT_1M: &str = "context-1m-2025-08-07";
const CONTEXT_MANAGEMENT: &str = "context-management-2025-06-27";
const EFFORT: &str = "effort-2025-11-24";
const TOOL_SEARCH_TOOL: &str = "tool-search-tool-2025-10-19";
const TOOL_EXAMPLES: &str = "tool-examples-2025-10-29";

/// What Opus 4, Opus 4.1 and Haiku 4.5 take: AWS's "Claude 4+" rows, and
/// `computer-use-2025-01-24` and `context-management-*` (see the module's note).
const CLAUDE_4: &[&str] =
    &[COMPUTER_USE, TOKEN_EFFICIENT_TOOLS, INTERLEAVED_THINKING, DEV_FULL_THINKING, CONTEXT_MANAGEMENT];

/// Each family AWS's table names, and the betas it takes (in
/// [`BEDROCK_BETAS`]' order).
const FAMILIES: &[(&str, &[&str])] = &[
    ("claude-3-haiku", &[]),
    ("claude-3-sonnet", &[]),
    ("claude-3-opus", &[]),
    ("claude-3-5-haiku", &[]),
    ("claude-3-5-sonnet", &[]),
    ("claude-3-7-sonnet", &[COMPUTER_USE, TOKEN_EFFICIENT_TOOLS, OUTPUT_128K]),
    (
        "claude-sonnet-4",
        &[COMPUTER_USE, TOKEN_EFFICIENT_TOOLS, INTERLEAVED_THINKING, DEV_FULL_THINKING, CONTEXT_1M, CONTEXT_MANAGEMENT],
    ),
    ("claude-opus-4", CLAUDE_4),
    ("claude-opus-4-1", CLAUDE_4),
    ("claude-haiku-4-5", CLAUDE_4),
    (
        "claude-sonnet-4-5",
        &[
            COMPUTER_USE,
            TOKEN_EFFICIENT_TOOLS,
            INTERLEAVED_THINKING,
            DEV_FULL_THINKING,
            CONTEXT_1M,
            CONTEXT_MANAGEMENT,
            TOOL_SEARCH_TOOL,
        ],
    ),
    (
        "claude-opus-4-5",
        &[
            TOKEN_EFFICIENT_TOOLS,
            INTERLEAVED_THINKING,
            DEV_FULL_THINKING,
            CONTEXT_MANAGEMENT,
            EFFORT,
            TOOL_SEARCH_TOOL,
            TOOL_EXAMPLES,
        ],
    ),
];

/// The betas the model `wire_id` names takes on Bedrock: its family's, or
/// every beta Bedrock accepts when the family is not in AWS's table.
pub fn for_wire_id(wire_id: &str) -> &'static [&'static str] {
    let family = family(wire_id);
    FAMILIES.iter().find(|(name, _)| Some(*name) == family.as_deref()).map_or(BEDROCK_BETAS, |(_, betas)| betas)
}

/// The model family a Bedrock wire id names, without its cross-region
/// prefix, its provider and its version: `us.anthropic.claude-sonnet-4-20250514-v1:0`
/// → `claude-sonnet-4`, `global.anthropic.claude-opus-4-5-20251101-v1:0` →
/// `claude-opus-4-5`, `anthropic.claude-opus-4-6-v1` → `claude-opus-4-6`. A
/// foundation-model ARN names its model; an application inference profile's
/// ARN names none (`None`).
fn family(wire_id: &str) -> Option<String> {
    let model = if is_arn(wire_id) { arn_model(wire_id)? } else { wire_id };
    let model = without_profile(model);
    let name = model.strip_prefix("anthropic.").unwrap_or(model);
    let parts: Vec<&str> = name.split('-').take_while(|part| !is_version(part)).collect();
    (!parts.is_empty()).then(|| parts.join("-"))
}

/// A part of a model id past its family: a release date (`20250514`) or a
/// version (`v1:0`, `v1`).
fn is_version(part: &str) -> bool {
    let date = part.len() == 8 && part.bytes().all(|byte| byte.is_ascii_digit());
    let version = part.strip_prefix('v').is_some_and(|rest| rest.starts_with(|c: char| c.is_ascii_digit()));
    date || version || part.contains(':')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_family_is_read_past_prefixes_and_versions() {
        let cases = [
            ("anthropic.claude-3-7-sonnet-20250219-v1:0", Some("claude-3-7-sonnet")),
            ("us.anthropic.claude-sonnet-4-20250514-v1:0", Some("claude-sonnet-4")),
            ("eu.anthropic.claude-sonnet-4-5-20250929-v1:0", Some("claude-sonnet-4-5")),
            ("global.anthropic.claude-opus-4-5-20251101-v1:0", Some("claude-opus-4-5")),
            ("apac.anthropic.claude-haiku-4-5-20251001-v1:0", Some("claude-haiku-4-5")),
            ("anthropic.claude-opus-4-1-20250805-v1:0", Some("claude-opus-4-1")),
            ("anthropic.claude-opus-4-6-v1", Some("claude-opus-4-6")),
            ("anthropic.claude-opus-4-5", Some("claude-opus-4-5")),
            (
                "arn:aws:bedrock:us-east-1::foundation-model/anthropic.claude-sonnet-4-20250514-v1:0",
                Some("claude-sonnet-4"),
            ),
            ("arn:aws:bedrock:us-east-1:123456789012:application-inference-profile/a1b2c3", None),
        ];
        for (wire_id, expected) in cases {
            assert_eq!(family(wire_id).as_deref(), expected, "{wire_id}");
        }
    }

    #[test]
    fn each_family_takes_what_aws_lists_for_it() {
        let takes = |wire_id: &str, beta: &str| for_wire_id(wire_id).contains(&beta);
        assert!(takes("us.anthropic.claude-sonnet-4-20250514-v1:0", CONTEXT_1M));
        assert!(takes("global.anthropic.claude-sonnet-4-5-20250929-v1:0", CONTEXT_1M));
        assert!(!takes("us.anthropic.claude-opus-4-5-20251101-v1:0", CONTEXT_1M), "1M is Sonnet's");
        assert!(!takes("anthropic.claude-haiku-4-5-20251001-v1:0", CONTEXT_1M));
        assert!(takes("us.anthropic.claude-opus-4-5-20251101-v1:0", EFFORT));
        assert!(!takes("eu.anthropic.claude-sonnet-4-5-20250929-v1:0", EFFORT), "effort is Opus 4.5's");
        assert!(!takes("anthropic.claude-opus-4-1-20250805-v1:0", TOOL_EXAMPLES));
        assert!(takes("anthropic.claude-3-7-sonnet-20250219-v1:0", OUTPUT_128K));
        assert!(!takes("anthropic.claude-3-7-sonnet-20250219-v1:0", INTERLEAVED_THINKING), "a Claude 4 beta");
        assert!(!takes("us.anthropic.claude-sonnet-4-20250514-v1:0", OUTPUT_128K), "3.7 Sonnet's");
        assert!(for_wire_id("anthropic.claude-3-5-sonnet-20241022-v2:0").is_empty());
        assert!(!takes("us.anthropic.claude-opus-4-5-20251101-v1:0", COMPUTER_USE), "Opus 4.5's is 2025-11-24");
        assert!(takes("us.anthropic.claude-opus-4-5-20251101-v1:0", CONTEXT_MANAGEMENT));
        assert!(takes("us.anthropic.claude-sonnet-4-20250514-v1:0", COMPUTER_USE));
        for betas in FAMILIES.iter().map(|(_, betas)| betas) {
            assert!(betas.iter().all(|beta| BEDROCK_BETAS.contains(beta)), "a family takes only listed betas");
        }
    }

    #[test]
    fn a_family_aws_does_not_name_keeps_every_beta() {
        for wire_id in [
            "global.anthropic.claude-opus-4-6-v1",
            "anthropic.claude-sonnet-4-6",
            "arn:aws:bedrock:us-east-1:123456789012:application-inference-profile/a1b2c3",
        ] {
            assert_eq!(for_wire_id(wire_id), BEDROCK_BETAS, "{wire_id}");
        }
    }
}
