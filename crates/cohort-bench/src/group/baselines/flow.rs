//! Seed 003 §VI-C: N-to-1 message flow ([`Flow`], [`flow_source`], [`FlowSink`]).
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

use super::common::{
    Conn, LEN_PREFIX, Rto, RtoEstimator, STOP_POLL, ServerSock, accept_all, be_u32, connect_retry, invalid_input,
    is_timeout, is_transient_udp, padded, poll_fds, pollfd, remaining, send_lossy, sock_timeout, timed_out,
    unspecified_like, with_context,
};
use std::collections::{BTreeMap, HashMap};
use std::io::{self, Write};
use std::net::{SocketAddr, TcpListener, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

const TAG_DATA: u8 = 0x44;
const TAG_ACK: u8 = 0x41;
/// The length of a RUP-PAR acknowledgement.
pub const RUP_ACK_LEN: usize = 10;

/// Header of an N-to-1 data message: tag + sender + index + bit.
const FLOW_HEADER: usize = 10;

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
fn ack_body(sender: u32, bit: u8, index: u32) -> [u8; RUP_ACK_LEN] {
    let mut h = [0u8; RUP_ACK_LEN];
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::group::baselines::common::{lo, lossy_relay, soon};
    use std::sync::Arc;
    use std::thread;

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
}
