//! LRT: low-latency reliable transport with online network coding (seed 004).
//!
//! A [`Connection`] carries messages of 1 byte to 16 MiB reliably and in order over a lossy
//! datagram path without retransmissions: messages are cut into equal-sized source symbols
//! ([`stream`]), each source symbol is sent as is, and repair symbols, random linear
//! combinations of every unacknowledged source symbol, follow at a rate matched to the loss
//! the acknowledgements reveal ([`pace`]). The receiver decodes on the fly and releases
//! symbols strictly in order, acknowledging its rank.
//!
//! The connection is sans-IO and works on plaintext LRT packets; a driver seals each one in a
//! secure frame ([`cohort_wire`]) and hands received, authenticated packets back together with
//! their frame packet number.

mod conn;
#[doc(hidden)]
pub mod fuzzing;
pub mod pace;
pub mod rate;
pub mod stream;

pub use conn::{
    CLOSING_PTOS, CloseReason, Config, ConfigError, ConnStats, Connection, Event, MAX_CLOSING, RecvError, Role,
    SendError, State,
};

#[cfg(test)]
mod tests;
