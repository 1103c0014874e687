//! Where the ledger lives and how it behaves, resolved from `[ledger]`.

use std::ffi::OsString;
use std::path::PathBuf;

use super::postgres::PostgresTarget;
use crate::catalog::{Config, LedgerOnError, LedgerSync};

/// A resolved `[ledger]`: what [`super::Ledger::open`] needs.
#[derive(Debug, Clone, PartialEq)]
pub struct LedgerConfig {
    /// The SQLite file (its folder is created by the writer when missing).
    pub path: PathBuf,
    pub sync: LedgerSync,
    pub on_error: LedgerOnError,
    /// The file's size cap; reaching it is a write failure.
    pub max_bytes: Option<u64>,
    /// The fleet's PostgreSQL ledger the file's rows are shipped to.
    pub postgres: Option<PostgresTarget>,
}

/// The ledger `config` asks for, or `None` when it keeps none: `[ledger]
/// enabled = false`, or no `[ledger]` table and `default_on` false (a library
/// keeps a ledger only when asked; `weir serve` always does).
pub fn ledger_config(config: &Config, default_on: bool) -> Option<LedgerConfig> {
    ledger_config_with(config, default_on, |name| std::env::var_os(name))
}

/// [`ledger_config`] reading the environment through `env`, so the fallbacks
/// can be tested without touching the process's environment.
fn ledger_config_with(
    config: &Config,
    default_on: bool,
    env: impl Fn(&str) -> Option<OsString>,
) -> Option<LedgerConfig> {
    let settings = match &config.ledger {
        Some(settings) if settings.enabled == Some(false) => return None,
        Some(settings) => settings.clone(),
        None if default_on => Default::default(),
        None => return None,
    };
    let path = match &settings.path {
        Some(path) => config.resolve_path(path),
        None => default_path(config, env)?,
    };
    Some(LedgerConfig {
        path,
        sync: settings.sync.unwrap_or_default(),
        on_error: settings.on_error.unwrap_or_default(),
        max_bytes: settings.max_bytes,
        postgres: settings
            .postgres_url
            .as_deref()
            .map(|url| PostgresTarget::new(url, settings.postgres_ca.as_ref().map(|ca| config.resolve_path(ca)))),
    })
}

/// `data/ledger.db` beside a config file; with the embedded config,
/// `$WEIR_DATA_DIR`, else `$XDG_DATA_HOME/weir`, else `~/.local/share/weir`.
/// `None` only when none of those is known (no file, no variable, no home).
fn default_path(config: &Config, env: impl Fn(&str) -> Option<OsString>) -> Option<PathBuf> {
    if let Some(base) = &config.base_dir {
        return Some(base.join("data").join("ledger.db"));
    }
    let var = |name: &str| env(name).filter(|value| !value.is_empty()).map(PathBuf::from);
    let dir = var("WEIR_DATA_DIR")
        .or_else(|| var("XDG_DATA_HOME").map(|dir| dir.join("weir")))
        .or_else(|| var("HOME").map(|home| home.join(".local").join("share").join("weir")));
    if dir.is_none() {
        tracing::error!("no folder for the ledger: set `[ledger] path`, WEIR_DATA_DIR, XDG_DATA_HOME or HOME");
    }
    dir.map(|dir| dir.join("ledger.db"))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use std::path::Path;

    use super::*;

    fn config(text: &str) -> Config {
        Config::from_toml(text, "(test)").expect("config")
    }

    fn no_env(_: &str) -> Option<OsString> {
        None
    }

    #[test]
    fn off_without_the_table_unless_defaulted_on() {
        let plain = config("");
        assert_eq!(ledger_config_with(&plain, false, no_env), None);
        let home = |name: &str| (name == "HOME").then(|| OsString::from("/home/u"));
        let on = ledger_config_with(&plain, true, home).unwrap();
        assert_eq!(on.path, Path::new("/home/u/.local/share/weir/ledger.db"));
        assert_eq!((on.sync, on.on_error, on.max_bytes), (LedgerSync::Normal, LedgerOnError::Refuse, None));
        assert_eq!(ledger_config_with(&config("[ledger]\nenabled = false\n"), true, home), None);
    }

    #[test]
    fn the_path_falls_back_in_order() {
        let plain = config("[ledger]\nsync = \"full\"\non_error = \"continue\"\nmax_bytes = 4096\n");
        let env = |vars: &'static [(&'static str, &'static str)]| {
            move |name: &str| vars.iter().find(|(n, _)| *n == name).map(|(_, v)| OsString::from(v))
        };
        let all = env(&[("WEIR_DATA_DIR", "/d"), ("XDG_DATA_HOME", "/x"), ("HOME", "/h")]);
        let resolved = ledger_config_with(&plain, false, all).unwrap();
        assert_eq!(resolved.path, Path::new("/d/ledger.db"));
        assert_eq!(
            (resolved.sync, resolved.on_error, resolved.max_bytes),
            (LedgerSync::Full, LedgerOnError::Continue, Some(4096))
        );
        let xdg = env(&[("WEIR_DATA_DIR", ""), ("XDG_DATA_HOME", "/x"), ("HOME", "/h")]);
        assert_eq!(ledger_config_with(&plain, false, xdg).unwrap().path, Path::new("/x/weir/ledger.db"));
        assert_eq!(ledger_config_with(&plain, false, no_env), None, "no folder known");

        let mut from_file = config("[ledger]\n");
        from_file.base_dir = Some(PathBuf::from("/etc/weir"));
        assert_eq!(ledger_config_with(&from_file, false, all).unwrap().path, Path::new("/etc/weir/data/ledger.db"));
        let mut explicit = config("[ledger]\npath = \"books/calls.db\"\n");
        explicit.base_dir = Some(PathBuf::from("/etc/weir"));
        assert_eq!(ledger_config_with(&explicit, false, all).unwrap().path, Path::new("/etc/weir/books/calls.db"));
    }
}
