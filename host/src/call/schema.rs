//! Structured answers: when a call asks for a JSON-schema answer, the model's
//! text must parse and carry every required field. A failure becomes a
//! correction turn (the gate re-asks with the reason), never a silent `null`.
//!
//! Before validation, *schema-echo* answers are normalized: some format-literal
//! models answer in the schema notation itself (values filled into `@fields`
//! under `@type`). Every `@fields` object is hoisted into its parent, recursively,
//! and `@`-prefixed notation keys are dropped, recovering the instance the answer
//! encodes. Left alone it would validate as an object missing every field.

use serde_json::{Map, Value};

/// Why an answer is not the structured answer asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SchemaFailure {
    /// The text is not JSON.
    Parse(String),
    /// The JSON lacks a required field or has the wrong shape.
    Validation(String),
}

impl SchemaFailure {
    /// The correction turn sent back to the model.
    pub fn correction(&self) -> String {
        match self {
            Self::Parse(reason) => format!(
                "Your previous answer was not valid JSON ({reason}). Answer again with only a JSON value \
                 that matches the requested schema, with no other text."
            ),
            Self::Validation(reason) => format!(
                "Your previous answer did not match the requested schema: {reason}. Answer again with only \
                 a JSON value that matches the schema, including every required field."
            ),
        }
    }
}

/// The answer as the instance the schema asks for, normalized, or why not.
pub fn check(text: &str, schema: &Value) -> Result<Value, SchemaFailure> {
    let json = strip_fences(text);
    let value: Value = serde_json::from_str(json).map_err(|e| SchemaFailure::Parse(e.to_string()))?;
    let value = normalize_schema_echo(value);
    validate(&value, schema, "$").map_err(SchemaFailure::Validation)?;
    Ok(value)
}

/// The JSON inside a Markdown code fence, or the trimmed text.
fn strip_fences(text: &str) -> &str {
    let trimmed = text.trim();
    let Some(rest) = trimmed.strip_prefix("```") else { return trimmed };
    let body = rest.split_once('\n').map_or("", |(_, body)| body);
    body.trim_end().strip_suffix("```").unwrap_or(body).trim()
}

/// Hoists every `@fields` object into its parent and drops `@` keys, recursively.
pub fn normalize_schema_echo(value: Value) -> Value {
    match value {
        Value::Object(object) => Value::Object(normalize_object(object)),
        Value::Array(items) => Value::Array(items.into_iter().map(normalize_schema_echo).collect()),
        other => other,
    }
}

fn normalize_object(object: Map<String, Value>) -> Map<String, Value> {
    let mut normalized = Map::new();
    for (key, value) in object {
        if key == "@fields" {
            if let Value::Object(fields) = normalize_schema_echo(value) {
                normalized.extend(fields);
            }
        } else if !key.starts_with('@') {
            normalized.insert(key, normalize_schema_echo(value));
        }
    }
    normalized
}

/// Checks the parts of JSON Schema a structured answer depends on: types, and
/// required properties, through nested objects and arrays.
fn validate(value: &Value, schema: &Value, path: &str) -> Result<(), String> {
    if let Some(expected) = schema.get("type").and_then(Value::as_str)
        && !has_type(value, expected)
    {
        return Err(format!("`{path}` should be {expected}, not {}", type_name(value)));
    }
    if let (Value::Object(object), Some(required)) = (value, schema.get("required").and_then(Value::as_array)) {
        for field in required.iter().filter_map(Value::as_str) {
            if object.get(field).is_none_or(Value::is_null) {
                return Err(format!("required field `{path}.{field}` is missing"));
            }
        }
    }
    if let (Value::Object(object), Some(properties)) = (value, schema.get("properties").and_then(Value::as_object)) {
        for (name, property_schema) in properties {
            if let Some(property) = object.get(name).filter(|v| !v.is_null()) {
                validate(property, property_schema, &format!("{path}.{name}"))?;
            }
        }
    }
    if let (Value::Array(items), Some(item_schema)) = (value, schema.get("items")) {
        for (index, item) in items.iter().enumerate() {
            validate(item, item_schema, &format!("{path}[{index}]"))?;
        }
    }
    Ok(())
}

fn has_type(value: &Value, expected: &str) -> bool {
    match expected {
        "object" => value.is_object(),
        "array" => value.is_array(),
        "string" => value.is_string(),
        "number" => value.is_number(),
        "integer" => value.is_i64() || value.is_u64(),
        "boolean" => value.is_boolean(),
        "null" => value.is_null(),
        _ => true,
    }
}

fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn schema() -> Value {
        json!({
            "type": "object",
            "properties": {
                "city": {"type": "string"},
                "days": {"type": "integer"},
                "address": {"type": "object", "properties": {"zip": {"type": "string"}}, "required": ["zip"]}
            },
            "required": ["city", "days"]
        })
    }

    #[test]
    fn a_valid_answer_passes_even_in_a_code_fence() {
        let answer = "```json\n{\"city\": \"Paris\", \"days\": 3}\n```";
        assert_eq!(check(answer, &schema()).unwrap(), json!({"city": "Paris", "days": 3}));
    }

    #[test]
    fn parse_and_validation_failures_say_why() {
        assert!(matches!(check("Paris, 3 days", &schema()), Err(SchemaFailure::Parse(_))));
        let missing = check(r#"{"city": "Paris"}"#, &schema()).unwrap_err();
        assert_eq!(missing, SchemaFailure::Validation("required field `$.days` is missing".into()));
        let wrong = check(r#"{"city": "Paris", "days": "three"}"#, &schema()).unwrap_err();
        assert_eq!(wrong, SchemaFailure::Validation("`$.days` should be integer, not a string".into()));
        let nested = check(r#"{"city": "Paris", "days": 3, "address": {}}"#, &schema()).unwrap_err();
        assert_eq!(nested, SchemaFailure::Validation("required field `$.address.zip` is missing".into()));
        assert!(missing.correction().contains("required field `$.days` is missing"));
    }

    #[test]
    fn schema_echo_answers_are_normalized_before_validation() {
        let echo = r#"{"@type": "object", "@fields": {"city": "Paris", "days": 3,
                        "address": {"@type": "object", "@fields": {"zip": "75001"}}}}"#;
        assert_eq!(check(echo, &schema()).unwrap(), json!({"city": "Paris", "days": 3, "address": {"zip": "75001"}}));
        let in_array = normalize_schema_echo(json!([{"@fields": {"a": 1}, "@type": "object"}]));
        assert_eq!(in_array, json!([{"a": 1}]));
    }
}
