//! `GET /v1/usage`: the ledger's sums for operators (`admin` keys only): the
//! fleet's PostgreSQL ledger when `[ledger] postgres_url` names one (every
//! gateway's calls), else this gateway's own file.
//!
//! Query: `member`, `key`, `model`, `category`, `since`, `until` (RFC 3339 or a
//! duration back from now, on the call's start), `group_by` (`member`,
//! `model`, `key`, `team`, `provider` or `deployment`) and `bucket` (`hour`
//! or `day`, UTC: adds `"series"`, one point per bucket holding calls, each
//! with its total and groups). Answers `{"groups": [...], "total": {...}}`,
//! each with calls, tokens by kind, the known cost and how many calls had
//! none, the failed calls by category (`errors`) and the latency's p50 and
//! p99 (`latency_ms`, read from a histogram: at most 19 % above); and,
//! when budgets are configured, `"budgets"`: each budget as it stands now
//! (scope, name, period, kind, limit, spent, held, remaining, resets_at),
//! whatever the query's filter.

use axum::extract::rejection::QueryRejection;
use axum::extract::{Extension, Query, State};
use serde::Deserialize;
use serde_json::Value;

use super::{ApiError, Authenticated};
use crate::Weir;
use crate::budget::BudgetStatus;
use crate::failure::Category;
use crate::ledger::{Bucket, Filter, GroupBy, LedgerRead, ReadError, UsageQuery, parse_time};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct UsageParams {
    member: Option<String>,
    key: Option<String>,
    model: Option<String>,
    category: Option<String>,
    since: Option<String>,
    until: Option<String>,
    group_by: Option<String>,
    bucket: Option<String>,
}

pub(super) async fn usage(
    State(weir): State<Weir>,
    Extension(caller): Extension<Authenticated>,
    query: Result<Query<UsageParams>, QueryRejection>,
) -> Result<axum::Json<Value>, ApiError> {
    caller.require_admin()?;
    let Query(query) = query.map_err(|rejection| ApiError::invalid_request(rejection.body_text()))?;
    let time = |text: Option<String>| text.map(|text| parse_time(&text)).transpose().map_err(ApiError::invalid_request);
    let filter = Filter {
        member: query.member,
        key_id: query.key,
        model: query.model,
        category: query.category,
        since: time(query.since)?,
        until: time(query.until)?,
    };
    let group_by: Option<GroupBy> =
        query.group_by.map(|text| text.parse()).transpose().map_err(ApiError::invalid_request)?;
    let bucket: Option<Bucket> =
        query.bucket.map(|text| text.parse()).transpose().map_err(ApiError::invalid_request)?;
    let query = UsageQuery { filter, group_by, bucket };
    let sums = read_ledger(&weir, "/v1/usage", move |reader| reader.usage(&query)).await?;
    let mut body = serde_json::to_value(sums).unwrap_or_default();
    if !weir.budgets().is_empty() {
        body["budgets"] = weir.budgets().current_status().await.iter().map(BudgetStatus::to_json).collect();
    }
    Ok(axum::Json(body))
}

/// Reads the ledger the operator routes answer from (the fleet's PostgreSQL
/// ledger under `[ledger] postgres_url`, else this gateway's file) on a
/// blocking thread: 503 when none is kept or it cannot be read (the reason
/// logged for `route`).
pub(super) async fn read_ledger<T: Send + 'static>(
    weir: &Weir,
    route: &'static str,
    read: impl FnOnce(&dyn LedgerRead) -> Result<T, ReadError> + Send + 'static,
) -> Result<T, ApiError> {
    let Some(ledger) = weir.ledger().cloned() else {
        return Err(unavailable("this gateway keeps no ledger"));
    };
    match tokio::task::spawn_blocking(move || read(ledger.shared_or_local()?.as_ref())).await {
        Ok(Ok(answer)) => Ok(answer),
        Ok(Err(error)) => {
            tracing::error!(%error, "cannot read the ledger for {route}");
            Err(unavailable("the call ledger cannot be read"))
        }
        Err(error) => {
            tracing::error!(%error, "the ledger read task failed");
            Err(unavailable("the call ledger cannot be read"))
        }
    }
}

/// No ledger to answer from: none is kept, or it cannot be read (503).
fn unavailable(message: &str) -> ApiError {
    ApiError::new(Category::LedgerUnavailable, message.to_owned())
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
        let config = Config::from_toml(&toml, "usage test").expect("config");
        Weir::builder()
            .config(config)
            .providers_dir("/nonexistent-weir-usage-test")
            .cache_dir(None)
            .build()
            .expect("weir")
    }

    async fn get(weir: &Weir, uri: &str, token: &str) -> (u16, serde_json::Value) {
        let request = Request::get(uri).header("authorization", format!("Bearer {token}")).body(Body::empty()).unwrap();
        let response = crate::server::router(weir.clone()).oneshot(request).await.unwrap();
        let status = response.status().as_u16();
        let body = axum::body::to_bytes(response.into_body(), 1 << 20).await.unwrap();
        (status, serde_json::from_slice(&body).unwrap())
    }

    async fn body_has_no_budgets(weir: &Weir) -> bool {
        get(weir, "/v1/usage", "weir-test-admin-token").await.1.get("budgets").is_none()
    }

    #[tokio::test]
    async fn admins_read_each_budget_as_it_stands() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ledger.db");
        let weir = weir(&format!(
            "[ledger]\npath = {:?}\n[member.dev]\ndaily_tokens = 1000\n[team.red]\nmonthly_tokens = 50\n",
            path.to_str().unwrap()
        ));
        // The ledger file exists once a record is in.
        weir.ledger().unwrap().closed(&record("a", "alice", "m", 1, None)).await.unwrap();
        let scopes = weir.budgets().applicable(Some("dev"), "dev", None);
        let _hold = weir.budgets().hold(&scopes, crate::budget::Spend { tokens: 300, usd: None }, "m").unwrap();
        let (status, body) = get(&weir, "/v1/usage", "weir-test-admin-token").await;
        assert_eq!(status, 200, "{body}");
        let budgets = body["budgets"].as_array().unwrap();
        assert_eq!(budgets.len(), 2, "{body}");
        let dev = &budgets[0];
        assert_eq!((dev["scope"].as_str(), dev["name"].as_str()), (Some("member"), Some("dev")));
        assert_eq!((dev["period"].as_str(), dev["kind"].as_str()), (Some("day"), Some("tokens")));
        assert_eq!((dev["limit"].as_u64(), dev["spent"].as_u64()), (Some(1000), Some(0)));
        assert_eq!((dev["held"].as_u64(), dev["remaining"].as_u64()), (Some(300), Some(700)));
        assert!(dev["resets_at"].as_str().unwrap().ends_with('Z'), "{dev}");
        assert_eq!((budgets[1]["scope"].as_str(), budgets[1]["period"].as_str()), (Some("team"), Some("month")));
    }

    /// One request answers a series by hour, grouped by team, with each
    /// total's latency percentiles and errors by category.
    #[tokio::test]
    async fn admins_read_a_series_with_latency_and_errors() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ledger.db");
        let weir = weir(&format!("[ledger]\npath = {:?}\n", path.to_str().unwrap()));
        let ledger = weir.ledger().expect("the config keeps a ledger");
        let failed = crate::record::CallRecord {
            category: "timeout".to_owned(),
            ..(*record("c", "bob", "m", 3700, None)).clone()
        };
        for call in
            [record("a", "alice", "m", 10, Some(0.5)), record("b", "alice", "m", 20, None), std::sync::Arc::new(failed)]
        {
            ledger.closed(&call).await.unwrap();
        }
        let (status, body) =
            get(&weir, "/v1/usage?group_by=team&bucket=hour&since=2027-01-15T07:00:00Z", "weir-test-admin-token").await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["groups"][0]["team"], "t", "{body}");
        assert_eq!(body["total"]["errors"], serde_json::json!({"timeout": 1}), "{body}");
        // 1,234 ms each: the bucket up to 2^10.5 ms.
        assert_eq!(body["total"]["latency_ms"], serde_json::json!({"p50": 1448.2, "p99": 1448.2}), "{body}");
        let series = body["series"].as_array().unwrap();
        let points: Vec<_> = series
            .iter()
            .map(|point| (point["start"].as_str().unwrap(), point["total"]["calls"].as_u64().unwrap()))
            .collect();
        assert_eq!(points, [("2027-01-15T08:00:00Z", 2), ("2027-01-15T09:00:00Z", 1)], "{body}");
        assert_eq!(series[1]["groups"][0]["errors"]["timeout"], 1, "{body}");
        let (_, daily) = get(&weir, "/v1/usage?bucket=day&group_by=provider", "weir-test-admin-token").await;
        assert_eq!(daily["series"][0]["start"], "2027-01-15T00:00:00Z", "{daily}");
        assert_eq!(daily["groups"][0]["provider"], "openai", "{daily}");
        assert_eq!(daily["groups"][0]["calls"], 3, "{daily}");
    }

    #[tokio::test]
    async fn admins_read_the_sums() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ledger.db");
        let weir = weir(&format!("[ledger]\npath = {:?}\n", path.to_str().unwrap()));
        let ledger = weir.ledger().expect("the config keeps a ledger");
        for (call, member, cost) in [("a", "alice", Some(0.5)), ("b", "alice", None), ("c", "bob", Some(1.0))] {
            ledger.closed(&record(call, member, "m", 1, cost)).await.unwrap();
        }
        let admin = "weir-test-admin-token";
        let (status, body) = get(&weir, "/v1/usage?group_by=member", admin).await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["groups"][0]["member"], "alice");
        assert_eq!(body["groups"][0]["calls"], 2);
        assert_eq!(body["groups"][0]["calls_without_cost"], 1);
        assert_eq!(body["total"]["calls"], 3);
        assert_eq!(body["total"]["cost_usd"], 1.5);
        let (_, bob) = get(&weir, "/v1/usage?member=bob&key=bob-key&model=m&since=2020-01-01T00:00:00Z", admin).await;
        assert_eq!(bob["total"]["calls"], 1);
        assert_eq!(bob["groups"], serde_json::json!([]));

        let (status, body) = get(&weir, "/v1/usage", "weir-test-plain-token").await;
        assert_eq!(status, 403, "{body}");
        let (status, body) = get(&weir, "/v1/usage?group_by=weekday", admin).await;
        assert_eq!((status, body["error"]["code"].as_str()), (400, Some("invalid_request")), "{body}");
        assert!(body["error"]["message"].as_str().unwrap().contains("team, provider"), "{body}");
        let (status, body) = get(&weir, "/v1/usage?bucket=week", admin).await;
        assert_eq!((status, body["error"]["code"].as_str()), (400, Some("invalid_request")), "{body}");
        assert!(body["error"]["message"].as_str().unwrap().contains("hour or day"), "{body}");
        let (status, body) = get(&weir, "/v1/usage?since=yesterday", admin).await;
        assert_eq!(status, 400, "{body}");
        let (status, body) = get(&weir, "/v1/usage?bogus=1", admin).await;
        assert_eq!(status, 400, "{body}");

        assert!(body_has_no_budgets(&weir).await);

        let without = super::tests::weir("[ledger]\nenabled = false\n");
        assert!(without.ledger().is_none());
        let (status, body) = get(&without, "/v1/usage", admin).await;
        assert_eq!(status, 503, "{body}");
        assert_eq!(body["error"]["type"], "ledger_unavailable");
        assert_eq!(body["error"]["message"], "this gateway keeps no ledger");
    }
}
