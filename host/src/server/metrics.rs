//! `GET /metrics`: the Prometheus exposition ([`crate::metrics`]), on the
//! gateway for `admin` keys, and alone on `[metrics] listen` for a scraper
//! that holds no key.

use axum::Router;
use axum::extract::{Extension, State};
use axum::http::StatusCode;
use axum::http::header::CONTENT_TYPE;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use tokio::net::TcpListener;

use super::{ApiError, Authenticated};
use crate::Weir;

/// The gateway's route: the operator's view, so `admin` keys only (open, like
/// every route, when the gateway has no keys and so listens on loopback).
pub(super) async fn for_admin(
    State(weir): State<Weir>,
    Extension(caller): Extension<Authenticated>,
) -> Result<Response, ApiError> {
    caller.require_admin()?;
    Ok(exposition(&weir).await)
}

async fn exposition(weir: &Weir) -> Response {
    match weir.metrics() {
        Some(metrics) => {
            let text = metrics.render(weir.catalog(), weir.admission()).await;
            ([(CONTENT_TYPE, crate::metrics::CONTENT_TYPE)], text).into_response()
        }
        // Not routed then (see `router`), and `listen` is refused without metrics.
        None => StatusCode::NOT_FOUND.into_response(),
    }
}

/// `[metrics] listen`: only `/metrics`, without a key (anything else is 404).
/// Bind it where only the scraper reaches. Its connections get the gateway's
/// `max_connections`, header and idle timeouts (an idle scraper's connection
/// is closed like a client's) and head limit; over loopback it answers only a
/// loopback `Host`. No request body is read: it serves one small answer and
/// no calls.
pub async fn serve_metrics(weir: Weir, listener: TcpListener) -> std::io::Result<()> {
    let settings = weir.config().server.clone();
    let router =
        Router::new().route("/metrics", get(|State(weir): State<Weir>| async move { exposition(&weir).await }));
    super::edge::serve_reads(router.with_state(weir), &settings, listener).await
}
