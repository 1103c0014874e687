//! The Responses API's `tool_choice` → the neutral choice every provider
//! renders, and what it asks beyond that:
//!
//! - `auto`, `none`, `required`, or a `function` / `custom` tool by name:
//!   the neutral choice.
//! - `allowed_tools` (`{mode, tools}`): the model may call only the listed
//!   tools. The request's tools are cut to them (function, custom and
//!   namespaced tools by name, hosted tools by type, an `mcp` server by its
//!   `server_label`), so every provider honours it; `mode` (`auto` or
//!   `required`) is then the neutral choice. A listed tool the request does
//!   not offer is refused: the caller meant a tool that is not there.
//! - a hosted tool by type (`{"type": "file_search"}`, `web_search_preview`,
//!   `code_interpreter`, `image_generation`, or `{"type": "mcp",
//!   "server_label"}`): only a provider that runs the tool can be made to use
//!   it, so it goes as the native field `hosted_tool_choice`; where that field
//!   or the tool itself is not sent, the call is refused (`call::native`),
//!   never sent with the choice silently gone.

use serde_json::Value;

use super::tools::{MappedTools, kind, text, wire_name};
use crate::chat::HOSTED_TOOL_FIELD;
use crate::server::error::ApiError;
use crate::types::ToolChoice;

/// The hosted tool types a `tool_choice` may force (openai-python's
/// `ToolChoiceTypesParam`, the tools the gateway carries, and `mcp`).
const FORCEABLE: &[&str] = &[
    "file_search",
    "web_search_preview",
    "web_search_preview_2025_03_11",
    "image_generation",
    "code_interpreter",
    "mcp",
];

/// A parsed `tool_choice`.
#[derive(Debug, Clone, PartialEq)]
pub enum Choice {
    Neutral(ToolChoice),
    /// `allowed_tools`: the tools the model may call, and the choice among them.
    Allowed {
        mode: ToolChoice,
        tools: Vec<Value>,
    },
    /// A hosted tool forced, as the caller wrote it.
    Hosted(Value),
}

impl Choice {
    pub fn parse(choice: &Value) -> Result<Self, ApiError> {
        match choice {
            Value::String(word) => word_choice(word).map(Self::Neutral),
            Value::Object(_) => match kind(choice) {
                "function" | "custom" => text(choice, "name")
                    .map(|name| Self::Neutral(ToolChoice::Named(wire_name(text(choice, "namespace"), name))))
                    .ok_or_else(|| ApiError::invalid_request("a `tool_choice` naming a tool needs `name`")),
                "allowed_tools" => allowed(choice),
                hosted if FORCEABLE.contains(&hosted) => Ok(Self::Hosted(choice.clone())),
                other => Err(ApiError::invalid_request(format!(
                    "tool_choice type `{other}` is not supported (auto, none, required, function, custom, \
                     allowed_tools, or a hosted tool: {})",
                    FORCEABLE.join(", ")
                ))),
            },
            _ => Err(ApiError::invalid_request("tool_choice must be a string or an object")),
        }
    }

    /// Applies the choice to the request's tools: `allowed_tools` cuts them; a
    /// forced hosted tool must be among them. Returns the neutral choice.
    pub fn apply(self, tools: &mut MappedTools) -> Result<Option<ToolChoice>, ApiError> {
        match self {
            Self::Neutral(choice) => Ok(Some(choice)),
            Self::Allowed { mode, tools: allowed } => {
                cut_to(tools, &allowed)?;
                Ok(Some(mode))
            }
            Self::Hosted(choice) => {
                let forced = kind(&choice);
                if !tools.hosted_fields.iter().any(|(field, _)| field_type(field) == Some(forced)) {
                    return Err(ApiError::invalid_request(format!(
                        "tool_choice forces the hosted tool `{forced}`, which is not among the request's tools"
                    )));
                }
                Ok(None)
            }
        }
    }

    /// The native `hosted_tool_choice` field's value, for a forced hosted tool.
    pub fn hosted(&self) -> Option<Value> {
        match self {
            Self::Hosted(choice) => Some(choice.clone()),
            _ => None,
        }
    }
}

fn word_choice(word: &str) -> Result<ToolChoice, ApiError> {
    match word {
        "auto" => Ok(ToolChoice::Auto),
        "none" => Ok(ToolChoice::None),
        "required" => Ok(ToolChoice::Required),
        other => Err(ApiError::invalid_request(format!(
            "unknown tool_choice `{other}` (auto, none, required, or a function)"
        ))),
    }
}

fn allowed(choice: &Value) -> Result<Choice, ApiError> {
    let mode = match text(choice, "mode") {
        Some("auto") => ToolChoice::Auto,
        Some("required") => ToolChoice::Required,
        _ => return Err(ApiError::invalid_request("`allowed_tools` needs `mode`: `auto` or `required`")),
    };
    let tools = choice
        .get("tools")
        .and_then(Value::as_array)
        .filter(|tools| !tools.is_empty())
        .ok_or_else(|| ApiError::invalid_request("`allowed_tools` needs a non-empty `tools` list"))?;
    Ok(Choice::Allowed { mode, tools: tools.clone() })
}

/// The hosted tool type a native field carries.
fn field_type(field: &str) -> Option<&str> {
    field.strip_prefix(HOSTED_TOOL_FIELD)
}

/// Cuts `tools` to the `allowed` ones; an allowed tool not offered is refused.
fn cut_to(tools: &mut MappedTools, allowed: &[Value]) -> Result<(), ApiError> {
    let mut names = Vec::new();
    let mut hosted: Vec<(&str, Option<&str>)> = Vec::new();
    for (index, tool) in allowed.iter().enumerate() {
        match kind(tool) {
            "function" | "custom" => {
                let name = text(tool, "name").ok_or_else(|| {
                    ApiError::invalid_request(format!("allowed_tools.tools[{index}]: a tool needs `name`"))
                })?;
                names.push(wire_name(text(tool, "namespace"), name));
            }
            "" => return Err(ApiError::invalid_request(format!("allowed_tools.tools[{index}]: a tool needs `type`"))),
            other => hosted.push((other, text(tool, "server_label"))),
        }
    }
    for name in &names {
        if !tools.definitions.iter().any(|definition| &definition.name == name) {
            return Err(not_offered(name));
        }
    }
    for (kind, label) in &hosted {
        let offered = tools.hosted_fields.iter().find(|(field, _)| field_type(field) == Some(kind));
        if offered.is_none_or(|(_, definitions)| label.is_some_and(|label| !has_label(definitions, label))) {
            return Err(not_offered(&label.map_or_else(|| (*kind).to_owned(), |label| format!("{kind} {label}"))));
        }
    }
    tools.definitions.retain(|definition| names.contains(&definition.name));
    tools.custom.retain(|custom| custom["name"].as_str().is_some_and(|name| names.iter().any(|n| n == name)));
    for namespace in &mut tools.namespaces {
        let space = namespace["name"].as_str().unwrap_or_default().to_owned();
        if let Some(members) = namespace.get_mut("tools").and_then(Value::as_array_mut) {
            members.retain(|member| {
                member.as_str().is_some_and(|member| names.contains(&wire_name(Some(&space), member)))
            });
        }
    }
    tools.namespaces.retain(|namespace| namespace["tools"].as_array().is_some_and(|members| !members.is_empty()));
    tools.hosted_fields.retain_mut(|(field, definitions)| {
        let Some(kind) = field_type(field) else { return false };
        let labels: Vec<Option<&str>> = hosted.iter().filter(|(k, _)| *k == kind).map(|(_, label)| *label).collect();
        if labels.is_empty() {
            return false;
        }
        if let (false, Value::Array(list)) = (labels.contains(&None), definitions) {
            list.retain(|definition| labels.contains(&definition.get("server_label").and_then(Value::as_str)));
        }
        true
    });
    Ok(())
}

fn has_label(definitions: &Value, label: &str) -> bool {
    definitions.as_array().is_some_and(|list| list.iter().any(|tool| text(tool, "server_label") == Some(label)))
}

fn not_offered(name: &str) -> ApiError {
    ApiError::invalid_request(format!("allowed_tools names `{name}`, which is not among the request's tools"))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use serde_json::json;

    use super::*;
    use crate::server::responses::tools::map_tools;

    fn tools() -> MappedTools {
        map_tools(&[
            json!({"type": "function", "name": "shell"}),
            json!({"type": "custom", "name": "apply_patch"}),
            json!({"type": "namespace", "name": "crm", "description": "CRM", "tools": [
                {"type": "function", "name": "lookup"}, {"type": "function", "name": "note"}]}),
            json!({"type": "web_search"}),
            json!({"type": "mcp", "server_label": "wiki", "server_url": "https://wiki.example/mcp"}),
            json!({"type": "mcp", "server_label": "docs", "server_url": "https://docs.example/mcp"}),
        ])
        .unwrap()
    }

    fn names(tools: &MappedTools) -> Vec<&str> {
        tools.definitions.iter().map(|definition| definition.name.as_str()).collect()
    }

    #[test]
    fn allowed_tools_cut_every_kind_of_tool_to_the_listed_ones() {
        let choice = json!({"type": "allowed_tools", "mode": "required", "tools": [
            {"type": "function", "name": "shell"}, {"type": "function", "name": "lookup", "namespace": "crm"},
            {"type": "mcp", "server_label": "docs"}]});
        let mut tools = tools();
        let neutral = Choice::parse(&choice).unwrap().apply(&mut tools).unwrap();
        assert_eq!(neutral, Some(ToolChoice::Required));
        assert_eq!(names(&tools), ["shell", "crm__lookup"]);
        assert!(tools.custom.is_empty(), "apply_patch was not listed");
        assert_eq!(tools.namespaces, [json!({"name": "crm", "description": "CRM", "tools": ["lookup"]})]);
        let hosted: Vec<&str> = tools.hosted_fields.iter().map(|(field, _)| field.as_str()).collect();
        assert_eq!(hosted, ["server_tools.mcp"], "web_search was not listed");
        assert_eq!(tools.hosted_fields[0].1.as_array().unwrap().len(), 1);
        assert_eq!(tools.hosted_fields[0].1[0]["server_label"], "docs");
    }

    #[test]
    fn allowed_tools_naming_a_tool_not_offered_or_without_a_mode_are_refused() {
        let cases = [
            (
                json!({"type": "allowed_tools", "mode": "auto", "tools": [{"type": "function", "name": "nope"}]}),
                "`nope`",
            ),
            (json!({"type": "allowed_tools", "mode": "auto", "tools": [{"type": "file_search"}]}), "`file_search`"),
            (
                json!({"type": "allowed_tools", "mode": "auto", "tools": [{"type": "mcp", "server_label": "x"}]}),
                "`mcp x`",
            ),
            (json!({"type": "allowed_tools", "tools": [{"type": "function", "name": "shell"}]}), "needs `mode`"),
            (json!({"type": "allowed_tools", "mode": "auto", "tools": []}), "non-empty `tools`"),
            (json!({"type": "allowed_tools", "mode": "auto", "tools": [{"name": "shell"}]}), "needs `type`"),
        ];
        for (choice, expected) in cases {
            let refused = Choice::parse(&choice).and_then(|choice| choice.apply(&mut tools()).map(|_| ()));
            let message = refused.unwrap_err().message;
            assert!(message.contains(expected), "{choice}: {message}");
        }
    }

    #[test]
    fn a_forced_hosted_tool_must_be_offered_and_goes_natively() {
        let mut tools = map_tools(&[json!({"type": "file_search", "vector_store_ids": ["vs_1"]})]).unwrap();
        let choice = Choice::parse(&json!({"type": "file_search"})).unwrap();
        assert_eq!(choice.hosted(), Some(json!({"type": "file_search"})));
        assert_eq!(choice.apply(&mut tools).unwrap(), None);
        let missing = Choice::parse(&json!({"type": "code_interpreter"})).unwrap().apply(&mut tools).unwrap_err();
        assert!(missing.message.contains("not among the request's tools"), "{}", missing.message);
        let unknown = Choice::parse(&json!({"type": "computer_use_preview"})).unwrap_err();
        assert!(unknown.message.contains("is not supported"), "{}", unknown.message);
    }
}
