//! Admission through Redis (the fleet's shared buckets, and its permit leases)
//! against the in-process account, per call, in one run: one caller at a
//! time (the round trip a call waits for) and 32 at once (what the one
//! multiplexed connection sustains); the shared buckets both as the fleet
//! takes them (leased in blocks) and one script run per call (as before
//! blocks). The same for a model's `max_concurrency` permits alone (no
//! `rpm`/`tpm`): counted in process, held through Redis in blocks, and one
//! script run per acquire and per release (as before blocks). Then Redis's own
//! CPU per admitted call, read from `INFO` around a counted run of each. Starts its own `redis-server` on a free loopback port
//! (Debian's `redis-server` must be on `PATH`).

// Benchmark setup: a failed step should stop the run with its message.
#![allow(clippy::expect_used, clippy::print_stdout, reason = "a benchmark stops at its first failed step, and reports")]

use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use weir_host::admission::{
    Demand, InProcessStore, InteractiveShare, Limits, ModelGate, PermitPool, RateAccount, RateStore,
};
use weir_host::fleet::{FleetSettings, RedisStore, SharedErrorPolicy};

const ONE: Demand = Demand { requests: 1, tokens: 100 };
const LIMITS: Limits = Limits { rpm: Some(1_000_000_000), tpm: Some(1_000_000_000) };
/// The permits' gates' limit: never reached by 32 callers.
const MAX_CONCURRENCY: u32 = 1_000;

struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn redis_server() -> (Server, String) {
    let port = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port").local_addr().expect("addr").port();
    let child = Command::new("redis-server")
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
        .stdout(Stdio::null())
        .spawn()
        .expect("redis-server on PATH");
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "redis-server did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
    (Server(child), format!("redis://127.0.0.1:{port}"))
}

fn gate(store: &dyn RateStore, model: &str, max_concurrency: Option<u32>) -> Arc<ModelGate> {
    let account = store.account(model, LIMITS);
    let permits = max_concurrency.and_then(|max| store.permits(model, max));
    ModelGate::with_permits(model, account, max_concurrency, None, InteractiveShare::NONE, permits)
}

/// A gate whose only limit is `MAX_CONCURRENCY` permits, held in `pool`
/// (`None`: counted in process).
fn permit_gate(store: &dyn RateStore, model: &str, pool: Option<Arc<dyn PermitPool>>) -> Arc<ModelGate> {
    let account = store.account(model, Limits::default());
    ModelGate::with_permits(model, account, Some(MAX_CONCURRENCY), None, InteractiveShare::NONE, pool)
}

/// `calls` admissions through `gate` by 32 callers at once.
async fn admit_many(gate: &Arc<ModelGate>, calls: u64) {
    let callers: Vec<_> = (0..32)
        .map(|_| {
            let gate = Arc::clone(gate);
            tokio::spawn(async move {
                for _ in 0..calls.div_ceil(32) {
                    let mut grant = gate.admit(ONE, None).await.expect("grant");
                    grant.mark_sent();
                }
            })
        })
        .collect();
    for caller in callers {
        caller.await.expect("caller");
    }
}

/// Redis's CPU seconds (`used_cpu_sys + used_cpu_user`) and script runs so far.
async fn redis_work(connection: &mut redis::aio::MultiplexedConnection) -> (f64, u64) {
    let info: String = redis::cmd("INFO").arg("all").query_async(connection).await.expect("INFO");
    let field = |name: &str| {
        info.lines().find_map(|line| line.strip_prefix(name)?.strip_prefix(':')?.trim().parse::<f64>().ok())
    };
    let cpu = field("used_cpu_sys").expect("used_cpu_sys") + field("used_cpu_user").expect("used_cpu_user");
    let scripts = info
        .lines()
        .filter_map(|line| line.strip_prefix("cmdstat_evalsha:calls=")?.split(',').next()?.parse::<u64>().ok())
        .sum();
    (cpu, scripts)
}

/// Redis's CPU per admitted call of each gate, over a counted run of 32
/// callers (Redis's own clock: what caps the fleet, whatever the gateways).
fn redis_cpu_per_call(runtime: &tokio::runtime::Runtime, url: &str, gates: &[(&str, Arc<ModelGate>)]) {
    const CALLS: u64 = 50_000;
    runtime.block_on(async {
        let client = redis::Client::open(url).expect("client");
        let mut connection = client.get_multiplexed_async_connection().await.expect("connection");
        for (name, gate) in gates {
            let (cpu_before, scripts_before) = redis_work(&mut connection).await;
            let start = Instant::now();
            admit_many(gate, CALLS).await;
            let elapsed = start.elapsed();
            let (cpu_after, scripts_after) = redis_work(&mut connection).await;
            let admitted = CALLS.div_ceil(32) * 32;
            println!(
                "fleet_admission/redis cpu per admitted call/{name}: {:.2} µs of Redis CPU, {:.4} script runs, \
                 {:.0} admitted calls/s at 32 callers ({admitted} calls)",
                (cpu_after - cpu_before) * 1e6 / admitted as f64,
                (scripts_after - scripts_before) as f64 / admitted as f64,
                admitted as f64 / elapsed.as_secs_f64(),
            );
        }
    });
}

fn admission(c: &mut Criterion) {
    let (_server, url) = redis_server();
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("rt");
    let settings = FleetSettings {
        redis_url: url,
        on_shared_error: SharedErrorPolicy::Refuse,
        fleet_size: None,
        key_prefix: None,
        lease_secs: None,
    };
    let redis = runtime.block_on(async { RedisStore::new(&settings, None).expect("store") });
    let per_call: Arc<dyn RateAccount> = Arc::new(redis.redis_account("per-call", LIMITS));
    let gates = [
        ("in-process", gate(&InProcessStore, "m", None)),
        ("redis buckets, leased in blocks", gate(&redis, "buckets", None)),
        ("redis buckets, one script per call", ModelGate::new("per-call", per_call, None, None)),
        ("redis buckets leased + permit lease", gate(&redis, "leased", Some(1_000_000))),
        ("permits in process", permit_gate(&InProcessStore, "p", None)),
        (
            "redis permits, in blocks",
            permit_gate(&redis, "p-blocks", Some(Arc::new(redis.redis_permits("p-blocks", MAX_CONCURRENCY)))),
        ),
        (
            "redis permits, one script per acquire and release",
            permit_gate(&redis, "p-per-call", Some(Arc::new(redis.per_call_permits("p-per-call", MAX_CONCURRENCY)))),
        ),
    ];
    let mut group = c.benchmark_group("fleet_admission/one caller (admit + send + release)");
    for (name, gate) in &gates {
        group.bench_function(*name, |b| {
            b.iter_custom(|iterations| {
                runtime.block_on(async {
                    let start = Instant::now();
                    for _ in 0..iterations {
                        let mut grant = gate.admit(ONE, None).await.expect("grant");
                        grant.mark_sent();
                    }
                    start.elapsed()
                })
            })
        });
    }
    group.finish();
    let mut group = c.benchmark_group("fleet_admission/32 callers (time per grant)");
    for (name, gate) in &gates {
        group.bench_function(*name, |b| {
            b.iter_custom(|iterations| {
                runtime.block_on(async {
                    let start = Instant::now();
                    admit_many(gate, iterations).await;
                    start.elapsed()
                })
            })
        });
    }
    group.finish();
    redis_cpu_per_call(&runtime, &settings.redis_url, &gates[1..3]);
    redis_cpu_per_call(&runtime, &settings.redis_url, &gates[5..7]);
}

criterion_group!(benches, admission);
criterion_main!(benches);
