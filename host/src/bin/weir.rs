//! `weir`: the gateway binary over the `weir_host` library.
//!
//! - `weir serve [--config FILE] [--listen ADDR] [--providers-dir DIR]` (and `/metrics` alone on
//!   `[metrics] listen`, when set)
//! - `weir providers [--config FILE] [--providers-dir DIR] [--resolve]`
//! - `weir check FILE.wasm [--fixtures DIR]...`
//! - `weir prices check [--config FILE] [--prices FILE]`
//! - `weir wit --out DIR`
//! - `weir keys new --member NAME [--id ID] [--team TEAM]`
//! - `weir ledger query|verify|export [--config FILE | --path FILE.db] ...`
//! - `weir admin [--url URL] [--token TOKEN] keys|budget|changes|call ...` (the admin API)
//! - `weir config check [FILE]`, `weir config show [--config FILE] [--json]`, `weir config schema`
//! - `weir --version`, `weir completions SHELL`, `weir man`
#![allow(clippy::print_stdout, reason = "a CLI prints its results")]

// The subcommands' own modules live in `weir/` beside this file.
#[path = "weir/about.rs"]
mod about;
#[path = "weir/admin_cmd.rs"]
mod admin_cmd;
#[path = "weir/config_cmd.rs"]
mod config_cmd;
#[path = "weir/load.rs"]
mod load;

use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::SystemTime;

use anyhow::Context;
use clap::{Args, FromArgMatches, Parser, Subcommand};
use weir_host::budget::BudgetStatus;
use weir_host::ledger::{
    AnchorState, AnchorVerdict, AnchoredReport, Filter, GroupBy, LedgerRead, Reader, SegmentCounts, SharedReader,
    SourceReport, Sums, Totals, parse_time,
};
use weir_host::routing::RoleTarget;
use weir_host::server::Stopped;
use weir_host::{Config, Resolution, Weir};

/// mimalloc: the gateway allocates and frees many small buffers per call,
/// across threads; measured against the system allocator in the gateway bench
/// (see the book's performance chapter, docs/src/performance.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Debug, Parser)]
// The version texts are set at run time (see `about::command`).
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
    /// credential shape, whether it is configured, and the endpoint each catalog
    /// entry on it uses. Makes no network call unless `--resolve` is given.
    Providers {
        #[command(flatten)]
        common: Common,
        /// Resolve AWS credentials and region through AWS's default chains, as a
        /// call would (environment, profile, and the instance-metadata endpoint:
        /// a network call). Without it only the secret store is read.
        #[arg(long)]
        resolve: bool,
    },
    /// Validate a provider component against the world this host speaks and run
    /// the conformance kit on it (exit 0: every check passed; 1: some failed or it
    /// was rejected).
    Check {
        /// The component file.
        file: PathBuf,
        /// A folder of the provider's own fixture files (`*.json`), run after the
        /// generic checks; repeat it to run the cases of several folders.
        #[arg(long)]
        fixtures: Vec<PathBuf>,
        /// The config whose catalog the component would serve (default: the
        /// embedded default catalog): a key declaring `thinking` that none of
        /// its entries could reach is warned of.
        #[arg(long)]
        config: Option<PathBuf>,
    },
    /// Write the WIT package this binary speaks (`weir:provider`), the files a
    /// provider component is built against, into a folder.
    Wit {
        /// The folder to write `*.wit` into (created if missing; files of the same
        /// name are replaced).
        #[arg(long)]
        out: PathBuf,
    },
    /// The catalog's prices.
    Prices {
        #[command(subcommand)]
        command: PricesCommand,
    },
    /// Caller keys for the gateway's `[[key]]` list.
    Keys {
        #[command(subcommand)]
        command: KeysCommand,
    },
    /// Read the call ledger: records and sums, the hash chain's check, an export.
    Ledger {
        #[command(subcommand)]
        command: LedgerCommand,
    },
    /// Check a configuration, show what it resolves to, print its JSON Schema.
    Config {
        #[command(subcommand)]
        command: config_cmd::ConfigCommand,
    },
    /// Print a shell completion script (e.g. `weir completions bash >
    /// /usr/share/bash-completion/completions/weir`).
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the man page (roff; e.g. `weir man > /usr/share/man/man1/weir.1`).
    Man {
        /// Write one page per command (`weir.1`, `weir-serve.1`, ...) into this
        /// folder instead (created if missing).
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Change keys and budgets on a running gateway through its admin API.
    Admin(admin_cmd::AdminArgs),
}

#[derive(Debug, Subcommand)]
enum LedgerCommand {
    /// Print the closed calls (a table, then their sums), or the calls left open.
    /// Times (`--since`, `--until`) are RFC 3339 or a duration back from now
    /// (`24h`, `30m`), on the call's start.
    Query {
        #[command(flatten)]
        file: LedgerFile,
        #[arg(long)]
        member: Option<String>,
        /// The caller key's id.
        #[arg(long)]
        key: Option<String>,
        #[arg(long)]
        model: Option<String>,
        /// `ok` or a failure category.
        #[arg(long)]
        category: Option<String>,
        #[arg(long, value_parser = parse_time)]
        since: Option<SystemTime>,
        #[arg(long, value_parser = parse_time)]
        until: Option<SystemTime>,
        /// Sum by `member`, `model` or `key` (default: one total).
        #[arg(long)]
        group_by: Option<GroupBy>,
        /// The calls that opened and never closed (a crash leaves these).
        #[arg(long)]
        unclosed: bool,
        /// One JSON document: `records` and `sums` (or `unclosed`).
        #[arg(long)]
        json: bool,
    },
    /// Recompute the hash chain and check it against its anchor (exit 0:
    /// intact; 1: names the first bad row, or says TAMPERED and why: rows cut
    /// from the end, a recomputed chain, a forged anchor): the file's, or, when
    /// the config ships to PostgreSQL, each source file's chain in the fleet's
    /// ledger. The anchor key is the config's (`--config`).
    Verify {
        #[command(flatten)]
        file: LedgerFile,
        /// Also walk the archived segments' files in this folder (`[ledger]
        /// archive_dir`), in order, linked to the file's first live row.
        #[arg(long, value_name = "DIR")]
        archive: Option<PathBuf>,
    },
    /// Write the rows as JSON lines on stdout: kind, seq, hash and the record.
    Export {
        #[command(flatten)]
        file: LedgerFile,
        /// Only calls started at or after (RFC 3339 or a duration back from now).
        #[arg(long, value_parser = parse_time)]
        since: Option<SystemTime>,
        /// Also write the rows of released segments, read from their archive
        /// files in this folder, before the file's own rows.
        #[arg(long, value_name = "DIR")]
        archive: Option<PathBuf>,
    },
}

/// Which ledger file: the one a config keeps (as `weir serve` resolves it), or
/// a file named directly.
#[derive(Debug, Args)]
struct LedgerFile {
    /// TOML config (default: the embedded default, whose ledger is in the user's data folder).
    #[arg(long)]
    config: Option<PathBuf>,
    /// The ledger file itself.
    #[arg(long, conflicts_with = "config")]
    path: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
enum PricesCommand {
    /// List the entries with no price (exit 1 when a chat entry has none: its
    /// calls would carry no cost and no USD budget could count them).
    Check {
        #[command(flatten)]
        common: Common,
    },
}

#[derive(Debug, Subcommand)]
enum KeysCommand {
    /// Mint a key: prints the token once (give it to the caller) and the
    /// `[[key]]` lines to paste into the config (they hold only its hash).
    New {
        /// The member (person or service) the key belongs to.
        #[arg(long)]
        member: String,
        /// The key's id, shown in logs and records (default: MEMBER-<8 hex>).
        #[arg(long)]
        id: Option<String>,
        #[arg(long)]
        team: Option<String>,
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
    /// A prices file (TOML, a table per entry id) applied over the catalog's
    /// prices: updated without a rebuild or a catalog edit.
    #[arg(long)]
    prices: Option<PathBuf>,
}

/// How often the providers folder is checked for changes, unless configured.
const DEFAULT_WATCH_MS: u64 = 2_000;
/// The config file is polled for key changes at least this often, even with the
/// providers watch off (SIGHUP reloads at once).
const KEYS_WATCH_MIN_MS: u64 = 250;

fn main() -> ExitCode {
    let cli = match Cli::from_arg_matches(&about::command::<Cli>().get_matches()) {
        Ok(cli) => cli,
        Err(error) => error.exit(),
    };
    // `check` prints every fault in its report; its log would say each twice.
    let default_filter = if matches!(cli.command, Command::Check { .. }) { "off" } else { "info" };
    // Every control character a caller's text brings into an event is written
    // escaped, so each log line is one event (see `log_writer`); the
    // formatter's own colour codes would be escaped too, so there are none.
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default_filter)),
        )
        .with_ansi(false)
        .with_writer(weir_host::log_writer::EscapingWriter::new(std::io::stderr))
        .init();
    let result = match cli.command {
        Command::Serve { common, listen } => serve(common, listen),
        Command::Providers { common, resolve } => providers(common, resolve),
        Command::Check { file, fixtures, config } => check(&file, &fixtures, config.as_deref()),
        Command::Wit { out } => write_wit(&out),
        Command::Prices { command: PricesCommand::Check { common } } => return check_prices(&common),
        Command::Keys { command: KeysCommand::New { member, id, team } } => new_key(&member, id, team.as_deref()),
        Command::Ledger { command } => ledger(command),
        Command::Admin(args) => return admin_cmd::run(args),
        Command::Config { command } => return config_cmd::run(command),
        Command::Completions { shell } => about::completions::<Cli>(shell),
        Command::Man { out } => about::man::<Cli>(out.as_deref()),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("weir: {error:#}");
            ExitCode::FAILURE
        }
    }
}

/// `keep_ledger`: keep the call ledger even without a `[ledger]` table (what
/// `weir serve` does; a command that makes no call does not need one).
fn build(common: Common, keep_ledger: bool) -> anyhow::Result<Weir> {
    let config = load_config(&common)?;
    let mut builder = Weir::builder().config(config).ledger_default(keep_ledger);
    if let Some(dir) = common.providers_dir {
        builder = builder.providers_dir(dir);
    }
    Ok(builder.build()?)
}

/// The config (or the embedded catalog) with the prices file applied.
fn load_config(common: &Common) -> anyhow::Result<Config> {
    let mut config = match &common.config {
        Some(path) => Config::from_file(path)?,
        None => Config::embedded_default()?,
    };
    if let Some(path) = &common.prices {
        config.apply_prices(&weir_host::PriceFile::from_file(path)?)?;
    }
    Ok(config)
}

/// `weir prices check`: every entry without a price, one line each; exit 1
/// when one is a chat entry.
fn check_prices(common: &Common) -> ExitCode {
    let config = match load_config(common) {
        Ok(config) => config,
        Err(error) => {
            eprintln!("weir: {error:#}");
            return ExitCode::FAILURE;
        }
    };
    let mut chat_unpriced = 0_usize;
    let mut unpriced = 0_usize;
    for entry in &config.models {
        let chat = entry.kind == weir_host::catalog::RoleKind::Chat;
        if !entry.priced() {
            unpriced += 1;
            chat_unpriced += usize::from(chat);
            println!("NO PRICE {} ({}, provider `{}`)", entry.id, entry.kind.as_str(), entry.provider);
        }
    }
    println!("{} of {} entries priced", config.models.len() - unpriced, config.models.len());
    if chat_unpriced > 0 {
        println!("{chat_unpriced} chat entries have no price: their calls carry no cost");
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

fn serve(common: Common, listen: Option<SocketAddr>) -> anyhow::Result<()> {
    let config_path = common.config.clone();
    return_freed_memory_sooner();
    refuse_transparent_huge_pages();
    let weir = build(common, true)?;
    let load::ListenPlan { address, open_allowed, metrics: metrics_listen, warnings } =
        load::listen_plan(&weir, listen)?;
    for warning in &warnings {
        tracing::warn!("{warning}");
    }
    let server = &weir.config().server;
    raise_open_files_limit(open_files_needed(server.max_connections(), server.max_in_flight()));
    // This thread accepts connections and runs the watches and the metrics
    // listener; client connections are served on `serve`'s lanes, one
    // single-threaded runtime per core (src/server/edge/lanes.rs).
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let ledger = weir.ledger().cloned();
    let stopped = runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind(address).await?;
        let bound = listener.local_addr()?;
        if let Some(metrics_address) = metrics_listen {
            let metrics_listener = tokio::net::TcpListener::bind(metrics_address)
                .await
                .with_context(|| format!("cannot bind [metrics] listen {metrics_address}"))?;
            tracing::info!(address = %metrics_listener.local_addr()?, "metrics listening (/metrics only, no key)");
            let serving = weir.clone();
            // Detached, like the watches: it runs for the life of the server.
            drop(tokio::spawn(async move {
                if let Err(error) = weir_host::server::serve_metrics(serving, metrics_listener).await {
                    tracing::error!(%error, "the metrics listener stopped");
                }
            }));
        }
        tracing::info!(
            address = %bound,
            models = weir.catalog().models().count(),
            providers = weir.registry().providers().count(),
            rejected = weir.registry().failures().len(),
            providers_dir = %weir.providers_dir().display(),
            ledger = %weir.ledger().map_or_else(|| "off".to_owned(), |ledger| ledger.path().display().to_string()),
            shared_limits = %weir.config().fleet.as_ref().map_or_else(
                || "off".to_owned(),
                // The store was made from these settings, so they name a usable Redis.
                |fleet| match weir_host::fleet::RedisTarget::new(fleet) {
                    Ok(target) => format!("{} ({:?} when out)", target.shown(), fleet.on_shared_error),
                    Err(error) => error.to_string(),
                }
            ),
            "weir gateway ready"
        );
        // Detached: it runs for the life of the server.
        drop(tokio::spawn(purge_freed_memory()));
        // Detached: with `[fleet]`, other gateways' open circuits open here too.
        drop(weir.admission().follow_fleet_circuits());
        let watch_every = weir.config().watch_interval_ms.unwrap_or(DEFAULT_WATCH_MS);
        if watch_every > 0 {
            // Detached: it runs for the life of the server.
            drop(weir.watch_providers(std::time::Duration::from_millis(watch_every)));
        }
        // Detached: other gateways' admin changes (and an expired rotation
        // grace) are applied here within a poll.
        if weir.admin_store().is_some() {
            drop(weir_host::server::watch_admin(weir.clone(), weir_host::admin::POLL_EVERY));
        }
        if let Some(path) = config_path {
            let every = std::time::Duration::from_millis(watch_every.max(KEYS_WATCH_MIN_MS));
            drop(weir_host::identity::watch_keys(weir.clone(), path, every, open_allowed));
        }
        println!("listening on {bound}");
        let stopped = weir_host::server::serve(weir.clone(), listener).await?;
        // The spans of the last calls, while the runtime still runs; a
        // collector that does not answer holds the exit 2 s at most.
        let _ = tokio::time::timeout(std::time::Duration::from_secs(2), weir.flush_telemetry()).await;
        // The fleet's leased blocks, while Redis answers within the time.
        let _ = tokio::time::timeout(std::time::Duration::from_secs(1), weir.give_back_leased_capacity()).await;
        anyhow::Ok(stopped)
    })?;
    // Whatever is still running (cut calls, the folder watch) is abandoned, not
    // awaited: the drain already decided how long to wait.
    runtime.shutdown_background();
    // The last records into the file, so their head is anchored (rows left
    // in the log are applied by the next reader or start, and anchored only
    // when a gateway next opens the file); then into the fleet's ledger: what
    // PostgreSQL does not take within the time waits in the file for the next
    // start.
    if let Some(ledger) = ledger {
        ledger.fill_pending(SHIP_AT_EXIT);
        ledger.ship_pending(SHIP_AT_EXIT);
    }
    match stopped {
        Stopped::Drained | Stopped::DrainTimedOut { .. } => Ok(()),
        Stopped::Interrupted { calls } => {
            anyhow::bail!("stopped by a second signal with {calls} call(s) in flight")
        }
    }
}

/// How long a stopping gateway waits for its last records to reach the
/// fleet's PostgreSQL ledger.
const SHIP_AT_EXIT: std::time::Duration = std::time::Duration::from_secs(2);

/// Descriptors beyond the connections: the listener, each lane's epoll and
/// wakers, the ledger's database and journal, the artifact cache, the
/// providers folder's watch, a fleet's Redis connections.
const OPEN_FILES_RESERVE: u64 = 256;

/// The descriptors a gateway serving `max_connections` client connections
/// and `max_in_flight` calls (each with one upstream connection) may hold.
fn open_files_needed(max_connections: u32, max_in_flight: u32) -> u64 {
    u64::from(max_connections) + u64::from(max_in_flight) + OPEN_FILES_RESERVE
}

/// A gateway holds two sockets per call (client and upstream); the usual soft
/// limit of 1024 open files would refuse connections long before
/// `max_connections`. The hard limit is the operator's ceiling, so the soft
/// one is raised to it; a hard limit below what the `[server]` settings
/// (`needed`) may hold is warned of, since past it new connections fail.
#[cfg(unix)]
fn raise_open_files_limit(needed: u64) {
    use rustix::process::{Resource, getrlimit, setrlimit};
    let limit = getrlimit(Resource::Nofile);
    // `None` is the kernel's infinity.
    if limit.maximum.is_some_and(|hard| hard < needed) {
        tracing::warn!(
            hard = ?limit.maximum,
            needed,
            "the open-files hard limit is below what [server] max_connections and max_in_flight may hold: past it, \
             new connections fail. Raise it (systemd: LimitNOFILE=; a shell: ulimit -Hn) or lower the settings"
        );
    }
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
fn raise_open_files_limit(_needed: u64) {}

/// Where the kernel's transparent huge pages are on (`madvise` or `always`),
/// `khugepaged` folds the allocator's sparsely used 4 KiB pages into 2 MiB ones.
/// Measured with the shared bench's load: peak RSS at 32 callers 82–91 MiB with
/// huge pages against 51–59 MiB without, at the same calls/s and CPU per call
/// (paired runs, sides swapped). So mimalloc is built without its request for
/// them (`no_thp`), and the serving process refuses them for every mapping
/// made from here on, which covers the `always` mode too.
#[cfg(target_os = "linux")]
fn refuse_transparent_huge_pages() {
    if let Err(error) = rustix::thread::disable_transparent_huge_pages(true) {
        tracing::warn!(%error, "cannot turn transparent huge pages off: the memory in use may grow in 2 MiB steps");
    }
}

#[cfg(not(target_os = "linux"))]
fn refuse_transparent_huge_pages() {}

/// mimalloc 3's `purge_delay` option (its index in `mi_option_t`; checked by
/// `the_purge_delay_option_is_mimalloc_3s` below).
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// How long freed allocator pages stay committed before mimalloc returns them
/// (arenas: 10 times as long). mimalloc 3 keeps them a second; a burst of
/// concurrent calls then leaves its whole working set resident. Measured with
/// the shared bench's load (production profile, paired runs): peak RSS at 128
/// callers 55–58 MiB with 10 ms against 63–65 MiB with the default, and
/// 42 MiB against 47–48 at 32 callers; CPU per call at 32 callers +3–4 % in
/// three of four pairs. 0 ms saved 2 MiB more at +8–20 % CPU.
const PURGE_DELAY_MS: std::ffi::c_long = 10;

/// Sets [`PURGE_DELAY_MS`]. Called first in `serve`, before any thread
/// starts: mimalloc's option setters are not synchronized.
fn return_freed_memory_sooner() {
    // SAFETY: a plain store into mimalloc's option table, made while this is
    // the process's only thread.
    #[allow(unsafe_code, reason = "mimalloc's options are set through its C API")]
    unsafe {
        libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, PURGE_DELAY_MS);
    }
}

/// How often the accepting thread asks mimalloc to return the freed memory
/// whose purge delay has passed.
const PURGE_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

/// mimalloc returns freed pages to the OS ([`PURGE_DELAY_MS`] after they are
/// freed) only when an allocating thread next passes through its arenas: after
/// a burst of large bodies (10 × 32 MiB, read and parsed at once) the lanes go
/// quiet and up to 170 MiB stayed resident, measured, until the next burst.
/// `mi_collect(false)` does the purges that are due, for every thread's freed
/// pages, without forcing the ones that are not (a look, once a second).
async fn purge_freed_memory() {
    let mut every = tokio::time::interval(PURGE_EVERY);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        every.tick().await;
        // SAFETY: mimalloc's own collection entry point, callable from any thread.
        #[allow(unsafe_code, reason = "mimalloc's collection is called through its C API")]
        unsafe {
            libmimalloc_sys::mi_collect(false);
        }
    }
}

fn providers(common: Common, resolve: bool) -> anyhow::Result<()> {
    let weir = build(common, false)?;
    let folder = weir.providers_dir();
    if folder.is_dir() {
        println!("providers folder: {}", folder.display());
    } else {
        println!("providers folder: {} does not exist: only the embedded providers are loaded", folder.display());
    }
    println!(
        "{:<20} {:<9} {:<12} {:<7} {:<10} CAPABILITIES / CREDENTIAL / ENDPOINT",
        "KEY", "SOURCE", "DIGEST", "WORLD", "CONFIGURED"
    );
    let resolution = if resolve { Resolution::Full } else { Resolution::Local };
    let statuses = tokio::runtime::Runtime::new()?.block_on(weir.provider_statuses_with(resolution));
    let models = weir.model_statuses();
    for status in &statuses {
        let source = if status.source.starts_with("embedded:") { "embedded" } else { "file" };
        println!(
            "{:<20} {:<9} {:<12} {:<7} {:<10} {}",
            status.key,
            source,
            &status.digest[..12.min(status.digest.len())],
            status.world_version,
            match (status.configured, status.resolved) {
                (true, _) => "yes",
                (false, true) => "no",
                // Not in the secret store; AWS's chains were not asked.
                (false, false) => "unknown",
            },
            status.capabilities.join(",")
        );
        println!("{:<20} source: {} ({})", "", status.source, status.trust.as_str());
        println!("{:<20} credential: {}", "", status.credential);
        println!("{:<20} default endpoint: {}", "", default_endpoint_line(status));
        for fact in &status.connection {
            println!("{:<20} {}: {}", "", fact.name, fact.value);
        }
        // What a call to each catalog entry on this provider will use: the entry's
        // `endpoint`, else the provider's default.
        // An entry linked here names another provider key: the link is shown.
        for model in models.iter().filter(|model| model.available && serving_key(model) == status.key) {
            let endpoint = model.endpoint.as_deref().unwrap_or("(none)");
            match &model.linked_provider {
                Some(_) => println!(
                    "{:<20} model {}: endpoint {endpoint} (linked: names provider `{}`, wire id `{}`)",
                    "", model.id, model.provider, model.wire_id
                ),
                None => println!("{:<20} model {}: endpoint {endpoint}", "", model.id),
            }
            match (model.kind, model.embedding_dimensions) {
                ("chat", _) => println!("{:<20}   capabilities: {}", "", model.capabilities.join(",")),
                (kind, Some(width)) => println!("{:<20}   {kind}, {width} wide", ""),
                (kind, None) => println!("{:<20}   {kind}", ""),
            }
            println!("{:<20}   prices: {}", "", price_line(model));
            for deployment in &model.deployments {
                println!(
                    "{:<20}   deployment {}: endpoint {}, wire id {}, weight {}, circuit {}{}",
                    "",
                    deployment.id,
                    deployment.endpoint.as_deref().unwrap_or("(none)"),
                    deployment.wire_id,
                    deployment.weight,
                    deployment.circuit,
                    if deployment.benched { ", benched (credential refused)" } else { "" }
                );
            }
        }
    }
    for model in models.iter().filter(|model| !model.available) {
        let reason = model.unavailable_reason.as_deref().unwrap_or("no provider serves it");
        println!(
            "UNAVAILABLE model {} (provider `{}`, wire id `{}`): {reason}",
            model.id, model.provider, model.wire_id
        );
    }
    for failure in weir.registry().failures() {
        println!("REJECTED {failure}");
    }
    print_roles(&weir, resolve)?;
    if statuses.iter().any(|status| !status.resolved) {
        println!("AWS credentials and region: the secret store only; `--resolve` asks AWS's default chains too");
    }
    Ok(())
}

/// A provider's default endpoint as `weir providers` shows it: an untrusted
/// component's is declared but never used, so it is not shown as if it were.
fn default_endpoint_line(status: &weir_host::ProviderStatus) -> String {
    match (&status.default_endpoint, status.trust.honours_defaults()) {
        (None, _) => "(none: each model sets `endpoint`)".to_owned(),
        (Some(endpoint), true) => endpoint.clone(),
        (Some(endpoint), false) => {
            format!("(declared {endpoint}, never used: an untrusted component's entries set `endpoint`)")
        }
    }
}

/// An entry's prices as `weir providers` shows them.
fn price_line(model: &weir_host::ModelStatus) -> String {
    let prices = &model.prices;
    let mut line = match (prices.search, prices.input, prices.output) {
        (Some(search), ..) => format!("${search} per thousand searches (up to 100 documents each)"),
        (None, Some(input), Some(output)) => token_prices(prices, input, output),
        (None, ..) => return "none declared".to_owned(),
    };
    match &model.prices_as_of {
        Some(date) => line.push_str(&format!(" (as of {date})")),
        None => line.push_str(" (undated)"),
    }
    line
}

/// Token prices as `weir providers` shows them.
fn token_prices(prices: &weir_host::record::Prices, input: f64, output: f64) -> String {
    let mut line = format!("input ${input}, output ${output}");
    if let Some(read) = prices.cache_read {
        line.push_str(&format!(", cache read ${read}"));
    }
    if let Some(write) = prices.cache_write {
        line.push_str(&format!(", cache write ${write}"));
    }
    line.push_str(" per million tokens");
    if let Some(web_search) = prices.web_search {
        line.push_str(&format!(", web search ${web_search} per thousand searches"));
    }
    if let Some(preview) = prices.web_search_preview {
        line.push_str(&format!(", web search preview ${preview} per thousand calls"));
    }
    line
}

/// The `[pins]` and every role: what it serves and, with `--resolve` (which
/// may ask AWS's chains, as a call would), the entry it resolves to now.
fn print_roles(weir: &Weir, resolve: bool) -> anyhow::Result<()> {
    for (grade, target) in &weir.config().pins {
        println!("PIN {grade} -> {target}");
    }
    let runtime = tokio::runtime::Runtime::new()?;
    for role in weir.roles().iter() {
        let serves = match &role.serves {
            RoleTarget::Grade(grade) => format!("grade {grade}"),
            RoleTarget::Entry(entry) => format!("entry {entry}"),
        };
        let now = match resolve {
            true => match runtime.block_on(weir.resolve(&role.name, None)) {
                Ok(entry) => format!("now {entry}"),
                Err(error) => format!("unavailable: {error}"),
            },
            false => "(`--resolve` shows what it resolves to now)".to_owned(),
        };
        println!("ROLE {} ({}): {serves}; {now}", role.name, role.kind.as_str());
    }
    Ok(())
}

/// The provider a catalog entry's calls go to: the one it is linked to, else its own.
fn serving_key(model: &weir_host::ModelStatus) -> &str {
    model.linked_provider.as_deref().unwrap_or(&model.provider)
}

/// The newest WIT package this binary speaks, as built into it: a component
/// built against these files is one this host loads. The frozen older versions
/// (`wit/frozen/`) are not written: this host loads their components too, but
/// a new component targets the newest.
const WIT_FILES: [(&str, &str); 8] = [
    ("types.wit", include_str!("../../../wit/types.wit")),
    ("describe.wit", include_str!("../../../wit/describe.wit")),
    ("chat.wit", include_str!("../../../wit/chat.wit")),
    ("embeddings.wit", include_str!("../../../wit/embeddings.wit")),
    ("rerank.wit", include_str!("../../../wit/rerank.wit")),
    ("logprobs.wit", include_str!("../../../wit/logprobs.wit")),
    ("native.wit", include_str!("../../../wit/native.wit")),
    ("worlds.wit", include_str!("../../../wit/worlds.wit")),
];

fn write_wit(out: &std::path::Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(out).map_err(|error| anyhow::anyhow!("cannot create {}: {error}", out.display()))?;
    for (name, text) in WIT_FILES {
        let path = out.join(name);
        std::fs::write(&path, text).map_err(|error| anyhow::anyhow!("cannot write {}: {error}", path.display()))?;
    }
    println!(
        "wrote weir:provider@{} (its worlds are in worlds.wit) to {}",
        weir_host::plugin::WORLD_VERSION,
        out.display()
    );
    Ok(())
}

fn check(file: &std::path::Path, fixtures: &[PathBuf], config: Option<&std::path::Path>) -> anyhow::Result<()> {
    let config = match config {
        Some(path) => Config::from_file(path)?,
        None => Config::embedded_default()?,
    };
    let cache_dir = weir_host::default_cache_dir(&config);
    let runtime = tokio::runtime::Runtime::new()?;
    let outcome = runtime.block_on(weir_host::check::check_component(file, fixtures, cache_dir, &config.models))?;
    println!("{}: world {}, sha256 {}", file.display(), outcome.world_version, outcome.digest);
    println!("{}", outcome.report);
    if outcome.report.passed() { Ok(()) } else { anyhow::bail!("{} does not pass the conformance kit", file.display()) }
}

fn new_key(member: &str, id: Option<String>, team: Option<&str>) -> anyhow::Result<()> {
    let key = weir_host::identity::new_key().map_err(anyhow::Error::msg)?;
    // The default id names the member and the hash's first digits: recognizable
    // in logs, and still not the secret.
    let digits: String = key.hash.trim_start_matches("sha256:").chars().take(8).collect();
    let id = id.unwrap_or_else(|| format!("{member}-{digits}"));
    println!("# The token, shown once: give it to the caller (api_key=...). Weir keeps only its hash.");
    println!("# {}", key.token);
    println!("[[key]]");
    println!("id = {}", toml_string(&id));
    println!("member = {}", toml_string(member));
    if let Some(team) = team {
        println!("team = {}", toml_string(team));
    }
    println!("hash = \"{}\"", key.hash);
    Ok(())
}

/// A TOML basic string (the JSON escaping rules are a subset TOML accepts).
fn toml_string(text: &str) -> String {
    serde_json::Value::String(text.to_owned()).to_string()
}

fn ledger(command: LedgerCommand) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    match command {
        LedgerCommand::Query { file, member, key, model, category, since, until, group_by, unclosed, json } => {
            let reader = open_for_query(&file)?;
            let filter = Filter { member, key_id: key, model, category, since, until };
            if unclosed {
                let openings = reader.unclosed(&filter)?;
                if json {
                    writeln!(out, "{}", serde_json::json!({ "unclosed": openings }))?;
                    return Ok(());
                }
                writeln!(out, "{:<24} {:<36} {:<20} {:<16} MODEL", "STARTED", "CALL", "KEY", "MEMBER")?;
                for opening in &openings {
                    writeln!(
                        out,
                        "{:<24} {:<36} {:<20} {:<16} {}",
                        humantime::format_rfc3339_seconds(opening.started_at).to_string(),
                        opening.call_id,
                        opening.who.key_id.as_deref().unwrap_or("-"),
                        opening.who.member.as_deref().unwrap_or("-"),
                        opening.model
                    )?;
                }
                writeln!(out, "{} call(s) opened and never closed", openings.len())?;
                return Ok(());
            }
            let records = reader.records(&filter)?;
            let sums = reader.sums(&filter, group_by)?;
            let budgets = budgets_from_ledger(&file, reader.as_ref())?;
            if json {
                let mut body = serde_json::json!({ "records": records, "sums": sums });
                if let Some(budgets) = &budgets {
                    body["budgets"] = budgets.iter().map(BudgetStatus::to_json).collect();
                }
                writeln!(out, "{body}")?;
                return Ok(());
            }
            writeln!(
                out,
                "{:<24} {:<36} {:<20} {:<16} {:<24} {:<20} {:>9} {:>9} {:>10} {:>9}",
                "STARTED", "CALL", "KEY", "MEMBER", "MODEL", "CATEGORY", "IN", "OUT", "COST", "LATENCY"
            )?;
            for record in &records {
                writeln!(
                    out,
                    "{:<24} {:<36} {:<20} {:<16} {:<24} {:<20} {:>9} {:>9} {:>10} {:>7}ms",
                    humantime::format_rfc3339_seconds(record.started_at).to_string(),
                    record.call_id,
                    record.who.key_id.as_deref().unwrap_or("-"),
                    record.who.member.as_deref().unwrap_or("-"),
                    record.model,
                    record.category,
                    record.usage.input,
                    record.usage.output,
                    record.cost_usd.map_or_else(|| "-".to_owned(), |cost| format!("${cost:.4}")),
                    record.latency_ms
                )?;
            }
            write_sums(&mut out, &sums)?;
            if let Some(budgets) = &budgets {
                write_budgets(&mut out, budgets)?;
            }
            Ok(())
        }
        LedgerCommand::Verify { file, archive } => {
            let configured = file.path.is_none().then(|| configured_ledger(&file)).transpose()?;
            let key = configured.as_ref().and_then(|settings| settings.anchor_key.clone());
            if let Some(url) = configured.as_ref().and_then(|settings| settings.postgres.clone()) {
                let sources = SharedReader::connect(&url)?.verify(key.as_ref())?;
                for SourceReport { source, report } in &sources {
                    writeln!(out, "ok: source {source}: {} rows, {} calls", report.rows, report.calls)?;
                }
                writeln!(out, "ok: {} source file(s) in the fleet's ledger", sources.len())?;
                writeln!(out, "anchors: {}", macs_checked(key.is_some()))?;
                let ledger_path = configured.as_ref().map(|settings| settings.path.clone()).unwrap_or_default();
                let store = weir_host::admin::AdminStore::new(&ledger_path, Some(url));
                return verify_admin(&mut out, store, key.as_ref());
            }
            let reader = open_ledger(&file)?;
            let AnchoredReport { chain, anchor, segments } = match &archive {
                Some(dir) => reader.verify_with_archive(key.as_ref(), dir)?,
                None => reader.verify_anchored(key.as_ref())?,
            };
            writeln!(out, "ok: {} rows, {} calls", chain.rows, chain.calls)?;
            write_segments(&mut out, &segments, archive.is_some())?;
            match anchor {
                AnchorState::Anchored { seq, keyed } => {
                    writeln!(out, "anchor: the newest anchored head, row {seq}, matches ({})", macs_checked(keyed))?
                }
                AnchorState::Empty => writeln!(out, "anchor: none yet (the anchor file holds no line)")?,
                AnchorState::Unanchored => eprintln!(
                    "warning: unanchored: this ledger has no anchor file (written before anchoring), so rows cut from \
                     its end cannot be seen; a gateway opening it anchors it from then on"
                ),
            }
            let ledger_path = match (&file.path, &configured) {
                (Some(path), _) => path.clone(),
                (None, Some(settings)) => settings.path.clone(),
                (None, None) => return Ok(()),
            };
            let admin_file = ledger_path.with_file_name(weir_host::admin::store::FILE_NAME);
            if !admin_file.exists() {
                return Ok(());
            }
            verify_admin(&mut out, weir_host::admin::AdminStore::new(&ledger_path, None), key.as_ref())
        }
        LedgerCommand::Export { file, since, archive } => {
            open_ledger(&file)?.export_with_archive(since, archive.as_deref(), &mut out)?;
            Ok(())
        }
    }
}

/// What `verify` says of the segments: none when there are none.
fn write_segments(out: &mut impl Write, segments: &SegmentCounts, archive: bool) -> anyhow::Result<()> {
    if segments.sealed > 0 {
        writeln!(
            out,
            "segments: {} sealed, {} released (the file holds rows from {} on)",
            segments.sealed, segments.released, segments.first_live
        )?;
    }
    if archive {
        writeln!(out, "archive: {} file(s), linked to the file's first live row", segments.archives)?;
    } else if segments.released > 0 {
        writeln!(out, "archive: not walked (the released rows are checked with --archive DIR)")?;
    }
    Ok(())
}

/// The admin plane's chain of changes, beside the ledger's, and its anchor.
fn verify_admin(
    out: &mut impl Write,
    store: weir_host::admin::AdminStore,
    key: Option<&weir_host::ledger::AnchorKey>,
) -> anyhow::Result<()> {
    let report = match store.verify(key)? {
        Ok(report) => report,
        Err(broken) => anyhow::bail!("the admin changes' chain is broken: {broken}"),
    };
    writeln!(out, "ok: admin changes: {} rows, chain intact ({})", report.rows, store.describe())?;
    match report.anchor {
        AnchorVerdict::Anchored { seq } => writeln!(
            out,
            "admin anchor: the newest anchored head, change {seq}, matches ({})",
            macs_checked(key.is_some())
        )?,
        AnchorVerdict::Empty => writeln!(out, "admin anchor: none yet (the anchor file holds no line)")?,
        AnchorVerdict::NoFile => eprintln!(
            "warning: the admin changes have no anchor file (made before anchoring, or by another gateway of the \
             fleet), so changes cut from their end cannot be seen"
        ),
    }
    Ok(())
}

/// How an anchor's MACs were treated.
fn macs_checked(keyed: bool) -> &'static str {
    match keyed {
        true => "MACs verified with the anchor key",
        false => "no anchor key given: MACs not checked (use --config with `anchor_key_env` or `anchor_key_file`)",
    }
}

/// The ledger file `--path` names, else the one the config keeps.
fn open_ledger(file: &LedgerFile) -> anyhow::Result<Reader> {
    Ok(match &file.path {
        Some(path) => Reader::open(path)?,
        None => {
            let settings = configured_ledger(file)?;
            Reader::open_within(&settings.path, settings.max_bytes)?
        }
    })
}

/// What `query` reads: the file `--path` names, else the fleet's PostgreSQL
/// ledger when the config ships to one, else the config's file.
fn open_for_query(file: &LedgerFile) -> anyhow::Result<Box<dyn LedgerRead>> {
    if file.path.is_some() {
        return Ok(Box::new(open_ledger(file)?));
    }
    let settings = configured_ledger(file)?;
    Ok(match &settings.postgres {
        Some(target) => Box::new(SharedReader::connect(target)?),
        None => Box::new(Reader::open_within(&settings.path, settings.max_bytes)?),
    })
}

/// The ledger `--config` (else the embedded config) keeps.
fn configured_ledger(file: &LedgerFile) -> anyhow::Result<weir_host::ledger::LedgerConfig> {
    let config = match &file.config {
        Some(path) => Config::from_file(path)?,
        None => Config::embedded_default()?,
    };
    match weir_host::ledger::ledger_config(&config, true).with_context(|| config.origin.clone())? {
        Some(settings) => Ok(settings),
        None => anyhow::bail!("{} keeps no ledger; name the file with --path", config.origin),
    }
}

/// The budgets of `--config` as they stand by the ledger alone: the spend of
/// the current day and month, read back as a starting gateway reads it. A
/// running gateway's holds are its own (`GET /v1/usage` shows them); here
/// none is held. `None` without `--config` or without budgets.
fn budgets_from_ledger(file: &LedgerFile, reader: &dyn LedgerRead) -> anyhow::Result<Option<Vec<BudgetStatus>>> {
    let Some(path) = &file.config else { return Ok(None) };
    let config = Config::from_file(path)?;
    let book = weir_host::budget::book(&config, std::sync::Arc::new(weir_host::budget::SystemClock))
        .map_err(|message| anyhow::anyhow!("{}: {message}", config.origin))?;
    // The admin plane's budgets join the file's, as a gateway's book has them.
    if let Some(settings) = weir_host::ledger::ledger_config(&config, true)?
        && (settings.postgres.is_some() || settings.path.with_file_name(weir_host::admin::store::FILE_NAME).exists())
    {
        let state = weir_host::admin::AdminStore::new(&settings.path, settings.postgres).load()?;
        let mut limits = weir_host::budget::file_limits(&config);
        limits.extend(state.limits());
        book.replace_limits(limits);
    }
    if book.is_empty() {
        return Ok(None);
    }
    weir_host::budget::rebuild(&book, reader)?;
    Ok(Some(book.status()))
}

fn write_budgets(out: &mut impl Write, budgets: &[BudgetStatus]) -> std::io::Result<()> {
    writeln!(
        out,
        "\n{:<8} {:<20} {:<6} {:>14} {:>14} {:>14}  RESETS",
        "BUDGET", "NAME", "PERIOD", "LIMIT", "SPENT", "REMAINING"
    )?;
    for status in budgets {
        writeln!(
            out,
            "{:<8} {:<20} {:<6} {:>14} {:>14} {:>14}  {}",
            status.scope.kind(),
            status.scope.name(),
            status.period.as_str(),
            status.limit.to_string(),
            status.spent.to_string(),
            status.remaining.to_string(),
            humantime::format_rfc3339_seconds(status.resets_at)
        )?;
    }
    Ok(())
}

fn write_sums(out: &mut impl Write, sums: &Sums) -> std::io::Result<()> {
    let line = |out: &mut dyn Write, label: &str, totals: &Totals| {
        let tokens = &totals.tokens;
        let partial = match totals.calls_without_cost {
            0 => String::new(),
            n => format!(" (not counting {n} call(s) without a price)"),
        };
        writeln!(
            out,
            "{label}: {} call(s), tokens input {} output {} cache_read {} cache_write {} reasoning {}, cost ${:.4}{partial}",
            totals.calls,
            tokens.input,
            tokens.output,
            tokens.cache_read,
            tokens.cache_write,
            tokens.reasoning,
            totals.cost_usd
        )
    };
    writeln!(out)?;
    for group in &sums.groups {
        let label = format!("{} {}", group.by.as_str(), group.value.as_deref().unwrap_or("(none)"));
        line(out, &label, &group.totals)?;
    }
    line(out, "total", &sums.total)
}

#[cfg(test)]
mod tests {
    use super::MI_OPTION_PURGE_DELAY;

    /// mimalloc numbers its options by their place in an enum that has changed
    /// between versions: the index `serve` sets must be mimalloc 3's purge
    /// delay, whose default is a second.
    #[test]
    fn the_purge_delay_option_is_mimalloc_3s() {
        #[allow(unsafe_code, reason = "mimalloc's options are read through its C API")]
        // SAFETY: a read of mimalloc's option table; nothing in this test binary sets options.
        let delay_ms = unsafe { libmimalloc_sys::mi_option_get(MI_OPTION_PURGE_DELAY) };
        assert_eq!(delay_ms, 1_000);
    }
}
