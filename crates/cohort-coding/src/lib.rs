//! Cohort's network-coding core.
//!
//! * [`gf256`]: GF(2^8) arithmetic (RFC 8681 polynomial 0x11D) with SIMD kernels picked at
//!   run time.
//! * [`tinymt`]: the RFC 8682 TinyMT32 generator and the RFC 8681 coding-coefficient
//!   derivation, so repair coefficients never travel: a 16-bit repair key does.
//! * [`Encoder`] / [`Decoder`]: sliding-window random linear network coding. The encoder
//!   takes source symbols on the fly and emits repair symbols over its current window; the
//!   decoder runs on-the-fly Gaussian elimination, tracks the "seen" symbols of seed 004 §II
//!   and releases source symbols strictly in order the moment they are decodable.
//!
//! Everything here is deterministic and does no I/O.

pub mod gf256;
pub mod tinymt;

mod decoder;
mod encoder;

pub use decoder::{Decoder, DecoderStats, InputError, Outcome};
pub use encoder::{CoderConfig, ConfigError, Encoder, PushError, RepairError, RepairInfo};

#[cfg(test)]
mod tests;
