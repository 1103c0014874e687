//! A listener that serves reads only (`[metrics] listen`): the gateway's
//! connection handling (header and idle timeouts, `max_connections`, the head
//! limit), and over loopback only a loopback `Host`, as on a keyless gateway:
//! it holds no key either. No request body is read.

use axum::Router;
use axum::body::Body;
use axum::http::header::CONNECTION;
use axum::http::{HeaderValue, Request};
use axum::response::Response;
use http_body::Body as _;
use hyper::body::Incoming;
use tower::ServiceExt;

use super::checks::check_head;
use super::connection::{Handler, ResponseEnd};
use super::holding::Holding;
use crate::catalog::ServerSettings;
use crate::server::error::Dialect;

pub(super) struct Reads {
    pub router: Router,
    pub settings: ServerSettings,
}

impl Reads {
    async fn answer(&self, request: Request<Incoming>, end: ResponseEnd, on_loopback: bool) -> Response {
        let (head, body) = request.into_parts();
        let has_body = !body.is_end_stream();
        drop(body);
        let mut response = match check_head(&head, &self.settings, on_loopback) {
            Ok(()) => match self.router.clone().oneshot(Request::from_parts(head, Body::empty())).await {
                Ok(response) => response,
                Err(never) => match never {},
            },
            Err(refused) => Dialect::OpenAi.answer(refused),
        };
        if has_body {
            // Its bytes are never read: the connection ends with this answer.
            response.headers_mut().insert(CONNECTION, HeaderValue::from_static("close"));
        }
        response.map(|body| Body::new(Holding::new(body, end)))
    }
}

impl Handler for Reads {
    fn handle(
        &self,
        request: Request<Incoming>,
        end: ResponseEnd,
        on_loopback: bool,
    ) -> impl Future<Output = Response> + Send {
        self.answer(request, end, on_loopback)
    }
}
