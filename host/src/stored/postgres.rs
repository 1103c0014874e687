//! Stored responses in the fleet's PostgreSQL (the ledger's database, table
//! `stored_responses`, made by the ledger's migrations), so every gateway of
//! the fleet sees every response. One connection, opened at first use (and
//! migrated, as the ledger's shipper does), dropped after a failure.

use postgres::Client;

use super::{Owner, Slot, StoreError, StoredResponse, Writer, parse_row, row_texts};
use crate::ledger::PostgresTarget;

pub(super) struct PostgresStore {
    target: PostgresTarget,
    client: Slot<Client>,
}

impl PostgresStore {
    pub(super) fn new(target: PostgresTarget) -> Self {
        Self { target, client: Slot::empty() }
    }

    fn with<T>(&self, work: impl FnOnce(&mut Client) -> Result<T, postgres::Error>) -> Result<T, StoreError> {
        let failed = |error: &dyn std::fmt::Display| StoreError::Postgres(error.to_string());
        self.client.with(
            || crate::ledger::connect_postgres(&self.target).map_err(|error| failed(&error)),
            |client| work(client).map_err(|error| failed(&error)),
        )
    }

    pub(super) fn put(
        &self,
        writer: &Writer,
        response: &StoredResponse,
        now: i64,
        expires_at: i64,
    ) -> Result<(), StoreError> {
        let [body, input_items, context] = row_texts(response)?;
        self.with(|client| {
            let mut transaction = client.transaction()?;
            transaction.execute("DELETE FROM stored_responses WHERE expires_at <= $1", &[&now])?;
            transaction.execute(
                "INSERT INTO stored_responses
                    (id, key_id, member, model, created_at, expires_at, response, input_items, context)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
                 ON CONFLICT (id) DO UPDATE SET key_id = EXCLUDED.key_id, member = EXCLUDED.member,
                    model = EXCLUDED.model, created_at = EXCLUDED.created_at, expires_at = EXCLUDED.expires_at,
                    response = EXCLUDED.response, input_items = EXCLUDED.input_items, context = EXCLUDED.context",
                &[
                    &response.id,
                    &writer.key_id,
                    &writer.member,
                    &response.model,
                    &response.created_at,
                    &expires_at,
                    &body,
                    &input_items,
                    &context,
                ],
            )?;
            transaction.commit()
        })
    }

    pub(super) fn get(&self, owner: &Owner, id: &str, now: i64) -> Result<Option<StoredResponse>, StoreError> {
        let (clause, value) = owner_clause(owner);
        let sql = format!(
            "SELECT id, model, created_at, response, input_items, context FROM stored_responses
             WHERE id = $1 AND expires_at > $2 AND {clause}"
        );
        let row: Option<(String, String, i64, [String; 3])> = self.with(|client| {
            let Some(row) = client.query_opt(&sql, &[&id, &now, &value])? else { return Ok(None) };
            let texts = [row.try_get(3)?, row.try_get(4)?, row.try_get(5)?];
            Ok(Some((row.try_get(0)?, row.try_get(1)?, row.try_get(2)?, texts)))
        })?;
        Ok(row.map(|(id, model, created_at, texts)| parse_row(id, model, created_at, texts)).transpose()?)
    }

    pub(super) fn delete(&self, owner: &Owner, id: &str, now: i64) -> Result<bool, StoreError> {
        let (clause, value) = owner_clause(owner);
        let sql = format!("DELETE FROM stored_responses WHERE id = $1 AND expires_at > $2 AND {clause}");
        Ok(self.with(|client| client.execute(&sql, &[&id, &now, &value]))? > 0)
    }
}

/// The blocking client's drop runs a runtime of its own to close the
/// connection, which panics on a thread that drives async tasks — where a
/// `Weir` is usually dropped — so it is closed on a thread of its own.
impl Drop for PostgresStore {
    fn drop(&mut self) {
        if let Some(client) = self.client.take() {
            let _closer = std::thread::Builder::new().name("weir-stored-close".to_owned()).spawn(move || drop(client));
        }
    }
}

/// The owner's condition (its value is parameter `$3`, typed text; `Open`
/// binds a NULL it only tests).
fn owner_clause(owner: &Owner) -> (&'static str, Option<&str>) {
    match owner {
        Owner::Open => ("key_id IS NULL AND member IS NULL AND $3::text IS NULL", None),
        Owner::Key(key_id) => ("key_id = $3", Some(key_id)),
        Owner::Member(member) => ("member = $3", Some(member)),
    }
}
