//! A selective-repeat ARQ baseline for the LRT benches, as a sans-IO sender/receiver pair.
//!
//! What a careful engineer writes when asked for "reliable, in order, low latency, no coding":
//!
//! - Messages become the same stream of source symbols LRT sends ([`Divider`]), each carried
//!   once with a 64-bit sequence number in a 12-byte header (as long as LRT's symbol header),
//!   trimmed of its zero padding, paced by the same token bucket LRT uses.
//! - The receiver releases symbols strictly in order and acknowledges with the next sequence
//!   number it expects, up to [`MAX_RANGES`] ranges it holds beyond it (selective
//!   acknowledgements) and the highest frame packet number it has received. It acknowledges
//!   every [`ArqConfig::ack_every`] packets or [`ArqConfig::ack_delay`] after the first, and at
//!   once when a packet arrives out of order, fills a gap or is a duplicate (the gap report).
//! - **Immediate retransmission on a gap report.** On a first-in-first-out path, a symbol that
//!   an acknowledgement shows missing although the acknowledgement echoes a packet sent after
//!   the symbol's last transmission is lost; it is sent again at once, ahead of new data. No
//!   duplicate-acknowledgement threshold, no waiting.
//! - **Retransmission timeout** from the RFC 6298 estimator (`srtt + max(4·rttvar, 1 ms)`, plus
//!   the receiver's acknowledgement delay, as RFC 8985 allows for), for the tail a gap report
//!   cannot reveal and for lost retransmissions. No exponential backoff and no congestion
//!   window: the only limits are the pacing rate and [`ArqConfig::max_in_flight`].
//!
//! Round-trip samples come from the echoed packet number, so a retransmitted symbol never
//! gives an ambiguous sample (Karn's problem does not arise).

use cohort_proto::lrt::pace::{RttEstimator, TokenBucket};
use cohort_proto::lrt::stream::{Divider, Reassembler};
use cohort_time::Instant;
use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

/// Bytes of selective-acknowledgement bitmap an acknowledgement carries at most (4096
/// symbols beyond the next expected one: [`ArqConfig::max_in_flight`] can never exceed it).
pub const MAX_BITMAP: usize = 512;
const HEADER: usize = 12;
const DATA: u8 = 1;
const ACK: u8 = 2;
const ACK_FIXED: usize = 20;

/// Parameters of the ARQ pair.
#[derive(Debug, Clone)]
pub struct ArqConfig {
    pub symbol_size: usize,
    /// Pacing rate on the wire (bits per second) and bucket depth, as LRT's `rate_bps ·
    /// rate_share` and `burst_bytes`.
    pub rate_bps: u64,
    pub burst_bytes: usize,
    /// Symbols sent and not yet acknowledged, at most (1 to `8 · MAX_BITMAP`).
    pub max_in_flight: usize,
    pub ack_every: u32,
    pub ack_delay: Duration,
    pub initial_rtt: Duration,
}

impl Default for ArqConfig {
    fn default() -> Self {
        ArqConfig {
            symbol_size: 1200,
            rate_bps: 90_000_000,
            burst_bytes: 64 * 1024,
            max_in_flight: MAX_BITMAP * 8,
            ack_every: 2,
            ack_delay: Duration::from_millis(5),
            initial_rtt: Duration::from_millis(300),
        }
    }
}

/// Counters of one end.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ArqStats {
    pub data_sent: u64,
    pub retransmitted_gap: u64,
    pub retransmitted_timeout: u64,
    pub acks_sent: u64,
    pub duplicates_received: u64,
    pub malformed: u64,
}

#[derive(Debug)]
struct Segment {
    data: Vec<u8>,
    /// Frame packet number of its last transmission (`None` before the first).
    last_pn: Option<u64>,
    last_sent: Instant,
    acked: bool,
    queued: bool,
}

/// An acknowledgement: the next expected sequence number, the highest frame packet number
/// received, and a bitmap of the symbols held beyond `next` (bit `k` of byte `k / 8`, least
/// significant first: sequence number `next + 1 + k`), as long as the highest one held needs.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Ack {
    next: u64,
    echo_pn: u64,
    held: Vec<u8>,
}

impl Ack {
    fn emit(&self, buf: &mut [u8]) -> Option<usize> {
        let n = ACK_FIXED + self.held.len();
        let b = buf.get_mut(..n)?;
        b[0] = ACK;
        b[1] = 0;
        b[2..4].copy_from_slice(&u16::try_from(self.held.len()).ok()?.to_be_bytes());
        b[4..12].copy_from_slice(&self.next.to_be_bytes());
        b[12..20].copy_from_slice(&self.echo_pn.to_be_bytes());
        b[ACK_FIXED..].copy_from_slice(&self.held);
        Some(n)
    }

    fn parse(b: &[u8]) -> Option<Self> {
        let fixed = b.get(..ACK_FIXED)?;
        let len = usize::from(u16::from_be_bytes([fixed[2], fixed[3]]));
        if fixed[0] != ACK || len > MAX_BITMAP || b.len() != ACK_FIXED + len {
            return None;
        }
        let u64_at = |i: usize| u64::from_be_bytes(b[i..i + 8].try_into().unwrap_or([0; 8]));
        Some(Ack { next: u64_at(4), echo_pn: u64_at(12), held: b[ACK_FIXED..].to_vec() })
    }

    /// Sequence numbers the bitmap says are held.
    fn held_seqs(&self) -> impl Iterator<Item = u64> + '_ {
        let next = self.next;
        self.held.iter().enumerate().flat_map(move |(i, byte)| {
            (0..8).filter(move |k| byte & (1 << k) != 0).map(move |k| next + 1 + (i * 8 + k) as u64)
        })
    }
}

fn emit_data(seq: u64, payload: &[u8], buf: &mut [u8]) -> Option<usize> {
    let b = buf.get_mut(..HEADER + payload.len())?;
    b[0] = DATA;
    b[1..4].fill(0);
    b[4..12].copy_from_slice(&seq.to_be_bytes());
    b[HEADER..].copy_from_slice(payload);
    Some(b.len())
}

fn parse_data(b: &[u8]) -> Option<(u64, &[u8])> {
    if b.len() <= HEADER || b[0] != DATA {
        return None;
    }
    Some((u64::from_be_bytes(b[4..12].try_into().ok()?), &b[HEADER..]))
}

/// The sending end.
#[derive(Debug)]
pub struct ArqSender {
    cfg: ArqConfig,
    divider: Divider,
    /// Segments from sequence number `base` on, acknowledged or not.
    window: VecDeque<Segment>,
    base: u64,
    retransmit: VecDeque<u64>,
    bucket: TokenBucket,
    rtt: RttEstimator,
    sent: VecDeque<(u64, Instant)>,
    last_echo: Option<u64>,
    pub stats: ArqStats,
}

impl ArqSender {
    pub fn new(mut cfg: ArqConfig) -> Self {
        cfg.max_in_flight = cfg.max_in_flight.clamp(1, MAX_BITMAP * 8);
        ArqSender {
            divider: Divider::new(cfg.symbol_size),
            window: VecDeque::new(),
            base: 0,
            retransmit: VecDeque::new(),
            bucket: TokenBucket::new(cfg.rate_bps.max(1), cfg.burst_bytes, Instant::ZERO),
            rtt: RttEstimator::new(cfg.initial_rtt),
            sent: VecDeque::new(),
            last_echo: None,
            stats: ArqStats::default(),
            cfg,
        }
    }

    pub fn send(&mut self, msg: &[u8]) {
        self.divider.push(msg.to_vec());
    }

    /// Symbols sent and not yet acknowledged.
    pub fn in_flight(&self) -> usize {
        self.window.iter().filter(|s| !s.acked).count()
    }

    fn rto(&self) -> Duration {
        self.rtt.probe_timeout() + self.cfg.ack_delay
    }

    fn wire_len(&self) -> usize {
        self.cfg.symbol_size + HEADER + crate::lrt::PER_PACKET
    }

    /// The oldest unacknowledged segment's retransmission deadline.
    fn rto_at(&self) -> Option<Instant> {
        let rto = self.rto();
        self.window.iter().filter(|s| !s.acked && !s.queued && s.last_pn.is_some()).map(|s| s.last_sent + rto).min()
    }

    fn new_data_allowed(&self) -> bool {
        !self.divider.is_empty() && self.window.len() < self.cfg.max_in_flight
    }

    pub fn poll_timeout(&self) -> Option<Instant> {
        let wire = self.bucket.ready_at(self.wire_len());
        let send_now = (!self.retransmit.is_empty() || self.new_data_allowed()).then_some(wire);
        [send_now, self.rto_at().map(|t| t.max(wire))].into_iter().flatten().min()
    }

    pub fn handle_timeout(&mut self, now: Instant) {
        let rto = self.rto();
        for (i, s) in self.window.iter_mut().enumerate() {
            if !s.acked && !s.queued && s.last_pn.is_some() && now >= s.last_sent + rto {
                s.queued = true;
                self.retransmit.push_back(self.base + i as u64);
                self.stats.retransmitted_timeout += 1;
            }
        }
    }

    pub fn poll_transmit(&mut self, now: Instant, pn: u64, buf: &mut [u8]) -> Option<usize> {
        while let Some(&seq) = self.retransmit.front() {
            let i = seq.checked_sub(self.base).map(|i| i as usize);
            match i.and_then(|i| self.window.get(i)) {
                Some(s) if !s.acked => break,
                _ => {
                    self.retransmit.pop_front();
                }
            }
        }
        let wire = self.wire_len();
        let seq = match self.retransmit.front() {
            Some(&seq) => {
                if !self.bucket.try_take(now, wire) {
                    return None;
                }
                self.retransmit.pop_front();
                seq
            }
            None if self.new_data_allowed() => {
                if !self.bucket.try_take(now, wire) {
                    return None;
                }
                let mut data = Vec::with_capacity(self.cfg.symbol_size);
                self.divider.next_symbol(&mut data);
                let seq = self.base + self.window.len() as u64;
                self.window.push_back(Segment { data, last_pn: None, last_sent: now, acked: false, queued: false });
                seq
            }
            None => return None,
        };
        let s = &mut self.window[(seq - self.base) as usize];
        s.last_pn = Some(pn);
        s.last_sent = now;
        s.queued = false;
        self.stats.data_sent += 1;
        self.sent.push_back((pn, now));
        emit_data(seq, &s.data, buf)
    }

    pub fn handle_packet(&mut self, now: Instant, bytes: &[u8]) {
        let Some(a) = Ack::parse(bytes) else {
            self.stats.malformed += 1;
            return;
        };
        if self.last_echo.is_none_or(|e| a.echo_pn > e) {
            while let Some(&(pn, at)) = self.sent.front() {
                if pn > a.echo_pn {
                    break;
                }
                self.sent.pop_front();
                if pn == a.echo_pn {
                    self.rtt.sample(now - at);
                }
            }
            self.last_echo = Some(a.echo_pn);
        }
        // Cumulative part: everything below `next` is released.
        while self.base < a.next && !self.window.is_empty() {
            self.window.pop_front();
            self.base += 1;
        }
        let mut highest = None;
        for seq in a.held_seqs() {
            highest = Some(seq);
            if let Some(s) = seq.checked_sub(self.base).and_then(|i| self.window.get_mut(i as usize)) {
                s.acked = true;
            }
        }
        // The gap report: a segment still missing whose last transmission left before the
        // packet this acknowledgement echoes is lost (the path keeps order).
        let Some(highest) = highest else {
            return;
        };
        for (i, s) in self.window.iter_mut().enumerate() {
            let seq = self.base + i as u64;
            if seq >= highest {
                break;
            }
            if !s.acked && !s.queued && s.last_pn.is_some_and(|p| p < a.echo_pn) {
                s.queued = true;
                self.retransmit.push_back(seq);
                self.stats.retransmitted_gap += 1;
            }
        }
    }
}

/// The receiving end.
#[derive(Debug)]
pub struct ArqReceiver {
    cfg: ArqConfig,
    next: u64,
    held: BTreeMap<u64, Vec<u8>>,
    reasm: Reassembler,
    padded: Vec<u8>,
    highest_pn: u64,
    owed: u32,
    ack_due: Option<Instant>,
    ack_now: bool,
    pub messages: VecDeque<Vec<u8>>,
    pub stats: ArqStats,
}

impl ArqReceiver {
    pub fn new(mut cfg: ArqConfig) -> Self {
        cfg.max_in_flight = cfg.max_in_flight.clamp(1, MAX_BITMAP * 8);
        ArqReceiver {
            next: 0,
            held: BTreeMap::new(),
            reasm: Reassembler::new(cfg.symbol_size),
            padded: vec![0; cfg.symbol_size],
            highest_pn: 0,
            owed: 0,
            ack_due: None,
            ack_now: false,
            messages: VecDeque::new(),
            stats: ArqStats::default(),
            cfg,
        }
    }

    fn release(&mut self, seq: u64, data: &[u8]) {
        debug_assert_eq!(seq, self.next);
        self.padded[..data.len()].copy_from_slice(data);
        self.padded[data.len()..].fill(0);
        if self.reasm.push_symbol(&self.padded, &mut self.messages).is_err() {
            self.stats.malformed += 1;
        }
        self.next += 1;
    }

    pub fn handle_packet(&mut self, now: Instant, pn: u64, bytes: &[u8]) {
        let Some((seq, data)) = parse_data(bytes).filter(|(_, d)| d.len() <= self.cfg.symbol_size) else {
            self.stats.malformed += 1;
            return;
        };
        self.highest_pn = self.highest_pn.max(pn);
        if seq < self.next || self.held.contains_key(&seq) {
            self.stats.duplicates_received += 1;
            self.ack_now = true;
            return;
        }
        if seq == self.next {
            let filled_gap = !self.held.is_empty();
            self.release(seq, data);
            while let Some(d) = self.held.remove(&self.next) {
                self.release(self.next, &d);
            }
            self.ack_now |= filled_gap;
        } else if seq - self.next < self.cfg.max_in_flight as u64 {
            self.held.insert(seq, data.to_vec());
            self.ack_now = true;
        } else {
            self.stats.malformed += 1;
            return;
        }
        self.owed += 1;
        self.ack_due.get_or_insert(now + self.cfg.ack_delay);
        if self.owed >= self.cfg.ack_every {
            self.ack_now = true;
        }
    }

    pub fn poll_timeout(&self) -> Option<Instant> {
        if self.ack_now { Some(Instant::ZERO) } else { self.ack_due }
    }

    pub fn poll_transmit(&mut self, now: Instant, buf: &mut [u8]) -> Option<usize> {
        if !(self.ack_now || self.ack_due.is_some_and(|d| now >= d)) {
            return None;
        }
        self.ack_now = false;
        self.ack_due = None;
        self.owed = 0;
        let mut held = Vec::new();
        for &seq in self.held.keys() {
            let bit = (seq - self.next - 1) as usize;
            if bit / 8 >= MAX_BITMAP {
                break;
            }
            held.resize(held.len().max(bit / 8 + 1), 0u8);
            held[bit / 8] |= 1 << (bit % 8);
        }
        self.stats.acks_sent += 1;
        Ack { next: self.next, echo_pn: self.highest_pn, held }.emit(buf)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(ms: u64) -> Instant {
        Instant::ZERO + Duration::from_millis(ms)
    }

    /// Moves every packet from `s` to `r` except those whose send index is in `lose`.
    fn pump(s: &mut ArqSender, r: &mut ArqReceiver, now: Instant, pn: &mut u64, lose: &[u64]) -> Vec<u64> {
        let mut buf = vec![0u8; 2000];
        let mut sent = Vec::new();
        while let Some(n) = s.poll_transmit(now, *pn, &mut buf) {
            if !lose.contains(pn) {
                r.handle_packet(now, *pn, &buf[..n]);
            }
            sent.push(u64::from_be_bytes(buf[4..12].try_into().unwrap()));
            *pn += 1;
        }
        sent
    }

    fn ack(s: &mut ArqSender, r: &mut ArqReceiver, now: Instant) {
        let mut buf = vec![0u8; 2000];
        while let Some(n) = r.poll_transmit(now, &mut buf) {
            s.handle_packet(now, &buf[..n]);
        }
    }

    #[test]
    fn a_gap_report_resends_only_the_lost_symbol_at_once() {
        let cfg = ArqConfig { symbol_size: 100, ..ArqConfig::default() };
        let (mut s, mut r) = (ArqSender::new(cfg.clone()), ArqReceiver::new(cfg));
        let mut pn = 0;
        for i in 0..4u8 {
            s.send(&[i; 150]);
        }
        let sent = pump(&mut s, &mut r, t(0), &mut pn, &[1]);
        assert_eq!(sent, (0..sent.len() as u64).collect::<Vec<_>>());
        ack(&mut s, &mut r, t(10));
        let again = pump(&mut s, &mut r, t(10), &mut pn, &[]);
        assert_eq!(again, vec![1], "only the lost symbol, before any timeout");
        assert_eq!(s.stats.retransmitted_gap, 1);
        let got: Vec<Vec<u8>> = r.messages.drain(..).collect();
        assert_eq!(got, (0..4u8).map(|i| vec![i; 150]).collect::<Vec<_>>());
        ack(&mut s, &mut r, t(20));
        assert_eq!(s.in_flight(), 0);
    }

    #[test]
    fn a_lost_tail_and_a_lost_retransmission_come_back_on_the_timeout() {
        let cfg = ArqConfig { symbol_size: 100, ..ArqConfig::default() };
        let (mut s, mut r) = (ArqSender::new(cfg.clone()), ArqReceiver::new(cfg));
        let mut pn = 0;
        s.send(&[7; 50]);
        pump(&mut s, &mut r, t(0), &mut pn, &[0]);
        let due = s.poll_timeout().unwrap();
        assert!(due > t(0));
        s.handle_timeout(due);
        pump(&mut s, &mut r, due, &mut pn, &[1]);
        assert_eq!(s.stats.retransmitted_timeout, 1);
        let due2 = s.poll_timeout().unwrap();
        assert!(due2 > due, "no retransmission before the next timeout");
        s.handle_timeout(due2);
        pump(&mut s, &mut r, due2, &mut pn, &[]);
        assert_eq!(r.messages.pop_front(), Some(vec![7; 50]));
        assert_eq!(s.stats.retransmitted_timeout, 2);
    }

    #[test]
    fn acknowledgements_round_trip_and_bad_packets_are_counted() {
        let a = Ack { next: 1 << 40, echo_pn: 9, held: vec![0b101, 0, 0x80] };
        let mut buf = [0u8; 100];
        let n = a.emit(&mut buf).unwrap();
        assert_eq!(a.held_seqs().map(|s| s - (1 << 40)).collect::<Vec<_>>(), vec![1, 3, 24]);
        assert_eq!(Ack::parse(&buf[..n]), Some(a));
        assert_eq!(Ack::parse(&buf[..n - 1]), None);
        let cfg = ArqConfig::default();
        let (mut s, mut r) = (ArqSender::new(cfg.clone()), ArqReceiver::new(cfg));
        s.handle_packet(t(0), &[2, 0, 0]);
        r.handle_packet(t(0), 0, &[1, 0, 0]);
        r.handle_packet(t(0), 0, &[1; 5000]);
        assert_eq!((s.stats.malformed, r.stats.malformed), (1, 2));
    }
}
