//! A real three-master Redis Cluster for one test: three `redis-server
//! --cluster-enabled yes` on free loopback ports (each port's cluster bus,
//! port + 10000, free too), joined by `redis-cli --cluster create …
//! --cluster-replicas 0`, and waited for until every node answers
//! `cluster_state:ok`. Nothing is saved to disk but each node's cluster
//! configuration, in a folder removed when the cluster is dropped. A node can
//! be stopped (SIGKILL) and started again on its port: it rejoins with its
//! slots, empty. The node timeout is 1 s, so a stopped node fails the cluster
//! within about 2 s, and its return heals it as fast. A slot can be moved
//! between nodes with its keys, in two steps (so a client meets `ASK`, then
//! `MOVED`). Needs `redis-server` and `redis-cli` on `PATH` (Debian's
//! `redis-server` package brings both; `.ci/run` installs it).

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The cluster's nodes: three masters, no replica.
pub const NODES: usize = 3;

pub struct RedisCluster {
    dir: tempfile::TempDir,
    nodes: Vec<Node>,
}

struct Node {
    port: u16,
    child: Option<Child>,
}

/// One master as `CLUSTER NODES` lists it.
#[derive(Debug, Clone)]
struct Master {
    id: String,
    port: u16,
    slots: Vec<(u16, u16)>,
}

impl RedisCluster {
    /// Starts three nodes, makes them one cluster and waits until it serves.
    pub async fn start() -> RedisCluster {
        let dir = tempfile::tempdir().expect("a folder for the nodes' cluster files");
        let nodes = (0..NODES).map(|_| Node { port: port_with_free_bus(), child: None }).collect();
        let mut cluster = RedisCluster { dir, nodes };
        for node in 0..NODES {
            cluster.spawn(node);
        }
        for node in 0..NODES {
            cluster.wait_for_ping(node).await;
        }
        let addresses: Vec<String> = cluster.nodes.iter().map(|node| format!("127.0.0.1:{}", node.port)).collect();
        let output = tokio::task::spawn_blocking(move || {
            Command::new("redis-cli")
                .arg("--cluster")
                .arg("create")
                .args(&addresses)
                .args(["--cluster-replicas", "0", "--cluster-yes"])
                .output()
                .expect("redis-cli must be installed (Debian package `redis-server`; .ci/run installs it)")
        })
        .await
        .expect("redis-cli ran");
        assert!(output.status.success(), "redis-cli --cluster create: {}", String::from_utf8_lossy(&output.stdout));
        cluster.wait_until_ok().await;
        cluster
    }

    /// Every node's URL (what `[fleet] cluster_urls` names).
    pub fn urls(&self) -> Vec<String> {
        self.nodes.iter().map(|node| format!("redis://127.0.0.1:{}", node.port)).collect()
    }

    /// `[fleet] cluster_urls = [...]`, as TOML.
    pub fn urls_toml(&self) -> String {
        let quoted: Vec<String> = self.urls().iter().map(|url| format!("\"{url}\"")).collect();
        format!("cluster_urls = [{}]", quoted.join(", "))
    }

    /// Stops node `node` (SIGKILL: an outage). Its data is lost.
    pub fn stop(&mut self, node: usize) {
        if let Some(mut child) = self.nodes[node].child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts node `node` again on its port, with its cluster file (so it
    /// rejoins with its slots, empty), and waits until the cluster serves.
    pub async fn resume(&mut self, node: usize) {
        assert!(self.nodes[node].child.is_none(), "node {node} is already running");
        self.spawn(node);
        self.wait_for_ping(node).await;
        self.wait_until_ok().await;
    }

    /// A fresh connection to node `node` alone, for the test's own commands.
    pub async fn node_connection(&self, node: usize) -> redis::aio::MultiplexedConnection {
        let client = redis::Client::open(format!("redis://127.0.0.1:{}", self.nodes[node].port)).expect("a URL");
        client.get_multiplexed_async_connection().await.expect("the cluster's node answers")
    }

    /// How many keys node `node` holds.
    pub async fn keys_on(&self, node: usize) -> u64 {
        redis::cmd("DBSIZE").query_async(&mut self.node_connection(node).await).await.expect("DBSIZE")
    }

    /// The slot `key` hashes to (`CLUSTER KEYSLOT`).
    pub async fn slot_of(&self, key: &str) -> u16 {
        let mut connection = self.node_connection(0).await;
        redis::cmd("CLUSTER").arg("KEYSLOT").arg(key).query_async(&mut connection).await.expect("CLUSTER KEYSLOT")
    }

    /// The node that serves `key`'s slot now.
    pub async fn node_of(&self, key: &str) -> usize {
        let slot = self.slot_of(key).await;
        let owner = self.owner_of(slot).await;
        self.index_of(owner.port)
    }

    /// Moves `slot` from its node to node `to`, with its keys, but leaves its
    /// owner unchanged: the old node answers `ASK` for the moved keys.
    pub async fn begin_moving(&self, slot: u16, to: usize) {
        let from = self.owner_of(slot).await;
        let target = self.master_at(self.nodes[to].port).await;
        assert_ne!(from.port, target.port, "slot {slot} is on node {to} already");
        let mut source = self.node_connection(self.index_of(from.port)).await;
        let mut destination = self.node_connection(to).await;
        let setslot = |state: &str, id: &str| redis::cmd("CLUSTER").arg("SETSLOT").arg(slot).arg(state).arg(id).clone();
        let () = setslot("IMPORTING", &from.id).query_async(&mut destination).await.expect("IMPORTING");
        let () = setslot("MIGRATING", &target.id).query_async(&mut source).await.expect("MIGRATING");
        let keys: Vec<String> = redis::cmd("CLUSTER")
            .arg("GETKEYSINSLOT")
            .arg(slot)
            .arg(1000)
            .query_async(&mut source)
            .await
            .expect("GETKEYSINSLOT");
        if !keys.is_empty() {
            let mut migrate = redis::cmd("MIGRATE");
            migrate.arg("127.0.0.1").arg(target.port).arg("").arg(0).arg(5000).arg("KEYS").arg(&keys);
            let _: String = migrate.query_async(&mut source).await.expect("MIGRATE");
        }
    }

    /// Gives `slot` to node `to` on every node (after [`Self::begin_moving`]):
    /// the old node answers `MOVED` from now on.
    pub async fn finish_moving(&self, slot: u16, to: usize) {
        let target = self.master_at(self.nodes[to].port).await;
        // The new owner first, so the old one never redirects to a node that
        // would send the client back.
        for node in std::iter::once(to).chain((0..NODES).filter(|node| *node != to)) {
            let mut connection = self.node_connection(node).await;
            let () = redis::cmd("CLUSTER")
                .arg("SETSLOT")
                .arg(slot)
                .arg("NODE")
                .arg(&target.id)
                .query_async(&mut connection)
                .await
                .expect("SETSLOT NODE");
        }
    }

    fn spawn(&mut self, node: usize) {
        let port = self.nodes[node].port.to_string();
        let file = self.dir.path().join(format!("nodes-{port}.conf"));
        let child = Command::new("redis-server")
            .args(["--port", &port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .args(["--cluster-enabled", "yes", "--cluster-node-timeout", "1000"])
            .arg("--cluster-config-file")
            .arg(&file)
            .arg("--dir")
            .arg(self.dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server must be installed (Debian package `redis-server`; .ci/run installs it)");
        self.nodes[node].child = Some(child);
    }

    async fn wait_for_ping(&self, node: usize) {
        let url = format!("redis://127.0.0.1:{}", self.nodes[node].port);
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let answered = async {
                let client = redis::Client::open(url.as_str())?;
                let mut connection = client.get_multiplexed_async_connection().await?;
                redis::cmd("PING").query_async::<String>(&mut connection).await
            };
            if answered.await.is_ok() {
                return;
            }
            assert!(Instant::now() < deadline, "redis-server did not answer on {url}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Waits until every node answers `cluster_state:ok` and agrees on who
    /// serves every slot.
    async fn wait_until_ok(&self) {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let mut ok = 0;
            for node in 0..NODES {
                let mut connection = self.node_connection(node).await;
                let info: String =
                    redis::cmd("CLUSTER").arg("INFO").query_async(&mut connection).await.expect("CLUSTER INFO");
                if info.lines().any(|line| line.trim() == "cluster_state:ok") {
                    ok += 1;
                }
            }
            if ok == NODES {
                return;
            }
            assert!(Instant::now() < deadline, "the cluster did not reach cluster_state:ok");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The masters as node 0 lists them.
    async fn masters(&self) -> Vec<Master> {
        let mut connection = self.node_connection(0).await;
        let text: String =
            redis::cmd("CLUSTER").arg("NODES").query_async(&mut connection).await.expect("CLUSTER NODES");
        text.lines()
            .filter_map(|line| {
                let fields: Vec<&str> = line.split_whitespace().collect();
                if fields.len() < 8 || !fields[2].contains("master") {
                    return None;
                }
                let port = fields[1].split('@').next()?.rsplit(':').next()?.parse().ok()?;
                let slots = fields[8..]
                    .iter()
                    .filter(|range| !range.starts_with('['))
                    .filter_map(|range| match range.split_once('-') {
                        Some((start, end)) => Some((start.parse().ok()?, end.parse().ok()?)),
                        None => range.parse().ok().map(|slot| (slot, slot)),
                    })
                    .collect();
                Some(Master { id: fields[0].to_owned(), port, slots })
            })
            .collect()
    }

    async fn owner_of(&self, slot: u16) -> Master {
        let masters = self.masters().await;
        let owner =
            masters.iter().find(|master| master.slots.iter().any(|(start, end)| (*start..=*end).contains(&slot)));
        owner.unwrap_or_else(|| panic!("no master serves slot {slot}: {masters:?}")).clone()
    }

    async fn master_at(&self, port: u16) -> Master {
        let masters = self.masters().await;
        let found = masters.iter().find(|master| master.port == port);
        found.unwrap_or_else(|| panic!("no master on port {port}: {masters:?}")).clone()
    }

    fn index_of(&self, port: u16) -> usize {
        self.nodes.iter().position(|node| node.port == port).expect("one of this cluster's nodes")
    }
}

impl Drop for RedisCluster {
    fn drop(&mut self) {
        for node in 0..NODES {
            self.stop(node);
        }
    }
}

/// A free loopback port whose cluster bus port (+ 10000) is free too.
fn port_with_free_bus() -> u16 {
    loop {
        let listener = TcpListener::bind("127.0.0.1:0").expect("a free loopback port");
        let port = listener.local_addr().expect("a bound address").port();
        let bus = port.checked_add(10_000).and_then(|bus| TcpListener::bind(("127.0.0.1", bus)).ok());
        if bus.is_some() {
            return port;
        }
    }
}
