//! What `weir serve` checks once its configuration is built and before it
//! binds, shared with `weir config check` so the two cannot disagree: the
//! address it would listen on, whether that address may go without keys, and
//! the metrics listener's place.

use std::net::SocketAddr;

use weir_host::Weir;

/// `weir serve`'s address when neither `--listen` nor the config names one.
pub const DEFAULT_LISTEN: SocketAddr = SocketAddr::new(std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST), 8080);

/// Where a gateway would listen, and what it would warn of at start.
#[derive(Debug)]
pub struct ListenPlan {
    pub address: SocketAddr,
    /// Whether a call without a key may pass (no `[[key]]` on loopback, or
    /// `allow_unauthenticated`): the key watch keeps the same rule.
    pub open_allowed: bool,
    /// `[metrics] listen`, when set.
    pub metrics: Option<SocketAddr>,
    /// Not errors: the gateway starts, and logs each.
    pub warnings: Vec<String>,
}

/// The refusals `serve` makes before binding (an error), and its warnings.
pub fn listen_plan(weir: &Weir, listen: Option<SocketAddr>) -> anyhow::Result<ListenPlan> {
    let address = listen.or(weir.config().listen).unwrap_or(DEFAULT_LISTEN);
    // Beyond loopback, a gateway without keys spends the operator's credit for
    // anyone who reaches the port: only an explicit choice allows it.
    let open_allowed = address.ip().is_loopback() || weir.config().allow_unauthenticated;
    if weir.keys().is_empty() && !open_allowed {
        anyhow::bail!(
            "refusing to listen on {address} with no [[key]]: anyone who reaches it could call every model. \
             Add keys (`weir keys new --member NAME`), listen on loopback, or set `allow_unauthenticated = true`"
        );
    }
    // `[metrics] listen` serves without a key: on the gateway's own address it
    // would stand in for the gateway, keyless.
    let metrics = weir.config().metrics.listen;
    if metrics == Some(address) {
        anyhow::bail!(
            "[metrics] listen is {address}, the gateway's own address: give the metrics their own address \
             (one only the scraper reaches), or remove it and scrape the gateway's /metrics with an admin key"
        );
    }
    let mut warnings = Vec::new();
    if !weir.providers_dir().is_dir() {
        // Not an error (the embedded providers serve), but a typo here would
        // otherwise look like a drop-in that never loads.
        warnings.push(format!(
            "the providers folder does not exist: only the embedded providers are loaded until it is created ({})",
            weir.providers_dir().display()
        ));
    }
    if weir.reasoning_seal().is_ephemeral() {
        warnings.push(
            "no `[responses] seal_key_env` or `seal_key_file`: reasoning items are sealed with a random key drawn \
             for this process, and items sealed before a restart will not open after it"
                .to_owned(),
        );
    }
    Ok(ListenPlan { address, open_allowed, metrics, warnings })
}
