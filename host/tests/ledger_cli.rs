//! `weir ledger query/verify/export`, run as a process on a ledger filled
//! through [`Ledger`].

// Test code: a failed step should stop the test with its message.
#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use std::path::Path;
use std::process::{Command, Output};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use weir_host::ledger::{Ledger, LedgerConfig, anchor_path};
use weir_host::record::{CallObserver, CallOpening, CallRecord, Operation, Route, Tokens, Who};
use weir_tests::ledger_tamper::recompute_chain;

fn weir(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_weir")).args(args).env("NO_COLOR", "1").output().expect("run weir")
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn who(member: &str) -> Who {
    Who { key_id: Some(format!("{member}-key")), member: Some(member.to_owned()), team: None }
}

fn record(call_id: &str, member: &str, started_at: SystemTime, cost_usd: Option<f64>) -> Arc<CallRecord> {
    Arc::new(CallRecord {
        role: None,
        notes: Vec::new(),
        call_id: call_id.to_owned(),
        started_at,
        ended_at: started_at + Duration::from_millis(850),
        who: who(member),
        route: Route::OpenaiChat,
        operation: Operation::Chat,
        model: "gpt-test".to_owned(),
        identity: None,
        provider: Some("openai".to_owned()),
        wire_id: None,
        endpoint_host: None,
        served_model: None,
        stream: false,
        traceparent: None,
        max_tokens: Some(64),
        attempts: Vec::new(),
        usage: Tokens { input: 1000, output: 50, ..Tokens::default() },
        billable_input: Some(1000.0),
        cost_usd,
        category: "ok".to_owned(),
        stop_reason: Some("stop".to_owned()),
        latency_ms: 850,
        first_output_ms: None,
        stream_end: None,
        content: None,
        client: None,
        charged_worst_case: false,
        cached: false,
        cached_from: None,
    })
}

/// A ledger at `path` with two closed calls (2024-01-01 and -02) and one left open.
fn fill(path: &Path) {
    let ledger = Ledger::open(LedgerConfig::at(path.to_path_buf()), None);
    let day = |n: u64| UNIX_EPOCH + Duration::from_secs(1_704_067_200 + n * 86_400);
    let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
    runtime.block_on(async {
        ledger.closed(&record("call-alice", "alice", day(0), Some(0.002))).await.unwrap();
        ledger.closed(&record("call-bob", "bob", day(1), None)).await.unwrap();
        let opening = CallOpening {
            call_id: "call-open".to_owned(),
            started_at: day(1),
            who: who("alice"),
            route: Route::AnthropicMessages,
            operation: Operation::Chat,
            model: "gpt-test".to_owned(),
            stream: true,
            traceparent: None,
        };
        ledger.opened(&opening).await.unwrap();
    });
    drop(ledger);
    // The writer's thread fills its last rows into the file as it stops, and anchors them.
    anchored_through(path, 3);
}

/// Waits (at most 10 s) until the anchor file's newest line anchors row `seq`.
fn anchored_through(path: &Path, seq: u64) {
    for _ in 0..1000 {
        let text = std::fs::read_to_string(anchor_path(path)).unwrap_or_default();
        if text.lines().filter_map(|line| line.split(' ').next()?.parse::<u64>().ok()).max() == Some(seq) {
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    panic!("row {seq} of {} was never anchored", path.display());
}

#[test]
fn query_prints_records_then_sums() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.db");
    fill(&path);
    let db = path.to_str().unwrap();

    let table = weir(&["ledger", "query", "--path", db]);
    assert!(table.status.success(), "{table:?}");
    let text = stdout(&table);
    assert!(text.contains("call-alice") && text.contains("call-bob"), "{text}");
    assert!(text.contains("$0.0020") && text.contains("850ms"), "{text}");
    assert!(text.contains("total: 2 call(s)") && text.contains("1 call(s) without a price"), "{text}");

    let json =
        weir(&["ledger", "query", "--path", db, "--member", "alice", "--since", "2024-01-01T00:00:00Z", "--json"]);
    assert!(json.status.success(), "{json:?}");
    let document: serde_json::Value = serde_json::from_str(&stdout(&json)).unwrap();
    assert_eq!(document["records"].as_array().map(Vec::len), Some(1));
    assert_eq!(document["records"][0]["call_id"], "call-alice");
    assert_eq!(document["sums"]["total"]["tokens"]["input"], 1000);

    let grouped = weir(&["ledger", "query", "--path", db, "--group-by", "member", "--json"]);
    let document: serde_json::Value = serde_json::from_str(&stdout(&grouped)).unwrap();
    assert_eq!(document["sums"]["groups"][1]["member"], "bob");

    let until = weir(&["ledger", "query", "--path", db, "--until", "2024-01-02T00:00:00Z", "--json"]);
    let document: serde_json::Value = serde_json::from_str(&stdout(&until)).unwrap();
    assert_eq!(document["sums"]["total"]["calls"], 1);

    let unclosed = weir(&["ledger", "query", "--path", db, "--unclosed"]);
    assert!(stdout(&unclosed).contains("call-open") && !stdout(&unclosed).contains("call-bob"), "{unclosed:?}");

    let recent = weir(&["ledger", "query", "--path", db, "--since", "1h", "--json"]);
    let document: serde_json::Value = serde_json::from_str(&stdout(&recent)).unwrap();
    assert_eq!(document["sums"]["total"]["calls"], 0, "the calls are from 2024, not the last hour");
}

#[test]
fn verify_passes_then_names_the_tampered_row() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.db");
    fill(&path);
    let db = path.to_str().unwrap();
    let ok = weir(&["ledger", "verify", "--path", db]);
    assert!(ok.status.success(), "{ok:?}");
    let lines: Vec<String> = stdout(&ok).lines().map(str::to_owned).collect();
    assert_eq!(lines[0], "ok: 3 rows, 3 calls");
    assert!(lines[1].starts_with("anchor: the newest anchored head, row 3, matches"), "{lines:?}");
    assert!(lines[1].contains("MACs not checked"), "--path knows no key: {lines:?}");

    let tamper = rusqlite::Connection::open(&path).unwrap();
    tamper.execute_batch("DROP TRIGGER ledger_no_update").unwrap();
    weir_host::ledger::register_sql_functions(&tamper).unwrap();
    let rewrite =
        format!("UPDATE ledger SET body = replace({}, 'bob', 'eve') WHERE seq = 2", weir_host::ledger::BODY_SQL);
    tamper.execute(&rewrite, []).unwrap();
    drop(tamper);
    let broken = weir(&["ledger", "verify", "--path", db]);
    assert!(!broken.status.success());
    let stderr = String::from_utf8_lossy(&broken.stderr);
    assert!(stderr.contains("row 2") && stderr.contains("call-bob"), "{stderr}");
}

/// The file opened with its append-only triggers dropped.
fn without_triggers(path: &Path) -> rusqlite::Connection {
    let connection = rusqlite::Connection::open(path).unwrap();
    connection.execute_batch("DROP TRIGGER ledger_no_update; DROP TRIGGER ledger_no_delete;").unwrap();
    weir_host::ledger::register_sql_functions(&connection).unwrap();
    connection
}

/// `weir ledger verify` on a tampered ledger: exit 1, TAMPERED and why.
fn tampered(db: &str, args: &[&str], env: &[(&str, &str)]) -> String {
    let mut all = vec!["ledger", "verify"];
    all.extend_from_slice(args);
    if args.is_empty() {
        all.extend(["--path", db]);
    }
    let output = Command::new(env!("CARGO_BIN_EXE_weir")).args(&all).envs(env.iter().copied()).output().unwrap();
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(stderr.contains("weir: TAMPERED: "), "{stderr}");
    stderr
}

#[test]
fn verify_names_a_cut_tail_an_emptied_ledger_and_a_recomputed_chain_as_tampered() {
    for (case, tamper) in [
        ("the last row cut", "DELETE FROM ledger WHERE seq = 3"),
        ("every row deleted", "DELETE FROM ledger"),
        ("bob's rows deleted and the chain recomputed", "DELETE FROM ledger WHERE member = 'bob'"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ledger.db");
        fill(&path);
        let connection = without_triggers(&path);
        connection.execute(tamper, []).unwrap();
        recompute_chain(&connection, weir_host::ledger::BODY_SQL);
        drop(connection);
        let db = path.to_str().unwrap();
        let stderr = tampered(db, &[], &[]);
        assert!(
            stderr.contains("shorter than its anchor") && stderr.contains("row 3 was anchored"),
            "{case}: {stderr}"
        );
    }

    // Cut, then padded back to its anchored length with a row of its own: the head differs.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.db");
    fill(&path);
    let connection = without_triggers(&path);
    connection.execute("DELETE FROM ledger WHERE member = 'bob' AND kind IN (1, 'close')", []).unwrap();
    connection
        .execute(
            "INSERT INTO ledger SELECT 99, kind, 'call-pad', at_ms, started_ms, key_id, member, team, model,
                  category, input, output, cache_read, cache_write, reasoning, cost_usd,
                  body, prev_hash, hash, charged_worst, shape_id FROM ledger WHERE seq = 1",
            [],
        )
        .unwrap();
    recompute_chain(&connection, weir_host::ledger::BODY_SQL);
    drop(connection);
    let stderr = tampered(path.to_str().unwrap(), &[], &[]);
    assert!(stderr.contains("hash is not the one anchored for it"), "{stderr}");
}

/// With `anchor_key_env`, each anchor line carries a MAC: a chain recomputed
/// and an anchor file rewritten to match it pass without the key, and fail
/// `verify --config` with it.
#[test]
fn with_the_anchor_key_a_forged_anchor_fails_verify() {
    const KEY: (&str, &str) = ("WEIR_TEST_ANCHOR_KEY", "0123456789abcdef0123456789abcdef0123");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.db");
    let key = weir_host::ledger::AnchorKey::new(KEY.1.as_bytes()).unwrap();
    let ledger = Ledger::open(LedgerConfig { anchor_key: Some(key), ..LedgerConfig::at(path.clone()) }, None);
    let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
    runtime.block_on(async {
        for (call, member) in [("call-1", "alice"), ("call-2", "bob"), ("call-3", "alice")] {
            ledger.closed(&record(call, member, SystemTime::now(), None)).await.unwrap();
        }
    });
    drop(ledger);
    anchored_through(&path, 3);
    let config = dir.path().join("weir.toml");
    std::fs::write(&config, format!("[ledger]\npath = {path:?}\nanchor_key_env = \"{}\"\n", KEY.0)).unwrap();
    let config = config.to_str().unwrap();
    let keyed = Command::new(env!("CARGO_BIN_EXE_weir"))
        .args(["ledger", "verify", "--config", config])
        .env(KEY.0, KEY.1)
        .output()
        .unwrap();
    assert!(keyed.status.success(), "{keyed:?}");
    assert!(
        stdout(&keyed).contains("the newest anchored head, row 3, matches (MACs verified with the anchor key)"),
        "{keyed:?}"
    );

    let connection = without_triggers(&path);
    connection.execute("DELETE FROM ledger WHERE member = 'bob'", []).unwrap();
    recompute_chain(&connection, weir_host::ledger::BODY_SQL);
    let (seq, hash): (i64, String) = connection
        .query_row("SELECT seq, hash FROM ledger ORDER BY seq DESC LIMIT 1", [], |row| Ok((row.get(0)?, row.get(1)?)))
        .unwrap();
    drop(connection);
    std::fs::write(anchor_path(&path), format!("{seq} {hash}\n")).unwrap();
    let db = path.to_str().unwrap();
    let unkeyed = weir(&["ledger", "verify", "--path", db]);
    assert!(unkeyed.status.success(), "without the key the forgery cannot be told: {unkeyed:?}");
    let stderr = tampered(db, &["--config", config], &[KEY]);
    assert!(stderr.contains("line 1 of the anchor file carries no MAC"), "{stderr}");

    let missing =
        Command::new(env!("CARGO_BIN_EXE_weir")).args(["ledger", "verify", "--config", config]).output().unwrap();
    assert!(!missing.status.success());
    let stderr = String::from_utf8_lossy(&missing.stderr);
    assert!(stderr.contains("anchor_key_env` names WEIR_TEST_ANCHOR_KEY, which is not set"), "{stderr}");
}

/// A ledger from before anchoring verifies, with a warning that its end
/// cannot be checked; a removed anchor file where the ledger records one is
/// tampering.
#[test]
fn an_unanchored_ledger_warns_and_a_removed_anchor_is_tampered() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.db");
    fill(&path);
    std::fs::remove_file(anchor_path(&path)).unwrap();
    let db = path.to_str().unwrap();
    let stderr = tampered(db, &[], &[]);
    assert!(stderr.contains("its anchor file") && stderr.contains("is missing"), "{stderr}");

    rusqlite::Connection::open(&path).unwrap().execute("DROP TABLE ledger_anchored", []).unwrap();
    let old = weir(&["ledger", "verify", "--path", db]);
    assert!(old.status.success(), "{old:?}");
    assert_eq!(stdout(&old).trim(), "ok: 3 rows, 3 calls");
    assert!(String::from_utf8_lossy(&old.stderr).contains("warning: unanchored"), "{old:?}");
}

#[test]
fn export_writes_json_lines() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.db");
    fill(&path);
    let output = weir(&["ledger", "export", "--path", path.to_str().unwrap(), "--since", "2024-01-02T00:00:00Z"]);
    assert!(output.status.success(), "{output:?}");
    let lines: Vec<serde_json::Value> =
        stdout(&output).lines().map(|line| serde_json::from_str(line).unwrap()).collect();
    let kinds: Vec<_> =
        lines.iter().map(|line| (line["seq"].as_i64().unwrap(), line["kind"].as_str().unwrap())).collect();
    assert_eq!(kinds, [(2, "close"), (3, "open")]);
    assert_eq!(lines[0]["record"]["call_id"], "call-bob");
}

#[test]
fn clear_errors_without_a_ledger() {
    let dir = tempfile::tempdir().unwrap();
    let missing = weir(&["ledger", "verify", "--path", dir.path().join("none.db").to_str().unwrap()]);
    assert!(!missing.status.success());
    assert!(String::from_utf8_lossy(&missing.stderr).contains("no ledger at"), "{missing:?}");

    let config = dir.path().join("weir.toml");
    std::fs::write(&config, "[ledger]\nenabled = false\n").unwrap();
    let off = weir(&["ledger", "query", "--config", config.to_str().unwrap()]);
    assert!(!off.status.success());
    assert!(String::from_utf8_lossy(&off.stderr).contains("keeps no ledger"), "{off:?}");

    let bad_time = weir(&["ledger", "query", "--path", "x.db", "--since", "yesterday"]);
    assert!(!bad_time.status.success());
    assert!(String::from_utf8_lossy(&bad_time.stderr).contains("RFC 3339"), "{bad_time:?}");

    // The default path beside a config file: data/ledger.db.
    std::fs::write(&config, "[ledger]\n").unwrap();
    fill(&dir.path().join("data").join("ledger.db"));
    let beside = weir(&["ledger", "verify", "--config", config.to_str().unwrap()]);
    assert!(beside.status.success(), "{beside:?}");
}

/// With `--config`, `query` shows each budget of the config as the ledger
/// alone leaves it (today's spend, what remains, the reset), as a starting
/// gateway rebuilds it; a running gateway's holds are `GET /v1/usage`'s.
#[test]
fn query_with_a_config_shows_each_budget_spent_and_remaining() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.db");
    let ledger = Ledger::open(LedgerConfig::at(path.clone()), None);
    let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
    runtime.block_on(async {
        // Today's call counts against today's budget; one from 2024 does not.
        ledger.closed(&record("call-today", "alice", SystemTime::now(), Some(0.01))).await.unwrap();
        ledger
            .closed(&record("call-old", "alice", UNIX_EPOCH + Duration::from_secs(1_704_067_200), None))
            .await
            .unwrap();
    });
    drop(ledger);
    let config = dir.path().join("weir.toml");
    let toml = format!("[ledger]\npath = \"{}\"\n\n[member.alice]\ndaily_tokens = 5000\n", path.display());
    std::fs::write(&config, toml).unwrap();
    let config = config.to_str().unwrap();

    let table = weir(&["ledger", "query", "--config", config]);
    assert!(table.status.success(), "{table:?}");
    let text = stdout(&table);
    assert!(text.contains("BUDGET") && text.contains("alice"), "{text}");

    let json = weir(&["ledger", "query", "--config", config, "--json"]);
    assert!(json.status.success(), "{json:?}");
    let document: serde_json::Value = serde_json::from_str(&stdout(&json)).unwrap();
    let budget = &document["budgets"][0];
    assert_eq!(budget["scope"], "member");
    assert_eq!(budget["name"], "alice");
    assert_eq!(budget["period"], "day");
    assert_eq!(budget["spent"], 1050, "today's call only (1000 in + 50 out)");
    assert_eq!(budget["remaining"], 3950);
    assert_eq!(budget["held"], 0);

    let without = weir(&["ledger", "query", "--path", path.to_str().unwrap(), "--json"]);
    let document: serde_json::Value = serde_json::from_str(&stdout(&without)).unwrap();
    assert!(document.get("budgets").is_none(), "no config, no budgets to show");
}
