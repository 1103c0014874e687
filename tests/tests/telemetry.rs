//! The real `weir` binary exporting spans: a call through the gateway, with or
//! without the caller's `traceparent`, reaches an OTLP/HTTP receiver on
//! loopback (an axum server decoding the protobuf `ExportTraceServiceRequest`
//! with prost) in the caller's trace; a collector that refuses changes nothing
//! for the caller.

// Test code: a failed step should stop the test with its message.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::post;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value;
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message;
use serde_json::{Value as Json, json};
use weir_tests::{FakeUpstream, Gateway, openai_wire};

const SECRET: &str = "sk-weir-test-secret-0123456789";
const TRACE_ID: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const PARENT_ID: &str = "00f067aa0ba902b7";

/// An OTLP/HTTP traces receiver answering every request with `status`.
struct Collector {
    endpoint: String,
    spans: Arc<Mutex<Vec<Span>>>,
    _server: tokio::task::JoinHandle<()>,
}

impl Collector {
    async fn start(status: StatusCode) -> Collector {
        async fn traces(State((spans, status)): State<(Arc<Mutex<Vec<Span>>>, StatusCode)>, body: Bytes) -> StatusCode {
            let request = ExportTraceServiceRequest::decode(body).expect("an ExportTraceServiceRequest");
            let mut spans = spans.lock().unwrap();
            for resource in request.resource_spans {
                for scope in resource.scope_spans {
                    spans.extend(scope.spans);
                }
            }
            status
        }
        let spans = Arc::new(Mutex::new(Vec::new()));
        let app = Router::new().route("/v1/traces", post(traces)).with_state((Arc::clone(&spans), status));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let endpoint = format!("http://{}/v1/traces", listener.local_addr().unwrap());
        let server = tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        Collector { endpoint, spans, _server: server }
    }

    /// The call span of the first call named `name`, once it arrived (the
    /// exporter sends within about a second).
    async fn call_span(&self, name: &str) -> (Span, Vec<Span>) {
        let waited = Instant::now();
        loop {
            {
                let spans = self.spans.lock().unwrap();
                if let Some(call) = spans.iter().find(|span| span.name == name) {
                    let attempts = spans.iter().filter(|span| span.parent_span_id == call.span_id).cloned().collect();
                    return (call.clone(), attempts);
                }
            }
            assert!(waited.elapsed() < Duration::from_secs(10), "no span {name:?} after 10 s");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

fn config(upstream: &FakeUpstream, collector: &str) -> String {
    format!(
        r#"
[[model]]
id = "chat"
provider = "openai"
wire_id = "gpt-4.1"
endpoint = "{url}"
credential = "weir-test-key"
max_output_tokens = 1000
context_window = 10000
max_retries = 0

[telemetry]
otlp_endpoint = "{collector}"
service_name = "gateway-under-test"
"#,
        url = upstream.base_url()
    )
}

async fn send(gateway: &Gateway, path: &str, traceparent: Option<&str>, body: &Json) -> u16 {
    let mut request = reqwest::Client::new().post(gateway.url(path)).json(body);
    if let Some(traceparent) = traceparent {
        request = request.header("traceparent", traceparent);
    }
    request.send().await.unwrap().status().as_u16()
}

fn hello() -> Json {
    json!({"model": "chat", "max_tokens": 50, "messages": [{"role": "user", "content": "Hello"}]})
}

fn text(span: &Span, key: &str) -> Option<String> {
    span.attributes.iter().find(|kv| kv.key == key).and_then(|kv| match kv.value.as_ref()?.value.as_ref()? {
        Value::StringValue(value) => Some(value.clone()),
        _ => None,
    })
}

#[tokio::test]
async fn a_call_with_a_traceparent_reaches_the_collector_in_that_trace() {
    let collector = Collector::start(StatusCode::OK).await;
    let upstream = FakeUpstream::start().await;
    let gateway =
        Gateway::start_with(&config(&upstream, &collector.endpoint), &[("WEIR_TEST_KEY", SECRET)], None).await;
    upstream.push(openai_wire::completion("Hi there"));

    let traceparent = format!("00-{TRACE_ID}-{PARENT_ID}-01");
    assert_eq!(send(&gateway, "/v1/chat/completions", Some(&traceparent), &hello()).await, 200);

    let (call, attempts) = collector.call_span("chat chat").await;
    assert_eq!(hex::encode(&call.trace_id), TRACE_ID);
    assert_eq!(hex::encode(&call.parent_span_id), PARENT_ID);
    assert_eq!(text(&call, "gen_ai.operation.name").as_deref(), Some("chat"));
    assert_eq!(text(&call, "gen_ai.provider.name").as_deref(), Some("openai"));
    assert_eq!(text(&call, "gen_ai.request.model").as_deref(), Some("chat"));
    assert_eq!(text(&call, "weir.route").as_deref(), Some("openai_chat"));
    assert_eq!(text(&call, "server.address").as_deref(), Some("127.0.0.1"));
    assert_eq!(text(&call, "error.type"), None);
    assert_eq!(attempts.len(), 1, "{attempts:?}");
    assert_eq!(attempts[0].name, "attempt first");
    assert_eq!(attempts[0].trace_id, call.trace_id);
}

#[tokio::test]
async fn the_messages_route_continues_the_trace_and_a_bad_traceparent_is_ignored() {
    let collector = Collector::start(StatusCode::OK).await;
    let upstream = FakeUpstream::start().await;
    let gateway =
        Gateway::start_with(&config(&upstream, &collector.endpoint), &[("WEIR_TEST_KEY", SECRET)], None).await;

    upstream.push(openai_wire::completion("Hi there"));
    let traceparent = format!("00-{TRACE_ID}-{PARENT_ID}-01");
    assert_eq!(send(&gateway, "/v1/messages", Some(&traceparent), &hello()).await, 200);
    let (call, _) = collector.call_span("chat chat").await;
    assert_eq!(hex::encode(&call.trace_id), TRACE_ID);
    assert_eq!(text(&call, "weir.route").as_deref(), Some("anthropic_messages"));

    collector.spans.lock().unwrap().clear();
    upstream.push(openai_wire::completion("Hi there"));
    let upper_case = format!("00-{}-{PARENT_ID}-01", TRACE_ID.to_uppercase());
    assert_eq!(send(&gateway, "/v1/chat/completions", Some(&upper_case), &hello()).await, 200);
    let (call, _) = collector.call_span("chat chat").await;
    assert_ne!(hex::encode(&call.trace_id), TRACE_ID, "an invalid traceparent starts a fresh trace");
    assert!(call.parent_span_id.is_empty());
}

#[tokio::test]
async fn a_refusing_collector_leaves_the_call_alone() {
    let collector = Collector::start(StatusCode::INTERNAL_SERVER_ERROR).await;
    let upstream = FakeUpstream::start().await;
    let gateway =
        Gateway::start_with(&config(&upstream, &collector.endpoint), &[("WEIR_TEST_KEY", SECRET)], None).await;
    upstream.push(openai_wire::completion("Hi there"));

    let started = Instant::now();
    assert_eq!(send(&gateway, "/v1/chat/completions", None, &hello()).await, 200);
    assert!(started.elapsed() < Duration::from_secs(5));
    collector.call_span("chat chat").await;
    gateway.wait_for_stderr("the spans are dropped", Duration::from_secs(5)).await;
}

#[tokio::test]
async fn a_decision_call_is_a_decide_span_in_the_callers_trace() {
    let collector = Collector::start(StatusCode::OK).await;
    let upstream = FakeUpstream::start().await;
    let decision_entry = format!(
        "[[model]]\nid = \"triage\"\nprovider = \"decision\"\nkind = \"decision\"\nendpoint = \"{}\"\n\
         context_window = 4000\n\n",
        upstream.base_url()
    );
    let text_config = format!("{decision_entry}{}", config(&upstream, &collector.endpoint));
    let gateway = Gateway::start_with(&text_config, &[("WEIR_TEST_KEY", SECRET)], None).await;
    let traceparent = format!("00-{TRACE_ID}-{PARENT_ID}-01");
    let question = json!({"model": "triage", "state": {"text": "hi"}, "questions": [{"id": "q", "shape": "noul"}]});
    assert_eq!(send(&gateway, "/v1/decisions", Some(&traceparent), &question).await, 200);
    let (call, attempts) = collector.call_span("decide triage").await;
    assert_eq!(hex::encode(&call.trace_id), TRACE_ID);
    assert_eq!(text(&call, "gen_ai.operation.name").as_deref(), Some("decide"));
    assert_eq!(text(&call, "gen_ai.provider.name").as_deref(), Some("decision"));
    assert_eq!(text(&call, "weir.route").as_deref(), Some("decisions"));
    assert_eq!(attempts.len(), 1, "{attempts:?}");
}
