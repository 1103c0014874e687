//! The read queries, written once for both stores: the local SQLite file and
//! the fleet's PostgreSQL table hold the same columns, and differ only in how
//! a parameter is written and which column orders rows of one start time.

use super::query::{Bucket, Filter, GroupBy, UsageQuery};
use super::rollup::{self, DayDim};
use super::store::{self, Kind};

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
    fn group_column(self, by: GroupBy) -> String {
        let body = self.body();
        match (by, self) {
            (GroupBy::Member, _) => "member".to_owned(),
            (GroupBy::Model, _) => "model".to_owned(),
            (GroupBy::Key, _) => "key_id".to_owned(),
            (GroupBy::Team, _) => "team".to_owned(),
            (GroupBy::Provider, Self::Sqlite) => format!("json_extract({body}, '$.provider')"),
            (GroupBy::Provider, Self::Postgres) => format!("(CAST({body} AS jsonb) ->> 'provider')"),
            (GroupBy::Deployment, Self::Sqlite) => format!("json_extract({body}, '$.attempts[#-1].deployment')"),
            (GroupBy::Deployment, Self::Postgres) => {
                format!("(CAST({body} AS jsonb) -> 'attempts' -> -1 ->> 'deployment')")
            }
        }
    }

    /// A row's body as JSON text: the file's may be stored compact (see
    /// `store::BODY_SQL`).
    fn body(self) -> &'static str {
        match self {
            Self::Sqlite => store::BODY_SQL,
            Self::Postgres => "body",
        }
    }

    /// SQL: whether the row's kind in `column` is `kind`: the file stores a
    /// kind as its code since schema version 7 and as its name before (see
    /// `store::KIND_SQL`), the fleet's table as its name.
    fn is_kind(self, column: &str, kind: Kind) -> String {
        match self {
            Self::Sqlite => kind.is_sql(column),
            Self::Postgres => format!("{column} = '{}'", kind.as_str()),
        }
    }

    /// SQL: whether the call id in `column` is the one `id` holds (an
    /// expression): the file's rows hold an id in either of two forms (see
    /// `callid`), the fleet's table as text.
    fn same_call(self, column: &str, id: &str) -> String {
        match self {
            Self::Sqlite => super::callid::same_call(column, id),
            Self::Postgres => format!("{column} = {id}"),
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

/// The closed calls, by start time: where each row is (column 0, for an
/// error) and its body (column 1).
pub(super) fn records(filter: &Filter, dialect: Dialect) -> Query {
    let body = dialect.body();
    let (conditions, params) = conditions(filter, dialect);
    let (label, tie) = (dialect.row_label(), dialect.tie_break());
    let closing = dialect.is_kind("kind", Kind::Close);
    let sql = format!("SELECT {label}, {body} FROM ledger WHERE {closing}{conditions} ORDER BY started_ms, {tie}");
    Query { sql, params }
}

/// The newest `limit` closed calls the filter selects, newest first (calls
/// of one millisecond by their ids, which are time-ordered): the file's
/// `(started_ms, call_id)` index read backwards, so a search reads the rows
/// it answers (and, under a filter, the newer ones it passes over), not every
/// closed call. (Ordered by the file's `seq` instead, SQLite sorted every
/// closed call first: 4.7 s on a million.)
pub(super) fn newest(filter: &Filter, limit: usize, dialect: Dialect) -> Query {
    let body = dialect.body();
    let (conditions, mut params) = conditions(filter, dialect);
    let label = dialect.row_label();
    params.push(Param::Integer(i64::try_from(limit).unwrap_or(i64::MAX)));
    let limit = dialect.parameter(params.len());
    let closing = dialect.is_kind("kind", Kind::Close);
    let sql = format!(
        "SELECT {label}, {body} FROM ledger WHERE {closing}{conditions} \
         ORDER BY started_ms DESC, call_id DESC LIMIT {limit}"
    );
    Query { sql, params }
}

/// Whether any row (of any kind) starts at or after `until_ms`: one seek of
/// the `(started_ms, call_id)` index. A usage query ending where no row
/// starts yet answers the same without its end (see
/// [`super::summary::Plan::for_usage`]).
pub(super) fn any_row_from(until_ms: i64, dialect: Dialect) -> Query {
    let from = dialect.parameter(1);
    Query {
        sql: format!("SELECT 1 FROM ledger WHERE started_ms >= {from} LIMIT 1"),
        params: vec![Param::Integer(until_ms)],
    }
}

/// The starts of the hours, newest first and before `before` (ms; `None`:
/// any), that hold a closed call the filter selects, at most `page` of
/// them: read from the roll-ups' hour level, whose rows carry the member,
/// key, model and category of their calls (see [`super::query::newest`]).
pub(super) fn hours_with_calls(filter: &Filter, before: Option<i64>, page: usize, dialect: Dialect) -> Query {
    let span = Span::of(filter);
    let first_hour = span.from.map(|from| from - from.rem_euclid(super::rollup::HOUR_MS));
    let to = match (span.to, before) {
        (Some(to), Some(before)) => Some(to.min(before)),
        (to, before) => to.or(before),
    };
    let hours = Span { from: first_hour, to };
    let (conditions, mut params) = conditions_on(filter, "d.", "r.hour_ms", hours, dialect);
    params.push(Param::Integer(i64::try_from(page).unwrap_or(i64::MAX)));
    let limit = dialect.parameter(params.len());
    let sql = format!(
        "SELECT DISTINCT r.hour_ms FROM ledger_rollup r JOIN ledger_rollup_dims d ON d.id = r.dims \
         WHERE r.calls > 0{conditions} ORDER BY r.hour_ms DESC LIMIT {limit}"
    );
    Query { sql, params }
}

/// How far a call's start may lie from the instant its id names (see
/// [`closed_call`]): the id is made just before the start time is read, from
/// the same clock.
const ID_CLOCK_WINDOW_MS: i64 = 1_000;

/// One call's closing row, looked for where it can be found fast: a Weir call
/// id is a UUID v7, whose first 48 bits are the millisecond it was made in,
/// just before the call's start time was read; so for such an id the row is
/// looked for among the calls that started within [`ID_CLOCK_WINDOW_MS`] of
/// it, through the `(started_ms, call_id)` index (the file keeps no index by
/// call id: see `store::INDEXES`). `None` for another id: [`any_closed_call`]
/// then reads every closing row.
pub(super) fn closed_call(call_id: &str, dialect: Dialect) -> Option<Query> {
    let made_ms = id_time_ms(call_id)?;
    let mut query = any_closed_call(call_id, dialect);
    for (operator, bound) in [(">=", made_ms - ID_CLOCK_WINDOW_MS), ("<=", made_ms + ID_CLOCK_WINDOW_MS)] {
        query.params.push(Param::Integer(bound));
        query.sql.push_str(&format!(" AND started_ms {operator} {}", dialect.parameter(query.params.len())));
    }
    Some(query)
}

/// One call's closing row, wherever its start lies (also where its id is not
/// a UUID v7, or its start lies outside the window [`closed_call`] reads).
pub(super) fn any_closed_call(call_id: &str, dialect: Dialect) -> Query {
    let (label, body) = (dialect.row_label(), dialect.body());
    let call = dialect.same_call("call_id", &dialect.parameter(1));
    let closing = dialect.is_kind("kind", Kind::Close);
    let sql = format!("SELECT {label}, {body} FROM ledger WHERE {closing} AND {call}");
    Query { sql, params: vec![Param::Text(call_id.to_owned())] }
}

/// The millisecond a UUID v7 call id was made in; `None` for any other id.
fn id_time_ms(call_id: &str) -> Option<i64> {
    let id = uuid::Uuid::parse_str(call_id).ok()?;
    let (seconds, nanos) = id.get_timestamp()?.to_unix();
    (id.get_version_num() == 7)
        .then(|| i64::try_from(seconds).ok())
        .flatten()
        .map(|s| s * 1000 + i64::from(nanos / 1_000_000))
}

/// The openings of calls never closed, by start time, as [`records`] reads them.
pub(super) fn unclosed(filter: &Filter, dialect: Dialect) -> Query {
    let body = dialect.body();
    let (conditions, params) = conditions(filter, dialect);
    let (label, tie) = (dialect.row_label(), dialect.tie_break());
    let call = dialect.same_call("closed.call_id", "opened.call_id");
    let (opening, closing) = (dialect.is_kind("opened.kind", Kind::Open), dialect.is_kind("closed.kind", Kind::Close));
    let sql = format!(
        "SELECT {label}, {body} FROM ledger AS opened WHERE {opening}{conditions}
           AND NOT EXISTS (SELECT 1 FROM ledger AS closed
               WHERE closed.started_ms = opened.started_ms AND {call} AND {closing})
         ORDER BY started_ms, {tie}"
    );
    Query { sql, params }
}

/// The rows a budget was charged: a closing row at its usage, unless it was
/// charged its hold's worst case (`charged_worst`); then, and for a call held
/// and never closed, the hold row.
fn charged(dialect: Dialect) -> String {
    let call = dialect.same_call("closed.call_id", "spent.call_id");
    let (closing, holding) = (dialect.is_kind("kind", Kind::Close), dialect.is_kind("kind", Kind::Hold));
    let closed = dialect.is_kind("closed.kind", Kind::Close);
    format!(
        "(({closing} AND charged_worst = 0)
    OR ({holding} AND NOT EXISTS (SELECT 1 FROM ledger AS closed WHERE closed.started_ms = spent.started_ms
        AND {call} AND {closed} AND closed.charged_worst = 0)))"
    )
}

/// Per (key, member, team): the five token sums and the cost (columns 3–8)
/// of the calls closed that started in `span` (from its start, read from
/// the rows), and, with
/// `cut_off_holds`, what the budgets were charged instead: the worst case
/// held by calls that never closed (a crash cut them off: what they spent is
/// not known, what they could spend is) or whose usage was never reported.
pub(super) fn spend_by_caller_in(span: Span, cut_off_holds: bool, dialect: Dialect) -> Query {
    let rows = match cut_off_holds {
        true => charged(dialect),
        false => dialect.is_kind("kind", Kind::Close),
    };
    let mut params = vec![Param::Integer(span.from.unwrap_or(0))];
    let mut until = String::new();
    if let Some(to) = span.to {
        params.push(Param::Integer(to));
        until = format!(" AND started_ms < {}", dialect.parameter(2));
    }
    let sql = format!(
        "SELECT key_id, member, team, CAST(COALESCE(SUM(input), 0) AS BIGINT), CAST(COALESCE(SUM(output), 0) AS BIGINT),
                CAST(COALESCE(SUM(cache_read), 0) AS BIGINT), CAST(COALESCE(SUM(cache_write), 0) AS BIGINT),
                CAST(COALESCE(SUM(reasoning), 0) AS BIGINT), COALESCE(SUM(cost_usd), 0.0)
         FROM ledger AS spent WHERE {rows} AND started_ms >= {}{until} GROUP BY key_id, member, team",
        dialect.parameter(1)
    );
    Query { sql, params }
}

/// The filter as ` AND ...` conditions and their parameters, on the row
/// columns and the call's start.
fn conditions(filter: &Filter, dialect: Dialect) -> (String, Vec<Param>) {
    conditions_on(filter, "", "started_ms", Span::of(filter), dialect)
}

/// The filter's member, key, model and category as conditions on columns
/// named with `prefix`, and `span` on `time_column`.
fn conditions_on(
    filter: &Filter,
    prefix: &str,
    time_column: &str,
    span: Span,
    dialect: Dialect,
) -> (String, Vec<Param>) {
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
            sql.push_str(&format!(" AND {prefix}{column} = {}", dialect.parameter(params.len())));
        }
    }
    for (operator, bound) in [(">=", span.from), ("<", span.to)] {
        if let Some(bound) = bound {
            params.push(Param::Integer(bound));
            sql.push_str(&format!(" AND {time_column} {operator} {}", dialect.parameter(params.len())));
        }
    }
    (sql, params)
}

/// Start times from `from` (inclusive) to `to` (exclusive), in ms since the
/// epoch; `None`: unbounded on that side.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(super) struct Span {
    pub from: Option<i64>,
    pub to: Option<i64>,
}

impl Span {
    /// The filter's `since` and `until`.
    pub(super) fn of(filter: &Filter) -> Self {
        Self { from: filter.since.map(store::unix_ms), to: filter.until.map(store::unix_ms) }
    }

    /// Every start from `since` on.
    pub(super) fn since(since: std::time::SystemTime) -> Self {
        Self { from: Some(store::unix_ms(since)), to: None }
    }
}

/// A usage query's bucket of time as an expression on `column` (ms):
/// NULL without buckets.
fn bucket_start(bucket: Option<Bucket>, column: &str) -> String {
    let width = match bucket {
        None => return "CAST(NULL AS BIGINT)".to_owned(),
        Some(Bucket::Hour) => rollup::HOUR_MS,
        Some(Bucket::Day) => rollup::DAY_MS,
    };
    format!("({column} - ({column} % {width}))")
}

/// The sums' columns after the bucket, the group, the category and the
/// latency: calls, the five token kinds, the known cost and the calls
/// without one, over the raw rows. Integer sums are cast back to BIGINT
/// (PostgreSQL sums a BIGINT column as NUMERIC).
const ROW_SUMS: &str = "COUNT(*), CAST(COALESCE(SUM(input), 0) AS BIGINT), CAST(COALESCE(SUM(output), 0) AS BIGINT),
    CAST(COALESCE(SUM(cache_read), 0) AS BIGINT), CAST(COALESCE(SUM(cache_write), 0) AS BIGINT),
    CAST(COALESCE(SUM(reasoning), 0) AS BIGINT), COALESCE(SUM(cost_usd), 0.0),
    COUNT(*) FILTER (WHERE cost_usd IS NULL)";

/// The same columns over roll-up rows (`r`).
const ROLLUP_SUMS: &str = "CAST(SUM(r.calls) AS BIGINT), CAST(SUM(r.input) AS BIGINT), CAST(SUM(r.output) AS BIGINT),
    CAST(SUM(r.cache_read) AS BIGINT), CAST(SUM(r.cache_write) AS BIGINT), CAST(SUM(r.reasoning) AS BIGINT),
    COALESCE(SUM(r.cost_usd), 0.0), CAST(SUM(r.calls_without_cost) AS BIGINT)";

/// The closed calls of `span` read from their rows: per bucket (column 0),
/// group (1), category (2) and latency in ms (3), then the sums.
pub(super) fn row_sums(query: &UsageQuery, span: Span, dialect: Dialect) -> Query {
    let (conditions, params) = conditions_on(&query.filter, "", "started_ms", span, dialect);
    let bucket = bucket_start(query.bucket, "started_ms");
    let group = query.group_by.map_or_else(|| "CAST(NULL AS TEXT)".to_owned(), |by| dialect.group_column(by));
    let closing = dialect.is_kind("kind", Kind::Close);
    // `at_ms` is NULL where it is `started_ms` (see `store::AT_SQL`).
    let sql = format!(
        "SELECT {bucket}, {group}, category, coalesce(at_ms, started_ms) - started_ms, {ROW_SUMS}
         FROM ledger WHERE {closing}{conditions} GROUP BY 1, 2, 3, 4"
    );
    Query { sql, params }
}

/// The roll-ups' join of a roll-up table (`alias`) with its dims (`d`).
fn rollup_join(table: &str, alias: &str) -> String {
    format!("{table} AS {alias} JOIN ledger_rollup_dims AS d ON d.id = {alias}.dims")
}

/// [`row_sums`]'s columns from the roll-ups of the whole hours of `span`
/// (column 3, the latency, NULL: see [`rollup_latency`]).
pub(super) fn rollup_sums(query: &UsageQuery, span: Span, dialect: Dialect) -> Query {
    let (conditions, params) = conditions_on(&query.filter, "d.", "r.hour_ms", span, dialect);
    let bucket = bucket_start(query.bucket, "r.hour_ms");
    let group = query.group_by.map_or("CAST(NULL AS TEXT)", GroupBy::dims_column);
    let from = rollup_join("ledger_rollup", "r");
    let sql = format!(
        "SELECT {bucket}, {group}, d.category, CAST(NULL AS BIGINT), {ROLLUP_SUMS}
         FROM {from} WHERE r.calls > 0{conditions} GROUP BY 1, 2, 3"
    );
    Query { sql, params }
}

/// The latency histogram of the whole hours of `span`: per bucket of time
/// (column 0) and group (1), the latency bucket (2) and its calls (3).
pub(super) fn rollup_latency(query: &UsageQuery, span: Span, dialect: Dialect) -> Query {
    let (conditions, params) = conditions_on(&query.filter, "d.", "l.hour_ms", span, dialect);
    let bucket = bucket_start(query.bucket, "l.hour_ms");
    let group = query.group_by.map_or("CAST(NULL AS TEXT)", GroupBy::dims_column);
    let from = rollup_join("ledger_rollup_latency", "l");
    let sql = format!(
        "SELECT {bucket}, {group}, l.bucket, CAST(SUM(l.calls) AS BIGINT)
         FROM {from} WHERE l.calls > 0{conditions} GROUP BY 1, 2, 3"
    );
    Query { sql, params }
}

/// The day level's rows of `query`'s grouping (without one: `all`) over the
/// whole days of `span`, one per (day, value, category), merged by
/// `summary`: the bucket's start (column 0), the value (1) and the category
/// (2) as stored (JSON), the calls (3), the five token sums (4–8), the known
/// cost (9), the calls without one (10) and the latency histogram (11). The
/// plan reads it only for a query with no filter but the category and the
/// time, and no hour buckets.
pub(super) fn day_rows(query: &UsageQuery, span: Span, dialect: Dialect) -> Query {
    let dim = query.group_by.map_or(DayDim::All, GroupBy::day_dim);
    let mut params = vec![Param::Text(dim.as_str().to_owned())];
    let mut conditions = String::new();
    if let Some(category) = &query.filter.category {
        params.push(Param::Text(rollup::day_json(Some(category))));
        conditions.push_str(&format!(" AND category = {}", dialect.parameter(params.len())));
    }
    for (operator, bound) in [(">=", span.from), ("<", span.to)] {
        if let Some(bound) = bound {
            params.push(Param::Integer(bound));
            conditions.push_str(&format!(" AND day_ms {operator} {}", dialect.parameter(params.len())));
        }
    }
    let bucket = bucket_start(query.bucket, "day_ms");
    let sql = format!(
        "SELECT {bucket}, value, category, calls, input, output, cache_read, cache_write, reasoning, cost_usd,
                calls_without_cost, latency
         FROM ledger_rollup_day WHERE dim = {}{conditions} AND calls > 0",
        dialect.parameter(1)
    );
    Query { sql, params }
}

/// [`spend_by_caller_in`]'s columns from the roll-ups of the hours from `from` on.
pub(super) fn rollup_spend_by_caller(from: i64, cut_off_holds: bool, dialect: Dialect) -> Query {
    let (prefix, counted) = match cut_off_holds {
        true => ("charged_", "r.charged_rows"),
        false => ("", "r.calls"),
    };
    let sums = ["input", "output", "cache_read", "cache_write", "reasoning"]
        .map(|column| format!("CAST(SUM(r.{prefix}{column}) AS BIGINT)"))
        .join(", ");
    let join = rollup_join("ledger_rollup", "r");
    let sql = format!(
        "SELECT d.key_id, d.member, d.team, {sums}, COALESCE(SUM(r.{prefix}cost_usd), 0.0)
         FROM {join} WHERE r.hour_ms >= {} GROUP BY d.key_id, d.member, d.team HAVING SUM({counted}) > 0",
        dialect.parameter(1)
    );
    Query { sql, params: vec![Param::Integer(from)] }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, UNIX_EPOCH};

    use super::*;

    #[test]
    fn a_uuid_v7_call_id_names_the_millisecond_it_was_made_in() {
        let before = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis();
        let made = id_time_ms(&crate::record::new_call_id()).unwrap();
        let after = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis();
        assert!((before as i64..=after as i64).contains(&made), "{before} <= {made} <= {after}");
        assert_eq!(id_time_ms(&uuid::Uuid::new_v4().to_string()), None, "a v4 id names no instant");
        assert_eq!(id_time_ms("call-1"), None);
        let query = closed_call(&crate::record::new_call_id(), Dialect::Postgres).unwrap();
        assert!(query.sql.ends_with("AND started_ms >= $2 AND started_ms <= $3"), "{}", query.sql);
        assert_eq!(query.params[2], Param::Integer(made_plus(&query.params[1], 2 * ID_CLOCK_WINDOW_MS)));
        assert!(closed_call("call-1", Dialect::Sqlite).is_none());
    }

    fn made_plus(param: &Param, ms: i64) -> i64 {
        let Param::Integer(from) = param else { panic!("a bound is an integer") };
        from + ms
    }

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
