#![allow(clippy::unwrap_used)]

use proptest::prelude::*;
use rusqlite::Connection;
use serde_json::value::RawValue;

use super::{CompactError, Entries, FORMAT_1, LAST_FOUR_DIGIT_YEAR_MS, Shapes, decode, write_time, write_tokens};
use crate::ledger::store::Row;
use crate::ledger::tests::{hold, opening, record};
use crate::record::{AttemptReason, AttemptRecord, CallRecord, RecordedContent, StreamEnd, Tokens, Who};

/// A closing record with what a streamed, retried, content-recording call
/// adds: attempts, a stream's end, content with characters JSON escapes.
fn busy_record() -> CallRecord {
    let attempt = |reason, status: u16, category: &str| AttemptRecord {
        reason,
        started_ms: 3,
        latency_ms: 40,
        admission_wait_ms: 0,
        status: Some(status),
        category: category.to_owned(),
        request_id: Some("req_\"quoted\"".to_owned()),
        usage: None,
        searches: None,
        web_searches: Some(2),
        deployment: Some("east".to_owned()),
    };
    CallRecord {
        stream: true,
        attempts: vec![attempt(AttemptReason::First, 429, "rate_limited"), attempt(AttemptReason::Retry, 200, "ok")],
        first_output_ms: Some(12),
        stream_end: Some(StreamEnd { delivered: 7, upstream_bytes: 900, client_left: false, completed: true }),
        content: Some(RecordedContent {
            request: serde_json::json!({"messages": [{"role": "user", "content": "line\nbreak \u{2603} \"q\""}]}),
            answer: Some(serde_json::json!("done")),
        }),
        notes: vec!["hosted_tools_dropped".to_owned()],
        charged_worst_case: true,
        cost_usd: Some(0.000_123_456_789),
        ..(*record("call-busy", "alice", "m", 7, None)).clone()
    }
}

/// A connection with the shapes' table, as a writer's.
fn file() -> Connection {
    let connection = Connection::open_in_memory().unwrap();
    connection.execute_batch(super::SCHEMA).unwrap();
    connection
}

/// `row` stored compact in `connection`'s file: its shape's id and stored form.
fn encode_in(connection: &Connection, row: &Row) -> Option<(i64, Vec<u8>)> {
    Shapes::default().encode(connection, row).unwrap()
}

/// `row` stored compact in a file of its own: its stored form and its shape.
fn encode(row: &Row) -> Option<(Vec<u8>, Vec<u8>)> {
    let connection = file();
    encode_in(&connection, row).map(|(id, stored)| (stored, shape(&connection, id)))
}

/// The residual of the shape `id`.
fn shape(connection: &Connection, id: i64) -> Vec<u8> {
    connection.query_row("SELECT residual FROM ledger_shapes WHERE id = ?1", [id], |row| row.get(0)).unwrap()
}

fn rows() -> Vec<Row> {
    let anonymous = CallRecord { who: Who::default(), cost_usd: None, ..(*record("c2", "x", "m", 2, None)).clone() };
    let unpriced_hold = crate::record::HoldRecord { usd: None, ..hold("c3", "bob", 3, 500) };
    vec![
        Row::opening(&opening("c1", "alice", "m", 1)).unwrap(),
        Row::hold(&hold("c1", "alice", 1, 4096)).unwrap(),
        Row::hold(&unpriced_hold).unwrap(),
        Row::closing(&record("c1", "alice", "m", 1, Some(0.25))).unwrap(),
        Row::closing(&anonymous).unwrap(),
        Row::closing(&busy_record()).unwrap(),
    ]
}

/// Every kind of row, with and without its optional columns, is stored
/// compact and read back as the very body written.
#[test]
fn every_kind_of_row_reads_back_as_the_body_written() {
    for row in rows() {
        let (stored, shape) = encode(&row).unwrap_or_else(|| panic!("not compact: {}", row.body));
        assert_eq!(stored[0], FORMAT_1);
        assert!(stored.len() < row.body.len(), "{} bytes for {} of body", stored.len(), row.body.len());
        assert_eq!(decode(&Row { body: String::new(), ..row.clone() }, &stored, Some(&shape)).unwrap(), row.body);
    }
}

/// The placeholders leave every column's value out of what is stored: the
/// stored bytes do not change with the call id, the caller or the times.
#[test]
fn no_column_is_stored_twice() {
    let one = Row::closing(&record("call-aaaaaaaa", "alice", "model-x", 1, Some(0.5))).unwrap();
    let other = Row::closing(&record("call-bbbbbbbb", "zed", "model-x", 9_999, Some(0.75))).unwrap();
    let key_only = |row: &Row| Row { key_id: Some("k".to_owned()), ..row.clone() };
    assert_ne!(one.body, other.body);
    // The bodies differ in the columns only (the key id is made from the
    // member, and `ended_at` follows `started_at`), so the stored forms match.
    assert_eq!(encode(&one).map(|(stored, _)| stored), encode(&other).map(|(stored, _)| stored));
    assert!(encode(&key_only(&one)).is_none(), "a column unlike its field is not stored compact");
}

/// A row's shape is its kind's and model's first residual: the next plain
/// closing row of the model is stored in under 40 bytes (its JSON body is
/// ~600), read back with that shape, and refused without it. Another model,
/// or another kind, takes a shape of its own.
#[test]
fn a_models_rows_are_stored_against_its_first() {
    let connection = file();
    let row = |n: u64, model: &str| {
        let call_id = format!("01a24e56-a38b-7433-bb86-e60cc784d9{n:02}");
        Row::closing(&record(&call_id, "member00", model, n, Some(6.5e-6 * n as f64))).unwrap()
    };
    let mut shapes = Shapes::default();
    let (first, _) = shapes.encode(&connection, &row(1, "gpt-small")).unwrap().unwrap();
    let (second, stored) = shapes.encode(&connection, &row(2, "gpt-small")).unwrap().unwrap();
    assert_eq!(first, second, "one shape for the model's closing rows");
    assert!(stored.len() < 40, "{} bytes (body {})", stored.len(), row(2, "gpt-small").body.len());
    let decoded = decode(&row(2, "gpt-small"), &stored, Some(&shape(&connection, second))).unwrap();
    assert_eq!(decoded, row(2, "gpt-small").body);
    assert!(matches!(decode(&row(2, "gpt-small"), &stored, None), Err(CompactError::NoShape)));
    // A later transaction finds the shape in the file.
    let (again, _) = Shapes::default().encode(&connection, &row(3, "gpt-small")).unwrap().unwrap();
    assert_eq!(again, first);
    let (other_model, _) = encode_in(&connection, &row(4, "gpt-large")).unwrap();
    let hold = Row::hold(&hold("c1", "alice", 1, 10)).unwrap();
    let (hold_shape, _) = encode_in(&connection, &hold).unwrap();
    assert_eq!([first, other_model, hold_shape].iter().collect::<std::collections::HashSet<_>>().len(), 3);
}

/// A shape keeps nothing the caller sent: a first row recording its
/// content, its client's metadata and its trace context makes a shape
/// without them (retention deletes rows, never shapes), and the row still
/// reads back whole.
#[test]
fn a_shape_keeps_no_content_of_the_call_it_came_from() {
    let connection = file();
    let mut busy = busy_record();
    busy.traceparent = Some("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01".to_owned());
    busy.client = Some(crate::record::ClientFacts {
        metadata: Some(serde_json::json!({"user_id": "user-secret-7"})),
        ..crate::record::ClientFacts::default()
    });
    let row = Row::closing(&busy).unwrap();
    let (id, stored) = encode_in(&connection, &row).unwrap();
    let shape = String::from_utf8(shape(&connection, id)).unwrap();
    for caller_sent in ["line\\nbreak", "user-secret-7", "4bf92f3577b34da6", "\"content\"", "\"client\""] {
        assert!(!shape.contains(caller_sent), "{caller_sent} in {shape}");
    }
    assert!(shape.contains("\"attempts\""), "{shape}");
    assert_eq!(decode(&row, &stored, Some(shape.as_bytes())).unwrap(), row.body);
}

/// Past the most shapes a file keeps, a new model's rows are stored as text.
#[test]
fn past_the_most_shapes_rows_stay_text() {
    let connection = file();
    connection
        .execute(
            "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?1)
             INSERT INTO ledger_shapes (key, residual) SELECT 'close:model-' || i, x'7b7d' FROM n",
            [super::MAX_SHAPES],
        )
        .unwrap();
    let row = Row::closing(&record("c1", "alice", "new-model", 1, None)).unwrap();
    assert!(encode_in(&connection, &row).is_none());
    let known = Row::closing(&record("c1", "alice", "model-7", 1, None)).unwrap();
    assert!(encode_in(&connection, &known).is_some(), "a model with a shape still has it");
}

/// Bodies a compact form could not give back byte for byte stay text: one
/// with whitespace, one with a field unlike its column, one whose column
/// field holds the placeholder itself, one that is not an object, and rows
/// whose columns a kind does not record hold a value.
#[test]
fn a_body_the_compact_form_cannot_rebuild_stays_text() {
    let closing = Row::closing(&record("c1", "alice", "m", 1, Some(0.25))).unwrap();
    let spaced = Row { body: closing.body.replace(",\"route\"", ", \"route\""), ..closing.clone() };
    let unlike = Row { member: Some("bob".to_owned()), ..closing.clone() };
    let placeholder = Row { body: closing.body.replace("\"category\":\"ok\"", "\"category\":[]"), ..closing.clone() };
    let not_object = Row { body: "[1,2]".to_owned(), ..closing.clone() };
    let nulls = Row { body: closing.body.replace("\"route\"", "\"role\":null,\"route\""), ..closing.clone() };
    let opening = Row::opening(&opening("c1", "alice", "m", 1)).unwrap();
    let opening_with_cost = Row { cost_usd: Some(1.0), ..opening.clone() };
    let opening_later = Row { at_ms: opening.at_ms + 1, ..opening.clone() };
    let hold = Row::hold(&hold("c1", "alice", 1, 10)).unwrap();
    let hold_with_output = Row { tokens: Tokens { output: 1, ..hold.tokens }, ..hold.clone() };
    let hold_charged = Row { charged_worst: true, ..hold.clone() };
    for row in
        [spaced, unlike, placeholder, not_object, opening_with_cost, opening_later, hold_with_output, hold_charged]
    {
        assert!(encode(&row).is_none(), "{row:?}");
    }
    // A field the struct does not know is kept as it is.
    assert!(encode(&nulls).is_some());
}

/// A column changed after the row was stored changes the body read back
/// (so the chain's hash no longer matches it); a column a kind does not
/// record, given a value, is refused outright.
#[test]
fn a_changed_column_changes_the_body_read_back() {
    for row in rows() {
        let (stored, shape) = encode(&row).unwrap();
        let decode = |row: &Row, stored: &[u8]| decode(row, stored, Some(&shape));
        let changed: [fn(&mut Row); 6] = [
            |row| row.call_id.push('x'),
            |row| row.started_ms += 1,
            |row| row.member = Some("mallory".to_owned()),
            |row| row.key_id = if row.key_id.is_some() { None } else { Some("k".to_owned()) },
            |row| row.model.push('x'),
            |row| row.team = Some("other-team".to_owned()),
        ];
        for change in changed {
            let mut tampered = row.clone();
            change(&mut tampered);
            assert_ne!(decode(&tampered, &stored).ok().as_deref(), Some(row.body.as_str()), "{row:?}");
        }
    }
    let hold = Row::hold(&hold("c1", "alice", 1, 10)).unwrap();
    let (stored, shape) = encode(&hold).unwrap();
    let categorised = Row { category: Some("ok".to_owned()), ..hold };
    assert!(matches!(decode(&categorised, &stored, Some(&shape)), Err(CompactError::Columns(_))));
    let closing = Row::closing(&record("c1", "alice", "m", 1, Some(0.25))).unwrap();
    let (stored, shape) = encode(&closing).unwrap();
    let decode = |row: &Row| decode(row, &stored, Some(&shape));
    let changed_tokens = Row { tokens: Tokens { reasoning: 99, ..closing.tokens }, ..closing.clone() };
    assert_ne!(decode(&changed_tokens).unwrap(), closing.body);
    let unpriced = Row { cost_usd: None, ..closing.clone() };
    assert!(matches!(decode(&unpriced), Err(CompactError::Columns(_))), "a placeholder with no value");
    let uncharged = Row { charged_worst: true, ..closing };
    assert!(matches!(decode(&uncharged), Err(CompactError::Columns(_))), "a value with no place");
}

/// Stored bytes that are not a compact body are a typed error, never a
/// panic or a guess: empty, an unknown format, a broken frame, a frame
/// that claims too much, a frame of something other than an object.
#[test]
fn stored_bytes_that_are_not_a_compact_body_are_refused() {
    let row = Row::closing(&record("c1", "alice", "m", 1, Some(0.25))).unwrap();
    let (stored, shape) = encode(&row).unwrap();
    let decode = |row: &Row, stored: &[u8]| decode(row, stored, Some(&shape));
    assert!(matches!(decode(&row, &[]), Err(CompactError::Empty)));
    assert!(matches!(decode(&row, &[9, 1, 2]), Err(CompactError::Format(9))));
    let mut cut = stored.clone();
    cut.truncate(stored.len() / 2);
    assert!(matches!(decode(&row, &cut), Err(CompactError::Decompress(_))));
    let mut flipped = stored.clone();
    let last = flipped.len() - 1;
    flipped[last] ^= 0x55;
    assert!(decode(&row, &flipped).ok().as_deref() != Some(row.body.as_str()));
    let not_object = [vec![FORMAT_1], zstd::bulk::compress(b"[1,2,3]", 3).unwrap()].concat();
    assert!(matches!(decode(&row, &not_object), Err(CompactError::Malformed(_))));
    let huge = [vec![FORMAT_1], zstd::bulk::compress(&vec![b' '; (64 << 20) + 1], 1).unwrap()].concat();
    assert!(matches!(decode(&row, &huge), Err(CompactError::Decompress(_))));
}

/// A closing record as the gateway writes one for a quick plain call: one
/// attempt, its usage, a request id, a note.
fn plain_call(n: u64) -> CallRecord {
    let usage = Tokens { input: 9, output: 3, ..Tokens::default() };
    let attempt = AttemptRecord {
        reason: AttemptReason::First,
        started_ms: 0,
        latency_ms: 2 + n % 40,
        admission_wait_ms: 0,
        status: Some(200),
        category: "ok".to_owned(),
        request_id: Some(format!("chatcmpl-{n:08x}")),
        usage: Some(usage),
        searches: None,
        web_searches: None,
        deployment: None,
    };
    let member = format!("member{:02}", n % 20);
    CallRecord {
        call_id: crate::record::new_call_id(),
        who: Who { key_id: Some(format!("key-{member}")), member: Some(member), team: Some("search".to_owned()) },
        identity: Some("gpt-small".to_owned()),
        wire_id: Some("gpt-4.1-mini".to_owned()),
        served_model: Some("gpt-4.1-mini-2025-04-14".to_owned()),
        max_tokens: Some(50),
        attempts: vec![attempt],
        usage,
        billable_input: Some(9.0),
        cost_usd: Some(1.1e-5 + n as f64 * 1e-9),
        stop_reason: Some("end_turn".to_owned()),
        latency_ms: 3 + n % 40,
        notes: vec!["effort_not_applied".to_owned()],
        ..(*record("x", "x", "gpt-small", n, None)).clone()
    }
}

/// The file's used bytes: its pages less its free ones.
fn used_bytes(connection: &Connection) -> u64 {
    let pragma = |name: &str| connection.query_row(&format!("PRAGMA {name}"), [], |row| row.get::<_, u64>(0)).unwrap();
    (pragma("page_count") - pragma("freelist_count")) * pragma("page_size")
}

/// A call answered within the ledger's linger leaves one row, its closing
/// one: 4,000 of them, appended as the ledger's thread appends rows, take
/// at most 216 bytes each in the file (index, hash and roll-ups included;
/// 211 measured on 2026-12-07 in three runs with schema version 7's kinds
/// as codes, 219 with call ids stored as 16 bytes, 258 before), where the
/// same rows with bodies stored as text take over 3 times that.
#[test]
fn a_closing_row_alone_takes_under_216_bytes() {
    const ROWS: u64 = 4_000;
    let dir = tempfile::tempdir().unwrap();
    let bytes_per_row = |name: &str, how: crate::ledger::store::Append| {
        let path = dir.path().join(name);
        let writer = crate::ledger::store::open_writer(&path, crate::catalog::LedgerSync::Normal, None).unwrap();
        let empty = used_bytes(&writer);
        let rows: Vec<Row> = (0..ROWS).map(|n| Row::closing(&plain_call(n)).unwrap()).collect();
        for (batch, rows) in rows.chunks(500).enumerate() {
            let run = crate::ledger::store::Run {
                segment: "s",
                first_line: batch as u64 * 500,
                rows: rows.iter().map(Some).collect(),
            };
            crate::ledger::store::append_logged_with(&writer, [run], how).unwrap();
        }
        (used_bytes(&writer) - empty) / ROWS
    };
    let compact = bytes_per_row("compact.db", crate::ledger::store::Append::FULL);
    let text = bytes_per_row("text.db", crate::ledger::store::Append { keep_rollups: true, compact: false });
    assert!(compact <= 216, "{compact} bytes a row (as text: {text})");
    assert!(text > 3 * compact, "{compact} bytes a row, as text {text}");
}

/// Any JSON value as `serde_json` writes it, with strings full of what the
/// scan must step over: quotes, backslashes, brackets, braces, commas,
/// colons, control characters and non-ASCII.
fn json_value() -> impl Strategy<Value = serde_json::Value> {
    let text = proptest::string::string_regex("[a-z\\[\\]{}\",:\\\\\u{0}-\u{1f} é€😀]{0,12}").unwrap();
    let leaf = prop_oneof![
        Just(serde_json::Value::Null),
        any::<bool>().prop_map(serde_json::Value::from),
        any::<i64>().prop_map(serde_json::Value::from),
        any::<f64>().prop_filter("finite", |x| x.is_finite()).prop_map(serde_json::Value::from),
        text.prop_map(serde_json::Value::from),
    ];
    leaf.prop_recursive(3, 24, 4, move |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(serde_json::Value::from),
            proptest::collection::btree_map("[a-z_]{1,6}", inner, 0..4)
                .prop_map(|map| serde_json::Value::Object(map.into_iter().collect())),
        ]
    })
}

proptest! {
    /// A time column is written as the records write their times
    /// (`humantime`), to the millisecond, over the whole four-digit range
    /// and past it.
    #[test]
    fn a_time_is_written_as_the_records_write_it(ms in 0..=LAST_FOUR_DIGIT_YEAR_MS + 10_000_000) {
        let mut written = Vec::new();
        write_time(&mut written, i64::try_from(ms).unwrap());
        let time = std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms);
        prop_assert_eq!(String::from_utf8(written).unwrap(), format!("\"{}\"", humantime::format_rfc3339_millis(time)));
    }

    /// Token counts are written as `serde_json` writes them.
    #[test]
    fn token_counts_are_written_as_serde_json_writes_them(counts in proptest::array::uniform5(any::<u64>())) {
        let [input, output, cache_read, cache_write, reasoning] = counts;
        let tokens = Tokens { input, output, cache_read, cache_write, reasoning };
        let mut written = Vec::new();
        write_tokens(&mut written, &tokens);
        prop_assert_eq!(String::from_utf8(written).unwrap(), serde_json::to_string(&tokens).unwrap());
    }

    /// The scan of an object `serde_json` wrote gives the entries a full
    /// parse gives, and they are every byte of it: the object rebuilt from
    /// them is the text.
    #[test]
    fn the_scan_of_an_object_is_its_entries_and_every_byte(
        entries in proptest::collection::btree_map("[a-z_]{1,8}", json_value(), 0..8),
    ) {
        let text = serde_json::to_string(&serde_json::Value::Object(entries.into_iter().collect())).unwrap();
        let scanned: Vec<(&str, &str)> = Entries::new(&text).collect::<Result<_, _>>().unwrap();
        let parsed: std::collections::BTreeMap<&str, &RawValue> = serde_json::from_str(&text).unwrap();
        let parsed: Vec<(&str, &str)> = parsed.iter().map(|(key, value)| (*key, value.get())).collect();
        let mut sorted = scanned.clone();
        sorted.sort_unstable();
        prop_assert_eq!(sorted, parsed);
        let rebuilt: Vec<String> = scanned.iter().map(|(key, value)| format!("\"{key}\":{value}")).collect();
        prop_assert_eq!(format!("{{{}}}", rebuilt.join(",")), text);
    }
}

/// What is not an object written without whitespace is a typed error from
/// the scan, never a panic or a partial entry taken as whole.
#[test]
fn the_scan_refuses_what_is_not_a_compact_object() {
    for text in [
        "",
        "{",
        "[1]",
        "1",
        r#"{"a"}"#,
        r#"{"a":}"#,
        r#"{"a":1"#,
        r#"{"a":1,}"#,
        r#"{ "a":1}"#,
        r#"{"a": 1}"#,
        r#"{"a":1 }"#,
        r#"{"a":1}x"#,
        r#"{"a":1}}"#,
        r#"{"a\"b":1}"#,
        r#"{"a":"x}"#,
        r#"{"a":"x\"}"#,
        r#"{"a":[1,2}"#,
        r#"{"a":{"b":[}"#,
        r#"{"a"#,
    ] {
        let scanned: Result<Vec<_>, _> = Entries::new(text).collect();
        assert!(matches!(scanned, Err(CompactError::Malformed(_))), "{text:?} gave {scanned:?}");
    }
    assert_eq!(Entries::new("{}").count(), 0);
    let nested: Vec<_> = Entries::new(r#"{"a":{"b":"[]}"},"c":[]}"#).collect::<Result<_, _>>().unwrap();
    assert_eq!(nested, [("a", r#"{"b":"[]}"}"#), ("c", "[]")]);
}

/// Every day from 1970 to 2200 (leap years, month ends, the century rules),
/// at its first and last millisecond, is written as `humantime` writes it.
#[test]
fn every_day_is_written_as_the_records_write_it() {
    for day in 0..84_000_u64 {
        for ms in [day * 86_400_000, day * 86_400_000 + 86_399_999] {
            let mut written = Vec::new();
            write_time(&mut written, i64::try_from(ms).unwrap());
            let time = std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms);
            assert_eq!(String::from_utf8(written).unwrap(), format!("\"{}\"", humantime::format_rfc3339_millis(time)));
        }
    }
}
