//! The span exporter against a real OTLP/HTTP receiver on loopback: an axum
//! server that decodes the protobuf `ExportTraceServiceRequest` with prost, as
//! a collector does. Records are synthetic; what arrives is what a collector
//! would store.

// Test code: a failed step should stop the test with its message.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value;
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message;
use weir_host::catalog::TelemetrySettings;
use weir_host::record::{AttemptReason, AttemptRecord, CallObserver, CallRecord, Operation, Route, Tokens, Who};
use weir_host::telemetry::Telemetry;

const TRACEPARENT: &str = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";

/// What the receiver got: each request's content type and decoded body.
#[derive(Clone, Default)]
struct Received(Arc<Mutex<Vec<(String, ExportTraceServiceRequest)>>>);

impl Received {
    fn spans(&self) -> Vec<Span> {
        let requests = self.0.lock().unwrap();
        requests
            .iter()
            .flat_map(|(_, request)| &request.resource_spans)
            .flat_map(|resource| &resource.scope_spans)
            .flat_map(|scope| scope.spans.clone())
            .collect()
    }

    fn requests(&self) -> usize {
        self.0.lock().unwrap().len()
    }
}

/// An OTLP/HTTP traces receiver answering every request with `status`.
struct Collector {
    endpoint: String,
    received: Received,
    _server: tokio::task::JoinHandle<()>,
}

async fn collector(status: StatusCode) -> Collector {
    async fn traces(
        State((received, status)): State<(Received, StatusCode)>,
        headers: HeaderMap,
        body: Bytes,
    ) -> StatusCode {
        let content_type = headers.get("content-type").map(|v| v.to_str().unwrap().to_owned()).unwrap_or_default();
        let request = ExportTraceServiceRequest::decode(body).expect("an ExportTraceServiceRequest");
        received.0.lock().unwrap().push((content_type, request));
        status
    }
    let received = Received::default();
    let app = Router::new().route("/v1/traces", post(traces)).with_state((received.clone(), status));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let endpoint = format!("http://{}/v1/traces", listener.local_addr().unwrap());
    let server = tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    Collector { endpoint, received, _server: server }
}

fn telemetry(endpoint: &str) -> Telemetry {
    let settings =
        TelemetrySettings { otlp_endpoint: Some(endpoint.to_owned()), service_name: Some("billing-api".to_owned()) };
    Telemetry::start(&settings).unwrap().expect("an endpoint is set")
}

/// A call retried once: a 429, then an answer with usage.
fn record(traceparent: Option<&str>) -> Arc<CallRecord> {
    let started_at = SystemTime::now();
    let usage = Tokens { input: 21, output: 8, cache_read: 3, cache_write: 0, reasoning: 0 };
    Arc::new(CallRecord {
        role: None,
        notes: Vec::new(),
        call_id: weir_host::record::new_call_id(),
        started_at,
        ended_at: started_at + Duration::from_millis(700),
        who: Who::default(),
        route: Route::AnthropicMessages,
        operation: Operation::Chat,
        model: "claude-haiku".to_owned(),
        identity: None,
        provider: Some("anthropic".to_owned()),
        wire_id: Some("claude-haiku-4-5".to_owned()),
        endpoint_host: Some("api.anthropic.com".to_owned()),
        served_model: Some("claude-haiku-4-5-20251001".to_owned()),
        stream: true,
        traceparent: traceparent.map(str::to_owned),
        max_tokens: Some(1024),
        attempts: vec![
            AttemptRecord {
                reason: AttemptReason::First,
                started_ms: 0,
                latency_ms: 200,
                admission_wait_ms: 0,
                status: Some(429),
                category: "rate_limited".to_owned(),
                request_id: Some("req_1".to_owned()),
                usage: None,
                searches: None,
                web_searches: None,
                deployment: None,
            },
            AttemptRecord {
                reason: AttemptReason::Retry,
                started_ms: 300,
                latency_ms: 400,
                admission_wait_ms: 0,
                status: Some(200),
                category: "ok".to_owned(),
                request_id: Some("req_2".to_owned()),
                usage: Some(usage),
                searches: None,
                web_searches: None,
                deployment: None,
            },
        ],
        usage,
        billable_input: None,
        cost_usd: None,
        category: "ok".to_owned(),
        stop_reason: Some("end_turn".to_owned()),
        latency_ms: 700,
        first_output_ms: Some(350),
        stream_end: None,
        content: None,
        client: None,
        charged_worst_case: false,
        cached: false,
        cached_from: None,
    })
}

fn attribute<'a>(span: &'a Span, key: &str) -> Option<&'a Value> {
    span.attributes.iter().find(|kv| kv.key == key).and_then(|kv| kv.value.as_ref()?.value.as_ref())
}

fn text(span: &Span, key: &str) -> String {
    match attribute(span, key) {
        Some(Value::StringValue(value)) => value.clone(),
        other => panic!("{key}: {other:?}"),
    }
}

/// The observer's acknowledgement is in at once, whatever the collector does.
async fn close(telemetry: &Telemetry, record: &Arc<CallRecord>) {
    let ack = telemetry.closed(record);
    tokio::time::timeout(Duration::from_millis(50), ack).await.expect("acknowledged at once").unwrap();
}

#[tokio::test]
async fn spans_reach_the_collector_in_the_callers_trace() {
    let collector = collector(StatusCode::OK).await;
    let telemetry = telemetry(&collector.endpoint);
    let record = record(Some(TRACEPARENT));
    close(&telemetry, &record).await;
    telemetry.flush().await;

    let requests = collector.received.0.lock().unwrap().clone();
    assert_eq!(requests.len(), 1);
    let (content_type, request) = &requests[0];
    assert_eq!(content_type, "application/x-protobuf");
    let resource = request.resource_spans[0].resource.as_ref().unwrap();
    assert_eq!(resource.attributes[0].key, "service.name");
    assert_eq!(
        resource.attributes[0].value.as_ref().unwrap().value,
        Some(Value::StringValue("billing-api".to_owned()))
    );

    let spans = collector.received.spans();
    assert_eq!(spans.len(), 3, "the call and its two attempts");
    let call = &spans[0];
    assert_eq!(call.name, "chat claude-haiku");
    assert_eq!(hex::encode(&call.trace_id), "0af7651916cd43dd8448eb211c80319c");
    assert_eq!(hex::encode(&call.parent_span_id), "b7ad6b7169203331");
    assert_eq!(text(call, "gen_ai.operation.name"), "chat");
    assert_eq!(text(call, "gen_ai.provider.name"), "anthropic");
    assert_eq!(text(call, "gen_ai.request.model"), "claude-haiku");
    assert_eq!(text(call, "gen_ai.response.model"), "claude-haiku-4-5-20251001");
    assert_eq!(attribute(call, "gen_ai.usage.input_tokens"), Some(&Value::IntValue(21)));
    assert_eq!(attribute(call, "gen_ai.usage.output_tokens"), Some(&Value::IntValue(8)));
    assert_eq!(attribute(call, "gen_ai.usage.cache_read.input_tokens"), Some(&Value::IntValue(3)));
    assert_eq!(attribute(call, "gen_ai.request.max_tokens"), Some(&Value::IntValue(1024)));
    assert_eq!(text(call, "weir.route"), "anthropic_messages");
    assert_eq!(text(call, "weir.call_id"), record.call_id);
    assert_eq!(text(call, "server.address"), "api.anthropic.com");
    let start = u64::try_from(record.started_at.duration_since(UNIX_EPOCH).unwrap().as_nanos()).unwrap();
    assert_eq!(call.start_time_unix_nano, start);
    assert_eq!(call.end_time_unix_nano, start + 700_000_000);
    for attempt in &spans[1..] {
        assert_eq!(attempt.trace_id, call.trace_id);
        assert_eq!(attempt.parent_span_id, call.span_id);
    }
    assert_eq!(text(&spans[1], "gen_ai.response.id"), "req_1");
    assert_eq!(text(&spans[1], "error.type"), "rate_limited");
    assert_eq!(spans[2].start_time_unix_nano, start + 300_000_000);
    assert_eq!(telemetry.dropped(), 0);
}

#[tokio::test]
async fn a_partial_batch_goes_within_about_a_second() {
    let collector = collector(StatusCode::OK).await;
    let telemetry = telemetry(&collector.endpoint);
    close(&telemetry, &record(None)).await;
    close(&telemetry, &record(None)).await;
    let waited = Instant::now();
    while collector.received.spans().len() < 6 {
        assert!(waited.elapsed() < Duration::from_secs(5), "no spans after 5 s without a flush");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let spans = collector.received.spans();
    assert_ne!(spans[0].trace_id, spans[3].trace_id, "each call without a traceparent starts its own trace");
    assert!(spans[0].parent_span_id.is_empty());
}

#[tokio::test]
async fn a_refusing_collector_costs_the_spans_once_and_nothing_else() {
    let collector = collector(StatusCode::INTERNAL_SERVER_ERROR).await;
    let telemetry = telemetry(&collector.endpoint);
    close(&telemetry, &record(Some(TRACEPARENT))).await;
    telemetry.flush().await;
    assert_eq!(telemetry.dropped(), 3);
    // No retry: the one refused request is all the collector sees, and later
    // calls still export.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(collector.received.requests(), 1);
    close(&telemetry, &record(None)).await;
    telemetry.flush().await;
    assert_eq!(collector.received.requests(), 2);
    assert_eq!(telemetry.dropped(), 6);
}

#[tokio::test]
async fn an_unreachable_collector_costs_the_spans_only() {
    // A port that was just free: nothing listens there.
    let endpoint = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}/v1/traces", listener.local_addr().unwrap())
    };
    let telemetry = telemetry(&endpoint);
    for _ in 0..10 {
        close(&telemetry, &record(Some(TRACEPARENT))).await;
    }
    tokio::time::timeout(Duration::from_secs(15), telemetry.flush()).await.expect("a flush is bounded");
    assert_eq!(telemetry.dropped(), 30);
}

#[tokio::test]
async fn spans_batch_by_size() {
    let collector = collector(StatusCode::OK).await;
    let telemetry = telemetry(&collector.endpoint);
    // 200 records of 3 spans: more than one batch's worth.
    for _ in 0..200 {
        close(&telemetry, &record(None)).await;
    }
    telemetry.flush().await;
    let requests = collector.received.0.lock().unwrap().clone();
    let sizes: Vec<usize> = requests.iter().map(|(_, r)| r.resource_spans[0].scope_spans[0].spans.len()).collect();
    assert_eq!(sizes.iter().sum::<usize>(), 600);
    assert!(sizes.iter().all(|size| *size <= weir_host::telemetry::BATCH_SPANS + 2), "{sizes:?}");
    assert!(sizes.len() >= 2, "{sizes:?}");
}
