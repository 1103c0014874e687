//! Which model family a wire id names. Every rule of this component (body
//! shape, batch size, allowed widths) depends on the family, and the family is
//! all `encode` and `max_batch` learn from the id.
//!
//! An id names its model directly (`cohere.embed-v4:0`), behind a geography
//! prefix of a system inference profile (`us.cohere.embed-v4:0`), or at the end
//! of a foundation-model or inference-profile ARN
//! (`arn:aws:bedrock:us-east-1::foundation-model/cohere.rerank-v3-5:0`). An
//! application inference profile's ARN names no model (`…/a1b2c3`), so its
//! family cannot be known and it is not served.

use weir_sdk::bedrock::has_profile_prefix;

/// The model families this component speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    /// Amazon Titan Text Embeddings V2 (`amazon.titan-embed-text-v2:0`): one
    /// input per request, `dimensions` 256 / 512 / 1024.
    TitanEmbedV2,
    /// Cohere Embed v3 (`cohere.embed-english-v3`, `cohere.embed-multilingual-v3`),
    /// and any other `cohere.embed-*` id that is not v4: they share v3's body.
    CohereEmbedV3,
    /// Cohere Embed v4 (`cohere.embed-v4:0`): v3's body, `output_dimension`
    /// 256 / 512 / 1024 / 1536.
    CohereEmbedV4,
    /// Cohere Rerank (`cohere.rerank-v3-5:0`).
    CohereRerank,
}

impl Family {
    /// Whether the family embeds (the `embeddings` interface serves it).
    pub fn embeds(self) -> bool {
        match self {
            Family::TitanEmbedV2 | Family::CohereEmbedV3 | Family::CohereEmbedV4 => true,
            Family::CohereRerank => false,
        }
    }

    /// Whether the family reranks (the `rerank` interface serves it).
    pub fn reranks(self) -> bool {
        match self {
            Family::CohereRerank => true,
            Family::TitanEmbedV2 | Family::CohereEmbedV3 | Family::CohereEmbedV4 => false,
        }
    }
}

/// The family of a wire id, `None` when it is none of this component's.
pub fn family(wire_id: &str) -> Option<Family> {
    let model = wire_id.rsplit('/').next().unwrap_or(wire_id);
    let model = if has_profile_prefix(model) { model.split_once('.').map_or(model, |(_, rest)| rest) } else { model };
    if model.starts_with("amazon.titan-embed-text-v2") {
        Some(Family::TitanEmbedV2)
    } else if model.starts_with("cohere.embed-v4") {
        Some(Family::CohereEmbedV4)
    } else if model.starts_with("cohere.embed-") {
        Some(Family::CohereEmbedV3)
    } else if model.starts_with("cohere.rerank-") {
        Some(Family::CohereRerank)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn families_by_id_form() {
        let cases = [
            ("amazon.titan-embed-text-v2:0", Some(Family::TitanEmbedV2)),
            ("us.amazon.titan-embed-text-v2:0", Some(Family::TitanEmbedV2)),
            ("cohere.embed-english-v3", Some(Family::CohereEmbedV3)),
            ("cohere.embed-multilingual-v3", Some(Family::CohereEmbedV3)),
            ("eu.cohere.embed-multilingual-v3", Some(Family::CohereEmbedV3)),
            ("cohere.embed-v4:0", Some(Family::CohereEmbedV4)),
            ("global.cohere.embed-v4:0", Some(Family::CohereEmbedV4)),
            ("us.cohere.embed-v4:0", Some(Family::CohereEmbedV4)),
            ("cohere.rerank-v3-5:0", Some(Family::CohereRerank)),
            ("arn:aws:bedrock:us-east-1::foundation-model/cohere.rerank-v3-5:0", Some(Family::CohereRerank)),
            (
                "arn:aws:bedrock:us-east-1:123456789012:inference-profile/us.cohere.embed-v4:0",
                Some(Family::CohereEmbedV4),
            ),
            // Titan G1 takes only `inputText`: another body, not served.
            ("amazon.titan-embed-text-v1", None),
            ("amazon.titan-embed-image-v1", None),
            ("amazon.rerank-v1:0", None),
            ("cohere.command-r-plus-v1:0", None),
            ("us.anthropic.claude-sonnet-4-5-20250929-v1:0", None),
            ("arn:aws:bedrock:us-east-1:123456789012:application-inference-profile/a1b2c3", None),
            ("text-embedding-3-small", None),
            ("embed-v4.0", None),
            ("", None),
        ];
        for (id, expected) in cases {
            assert_eq!(family(id), expected, "{id}");
        }
    }

    #[test]
    fn each_family_is_one_operation() {
        for family in [Family::TitanEmbedV2, Family::CohereEmbedV3, Family::CohereEmbedV4, Family::CohereRerank] {
            assert_ne!(family.embeds(), family.reranks(), "{family:?}");
        }
    }
}
