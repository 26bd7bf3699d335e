//! Channel models, sans-IO: packets go in with a time, deliveries come out with a time. The
//! deterministic simulator drives them in virtual time and the testbed emulator in real time,
//! so both run the very same code. No model reads a clock; every random draw comes from a
//! stream seeded by the caller.
//!
//! * [`link`]: point-to-point links (delay, jitter, iid and Gilbert-Elliott loss, rate with
//!   serialization, drop-tail queue in bytes and packets, duplication, reordering; asymmetric
//!   directions in a [`link::Duplex`]).
//! * [`wifi`]: the shared 802.11 channel (DCF and EDCA, per-station hardware queues,
//!   collisions, retries, broadcast, TXOP, A-MPDU and block ack, RTS/CTS), validated against
//!   Bianchi's model and ns-3's reference tables ([`wifi::bianchi`]); the saturation
//!   scenarios the benchmarks run are in [`wifi::scenario`].
//! * [`beams`]: RF-chain and beam allocation at a multi-antenna access point (seed 001 §3.1,
//!   Eqs. 1-2, Algorithm 1): the per-round link throughputs that feed multipath scheduling.
//! * [`trace`]: a link's parameters and up/down state over time, read from a file or
//!   generated; the simulator's and the testbed's links follow them.

pub mod beams;
pub mod link;
pub mod trace;
pub mod wifi;
