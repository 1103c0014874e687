//! The console (`/console`) through the real gateway binary: its session,
//! CSRF and `Origin` rules over HTTP, then the pages in a real browser —
//! headless Chromium (Debian's `chromium`) driven by Playwright for Python
//! (`tests/python/console_browser.py`) — on a ledger seeded by calls through
//! the fake upstream: the usage shown equals `/v1/usage`'s, a key made in the
//! page calls and, once revoked there, is refused; a call's detail opens; no
//! request leaves loopback; no page scrolls sideways at 1280 px or 390 px.
//! Screenshots of each page go to `target/tmp/console-screenshots/`.

// Test code: a failed step should stop the test with its message.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use weir_tests::python::run_browser_script;
use weir_tests::{FakeUpstream, Gateway};

const ROOT: &str = "weir-root-console-token-0123456789abcdef";
const PLAIN: &str = "weir-plain-console-token-0123456789abcdef";
const ANA: &str = "weir-ana-console-token-0123456789abcdef";

fn config(upstream: &FakeUpstream) -> String {
    let hash = weir_host::identity::hash_of;
    format!(
        r#"[[model]]
id = "gpt"
provider = "openai"
wire_id = "gpt-4.1"
endpoint = "{url}"
credential = "weir-test-key"
max_output_tokens = 1000
context_window = 100000
output_tokens = 100
max_retries = 0
input_price = 2.0
output_price = 8.0

[[key]]
id = "root"
member = "ops"
hash = "{root}"
admin = true

[[key]]
id = "plain"
member = "bob"
hash = "{plain}"

[[key]]
id = "ana-key"
member = "ana"
team = "search"
hash = "{ana}"

[member.bob]
daily_tokens = 100000

[ledger]
path = "ledger.db"
"#,
        url = upstream.base_url(),
        root = hash(ROOT),
        plain = hash(PLAIN),
        ana = hash(ANA),
    )
}

/// A gateway whose ledger holds three calls by two members.
async fn seeded() -> (FakeUpstream, Gateway) {
    let upstream = FakeUpstream::start().await;
    let gateway = Gateway::start_with(&config(&upstream), &[("WEIR_TEST_KEY", "sk-upstream-0123456789")], None).await;
    for token in [PLAIN, PLAIN, ANA] {
        let body = json!({"model": "gpt", "messages": [{"role": "user", "content": "hello"}], "max_tokens": 50});
        let posted =
            gateway.post_json("/v1/chat/completions", &body, &[("authorization", &format!("Bearer {token}"))]).await;
        assert_eq!(posted.status, 200, "{:?}", posted.body);
    }
    let started = Instant::now();
    loop {
        if usage(&gateway).await["total"]["calls"] == 3 {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(10), "the ledger never held the three calls");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    (upstream, gateway)
}

async fn usage(gateway: &Gateway) -> Value {
    let answer = reqwest::Client::new().get(gateway.url("/v1/usage")).bearer_auth(ROOT).send().await.unwrap();
    answer.json().await.unwrap()
}

fn own_origin(gateway: &Gateway) -> String {
    format!("http://{}", gateway.addr())
}

/// Signs in over HTTP: the cookie header to send back and the CSRF token.
async fn sign_in(gateway: &Gateway, token: &str) -> (reqwest::StatusCode, Option<(String, String)>) {
    let answer = reqwest::Client::new()
        .post(gateway.url("/console/session"))
        .header("origin", own_origin(gateway))
        .json(&json!({"token": token}))
        .send()
        .await
        .unwrap();
    let status = answer.status();
    let cookie = answer.headers().get("set-cookie").map(|value| value.to_str().unwrap().to_owned());
    let body: Value = answer.json().await.unwrap();
    let session =
        cookie.map(|cookie| (cookie.split(';').next().unwrap().to_owned(), body["csrf"].as_str().unwrap().to_owned()));
    (status, session)
}

#[tokio::test]
async fn the_console_session_csrf_and_origin_rules_hold_at_the_edge() {
    let (_upstream, gateway) = seeded().await;
    let client = reqwest::Client::new();

    // The page from a foreign origin, and a sign-in from one, are refused.
    let page = client.get(gateway.url("/console")).header("origin", "http://evil.example").send().await.unwrap();
    assert_eq!(page.status(), 403);
    let page = client.get(gateway.url("/console")).send().await.unwrap();
    assert_eq!(page.status(), 200);
    assert_eq!(page.headers()["cache-control"], "no-store");
    let refused = client
        .post(gateway.url("/console/session"))
        .header("origin", "http://evil.example")
        .json(&json!({"token": ROOT}))
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 403);
    let refused: Value = refused.json().await.unwrap();
    assert_eq!(refused["error"]["type"], "forbidden_origin", "{refused}");

    // A non-admin key cannot sign in; an admin key can.
    let (status, session) = sign_in(&gateway, PLAIN).await;
    assert_eq!((status.as_u16(), session.is_none()), (403, true));
    let (status, session) = sign_in(&gateway, ROOT).await;
    assert_eq!(status, 200);
    let (cookie, csrf) = session.unwrap();

    // Reads with the cookie; changes need the CSRF token too.
    let read = client.get(gateway.url("/console/api/v1/usage")).header("cookie", &cookie).send().await.unwrap();
    assert_eq!(read.status(), 200);
    let read: Value = read.json().await.unwrap();
    assert_eq!(read["total"], usage(&gateway).await["total"]);
    let change = |csrf: Option<&str>| {
        let mut request = client
            .post(gateway.url("/console/api/admin/v1/keys"))
            .header("cookie", &cookie)
            .header("origin", own_origin(&gateway))
            .json(&json!({"member": "dora"}));
        if let Some(csrf) = csrf {
            request = request.header("x-weir-csrf", csrf);
        }
        request.send()
    };
    assert_eq!(change(None).await.unwrap().status(), 403);
    assert_eq!(change(Some("weir-not-the-token")).await.unwrap().status(), 403);
    assert_eq!(change(Some(&csrf)).await.unwrap().status(), 201);
    let foreign = client
        .post(gateway.url("/console/api/admin/v1/keys"))
        .header("cookie", &cookie)
        .header("x-weir-csrf", &csrf)
        .header("origin", "http://evil.example")
        .json(&json!({"member": "eve"}))
        .send()
        .await
        .unwrap();
    assert_eq!(foreign.status(), 403, "the cookie and the token from a foreign origin");

    // Without the cookie the console's routes are closed, and a key does not open them.
    let bare = client.get(gateway.url("/console/api/v1/usage")).bearer_auth(ROOT).send().await.unwrap();
    assert_eq!(bare.status(), 401);
    let out = client
        .delete(gateway.url("/console/session"))
        .header("cookie", &cookie)
        .header("x-weir-csrf", &csrf)
        .send()
        .await
        .unwrap();
    assert_eq!(out.status(), 204);
    let after = client.get(gateway.url("/console/api/v1/usage")).header("cookie", &cookie).send().await.unwrap();
    assert_eq!(after.status(), 401);
}

#[tokio::test]
async fn the_console_in_a_real_browser() {
    let (_upstream, gateway) = seeded().await;
    let expected = usage(&gateway).await;
    let by_member =
        reqwest::Client::new().get(gateway.url("/v1/usage?group_by=member")).bearer_auth(ROOT).send().await.unwrap();
    let by_member: Value = by_member.json().await.unwrap();
    let by_team =
        reqwest::Client::new().get(gateway.url("/v1/usage?group_by=team")).bearer_auth(ROOT).send().await.unwrap();
    let by_team: Value = by_team.json().await.unwrap();
    let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("console-screenshots");
    std::fs::create_dir_all(&out).unwrap();
    let args = json!({"base": gateway.url(""), "admin": ROOT, "plain": PLAIN, "out": out.to_str().unwrap()});
    let seen = tokio::task::spawn_blocking(move || run_browser_script("console_browser.py", args)).await.unwrap();

    // A non-admin key was refused, and the token field emptied after each try.
    assert!(seen["plain_sign_in_error"].as_str().unwrap().contains("not `admin`"), "{seen}");
    assert_eq!(seen["plain_nav_hidden"], true);
    assert_eq!(seen["token_field_after_sign_in"], "");
    assert_eq!(seen["cookie_readable_by_script"], "", "the session cookie is HttpOnly");

    // The usage shown is /v1/usage's.
    let total = &expected["total"];
    let tokens = ["input", "output", "cache_read", "cache_write"]
        .iter()
        .map(|kind| total["tokens"][kind].as_u64().unwrap())
        .sum::<u64>();
    assert_eq!(seen["usage"]["calls"], total["calls"].to_string(), "{seen}");
    assert_eq!(seen["usage"]["tokens"], tokens.to_string(), "{seen}");
    assert_eq!(seen["usage"]["cost"], format!("{:.4}", total["cost_usd"].as_f64().unwrap()), "{seen}");
    assert!(total["cost_usd"].as_f64().unwrap() > 0.0, "the seeded calls are priced: {expected}");
    assert_eq!(seen["usage"]["chart_calls"], total["calls"], "the chart's bars add up to the calls");
    let groups = by_member["groups"].as_array().unwrap().len();
    assert_eq!(
        (seen["usage"]["group_rows"].as_u64(), seen["usage"]["group_chart_bars"].as_u64()),
        (Some(groups as u64), Some(groups as u64))
    );
    let shown = |value: &Value| value.as_f64().map_or("–".to_owned(), |ms| ms.to_string());
    assert_eq!(seen["usage"]["p50"], shown(&total["latency_ms"]["p50"]), "{seen}");
    assert_eq!(seen["usage"]["p99"], shown(&total["latency_ms"]["p99"]), "{seen}");
    assert!(total["latency_ms"]["p99"].as_f64().is_some(), "the seeded calls have latencies: {expected}");
    let errors = total["errors"].as_object().unwrap();
    assert_eq!(seen["usage"]["errors"], errors.values().map(|n| n.as_u64().unwrap()).sum::<u64>().to_string());
    assert_eq!(seen["usage"]["error_rows"], errors.len());
    let teams: Vec<String> = by_team["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|group| group["team"].as_str().unwrap_or("(none)").to_owned())
        .collect();
    assert_eq!(teams, ["(none)", "search"], "ana's team and the calls of no team: {by_team}");
    assert_eq!(seen["usage"]["team_names"], json!(teams), "{seen}");

    // A key made in the page called, and once revoked there was refused.
    assert_eq!(seen["new_token_prefix"], "weir-");
    assert_eq!(seen["call_with_new_key"], 200, "{seen}");
    assert_eq!(seen["call_after_revoke"], 401, "{seen}");

    assert_eq!(seen["budget_rows"], 1, "bob's daily budget: {seen}");
    assert_eq!(seen["budget_meters"], 1);
    // Every call in the ledger: the three seeded, the new key's and its refused one.
    let calls = reqwest::Client::new().get(gateway.url("/admin/v1/calls")).bearer_auth(ROOT).send().await.unwrap();
    let calls: Value = calls.json().await.unwrap();
    assert!(calls["calls"].as_array().unwrap().len() >= 4, "{calls}");
    assert_eq!(seen["call_rows"].as_u64(), Some(calls["calls"].as_array().unwrap().len() as u64), "{seen}");
    let ok = calls["calls"].as_array().unwrap().iter().filter(|call| call["category"] == "ok").count();
    assert_eq!(seen["ok_call_rows"].as_u64(), Some(ok as u64), "the search by category: {seen}");
    assert_eq!(seen["call_opened"]["wanted"], seen["call_opened"]["shown"]);
    assert_eq!(seen["call_opened"]["attempt_rows"], 1, "{seen}");
    assert_eq!(seen["model_rows"], 1, "{seen}");

    assert_eq!(seen["change_without_csrf"], 403, "{seen}");
    assert_eq!(seen["after_sign_out"], 401, "{seen}");
    assert_eq!(seen["console_errors"], json!([]), "{seen}");

    // Nothing but the gateway was asked, and no page scrolls sideways.
    let own = gateway.url("");
    let requests = seen["requests"].as_array().unwrap();
    assert!(requests.len() > 10, "{seen}");
    for url in requests {
        assert!(url.as_str().unwrap().starts_with(&own), "a request left the gateway: {url}");
    }
    for page in ["usage", "keys", "budgets", "calls", "providers"] {
        for width in ["1280", "390"] {
            let shot = &seen["pages"][page][width];
            assert!(shot["overflow"].as_i64().unwrap() <= 0, "{page} scrolls sideways at {width} px: {shot}");
            assert!(PathBuf::from(shot["path"].as_str().unwrap()).is_file(), "{page} {width}");
        }
    }
    for width in ["1280", "390"] {
        assert!(seen["pages"]["calls"][format!("detail-{width}")]["overflow"].as_i64().unwrap() <= 0, "{seen}");
    }
}
