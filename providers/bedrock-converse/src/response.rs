//! Decoding a 2xx Converse body. The stop-reason and usage mappings here are
//! shared with the stream decoder.

use serde_json::Value;
use weir_sdk::http::header;
use weir_sdk::json::from_body;
use weir_sdk::types::{ChatResponse, CodecError, ContentBlock, HttpResponse, StopReason, Thinking, ToolUse, Usage};

/// Normalizes a successful response.
pub fn decode(response: &HttpResponse) -> Result<ChatResponse, CodecError> {
    let body: Value = from_body(&response.body)?;
    if !body.is_object() {
        return Err(CodecError::Malformed("response is not a JSON object".to_owned()));
    }
    let blocks = body
        .pointer("/output/message/content")
        .and_then(Value::as_array)
        .ok_or_else(|| CodecError::Malformed("response has no output.message.content array".to_owned()))?;
    let mut content = Vec::new();
    for (position, block) in blocks.iter().enumerate() {
        content.extend(content_block(position, block)?);
    }
    let raw_stop = text(body.get("stopReason"));
    Ok(ChatResponse {
        content,
        stop_reason: stop_reason(raw_stop.as_deref()),
        raw_stop_reason: raw_stop,
        usage: body.get("usage").and_then(usage),
        refusal: None,
        // Converse does not echo the model: the id is the one in the path.
        served_model: None,
        request_id: request_id(response),
    })
}

/// The request id AWS support asks for.
fn request_id(response: &HttpResponse) -> Option<String> {
    header(&response.headers, "x-amzn-requestid").filter(|id| !id.is_empty()).map(str::to_owned)
}

/// One block of `output.message.content`, a union with one key per block. Keys this
/// component never asks for (citations, images, guard content) are skipped:
/// Bedrock adds members over time.
fn content_block(position: usize, block: &Value) -> Result<Option<ContentBlock>, CodecError> {
    let malformed = |what: &str| CodecError::Malformed(format!("content block {position}: {what}"));
    if let Some(text) = block.get("text") {
        let text = text.as_str().ok_or_else(|| malformed("`text` is not a string"))?;
        return Ok((!text.is_empty()).then(|| ContentBlock::Text(text.to_owned())));
    }
    if let Some(call) = block.get("toolUse") {
        let field = |key: &str| text(call.get(key)).ok_or_else(|| malformed(&format!("toolUse has no string `{key}`")));
        return Ok(Some(ContentBlock::ToolUse(ToolUse {
            id: field("toolUseId")?,
            name: field("name")?,
            input_json: call.get("input").map_or_else(|| "{}".to_owned(), Value::to_string),
        })));
    }
    if let Some(reasoning) = block.get("reasoningContent") {
        return reasoning_block(reasoning).map(Some).ok_or_else(|| malformed("reasoningContent has no text"));
    }
    Ok(None)
}

/// `reasoningText {text, signature}` or `redactedContent` (opaque base64).
fn reasoning_block(reasoning: &Value) -> Option<ContentBlock> {
    if let Some(redacted) = text(reasoning.get("redactedContent")) {
        return Some(ContentBlock::Thinking(Thinking { text: redacted, signature: None, redacted: true }));
    }
    let reasoning_text = reasoning.get("reasoningText")?;
    let thinking = reasoning_text.get("text").and_then(Value::as_str)?.to_owned();
    Some(ContentBlock::Thinking(Thinking {
        text: thinking,
        signature: text(reasoning_text.get("signature")),
        redacted: false,
    }))
}

/// A non-empty string field, owned.
pub(crate) fn text(value: Option<&Value>) -> Option<String> {
    value.and_then(Value::as_str).filter(|text| !text.is_empty()).map(str::to_owned)
}

/// Converse's `stopReason`. A guardrail or content filter stopping the answer is
/// content-filtered; malformed output and words added later are `other` (the raw
/// word is kept beside it).
pub(crate) fn stop_reason(raw: Option<&str>) -> StopReason {
    match raw {
        Some("end_turn") => StopReason::EndTurn,
        Some("tool_use") => StopReason::ToolUse,
        Some("max_tokens") => StopReason::MaxTokens,
        Some("stop_sequence") => StopReason::StopSequence,
        Some("guardrail_intervened" | "content_filtered") => StopReason::ContentFiltered,
        Some("model_context_window_exceeded") => StopReason::ContextWindowExceeded,
        _ => StopReason::Other,
    }
}

/// Converse usage in the additive shape. `inputTokens` excludes the cached tokens
/// (provider-wire 3.5), so the counts go as sent. `None` for a non-object.
pub(crate) fn usage(value: &Value) -> Option<Usage> {
    let usage = value.as_object()?;
    let count = |key: &str| usage.get(key).and_then(Value::as_u64).unwrap_or(0);
    Some(Usage {
        input: count("inputTokens"),
        output: count("outputTokens"),
        cache_read: count("cacheReadInputTokens"),
        cache_write: count("cacheWriteInputTokens"),
        reasoning: None,
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::panic)] // a failing test should stop loudly
mod tests {
    use super::*;

    fn ok(body: &str) -> HttpResponse {
        HttpResponse { status: 200, headers: vec![], body: body.as_bytes().to_vec() }
    }

    fn decoded(body: &str) -> ChatResponse {
        decode(&ok(body)).unwrap()
    }

    fn malformed(body: &str) -> String {
        match decode(&ok(body)) {
            Err(CodecError::Malformed(message)) => message,
            other => panic!("expected malformed, got {other:?}"),
        }
    }

    fn message(content: &str, stop_reason: &str) -> String {
        format!(
            r#"{{"output":{{"message":{{"role":"assistant","content":{content}}}}},"stopReason":{stop_reason},"usage":{{"inputTokens":10,"outputTokens":5,"totalTokens":15}},"metrics":{{"latencyMs":100}}}}"#
        )
    }

    const TOOL_BODY: &str = r#"{
      "output": {"message": {"role": "assistant", "content": [
        {"reasoningContent": {"reasoningText": {"text": "Need the tool.", "signature": "c2ln"}}},
        {"text": "Let me check."},
        {"toolUse": {"toolUseId": "tooluse_abc", "name": "get_weather", "input": {"city": "Paris"}}}
      ]}},
      "stopReason": "tool_use",
      "usage": {"inputTokens": 30, "outputTokens": 48, "totalTokens": 1102,
                "cacheReadInputTokens": 1024, "cacheWriteInputTokens": 0,
                "cacheDetails": [{"ttl": "5m", "inputTokens": 0}]},
      "metrics": {"latencyMs": 1175}
    }"#;

    #[test]
    fn reasoning_text_and_tool_use() {
        let mut response = ok(TOOL_BODY);
        response.headers = vec![("X-Amzn-RequestId".into(), "3f1c-aa".into())];
        let response = decode(&response).unwrap();
        assert_eq!(
            response.content,
            vec![
                ContentBlock::Thinking(Thinking {
                    text: "Need the tool.".into(),
                    signature: Some("c2ln".into()),
                    redacted: false
                }),
                ContentBlock::Text("Let me check.".into()),
                ContentBlock::ToolUse(ToolUse {
                    id: "tooluse_abc".into(),
                    name: "get_weather".into(),
                    input_json: r#"{"city":"Paris"}"#.into(),
                }),
            ]
        );
        assert_eq!(response.stop_reason, StopReason::ToolUse);
        assert_eq!(response.raw_stop_reason.as_deref(), Some("tool_use"));
        assert_eq!(response.request_id.as_deref(), Some("3f1c-aa"));
        assert_eq!(response.served_model, None);
        assert_eq!(
            response.usage,
            Some(Usage { input: 30, output: 48, cache_read: 1024, cache_write: 0, reasoning: None })
        );
    }

    #[test]
    fn redacted_reasoning_and_skipped_blocks() {
        let content = r#"[
            {"reasoningContent": {"redactedContent": "ZW5j"}},
            {"citationsContent": {"citations": []}},
            {"text": ""},
            {"toolUse": {"toolUseId": "t1", "name": "list"}}
        ]"#;
        assert_eq!(
            decoded(&message(content, r#""tool_use""#)).content,
            vec![
                ContentBlock::Thinking(Thinking { text: "ZW5j".into(), signature: None, redacted: true }),
                ContentBlock::ToolUse(ToolUse { id: "t1".into(), name: "list".into(), input_json: "{}".into() }),
            ]
        );
    }

    #[test]
    fn stop_reason_mappings() {
        let cases = [
            (r#""end_turn""#, StopReason::EndTurn),
            (r#""tool_use""#, StopReason::ToolUse),
            (r#""max_tokens""#, StopReason::MaxTokens),
            (r#""stop_sequence""#, StopReason::StopSequence),
            (r#""guardrail_intervened""#, StopReason::ContentFiltered),
            (r#""content_filtered""#, StopReason::ContentFiltered),
            (r#""model_context_window_exceeded""#, StopReason::ContextWindowExceeded),
            (r#""malformed_model_output""#, StopReason::Other),
            (r#""malformed_tool_use""#, StopReason::Other),
            (r#""something_new""#, StopReason::Other),
            ("null", StopReason::Other),
        ];
        for (raw, reason) in cases {
            let response = decoded(&message("[]", raw));
            assert_eq!(response.stop_reason, reason, "{raw}");
            assert_eq!(response.raw_stop_reason, serde_json::from_str::<Option<String>>(raw).unwrap(), "{raw}");
        }
    }

    #[test]
    fn usage_without_cache_fields_and_without_usage() {
        assert_eq!(
            decoded(&message("[]", r#""end_turn""#)).usage,
            Some(Usage { input: 10, output: 5, cache_read: 0, cache_write: 0, reasoning: None })
        );
        let bare = r#"{"output":{"message":{"role":"assistant","content":[{"text":"Hi"}]}},"stopReason":"end_turn"}"#;
        assert_eq!(decoded(bare).usage, None);
    }

    #[test]
    fn malformed_bodies() {
        assert!(malformed(r#"{"message":"Too many requests"}"#).contains("output.message.content"));
        assert!(malformed("[]").contains("object"));
        assert!(malformed("").contains("JSON"));
        assert!(malformed(&message(r#"[{"text": 7}]"#, "null")).contains("`text`"));
        assert!(malformed(&message(r#"[{"toolUse": {"toolUseId": "t1"}}]"#, "null")).contains("`name`"));
        assert!(malformed(&message(r#"[{"reasoningContent": {}}]"#, "null")).contains("reasoningContent"));
    }
}
