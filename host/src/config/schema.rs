//! The JSON Schema of a configuration file (`weir config schema`), derived
//! from the config types: their doc comments are its descriptions. Fields a
//! custom deserializer reads (a word checked by hand) are described here by
//! the words it accepts.

use schemars::JsonSchema;

/// The words an `effort` field accepts (see `effort_word`).
#[derive(JsonSchema)]
#[schemars(rename_all = "lowercase")]
#[allow(dead_code, reason = "only its schema is used: the field is read as a word")]
pub(super) enum EffortWord {
    Minimal,
    Low,
    Medium,
    High,
    Max,
}

/// The words a `lane` field accepts (see `lane_word`).
#[derive(JsonSchema)]
#[schemars(rename_all = "lowercase")]
#[allow(dead_code, reason = "only its schema is used: the field is read as a word")]
pub(super) enum LaneWord {
    Interactive,
    Bulk,
}

/// The configuration's JSON Schema (draft 2020-12), as `weir config schema` prints it.
pub fn config_schema() -> serde_json::Value {
    let mut generator = schemars::generate::SchemaSettings::draft2020_12().into_generator();
    generator.root_schema_for::<super::Config>().to_value()
}

/// The book's configuration reference (`docs/src/configuration/reference.md`),
/// rendered from [`config_schema`]: one section per table, each key with its
/// type and description. A test fails when the committed page differs.
pub fn config_reference() -> String {
    let schema = config_schema();
    let defs = schema.get("$defs").and_then(serde_json::Value::as_object).cloned().unwrap_or_default();
    let mut page = String::from(
        "# Configuration reference\n\n\
         <!-- Generated from the configuration types by `weir_host::catalog::config_reference` \
         (host/src/config/schema.rs); do not edit: `WEIR_BLESS=1 cargo test -p weir-host --test config_schema` \
         rewrites it. -->\n\n\
         Every key a configuration file (`weir.toml`) may hold, generated from the types the \
         parser reads, so it cannot drift from what `weir serve` accepts. An unknown key is an \
         error. `weir config schema` prints the same as a JSON Schema, for an editor's TOML \
         extension; `weir config check FILE` checks a file as `weir serve` would load it.\n",
    );
    // Tables in the order they are first reached from the top level.
    let mut queue: Vec<(String, String)> = vec![("Config".to_owned(), "top level".to_owned())];
    let mut seen = std::collections::BTreeSet::from(["Config".to_owned()]);
    let mut index = 0;
    while let Some((name, path)) = queue.get(index).cloned() {
        index += 1;
        let table = if name == "Config" { &schema } else { defs.get(&name).unwrap_or(&serde_json::Value::Null) };
        page.push_str(&format!("\n## {path}\n\n"));
        if let Some(description) = table.get("description").and_then(serde_json::Value::as_str) {
            page.push_str(&one_paragraph(description));
            page.push_str("\n\n");
        }
        let Some(properties) = table.get("properties").and_then(serde_json::Value::as_object) else { continue };
        let required: Vec<&str> = table
            .get("required")
            .and_then(serde_json::Value::as_array)
            .map(|names| names.iter().filter_map(serde_json::Value::as_str).collect())
            .unwrap_or_default();
        page.push_str("| Key | Type | Description |\n|---|---|---|\n");
        for (key, property) in properties {
            let child_path = |shape: &str| match (path.as_str(), shape) {
                ("top level", "array") => format!("`[[{key}]]`"),
                ("top level", "map") => format!("`[{key}.NAME]`"),
                ("top level", _) => format!("`[{key}]`"),
                (_, "array") => format!("{path} `{key} = [{{...}}]`"),
                (_, "map") => format!("{path} `{key}.NAME`"),
                _ => format!("{path} `{key}`"),
            };
            for (table_name, shape) in tables_in(property, &defs) {
                if seen.insert(table_name.clone()) {
                    queue.push((table_name, child_path(shape)));
                }
            }
            let mut kind = type_of(property, &defs);
            if required.contains(&key.as_str()) {
                kind.push_str(", required");
            }
            let description = property.get("description").and_then(serde_json::Value::as_str).unwrap_or("");
            page.push_str(&format!("| `{key}` | {kind} | {} |\n", one_paragraph(description).replace('|', "\\|")));
        }
    }
    page
}

/// A doc comment's lines joined into one (a table cell holds one line).
fn one_paragraph(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The object tables a property leads to (through arrays, maps and options),
/// with how it holds them: `array`, `map` or `table`.
fn tables_in(
    property: &serde_json::Value,
    defs: &serde_json::Map<String, serde_json::Value>,
) -> Vec<(String, &'static str)> {
    let is_table = |name: &str| defs.get(name).is_some_and(|def| def.get("properties").is_some());
    let target = |value: &serde_json::Value| {
        value.get("$ref").and_then(serde_json::Value::as_str).map(|r| r.trim_start_matches("#/$defs/").to_owned())
    };
    let mut found = Vec::new();
    let mut look = |value: &serde_json::Value, shape: &'static str| {
        if let Some(name) = target(value).filter(|name| is_table(name)) {
            found.push((name, shape));
        }
    };
    look(property, "table");
    for option in property.get("anyOf").and_then(serde_json::Value::as_array).into_iter().flatten() {
        look(option, "table");
    }
    if let Some(items) = property.get("items") {
        look(items, "array");
    }
    if let Some(values) = property.get("additionalProperties").filter(|values| values.is_object()) {
        look(values, "map");
    }
    found
}

/// A property's type in words: `integer`, `"a" \| "b"`, `array of string`, ...
fn type_of(property: &serde_json::Value, defs: &serde_json::Map<String, serde_json::Value>) -> String {
    if let Some(name) = property.get("$ref").and_then(serde_json::Value::as_str) {
        let name = name.trim_start_matches("#/$defs/");
        return match defs.get(name) {
            Some(def) if def.get("properties").is_some() => "table".to_owned(),
            Some(def) => type_of(def, defs),
            None => name.to_owned(),
        };
    }
    if let Some(options) = property.get("anyOf").and_then(serde_json::Value::as_array) {
        let kinds: Vec<String> =
            options.iter().filter(|o| o.get("type") != Some(&"null".into())).map(|o| type_of(o, defs)).collect();
        return kinds.join(" or ");
    }
    if let Some(words) = property.get("enum").and_then(serde_json::Value::as_array) {
        return words.iter().map(|word| format!("`{word}`")).collect::<Vec<_>>().join(" \\| ");
    }
    if let Some(options) = property.get("oneOf").and_then(serde_json::Value::as_array) {
        let words: Vec<String> = options
            .iter()
            .map(|option| match option.get("const") {
                Some(word) => format!("`{word}`"),
                None => type_of(option, defs),
            })
            .collect();
        return words.join(" \\| ");
    }
    let kinds: Vec<&str> = match property.get("type") {
        Some(serde_json::Value::String(kind)) => vec![kind.as_str()],
        Some(serde_json::Value::Array(kinds)) => {
            kinds.iter().filter_map(serde_json::Value::as_str).filter(|kind| *kind != "null").collect()
        }
        _ => Vec::new(),
    };
    match kinds.first().copied() {
        Some("array") => {
            format!("array of {}", property.get("items").map_or_else(|| "values".to_owned(), |i| type_of(i, defs)))
        }
        Some("object") => match property.get("additionalProperties").filter(|values| values.is_object()) {
            Some(values) => format!("table of NAME = {}", type_of(values, defs)),
            None => "table".to_owned(),
        },
        Some(kind) => kind.to_owned(),
        None => "any".to_owned(),
    }
}
