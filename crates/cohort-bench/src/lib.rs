//! Cohort's benchmark programs.
//!
//! Each benchmark runs Cohort and its baseline in the same invocation on the same data and
//! returns a JSON-serialisable report with named figures, ratios, the parameters (duration,
//! warm-up, seed) and the command that reproduces it. Timings never gate tests; the tests here
//! only check that a tiny run produces a well-formed report.

pub mod arq;
pub mod beams;
pub mod block;
pub mod bridge_testbed;
pub mod coding;
pub mod coorp;
pub mod coorp_agent_pair;
pub mod coorp_gate;
pub mod coorp_testbed;
pub mod crosscheck;
pub mod fidelity;
pub mod group;
pub mod load;
pub mod lrt;
pub mod lrt_grid;
pub mod lrt_share;
pub mod medium;
pub mod migration;
pub mod multipath;
pub mod multipath_federated;
pub mod multipath_testbed;
pub mod proc;
pub mod progress;
pub mod rattan;
pub mod stats;
pub mod timer;
pub mod transport;

/// The README's and the guide's Rust examples, compiled and run as doctests (`cargo test
/// --doc`): a block that stops compiling or running fails the tests. Blocks marked `no_run`
/// (they need root or a robot's radio) are compiled only. `python/tests/test_docs.py` checks
/// that every page with a Rust block is listed here.
#[cfg(doctest)]
mod docs {
    #[doc = include_str!("../../../README.md")]
    struct Readme;
    #[doc = include_str!("../../../docs/rust.md")]
    struct Rust;
}
