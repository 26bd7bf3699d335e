//! `PathStatsService`: `cohort_net::federated::PathStatsService` (per-path bandit statistics
//! shared with the team over a group, seed 001's federated start) for Python.

use crate::errors::{self, Error};
use crate::group::PyGroupSocket;
use crate::mp::PyMpLrtSocket;
use cohort_net::federated::PathStatsService;
use cohort_proto::multipath::bandit::ArmStats;
use cohort_proto::multipath::federated::PathKey;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::sync::{Arc, Mutex};

/// A path's statistics as Python sees them: MS-UCB's rounds and mean reward.
type Stats = (f64, f64);

/// This robot's side of the sharing (see `cohort.PathStatsService`).
#[pyclass(frozen, module = "cohort._native", name = "PathStatsService")]
#[derive(Debug)]
pub struct PyPathStatsService {
    /// Shared with a `wait_view` under way, which must not hold the lock while it waits
    /// (`close` from another thread would wait up to its timeout).
    svc: Mutex<Option<Arc<PathStatsService>>>,
}

fn keys(keys: &[String]) -> Result<Vec<PathKey>, Error> {
    keys.iter().map(|k| PathKey::new(k).map_err(|e| Error::config("Stats", e.to_string()))).collect()
}

fn pair(s: Option<ArmStats>) -> Option<Stats> {
    s.map(|a| (a.u, a.v))
}

impl PyPathStatsService {
    fn with<T>(&self, f: impl FnOnce(&PathStatsService) -> Result<T, Error>) -> Result<T, Error> {
        match self.svc.lock().unwrap_or_else(|p| p.into_inner()).as_ref() {
            Some(s) => f(s),
            None => Err(Error::closed_locally()),
        }
    }
}

#[pymethods]
impl PyPathStatsService {
    /// Takes over `group` (its object reports closed from then on) and takes part in the
    /// sharing rounds on it.
    #[staticmethod]
    fn start(group: &PyGroupSocket) -> PyResult<Self> {
        let svc = PathStatsService::start_shared(group.take()?).map_err(Error::from)?;
        Ok(PyPathStatsService { svc: Mutex::new(Some(Arc::new(svc))) })
    }

    /// Records this robot's statistics of path `key`, measured now.
    fn publish(&self, key: &str, rounds: f64, reward: f64) -> PyResult<()> {
        let k = keys(&[key.to_string()])?.remove(0);
        Ok(self.with(|s| Ok(s.publish(&k, ArmStats { u: rounds, v: reward })?))?)
    }

    /// Records what `sock` learned of each of its paths, path `i` under `keys[i]`.
    fn publish_socket(&self, sock: &PyMpLrtSocket, keys: Vec<String>) -> PyResult<()> {
        let (k, sock) = (self::keys(&keys)?, sock.socket()?);
        Ok(self.with(|s| Ok(s.publish_socket(&sock, &k)?))?)
    }

    /// What this robot measured itself of `key`.
    fn own(&self, key: &str) -> PyResult<Option<Stats>> {
        let k = keys(&[key.to_string()])?.remove(0);
        Ok(self.with(|s| Ok(pair(s.own(&k))))?)
    }

    /// What each of `keys` would start from: the team's view, or this robot's own figures.
    fn known(&self, keys: Vec<String>) -> PyResult<Vec<Option<Stats>>> {
        let k = self::keys(&keys)?;
        Ok(self.with(|s| Ok(s.known(&k).into_iter().map(pair).collect()))?)
    }

    /// Waits up to `timeout` seconds for a view of the team; whether one came.
    fn wait_view(&self, py: Python<'_>, timeout: f64) -> PyResult<bool> {
        let t = errors::seconds("timeout", timeout)?;
        let svc = self.svc.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let Some(s) = svc else { return Err(Error::closed_locally().into()) };
        Ok(py.detach(|| s.wait_view(t)))
    }

    /// Starts each path of `sock` from what is known of `keys[i]`; what each started from.
    fn start_paths(&self, sock: &PyMpLrtSocket, keys: Vec<String>) -> PyResult<Vec<Option<Stats>>> {
        let (k, sock) = (self::keys(&keys)?, sock.socket()?);
        Ok(self.with(|s| Ok(s.start_paths(&sock, &k)?.into_iter().map(pair).collect()))?)
    }

    /// Counters: views adopted, sharing rounds run, reports gathered, malformed messages.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let st = self.with(|s| Ok(s.stats()))?;
        let d = PyDict::new(py);
        d.set_item("views", st.views)?;
        d.set_item("rounds", st.rounds)?;
        d.set_item("reports", st.reports)?;
        d.set_item("malformed", st.malformed)?;
        Ok(d)
    }

    #[getter]
    fn closed(&self) -> bool {
        self.svc.lock().unwrap_or_else(|p| p.into_inner()).is_none()
    }

    /// Stops the service and closes its group socket.
    fn close(&self, py: Python<'_>) {
        let svc = self.svc.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(s) = &svc {
            s.stop();
        }
        py.detach(|| drop(svc));
    }
}
