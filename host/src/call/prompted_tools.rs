//! Tools for a model without native tool calling: the tools are described in the
//! system prompt, the model answers with a JSON object, and the host reads the
//! calls back out of it. The caller sees the same tool-call shape either way, so
//! switching a model between native and prompted tools changes nothing upstream.
//!
//! Whether a call's tools are prompted is the policy's decision (see
//! `call::policy`): tools are in play and the entry has no native tool calling
//! (its provider does not declare it, its `capabilities` do not list `tools`,
//! or `native_tools = false`, for a server that speaks the dialect but whose
//! model was never trained for tool calls).
//!
//! The protocol asked of the model is one JSON object, nothing else:
//! `{"tool_calls": [{"name": "...", "arguments": {...}}]}` to call tools, or
//! `{"answer": "..."}` to answer. An answer that is not such an object (or names
//! a tool that was not offered) is kept as the model's text: it is never guessed at.

use serde_json::{Value, json};

use crate::types::{
    ContentBlock, Conversation, DecodedResponse, LeafBlock, StopReason, ToolChoice, ToolDefinition, ToolUse, TurnRole,
    text_of,
};

/// The tools offered to a model that reads them from its prompt.
#[derive(Debug, Clone)]
pub(super) struct PromptedTools {
    names: Vec<String>,
}

/// Rewrites a conversation for a model without native tools: the tools and the
/// choice become a system block, earlier calls and results become text.
pub(super) fn describe(conversation: &mut Conversation) -> PromptedTools {
    let tools = std::mem::take(&mut conversation.tools);
    let choice = conversation.tool_choice.take();
    for turn in &mut conversation.turns {
        let blocks = std::mem::take(&mut turn.content);
        turn.content = blocks.into_iter().flat_map(|block| as_text(block, turn.role)).collect();
    }
    let offered = !tools.is_empty() && choice != Some(ToolChoice::None);
    if offered {
        conversation.system.push(instructions(&tools, choice.as_ref()));
    }
    let names = if offered { tools.into_iter().map(|tool| tool.name).collect() } else { Vec::new() };
    PromptedTools { names }
}

fn instructions(tools: &[ToolDefinition], choice: Option<&ToolChoice>) -> String {
    let mut text = String::from(
        "You can call tools. To call one or more, reply with only this JSON object and nothing else:\n\
         {\"tool_calls\": [{\"name\": \"<tool name>\", \"arguments\": {<arguments matching its schema>}}]}\n\
         To answer without calling a tool, reply with only: {\"answer\": \"<your answer>\"}\n\nTools:\n",
    );
    for tool in tools {
        text.push_str(&format!(
            "- {}: {}\n  arguments (JSON Schema): {}\n",
            tool.name, tool.description, tool.parameters_json
        ));
    }
    match choice {
        Some(ToolChoice::Required) => text.push_str("\nYou must call at least one tool."),
        Some(ToolChoice::Named(name)) => text.push_str(&format!("\nYou must call the tool `{name}`.")),
        _ => {}
    }
    text
}

/// An earlier call or result as the text the protocol would have produced.
fn as_text(block: ContentBlock, role: TurnRole) -> Vec<ContentBlock> {
    match block {
        ContentBlock::ToolUse(call) if role == TurnRole::Assistant => {
            let arguments: Value = serde_json::from_str(&call.input_json).unwrap_or(Value::String(call.input_json));
            let text = json!({"tool_calls": [{"id": call.id, "name": call.name, "arguments": arguments}]});
            vec![ContentBlock::Text(text.to_string())]
        }
        ContentBlock::ToolResult(result) => {
            let outcome = if result.is_error { "failed" } else { "returned" };
            let mut blocks = vec![ContentBlock::Text(format!("The tool call `{}` {outcome}:", result.tool_use_id))];
            blocks.extend(result.content.into_iter().map(|leaf| match leaf {
                LeafBlock::Text(text) => ContentBlock::Text(text),
                LeafBlock::Image(media) => ContentBlock::Image(media),
                LeafBlock::Document(media) => ContentBlock::Document(media),
            }));
            blocks
        }
        other => vec![other],
    }
}

impl PromptedTools {
    /// Reads the protocol's JSON out of an answer: calls become tool-use blocks
    /// (with a tool-use stop), an `answer` becomes the text. Anything else stays
    /// as the model wrote it.
    pub(super) fn read(&self, answer: &mut DecodedResponse) {
        let Some(reply) = parse_reply(&text_of(&answer.content)) else { return };
        let replacement = match reply {
            Reply::Answer(text) => vec![ContentBlock::Text(text)],
            Reply::Calls(calls) if calls.iter().all(|call| self.names.contains(&call.name)) => {
                calls.into_iter().map(ContentBlock::ToolUse).collect()
            }
            Reply::Calls(_) => return,
        };
        let is_call = matches!(replacement.first(), Some(ContentBlock::ToolUse(_)));
        answer.content.retain(|block| !matches!(block, ContentBlock::Text(_)));
        answer.content.extend(replacement);
        if is_call && answer.stop_reason == StopReason::EndTurn {
            answer.stop_reason = StopReason::ToolUse;
        }
    }
}

enum Reply {
    Answer(String),
    Calls(Vec<ToolUse>),
}

/// The reply object, tolerating a Markdown code fence around it.
fn parse_reply(text: &str) -> Option<Reply> {
    let trimmed = text.trim();
    let unfenced = trimmed
        .strip_prefix("```json")
        .or_else(|| trimmed.strip_prefix("```"))
        .and_then(|rest| rest.strip_suffix("```"))
        .unwrap_or(trimmed);
    let value: Value = serde_json::from_str(unfenced.trim()).ok()?;
    if let Some(answer) = value.get("answer").and_then(Value::as_str) {
        return Some(Reply::Answer(answer.to_owned()));
    }
    let calls = value.get("tool_calls")?.as_array()?;
    if calls.is_empty() {
        return None;
    }
    calls.iter().map(tool_use).collect::<Option<Vec<_>>>().map(Reply::Calls)
}

fn tool_use(call: &Value) -> Option<ToolUse> {
    let name = call.get("name")?.as_str()?.to_owned();
    let arguments = match call.get("arguments") {
        None | Some(Value::Null) => json!({}),
        Some(Value::String(text)) => serde_json::from_str(text).ok()?,
        Some(other) => other.clone(),
    };
    if !arguments.is_object() {
        return None;
    }
    Some(ToolUse { id: format!("call_{:016x}", fastrand::u64(..)), name, input_json: arguments.to_string() })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{ToolResult, Turn};

    fn weather() -> ToolDefinition {
        ToolDefinition {
            name: "get_weather".into(),
            description: "Current weather".into(),
            parameters_json: r#"{"type":"object","properties":{"city":{"type":"string"}}}"#.into(),
        }
    }

    fn answer(text: &str) -> DecodedResponse {
        DecodedResponse {
            content: vec![ContentBlock::Text(text.into())],
            stop_reason: StopReason::EndTurn,
            raw_stop_reason: None,
            usage: None,
            refusal: None,
            served_model: None,
            request_id: None,
        }
    }

    fn offered() -> PromptedTools {
        describe(&mut Conversation::user("hi").with_tool(weather()))
    }

    #[test]
    fn tools_and_the_choice_become_a_system_block_and_leave_the_native_fields_empty() {
        let mut conversation = Conversation::user("Weather in Paris?").with_tool(weather());
        conversation.tool_choice = Some(ToolChoice::Named("get_weather".into()));
        describe(&mut conversation);
        assert!(conversation.tools.is_empty() && conversation.tool_choice.is_none());
        let system = conversation.system.last().unwrap();
        assert!(system.contains("- get_weather: Current weather"), "{system}");
        assert!(system.contains(r#""city""#), "{system}");
        assert!(system.contains("You must call the tool `get_weather`."), "{system}");
    }

    #[test]
    fn earlier_calls_and_results_become_text() {
        let mut conversation = Conversation::user("Weather?").with_tool(weather());
        let call = ToolUse { id: "c1".into(), name: "get_weather".into(), input_json: r#"{"city":"Paris"}"#.into() };
        conversation.turns.push(Turn::assistant(vec![ContentBlock::ToolUse(call)]));
        let result =
            ToolResult { tool_use_id: "c1".into(), content: vec![LeafBlock::Text("18C".into())], is_error: false };
        conversation.turns.push(Turn::user(vec![ContentBlock::ToolResult(result)]));
        describe(&mut conversation);
        let texts: Vec<String> = conversation.turns.iter().map(|turn| text_of(&turn.content)).collect();
        assert!(texts[1].contains(r#""name":"get_weather""#) && texts[1].contains(r#""city":"Paris""#), "{texts:?}");
        assert_eq!(texts[2], "The tool call `c1` returned:18C");
    }

    #[test]
    fn a_call_reply_becomes_tool_use_blocks_with_a_tool_use_stop() {
        let mut reply = answer(
            "```json\n{\"tool_calls\": [{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}]}\n```",
        );
        offered().read(&mut reply);
        let [ContentBlock::ToolUse(call)] = reply.content.as_slice() else { panic!("{:?}", reply.content) };
        assert_eq!(call.name, "get_weather");
        assert_eq!(serde_json::from_str::<Value>(&call.input_json).unwrap(), json!({"city": "Paris"}));
        assert!(call.id.starts_with("call_"));
        assert_eq!(reply.stop_reason, StopReason::ToolUse);
    }

    #[test]
    fn an_answer_reply_becomes_its_text() {
        let mut reply = answer(r#"{"answer": "It is sunny."}"#);
        offered().read(&mut reply);
        assert_eq!(text_of(&reply.content), "It is sunny.");
        assert_eq!(reply.stop_reason, StopReason::EndTurn);
    }

    #[test]
    fn prose_unknown_tools_and_bad_arguments_stay_as_written() {
        for text in [
            "Just prose.",
            r#"{"tool_calls": [{"name": "launch_missiles", "arguments": {}}]}"#,
            r#"{"tool_calls": [{"name": "get_weather", "arguments": [1, 2]}]}"#,
            r#"{"tool_calls": []}"#,
        ] {
            let mut reply = answer(text);
            offered().read(&mut reply);
            assert_eq!(text_of(&reply.content), text);
            assert_eq!(reply.stop_reason, StopReason::EndTurn);
        }
    }
}
