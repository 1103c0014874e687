//! `/admin/v1/...`: the admin plane over HTTP (see [`crate::admin`]). Every
//! route needs an `admin` key (403 otherwise, also on a keyless gateway);
//! bodies are JSON objects, answers JSON; errors carry a stable `code`.
//!
//! - `GET  /admin/v1/keys` (`member`, `team`, `status`, `source`, `limit`, `after`)
//! - `POST /admin/v1/keys` — create; the answer's `token` is shown once
//! - `GET  /admin/v1/keys/{id}`, `POST /admin/v1/keys/{id}` — read, change fields
//! - `POST /admin/v1/keys/{id}/rotate`, `/revoke`, `/expire`
//! - `GET  /admin/v1/members`, `POST` / `DELETE /admin/v1/members/{name}` (and `teams`)
//! - `GET  /admin/v1/budgets` — every budget's limit, spend, holds, remainder
//! - `GET  /admin/v1/changes` (`after`, `limit`, `kind` + `target`) — the audit rows

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use axum::body::Bytes;
use axum::extract::{Extension, Path, RawQuery, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use tokio::sync::Notify;

use super::auth::Authenticated;
use crate::Weir;
use crate::admin::{self, AdminError, Kind, RuntimeKey, State as PlaneState, ops};
use crate::catalog::KeyEntry;
use crate::identity::{Key, new_key};

/// How many rows a list answers when the request says nothing, and at most.
const DEFAULT_LIMIT: usize = 100;
const MAX_LIMIT: usize = 1_000;

/// An admin route's refusal.
#[derive(Debug)]
pub(super) enum Refused {
    Admin(AdminError),
    /// Not an admin key (or no key).
    Forbidden(String),
}

impl From<AdminError> for Refused {
    fn from(error: AdminError) -> Self {
        Self::Admin(error)
    }
}

impl IntoResponse for Refused {
    fn into_response(self) -> Response {
        let (status, code, message) = match self {
            Self::Admin(error) => (error.status(), error.code(), error.to_string()),
            Self::Forbidden(message) => (403, "permission_denied", message),
        };
        let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let body = json!({"error": {"message": message, "type": code, "code": code, "param": null}});
        (status, axum::Json(body)).into_response()
    }
}

type Answer = Result<Response, Refused>;

/// The caller's key, when it is an `admin` one.
fn admin_key(caller: &Authenticated) -> Result<Arc<Key>, Refused> {
    match caller {
        Authenticated::Key(key) if key.admin => Ok(Arc::clone(key)),
        Authenticated::Key(key) => {
            Err(Refused::Forbidden(format!("the API key `{}` may not use the admin API (it is not `admin`)", key.id)))
        }
        Authenticated::Open | Authenticated::NotChecked => {
            Err(Refused::Forbidden("the admin API needs an `admin` key; this gateway has no keys".to_owned()))
        }
    }
}

fn store(weir: &Weir) -> Result<admin::AdminStore, Refused> {
    weir.admin_store().cloned().ok_or(Refused::Admin(AdminError::Unavailable))
}

/// Makes a change: decided and written in the store's transaction, then
/// applied here at once. Answers the change's object after it.
async fn change<F>(weir: &Weir, actor: &str, op: F) -> Result<(admin::Edit, PlaneState), Refused>
where
    F: FnOnce(&PlaneState) -> Result<admin::Edit, AdminError> + Send + 'static,
{
    let store = store(weir)?;
    let weir_notices = weir.admin_notices().cloned();
    let (weir, actor) = (weir.clone(), actor.to_owned());
    let now_ms = admin::model::to_ms(SystemTime::now());
    let done = tokio::task::spawn_blocking(move || {
        let (edit, state) = store.change(&actor, now_ms, op)?;
        if let Err(reason) = weir.apply_admin(state.clone()) {
            tracing::error!(%reason, "an admin change was stored and could not be applied here");
        }
        Ok::<_, AdminError>((edit, state))
    })
    .await
    .map_err(|error| AdminError::Store(error.to_string()))?;
    let (edit, state) = done?;
    if let Some(notices) = weir_notices {
        // Detached: the answer does not wait on Redis; a lost notice leaves the others their poll.
        let version = state.version;
        drop(tokio::spawn(async move { notices.announce(version).await }));
    }
    Ok((edit, state))
}

fn json_answer(status: StatusCode, body: Value) -> Response {
    (status, axum::Json(body)).into_response()
}

/// The query's pairs.
fn query_pairs(query: Option<&str>) -> BTreeMap<String, String> {
    form_urlencoded::parse(query.unwrap_or_default().as_bytes()).into_owned().collect()
}

fn limit(pairs: &BTreeMap<String, String>) -> Result<usize, AdminError> {
    match pairs.get("limit") {
        None => Ok(DEFAULT_LIMIT),
        Some(text) => text.parse::<usize>().ok().filter(|n| (1..=MAX_LIMIT).contains(n)).ok_or_else(|| {
            AdminError::Invalid { field: "limit", message: format!("must be a whole number from 1 to {MAX_LIMIT}") }
        }),
    }
}

/// A runtime key as the API shows it (never a hash or a token).
fn runtime_view(key: &RuntimeKey, now: SystemTime) -> Value {
    let grace = key.previous_until_ms.filter(|until| admin::model::from_ms(*until) > now).map(admin::model::rfc3339_ms);
    json!({
        "id": key.id,
        "source": "runtime",
        "member": key.member,
        "team": key.team,
        "models": key.models,
        "rpm": key.rpm,
        "tpm": key.tpm,
        "expires": key.expires,
        "admin": key.admin,
        "default_effort": key.default_effort,
        "budget": key.budget,
        "status": key.status(now),
        "created_at": admin::model::rfc3339_ms(key.created_ms),
        "created_by": key.created_by,
        "revoked_at": key.revoked_ms.map(admin::model::rfc3339_ms),
        "rotation_grace_until": grace,
    })
}

/// A config file key, read-only here.
fn file_view(entry: &KeyEntry, now: SystemTime) -> Value {
    let expired = entry
        .expires
        .as_deref()
        .and_then(|text| humantime::parse_rfc3339_weak(text).ok())
        .is_some_and(|expires| now >= expires);
    json!({
        "id": entry.id,
        "source": "file",
        "member": entry.member,
        "team": entry.team,
        "models": entry.models,
        "rpm": entry.rpm,
        "tpm": entry.tpm,
        "expires": entry.expires,
        "admin": entry.admin,
        "default_effort": entry.default_effort.map(crate::types::effort_name),
        "budget": admin::Budget::from_fields(&entry.budget()),
        "status": if expired { "expired" } else { "active" },
    })
}

/// Every key, the file's and the plane's, by id.
fn every_key(weir: &Weir) -> BTreeMap<String, Value> {
    let now = SystemTime::now();
    let mut keys: BTreeMap<String, Value> =
        weir.admin_state().keys.values().map(|key| (key.id.clone(), runtime_view(key, now))).collect();
    for entry in weir.file_keys() {
        keys.insert(entry.id.clone(), file_view(&entry, now));
    }
    keys
}

/// A list page: at most `limit` rows after the id `after`, and the cursor of
/// the next page (`null` at the end).
fn page(rows: impl Iterator<Item = (String, Value)>, pairs: &BTreeMap<String, String>) -> Result<Value, Refused> {
    let limit = limit(pairs)?;
    let after = pairs.get("after");
    let mut data: Vec<(String, Value)> =
        rows.filter(|(id, _)| after.is_none_or(|after| id > after)).take(limit + 1).collect();
    let more = data.len() > limit;
    data.truncate(limit);
    let next = if more { data.last().map(|(id, _)| id.clone()) } else { None };
    Ok(json!({"object": "list", "data": data.into_iter().map(|(_, row)| row).collect::<Vec<_>>(), "next_after": next}))
}

pub(super) async fn list_keys(
    State(weir): State<Weir>,
    Extension(caller): Extension<Authenticated>,
    RawQuery(query): RawQuery,
) -> Answer {
    admin_key(&caller)?;
    let pairs = query_pairs(query.as_deref());
    let choices: [(&'static str, &[&str]); 2] =
        [("status", &["active", "expired", "revoked"]), ("source", &["file", "runtime"])];
    for (field, allowed) in choices {
        if let Some(value) = pairs.get(field).filter(|value| !allowed.contains(&value.as_str())) {
            let message = format!("`{value}` is not one of {}", allowed.join(", "));
            return Err(AdminError::Invalid { field, message }.into());
        }
    }
    let matches = |row: &Value| {
        ["member", "team", "status", "source"]
            .iter()
            .all(|field| pairs.get(*field).is_none_or(|wanted| row[*field].as_str() == Some(wanted)))
    };
    let rows = every_key(&weir).into_iter().filter(|(_, row)| matches(row));
    Ok(json_answer(StatusCode::OK, page(rows, &pairs)?))
}

pub(super) async fn get_key(
    State(weir): State<Weir>,
    Extension(caller): Extension<Authenticated>,
    Path(id): Path<String>,
) -> Answer {
    admin_key(&caller)?;
    match every_key(&weir).remove(&id) {
        Some(view) => Ok(json_answer(StatusCode::OK, view)),
        None => Err(AdminError::NotFound { kind: "key", id }.into()),
    }
}

/// A freshly minted token and its hash.
fn minted() -> Result<crate::identity::NewKey, Refused> {
    new_key().map_err(|error| Refused::Admin(AdminError::Store(error)))
}

/// The key answer after a change, with the token when one was minted.
fn key_answer(status: StatusCode, edit: &admin::Edit, state: &PlaneState, token: Option<String>) -> Answer {
    let key = state.keys.get(&edit.id).ok_or_else(|| AdminError::NotFound { kind: "key", id: edit.id.clone() })?;
    let mut body = json!({"key": runtime_view(key, SystemTime::now())});
    if let Some(token) = token {
        body["token"] = json!(token);
    }
    Ok(json_answer(status, body))
}

pub(super) async fn create_key(
    State(weir): State<Weir>,
    Extension(caller): Extension<Authenticated>,
    body: Bytes,
) -> Answer {
    let actor = admin_key(&caller)?;
    let request: ops::CreateKey = ops::parse(&body)?;
    let fresh = minted()?;
    let op = ops::create_key(&weir.admin_context(&actor.id), request, fresh.hash)?;
    let (edit, state) = change(&weir, &actor.id, op).await?;
    key_answer(StatusCode::CREATED, &edit, &state, Some(fresh.token))
}

pub(super) async fn update_key(
    State(weir): State<Weir>,
    Extension(caller): Extension<Authenticated>,
    Path(id): Path<String>,
    body: Bytes,
) -> Answer {
    let actor = admin_key(&caller)?;
    let request: ops::UpdateKey = ops::parse(&body)?;
    let op = ops::update_key(&weir.admin_context(&actor.id), id, request)?;
    let (edit, state) = change(&weir, &actor.id, op).await?;
    key_answer(StatusCode::OK, &edit, &state, None)
}

/// `POST /admin/v1/keys/{id}/{action}`: `rotate`, `revoke` or `expire`.
pub(super) async fn key_action(
    State(weir): State<Weir>,
    Extension(caller): Extension<Authenticated>,
    Path((id, action)): Path<(String, String)>,
    body: Bytes,
) -> Answer {
    let actor = admin_key(&caller)?;
    let context = weir.admin_context(&actor.id);
    match action.as_str() {
        "rotate" => {
            let request: ops::Rotate = ops::parse(&body)?;
            let fresh = minted()?;
            let op = ops::rotate_key(&context, id, request, fresh.hash)?;
            let (edit, state) = change(&weir, &actor.id, op).await?;
            key_answer(StatusCode::OK, &edit, &state, Some(fresh.token))
        }
        "revoke" => {
            let _: ops::Revoke = ops::parse(&body)?;
            let (edit, state) = change(&weir, &actor.id, ops::revoke_key(&context, id)?).await?;
            key_answer(StatusCode::OK, &edit, &state, None)
        }
        "expire" => {
            let request: ops::Expire = ops::parse(&body)?;
            let (edit, state) = change(&weir, &actor.id, ops::expire_key(&context, id, request)?).await?;
            key_answer(StatusCode::OK, &edit, &state, None)
        }
        _ => Err(AdminError::NotFound { kind: "key action", id: action }.into()),
    }
}

fn scope_kind(kind: &str) -> Result<Kind, Refused> {
    match kind {
        "members" => Ok(Kind::Member),
        "teams" => Ok(Kind::Team),
        _ => Err(AdminError::NotFound { kind: "collection", id: kind.to_owned() }.into()),
    }
}

/// `GET /admin/v1/members` and `/admin/v1/teams`: the plane's budgets and the file's.
pub(super) async fn list_scopes(
    State(weir): State<Weir>,
    Extension(caller): Extension<Authenticated>,
    Path(kind): Path<String>,
    RawQuery(query): RawQuery,
) -> Answer {
    admin_key(&caller)?;
    let kind = scope_kind(&kind)?;
    let pairs = query_pairs(query.as_deref());
    let state = weir.admin_state();
    let plane = match kind {
        Kind::Member => &state.members,
        Kind::Team | Kind::Key => &state.teams,
    };
    let mut rows: BTreeMap<String, Value> = plane
        .values()
        .map(|entry| {
            let view = json!({
                "name": entry.name,
                "source": "runtime",
                "budget": entry.budget,
                "updated_at": admin::model::rfc3339_ms(entry.updated_ms),
                "updated_by": entry.updated_by,
            });
            (entry.name.clone(), view)
        })
        .collect();
    let config = weir.config();
    let file: Vec<(String, admin::Budget)> = match kind {
        Kind::Member => {
            config.members.iter().map(|(name, m)| (name.clone(), admin::Budget::from_fields(&m.budget()))).collect()
        }
        Kind::Team | Kind::Key => {
            config.teams.iter().map(|(name, t)| (name.clone(), admin::Budget::from_fields(t))).collect()
        }
    };
    for (name, budget) in file {
        rows.insert(name.clone(), json!({"name": name, "source": "file", "budget": budget}));
    }
    Ok(json_answer(StatusCode::OK, page(rows.into_iter(), &pairs)?))
}

pub(super) async fn put_scope(
    State(weir): State<Weir>,
    Extension(caller): Extension<Authenticated>,
    Path((kind, name)): Path<(String, String)>,
    body: Bytes,
) -> Answer {
    let actor = admin_key(&caller)?;
    let kind = scope_kind(&kind)?;
    let request: ops::PutBudget = ops::parse(&body)?;
    let op = ops::put_budget(&weir.admin_context(&actor.id), kind, name, request)?;
    let (edit, _) = change(&weir, &actor.id, op).await?;
    Ok(json_answer(StatusCode::OK, edit.after.unwrap_or(Value::Null)))
}

pub(super) async fn delete_scope(
    State(weir): State<Weir>,
    Extension(caller): Extension<Authenticated>,
    Path((kind, name)): Path<(String, String)>,
) -> Answer {
    let actor = admin_key(&caller)?;
    let kind = scope_kind(&kind)?;
    let op = ops::delete_budget(&weir.admin_context(&actor.id), kind, name)?;
    let (edit, _) = change(&weir, &actor.id, op).await?;
    Ok(json_answer(StatusCode::OK, json!({"deleted": edit.id, "kind": edit.kind.as_str()})))
}

/// Every budget (the file's and the plane's) as it stands now.
pub(super) async fn budgets(State(weir): State<Weir>, Extension(caller): Extension<Authenticated>) -> Answer {
    admin_key(&caller)?;
    let data: Vec<Value> = weir.budgets().current_status().await.iter().map(|status| status.to_json()).collect();
    Ok(json_answer(StatusCode::OK, json!({"object": "list", "data": data})))
}

/// The audit rows, oldest first, each with its chain hash.
pub(super) async fn changes(
    State(weir): State<Weir>,
    Extension(caller): Extension<Authenticated>,
    RawQuery(query): RawQuery,
) -> Answer {
    admin_key(&caller)?;
    let pairs = query_pairs(query.as_deref());
    let limit = limit(&pairs)?;
    let after = match pairs.get("after") {
        None => 0,
        Some(text) => text.parse::<i64>().map_err(|_| AdminError::Invalid {
            field: "after",
            message: "must be a change's `seq` (a whole number)".to_owned(),
        })?,
    };
    let target = match (pairs.get("kind"), pairs.get("target")) {
        (Some(kind), Some(target)) => {
            let kind = Kind::parse(kind).ok_or_else(|| AdminError::Invalid {
                field: "kind",
                message: "must be `key`, `member` or `team`".to_owned(),
            })?;
            Some((kind, target.clone()))
        }
        (None, None) => None,
        _ => {
            return Err(
                AdminError::Invalid { field: "kind", message: "`kind` and `target` go together".to_owned() }.into()
            );
        }
    };
    let store = store(&weir)?;
    let wanted = i64::try_from(limit).unwrap_or(i64::MAX);
    let rows = tokio::task::spawn_blocking(move || store.changes(after, wanted, target))
        .await
        .map_err(|error| AdminError::Store(error.to_string()))?
        .map_err(AdminError::store)?;
    let data: Vec<Value> = rows
        .iter()
        .map(|row| {
            let parsed = |text: &Option<String>| {
                text.as_deref().and_then(|text| serde_json::from_str::<Value>(text).ok()).unwrap_or(Value::Null)
            };
            json!({
                "seq": row.seq,
                "at": admin::model::rfc3339_ms(row.at_ms),
                "actor": row.actor,
                "action": row.action,
                "kind": row.kind,
                "target": row.target,
                "before": parsed(&row.before),
                "after": parsed(&row.after),
                "hash": row.hash,
            })
        })
        .collect();
    let next = rows.last().map(|row| row.seq).filter(|_| rows.len() == limit);
    Ok(json_answer(StatusCode::OK, json!({"object": "list", "data": data, "next_after": next})))
}

/// Every gateway sharing an admin store applies its changes: the gateway
/// that makes a change applies it at once and, under `[fleet]`, announces it
/// through Redis ([`crate::fleet::AdminNotices`]); every other gateway
/// reloads the state when it hears the notice, and in any case reads the
/// store's newest change number every [`admin::POLL_EVERY`] and reloads when it
/// moved. So a change made on one gateway holds on every other within a
/// notice's trip and one load, or, when Redis is out (or there is no
/// `[fleet]`), within `POLL_EVERY` and one load.
///
/// Polls the store every `every` (and at once on a fleet's notice) and
/// applies a newer state. Runs until the returned task is aborted; a store
/// that cannot be read is logged once and asked again at the next poll (the
/// state in force stays).
pub fn watch(weir: Weir, every: Duration) -> tokio::task::JoinHandle<()> {
    let notice = Arc::new(Notify::new());
    if let Some(notices) = weir.admin_notices().cloned() {
        let heard = Arc::clone(&notice);
        // Detached: it listens for the life of the server.
        drop(tokio::spawn(async move { notices.listen(|_seq| heard.notify_one()).await }));
    }
    tokio::spawn(async move {
        let mut failing = false;
        loop {
            let via = tokio::select! {
                () = tokio::time::sleep(every) => "poll",
                () = notice.notified() => "redis",
            };
            let polled = weir.clone();
            match tokio::task::spawn_blocking(move || polled.refresh_admin()).await {
                Ok(Ok(applied)) => {
                    failing = false;
                    if applied {
                        let version = weir.admin_state().version;
                        tracing::info!(version, via, "admin plane changes applied");
                    }
                }
                Ok(Err(reason)) if !failing => {
                    failing = true;
                    tracing::error!(%reason, "the admin plane's changes cannot be read; the state in force stays");
                }
                Ok(Err(_)) => {}
                Err(error) => tracing::error!(%error, "the admin plane's poll failed"),
            }
        }
    })
}
