//! Schema version 7 (kinds as codes, `at_ms` NULL where it is the start)
//! beside the rows of a version 6 file, on real SQLite files.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;

use rusqlite::Connection;

use crate::catalog::LedgerSync;
use crate::ledger::callid_tests::{append, exported, spent};
use crate::ledger::query::{Filter, LedgerRead, Reader, VerifyError, VerifyReport};
use crate::ledger::store::{self, Row};
use crate::ledger::tests::{hold, opening, record, v7_id_at};

/// Each row's stored `kind` and `at_ms`, as SQL types and values, in order.
fn stored(path: &Path) -> Vec<(String, String)> {
    let file = Connection::open(path).unwrap();
    let mut rows = file.prepare("SELECT quote(kind), quote(at_ms) FROM ledger ORDER BY seq").unwrap();
    rows.query_map([], |row| Ok((row.get(0)?, row.get(1)?))).unwrap().map(Result::unwrap).collect()
}

fn integrity(path: &Path) -> String {
    Connection::open(path).unwrap().query_row("PRAGMA integrity_check", [], |row| row.get(0)).unwrap()
}

/// A version 6 file (kinds by name, every `at_ms` written out, the columns
/// declared as before) is read as it is; a writer's first open makes it
/// version 7 without rewriting a row: the old rows keep their names and
/// times and verify as before, the rows after them store codes and leave an
/// opening's `at_ms` out, and one chain verifies across both. Every reading
/// gives what it gave: the export of the old rows byte for byte, the
/// records, the calls never closed, the roll-ups' sums and the rows' sums
/// (a hold stored by name taken back by a closing stored as a code). The
/// file still meets its declaration's CHECKs.
#[test]
fn a_version_6_file_is_read_as_it_is_and_upgraded_on_a_writers_first_open() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.db");
    let (old, across, new, running) = (v7_id_at(1), v7_id_at(3), v7_id_at(5), v7_id_at(7));
    append(
        &path,
        "before",
        &[
            Row::opening(&opening(&old, "alice", "m", 1)).unwrap(),
            Row::closing(&record(&old, "alice", "m", 1, Some(0.5))).unwrap(),
            Row::opening(&opening(&across, "alice", "m", 3)).unwrap(),
            Row::hold(&hold(&across, "alice", 3, 5000)).unwrap(),
        ],
    );
    store::tests::as_version_6(&Connection::open(&path).unwrap());
    let as_version_6 = stored(&path);
    assert_eq!(
        as_version_6.iter().map(|(kind, _)| kind.as_str()).collect::<Vec<_>>(),
        ["'open'", "'close'", "'open'", "'hold'"]
    );
    assert!(as_version_6.iter().all(|(_, at)| at.parse::<i64>().is_ok()), "{as_version_6:?}");
    let version_6 = Reader::open(&path).unwrap();
    assert_eq!(version_6.verify().unwrap(), VerifyReport { rows: 4, calls: 2 }, "read as it is");
    let exported_before = exported(&version_6);
    let unclosed_before = version_6.unclosed(&Filter::default()).unwrap();
    assert_eq!(unclosed_before.iter().map(|opened| opened.call_id.as_str()).collect::<Vec<_>>(), [across.as_str()]);
    drop(version_6);

    let across_closing = Row { stands_alone: false, ..Row::closing(&record(&across, "alice", "m", 3, None)).unwrap() };
    append(
        &path,
        "after",
        &[
            across_closing,
            Row::opening(&opening(&new, "carol", "m", 5)).unwrap(),
            Row::closing(&record(&new, "carol", "m", 5, Some(0.25))).unwrap(),
            Row::opening(&opening(&running, "dan", "m", 7)).unwrap(),
            Row::hold(&hold(&running, "dan", 7, 900)).unwrap(),
        ],
    );
    let version: i64 = Connection::open(&path).unwrap().query_row("PRAGMA user_version", [], |r| r.get(0)).unwrap();
    assert_eq!(version, store::SCHEMA_VERSION);
    let upgraded = stored(&path);
    assert_eq!(upgraded[..4], as_version_6[..], "the version 6 rows stay as written");
    let held_at = store::unix_ms(crate::ledger::tests::at(7)) + 3;
    assert_eq!(
        upgraded[4..],
        [
            ("1".to_owned(), (store::unix_ms(crate::ledger::tests::at(3)) + 1234).to_string()),
            ("0".to_owned(), "NULL".to_owned()),
            ("1".to_owned(), (store::unix_ms(crate::ledger::tests::at(5)) + 1234).to_string()),
            ("0".to_owned(), "NULL".to_owned()),
            ("2".to_owned(), held_at.to_string()),
        ]
    );
    assert_eq!(integrity(&path), "ok");

    let reader = Reader::open(&path).unwrap();
    assert_eq!(reader.verify().unwrap(), VerifyReport { rows: 9, calls: 4 });
    let exported_after = exported(&reader);
    assert_eq!(exported_after[..4], exported_before[..], "the version 6 rows export as before");
    assert_eq!(exported_after.len(), 9);
    assert!(exported_after[5].starts_with(r#"{"kind":"open","seq":6,"#), "{}", exported_after[5]);
    let opened: serde_json::Value = serde_json::from_str(&exported_after[5]).unwrap();
    let expected_opening = serde_json::to_value(opening(&new, "carol", "m", 5)).unwrap();
    assert_eq!(opened["record"], expected_opening, "an opening stored without its at_ms exports whole");
    let records = reader.records(&Filter::default()).unwrap();
    let expected = [
        record(&old, "alice", "m", 1, Some(0.5)),
        record(&across, "alice", "m", 3, None),
        record(&new, "carol", "m", 5, Some(0.25)),
    ];
    assert_eq!(records, expected.iter().map(|record| (**record).clone()).collect::<Vec<_>>());
    let unclosed = reader.unclosed(&Filter::default()).unwrap();
    assert_eq!(unclosed.into_iter().map(|opened| opened.call_id).collect::<Vec<_>>(), [running]);
    let expected = [("alice".to_owned(), 270), ("carol".to_owned(), 135), ("dan".to_owned(), 900)];
    assert_eq!(spent(&reader), expected, "the hold by name taken back by its closing by code; dan's still held");
}

/// A file whose `ledger` table is not declared as versions 1 to 6 declared
/// it (edited by hand, say) is not upgraded: the writer refuses it, naming
/// the declaration it did not find, and leaves the file as it was.
#[test]
fn a_table_declared_otherwise_is_refused_naming_what_is_not_found() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.db");
    append(&path, "s", &[Row::closing(&record(&v7_id_at(1), "alice", "m", 1, None)).unwrap()]);
    let file = Connection::open(&path).unwrap();
    store::tests::as_version_6(&file);
    let schema_version: i64 = file.query_row("PRAGMA schema_version", [], |row| row.get(0)).unwrap();
    file.pragma_update(None, "writable_schema", true).unwrap();
    file.execute(
        "UPDATE sqlite_schema SET sql = replace(sql, 'at_ms INTEGER NOT NULL', 'at_ms INT NOT NULL')
         WHERE type = 'table' AND name = 'ledger'",
        [],
    )
    .unwrap();
    file.pragma_update(None, "schema_version", schema_version + 1).unwrap();
    file.execute_batch("PRAGMA writable_schema = RESET").unwrap();
    drop(file);
    let refused = store::open_writer(&path, LedgerSync::Normal, None).unwrap_err().to_string();
    assert!(refused.contains("`at_ms INTEGER NOT NULL,` is not in its declaration"), "{refused}");
    let version: i64 = Connection::open(&path).unwrap().query_row("PRAGMA user_version", [], |r| r.get(0)).unwrap();
    assert_eq!(version, 6, "left as it was");
    assert_eq!(Reader::open(&path).unwrap().verify().unwrap(), VerifyReport { rows: 1, calls: 1 });
}

/// A kind stored as a code this weir does not know breaks the chain at its
/// row, naming the code, as a name it does not know did.
#[test]
fn a_kind_stored_as_an_unknown_code_is_named_at_its_row() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.db");
    let rows: Vec<Row> = (1..=3).map(|n| Row::closing(&record(&v7_id_at(n), "alice", "m", n, None)).unwrap()).collect();
    append(&path, "s", &rows);
    let tamper = Connection::open(&path).unwrap();
    tamper
        .execute_batch(
            "DROP TRIGGER ledger_no_update; PRAGMA ignore_check_constraints = ON;
             UPDATE ledger SET kind = 7 WHERE seq = 2",
        )
        .unwrap();
    match Reader::open(&path).unwrap().verify() {
        Err(VerifyError::Broken(broken)) => {
            assert_eq!(broken.seq, 2, "{broken}");
            assert!(broken.reason.contains("unknown kind `7`"), "{broken}");
        }
        other => panic!("expected a break, got {other:?}"),
    }
}
