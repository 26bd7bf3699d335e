//! Cohort's protocol state machines, all sans-IO: they never read a clock, touch a socket or
//! draw from an unseeded random source. A driver (the simulator, the real-time runtime or a
//! test harness) feeds them datagrams and time and carries out what they ask for.
//! [`preempt`] holds coordinated preemption (COORP): the bulk-token arbiter and client, the
//! LS-flow time model and the virtual-preemption layer.

pub mod group;
pub mod lrt;
pub mod multipath;
pub mod preempt;
pub mod session;

/// Where a datagram of a broadcast-capable machine goes (group and preemption).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Dest {
    Broadcast,
    Unicast(u32),
}

/// A datagram a machine's `poll_transmit` wrote into the caller's buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Transmit {
    pub dest: Dest,
    /// Bytes written at the front of the buffer.
    pub len: usize,
}
#[cfg(test)]
mod spin;
