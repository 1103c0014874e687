//! The decision wire's checks, on the examples of `docs/src/providers/decision-wire.md` and
//! on each way a request or an answer can break the wire.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use serde_json::{Value, json};

use super::*;

const DOC: &str = include_str!("../../../docs/src/providers/decision-wire.md");

/// The document's `n`th JSON example.
fn example(n: usize) -> Value {
    let block = DOC.split("```json\n").nth(n + 1).and_then(|rest| rest.split("```").next()).unwrap();
    serde_json::from_str(block).unwrap()
}

fn request() -> DecisionRequest {
    serde_json::from_value(example(0)).unwrap()
}

fn answer_bytes(answer: &Value) -> Vec<u8> {
    serde_json::to_vec(answer).unwrap()
}

#[test]
fn the_documents_examples_are_a_valid_request_and_its_valid_answer() {
    let request = request();
    request.validate().unwrap();
    let decision = check_answer(&request, &answer_bytes(&example(1))).unwrap();
    assert_eq!(decision.choice("intent").unwrap()[0], ("billing", 0.91));
    let noul = decision.noul("refund_owed").unwrap();
    assert_eq!((noul.r#true, noul.r#false, noul.null), (0.72, 0.08, 0.20));
    assert_eq!(decision.score("urgency").unwrap(), [(1, 0.02), (2, 0.10), (3, 0.55), (4, 0.28), (5, 0.05)]);
    assert_eq!(decision.input_tokens, Some(212));
    assert_eq!(decision.served_model.as_deref(), Some("jev-2-large-2026-09"));
    assert_eq!(decision.request_id.as_deref(), Some("dec_01J9ZK4M2"));
    assert!(decision.choice("urgency").is_none(), "read back by the shape asked only");
    assert_eq!(serde_json::to_value(&request).unwrap(), example(0), "the request goes out as it came in");
}

#[test]
fn the_outcomes_of_each_shape() {
    let request = request();
    let outcomes: Vec<Vec<String>> = request.questions.iter().map(Question::outcomes).collect();
    assert_eq!(outcomes[1], ["true", "false", "null"]);
    assert_eq!(outcomes[2], ["1", "2", "3", "4", "5"]);
    let negative = Question::Score { id: "s".to_owned(), min: -2, max: 1, text: None };
    assert_eq!(negative.outcomes(), ["-2", "-1", "0", "1"]);
}

/// Each rule of the request, broken once.
#[test]
fn a_request_that_breaks_the_wire_is_refused_naming_the_rule() {
    let cases: [(&str, Value, &str); 12] = [
        ("no state", json!({"text": "", "fields": {}}), "nothing to decide about"),
        ("a nested field", json!({"fields": {"a": [1]}}), "nested"),
        ("no question", json!([]), "1 to 64 questions"),
        ("a bad id", json!([{"id": "a b", "shape": "noul"}]), "question id `a b`"),
        ("an id twice", json!([{"id": "a", "shape": "noul"}, {"id": "a", "shape": "noul"}]), "used twice"),
        ("one option", json!([{"id": "a", "shape": "choice", "options": ["x"]}]), "2 to 32 options"),
        ("an option twice", json!([{"id": "a", "shape": "choice", "options": ["x", "x"]}]), "declared twice"),
        ("a blank option", json!([{"id": "a", "shape": "choice", "options": ["x", " "]}]), "not blank"),
        ("min above max", json!([{"id": "a", "shape": "score", "min": 3, "max": 1}]), "must be below"),
        ("min equals max", json!([{"id": "a", "shape": "score", "min": 1, "max": 1}]), "must be below"),
        ("a wide score", json!([{"id": "a", "shape": "score", "min": 0, "max": 101}]), "at most 100 steps"),
        (
            "an overflowing score",
            json!([{"id": "a", "shape": "score", "min": i64::MIN, "max": i64::MAX}]),
            "at most 100 steps",
        ),
    ];
    for (case, part, expected) in cases {
        let mut body = example(0);
        match part {
            Value::Array(_) => body["questions"] = part,
            state => body["state"] = state,
        }
        let request: DecisionRequest = serde_json::from_value(body).unwrap();
        let refusal = request.validate().unwrap_err();
        assert!(refusal.contains(expected), "{case}: {refusal}");
    }
}

#[test]
fn unknown_fields_and_shapes_do_not_parse() {
    for broken in [
        json!({"model": "m", "state": {"text": "t"}, "questions": [], "extra": 1}),
        json!({"model": "m", "state": {"text": "t", "mood": "x"}, "questions": []}),
        json!({"model": "m", "state": {"text": "t"}, "questions": [{"id": "a", "shape": "rank"}]}),
        json!({"model": "m", "state": {"text": "t"}, "questions": [{"id": "a", "shape": "noul", "options": ["x"]}]}),
        json!({"model": "m", "state": {"text": "t"}, "questions": [{"id": "a", "shape": "score", "min": 1.5, "max": 3}]}),
    ] {
        assert!(serde_json::from_value::<DecisionRequest>(broken.clone()).is_err(), "{broken}");
    }
}

/// The document's answer with `change` applied to its `answers`.
fn broken(change: impl FnOnce(&mut Vec<Value>)) -> Result<Decision, Malformed> {
    let mut answer = example(1);
    change(answer["answers"].as_array_mut().unwrap());
    check_answer(&request(), &answer_bytes(&answer))
}

#[test]
fn an_answer_that_breaks_the_wire_is_malformed_never_repaired() {
    let urgency = |answers: &mut Vec<Value>| answers[2]["distribution"].as_object_mut().unwrap().clone();
    assert_eq!(broken(|a| drop(a.remove(1))), Err(Malformed::Unanswered("refund_owed".to_owned())));
    assert_eq!(broken(|a| a.push(a[0].clone())), Err(Malformed::AnsweredTwice("intent".to_owned())));
    assert_eq!(
        broken(|a| a.push(json!({"id": "mood", "distribution": {"x": 1.0}}))),
        Err(Malformed::NotAsked("mood".to_owned()))
    );
    let missing = broken(|a| {
        a[0]["distribution"] = json!({"billing": 0.96, "bug": 0.04});
    });
    assert_eq!(missing, Err(Malformed::MissingOutcome { id: "intent".to_owned(), outcome: "feature".to_owned() }));
    let undeclared = broken(|a| {
        a[1]["distribution"] = json!({"true": 0.5, "false": 0.3, "null": 0.1, "maybe": 0.1});
    });
    assert_eq!(
        undeclared,
        Err(Malformed::UndeclaredOutcome { id: "refund_owed".to_owned(), outcome: "maybe".to_owned() })
    );
    let negative = broken(|a| {
        let mut urgency = urgency(a);
        urgency.insert("1".to_owned(), json!(-0.02));
        urgency.insert("3".to_owned(), json!(0.59));
        a[2]["distribution"] = Value::Object(urgency);
    });
    assert!(matches!(negative, Err(Malformed::BadProbability { ref outcome, .. }) if outcome == "1"), "{negative:?}");
    let short = broken(|a| {
        let mut urgency = urgency(a);
        urgency.insert("3".to_owned(), json!(0.5));
        a[2]["distribution"] = Value::Object(urgency);
    });
    assert!(matches!(short, Err(Malformed::SumNotOne { ref id, sum }) if id == "urgency" && (sum - 0.95).abs() < 1e-9));
    let text = broken(|a| a[0]["distribution"]["bug"] = json!("0.04"));
    assert!(matches!(text, Err(Malformed::Body(_))), "{text:?}");
}

#[test]
fn a_sum_within_the_tolerance_is_taken_as_it_is() {
    let decision = broken(|a| {
        a[0]["distribution"] = json!({"billing": 0.9, "bug": 0.04, "feature": 0.01, "other": 0.0505});
    })
    .unwrap();
    assert_eq!(decision.choice("intent").unwrap()[3], ("other", 0.0505), "not renormalized");
}

/// A JSON object naming an outcome twice is refused, not read as its last value.
#[test]
fn an_outcome_given_twice_is_malformed() {
    let body = br#"{"answers": [
        {"id": "intent", "distribution": {"billing": 0.5, "billing": 0.41, "bug": 0.04, "feature": 0.01, "other": 0.04}},
        {"id": "refund_owed", "distribution": {"true": 0.72, "false": 0.08, "null": 0.20}},
        {"id": "urgency", "distribution": {"1": 0.02, "2": 0.10, "3": 0.55, "4": 0.28, "5": 0.05}}]}"#;
    let twice = check_answer(&request(), body);
    assert_eq!(twice, Err(Malformed::OutcomeTwice { id: "intent".to_owned(), outcome: "billing".to_owned() }));
    assert!(matches!(check_answer(&request(), b"not json"), Err(Malformed::Body(_))));
}

#[test]
fn a_malformed_answer_is_told_to_the_caller_without_the_endpoints_own_words() {
    let request = request();
    let made_up = |body: Value| check_answer(&request, &answer_bytes(&body)).unwrap_err();
    let mut answer = example(1);
    answer["answers"][0]["distribution"]["SECRET-OUTCOME"] = json!(0.0);
    let undeclared = made_up(answer);
    assert!(undeclared.to_string().contains("SECRET-OUTCOME"), "the log's whole error");
    assert_eq!(undeclared.safe_reason(), "question `intent`: an outcome that was not declared");
    let mut answer = example(1);
    answer["answers"][0]["id"] = json!("SECRET-ID");
    assert_eq!(made_up(answer).safe_reason(), "an answer is given for a question that was not asked");
    let body = check_answer(&request, b"SECRET-BODY").unwrap_err();
    assert_eq!(body.safe_reason(), "the answer is not the decision wire's JSON");
    let mut answer = example(1);
    answer["answers"][2]["distribution"]["3"] = json!(0.65);
    let sum = made_up(answer);
    assert_eq!(sum.safe_reason(), sum.to_string(), "the request's own terms are said as they are");
}
