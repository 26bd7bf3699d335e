//! Channel models, sans-IO: packets go in with a time, deliveries come out with a time. The
//! deterministic simulator drives them in virtual time and the testbed emulator in real time,
//! so both run the very same code.
//!
//! * [`link`]: point-to-point links (delay, jitter, iid and Gilbert-Elliott loss, rate with
//!   serialization, drop-tail queue, duplication, reordering; asymmetric directions).
//! * [`wifi`]: the shared 802.11 channel (DCF and EDCA, per-station hardware queues,
//!   collisions, retries, broadcast, TXOP), validated against Bianchi's model and ns-3.

pub mod link;
pub mod wifi;
