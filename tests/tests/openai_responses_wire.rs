//! The `openai-responses` provider key: the OpenAI component's Responses-API wire,
//! through the real gateway to a fake upstream speaking it. Whatever door a call
//! comes in by, the upstream receives `POST /v1/responses` with `store: false`, and a
//! reasoning item's `id` and `encrypted_content` come back to it on the next turn.

// Test code: a failed step should stop the test with its message.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use serde_json::{Value, json};
use weir_tests::anthropic_wire::sse_events;
use weir_tests::responses_wire::{
    self, function_call_item, message_item, reasoning_item, response, stream_events, usage,
};
use weir_tests::{FakeUpstream, Gateway, openai_wire};

fn config(upstream: &FakeUpstream) -> String {
    format!(
        r#"
read_timeout_secs = 5

[[model]]
id = "gpt5"
provider = "openai-responses"
wire_id = "gpt-5"
endpoint = "{url}"
credential = "weir-test-key"
max_output_tokens = 8000
output_tokens = 1000
context_window = 400000
max_retries = 0
reasoning = "effort"

[ledger]
path = "ledger.db"
"#,
        url = upstream.base_url()
    )
}

async fn gateway(upstream: &FakeUpstream) -> Gateway {
    Gateway::start_with(&config(upstream), &[("WEIR_TEST_KEY", "sk-upstream-0123456789")], None).await
}

#[tokio::test]
async fn a_chat_completion_goes_out_on_the_responses_wire_and_comes_back_as_chat() {
    let upstream = FakeUpstream::start().await;
    upstream.push(response(
        vec![reasoning_item("rs_1", "enc-1"), message_item("msg_1", "Paris.")],
        usage(120, 40, 100, 30),
    ));
    let gateway = gateway(&upstream).await;

    let body = json!({"model": "gpt5", "messages": [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Capital of France?"}]});
    let posted = gateway.post_json("/v1/chat/completions", &body, &[]).await;
    assert_eq!(posted.status, 200, "{:?}", posted.body);
    let answer = posted.body;
    assert_eq!(answer["choices"][0]["message"]["content"], "Paris.");
    assert_eq!(answer["usage"]["prompt_tokens"], 120, "{answer}");
    assert_eq!(answer["usage"]["prompt_tokens_details"]["cached_tokens"], 100);
    assert_eq!(answer["usage"]["completion_tokens_details"]["reasoning_tokens"], 30);

    let received = upstream.received();
    assert_eq!(received[0].path, "/v1/responses");
    assert_eq!(received[0].header("authorization"), Some("Bearer sk-upstream-0123456789"));
    let sent = received[0].json();
    assert_eq!(sent["model"], "gpt-5");
    assert_eq!(sent["instructions"], "Be brief.");
    assert_eq!(sent["store"], false);
    assert_eq!(sent["max_output_tokens"], 1000);
    assert_eq!(sent["reasoning"], json!({"effort": "medium"}), "the default effort");
    assert_eq!(sent["include"], json!(["reasoning.encrypted_content"]));
    assert_eq!(
        sent["input"],
        json!([{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Capital of France?"}]}])
    );
}

/// Posts `body` to `path` with `headers`; returns the status and the body text.
async fn post(gateway: &Gateway, path: &str, body: &Value, headers: &[(&str, &str)]) -> (u16, String) {
    let mut request = reqwest::Client::new().post(gateway.url(path)).json(body);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    (status, response.text().await.unwrap())
}

async fn messages(gateway: &Gateway, body: &Value) -> (u16, String) {
    post(gateway, "/v1/messages", body, &[("anthropic-version", "2023-06-01")]).await
}

#[tokio::test]
async fn a_reasoning_item_returned_in_a_stream_goes_back_whole_on_the_next_turn() {
    let upstream = FakeUpstream::start().await;
    let call = function_call_item("call_1", "get_weather", r#"{"city":"Paris"}"#);
    upstream.push(responses_wire::stream(stream_events(
        &[reasoning_item("rs_1", "enc-secret-1"), call],
        usage(50, 20, 0, 12),
    )));
    upstream.push(response(vec![message_item("msg_2", "18C in Paris.")], usage(80, 10, 0, 0)));
    let gateway = gateway(&upstream).await;
    let tools = json!([{"name": "get_weather", "description": "Weather", "input_schema": {"type": "object",
        "properties": {"city": {"type": "string"}}}}]);

    let first = json!({"model": "gpt5", "max_tokens": 1000, "stream": true, "tools": tools,
        "messages": [{"role": "user", "content": "Weather in Paris?"}]});
    let (status, text) = messages(&gateway, &first).await;
    assert_eq!(status, 200, "{text}");
    let events = sse_events(&text);
    let signature: String = events
        .iter()
        .filter(|(name, event)| name == "content_block_delta" && event["delta"]["type"] == "signature_delta")
        .filter_map(|(_, event)| event["delta"]["signature"].as_str())
        .collect();
    assert!(signature.contains("enc-secret-1"), "{text}");
    let stop = events.iter().find(|(name, _)| name == "message_delta").unwrap();
    assert_eq!(stop.1["delta"]["stop_reason"], "tool_use");

    let second = json!({"model": "gpt5", "max_tokens": 1000, "tools": tools, "messages": [
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "", "signature": signature},
            {"type": "tool_use", "id": "call_1", "name": "get_weather", "input": {"city": "Paris"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "call_1", "content": "18C"}]}]});
    let (status, text) = messages(&gateway, &second).await;
    assert_eq!(status, 200, "{text}");
    assert_eq!(serde_json::from_str::<Value>(&text).unwrap()["content"][0]["text"], "18C in Paris.");

    let sent = upstream.received()[1].json();
    assert_eq!(sent["stream"], Value::Null, "a whole answer is not streamed");
    assert_eq!(
        sent["input"],
        json!([
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Weather in Paris?"}]},
            {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "enc-secret-1"},
            {"type": "function_call", "call_id": "call_1", "name": "get_weather", "arguments": "{\"city\":\"Paris\"}"},
            {"type": "function_call_output", "call_id": "call_1", "output": "18C"},
        ])
    );
}

#[tokio::test]
async fn upstream_failures_on_the_responses_wire_keep_their_categories() {
    let upstream = FakeUpstream::start().await;
    upstream.push(openai_wire::rate_limited(1));
    let failed = json!({"type": "response.failed", "response": {"id": "resp_f", "status": "failed",
        "error": {"code": "server_error", "message": "The server had an error (internal detail 7781)"}}});
    upstream.push(responses_wire::stream(vec![responses_wire::event(1, failed)]));
    let gateway = gateway(&upstream).await;
    let ask = json!({"model": "gpt5", "messages": [{"role": "user", "content": "Hi"}]});

    let posted = gateway.post_json("/v1/chat/completions", &ask, &[]).await;
    assert_eq!(posted.status, 429, "{:?}", posted.body);
    assert_eq!(posted.body["error"]["type"], "rate_limited");

    let mut streamed = ask.clone();
    streamed["stream"] = json!(true);
    // `x-weir-stream-replay: false`: the in-band failure is the answer, not a replay.
    let (status, text) = post(&gateway, "/v1/chat/completions", &streamed, &[("x-weir-stream-replay", "false")]).await;
    assert!(status >= 500, "{status} {text}");
    assert!(!text.contains("internal detail 7781"), "raw upstream text never reaches the caller: {text}");
}

/// A custom tool (Codex's `apply_patch`, with its grammar) on the Responses route: an
/// `openai-responses` entry sends it as OpenAI's own `custom` tool with the grammar and
/// the caller's `prompt_cache_key` scoped to its member, streams the call back as a `custom_tool_call`, and
/// sends the call and its output back in their own form on the next turn; a Chat
/// Completions entry gets the tool described as a function, and only
/// `prompt_cache_key` is named as dropped (the tool lost nothing).
#[tokio::test]
async fn a_custom_tool_goes_to_openai_as_its_own_and_elsewhere_as_a_function() {
    let upstream = FakeUpstream::start().await;
    let patch = "*** Begin Patch\n*** Update File: a.txt\n-old\n+new \"quoted\"\n*** End Patch";
    upstream.push(responses_wire::stream(stream_events(
        &[responses_wire::custom_tool_call_item("call_p", "apply_patch", patch)],
        usage(50, 20, 0, 0),
    )));
    upstream.push(response(vec![message_item("msg_2", "Patched.")], usage(80, 5, 0, 0)));
    upstream.push(openai_wire::completion("Patched."));
    let chat_entry = "\n[[model]]\nid = \"gpt5-chat\"\nprovider = \"openai\"\nwire_id = \"gpt-5\"\n\
                      endpoint = \"{url}\"\ncredential = \"weir-test-key\"\nmax_output_tokens = 8000\n\
                      output_tokens = 1000\ncontext_window = 400000\nmax_retries = 0\n";
    let config = config(&upstream) + &chat_entry.replace("{url}", &upstream.base_url());
    let gateway = Gateway::start_with(&config, &[("WEIR_TEST_KEY", "sk-upstream-0123456789")], None).await;
    let grammar = json!({"type": "grammar", "syntax": "lark", "definition": "start: begin_patch hunk+ end_patch"});
    let tools = json!([
        {"type": "custom", "name": "apply_patch", "description": "Edit files.", "format": grammar},
        {"type": "function", "name": "shell", "parameters": {"type": "object", "properties": {}}}
    ]);

    let first = json!({"model": "gpt5", "stream": true, "store": false, "tools": tools,
        "prompt_cache_key": "thread-9", "input": "Change old to new in a.txt"});
    let (status, headers, body) = post_with_headers(&gateway, "/v1/responses", &first).await;
    assert_eq!(status, 200, "{body}");
    assert!(headers.get("x-weir-dropped-fields").is_none(), "{headers:?}");
    let sent = upstream.received()[0].json();
    assert_eq!(
        sent["tools"][0],
        json!({"type": "custom", "name": "apply_patch", "description": "Edit files.", "format": grammar})
    );
    assert_eq!(sent["tools"][1]["type"], "function");
    let key = sent["prompt_cache_key"].as_str().unwrap();
    assert!(key.starts_with("weir-") && !key.contains("thread-9"), "scoped to the member, not as written: {key}");
    let events = sse_events(&body);
    let done = events
        .iter()
        .find(|(_, data)| data["type"] == "response.output_item.done" && data["item"]["type"] == "custom_tool_call")
        .unwrap_or_else(|| panic!("no custom_tool_call in:\n{body}"));
    assert_eq!(done.1["item"]["name"], "apply_patch");
    assert_eq!(done.1["item"]["input"], patch, "the text whole, through the stream's pieces");
    let call_id = done.1["item"]["call_id"].as_str().unwrap().to_owned();

    let second = json!({"model": "gpt5", "store": false, "tools": tools, "input": [
        {"type": "message", "role": "user", "content": "Change old to new in a.txt"},
        {"type": "custom_tool_call", "call_id": call_id, "name": "apply_patch", "input": patch},
        {"type": "custom_tool_call_output", "call_id": call_id, "output": "Success."}
    ]});
    let (status, _, body) = post_with_headers(&gateway, "/v1/responses", &second).await;
    assert_eq!(status, 200, "{body}");
    let sent = upstream.received()[1].json();
    let input = sent["input"].as_array().unwrap();
    assert_eq!(
        input[1],
        json!({"type": "custom_tool_call", "call_id": call_id, "name": "apply_patch", "input": patch})
    );
    assert_eq!(input[2], json!({"type": "custom_tool_call_output", "call_id": call_id, "output": "Success."}));

    let mut elsewhere = second.clone();
    elsewhere["model"] = json!("gpt5-chat");
    elsewhere["prompt_cache_key"] = json!("thread-9");
    let (status, headers, body) = post_with_headers(&gateway, "/v1/responses", &elsewhere).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(headers["x-weir-dropped-fields"], "prompt_cache_key");
    let sent = upstream.received()[2].json();
    let described = &sent["tools"][0]["function"];
    assert_eq!(described["name"], "apply_patch");
    assert!(described["description"].as_str().unwrap().contains("start: begin_patch hunk+ end_patch"), "{sent}");
    assert!(sent.get("prompt_cache_key").is_none(), "{sent}");
    let records = weir_tests::closed_records(&gateway.dir().join("ledger.db"));
    let notes: Vec<&Value> = records.iter().map(|record| &record["notes"]).collect();
    assert_eq!(notes[2][0], "field_dropped:prompt_cache_key", "{records:?}");
    assert!(notes[0].is_null() && notes[1].is_null(), "nothing dropped on the Responses entry: {records:?}");
}

async fn post_with_headers(gateway: &Gateway, path: &str, body: &Value) -> (u16, reqwest::header::HeaderMap, String) {
    let response = reqwest::Client::new().post(gateway.url(path)).json(body).send().await.unwrap();
    let (status, headers) = (response.status().as_u16(), response.headers().clone());
    (status, headers, response.text().await.unwrap())
}

/// The namespace tool of this test's requests: a function and a custom tool under `crm`.
fn crm_namespace() -> Value {
    json!({"type": "namespace", "name": "crm", "description": "The customer records.", "tools": [
        {"type": "function", "name": "lookup", "description": "Find a customer.",
         "parameters": {"type": "object", "properties": {"id": {"type": "integer"}}}},
        {"type": "custom", "name": "note", "description": "Write a note."}
    ]})
}

/// A namespace (Codex's MCP tools are sent as one) on the Responses route: an
/// `openai-responses` entry sends it as OpenAI's own `namespace` tool, the history's
/// calls to its members as `function_call` / `custom_tool_call` with `namespace`, and
/// the model's namespaced calls (streamed and whole) come back to the caller with the
/// member's `name` and `namespace`, as they do from every provider. A forced choice of a
/// member (OpenAI's `tool_choice` has no `namespace`) sends that namespace flattened. A
/// Chat Completions entry gets the members as functions named `crm__<name>`, and nothing
/// is named as dropped anywhere.
#[tokio::test]
async fn a_namespace_goes_to_openai_as_its_own_and_elsewhere_as_functions() {
    let upstream = FakeUpstream::start().await;
    let mut streamed_call = function_call_item("call_l", "lookup", r#"{"id":7}"#);
    streamed_call["namespace"] = json!("crm");
    upstream.push(responses_wire::stream(stream_events(&[streamed_call], usage(50, 20, 0, 0))));
    let mut whole_call = responses_wire::custom_tool_call_item("call_n", "note", "Customer 7 found.");
    whole_call["namespace"] = json!("crm");
    upstream.push(response(vec![whole_call], usage(80, 5, 0, 0)));
    upstream.push(response(vec![function_call_item("call_f", "crm__lookup", r#"{"id":8}"#)], usage(80, 5, 0, 0)));
    upstream.push(openai_wire::completion("Done."));
    let chat_entry = "\n[[model]]\nid = \"gpt5-chat\"\nprovider = \"openai\"\nwire_id = \"gpt-5\"\n\
                      endpoint = \"{url}\"\ncredential = \"weir-test-key\"\nmax_output_tokens = 8000\n\
                      output_tokens = 1000\ncontext_window = 400000\nmax_retries = 0\n";
    let config = config(&upstream) + &chat_entry.replace("{url}", &upstream.base_url());
    let gateway = Gateway::start_with(&config, &[("WEIR_TEST_KEY", "sk-upstream-0123456789")], None).await;
    let tools = json!([{"type": "function", "name": "shell", "parameters": {"type": "object", "properties": {}}},
                       crm_namespace()]);

    // Turn 1, streamed: the namespace as OpenAI's own; the call back under its namespace.
    let first = json!({"model": "gpt5", "stream": true, "store": false, "tools": tools, "input": "Find customer 7"});
    let (status, headers, body) = post_with_headers(&gateway, "/v1/responses", &first).await;
    assert_eq!(status, 200, "{body}");
    assert!(headers.get("x-weir-dropped-fields").is_none(), "{headers:?}");
    let sent = upstream.received()[0].json();
    assert_eq!(
        sent["tools"],
        json!([
            {"type": "function", "name": "shell", "parameters": {"type": "object", "properties": {}}, "strict": false},
            {"type": "namespace", "name": "crm", "description": "The customer records.", "tools": [
                {"type": "function", "name": "lookup", "description": "Find a customer.",
                 "parameters": {"type": "object", "properties": {"id": {"type": "integer"}}}, "strict": false},
                {"type": "custom", "name": "note", "description": "Write a note."}
            ]}
        ])
    );
    let events = sse_events(&body);
    let done = events
        .iter()
        .find(|(_, data)| data["type"] == "response.output_item.done" && data["item"]["type"] == "function_call")
        .unwrap_or_else(|| panic!("no function_call in:\n{body}"));
    assert_eq!((&done.1["item"]["name"], &done.1["item"]["namespace"]), (&json!("lookup"), &json!("crm")), "{body}");
    assert_eq!(done.1["item"]["arguments"], r#"{"id":7}"#);

    // Turn 2, whole: the history's call under its namespace; a namespaced custom call back.
    let history = json!([
        {"type": "message", "role": "user", "content": "Find customer 7"},
        {"type": "function_call", "call_id": "call_l", "name": "lookup", "namespace": "crm", "arguments": "{\"id\":7}"},
        {"type": "function_call_output", "call_id": "call_l", "output": "Customer 7: Ada."}
    ]);
    let second = json!({"model": "gpt5", "store": false, "tools": tools, "input": history});
    let (status, headers, body) = post_with_headers(&gateway, "/v1/responses", &second).await;
    assert_eq!(status, 200, "{body}");
    assert!(headers.get("x-weir-dropped-fields").is_none(), "{headers:?}");
    let sent = upstream.received()[1].json();
    assert_eq!(
        sent["input"][1],
        json!({"type": "function_call", "call_id": "call_l", "name": "lookup", "namespace": "crm",
               "arguments": "{\"id\":7}"})
    );
    assert_eq!(
        sent["input"][2],
        json!({"type": "function_call_output", "call_id": "call_l", "output": "Customer 7: Ada."})
    );
    let answer: Value = serde_json::from_str(&body).unwrap();
    let call = &answer["output"][0];
    assert_eq!(call["type"], "custom_tool_call", "{answer}");
    assert_eq!(
        (&call["name"], &call["namespace"], &call["input"]),
        (&json!("note"), &json!("crm"), &json!("Customer 7 found."))
    );

    // Turn 3: a member forced; OpenAI is sent that namespace flattened and the choice of the function.
    let mut forced = second.clone();
    forced["tool_choice"] = json!({"type": "function", "name": "lookup", "namespace": "crm"});
    let (status, _, body) = post_with_headers(&gateway, "/v1/responses", &forced).await;
    assert_eq!(status, 200, "{body}");
    let sent = upstream.received()[2].json();
    let names: Vec<&str> =
        sent["tools"].as_array().unwrap().iter().map(|tool| tool["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["shell", "crm__lookup", "crm__note"]);
    assert_eq!(sent["tool_choice"], json!({"type": "function", "name": "crm__lookup"}));
    assert_eq!(sent["input"][1]["name"], "crm__lookup", "the history as the tools are: {sent}");
    let answer: Value = serde_json::from_str(&body).unwrap();
    assert_eq!((&answer["output"][0]["name"], &answer["output"][0]["namespace"]), (&json!("lookup"), &json!("crm")));

    // Elsewhere: functions named `crm__<name>`, and the namespace is not named as dropped.
    let mut elsewhere = second.clone();
    elsewhere["model"] = json!("gpt5-chat");
    let (status, headers, body) = post_with_headers(&gateway, "/v1/responses", &elsewhere).await;
    assert_eq!(status, 200, "{body}");
    assert!(headers.get("x-weir-dropped-fields").is_none(), "{headers:?}");
    let sent = upstream.received()[3].json();
    let names: Vec<&str> =
        sent["tools"].as_array().unwrap().iter().map(|tool| tool["function"]["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["shell", "crm__lookup", "crm__note"]);
    let call = sent["messages"].as_array().unwrap().iter().find(|m| m["tool_calls"].is_array()).unwrap();
    assert_eq!(call["tool_calls"][0]["function"]["name"], "crm__lookup");
    let records = weir_tests::closed_records(&gateway.dir().join("ledger.db"));
    assert_eq!(records.len(), 4, "{records:?}");
    let notes: Vec<&str> = records
        .iter()
        .flat_map(|record| record["notes"].as_array().into_iter().flatten())
        .filter_map(Value::as_str)
        .collect();
    assert!(!notes.iter().any(|note| note.contains("dropped")), "nothing dropped: {notes:?}");
}

/// What OpenAI answers a web search with: the search's call and the cited message.
fn searched_output() -> Vec<Value> {
    vec![
        json!({"type": "web_search_call", "id": "ws_01", "status": "completed",
               "action": {"type": "search", "query": "weir gateway"}}),
        json!({"type": "message", "id": "msg_01", "role": "assistant", "status": "completed", "content": [
            {"type": "output_text", "text": "Weir is an LLM gateway.", "annotations": [
                {"type": "url_citation", "url": "https://weir.example/", "title": "Weir", "start_index": 0, "end_index": 4}
            ]}
        ]}),
    ]
}

/// The official client's `stream_web_search` step against `gateway`'s `gpt5`.
async fn streamed_search(gateway: &Gateway) -> Value {
    let base = gateway.url("/v1");
    let run = move || weir_tests::python::run_responses_client(&base, "gpt5", "stream_web_search", &[]).remove(0);
    tokio::task::spawn_blocking(run).await.unwrap()
}

/// The typed events of [`searched_output`] as the Responses API streams them, replayed
/// or live alike.
const SEARCHED_EVENTS: [&str; 15] = [
    "response.created",
    "response.in_progress",
    "response.output_item.added",
    "response.web_search_call.in_progress",
    "response.web_search_call.searching",
    "response.web_search_call.completed",
    "response.output_item.done",
    "response.output_item.added",
    "response.content_part.added",
    "response.output_text.delta",
    "response.output_text.annotation.added",
    "response.output_text.done",
    "response.content_part.done",
    "response.output_item.done",
    "response.completed",
];

#[tokio::test]
async fn web_search_goes_to_openai_and_its_items_come_back_in_place_and_go_back_next_turn() {
    let upstream = FakeUpstream::start().await;
    let gateway = gateway(&upstream).await;
    upstream.push(response(searched_output(), usage(50, 20, 0, 0)));
    upstream.push(response(vec![message_item("msg_02", "Gateway.")], usage(80, 3, 0, 0)));
    let base = gateway.url("/v1");
    let lines =
        tokio::task::spawn_blocking(move || weir_tests::python::run_responses_client(&base, "gpt5", "web_search", &[]))
            .await
            .unwrap();
    let line = &lines[0];

    // What the upstream received: the hosted tool as the caller wrote it.
    let first = upstream.received()[0].json();
    assert_eq!(first["tools"], json!([{"type": "web_search"}]), "{first}");
    // What the client parsed: both items in place, the annotations with them.
    assert_eq!(line["items"], json!(searched_output()), "{line}");
    assert_eq!(line["output_text"], "Weir is an LLM gateway.");
    assert_eq!(line["dropped"], Value::Null, "nothing was dropped");
    assert_eq!(line["answer"], "Gateway.");
    // The next turn: the items the client sent back reach OpenAI as it wrote them.
    let second = upstream.received()[1].json();
    let input = second["input"].as_array().unwrap();
    assert_eq!(input.len(), 4, "{second}");
    assert_eq!(input[1], searched_output()[0], "{second}");
    assert_eq!(input[2], searched_output()[1], "{second}");
    assert_eq!(input[3]["role"], "user");

    // The ledger records the items in the provider's order.
    let records = weir_tests::closed_records(&gateway.dir().join("ledger.db"));
    assert_eq!(records.len(), 2);
    assert!(
        records[0]["notes"]
            .as_array()
            .is_none_or(|notes| notes.iter().all(|n| !n.as_str().unwrap().starts_with("tool_dropped")))
    );
}

#[tokio::test]
async fn a_streamed_web_search_is_replayed_with_its_typed_events_and_refused_elsewhere() {
    let upstream = FakeUpstream::start().await;
    let whole = format!("hosted_tool_streams = \"whole\"\n{}", config(&upstream));
    let gateway = Gateway::start_with(&whole, &[("WEIR_TEST_KEY", "sk-upstream-0123456789")], None).await;
    upstream.push(response(searched_output(), usage(50, 20, 0, 0)));
    let line = &streamed_search(&gateway).await;
    // Sent whole (`hosted_tool_streams = "whole"`), with the tool.
    let sent = upstream.received()[0].json();
    assert_eq!(sent["tools"], json!([{"type": "web_search"}]), "{sent}");
    assert_ne!(sent["stream"], json!(true));
    // What the client parsed: the items in place, from the typed events in order (the
    // stream helper adds its own `parsed: null` to a text part).
    let mut items = line["items"].clone();
    for part in items[1]["content"].as_array_mut().unwrap() {
        assert_eq!(part.as_object_mut().unwrap().remove("parsed"), Some(Value::Null));
    }
    assert_eq!(items, json!(searched_output()), "{line}");
    let events: Vec<(&str, u64)> = line["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|event| (event[0].as_str().unwrap(), event[1].as_u64().unwrap()))
        .collect();
    let kinds: Vec<&str> = events.iter().map(|(kind, _)| *kind).collect();
    assert_eq!(kinds, SEARCHED_EVENTS, "{line}");
    let numbers: Vec<u64> = events.iter().map(|(_, number)| *number).collect();
    assert_eq!(numbers, (0..numbers.len() as u64).collect::<Vec<_>>(), "sequence numbers count from 0");

    // A hosted tool's item in the history of a call to an entry that cannot read it is
    // refused, never forwarded.
    let other = FakeUpstream::start().await;
    let config = format!(
        "{}
[[model]]
id = \"gpt\"
provider = \"openai\"
wire_id = \"gpt-4.1\"
endpoint = \"{}\"
credential = \"weir-test-key\"
max_output_tokens = 8000
context_window = 100000
max_retries = 0
",
        config(&upstream),
        other.base_url()
    );
    let both = Gateway::start_with(&config, &[("WEIR_TEST_KEY", "sk-upstream-0123456789")], None).await;
    let body = json!({"model": "gpt", "input": [
        {"role": "user", "content": "What is Weir?"}, searched_output()[0], {"role": "user", "content": "Thanks."}
    ]});
    let (status, _, text) = post_with_headers(&both, "/v1/responses", &body).await;
    assert_eq!(status, 400, "{text}");
    assert!(text.contains("capability_mismatch") && text.contains("web_search_call"), "{text}");
    assert_eq!(other.request_count(), 0);
}

/// By default a streamed call with `web_search` streams live from OpenAI with its items
/// in place (the OpenAI component's `native-stream`): the official client reads the
/// `web_search_call`'s typed events, then the message's text and its annotation; the
/// record counts the search and notes no replay. The answer cache is not consulted for
/// such a call.
#[tokio::test]
async fn a_streamed_web_search_goes_live_with_its_items_in_place() {
    let upstream = FakeUpstream::start().await;
    let config = format!("{}\n[cache]\n", config(&upstream)).replace(
        "reasoning = \"effort\"\n",
        "reasoning = \"effort\"\ncache_ttl_secs = 60\ninput_price = 1.0\noutput_price = 1.0\nweb_search_price = 10.0\n",
    );
    let gateway = Gateway::start_with(&config, &[("WEIR_TEST_KEY", "sk-upstream-0123456789")], None).await;
    upstream.push(responses_wire::stream(stream_events(&searched_output(), usage(50, 20, 0, 0))));
    let line = &streamed_search(&gateway).await;
    let sent = upstream.received()[0].json();
    assert_eq!(sent["stream"], json!(true), "{sent}");
    assert_eq!(sent["tools"], json!([{"type": "web_search"}]), "{sent}");
    let kinds: Vec<&str> = line["events"].as_array().unwrap().iter().map(|event| event[0].as_str().unwrap()).collect();
    assert_eq!(kinds, SEARCHED_EVENTS, "{line}");
    let items = line["items"].as_array().unwrap();
    assert_eq!(items[0], searched_output()[0], "the hosted item as OpenAI wrote it: {line}");
    assert_eq!(items[1]["content"][0]["text"], "Weir is an LLM gateway.", "{line}");
    assert_eq!(items[1]["content"][0]["annotations"], searched_output()[1]["content"][0]["annotations"], "{line}");

    let body = json!({"model": "gpt5", "input": "What is Weir?", "tools": [{"type": "web_search"}], "stream": true});
    upstream.push(responses_wire::stream(stream_events(&searched_output(), usage(50, 20, 0, 0))));
    let (status, headers, text) = post_with_headers(&gateway, "/v1/responses", &body).await;
    assert_eq!(status, 200, "{text}");
    assert_eq!(headers.get("x-weir-cache").unwrap(), "bypass", "an entry that caches does not for this call");

    let records = weir_tests::closed_records(&gateway.dir().join("ledger.db"));
    let record = &records[0];
    assert_eq!(record["attempts"][0]["web_searches"], 1, "{record}");
    let cost = record["cost_usd"].as_f64().unwrap();
    assert!((cost - (70.0 / 1_000_000.0 + 0.01)).abs() < 1e-12, "the tokens and the search: {record}");
    let notes: Vec<&str> = record["notes"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
    assert!(!notes.contains(&"stream_replayed_whole") && !notes.contains(&"hosted_items_not_streamed"), "{notes:?}");
}

/// `tool_choice` forcing a hosted tool reaches OpenAI as its own `tool_choice`, with the
/// tool; on a Chat Completions entry (which cannot run it) the call is refused
/// `capability_mismatch` before anything is sent, not sent with the choice gone.
/// `allowed_tools` cuts the tools every provider is sent to the listed ones.
#[tokio::test]
async fn a_forced_hosted_tool_goes_to_openai_and_is_refused_elsewhere_and_allowed_tools_cut_the_tools() {
    let upstream = FakeUpstream::start().await;
    let chat_entry = "\n[[model]]\nid = \"gpt5-chat\"\nprovider = \"openai\"\nwire_id = \"gpt-5\"\n\
                      endpoint = \"{url}\"\ncredential = \"weir-test-key\"\nmax_output_tokens = 8000\n\
                      output_tokens = 1000\ncontext_window = 400000\nmax_retries = 0\n";
    let config = config(&upstream) + &chat_entry.replace("{url}", &upstream.base_url());
    let gateway = Gateway::start_with(&config, &[("WEIR_TEST_KEY", "sk-upstream-0123456789")], None).await;
    let search = json!({"type": "file_search", "vector_store_ids": ["vs_1"]});
    let shell = json!({"type": "function", "name": "shell", "parameters": {"type": "object", "properties": {}}});
    let mut forced = json!({"model": "gpt5", "store": false, "input": "Find the runbook",
                            "tools": [shell.clone(), search.clone()], "tool_choice": {"type": "file_search"}});

    upstream.push(response(vec![message_item("msg_01", "Found.")], usage(50, 3, 0, 0)));
    let (status, _, body) = post_with_headers(&gateway, "/v1/responses", &forced).await;
    assert_eq!(status, 200, "{body}");
    let sent = upstream.received()[0].json();
    assert_eq!(sent["tool_choice"], json!({"type": "file_search"}), "{sent}");
    assert_eq!(sent["tools"][1], search, "{sent}");
    assert!(sent.get("hosted_tool_choice").is_none(), "{sent}");

    forced["model"] = json!("gpt5-chat");
    let (status, _, body) = post_with_headers(&gateway, "/v1/responses", &forced).await;
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("capability_mismatch") && body.contains("`file_search`"), "{body}");
    assert_eq!(upstream.request_count(), 1, "nothing sent");

    let allowed = json!({"model": "gpt5-chat", "store": false, "input": "Run it",
        "tools": [shell, {"type": "function", "name": "deploy", "parameters": {"type": "object"}}, search],
        "tool_choice": {"type": "allowed_tools", "mode": "required", "tools": [{"type": "function", "name": "shell"}]}});
    upstream.push(openai_wire::completion("Done."));
    let (status, _, body) = post_with_headers(&gateway, "/v1/responses", &allowed).await;
    assert_eq!(status, 200, "{body}");
    let sent = upstream.received()[1].json();
    let names: Vec<&str> =
        sent["tools"].as_array().unwrap().iter().map(|t| t["function"]["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["shell"], "{sent}");
    assert_eq!(sent["tool_choice"], "required", "{sent}");
}
