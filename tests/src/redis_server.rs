//! A real `redis-server` for one test: on a free loopback port, nothing saved to
//! disk, stopped when dropped. It can be stopped and started again on the same
//! port (an outage). It can require a password ([`RedisServer::start_with_password`]).
//! Needs `redis-server` on `PATH` (Debian's `redis-server` package; `.ci/run`
//! installs it).

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct RedisServer {
    port: u16,
    child: Option<Child>,
    /// What `requirepass` is set to, if anything.
    password: Option<String>,
}

impl RedisServer {
    /// Starts a server and waits until it answers.
    pub async fn start() -> RedisServer {
        let port = free_port();
        let mut server = RedisServer { port, child: None, password: None };
        server.resume().await;
        server
    }

    /// Starts a server that answers only after `AUTH password` (its `default`
    /// user's password), and waits until it answers.
    pub async fn start_with_password(password: &str) -> RedisServer {
        let port = free_port();
        let mut server = RedisServer { port, child: None, password: Some(password.to_owned()) };
        server.resume().await;
        server
    }

    /// The URL with the password (percent-escaped) when there is one.
    pub fn url(&self) -> String {
        match &self.password {
            Some(password) => format!("redis://:{}@127.0.0.1:{}", percent_escaped(password), self.port),
            None => format!("redis://127.0.0.1:{}", self.port),
        }
    }

    pub fn port(&self) -> u16 {
        self.port
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
        let mut command = Command::new("redis-server");
        command.args(["--port", &self.port.to_string(), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]);
        if let Some(password) = &self.password {
            command.args(["--requirepass", password]);
        }
        let child = command
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

    /// How many scripts (`EVALSHA`) the server has run so far.
    pub async fn script_runs(&self) -> u64 {
        let mut connection = self.connection().await;
        let info: String =
            redis::cmd("INFO").arg("commandstats").query_async(&mut connection).await.expect("INFO commandstats");
        info.lines()
            .filter_map(|line| line.strip_prefix("cmdstat_evalsha:calls=")?.split(',').next()?.parse::<u64>().ok())
            .sum()
    }

    /// The scripts (`EVALSHA`) the server ran while `callers` tasks each made
    /// `calls_each` calls of `call` at once.
    pub async fn script_runs_during<F, Fut>(&self, callers: u64, calls_each: u64, call: F) -> u64
    where
        F: Fn() -> Fut + Clone + Send + 'static,
        Fut: std::future::Future<Output = ()> + Send,
    {
        let before = self.script_runs().await;
        let tasks: Vec<_> = (0..callers)
            .map(|_| {
                let call = call.clone();
                tokio::spawn(async move {
                    for _ in 0..calls_each {
                        call().await;
                    }
                })
            })
            .collect();
        for task in tasks {
            task.await.expect("a caller finished");
        }
        self.script_runs().await - before
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

/// `text` with every byte but the URL-unreserved ones written `%XX`, for a
/// URL's user information.
pub fn percent_escaped(text: &str) -> String {
    text.bytes()
        .map(|byte| match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => char::from(byte).to_string(),
            _ => format!("%{byte:02X}"),
        })
        .collect()
}

fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("a free loopback port");
    listener.local_addr().expect("a bound address").port()
}
