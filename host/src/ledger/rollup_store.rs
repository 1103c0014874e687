//! The roll-ups in the ledger's SQLite file: their tables, a batch's
//! changes written inside the transaction that inserts its rows, the rows of
//! a call the changes depend on, and the roll-ups built once over a file
//! written before they existed. (The fleet's PostgreSQL tables take the same
//! statements: `postgres/ship.rs`.)

use std::collections::HashMap;
use std::sync::LazyLock;

use rusqlite::functions::FunctionFlags;
use rusqlite::{Connection, params};

use super::callid::{CallId, Stored};
use super::query::{self, ALL_COLUMNS};
use super::rollup::{self, DayKey, DayMeasures, Dims, Histogram, Measures, Rollup};
use super::store::{self, Kind, Row};

/// The roll-ups' tables. `ledger_rollup_dims` names each set of dims once
/// (by its signature); `ledger_rollup` holds an hour's sums per dims, and
/// `ledger_rollup_latency` its latency histogram. Their primary keys lead
/// with the hour, so a range of hours is one range of each table.
/// `ledger_rollup_day` is the day level (see `rollup`): its key leads with
/// the dimension and the day, so a query grouped by one dimension over a
/// range of days reads one range of it.
pub(super) const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS ledger_rollup_dims (
    id INTEGER PRIMARY KEY,
    signature TEXT NOT NULL UNIQUE,
    key_id TEXT, member TEXT, team TEXT, model TEXT NOT NULL, provider TEXT, deployment TEXT, category TEXT
);
CREATE TABLE IF NOT EXISTS ledger_rollup (
    hour_ms INTEGER NOT NULL,
    dims INTEGER NOT NULL,
    calls INTEGER NOT NULL,
    input INTEGER NOT NULL, output INTEGER NOT NULL, cache_read INTEGER NOT NULL,
    cache_write INTEGER NOT NULL, reasoning INTEGER NOT NULL,
    cost_usd REAL NOT NULL,
    calls_without_cost INTEGER NOT NULL,
    charged_rows INTEGER NOT NULL,
    charged_input INTEGER NOT NULL, charged_output INTEGER NOT NULL, charged_cache_read INTEGER NOT NULL,
    charged_cache_write INTEGER NOT NULL, charged_reasoning INTEGER NOT NULL,
    charged_cost_usd REAL NOT NULL,
    PRIMARY KEY (hour_ms, dims)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS ledger_rollup_latency (
    hour_ms INTEGER NOT NULL,
    dims INTEGER NOT NULL,
    bucket INTEGER NOT NULL,
    calls INTEGER NOT NULL,
    PRIMARY KEY (hour_ms, dims, bucket)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS ledger_rollup_day (
    dim TEXT NOT NULL,
    day_ms INTEGER NOT NULL,
    value TEXT NOT NULL,
    category TEXT NOT NULL,
    calls INTEGER NOT NULL,
    input INTEGER NOT NULL, output INTEGER NOT NULL, cache_read INTEGER NOT NULL,
    cache_write INTEGER NOT NULL, reasoning INTEGER NOT NULL,
    cost_usd REAL NOT NULL,
    calls_without_cost INTEGER NOT NULL,
    latency BLOB NOT NULL,
    PRIMARY KEY (dim, day_ms, value, category)
) WITHOUT ROWID;
";

/// Every roll-up table, emptied before the roll-ups are built from the rows.
const CLEAR: &str = "DELETE FROM ledger_rollup; DELETE FROM ledger_rollup_latency; DELETE FROM ledger_rollup_dims;
    DELETE FROM ledger_rollup_day;";

/// The SQL function the day level's upsert adds two stored histograms with
/// ([`Histogram`]); registered on every writer connection.
const ADD_HISTOGRAMS: &str = "weir_add_histograms";

/// A day-level row changed by a batch's calls, its histograms added by
/// `add_histograms` (each store's own expression on `ledger_rollup_day.latency`
/// and `excluded.latency`). The primary key holds no NULL (a WITHOUT ROWID
/// table refuses one, and a UNIQUE key would let equal rows in): the value
/// and the category are stored as JSON (`null`, or a string), read back by
/// [`rollup::day_text`].
pub(super) fn add_day(add_histograms: &str) -> String {
    format!(
        "INSERT INTO ledger_rollup_day (dim, day_ms, value, category, calls, input, output, cache_read,
            cache_write, reasoning, cost_usd, calls_without_cost, latency)
        VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)
        ON CONFLICT (dim, day_ms, value, category) DO UPDATE SET
            calls = ledger_rollup_day.calls + excluded.calls,
            input = ledger_rollup_day.input + excluded.input,
            output = ledger_rollup_day.output + excluded.output,
            cache_read = ledger_rollup_day.cache_read + excluded.cache_read,
            cache_write = ledger_rollup_day.cache_write + excluded.cache_write,
            reasoning = ledger_rollup_day.reasoning + excluded.reasoning,
            cost_usd = ledger_rollup_day.cost_usd + excluded.cost_usd,
            calls_without_cost = ledger_rollup_day.calls_without_cost + excluded.calls_without_cost,
            latency = {add_histograms}"
    )
}

/// The file's [`add_day`]: by [`ADD_HISTOGRAMS`].
static ADD_DAY: LazyLock<String> =
    LazyLock::new(|| add_day(&format!("{ADD_HISTOGRAMS}(ledger_rollup_day.latency, excluded.latency)")));

/// A set of dims named (kept when already named). `$n` parameters bind by
/// position in both SQLite and PostgreSQL, so the statements below serve both.
pub(super) const INSERT_DIMS: &str = "INSERT INTO ledger_rollup_dims
    (signature, key_id, member, team, model, provider, deployment, category)
    VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT (signature) DO NOTHING";

pub(super) const DIMS_ID: &str = "SELECT id FROM ledger_rollup_dims WHERE signature = $1";

/// An hour's sums changed by a batch's.
pub(super) const ADD_MEASURES: &str = "INSERT INTO ledger_rollup (hour_ms, dims, calls, input, output, cache_read,
        cache_write, reasoning, cost_usd, calls_without_cost, charged_rows, charged_input, charged_output,
        charged_cache_read, charged_cache_write, charged_reasoning, charged_cost_usd)
    VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17)
    ON CONFLICT (hour_ms, dims) DO UPDATE SET
        calls = ledger_rollup.calls + excluded.calls,
        input = ledger_rollup.input + excluded.input,
        output = ledger_rollup.output + excluded.output,
        cache_read = ledger_rollup.cache_read + excluded.cache_read,
        cache_write = ledger_rollup.cache_write + excluded.cache_write,
        reasoning = ledger_rollup.reasoning + excluded.reasoning,
        cost_usd = ledger_rollup.cost_usd + excluded.cost_usd,
        calls_without_cost = ledger_rollup.calls_without_cost + excluded.calls_without_cost,
        charged_rows = ledger_rollup.charged_rows + excluded.charged_rows,
        charged_input = ledger_rollup.charged_input + excluded.charged_input,
        charged_output = ledger_rollup.charged_output + excluded.charged_output,
        charged_cache_read = ledger_rollup.charged_cache_read + excluded.charged_cache_read,
        charged_cache_write = ledger_rollup.charged_cache_write + excluded.charged_cache_write,
        charged_reasoning = ledger_rollup.charged_reasoning + excluded.charged_reasoning,
        charged_cost_usd = ledger_rollup.charged_cost_usd + excluded.charged_cost_usd";

/// An hour's latency bucket changed by a batch's calls.
pub(super) const ADD_LATENCY: &str = "INSERT INTO ledger_rollup_latency (hour_ms, dims, bucket, calls)
    VALUES ($1, $2, $3, $4)
    ON CONFLICT (hour_ms, dims, bucket) DO UPDATE SET calls = ledger_rollup_latency.calls + excluded.calls";

/// The holds and closings of a call before a row (by the index on
/// `(started_ms, call_id)`): what [`Rollup::apply`] needs.
pub(super) static EARLIER: LazyLock<String> = LazyLock::new(|| {
    format!(
        "SELECT seq, {}, call_id, {}, started_ms, key_id, member, team, model, category,
    input, output, cache_read, cache_write, reasoning, cost_usd, '' AS body, prev_hash, hash, charged_worst
    FROM ledger WHERE started_ms = ?1 AND call_id IN (?2, ?4) AND seq < ?3 AND NOT {}",
        store::KIND_SQL,
        store::AT_SQL,
        Kind::Open.is_sql("kind")
    )
});

/// Rows between two writes of the build's changes (bounds its memory).
const BUILD_BATCH: u64 = 100_000;

/// The rows of `row`'s call before `seq` that its roll-up change depends on
/// (none for an opening, which changes nothing).
pub(super) fn earlier(connection: &Connection, row: &Row, seq: i64) -> rusqlite::Result<Vec<Row>> {
    if row.kind == Kind::Open {
        return Ok(Vec::new());
    }
    let mut statement = connection.prepare_cached(&EARLIER)?;
    // The call's earlier rows may hold its id in either form (see `callid`).
    let mut rows = statement.query(params![row.started_ms, Stored::of(&row.call_id), seq, row.call_id])?;
    let mut earlier = Vec::new();
    while let Some(found) = rows.next()? {
        let kind: String = found.get(1)?;
        earlier.extend(query::stored_row(found, &kind, &row.call_id, "")?);
    }
    Ok(earlier)
}

/// Writes a batch's changes, inside its transaction.
pub(super) fn write(connection: &Connection, rollup: &Rollup) -> rusqlite::Result<()> {
    if rollup.is_empty() {
        return Ok(());
    }
    let mut ids: HashMap<&Dims, i64> = HashMap::new();
    let mut add_measures = connection.prepare_cached(ADD_MEASURES)?;
    for ((hour, dims), measures) in &rollup.measures {
        let id = dims_id(connection, &mut ids, dims)?;
        let Measures { calls, tokens: t, cost_usd, calls_without_cost, charged_rows, charged: c, charged_cost_usd } =
            *measures;
        add_measures.execute(params![
            hour,
            id,
            calls,
            t[0],
            t[1],
            t[2],
            t[3],
            t[4],
            cost_usd,
            calls_without_cost,
            charged_rows,
            c[0],
            c[1],
            c[2],
            c[3],
            c[4],
            charged_cost_usd
        ])?;
    }
    let mut add_latency = connection.prepare_cached(ADD_LATENCY)?;
    for ((hour, dims, bucket), calls) in &rollup.latency {
        let id = dims_id(connection, &mut ids, dims)?;
        add_latency.execute(params![hour, id, bucket, calls])?;
    }
    let mut add_day = connection.prepare_cached(&ADD_DAY)?;
    for (DayKey { day, dim, value, category }, measures) in &rollup.days {
        let DayMeasures { calls, tokens: t, cost_usd, calls_without_cost, latency } = measures;
        add_day.execute(params![
            dim.as_str(),
            day,
            rollup::day_json(value.as_deref()),
            rollup::day_json(category.as_deref()),
            calls,
            t[0],
            t[1],
            t[2],
            t[3],
            t[4],
            cost_usd,
            calls_without_cost,
            latency.to_bytes()
        ])?;
    }
    Ok(())
}

/// Registers [`ADD_HISTOGRAMS`] on a writer's connection: the sum, bucket by
/// bucket, of two stored histograms (NULL counts as empty).
pub(super) fn register_functions(connection: &Connection) -> rusqlite::Result<()> {
    connection.create_scalar_function(
        ADD_HISTOGRAMS,
        2,
        FunctionFlags::SQLITE_UTF8 | FunctionFlags::SQLITE_DETERMINISTIC,
        |context| {
            let stored = |index: usize| -> rusqlite::Result<Histogram> {
                Ok(context
                    .get::<Option<Vec<u8>>>(index)?
                    .map_or_else(Histogram::default, |b| Histogram::from_bytes(&b)))
            };
            let mut sum = stored(0)?;
            sum.merge(&stored(1)?);
            Ok(sum.to_bytes())
        },
    )
}

/// The id naming `dims`, named first when new.
fn dims_id<'a>(connection: &Connection, ids: &mut HashMap<&'a Dims, i64>, dims: &'a Dims) -> rusqlite::Result<i64> {
    if let Some(id) = ids.get(dims) {
        return Ok(*id);
    }
    let signature = dims.signature();
    connection.prepare_cached(INSERT_DIMS)?.execute(params![
        signature,
        dims.key_id,
        dims.member,
        dims.team,
        dims.model,
        dims.provider,
        dims.deployment,
        dims.category
    ])?;
    let id = connection.prepare_cached(DIMS_ID)?.query_row([&signature], |row| row.get(0))?;
    ids.insert(dims, id);
    Ok(id)
}

/// Builds the roll-ups of every row already in the file (a file written
/// before roll-ups existed), inside the migration's transaction: one walk
/// of the holds and closings in order, with one index lookup each. Returns
/// the rows walked.
pub(super) fn build(connection: &Connection) -> rusqlite::Result<u64> {
    build_walking(connection, &format!("{} WHERE NOT {} ORDER BY seq", *ALL_COLUMNS, Kind::Open.is_sql("kind")), [])
}

/// [`build`] over the rows that `sql` (selecting [`ALL_COLUMNS`] in `seq`
/// order) reads with `params`.
fn build_walking(connection: &Connection, sql: &str, params: impl rusqlite::Params) -> rusqlite::Result<u64> {
    let mut statement = connection.prepare(sql)?;
    let mut rows = statement.query(params)?;
    let mut rollup = Rollup::default();
    let mut walked = 0;
    while let Some(found) = rows.next()? {
        let (seq, kind, CallId(call_id), body): (i64, String, CallId, Option<String>) =
            (found.get(0)?, found.get(1)?, found.get(2)?, found.get(16)?);
        let Some(row) = query::stored_row(found, &kind, &call_id, body.as_deref().unwrap_or_default())? else {
            continue;
        };
        rollup.apply(&row, &earlier(connection, &row, seq)?);
        walked += 1;
        if walked % BUILD_BATCH == 0 {
            write(connection, &std::mem::take(&mut rollup))?;
        }
    }
    write(connection, &rollup)?;
    Ok(walked)
}

/// Empties every roll-up table and builds them from the rows (a file whose
/// roll-ups lack a level, or whose rows they no longer sum).
pub(super) fn build_afresh(connection: &Connection) -> rusqlite::Result<u64> {
    connection.execute_batch(CLEAR)?;
    build(connection)
}

/// Builds the roll-ups afresh from the rows, in one transaction: when a
/// gateway starts on a ledger whose tail failed its anchor check
/// (`on_tampered = "start"`), the rows it goes on with are what budgets and
/// usage read, as they were before roll-ups. Returns the rows walked.
///
/// With segments released from the file (`released_until`: the newest
/// `at_ms` of their rows, never before a row's start), the hours up to the
/// newest released row's are kept as they are,
/// since they count released rows no walk can read again (a budget period
/// would otherwise lose their spend). The hours after it are built from the
/// rows started since; none of their calls has a released row, since every
/// row of a call carries the call's start. Their days are the kept hours of
/// the first day added up, then the walk's.
pub(super) fn rebuild(connection: &Connection, released_until: Option<i64>) -> rusqlite::Result<u64> {
    let transaction = connection.unchecked_transaction()?;
    let rows = match released_until {
        None => build_afresh(&transaction)?,
        Some(until) => build_from(&transaction, rollup::hour_of(until) + rollup::HOUR_MS)?,
    };
    transaction.commit()?;
    Ok(rows)
}

/// The roll-ups from the hour `from` on, built again from the rows started
/// since; the hours before it kept (see [`rebuild`]).
fn build_from(connection: &Connection, from: i64) -> rusqlite::Result<u64> {
    let day = rollup::day_of(from);
    connection.execute("DELETE FROM ledger_rollup WHERE hour_ms >= ?1", [from])?;
    connection.execute("DELETE FROM ledger_rollup_latency WHERE hour_ms >= ?1", [from])?;
    connection.execute("DELETE FROM ledger_rollup_day WHERE day_ms >= ?1", [day])?;
    write(connection, &days_of_hours(connection, day, from)?)?;
    let since = format!("{} WHERE NOT {} AND started_ms >= ?1 ORDER BY seq", *ALL_COLUMNS, Kind::Open.is_sql("kind"));
    build_walking(connection, &since, [from])
}

/// The day level of the stored hours from `from` until `until` (the day
/// level sums its hours' closed calls and latencies).
fn days_of_hours(connection: &Connection, from: i64, until: i64) -> rusqlite::Result<Rollup> {
    let mut rollup = Rollup::default();
    let mut hours = connection.prepare(&format!(
        "SELECT r.hour_ms, {DIMS_COLUMNS}, r.calls, r.input, r.output, r.cache_read, r.cache_write, r.reasoning,
            r.cost_usd, r.calls_without_cost
        FROM ledger_rollup r JOIN ledger_rollup_dims d ON d.id = r.dims
        WHERE r.hour_ms >= ?1 AND r.hour_ms < ?2 AND r.calls <> 0"
    ))?;
    let mut found = hours.query([from, until])?;
    while let Some(row) = found.next()? {
        let measures = Measures {
            calls: row.get(8)?,
            tokens: [row.get(9)?, row.get(10)?, row.get(11)?, row.get(12)?, row.get(13)?],
            cost_usd: row.get(14)?,
            calls_without_cost: row.get(15)?,
            ..Measures::default()
        };
        rollup.hour_in_days(row.get(0)?, &stored_dims(row)?, &measures);
    }
    let mut latencies = connection.prepare(&format!(
        "SELECT l.hour_ms, {DIMS_COLUMNS}, l.bucket, l.calls
        FROM ledger_rollup_latency l JOIN ledger_rollup_dims d ON d.id = l.dims
        WHERE l.hour_ms >= ?1 AND l.hour_ms < ?2"
    ))?;
    let mut found = latencies.query([from, until])?;
    while let Some(row) = found.next()? {
        rollup.latency_in_days(row.get(0)?, &stored_dims(row)?, row.get(8)?, row.get(9)?);
    }
    Ok(rollup)
}

/// The dims table's columns, read by [`stored_dims`] from column 1.
const DIMS_COLUMNS: &str = "d.key_id, d.member, d.team, d.model, d.provider, d.deployment, d.category";

fn stored_dims(row: &rusqlite::Row<'_>) -> rusqlite::Result<Dims> {
    Ok(Dims {
        key_id: row.get(1)?,
        member: row.get(2)?,
        team: row.get(3)?,
        model: row.get(4)?,
        provider: row.get(5)?,
        deployment: row.get(6)?,
        category: row.get(7)?,
    })
}
