//! Point-to-point baselines of seed 003 §VI ("EVALUATION"), over plain std sockets.
//!
//! GCBRR is compared in the paper against point-to-point transports that do the same work with
//! unicasts. This module implements those baselines so the group bench can run them on the same
//! emulated 802.11 channel (1 Mbit/s, one network namespace per node) in the same invocation.
//! Everything here is blocking std-socket code, IPv4 or IPv6, with no namespace logic: the
//! harness calls these functions from threads that already sit inside the right namespace, and
//! sockets created by a thread stay in the namespace the thread was in when it created them.
//!
//! # Boundedness
//!
//! Every client-side function takes a `deadline: Instant` and returns an
//! [`io::ErrorKind::TimedOut`] error instead of hanging. Every server-side loop takes a stop
//! flag (`&AtomicBool`) and polls it at least every [`STOP_POLL`] (50 ms). TCP clients retry a
//! refused connection every 20 ms until the deadline, so a client may be started before its
//! server has bound; the servers also offer a two-phase API (`bind`, then `serve`/`run`) so the
//! harness (and the tests, which use ephemeral ports) can learn the bound address first.
//!
//! # Framing
//!
//! * **TCP**: every message is a frame `len: u32 (big-endian) | body[len]`; a body longer than
//!   [`MAX_FRAME_LEN`] is rejected with [`io::ErrorKind::InvalidData`] (never a panic).
//! * **UDP**: one message per datagram, no prefix.
//! * Bodies start with a one-byte tag and big-endian header fields, then are padded with dummy
//!   bytes (`0xA5`) to the requested length. A requested length shorter than the header is
//!   raised to the header length (9 bytes for request-reply, 10 for N-to-1 messages).
//! * `bytes_sent` counters count the bytes handed to the socket (bodies plus TCP length
//!   prefixes), not IP/UDP/TCP headers, TCP ACKs or 802.11 overhead.
//!
//! # §VI-B: 1-to-N request-reply ([`Rr`], [`rr_coordinator`], [`RrServer`])
//!
//! The coordinator issues `interactions` requests at full speed; each interaction completes when
//! every member (ordinary process) has replied. Request body `0x51 | seq: u64 | padding`, reply
//! body `0x52 | seq: u64 | padding`; the harness fills both to its payload size
//! ([`super::one_frame_payload`]: every system's message then fills one full-MTU frame, the
//! paper's "maximum payload size").
//!
//! * **TCP-SEQ / TCP-PAR**: the coordinator keeps one TCP connection per member (TCP_NODELAY),
//!   opened before the first interaction and reused for all of them (connection setup is not in
//!   the measured time). SEQ sends the request to member 1, waits for its reply, then member 2,
//!   and so on; PAR writes the request to every connection, then waits for all replies. Both are
//!   driven by one `poll(2)` loop over nonblocking sockets, so a PAR round really has all
//!   requests in flight at once.
//! * **RUP-SEQ / RUP-PAR** ("reliable unicast protocol"): plain UDP datagrams. The request
//!   carries a sequence number (one per interaction, starting at 1); the reply acknowledges it.
//!   The coordinator retransmits the request to every member whose reply has not arrived within
//!   the retransmission timeout. The member caches its last reply per coordinator address and
//!   re-sends it on a duplicate request without handling the request again (exactly-once), and
//!   ignores requests older than its cache. SEQ/PAR as for TCP.
//!
//! **RTO choice** ([`Rto`]): adaptive, RFC 6298 style. One estimator per coordinator run takes a
//! sample per reply (time from that member's request transmission to its reply; never from a
//! retransmitted request — Karn's rule), `RTO = SRTT + 4·RTTVAR`, clamped to `[min, max]`, and
//! doubled per retransmission of the same request. Before the first sample it is
//! `initial`. Defaults: `initial` 500 ms (a PAR round to 11 members at 1 Mbit/s — 22 frames
//! of ~13 ms airtime plus MAC acks — takes ~300 ms, so this does not fire spuriously on the first
//! round), `min` 60 ms (twice the ~26 ms RTT of a 1500-byte exchange), `max` 4 s. A fixed RTO
//! would have to be tuned per group size and per SEQ/PAR: in PAR the samples include the queueing
//! behind the other members' frames, so the estimate grows with the group by itself (samples
//! spread from ~26 ms to ~300 ms give an RTO around 450 ms), while in SEQ it settles near `min`.
//!
//! # §VI-C: N-to-1 message flow ([`Flow`], [`flow_source`], [`FlowSink`])
//!
//! Every ordinary process sends `messages` messages of `len` bytes to the coordinator at full
//! speed. Message body `0x44 | sender: u32 | index: u32 | bit: u8 | padding`; the sink identifies
//! the sender by the `sender` field, not by address.
//!
//! * **TCP-PAR**: one TCP connection per sender (TCP_NODELAY); blocking `write_all` per frame.
//! * **RUP-PAR**: UDP with an alternating-bit scheme: the sender sends message `i` with
//!   `bit = i mod 2`, waits for the ack `0x41 | sender: u32 | bit: u8 | index: u32`,
//!   retransmits on timeout (the same adaptive [`Rto`], one estimator per sender), then moves on.
//!   The sink delivers a datagram whose bit equals the bit it expects from that sender (and
//!   flips it), acks every datagram with the datagram's bit, and counts the others as
//!   duplicates. After it has everything, the sink keeps acknowledging for a quiet period
//!   ([`FlowTimers::rup_linger`]) so a sender whose last ack was lost can finish.
//! * **UUP-PAR**: unreliable UDP unicasts, back to back, no pacing, exactly `messages` sends.
//!   Send errors from a full queue (`ENOBUFS`, `EAGAIN`) count as losses, not failures. The sink
//!   ends at the deadline, on stop, or after [`FlowTimers::uup_quiet`] without arrivals; loss is
//!   expected and reported, not an error.
//!
//! The "messaging delay" of the paper is [`SourceRun::gaps`]: the time between the starts of
//! consecutive message transmissions at a sender (for TCP it can be ~0 while the socket buffer
//! absorbs the writes, as the paper notes). The aggregate throughput is computed at the sink
//! from [`SinkRun::first_arrival`] and [`SinkRun::last_arrival`].
//!
//! # §VI-D: TCP-based group management ([`GmCoordinator`], [`GmMember`])
//!
//! The coordinator keeps one TCP connection per member and runs a single-threaded `poll(2)`
//! event loop over the listener and the connections. A join poll is one UDP datagram
//! `"CGMP" | epoch: u32` sent to each address in [`GmRound::poll_to`] (the testbed's broadcast
//! address, e.g. `10.77.0.255:port`; `SO_BROADCAST` is set). A joiner that receives it opens a
//! TCP connection to the coordinator — no join request is sent. When the join window
//! ([`GmRound::join_t`]) closes, the coordinator pushes the new view over each connection, old
//! members first (in join order), then the new ones, and waits for every member's
//! acknowledgment. View body: `0x56 | epoch: u32 | count: u16 | entries`, entry
//! `id: u32 | join_epoch: u32 | family: u8 (4 or 6) | ip (4 or 16 bytes) | port: u16`; the
//! coordinator is entry id 0. View ack body: `0x57 | epoch: u32`. A member finds itself in the
//! view by its TCP connection's local address; a joiner is a member once it has received a view
//! that contains it.
//!
//! Measured: at each joiner, poll received → view received ([`GmMemberRun::join_delay`]); at
//! the coordinator, poll sent → every member acknowledged the view ([`GmRun::update_delay`]).
//! The join poll is sent once (the paper's "single join poll"); a joiner that misses it does
//! not join in that round and shows up as missing in [`GmRun::joined`].
//!
//! Harness sequence: [`GmCoordinator::bind`]; start the N−1 initial members
//! ([`GmMember::initial`] then [`GmMember::run`], in their threads);
//! [`GmCoordinator::accept_initial`] (accepts them and pushes the initial view); create the
//! 12−N joiners with [`GmMember::joiner`] (which binds the poll socket) and only then call
//! their `run`, and once all are bound call [`GmCoordinator::join_round`]; finally set the
//! members' stop flag.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Display;
use std::io::{self, Read, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// How often every server loop checks its stop flag (upper bound).
pub const STOP_POLL: Duration = Duration::from_millis(50);

/// Largest TCP frame body accepted; a longer length prefix is an [`io::ErrorKind::InvalidData`]
/// error.
pub const MAX_FRAME_LEN: usize = 1 << 20;

/// How long a TCP client waits between attempts while its server is not listening yet.
const CONNECT_RETRY: Duration = Duration::from_millis(20);

const LEN_PREFIX: usize = 4;
const PAD_BYTE: u8 = 0xA5;

const TAG_REQUEST: u8 = 0x51;
const TAG_REPLY: u8 = 0x52;
const TAG_DATA: u8 = 0x44;
const TAG_ACK: u8 = 0x41;
const TAG_VIEW: u8 = 0x56;
const TAG_VIEW_ACK: u8 = 0x57;
const POLL_MAGIC: &[u8; 4] = b"CGMP";

/// Header of a request or reply: tag + seq.
const RR_HEADER: usize = 9;
/// Header of an N-to-1 data message: tag + sender + index + bit.
const FLOW_HEADER: usize = 10;

// ---------------------------------------------------------------------------------------------
// Small helpers
// ---------------------------------------------------------------------------------------------

fn with_context(e: io::Error, what: impl Display) -> io::Error {
    io::Error::new(e.kind(), format!("{what}: {e}"))
}

fn invalid_data(msg: impl Display) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg.to_string())
}

fn invalid_input(msg: impl Display) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, msg.to_string())
}

fn timed_out(what: impl Display) -> io::Error {
    io::Error::new(io::ErrorKind::TimedOut, format!("{what}: deadline passed"))
}

/// Time left before `deadline`, or a `TimedOut` error naming `what`.
fn remaining(deadline: Instant, what: impl Display) -> io::Result<Duration> {
    let left = deadline.saturating_duration_since(Instant::now());
    if left.is_zero() { Err(timed_out(what)) } else { Ok(left) }
}

/// A socket timeout must be non-zero: round tiny waits up to 100 µs.
fn sock_timeout(d: Duration) -> Option<Duration> {
    Some(d.max(Duration::from_micros(100)))
}

fn is_timeout(e: &io::Error) -> bool {
    matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted)
}

/// Errors a UDP socket may report for an earlier datagram (ICMP) or a full queue: the protocol
/// treats them as a lost datagram.
fn is_transient_udp(e: &io::Error) -> bool {
    if is_timeout(e) || matches!(e.kind(), io::ErrorKind::ConnectionRefused | io::ErrorKind::ConnectionReset) {
        return true;
    }
    matches!(
        e.raw_os_error(),
        Some(libc::ENOBUFS | libc::EAGAIN | libc::EHOSTUNREACH | libc::ENETUNREACH | libc::ENOMEM)
    )
}

/// Sends one datagram; a transient failure (full queue, ICMP) is reported as `Ok(false)`.
fn send_lossy(sock: &UdpSocket, buf: &[u8], to: SocketAddr) -> io::Result<bool> {
    match sock.send_to(buf, to) {
        Ok(_) => Ok(true),
        Err(e) if is_transient_udp(&e) => Ok(false),
        Err(e) => Err(with_context(e, format_args!("send to {to}"))),
    }
}

fn unspecified_like(addr: SocketAddr) -> SocketAddr {
    match addr {
        SocketAddr::V4(_) => SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0),
        SocketAddr::V6(_) => SocketAddr::new(IpAddr::V6(Ipv6Addr::UNSPECIFIED), 0),
    }
}

fn be_u32(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_be_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

fn be_u64(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_be_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

fn be_u16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

/// `header` padded with dummy bytes to `len` (at least the header).
fn padded(header: &[u8], len: usize) -> Vec<u8> {
    let mut v = header.to_vec();
    v.resize(len.max(header.len()), PAD_BYTE);
    v
}

fn rr_header(tag: u8, seq: u64) -> [u8; RR_HEADER] {
    let mut h = [0u8; RR_HEADER];
    h[0] = tag;
    h[1..9].copy_from_slice(&seq.to_be_bytes());
    h
}

fn parse_rr(body: &[u8], tag: u8) -> Option<u64> {
    if body.first() != Some(&tag) {
        return None;
    }
    be_u64(body, 1)
}

fn flow_header(tag: u8, sender: u32, index: u32, bit: u8) -> [u8; FLOW_HEADER] {
    let mut h = [0u8; FLOW_HEADER];
    h[0] = tag;
    h[1..5].copy_from_slice(&sender.to_be_bytes());
    h[5..9].copy_from_slice(&index.to_be_bytes());
    h[9] = bit;
    h
}

/// Data: `(sender, index, bit)`.
fn parse_data(body: &[u8]) -> Option<(u32, u32, u8)> {
    if body.first() != Some(&TAG_DATA) {
        return None;
    }
    Some((be_u32(body, 1)?, be_u32(body, 5)?, *body.get(9)?))
}

/// Ack: `0x41 | sender | bit | index`; returns `(sender, bit)`.
fn ack_body(sender: u32, bit: u8, index: u32) -> [u8; 10] {
    let mut h = [0u8; 10];
    h[0] = TAG_ACK;
    h[1..5].copy_from_slice(&sender.to_be_bytes());
    h[5] = bit;
    h[6..10].copy_from_slice(&index.to_be_bytes());
    h
}

fn parse_ack(body: &[u8]) -> Option<(u32, u8)> {
    if body.first() != Some(&TAG_ACK) {
        return None;
    }
    Some((be_u32(body, 1)?, *body.get(5)?))
}

// ---------------------------------------------------------------------------------------------
// poll(2) and a nonblocking framed TCP connection
// ---------------------------------------------------------------------------------------------

fn pollfd(fd: i32, events: libc::c_short) -> libc::pollfd {
    libc::pollfd { fd, events, revents: 0 }
}

const READABLE: libc::c_short = libc::POLLIN | libc::POLLHUP | libc::POLLERR;

/// `poll(2)` with a `Duration` timeout (rounded up to whole milliseconds); `EINTR` is 0 events.
fn poll_fds(fds: &mut [libc::pollfd], timeout: Duration) -> io::Result<usize> {
    let ms = i32::try_from(timeout.as_micros().div_ceil(1000)).unwrap_or(i32::MAX);
    let nfds = libc::nfds_t::try_from(fds.len()).map_err(|_| invalid_input("too many fds"))?;
    // SAFETY: `fds` is an exclusively borrowed, initialised slice of `pollfd` and `nfds` is its
    // length, so the kernel reads and writes only within it.
    let rc = unsafe { libc::poll(fds.as_mut_ptr(), nfds, ms) };
    if rc < 0 {
        let e = io::Error::last_os_error();
        if e.kind() == io::ErrorKind::Interrupted {
            return Ok(0);
        }
        return Err(with_context(e, "poll"));
    }
    Ok(usize::try_from(rc).unwrap_or(0))
}

/// A nonblocking TCP connection with length-prefixed frames in both directions.
#[derive(Debug)]
struct Conn {
    stream: TcpStream,
    peer: SocketAddr,
    rbuf: Vec<u8>,
    rpos: usize,
    wbuf: Vec<u8>,
    wpos: usize,
    eof: bool,
}

impl Conn {
    fn new(stream: TcpStream) -> io::Result<Self> {
        stream.set_nodelay(true)?;
        stream.set_nonblocking(true)?;
        let peer = stream.peer_addr()?;
        Ok(Self { stream, peer, rbuf: Vec::new(), rpos: 0, wbuf: Vec::new(), wpos: 0, eof: false })
    }

    fn fd(&self) -> i32 {
        self.stream.as_raw_fd()
    }

    fn events(&self) -> libc::c_short {
        if self.wants_write() { libc::POLLIN | libc::POLLOUT } else { libc::POLLIN }
    }

    /// Appends one frame to the output buffer; returns the bytes it adds on the wire.
    fn queue(&mut self, body: &[u8]) -> io::Result<u64> {
        let len = u32::try_from(body.len())
            .ok()
            .filter(|&l| l as usize <= MAX_FRAME_LEN)
            .ok_or_else(|| invalid_input(format_args!("frame of {} bytes", body.len())))?;
        if !self.wants_write() {
            self.wbuf.clear();
            self.wpos = 0;
        }
        self.wbuf.extend_from_slice(&len.to_be_bytes());
        self.wbuf.extend_from_slice(body);
        Ok((LEN_PREFIX + body.len()) as u64)
    }

    fn wants_write(&self) -> bool {
        self.wpos < self.wbuf.len()
    }

    /// Writes as much of the output buffer as the socket takes.
    fn flush(&mut self) -> io::Result<()> {
        while self.wants_write() {
            match self.stream.write(&self.wbuf[self.wpos..]) {
                Ok(0) => return Err(io::Error::from(io::ErrorKind::WriteZero)),
                Ok(n) => self.wpos += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(with_context(e, format_args!("write to {}", self.peer))),
            }
        }
        Ok(())
    }

    /// Reads what the socket has (at most 256 KiB per call); sets `eof` on a closed stream.
    fn fill(&mut self) -> io::Result<()> {
        if self.rpos > 0 && self.rpos == self.rbuf.len() {
            self.rbuf.clear();
            self.rpos = 0;
        } else if self.rpos >= 64 * 1024 {
            self.rbuf.drain(..self.rpos);
            self.rpos = 0;
        }
        let mut tmp = [0u8; 16 * 1024];
        let mut total = 0;
        while total < 256 * 1024 {
            match self.stream.read(&mut tmp) {
                Ok(0) => {
                    self.eof = true;
                    break;
                }
                Ok(n) => {
                    self.rbuf.extend_from_slice(&tmp[..n]);
                    total += n;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(with_context(e, format_args!("read from {}", self.peer))),
            }
        }
        Ok(())
    }

    /// The next complete frame body, if buffered.
    fn next_frame(&mut self) -> io::Result<Option<Vec<u8>>> {
        let avail = &self.rbuf[self.rpos..];
        let Some(len) = be_u32(avail, 0) else {
            return Ok(None);
        };
        let len = len as usize;
        if len > MAX_FRAME_LEN {
            return Err(invalid_data(format_args!("frame length {len} from {} exceeds {MAX_FRAME_LEN}", self.peer)));
        }
        let Some(body) = avail.get(LEN_PREFIX..LEN_PREFIX + len) else {
            return Ok(None);
        };
        let body = body.to_vec();
        self.rpos += LEN_PREFIX + len;
        Ok(Some(body))
    }
}

/// Connects, retrying a refused connection every 20 ms until `deadline`.
fn connect_retry(addr: SocketAddr, deadline: Instant) -> io::Result<TcpStream> {
    loop {
        let what = format_args!("connect to {addr}");
        let left = remaining(deadline, what)?;
        match TcpStream::connect_timeout(&addr, left) {
            Ok(s) => return Ok(s),
            Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {
                std::thread::sleep(CONNECT_RETRY.min(left));
            }
            Err(e) if is_timeout(&e) => return Err(timed_out(format_args!("connect to {addr}"))),
            Err(e) => return Err(with_context(e, format_args!("connect to {addr}"))),
        }
    }
}

/// Accepts every pending connection on a nonblocking listener.
fn accept_all(listener: &TcpListener) -> io::Result<Vec<Conn>> {
    let mut out = Vec::new();
    loop {
        match listener.accept() {
            Ok((s, _)) => out.push(Conn::new(s)?),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(out),
            Err(e) if matches!(e.kind(), io::ErrorKind::Interrupted | io::ErrorKind::ConnectionAborted) => {}
            Err(e) => return Err(with_context(e, "accept")),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Retransmission timeout
// ---------------------------------------------------------------------------------------------

/// Retransmission timeout of the RUP variants: adaptive (RFC 6298 estimator, Karn's rule,
/// doubling per retransmission), clamped to `[min, max]`; `initial` until the first sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rto {
    /// RTO before the first RTT sample.
    pub initial: Duration,
    /// Lower bound of the RTO.
    pub min: Duration,
    /// Upper bound of the RTO, also after backoff.
    pub max: Duration,
}

impl Default for Rto {
    /// 500 ms initial, 60 ms min, 4 s max (see the module docs for the reasoning).
    fn default() -> Self {
        Self { initial: Duration::from_millis(500), min: Duration::from_millis(60), max: Duration::from_secs(4) }
    }
}

impl Rto {
    /// A fixed RTO: `initial = min = max = rto` (no adaptation except the cap on backoff).
    pub fn fixed(rto: Duration) -> Self {
        Self { initial: rto, min: rto, max: rto }
    }
}

#[derive(Debug)]
struct RtoEstimator {
    cfg: Rto,
    srtt: Option<Duration>,
    rttvar: Duration,
}

impl RtoEstimator {
    fn new(cfg: Rto) -> Self {
        Self { cfg, srtt: None, rttvar: Duration::ZERO }
    }

    fn clamp(&self, d: Duration) -> Duration {
        let hi = self.cfg.max.max(Duration::from_micros(100));
        d.max(self.cfg.min.min(hi)).min(hi)
    }

    fn current(&self) -> Duration {
        let raw = match self.srtt {
            None => self.cfg.initial,
            Some(s) => s.saturating_add(self.rttvar.saturating_mul(4)),
        };
        self.clamp(raw)
    }

    /// RTO after `retx` retransmissions of the same datagram.
    fn backed_off(&self, retx: u32) -> Duration {
        self.clamp(self.current().saturating_mul(1 << retx.min(8)))
    }

    fn sample(&mut self, rtt: Duration) {
        match self.srtt {
            None => {
                self.srtt = Some(rtt);
                self.rttvar = rtt / 2;
            }
            Some(s) => {
                let err = s.abs_diff(rtt);
                self.rttvar = self.rttvar * 3 / 4 + err / 4;
                self.srtt = Some(s * 7 / 8 + rtt / 8);
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// §VI-B: 1-to-N request-reply
// ---------------------------------------------------------------------------------------------

/// The four point-to-point request-reply baselines of seed 003 §VI-B.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Rr {
    /// TCP, one member at a time.
    TcpSeq,
    /// TCP, request to all members, then wait for all replies.
    TcpPar,
    /// UDP with request retransmission ("reliable unicast protocol"), one member at a time.
    RupSeq,
    /// UDP with request retransmission, request to all members, then wait for all replies.
    RupPar,
}

impl Rr {
    /// All four variants, in the paper's order.
    pub const ALL: [Rr; 4] = [Rr::TcpSeq, Rr::TcpPar, Rr::RupSeq, Rr::RupPar];

    /// The paper's name: `TCP-SEQ`, `TCP-PAR`, `RUP-SEQ`, `RUP-PAR`.
    pub fn name(self) -> &'static str {
        match self {
            Rr::TcpSeq => "TCP-SEQ",
            Rr::TcpPar => "TCP-PAR",
            Rr::RupSeq => "RUP-SEQ",
            Rr::RupPar => "RUP-PAR",
        }
    }

    /// Whether the variant runs over TCP (else UDP).
    pub fn is_tcp(self) -> bool {
        matches!(self, Rr::TcpSeq | Rr::TcpPar)
    }

    /// Whether the coordinator addresses all members at once.
    pub fn is_par(self) -> bool {
        matches!(self, Rr::TcpPar | Rr::RupPar)
    }
}

/// What an ordinary process did while serving requests.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServeStats {
    /// Distinct requests handled (each answered with a fresh reply).
    pub requests: u64,
    /// Duplicate requests (RUP) answered from the reply cache without handling them again.
    pub duplicates: u64,
    /// Requests older than the cached one (RUP), ignored.
    pub stale: u64,
    /// Datagrams or frames that did not parse, ignored (TCP: the connection is dropped).
    pub malformed: u64,
    /// Bytes handed to the socket (replies, with TCP length prefixes).
    pub bytes_sent: u64,
    /// TCP connections accepted.
    pub connections: u64,
    /// TCP connections dropped because of an I/O or framing error.
    pub dropped_connections: u64,
    /// UDP replies the kernel refused (full queue); the retransmitted request recovers them.
    pub send_errors: u64,
}

#[derive(Debug)]
enum ServerSock {
    Tcp(TcpListener),
    Udp(UdpSocket),
}

impl ServerSock {
    fn bind(tcp: bool, addr: SocketAddr) -> io::Result<Self> {
        let ctx = |e| with_context(e, format_args!("bind {addr}"));
        if tcp {
            let l = TcpListener::bind(addr).map_err(ctx)?;
            l.set_nonblocking(true)?;
            Ok(Self::Tcp(l))
        } else {
            let s = UdpSocket::bind(addr).map_err(ctx)?;
            Ok(Self::Udp(s))
        }
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        match self {
            Self::Tcp(l) => l.local_addr(),
            Self::Udp(s) => s.local_addr(),
        }
    }
}

/// An ordinary process of the request-reply baselines: bind first, then [`RrServer::serve`].
#[derive(Debug)]
pub struct RrServer {
    kind: Rr,
    sock: ServerSock,
}

impl RrServer {
    /// Binds the TCP listener or UDP socket of `kind` on `addr` (port 0 picks one).
    pub fn bind(kind: Rr, addr: SocketAddr) -> io::Result<Self> {
        Ok(Self { kind, sock: ServerSock::bind(kind.is_tcp(), addr)? })
    }

    /// The bound address (to pass to [`rr_coordinator`]).
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.sock.local_addr()
    }

    /// The variant this server speaks.
    pub fn kind(&self) -> Rr {
        self.kind
    }

    /// Answers every request with `reply_len` bytes until `stop` is set (checked every 50 ms).
    ///
    /// TCP: accepts any number of connections and serves them from one poll loop; a connection
    /// that fails or sends a malformed frame is dropped (counted), the server goes on. RUP: keeps
    /// the last reply per coordinator address and re-sends it on a duplicate request.
    pub fn serve(self, reply_len: usize, stop: &AtomicBool) -> io::Result<ServeStats> {
        match self.sock {
            ServerSock::Tcp(l) => serve_tcp(&l, reply_len, stop),
            ServerSock::Udp(s) => serve_rup(&s, reply_len, stop),
        }
    }
}

/// Binds and serves: [`RrServer::bind`] then [`RrServer::serve`].
pub fn rr_serve(kind: Rr, bind: SocketAddr, reply_len: usize, stop: &AtomicBool) -> io::Result<ServeStats> {
    RrServer::bind(kind, bind)?.serve(reply_len, stop)
}

fn serve_tcp(listener: &TcpListener, reply_len: usize, stop: &AtomicBool) -> io::Result<ServeStats> {
    let mut stats = ServeStats::default();
    let mut conns: Vec<Conn> = Vec::new();
    let mut reply = padded(&rr_header(TAG_REPLY, 0), reply_len);
    while !stop.load(Ordering::Relaxed) {
        let mut fds = vec![pollfd(listener.as_raw_fd(), libc::POLLIN)];
        fds.extend(conns.iter().map(|c| pollfd(c.fd(), c.events())));
        poll_fds(&mut fds, STOP_POLL)?;
        let mut dead = vec![false; conns.len()];
        for (i, c) in conns.iter_mut().enumerate() {
            let re = fds[i + 1].revents;
            if re == 0 {
                continue;
            }
            let mut step = || -> io::Result<()> {
                if re & READABLE != 0 {
                    c.fill()?;
                    while let Some(frame) = c.next_frame()? {
                        let seq = parse_rr(&frame, TAG_REQUEST).ok_or_else(|| invalid_data("malformed request"))?;
                        reply[1..9].copy_from_slice(&seq.to_be_bytes());
                        stats.bytes_sent += c.queue(&reply)?;
                        stats.requests += 1;
                    }
                }
                c.flush()
            };
            if let Err(e) = step() {
                if e.kind() == io::ErrorKind::InvalidData {
                    stats.malformed += 1;
                }
                stats.dropped_connections += 1;
                dead[i] = true;
            } else if c.eof && !c.wants_write() {
                dead[i] = true;
            }
        }
        let mut i = 0;
        conns.retain(|_| {
            i += 1;
            !dead[i - 1]
        });
        if fds[0].revents != 0 {
            let new = accept_all(listener)?;
            stats.connections += new.len() as u64;
            conns.extend(new);
        }
    }
    Ok(stats)
}

fn serve_rup(sock: &UdpSocket, reply_len: usize, stop: &AtomicBool) -> io::Result<ServeStats> {
    let mut stats = ServeStats::default();
    sock.set_read_timeout(Some(STOP_POLL))?;
    let mut cache: HashMap<SocketAddr, (u64, Vec<u8>)> = HashMap::new();
    let mut buf = vec![0u8; 65536];
    while !stop.load(Ordering::Relaxed) {
        let (n, from) = match sock.recv_from(&mut buf) {
            Ok(x) => x,
            Err(e) if is_transient_udp(&e) => continue,
            Err(e) => return Err(with_context(e, "recv request")),
        };
        let Some(seq) = parse_rr(&buf[..n], TAG_REQUEST) else {
            stats.malformed += 1;
            continue;
        };
        let reply = match cache.get(&from) {
            Some((cached, reply)) if *cached == seq => {
                stats.duplicates += 1;
                reply.clone()
            }
            Some((cached, _)) if *cached > seq => {
                stats.stale += 1;
                continue;
            }
            _ => {
                stats.requests += 1;
                let reply = padded(&rr_header(TAG_REPLY, seq), reply_len);
                cache.insert(from, (seq, reply.clone()));
                reply
            }
        };
        if send_lossy(sock, &reply, from)? {
            stats.bytes_sent += reply.len() as u64;
        } else {
            stats.send_errors += 1;
        }
    }
    Ok(stats)
}

/// Result of a request-reply run at the coordinator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RrRun {
    /// The variant that ran.
    pub kind: Rr,
    /// One per interaction: first request issued → last reply received.
    pub latencies: Vec<Duration>,
    /// First request of the first interaction → last reply of the last one (connection setup
    /// excluded).
    pub total: Duration,
    /// Requests retransmitted (RUP; always 0 for TCP, whose retransmissions are in the kernel).
    pub retransmissions: u64,
    /// Bytes handed to the socket (requests, with TCP length prefixes).
    pub bytes_sent: u64,
    /// Replies that did not match an outstanding request (late duplicates), ignored.
    pub stale_replies: u64,
    /// Requests the kernel refused (full queue); they are retransmitted like lost ones.
    pub send_errors: u64,
}

/// Runs `interactions` request-reply interactions of `request_len` bytes with `members`, with
/// the default [`Rto`]. See [`rr_coordinator_with`].
pub fn rr_coordinator(
    kind: Rr,
    members: &[SocketAddr],
    request_len: usize,
    interactions: usize,
    deadline: Instant,
) -> io::Result<RrRun> {
    rr_coordinator_with(kind, members, request_len, interactions, Rto::default(), deadline)
}

/// Runs `interactions` request-reply interactions with `members` (the addresses their
/// [`RrServer`]s are bound to; RUP replies are matched by source address, so pass the address
/// the member's replies come from). Fails with `TimedOut` at `deadline`, with
/// `ConnectionAborted` if a TCP member closes, with `InvalidData` on a malformed TCP reply,
/// with `InvalidInput` if `members` is empty or has duplicates.
pub fn rr_coordinator_with(
    kind: Rr,
    members: &[SocketAddr],
    request_len: usize,
    interactions: usize,
    rto: Rto,
    deadline: Instant,
) -> io::Result<RrRun> {
    if members.is_empty() {
        return Err(invalid_input("request-reply needs at least one member"));
    }
    let mut seen = HashMap::new();
    for (i, m) in members.iter().enumerate() {
        if seen.insert(*m, i).is_some() {
            return Err(invalid_input(format_args!("member {m} listed twice")));
        }
    }
    let request = padded(&rr_header(TAG_REQUEST, 0), request_len);
    let mut counters = RrCounters::default();
    let (latencies, total) = if kind.is_tcp() {
        let mut conns = Vec::with_capacity(members.len());
        for m in members {
            conns.push(Conn::new(connect_retry(*m, deadline)?)?);
        }
        let mut r = TcpRr { conns, request, counters: &mut counters };
        drive_rr(kind, members.len(), interactions, &mut r, deadline)?
    } else {
        let sock = UdpSocket::bind(unspecified_like(members[0]))?;
        let mut r = RupRr {
            sock,
            members,
            index: seen,
            request,
            est: RtoEstimator::new(rto),
            buf: vec![0u8; 65536],
            counters: &mut counters,
        };
        drive_rr(kind, members.len(), interactions, &mut r, deadline)?
    };
    Ok(RrRun {
        kind,
        latencies,
        total,
        retransmissions: counters.retransmissions,
        bytes_sent: counters.bytes_sent,
        stale_replies: counters.stale_replies,
        send_errors: counters.send_errors,
    })
}

#[derive(Debug, Default)]
struct RrCounters {
    retransmissions: u64,
    bytes_sent: u64,
    stale_replies: u64,
    send_errors: u64,
}

/// One request to each of `targets` (member indices), waiting for all their replies.
trait RrRound {
    fn round(&mut self, targets: &[usize], seq: u64, deadline: Instant) -> io::Result<()>;
}

/// Runs the interactions: one round to all members per interaction (PAR) or one round per
/// member (SEQ). Returns the per-interaction latencies and the total time.
fn drive_rr(
    kind: Rr,
    n: usize,
    interactions: usize,
    r: &mut impl RrRound,
    deadline: Instant,
) -> io::Result<(Vec<Duration>, Duration)> {
    let all: Vec<usize> = (0..n).collect();
    let mut latencies = Vec::with_capacity(interactions);
    let start = Instant::now();
    for k in 0..interactions {
        let seq = k as u64 + 1;
        let t = Instant::now();
        if kind.is_par() {
            r.round(&all, seq, deadline)?;
        } else {
            for i in 0..n {
                r.round(&[i], seq, deadline)?;
            }
        }
        latencies.push(t.elapsed());
    }
    Ok((latencies, start.elapsed()))
}

struct TcpRr<'a> {
    conns: Vec<Conn>,
    request: Vec<u8>,
    counters: &'a mut RrCounters,
}

impl RrRound for TcpRr<'_> {
    fn round(&mut self, targets: &[usize], seq: u64, deadline: Instant) -> io::Result<()> {
        self.request[1..9].copy_from_slice(&seq.to_be_bytes());
        for &i in targets {
            let c = &mut self.conns[i];
            self.counters.bytes_sent += c.queue(&self.request)?;
            c.flush()?;
        }
        let mut waiting: Vec<usize> = targets.to_vec();
        while !waiting.is_empty() {
            let left = remaining(deadline, format_args!("request {seq}"))?;
            let mut fds: Vec<libc::pollfd> =
                waiting.iter().map(|&i| pollfd(self.conns[i].fd(), self.conns[i].events())).collect();
            poll_fds(&mut fds, left)?;
            let mut done = vec![false; waiting.len()];
            for (j, &i) in waiting.iter().enumerate() {
                let re = fds[j].revents;
                if re == 0 {
                    continue;
                }
                let c = &mut self.conns[i];
                c.flush()?;
                if re & READABLE != 0 {
                    c.fill()?;
                }
                while let Some(frame) = c.next_frame()? {
                    match parse_rr(&frame, TAG_REPLY) {
                        Some(s) if s == seq && !done[j] => done[j] = true,
                        Some(s) => {
                            return Err(invalid_data(format_args!(
                                "member {} replied to request {s} while {seq} is outstanding",
                                c.peer
                            )));
                        }
                        None => {
                            return Err(invalid_data(format_args!("malformed reply from member {}", c.peer)));
                        }
                    }
                }
                if c.eof && !done[j] {
                    return Err(io::Error::new(
                        io::ErrorKind::ConnectionAborted,
                        format!("member {} closed the connection", c.peer),
                    ));
                }
            }
            let mut j = 0;
            waiting.retain(|_| {
                j += 1;
                !done[j - 1]
            });
        }
        Ok(())
    }
}

struct RupRr<'a> {
    sock: UdpSocket,
    members: &'a [SocketAddr],
    index: HashMap<SocketAddr, usize>,
    request: Vec<u8>,
    est: RtoEstimator,
    buf: Vec<u8>,
    counters: &'a mut RrCounters,
}

/// A request in flight to one member.
#[derive(Debug)]
struct Outstanding {
    member: usize,
    first_sent: Instant,
    last_sent: Instant,
    retx: u32,
    done: bool,
}

impl RupRr<'_> {
    fn send(&mut self, member: usize) -> io::Result<()> {
        if send_lossy(&self.sock, &self.request, self.members[member])? {
            self.counters.bytes_sent += self.request.len() as u64;
        } else {
            self.counters.send_errors += 1;
        }
        Ok(())
    }
}

impl RrRound for RupRr<'_> {
    fn round(&mut self, targets: &[usize], seq: u64, deadline: Instant) -> io::Result<()> {
        self.request[1..9].copy_from_slice(&seq.to_be_bytes());
        let mut out = Vec::with_capacity(targets.len());
        for &member in targets {
            self.send(member)?;
            let now = Instant::now();
            out.push(Outstanding { member, first_sent: now, last_sent: now, retx: 0, done: false });
        }
        let mut pending = out.len();
        while pending > 0 {
            // Retransmit what is due, then wait until the next retransmission is due.
            let mut next_due = deadline;
            for o in &mut out {
                if o.done {
                    continue;
                }
                let due = o.last_sent + self.est.backed_off(o.retx);
                if Instant::now() >= due {
                    self.send(o.member)?;
                    o.retx += 1;
                    o.last_sent = Instant::now();
                    self.counters.retransmissions += 1;
                    next_due = next_due.min(o.last_sent + self.est.backed_off(o.retx));
                } else {
                    next_due = next_due.min(due);
                }
            }
            remaining(deadline, format_args!("request {seq}"))?;
            let wait = next_due.saturating_duration_since(Instant::now());
            self.sock.set_read_timeout(sock_timeout(wait))?;
            let (n, from) = match self.sock.recv_from(&mut self.buf) {
                Ok(x) => x,
                Err(e) if is_transient_udp(&e) => continue,
                Err(e) => return Err(with_context(e, "recv reply")),
            };
            let now = Instant::now();
            let slot = parse_rr(&self.buf[..n], TAG_REPLY)
                .filter(|&s| s == seq)
                .and_then(|_| self.index.get(&from))
                .and_then(|m| out.iter_mut().find(|o| o.member == *m && !o.done));
            match slot {
                Some(o) => {
                    o.done = true;
                    pending -= 1;
                    if o.retx == 0 {
                        self.est.sample(now - o.first_sent);
                    }
                }
                None => self.counters.stale_replies += 1,
            }
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------------
// §VI-C: N-to-1 message flow
// ---------------------------------------------------------------------------------------------

/// The N-to-1 one-way message baselines of seed 003 §VI-C.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Flow {
    /// One TCP connection per sender.
    TcpPar,
    /// UDP, alternating-bit acknowledgments, retransmission on timeout.
    RupPar,
    /// Unreliable UDP unicasts, back to back.
    UupPar,
}

impl Flow {
    /// All three variants, in the paper's order.
    pub const ALL: [Flow; 3] = [Flow::TcpPar, Flow::RupPar, Flow::UupPar];

    /// The paper's name: `TCP-PAR`, `RUP-PAR`, `UUP-PAR`.
    pub fn name(self) -> &'static str {
        match self {
            Flow::TcpPar => "TCP-PAR",
            Flow::RupPar => "RUP-PAR",
            Flow::UupPar => "UUP-PAR",
        }
    }
}

/// Timers of the N-to-1 baselines.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlowTimers {
    /// Retransmission timeout of RUP-PAR senders.
    pub rto: Rto,
    /// UUP-PAR sink: end after this long without an arrival (once something arrived).
    pub uup_quiet: Duration,
    /// RUP-PAR sink: after everything arrived, keep acknowledging retransmissions until this
    /// long passes without a datagram (so a sender whose last ack was lost can finish).
    pub rup_linger: Duration,
}

impl Default for FlowTimers {
    /// Default [`Rto`], 2 s UUP quiet period, 1 s RUP linger.
    fn default() -> Self {
        Self { rto: Rto::default(), uup_quiet: Duration::from_secs(2), rup_linger: Duration::from_secs(1) }
    }
}

/// What the coordinator (sink) received.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SinkRun {
    /// The variant that ran.
    pub kind: Flow,
    /// Arrival of the first message (`None` if nothing arrived).
    pub first_arrival: Option<Instant>,
    /// Arrival of the last new (non-duplicate) message.
    pub last_arrival: Option<Instant>,
    /// Distinct messages received per sender id.
    pub received: BTreeMap<u32, u64>,
    /// Messages received again (RUP: bit not the expected one; TCP/UUP: index seen before).
    pub duplicates: u64,
    /// Datagrams or frames that did not parse, or came from an unexpected extra sender or
    /// with an index out of range; ignored.
    pub malformed: u64,
    /// Whether every one of the `senders` senders delivered all its messages.
    pub complete: bool,
    /// Message bytes received (bodies, without TCP length prefixes), duplicates included.
    pub bytes_received: u64,
}

impl SinkRun {
    /// Distinct messages received over all senders.
    pub fn total_received(&self) -> u64 {
        self.received.values().sum()
    }

    /// First → last arrival (the paper's aggregate-throughput interval).
    pub fn span(&self) -> Option<Duration> {
        Some(self.last_arrival?.saturating_duration_since(self.first_arrival?))
    }
}

/// What one ordinary process (source) did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceRun {
    /// The variant that ran.
    pub kind: Flow,
    /// Time between the starts of consecutive message transmissions (`messages - 1` entries):
    /// the paper's "messaging delay".
    pub gaps: Vec<Duration>,
    /// RUP-PAR datagrams retransmitted.
    pub retransmissions: u64,
    /// Bytes handed to the socket (with TCP length prefixes).
    pub bytes_sent: u64,
    /// UDP sends the kernel refused (full queue): UUP losses at the sender; RUP retransmits.
    pub send_errors: u64,
    /// Start of the first transmission → last message sent (and, for RUP, acknowledged).
    pub total: Duration,
}

#[derive(Debug)]
struct SenderState {
    seen: Vec<bool>,
    count: u64,
    expected_bit: u8,
}

/// Bookkeeping of a sink, shared by the three variants.
#[derive(Debug)]
struct SinkBook {
    senders: usize,
    messages_each: usize,
    state: HashMap<u32, SenderState>,
    run: SinkRun,
    done_senders: usize,
}

impl SinkBook {
    fn new(kind: Flow, senders: usize, messages_each: usize) -> Self {
        Self {
            senders,
            messages_each,
            state: HashMap::new(),
            run: SinkRun {
                kind,
                first_arrival: None,
                last_arrival: None,
                received: BTreeMap::new(),
                duplicates: 0,
                malformed: 0,
                complete: senders == 0 || messages_each == 0,
                bytes_received: 0,
            },
            done_senders: 0,
        }
    }

    /// Records a message body; returns the ack to send back for RUP (`(sender, bit, index)`)
    /// or `None` if the body is to be ignored.
    fn record(&mut self, body: &[u8], now: Instant) -> Option<(u32, u8, u32)> {
        self.run.bytes_received += body.len() as u64;
        let Some((sender, index, bit)) = parse_data(body) else {
            self.run.malformed += 1;
            return None;
        };
        if index as usize >= self.messages_each || bit > 1 {
            self.run.malformed += 1;
            return None;
        }
        if !self.state.contains_key(&sender) {
            if self.state.len() >= self.senders {
                self.run.malformed += 1;
                return None;
            }
            self.state.insert(sender, SenderState { seen: vec![false; self.messages_each], count: 0, expected_bit: 0 });
        }
        let st = self.state.get_mut(&sender)?;
        let new = if self.run.kind == Flow::RupPar {
            // Alternating bit: deliver iff it is the bit expected next from this sender.
            bit == st.expected_bit
        } else {
            !st.seen[index as usize]
        };
        self.run.first_arrival.get_or_insert(now);
        if new {
            st.expected_bit ^= 1;
            st.seen[index as usize] = true;
            st.count += 1;
            *self.run.received.entry(sender).or_default() += 1;
            self.run.last_arrival = Some(now);
            if st.count == self.messages_each as u64 {
                self.done_senders += 1;
                if self.done_senders == self.senders {
                    self.run.complete = true;
                }
            }
        } else {
            self.run.duplicates += 1;
        }
        Some((sender, bit, index))
    }
}

/// The coordinator of the N-to-1 baselines: bind first, then [`FlowSink::run`].
#[derive(Debug)]
pub struct FlowSink {
    kind: Flow,
    sock: ServerSock,
}

impl FlowSink {
    /// Binds the TCP listener or UDP socket of `kind` on `addr` (port 0 picks one).
    pub fn bind(kind: Flow, addr: SocketAddr) -> io::Result<Self> {
        Ok(Self { kind, sock: ServerSock::bind(kind == Flow::TcpPar, addr)? })
    }

    /// The bound address (to pass to [`flow_source`]).
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.sock.local_addr()
    }

    /// The variant this sink speaks.
    pub fn kind(&self) -> Flow {
        self.kind
    }

    /// Receives `messages_each` messages from each of `senders` senders (told apart by their
    /// sender id). Returns when everything arrived (RUP: after the linger period), on `stop`
    /// (with what it got), or at `deadline`: for UUP-PAR that returns what it got (loss is
    /// expected, as is an end after [`FlowTimers::uup_quiet`] without arrivals); for TCP-PAR and
    /// RUP-PAR an incomplete run at the deadline is a `TimedOut` error.
    pub fn run(
        self,
        senders: usize,
        messages_each: usize,
        timers: FlowTimers,
        deadline: Instant,
        stop: &AtomicBool,
    ) -> io::Result<SinkRun> {
        let mut book = SinkBook::new(self.kind, senders, messages_each);
        match self.sock {
            ServerSock::Tcp(l) => sink_tcp(&l, &mut book, deadline, stop)?,
            ServerSock::Udp(s) => sink_udp(&s, &mut book, timers, deadline, stop)?,
        }
        Ok(book.run)
    }
}

/// Binds and runs: [`FlowSink::bind`] then [`FlowSink::run`] with default [`FlowTimers`].
pub fn flow_sink(
    kind: Flow,
    bind: SocketAddr,
    senders: usize,
    messages_each: usize,
    deadline: Instant,
    stop: &AtomicBool,
) -> io::Result<SinkRun> {
    FlowSink::bind(kind, bind)?.run(senders, messages_each, FlowTimers::default(), deadline, stop)
}

fn incomplete(book: &SinkBook) -> io::Error {
    timed_out(format_args!(
        "{} sink: {} of {} messages received",
        book.run.kind.name(),
        book.run.total_received(),
        book.senders * book.messages_each
    ))
}

fn sink_tcp(listener: &TcpListener, book: &mut SinkBook, deadline: Instant, stop: &AtomicBool) -> io::Result<()> {
    let mut conns: Vec<Conn> = Vec::new();
    while !book.run.complete && !stop.load(Ordering::Relaxed) {
        let left = remaining(deadline, "TCP-PAR sink").map_err(|_| incomplete(book))?;
        let mut fds = vec![pollfd(listener.as_raw_fd(), libc::POLLIN)];
        fds.extend(conns.iter().map(|c| pollfd(c.fd(), libc::POLLIN)));
        poll_fds(&mut fds, left.min(STOP_POLL))?;
        for (i, c) in conns.iter_mut().enumerate() {
            if fds[i + 1].revents == 0 {
                continue;
            }
            c.fill()?;
            let now = Instant::now();
            while let Some(frame) = c.next_frame()? {
                book.record(&frame, now);
            }
        }
        conns.retain(|c| !c.eof);
        if fds[0].revents != 0 {
            conns.extend(accept_all(listener)?);
        }
    }
    Ok(())
}

fn sink_udp(
    sock: &UdpSocket,
    book: &mut SinkBook,
    timers: FlowTimers,
    deadline: Instant,
    stop: &AtomicBool,
) -> io::Result<()> {
    let rup = book.run.kind == Flow::RupPar;
    let mut buf = vec![0u8; 65536];
    let mut last_datagram: Option<Instant> = None;
    while !stop.load(Ordering::Relaxed) {
        let now = Instant::now();
        let quiet = last_datagram.map(|t| now.saturating_duration_since(t));
        if book.run.complete {
            if !rup || quiet.is_none_or(|q| q >= timers.rup_linger) || now >= deadline {
                return Ok(());
            }
        } else if now >= deadline {
            return if rup { Err(incomplete(book)) } else { Ok(()) };
        } else if !rup && quiet.is_some_and(|q| q >= timers.uup_quiet) {
            return Ok(());
        }
        let wait = deadline.saturating_duration_since(now).min(STOP_POLL);
        sock.set_read_timeout(sock_timeout(wait))?;
        let (n, from) = match sock.recv_from(&mut buf) {
            Ok(x) => x,
            Err(e) if is_transient_udp(&e) => continue,
            Err(e) => return Err(with_context(e, "recv message")),
        };
        let now = Instant::now();
        last_datagram = Some(now);
        if let Some((sender, bit, index)) = book.record(&buf[..n], now)
            && rup
        {
            // A lost ack is recovered by the sender's retransmission.
            send_lossy(sock, &ack_body(sender, bit, index), from)?;
        }
    }
    Ok(())
}

/// Sends `messages` messages of `len` bytes to the sink at `coord` as sender `sender_id`, with
/// the default [`Rto`]. See [`flow_source_with`].
pub fn flow_source(
    kind: Flow,
    coord: SocketAddr,
    sender_id: u32,
    messages: usize,
    len: usize,
    deadline: Instant,
) -> io::Result<SourceRun> {
    flow_source_with(kind, coord, sender_id, messages, len, Rto::default(), deadline)
}

/// Sends `messages` messages of `len` bytes (raised to the 10-byte header) to the sink at
/// `coord`, at full speed, then returns. TCP-PAR: blocking writes on one connection (connection
/// setup not in the gaps); RUP-PAR: stop-and-wait with alternating-bit acks and `rto`; UUP-PAR:
/// back-to-back datagrams, exactly `messages` sends. `TimedOut` at `deadline`; `InvalidInput`
/// for more than `u32::MAX` messages.
pub fn flow_source_with(
    kind: Flow,
    coord: SocketAddr,
    sender_id: u32,
    messages: usize,
    len: usize,
    rto: Rto,
    deadline: Instant,
) -> io::Result<SourceRun> {
    if u32::try_from(messages).is_err() {
        return Err(invalid_input("more than u32::MAX messages"));
    }
    let mut run = SourceRun {
        kind,
        gaps: Vec::with_capacity(messages.saturating_sub(1)),
        retransmissions: 0,
        bytes_sent: 0,
        send_errors: 0,
        total: Duration::ZERO,
    };
    let mut msg = padded(&flow_header(TAG_DATA, sender_id, 0, 0), len);
    let set_index = |msg: &mut Vec<u8>, i: usize| {
        let index = i as u32;
        msg[5..9].copy_from_slice(&index.to_be_bytes());
        msg[9] = (index & 1) as u8;
    };
    let what = format_args!("{} sender {sender_id}", kind.name()).to_string();
    let mut prev: Option<Instant> = None;
    let mut first: Option<Instant> = None;
    let mut mark = |run: &mut SourceRun| {
        let now = Instant::now();
        if let Some(p) = prev {
            run.gaps.push(now - p);
        }
        prev = Some(now);
        first.get_or_insert(now);
    };
    match kind {
        Flow::TcpPar => {
            let mut stream = connect_retry(coord, deadline)?;
            stream.set_nodelay(true)?;
            let mut frame = Vec::with_capacity(LEN_PREFIX + msg.len());
            for i in 0..messages {
                set_index(&mut msg, i);
                frame.clear();
                frame.extend_from_slice(&(msg.len() as u32).to_be_bytes());
                frame.extend_from_slice(&msg);
                stream.set_write_timeout(Some(remaining(deadline, &what)?))?;
                mark(&mut run);
                stream
                    .write_all(&frame)
                    .map_err(|e| if is_timeout(&e) { timed_out(&what) } else { with_context(e, &what) })?;
                run.bytes_sent += frame.len() as u64;
            }
            stream.flush()?;
        }
        Flow::UupPar => {
            let sock = UdpSocket::bind(unspecified_like(coord))?;
            for i in 0..messages {
                set_index(&mut msg, i);
                sock.set_write_timeout(Some(remaining(deadline, &what)?))?;
                mark(&mut run);
                if send_lossy(&sock, &msg, coord)? {
                    run.bytes_sent += msg.len() as u64;
                } else {
                    run.send_errors += 1;
                }
            }
        }
        Flow::RupPar => {
            let sock = UdpSocket::bind(unspecified_like(coord))?;
            let mut est = RtoEstimator::new(rto);
            let mut buf = vec![0u8; 65536];
            for i in 0..messages {
                set_index(&mut msg, i);
                let bit = msg[9];
                mark(&mut run);
                let sent_first = Instant::now();
                let mut sent = sent_first;
                let mut retx = 0u32;
                let send = |run: &mut SourceRun| -> io::Result<()> {
                    sock.set_write_timeout(Some(remaining(deadline, &what)?))?;
                    if send_lossy(&sock, &msg, coord)? {
                        run.bytes_sent += msg.len() as u64;
                    } else {
                        run.send_errors += 1;
                    }
                    Ok(())
                };
                send(&mut run)?;
                loop {
                    let now = Instant::now();
                    let due = sent + est.backed_off(retx);
                    if now >= due {
                        send(&mut run)?;
                        sent = Instant::now();
                        retx += 1;
                        run.retransmissions += 1;
                        continue;
                    }
                    remaining(deadline, &what)?;
                    let wait = due.min(deadline).saturating_duration_since(now);
                    sock.set_read_timeout(sock_timeout(wait))?;
                    let (n, from) = match sock.recv_from(&mut buf) {
                        Ok(x) => x,
                        Err(e) if is_transient_udp(&e) => continue,
                        Err(e) => return Err(with_context(e, &what)),
                    };
                    if from == coord && parse_ack(&buf[..n]) == Some((sender_id, bit)) {
                        if retx == 0 {
                            est.sample(Instant::now() - sent_first);
                        }
                        break;
                    }
                }
            }
        }
    }
    run.total = first.map_or(Duration::ZERO, |f| f.elapsed());
    Ok(run)
}

// ---------------------------------------------------------------------------------------------
// §VI-D: TCP-based group management
// ---------------------------------------------------------------------------------------------

/// One member of a group view.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ViewEntry {
    /// Member id: 0 is the coordinator, then in join order.
    pub id: u32,
    /// The member's address: for the coordinator its listening address, for the others the
    /// remote address of their TCP connection.
    pub addr: SocketAddr,
    /// Epoch of the view in which the member joined (the paper's join time `t`).
    pub join_epoch: u32,
}

fn encode_view(epoch: u32, view: &[ViewEntry]) -> io::Result<Vec<u8>> {
    let count = u16::try_from(view.len()).map_err(|_| invalid_input("view too large"))?;
    let mut b = vec![TAG_VIEW];
    b.extend_from_slice(&epoch.to_be_bytes());
    b.extend_from_slice(&count.to_be_bytes());
    for e in view {
        b.extend_from_slice(&e.id.to_be_bytes());
        b.extend_from_slice(&e.join_epoch.to_be_bytes());
        match e.addr.ip() {
            IpAddr::V4(ip) => {
                b.push(4);
                b.extend_from_slice(&ip.octets());
            }
            IpAddr::V6(ip) => {
                b.push(6);
                b.extend_from_slice(&ip.octets());
            }
        }
        b.extend_from_slice(&e.addr.port().to_be_bytes());
    }
    Ok(b)
}

fn decode_view(b: &[u8]) -> Option<(u32, Vec<ViewEntry>)> {
    if b.first() != Some(&TAG_VIEW) {
        return None;
    }
    let epoch = be_u32(b, 1)?;
    let count = be_u16(b, 5)?;
    let mut at = 7;
    let mut view = Vec::with_capacity(usize::from(count).min(b.len() / 15));
    for _ in 0..count {
        let id = be_u32(b, at)?;
        let join_epoch = be_u32(b, at + 4)?;
        at += 8;
        let ip = match *b.get(at)? {
            4 => {
                let o: [u8; 4] = b.get(at + 1..at + 5)?.try_into().ok()?;
                at += 5;
                IpAddr::V4(Ipv4Addr::from(o))
            }
            6 => {
                let o: [u8; 16] = b.get(at + 1..at + 17)?.try_into().ok()?;
                at += 17;
                IpAddr::V6(Ipv6Addr::from(o))
            }
            _ => return None,
        };
        let port = be_u16(b, at)?;
        at += 2;
        view.push(ViewEntry { id, addr: SocketAddr::new(ip, port), join_epoch });
    }
    (at == b.len()).then_some((epoch, view))
}

fn view_ack(epoch: u32) -> [u8; 5] {
    let mut b = [TAG_VIEW_ACK; 5];
    b[1..5].copy_from_slice(&epoch.to_be_bytes());
    b
}

fn poll_datagram(epoch: u32) -> [u8; 8] {
    let mut b = [0u8; 8];
    b[..4].copy_from_slice(POLL_MAGIC);
    b[4..].copy_from_slice(&epoch.to_be_bytes());
    b
}

/// Parameters of one join round.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GmRound<'a> {
    /// Where the join poll goes: the broadcast address and poll port of the testbed
    /// (e.g. `10.77.0.255:7401`), or several unicast addresses (the loopback tests).
    pub poll_to: &'a [SocketAddr],
    /// How many joiners the harness started (for [`GmRun::connect_delay`] and `close_early`).
    pub joiners_expected: usize,
    /// The join window: connections accepted within it become members of the next view.
    pub join_t: Duration,
    /// Close the window as soon as `joiners_expected` connections arrived instead of waiting
    /// the whole `join_t` (the default in the paper's protocol is the full window: `false`).
    pub close_early: bool,
}

/// Result of one join round at the coordinator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GmRun {
    /// Poll sent → every member acknowledged the new view (the paper's group update delay).
    pub update_delay: Duration,
    /// Poll sent → the `joiners_expected`-th connection accepted (`None` if fewer came).
    pub connect_delay: Option<Duration>,
    /// First view byte queued → last view ack (zero when no one joined and nothing was pushed).
    pub push_delay: Duration,
    /// Joiners that connected within the window and are in the new view.
    pub joined: usize,
    /// Connections accepted after the window closed (not in this view).
    pub late_connections: usize,
    /// Members whose connection closed during the round (removed from the view).
    pub left: usize,
    /// The view after the round (coordinator first).
    pub view: Vec<ViewEntry>,
    /// Its epoch.
    pub epoch: u32,
    /// Bytes handed to sockets in the round (poll datagrams and view frames).
    pub bytes_sent: u64,
}

#[derive(Debug)]
struct GmSlot {
    entry: ViewEntry,
    conn: Conn,
}

/// The coordinator of the TCP-based group management baseline (single-threaded poll loop).
#[derive(Debug)]
pub struct GmCoordinator {
    listener: TcpListener,
    me: ViewEntry,
    members: Vec<GmSlot>,
    late: Vec<Conn>,
    epoch: u32,
    next_id: u32,
}

impl GmCoordinator {
    /// Binds the TCP listener on `listen` (port 0 picks one).
    pub fn bind(listen: SocketAddr) -> io::Result<Self> {
        let listener = TcpListener::bind(listen).map_err(|e| with_context(e, format_args!("bind {listen}")))?;
        listener.set_nonblocking(true)?;
        let me = ViewEntry { id: 0, addr: listener.local_addr()?, join_epoch: 0 };
        Ok(Self { listener, me, members: Vec::new(), late: Vec::new(), epoch: 0, next_id: 1 })
    }

    /// The listening address (to pass to the members).
    pub fn local_addr(&self) -> SocketAddr {
        self.me.addr
    }

    /// The current view (coordinator first).
    pub fn view(&self) -> Vec<ViewEntry> {
        std::iter::once(self.me).chain(self.members.iter().map(|s| s.entry)).collect()
    }

    /// Accepts `n` initial members (no poll: they connect on their own), pushes them the first
    /// view and waits for their acks. `TimedOut` at `deadline` if fewer connect or ack.
    pub fn accept_initial(&mut self, n: usize, deadline: Instant) -> io::Result<()> {
        let mut new = Vec::new();
        while new.len() < n {
            let left = remaining(deadline, format_args!("{} of {n} initial members connected", new.len()))?;
            let mut fds = [pollfd(self.listener.as_raw_fd(), libc::POLLIN)];
            poll_fds(&mut fds, left)?;
            new.extend(accept_all(&self.listener)?);
        }
        let mut bytes = 0;
        let mut left = 0;
        self.push_view(new, &mut bytes, &mut left, deadline)?;
        Ok(())
    }

    /// One join round: send the join poll, accept connections for `join_t`, push the new view
    /// (old members first, then the joiners) and wait for every member's ack. A member whose
    /// connection closes is dropped from the view. `TimedOut` at `deadline`.
    pub fn join_round(&mut self, round: &GmRound<'_>, deadline: Instant) -> io::Result<GmRun> {
        let poll_sock = UdpSocket::bind(unspecified_like(round.poll_to.first().copied().unwrap_or(self.me.addr)))?;
        poll_sock.set_broadcast(true)?;
        let poll = poll_datagram(self.epoch + 1);
        let mut bytes_sent = 0u64;
        let t0 = Instant::now();
        for to in round.poll_to {
            if send_lossy(&poll_sock, &poll, *to)? {
                bytes_sent += poll.len() as u64;
            }
        }
        let window_end = t0 + round.join_t;
        let mut new: Vec<Conn> = Vec::new();
        let mut connect_delay = None;
        let mut left = 0usize;
        loop {
            let now = Instant::now();
            if now >= window_end || (round.close_early && new.len() >= round.joiners_expected) {
                break;
            }
            remaining(deadline, "join window")?;
            let wait = window_end.min(deadline).saturating_duration_since(now);
            let mut fds = vec![pollfd(self.listener.as_raw_fd(), libc::POLLIN)];
            fds.extend(self.members.iter().map(|s| pollfd(s.conn.fd(), libc::POLLIN)));
            poll_fds(&mut fds, wait)?;
            left += self.reap_members(&fds[1..])?;
            if fds[0].revents != 0 {
                new.extend(accept_all(&self.listener)?);
                if connect_delay.is_none() && new.len() >= round.joiners_expected {
                    connect_delay = Some(t0.elapsed());
                }
            }
        }
        let joined = new.len();
        let push_start = Instant::now();
        if joined > 0 {
            self.push_view(new, &mut bytes_sent, &mut left, deadline)?;
        }
        let end = Instant::now();
        let late_connections = self.late.len();
        self.late.clear();
        Ok(GmRun {
            update_delay: end - t0,
            connect_delay,
            push_delay: if joined > 0 { end - push_start } else { Duration::ZERO },
            joined,
            late_connections,
            left,
            view: self.view(),
            epoch: self.epoch,
            bytes_sent,
        })
    }

    /// Drops members whose connection closed or failed (`fds[i]` polls `members[i]`); a member
    /// that sends anything outside a view push is a protocol error.
    fn reap_members(&mut self, fds: &[libc::pollfd]) -> io::Result<usize> {
        let mut gone = vec![false; self.members.len()];
        for (i, s) in self.members.iter_mut().enumerate() {
            if fds.get(i).is_none_or(|f| f.revents == 0) {
                continue;
            }
            if s.conn.fill().is_err() {
                gone[i] = true;
                continue;
            }
            if s.conn.next_frame()?.is_some() {
                return Err(invalid_data(format_args!("member {} sent a frame outside a view push", s.conn.peer)));
            }
            gone[i] = s.conn.eof;
        }
        let n = gone.iter().filter(|&&g| g).count();
        let mut i = 0;
        self.members.retain(|_| {
            i += 1;
            !gone[i - 1]
        });
        Ok(n)
    }

    /// Adds `new` as members with a new epoch, pushes the view to old members first, then to
    /// the new ones, and waits for all acks; late connections are parked in `self.late`.
    fn push_view(&mut self, new: Vec<Conn>, bytes: &mut u64, left: &mut usize, deadline: Instant) -> io::Result<()> {
        self.epoch += 1;
        let epoch = self.epoch;
        for conn in new {
            let entry = ViewEntry { id: self.next_id, addr: conn.peer, join_epoch: epoch };
            self.next_id += 1;
            self.members.push(GmSlot { entry, conn });
        }
        let body = encode_view(epoch, &self.view())?;
        for s in &mut self.members {
            *bytes += s.conn.queue(&body)?;
            s.conn.flush()?;
        }
        let mut acked = vec![false; self.members.len()];
        let mut gone = vec![false; self.members.len()];
        loop {
            let waiting: Vec<usize> = (0..self.members.len()).filter(|&i| !acked[i] && !gone[i]).collect();
            if waiting.is_empty() {
                break;
            }
            let left_t = remaining(deadline, format_args!("{} view acks missing", waiting.len()))?;
            let mut fds = vec![pollfd(self.listener.as_raw_fd(), libc::POLLIN)];
            fds.extend(waiting.iter().map(|&i| pollfd(self.members[i].conn.fd(), self.members[i].conn.events())));
            poll_fds(&mut fds, left_t)?;
            for (j, &i) in waiting.iter().enumerate() {
                let re = fds[j + 1].revents;
                if re == 0 {
                    continue;
                }
                let c = &mut self.members[i].conn;
                let ok = (|| -> io::Result<()> {
                    c.flush()?;
                    if re & READABLE != 0 {
                        c.fill()?;
                    }
                    while let Some(f) = c.next_frame()? {
                        if f == view_ack(epoch) {
                            acked[i] = true;
                        } else {
                            return Err(invalid_data(format_args!("member {} sent an unexpected frame", c.peer)));
                        }
                    }
                    Ok(())
                })();
                match ok {
                    Err(e) if e.kind() == io::ErrorKind::InvalidData => return Err(e),
                    Err(_) => gone[i] = true,
                    Ok(()) => gone[i] = c.eof && !acked[i],
                }
            }
            if fds[0].revents != 0 {
                self.late.extend(accept_all(&self.listener)?);
            }
        }
        *left += gone.iter().filter(|&&g| g).count();
        let mut i = 0;
        self.members.retain(|_| {
            i += 1;
            !gone[i - 1]
        });
        Ok(())
    }
}

/// Result of a group member's run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GmMemberRun {
    /// Joiner: poll received → first view containing it received (the paper's join delay).
    /// `None` for an initial member or a joiner that did not join.
    pub join_delay: Option<Duration>,
    /// When the join poll arrived (joiners).
    pub poll_received_at: Option<Instant>,
    /// When the member first received a view containing it.
    pub member_since: Option<Instant>,
    /// Views received and acknowledged.
    pub views: u32,
    /// The last view received.
    pub view: Vec<ViewEntry>,
    /// Own id in that view.
    pub id: Option<u32>,
}

/// A process of the TCP-based group management baseline: an initial member (connects at once)
/// or a joiner (waits for the join poll on its UDP socket, then connects).
#[derive(Debug)]
pub struct GmMember {
    poll: Option<UdpSocket>,
}

impl GmMember {
    /// An initial member: [`GmMember::run`] connects immediately.
    pub fn initial() -> Self {
        Self { poll: None }
    }

    /// A joiner listening for the join poll on `poll_bind` (bind `0.0.0.0:port` to receive
    /// broadcast polls; `SO_REUSEADDR` is set). The socket is bound when this returns, so a
    /// poll sent afterwards is not missed.
    pub fn joiner(poll_bind: SocketAddr) -> io::Result<Self> {
        use socket2::{Domain, Protocol, Socket, Type};
        let sock = Socket::new(Domain::for_address(poll_bind), Type::DGRAM, Some(Protocol::UDP))?;
        sock.set_reuse_address(true)?;
        sock.bind(&poll_bind.into()).map_err(|e| with_context(e, format_args!("bind poll socket {poll_bind}")))?;
        Ok(Self { poll: Some(sock.into()) })
    }

    /// The poll socket's address (joiners).
    pub fn poll_addr(&self) -> Option<SocketAddr> {
        self.poll.as_ref().and_then(|s| s.local_addr().ok())
    }

    /// Runs the member: (joiner) wait for the poll, connect to `coord_tcp`, then acknowledge
    /// every view until `stop` is set or the coordinator closes the connection. At `deadline`
    /// it returns what it has if it became a member, else a `TimedOut` error.
    pub fn run(self, coord_tcp: SocketAddr, deadline: Instant, stop: &AtomicBool) -> io::Result<GmMemberRun> {
        let mut run = GmMemberRun {
            join_delay: None,
            poll_received_at: None,
            member_since: None,
            views: 0,
            view: Vec::new(),
            id: None,
        };
        if let Some(sock) = &self.poll {
            let mut buf = [0u8; 64];
            loop {
                if stop.load(Ordering::Relaxed) {
                    return Ok(run);
                }
                let left = remaining(deadline, "waiting for the join poll")?;
                sock.set_read_timeout(sock_timeout(left.min(STOP_POLL)))?;
                match sock.recv_from(&mut buf) {
                    Ok((n, _)) if n == 8 && &buf[..4] == POLL_MAGIC => {
                        run.poll_received_at = Some(Instant::now());
                        break;
                    }
                    Ok(_) => {}
                    Err(e) if is_transient_udp(&e) => {}
                    Err(e) => return Err(with_context(e, "recv join poll")),
                }
            }
        }
        let stream = connect_retry(coord_tcp, deadline)?;
        let me = stream.local_addr()?;
        let mut conn = Conn::new(stream)?;
        let finish = |run: GmMemberRun| {
            if run.member_since.is_some() { Ok(run) } else { Err(timed_out("not a member yet")) }
        };
        while !stop.load(Ordering::Relaxed) {
            let Ok(left) = remaining(deadline, "member") else {
                return finish(run);
            };
            let mut fds = [pollfd(conn.fd(), conn.events())];
            poll_fds(&mut fds, left.min(STOP_POLL))?;
            if fds[0].revents == 0 {
                continue;
            }
            conn.flush()?;
            conn.fill()?;
            while let Some(frame) = conn.next_frame()? {
                let (epoch, view) =
                    decode_view(&frame).ok_or_else(|| invalid_data("malformed view from the coordinator"))?;
                let Some(mine) = view.iter().find(|e| e.addr == me) else {
                    continue;
                };
                let now = Instant::now();
                if run.member_since.is_none() {
                    run.member_since = Some(now);
                    run.join_delay = run.poll_received_at.map(|p| now - p);
                }
                run.id = Some(mine.id);
                run.views += 1;
                run.view = view;
                conn.queue(&view_ack(epoch))?;
                conn.flush()?;
            }
            if conn.eof {
                return Ok(run);
            }
        }
        Ok(run)
    }
}

/// Convenience: an initial member, or a joiner listening for the poll on `0.0.0.0:poll_port`
/// (IPv4), then [`GmMember::run`]. Use the two-step API when the harness must know that the
/// joiner's poll socket is bound before the poll is sent.
pub fn gm_member(
    coord_tcp: SocketAddr,
    poll_port: u16,
    is_initial: bool,
    deadline: Instant,
    stop: &AtomicBool,
) -> io::Result<GmMemberRun> {
    let m = if is_initial {
        GmMember::initial()
    } else {
        GmMember::joiner(SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), poll_port))?
    };
    m.run(coord_tcp, deadline, stop)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::thread;

    const LO: &str = "127.0.0.1:0";

    fn lo() -> SocketAddr {
        LO.parse().unwrap()
    }

    fn soon(secs: u64) -> Instant {
        Instant::now() + Duration::from_secs(secs)
    }

    /// Starts `n` request-reply servers; returns their addresses and join handles.
    fn servers(
        kind: Rr,
        n: usize,
        stop: &Arc<AtomicBool>,
    ) -> (Vec<SocketAddr>, Vec<thread::JoinHandle<io::Result<ServeStats>>>) {
        let mut addrs = Vec::new();
        let mut handles = Vec::new();
        for _ in 0..n {
            let s = RrServer::bind(kind, lo()).unwrap();
            assert_eq!(s.kind(), kind);
            addrs.push(s.local_addr().unwrap());
            let stop = Arc::clone(stop);
            handles.push(thread::spawn(move || s.serve(1500, &stop)));
        }
        (addrs, handles)
    }

    /// A UDP relay between a client and `target` that drops the datagrams whose position
    /// (0-based, per direction) is listed; returns its client-facing address.
    fn lossy_relay(
        target: SocketAddr,
        drop_fwd: &'static [usize],
        drop_back: &'static [usize],
        stop: &Arc<AtomicBool>,
    ) -> (SocketAddr, thread::JoinHandle<()>) {
        let front = UdpSocket::bind(lo()).unwrap();
        let back = UdpSocket::bind(lo()).unwrap();
        let addr = front.local_addr().unwrap();
        let stop = Arc::clone(stop);
        let h = thread::spawn(move || {
            front.set_nonblocking(true).unwrap();
            back.set_nonblocking(true).unwrap();
            let (mut fwd, mut bwd) = (0usize, 0usize);
            let mut client = None;
            let mut buf = [0u8; 4096];
            while !stop.load(Ordering::Relaxed) {
                let mut idle = true;
                if let Ok((n, from)) = front.recv_from(&mut buf) {
                    idle = false;
                    client = Some(from);
                    if !drop_fwd.contains(&fwd) {
                        back.send_to(&buf[..n], target).unwrap();
                    }
                    fwd += 1;
                }
                if let Ok((n, _)) = back.recv_from(&mut buf) {
                    idle = false;
                    if !drop_back.contains(&bwd)
                        && let Some(c) = client
                    {
                        front.send_to(&buf[..n], c).unwrap();
                    }
                    bwd += 1;
                }
                if idle {
                    thread::sleep(Duration::from_millis(1));
                }
            }
        });
        (addr, h)
    }

    #[test]
    fn every_request_reply_variant_completes_on_loopback() {
        for kind in Rr::ALL {
            let stop = Arc::new(AtomicBool::new(false));
            let (addrs, handles) = servers(kind, 3, &stop);
            let run = rr_coordinator(kind, &addrs, 1500, 20, soon(8)).unwrap();
            stop.store(true, Ordering::Relaxed);
            assert_eq!(run.kind, kind);
            assert_eq!(run.latencies.len(), 20, "{}", kind.name());
            assert!(run.latencies.iter().all(|l| *l <= run.total));
            let prefix = if kind.is_tcp() { 4 } else { 0 };
            let expected = 20 * 3 * (1500 + prefix) + run.retransmissions * 1500;
            assert_eq!(run.bytes_sent, expected, "{}", kind.name());
            for h in handles {
                let st = h.join().unwrap().unwrap();
                assert_eq!(st.requests, 20, "{}", kind.name());
                assert_eq!(st.malformed, 0);
                assert!(st.bytes_sent >= 20 * 1500);
                if kind.is_tcp() {
                    assert_eq!(st.connections, 1);
                }
            }
        }
    }

    #[test]
    fn rup_retransmits_lost_requests_and_replies_and_answers_once() {
        for kind in [Rr::RupSeq, Rr::RupPar] {
            let stop = Arc::new(AtomicBool::new(false));
            let (mut addrs, handles) = servers(kind, 3, &stop);
            // Member 0 behind a relay that loses its first request and its first reply: the
            // first loss makes the coordinator retransmit, the second makes the member see a
            // duplicate, which it must answer from its cache without handling it again.
            let (relay, rh) = lossy_relay(addrs[0], &[0], &[0], &stop);
            addrs[0] = relay;
            let rto = Rto::fixed(Duration::from_millis(20));
            let run = rr_coordinator_with(kind, &addrs, 64, 20, rto, soon(8)).unwrap();
            stop.store(true, Ordering::Relaxed);
            assert_eq!(run.latencies.len(), 20);
            assert!(run.retransmissions >= 2, "{run:?}");
            let stats: Vec<ServeStats> = handles.into_iter().map(|h| h.join().unwrap().unwrap()).collect();
            rh.join().unwrap();
            for st in &stats {
                assert_eq!(st.requests, 20, "exactly once: {stats:?}");
            }
            assert!(stats[0].duplicates >= 1, "{stats:?}");
        }
    }

    #[test]
    fn rup_member_ignores_stale_and_malformed_requests() {
        let stop = Arc::new(AtomicBool::new(false));
        let (addrs, handles) = servers(Rr::RupSeq, 1, &stop);
        let c = UdpSocket::bind(lo()).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        let mut buf = [0u8; 2048];
        for seq in [5u64, 5, 3] {
            c.send_to(&rr_header(TAG_REQUEST, seq), addrs[0]).unwrap();
        }
        c.send_to(&[TAG_REQUEST, 1, 2], addrs[0]).unwrap();
        c.send_to(&rr_header(TAG_REQUEST, 6), addrs[0]).unwrap();
        let mut got = Vec::new();
        for _ in 0..3 {
            let (n, _) = c.recv_from(&mut buf).unwrap();
            assert_eq!(n, 1500);
            got.push(parse_rr(&buf[..n], TAG_REPLY).unwrap());
        }
        stop.store(true, Ordering::Relaxed);
        let st = handles.into_iter().next().unwrap().join().unwrap().unwrap();
        assert_eq!(got, [5, 5, 6]);
        assert_eq!((st.requests, st.duplicates, st.stale, st.malformed), (2, 1, 1, 1));
    }

    #[test]
    fn malformed_length_prefix_is_an_error_not_a_panic() {
        // A "member" that answers the first request with an absurd length prefix.
        let l = TcpListener::bind(lo()).unwrap();
        let addr = l.local_addr().unwrap();
        let h = thread::spawn(move || {
            let (mut s, _) = l.accept().unwrap();
            let mut b = [0u8; 4 + RR_HEADER];
            s.read_exact(&mut b).unwrap();
            s.write_all(&[0xff; 8]).unwrap();
            thread::sleep(Duration::from_millis(200));
        });
        let err = rr_coordinator(Rr::TcpSeq, &[addr], 0, 3, soon(5)).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidData, "{err}");
        h.join().unwrap();

        // A server drops a connection with a bad prefix and keeps serving the others.
        let stop = Arc::new(AtomicBool::new(false));
        let (addrs, handles) = servers(Rr::TcpPar, 1, &stop);
        let mut bad = TcpStream::connect(addrs[0]).unwrap();
        bad.write_all(&[0xff; 8]).unwrap();
        let run = rr_coordinator(Rr::TcpPar, &addrs, 100, 5, soon(5)).unwrap();
        assert_eq!(run.latencies.len(), 5);
        stop.store(true, Ordering::Relaxed);
        let st = handles.into_iter().next().unwrap().join().unwrap().unwrap();
        assert_eq!((st.requests, st.malformed, st.connections), (5, 1, 2));
    }

    #[test]
    fn coordinator_times_out_instead_of_hanging() {
        // A UDP socket that never answers, and a bad member list.
        let mute = UdpSocket::bind(lo()).unwrap();
        let addr = mute.local_addr().unwrap();
        let deadline = Instant::now() + Duration::from_millis(300);
        let err = rr_coordinator(Rr::RupPar, &[addr], 100, 5, deadline).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::TimedOut, "{err}");
        let err = rr_coordinator(Rr::TcpSeq, &[], 100, 5, soon(1)).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
        let err = rr_coordinator(Rr::RupSeq, &[addr, addr], 100, 5, soon(1)).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
    }

    fn quick_timers() -> FlowTimers {
        FlowTimers {
            rto: Rto {
                initial: Duration::from_millis(50),
                min: Duration::from_millis(20),
                max: Duration::from_millis(200),
            },
            uup_quiet: Duration::from_millis(500),
            rup_linger: Duration::from_millis(200),
        }
    }

    #[test]
    fn every_flow_variant_delivers_on_loopback() {
        for kind in Flow::ALL {
            let stop = Arc::new(AtomicBool::new(false));
            let sink = FlowSink::bind(kind, lo()).unwrap();
            assert_eq!(sink.kind(), kind);
            let addr = sink.local_addr().unwrap();
            let st = Arc::clone(&stop);
            let sh = thread::spawn(move || sink.run(3, 20, quick_timers(), soon(8), &st));
            let sources: Vec<_> = (0..3u32)
                .map(|id| {
                    let rto = quick_timers().rto;
                    thread::spawn(move || flow_source_with(kind, addr, 100 + id, 20, 200, rto, soon(8)))
                })
                .collect();
            for s in sources {
                let run = s.join().unwrap().unwrap();
                assert_eq!(run.gaps.len(), 19, "{}", kind.name());
                let prefix = if kind == Flow::TcpPar { 4 } else { 0 };
                let sent = 20 * (200 + prefix) + run.retransmissions * 200;
                assert_eq!(run.bytes_sent + run.send_errors * 200, sent);
            }
            let run = sh.join().unwrap().unwrap();
            assert_eq!(run.received.len(), 3, "{run:?}");
            assert!(run.span().is_some());
            if kind == Flow::UupPar {
                // Loss is allowed for UUP; on loopback it is rare, duplicates impossible.
                assert!(run.total_received() > 0 && run.total_received() <= 60);
                assert_eq!(run.duplicates, 0);
            } else {
                assert!(run.complete, "{run:?}");
                assert_eq!(run.total_received(), 60);
                assert!(run.received.values().all(|&n| n == 20));
            }
            assert_eq!(run.malformed, 0);
        }
    }

    #[test]
    fn rup_flow_recovers_lost_data_and_acks_with_the_alternating_bit() {
        let stop = Arc::new(AtomicBool::new(false));
        let sink = FlowSink::bind(Flow::RupPar, lo()).unwrap();
        let real = sink.local_addr().unwrap();
        // Loses the first data datagram and the second ack: the sink sees message 1 twice
        // (same bit) and must count it once.
        let (relay, rh) = lossy_relay(real, &[0], &[1], &stop);
        let st = Arc::clone(&stop);
        let sh = thread::spawn(move || sink.run(1, 10, quick_timers(), soon(8), &st));
        let run = flow_source_with(Flow::RupPar, relay, 7, 10, 50, quick_timers().rto, soon(8)).unwrap();
        let sink_run = sh.join().unwrap().unwrap();
        stop.store(true, Ordering::Relaxed);
        rh.join().unwrap();
        assert!(run.retransmissions >= 2, "{run:?}");
        assert!(sink_run.complete);
        assert_eq!(sink_run.received.get(&7), Some(&10));
        assert!(sink_run.duplicates >= 1, "{sink_run:?}");
    }

    #[test]
    fn flow_sinks_count_malformed_input_and_respect_stop_and_deadline() {
        let sink = FlowSink::bind(Flow::UupPar, lo()).unwrap();
        let addr = sink.local_addr().unwrap();
        let c = UdpSocket::bind(lo()).unwrap();
        c.send_to(&[TAG_DATA, 0, 1], addr).unwrap();
        c.send_to(&flow_header(TAG_DATA, 1, 99, 0), addr).unwrap(); // index out of range
        c.send_to(&flow_header(TAG_DATA, 1, 0, 0), addr).unwrap();
        c.send_to(&flow_header(TAG_DATA, 1, 0, 0), addr).unwrap(); // duplicate
        let deadline = Instant::now() + Duration::from_millis(400);
        let stop = AtomicBool::new(false);
        let run = sink.run(1, 5, quick_timers(), deadline, &stop).unwrap();
        assert_eq!((run.malformed, run.duplicates, run.total_received()), (2, 1, 1));
        assert!(!run.complete);

        // Reliable sinks: the deadline is an error, stop is not.
        for kind in [Flow::TcpPar, Flow::RupPar] {
            let sink = FlowSink::bind(kind, lo()).unwrap();
            let deadline = Instant::now() + Duration::from_millis(200);
            let err = sink.run(1, 5, quick_timers(), deadline, &stop).unwrap_err();
            assert_eq!(err.kind(), io::ErrorKind::TimedOut, "{err}");
            let sink = FlowSink::bind(kind, lo()).unwrap();
            let stopped = AtomicBool::new(true);
            let run = sink.run(1, 5, quick_timers(), soon(5), &stopped).unwrap();
            assert!(!run.complete);
        }
    }

    #[test]
    fn view_encoding_round_trips_and_rejects_garbage() {
        let view = vec![
            ViewEntry { id: 0, addr: "10.77.0.1:7400".parse().unwrap(), join_epoch: 0 },
            ViewEntry { id: 3, addr: "[fe80::1]:9".parse().unwrap(), join_epoch: 2 },
        ];
        let b = encode_view(7, &view).unwrap();
        assert_eq!(decode_view(&b), Some((7, view)));
        for cut in 0..b.len() {
            assert_eq!(decode_view(&b[..cut]), None);
        }
        let mut bad = b.clone();
        bad[15] = 5; // unknown family
        assert_eq!(decode_view(&bad), None);
        assert_eq!(decode_view(&[TAG_VIEW, 0, 0, 0, 1, 0xff, 0xff]), None);
    }

    /// Runs a group of `initial` + joiners; `poll` maps the joiners' poll addresses to the
    /// addresses the coordinator polls.
    fn gm_group(
        initial: usize,
        joiner_binds: &[SocketAddr],
        poll_to: impl FnOnce(&[SocketAddr]) -> Vec<SocketAddr>,
    ) -> (GmRun, Vec<GmMemberRun>, Vec<GmMemberRun>) {
        let stop = Arc::new(AtomicBool::new(false));
        let mut coord = GmCoordinator::bind(lo()).unwrap();
        let caddr = coord.local_addr();
        let spawn = |m: GmMember| {
            let stop = Arc::clone(&stop);
            thread::spawn(move || m.run(caddr, soon(8), &stop))
        };
        let initials: Vec<_> = (0..initial).map(|_| spawn(GmMember::initial())).collect();
        coord.accept_initial(initial, soon(5)).unwrap();
        assert_eq!(coord.view().len(), initial + 1);
        let joiners: Vec<GmMember> = joiner_binds.iter().map(|b| GmMember::joiner(*b).unwrap()).collect();
        let polled: Vec<SocketAddr> = joiners.iter().map(|j| j.poll_addr().unwrap()).collect();
        let joiners: Vec<_> = joiners.into_iter().map(spawn).collect();
        let targets = poll_to(&polled);
        let round = GmRound {
            poll_to: &targets,
            joiners_expected: joiner_binds.len(),
            join_t: Duration::from_millis(300),
            close_early: false,
        };
        let run = coord.join_round(&round, soon(5)).unwrap();
        stop.store(true, Ordering::Relaxed);
        let collect = |hs: Vec<thread::JoinHandle<io::Result<GmMemberRun>>>| {
            hs.into_iter().map(|h| h.join().unwrap().unwrap()).collect::<Vec<_>>()
        };
        (run, collect(initials), collect(joiners))
    }

    fn check_group(run: &GmRun, initials: &[GmMemberRun], joiners: &[GmMemberRun]) {
        let n = initials.len() + joiners.len();
        assert_eq!(run.joined, joiners.len(), "{run:?}");
        assert_eq!(run.view.len(), n + 1);
        assert_eq!(run.epoch, 2);
        assert_eq!((run.left, run.late_connections), (0, 0));
        assert!(run.connect_delay.is_some() && run.push_delay <= run.update_delay);
        let ids: Vec<u32> = run.view.iter().map(|e| e.id).collect();
        assert_eq!(ids, (0..=n as u32).collect::<Vec<_>>());
        for m in initials {
            assert_eq!((m.views, m.join_delay), (2, None));
            assert_eq!(m.view, run.view);
        }
        for m in joiners {
            assert_eq!(m.views, 1);
            assert!(m.join_delay.is_some() && m.poll_received_at.is_some());
            assert_eq!(m.view, run.view);
            let entry = run.view.iter().find(|e| Some(e.id) == m.id).unwrap();
            assert_eq!(entry.join_epoch, 2);
        }
    }

    #[test]
    fn group_management_join_round_with_unicast_polls() {
        let (run, initials, joiners) = gm_group(2, &[lo(), lo()], <[SocketAddr]>::to_vec);
        check_group(&run, &initials, &joiners);
    }

    #[test]
    fn group_management_join_round_with_a_broadcast_poll_on_loopback() {
        // Linux routes 127.255.255.255 as the broadcast address of lo: every socket bound to
        // 0.0.0.0:port with SO_REUSEADDR receives one copy, as in the testbed.
        let first = GmMember::joiner("0.0.0.0:0".parse().unwrap()).unwrap();
        let port = first.poll_addr().unwrap().port();
        drop(first);
        let any: SocketAddr = SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), port);
        let bcast = SocketAddr::new(IpAddr::V4(Ipv4Addr::new(127, 255, 255, 255)), port);
        let (run, initials, joiners) = gm_group(2, &[any, any], |_| vec![bcast]);
        check_group(&run, &initials, &joiners);
    }

    #[test]
    fn group_management_bounds() {
        // No member connects: accept_initial times out. A joiner that gets no poll stops on
        // stop, and times out at its deadline.
        let mut coord = GmCoordinator::bind(lo()).unwrap();
        let deadline = Instant::now() + Duration::from_millis(200);
        let err = coord.accept_initial(1, deadline).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::TimedOut);
        let j = GmMember::joiner(lo()).unwrap();
        let stop = AtomicBool::new(true);
        let r = j.run(coord.local_addr(), soon(5), &stop).unwrap();
        assert_eq!(r.member_since, None);
        let j = GmMember::joiner(lo()).unwrap();
        let stop = AtomicBool::new(false);
        let deadline = Instant::now() + Duration::from_millis(200);
        let err = j.run(coord.local_addr(), deadline, &stop).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::TimedOut);
        // No joiner: nothing is pushed, the view stays.
        let round =
            GmRound { poll_to: &[], joiners_expected: 0, join_t: Duration::from_millis(50), close_early: false };
        let run = coord.join_round(&round, soon(5)).unwrap();
        assert_eq!((run.joined, run.epoch, run.view.len()), (0, 0, 1));
    }
}
