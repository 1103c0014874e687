//! Decoding a 2xx `generateContent` body (a GenerateContentResponse). The part,
//! stop and usage readings here are shared with the stream decoder, whose
//! every `data:` is a GenerateContentResponse too.
//!
//! - Parts: `text` → text; `text` with `thought: true` → thinking; a
//!   `functionCall` → a tool use. A part's `thoughtSignature` becomes the
//!   signature of a thinking block placed just before the part's content (the
//!   thinking just read when there is one), which is where `request` looks for
//!   it. Parts this component never asks for (`executableCode`, `inlineData`
//!   images) are skipped.
//! - Calls: Gemini 2.5 gives a call no id and matches results by name and
//!   order. A call's id is Gemini's when it sends one (`functionCall.id`), else
//!   made from the response's `responseId` and the call's position
//!   ([`call_id`]): the same answer always gives the same ids, and two answers
//!   never share one.
//! - Stops: `finishReason` (see [`stop_reason`]); a prompt blocked before any
//!   candidate (`promptFeedback.blockReason`) is content-filtered.
//! - Usage: see [`usage`].

use weir_sdk::errors::refusal;
use weir_sdk::types::{
    ChatResponse, CodecError, ContentBlock, HttpResponse, Refusal, StopReason, Thinking, ToolUse, Usage,
};

use crate::signature;
use crate::wire::{self, Candidate, GenerateContentResponse, UsageMetadata};

/// The prefix of the ids this component makes for calls Gemini gave no id.
const MADE_CALL_ID: &str = "gemini-call-";

/// Normalizes a successful response.
pub fn decode(response: &HttpResponse) -> Result<ChatResponse, CodecError> {
    let body = GenerateContentResponse::parse(&response.body)?;
    let response_id = wire::owned(&body.response_id);
    let served_model = wire::owned(&body.model_version);
    let usage = body.usage_metadata.as_ref().map(usage);
    let Some(candidate) = body.candidate() else {
        let blocked = prompt_block(&body).ok_or_else(|| malformed("response has no candidates and no blockReason"))?;
        return Ok(ChatResponse {
            content: Vec::new(),
            stop_reason: StopReason::ContentFiltered,
            raw_stop_reason: blocked.category.clone(),
            usage,
            refusal: Some(blocked),
            served_model,
            request_id: response_id,
        });
    };
    let mut content = Vec::new();
    let mut calls = 0;
    for part in candidate.parts() {
        match read_part(part, response_id.as_deref(), &mut calls)? {
            Part::Thought { text, signature } => {
                // As a stream's thinking deltas assemble: into the thinking just read.
                match content.last_mut() {
                    Some(ContentBlock::Thinking(thinking)) => thinking.text.push_str(&text),
                    _ => content.push(ContentBlock::Thinking(Thinking { text, signature: None, redacted: false })),
                }
                if let Some(signature) = signature {
                    sign_last_thinking_or_push(&mut content, signature);
                }
            }
            Part::Answer { signature, block } => {
                if let Some(signature) = signature {
                    sign_last_thinking_or_push(&mut content, signature);
                }
                content.extend(block);
            }
        }
    }
    let raw = wire::owned(&candidate.finish_reason);
    let (stop_reason, refusal) = stop(raw.as_deref(), calls > 0, candidate);
    Ok(ChatResponse {
        content,
        stop_reason,
        raw_stop_reason: raw,
        usage,
        refusal,
        served_model,
        request_id: response_id,
    })
}

/// A signature for the part that follows, onto the thinking just read (joined
/// to one it has, as the host's stream assembler joins signature pieces), else
/// on a thinking block of its own: the same blocks a stream of this answer
/// assembles into.
fn sign_last_thinking_or_push(content: &mut Vec<ContentBlock>, signature: String) {
    match content.last_mut() {
        Some(ContentBlock::Thinking(thinking)) => {
            thinking.signature.get_or_insert_with(String::new).push_str(&signature)
        }
        _ => content.push(ContentBlock::Thinking(Thinking {
            text: String::new(),
            signature: Some(signature),
            redacted: false,
        })),
    }
}

/// What one part means.
pub(crate) enum Part {
    /// A thought summary, with the signature Gemini put on it.
    Thought { text: String, signature: Option<String> },
    /// Answer content (none for an empty text part), after the signature that
    /// goes back on it.
    Answer { signature: Option<String>, block: Option<ContentBlock> },
}

/// Reads one part; `calls` counts the function calls read so far in the
/// answer, which numbers the ids made for them.
pub(crate) fn read_part(part: &wire::Part<'_>, response_id: Option<&str>, calls: &mut u32) -> Result<Part, CodecError> {
    let signature = part.thought_signature.as_deref().filter(|raw| !raw.is_empty()).map(signature::wrap);
    if let Some(call) = &part.function_call {
        let name = wire::owned(&call.name).ok_or_else(|| malformed("functionCall has no name"))?;
        let input_json = match &call.args {
            None | Some(serde_json::Value::Null) => "{}".to_owned(),
            Some(args @ serde_json::Value::Object(_)) => args.to_string(),
            Some(_) => return Err(malformed("functionCall args is not an object")),
        };
        let id = call_id(call.id.as_deref().filter(|id| !id.is_empty()), response_id, *calls);
        *calls += 1;
        return Ok(Part::Answer { signature, block: Some(ContentBlock::ToolUse(ToolUse { id, name, input_json })) });
    }
    if part.thought == Some(true) {
        return Ok(Part::Thought { text: part.text.as_deref().unwrap_or_default().to_owned(), signature });
    }
    let block = wire::owned(&part.text).map(ContentBlock::Text);
    Ok(Part::Answer { signature, block })
}

/// Gemini's own call id when it gave one; else one made from the response id
/// and the call's position.
pub(crate) fn call_id(upstream: Option<&str>, response_id: Option<&str>, position: u32) -> String {
    match (upstream, response_id) {
        (Some(id), _) => id.to_owned(),
        (None, Some(response)) => format!("{MADE_CALL_ID}{response}-{position}"),
        (None, None) => format!("{MADE_CALL_ID}{position}"),
    }
}

/// The id to send back with a call or its result: Gemini's own, never one this
/// component made.
pub(crate) fn upstream_call_id(id: &str) -> Option<&str> {
    (!id.starts_with(MADE_CALL_ID) && !id.is_empty()).then_some(id)
}

/// A prompt Gemini blocked before answering: `promptFeedback.blockReason`
/// (`SAFETY`, `BLOCKLIST`, `PROHIBITED_CONTENT`, `IMAGE_SAFETY`, `OTHER`), its
/// message as the explanation.
pub(crate) fn prompt_block(body: &GenerateContentResponse<'_>) -> Option<Refusal> {
    let feedback = body.prompt_feedback.as_ref()?;
    let reason = wire::owned(&feedback.block_reason)?;
    Some(refusal(Some(reason), wire::owned(&feedback.block_reason_message)))
}

/// The stop a candidate's `finishReason` means, with the refusal it carries.
///
/// `STOP` is the end of the turn (a tool-use stop when the answer calls
/// functions: Gemini says `STOP` for both, and for a stop sequence, which it
/// does not tell apart). `MAX_TOKENS` is truncation. The words that say a
/// filter stopped the answer (`SAFETY`, `RECITATION`, `BLOCKLIST`,
/// `PROHIBITED_CONTENT`, `SPII`, `IMAGE_SAFETY`, `IMAGE_PROHIBITED_CONTENT`,
/// `IMAGE_RECITATION`) are content-filtered, the word as the refusal's category
/// and `finishMessage` as its explanation. Anything else (`MALFORMED_FUNCTION_CALL`,
/// `UNEXPECTED_TOOL_CALL`, `TOO_MANY_TOOL_CALLS`, `LANGUAGE`, `OTHER`, words
/// added later) is `other`, the raw word kept.
pub(crate) fn stop(raw: Option<&str>, called: bool, candidate: &Candidate<'_>) -> (StopReason, Option<Refusal>) {
    let reason = stop_reason(raw, called);
    let refusal = (reason == StopReason::ContentFiltered)
        .then(|| refusal(raw.map(str::to_owned), wire::owned(&candidate.finish_message)));
    (reason, refusal)
}

pub(crate) fn stop_reason(raw: Option<&str>, called: bool) -> StopReason {
    match raw {
        Some("STOP") if called => StopReason::ToolUse,
        Some("STOP") => StopReason::EndTurn,
        Some("MAX_TOKENS") => StopReason::MaxTokens,
        Some(
            "SAFETY"
            | "RECITATION"
            | "BLOCKLIST"
            | "PROHIBITED_CONTENT"
            | "SPII"
            | "IMAGE_SAFETY"
            | "IMAGE_PROHIBITED_CONTENT"
            | "IMAGE_RECITATION",
        ) => StopReason::ContentFiltered,
        _ => StopReason::Other,
    }
}

/// `usageMetadata` in the additive shape. `promptTokenCount` includes the
/// cached tokens (`cachedContentTokenCount`), so they are taken out of the
/// input and reported as cache reads; `toolUsePromptTokenCount` (prompts of
/// Google's own tools) is billed as input and added to it. Thinking is billed
/// as output (Google's price page: "output price, including thinking tokens")
/// and is not in `candidatesTokenCount`, so output is candidates + thoughts,
/// and `reasoning` the thoughts.
pub(crate) fn usage(usage: &UsageMetadata) -> Usage {
    let cached = usage.cached_content_token_count.unwrap_or(0);
    let thoughts = usage.thoughts_token_count;
    Usage {
        input: usage.prompt_token_count.unwrap_or(0).saturating_sub(cached)
            + usage.tool_use_prompt_token_count.unwrap_or(0),
        output: usage.candidates_token_count.unwrap_or(0) + thoughts.unwrap_or(0),
        cache_read: cached,
        cache_write: 0,
        reasoning: thoughts,
    }
}

pub(crate) fn malformed(what: &str) -> CodecError {
    CodecError::Malformed(what.to_owned())
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::panic)] // a failing test should stop loudly
mod tests {
    use super::*;

    fn decoded(body: &str) -> ChatResponse {
        decode(&HttpResponse { status: 200, headers: vec![], body: body.as_bytes().to_vec() }).unwrap()
    }

    fn is_malformed(body: &str) -> bool {
        matches!(
            decode(&HttpResponse { status: 200, headers: vec![], body: body.as_bytes().to_vec() }),
            Err(CodecError::Malformed(_))
        )
    }

    #[test]
    fn text_thoughts_usage_and_model() {
        let answer = decoded(
            r#"{"candidates":[{"content":{"role":"model","parts":[
                 {"text":"Plan it.","thought":true},{"text":"Rome.","thoughtSignature":"c2ln"}]},
                 "finishReason":"STOP","index":0}],
               "usageMetadata":{"promptTokenCount":100,"candidatesTokenCount":5,"thoughtsTokenCount":40,
                                "cachedContentTokenCount":60,"totalTokenCount":145},
               "modelVersion":"gemini-2.5-flash","responseId":"resp-1"}"#,
        );
        assert_eq!(
            answer.content,
            vec![
                ContentBlock::Thinking(Thinking {
                    text: "Plan it.".into(),
                    signature: Some(signature::wrap("c2ln")),
                    redacted: false
                }),
                ContentBlock::Text("Rome.".into()),
            ]
        );
        assert_eq!(answer.stop_reason, StopReason::EndTurn);
        assert_eq!(
            answer.usage,
            Some(Usage { input: 40, output: 45, cache_read: 60, cache_write: 0, reasoning: Some(40) })
        );
        assert_eq!(answer.served_model.as_deref(), Some("gemini-2.5-flash"));
        assert_eq!(answer.request_id.as_deref(), Some("resp-1"));
    }

    #[test]
    fn calls_get_stable_ids_and_a_tool_use_stop() {
        let body = r#"{"candidates":[{"content":{"role":"model","parts":[
              {"functionCall":{"name":"get_weather","args":{"city":"Paris"}},"thoughtSignature":"c2ln"},
              {"functionCall":{"name":"get_time"}},
              {"functionCall":{"name":"get_tz","args":{},"id":"fc-9"}}]},"finishReason":"STOP"}],
            "responseId":"r7"}"#;
        let answer = decoded(body);
        assert_eq!(answer, decoded(body), "the same answer gives the same ids");
        let ids: Vec<&str> = answer
            .content
            .iter()
            .filter_map(|block| match block {
                ContentBlock::ToolUse(call) => Some(call.id.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(ids, ["gemini-call-r7-0", "gemini-call-r7-1", "fc-9"]);
        assert!(matches!(&answer.content[0], ContentBlock::Thinking(t) if t.text.is_empty() && t.signature.is_some()));
        assert!(matches!(&answer.content[2], ContentBlock::ToolUse(call) if call.input_json == "{}"));
        assert_eq!(answer.stop_reason, StopReason::ToolUse);
        assert_eq!(upstream_call_id("gemini-call-r7-0"), None);
        assert_eq!(upstream_call_id("fc-9"), Some("fc-9"));
    }

    #[test]
    fn safety_stops_and_blocked_prompts_are_refusals() {
        let answer =
            decoded(r#"{"candidates":[{"finishReason":"SAFETY","finishMessage":"unsafe","safetyRatings":[]}]}"#);
        assert_eq!(answer.stop_reason, StopReason::ContentFiltered);
        assert_eq!(
            answer.refusal,
            Some(Refusal { category: Some("SAFETY".into()), explanation: Some("unsafe".into()) })
        );
        let blocked = decoded(
            r#"{"promptFeedback":{"blockReason":"PROHIBITED_CONTENT"},"usageMetadata":{"promptTokenCount":12,"totalTokenCount":12}}"#,
        );
        assert_eq!(blocked.stop_reason, StopReason::ContentFiltered);
        assert_eq!(blocked.raw_stop_reason.as_deref(), Some("PROHIBITED_CONTENT"));
        assert_eq!(blocked.usage.map(|usage| usage.input), Some(12));
        for (raw, reason) in [
            ("MAX_TOKENS", StopReason::MaxTokens),
            ("RECITATION", StopReason::ContentFiltered),
            ("SPII", StopReason::ContentFiltered),
            ("MALFORMED_FUNCTION_CALL", StopReason::Other),
            ("SOMETHING_NEW", StopReason::Other),
        ] {
            assert_eq!(stop_reason(Some(raw), false), reason, "{raw}");
        }
    }

    #[test]
    fn garbage_is_malformed() {
        for body in [
            "",
            "[]",
            "null",
            r#"{"candidates":{}}"#,
            r#"{}"#,
            r#"{"candidates":[{"content":{"parts":[1]}}]}"#,
            r#"{"candidates":[{"content":{"parts":[{"functionCall":{"args":{}}}]}}]}"#,
        ] {
            assert!(is_malformed(body), "{body}");
        }
    }
}
