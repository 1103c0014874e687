//! Decoding a 2xx Messages API body, the same message object on every surface
//! (InvokeModel answers with it too); only the request-id header differs. The
//! stop-reason, refusal and usage mappings here are shared with the stream decoder.

use serde_json::Value;

use super::Surface;
use crate::errors::{ErrorFields, refusal};
use crate::json::from_body;
use crate::types::{
    ChatResponse, CodecError, ContentBlock, HttpResponse, StopInfo, StopReason, Thinking, ToolUse, Usage,
};

/// Usage before anything was counted: the base the wire's counts overwrite.
pub(super) const NO_USAGE: Usage = Usage { input: 0, output: 0, cache_read: 0, cache_write: 0, reasoning: None };

/// Normalizes a successful response from `surface`.
pub fn decode(surface: Surface, response: &HttpResponse) -> Result<ChatResponse, CodecError> {
    let body: Value = from_body(&response.body)?;
    if !body.is_object() {
        return Err(CodecError::Malformed("response is not a JSON object".to_owned()));
    }
    if body.get("type").and_then(Value::as_str) == Some("error") {
        let detail = ErrorFields::from_value(&body).detail(response.status);
        return Err(CodecError::Malformed(format!(
            "HTTP {} body is an error object, not a message: {detail}",
            response.status
        )));
    }
    let blocks = body
        .get("content")
        .and_then(Value::as_array)
        .ok_or_else(|| CodecError::Malformed("response has no content array".to_owned()))?;
    let mut content = Vec::new();
    for (position, block) in blocks.iter().enumerate() {
        content.extend(content_block(position, block)?);
    }
    let stop = stop_info(text(body.get("stop_reason")), body.get("stop_details"));
    Ok(ChatResponse {
        content,
        stop_reason: stop.reason,
        raw_stop_reason: stop.raw,
        usage: body.get("usage").and_then(|value| usage(value, &NO_USAGE)),
        refusal: stop.refusal,
        served_model: text(body.get("model")),
        request_id: surface.request_id(&response.headers).map(str::to_owned).or_else(|| text(body.get("id"))),
    })
}

/// One block of `content`. Types this component never asks for (server tools,
/// their results) are skipped: the API adds block types over time, and a client
/// that did not enable a feature is told to ignore what it does not know.
pub(super) fn content_block(position: usize, block: &Value) -> Result<Option<ContentBlock>, CodecError> {
    let field = |key: &str| {
        block
            .get(key)
            .and_then(Value::as_str)
            .map(str::to_owned)
            .ok_or_else(|| CodecError::Malformed(format!("content block {position} has no string `{key}`")))
    };
    let decoded = match block.get("type").and_then(Value::as_str) {
        Some("text") => Some(field("text")?).filter(|text| !text.is_empty()).map(ContentBlock::Text),
        Some("tool_use") => Some(ContentBlock::ToolUse(ToolUse {
            id: field("id")?,
            name: field("name")?,
            input_json: block.get("input").map_or_else(|| "{}".to_owned(), Value::to_string),
        })),
        Some("thinking") => Some(ContentBlock::Thinking(Thinking {
            text: field("thinking")?,
            signature: text(block.get("signature")),
            redacted: false,
        })),
        Some("redacted_thinking") => {
            Some(ContentBlock::Thinking(Thinking { text: field("data")?, signature: None, redacted: true }))
        }
        _ => None,
    };
    Ok(decoded)
}

/// A non-empty string field, owned.
pub(super) fn text(value: Option<&Value>) -> Option<String> {
    value.and_then(Value::as_str).filter(|text| !text.is_empty()).map(str::to_owned)
}

/// The stop, with the refusal's category and explanation from `stop_details` when
/// the classifiers stopped the answer.
pub(super) fn stop_info(raw: Option<String>, details: Option<&Value>) -> StopInfo {
    let reason = stop_reason(raw.as_deref());
    let refusal = (reason == StopReason::ContentFiltered).then(|| {
        let detail = |key: &str| text(details.and_then(|details| details.get(key)));
        refusal(detail("category"), detail("explanation"))
    });
    StopInfo { reason, raw, refusal }
}

fn stop_reason(raw: Option<&str>) -> StopReason {
    match raw {
        Some("end_turn") => StopReason::EndTurn,
        Some("max_tokens") => StopReason::MaxTokens,
        Some("stop_sequence") => StopReason::StopSequence,
        Some("tool_use") => StopReason::ToolUse,
        Some("pause_turn") => StopReason::Pause,
        Some("refusal") => StopReason::ContentFiltered,
        Some("model_context_window_exceeded") => StopReason::ContextWindowExceeded,
        _ => StopReason::Other,
    }
}

/// Anthropic's usage is already additive (`input_tokens` excludes cached tokens).
/// Counts the object leaves out keep their value in `base`: a stream's
/// `message_delta` often repeats only `output_tokens`. `None` for a non-object.
pub(super) fn usage(value: &Value, base: &Usage) -> Option<Usage> {
    let usage = value.as_object()?;
    let count = |key: &str, fallback: u64| usage.get(key).and_then(Value::as_u64).unwrap_or(fallback);
    let thinking = usage.get("output_tokens_details").and_then(|details| details.get("thinking_tokens"));
    Some(Usage {
        input: count("input_tokens", base.input),
        output: count("output_tokens", base.output),
        cache_read: count("cache_read_input_tokens", base.cache_read),
        cache_write: count("cache_creation_input_tokens", base.cache_write),
        reasoning: thinking.and_then(Value::as_u64).or(base.reasoning),
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::panic)] // a failing test should stop loudly
mod tests {
    use super::*;
    use crate::types::Refusal;

    /// The direct surface, which most tests here are about: the body is the same on all.
    fn decode(response: &HttpResponse) -> Result<ChatResponse, CodecError> {
        super::decode(Surface::Direct, response)
    }

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
            r#"{{"id":"msg_01","type":"message","role":"assistant","model":"claude-sonnet-4-5-20250929","content":{content},"stop_reason":{stop_reason},"stop_sequence":null,"usage":{{"input_tokens":10,"output_tokens":5}}}}"#
        )
    }

    const TOOL_BODY: &str = r#"{
      "id": "msg_01XFDUDYJgAACzvnptvVoYEL",
      "type": "message",
      "role": "assistant",
      "model": "claude-sonnet-4-5-20250929",
      "content": [
        {"type": "text", "text": "Let me check."},
        {"type": "tool_use", "id": "toolu_01A", "name": "get_weather", "input": {"city": "Paris"}}
      ],
      "stop_reason": "tool_use",
      "stop_sequence": null,
      "usage": {
        "input_tokens": 412,
        "output_tokens": 58,
        "cache_creation_input_tokens": 100,
        "cache_read_input_tokens": 2048,
        "cache_creation": {"ephemeral_5m_input_tokens": 100, "ephemeral_1h_input_tokens": 0},
        "service_tier": "standard"
      }
    }"#;

    #[test]
    fn text_and_tool_use() {
        let response = decoded(TOOL_BODY);
        assert_eq!(
            response.content,
            vec![
                ContentBlock::Text("Let me check.".into()),
                ContentBlock::ToolUse(ToolUse {
                    id: "toolu_01A".into(),
                    name: "get_weather".into(),
                    input_json: r#"{"city":"Paris"}"#.into(),
                }),
            ]
        );
        assert_eq!(response.stop_reason, StopReason::ToolUse);
        assert_eq!(response.raw_stop_reason.as_deref(), Some("tool_use"));
        assert_eq!(response.served_model.as_deref(), Some("claude-sonnet-4-5-20250929"));
        assert_eq!(response.request_id.as_deref(), Some("msg_01XFDUDYJgAACzvnptvVoYEL"));
        assert_eq!(response.refusal, None);
    }

    #[test]
    fn usage_is_additive_as_sent() {
        assert_eq!(
            decoded(TOOL_BODY).usage,
            Some(Usage { input: 412, output: 58, cache_read: 2048, cache_write: 100, reasoning: None })
        );
        let with_thinking = message("[]", r#""end_turn""#).replace(
            r#""usage":{"input_tokens":10,"output_tokens":5}"#,
            r#""usage":{"input_tokens":10,"output_tokens":500,"output_tokens_details":{"thinking_tokens":420}}"#,
        );
        assert_eq!(
            decoded(&with_thinking).usage,
            Some(Usage { input: 10, output: 500, cache_read: 0, cache_write: 0, reasoning: Some(420) })
        );
    }

    #[test]
    fn request_id_prefers_the_header() {
        let mut response = ok(TOOL_BODY);
        response.headers = vec![("Request-Id".into(), "req_018EeWyXxfu5pfWkrYcMdjWG".into())];
        assert_eq!(decode(&response).unwrap().request_id.as_deref(), Some("req_018EeWyXxfu5pfWkrYcMdjWG"));
    }

    #[test]
    fn thinking_with_signature_and_redacted() {
        let content = r#"[
            {"type":"thinking","thinking":"Compare decimals.","signature":"EqQBCkg"},
            {"type":"redacted_thinking","data":"EmwKAhgB"},
            {"type":"text","text":"9.8 is larger."}
        ]"#;
        assert_eq!(
            decoded(&message(content, r#""end_turn""#)).content,
            vec![
                ContentBlock::Thinking(Thinking {
                    text: "Compare decimals.".into(),
                    signature: Some("EqQBCkg".into()),
                    redacted: false
                }),
                ContentBlock::Thinking(Thinking { text: "EmwKAhgB".into(), signature: None, redacted: true }),
                ContentBlock::Text("9.8 is larger.".into()),
            ]
        );
    }

    #[test]
    fn refusal_with_stop_details() {
        let body = message(r#"[{"type":"text","text":"I can"}]"#, r#""refusal""#).replace(
            r#""stop_sequence":null"#,
            r#""stop_sequence":null,"stop_details":{"type":"refusal","category":"cyber","explanation":"Policy."}"#,
        );
        let response = decoded(&body);
        assert_eq!(response.stop_reason, StopReason::ContentFiltered);
        assert_eq!(response.raw_stop_reason.as_deref(), Some("refusal"));
        assert_eq!(
            response.refusal,
            Some(Refusal { category: Some("cyber".into()), explanation: Some("Policy.".into()) })
        );
        // Without stop_details (older API versions) it is still a refusal.
        let bare = decoded(&message("[]", r#""refusal""#));
        assert_eq!(bare.refusal, Some(Refusal { category: None, explanation: None }));
    }

    #[test]
    fn stop_reason_mappings() {
        let cases = [
            (r#""end_turn""#, StopReason::EndTurn),
            (r#""max_tokens""#, StopReason::MaxTokens),
            (r#""stop_sequence""#, StopReason::StopSequence),
            (r#""tool_use""#, StopReason::ToolUse),
            (r#""pause_turn""#, StopReason::Pause),
            (r#""refusal""#, StopReason::ContentFiltered),
            (r#""model_context_window_exceeded""#, StopReason::ContextWindowExceeded),
            (r#""something_new""#, StopReason::Other),
            ("null", StopReason::Other),
        ];
        for (raw, reason) in cases {
            let response = decoded(&message("[]", raw));
            assert_eq!(response.stop_reason, reason, "{raw}");
            assert_eq!(response.refusal.is_some(), reason == StopReason::ContentFiltered, "{raw}");
        }
    }

    #[test]
    fn unknown_blocks_and_empty_text_are_skipped() {
        let content = r#"[
            {"type":"server_tool_use","id":"srvtoolu_1","name":"web_search","input":{}},
            {"type":"text","text":""},
            {"type":"tool_use","id":"toolu_2","name":"list"}
        ]"#;
        assert_eq!(
            decoded(&message(content, r#""tool_use""#)).content,
            vec![ContentBlock::ToolUse(ToolUse { id: "toolu_2".into(), name: "list".into(), input_json: "{}".into() })]
        );
    }

    #[test]
    fn malformed_bodies() {
        let error = r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#;
        assert!(malformed(error).contains("overloaded_error"));
        assert!(malformed(r#"{"id":"msg_1","type":"message"}"#).contains("content"));
        assert!(malformed("[]").contains("object"));
        assert!(malformed(&message(r#"[{"type":"tool_use","id":"toolu_1"}]"#, "null")).contains("`name`"));
        assert!(malformed(&message(r#"[{"type":"text"}]"#, "null")).contains("`text`"));
    }

    #[test]
    fn bedrock_request_id_is_amazons() {
        let mut response = ok(TOOL_BODY);
        response.headers = vec![("x-amzn-RequestId".into(), "3f1c0a7e".into()), ("request-id".into(), "req_1".into())];
        let decoded = super::decode(Surface::BedrockInvoke, &response).unwrap();
        assert_eq!(decoded.request_id.as_deref(), Some("3f1c0a7e"));
        assert_eq!(decoded.stop_reason, StopReason::ToolUse);
        assert_eq!(super::decode(Surface::Mantle, &response).unwrap().request_id.as_deref(), Some("req_1"));
    }
}
