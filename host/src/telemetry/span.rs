//! A closed [`CallRecord`] as OTLP spans: one CLIENT span for the call and one
//! INTERNAL child per upstream attempt.
//!
//! The call span is the single outbound span a service map draws for the call
//! (it carries `server.address`); the attempts hang below it so a retry, an
//! escalation or a correction shows where its time went. Every time comes from
//! the record: the call's `started_at`/`ended_at`, each attempt's `started_ms`
//! offset and `latency_ms`.

use std::time::{SystemTime, UNIX_EPOCH};

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value;
use opentelemetry_proto::tonic::common::v1::{AnyValue, ArrayValue, InstrumentationScope, KeyValue};
use opentelemetry_proto::tonic::resource::v1::Resource;
use opentelemetry_proto::tonic::trace::v1::span::SpanKind;
use opentelemetry_proto::tonic::trace::v1::status::StatusCode;
use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Span, Status};

use crate::record::{AttemptRecord, CallRecord, Tokens};

/// W3C trace flags: the caller recorded its span (and wants the trace kept).
const SAMPLED: u32 = 0x01;
/// OTLP span flags (`SpanFlags`): whether the parent is remote is known...
const HAS_IS_REMOTE: u32 = 0x100;
/// ...and it is (the caller's span, in another process).
const IS_REMOTE: u32 = 0x200;

/// Where the call's trace comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
struct TraceContext {
    trace_id: [u8; 16],
    /// The caller's span, the call span's remote parent.
    parent: Option<[u8; 8]>,
    /// The W3C trace flags carried on every span of the trace.
    flags: u32,
}

impl TraceContext {
    /// The caller's trace from its `traceparent`, else a fresh sampled one.
    /// The record only holds a traceparent that
    /// [`crate::record::valid_traceparent`] accepted; one that does not parse
    /// here starts a fresh trace all the same.
    fn of(record: &CallRecord) -> Self {
        record.traceparent.as_deref().and_then(parse_traceparent).unwrap_or_else(|| Self {
            trace_id: fastrand::u128(1..).to_be_bytes(),
            parent: None,
            flags: SAMPLED,
        })
    }
}

fn parse_traceparent(value: &str) -> Option<TraceContext> {
    let mut parts = value.split('-');
    let (_version, trace, parent, flags) = (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    let mut trace_id = [0; 16];
    hex::decode_to_slice(trace, &mut trace_id).ok()?;
    let mut parent_id = [0; 8];
    hex::decode_to_slice(parent, &mut parent_id).ok()?;
    let flags = u32::from_str_radix(flags, 16).ok()?;
    Some(TraceContext { trace_id, parent: Some(parent_id), flags })
}

/// The record's spans, the call's first; none when the caller's trace is not
/// sampled (its flags lack the sampled bit): the caller decided not to keep
/// that trace, and a gateway span alone in it would be an orphan.
pub(crate) fn spans(record: &CallRecord) -> Vec<Span> {
    let context = TraceContext::of(record);
    if context.flags & SAMPLED == 0 {
        return Vec::new();
    }
    let call_id = span_id();
    let start = unix_nanos(record.started_at);
    let mut spans = Vec::with_capacity(1 + record.attempts.len());
    spans.push(Span {
        trace_id: context.trace_id.to_vec(),
        span_id: call_id.to_vec(),
        parent_span_id: context.parent.map(|parent| parent.to_vec()).unwrap_or_default(),
        flags: context.flags | HAS_IS_REMOTE | if context.parent.is_some() { IS_REMOTE } else { 0 },
        name: format!("{} {}", record.operation.as_str(), record.model),
        kind: SpanKind::Client as i32,
        start_time_unix_nano: start,
        end_time_unix_nano: unix_nanos(record.ended_at),
        attributes: call_attributes(record),
        status: status(&record.category),
        ..Default::default()
    });
    for attempt in &record.attempts {
        let attempt_start = start.saturating_add(millis_to_nanos(attempt.started_ms));
        spans.push(Span {
            trace_id: context.trace_id.to_vec(),
            span_id: span_id().to_vec(),
            parent_span_id: call_id.to_vec(),
            flags: context.flags | HAS_IS_REMOTE,
            name: format!("attempt {}", attempt.reason.as_str()),
            kind: SpanKind::Internal as i32,
            start_time_unix_nano: attempt_start,
            end_time_unix_nano: attempt_start.saturating_add(millis_to_nanos(attempt.latency_ms)),
            attributes: attempt_attributes(attempt),
            status: status(&attempt.category),
            ..Default::default()
        });
    }
    spans
}

/// One export request: `spans` under this service's resource and Weir's scope.
pub(crate) fn export_request(service_name: &str, spans: Vec<Span>) -> ExportTraceServiceRequest {
    ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            resource: Some(Resource { attributes: vec![string("service.name", service_name)], ..Default::default() }),
            scope_spans: vec![ScopeSpans {
                scope: Some(InstrumentationScope {
                    name: "weir".to_owned(),
                    version: env!("CARGO_PKG_VERSION").to_owned(),
                    ..Default::default()
                }),
                spans,
                ..Default::default()
            }],
            ..Default::default()
        }],
    }
}

/// The GenAI semantic conventions' client span attributes, plus Weir's own.
fn call_attributes(record: &CallRecord) -> Vec<KeyValue> {
    let mut attributes = vec![
        string("gen_ai.operation.name", record.operation.as_str()),
        string("gen_ai.request.model", &record.model),
        string("weir.call_id", &record.call_id),
        string("weir.route", record.route.as_str()),
    ];
    if let Some(provider) = &record.provider {
        attributes.push(string("gen_ai.provider.name", provider));
    }
    if let Some(served) = &record.served_model {
        attributes.push(string("gen_ai.response.model", served));
    }
    if let Some(max_tokens) = record.max_tokens {
        attributes.push(int("gen_ai.request.max_tokens", u64::from(max_tokens)));
    }
    attributes.extend(usage(&record.usage));
    if let Some(stop) = &record.stop_reason {
        let reasons = ArrayValue { values: vec![AnyValue { value: Some(Value::StringValue(stop.clone())) }] };
        attributes.push(KeyValue {
            key: "gen_ai.response.finish_reasons".to_owned(),
            value: Some(AnyValue { value: Some(Value::ArrayValue(reasons)) }),
            ..Default::default()
        });
    }
    if !record.ok() {
        attributes.push(string("error.type", &record.category));
    }
    if let Some(endpoint) = &record.endpoint_host {
        let (host, port) = host_and_port(endpoint);
        attributes.push(string("server.address", host));
        if let Some(port) = port {
            attributes.push(int("server.port", u64::from(port)));
        }
    }
    if let Some(cost) = record.cost_usd {
        attributes.push(KeyValue {
            key: "weir.cost_usd".to_owned(),
            value: Some(AnyValue { value: Some(Value::DoubleValue(cost)) }),
            ..Default::default()
        });
    }
    attributes
}

fn attempt_attributes(attempt: &AttemptRecord) -> Vec<KeyValue> {
    let mut attributes = vec![string("weir.attempt.reason", attempt.reason.as_str())];
    if let Some(status) = attempt.status {
        attributes.push(int("http.response.status_code", u64::from(status)));
    }
    if attempt.category != "ok" {
        attributes.push(string("error.type", &attempt.category));
    }
    if let Some(id) = &attempt.request_id {
        attributes.push(string("gen_ai.response.id", id));
    }
    if let Some(deployment) = &attempt.deployment {
        attributes.push(string("weir.deployment", deployment));
    }
    if let Some(tokens) = &attempt.usage {
        attributes.extend(usage(tokens));
    }
    attributes
}

fn usage(tokens: &Tokens) -> [KeyValue; 4] {
    [
        int("gen_ai.usage.input_tokens", tokens.input),
        int("gen_ai.usage.output_tokens", tokens.output),
        int("gen_ai.usage.cache_read.input_tokens", tokens.cache_read),
        int("gen_ai.usage.cache_creation.input_tokens", tokens.cache_write),
    ]
}

/// ERROR with the category for a failure; unset (the convention's default)
/// for a success.
fn status(category: &str) -> Option<Status> {
    (category != "ok").then(|| Status { code: StatusCode::Error as i32, message: category.to_owned() })
}

/// `server.address` is the host alone; a port the endpoint names is `server.port`
/// (`host:8080`, `[::1]:8080`; a bare IPv6 address has no port).
fn host_and_port(endpoint: &str) -> (&str, Option<u16>) {
    match endpoint.rsplit_once(':') {
        Some((host, port)) if !host.contains(':') || host.ends_with(']') => match port.parse() {
            Ok(port) => (host.trim_start_matches('[').trim_end_matches(']'), Some(port)),
            Err(_) => (endpoint, None),
        },
        _ => (endpoint, None),
    }
}

fn string(key: &str, value: &str) -> KeyValue {
    KeyValue {
        key: key.to_owned(),
        value: Some(AnyValue { value: Some(Value::StringValue(value.to_owned())) }),
        ..Default::default()
    }
}

fn int(key: &str, value: u64) -> KeyValue {
    KeyValue {
        key: key.to_owned(),
        value: Some(AnyValue { value: Some(Value::IntValue(i64::try_from(value).unwrap_or(i64::MAX))) }),
        ..Default::default()
    }
}

/// A random, non-zero span id (OTLP treats all zeros as absent).
fn span_id() -> [u8; 8] {
    fastrand::u64(1..).to_be_bytes()
}

fn unix_nanos(time: SystemTime) -> u64 {
    time.duration_since(UNIX_EPOCH).map_or(0, |since| u64::try_from(since.as_nanos()).unwrap_or(u64::MAX))
}

fn millis_to_nanos(millis: u64) -> u64 {
    millis.saturating_mul(1_000_000)
}

#[cfg(test)]
pub(crate) mod tests {
    use std::time::Duration;

    use super::*;
    use crate::record::{AttemptReason, Operation, Route, Who};

    pub(crate) const TRACEPARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    /// A failed-then-retried call: a 429 first attempt, then a success.
    pub(crate) fn record() -> CallRecord {
        let started_at = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        CallRecord {
            role: None,
            notes: Vec::new(),
            call_id: "call-1".to_owned(),
            started_at,
            ended_at: started_at + Duration::from_millis(900),
            who: Who::default(),
            route: Route::OpenaiChat,
            operation: Operation::Chat,
            model: "gpt-4.1-mini".to_owned(),
            identity: Some("gpt-4.1-mini".to_owned()),
            provider: Some("openai".to_owned()),
            wire_id: Some("gpt-4.1-mini".to_owned()),
            endpoint_host: Some("api.openai.com".to_owned()),
            served_model: Some("gpt-4.1-mini-2025-04-14".to_owned()),
            stream: false,
            traceparent: Some(TRACEPARENT.to_owned()),
            max_tokens: Some(256),
            attempts: vec![
                AttemptRecord {
                    reason: AttemptReason::First,
                    started_ms: 5,
                    latency_ms: 100,
                    admission_wait_ms: 0,
                    status: Some(429),
                    category: "rate_limited".to_owned(),
                    request_id: None,
                    usage: None,
                    searches: None,
                    web_searches: None,
                    deployment: None,
                },
                AttemptRecord {
                    reason: AttemptReason::Retry,
                    started_ms: 400,
                    latency_ms: 480,
                    admission_wait_ms: 0,
                    status: Some(200),
                    category: "ok".to_owned(),
                    request_id: Some("req_abc".to_owned()),
                    usage: Some(Tokens { input: 12, output: 34, cache_read: 5, cache_write: 1, reasoning: 0 }),
                    searches: None,
                    web_searches: None,
                    deployment: Some("eastus".to_owned()),
                },
            ],
            usage: Tokens { input: 12, output: 34, cache_read: 5, cache_write: 1, reasoning: 0 },
            billable_input: Some(12.0),
            cost_usd: Some(0.0025),
            category: "ok".to_owned(),
            stop_reason: Some("stop".to_owned()),
            latency_ms: 900,
            first_output_ms: None,
            stream_end: None,
            content: None,
            client: None,
            charged_worst_case: false,
            cached: false,
            cached_from: None,
        }
    }

    pub(crate) fn attribute<'a>(span: &'a Span, key: &str) -> Option<&'a Value> {
        span.attributes.iter().find(|kv| kv.key == key).and_then(|kv| kv.value.as_ref()?.value.as_ref())
    }

    fn text(span: &Span, key: &str) -> String {
        match attribute(span, key) {
            Some(Value::StringValue(value)) => value.clone(),
            other => panic!("{key}: {other:?}"),
        }
    }

    fn number(span: &Span, key: &str) -> i64 {
        match attribute(span, key) {
            Some(Value::IntValue(value)) => *value,
            other => panic!("{key}: {other:?}"),
        }
    }

    #[test]
    fn the_call_span_continues_the_callers_trace() {
        let spans = spans(&record());
        assert_eq!(spans.len(), 3);
        let call = &spans[0];
        assert_eq!(hex::encode(&call.trace_id), "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(hex::encode(&call.parent_span_id), "00f067aa0ba902b7");
        assert_eq!(call.span_id.len(), 8);
        assert_ne!(call.span_id, vec![0; 8]);
        assert_eq!(call.flags, 0x301, "sampled, with a remote parent");
        assert_eq!(call.name, "chat gpt-4.1-mini");
        assert_eq!(call.kind, SpanKind::Client as i32);
        assert_eq!(call.start_time_unix_nano, 1_700_000_000_000_000_000);
        assert_eq!(call.end_time_unix_nano, 1_700_000_000_900_000_000);
        assert_eq!(call.status, None, "a success leaves the status unset");
    }

    #[test]
    fn attempts_are_children_at_their_offsets() {
        let spans = spans(&record());
        let (call, first, retry) = (&spans[0], &spans[1], &spans[2]);
        for attempt in [first, retry] {
            assert_eq!(attempt.trace_id, call.trace_id);
            assert_eq!(attempt.parent_span_id, call.span_id);
            assert_eq!(attempt.kind, SpanKind::Internal as i32);
            assert_eq!(attempt.flags, 0x101, "sampled, with a local parent");
        }
        assert_ne!(first.span_id, retry.span_id);
        assert_eq!(first.name, "attempt first");
        assert_eq!(first.start_time_unix_nano, 1_700_000_000_005_000_000);
        assert_eq!(first.end_time_unix_nano, 1_700_000_000_105_000_000);
        assert_eq!(retry.name, "attempt retry");
        assert_eq!(retry.start_time_unix_nano, 1_700_000_000_400_000_000);
        assert_eq!(retry.end_time_unix_nano, 1_700_000_000_880_000_000);

        assert_eq!(first.status, Some(Status { code: StatusCode::Error as i32, message: "rate_limited".to_owned() }));
        assert_eq!(text(first, "error.type"), "rate_limited");
        assert_eq!(number(first, "http.response.status_code"), 429);
        assert_eq!(attribute(first, "gen_ai.response.id"), None);
        assert_eq!(attribute(first, "gen_ai.usage.input_tokens"), None, "it reported no usage");

        assert_eq!(retry.status, None);
        assert_eq!(attribute(retry, "error.type"), None);
        assert_eq!(text(retry, "weir.attempt.reason"), "retry");
        assert_eq!(text(retry, "gen_ai.response.id"), "req_abc");
        assert_eq!(number(retry, "gen_ai.usage.output_tokens"), 34);
        assert_eq!(text(retry, "weir.deployment"), "eastus", "the deployment it went to");
        assert_eq!(attribute(first, "weir.deployment"), None, "an entry without deployments names none");
    }

    #[test]
    fn the_call_span_carries_the_genai_attributes() {
        let call = &spans(&record())[0];
        assert_eq!(text(call, "gen_ai.operation.name"), "chat");
        assert_eq!(text(call, "gen_ai.provider.name"), "openai");
        assert_eq!(text(call, "gen_ai.request.model"), "gpt-4.1-mini");
        assert_eq!(text(call, "gen_ai.response.model"), "gpt-4.1-mini-2025-04-14");
        assert_eq!(number(call, "gen_ai.request.max_tokens"), 256);
        assert_eq!(number(call, "gen_ai.usage.input_tokens"), 12);
        assert_eq!(number(call, "gen_ai.usage.output_tokens"), 34);
        assert_eq!(number(call, "gen_ai.usage.cache_read.input_tokens"), 5);
        assert_eq!(number(call, "gen_ai.usage.cache_creation.input_tokens"), 1);
        let Some(Value::ArrayValue(reasons)) = attribute(call, "gen_ai.response.finish_reasons") else {
            panic!("finish reasons")
        };
        assert_eq!(reasons.values, vec![AnyValue { value: Some(Value::StringValue("stop".to_owned())) }]);
        assert_eq!(text(call, "weir.call_id"), "call-1");
        assert_eq!(text(call, "weir.route"), "openai_chat");
        assert_eq!(text(call, "server.address"), "api.openai.com");
        assert_eq!(attribute(call, "weir.cost_usd"), Some(&Value::DoubleValue(0.0025)));
        assert_eq!(attribute(call, "error.type"), None);
    }

    #[test]
    fn a_failed_call_is_an_error_span() {
        let mut failed = record();
        failed.category = "upstream_unavailable".to_owned();
        failed.served_model = None;
        failed.cost_usd = None;
        failed.stop_reason = None;
        let call = &spans(&failed)[0];
        assert_eq!(call.status.as_ref().map(|status| status.code), Some(StatusCode::Error as i32));
        assert_eq!(text(call, "error.type"), "upstream_unavailable");
        for absent in ["gen_ai.response.model", "weir.cost_usd", "gen_ai.response.finish_reasons"] {
            assert_eq!(attribute(call, absent), None, "{absent}");
        }
    }

    #[test]
    fn without_a_traceparent_the_trace_is_fresh() {
        let mut record = record();
        record.traceparent = None;
        let (one, two) = (spans(&record), spans(&record));
        assert_eq!(one[0].trace_id.len(), 16);
        assert_ne!(one[0].trace_id, vec![0; 16]);
        assert_ne!(one[0].trace_id, two[0].trace_id);
        assert!(one[0].parent_span_id.is_empty(), "a root span");
        assert_eq!(one[0].flags, 0x101, "sampled, with no remote parent");
        assert_eq!(one[1].trace_id, one[0].trace_id);
    }

    #[test]
    fn an_unsampled_callers_trace_gets_no_spans() {
        let mut record = record();
        record.traceparent = Some("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00".to_owned());
        assert!(spans(&record).is_empty());
    }

    #[test]
    fn the_request_names_the_service() {
        let request = export_request("billing-api", spans(&record()));
        let resource = request.resource_spans[0].resource.as_ref().unwrap();
        assert_eq!(resource.attributes, vec![string("service.name", "billing-api")]);
        assert_eq!(request.resource_spans[0].scope_spans[0].spans.len(), 3);
    }

    #[test]
    fn the_server_address_is_the_host_and_the_port_apart() {
        assert_eq!(host_and_port("api.openai.com"), ("api.openai.com", None));
        assert_eq!(host_and_port("127.0.0.1:8080"), ("127.0.0.1", Some(8080)));
        assert_eq!(host_and_port("[::1]:8080"), ("::1", Some(8080)));
        assert_eq!(host_and_port("::1"), ("::1", None));
    }
}
