//! Point-to-point baselines of seed 003 §VI ("EVALUATION"), over plain std sockets.
//!
//! GCBRR is compared in the paper against point-to-point transports that do the same work with
//! unicasts. This module implements those baselines so the group bench can run them on the same
//! emulated 802.11 channel (1 Mbit/s, one network namespace per node) in the same invocation.
//! Everything here is blocking std-socket code, IPv4 or IPv6, with no namespace logic: the
//! harness calls these functions from threads that already sit inside the right namespace, and
//! sockets created by a thread stay in the namespace the thread was in when it created them.
//!
//! One submodule per baseline; every public item is re-exported here, so the paths are
//! `baselines::X`:
//!
//! * `rr`: §VI-B, 1-to-N request-reply, TCP-SEQ/PAR and RUP-SEQ/PAR ([`Rr`], [`rr_coordinator`],
//!   [`RrServer`]); its docs also explain the [`Rto`] defaults.
//! * `flow`: §VI-C, N-to-1 message flow, TCP-PAR, RUP-PAR and UUP-PAR ([`Flow`], [`flow_source`],
//!   [`FlowSink`]).
//! * `gm`: §VI-D, TCP-based group management ([`GmCoordinator`], [`GmMember`]).
//! * `common`: what more than one of them uses: error and deadline helpers, padding, `poll(2)`
//!   and a nonblocking length-prefixed TCP connection, the servers' listening socket, the
//!   adaptive retransmission timeout ([`Rto`]), and the tests' loopback helpers.
//!
//! # Boundedness
//!
//! Every client-side function takes a `deadline: Instant` and returns an
//! [`io::ErrorKind::TimedOut`](std::io::ErrorKind::TimedOut) error instead of hanging. Every
//! server-side loop takes a stop flag (`&AtomicBool`) and polls it at least every [`STOP_POLL`]
//! (50 ms). TCP clients retry a refused connection every 20 ms until the deadline, so a client
//! may be started before its server has bound; the servers also offer a two-phase API (`bind`,
//! then `serve`/`run`) so the harness (and the tests, which use ephemeral ports) can learn the
//! bound address first.
//!
//! # Framing
//!
//! * **TCP**: every message is a frame `len: u32 (big-endian) | body[len]`; a body longer than
//!   [`MAX_FRAME_LEN`] is rejected with
//!   [`io::ErrorKind::InvalidData`](std::io::ErrorKind::InvalidData) (never a panic).
//! * **UDP**: one message per datagram, no prefix.
//! * Bodies start with a one-byte tag and big-endian header fields, then are padded with dummy
//!   bytes (`0xA5`) to the requested length. A requested length shorter than the header is
//!   raised to the header length (9 bytes for request-reply, 10 for N-to-1 messages).
//! * `bytes_sent` counters count the bytes handed to the socket (bodies plus TCP length
//!   prefixes), not IP/UDP/TCP headers, TCP ACKs or 802.11 overhead.

mod common;
mod flow;
mod gm;
mod rr;

pub use common::{LEN_PREFIX, MAX_FRAME_LEN, Rto, STOP_POLL};
pub use flow::{Flow, FlowSink, FlowTimers, RUP_ACK_LEN, SinkRun, SourceRun, flow_sink, flow_source, flow_source_with};
pub use gm::{GmCoordinator, GmMember, GmMemberRun, GmRound, GmRun, ViewEntry, gm_member};
pub use rr::{Rr, RrRun, RrServer, ServeStats, rr_coordinator, rr_coordinator_with, rr_serve};
