//! Decoding a 2xx Responses body: its `output` items become content blocks in
//! order (reasoning, text, calls), its `status` the stop reason.

use serde_json::Value;
use weir_sdk::errors::{ErrorFields, refusal};
use weir_sdk::http::header;
use weir_sdk::json::from_body;
use weir_sdk::types::{
    ChatResponse, CodecError, ContentBlock, HttpResponse, Refusal, StopReason, Thinking, ToolUse, Usage,
};

use super::native::NAMESPACE_SEPARATOR;
use super::signature::ReasoningSignature;
use crate::plain::additive_usage;
use crate::response::text;

pub fn decode(response: &HttpResponse) -> Result<ChatResponse, CodecError> {
    let body: Value = from_body(&response.body)?;
    if body.get("error").is_some_and(|error| !error.is_null()) {
        let detail = ErrorFields::from_value(&body).detail(response.status);
        return Err(CodecError::Malformed(format!(
            "HTTP {} body is an error, not a response: {detail}",
            response.status
        )));
    }
    let output = body
        .get("output")
        .and_then(Value::as_array)
        .ok_or_else(|| CodecError::Malformed("the response has no `output` list".to_owned()))?;
    let mut read = Output::default();
    for item in output {
        read.item(item)?;
    }
    let has_calls = read.content.iter().any(|block| matches!(block, ContentBlock::ToolUse(_)));
    let (reason, raw) = stop(&body, read.refusal.as_ref(), has_calls);
    Ok(ChatResponse {
        content: read.content,
        stop_reason: reason,
        raw_stop_reason: raw,
        usage: body.get("usage").and_then(usage),
        refusal: read.refusal,
        served_model: text(body.get("model")),
        request_id: header(&response.headers, "x-request-id")
            .filter(|id| !id.is_empty())
            .map(str::to_owned)
            .or_else(|| text(body.get("id"))),
    })
}

/// What the output items say, read in order.
#[derive(Debug, Default)]
struct Output {
    content: Vec<ContentBlock>,
    refusal: Option<Refusal>,
}

impl Output {
    fn item(&mut self, item: &Value) -> Result<(), CodecError> {
        match item.get("type").and_then(Value::as_str) {
            Some("reasoning") => self.content.push(ContentBlock::Thinking(reasoning(item))),
            Some("message") => self.message(item),
            Some("function_call") => self.content.push(ContentBlock::ToolUse(function_call(item)?)),
            Some("custom_tool_call") => self.content.push(ContentBlock::ToolUse(custom_tool_call(item)?)),
            // OpenAI's hosted tools' own items (a web search it ran): nothing to hand back.
            _ => {}
        }
        Ok(())
    }

    fn message(&mut self, item: &Value) {
        for part in item.get("content").and_then(Value::as_array).into_iter().flatten() {
            match part.get("type").and_then(Value::as_str) {
                Some("output_text") => {
                    if let Some(words) = text(part.get("text")) {
                        self.content.push(ContentBlock::Text(words));
                    }
                }
                Some("refusal") => self.refusal = Some(refusal(None, text(part.get("refusal")))),
                _ => {}
            }
        }
    }
}

/// A reasoning item as a thinking block: its summaries as the text, its id and
/// encrypted content as the signature (none without encrypted content: it
/// could not be sent back).
pub(super) fn reasoning(item: &Value) -> Thinking {
    let summaries: Vec<&str> = item
        .get("summary")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|part| part.get("text").and_then(Value::as_str))
        .collect();
    Thinking { text: summaries.join("\n\n"), signature: signature(item), redacted: false }
}

pub(super) fn signature(item: &Value) -> Option<String> {
    let id = text(item.get("id"))?;
    let encrypted_content = text(item.get("encrypted_content"))?;
    ReasoningSignature { id, encrypted_content }.to_text()
}

pub(super) fn function_call(item: &Value) -> Result<ToolUse, CodecError> {
    let name = call_name(item).ok_or_else(|| CodecError::Malformed("a function_call has no name".to_owned()))?;
    let id = text(item.get("call_id")).or_else(|| text(item.get("id"))).unwrap_or_else(|| format!("call_{name}"));
    let arguments = text(item.get("arguments")).unwrap_or_else(|| "{}".to_owned());
    Ok(ToolUse { id, name, input_json: arguments })
}

/// A call to a custom tool (sent natively; see `super::native`): its text as
/// the host's arguments for one, `{"input": …}`.
pub(super) fn custom_tool_call(item: &Value) -> Result<ToolUse, CodecError> {
    let name = call_name(item).ok_or_else(|| CodecError::Malformed("a custom_tool_call has no name".to_owned()))?;
    let id = text(item.get("call_id")).or_else(|| text(item.get("id"))).unwrap_or_else(|| format!("call_{name}"));
    let input = text(item.get("input")).unwrap_or_default();
    Ok(ToolUse { id, name, input_json: serde_json::json!({"input": input}).to_string() })
}

/// A call's tool name as the host knows it: a call to a member of a
/// namespace (sent natively; see `super::native`) carries `namespace` beside
/// the member's own `name`, and is named `<namespace>__<name>`, the flattened
/// name the host maps back to the caller's tool.
fn call_name(item: &Value) -> Option<String> {
    let name = text(item.get("name"))?;
    Some(match text(item.get("namespace")).filter(|namespace| !namespace.is_empty()) {
        Some(namespace) => format!("{namespace}{NAMESPACE_SEPARATOR}{name}"),
        None => name,
    })
}

/// The stop reason and the raw word it came from: a refusal, an incomplete
/// response's reason, or a completed one with or without calls.
pub(super) fn stop(body: &Value, refusal: Option<&Refusal>, has_calls: bool) -> (StopReason, Option<String>) {
    let status = text(body.get("status"));
    let incomplete = text(body.get("incomplete_details").and_then(|details| details.get("reason")));
    let reason = match (refusal, status.as_deref(), incomplete.as_deref()) {
        (Some(_), _, _) => StopReason::ContentFiltered,
        (None, Some("incomplete"), Some("max_output_tokens")) => StopReason::MaxTokens,
        (None, Some("incomplete"), Some("content_filter")) => StopReason::ContentFiltered,
        (None, Some("completed"), _) if has_calls => StopReason::ToolUse,
        (None, Some("completed"), _) => StopReason::EndTurn,
        _ => StopReason::Other,
    };
    (reason, incomplete.or(status))
}

/// `input_tokens` includes the cached part; Weir's usage is additive.
pub(super) fn usage(value: &Value) -> Option<Usage> {
    let usage = value.as_object()?;
    let count = |key: &str| usage.get(key).and_then(Value::as_u64);
    let detail = |parent: &str, key: &str| usage.get(parent).and_then(|d| d.get(key)).and_then(Value::as_u64);
    Some(additive_usage(
        count("input_tokens").unwrap_or(0),
        count("output_tokens").unwrap_or(0),
        detail("input_tokens_details", "cached_tokens").unwrap_or(0),
        detail("output_tokens_details", "reasoning_tokens"),
    ))
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::panic)] // a failing test should stop loudly
mod tests {
    use serde_json::json;

    use super::*;

    fn ok(body: &Value) -> HttpResponse {
        HttpResponse {
            status: 200,
            headers: vec![("x-request-id".into(), "req_9".into())],
            body: body.to_string().into_bytes(),
        }
    }

    fn usage_json() -> Value {
        json!({"input_tokens": 120, "input_tokens_details": {"cached_tokens": 100}, "output_tokens": 40,
               "output_tokens_details": {"reasoning_tokens": 30}, "total_tokens": 160})
    }

    #[test]
    fn reasoning_text_and_a_call_decode_in_order_with_additive_usage() {
        let body = json!({"id": "resp_1", "object": "response", "status": "completed", "model": "gpt-5-2025", "error": null,
            "output": [
                {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "Plan."}], "encrypted_content": "enc"},
                {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
                 "content": [{"type": "output_text", "text": "Checking.", "annotations": []}]},
                {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "get_weather", "arguments": "{\"city\":\"Paris\"}", "status": "completed"},
                {"type": "web_search_call", "id": "ws_1", "status": "completed"}
            ],
            "usage": usage_json()});
        let answer = decode(&ok(&body)).unwrap();
        let signature = ReasoningSignature { id: "rs_1".into(), encrypted_content: "enc".into() }.to_text();
        assert_eq!(
            answer.content,
            vec![
                ContentBlock::Thinking(Thinking { text: "Plan.".into(), signature, redacted: false }),
                ContentBlock::Text("Checking.".into()),
                ContentBlock::ToolUse(ToolUse {
                    id: "call_1".into(),
                    name: "get_weather".into(),
                    input_json: "{\"city\":\"Paris\"}".into()
                }),
            ]
        );
        assert_eq!(answer.stop_reason, StopReason::ToolUse);
        assert_eq!(
            answer.usage,
            Some(Usage { input: 20, output: 40, cache_read: 100, cache_write: 0, reasoning: Some(30) })
        );
        assert_eq!(answer.served_model.as_deref(), Some("gpt-5-2025"));
        assert_eq!(answer.request_id.as_deref(), Some("req_9"));
    }

    #[test]
    fn a_custom_tool_call_decodes_as_a_tool_use_of_its_input() {
        let body = json!({"status": "completed", "output": [
            {"type": "custom_tool_call", "id": "ctc_1", "call_id": "call_c", "name": "apply_patch", "input": "*** Begin Patch"}
        ]});
        let answer = decode(&ok(&body)).unwrap();
        assert_eq!(
            answer.content,
            [ContentBlock::ToolUse(ToolUse {
                id: "call_c".into(),
                name: "apply_patch".into(),
                input_json: json!({"input": "*** Begin Patch"}).to_string()
            })]
        );
        assert_eq!(answer.stop_reason, StopReason::ToolUse);
        let nameless = json!({"status": "completed", "output": [{"type": "custom_tool_call", "input": "x"}]});
        assert!(matches!(decode(&ok(&nameless)), Err(CodecError::Malformed(_))));
    }

    #[test]
    fn a_call_in_a_namespace_is_named_by_its_namespace_and_its_own_name() {
        let body = json!({"status": "completed", "output": [
            {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "lookup", "namespace": "crm",
             "arguments": "{\"id\":7}", "status": "completed"},
            {"type": "custom_tool_call", "id": "ctc_1", "call_id": "call_2", "name": "note", "namespace": "crm", "input": "hi"},
            {"type": "function_call", "call_id": "call_3", "name": "shell", "namespace": "", "arguments": "{}"}
        ]});
        let names: Vec<String> = decode(&ok(&body))
            .unwrap()
            .content
            .into_iter()
            .map(|block| match block {
                ContentBlock::ToolUse(call) => call.name,
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(names, ["crm__lookup", "crm__note", "shell"]);
    }

    #[test]
    fn incomplete_and_refused_answers_say_why() {
        let cut = json!({"status": "incomplete", "incomplete_details": {"reason": "max_output_tokens"},
            "output": [{"type": "message", "content": [{"type": "output_text", "text": "Half"}]}]});
        let answer = decode(&ok(&cut)).unwrap();
        assert_eq!(
            (answer.stop_reason, answer.raw_stop_reason.as_deref()),
            (StopReason::MaxTokens, Some("max_output_tokens"))
        );

        let refused = json!({"status": "completed", "output": [{"type": "message", "content": [{"type": "refusal", "refusal": "I can't help."}]}]});
        let answer = decode(&ok(&refused)).unwrap();
        assert_eq!(answer.stop_reason, StopReason::ContentFiltered);
        assert_eq!(answer.refusal.unwrap().explanation.as_deref(), Some("I can't help."));
    }

    #[test]
    fn an_error_body_or_one_without_output_is_malformed() {
        for body in
            [json!({"error": {"message": "bad", "type": "server_error"}}), json!({"status": "completed"}), json!([1])]
        {
            assert!(matches!(decode(&ok(&body)), Err(CodecError::Malformed(_))), "{body}");
        }
        let garbage = HttpResponse { status: 200, headers: vec![], body: b"<html>".to_vec() };
        assert!(decode(&garbage).is_err());
    }
}
