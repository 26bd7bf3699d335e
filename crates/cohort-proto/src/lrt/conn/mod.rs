//! The LRT connection state machine.

use super::pace::{LossEstimator, RttEstimator, TokenBucket};
use super::rate::{AckSample, RateEstimator};
use super::stream::{Divider, MAX_MESSAGE, Reassembler};
use cohort_coding::gf256::Kernel;
use cohort_coding::{CoderConfig, Decoder, Encoder, Outcome, RepairInfo};
use cohort_time::Instant;
use cohort_wire::lrt::{AckRepr, HelloRepr, LRT_VERSION, LrtRepr};
use cohort_wire::symbol::{SymbolKind, SymbolRepr};
use std::collections::VecDeque;
use std::time::Duration;

/// Close codes carried by CLOSE packets.
pub mod code {
    pub const NORMAL: u16 = 0;
    pub const PARAMS: u16 = 1;
    pub const PROTOCOL: u16 = 2;
}

/// Connection parameters. Both ends must agree on `symbol_size`, `max_window` and
/// `coder_symbols`; the handshake checks it.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// Bytes per source symbol (default 1200: with headers a datagram stays under 1280).
    pub symbol_size: usize,
    /// Most unacknowledged source symbols a repair combines (default 256: a 100 ms round
    /// trip at one message per millisecond).
    pub max_window: usize,
    /// Source symbols per coder before the next coder (with the next ID) takes over
    /// (seed 004 §III-B, D).
    pub coder_symbols: u32,
    /// Coders alive at once; a new one waits until the oldest is fully acknowledged.
    pub max_coders: usize,
    /// Available bandwidth `Bw` of seed 004 eq. (2), bits per second; with `estimate_rate`,
    /// the cap on the measured one.
    pub rate_bps: u64,
    /// Share `β` of `Bw` LRT may use; the rest is left to best-effort traffic.
    pub rate_share: f64,
    /// Measure `Bw` instead of trusting `rate_bps` ([`crate::lrt::rate`]): pace at `β` of the
    /// bandwidth the path delivers when a queue builds, probe upwards while none does.
    pub estimate_rate: bool,
    /// Queueing delay (smallest round trip of a round over the path's smallest) above which
    /// the estimator backs off; at least a quarter of the smallest round trip is allowed.
    pub queue_target: Duration,
    /// Token-bucket depth.
    pub burst_bytes: usize,
    /// Redundancy `r` (repairs per source symbol) is `p + spread * sqrt(p * b)` for the loss
    /// rate `p` and mean loss-burst length `b` the acknowledgements show, clamped to
    /// `[min, max]`; see [`crate::lrt::pace::redundancy`].
    pub redundancy_min: f64,
    pub redundancy_max: f64,
    pub redundancy_spread: f64,
    /// Loss rate assumed until acknowledgements have shown 200 packets' worth (0.1: a lossy
    /// radio); the redundancy starts from it.
    pub initial_loss: f64,
    /// Longest a source symbol waits for a repair that covers it: a low-rate flow (one
    /// message every 10 ms) gets a repair on this timer instead of after the next message.
    pub repair_delay: Duration,
    /// A timer repair covering fewer than `timer_sources` sources waits until `repair_period`
    /// after the previous repair: at low message rates the timer covers the sources of one
    /// period with one repair instead of sending one per message. With 8 ms, 20 ms and 4, a
    /// flow of one message every 10 ms gets a timer repair every second message (a lost message
    /// waits at most about 18 ms), one every 5 ms every fourth, and a flow of one message per
    /// millisecond keeps the 8 ms timer.
    pub repair_period: Duration,
    pub timer_sources: u32,
    /// Acknowledge after this many symbol packets changed the rank...
    pub ack_every: u32,
    /// ...or this long after the first one, whichever comes first. Redundant symbols, full
    /// rank and room freed by `recv` are acknowledged at once.
    pub ack_delay: Duration,
    pub keepalive: Duration,
    /// No authenticated packet from the peer for this long: the connection is lost.
    pub idle_timeout: Duration,
    pub handshake_retry: Duration,
    pub handshake_timeout: Duration,
    /// Bytes `send` may queue before returning `WouldBlock`.
    pub send_buffer_bytes: usize,
    /// Bytes of complete messages held for `recv` before the receiver stops releasing
    /// symbols (which in turn stops the sender).
    pub recv_buffer_bytes: usize,
    pub initial_rtt: Duration,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            symbol_size: 1200,
            max_window: 256,
            coder_symbols: 1 << 16,
            max_coders: 4,
            rate_bps: 100_000_000,
            rate_share: 0.9,
            estimate_rate: false,
            queue_target: Duration::from_millis(5),
            burst_bytes: 64 * 1024,
            redundancy_min: 0.02,
            redundancy_max: 1.0,
            redundancy_spread: 0.6,
            initial_loss: 0.1,
            repair_delay: Duration::from_millis(8),
            repair_period: Duration::from_millis(20),
            timer_sources: 4,
            ack_every: 8,
            ack_delay: Duration::from_millis(5),
            keepalive: Duration::from_secs(1),
            idle_timeout: Duration::from_secs(10),
            handshake_retry: Duration::from_millis(100),
            handshake_timeout: Duration::from_secs(5),
            send_buffer_bytes: 8 << 20,
            recv_buffer_bytes: 8 << 20,
            initial_rtt: Duration::from_millis(300),
        }
    }
}

/// An invalid [`Config`].
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ConfigError {
    #[error("symbol_size {0} outside 16..=65535")]
    SymbolSize(usize),
    #[error("max_window {0} outside 1..=32767")]
    Window(usize),
    #[error("coder_symbols must be positive")]
    CoderSymbols,
    #[error("max_coders {0} outside 1..=1024")]
    Coders(usize),
    #[error("rate_share {0} outside (0, 1]")]
    RateShare(f64),
    #[error("redundancy bounds invalid: min {min}, max {max}, spread {margin}")]
    Redundancy { min: f64, max: f64, margin: f64 },
    #[error("rate_bps must be positive")]
    Rate,
    #[error("burst_bytes {burst} is below one packet on the wire ({packet} bytes): nothing could ever be sent")]
    Burst { burst: usize, packet: usize },
}

impl Config {
    pub fn validate(&self) -> Result<(), ConfigError> {
        if !(16..=u16::MAX as usize).contains(&self.symbol_size) {
            return Err(ConfigError::SymbolSize(self.symbol_size));
        }
        if !(1..=0x7FFF).contains(&self.max_window) {
            return Err(ConfigError::Window(self.max_window));
        }
        if self.coder_symbols == 0 {
            return Err(ConfigError::CoderSymbols);
        }
        if !(1..=1024).contains(&self.max_coders) {
            return Err(ConfigError::Coders(self.max_coders));
        }
        if !(self.rate_share > 0.0 && self.rate_share <= 1.0) {
            return Err(ConfigError::RateShare(self.rate_share));
        }
        if self.rate_bps == 0 {
            return Err(ConfigError::Rate);
        }
        // The pacer's bucket must hold the largest packet, or the connection never sends.
        let packet = self.symbol_wire_len();
        if self.burst_bytes < packet {
            return Err(ConfigError::Burst { burst: self.burst_bytes, packet });
        }
        let (min, max, margin) = (self.redundancy_min, self.redundancy_max, self.redundancy_spread);
        if !(0.0..=max).contains(&min)
            || max > 16.0
            || !(0.0..=16.0).contains(&margin)
            || !(0.0..1.0).contains(&self.initial_loss)
        {
            return Err(ConfigError::Redundancy { min, max, margin });
        }
        Ok(())
    }

    /// The largest packet a connection sends (a symbol with its header).
    fn max_packet_len(&self) -> usize {
        self.symbol_size + cohort_wire::symbol::HEADER_LEN
    }

    /// Tokens a symbol packet needs: the largest packet, with the driver's framing.
    fn symbol_wire_len(&self) -> usize {
        self.max_packet_len() + transmit::PER_PACKET_OVERHEAD
    }

    fn coder_config(&self) -> CoderConfig {
        CoderConfig { symbol_size: self.symbol_size, max_window: self.max_window }
    }

    fn hello(&self, conn_id: u64) -> HelloRepr {
        HelloRepr {
            version: LRT_VERSION,
            symbol_size: self.symbol_size as u16,
            max_window: self.max_window as u16,
            coder_symbols: self.coder_symbols,
            conn_id,
        }
    }
}

/// Which end opened the connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Client,
    Server,
}

/// Why a connection ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CloseReason {
    /// `close` was called here.
    Local,
    /// The peer closed with this code.
    Peer(u16),
    /// Nothing authenticated arrived for the idle timeout: the peer vanished.
    TimedOut,
    /// The handshake got no answer.
    HandshakeTimedOut,
    /// The peer's parameters differ from ours.
    ParamMismatch { ours: HelloRepr, theirs: HelloRepr },
    /// The peer sent something a correct peer cannot.
    Protocol(String),
}

/// Connection state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum State {
    Handshaking,
    Established,
    Closed(CloseReason),
}

/// Something the application should know.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    Connected,
    /// Messages are waiting in `recv`.
    Readable,
    /// `send` has room again after a `WouldBlock`.
    Writable,
    Closed(CloseReason),
}

/// Why `send` refused a message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SendError {
    #[error("messages must be 1 byte to 16 MiB, got {0} bytes")]
    Size(usize),
    #[error("send buffer full; wait for Event::Writable")]
    WouldBlock,
    #[error("connection closed: {0:?}")]
    Closed(CloseReason),
}

/// Why `recv` returned nothing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RecvError {
    #[error("connection closed: {0:?}")]
    Closed(CloseReason),
}

/// Counters. Byte counts are LRT packet bytes; the driver adds its framing.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ConnStats {
    pub packets_sent: u64,
    pub bytes_sent: u64,
    pub source_sent: u64,
    pub repair_sent: u64,
    /// Repairs sent because a source symbol waited `repair_delay` uncovered.
    pub repair_timer_sent: u64,
    /// Repairs sent because acknowledgements stalled.
    pub repair_probe_sent: u64,
    /// Repairs sent, ahead of new sources, because an acknowledgement showed the receiver
    /// lacking them.
    pub repair_feedback_sent: u64,
    /// Repairs sent ahead of new sources because the driver reported symbols lost
    /// ([`Connection::repair_soon`]).
    pub repair_signal_sent: u64,
    pub acks_sent: u64,
    pub full_rank_acks_sent: u64,
    pub packets_received: u64,
    pub bytes_received: u64,
    pub symbols_received: u64,
    pub malformed: u64,
    /// Symbols of coders already fully decoded (the out-of-date filter).
    pub out_of_date: u64,
    /// Symbols the decoder refused (beyond its window, wrong size) or of coders too far ahead.
    pub symbols_rejected: u64,
    pub messages_sent: u64,
    pub messages_received: u64,
    pub coders_opened: u64,
    pub loss_estimate: f64,
    pub redundancy: f64,
    pub srtt_us: u64,
    /// The pacing rate now, bits per second (the operator's, or the estimator's).
    pub rate_bps: u64,
    /// CLOSE packets sent again during the closing period, in answer to a peer that had
    /// not heard the first.
    pub closes_repeated: u64,
}

/// After this end sent its CLOSE, it stays this many probe timeouts (at most
/// [`MAX_CLOSING`]) to answer a peer that did not hear it (RFC 9000 §10.2.1's closing state),
/// and sends the CLOSE again once per probe timeout meanwhile, for a peer with nothing to
/// say: a lost CLOSE otherwise leaves the peer waiting for its idle timeout and reporting a
/// time-out for a connection that ended normally.
pub const CLOSING_PTOS: u32 = 3;
/// The longest closing period: a driver holds its socket no longer after a close.
pub const MAX_CLOSING: Duration = Duration::from_secs(1);

/// The closing period of an end that sent its CLOSE.
#[derive(Debug, Clone, Copy)]
struct Closing {
    code: u16,
    until: Instant,
    /// Packets heard from the peer since; the CLOSE goes again at the 1st, 2nd, 4th, 8th...
    heard: u32,
    /// When the CLOSE goes again unasked, and the gap between copies.
    next_copy: Instant,
    every: Duration,
}

#[derive(Debug)]
struct TxCoder {
    id: u16,
    enc: Encoder,
    /// Used (untrimmed) length of each symbol in the window.
    lens: VecDeque<u16>,
    credit: f64,
    /// Repairs the receiver's acknowledgements show it lacks, less those in flight: sent
    /// before new sources.
    owed: u32,
    uncovered_since: Option<Instant>,
    /// Sources sent since the last repair.
    uncovered: u32,
    last_progress: Instant,
    last_repair: Instant,
    seen: u64,
    repairs_sent: u64,
    /// Repairs sent in answer to known losses (acknowledgements or the driver's signal).
    answers_sent: u64,
}

impl TxCoder {
    fn closed(&self, cfg: &Config) -> bool {
        self.enc.rank() >= u64::from(cfg.coder_symbols)
    }

    /// When the repair timer fires: `repair_delay` after the oldest source no repair covers,
    /// and, while fewer than `timer_sources` sources wait, no sooner than `repair_period`
    /// after the last repair.
    fn timer_at(&self, cfg: &Config) -> Option<Instant> {
        let due = self.uncovered_since? + cfg.repair_delay;
        Some(if self.uncovered >= cfg.timer_sources { due } else { due.max(self.last_repair + cfg.repair_period) })
    }

    /// When to send a repair because acknowledgements stalled: a probe timeout after the
    /// last progress or repair, allowing for the receiver's acknowledgement delay.
    fn probe_at(&self, rtt: &RttEstimator, ack_delay: Duration) -> Instant {
        self.last_progress.max(self.last_repair) + rtt.probe_timeout() + ack_delay
    }
}

#[derive(Debug)]
struct RxCoder {
    id: u16,
    dec: Decoder,
    ack_pending: bool,
    /// One past the newest column any received symbol involves: the sender's rank when it
    /// sent that symbol, at least.
    newest: u64,
    /// Columns missing (`newest` − rank) when last looked at: a rise reveals a new loss.
    missing: u64,
}

/// A sent packet, for matching acknowledgements: frame packet number, time, symbol packets
/// sent up to and including it.
#[derive(Debug, Clone, Copy)]
struct Sent {
    pn: u64,
    at: Instant,
    data_total: u64,
    /// For a symbol packet: its coder, the coder's rank and the repairs it had sent in
    /// answer to known losses.
    coder: Option<(u16, u64, u64)>,
}

const SENT_LOG: usize = 1 << 14;
const STALE_ACKS: usize = 16;

/// One end of an LRT connection. See the [module docs](super).
#[derive(Debug)]
pub struct Connection {
    cfg: Config,
    role: Role,
    state: State,
    conn_id: u64,
    created: Instant,
    last_rx: Instant,
    last_tx: Instant,
    hello_due: Option<Instant>,
    hello_ack_pending: bool,
    close_pending: Option<u16>,
    closing: Option<Closing>,
    // Sender.
    divider: Divider,
    sym: Vec<u8>,
    tx: VecDeque<TxCoder>,
    next_coder: u16,
    rr: usize,
    bucket: TokenBucket,
    rate: Option<RateEstimator>,
    loss: LossEstimator,
    rtt: RttEstimator,
    sent: VecDeque<Sent>,
    data_total: u64,
    /// The coder snapshot of the symbol `next_packet` just emitted, for the sent log.
    emitted: Option<(u16, u64, u64)>,
    last_echo: Option<u64>,
    /// The coder snapshot the last new echo gave (see `on_ack`).
    echo_then: Option<(u16, u64, u64)>,
    last_rx_data: u64,
    want_writable: bool,
    // Receiver.
    rx: VecDeque<RxCoder>,
    filter: u16,
    reasm: Reassembler,
    recv_queue: VecDeque<Vec<u8>>,
    recv_bytes: usize,
    highest_pn: Option<u64>,
    /// When `highest_pn` arrived: an acknowledgement reports how long it held it.
    highest_pn_at: Option<Instant>,
    rx_data: u64,
    /// Runs of consecutive frame packet numbers found missing (wrapping).
    loss_runs: u32,
    last_loss_runs: u32,
    stale_acks: VecDeque<u16>,
    /// Repairs the driver asked for ahead of new sources.
    urgent_repairs: u32,
    /// How much later than an echoed packet a packet sent before it may still arrive
    /// (several paths of different delays); zero on one path, which keeps order.
    reorder_window: Duration,
    acks_owed: u32,
    ack_due: Option<Instant>,
    ack_now: bool,
    padded: Vec<u8>,
    /// Symbol buffers of finished coders: one pool for the coders of both directions, which
    /// take from it before they push a symbol (a decoder up to two, an encoder one), so a long
    /// connection rolls coders over without allocating and its memory stays flat.
    buffers: Vec<Box<[u8]>>,
    /// Symbol buffers allocated by coders that have finished.
    allocated_by_finished: u64,
    events: VecDeque<Event>,
    stats: ConnStats,
}

impl Connection {
    fn new(cfg: Config, role: Role, conn_id: u64, now: Instant) -> Result<Self, ConfigError> {
        cfg.validate()?;
        let rate = (cfg.rate_bps as f64 * cfg.rate_share) as u64;
        let rate_est =
            cfg.estimate_rate.then(|| RateEstimator::new(rate as f64, cfg.rate_share, cfg.queue_target, now));
        Ok(Connection {
            role,
            state: State::Handshaking,
            conn_id,
            created: now,
            last_rx: now,
            last_tx: now,
            hello_due: (role == Role::Client).then_some(now),
            hello_ack_pending: false,
            close_pending: None,
            closing: None,
            divider: Divider::new(cfg.symbol_size),
            sym: Vec::with_capacity(cfg.symbol_size),
            tx: VecDeque::new(),
            next_coder: 0,
            rr: 0,
            bucket: TokenBucket::new(
                rate_est.as_ref().map_or(rate, |e| e.rate_bps() as u64).max(1),
                cfg.burst_bytes,
                now,
            ),
            rate: rate_est,
            loss: LossEstimator::with_prior(cfg.initial_loss),
            rtt: RttEstimator::new(cfg.initial_rtt),
            sent: VecDeque::new(),
            data_total: 0,
            emitted: None,
            last_echo: None,
            echo_then: None,
            last_rx_data: 0,
            want_writable: false,
            rx: VecDeque::new(),
            filter: 0,
            reasm: Reassembler::new(cfg.symbol_size),
            recv_queue: VecDeque::new(),
            recv_bytes: 0,
            highest_pn: None,
            highest_pn_at: None,
            rx_data: 0,
            loss_runs: 0,
            last_loss_runs: 0,
            stale_acks: VecDeque::new(),
            urgent_repairs: 0,
            reorder_window: Duration::ZERO,
            acks_owed: 0,
            ack_due: None,
            ack_now: false,
            padded: vec![0u8; cfg.symbol_size],
            buffers: Vec::new(),
            allocated_by_finished: 0,
            events: VecDeque::new(),
            stats: ConnStats::default(),
            cfg,
        })
    }

    /// Opens a connection: HELLO goes out on the first `poll_transmit`.
    pub fn connect(cfg: Config, conn_id: u64, now: Instant) -> Result<Self, ConfigError> {
        Self::new(cfg, Role::Client, conn_id, now)
    }

    /// Waits for a peer's HELLO.
    pub fn accept(cfg: Config, now: Instant) -> Result<Self, ConfigError> {
        Self::new(cfg, Role::Server, 0, now)
    }

    pub fn role(&self) -> Role {
        self.role
    }

    pub fn state(&self) -> &State {
        &self.state
    }

    pub fn config(&self) -> &Config {
        &self.cfg
    }

    pub fn stats(&self) -> ConnStats {
        let mut s = self.stats;
        s.loss_estimate = self.loss.loss();
        s.redundancy = self.redundancy();
        s.srtt_us = self.rtt.srtt().as_micros() as u64;
        s.rate_bps = self.bucket.rate_bps();
        s
    }

    /// The bandwidth estimator, when `estimate_rate` is on.
    pub fn rate_estimator(&self) -> Option<&RateEstimator> {
        self.rate.as_ref()
    }

    /// Bytes accepted by `send` and not yet cut into symbols.
    pub fn send_queued_bytes(&self) -> usize {
        self.divider.queued_bytes()
    }

    /// Source symbols sent and not yet seen by the peer, over all coders.
    pub fn unacked_symbols(&self) -> u64 {
        self.tx.iter().map(|c| c.enc.window().end - c.enc.window().start).sum()
    }

    /// Bytes of memory the connection's queues hold (send queue, coders' windows, decoders'
    /// windows, received messages): what backpressure bounds.
    pub fn buffered_bytes(&self) -> usize {
        let s = self.cfg.symbol_size;
        self.divider.queued_bytes()
            + self.tx.len() * self.cfg.max_window * s
            + self.rx.len() * 2 * self.cfg.max_window * s
            + self.recv_bytes
            + self.reasm.partial_bytes()
    }

    /// Symbol buffers the connection holds: in its coders and kept for the next ones.
    pub fn symbol_buffers(&self) -> usize {
        self.buffers.len()
            + self.tx.iter().map(|c| c.enc.buffers()).sum::<usize>()
            + self.rx.iter().map(|c| c.dec.buffers()).sum::<usize>()
    }

    /// Symbol buffers allocated over the connection's life. Once the traffic has reached its
    /// peak this stops growing, however many coders roll over: a finished coder's buffers
    /// serve the next one.
    pub fn symbol_buffers_allocated(&self) -> u64 {
        self.allocated_by_finished
            + self.tx.iter().map(|c| c.enc.allocated()).sum::<u64>()
            + self.rx.iter().map(|c| c.dec.allocated()).sum::<u64>()
    }

    /// At most `n` symbol buffers of the pool, for a coder being opened.
    fn take_buffers(&mut self, n: usize) -> Vec<Box<[u8]>> {
        self.buffers.split_off(self.buffers.len().saturating_sub(n))
    }

    /// A server before any HELLO waits for a peer as long as its owner wants; the idle
    /// timeout starts with the first packet.
    fn awaiting_peer(&self) -> bool {
        self.role == Role::Server && self.state == State::Handshaking
    }

    fn redundancy(&self) -> f64 {
        let c = &self.cfg;
        let (p, burst) = (self.loss.loss(), self.loss.burst());
        crate::lrt::pace::redundancy(p, burst, c.redundancy_spread, c.redundancy_min, c.redundancy_max)
    }

    fn closed_reason(&self) -> Option<CloseReason> {
        match &self.state {
            State::Closed(r) => Some(r.clone()),
            _ => None,
        }
    }

    fn close_with(&mut self, reason: CloseReason, code: Option<u16>) {
        if matches!(self.state, State::Closed(_)) {
            return;
        }
        self.close_pending = code;
        self.state = State::Closed(reason.clone());
        self.notify(Event::Closed(reason));
    }

    /// The driver learned that `symbols` packets it sent are lost (a multipath driver's path
    /// failed with them in flight): the next that many symbols are repairs of the oldest open
    /// window, ahead of new sources, so the receiver need not wait for its acknowledgements to
    /// show the loss. Bounded by the window: more repairs than unacknowledged symbols never
    /// help.
    pub fn repair_soon(&mut self, symbols: u32) {
        let window: u64 = self
            .tx
            .iter()
            .map(|c| {
                let w = c.enc.window();
                w.end - w.start
            })
            .sum();
        self.urgent_repairs = self.urgent_repairs.saturating_add(symbols).min(window.min(u64::from(u32::MAX)) as u32);
    }

    /// Tells the connection that packets may arrive up to `window` out of their sending
    /// order (a multipath driver: the spread of its paths' delays). A symbol counts as lost
    /// to an acknowledgement only if it left at least `window` before the packet that
    /// acknowledgement echoes; on one path (the default, zero) any earlier one does.
    pub fn set_reorder_window(&mut self, window: Duration) {
        self.reorder_window = window;
    }

    /// Closes the connection; the peer is told on the next `poll_transmit`. Queued data that
    /// has not been sent is discarded (drain first: wait until `send_queued_bytes` and
    /// `unacked_symbols` reach zero).
    pub fn close(&mut self) {
        self.close_with(CloseReason::Local, Some(code::NORMAL));
    }

    /// Queues a message.
    pub fn send(&mut self, msg: &[u8]) -> Result<(), SendError> {
        if let Some(r) = self.closed_reason() {
            return Err(SendError::Closed(r));
        }
        if msg.is_empty() || msg.len() > MAX_MESSAGE {
            return Err(SendError::Size(msg.len()));
        }
        let queued = self.divider.queued_bytes();
        if queued > 0 && queued + msg.len() > self.cfg.send_buffer_bytes {
            self.want_writable = true;
            return Err(SendError::WouldBlock);
        }
        self.divider.push(msg.to_vec());
        self.stats.messages_sent += 1;
        Ok(())
    }

    /// Takes the next message, in order; `Ok(None)` when none is ready yet.
    pub fn recv(&mut self) -> Result<Option<Vec<u8>>, RecvError> {
        match self.recv_queue.pop_front() {
            Some(m) => {
                self.recv_bytes -= m.len();
                // Freed room may release more symbols: tell the sender at once, it may be
                // waiting on our release point.
                if self.release() {
                    self.ack_now = true;
                }
                Ok(Some(m))
            }
            None => match self.closed_reason() {
                Some(r) => Err(RecvError::Closed(r)),
                None => Ok(None),
            },
        }
    }

    /// The next event, if any.
    ///
    /// Events are notifications, not data: an event already waiting is not queued twice, so
    /// at most one of each kind waits (at most four), however long nobody polls.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// Events waiting to be polled (at most four).
    pub fn pending_events(&self) -> usize {
        self.events.len()
    }

    /// Queues `ev` unless the same event already waits.
    pub(super) fn notify(&mut self, ev: Event) {
        if !self.events.contains(&ev) {
            self.events.push_back(ev);
        }
    }

    /// Whether a closed connection is done with the network: its CLOSE went out and its
    /// closing period is over (or it never sends one). Until then a driver keeps its socket,
    /// passes it what arrives and sends what `poll_transmit` gives.
    pub fn is_drained(&self, now: Instant) -> bool {
        matches!(self.state, State::Closed(_))
            && self.close_pending.is_none()
            && self.closing.is_none_or(|c| now >= c.until)
    }

    /// When `handle_timeout` or `poll_transmit` next has work, if ever.
    pub fn poll_timeout(&self) -> Option<Instant> {
        if let State::Closed(_) = self.state {
            return match (self.close_pending, self.closing) {
                (Some(_), _) => Some(self.last_tx),
                (None, Some(c)) => Some(c.next_copy.min(c.until)),
                (None, None) => None,
            };
        }
        let mut t = if self.awaiting_peer() { Instant::FAR_FUTURE } else { self.last_rx + self.cfg.idle_timeout };
        let mut at = |x: Instant| t = t.min(x);
        if let Some(h) = self.hello_due {
            at(h);
            at(self.created + self.cfg.handshake_timeout);
        }
        if self.hello_ack_pending || !self.stale_acks.is_empty() {
            at(self.last_tx);
        }
        if self.rx.iter().any(|c| c.ack_pending) {
            match self.ack_due {
                Some(due) if !self.ack_now => at(due),
                _ => at(self.last_tx),
            }
        }
        if self.state == State::Established {
            at(self.last_tx + self.cfg.keepalive);
            let wire = self.symbol_wire_len();
            if !self.divider.is_empty() && self.source_room() {
                at(self.bucket.ready_at(wire));
            }
            for c in &self.tx {
                if c.enc.window().is_empty() {
                    continue;
                }
                let due = if c.credit >= 1.0 { self.last_tx } else { c.probe_at(&self.rtt, self.cfg.ack_delay) };
                let due = if c.owed > 0 { self.last_tx } else { due };
                let due = c.timer_at(&self.cfg).map_or(due, |t| due.min(t));
                at(due.max(self.bucket.ready_at(wire)));
            }
        }
        Some(t)
    }

    /// When [`handle_timeout`](Self::handle_timeout) next has work of its own: the idle and
    /// handshake timeouts and the end of the closing period, leaving out what only
    /// `poll_transmit` acts on. A driver that cannot send yet (its session key exchange still
    /// running, or no peer address) waits for this instead of [`poll_timeout`](Self::poll_timeout),
    /// whose "send now" it could not honour: its timer would fire again at once, a busy loop
    /// for the whole key exchange (a bridge reconnecting to a robot that was away kept 8
    /// threads spinning so, about 1.5 cores).
    pub fn timer_deadline(&self) -> Option<Instant> {
        if let State::Closed(_) = self.state {
            return self.closing.map(|c| c.until);
        }
        let idle = (!self.awaiting_peer()).then(|| self.last_rx + self.cfg.idle_timeout);
        let handshake = (self.state == State::Handshaking && self.role == Role::Client)
            .then(|| self.created + self.cfg.handshake_timeout);
        idle.into_iter().chain(handshake).min()
    }

    /// Advances timers: idle and handshake timeouts end the connection, and the closing
    /// period ends.
    pub fn handle_timeout(&mut self, now: Instant) {
        if matches!(self.state, State::Closed(_)) {
            match &mut self.closing {
                Some(c) if now >= c.until => self.closing = None,
                Some(c) if now >= c.next_copy => {
                    c.next_copy = now + c.every;
                    self.close_pending = Some(c.code);
                    self.stats.closes_repeated += 1;
                }
                _ => {}
            }
            return;
        }
        if !self.awaiting_peer() && now >= self.last_rx + self.cfg.idle_timeout {
            self.close_with(CloseReason::TimedOut, None);
        } else if self.state == State::Handshaking
            && self.role == Role::Client
            && now >= self.created + self.cfg.handshake_timeout
        {
            self.close_with(CloseReason::HandshakeTimedOut, None);
        }
    }
}

mod receive;
mod transmit;
