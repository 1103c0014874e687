//! How a usage query or a budget's period sum is answered: the whole days
//! of its range from the roll-ups' day level when the query can be read
//! there, the whole hours outside them from the hour level
//! ([`super::rollup`]), the partial hours at its edges from the raw rows,
//! and the parts merged. Both stores (the file, the fleet's table) run the
//! queries [`Plan`] makes in one snapshot and hand the rows back to
//! [`assemble`] and [`merge_spend`].

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::query::{Bucket, CallerSpend, Filter, Group, Latency, Point, Sums, Totals, UsageQuery};
use super::rollup::{self, DAY_MS, HOUR_MS, Histogram};
use super::sql::{self, Dialect, Query, Span};
use crate::record::Tokens;

/// Where a query's answer comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Plan {
    /// The whole days, read from the day level (`None`: none).
    pub days: Option<Span>,
    /// The whole hours (outside the days), read from the hour level.
    pub hours: Vec<Span>,
    /// The rest, read from the rows.
    pub raw: Vec<Span>,
}

/// The queries that answer a usage query: sums shaped as [`SumRow`],
/// latencies as [`LatencyRow`], and the day level's rows as [`DayRow`].
#[derive(Debug, Default)]
pub(super) struct UsageQueries {
    pub sums: Vec<Query>,
    pub latency: Vec<Query>,
    pub days: Option<Query>,
}

impl Plan {
    /// `span` split at its whole hours.
    pub(super) fn of(span: Span) -> Self {
        let (rolled, raw) = split(span, HOUR_MS);
        Self { days: None, hours: rolled.into_iter().collect(), raw }
    }

    /// The plan of `query` over `span` (its range as read: [`read_span`]):
    /// [`Plan::of`] the span, its whole days read from the day level when
    /// the store keeps one (`day_level`) and the day level holds what the
    /// query asks: no filter on a member, key or model (the day level keeps
    /// one dimension per row) and no hour buckets.
    pub(super) fn for_usage(query: &UsageQuery, span: Span, day_level: bool) -> Self {
        let plan = Self::of(span);
        // Every field named: a filter added later must be placed here.
        let Filter { member, key_id, model, category: _, since: _, until: _ } = &query.filter;
        let by_day = member.is_none() && key_id.is_none() && model.is_none();
        if !day_level || !by_day || query.bucket == Some(Bucket::Hour) {
            return plan;
        }
        let [hours] = plan.hours.as_slice() else { return plan };
        let (days, hours) = split(*hours, DAY_MS);
        match days {
            Some(days) => Self { days: Some(days), hours, raw: plan.raw },
            None => plan,
        }
    }

    /// `span` read from the rows alone (the baseline the roll-ups are held to).
    pub(super) fn rows_only(span: Span) -> Self {
        Self { days: None, hours: Vec::new(), raw: vec![span] }
    }

    /// The queries that answer `query`.
    pub(super) fn usage_queries(&self, query: &UsageQuery, dialect: Dialect) -> UsageQueries {
        let mut sums: Vec<Query> = self.raw.iter().map(|span| sql::row_sums(query, *span, dialect)).collect();
        let mut latency = Vec::new();
        for span in &self.hours {
            sums.push(sql::rollup_sums(query, *span, dialect));
            latency.push(sql::rollup_latency(query, *span, dialect));
        }
        let days = self.days.map(|span| sql::day_rows(query, span, dialect));
        UsageQueries { sums, latency, days }
    }

    /// The queries (rows shaped as [`CallerSpend`]) that answer a budget's
    /// period sum from `since` on.
    pub(super) fn spend_queries(&self, cut_off_holds: bool, dialect: Dialect) -> Vec<Query> {
        let mut queries: Vec<Query> =
            self.raw.iter().map(|span| sql::spend_by_caller_in(*span, cut_off_holds, dialect)).collect();
        for Span { from, .. } in &self.hours {
            queries.push(sql::rollup_spend_by_caller(from.unwrap_or(0), cut_off_holds, dialect));
        }
        queries
    }
}

/// The range a usage query is read over: its own, or left open at its end
/// when no row starts at or after that end (`any_row` runs
/// [`sql::any_row_from`] in the snapshot the query is answered in). Both
/// ranges hold the same rows, but the open one reads its last, partial hour
/// from the roll-ups instead of row by row: a range ending now read the hour
/// in progress from the rows (4.4 s with a million calls in that hour).
pub(super) fn read_span<E>(
    filter: &Filter,
    dialect: Dialect,
    any_row: impl FnOnce(Query) -> Result<bool, E>,
) -> Result<Span, E> {
    let span = Span::of(filter);
    let Some(to) = span.to else { return Ok(span) };
    match any_row(sql::any_row_from(to, dialect))? {
        true => Ok(span),
        false => Ok(Span { to: None, ..span }),
    }
}

/// `span` split at the whole units of `width` (an hour, a day) it holds:
/// the span of whole units (`None`: none), and the parts before and after.
fn split(span: Span, width: i64) -> (Option<Span>, Vec<Span>) {
    let start_of = |ms: i64| ms - ms.rem_euclid(width);
    let from = span.from.map(|from| start_of(from + width - 1));
    let to = span.to.map(start_of);
    if let (Some(from), Some(to)) = (from, to)
        && from >= to
    {
        return (None, vec![span]);
    }
    let mut rest = Vec::new();
    if let (Some(start), Some(from)) = (span.from, from)
        && start < from
    {
        rest.push(Span { from: Some(start), to: Some(from) });
    }
    if let (Some(end), Some(to)) = (span.to, to)
        && to < end
    {
        rest.push(Span { from: Some(to), to: Some(end) });
    }
    (Some(Span { from, to }), rest)
}

/// A row of a sums query: the bucket's start, the group's value, the
/// category, the latency (ms, raw rows only) and the sums.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct SumRow {
    pub bucket: Option<i64>,
    pub group: Option<String>,
    pub category: Option<String>,
    pub latency_ms: Option<i64>,
    pub calls: u64,
    pub tokens: Tokens,
    pub cost_usd: f64,
    pub calls_without_cost: u64,
}

/// A row of a latency query: calls in one latency bucket.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct LatencyRow {
    pub bucket: Option<i64>,
    pub group: Option<String>,
    pub latency_bucket: i64,
    pub calls: u64,
}

/// A row of the day level's query ([`sql::day_rows`]): one (day, value,
/// category), with the value and the category as stored (JSON).
#[derive(Debug, Clone, PartialEq)]
pub(super) struct DayRow {
    pub bucket: Option<i64>,
    pub value: String,
    pub category: String,
    pub calls: u64,
    pub tokens: Tokens,
    pub cost_usd: f64,
    pub calls_without_cost: u64,
    pub latency: Histogram,
}

/// One bucket's and group's sums as they are gathered.
#[derive(Debug, Default, Clone)]
struct Tally {
    totals: Totals,
    latency: Histogram,
}

impl Tally {
    fn add_sums(&mut self, row: &SumRow) {
        let totals = &mut self.totals;
        totals.calls += row.calls;
        add_tokens(&mut totals.tokens, &row.tokens);
        totals.cost_usd += row.cost_usd;
        totals.calls_without_cost += row.calls_without_cost;
        if let Some(category) = row.category.as_deref().filter(|category| *category != "ok") {
            *totals.errors.entry(category.to_owned()).or_default() += row.calls;
        }
        if let Some(latency) = row.latency_ms {
            self.latency.add(rollup::latency_bucket(latency), signed(row.calls));
        }
    }

    fn add_day(&mut self, row: &DayRow, category: Option<&str>) {
        let totals = &mut self.totals;
        totals.calls += row.calls;
        add_tokens(&mut totals.tokens, &row.tokens);
        totals.cost_usd += row.cost_usd;
        totals.calls_without_cost += row.calls_without_cost;
        if let Some(category) = category.filter(|category| *category != "ok") {
            *totals.errors.entry(category.to_owned()).or_default() += row.calls;
        }
        self.latency.merge(&row.latency);
    }

    fn merge(&mut self, other: &Tally) {
        let totals = &mut self.totals;
        totals.calls += other.totals.calls;
        add_tokens(&mut totals.tokens, &other.totals.tokens);
        totals.cost_usd += other.totals.cost_usd;
        totals.calls_without_cost += other.totals.calls_without_cost;
        for (category, calls) in &other.totals.errors {
            *totals.errors.entry(category.clone()).or_default() += calls;
        }
        self.latency.merge(&other.latency);
    }

    fn finish(mut self) -> Totals {
        self.totals.latency_ms = Latency { p50: percentile(&self.latency, 50), p99: percentile(&self.latency, 99) };
        self.totals
    }
}

fn add_tokens(sum: &mut Tokens, more: &Tokens) {
    sum.input += more.input;
    sum.output += more.output;
    sum.cache_read += more.cache_read;
    sum.cache_write += more.cache_write;
    sum.reasoning += more.reasoning;
}

/// A count as a histogram's (far below 2^63).
fn signed(count: u64) -> i64 {
    i64::try_from(count).unwrap_or(i64::MAX)
}

/// The `percent`th percentile of `histogram`: the upper bound of the
/// bucket holding it (`None` without calls).
fn percentile(histogram: &Histogram, percent: i64) -> Option<f64> {
    let calls: i64 = histogram.buckets().map(|(_, calls)| calls).sum();
    let rank = ((calls * percent + 99) / 100).max(1);
    let mut seen = 0;
    histogram.buckets().find_map(|(bucket, count)| {
        seen += count;
        (seen >= rank).then(|| rollup::bucket_upper_ms(bucket))
    })
}

/// The answer to `query` from the rows of its plan's queries.
pub(super) fn assemble(query: &UsageQuery, sums: &[SumRow], latency: &[LatencyRow], days: &[DayRow]) -> Sums {
    let mut tallies: HashMap<(Option<i64>, Option<String>), Tally> = HashMap::new();
    for row in sums {
        tallies.entry((row.bucket, row.group.clone())).or_default().add_sums(row);
    }
    for row in latency {
        let tally = tallies.entry((row.bucket, row.group.clone())).or_default();
        tally.latency.add(row.latency_bucket, signed(row.calls));
    }
    for row in days {
        let category = rollup::day_text(&row.category);
        tallies.entry((row.bucket, rollup::day_text(&row.value))).or_default().add_day(row, category.as_deref());
    }
    let mut total = Tally::default();
    let mut by_group: BTreeMap<Option<String>, Tally> = BTreeMap::new();
    let mut by_bucket: BTreeMap<i64, (Tally, BTreeMap<Option<String>, Tally>)> = BTreeMap::new();
    for ((bucket, group), tally) in tallies {
        total.merge(&tally);
        if query.group_by.is_some() {
            by_group.entry(group.clone()).or_default().merge(&tally);
        }
        if let Some(bucket) = bucket {
            let (bucket_total, bucket_groups) = by_bucket.entry(bucket).or_default();
            bucket_total.merge(&tally);
            if query.group_by.is_some() {
                bucket_groups.entry(group).or_default().merge(&tally);
            }
        }
    }
    let groups = |tallies: BTreeMap<Option<String>, Tally>| -> Vec<Group> {
        let Some(by) = query.group_by else { return Vec::new() };
        tallies.into_iter().map(|(value, tally)| Group { by, value, totals: tally.finish() }).collect()
    };
    let series = query.bucket.map(|_| {
        by_bucket
            .into_iter()
            .map(|(start, (tally, bucket_groups))| Point {
                start: at_ms(start),
                total: tally.finish(),
                groups: groups(bucket_groups),
            })
            .collect()
    });
    Sums { groups: groups(by_group), total: total.finish(), series }
}

/// Milliseconds since the epoch as a time.
fn at_ms(ms: i64) -> SystemTime {
    UNIX_EPOCH + Duration::from_millis(u64::try_from(ms).unwrap_or(0))
}

/// A caller: key, member and team.
type Caller = (Option<String>, Option<String>, Option<String>);

/// The callers' spend from the rows of a plan's spend queries, one per
/// (key, member, team).
pub(super) fn merge_spend(rows: Vec<CallerSpend>) -> Vec<CallerSpend> {
    let mut merged: BTreeMap<Caller, (Tokens, f64)> = BTreeMap::new();
    for row in rows {
        let (tokens, cost) = merged.entry((row.key_id, row.member, row.team)).or_default();
        add_tokens(tokens, &row.tokens);
        *cost += row.cost_usd;
    }
    merged
        .into_iter()
        .map(|((key_id, member, team), (tokens, cost_usd))| CallerSpend { key_id, member, team, tokens, cost_usd })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const H: i64 = HOUR_MS;

    #[test]
    fn a_range_splits_at_its_whole_hours() {
        let plan = Plan::of(Span { from: Some(H + 5), to: Some(4 * H + 7) });
        assert_eq!(plan.hours, [Span { from: Some(2 * H), to: Some(4 * H) }]);
        assert_eq!(
            plan.raw,
            [Span { from: Some(H + 5), to: Some(2 * H) }, Span { from: Some(4 * H), to: Some(4 * H + 7) }]
        );
        let aligned = Plan::of(Span { from: Some(H), to: Some(3 * H) });
        assert_eq!((aligned.hours, aligned.raw), (vec![Span { from: Some(H), to: Some(3 * H) }], vec![]));
        let unbounded = Plan::of(Span::default());
        assert_eq!((unbounded.hours, unbounded.raw), (vec![Span::default()], vec![]));
        let within_an_hour = Span { from: Some(H + 1), to: Some(2 * H - 1) };
        assert_eq!(Plan::of(within_an_hour), Plan::rows_only(within_an_hour));
        let across_one_edge = Span { from: Some(H + 1), to: Some(2 * H + 1) };
        assert_eq!(Plan::of(across_one_edge), Plan::rows_only(across_one_edge));
    }

    fn usage(filter: Filter, bucket: Option<Bucket>) -> UsageQuery {
        UsageQuery { filter, group_by: None, bucket }
    }

    fn planned(query: UsageQuery, day_level: bool) -> Plan {
        Plan::for_usage(&query, Span::of(&query.filter), day_level)
    }

    fn range(from: i64, to: i64) -> Filter {
        let at = |ms: i64| UNIX_EPOCH + Duration::from_millis(u64::try_from(ms).unwrap());
        Filter { since: Some(at(from)), until: Some(at(to)), ..Default::default() }
    }

    #[test]
    fn a_range_reads_its_whole_days_from_the_day_level_when_it_can() {
        const D: i64 = DAY_MS;
        let plan = planned(usage(range(D - H - 5, 3 * D + 2 * H + 7), None), true);
        assert_eq!(plan.days, Some(Span { from: Some(D), to: Some(3 * D) }));
        assert_eq!(
            plan.hours,
            [Span { from: Some(D - H), to: Some(D) }, Span { from: Some(3 * D), to: Some(3 * D + 2 * H) }]
        );
        assert_eq!(
            plan.raw,
            [
                Span { from: Some(D - H - 5), to: Some(D - H) },
                Span { from: Some(3 * D + 2 * H), to: Some(3 * D + 2 * H + 7) }
            ]
        );
        let unbounded = planned(usage(Default::default(), Some(Bucket::Day)), true);
        assert_eq!((unbounded.days, unbounded.hours, unbounded.raw), (Some(Span::default()), vec![], vec![]));
        // No whole day, hour buckets, a filter the day level does not keep, or a store without it: hours.
        let within_a_day = range(D + H, 2 * D - H);
        assert_eq!(planned(usage(within_a_day.clone(), None), true), Plan::of(Span::of(&within_a_day)));
        let year = range(0, 365 * D);
        assert_eq!(planned(usage(year.clone(), Some(Bucket::Hour)), true), Plan::of(Span::of(&year)));
        let one_member = Filter { member: Some("ana".to_owned()), ..year.clone() };
        assert_eq!(planned(usage(one_member, None), true), Plan::of(Span::of(&year)));
        assert_eq!(planned(usage(year.clone(), None), false), Plan::of(Span::of(&year)));
        let one_category = Filter { category: Some("ok".to_owned()), ..year };
        assert_eq!(planned(usage(one_category, None), true).days, Some(Span { from: Some(0), to: Some(365 * D) }));
    }

    #[test]
    fn a_range_ending_where_no_row_starts_is_read_open_ended() {
        let ending_mid_hour = range(H, 3 * H + 7);
        let read = |rows_from_end: bool| {
            let mut asked = None;
            let span = read_span(&ending_mid_hour, Dialect::Sqlite, |query| {
                asked = Some(query.params);
                Ok::<_, ()>(rows_from_end)
            });
            (span.unwrap(), asked)
        };
        let end = Some(vec![sql::Param::Integer(3 * H + 7)]);
        assert_eq!(read(true), (Span { from: Some(H), to: Some(3 * H + 7) }, end.clone()));
        assert_eq!(read(false), (Span { from: Some(H), to: None }, end));
        // Open-ended, the partial last hour is a whole hour of the roll-ups.
        let query = usage(ending_mid_hour.clone(), None);
        assert_eq!(Plan::for_usage(&query, read(true).0, true).raw, [Span { from: Some(3 * H), to: Some(3 * H + 7) }]);
        assert_eq!(Plan::for_usage(&query, read(false).0, true).raw, []);
        // With an end the store is asked (its error is the answer); without one, nothing is.
        let open = read_span(&range(H, 2 * H), Dialect::Sqlite, |_| Err("asked"));
        assert_eq!(open, Err("asked"));
        let unbounded = read_span(&Filter::default(), Dialect::Sqlite, |_| Err("asked"));
        assert_eq!(unbounded, Ok(Span::default()));
    }

    #[test]
    fn percentiles_read_the_bucket_holding_the_rank() {
        let mut histogram = Histogram::default();
        histogram.add(0, 98);
        histogram.add(40, 1);
        histogram.add(80, 1);
        assert_eq!(percentile(&histogram, 50), Some(1.0));
        assert_eq!(percentile(&histogram, 99), Some(1024.0));
        assert_eq!(percentile(&Histogram::default(), 99), None);
    }
}
