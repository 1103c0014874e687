//! Sealed segments, archives and retention on real SQLite files and real
//! archive files: several segments verify, with and without their archive;
//! a missing, truncated, altered or reordered archive file, and a forged
//! segment row, fail naming the segment; retention deletes only what it may
//! (an unarchived or unshipped segment, the rows a budget period reads raw
//! and the hold of a call still running stay, and a budget's sum is the
//! same after); a kill between an archive's steps is finished at the next
//! open.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::SystemTime;

use rusqlite::Connection;

use super::segments::{self, Segment, SegmentState, Segmenter};
use super::store::{self, Row, Run};
use super::tests::{at, hold, record};
use super::*;
use crate::accounting::Timezone;
use crate::catalog::LedgerSync;

/// Seal at every fill, archive in `dir/archive`, release every archived
/// segment (`retain_bytes = 0`).
fn releasing(dir: &Path) -> SegmentPolicy {
    SegmentPolicy {
        max_bytes: Some(1),
        max_age: None,
        archive_dir: Some(dir.join("archive")),
        retention: Some(Retention { max_age: None, max_bytes: Some(0), shipped: false }),
        budget_timezone: Timezone::UTC,
    }
}

/// Seal at every fill; nothing archived or released.
fn sealing_only(dir: &Path) -> SegmentPolicy {
    SegmentPolicy { archive_dir: None, retention: None, ..releasing(dir) }
}

/// Seal at every fill, no archive, release every segment shipped.
fn shipped_only(dir: &Path) -> SegmentPolicy {
    SegmentPolicy {
        archive_dir: None,
        retention: Some(Retention { max_age: None, max_bytes: Some(0), shipped: true }),
        ..releasing(dir)
    }
}

fn config(dir: &Path, policy: SegmentPolicy) -> LedgerConfig {
    LedgerConfig { segments: Some(policy), ..LedgerConfig::at(dir.join("ledger.db")) }
}

/// Closes `calls` through `ledger`, then waits for one fill of them.
async fn close_calls(ledger: &Ledger, calls: &[&str]) {
    for (n, call_id) in (1..).zip(calls) {
        ledger.closed(&record(call_id, "alice", "m", n, Some(0.01))).await.unwrap();
    }
    assert!(ledger.fill_pending(Duration::from_secs(5)), "the rows reached the file");
}

/// Six calls in three fills through a ledger with `policy`.
async fn six_calls(dir: &Path, policy: SegmentPolicy) {
    let ledger = Ledger::open(config(dir, policy), None);
    close_calls(&ledger, &["c1", "c2"]).await;
    close_calls(&ledger, &["c3", "c4"]).await;
    close_calls(&ledger, &["c5", "c6"]).await;
}

fn listed(path: &Path) -> Vec<Segment> {
    segments::list(&Connection::open(path).unwrap()).unwrap()
}

fn live_rows(path: &Path) -> i64 {
    Connection::open(path).unwrap().query_row("SELECT count(*) FROM ledger", [], |row| row.get(0)).unwrap()
}

fn archives(dir: &Path) -> Vec<PathBuf> {
    archive::files(&dir.join("archive"), &dir.join("ledger.db")).unwrap()
}

fn segment_break(found: Result<AnchoredReport, VerifyError>) -> SegmentBreak {
    match found {
        Err(VerifyError::Segment(broken)) => broken,
        other => panic!("expected a segment's break, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ledger_sealed_into_segments_verifies_across_them() {
    let dir = tempfile::tempdir().unwrap();
    let policy = sealing_only(dir.path());
    six_calls(dir.path(), policy).await;
    let path = dir.path().join("ledger.db");
    let sealed = listed(&path);
    assert!((3..=6).contains(&sealed.len()), "one segment per fill: {sealed:?}");
    assert_eq!((sealed[0].first_seq, sealed[0].prev_hash.as_str()), (1, store::GENESIS));
    assert_eq!(sealed.last().unwrap().last_seq, 6);
    assert!(sealed.windows(2).all(|pair| pair[1].first_seq == pair[0].last_seq + 1));
    assert!(sealed.iter().all(|segment| segment.state == SegmentState::Sealed && segment.bytes > 0));
    let report = Reader::open(&path).unwrap().verify_anchored(None).unwrap();
    assert_eq!(report.chain, VerifyReport { rows: 6, calls: 6 });
    assert_eq!(report.segments.sealed, sealed.len() as u64);
    assert_eq!((report.segments.released, report.segments.first_live), (0, 1));
    assert_eq!(live_rows(&path), 6);

    // A segment's head that is not its last row's is named.
    let forged = Connection::open(&path).unwrap();
    let fake = "f".repeat(64);
    forged
        .execute("UPDATE ledger_segments SET head_hash = ?1 WHERE id = ?2", rusqlite::params![fake, sealed[1].id])
        .unwrap();
    forged
        .execute("UPDATE ledger_segments SET prev_hash = ?1 WHERE id = ?2", rusqlite::params![fake, sealed[2].id])
        .unwrap();
    let broken = segment_break(Reader::open(&path).unwrap().verify_anchored(None));
    assert!(broken.segment.starts_with(&format!("segment {} (rows", sealed[1].id)), "{broken}");
    assert!(broken.reason.contains("not its last row's hash"), "{broken}");
    // One whose link to the segment before it is cut is named by the table's check.
    forged
        .execute(
            "UPDATE ledger_segments SET prev_hash = ?1 WHERE id = ?2",
            rusqlite::params![store::GENESIS, sealed[2].id],
        )
        .unwrap();
    let broken = segment_break(Reader::open(&path).unwrap().verify_anchored(None));
    assert!(broken.segment.starts_with(&format!("segment {} (rows", sealed[2].id)), "{broken}");
    assert!(broken.reason.contains("does not link"), "{broken}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn neither_size_nor_age_reached_seals_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let policy =
        SegmentPolicy { max_bytes: Some(1 << 30), max_age: Some(Duration::from_secs(3600)), ..releasing(dir.path()) };
    six_calls(dir.path(), policy).await;
    assert!(listed(&dir.path().join("ledger.db")).is_empty());
    assert_eq!(live_rows(&dir.path().join("ledger.db")), 6);
}

/// An upkeep that comes due while the file is not open (its open failed)
/// is not due again at once: the ledger's thread would wake over and over.
#[test]
fn an_upkeep_without_a_file_is_next_due_an_interval_later() {
    let dir = tempfile::tempdir().unwrap();
    let policy = SegmentPolicy { max_bytes: None, max_age: Some(Duration::from_secs(1)), ..sealing_only(dir.path()) };
    let mut filler =
        super::fill::Filler::new(config(dir.path(), policy), None, None, Default::default(), Default::default());
    let later = std::time::Instant::now() + Duration::from_secs(1);
    assert!(filler.upkeep_due_at().unwrap() <= later, "due within half the sealing age");
    filler.upkeep_if_due(later);
    assert!(filler.upkeep_due_at().unwrap() > later);
}

/// A segment sealed by age needs no later fill: an idle ledger's thread
/// keeps the segments too, and seals rows once they are `max_age` old.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_ledger_seals_by_age() {
    let dir = tempfile::tempdir().unwrap();
    let policy = SegmentPolicy { max_bytes: None, max_age: Some(Duration::from_secs(1)), ..sealing_only(dir.path()) };
    let ledger = Ledger::open(config(dir.path(), policy), None);
    let now = std::time::SystemTime::now();
    for call_id in ["a", "b"] {
        let record = crate::record::CallRecord {
            started_at: now,
            ended_at: now,
            ..(*record(call_id, "alice", "m", 1, Some(0.01))).clone()
        };
        ledger.closed(&std::sync::Arc::new(record)).await.unwrap();
    }
    assert!(ledger.fill_pending(Duration::from_secs(5)), "the rows reached the file");
    let path = dir.path().join("ledger.db");
    assert!(listed(&path).is_empty(), "rows younger than a second are not sealed at their fill");
    let mut sealed = Vec::new();
    for _ in 0..100 {
        sealed = listed(&path);
        if !sealed.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(sealed.iter().map(|segment| (segment.first_seq, segment.last_seq)).collect::<Vec<_>>(), [(1, 2)]);
    assert!(ledger.reader().unwrap().verify_anchored(None).is_ok());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn released_segments_verify_from_their_archive_and_the_chain_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    six_calls(dir.path(), releasing(dir.path())).await;
    let path = dir.path().join("ledger.db");
    let released = listed(&path);
    assert!(released.iter().all(|segment| segment.state == SegmentState::Released), "{released:?}");
    assert_eq!(live_rows(&path), 0, "every row was archived, then deleted from the file");
    assert_eq!(archives(dir.path()).len(), released.len());

    let reader = Reader::open(&path).unwrap();
    let report = reader.verify_anchored(None).unwrap();
    assert_eq!(report.chain.rows, 6);
    assert_eq!(report.anchor, AnchorState::Anchored { seq: 6, keyed: false });
    assert_eq!((report.segments.released, report.segments.first_live), (released.len() as u64, 7));
    let with_archive = reader.verify_with_archive(None, &dir.path().join("archive")).unwrap();
    assert_eq!(with_archive.segments.archives, released.len() as u64);
    let mut exported = Vec::new();
    assert_eq!(reader.export_with_archive(None, Some(&dir.path().join("archive")), &mut exported).unwrap(), 6);
    let first: serde_json::Value = serde_json::from_slice(exported.split(|b| *b == b'\n').next().unwrap()).unwrap();
    assert_eq!((first["seq"].as_i64(), first["record"]["call_id"].as_str()), (Some(1), Some("c1")));
    assert_eq!(reader.export(None, std::io::sink()).unwrap(), 0, "the file alone holds no row");

    // Reopened: the tail's check finds the anchored head in the released
    // segments, and new rows go on from it (row 7, linked to row 6).
    let ledger = Ledger::open(config(dir.path(), releasing(dir.path())), None);
    assert_eq!(ledger.tail_check(), Some(&TailCheck::Vouched(AnchorState::Anchored { seq: 6, keyed: false })));
    close_calls(&ledger, &["c7"]).await;
    let reader = Reader::open(&path).unwrap();
    assert_eq!(reader.verify_with_archive(None, &dir.path().join("archive")).unwrap().chain.rows, 7);
    let mut exported = Vec::new();
    assert_eq!(reader.export_with_archive(None, Some(&dir.path().join("archive")), &mut exported).unwrap(), 7);
}

/// The released ledger of six calls, its archive folder copied for each
/// tampering.
async fn released_ledger() -> (tempfile::TempDir, Vec<PathBuf>) {
    let dir = tempfile::tempdir().unwrap();
    six_calls(dir.path(), releasing(dir.path())).await;
    let files = archives(dir.path());
    assert!(files.len() >= 3, "{files:?}");
    (dir, files)
}

fn verify_archive(dir: &Path) -> Result<AnchoredReport, VerifyError> {
    Reader::open(&dir.join("ledger.db")).unwrap().verify_with_archive(None, &dir.join("archive"))
}

fn file_name(path: &Path) -> String {
    path.file_name().unwrap().to_string_lossy().into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_archive_file_is_named() {
    let (dir, files) = released_ledger().await;
    let segments = listed(&dir.path().join("ledger.db"));
    std::fs::remove_file(&files[1]).unwrap();
    let broken = segment_break(verify_archive(dir.path()));
    assert!(broken.segment.starts_with(&segments[1].to_string()), "{broken}");
    assert!(broken.reason.contains("missing") && broken.reason.contains(&file_name(&files[2])), "{broken}");

    std::fs::remove_file(files.last().unwrap()).unwrap();
    std::fs::remove_file(&files[0]).unwrap();
    let broken = segment_break(verify_archive(dir.path()));
    assert!(broken.segment.starts_with(&segments[0].to_string()), "{broken}");
    let error =
        Reader::open(&dir.path().join("ledger.db")).unwrap().verify_with_archive(None, &dir.path().join("none"));
    assert!(matches!(error, Err(VerifyError::ArchiveFolder { .. })), "{error:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_truncated_archive_file_is_named() {
    let (dir, files) = released_ledger().await;
    let bytes = std::fs::read(&files[1]).unwrap();
    std::fs::write(&files[1], &bytes[..bytes.len() / 2]).unwrap();
    let broken = segment_break(verify_archive(dir.path()));
    assert!(broken.segment.contains(&file_name(&files[1])), "{broken}");
    assert!(broken.reason.contains("truncated") || broken.reason.contains("unreadable"), "{broken}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_altered_archive_file_is_named() {
    let (dir, files) = released_ledger().await;
    let text = String::from_utf8(zstd::decode_all(std::fs::File::open(&files[1]).unwrap()).unwrap()).unwrap();
    let altered = text.replacen("\\\"input\\\":100", "\\\"input\\\":1", 1);
    assert_ne!(altered, text, "a row's body was edited");
    std::fs::write(&files[1], zstd::encode_all(altered.as_bytes(), 3).unwrap()).unwrap();
    let broken = segment_break(verify_archive(dir.path()));
    assert!(broken.segment.contains(&file_name(&files[1])), "{broken}");
    assert!(broken.reason.contains("does not match"), "{broken}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reordered_archive_files_are_named() {
    let (dir, files) = released_ledger().await;
    let swap = files[0].with_extension("swap");
    std::fs::rename(&files[0], &swap).unwrap();
    std::fs::rename(&files[1], &files[0]).unwrap();
    std::fs::rename(&swap, &files[1]).unwrap();
    let segments = listed(&dir.path().join("ledger.db"));
    let broken = segment_break(verify_archive(dir.path()));
    assert!(broken.segment.starts_with(&segments[0].to_string()), "{broken}");
    assert!(broken.reason.contains("out of order"), "{broken}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forged_release_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let policy = sealing_only(dir.path());
    let ledger = Ledger::open(config(dir.path(), policy), None);
    close_calls(&ledger, &["c1", "c2", "c3"]).await;
    drop(ledger);
    let path = dir.path().join("ledger.db");
    let heads: Vec<i64> = std::fs::read_to_string(anchor_path(&path))
        .unwrap()
        .lines()
        .map(|line| line.split(' ').next().unwrap().parse().unwrap())
        .collect();
    let cut = (1..3).find(|seq| !heads.contains(seq)).expect("three calls in fewer than three fills");
    // Rows 1 to `cut` (not a fill's head) deleted, and a released segment forged for them.
    let forged = Connection::open(&path).unwrap();
    forged.execute_batch("DELETE FROM ledger_segments; DROP TRIGGER ledger_no_delete;").unwrap();
    forged
        .execute(
            "INSERT INTO ledger_segments (first_seq, last_seq, prev_hash, first_hash, head_hash, rows, bytes,
                 first_ms, last_ms, sealed_ms, state)
             SELECT 1, seq, ?1, (SELECT lower(hex(hash)) FROM ledger WHERE seq = 1), lower(hex(hash)), seq, 1, 0, 0,
                 0, 'released'
             FROM ledger WHERE seq = ?2",
            rusqlite::params![store::GENESIS, cut],
        )
        .unwrap();
    forged.execute("DELETE FROM ledger WHERE seq <= ?1", [cut]).unwrap();
    let reader = Reader::open(&path).unwrap();
    assert!(reader.verify().is_ok(), "the rows left link to the forged segment's head");
    let broken = segment_break(reader.verify_anchored(None));
    assert!(broken.reason.contains("no line of the anchor file"), "{broken}");
    assert!(broken.segment.contains(&format!("rows 1-{cut}")), "{broken}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rows_of_a_segment_not_released_are_never_deleted() {
    let dir = tempfile::tempdir().unwrap();
    let policy = sealing_only(dir.path());
    six_calls(dir.path(), policy).await;
    let refused =
        Connection::open(dir.path().join("ledger.db")).unwrap().execute("DELETE FROM ledger WHERE seq = 1", []);
    assert!(refused.unwrap_err().to_string().contains("append-only"));
}

/// An archive folder that cannot be made (a file stands at its path): no
/// segment is archived, so none is released; the rows stay and verify.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_segment_not_archived_is_not_released() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("archive"), "not a folder").unwrap();
    six_calls(dir.path(), releasing(dir.path())).await;
    let path = dir.path().join("ledger.db");
    assert!(listed(&path).iter().all(|segment| segment.state == SegmentState::Sealed));
    assert_eq!(live_rows(&path), 6);
    assert_eq!(Reader::open(&path).unwrap().verify_anchored(None).unwrap().chain.rows, 6);
}

/// A kill after an archive file was written and before its segment was
/// marked, and one mid-write (a temporary file left): the next open removes
/// the temporary file, and the next fill writes the archive again, marks
/// it and releases the segment; everything verifies.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_archive_cut_off_by_a_kill_is_finished_at_the_next_start() {
    let dir = tempfile::tempdir().unwrap();
    let sealing = sealing_only(dir.path());
    six_calls(dir.path(), sealing).await;
    let path = dir.path().join("ledger.db");
    let sealed = listed(&path);
    let archive_dir = dir.path().join("archive");
    // Segment 1 written whole and not marked; segment 2 cut mid-write.
    let connection = store::open_writer(&path, LedgerSync::Normal, None).unwrap();
    let written = archive::write(&connection, &archive_dir, &path, &sealed[0]).unwrap();
    let leftover = archive_dir.join(format!(".{}.tmp", archive::file_name(&path, &sealed[1])));
    std::fs::write(&leftover, b"half a file").unwrap();
    drop(connection);
    assert_eq!(listed(&path)[0].state, SegmentState::Sealed);

    let ledger = Ledger::open(config(dir.path(), releasing(dir.path())), None);
    assert!(!leftover.exists(), "the half-written file was removed at open");
    close_calls(&ledger, &["c7"]).await;
    let after = listed(&path);
    assert!(after.iter().all(|segment| segment.state == SegmentState::Released), "{after:?}");
    assert_eq!(after[0].archive_sha256.as_deref(), Some(written.sha256.as_str()), "the same file, written again");
    let report = verify_archive(dir.path()).unwrap();
    assert_eq!(report.chain.rows, 7);
}

// The segmenter's rules, driven directly on a writer's connection.

static RUNS: AtomicU64 = AtomicU64::new(0);

fn append(connection: &Connection, rows: &[Row]) -> (i64, String) {
    let segment = format!("run-{}", RUNS.fetch_add(1, Ordering::Relaxed));
    let run = Run { segment: &segment, first_line: 0, rows: rows.iter().map(Some).collect() };
    store::append_logged(connection, [run]).unwrap().head
}

fn writer(dir: &Path) -> (PathBuf, Connection) {
    let path = dir.join("ledger.db");
    let connection = store::open_writer(&path, LedgerSync::Normal, None).unwrap();
    (path, connection)
}

fn closing(call_id: &str, start: u64) -> Row {
    Row::closing(&record(call_id, "alice", "m", start, Some(0.5))).unwrap()
}

const NOW: i64 = 1_800_000_000_000 + 3_600_000;

#[test]
fn a_segment_waits_to_be_shipped_before_it_is_released() {
    let dir = tempfile::tempdir().unwrap();
    let (path, connection) = writer(dir.path());
    let policy = shipped_only(dir.path());
    let mut segmenter = Segmenter::new(policy, &path);
    let head = append(&connection, &[closing("a", 1), closing("b", 2)]);
    segmenter.after_fill(&connection, &head, true, 0, NOW).unwrap();
    assert_eq!(listed(&path)[0].state, SegmentState::Sealed, "nothing shipped: kept");
    segmenter.after_fill(&connection, &head, true, 1, NOW).unwrap();
    assert_eq!(listed(&path)[0].state, SegmentState::Sealed, "shipped to row 1 of 2: kept");
    segmenter.after_fill(&connection, &head, true, 2, NOW).unwrap();
    assert_eq!(listed(&path)[0].state, SegmentState::Released);
    assert_eq!(live_rows(&path), 0);
    assert_eq!(store::chain_end(&connection).unwrap(), head, "the chain's end outlives its rows");
}

#[test]
fn retention_by_age_releases_only_what_is_older() {
    let dir = tempfile::tempdir().unwrap();
    let (path, connection) = writer(dir.path());
    let policy = SegmentPolicy {
        archive_dir: None,
        retention: Some(Retention { max_age: Some(segments::days(1)), max_bytes: None, shipped: true }),
        ..releasing(dir.path())
    };
    let mut segmenter = Segmenter::new(policy, &path);
    let old = append(&connection, &[closing("old", 1)]);
    segmenter.after_fill(&connection, &old, true, i64::MAX, NOW).unwrap();
    let new = append(&connection, &[closing("new", 2 * 86_400)]);
    let now = 1_800_000_000_000 + 2 * 86_400_000 + 3_600_000;
    segmenter.after_fill(&connection, &new, true, i64::MAX, now).unwrap();
    let states: Vec<SegmentState> = listed(&path).iter().map(|segment| segment.state).collect();
    assert_eq!(states, [SegmentState::Released, SegmentState::Sealed]);
    assert_eq!(Reader::open(&path).unwrap().verify().unwrap().rows, 2);
}

#[test]
fn a_head_not_anchored_is_not_sealed() {
    let dir = tempfile::tempdir().unwrap();
    let (path, connection) = writer(dir.path());
    let mut segmenter = Segmenter::new(SegmentPolicy { retention: None, ..releasing(dir.path()) }, &path);
    let head = append(&connection, &[closing("a", 1)]);
    segmenter.after_fill(&connection, &head, false, 0, NOW).unwrap();
    assert!(listed(&path).is_empty());
    segmenter.after_fill(&connection, &head, true, 0, NOW).unwrap();
    assert_eq!(listed(&path).len(), 1);
}

/// The hold of a call that has not closed keeps its segment (its closing
/// row will read it); once closed, the segment may go.
#[test]
fn the_hold_of_a_running_call_keeps_its_segment() {
    let dir = tempfile::tempdir().unwrap();
    let (path, connection) = writer(dir.path());
    let policy = shipped_only(dir.path());
    let mut segmenter = Segmenter::new(policy, &path);
    let held = Row::hold(&hold("running", "alice", 1, 5000)).unwrap();
    let head = append(&connection, &[held]);
    let now = store::unix_ms(at(60));
    segmenter.after_fill(&connection, &head, true, i64::MAX, now).unwrap();
    let segment = listed(&path).remove(0);
    assert_eq!(segment.state, SegmentState::Sealed, "kept while the call runs");
    let reason = segments::protected(&connection, &segment, Timezone::UTC, now).unwrap();
    assert_eq!(reason, Some("it holds the hold of a call that may still close"));
    assert_eq!(segments::protected(&connection, &segment, Timezone::UTC, now + 25 * 3_600_000).unwrap(), None);

    let head = append(&connection, &[closing("running", 1)]);
    segmenter.after_fill(&connection, &head, true, i64::MAX, now).unwrap();
    let states: Vec<SegmentState> = listed(&path).iter().map(|segment| segment.state).collect();
    assert_eq!(states, [SegmentState::Released, SegmentState::Released]);
}

/// With a budget time zone at a half hour, the day's first part hour is
/// read from the rows: a segment holding rows started then is kept. A
/// segment of whole hours is released, and the budget's sum over the
/// period (the roll-ups' whole hours, the rows' part hour) is the same
/// before and after.
#[test]
fn a_budget_periods_sum_is_the_same_after_a_release() {
    let dir = tempfile::tempdir().unwrap();
    let (path, connection) = writer(dir.path());
    let timezone = Timezone::parse("+05:30").unwrap();
    let now = at(12 * 3600);
    let (day_start, _) = timezone.bounds(crate::accounting::Period::Day, now);
    let secs = |time: SystemTime| time.duration_since(at(0)).unwrap().as_secs();
    let day_start = secs(day_start);
    let policy = SegmentPolicy { budget_timezone: timezone, ..shipped_only(dir.path()) };
    let mut segmenter = Segmenter::new(policy, &path);
    let whole_hours = append(&connection, &[closing("a", day_start + 3600), closing("b", day_start + 4000)]);
    let edge = append(&connection, &[closing("c", day_start + 600)]);
    let reader = Reader::open(&path).unwrap();
    let spend = |reader: &Reader| {
        let rows = reader.spend_by_caller(at(day_start), true).unwrap();
        rows.iter().map(|row| (crate::budget::total_tokens(&row.tokens), row.cost_usd)).collect::<Vec<_>>()
    };
    let before = spend(&reader);
    assert_eq!(before.len(), 1);
    let now_ms = store::unix_ms(now);
    segmenter.after_fill(&connection, &whole_hours, true, i64::MAX, now_ms).unwrap();
    segmenter.after_fill(&connection, &edge, true, i64::MAX, now_ms).unwrap();
    let after = listed(&path);
    assert_eq!(after[0].state, SegmentState::Released, "whole hours: the roll-ups answer for them");
    assert_eq!(after[1].state, SegmentState::Sealed, "the part hour the day starts in is read from the rows");
    let reason = segments::protected(&connection, &after[1], timezone, now_ms).unwrap();
    assert_eq!(reason, Some("it holds rows a current budget period reads from the rows"));
    assert_eq!(spend(&Reader::open(&path).unwrap()), before);
    assert_eq!(segments::protected(&connection, &after[1], Timezone::UTC, now_ms).unwrap(), None, "on the hour: none");
}

#[test]
fn the_segments_table_is_checked_as_a_chain() {
    let segment = |id: i64, first_seq, last_seq, prev: &str, head: &str, state| Segment {
        id,
        first_seq,
        last_seq,
        prev_hash: prev.to_owned(),
        first_hash: String::new(),
        head_hash: head.to_owned(),
        rows: last_seq - first_seq + 1,
        bytes: 1,
        first_ms: 0,
        last_ms: 0,
        archive: None,
        archive_sha256: None,
        state,
    };
    let genesis = store::GENESIS;
    let good =
        [segment(1, 1, 5, genesis, "h5", SegmentState::Released), segment(2, 6, 9, "h5", "h9", SegmentState::Sealed)];
    assert!(segments::check_table(&good).is_ok());
    let gap = [good[0].clone(), segment(2, 7, 9, "h5", "h9", SegmentState::Sealed)];
    assert!(segments::check_table(&gap).unwrap_err().1.contains("row 6 was due"));
    let unlinked = [good[0].clone(), segment(2, 6, 9, "hx", "h9", SegmentState::Sealed)];
    assert!(segments::check_table(&unlinked).unwrap_err().1.contains("does not link"));
    let hole =
        [segment(1, 1, 5, genesis, "h5", SegmentState::Sealed), segment(2, 6, 9, "h5", "h9", SegmentState::Released)];
    assert!(segments::check_table(&hole).unwrap_err().1.contains("released after"));
}

/// With the fleet's ledger as the only copy, a segment is released once
/// the shipper has shipped through its end, and not before; the file keeps
/// its name in the fleet's table (its first row's hash, now released) and
/// goes on shipping after the release; both copies verify.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_segment_is_released_once_shipped_to_the_fleets_ledger() {
    let server = weir_tests::PostgresServer::start();
    let dir = tempfile::tempdir().unwrap();
    let policy = shipped_only(dir.path());
    let config =
        LedgerConfig { postgres: Some(PostgresTarget::new(&server.url(), None)), ..config(dir.path(), policy) };
    let ledger = Ledger::open(config, None);
    let ship = |ledger: &Ledger| {
        let ledger = ledger.clone();
        tokio::task::spawn_blocking(move || ledger.ship_pending(Duration::from_secs(10)))
    };
    close_calls(&ledger, &["c1", "c2"]).await;
    let path = dir.path().join("ledger.db");
    let shipped_through = || server.integer("SELECT COALESCE(MAX(source_seq), 0) FROM ledger");
    assert!(ship(&ledger).await.unwrap());
    close_calls(&ledger, &["c3", "c4"]).await;
    let after = listed(&path);
    assert_eq!(after[0].state, SegmentState::Released, "shipped, then released: {after:?}");
    let shipped = shipped_through();
    for segment in &after {
        let released = segment.state == SegmentState::Released;
        assert!(!released || segment.last_seq <= shipped, "released past what was shipped ({shipped}): {after:?}");
    }
    assert!(ship(&ledger).await.unwrap());
    close_calls(&ledger, &["c5"]).await;
    assert!(ship(&ledger).await.unwrap());
    assert_eq!(server.integer("SELECT COUNT(*) FROM ledger"), 5, "every row shipped once");
    assert_eq!(server.integer("SELECT COUNT(DISTINCT source) FROM ledger"), 1, "one source, named as before");
    assert!(live_rows(&path) < 5);
    assert_eq!(Reader::open(&path).unwrap().verify_anchored(None).unwrap().chain.rows, 5);
    let url = server.url();
    let sources = tokio::task::spawn_blocking(move || {
        SharedReader::connect(&PostgresTarget::new(&url, None)).unwrap().verify(None).unwrap()
    })
    .await
    .unwrap();
    assert_eq!(sources.len(), 1);
    assert_eq!(sources[0].report.rows, 5);
}

/// A row of a kind this weir does not know (written behind the file's
/// checks) is not archived: the archive fails naming the row, and no file
/// is left.
#[test]
fn a_row_of_an_unknown_kind_is_not_archived() {
    let dir = tempfile::tempdir().unwrap();
    let (path, connection) = writer(dir.path());
    let mut segmenter = Segmenter::new(sealing_only(dir.path()), &path);
    let head = append(&connection, &[closing("a", 1)]);
    segmenter.after_fill(&connection, &head, true, 0, NOW).unwrap();
    let segment = listed(&path).remove(0);
    let other = Connection::open(&path).unwrap();
    other
        .execute_batch(
            "PRAGMA ignore_check_constraints = 1; DROP TRIGGER ledger_no_update;
             UPDATE ledger SET kind = 'bogus' WHERE seq = 1;",
        )
        .unwrap();
    let archive_dir = dir.path().join("archive");
    let error = archive::write(&connection, &archive_dir, &path, &segment).unwrap_err();
    assert!(matches!(&error, archive::ArchiveError::UnknownKind { seq: 1, kind } if kind == "bogus"), "{error}");
    assert!(std::fs::read_dir(&archive_dir).unwrap().next().is_none(), "no file, not even a temporary one");
}

/// Four calls released in two segments (archived first) through a keyed
/// ledger, then two calls two hours later in two fills without segments, and
/// the last row cut from the file: a tampered tail. Returns the file and key.
async fn released_then_cut(dir: &Path) -> (PathBuf, AnchorKey) {
    let key = AnchorKey::new(b"an anchor key of at least thirty-two bytes").unwrap();
    let path = dir.join("ledger.db");
    let releasing_keyed = LedgerConfig { anchor_key: Some(key.clone()), ..config(dir, releasing(dir)) };
    let ledger = Ledger::open(releasing_keyed, None);
    close_calls(&ledger, &["c1", "c2"]).await;
    close_calls(&ledger, &["c3", "c4"]).await;
    drop(ledger);
    assert_eq!(listed(&path).iter().filter(|s| s.state == SegmentState::Released).count(), 2);
    let ledger = Ledger::open(LedgerConfig { anchor_key: Some(key.clone()), ..LedgerConfig::at(path.clone()) }, None);
    for call_id in ["c7", "c8"] {
        ledger.closed(&record(call_id, "alice", "m", 7_200, Some(0.01))).await.unwrap();
        assert!(ledger.fill_pending(Duration::from_secs(5)));
    }
    drop(ledger);
    let file = Connection::open(&path).unwrap();
    file.execute_batch("DROP TRIGGER ledger_no_delete; DELETE FROM ledger WHERE seq = 6;").unwrap();
    (path, key)
}

fn starting_anyway(path: &Path, key: &AnchorKey) -> Ledger {
    let config = LedgerConfig {
        anchor_key: Some(key.clone()),
        on_tampered: crate::catalog::LedgerOnTampered::Start,
        ..LedgerConfig::at(path.to_path_buf())
    };
    let ledger = Ledger::open(config, None);
    assert!(matches!(ledger.tail_check(), Some(TailCheck::Tampered(_))), "{:?}", ledger.tail_check());
    ledger
}

fn calls_counted(path: &Path) -> u64 {
    Reader::open(path).unwrap().usage(&query::UsageQuery::default()).unwrap().total.calls
}

/// A gateway that starts on a tampered tail (`on_tampered = "start"`) with
/// segments released from the file carries the old anchor lines of their
/// heads into the fresh anchor file, so the ledger verifies (with its
/// archive too), and keeps the roll-ups' hours of the released calls:
/// usage counts them, and no more the call cut from the tail.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tampered_start_keeps_the_released_segments_anchored_and_counted() {
    let dir = tempfile::tempdir().unwrap();
    let (path, key) = released_then_cut(dir.path()).await;
    assert_eq!(calls_counted(&path), 6, "the cut call still counted before the start");
    drop(starting_anyway(&path, &key));
    let fresh: Vec<i64> = std::fs::read_to_string(anchor_path(&path))
        .unwrap()
        .lines()
        .map(|line| line.split(' ').next().unwrap().parse().unwrap())
        .collect();
    assert_eq!(fresh, [2, 4, 5], "the released heads carried, then the start's head");
    let reader = Reader::open(&path).unwrap();
    let report = reader.verify_anchored(Some(&key)).unwrap();
    assert_eq!(report.anchor, AnchorState::Anchored { seq: 5, keyed: true });
    assert_eq!(reader.verify_with_archive(Some(&key), &dir.path().join("archive")).unwrap().chain.rows, 5);
    assert_eq!(calls_counted(&path), 5, "the four released calls and the one left");
}

/// A released head whose old anchor line's MAC the key does not verify is
/// not carried: verify names its segment.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_released_head_with_a_forged_anchor_is_not_carried() {
    let dir = tempfile::tempdir().unwrap();
    let (path, key) = released_then_cut(dir.path()).await;
    let lines = std::fs::read_to_string(anchor_path(&path)).unwrap();
    let forged: Vec<String> = lines
        .lines()
        .map(|line| match line.strip_prefix("2 ") {
            Some(rest) => format!("2 {}{}", &rest[..rest.len() - 1], if rest.ends_with('0') { '1' } else { '0' }),
            None => line.to_owned(),
        })
        .collect();
    assert_ne!(forged.join("\n") + "\n", lines);
    std::fs::write(anchor_path(&path), forged.join("\n") + "\n").unwrap();
    drop(starting_anyway(&path, &key));
    let broken = segment_break(Reader::open(&path).unwrap().verify_anchored(Some(&key)));
    assert!(broken.segment.contains("rows 1-2"), "{broken:?}");
    assert!(broken.reason.contains("in no line of the anchor file"), "{broken:?}");
}
