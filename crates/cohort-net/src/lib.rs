//! Cohort's real-time runtime: real UDP sockets and a high-resolution clock driving the sans-IO
//! protocol machines of `cohort-proto`. It owns sockets and time and nothing else; every
//! protocol decision is the machine's.
//!
//! * [`LrtSocket`]: a coded-transport connection with a blocking API and an async one
//!   ([`LrtSocket::send_async`], [`LrtSocket::recv_async`]), run by a driver thread that
//!   waits on the socket and a `timerfd` (see [`timer`]) in one `epoll`.
//! * Every datagram is a secure frame (`cohort_wire::frame`): sealed with the team key on the
//!   way out, authenticated before anything else looks at it on the way in.

mod lrt;
mod secure;
pub mod timer;

pub use lrt::{LrtSocket, NetError, SocketConfig, SocketStats};
pub use secure::Secure;
