//! The ledger's anchor and owner-only files through the real gateway: a
//! member's rows deleted and the chain recomputed (what brought her spend
//! back to zero at the next start) make `weir serve` refuse to start and
//! `weir ledger verify` say TAMPERED; `on_tampered = "start"` starts it,
//! logged. Under `umask 000` the ledger's folder is 0700 and its files 0600.

// Test code: a failed step should stop the test with its message.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use weir_tests::ledger_tamper::recompute_chain;
use weir_tests::{FakeUpstream, Gateway, openai_wire, run_cli, weir_binary};

const ANA: &str = "sk-weir-ana-anchor";
const BOB: &str = "sk-weir-bob-anchor";

fn config(upstream: &FakeUpstream, ledger: &Path, extra: &str) -> String {
    format!(
        r#"
[[model]]
id = "m"
provider = "openai-compatible"
wire_id = "qwen3"
endpoint = "{url}"
max_output_tokens = 4000
context_window = 100000
input_price = 2.0
output_price = 8.0

[[key]]
id = "ana-key"
member = "ana"
hash = "{ana}"

[[key]]
id = "bob-key"
member = "bob"
hash = "{bob}"

[member.ana]
daily_tokens = 2500

[ledger]
path = {ledger:?}
{extra}
"#,
        url = upstream.base_url(),
        ana = weir_host::identity::hash_of(ANA),
        bob = weir_host::identity::hash_of(BOB),
        ledger = ledger.to_str().unwrap(),
    )
}

/// A call whose worst case is 1 000 output tokens plus a small input estimate.
fn call() -> Value {
    json!({"model": "m", "max_tokens": 1000, "messages": [{"role": "user", "content": "Hi"}]})
}

async fn post(gateway: &Gateway, token: &str) -> u16 {
    let response =
        reqwest::Client::new().post(gateway.url("/v1/chat/completions")).bearer_auth(token).json(&call()).send().await;
    response.unwrap().status().as_u16()
}

/// Runs `weir serve` on `config` expecting it to exit on its own within
/// 60 s (it never binds); its status and stderr.
fn serve_expecting_exit(dir: &Path, config: &str) -> (std::process::ExitStatus, String) {
    let config_path = dir.join("refused.toml");
    std::fs::write(&config_path, config).unwrap();
    let mut child = Command::new(weir_binary())
        .args(["serve", "--config", config_path.to_str().unwrap(), "--listen", "127.0.0.1:0"])
        .env("WEIR_CACHE_DIR", weir_tests::gateway::shared_cache_dir())
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            let mut stderr = String::new();
            std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
            return (status, stderr);
        }
        if Instant::now() > deadline {
            child.kill().unwrap();
            child.wait().unwrap();
            panic!("weir serve kept running on a tampered ledger");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Ana spends her day; her rows are deleted and the chain recomputed. The
/// gateway refuses to start (her budget would be rebuilt from zero), `weir
/// ledger verify` says TAMPERED; with `on_tampered = "start"` it starts,
/// logs why, keeps the old anchor aside, and her spend is what the edited
/// ledger says (nothing): the operator's choice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_s_rows_deleted_and_the_chain_recomputed_refuse_the_start() {
    let upstream = FakeUpstream::start().await;
    let dir = tempfile::tempdir().unwrap();
    let ledger = dir.path().join("books").join("ledger.db");
    let mut gateway = Gateway::start(&config(&upstream, &ledger, "")).await;
    for token in [ANA, ANA, BOB] {
        upstream.push(openai_wire::completion_with_usage("Hello", 10, 990, 0, 0));
        assert_eq!(post(&gateway, token).await, 200);
    }
    assert_eq!(post(&gateway, ANA).await, 429, "ana's day is spent");
    assert!(gateway.terminate(Duration::from_secs(20)).is_some_and(|status| status.success()));
    drop(gateway);
    let verified = run_cli(&["ledger", "verify", "--path", ledger.to_str().unwrap()], &[]);
    assert!(verified.status.success(), "{verified:?}");

    let connection = rusqlite::Connection::open(&ledger).unwrap();
    connection.execute_batch("DROP TRIGGER ledger_no_update; DROP TRIGGER ledger_no_delete;").unwrap();
    let deleted = connection.execute("DELETE FROM ledger WHERE member = 'ana'", []).unwrap();
    assert!(deleted >= 2, "her rows: {deleted}");
    weir_host::ledger::register_sql_functions(&connection).unwrap();
    recompute_chain(&connection, weir_host::ledger::BODY_SQL);
    drop(connection);
    let chain_only = run_cli(&["ledger", "export", "--path", ledger.to_str().unwrap()], &[]);
    assert!(chain_only.status.success());

    let verify = run_cli(&["ledger", "verify", "--path", ledger.to_str().unwrap()], &[]);
    assert_eq!(verify.status.code(), Some(1), "{verify:?}");
    let said = String::from_utf8_lossy(&verify.stderr);
    assert!(said.contains("TAMPERED: the ledger is shorter than its anchor"), "{said}");

    let sent_before = upstream.request_count();
    let (status, stderr) = serve_expecting_exit(dir.path(), &config(&upstream, &ledger, ""));
    assert!(!status.success(), "{stderr}");
    assert!(stderr.contains("is tampered") && stderr.contains("shorter than its anchor"), "{stderr}");
    assert!(stderr.contains("on_tampered = \"start\""), "the way out is named: {stderr}");

    let started = Gateway::start(&config(&upstream, &ledger, "on_tampered = \"start\"")).await;
    // The listening line is stdout's; the warning on stderr may still be in its pipe.
    let log = started.wait_for_stderr("starting anyway (on_tampered = start)", Duration::from_secs(10)).await;
    assert!(log.contains("starting anyway (on_tampered = start)") && log.contains("shorter than its anchor"), "{log}");
    upstream.push(openai_wire::completion_with_usage("Hello", 10, 990, 0, 0));
    assert_eq!(post(&started, ANA).await, 200, "her spend is what the edited ledger says");
    assert_eq!(upstream.request_count(), sent_before + 1);
    let kept = std::fs::read_dir(ledger.parent().unwrap())
        .unwrap()
        .filter(|entry| entry.as_ref().unwrap().file_name().to_string_lossy().contains(".anchor.tampered-"))
        .count();
    assert_eq!(kept, 1, "the tampered anchor is kept aside as the evidence");
}

/// Under `umask 000` (a wrapper script sets it, then runs `weir serve`), the
/// ledger's folder is created 0700 and its database, WAL, shared memory, log
/// segment and anchor are 0600.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_ledgers_files_are_owner_only_under_umask_000() {
    let upstream = FakeUpstream::start().await;
    let dir = tempfile::tempdir().unwrap();
    let wrapper = dir.path().join("weir-umask-000");
    std::fs::write(&wrapper, format!("#!/bin/sh\numask 000\nexec {:?} \"$@\"\n", weir_binary())).unwrap();
    std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).unwrap();
    let folder = dir.path().join("fresh").join("books");
    let ledger = folder.join("ledger.db");
    let cache = weir_tests::gateway::shared_cache_dir();
    let env = [("WEIR_CACHE_DIR", cache.to_str().unwrap())];
    let gateway = Gateway::start_binary(&wrapper, &config(&upstream, &ledger, ""), &env, None).await;
    upstream.push(openai_wire::completion_with_usage("Hello", 10, 990, 0, 0));
    assert_eq!(post(&gateway, BOB).await, 200);
    let anchor = folder.join("ledger.db.anchor");
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::fs::read_to_string(&anchor).unwrap_or_default().is_empty() {
        assert!(Instant::now() < deadline, "the call's row was never anchored");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mode = |path: &Path| std::fs::metadata(path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&folder), 0o700, "the ledger's folder");
    let names: Vec<String> = std::fs::read_dir(&folder)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    for expected in ["ledger.db", "ledger.db-wal", "ledger.db-shm", "ledger.db.anchor"] {
        assert!(names.iter().any(|name| name == expected), "{expected} in {names:?}");
    }
    assert!(names.iter().any(|name| name.starts_with("ledger.db-log-")), "the log's segment in {names:?}");
    for name in &names {
        assert_eq!(mode(&folder.join(name)), 0o600, "{name}");
    }
    assert_eq!(mode(&dir.path().join("fresh")), 0o700, "the missing parent too");
    drop(gateway);

    // A folder that exists open to others is left as the operator set it, with a warning.
    let shared = dir.path().join("shared");
    std::fs::create_dir(&shared).unwrap();
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o755)).unwrap();
    let gateway = Gateway::start_binary(&wrapper, &config(&upstream, &shared.join("ledger.db"), ""), &env, None).await;
    gateway.wait_for_stderr("the ledger's folder is open to group or others", Duration::from_secs(10)).await;
    assert_eq!(mode(&shared), 0o755);
    assert_eq!(mode(&shared.join("ledger.db")), 0o600);
}
