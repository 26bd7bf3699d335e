//! Cohort's real-time runtime: real UDP sockets and a high-resolution clock driving the sans-IO
//! protocol machines of `cohort-proto`. It owns sockets and time and nothing else; every
//! protocol decision is the machine's.
//!
//! * [`LrtSocket`]: a coded-transport connection with a blocking API and an async one
//!   ([`LrtSocket::send_async`], [`LrtSocket::recv_async`]), run by a driver thread that
//!   waits on the socket and a `timerfd` (see [`timer`]) in one `epoll`.
//! * [`MpLrtSocket`]: one coded connection over several paths (a UDP socket per local
//!   address), scheduled by `cohort_proto::multipath` (seed 001).
//! * [`GroupSocket`]: one member of a GCBRR group (coordinated 1-to-N request-reply and
//!   membership, seed 003) over UDP broadcast or multicast, blocking and async.
//! * Every datagram is a secure frame (`cohort_wire::frame`): sealed with the team key on the
//!   way out, authenticated before anything else looks at it on the way in.

mod backlog;
mod endpoint;
pub mod federated;
pub mod group;
mod keyx;
mod lrt;
mod mp;
pub mod preempt;
mod secure;
mod shared;
pub mod timer;

pub use group::{GroupConfig, GroupError, GroupSocket, GroupSocketStats, Start};
pub use keyx::KeyExchangeStats;
pub use lrt::{ListenerStats, LrtListener, LrtSocket, NetError, SocketConfig, SocketStats};
pub use mp::{MpLrtSocket, MpSocketStats};
pub use secure::Secure;
