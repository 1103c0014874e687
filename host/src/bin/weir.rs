//! `weir`: the gateway binary over the `weir_host` library.
//!
//! - `weir serve [--config FILE] [--listen ADDR] [--providers-dir DIR]`
//! - `weir providers [--config FILE] [--providers-dir DIR]`
//! - `weir check FILE.wasm [--fixtures DIR]`
#![allow(clippy::print_stdout, reason = "a CLI prints its results")]

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use weir_host::server::Stopped;
use weir_host::{Config, Weir};

#[derive(Debug, Parser)]
#[command(name = "weir", version, about = "One funnel for model calls; providers are WebAssembly components.")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the OpenAI-compatible HTTP gateway.
    Serve {
        #[command(flatten)]
        common: Common,
        /// Address to bind (overrides the config's `listen`; default 127.0.0.1:8080).
        #[arg(long)]
        listen: Option<SocketAddr>,
    },
    /// List every provider: key, source, digest, world version, capabilities,
    /// credential shape, and whether it is configured.
    Providers {
        #[command(flatten)]
        common: Common,
    },
    /// Validate a provider component against the world this host speaks and run
    /// the conformance kit on it (exit 0: every check passed; 1: some failed or it
    /// was rejected).
    Check {
        /// The component file.
        file: PathBuf,
        /// A folder of the provider's own fixture files (`*.json`), run after the
        /// generic checks.
        #[arg(long)]
        fixtures: Option<PathBuf>,
    },
}

#[derive(Debug, Args)]
struct Common {
    /// TOML config (default: the embedded default catalog).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Folder of drop-in provider components (overrides the config's `providers_dir`).
    #[arg(long)]
    providers_dir: Option<PathBuf>,
}

const DEFAULT_LISTEN: &str = "127.0.0.1:8080";
/// How often the providers folder is checked for changes, unless configured.
const DEFAULT_WATCH_MS: u64 = 2_000;

fn main() -> ExitCode {
    let cli = Cli::parse();
    // `check` prints every fault in its report; its log would say each twice.
    let default_filter = if matches!(cli.command, Command::Check { .. }) { "off" } else { "info" };
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default_filter)),
        )
        .with_writer(std::io::stderr)
        .init();
    let result = match cli.command {
        Command::Serve { common, listen } => serve(common, listen),
        Command::Providers { common } => providers(common),
        Command::Check { file, fixtures } => check(&file, fixtures.as_deref()),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("weir: {error:#}");
            ExitCode::FAILURE
        }
    }
}

fn build(common: Common) -> anyhow::Result<Weir> {
    let config = match &common.config {
        Some(path) => Config::from_file(path)?,
        None => Config::embedded_default()?,
    };
    let mut builder = Weir::builder().config(config);
    if let Some(dir) = common.providers_dir {
        builder = builder.providers_dir(dir);
    }
    Ok(builder.build()?)
}

fn serve(common: Common, listen: Option<SocketAddr>) -> anyhow::Result<()> {
    let weir = build(common)?;
    let address = match listen.or(weir.config().listen) {
        Some(address) => address,
        None => DEFAULT_LISTEN.parse()?,
    };
    raise_open_files_limit();
    let runtime = tokio::runtime::Runtime::new()?;
    let stopped = runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind(address).await?;
        let bound = listener.local_addr()?;
        tracing::info!(
            address = %bound,
            models = weir.catalog().models().count(),
            providers = weir.registry().providers().count(),
            rejected = weir.registry().failures().len(),
            providers_dir = %weir.providers_dir().display(),
            "weir gateway ready"
        );
        let watch_every = weir.config().watch_interval_ms.unwrap_or(DEFAULT_WATCH_MS);
        if watch_every > 0 {
            // Detached: it runs for the life of the server.
            drop(weir.watch_providers(std::time::Duration::from_millis(watch_every)));
        }
        println!("listening on {bound}");
        anyhow::Ok(weir_host::server::serve(weir, listener).await?)
    })?;
    // Whatever is still running (cut calls, the folder watch) is abandoned, not
    // awaited: the drain already decided how long to wait.
    runtime.shutdown_background();
    match stopped {
        Stopped::Drained | Stopped::DrainTimedOut { .. } => Ok(()),
        Stopped::Interrupted { calls } => {
            anyhow::bail!("stopped by a second signal with {calls} call(s) in flight")
        }
    }
}

/// A gateway holds two sockets per call (client and upstream); the usual soft
/// limit of 1024 open files would refuse connections long before
/// `max_connections`. The hard limit is the operator's ceiling, so the soft
/// one is raised to it.
#[cfg(unix)]
fn raise_open_files_limit() {
    use rustix::process::{Resource, getrlimit, setrlimit};
    let limit = getrlimit(Resource::Nofile);
    if limit.current.is_some() && limit.current == limit.maximum {
        tracing::info!(soft = ?limit.current, "open-files limit already at its hard limit");
        return;
    }
    let raised = rustix::process::Rlimit { current: limit.maximum, maximum: limit.maximum };
    match setrlimit(Resource::Nofile, raised) {
        Ok(()) => tracing::info!(from = ?limit.current, to = ?limit.maximum, "raised the open-files soft limit"),
        Err(error) => tracing::warn!(%error, soft = ?limit.current, "cannot raise the open-files soft limit"),
    }
}

#[cfg(not(unix))]
fn raise_open_files_limit() {}

fn providers(common: Common) -> anyhow::Result<()> {
    let weir = build(common)?;
    println!(
        "{:<20} {:<9} {:<12} {:<7} {:<10} CAPABILITIES / CREDENTIAL / ENDPOINT",
        "KEY", "SOURCE", "DIGEST", "WORLD", "CONFIGURED"
    );
    let statuses = tokio::runtime::Runtime::new()?.block_on(weir.provider_statuses());
    for status in statuses {
        let source = if status.source.starts_with("embedded:") { "embedded" } else { "file" };
        println!(
            "{:<20} {:<9} {:<12} {:<7} {:<10} {}",
            status.key,
            source,
            &status.digest[..12.min(status.digest.len())],
            status.world_version,
            if status.configured { "yes" } else { "no" },
            status.capabilities.join(",")
        );
        println!("{:<20} source: {}", "", status.source);
        println!("{:<20} credential: {}", "", status.credential);
        println!(
            "{:<20} default endpoint: {}",
            "",
            status.default_endpoint.as_deref().unwrap_or("(none: each model sets `endpoint`)")
        );
        for fact in &status.connection {
            println!("{:<20} {}: {}", "", fact.name, fact.value);
        }
    }
    for failure in weir.registry().failures() {
        println!("REJECTED {failure}");
    }
    Ok(())
}

fn check(file: &std::path::Path, fixtures: Option<&std::path::Path>) -> anyhow::Result<()> {
    let cache_dir = weir_host::default_cache_dir(&Config::embedded_default()?);
    let runtime = tokio::runtime::Runtime::new()?;
    let outcome = runtime.block_on(weir_host::check::check_component(file, fixtures, cache_dir))?;
    println!("{}: world {}, sha256 {}", file.display(), outcome.world_version, outcome.digest);
    println!("{}", outcome.report);
    if outcome.report.passed() { Ok(()) } else { anyhow::bail!("{} does not pass the conformance kit", file.display()) }
}
