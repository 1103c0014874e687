//! `POST /v1/responses` through the real `weir` binary, driven by the official `openai`
//! Python client (`responses.create`, `responses.stream`) and the `openai-agents` SDK
//! (`tests/python/responses_client.py`), in front of fake upstreams speaking OpenAI Chat
//! Completions and the Anthropic Messages API: what the client saw, what the upstream
//! received, and what the ledger recorded.

// Test code: a failed step should stop the test with its message.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use serde_json::{Value, json};
use weir_tests::anthropic_wire::{
    self, content_block_start, content_block_stop, empty_thinking_block, input_json_delta, message_delta,
    message_start, message_stop, signature_delta, streamed_tool_use_block, thinking_block, thinking_delta,
    tool_use_block, usage_json,
};
use weir_tests::python::run_responses_client;
use weir_tests::{FakeUpstream, Gateway, Scripted, closed_records, openai_wire};

const OPENAI_SECRET: &str = "sk-weir-test-secret-0123456789";
const ANTHROPIC_SECRET: &str = "sk-ant-weir-test-0123456789";

/// An OpenAI entry (`gpt`) and two Anthropic entries (`claude`, `claude-two`) on the
/// fakes, no retries, a ledger in the gateway's folder; `extra` is appended.
fn config(openai: &FakeUpstream, anthropic: &FakeUpstream, extra: &str) -> String {
    let claude = |id: &str| {
        format!(
            r#"
[[model]]
id = "{id}"
provider = "anthropic"
wire_id = "claude-sonnet-4-5"
endpoint = "http://{addr}"
credential = "weir-anthropic-key"
max_output_tokens = 8000
context_window = 200000
output_tokens = 1000
max_retries = 0
"#,
            addr = anthropic.addr()
        )
    };
    format!(
        r#"
read_timeout_secs = 5
{extra}

[[model]]
id = "gpt"
provider = "openai"
wire_id = "gpt-4.1"
endpoint = "{openai_url}"
credential = "weir-test-key"
max_output_tokens = 1000
context_window = 10000
output_tokens = 200
max_retries = 0
{claude}{claude_two}
[ledger]
path = "ledger.db"
"#,
        openai_url = openai.base_url(),
        claude = claude("claude"),
        claude_two = claude("claude-two"),
    )
}

struct Rig {
    openai: FakeUpstream,
    anthropic: FakeUpstream,
    gateway: Gateway,
}

impl Rig {
    async fn start(extra: &str) -> Rig {
        let openai = FakeUpstream::start().await;
        let anthropic = FakeUpstream::start().await;
        let env = [("WEIR_TEST_KEY", OPENAI_SECRET), ("WEIR_ANTHROPIC_KEY", ANTHROPIC_SECRET)];
        let gateway = Gateway::start_with(&config(&openai, &anthropic, extra), &env, None).await;
        Rig { openai, anthropic, gateway }
    }

    fn run(&self, model: &str, steps: &str) -> Vec<Value> {
        run_responses_client(&self.gateway.url("/v1"), model, steps, &[])
    }

    fn run_with(&self, model: &str, steps: &str, env: &[(&str, &str)]) -> Vec<Value> {
        run_responses_client(&self.gateway.url("/v1"), model, steps, env)
    }

    fn records(&self) -> Vec<Value> {
        closed_records(&self.gateway.dir().join("ledger.db"))
    }
}

fn output_types(response: &Value) -> Vec<String> {
    response["output"].as_array().unwrap().iter().map(|item| item["type"].as_str().unwrap().to_owned()).collect()
}

fn weather_call_message() -> Scripted {
    anthropic_wire::message(
        vec![
            thinking_block("The user wants Paris weather; call the tool.", "EqQBCkgIARABGAIiQLsig"),
            tool_use_block("toolu_01A", "get_weather", json!({"city": "Paris"})),
        ],
        "tool_use",
        usage_json(30, 25, 0, 0),
    )
}

#[tokio::test]
async fn whole_and_streamed_answers_reach_the_openai_client_and_the_ledger_says_responses() {
    let rig = Rig::start("").await;
    let lines = rig.run("gpt", "create,stream");

    let create = &lines[0];
    let response = &create["response"];
    assert_eq!(create["output_text"], "echo: What is the capital of France?");
    assert!(response["id"].as_str().unwrap().starts_with("resp_"), "{response}");
    assert_eq!(response["object"], "response");
    assert_eq!(response["status"], "completed");
    assert_eq!(response["model"], "gpt");
    assert_eq!(response["instructions"], "Answer briefly.");
    assert_eq!(output_types(response), ["message"]);
    assert_eq!(response["output"][0]["content"][0]["annotations"], json!([]));
    let usage = &response["usage"];
    assert!(usage["input_tokens"].as_u64().unwrap() > 0, "{usage}");
    assert_eq!(usage["input_tokens_details"]["cached_tokens"], 0);
    assert_eq!(usage["output_tokens_details"]["reasoning_tokens"], 0);
    assert_eq!(
        usage["total_tokens"].as_u64(),
        Some(usage["input_tokens"].as_u64().unwrap() + usage["output_tokens"].as_u64().unwrap())
    );

    let stream = &lines[1];
    assert_eq!(stream["output_text"], "echo: Count to three.");
    let types: Vec<&str> = stream["events"].as_array().unwrap().iter().map(|e| e["type"].as_str().unwrap()).collect();
    let deltas = types.iter().filter(|t| **t == "response.output_text.delta").count();
    assert!(deltas >= 2, "word-sized deltas: {types:?}");
    let mut expected =
        vec!["response.created", "response.in_progress", "response.output_item.added", "response.content_part.added"];
    expected.extend(std::iter::repeat_n("response.output_text.delta", deltas));
    expected.extend([
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]);
    assert_eq!(types, expected);
    let sequence: Vec<u64> =
        stream["events"].as_array().unwrap().iter().map(|e| e["sequence_number"].as_u64().unwrap()).collect();
    assert_eq!(sequence, (0..sequence.len() as u64).collect::<Vec<_>>());
    assert_eq!(stream["final"]["status"], "completed");
    assert!(stream["final"]["usage"]["output_tokens"].as_u64().unwrap() > 0);

    let sent = rig.openai.received();
    assert_eq!(sent[0].path, "/v1/chat/completions");
    assert_eq!(sent[0].json()["messages"][0], json!({"role": "system", "content": "Answer briefly."}));
    assert_eq!(sent[1].json()["stream"], true);

    let records = rig.records();
    assert_eq!(records.len(), 2, "{records:?}");
    assert!(records.iter().all(|r| r["route"] == "responses" && r["category"] == "ok"), "{records:?}");
    let call_id = records[0]["call_id"].as_str().unwrap().replace('-', "");
    assert_eq!(response["id"], format!("resp_{call_id}"), "the response id names the call");
}

#[tokio::test]
async fn a_function_tool_round_trip_and_a_json_schema_answer() {
    let rig = Rig::start("").await;
    rig.openai.push(openai_wire::tool_call_completion(&[("call_abc", "get_weather", r#"{"city":"Paris"}"#)]));
    let lines = rig.run("gpt", "tools");
    let first = &lines[0]["first"];
    assert_eq!(output_types(first), ["function_call"]);
    let call = &first["output"][0];
    assert_eq!((&call["call_id"], &call["name"]), (&json!("call_abc"), &json!("get_weather")));
    assert_eq!(serde_json::from_str::<Value>(call["arguments"].as_str().unwrap()).unwrap(), json!({"city": "Paris"}));
    assert_eq!(lines[0]["output_text"], "echo: Weather in Paris?");

    let sent = rig.openai.received();
    assert_eq!(sent[0].json()["tools"][0]["function"]["name"], "get_weather");
    let messages = sent[1].json()["messages"].clone();
    assert_eq!(messages[1]["role"], "assistant", "{messages}");
    assert_eq!(messages[1]["tool_calls"][0]["id"], "call_abc");
    assert_eq!(messages[2]["role"], "tool");
    assert_eq!(messages[2]["tool_call_id"], "call_abc");
    assert!(messages[2]["content"].to_string().contains("18C and sunny"), "{messages}");

    rig.openai.push(openai_wire::completion(r#"{"city":"Paris","country":"France"}"#));
    let lines = rig.run("gpt", "json_schema");
    assert_eq!(lines[0]["parsed"], json!({"city": "Paris", "country": "France"}));
    assert_eq!(lines[0]["response"]["text"]["format"]["name"], "capital");
    let sent = rig.openai.received();
    let request = sent.last().unwrap().json();
    assert!(request.to_string().contains("\"country\""), "the schema reached the upstream: {request}");
}

#[tokio::test]
async fn custom_and_namespace_tools_are_functions_upstream_and_their_own_shape_for_the_client() {
    let rig = Rig::start("").await;
    rig.anthropic.push(anthropic_wire::message(
        vec![
            tool_use_block("toolu_1", "apply_patch", json!({"input": "*** Begin Patch\n*** End Patch"})),
            tool_use_block("toolu_2", "crm__lookup", json!({"name": "Ada"})),
        ],
        "tool_use",
        usage_json(20, 10, 0, 0),
    ));
    rig.anthropic.push(anthropic_wire::text_message("Patched, and Ada is a customer."));
    let lines = rig.run("claude", "custom_namespace");
    let first = &lines[0]["first"];
    assert_eq!(output_types(first), ["custom_tool_call", "function_call"]);
    assert_eq!(first["output"][0]["name"], "apply_patch");
    assert_eq!(first["output"][0]["input"], "*** Begin Patch\n*** End Patch");
    assert_eq!(first["output"][1]["name"], "lookup");
    assert_eq!(first["output"][1]["namespace"], "crm");
    assert_eq!(lines[0]["final"]["output"][0]["content"][0]["text"], "Patched, and Ada is a customer.");

    let sent = rig.anthropic.received();
    let tools = sent[0].json()["tools"].clone();
    let names: Vec<&str> = tools.as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["apply_patch", "crm__lookup"]);
    assert_eq!(tools[0]["input_schema"]["properties"]["input"]["type"], "string");
    let messages = sent[1].json()["messages"].clone();
    assert_eq!(messages[1]["content"][0]["name"], "apply_patch");
    assert_eq!(messages[1]["content"][0]["input"], json!({"input": "*** Begin Patch\n*** End Patch"}));
    assert_eq!(messages[1]["content"][1]["name"], "crm__lookup");
    assert_eq!(messages[2]["content"][0]["tool_use_id"], "toolu_1");
    assert_eq!(messages[2]["content"][1]["tool_use_id"], "toolu_2");
}

/// The thinking block a Claude entry returned goes back to it on the next turn, with its
/// signature, through the sealed `encrypted_content` the client carried.
fn assert_thinking_came_back(rig: &Rig, turn_two: usize) {
    let sent = rig.anthropic.received();
    let messages = sent[turn_two].json()["messages"].clone();
    assert_eq!(messages[1]["role"], "assistant", "{messages}");
    assert_eq!(
        messages[1]["content"][0],
        json!({"type": "thinking", "thinking": "The user wants Paris weather; call the tool.",
               "signature": "EqQBCkgIARABGAIiQLsig"}),
        "{messages}"
    );
    assert_eq!(messages[1]["content"][1]["type"], "tool_use");
    assert_eq!(messages[2]["content"][0]["type"], "tool_result");
}

#[tokio::test]
async fn claude_thinking_is_sealed_into_a_reasoning_item_and_opened_on_the_next_turn() {
    let rig = Rig::start("").await;
    rig.anthropic.push(weather_call_message());
    rig.anthropic.push(anthropic_wire::text_message("18C in Paris."));
    let lines = rig.run("claude", "reasoning");
    let first = &lines[0]["first"];
    assert_eq!(output_types(first), ["reasoning", "function_call"]);
    let reasoning = &first["output"][0];
    assert_eq!(reasoning["summary"][0]["text"], "The user wants Paris weather; call the tool.");
    let sealed = reasoning["encrypted_content"].as_str().unwrap();
    assert!(sealed.starts_with("weir1.") && !sealed.contains("EqQBCkgIARABGAIiQLsig"), "{sealed}");
    assert_eq!(lines[0]["output_text"], "18C in Paris.");
    assert_thinking_came_back(&rig, 1);

    // Streamed turn one: the item comes from `response.output_item.done`.
    rig.anthropic.push(anthropic_wire::stream(vec![
        message_start(30, 0, 0),
        content_block_start(0, &empty_thinking_block()),
        thinking_delta(0, "The user wants Paris weather; "),
        thinking_delta(0, "call the tool."),
        signature_delta(0, "EqQBCkgIARABGAIiQLsig"),
        content_block_stop(0),
        content_block_start(1, &streamed_tool_use_block("toolu_01A", "get_weather")),
        input_json_delta(1, "{\"city\": \"Paris\"}"),
        content_block_stop(1),
        message_delta("tool_use", None, 25),
        message_stop(),
    ]));
    rig.anthropic.push(anthropic_wire::text_message("18C in Paris."));
    let lines = rig.run("claude", "reasoning_stream");
    assert_eq!(output_types(&lines[0]["first"]), ["reasoning", "function_call"]);
    assert_eq!(lines[0]["output_text"], "18C in Paris.");
    assert_thinking_came_back(&rig, 3);

    let records = rig.records();
    assert_eq!(records.len(), 4);
    assert!(records.iter().all(|r| r["route"] == "responses" && r["model"] == "claude"), "{records:?}");
}

#[tokio::test]
async fn a_tampered_or_other_entrys_reasoning_item_is_refused_and_never_forwarded() {
    let rig = Rig::start("").await;
    rig.anthropic.push(weather_call_message());
    let lines = rig.run("claude", "tampered");
    let error = &lines[0]["error"];
    assert_eq!(error["exception"], "BadRequestError", "{error}");
    assert_eq!(error["status"], 400);
    assert_eq!(error["code"], "invalid_request");
    assert!(
        error["message"].as_str().unwrap().contains("`encrypted_content` does not open for model `claude`"),
        "{error}"
    );

    rig.anthropic.push(weather_call_message());
    let lines = rig.run_with("claude", "other_model", &[("WEIR_OTHER_MODEL", "claude-two")]);
    let error = &lines[0]["error"];
    assert_eq!(error["status"], 400, "{error}");
    assert!(error["message"].as_str().unwrap().contains("does not open for model `claude-two`"), "{error}");
    assert_eq!(rig.anthropic.request_count(), 2, "only the two first turns went upstream");
}

#[tokio::test]
async fn a_hosted_tool_is_dropped_with_a_header_and_a_note_on_the_record() {
    let rig = Rig::start("").await;
    let lines = rig.run("gpt", "hosted");
    assert_eq!(lines[0]["dropped"], "web_search");
    let tools = rig.openai.received()[0].json()["tools"].clone();
    assert_eq!(tools.as_array().unwrap().len(), 1, "{tools}");
    assert_eq!(tools[0]["function"]["name"], "get_weather");
    assert_eq!(lines[0]["response"]["tools"].as_array().unwrap().len(), 1, "the answer echoes the tools sent");
    let records = rig.records();
    let call_id = lines[0]["call_id"].as_str().unwrap();
    let record = records.iter().find(|r| r["call_id"] == call_id).unwrap();
    assert!(record["notes"].as_array().unwrap().contains(&json!("tool_dropped:web_search")), "{record}");
}

#[tokio::test]
async fn a_hosted_tool_is_refused_under_hosted_tools_refuse_before_any_upstream_call() {
    let rig = Rig::start("hosted_tools = \"refuse\"\n").await;
    let lines = rig.run("gpt", "hosted_refused");
    let error = &lines[0]["error"];
    assert_eq!(error["code"], "capability_mismatch", "{error}");
    assert_eq!(error["type"], "capability_mismatch");
    assert!(error["message"].as_str().unwrap().contains("web_search"), "{error}");
    assert_eq!(rig.openai.request_count(), 0);
}

#[tokio::test]
async fn errors_reach_the_client_as_typed_exceptions_with_weirs_category() {
    let rig = Rig::start("").await;
    let lines = rig.run("gpt", "unknown_field");
    let error = &lines[0]["error"];
    assert_eq!((&error["exception"], &error["status"]), (&json!("BadRequestError"), &json!(400)), "{error}");
    assert_eq!(error["code"], "invalid_request");
    assert!(error["message"].as_str().unwrap().contains("unknown field `frequency_penalty`"), "{error}");

    let lines = rig.run("no-such-model", "error");
    let error = &lines[0]["error"];
    assert_eq!((&error["exception"], &error["status"]), (&json!("NotFoundError"), &json!(404)), "{error}");
    assert_eq!(error["code"], "model_not_found");

    rig.openai.push(openai_wire::rate_limited(0));
    let lines = rig.run("gpt", "error");
    let error = &lines[0]["error"];
    assert_eq!((&error["exception"], &error["status"]), (&json!("RateLimitError"), &json!(429)), "{error}");
    assert_eq!(error["code"], "rate_limited");
    assert!(!error["message"].as_str().unwrap().contains("Rate limit reached for"), "no raw upstream text: {error}");
}

#[tokio::test]
async fn an_openai_agents_agent_runs_its_tool_on_responses_and_on_chat_completions() {
    let rig = Rig::start("").await;
    let mut lines = Vec::new();
    for step in ["agent", "agent_chat"] {
        // One scripted tool call per run: the next request is the echo's.
        rig.openai.push(openai_wire::tool_call_completion(&[("call_w1", "get_weather", r#"{"city":"Paris"}"#)]));
        lines.extend(rig.run("gpt", step));
    }
    for line in &lines {
        assert_eq!(line["final_output"], "echo: Weather in Paris?", "{line}");
        assert_eq!(line["items"], json!(["tool_call_item", "tool_call_output_item", "message_output_item"]), "{line}");
    }
    let sent = rig.openai.received();
    assert_eq!(sent.len(), 4);
    for turn_two in [&sent[1], &sent[3]] {
        let messages = turn_two.json()["messages"].clone();
        let tool = messages.as_array().unwrap().iter().find(|m| m["role"] == "tool").unwrap();
        assert!(tool["content"].to_string().contains("18C and sunny in Paris"), "{messages}");
    }
    let routes: Vec<String> = rig.records().iter().map(|r| r["route"].as_str().unwrap().to_owned()).collect();
    assert_eq!(routes, ["responses", "responses", "openai_chat", "openai_chat"]);
}

#[tokio::test]
async fn the_seal_key_from_the_config_opens_items_across_a_restart() {
    let key = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";
    let openai = FakeUpstream::start().await;
    let anthropic = FakeUpstream::start().await;
    let text = config(&openai, &anthropic, "[responses]\nseal_key_env = \"WEIR_SEAL_KEY\"\n");
    let env = [("WEIR_TEST_KEY", OPENAI_SECRET), ("WEIR_ANTHROPIC_KEY", ANTHROPIC_SECRET), ("WEIR_SEAL_KEY", key)];
    let first = Gateway::start_with(&text, &env, None).await;
    assert!(!first.stderr().contains("random key"), "a configured key is used: {}", first.stderr());
    anthropic.push(weather_call_message());
    let body = json!({"model": "claude", "input": "Weather in Paris?", "tools": [{"type": "function", "name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}]});
    let turn_one = first.post_json("/v1/responses", &body, &[]).await;
    assert_eq!(turn_one.status, 200, "{:?}", turn_one.body);
    drop(first);

    let second = Gateway::start_with(&text, &env, None).await;
    anthropic.push(anthropic_wire::text_message("18C in Paris."));
    let mut input = vec![json!({"role": "user", "content": "Weather in Paris?"})];
    input.extend(turn_one.body["output"].as_array().unwrap().iter().cloned());
    input.push(json!({"type": "function_call_output", "call_id": "toolu_01A", "output": "18C"}));
    let turn_two = second.post_json("/v1/responses", &json!({"model": "claude", "input": input}), &[]).await;
    assert_eq!(turn_two.status, 200, "{:?}", turn_two.body);
    let messages = anthropic.received()[1].json()["messages"].clone();
    assert_eq!(messages[1]["content"][0]["signature"], "EqQBCkgIARABGAIiQLsig", "{messages}");

    let unconfigured = Gateway::start_with(&config(&openai, &anthropic, ""), &env, None).await;
    unconfigured.wait_for_stderr("random key", std::time::Duration::from_secs(5)).await;
    let refused = unconfigured.post_json("/v1/responses", &json!({"model": "claude", "input": input}), &[]).await;
    assert_eq!(refused.status, 400, "another key does not open it: {:?}", refused.body);
    assert_eq!(refused.body["error"]["code"], "invalid_request");
    assert_eq!(anthropic.request_count(), 2);
}

#[tokio::test]
async fn a_failure_after_the_stream_began_is_response_failed_with_weirs_category() {
    let rig = Rig::start("").await;
    rig.anthropic.push(anthropic_wire::stream(vec![
        message_start(10, 0, 0),
        content_block_start(0, &anthropic_wire::empty_text_block()),
        anthropic_wire::text_delta(0, "Hel"),
        anthropic_wire::error_event("overloaded_error", "SECRET-PROSE Overloaded"),
    ]));
    let body = json!({"model": "claude", "input": "Hello", "stream": true});
    let response = reqwest::Client::new().post(rig.gateway.url("/v1/responses")).json(&body).send().await.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    let text = response.text().await.unwrap();
    let events = anthropic_wire::sse_events(&text);
    let names: Vec<&str> = events.iter().map(|(name, _)| name.as_str()).collect();
    assert_eq!(
        names,
        [
            "response.created",
            "response.in_progress",
            "response.output_item.added",
            "response.content_part.added",
            "response.output_text.delta",
            "response.failed"
        ],
        "{text}"
    );
    let (_, failed) = events.last().unwrap();
    assert_eq!(failed["type"], "response.failed");
    assert_eq!(failed["response"]["status"], "failed");
    // Weir's category for a stream cut after output: it was not retried.
    assert_eq!(failed["response"]["error"]["code"], "upstream_error", "{failed}");
    assert!(!text.contains("SECRET-PROSE"), "raw provider text leaked: {text}");
    let records = rig.records();
    assert_eq!((&records[0]["route"], &records[0]["category"]), (&json!("responses"), &json!("upstream_error")));
}

#[tokio::test]
async fn a_converse_entry_serves_the_tool_round_trip_and_a_stream() {
    use weir_tests::bedrock_wire::{self, ACCESS_KEY_ID, FakeBedrock, REGION, SECRET_ACCESS_KEY};
    let bedrock = FakeBedrock::start().await;
    let text = format!(
        "read_timeout_secs = 5\n\n[[model]]\nid = \"nova\"\nprovider = \"bedrock-converse\"\n\
         wire_id = \"us.amazon.nova-pro-v1:0\"\nendpoint = \"{}\"\nmax_output_tokens = 8000\n\
         context_window = 200000\noutput_tokens = 100\nmax_retries = 0\n",
        bedrock.base_url()
    );
    let env =
        [("AWS_ACCESS_KEY_ID", ACCESS_KEY_ID), ("AWS_SECRET_ACCESS_KEY", SECRET_ACCESS_KEY), ("AWS_REGION", REGION)];
    let gateway = Gateway::start_with(&text, &env, None).await;
    bedrock.push(bedrock_wire::converse(&bedrock_wire::converse_body()));
    bedrock.push(bedrock_wire::converse_text("18C and sunny."));
    let lines = run_responses_client(&gateway.url("/v1"), "nova", "tools", &[]);
    let first = &lines[0]["first"];
    assert_eq!(output_types(first), ["message", "function_call"]);
    assert_eq!(first["output"][1]["call_id"], "tooluse_abc123");
    assert_eq!(lines[0]["output_text"], "18C and sunny.");
    let sent = bedrock.received()[1].json();
    let messages = sent["messages"].as_array().unwrap();
    assert_eq!(messages[1]["content"][1]["toolUse"]["toolUseId"], "tooluse_abc123", "{sent}");
    assert_eq!(messages[2]["content"][0]["toolResult"]["toolUseId"], "tooluse_abc123", "{sent}");

    bedrock.push(bedrock_wire::event_stream_split(bedrock_wire::converse_stream_frames(), 5));
    let lines = run_responses_client(&gateway.url("/v1"), "nova", "stream", &[]);
    let types: Vec<&str> = lines[0]["events"].as_array().unwrap().iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert!(types.contains(&"response.function_call_arguments.done"), "{types:?}");
    assert_eq!(types.last(), Some(&"response.completed"));
    assert_eq!(output_types(&lines[0]["final"]), ["message", "function_call"]);
    assert_eq!(lines[0]["output_text"], "Let me check the weather.");
    assert_eq!(lines[0]["final"]["usage"]["input_tokens_details"]["cached_tokens"], 1024);
}

#[test]
fn a_seal_key_that_cannot_be_read_stops_the_gateway_at_load() {
    let text = "[responses]\nseal_key_file = \"/nonexistent-weir/seal.key\"\n";
    let built = weir_host::Weir::builder()
        .config(weir_host::Config::from_toml(text, "test").unwrap())
        .providers_dir("/nonexistent-weir-providers")
        .cache_dir(Some(std::env::temp_dir().join("weir-responses-test-cache")))
        .build();
    let Err(error) = built else { panic!("an unreadable seal key must stop the build") };
    assert!(error.to_string().contains("`[responses] seal_key_file` /nonexistent-weir/seal.key"), "{error}");
}

#[tokio::test]
async fn sealed_reasoning_for_a_model_that_does_not_resolve_is_that_models_error() {
    let rig = Rig::start("").await;
    let input = json!([
        {"role": "user", "content": "Hi"},
        {"type": "reasoning", "summary": [], "encrypted_content": "weir1.AAAA"}
    ]);
    let answer = rig.gateway.post_json("/v1/responses", &json!({"model": "no-such-model", "input": input}), &[]).await;
    assert_eq!(answer.status, 404, "{:?}", answer.body);
    assert_eq!(answer.body["error"]["code"], "model_not_found");
    assert_eq!(rig.anthropic.request_count() + rig.openai.request_count(), 0);
}

#[tokio::test]
async fn the_openai_clients_stored_response_surface_retrieves_continues_and_deletes() {
    let rig = Rig::start("").await;
    let lines = rig.run("gpt", "stored");
    let stored = &lines[0];
    assert_eq!(stored["first"]["store"], true);
    assert_eq!(stored["read"], stored["first"], "retrieve answers the response as it was answered");
    assert_eq!(stored["input_texts"], json!(["Remember the number 42."]));
    assert_eq!(stored["second"]["previous_response_id"], stored["first"]["id"]);
    assert_eq!(stored["gone"]["status"], 404, "{}", stored["gone"]);
    assert_eq!(stored["gone"]["exception"], "NotFoundError");

    // The continuation went upstream with the stored question and answer before the new one.
    let sent = rig.openai.received().last().unwrap().json();
    let contents: Vec<String> = sent["messages"].as_array().unwrap().iter().map(|m| m["content"].to_string()).collect();
    assert_eq!(contents.len(), 3, "{contents:?}");
    assert!(contents[0].contains("Remember the number 42."), "{contents:?}");
    assert!(contents[1].contains("echo: Remember the number 42."), "{contents:?}");
    assert!(contents[2].contains("Which number?"), "{contents:?}");
}
