//! The fleet's ledger in PostgreSQL (`[ledger] postgres_url`): the table every
//! gateway's shipper appends its committed rows to ([`ship`]), the schema's
//! versioned migrations (`host/migrations`, through refinery), and a
//! [`SharedReader`] that answers the same queries as the local file's
//! [`super::Reader`] over the whole fleet's calls.
//!
//! The client is the blocking one: the shipper runs on its own thread, as
//! the SQLite writer does, and readers run where blocking is allowed (a
//! command, `spawn_blocking`, a thread of their own).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, SystemTime};

use postgres::Client;
use postgres::types::ToSql;
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;
use tokio_postgres_rustls::MakeRustlsConnect;

use super::query::{
    CallerSpend, ChainBreak, ChainCheck, Committed, Filter, GroupBy, GroupTotals, LedgerRead, Link, ReadError, Sums,
    Totals, VerifyError, VerifyReport, parse_body,
};
use super::sql::{self, Dialect, Param};
use super::store::{Kind, Row};
use crate::record::{CallOpening, CallRecord, Tokens};

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
        crate::fleet::redacted(&self.url)
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
pub(super) fn connect(target: &PostgresTarget) -> Result<Client, SharedError> {
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
    let migrated = embedded::migrations::runner().run(client).map(drop).map_err(|error| error.to_string());
    // The lock goes with the session anyway; released here so the next
    // gateway does not wait for this connection to close.
    client.execute("SELECT pg_advisory_unlock($1)", &[&MIGRATION_LOCK])?;
    migrated.map_err(SharedError::Migrate)
}

/// The shipper's connection: [`connect`], with commits that do not wait for
/// the server's disk. The file is the write-ahead record and the shipper
/// asks the table where its rows end on every connection, so a commit a
/// crashed server lost is sent again, never missing; the server is spared a
/// disk flush per batch.
pub(super) fn connect_shipper(target: &PostgresTarget) -> Result<Client, SharedError> {
    let mut client = connect(target)?;
    client.batch_execute("SET synchronous_commit = off")?;
    Ok(client)
}

/// The last `seq` of `source` already in the table (0 for none): where its
/// shipper goes on from.
pub(super) fn shipped_through(client: &mut Client, source: &str) -> Result<i64, SharedError> {
    let row = client.query_one("SELECT COALESCE(MAX(source_seq), 0) FROM ledger WHERE source = $1", &[&source])?;
    Ok(row.try_get(0)?)
}

/// Appends `rows` of `source` in one statement and transaction; a row whose
/// call already has that kind of row is skipped (shipped before). Returns
/// how many were new.
pub(super) fn ship(client: &mut Client, source: &str, rows: &[Committed]) -> Result<u64, SharedError> {
    let column = |get: fn(&Committed) -> String| rows.iter().map(get).collect::<Vec<_>>();
    let optional = |get: fn(&Committed) -> Option<String>| rows.iter().map(get).collect::<Vec<_>>();
    let integer = |get: fn(&Committed) -> i64| rows.iter().map(get).collect::<Vec<_>>();
    let tokens = |get: fn(&Tokens) -> u64| rows.iter().map(|c| signed(get(&c.row.tokens))).collect::<Vec<_>>();
    let sources = vec![source.to_owned(); rows.len()];
    let params: [&(dyn ToSql + Sync); 21] = [
        &column(|c| c.row.call_id.clone()),
        &column(|c| c.row.kind.as_str().to_owned()),
        &sources,
        &integer(|c| c.seq),
        &integer(|c| c.row.at_ms),
        &integer(|c| c.row.started_ms),
        &optional(|c| c.row.key_id.clone()),
        &optional(|c| c.row.member.clone()),
        &optional(|c| c.row.team.clone()),
        &column(|c| c.row.model.clone()),
        &optional(|c| c.row.category.clone()),
        &tokens(|t| t.input),
        &tokens(|t| t.output),
        &tokens(|t| t.cache_read),
        &tokens(|t| t.cache_write),
        &tokens(|t| t.reasoning),
        &rows.iter().map(|c| c.row.cost_usd).collect::<Vec<_>>(),
        &column(|c| c.row.body.clone()),
        &column(|c| c.prev_hash.clone()),
        &column(|c| c.hash.clone()),
        &rows.iter().map(|c| i32::from(c.row.charged_worst)).collect::<Vec<_>>(),
    ];
    let mut transaction = client.transaction()?;
    let inserted = transaction.execute(
        "INSERT INTO ledger (call_id, kind, source, source_seq, at_ms, started_ms, key_id, member, team, model,
             category, input, output, cache_read, cache_write, reasoning, cost_usd, body, prev_hash, hash,
             charged_worst)
         SELECT * FROM UNNEST($1::text[], $2::text[], $3::text[], $4::bigint[], $5::bigint[], $6::bigint[],
             $7::text[], $8::text[], $9::text[], $10::text[], $11::text[], $12::bigint[], $13::bigint[],
             $14::bigint[], $15::bigint[], $16::bigint[], $17::float8[], $18::text[], $19::text[], $20::text[],
             $21::int4[])
         ON CONFLICT DO NOTHING",
        &params,
    )?;
    transaction.commit()?;
    Ok(inserted)
}

/// Token counts are far below 2^63; a count beyond it is stored as the most.
fn signed(count: u64) -> i64 {
    i64::try_from(count).unwrap_or(i64::MAX)
}

/// A count read back (never negative: the table holds what [`signed`] wrote).
fn unsigned(count: i64) -> u64 {
    u64::try_from(count).unwrap_or(0)
}

/// The fleet's ledger read as [`super::Reader`] reads a file: one connection,
/// opened (and the schema migrated) by [`SharedReader::connect`].
pub struct SharedReader {
    client: Mutex<Client>,
}

impl std::fmt::Debug for SharedReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedReader").finish_non_exhaustive()
    }
}

impl SharedReader {
    /// Connects to `target` (blocking: call it where blocking is allowed).
    pub fn connect(target: &PostgresTarget) -> Result<SharedReader, ReadError> {
        Ok(SharedReader { client: Mutex::new(connect(target)?) })
    }

    /// Runs `queries` in one read-only snapshot (so a total and its groups
    /// agree while shippers keep appending).
    fn query_all(&self, queries: Vec<sql::Query>) -> Result<Vec<Vec<postgres::Row>>, ReadError> {
        let mut client = self.client.lock().map_err(|_| ReadError::Postgres("a reader panicked".to_owned()))?;
        let mut transaction = client
            .build_transaction()
            .isolation_level(postgres::IsolationLevel::RepeatableRead)
            .read_only(true)
            .start()
            .map_err(SharedError::from)?;
        let mut answers = Vec::with_capacity(queries.len());
        for query in queries {
            let params: Vec<Box<dyn ToSql + Sync>> = query.params.into_iter().map(boxed).collect();
            let refs: Vec<&(dyn ToSql + Sync)> = params.iter().map(|param| param.as_ref()).collect();
            answers.push(transaction.query(&query.sql, &refs).map_err(SharedError::from)?);
        }
        transaction.commit().map_err(SharedError::from)?;
        Ok(answers)
    }

    fn query(&self, query: sql::Query) -> Result<Vec<postgres::Row>, ReadError> {
        Ok(self.query_all(vec![query])?.into_iter().next().unwrap_or_default())
    }

    fn bodies<T: serde::de::DeserializeOwned>(&self, query: sql::Query) -> Result<Vec<T>, ReadError> {
        self.query(query)?
            .iter()
            .map(|row| {
                parse_body(row.try_get(0).map_err(SharedError::from)?, row.try_get(1).map_err(SharedError::from)?)
            })
            .collect()
    }
}

fn boxed(param: Param) -> Box<dyn ToSql + Sync> {
    match param {
        Param::Text(text) => Box::new(text),
        Param::Integer(integer) => Box::new(integer),
    }
}

/// One source file's chain in the fleet's table, as [`SharedReader::verify`] found it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceReport {
    /// The file's name in the table: the hash of its first row.
    pub source: String,
    pub report: VerifyReport,
}

/// Why a source's chain in the fleet's table does not check out.
#[derive(Debug, thiserror::Error)]
#[error("source {file}: {chain}")]
pub struct SourceBreak {
    /// The source file's name in the table (its first row's hash).
    pub file: String,
    pub chain: ChainBreak,
}

impl SharedReader {
    /// Walks every source file's chain in the table, as `weir ledger verify`
    /// walks a file's (one read-only snapshot). A source is also checked to be
    /// named by its first row's hash. Rows a shipper has not sent yet are not
    /// a break: a chain's prefix checks out.
    pub fn verify(&self) -> Result<Vec<SourceReport>, VerifyError> {
        let mut client = self.client.lock().map_err(|_| ReadError::Postgres("a reader panicked".to_owned()))?;
        let mut transaction = client
            .build_transaction()
            .isolation_level(postgres::IsolationLevel::RepeatableRead)
            .read_only(true)
            .start()
            .map_err(|error| ReadError::from(SharedError::from(error)))?;
        let read = |error: postgres::Error| VerifyError::Read(SharedError::from(error).into());
        let sources = transaction.query("SELECT DISTINCT source FROM ledger ORDER BY source", &[]).map_err(read)?;
        let mut reports = Vec::with_capacity(sources.len());
        for source in sources {
            let source: String = source.try_get(0).map_err(read)?;
            let rows = transaction.query(VERIFY_ROWS, &[&source]).map_err(read)?;
            let mut chain = ChainCheck::default();
            for row in &rows {
                let (kind, call_id, stored, link) = committed_at(row).map_err(read)?;
                let named = link.seq != 1 || link.hash == source;
                chain
                    .next(&kind, &call_id, stored, link)
                    .and_then(|()| match named {
                        true => Ok(()),
                        false => Err(ChainBreak {
                            seq: 1,
                            call_id: call_id.clone(),
                            reason: "the source is not named by its first row's hash".to_owned(),
                        }),
                    })
                    .map_err(|chain| VerifyError::Shared(SourceBreak { file: source.clone(), chain }))?;
            }
            reports.push(SourceReport { source, report: chain.report() });
        }
        transaction.commit().map_err(read)?;
        Ok(reports)
    }
}

/// One source's rows in order, with every column [`committed_at`] reads.
const VERIFY_ROWS: &str = "SELECT source_seq, kind, call_id, at_ms, started_ms, key_id, member, team, model, category,
    input, output, cache_read, cache_write, reasoning, cost_usd, body, prev_hash, hash, charged_worst
    FROM ledger WHERE source = $1 ORDER BY source_seq";

/// A row of [`VERIFY_ROWS`]: its kind as stored, its call, the row as its
/// columns hold it (`None` for an unknown kind) and its link.
fn committed_at(row: &postgres::Row) -> Result<(String, String, Option<Row>, Link), postgres::Error> {
    let kind: String = row.try_get(1)?;
    let call_id: String = row.try_get(2)?;
    let stored = match Kind::parse(&kind) {
        Some(parsed) => Some(Row {
            kind: parsed,
            call_id: call_id.clone(),
            at_ms: row.try_get(3)?,
            started_ms: row.try_get(4)?,
            key_id: row.try_get(5)?,
            member: row.try_get(6)?,
            team: row.try_get(7)?,
            model: row.try_get(8)?,
            category: row.try_get(9)?,
            tokens: tokens_at(row, 10)?,
            cost_usd: row.try_get(15)?,
            body: row.try_get(16)?,
            charged_worst: row.try_get::<_, i32>(19)? != 0,
        }),
        None => None,
    };
    let link = Link { seq: row.try_get(0)?, prev_hash: row.try_get(17)?, hash: row.try_get(18)? };
    Ok((kind, call_id, stored, link))
}

/// Five token counts from consecutive columns, the first at `first`.
fn tokens_at(row: &postgres::Row, first: usize) -> Result<Tokens, postgres::Error> {
    let count = |index: usize| row.try_get::<_, i64>(first + index).map(unsigned);
    Ok(Tokens {
        input: count(0)?,
        output: count(1)?,
        cache_read: count(2)?,
        cache_write: count(3)?,
        reasoning: count(4)?,
    })
}

fn totals_at(row: &postgres::Row) -> Result<GroupTotals, postgres::Error> {
    let totals = Totals {
        calls: unsigned(row.try_get(1)?),
        tokens: tokens_at(row, 2)?,
        cost_usd: row.try_get(7)?,
        calls_without_cost: unsigned(row.try_get(8)?),
    };
    Ok((row.try_get(0)?, totals))
}

impl LedgerRead for SharedReader {
    fn records(&self, filter: &Filter) -> Result<Vec<CallRecord>, ReadError> {
        self.bodies(sql::records(filter, Dialect::Postgres))
    }

    fn unclosed(&self, filter: &Filter) -> Result<Vec<CallOpening>, ReadError> {
        self.bodies(sql::unclosed(filter, Dialect::Postgres))
    }

    fn spend_by_caller(&self, since: SystemTime, cut_off_holds: bool) -> Result<Vec<CallerSpend>, ReadError> {
        let spend = |row: &postgres::Row| -> Result<CallerSpend, postgres::Error> {
            Ok(CallerSpend {
                key_id: row.try_get(0)?,
                member: row.try_get(1)?,
                team: row.try_get(2)?,
                tokens: tokens_at(row, 3)?,
                cost_usd: row.try_get(8)?,
            })
        };
        let rows = self.query(sql::spend_by_caller(since, cut_off_holds, Dialect::Postgres))?;
        Ok(rows.iter().map(spend).collect::<Result<_, _>>().map_err(SharedError::from)?)
    }

    fn sums(&self, filter: &Filter, group_by: Option<GroupBy>) -> Result<Sums, ReadError> {
        let mut queries = vec![sql::sums(filter, None, Dialect::Postgres)];
        queries.extend(group_by.map(|by| sql::sums(filter, Some(by), Dialect::Postgres)));
        let totals = |rows: Vec<postgres::Row>| -> Result<Vec<GroupTotals>, ReadError> {
            Ok(rows.iter().map(totals_at).collect::<Result<_, _>>().map_err(SharedError::from)?)
        };
        let mut answers = self.query_all(queries)?.into_iter();
        let total = totals(answers.next().unwrap_or_default())?;
        let grouped = match (group_by, answers.next()) {
            (Some(by), Some(rows)) => Some((by, totals(rows)?)),
            _ => None,
        };
        Ok(Sums::assemble(total, grouped))
    }
}
