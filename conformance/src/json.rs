//! Looking into encoded bodies and decoded summaries without knowing the dialect.

use serde_json::Value;

/// Whether `expected` is contained in `actual`: every key of an expected object is
/// present and matches, arrays match element by element, scalars are equal
/// (numbers by value, so `7` matches `7.0`). `Err` names the first difference.
pub fn subset(expected: &Value, actual: &Value) -> Result<(), String> {
    subset_at("$", expected, actual)
}

fn subset_at(path: &str, expected: &Value, actual: &Value) -> Result<(), String> {
    match (expected, actual) {
        (Value::Object(want), Value::Object(have)) => {
            for (key, value) in want {
                let child = format!("{path}.{key}");
                let found = have.get(key).ok_or_else(|| format!("{child} is missing"))?;
                subset_at(&child, value, found)?;
            }
            Ok(())
        }
        (Value::Array(want), Value::Array(have)) if want.len() == have.len() => {
            want.iter().zip(have).enumerate().try_for_each(|(i, (w, h))| subset_at(&format!("{path}[{i}]"), w, h))
        }
        (Value::Number(want), Value::Number(have)) if want.as_f64() == have.as_f64() => Ok(()),
        (want, have) if want == have => Ok(()),
        (want, have) => Err(format!("{path} is {}, expected {}", excerpt(have), excerpt(want))),
    }
}

/// Every string value anywhere in `value` (object keys excluded).
pub fn strings(value: &Value) -> Vec<&str> {
    let mut found = Vec::new();
    collect_strings(value, &mut found);
    found
}

fn collect_strings<'a>(value: &'a Value, found: &mut Vec<&'a str>) {
    match value {
        Value::String(text) => found.push(text),
        Value::Array(items) => items.iter().for_each(|item| collect_strings(item, found)),
        Value::Object(map) => map.values().for_each(|item| collect_strings(item, found)),
        _ => {}
    }
}

/// Whether some string value anywhere in `value` contains `needle`.
pub fn mentions(value: &Value, needle: &str) -> bool {
    strings(value).iter().any(|text| text.contains(needle))
}

/// Whether the number `n` appears as a value anywhere in `value`.
pub fn has_number(value: &Value, n: u64) -> bool {
    match value {
        Value::Number(number) => number.as_u64() == Some(n),
        Value::Array(items) => items.iter().any(|item| has_number(item, n)),
        Value::Object(map) => map.values().any(|item| has_number(item, n)),
        _ => false,
    }
}

/// Whether an object anywhere in `value` has this key.
pub fn has_key(value: &Value, key: &str) -> bool {
    match value {
        Value::Array(items) => items.iter().any(|item| has_key(item, key)),
        Value::Object(map) => map.contains_key(key) || map.values().any(|item| has_key(item, key)),
        _ => false,
    }
}

/// A short rendering of a value for a failure message.
pub fn excerpt(value: &Value) -> String {
    let text = value.to_string();
    match text.char_indices().nth(120) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn subset_ignores_extra_keys_but_not_missing_or_different_ones() {
        let actual = json!({"a": 1, "b": {"c": [1, 2], "d": "x"}, "e": null});
        assert_eq!(subset(&json!({"b": {"c": [1, 2.0]}}), &actual), Ok(()));
        assert_eq!(subset(&json!({"b": {"z": 1}}), &actual), Err("$.b.z is missing".to_owned()));
        assert_eq!(subset(&json!({"b": {"d": "y"}}), &actual), Err(r#"$.b.d is "x", expected "y""#.to_owned()));
        assert!(subset(&json!({"b": {"c": [1]}}), &actual).is_err(), "arrays must have the same length");
    }

    #[test]
    fn finders_walk_nested_values() {
        let value = json!({"messages": [{"content": [{"text": "hello there"}]}], "max_tokens": 1234});
        assert!(mentions(&value, "lo th"));
        assert!(!mentions(&value, "messages"), "keys are not values");
        assert!(has_number(&value, 1234));
        assert!(!has_number(&value, 123));
        assert!(has_key(&value, "text"));
        assert_eq!(strings(&value), vec!["hello there"]);
    }

    #[test]
    fn excerpts_are_short() {
        let long = Value::String("x".repeat(500));
        assert!(excerpt(&long).chars().count() <= 121);
    }
}
