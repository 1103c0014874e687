//! Hosted web searches priced, held and charged, through the real `weir` binary: Anthropic's
//! `web_search_20250305` server tool on `/v1/messages` with the official `anthropic` client,
//! and OpenAI's hosted `web_search` on the Responses API, each against a fake upstream
//! speaking its provider's wire. The ledger row's cost is the tokens plus the searches at
//! the entry's `web_search_price`; a USD budget holds the tool's `max_uses` searches before
//! anything is sent and is charged the searches the answer reports; a web search it cannot
//! bound (`max_uses`; OpenAI's `max_tool_calls`) is dropped (or refused under
//! `hosted_tools = "refuse"`), and one on an entry that
//! does not price searches is refused.

// Test code: a failed step should stop the test with its message.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use serde_json::{Value, json};
use weir_tests::anthropic_wire::{self, usage_json};
use weir_tests::gateway::closed_records;
use weir_tests::python::{run_anthropic_client_with, run_responses_client};
use weir_tests::responses_wire::{self, message_item, response};
use weir_tests::{FakeUpstream, Gateway};

const ANTHROPIC_KEY: &str = "sk-ant-weir-test-0123456789";
const OPENAI_KEY: &str = "sk-upstream-0123456789";
/// Member `ana`'s key (her budget is the test's), and `bob`'s (no budget).
const ANA: &str = "sk-weir-ana-1";
const BOB: &str = "sk-weir-bob-1";
/// USD per thousand web searches, as Anthropic and OpenAI bill them.
const WEB_SEARCH_PRICE: f64 = 10.0;

/// `claude` (prices web searches) and `claude-plain` (does not) on the fake Anthropic
/// upstream, `gpt5` on the fake Responses upstream; `ana` and `bob`; `extra` at the top
/// and `budgets` after the keys.
fn config(anthropic: &FakeUpstream, openai: &FakeUpstream, extra: &str, budgets: &str) -> String {
    format!(
        r#"
read_timeout_secs = 10
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
input_price = 3.0
output_price = 15.0
web_search_price = {WEB_SEARCH_PRICE}

[[model]]
id = "claude-plain"
provider = "anthropic"
wire_id = "claude-sonnet-4-5"
endpoint = "http://{anthropic}"
credential = "weir-anthropic-key"
max_output_tokens = 8000
context_window = 200000
max_retries = 0
input_price = 3.0
output_price = 15.0

[[model]]
id = "gpt5"
provider = "openai-responses"
wire_id = "gpt-5"
endpoint = "{openai}"
credential = "weir-test-key"
max_output_tokens = 8000
output_tokens = 1000
context_window = 400000
max_retries = 0
input_price = 1.25
output_price = 10.0
web_search_price = {WEB_SEARCH_PRICE}

[[key]]
id = "ana"
member = "ana"
hash = "{ana}"

[[key]]
id = "bob"
member = "bob"
hash = "{bob}"

{budgets}

[ledger]
path = "ledger.db"
"#,
        anthropic = anthropic.addr(),
        openai = openai.base_url(),
        ana = weir_host::identity::hash_of(ANA),
        bob = weir_host::identity::hash_of(BOB),
    )
}

async fn gateway(config: &str) -> Gateway {
    Gateway::start_with(config, &[("WEIR_ANTHROPIC_KEY", ANTHROPIC_KEY), ("WEIR_TEST_KEY", OPENAI_KEY)], None).await
}

/// Anthropic's answer to a question it searched the web for `searches` times: 120 tokens
/// in, 60 out.
fn searched_message(searches: u64) -> weir_tests::Scripted {
    let mut usage = usage_json(120, 60, 0, 0);
    usage["server_tool_use"] = json!({"web_search_requests": searches});
    let content = vec![
        json!({"type": "server_tool_use", "id": "srvtoolu_01A", "name": "web_search", "input": {"query": "weir"}}),
        json!({"type": "web_search_tool_result", "tool_use_id": "srvtoolu_01A", "content": [
            {"type": "web_search_result", "url": "https://weir.example/", "title": "Weir",
             "encrypted_content": "EqgfCioIARgBIiQ3", "page_age": "April 30, 2026"}
        ]}),
        json!({"type": "text", "text": "Weir is an LLM gateway."}),
    ];
    anthropic_wire::message(content, "end_turn", usage)
}

/// 120 tokens in and 60 out at $3 / $15 per million.
const TOKENS_COST: f64 = (120.0 * 3.0 + 60.0 * 15.0) / 1_000_000.0;

/// One `budgeted_web_search` step of the official client as `key`, the tool's `max_uses`
/// being `max_uses` (`none`: it has none).
async fn ask(gateway: &Gateway, model: &str, key: &'static str, max_uses: &'static str) -> Value {
    let base = gateway.base_url.clone();
    let model = model.to_owned();
    tokio::task::spawn_blocking(move || {
        let env = [("WEIR_CALLER_KEY", key), ("WEIR_MAX_USES", max_uses)];
        run_anthropic_client_with(&base, &model, "budgeted_web_search", &env).remove(0)
    })
    .await
    .unwrap()
}

fn close(actual: f64, expected: f64) -> bool {
    (actual - expected).abs() < 1e-9
}

#[tokio::test]
async fn the_searches_are_costed_on_the_record_and_charged_to_the_budget() {
    let anthropic = FakeUpstream::start().await;
    let openai = FakeUpstream::start().await;
    // Held: ~$0.0076 of tokens (500 output at $15/M) plus 2 searches at $0.01 each.
    let gateway = gateway(&config(&anthropic, &openai, "", "[member.ana]\ndaily_usd = 0.04\n")).await;
    anthropic.push(searched_message(2));
    let first = ask(&gateway, "claude", ANA, "2").await;
    assert_eq!(first["status"], 200, "{first}");
    assert_eq!(first["usage"]["server_tool_use"]["web_search_requests"], 2, "{first}");
    assert_eq!(anthropic.received()[0].json()["tools"][0]["max_uses"], 2);

    let records = closed_records(&gateway.dir().join("ledger.db"));
    let record = &records[0];
    assert_eq!(record["attempts"][0]["web_searches"], 2, "{record}");
    let cost = record["cost_usd"].as_f64().unwrap();
    assert!(close(cost, TOKENS_COST + 2.0 * WEB_SEARCH_PRICE / 1000.0), "{cost}: {record}");

    // The budget was charged the searches: $0.0187 is left, and the next call's hold
    // (~$0.0276) does not fit. Charged the tokens alone, it would have.
    let second = ask(&gateway, "claude", ANA, "2").await;
    assert_eq!(second["status"], 429, "{second}");
    assert_eq!(second["category"], "budget_exhausted", "{second}");
    assert_eq!(anthropic.request_count(), 1, "the refused call sent nothing");
}

#[tokio::test]
async fn a_budget_that_holds_the_tokens_but_not_the_searches_refuses_before_sending() {
    let anthropic = FakeUpstream::start().await;
    let openai = FakeUpstream::start().await;
    let gateway = gateway(&config(&anthropic, &openai, "", "[member.ana]\ndaily_usd = 0.015\n")).await;
    let refused = ask(&gateway, "claude", ANA, "2").await;
    assert_eq!(refused["status"], 429, "{refused}");
    assert_eq!(refused["category"], "budget_exhausted", "{refused}");
    assert_eq!(anthropic.request_count(), 0, "the upstream saw no request");

    // The same call without the tool fits: the searches were what did not.
    anthropic.push(anthropic_wire::text_message("Weir is a gateway."));
    let body = json!({"model": "claude", "max_tokens": 500,
        "messages": [{"role": "user", "content": "What is Weir?"}]});
    let plain =
        gateway.post_json("/v1/messages", &body, &[("x-api-key", ANA), ("anthropic-version", "2023-06-01")]).await;
    assert_eq!(plain.status, 200, "{:?}", plain.body);
    assert_eq!(anthropic.request_count(), 1);
}

#[tokio::test]
async fn an_unbounded_search_under_a_usd_budget_is_dropped_or_refused_and_an_unpriced_one_refused() {
    let anthropic = FakeUpstream::start().await;
    let openai = FakeUpstream::start().await;
    let budget = "[member.ana]\ndaily_usd = 5.0\n";
    let dropping = gateway(&config(&anthropic, &openai, "", budget)).await;
    anthropic.push(anthropic_wire::text_message("Weir is a gateway."));
    let dropped = ask(&dropping, "claude", ANA, "none").await;
    assert_eq!(dropped["status"], 200, "{dropped}");
    assert_eq!(dropped["dropped_tools"], "web_search_20250305", "{dropped}");
    assert!(anthropic.received()[0].json().get("tools").is_none(), "no search tool was sent");
    let records = closed_records(&dropping.dir().join("ledger.db"));
    assert!(records[0]["notes"].as_array().unwrap().contains(&json!("tool_dropped:web_search_20250305")));

    // Without a budget, the same tool goes as the caller wrote it (the record still costs
    // what the searches were).
    anthropic.push(searched_message(3));
    let free = ask(&dropping, "claude", BOB, "none").await;
    assert_eq!(free["status"], 200, "{free}");
    assert_eq!(free["dropped_tools"], Value::Null, "{free}");
    assert_eq!(anthropic.received()[1].json()["tools"][0]["type"], "web_search_20250305");
    let records = closed_records(&dropping.dir().join("ledger.db"));
    let cost = records[1]["cost_usd"].as_f64().unwrap();
    assert!(close(cost, TOKENS_COST + 3.0 * WEB_SEARCH_PRICE / 1000.0), "{cost}");

    // On an entry without `web_search_price`, a USD budget cannot count the searches.
    let unpriced = ask(&dropping, "claude-plain", ANA, "2").await;
    assert_eq!(unpriced["status"], 400, "{unpriced}");
    assert_eq!(unpriced["category"], "invalid_request", "{unpriced}");
    assert!(unpriced["message"].as_str().unwrap().contains("web_search_price"), "{unpriced}");
    assert_eq!(anthropic.request_count(), 2, "nothing sent");

    let refusing = gateway(&config(&anthropic, &openai, "hosted_tools = \"refuse\"", budget)).await;
    let refused = ask(&refusing, "claude", ANA, "none").await;
    assert_eq!(refused["status"], 400, "{refused}");
    assert_eq!(refused["category"], "capability_mismatch", "{refused}");
    assert!(refused["message"].as_str().unwrap().contains("web_search_20250305"), "{refused}");
    assert_eq!(anthropic.request_count(), 2, "nothing sent");
}

/// A truncated answer's escalation is held for what the first attempt spent, its searches
/// included, plus its own worst case and bound: a per-call ceiling that the tokens alone
/// would fit refuses the escalation before it is sent.
#[tokio::test]
async fn an_escalation_tops_the_hold_up_with_the_searches_already_spent() {
    let anthropic = FakeUpstream::start().await;
    let openai = FakeUpstream::start().await;
    // First hold: ~$0.0016 of tokens + $0.02 of searches. The escalation to the entry's
    // 8 000 output tokens: ~$0.1204 + $0.02 of searches, plus the first attempt's $0.0019 of
    // tokens = ~$0.142 (fits $0.15), plus its 2 searches = ~$0.162 (does not).
    let gateway = gateway(&config(
        &anthropic,
        &openai,
        "",
        "[member.ana]
max_call_usd = 0.15
",
    ))
    .await;
    let mut usage = usage_json(120, 100, 0, 0);
    usage["server_tool_use"] = json!({"web_search_requests": 2});
    let truncated = vec![json!({"type": "text", "text": "Weir is"})];
    anthropic.push(anthropic_wire::message(truncated, "max_tokens", usage));
    let body = json!({"model": "claude", "max_tokens": 100,
        "tools": [{"type": "web_search_20250305", "name": "web_search", "max_uses": 2}],
        "messages": [{"role": "user", "content": "What is Weir?"}]});
    let headers = [("x-api-key", ANA), ("anthropic-version", "2023-06-01"), ("x-weir-truncation", "escalate")];
    let answer = gateway.post_json("/v1/messages", &body, &headers).await;
    assert_eq!(answer.status, 400, "{:?}", answer.body);
    assert_eq!(answer.body["error"]["weir_category"], "call_budget_exceeded", "{:?}", answer.body);
    assert_eq!(anthropic.request_count(), 1, "the escalation was not sent");

    let records = closed_records(&gateway.dir().join("ledger.db"));
    let attempts = records[0]["attempts"].as_array().unwrap();
    assert_eq!(attempts[0]["web_searches"], 2, "{}", records[0]);
    assert_eq!(
        (attempts[1]["reason"].as_str(), attempts[1]["category"].as_str()),
        (Some("escalation"), Some("call_budget_exceeded"))
    );
    let cost = records[0]["cost_usd"].as_f64().unwrap();
    let first = (120.0 * 3.0 + 100.0 * 15.0) / 1_000_000.0 + 2.0 * WEB_SEARCH_PRICE / 1000.0;
    assert!(close(cost, first), "the first attempt's searches are charged: {cost}");
}

/// A web search answer's blocks: the call (its input in deltas), the result, the text.
fn searched_content() -> Vec<Value> {
    vec![
        json!({"type": "text", "text": "Searching."}),
        json!({"type": "server_tool_use", "id": "srvtoolu_01A", "name": "web_search", "input": {"query": "weir"}}),
        json!({"type": "web_search_tool_result", "tool_use_id": "srvtoolu_01A", "content": [
            {"type": "web_search_result", "url": "https://weir.example/", "title": "Weir",
             "encrypted_content": "EqgfCioIARgBIiQ3", "page_age": "April 30, 2026"}
        ]}),
        json!({"type": "text", "text": "Weir is an LLM gateway."}),
    ]
}

/// A streamed web search call as `key`, its tool bounded at `max_uses` 2; the body the
/// gateway streamed back.
async fn stream_as(gateway: &Gateway, key: &str) -> String {
    let body = json!({"model": "claude", "max_tokens": 500, "stream": true,
        "tools": [{"type": "web_search_20250305", "name": "web_search", "max_uses": 2}],
        "messages": [{"role": "user", "content": "What is Weir?"}]});
    let response = reqwest::Client::new()
        .post(gateway.url("/v1/messages"))
        .header("x-api-key", key)
        .header("anthropic-version", "2023-06-01")
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 200);
    response.text().await.unwrap()
}

/// A streamed web search under a USD budget goes live with its blocks (the Anthropic
/// component's native stream counts the searches), and is charged its tokens plus the
/// searches the stream's `server_tool_use` reported, at the entry's price.
#[tokio::test]
async fn a_live_hosted_stream_under_a_budget_is_charged_its_tokens_and_searches() {
    let anthropic = FakeUpstream::start().await;
    let openai = FakeUpstream::start().await;
    let gateway = gateway(&config(&anthropic, &openai, "", "[member.ana]\ndaily_usd = 5.0\n")).await;
    let (before, after) = anthropic_wire::web_search_stream(&searched_content(), 120, 60, 2);
    anthropic.push(anthropic_wire::stream([before, after].concat()));
    let text = stream_as(&gateway, ANA).await;
    assert!(text.contains("web_search_tool_result"), "streamed with its blocks: {text}");
    assert!(text.contains(r#""web_search_requests":2"#), "the count in message_delta: {text}");
    assert_eq!(anthropic.received()[0].json()["stream"], json!(true), "streamed live");
    let records = closed_records(&gateway.dir().join("ledger.db"));
    let notes = records[0]["notes"].as_array().unwrap();
    assert!(!notes.contains(&json!("stream_replayed_whole")), "{}", records[0]);
    assert!(!notes.contains(&json!("web_searches_charged_at_bound")), "{}", records[0]);
    assert_eq!(records[0]["attempts"][0]["web_searches"], 2, "{}", records[0]);
    let cost = records[0]["cost_usd"].as_f64().unwrap();
    assert!(close(cost, TOKENS_COST + 2.0 * WEB_SEARCH_PRICE / 1000.0), "{cost}");
}

/// A live stream that breaks after its first search never reports its count: it is
/// charged the tool's bound (`max_uses` 2), never the one search it showed, and says so.
#[tokio::test]
async fn a_live_hosted_stream_cut_after_its_first_search_is_charged_its_bound() {
    let anthropic = FakeUpstream::start().await;
    let openai = FakeUpstream::start().await;
    let gateway = gateway(&config(&anthropic, &openai, "", "[member.ana]\ndaily_usd = 5.0\n")).await;
    let (before, after) = anthropic_wire::web_search_stream(&searched_content(), 120, 60, 1);
    // Up to the search's result's stop: the narration, the call and the result.
    let through_the_result = after.iter().position(|event| event.starts_with(b"event: content_block_stop")).unwrap();
    let after_call = &after[through_the_result + 1..];
    let result_stop = after_call.iter().position(|event| event.starts_with(b"event: content_block_stop")).unwrap();
    let chunks = [before, after[..through_the_result + 1 + result_stop + 1].to_vec()].concat();
    let headers = anthropic_wire::sse_headers("req_cut");
    anthropic.push(weir_tests::Scripted::StreamThenDrop { status: 200, headers, chunks });
    let text = stream_as(&gateway, ANA).await;
    assert!(text.contains("web_search_tool_result"), "the result went out before the cut: {text}");
    assert!(text.contains("event: error"), "the stream ends in an error: {text}");
    let records = closed_records(&gateway.dir().join("ledger.db"));
    let record = &records[0];
    assert!(record["notes"].as_array().unwrap().contains(&json!("web_searches_charged_at_bound")), "{record}");
    assert_eq!(record["attempts"][0]["web_searches"], 2, "charged the bound: {record}");
    let cost = record["cost_usd"].as_f64().unwrap();
    let tokens = 120.0 * 3.0 / 1_000_000.0 + 15.0 / 1_000_000.0;
    assert!(cost >= 2.0 * WEB_SEARCH_PRICE / 1000.0 + tokens - 1e-9, "at least the bound's searches: {record}");
}

/// What OpenAI answers two web searches with: the two calls and the message.
fn searched_output() -> Vec<Value> {
    vec![
        json!({"type": "web_search_call", "id": "ws_01", "status": "completed",
               "action": {"type": "search", "query": "weir gateway"}}),
        json!({"type": "web_search_call", "id": "ws_02", "status": "completed",
               "action": {"type": "search", "query": "weir rust"}}),
        message_item("msg_01", "Weir is an LLM gateway."),
    ]
}

#[tokio::test]
async fn a_responses_web_search_is_costed_per_call_and_cut_under_a_usd_budget() {
    let anthropic = FakeUpstream::start().await;
    let openai = FakeUpstream::start().await;
    let gateway = gateway(&config(&anthropic, &openai, "", "[member.ana]\ndaily_usd = 5.0\n")).await;
    openai.push(response(searched_output(), responses_wire::usage(50, 20, 0, 0)));
    openai.push(response(vec![message_item("msg_02", "Gateway.")], responses_wire::usage(80, 3, 0, 0)));
    let base = gateway.url("/v1");
    let lines = tokio::task::spawn_blocking(move || {
        run_responses_client(&base, "gpt5", "web_search", &[("WEIR_CALLER_KEY", BOB)])
    })
    .await
    .unwrap();
    assert_eq!(lines[0]["dropped"], Value::Null, "{}", lines[0]);
    assert_eq!(openai.received()[0].json()["tools"], json!([{"type": "web_search"}]));
    let records = closed_records(&gateway.dir().join("ledger.db"));
    assert_eq!(records[0]["attempts"][0]["web_searches"], 2, "{}", records[0]);
    let tokens = (50.0 * 1.25 + 20.0 * 10.0) / 1_000_000.0;
    let cost = records[0]["cost_usd"].as_f64().unwrap();
    assert!(close(cost, tokens + 2.0 * WEB_SEARCH_PRICE / 1000.0), "{cost}");

    // Under a USD budget: without `max_tool_calls` the search has no bound, so the tool is dropped.
    openai.push(response(vec![message_item("msg_03", "Weir is a gateway.")], responses_wire::usage(50, 20, 0, 0)));
    let body = json!({"model": "gpt5", "input": "What is Weir?", "max_output_tokens": 500,
        "tools": [{"type": "web_search"}]});
    let auth = format!("Bearer {ANA}");
    let dropped = gateway.post_json("/v1/responses", &body, &[("authorization", &auth)]).await;
    assert_eq!(dropped.status, 200, "{:?}", dropped.body);
    assert!(openai.received()[2].json().get("tools").is_none(), "no search tool was sent");
    let records = closed_records(&gateway.dir().join("ledger.db"));
    assert!(records[2]["notes"].as_array().unwrap().contains(&json!("tool_dropped:web_search")), "{}", records[2]);

    let refusing =
        self::gateway(&config(&anthropic, &openai, "hosted_tools = \"refuse\"", "[member.ana]\ndaily_usd = 5.0\n"))
            .await;
    let refused = refusing.post_json("/v1/responses", &body, &[("authorization", &auth)]).await;
    assert_eq!(refused.status, 400, "{:?}", refused.body);
    assert!(refused.body.to_string().contains("capability_mismatch"), "{:?}", refused.body);
    assert_eq!(openai.request_count(), 3, "nothing sent");
}

/// With `max_tool_calls`, an OpenAI web search has a bound: under a USD budget it is sent
/// with the bound, held at the bound's searches, and charged the searches made; a second
/// call whose bound no longer fits what is left is refused before sending, while a smaller
/// bound fits. On a Claude entry the bound is OpenAI's own field: dropped and noted.
#[tokio::test]
async fn a_responses_web_search_bounded_by_max_tool_calls_is_held_at_the_bound() {
    let anthropic = FakeUpstream::start().await;
    let openai = FakeUpstream::start().await;
    // Held: $0.005 of tokens (500 output at $10/M) plus the bound's searches at $0.01 each.
    let gateway = gateway(&config(&anthropic, &openai, "", "[member.ana]\ndaily_usd = 0.04\n")).await;
    let auth = format!("Bearer {ANA}");
    let ask = |calls: u64| {
        json!({"model": "gpt5", "input": "What is Weir?", "max_output_tokens": 500,
               "tools": [{"type": "web_search"}], "max_tool_calls": calls})
    };
    openai.push(response(searched_output(), responses_wire::usage(50, 20, 0, 0)));
    let first = gateway.post_json("/v1/responses", &ask(2), &[("authorization", &auth)]).await;
    assert_eq!(first.status, 200, "{:?}", first.body);
    assert_eq!(first.body["max_tool_calls"], 2, "echoed");
    let sent = openai.received()[0].json();
    assert_eq!((&sent["tools"], &sent["max_tool_calls"]), (&json!([{"type": "web_search"}]), &json!(2)));
    let records = closed_records(&gateway.dir().join("ledger.db"));
    assert_eq!(records[0]["attempts"][0]["web_searches"], 2, "{}", records[0]);
    let tokens = (50.0 * 1.25 + 20.0 * 10.0) / 1_000_000.0;
    assert!(close(records[0]["cost_usd"].as_f64().unwrap(), tokens + 0.02), "{}", records[0]);

    // ~$0.0197 is left: a bound of 2 holds ~$0.025 and is refused, a bound of 1 (~$0.015) fits.
    let refused = gateway.post_json("/v1/responses", &ask(2), &[("authorization", &auth)]).await;
    assert_eq!(refused.status, 429, "{:?}", refused.body);
    assert!(refused.body.to_string().contains("budget_exhausted"), "{:?}", refused.body);
    assert_eq!(openai.request_count(), 1, "the refused call sent nothing");
    openai.push(response(vec![message_item("msg_02", "Gateway.")], responses_wire::usage(50, 3, 0, 0)));
    let smaller = gateway.post_json("/v1/responses", &ask(1), &[("authorization", &auth)]).await;
    assert_eq!(smaller.status, 200, "{:?}", smaller.body);
    assert_eq!(openai.received()[1].json()["max_tool_calls"], 1);

    anthropic.push(anthropic_wire::text_message("Weir is a gateway."));
    let body = json!({"model": "claude", "input": "What is Weir?", "max_output_tokens": 500, "max_tool_calls": 2});
    let claude = gateway.post_json("/v1/responses", &body, &[("authorization", &format!("Bearer {BOB}"))]).await;
    assert_eq!(claude.status, 200, "{:?}", claude.body);
    assert!(anthropic.received()[0].json().get("max_tool_calls").is_none());
    let records = closed_records(&gateway.dir().join("ledger.db"));
    let notes = records.last().unwrap()["notes"].as_array().unwrap().clone();
    assert!(notes.contains(&json!("field_dropped:max_tool_calls")), "{notes:?}");
}

/// OpenAI lists `web_search_preview` apart (USD 25 per thousand on non-reasoning models):
/// an entry's `web_search_preview_price` holds and charges a call sending that tool at it,
/// a plain `web_search` stays at `web_search_price`, and a call sending both is charged the
/// higher for each search (the items do not say which tool ran it).
#[tokio::test]
async fn the_preview_search_tool_is_held_and_charged_at_its_own_price() {
    let anthropic = FakeUpstream::start().await;
    let openai = FakeUpstream::start().await;
    let text = config(&anthropic, &openai, "", "[member.ana]\ndaily_usd = 0.05\n");
    let priced = "web_search_price = 10\n\n[[key]]";
    assert!(text.contains(priced), "{text}");
    let gateway =
        gateway(&text.replace(priced, "web_search_price = 10\nweb_search_preview_price = 25.0\n\n[[key]]")).await;
    let auth = format!("Bearer {ANA}");
    let ask = |tools: Value| {
        json!({"model": "gpt5", "input": "What is Weir?", "max_output_tokens": 500, "tools": tools,
               "max_tool_calls": 1})
    };
    let one_search = || {
        let output = vec![searched_output()[0].clone(), message_item("msg_01", "Weir is an LLM gateway.")];
        response(output, responses_wire::usage(50, 20, 0, 0))
    };
    let tokens = (50.0 * 1.25 + 20.0 * 10.0) / 1_000_000.0;
    // The last call's record: its one search and its cost.
    let last_cost = || {
        let records = closed_records(&gateway.dir().join("ledger.db"));
        let last = records.last().unwrap();
        assert_eq!(last["attempts"][0]["web_searches"], 1, "{last}");
        last["cost_usd"].as_f64().unwrap()
    };

    openai.push(one_search());
    let preview = gateway
        .post_json("/v1/responses", &ask(json!([{"type": "web_search_preview"}])), &[("authorization", &auth)])
        .await;
    assert_eq!(preview.status, 200, "{:?}", preview.body);
    let cost = last_cost();
    assert!(close(cost, tokens + 0.025), "at the preview price: {cost}");

    // ~$0.0247 is left: the preview tool's bound of one holds ~$0.030 and is refused,
    // the plain tool's (~$0.015) fits and is charged at `web_search_price`.
    let refused = gateway
        .post_json("/v1/responses", &ask(json!([{"type": "web_search_preview"}])), &[("authorization", &auth)])
        .await;
    assert_eq!(refused.status, 429, "{:?}", refused.body);
    assert_eq!(openai.request_count(), 1, "the refused call sent nothing");
    openai.push(one_search());
    let plain =
        gateway.post_json("/v1/responses", &ask(json!([{"type": "web_search"}])), &[("authorization", &auth)]).await;
    assert_eq!(plain.status, 200, "{:?}", plain.body);
    let cost = last_cost();
    assert!(close(cost, tokens + 0.01), "at the web search price: {cost}");

    // Both tools (no budget): each search at the higher price.
    openai.push(one_search());
    let both = json!([{"type": "web_search"}, {"type": "web_search_preview"}]);
    let answer = gateway.post_json("/v1/responses", &ask(both), &[("authorization", &format!("Bearer {BOB}"))]).await;
    assert_eq!(answer.status, 200, "{:?}", answer.body);
    let cost = last_cost();
    assert!(close(cost, tokens + 0.025), "the higher price: {cost}");
}
