//! The Responses API's own fields (WIT 0.4.0's `native`, dialect
//! `openai-responses`), for the `openai-responses` key:
//!
//! * `custom_tools`: the caller's custom tools (free-form input, an optional
//!   grammar), each `{name, description?, format?}` under the name the host's
//!   function rendering of it has. They go out as OpenAI's own `custom` tools
//!   in place of that rendering, so the model gets the grammar as a
//!   constraint rather than as words; their calls and outputs in the history
//!   go as `custom_tool_call` / `custom_tool_call_output`, and a forced choice
//!   of one as `{"type": "custom"}`. A call the model makes to one comes back
//!   as a `custom_tool_call` item, decoded (by `decode` and the stream, which
//!   need no native context) as a tool use whose arguments are
//!   `{"input": <the text>}` — the host's form for every provider.
//! * `prompt_cache_key`: sent as written (OpenAI routes a prompt's cache by
//!   it; it changes nothing of the answer or its price).

// A BTreeSet, not a HashSet: std's hasher seeds itself from `wasi:random`, which
// the host does not grant a component.
use std::collections::BTreeSet;

use serde_json::{Map, Value, json};
use weir_sdk::json::parse_value;
use weir_sdk::types::{CallParams, CodecError, HttpRequest, NativeRequest, NativeSupport, PreparedConversation};

use super::request::encode_with;

/// The dialect name the host's Responses route gives these fields.
pub const DIALECT: &str = "openai-responses";

const CUSTOM_TOOLS: &str = "custom_tools";
const PROMPT_CACHE_KEY: &str = "prompt_cache_key";

/// What the `openai-responses` key takes: the two fields, no beta, no count.
pub fn support() -> NativeSupport {
    NativeSupport {
        dialect: DIALECT.to_owned(),
        fields: vec![CUSTOM_TOOLS.to_owned(), PROMPT_CACHE_KEY.to_owned()],
        betas: Vec::new(),
        count_tokens: false,
    }
}

/// The request `encode` builds, with the native fields applied.
pub fn encode(
    conversation: &PreparedConversation,
    params: &CallParams,
    native: &NativeRequest,
) -> Result<HttpRequest, CodecError> {
    let asked = Asked::checked(native)?;
    encode_with(conversation, params, |body| asked.apply(body))
}

/// A native request checked against [`support`].
struct Asked {
    custom: Vec<Map<String, Value>>,
    prompt_cache_key: Option<Value>,
}

impl Asked {
    fn checked(native: &NativeRequest) -> Result<Self, CodecError> {
        if native.dialect != DIALECT {
            return Err(CodecError::Unsupported(format!("no native {:?} fields here", native.dialect)));
        }
        if let Some(beta) = native.betas.first() {
            return Err(CodecError::Unsupported(format!("the Responses API takes no beta ({beta:?})")));
        }
        let Value::Object(mut fields) = parse_value(&native.fields_json, "the native fields")? else {
            return Err(CodecError::Unsupported("the native fields are not a JSON object".to_owned()));
        };
        let custom = match fields.remove(CUSTOM_TOOLS) {
            None => Vec::new(),
            Some(Value::Array(tools)) => tools.into_iter().map(custom_tool).collect::<Result<_, _>>()?,
            Some(_) => return Err(CodecError::Unsupported("`custom_tools` is not a list".to_owned())),
        };
        let prompt_cache_key = fields.remove(PROMPT_CACHE_KEY);
        if let Some(name) = fields.keys().next() {
            return Err(CodecError::Unsupported(format!("the Responses API component does not take {name:?}")));
        }
        Ok(Self { custom, prompt_cache_key })
    }

    fn apply(&self, body: &mut Map<String, Value>) -> Result<(), CodecError> {
        if let Some(key) = &self.prompt_cache_key {
            body.insert(PROMPT_CACHE_KEY.to_owned(), key.clone());
        }
        let names: BTreeSet<&str> = self.custom.iter().filter_map(|tool| tool["name"].as_str()).collect();
        if names.is_empty() {
            return Ok(());
        }
        for tool in body.get_mut("tools").and_then(Value::as_array_mut).into_iter().flatten() {
            let name = tool.get("name").and_then(Value::as_str).unwrap_or_default();
            if let Some(custom) = self.custom.iter().find(|custom| custom["name"] == name) {
                *tool = Value::Object(custom.clone());
            }
        }
        if let Some(choice) = body.get_mut("tool_choice").filter(|choice| choice["type"] == "function")
            && choice["name"].as_str().is_some_and(|name| names.contains(name))
        {
            choice["type"] = json!("custom");
        }
        let mut custom_calls: BTreeSet<String> = BTreeSet::new();
        for item in body.get_mut("input").and_then(Value::as_array_mut).into_iter().flatten() {
            custom_item(item, &names, &mut custom_calls);
        }
        Ok(())
    }
}

/// One `custom_tools` entry as OpenAI's `custom` tool.
fn custom_tool(tool: Value) -> Result<Map<String, Value>, CodecError> {
    let Value::Object(tool) = tool else {
        return Err(CodecError::Unsupported("a custom tool is not an object".to_owned()));
    };
    let name = tool.get("name").and_then(Value::as_str).filter(|name| !name.is_empty());
    let name = name.ok_or_else(|| CodecError::Unsupported("a custom tool has no name".to_owned()))?;
    let mut custom = Map::new();
    custom.insert("type".to_owned(), json!("custom"));
    custom.insert("name".to_owned(), json!(name));
    for field in ["description", "format"] {
        if let Some(value) = tool.get(field).filter(|value| !value.is_null()) {
            custom.insert(field.to_owned(), value.clone());
        }
    }
    Ok(custom)
}

/// A history item of a custom tool in its own form: a call to one (its
/// `input` out of the host's `{"input": …}` arguments), then its output.
fn custom_item(item: &mut Value, names: &BTreeSet<&str>, custom_calls: &mut BTreeSet<String>) {
    let call_id = item.get("call_id").and_then(Value::as_str).unwrap_or_default().to_owned();
    match item.get("type").and_then(Value::as_str) {
        Some("function_call") if item["name"].as_str().is_some_and(|name| names.contains(name)) => {
            let arguments = item["arguments"].as_str().unwrap_or_default();
            let input = custom_input(arguments);
            *item = json!({"type": "custom_tool_call", "call_id": call_id, "name": item["name"], "input": input});
            custom_calls.insert(call_id);
        }
        Some("function_call_output") if custom_calls.contains(&call_id) => {
            item["type"] = json!("custom_tool_call_output");
        }
        _ => {}
    }
}

/// A custom call's text out of the arguments the host keeps it in
/// (`{"input": "…"}`); arguments of another shape go as they are.
fn custom_input(arguments: &str) -> String {
    match serde_json::from_str::<Value>(arguments) {
        Ok(Value::Object(object)) => match object.get("input") {
            Some(Value::String(input)) => input.clone(),
            _ => arguments.to_owned(),
        },
        _ => arguments.to_owned(),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::panic)]
mod tests {
    use weir_sdk::types::{ContentBlock, LeafBlock, ToolChoice, ToolDefinition, ToolResult, ToolUse, Turn};

    use super::*;

    fn native(fields: Value) -> NativeRequest {
        NativeRequest { dialect: DIALECT.into(), fields_json: fields.to_string(), betas: Vec::new() }
    }

    fn patch_tool() -> Value {
        json!({"name": "apply_patch", "description": "Edit files.",
               "format": {"type": "grammar", "syntax": "lark", "definition": "start: \"*** Begin Patch\""}})
    }

    fn conversation() -> PreparedConversation {
        let mut conversation = PreparedConversation::of(vec![
            Turn::user(vec![ContentBlock::Text("Fix it".into())]),
            Turn::assistant(vec![ContentBlock::ToolUse(ToolUse {
                id: "call_p".into(),
                name: "apply_patch".into(),
                input_json: json!({"input": "*** Begin Patch\n*** End Patch"}).to_string(),
            })]),
            Turn::user(vec![ContentBlock::ToolResult(ToolResult {
                tool_use_id: "call_p".into(),
                content: vec![LeafBlock::Text("Done".into())],
                is_error: false,
            })]),
        ]);
        conversation.tools = vec![
            ToolDefinition {
                name: "apply_patch".into(),
                description: "Edit files.\n\nThe input must follow this lark grammar: ...".into(),
                parameters_json: r#"{"type":"object","properties":{"input":{"type":"string"}}}"#.into(),
            },
            ToolDefinition {
                name: "shell".into(),
                description: "Run".into(),
                parameters_json: r#"{"type":"object"}"#.into(),
            },
        ];
        conversation.tool_choice = Some(ToolChoice::Named("apply_patch".into()));
        conversation
    }

    fn body(native: &NativeRequest) -> Value {
        let request = encode(&conversation(), &CallParams::new("gpt-5", 100), native).unwrap();
        serde_json::from_slice(&request.body).unwrap()
    }

    #[test]
    fn custom_tools_their_calls_outputs_and_choice_go_in_their_own_form() {
        let body = body(&native(json!({"custom_tools": [patch_tool()], "prompt_cache_key": "thread-1"})));
        assert_eq!(
            body["tools"][0],
            json!({"type": "custom", "name": "apply_patch", "description": "Edit files.",
                   "format": {"type": "grammar", "syntax": "lark", "definition": "start: \"*** Begin Patch\""}})
        );
        assert_eq!(body["tools"][1]["type"], "function", "a function stays one");
        assert_eq!(body["tool_choice"], json!({"type": "custom", "name": "apply_patch"}));
        assert_eq!(
            body["input"][1],
            json!({"type": "custom_tool_call", "call_id": "call_p", "name": "apply_patch",
                   "input": "*** Begin Patch\n*** End Patch"})
        );
        assert_eq!(body["input"][2], json!({"type": "custom_tool_call_output", "call_id": "call_p", "output": "Done"}));
        assert_eq!(body["prompt_cache_key"], "thread-1");
    }

    #[test]
    fn without_custom_tools_the_request_is_encodes_own() {
        let body = body(&native(json!({"prompt_cache_key": "k"})));
        assert_eq!(body["tools"][0]["type"], "function");
        assert_eq!(body["input"][1]["type"], "function_call");
        assert_eq!(body["prompt_cache_key"], "k");
    }

    #[test]
    fn what_the_component_did_not_offer_is_refused() {
        let params = CallParams::new("gpt-5", 100);
        let refused = |native: NativeRequest| encode(&conversation(), &params, &native).unwrap_err();
        assert!(matches!(refused(native(json!({"service_tier": "priority"}))), CodecError::Unsupported(_)));
        assert!(matches!(refused(native(json!({"custom_tools": [{"description": "x"}]}))), CodecError::Unsupported(_)));
        let mut beta = native(json!({}));
        beta.betas = vec!["b".into()];
        assert!(matches!(refused(beta), CodecError::Unsupported(_)));
        let mut other = native(json!({}));
        other.dialect = "anthropic-messages".into();
        assert!(matches!(refused(other), CodecError::Unsupported(_)));
    }
}
