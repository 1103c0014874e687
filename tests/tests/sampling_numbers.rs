//! Sampling numbers cross the component boundary as the caller wrote them
//! (weir:provider 0.5.0 carries `temperature` as an `f64`), through the real
//! gateway over loopback, real components in its providers folder and a fake
//! upstream that keeps the bytes it received:
//!
//! - the Python template (componentize-py) and the JavaScript template
//!   (componentize-js) each write the number they are given, so the
//!   caller's 0.3 reaching the upstream as the text `0.3` is the 0.3 they got;
//! - the same Rust test component built against 0.5.0 sends 0.3, and built
//!   against the frozen 0.4.0 (its `call-params` converted by the host) sends
//!   the `f32` such a component always got, 0.30000001192092896.

// Test code: a failed step should stop the test with its message.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;

use serde_json::{Value, json};
use weir_tests::{FakeUpstream, Gateway};

/// A gateway serving entry `acme` through the component at `component`
/// (dropped into its providers folder as an untrusted file) for key `key`.
async fn gateway(component: &Path, key: &str, upstream: &FakeUpstream) -> (Gateway, tempfile::TempDir) {
    weir_tests::gateway::precompile(component);
    let folder = tempfile::tempdir().unwrap();
    std::fs::copy(component, folder.path().join("component.wasm")).unwrap();
    let config = format!(
        "[[model]]\nid = \"acme\"\nprovider = \"{key}\"\nendpoint = \"{}\"\ncredential = \"acme-api-key\"\n\
         max_output_tokens = 100\ncontext_window = 1000\noutput_tokens = 10\n",
        upstream.base_url()
    );
    (Gateway::start_with(&config, &[], Some(folder.path())).await, folder)
}

/// A chat completion with `temperature: 0.3` through the gateway; returns the
/// answer's text.
async fn call_with_point_three(gateway: &Gateway) -> String {
    let response = reqwest::Client::new()
        .post(gateway.url("/v1/chat/completions"))
        .json(&json!({"model": "acme", "temperature": 0.3, "messages": [{"role": "user", "content": "hi"}]}))
        .send()
        .await
        .unwrap();
    let status = response.status();
    let answer: Value = response.json().await.unwrap();
    assert_eq!(status, 200, "{answer}");
    answer["choices"][0]["message"]["content"].as_str().unwrap_or_default().to_owned()
}

/// The one request `upstream` received, as its bytes and as JSON.
fn received(upstream: &FakeUpstream) -> (String, Value) {
    let received = upstream.received();
    assert_eq!(received.len(), 1, "{received:?}");
    (String::from_utf8(received[0].body.to_vec()).unwrap(), received[0].json())
}

async fn a_template_sends_the_callers_number(component: &Path, key: &str) {
    let upstream = FakeUpstream::start().await;
    upstream.push(weir_tests::openai_wire::completion("Cool and calm."));
    let (gateway, _folder) = gateway(component, key, &upstream).await;
    let text = call_with_point_three(&gateway).await;
    assert_eq!(text, "Cool and calm.");
    let (bytes, body) = received(&upstream);
    assert_eq!(body["temperature"], json!(0.3), "{key}: {bytes}");
    assert_eq!(body["temperature"].as_f64(), Some(0.3), "{key}: exactly the f64 0.3");
    assert!(!bytes.contains("0.30000001"), "{key}: no f32 widening on the wire: {bytes}");
    assert!(bytes.contains("\"temperature\": 0.3") || bytes.contains("\"temperature\":0.3"), "{key}: {bytes}");
}

#[tokio::test]
async fn the_python_template_receives_and_sends_the_callers_point_three() {
    a_template_sends_the_callers_number(Path::new(env!("WEIR_TEMPLATE_PY_WASM")), "template-py").await;
}

#[tokio::test]
async fn the_javascript_template_receives_and_sends_the_callers_point_three() {
    a_template_sends_the_callers_number(Path::new(env!("WEIR_TEMPLATE_JS_WASM")), "template-js").await;
}

/// The versioned test component speaks `POST /complete` and answers from
/// `{"text", "input", "output"}`: built against 0.5.0 it sends the caller's
/// 0.3; against 0.4.0 the host converts `call-params` and it sends the `f32`.
#[tokio::test]
async fn a_0_4_0_component_still_gets_its_f32_and_a_0_5_0_one_the_callers_number() {
    for (component, sent) in
        [(env!("WEIR_CHAT_0_5_WASM"), json!(0.3)), (env!("WEIR_CHAT_0_4_WASM"), json!(f64::from(0.3_f32)))]
    {
        let upstream = FakeUpstream::start().await;
        upstream.push(weir_tests::openai_wire::json_response(200, &json!({"text": "ok", "input": 3, "output": 1})));
        let (gateway, _folder) = gateway(Path::new(component), "versioned", &upstream).await;
        let text = call_with_point_three(&gateway).await;
        assert_eq!(text, "ok");
        let (bytes, body) = received(&upstream);
        assert_eq!(body["temperature"], sent, "{component}: {bytes}");
        let f32_text = bytes.contains("\"temperature\":0.30000001192092896");
        assert_eq!(f32_text, component.contains("0-4"), "{component}: {bytes}");
        assert_eq!((body["model"].clone(), body["prompt"].clone()), (json!("acme"), json!("hi")));
    }
}
