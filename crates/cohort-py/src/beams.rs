//! Seed 001's RF-chain and beam allocation (`cohort_medium::beams`) for Python: Algorithm 1
//! (one-to-many greedy), the one-to-one baseline and the exact optimum of the integer program.

use crate::errors::Error;
use cohort_medium::beams::alloc::{self, Mapping};
use cohort_medium::beams::{Allocation, ApConfig, Band, BeamsError, Channel, exact};
use pyo3::prelude::*;

/// An allocation and what it gives (Eqs. 1-2): per stream `(chain, beam, device)`, its SNR
/// and throughput; per device the sum of its streams; the total.
#[pyclass(frozen, get_all, module = "cohort._native", name = "BeamAllocation")]
#[derive(Debug)]
pub struct PyBeamAllocation {
    streams: Vec<(usize, usize, usize)>,
    snr: Vec<f64>,
    theta_bps: Vec<f64>,
    device_bps: Vec<f64>,
    total_bps: f64,
}

#[pymethods]
impl PyBeamAllocation {
    fn __repr__(&self) -> String {
        format!("BeamAllocation(streams={}, total_bps={:.4e})", self.streams.len(), self.total_bps)
    }
}

impl From<Allocation> for PyBeamAllocation {
    fn from(a: Allocation) -> Self {
        PyBeamAllocation {
            streams: a.streams.iter().map(|s| (s.chain, s.beam, s.device)).collect(),
            snr: a.snr,
            theta_bps: a.theta_bps,
            device_bps: a.device_bps,
            total_bps: a.total_bps,
        }
    }
}

fn beams_error(e: BeamsError) -> Error {
    let kind = match e {
        BeamsError::Empty => "Empty",
        BeamsError::Invalid { .. } => "Invalid",
        BeamsError::TooMany { .. } => "TooMany",
        BeamsError::Stream { .. } => "Stream",
        BeamsError::Shape { .. } => "Shape",
        BeamsError::Solver(_) => "Solver",
    };
    Error::config(kind, e.to_string())
}

/// Allocates the chains and beams of an access point at the origin facing +x (the band's
/// constants of `ApConfig::new`) to devices at `positions` (metres): `method` is `"greedy"`
/// (Algorithm 1, several chains per device), `"one_to_one"` (at most one chain per device) or
/// `"optimum"` (the integer program solved exactly: small instances only).
#[pyfunction]
#[pyo3(signature = (positions, band="5GHz", chains=4, beams=16, method="greedy"))]
pub fn beams_allocate(
    py: Python<'_>,
    positions: Vec<(f64, f64)>,
    band: &str,
    chains: usize,
    beams: usize,
    method: &str,
) -> PyResult<PyBeamAllocation> {
    let band = match band {
        "5GHz" => Band::G5,
        "60GHz" => Band::G60,
        other => return Err(Error::config("Band", format!("band {other:?}: expected \"5GHz\" or \"60GHz\"")).into()),
    };
    if !matches!(method, "greedy" | "one_to_one" | "optimum") {
        return Err(Error::config(
            "Method",
            format!("method {method:?}: expected \"greedy\", \"one_to_one\" or \"optimum\""),
        )
        .into());
    }
    let ch = Channel::new(&ApConfig::new(band, chains, beams), &positions).map_err(beams_error)?;
    let a = py.detach(|| match method {
        "greedy" => Ok(alloc::greedy(&ch)),
        "one_to_one" => Ok(alloc::one_to_one(&ch)),
        _ => exact::optimum(&ch, Mapping::OneToMany).map(|(a, _)| a),
    });
    Ok(a.map_err(beams_error)?.into())
}
