//! Call ids stored as bytes beside text ones, on real SQLite files.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;

use rusqlite::Connection;
use rusqlite::types::ValueRef;

use super::callid::{self, CallId, Stored, read_into};
use crate::catalog::LedgerSync;
use crate::ledger::query::{Filter, LedgerRead, Reader, VerifyError, VerifyReport};
use crate::ledger::store::{self, Row};
use crate::ledger::tests::{hold, opening, record, v7_id_at};

/// An id `record::new_call_id` makes is stored as its 16 bytes and read
/// back as the same text; an id that is not a canonical UUID (one of a
/// library's own, a UUID in capitals, without hyphens or in braces, which
/// its bytes would not give back) is stored as its text.
#[test]
fn a_canonical_uuid_is_stored_as_its_bytes_and_any_other_id_as_text() {
    let id = crate::record::new_call_id();
    let Stored::Uuid(bytes) = Stored::of(&id) else { panic!("{id} is stored as text") };
    let mut text = String::from("left over");
    read_into(ValueRef::Blob(&bytes), &mut text).unwrap();
    assert_eq!(text, id);
    let simple = id.replace('-', "");
    for other in ["c5", "legacy-id", &id.to_uppercase(), &simple, &format!("{{{id}}}"), &format!("{id} ")] {
        assert_eq!(Stored::of(other), Stored::Text(other), "{other}");
        read_into(ValueRef::Text(other.as_bytes()), &mut text).unwrap();
        assert_eq!(text, other);
    }
}

/// A stored id that is neither text nor 16 bytes is no call id: reading it
/// is a typed error, never an id made up.
#[test]
fn a_stored_id_neither_text_nor_16_bytes_is_an_error() {
    let mut text = String::new();
    let short = read_into(ValueRef::Blob(&[7; 15]), &mut text).unwrap_err();
    assert!(matches!(short, rusqlite::types::FromSqlError::InvalidBlobSize { expected_size: 16, blob_size: 15 }));
    assert!(matches!(read_into(ValueRef::Integer(5), &mut text), Err(rusqlite::types::FromSqlError::InvalidType)));
    assert!(read_into(ValueRef::Text(&[0xff, 0xfe]), &mut text).is_err(), "text that is not UTF-8");
    let file = Connection::open_in_memory().unwrap();
    let read = |value: &str| file.query_row(&format!("SELECT {value}"), [], |row| row.get::<_, CallId>(0));
    assert!(read("x'00112233'").unwrap_err().to_string().contains("16"), "a blob of 4 bytes");
    assert!(read("NULL").is_err(), "no id");
    let mut into = String::new();
    let column = file.query_row("SELECT 5", [], |row| callid::read_column(row, 0, &mut into)).unwrap_err();
    assert!(matches!(column, rusqlite::Error::InvalidColumnType(0, ..)), "{column}");
}

/// `rows` appended as the ledger's thread appends a log segment's.
pub(super) fn append(path: &Path, segment: &str, rows: &[Row]) {
    let writer = store::open_writer(path, LedgerSync::Normal, None).unwrap();
    let run = store::Run { segment, first_line: 0, rows: rows.iter().map(Some).collect() };
    assert_eq!(store::append_logged(&writer, [run]).unwrap().rows, rows.len());
}

/// Each row's `call_id` type, in order.
fn stored_types(path: &Path) -> Vec<String> {
    let file = Connection::open(path).unwrap();
    let mut types = file.prepare("SELECT typeof(call_id) FROM ledger ORDER BY seq").unwrap();
    types.query_map([], |row| row.get(0)).unwrap().map(Result::unwrap).collect()
}

pub(super) fn exported(reader: &Reader) -> Vec<String> {
    let mut out = Vec::new();
    reader.export(None, &mut out).unwrap();
    String::from_utf8(out).unwrap().lines().map(str::to_owned).collect()
}

/// A version 5 file (every call id text) read as it is, then written to by
/// this weir: its rows keep their text ids, the rows after them store UUIDs
/// as bytes, and one chain verifies across both. Every call reads back as it
/// was written and is found by its id in whichever form it is stored, also
/// a call whose opening and hold a version 5 weir stored and whose closing
/// this weir applied from the log it left (its rows hold both forms): it is
/// not unclosed, and its hold is taken back in the roll-ups as in the rows.
#[test]
fn a_version_5_file_takes_byte_ids_after_its_text_ones() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.db");
    let (old, across, new, running) = (v7_id_at(1), v7_id_at(3), v7_id_at(5), v7_id_at(7));
    let across_closing = Row { stands_alone: false, ..Row::closing(&record(&across, "alice", "m", 3, None)).unwrap() };
    append(
        &path,
        "before",
        &[
            Row::opening(&opening(&old, "alice", "m", 1)).unwrap(),
            Row::closing(&record(&old, "alice", "m", 1, Some(0.5))).unwrap(),
            Row::closing(&record("legacy-1", "bob", "m", 2, None)).unwrap(),
            Row::opening(&opening(&across, "alice", "m", 3)).unwrap(),
            Row::hold(&hold(&across, "alice", 3, 5000)).unwrap(),
        ],
    );
    {
        // As a version 5 weir stored them: every call id as text.
        let file = Connection::open(&path).unwrap();
        callid::register(&file).unwrap();
        store::tests::as_version_6(&file);
        file.execute_batch(
            "DROP TRIGGER ledger_no_update;
             UPDATE ledger SET call_id = ledger_call_id_twin(call_id) WHERE typeof(call_id) = 'blob';
             CREATE TRIGGER ledger_no_update BEFORE UPDATE ON ledger
                 BEGIN SELECT RAISE(ABORT, 'the ledger is append-only: rows are never updated'); END;
             PRAGMA user_version = 5;",
        )
        .unwrap();
    }
    assert_eq!(stored_types(&path), ["text"; 5]);
    let version_5 = Reader::open(&path).unwrap();
    assert_eq!(version_5.verify().unwrap(), VerifyReport { rows: 5, calls: 3 }, "read as it is");
    let exported_before = exported(&version_5);
    drop(version_5);

    append(
        &path,
        "after",
        &[
            across_closing,
            Row::opening(&opening(&new, "carol", "m", 5)).unwrap(),
            Row::closing(&record(&new, "carol", "m", 5, Some(0.25))).unwrap(),
            Row::closing(&record("legacy-2", "bob", "m", 6, None)).unwrap(),
            Row::opening(&opening(&running, "dan", "m", 7)).unwrap(),
        ],
    );
    let version: i64 = Connection::open(&path).unwrap().query_row("PRAGMA user_version", [], |r| r.get(0)).unwrap();
    assert_eq!(version, store::SCHEMA_VERSION);
    let types = stored_types(&path);
    assert_eq!(types[..5], ["text"; 5], "the version 5 rows stay as written");
    assert_eq!(types[5..], ["blob", "blob", "blob", "text", "blob"]);

    let reader = Reader::open(&path).unwrap();
    // The call across the upgrade holds two forms of its id, so the distinct
    // `(started_ms, call_id)` count it twice (see `query::DISTINCT_CALLS`).
    assert_eq!(reader.verify().unwrap(), VerifyReport { rows: 10, calls: 7 });
    let exported_after = exported(&reader);
    assert_eq!(exported_after[..5], exported_before[..], "the version 5 rows export as before");
    assert_eq!(exported_after.len(), 10);
    let records = reader.records(&Filter::default()).unwrap();
    let expected = [
        record(&old, "alice", "m", 1, Some(0.5)),
        record("legacy-1", "bob", "m", 2, None),
        record(&across, "alice", "m", 3, None),
        record(&new, "carol", "m", 5, Some(0.25)),
        record("legacy-2", "bob", "m", 6, None),
    ];
    assert_eq!(records, expected.iter().map(|record| (**record).clone()).collect::<Vec<_>>());
    for id in [old.as_str(), "legacy-1", &across, &new, "legacy-2"] {
        let found = reader.closed_call(id).unwrap().unwrap_or_else(|| panic!("{id} is found"));
        assert_eq!(found.call_id, id);
    }
    assert!(reader.closed_call(&running).unwrap().is_none(), "opened, never closed");
    let unclosed = reader.unclosed(&Filter::default()).unwrap();
    assert_eq!(unclosed.into_iter().map(|opened| opened.call_id).collect::<Vec<_>>(), [running]);
    let newest = reader.newest(&Filter::default(), 2).unwrap();
    assert_eq!(newest.into_iter().map(|record| record.call_id).collect::<Vec<_>>(), ["legacy-2", new.as_str()]);
    let expected = [("alice".to_owned(), 270), ("bob".to_owned(), 270), ("carol".to_owned(), 135)];
    assert_eq!(spent(&reader), expected, "the hold of 5 000 taken back by its closing row in the other form");
}

/// Each member's tokens charged (holds of calls cut off included), from the
/// roll-ups, checked to be what the rows sum to.
pub(super) fn spent(reader: &Reader) -> Vec<(String, u64)> {
    let totals = |mut rows: Vec<crate::ledger::query::CallerSpend>| {
        rows.sort_by(|a, b| a.member.cmp(&b.member));
        rows.iter()
            .map(|row| (row.member.clone().unwrap(), crate::budget::total_tokens(&row.tokens)))
            .collect::<Vec<_>>()
    };
    let rolled = totals(reader.spend_by_caller(crate::ledger::tests::at(0), true).unwrap());
    assert_eq!(rolled, totals(reader.spend_from_rows(crate::ledger::tests::at(0), true).unwrap()), "rows and roll-ups");
    rolled
}

/// A call id stored as bytes is covered by the chain: the body read back is
/// rebuilt from the column, so another id in its place breaks the row's
/// hash, named with the id the column now holds; bytes that are no id at all
/// fail the read, naming their size.
#[test]
fn a_call_id_changed_in_its_bytes_breaks_the_chain() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.db");
    let (first, second) = (v7_id_at(1), v7_id_at(2));
    append(
        &path,
        "s",
        &[
            Row::closing(&record(&first, "alice", "m", 1, None)).unwrap(),
            Row::closing(&record(&second, "bob", "m", 2, None)).unwrap(),
        ],
    );
    assert_eq!(stored_types(&path), ["blob", "blob"]);
    assert_eq!(Reader::open(&path).unwrap().verify().unwrap(), VerifyReport { rows: 2, calls: 2 });
    let tamper = Connection::open(&path).unwrap();
    tamper.execute_batch("DROP TRIGGER ledger_no_update").unwrap();
    let Stored::Uuid(first_bytes) = Stored::of(&first) else { panic!("{first} is stored as text") };
    tamper.execute("UPDATE ledger SET call_id = ?1 WHERE seq = 2", [first_bytes.as_slice()]).unwrap();
    match Reader::open(&path).unwrap().verify() {
        Err(VerifyError::Broken(broken)) => {
            assert_eq!((broken.seq, broken.call_id.as_str()), (2, first.as_str()), "{broken}");
            assert!(broken.reason.contains("hash"), "{broken}");
        }
        other => panic!("expected a break, got {other:?}"),
    }
    tamper.execute("UPDATE ledger SET call_id = x'0011' WHERE seq = 2", []).unwrap();
    let unreadable = Reader::open(&path).unwrap().verify().unwrap_err().to_string();
    assert!(unreadable.contains("16"), "{unreadable}");
}

/// What an older weir does with this one's file, as this one does with a
/// newer one: a writer refuses a file of a later version (it would write
/// rows that version's readers misread), naming both versions, and so does a
/// reader; a reader also refuses a version before 5 until a writer migrates it.
#[test]
fn a_file_of_another_version_is_refused_with_its_version() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.db");
    append(&path, "s", &[Row::closing(&record(&v7_id_at(1), "alice", "m", 1, None)).unwrap()]);
    let set_version =
        |version: i64| Connection::open(&path).unwrap().pragma_update(None, "user_version", version).unwrap();
    let newer = store::SCHEMA_VERSION + 1;
    set_version(newer);
    let written = store::open_writer(&path, LedgerSync::Normal, None).unwrap_err().to_string();
    assert!(written.contains(&format!("schema version {newer}, newer than this weir's 7")), "{written}");
    let read = Reader::open(&path).unwrap_err().to_string();
    assert!(read.contains(&format!("schema version {newer}, expected 5 to 7")), "{read}");
    set_version(4);
    let read = Reader::open(&path).unwrap_err().to_string();
    assert!(read.contains("schema version 4") && read.contains("migrated in place"), "{read}");
}
