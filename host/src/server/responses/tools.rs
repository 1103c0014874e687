//! The Responses API's `tools` → the neutral tool definitions every provider
//! renders, and the way back from a tool call's name to the caller's tool.
//!
//! - `function`: as is.
//! - `custom` (free-form input): a function with one string parameter,
//!   `input`; a call to it goes back out as a `custom_tool_call` whose `input`
//!   is that string.
//! - `namespace` (a group of function and custom tools): each member becomes a
//!   tool named `<namespace>__<name>`; a call goes back out under its own name
//!   with the call's `namespace` set, as the Responses API shapes it. The
//!   grouping is also kept ([`MappedTools::namespaces`]) for a provider that
//!   takes namespaces natively (the `namespace_tools` native field): it
//!   regroups those flattened tools and names calls by the same
//!   `<namespace>__<name>`, so the way back is one for every provider.
//! - anything else is a hosted tool (`web_search`, `file_search`, `mcp`, ...)
//!   the provider would run, carried as a native field (`server_tools.<type>`,
//!   see `call::native`): sent to a provider that runs that type
//!   (`openai-responses`), dropped (and named) or, under `hosted_tools =
//!   "refuse"`, refused for any other.
//!
//! The way back is a table kept from the request, not a parse of the name, so
//! a function whose own name contains `__` is not mistaken for a namespaced one.

use std::collections::HashMap;

use serde_json::{Value, json};

use crate::chat::HOSTED_TOOL_FIELD;
use crate::server::error::ApiError;
use crate::types::ToolDefinition;

/// What kind of tool a wire name stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolKind {
    Function,
    /// Free-form input, carried as the `input` argument.
    Custom,
}

/// The caller's tool behind a wire name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin {
    pub kind: ToolKind,
    /// The tool's own name (inside its namespace, when it has one).
    pub name: String,
    pub namespace: Option<String>,
}

/// Wire names → the caller's tools.
#[derive(Debug, Clone, Default)]
pub struct ToolNames {
    by_wire: HashMap<String, Origin>,
}

impl ToolNames {
    /// The caller's tool a call names; `None` for a name the request did not
    /// offer (a call to it goes out as a plain function call).
    pub fn origin(&self, wire: &str) -> Option<&Origin> {
        self.by_wire.get(wire)
    }

    fn insert(&mut self, wire: String, origin: Origin) -> Result<(), ApiError> {
        if self.by_wire.contains_key(&wire) {
            return Err(ApiError::invalid_request(format!(
                "two tools are both named `{wire}` once namespaces are flattened; rename one"
            )));
        }
        self.by_wire.insert(wire, origin);
        Ok(())
    }
}

/// The name a tool has on the wire.
pub fn wire_name(namespace: Option<&str>, name: &str) -> String {
    match namespace {
        Some(namespace) => format!("{namespace}__{name}"),
        None => name.to_owned(),
    }
}

/// The longest hosted tool type carried: it is echoed in a header and the record.
const MAX_TOOL_TYPE_LEN: usize = 64;

/// The request's tools mapped: definitions for the provider, the way back,
/// and the hosted tools left out (by type, in order).
#[derive(Debug, Default)]
pub struct MappedTools {
    pub definitions: Vec<ToolDefinition>,
    pub names: ToolNames,
    /// The caller's tools as echoed in the answer (the hosted ones left out).
    pub echoed: Vec<Value>,
    /// The hosted tools, carried natively: one native field per type, its
    /// value the caller's definitions of that type, in order.
    pub hosted_fields: Vec<(String, Value)>,
    /// The custom tools as a provider that takes them natively is sent them
    /// (the `custom_tools` native field): `{name, description, format}` under
    /// their wire names.
    pub custom: Vec<Value>,
    /// The namespaces as a provider that takes them natively is sent them
    /// (the `namespace_tools` native field): `{name, description, tools}`,
    /// `tools` the members' own names (each one's definition is the
    /// flattened `<namespace>__<name>`).
    pub namespaces: Vec<Value>,
}

/// Maps `tools`; an error names the tool by its place. A hosted tool goes
/// natively (the serving provider takes it, or `call::native` drops or refuses it).
pub fn map_tools(tools: &[Value]) -> Result<MappedTools, ApiError> {
    let mut mapped = MappedTools::default();
    for (index, tool) in tools.iter().enumerate() {
        let place = |message: String| ApiError::invalid_request(format!("tools[{index}]: {message}"));
        match kind(tool) {
            "function" | "custom" => {
                add_member(&mut mapped, tool, None).map_err(place)?;
                mapped.echoed.push(tool.clone());
            }
            "namespace" => {
                let namespace = text(tool, "name").ok_or_else(|| place("a namespace needs `name`".to_owned()))?;
                let members = tool
                    .get("tools")
                    .and_then(Value::as_array)
                    .ok_or_else(|| place("a namespace needs `tools`".to_owned()))?;
                let mut names = Vec::with_capacity(members.len());
                for (inner, member) in members.iter().enumerate() {
                    add_member(&mut mapped, member, Some(namespace))
                        .map_err(|message| place(format!("tools[{inner}]: {message}")))?;
                    names.extend(text(member, "name").map(str::to_owned));
                }
                let description = text(tool, "description").unwrap_or_default();
                mapped.namespaces.push(json!({"name": namespace, "description": description, "tools": names}));
                mapped.echoed.push(tool.clone());
            }
            "" => return Err(place("a tool needs `type`".to_owned())),
            hosted => {
                let identifier = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_';
                if hosted.len() > MAX_TOOL_TYPE_LEN || !hosted.chars().all(identifier) {
                    return Err(place("`type` must be a lower-case identifier of at most 64 characters".to_owned()));
                }
                let field = format!("{HOSTED_TOOL_FIELD}{hosted}");
                match mapped.hosted_fields.iter_mut().find(|(name, _)| *name == field) {
                    Some((_, Value::Array(definitions))) => definitions.push(tool.clone()),
                    _ => mapped.hosted_fields.push((field, Value::Array(vec![tool.clone()]))),
                }
            }
        }
    }
    Ok(mapped)
}

/// A function or custom tool, at the top level or inside `namespace`.
fn add_member(mapped: &mut MappedTools, tool: &Value, namespace: Option<&str>) -> Result<(), String> {
    let other = kind(tool);
    if other != "function" && other != "custom" {
        return Err(format!("a namespace holds `function` and `custom` tools, not `{other}`"));
    }
    let name = text(tool, "name").ok_or("a tool needs `name`")?;
    let description = text(tool, "description").unwrap_or_default();
    let wire = wire_name(namespace, name);
    let (kind, definition) = match self::kind(tool) {
        "function" => {
            let parameters = match tool.get("parameters") {
                None | Some(Value::Null) => json!({"type": "object", "properties": {}}),
                Some(parameters @ Value::Object(_)) => parameters.clone(),
                Some(_) => return Err("a function's `parameters` must be a JSON Schema object".to_owned()),
            };
            let definition = ToolDefinition {
                name: wire.clone(),
                description: description.to_owned(),
                parameters_json: parameters.to_string(),
            };
            (ToolKind::Function, definition)
        }
        "custom" => {
            let format = tool.get("format").filter(|format| !format.is_null());
            mapped.custom.push(json!({"name": wire, "description": description, "format": format}));
            (ToolKind::Custom, custom_definition(&wire, description, format)?)
        }
        other => return Err(format!("a namespace holds `function` and `custom` tools, not `{other}`")),
    };
    mapped.definitions.push(definition);
    let origin = Origin { kind, name: name.to_owned(), namespace: namespace.map(str::to_owned) };
    mapped.names.insert(wire, origin).map_err(|error| error.message)
}

/// A custom tool as a function of one string, `input`. A grammar format is
/// written into the description: no provider enforces it, so the model is told.
fn custom_definition(wire: &str, description: &str, format: Option<&Value>) -> Result<ToolDefinition, String> {
    let mut description = description.to_owned();
    match format.map(kind) {
        None | Some("text") => {}
        Some("grammar") => {
            let format = format.unwrap_or(&Value::Null);
            let syntax = text(format, "syntax").unwrap_or("lark");
            let definition = text(format, "definition").ok_or("a grammar format needs `definition`")?;
            description.push_str(&format!("\n\nThe input must follow this {syntax} grammar:\n{definition}"));
        }
        Some(other) => return Err(format!("custom tool format `{other}` is not supported (use `text` or `grammar`)")),
    }
    let parameters = json!({
        "type": "object",
        "properties": {"input": {"type": "string", "description": "The tool's free-form input."}},
        "required": ["input"],
        "additionalProperties": false,
    });
    Ok(ToolDefinition { name: wire.to_owned(), description, parameters_json: parameters.to_string() })
}

/// A custom tool call's free-form input from the function arguments it was
/// asked for as: the `input` string, else the arguments' text as they came.
pub fn custom_input(arguments: &str) -> String {
    match serde_json::from_str::<Value>(arguments) {
        Ok(Value::Object(object)) => match object.get("input") {
            Some(Value::String(input)) => input.clone(),
            _ => arguments.to_owned(),
        },
        _ => arguments.to_owned(),
    }
}

/// A custom tool call's input as the function arguments the provider saw.
pub fn custom_arguments(input: &str) -> String {
    json!({"input": input}).to_string()
}

pub(super) fn kind(value: &Value) -> &str {
    value.get("type").and_then(Value::as_str).unwrap_or_default()
}

pub(super) fn text<'a>(value: &'a Value, field: &str) -> Option<&'a str> {
    value.get(field).and_then(Value::as_str)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn functions_custom_and_namespaced_tools_flatten_and_map_back() {
        let tools = json!([
            {"type": "function", "name": "get_weather", "description": "Weather",
             "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}, "strict": true},
            {"type": "custom", "name": "apply_patch", "description": "Patch files",
             "format": {"type": "grammar", "syntax": "lark", "definition": "start: /.+/"}},
            {"type": "namespace", "name": "crm", "description": "CRM", "tools": [
                {"type": "function", "name": "lookup", "parameters": {"type": "object"}},
                {"type": "custom", "name": "note"}
            ]},
            {"type": "web_search"},
            {"type": "mcp", "server_label": "x", "server_url": "https://x"}
        ]);
        let mapped = map_tools(tools.as_array().unwrap()).unwrap();
        let names: Vec<&str> = mapped.definitions.iter().map(|d| d.name.as_str()).collect();
        assert_eq!(names, ["get_weather", "apply_patch", "crm__lookup", "crm__note"]);
        let hosted = [
            ("server_tools.web_search".to_owned(), json!([{"type": "web_search"}])),
            ("server_tools.mcp".to_owned(), json!([{"type": "mcp", "server_label": "x", "server_url": "https://x"}])),
        ];
        assert_eq!(mapped.hosted_fields, hosted, "carried natively, by type");
        assert_eq!(mapped.echoed.len(), 3, "hosted tools are not echoed");
        let custom: Value = serde_json::from_str(&mapped.definitions[1].parameters_json).unwrap();
        assert_eq!(custom["properties"]["input"]["type"], "string");
        assert!(mapped.definitions[1].description.contains("lark grammar:\nstart: /.+/"));
        assert_eq!(
            mapped.names.origin("crm__lookup"),
            Some(&Origin { kind: ToolKind::Function, name: "lookup".into(), namespace: Some("crm".into()) })
        );
        assert_eq!(mapped.names.origin("crm__note").unwrap().kind, ToolKind::Custom);
        assert_eq!(mapped.names.origin("apply_patch").unwrap().namespace, None);
        assert_eq!(mapped.names.origin("nothing"), None);
        assert_eq!(mapped.namespaces, [json!({"name": "crm", "description": "CRM", "tools": ["lookup", "note"]})]);
    }

    #[test]
    fn custom_input_round_trips_through_arguments() {
        let input = "*** Begin Patch\n\"quoted\"\n";
        assert_eq!(custom_input(&custom_arguments(input)), input);
        assert_eq!(custom_input("not json"), "not json");
    }

    #[test]
    fn bad_tools_are_refused_by_place() {
        let cases = [
            (json!([{"name": "f"}]), "tools[0]: a tool needs `type`"),
            (json!([{"type": "function"}]), "needs `name`"),
            (json!([{"type": "function", "name": "f", "parameters": 3}]), "JSON Schema object"),
            (json!([{"type": "namespace", "tools": []}]), "a namespace needs `name`"),
            (json!([{"type": "namespace", "name": "n", "tools": [{"type": "web_search"}]}]), "not `web_search`"),
            (json!([{"type": "custom", "name": "c", "format": {"type": "regex"}}]), "`regex` is not supported"),
            (
                json!([{"type": "function", "name": "n__f"}, {"type": "namespace", "name": "n", "tools": [
                    {"type": "function", "name": "f"}]}]),
                "both named `n__f`",
            ),
        ];
        for (tools, expected) in cases {
            let message = map_tools(tools.as_array().unwrap()).unwrap_err().message;
            assert!(message.contains(expected), "{tools}: {message}");
        }
    }
}
