//! `MpLrtSocket`: `cohort_net::MpLrtSocket` (one coded connection over several paths, seed
//! 001's scheduler) for Python.

use crate::conn::{Held, coded_pymethods};
use crate::errors::{self, Error};
use crate::lrt::{Options, addr_tuple, config, conn_dict, frames_dict, keys_dict, net, put};
use crate::wait::Pending;
use cohort_net::MpLrtSocket;
use cohort_proto::multipath::{MpConfig, Scheduler};
use pyo3::prelude::*;
use pyo3::pybacked::PyBackedBytes;
use pyo3::types::{PyBytes, PyDict, PyList};
use std::net::SocketAddr;
use std::time::Duration;

/// One coded connection over several paths (see `cohort.MpLrtSocket`).
#[pyclass(frozen, module = "cohort._native", name = "MpLrtSocket")]
#[derive(Debug)]
pub struct PyMpLrtSocket {
    held: Held<MpLrtSocket>,
    locals: Vec<SocketAddr>,
}

/// The multipath settings Python may choose.
fn mp_config(scheduler: &str, tau_ms: f64, super_arm: usize) -> Result<MpConfig, Error> {
    if !(tau_ms.is_finite() && tau_ms > 0.0 && tau_ms <= 60_000.0) {
        return Err(Error::config("Config", format!("tau_ms {tau_ms} must be in (0, 60000]")));
    }
    let scheduler = match scheduler {
        "ldmpsp" => Scheduler::LdMpsp { tau: Duration::from_secs_f64(tau_ms / 1e3) },
        "minrtt" => Scheduler::MinRtt,
        "roundrobin" => Scheduler::RoundRobin,
        other => {
            return Err(Error::config(
                "Config",
                format!("scheduler {other:?}: one of \"ldmpsp\", \"minrtt\", \"roundrobin\""),
            ));
        }
    };
    Ok(MpConfig { scheduler, super_arm, ..MpConfig::default() })
}

coded_pymethods!(PyMpLrtSocket {
    #[staticmethod]
    #[pyo3(signature = (paths, *, secret, team, sender_id, dscp=None, priority=None, handshake_timeout=5.0, idle_timeout=10.0, rate_mbps=None, estimate_rate=false, scheduler="ldmpsp", tau_ms=20.0, super_arm=0))]
    #[allow(clippy::too_many_arguments)]
    fn connect(
        py: Python<'_>,
        paths: Vec<(String, String)>,
        secret: PyBackedBytes,
        team: u32,
        sender_id: u32,
        dscp: Option<u8>,
        priority: Option<u32>,
        handshake_timeout: f64,
        idle_timeout: f64,
        rate_mbps: Option<f64>,
        estimate_rate: bool,
        scheduler: &str,
        tau_ms: f64,
        super_arm: usize,
    ) -> PyResult<Self> {
        let paths = paths
            .iter()
            .map(|(l, p)| Ok((errors::address(l)?, errors::address(p)?)))
            .collect::<Result<Vec<_>, Error>>()?;
        let o = Options { dscp, priority, handshake_timeout, idle_timeout, rate_mbps, estimate_rate };
        let (cfg, mp) = (config(&secret, team, sender_id, o)?, mp_config(scheduler, tau_ms, super_arm)?);
        // As `LrtSocket.connect`: waited for in slices, so Ctrl-C ends it.
        let s = Self::new(py.detach(|| MpLrtSocket::start_connect(&paths, cfg, mp)).map_err(net)?);
        s.held.wait_connected(py, None)?;
        Ok(s)
    }

    #[staticmethod]
    #[pyo3(signature = (addrs, *, secret, team, sender_id, dscp=None, priority=None, handshake_timeout=5.0, idle_timeout=10.0, rate_mbps=None, estimate_rate=false, scheduler="ldmpsp", tau_ms=20.0, super_arm=0))]
    #[allow(clippy::too_many_arguments)]
    fn listen(
        py: Python<'_>,
        addrs: Vec<String>,
        secret: PyBackedBytes,
        team: u32,
        sender_id: u32,
        dscp: Option<u8>,
        priority: Option<u32>,
        handshake_timeout: f64,
        idle_timeout: f64,
        rate_mbps: Option<f64>,
        estimate_rate: bool,
        scheduler: &str,
        tau_ms: f64,
        super_arm: usize,
    ) -> PyResult<Self> {
        let addrs = addrs.iter().map(|a| errors::address(a)).collect::<Result<Vec<_>, Error>>()?;
        let o = Options { dscp, priority, handshake_timeout, idle_timeout, rate_mbps, estimate_rate };
        let (cfg, mp) = (config(&secret, team, sender_id, o)?, mp_config(scheduler, tau_ms, super_arm)?);
        let s = py.detach(|| MpLrtSocket::listen(&addrs, cfg, mp)).map_err(net)?;
        Ok(Self::new(s))
    }

    /// Counters: the connection's (`conn`), the multipath layer's, and one dict per path.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let sock = self.held.get()?;
        let s = sock.stats();
        let peers = sock.peer_addrs();
        let d = PyDict::new(py);
        d.set_item("conn", conn_dict(py, &s.conn)?)?;
        put!(d, s, datagrams_sent, datagrams_received, rejected_frames, foreign_sender, no_peer_address);
        let m = &s.mp;
        put!(d, m, rounds, malformed, clones_dropped, path_acks_sent);
        let paths = PyList::empty(py);
        for (i, p) in s.mp.paths.iter().enumerate() {
            let pd = PyDict::new(py);
            pd.set_item("local", self.locals.get(i).copied().map(addr_tuple))?;
            pd.set_item("peer", peers.get(i).copied().flatten().map(addr_tuple))?;
            put!(pd, p, up, sent, bytes_sent, clones_sent, delivered, lost, cwnd, srtt_ms, queueing_ms, loss, failures);
            pd.set_item("arm_rounds", p.arm.u)?;
            pd.set_item("arm_reward", p.arm.v)?;
            paths.append(pd)?;
        }
        d.set_item("paths", paths)?;
        d.set_item("frames", frames_dict(py, &s.frames)?)?;
        d.set_item("keys", keys_dict(py, &s.keys)?)?;
        Ok(d)
    }

    /// Each path's local address.
    #[getter]
    fn local_addrs(&self) -> Vec<(String, u16)> {
        self.locals.iter().copied().map(addr_tuple).collect()
    }

    /// Each path's peer address, as far as known.
    #[getter]
    fn peer_addrs(&self) -> PyResult<Vec<Option<(String, u16)>>> {
        Ok(self.held.get()?.peer_addrs().into_iter().map(|a| a.map(addr_tuple)).collect())
    }
});

impl PyMpLrtSocket {
    /// The Rust socket, while open.
    pub(crate) fn socket(&self) -> Result<std::sync::Arc<MpLrtSocket>, Error> {
        self.held.get()
    }

    fn new(s: MpLrtSocket) -> Self {
        let locals = s.local_addrs().to_vec();
        PyMpLrtSocket { held: Held::new(s), locals }
    }
}
