//! Which provider prompt caches a call may use (issue 49, item 1), through the real
//! gateway binary to fake upstreams speaking Anthropic's Messages and OpenAI's
//! Responses wires. The default (`member`) sends no breakpoint and scopes OpenAI's
//! `prompt_cache_key` to the caller's member; `shared` renders breakpoints; `off`
//! sends neither and drops a caller's key; an entry's own setting wins over the
//! top-level one.

// Test code: a failed step should stop the test with its message.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use serde_json::{Value, json};
use weir_tests::responses_wire::{message_item, response, usage};
use weir_tests::{FakeUpstream, Gateway, anthropic_wire};

const ANA: &str = "sk-weir-ana-cache-1";
const BOB: &str = "sk-weir-bob-cache-1";

/// Two callers of different members, and `models` (TOML) after the top-level `top`.
fn config(top: &str, models: &str) -> String {
    format!(
        "read_timeout_secs = 5\n{top}\n\n[[key]]\nid = \"ana-key\"\nmember = \"ana\"\nhash = \"{ana}\"\n\n\
         [[key]]\nid = \"bob-key\"\nmember = \"bob\"\nhash = \"{bob}\"\n\n{models}",
        ana = weir_host::identity::hash_of(ANA),
        bob = weir_host::identity::hash_of(BOB),
    )
}

/// An `anthropic` entry on `upstream`, with `more` added to it.
fn claude(id: &str, upstream: &FakeUpstream, more: &str) -> String {
    format!(
        "[[model]]\nid = \"{id}\"\nprovider = \"anthropic\"\nwire_id = \"claude-sonnet-4-5\"\n\
         endpoint = \"http://{addr}\"\ncredential = \"weir-test-key\"\nmax_output_tokens = 8000\n\
         context_window = 200000\nmax_retries = 0\n{more}\n",
        addr = upstream.addr()
    )
}

/// An `openai-responses` entry on `upstream`, with `more` added to it.
fn gpt(upstream: &FakeUpstream, more: &str) -> String {
    format!(
        "[[model]]\nid = \"gpt5\"\nprovider = \"openai-responses\"\nwire_id = \"gpt-5\"\nendpoint = \"{url}\"\n\
         credential = \"weir-test-key\"\nmax_output_tokens = 8000\noutput_tokens = 100\ncontext_window = 400000\n\
         max_retries = 0\n{more}\n",
        url = upstream.base_url()
    )
}

async fn start(config: &str) -> Gateway {
    Gateway::start_with(config, &[("WEIR_TEST_KEY", "sk-upstream-0123456789")], None).await
}

/// An Anthropic Messages request with a system block and a user block that each
/// ask for a breakpoint (one with a one-hour TTL).
fn messages(model: &str) -> Value {
    json!({"model": model, "max_tokens": 100,
        "system": [{"type": "text", "text": "You are terse.", "cache_control": {"type": "ephemeral"}}],
        "messages": [{"role": "user", "content": [
            {"type": "text", "text": "A long document.", "cache_control": {"type": "ephemeral", "ttl": "1h"}}]}]})
}

fn has_breakpoint(sent: &Value) -> bool {
    sent.to_string().contains("cache_control")
}

/// The default, `member`: a breakpoint's cache is the provider account's and read
/// by every member, so none is rendered, the caller's included; the TTL that
/// would have gone with it is named as dropped.
#[tokio::test]
async fn the_default_sends_no_breakpoint_and_names_the_dropped_ttl() {
    let upstream = FakeUpstream::start().await;
    let gateway = start(&config("", &claude("claude", &upstream, ""))).await;
    upstream.push(anthropic_wire::text_message("Short."));
    let posted = gateway.post_json("/v1/messages", &messages("claude"), &[("x-api-key", ANA)]).await;
    assert_eq!(posted.status, 200, "{}", posted.body);
    let sent = upstream.received()[0].json();
    assert!(!has_breakpoint(&sent), "{sent}");
    assert_eq!(posted.headers["x-weir-dropped-fields"], "cache_control.ttl", "{:?}", posted.headers);
}

/// `shared` on one entry wins over a top-level `off`: that entry renders the
/// system prefix's breakpoint and the caller's; the other entry renders none.
#[tokio::test]
async fn an_entrys_own_setting_wins_over_the_top_level_one() {
    let upstream = FakeUpstream::start().await;
    let models = claude("shared", &upstream, "prompt_cache = \"shared\"") + &claude("plain", &upstream, "");
    let gateway = start(&config("prompt_cache = \"off\"", &models)).await;
    for model in ["shared", "plain"] {
        upstream.push(anthropic_wire::text_message("Short."));
        let posted = gateway.post_json("/v1/messages", &messages(model), &[("x-api-key", ANA)]).await;
        assert_eq!(posted.status, 200, "{model}: {}", posted.body);
    }
    let received = upstream.received();
    let (shared, plain) = (received[0].json(), received[1].json());
    assert_eq!(shared["system"][0]["cache_control"], json!({"type": "ephemeral", "ttl": "1h"}), "{shared}");
    assert_eq!(shared["messages"][0]["content"][0]["cache_control"]["type"], "ephemeral", "{shared}");
    assert!(!has_breakpoint(&plain), "{plain}");
}

/// The key OpenAI routes its cache by, as the upstream received it, for one
/// Responses call by `token` with the caller's own key `own` (or none).
async fn sent_key(gateway: &Gateway, upstream: &FakeUpstream, token: &str, own: Option<&str>) -> Option<String> {
    upstream.push(response(vec![message_item("msg_1", "Hi.")], usage(10, 2, 0, 0)));
    let mut body = json!({"model": "gpt5", "input": "Hello", "max_output_tokens": 100});
    if let Some(own) = own {
        body["prompt_cache_key"] = json!(own);
    }
    let posted = gateway.post_json("/v1/responses", &body, &[("authorization", &format!("Bearer {token}"))]).await;
    assert_eq!(posted.status, 200, "{}", posted.body);
    let sent = upstream.received().last().unwrap().json();
    sent["prompt_cache_key"].as_str().map(str::to_owned)
}

/// `member`: every call to a provider that routes by `prompt_cache_key` carries a
/// key of the caller's member, the caller's own key folded in (never as written):
/// the same member and key meet again, two members never do.
#[tokio::test]
async fn openai_is_sent_a_member_scoped_cache_key() {
    let upstream = FakeUpstream::start().await;
    let gateway = start(&config("", &gpt(&upstream, ""))).await;
    let ana_thread = sent_key(&gateway, &upstream, ANA, Some("thread-1")).await.unwrap();
    let ana_again = sent_key(&gateway, &upstream, ANA, Some("thread-1")).await.unwrap();
    let bob_thread = sent_key(&gateway, &upstream, BOB, Some("thread-1")).await.unwrap();
    let ana_none = sent_key(&gateway, &upstream, ANA, None).await.unwrap();
    let bob_none = sent_key(&gateway, &upstream, BOB, None).await.unwrap();
    assert_eq!(ana_thread, ana_again, "one member's conversation keeps its key");
    assert!(ana_thread.starts_with("weir-") && !ana_thread.contains("thread-1"), "{ana_thread}");
    let keys = [&ana_thread, &bob_thread, &ana_none, &bob_none];
    for (i, a) in keys.iter().enumerate() {
        for b in &keys[i + 1..] {
            assert_ne!(a, b, "{keys:?}");
        }
    }
}

/// `off`: no key is sent, and a caller's own is dropped and named so.
#[tokio::test]
async fn off_sends_no_cache_key_and_names_the_callers_as_dropped() {
    let upstream = FakeUpstream::start().await;
    let gateway = start(&config("", &gpt(&upstream, "prompt_cache = \"off\""))).await;
    assert_eq!(sent_key(&gateway, &upstream, ANA, None).await, None);
    upstream.push(response(vec![message_item("msg_1", "Hi.")], usage(10, 2, 0, 0)));
    let body = json!({"model": "gpt5", "input": "Hello", "max_output_tokens": 100, "prompt_cache_key": "thread-1"});
    let posted = gateway.post_json("/v1/responses", &body, &[("authorization", &format!("Bearer {ANA}"))]).await;
    assert_eq!(posted.status, 200, "{}", posted.body);
    assert_eq!(posted.headers["x-weir-dropped-fields"], "prompt_cache_key");
    assert!(upstream.received().last().unwrap().json().get("prompt_cache_key").is_none());
}

#[test]
fn an_unknown_prompt_cache_mode_is_refused_at_load() {
    let text = config("prompt_cache = \"everyone\"", "");
    let error = weir_host::Config::from_toml(&text, "t").unwrap_err().to_string();
    assert!(error.contains("prompt_cache") || error.contains("everyone"), "{error}");
}
