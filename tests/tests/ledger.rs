//! The ledger through the real gateway binary: a real SQLite file, calls over
//! HTTP to a fake upstream, `kill -9` in the middle of a load, and the ledger
//! read back with `weir ledger`.

// Test code: a failed step should stop the test with its message.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::HashSet;
use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};
use weir_tests::{FakeUpstream, Gateway, hello_m, kill_mid_load, ledger_config, openai_wire, run_cli};

fn ledger_cli(args: &[&str]) -> (bool, String, String) {
    let output = run_cli(args, &[]);
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

fn query(path: &Path, extra: &[&str]) -> Value {
    let path = path.to_str().unwrap();
    let mut args = vec!["ledger", "query", "--path", path, "--json"];
    args.extend_from_slice(extra);
    let (ok, stdout, stderr) = ledger_cli(&args);
    assert!(ok, "weir ledger query failed: {stderr}");
    serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {stdout}"))
}

fn call_ids(records: &Value) -> HashSet<String> {
    records.as_array().unwrap().iter().map(|r| r["call_id"].as_str().unwrap().to_owned()).collect()
}

/// 300 calls at once; the gateway is killed with SIGKILL while they run. After a
/// restart, every call whose answer reached its caller has a closed record, the
/// calls cut off show as opened and never closed, and the chain verifies.
#[tokio::test]
async fn a_kill_mid_load_loses_no_record_of_an_answer_a_caller_saw() {
    let upstream = FakeUpstream::start().await;
    for i in 0..300_u64 {
        // Answers spread over ~1.5 s, so the kill lands while many are in flight.
        let delay = Duration::from_millis((i * 7919) % 1_500);
        upstream.push(openai_wire::completion_with_usage("Hi", 10, 5, 0, 0).after(delay));
    }
    let dir = tempfile::tempdir().unwrap();
    let ledger = dir.path().join("ledger.db");
    let config = ledger_config(&upstream, &format!("path = {:?}", ledger.to_str().unwrap()));
    let gateway = Gateway::start(&config).await;

    let answered = kill_mid_load(&gateway, &hello_m(), 300, 10, "Hi").await;
    drop(gateway);

    // Restarted on the same ledger: it opens, and a new call is recorded after the old ones.
    let gateway = Gateway::start(&config).await;
    let response =
        reqwest::Client::new().post(gateway.url("/v1/chat/completions")).json(&hello_m()).send().await.unwrap();
    assert_eq!(response.status(), 200);
    drop(gateway);

    let closed = call_ids(&query(&ledger, &[])["records"]);
    let missing: Vec<&String> = answered.iter().filter(|id| !closed.contains(*id)).collect();
    assert!(missing.is_empty(), "{} answered calls have no closed record: {missing:?}", missing.len());
    let unclosed = call_ids(&query(&ledger, &["--unclosed"])["unclosed"]);
    assert!(!unclosed.is_empty(), "calls in flight at the kill show as opened, never closed");
    assert!(unclosed.iter().all(|id| !closed.contains(id)), "an unclosed call is not also closed");
    eprintln!("answered {}, closed {}, unclosed {}", answered.len(), closed.len(), unclosed.len());
    assert!(closed.len() + unclosed.len() <= 301);

    let (ok, stdout, stderr) = ledger_cli(&["ledger", "verify", "--path", ledger.to_str().unwrap()]);
    assert!(ok, "the chain verifies after the kill: {stdout}{stderr}");
}

/// A provider's error text goes to the server log, never to the ledger.
#[tokio::test]
async fn provider_text_reaches_the_log_and_never_the_ledger() {
    const MARKER: &str = "LEDGER-MARKER-55120";
    let upstream = FakeUpstream::start().await;
    upstream.push(openai_wire::error(400, "invalid_request_error", None, &format!("bad input {MARKER}")));
    let dir = tempfile::tempdir().unwrap();
    let ledger = dir.path().join("ledger.db");
    let gateway = Gateway::start(&ledger_config(&upstream, &format!("path = {:?}", ledger.to_str().unwrap()))).await;
    let response =
        reqwest::Client::new().post(gateway.url("/v1/chat/completions")).json(&hello_m()).send().await.unwrap();
    assert_eq!(response.status(), 400);
    gateway.wait_for_stderr(MARKER, Duration::from_secs(10)).await;
    drop(gateway);

    let (ok, export, stderr) = ledger_cli(&["ledger", "export", "--since", "1h", "--path", ledger.to_str().unwrap()]);
    assert!(ok, "{stderr}");
    assert!(export.lines().any(|line| line.contains(r#""kind":"close""#)), "its closing row: {export}");
    assert!(export.contains("invalid_request"), "{export}");
    assert!(!export.contains(MARKER), "provider text in the ledger: {export}");
}

/// `on_error = "refuse"`: a ledger that cannot be written refuses new calls
/// with 503 `ledger_unavailable`, and nothing is sent upstream.
#[tokio::test]
async fn an_unwritable_ledger_refuses_calls_by_default() {
    let upstream = FakeUpstream::start().await;
    let dir = tempfile::tempdir().unwrap();
    // The ledger's folder is a regular file: nothing can ever be created under it.
    let blocker = dir.path().join("not-a-folder");
    std::fs::write(&blocker, b"x").unwrap();
    let ledger = blocker.join("ledger.db");
    let gateway = Gateway::start(&ledger_config(&upstream, &format!("path = {:?}", ledger.to_str().unwrap()))).await;
    let response =
        reqwest::Client::new().post(gateway.url("/v1/chat/completions")).json(&hello_m()).send().await.unwrap();
    assert_eq!(response.status(), 503);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["type"], "ledger_unavailable", "{body}");
    assert!(!body.to_string().contains("not-a-folder"), "no path in the caller's message: {body}");
    assert_eq!(upstream.request_count(), 0, "an unrecorded call is not made");
    // The gateway itself is healthy.
    let health = reqwest::get(gateway.url("/health")).await.unwrap();
    assert_eq!(health.status(), 200);
}

/// A full ledger (its `max_bytes` reached): `refuse` answers 503, `continue`
/// keeps serving; both count the failures.
#[tokio::test]
async fn a_full_ledger_refuses_or_continues_as_configured() {
    for (on_error, expected) in [("refuse", 503), ("continue", 200)] {
        let upstream = FakeUpstream::start().await;
        let dir = tempfile::tempdir().unwrap();
        let ledger = dir.path().join("ledger.db");
        let settings = format!("path = {:?}\nmax_bytes = 1\non_error = \"{on_error}\"", ledger.to_str().unwrap());
        let gateway = Gateway::start(&ledger_config(&upstream, &settings)).await;
        let client = reqwest::Client::new();
        for _ in 0..2 {
            let response = client.post(gateway.url("/v1/chat/completions")).json(&hello_m()).send().await.unwrap();
            assert_eq!(response.status().as_u16(), expected, "on_error = {on_error}");
        }
        let metrics = client.get(gateway.url("/metrics")).send().await.unwrap().text().await.unwrap();
        let failures: f64 = metrics
            .lines()
            .find(|line| line.starts_with("weir_ledger_failures_total"))
            .and_then(|line| line.rsplit(' ').next())
            .and_then(|value| value.parse().ok())
            .unwrap_or_else(|| panic!("no weir_ledger_failures_total:\n{metrics}"));
        assert!(failures >= 1.0, "on_error = {on_error}: {failures}");
        let in_flight = metrics.lines().find(|line| line.starts_with("weir_calls_in_flight "));
        assert_eq!(in_flight, Some("weir_calls_in_flight 0"), "every opened call was closed: {on_error}");
    }
}

/// A caller that leaves while its whole (non-streamed) call waits on the
/// upstream: the call's record is still closed, as `client_left`, noting that
/// the usage of the request already sent is unknown; nothing stays opened and
/// unclosed, and the gateway's in-flight gauge returns to zero.
#[tokio::test]
async fn a_caller_that_leaves_mid_call_is_recorded_as_client_left() {
    let upstream = FakeUpstream::start().await;
    upstream.push(openai_wire::completion_with_usage("Hi", 10, 5, 0, 0).after(Duration::from_secs(5)));
    let dir = tempfile::tempdir().unwrap();
    let ledger = dir.path().join("ledger.db");
    let gateway = Gateway::start(&ledger_config(&upstream, &format!("path = {:?}", ledger.to_str().unwrap()))).await;
    let client = reqwest::Client::builder().timeout(Duration::from_millis(400)).build().unwrap();
    let left = client.post(gateway.url("/v1/chat/completions")).json(&hello_m()).send().await;
    assert!(left.is_err_and(|error| error.is_timeout()), "the caller gave up first");
    let mut closed = Value::Null;
    for _ in 0..100 {
        closed = query(&ledger, &["--category", "client_left"]);
        if closed["records"].as_array().is_some_and(|records| !records.is_empty()) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let records = closed["records"].as_array().unwrap_or_else(|| panic!("no records: {closed}"));
    assert_eq!(records.len(), 1, "{closed}");
    let record = &records[0];
    assert_eq!(record["model"], "m", "{record}");
    let notes = record["notes"].as_array().unwrap();
    assert!(notes.contains(&json!("usage_unknown_caller_left")), "the request had left: {record}");
    let unclosed = query(&ledger, &["--unclosed"]);
    assert_eq!(unclosed["unclosed"].as_array().map(Vec::len), Some(0), "{unclosed}");
    let metrics = reqwest::get(gateway.url("/metrics")).await.unwrap().text().await.unwrap();
    assert!(metrics.lines().any(|line| line == "weir_calls_in_flight 0"), "{metrics}");
}

/// Sends `count` calls at once and waits for their answers.
async fn load(gateway: &Gateway, count: usize) {
    let client = reqwest::Client::new();
    let mut calls = Vec::new();
    for _ in 0..count {
        let (client, url) = (client.clone(), gateway.url("/v1/chat/completions"));
        calls.push(tokio::spawn(async move {
            let response = client.post(&url).json(&hello_m()).send().await.unwrap();
            assert_eq!(response.status(), 200);
        }));
    }
    for call in calls {
        call.await.unwrap();
    }
}

/// `sqlite3 SOURCE ".backup DEST"`: SQLite's online backup of a file in use.
fn sqlite_backup(source: &Path, dest: &Path) {
    let output = std::process::Command::new("sqlite3")
        .arg(source)
        .arg(format!(".backup '{}'", dest.display()))
        .output()
        .expect("the sqlite3 command (Debian's sqlite3 package)");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
}

/// The book's backup of a live ledger (docs/src/operations.md): the anchor
/// file copied first, then SQLite's online backup of the database, taken
/// while calls are recorded. The copy verifies on its own. Taken the other
/// way round, with rows anchored after the database was copied, the copy's
/// anchor names rows the copy lacks, and verify says so.
#[tokio::test]
async fn a_backup_taken_while_calls_are_recorded_verifies_when_its_anchor_is_copied_first() {
    let upstream = FakeUpstream::start().await;
    for _ in 0..240 {
        upstream.push(openai_wire::completion_with_usage("Hi", 10, 5, 0, 0).after(Duration::from_millis(20)));
    }
    let dir = tempfile::tempdir().unwrap();
    let ledger = dir.path().join("ledger.db");
    let gateway = Gateway::start(&ledger_config(&upstream, &format!("path = {:?}", ledger.to_str().unwrap()))).await;
    load(&gateway, 40).await;
    let anchor = ledger.with_file_name("ledger.db.anchor");
    assert!(anchor.is_file(), "the anchor file is beside the ledger");

    // The right order, with calls still being recorded meanwhile.
    let good = dir.path().join("good");
    std::fs::create_dir(&good).unwrap();
    let during = tokio::spawn({
        let client = reqwest::Client::new();
        let url = gateway.url("/v1/chat/completions");
        async move {
            for _ in 0..60 {
                let response = client.post(&url).json(&hello_m()).send().await.unwrap();
                assert_eq!(response.status(), 200);
            }
        }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    std::fs::copy(&anchor, good.join("ledger.db.anchor")).unwrap();
    sqlite_backup(&ledger, &good.join("ledger.db"));
    during.await.unwrap();
    let (ok, stdout, stderr) = ledger_cli(&["ledger", "verify", "--path", good.join("ledger.db").to_str().unwrap()]);
    assert!(ok, "the backup verifies against its own anchor: {stdout}{stderr}");
    let copied = closed_in(&good.join("ledger.db"));
    assert!(copied >= 40, "the backup holds the calls recorded before it: {copied}");

    // The wrong order: the database first, then more calls, then the anchor.
    let bad = dir.path().join("bad");
    std::fs::create_dir(&bad).unwrap();
    sqlite_backup(&ledger, &bad.join("ledger.db"));
    load(&gateway, 40).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    std::fs::copy(&anchor, bad.join("ledger.db.anchor")).unwrap();
    let (ok, stdout, stderr) = ledger_cli(&["ledger", "verify", "--path", bad.join("ledger.db").to_str().unwrap()]);
    assert!(!ok, "an anchor newer than the copied rows fails: {stdout}{stderr}");
    assert!(stdout.contains("anchor") || stderr.contains("anchor"), "verify names the anchor: {stdout}{stderr}");
}

fn closed_in(ledger: &Path) -> usize {
    query(ledger, &[])["records"].as_array().unwrap().len()
}
