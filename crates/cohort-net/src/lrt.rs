//! `LrtSocket`: one LRT connection over a UDP socket.

use crate::endpoint;
use crate::keyx::{Handshake, KeyExchange, KeyExchangeStats};
use crate::secure::SecureError;
use crate::shared::Shared;
use crate::timer::TimerFd;
use cohort_proto::lrt::{self, CloseReason, ConnStats, Connection};
use cohort_wire::frame::kind;
use mio::net::UdpSocket;
use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Token, Waker};
use std::io;
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

mod listener;
pub use listener::{ListenerStats, LrtListener};

const SOCKET: Token = Token(0);
const TIMER: Token = Token(1);
const WAKE: Token = Token(2);

/// How to open a socket.
#[derive(Debug, Clone)]
pub struct SocketConfig {
    pub lrt: lrt::Config,
    /// The team secret every member holds; keys are derived from it.
    pub team_secret: Vec<u8>,
    pub team_id: u32,
    /// This endpoint's sender ID within the team (frame nonces are unique per sender).
    pub sender_id: u32,
    /// DSCP code point for outgoing datagrams (0..=63), e.g. 46 (EF) for control traffic.
    pub dscp: Option<u8>,
    /// Linux `SO_PRIORITY` (0..=6 without CAP_NET_ADMIN), which picks the Wi-Fi access category.
    pub priority: Option<u32>,
}

impl SocketConfig {
    /// A configuration with default LRT parameters.
    pub fn new(team_secret: impl Into<Vec<u8>>, team_id: u32, sender_id: u32) -> Self {
        SocketConfig {
            lrt: lrt::Config::default(),
            team_secret: team_secret.into(),
            team_id,
            sender_id,
            dscp: None,
            priority: None,
        }
    }
}

/// What went wrong.
#[derive(Debug, thiserror::Error)]
pub enum NetError {
    #[error("socket: {0}")]
    Io(#[from] io::Error),
    #[error("invalid configuration: {0}")]
    Config(String),
    #[error("connection closed: {0:?}")]
    Closed(CloseReason),
    #[error("message of {0} bytes: messages are 1 byte to 16 MiB")]
    MessageSize(usize),
    #[error("send buffer full")]
    WouldBlock,
    #[error("timed out")]
    TimedOut,
    #[error(transparent)]
    Entropy(#[from] cohort_wire::frame::EntropyError),
}

/// Counters of the socket, besides the connection's own.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct SocketStats {
    pub conn: ConnStats,
    pub datagrams_sent: u64,
    pub wire_bytes_sent: u64,
    pub datagrams_received: u64,
    pub wire_bytes_received: u64,
    /// Datagrams that failed a frame check, all reasons together...
    pub rejected_frames: u64,
    /// ...and by reason.
    pub frames: cohort_wire::frame::RejectCounters,
    /// Authenticated datagrams from a sender other than the connected peer (another sender id,
    /// or another life of the peer's: a restarted peer must open a new connection).
    pub foreign_sender: u64,
    /// Times the peer moved to a new address: its newest datagram came from there, and it
    /// answered a path challenge sent there.
    pub migrations: u64,
    /// Path challenges sent to a new address of the peer, and answered by this socket.
    pub path_challenges: u64,
    pub path_responses: u64,
    /// Path datagrams that were malformed or answered no open challenge (a stale or spoofed
    /// path).
    pub path_refused: u64,
    /// Datagrams also sent to a new address of the peer while its challenge was open (no more
    /// bytes than three times what came from there, as QUIC limits an unvalidated path).
    pub path_copies: u64,
    /// The session key exchange.
    pub keys: KeyExchangeStats,
}

/// A challenge sent to a new address of the peer, awaiting its response from there.
#[derive(Debug, Clone, Copy)]
struct PathCheck {
    addr: SocketAddr,
    token: [u8; 8],
    sent: cohort_time::Instant,
    /// Bytes of the peer's authentic datagrams from `addr`, and of the copies sent there.
    bytes_in: u64,
    bytes_out: u64,
}

/// An unvalidated address gets at most this many times the bytes that came from it (RFC 9000
/// §8.1's anti-amplification factor), so a forged source address buys an attacker no flood.
const PATH_AMPLIFICATION: u64 = 3;

/// A challenge to a new address is sent again after this long, on the peer's next datagram
/// from there.
const PATH_RETRY: Duration = Duration::from_millis(50);
const PATH_CHALLENGE: u8 = 1;
const PATH_RESPONSE: u8 = 2;

#[derive(Debug)]
struct Inner {
    conn: Connection,
    /// The session key exchange, then the session's keys.
    keyx: KeyExchange,
    /// The peer's address and, once it has spoken, its sender id and life (epoch).
    peer: Option<(SocketAddr, Option<(u32, u64)>)>,
    /// The open path challenge, if the peer spoke from a new address.
    path: Option<PathCheck>,
    stats: SocketStats,
    shutdown: bool,
}

impl endpoint::Driven for Inner {
    fn conn(&self) -> &Connection {
        &self.conn
    }
    fn conn_mut(&mut self) -> &mut Connection {
        &mut self.conn
    }
    fn is_shutdown(&self) -> bool {
        self.shutdown
    }
}

/// A coded-transport connection over UDP. See the [crate docs](crate).
#[derive(Debug)]
pub struct LrtSocket {
    shared: Arc<Shared<Inner>>,
    thread: Option<JoinHandle<()>>,
    local: SocketAddr,
}

pub(crate) fn bind(addr: SocketAddr, cfg: &SocketConfig) -> Result<std::net::UdpSocket, NetError> {
    use socket2::{Domain, Protocol, Socket, Type};
    let s = Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP))?;
    if let Some(dscp) = cfg.dscp {
        if dscp > 63 {
            return Err(NetError::Config(format!("dscp {dscp} exceeds 63")));
        }
        if addr.is_ipv4() {
            s.set_tos_v4(u32::from(dscp) << 2)?;
        } else {
            s.set_tclass_v6(u32::from(dscp) << 2)?;
        }
    }
    if let Some(p) = cfg.priority {
        s.set_priority(p)?;
    }
    s.set_nonblocking(true)?;
    s.bind(&addr.into())?;
    Ok(s.into())
}

/// A driver's socket, poll, timer and waker (a socket's own, or a listener's for all its
/// connections).
struct Io {
    local: SocketAddr,
    sock: UdpSocket,
    poll: Poll,
    timer: TimerFd,
    waker: Arc<Waker>,
}

impl Io {
    fn new(std_sock: std::net::UdpSocket) -> Result<Self, NetError> {
        let local = std_sock.local_addr()?;
        let mut sock = UdpSocket::from_std(std_sock);
        let poll = Poll::new()?;
        let timer = TimerFd::new()?;
        poll.registry().register(&mut sock, SOCKET, Interest::READABLE)?;
        poll.registry().register(&mut SourceFd(&timer.as_raw_fd()), TIMER, Interest::READABLE)?;
        let waker = Arc::new(Waker::new(poll.registry(), WAKE)?);
        Ok(Io { local, sock, poll, timer, waker })
    }
}

impl LrtSocket {
    fn start(
        std_sock: std::net::UdpSocket,
        conn: Connection,
        cfg: &SocketConfig,
        peer: Option<SocketAddr>,
    ) -> Result<Self, NetError> {
        let Io { local, sock, poll, timer, waker } = Io::new(std_sock)?;
        let keyx = KeyExchange::new(
            &cfg.team_secret,
            cfg.team_id,
            cfg.sender_id,
            (kind::LRT, kind::PATH),
            cfg.lrt.handshake_retry,
            peer.is_some(),
        )?;
        let inner = Inner {
            conn,
            keyx,
            peer: peer.map(|a| (a, None)),
            path: None,
            stats: SocketStats::default(),
            shutdown: false,
        };
        let shared = Arc::new(Shared::new(inner, waker));
        let s2 = shared.clone();
        let thread = std::thread::Builder::new().name("cohort-lrt".into()).spawn(move || {
            if let Err(e) = drive(&s2, poll, sock, timer) {
                tracing::error!(%e, "lrt driver stopped");
            }
            s2.lock().shutdown = true;
            s2.notify();
        })?;
        Ok(LrtSocket { shared, thread: Some(thread), local })
    }

    /// Connects to `peer` and waits for the handshake to finish.
    pub fn connect(peer: SocketAddr, cfg: SocketConfig) -> Result<Self, NetError> {
        let s = Self::start_connect(peer, cfg)?;
        s.wait_connected(None)?;
        Ok(s)
    }

    /// As [`connect`](Self::connect), but returns as soon as the handshake has begun;
    /// [`wait_connected`](Self::wait_connected) waits for it (a caller that must stay
    /// interruptible waits in slices, as the Python binding does for Ctrl-C).
    pub fn start_connect(peer: SocketAddr, cfg: SocketConfig) -> Result<Self, NetError> {
        let any: SocketAddr = if peer.is_ipv4() { "0.0.0.0:0" } else { "[::]:0" }
            .parse()
            .map_err(|_| NetError::Config("address".into()))?;
        let sock = bind(any, &cfg)?;
        let clock_now = cohort_time::Instant::ZERO;
        // Random, so no two connections (processes in containers share pids) share an id.
        let conn_id = cohort_wire::frame::random_epoch()?;
        let conn =
            Connection::connect(cfg.lrt.clone(), conn_id, clock_now).map_err(|e| NetError::Config(e.to_string()))?;
        Self::start(sock, conn, &cfg, Some(peer))
    }

    /// Binds `addr` and returns at once; a peer's HELLO will connect it (see
    /// [`wait_connected`](Self::wait_connected)). Until then `local_addr` tells the port.
    pub fn listen(addr: SocketAddr, cfg: SocketConfig) -> Result<Self, NetError> {
        let sock = bind(addr, &cfg)?;
        let conn = Connection::accept(cfg.lrt.clone(), cohort_time::Instant::ZERO)
            .map_err(|e| NetError::Config(e.to_string()))?;
        Self::start(sock, conn, &cfg, None)
    }

    /// Waits (up to `timeout`, or forever) until the handshake is done.
    pub fn wait_connected(&self, timeout: Option<Duration>) -> Result<(), NetError> {
        endpoint::wait_connected(&self.shared, timeout)
    }

    /// Binds `addr` and waits (up to `timeout`, or forever) for one peer to connect.
    pub fn accept(addr: SocketAddr, cfg: SocketConfig, timeout: Option<Duration>) -> Result<Self, NetError> {
        let s = Self::listen(addr, cfg)?;
        s.wait_connected(timeout)?;
        Ok(s)
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

    /// The next message, waiting as long as it takes.
    pub fn recv(&self) -> Result<Vec<u8>, NetError> {
        self.recv_timeout(None)
    }

    /// Async `send`: resolves once the message is queued. Works on any executor: the driver
    /// thread wakes the task.
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

    /// Counters so far.
    pub fn stats(&self) -> SocketStats {
        let g = self.shared.lock();
        let mut s = g.stats;
        s.conn = g.conn.stats();
        (s.frames, s.rejected_frames) = g.keyx.counters();
        s.keys = g.keyx.stats;
        s
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    pub fn peer_addr(&self) -> Option<SocketAddr> {
        self.shared.lock().peer.map(|p| p.0)
    }

    /// Closes the connection (the peer is told) and stops the driver.
    pub fn close(mut self) {
        self.stop(true);
    }

    fn stop(&mut self, close: bool) {
        {
            let mut g = self.shared.lock();
            if close {
                g.conn.close();
            }
        }
        let _ = self.shared.waker.wake();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for LrtSocket {
    fn drop(&mut self) {
        self.stop(true);
    }
}

fn drive(shared: &Shared<Inner>, mut poll: Poll, sock: UdpSocket, timer: TimerFd) -> Result<(), NetError> {
    let mut events = Events::with_capacity(64);
    let mut plain = vec![0u8; 70_000];
    let mut wire = vec![0u8; 70_000];
    let mut closed_at = None;
    loop {
        {
            let mut g = shared.lock();
            let now = shared.clock.now();
            g.conn.handle_timeout(now);
            transmit(&mut g, &sock, now, &mut plain, &mut wire)?;
            // A closed connection stays through its closing period (its CLOSE sent again to a
            // peer that did not hear it), unless it has no peer to tell.
            let can_send = g.peer.is_some() && g.keyx.secure().is_some();
            if crate::endpoint::closing_done(&g.conn, can_send, now, &mut closed_at) {
                drop(g);
                shared.notify();
                return Ok(());
            }
            let deadline = crate::endpoint::deadline(&g.conn, g.conn.poll_timeout(), g.keyx.poll_timeout(), can_send);
            timer.set(deadline.map(|t| shared.clock.to_std(t)))?;
        }
        shared.notify();
        crate::shared::wait_events(&mut poll, &mut events)?;
        for ev in events.iter() {
            match ev.token() {
                TIMER => {
                    timer.acknowledge();
                }
                SOCKET => receive(shared, &sock, &mut wire),
                _ => {}
            }
        }
        if shared.lock().shutdown {
            return Ok(());
        }
    }
}

fn transmit(
    g: &mut Inner,
    sock: &UdpSocket,
    now: cohort_time::Instant,
    plain: &mut [u8],
    wire: &mut [u8],
) -> Result<(), NetError> {
    let Some((peer, _)) = g.peer else {
        return Ok(());
    };
    if let Some(n) = g.keyx.poll_message(now, wire) {
        send_datagram(&mut g.stats, sock, peer, &wire[..n]);
    }
    let Some(sec) = g.keyx.secure() else {
        return Ok(());
    };
    loop {
        let pn = sec.next_pn();
        let Some(n) = g.conn.poll_transmit(now, pn, plain) else {
            return Ok(());
        };
        let len = match sec.seal(&plain[..n], wire) {
            Ok(len) => len,
            Err(SecureError::Exhausted) => {
                g.conn.close();
                return Ok(());
            }
            Err(e) => return Err(NetError::Io(io::Error::other(e.to_string()))),
        };
        if !send_datagram(&mut g.stats, sock, peer, &wire[..len]) {
            return Ok(());
        }
        // While a new address of the peer is being validated, a copy goes there too: a peer
        // that really moved (its old address is gone) receives without waiting a round trip
        // for the challenge, and a spoofed address gets only its bounded share of copies.
        if let Some(p) = g.path.as_mut()
            && p.bytes_out + len as u64 <= PATH_AMPLIFICATION * p.bytes_in
        {
            p.bytes_out += len as u64;
            let to = p.addr;
            g.stats.path_copies += 1;
            send_datagram(&mut g.stats, sock, to, &wire[..len]);
        }
    }
}

/// Sends one datagram, counted; `false` if the socket buffer is full (a lost datagram: coding
/// repairs it like any other loss, as it does a transient route error).
fn send_datagram(stats: &mut SocketStats, sock: &UdpSocket, to: SocketAddr, datagram: &[u8]) -> bool {
    match sock.send_to(datagram, to) {
        Ok(_) => {
            stats.datagrams_sent += 1;
            stats.wire_bytes_sent += datagram.len() as u64;
            true
        }
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => false,
        Err(e) => {
            tracing::debug!(%e, "lrt: send_to failed");
            true
        }
    }
}

/// Seals one path datagram (`what` and its token) under the session and sends it to `to`.
fn send_path(g: &mut Inner, sock: &UdpSocket, to: SocketAddr, what: u8, token: [u8; 8]) {
    let mut plain = [0u8; 9];
    plain[0] = what;
    plain[1..].copy_from_slice(&token);
    let mut wire = [0u8; 9 + cohort_wire::frame::OVERHEAD];
    let Some(sec) = g.keyx.secure() else { return };
    match sec.seal_as(kind::PATH, &plain, &mut wire) {
        Ok(n) => {
            send_datagram(&mut g.stats, sock, to, &wire[..n]);
        }
        Err(e) => tracing::debug!(%e, "lrt: sealing a path datagram"),
    }
}

/// The peer's newest datagram came from `from`, not its known address: challenge `from` (as
/// QUIC's path validation does) unless a challenge went there a moment ago. The socket keeps
/// answering at the known address until the response proves the peer receives at `from`.
fn challenge(g: &mut Inner, sock: &UdpSocket, from: SocketAddr, now: cohort_time::Instant) {
    if g.path.is_some_and(|p| p.addr == from && now.saturating_duration_since(p.sent) < PATH_RETRY) {
        return;
    }
    let mut token = [0u8; 8];
    if getrandom::fill(&mut token).is_err() {
        // No entropy: never move rather than move on a guessable challenge.
        g.stats.path_refused += 1;
        return;
    }
    let (bytes_in, bytes_out) = g.path.filter(|p| p.addr == from).map_or((0, 0), |p| (p.bytes_in, p.bytes_out));
    g.path = Some(PathCheck { addr: from, token, sent: now, bytes_in, bytes_out });
    g.stats.path_challenges += 1;
    send_path(g, sock, from, PATH_CHALLENGE, token);
}

/// A path datagram of the peer's life from `from`: answer a challenge where it came from;
/// move to `from` on the response to the open challenge sent there.
fn on_path(g: &mut Inner, sock: &UdpSocket, from: SocketAddr, payload: &[u8]) {
    let Ok(&[what, ref token @ ..]) = <&[u8; 9]>::try_from(payload) else {
        g.stats.path_refused += 1;
        return;
    };
    match what {
        PATH_CHALLENGE => {
            g.stats.path_responses += 1;
            send_path(g, sock, from, PATH_RESPONSE, *token);
        }
        PATH_RESPONSE if g.path.is_some_and(|p| p.addr == from && p.token == *token) => {
            g.path = None;
            if let Some((addr, life)) = g.peer
                && addr != from
            {
                g.peer = Some((from, life));
                g.stats.migrations += 1;
            }
        }
        _ => g.stats.path_refused += 1,
    }
}

fn receive(shared: &Shared<Inner>, sock: &UdpSocket, buf: &mut [u8]) {
    crate::shared::drain(sock, buf, |datagram, from| {
        let mut g = shared.lock();
        let now = shared.clock.now();
        on_datagram(&mut g, sock, datagram, from, now);
    });
}

/// One datagram for this connection: the key exchange, a path datagram, or the peer's LRT
/// packet (counted, opened, handed to the connection).
fn on_datagram(g: &mut Inner, sock: &UdpSocket, datagram: &mut [u8], from: SocketAddr, now: cohort_time::Instant) {
    g.stats.datagrams_received += 1;
    g.stats.wire_bytes_received += datagram.len() as u64;
    if KeyExchange::is_handshake(datagram) {
        let timeout = g.conn.config().handshake_timeout;
        let mut out = [0u8; crate::keyx::HANDSHAKE_DATAGRAM];
        match g.keyx.on_handshake(datagram, now, timeout, &mut out) {
            Handshake::Answer(n) => {
                send_datagram(&mut g.stats, sock, from, &out[..n]);
            }
            Handshake::Established(life) => {
                if let Some((addr, _)) = g.peer {
                    g.peer = Some((addr, Some(life)));
                }
            }
            Handshake::Nothing => {}
        }
        return;
    }
    let Some(o) = g.keyx.open(datagram) else {
        return;
    };
    if o.established {
        g.peer = Some((from, Some(o.life)));
    }
    let payload = o.payload(datagram);
    let life = Some(o.life);
    if o.kind == kind::PATH {
        match g.peer {
            Some((_, known)) if known.is_some() && known == life => on_path(g, sock, from, payload),
            _ => g.stats.foreign_sender += 1,
        }
        return;
    }
    match g.peer {
        Some((addr, None)) if addr == from => g.peer = Some((addr, life)),
        Some((addr, known)) if known.is_some() && known == life => {
            // A move (a NAT rebinding, a drone changing access point): the peer's life
            // spoke from a new address with its newest packet, which only a holder of the
            // session's key can seal, and no replay can be. Before answering there, make
            // sure the peer receives there too (a datagram whose source an on-path
            // attacker rewrote must not redirect the connection).
            let newest = g.keyx.secure().is_some_and(|sec| sec.is_newest(o.life.0, o.life.1, o.pn));
            if addr != from && newest {
                challenge(g, sock, from, now);
            }
            if let Some(p) = g.path.as_mut()
                && p.addr == from
            {
                p.bytes_in += datagram.len() as u64;
            }
        }
        None => g.peer = Some((from, life)),
        Some(_) => {
            g.stats.foreign_sender += 1;
            return;
        }
    }
    g.conn.handle_packet(now, o.pn, payload);
}
