//! [`LrtListener`]: one UDP port that accepts LRT connections from any number of peers, and
//! from a peer again after it restarted.
//!
//! A [`LrtSocket::listen`] socket serves the one peer whose key exchange finishes first, for
//! its life. A ground station that many drones connect to, or that a drone must reach again
//! after its process restarted, needs more: the listener runs one driver thread for the port.
//! Datagrams are routed by the life they are sealed for (sender id and epoch, which only a
//! holder of that session's key can use), not by address, so a connection that moves (path
//! validation as [`LrtSocket`] does it) stays the same connection. A message 1 of a new life is
//! answered from a lobby of half-open sessions (at most 16, each for `handshake_timeout`, as a
//! listening socket keeps them); the first datagram under one of them makes a connection of its
//! own, which [`LrtListener::accept`] hands out as an ordinary [`LrtSocket`]. A restarted peer
//! is a new life, so it gets a new connection; the old one ends by its idle timeout (its
//! `recv` says `Closed(TimedOut)`), since what its old process had in flight is gone.

use super::{Inner, Io, LrtSocket, NetError, SOCKET, SocketConfig, SocketStats, TIMER, bind, on_datagram, transmit};
use crate::keyx::{Handshake, KeyExchange};
use crate::shared::{Shared, Wait};
use crate::timer::TimerFd;
use cohort_proto::lrt::Connection;
use cohort_wire::frame::kind;
use mio::net::UdpSocket;
use mio::{Events, Poll};
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Counters of a listener.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ListenerStats {
    /// Connections made (accepted or waiting for `accept`).
    pub connections: u64,
    /// Connections ended (closed by either end or timed out) and dropped from the port.
    pub ended: u64,
    /// Datagrams for no connection and no half-open session (stale lives, forgeries).
    pub unrouted: u64,
    /// Connections refused because `max_connections` were open.
    pub refused: u64,
    pub datagrams_received: u64,
}

/// A peer's life: its sender id and the epoch of its frames.
type Life = (u32, u64);

#[derive(Debug)]
struct Lobby {
    cfg: SocketConfig,
    keyx: KeyExchange,
    /// Open connections with the life (sender id, epoch) each is sealed for; a connection's
    /// life never changes (its address may), so routing needs no lock of the connection.
    conns: Vec<(Life, Arc<Shared<Inner>>)>,
    ready: VecDeque<Arc<Shared<Inner>>>,
    max_connections: usize,
    stats: ListenerStats,
    shutdown: bool,
}

/// Accepts coded-transport connections from many peers on one UDP port. See the [module
/// docs](self).
#[derive(Debug)]
pub struct LrtListener {
    shared: Arc<Shared<Lobby>>,
    thread: Option<JoinHandle<()>>,
    local: SocketAddr,
}

impl LrtListener {
    /// Default bound on connections open at once.
    pub const MAX_CONNECTIONS: usize = 256;

    /// Binds `addr` and starts serving it; peers connect with [`LrtSocket::connect`].
    pub fn bind(addr: SocketAddr, cfg: SocketConfig) -> Result<Self, NetError> {
        Self::bind_with_limit(addr, cfg, Self::MAX_CONNECTIONS)
    }

    /// As [`bind`](Self::bind), with at most `max_connections` connections open at once
    /// (later peers are refused and counted until one ends).
    pub fn bind_with_limit(addr: SocketAddr, cfg: SocketConfig, max_connections: usize) -> Result<Self, NetError> {
        if max_connections == 0 {
            return Err(NetError::Config("max_connections must be at least 1".into()));
        }
        cfg.lrt.validate().map_err(|e| NetError::Config(e.to_string()))?;
        let Io { local, sock, poll, timer, waker } = Io::new(bind(addr, &cfg)?)?;
        let keyx = lobby_keyx(&cfg)?;
        let lobby = Lobby {
            cfg,
            keyx,
            conns: Vec::new(),
            ready: VecDeque::new(),
            max_connections,
            stats: ListenerStats::default(),
            shutdown: false,
        };
        let shared = Arc::new(Shared::new(lobby, waker));
        let s2 = shared.clone();
        let thread = std::thread::Builder::new().name("cohort-lrt-listen".into()).spawn(move || {
            if let Err(e) = drive(&s2, poll, sock, timer) {
                tracing::error!(%e, "lrt listener stopped");
            }
            end_all(&s2);
        })?;
        Ok(LrtListener { shared, thread: Some(thread), local })
    }

    /// The next connection, waiting up to `timeout` (forever with `None`).
    pub fn accept(&self, timeout: Option<Duration>) -> Result<LrtSocket, NetError> {
        let deadline = timeout.map(|t| Instant::now() + t);
        let (mut g, w) = self.shared.wait_until(deadline, |l| l.shutdown, |l| !l.ready.is_empty());
        match w {
            Wait::Done => {
                let shared = g.ready.pop_front().ok_or(NetError::TimedOut)?;
                Ok(LrtSocket { shared, thread: None, local: self.local })
            }
            Wait::TimedOut => Err(NetError::TimedOut),
            Wait::Stopped => Err(NetError::Io(std::io::Error::other("listener stopped"))),
        }
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// Counters so far, and the connections open now.
    pub fn stats(&self) -> (ListenerStats, usize) {
        let g = self.shared.lock();
        (g.stats, g.conns.len())
    }
}

impl Drop for LrtListener {
    /// Closes every connection of the port (their peers are told) and stops the driver.
    fn drop(&mut self) {
        for (_, c) in &self.shared.lock().conns {
            c.lock().conn.close();
        }
        let _ = self.shared.waker.wake();
        if let Some(t) = self.thread.take() {
            // The driver sends the CLOSEs on its next turn, then stops.
            self.shared.lock().shutdown = true;
            let _ = self.shared.waker.wake();
            let _ = t.join();
        }
    }
}

fn lobby_keyx(cfg: &SocketConfig) -> Result<KeyExchange, NetError> {
    KeyExchange::new(
        &cfg.team_secret,
        cfg.team_id,
        cfg.sender_id,
        (kind::LRT, kind::PATH),
        cfg.lrt.handshake_retry,
        false,
    )
}

/// The driver ended: every connection it served ends with it.
fn end_all(shared: &Shared<Lobby>) {
    let mut g = shared.lock();
    g.shutdown = true;
    let mut all: Vec<_> = g.conns.drain(..).map(|(_, c)| c).collect();
    all.extend(g.ready.drain(..));
    for c in all {
        c.lock().shutdown = true;
        c.notify();
    }
    drop(g);
    shared.notify();
}

fn drive(shared: &Shared<Lobby>, mut poll: Poll, sock: UdpSocket, timer: TimerFd) -> Result<(), NetError> {
    let mut events = Events::with_capacity(64);
    let (mut plain, mut wire) = (vec![0u8; 70_000], vec![0u8; 70_000]);
    loop {
        {
            let mut g = shared.lock();
            let mut deadline: Option<Instant> = None;
            let mut ended = 0;
            g.conns.retain(|(_, c)| {
                let mut cg = c.lock();
                let now = c.clock.now();
                cg.conn.handle_timeout(now);
                if let Err(e) = transmit(&mut cg, &sock, now, &mut plain, &mut wire) {
                    tracing::debug!(%e, "lrt listener: transmit");
                }
                // A connection closed here stays through its closing period.
                let closed = cg.conn.is_drained(now) || cg.shutdown;
                if closed {
                    cg.shutdown = true;
                } else if let Some(t) = cg.conn.poll_timeout() {
                    let at = c.clock.to_std(t);
                    deadline = Some(deadline.map_or(at, |d| d.min(at)));
                }
                drop(cg);
                c.notify();
                ended += u64::from(closed);
                !closed
            });
            g.stats.ended += ended;
            timer.set(deadline)?;
            if g.shutdown {
                return Ok(());
            }
        }
        shared.notify();
        crate::shared::wait_events(&mut poll, &mut events)?;
        for ev in events.iter() {
            match ev.token() {
                TIMER => {
                    timer.acknowledge();
                }
                SOCKET => crate::shared::drain(&sock, &mut wire, |d, from| route(shared, &sock, d, from)),
                _ => {}
            }
        }
    }
}

/// One datagram on the port: a message 1 to the lobby, a datagram of a connection's life to
/// that connection, the first datagram of a half-open session to a new connection.
fn route(shared: &Shared<Lobby>, sock: &UdpSocket, datagram: &mut [u8], from: SocketAddr) {
    let mut g = shared.lock();
    g.stats.datagrams_received += 1;
    if KeyExchange::is_handshake(datagram) {
        let timeout = g.cfg.lrt.handshake_timeout;
        let mut out = [0u8; crate::keyx::HANDSHAKE_DATAGRAM];
        if let Handshake::Answer(n) = g.keyx.on_handshake(datagram, shared.clock.now(), timeout, &mut out) {
            let mut stats = SocketStats::default();
            super::send_datagram(&mut stats, sock, from, &out[..n]);
        }
        return;
    }
    let life = cohort_wire::frame::Frame::new_checked(&*datagram).ok().map(|f| (f.sender_id(), f.epoch()));
    if let Some((_, c)) = g.conns.iter().find(|(l, _)| Some(*l) == life) {
        let c = c.clone();
        drop(g);
        let mut cg = c.lock();
        let now = c.clock.now();
        on_datagram(&mut cg, sock, datagram, from, now);
        drop(cg);
        c.notify();
        return;
    }
    if g.conns.len() >= g.max_connections {
        g.stats.refused += 1;
        return;
    }
    let Ok(fresh) = lobby_keyx(&g.cfg) else { return };
    let Some((keyx, o)) = g.keyx.take_session(datagram, fresh) else {
        g.stats.unrouted += 1;
        return;
    };
    let Ok(conn) = Connection::accept(g.cfg.lrt.clone(), cohort_time::Instant::ZERO) else { return };
    let inner = Inner {
        conn,
        keyx,
        peer: Some((from, Some(o.life))),
        path: None,
        stats: SocketStats { datagrams_received: 1, wire_bytes_received: datagram.len() as u64, ..Default::default() },
        shutdown: false,
    };
    let c = Arc::new(Shared::new(inner, shared.waker.clone()));
    {
        let mut cg = c.lock();
        let now = c.clock.now();
        if o.kind == kind::LRT {
            cg.conn.handle_packet(now, o.pn, o.payload(datagram));
        }
    }
    g.stats.connections += 1;
    g.conns.push((o.life, c.clone()));
    g.ready.push_back(c);
    drop(g);
    shared.notify();
}
