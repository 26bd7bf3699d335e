//! Cohort's datagram formats: zero-copy views and `Repr` structs with typed errors, no I/O.
//!
//! * [`frame`]: the secure frame every Cohort datagram travels in (ChaCha20-Poly1305, HKDF
//!   team keys, per-sender replay window, rejections counted by reason).
//! * [`symbol`]: the coded-symbol header (source and repair symbols).
//! * [`lrt`]: the coded transport's packets (symbols, rank acknowledgements, handshake, close).
//!
//! Parsing follows smoltcp's contract: `new_checked` validates lengths once, after which no
//! accessor can panic, and `Repr::parse` validates semantics.

pub mod frame;
pub mod lrt;
mod replay;
pub mod symbol;

pub use replay::WINDOW as REPLAY_WINDOW;
