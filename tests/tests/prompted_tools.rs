//! Tools for a model without native tool calling, through the real gateway: an
//! `openai-compatible` entry with `native_tools = false` in front of the fake OpenAI
//! upstream. The upstream must see no `tools` (they are described in the system prompt)
//! and earlier calls and results as text; the caller must see the same tool-call shape
//! as from a native model, through both ingress dialects and when streaming.

// Test code: a failed step should stop the test with its message.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use serde_json::{Value, json};
use weir_tests::fake_upstream::content_text;
use weir_tests::openai_wire::completion;
use weir_tests::{FakeUpstream, Gateway};

const CALL_JSON: &str = r#"{"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]}"#;

fn config(upstream: &FakeUpstream) -> String {
    format!(
        "read_timeout_secs = 5\n\n[[model]]\nid = \"plain-llm\"\nprovider = \"openai-compatible\"\n\
         endpoint = \"{}\"\nmax_output_tokens = 4000\ncontext_window = 32000\noutput_tokens = 200\n\
         max_retries = 0\nnative_tools = false\n",
        upstream.base_url()
    )
}

fn weather_tool() -> Value {
    json!({"type": "function", "function": {"name": "get_weather", "description": "Current weather in a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}})
}

async fn post(gateway: &Gateway, path: &str, body: &Value) -> (u16, String) {
    let response = reqwest::Client::new().post(gateway.url(path)).json(body).send().await.unwrap();
    (response.status().as_u16(), response.text().await.unwrap())
}

fn parse(body: &str) -> Value {
    serde_json::from_str(body).unwrap_or_else(|e| panic!("answer is not JSON ({e}): {body}"))
}

/// The system text the upstream received (all system messages joined).
fn system_text(request: &Value) -> String {
    request["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|message| message["role"] == "system")
        .map(|message| content_text(&message["content"]))
        .collect()
}

#[tokio::test]
async fn a_json_reply_becomes_a_tool_call_and_the_upstream_sees_no_tools() {
    let upstream = FakeUpstream::start().await;
    upstream.push(completion(CALL_JSON));
    let gateway = Gateway::start(&config(&upstream)).await;

    let request = json!({"model": "plain-llm", "tools": [weather_tool()],
        "messages": [{"role": "user", "content": "Weather in Paris?"}]});
    let (status, body) = post(&gateway, "/v1/chat/completions", &request).await;
    assert_eq!(status, 200, "{body}");
    let choice = &parse(&body)["choices"][0];
    assert_eq!(choice["finish_reason"], "tool_calls", "{body}");
    let call = &choice["message"]["tool_calls"][0];
    assert_eq!(call["function"]["name"], "get_weather");
    let arguments: Value = serde_json::from_str(call["function"]["arguments"].as_str().unwrap()).unwrap();
    assert_eq!(arguments, json!({"city": "Paris"}));
    assert!(choice["message"]["content"].is_null() || choice["message"]["content"] == "", "{body}");

    let sent = upstream.received()[0].json();
    assert!(sent.get("tools").is_none() && sent.get("tool_choice").is_none(), "{sent}");
    let system = system_text(&sent);
    assert!(system.contains("get_weather: Current weather in a city"), "{system}");
    assert!(system.contains("\"tool_calls\""), "the protocol is explained: {system}");
}

#[tokio::test]
async fn the_tool_round_trip_is_sent_as_text_and_an_answer_reply_is_plain_text() {
    let upstream = FakeUpstream::start().await;
    upstream.push(completion(r#"{"answer": "It is 18C in Paris."}"#));
    let gateway = Gateway::start(&config(&upstream)).await;

    let request = json!({"model": "plain-llm", "tools": [weather_tool()], "messages": [
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
            "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "18C, sunny"}
    ]});
    let (status, body) = post(&gateway, "/v1/chat/completions", &request).await;
    assert_eq!(status, 200, "{body}");
    let choice = &parse(&body)["choices"][0];
    assert_eq!(choice["message"]["content"], "It is 18C in Paris.");
    assert_eq!(choice["finish_reason"], "stop");

    let sent = upstream.received()[0].json();
    let messages = sent["messages"].as_array().unwrap();
    assert!(messages.iter().all(|m| m["role"] != "tool" && m.get("tool_calls").is_none()), "{sent}");
    let texts: Vec<String> = messages.iter().map(|m| content_text(&m["content"])).collect();
    assert!(texts.iter().any(|t| t.contains("\"get_weather\"") && t.contains("Paris")), "{texts:?}");
    assert!(
        texts.iter().any(|t| t.contains("The tool call `call_1` returned:") && t.contains("18C, sunny")),
        "{texts:?}"
    );
}

#[tokio::test]
async fn a_streamed_request_gets_the_call_as_chunks() {
    let upstream = FakeUpstream::start().await;
    upstream.push(completion(CALL_JSON));
    let gateway = Gateway::start(&config(&upstream)).await;

    let request = json!({"model": "plain-llm", "stream": true, "tools": [weather_tool()],
        "messages": [{"role": "user", "content": "Weather in Paris?"}]});
    let (status, body) = post(&gateway, "/v1/chat/completions", &request).await;
    assert_eq!(status, 200, "{body}");
    let events: Vec<Value> = body
        .lines()
        .filter_map(|line| line.strip_prefix("data: "))
        .filter(|data| *data != "[DONE]")
        .map(|data| serde_json::from_str(data).unwrap())
        .collect();
    let name = events.iter().find_map(|e| e["choices"][0]["delta"]["tool_calls"][0]["function"]["name"].as_str());
    assert_eq!(name, Some("get_weather"), "{body}");
    assert!(events.iter().any(|e| e["choices"][0]["finish_reason"] == "tool_calls"), "{body}");
    assert!(!body.contains("\\\"tool_calls\\\""), "the protocol JSON never reaches the caller: {body}");
    let sent = upstream.received()[0].json();
    assert_ne!(sent["stream"], json!(true), "the answer is taken whole, then replayed: {sent}");
}

#[tokio::test]
async fn the_anthropic_ingress_sees_the_same_tool_use_block() {
    let upstream = FakeUpstream::start().await;
    upstream.push(completion(CALL_JSON));
    let gateway = Gateway::start(&config(&upstream)).await;

    let request = json!({"model": "plain-llm", "max_tokens": 200,
        "tools": [{"name": "get_weather", "description": "Current weather in a city",
                   "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}],
        "messages": [{"role": "user", "content": "Weather in Paris?"}]});
    let (status, body) = post(&gateway, "/v1/messages", &request).await;
    assert_eq!(status, 200, "{body}");
    let message = parse(&body);
    assert_eq!(message["stop_reason"], "tool_use", "{body}");
    let block = message["content"].as_array().unwrap().iter().find(|b| b["type"] == "tool_use").unwrap();
    assert_eq!(block["name"], "get_weather");
    assert_eq!(block["input"], json!({"city": "Paris"}));
}
