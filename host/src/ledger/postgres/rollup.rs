//! The fleet table's roll-ups (`V6__rollups.sql`, `V7__rollup_days.sql`), changed by the rows a
//! shipper appends in the same transaction, as the file's are by
//! `rollup_store` (the same [`Rollup`] and upserts; here a dims set's
//! signature is written by PostgreSQL's `json_build_array`, as the
//! migration that built the roll-ups of older rows wrote it).

use std::collections::HashMap;
use std::sync::LazyLock;

use postgres::Transaction;
use postgres::types::ToSql;

use crate::ledger::query::Committed;
use crate::ledger::rollup::{self, DayKey, DayMeasures, Dims, Measures, Rollup};
use crate::ledger::rollup_store::{ADD_LATENCY, ADD_MEASURES, add_day};
use crate::ledger::store::{Kind, Row};

const SIGNATURE: &str = "json_build_array($1::text, $2::text, $3::text, $4::text, $5::text, $6::text, $7::text)::text";

/// The holds and closings already in the table of the calls of a batch.
const EARLIER: &str = "SELECT kind, call_id, at_ms, started_ms, key_id, member, team, model, category,
    input, output, cache_read, cache_write, reasoning, cost_usd, charged_worst
    FROM ledger WHERE call_id = ANY($1) AND kind <> 'open'";

/// Adds the change of `rows` (the batch's rows the table took, in order) to
/// the roll-ups; call it after inserting them, in their transaction.
pub(super) fn add(
    transaction: &mut Transaction<'_>,
    rows: &[&Committed],
    earlier_than_batch: HashMap<(i64, String), Vec<Row>>,
) -> Result<(), postgres::Error> {
    let mut history = earlier_than_batch;
    let mut rollup = Rollup::default();
    for committed in rows.iter().filter(|committed| committed.row.kind != Kind::Open) {
        let row = &committed.row;
        let earlier = history.entry((row.started_ms, row.call_id.clone())).or_default();
        rollup.apply(row, earlier);
        earlier.push(Row { body: String::new(), ..row.clone() });
    }
    write(transaction, &rollup)
}

/// The holds and closings in the table of the calls `rows` hold or close,
/// by (start, call): read before the batch is inserted.
pub(super) fn earlier(
    transaction: &mut Transaction<'_>,
    rows: &[Committed],
) -> Result<HashMap<(i64, String), Vec<Row>>, postgres::Error> {
    let calls: Vec<&str> = rows.iter().filter(|c| c.row.kind != Kind::Open).map(|c| c.row.call_id.as_str()).collect();
    let mut history: HashMap<(i64, String), Vec<Row>> = HashMap::new();
    if calls.is_empty() {
        return Ok(history);
    }
    for found in transaction.query(EARLIER, &[&calls])? {
        let Some(kind) = Kind::parse(found.try_get(0)?) else { continue };
        let count = |index: usize| found.try_get::<_, i64>(index).map(|count| u64::try_from(count).unwrap_or(0));
        let row = Row {
            kind,
            call_id: found.try_get(1)?,
            at_ms: found.try_get(2)?,
            started_ms: found.try_get(3)?,
            key_id: found.try_get(4)?,
            member: found.try_get(5)?,
            team: found.try_get(6)?,
            model: found.try_get(7)?,
            category: found.try_get(8)?,
            tokens: crate::record::Tokens {
                input: count(9)?,
                output: count(10)?,
                cache_read: count(11)?,
                cache_write: count(12)?,
                reasoning: count(13)?,
            },
            cost_usd: found.try_get(14)?,
            body: String::new(),
            charged_worst: found.try_get::<_, i32>(15)? != 0,
            served: None,
            stands_alone: false,
        };
        history.entry((row.started_ms, row.call_id.clone())).or_default().push(row);
    }
    Ok(history)
}

fn write(transaction: &mut Transaction<'_>, rollup: &Rollup) -> Result<(), postgres::Error> {
    if rollup.is_empty() {
        return Ok(());
    }
    let mut names = DimsNames::prepare(transaction)?;
    let add_measures = transaction.prepare(ADD_MEASURES)?;
    for ((hour, dims), measures) in &rollup.measures {
        let id = names.id(transaction, dims)?;
        let Measures { calls, tokens: t, cost_usd, calls_without_cost, charged_rows, charged: c, charged_cost_usd } =
            *measures;
        let values: [&(dyn ToSql + Sync); 17] = [
            hour,
            &id,
            &calls,
            &t[0],
            &t[1],
            &t[2],
            &t[3],
            &t[4],
            &cost_usd,
            &calls_without_cost,
            &charged_rows,
            &c[0],
            &c[1],
            &c[2],
            &c[3],
            &c[4],
            &charged_cost_usd,
        ];
        transaction.execute(&add_measures, &values)?;
    }
    let add_latency = transaction.prepare(ADD_LATENCY)?;
    for ((hour, dims, bucket), calls) in &rollup.latency {
        let id = names.id(transaction, dims)?;
        transaction.execute(&add_latency, &[hour, &id, bucket, calls])?;
    }
    let add_day = transaction.prepare(&ADD_DAY)?;
    for (DayKey { day, dim, value, category }, measures) in &rollup.days {
        let DayMeasures { calls, tokens: t, cost_usd, calls_without_cost, latency } = measures;
        let (dim, value, category, latency) =
            (dim.as_str(), rollup::day_json(value.as_deref()), rollup::day_json(category.as_deref()), latency.counts());
        let values: [&(dyn ToSql + Sync); 13] = [
            &dim,
            day,
            &value,
            &category,
            calls,
            &t[0],
            &t[1],
            &t[2],
            &t[3],
            &t[4],
            cost_usd,
            calls_without_cost,
            &latency,
        ];
        transaction.execute(&add_day, &values)?;
    }
    Ok(())
}

/// A day-level row changed by a batch's calls (`V7__rollup_days.sql`), the
/// histograms added bucket by bucket (the shorter one counting 0 past its end).
static ADD_DAY: LazyLock<String> = LazyLock::new(|| {
    add_day(
        "ARRAY(SELECT COALESCE(a, 0) + COALESCE(b, 0)
            FROM unnest(ledger_rollup_day.latency, excluded.latency) WITH ORDINALITY AS added(a, b, i) ORDER BY i)",
    )
});

/// The ids of the dims sets a batch touches, named when new.
struct DimsNames {
    insert: postgres::Statement,
    select: postgres::Statement,
    ids: HashMap<Dims, i64>,
}

impl DimsNames {
    fn prepare(transaction: &mut Transaction<'_>) -> Result<Self, postgres::Error> {
        Ok(Self {
            insert: transaction.prepare(&format!(
                "INSERT INTO ledger_rollup_dims (signature, key_id, member, team, model, provider, deployment, category)
                 VALUES ({SIGNATURE}, $1, $2, $3, $4, $5, $6, $7) ON CONFLICT (signature) DO NOTHING"
            ))?,
            select: transaction.prepare(&format!("SELECT id FROM ledger_rollup_dims WHERE signature = {SIGNATURE}"))?,
            ids: HashMap::new(),
        })
    }

    fn id(&mut self, transaction: &mut Transaction<'_>, dims: &Dims) -> Result<i64, postgres::Error> {
        if let Some(id) = self.ids.get(dims) {
            return Ok(*id);
        }
        let values: [&(dyn ToSql + Sync); 7] =
            [&dims.key_id, &dims.member, &dims.team, &dims.model, &dims.provider, &dims.deployment, &dims.category];
        transaction.execute(&self.insert, &values)?;
        let id = transaction.query_one(&self.select, &values)?.try_get(0)?;
        self.ids.insert(dims.clone(), id);
        Ok(id)
    }
}
