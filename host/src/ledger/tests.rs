//! The ledger on real SQLite files in temporary folders.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::Write;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::*;
use crate::catalog::LedgerSync;
use crate::ledger::query::{CallerSpend, LedgerRead};
use crate::record::{Operation, Route, Tokens, Who};

/// The batch sizes the writer reports.
#[derive(Default)]
struct Batches {
    committed: Mutex<Vec<usize>>,
    failed: Mutex<Vec<usize>>,
}

impl LedgerMeter for Batches {
    fn committed(&self, records: usize, _elapsed: Duration) {
        self.committed.lock().unwrap().push(records);
    }

    fn failed(&self, records: usize) {
        self.failed.lock().unwrap().push(records);
    }
}

fn settings(path: &Path) -> LedgerConfig {
    LedgerConfig::at(path.to_path_buf())
}

pub(crate) fn at(secs: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(1_800_000_000 + secs)
}

pub(crate) fn opening(call_id: &str, member: &str, model: &str, start: u64) -> CallOpening {
    CallOpening {
        call_id: call_id.to_owned(),
        started_at: at(start),
        who: Who { key_id: Some(format!("{member}-key")), member: Some(member.to_owned()), team: None },
        route: Route::OpenaiChat,
        operation: Operation::Chat,
        model: model.to_owned(),
        stream: false,
        traceparent: None,
    }
}

pub(crate) fn record(call_id: &str, member: &str, model: &str, start: u64, cost_usd: Option<f64>) -> Arc<CallRecord> {
    Arc::new(CallRecord {
        role: None,
        notes: Vec::new(),
        call_id: call_id.to_owned(),
        started_at: at(start),
        ended_at: at(start) + Duration::from_millis(1234),
        who: Who { key_id: Some(format!("{member}-key")), member: Some(member.to_owned()), team: Some("t".to_owned()) },
        route: Route::OpenaiChat,
        operation: Operation::Chat,
        model: model.to_owned(),
        identity: Some(model.to_owned()),
        provider: Some("openai".to_owned()),
        wire_id: Some(model.to_owned()),
        endpoint_host: Some("api.openai.com".to_owned()),
        served_model: None,
        stream: false,
        traceparent: None,
        max_tokens: Some(256),
        attempts: Vec::new(),
        usage: Tokens { input: 100, output: 20, cache_read: 10, cache_write: 5, reasoning: 2 },
        billable_input: Some(101.0),
        cost_usd,
        category: "ok".to_owned(),
        stop_reason: Some("stop".to_owned()),
        latency_ms: 1234,
        first_output_ms: None,
        stream_end: None,
        content: None,
        client: None,
        charged_worst_case: false,
        cached: false,
        cached_from: None,
    })
}

/// A record's JSON leaves out the fields without a value (no `null`), and
/// reads back equal; a body written with `null`s (before 2026-12-03) reads
/// back equal too, so old rows verify and count as they did.
#[test]
fn a_records_json_leaves_out_fields_without_a_value() {
    let record = record("call-1", "alice", "m", 1, None);
    let body = serde_json::to_value(&*record).unwrap();
    let fields = body.as_object().unwrap();
    for absent in [
        "role",
        "served_model",
        "traceparent",
        "cost_usd",
        "first_output_ms",
        "stream_end",
        "content",
        "client",
        "notes",
    ] {
        assert!(!fields.contains_key(absent), "{absent} is left out: {body}");
    }
    assert!(fields.values().all(|value| !value.is_null()), "{body}");
    assert_eq!(body["team"], "t");
    assert_eq!(serde_json::from_value::<CallRecord>(body.clone()).unwrap(), *record);
    let mut with_nulls = body;
    for absent in ["role", "served_model", "traceparent", "cost_usd", "first_output_ms", "stream_end", "content"] {
        with_nulls[absent] = serde_json::Value::Null;
    }
    assert_eq!(serde_json::from_value::<CallRecord>(with_nulls).unwrap(), *record);
    let opening = opening("call-1", "alice", "m", 1);
    let body = serde_json::to_value(&opening).unwrap();
    assert!(!body.as_object().unwrap().contains_key("team") && !body.as_object().unwrap().contains_key("traceparent"));
    assert_eq!(serde_json::from_value::<CallOpening>(body).unwrap(), opening);
}

/// Opens and closes `calls` calls one after another.
/// Calls that each outlive the writer's linger: the opening is committed
/// alone before the closing record, so each call leaves two rows (a quick
/// call's opening is left out: see `a_quick_calls_opening_is_left_out...`).
async fn write_calls(ledger: &Ledger, calls: &[(&str, &str, &str, u64, Option<f64>)]) {
    for (call_id, member, model, start, cost) in calls {
        ledger.opened(&opening(call_id, member, model, *start)).await.unwrap();
        opening_committed(ledger, call_id).await;
        ledger.closed(&record(call_id, member, model, *start, *cost)).await.unwrap();
    }
}

/// Waits (at most 5 s) until the file holds `rows` rows; its chain's report.
async fn rows_committed(reader: &Reader, rows: u64) -> VerifyReport {
    for _ in 0..5000 {
        let report = reader.verify().unwrap();
        if report.rows >= rows {
            return report;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    panic!("fewer than {rows} rows were committed");
}

/// Waits (at most 5 s) until `call_id`'s opening is in the file.
async fn opening_committed(ledger: &Ledger, call_id: &str) {
    let reader = ledger.reader().unwrap();
    for _ in 0..5000 {
        if reader.unclosed(&Filter::default()).unwrap().iter().any(|opened| opened.call_id == call_id) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    panic!("the opening of {call_id} was not committed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_calls_commit_in_groups() {
    let dir = tempfile::tempdir().unwrap();
    let batches = Arc::new(Batches::default());
    let ledger = Ledger::open(settings(&dir.path().join("ledger.db")), Some(batches.clone()));
    let barrier = Arc::new(tokio::sync::Barrier::new(400));
    let tasks: Vec<_> = (0..400)
        .map(|n| {
            let (ledger, barrier) = (ledger.clone(), barrier.clone());
            tokio::spawn(async move {
                // Open together, as concurrent calls are: a closing call then has
                // company and yields before committing, so the closings ready
                // beside it join its commit however the workers are scheduled.
                ledger.opened(&opening(&format!("call-{n}"), "alice", "m", n)).await.unwrap();
                barrier.wait().await;
                ledger.closed(&record(&format!("call-{n}"), "alice", "m", n, Some(0.5))).await
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap().unwrap();
    }
    let committed = batches.committed.lock().unwrap().clone();
    assert!(committed.len() < 400, "group commit: {} transactions for 400 records", committed.len());
    assert!(batches.failed.lock().unwrap().is_empty());
    let reader = ledger.reader().unwrap();
    let report = reader.verify().unwrap();
    assert_eq!(report.calls, 400);
    // An opening is a row of its own only when it was written before its close (the
    // writer writes openings while it does not yet know the file is healthy, as at its
    // very first batch): what was committed is what the file holds, nothing lost.
    assert_eq!(u64::try_from(committed.iter().sum::<usize>()).unwrap(), report.rows, "{report:?}");
    assert!(report.rows >= 400, "{report:?}");
    assert_eq!(reader.records(&Filter::default()).unwrap().len(), 400);
}

#[tokio::test]
async fn the_chain_verifies_and_tampering_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.db");
    let ledger = Ledger::open(settings(&path), None);
    write_calls(
        &ledger,
        &[("a", "alice", "m1", 1, Some(0.1)), ("b", "bob", "m2", 2, None), ("c", "carol", "m1", 3, Some(0.2))],
    )
    .await;
    assert_eq!(ledger.reader().unwrap().verify().unwrap(), VerifyReport { rows: 6, calls: 3 });

    let tamper = rusqlite::Connection::open(&path).unwrap();
    let refused = tamper.execute("UPDATE ledger SET body = '{}' WHERE seq = 4", []).unwrap_err();
    assert!(refused.to_string().contains("append-only"), "{refused}");
    let refused = tamper.execute("DELETE FROM ledger WHERE seq = 5", []).unwrap_err();
    assert!(refused.to_string().contains("append-only"), "{refused}");
    assert!(ledger.reader().unwrap().verify().is_ok(), "refused edits change nothing");

    tamper.execute_batch("DROP TRIGGER ledger_no_update; DROP TRIGGER ledger_no_delete;").unwrap();
    // A cost edited in its column alone: the body read back (rebuilt from
    // the columns: see `compact`) is not the one hashed.
    tamper.execute("UPDATE ledger SET cost_usd = 0.0 WHERE seq = 6", []).unwrap();
    let broken = |reader: Reader| match reader.verify() {
        Err(VerifyError::Broken(chain_break)) => chain_break,
        other => panic!("expected a break, got {other:?}"),
    };
    let at_six = broken(ledger.reader().unwrap());
    assert_eq!((at_six.seq, at_six.call_id.as_str()), (6, "c"), "{at_six}");
    assert!(at_six.reason.contains("hash"), "{at_six}");

    // A body rewritten as text.
    super::compact::register(&tamper).unwrap();
    let read = format!("SELECT {} FROM ledger WHERE seq = 4", store::BODY_SQL);
    let body: String = tamper.query_row(&read, [], |row| row.get(0)).unwrap();
    tamper.execute("UPDATE ledger SET body = ?1 WHERE seq = 4", [body.replace("bob", "eve")]).unwrap();
    let at_four = broken(ledger.reader().unwrap());
    assert_eq!((at_four.seq, at_four.call_id.as_str()), (4, "b"), "{at_four}");
    assert!(at_four.reason.contains("hash"), "{at_four}");

    tamper.execute("DELETE FROM ledger WHERE seq = 2", []).unwrap();
    let at_three = broken(ledger.reader().unwrap());
    assert_eq!((at_three.seq, at_three.call_id.as_str()), (3, "b"), "{at_three}");
    assert!(at_three.reason.contains("missing"), "{at_three}");
}

/// A full ledger file (its `max_bytes` reached): the row whose move into
/// the file failed stays in the log; from then on `refuse` fails each call's
/// record and `continue` lets the call go on, both counted. The rows that
/// fit form a valid chain.
#[tokio::test]
async fn a_full_ledger_refuses_or_continues_as_configured() {
    let dir = tempfile::tempdir().unwrap();
    for on_error in [LedgerOnError::Refuse, LedgerOnError::Continue] {
        let batches = Arc::new(Batches::default());
        let path = dir.path().join(format!("{on_error:?}.db"));
        let config = LedgerConfig { on_error, max_bytes: Some(64 * 1024), ..settings(&path) };
        let ledger = Ledger::open(config, Some(batches.clone()));
        let mut outcomes = Vec::new();
        for n in 0..300 {
            outcomes.push(ledger.closed(&record(&format!("call-{n}"), "alice", "m", n, None)).await);
            // Each row into the file before the next call, so that the file fills up within the loop.
            ledger.fill_pending(Duration::from_secs(5));
        }
        let failed: usize = batches.failed.lock().unwrap().iter().sum();
        let committed: usize = batches.committed.lock().unwrap().iter().sum();
        assert!(failed > 0 && committed > 0, "{on_error:?}: {committed} committed, {failed} failed");
        assert_eq!(committed + failed, 300);
        match on_error {
            LedgerOnError::Refuse => {
                let errors: Vec<_> = outcomes.iter().filter_map(|outcome| outcome.as_ref().err()).collect();
                assert_eq!(errors.len(), failed);
                assert!(errors.iter().all(|error| error.0 == "the call ledger cannot be written"), "{errors:?}");
            }
            LedgerOnError::Continue => assert!(outcomes.iter().all(Result::is_ok)),
        }
        let report = ledger.reader().unwrap().verify().unwrap();
        assert_eq!(report.rows + 1, committed as u64, "the rows that fit form a valid chain; one waits in the log");
        assert_eq!(segments(&path).len(), 1, "the log keeps it");
    }
}

/// The log segments beside the ledger file at `path`.
fn segments(path: &Path) -> Vec<std::path::PathBuf> {
    let prefix = format!("{}-log-", path.file_name().unwrap().to_str().unwrap());
    let mut found: Vec<_> = std::fs::read_dir(path.parent().unwrap())
        .unwrap()
        .map(|entry| entry.unwrap())
        .filter(|entry| entry.file_name().to_str().unwrap().starts_with(&prefix))
        .map(|entry| entry.path())
        .collect();
    found.sort();
    found
}

#[tokio::test]
async fn an_unwritable_path_starts_fails_and_recovers() {
    let dir = tempfile::tempdir().unwrap();
    // A folder that cannot be created, even by root: its parent is a file.
    let blocker = dir.path().join("blocker");
    std::fs::write(&blocker, "not a folder").unwrap();
    let path = blocker.join("sub").join("ledger.db");
    let batches = Arc::new(Batches::default());
    let ledger = Ledger::open(settings(&path), Some(batches.clone()));
    let refused = ledger.closed(&record("early", "alice", "m", 1, None)).await.unwrap_err();
    assert_eq!(refused.0, "the call ledger cannot be written", "no path nor SQLite text for the caller");
    assert_eq!(*batches.failed.lock().unwrap(), vec![1]);

    std::fs::remove_file(&blocker).unwrap();
    ledger.closed(&record("later", "alice", "m", 2, None)).await.unwrap();
    let records = ledger.reader().unwrap().records(&Filter::default()).unwrap();
    assert_eq!(records.iter().map(|r| r.call_id.as_str()).collect::<Vec<_>>(), ["later"]);
}

#[tokio::test]
async fn records_sums_and_groups_follow_the_filter() {
    let dir = tempfile::tempdir().unwrap();
    let ledger = Ledger::open(settings(&dir.path().join("ledger.db")), None);
    write_calls(
        &ledger,
        &[
            ("a", "alice", "m1", 10, Some(0.25)),
            ("b", "alice", "m2", 20, None),
            ("c", "bob", "m1", 30, Some(0.5)),
            ("d", "carol", "m2", 40, Some(1.0)),
        ],
    )
    .await;
    let reader = ledger.reader().unwrap();
    let alice = Filter { member: Some("alice".to_owned()), ..Filter::default() };
    let ids = |records: Vec<CallRecord>| records.into_iter().map(|r| r.call_id).collect::<Vec<_>>();
    assert_eq!(ids(reader.records(&alice).unwrap()), ["a", "b"]);
    let window = Filter { since: Some(at(20)), until: Some(at(40)), ..Filter::default() };
    assert_eq!(ids(reader.records(&window).unwrap()), ["b", "c"], "since inclusive, until exclusive");
    let m1_key = Filter { key_id: Some("bob-key".to_owned()), model: Some("m1".to_owned()), ..Filter::default() };
    assert_eq!(ids(reader.records(&m1_key).unwrap()), ["c"]);
    let failed = Filter { category: Some("timeout".to_owned()), ..Filter::default() };
    assert!(reader.records(&failed).unwrap().is_empty());

    let sums = reader.sums(&Filter::default(), Some(GroupBy::Member)).unwrap();
    assert_eq!(sums.total.calls, 4);
    assert_eq!(sums.total.tokens, Tokens { input: 400, output: 80, cache_read: 40, cache_write: 20, reasoning: 8 });
    assert!((sums.total.cost_usd - 1.75).abs() < 1e-9);
    assert_eq!(sums.total.calls_without_cost, 1);
    let members: Vec<_> =
        sums.groups.iter().map(|g| (g.value.as_deref(), g.totals.calls, g.totals.calls_without_cost)).collect();
    assert_eq!(members, [(Some("alice"), 2, 1), (Some("bob"), 1, 0), (Some("carol"), 1, 0)]);
    let json = serde_json::to_value(&sums).unwrap();
    assert_eq!(json["groups"][0]["member"], "alice");
    assert_eq!(json["groups"][0]["tokens"]["input"], 200);
    assert_eq!(json["total"]["calls_without_cost"], 1);

    let by_model = reader.sums(&alice, Some(GroupBy::Model)).unwrap();
    let models: Vec<_> = by_model.groups.iter().map(|g| (g.value.clone().unwrap(), g.totals.cost_usd)).collect();
    assert_eq!(models, [("m1".to_owned(), 0.25), ("m2".to_owned(), 0.0)]);
    let by_key = reader.sums(&Filter::default(), Some(GroupBy::Key)).unwrap();
    assert_eq!(by_key.groups[1].value.as_deref(), Some("bob-key"));
    assert!(reader.sums(&Filter::default(), None).unwrap().groups.is_empty());
    let none = reader.sums(&Filter { member: Some("nobody".to_owned()), ..Filter::default() }, None).unwrap();
    assert_eq!(none.total, Totals::default());
}

/// A UUID v7 call id made at `secs` (as [`at`] reads it), as calls are given.
pub(crate) fn v7_id_at(secs: u64) -> String {
    let made = at(secs).duration_since(UNIX_EPOCH).unwrap();
    let timestamp = uuid::Timestamp::from_unix(uuid::NoContext, made.as_secs(), made.subsec_nanos());
    uuid::Uuid::new_v7(timestamp).to_string()
}

/// The search reads the newest calls first and stops at its limit; one call is
/// found by its id: a UUID v7 near the instant it names, any other id (or a v7
/// whose call started far from its instant) by every closing row.
#[tokio::test]
async fn the_newest_calls_and_one_call_by_id_are_read_without_reading_every_call() {
    let dir = tempfile::tempdir().unwrap();
    let ledger = Ledger::open(settings(&dir.path().join("ledger.db")), None);
    let (first, second, far) = (v7_id_at(10), v7_id_at(20), v7_id_at(7_200));
    let calls = [
        (first.as_str(), "alice", "m1", 10, Some(0.25)),
        (second.as_str(), "bob", "m1", 20, None),
        ("legacy-id", "alice", "m2", 30, None),
        (far.as_str(), "alice", "m2", 40, None),
    ];
    write_calls(&ledger, &calls).await;
    let reader = ledger.reader().unwrap();
    let ids = |records: Vec<CallRecord>| records.into_iter().map(|r| r.call_id).collect::<Vec<_>>();
    assert_eq!(ids(reader.newest(&Filter::default(), 2).unwrap()), [far.as_str(), "legacy-id"]);
    let alice = Filter { member: Some("alice".to_owned()), ..Filter::default() };
    let mut oldest_first = ids(reader.records(&alice).unwrap());
    oldest_first.reverse();
    assert_eq!(ids(reader.newest(&alice, 10).unwrap()), oldest_first);
    let window = Filter { since: Some(at(15)), until: Some(at(35)), ..Filter::default() };
    assert_eq!(ids(reader.newest(&window, 10).unwrap()), ["legacy-id", second.as_str()]);
    for (id, member, ..) in calls {
        let found = reader.closed_call(id).unwrap().unwrap_or_else(|| panic!("{id} is found"));
        assert_eq!((found.call_id.as_str(), found.who.member.as_deref()), (id, Some(member)));
    }
    assert!(reader.closed_call(&v7_id_at(20)).unwrap().is_none(), "a v7 id in the window, never written");
    assert!(reader.closed_call("no-such-call").unwrap().is_none());
}

#[tokio::test]
async fn unclosed_calls_are_the_ones_opened_and_never_closed() {
    let dir = tempfile::tempdir().unwrap();
    // `full`: each opening is committed before `opened` resolves, so the
    // reader sees it at once.
    let config = LedgerConfig { sync: LedgerSync::Full, ..settings(&dir.path().join("ledger.db")) };
    let ledger = Ledger::open(config, None);
    write_calls(&ledger, &[("done", "alice", "m", 1, None)]).await;
    ledger.opened(&opening("crashed", "alice", "m", 2)).await.unwrap();
    ledger.opened(&opening("running", "bob", "m", 3)).await.unwrap();
    let reader = ledger.reader().unwrap();
    let ids = |openings: Vec<CallOpening>| openings.into_iter().map(|o| o.call_id).collect::<Vec<_>>();
    assert_eq!(ids(reader.unclosed(&Filter::default()).unwrap()), ["crashed", "running"]);
    assert_eq!(
        ids(reader.unclosed(&Filter { member: Some("bob".to_owned()), ..Filter::default() }).unwrap()),
        ["running"]
    );
    assert_eq!(reader.verify().unwrap(), VerifyReport { rows: 4, calls: 3 });
}

/// Under `sync = "normal"` an opening is not waited for: it resolves at once
/// and rides with the next batch, usually its own call's closing record. In
/// that commit the opening says nothing the closing record does not, so it is
/// left out: a quick call leaves one row.
#[tokio::test]
async fn a_quick_calls_opening_is_left_out_of_its_closing_records_commit() {
    let dir = tempfile::tempdir().unwrap();
    let batches = Arc::new(Batches::default());
    let ledger = Ledger::open(settings(&dir.path().join("ledger.db")), Some(batches.clone()));
    let calls: Vec<_> = (0..20).map(|n| (format!("call-{n}"), n)).collect();
    for (call_id, start) in &calls {
        ledger.opened(&opening(call_id, "alice", "m", *start)).await.unwrap();
        ledger.closed(&record(call_id, "alice", "m", *start, None)).await.unwrap();
    }
    let committed: usize = batches.committed.lock().unwrap().iter().sum();
    let reader = ledger.reader().unwrap();
    let report = reader.verify().unwrap();
    assert_eq!(report.calls, 20);
    assert_eq!(report.rows, committed as u64, "the meter counts the rows written");
    // An opening the writer's thread committed alone (its linger passed
    // before the closing record came: a loaded machine) stays, so not every
    // call is guaranteed one row; nearly all are.
    assert!(report.rows < 30, "openings were left out of their closing records' commits: {report:?}");
    assert_eq!(reader.records(&Filter::default()).unwrap().len(), 20);
    assert!(reader.unclosed(&Filter::default()).unwrap().is_empty());
}

/// A deferred opening with no closing record to ride with is committed on
/// its own shortly after (within the writer's linger), encoded then from
/// the opening the call gave (with a traceparent, so no field is left out).
#[tokio::test]
async fn a_deferred_opening_alone_is_committed_soon() {
    let dir = tempfile::tempdir().unwrap();
    let ledger = Ledger::open(settings(&dir.path().join("ledger.db")), None);
    let traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01".to_owned();
    let running = CallOpening { traceparent: Some(traceparent), stream: true, ..opening("running", "bob", "m", 1) };
    ledger.opened(&running).await.unwrap();
    let reader = ledger.reader().unwrap();
    let mut unclosed = Vec::new();
    for _ in 0..200 {
        unclosed = reader.unclosed(&Filter::default()).unwrap();
        if !unclosed.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(unclosed, [running]);
}

/// A batch that fails (its append to the log: here the segment's handle can
/// no longer write, as on a full disk) keeps its deferred openings and writes
/// them first in the next batch that commits: the closing row that failed is
/// refused, and the opening (left out of the failed commit, which held its
/// closing row) is not lost with it; the failed append is cut off the log.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_batch_keeps_its_deferred_openings_for_the_next() {
    let dir = tempfile::tempdir().unwrap();
    let batches = Arc::new(Batches::default());
    let ledger = Ledger::open(settings(&dir.path().join("ledger.db")), Some(batches.clone()));
    ledger.opened(&opening("a", "alice", "m", 1)).await.unwrap();
    ledger.shared.break_log();
    let refused = ledger.closed(&record("a", "alice", "m", 1, None)).await.unwrap_err();
    assert_eq!(refused.0, "the call ledger cannot be written");
    assert_eq!(*batches.failed.lock().unwrap(), vec![1], "only the waited-for row is lost");
    ledger.closed(&record("b", "alice", "m", 2, None)).await.unwrap();
    let reader = ledger.reader().unwrap();
    assert_eq!(
        reader.unclosed(&Filter::default()).unwrap().iter().map(|o| o.call_id.as_str()).collect::<Vec<_>>(),
        ["a"]
    );
    assert_eq!(reader.verify().unwrap(), VerifyReport { rows: 2, calls: 2 });
}

/// Under `sync = "full"` an opening is committed before `opened` resolves.
#[tokio::test]
async fn a_strict_opening_is_committed_before_it_resolves() {
    let dir = tempfile::tempdir().unwrap();
    let config = LedgerConfig { sync: LedgerSync::Full, ..settings(&dir.path().join("ledger.db")) };
    let ledger = Ledger::open(config, None);
    ledger.opened(&opening("running", "bob", "m", 1)).await.unwrap();
    assert_eq!(ledger.reader().unwrap().unclosed(&Filter::default()).unwrap().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_ledgers_on_one_file_keep_one_chain() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("shared.db");
    let first = Ledger::open(settings(&path), None);
    let second = Ledger::open(LedgerConfig { sync: LedgerSync::Full, ..settings(&path) }, None);
    let tasks: Vec<_> = (0..200)
        .map(|n| {
            let ledger = if n % 2 == 0 { first.clone() } else { second.clone() };
            tokio::spawn(async move { ledger.closed(&record(&format!("call-{n}"), "alice", "m", n, None)).await })
        })
        .collect();
    for task in tasks {
        task.await.unwrap().unwrap();
    }
    assert_eq!(first.reader().unwrap().verify().unwrap(), VerifyReport { rows: 200, calls: 200 });
}

#[tokio::test]
async fn export_writes_one_json_line_per_row() {
    let dir = tempfile::tempdir().unwrap();
    let ledger = Ledger::open(settings(&dir.path().join("ledger.db")), None);
    write_calls(&ledger, &[("a", "alice", "m", 1, None), ("b", "bob", "m", 100, Some(2.0))]).await;
    let mut out = Vec::new();
    assert_eq!(ledger.reader().unwrap().export(Some(at(50)), &mut out).unwrap(), 2);
    let lines: Vec<serde_json::Value> =
        String::from_utf8(out).unwrap().lines().map(|line| serde_json::from_str(line).unwrap()).collect();
    assert_eq!(lines.len(), 2);
    assert_eq!((lines[0]["kind"].as_str(), lines[0]["seq"].as_i64()), (Some("open"), Some(3)));
    assert_eq!((lines[1]["kind"].as_str(), lines[1]["record"]["cost_usd"].as_f64()), (Some("close"), Some(2.0)));
    assert_eq!(lines[1]["hash"].as_str().map(str::len), Some(64));
}

#[test]
fn a_missing_file_is_not_a_ledger() {
    let dir = tempfile::tempdir().unwrap();
    let missing = Reader::open(&dir.path().join("none.db")).unwrap_err();
    assert!(matches!(missing, ReadError::Missing(_)), "{missing}");
}

#[test]
fn times_are_rfc3339_or_a_duration_back() {
    assert_eq!(parse_time("2026-12-01T00:00:00Z").unwrap(), UNIX_EPOCH + Duration::from_secs(1_796_083_200));
    let day_ago = parse_time("24h").unwrap();
    let expected = SystemTime::now() - Duration::from_secs(86_400);
    assert!(expected.duration_since(day_ago).unwrap_or_default() < Duration::from_secs(5));
    assert!(parse_time("yesterday").unwrap_err().contains("RFC 3339"));
}

/// A ledger file that ships to a real PostgreSQL server.
fn shipping(path: &Path, server: &weir_tests::PostgresServer) -> Ledger {
    Ledger::open(LedgerConfig { postgres: Some(target(server)), ..settings(path) }, None)
}

fn target(server: &weir_tests::PostgresServer) -> PostgresTarget {
    PostgresTarget::new(&server.url(), None)
}

/// Runs `read` on a blocking thread (the PostgreSQL client must not run on a
/// tokio worker).
async fn blocking<T: Send + 'static>(read: impl FnOnce() -> T + Send + 'static) -> T {
    tokio::task::spawn_blocking(read).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fleets_ledger_holds_each_row_once_and_answers_as_the_files_do() {
    let server = weir_tests::PostgresServer::start();
    let dir = tempfile::tempdir().unwrap();
    let first = shipping(&dir.path().join("a.db"), &server);
    write_calls(&first, &[("a1", "alice", "m1", 1, Some(0.1)), ("a2", "bob", "m2", 2, None)]).await;
    first.opened(&opening("a3", "alice", "m1", 3)).await.unwrap();
    first.held(&hold("a3", "alice", 3, 700)).await.unwrap();
    // A top-up: the call's second hold row (its output budget escalated).
    first.held(&hold("a3", "alice", 3, 300)).await.unwrap();
    let second = shipping(&dir.path().join("b.db"), &server);
    write_calls(&second, &[("b1", "alice", "m2", 4, Some(0.25))]).await;
    assert!(
        blocking({
            let (first, second) = (first.clone(), second.clone());
            move || first.ship_pending(Duration::from_secs(10)) && second.ship_pending(Duration::from_secs(10))
        })
        .await
    );
    assert_eq!(server.integer("SELECT COUNT(*) FROM ledger"), 9, "the top-up is a row of its own");
    assert_eq!(server.integer("SELECT COUNT(DISTINCT source) FROM ledger"), 2);

    let url = server.url();
    let shared = blocking(move || SharedReader::connect(&PostgresTarget::new(&url, None)).unwrap()).await;
    let all = Filter::default();
    let (records, unclosed, sums, cut_off) = blocking(move || {
        let cut_off = shared.spend_by_caller(at(0), true).unwrap();
        let newest: Vec<_> = shared.newest(&all, 2).unwrap().into_iter().map(|record| record.call_id).collect();
        assert_eq!(newest, ["b1", "a2"], "newest first, across both files");
        assert_eq!(shared.closed_call("a2").unwrap().and_then(|record| record.who.member), Some("bob".to_owned()));
        assert!(shared.closed_call("a3").unwrap().is_none(), "opened, never closed");
        (
            shared.records(&all).unwrap(),
            shared.unclosed(&all).unwrap(),
            shared.sums(&all, Some(GroupBy::Member)),
            cut_off,
        )
    })
    .await;
    let alice = |spend: &[CallerSpend]| -> u64 {
        spend
            .iter()
            .filter(|row| row.member.as_deref() == Some("alice"))
            .map(|row| crate::budget::total_tokens(&row.tokens))
            .sum()
    };
    assert_eq!(alice(&cut_off), 135 * 2 + 700 + 300, "her two closed calls and the cut-off one's hold and top-up");
    let from_file = blocking({
        let first = first.clone();
        move || first.reader().unwrap().spend_by_caller(at(0), true).unwrap()
    })
    .await;
    assert_eq!(alice(&from_file), 135 + 700 + 300, "the first file charges the hold and the top-up as the fleet does");
    let ids: Vec<_> = records.iter().map(|record| record.call_id.as_str()).collect();
    assert_eq!(ids, ["a1", "a2", "b1"], "both files' calls, by start time");
    assert_eq!(unclosed.iter().map(|opening| opening.call_id.as_str()).collect::<Vec<_>>(), ["a3"]);
    let sums = sums.unwrap();
    assert_eq!(sums.total.calls, 3);
    assert_eq!(sums.total.tokens.input, 300);
    assert!((sums.total.cost_usd - 0.35).abs() < 1e-12, "{}", sums.total.cost_usd);
    assert_eq!(sums.total.calls_without_cost, 1);
    let groups: Vec<_> = sums.groups.iter().map(|group| (group.value.clone(), group.totals.calls)).collect();
    assert_eq!(groups, [(Some("alice".to_owned()), 2), (Some("bob".to_owned()), 1)]);

    // The first file's sums as the file answers them and as PostgreSQL does.
    let url = server.url();
    let (local, remote) = blocking(move || {
        let by_alice = Filter { member: Some("alice".to_owned()), ..Filter::default() };
        let local = first.reader().unwrap().sums(&by_alice, Some(GroupBy::Model)).unwrap();
        let shared = SharedReader::connect(&PostgresTarget::new(&url, None)).unwrap();
        let only_first = Filter { until: Some(at(4)), ..by_alice };
        (local, shared.sums(&only_first, Some(GroupBy::Model)).unwrap())
    })
    .await;
    assert_eq!(local, remote);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rows_shipped_twice_are_stored_once() {
    let server = weir_tests::PostgresServer::start();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.db");
    let ledger = Ledger::open(settings(&path), None);
    write_calls(&ledger, &[("x", "alice", "m", 1, Some(0.5)), ("y", "bob", "m", 2, None)]).await;
    let url = server.url();
    let (first, again, through) = blocking(move || {
        let rows = Reader::open(&path).unwrap().rows_after(0, 100).unwrap();
        let source = Reader::open(&path).unwrap().first_hash().unwrap().unwrap();
        let mut client = postgres::connect(&PostgresTarget::new(&url, None)).unwrap();
        let first = postgres::ship(&mut client, &source, &rows, None).unwrap();
        let again = postgres::ship(&mut client, &source, &rows[1..], None).unwrap();
        (first, again, postgres::shipped_through(&mut client, &source).unwrap())
    })
    .await;
    assert_eq!((first, again, through), (4, 0, 4));
    assert_eq!(server.integer("SELECT COUNT(*) FROM ledger"), 4);
    let migrations = std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/migrations")).unwrap().count();
    let applied = usize::try_from(server.integer("SELECT COUNT(*) FROM refinery_schema_history")).unwrap();
    assert_eq!(applied, migrations, "the migrations, each applied once");
}

/// Each source file's chain walks in the fleet's table as in its file, and an
/// edit made behind the append-only trigger is named by source and row.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_files_chain_verifies_in_the_fleets_table_and_an_edit_is_named() {
    let server = weir_tests::PostgresServer::start();
    let dir = tempfile::tempdir().unwrap();
    let (first, second) = (shipping(&dir.path().join("a.db"), &server), shipping(&dir.path().join("b.db"), &server));
    write_calls(&first, &[("a1", "alice", "m", 1, Some(0.1)), ("a2", "bob", "m", 2, None)]).await;
    first.held(&hold("a3", "alice", 3, 70)).await.unwrap();
    write_calls(&second, &[("b1", "carol", "m", 4, None)]).await;
    let url = server.url();
    let (reports, local) = blocking(move || {
        assert!(first.ship_pending(Duration::from_secs(10)) && second.ship_pending(Duration::from_secs(10)));
        let local = [first.reader().unwrap().verify().unwrap(), second.reader().unwrap().verify().unwrap()];
        (SharedReader::connect(&PostgresTarget::new(&url, None)).unwrap().verify(None).unwrap(), local)
    })
    .await;
    let mut counts: Vec<_> = reports.iter().map(|source| (source.report.rows, source.report.calls)).collect();
    counts.sort_unstable();
    let mut expected: Vec<_> = local.iter().map(|report| (report.rows, report.calls)).collect();
    expected.sort_unstable();
    assert_eq!(counts, expected, "each source as its file");
    assert_eq!(counts, [(2, 1), (5, 3)]);

    let url = server.url();
    let broken = blocking(move || {
        let mut client = ::postgres::Client::connect(&url, ::postgres::NoTls).unwrap();
        client
            .batch_execute(
                "ALTER TABLE ledger DISABLE TRIGGER ledger_append_only;
                 UPDATE ledger SET input = input + 1 WHERE call_id = 'a2' AND kind = 'close';",
            )
            .unwrap();
        SharedReader::connect(&PostgresTarget::new(&url, None)).unwrap().verify(None).unwrap_err().to_string()
    })
    .await;
    assert!(broken.contains("call a2") && broken.contains("columns do not match"), "{broken}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fleets_table_refuses_edits() {
    let server = weir_tests::PostgresServer::start();
    let dir = tempfile::tempdir().unwrap();
    let ledger = shipping(&dir.path().join("ledger.db"), &server);
    write_calls(&ledger, &[("x", "alice", "m", 1, Some(0.5))]).await;
    assert!(blocking(move || ledger.ship_pending(Duration::from_secs(10))).await);
    let url = server.url();
    let refusals = blocking(move || {
        let mut client = ::postgres::Client::connect(&url, ::postgres::NoTls).unwrap();
        let update = client.execute("UPDATE ledger SET body = '{}'", &[]).unwrap_err();
        let delete = client.execute("DELETE FROM ledger", &[]).unwrap_err();
        [update, delete].map(|error| format!("{error:?}"))
    })
    .await;
    for refusal in refusals {
        assert!(refusal.contains("append-only"), "{refusal}");
    }
    assert_eq!(server.integer("SELECT COUNT(*) FROM ledger"), 2);
}

fn build(toml: &str) -> Result<crate::Weir, crate::BuildError> {
    crate::Weir::builder()
        .config(crate::Config::from_toml(toml, "t").unwrap())
        .providers_dir("/nonexistent-weir-ledger-test")
        .cache_dir(None)
        .build()
}

#[test]
fn a_postgres_url_that_does_not_parse_is_refused_at_build() {
    let Err(error) =
        build("[ledger]\npath = \"/tmp/weir-unused.db\"\npostgres_url = \"postgres://u:hunter2@h:notaport/db\"\n")
    else {
        panic!("the build must fail")
    };
    let message = error.to_string();
    assert!(message.contains("postgres_url") && message.contains("<credentials>@h:notaport"), "{message}");
    assert!(!message.contains("hunter2"), "the password is not repeated: {message}");
}

#[test]
fn a_postgres_ca_without_a_postgres_url_is_refused_at_build() {
    let Err(error) = build("[ledger]\npath = \"/tmp/weir-unused.db\"\npostgres_ca = \"ca.pem\"\n") else {
        panic!("the build must fail")
    };
    assert!(error.to_string().contains("`[ledger] postgres_ca` is set without `postgres_url`"), "{error}");
}

/// PostgreSQL unreachable at start: the gateway starts, its budgets read
/// back from its own file (logged), not reset.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_postgres_unreachable_the_budgets_are_rebuilt_from_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.db");
    let ledger = Ledger::open(settings(&path), None);
    write_calls(&ledger, &[("x", "alice", "m", 1, Some(0.5)), ("y", "alice", "m", 2, None)]).await;
    drop(ledger);
    let toml = format!(
        "[ledger]\npath = {:?}\npostgres_url = \"postgres://weir@127.0.0.1:1/postgres\"\n\
         [member.alice]\ndaily_tokens = 1000\n",
        path.to_str().unwrap()
    );
    let weir = blocking(move || build(&toml).unwrap()).await;
    let status = weir.budgets().status();
    let alice = status.iter().find(|status| status.scope.name() == "alice").unwrap();
    // Two calls of 100 input + 20 output + 10 cache read + 5 cache write
    // (the 2 reasoning tokens are part of the output).
    assert_eq!(alice.spent, crate::budget::Amount::Tokens(270));
}

pub(crate) fn hold(call_id: &str, member: &str, start: u64, tokens: u64) -> crate::record::HoldRecord {
    crate::record::HoldRecord {
        call_id: call_id.to_owned(),
        started_at: at(start),
        held_at: at(start) + Duration::from_millis(3),
        who: Who { key_id: Some(format!("{member}-key")), member: Some(member.to_owned()), team: Some("t".to_owned()) },
        model: "m".to_owned(),
        tokens,
        usd: Some(0.01),
    }
}

/// A hold row counts for a call that never closed or was charged its worst
/// case, and only where the budgets' rebuild asks for it.
#[tokio::test]
async fn a_call_held_and_never_closed_counts_its_worst_case() {
    let dir = tempfile::tempdir().unwrap();
    let ledger = Ledger::open(settings(&dir.path().join("ledger.db")), None);
    ledger.opened(&opening("done", "alice", "m", 1)).await.unwrap();
    ledger.held(&hold("done", "alice", 1, 5000)).await.unwrap();
    ledger.closed(&record("done", "alice", "m", 1, Some(0.5))).await.unwrap();
    ledger.opened(&opening("cut", "alice", "m", 2)).await.unwrap();
    ledger.held(&hold("cut", "alice", 2, 700)).await.unwrap();
    ledger.closed(&record("other", "bob", "m", 3, None)).await.unwrap();
    // Charged its worst case (its usage never reported): the hold counts, not the usage.
    ledger.held(&hold("left", "bob", 4, 900)).await.unwrap();
    let left = CallRecord { charged_worst_case: true, ..(*record("left", "bob", "m", 4, None)).clone() };
    ledger.closed(&Arc::new(left)).await.unwrap();
    // `done`'s opening rode with its closing record and was left out; its hold
    // was not. `cut`'s rows wait for its closing row until their linger passes.
    let reader = ledger.reader().unwrap();
    let report = rows_committed(&reader, 7).await;
    assert_eq!(report, VerifyReport { rows: 7, calls: 4 }, "hold rows are in the chain");
    let spend = |cut_off| {
        let mut rows = reader.spend_by_caller(at(0), cut_off).unwrap();
        rows.sort_by(|a, b| a.member.cmp(&b.member));
        rows.iter()
            .map(|row| (row.member.clone().unwrap(), crate::budget::total_tokens(&row.tokens)))
            .collect::<Vec<_>>()
    };
    // A closed call's usage is 135 tokens (its 5 000 held are settled away).
    assert_eq!(spend(true), [("alice".to_owned(), 135 + 700), ("bob".to_owned(), 135 + 900)]);
    assert_eq!(spend(false), [("alice".to_owned(), 135), ("bob".to_owned(), 135 + 135)]);
    assert_eq!(reader.records(&Filter::default()).unwrap().len(), 3, "sums and records read closing rows only");
}

/// Through the ledger's observer: a call whose hold was committed in an
/// earlier batch than its closing row still has it taken back (its closing
/// row does not stand alone), and a call that held nothing closes without a
/// look at earlier rows; the roll-ups answer as the rows do.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_calls_closing_row_takes_back_a_hold_committed_before_it() {
    let dir = tempfile::tempdir().unwrap();
    let ledger = Ledger::open(settings(&dir.path().join("ledger.db")), None);
    ledger.opened(&opening("slow", "alice", "m", 1)).await.unwrap();
    ledger.held(&hold("slow", "alice", 1, 5000)).await.unwrap();
    let reader = ledger.reader().unwrap();
    rows_committed(&reader, 2).await;
    ledger.closed(&record("slow", "alice", "m", 1, Some(0.5))).await.unwrap();
    ledger.closed(&record("plain", "bob", "m", 2, None)).await.unwrap();
    rows_committed(&reader, 4).await;
    let totals = |rows: Vec<super::query::CallerSpend>| {
        let mut totals: Vec<(String, u64)> =
            rows.iter().map(|row| (row.member.clone().unwrap(), crate::budget::total_tokens(&row.tokens))).collect();
        totals.sort();
        totals
    };
    let rolled = totals(reader.spend_by_caller(at(0), true).unwrap());
    assert_eq!(rolled, [("alice".to_owned(), 135), ("bob".to_owned(), 135)], "the hold of 5 000 taken back");
    assert_eq!(rolled, totals(reader.spend_from_rows(at(0), true).unwrap()));
    let query = UsageQuery { group_by: Some(GroupBy::Member), ..UsageQuery::default() };
    assert_eq!(reader.usage(&query).unwrap().total.calls, 2);
    assert_eq!(reader.usage(&query).unwrap().groups, reader.usage_from_rows(&query).unwrap().groups);
}

/// A version 1 file (no hold rows) is migrated in place when a writer opens
/// it: every row kept, in order, the chain intact, and hold rows accepted.
#[tokio::test]
async fn a_version_1_file_is_migrated_with_its_chain() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.db");
    {
        let old = rusqlite::Connection::open(&path).unwrap();
        let schema = store::tests::version_1_schema();
        assert!(!schema.contains("charged_worst") && !schema.contains("'hold'"), "{schema}");
        old.execute_batch(&schema).unwrap();
        let rows = [
            Row::opening(&opening("a", "alice", "m", 1)).unwrap(),
            Row::closing(&record("a", "alice", "m", 1, None)).unwrap(),
        ];
        store::tests::append_version_1(&old, &rows);
        old.pragma_update(None, "user_version", 1).unwrap();
    }
    let unmigrated = Reader::open(&path).unwrap_err().to_string();
    assert!(unmigrated.contains("schema version 1") && unmigrated.contains("migrated in place"), "{unmigrated}");
    let ledger = Ledger::open(settings(&path), None);
    ledger.held(&hold("b", "bob", 2, 9)).await.unwrap();
    ledger.closed(&record("b", "bob", "m", 2, None)).await.unwrap();
    let reader = ledger.reader().unwrap();
    assert_eq!(reader.verify().unwrap(), VerifyReport { rows: 4, calls: 2 });
    let version: i64 =
        rusqlite::Connection::open(&path).unwrap().query_row("PRAGMA user_version", [], |row| row.get(0)).unwrap();
    assert_eq!(version, store::SCHEMA_VERSION);
    let file = rusqlite::Connection::open(&path).unwrap();
    assert_eq!(store::tests::indexes(&file), ["ledger_started_call"], "the old indexes are replaced");
    let refused = file.execute("DELETE FROM ledger", []).unwrap_err();
    assert!(refused.to_string().contains("append-only"), "the triggers came back: {refused}");
}

/// A version 4 file (bodies as text, hashes as hex, each row's `prev_hash`
/// stored; no shapes) becomes version 5 as it is when a writer opens it:
/// its rows stay as written, the rows after them are compact, and the chain
/// verifies across both, with every body read back whole.
#[tokio::test]
async fn a_version_4_file_takes_compact_rows_after_its_own() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.db");
    {
        let writer = store::open_writer(&path, LedgerSync::Normal, None).unwrap();
        let rows: Vec<Row> = [("a", "alice", 1), ("b", "bob", 2)]
            .iter()
            .map(|(call, member, start)| Row::closing(&record(call, member, "m", *start, Some(0.5))).unwrap())
            .collect();
        let run = store::Run { segment: "s", first_line: 0, rows: rows.iter().map(Some).collect() };
        store::append_logged_with(&writer, [run], store::Append { keep_rollups: true, compact: false }).unwrap();
        // As version 4 stored them: kinds by name, the hashes as hex, each prev_hash written out.
        store::tests::as_version_6(&writer);
        writer
            .execute_batch(
                "DROP TRIGGER ledger_no_update;
                 UPDATE ledger SET hash = lower(hex(hash));
                 UPDATE ledger SET prev_hash = COALESCE((SELECT p.hash FROM ledger AS p WHERE p.seq = ledger.seq - 1),
                     '0000000000000000000000000000000000000000000000000000000000000000');
                 ALTER TABLE ledger DROP COLUMN shape_id;
                 DROP TABLE ledger_shapes;
                 PRAGMA user_version = 4;",
            )
            .unwrap();
    }
    let ledger = Ledger::open(settings(&path), None);
    write_calls(&ledger, &[("c", "carol", "m", 3, Some(0.25)), ("d", "dan", "m", 4, None)]).await;
    let reader = ledger.reader().unwrap();
    assert_eq!(reader.verify().unwrap(), VerifyReport { rows: 6, calls: 4 });
    let file = rusqlite::Connection::open(&path).unwrap();
    let stored: Vec<(String, String, String)> = file
        .prepare("SELECT call_id, typeof(body), typeof(hash) FROM ledger WHERE kind IN (1, 'close') ORDER BY seq")
        .unwrap()
        .query_map([], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let text = |call: &str| (call.to_owned(), "text".to_owned(), "text".to_owned());
    let compact = |call: &str| (call.to_owned(), "blob".to_owned(), "blob".to_owned());
    assert_eq!(stored, [text("a"), text("b"), compact("c"), compact("d")]);
    let records = reader.records(&Filter::default()).unwrap();
    assert_eq!(records.iter().map(|r| r.call_id.as_str()).collect::<Vec<_>>(), ["a", "b", "c", "d"]);
    assert_eq!(records[2], *record("c", "carol", "m", 3, Some(0.25)));
}

/// A version 2 file written before the one index: a writer opening it drops
/// the two old indexes and makes the new one; its rows and chain are kept.
#[tokio::test]
async fn a_file_with_the_old_indexes_gets_the_one_index() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.db");
    let ledger = Ledger::open(settings(&path), None);
    write_calls(&ledger, &[("a", "alice", "m", 1, None)]).await;
    drop(ledger);
    {
        let file = rusqlite::Connection::open(&path).unwrap();
        file.execute_batch("DROP INDEX ledger_started_call").unwrap();
        file.execute_batch(store::tests::OLD_INDEXES).unwrap();
        assert_eq!(store::tests::indexes(&file), ["ledger_call", "ledger_started"]);
    }
    let ledger = Ledger::open(settings(&path), None);
    write_calls(&ledger, &[("b", "bob", "m", 2, None)]).await;
    let file = rusqlite::Connection::open(&path).unwrap();
    assert_eq!(store::tests::indexes(&file), ["ledger_started_call"]);
    assert_eq!(ledger.reader().unwrap().verify().unwrap().calls, 2, "the chain verifies across the change");
}

/// The queries that look for a call's closing row (the unclosed calls, and the
/// budgets' holds) find it through the index, not by reading the table once
/// per row: the plan of each names the index for the inner lookup.
#[tokio::test]
async fn a_calls_closing_row_is_looked_up_through_the_index() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.db");
    let ledger = Ledger::open(settings(&path), None);
    write_calls(&ledger, &[("a", "alice", "m", 1, None)]).await;
    let file = rusqlite::Connection::open(&path).unwrap();
    super::register_sql_functions(&file).unwrap();
    let plan = |query: sql::Query| {
        let mut explain = file.prepare(&format!("EXPLAIN QUERY PLAN {}", query.sql)).unwrap();
        let params = rusqlite::params_from_iter(query::values(query.params));
        let rows = explain.query_map(params, |row| row.get::<_, String>(3)).unwrap();
        rows.map(Result::unwrap).collect::<Vec<_>>()
    };
    let unclosed = plan(sql::unclosed(&Filter::default(), sql::Dialect::Sqlite));
    let held = plan(sql::spend_by_caller_in(
        sql::Span { from: Some(store::unix_ms(at(0))), to: None },
        true,
        sql::Dialect::Sqlite,
    ));
    // The id is matched in either of its stored forms (see `callid`): the
    // index is searched by the start and the id, once per form.
    for steps in [unclosed, held] {
        let inner = steps.iter().find(|step| step.contains("closed")).unwrap_or_else(|| panic!("{steps:?}"));
        assert!(inner.starts_with("SEARCH closed USING"), "{steps:?}");
        assert!(inner.contains("INDEX ledger_started_call (started_ms=? AND call_id=?)"), "{steps:?}");
    }
    let one_call = plan(sql::closed_call(&v7_id_at(1), sql::Dialect::Sqlite).unwrap());
    assert!(
        one_call.iter().any(|step| step.contains("INDEX ledger_started_call (started_ms>? AND started_ms<?)")),
        "{one_call:?}"
    );
    let earlier = plan(sql::Query {
        sql: super::rollup_store::EARLIER.to_owned(),
        params: vec![
            sql::Param::Integer(0),
            sql::Param::Text("a".to_owned()),
            sql::Param::Integer(9),
            sql::Param::Text("a".to_owned()),
        ],
    });
    assert!(
        earlier.iter().any(|step| step.contains("INDEX ledger_started_call (started_ms=? AND call_id=?")),
        "{earlier:?}"
    );
}

/// A server that takes TCP only over TLS: the shipper and the readers reach it
/// with `sslmode=require` and its CA in `postgres_ca`; without that CA the
/// certificate is refused (nothing shipped, the reason said); without TLS the
/// server refuses the connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fleets_ledger_is_reached_over_tls_with_the_operators_ca() {
    let server = weir_tests::PostgresServer::start_tls();
    let require = format!("{}?sslmode=require", server.url());
    let dir = tempfile::tempdir().unwrap();
    let trusted = PostgresTarget::new(&require, Some(server.ca_file()));
    let ledger =
        Ledger::open(LedgerConfig { postgres: Some(trusted.clone()), ..settings(&dir.path().join("a.db")) }, None);
    write_calls(&ledger, &[("t1", "alice", "m", 1, Some(0.1))]).await;
    let (shipped, untrusted, plain) = blocking(move || {
        assert!(ledger.ship_pending(Duration::from_secs(10)));
        let shipped = SharedReader::connect(&trusted).unwrap().records(&Filter::default()).unwrap().len();
        let untrusted = SharedReader::connect(&PostgresTarget::new(&require, None)).unwrap_err().to_string();
        let disabled = require.replace("sslmode=require", "sslmode=disable");
        let plain = SharedReader::connect(&PostgresTarget::new(&disabled, None)).unwrap_err().to_string();
        (shipped, untrusted, plain)
    })
    .await;
    assert_eq!(shipped, 1, "shipped and read back over TLS");
    assert!(untrusted.to_lowercase().contains("certificate"), "an unknown CA is refused: {untrusted}");
    assert!(plain.contains("no pg_hba.conf entry") || plain.contains("pg_hba"), "plain TCP is refused: {plain}");
}

#[test]
fn a_ca_file_that_cannot_be_read_or_holds_nothing_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty.pem");
    std::fs::write(&empty, "not a certificate\n").unwrap();
    for (ca, expected) in [(dir.path().join("missing.pem"), "postgres_ca"), (empty, "holds no certificate")] {
        let ca_name = ca.display().to_string();
        let target = PostgresTarget::new("postgres://weir@127.0.0.1:1/postgres", Some(ca));
        let Err(error) = postgres::connect(&target) else { panic!("{ca_name} must not connect") };
        let error = error.to_string();
        assert!(error.contains(expected), "{error}");
    }
}

/// The WAL is checkpointed off the calls' commits and starts again from its
/// beginning: a long run of single commits leaves it a few MB, not one frame
/// set per commit (4,000 commits of a closing row, each a few pages, would
/// be tens of MB without checkpoints).
#[tokio::test]
async fn the_wal_stays_bounded_over_many_commits() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.db");
    let ledger = Ledger::open(settings(&path), None);
    for n in 0..4000 {
        let call_id = format!("call-{n}");
        ledger.opened(&opening(&call_id, "alice", "m", n)).await.unwrap();
        ledger.closed(&record(&call_id, "alice", "m", n, None)).await.unwrap();
    }
    let wal = std::fs::metadata(dir.path().join("ledger.db-wal")).unwrap().len();
    assert!(wal < 16 * 1024 * 1024, "the WAL grew to {wal} bytes");
    let report = ledger.reader().unwrap().verify().unwrap();
    assert_eq!(report.calls, 4000);
    assert!((4000..8000).contains(&report.rows), "{report:?}");
}

/// A closing record whose acknowledgement is dropped unpolled (a call
/// closed by a drop cannot wait) is still committed.
#[tokio::test]
async fn a_closing_record_not_waited_for_is_still_committed() {
    let dir = tempfile::tempdir().unwrap();
    let ledger = Ledger::open(settings(&dir.path().join("ledger.db")), None);
    ledger.opened(&opening("dropped", "bob", "m", 1)).await.unwrap();
    drop(ledger.closed(&record("dropped", "bob", "m", 1, None)));
    let records = ledger.reader().unwrap().records(&Filter::default()).unwrap();
    assert_eq!(records.iter().map(|r| r.call_id.as_str()).collect::<Vec<_>>(), ["dropped"]);
}

/// A call never waits for another process's lock on the file: its record is
/// committed to the log and the call answered while the lock is held; the
/// ledger's thread moves it into the file once the lock is released.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_is_answered_while_another_writer_holds_the_files_lock() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.db");
    let batches = Arc::new(Batches::default());
    let ledger = Ledger::open(settings(&path), Some(batches.clone()));
    let holder = rusqlite::Connection::open(&path).unwrap();
    holder.execute_batch("BEGIN IMMEDIATE").unwrap();
    tokio::time::timeout(Duration::from_secs(2), ledger.closed(&record("late", "alice", "m", 1, None)))
        .await
        .expect("the call does not wait for the lock")
        .unwrap();
    let in_file = |connection: &rusqlite::Connection| {
        connection.query_row("SELECT count(*) FROM ledger", [], |row| row.get::<_, i64>(0)).unwrap()
    };
    assert_eq!(in_file(&holder), 0, "not in the file while the lock is held");
    tokio::time::sleep(Duration::from_millis(300)).await;
    holder.execute_batch("COMMIT").unwrap();
    assert!(
        blocking({
            let ledger = ledger.clone();
            move || ledger.fill_pending(Duration::from_secs(10))
        })
        .await
    );
    assert!(batches.failed.lock().unwrap().is_empty());
    assert_eq!(in_file(&holder), 1);
    let records = ledger.reader().unwrap().records(&Filter::default()).unwrap();
    assert_eq!(records.iter().map(|r| r.call_id.as_str()).collect::<Vec<_>>(), ["late"]);
}

/// Rows a killed gateway logged and never moved into the file are applied
/// when the ledger is next opened: each once, in order, the chain intact; an
/// unfinished last line (a write the kill cut off: its call was never
/// answered) is left out, and the applied segment deleted.
#[tokio::test]
async fn rows_a_killed_gateway_logged_are_applied_at_the_next_start() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.db");
    let rows: Vec<Row> =
        ["k1", "k2", "k3"].iter().map(|id| Row::closing(&record(id, "alice", "m", 1, None)).unwrap()).collect();
    {
        let mut log = log::Log::new(&path, false);
        log.append(rows.iter()).unwrap();
        // Dropped without a filler, its lock released as a killed process's is.
    }
    let segment = segments(&path).pop().unwrap();
    std::fs::OpenOptions::new().append(true).open(&segment).unwrap().write_all(b"{\"kind\":\"clo").unwrap();
    let ledger = Ledger::open(settings(&path), None);
    assert!(!segment.exists(), "the applied segment is deleted");
    let reader = ledger.reader().unwrap();
    assert_eq!(reader.verify().unwrap(), VerifyReport { rows: 3, calls: 3 });
    let ids: Vec<_> = reader.records(&Filter::default()).unwrap().into_iter().map(|r| r.call_id).collect();
    assert_eq!(ids, ["k1", "k2", "k3"]);
    drop(ledger);
    let again = Ledger::open(settings(&path), None);
    assert_eq!(again.reader().unwrap().verify().unwrap().rows, 3, "nothing applied twice");
}

/// A reader catches up on the log of a gateway still running (its rows are
/// read before the ledger's thread moves them), and that thread's own move of
/// the same rows adds none twice; the running gateway's segment is kept.
#[tokio::test]
async fn a_reader_and_the_thread_apply_each_logged_row_once() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.db");
    let ledger = Ledger::open(settings(&path), None);
    for n in 0..5 {
        ledger.closed(&record(&format!("r{n}"), "alice", "m", n, None)).await.unwrap();
    }
    assert_eq!(Reader::open(&path).unwrap().verify().unwrap().rows, 5, "read before the thread's move");
    assert!(ledger.fill_pending(Duration::from_secs(5)));
    ledger.closed(&record("r5", "alice", "m", 5, None)).await.unwrap();
    assert!(ledger.fill_pending(Duration::from_secs(5)));
    assert_eq!(Reader::open(&path).unwrap().verify().unwrap(), VerifyReport { rows: 6, calls: 6 });
    assert_eq!(segments(&path).len(), 1, "the running ledger's segment stays");
}

/// A segment past its size is left for a new one, and deleted once its rows
/// are in the file; every row stays in one chain.
#[tokio::test]
async fn a_full_segment_is_deleted_once_applied() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.db");
    let ledger = Ledger::open(settings(&path), None);
    let first = segments(&path);
    let line = Row::closing(&record("r-00000", "alice", "m", 1, None)).unwrap().body.len() as u64;
    let calls = log::SEGMENT_BYTES / line + 10;
    for n in 0..calls {
        ledger.closed(&record(&format!("r-{n:05}"), "alice", "m", n, None)).await.unwrap();
    }
    assert!(ledger.fill_pending(Duration::from_secs(10)));
    let now = segments(&path);
    assert_eq!(now.len(), 1, "{now:?}");
    assert_ne!(now, first, "a new segment took over");
    assert_eq!(ledger.reader().unwrap().verify().unwrap(), VerifyReport { rows: calls, calls });
}

/// Whether a task made ready just before `call_id` closed ran before the
/// close's commit was acknowledged (on a one-thread runtime, only if the
/// close yielded).
async fn ran_before_the_commit(ledger: &Ledger, call_id: &str) -> bool {
    let ran = Arc::new(AtomicBool::new(false));
    let other = tokio::spawn({
        let ran = ran.clone();
        async move { ran.store(true, Ordering::SeqCst) }
    });
    ledger.closed(&record(call_id, "alice", "m", 1, None)).await.unwrap();
    let ran_first = ran.load(Ordering::SeqCst);
    other.await.unwrap();
    ran_first
}

/// A call closing while no other call is open commits at once (nothing can
/// join its commit); one closing while another is open yields first, so the
/// calls ready beside it add their records to the same commit.
#[tokio::test(flavor = "current_thread")]
async fn a_call_alone_commits_at_once_and_one_in_company_yields_first() {
    let dir = tempfile::tempdir().unwrap();
    let ledger = Ledger::open(settings(&dir.path().join("ledger.db")), None);
    assert!(!ran_before_the_commit(&ledger, "alone").await, "a call alone does not yield");
    ledger.opened(&opening("beside", "alice", "m", 1)).await.unwrap();
    ledger.opened(&opening("first", "alice", "m", 1)).await.unwrap();
    assert!(ran_before_the_commit(&ledger, "first").await, "a call beside an open one yields");
    // "beside" is now alone: closing it does not yield.
    assert!(!ran_before_the_commit(&ledger, "beside").await, "the last open call does not yield");
    let records = ledger.reader().unwrap().records(&Filter::default()).unwrap();
    assert_eq!(records.iter().map(|r| r.call_id.as_str()).collect::<Vec<_>>(), ["alone", "first", "beside"]);
}

/// `verify` holds every column to the body: a closing row with any one
/// column changed (its hash still over the untouched body) is a broken chain
/// naming the columns, and the row as made checks out.
#[test]
fn a_row_with_any_column_unlike_its_body_breaks_the_chain() {
    let made = store::Row::closing(&record("c1", "alice", "m", 5, Some(0.25))).unwrap();
    let check = |row: store::Row| {
        let hash = store::chain_hash(store::GENESIS, 1, "close", row.body.as_bytes());
        let link = query::Link { seq: 1, prev_hash: Some(store::GENESIS.to_owned()), hash, covers_columns: false };
        query::ChainCheck::default().next("close", "c1", Some(row), link).map_err(|broken| broken.reason)
    };
    assert_eq!(check(made.clone()), Ok(()));
    let changed: [fn(&mut store::Row); 12] = [
        |row| row.call_id.push('x'),
        |row| row.at_ms += 1,
        |row| row.started_ms += 1,
        |row| row.key_id = None,
        |row| row.member = Some("bob".to_owned()),
        |row| row.team = None,
        |row| row.model.push('x'),
        |row| row.category = None,
        |row| row.tokens.reasoning += 1,
        |row| row.cost_usd = Some(0.26),
        |row| row.charged_worst = !row.charged_worst,
        |row| row.kind = store::Kind::Hold,
    ];
    for (index, change) in changed.iter().enumerate() {
        let mut row = made.clone();
        change(&mut row);
        let broken = check(row).unwrap_err();
        assert!(
            broken.contains("columns do not match") || broken.contains("does not parse"),
            "change {index}: {broken}"
        );
    }
}

/// `verify` reads on one thread and checks on the others, in batches taken
/// back in order: across many batches (rows in 12 batches of 512, more than
/// the threads hold at once) the first failure in row order is the answer,
/// whether it is a broken row or a row that cannot be read, and either side
/// stopping stops the walk.
#[test]
fn a_walk_over_many_batches_answers_its_first_failure_in_row_order() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.db");
    // Members, models and costs vary from row to row: the walk reuses its
    // rows' strings from batch to batch, and a value left from an earlier
    // row would break the chain.
    let rows: Vec<store::Row> = (0..6_000)
        .map(|n| {
            let (member, model) = (["alice", "bob"][n as usize % 2], ["m", "model-two", "m3"][n as usize % 3]);
            store::Row::closing(&record(&format!("call-{n}"), member, model, n, (n % 7 != 0).then_some(0.01))).unwrap()
        })
        .collect();
    let writer = store::open_writer(&path, LedgerSync::Normal, None).unwrap();
    let run = store::Run { segment: "s", first_line: 0, rows: rows.iter().map(Some).collect() };
    store::append_logged(&writer, [run]).unwrap();
    assert_eq!(Reader::open(&path).unwrap().verify().unwrap(), VerifyReport { rows: 6_000, calls: 6_000 });

    writer.execute_batch("DROP TRIGGER ledger_no_update").unwrap();
    let verify = || Reader::open(&path).unwrap().verify();
    // A break in the last batch, checked while earlier ones may still be.
    writer.execute("UPDATE ledger SET input = input + 1 WHERE seq = 5990", []).unwrap();
    match verify() {
        Err(VerifyError::Broken(broken)) => assert_eq!((broken.seq, broken.call_id.as_str()), (5_990, "call-5989")),
        other => panic!("expected the break at 5990, got {other:?}"),
    }
    // A call id stored as bytes cannot be read: row 5400 fails the read.
    writer.execute("UPDATE ledger SET call_id = x'07' WHERE seq = 5400", []).unwrap();
    assert!(matches!(verify(), Err(VerifyError::Read(_))), "{:?}", verify());
    // A broken row before it is the answer.
    writer.execute("UPDATE ledger SET input = input + 1 WHERE seq = 3600", []).unwrap();
    match verify() {
        Err(VerifyError::Broken(broken)) => assert_eq!((broken.seq, broken.call_id.as_str()), (3_600, "call-3599")),
        other => panic!("expected the break at 3600, got {other:?}"),
    }
    // An unreadable row before the break is the answer in turn.
    writer.execute("UPDATE ledger SET call_id = x'07' WHERE seq = 1800", []).unwrap();
    assert!(matches!(verify(), Err(VerifyError::Read(_))), "{:?}", verify());
    // A compact body that does not decompress before it is a break naming it.
    writer.execute("UPDATE ledger SET body = x'0107' WHERE seq = 1200", []).unwrap();
    match verify() {
        Err(VerifyError::Broken(broken)) => {
            assert_eq!(broken.seq, 1_200, "{broken}");
            assert!(broken.reason.contains("decompress"), "{broken}");
        }
        other => panic!("expected the break at 1200, got {other:?}"),
    }
}
