//! Cohort's real-time runtime: real UDP sockets and a high-resolution clock driving the sans-IO
//! protocol machines of `cohort-proto`. It owns sockets and time and nothing else; every
//! protocol decision is the machine's.
//!
//! * [`LrtSocket`]: a coded-transport connection with a blocking API and an async one
//!   ([`LrtSocket::send_async`], [`LrtSocket::recv_async`]), run by a driver thread that
//!   waits on the socket and a `timerfd` (see [`timer`]) in one `epoll`.
//! * [`GroupSocket`]: one member of a GCBRR group (coordinated 1-to-N request-reply and
//!   membership, seed 003) over UDP broadcast or multicast, blocking and async.
//! * Every datagram is a secure frame (`cohort_wire::frame`): sealed with the team key on the
//!   way out, authenticated before anything else looks at it on the way in.

mod backlog;
pub mod group;
mod keyx;
mod lrt;
pub mod preempt;
mod secure;
mod shared;
pub mod timer;

pub use group::{GroupConfig, GroupError, GroupSocket, GroupSocketStats, Start};
pub use keyx::KeyExchangeStats;
pub use lrt::{LrtSocket, NetError, SocketConfig, SocketStats};
pub use secure::Secure;
