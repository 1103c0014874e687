//! Admission through Redis (the fleet's shared buckets, and its permit leases)
//! against the in-process account, per call, in one run: one caller at a
//! time (the round trip a call waits for) and 32 at once (what the one
//! multiplexed connection sustains); the shared buckets both as the fleet
//! takes them (leased in blocks) and one script run per call (as before
//! blocks). The same for a model's `max_concurrency` permits alone (no
//! `rpm`/`tpm`): counted in process, held through Redis in blocks, and one
//! script run per acquire and per release (as before blocks). Then Redis's own
//! CPU per admitted call, read from `INFO` around a counted run of each. Then
//! the fleet's ceiling per Redis core and across a cluster: one script per call
//! over many models' buckets, on the one server and on a three-master Redis
//! Cluster (`cluster_urls`) in the same run, with each node's CPU per admitted
//! call (the busiest node caps the cluster). Starts its own `redis-server`s on
//! free loopback ports (Debian's `redis-server`, which brings `redis-cli`, must
//! be on `PATH`).

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

/// One call's demand, and limits it never reaches: 9 billion a minute (the
/// most `[fleet]` takes) is 15 million calls a second at 10 tokens each, so
/// a grant's time is the gate's own. At 100 tokens a call against a billion
/// a minute, as this bench had until stop 69, the bucket itself allowed one
/// grant per 6.00 µs, which is what it measured for every fast gate.
const ONE: Demand = Demand { requests: 1, tokens: 10 };
const LIMITS: Limits = Limits { rpm: Some(9_000_000_000), tpm: Some(9_000_000_000) };
/// The permits' gates' limit: never reached by 32 callers.
const MAX_CONCURRENCY: u32 = 1_000;

/// The models whose buckets the ceiling's run spreads over (each its own key,
/// so its own slot on a cluster).
const MODELS: usize = 24;

struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A free loopback port whose cluster bus port (+ 10000) is free too.
fn free_port() -> u16 {
    loop {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
        let port = listener.local_addr().expect("addr").port();
        if port.checked_add(10_000).is_some_and(|bus| std::net::TcpListener::bind(("127.0.0.1", bus)).is_ok()) {
            return port;
        }
    }
}

/// A `redis-server` on `port` with `extra` arguments, answering.
fn redis_on(port: u16, extra: &[&str]) -> Server {
    let child = Command::new("redis-server")
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
        .args(extra)
        .stdout(Stdio::null())
        .spawn()
        .expect("redis-server on PATH");
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "redis-server did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
    Server(child)
}

fn redis_server() -> (Server, String) {
    let port = free_port();
    (redis_on(port, &[]), format!("redis://127.0.0.1:{port}"))
}

/// Three masters made one cluster by `redis-cli --cluster create`; answers
/// once every node says `cluster_state:ok`. The folder holds their cluster
/// files.
fn redis_cluster(dir: &std::path::Path) -> (Vec<Server>, Vec<String>) {
    let ports: Vec<u16> = (0..3).map(|_| free_port()).collect();
    let servers = ports
        .iter()
        .map(|port| {
            let file = dir.join(format!("nodes-{port}.conf"));
            let file = file.to_str().expect("a UTF-8 temporary path");
            redis_on(*port, &["--cluster-enabled", "yes", "--cluster-config-file", file])
        })
        .collect();
    let created = Command::new("redis-cli")
        .arg("--cluster")
        .arg("create")
        .args(ports.iter().map(|port| format!("127.0.0.1:{port}")))
        .args(["--cluster-replicas", "0", "--cluster-yes"])
        .stdout(Stdio::null())
        .status()
        .expect("redis-cli on PATH");
    assert!(created.success(), "redis-cli --cluster create failed");
    let urls: Vec<String> = ports.iter().map(|port| format!("redis://127.0.0.1:{port}")).collect();
    let deadline = Instant::now() + Duration::from_secs(30);
    for url in &urls {
        let client = redis::Client::open(url.as_str()).expect("client");
        let mut connection = client.get_connection().expect("connection");
        loop {
            let info: String = redis::cmd("CLUSTER").arg("INFO").query(&mut connection).expect("CLUSTER INFO");
            if info.contains("cluster_state:ok") {
                break;
            }
            assert!(Instant::now() < deadline, "the cluster did not come up");
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    (servers, urls)
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

/// `calls` admissions by 32 callers at once, each caller going round `gates`.
async fn admit_round(gates: &[Arc<ModelGate>], calls: u64) {
    let callers: Vec<_> = (0..32)
        .map(|caller| {
            let gates = gates.to_vec();
            tokio::spawn(async move {
                for call in 0..calls.div_ceil(32) {
                    let gate = &gates[(caller + call as usize) % gates.len()];
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

/// The fleet's ceiling: one script per admitted call (a fleet at its limit
/// runs about that many) over [`MODELS`] models' buckets, by 32 callers, on
/// the one server and on the cluster. Each node's CPU per admitted call is
/// read from its `INFO`; the busiest node is what caps the whole.
fn ceiling(runtime: &tokio::runtime::Runtime, single: &str, cluster: &[String]) {
    const CALLS: u64 = 50_000;
    let run = |name: &str, settings: FleetSettings, nodes: &[String]| {
        runtime.block_on(async {
            let store = RedisStore::new(&settings, None).expect("store");
            let gates: Vec<Arc<ModelGate>> = (0..MODELS)
                .map(|model| {
                    let name = format!("model:ceiling-{model}");
                    let account: Arc<dyn RateAccount> = Arc::new(store.redis_account(&name, LIMITS));
                    ModelGate::new(name, account, None, None)
                })
                .collect();
            admit_round(&gates, 32 * 100).await;
            let mut connections = Vec::new();
            for url in nodes {
                let client = redis::Client::open(url.as_str()).expect("client");
                connections.push(client.get_multiplexed_async_connection().await.expect("connection"));
            }
            let mut before = Vec::new();
            for connection in &mut connections {
                before.push(redis_work(connection).await);
            }
            let start = Instant::now();
            admit_round(&gates, CALLS).await;
            let elapsed = start.elapsed();
            let admitted = CALLS.div_ceil(32) * 32;
            let mut per_node = Vec::new();
            for (connection, (cpu, scripts)) in connections.iter_mut().zip(before) {
                let (cpu_after, scripts_after) = redis_work(connection).await;
                per_node.push(((cpu_after - cpu) * 1e6 / admitted as f64, scripts_after - scripts));
            }
            let total: f64 = per_node.iter().map(|(us, _)| us).sum();
            let busiest = per_node.iter().map(|(us, _)| *us).fold(0.0, f64::max);
            let shares: Vec<String> =
                per_node.iter().map(|(us, scripts)| format!("{us:.2} µs / {scripts} scripts")).collect();
            println!(
                "fleet_admission/ceiling/{name}: {:.0} admitted calls/s at 32 callers over {MODELS} models; \
                 Redis CPU per admitted call {total:.2} µs in all, {busiest:.2} µs on the busiest node \
                 (per node: {}); ceiling {:.0} admitted calls/s (1 s / the busiest node's µs)",
                admitted as f64 / elapsed.as_secs_f64(),
                shares.join(", "),
                1e6 / busiest,
            );
        });
    };
    let settings = |redis_url: Option<String>, cluster_urls: Option<Vec<String>>| FleetSettings {
        redis_url,
        cluster_urls,
        on_shared_error: SharedErrorPolicy::Refuse,
        fleet_size: None,
        key_prefix: Some("ceiling".to_owned()),
        lease_secs: None,
    };
    run("one server", settings(Some(single.to_owned()), None), &[single.to_owned()]);
    run("cluster of 3 masters", settings(None, Some(cluster.to_vec())), cluster);
    run("one server again", settings(Some(single.to_owned()), None), &[single.to_owned()]);
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
        redis_url: Some(url.clone()),
        cluster_urls: None,
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
    redis_cpu_per_call(&runtime, &url, &gates[1..3]);
    redis_cpu_per_call(&runtime, &url, &gates[5..7]);
    let dir = tempfile::tempdir().expect("a folder for the cluster's files");
    let (_cluster, nodes) = redis_cluster(dir.path());
    ceiling(&runtime, &url, &nodes);
}

criterion_group!(benches, admission);
criterion_main!(benches);
