//! The pieces of a completion or stream chunk read into typed, borrowed fields
//! instead of a `serde_json::Value` tree: usage counts and tool calls. Building
//! the tree's maps and strings was most of the component's work per body.
//!
//! A plain reading only ever accepts what the tree reading would read the same
//! way: a field of another type, or a key twice, fails the typed parse, and the
//! caller then reads the tree. Property tests in `response` and `stream` hold the
//! two readings to identical answers.

use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;
use std::ops::Deref;

use serde::de::value::MapAccessDeserializer;
use serde::de::{IgnoredAny, MapAccess, Visitor};
use serde::{Deserialize, Deserializer};
use weir_sdk::types::Usage;

/// A typed reading of a JSON object, and of nothing else. A derived struct
/// would also take an array, field by field in order (serde's sequence form),
/// where the tree reading sees no fields at all; this wrapper refuses it, so
/// the caller reads the tree.
#[derive(Debug)]
pub(crate) struct Object<T>(T);

impl<T> Deref for Object<T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.0
    }
}

impl<T> Object<T> {
    pub(crate) fn into_inner(self) -> T {
        self.0
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Object<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(ObjectVisitor(PhantomData))
    }
}

struct ObjectVisitor<T>(PhantomData<T>);

impl<'de, T: Deserialize<'de>> Visitor<'de> for ObjectVisitor<T> {
    type Value = Object<T>;

    fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Object<T>, A::Error> {
        T::deserialize(MapAccessDeserializer::new(map)).map(Object)
    }
}

/// The fields a completion and a stream chunk share; `C` is the choice's type.
/// A body with an error object (`error`, or `object: "error"`) is never plain.
#[derive(Debug, Deserialize)]
#[serde(bound(deserialize = "C: Deserialize<'de>"))]
pub(crate) struct PlainBody<'a, C> {
    #[serde(borrow, default)]
    pub id: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    pub model: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    object: Option<Cow<'a, str>>,
    #[serde(default)]
    error: Option<IgnoredAny>,
    #[serde(default)]
    pub usage: Option<Object<PlainUsage>>,
    #[serde(default)]
    pub choices: Option<Vec<Object<C>>>,
}

impl<'a, C: Deserialize<'a>> PlainBody<'a, C> {
    /// The body, unless it does not parse into these types or carries an error
    /// object; `None` leaves it to the tree.
    pub(crate) fn parse(body: &'a [u8]) -> Option<Self> {
        let body = serde_json::from_slice::<Object<PlainBody<'a, C>>>(body).ok()?.into_inner();
        let plain = body.error.is_none() && body.object.as_deref() != Some("error");
        plain.then_some(body)
    }
}

/// `usage`, as OpenAI and compatible servers send it.
#[derive(Debug, Deserialize)]
pub(crate) struct PlainUsage {
    #[serde(default)]
    prompt_tokens: Option<u64>,
    #[serde(default)]
    completion_tokens: Option<u64>,
    #[serde(default)]
    prompt_tokens_details: Option<Object<PlainDetails>>,
    #[serde(default)]
    completion_tokens_details: Option<Object<PlainDetails>>,
}

/// `prompt_tokens_details` and `completion_tokens_details`: each is read for
/// one count only, so one type holds both.
#[derive(Debug, Deserialize)]
struct PlainDetails {
    #[serde(default)]
    cached_tokens: Option<u64>,
    #[serde(default)]
    reasoning_tokens: Option<u64>,
}

impl PlainUsage {
    pub(crate) fn usage(&self) -> Usage {
        additive_usage(
            self.prompt_tokens.unwrap_or(0),
            self.completion_tokens.unwrap_or(0),
            self.prompt_tokens_details.as_ref().and_then(|details| details.cached_tokens).unwrap_or(0),
            self.completion_tokens_details.as_ref().and_then(|details| details.reasoning_tokens),
        )
    }
}

/// OpenAI's `prompt_tokens` includes the cached part; Weir's usage is additive,
/// so the cached tokens move from `input` to `cache-read`.
pub(crate) fn additive_usage(prompt: u64, completion: u64, cached: u64, reasoning: Option<u64>) -> Usage {
    Usage { input: prompt.saturating_sub(cached), output: completion, cache_read: cached, cache_write: 0, reasoning }
}

/// A message of a whole answer, or a stream chunk's delta: the same fields.
#[derive(Debug, Deserialize)]
pub(crate) struct PlainMessage<'a> {
    #[serde(borrow, default)]
    pub content: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    pub reasoning_content: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    pub reasoning: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    pub refusal: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    pub tool_calls: Option<Vec<Object<PlainToolCall<'a>>>>,
}

/// One `tool_calls[]` item of a message, or a fragment of one in a stream delta.
#[derive(Debug, Deserialize)]
pub(crate) struct PlainToolCall<'a> {
    #[serde(default)]
    pub index: Option<u64>,
    #[serde(borrow, default)]
    pub id: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    pub function: Option<Object<PlainFunction<'a>>>,
}

/// A call's `function`. `arguments` as text only: a server that sends an
/// object instead is left to the tree.
#[derive(Debug, Deserialize)]
pub(crate) struct PlainFunction<'a> {
    #[serde(borrow, default)]
    pub name: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    pub arguments: Option<Cow<'a, str>>,
}

impl PlainToolCall<'_> {
    pub(crate) fn name(&self) -> Option<&str> {
        nonempty(self.function.as_ref().and_then(|function| function.name.as_deref()))
    }

    pub(crate) fn arguments(&self) -> Option<&str> {
        self.function.as_ref().and_then(|function| function.arguments.as_deref())
    }
}

/// A string field as `response::text` reads it: absent when empty.
pub(crate) fn nonempty(field: Option<&str>) -> Option<&str> {
    field.filter(|text| !text.is_empty())
}

/// Generators of JSON bodies for the property tests that hold each plain reading
/// to its tree reading (in `response` and `stream`).
#[cfg(test)]
pub(crate) mod strategies {
    use proptest::prelude::*;
    use serde_json::{Map, Value, json};

    /// A field's value: absent (`None`), one of `usual`, or now and then one of
    /// `odd` (a type the plain reading leaves to the tree, or a value that makes
    /// the body not plain), so that both readings are exercised.
    pub(crate) fn field(usual: Vec<Value>, odd: Vec<Value>) -> impl Strategy<Value = Option<Value>> {
        prop_oneof![
            6 => Just(None),
            12 => proptest::sample::select(usual).prop_map(Some),
            1 => proptest::sample::select(odd).prop_map(Some),
        ]
    }

    /// A text field: null, empty, plain, with escapes; now and then a number or
    /// an array of parts.
    pub(crate) fn text() -> impl Strategy<Value = Option<Value>> {
        field(vec![Value::Null, json!(""), json!("Hel"), json!("a \"quoted\" é\n")], vec![json!(7), json!(["part"])])
    }

    /// An object of the fields that are present.
    pub(crate) fn object(fields: Vec<(&'static str, Option<Value>)>) -> Value {
        let map: Map<String, Value> =
            fields.into_iter().filter_map(|(key, value)| Some((key.to_owned(), value?))).collect();
        Value::Object(map)
    }

    /// `usage`: the counts with and without their details; now and then of
    /// the wrong shape.
    pub(crate) fn usage() -> impl Strategy<Value = Option<Value>> {
        field(
            vec![
                Value::Null,
                json!({"prompt_tokens": 9, "completion_tokens": 2, "total_tokens": 11}),
                json!({"prompt_tokens": 12, "completion_tokens": 30,
                       "prompt_tokens_details": {"cached_tokens": 4, "audio_tokens": 0},
                       "completion_tokens_details": {"reasoning_tokens": 16}}),
                json!({"prompt_tokens": 3, "prompt_tokens_details": null, "completion_tokens_details": {}}),
            ],
            vec![
                json!("bad"),
                json!([9, 2]),
                json!({"prompt_tokens": 9.5}),
                json!({"prompt_tokens": -1}),
                json!({"prompt_tokens_details": [4]}),
            ],
        )
    }

    /// A completion or a stream chunk (the fields [`super::PlainBody`] reads):
    /// `object` names its kind and `error` is its error object, either now and
    /// then; `choices` is the value of that key, absent when `None`.
    pub(crate) fn body(
        object_kind: &'static str,
        error: Value,
        choices: impl Strategy<Value = Option<Value>>,
    ) -> impl Strategy<Value = Value> {
        let id = field(vec![Value::Null, json!(""), json!("chatcmpl-1")], vec![json!(7)]);
        let model = field(vec![Value::Null, json!(""), json!("gpt-4.1")], vec![json!(["m"])]);
        let object_field = field(vec![json!(object_kind)], vec![json!("error"), json!(3)]);
        let error = field(vec![Value::Null], vec![error]);
        (id, model, object_field, error, usage(), choices).prop_map(
            |(id, model, object_field, error, usage, choices)| {
                object(vec![
                    ("id", id),
                    ("model", model),
                    ("object", object_field),
                    ("error", error),
                    ("usage", usage),
                    ("choices", choices),
                ])
            },
        )
    }

    /// A message of a whole answer, or a stream chunk's delta (the same fields),
    /// its calls named by `name`.
    pub(crate) fn message(name: impl Strategy<Value = Option<Value>>) -> impl Strategy<Value = Value> {
        (text(), text(), text(), text(), tool_calls(name), field(vec![json!("assistant")], vec![json!(7)])).prop_map(
            |(content, reasoning_content, reasoning, refusal, tool_calls, role)| {
                object(vec![
                    ("content", content),
                    ("reasoning_content", reasoning_content),
                    ("reasoning", reasoning),
                    ("refusal", refusal),
                    ("tool_calls", tool_calls),
                    ("role", role),
                ])
            },
        )
    }

    /// How many of 1,000 bodies `strategy` generates `is_plain` takes: a
    /// property that holds the two readings to one answer means something only
    /// if both readings get many bodies.
    pub(crate) fn plain_share(strategy: impl Strategy<Value = Value>, is_plain: impl Fn(&[u8]) -> bool) -> usize {
        use proptest::strategy::ValueTree;
        let mut runner = proptest::test_runner::TestRunner::deterministic();
        (0..1000)
            .filter(|_| {
                strategy.new_tree(&mut runner).is_ok_and(|tree| is_plain(tree.current().to_string().as_bytes()))
            })
            .count()
    }

    /// A call's name: a stream's later fragments have none.
    pub(crate) fn fragment_name() -> impl Strategy<Value = Option<Value>> {
        field(vec![Value::Null, json!(""), json!("get_weather")], vec![json!(7)])
    }

    /// A call's name in a whole answer: nearly always there.
    pub(crate) fn call_name() -> impl Strategy<Value = Option<Value>> {
        prop_oneof![
            9 => Just(Some(json!("get_weather"))),
            1 => proptest::sample::select(vec![None, Some(Value::Null), Some(json!("")), Some(json!(7))]),
        ]
    }

    /// `tool_calls`: items (or stream fragments) with or without index, id,
    /// name and arguments; now and then arguments as an object, an item that is
    /// not an object, or an index of another type.
    pub(crate) fn tool_calls(name: impl Strategy<Value = Option<Value>>) -> impl Strategy<Value = Option<Value>> {
        let arguments = field(
            vec![Value::Null, json!(""), json!(" "), json!("{\"city\":"), json!("\"Paris\"}")],
            vec![json!({"city": "Paris"})],
        );
        let function =
            (name, arguments).prop_map(|(name, arguments)| object(vec![("name", name), ("arguments", arguments)]));
        let index = field(vec![json!(0), json!(1)], vec![json!("0"), json!(-1), json!(4_294_967_296u64)]);
        let id = field(vec![Value::Null, json!(""), json!("call_1")], vec![json!(7)]);
        let function = prop_oneof![9 => function.prop_map(Some), 1 => Just(None)];
        let item = (index, id, function, field(vec![json!("function")], vec![json!(1)])).prop_map(
            |(index, id, function, kind)| {
                object(vec![("index", index), ("id", id), ("function", function), ("type", kind)])
            },
        );
        let item = prop_oneof![12 => item, 1 => Just(json!("call")), 1 => Just(json!([0, "call_1"]))];
        let items = proptest::collection::vec(item, 0..3).prop_map(Value::Array);
        prop_oneof![
            6 => Just(None),
            3 => items.prop_map(Some),
            1 => Just(Some(Value::Null)),
            1 => Just(Some(json!({}))),
        ]
    }
}
