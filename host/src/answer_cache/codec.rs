//! A stored answer as bytes: the neutral answer (what every route writes its
//! own shape from) and the id of the call that produced it, as compact JSON.
//! Only the blocks an answer carries are stored (text, tool calls, thinking);
//! an answer holding anything else is not stored at all.

use serde::{Deserialize, Serialize};

use crate::types::{ContentBlock, DecodedResponse, Refusal, StopReason, Thinking, ToolUse, Usage};

/// What a hit hands back: the answer and the call that paid for it.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredAnswer {
    pub answer: DecodedResponse,
    /// The call whose upstream answer this is (the hit's record names it).
    pub call_id: String,
}

/// An embedding's vector as stored (one per input text), and the call that
/// paid for it.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredVector {
    pub vector: Vec<f32>,
    pub call_id: String,
}

#[derive(Serialize, Deserialize)]
struct VectorWire {
    call_id: String,
    vector: Vec<f32>,
}

/// A vector as bytes.
pub fn encode_vector(stored: &StoredVector) -> Option<Vec<u8>> {
    serde_json::to_vec(&VectorWire { call_id: stored.call_id.clone(), vector: stored.vector.clone() }).ok()
}

/// Bytes [`encode_vector`] wrote, back as the vector.
pub fn decode_vector(bytes: &[u8]) -> Result<StoredVector, DecodeError> {
    let wire: VectorWire = serde_json::from_slice(bytes)?;
    Ok(StoredVector { vector: wire.vector, call_id: wire.call_id })
}

/// A ranking as stored (the documents' positions and scores, best first),
/// and the call that paid for it.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredRanking {
    pub results: Vec<crate::types::Ranked>,
    pub call_id: String,
}

#[derive(Serialize, Deserialize)]
struct RankingWire {
    call_id: String,
    ranking: Vec<(u32, f64)>,
}

/// A ranking as bytes.
pub fn encode_ranking(stored: &StoredRanking) -> Option<Vec<u8>> {
    let ranking = stored.results.iter().map(|ranked| (ranked.index, ranked.relevance_score)).collect();
    serde_json::to_vec(&RankingWire { call_id: stored.call_id.clone(), ranking }).ok()
}

/// Bytes [`encode_ranking`] wrote, back as the ranking.
pub fn decode_ranking(bytes: &[u8]) -> Result<StoredRanking, DecodeError> {
    let wire: RankingWire = serde_json::from_slice(bytes)?;
    let results = wire
        .ranking
        .into_iter()
        .map(|(index, relevance_score)| crate::types::Ranked { index, relevance_score })
        .collect();
    Ok(StoredRanking { results, call_id: wire.call_id })
}

/// Why stored bytes could not be read back (a value another version wrote,
/// or one damaged in Redis): the lookup is a miss.
#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    #[error("the stored answer is not this version's JSON: {0}")]
    Json(#[from] serde_json::Error),
    #[error("the stored answer names an unknown stop reason `{0}`")]
    StopReason(String),
}

#[derive(Serialize, Deserialize)]
struct Wire {
    call_id: String,
    content: Vec<Block>,
    stop: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    raw_stop: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    usage: Option<[u64; 5]>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    served_model: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    request_id: Option<String>,
}

#[derive(Serialize, Deserialize)]
#[serde(tag = "t", rename_all = "snake_case")]
enum Block {
    Text { text: String },
    ToolUse { id: String, name: String, input: String },
    Thinking { text: String, signature: Option<String>, redacted: bool },
}

/// The answer as bytes; `None` when it holds a block answers do not carry
/// (media, a tool result) or a refusal: such an answer is not stored.
pub fn encode(stored: &StoredAnswer) -> Option<Vec<u8>> {
    let answer = &stored.answer;
    if answer.refusal.is_some() {
        return None;
    }
    let content = answer.content.iter().map(block).collect::<Option<Vec<Block>>>()?;
    let wire = Wire {
        call_id: stored.call_id.clone(),
        content,
        stop: crate::record::stop_reason_name(answer.stop_reason).to_owned(),
        raw_stop: answer.raw_stop_reason.clone(),
        usage: answer.usage.map(|u| [u.input, u.output, u.cache_read, u.cache_write, u.reasoning.unwrap_or(u64::MAX)]),
        served_model: answer.served_model.clone(),
        request_id: answer.request_id.clone(),
    };
    serde_json::to_vec(&wire).ok()
}

/// Bytes [`encode`] wrote, back as the answer.
pub fn decode(bytes: &[u8]) -> Result<StoredAnswer, DecodeError> {
    let wire: Wire = serde_json::from_slice(bytes)?;
    let stop_reason = stop_reason(&wire.stop).ok_or_else(|| DecodeError::StopReason(wire.stop.clone()))?;
    let content = wire
        .content
        .into_iter()
        .map(|block| match block {
            Block::Text { text } => ContentBlock::Text(text),
            Block::ToolUse { id, name, input } => ContentBlock::ToolUse(ToolUse { id, name, input_json: input }),
            Block::Thinking { text, signature, redacted } => {
                ContentBlock::Thinking(Thinking { text, signature, redacted })
            }
        })
        .collect();
    let usage = wire.usage.map(|[input, output, cache_read, cache_write, reasoning]| Usage {
        input,
        output,
        cache_read,
        cache_write,
        reasoning: (reasoning != u64::MAX).then_some(reasoning),
    });
    let answer = DecodedResponse {
        content,
        stop_reason,
        raw_stop_reason: wire.raw_stop,
        usage,
        refusal: None::<Refusal>,
        served_model: wire.served_model,
        request_id: wire.request_id,
    };
    Ok(StoredAnswer { answer, call_id: wire.call_id })
}

fn block(block: &ContentBlock) -> Option<Block> {
    match block {
        ContentBlock::Text(text) => Some(Block::Text { text: text.clone() }),
        ContentBlock::ToolUse(call) => {
            Some(Block::ToolUse { id: call.id.clone(), name: call.name.clone(), input: call.input_json.clone() })
        }
        ContentBlock::Thinking(thinking) => Some(Block::Thinking {
            text: thinking.text.clone(),
            signature: thinking.signature.clone(),
            redacted: thinking.redacted,
        }),
        ContentBlock::Image(_) | ContentBlock::Document(_) | ContentBlock::ToolResult(_) => None,
    }
}

fn stop_reason(name: &str) -> Option<StopReason> {
    let reason = match name {
        "end_turn" => StopReason::EndTurn,
        "max_tokens" => StopReason::MaxTokens,
        "stop_sequence" => StopReason::StopSequence,
        "tool_use" => StopReason::ToolUse,
        "content_filtered" => StopReason::ContentFiltered,
        "pause" => StopReason::Pause,
        "context_window_exceeded" => StopReason::ContextWindowExceeded,
        "other" => StopReason::Other,
        _ => return None,
    };
    Some(reason)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer() -> StoredAnswer {
        StoredAnswer {
            answer: DecodedResponse {
                content: vec![
                    ContentBlock::Thinking(Thinking {
                        text: "hm".into(),
                        signature: Some("sig".into()),
                        redacted: false,
                    }),
                    ContentBlock::Text("hello".into()),
                    ContentBlock::ToolUse(ToolUse {
                        id: "t1".into(),
                        name: "f".into(),
                        input_json: "{\"a\":1}".into(),
                    }),
                ],
                stop_reason: StopReason::ToolUse,
                raw_stop_reason: Some("tool_calls".into()),
                usage: Some(Usage { input: 3, output: 4, cache_read: 1, cache_write: 0, reasoning: None }),
                refusal: None,
                served_model: Some("m-2025".into()),
                request_id: Some("req_1".into()),
            },
            call_id: "call-1".into(),
        }
    }

    #[test]
    fn an_answer_comes_back_as_it_was_stored() {
        let stored = answer();
        let bytes = encode(&stored).unwrap();
        assert_eq!(decode(&bytes).unwrap(), stored);
        let mut with_reasoning = answer();
        with_reasoning.answer.usage = Some(Usage { reasoning: Some(7), ..with_reasoning.answer.usage.unwrap() });
        assert_eq!(decode(&encode(&with_reasoning).unwrap()).unwrap(), with_reasoning);
    }

    #[test]
    fn a_refusal_or_a_block_answers_do_not_carry_is_not_stored() {
        let mut refused = answer();
        refused.answer.refusal = Some(Refusal { category: None, explanation: None });
        assert!(encode(&refused).is_none());
        let mut odd = answer();
        odd.answer.content.push(ContentBlock::ToolResult(crate::types::ToolResult {
            tool_use_id: "t1".into(),
            content: Vec::new(),
            is_error: false,
        }));
        assert!(encode(&odd).is_none());
    }

    #[test]
    fn a_vector_comes_back_as_it_was_stored() {
        let stored = StoredVector { vector: vec![0.25, -1.0, 3.5e-8], call_id: "c2".into() };
        assert_eq!(decode_vector(&encode_vector(&stored).unwrap()).unwrap(), stored);
        assert!(decode_vector(&encode(&answer()).unwrap()).is_err(), "an answer is not a vector");
    }

    #[test]
    fn a_ranking_comes_back_as_it_was_stored() {
        let results = vec![
            crate::types::Ranked { index: 2, relevance_score: 0.875 },
            crate::types::Ranked { index: 0, relevance_score: -1.5e-3 },
        ];
        let stored = StoredRanking { results, call_id: "c3".into() };
        assert_eq!(decode_ranking(&encode_ranking(&stored).unwrap()).unwrap(), stored);
        assert!(decode_ranking(b"{\"call_id\":\"c\",\"ranking\":[[1]]}").is_err());
    }

    #[test]
    fn damaged_bytes_are_an_error_not_an_answer() {
        assert!(matches!(decode(b"{not json"), Err(DecodeError::Json(_))));
        let mut bytes = encode(&answer()).unwrap();
        let text = String::from_utf8(bytes.clone()).unwrap().replace("tool_use\"", "sideways\"");
        bytes = text.into_bytes();
        assert!(decode(&bytes).is_err());
    }
}
