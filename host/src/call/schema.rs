//! Structured answers: when a call asks for a JSON-schema answer, the model's
//! text must parse and validate against the caller's schema (the `jsonschema`
//! crate: types, `required`, `enum`, `anyOf`, `additionalProperties` and the
//! rest of the vocabulary). A failure becomes a correction turn (the gate re-asks
//! with the reason, naming the failing path), never a silent `null`.
//!
//! Before validation, *schema-echo* answers are normalized: some format-literal
//! models answer in the schema notation itself (values filled into `@fields`
//! under `@type`). Every `@fields` object is hoisted into its parent, recursively,
//! and `@`-prefixed notation keys are dropped, recovering the instance the answer
//! encodes. Left alone it would validate as an object missing every field.

use serde_json::{Map, Value};

/// At most this many validation failures are named in a correction: enough to
/// fix several fields at once, short enough to stay a correction.
const REPORTED_FAILURES: usize = 5;

/// Why an answer is not the structured answer asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SchemaFailure {
    /// The text is not JSON.
    Parse(String),
    /// The JSON does not match the schema: each failure with its path.
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

/// A caller's response schema, compiled once per call.
pub struct AnswerSchema(jsonschema::Validator);

impl std::fmt::Debug for AnswerSchema {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AnswerSchema").finish_non_exhaustive()
    }
}

impl AnswerSchema {
    /// Compiles a JSON Schema (its draft from `$schema`, else 2020-12). Only
    /// references inside the schema resolve: the crate is built without its
    /// HTTP and file resolvers, so a schema cannot make the gateway fetch.
    pub fn compile(schema: &Value) -> Result<Self, String> {
        jsonschema::validator_for(schema).map(Self).map_err(|error| error.to_string())
    }
}

/// The answer as the instance the schema asks for, normalized, or why not.
pub fn check(text: &str, schema: &AnswerSchema) -> Result<Value, SchemaFailure> {
    let json = strip_fences(text);
    let value: Value = serde_json::from_str(json).map_err(|e| SchemaFailure::Parse(e.to_string()))?;
    let value = normalize_schema_echo(value);
    let failures: Vec<String> = schema.0.iter_errors(&value).take(REPORTED_FAILURES).map(|e| describe(&e)).collect();
    if failures.is_empty() { Ok(value) } else { Err(SchemaFailure::Validation(failures.join("; "))) }
}

/// One failure as the model should read it: where (a JSON pointer into its
/// answer) and what. The value itself is masked: the model has it, and a large
/// one would drown the message.
fn describe(error: &jsonschema::ValidationError<'_>) -> String {
    let path = error.instance_path().as_str();
    let at = if path.is_empty() { "the top level".to_owned() } else { format!("`{path}`") };
    format!("at {at}: {}", error.masked_with("the value"))
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

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn schema() -> AnswerSchema {
        AnswerSchema::compile(&json!({
            "type": "object",
            "properties": {
                "city": {"type": "string"},
                "days": {"type": "integer"},
                "address": {"type": "object", "properties": {"zip": {"type": "string"}}, "required": ["zip"]}
            },
            "required": ["city", "days"]
        }))
        .unwrap()
    }

    fn failure(answer: &str, schema: &AnswerSchema) -> String {
        match check(answer, schema) {
            Err(SchemaFailure::Validation(reason)) => reason,
            other => panic!("expected a validation failure, got {other:?}"),
        }
    }

    #[test]
    fn a_valid_answer_passes_even_in_a_code_fence() {
        let answer = "```json\n{\"city\": \"Paris\", \"days\": 3}\n```";
        assert_eq!(check(answer, &schema()).unwrap(), json!({"city": "Paris", "days": 3}));
    }

    #[test]
    fn parse_and_validation_failures_name_the_path() {
        assert!(matches!(check("Paris, 3 days", &schema()), Err(SchemaFailure::Parse(_))));
        let missing = failure(r#"{"city": "Paris"}"#, &schema());
        assert_eq!(missing, r#"at the top level: "days" is a required property"#);
        let wrong = failure(r#"{"city": "Paris", "days": "three"}"#, &schema());
        assert_eq!(wrong, r#"at `/days`: the value is not of type "integer""#);
        let nested = failure(r#"{"city": "Paris", "days": 3, "address": {}}"#, &schema());
        assert_eq!(nested, r#"at `/address`: "zip" is a required property"#);
        let correction = SchemaFailure::Validation(wrong).correction();
        assert!(correction.contains("at `/days`"), "{correction}");
    }

    #[test]
    fn enum_any_of_and_additional_properties_are_checked() {
        let schema = AnswerSchema::compile(&json!({
            "type": "object",
            "properties": {
                "unit": {"enum": ["celsius", "fahrenheit"]},
                "when": {"anyOf": [{"type": "integer"}, {"type": "string", "format": "date"}]},
                "tags": {"type": "array", "items": {"type": "string"}}
            },
            "additionalProperties": false
        }))
        .unwrap();
        assert!(check(r#"{"unit": "celsius", "when": 3, "tags": ["a"]}"#, &schema).is_ok());
        assert!(failure(r#"{"unit": "kelvin"}"#, &schema).starts_with("at `/unit`:"));
        assert!(failure(r#"{"when": true}"#, &schema).starts_with("at `/when`:"));
        assert!(failure(r#"{"tags": ["a", 2]}"#, &schema).starts_with("at `/tags/1`:"));
        let extra = failure(r#"{"unit": "celsius", "colour": "red"}"#, &schema);
        assert!(extra.starts_with("at the top level:") && extra.contains("colour"), "{extra}");
        let several = failure(r#"{"unit": "kelvin", "when": true, "x": 1}"#, &schema);
        assert_eq!(several.matches("at ").count(), 3, "{several}");
    }

    #[test]
    fn a_schema_that_is_not_json_schema_is_refused_at_compile() {
        assert!(AnswerSchema::compile(&json!({"type": "no-such-type"})).is_err());
        assert!(AnswerSchema::compile(&json!({"type": "object"})).is_ok());
    }

    #[test]
    fn a_remote_reference_is_not_fetched() {
        let remote = json!({"$ref": "http://127.0.0.1:9/schema.json"});
        assert!(AnswerSchema::compile(&remote).is_err(), "no resolver: the reference cannot be followed");
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
