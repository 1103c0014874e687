//! Where the admin plane's objects and changes live: a SQLite file
//! `admin.db` beside the ledger's file, or, with `[ledger] postgres_url`, the
//! fleet's PostgreSQL (tables `admin_objects`, `admin_changes`, made by the
//! ledger's migrations), so every gateway of a fleet reads one state.
//!
//! Not in the ledger's own SQLite file: its writer holds long batch
//! transactions, and its rows are the calls' chain alone (see `chain`).
//!
//! A change is one transaction that excludes every other writer (SQLite:
//! `BEGIN IMMEDIATE`; PostgreSQL: `LOCK TABLE admin_changes IN EXCLUSIVE
//! MODE`): it reads the state, checks the change against it, writes the
//! object and appends the change's row to the chain. Readers are not blocked.
//!
//! The chain shows a row edited, removed or reordered in its middle, but not
//! rows cut from its end (or the whole chain recomputed). So, as the calls'
//! ledger does, each committed change's head is appended to an anchor file
//! beside the ledger (`admin.db.anchor`, keyed with `[ledger]`'s anchor key
//! when one is set; see `ledger::ChainAnchor`), and `weir ledger verify`
//! checks the chain reaches its newest line. The file records that anchoring
//! started (`admin_anchored`), so a removed anchor file is told from a
//! plane written before anchors existed. In a fleet the anchor is each
//! gateway's own: the changes it made, checked against the shared chain.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use rusqlite::{Connection, TransactionBehavior, params};

use super::chain::{self, ChainBreak, ChangeRow, GENESIS};
use super::model::{Kind, State};
use super::{AdminError, Edit};
use crate::ledger::{AnchorKey, AnchorVerdict, ChainAnchor, PostgresTarget, Tampering};

/// The file beside the ledger's that holds the admin plane.
pub const FILE_NAME: &str = "admin.db";

const SCHEMA: &str = include_str!("../../migrations/V5__admin.sql");

/// The file's record of the change its anchoring started from (see the
/// module's comment).
const ANCHORED: &str =
    "CREATE TABLE IF NOT EXISTS admin_anchored (id INTEGER PRIMARY KEY CHECK (id = 1), since_seq INTEGER NOT NULL)";

/// How long a change waits for another process's write on the file.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// Why the store could not be read or written (the details are the log's).
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("SQLite: {0}")]
    Sqlite(#[from] rusqlite::Error),
    #[error("cannot prepare the admin plane's file {path}: {source}")]
    File { path: String, source: std::io::Error },
    #[error("PostgreSQL: {0}")]
    Postgres(String),
    #[error("{0}")]
    Corrupt(String),
    #[error("the admin store's worker stopped: {0}")]
    Worker(String),
    #[error("the admin changes' anchor file: {0}")]
    Anchor(std::io::Error),
}

/// What `weir ledger verify` found of the admin changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AdminReport {
    pub rows: usize,
    pub anchor: AnchorVerdict,
}

/// Where the admin changes do not hold together.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AdminBreak {
    #[error(transparent)]
    Chain(#[from] ChainBreak),
    #[error("admin changes: {0}")]
    Anchor(#[from] Tampering),
}

impl From<postgres::Error> for StoreError {
    fn from(error: postgres::Error) -> Self {
        Self::Postgres(error.to_string())
    }
}

/// The admin plane's store. Cheap to clone.
#[derive(Clone)]
pub struct AdminStore {
    backend: Arc<Backend>,
    anchor: Arc<ChainAnchor>,
}

impl std::fmt::Debug for AdminStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AdminStore").field("where", &self.describe()).finish()
    }
}

enum Backend {
    Sqlite { path: PathBuf, connection: Mutex<Option<Connection>> },
    Postgres { target: Box<PostgresTarget>, client: Mutex<Option<postgres::Client>> },
}

/// The blocking client's drop runs a runtime of its own, which panics on a
/// thread that drives async tasks: it is closed on a thread of its own.
impl Drop for Backend {
    fn drop(&mut self) {
        if let Self::Postgres { client, .. } = self
            && let Some(client) = client.get_mut().unwrap_or_else(PoisonError::into_inner).take()
        {
            let _closer = std::thread::Builder::new().name("weir-admin-close".to_owned()).spawn(move || drop(client));
        }
    }
}

/// The operations a change's transaction needs, on either store.
trait Tx {
    fn head(&mut self) -> Result<(i64, String), StoreError>;
    fn objects(&mut self) -> Result<Vec<(String, String, String)>, StoreError>;
    fn put(&mut self, kind: &str, id: &str, body: Option<&str>) -> Result<(), StoreError>;
    fn append(&mut self, row: &ChangeRow) -> Result<(), StoreError>;
    /// Records, once, that the chain is anchored from `seq` on (the file
    /// only: a fleet's anchors are each gateway's own).
    fn mark_anchored(&mut self, seq: i64) -> Result<(), StoreError>;
}

impl AdminStore {
    /// The store beside the ledger at `ledger_file`, or in `postgres`.
    /// Nothing is opened until first used.
    pub fn new(ledger_file: &Path, postgres: Option<PostgresTarget>) -> Self {
        let file = ledger_file.with_file_name(FILE_NAME);
        let anchor = Arc::new(ChainAnchor::new(&file, None));
        let backend = match postgres {
            Some(target) => Backend::Postgres { target: Box::new(target), client: Mutex::new(None) },
            None => Backend::Sqlite { path: file, connection: Mutex::new(None) },
        };
        Self { backend: Arc::new(backend), anchor }
    }

    /// The store with its anchor lines keyed by `key` (`[ledger]`'s anchor key).
    pub fn keyed(self, key: Option<AnchorKey>) -> Self {
        Self { anchor: Arc::new(self.anchor.keyed(key)), ..self }
    }

    /// Where the plane is kept, for messages.
    pub fn describe(&self) -> String {
        match &*self.backend {
            Backend::Sqlite { path, .. } => path.display().to_string(),
            Backend::Postgres { .. } => "the fleet's PostgreSQL".to_owned(),
        }
    }

    /// The state as of the newest change (blocking).
    pub fn load(&self) -> Result<State, StoreError> {
        self.with_tx(false, |tx| {
            let (version, _) = tx.head()?;
            State::from_rows(version, tx.objects()?).map_err(StoreError::Corrupt)
        })
    }

    /// The newest change's sequence number (blocking): what a gateway polls.
    pub fn version(&self) -> Result<i64, StoreError> {
        self.with_tx(false, |tx| Ok(tx.head()?.0))
    }

    /// Makes one change (blocking): `op` decides it from the state as of now,
    /// under the lock that keeps every other writer out; the object and the
    /// change's row are written together. Answers the change and the state
    /// after it.
    pub fn change(
        &self,
        actor: &str,
        now_ms: i64,
        op: impl FnOnce(&State) -> Result<Edit, AdminError>,
    ) -> Result<(Edit, State), AdminError> {
        // The anchor file exists before the first change is marked anchored,
        // so a change committed just before a crash never reads as a removed file.
        self.anchor.open().map_err(|error| AdminError::store(StoreError::Anchor(error)))?;
        let mut decided: Option<Result<Edit, AdminError>> = None;
        let mut new_head = None;
        let state = self
            .with_tx(true, |tx| {
                let (seq, head) = tx.head()?;
                let state = State::from_rows(seq, tx.objects()?).map_err(StoreError::Corrupt)?;
                let edit = match op(&state) {
                    Ok(edit) => edit,
                    Err(refused) => {
                        decided = Some(Err(refused));
                        return Ok(None);
                    }
                };
                let text = |value: &Option<serde_json::Value>| value.as_ref().map(serde_json::Value::to_string);
                let (before, after) = (text(&edit.before), text(&edit.after));
                tx.put(edit.kind.as_str(), &edit.id, after.as_deref())?;
                let mut row = ChangeRow {
                    seq: seq + 1,
                    at_ms: now_ms,
                    actor: actor.to_owned(),
                    action: edit.action.to_owned(),
                    kind: edit.kind.as_str().to_owned(),
                    target: edit.id.clone(),
                    before,
                    after,
                    prev_hash: head,
                    hash: String::new(),
                };
                row.hash = row.expected_hash();
                tx.append(&row)?;
                tx.mark_anchored(row.seq)?;
                let state = State::from_rows(seq + 1, tx.objects()?).map_err(StoreError::Corrupt)?;
                decided = Some(Ok(edit));
                new_head = Some((row.seq, row.hash));
                Ok(Some(state))
            })
            .map_err(AdminError::store)?;
        if let Some((seq, hash)) = new_head
            && let Err(error) = self.anchor.append(seq, &hash)
        {
            tracing::error!(%error, seq, "the admin change is made, and its head cannot be anchored");
        }
        match (decided, state) {
            (Some(Ok(edit)), Some(state)) => Ok((edit, state)),
            (Some(Err(refused)), _) => Err(refused),
            _ => Err(AdminError::Store("the change was not decided".to_owned())),
        }
    }

    /// The changes after `after` (a sequence number), oldest first, at most
    /// `limit`, of one target's when `target` is given (blocking).
    pub fn changes(
        &self,
        after: i64,
        limit: i64,
        target: Option<(Kind, String)>,
    ) -> Result<Vec<ChangeRow>, StoreError> {
        match &*self.backend {
            Backend::Sqlite { .. } => self.with_sqlite(|connection| sqlite_changes(connection, after, limit, target)),
            Backend::Postgres { .. } => self.with_postgres(|client| postgres_changes(client, after, limit, target)),
        }
    }

    /// Checks the whole chain of changes and its anchor (blocking), the
    /// anchor's MACs with `key` when given.
    pub fn verify(&self, key: Option<&AnchorKey>) -> Result<Result<AdminReport, AdminBreak>, StoreError> {
        let rows = self.changes(0, i64::MAX, None)?;
        let count = match chain::verify(&rows) {
            Ok(count) => count,
            Err(broken) => return Ok(Err(broken.into())),
        };
        let last = rows.last().map_or(0, |row| row.seq);
        let hash_at = |seq: i64| rows.iter().find(|row| row.seq == seq).map(|row| row.hash.clone());
        let verdict = match self.anchor.check_chain(key, last, hash_at).map_err(StoreError::Anchor)? {
            Ok(verdict) => verdict,
            Err(tampering) => return Ok(Err(tampering.into())),
        };
        if verdict == AnchorVerdict::NoFile
            && let Some(since) = self.anchored_since()?.filter(|since| *since <= last)
        {
            let path = self.anchor.path().display().to_string();
            return Ok(Err(Tampering::MissingAnchorFile { since, path }.into()));
        }
        Ok(Ok(AdminReport { rows: count, anchor: verdict }))
    }

    /// The change from which the file's chain is anchored (`None`: not yet,
    /// or a fleet's, whose anchors are each gateway's own).
    fn anchored_since(&self) -> Result<Option<i64>, StoreError> {
        match &*self.backend {
            Backend::Sqlite { .. } => self.with_sqlite(|connection| {
                let since =
                    connection.query_row("SELECT since_seq FROM admin_anchored WHERE id = 1", [], |row| row.get(0));
                match since {
                    Ok(since) => Ok(Some(since)),
                    Err(rusqlite::Error::QueryReturnedNoRows) => Ok(None),
                    Err(error) => Err(error.into()),
                }
            }),
            Backend::Postgres { .. } => Ok(None),
        }
    }

    fn with_tx<T>(
        &self,
        write: bool,
        work: impl FnOnce(&mut dyn Tx) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        match &*self.backend {
            Backend::Sqlite { .. } => self.with_sqlite(|connection| {
                let behavior = if write { TransactionBehavior::Immediate } else { TransactionBehavior::Deferred };
                let transaction = connection.transaction_with_behavior(behavior)?;
                let mut tx = SqliteTx(transaction);
                let out = work(&mut tx)?;
                tx.0.commit()?;
                Ok(out)
            }),
            Backend::Postgres { .. } => self.with_postgres(|client| {
                let mut transaction = client.transaction()?;
                if write {
                    transaction.batch_execute("LOCK TABLE admin_changes IN EXCLUSIVE MODE")?;
                }
                let mut tx = PostgresTx(transaction);
                let out = work(&mut tx)?;
                tx.0.commit()?;
                Ok(out)
            }),
        }
    }

    fn with_sqlite<T>(&self, work: impl FnOnce(&mut Connection) -> Result<T, StoreError>) -> Result<T, StoreError> {
        let Backend::Sqlite { path, connection } = &*self.backend else {
            return Err(StoreError::Corrupt("not a SQLite store".to_owned()));
        };
        let mut slot = connection.lock().unwrap_or_else(PoisonError::into_inner);
        let mut open = match slot.take() {
            Some(open) => open,
            None => open_sqlite(path)?,
        };
        let result = work(&mut open);
        if result.is_ok() {
            *slot = Some(open);
        }
        result
    }

    fn with_postgres<T>(
        &self,
        work: impl FnOnce(&mut postgres::Client) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let Backend::Postgres { target, client } = &*self.backend else {
            return Err(StoreError::Corrupt("not a PostgreSQL store".to_owned()));
        };
        let mut slot = client.lock().unwrap_or_else(PoisonError::into_inner);
        let mut open = match slot.take() {
            Some(open) => open,
            None => crate::ledger::connect_postgres(target).map_err(|error| StoreError::Postgres(error.to_string()))?,
        };
        let result = work(&mut open);
        if result.is_ok() {
            *slot = Some(open);
        }
        result
    }
}

/// Opens (creating) the file owner-only, with the tables.
fn open_sqlite(path: &Path) -> Result<Connection, StoreError> {
    let file_error = |source| StoreError::File { path: path.display().to_string(), source };
    if let Some(folder) = path.parent().filter(|folder| !folder.as_os_str().is_empty()) {
        crate::ledger::create_owner_only_folder(folder).map_err(file_error)?;
    }
    crate::ledger::prepare_owner_only_database(path).map_err(file_error)?;
    let connection = Connection::open(path)?;
    connection.busy_timeout(BUSY_TIMEOUT)?;
    let _mode: String = connection.query_row("PRAGMA journal_mode = WAL", [], |row| row.get(0))?;
    let exists: bool = connection.query_row(
        "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'admin_changes')",
        [],
        |row| row.get(0),
    )?;
    if !exists {
        connection.execute_batch(&format!("BEGIN IMMEDIATE; {SCHEMA} COMMIT;"))?;
    }
    connection.execute_batch(ANCHORED)?;
    Ok(connection)
}

struct SqliteTx<'a>(rusqlite::Transaction<'a>);

impl Tx for SqliteTx<'_> {
    fn head(&mut self) -> Result<(i64, String), StoreError> {
        let head = self.0.query_row("SELECT seq, hash FROM admin_changes ORDER BY seq DESC LIMIT 1", [], |row| {
            Ok((row.get(0)?, row.get(1)?))
        });
        match head {
            Ok(head) => Ok(head),
            Err(rusqlite::Error::QueryReturnedNoRows) => Ok((0, GENESIS.to_owned())),
            Err(error) => Err(error.into()),
        }
    }

    fn objects(&mut self) -> Result<Vec<(String, String, String)>, StoreError> {
        let mut statement = self.0.prepare("SELECT kind, id, body FROM admin_objects ORDER BY kind, id")?;
        let rows = statement.query_map([], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)))?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    fn put(&mut self, kind: &str, id: &str, body: Option<&str>) -> Result<(), StoreError> {
        match body {
            Some(body) => self.0.execute(
                "INSERT INTO admin_objects (kind, id, body) VALUES (?1, ?2, ?3)
                 ON CONFLICT (kind, id) DO UPDATE SET body = excluded.body",
                params![kind, id, body],
            )?,
            None => self.0.execute("DELETE FROM admin_objects WHERE kind = ?1 AND id = ?2", params![kind, id])?,
        };
        Ok(())
    }

    fn append(&mut self, row: &ChangeRow) -> Result<(), StoreError> {
        self.0.execute(
            "INSERT INTO admin_changes (seq, at_ms, actor, action, kind, target, before, after, prev_hash, hash)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
            params![
                row.seq,
                row.at_ms,
                row.actor,
                row.action,
                row.kind,
                row.target,
                row.before,
                row.after,
                row.prev_hash,
                row.hash
            ],
        )?;
        Ok(())
    }

    fn mark_anchored(&mut self, seq: i64) -> Result<(), StoreError> {
        self.0.execute("INSERT OR IGNORE INTO admin_anchored (id, since_seq) VALUES (1, ?1)", params![seq])?;
        Ok(())
    }
}

struct PostgresTx<'a>(postgres::Transaction<'a>);

impl Tx for PostgresTx<'_> {
    fn head(&mut self) -> Result<(i64, String), StoreError> {
        let row = self.0.query_opt("SELECT seq, hash FROM admin_changes ORDER BY seq DESC LIMIT 1", &[])?;
        match row {
            Some(row) => Ok((row.try_get(0)?, row.try_get(1)?)),
            None => Ok((0, GENESIS.to_owned())),
        }
    }

    fn objects(&mut self) -> Result<Vec<(String, String, String)>, StoreError> {
        let rows = self.0.query("SELECT kind, id, body FROM admin_objects ORDER BY kind, id", &[])?;
        rows.iter().map(|row| Ok((row.try_get(0)?, row.try_get(1)?, row.try_get(2)?))).collect()
    }

    fn put(&mut self, kind: &str, id: &str, body: Option<&str>) -> Result<(), StoreError> {
        match body {
            Some(body) => self.0.execute(
                "INSERT INTO admin_objects (kind, id, body) VALUES ($1, $2, $3)
                 ON CONFLICT (kind, id) DO UPDATE SET body = EXCLUDED.body",
                &[&kind, &id, &body],
            )?,
            None => self.0.execute("DELETE FROM admin_objects WHERE kind = $1 AND id = $2", &[&kind, &id])?,
        };
        Ok(())
    }

    fn append(&mut self, row: &ChangeRow) -> Result<(), StoreError> {
        self.0.execute(
            "INSERT INTO admin_changes (seq, at_ms, actor, action, kind, target, before, after, prev_hash, hash)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
            &[
                &row.seq,
                &row.at_ms,
                &row.actor,
                &row.action,
                &row.kind,
                &row.target,
                &row.before,
                &row.after,
                &row.prev_hash,
                &row.hash,
            ],
        )?;
        Ok(())
    }

    fn mark_anchored(&mut self, _seq: i64) -> Result<(), StoreError> {
        Ok(())
    }
}

const CHANGE_COLUMNS: &str = "seq, at_ms, actor, action, kind, target, before, after, prev_hash, hash";

fn sqlite_changes(
    connection: &mut Connection,
    after: i64,
    limit: i64,
    target: Option<(Kind, String)>,
) -> Result<Vec<ChangeRow>, StoreError> {
    let (kind, id) = target.map_or((None, None), |(kind, id)| (Some(kind.as_str()), Some(id)));
    let sql = format!(
        "SELECT {CHANGE_COLUMNS} FROM admin_changes
         WHERE seq > ?1 AND (?2 IS NULL OR (kind = ?2 AND target = ?3)) ORDER BY seq LIMIT ?4"
    );
    let mut statement = connection.prepare(&sql)?;
    let rows = statement.query_map(params![after, kind, id, limit], |row| {
        Ok(ChangeRow {
            seq: row.get(0)?,
            at_ms: row.get(1)?,
            actor: row.get(2)?,
            action: row.get(3)?,
            kind: row.get(4)?,
            target: row.get(5)?,
            before: row.get(6)?,
            after: row.get(7)?,
            prev_hash: row.get(8)?,
            hash: row.get(9)?,
        })
    })?;
    Ok(rows.collect::<Result<_, _>>()?)
}

fn postgres_changes(
    client: &mut postgres::Client,
    after: i64,
    limit: i64,
    target: Option<(Kind, String)>,
) -> Result<Vec<ChangeRow>, StoreError> {
    let (kind, id) = target.map_or((None, None), |(kind, id)| (Some(kind.as_str()), Some(id)));
    let sql = format!(
        "SELECT {CHANGE_COLUMNS} FROM admin_changes
         WHERE seq > $1 AND ($2::text IS NULL OR (kind = $2 AND target = $3)) ORDER BY seq LIMIT $4"
    );
    let rows = client.query(&sql, &[&after, &kind, &id, &limit])?;
    rows.iter()
        .map(|row| {
            Ok(ChangeRow {
                seq: row.try_get(0)?,
                at_ms: row.try_get(1)?,
                actor: row.try_get(2)?,
                action: row.try_get(3)?,
                kind: row.try_get(4)?,
                target: row.try_get(5)?,
                before: row.try_get(6)?,
                after: row.try_get(7)?,
                prev_hash: row.try_get(8)?,
                hash: row.try_get(9)?,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use serde_json::json;

    use super::*;

    /// Sets member `name`'s budget, as `POST /admin/v1/members/{name}` does.
    fn set_budget(store: &AdminStore, name: &str, tokens: u64) {
        let after = json!({"name": name, "budget": {"daily_tokens": tokens}, "updated_ms": 1, "updated_by": "root"});
        let edit = |_: &State| {
            Ok(Edit { action: "member.put", kind: Kind::Member, id: name.to_owned(), before: None, after: Some(after) })
        };
        store.change("root", 1, edit).unwrap();
    }

    fn sqlite(path: &Path, sql: &str) {
        Connection::open(path).unwrap().execute_batch(sql).unwrap();
    }

    /// Rows cut from the chain's end, a chain recomputed after an edit, and a
    /// removed anchor file are each seen; none of them breaks the chain itself.
    #[test]
    fn the_anchor_shows_what_the_chain_alone_cannot() {
        let dir = tempfile::tempdir().unwrap();
        let store = AdminStore::new(&dir.path().join("ledger.db"), None);
        let file = dir.path().join(FILE_NAME);
        for (name, tokens) in [("ana", 10), ("bob", 20), ("cy", 30)] {
            set_budget(&store, name, tokens);
        }
        let verified = store.verify(None).unwrap().unwrap();
        assert_eq!(verified, AdminReport { rows: 3, anchor: AnchorVerdict::Anchored { seq: 3 } });

        sqlite(&file, "DELETE FROM admin_changes WHERE seq = 3");
        let cut = store.verify(None).unwrap().unwrap_err();
        assert_eq!(cut, AdminBreak::Anchor(Tampering::Shorter { rows: 2, anchored: 3 }));
        assert!(cut.to_string().contains("deleted from its end"), "{cut}");

        // Row 2 edited and its hash recomputed: a valid chain, not the one anchored.
        set_budget(&store, "dee", 40);
        let rows = store.changes(0, 10, None).unwrap();
        let mut forged = rows[2].clone();
        forged.actor = "someone".to_owned();
        forged.hash = forged.expected_hash();
        sqlite(&file, &format!("UPDATE admin_changes SET actor = 'someone', hash = '{}' WHERE seq = 3", forged.hash));
        let recomputed = store.verify(None).unwrap().unwrap_err();
        assert_eq!(recomputed, AdminBreak::Anchor(Tampering::HeadMismatch { seq: 3 }));

        std::fs::remove_file(dir.path().join("admin.db.anchor")).unwrap();
        let missing = store.verify(None).unwrap().unwrap_err();
        assert!(matches!(missing, AdminBreak::Anchor(Tampering::MissingAnchorFile { since: 1, .. })), "{missing}");
    }

    /// Lines written with the anchor key verify with it, and not with another.
    #[test]
    fn keyed_anchor_lines_verify_only_with_their_key() {
        let dir = tempfile::tempdir().unwrap();
        let key = |fill: u8| AnchorKey::new(&[fill; 40]).unwrap();
        let store = AdminStore::new(&dir.path().join("ledger.db"), None).keyed(Some(key(b'k')));
        set_budget(&store, "ana", 10);
        assert_eq!(store.verify(Some(&key(b'k'))).unwrap().unwrap().anchor, AnchorVerdict::Anchored { seq: 1 });
        let forged = store.verify(Some(&key(b'x'))).unwrap().unwrap_err();
        assert_eq!(forged, AdminBreak::Anchor(Tampering::BadMac { line: 1 }));
    }

    /// A plane written before anchors existed (no marker, no file) verifies,
    /// saying it has no anchor.
    #[test]
    fn a_plane_from_before_anchors_verifies_without_one() {
        let dir = tempfile::tempdir().unwrap();
        let store = AdminStore::new(&dir.path().join("ledger.db"), None);
        set_budget(&store, "ana", 10);
        sqlite(&dir.path().join(FILE_NAME), "DROP TABLE admin_anchored");
        std::fs::remove_file(dir.path().join("admin.db.anchor")).unwrap();
        let fresh = AdminStore::new(&dir.path().join("ledger.db"), None);
        assert_eq!(fresh.verify(None).unwrap().unwrap(), AdminReport { rows: 1, anchor: AnchorVerdict::NoFile });
    }
}
