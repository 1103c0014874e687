//! Anthropic's server tools on `/v1/messages`, through the real `weir` binary and the
//! official `anthropic` Python client: `web_search_20250305` goes to a Claude entry on the
//! direct API (the fake speaking `weir_tests::anthropic_wire`), whose answer's own blocks
//! (`server_tool_use`, `web_search_tool_result`, a text with `citations`) come back in
//! place, whole and streamed, with `usage.server_tool_use`; the next turn carrying those
//! blocks reaches the upstream as the upstream wrote them; the ledger records them. A
//! stream goes live with those blocks in place (the component's `native-stream`): the
//! client reads the first text while the upstream still holds the rest; under
//! `hosted_tool_streams = "whole"` it is taken whole and replayed. On a
//! GPT entry the tool is dropped and named (or refused under `hosted_tools = "refuse"`), and
//! a history carrying Anthropic's own blocks is refused there, never forwarded. (Which
//! Claude surfaces take server tools is `weir_sdk::anthropic::native::support`'s, tested
//! there.)

// Test code: a failed step should stop the test with its message.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use serde_json::{Value, json};
use weir_tests::anthropic_wire::{self, usage_json};
use weir_tests::gateway::closed_records;
use weir_tests::python::{run_anthropic_client, run_anthropic_client_with};
use weir_tests::{FakeUpstream, Gateway, Scripted, openai_wire};

const OPENAI_KEY: &str = "sk-weir-test-secret-0123456789";
const ANTHROPIC_KEY: &str = "sk-ant-weir-test-0123456789";

/// `claude` on the direct API, `gpt` on the fake OpenAI upstream, `extra` lines at the top.
fn config(anthropic: &FakeUpstream, openai: &FakeUpstream, extra: &str) -> String {
    format!(
        r#"
read_timeout_secs = 10
# No breakpoints: what the upstream receives is compared block for block.
prompt_cache = "off"
{extra}

[[model]]
id = "claude"
provider = "anthropic"
wire_id = "claude-sonnet-4-5"
endpoint = "http://{anthropic}"
credential = "weir-anthropic-key"
max_output_tokens = 8000
context_window = 200000
max_retries = 0

[[model]]
id = "gpt"
provider = "openai"
wire_id = "gpt-4.1"
endpoint = "{openai}"
credential = "weir-test-key"
max_output_tokens = 8000
context_window = 100000
max_retries = 0

[ledger]
path = "ledger.db"
record_content = true
"#,
        anthropic = anthropic.addr(),
        openai = openai.base_url(),
    )
}

async fn gateway(config: &str) -> Gateway {
    let env = [("WEIR_TEST_KEY", OPENAI_KEY), ("WEIR_ANTHROPIC_KEY", ANTHROPIC_KEY)];
    Gateway::start_with(config, &env, None).await
}

fn web_search_tool() -> Value {
    json!({"type": "web_search_20250305", "name": "web_search", "max_uses": 2})
}

/// What Anthropic answers a web search with: its narration, the search's call and result,
/// and the cited answer.
fn searched_content() -> Vec<Value> {
    vec![
        json!({"type": "text", "text": "Let me search."}),
        json!({"type": "server_tool_use", "id": "srvtoolu_01A", "name": "web_search", "input": {"query": "weir gateway"}}),
        json!({"type": "web_search_tool_result", "tool_use_id": "srvtoolu_01A", "content": [
            {"type": "web_search_result", "url": "https://weir.example/", "title": "Weir",
             "encrypted_content": "EqgfCioIARgBIiQ3", "page_age": "April 30, 2026"}
        ]}),
        json!({"type": "text", "text": "Weir is an LLM gateway.", "citations": [
            {"type": "web_search_result_location", "url": "https://weir.example/", "title": "Weir",
             "encrypted_index": "Eo8BCioIAhgBIiQy", "cited_text": "Weir is an LLM gateway written in Rust."}
        ]}),
    ]
}

fn searched_usage() -> Value {
    let mut usage = usage_json(120, 60, 0, 0);
    usage["server_tool_use"] = json!({"web_search_requests": 1});
    usage
}

fn searched_message() -> weir_tests::Scripted {
    anthropic_wire::message(searched_content(), "end_turn", searched_usage())
}

#[tokio::test]
async fn web_search_goes_to_the_direct_api_and_its_blocks_come_back_in_place_whole_and_streamed() {
    let anthropic = FakeUpstream::start().await;
    let openai = FakeUpstream::start().await;
    let gateway = gateway(&config(&anthropic, &openai, "hosted_tool_streams = \"whole\"")).await;
    anthropic.push(searched_message());
    anthropic.push(anthropic_wire::text_message("Gateway."));
    anthropic.push(searched_message());
    let base = gateway.base_url.clone();
    let lines =
        tokio::task::spawn_blocking(move || run_anthropic_client(&base, "claude", "web_search,stream_web_search"))
            .await
            .unwrap();

    // What the upstream received: the server tool as the caller wrote it.
    let received = anthropic.received();
    assert_eq!(received.len(), 3);
    let first = received[0].json();
    assert_eq!(first["tools"], json!([web_search_tool()]), "{first}");

    // What the client parsed: every block in place, the citations, the usage.
    let whole = &lines[0];
    assert_eq!(whole["blocks"], json!(searched_content()), "{whole}");
    assert_eq!(whole["usage"]["server_tool_use"], json!({"web_search_requests": 1}), "{whole}");
    assert_eq!(whole["usage"]["input_tokens"], 120);
    assert_eq!(whole["dropped_tools"], Value::Null, "nothing was dropped");
    assert_eq!(whole["answer"], "Gateway.");

    // The next turn: the blocks the client sent back reach the upstream as it wrote them.
    let second = received[1].json();
    assert_eq!(second["tools"], json!([web_search_tool()]));
    let history = second["messages"].as_array().unwrap();
    assert_eq!(history.len(), 3, "{second}");
    assert_eq!(history[1]["role"], "assistant");
    assert_eq!(history[1]["content"], json!(searched_content()), "{second}");

    // Streamed: the same blocks, each started, carried and stopped in order.
    let streamed = &lines[1];
    assert_eq!(streamed["blocks"], json!(searched_content()), "{streamed}");
    assert_eq!(streamed["usage"]["server_tool_use"], json!({"web_search_requests": 1}), "{streamed}");
    let events: Vec<&str> = streamed["events"].as_array().unwrap().iter().map(|e| e.as_str().unwrap()).collect();
    assert_eq!(events.first(), Some(&"message_start"));
    assert_eq!(events.iter().filter(|e| **e == "content_block_start").count(), 4, "{events:?}");
    assert_eq!(events.iter().filter(|e| **e == "content_block_stop").count(), 4, "{events:?}");
    assert_eq!(events.last(), Some(&"message_stop"));
    assert_eq!(streamed["deltas"], json!(["text_delta", "text_delta", "citations_delta"]), "{streamed}");
    let third = received[2].json();
    assert_eq!(third["tools"], json!([web_search_tool()]));
    assert_ne!(third["stream"], json!(true), "under `whole`, a stream with server tools is taken whole and replayed");

    // The ledger: the answer's own blocks in the provider's order, the searches noted.
    let records = closed_records(&gateway.dir().join("ledger.db"));
    assert_eq!(records.len(), 3);
    let record = &records[0];
    let answer = record["content"]["answer"].as_array().unwrap_or_else(|| panic!("{record}"));
    let kinds: Vec<&str> = answer.iter().map(|block| block["type"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["text", "server_tool_use", "web_search_tool_result", "text"], "{record}");
    assert_eq!(answer[1]["native"], searched_content()[1]);
    assert_eq!(answer[3]["native"]["citations"], searched_content()[3]["citations"]);
    assert_eq!(answer[1]["dialect"], "anthropic-messages");
    let notes = record["notes"].as_array().unwrap();
    assert!(notes.contains(&json!("server_tool_use.web_search_requests=1")), "{record}");
    assert!(records[2]["notes"].as_array().unwrap().contains(&json!("stream_replayed_whole")), "{}", records[2]);
}

/// A streamed web search goes live: the upstream holds everything after the narration's
/// text until the official client has read that text, so the client's read proves the
/// text came before the upstream's end; the search's call and result and the cited text
/// follow in place, the count in `message_delta`; the next turn sends them back as written;
/// the ledger row has the searches and no note of a replay or of dropped items.
#[tokio::test]
async fn a_web_search_stream_goes_live_with_its_blocks_in_place() {
    let anthropic = FakeUpstream::start().await;
    let openai = FakeUpstream::start().await;
    let gateway = gateway(&config(&anthropic, &openai, "")).await;
    let gate = gateway.dir().join("first-text-read");
    let opened = Arc::new(AtomicBool::new(false));
    let (before, after) = anthropic_wire::web_search_stream(&searched_content(), 120, 60, 1);
    let headers = anthropic_wire::sse_headers("req_live");
    anthropic.push(Scripted::StreamGated {
        status: 200,
        headers,
        before,
        gate: gate.clone(),
        opened: opened.clone(),
        after,
    });
    anthropic.push(anthropic_wire::text_message("Gateway."));
    let base = gateway.base_url.clone();
    let line = tokio::task::spawn_blocking(move || {
        let env = [("WEIR_GATE_FILE", gate.to_str().unwrap())];
        run_anthropic_client_with(&base, "claude", "live_web_search", &env).remove(0)
    })
    .await
    .unwrap();

    assert!(opened.load(Ordering::SeqCst), "the client read the first text before the upstream's end: {line}");
    assert_eq!(line["first_text"], "Let me search.");
    let received = anthropic.received();
    assert_eq!(received[0].json()["stream"], json!(true), "streamed upstream");
    assert_eq!(line["blocks"], json!(searched_content()), "{line}");
    assert_eq!(line["usage"]["server_tool_use"], json!({"web_search_requests": 1}), "{line}");
    assert_eq!(line["usage"]["input_tokens"], 120);
    let events: Vec<&str> = line["events"].as_array().unwrap().iter().map(|e| e.as_str().unwrap()).collect();
    assert_eq!(events.iter().filter(|e| **e == "content_block_start").count(), 4, "{events:?}");
    assert_eq!(events.iter().filter(|e| **e == "content_block_stop").count(), 4, "{events:?}");
    assert_eq!(line["deltas"], json!(["text_delta", "citations_delta", "text_delta"]), "{line}");
    assert_eq!(line["answer"], "Gateway.");

    // The next turn: the blocks the client assembled from the live stream, as written.
    let second = received[1].json();
    let history = second["messages"].as_array().unwrap();
    assert_eq!(history[1]["content"], json!(searched_content()), "{second}");

    let records = closed_records(&gateway.dir().join("ledger.db"));
    let record = &records[0];
    assert_eq!(record["attempts"][0]["web_searches"], 1, "{record}");
    // The recorded answer: the own blocks in place among the neutral ones.
    let answer = record["content"]["answer"].as_array().unwrap_or_else(|| panic!("{record}"));
    let kinds: Vec<&str> = answer.iter().map(|block| block["type"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["text", "server_tool_use", "web_search_tool_result", "text"], "{record}");
    assert_eq!(answer[1]["native"], searched_content()[1]);
    assert_eq!(answer[2]["dialect"], "anthropic-messages");
    assert_eq!(answer[3]["text"], "Weir is an LLM gateway.");
    let notes = record["notes"].as_array().unwrap();
    for note in ["stream_replayed_whole", "hosted_items_not_streamed", "web_searches_charged_at_bound"] {
        assert!(!notes.contains(&json!(note)), "{note}: {record}");
    }
}

async fn post(gateway: &Gateway, body: &Value) -> (u16, reqwest::header::HeaderMap, Value) {
    let response = reqwest::Client::new()
        .post(gateway.url("/v1/messages"))
        .header("content-type", "application/json")
        .header("anthropic-version", "2023-06-01")
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    (status, headers, response.json().await.unwrap())
}

fn search_request(model: &str) -> Value {
    json!({
        "model": model, "max_tokens": 100,
        "tools": [web_search_tool()],
        "messages": [{"role": "user", "content": "What is Weir?"}]
    })
}

/// A second turn whose history carries the first answer's blocks.
fn follow_up(model: &str, content: Vec<Value>) -> Value {
    json!({
        "model": model, "max_tokens": 100,
        "messages": [
            {"role": "user", "content": "What is Weir?"},
            {"role": "assistant", "content": content},
            {"role": "user", "content": "Thanks."}
        ]
    })
}

#[tokio::test]
async fn elsewhere_the_server_tool_is_dropped_or_refused_and_own_blocks_never_forwarded() {
    let anthropic = FakeUpstream::start().await;
    let openai = FakeUpstream::start().await;
    let dropping = gateway(&config(&anthropic, &openai, "")).await;
    openai.push(openai_wire::completion("Weir is a gateway."));
    let (status, headers, body) = post(&dropping, &search_request("gpt")).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(headers.get("x-weir-dropped-tools").unwrap(), "web_search_20250305");
    assert!(openai.received()[0].json().get("tools").is_none(), "no tool reached OpenAI");

    // A history with a server tool's blocks: refused for the GPT entry, nothing sent.
    let (status, _, body) = post(&dropping, &follow_up("gpt", searched_content())).await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["weir_category"], "capability_mismatch", "{body}");
    assert!(body["error"]["message"].as_str().unwrap().contains("server_tool_use"), "{body}");
    assert_eq!(openai.request_count(), 1);

    // A cited text alone goes as its text: the citations are Anthropic's only.
    openai.push(openai_wire::completion("You are welcome."));
    let cited = searched_content()[3].clone();
    let (status, _, body) = post(&dropping, &follow_up("gpt", vec![cited])).await;
    assert_eq!(status, 200, "{body}");
    let sent = openai.received()[1].json();
    assert_eq!(sent["messages"][1]["content"], "Weir is an LLM gateway.", "{sent}");

    let records = closed_records(&dropping.dir().join("ledger.db"));
    assert!(records[0]["notes"].as_array().unwrap().contains(&json!("tool_dropped:web_search_20250305")));

    // Under `refuse`: the GPT entry refuses the tool; the Claude entry still takes it.
    let refusing = gateway(&config(&anthropic, &openai, "hosted_tools = \"refuse\"")).await;
    let (status, _, body) = post(&refusing, &search_request("gpt")).await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["weir_category"], "capability_mismatch", "{body}");
    assert!(body["error"]["message"].as_str().unwrap().contains("web_search_20250305"), "{body}");
    assert_eq!(openai.request_count(), 2, "a refused request sends nothing");
    anthropic.push(searched_message());
    let (status, headers, body) = post(&refusing, &search_request("claude")).await;
    assert_eq!(status, 200, "{body}");
    assert!(headers.get("x-weir-dropped-tools").is_none());
    assert_eq!(body["content"], json!(searched_content()));
    assert_eq!(anthropic.received()[0].json()["tools"], json!([web_search_tool()]));
}
