//! State shared between a socket's handle and its driver thread: the protocol machine behind
//! a mutex, and the ways to wait for the driver to change it (condvar for blocking callers,
//! wakers for async ones).

use mio::Waker;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::task::Poll;
use std::time::Instant;

#[derive(Debug)]
pub(crate) struct Shared<T> {
    inner: Mutex<T>,
    changed: Condvar,
    /// Bumped at every change the driver reports; async waiters compare against it.
    generation: AtomicU64,
    /// Tasks waiting for a change.
    tasks: Mutex<Vec<std::task::Waker>>,
    /// Wakes the driver (new work for it).
    /// Wakes the driver's poll; one per poll, so the connections one driver serves share it.
    pub waker: std::sync::Arc<Waker>,
    pub clock: cohort_time::Clock,
}

/// How a wait ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Wait {
    Done,
    TimedOut,
    /// The driver stopped first.
    Stopped,
}

impl<T> Shared<T> {
    pub fn new(inner: T, waker: impl Into<std::sync::Arc<Waker>>) -> Self {
        Shared {
            inner: Mutex::new(inner),
            changed: Condvar::new(),
            generation: AtomicU64::new(0),
            tasks: Mutex::new(Vec::new()),
            waker: waker.into(),
            clock: cohort_time::Clock::start(),
        }
    }

    pub fn lock(&self) -> MutexGuard<'_, T> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Wakes blocking and async waiters.
    pub fn notify(&self) {
        self.generation.fetch_add(1, Ordering::AcqRel);
        self.changed.notify_all();
        let tasks = std::mem::take(&mut *self.tasks.lock().unwrap_or_else(|p| p.into_inner()));
        for t in tasks {
            t.wake();
        }
    }

    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// Blocks until `done` holds, the driver stops (`stopped`), or `deadline` passes. `done`
    /// runs under the lock, first before any wait.
    pub fn wait_until(
        &self,
        deadline: Option<Instant>,
        stopped: impl Fn(&T) -> bool,
        mut done: impl FnMut(&mut T) -> bool,
    ) -> (MutexGuard<'_, T>, Wait) {
        let mut g = self.lock();
        loop {
            if done(&mut g) {
                return (g, Wait::Done);
            }
            if stopped(&g) {
                return (g, Wait::Stopped);
            }
            g = match deadline {
                None => self.changed.wait(g).unwrap_or_else(|p| p.into_inner()),
                Some(d) => {
                    let left = d.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        return (g, Wait::TimedOut);
                    }
                    self.changed.wait_timeout(g, left).unwrap_or_else(|p| p.into_inner()).0
                }
            };
        }
    }

    /// Resolves once the driver reports a change after generation `seen` (`true`), or at
    /// once if it stopped (`false`). Works on any executor: the driver thread wakes the task.
    pub async fn changed_since(&self, seen: u64, stopped: impl Fn(&T) -> bool) -> bool {
        std::future::poll_fn(move |cx| {
            if self.generation() != seen {
                return Poll::Ready(true);
            }
            if stopped(&self.lock()) {
                return Poll::Ready(false);
            }
            self.tasks.lock().unwrap_or_else(|p| p.into_inner()).push(cx.waker().clone());
            // A change between the first check and the registration would be missed otherwise.
            if self.generation() != seen { Poll::Ready(true) } else { Poll::Pending }
        })
        .await
    }
}

/// Reads every datagram waiting on `sock` and hands each to `f` with its source. Errors other
/// than "nothing left" (ICMP errors such as port unreachable surface here on Linux) are logged
/// and skipped: the protocol's timers decide whether a peer is gone.
pub(crate) fn drain(sock: &mio::net::UdpSocket, buf: &mut [u8], mut f: impl FnMut(&mut [u8], std::net::SocketAddr)) {
    loop {
        match sock.recv_from(buf) {
            Ok((n, from)) => f(&mut buf[..n], from),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => tracing::debug!(%e, "recv_from"),
        }
    }
}

/// Waits in `poll` for the next events (a signal's interruption counts as none).
pub(crate) fn wait_events(poll: &mut mio::Poll, events: &mut mio::Events) -> std::io::Result<()> {
    match poll.poll(events, None) {
        Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {
            events.clear();
            Ok(())
        }
        r => r,
    }
}
