//! Channel models, sans-IO: packets go in with a time, deliveries come out with a time. The
//! deterministic simulator drives them in virtual time and the testbed emulator in real time,
//! so both run the very same code.
//!
//! * [`link`]: point-to-point links (delay, jitter, iid and Gilbert-Elliott loss, rate with
//!   serialization, drop-tail queue, duplication, reordering; asymmetric directions).

pub mod link;
