//! Cohort's protocol state machines, all sans-IO: they never read a clock, touch a socket or
//! draw from an unseeded random source. A driver (the simulator, the real-time runtime or a
//! test harness) feeds them datagrams and time and carries out what they ask for.
//! [`preempt`] holds coordinated preemption (COORP): the bulk-token arbiter and client, the
//! LS-flow time model and the virtual-preemption layer.

pub mod group;
pub mod lrt;
pub mod preempt;
