//! What more than one baseline uses: error and deadline helpers, byte-order and padding
//! helpers, `poll(2)` and a nonblocking length-prefixed TCP connection ([`Conn`]), the listening
//! socket of the request-reply servers and the flow sinks ([`ServerSock`]), the adaptive
//! retransmission timeout ([`Rto`]; the reasoning behind its defaults is in the `rr` module
//! docs, §VI-B), and, for the tests, loopback helpers.

use std::fmt::Display;
use std::io::{self, Read, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

#[cfg(test)]
use std::sync::Arc;
#[cfg(test)]
use std::sync::atomic::{AtomicBool, Ordering};
#[cfg(test)]
use std::thread;

/// How often every server loop checks its stop flag (upper bound).
pub const STOP_POLL: Duration = Duration::from_millis(50);

/// Largest TCP frame body accepted; a longer length prefix is an [`io::ErrorKind::InvalidData`]
/// error.
pub const MAX_FRAME_LEN: usize = 1 << 20;

/// How long a TCP client waits between attempts while its server is not listening yet.
const CONNECT_RETRY: Duration = Duration::from_millis(20);

/// The length prefix in front of every TCP baseline message, bytes.
pub const LEN_PREFIX: usize = 4;
const PAD_BYTE: u8 = 0xA5;

// ---------------------------------------------------------------------------------------------
// Small helpers
// ---------------------------------------------------------------------------------------------

pub(super) fn with_context(e: io::Error, what: impl Display) -> io::Error {
    io::Error::new(e.kind(), format!("{what}: {e}"))
}

pub(super) fn invalid_data(msg: impl Display) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg.to_string())
}

pub(super) fn invalid_input(msg: impl Display) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, msg.to_string())
}

pub(super) fn timed_out(what: impl Display) -> io::Error {
    io::Error::new(io::ErrorKind::TimedOut, format!("{what}: deadline passed"))
}

/// Time left before `deadline`, or a `TimedOut` error naming `what`.
pub(super) fn remaining(deadline: Instant, what: impl Display) -> io::Result<Duration> {
    let left = deadline.saturating_duration_since(Instant::now());
    if left.is_zero() { Err(timed_out(what)) } else { Ok(left) }
}

/// A socket timeout must be non-zero: round tiny waits up to 100 µs.
pub(super) fn sock_timeout(d: Duration) -> Option<Duration> {
    Some(d.max(Duration::from_micros(100)))
}

pub(super) fn is_timeout(e: &io::Error) -> bool {
    matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted)
}

/// Errors a UDP socket may report for an earlier datagram (ICMP) or a full queue: the protocol
/// treats them as a lost datagram.
pub(super) fn is_transient_udp(e: &io::Error) -> bool {
    if is_timeout(e) || matches!(e.kind(), io::ErrorKind::ConnectionRefused | io::ErrorKind::ConnectionReset) {
        return true;
    }
    matches!(
        e.raw_os_error(),
        Some(libc::ENOBUFS | libc::EAGAIN | libc::EHOSTUNREACH | libc::ENETUNREACH | libc::ENOMEM)
    )
}

/// Sends one datagram; a transient failure (full queue, ICMP) is reported as `Ok(false)`.
pub(super) fn send_lossy(sock: &UdpSocket, buf: &[u8], to: SocketAddr) -> io::Result<bool> {
    match sock.send_to(buf, to) {
        Ok(_) => Ok(true),
        Err(e) if is_transient_udp(&e) => Ok(false),
        Err(e) => Err(with_context(e, format_args!("send to {to}"))),
    }
}

pub(super) fn unspecified_like(addr: SocketAddr) -> SocketAddr {
    match addr {
        SocketAddr::V4(_) => SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0),
        SocketAddr::V6(_) => SocketAddr::new(IpAddr::V6(Ipv6Addr::UNSPECIFIED), 0),
    }
}

pub(super) fn be_u32(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_be_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

pub(super) fn be_u64(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_be_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

pub(super) fn be_u16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

/// `header` padded with dummy bytes to `len` (at least the header).
pub(super) fn padded(header: &[u8], len: usize) -> Vec<u8> {
    let mut v = header.to_vec();
    v.resize(len.max(header.len()), PAD_BYTE);
    v
}

// ---------------------------------------------------------------------------------------------
// poll(2) and a nonblocking framed TCP connection
// ---------------------------------------------------------------------------------------------

pub(super) fn pollfd(fd: i32, events: libc::c_short) -> libc::pollfd {
    libc::pollfd { fd, events, revents: 0 }
}

pub(super) const READABLE: libc::c_short = libc::POLLIN | libc::POLLHUP | libc::POLLERR;

/// `poll(2)` with a `Duration` timeout (rounded up to whole milliseconds); `EINTR` is 0 events.
pub(super) fn poll_fds(fds: &mut [libc::pollfd], timeout: Duration) -> io::Result<usize> {
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
pub(super) struct Conn {
    stream: TcpStream,
    pub(super) peer: SocketAddr,
    rbuf: Vec<u8>,
    rpos: usize,
    wbuf: Vec<u8>,
    wpos: usize,
    pub(super) eof: bool,
}

impl Conn {
    pub(super) fn new(stream: TcpStream) -> io::Result<Self> {
        stream.set_nodelay(true)?;
        stream.set_nonblocking(true)?;
        let peer = stream.peer_addr()?;
        Ok(Self { stream, peer, rbuf: Vec::new(), rpos: 0, wbuf: Vec::new(), wpos: 0, eof: false })
    }

    pub(super) fn fd(&self) -> i32 {
        self.stream.as_raw_fd()
    }

    pub(super) fn events(&self) -> libc::c_short {
        if self.wants_write() { libc::POLLIN | libc::POLLOUT } else { libc::POLLIN }
    }

    /// Appends one frame to the output buffer; returns the bytes it adds on the wire.
    pub(super) fn queue(&mut self, body: &[u8]) -> io::Result<u64> {
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

    pub(super) fn wants_write(&self) -> bool {
        self.wpos < self.wbuf.len()
    }

    /// Writes as much of the output buffer as the socket takes.
    pub(super) fn flush(&mut self) -> io::Result<()> {
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
    pub(super) fn fill(&mut self) -> io::Result<()> {
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
    pub(super) fn next_frame(&mut self) -> io::Result<Option<Vec<u8>>> {
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
pub(super) fn connect_retry(addr: SocketAddr, deadline: Instant) -> io::Result<TcpStream> {
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
pub(super) fn accept_all(listener: &TcpListener) -> io::Result<Vec<Conn>> {
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
// Listening socket of the servers (request-reply members, flow sinks)
// ---------------------------------------------------------------------------------------------

#[derive(Debug)]
pub(super) enum ServerSock {
    Tcp(TcpListener),
    Udp(UdpSocket),
}

impl ServerSock {
    pub(super) fn bind(tcp: bool, addr: SocketAddr) -> io::Result<Self> {
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

    pub(super) fn local_addr(&self) -> io::Result<SocketAddr> {
        match self {
            Self::Tcp(l) => l.local_addr(),
            Self::Udp(s) => s.local_addr(),
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
pub(super) struct RtoEstimator {
    cfg: Rto,
    srtt: Option<Duration>,
    rttvar: Duration,
}

impl RtoEstimator {
    pub(super) fn new(cfg: Rto) -> Self {
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
    pub(super) fn backed_off(&self, retx: u32) -> Duration {
        self.clamp(self.current().saturating_mul(1 << retx.min(8)))
    }

    pub(super) fn sample(&mut self, rtt: Duration) {
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
// Test helpers
// ---------------------------------------------------------------------------------------------

#[cfg(test)]
const LO: &str = "127.0.0.1:0";

#[cfg(test)]
pub(super) fn lo() -> SocketAddr {
    LO.parse().unwrap()
}

#[cfg(test)]
pub(super) fn soon(secs: u64) -> Instant {
    Instant::now() + Duration::from_secs(secs)
}

/// A UDP relay between a client and `target` that drops the datagrams whose position
/// (0-based, per direction) is listed; returns its client-facing address.
#[cfg(test)]
pub(super) fn lossy_relay(
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
