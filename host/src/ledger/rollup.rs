//! The ledger's hourly roll-ups: what `GET /v1/usage` and the budgets'
//! rebuild read instead of scanning every call's row.
//!
//! A roll-up row sums the rows of one hour (of the calls' start, UTC) and one
//! set of [`Dims`] (key, member, team, model, provider, deployment,
//! category): the closed calls (calls, the five token kinds, the known cost
//! and the calls without one) and what the budgets were charged (the rows
//! `sql.rs`'s `charged` selects, kept as they change: a hold counts until its
//! call closes at its usage, then it is taken back). Closed calls' latencies
//! (end minus start) go into a histogram of fixed log-scaled buckets
//! ([`latency_bucket`]).
//!
//! Beside the hours, a *day level* keeps one narrow row per grouping: per
//! UTC day, dimension ([`DayDim`]: member, key, team, model, provider,
//! deployment, or none), that dimension's value and the category, the
//! closed calls' sums and their whole latency histogram in one value
//! ([`Histogram`]). A usage query grouped by one dimension over a year reads
//! values × days × categories rows (50 members: ~36,500), not the hours'
//! cross product of every dimension (close to one row per call at a
//! realistic spread), and the latency comes with them rather than from a
//! table of one row per latency bucket. It holds what the usage queries
//! read; the budgets' charge stays at the hour level.
//!
//! The roll-ups change only in the transaction that inserts the rows they sum
//! (`store::insert_runs`, the shipper's for PostgreSQL), so no crash can
//! leave them apart. [`Rollup`] gathers one batch's changes in memory; each
//! store writes them with its own statements.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use super::store::{Kind, Row};
use crate::record::{CallRecord, Tokens};

/// An hour, in milliseconds.
pub(super) const HOUR_MS: i64 = 3_600_000;

/// A day (UTC), in milliseconds.
pub(super) const DAY_MS: i64 = 86_400_000;

/// Latency buckets a histogram holds (0 to [`LAST_BUCKET`]).
const BUCKETS: usize = 128;

/// Latency buckets per doubling: bucket `i` holds latencies up to
/// `2^(i / 4)` ms, so a percentile read back is at most 19 % above the
/// latency it stands for (`2^(1/4)` = 1.189).
const BUCKETS_PER_DOUBLING: f64 = 4.0;

/// The last bucket: `2^(127/4)` ms is ~40 days; anything longer lands in it.
pub(super) const LAST_BUCKET: i64 = 127;

/// The start of the hour holding `ms`.
pub(super) fn hour_of(ms: i64) -> i64 {
    ms - ms.rem_euclid(HOUR_MS)
}

/// The start of the (UTC) day holding `ms`.
pub(super) fn day_of(ms: i64) -> i64 {
    ms - ms.rem_euclid(DAY_MS)
}

/// The latency bucket of `ms` (0 for 1 ms and less).
pub(super) fn latency_bucket(ms: i64) -> i64 {
    if ms <= 1 {
        return 0;
    }
    // Latencies are far below 2^53 ms: the cast is exact.
    #[allow(clippy::cast_precision_loss, clippy::cast_possible_truncation)]
    let bucket = ((ms as f64).log2() * BUCKETS_PER_DOUBLING).ceil() as i64;
    bucket.clamp(0, LAST_BUCKET)
}

/// The largest latency bucket `bucket` holds, in ms: what a percentile in it reads as.
pub(super) fn bucket_upper_ms(bucket: i64) -> f64 {
    #[allow(clippy::cast_precision_loss)]
    let exponent = bucket as f64 / BUCKETS_PER_DOUBLING;
    (exponent.exp2() * 10.0).round() / 10.0
}

/// What a roll-up row is keyed by besides its hour. Holds carry the
/// caller and model only (no provider, deployment or category).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub(super) struct Dims {
    pub key_id: Option<String>,
    pub member: Option<String>,
    pub team: Option<String>,
    pub model: String,
    pub provider: Option<String>,
    pub deployment: Option<String>,
    pub category: Option<String>,
}

impl Dims {
    /// The dims as one text (a JSON array): what the dims table is unique
    /// on, since a UNIQUE over columns that may be NULL lets equal rows in.
    pub(super) fn signature(&self) -> String {
        let values =
            (&self.key_id, &self.member, &self.team, &self.model, &self.provider, &self.deployment, &self.category);
        serde_json::to_string(&values).unwrap_or_default()
    }

    /// A hold's dims: its caller and model.
    fn of_hold(row: &Row) -> Self {
        Self {
            key_id: row.key_id.clone(),
            member: row.member.clone(),
            team: row.team.clone(),
            model: row.model.clone(),
            provider: None,
            deployment: None,
            category: None,
        }
    }

    /// A closing row's dims: the provider and the last attempt's deployment
    /// as the row carries them ([`Row::served`]), or, in a row read back
    /// without them, from its body, as the row queries read them
    /// (`$.provider`, `$.attempts[#-1].deployment`).
    fn of_close(row: &Row) -> Self {
        let Served { provider, deployment } = match &row.served {
            Some(served) => served.clone(),
            None => Served::of_body(&row.body),
        };
        Self { provider, deployment, category: row.category.clone(), ..Self::of_hold(row) }
    }
}

/// A closed call's provider and its last attempt's deployment: the dims a
/// closing row's body holds beyond its columns.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub(super) struct Served {
    pub provider: Option<String>,
    pub deployment: Option<String>,
}

impl Served {
    /// Taken from the record the row is made of (no parse).
    pub(super) fn of_record(record: &CallRecord) -> Self {
        Self {
            provider: record.provider.clone(),
            deployment: record.attempts.last().and_then(|attempt| attempt.deployment.clone()),
        }
    }

    /// Read from a closing row's JSON body (nothing from one that does not parse).
    fn of_body(body: &str) -> Self {
        let body: ServedBody = serde_json::from_str(body).unwrap_or_default();
        Self {
            provider: body.provider,
            deployment: body.attempts.last().and_then(|attempt| attempt.deployment.clone()),
        }
    }
}

/// The part of a closing row's body the dims need.
#[derive(Debug, Default, Deserialize)]
struct ServedBody {
    #[serde(default)]
    provider: Option<String>,
    #[serde(default)]
    attempts: Vec<ServedAttempt>,
}

#[derive(Debug, Default, Deserialize)]
struct ServedAttempt {
    #[serde(default)]
    deployment: Option<String>,
}

/// One roll-up row's change: the closed calls' sums, and the budgets' charge.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(super) struct Measures {
    pub calls: i64,
    pub tokens: [i64; 5],
    pub cost_usd: f64,
    pub calls_without_cost: i64,
    /// Rows the charge counts (a hold taken back counts -1).
    pub charged_rows: i64,
    pub charged: [i64; 5],
    pub charged_cost_usd: f64,
}

/// Token counts as the roll-ups' five columns (far below 2^63).
pub(super) fn token_columns(tokens: &Tokens) -> [i64; 5] {
    let signed = |count: u64| i64::try_from(count).unwrap_or(i64::MAX);
    [
        signed(tokens.input),
        signed(tokens.output),
        signed(tokens.cache_read),
        signed(tokens.cache_write),
        signed(tokens.reasoning),
    ]
}

/// The dimension a day-level row groups by ([`DayKey`]); `All` groups
/// nothing (a query without a grouping). Stored by [`DayDim::as_str`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum DayDim {
    All,
    Member,
    Key,
    Team,
    Model,
    Provider,
    Deployment,
}

impl DayDim {
    const EVERY: [Self; 7] =
        [Self::All, Self::Member, Self::Key, Self::Team, Self::Model, Self::Provider, Self::Deployment];

    pub(super) fn as_str(self) -> &'static str {
        match self {
            Self::All => "all",
            Self::Member => "member",
            Self::Key => "key",
            Self::Team => "team",
            Self::Model => "model",
            Self::Provider => "provider",
            Self::Deployment => "deployment",
        }
    }

    /// `dims`' value of this dimension.
    fn value(self, dims: &Dims) -> Option<&String> {
        match self {
            Self::All => None,
            Self::Member => dims.member.as_ref(),
            Self::Key => dims.key_id.as_ref(),
            Self::Team => dims.team.as_ref(),
            Self::Model => Some(&dims.model),
            Self::Provider => dims.provider.as_ref(),
            Self::Deployment => dims.deployment.as_ref(),
        }
    }
}

/// A day-level row's value or category as stored: JSON (`null`, or a string).
pub(super) fn day_json(text: Option<&str>) -> String {
    serde_json::to_string(&text).unwrap_or_else(|_| "null".to_owned())
}

/// A stored day-level value or category read back (none from text that is
/// not a JSON string).
pub(super) fn day_text(stored: &str) -> Option<String> {
    serde_json::from_str(stored).ok().flatten()
}

/// A day-level row's key: the day, the dimension, its value and the category.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) struct DayKey {
    pub day: i64,
    pub dim: DayDim,
    pub value: Option<String>,
    pub category: Option<String>,
}

impl DayKey {
    /// The row of `dim` that `dims`' calls of `hour` count in.
    fn of(hour: i64, dim: DayDim, dims: &Dims) -> Self {
        Self { day: day_of(hour), dim, value: dim.value(dims).cloned(), category: dims.category.clone() }
    }
}

/// A day-level row's change: the closed calls' sums and their latencies.
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct DayMeasures {
    pub calls: i64,
    pub tokens: [i64; 5],
    pub cost_usd: f64,
    pub calls_without_cost: i64,
    pub latency: Histogram,
}

/// Calls per latency bucket, stored as one value: little-endian `i64`
/// counts, one per bucket from 0 up to the last that holds a call (a
/// year's calls of one member on one day in ~60 buckets: ~480 bytes).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Histogram(Vec<i64>);

impl Histogram {
    pub(super) fn add(&mut self, bucket: i64, calls: i64) {
        let index = usize::try_from(bucket.clamp(0, LAST_BUCKET)).unwrap_or(0);
        if self.0.len() <= index {
            self.0.resize(index + 1, 0);
        }
        self.0[index] += calls;
    }

    /// Adds every bucket of `other`.
    pub(super) fn merge(&mut self, other: &Self) {
        for (bucket, calls) in other.buckets() {
            self.add(bucket, calls);
        }
    }

    /// The buckets holding calls, in order: (bucket, calls).
    pub(super) fn buckets(&self) -> impl Iterator<Item = (i64, i64)> + '_ {
        (0_i64..).zip(self.0.iter().copied()).filter(|(_, calls)| *calls != 0)
    }

    /// The counts, one per bucket from 0 (the fleet table's array).
    pub(super) fn counts(&self) -> &[i64] {
        &self.0
    }

    /// Counts read back from [`Self::counts`] (beyond the last bucket left out).
    pub(super) fn from_counts(mut counts: Vec<i64>) -> Self {
        counts.truncate(BUCKETS);
        Self(counts)
    }

    pub(super) fn to_bytes(&self) -> Vec<u8> {
        self.0.iter().flat_map(|calls| calls.to_le_bytes()).collect()
    }

    /// A stored histogram; bytes past the last whole count, or beyond the
    /// last bucket, are not counts and are left out.
    pub(super) fn from_bytes(bytes: &[u8]) -> Self {
        let counts = bytes.chunks_exact(8).take(BUCKETS);
        Self(counts.map(|count| i64::from_le_bytes(count.try_into().unwrap_or_default())).collect())
    }
}

/// One batch's changes to the roll-ups, gathered before they are written.
#[derive(Debug, Default)]
pub(super) struct Rollup {
    pub measures: HashMap<(i64, Dims), Measures>,
    /// Calls per (hour, dims, latency bucket).
    pub latency: HashMap<(i64, Dims, i64), i64>,
    /// The day level's changes.
    pub days: HashMap<DayKey, DayMeasures>,
}

impl Rollup {
    /// Whether nothing changed.
    pub(super) fn is_empty(&self) -> bool {
        self.measures.is_empty() && self.latency.is_empty() && self.days.is_empty()
    }

    /// Adds `row`'s change; `earlier`: the rows of its call before it that
    /// are holds or closings (how a charge changes depends on them).
    pub(super) fn apply(&mut self, row: &Row, earlier: &[Row]) {
        let closed_at_usage = |row: &Row| row.kind == Kind::Close && !row.charged_worst;
        let already_closed = earlier.iter().any(closed_at_usage);
        match row.kind {
            Kind::Open => {}
            Kind::Hold if already_closed => {}
            Kind::Hold => self.charge(row, 1),
            Kind::Close => {
                self.close(row);
                if !row.charged_worst && !already_closed {
                    for hold in earlier.iter().filter(|earlier| earlier.kind == Kind::Hold) {
                        self.charge(hold, -1);
                    }
                }
            }
        }
    }

    fn close(&mut self, row: &Row) {
        let hour = hour_of(row.started_ms);
        let dims = Dims::of_close(row);
        let tokens = token_columns(&row.tokens);
        let measures = self.measures.entry((hour, dims.clone())).or_default();
        measures.calls += 1;
        add(&mut measures.tokens, &tokens, 1);
        measures.cost_usd += row.cost_usd.unwrap_or(0.0);
        measures.calls_without_cost += i64::from(row.cost_usd.is_none());
        if !row.charged_worst {
            measures.charged_rows += 1;
            add(&mut measures.charged, &tokens, 1);
            measures.charged_cost_usd += row.cost_usd.unwrap_or(0.0);
        }
        let bucket = latency_bucket(row.at_ms - row.started_ms);
        self.close_in_day(row, &dims, &tokens, bucket);
        *self.latency.entry((hour, dims, bucket)).or_default() += 1;
    }

    /// A closed call's change to its day's row of every dimension.
    fn close_in_day(&mut self, row: &Row, dims: &Dims, tokens: &[i64; 5], bucket: i64) {
        let closed = Measures {
            calls: 1,
            tokens: *tokens,
            cost_usd: row.cost_usd.unwrap_or(0.0),
            calls_without_cost: i64::from(row.cost_usd.is_none()),
            ..Measures::default()
        };
        let hour = hour_of(row.started_ms);
        self.hour_in_days(hour, dims, &closed);
        self.latency_in_days(hour, dims, bucket, 1);
    }

    /// An hour's closed calls (`measures` of the hour starting at `hour`;
    /// its charge is not the day level's) added to its day's row of every
    /// dimension: the day level is the sum of its hours.
    pub(super) fn hour_in_days(&mut self, hour: i64, dims: &Dims, measures: &Measures) {
        for dim in DayDim::EVERY {
            let day = self.days.entry(DayKey::of(hour, dim, dims)).or_default();
            day.calls += measures.calls;
            add(&mut day.tokens, &measures.tokens, 1);
            day.cost_usd += measures.cost_usd;
            day.calls_without_cost += measures.calls_without_cost;
        }
    }

    /// An hour's `calls` in latency `bucket` added to its day's histograms.
    pub(super) fn latency_in_days(&mut self, hour: i64, dims: &Dims, bucket: i64, calls: i64) {
        for dim in DayDim::EVERY {
            self.days.entry(DayKey::of(hour, dim, dims)).or_default().latency.add(bucket, calls);
        }
    }

    /// Counts a hold's worst case towards the charge (`sign` 1), or takes it back (-1).
    fn charge(&mut self, hold: &Row, sign: i64) {
        let measures = self.measures.entry((hour_of(hold.started_ms), Dims::of_hold(hold))).or_default();
        measures.charged_rows += sign;
        add(&mut measures.charged, &token_columns(&hold.tokens), sign);
        #[allow(clippy::cast_precision_loss)]
        let signed_cost = hold.cost_usd.unwrap_or(0.0) * sign as f64;
        measures.charged_cost_usd += signed_cost;
    }
}

fn add(sums: &mut [i64; 5], tokens: &[i64; 5], sign: i64) {
    for (sum, count) in sums.iter_mut().zip(tokens) {
        *sum += count * sign;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latency_buckets_are_log_scaled_and_read_back_within_19_percent() {
        assert_eq!(latency_bucket(-5), 0);
        assert_eq!(latency_bucket(1), 0);
        assert_eq!(latency_bucket(2), 4);
        assert_eq!(latency_bucket(1024), 40);
        assert_eq!(latency_bucket(i64::MAX), LAST_BUCKET);
        for ms in [2_i64, 3, 7, 100, 999, 1234, 60_000, 3_600_000] {
            let upper = bucket_upper_ms(latency_bucket(ms));
            #[allow(clippy::cast_precision_loss)]
            let ms = ms as f64;
            assert!(upper >= ms - 0.05 && upper <= ms * 1.19 + 0.05, "{ms} ms reads as {upper}");
        }
    }

    #[test]
    fn a_histogram_reads_back_as_stored_and_adds_bucket_by_bucket() {
        let mut histogram = Histogram::default();
        histogram.add(3, 2);
        histogram.add(40, 1);
        histogram.add(LAST_BUCKET + 9, 1);
        let stored = Histogram::from_bytes(&histogram.to_bytes());
        assert_eq!(stored, histogram);
        assert_eq!(stored.buckets().collect::<Vec<_>>(), [(3, 2), (40, 1), (LAST_BUCKET, 1)]);
        let mut more = Histogram::default();
        more.add(3, 5);
        more.merge(&stored);
        assert_eq!(more.buckets().collect::<Vec<_>>(), [(3, 7), (40, 1), (LAST_BUCKET, 1)]);
        // A value cut short keeps its whole counts only.
        let bytes = stored.to_bytes();
        assert_eq!(Histogram::from_bytes(&bytes[..8 * 4 + 3]).buckets().collect::<Vec<_>>(), [(3, 2)]);
        assert_eq!(Histogram::from_bytes(&[]), Histogram::default());
    }

    #[test]
    fn days_start_at_midnight_utc() {
        assert_eq!(day_of(DAY_MS + 5), DAY_MS);
        assert_eq!(day_of(-1), -DAY_MS);
    }

    #[test]
    fn hours_start_on_the_hour() {
        assert_eq!(hour_of(0), 0);
        assert_eq!(hour_of(HOUR_MS - 1), 0);
        assert_eq!(hour_of(HOUR_MS), HOUR_MS);
        assert_eq!(hour_of(-1), -HOUR_MS);
    }
}
