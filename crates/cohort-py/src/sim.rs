//! The deterministic simulator (`cohort_sim::run`) and the 802.11 medium model's saturation
//! runs (`cohort_medium::wifi::EdcaSatScenario`) for Python.

use crate::errors::Error;
use cohort_medium::wifi::{EdcaSatReport, EdcaSatScenario};
use cohort_sim::{FlowResult, Outcome, Scenario, ScenarioError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};

/// One flow of a simulated run: what it sent, what arrived, and how late.
#[pyclass(frozen, get_all, module = "cohort._native", name = "FlowResult")]
#[derive(Debug, Clone)]
pub struct PyFlowResult {
    sent: u64,
    delivered: u64,
    in_order: bool,
    duplicates: u64,
    corrupted: u64,
    p50_ms: f64,
    p99_ms: f64,
    max_ms: f64,
    goodput_mbps: f64,
    lost_to_crashes: u64,
    coders_opened: u64,
    full_rank_acks: u64,
    out_of_date: u64,
}

impl From<&FlowResult> for PyFlowResult {
    fn from(f: &FlowResult) -> Self {
        PyFlowResult {
            sent: f.sent,
            delivered: f.delivered,
            in_order: f.in_order,
            duplicates: f.duplicates,
            corrupted: f.corrupted,
            p50_ms: f.p50_ms,
            p99_ms: f.p99_ms,
            max_ms: f.max_ms,
            goodput_mbps: f.goodput_mbps,
            lost_to_crashes: f.lost_to_crashes,
            coders_opened: f.coders_opened,
            full_rank_acks: f.full_rank_acks,
            out_of_date: f.out_of_date,
        }
    }
}

#[pymethods]
impl PyFlowResult {
    fn __repr__(&self) -> String {
        format!(
            "FlowResult(delivered={}/{}, in_order={}, p50_ms={:.2}, p99_ms={:.2}, max_ms={:.2})",
            self.delivered,
            self.sent,
            if self.in_order { "True" } else { "False" },
            self.p50_ms,
            self.p99_ms,
            self.max_ms
        )
    }
}

/// The result of one seeded simulation run.
#[pyclass(frozen, get_all, module = "cohort._native", name = "SimOutcome")]
#[derive(Debug)]
pub struct PySimOutcome {
    scenario: String,
    seed: u64,
    /// Fingerprint of every packet and delivery: the same seed gives the same hash.
    trace_hash: String,
    flows: Vec<PyFlowResult>,
    /// Broken invariants (exactly once, in order, byte-identical, everything delivered).
    violations: Vec<String>,
    packets: u64,
    packets_dropped_by_faults: u64,
    simulated_s: f64,
}

#[pymethods]
impl PySimOutcome {
    /// No invariant was broken.
    #[getter]
    fn ok(&self) -> bool {
        self.violations.is_empty()
    }

    fn __repr__(&self) -> String {
        format!(
            "SimOutcome(scenario={:?}, seed={}, trace_hash={:?}, flows={}, ok={})",
            self.scenario,
            self.seed,
            self.trace_hash,
            self.flows.len(),
            if self.violations.is_empty() { "True" } else { "False" }
        )
    }
}

impl From<Outcome> for PySimOutcome {
    fn from(o: Outcome) -> Self {
        PySimOutcome {
            flows: o.flows.iter().map(PyFlowResult::from).collect(),
            scenario: o.scenario,
            seed: o.seed,
            trace_hash: o.trace_hash,
            violations: o.violations,
            packets: o.packets,
            packets_dropped_by_faults: o.packets_dropped_by_faults,
            simulated_s: o.simulated_s,
        }
    }
}

fn scenario_error(e: ScenarioError) -> Error {
    let kind = match e {
        ScenarioError::Read { .. } => "Read",
        ScenarioError::Parse(_) => "Parse",
        ScenarioError::Invalid(_) => "Invalid",
    };
    Error::config(kind, e.to_string())
}

/// Runs the scenario (TOML text, as in `scenarios/`) with `seed`, in virtual time.
#[pyfunction]
#[pyo3(signature = (scenario_toml, seed=1))]
pub fn sim_run(py: Python<'_>, scenario_toml: &str, seed: u64) -> PyResult<PySimOutcome> {
    let s = Scenario::from_toml(scenario_toml).map_err(scenario_error)?;
    let o = py.detach(|| cohort_sim::run(&s, seed, cohort_sim::Recorder::default()));
    Ok(o.into())
}

/// What a saturation run measured.
#[pyclass(frozen, get_all, module = "cohort._native", name = "SaturationReport")]
#[derive(Debug)]
pub struct PySaturationReport {
    stations: usize,
    simulated_s: f64,
    throughput_mbps: f64,
    bk_mbps: f64,
    be_mbps: f64,
    vi_mbps: f64,
    vo_mbps: f64,
    collisions: u64,
    successes: u64,
    /// PPDUs on the air.
    attempts: u64,
    busy_share: f64,
}

#[pymethods]
impl PySaturationReport {
    fn __repr__(&self) -> String {
        format!(
            "SaturationReport(stations={}, throughput_mbps={:.3}, collisions={}, successes={})",
            self.stations, self.throughput_mbps, self.collisions, self.successes
        )
    }
}

impl From<EdcaSatReport> for PySaturationReport {
    fn from(r: EdcaSatReport) -> Self {
        PySaturationReport {
            stations: r.stations,
            simulated_s: r.simulated_s,
            throughput_mbps: r.throughput_mbps,
            bk_mbps: r.bk_mbps,
            be_mbps: r.be_mbps,
            vi_mbps: r.vi_mbps,
            vo_mbps: r.vo_mbps,
            collisions: r.collisions,
            successes: r.successes,
            attempts: r.attempts,
            busy_share: r.busy_share,
        }
    }
}

/// A Python value as a TOML value (bool, int, float, str, and lists and dicts of them).
fn toml_value(v: &Bound<'_, PyAny>, key: &str) -> Result<toml::Value, Error> {
    let bad = || Error::config("Config", format!("{key}: {v} is not a TOML value (bool, int, float, str, list, dict)"));
    if v.is_instance_of::<PyBool>() {
        return Ok(toml::Value::Boolean(v.extract().map_err(|_| bad())?));
    }
    if v.is_instance_of::<PyInt>() {
        return Ok(toml::Value::Integer(v.extract().map_err(|_| bad())?));
    }
    if v.is_instance_of::<PyFloat>() {
        return Ok(toml::Value::Float(v.extract().map_err(|_| bad())?));
    }
    if v.is_instance_of::<PyString>() {
        return Ok(toml::Value::String(v.extract().map_err(|_| bad())?));
    }
    if v.is_instance_of::<PyList>() || v.is_instance_of::<PyTuple>() {
        let items = v.try_iter().map_err(|_| bad())?;
        let mut out = Vec::new();
        for it in items {
            out.push(toml_value(&it.map_err(|_| bad())?, key)?);
        }
        return Ok(toml::Value::Array(out));
    }
    if let Ok(d) = v.cast::<PyDict>() {
        return Ok(toml::Value::Table(toml_table(d)?));
    }
    Err(bad())
}

fn toml_table(d: &Bound<'_, PyDict>) -> Result<toml::Table, Error> {
    let mut t = toml::Table::new();
    for (k, v) in d.iter() {
        let k: String = k.extract().map_err(|_| Error::config("Config", format!("key {k}: not a str")))?;
        let v = toml_value(&v, &k)?;
        t.insert(k, v);
    }
    Ok(t)
}

/// Runs the 802.11 saturation scenario given as TOML text (empty: the reference scenario of
/// `scenarios/edca_sat.toml`), with `overrides` replacing its keys.
#[pyfunction]
#[pyo3(signature = (scenario_toml="", overrides=None))]
pub fn edca_sat(
    py: Python<'_>,
    scenario_toml: &str,
    overrides: Option<&Bound<'_, PyDict>>,
) -> PyResult<PySaturationReport> {
    let mut t: toml::Table =
        toml::from_str(scenario_toml).map_err(|e| Error::config("Parse", format!("parsing scenario: {e}")))?;
    if let Some(o) = overrides {
        for (k, v) in toml_table(o)? {
            t.insert(k, v);
        }
    }
    let s: EdcaSatScenario = toml::Value::Table(t)
        .try_into()
        .map_err(|e: toml::de::Error| Error::config("Invalid", format!("invalid scenario: {}", e.message())))?;
    let r = py.detach(|| s.run()).map_err(|e| Error::config("Medium", e.to_string()))?;
    Ok(r.into())
}
