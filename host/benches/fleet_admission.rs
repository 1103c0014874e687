//! Admission through Redis (the fleet's shared buckets, and its permit leases)
//! against the in-process account, per call, in one run: one caller at a
//! time (the round trip a call waits for) and 32 at once (what the one
//! multiplexed connection sustains). Starts its own `redis-server` on a free
//! loopback port (Debian's `redis-server` must be on `PATH`).

// Benchmark setup: a failed step should stop the run with its message.
#![allow(clippy::expect_used, reason = "a benchmark stops at its first failed step")]

use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use weir_host::admission::{Demand, InProcessStore, InteractiveShare, Limits, ModelGate, RateStore};
use weir_host::fleet::{FleetSettings, RedisStore, SharedErrorPolicy};

const ONE: Demand = Demand { requests: 1, tokens: 100 };
const LIMITS: Limits = Limits { rpm: Some(1_000_000_000), tpm: Some(1_000_000_000) };

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
    let gates = [
        ("in-process", gate(&InProcessStore, "m", None)),
        ("redis buckets", gate(&redis, "buckets", None)),
        ("redis buckets + permit lease", gate(&redis, "leased", Some(1_000_000))),
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
                    let callers: Vec<_> = (0..32)
                        .map(|_| {
                            let gate = Arc::clone(gate);
                            tokio::spawn(async move {
                                for _ in 0..iterations.div_ceil(32) {
                                    let mut grant = gate.admit(ONE, None).await.expect("grant");
                                    grant.mark_sent();
                                }
                            })
                        })
                        .collect();
                    for caller in callers {
                        caller.await.expect("caller");
                    }
                    start.elapsed()
                })
            })
        });
    }
    group.finish();
}

criterion_group!(benches, admission);
criterion_main!(benches);
