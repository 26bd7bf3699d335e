//! The runtime of coordinated preemption (seed 000) for traffic Cohort does not send itself.
//!
//! * [`gate::BulkGate`]: holds and releases a robot's foreign bulk (any application's) in the
//!   kernel's egress queue, within one netlink round trip.
//! * [`observer::Observer`]: sees every packet leave the robot's interface.
//! * [`marker::Marker`]: marks chosen flows in the kernel (nftables): EF, or the gate's bulk mark.
//! * [`agent::run`]: `cohort coorp agent`, the three above driven by the sans-IO
//!   `cohort_proto::preempt::agent::Agent`, with the bulk token over secure frames.
//! * [`card`]: what the robot's card holds, published by the emulator (or a driver shim) and
//!   read by the agent: the completion feedback of seed 000's Algorithm 2; [`mac80211`] reads
//!   the same from a real host's mac80211 debugfs (AQL).
//! * [`bulk`]: `cohort bulk send/recv`, Cohort's own bulk transfer, which asks the agent
//!   before it hands data to the kernel.

pub mod agent;
pub mod bulk;
pub mod card;
pub mod gate;
pub mod mac80211;
pub mod marker;
mod netlink;
pub mod observer;

pub use agent::{AgentError, AgentOptions, AgentSnapshot, FlowStatus};
pub use bulk::{BulkError, BulkOptions, BulkReport, Received};
pub use card::{CardBoard, CardError, CardLoad, CardProbe, CardReader, CardSource};
pub use gate::{BulkGate, GateConfig, GateError, GateStats};
pub use netlink::QueueStats;
