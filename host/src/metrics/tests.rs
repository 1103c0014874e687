use std::sync::Arc;
use std::time::{Duration, SystemTime};

use super::Metrics;
use crate::admission::{Admission, Demand, InProcessStore};
use crate::catalog::{Catalog, Config, MetricsSettings};
use crate::plugin::ProviderRegistry;
use crate::record::{
    AttemptReason, AttemptRecord, CallObserver, CallOpening, CallRecord, Operation, Route, StreamEnd, Tokens, Who,
};

/// Two models on two providers; neither provider is loaded, which a catalog
/// allows (the entries stay listed).
fn catalog() -> Catalog {
    let text = "[[model]]\nid = \"fast\"\nprovider = \"openai\"\nmax_output_tokens = 100\ncontext_window = 1000\n\
                max_concurrency = 4\n\n\
                [[model]]\nid = \"deep\"\nprovider = \"anthropic\"\nmax_output_tokens = 100\ncontext_window = 1000\n";
    let config = Config::from_toml(text, "t.toml").unwrap();
    Catalog::resolve(&config, &mut ProviderRegistry::default()).unwrap()
}

fn metrics(settings: MetricsSettings) -> Metrics {
    Metrics::new(&settings, &catalog())
}

fn attempt(reason: AttemptReason, category: &str, wait_ms: u64) -> AttemptRecord {
    AttemptRecord {
        reason,
        started_ms: 0,
        latency_ms: 100,
        admission_wait_ms: wait_ms,
        status: Some(200),
        category: category.to_owned(),
        request_id: None,
        usage: None,
        searches: None,
        web_searches: None,
        deployment: None,
    }
}

fn opening(model: &str) -> CallOpening {
    CallOpening {
        call_id: "c".to_owned(),
        started_at: SystemTime::UNIX_EPOCH,
        who: Who::default(),
        route: Route::OpenaiChat,
        operation: Operation::Chat,
        model: model.to_owned(),
        stream: false,
        traceparent: None,
    }
}

/// A successful whole call to `fast` on `openai`, one attempt.
fn record(model: &str) -> CallRecord {
    CallRecord {
        role: None,
        notes: Vec::new(),
        call_id: "c".to_owned(),
        started_at: SystemTime::UNIX_EPOCH,
        ended_at: SystemTime::UNIX_EPOCH,
        who: Who { key_id: Some("k1".to_owned()), member: Some("ada".to_owned()), team: None },
        route: Route::OpenaiChat,
        operation: Operation::Chat,
        model: model.to_owned(),
        identity: Some(model.to_owned()),
        provider: Some("openai".to_owned()),
        wire_id: Some(model.to_owned()),
        endpoint_host: None,
        served_model: None,
        stream: false,
        traceparent: None,
        max_tokens: Some(100),
        attempts: vec![attempt(AttemptReason::First, "ok", 0)],
        usage: Tokens::default(),
        billable_input: None,
        cost_usd: None,
        category: "ok".to_owned(),
        stop_reason: Some("stop".to_owned()),
        latency_ms: 1500,
        first_output_ms: None,
        stream_end: None,
        content: None,
        client: None,
        charged_worst_case: false,
        cached: false,
        cached_from: None,
    }
}

/// Opens and closes `record` as the call path does.
async fn observe(metrics: &Metrics, record: CallRecord) {
    metrics.opened(&opening(&record.model)).await.unwrap();
    metrics.closed(&Arc::new(record)).await.unwrap();
}

/// The value of the sample `series` (name and labels, as rendered), or a
/// panic showing the exposition.
fn value(text: &str, series: &str) -> f64 {
    let prefix = format!("{series} ");
    text.lines()
        .find_map(|line| line.strip_prefix(&prefix))
        .unwrap_or_else(|| panic!("no `{series}` in:\n{text}"))
        .parse()
        .unwrap()
}

#[tokio::test]
async fn a_success_counts_its_call_tokens_cost_and_latency() {
    let metrics = metrics(MetricsSettings::default());
    let mut success = record("fast");
    success.usage = Tokens { input: 120, output: 30, cache_read: 80, cache_write: 0, reasoning: 10 };
    success.cost_usd = Some(0.25);
    observe(&metrics, success.clone()).await;
    observe(&metrics, success).await;
    let text = metrics.encode();
    assert_eq!(
        value(
            &text,
            r#"weir_calls_total{model="fast",provider="openai",category="ok",route="openai_chat",operation="chat"}"#
        ),
        2.0
    );
    assert_eq!(value(&text, r#"weir_tokens_total{model="fast",kind="input"}"#), 240.0);
    assert_eq!(value(&text, r#"weir_tokens_total{model="fast",kind="output"}"#), 60.0);
    assert_eq!(value(&text, r#"weir_tokens_total{model="fast",kind="cache_read"}"#), 160.0);
    assert_eq!(value(&text, r#"weir_tokens_total{model="fast",kind="cache_write"}"#), 0.0);
    assert_eq!(value(&text, r#"weir_tokens_total{model="fast",kind="reasoning"}"#), 20.0);
    assert_eq!(value(&text, r#"weir_cost_usd_total{model="fast"}"#), 0.5);
    assert_eq!(value(&text, r#"weir_call_duration_seconds_count{model="fast"}"#), 2.0);
    assert_eq!(value(&text, r#"weir_call_duration_seconds_sum{model="fast"}"#), 3.0);
    assert_eq!(value(&text, r#"weir_call_duration_seconds_bucket{le="1.0",model="fast"}"#), 0.0);
    assert_eq!(value(&text, r#"weir_call_duration_seconds_bucket{le="2.5",model="fast"}"#), 2.0);
    assert_eq!(value(&text, r#"weir_attempts_total{reason="first"}"#), 2.0);
    assert_eq!(value(&text, "weir_calls_in_flight"), 0.0);
    assert!(!text.contains("weir_time_to_first_output_seconds_count"), "a whole call has no first output");
    assert!(!text.contains("member="), "member labels are off by default");
    assert!(!text.contains("key="), "key labels are off by default");
    assert!(text.ends_with("# EOF\n"), "{text}");
}

#[tokio::test]
async fn a_call_in_flight_is_counted_until_it_closes() {
    let metrics = metrics(MetricsSettings::default());
    metrics.opened(&opening("fast")).await.unwrap();
    metrics.opened(&opening("deep")).await.unwrap();
    assert_eq!(value(&metrics.encode(), "weir_calls_in_flight"), 2.0);
    metrics.closed(&Arc::new(record("fast"))).await.unwrap();
    assert_eq!(value(&metrics.encode(), "weir_calls_in_flight"), 1.0);
}

#[tokio::test]
async fn a_failure_counts_under_its_category_without_cost() {
    let metrics = metrics(MetricsSettings::default());
    let mut failed = record("deep");
    failed.provider = Some("anthropic".to_owned());
    failed.route = Route::AnthropicMessages;
    failed.category = "provider_fault".to_owned();
    failed.attempts = vec![attempt(AttemptReason::First, "provider_fault", 0)];
    observe(&metrics, failed).await;
    let text = metrics.encode();
    assert_eq!(
        value(
            &text,
            r#"weir_calls_total{model="deep",provider="anthropic",category="provider_fault",route="anthropic_messages",operation="chat"}"#
        ),
        1.0
    );
    assert_eq!(
        value(&text, r#"weir_component_faults_total{provider="anthropic"}"#),
        1.0,
        "once, not per attempt and call"
    );
    assert!(!text.contains("weir_cost_usd_total{"), "no cost declared, none counted");
}

#[tokio::test]
async fn a_fault_before_any_attempt_counts_on_the_call() {
    let metrics = metrics(MetricsSettings::default());
    let mut failed = record("fast");
    failed.category = "provider_fault".to_owned();
    failed.attempts = Vec::new();
    observe(&metrics, failed).await;
    assert_eq!(value(&metrics.encode(), r#"weir_component_faults_total{provider="openai"}"#), 1.0);
}

#[tokio::test]
async fn a_stream_records_its_first_output() {
    let metrics = metrics(MetricsSettings::default());
    let mut stream = record("fast");
    stream.stream = true;
    stream.first_output_ms = Some(300);
    stream.stream_end = Some(StreamEnd { delivered: 5, upstream_bytes: 900, client_left: false, completed: true });
    observe(&metrics, stream).await;
    let text = metrics.encode();
    assert_eq!(value(&text, r#"weir_time_to_first_output_seconds_count{model="fast"}"#), 1.0);
    assert_eq!(value(&text, r#"weir_time_to_first_output_seconds_sum{model="fast"}"#), 0.3);
    assert_eq!(value(&text, r#"weir_time_to_first_output_seconds_bucket{le="0.5",model="fast"}"#), 1.0);
    assert_eq!(value(&text, r#"weir_time_to_first_output_seconds_bucket{le="0.25",model="fast"}"#), 0.0);
}

#[tokio::test]
async fn a_retry_is_labelled_with_the_signal_before_it() {
    let metrics = metrics(MetricsSettings::default());
    let mut retried = record("fast");
    retried.attempts =
        vec![attempt(AttemptReason::First, "rate_limited", 0), attempt(AttemptReason::Retry, "ok", 2_000)];
    observe(&metrics, retried).await;
    let text = metrics.encode();
    assert_eq!(value(&text, r#"weir_retries_total{model="fast",signal="rate_limited"}"#), 1.0);
    assert_eq!(value(&text, r#"weir_attempts_total{reason="first"}"#), 1.0);
    assert_eq!(value(&text, r#"weir_attempts_total{reason="retry"}"#), 1.0);
    assert_eq!(value(&text, r#"weir_admission_wait_seconds_count{model="fast"}"#), 2.0);
    assert_eq!(value(&text, r#"weir_admission_wait_seconds_sum{model="fast"}"#), 2.0);
    assert_eq!(value(&text, r#"weir_admission_wait_seconds_bucket{le="0.001",model="fast"}"#), 1.0);
    assert_eq!(
        value(
            &text,
            r#"weir_calls_total{model="fast",provider="openai",category="ok",route="openai_chat",operation="chat"}"#
        ),
        1.0
    );
}

#[tokio::test]
async fn an_unknown_model_is_one_label_whatever_the_caller_sends() {
    let metrics = metrics(MetricsSettings::default());
    for garbage in ["../../etc/passwd", "gpt-9", "fast "] {
        let mut lost = record(garbage);
        lost.provider = None;
        lost.category = "model_not_found".to_owned();
        lost.attempts = Vec::new();
        observe(&metrics, lost).await;
    }
    let mut empty = record("nope");
    empty.provider = Some(String::new());
    empty.category = "model_not_found".to_owned();
    observe(&metrics, empty).await;
    let text = metrics.encode();
    assert_eq!(
        value(
            &text,
            r#"weir_calls_total{model="unknown",provider="none",category="model_not_found",route="openai_chat",operation="chat"}"#
        ),
        4.0
    );
    assert!(!text.contains("passwd") && !text.contains("gpt-9") && !text.contains("nope"), "{text}");
}

#[tokio::test]
async fn member_and_key_labels_when_the_operator_asks() {
    let metrics = metrics(MetricsSettings { member_labels: true, key_labels: true, ..MetricsSettings::default() });
    observe(&metrics, record("fast")).await;
    let mut anonymous = record("fast");
    anonymous.who = Who::default();
    observe(&metrics, anonymous).await;
    let text = metrics.encode();
    let labels = r#"model="fast",provider="openai",category="ok",route="openai_chat",operation="chat""#;
    assert_eq!(value(&text, &format!(r#"weir_calls_total{{{labels},member="ada",key="k1"}}"#)), 1.0);
    assert_eq!(value(&text, &format!(r#"weir_calls_total{{{labels},member="none",key="none"}}"#)), 1.0);
}

#[test]
fn a_capped_label_set_stops_growing() {
    let metrics = metrics(MetricsSettings::default());
    let categories = &metrics.inner.labels.categories;
    for n in 0..200 {
        categories.get(Some(&format!("category_{n}")));
    }
    assert_eq!(&*categories.get(Some("category_1")), "category_1");
    assert_eq!(&*categories.get(Some("category_199")), "other");
    assert_eq!(&*categories.get(None), "none");
}

#[test]
fn the_ledger_reports_its_batches() {
    let metrics = metrics(MetricsSettings::default());
    let meter = metrics.ledger_meter();
    meter.committed(3, Duration::from_millis(2));
    meter.committed(40, Duration::from_millis(20));
    meter.committed(2, Duration::from_micros(8));
    meter.failed(7);
    meter.shipped(43, Some(Duration::from_millis(30)));
    meter.shipped(2, None);
    meter.ship_failed();
    let text = metrics.encode();
    assert_eq!(value(&text, "weir_ledger_commit_seconds_count"), 3.0);
    assert_eq!(value(&text, "weir_ledger_commit_seconds_sum"), 0.022008);
    assert_eq!(
        value(&text, r#"weir_ledger_commit_seconds_bucket{le="0.00001"}"#),
        1.0,
        "a log append of microseconds has a bucket of its own"
    );
    assert_eq!(value(&text, r#"weir_ledger_commit_seconds_bucket{le="0.0025"}"#), 2.0);
    assert_eq!(value(&text, "weir_ledger_batch_records_sum"), 45.0);
    assert_eq!(value(&text, r#"weir_ledger_batch_records_bucket{le="4.0"}"#), 2.0);
    assert_eq!(value(&text, "weir_ledger_failures_total"), 1.0);
    assert_eq!(value(&text, "weir_ledger_shipped_records_total"), 45.0);
    assert_eq!(value(&text, "weir_ledger_ship_lag_seconds_count"), 1.0, "a batch without a closing row has no lag");
    assert_eq!(value(&text, r#"weir_ledger_ship_lag_seconds_bucket{le="0.05"}"#), 1.0);
    assert_eq!(value(&text, "weir_ledger_ship_failures_total"), 1.0);
}

#[tokio::test]
async fn admission_gauges_are_read_from_the_gates() {
    let catalog = catalog();
    let metrics = Metrics::new(&MetricsSettings::default(), &catalog);
    let admission = Admission::new(&catalog, &InProcessStore);
    let held = admission.gate("fast").unwrap().admit(Demand { requests: 1, tokens: 10 }, None).await.unwrap();
    metrics.read_gates(&catalog, &admission).await;
    let text = metrics.encode();
    assert_eq!(value(&text, r#"weir_admission_in_flight{model="fast"}"#), 1.0);
    assert_eq!(value(&text, r#"weir_admission_in_flight{model="deep"}"#), 0.0);
    for model in ["fast", "deep"] {
        assert_eq!(value(&text, &format!(r#"weir_admission_queue_depth{{model="{model}"}}"#)), 0.0);
        assert_eq!(value(&text, &format!(r#"weir_admission_throttle_coefficient{{model="{model}"}}"#)), 0.0);
    }
    held.rollback().await;
    metrics.read_gates(&catalog, &admission).await;
    assert_eq!(value(&metrics.encode(), r#"weir_admission_in_flight{model="fast"}"#), 0.0, "read anew at each scrape");
}
