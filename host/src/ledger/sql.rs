//! The read queries, written once for both stores: the local SQLite file and
//! the fleet's PostgreSQL table hold the same columns, and differ only in how
//! a parameter is written and which column orders rows of one start time.

use std::time::SystemTime;

use super::query::{Filter, GroupBy};
use super::store;

/// Which store a query is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Dialect {
    Sqlite,
    Postgres,
}

impl Dialect {
    /// The `n`th parameter (from 1).
    fn parameter(self, n: usize) -> String {
        match self {
            Self::Sqlite => format!("?{n}"),
            Self::Postgres => format!("${n}"),
        }
    }

    /// What orders the rows of calls that started in the same millisecond:
    /// the file's sequence, or (rows of several files) the call id.
    fn tie_break(self) -> &'static str {
        match self {
            Self::Sqlite => "seq",
            Self::Postgres => "call_id",
        }
    }

    /// What a sums query groups by: a column, or (the deployment) the body's
    /// last attempt's `deployment`, read from the JSON body each store keeps.
    fn group_column(self, by: GroupBy) -> &'static str {
        match (by, self) {
            (GroupBy::Member, _) => "member",
            (GroupBy::Model, _) => "model",
            (GroupBy::Key, _) => "key_id",
            (GroupBy::Deployment, Self::Sqlite) => "json_extract(body, '$.attempts[#-1].deployment')",
            (GroupBy::Deployment, Self::Postgres) => "(CAST(body AS jsonb) -> 'attempts' -> -1 ->> 'deployment')",
        }
    }

    /// Where a row is, for an error about it: its place in the file, or its call.
    fn row_label(self) -> &'static str {
        match self {
            Self::Sqlite => "'row ' || seq",
            Self::Postgres => "'call ' || call_id",
        }
    }
}

/// A query's parameter.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Param {
    Text(String),
    Integer(i64),
}

/// A query and its parameters, in order.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Query {
    pub sql: String,
    pub params: Vec<Param>,
}

/// The sums' columns after the group's value: calls, the five token kinds,
/// the known cost and the calls without one. Integer sums are cast back to
/// BIGINT (PostgreSQL sums a BIGINT column as NUMERIC).
const SUMS: &str = "COUNT(*), CAST(COALESCE(SUM(input), 0) AS BIGINT), CAST(COALESCE(SUM(output), 0) AS BIGINT),
    CAST(COALESCE(SUM(cache_read), 0) AS BIGINT), CAST(COALESCE(SUM(cache_write), 0) AS BIGINT),
    CAST(COALESCE(SUM(reasoning), 0) AS BIGINT), COALESCE(SUM(cost_usd), 0.0),
    COUNT(*) FILTER (WHERE cost_usd IS NULL)";

/// The closed calls, by start time: where each row is (column 0, for an
/// error) and its body (column 1).
pub(super) fn records(filter: &Filter, dialect: Dialect) -> Query {
    let (conditions, params) = conditions(filter, dialect);
    let (label, tie) = (dialect.row_label(), dialect.tie_break());
    let sql = format!("SELECT {label}, body FROM ledger WHERE kind = 'close'{conditions} ORDER BY started_ms, {tie}");
    Query { sql, params }
}

/// The openings of calls never closed, by start time, as [`records`] reads them.
pub(super) fn unclosed(filter: &Filter, dialect: Dialect) -> Query {
    let (conditions, params) = conditions(filter, dialect);
    let (label, tie) = (dialect.row_label(), dialect.tie_break());
    let sql = format!(
        "SELECT {label}, body FROM ledger AS opened WHERE kind = 'open'{conditions}
           AND NOT EXISTS (SELECT 1 FROM ledger AS closed
               WHERE closed.started_ms = opened.started_ms AND closed.call_id = opened.call_id AND closed.kind = 'close')
         ORDER BY started_ms, {tie}"
    );
    Query { sql, params }
}

/// The rows a budget was charged: a closing row at its usage, unless it was
/// charged its hold's worst case (`charged_worst`); then, and for a call held
/// and never closed, the hold row.
const CHARGED: &str = "((kind = 'close' AND charged_worst = 0)
    OR (kind = 'hold' AND NOT EXISTS (SELECT 1 FROM ledger AS closed WHERE closed.started_ms = spent.started_ms
        AND closed.call_id = spent.call_id AND closed.kind = 'close' AND closed.charged_worst = 0)))";

/// Per (key, member, team): the five token sums and the cost (columns 3–8)
/// of the calls closed that started at or after `since`, and, with
/// `cut_off_holds`, what the budgets were charged instead: the worst case
/// held by calls that never closed (a crash cut them off: what they spent is
/// not known, what they could spend is) or whose usage was never reported.
pub(super) fn spend_by_caller(since: SystemTime, cut_off_holds: bool, dialect: Dialect) -> Query {
    let rows = match cut_off_holds {
        true => CHARGED,
        false => "kind = 'close'",
    };
    let sql = format!(
        "SELECT key_id, member, team, CAST(COALESCE(SUM(input), 0) AS BIGINT), CAST(COALESCE(SUM(output), 0) AS BIGINT),
                CAST(COALESCE(SUM(cache_read), 0) AS BIGINT), CAST(COALESCE(SUM(cache_write), 0) AS BIGINT),
                CAST(COALESCE(SUM(reasoning), 0) AS BIGINT), COALESCE(SUM(cost_usd), 0.0)
         FROM ledger AS spent WHERE {rows} AND started_ms >= {} GROUP BY key_id, member, team",
        dialect.parameter(1)
    );
    Query { sql, params: vec![Param::Integer(store::unix_ms(since))] }
}

/// The group's value (column 0, NULL without grouping), then [`SUMS`].
pub(super) fn sums(filter: &Filter, group_by: Option<GroupBy>, dialect: Dialect) -> Query {
    let (conditions, params) = conditions(filter, dialect);
    let (column, grouping) = match group_by {
        Some(by) => (dialect.group_column(by), format!(" GROUP BY {0} ORDER BY {0}", dialect.group_column(by))),
        // PostgreSQL needs the NULL's type to read it back.
        None => ("CAST(NULL AS TEXT)", String::new()),
    };
    Query { sql: format!("SELECT {column}, {SUMS} FROM ledger WHERE kind = 'close'{conditions}{grouping}"), params }
}

/// The filter as ` AND ...` conditions and their parameters.
fn conditions(filter: &Filter, dialect: Dialect) -> (String, Vec<Param>) {
    let mut sql = String::new();
    let mut params = Vec::new();
    let texts = [
        ("member", &filter.member),
        ("key_id", &filter.key_id),
        ("model", &filter.model),
        ("category", &filter.category),
    ];
    for (column, value) in texts {
        if let Some(value) = value {
            params.push(Param::Text(value.clone()));
            sql.push_str(&format!(" AND {column} = {}", dialect.parameter(params.len())));
        }
    }
    let times = [(">=", filter.since), ("<", filter.until)];
    for (operator, time) in times {
        if let Some(time) = time {
            params.push(Param::Integer(store::unix_ms(time)));
            sql.push_str(&format!(" AND started_ms {operator} {}", dialect.parameter(params.len())));
        }
    }
    (sql, params)
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, UNIX_EPOCH};

    use super::*;

    #[test]
    fn both_dialects_number_the_same_parameters() {
        let filter = Filter {
            member: Some("ana".to_owned()),
            model: Some("m".to_owned()),
            since: Some(UNIX_EPOCH + Duration::from_secs(1)),
            ..Filter::default()
        };
        let sqlite = records(&filter, Dialect::Sqlite);
        let postgres = records(&filter, Dialect::Postgres);
        assert!(sqlite.sql.contains("member = ?1 AND model = ?2 AND started_ms >= ?3"), "{}", sqlite.sql);
        assert!(postgres.sql.contains("member = $1 AND model = $2 AND started_ms >= $3"), "{}", postgres.sql);
        assert_eq!(sqlite.params, postgres.params);
        assert_eq!(sqlite.params[2], Param::Integer(1000));
        assert!(postgres.sql.ends_with("ORDER BY started_ms, call_id"));
    }
}
