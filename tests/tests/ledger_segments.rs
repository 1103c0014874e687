//! Sealed segments, archives and retention through the real gateway binary:
//! a gateway whose `max_bytes` stops one without retention keeps serving
//! with it, and a `kill -9` while segments are sealed, archived and released
//! loses no row an answer was given for; `weir ledger verify --archive` and
//! `export --archive` read the whole history back.

// Test code: a failed step should stop the test with its message.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::HashSet;
use std::path::Path;
use std::time::Duration;

use serde_json::Value;
use weir_tests::{FakeUpstream, Gateway, hello_m, kill_mid_load, ledger_config, openai_wire, run_cli};

/// `weir ARGS`: whether it succeeded, and its output.
fn weir(args: &[&str]) -> (bool, String) {
    let output = run_cli(args, &[]);
    let text = String::from_utf8_lossy(&output.stdout).into_owned() + &String::from_utf8_lossy(&output.stderr);
    (output.status.success(), text)
}

/// The call ids of the closing rows `weir ledger export --archive` writes.
fn exported_closings(ledger: &Path, archive: &Path) -> Vec<String> {
    let (ok, text) =
        weir(&["ledger", "export", "--path", ledger.to_str().unwrap(), "--archive", archive.to_str().unwrap()]);
    assert!(ok, "{text}");
    text.lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|row| row["kind"] == "close")
        .map(|row| row["record"]["call_id"].as_str().unwrap().to_owned())
        .collect()
}

/// The statuses of `count` calls made one after another.
async fn statuses(gateway: &Gateway, count: usize) -> Vec<u16> {
    let client = reqwest::Client::new();
    let mut statuses = Vec::new();
    for _ in 0..count {
        let response = client.post(gateway.url("/v1/chat/completions")).json(&hello_m()).send().await.unwrap();
        statuses.push(response.status().as_u16());
    }
    statuses
}

const CALLS: usize = 400;

/// 96 KiB of file: without retention, 400 calls fill it and the gateway
/// refuses (503); with segments of 4 KiB archived and released past 8 KiB,
/// the same 400 calls are all answered, the file stays under its cap, and
/// the archive and the file verify as one chain holding every call.
#[tokio::test]
async fn retention_keeps_a_capped_gateway_serving() {
    let dir = tempfile::tempdir().unwrap();
    let capped = format!("max_bytes = {}\n", 96 * 1024);

    let upstream = FakeUpstream::start().await;
    let full = dir.path().join("full.db");
    let gateway =
        Gateway::start(&ledger_config(&upstream, &format!("path = {:?}\n{capped}", full.to_str().unwrap()))).await;
    let without = statuses(&gateway, CALLS).await;
    assert!(without.contains(&503), "without retention the cap is reached");
    drop(gateway);

    let ledger = dir.path().join("ledger.db");
    let archive = dir.path().join("archive");
    let settings = format!(
        "path = {:?}\n{capped}segment_bytes = 4096\narchive_dir = {:?}\nretain_bytes = 8192\n",
        ledger.to_str().unwrap(),
        archive.to_str().unwrap()
    );
    let gateway = Gateway::start(&ledger_config(&upstream, &settings)).await;
    let with = statuses(&gateway, CALLS).await;
    assert!(with.iter().all(|status| *status == 200), "with retention every call is answered: {with:?}");
    drop(gateway);
    assert!(std::fs::metadata(&ledger).unwrap().len() <= 96 * 1024);

    let (ok, text) =
        weir(&["ledger", "verify", "--path", ledger.to_str().unwrap(), "--archive", archive.to_str().unwrap()]);
    assert!(ok, "{text}");
    let rows: usize = text
        .strip_prefix("ok: ")
        .and_then(|rest| rest.split(' ').next())
        .and_then(|rows| rows.parse().ok())
        .unwrap_or_else(|| panic!("{text}"));
    assert!(rows >= CALLS, "every call's closing row, archived or live: {text}");
    assert!(text.contains("released") && text.contains("file(s), linked to the file's first live row"), "{text}");
    let (ok, text) = weir(&["ledger", "verify", "--path", ledger.to_str().unwrap()]);
    assert!(ok && text.contains("checked with --archive DIR"), "{text}");
    let closings = exported_closings(&ledger, &archive);
    assert_eq!(closings.len(), CALLS);
    assert_eq!(closings.iter().collect::<HashSet<_>>().len(), CALLS, "each call once");

    // A released segment's archive removed: verify --archive names it.
    // (A temporary file the gateway's stop may have left is not one of them.)
    let first = std::fs::read_dir(&archive)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.file_name().unwrap().to_string_lossy().starts_with("ledger.db.segment-"))
        .min()
        .unwrap();
    std::fs::remove_file(&first).unwrap();
    let (ok, text) =
        weir(&["ledger", "verify", "--path", ledger.to_str().unwrap(), "--archive", archive.to_str().unwrap()]);
    assert!(!ok && text.contains("segment 1 (rows 1-") && text.contains("missing"), "{text}");
}

/// 300 calls at once with a segment sealed at nearly every fill, archived
/// and released; the gateway is killed with SIGKILL mid-load (where in the
/// roll it lands is not chosen: the unit tests stop between an archive's
/// steps on purpose). After a restart, every answered call's closing row is
/// in the archive or the file, and both verify as one chain.
#[tokio::test]
async fn a_kill_while_segments_roll_loses_no_answered_row() {
    let upstream = FakeUpstream::start().await;
    for i in 0..300_u64 {
        let delay = Duration::from_millis((i * 7919) % 1_500);
        upstream.push(openai_wire::completion_with_usage("Hi", 10, 5, 0, 0).after(delay));
    }
    let dir = tempfile::tempdir().unwrap();
    let ledger = dir.path().join("ledger.db");
    let archive = dir.path().join("archive");
    let settings = format!(
        "path = {:?}\nsegment_bytes = 2000\narchive_dir = {:?}\nretain_bytes = 4000\n",
        ledger.to_str().unwrap(),
        archive.to_str().unwrap()
    );
    let config = ledger_config(&upstream, &settings);
    let gateway = Gateway::start(&config).await;
    let answered = kill_mid_load(&gateway, &hello_m(), 300, 30, "Hi").await;
    drop(gateway);

    let gateway = Gateway::start(&config).await;
    let response =
        reqwest::Client::new().post(gateway.url("/v1/chat/completions")).json(&hello_m()).send().await.unwrap();
    assert_eq!(response.status(), 200);
    drop(gateway);

    let (ok, text) =
        weir(&["ledger", "verify", "--path", ledger.to_str().unwrap(), "--archive", archive.to_str().unwrap()]);
    assert!(ok, "the archive and the file verify after the kill: {text}");
    assert!(text.contains("released"), "segments were released: {text}");
    let closed: HashSet<String> = exported_closings(&ledger, &archive).into_iter().collect();
    let missing: Vec<&String> = answered.iter().filter(|id| !closed.contains(*id)).collect();
    assert!(missing.is_empty(), "{} answered calls have no closing row: {missing:?}", missing.len());
}
