//! `MpLrtSocket`: one multipath LRT connection (`cohort_proto::multipath`) over one UDP socket
//! per local address.
//!
//! Path `i` joins local address `i` to peer address `i`; both ends number them the same (the
//! connecting end names its pairs, the listening end binds its addresses in the same order).
//! The session key exchange runs on path 0 (as `LrtSocket`'s does); then every datagram, on
//! every path, is a secure frame of kind `MULTIPATH` under the session's keys. A listening
//! socket learns each path's peer address from the first authentic datagram on that path.

use crate::endpoint;
use crate::keyx::{Handshake, KeyExchange, KeyExchangeStats};
use crate::lrt::{NetError, SocketConfig, bind};
use crate::shared::Shared;
use crate::timer::TimerFd;
use cohort_proto::lrt::{ConnStats, Connection};
use cohort_proto::multipath::bandit::ArmStats;
use cohort_proto::multipath::{MpConfig, MpConnection, MpStats};
use cohort_wire::frame::kind;
use mio::net::UdpSocket;
use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Token, Waker};
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// Counters of a multipath socket, besides the connection's and the scheduler's own.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MpSocketStats {
    pub conn: ConnStats,
    pub mp: MpStats,
    pub keys: KeyExchangeStats,
    pub datagrams_sent: u64,
    pub datagrams_received: u64,
    pub rejected_frames: u64,
    pub frames: cohort_wire::frame::RejectCounters,
    /// Authentic datagrams of a life other than the connected peer's.
    pub foreign_sender: u64,
    /// Datagrams for a path whose peer address this (listening) socket has not learned yet:
    /// lost, as on a path that is down.
    pub no_peer_address: u64,
}

#[derive(Debug)]
struct Inner {
    conn: MpConnection,
    keyx: KeyExchange,
    /// Each path's peer address (known from the start when connecting, learned when listening).
    peers: Vec<Option<SocketAddr>>,
    /// The peer's life, once the session is up.
    peer_life: Option<(u32, u64)>,
    stats: MpSocketStats,
    shutdown: bool,
}

/// A coded connection over several paths. See the [module docs](self).
#[derive(Debug)]
pub struct MpLrtSocket {
    shared: Arc<Shared<Inner>>,
    thread: Option<JoinHandle<()>>,
    locals: Vec<SocketAddr>,
}

impl endpoint::Driven for Inner {
    fn conn(&self) -> &Connection {
        self.conn.conn()
    }
    fn conn_mut(&mut self) -> &mut Connection {
        self.conn.conn_mut()
    }
    fn is_shutdown(&self) -> bool {
        self.shutdown
    }
}

impl MpLrtSocket {
    fn start(
        socks: Vec<std::net::UdpSocket>,
        conn: Connection,
        cfg: &SocketConfig,
        mp: MpConfig,
        peers: Vec<Option<SocketAddr>>,
    ) -> Result<Self, NetError> {
        if socks.is_empty() || socks.len() > 255 {
            return Err(NetError::Config(format!("{} paths: 1 to 255 are possible", socks.len())));
        }
        let n = socks.len();
        let locals = socks.iter().map(|s| s.local_addr()).collect::<Result<Vec<_>, _>>()?;
        let poll = Poll::new()?;
        let mut socks: Vec<UdpSocket> = socks.into_iter().map(UdpSocket::from_std).collect();
        for (i, s) in socks.iter_mut().enumerate() {
            poll.registry().register(s, Token(i), Interest::READABLE)?;
        }
        let timer = TimerFd::new()?;
        poll.registry().register(&mut SourceFd(&timer.as_raw_fd()), Token(n), Interest::READABLE)?;
        let waker = Waker::new(poll.registry(), Token(n + 1))?;
        let keyx = KeyExchange::new(
            &cfg.team_secret,
            cfg.team_id,
            cfg.sender_id,
            (kind::MULTIPATH, kind::MULTIPATH),
            cfg.lrt.handshake_retry,
            peers[0].is_some(),
        )?;
        let inner = Inner {
            conn: MpConnection::new(conn, mp, n),
            keyx,
            peers,
            peer_life: None,
            stats: MpSocketStats::default(),
            shutdown: false,
        };
        let shared = Arc::new(Shared::new(inner, waker));
        let s2 = shared.clone();
        let thread = std::thread::Builder::new().name("cohort-mp".into()).spawn(move || {
            if let Err(e) = drive(&s2, poll, &socks, timer) {
                tracing::error!(%e, "multipath driver stopped");
            }
            s2.lock().shutdown = true;
            s2.notify();
        })?;
        Ok(MpLrtSocket { shared, thread: Some(thread), locals })
    }

    /// Connects over `paths` (local address, peer address each; path 0 carries the key
    /// exchange) and waits for the handshake.
    pub fn connect(paths: &[(SocketAddr, SocketAddr)], cfg: SocketConfig, mp: MpConfig) -> Result<Self, NetError> {
        let s = Self::start_connect(paths, cfg, mp)?;
        s.wait_connected(None)?;
        Ok(s)
    }

    /// As [`connect`](Self::connect), but returns as soon as the handshake has begun;
    /// [`wait_connected`](Self::wait_connected) waits for it.
    pub fn start_connect(
        paths: &[(SocketAddr, SocketAddr)],
        cfg: SocketConfig,
        mp: MpConfig,
    ) -> Result<Self, NetError> {
        let socks = paths.iter().map(|(l, _)| bind(*l, &cfg)).collect::<Result<Vec<_>, _>>()?;
        let conn_id = cohort_wire::frame::random_epoch()?;
        let conn = Connection::connect(cfg.lrt.clone(), conn_id, cohort_time::Instant::ZERO)
            .map_err(|e| NetError::Config(e.to_string()))?;
        let peers = paths.iter().map(|(_, p)| Some(*p)).collect();
        Self::start(socks, conn, &cfg, mp, peers)
    }

    /// Binds `locals` (path `i` on address `i`) and returns at once; a peer's key exchange on
    /// path 0 connects it.
    pub fn listen(locals: &[SocketAddr], cfg: SocketConfig, mp: MpConfig) -> Result<Self, NetError> {
        let socks = locals.iter().map(|l| bind(*l, &cfg)).collect::<Result<Vec<_>, _>>()?;
        let conn = Connection::accept(cfg.lrt.clone(), cohort_time::Instant::ZERO)
            .map_err(|e| NetError::Config(e.to_string()))?;
        let peers = vec![None; locals.len()];
        Self::start(socks, conn, &cfg, mp, peers)
    }

    /// Waits (up to `timeout`, or forever) until the handshake is done.
    pub fn wait_connected(&self, timeout: Option<Duration>) -> Result<(), NetError> {
        endpoint::wait_connected(&self.shared, timeout)
    }

    /// Queues a message without blocking.
    pub fn try_send(&self, msg: &[u8]) -> Result<(), NetError> {
        endpoint::try_send(&self.shared, msg)
    }

    /// Queues a message, waiting while the send buffer is full.
    pub fn send(&self, msg: &[u8]) -> Result<(), NetError> {
        endpoint::send(&self.shared, msg)
    }

    /// The next message without blocking.
    pub fn try_recv(&self) -> Result<Option<Vec<u8>>, NetError> {
        endpoint::try_recv(&self.shared)
    }

    /// The next message, waiting up to `timeout` (forever with `None`).
    pub fn recv_timeout(&self, timeout: Option<Duration>) -> Result<Vec<u8>, NetError> {
        endpoint::recv_timeout(&self.shared, timeout)
    }

    pub fn recv(&self) -> Result<Vec<u8>, NetError> {
        self.recv_timeout(None)
    }

    /// Async `send` (any executor).
    pub async fn send_async(&self, msg: &[u8]) -> Result<(), NetError> {
        endpoint::send_async(&self.shared, msg).await
    }

    /// Async `recv`.
    pub async fn recv_async(&self) -> Result<Vec<u8>, NetError> {
        endpoint::recv_async(&self.shared).await
    }

    /// Waits until everything sent so far has been seen by the peer.
    pub fn flush(&self, timeout: Option<Duration>) -> Result<(), NetError> {
        endpoint::flush(&self.shared, timeout)
    }

    pub fn stats(&self) -> MpSocketStats {
        let g = self.shared.lock();
        let mut s = g.stats.clone();
        s.conn = g.conn.conn().stats();
        s.mp = g.conn.stats();
        (s.frames, s.rejected_frames) = g.keyx.counters();
        s.keys = g.keyx.stats;
        s
    }

    /// Each path's bandit statistics so far (MS-UCB's `u`, `v`), to share with the team
    /// (`crate::federated`).
    pub fn arm_stats(&self) -> Vec<ArmStats> {
        self.shared.lock().conn.arm_stats()
    }

    /// The super-arms MS-UCB played (path indices per round), the first `n` rounds (the
    /// connection logs its first 10 000): how a start explored, for its regret.
    pub fn rounds_played(&self, n: usize) -> Vec<Vec<usize>> {
        self.shared.lock().conn.rounds_played().iter().take(n).cloned().collect()
    }

    /// Starts path `path`'s bandit statistics from what the team shared (Eqs. 17-18); a path
    /// out of range is ignored.
    pub fn federated_start(&self, path: usize, stats: ArmStats) {
        let mut g = self.shared.lock();
        if path < g.conn.paths() {
            g.conn.federated_start(path, stats);
        }
    }

    /// The local address of each path.
    pub fn local_addrs(&self) -> &[SocketAddr] {
        &self.locals
    }

    /// Each path's peer address, as far as known.
    pub fn peer_addrs(&self) -> Vec<Option<SocketAddr>> {
        self.shared.lock().peers.clone()
    }

    /// Closes the connection (the peer is told) and stops the driver.
    pub fn close(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        self.shared.lock().conn.conn_mut().close();
        let _ = self.shared.waker.wake();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for MpLrtSocket {
    fn drop(&mut self) {
        self.stop();
    }
}

fn drive(shared: &Shared<Inner>, mut poll: Poll, socks: &[UdpSocket], timer: TimerFd) -> Result<(), NetError> {
    let mut events = Events::with_capacity(64);
    let mut plain = vec![0u8; 70_000];
    let mut wire = vec![0u8; 70_000];
    let n = socks.len();
    let mut closed_at = None;
    loop {
        {
            let mut g = shared.lock();
            let now = shared.clock.now();
            g.conn.handle_timeout(now);
            transmit(&mut g, socks, now, &mut plain, &mut wire);
            let can_send = g.peers[0].is_some() && g.keyx.secure().is_some();
            if crate::endpoint::closing_done(g.conn.conn(), can_send, now, &mut closed_at) {
                drop(g);
                shared.notify();
                return Ok(());
            }
            // `transmit` sends once the session is up (a path with no peer address yet counts
            // its packets as lost), so that is when the connection's own deadlines count.
            let secure = g.keyx.secure().is_some();
            let deadline =
                crate::endpoint::deadline(g.conn.conn(), g.conn.poll_timeout(), g.keyx.poll_timeout(), secure);
            timer.set(deadline.map(|t| shared.clock.to_std(t)))?;
        }
        shared.notify();
        crate::shared::wait_events(&mut poll, &mut events)?;
        for ev in events.iter() {
            match ev.token() {
                Token(i) if i < n => receive(shared, i, &socks[i], &mut wire),
                Token(i) if i == n => {
                    timer.acknowledge();
                }
                _ => {}
            }
        }
        if shared.lock().shutdown {
            return Ok(());
        }
    }
}

fn send(stats: &mut MpSocketStats, sock: &UdpSocket, to: SocketAddr, datagram: &[u8]) {
    match sock.send_to(datagram, to) {
        Ok(_) => stats.datagrams_sent += 1,
        // A full buffer or a route error is a lost datagram; the path's reports show it.
        Err(e) => tracing::debug!(%e, "multipath: send_to"),
    }
}

fn transmit(g: &mut Inner, socks: &[UdpSocket], now: cohort_time::Instant, plain: &mut [u8], wire: &mut [u8]) {
    if let (Some(n), Some(peer)) = (g.keyx.poll_message(now, wire), g.peers[0]) {
        send(&mut g.stats, &socks[0], peer, &wire[..n]);
    }
    if g.keyx.secure().is_none() {
        return;
    }
    while let Some((path, len)) = g.conn.poll_transmit(now, plain) {
        let Some(sec) = g.keyx.secure() else { return };
        let Ok(n) = sec.seal(&plain[..len], wire) else {
            // Packet numbers exhausted: the connection cannot go on under this session.
            g.conn.conn_mut().close();
            return;
        };
        match g.peers[path] {
            Some(peer) => send(&mut g.stats, &socks[path], peer, &wire[..n]),
            None => g.stats.no_peer_address += 1,
        }
    }
}

fn receive(shared: &Shared<Inner>, path: usize, sock: &UdpSocket, buf: &mut [u8]) {
    crate::shared::drain(sock, buf, |datagram, from| {
        let mut g = shared.lock();
        g.stats.datagrams_received += 1;
        let now = shared.clock.now();
        if KeyExchange::is_handshake(datagram) {
            let timeout = g.conn.conn().config().handshake_timeout;
            let mut out = [0u8; crate::keyx::HANDSHAKE_DATAGRAM];
            match g.keyx.on_handshake(datagram, now, timeout, &mut out) {
                Handshake::Answer(n) => send(&mut g.stats, sock, from, &out[..n]),
                Handshake::Established(life) => g.peer_life = Some(life),
                Handshake::Nothing => {}
            }
            return;
        }
        let Some(o) = g.keyx.open(datagram) else {
            return;
        };
        if o.established {
            g.peer_life = Some(o.life);
        }
        if g.peer_life != Some(o.life) {
            g.stats.foreign_sender += 1;
            return;
        }
        // The path's peer address: learned from its first authentic datagram, and following
        // the peer's newest one (a rebinding NAT); a path whose address goes wrong fails and
        // the others carry the connection.
        g.peers[path] = Some(from);
        let payload = o.payload(datagram);
        g.conn.handle_datagram(now, path, payload);
    });
}
