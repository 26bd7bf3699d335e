//! Cohort's datagram formats: zero-copy views and `Repr` structs with typed errors, no I/O.
//!
//! * [`frame`]: the secure frame every Cohort datagram travels in.
//! * [`symbol`]: the coded-symbol header (source and repair symbols).
//! * [`lrt`]: the coded transport's packets (symbols, rank acknowledgements, handshake, close).
//! * [`group`]: group request-reply and membership (GCBRR): requests, slot-ordered replies,
//!   join and leave polls, view pushes, heartbeats.
//! * [`preempt`]: coordinated preemption's bulk-token arbiter (COORP): request, grant, renew,
//!   release, revoke, query and state report, fenced by epoch and sequence number.
//!
//! Parsing follows smoltcp's contract: `new_checked` validates lengths once, after which no
//! accessor can panic, and `Repr::parse` validates semantics; `Repr::emit` writes into a
//! buffer of `Repr::buffer_len` bytes.
//!
//! # The secure frame
//!
//! Every datagram is `header (26) ‖ ciphertext ‖ tag (16)`: version, payload kind, team id,
//! sender id, epoch and packet number in the clear but authenticated (the header is the
//! associated data), the payload encrypted with XChaCha20-Poly1305. See [`frame`] for the byte
//! diagram and the nonce invariant.
//!
//! * **Key schedule.** A team shares one secret (≥ 16 bytes, ideally 32 random ones).
//!   [`frame::TeamKey::derive`] runs HKDF-SHA256 over it with a fixed salt and an `info` that
//!   binds the frame version and the team id, so each (team, version) gets its own key.
//! * **Nonces.** sender id ‖ epoch ‖ packet number. Each [`frame::Sealer`] is one life of a
//!   sender: it draws a 64-bit epoch from the kernel's CSPRNG and owns its packet numbers
//!   (0, 1, 2, …, never reused, never wrapped), so nonces do not repeat under a key across
//!   restarts, sockets, robots sharing a sender id or clock steps.
//! * **Replay window.** Each receiver has one [`frame::Opener`], holding per remote sender and
//!   life a [`REPLAY_WINDOW`]-bit sliding bitmap anchored at the highest packet number accepted
//!   (RFC 6479): a packet is accepted once, in any order, while it is less than
//!   `REPLAY_WINDOW - 64` behind the newest. Windows change only after authentication. A
//!   restarted sender is a new life, accepted at once; lives pushed out are refused for good.
//!   The number of senders tracked is bounded; the least recently heard one is forgotten first.
//! * **Counting.** Every [`frame::Opener::open`] call lands in exactly one counter of
//!   [`frame::RejectCounters`]: accepted, or rejected as truncated, bad version, wrong team,
//!   authentication failure, replayed, too old or a retired life. A rejected frame is parsed
//!   no further.
//!
//! ```
//! use cohort_wire::frame::{Opener, OpenError, Sealer, TeamKey, kind, OVERHEAD};
//!
//! let key = TeamKey::derive(b"32 random bytes shared by a team", 42).unwrap();
//! let mut robot_a = Sealer::new(key.clone(), 1).unwrap(); // a random epoch: this life
//! let mut robot_b = Opener::new(key);
//!
//! let mut datagram = [0u8; 1200];
//! let n = robot_a.seal(kind::LRT, b"waypoint 7", &mut datagram).unwrap();
//! assert_eq!(n, 10 + OVERHEAD);
//!
//! let mut replay = datagram;
//! let opened = robot_b.open(&mut datagram[..n]).unwrap();
//! assert_eq!((opened.sender_id, opened.packet_number, opened.payload), (1, 0, &b"waypoint 7"[..]));
//! assert_eq!(robot_b.open(&mut replay[..n]), Err(OpenError::Replayed { sender: 1, pn: 0 }));
//! assert_eq!((robot_b.counters().accepted, robot_b.counters().replayed), (1, 1));
//! ```

pub mod frame;
pub mod group;
pub mod lrt;
pub mod preempt;
mod replay;
pub mod symbol;

pub use replay::WINDOW as REPLAY_WINDOW;
