//! Stored responses in a SQLite file beside the ledger's (WAL, owner-only),
//! opened at first use and kept open; one connection, one operation at a time.

use std::path::PathBuf;
use std::time::Duration;

use rusqlite::{Connection, OptionalExtension, params};

use super::{Owner, Slot, StoreError, StoredResponse, Writer, parse_row, row_texts};

/// How long an operation waits for another process's write on the file.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

const SCHEMA: &str = include_str!("../../migrations/V4__stored_responses.sql");

pub(super) struct SqliteStore {
    path: PathBuf,
    connection: Slot<Connection>,
}

impl SqliteStore {
    pub(super) fn new(path: PathBuf) -> Self {
        Self { path, connection: Slot::empty() }
    }

    fn with<T>(&self, work: impl FnOnce(&Connection) -> Result<T, StoreError>) -> Result<T, StoreError> {
        self.connection.with(|| open(&self.path), |connection| work(connection))
    }

    pub(super) fn put(
        &self,
        writer: &Writer,
        response: &StoredResponse,
        now: i64,
        expires_at: i64,
    ) -> Result<(), StoreError> {
        let [body, input_items, context] = row_texts(response)?;
        self.with(|connection| {
            connection.execute("DELETE FROM stored_responses WHERE expires_at <= ?1", params![now])?;
            connection.execute(
                "INSERT OR REPLACE INTO stored_responses
                    (id, key_id, member, model, created_at, expires_at, response, input_items, context)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
                params![
                    response.id,
                    writer.key_id,
                    writer.member,
                    response.model,
                    response.created_at,
                    expires_at,
                    body,
                    input_items,
                    context
                ],
            )?;
            Ok(())
        })
    }

    pub(super) fn get(&self, owner: &Owner, id: &str, now: i64) -> Result<Option<StoredResponse>, StoreError> {
        let (clause, value) = owner_clause(owner);
        let sql = format!(
            "SELECT id, model, created_at, response, input_items, context FROM stored_responses
             WHERE id = ?1 AND expires_at > ?2 AND {clause}"
        );
        self.with(|connection| {
            let row = connection
                .query_row(&sql, params![id, now, value], |row| {
                    Ok((row.get(0)?, row.get(1)?, row.get(2)?, [row.get(3)?, row.get(4)?, row.get(5)?]))
                })
                .optional()?;
            Ok(row.map(|(id, model, created_at, texts)| parse_row(id, model, created_at, texts)).transpose()?)
        })
    }

    pub(super) fn delete(&self, owner: &Owner, id: &str, now: i64) -> Result<bool, StoreError> {
        let (clause, value) = owner_clause(owner);
        let sql = format!("DELETE FROM stored_responses WHERE id = ?1 AND expires_at > ?2 AND {clause}");
        self.with(|connection| Ok(connection.execute(&sql, params![id, now, value])? > 0))
    }
}

/// The owner's condition (its value is parameter `?3`; `Open` binds a NULL it
/// does not use).
fn owner_clause(owner: &Owner) -> (&'static str, Option<&str>) {
    match owner {
        Owner::Open => ("key_id IS NULL AND member IS NULL AND ?3 IS NULL", None),
        Owner::Key(key_id) => ("key_id = ?3", Some(key_id)),
        Owner::Member(member) => ("member = ?3", Some(member)),
    }
}

/// Opens (creating) the file owner-only, with the table.
fn open(path: &std::path::Path) -> Result<Connection, StoreError> {
    let file_error = |source| StoreError::File { path: path.display().to_string(), source };
    if let Some(folder) = path.parent().filter(|folder| !folder.as_os_str().is_empty()) {
        crate::ledger::create_owner_only_folder(folder).map_err(file_error)?;
    }
    crate::ledger::prepare_owner_only_database(path).map_err(file_error)?;
    let connection = Connection::open(path)?;
    connection.busy_timeout(BUSY_TIMEOUT)?;
    let _mode: String = connection.query_row("PRAGMA journal_mode = WAL", [], |row| row.get(0))?;
    let exists: bool = connection.query_row(
        "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'stored_responses')",
        [],
        |row| row.get(0),
    )?;
    if !exists {
        connection.execute_batch(SCHEMA)?;
    }
    Ok(connection)
}
