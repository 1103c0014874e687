//! The released Codex CLI (`@openai/codex`, pinned in `tests/agents/package.json`,
//! installed by `.ci/run` with `npm ci --prefix tests/agents`) against the real `weir`
//! binary on `wire_api = "responses"`, served by a Claude entry on the fake Anthropic
//! upstream: `codex exec` asks for a command, the model (scripted) calls Codex's shell
//! tool, Codex runs it, the output goes back, and the agent finishes. The upstream must
//! receive the first turn's thinking with its signature on the second turn (carried by
//! Codex as a sealed `reasoning` item), the shell tool's real output as a tool result,
//! Codex's namespace tools flattened, and its hosted `web_search` dropped and recorded.
//!
//! The binary is `$WEIR_CODEX`, else `tests/agents/node_modules/.bin/codex`; a missing
//! one fails the test with the install command: it is never skipped.

// Test code: a failed step should stop the test with its message.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::PathBuf;
use std::process::Command;

use serde_json::{Value, json};
use weir_tests::anthropic_wire::{
    self, content_block_start, content_block_stop, empty_text_block, empty_thinking_block, input_json_delta,
    message_delta, message_start, message_stop, signature_delta, streamed_tool_use_block, text_delta, thinking_delta,
};
use weir_tests::{FakeUpstream, Gateway, closed_records};

const SIGNATURE: &str = "EqQBCkgIARABGAIiQLcodex";

fn codex_binary() -> PathBuf {
    let installed = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("agents/node_modules/.bin/codex");
    let binary = std::env::var_os("WEIR_CODEX").map(PathBuf::from).unwrap_or(installed);
    assert!(
        binary.is_file(),
        "no Codex CLI at {}: install it with `npm ci --prefix tests/agents --no-audit --no-fund`",
        binary.display()
    );
    binary
}

#[tokio::test]
async fn codex_exec_runs_its_shell_tool_on_a_claude_entry_through_responses() {
    let codex = codex_binary();
    let upstream = FakeUpstream::start().await;
    let config = format!(
        r#"
read_timeout_secs = 30

[[model]]
id = "claude"
provider = "anthropic"
wire_id = "claude-sonnet-4-5"
endpoint = "http://{addr}"
credential = "weir-anthropic-key"
max_output_tokens = 8000
context_window = 200000
output_tokens = 2000
max_retries = 0

[ledger]
path = "ledger.db"
"#,
        addr = upstream.addr()
    );
    let gateway = Gateway::start_with(&config, &[("WEIR_ANTHROPIC_KEY", "sk-ant-weir-test-0123456789")], None).await;
    upstream.push(anthropic_wire::stream(vec![
        message_start(120, 0, 0),
        content_block_start(0, &empty_thinking_block()),
        thinking_delta(0, "I will run the command."),
        signature_delta(0, SIGNATURE),
        content_block_stop(0),
        content_block_start(1, &streamed_tool_use_block("toolu_01X", "exec_command")),
        input_json_delta(1, "{\"cmd\": \"echo hello-from-weir\"}"),
        content_block_stop(1),
        message_delta("tool_use", None, 30),
        message_stop(),
    ]));
    upstream.push(anthropic_wire::stream(vec![
        message_start(160, 0, 0),
        content_block_start(0, &empty_text_block()),
        text_delta(0, "Done: it printed hello-from-weir."),
        content_block_stop(0),
        message_delta("end_turn", None, 12),
        message_stop(),
    ]));

    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join("config.toml"),
        format!(
            "model = \"claude\"\nmodel_provider = \"weir\"\n\n[model_providers.weir]\nname = \"weir\"\n\
             base_url = \"{}\"\nwire_api = \"responses\"\nenv_key = \"WEIR_CALLER_KEY\"\n",
            gateway.url("/v1")
        ),
    )
    .unwrap();
    let output = Command::new(&codex)
        .args([
            "exec",
            "--skip-git-repo-check",
            "--dangerously-bypass-approvals-and-sandbox",
            "run echo hello-from-weir",
        ])
        .current_dir(work.path())
        .env("CODEX_HOME", home.path())
        .env("WEIR_CALLER_KEY", "unused-by-weir")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "codex exec failed ({}):\n{stdout}\n{stderr}", output.status);
    assert!(stdout.contains("Done: it printed hello-from-weir."), "{stdout}\n{stderr}");

    let received = upstream.received();
    assert_eq!(received.len(), 2, "two turns");
    let first = received[0].json();
    let tools: Vec<&str> = first["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert!(tools.contains(&"exec_command"), "{tools:?}");
    assert!(tools.iter().any(|name| name.contains("__")), "Codex's namespace tools, flattened: {tools:?}");
    let messages = received[1].json()["messages"].clone();
    let turn = messages.as_array().unwrap();
    let assistant = turn.iter().find(|m| m["role"] == "assistant").unwrap();
    assert_eq!(
        assistant["content"][0],
        json!({"type": "thinking", "thinking": "I will run the command.", "signature": SIGNATURE}),
        "{messages}"
    );
    assert_eq!(assistant["content"][1]["name"], "exec_command");
    let result = turn
        .iter()
        .flat_map(|m| m["content"].as_array().cloned().unwrap_or_default())
        .find(|block| block["type"] == "tool_result")
        .unwrap();
    assert_eq!(result["tool_use_id"], "toolu_01X");
    assert!(result["content"].to_string().contains("hello-from-weir"), "the command's real output: {result}");

    let records = closed_records(&gateway.dir().join("ledger.db"));
    assert_eq!(records.len(), 2, "{records:?}");
    for record in &records {
        assert_eq!((&record["route"], &record["category"]), (&json!("responses"), &json!("ok")), "{record}");
        assert_eq!(record["stream"], true);
        let dropped: Vec<Value> = record["dropped_tools"].as_array().cloned().unwrap_or_default();
        assert!(dropped.contains(&json!("web_search")), "Codex's hosted web_search was dropped: {record}");
    }
}
