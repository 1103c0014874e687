//! How a usage query or a budget's period sum is answered: the whole hours
//! of its range from the roll-ups ([`super::rollup`]), the partial hours at
//! its edges from the raw rows, and the two merged. Both stores (the file,
//! the fleet's table) run the queries [`Plan`] makes in one snapshot and
//! hand the rows back to [`assemble`] and [`merge_spend`].

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::query::{CallerSpend, Group, Latency, Point, Sums, Totals, UsageQuery};
use super::rollup::{self, HOUR_MS};
use super::sql::{self, Dialect, Query, Span};
use crate::record::Tokens;

/// Where a query's answer comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Plan {
    /// The whole hours, read from the roll-ups (`None`: none in the range).
    pub rolled: Option<Span>,
    /// The rest, read from the rows.
    pub raw: Vec<Span>,
}

impl Plan {
    /// `span` split at its whole hours.
    pub(super) fn of(span: Span) -> Self {
        let from = span.from.map(|from| rollup::hour_of(from + HOUR_MS - 1));
        let to = span.to.map(rollup::hour_of);
        if let (Some(from), Some(to)) = (from, to)
            && from >= to
        {
            return Self { rolled: None, raw: vec![span] };
        }
        let mut raw = Vec::new();
        if let (Some(start), Some(from)) = (span.from, from)
            && start < from
        {
            raw.push(Span { from: Some(start), to: Some(from) });
        }
        if let (Some(end), Some(to)) = (span.to, to)
            && to < end
        {
            raw.push(Span { from: Some(to), to: Some(end) });
        }
        Self { rolled: Some(Span { from, to }), raw }
    }

    /// `span` read from the rows alone (the baseline the roll-ups are held to).
    pub(super) fn rows_only(span: Span) -> Self {
        Self { rolled: None, raw: vec![span] }
    }

    /// The sums queries (rows shaped as [`SumRow`]) and the latency queries
    /// (shaped as [`LatencyRow`]) that answer `query`.
    pub(super) fn usage_queries(&self, query: &UsageQuery, dialect: Dialect) -> (Vec<Query>, Vec<Query>) {
        let mut sums: Vec<Query> = self.raw.iter().map(|span| sql::row_sums(query, *span, dialect)).collect();
        let mut latency = Vec::new();
        if let Some(span) = self.rolled {
            sums.push(sql::rollup_sums(query, span, dialect));
            latency.push(sql::rollup_latency(query, span, dialect));
        }
        (sums, latency)
    }

    /// The queries (rows shaped as [`CallerSpend`]) that answer a budget's
    /// period sum from `since` on.
    pub(super) fn spend_queries(&self, cut_off_holds: bool, dialect: Dialect) -> Vec<Query> {
        let mut queries: Vec<Query> =
            self.raw.iter().map(|span| sql::spend_by_caller_in(*span, cut_off_holds, dialect)).collect();
        if let Some(Span { from, .. }) = self.rolled {
            queries.push(sql::rollup_spend_by_caller(from.unwrap_or(0), cut_off_holds, dialect));
        }
        queries
    }
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

/// One bucket's and group's sums as they are gathered.
#[derive(Debug, Default, Clone)]
struct Tally {
    totals: Totals,
    latency: BTreeMap<i64, u64>,
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
            *self.latency.entry(rollup::latency_bucket(latency)).or_default() += row.calls;
        }
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
        for (bucket, calls) in &other.latency {
            *self.latency.entry(*bucket).or_default() += calls;
        }
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

/// The `percent`th percentile of `histogram`: the upper bound of the
/// bucket holding it (`None` without calls).
fn percentile(histogram: &BTreeMap<i64, u64>, percent: u64) -> Option<f64> {
    let calls: u64 = histogram.values().sum();
    let rank = (calls * percent).div_ceil(100).max(1);
    let mut seen = 0;
    histogram.iter().find_map(|(bucket, count)| {
        seen += count;
        (seen >= rank).then(|| rollup::bucket_upper_ms(*bucket))
    })
}

/// The answer to `query` from the rows of its plan's queries.
pub(super) fn assemble(query: &UsageQuery, sums: &[SumRow], latency: &[LatencyRow]) -> Sums {
    let mut tallies: HashMap<(Option<i64>, Option<String>), Tally> = HashMap::new();
    for row in sums {
        tallies.entry((row.bucket, row.group.clone())).or_default().add_sums(row);
    }
    for row in latency {
        let tally = tallies.entry((row.bucket, row.group.clone())).or_default();
        *tally.latency.entry(row.latency_bucket).or_default() += row.calls;
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
        assert_eq!(plan.rolled, Some(Span { from: Some(2 * H), to: Some(4 * H) }));
        assert_eq!(
            plan.raw,
            [Span { from: Some(H + 5), to: Some(2 * H) }, Span { from: Some(4 * H), to: Some(4 * H + 7) }]
        );
        let aligned = Plan::of(Span { from: Some(H), to: Some(3 * H) });
        assert_eq!((aligned.rolled, aligned.raw), (Some(Span { from: Some(H), to: Some(3 * H) }), vec![]));
        let unbounded = Plan::of(Span::default());
        assert_eq!((unbounded.rolled, unbounded.raw), (Some(Span::default()), vec![]));
        let within_an_hour = Span { from: Some(H + 1), to: Some(2 * H - 1) };
        assert_eq!(Plan::of(within_an_hour), Plan::rows_only(within_an_hour));
        let across_one_edge = Span { from: Some(H + 1), to: Some(2 * H + 1) };
        assert_eq!(Plan::of(across_one_edge), Plan::rows_only(across_one_edge));
    }

    #[test]
    fn percentiles_read_the_bucket_holding_the_rank() {
        let histogram = BTreeMap::from([(0, 98), (40, 1), (80, 1)]);
        assert_eq!(percentile(&histogram, 50), Some(1.0));
        assert_eq!(percentile(&histogram, 99), Some(1024.0));
        assert_eq!(percentile(&BTreeMap::new(), 99), None);
    }
}
