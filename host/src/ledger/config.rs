//! Where the ledger lives and how it behaves, resolved from `[ledger]`.

use std::ffi::OsString;
use std::path::PathBuf;

use std::time::Duration;

use super::anchor::{AnchorKey, AnchorKeyError};
use super::postgres::PostgresTarget;
use super::segments::{self, Retention, SegmentPolicy};
use crate::accounting::Timezone;
use crate::catalog::{
    Config, KeySource, KeySourceError, LedgerOnError, LedgerOnTampered, LedgerSettings, LedgerSync, read_key,
};

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
    /// The operator's key the anchor lines are authenticated with (see
    /// `anchor`); none: the lines carry no MAC.
    pub anchor_key: Option<AnchorKey>,
    /// What the gateway does when the tail fails its anchor check at start.
    pub on_tampered: LedgerOnTampered,
    /// Sealed segments, archives and retention (`None`: nothing is sealed).
    pub segments: Option<SegmentPolicy>,
}

impl LedgerConfig {
    /// A ledger at `path` with every other setting at its default.
    pub fn at(path: PathBuf) -> Self {
        Self {
            path,
            sync: LedgerSync::default(),
            on_error: LedgerOnError::default(),
            max_bytes: None,
            postgres: None,
            anchor_key: None,
            on_tampered: LedgerOnTampered::default(),
            segments: None,
        }
    }
}

/// Why `[ledger]` cannot be resolved (never holds the key).
#[derive(Debug, thiserror::Error)]
pub enum LedgerConfigError {
    #[error(transparent)]
    Source(#[from] KeySourceError),
    #[error("`[ledger]` anchor key from {from}: {error}")]
    Key { from: String, error: AnchorKeyError },
    #[error("`[ledger] {0}` must be at least 1")]
    Zero(&'static str),
    #[error("`[ledger] {0}` is set, and no segment is ever sealed: set `segment_bytes` or `segment_hours`")]
    NothingSealed(&'static str),
    #[error(
        "`[ledger] {0}` would delete history that exists nowhere else: set `archive_dir` (segments are archived \
         there first) or `postgres_url` (segments are shipped there first)"
    )]
    NoCopy(&'static str),
    #[error("{0}")]
    Timezone(String),
}

/// The ledger `config` asks for, or `None` when it keeps none: `[ledger]
/// enabled = false`, or no `[ledger]` table and `default_on` false (a library
/// keeps a ledger only when asked; `weir serve` always does). An error when
/// the anchor key it names cannot be read.
pub fn ledger_config(config: &Config, default_on: bool) -> Result<Option<LedgerConfig>, LedgerConfigError> {
    ledger_config_with(config, default_on, |name| std::env::var_os(name))
}

/// [`ledger_config`] reading the environment through `env`, so the fallbacks
/// can be tested without touching the process's environment.
fn ledger_config_with(
    config: &Config,
    default_on: bool,
    env: impl Fn(&str) -> Option<OsString>,
) -> Result<Option<LedgerConfig>, LedgerConfigError> {
    let settings = match &config.ledger {
        Some(settings) if settings.enabled == Some(false) => return Ok(None),
        Some(settings) => settings.clone(),
        None if default_on => Default::default(),
        None => return Ok(None),
    };
    let path = match &settings.path {
        Some(path) => config.resolve_path(path),
        None => match default_path(config, &env) {
            Some(path) => path,
            None => return Ok(None),
        },
    };
    let anchor_key = anchor_key(config, &settings, &env)?;
    let segments = segment_policy(config, &settings)?;
    Ok(Some(LedgerConfig {
        path,
        sync: settings.sync.unwrap_or_default(),
        on_error: settings.on_error.unwrap_or_default(),
        max_bytes: settings.max_bytes,
        postgres: settings
            .postgres_url
            .as_deref()
            .map(|url| PostgresTarget::new(url, settings.postgres_ca.as_ref().map(|ca| config.resolve_path(ca)))),
        anchor_key,
        on_tampered: settings.on_tampered.unwrap_or_default(),
        segments,
    }))
}

/// The segments `settings` ask for: `None` without `segment_bytes` and
/// `segment_hours`. Refused: a zero size or age, an archive folder or a
/// retention with nothing sealed, and a retention with no copy to keep
/// the deleted rows (neither `archive_dir` nor `postgres_url`).
fn segment_policy(config: &Config, settings: &LedgerSettings) -> Result<Option<SegmentPolicy>, LedgerConfigError> {
    for (name, value) in [
        ("segment_bytes", settings.segment_bytes),
        ("segment_hours", settings.segment_hours.map(u64::from)),
        ("retain_days", settings.retain_days.map(u64::from)),
    ] {
        if value == Some(0) {
            return Err(LedgerConfigError::Zero(name));
        }
    }
    let retaining = match (settings.retain_days, settings.retain_bytes) {
        (Some(_), _) => Some("retain_days"),
        (None, Some(_)) => Some("retain_bytes"),
        (None, None) => None,
    };
    let sealing = settings.segment_bytes.is_some() || settings.segment_hours.is_some();
    if !sealing {
        let unused = settings.archive_dir.as_ref().map(|_| "archive_dir").or(retaining);
        return match unused {
            Some(name) => Err(LedgerConfigError::NothingSealed(name)),
            None => Ok(None),
        };
    }
    let archive_dir = settings.archive_dir.as_ref().map(|dir| config.resolve_path(dir));
    if let Some(name) = retaining
        && archive_dir.is_none()
        && settings.postgres_url.is_none()
    {
        return Err(LedgerConfigError::NoCopy(name));
    }
    let budget_timezone = config
        .budget_timezone
        .as_deref()
        .map_or(Ok(Timezone::UTC), Timezone::parse)
        .map_err(LedgerConfigError::Timezone)?;
    Ok(Some(SegmentPolicy {
        max_bytes: settings.segment_bytes,
        max_age: settings.segment_hours.map(|hours| Duration::from_secs(u64::from(hours) * 3600)),
        archive_dir,
        retention: retaining.map(|_| Retention {
            max_age: settings.retain_days.map(segments::days),
            max_bytes: settings.retain_bytes,
            shipped: settings.postgres_url.is_some(),
        }),
        budget_timezone,
    }))
}

/// The anchor key `settings` names: from the environment variable
/// `anchor_key_env`, or the file `anchor_key_file`; none without either.
fn anchor_key(
    config: &Config,
    settings: &crate::catalog::LedgerSettings,
    env: &impl Fn(&str) -> Option<OsString>,
) -> Result<Option<AnchorKey>, LedgerConfigError> {
    let source = KeySource {
        table: "ledger",
        env_field: "anchor_key_env",
        file_field: "anchor_key_file",
        env: settings.anchor_key_env.as_deref(),
        file: settings.anchor_key_file.as_deref(),
    };
    let Some((text, from)) = read_key(config, source, env)? else { return Ok(None) };
    AnchorKey::new(&text).map(Some).map_err(|error| LedgerConfigError::Key { from, error })
}

/// `data/ledger.db` beside a config file; with the embedded config,
/// `$WEIR_DATA_DIR`, else `$XDG_DATA_HOME/weir`, else `~/.local/share/weir`.
/// `None` only when none of those is known (no file, no variable, no home).
fn default_path(config: &Config, env: &impl Fn(&str) -> Option<OsString>) -> Option<PathBuf> {
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
        assert_eq!(ledger_config_with(&plain, false, no_env).unwrap(), None);
        let home = |name: &str| (name == "HOME").then(|| OsString::from("/home/u"));
        let on = ledger_config_with(&plain, true, home).unwrap().unwrap();
        assert_eq!(on.path, Path::new("/home/u/.local/share/weir/ledger.db"));
        assert_eq!((on.sync, on.on_error, on.max_bytes), (LedgerSync::Normal, LedgerOnError::Refuse, None));
        assert_eq!(ledger_config_with(&config("[ledger]\nenabled = false\n"), true, home).unwrap(), None);
        assert_eq!((on.anchor_key, on.on_tampered), (None, LedgerOnTampered::Refuse));
    }

    #[test]
    fn the_path_falls_back_in_order() {
        let plain = config("[ledger]\nsync = \"full\"\non_error = \"continue\"\nmax_bytes = 4096\n");
        let env = |vars: &'static [(&'static str, &'static str)]| {
            move |name: &str| vars.iter().find(|(n, _)| *n == name).map(|(_, v)| OsString::from(v))
        };
        let all = env(&[("WEIR_DATA_DIR", "/d"), ("XDG_DATA_HOME", "/x"), ("HOME", "/h")]);
        let resolved = ledger_config_with(&plain, false, all).unwrap().unwrap();
        assert_eq!(resolved.path, Path::new("/d/ledger.db"));
        assert_eq!(
            (resolved.sync, resolved.on_error, resolved.max_bytes),
            (LedgerSync::Full, LedgerOnError::Continue, Some(4096))
        );
        let xdg = env(&[("WEIR_DATA_DIR", ""), ("XDG_DATA_HOME", "/x"), ("HOME", "/h")]);
        assert_eq!(ledger_config_with(&plain, false, xdg).unwrap().unwrap().path, Path::new("/x/weir/ledger.db"));
        assert_eq!(ledger_config_with(&plain, false, no_env).unwrap(), None, "no folder known");

        let mut from_file = config("[ledger]\n");
        from_file.base_dir = Some(PathBuf::from("/etc/weir"));
        assert_eq!(
            ledger_config_with(&from_file, false, all).unwrap().unwrap().path,
            Path::new("/etc/weir/data/ledger.db")
        );
        let mut explicit = config("[ledger]\npath = \"books/calls.db\"\n");
        explicit.base_dir = Some(PathBuf::from("/etc/weir"));
        assert_eq!(
            ledger_config_with(&explicit, false, all).unwrap().unwrap().path,
            Path::new("/etc/weir/books/calls.db")
        );
    }

    const KEY: &str = "0123456789abcdef0123456789abcdef";

    #[test]
    fn segments_archives_and_retention_resolve() {
        let mut file = config(
            "budget_timezone = \"+05:30\"\n[ledger]\npath = \"/l.db\"\nsegment_bytes = 1024\nsegment_hours = 2\n\
             archive_dir = \"old\"\nretain_days = 3\nretain_bytes = 4096\n",
        );
        file.base_dir = Some(PathBuf::from("/etc/weir"));
        let policy = ledger_config_with(&file, false, no_env).unwrap().unwrap().segments.unwrap();
        assert_eq!((policy.max_bytes, policy.max_age), (Some(1024), Some(Duration::from_secs(7200))));
        assert_eq!(policy.archive_dir.as_deref(), Some(Path::new("/etc/weir/old")));
        let retention = policy.retention.unwrap();
        assert_eq!(retention.max_age, Some(Duration::from_secs(3 * 86_400)));
        assert_eq!((retention.max_bytes, retention.shipped), (Some(4096), false));
        assert_eq!(policy.budget_timezone, Timezone::parse("+05:30").unwrap());
        let shipped = config(
            "[ledger]\npath = \"/l.db\"\nsegment_hours = 1\nretain_days = 1\npostgres_url = \"postgres://h/d\"\n",
        );
        let retention = ledger_config_with(&shipped, false, no_env).unwrap().unwrap().segments.unwrap().retention;
        assert!(retention.is_some_and(|retention| retention.shipped));
        assert_eq!(
            ledger_config_with(&config("[ledger]\npath = \"/l.db\"\n"), false, no_env).unwrap().unwrap().segments,
            None
        );
    }

    #[test]
    fn segment_settings_that_could_not_work_are_refused() {
        let refused = |text: &str| {
            ledger_config_with(&config(&format!("[ledger]\npath = \"/l.db\"\n{text}")), false, no_env)
                .unwrap_err()
                .to_string()
        };
        assert_eq!(refused("segment_bytes = 0\n"), "`[ledger] segment_bytes` must be at least 1");
        assert_eq!(refused("segment_hours = 0\n"), "`[ledger] segment_hours` must be at least 1");
        assert_eq!(
            refused("segment_hours = 1\nretain_days = 0\narchive_dir = \"a\"\n"),
            "`[ledger] retain_days` must be at least 1"
        );
        assert!(
            refused("archive_dir = \"a\"\n")
                .starts_with("`[ledger] archive_dir` is set, and no segment is ever sealed")
        );
        assert!(
            refused("retain_bytes = 1\n").starts_with("`[ledger] retain_bytes` is set, and no segment is ever sealed")
        );
        let no_copy = refused("segment_bytes = 10\nretain_days = 7\n");
        assert!(
            no_copy.starts_with("`[ledger] retain_days` would delete history that exists nowhere else"),
            "{no_copy}"
        );
        // A config made in code (the file's load refuses it first).
        let mut mars = config("[ledger]\npath = \"/l.db\"\nsegment_bytes = 10\n");
        mars.budget_timezone = Some("Mars".to_owned());
        let zone = ledger_config_with(&mars, false, no_env);
        assert!(matches!(zone, Err(LedgerConfigError::Timezone(_))), "{zone:?}");
    }

    #[test]
    fn the_anchor_key_comes_from_the_environment_or_a_file() {
        let by_env = config("[ledger]\npath = \"/l.db\"\nanchor_key_env = \"LEDGER_KEY\"\non_tampered = \"start\"\n");
        let env = |name: &str| (name == "LEDGER_KEY").then(|| OsString::from(KEY));
        let resolved = ledger_config_with(&by_env, false, env).unwrap().unwrap();
        assert_eq!(resolved.anchor_key, Some(AnchorKey::new(KEY.as_bytes()).unwrap()));
        assert_eq!(resolved.on_tampered, LedgerOnTampered::Start);
        let missing = ledger_config_with(&by_env, false, no_env).unwrap_err();
        assert_eq!(missing.to_string(), "`[ledger] anchor_key_env` names LEDGER_KEY, which is not set");
        let short = ledger_config_with(&by_env, false, |_| Some(OsString::from("tiny"))).unwrap_err();
        assert!(short.to_string().contains("$LEDGER_KEY") && short.to_string().contains("4 bytes"), "{short}");
        assert!(!short.to_string().contains("tiny"), "the key is never shown: {short}");

        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("anchor.key"), format!("{KEY}\n")).unwrap();
        let mut by_file = config("[ledger]\npath = \"l.db\"\nanchor_key_file = \"anchor.key\"\n");
        by_file.base_dir = Some(dir.path().to_path_buf());
        let resolved = ledger_config_with(&by_file, false, no_env).unwrap().unwrap();
        assert_eq!(resolved.anchor_key, Some(AnchorKey::new(KEY.as_bytes()).unwrap()));
        let mut unreadable = config("[ledger]\npath = \"l.db\"\nanchor_key_file = \"none.key\"\n");
        unreadable.base_dir = Some(dir.path().to_path_buf());
        let error = ledger_config_with(&unreadable, false, no_env).unwrap_err();
        assert!(matches!(error, LedgerConfigError::Source(KeySourceError::File { .. })), "{error}");

        let both = config("[ledger]\nanchor_key_env = \"A\"\nanchor_key_file = \"b\"\npath = \"/l.db\"\n");
        let error = ledger_config_with(&both, false, env).unwrap_err();
        assert_eq!(error.to_string(), "`[ledger]` sets both `anchor_key_env` and `anchor_key_file`: set one");
    }
}
