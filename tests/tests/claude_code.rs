//! Claude Code's contract on `/v1/messages`, through the real `weir` binary: the request
//! Claude Code really sends (captured from `@anthropic-ai/claude-code` 2.1.332 into
//! `tests/fixtures/claude_code/`) replayed on a Claude entry (the fake speaking
//! `weir_tests::anthropic_wire`) and on a GPT entry (the fake OpenAI upstream); the official
//! `anthropic` Python client's beta surface and `count_tokens`; `hosted_tools`; and the
//! released `claude -p` itself running its shell tool through the gateway.
//!
//! Each test asserts what the caller got (the dropped-fields, dropped-betas and
//! dropped-tools headers included), what the upstream received (Anthropic's own fields and
//! betas on the Claude entry, none on the GPT one), and what the ledger recorded.

// Test code: a failed step should stop the test with its message.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use weir_tests::anthropic_wire::{
    self, content_block_start, content_block_stop, empty_thinking_block, input_json_delta, message_delta,
    message_start, message_stop, signature_delta, sse_events, sse_text_events, streamed_tool_use_block, text_delta,
    thinking_delta,
};
use weir_tests::gateway::{closed_records, serve_router};
use weir_tests::python::run_anthropic_client;
use weir_tests::{FakeUpstream, Gateway};

const OPENAI_KEY: &str = "sk-weir-test-secret-0123456789";
const ANTHROPIC_KEY: &str = "sk-ant-weir-test-0123456789";

/// The `anthropic-beta` header Claude Code 2.1.332 sent with the captured request.
const CLAUDE_CODE_BETAS: &str = "claude-code-20250219,interleaved-thinking-2025-05-14,context-management-2025-06-27,\
     mid-conversation-tool-changes-2026-07-01,thinking-token-count-2026-05-13,advanced-tool-use-2025-11-20,\
     effort-2025-11-24";

/// Claude Code's second request of a `claude -p "run echo weir-ok" --model chat` session:
/// its system blocks (with `cache_control`), twelve client tools (one with `defer_loading`),
/// `metadata.user_id`, adaptive thinking with `display: "omitted"`, `output_config.effort`,
/// `context_management`, a mid-conversation `system` message, its `Bash` tool call and the
/// `tool_result` carrying `weir-ok`.
fn captured_request() -> Value {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/claude_code/messages_turn2.json");
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
}

/// The fake OpenAI upstream behind `gpt` (and the role `fast`), the Anthropic-wire one
/// behind `claude` (and the role `chat`), a ledger in the gateway's folder, and `extra`
/// config lines at the top.
fn config(openai: &FakeUpstream, anthropic: &str, extra: &str) -> String {
    format!(
        r#"
read_timeout_secs = 10
{extra}

[[model]]
id = "gpt"
provider = "openai"
wire_id = "gpt-4.1"
endpoint = "{openai}"
credential = "weir-test-key"
max_output_tokens = 64000
context_window = 1000000
max_retries = 0

[[model]]
id = "claude"
provider = "anthropic"
wire_id = "claude-sonnet-4-5"
endpoint = "{anthropic}"
credential = "weir-anthropic-key"
max_output_tokens = 64000
context_window = 200000
max_retries = 0
reasoning = "thinking"
thinking_budget = {{ low = 1024, medium = 1024, high = 2048 }}

[role.chat]
model = "claude"

[role.fast]
model = "gpt"

# What `claude --model claude-sonnet-4-5` sends, served by a role of that name.
[role."claude-sonnet-4-5"]
model = "claude"

[ledger]
path = "ledger.db"
"#,
        openai = openai.base_url(),
    )
}

async fn gateway(config: &str) -> Gateway {
    let env = [("WEIR_TEST_KEY", OPENAI_KEY), ("WEIR_ANTHROPIC_KEY", ANTHROPIC_KEY)];
    Gateway::start_with(config, &env, None).await
}

fn ledger(gateway: &Gateway) -> Vec<Value> {
    closed_records(&gateway.dir().join("ledger.db"))
}

/// Posts `body` to `path` as Claude Code does (`x-api-key`, its betas); returns the status,
/// the headers and the body text.
async fn post(gateway: &Gateway, path: &str, key: &str, body: &Value) -> (u16, reqwest::header::HeaderMap, String) {
    let response = reqwest::Client::new()
        .post(gateway.url(path))
        .header("content-type", "application/json")
        .header("x-api-key", key)
        .header("anthropic-version", "2023-06-01")
        .header("anthropic-beta", CLAUDE_CODE_BETAS)
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    (status, headers, response.text().await.unwrap())
}

fn header<'a>(headers: &'a reqwest::header::HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).map(|value| value.to_str().unwrap())
}

/// The text of a tool result's content, a string or text blocks (Anthropic's and OpenAI's).
fn text_in(content: &Value) -> String {
    match content {
        Value::String(text) => text.clone(),
        Value::Array(blocks) => blocks.iter().filter_map(|block| block["text"].as_str()).collect(),
        _ => String::new(),
    }
}

#[tokio::test]
async fn claude_codes_captured_request_on_a_claude_entry_is_answered_with_its_thinking_omitted() {
    let openai = FakeUpstream::start().await;
    let anthropic = FakeUpstream::start().await;
    anthropic.push(anthropic_wire::stream(vec![
        message_start(120, 0, 0),
        content_block_start(0, &empty_thinking_block()),
        thinking_delta(0, "secret reasoning about weir-ok"),
        signature_delta(0, "EqQBCkYIBxgCKkBweir"),
        content_block_stop(0),
        content_block_start(1, &anthropic_wire::empty_text_block()),
        text_delta(1, "The command printed weir-ok."),
        content_block_stop(1),
        message_delta("end_turn", None, 12),
        message_stop(),
    ]));
    let gateway = gateway(&config(&openai, &format!("http://{}", anthropic.addr()), "")).await;
    let captured = captured_request();

    let (status, headers, body) = post(&gateway, "/v1/messages?beta=true", "unused", &captured).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(header(&headers, "x-weir-model"), Some("claude"));
    assert_eq!(header(&headers, "x-weir-role"), Some("chat"));
    assert_eq!(header(&headers, "x-weir-dropped-fields"), Some("tools.defer_loading"));
    assert_eq!(header(&headers, "x-weir-dropped-betas"), None, "the direct API takes any beta");
    assert_eq!(header(&headers, "x-weir-dropped-tools"), None, "Claude Code sent only client tools");
    let events = sse_events(&body);
    assert!(!body.contains("secret reasoning"), "display omitted: no thinking text reaches the caller\n{body}");
    let signature = events.iter().find(|(_, data)| data["delta"]["type"] == "signature_delta").unwrap();
    assert_eq!(signature.1["delta"]["signature"], "EqQBCkYIBxgCKkBweir", "the signature is kept for the next turn");
    let text: String = events.iter().filter_map(|(_, data)| data["delta"]["text"].as_str()).collect();
    assert_eq!(text, "The command printed weir-ok.");

    // What Anthropic received: the translation, Claude Code's own fields and betas as
    // it sent them, nothing of what was dropped.
    let sent = anthropic.received()[0].json();
    assert_eq!(sent["context_management"], captured["context_management"], "a native field, sent as written");
    assert_eq!(sent["model"], "claude-sonnet-4-5");
    assert_eq!(sent["stream"], true);
    assert_eq!(
        sent["thinking"],
        json!({"type": "enabled", "budget_tokens": 2048}),
        "adaptive thinking at output_config.effort high, through the entry's thinking budget"
    );
    for dropped in ["output_config", "metadata"] {
        assert!(sent.get(dropped).is_none(), "{dropped} is not sent: {sent}");
    }
    let tools: Vec<&str> = sent["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    let asked: Vec<&str> = captured["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(tools, asked, "every client tool is offered, the deferred one included");
    assert!(sent["tools"].as_array().unwrap().iter().all(|t| t.get("defer_loading").is_none()));
    let turns = sent["messages"].as_array().unwrap();
    assert_eq!(turns.len(), 3, "user (with the system message as user text), assistant, user");
    assert!(turns[0].to_string().contains("<system-reminder>\\n# Environment"), "{}", turns[0]);
    assert_eq!(turns[1]["content"][0]["type"], "tool_use");
    let result = &turns[2]["content"][0];
    assert_eq!(result["type"], "tool_result");
    assert_eq!(text_in(&result["content"]), "weir-ok");
    let forwarded_betas = anthropic.received()[0].header("anthropic-beta").unwrap_or_default().to_owned();
    assert_eq!(forwarded_betas, CLAUDE_CODE_BETAS, "every beta Claude Code named, in its order");

    let records = ledger(&gateway);
    assert_eq!(records.len(), 1, "{records:?}");
    let record = &records[0];
    assert_eq!(record["route"], "anthropic_messages");
    assert_eq!(record["category"], "ok");
    assert_eq!(record["model"], "claude");
    assert_eq!(record["role"], "chat");
    assert_eq!(record["notes"], json!(["field_dropped:tools.defer_loading", "system_message_as_user"]));
    assert_eq!(record["client"]["metadata"], captured["metadata"], "metadata.user_id recorded as sent");
    assert_eq!(record["client"]["betas"][0], "claude-code-20250219");
    assert_eq!(record["client"]["betas"].as_array().unwrap().len(), 7);
    assert!(record.get("key_id").is_none() && record.get("member").is_none(), "the body never says who called");
}

#[tokio::test]
async fn claude_codes_captured_request_on_a_gpt_entry_is_translated_to_chat_completions() {
    let openai = FakeUpstream::start().await;
    let anthropic = FakeUpstream::start().await;
    let gateway = gateway(&config(&openai, &format!("http://{}", anthropic.addr()), "")).await;
    let mut captured = captured_request();
    captured["model"] = json!("fast");

    let (status, headers, body) = post(&gateway, "/v1/messages?beta=true", "unused", &captured).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(header(&headers, "x-weir-model"), Some("gpt"));
    assert_eq!(header(&headers, "x-weir-dropped-fields"), Some("tools.defer_loading, context_management"));
    assert_eq!(header(&headers, "x-weir-dropped-betas"), Some(CLAUDE_CODE_BETAS.replace(',', ", ").as_str()));
    let events = sse_events(&body);
    assert_eq!(events.first().unwrap().0, "message_start");
    assert_eq!(events.last().unwrap().0, "message_stop");
    assert!(events.iter().any(|(_, data)| data["delta"]["type"] == "text_delta"), "{body}");

    assert!(anthropic.received().is_empty());
    let sent = openai.received()[0].json();
    assert_eq!(sent["model"], "gpt-4.1");
    let messages = sent["messages"].as_array().unwrap();
    assert_eq!(messages[0]["role"], "system");
    assert!(text_in(&messages[0]["content"]).contains("Claude agent"), "{}", messages[0]);
    let tool = messages.iter().find(|m| m["role"] == "tool").unwrap();
    assert_eq!(text_in(&tool["content"]), "weir-ok");
    let call = messages.iter().find(|m| m["role"] == "assistant").unwrap();
    assert_eq!(call["tool_calls"][0]["function"]["name"], "Bash");
    assert_eq!(sent["tools"].as_array().unwrap().len(), captured["tools"].as_array().unwrap().len());
    assert!(messages.iter().any(|m| m["role"] == "user" && text_in(&m["content"]).contains("<system-reminder>")));
    for absent in ["context_management", "thinking", "metadata", "output_config", "reasoning_effort"] {
        assert!(sent.get(absent).is_none(), "{absent} is not sent to an entry without `reasoning`: {sent}");
    }

    let records = ledger(&gateway);
    let record = &records[0];
    assert_eq!((record["model"].as_str(), record["role"].as_str()), (Some("gpt"), Some("fast")));
    let notes: Vec<&str> = record["notes"].as_array().unwrap().iter().map(|n| n.as_str().unwrap()).collect();
    let betas = CLAUDE_CODE_BETAS.split(',').map(|beta| format!("beta_dropped:{beta}"));
    let expected: Vec<String> =
        ["field_dropped:tools.defer_loading", "system_message_as_user", "field_dropped:context_management"]
            .into_iter()
            .map(str::to_owned)
            .chain(betas)
            .chain(["effort_not_applied".to_owned()])
            .collect();
    assert_eq!(notes, expected, "the route's notes, what the GPT entry was not handed, then the policy's");
    assert_eq!(record["client"]["metadata"], captured["metadata"]);
}

#[tokio::test]
async fn a_claude_model_id_resolves_through_a_role_of_that_name() {
    let openai = FakeUpstream::start().await;
    let anthropic = FakeUpstream::start().await;
    anthropic.push(anthropic_wire::stream(sse_text_events(&["ok"], "end_turn", 10, 1)));
    let gateway = gateway(&config(&openai, &format!("http://{}", anthropic.addr()), "")).await;
    let mut captured = captured_request();
    captured["model"] = json!("claude-sonnet-4-5");
    let (status, headers, body) = post(&gateway, "/v1/messages?beta=true", "unused", &captured).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(header(&headers, "x-weir-model"), Some("claude"));
    assert_eq!(header(&headers, "x-weir-role"), Some("claude-sonnet-4-5"));
    assert_eq!(anthropic.received()[0].json()["model"], "claude-sonnet-4-5", "the entry's wire id");
    assert_eq!(ledger(&gateway)[0]["role"], "claude-sonnet-4-5");
}

#[tokio::test]
async fn the_official_client_beta_surface_and_count_tokens_on_both_entries() {
    let openai = FakeUpstream::start().await;
    let anthropic = FakeUpstream::start().await;
    anthropic.push(anthropic_wire::message(
        vec![
            anthropic_wire::thinking_block("the capital is Paris", "sig-python"),
            anthropic_wire::text_block("Paris."),
        ],
        "end_turn",
        anthropic_wire::usage_json(20, 8, 0, 0),
    ));
    // Anthropic's own counts, for the plain request and the one with a tool.
    anthropic.push(anthropic_wire::json_response(200, &json!({"input_tokens": 14})));
    anthropic.push(anthropic_wire::json_response(200, &json!({"input_tokens": 431})));
    let gateway = gateway(&config(&openai, &format!("http://{}", anthropic.addr()), "")).await;

    let base = gateway.base_url.clone();
    let claude =
        tokio::task::spawn_blocking(move || run_anthropic_client(&base, "claude", "beta,count")).await.unwrap();
    let beta = &claude[0];
    assert_eq!(beta["text"], "Paris.");
    assert_eq!(
        beta["blocks"][0],
        json!({"type": "thinking", "thinking": "", "signature": "sig-python"}),
        "display omitted: the signature without the text"
    );
    assert_eq!(beta["dropped_fields"], Value::Null, "context_management is sent to Anthropic");
    let sent = anthropic.received()[0].clone();
    assert_eq!(sent.query.as_deref(), None, "the gateway calls the provider's own path");
    let sent = sent.json();
    assert_eq!(sent["thinking"], json!({"type": "enabled", "budget_tokens": 1024}), "effort low's budget");
    assert!(sent.get("context_management").is_some() && sent.get("metadata").is_none());
    let count = &claude[1];
    assert_eq!((count["input_tokens"].as_u64(), count["marked"].as_str()), (Some(14), Some("provider")), "{count}");
    assert_eq!((count["beta_input_tokens"].as_u64(), count["beta_marked"].as_str()), (Some(431), Some("provider")));
    assert_eq!(count["beta_dropped_fields"], Value::Null);
    let counted = &anthropic.received()[2];
    assert_eq!(counted.path, "/v1/messages/count_tokens");
    assert!(counted.header("anthropic-beta").unwrap().contains("context-management-2025-06-27"));
    assert_eq!(counted.header("x-api-key"), Some(ANTHROPIC_KEY), "the host's credential, as for a call");
    let counted = counted.json();
    assert_eq!(counted["model"], "claude-sonnet-4-5");
    assert_eq!(counted["tools"][0]["name"], "get_weather");
    assert!(counted.get("context_management").is_some());
    for absent in ["max_tokens", "stream", "temperature"] {
        assert!(counted.get(absent).is_none(), "{absent} is not a count's: {counted}");
    }
    assert_eq!(anthropic.request_count(), 3, "one call, two counts");

    let base = gateway.base_url.clone();
    let gpt = tokio::task::spawn_blocking(move || run_anthropic_client(&base, "gpt", "beta,count")).await.unwrap();
    assert!(!gpt[0]["text"].as_str().unwrap().is_empty(), "{gpt:?}");
    assert_eq!(gpt[0]["dropped_fields"], "context_management");
    assert_eq!(gpt[1]["marked"], "estimate");
    assert_eq!(gpt[1]["beta_dropped_fields"], "context_management", "an estimate leaves it out");
    let (plain, with_tool) = (gpt[1]["input_tokens"].as_u64().unwrap(), gpt[1]["beta_input_tokens"].as_u64().unwrap());
    assert!(plain > 0 && with_tool > plain, "a tool's schema counts in the estimate: {gpt:?}");
    assert_eq!(openai.request_count(), 1);

    let records = ledger(&gateway);
    assert_eq!(records.len(), 2, "the two calls, not the counts: {records:?}");
    for record in &records {
        assert_eq!(record["client"]["metadata"], json!({"user_id": "python-user-1"}));
        let betas: Vec<&str> =
            record["client"]["betas"].as_array().unwrap().iter().map(|b| b.as_str().unwrap()).collect();
        assert!(betas.contains(&"context-management-2025-06-27"), "{betas:?}");
        let dropped =
            record["notes"].as_array().is_some_and(|notes| notes.contains(&json!("field_dropped:context_management")));
        assert_eq!(dropped, record["model"] == "gpt", "dropped on the GPT entry only: {record}");
    }
}

fn web_search_request(model: &str) -> Value {
    json!({
        "model": model, "max_tokens": 100,
        "tools": [
            {"type": "web_search_20250305", "name": "web_search", "max_uses": 2},
            {"name": "get_weather", "description": "Weather", "input_schema": {"type": "object"}}
        ],
        "messages": [{"role": "user", "content": "Weather in Paris?"}]
    })
}

#[tokio::test]
async fn hosted_tools_are_dropped_and_named_or_refused_under_refuse() {
    let openai = FakeUpstream::start().await;
    let anthropic = FakeUpstream::start().await;
    let endpoint = format!("http://{}", anthropic.addr());

    let dropping = gateway(&config(&openai, &endpoint, "")).await;
    let (status, headers, body) = post(&dropping, "/v1/messages", "unused", &web_search_request("gpt")).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(header(&headers, "x-weir-dropped-tools"), Some("web_search_20250305"));
    let sent = openai.received()[0].json();
    let offered: Vec<&str> =
        sent["tools"].as_array().unwrap().iter().map(|t| t["function"]["name"].as_str().unwrap()).collect();
    assert_eq!(offered, ["get_weather"]);
    let record = &ledger(&dropping)[0];
    let notes: Vec<&str> = record["notes"].as_array().unwrap().iter().map(|n| n.as_str().unwrap()).collect();
    assert!(notes.contains(&"tool_dropped:web_search_20250305"), "{notes:?}");
    assert_eq!(notes.last(), Some(&"effort_not_applied"));
    assert_eq!(
        notes.len(),
        2 + CLAUDE_CODE_BETAS.split(',').count(),
        "the betas the GPT entry was not handed: {notes:?}"
    );

    // Under `refuse` the GPT entry refuses it; the Claude entry (the direct API, which runs
    // Anthropic's server tools) is sent it (see `anthropic_server_tools.rs`).
    let refusing = gateway(&config(&openai, &endpoint, "hosted_tools = \"refuse\"")).await;
    let (status, _, body) = post(&refusing, "/v1/messages", "unused", &web_search_request("gpt")).await;
    let body: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["type"], "invalid_request_error", "{body}");
    assert_eq!(body["error"]["weir_category"], "capability_mismatch", "{body}");
    assert!(body["error"]["message"].as_str().unwrap().contains("web_search_20250305"), "{body}");
    assert_eq!(openai.request_count(), 1, "a refused request sends nothing");
    assert_eq!(anthropic.request_count(), 0);
}

#[tokio::test]
async fn a_field_that_is_not_anthropics_is_still_a_400_naming_it() {
    let openai = FakeUpstream::start().await;
    let anthropic = FakeUpstream::start().await;
    let gateway = gateway(&config(&openai, &format!("http://{}", anthropic.addr()), "")).await;
    let mut body = captured_request();
    body["verbosity"] = json!("low");
    for path in ["/v1/messages?beta=true", "/v1/messages/count_tokens"] {
        let (status, _, answer) = post(&gateway, path, "unused", &body).await;
        let answer: Value = serde_json::from_str(&answer).unwrap();
        assert_eq!(status, 400, "{answer}");
        assert_eq!(answer["error"]["type"], "invalid_request_error");
        assert!(answer["error"]["message"].as_str().unwrap().contains("unknown field `verbosity`"), "{answer}");
    }
    assert_eq!(openai.request_count() + anthropic.request_count(), 0);
}

fn hex_sha256(text: &str) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(text.as_bytes()))
}

#[tokio::test]
async fn count_tokens_is_authenticated_and_model_checked_like_a_call() {
    let openai = FakeUpstream::start().await;
    let anthropic = FakeUpstream::start().await;
    let (restricted, open) = ("weir-test-token-gpt-only", "weir-test-token-any-model");
    let keys = format!(
        "[[key]]\nid = \"gpt-only\"\nmember = \"ana\"\nhash = \"sha256:{}\"\nmodels = [\"gpt\"]\n\n\
         [[key]]\nid = \"any\"\nmember = \"bo\"\nhash = \"sha256:{}\"\n",
        hex_sha256(restricted),
        hex_sha256(open)
    );
    let gateway = gateway(&config(&openai, &format!("http://{}", anthropic.addr()), &keys)).await;
    let count = |model: &str| json!({"model": model, "messages": [{"role": "user", "content": "Hello there"}]});

    let (status, headers, body) = post(&gateway, "/v1/messages/count_tokens", restricted, &count("gpt")).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(header(&headers, "x-weir-token-count"), Some("estimate"));
    assert!(serde_json::from_str::<Value>(&body).unwrap()["input_tokens"].as_u64().unwrap() > 0);

    let cases = [
        (restricted, count("claude"), 403, "permission_error", "permission_denied"),
        (restricted, count("chat"), 403, "permission_error", "permission_denied"),
        (open, count("no-such-model"), 404, "not_found_error", "model_not_found"),
        ("not-a-key", count("gpt"), 401, "authentication_error", "invalid_api_key"),
    ];
    for (key, request, expected_status, error_type, category) in cases {
        let (status, _, body) = post(&gateway, "/v1/messages/count_tokens", key, &request).await;
        let body: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(status, expected_status, "{request}: {body}");
        assert_eq!(body["type"], "error", "the Anthropic envelope: {body}");
        assert_eq!(body["error"]["type"], error_type, "{body}");
        assert_eq!(body["error"]["weir_category"], category, "{body}");
    }
    // The same errors as a call's: the call route refuses the forbidden model alike.
    let call = json!({"model": "claude", "max_tokens": 10, "messages": [{"role": "user", "content": "Hi"}]});
    let (status, _, body) = post(&gateway, "/v1/messages", restricted, &call).await;
    assert_eq!(status, 403, "{body}");
    assert_eq!(openai.request_count() + anthropic.request_count(), 0, "nothing is sent upstream");
    let counted: Vec<Value> = ledger(&gateway).into_iter().filter(|r| r["category"] == "ok").collect();
    assert!(counted.is_empty(), "a count is not a call and is not recorded: {counted:?}");
}

// ---------------------------------------------------------------------------------------
// The released Claude Code against the gateway
// ---------------------------------------------------------------------------------------

/// Every request the fake Anthropic upstream received, as JSON.
#[derive(Clone, Default)]
struct Seen(Arc<Mutex<Vec<Value>>>);

/// A fake Anthropic upstream that plays an agent's turn: while the conversation holds no
/// tool result, it calls the request's shell tool (the tool whose schema takes a
/// `command`) to run `echo weir-ok`; once it holds one, it answers with text.
async fn agent_upstream(State(seen): State<Seen>, body: Bytes) -> Response {
    let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    seen.0.lock().unwrap().push(request.clone());
    let has_result = request["messages"]
        .as_array()
        .and_then(|messages| messages.last())
        .and_then(|last| last["content"].as_array())
        .is_some_and(|blocks| blocks.iter().any(|block| block["type"] == "tool_result"));
    let shell = request["tools"]
        .as_array()
        .and_then(|tools| tools.iter().find(|tool| tool["input_schema"]["properties"].get("command").is_some()))
        .and_then(|tool| tool["name"].as_str());
    let events = match shell {
        Some(name) if !has_result => {
            let input = json!({"command": "echo weir-ok", "description": "Print weir-ok"}).to_string();
            vec![
                message_start(50, 0, 0),
                content_block_start(0, &streamed_tool_use_block("toolu_weir_1", name)),
                input_json_delta(0, &input),
                content_block_stop(0),
                message_delta("tool_use", None, 20),
                message_stop(),
            ]
        }
        _ => sse_text_events(&["Done: ", "weir-ok"], "end_turn", 60, 4),
    };
    let body: Vec<u8> = events.iter().flat_map(|event| event.to_vec()).collect();
    ([("content-type", "text/event-stream"), ("request-id", anthropic_wire::REQUEST_ID)], body).into_response()
}

/// Runs `command` to its end on a blocking thread, killed after `limit`.
async fn run_to_end(mut command: Command, limit: Duration) -> std::process::Output {
    tokio::task::spawn_blocking(move || {
        let mut child = command.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
        let started = Instant::now();
        while child.try_wait().unwrap().is_none() {
            if started.elapsed() > limit {
                child.kill().unwrap();
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        child.wait_with_output().unwrap()
    })
    .await
    .unwrap()
}

#[tokio::test]
async fn claude_code_runs_its_shell_tool_through_the_gateway_and_finishes() {
    let claude = weir_tests::agents::claude_binary();
    let seen = Seen::default();
    let router =
        axum::Router::new().route("/v1/messages", axum::routing::post(agent_upstream)).with_state(seen.clone());
    let anthropic = serve_router(router).await;
    let openai = FakeUpstream::start().await;
    let token = "weir-test-token-claude-code";
    let keys = format!("[[key]]\nid = \"cc\"\nmember = \"ana\"\nhash = \"sha256:{}\"\n", hex_sha256(token));
    let gateway = gateway(&config(&openai, &anthropic, &keys)).await;

    let home = tempfile::tempdir().unwrap();
    let project = tempfile::tempdir().unwrap();
    let mut command = Command::new(&claude);
    command
        .args(["-p", "Run `echo weir-ok` with your shell tool.", "--allowedTools", "Bash", "--output-format", "json"])
        .current_dir(project.path())
        .stdin(Stdio::null())
        .env("HOME", home.path())
        .env("ANTHROPIC_BASE_URL", &gateway.base_url)
        .env("ANTHROPIC_API_KEY", token)
        .env_remove("ANTHROPIC_AUTH_TOKEN")
        // The main model is a role; the small fast one (titles, summaries) another.
        .env("ANTHROPIC_MODEL", "chat")
        .env("ANTHROPIC_DEFAULT_HAIKU_MODEL", "fast")
        .env("DISABLE_TELEMETRY", "1")
        .env("DISABLE_AUTOUPDATER", "1")
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1");
    let output = run_to_end(command, Duration::from_secs(240)).await;
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "claude -p failed ({}):\nstdout:\n{stdout}\nstderr:\n{}\ngateway:\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr),
        gateway.stderr()
    );
    let result: Value = serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{e}: {stdout}"));
    assert_eq!(result["is_error"], false, "{result}");
    assert_eq!(result["result"], "Done: weir-ok", "{result}");

    let requests = seen.0.lock().unwrap().clone();
    assert!(requests.len() >= 2, "{requests:?}");
    assert!(requests.iter().all(|r| r["model"] == "claude-sonnet-4-5"), "every request resolved to the entry");
    let with_result = requests
        .iter()
        .find(|r| r["messages"].to_string().contains("tool_result"))
        .expect("the second turn carries the tool's result");
    let last = with_result["messages"].as_array().unwrap().last().unwrap();
    let result_block = last["content"].as_array().unwrap().iter().find(|b| b["type"] == "tool_result").unwrap();
    assert_eq!(result_block["tool_use_id"], "toolu_weir_1");
    assert!(text_in(&result_block["content"]).contains("weir-ok"), "{result_block}");
    assert!(
        requests.iter().any(|r| r.get("context_management").is_some()),
        "Claude Code's own field reaches Anthropic"
    );

    let records = ledger(&gateway);
    let calls: Vec<&Value> = records.iter().filter(|r| r["route"] == "anthropic_messages").collect();
    assert!(calls.len() >= 2, "both turns recorded: {records:?}");
    for call in &calls {
        assert_eq!(call["category"], "ok", "{call}");
        assert_eq!(call["key_id"], "cc", "the caller is its key's");
        assert_eq!(call["role"], "chat");
        assert!(call["client"]["betas"].as_array().unwrap().contains(&json!("claude-code-20250219")), "{call}");
        let notes = call["notes"].as_array().unwrap();
        assert!(!notes.contains(&json!("field_dropped:context_management")), "{call}");
        assert!(!notes.iter().any(|note| note.as_str().unwrap().starts_with("beta_dropped:")), "{call}");
    }
}

/// A count the provider fails to give (an error status, an answer that is not a count)
/// is answered with Weir's estimate, marked as such, and the server log says why; the
/// caller never sees the provider's error.
#[tokio::test]
async fn a_provider_count_that_fails_is_answered_with_the_estimate() {
    let openai = FakeUpstream::start().await;
    let anthropic = FakeUpstream::start().await;
    anthropic.push(anthropic_wire::error(529, "overloaded_error", "Overloaded: the secret upstream detail"));
    anthropic.push(anthropic_wire::json_response(200, &json!({"tokens": "many"})));
    let gateway = gateway(&config(&openai, &format!("http://{}", anthropic.addr()), "")).await;
    let count = json!({"model": "claude", "messages": [{"role": "user", "content": "Hello there"}]});
    for _ in 0..2 {
        let (status, headers, body) = post(&gateway, "/v1/messages/count_tokens", "unused", &count).await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(header(&headers, "x-weir-token-count"), Some("estimate"));
        assert!(!body.contains("secret upstream detail"), "{body}");
        assert!(serde_json::from_str::<Value>(&body).unwrap()["input_tokens"].as_u64().unwrap() > 0);
    }
    assert_eq!(anthropic.request_count(), 2, "each count asked the provider once");
    gateway.wait_for_stderr("the count endpoint answered HTTP 529", Duration::from_secs(5)).await;
    gateway.wait_for_stderr("the provider's token count failed", Duration::from_secs(5)).await;
}
