//! The ledger's group commit: records committed per second and the latency of
//! one record's acknowledgement, with 1 and 32 concurrent writers, at
//! `sync = "normal"` and `"full"`. Each writer's call opens and then closes, as
//! a gateway call does (the acknowledgement timed is the closing record's). Each case also prints the mean batch size
//! the writer committed (from a `LedgerMeter`): the more writers wait
//! together, the more rows one commit carries. Absolute figures are this
//! machine's (and its disk's); the ratios are the point.

// Benchmark setup: a failed step should stop the run with its message.
#![allow(clippy::expect_used, clippy::print_stderr, reason = "a benchmark reports on stderr")]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant, SystemTime};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use weir_host::catalog::{LedgerOnError, LedgerSync};
use weir_host::ledger::{Ledger, LedgerConfig, LedgerMeter};
use weir_host::record::{CallObserver, CallOpening, CallRecord, Operation, Route, Tokens, Who};

/// Records each writer commits per measured iteration.
const PER_WRITER: usize = 16;

#[derive(Default)]
struct Batches {
    batches: AtomicUsize,
    records: AtomicUsize,
    committing_ns: AtomicUsize,
}

impl LedgerMeter for Batches {
    fn committed(&self, records: usize, elapsed: Duration) {
        self.batches.fetch_add(1, Ordering::Relaxed);
        self.committing_ns.fetch_add(usize::try_from(elapsed.as_nanos()).unwrap_or(usize::MAX), Ordering::Relaxed);
        self.records.fetch_add(records, Ordering::Relaxed);
    }

    fn failed(&self, _records: usize) {}
}

fn record(n: usize) -> Arc<CallRecord> {
    let now = SystemTime::now();
    Arc::new(CallRecord {
        role: None,
        notes: Vec::new(),
        call_id: format!("bench-{n}"),
        started_at: now,
        ended_at: now,
        who: Who { key_id: Some("bench-key".to_owned()), member: Some("bench".to_owned()), team: None },
        route: Route::OpenaiChat,
        operation: Operation::Chat,
        model: "gpt-bench".to_owned(),
        identity: Some("gpt-bench".to_owned()),
        provider: Some("openai".to_owned()),
        wire_id: Some("gpt-bench".to_owned()),
        endpoint_host: Some("api.openai.com".to_owned()),
        served_model: Some("gpt-bench-2026".to_owned()),
        stream: true,
        traceparent: None,
        max_tokens: Some(1024),
        attempts: Vec::new(),
        usage: Tokens { input: 1200, output: 300, cache_read: 800, cache_write: 0, reasoning: 0 },
        billable_input: Some(1280.0),
        cost_usd: Some(0.0042),
        category: "ok".to_owned(),
        stop_reason: Some("stop".to_owned()),
        latency_ms: 900,
        first_output_ms: Some(200),
        stream_end: None,
        content: None,
        client: None,
        charged_worst_case: false,
        cached: false,
        cached_from: None,
    })
}

fn opening(record: &CallRecord) -> CallOpening {
    CallOpening {
        call_id: record.call_id.clone(),
        started_at: record.started_at,
        who: record.who.clone(),
        route: record.route,
        operation: record.operation,
        model: record.model.clone(),
        stream: record.stream,
        traceparent: None,
    }
}

fn ledger(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).build().expect("runtime");
    let dir = tempfile::tempdir().expect("temp dir");
    let mut group = c.benchmark_group("ledger");
    for sync in [LedgerSync::Normal, LedgerSync::Full] {
        for writers in [1_usize, 32] {
            let meter = Arc::new(Batches::default());
            let path = dir.path().join(format!("{sync:?}-{writers}.db"));
            let config = LedgerConfig { sync, on_error: LedgerOnError::Refuse, ..LedgerConfig::at(path) };
            let ledger = Ledger::open(config, Some(meter.clone()));
            let latency = Arc::new(std::sync::Mutex::new((Duration::ZERO, 0_u32)));
            group.throughput(Throughput::Elements((writers * PER_WRITER) as u64));
            group.bench_function(format!("{sync:?}/{writers}-writers"), |b| {
                b.iter(|| {
                    let (ledger, latency) = (ledger.clone(), latency.clone());
                    runtime.block_on(async move {
                        let tasks: Vec<_> = (0..writers)
                            .map(|w| {
                                let (ledger, latency) = (ledger.clone(), latency.clone());
                                tokio::spawn(async move {
                                    for n in 0..PER_WRITER {
                                        let record = record(w * PER_WRITER + n);
                                        ledger.opened(&opening(&record)).await.expect("opened");
                                        let started = Instant::now();
                                        ledger.closed(&record).await.expect("committed");
                                        let mut total = latency.lock().expect("latency");
                                        total.0 += started.elapsed();
                                        total.1 += 1;
                                    }
                                })
                            })
                            .collect();
                        for task in tasks {
                            task.await.expect("writer");
                        }
                    })
                });
            });
            let (batches, records) = (meter.batches.load(Ordering::Relaxed), meter.records.load(Ordering::Relaxed));
            let (total, count) = *latency.lock().expect("latency");
            let committing = Duration::from_nanos(meter.committing_ns.load(Ordering::Relaxed) as u64);
            eprintln!(
                "ledger {sync:?}, {writers} writer(s): {records} records in {batches} commits (mean batch {:.1}, \
                 mean commit {:?}), mean acknowledgement latency {:?}",
                records as f64 / batches.max(1) as f64,
                committing / u32::try_from(batches.max(1)).unwrap_or(u32::MAX),
                total / count.max(1)
            );
        }
    }
    group.finish();
}

criterion_group!(benches, ledger);
criterion_main!(benches);
