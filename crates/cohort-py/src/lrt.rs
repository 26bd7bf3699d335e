//! `LrtSocket`: `cohort_net::LrtSocket` (the coded transport) for Python, and `LrtListener`:
//! `cohort_net::LrtListener` (one port, connections from many peers).

use crate::conn::{Held, coded_pymethods};
use crate::errors::{self, Class, Error};
use crate::wait::{self, Pending};
use cohort_net::{LrtListener, LrtSocket, NetError, SocketConfig, SocketStats};
use cohort_proto::lrt::ConnStats;
use pyo3::prelude::*;
use pyo3::pybacked::PyBackedBytes;
use pyo3::types::{PyBytes, PyDict};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

/// One LRT connection over UDP (see `cohort.LrtSocket` for the documented wrapper).
#[pyclass(frozen, module = "cohort._native", name = "LrtSocket")]
#[derive(Debug)]
pub struct PyLrtSocket {
    held: Held<LrtSocket>,
    local: SocketAddr,
}

/// The keyword options every coded socket's `listen`, `connect` and `bind` share.
pub(crate) struct Options {
    pub dscp: Option<u8>,
    pub priority: Option<u32>,
    pub handshake_timeout: f64,
    pub idle_timeout: f64,
    pub rate_mbps: Option<f64>,
    pub estimate_rate: bool,
}

pub(crate) fn config(secret: &[u8], team: u32, sender_id: u32, o: Options) -> Result<SocketConfig, Error> {
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

pub(crate) fn addr_tuple(a: SocketAddr) -> (String, u16) {
    (a.ip().to_string(), a.port())
}

pub(crate) fn net(e: NetError) -> Error {
    e.into()
}

impl PyLrtSocket {
    fn new(s: LrtSocket) -> Self {
        let local = s.local_addr();
        PyLrtSocket { held: Held::new(s), local }
    }
}

coded_pymethods!(PyLrtSocket {
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
        // The handshake is waited for in slices, so Ctrl-C ends a connect to a robot that
        // does not answer (the socket is dropped with the exception).
        let s = Self::new(py.detach(|| LrtSocket::start_connect(addr, cfg)).map_err(net)?);
        s.held.wait_connected(py, None)?;
        Ok(s)
    }

    /// Counters so far.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        stats_dict(py, &self.held.get()?.stats())
    }

    #[getter]
    fn local_addr(&self) -> (String, u16) {
        addr_tuple(self.local)
    }

    #[getter]
    fn peer_addr(&self) -> PyResult<Option<(String, u16)>> {
        Ok(self.held.get()?.peer_addr().map(addr_tuple))
    }
});

macro_rules! put {
    ($d:expr, $s:expr, $($f:ident),+ $(,)?) => {
        $( $d.set_item(stringify!($f), $s.$f)?; )+
    };
}
pub(crate) use put;

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

/// The connection's own counters (`stats()["conn"]`).
pub(crate) fn conn_dict<'py>(py: Python<'py>, c: &ConnStats) -> PyResult<Bound<'py, PyDict>> {
    let conn = PyDict::new(py);
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
    Ok(conn)
}

/// The session key exchange's counters (`stats()["keys"]`).
pub(crate) fn keys_dict<'py>(py: Python<'py>, k: &cohort_net::KeyExchangeStats) -> PyResult<Bound<'py, PyDict>> {
    let keys = PyDict::new(py);
    put!(keys, k, handshakes_sent, handshakes_refused, half_open_dropped, no_session);
    Ok(keys)
}

fn stats_dict<'py>(py: Python<'py>, s: &SocketStats) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("conn", conn_dict(py, &s.conn)?)?;
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
    d.set_item("keys", keys_dict(py, &s.keys)?)?;
    Ok(d)
}
