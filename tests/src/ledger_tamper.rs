//! What someone who may write a ledger file does to hide a deletion: the chain
//! recomputed with the public algorithm, so the in-file chain holds again. The
//! anchor tests (`host/src/ledger/anchor_tests.rs`, `host/tests/ledger_cli.rs`,
//! `tests/tests/ledger_tampering.rs`) show that the anchor still names it.

use sha2::{Digest, Sha256};

/// Recomputes the chain (`sha256(prev_hash "\n" seq "\n" kind "\n" body)`,
/// from 64 zeros) over the rows left, renumbered from 1, each body read as
/// `body_sql` gives it (`weir_host::ledger::BODY_SQL`, its function
/// registered on `connection`: a compact body is rebuilt from its columns),
/// each kind by its name (stored since schema version 7 as its code: 0
/// open, 1 close, 2 hold).
/// The file's append-only triggers must be dropped first.
pub fn recompute_chain(connection: &rusqlite::Connection, body_sql: &str) {
    let name = |kind: rusqlite::types::Value| match kind {
        rusqlite::types::Value::Integer(0) => "open".to_owned(),
        rusqlite::types::Value::Integer(1) => "close".to_owned(),
        rusqlite::types::Value::Integer(2) => "hold".to_owned(),
        rusqlite::types::Value::Text(name) => name,
        other => panic!("a kind stored as {other:?}"),
    };
    let rows: Vec<(i64, String, String)> = connection
        .prepare(&format!("SELECT seq, kind, {body_sql} FROM ledger ORDER BY seq"))
        .unwrap()
        .query_map([], |row| Ok((row.get(0)?, name(row.get(1)?), row.get(2)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let mut prev_hash = "0".repeat(64);
    for (seq, (old_seq, kind, body)) in (1_i64..).zip(rows) {
        let hash = hex::encode(Sha256::digest(format!("{prev_hash}\n{seq}\n{kind}\n{body}")));
        connection
            .execute(
                "UPDATE ledger SET seq = ?1, prev_hash = ?2, hash = ?3 WHERE seq = ?4",
                rusqlite::params![seq, prev_hash, hash, old_seq],
            )
            .unwrap();
        prev_hash = hash;
    }
}
