//! A real `redis-server` for one test: on a free loopback port, nothing saved to
//! disk, stopped when dropped. It can be stopped and started again on the same
//! port (an outage). Needs `redis-server` on `PATH` (Debian's `redis-server`
//! package; `.ci/run` installs it).

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct RedisServer {
    port: u16,
    child: Option<Child>,
}

impl RedisServer {
    /// Starts a server and waits until it answers.
    pub async fn start() -> RedisServer {
        let port = free_port();
        let mut server = RedisServer { port, child: None };
        server.resume().await;
        server
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// Stops the server (SIGKILL: an outage, not a shutdown). Its data is lost.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts the server again on the same port, empty, and waits until it answers.
    pub async fn resume(&mut self) {
        assert!(self.child.is_none(), "the server is already running");
        let child = Command::new("redis-server")
            .args(["--port", &self.port.to_string(), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server must be installed (Debian package `redis-server`; .ci/run installs it)");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        while self.ping().await.is_err() {
            assert!(Instant::now() < deadline, "redis-server did not answer on port {}", self.port);
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// A fresh connection for the test's own commands.
    pub async fn connection(&self) -> redis::aio::MultiplexedConnection {
        let client = redis::Client::open(self.url()).expect("a loopback redis URL");
        client.get_multiplexed_async_connection().await.expect("the test's redis-server answers")
    }

    async fn ping(&self) -> redis::RedisResult<()> {
        let client = redis::Client::open(self.url())?;
        let mut connection = client.get_multiplexed_async_connection().await?;
        redis::cmd("PING").query_async::<String>(&mut connection).await.map(|_| ())
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.stop();
    }
}

fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("a free loopback port");
    listener.local_addr().expect("a bound address").port()
}
