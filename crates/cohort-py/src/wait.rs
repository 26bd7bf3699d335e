//! Waiting without holding the GIL, and the bridge from the sockets' Rust futures to asyncio.
//!
//! Blocking calls release the GIL and wait in slices of at most [`SLICE`]: between slices the
//! thread takes the GIL back for a moment to run Python's signal handlers, so Ctrl-C
//! interrupts a `recv()` that waits forever. A slice ends early when the socket's driver
//! reports what the call waits for, so slicing adds no delay.
//!
//! Async calls are the sockets' own Rust futures (`recv_async`, `send_async`, ...), polled on
//! the asyncio event loop's thread by [`Pending::poll`]. Their waker writes to an `eventfd`
//! ([`Wakeup`]) that the loop watches with `add_reader`; the loop then polls again. So the
//! socket's driver thread never takes the GIL (it would stall the protocol's timers behind
//! Python code), no thread is parked per awaiting task, and a cancelled task simply drops its
//! future: a message is taken from the socket only inside a poll that also hands it to the
//! loop, never by a thread the task no longer waits for.

use crate::errors::Error;
use pyo3::prelude::*;
use std::future::Future;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant};

/// Longest a blocking call waits without looking at Python's signals.
pub const SLICE: Duration = Duration::from_millis(100);

/// Calls `attempt(slice)` with the GIL released until it gives anything but a timeout, or
/// `timeout` passes; Python's signal handlers run between slices.
pub fn sliced<T: Send>(
    py: Python<'_>,
    timeout: Option<Duration>,
    mut attempt: impl FnMut(Duration) -> Result<T, Error> + Send,
    is_timeout: impl Fn(&Error) -> bool,
) -> PyResult<T> {
    let deadline = timeout.map(|t| Instant::now() + t);
    loop {
        let slice = match deadline {
            Some(d) => SLICE.min(d.saturating_duration_since(Instant::now())),
            None => SLICE,
        };
        match py.detach(|| attempt(slice)) {
            Err(e) if is_timeout(&e) && deadline.is_none_or(|d| Instant::now() < d) => py.check_signals()?,
            r => return r.map_err(PyErr::from),
        }
    }
}

struct ThreadWaker(std::thread::Thread);

impl Wake for ThreadWaker {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }
}

/// Polls `f` on this thread until it completes or `dur` passes (`None`; `f` is dropped).
pub fn block_on_for<F: Future>(f: F, dur: Duration) -> Option<F::Output> {
    let deadline = Instant::now() + dur;
    let waker = Waker::from(Arc::new(ThreadWaker(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut f = std::pin::pin!(f);
    loop {
        if let Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return Some(v);
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return None;
        }
        std::thread::park_timeout(left);
    }
}

/// An `eventfd` an asyncio loop watches; the wakers of pending futures write to it.
#[derive(Debug)]
struct EventFd(OwnedFd);

impl Wake for EventFd {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        let one: u64 = 1;
        // A full counter (2^64 - 2 wakes unread) or EAGAIN leaves the fd readable anyway.
        // SAFETY: writes 8 bytes from a live u64 to a descriptor this struct owns.
        let _ = unsafe { libc::write(self.0.as_raw_fd(), (&raw const one).cast(), 8) };
    }
}

/// The wake-up channel of one asyncio event loop: watch `fileno()` for reading, call
/// `drain()`, then poll the pending operations again.
#[pyclass(frozen, module = "cohort._native")]
#[derive(Debug)]
pub struct Wakeup {
    fd: Arc<EventFd>,
    waker: Waker,
}

#[pymethods]
impl Wakeup {
    #[new]
    fn new() -> PyResult<Self> {
        // SAFETY: eventfd returns a new descriptor (or -1), which OwnedFd then owns.
        let raw = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if raw < 0 {
            return Err(std::io::Error::last_os_error().into());
        }
        // SAFETY: `raw` is a fresh, valid descriptor nobody else owns.
        let fd = Arc::new(EventFd(unsafe { OwnedFd::from_raw_fd(raw) }));
        Ok(Wakeup { waker: Waker::from(fd.clone()), fd })
    }

    fn fileno(&self) -> i32 {
        self.fd.0.as_raw_fd()
    }

    /// Reads the wake-ups so far (the descriptor is no longer readable until the next).
    fn drain(&self) {
        let mut n: u64 = 0;
        // SAFETY: reads 8 bytes into a live u64 from a descriptor this object owns.
        let _ = unsafe { libc::read(self.fd.0.as_raw_fd(), (&raw mut n).cast(), 8) };
    }

    /// Wakes the loop as a socket would (for tests of the bridge).
    fn wake(&self) {
        self.waker.wake_by_ref();
    }
}

/// What a finished operation gives Python.
pub type Outcome = Result<Box<dyn FnOnce(Python<'_>) -> PyResult<Py<PyAny>> + Send>, Error>;

type OpFuture = Pin<Box<dyn Future<Output = Outcome> + Send>>;

enum State {
    Running(OpFuture),
    Done(Outcome),
    Taken,
}

/// One asynchronous socket operation, polled by the asyncio loop (see the module docs).
#[pyclass(frozen, module = "cohort._native")]
pub struct Pending {
    state: Mutex<State>,
}

impl std::fmt::Debug for Pending {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pending").finish_non_exhaustive()
    }
}

impl Pending {
    pub fn new(f: impl Future<Output = Outcome> + Send + 'static) -> Self {
        Pending { state: Mutex::new(State::Running(Box::pin(f))) }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[pymethods]
impl Pending {
    /// Polls the operation once; `True` once it has finished (collect it with `result()`).
    /// Until then the loop's `wakeup` becomes readable when polling again may help.
    fn poll(&self, wakeup: &Wakeup) -> bool {
        let mut g = self.lock();
        let State::Running(f) = &mut *g else {
            return true;
        };
        let mut cx = Context::from_waker(&wakeup.waker);
        match f.as_mut().poll(&mut cx) {
            Poll::Ready(out) => {
                *g = State::Done(out);
                true
            }
            Poll::Pending => false,
        }
    }

    /// The finished operation's value, or its error raised (once).
    fn result(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let taken = std::mem::replace(&mut *self.lock(), State::Taken);
        match taken {
            State::Done(Ok(make)) => make(py),
            State::Done(Err(e)) => Err(e.into()),
            State::Running(f) => {
                *self.lock() = State::Running(f);
                Err(Error::new(crate::errors::Class::State, "Pending", "the operation has not finished").into())
            }
            State::Taken => {
                Err(Error::new(crate::errors::Class::State, "Taken", "the result was already collected").into())
            }
        }
    }

    /// Drops an unfinished operation (a cancelled task): nothing more happens on its behalf.
    /// A finished one keeps its result.
    fn cancel(&self) {
        let mut g = self.lock();
        if matches!(*g, State::Running(_)) {
            *g = State::Taken;
        }
    }

    /// Whether the operation finished with a result not yet collected.
    fn has_result(&self) -> bool {
        matches!(*self.lock(), State::Done(_))
    }
}
