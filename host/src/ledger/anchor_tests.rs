//! The anchor and the owner-only files, on real SQLite files: a ledger cut
//! at its end, cut to nothing, or rewritten with a recomputed chain fails
//! its check; the key makes a forged anchor fail too; the files are 0600 in
//! a 0700 folder whatever the umask.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;

use rusqlite::Connection;

use super::tests::record;
use super::*;
use crate::catalog::LedgerOnTampered;
use weir_tests::ledger_tamper::recompute_chain;

const KEY: &[u8] = b"an operator's anchor key, 32+ bytes long";

fn settings(path: &Path) -> LedgerConfig {
    LedgerConfig::at(path.to_path_buf())
}

fn keyed(path: &Path) -> LedgerConfig {
    LedgerConfig { anchor_key: Some(AnchorKey::new(KEY).unwrap()), ..settings(path) }
}

/// Closes `calls` (`(call_id, member)`) through `ledger` and waits for them
/// to be in the file: one fill, so one anchor line.
async fn close_calls(ledger: &Ledger, calls: &[(&str, &str)]) {
    for (n, (call_id, member)) in (1..).zip(calls) {
        ledger.closed(&record(call_id, member, "m", n, Some(0.01))).await.unwrap();
    }
    assert!(ledger.fill_pending(Duration::from_secs(5)), "the rows reached the file");
}

/// A ledger at `path` holding six closed calls (alice, bob, alice, bob, ...),
/// anchored in three fills, then closed.
async fn six_calls(config: LedgerConfig) {
    let ledger = Ledger::open(config, None);
    close_calls(&ledger, &[("c1", "alice"), ("c2", "bob")]).await;
    close_calls(&ledger, &[("c3", "alice"), ("c4", "bob")]).await;
    close_calls(&ledger, &[("c5", "alice"), ("c6", "bob")]).await;
}

/// Opens the file as someone who may write it would: the triggers dropped.
fn tamper(path: &Path) -> Connection {
    let connection = Connection::open(path).unwrap();
    connection.execute_batch("DROP TRIGGER ledger_no_update; DROP TRIGGER ledger_no_delete;").unwrap();
    super::compact::register(&connection).unwrap();
    connection
}

/// Appends a copy of the last row under a new call id (its compact body
/// reads back with the new id; the chain recomputed afterwards): padding that brings a cut ledger back to its
/// anchored length.
fn pad(connection: &Connection, call_id: &str) {
    connection
        .execute(
            "INSERT INTO ledger SELECT seq + 1000, kind, ?1, at_ms, started_ms, key_id, member, team, model, category,
                 input, output, cache_read, cache_write, reasoning, cost_usd, body, prev_hash,
                 hash, charged_worst, shape_id FROM ledger WHERE seq = (SELECT MAX(seq) FROM ledger)",
            [call_id],
        )
        .unwrap();
}

fn anchor_text(path: &Path) -> String {
    std::fs::read_to_string(anchor_path(path)).unwrap()
}

fn tampering(found: Result<impl std::fmt::Debug, VerifyError>) -> Tampering {
    match found {
        Err(VerifyError::Tampered(tampering)) => tampering,
        other => panic!("expected tampering, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_fill_anchors_the_head_and_an_intact_ledger_verifies() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.db");
    six_calls(settings(&path)).await;
    let lines: Vec<String> = anchor_text(&path).lines().map(str::to_owned).collect();
    let heads: Vec<i64> = lines.iter().map(|line| line.split(' ').next().unwrap().parse().unwrap()).collect();
    // One line per fill (the empty ledger's open adds none); each waited-for fill ends on an even row.
    assert!((3..=6).contains(&heads.len()) && heads.is_sorted(), "{lines:?}");
    assert!(heads.contains(&2) && heads.contains(&4) && heads.last() == Some(&6), "{lines:?}");
    let reader = Reader::open(&path).unwrap();
    let report = reader.verify_anchored(None).unwrap();
    assert_eq!(report.chain, VerifyReport { rows: 6, calls: 6 });
    assert_eq!(report.anchor, AnchorState::Anchored { seq: 6, keyed: false });
    assert_eq!(reader.check_tail(None).unwrap(), AnchorState::Anchored { seq: 6, keyed: false });

    // A reopened ledger anchors its head again (the start's line), then checks out.
    let again = Ledger::open(settings(&path), None);
    assert_eq!(again.tail_check(), Some(&TailCheck::Vouched(AnchorState::Anchored { seq: 6, keyed: false })));
    assert_eq!(anchor_text(&path).lines().count(), lines.len() + 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ledger_cut_at_its_end_or_to_nothing_is_tampered() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.db");
    six_calls(settings(&path)).await;
    let connection = tamper(&path);
    connection.execute("DELETE FROM ledger WHERE seq > 4", []).unwrap();
    let reader = Reader::open(&path).unwrap();
    assert!(reader.verify().is_ok(), "the chain alone still holds: the cut was unseen before");
    assert_eq!(tampering(reader.verify_anchored(None)), Tampering::Shorter { rows: 4, anchored: 6 });
    assert_eq!(tampering(reader.check_tail(None)), Tampering::Shorter { rows: 4, anchored: 6 });

    connection.execute("DELETE FROM ledger", []).unwrap();
    let reader = Reader::open(&path).unwrap();
    assert_eq!(reader.verify().unwrap().rows, 0);
    let cut = tampering(reader.verify_anchored(None));
    assert_eq!(cut, Tampering::Shorter { rows: 0, anchored: 6 });
    assert!(cut.to_string().contains("shorter than its anchor"), "{cut}");
    assert_eq!(tampering(reader.check_tail(None)), Tampering::Shorter { rows: 0, anchored: 6 });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recomputed_chain_is_tampered() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.db");
    six_calls(settings(&path)).await;
    let connection = tamper(&path);
    connection.execute("DELETE FROM ledger WHERE member = 'bob'", []).unwrap();
    recompute_chain(&connection, super::store::BODY_SQL);
    let reader = Reader::open(&path).unwrap();
    assert_eq!(reader.verify().unwrap(), VerifyReport { rows: 3, calls: 3 }, "the recomputed chain holds");
    assert_eq!(tampering(reader.verify_anchored(None)), Tampering::Shorter { rows: 3, anchored: 6 });
    assert_eq!(tampering(reader.check_tail(None)), Tampering::Shorter { rows: 3, anchored: 6 });

    // Padded back to the anchored length: the head is not the anchored one.
    for call_id in ["p1", "p2", "p3"] {
        pad(&connection, call_id);
        recompute_chain(&connection, super::store::BODY_SQL);
    }
    let reader = Reader::open(&path).unwrap();
    assert_eq!(reader.verify().unwrap().rows, 6);
    assert_eq!(tampering(reader.verify_anchored(None)), Tampering::HeadMismatch { seq: 6 });
    assert_eq!(tampering(reader.check_tail(None)), Tampering::HeadMismatch { seq: 6 });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_key_a_forged_anchor_is_tampered() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.db");
    six_calls(keyed(&path)).await;
    let key = AnchorKey::new(KEY).unwrap();
    let reader = Reader::open(&path).unwrap();
    assert_eq!(reader.verify_anchored(Some(&key)).unwrap().anchor, AnchorState::Anchored { seq: 6, keyed: true });
    assert!(anchor_text(&path).lines().all(|line| line.split(' ').count() == 3), "each line has its MAC");

    // Bob's rows deleted, the chain recomputed, and the anchor file rewritten
    // to the new head, as someone without the key can.
    let connection = tamper(&path);
    connection.execute("DELETE FROM ledger WHERE member = 'bob'", []).unwrap();
    recompute_chain(&connection, super::store::BODY_SQL);
    let (seq, hash): (i64, String) = connection
        .query_row("SELECT seq, hash FROM ledger ORDER BY seq DESC LIMIT 1", [], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap();
    std::fs::write(anchor_path(&path), format!("{seq} {hash}\n")).unwrap();
    let reader = Reader::open(&path).unwrap();
    assert!(reader.verify_anchored(None).is_ok(), "without the key, a rewritten anchor cannot be told");
    assert_eq!(tampering(reader.verify_anchored(Some(&key))), Tampering::Unauthenticated { line: 1 });
    assert_eq!(tampering(reader.check_tail(Some(&key))), Tampering::Unauthenticated { line: 1 });

    // A MAC made with another key (or copied from another line) fails.
    let forged = AnchorKey::new(b"not the operator's key, 32+ bytes long").unwrap().mac(seq, &hash);
    std::fs::write(anchor_path(&path), format!("{seq} {hash} {forged}\n")).unwrap();
    assert_eq!(tampering(reader.verify_anchored(Some(&key))), Tampering::BadMac { line: 1 });
    assert_eq!(tampering(reader.check_tail(Some(&key))), Tampering::BadMac { line: 1 });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_removed_anchor_file_is_tampered_and_an_old_ledger_starts_anchoring() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.db");
    six_calls(settings(&path)).await;
    std::fs::remove_file(anchor_path(&path)).unwrap();
    let missing = tampering(Reader::open(&path).unwrap().verify_anchored(None));
    assert!(matches!(missing, Tampering::MissingAnchorFile { since: 0, .. }), "{missing:?}");

    // A ledger from before anchoring: no file, no record of one.
    Connection::open(&path).unwrap().execute("DROP TABLE ledger_anchored", []).unwrap();
    let reader = Reader::open(&path).unwrap();
    assert_eq!(reader.verify_anchored(None).unwrap().anchor, AnchorState::Unanchored);
    assert_eq!(reader.check_tail(None).unwrap(), AnchorState::Unanchored);
    let ledger = Ledger::open(settings(&path), None);
    assert_eq!(ledger.tail_check(), Some(&TailCheck::Vouched(AnchorState::Unanchored)));
    assert_eq!(anchor_text(&path).lines().count(), 1, "its head is anchored at open");
    assert_eq!(
        Reader::open(&path).unwrap().verify_anchored(None).unwrap().anchor,
        AnchorState::Anchored { seq: 6, keyed: false }
    );
}

/// On a tampered tail the ledger anchors nothing more under `refuse` (the
/// evidence stays as found); under `start` the anchor file is kept aside and
/// the head anchored afresh, so the next start's check passes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tampered_tail_is_kept_as_found_unless_the_operator_starts_anyway() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.db");
    six_calls(settings(&path)).await;
    tamper(&path).execute("DELETE FROM ledger WHERE seq > 3", []).unwrap();
    let before = anchor_text(&path);

    let refusing = Ledger::open(settings(&path), None);
    let Some(TailCheck::Tampered(reason)) = refusing.tail_check() else { panic!("{:?}", refusing.tail_check()) };
    assert!(reason.starts_with("TAMPERED: the ledger is shorter than its anchor"), "{reason}");
    close_calls(&refusing, &[("c7", "carol")]).await;
    assert_eq!(anchor_text(&path), before, "nothing anchored over a tampered tail");
    drop(refusing);

    let starting = Ledger::open(LedgerConfig { on_tampered: LedgerOnTampered::Start, ..settings(&path) }, None);
    assert!(matches!(starting.tail_check(), Some(TailCheck::Tampered(_))));
    close_calls(&starting, &[("c8", "carol")]).await;
    let kept: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|file| file.to_string_lossy().contains(".anchor.tampered-"))
        .collect();
    assert_eq!(kept.len(), 1, "the tampered anchor is kept aside: {kept:?}");
    assert_eq!(std::fs::read_to_string(&kept[0]).unwrap(), before, "as it was");
    let fresh: Vec<i64> =
        anchor_text(&path).lines().map(|line| line.split(' ').next().unwrap().parse().unwrap()).collect();
    assert_eq!(fresh, [4, 5], "the start's head, then the fill's");
    drop(starting);
    let again = Ledger::open(settings(&path), None);
    assert!(matches!(again.tail_check(), Some(TailCheck::Vouched(AnchorState::Anchored { seq: 5, .. }))));
    assert!(Reader::open(&path).unwrap().verify_anchored(None).is_ok());
}

#[test]
fn a_build_refuses_a_tampered_ledger_unless_told_to_start() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.db");
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    runtime.block_on(six_calls(settings(&path)));
    tamper(&path).execute("DELETE FROM ledger", []).unwrap();
    let build = |extra: &str| {
        crate::Weir::builder()
            .config(crate::Config::from_toml(&format!("[ledger]\npath = {path:?}\n{extra}"), "t").unwrap())
            .providers_dir("/nonexistent-weir-anchor-test")
            .cache_dir(None)
            .build()
    };
    let Err(refused) = build("") else { panic!("a tampered ledger must refuse the build") };
    assert!(matches!(refused, crate::BuildError::TamperedLedger { .. }), "{refused}");
    let message = refused.to_string();
    assert!(message.contains("is tampered") && message.contains("shorter than its anchor"), "{message}");
    assert!(message.contains("on_tampered = \"start\""), "{message}");
    assert!(build("on_tampered = \"start\"\n").is_ok(), "the operator's override starts it");
    let Err(unset) = build("anchor_key_env = \"WEIR_ANCHOR_KEY_NEVER_SET_IN_TESTS\"\n") else {
        panic!("an anchor key that cannot be read must refuse the build")
    };
    assert!(matches!(unset, crate::BuildError::LedgerConfig { .. }), "{unset}");
    assert!(unset.to_string().contains("WEIR_ANCHOR_KEY_NEVER_SET_IN_TESTS, which is not set"), "{unset}");
}

#[test]
fn the_ledgers_files_are_owner_only_whatever_the_umask() {
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("data");
    let path = folder.join("ledger.db");
    // This test binary's other tests create files meanwhile; a wider umask
    // only makes those more open, which none of them checks.
    let old = rustix::process::umask(rustix::fs::Mode::empty());
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let ledger = Ledger::open(settings(&path), None);
    runtime.block_on(close_calls(&ledger, &[("c1", "alice")]));
    let mode = |path: &Path| {
        use std::os::unix::fs::PermissionsExt;
        std::fs::metadata(path).unwrap().permissions().mode() & 0o777
    };
    let mut files: Vec<std::path::PathBuf> =
        std::fs::read_dir(&folder).unwrap().map(|entry| entry.unwrap().path()).collect();
    files.sort();
    rustix::process::umask(old);
    let names: Vec<String> = files.iter().map(|f| f.file_name().unwrap().to_string_lossy().into_owned()).collect();
    for expected in ["ledger.db", "ledger.db-wal", "ledger.db-shm", "ledger.db.anchor"] {
        assert!(names.iter().any(|name| name == expected), "{expected} in {names:?}");
    }
    assert!(names.iter().any(|name| name.starts_with("ledger.db-log-")), "a log segment in {names:?}");
    assert_eq!(mode(&folder), 0o700, "the folder");
    for file in &files {
        assert_eq!(mode(file), 0o600, "{}", file.display());
    }
    drop(ledger);

    // An older weir's files (0644) in a folder shared on purpose (0750): the
    // files are tightened, the folder left as the operator set it.
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&folder, std::fs::Permissions::from_mode(0o750)).unwrap();
    for file in &files {
        std::fs::set_permissions(file, std::fs::Permissions::from_mode(0o644)).unwrap();
    }
    let reopened = Ledger::open(settings(&path), None);
    assert_eq!(mode(&folder), 0o750, "an existing folder is not changed (a warning says so)");
    for name in ["ledger.db", "ledger.db-wal", "ledger.db-shm", "ledger.db.anchor"] {
        assert_eq!(mode(&folder.join(name)), 0o600, "{name} tightened");
    }
    drop(reopened);
}

/// Runs `work` on a blocking thread (the PostgreSQL client must not run on a
/// tokio worker).
async fn blocking<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> T {
    tokio::task::spawn_blocking(work).await.unwrap()
}

/// The shipper anchors each batch it ships (with the key's MAC); the shared
/// verify checks every source against its anchors: rows cut from a source's
/// end in PostgreSQL, or an anchor forged without the key, are tampering.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fleets_anchors_vouch_for_each_source() {
    let server = weir_tests::PostgresServer::start();
    let dir = tempfile::tempdir().unwrap();
    let target = PostgresTarget::new(&server.url(), None);
    let config = LedgerConfig { postgres: Some(target.clone()), ..keyed(&dir.path().join("ledger.db")) };
    let ledger = Ledger::open(config, None);
    for calls in [[("c1", "alice"), ("c2", "bob")], [("c3", "alice"), ("c4", "bob")]] {
        close_calls(&ledger, &calls).await;
        let shipping = ledger.clone();
        assert!(blocking(move || shipping.ship_pending(Duration::from_secs(10))).await);
    }
    let anchors = server.integer("SELECT COUNT(*) FROM ledger_anchor WHERE mac IS NOT NULL");
    assert!(anchors >= 2, "one anchor per shipped batch, each with its MAC: {anchors}");
    assert_eq!(server.integer("SELECT MAX(source_seq) FROM ledger_anchor"), 4);
    let key = AnchorKey::new(KEY).unwrap();
    let server_url = server.url();
    let verify = move |key: Option<AnchorKey>, statements: &'static str| {
        let target = target.clone();
        let url = server_url.clone();
        async move {
            blocking(move || {
                if !statements.is_empty() {
                    ::postgres::Client::connect(&url, ::postgres::NoTls).unwrap().batch_execute(statements).unwrap();
                }
                SharedReader::connect(&target).unwrap().verify(key.as_ref()).map(|sources| sources.len())
            })
            .await
        }
    };
    assert_eq!(verify(Some(key.clone()), "").await.unwrap(), 1);

    // An anchor added without the key (or with another's MAC) fails with the key.
    let forged = verify(
        Some(key.clone()),
        "INSERT INTO ledger_anchor SELECT source, 3, hash, NULL FROM ledger WHERE source_seq = 3",
    )
    .await
    .unwrap_err();
    assert!(
        matches!(&forged, VerifyError::SharedTampered(found)
        if matches!(found.tampering, Tampering::Unauthenticated { .. })),
        "{forged}"
    );
    assert_eq!(verify(None, "").await.unwrap(), 1, "without the key its hash still matches");

    // The source's last rows deleted behind the trigger: shorter than its anchor.
    let cut =
        verify(None, "ALTER TABLE ledger DISABLE TRIGGER ledger_append_only; DELETE FROM ledger WHERE source_seq > 2;")
            .await
            .unwrap_err();
    let message = cut.to_string();
    assert!(message.starts_with("TAMPERED: the fleet's ledger: source "), "{message}");
    assert!(
        matches!(&cut, VerifyError::SharedTampered(found)
        if found.tampering == Tampering::Shorter { rows: 2, anchored: 4 }),
        "{message}"
    );
    let emptied = verify(None, "DELETE FROM ledger").await.unwrap_err();
    assert!(
        matches!(&emptied, VerifyError::SharedTampered(found)
        if found.tampering == Tampering::Shorter { rows: 0, anchored: 4 }),
        "every row of a source deleted: {emptied}"
    );
    let refused = blocking({
        let url = server.url();
        move || {
            let mut client = ::postgres::Client::connect(&url, ::postgres::NoTls).unwrap();
            let error = client.execute("DELETE FROM ledger_anchor", &[]).unwrap_err();
            error.as_db_error().map(|db| db.message().to_owned()).unwrap_or_default()
        }
    })
    .await;
    assert!(refused.contains("append-only"), "the anchors are append-only too: {refused}");
}

/// What anchoring costs, printed (never asserted: timings on a shared
/// machine vary): one anchor line per fill, written alone and with its
/// `fdatasync` (`sync = "full"`), with and without a MAC; and the start's
/// check of the tail beside the full walk, on a ledger of 20,000 rows.
#[test]
fn the_anchors_costs_are_printed() {
    use std::time::Instant;
    let dir = tempfile::tempdir().unwrap();
    let hash = "ab".repeat(32);
    const LINES: i64 = 2_000;
    for (durable, key) in [(false, None), (false, Some(AnchorKey::new(KEY).unwrap())), (true, None)] {
        let db = dir.path().join(format!("cost-{durable}-{}.db", key.is_some()));
        let mut anchor = anchor::AnchorLog::new(&db, key.clone(), durable);
        anchor.open().unwrap();
        let started = Instant::now();
        for seq in 1..=LINES {
            anchor.append(seq, &hash).unwrap();
        }
        let per_line = started.elapsed() / u32::try_from(LINES).unwrap();
        eprintln!("anchor line: {per_line:?} each (fdatasync: {durable}, MAC: {})", key.is_some());
        assert_eq!(std::fs::read_to_string(anchor_path(&db)).unwrap().lines().count(), 2_000);
    }

    // A fill of 300 rows (what one carries at a few hundred calls a second), then its line.
    let fills = dir.path().join("fills.db");
    let connection = store::open_writer(&fills, crate::catalog::LedgerSync::Normal, None).unwrap();
    let mut anchor = anchor::AnchorLog::new(&fills, None, false);
    let (mut filling, mut anchoring) = (Duration::ZERO, Duration::ZERO);
    for fill in 0..10_u64 {
        let rows: Vec<store::Row> = (0..300)
            .map(|n| store::Row::closing(&record(&format!("f{fill}-{n}"), "alice", "m", n, None)).unwrap())
            .collect();
        let segment = format!("fill-{fill}");
        let run = store::Run { segment: &segment, first_line: 0, rows: rows.iter().map(Some).collect() };
        let started = Instant::now();
        let filled = store::append_logged(&connection, [run]).unwrap();
        filling += started.elapsed();
        let started = Instant::now();
        anchor.append(filled.head.0, &filled.head.1).unwrap();
        anchoring += started.elapsed();
    }
    let rows_per_second = |took: Duration| 3_000.0 / took.as_secs_f64();
    eprintln!(
        "10 fills of 300 rows: {:.0} rows/s without the anchor line, {:.0} with it (lines took {anchoring:?} of {:?})",
        rows_per_second(filling),
        rows_per_second(filling + anchoring),
        filling + anchoring
    );
    assert_eq!(std::fs::read_to_string(anchor_path(&fills)).unwrap().lines().count(), 10);
    drop(connection);

    let path = dir.path().join("ledger.db");
    let connection = store::open_writer(&path, crate::catalog::LedgerSync::Normal, None).unwrap();
    let rows: Vec<store::Row> =
        (0..20_000).map(|n| store::Row::closing(&record(&format!("c{n}"), "alice", "m", n, None)).unwrap()).collect();
    let run = store::Run { segment: "bulk", first_line: 0, rows: rows.iter().map(Some).collect() };
    store::append_logged(&connection, [run]).unwrap();
    drop(connection);
    drop(Ledger::open(settings(&path), None));
    let reader = Reader::open(&path).unwrap();
    let started = Instant::now();
    let tail = reader.check_tail(None).unwrap();
    let tail_took = started.elapsed();
    let started = Instant::now();
    let full = reader.verify_anchored(None).unwrap();
    let full_took = started.elapsed();
    eprintln!("20,000 rows: the start's tail check {tail_took:?}, the full verify {full_took:?}");
    assert_eq!(tail, AnchorState::Anchored { seq: 20_000, keyed: false });
    assert_eq!(full.chain.rows, 20_000);
}
