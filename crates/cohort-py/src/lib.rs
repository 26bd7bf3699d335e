//! Cohort's Python bindings: the `cohort._native` module of the `cohort` package.
//!
//! * `LrtSocket`, `LrtListener`, `MpLrtSocket`, `GroupSocket`, `PathStatsService`: the real sockets of `cohort-net` (their driver threads, real
//!   UDP, the team key on every datagram); blocking calls release the GIL, and their async
//!   twins are polled on the asyncio loop (see [`wait`]).
//! * `sim_run`, `edca_sat`: the deterministic simulator and the 802.11 model's saturation runs.
//! * `beams_allocate`: seed 001's chain and beam allocation (greedy, one-to-one, optimum).
//! * Errors become the exceptions of `cohort.errors` (see [`errors`]).
//!
//! The documented Python API is the package's (`python/cohort`); this module is its engine
//! and is described for type checkers by `python/cohort/_native.pyi`.

mod beams;
mod conn;
mod errors;
mod federated;
mod group;
mod lrt;
mod mp;
mod sim;
mod wait;

use pyo3::prelude::*;

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<lrt::PyLrtSocket>()?;
    m.add_class::<lrt::PyLrtListener>()?;
    m.add_class::<mp::PyMpLrtSocket>()?;
    m.add_class::<group::PyGroupSocket>()?;
    m.add_class::<federated::PyPathStatsService>()?;
    m.add_class::<group::PyGroupRequest>()?;
    m.add_class::<group::PyReplies>()?;
    m.add_class::<group::PyGroupEvent>()?;
    m.add_class::<sim::PySimOutcome>()?;
    m.add_class::<sim::PyFlowResult>()?;
    m.add_class::<sim::PySaturationReport>()?;
    m.add_class::<beams::PyBeamAllocation>()?;
    m.add_class::<wait::Wakeup>()?;
    m.add_class::<wait::Pending>()?;
    m.add_function(wrap_pyfunction!(sim::sim_run, m)?)?;
    m.add_function(wrap_pyfunction!(sim::edca_sat, m)?)?;
    m.add_function(wrap_pyfunction!(beams::beams_allocate, m)?)?;
    Ok(())
}
