//! The admin changes' own hash chain: each row's hash covers its fields and
//! the previous row's hash, so a row edited, removed or reordered breaks
//! every hash after it. Its own chain, not rows in the calls' chain: the
//! calls' chain is written by the ledger's thread in batches from its log,
//! and a fleet's PostgreSQL holds one calls' chain per gateway, while admin
//! changes are made by any gateway of a fleet against one shared state and
//! must be ordered across all of them (one chain, one `seq`).

use serde::Serialize;
use sha2::{Digest, Sha256};

/// The hash before the first row.
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// One change, as stored.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ChangeRow {
    pub seq: i64,
    pub at_ms: i64,
    pub actor: String,
    pub action: String,
    pub kind: String,
    pub target: String,
    pub before: Option<String>,
    pub after: Option<String>,
    pub prev_hash: String,
    pub hash: String,
}

impl ChangeRow {
    /// The hash this row's fields and `prev_hash` make: SHA-256 of their JSON
    /// array (so no field can run into the next).
    pub fn expected_hash(&self) -> String {
        let fields = serde_json::json!([
            self.prev_hash,
            self.seq,
            self.at_ms,
            self.actor,
            self.action,
            self.kind,
            self.target,
            self.before,
            self.after
        ]);
        hex::encode(Sha256::digest(fields.to_string().as_bytes()))
    }
}

/// Where the chain breaks.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ChainBreak {
    #[error("admin change {seq}: its hash does not match its fields (edited)")]
    Hash { seq: i64 },
    #[error("admin change {seq}: it does not follow the row before it (a row was removed or reordered)")]
    Link { seq: i64 },
}

/// Checks rows in `seq` order; answers how many were checked.
pub fn verify(rows: &[ChangeRow]) -> Result<usize, ChainBreak> {
    let mut previous = (0_i64, GENESIS.to_owned());
    for row in rows {
        if row.seq != previous.0 + 1 || row.prev_hash != previous.1 {
            return Err(ChainBreak::Link { seq: row.seq });
        }
        if row.expected_hash() != row.hash {
            return Err(ChainBreak::Hash { seq: row.seq });
        }
        previous = (row.seq, row.hash.clone());
    }
    Ok(rows.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chain(count: i64) -> Vec<ChangeRow> {
        let mut rows = Vec::new();
        let mut prev = GENESIS.to_owned();
        for seq in 1..=count {
            let mut row = ChangeRow {
                seq,
                at_ms: seq * 1000,
                actor: "root".into(),
                action: "key.create".into(),
                kind: "key".into(),
                target: format!("k{seq}"),
                before: None,
                after: Some(format!("{{\"id\":\"k{seq}\"}}")),
                prev_hash: prev.clone(),
                hash: String::new(),
            };
            row.hash = row.expected_hash();
            prev = row.hash.clone();
            rows.push(row);
        }
        rows
    }

    #[test]
    fn an_intact_chain_verifies_and_an_edit_or_a_gap_is_named() {
        let rows = chain(3);
        assert_eq!(verify(&rows), Ok(3));
        let mut edited = rows.clone();
        edited[1].actor = "someone-else".into();
        assert_eq!(verify(&edited), Err(ChainBreak::Hash { seq: 2 }));
        let mut gap = rows.clone();
        gap.remove(1);
        assert_eq!(verify(&gap), Err(ChainBreak::Link { seq: 3 }));
        let mut rehashed = rows;
        rehashed[1].after = Some("{}".into());
        rehashed[1].hash = rehashed[1].expected_hash();
        assert_eq!(verify(&rehashed), Err(ChainBreak::Link { seq: 3 }), "a rehashed row breaks the next link");
    }
}
