//! `weir admin ...`: the admin API of a running gateway, one request per
//! command (see the server's `admin` routes).

use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, Subcommand};

use crate::load::DEFAULT_LISTEN;

#[derive(Debug, Args)]
pub struct AdminArgs {
    /// The gateway (default: `WEIR_ADMIN_URL`, else http://127.0.0.1:8080).
    #[arg(long)]
    url: Option<String>,
    /// An admin key's token (default: `WEIR_ADMIN_TOKEN`).
    #[arg(long)]
    token: Option<String>,
    #[command(subcommand)]
    command: AdminCommand,
}

#[derive(Debug, Subcommand)]
pub enum AdminCommand {
    /// Runtime keys: list, create (the token is printed once), rotate, revoke, expire.
    Keys {
        #[command(subcommand)]
        command: AdminKeysCommand,
    },
    /// Sets a member's or team's budget (`member NAME` or `team NAME`).
    Budget {
        /// `member` or `team`.
        scope: String,
        name: String,
        #[arg(long)]
        daily_tokens: Option<u64>,
        #[arg(long)]
        monthly_tokens: Option<u64>,
        #[arg(long)]
        daily_usd: Option<f64>,
        #[arg(long)]
        monthly_usd: Option<f64>,
        #[arg(long)]
        max_call_tokens: Option<u64>,
        #[arg(long)]
        max_call_usd: Option<f64>,
    },
    /// The audit rows of every change.
    Changes,
    /// Any admin route: `call GET /admin/v1/budgets`, `call POST PATH --body JSON`.
    Call {
        method: String,
        path: String,
        #[arg(long)]
        body: Option<String>,
    },
}

#[derive(Debug, Subcommand)]
pub enum AdminKeysCommand {
    List,
    Create {
        #[arg(long)]
        member: String,
        #[arg(long)]
        id: Option<String>,
        #[arg(long)]
        team: Option<String>,
        /// Catalog ids or roles the key may call, comma-separated (default: every model).
        #[arg(long, value_delimiter = ',')]
        models: Option<Vec<String>>,
        #[arg(long)]
        admin: bool,
        /// RFC 3339.
        #[arg(long)]
        expires: Option<String>,
    },
    Rotate {
        id: String,
        /// How long the old token keeps working (at most 86400).
        #[arg(long, default_value_t = 0)]
        grace_secs: u64,
    },
    Revoke {
        id: String,
    },
    Expire {
        id: String,
        /// RFC 3339 (default: now).
        #[arg(long)]
        at: Option<String>,
    },
}

/// `weir admin ...`: one request to the admin API; the answer's JSON is
/// printed (an error's on stderr, exit 1).
pub fn run(args: AdminArgs) -> ExitCode {
    match admin_request(args) {
        Ok((status, answer)) if (200..300).contains(&status) => {
            println!("{}", serde_json::to_string_pretty(&answer).unwrap_or_default());
            ExitCode::SUCCESS
        }
        Ok((status, answer)) => {
            eprintln!("error: {status}: {}", serde_json::to_string_pretty(&answer).unwrap_or_default());
            ExitCode::FAILURE
        }
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::FAILURE
        }
    }
}

fn admin_request(args: AdminArgs) -> anyhow::Result<(u16, serde_json::Value)> {
    use serde_json::json;
    let url =
        args.url.or_else(|| std::env::var("WEIR_ADMIN_URL").ok()).unwrap_or_else(|| format!("http://{DEFAULT_LISTEN}"));
    let token = args
        .token
        .or_else(|| std::env::var("WEIR_ADMIN_TOKEN").ok())
        .context("an admin token is needed: --token or WEIR_ADMIN_TOKEN")?;
    let (method, path, body) = match args.command {
        AdminCommand::Keys { command } => match command {
            AdminKeysCommand::List => ("GET", "/admin/v1/keys".to_owned(), None),
            AdminKeysCommand::Create { member, id, team, models, admin, expires } => (
                "POST",
                "/admin/v1/keys".to_owned(),
                Some(
                    json!({"member": member, "id": id, "team": team, "models": models, "admin": admin, "expires": expires}),
                ),
            ),
            AdminKeysCommand::Rotate { id, grace_secs } => {
                ("POST", format!("/admin/v1/keys/{id}/rotate"), Some(json!({"grace_secs": grace_secs})))
            }
            AdminKeysCommand::Revoke { id } => ("POST", format!("/admin/v1/keys/{id}/revoke"), Some(json!({}))),
            AdminKeysCommand::Expire { id, at } => {
                ("POST", format!("/admin/v1/keys/{id}/expire"), Some(json!({"at": at})))
            }
        },
        AdminCommand::Budget {
            scope,
            name,
            daily_tokens,
            monthly_tokens,
            daily_usd,
            monthly_usd,
            max_call_tokens,
            max_call_usd,
        } => {
            let collection = match scope.as_str() {
                "member" => "members",
                "team" => "teams",
                other => anyhow::bail!("`{other}`: a budget's scope is `member` or `team`"),
            };
            let budget = json!({
                "daily_tokens": daily_tokens, "monthly_tokens": monthly_tokens,
                "daily_usd": daily_usd, "monthly_usd": monthly_usd,
                "max_call_tokens": max_call_tokens, "max_call_usd": max_call_usd,
            });
            ("POST", format!("/admin/v1/{collection}/{name}"), Some(json!({"budget": budget})))
        }
        AdminCommand::Changes => ("GET", "/admin/v1/changes".to_owned(), None),
        AdminCommand::Call { method, path, body } => {
            let body = body.map(|text| serde_json::from_str(&text)).transpose().context("--body is not JSON")?;
            let method: &'static str = match method.to_ascii_uppercase().as_str() {
                "GET" => "GET",
                "POST" => "POST",
                "DELETE" => "DELETE",
                other => anyhow::bail!("`{other}`: the admin API takes GET, POST and DELETE"),
            };
            (method, path, body)
        }
    };
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    Ok(runtime.block_on(weir_host::admin::client::request(&url, &token, method, &path, body.as_ref()))?)
}
