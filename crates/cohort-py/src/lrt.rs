//! `LrtSocket`: `cohort_net::LrtSocket` (the coded transport) for Python, and `LrtListener`:
//! `cohort_net::LrtListener` (one port, connections from many peers).

use crate::errors::{self, Class, Error};
use crate::wait::{self, Outcome, Pending};
use cohort_net::{LrtListener, LrtSocket, NetError, SocketConfig, SocketStats};
use pyo3::prelude::*;
use pyo3::pybacked::PyBackedBytes;
use pyo3::types::{PyBytes, PyDict};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

/// One LRT connection over UDP (see `cohort.LrtSocket` for the documented wrapper).
#[pyclass(frozen, module = "cohort._native", name = "LrtSocket")]
#[derive(Debug)]
pub struct PyLrtSocket {
    sock: Mutex<Option<Arc<LrtSocket>>>,
    local: SocketAddr,
}

/// The keyword options `listen` and `connect` share.
struct Options {
    dscp: Option<u8>,
    priority: Option<u32>,
    handshake_timeout: f64,
    idle_timeout: f64,
    rate_mbps: Option<f64>,
    estimate_rate: bool,
}

fn config(secret: &[u8], team: u32, sender_id: u32, o: Options) -> Result<SocketConfig, Error> {
    let Options { dscp, priority, handshake_timeout, idle_timeout, rate_mbps, estimate_rate } = o;
    let mut c = SocketConfig::new(secret, team, sender_id);
    if let Some(r) = rate_mbps {
        if !(r.is_finite() && r > 0.0 && r <= 1e6) {
            return Err(Error::config("Config", format!("rate_mbps {r} must be in (0, 1e6]")));
        }
        c.lrt.rate_bps = (r * 1e6) as u64;
    }
    c.lrt.estimate_rate = estimate_rate;
    if let Some(d) = dscp
        && d > 63
    {
        return Err(Error::config("Config", format!("dscp {d} exceeds 63")));
    }
    c.dscp = dscp;
    c.priority = priority;
    c.lrt.handshake_timeout = errors::seconds("handshake_timeout", handshake_timeout)?;
    c.lrt.idle_timeout = errors::seconds("idle_timeout", idle_timeout)?;
    Ok(c)
}

fn is_timeout(e: &Error) -> bool {
    e.class == Class::Timeout
}

fn addr_tuple(a: SocketAddr) -> (String, u16) {
    (a.ip().to_string(), a.port())
}

fn net(e: NetError) -> Error {
    e.into()
}

impl PyLrtSocket {
    fn new(s: LrtSocket) -> Self {
        let local = s.local_addr();
        PyLrtSocket { sock: Mutex::new(Some(Arc::new(s))), local }
    }

    fn get(&self) -> Result<Arc<LrtSocket>, Error> {
        self.sock.lock().unwrap_or_else(|p| p.into_inner()).clone().ok_or_else(Error::closed_locally)
    }
}

#[pymethods]
impl PyLrtSocket {
    #[staticmethod]
    #[pyo3(signature = (addr, *, secret, team, sender_id, dscp=None, priority=None, handshake_timeout=5.0, idle_timeout=10.0, rate_mbps=None, estimate_rate=false))]
    #[allow(clippy::too_many_arguments)]
    fn listen(
        py: Python<'_>,
        addr: &str,
        secret: PyBackedBytes,
        team: u32,
        sender_id: u32,
        dscp: Option<u8>,
        priority: Option<u32>,
        handshake_timeout: f64,
        idle_timeout: f64,
        rate_mbps: Option<f64>,
        estimate_rate: bool,
    ) -> PyResult<Self> {
        let addr = errors::address(addr)?;
        let o = Options { dscp, priority, handshake_timeout, idle_timeout, rate_mbps, estimate_rate };
        let cfg = config(&secret, team, sender_id, o)?;
        let s = py.detach(|| LrtSocket::listen(addr, cfg)).map_err(net)?;
        Ok(Self::new(s))
    }

    #[staticmethod]
    #[pyo3(signature = (addr, *, secret, team, sender_id, dscp=None, priority=None, handshake_timeout=5.0, idle_timeout=10.0, rate_mbps=None, estimate_rate=false))]
    #[allow(clippy::too_many_arguments)]
    fn connect(
        py: Python<'_>,
        addr: &str,
        secret: PyBackedBytes,
        team: u32,
        sender_id: u32,
        dscp: Option<u8>,
        priority: Option<u32>,
        handshake_timeout: f64,
        idle_timeout: f64,
        rate_mbps: Option<f64>,
        estimate_rate: bool,
    ) -> PyResult<Self> {
        let addr = errors::address(addr)?;
        let o = Options { dscp, priority, handshake_timeout, idle_timeout, rate_mbps, estimate_rate };
        let cfg = config(&secret, team, sender_id, o)?;
        let s = py.detach(|| LrtSocket::connect(addr, cfg)).map_err(net)?;
        Ok(Self::new(s))
    }

    /// Waits (up to `timeout` seconds, or forever) until a peer has connected.
    #[pyo3(signature = (timeout=None))]
    fn wait_connected(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<()> {
        let t = errors::timeout(timeout)?;
        wait::sliced(py, t, |slice| self.get()?.wait_connected(Some(slice)).map_err(net), is_timeout)
    }

    /// Queues `data`, waiting (up to `timeout`) while the send buffer is full.
    #[pyo3(signature = (data, timeout=None))]
    fn send(&self, py: Python<'_>, data: PyBackedBytes, timeout: Option<f64>) -> PyResult<()> {
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

    /// The next message, waiting up to `timeout` seconds (forever with `None`).
    #[pyo3(signature = (timeout=None))]
    fn recv<'py>(&self, py: Python<'py>, timeout: Option<f64>) -> PyResult<Bound<'py, PyBytes>> {
        let t = errors::timeout(timeout)?;
        if let Some(m) = self.get()?.try_recv().map_err(net)? {
            return Ok(PyBytes::new(py, &m));
        }
        let m = wait::sliced(py, t, |slice| self.get()?.recv_timeout(Some(slice)).map_err(net), is_timeout)?;
        Ok(PyBytes::new(py, &m))
    }

    /// The next message if one is waiting, else `None`.
    fn try_recv<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyBytes>>> {
        Ok(self.get()?.try_recv().map_err(net)?.map(|m| PyBytes::new(py, &m)))
    }

    /// Waits until the peer has everything sent so far.
    #[pyo3(signature = (timeout=None))]
    fn flush(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<()> {
        let t = errors::timeout(timeout)?;
        wait::sliced(py, t, |slice| self.get()?.flush(Some(slice)).map_err(net), is_timeout)
    }

    /// `recv_async` as an operation the asyncio loop polls.
    fn recv_op(&self) -> PyResult<Pending> {
        let s = self.get()?;
        Ok(Pending::new(async move {
            let out: Outcome = match s.recv_async().await {
                Ok(m) => Ok(Box::new(move |py: Python<'_>| Ok(PyBytes::new(py, &m).into_any().unbind()))),
                Err(e) => Err(e.into()),
            };
            out
        }))
    }

    /// `send_async` as an operation the asyncio loop polls.
    fn send_op(&self, data: Vec<u8>) -> PyResult<Pending> {
        let s = self.get()?;
        Ok(Pending::new(async move {
            let out: Outcome = match s.send_async(&data).await {
                Ok(()) => Ok(Box::new(|py: Python<'_>| Ok(py.None()))),
                Err(e) => Err(e.into()),
            };
            out
        }))
    }

    /// Counters so far.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        stats_dict(py, &self.get()?.stats())
    }

    #[getter]
    fn local_addr(&self) -> (String, u16) {
        addr_tuple(self.local)
    }

    #[getter]
    fn peer_addr(&self) -> PyResult<Option<(String, u16)>> {
        Ok(self.get()?.peer_addr().map(addr_tuple))
    }

    #[getter]
    fn closed(&self) -> bool {
        self.sock.lock().unwrap_or_else(|p| p.into_inner()).is_none()
    }

    /// Closes the connection (the peer is told) and stops the driver. Messages still queued
    /// are not sent: `flush()` first. Closing twice does nothing.
    fn close(&self, py: Python<'_>) {
        let taken = self.sock.lock().unwrap_or_else(|p| p.into_inner()).take();
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

macro_rules! put {
    ($d:expr, $s:expr, $($f:ident),+ $(,)?) => {
        $( $d.set_item(stringify!($f), $s.$f)?; )+
    };
}

/// Accepts LRT connections from many peers on one UDP port (see `cohort.LrtListener`).
#[pyclass(frozen, module = "cohort._native", name = "LrtListener")]
#[derive(Debug)]
pub struct PyLrtListener {
    inner: Mutex<Option<Arc<LrtListener>>>,
    local: SocketAddr,
}

impl PyLrtListener {
    fn get(&self) -> Result<Arc<LrtListener>, Error> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner()).clone().ok_or_else(Error::closed_locally)
    }
}

#[pymethods]
impl PyLrtListener {
    #[staticmethod]
    #[pyo3(signature = (addr, *, secret, team, sender_id, dscp=None, priority=None, handshake_timeout=5.0, idle_timeout=10.0, rate_mbps=None, estimate_rate=false, max_connections=256))]
    #[allow(clippy::too_many_arguments)]
    fn bind(
        py: Python<'_>,
        addr: &str,
        secret: PyBackedBytes,
        team: u32,
        sender_id: u32,
        dscp: Option<u8>,
        priority: Option<u32>,
        handshake_timeout: f64,
        idle_timeout: f64,
        rate_mbps: Option<f64>,
        estimate_rate: bool,
        max_connections: usize,
    ) -> PyResult<Self> {
        let addr = errors::address(addr)?;
        let o = Options { dscp, priority, handshake_timeout, idle_timeout, rate_mbps, estimate_rate };
        let cfg = config(&secret, team, sender_id, o)?;
        let l = py.detach(|| LrtListener::bind_with_limit(addr, cfg, max_connections)).map_err(net)?;
        let local = l.local_addr();
        Ok(PyLrtListener { inner: Mutex::new(Some(Arc::new(l))), local })
    }

    /// The next connection, waiting up to `timeout` seconds (forever with None).
    #[pyo3(signature = (timeout=None))]
    fn accept(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<PyLrtSocket> {
        let t = errors::timeout(timeout)?;
        let l = self.get()?;
        let s = wait::sliced(py, t, |slice| l.accept(Some(slice)).map_err(net), is_timeout)?;
        Ok(PyLrtSocket::new(s))
    }

    /// Counters: connections made and ended, datagrams for no connection, peers refused
    /// beyond `max_connections`, datagrams received, and connections open now.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let (s, open) = self.get()?.stats();
        let d = PyDict::new(py);
        put!(d, s, connections, ended, unrouted, refused, datagrams_received);
        d.set_item("open", open)?;
        Ok(d)
    }

    #[getter]
    fn local_addr(&self) -> (String, u16) {
        addr_tuple(self.local)
    }

    #[getter]
    fn closed(&self) -> bool {
        self.inner.lock().unwrap_or_else(|p| p.into_inner()).is_none()
    }

    /// Closes every connection of the port (their peers are told) and stops serving it.
    /// Connections already accepted end too. Closing twice does nothing.
    fn close(&self, py: Python<'_>) {
        let taken = self.inner.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(l) = taken {
            // Another thread may be inside `accept`; the last holder's drop closes it.
            py.detach(|| drop(l));
        }
    }
}

pub(crate) fn frames_dict<'py>(
    py: Python<'py>,
    f: &cohort_wire::frame::RejectCounters,
) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    put!(
        d,
        f,
        accepted,
        truncated,
        bad_version,
        wrong_team,
        auth_failed,
        replayed,
        too_old,
        stale_life,
        new_lives,
        senders_evicted
    );
    Ok(d)
}

fn stats_dict<'py>(py: Python<'py>, s: &SocketStats) -> PyResult<Bound<'py, PyDict>> {
    let conn = PyDict::new(py);
    let c = &s.conn;
    put!(
        conn,
        c,
        packets_sent,
        bytes_sent,
        source_sent,
        repair_sent,
        repair_timer_sent,
        repair_probe_sent,
        repair_feedback_sent,
        repair_signal_sent,
        acks_sent,
        full_rank_acks_sent,
        packets_received,
        bytes_received,
        symbols_received,
        malformed,
        out_of_date,
        symbols_rejected,
        messages_sent,
        messages_received,
        coders_opened,
        loss_estimate,
        redundancy,
        srtt_us,
        rate_bps
    );
    let d = PyDict::new(py);
    d.set_item("conn", conn)?;
    put!(
        d,
        s,
        datagrams_sent,
        wire_bytes_sent,
        datagrams_received,
        wire_bytes_received,
        rejected_frames,
        foreign_sender,
        migrations,
        path_challenges,
        path_responses,
        path_refused
    );
    d.set_item("frames", frames_dict(py, &s.frames)?)?;
    let keys = PyDict::new(py);
    let k = &s.keys;
    put!(keys, k, handshakes_sent, handshakes_refused, half_open_dropped, no_session);
    d.set_item("keys", keys)?;
    Ok(d)
}
