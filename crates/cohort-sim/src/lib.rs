//! Deterministic simulation: Cohort's real sans-IO protocol machines run over the channel
//! models of `cohort-medium` in virtual time. One seed decides a whole run; time jumps from one
//! event to the next; faults (loss bursts, partitions, clock drift) are data in the scenario;
//! every run yields a trace hash, so the same seed twice gives the same hash, and a failing
//! seed prints the command that replays it. (Models: TigerBeetle's VOPR, turmoil.)
//!
//! Scenarios are TOML files (see `scenarios/` and [`scenario::Scenario`]).

pub mod beams;
pub mod crl;
pub mod engine;
pub mod group;
pub mod mobility;
pub mod multipath;
pub mod scenario;

pub use engine::{FlowResult, Outcome, Recorder, run, wifi_medium};
pub use group::{GroupOutcome, GroupScenario, run_group};
pub use scenario::{LrtSettings, Scenario, ScenarioError};
