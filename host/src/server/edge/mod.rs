//! The gateway's edge: what a client connection and a request must satisfy before
//! a route runs, and how the server stops. Everything here reads `[server]`
//! ([`ServerSettings`]).
//!
//! ```text
//! accept (≤ max_connections; more wait in the kernel backlog)
//!   └─ lanes.rs: the connection goes to the lane (one single-threaded runtime per core) with the fewest open
//!        (poll_window.rs: out of tasks, a lane watches for I/O a few µs before its thread sleeps)
//!        └─ connection.rs: hyper HTTP/1.1 (head ≤ 64 KiB), TCP_NODELAY, header / idle / unread-answer watchdog
//!             └─ checks.rs, on the head: size, Origin, Host (host.rs; keyless over loopback), the key
//!                  (refused: answered at once, no call slot, the body never read, the connection closed);
//!                  then a call's content-type, calls in flight, body limit and timeout
//!                  └─ the routes (server/mod.rs), the key as a request extension
//! SIGTERM / ctrl-c ─► drain (≤ drain_secs): /health 503, new calls 503, calls in flight finish;
//!                     a connection with no request in progress (a head still arriving) is closed at once
//!                     second signal ─► stop at once
//! [metrics] listen ─► reads.rs: the same connection handling and head checks, no key, no body read
//! ```

mod checks;
mod connection;
mod holding;
mod host;
mod lanes;
mod poll_window;
mod reads;

use std::sync::Arc;

use axum::Router;
use tokio::net::TcpListener;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, watch};

use crate::Weir;
use crate::catalog::ServerSettings;

use checks::Edge;
use connection::Limits;
use lanes::Lanes;

/// How [`super::serve`] ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stopped {
    /// A signal came and every call in flight finished within `drain_secs`.
    Drained,
    /// `drain_secs` passed with `calls` still in flight; they were cut.
    DrainTimedOut { calls: usize },
    /// A second signal during the drain: stopped at once, cutting `calls`.
    Interrupted { calls: usize },
}

/// Serves the routes behind the edge until a signal, then drains.
pub(super) async fn serve(weir: Weir, listener: TcpListener) -> std::io::Result<Stopped> {
    let settings: ServerSettings = weir.config().server.clone();
    let mut signals = Signals::new()?;
    // Each lane's calls use an upstream pool of their own.
    let transport = weir.transport().clone();
    let lanes = Lanes::per_core(settings.poll_before_sleep(), move || transport.own_pool_on_this_thread())?;
    let edge = Arc::new(Edge::new(weir, settings.clone()));
    let limits = Limits::of(&settings);
    let connections = Arc::new(Semaphore::new(settings.max_connections() as usize));
    let drain = watch::Sender::new(false);
    tracing::debug!(lanes = lanes.count(), "connection lanes started");
    let spawn = |accepted: (tokio::net::TcpStream, OwnedSemaphorePermit)| {
        let (stream, permit) = accepted;
        // Subscribed now: a connection accepted during the drain has not seen it
        // begin, so it serves its request (answered `connection: close`).
        let (edge, drain) = (Arc::clone(&edge), drain.subscribe());
        lanes.serve(stream, move |stream| async move {
            connection::serve(stream, edge, limits, drain).await;
            drop(permit);
        });
    };
    loop {
        tokio::select! {
            accepted = accept(&listener, &connections) => spawn(accepted),
            () = signals.next() => break,
        }
    }
    edge.start_draining();
    // Connections open now finish their current exchange and close; connections
    // accepted from here on get one answer (`/health`: draining) and close.
    drain.send_replace(true);
    let calls = edge.calls_in_flight();
    tracing::info!(calls, drain_secs = settings.drain().as_secs(), "draining: new calls are refused");
    let deadline = tokio::time::Instant::now() + settings.drain();
    let stopped = loop {
        tokio::select! {
            accepted = accept(&listener, &connections) => spawn(accepted),
            () = edge.no_calls_in_flight() => {
                tracing::info!("drained: every call in flight finished");
                connections_closed(&connections, settings.max_connections(), deadline).await;
                break Stopped::Drained;
            }
            () = tokio::time::sleep_until(deadline) => {
                let calls = edge.calls_in_flight();
                tracing::warn!(calls, "drain time is up; stopping with calls in flight");
                break Stopped::DrainTimedOut { calls };
            }
            () = signals.next() => {
                let calls = edge.calls_in_flight();
                tracing::warn!(calls, "second signal: stopping without waiting for calls in flight");
                break Stopped::Interrupted { calls };
            }
        }
    };
    // Calls still in flight are cut here, on their lanes' threads, whose
    // records close as they are dropped (`Lanes::stop` waits up to 2 s per lane).
    lanes.stop().await;
    Ok(stopped)
}

/// Serves `router`'s reads on `listener` for the life of the process (the
/// metrics listener): each connection on the calling runtime, with the
/// gateway's connection limits and timeouts (see [`reads`]).
pub(super) async fn serve_reads(
    router: Router,
    settings: &ServerSettings,
    listener: TcpListener,
) -> std::io::Result<()> {
    let reads = Arc::new(reads::Reads { router, settings: settings.clone() });
    let limits = Limits::of(settings);
    let connections = Arc::new(Semaphore::new(settings.max_connections() as usize));
    // Never sent: this listener does not drain, it ends with the process.
    let (_no_drain, drain) = watch::channel(false);
    loop {
        let (stream, permit) = accept(&listener, &connections).await;
        let (reads, drain) = (Arc::clone(&reads), drain.clone());
        tokio::spawn(async move {
            connection::serve(stream, reads, limits, drain).await;
            drop(permit);
        });
    }
}

/// Waits, until `deadline`, for every connection task to end. A call leaves the
/// in-flight count when its body's last byte is handed to hyper, which may not
/// have written it to the socket yet: exiting then would cut the very answers
/// the drain waited for.
async fn connections_closed(connections: &Semaphore, total: u32, deadline: tokio::time::Instant) {
    if tokio::time::timeout_at(deadline, connections.acquire_many(total)).await.is_err() {
        tracing::warn!("drain time is up while connections were still closing");
    }
}

/// The next client socket, once a connection slot is free. Client sockets get
/// `TCP_NODELAY`: without it a streamed chunk can wait ~40 ms for the peer's
/// delayed ACK (Nagle), on every response.
async fn accept(listener: &TcpListener, connections: &Arc<Semaphore>) -> (tokio::net::TcpStream, OwnedSemaphorePermit) {
    loop {
        // The semaphore is never closed; a slot is taken before the accept, so
        // connections beyond the cap wait in the kernel's backlog.
        let Ok(permit) = Arc::clone(connections).acquire_owned().await else { continue };
        match listener.accept().await {
            Ok((stream, _peer)) => {
                if let Err(error) = stream.set_nodelay(true) {
                    tracing::warn!(%error, "cannot set TCP_NODELAY on a client socket");
                }
                limit_unsent(&stream);
                return (stream, permit);
            }
            Err(error) => {
                // Out of file descriptors and the like: back off instead of spinning.
                tracing::warn!(%error, "accept failed");
                drop(permit);
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            }
        }
    }
}

/// Unsent bytes the kernel queues for a client before a write waits (16 KiB).
/// Without it Linux sizes a socket's send buffer in megabytes (on loopback, at
/// once), so a client that stopped reading would look like one taking its
/// answer for megabytes, and hold its stream that long before `stream_idle_secs`
/// could even start counting. Streamed answers are produced far slower than a
/// network drains 16 KiB, so a reading client never waits on it.
#[cfg(any(target_os = "linux", target_os = "android"))]
fn limit_unsent(stream: &tokio::net::TcpStream) {
    const NOTSENT_LOWAT_BYTES: u32 = 16 << 10;
    if let Err(error) = socket2::SockRef::from(stream).set_tcp_notsent_lowat(NOTSENT_LOWAT_BYTES) {
        tracing::warn!(%error, "cannot set TCP_NOTSENT_LOWAT on a client socket");
    }
}

#[cfg(not(any(target_os = "linux", target_os = "android")))]
fn limit_unsent(_stream: &tokio::net::TcpStream) {}

/// SIGTERM and SIGINT (ctrl-c), either of which starts the drain, then ends it.
struct Signals {
    #[cfg(unix)]
    terminate: tokio::signal::unix::Signal,
    #[cfg(unix)]
    interrupt: tokio::signal::unix::Signal,
}

impl Signals {
    fn new() -> std::io::Result<Self> {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            Ok(Self { terminate: signal(SignalKind::terminate())?, interrupt: signal(SignalKind::interrupt())? })
        }
        #[cfg(not(unix))]
        Ok(Self {})
    }

    async fn next(&mut self) {
        #[cfg(unix)]
        tokio::select! {
            _ = self.terminate.recv() => {}
            _ = self.interrupt.recv() => {}
        }
        #[cfg(not(unix))]
        let _ = tokio::signal::ctrl_c().await;
    }
}
