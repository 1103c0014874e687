//! OpenTelemetry spans for every call, exported over OTLP/HTTP (protobuf);
//! off unless `[telemetry] otlp_endpoint` is set.
//!
//! Why no OpenTelemetry SDK: the spans are built *after* the call, from its
//! closed [`CallRecord`], where every start and end time is already known
//! exactly. There is no live span to track, so the protocol's own messages
//! (the maintained `opentelemetry-proto` crate's prost types, without its
//! tonic transport) are filled in directly ([`span`]) and POSTed with the
//! reqwest already in the tree: no second HTTP stack, no global tracer.
//!
//! Flow: [`Telemetry::closed`] only puts the record's `Arc` on a bounded
//! queue and acknowledges at once (a full queue drops the record's spans and
//! counts them: a call never waits on the collector). A background task turns
//! records into spans and POSTs a batch every second, or as soon as it holds
//! [`BATCH_SPANS`]. A batch the collector refuses or cannot be reached for is
//! logged and dropped, never retried: the memory held is the queue plus one
//! batch, whatever the collector does.
//!
//! The task needs a tokio runtime. [`crate::WeirBuilder::build`] may run
//! outside one (the `weir` binary builds before it starts its runtime), so the
//! task is spawned on the runtime of the first record (or the first
//! [`Telemetry::flush`]), and lives as long as that runtime does: a library
//! user whose runtime ends keeps no exporter, and later spans are counted as
//! dropped.

mod span;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use prost::Message;
use tokio::sync::{mpsc, oneshot};

use crate::catalog::TelemetrySettings;
use crate::record::{Acknowledged, CallObserver, CallRecord, acknowledged};
use crate::redact::redacted_endpoint;

/// Spans in one export request; a batch this full goes at once.
pub const BATCH_SPANS: usize = 512;
/// Records waiting for the exporter; more are dropped.
const QUEUE_RECORDS: usize = 2048;
/// How often a partial batch goes.
const EXPORT_EVERY: Duration = Duration::from_secs(1);
/// How long one export may take, the connection included.
const EXPORT_TIMEOUT: Duration = Duration::from_secs(10);

/// The span exporter: a [`CallObserver`] that sends each closed call as spans
/// to an OTLP/HTTP collector. Built from `[telemetry]` by
/// [`crate::WeirBuilder::build`]; an embedding service may also start its own
/// and add it with [`crate::WeirBuilder::observer`].
pub struct Telemetry {
    records: mpsc::Sender<Arc<CallRecord>>,
    flushes: mpsc::Sender<oneshot::Sender<()>>,
    /// The task's half, taken when the task is spawned.
    exporter: Mutex<Option<Exporter>>,
    dropped: Arc<AtomicU64>,
}

impl std::fmt::Debug for Telemetry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Telemetry").field("dropped", &self.dropped()).finish_non_exhaustive()
    }
}

impl Telemetry {
    /// The exporter `settings` ask for: `None` without an `otlp_endpoint`, an
    /// error when the endpoint is not an http(s) URL. Spawns nothing yet (see
    /// the module doc), so it may run outside a tokio runtime.
    pub fn start(settings: &TelemetrySettings) -> Result<Option<Telemetry>, String> {
        let Some(endpoint) = &settings.otlp_endpoint else { return Ok(None) };
        let url = reqwest::Url::parse(endpoint).map_err(|error| {
            format!("[telemetry] otlp_endpoint {:?} is not a URL: {error}", redacted_endpoint(endpoint))
        })?;
        if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
            return Err(format!("[telemetry] otlp_endpoint {:?} is not an http(s) URL", redacted_endpoint(endpoint)));
        }
        let client = reqwest::Client::builder()
            .timeout(EXPORT_TIMEOUT)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|error| format!("cannot build the OTLP client: {error}"))?;
        let (records, queue) = mpsc::channel(QUEUE_RECORDS);
        // A flush waits for its answer, so a second one rarely queues behind it.
        let (flushes, flush_requests) = mpsc::channel(4);
        let dropped = Arc::new(AtomicU64::new(0));
        let exporter = Exporter {
            client,
            url,
            service_name: settings.service_name.clone().unwrap_or_else(|| "weir".to_owned()),
            queue,
            flush_requests,
            dropped: Arc::clone(&dropped),
        };
        Ok(Some(Telemetry { records, flushes, exporter: Mutex::new(Some(exporter)), dropped }))
    }

    /// Spans that never reached the collector: the queue was full, the
    /// exporter was gone, or the collector refused or could not be reached.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    /// Sends every span queued so far and waits for that export (at most
    /// [`EXPORT_TIMEOUT`] for it). For a shutdown: the batch is otherwise sent
    /// within a second.
    pub async fn flush(&self) {
        self.spawn_exporter();
        let (done, answered) = oneshot::channel();
        if self.flushes.send(done).await.is_ok() {
            // The task is gone if this fails: nothing left to send.
            let _ = answered.await;
        }
    }

    /// Spawns the task on the current runtime the first time one is there.
    fn spawn_exporter(&self) {
        let mut exporter = self.exporter.lock().unwrap_or_else(PoisonError::into_inner);
        if exporter.is_none() {
            return;
        }
        if let Ok(runtime) = tokio::runtime::Handle::try_current()
            && let Some(exporter) = exporter.take()
        {
            drop(runtime.spawn(exporter.run()));
        }
    }
}

impl CallObserver for Telemetry {
    fn closed(&self, record: &Arc<CallRecord>) -> Acknowledged {
        self.spawn_exporter();
        if self.records.try_send(Arc::clone(record)).is_err() {
            self.dropped.fetch_add(1 + record.attempts.len() as u64, Ordering::Relaxed);
        }
        acknowledged()
    }
}

/// The background half: receives records, batches their spans, POSTs them.
struct Exporter {
    client: reqwest::Client,
    url: reqwest::Url,
    service_name: String,
    queue: mpsc::Receiver<Arc<CallRecord>>,
    flush_requests: mpsc::Receiver<oneshot::Sender<()>>,
    dropped: Arc<AtomicU64>,
}

impl Exporter {
    /// Runs until the [`Telemetry`] is dropped, then sends what it holds.
    async fn run(mut self) {
        let mut batch = Vec::new();
        let mut tick = tokio::time::interval(EXPORT_EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                record = self.queue.recv() => {
                    let Some(record) = record else { break };
                    batch.extend(span::spans(&record));
                    if batch.len() >= BATCH_SPANS {
                        self.export(&mut batch).await;
                    }
                }
                Some(done) = self.flush_requests.recv() => {
                    while let Ok(record) = self.queue.try_recv() {
                        batch.extend(span::spans(&record));
                        if batch.len() >= BATCH_SPANS {
                            self.export(&mut batch).await;
                        }
                    }
                    self.export(&mut batch).await;
                    let _ = done.send(());
                }
                _ = tick.tick() => self.export(&mut batch).await,
            }
        }
        self.export(&mut batch).await;
    }

    /// POSTs `batch` and empties it, whatever the answer.
    async fn export(&self, batch: &mut Vec<opentelemetry_proto::tonic::trace::v1::Span>) {
        if batch.is_empty() {
            return;
        }
        let count = batch.len() as u64;
        let body = span::export_request(&self.service_name, std::mem::take(batch)).encode_to_vec();
        let sent = self
            .client
            .post(self.url.clone())
            .header(reqwest::header::CONTENT_TYPE, "application/x-protobuf")
            .body(body)
            .send()
            .await;
        let failure = match sent {
            Ok(response) if response.status().is_success() => return,
            Ok(response) => format!("the collector answered {}", response.status()),
            // reqwest's message names the URL, whose query may hold a token.
            Err(error) => format!("the collector could not be reached: {}", error.without_url()),
        };
        self.dropped.fetch_add(count, Ordering::Relaxed);
        tracing::warn!(spans = count, endpoint = %redacted_endpoint(self.url.as_str()), "{failure}; the spans are dropped");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(endpoint: Option<&str>) -> TelemetrySettings {
        TelemetrySettings { otlp_endpoint: endpoint.map(str::to_owned), service_name: None }
    }

    #[test]
    fn off_without_an_endpoint() {
        assert!(Telemetry::start(&settings(None)).unwrap().is_none());
    }

    #[test]
    fn the_endpoint_must_be_http() {
        for bad in ["127.0.0.1:4318", "ftp://collector/v1/traces", "not a url", "file:///tmp/x"] {
            assert!(Telemetry::start(&settings(Some(bad))).is_err(), "{bad}");
        }
        for good in ["http://127.0.0.1:4318/v1/traces", "https://otel.example.com/v1/traces"] {
            assert!(Telemetry::start(&settings(Some(good))).unwrap().is_some(), "{good}");
        }
        let error = Telemetry::start(&settings(Some("ftp://u:pw@collector/v1/traces?token=T0K"))).unwrap_err();
        assert!(error.contains("ftp://<credentials>@collector/v1/traces?token=<redacted>"), "{error}");
    }

    #[test]
    fn outside_a_runtime_a_record_waits_in_the_queue() {
        let telemetry = Telemetry::start(&settings(Some("http://127.0.0.1:9/v1/traces"))).unwrap().unwrap();
        let record = Arc::new(span::tests::record());
        drop(telemetry.closed(&record));
        assert_eq!(telemetry.dropped(), 0);
        assert!(telemetry.exporter.lock().unwrap().is_some(), "no runtime, so no task yet");
    }

    #[test]
    fn a_full_queue_drops_and_counts_without_blocking() {
        let telemetry = Telemetry::start(&settings(Some("http://127.0.0.1:9/v1/traces"))).unwrap().unwrap();
        let record = Arc::new(span::tests::record());
        for _ in 0..QUEUE_RECORDS + 3 {
            let ack = telemetry.closed(&record);
            assert!(pollster::block_on(ack).is_ok());
        }
        assert_eq!(telemetry.dropped(), 3 * 3, "three records of three spans each");
    }
}
