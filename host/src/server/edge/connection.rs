//! One client connection: hyper's HTTP/1.1 over a socket whose reads and writes
//! are watched, and a watchdog that closes the connection when the client is too
//! slow for the phase it is in:
//!
//! ```text
//! accept ─► awaiting head ──(head parsed)──► busy ──(response's last byte)──► idle ──(first byte)──► awaiting head …
//!           header_timeout                    writes blocked ≥ stream_idle      idle_timeout
//!           (from accept or first byte)
//! ```
//!
//! hyper's own `header_read_timeout` starts when hyper waits for a head, which
//! includes the idle wait between requests, so it could not tell a slow head from
//! an idle keep-alive; the phases here can. A phase change only records the
//! time: the watchdog is never woken for it, and looks again at least every
//! shortest limit instead. Every deadline a change sets lies at least that far
//! ahead, so none is missed, and the connection's task is not re-polled three
//! times per request (once per phase change) to re-arm a timer. A body that stalls is the checks'
//! `body_timeout`. A busy connection is never closed for taking long (a slow
//! upstream is the call's business), only for not taking what it is sent: a
//! client that leaves a stream unread would otherwise hold its component
//! instance, admission permit and upstream socket forever. Closing drops the
//! response body, which drops the stream and everything it holds.

use std::convert::Infallible;
use std::future::Future;
use std::io::IoSlice;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::watch;
use tokio::time::Instant;

use crate::catalog::ServerSettings;

/// The watchdog's limits, from `[server]`.
#[derive(Debug, Clone, Copy)]
pub(super) struct Limits {
    pub header: Duration,
    pub idle: Duration,
    pub stream_idle: Duration,
}

impl Limits {
    pub(super) fn of(settings: &ServerSettings) -> Self {
        Self { header: settings.header_timeout(), idle: settings.idle_timeout(), stream_idle: settings.stream_idle() }
    }

    /// The nearest any deadline a phase change sets can lie.
    fn shortest(&self) -> Duration {
        self.header.min(self.idle).min(self.stream_idle)
    }
}

/// Why the watchdog closed a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Expired {
    /// The request head did not arrive within `header_timeout`.
    Head,
    /// The keep-alive connection saw no new request within `idle_timeout`.
    Idle,
    /// The client took none of its answer's bytes for `stream_idle_secs`.
    Unread,
}

/// What the connection is doing, and since when (nanoseconds after the
/// watch's origin): packed in one word so that the socket's every read and
/// write reads it without a lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    AwaitingHead { since: u64 },
    Busy,
    Idle { since: u64 },
}

/// The phase's tag, in a packed word's top two bits; the time in the others.
const TAG: u64 = 3 << 62;
const AWAITING_HEAD: u64 = 0;
const BUSY: u64 = 1 << 62;
const IDLE: u64 = 2 << 62;

impl Phase {
    fn pack(self) -> u64 {
        match self {
            Self::AwaitingHead { since } => AWAITING_HEAD | since,
            Self::Busy => BUSY,
            Self::Idle { since } => IDLE | since,
        }
    }

    fn unpack(word: u64) -> Self {
        let since = word & !TAG;
        match word & TAG {
            BUSY => Self::Busy,
            IDLE => Self::Idle { since },
            _ => Self::AwaitingHead { since },
        }
    }
}

/// What the watched socket, the service and the watchdog share.
#[derive(Debug)]
pub(super) struct ConnWatch {
    limits: Limits,
    /// The origin of the times below: when the connection was accepted.
    origin: Instant,
    /// The packed [`Phase`].
    phase: AtomicU64,
    /// When the socket last refused a write, while it still refuses them:
    /// nanoseconds after `origin`, plus one (0: writes go through).
    write_blocked: AtomicU64,
}

impl ConnWatch {
    pub(super) fn new(limits: Limits) -> Arc<Self> {
        let phase = AtomicU64::new(Phase::AwaitingHead { since: 0 }.pack());
        Arc::new(Self { limits, origin: Instant::now(), phase, write_blocked: AtomicU64::new(0) })
    }

    /// Nanoseconds since the origin (62 bits hold 146 years).
    fn now(&self) -> u64 {
        u64::try_from(self.origin.elapsed().as_nanos()).unwrap_or(u64::MAX).min(!TAG)
    }

    fn at(&self, since: u64) -> Instant {
        self.origin + Duration::from_nanos(since)
    }

    fn phase(&self) -> Phase {
        Phase::unpack(self.phase.load(Ordering::Relaxed))
    }

    fn set_phase(&self, phase: Phase) {
        self.phase.store(phase.pack(), Ordering::Relaxed);
    }

    /// Bytes arrived: on an idle connection they start the next head.
    fn bytes_read(&self) {
        let word = self.phase.load(Ordering::Relaxed);
        if word & TAG == IDLE {
            let head = Phase::AwaitingHead { since: self.now() }.pack();
            // Lost only to a phase change made meanwhile, which then stands.
            let _ = self.phase.compare_exchange(word, head, Ordering::Relaxed, Ordering::Relaxed);
        }
    }

    fn write_blocked(&self) {
        if self.write_blocked.load(Ordering::Relaxed) == 0 {
            self.write_blocked.store(self.now() + 1, Ordering::Relaxed);
        }
    }

    fn write_progressed(&self) {
        if self.write_blocked.load(Ordering::Relaxed) != 0 {
            self.write_blocked.store(0, Ordering::Relaxed);
        }
    }

    /// No request is being served: the connection awaits (or is reading) a
    /// head, or is idle between requests. Nothing on it is authenticated.
    fn between_requests(&self) -> bool {
        !matches!(self.phase(), Phase::Busy)
    }

    pub(super) fn request_started(&self) {
        self.set_phase(Phase::Busy);
    }

    pub(super) fn response_ended(&self) {
        self.set_phase(Phase::Idle { since: self.now() });
    }

    /// The earliest instant the connection expires at as things stand, and why.
    fn deadline(&self) -> Option<(Instant, Expired)> {
        let phase = match self.phase() {
            Phase::AwaitingHead { since } => Some((self.at(since) + self.limits.header, Expired::Head)),
            Phase::Idle { since } => Some((self.at(since) + self.limits.idle, Expired::Idle)),
            Phase::Busy => None,
        };
        let unread = match self.write_blocked.load(Ordering::Relaxed) {
            0 => None,
            blocked => Some((self.at(blocked - 1) + self.limits.stream_idle, Expired::Unread)),
        };
        match (phase, unread) {
            (Some(a), Some(b)) => Some(if b.0 < a.0 { b } else { a }),
            (a, b) => a.or(b),
        }
    }

    /// Resolves when the connection has been too slow for its phase: looks at
    /// its deadline, at the latest every [`Limits::shortest`] (see the module doc).
    pub(super) async fn expired(&self) -> Expired {
        loop {
            let now = Instant::now();
            let next_look = now + self.limits.shortest();
            match self.deadline() {
                Some((at, why)) if at <= now => return why,
                Some((at, _)) => tokio::time::sleep_until(at.min(next_look)).await,
                None => tokio::time::sleep_until(next_look).await,
            }
        }
    }
}

/// A socket that reports reads and blocked writes to its [`ConnWatch`].
struct WatchedIo {
    inner: TcpStream,
    watch: Arc<ConnWatch>,
}

impl WatchedIo {
    fn wrote(&self, polled: &Poll<std::io::Result<usize>>) {
        match polled {
            Poll::Pending => self.watch.write_blocked(),
            Poll::Ready(Ok(written)) if *written > 0 => self.watch.write_progressed(),
            Poll::Ready(_) => {}
        }
    }
}

impl AsyncRead for WatchedIo {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let polled = Pin::new(&mut this.inner).poll_read(cx, buf);
        if matches!(polled, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            this.watch.bytes_read();
        }
        polled
    }
}

impl AsyncWrite for WatchedIo {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, data: &[u8]) -> Poll<std::io::Result<usize>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.inner).poll_write(cx, data);
        this.wrote(&polled);
        polled
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.inner).poll_write_vectored(cx, data);
        this.wrote(&polled);
        polled
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

/// Dropped with a response body, at its end: the connection is idle again.
pub(super) struct ResponseEnd(Arc<ConnWatch>);

impl Drop for ResponseEnd {
    fn drop(&mut self) {
        self.0.response_ended();
    }
}

/// What answers a connection's requests: the gateway's checks and routes
/// ([`Edge`](super::checks::Edge)), or a listener that serves reads only.
pub(super) trait Handler: Send + Sync + 'static {
    /// The answer to `request`, whose body holds `end` until its last frame is
    /// sent. `on_loopback`: the connection came in on a loopback address.
    fn handle(
        &self,
        request: hyper::Request<Incoming>,
        end: ResponseEnd,
        on_loopback: bool,
    ) -> impl Future<Output = axum::response::Response> + Send;
}

/// hyper's read and write buffer per connection: the largest head, exactly.
const MAX_BUFFER_BYTES: usize = super::checks::MAX_HEAD_BYTES;

/// Serves one connection until the client closes it, the watchdog does, or a
/// drain begins (`drain` turning true) after it was accepted: then a
/// connection with a request in progress finishes that exchange (hyper's
/// graceful shutdown) and one without (awaiting or reading a head, idle) is
/// closed at once.
pub(super) async fn serve<H: Handler>(
    stream: TcpStream,
    handler: Arc<H>,
    limits: Limits,
    mut drain: watch::Receiver<bool>,
) {
    let on_loopback = stream.local_addr().is_ok_and(|address| address.ip().to_canonical().is_loopback());
    let watch = ConnWatch::new(limits);
    let io = TokioIo::new(WatchedIo { inner: stream, watch: Arc::clone(&watch) });
    let service_watch = Arc::clone(&watch);
    let service = hyper::service::service_fn(move |request: hyper::Request<Incoming>| {
        let (handler, watch) = (Arc::clone(&handler), Arc::clone(&service_watch));
        // Boxed: hyper keeps a slot the size of this future for the
        // connection's life (4.2 KiB inline, even while a stream is written
        // after the handler returned); boxed, the handler's state lives only
        // while it runs.
        Box::pin(async move {
            watch.request_started();
            Ok::<_, Infallible>(handler.handle(request, ResponseEnd(watch), on_loopback).await)
        })
    });
    let mut builder = hyper::server::conn::http1::Builder::new();
    // The watchdog times heads; hyper's timer would also run over the idle wait.
    builder.header_read_timeout(None);
    // What a client that stops reading can make the gateway hold in hyper's write
    // buffer (hyper's default is ~400 KiB per connection); also the largest head
    // hyper waits for (a larger one it happened to read whole is refused by the
    // checks: hyper's own limit is not exact).
    builder.max_buf_size(MAX_BUFFER_BYTES);
    let connection = builder.serve_connection(io, service);
    tokio::pin!(connection);
    let mut drain_seen = false;
    loop {
        tokio::select! {
            result = connection.as_mut() => {
                if let Err(error) = result {
                    tracing::debug!(%error, "client connection ended with an error");
                }
                return;
            }
            why = watch.expired() => {
                tracing::info!(reason = ?why, "closing a client connection that was too slow");
                return;
            }
            changed = drain.changed(), if !drain_seen => {
                drain_seen = true;
                if changed.is_err() {
                    continue;
                }
                // A head still arriving is nobody's call yet: the drain does
                // not wait for it (a slow client's head could hold the exit
                // for `header_timeout`).
                if watch.between_requests() {
                    tracing::debug!("draining: closing a connection with no request in progress");
                    return;
                }
                connection.as_mut().graceful_shutdown();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> Limits {
        Limits { header: Duration::from_secs(10), idle: Duration::from_secs(75), stream_idle: Duration::from_secs(60) }
    }

    #[tokio::test(start_paused = true)]
    async fn a_fresh_connection_must_send_its_head_within_the_header_timeout() {
        let watch = ConnWatch::new(limits());
        let started = Instant::now();
        assert_eq!(watch.expired().await, Expired::Head);
        assert_eq!(started.elapsed(), Duration::from_secs(10));
    }

    #[tokio::test(start_paused = true)]
    async fn an_idle_connection_waits_the_idle_timeout_then_a_head_gets_the_header_timeout() {
        let watch = ConnWatch::new(limits());
        watch.request_started();
        watch.response_ended();
        let idle = Instant::now();
        let waited = tokio::time::timeout(Duration::from_secs(70), watch.expired()).await;
        assert!(waited.is_err(), "idle for 70 s of 75: still open");
        watch.bytes_read();
        let head = Instant::now();
        assert_eq!(watch.expired().await, Expired::Head);
        assert_eq!(head.elapsed(), Duration::from_secs(10));
        assert!(idle.elapsed() > Duration::from_secs(75));
    }

    #[tokio::test(start_paused = true)]
    async fn a_busy_connection_is_closed_only_when_its_client_stops_taking_bytes() {
        let watch = ConnWatch::new(limits());
        watch.request_started();
        let slow_upstream = tokio::time::timeout(Duration::from_secs(600), watch.expired()).await;
        assert!(slow_upstream.is_err(), "a busy connection that writes nothing is not timed");
        watch.write_blocked();
        tokio::time::sleep(Duration::from_secs(59)).await;
        watch.write_progressed();
        watch.write_blocked();
        let blocked = Instant::now();
        assert_eq!(watch.expired().await, Expired::Unread);
        assert_eq!(blocked.elapsed(), Duration::from_secs(60), "progress restarts the clock");
    }

    #[test]
    fn the_drain_waits_only_for_a_connection_serving_a_request() {
        let watch = ConnWatch::new(limits());
        assert!(watch.between_requests(), "awaiting (or reading) its first head");
        watch.request_started();
        assert!(!watch.between_requests(), "serving a request");
        watch.response_ended();
        assert!(watch.between_requests(), "idle");
        watch.bytes_read();
        assert!(watch.between_requests(), "reading its next head");
    }

    #[test]
    fn a_phase_and_its_time_share_one_word() {
        let long_ago = !TAG;
        for phase in [Phase::AwaitingHead { since: 0 }, Phase::Busy, Phase::Idle { since: long_ago }] {
            assert_eq!(Phase::unpack(phase.pack()), phase);
        }
        assert_eq!(
            Phase::unpack(Phase::AwaitingHead { since: long_ago }.pack()),
            Phase::AwaitingHead { since: long_ago }
        );
    }

    /// The watchdog is not woken for a phase change: one already waiting
    /// still closes the connection exactly at the deadline the change set.
    #[tokio::test(start_paused = true)]
    async fn a_waiting_watchdog_meets_a_later_phases_deadline_exactly() {
        let watch = ConnWatch::new(limits());
        watch.request_started();
        let waiting = tokio::spawn({
            let watch = Arc::clone(&watch);
            async move { watch.expired().await }
        });
        tokio::time::sleep(Duration::from_millis(33_300)).await;
        watch.response_ended();
        let ended = Instant::now();
        tokio::time::sleep(Duration::from_millis(41_700)).await;
        watch.bytes_read();
        let head = Instant::now();
        assert_eq!(waiting.await.unwrap(), Expired::Head);
        assert_eq!(head.elapsed(), Duration::from_secs(10), "the head's deadline, not a look later");
        assert!(ended.elapsed() < Duration::from_secs(75) + Duration::from_secs(10));
    }

    #[tokio::test(start_paused = true)]
    async fn the_idle_deadline_follows_the_end_of_each_response() {
        let watch = Arc::clone(&ConnWatch::new(limits()));
        watch.request_started();
        tokio::time::sleep(Duration::from_secs(500)).await;
        watch.response_ended();
        let ended = Instant::now();
        assert_eq!(watch.expired().await, Expired::Idle);
        assert_eq!(ended.elapsed(), Duration::from_secs(75));
    }
}
