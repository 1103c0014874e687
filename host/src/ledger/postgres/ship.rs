//! The shipper's statements: where a file's rows end in the table, and a
//! batch appended in one statement.

use std::collections::HashSet;

use postgres::Client;
use postgres::types::ToSql;

use super::{PostgresTarget, SharedError, connect, rollup};
use crate::ledger::anchor::AnchorKey;
use crate::ledger::query::Committed;
use crate::record::Tokens;

/// The shipper's connection: [`connect`], with commits that do not wait for
/// the server's disk. The file is the write-ahead record and the shipper
/// asks the table where its rows end on every connection, so a commit a
/// crashed server lost is sent again, never missing; the server is spared a
/// disk flush per batch.
pub(in crate::ledger) fn connect_shipper(target: &PostgresTarget) -> Result<Client, SharedError> {
    let mut client = connect(target)?;
    client.batch_execute("SET synchronous_commit = off")?;
    Ok(client)
}

/// The last `seq` of `source` already in the table (0 for none): where its
/// shipper goes on from.
pub(in crate::ledger) fn shipped_through(client: &mut Client, source: &str) -> Result<i64, SharedError> {
    let row = client.query_one("SELECT COALESCE(MAX(source_seq), 0) FROM ledger WHERE source = $1", &[&source])?;
    Ok(row.try_get(0)?)
}

/// Appends `rows` of `source` in one statement and transaction; a row whose
/// call already has that kind of row is skipped (shipped before). In the
/// same transaction, the batch's last row is anchored (`ledger_anchor`: its
/// `source_seq` and hash, and their MAC with `key`), and the roll-ups take
/// the new rows' change (see `rollup`). Returns how many rows were new.
pub(in crate::ledger) fn ship(
    client: &mut Client,
    source: &str,
    rows: &[Committed],
    key: Option<&AnchorKey>,
) -> Result<u64, SharedError> {
    let column = |get: fn(&Committed) -> String| rows.iter().map(get).collect::<Vec<_>>();
    let optional = |get: fn(&Committed) -> Option<String>| rows.iter().map(get).collect::<Vec<_>>();
    let integer = |get: fn(&Committed) -> i64| rows.iter().map(get).collect::<Vec<_>>();
    let tokens = |get: fn(&Tokens) -> u64| rows.iter().map(|c| signed(get(&c.row.tokens))).collect::<Vec<_>>();
    let sources = vec![source.to_owned(); rows.len()];
    let params: [&(dyn ToSql + Sync); 21] = [
        &column(|c| c.row.call_id.clone()),
        &column(|c| c.row.kind.as_str().to_owned()),
        &sources,
        &integer(|c| c.seq),
        &integer(|c| c.row.at_ms),
        &integer(|c| c.row.started_ms),
        &optional(|c| c.row.key_id.clone()),
        &optional(|c| c.row.member.clone()),
        &optional(|c| c.row.team.clone()),
        &column(|c| c.row.model.clone()),
        &optional(|c| c.row.category.clone()),
        &tokens(|t| t.input),
        &tokens(|t| t.output),
        &tokens(|t| t.cache_read),
        &tokens(|t| t.cache_write),
        &tokens(|t| t.reasoning),
        &rows.iter().map(|c| c.row.cost_usd).collect::<Vec<_>>(),
        &column(|c| c.row.body.clone()),
        &column(|c| c.prev_hash.clone()),
        &column(|c| c.hash.clone()),
        &rows.iter().map(|c| i32::from(c.row.charged_worst)).collect::<Vec<_>>(),
    ];
    let mut transaction = client.transaction()?;
    let earlier = rollup::earlier(&mut transaction, rows)?;
    let inserted = transaction.query(
        "INSERT INTO ledger (call_id, kind, source, source_seq, at_ms, started_ms, key_id, member, team, model,
             category, input, output, cache_read, cache_write, reasoning, cost_usd, body, prev_hash, hash,
             charged_worst)
         SELECT * FROM UNNEST($1::text[], $2::text[], $3::text[], $4::bigint[], $5::bigint[], $6::bigint[],
             $7::text[], $8::text[], $9::text[], $10::text[], $11::text[], $12::bigint[], $13::bigint[],
             $14::bigint[], $15::bigint[], $16::bigint[], $17::float8[], $18::text[], $19::text[], $20::text[],
             $21::int4[])
         ON CONFLICT DO NOTHING RETURNING source_seq",
        &params,
    )?;
    let taken = inserted.iter().map(|row| row.try_get(0)).collect::<Result<HashSet<i64>, _>>()?;
    let new_rows: Vec<&Committed> = rows.iter().filter(|row| taken.contains(&row.seq)).collect();
    rollup::add(&mut transaction, &new_rows, earlier)?;
    if let Some(last) = rows.last() {
        let mac = key.map(|key| key.mac(last.seq, &last.hash));
        transaction.execute(
            "INSERT INTO ledger_anchor (source, source_seq, hash, mac) VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING",
            &[&source, &last.seq, &last.hash, &mac],
        )?;
    }
    transaction.commit()?;
    Ok(new_rows.len() as u64)
}

/// Token counts are far below 2^63; a count beyond it is stored as the most.
fn signed(count: u64) -> i64 {
    i64::try_from(count).unwrap_or(i64::MAX)
}
