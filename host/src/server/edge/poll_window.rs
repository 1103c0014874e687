//! A lane's short watch for I/O before its thread sleeps.
//!
//! When a lane's runtime runs out of tasks it sleeps in `epoll_wait`, and the
//! next readable socket wakes it. On a VM that halts an idle vCPU at once (this
//! project's bench machine: `haltpoll` with `guest_halt_poll_ns = 0`), each
//! sleep paid a halt and a wake-up, and the code that ran next found its
//! caches cold: at one caller the median call took 236–251 µs through the
//! gateway with the lane sleeping at once, 133–135 µs with this watch. A call
//! at one caller sleeps twice (waiting for the upstream's answer, then for the
//! client's next request), and both usually arrive within tens of µs. So before sleeping, the lane polls its
//! runtime's epoll instance (a `poll` with a zero timeout, no sleep) until an
//! event is ready or [`ServerSettings::poll_before_sleep`] has passed; then it
//! parks as before, and `epoll_wait` returns at once if the event came.
//!
//! The cost is bounded: at most one window of CPU per sleep. Under load a lane
//! rarely runs out of tasks, so it rarely polls; otherwise it polls one window
//! per wake-up, and tokio's timers tick in milliseconds, so a lane woken by
//! timers alone spends at most 5 % of a core watching (idle for 20 s, the
//! gateway used no CPU tick). Measured figures are in the book's
//! performance section.
//!
//! tokio does not expose its epoll instance. It is found by registering a
//! probe socket with the runtime and looking for the epoll instance whose
//! `/proc/self/fdinfo` lists that socket (file descriptor and inode); a
//! duplicate of it is kept. Where that fails (no `/proc`, another driver, not
//! Linux), the lane sleeps at once, as it would with the window at 0.
//!
//! [`ServerSettings::poll_before_sleep`]: crate::catalog::ServerSettings::poll_before_sleep

use std::os::fd::OwnedFd;
use std::path::Path;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Where the process's descriptors are listed.
const PROC_SELF: &str = "/proc/self";

/// One lane's window and its runtime's epoll instance, once found.
#[derive(Debug)]
pub(super) struct PollWindow {
    window: Duration,
    epoll: OnceLock<OwnedFd>,
}

impl PollWindow {
    /// A window of `window` (zero: sleep at once), not yet attached to a runtime.
    pub(super) fn new(window: Duration) -> Self {
        Self { window, epoll: OnceLock::new() }
    }

    /// Finds `runtime`'s epoll instance, so that [`Self::before_sleep`] can
    /// watch it. Returns whether the window is on.
    pub(super) fn attach(&self, runtime: &tokio::runtime::Runtime) -> bool {
        if self.window.is_zero() {
            return false;
        }
        match runtime_epoll(runtime, Path::new(PROC_SELF)) {
            Ok(epoll) => self.epoll.set(epoll).is_ok(),
            Err(reason) => {
                tracing::info!(%reason, "a connection lane sleeps without polling first");
                false
            }
        }
    }

    /// The runtime's hook before its thread parks: returns once an event is
    /// ready on its epoll instance or the window has passed.
    pub(super) fn before_sleep(&self) {
        let Some(epoll) = self.epoll.get() else { return };
        let deadline = Instant::now() + self.window;
        while !is_ready(epoll) && Instant::now() < deadline {
            std::hint::spin_loop();
        }
    }
}

/// Whether `epoll` has an event ready (its ready list is not empty). A
/// failing `poll` counts as ready: the lane then parks as it would have.
fn is_ready(epoll: &OwnedFd) -> bool {
    use rustix::event::{PollFd, PollFlags, Timespec, poll};
    let now = Timespec { tv_sec: 0, tv_nsec: 0 };
    let mut fds = [PollFd::new(epoll, PollFlags::IN)];
    poll(&mut fds, Some(&now)).map_or(true, |ready| ready > 0)
}

/// Why a runtime's epoll instance was not found.
#[derive(Debug, thiserror::Error)]
enum NotFound {
    #[error("cannot register a probe socket with the lane's runtime: {0}")]
    Probe(std::io::Error),
    #[error("cannot list the process's descriptors: {0}")]
    Proc(std::io::Error),
    #[error("no epoll instance lists the probe socket (not tokio's epoll driver?)")]
    NoMatch,
    #[error("cannot duplicate the runtime's epoll descriptor: {0}")]
    Duplicate(std::io::Error),
}

#[cfg(target_os = "linux")]
fn runtime_epoll(runtime: &tokio::runtime::Runtime, proc_self: &Path) -> Result<OwnedFd, NotFound> {
    use std::os::fd::{AsRawFd, RawFd};

    let _entered = runtime.enter();
    let (probe, _peer) = std::os::unix::net::UnixStream::pair().map_err(NotFound::Probe)?;
    probe.set_nonblocking(true).map_err(NotFound::Probe)?;
    let inode = rustix::fs::fstat(&probe).map_err(|errno| NotFound::Probe(errno.into()))?.st_ino;
    // Registers the probe with the runtime's epoll instance (dropped, it leaves).
    let probe = tokio::net::UnixStream::from_std(probe).map_err(NotFound::Probe)?;
    // fdinfo's line for a watched file: "tfd: %8d events: %8x data: %16llx pos:%lli ino:%lx sdev:%x".
    let watched = format!("tfd: {:>8} ", probe.as_raw_fd());
    let inode = format!(" ino:{inode:x} ");
    for entry in std::fs::read_dir(proc_self.join("fd")).map_err(NotFound::Proc)?.flatten() {
        let Some(fd) = entry.file_name().to_str().and_then(|name| name.parse::<RawFd>().ok()) else {
            continue;
        };
        let is_epoll =
            std::fs::read_link(entry.path()).is_ok_and(|target| target.as_os_str() == "anon_inode:[eventpoll]");
        if !is_epoll {
            continue;
        }
        let Ok(info) = std::fs::read_to_string(proc_self.join("fdinfo").join(fd.to_string())) else { continue };
        if info.lines().any(|line| line.starts_with(&watched) && line.contains(&inode)) {
            return duplicate(fd, runtime);
        }
    }
    Err(NotFound::NoMatch)
}

#[cfg(not(target_os = "linux"))]
fn runtime_epoll(_runtime: &tokio::runtime::Runtime, _proc_self: &Path) -> Result<OwnedFd, NotFound> {
    Err(NotFound::NoMatch)
}

/// A descriptor of its own for the epoll instance `fd` (the same instance).
#[cfg(target_os = "linux")]
fn duplicate(fd: std::os::fd::RawFd, _runtime: &tokio::runtime::Runtime) -> Result<OwnedFd, NotFound> {
    #[allow(unsafe_code, reason = "a descriptor found by number is borrowed to duplicate it; see SAFETY")]
    // SAFETY: `fd` is the epoll descriptor of `runtime`, which the caller
    // holds borrowed, so the runtime (which owns the descriptor) cannot close
    // it before the duplicate is made.
    let borrowed = unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) };
    rustix::io::fcntl_dupfd_cloexec(borrowed, 0).map_err(|errno| NotFound::Duplicate(errno.into()))
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::io::Write;
    use std::sync::Arc;
    use std::sync::mpsc;

    use super::*;

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap()
    }

    /// A socket registered with `runtime`, with the readiness its registration
    /// raised already taken by the runtime's driver; and its peer.
    fn quiet_socket(runtime: &tokio::runtime::Runtime) -> (tokio::net::UnixStream, std::os::unix::net::UnixStream) {
        let (socket, peer) = std::os::unix::net::UnixStream::pair().unwrap();
        socket.set_nonblocking(true).unwrap();
        let socket = runtime.block_on(async move {
            let socket = tokio::net::UnixStream::from_std(socket).unwrap();
            // A turn of the driver consumes the "writable" the registration raised.
            tokio::time::sleep(Duration::from_millis(1)).await;
            socket
        });
        (socket, peer)
    }

    #[test]
    fn the_epoll_instance_found_is_the_runtimes_own() {
        let runtime = runtime();
        let window = PollWindow::new(Duration::from_micros(50));
        assert!(window.attach(&runtime));
        let epoll = window.epoll.get().unwrap();
        let (_socket, mut peer) = quiet_socket(&runtime);
        assert!(!is_ready(epoll), "nothing happened since the driver's last turn");
        peer.write_all(b"x").unwrap();
        assert!(is_ready(epoll), "a byte for a socket of the runtime readies its epoll instance");
    }

    #[test]
    fn a_zero_window_sleeps_at_once_without_looking_for_the_epoll_instance() {
        let runtime = runtime();
        let window = PollWindow::new(Duration::ZERO);
        assert!(!window.attach(&runtime));
        assert!(window.epoll.get().is_none());
        window.before_sleep();
    }

    #[test]
    fn the_watch_ends_when_an_event_is_ready_however_long_the_window() {
        let runtime = runtime();
        let window = Arc::new(PollWindow::new(Duration::from_secs(3600)));
        assert!(window.attach(&runtime));
        let (_socket, mut peer) = quiet_socket(&runtime);
        peer.write_all(b"x").unwrap();
        let (done, returned) = mpsc::channel();
        let watching = Arc::clone(&window);
        std::thread::spawn(move || {
            watching.before_sleep();
            let _ = done.send(());
        });
        // A liveness bound, not a timing: the window is an hour.
        assert!(returned.recv_timeout(Duration::from_secs(30)).is_ok());
    }

    #[test]
    fn the_watch_ends_with_its_window_when_nothing_comes() {
        let runtime = runtime();
        let window = PollWindow::new(Duration::from_millis(2));
        assert!(window.attach(&runtime));
        let (_socket, _peer) = quiet_socket(&runtime);
        let started = Instant::now();
        window.before_sleep();
        assert!(started.elapsed() >= Duration::from_millis(2), "it watched the whole window");
    }

    #[test]
    fn where_the_descriptors_cannot_be_listed_or_none_matches_the_lane_sleeps_at_once() {
        let runtime = runtime();
        let missing = tempfile::tempdir().unwrap();
        let error = runtime_epoll(&runtime, &missing.path().join("absent")).unwrap_err();
        assert!(matches!(error, NotFound::Proc(_)), "{error}");
        let empty = tempfile::tempdir().unwrap();
        std::fs::create_dir(empty.path().join("fd")).unwrap();
        let error = runtime_epoll(&runtime, empty.path()).unwrap_err();
        assert!(matches!(error, NotFound::NoMatch), "{error}");
    }
}
