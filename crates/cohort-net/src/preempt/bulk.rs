//! `cohort bulk`: Cohort's own bulk transfer, which asks the robot's coordinated-preemption
//! agent before it sends.
//!
//! A foreign upload is held by the agent's kernel gate after it has left the application; a
//! bulk sender that knows what it is can do better (seed 000's virtual preemption,
//! Algorithm 2, at the source). [`send`] tells the agent of its robot how many bytes it has
//! left and receives a *permit*: closed, or open until the next protection window (opened
//! early by the agent's lead) or the end of the team token's lease. While open it hands the
//! kernel only what the link carries before the permit ends, counting what the socket has not
//! sent yet (`SIOCOUTQNSD`), so no bulk of it waits in the queues when control arrives; while
//! closed it hands nothing. Asking for data makes the agent request the team's bulk token;
//! finishing gives the token back at once (Algorithm 1's early release).
//!
//! The agent listens on the abstract Unix datagram socket it claims its interface with
//! (`cohort/coorp-agent/DEV`); the sender binds `cohort/bulk/PID-N` for the replies. Without
//! an agent on the interface the transfer runs unpermitted, and its report says so.
//!
//! The transfer itself is a TCP stream: a header (magic, length), the data, and its SHA-256;
//! the receiver checks length and digest and answers one status byte, so a transfer either
//! arrives whole and verified or both ends get an error.

use sha2::{Digest, Sha256};
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr as UnixAddr, UnixDatagram};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Request datagram: magic, op, session, port, pending bytes.
const REQ_MAGIC: &[u8; 4] = b"CBK1";
const REQ_LEN: usize = 4 + 1 + 8 + 2 + 8;
/// Permit datagram: magic, open, until (µs from now, `u64::MAX`: no end), link rate (bit/s).
const PERMIT_MAGIC: &[u8; 4] = b"CBP1";
const PERMIT_LEN: usize = 4 + 1 + 8 + 8;
const OP_DEMAND: u8 = 1;
const OP_CLOSE: u8 = 2;
/// Stream header: magic and length.
const STREAM_MAGIC: &[u8; 8] = b"COHBULK1";
/// The receiver's answer.
const STATUS_OK: u8 = 0;
const STATUS_BAD_DIGEST: u8 = 1;

/// The abstract name an agent on `dev` listens on (and claims its interface with).
pub fn agent_socket_name(dev: &str) -> String {
    format!("cohort/coorp-agent/{dev}")
}

/// What a bulk sender asks the agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BulkRequest {
    /// `pending` bytes are left; the sender's data leaves from local `port`.
    Demand {
        session: u64,
        port: u16,
        pending: u64,
    },
    Close {
        session: u64,
    },
}

impl BulkRequest {
    pub fn encode(&self) -> [u8; REQ_LEN] {
        let mut b = [0u8; REQ_LEN];
        b[..4].copy_from_slice(REQ_MAGIC);
        let (op, session, port, pending) = match *self {
            BulkRequest::Demand { session, port, pending } => (OP_DEMAND, session, port, pending),
            BulkRequest::Close { session } => (OP_CLOSE, session, 0, 0),
        };
        b[4] = op;
        b[5..13].copy_from_slice(&session.to_be_bytes());
        b[13..15].copy_from_slice(&port.to_be_bytes());
        b[15..23].copy_from_slice(&pending.to_be_bytes());
        b
    }

    /// `None` for anything that is not exactly a request.
    pub fn decode(b: &[u8]) -> Option<BulkRequest> {
        if b.len() != REQ_LEN || &b[..4] != REQ_MAGIC {
            return None;
        }
        let session = u64::from_be_bytes(b[5..13].try_into().ok()?);
        let port = u16::from_be_bytes(b[13..15].try_into().ok()?);
        let pending = u64::from_be_bytes(b[15..23].try_into().ok()?);
        match b[4] {
            OP_DEMAND => Some(BulkRequest::Demand { session, port, pending }),
            OP_CLOSE if port == 0 && pending == 0 => Some(BulkRequest::Close { session }),
            _ => None,
        }
    }
}

/// The agent's answer, relative to when it was sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WirePermit {
    pub open: bool,
    /// Time left (`None`: no end in sight).
    pub left: Option<Duration>,
    /// The rate the agent shapes the robot's bulk to.
    pub rate_bps: u64,
}

impl WirePermit {
    pub fn encode(&self) -> [u8; PERMIT_LEN] {
        let mut b = [0u8; PERMIT_LEN];
        b[..4].copy_from_slice(PERMIT_MAGIC);
        b[4] = u8::from(self.open);
        let us = self.left.map_or(u64::MAX, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX - 1));
        b[5..13].copy_from_slice(&us.to_be_bytes());
        b[13..21].copy_from_slice(&self.rate_bps.to_be_bytes());
        b
    }

    pub fn decode(b: &[u8]) -> Option<WirePermit> {
        if b.len() != PERMIT_LEN || &b[..4] != PERMIT_MAGIC || b[4] > 1 {
            return None;
        }
        let us = u64::from_be_bytes(b[5..13].try_into().ok()?);
        Some(WirePermit {
            open: b[4] == 1,
            left: (us != u64::MAX).then(|| Duration::from_micros(us)),
            rate_bps: u64::from_be_bytes(b[13..21].try_into().ok()?),
        })
    }
}

/// Why a transfer failed.
#[derive(Debug, thiserror::Error)]
pub enum BulkError {
    #[error("bulk transfer: {0}")]
    Io(#[from] io::Error),
    #[error("not a Cohort bulk stream (bad header)")]
    BadHeader,
    #[error("the stream ended after {got} of {want} bytes")]
    Truncated { got: u64, want: u64 },
    #[error("the data arrived altered: its SHA-256 does not match")]
    BadDigest,
    #[error("the receiver answered {0}, not OK")]
    Refused(u8),
}

/// How [`send`] runs.
#[derive(Debug, Clone)]
pub struct BulkOptions {
    /// The interface whose agent to ask (`None`: send without asking).
    pub agent_dev: Option<String>,
    /// The rate to plan with when no agent tells one.
    pub rate_bps: u64,
    /// How long the agent may take to answer before the transfer goes on without it.
    pub agent_timeout: Duration,
    /// At most this much is handed to the kernel at once.
    pub chunk: usize,
}

impl Default for BulkOptions {
    fn default() -> Self {
        BulkOptions {
            agent_dev: None,
            rate_bps: 100_000_000,
            agent_timeout: Duration::from_millis(200),
            chunk: 64 << 10,
        }
    }
}

/// What a transfer did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BulkReport {
    pub bytes: u64,
    pub elapsed: Duration,
    /// Whether an agent answered (the transfer then ran under its permits).
    pub under_agent: bool,
    /// Permits asked for, and of them closed.
    pub permits: u64,
    pub closed_permits: u64,
    /// Time spent waiting on closed permits.
    pub held: Duration,
}

/// Waits until `s` can take more data, or `d` passes.
fn wait_writable(s: &TcpStream, d: Duration) {
    let mut p = libc::pollfd { fd: s.as_raw_fd(), events: libc::POLLOUT, revents: 0 };
    let ms = d.as_millis().clamp(1, 1000) as libc::c_int;
    // SAFETY: one pollfd we own.
    unsafe { libc::poll(&mut p, 1, ms) };
}

/// What a permit lets a sender hand the kernel now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Budget {
    /// At most this many bytes.
    Bytes(u64),
    /// The permit is closed: ask again after this long.
    Closed(Duration),
    /// Open, but nothing more leaves before its end: ask again after this long.
    Wait(Duration),
    /// No agent answers: no limit.
    Unlimited,
}

/// The bytes a TCP socket holds that its peer has not acknowledged (sent or not):
/// `SIOCOUTQ`. Seed 000's completion-time table asks when a handed packet will have left the
/// card; at the source the nearest answer is what TCP has not had acknowledged yet.
fn in_flight(s: &TcpStream) -> u64 {
    let mut n: libc::c_int = 0;
    // SAFETY: SIOCOUTQ (the same number as TIOCOUTQ, which libc names) writes one int into
    // `n`, on our socket.
    if unsafe { libc::ioctl(s.as_raw_fd(), libc::TIOCOUTQ, &mut n) } == 0 { n.max(0) as u64 } else { 0 }
}

/// The connection's own delivery rate (bytes/s, the kernel's `tcpi_delivery_rate`), when
/// it has measured one: the share of the channel this sender really gets, which is less than
/// the link's rate while other robots send.
fn delivery_rate(s: &TcpStream) -> Option<u64> {
    // SAFETY: tcp_info is plain data; getsockopt writes at most `len` bytes into it.
    let mut info: libc::tcp_info = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
    // SAFETY: valid pointers to our tcp_info and its length, on our socket.
    let r = unsafe {
        libc::getsockopt(
            s.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            (&mut info as *mut libc::tcp_info).cast(),
            &mut len,
        )
    };
    (r == 0 && info.tcpi_delivery_rate > 0).then_some(info.tcpi_delivery_rate)
}

/// Algorithm 2 at the source: of an open permit with `left` to go, what the connection
/// delivers before the permit ends (at the slower of the agent's rate and its own measured
/// delivery rate), less what it has not had acknowledged yet.
pub fn budget_of(p: &WirePermit, s: &TcpStream, fallback_rate_bps: u64) -> Budget {
    if !p.open {
        return Budget::Closed(Duration::from_millis(1));
    }
    let Some(left) = p.left else { return Budget::Unlimited };
    let link = if p.rate_bps > 0 { p.rate_bps } else { fallback_rate_bps } / 8;
    let rate = delivery_rate(s).map_or(link, |d| d.min(link));
    let fits = (rate as f64 * left.as_secs_f64()) as u64;
    match fits.checked_sub(in_flight(s)) {
        Some(b) if b > 0 => Budget::Bytes(b),
        // Nothing more leaves before the window: wait for it to pass.
        _ => Budget::Wait(left.min(Duration::from_millis(5)).max(Duration::from_micros(200))),
    }
}

/// A bulk sender's conversation with the agent of its robot (open it in the robot's network
/// namespace: abstract Unix sockets belong to one).
#[derive(Debug)]
pub struct PermitClient {
    sock: UnixDatagram,
    to: UnixAddr,
    session: u64,
    timeout: Duration,
    /// The agent stopped answering: no more questions.
    gone: std::cell::Cell<bool>,
}

impl PermitClient {
    /// Binds a reply address; `None` when no agent listens on `dev`.
    pub fn open(dev: &str, timeout: Duration) -> io::Result<Option<PermitClient>> {
        static N: AtomicU64 = AtomicU64::new(0);
        let n = N.fetch_add(1, Ordering::Relaxed);
        let pid = u64::from(std::process::id());
        let me = UnixAddr::from_abstract_name(format!("cohort/bulk/{pid}-{n}").as_bytes())?;
        let sock = UnixDatagram::bind_addr(&me)?;
        sock.set_read_timeout(Some(timeout))?;
        let to = UnixAddr::from_abstract_name(agent_socket_name(dev).as_bytes())?;
        let mut seed = [0u8; 8];
        getrandom::fill(&mut seed).map_err(|e| io::Error::other(e.to_string()))?;
        let link = PermitClient { sock, to, session: u64::from_be_bytes(seed), timeout, gone: Default::default() };
        match link.sock.send_to_addr(&BulkRequest::Close { session: link.session }.encode(), &link.to) {
            Ok(_) => Ok(Some(link)),
            // Nothing bound there: no agent on this interface.
            Err(e) if matches!(e.raw_os_error(), Some(libc::ECONNREFUSED | libc::ENOENT)) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// What `s` may hand the kernel now with `pending` bytes of the transfer left (see
    /// [`budget_of`]); an agent that stops answering makes it [`Budget::Unlimited`] from then
    /// on (logged once).
    pub fn budget(&self, s: &TcpStream, pending: u64, fallback_rate_bps: u64) -> io::Result<Budget> {
        if self.gone.get() {
            return Ok(Budget::Unlimited);
        }
        match self.ask(s.local_addr()?.port(), pending)? {
            Some(p) => Ok(budget_of(&p, s, fallback_rate_bps)),
            None => {
                tracing::warn!("bulk: the coorp agent stopped answering; sending without permits");
                self.gone.set(true);
                Ok(Budget::Unlimited)
            }
        }
    }

    /// Asks for a permit with `pending` bytes left; `None` when the agent did not answer in
    /// time (it stopped). After a `None` a late answer may still arrive and would be read as
    /// the next question's: [`budget`](Self::budget) stops asking instead.
    pub fn ask(&self, port: u16, pending: u64) -> io::Result<Option<WirePermit>> {
        let req = BulkRequest::Demand { session: self.session, port, pending };
        if let Err(e) = self.sock.send_to_addr(&req.encode(), &self.to) {
            return if e.raw_os_error() == Some(libc::ECONNREFUSED) { Ok(None) } else { Err(e) };
        }
        let deadline = Instant::now() + self.timeout;
        let mut buf = [0u8; 64];
        while Instant::now() < deadline {
            match self.sock.recv(&mut buf) {
                // The first well-formed answer is this question's: after an unanswered one
                // `budget` asks no more, so no late answer can be waiting.
                Ok(n) => {
                    if let Some(p) = WirePermit::decode(&buf[..n]) {
                        return Ok(Some(p));
                    }
                }
                Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => return Ok(None),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(None)
    }

    /// The transfer is done: the agent may give the token back at once. A later
    /// [`budget`](Self::budget) opens the session again.
    pub fn close(&self) {
        let _ = self.sock.send_to_addr(&BulkRequest::Close { session: self.session }.encode(), &self.to);
    }
}

impl Drop for PermitClient {
    fn drop(&mut self) {
        self.close();
    }
}

/// Sends `len` bytes read from `data` to the receiver at `to` under the agent's permits.
pub fn send(to: SocketAddr, data: &mut impl Read, len: u64, opts: &BulkOptions) -> Result<BulkReport, BulkError> {
    let start = Instant::now();
    let mut report = BulkReport::default();
    let link = match &opts.agent_dev {
        Some(dev) => PermitClient::open(dev, opts.agent_timeout)?,
        None => None,
    };
    let mut s = TcpStream::connect(to)?;
    s.set_nodelay(true)?;
    let mut header = [0u8; 16];
    header[..8].copy_from_slice(STREAM_MAGIC);
    header[8..].copy_from_slice(&len.to_be_bytes());
    s.write_all(&header)?;
    s.set_nonblocking(true)?;
    let r = stream_out(&mut s, data, len, link.as_ref(), opts, &mut report);
    if let Some(l) = &link {
        l.close();
    }
    r?;
    s.set_nonblocking(false)?;
    let mut status = [0u8; 1];
    s.read_exact(&mut status)?;
    report.elapsed = start.elapsed();
    match status[0] {
        STATUS_OK => Ok(report),
        STATUS_BAD_DIGEST => Err(BulkError::BadDigest),
        x => Err(BulkError::Refused(x)),
    }
}

/// Writes all of `buf` to a non-blocking stream.
fn write_all_nb(s: &mut TcpStream, mut buf: &[u8]) -> io::Result<()> {
    while !buf.is_empty() {
        match s.write(buf) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => buf = &buf[n..],
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => wait_writable(s, Duration::from_millis(50)),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

fn stream_out(
    s: &mut TcpStream,
    data: &mut impl Read,
    len: u64,
    link: Option<&PermitClient>,
    opts: &BulkOptions,
    report: &mut BulkReport,
) -> Result<(), BulkError> {
    let mut hash = Sha256::new();
    let mut buf = vec![0u8; opts.chunk.max(1)];
    let mut sent = 0u64;
    while sent < len {
        let budget = match link {
            None => Budget::Unlimited,
            Some(l) => l.budget(s, len - sent, opts.rate_bps)?,
        };
        // An answer from the agent (an open permit without an end is one too).
        if link.is_some_and(|l| !l.gone.get()) {
            report.under_agent = true;
            report.permits += 1;
        }
        let n = match budget {
            Budget::Closed(d) | Budget::Wait(d) => {
                if matches!(budget, Budget::Closed(_)) {
                    report.closed_permits += 1;
                }
                let t = Instant::now();
                std::thread::sleep(d);
                report.held += t.elapsed();
                continue;
            }
            Budget::Bytes(b) => b.min(buf.len() as u64).min(len - sent) as usize,
            Budget::Unlimited => (buf.len() as u64).min(len - sent) as usize,
        };
        data.read_exact(&mut buf[..n])?;
        hash.update(&buf[..n]);
        write_all_nb(s, &buf[..n])?;
        sent += n as u64;
        report.bytes = sent;
    }
    write_all_nb(s, &hash.finalize())?;
    Ok(())
}

/// What [`recv`] received.
#[derive(Debug, Clone, PartialEq)]
pub struct Received {
    pub from: SocketAddr,
    pub bytes: u64,
    pub elapsed: Duration,
}

/// Accepts one transfer on `listener`, writing its data to `out`; the data is verified
/// before this returns `Ok` (on an error, what `out` got is not to be trusted).
pub fn recv(listener: &TcpListener, out: &mut impl Write, timeout: Duration) -> Result<Received, BulkError> {
    let (mut s, from) = listener.accept()?;
    let start = Instant::now();
    s.set_read_timeout(Some(timeout))?;
    let mut header = [0u8; 16];
    s.read_exact(&mut header).map_err(|_| BulkError::BadHeader)?;
    if &header[..8] != STREAM_MAGIC {
        return Err(BulkError::BadHeader);
    }
    let want = u64::from_be_bytes(header[8..].try_into().expect("8 bytes"));
    let mut hash = Sha256::new();
    let mut buf = vec![0u8; 64 << 10];
    let mut got = 0u64;
    while got < want {
        let n = (want - got).min(buf.len() as u64) as usize;
        let r = s.read(&mut buf[..n])?;
        if r == 0 {
            return Err(BulkError::Truncated { got, want });
        }
        hash.update(&buf[..r]);
        out.write_all(&buf[..r])?;
        got += r as u64;
    }
    let mut digest = [0u8; 32];
    s.read_exact(&mut digest).map_err(|_| BulkError::Truncated { got, want })?;
    let ok = hash.finalize().as_slice() == digest;
    s.write_all(&[if ok { STATUS_OK } else { STATUS_BAD_DIGEST }])?;
    if !ok {
        return Err(BulkError::BadDigest);
    }
    out.flush()?;
    Ok(Received { from, bytes: got, elapsed: start.elapsed() })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pattern(n: usize) -> Vec<u8> {
        (0..n as u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8).collect()
    }

    #[test]
    fn requests_and_permits_round_trip_and_strangers_are_refused() {
        for r in [BulkRequest::Demand { session: 7, port: 4000, pending: 1 << 40 }, BulkRequest::Close { session: 9 }] {
            assert_eq!(BulkRequest::decode(&r.encode()), Some(r));
        }
        for p in [
            WirePermit { open: true, left: Some(Duration::from_micros(1234)), rate_bps: 5 },
            WirePermit { open: false, left: None, rate_bps: 0 },
        ] {
            assert_eq!(WirePermit::decode(&p.encode()), Some(p));
        }
        let good = BulkRequest::Close { session: 1 }.encode();
        let mut bad_op = good;
        bad_op[4] = 9;
        let mut close_with_bytes = good;
        close_with_bytes[20] = 1;
        for b in [&good[..5], &bad_op[..], &close_with_bytes[..], b"CBK1xxxxxxxxxxxxxxxxxxx", &[]] {
            assert_eq!(BulkRequest::decode(b), None, "{b:?}");
        }
        let mut p = WirePermit { open: true, left: None, rate_bps: 1 }.encode();
        p[4] = 2;
        assert_eq!(WirePermit::decode(&p), None);
        assert_eq!(WirePermit::decode(&good), None);
    }

    #[test]
    fn a_budget_is_what_leaves_before_the_permit_ends() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let s = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let closed = WirePermit { open: false, left: None, rate_bps: 8_000_000 };
        assert_eq!(budget_of(&closed, &s, 1), Budget::Closed(Duration::from_millis(1)));
        let endless = WirePermit { open: true, left: None, rate_bps: 8_000_000 };
        assert_eq!(budget_of(&endless, &s, 1), Budget::Unlimited);
        // 10 ms at 1 MB/s, nothing in flight yet (and no delivery rate measured): 10 000 bytes.
        let short = WirePermit { open: true, left: Some(Duration::from_millis(10)), rate_bps: 8_000_000 };
        assert_eq!(budget_of(&short, &s, 1), Budget::Bytes(10_000));
        // The agent's rate missing: the sender's own.
        let no_rate = WirePermit { rate_bps: 0, ..short };
        assert_eq!(budget_of(&no_rate, &s, 16_000_000), Budget::Bytes(20_000));
        // Nothing fits in no time: wait, briefly.
        let over = WirePermit { left: Some(Duration::ZERO), ..short };
        assert_eq!(budget_of(&over, &s, 1), Budget::Wait(Duration::from_micros(200)));
    }

    #[test]
    fn a_transfer_arrives_whole_and_verified_without_an_agent() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let to = l.local_addr().unwrap();
        let data = pattern(3 << 20);
        let rx = std::thread::spawn(move || {
            let mut out = Vec::new();
            let r = recv(&l, &mut out, Duration::from_secs(20)).unwrap();
            (r, out)
        });
        let rep = send(to, &mut &data[..], data.len() as u64, &BulkOptions::default()).unwrap();
        let (r, out) = rx.join().unwrap();
        assert_eq!((rep.bytes, r.bytes), (data.len() as u64, data.len() as u64));
        assert!(out == data);
        assert!(!rep.under_agent);
        // An agent named on an interface without one: the same, unpermitted.
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let to = l.local_addr().unwrap();
        let rx = std::thread::spawn(move || recv(&l, &mut Vec::new(), Duration::from_secs(20)).map(|r| r.bytes));
        let opts = BulkOptions { agent_dev: Some(format!("none{}", std::process::id())), ..BulkOptions::default() };
        assert!(!send(to, &mut &data[..1000], 1000, &opts).unwrap().under_agent);
        assert_eq!(rx.join().unwrap().unwrap(), 1000);
    }

    #[test]
    fn altered_cut_and_foreign_streams_are_errors_at_both_ends() {
        // Altered: the digest does not match what arrived.
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let to = l.local_addr().unwrap();
        let rx = std::thread::spawn(move || recv(&l, &mut Vec::new(), Duration::from_secs(5)));
        let mut c = TcpStream::connect(to).unwrap();
        c.write_all(STREAM_MAGIC).unwrap();
        c.write_all(&4u64.to_be_bytes()).unwrap();
        c.write_all(b"abcd").unwrap();
        c.write_all(&[0u8; 32]).unwrap();
        let mut st = [9u8; 1];
        c.read_exact(&mut st).unwrap();
        assert_eq!(st[0], STATUS_BAD_DIGEST);
        assert!(matches!(rx.join().unwrap(), Err(BulkError::BadDigest)));

        // Cut: the sender vanishes mid-stream.
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let to = l.local_addr().unwrap();
        let rx = std::thread::spawn(move || recv(&l, &mut Vec::new(), Duration::from_secs(5)));
        let mut c = TcpStream::connect(to).unwrap();
        c.write_all(STREAM_MAGIC).unwrap();
        c.write_all(&100u64.to_be_bytes()).unwrap();
        c.write_all(&[1u8; 40]).unwrap();
        drop(c);
        assert!(matches!(rx.join().unwrap(), Err(BulkError::Truncated { got: 40, want: 100 })));

        // Foreign: not a bulk stream.
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let to = l.local_addr().unwrap();
        let rx = std::thread::spawn(move || recv(&l, &mut Vec::new(), Duration::from_secs(5)));
        TcpStream::connect(to).unwrap().write_all(b"GET / HTTP/1.1\r\n\r\n").unwrap();
        assert!(matches!(rx.join().unwrap(), Err(BulkError::BadHeader)));

        // The receiver vanishes: the sender gets an error, not a success.
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let to = l.local_addr().unwrap();
        let rx = std::thread::spawn(move || drop(l.accept().unwrap()));
        let data = pattern(4 << 20);
        let r = send(to, &mut &data[..], data.len() as u64, &BulkOptions::default());
        rx.join().unwrap();
        assert!(matches!(r, Err(BulkError::Io(_))), "{r:?}");
    }

    /// A stand-in for the agent's socket that answers closed permits for the first `closed`
    /// requests, then open ones with `left` to go, and records what it was asked.
    fn fake_agent(dev: &str, closed: usize, left: Duration) -> std::thread::JoinHandle<Vec<BulkRequest>> {
        let addr = UnixAddr::from_abstract_name(agent_socket_name(dev).as_bytes()).unwrap();
        let sock = UnixDatagram::bind_addr(&addr).unwrap();
        sock.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        std::thread::spawn(move || {
            let mut asked = Vec::new();
            let mut buf = [0u8; 64];
            while let Ok((n, from)) = sock.recv_from(&mut buf) {
                let Some(r) = BulkRequest::decode(&buf[..n]) else { continue };
                asked.push(r);
                if let BulkRequest::Demand { .. } = r {
                    let demands = asked.iter().filter(|r| matches!(r, BulkRequest::Demand { .. })).count();
                    let p = WirePermit { open: demands > closed, left: Some(left), rate_bps: 80_000_000 };
                    let _ = sock.send_to_addr(&p.encode(), &from);
                }
                if asked.iter().filter(|r| matches!(r, BulkRequest::Close { .. })).count() == 2 {
                    break;
                }
            }
            asked
        })
    }

    #[test]
    fn under_an_agent_nothing_is_sent_while_the_permit_is_closed_and_the_session_closes() {
        let dev = format!("fake{}", std::process::id());
        let agent = fake_agent(&dev, 5, Duration::from_millis(2));
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let to = l.local_addr().unwrap();
        let rx = std::thread::spawn(move || {
            let mut out = Vec::new();
            recv(&l, &mut out, Duration::from_secs(20)).unwrap();
            out
        });
        let data = pattern(1 << 20);
        let opts = BulkOptions { agent_dev: Some(dev), ..BulkOptions::default() };
        let rep = send(to, &mut &data[..], data.len() as u64, &opts).unwrap();
        assert!(rx.join().unwrap() == data);
        assert!(rep.under_agent);
        assert_eq!(rep.closed_permits, 5);
        let asked = agent.join().unwrap();
        // The opening probe and the final close; in between only demands of one session,
        // whose pending bytes never grow.
        assert!(matches!(asked.first(), Some(BulkRequest::Close { .. })));
        assert!(matches!(asked.last(), Some(BulkRequest::Close { .. })));
        let pending: Vec<u64> = asked
            .iter()
            .filter_map(|r| match r {
                BulkRequest::Demand { pending, .. } => Some(*pending),
                _ => None,
            })
            .collect();
        // Nothing left the sender while the permit was closed: the five closed answers and
        // the first open one were all asked with everything still pending.
        assert!(pending[..6].iter().all(|&p| p == data.len() as u64), "{:?}", &pending[..7]);
        assert!(pending.windows(2).all(|w| w[1] <= w[0]));
        // 2 ms at 80 Mbit/s is 20 000 bytes: no permit let more than that through.
        assert!(pending.len() as u64 >= 5 + data.len() as u64 / 20_000, "{} permits", pending.len());
    }
}
