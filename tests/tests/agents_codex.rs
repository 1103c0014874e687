//! The released Codex CLI (`codex exec`, pinned in `tests/agents`) through the gateway's
//! `POST /v1/responses`, on an OpenAI-chat entry, a Claude entry and a Bedrock Converse
//! entry. Each runs one agent turn in which the model calls Codex's shell tool
//! (`exec_command`), Codex runs it and sends its output back, and the model finishes.
//! Each asserts what the upstream received in its own dialect (the tools mapped, the
//! hosted `web_search` dropped, the tool's output carried back, a Claude entry's thinking
//! returned with its signature) and what the ledger recorded.

// Test code: a failed step should stop the test with its message.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::process::Output;

use serde_json::{Value, json};
use weir_tests::agents::run_codex;
use weir_tests::anthropic_wire::{
    self, content_block_start, content_block_stop, empty_text_block, empty_thinking_block, input_json_delta,
    message_delta, message_start, message_stop, signature_delta, streamed_tool_use_block, text_delta, thinking_delta,
};
use weir_tests::bedrock_wire::{
    self, ACCESS_KEY_ID, FakeBedrock, Operation, REGION, SECRET_ACCESS_KEY, converse_event, converse_usage,
};
use weir_tests::responses_wire::{self, function_call_item, reasoning_item, usage};
use weir_tests::{FakeUpstream, Gateway, Scripted, closed_records, openai_wire};

const CALLER: &str = "weir-codex-caller-0123456789abcdef";
const COMMAND: &str = "echo weir-ok-from-codex";
const MARKER: &str = "weir-ok-from-codex";
const FINAL: &str = "The command printed the marker.";

fn key_table() -> String {
    format!(
        "[[key]]\nid = \"codex-key\"\nmember = \"dev\"\nhash = \"{}\"\n\n[ledger]\npath = \"ledger.db\"\n",
        weir_host::identity::hash_of(CALLER)
    )
}

fn entry(id: &str, provider: &str, wire: &str, endpoint: &str, more: &str) -> String {
    format!(
        "[[model]]\nid = \"{id}\"\nprovider = \"{provider}\"\nwire_id = \"{wire}\"\nendpoint = \"{endpoint}\"\n\
         max_output_tokens = 8000\noutput_tokens = 2000\ncontext_window = 200000\nmax_retries = 0\n{more}\n"
    )
}

/// Runs Codex once against `gateway` naming `model`; fails with everything Codex and the
/// gateway said when Codex fails.
fn codex(gateway: &Gateway, model: &str) -> Vec<Value> {
    let home = tempfile::tempdir().unwrap();
    let workdir = tempfile::tempdir().unwrap();
    let prompt = format!("Run `{COMMAND}` in the shell and tell me what it printed.");
    let output = run_codex(&gateway.url(""), model, CALLER, &prompt, home.path(), workdir.path());
    let events = events(&output);
    assert!(output.status.success(), "codex failed: {}\ngateway:\n{}", describe(&output), gateway.stderr());
    events
}

fn events(output: &Output) -> Vec<Value> {
    String::from_utf8_lossy(&output.stdout).lines().filter_map(|line| serde_json::from_str(line).ok()).collect()
}

fn describe(output: &Output) -> String {
    format!(
        "{:?}\nstdout:\n{}\nstderr:\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// The texts of Codex's `agent_message` items.
fn agent_messages(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .filter(|event| event["type"] == "item.completed" && event["item"]["type"] == "agent_message")
        .filter_map(|event| event["item"]["text"].as_str().map(str::to_owned))
        .collect()
}

/// Codex ran the command the model asked for (its `command_execution` item).
fn ran_the_command(events: &[Value]) -> bool {
    events.iter().any(|event| {
        event["type"] == "item.completed"
            && event["item"]["type"] == "command_execution"
            && event["item"]["aggregated_output"].as_str().is_some_and(|out| out.contains(MARKER))
    })
}

/// Both calls recorded under route `responses` for Codex's key, with a success.
fn assert_recorded(gateway: &Gateway, model: &str) {
    let records = closed_records(&gateway.dir().join("ledger.db"));
    let ours: Vec<&Value> = records.iter().filter(|record| record["route"] == "responses").collect();
    assert_eq!(ours.len(), 2, "{records:#?}");
    for record in ours {
        assert_eq!(record["model"], model, "{record}");
        assert_eq!(record["key_id"], "codex-key", "{record}");
        assert_eq!(record["category"], "ok", "{record}");
    }
}

/// The text of every tool result in an upstream request (any dialect), joined.
fn all_text(value: &Value) -> String {
    value.to_string()
}

#[tokio::test]
async fn codex_runs_its_shell_tool_through_an_openai_chat_entry() {
    let upstream = FakeUpstream::start().await;
    let arguments = json!({"cmd": COMMAND}).to_string();
    upstream.push(openai_wire::stream(openai_wire::sse_tool_call_chunks(
        "call_codex_1",
        "exec_command",
        &[&arguments],
    )));
    upstream.push(openai_wire::stream(openai_wire::sse_chunks(&[FINAL])));
    let config = format!(
        "read_timeout_secs = 20\n{}{}",
        entry("gpt", "openai", "gpt-4.1", &upstream.base_url(), "credential = \"weir-test-key\""),
        key_table()
    );
    let gateway = Gateway::start_with(&config, &[("WEIR_TEST_KEY", "sk-upstream-0123456789")], None).await;

    let events = codex(&gateway, "gpt");
    assert!(ran_the_command(&events), "{events:#?}");
    assert!(agent_messages(&events).iter().any(|text| text.contains(FINAL)), "{events:#?}");

    let received = upstream.received();
    let chat: Vec<Value> = received.iter().filter(|r| r.path == "/v1/chat/completions").map(|r| r.json()).collect();
    assert_eq!(chat.len(), 2, "{received:#?}");
    let names: Vec<&str> =
        chat[0]["tools"].as_array().unwrap().iter().filter_map(|t| t["function"]["name"].as_str()).collect();
    assert!(names.contains(&"exec_command"), "{names:?}");
    assert!(!names.iter().any(|name| name.contains("web_search")), "the hosted tool is dropped: {names:?}");
    // Turn 2 carries the call and its output back in chat's own shape.
    let messages = chat[1]["messages"].as_array().unwrap();
    let call = messages.iter().find(|m| m["role"] == "assistant" && m["tool_calls"].is_array()).unwrap();
    assert_eq!(call["tool_calls"][0]["function"]["name"], "exec_command");
    let result = messages.iter().find(|m| m["role"] == "tool").unwrap();
    assert_eq!(result["tool_call_id"], call["tool_calls"][0]["id"]);
    assert!(all_text(&result["content"]).contains(MARKER), "{result}");
    assert_recorded(&gateway, "gpt");
}

/// Turn 1 of the Claude entry: thinking with its signature, then a `tool_use` of
/// `exec_command`.
fn claude_tool_turn() -> Scripted {
    let arguments = json!({"cmd": COMMAND}).to_string();
    anthropic_wire::stream(vec![
        message_start(40, 0, 0),
        content_block_start(0, &empty_thinking_block()),
        thinking_delta(0, "The user wants the command run."),
        signature_delta(0, "sig-codex-turn-1"),
        content_block_stop(0),
        content_block_start(1, &streamed_tool_use_block("toolu_codex_1", "exec_command")),
        input_json_delta(1, &arguments),
        content_block_stop(1),
        message_delta("tool_use", None, 30),
        message_stop(),
    ])
}

fn claude_text_turn() -> Scripted {
    anthropic_wire::stream(vec![
        message_start(60, 0, 0),
        content_block_start(0, &empty_text_block()),
        text_delta(0, FINAL),
        content_block_stop(0),
        message_delta("end_turn", None, 10),
        message_stop(),
    ])
}

#[tokio::test]
async fn codex_keeps_claudes_thinking_signature_across_its_tool_call() {
    let upstream = FakeUpstream::start().await;
    upstream.push(claude_tool_turn());
    upstream.push(claude_text_turn());
    let endpoint = format!("http://{}", upstream.addr());
    let config = format!(
        "read_timeout_secs = 20\n{}{}",
        entry(
            "claude",
            "anthropic",
            "claude-sonnet-4-5",
            &endpoint,
            "credential = \"weir-anthropic-key\"\nreasoning = \"thinking\""
        ),
        key_table()
    );
    let gateway = Gateway::start_with(&config, &[("WEIR_ANTHROPIC_KEY", "sk-ant-upstream-0123456789")], None).await;

    let events = codex(&gateway, "claude");
    assert!(ran_the_command(&events), "{events:#?}");
    assert!(agent_messages(&events).iter().any(|text| text.contains(FINAL)), "{events:#?}");

    let received = upstream.received();
    let sent: Vec<Value> = received.iter().filter(|r| r.path == "/v1/messages").map(|r| r.json()).collect();
    assert_eq!(sent.len(), 2, "{received:#?}");
    let names: Vec<&str> = sent[0]["tools"].as_array().unwrap().iter().filter_map(|t| t["name"].as_str()).collect();
    assert!(names.contains(&"exec_command"), "{names:?}");
    assert!(!names.iter().any(|name| name.contains("web_search")), "{names:?}");
    assert!(names.iter().any(|name| name.starts_with("multi_agent_v1__")), "namespace tools flattened: {names:?}");
    // Turn 2: the assistant turn starts with the thinking block, signature intact,
    // then the tool use; the user turn carries its result.
    let messages = sent[1]["messages"].as_array().unwrap();
    let assistant = messages.iter().find(|m| m["role"] == "assistant").unwrap();
    let blocks = assistant["content"].as_array().unwrap();
    assert_eq!(blocks[0]["type"], "thinking", "{assistant}");
    assert_eq!(blocks[0]["signature"], "sig-codex-turn-1", "{assistant}");
    let tool_use = blocks.iter().find(|b| b["type"] == "tool_use").unwrap();
    assert_eq!(tool_use["name"], "exec_command");
    let result = messages
        .iter()
        .flat_map(|m| m["content"].as_array().cloned().unwrap_or_default())
        .find(|b| b["type"] == "tool_result")
        .unwrap();
    assert_eq!(result["tool_use_id"], tool_use["id"]);
    assert!(all_text(&result).contains(MARKER), "{result}");
    assert_recorded(&gateway, "claude");
}

/// Turn 1 of the Converse entry: a `toolUse` of `exec_command`.
fn converse_tool_turn() -> Scripted {
    let arguments = json!({"cmd": COMMAND}).to_string();
    let frames = vec![
        converse_event("messageStart", &json!({"role": "assistant"})),
        converse_event(
            "contentBlockStart",
            &json!({"contentBlockIndex": 0, "start": {"toolUse": {"toolUseId": "tooluse_codex_1", "name": "exec_command"}}}),
        ),
        converse_event(
            "contentBlockDelta",
            &json!({"contentBlockIndex": 0, "delta": {"toolUse": {"input": arguments}}}),
        ),
        converse_event("contentBlockStop", &json!({"contentBlockIndex": 0})),
        converse_event("messageStop", &json!({"stopReason": "tool_use"})),
        converse_event("metadata", &json!({"usage": converse_usage(40, 20, 0, 0), "metrics": {"latencyMs": 100}})),
    ];
    bedrock_wire::event_stream_split(frames, 3)
}

#[tokio::test]
async fn codex_runs_its_shell_tool_through_a_converse_entry() {
    let bedrock = FakeBedrock::start().await;
    bedrock.push(converse_tool_turn());
    bedrock.push(bedrock_wire::event_stream_split(
        bedrock_wire::converse_text_stream_frames(&[FINAL], "end_turn", converse_usage(60, 10, 0, 0)),
        3,
    ));
    let config = format!(
        "read_timeout_secs = 20\n{}{}",
        entry("nova", "bedrock-converse", "us.amazon.nova-pro-v1:0", &bedrock.base_url(), ""),
        key_table()
    );
    let env =
        [("AWS_ACCESS_KEY_ID", ACCESS_KEY_ID), ("AWS_SECRET_ACCESS_KEY", SECRET_ACCESS_KEY), ("AWS_REGION", REGION)];
    let gateway = Gateway::start_with(&config, &env, None).await;

    let events = codex(&gateway, "nova");
    assert!(ran_the_command(&events), "{events:#?}");
    assert!(agent_messages(&events).iter().any(|text| text.contains(FINAL)), "{events:#?}");

    let received = bedrock.received();
    assert_eq!(received.len(), 2, "{received:#?}");
    assert!(received.iter().all(|r| r.signed_ok() && r.operation == Operation::ConverseStream));
    let first = received[0].json();
    let names: Vec<&str> = first["toolConfig"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["toolSpec"]["name"].as_str())
        .collect();
    assert!(names.contains(&"exec_command"), "{names:?}");
    assert!(!names.iter().any(|name| name.contains("web_search")), "{names:?}");
    let second = received[1].json();
    let result = second["messages"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|m| m["content"].as_array().cloned().unwrap_or_default())
        .find(|b| b.get("toolResult").is_some())
        .unwrap();
    assert_eq!(result["toolResult"]["toolUseId"], "tooluse_codex_1");
    assert!(all_text(&result).contains(MARKER), "{result}");
    assert_recorded(&gateway, "nova");
}

#[tokio::test]
async fn codex_gets_openais_reasoning_back_through_an_openai_responses_entry() {
    let upstream = FakeUpstream::start().await;
    let arguments = json!({"cmd": COMMAND}).to_string();
    let turn_one = [
        reasoning_item("rs_codex_1", "enc-codex-secret"),
        function_call_item("call_codex_1", "exec_command", &arguments),
    ];
    // Codex streams and offers its hosted `web_search`, which goes to OpenAI: its turns
    // stream live, any hosted item in place (the OpenAI component's `native-stream`).
    upstream.push(responses_wire::stream(responses_wire::stream_events(&turn_one, usage(60, 30, 0, 20))));
    let last = [responses_wire::message_item("msg_2", FINAL)];
    upstream.push(responses_wire::stream(responses_wire::stream_events(&last, usage(90, 10, 0, 0))));
    let config = format!(
        "read_timeout_secs = 20\n{}{}",
        entry(
            "gpt5",
            "openai-responses",
            "gpt-5",
            &upstream.base_url(),
            "credential = \"weir-test-key\"\nreasoning = \"effort\""
        ),
        key_table()
    );
    let gateway = Gateway::start_with(&config, &[("WEIR_TEST_KEY", "sk-upstream-0123456789")], None).await;

    let events = codex(&gateway, "gpt5");
    assert!(ran_the_command(&events), "{events:#?}");
    assert!(agent_messages(&events).iter().any(|text| text.contains(FINAL)), "{events:#?}");

    let sent: Vec<Value> = upstream.received().iter().filter(|r| r.path == "/v1/responses").map(|r| r.json()).collect();
    assert_eq!(sent.len(), 2);
    assert_eq!(sent[0]["store"], false);
    let names: Vec<&str> = sent[0]["tools"].as_array().unwrap().iter().filter_map(|t| t["name"].as_str()).collect();
    assert!(names.contains(&"exec_command"), "{names:?}");
    let hosted: Vec<&Value> =
        sent[0]["tools"].as_array().unwrap().iter().filter(|t| t["type"] == "web_search").collect();
    assert_eq!(hosted.len(), 1, "Codex's hosted web_search reaches OpenAI as written: {}", sent[0]);
    assert_eq!(sent[0]["stream"], true, "streamed live");
    // Codex's namespace tools reach OpenAI as its own `namespace` tools, members under
    // their own names (none flattened to `<namespace>__<name>`).
    let namespaces: Vec<&Value> =
        sent[0]["tools"].as_array().unwrap().iter().filter(|t| t["type"] == "namespace").collect();
    let multi_agent =
        namespaces.iter().find(|t| t["name"] == "multi_agent_v1").unwrap_or_else(|| panic!("{}", sent[0]));
    assert!(!multi_agent["description"].as_str().unwrap_or_default().is_empty(), "{multi_agent}");
    let members = multi_agent["tools"].as_array().unwrap();
    assert!(!members.is_empty() && members.iter().all(|m| m["type"] == "function" && m["parameters"].is_object()));
    assert!(members.iter().all(|m| !m["name"].as_str().unwrap().contains("__")), "{multi_agent}");
    assert!(!names.iter().any(|name| name.starts_with("multi_agent_v1__")), "{names:?}");
    let cache_key = sent[0]["prompt_cache_key"].as_str().unwrap_or_default();
    assert!(!cache_key.is_empty(), "Codex's prompt_cache_key reaches OpenAI as a native field: {}", sent[0]);
    assert_eq!(sent[1]["prompt_cache_key"], cache_key, "one key for the conversation");
    // Turn 2: OpenAI's own reasoning item, whole, before the call and its output.
    let input = sent[1]["input"].as_array().unwrap();
    let reasoning = input.iter().position(|item| item["type"] == "reasoning").unwrap();
    assert_eq!(input[reasoning]["id"], "rs_codex_1");
    assert_eq!(input[reasoning]["encrypted_content"], "enc-codex-secret");
    let call = input.iter().position(|item| item["type"] == "function_call").unwrap();
    assert!(reasoning < call);
    let output = input.iter().find(|item| item["type"] == "function_call_output").unwrap();
    assert_eq!(output["call_id"], "call_codex_1");
    assert!(output["output"].to_string().contains(MARKER), "{output}");
    assert_recorded(&gateway, "gpt5");
}
