//! The stored responses' routes (see [`crate::stored`]): `GET` and `DELETE
//! /v1/responses/{id}`, `GET /v1/responses/{id}/input_items`. A response
//! another caller made reads as absent: the same 404 as an id never made.

use axum::extract::{Extension, Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Value, json};

use super::ApiError;
use super::auth::Authenticated;
use crate::Weir;
use crate::caller::Caller;
use crate::failure::Category;
use crate::stored::{Owner, ResponseStore, StoreError, StoredResponse};

/// `input_items`' page size when the caller names none, and the most it may name.
const DEFAULT_PAGE: usize = 20;
const MAX_PAGE: usize = 100;

/// `GET /v1/responses/{id}`: the response as it was answered.
pub(super) async fn retrieve(
    State(weir): State<Weir>,
    Extension(caller): Extension<Authenticated>,
    Path(id): Path<String>,
    Query(query): Query<RetrieveQuery>,
) -> Result<axum::Json<Value>, ApiError> {
    if query.stream.as_deref() == Some("true") {
        return Err(ApiError::invalid_request("`stream=true` is not supported on a stored response: read it whole"));
    }
    let (store, owner) = store_and_owner(&weir, &caller)?;
    let stored = find(store, &owner, &id).await?;
    Ok(axum::Json(stored.response))
}

/// `GET /v1/responses/{id}?stream=…` (only `false` or absent is served).
#[derive(Debug, Deserialize)]
pub(super) struct RetrieveQuery {
    stream: Option<String>,
}

/// `DELETE /v1/responses/{id}`.
pub(super) async fn delete(
    State(weir): State<Weir>,
    Extension(caller): Extension<Authenticated>,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let (store, owner) = store_and_owner(&weir, &caller)?;
    if !store.delete(&owner, &id).await.map_err(unavailable)? {
        return Err(not_found(&id));
    }
    let body = json!({"id": id, "object": "response.deleted", "deleted": true});
    Ok((StatusCode::OK, axum::Json(body)).into_response())
}

/// `GET /v1/responses/{id}/input_items`'s paging.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct PageQuery {
    after: Option<String>,
    before: Option<String>,
    limit: Option<usize>,
    order: Option<String>,
    /// What to add to each item; the stored items are returned as kept.
    #[serde(rename = "include[]", alias = "include")]
    _include: Option<String>,
}

/// `GET /v1/responses/{id}/input_items`: the request's own input items, a
/// page at a time (`order` `desc` by default, as OpenAI's).
pub(super) async fn input_items(
    State(weir): State<Weir>,
    Extension(caller): Extension<Authenticated>,
    Path(id): Path<String>,
    Query(query): Query<PageQuery>,
) -> Result<axum::Json<Value>, ApiError> {
    let (store, owner) = store_and_owner(&weir, &caller)?;
    let stored = find(store, &owner, &id).await?;
    Ok(axum::Json(page(stored.input_items, &query)?))
}

/// One page of `items` as OpenAI lists them.
fn page(mut items: Vec<Value>, query: &PageQuery) -> Result<Value, ApiError> {
    let limit = query.limit.unwrap_or(DEFAULT_PAGE);
    if !(1..=MAX_PAGE).contains(&limit) {
        return Err(ApiError::invalid_request(format!("`limit` must be between 1 and {MAX_PAGE}")));
    }
    match query.order.as_deref() {
        None | Some("desc") => items.reverse(),
        Some("asc") => {}
        Some(other) => return Err(ApiError::invalid_request(format!("`order` must be asc or desc, not `{other}`"))),
    }
    let position = |id: &str| items.iter().position(|item| item.get("id").and_then(Value::as_str) == Some(id));
    let start = match &query.after {
        Some(after) => position(after).map(|at| at + 1).ok_or_else(|| unknown_cursor("after", after))?,
        None => 0,
    };
    let end = match &query.before {
        Some(before) => position(before).ok_or_else(|| unknown_cursor("before", before))?,
        None => items.len(),
    };
    let window: Vec<Value> = items.get(start..end.max(start)).unwrap_or_default().iter().take(limit).cloned().collect();
    let has_more = start + window.len() < end;
    let id_of = |item: Option<&Value>| item.and_then(|item| item.get("id")).cloned().unwrap_or(Value::Null);
    Ok(json!({
        "object": "list",
        "data": window,
        "first_id": id_of(window.first()),
        "last_id": id_of(window.last()),
        "has_more": has_more,
    }))
}

fn unknown_cursor(name: &str, id: &str) -> ApiError {
    ApiError::invalid_request(format!("`{name}` names no input item of this response: `{id}`"))
}

/// The store and the caller as its owner; without a store nothing was kept,
/// so every id is absent.
fn store_and_owner<'a>(weir: &'a Weir, caller: &Authenticated) -> Result<(&'a ResponseStore, Owner), ApiError> {
    let caller = caller.caller()?;
    let store = weir.stored_responses().ok_or_else(|| {
        ApiError::new(
            Category::NotFound,
            "no response is stored: this gateway keeps none (it has no ledger, or `[responses] retention_secs = 0`)"
                .to_owned(),
        )
    })?;
    Ok((store, store.owner(caller.as_ref())))
}

/// The stored response `id` of `owner`, or the 404 every other case answers.
pub(super) async fn find(store: &ResponseStore, owner: &Owner, id: &str) -> Result<StoredResponse, ApiError> {
    store.get(owner, id).await.map_err(unavailable)?.ok_or_else(|| not_found(id))
}

fn not_found(id: &str) -> ApiError {
    ApiError::new(Category::NotFound, format!("no response `{id}` is stored for this caller"))
}

/// A store failure: the details to the log, a safe message to the caller.
pub(super) fn unavailable(error: StoreError) -> ApiError {
    tracing::error!(%error, "the stored responses cannot be read or written");
    ApiError::new(Category::LedgerUnavailable, "the stored responses cannot be read or written".to_owned())
}

/// The items a request naming `previous_response_id` continues from: what
/// that response's request and answer held (see [`StoredResponse::context`]).
pub(super) async fn previous_context(weir: &Weir, caller: Option<&Caller>, id: &str) -> Result<Vec<Value>, ApiError> {
    let store = weir.stored_responses().ok_or_else(|| not_found(id))?;
    Ok(find(store, &store.owner(caller), id).await?.context)
}

/// Keeps an answered response for `caller`: `input` is the request's own
/// input (a string or items), `before` the context it continued from.
/// Whether it was kept: a failure is logged, never the caller's.
pub(super) async fn keep(weir: &Weir, caller: Option<&Caller>, kept: Kept) -> bool {
    let Some(store) = weir.stored_responses() else { return false };
    let Some(stored) = kept.into_stored() else {
        tracing::error!("an answered response has no id or model; it is not stored");
        return false;
    };
    match store.put(caller, stored).await {
        Ok(()) => true,
        Err(error) => {
            tracing::error!(%error, "a response could not be stored");
            false
        }
    }
}

/// What [`keep`] stores of one response.
#[derive(Debug, Clone)]
pub(super) struct Kept {
    /// The response object as answered.
    pub response: Value,
    /// The request's `input`: a string or a list of items.
    pub input: Value,
    /// The context the request continued from (`previous_response_id`), else empty.
    pub before: Vec<Value>,
}

impl Kept {
    fn into_stored(self) -> Option<StoredResponse> {
        let id = self.response.get("id")?.as_str()?.to_owned();
        let model = self.response.get("model")?.as_str()?.to_owned();
        let created_at = self.response.get("created_at").and_then(Value::as_i64).unwrap_or_default();
        let input = super::responses::input_items(self.input);
        let output = self.response.get("output").and_then(Value::as_array).cloned().unwrap_or_default();
        let mut context = self.before;
        context.extend(input.iter().cloned());
        context.extend(output);
        let listed = input.into_iter().enumerate().map(|(index, item)| with_id(item, &id, index)).collect();
        Some(StoredResponse { id, model, created_at, response: self.response, input_items: listed, context })
    }
}

/// An input item as `input_items` lists it: with the `id` it came with, else
/// one made from the response's id and its place.
fn with_id(mut item: Value, response_id: &str, index: usize) -> Value {
    if let Value::Object(fields) = &mut item
        && !fields.get("id").is_some_and(Value::is_string)
    {
        let stem = response_id.strip_prefix("resp_").unwrap_or(response_id);
        fields.insert("id".to_owned(), Value::String(format!("item_{stem}_{index}")));
    }
    item
}

#[cfg(test)]
mod tests {
    use super::*;

    fn items(n: usize) -> Vec<Value> {
        (1..=n).map(|i| json!({"id": format!("item_{i}")})).collect()
    }

    fn query(after: Option<&str>, limit: Option<usize>, order: Option<&str>) -> PageQuery {
        PageQuery {
            after: after.map(str::to_owned),
            before: None,
            limit,
            order: order.map(str::to_owned),
            _include: None,
        }
    }

    fn ids(page: &Value) -> Vec<&str> {
        page["data"].as_array().unwrap().iter().map(|item| item["id"].as_str().unwrap()).collect()
    }

    #[test]
    fn pages_run_newest_first_by_default_and_follow_their_cursor() {
        let first = page(items(5), &query(None, Some(2), None)).unwrap();
        assert_eq!(ids(&first), ["item_5", "item_4"]);
        assert_eq!((first["first_id"].as_str(), first["last_id"].as_str()), (Some("item_5"), Some("item_4")));
        assert_eq!(first["has_more"], true);
        let next = page(items(5), &query(Some("item_4"), Some(2), None)).unwrap();
        assert_eq!(ids(&next), ["item_3", "item_2"]);
        let last = page(items(5), &query(Some("item_2"), Some(2), None)).unwrap();
        assert_eq!(ids(&last), ["item_1"]);
        assert_eq!(last["has_more"], false);
        let ascending = page(items(3), &query(None, None, Some("asc"))).unwrap();
        assert_eq!(ids(&ascending), ["item_1", "item_2", "item_3"]);
        let before = PageQuery { before: Some("item_3".to_owned()), ..query(None, None, Some("asc")) };
        assert_eq!(ids(&page(items(3), &before).unwrap()), ["item_1", "item_2"]);
    }

    #[test]
    fn a_kept_response_lists_its_own_input_and_continues_from_everything_before() {
        let before = vec![json!({"type": "message", "role": "user", "content": "earlier"})];
        let response = json!({"id": "resp_abc", "model": "chat", "created_at": 7,
                              "output": [{"type": "message", "role": "assistant", "id": "msg_out"}]});
        let kept = Kept { response: response.clone(), input: json!("now"), before: before.clone() };
        let stored = kept.into_stored().unwrap();
        assert_eq!((stored.id.as_str(), stored.model.as_str(), stored.created_at), ("resp_abc", "chat", 7));
        assert_eq!(stored.input_items.len(), 1);
        assert_eq!(stored.input_items[0]["id"], "item_abc_0");
        assert_eq!(stored.input_items[0]["content"][0]["text"], "now");
        let roles: Vec<&str> = stored.context.iter().map(|item| item["role"].as_str().unwrap()).collect();
        assert_eq!(roles, ["user", "user", "assistant"]);
        assert!(stored.context[1].get("id").is_none(), "the context keeps items as they were sent");

        let items = json!([{"type": "function_call_output", "call_id": "c1", "output": "x", "id": "fco_1"}]);
        let stored = Kept { response, input: items, before: Vec::new() }.into_stored().unwrap();
        assert_eq!(stored.input_items[0]["id"], "fco_1", "an item's own id is kept");
        assert!(
            Kept { response: json!({"model": "m"}), input: json!("x"), before: Vec::new() }.into_stored().is_none()
        );
    }

    #[test]
    fn a_bad_limit_order_or_cursor_is_the_callers_error() {
        for bad in [
            query(None, Some(0), None),
            query(None, Some(101), None),
            query(None, None, Some("up")),
            query(Some("nope"), None, None),
        ] {
            let error = page(items(2), &bad).unwrap_err();
            assert_eq!(error.category, Category::InvalidRequest);
        }
    }
}
