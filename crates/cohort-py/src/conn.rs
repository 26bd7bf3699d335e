//! What the Python classes of the two coded connections share: `cohort_net::LrtSocket` and
//! `cohort_net::MpLrtSocket` offer the same message calls, and [`Held`] gives them to Python
//! once (waiting in slices with the GIL released, async operations polled on the asyncio
//! loop, closing while another thread is inside a call).

use crate::errors::{self, Class, Error};
use crate::wait::{self, Outcome, Pending};
use cohort_net::{LrtSocket, MpLrtSocket, NetError};
use pyo3::prelude::*;
use pyo3::pybacked::PyBackedBytes;
use pyo3::types::PyBytes;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A coded connection's message calls.
pub(crate) trait Conn: Send + Sync + 'static {
    fn wait_connected(&self, timeout: Option<Duration>) -> Result<(), NetError>;
    fn try_send(&self, msg: &[u8]) -> Result<(), NetError>;
    fn send_async<'a>(&'a self, msg: &'a [u8]) -> impl Future<Output = Result<(), NetError>> + Send + 'a;
    fn try_recv(&self) -> Result<Option<Vec<u8>>, NetError>;
    fn recv_timeout(&self, timeout: Option<Duration>) -> Result<Vec<u8>, NetError>;
    fn recv_async(&self) -> impl Future<Output = Result<Vec<u8>, NetError>> + Send + '_;
    fn flush(&self, timeout: Option<Duration>) -> Result<(), NetError>;
    fn close(self);
}

macro_rules! conn_for {
    ($t:ty) => {
        impl Conn for $t {
            fn wait_connected(&self, timeout: Option<Duration>) -> Result<(), NetError> {
                <$t>::wait_connected(self, timeout)
            }
            fn try_send(&self, msg: &[u8]) -> Result<(), NetError> {
                <$t>::try_send(self, msg)
            }
            fn send_async<'a>(&'a self, msg: &'a [u8]) -> impl Future<Output = Result<(), NetError>> + Send + 'a {
                <$t>::send_async(self, msg)
            }
            fn try_recv(&self) -> Result<Option<Vec<u8>>, NetError> {
                <$t>::try_recv(self)
            }
            fn recv_timeout(&self, timeout: Option<Duration>) -> Result<Vec<u8>, NetError> {
                <$t>::recv_timeout(self, timeout)
            }
            fn recv_async(&self) -> impl Future<Output = Result<Vec<u8>, NetError>> + Send + '_ {
                <$t>::recv_async(self)
            }
            fn flush(&self, timeout: Option<Duration>) -> Result<(), NetError> {
                <$t>::flush(self, timeout)
            }
            fn close(self) {
                <$t>::close(self)
            }
        }
    };
}
conn_for!(LrtSocket);
conn_for!(MpLrtSocket);

fn is_timeout(e: &Error) -> bool {
    e.class == Class::Timeout
}

fn net(e: NetError) -> Error {
    e.into()
}

/// A connection a Python object holds until it is closed.
#[derive(Debug)]
pub(crate) struct Held<C>(Mutex<Option<Arc<C>>>);

impl<C: Conn> Held<C> {
    pub fn new(c: C) -> Self {
        Held(Mutex::new(Some(Arc::new(c))))
    }

    pub fn get(&self) -> Result<Arc<C>, Error> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).clone().ok_or_else(Error::closed_locally)
    }

    pub fn closed(&self) -> bool {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).is_none()
    }

    pub fn wait_connected(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<()> {
        let t = errors::timeout(timeout)?;
        wait::sliced(py, t, |slice| self.get()?.wait_connected(Some(slice)).map_err(net), is_timeout)
    }

    pub fn send(&self, py: Python<'_>, data: PyBackedBytes, timeout: Option<f64>) -> PyResult<()> {
        let t = errors::timeout(timeout)?;
        // The common case, room in the buffer, without releasing the GIL.
        match self.get()?.try_send(&data) {
            Err(NetError::WouldBlock) => {}
            r => return r.map_err(|e| net(e).into()),
        }
        let data: &[u8] = &data;
        wait::sliced(
            py,
            t,
            |slice| {
                let s = self.get()?;
                wait::block_on_for(s.send_async(data), slice).unwrap_or(Err(NetError::TimedOut)).map_err(net)
            },
            is_timeout,
        )
    }

    pub fn recv<'py>(&self, py: Python<'py>, timeout: Option<f64>) -> PyResult<Bound<'py, PyBytes>> {
        let t = errors::timeout(timeout)?;
        if let Some(m) = self.get()?.try_recv().map_err(net)? {
            return Ok(PyBytes::new(py, &m));
        }
        let m = wait::sliced(py, t, |slice| self.get()?.recv_timeout(Some(slice)).map_err(net), is_timeout)?;
        Ok(PyBytes::new(py, &m))
    }

    pub fn try_recv<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyBytes>>> {
        Ok(self.get()?.try_recv().map_err(net)?.map(|m| PyBytes::new(py, &m)))
    }

    pub fn flush(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<()> {
        let t = errors::timeout(timeout)?;
        wait::sliced(py, t, |slice| self.get()?.flush(Some(slice)).map_err(net), is_timeout)
    }

    pub fn recv_op(&self) -> PyResult<Pending> {
        let s = self.get()?;
        Ok(Pending::new(async move {
            let out: Outcome = match s.recv_async().await {
                Ok(m) => Ok(Box::new(move |py: Python<'_>| Ok(PyBytes::new(py, &m).into_any().unbind()))),
                Err(e) => Err(e.into()),
            };
            out
        }))
    }

    pub fn send_op(&self, data: Vec<u8>) -> PyResult<Pending> {
        let s = self.get()?;
        Ok(Pending::new(async move {
            let out: Outcome = match s.send_async(&data).await {
                Ok(()) => Ok(Box::new(|py: Python<'_>| Ok(py.None()))),
                Err(e) => Err(e.into()),
            };
            out
        }))
    }

    /// Closes the connection (the peer is told) and stops its driver; twice does nothing.
    pub fn close(&self, py: Python<'_>) {
        let taken = self.0.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(s) = taken {
            // Another thread may be inside a call on it; the last holder's drop closes it.
            py.detach(|| {
                if let Ok(s) = Arc::try_unwrap(s) {
                    s.close();
                }
            });
        }
    }
}

/// The `#[pymethods]` of a Python class over a [`Held`] connection in its `held` field: the
/// message calls every coded socket has, and the class's own `$extra` methods.
macro_rules! coded_pymethods {
    ($ty:ty { $($extra:tt)* }) => {
        #[pymethods]
        impl $ty {
            $($extra)*

            /// Waits (up to `timeout` seconds, or forever) until a peer has connected.
            #[pyo3(signature = (timeout=None))]
            fn wait_connected(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<()> {
                self.held.wait_connected(py, timeout)
            }

            /// Queues `data`, waiting (up to `timeout`) while the send buffer is full.
            #[pyo3(signature = (data, timeout=None))]
            fn send(&self, py: Python<'_>, data: PyBackedBytes, timeout: Option<f64>) -> PyResult<()> {
                self.held.send(py, data, timeout)
            }

            /// The next message, waiting up to `timeout` seconds (forever with `None`).
            #[pyo3(signature = (timeout=None))]
            fn recv<'py>(&self, py: Python<'py>, timeout: Option<f64>) -> PyResult<Bound<'py, PyBytes>> {
                self.held.recv(py, timeout)
            }

            /// The next message if one is waiting, else `None`.
            fn try_recv<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyBytes>>> {
                self.held.try_recv(py)
            }

            /// Waits until the peer has everything sent so far.
            #[pyo3(signature = (timeout=None))]
            fn flush(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<()> {
                self.held.flush(py, timeout)
            }

            /// `recv_async` as an operation the asyncio loop polls.
            fn recv_op(&self) -> PyResult<Pending> {
                self.held.recv_op()
            }

            /// `send_async` as an operation the asyncio loop polls.
            fn send_op(&self, data: Vec<u8>) -> PyResult<Pending> {
                self.held.send_op(data)
            }

            #[getter]
            fn closed(&self) -> bool {
                self.held.closed()
            }

            /// Closes the connection (the peer is told) and stops the driver. Messages still
            /// queued are not sent: `flush()` first. Closing twice does nothing.
            fn close(&self, py: Python<'_>) {
                self.held.close(py)
            }
        }
    };
}
pub(crate) use coded_pymethods;
