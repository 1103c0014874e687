//! The ledger's roll-ups: `/v1/usage`'s reads (grouped by member, by model,
//! a day series over the whole range, and the console's usage page as it
//! opens) answered from the roll-ups against the same reads from the raw
//! rows, in the same run, at each size in `WEIR_ROLLUP_BENCH_CALLS` (default
//! `1000000,10000000`) and for two spreads ([`Spread`]); each level's rows;
//! the append's rows per second with the roll-ups' upkeep off, on with rows
//! unmarked (every body parsed again, every call's earlier rows looked up)
//! and on with rows marked as the ledger marks them; up to 2 M calls,
//! `weir ledger verify`'s rows per second and a version 3 file's upgrade;
//! first, compact rows against rows stored as text (`WEIR_COMPACTION_BENCH_ROWS`,
//! default 500,000): append rate, bytes a row, verify rate. An empty
//! `WEIR_ROLLUP_BENCH_CALLS` runs the first two parts alone.
//! Above 2 M calls the rows are stored without their bodies (the reads
//! measured never open one; the chain then does not verify).
//! The files are built by appending closing rows straight into SQLite (no
//! gateway, no log), in the benchmark's temporary folder (or
//! `WEIR_ROLLUP_BENCH_DIR`). Prints p50 / p99 per read, and the load average
//! beside the figures.

#![allow(clippy::expect_used, clippy::print_stderr, clippy::print_stdout, reason = "a benchmark reports")]

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use weir_host::ledger::bench::{BenchFile, Upkeep};
use weir_host::ledger::{Bucket, Filter, GroupBy, LedgerRead, Reader, UsageQuery};
use weir_host::record::{AttemptReason, AttemptRecord, CallRecord, Operation, Route, Tokens, Who};

/// Rows per append (one transaction), as a busy ledger thread's batches.
const BATCH: usize = 10_000;

/// The calls' time range ends at this hour.
const END_MS: u64 = 1_800_000_000_000;
const DAY_MS: u64 = 86_400_000;

/// How the benchmark's calls spread over time and dimensions.
#[derive(Debug, Clone, Copy)]
enum Spread {
    /// 90 days of traffic; 50 members in 5 teams, each calling 2 of 10
    /// models most of the time (1 call in 10 any model), the models over 3
    /// providers with one deployment each; 2 % failed; latencies 50 ms – 20 s.
    Realistic,
    /// Last stop's: a year, 50 members × 8 models uniformly (~800 dimension
    /// combinations, so that an hour holds ~1 call per combination and the
    /// hour level barely compresses), no deployments.
    Adversarial,
}

impl Spread {
    fn range_ms(self) -> u64 {
        match self {
            Self::Realistic => 90 * DAY_MS,
            Self::Adversarial => 365 * DAY_MS,
        }
    }
}

fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

/// A cheap deterministic spread (no RNG crate needed for shapes).
fn mix(n: u64) -> u64 {
    let mut x = n.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    x ^= x >> 31;
    x.wrapping_mul(0xBF58_476D_1CE4_E5B9) >> 17
}

/// The `n`th of `total` calls, in time order over the spread's range.
fn call(n: u64, total: u64, spread: Spread) -> CallRecord {
    let started_ms = END_MS - spread.range_ms() + n * (spread.range_ms() / total.max(1));
    let mix = mix(n);
    let member = mix % 50;
    let (model, deployment) = match spread {
        Spread::Realistic => {
            let model = if (mix >> 40).is_multiple_of(10) { (mix >> 8) % 10 } else { (member + (mix >> 8) % 2) % 10 };
            (model, Some(format!("deployment-{}", model % 3)))
        }
        Spread::Adversarial => ((mix >> 8) % 8, None),
    };
    let failed = (mix >> 16).is_multiple_of(50);
    let latency_ms = 50 + (mix >> 20) % 20_000;
    let spread = mix;
    let category = if failed { "timeout" } else { "ok" };
    let started = UNIX_EPOCH + Duration::from_millis(started_ms);
    CallRecord {
        role: None,
        notes: Vec::new(),
        call_id: format!("bench-{n}"),
        started_at: started,
        ended_at: started + Duration::from_millis(latency_ms),
        who: Who {
            key_id: Some(format!("key-{member}")),
            member: Some(format!("member-{member}")),
            team: Some(format!("team-{}", member % 5)),
        },
        route: Route::OpenaiChat,
        operation: Operation::Chat,
        model: format!("model-{model}"),
        identity: None,
        provider: Some(format!("provider-{}", model % 3)),
        wire_id: None,
        endpoint_host: None,
        served_model: None,
        stream: false,
        traceparent: None,
        max_tokens: None,
        attempts: vec![AttemptRecord {
            reason: AttemptReason::First,
            started_ms: 0,
            latency_ms,
            admission_wait_ms: 0,
            status: Some(if failed { 504 } else { 200 }),
            category: category.to_owned(),
            request_id: None,
            usage: None,
            searches: None,
            web_searches: None,
            deployment,
        }],
        usage: Tokens {
            input: 100 + spread % 900,
            output: 20 + spread % 300,
            cache_read: 0,
            cache_write: 0,
            reasoning: 0,
        },
        billable_input: None,
        cost_usd: Some(0.001 * f64::from(u32::try_from(spread % 100).unwrap_or(0))),
        category: category.to_owned(),
        stop_reason: None,
        latency_ms,
        first_output_ms: None,
        stream_end: None,
        content: None,
        client: None,
        cached: false,
        cached_from: None,
        charged_worst_case: false,
    }
}

/// Appends calls `from..to` of `total`; the time spent.
fn append(file: &mut BenchFile, from: u64, to: u64, total: u64, spread: Spread, upkeep: Upkeep) -> Duration {
    let mut spent = Duration::ZERO;
    let mut next = from;
    while next < to {
        let end = (next + BATCH as u64).min(to);
        let records: Vec<CallRecord> = (next..end).map(|n| call(n, total, spread)).collect();
        let started = Instant::now();
        file.append(&records, upkeep).expect("append");
        spent += started.elapsed();
        next = end;
    }
    spent
}

/// `rows` per second.
fn rate(rows: u64, spent: Duration) -> f64 {
    rows as f64 / spent.as_secs_f64().max(1e-9)
}

/// The append's cost with the upkeep off, on with the rows unmarked (as
/// before the writer carried the dims and knew which rows stand alone: each
/// body parsed again, each call's earlier rows looked up), and on with them
/// marked as the ledger marks a call that held nothing: the same rows into
/// three fresh files, alternating batches so the machine's load falls on all.
fn append_cost(dir: &Path) {
    let rows = 200_000;
    let upkeeps = [Upkeep::Off, Upkeep::Unmarked, Upkeep::Marked];
    let mut files: Vec<BenchFile> = upkeeps
        .iter()
        .map(|upkeep| {
            let path = dir.join(format!("append-{upkeep:?}.db"));
            let _ = std::fs::remove_file(&path);
            BenchFile::open(&path).expect("open")
        })
        .collect();
    let mut spent = [Duration::ZERO; 3];
    let step = BATCH as u64;
    for from in (0..rows).step_by(BATCH) {
        for ((file, upkeep), spent) in files.iter_mut().zip(upkeeps).zip(spent.iter_mut()) {
            *spent += append(file, from, from + step, rows, Spread::Realistic, upkeep);
        }
    }
    let [off, unmarked, marked] = spent.map(|spent| rate(rows, spent));
    println!(
        "append ({rows} closing rows, batches of {BATCH}): roll-ups off {off:.0} rows/s; on, rows unmarked \
         {unmarked:.0} rows/s ({:.3}x off); on, rows marked {marked:.0} rows/s ({:.3}x off, {:.2}x unmarked) \
         (load {})",
        unmarked / off,
        marked / off,
        marked / unmarked,
        load()
    );
}

/// Compact rows against rows stored as text (the format before schema
/// version 5), the same `rows` closing rows into two fresh files with the
/// roll-ups kept as the ledger keeps them, alternating batches: the append's
/// rows per second, the file's bytes per row, and `verify`'s rows per second
/// over each file, alternated twice.
fn compaction(dir: &Path, rows: u64) {
    let paths: Vec<PathBuf> =
        ["compact", "text"].iter().map(|format| dir.join(format!("format-{format}.db"))).collect();
    let fresh = |path: &Path| {
        let _ = std::fs::remove_file(path);
        BenchFile::open(path).expect("open")
    };
    let mut files = [fresh(&paths[0]), fresh(&paths[1]).with_text_bodies()];
    let mut spent = [Duration::ZERO; 2];
    for from in (0..rows).step_by(BATCH) {
        for (file, spent) in files.iter_mut().zip(spent.iter_mut()) {
            *spent += append(file, from, from + BATCH as u64, rows, Spread::Realistic, Upkeep::Marked);
        }
    }
    drop(files);
    let [compact, text] = spent.map(|spent| rate(rows, spent));
    let bytes = |path: &Path| std::fs::metadata(path).map(|meta| meta.len()).unwrap_or(0) / rows;
    println!(
        "compaction ({rows} closing rows, batches of {BATCH}): append compact {compact:.0} rows/s, text {text:.0} \
         rows/s ({:.3}x); file {} bytes a row compact, {} as text ({:.2}x smaller) (load {})",
        compact / text,
        bytes(&paths[0]),
        bytes(&paths[1]),
        bytes(&paths[1]) as f64 / bytes(&paths[0]).max(1) as f64,
        load()
    );
    let mut verified = [Vec::new(), Vec::new()];
    for _round in 0..2 {
        for (path, rates) in paths.iter().zip(verified.iter_mut()) {
            let started = Instant::now();
            let report = Reader::open(path).expect("reader").verify().expect("verify");
            rates.push(rate(report.rows, started.elapsed()));
        }
    }
    println!(
        "compaction: verify compact {:.0} / {:.0} rows/s, text {:.0} / {:.0} rows/s (load {})",
        verified[0][0],
        verified[0][1],
        verified[1][0],
        verified[1][1],
        load()
    );
    for path in &paths {
        let _ = std::fs::remove_file(path);
    }
}

/// p50 and p99 of `times`.
fn percentiles(mut times: Vec<Duration>) -> (Duration, Duration) {
    times.sort();
    let at = |percent: usize| times[((times.len() * percent).div_ceil(100)).saturating_sub(1).min(times.len() - 1)];
    (at(50), at(99))
}

fn timed(runs: usize, mut read: impl FnMut() -> u64) -> (Duration, Duration, u64) {
    let mut times = Vec::with_capacity(runs);
    let mut calls = 0;
    for _ in 0..runs {
        let started = Instant::now();
        calls = read();
        times.push(started.elapsed());
    }
    let (p50, p99) = percentiles(times);
    (p50, p99, calls)
}

fn at(ms: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_millis(ms)
}

fn reads(path: &Path, total: u64, spread: Spread) {
    let reader = Reader::open(path).expect("reader");
    let whole =
        Filter { since: Some(at(END_MS - spread.range_ms() - 1)), until: Some(at(END_MS + 1)), ..Filter::default() };
    // The console's usage page as it opens: the last 7 days to "now" (mid-hour), by member, per day.
    let console_end = END_MS - 1_234_567;
    let console_week =
        Filter { since: Some(at(console_end - 7 * DAY_MS)), until: Some(at(console_end)), ..Filter::default() };
    let cases = [
        ("by member", UsageQuery { filter: whole.clone(), group_by: Some(GroupBy::Member), bucket: None }),
        ("by model", UsageQuery { filter: whole.clone(), group_by: Some(GroupBy::Model), bucket: None }),
        ("day series", UsageQuery { filter: whole, group_by: None, bucket: Some(Bucket::Day) }),
        (
            "console page (7 days by member per day)",
            UsageQuery { filter: console_week, group_by: Some(GroupBy::Member), bucket: Some(Bucket::Day) },
        ),
    ];
    let raw_runs = if total > 2_000_000 { 1 } else { 5 };
    for (name, query) in cases {
        let rolled = timed(50, || reader.usage(&query).expect("read").total.calls);
        let raw = timed(raw_runs, || reader.usage_from_rows(&query).expect("read").total.calls);
        assert_eq!(rolled.2, raw.2, "{name}: the roll-ups and the rows disagree");
        println!(
            "{total} calls ({spread:?}), {name}: roll-ups p50 {:.2} ms p99 {:.2} ms (50 runs); rows p50 {:.0} ms \
             p99 {:.0} ms ({raw_runs} runs); rows / roll-ups at p50 {:.0}x (load {})",
            ms(rolled.0),
            ms(rolled.1),
            ms(raw.0),
            ms(raw.1),
            raw.0.as_secs_f64() / rolled.0.as_secs_f64().max(1e-9),
            load()
        );
    }
}

/// The rows of each roll-up level in `path`.
fn level_rows(path: &Path) -> String {
    let file = rusqlite::Connection::open(path).expect("open");
    let count = |table: &str| -> i64 {
        file.query_row(&format!("SELECT COUNT(*) FROM {table}"), [], |row| row.get(0)).expect("count")
    };
    format!(
        "hour level {} rows + {} latency rows, day level {} rows",
        count("ledger_rollup"),
        count("ledger_rollup_latency"),
        count("ledger_rollup_day")
    )
}

fn ms(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1000.0
}

fn main() {
    let sizes: Vec<u64> = std::env::var("WEIR_ROLLUP_BENCH_CALLS")
        .unwrap_or_else(|_| "1000000,10000000".to_owned())
        .split(',')
        .filter(|size| !size.trim().is_empty())
        .map(|size| size.trim().parse().expect("WEIR_ROLLUP_BENCH_CALLS: sizes, comma-separated"))
        .collect();
    let compaction_rows: u64 = std::env::var("WEIR_COMPACTION_BENCH_ROWS")
        .map_or(500_000, |rows| rows.trim().parse().expect("WEIR_COMPACTION_BENCH_ROWS: a count of rows"));
    let dir = std::env::var("WEIR_ROLLUP_BENCH_DIR")
        .map_or_else(|_| PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("rollups-bench"), PathBuf::from);
    std::fs::create_dir_all(&dir).expect("the bench's folder");
    println!("rollups bench at {} (load {})", humantime::format_rfc3339_seconds(SystemTime::now()), load());
    compaction(&dir, compaction_rows);
    append_cost(&dir);
    for total in sizes {
        for spread in [Spread::Realistic, Spread::Adversarial] {
            one_file(&dir, total, spread);
        }
    }
}

/// Builds a file of `total` calls, reads it, verifies it, and (up to 2 M
/// calls) measures a version 3 file's upgrade; then deletes it.
fn one_file(dir: &Path, total: u64, spread: Spread) {
    let path = dir.join(format!("ledger-{total}-{spread:?}.db"));
    let _ = std::fs::remove_file(&path);
    let mut file = BenchFile::open(&path).expect("open");
    if total > 2_000_000 {
        // ~700 bytes a row with bodies: 7 GB at 10 M, more than this disk spares.
        println!("{total} calls ({spread:?}): rows stored without bodies (no read below opens one)");
        file = file.without_bodies();
    }
    let spent = append(&mut file, 0, total, total, spread, Upkeep::Marked);
    println!("{total} calls ({spread:?}) appended with roll-ups: {:.0} rows/s (load {})", rate(total, spent), load());
    drop(file);
    println!("{total} calls ({spread:?}): {}", level_rows(&path));
    reads(&path, total, spread);
    if total <= 2_000_000 {
        let started = Instant::now();
        let verified = Reader::open(&path).expect("reader").verify().expect("verify");
        let spent = started.elapsed();
        println!(
            "{total} calls ({spread:?}): `weir ledger verify` walked {} rows in {:.1} s, {:.0} rows/s (load {})",
            verified.rows,
            spent.as_secs_f64(),
            rate(verified.rows, spent),
            load()
        );
        BenchFile::open(&path).expect("open").forget_day_level().expect("forget");
        let started = Instant::now();
        drop(BenchFile::open(&path).expect("the upgrade"));
        println!(
            "{total} calls ({spread:?}): a version 3 file upgraded (roll-ups built afresh) in {:.1} s (load {})",
            started.elapsed().as_secs_f64(),
            load()
        );
    }
    let bytes = std::fs::metadata(&path).map(|meta| meta.len()).unwrap_or(0);
    println!("{total} calls ({spread:?}): the file is {:.2} GB", bytes as f64 / 1e9);
    let _ = std::fs::remove_file(&path);
}
