//! `weir config check|show|schema`: a configuration looked at without
//! running it. `check` and `show` build the gateway's state with
//! [`weir_host::WeirBuilder::inspect`], the same steps `weir serve` runs at
//! load with nothing opened (no ledger file, no connection, no listener),
//! then make `serve`'s own pre-bind checks ([`crate::load::listen_plan`]).

use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Subcommand};
use weir_host::{Config, Resolution, Weir};

use crate::load::{ListenPlan, listen_plan};

#[derive(Debug, Subcommand)]
pub enum ConfigCommand {
    /// Check a configuration as `weir serve` would load it, without binding a
    /// port or calling anything: syntax (with line and column), unknown keys,
    /// components, links, roles, budgets, prices, keys, ledger and fleet
    /// settings. Credentials named but unset are warnings (their ids, never a
    /// value). Exit 0: it would load (warnings allowed); 1: it would not.
    Check {
        /// The TOML config (default: the embedded default catalog).
        file: Option<PathBuf>,
        #[command(flatten)]
        load: LoadArgs,
        /// The address `serve` would be given with `--listen`.
        #[arg(long)]
        listen: Option<SocketAddr>,
    },
    /// Print the resolved catalog: entries, roles and what they resolve to,
    /// providers, budgets. No network call: credentials are looked up in the
    /// secret store only.
    Show {
        /// The TOML config (default: the embedded default catalog).
        #[arg(long)]
        config: Option<PathBuf>,
        #[command(flatten)]
        load: LoadArgs,
        /// One JSON document instead of tables.
        #[arg(long)]
        json: bool,
    },
    /// Print the configuration's JSON Schema (draft 2020-12), generated from
    /// the configuration types: an editor's TOML extension can check and
    /// complete `weir.toml` with it.
    Schema,
}

/// What `serve` takes beside the file.
#[derive(Debug, Args)]
pub struct LoadArgs {
    /// Folder of drop-in provider components (overrides the config's `providers_dir`).
    #[arg(long)]
    providers_dir: Option<PathBuf>,
    /// A prices file applied over the catalog's prices.
    #[arg(long)]
    prices: Option<PathBuf>,
}

pub fn run(command: ConfigCommand) -> ExitCode {
    let result = match command {
        ConfigCommand::Check { file, load, listen } => check(file, load, listen),
        ConfigCommand::Show { config, load, json } => show(config, load, json),
        ConfigCommand::Schema => schema(),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::FAILURE
        }
    }
}

/// The configuration as `serve` builds it, inspected.
fn inspect(file: Option<PathBuf>, load: LoadArgs) -> anyhow::Result<Weir> {
    let mut config = match &file {
        Some(path) => Config::from_file(path)?,
        None => Config::embedded_default()?,
    };
    if let Some(path) = &load.prices {
        config.apply_prices(&weir_host::PriceFile::from_file(path)?)?;
    }
    let mut builder = Weir::builder().config(config).ledger_default(true);
    if let Some(dir) = load.providers_dir {
        builder = builder.providers_dir(dir);
    }
    Ok(builder.inspect()?)
}

fn check(file: Option<PathBuf>, load: LoadArgs, listen: Option<SocketAddr>) -> anyhow::Result<()> {
    let weir = inspect(file, load)?;
    let ListenPlan { address, warnings, .. } = listen_plan(&weir, listen)?;
    let mut out = std::io::stdout().lock();
    for warning in warnings.iter().chain(&catalog_warnings(&weir)) {
        writeln!(out, "warning: {warning}")?;
    }
    let config = weir.config();
    writeln!(
        out,
        "ok: {}: {} entries, {} roles, {} providers loaded, {} keys, {} budgets; `weir serve` would listen on {address}",
        config.origin,
        config.models.len(),
        config.roles.len(),
        weir.registry().providers().count(),
        weir.keys().len(),
        weir.budgets().status().len(),
    )?;
    Ok(())
}

/// What loads but would not serve as written: unset credentials, entries no
/// provider serves, rejected components, chat entries without a price.
fn catalog_warnings(weir: &Weir) -> Vec<String> {
    let mut warnings = Vec::new();
    for unset in weir.unset_credentials() {
        let fallback = match unset.aws_chain {
            true => " (AWS's default chain is asked at the call)",
            false => "",
        };
        warnings.push(format!(
            "credential `{}` is not set ({}){fallback}: needed by {}",
            unset.credential_id,
            unset.location,
            unset.needed_by.join(", ")
        ));
    }
    for model in weir.model_statuses() {
        if let Some(reason) = model.unavailable_reason.filter(|_| !model.available) {
            warnings.push(format!("model `{}` is unavailable: {reason}", model.id));
        }
    }
    for failure in weir.registry().failures() {
        warnings.push(format!("component rejected: {failure}"));
    }
    for model in &weir.config().models {
        if model.kind == weir_host::catalog::RoleKind::Chat && !model.priced() {
            warnings.push(format!("model `{}` has no price: its calls carry no cost", model.id));
        }
    }
    warnings
}

fn show(file: Option<PathBuf>, load: LoadArgs, json: bool) -> anyhow::Result<()> {
    let weir = inspect(file, load)?;
    let providers =
        tokio::runtime::Builder::new_current_thread().build()?.block_on(weir.provider_statuses_with(Resolution::Local));
    let models = weir.model_statuses();
    let roles = weir.role_statuses();
    let budgets = weir.budgets().status();
    let mut out = std::io::stdout().lock();
    if json {
        let body = serde_json::json!({
            "origin": weir.config().origin,
            "entries": models,
            "roles": roles,
            "providers": providers,
            "budgets": budgets.iter().map(weir_host::budget::BudgetStatus::to_json).collect::<Vec<_>>(),
            "unset_credentials": weir.unset_credentials(),
        });
        writeln!(out, "{body:#}")?;
        return Ok(());
    }
    writeln!(out, "ENTRIES")?;
    writeln!(
        out,
        "{:<28} {:<9} {:<24} {:<10} {:<10} PRICES (USD per million in/out)",
        "ID", "KIND", "PROVIDER", "GRADE", "SERVED"
    )?;
    for model in &models {
        let served = match (model.available, &model.linked_provider) {
            (true, Some(linked)) => format!("via {linked}"),
            (true, None) => "yes".to_owned(),
            (false, _) => "no".to_owned(),
        };
        let prices = match (model.prices.input, model.prices.output) {
            (Some(input), Some(output)) => format!("{input} / {output}"),
            _ => "-".to_owned(),
        };
        writeln!(
            out,
            "{:<28} {:<9} {:<24} {:<10} {:<10} {prices}",
            model.id,
            model.kind,
            model.provider,
            model.grade.as_deref().unwrap_or("-"),
            served
        )?;
    }
    writeln!(out, "\nROLES")?;
    writeln!(out, "{:<20} {:<9} {:<32} {:<28} CANDIDATES", "NAME", "KIND", "SERVES", "RESOLVES TO")?;
    for role in &roles {
        writeln!(
            out,
            "{:<20} {:<9} {:<32} {:<28} {}{}",
            role.name,
            role.kind,
            role.serves,
            role.resolves_to.as_deref().unwrap_or("(none callable)"),
            role.candidates.join(", "),
            if role.pinned { " (pinned)" } else { "" }
        )?;
    }
    writeln!(out, "\nPROVIDERS")?;
    writeln!(out, "{:<24} {:<9} {:<14} {:<7} {:<10} CREDENTIAL", "KEY", "SOURCE", "DIGEST", "WORLD", "CONFIGURED")?;
    for provider in &providers {
        let source = if provider.source.starts_with("embedded:") { "embedded" } else { "file" };
        writeln!(
            out,
            "{:<24} {:<9} {:<14} {:<7} {:<10} {}",
            provider.key,
            source,
            &provider.digest[..12.min(provider.digest.len())],
            provider.world_version,
            match (provider.configured, provider.resolved) {
                (true, _) => "yes",
                (false, true) => "no",
                (false, false) => "unknown",
            },
            provider.credential
        )?;
    }
    writeln!(out, "\nBUDGETS")?;
    writeln!(out, "{:<8} {:<20} {:<6} LIMIT", "SCOPE", "NAME", "PERIOD")?;
    for status in &budgets {
        writeln!(
            out,
            "{:<8} {:<20} {:<6} {}",
            status.scope.kind(),
            status.scope.name(),
            status.period.as_str(),
            status.limit
        )?;
    }
    Ok(())
}

fn schema() -> anyhow::Result<()> {
    writeln!(std::io::stdout().lock(), "{:#}", weir_host::catalog::config_schema())?;
    Ok(())
}
