//! Seed 003 §VI-B: 1-to-N request-reply ([`Rr`], [`rr_coordinator`], [`RrServer`]).
//!
//! The coordinator issues `interactions` requests at full speed; each interaction completes when
//! every member (ordinary process) has replied. Request body `0x51 | seq: u64 | padding`, reply
//! body `0x52 | seq: u64 | padding`; the harness fills both to its payload size
//! ([`crate::group::one_frame_payload`]: every system's message then fills one full-MTU frame, the
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

use super::common::{
    Conn, READABLE, Rto, RtoEstimator, STOP_POLL, ServerSock, accept_all, be_u64, connect_retry, invalid_data,
    invalid_input, is_transient_udp, padded, poll_fds, pollfd, remaining, send_lossy, sock_timeout, unspecified_like,
    with_context,
};
use std::collections::HashMap;
use std::io;
use std::net::{SocketAddr, TcpListener, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

const TAG_REQUEST: u8 = 0x51;
const TAG_REPLY: u8 = 0x52;

/// Header of a request or reply: tag + seq.
const RR_HEADER: usize = 9;

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::group::baselines::common::{lo, lossy_relay, soon};
    use std::io::{Read, Write};
    use std::net::TcpStream;
    use std::sync::Arc;
    use std::thread;

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
}
