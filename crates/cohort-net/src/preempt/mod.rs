//! The runtime of coordinated preemption (seed 000) for traffic Cohort does not send itself.
//!
//! * [`gate::BulkGate`]: holds and releases a robot's foreign bulk (any application's) in the
//!   kernel's egress queue, within one netlink round trip.

pub mod gate;
mod netlink;

pub use gate::{BulkGate, GateConfig, GateError, GateStats};
