//! `GET /admin/v1/calls` and `GET /admin/v1/calls/{id}`: the ledger's closed
//! calls for operators (`admin` keys only), from the same reader as
//! `/v1/usage` (the fleet's PostgreSQL ledger under `[ledger] postgres_url`,
//! else this gateway's file).
//!
//! The search takes `member`, `key`, `model`, `category`, `since`, `until`
//! (as `/v1/usage` reads them) and `limit` (1–500, default 50), and answers
//! the newest calls first, each without its attempts or content (`attempts`
//! counts them). One call's answer is its whole record: attempts, category,
//! timings, notes, tokens, cost, and its content when it was recorded.
//!
//! Neither reads more than it answers where an index serves it: a search
//! reads the `(started_ms, call_id)` index backwards and stops at `limit`
//! (under a filter, it also passes over the newer calls the filter leaves
//! out, so a rare member or category reads further back); one call is found
//! near the instant its id names (see `ledger::sql::closed_call`).

use axum::extract::rejection::QueryRejection;
use axum::extract::{Extension, Path, Query, State};
use serde::Deserialize;
use serde_json::{Value, json};

use super::usage::read_ledger;
use super::{ApiError, Authenticated};
use crate::Weir;
use crate::failure::Category;
use crate::ledger::{Filter, parse_time};
use crate::record::CallRecord;

/// How many calls a search answers when it says nothing, and at most.
const DEFAULT_LIMIT: usize = 50;
const MAX_LIMIT: usize = 500;
/// The route a failed read is logged under.
const ROUTE: &str = "/admin/v1/calls";

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct CallsQuery {
    member: Option<String>,
    key: Option<String>,
    model: Option<String>,
    category: Option<String>,
    since: Option<String>,
    until: Option<String>,
    limit: Option<usize>,
}

/// `GET /admin/v1/calls`: `{"calls": [...]}`, newest first.
pub(super) async fn search(
    State(weir): State<Weir>,
    Extension(caller): Extension<Authenticated>,
    query: Result<Query<CallsQuery>, QueryRejection>,
) -> Result<axum::Json<Value>, ApiError> {
    caller.require_admin_key()?;
    let Query(query) = query.map_err(|rejection| ApiError::invalid_request(rejection.body_text()))?;
    let limit = query.limit.unwrap_or(DEFAULT_LIMIT);
    if !(1..=MAX_LIMIT).contains(&limit) {
        return Err(ApiError::invalid_request(format!("`limit` must be a whole number from 1 to {MAX_LIMIT}")));
    }
    let time = |text: Option<String>| text.map(|text| parse_time(&text)).transpose().map_err(ApiError::invalid_request);
    let filter = Filter {
        member: query.member,
        key_id: query.key,
        model: query.model,
        category: query.category,
        since: time(query.since)?,
        until: time(query.until)?,
    };
    let records = read_ledger(&weir, ROUTE, move |reader| reader.newest(&filter, limit)).await?;
    let calls: Vec<Value> = records.iter().map(summary).collect();
    Ok(axum::Json(json!({"calls": calls})))
}

/// `GET /admin/v1/calls/{id}`: the call's whole record (404 when no closed call has the id).
pub(super) async fn detail(
    State(weir): State<Weir>,
    Extension(caller): Extension<Authenticated>,
    Path(id): Path<String>,
) -> Result<axum::Json<Value>, ApiError> {
    caller.require_admin_key()?;
    let wanted = id.clone();
    let found = read_ledger(&weir, ROUTE, move |reader| reader.closed_call(&wanted)).await?;
    let record =
        found.ok_or_else(|| ApiError::new(Category::NotFound, format!("no closed call `{id}` in the ledger")))?;
    Ok(axum::Json(serde_json::to_value(record).unwrap_or_default()))
}

/// A call as the search lists it: the record without its attempts and content.
fn summary(record: &CallRecord) -> Value {
    let mut value = serde_json::to_value(record).unwrap_or_default();
    if let Some(object) = value.as_object_mut() {
        object.remove("content");
        object.insert("attempts".to_owned(), json!(record.attempts.len()));
    }
    value
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use axum::body::Body;
    use axum::http::Request;
    use tower::ServiceExt;

    use crate::identity::hash_of;
    use crate::ledger::tests::record;
    use crate::record::CallObserver;
    use crate::{Config, Weir};

    fn weir(ledger: &str) -> Weir {
        let toml = format!(
            "{ledger}\n[[key]]\nid = \"ops\"\nmember = \"ops\"\nadmin = true\nhash = \"{}\"\n\
             [[key]]\nid = \"dev\"\nmember = \"dev\"\nhash = \"{}\"\n",
            hash_of("weir-test-admin-token"),
            hash_of("weir-test-plain-token")
        );
        let config = Config::from_toml(&toml, "calls test").expect("config");
        Weir::builder().config(config).providers_dir("/nonexistent-weir-calls-test").cache_dir(None).build().unwrap()
    }

    async fn get(weir: &Weir, uri: &str, token: &str) -> (u16, serde_json::Value) {
        let request = Request::get(uri).header("authorization", format!("Bearer {token}")).body(Body::empty()).unwrap();
        let response = crate::server::router(weir.clone()).oneshot(request).await.unwrap();
        let status = response.status().as_u16();
        let body = axum::body::to_bytes(response.into_body(), 1 << 20).await.unwrap();
        (status, serde_json::from_slice(&body).unwrap())
    }

    #[tokio::test]
    async fn admins_search_the_calls_and_open_one() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ledger.db");
        let weir = weir(&format!("[ledger]\npath = {:?}\n", path.to_str().unwrap()));
        let ledger = weir.ledger().unwrap();
        for (call, member, cost) in [("a", "alice", Some(0.5)), ("b", "alice", None), ("c", "bob", Some(1.0))] {
            ledger.closed(&record(call, member, "m", 1, cost)).await.unwrap();
        }
        let admin = "weir-test-admin-token";
        let (status, body) = get(&weir, "/admin/v1/calls?member=alice", admin).await;
        assert_eq!(status, 200, "{body}");
        let calls = body["calls"].as_array().unwrap();
        let ids: Vec<&str> = calls.iter().map(|call| call["call_id"].as_str().unwrap()).collect();
        assert_eq!(ids.len(), 2, "{body}");
        assert!(ids.contains(&"a") && ids.contains(&"b"), "{body}");
        assert!(calls[0]["attempts"].is_u64(), "the list counts attempts: {body}");
        let (_, one) = get(&weir, "/admin/v1/calls?limit=1", admin).await;
        assert_eq!(one["calls"].as_array().unwrap().len(), 1);

        let (status, body) = get(&weir, "/admin/v1/calls/c", admin).await;
        assert_eq!(status, 200, "{body}");
        assert_eq!((body["call_id"].as_str(), body["member"].as_str()), (Some("c"), Some("bob")));
        assert_eq!(body["cost_usd"], 1.0);
        assert!(body["attempts"].is_array(), "{body}");

        let (status, body) = get(&weir, "/admin/v1/calls/nope", admin).await;
        assert_eq!((status, body["error"]["type"].as_str()), (404, Some("not_found")), "{body}");
        let (status, _) = get(&weir, "/admin/v1/calls?limit=0", admin).await;
        assert_eq!(status, 400);
        let (status, _) = get(&weir, "/admin/v1/calls?since=yesterday", admin).await;
        assert_eq!(status, 400);
        let (status, _) = get(&weir, "/admin/v1/calls?bogus=1", admin).await;
        assert_eq!(status, 400);
        let (status, _) = get(&weir, "/admin/v1/calls", "weir-test-plain-token").await;
        assert_eq!(status, 403);
        let (status, _) = get(&weir, "/admin/v1/calls/c", "weir-test-plain-token").await;
        assert_eq!(status, 403);

        let without = super::tests::weir("[ledger]\nenabled = false\n");
        let (status, body) = get(&without, "/admin/v1/calls", admin).await;
        assert_eq!((status, body["error"]["type"].as_str()), (503, Some("ledger_unavailable")), "{body}");
        let (status, _) = get(&without, "/admin/v1/calls/c", admin).await;
        assert_eq!(status, 503);
    }
}
