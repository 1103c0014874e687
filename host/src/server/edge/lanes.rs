//! The threads that serve client connections: one single-threaded tokio
//! runtime per core, each owning the connections it is handed, instead of one
//! work-stealing runtime shared by all.
//!
//! ```text
//! accept (the caller's runtime) ─► the lane with the fewest open connections ─► its thread serves the connection to its end
//! ```
//!
//! Why: a call is a short chain of tasks (the connection, the upstream
//! client's connection, a stream's pump) that wake each other. On a
//! work-stealing runtime each wake-up can unpark the other worker, which
//! searches, finds nothing or steals the task to another core, and parks
//! again: at one caller that cost ~50 µs per call and ~15 % of the CPU per
//! call (the book's performance chapter, docs/src/performance.md has the figures). A connection
//! that stays on one thread wakes no other. The price: a connection whose
//! request holds its thread (a large prompt being encoded) delays the other
//! connections of that lane, which a work-stealing runtime would move; the
//! accept loop puts each new connection on the least busy lane.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::net::TcpStream;
use tokio::sync::oneshot;

use super::poll_window::PollWindow;

/// How long [`Lanes::stop`] waits for the lanes' threads to drop what their
/// runtimes still hold (connections the drain gave up on).
const STOP_WAIT: Duration = Duration::from_secs(2);

/// The connection threads of one `serve`.
#[derive(Debug)]
pub(super) struct Lanes {
    lanes: Vec<Lane>,
    /// Where the search for the least busy lane starts, so that ties rotate.
    next: AtomicUsize,
}

#[derive(Debug)]
struct Lane {
    runtime: tokio::runtime::Handle,
    /// Connections handed to this lane and not yet ended.
    open: Arc<AtomicUsize>,
    /// Dropped (or sent) to end the lane's thread; taken by [`Lanes::stop`].
    stop: Option<oneshot::Sender<()>>,
    /// Resolves once the thread dropped its runtime.
    ended: Option<oneshot::Receiver<()>>,
}

impl Lanes {
    /// One lane per core the process may use; see [`Lanes::start`].
    pub(super) fn per_core(
        poll_before_sleep: Duration,
        prepare: impl Fn() + Send + Sync + 'static,
    ) -> std::io::Result<Self> {
        let cores = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get);
        Self::start(cores, poll_before_sleep, prepare)
    }

    /// Starts `count` lanes (at least one), each on a thread of its own, which
    /// runs `prepare` before it serves anything. Out of tasks, a lane watches
    /// for I/O for up to `poll_before_sleep` before its thread sleeps
    /// (`poll_window.rs`).
    pub(super) fn start(
        count: usize,
        poll_before_sleep: Duration,
        prepare: impl Fn() + Send + Sync + 'static,
    ) -> std::io::Result<Self> {
        let prepare: Arc<dyn Fn() + Send + Sync> = Arc::new(prepare);
        let lanes = (0..count.max(1))
            .map(|index| Lane::start(index, poll_before_sleep, Arc::clone(&prepare)))
            .collect::<std::io::Result<Vec<_>>>()?;
        Ok(Self { lanes, next: AtomicUsize::new(0) })
    }

    /// Serves `stream` on the lane with the fewest open connections:
    /// `serve_connection` runs there, on the socket registered with that
    /// lane's runtime.
    pub(super) fn serve<F, Fut>(&self, stream: TcpStream, serve_connection: F)
    where
        F: FnOnce(TcpStream) -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let lane = self.least_busy();
        // The socket leaves the accepting runtime's reactor and joins the lane's.
        let socket = match stream.into_std() {
            Ok(socket) => socket,
            Err(error) => {
                tracing::warn!(%error, "cannot hand a client connection to a lane");
                return;
            }
        };
        let open = OpenConnection::new(&lane.open);
        lane.runtime.spawn(async move {
            let _open = open;
            match TcpStream::from_std(socket) {
                Ok(stream) => serve_connection(stream).await,
                Err(error) => tracing::warn!(%error, "cannot register a client connection with its lane"),
            }
        });
    }

    /// Ends every lane's thread and waits (a bounded time) until each dropped
    /// the connections its runtime still held.
    pub(super) async fn stop(mut self) {
        let ended: Vec<_> = self.lanes.iter_mut().filter_map(Lane::signal_stop).collect();
        for lane_ended in ended {
            if tokio::time::timeout(STOP_WAIT, lane_ended).await.is_err() {
                tracing::warn!("a connection lane did not stop in time");
            }
        }
    }

    /// How many lanes serve connections.
    pub(super) fn count(&self) -> usize {
        self.lanes.len()
    }

    fn least_busy(&self) -> &Lane {
        let start = self.next.fetch_add(1, Ordering::Relaxed);
        let count = self.lanes.len();
        (0..count)
            .map(|offset| &self.lanes[(start + offset) % count])
            .min_by_key(|lane| lane.open.load(Ordering::Relaxed))
            .unwrap_or(&self.lanes[0])
    }
}

impl Drop for Lanes {
    /// A `serve` dropped unfinished (its task was cancelled) ends its lanes
    /// too; their threads drop the connections on their own.
    fn drop(&mut self) {
        for lane in &mut self.lanes {
            lane.signal_stop();
        }
    }
}

impl Lane {
    fn start(index: usize, poll_before_sleep: Duration, prepare: Arc<dyn Fn() + Send + Sync>) -> std::io::Result<Self> {
        let poll_window = Arc::new(PollWindow::new(poll_before_sleep));
        let before_sleep = Arc::clone(&poll_window);
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .on_thread_park(move || before_sleep.before_sleep())
            .build()?;
        poll_window.attach(&runtime);
        let handle = runtime.handle().clone();
        let (stop, stopped) = oneshot::channel::<()>();
        let (ended_sender, ended) = oneshot::channel();
        std::thread::Builder::new().name(format!("weir-lane-{index}")).spawn(move || {
            prepare();
            drop(prepare);
            // Either a stop or its sender's drop ends the lane.
            let _ = runtime.block_on(stopped);
            // Outside any runtime: dropping it here drops the tasks it still holds.
            drop(runtime);
            let _ = ended_sender.send(());
        })?;
        Ok(Self { runtime: handle, open: Arc::default(), stop: Some(stop), ended: Some(ended) })
    }

    /// Asks the thread to end; the receiver hears when it did.
    fn signal_stop(&mut self) -> Option<oneshot::Receiver<()>> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        self.ended.take()
    }
}

/// Counts a connection as open on its lane until dropped.
struct OpenConnection(Arc<AtomicUsize>);

impl OpenConnection {
    fn new(open: &Arc<AtomicUsize>) -> Self {
        open.fetch_add(1, Ordering::Relaxed);
        Self(Arc::clone(open))
    }
}

impl Drop for OpenConnection {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;
    use std::sync::mpsc;

    use tokio::io::AsyncReadExt;
    use tokio::net::TcpListener;

    use super::*;

    /// Where a served connection ran, reported by the connection itself.
    type Served = mpsc::Sender<String>;

    /// Accepts one connection from a new client; returns both ends.
    async fn connection(listener: &TcpListener) -> (TcpStream, TcpStream) {
        let client = TcpStream::connect(listener.local_addr().unwrap()).await.unwrap();
        let (server, _) = listener.accept().await.unwrap();
        (server, client)
    }

    /// Serves `server` on `lanes`: reports its thread's name, then reads until
    /// the client closes.
    fn serve_until_closed(lanes: &Lanes, server: TcpStream, served: &Served) {
        let served = served.clone();
        lanes.serve(server, move |mut stream| async move {
            let name = std::thread::current().name().unwrap_or_default().to_owned();
            served.send(name).unwrap();
            let mut sink = Vec::new();
            let _ = stream.read_to_end(&mut sink).await;
        });
    }

    fn lane_of(served: &mpsc::Receiver<String>) -> String {
        served.recv_timeout(Duration::from_secs(10)).expect("the connection was served")
    }

    fn open_counts(lanes: &Lanes) -> Vec<usize> {
        lanes.lanes.iter().map(|lane| lane.open.load(Ordering::SeqCst)).collect()
    }

    /// Waits (boundedly) until the lanes count `expected` open connections.
    async fn until_open(lanes: &Lanes, expected: &[usize]) {
        for _ in 0..1_000 {
            if open_counts(lanes) == expected {
                return;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert_eq!(open_counts(lanes), expected);
    }

    #[tokio::test]
    async fn a_connection_is_served_on_a_lane_and_counted_until_it_ends() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let lanes = Lanes::start(2, Duration::ZERO, || {}).unwrap();
        let (served, lane) = mpsc::channel();
        let (server, client) = connection(&listener).await;
        serve_until_closed(&lanes, server, &served);
        assert!(lane_of(&lane).starts_with("weir-lane-"), "served on a lane's thread");
        assert_eq!(open_counts(&lanes).iter().sum::<usize>(), 1);
        drop(client);
        until_open(&lanes, &[0, 0]).await;
        lanes.stop().await;
    }

    #[tokio::test]
    async fn a_new_connection_goes_to_the_lane_with_the_fewest_open() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let lanes = Lanes::start(2, Duration::ZERO, || {}).unwrap();
        let (served, lane) = mpsc::channel();
        let (first_server, first_client) = connection(&listener).await;
        serve_until_closed(&lanes, first_server, &served);
        let first_lane = lane_of(&lane);
        let (second_server, _second_client) = connection(&listener).await;
        serve_until_closed(&lanes, second_server, &served);
        let second_lane = lane_of(&lane);
        assert_ne!(first_lane, second_lane, "one connection on each lane");
        // The first lane empties: the next connection goes there, whichever
        // lane the rotation would have tried first.
        drop(first_client);
        let counts = if first_lane.ends_with('0') { [0, 1] } else { [1, 0] };
        until_open(&lanes, &counts).await;
        for _ in 0..2 {
            let (server, _client) = connection(&listener).await;
            serve_until_closed(&lanes, server, &served);
            assert_eq!(lane_of(&lane), first_lane);
            // Closing it makes the lanes even again for the next round.
            drop(_client);
            until_open(&lanes, &counts).await;
        }
        lanes.stop().await;
    }

    /// `prepare` runs on each lane's thread before it serves anything.
    #[tokio::test]
    async fn each_lane_is_prepared_on_its_own_thread_before_it_serves() {
        thread_local! {
            static PREPARED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
        }
        let prepared_on = Arc::new(Mutex::new(Vec::new()));
        let noted = Arc::clone(&prepared_on);
        let lanes = Lanes::start(2, Duration::ZERO, move || {
            PREPARED.set(true);
            noted.lock().unwrap().push(std::thread::current().name().unwrap_or_default().to_owned());
        })
        .unwrap();
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let (served, lane) = mpsc::channel();
        let mut clients = Vec::new();
        for _ in 0..2 {
            let (server, client) = connection(&listener).await;
            clients.push(client);
            let served = served.clone();
            lanes.serve(server, move |_stream| async move {
                served
                    .send(format!("{} prepared={}", std::thread::current().name().unwrap_or_default(), PREPARED.get()))
                    .unwrap();
            });
        }
        let mut seen = [lane_of(&lane), lane_of(&lane)];
        seen.sort();
        assert_eq!(seen, ["weir-lane-0 prepared=true", "weir-lane-1 prepared=true"]);
        let mut prepared = prepared_on.lock().unwrap().clone();
        prepared.sort();
        assert_eq!(prepared, ["weir-lane-0", "weir-lane-1"]);
        lanes.stop().await;
    }

    /// What a lane still holds when it stops (a connection the drain gave
    /// up on) is dropped on its thread before `stop` returns.
    #[tokio::test]
    async fn stopping_drops_the_connections_the_lanes_still_hold() {
        struct Held(Served);
        impl Drop for Held {
            fn drop(&mut self) {
                let _ = self.0.send(std::thread::current().name().unwrap_or_default().to_owned());
            }
        }
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let lanes = Lanes::start(1, Duration::ZERO, || {}).unwrap();
        let (dropped, dropped_on) = mpsc::channel();
        let (started, running) = mpsc::channel();
        let (server, _client) = connection(&listener).await;
        lanes.serve(server, move |_stream| async move {
            let _held = Held(dropped);
            started.send(String::new()).unwrap();
            std::future::pending::<()>().await;
        });
        lane_of(&running);
        lanes.stop().await;
        assert_eq!(dropped_on.try_recv().as_deref(), Ok("weir-lane-0"), "dropped before stop returned");
    }
}
