//! The fleet's ledger in PostgreSQL (`[ledger] postgres_url`): the table every
//! gateway's shipper appends its committed rows to, the schema's
//! versioned migrations (`host/migrations`, through refinery), and a
//! [`SharedReader`] that answers the same queries as the local file's
//! [`super::Reader`] over the whole fleet's calls.
//!
//! The client is the blocking one: the shipper runs on its own thread, as
//! the SQLite writer does, and readers run where blocking is allowed (a
//! command, `spawn_blocking`, a thread of their own). TLS is rustls, with the
//! platform's roots and the operator's CA file ([`PostgresTarget`]).
//!
//! Here: where the database is, connecting and migrating; `ship.rs`: the
//! shipper's statements; `reader.rs`: the queries and the chains' check.

mod reader;
mod rollup;
mod ship;

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use postgres::Client;
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;
use tokio_postgres_rustls::MakeRustlsConnect;

pub use reader::{SharedReader, SourceBreak, SourceReport, SourceTampered};
pub(super) use ship::{connect_shipper, ship, shipped_through};

use super::query::ReadError;

mod embedded {
    refinery::embed_migrations!("migrations");
}

/// Every gateway of a fleet may start at once against an empty database:
/// migrations run under this session-level advisory lock, one at a time.
const MIGRATION_LOCK: i64 = 0x5745_4952_4c45_4447; // "WEIRLEDG"

/// How long connecting may take before the attempt counts as a failure.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);

/// A statement the server has not finished by then is cancelled by it, so a
/// stalled server cannot hold a reader (or the shipper) forever.
const STATEMENT_TIMEOUT_MS: u64 = 15_000;

/// Why the fleet's ledger could not be reached, migrated, written or read
/// (the server's text: for the log, never for a caller).
#[derive(Debug, thiserror::Error)]
pub enum SharedError {
    #[error("`[ledger] postgres_url` is not a PostgreSQL URL: {0}")]
    Url(postgres::Error),
    #[error("cannot connect to PostgreSQL: {}", with_causes(.0))]
    Connect(postgres::Error),
    #[error("cannot set up TLS to PostgreSQL: {0}")]
    Tls(String),
    #[error("cannot migrate the ledger's schema in PostgreSQL: {0}")]
    Migrate(String),
    #[error("PostgreSQL: {0}")]
    Query(#[from] postgres::Error),
}

/// An error and what caused it, as one line (a TLS handshake's own reason,
/// an unknown certificate say, is only in the cause).
fn with_causes(error: &postgres::Error) -> String {
    let mut text = error.to_string();
    let mut cause = std::error::Error::source(error);
    while let Some(inner) = cause {
        text.push_str(": ");
        text.push_str(&inner.to_string());
        cause = inner.source();
    }
    text
}

impl From<SharedError> for ReadError {
    fn from(error: SharedError) -> Self {
        ReadError::Postgres(error.to_string())
    }
}

/// Checks `url` parses as a connection URL (what the configuration's load
/// asks before anything connects).
pub fn check_url(url: &str) -> Result<(), SharedError> {
    url.parse::<postgres::Config>().map(drop).map_err(SharedError::Url)
}

/// Where the fleet's ledger is: the URL (its `sslmode` decides TLS:
/// `disable`, `prefer` — the default, TLS when the server offers it — or
/// `require`) and the CA file trusted beside the platform's roots. The TLS
/// configuration is built once, at the first connection.
#[derive(Clone)]
pub struct PostgresTarget {
    url: String,
    ca_file: Option<PathBuf>,
    tls: Arc<OnceLock<Result<MakeRustlsConnect, String>>>,
}

impl std::fmt::Debug for PostgresTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresTarget").field("url", &self.redacted()).field("ca_file", &self.ca_file).finish()
    }
}

impl PartialEq for PostgresTarget {
    fn eq(&self, other: &Self) -> bool {
        self.url == other.url && self.ca_file == other.ca_file
    }
}

impl PostgresTarget {
    pub fn new(url: &str, ca_file: Option<PathBuf>) -> Self {
        Self { url: url.to_owned(), ca_file, tls: Arc::default() }
    }

    /// The URL without its credentials, for logs.
    pub fn redacted(&self) -> String {
        crate::redact::redacted(&self.url)
    }

    fn tls(&self) -> Result<MakeRustlsConnect, SharedError> {
        self.tls.get_or_init(|| tls_config(self.ca_file.as_deref())).clone().map_err(SharedError::Tls)
    }
}

/// The platform's roots, and the certificates of `ca_file` when given (a
/// file that cannot be read, or holds none, is an error: trusting less than
/// the operator asked would only fail later, less clearly).
fn tls_config(ca_file: Option<&Path>) -> Result<MakeRustlsConnect, String> {
    let mut roots = rustls::RootCertStore::empty();
    roots.add_parsable_certificates(rustls_native_certs::load_native_certs().certs);
    if let Some(path) = ca_file {
        let unreadable =
            |error: rustls::pki_types::pem::Error| format!("`[ledger] postgres_ca` {}: {error}", path.display());
        let certificates = CertificateDer::pem_file_iter(path)
            .map_err(unreadable)?
            .collect::<Result<Vec<_>, _>>()
            .map_err(unreadable)?;
        if certificates.is_empty() {
            return Err(format!("`[ledger] postgres_ca` {} holds no certificate", path.display()));
        }
        let (added, _) = roots.add_parsable_certificates(certificates);
        if added == 0 {
            return Err(format!("`[ledger] postgres_ca` {}: no certificate in it can be used", path.display()));
        }
    }
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|error| error.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(MakeRustlsConnect::new(config))
}

/// Connects to `target` and brings the schema to this weir's version.
pub(crate) fn connect(target: &PostgresTarget) -> Result<Client, SharedError> {
    let mut config = target.url.parse::<postgres::Config>().map_err(SharedError::Url)?;
    config
        .connect_timeout(CONNECT_TIMEOUT)
        .application_name("weir")
        .options(&format!("-c statement_timeout={STATEMENT_TIMEOUT_MS}"));
    let mut client = config.connect(target.tls()?).map_err(SharedError::Connect)?;
    migrate(&mut client)?;
    Ok(client)
}

fn migrate(client: &mut Client) -> Result<(), SharedError> {
    client.execute("SELECT pg_advisory_lock($1)", &[&MIGRATION_LOCK])?;
    // Grouped: every pending migration and its history row in one
    // transaction. Ungrouped, refinery commits a migration and the row that
    // records it in two transactions, so a crash between them (or the tail
    // a server with `synchronous_commit = off` loses) left the schema changed
    // and unrecorded, and the next start applied it again and failed.
    let runner = embedded::migrations::runner().set_grouped(true);
    let migrated = runner.run(client).map(drop).map_err(|error| crate::transport::error_chain(&error));
    // The lock goes with the session anyway; released here so the next
    // gateway does not wait for this connection to close.
    client.execute("SELECT pg_advisory_unlock($1)", &[&MIGRATION_LOCK])?;
    migrated.map_err(SharedError::Migrate)
}
