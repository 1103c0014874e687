//! Stored responses: what `POST /v1/responses` keeps under `store: true` so a
//! later request can continue from it (`previous_response_id`) and its owner
//! can read or delete it (`GET` / `DELETE /v1/responses/{id}`,
//! `GET /v1/responses/{id}/input_items`).
//!
//! Where: with a ledger, a SQLite file `responses.db` beside the ledger's file
//! (owner-only, as the ledger's files are); with `[ledger] postgres_url`, the
//! fleet's PostgreSQL database (table `stored_responses`), so any gateway of
//! the fleet continues any response. Not in the ledger's own SQLite file: the
//! ledger is append-only and hash-chained, these rows are deleted, and its
//! writer holds long batch transactions a response's answer would wait on.
//!
//! Who sees a row: the key that made it, or, under `[responses] visible_to =
//! "member"`, any key of the same member; anything else reads as absent (the
//! route answers 404, the same as for an id that never existed). On a keyless
//! gateway every caller is the same owner. A row lives `[responses]
//! retention_secs` (default 30 days) and is then treated as absent and purged.

mod postgres;
mod sqlite;

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::Value;

use crate::caller::Caller;
use crate::catalog::{ResponsesSettings, ResponsesVisibility};
use crate::ledger::PostgresTarget;

/// OpenAI keeps a stored response 30 days; so does Weir unless told otherwise.
pub const DEFAULT_RETENTION: Duration = Duration::from_secs(30 * 24 * 60 * 60);

/// The file beside the ledger's that holds the stored responses.
const FILE_NAME: &str = "responses.db";

/// One stored response.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredResponse {
    /// The response's id (`resp_…`).
    pub id: String,
    /// The catalog id that served it.
    pub model: String,
    /// Unix seconds.
    pub created_at: i64,
    /// The response object as it was answered.
    pub response: Value,
    /// The request's own input items, each with its `id`, in order.
    pub input_items: Vec<Value>,
    /// What a continuation starts from: the previous response's context, this
    /// request's input items and this response's output items, in order.
    pub context: Vec<Value>,
}

/// Who may see a stored response: the key (or member) that made it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Owner {
    /// A keyless gateway: one owner for everyone.
    Open,
    /// Rows of this key id.
    Key(String),
    /// Rows of any key of this member.
    Member(String),
}

/// The owner columns a row is written with.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Writer {
    key_id: Option<String>,
    member: Option<String>,
}

/// Why the store could not be read or written (the details are the log's).
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("SQLite: {0}")]
    Sqlite(#[from] rusqlite::Error),
    #[error("cannot prepare the stored responses' file {path}: {source}")]
    File { path: String, source: std::io::Error },
    #[error("PostgreSQL: {0}")]
    Postgres(String),
    #[error("a stored response's JSON does not parse: {0}")]
    Corrupt(#[from] serde_json::Error),
    #[error("the store's worker stopped: {0}")]
    Worker(String),
}

/// The stored responses, in SQLite or the fleet's PostgreSQL. Cheap to clone.
#[derive(Clone)]
pub struct ResponseStore {
    backend: Arc<Backend>,
    retention: Duration,
    visibility: ResponsesVisibility,
}

impl std::fmt::Debug for ResponseStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResponseStore").field("retention", &self.retention).finish_non_exhaustive()
    }
}

enum Backend {
    Sqlite(sqlite::SqliteStore),
    Postgres(Box<postgres::PostgresStore>),
}

impl ResponseStore {
    /// The store beside the ledger at `ledger_file`, or in `postgres` when the
    /// fleet shares one. Nothing is opened until first used.
    pub fn new(ledger_file: &Path, postgres: Option<PostgresTarget>, settings: &ResponsesSettings) -> Self {
        let backend = match postgres {
            Some(target) => Backend::Postgres(Box::new(postgres::PostgresStore::new(target))),
            None => Backend::Sqlite(sqlite::SqliteStore::new(ledger_file.with_file_name(FILE_NAME))),
        };
        Self {
            backend: Arc::new(backend),
            retention: settings.retention_secs.map_or(DEFAULT_RETENTION, Duration::from_secs),
            visibility: settings.visible_to.unwrap_or_default(),
        }
    }

    /// Whether responses are kept at all (`retention_secs = 0` turns it off).
    pub fn enabled(&self) -> bool {
        !self.retention.is_zero()
    }

    /// Who `caller` is to the store, as `[responses] visible_to` says.
    pub fn owner(&self, caller: Option<&Caller>) -> Owner {
        match (caller, self.visibility) {
            (None, _) => Owner::Open,
            (Some(caller), ResponsesVisibility::Member) => Owner::Member(caller.member.clone()),
            (Some(caller), ResponsesVisibility::Key) => match &caller.key_id {
                Some(key_id) => Owner::Key(key_id.clone()),
                None => Owner::Member(caller.member.clone()),
            },
        }
    }

    /// Keeps `response` for `caller` until the retention ends (also purging
    /// what has expired).
    pub async fn put(&self, caller: Option<&Caller>, response: StoredResponse) -> Result<(), StoreError> {
        let writer = Writer {
            key_id: caller.and_then(|caller| caller.key_id.clone()),
            member: caller.map(|caller| caller.member.clone()),
        };
        let now = unix_now();
        let expires_at = now.saturating_add(i64::try_from(self.retention.as_secs()).unwrap_or(i64::MAX));
        let backend = Arc::clone(&self.backend);
        blocking(move || match &*backend {
            Backend::Sqlite(store) => store.put(&writer, &response, now, expires_at),
            Backend::Postgres(store) => store.put(&writer, &response, now, expires_at),
        })
        .await
    }

    /// The response `id` if `owner` may see it and it has not expired.
    pub async fn get(&self, owner: &Owner, id: &str) -> Result<Option<StoredResponse>, StoreError> {
        let (backend, owner, id) = (Arc::clone(&self.backend), owner.clone(), id.to_owned());
        blocking(move || match &*backend {
            Backend::Sqlite(store) => store.get(&owner, &id, unix_now()),
            Backend::Postgres(store) => store.get(&owner, &id, unix_now()),
        })
        .await
    }

    /// Deletes the response `id` if `owner` may see it; whether it did.
    pub async fn delete(&self, owner: &Owner, id: &str) -> Result<bool, StoreError> {
        let (backend, owner, id) = (Arc::clone(&self.backend), owner.clone(), id.to_owned());
        blocking(move || match &*backend {
            Backend::Sqlite(store) => store.delete(&owner, &id, unix_now()),
            Backend::Postgres(store) => store.delete(&owner, &id, unix_now()),
        })
        .await
    }
}

/// A backend's one connection: opened at first use and kept while it works; an
/// operation that fails drops it, so the next one opens afresh.
struct Slot<C>(std::sync::Mutex<Option<C>>);

impl<C> Slot<C> {
    fn empty() -> Self {
        Self(std::sync::Mutex::new(None))
    }

    /// Runs `work` on the connection, `open`ing one first when there is none.
    fn with<T>(
        &self,
        open: impl FnOnce() -> Result<C, StoreError>,
        work: impl FnOnce(&mut C) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let mut slot = self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut connection = match slot.take() {
            Some(connection) => connection,
            None => open()?,
        };
        let result = work(&mut connection);
        if result.is_ok() {
            *slot = Some(connection);
        }
        result
    }

    /// The connection, out of the slot (to close it somewhere else).
    fn take(&mut self) -> Option<C> {
        self.0.get_mut().unwrap_or_else(std::sync::PoisonError::into_inner).take()
    }
}

/// Runs a store operation where blocking is allowed.
async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, StoreError> + Send + 'static,
) -> Result<T, StoreError> {
    tokio::task::spawn_blocking(work).await.map_err(|error| StoreError::Worker(error.to_string()))?
}

fn unix_now() -> i64 {
    let seconds = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |elapsed| elapsed.as_secs());
    i64::try_from(seconds).unwrap_or(i64::MAX)
}

/// The JSON columns of a row, parsed.
fn parse_row(
    id: String,
    model: String,
    created_at: i64,
    texts: [String; 3],
) -> Result<StoredResponse, serde_json::Error> {
    let [response, input_items, context] = texts;
    Ok(StoredResponse {
        id,
        model,
        created_at,
        response: serde_json::from_str(&response)?,
        input_items: serde_json::from_str(&input_items)?,
        context: serde_json::from_str(&context)?,
    })
}

/// The JSON columns of a response, as text.
fn row_texts(response: &StoredResponse) -> Result<[String; 3], serde_json::Error> {
    Ok([
        serde_json::to_string(&response.response)?,
        serde_json::to_string(&response.input_items)?,
        serde_json::to_string(&response.context)?,
    ])
}

#[cfg(test)]
mod tests;
