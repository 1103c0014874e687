//! Drives the real `weir` binary as a child process, the way an operator runs it.
//!
//! Contract with the binary: `weir serve --config FILE --listen 127.0.0.1:0
//! [--providers-dir DIR]` prints exactly one stdout line `listening on 127.0.0.1:PORT` once it
//! accepts connections, logs to stderr, and dies on SIGTERM or SIGKILL. `WEIR_CACHE_DIR` names
//! the precompiled-component cache (a config's `cache_dir` wins over it).
//!
//! Flow of [`Gateway::start_with`]: write the config into a fresh temp dir, spawn the binary
//! there, let two threads drain stdout and stderr (a full pipe would block the child), wait
//! for the listening line, and hand back the base URL. Every child is killed and reaped on
//! drop; when the test is already panicking, the child's stderr is printed so the failure
//! shows the gateway's side.
//!
//! The binary is not built by `cargo test -p weir-tests` (cargo only builds binaries for the
//! integration tests of their own package): run `cargo build -p weir-host` first.

use std::io::{BufRead, BufReader, Read};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde_json::Value;
use tempfile::TempDir;

/// How long `start` waits for the listening line. A debug build compiling a component cold
/// takes seconds; a minute means something is wrong.
pub const STARTUP_TIMEOUT: Duration = Duration::from_secs(60);

/// Environment variable that overrides where [`weir_binary`] looks (e.g. a release build).
pub const WEIR_BINARY_ENV: &str = "WEIR_BINARY";

/// The stdout prefix `weir serve` announces its address with.
const LISTENING_PREFIX: &str = "listening on ";

/// Path of the `weir` binary: `$WEIR_BINARY`, or `weir` in the first ancestor directory of
/// this test executable that has one (tests live in `target/<profile>/deps/`, the binary in
/// `target/<profile>/`; walking up also covers `CARGO_TARGET_DIR` and target-triple layouts).
#[must_use]
pub fn weir_binary() -> PathBuf {
    if let Some(path) = std::env::var_os(WEIR_BINARY_ENV) {
        let path = PathBuf::from(path);
        assert!(path.is_file(), "{WEIR_BINARY_ENV}={} is not a file", path.display());
        return path;
    }
    let exe = std::env::current_exe().expect("current_exe");
    let name = format!("weir{}", std::env::consts::EXE_SUFFIX);
    exe.ancestors().skip(1).map(|dir| dir.join(&name)).find(|candidate| candidate.is_file()).unwrap_or_else(|| {
        panic!("no `{name}` binary above {}: build it first: cargo build -p weir-host", exe.display())
    })
}

/// `target/weir-test-cache` beside the binary's profile directory: shared by all tests so a
/// component is compiled once per build, not once per test.
#[must_use]
pub fn shared_cache_dir() -> PathBuf {
    cache_dir_for(&weir_binary())
}

/// Compiles `component` into [`shared_cache_dir`] once per test process (`weir providers`
/// on a folder holding only it), so the gateways a test starts load its precompiled
/// artifact in milliseconds instead of each compiling it. A large guest (componentize-py's
/// 18 MB CPython) takes tens of seconds to compile in a debug build: several gateways
/// compiling it at once on a 2-core machine would overrun their start-up timeout.
pub fn precompile(component: &Path) {
    static DONE: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());
    let mut done = DONE.lock().unwrap_or_else(PoisonError::into_inner);
    if done.iter().any(|path| path == component) {
        return;
    }
    let folder = tempfile::tempdir().unwrap();
    let name = component.file_name().unwrap_or_else(|| panic!("{} is not a file", component.display()));
    std::fs::copy(component, folder.path().join(name)).unwrap();
    let output = run_cli(&["providers", "--providers-dir", folder.path().to_str().unwrap()], &[]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success() && !stdout.contains("REJECTED"),
        "{} does not load:\n{stdout}",
        component.display()
    );
    done.push(component.to_owned());
}

fn cache_dir_for(binary: &Path) -> PathBuf {
    let target = binary.parent().and_then(Path::parent).unwrap_or_else(|| Path::new("."));
    target.join("weir-test-cache")
}

/// The environment every child gets unless the caller overrides a name (on top of the
/// inherited one: no `env_clear`, so `PATH` and the like still reach the child).
fn default_env(binary: &Path) -> Vec<(String, String)> {
    vec![
        ("WEIR_CACHE_DIR".to_owned(), cache_dir_for(binary).display().to_string()),
        ("RUST_LOG".to_owned(), "info".to_owned()),
        // Plain logs: tracing colours them even into a pipe, which breaks `contains` on
        // `key=value` fields.
        ("NO_COLOR".to_owned(), "1".to_owned()),
        // AWS's default chains must see only what a test gives them: no instance
        // metadata, no profile files of the machine's user.
        ("AWS_EC2_METADATA_DISABLED".to_owned(), "true".to_owned()),
        ("AWS_CONFIG_FILE".to_owned(), "/dev/null".to_owned()),
        ("AWS_SHARED_CREDENTIALS_FILE".to_owned(), "/dev/null".to_owned()),
    ]
}

/// AWS variables a child never inherits from the machine: a test that wants one sets it.
const AWS_INHERITED: [&str; 10] = [
    "AWS_REGION",
    "AWS_DEFAULT_REGION",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_PROFILE",
    "AWS_WEB_IDENTITY_TOKEN_FILE",
    "AWS_ROLE_ARN",
    "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
    "AWS_CONTAINER_CREDENTIALS_FULL_URI",
];

/// `defaults` minus the names the caller sets, then the caller's pairs.
fn merged_env(defaults: &[(String, String)], env: &[(&str, &str)]) -> Vec<(String, String)> {
    defaults
        .iter()
        .filter(|(name, _)| !env.iter().any(|(given, _)| given == name))
        .cloned()
        .chain(env.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())))
        .collect()
}

fn apply_env(command: &mut Command, binary: &Path, env: &[(&str, &str)]) {
    for name in AWS_INHERITED {
        command.env_remove(name);
    }
    command.envs(merged_env(&default_env(binary), env));
}

/// Runs `weir <args>` to completion with the default environment plus `env`.
#[must_use]
pub fn run_cli(args: &[&str], env: &[(&str, &str)]) -> Output {
    let binary = weir_binary();
    let mut command = Command::new(&binary);
    command.args(args).stdin(Stdio::null());
    apply_env(&mut command, &binary, env);
    command.output().unwrap_or_else(|e| panic!("cannot run weir {args:?}: {e}"))
}

/// The closing records of the ledger file at `ledger`, as `weir ledger
/// export` writes them (one JSON object per line; openings and holds left out).
#[must_use]
pub fn closed_records(ledger: &Path) -> Vec<Value> {
    let output = run_cli(&["ledger", "export", "--path", ledger.to_str().unwrap()], &[]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .map(|row| row["record"].clone())
        .filter(|record| record.get("category").is_some())
        .collect()
}

/// The embedded default catalog as shipped, with the entries `ids` pointed at `endpoint`
/// (each `id = "…"` line must appear once) and a ledger in the gateway's own folder: a
/// test of what `weir serve` does with no `--config`, with a fake standing in upstream.
#[must_use]
pub fn embedded_catalog_at(ids: &[&str], endpoint: &str) -> String {
    // The file `weir_host::catalog::EMBEDDED_DEFAULT` compiles in (this crate's library
    // does not depend on the host).
    let mut catalog = include_str!("../../host/catalog/default.toml").to_owned();
    for id in ids {
        let line = format!("id = \"{id}\"\n");
        assert_eq!(catalog.matches(&line).count(), 1, "{id} is in the embedded catalog once");
        catalog = catalog.replace(&line, &format!("{line}endpoint = \"{endpoint}\"\n"));
    }
    format!("{catalog}\n[ledger]\npath = \"ledger.db\"\n")
}

/// A gateway's answer to [`Gateway::post_json`].
#[derive(Debug)]
pub struct Posted {
    pub status: u16,
    pub headers: reqwest::header::HeaderMap,
    pub body: Value,
}

/// A running `weir serve`. Killed and reaped on drop.
pub struct Gateway {
    /// `http://127.0.0.1:PORT`, no trailing slash.
    pub base_url: String,
    addr: SocketAddr,
    child: Child,
    stderr: Arc<Mutex<Vec<u8>>>,
    stderr_thread: Option<JoinHandle<()>>,
    stdout: Arc<Mutex<Vec<String>>>,
    config_path: PathBuf,
    /// Set once stderr was shown in a panic message, so drop does not print it twice.
    stderr_reported: bool,
    _dir: TempDir,
}

impl std::fmt::Debug for Gateway {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gateway")
            .field("base_url", &self.base_url)
            .field("pid", &self.child.id())
            .finish_non_exhaustive()
    }
}

impl Gateway {
    /// Starts `weir serve` with this config and the default environment.
    pub async fn start(config_toml: &str) -> Gateway {
        Self::start_with(config_toml, &[], None).await
    }

    /// Starts `weir serve` with this config, extra environment variables (which override the
    /// defaults `WEIR_CACHE_DIR`, `RUST_LOG` and `NO_COLOR` when given) and optionally a
    /// folder of drop-in provider components, passed as `--providers-dir` (it overrides the
    /// config's `providers_dir`). The child runs in the config's temp dir, and the host
    /// resolves relative paths against the config file, so relative paths in the config
    /// (ledger files and the like) land there and vanish with the gateway.
    pub async fn start_with(config_toml: &str, env: &[(&str, &str)], providers_dir: Option<&Path>) -> Gateway {
        Self::start_binary(&weir_binary(), config_toml, env, providers_dir).await
    }

    /// [`Gateway::start_with`] with an explicit binary: a release build, an older version
    /// for compatibility tests, or a stand-in script that tests this harness itself.
    pub async fn start_binary(
        binary: &Path,
        config_toml: &str,
        env: &[(&str, &str)],
        providers_dir: Option<&Path>,
    ) -> Gateway {
        Self::start_binary_with_args(binary, config_toml, env, providers_dir, &[]).await
    }

    /// [`Gateway::start_with`] with more arguments for `weir serve` (`--prices FILE`, ...).
    pub async fn start_with_args(config_toml: &str, env: &[(&str, &str)], args: &[&str]) -> Gateway {
        Self::start_binary_with_args(&weir_binary(), config_toml, env, None, args).await
    }

    /// [`Gateway::start_with`] on an address chosen before the start (see [`free_port`]): for
    /// a config that must name the gateway's own URL, such as a single sign-on's redirect URI.
    pub async fn start_on(listen: SocketAddr, config_toml: &str, env: &[(&str, &str)]) -> Gateway {
        Self::start_binary_with_args(&weir_binary(), config_toml, env, None, &["--listen", &listen.to_string()]).await
    }

    async fn start_binary_with_args(
        binary: &Path,
        config_toml: &str,
        env: &[(&str, &str)],
        providers_dir: Option<&Path>,
        args: &[&str],
    ) -> Gateway {
        let dir = tempfile::Builder::new().prefix("weir-gateway-").tempdir().expect("temp dir");
        let config_path = dir.path().join("weir.toml");
        std::fs::write(&config_path, config_toml).expect("write config");

        let mut command = Command::new(binary);
        command.arg("serve").arg("--config").arg(&config_path);
        if !args.contains(&"--listen") {
            command.args(["--listen", "127.0.0.1:0"]);
        }
        command.current_dir(dir.path()).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
        if let Some(providers) = providers_dir {
            command.arg("--providers-dir").arg(providers);
        }
        command.args(args);
        apply_env(&mut command, binary, env);
        let mut child = command.spawn().unwrap_or_else(|e| panic!("cannot spawn {}: {e}", binary.display()));

        let stderr = Arc::new(Mutex::new(Vec::new()));
        let stderr_thread = child.stderr.take().map(|pipe| {
            let sink = Arc::clone(&stderr);
            std::thread::spawn(move || drain_stderr(pipe, &sink))
        });
        let stdout = Arc::new(Mutex::new(Vec::new()));
        let (listening_tx, listening_rx) = tokio::sync::oneshot::channel::<String>();
        if let Some(pipe) = child.stdout.take() {
            let lines = Arc::clone(&stdout);
            std::thread::spawn(move || drain_stdout(pipe, &lines, listening_tx));
        }

        let mut gateway = Gateway {
            base_url: String::new(),
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            child,
            stderr,
            stderr_thread,
            stdout,
            config_path,
            stderr_reported: false,
            _dir: dir,
        };
        match tokio::time::timeout(STARTUP_TIMEOUT, listening_rx).await {
            Ok(Ok(line)) => {
                let addr: SocketAddr = line
                    .trim()
                    .parse()
                    .unwrap_or_else(|e| gateway.fail(&format!("unparsable listening line {line:?}: {e}")));
                gateway.addr = addr;
                gateway.base_url = format!("http://{addr}");
                gateway
            }
            Ok(Err(_closed)) => gateway.fail("stdout closed before the listening line"),
            Err(_elapsed) => gateway.fail(&format!("no listening line within {}s", STARTUP_TIMEOUT.as_secs())),
        }
    }

    /// Kills the child and panics with `reason`, its exit status and all it logged.
    fn fail(&mut self, reason: &str) -> ! {
        let status = self.kill_and_wait();
        self.join_stderr();
        self.stderr_reported = true;
        panic!(
            "weir serve failed to start: {reason}\nexit: {status:?}\nconfig: {}\nstdout:\n{}\nstderr:\n{}",
            self.config_path.display(),
            self.stdout_lines().join("\n"),
            self.stderr()
        );
    }

    /// The bound address.
    #[must_use]
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `base_url` + `path` (`path` starts with `/`).
    #[must_use]
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base_url)
    }

    /// POSTs `body` as JSON to `path` with `headers`: the status, the headers,
    /// and the body as JSON (`Null` when it is not).
    pub async fn post_json(&self, path: &str, body: &Value, headers: &[(&str, &str)]) -> Posted {
        let mut request = reqwest::Client::new().post(self.url(path)).json(body);
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let response = request.send().await.unwrap();
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let body = response.json().await.unwrap_or(Value::Null);
        Posted { status, headers, body }
    }

    /// The child's process id.
    #[must_use]
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The config file the gateway was started with (inside its temp dir).
    #[must_use]
    pub fn config_path(&self) -> &Path {
        &self.config_path
    }

    /// The gateway's temp dir, also its working directory.
    #[must_use]
    pub fn dir(&self) -> &Path {
        self._dir.path()
    }

    /// Everything the gateway wrote to stderr so far (its logs).
    #[must_use]
    pub fn stderr(&self) -> String {
        let bytes = self.stderr.lock().unwrap_or_else(PoisonError::into_inner);
        String::from_utf8_lossy(&bytes).into_owned()
    }

    /// Every stdout line so far, the listening line included.
    #[must_use]
    pub fn stdout_lines(&self) -> Vec<String> {
        self.stdout.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// Waits until stderr contains `needle` and returns all of stderr; panics after
    /// `timeout` with what was logged. Logs are written after the response, so a test that
    /// asserts on a log line must wait for it rather than read once.
    pub async fn wait_for_stderr(&self, needle: &str, timeout: Duration) -> String {
        let deadline = Instant::now() + timeout;
        loop {
            let stderr = self.stderr();
            if stderr.contains(needle) {
                return stderr;
            }
            assert!(Instant::now() < deadline, "gateway stderr has no {needle:?} after {timeout:?}:\n{stderr}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Sends `signal` (`TERM`, `INT`, ...) without waiting for anything. For tests of
    /// what the gateway does while it drains.
    pub fn signal(&self, signal: &str) -> bool {
        Command::new("kill")
            .args([&format!("-{signal}"), &self.child.id().to_string()])
            .status()
            .is_ok_and(|status| status.success())
    }

    /// Waits up to `timeout` for the child to exit by itself; `None` if it did not.
    pub fn wait_for_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            match self.child.try_wait() {
                Ok(Some(status)) => {
                    self.join_stderr();
                    return Some(status);
                }
                Ok(None) => std::thread::sleep(Duration::from_millis(20)),
                Err(_) => return None,
            }
        }
        None
    }

    /// Sends SIGTERM and waits up to `timeout` for the exit; `None` if it did not exit (the
    /// drop then kills it). For tests of graceful shutdown.
    pub fn terminate(&mut self, timeout: Duration) -> Option<ExitStatus> {
        // `kill(1)` rather than libc: the workspace denies unsafe code.
        let sent = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .is_ok_and(|status| status.success());
        if !sent {
            return None;
        }
        self.wait_for_exit(timeout)
    }

    /// Waits until the stderr thread has read everything the exited child wrote, so
    /// [`Gateway::stderr`] is complete: the pipe's last bytes can still be in flight when
    /// `try_wait` first reports the exit.
    fn join_stderr(&mut self) {
        if let Some(thread) = self.stderr_thread.take() {
            let _ = thread.join();
        }
    }

    fn kill_and_wait(&mut self) -> Option<ExitStatus> {
        if let Ok(Some(status)) = self.child.try_wait() {
            return Some(status);
        }
        let _ = self.child.kill();
        self.child.wait().ok()
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        let _ = self.kill_and_wait();
        if std::thread::panicking() && !self.stderr_reported {
            self.join_stderr();
            eprintln!(
                "---- weir serve stderr ({}) ----\n{}\n---- end of weir serve stderr ----",
                self.base_url,
                self.stderr()
            );
        }
    }
}

fn drain_stderr(mut pipe: impl Read, sink: &Mutex<Vec<u8>>) {
    let mut buffer = [0_u8; 8192];
    loop {
        match pipe.read(&mut buffer) {
            Ok(0) | Err(_) => return,
            Ok(n) => sink.lock().unwrap_or_else(PoisonError::into_inner).extend_from_slice(&buffer[..n]),
        }
    }
}

fn drain_stdout(pipe: impl Read, lines: &Mutex<Vec<String>>, listening: tokio::sync::oneshot::Sender<String>) {
    let mut listening = Some(listening);
    for line in BufReader::new(pipe).lines() {
        let Ok(line) = line else { return };
        // Record the line before signalling, so a caller woken by the address sees it.
        lines.lock().unwrap_or_else(PoisonError::into_inner).push(line.clone());
        if let Some(addr) = line.strip_prefix(LISTENING_PREFIX)
            && let Some(sender) = listening.take()
        {
            let _ = sender.send(addr.to_owned());
        }
    }
}

/// Serves an in-process gateway router on a fresh loopback port, on the
/// caller's runtime; answers its base URL (`http://127.0.0.1:PORT`).
/// A loopback address no one listens on now (bound, then released): for a gateway that must
/// know its own URL before it starts ([`Gateway::start_on`]).
#[must_use]
pub fn free_port() -> SocketAddr {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a loopback port");
    listener.local_addr().expect("the bound address")
}

pub async fn serve_router(router: axum::Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind a loopback port");
    let base = format!("http://{}", listener.local_addr().expect("the bound address"));
    tokio::spawn(async move { axum::serve(listener, router).await });
    base
}

/// The ledger tests' gateway: model `m` (priced) on `upstream`, and `ledger`
/// as the body of its `[ledger]` table.
pub fn ledger_config(upstream: &crate::FakeUpstream, ledger: &str) -> String {
    format!(
        r#"
[[model]]
id = "m"
provider = "openai-compatible"
wire_id = "qwen3"
endpoint = "{url}"
max_output_tokens = 1000
context_window = 100000
output_tokens = 50
input_price = 1.0
output_price = 2.0

[ledger]
{ledger}
"#,
        url = upstream.base_url()
    )
}

/// A one-message chat request to model `m`.
pub fn hello_m() -> Value {
    serde_json::json!({"model": "m", "messages": [{"role": "user", "content": "Hello"}]})
}

/// Posts `body` to `gateway`'s chat route `calls` times at once and, once
/// `kill_after` answers have been read whole (their first choice's content
/// `content`), kills the gateway with SIGKILL while the rest are in flight.
/// Returns the call ids of the answers read whole: answers a caller saw,
/// whose records must have survived the kill. Fails when the kill did not
/// land mid-run (none answered, or all).
pub async fn kill_mid_load(
    gateway: &Gateway,
    body: &Value,
    calls: usize,
    kill_after: usize,
    content: &str,
) -> Vec<String> {
    let client = reqwest::Client::builder().pool_max_idle_per_host(calls + 100).build().expect("an HTTP client");
    let url = gateway.url("/v1/chat/completions");
    let answered = Arc::new(Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for _ in 0..calls {
        let (client, url, answered, body) = (client.clone(), url.clone(), Arc::clone(&answered), body.clone());
        let content = content.to_owned();
        tasks.push(tokio::spawn(async move {
            let Ok(response) = client.post(&url).json(&body).send().await else { return };
            let call_id = response.headers().get("x-weir-call-id").and_then(|v| v.to_str().ok()).map(str::to_owned);
            // Only an answer read to its end is an answer the caller saw.
            if response.status() == 200
                && let Ok(answer) = response.json::<Value>().await
                && answer["choices"][0]["message"]["content"] == content.as_str()
                && let Some(call_id) = call_id
            {
                answered.lock().unwrap_or_else(PoisonError::into_inner).push(call_id);
            }
        }));
    }
    // The kill comes once answers are arriving (not at a fixed time: on a
    // loaded machine the first answer has come after 700 ms).
    for _ in 0..1000 {
        if answered.lock().unwrap_or_else(PoisonError::into_inner).len() >= kill_after {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(gateway.signal("KILL"), "SIGKILL delivered");
    for task in tasks {
        task.await.expect("a call's task");
    }
    let answered = answered.lock().unwrap_or_else(PoisonError::into_inner).clone();
    assert!(!answered.is_empty() && answered.len() < calls, "the kill landed mid-run: {} answered", answered.len());
    answered
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stdout_drain_reports_the_first_listening_line() {
        let (tx, mut rx) = tokio::sync::oneshot::channel();
        let lines = Mutex::new(Vec::new());
        let input = b"starting\nlistening on 127.0.0.1:4321\nlistening on 127.0.0.1:1\n";
        drain_stdout(&input[..], &lines, tx);
        assert_eq!(rx.try_recv().unwrap(), "127.0.0.1:4321");
        assert_eq!(lines.lock().unwrap().len(), 3);
    }

    #[test]
    fn stdout_drain_drops_the_sender_at_eof_without_a_line() {
        let (tx, mut rx) = tokio::sync::oneshot::channel::<String>();
        let lines = Mutex::new(Vec::new());
        drain_stdout(&b"error: bad config\n"[..], &lines, tx);
        assert!(matches!(rx.try_recv(), Err(tokio::sync::oneshot::error::TryRecvError::Closed)));
    }

    #[test]
    fn caller_env_overrides_defaults() {
        let defaults =
            vec![("WEIR_CACHE_DIR".to_owned(), "/shared".to_owned()), ("RUST_LOG".to_owned(), "info".to_owned())];
        let merged = merged_env(&defaults, &[("RUST_LOG", "debug"), ("X", "1")]);
        assert_eq!(
            merged,
            vec![
                ("WEIR_CACHE_DIR".to_owned(), "/shared".to_owned()),
                ("RUST_LOG".to_owned(), "debug".to_owned()),
                ("X".to_owned(), "1".to_owned()),
            ]
        );
    }
}
