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
//! * `namespace_tools`: the caller's namespaces (groups of functions and
//!   custom tools, as Codex CLI sends its MCP tools), each `{name,
//!   description, tools}` with `tools` the members' own names. The host has
//!   flattened every member into a tool named `<namespace>__<name>`; here
//!   those are put back under OpenAI's own `namespace` tool (members under
//!   their own names), and the history's calls to them go as `function_call`
//!   / `custom_tool_call` items with their own `name` and a `namespace`. A
//!   call the model makes comes back with `namespace` set, and `decode` and
//!   the stream name it `<namespace>__<name>` again (no native context
//!   needed): the host's way back is one for every provider.
//! * `prompt_cache_key`: sent as written (OpenAI routes a prompt's cache by
//!   it; it changes nothing of the answer or its price).
//! * `max_tool_calls`: the caller's bound on the calls to hosted tools in one
//!   response (a positive integer), sent as written: the host holds a web
//!   search's price against a budget by it.
//! * `context_management`: OpenAI's server-side compaction settings (a list),
//!   sent as written.
//! * `hosted_tool_choice`: a `tool_choice` forcing one of the request's hosted
//!   tools (an object such as `{"type": "file_search"}`), sent as the
//!   request's `tool_choice` (the host sends it only with that tool).
//!
//! OpenAI's wire for namespaces, as checked in openai-python (`src/openai/
//! types/responses`, release 2.45 and after): `NamespaceToolParam` is
//! `{type: "namespace", name, description, tools}` with `description` and
//! `tools` required (the OpenAPI spec gives them `minLength: 1` and
//! `minItems: 1`), `tools` holding `function` tools (`name`, `description`,
//! `parameters`, `strict`, ...) and `custom` tools;
//! `ResponseFunctionToolCall` and `ResponseCustomToolCall` carry an optional
//! `namespace` beside the member's own `name`, as input items and as output.
//! Codex CLI (openai/codex, `codex-rs/tools/src/responses_api.rs`) sends
//! `{type: "namespace", name, description, tools: [{type: "function", ...}]}`
//! and reads a call's `namespace` back. `ToolChoiceFunction` and
//! `ToolChoiceCustom` are `{type, name}` with no `namespace`: OpenAI defines
//! no way to force one member of a namespace, so a namespace one of whose
//! members the caller forces stays flattened (forced as the top-level
//! `<namespace>__<name>` function it then is), as does one without a
//! description or members (OpenAI refuses those).

// A BTreeSet, not a HashSet: std's hasher seeds itself from `wasi:random`, which
// the host does not grant a component.
use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value, json};
use weir_sdk::json::parse_value;
use weir_sdk::types::{CallParams, CodecError, HttpRequest, NativeRequest, NativeSupport, PreparedConversation};

use super::hosted::{self, Hosted};
use super::request::encode_with;

/// The dialect name the host's Responses route gives these fields.
pub const DIALECT: &str = "openai-responses";

const CUSTOM_TOOLS: &str = "custom_tools";
const NAMESPACE_TOOLS: &str = "namespace_tools";
const PROMPT_CACHE_KEY: &str = "prompt_cache_key";
const MAX_TOOL_CALLS: &str = "max_tool_calls";
const CONTEXT_MANAGEMENT: &str = "context_management";
const HOSTED_TOOL_CHOICE: &str = "hosted_tool_choice";

/// What joins a namespace and a member's name in the host's flattened tool
/// name (`crm__lookup`), the name a namespaced call decodes to.
pub(super) const NAMESPACE_SEPARATOR: &str = "__";

/// What the `openai-responses` key takes: the fields above, hosted tools and
/// a history's own items; no beta, no count.
pub fn support() -> NativeSupport {
    NativeSupport {
        dialect: DIALECT.to_owned(),
        fields: [
            CUSTOM_TOOLS,
            NAMESPACE_TOOLS,
            PROMPT_CACHE_KEY,
            MAX_TOOL_CALLS,
            CONTEXT_MANAGEMENT,
            HOSTED_TOOL_CHOICE,
            hosted::NATIVE_BLOCKS,
        ]
        .into_iter()
        .map(str::to_owned)
        .chain(hosted::hosted_tool_fields())
        .collect(),
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
    encode_with(conversation, params, |body| {
        asked.apply(body)?;
        asked.hosted.apply(conversation, body)
    })
}

/// A native request checked against [`support`].
struct Asked {
    custom: Vec<Map<String, Value>>,
    namespaces: Vec<Namespace>,
    /// `prompt_cache_key`, `max_tool_calls`, `context_management` and the
    /// forced hosted tool (as `tool_choice`), each checked and sent as written.
    settings: Vec<(&'static str, Value)>,
    /// Hosted tools and a history's own items (see `super::hosted`).
    hosted: Hosted,
}

/// Whether a native field's value has the shape its name calls for.
type Shape = fn(&Value) -> bool;

/// The settings sent as written, taken out of `fields`, each of its shape:
/// `max_tool_calls` a positive integer, `context_management` a list, a forced
/// hosted tool an object with a `type`.
fn settings(fields: &mut Map<String, Value>) -> Result<Vec<(&'static str, Value)>, CodecError> {
    let mut settings = Vec::new();
    let shapes: [(&'static str, Shape); 4] = [
        (PROMPT_CACHE_KEY, |_| true),
        (MAX_TOOL_CALLS, |value| value.as_u64().is_some_and(|calls| calls > 0)),
        (CONTEXT_MANAGEMENT, Value::is_array),
        (HOSTED_TOOL_CHOICE, |value| value.get("type").is_some_and(Value::is_string)),
    ];
    for (name, shaped) in shapes {
        match fields.remove(name) {
            None => {}
            Some(value) if shaped(&value) => settings.push((name, value)),
            Some(_) => return Err(CodecError::Unsupported(format!("the native field {name:?} is not of its shape"))),
        }
    }
    Ok(settings)
}

/// One `namespace_tools` entry.
struct Namespace {
    name: String,
    description: String,
    /// The members' own names, in the caller's order.
    members: Vec<String>,
}

impl Namespace {
    fn checked(entry: Value) -> Result<Self, CodecError> {
        let field = |name: &str| entry.get(name).and_then(Value::as_str).map(str::to_owned);
        let name = field("name").filter(|name| !name.is_empty());
        let name = name.ok_or_else(|| CodecError::Unsupported("a namespace has no name".to_owned()))?;
        let members = entry.get("tools").and_then(Value::as_array);
        let members =
            members.ok_or_else(|| CodecError::Unsupported(format!("namespace {name:?} has no `tools` list")))?;
        let members =
            members.iter().map(|member| member.as_str().map(str::to_owned)).collect::<Option<Vec<_>>>().ok_or_else(
                || CodecError::Unsupported(format!("namespace {name:?} names a member by other than a string")),
            )?;
        Ok(Self { description: field("description").unwrap_or_default(), name, members })
    }

    /// The entries, one per name: two of one name are one namespace (as
    /// Codex CLI coalesces its own), its members in order.
    fn merged(entries: Vec<Value>) -> Result<Vec<Self>, CodecError> {
        let mut merged: Vec<Self> = Vec::with_capacity(entries.len());
        for namespace in entries.into_iter().map(Self::checked) {
            let namespace = namespace?;
            match merged.iter_mut().find(|known| known.name == namespace.name) {
                Some(known) => {
                    known.members.extend(namespace.members);
                    if known.description.is_empty() {
                        known.description = namespace.description;
                    }
                }
                None => merged.push(namespace),
            }
        }
        Ok(merged)
    }

    /// The flattened name a member's definition and calls carry.
    fn wire_name(&self, member: &str) -> String {
        format!("{}{NAMESPACE_SEPARATOR}{member}", self.name)
    }

    /// Whether OpenAI can be sent it as its own: it has a description and
    /// members (both required), and no member is the forced choice.
    fn goes_natively(&self, forced: Option<&str>) -> bool {
        !self.description.is_empty()
            && !self.members.is_empty()
            && !forced.is_some_and(|forced| self.members.iter().any(|member| self.wire_name(member) == forced))
    }
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
        let namespaces = match fields.remove(NAMESPACE_TOOLS) {
            None => Vec::new(),
            Some(Value::Array(entries)) => Namespace::merged(entries)?,
            Some(_) => return Err(CodecError::Unsupported("`namespace_tools` is not a list".to_owned())),
        };
        let settings = settings(&mut fields)?;
        let hosted = Hosted::take(&mut fields)?;
        if let Some(name) = fields.keys().next() {
            return Err(CodecError::Unsupported(format!("the Responses API component does not take {name:?}")));
        }
        Ok(Self { custom, namespaces, settings, hosted })
    }

    fn apply(&self, body: &mut Map<String, Value>) -> Result<(), CodecError> {
        for (name, value) in &self.settings {
            let name = if *name == HOSTED_TOOL_CHOICE { "tool_choice" } else { name };
            body.insert(name.to_owned(), value.clone());
        }
        self.apply_custom(body);
        self.apply_namespaces(body)
    }

    fn apply_custom(&self, body: &mut Map<String, Value>) {
        let names: BTreeSet<&str> = self.custom.iter().filter_map(|tool| tool["name"].as_str()).collect();
        if names.is_empty() {
            return;
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
    }

    /// The flattened members of each namespace that can go natively regrouped
    /// under OpenAI's `namespace` tool, where its first member stood; the
    /// history's calls to them named by member and namespace.
    fn apply_namespaces(&self, body: &mut Map<String, Value>) -> Result<(), CodecError> {
        let forced = body.get("tool_choice").and_then(|choice| choice.get("name")).and_then(Value::as_str);
        let native: Vec<&Namespace> =
            self.namespaces.iter().filter(|namespace| namespace.goes_natively(forced)).collect();
        if native.is_empty() {
            return Ok(());
        }
        // Flattened name → (namespace, member's own name).
        let mut members: BTreeMap<String, (&str, &str)> = BTreeMap::new();
        for namespace in &native {
            for member in &namespace.members {
                members.insert(namespace.wire_name(member), (&namespace.name, member));
            }
        }
        let tools = match body.get_mut("tools").and_then(Value::as_array_mut) {
            Some(tools) => std::mem::take(tools),
            None => Vec::new(),
        };
        let mut grouped: BTreeMap<&str, Vec<Value>> = BTreeMap::new();
        let mut regrouped = Vec::with_capacity(tools.len());
        for mut tool in tools {
            let wire = tool.get("name").and_then(Value::as_str).unwrap_or_default();
            let Some((namespace, member)) = members.get(wire).copied() else {
                regrouped.push(tool);
                continue;
            };
            if !grouped.contains_key(namespace) {
                // The namespace's place: where its first member stood.
                regrouped.push(json!({"type": "namespace", "name": namespace}));
            }
            tool["name"] = json!(member);
            grouped.entry(namespace).or_default().push(tool);
        }
        for namespace in &native {
            let tools = grouped.remove(namespace.name.as_str()).unwrap_or_default();
            if tools.len() != namespace.members.len() {
                return Err(CodecError::Unsupported(format!(
                    "namespace {:?} names members that are not among the request's tools",
                    namespace.name
                )));
            }
            let place =
                regrouped.iter_mut().find(|tool| tool["type"] == "namespace" && tool["name"] == *namespace.name);
            if let Some(place) = place {
                place["description"] = json!(namespace.description);
                place["tools"] = Value::Array(tools);
            }
        }
        body.insert("tools".to_owned(), Value::Array(regrouped));
        for item in body.get_mut("input").and_then(Value::as_array_mut).into_iter().flatten() {
            let is_call =
                matches!(item.get("type").and_then(Value::as_str), Some("function_call" | "custom_tool_call"));
            let wire = item.get("name").and_then(Value::as_str).unwrap_or_default();
            if let Some((namespace, member)) = members.get(wire).copied().filter(|_| is_call) {
                item["name"] = json!(member);
                item["namespace"] = json!(namespace);
            }
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
    fn settings_go_as_written_and_a_bad_shape_is_refused() {
        let body_with = |fields: Value| body(&native(fields));
        let compaction = json!([{"type": "compaction", "compact_threshold": 200000}]);
        let body = body_with(json!({"max_tool_calls": 3, "context_management": compaction}));
        assert_eq!(body["max_tool_calls"], 3);
        assert_eq!(body["context_management"], compaction);
        assert!(support().fields.iter().any(|field| field == "max_tool_calls"));
        let forced = body_with(json!({"hosted_tool_choice": {"type": "file_search"}}));
        assert_eq!(forced["tool_choice"], json!({"type": "file_search"}));
        assert!(forced.get("hosted_tool_choice").is_none());
        let bad = [
            json!({"max_tool_calls": 0}),
            json!({"max_tool_calls": "3"}),
            json!({"context_management": {}}),
            json!({"hosted_tool_choice": "file_search"}),
        ];
        for bad in bad {
            let refused = encode(&conversation(), &CallParams::new("gpt-5", 100), &native(bad.clone())).unwrap_err();
            assert!(
                matches!(&refused, CodecError::Unsupported(message) if message.contains("not of its shape")),
                "{bad}: {refused:?}"
            );
        }
    }

    fn function(name: &str) -> ToolDefinition {
        ToolDefinition {
            name: name.into(),
            description: format!("{name} it"),
            parameters_json: r#"{"type":"object"}"#.into(),
        }
    }

    fn call(id: &str, name: &str, input_json: &str) -> Turn {
        Turn::assistant(vec![ContentBlock::ToolUse(ToolUse {
            id: id.into(),
            name: name.into(),
            input_json: input_json.into(),
        })])
    }

    /// Codex's shape: a top-level function, then a namespace of a function and
    /// a custom tool, each called once in the history.
    fn namespaced(choice: Option<ToolChoice>) -> PreparedConversation {
        let mut conversation = PreparedConversation::of(vec![
            Turn::user(vec![ContentBlock::Text("Find 7".into())]),
            call("call_l", "crm__lookup", r#"{"id":7}"#),
            call("call_n", "crm__note", &json!({"input": "seen"}).to_string()),
        ]);
        conversation.tools =
            vec![function("shell"), function("crm__lookup"), function("crm__note"), function("mail__send")];
        conversation.tool_choice = choice;
        conversation
    }

    fn namespaced_body(choice: Option<ToolChoice>, fields: Value) -> Value {
        let request = encode(&namespaced(choice), &CallParams::new("gpt-5", 100), &native(fields)).unwrap();
        serde_json::from_slice(&request.body).unwrap()
    }

    fn crm() -> Value {
        json!({"name": "crm", "description": "The CRM.", "tools": ["lookup", "note"]})
    }

    #[test]
    fn namespaces_go_as_openais_own_and_their_calls_carry_the_namespace() {
        let note = json!({"name": "crm__note", "description": "Note it.", "format": {"type": "text"}});
        let fields = json!({"custom_tools": [note], "namespace_tools": [crm()]});
        let body = namespaced_body(Some(ToolChoice::Auto), fields);
        let function = |name: &str, description: &str| {
            json!({"type": "function", "name": name, "description": description, "parameters": {"type": "object"},
                   "strict": false})
        };
        assert_eq!(
            body["tools"],
            json!([
                function("shell", "shell it"),
                {"type": "namespace", "name": "crm", "description": "The CRM.", "tools": [
                    function("lookup", "crm__lookup it"),
                    {"type": "custom", "name": "note", "description": "Note it.", "format": {"type": "text"}}
                ]},
                function("mail__send", "mail__send it"),
            ]),
            "a namespace where its first member stood; a tool not in one is left as it was"
        );
        assert_eq!(
            body["input"][1],
            json!({"type": "function_call", "call_id": "call_l", "name": "lookup", "namespace": "crm",
                   "arguments": "{\"id\":7}"})
        );
        assert_eq!(
            body["input"][2],
            json!({"type": "custom_tool_call", "call_id": "call_n", "name": "note", "namespace": "crm", "input": "seen"})
        );
        assert_eq!(body["tool_choice"], "auto");
    }

    #[test]
    fn a_namespace_whose_member_is_forced_or_that_has_no_description_stays_flattened() {
        let forced = Some(ToolChoice::Named("crm__lookup".into()));
        let body = namespaced_body(forced, json!({"namespace_tools": [crm()]}));
        let names: Vec<&str> = body["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
        assert_eq!(names, ["shell", "crm__lookup", "crm__note", "mail__send"]);
        assert_eq!(body["tool_choice"], json!({"type": "function", "name": "crm__lookup"}));
        assert_eq!(body["input"][1]["name"], "crm__lookup");
        assert!(body["input"][1].get("namespace").is_none());

        // Forcing a tool outside it leaves the namespace native.
        let body = namespaced_body(Some(ToolChoice::Named("shell".into())), json!({"namespace_tools": [crm()]}));
        assert_eq!(body["tools"][1]["type"], "namespace");
        assert_eq!(body["tool_choice"], json!({"type": "function", "name": "shell"}));

        let undescribed = json!({"name": "crm", "description": "", "tools": ["lookup", "note"]});
        let body = namespaced_body(None, json!({"namespace_tools": [undescribed]}));
        assert_eq!(body["tools"][1]["name"], "crm__lookup", "OpenAI requires a namespace's description");
    }

    #[test]
    fn two_entries_of_one_namespace_are_one_namespace() {
        let halves = json!([{"name": "crm", "description": "The CRM.", "tools": ["lookup"]},
                            {"name": "crm", "description": "", "tools": ["note"]}]);
        let body = namespaced_body(None, json!({"namespace_tools": halves}));
        let namespace = &body["tools"][1];
        assert_eq!(namespace["description"], "The CRM.");
        let members: Vec<&str> =
            namespace["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
        assert_eq!(members, ["lookup", "note"]);
        assert_eq!(body["tools"].as_array().unwrap().len(), 3);
    }

    #[test]
    fn a_namespace_naming_a_member_the_request_does_not_hold_is_refused() {
        let params = CallParams::new("gpt-5", 100);
        let refused = |fields: Value| encode(&namespaced(None), &params, &native(fields)).unwrap_err();
        let missing = json!({"name": "crm", "description": "The CRM.", "tools": ["lookup", "delete"]});
        assert!(
            matches!(refused(json!({"namespace_tools": [missing]})), CodecError::Unsupported(m) if m.contains("\"crm\""))
        );
        assert!(matches!(
            refused(json!({"namespace_tools": [{"description": "x", "tools": []}]})),
            CodecError::Unsupported(_)
        ));
        assert!(matches!(
            refused(json!({"namespace_tools": [{"name": "crm", "tools": [3]}]})),
            CodecError::Unsupported(_)
        ));
        assert!(matches!(refused(json!({"namespace_tools": [{"name": "crm"}]})), CodecError::Unsupported(_)));
        assert!(matches!(refused(json!({"namespace_tools": {"name": "crm"}})), CodecError::Unsupported(_)));
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
