//! The fleet's ledger read as a file is: the same queries over every
//! gateway's calls, and each source file's chain walked.

use std::sync::Mutex;
use std::time::SystemTime;

use postgres::Client;
use postgres::types::ToSql;

use super::{PostgresTarget, SharedError, connect};
use crate::ledger::anchor::{Anchor, AnchorKey, AnchorLines, Tampering};
use crate::ledger::query::{
    CallerSpend, ChainBreak, ChainCheck, Filter, LedgerRead, Link, ReadError, Sums, UsageQuery, VerifyError,
    VerifyReport, closed_call, newest, parse_body,
};
use crate::ledger::rollup::Histogram;
use crate::ledger::sql::{self, Dialect, Param, Span};
use crate::ledger::store::{Kind, Row};
use crate::ledger::summary::{self, DayRow, LatencyRow, Plan, SumRow};
use crate::record::{CallOpening, CallRecord, Tokens};

/// A count read back (never negative: the table holds what [`signed`] wrote).
fn unsigned(count: i64) -> u64 {
    u64::try_from(count).unwrap_or(0)
}

/// The fleet's ledger read as [`super::Reader`] reads a file: one connection,
/// opened (and the schema migrated) by [`SharedReader::connect`].
pub struct SharedReader {
    client: Mutex<Client>,
}

impl std::fmt::Debug for SharedReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedReader").finish_non_exhaustive()
    }
}

impl SharedReader {
    /// Connects to `target` (blocking: call it where blocking is allowed).
    pub fn connect(target: &PostgresTarget) -> Result<SharedReader, ReadError> {
        Ok(SharedReader { client: Mutex::new(connect(target)?) })
    }

    /// Runs `read` in one read-only snapshot, so what it reads agrees while
    /// shippers keep appending (a total and its groups, a chain's rows).
    fn in_snapshot<T, E: From<ReadError>>(
        &self,
        read: impl FnOnce(&mut postgres::Transaction<'_>) -> Result<T, E>,
    ) -> Result<T, E> {
        let failed = |error: postgres::Error| E::from(SharedError::from(error).into());
        let mut client = self.client.lock().map_err(|_| ReadError::Postgres("a reader panicked".to_owned()))?;
        let mut transaction = client
            .build_transaction()
            .isolation_level(postgres::IsolationLevel::RepeatableRead)
            .read_only(true)
            .start()
            .map_err(failed)?;
        let answer = read(&mut transaction)?;
        transaction.commit().map_err(failed)?;
        Ok(answer)
    }

    /// Runs `queries` in one snapshot.
    fn query_all(&self, queries: Vec<sql::Query>) -> Result<Vec<Vec<postgres::Row>>, ReadError> {
        self.in_snapshot(|transaction| run_all(transaction, queries))
    }

    fn query(&self, query: sql::Query) -> Result<Vec<postgres::Row>, ReadError> {
        Ok(self.query_all(vec![query])?.into_iter().next().unwrap_or_default())
    }

    fn bodies<T: serde::de::DeserializeOwned>(&self, query: sql::Query) -> Result<Vec<T>, ReadError> {
        self.query(query)?
            .iter()
            .map(|row| {
                parse_body(row.try_get(0).map_err(SharedError::from)?, row.try_get(1).map_err(SharedError::from)?)
            })
            .collect()
    }
}

fn boxed(param: Param) -> Box<dyn ToSql + Sync> {
    match param {
        Param::Text(text) => Box::new(text),
        Param::Integer(integer) => Box::new(integer),
    }
}

/// One source file's chain in the fleet's table, as [`SharedReader::verify`] found it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceReport {
    /// The file's name in the table: the hash of its first row.
    pub source: String,
    pub report: VerifyReport,
}

/// Why a source's chain in the fleet's table does not check out.
#[derive(Debug, thiserror::Error)]
#[error("source {file}: {chain}")]
pub struct SourceBreak {
    /// The source file's name in the table (its first row's hash).
    pub file: String,
    pub chain: ChainBreak,
}

/// A source whose rows in the fleet's table its anchors there do not vouch for.
#[derive(Debug, thiserror::Error)]
#[error(
    "source {file}: {tampering} (anchors in `ledger_anchor`; a \"line\" is the anchor's place among the source's anchors, by row)"
)]
pub struct SourceTampered {
    pub file: String,
    pub tampering: Tampering,
}

impl SharedReader {
    /// Walks every source file's chain in the table, as `weir ledger verify`
    /// walks a file's (one read-only snapshot). A source is also checked to be
    /// named by its first row's hash, and against its anchors
    /// (`ledger_anchor`, written by its shipper with each batch): each
    /// anchored row is there with the anchored hash, and with `key` each
    /// anchor's MAC verifies. Rows a shipper has not sent yet are not a
    /// break: a chain's prefix checks out.
    pub fn verify(&self, key: Option<&AnchorKey>) -> Result<Vec<SourceReport>, VerifyError> {
        let read = |error: postgres::Error| VerifyError::Read(SharedError::from(error).into());
        self.in_snapshot(|transaction| {
            // A source's anchors outlive its rows: one whose every row was deleted is still walked.
            let sources = transaction
                .query("SELECT source FROM ledger UNION SELECT source FROM ledger_anchor ORDER BY source", &[])
                .map_err(read)?;
            let mut reports = Vec::with_capacity(sources.len());
            for source in sources {
                let source: String = source.try_get(0).map_err(read)?;
                let rows = transaction.query(VERIFY_ROWS, &[&source]).map_err(read)?;
                let anchors = source_anchors(transaction, &source).map_err(read)?;
                let tampered =
                    |tampering| VerifyError::SharedTampered(SourceTampered { file: source.clone(), tampering });
                if let Some(key) = key {
                    anchors.check_macs(key).map_err(tampered)?;
                }
                let mut pending = anchors.lines.iter().map(|(_, anchor)| anchor).peekable();
                let mut chain = ChainCheck::default();
                for row in &rows {
                    let (kind, call_id, stored, link) = committed_at(row).map_err(read)?;
                    let (seq, hash) = (link.seq, link.hash.clone());
                    while let Some(anchor) = pending.next_if(|anchor| anchor.seq <= seq) {
                        if anchor.seq == seq && anchor.hash != hash {
                            return Err(tampered(Tampering::HeadMismatch { seq }));
                        }
                    }
                    let misnamed = link.seq == 1 && link.hash != source;
                    let checked = chain.next(&kind, &call_id, stored, link).and_then(|()| match misnamed {
                        false => Ok(()),
                        true => Err(ChainBreak {
                            seq: 1,
                            call_id: call_id.clone(),
                            reason: "the source is not named by its first row's hash".to_owned(),
                        }),
                    });
                    checked.map_err(|chain| VerifyError::Shared(SourceBreak { file: source.clone(), chain }))?;
                }
                if let Some(anchor) = pending.last() {
                    let rows = chain.last_seq();
                    return Err(tampered(Tampering::Shorter { rows, anchored: anchor.seq }));
                }
                let calls: i64 = transaction
                    .query_one(
                        "SELECT COUNT(*) FROM (SELECT DISTINCT started_ms, call_id FROM ledger WHERE source = $1) AS calls",
                        &[&source],
                    )
                    .map_err(read)?
                    .try_get(0)
                    .map_err(read)?;
                reports.push(SourceReport { source, report: chain.report(unsigned(calls)) });
            }
            Ok(reports)
        })
    }
}

/// `source`'s anchors, by row (numbered from 1 in that order).
fn source_anchors(transaction: &mut postgres::Transaction<'_>, source: &str) -> Result<AnchorLines, postgres::Error> {
    let rows = transaction
        .query("SELECT source_seq, hash, mac FROM ledger_anchor WHERE source = $1 ORDER BY source_seq", &[&source])?;
    let mut lines = Vec::with_capacity(rows.len());
    for (number, row) in (1..).zip(&rows) {
        lines.push((number, Anchor { seq: row.try_get(0)?, hash: row.try_get(1)?, mac: row.try_get(2)? }));
    }
    Ok(AnchorLines { lines })
}

/// One source's rows in order, with every column [`committed_at`] reads.
const VERIFY_ROWS: &str = "SELECT source_seq, kind, call_id, at_ms, started_ms, key_id, member, team, model, category,
    input, output, cache_read, cache_write, reasoning, cost_usd, body, prev_hash, hash, charged_worst
    FROM ledger WHERE source = $1 ORDER BY source_seq";

/// A row of [`VERIFY_ROWS`]: its kind as stored, its call, the row as its
/// columns hold it (`None` for an unknown kind) and its link.
fn committed_at(row: &postgres::Row) -> Result<(String, String, Option<Row>, Link), postgres::Error> {
    let kind: String = row.try_get(1)?;
    let call_id: String = row.try_get(2)?;
    let stored = match Kind::parse(&kind) {
        Some(parsed) => Some(Row {
            kind: parsed,
            call_id: call_id.clone(),
            at_ms: row.try_get(3)?,
            started_ms: row.try_get(4)?,
            key_id: row.try_get(5)?,
            member: row.try_get(6)?,
            team: row.try_get(7)?,
            model: row.try_get(8)?,
            category: row.try_get(9)?,
            tokens: tokens_at(row, 10)?,
            cost_usd: row.try_get(15)?,
            body: row.try_get(16)?,
            charged_worst: row.try_get::<_, i32>(19)? != 0,
            served: None,
            stands_alone: false,
        }),
        None => None,
    };
    let link =
        Link { seq: row.try_get(0)?, prev_hash: Some(row.try_get(17)?), hash: row.try_get(18)?, covers_columns: false };
    Ok((kind, call_id, stored, link))
}

/// Five token counts from consecutive columns, the first at `first`.
fn tokens_at(row: &postgres::Row, first: usize) -> Result<Tokens, postgres::Error> {
    let count = |index: usize| row.try_get::<_, i64>(first + index).map(unsigned);
    Ok(Tokens {
        input: count(0)?,
        output: count(1)?,
        cache_read: count(2)?,
        cache_write: count(3)?,
        reasoning: count(4)?,
    })
}

fn sum_row(row: &postgres::Row) -> Result<SumRow, postgres::Error> {
    Ok(SumRow {
        bucket: row.try_get(0)?,
        group: row.try_get(1)?,
        category: row.try_get(2)?,
        latency_ms: row.try_get(3)?,
        calls: unsigned(row.try_get(4)?),
        tokens: tokens_at(row, 5)?,
        cost_usd: row.try_get(10)?,
        calls_without_cost: unsigned(row.try_get(11)?),
    })
}

fn day_row(row: &postgres::Row) -> Result<DayRow, postgres::Error> {
    Ok(DayRow {
        bucket: row.try_get(0)?,
        value: row.try_get(1)?,
        category: row.try_get(2)?,
        calls: unsigned(row.try_get(3)?),
        tokens: tokens_at(row, 4)?,
        cost_usd: row.try_get(9)?,
        calls_without_cost: unsigned(row.try_get(10)?),
        latency: Histogram::from_counts(row.try_get(11)?),
    })
}

fn latency_row(row: &postgres::Row) -> Result<LatencyRow, postgres::Error> {
    Ok(LatencyRow {
        bucket: row.try_get(0)?,
        group: row.try_get(1)?,
        latency_bucket: row.try_get(2)?,
        calls: unsigned(row.try_get(3)?),
    })
}

fn caller_spend(row: &postgres::Row) -> Result<CallerSpend, postgres::Error> {
    Ok(CallerSpend {
        key_id: row.try_get(0)?,
        member: row.try_get(1)?,
        team: row.try_get(2)?,
        tokens: tokens_at(row, 3)?,
        cost_usd: row.try_get(8)?,
    })
}

/// Runs `queries` in `transaction`, one answer each.
fn run_all(
    transaction: &mut postgres::Transaction<'_>,
    queries: Vec<sql::Query>,
) -> Result<Vec<Vec<postgres::Row>>, ReadError> {
    let mut answers = Vec::with_capacity(queries.len());
    for query in queries {
        let params: Vec<Box<dyn ToSql + Sync>> = query.params.into_iter().map(boxed).collect();
        let refs: Vec<&(dyn ToSql + Sync)> = params.iter().map(|param| param.as_ref()).collect();
        answers.push(transaction.query(&query.sql, &refs).map_err(SharedError::from)?);
    }
    Ok(answers)
}

/// `query` answered as `plan` says, inside `transaction`.
fn usage_in(transaction: &mut postgres::Transaction<'_>, query: &UsageQuery, plan: &Plan) -> Result<Sums, ReadError> {
    let queries = plan.usage_queries(query, Dialect::Postgres);
    let (sums, latency) = (queries.sums.len(), queries.latency.len());
    let all = queries.sums.into_iter().chain(queries.latency).chain(queries.days).collect();
    let mut answers = run_all(transaction, all)?;
    let days = answers.split_off(sums + latency);
    let latency = answers.split_off(sums);
    let (sums, latency, days) =
        (read_all(answers, sum_row)?, read_all(latency, latency_row)?, read_all(days, day_row)?);
    Ok(summary::assemble(query, &sums, &latency, &days))
}

/// Each answer's rows read by `read`.
fn read_all<T>(
    answers: Vec<Vec<postgres::Row>>,
    read: fn(&postgres::Row) -> Result<T, postgres::Error>,
) -> Result<Vec<T>, ReadError> {
    let rows = answers.iter().flatten().map(read).collect::<Result<_, _>>();
    Ok(rows.map_err(SharedError::from)?)
}

impl SharedReader {
    /// [`LedgerRead::usage`] read from every row in its range, none from
    /// the roll-ups (the tests' reference).
    pub fn usage_from_rows(&self, query: &UsageQuery) -> Result<Sums, ReadError> {
        self.in_snapshot(|transaction| usage_in(transaction, query, &Plan::rows_only(Span::of(&query.filter))))
    }

    /// [`LedgerRead::spend_by_caller`] read from every row since `since`.
    #[cfg(test)]
    pub(in crate::ledger) fn spend_from_rows(
        &self,
        since: SystemTime,
        cut_off_holds: bool,
    ) -> Result<Vec<CallerSpend>, ReadError> {
        self.spend(&Plan::rows_only(Span::since(since)), cut_off_holds)
    }

    fn spend(&self, plan: &Plan, cut_off_holds: bool) -> Result<Vec<CallerSpend>, ReadError> {
        let answers = self.query_all(plan.spend_queries(cut_off_holds, Dialect::Postgres))?;
        Ok(summary::merge_spend(read_all(answers, caller_spend)?))
    }
}

impl LedgerRead for SharedReader {
    fn records(&self, filter: &Filter) -> Result<Vec<CallRecord>, ReadError> {
        self.bodies(sql::records(filter, Dialect::Postgres))
    }

    fn newest(&self, filter: &Filter, limit: usize) -> Result<Vec<CallRecord>, ReadError> {
        let hours = |query| {
            let rows = self.query(query)?;
            Ok(rows.iter().map(|row| row.try_get(0)).collect::<Result<_, _>>().map_err(SharedError::from)?)
        };
        newest(filter, limit, Dialect::Postgres, hours, |query| self.bodies(query))
    }

    fn closed_call(&self, call_id: &str) -> Result<Option<CallRecord>, ReadError> {
        closed_call(call_id, Dialect::Postgres, |query| self.bodies(query))
    }

    fn unclosed(&self, filter: &Filter) -> Result<Vec<CallOpening>, ReadError> {
        self.bodies(sql::unclosed(filter, Dialect::Postgres))
    }

    fn spend_by_caller(&self, since: SystemTime, cut_off_holds: bool) -> Result<Vec<CallerSpend>, ReadError> {
        self.spend(&Plan::of(Span::since(since)), cut_off_holds)
    }

    fn usage(&self, query: &UsageQuery) -> Result<Sums, ReadError> {
        self.in_snapshot(|transaction| {
            let span = summary::read_span(&query.filter, Dialect::Postgres, |probe| {
                Ok::<_, ReadError>(run_all(transaction, vec![probe])?.iter().any(|rows| !rows.is_empty()))
            })?;
            usage_in(transaction, query, &Plan::for_usage(query, span, true))
        })
    }
}
