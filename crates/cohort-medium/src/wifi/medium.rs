//! The contention state machine. See the [module docs](super).

use super::nic::IN_HOST;
use super::phy::{MAC_OVERHEAD_BYTES, QOS_MAC_OVERHEAD_BYTES};
use super::types::{
    AcStats, Dest, DropReason, MediumError, MediumEvent, NS3_CCA_DELAY, NS3_MSDU_LIFETIME, NS3_PREAMBLE_DETECTION,
    StationConfig, Timing,
};
use super::{Ac, EdcaParams, Phy, per};
use cohort_time::Instant;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::time::Duration;

mod block_ack;
mod nic_path;
#[cfg(test)]
mod tests;

/// Control frame lengths (802.11-2016 9.3.1): RTS 20, CTS 14, compressed BlockAck 32 bytes;
/// each A-MPDU subframe carries a 4-byte delimiter (9.7.1) and is padded to 4 bytes.
const RTS_BYTES: usize = 20;
const CTS_BYTES: usize = 14;
const BLOCK_ACK_BYTES: usize = 32;
const MPDU_DELIMITER: usize = 4;
/// CF-End frame length (9.3.1.9).
const CF_END_BYTES: usize = 20;
/// An ADDBA Request: management header 24, category, action, dialog token, block-ack
/// parameter set (2), timeout (2), starting sequence control (2), FCS 4 (9.6.5.2).
const ADDBA_REQUEST_BYTES: usize = 37;
/// A compressed BlockAckReq: control header 16, BAR control 2, starting sequence control 2,
/// FCS 4 (9.3.1.8).
const BLOCK_ACK_REQ_BYTES: usize = 24;
/// An ADDBA Response: management header 24, category, action, dialog token, status code (2),
/// block-ack parameter set (2), timeout (2), FCS 4 (9.6.5.3).
const ADDBA_RESPONSE_BYTES: usize = 37;
/// How long an originator waits for the ADDBA Response after the ACK of its request (ns-3's
/// `QosTxop` attribute `AddBaResponseTimeout`, 5 ms) ...
const ADDBA_RESPONSE_TIMEOUT: Duration = Duration::from_millis(5);
/// ... and, without one, how long it sends single MPDUs before it asks again
/// (`FailedAddBaTimeout`, 200 ms).
const FAILED_ADDBA_TIMEOUT: Duration = Duration::from_millis(200);
/// An A-MSDU subframe header: DA, SA, length (9.3.2.2.2).
const AMSDU_SUBFRAME_HEADER: usize = 14;

#[derive(Debug)]
struct Frame<H> {
    handle: H,
    dest: Dest,
    bytes: usize,
    /// Sequence number in its category's queue, for the block-ack window.
    seq: u32,
    /// Under [`NicProfile::SharedTx`](super::NicProfile::SharedTx): its rank in the card's
    /// transmit path once handed over, `IN_HOST` or `IN_HANDOFF` before. 0 under `PerAc`.
    ticket: u64,
    /// When the frame was handed to the MAC (its MSDU lifetime counts from here).
    enqueued: Instant,
    /// Put on the air at least once and not acknowledged: in flight under a block-ack
    /// agreement, so dropping it moves the recipient's window only by a BlockAckReq.
    sent: bool,
}

impl<H> AcState<H> {
    /// Whether the category contends: data or an ADDBA Response waits.
    #[inline]
    fn has_work(&self) -> bool {
        !self.queue.is_empty() || !self.addba_resp.is_empty()
    }
}

/// Where a block-ack agreement with one recipient stands at some instant, as ns-3's
/// `BlockAckManager` and `QosTxop` move it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BaView {
    /// None, or reset after a failed setup: the next access sends an ADDBA Request.
    Reset,
    /// Request acknowledged, response awaited until the instant: the queue for this
    /// recipient is blocked (`WifiQueueBlockedReason::WAITING_ADDBA_RESP`).
    Waiting(Instant),
    /// No response in time: single MPDUs with normal acks until the agreement resets.
    NoReply,
    Established,
}

/// What the next PPDU of a category carries: `frames` MSDUs from the queue front in `mpdus`
/// MPDUs, on the air for `air`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Aggregate {
    frames: usize,
    mpdus: usize,
    air: Duration,
}

#[derive(Debug)]
struct AcState<H> {
    queue: VecDeque<Frame<H>>,
    cw: u16,
    /// Remaining backoff slots, counted from `count_from`.
    backoff: u32,
    count_from: Instant,
    /// Failed attempts of the head frame so far (its retry count: at the retry limit it is
    /// dropped).
    attempts: u8,
    /// The category's station retry count, QSRC[AC] (802.11-2020 10.23.2.2): failed
    /// exchanges since its last success, whatever they carried (a BlockAckReq or an ADDBA
    /// frame too). It sets the contention window, not the fate of any frame: see
    /// [`Medium::widen_cw`].
    qsrc: u8,
    /// Failed attempts of the ADDBA Response at the head of `addba_resp`, and of the
    /// category's ADDBA Request.
    resp_attempts: u8,
    req_attempts: u8,
    stats: AcStats,
    /// Sequence number of the next frame enqueued.
    next_seq: u32,
    /// Block-ack agreements as originator: the recipient, and `None` once established or
    /// the deadline of the ADDBA Response while it is awaited (see [`BaView`]).
    ba_peers: Vec<(usize, Option<Instant>)>,
    /// ADDBA Responses this category owes, as recipient, to these originators; they go
    /// before any data (ns-3 pushes them to the head of the queue of the agreement's TID).
    addba_resp: VecDeque<usize>,
    /// The recipient of an A-MPDU whose block ack never came: the next access sends it a
    /// BlockAckReq before any data.
    bar_pending: Option<usize>,
    /// Under [`NicProfile::SharedTx`](super::NicProfile::SharedTx), the frames behind
    /// `queue` that the card may not serve yet: in the host, in hand-over, or in the card
    /// behind another category's frame (see [`super::nic`]). `queue` then holds only the
    /// frames at the head of the card's transmit path. Always empty under `PerAc`.
    held: VecDeque<Frame<H>>,
}

#[derive(Debug)]
struct Station<H> {
    cfg: StationConfig,
    acs: [AcState<H>; 4],
}

/// A pending event, ordered by time and then by the order it was produced.
#[derive(Debug)]
struct Pending<H>(Instant, u64, MediumEvent<H>);

impl<H> PartialEq for Pending<H> {
    fn eq(&self, o: &Self) -> bool {
        (self.0, self.1) == (o.0, o.1)
    }
}
impl<H> Eq for Pending<H> {}
impl<H> PartialOrd for Pending<H> {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl<H> Ord for Pending<H> {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        (self.0, self.1).cmp(&(o.0, o.1))
    }
}

/// Who waits EIFS after a collision.
#[derive(Debug, Clone, PartialEq)]
enum Eifs {
    /// Nobody (Bianchi's model).
    Never,
    /// Every station that was not transmitting (802.11 read as if every bystander decoded a
    /// PHY header and then failed the frame).
    Always,
    /// Bystanders whose PHY detects one of the colliding preambles: see
    /// [`Medium::with_preamble_detection`].
    Detected(PreambleDetection),
}

/// Received powers and the detection rule of [`Medium::with_preamble_detection`].
#[derive(Debug, Clone, PartialEq)]
struct PreambleDetection {
    /// `rx_mw[from * n + to]`: power `to` receives from `from`, in milliwatts.
    rx_mw: Vec<f64>,
    /// Minimum ratio of the strongest signal to everything else (noise included).
    threshold: f64,
    /// Weakest signal detected at all, mW.
    min_mw: f64,
    noise_mw: f64,
}

/// The first PPDU a station sends when it wins the channel ([`Medium::first_ppdu`]).
struct FirstPpdu {
    air: Duration,
    /// The recipient, if it is an A-MPDU (lost, it must be followed by a BlockAckReq).
    ampdu_to: Option<usize>,
    /// Data frames it carries (0 for a control or management frame).
    frames: usize,
    /// The receiver, if it is addressed to one station.
    to: Option<usize>,
    mbps: f64,
    /// Bytes of one of its MPDUs, MAC header included.
    mpdu_bytes: usize,
    /// Whether it is a BlockAckReq.
    bar: bool,
    /// Whether it is an ADDBA Request (to `to`).
    addba: bool,
}

fn dbm_to_mw(dbm: f64) -> f64 {
    10f64.powf(dbm / 10.0)
}

/// The shared channel. See the [module docs](super).
#[derive(Debug)]
pub struct Medium<H> {
    phy: Phy,
    edca: [EdcaParams; 4],
    stations: Vec<Station<H>>,
    rng: ChaCha8Rng,
    /// The medium is busy until then; contention resumes after it.
    busy_until: Instant,
    pending: BinaryHeap<Reverse<Pending<H>>>,
    seq: u64,
    airtime_busy: Duration,
    propagation: Duration,
    /// Which bystanders of a collision wait EIFS.
    eifs: Eifs,
    /// A station whose backoff ends less than this after another's transmission started has
    /// not sensed it yet and transmits too (zero: only in the very same instant).
    cca_delay: Duration,
    ack_timeout: bool,
    cf_end: bool,
    /// How long a frame may wait for its (re)transmission before it is discarded
    /// (dot11EDCATableMSDULifetime); `None`: forever.
    msdu_lifetime: Option<Duration>,
    /// Senders of failed frames in the current exchange, and when they gave up on the ACK.
    timed_out: Vec<(usize, usize, Instant)>,
    /// EDCA (QoS) stations decrement once more when interrupted; see `transmit`.
    qos: bool,
    /// Whether a category keeps counting its backoff after its queue empties (post-backoff)
    /// and a frame arriving at an empty queue whose backoff has run out goes without one if
    /// the medium is idle; see [`Medium::with_immediate_access`].
    immediate_access: bool,
    /// Scratch: MSDUs per MPDU of the PPDU being sent, and which frames got through.
    groups: Vec<usize>,
    ok: Vec<bool>,
    /// The TXOP holder of the last exchange and the end of the NAV its frames set for everyone
    /// else (their Duration fields cover the whole TXOP limit; a CF-End resets it).
    nav: Option<(usize, Instant)>,
    /// [`Medium::next_tx`] until something changes a contender (a transmission, a frame
    /// reaching an empty queue): the driver asks for it after every event.
    next_tx_cache: std::cell::Cell<Option<Option<Instant>>>,
    /// [`NicProfile::SharedTx`](super::NicProfile::SharedTx) hand-overs under way: when each
    /// ends, order, station, AC (or [`NIC_REFILL`]: when the card reports frames done).
    handoffs: BinaryHeap<Reverse<(Instant, u64, usize, usize)>>,
    /// Rank of the next frame to complete a hand-over (and of hand-overs started).
    nic_seq: u64,
    /// Whether any station has a shared transmit path (`PerAc` channels skip its hooks).
    any_shared: bool,
}

impl<H: Clone> Medium<H> {
    /// A channel with `phy`, the EDCA parameter sets `edca` (indexed by [`Ac`]), one station per
    /// entry of `stations`, and its random stream from `seed`.
    pub fn new(phy: Phy, edca: [EdcaParams; 4], stations: &[StationConfig], seed: u64) -> Result<Self, MediumError> {
        for e in &edca {
            e.validate()?;
        }
        phy.validate().map_err(MediumError::Phy)?;
        for s in stations {
            if !(0.0..=1.0).contains(&s.fer) {
                return Err(MediumError::Station("fer must lie in [0, 1]"));
            }
            if s.queue_depth == 0 || s.short_retry_limit == 0 || s.long_retry_limit == 0 {
                return Err(MediumError::Station("queue depth and retry limits must be at least 1"));
            }
            if let Some(r) = s.data_mbps {
                Phy::validate_rate(r).map_err(MediumError::Station)?;
            }
            s.nic.validate().map_err(MediumError::Station)?;
        }
        let any_shared = stations.iter().any(|s| s.nic.is_shared());
        let stations = stations
            .iter()
            .map(|&cfg| Station {
                cfg,
                acs: std::array::from_fn(|i| AcState {
                    queue: VecDeque::new(),
                    cw: edca[i].cw_min,
                    backoff: 0,
                    count_from: Instant::ZERO,
                    attempts: 0,
                    qsrc: 0,
                    resp_attempts: 0,
                    req_attempts: 0,
                    stats: AcStats::default(),
                    next_seq: 0,
                    ba_peers: Vec::new(),
                    addba_resp: VecDeque::new(),
                    bar_pending: None,
                    held: VecDeque::new(),
                }),
            })
            .collect();
        Ok(Medium {
            phy,
            edca,
            stations,
            rng: ChaCha8Rng::seed_from_u64(seed),
            busy_until: Instant::ZERO,
            pending: BinaryHeap::new(),
            seq: 0,
            airtime_busy: Duration::ZERO,
            propagation: Duration::ZERO,
            eifs: Eifs::Never,
            cca_delay: Duration::ZERO,
            ack_timeout: false,
            cf_end: true,
            msdu_lifetime: None,
            timed_out: Vec::new(),
            // A channel whose four categories share one parameter set is legacy DCF.
            qos: !edca.iter().all(|e| *e == edca[0]),
            immediate_access: false,
            groups: Vec::new(),
            ok: Vec::new(),
            next_tx_cache: std::cell::Cell::new(None),
            handoffs: BinaryHeap::new(),
            nic_seq: 0,
            any_shared,
            nav: None,
        })
    }

    /// Adds a propagation delay to every delivery (carrier sense stays instantaneous: stations
    /// are assumed close compared with a slot, 9 µs ≈ 2.7 km).
    pub fn with_propagation(mut self, d: Duration) -> Self {
        self.propagation = d.min(Duration::from_secs(1));
        self
    }

    /// After a collision, make the stations that were not transmitting wait EIFS (SIFS + the
    /// ACK at the lowest rate + AIFS) instead of AIFS, as 802.11 prescribes after a frame
    /// that was received in error (10.3.2.3.7). Off by default, matching Bianchi's "DIFS"
    /// model and ns-3's reference tables.
    pub fn with_eifs(mut self, on: bool) -> Self {
        self.eifs = if on { Eifs::Always } else { Eifs::Never };
        self
    }

    /// EIFS after a collision only for the bystanders whose PHY detects one of the colliding
    /// preambles, as ns-3 3.44 decides it. `rx_dbm[from][to]` is the power station `to`
    /// receives from station `from` (dBm; the diagonal is ignored), `threshold_db` the
    /// signal-to-interference-plus-noise ratio a preamble needs.
    ///
    /// The rule is ns-3's `PhyEntity::EndPreambleDetectionPeriod` with its default
    /// `ThresholdPreambleDetectionModel` (threshold 4 dB, minimum RSSI −82 dBm): 4 µs after
    /// PPDUs start together the PHY takes the strongest, and detects it only if it stands
    /// `threshold_db` above the sum of the others and the noise
    /// ([`NS3_NOISE_DBM`](super::NS3_NOISE_DBM)). A
    /// detected preamble is followed by a PHY header that decodes and a payload that does
    /// not (the others still interfere), so the frame ends in error
    /// (`WifiPhyStateHelper::SwitchFromRxEndError`) and the station's
    /// `ChannelAccessManager` adds EIFS − DIFS (SIFS + an ACK at the lowest rate) before its
    /// AIFS. An undetected preamble only makes the channel busy (`PREAMBLE_DETECT_FAILURE`,
    /// CCA busy until the energy ends) and AIFS follows as after any frame. Stations a few
    /// metres apart receive each other within a few dB, so in a small team almost no
    /// bystander ever waits EIFS: that is why ns-3 gives AC_BE the share it does.
    /// The same powers decide whether the receiver of a colliding frame still gets it whole
    /// (see `Medium::captured`: 4 dB for the preamble, then the SINR the rate needs).
    pub fn with_preamble_detection(mut self, rx_dbm: &[Vec<f64>], threshold_db: f64) -> Result<Self, MediumError> {
        let n = self.stations.len();
        if rx_dbm.len() != n || rx_dbm.iter().any(|row| row.len() != n) {
            return Err(MediumError::Station("rx_dbm must be an n x n matrix"));
        }
        if !threshold_db.is_finite() || rx_dbm.iter().flatten().any(|p| p.is_nan() || *p == f64::INFINITY) {
            return Err(MediumError::Station("received powers and threshold must be numbers"));
        }
        let (min_dbm, noise_dbm) = NS3_PREAMBLE_DETECTION;
        self.eifs = Eifs::Detected(PreambleDetection {
            rx_mw: rx_dbm.iter().flatten().map(|&p| dbm_to_mw(p)).collect(),
            threshold: 10f64.powf(threshold_db / 10.0),
            min_mw: dbm_to_mw(min_dbm),
            noise_mw: dbm_to_mw(noise_dbm),
        });
        Ok(self)
    }

    /// Lets a station whose backoff ends less than `d` after another station started
    /// transmitting transmit as well (and collide): it has not sensed the other PPDU yet.
    /// ns-3 tells the MAC the channel is busy only when its 4 µs preamble detection period
    /// ends ([`NS3_CCA_DELAY`]; `PhyEntity::StartPreambleDetectionPeriod` notifies nothing).
    /// This matters only for stations off the common slot grid, such as one that waited
    /// EIFS (60 µs on OFDM, not a whole number of 9 µs slots). Zero by default: only
    /// backoffs ending in the same instant collide.
    pub fn with_cca_delay(mut self, d: Duration) -> Self {
        self.cca_delay = d.min(self.phy.slot);
        self
    }

    /// The sender of a failed unicast frame waits for its ACK timeout ([`Phy::ack_timeout`],
    /// 10.3.2.9) and then AIFS before it counts backoff slots again, while everyone else
    /// resumes after AIFS (or EIFS). This is how ns-3 reads the rule
    /// (`ChannelAccessManager` restarts AIFS at the end of the timeout); a laxer reading lets
    /// the count resume as soon as the timeout ends. Off by default: Bianchi's model charges
    /// a collision `frame + DIFS` to everyone.
    pub fn with_ack_timeout(mut self, on: bool) -> Self {
        self.ack_timeout = on;
        self
    }

    /// Applies a [`Timing`] preset.
    pub fn with_timing(self, timing: Timing) -> Self {
        match timing {
            Timing::Bianchi => self.with_eifs(false).with_ack_timeout(false).with_msdu_lifetime(None),
            Timing::Standard => self.with_eifs(true).with_ack_timeout(true).with_msdu_lifetime(None),
            Timing::Ns3 => {
                // Keeps the received powers of `with_preamble_detection`, if already given.
                let m = if matches!(self.eifs, Eifs::Detected(_)) { self } else { self.with_eifs(false) };
                m.with_ack_timeout(true)
                    .with_cca_delay(NS3_CCA_DELAY)
                    .with_msdu_lifetime(Some(NS3_MSDU_LIFETIME))
                    .with_immediate_access(true)
            }
        }
    }

    /// Post-backoff and immediate access (802.11-2016 10.3.4.2 and 10.22.2.2 a), as ns-3 3.44
    /// does them: a category draws a backoff whenever it releases the channel, queue empty
    /// or not (`Txop::NotifyChannelReleased`), and counts it down in idle slots; a frame
    /// that arrives at its empty queue then waits out what is left of it, or, if it has run
    /// out, goes at the first slot boundary after AIFS when the medium is idle and after a
    /// fresh backoff when it is busy (`ChannelAccessManager::NeedBackoffUponAccess`). A
    /// recipient's ADDBA Response thus goes AIFS after the ADDBA Request's ACK. Off: every
    /// frame that finds its queue empty draws a fresh backoff (what the `standard` and
    /// `bianchi` timings keep). On under [`Timing::Ns3`].
    pub fn with_immediate_access(mut self, on: bool) -> Self {
        self.immediate_access = on;
        self
    }

    /// A TXOP holder that has no more frames to fit in its TXOP limit truncates the TXOP
    /// with a CF-End frame (802.11-2016 10.22.2.9), so that the others' NAV ends. On by
    /// default, as ns-3 does (`QosFrameExchangeManager::SendCfEndIfNeeded`): each such TXOP
    /// costs SIFS + a CF-End at the basic rate more. Categories without a TXOP limit never
    /// send one.
    pub fn with_cf_end(mut self, on: bool) -> Self {
        self.cf_end = on;
        self
    }

    /// Discards a frame that has waited longer than `lifetime` since it was enqueued when its
    /// station next wins the channel, retransmissions included (802.11's
    /// dot11EDCATableMSDULifetime, 500 TU by default, 10.22.2.12; ns-3 3.44's
    /// `WifiMacQueue` `MaxDelay`, 500 ms, which [`Timing::Ns3`] sets). A discarded frame that
    /// was already on the air under a block-ack agreement leaves a hole the recipient's window
    /// must skip, so a BlockAckReq goes first, as ns-3's `BlockAckManager` schedules one for
    /// every discarded in-flight MPDU. `None` (the default, and Linux's behaviour): frames
    /// wait as long as the queue holds them. Set it after [`Medium::with_timing`], which
    /// chooses its own.
    pub fn with_msdu_lifetime(mut self, lifetime: Option<Duration>) -> Self {
        self.msdu_lifetime = lifetime;
        self
    }

    /// EIFS and ACK timeouts as 802.11 specifies them ([`Timing::Standard`]).
    pub fn standard_timing(self) -> Self {
        self.with_timing(Timing::Standard)
    }

    pub fn phy(&self) -> &Phy {
        &self.phy
    }

    pub fn edca(&self) -> &[EdcaParams; 4] {
        &self.edca
    }

    pub fn stations(&self) -> usize {
        self.stations.len()
    }

    /// Counters of a station's access category.
    pub fn stats(&self, station: usize, ac: Ac) -> Option<AcStats> {
        let s = &self.stations.get(station)?.acs[ac.index()];
        Some(AcStats { queue_len: s.queue.len() + s.held.len(), ..s.stats })
    }

    /// Frames waiting in a station's queue.
    pub fn queue_len(&self, station: usize, ac: Ac) -> usize {
        self.stations.get(station).map_or(0, |s| s.acs[ac.index()].queue.len() + s.acs[ac.index()].held.len())
    }

    /// The airtime one frame of `msdu` bytes (the payload behind the LLC/SNAP header, as
    /// [`Medium::enqueue`] takes it) from `station` in `ac` costs on a channel nobody else
    /// contends for: AIFS[ac], the mean of a first backoff (CWmin[ac]/2 slots), the PPDU
    /// (broadcasts at the basic rate, unicasts at the sender's), and for a unicast SIFS and
    /// the ACK. One MPDU, no RTS, no aggregation: the floor a protocol's frame count is
    /// multiplied by when its airtime efficiency is reported (the group bench).
    pub fn uncontended_airtime(&self, station: usize, ac: Ac, msdu: usize, dest: Dest) -> Duration {
        let e = &self.edca[ac.index()];
        let backoff = self.phy.slot * u32::from(e.cw_min) / 2;
        let access = self.phy.aifs(e.aifsn) + backoff;
        let bytes = msdu + self.mac_overhead();
        match dest {
            Dest::Broadcast => access + self.phy.legacy_duration(bytes, self.phy.basic_mbps),
            Dest::Unicast(_) => {
                let rate = self.stations.get(station).map_or(self.phy.data_mbps, |_| self.rate(station));
                access + self.phy.duration(bytes, rate) + self.phy.sifs + self.phy.ack_duration()
            }
        }
    }

    /// Time the channel carried frames (or collisions) so far.
    pub fn busy_time(&self) -> Duration {
        self.airtime_busy
    }

    fn draw_backoff(&mut self, st: usize, ac: usize) {
        let cw = self.stations[st].acs[ac].cw;
        self.stations[st].acs[ac].backoff = self.rng.random_range(0..=u32::from(cw));
    }

    fn emit(&mut self, ev: MediumEvent<H>) {
        self.seq += 1;
        self.pending.push(Reverse(Pending(ev.at(), self.seq, ev)));
    }

    /// Offers a frame of `bytes` (the MSDU: the payload, without MAC header) from `station` in
    /// access category `ac` (see [`Ac::from_dscp`] and [`Ac::from_user_priority`]). A full
    /// queue drops it: reported as an event, counted, and returned as
    /// [`MediumError::QueueFull`].
    pub fn enqueue(
        &mut self,
        now: Instant,
        station: usize,
        ac: Ac,
        dest: Dest,
        bytes: usize,
        handle: H,
    ) -> Result<(), MediumError> {
        let n = self.stations.len();
        if station >= n {
            return Err(MediumError::NoStation(station));
        }
        match dest {
            Dest::Unicast(d) if d >= n => return Err(MediumError::NoStation(d)),
            Dest::Unicast(d) if d == station => return Err(MediumError::SelfAddressed(d)),
            _ => {}
        }
        let depth = self.stations[station].cfg.queue_depth;
        let s = &mut self.stations[station].acs[ac.index()];
        s.stats.enqueued += 1;
        if s.queue.len() + s.held.len() >= depth {
            s.stats.queue_drops += 1;
            self.emit(MediumEvent::Dropped { station, ac, handle, at: now, reason: DropReason::QueueFull });
            return Err(MediumError::QueueFull);
        }
        let was_empty = !s.has_work();
        let seq = s.next_seq;
        s.next_seq = seq.wrapping_add(1);
        if self.any_shared && self.stations[station].cfg.nic.is_shared() {
            // The frame waits in the host until the card has room for it.
            let s = &mut self.stations[station].acs[ac.index()];
            s.held.push_back(Frame { handle, dest, bytes, seq, ticket: IN_HOST, enqueued: now, sent: false });
            s.stats.max_queue = s.stats.max_queue.max(s.queue.len() + s.held.len());
            self.nic_refill(station, now);
            return Ok(());
        }
        let s = &mut self.stations[station].acs[ac.index()];
        s.queue.push_back(Frame { handle, dest, bytes, seq, ticket: 0, enqueued: now, sent: false });
        s.stats.max_queue = s.stats.max_queue.max(s.queue.len());
        if was_empty {
            let start = self.contention_start(ac.index(), now);
            self.start_contending(station, ac.index(), now, start, self.busy_until <= now);
        }
        Ok(())
    }

    /// A category whose queue was empty has work again at `now`: it counts its backoff from
    /// `start` (the first slot boundary after AIFS), a fresh one, or, with
    /// [`Medium::with_immediate_access`], what is left of its post-backoff, none if that has
    /// run out and the medium is `idle`.
    pub(super) fn start_contending(&mut self, st: usize, ac: usize, now: Instant, start: Instant, idle: bool) {
        self.next_tx_cache.set(None);
        let slot = self.phy.slot.as_nanos().max(1);
        let qos = u32::from(self.qos);
        let s = &mut self.stations[st].acs[ac];
        s.attempts = 0;
        if self.immediate_access && s.backoff > 0 && s.count_from <= now {
            // The idle slots since its AIFS ended (and the boundary that ended it).
            let slots = u32::try_from((now - s.count_from).as_nanos() / slot).unwrap_or(u32::MAX);
            s.backoff = s.backoff.saturating_sub(slots.saturating_add(qos));
        }
        s.count_from = start;
        if !self.immediate_access || (s.backoff == 0 && !idle) {
            self.draw_backoff(st, ac);
        }
    }

    /// After `(st, ac)` used the channel: a new backoff if it has more to send, or, with
    /// [`Medium::with_immediate_access`], in any case (post-backoff).
    pub(super) fn release(&mut self, st: usize, ac: usize) {
        if self.immediate_access || self.stations[st].acs[ac].has_work() {
            self.draw_backoff(st, ac);
        }
    }

    /// Where a category that starts contending at `now` counts its backoff from: backoff
    /// counts on the slot grid that starts when the medium's AIFS ends, so that stations
    /// whose counters reach zero in the same slot really do collide.
    fn contention_start(&self, ac: usize, now: Instant) -> Instant {
        let aifs = self.phy.aifs(self.edca[ac].aifsn);
        let grid = self.busy_until + aifs;
        if now <= grid { grid } else { on_grid(grid, now, self.phy.slot) }
    }

    /// When a contender's backoff expires.
    #[inline]
    fn tx_time(&self, st: usize, ac: usize) -> Option<Instant> {
        let s = &self.stations[st].acs[ac];
        if !s.has_work() {
            return None;
        }
        let t = s.count_from + self.phy.slot * s.backoff;
        // Data blocked while an ADDBA Response is awaited: contend again at the deadline.
        if !s.ba_peers.is_empty()
            && s.addba_resp.is_empty()
            && let Some(Frame { dest: Dest::Unicast(to), .. }) = s.queue.front()
            && let BaView::Waiting(deadline) = self.ba_view(st, ac, *to, t)
        {
            return Some(t.max(on_grid(s.count_from, deadline, self.phy.slot)));
        }
        Some(t)
    }

    fn next_tx(&self) -> Option<Instant> {
        if let Some(next) = self.next_tx_cache.get() {
            return next;
        }
        let mut next: Option<Instant> = None;
        for st in 0..self.stations.len() {
            for ac in 0..4 {
                if let Some(t) = self.tx_time(st, ac)
                    && next.is_none_or(|n| t < n)
                {
                    next = Some(t);
                }
            }
        }
        self.next_tx_cache.set(Some(next));
        next
    }

    /// When `handle_timeout` or `poll_event` next has something to do.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let mut ev = self.pending.peek().map(|e| e.0.0);
        if let Some(Reverse((h, ..))) = self.handoffs.peek() {
            ev = Some(ev.map_or(*h, |e| e.min(*h)));
        }
        match (ev, self.next_tx()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// The next event due by `now`, in time order.
    pub fn poll_event(&mut self, now: Instant) -> Option<MediumEvent<H>> {
        if self.pending.peek()?.0.0 > now {
            return None;
        }
        self.pending.pop().map(|e| e.0.2)
    }

    /// Runs every transmission that starts by `now`. The outcome of an exchange (deliveries,
    /// acknowledgements) is decided when it starts and reported at the times it happens.
    pub fn handle_timeout(&mut self, now: Instant) {
        if self.any_shared {
            return self.nic_handle_timeout(now);
        }
        while let Some(t) = self.next_tx() {
            if t > now {
                break;
            }
            self.transmit(t);
        }
    }

    fn rate(&self, st: usize) -> f64 {
        self.stations[st].cfg.data_mbps.unwrap_or(self.phy.data_mbps)
    }

    /// What goes on the air first when `(st, ac)` wins access: the RTS, a BlockAckReq or
    /// ADDBA frame, or the frame (or aggregate) itself.
    fn first_ppdu(&self, st: usize, ac: usize) -> FirstPpdu {
        let s = &self.stations[st].acs[ac];
        let basic = self.phy.basic_mbps;
        let control = |bytes: usize, to: Option<usize>| FirstPpdu {
            air: self.phy.legacy_duration(bytes, basic),
            ampdu_to: None,
            frames: 0,
            to,
            mbps: basic,
            mpdu_bytes: bytes,
            bar: false,
            addba: false,
        };
        if !s.addba_resp.is_empty() {
            return control(ADDBA_RESPONSE_BYTES, None);
        }
        let Some(f) = s.queue.front() else { return control(0, None) };
        let dest = match f.dest {
            Dest::Unicast(to) => Some(to),
            Dest::Broadcast => None,
        };
        let t = self.tx_time(st, ac).unwrap_or(Instant::ZERO);
        if let Some(to) = s.bar_pending {
            FirstPpdu { bar: true, ..control(BLOCK_ACK_REQ_BYTES, Some(to)) }
        } else if let Some(to) = self.needs_addba(st, ac, t) {
            FirstPpdu { addba: true, ..control(ADDBA_REQUEST_BYTES, Some(to)) }
        } else if self.uses_rts(st, f) {
            control(RTS_BYTES, dest)
        } else {
            let txop = self.edca[ac].txop;
            let a = self.aggregate(st, ac, (!txop.is_zero()).then_some(txop), true, None);
            FirstPpdu {
                air: a.air,
                ampdu_to: dest.filter(|_| a.mpdus > 1),
                frames: a.frames,
                to: dest,
                mbps: if dest.is_some() { self.rate(st) } else { basic },
                mpdu_bytes: f.bytes + self.mac_overhead(),
                bar: false,
                addba: false,
            }
        }
    }

    /// Which of the PPDUs that start together (`on_air`, their first PPDUs `first`, starting
    /// at `start`) its receiver still gets whole, if any: ns-3 3.44's rule with its default
    /// models (`PhyEntity::EndPreambleDetectionPeriod` locks on to the strongest preamble;
    /// `ThresholdPreambleDetectionModel` detects it only 4 dB above the others and the noise
    /// and at −82 dBm or more; the payload then gets through where its SINR reaches what
    /// `TableBasedErrorRateModel` needs, [`per::half_success_sinr_db`]). Stations far apart
    /// thus capture each other's collisions, most at the robust rates: at HT MCS 0 the 4 dB
    /// of preamble detection decide, at MCS 7 some 18 dB. Needs received powers
    /// ([`Medium::with_preamble_detection`]). A capture whose exchange would overlap a
    /// longer colliding PPDU (its ACK or later frames would meet interference the model does
    /// not follow) is not taken: all of them fail, as before capture was modelled.
    fn captured(&self, on_air: &[(usize, usize)], first: &[FirstPpdu], start: &[Instant]) -> Option<usize> {
        let Eifs::Detected(d) = &self.eifs else { return None };
        let n = self.stations.len();
        let power = |from: usize, at: usize| d.rx_mw[from * n + at];
        (0..on_air.len()).find(|&i| {
            let (st, _) = on_air[i];
            let Some(to) = first[i].to else { return false };
            if on_air.iter().any(|&(s, _)| s == to) {
                return false;
            }
            let signal = power(st, to);
            let others: f64 = on_air.iter().enumerate().filter(|&(j, _)| j != i).map(|(_, &(s, _))| power(s, to)).sum();
            let sinr = signal / (others + d.noise_mw);
            let end = start[i] + first[i].air;
            signal >= d.min_mw
                && sinr >= d.threshold
                && per::half_success_sinr_db(self.phy.kind, first[i].mbps, first[i].mpdu_bytes)
                    .is_some_and(|need| 10.0 * sinr.log10() >= need)
                && (0..on_air.len()).all(|j| j == i || start[j] + first[j].air <= end)
        })
    }

    fn uses_rts(&self, st: usize, f: &Frame<H>) -> bool {
        matches!(f.dest, Dest::Unicast(_)) && self.stations[st].cfg.rts_threshold.is_some_and(|t| f.bytes > t)
    }

    fn mac_overhead(&self) -> usize {
        if self.qos { QOS_MAC_OVERHEAD_BYTES } else { MAC_OVERHEAD_BYTES }
    }

    fn duration(&self, st: usize, f: &Frame<H>) -> Duration {
        let bytes = f.bytes + self.mac_overhead();
        match f.dest {
            Dest::Broadcast => self.phy.legacy_duration(bytes, self.phy.basic_mbps),
            Dest::Unicast(_) => self.phy.duration(bytes, self.rate(st)),
        }
    }

    fn transmit(&mut self, t: Instant) {
        self.next_tx_cache.set(None);
        // Who starts now: at most one access category per station, the highest (an internal
        // collision sends the others into backoff as if they had collided, 10.22.2.4).
        // Stations whose backoff ends within the CCA delay after `t` have not heard the first
        // PPDU yet and start too.
        let mut on_air: Vec<(usize, usize)> = vec![];
        let mut internal: Vec<(usize, usize)> = vec![];
        let sensed = t + self.cca_delay;
        for st in 0..self.stations.len() {
            let due_at = |x: Instant| x == t || x < sensed;
            // Categories whose backoff ends now, lowest first (no allocation: this runs for
            // every station at every access).
            let mut due = [0usize; 4];
            let mut n = 0;
            for ac in 0..4 {
                if self.tx_time(st, ac).is_some_and(due_at) {
                    // Frames that outlived their lifetime leave before the access is used; a
                    // category left with nothing to send does not transmit.
                    if self.msdu_lifetime.is_some()
                        && self.expire(st, ac, t) > 0
                        && !self.stations[st].acs[ac].has_work()
                    {
                        // The access it won goes unused: it releases the channel with a
                        // new backoff (ns-3's `Txop::NotifyChannelReleased`), counted from
                        // the next slot.
                        self.release(st, ac);
                        self.stations[st].acs[ac].count_from = t + self.phy.slot;
                        continue;
                    }
                    due[n] = ac;
                    n += 1;
                }
            }
            if let Some((&top, rest)) = due[..n].split_last() {
                on_air.push((st, top));
                internal.extend(rest.iter().map(|&ac| (st, ac)));
            }
        }
        let started: Vec<(usize, usize)> = on_air.iter().chain(&internal).copied().collect();
        let collided = on_air.len() > 1;
        self.timed_out.clear();
        let mut end = t;
        let busy_end;
        // Bystanders that received a PPDU in error wait EIFS - DIFS more.
        // (Left empty, so unallocated, when nothing collided.)
        let mut in_error = Vec::new();
        if collided {
            // Every first transmission (RTS, frame or aggregate) is lost but one its receiver
            // captures, whose exchange `succeed` runs as a lone winner's. Each sender's ACK
            // timeout runs from the end of its own PPDU (802.11-2016 10.3.2.9: aSIFSTime +
            // aSlotTime + aRxPHYStartDelay after PHY-TXEND.confirm), not from the end of the
            // longest one: a short frame that collided with an A-MPDU has timed out long
            // before the medium falls idle, and counts its AIFS from then on, as ns-3's
            // `ChannelAccessManager` does (the later of the busy end and the timeout end).
            let first: Vec<FirstPpdu> = on_air.iter().map(|&(st, ac)| self.first_ppdu(st, ac)).collect();
            let start: Vec<Instant> = on_air.iter().map(|&(st, ac)| self.tx_time(st, ac).unwrap_or(t)).collect();
            let winner = self.captured(&on_air, &first, &start);
            for (i, &(st, ac)) in on_air.iter().enumerate() {
                end = end.max(start[i] + first[i].air);
                if Some(i) == winner {
                    continue;
                }
                if first[i].ampdu_to.is_some() {
                    self.stations[st].acs[ac].bar_pending = first[i].ampdu_to;
                }
                let s = &mut self.stations[st].acs[ac];
                s.queue.iter_mut().take(first[i].frames).for_each(|f| f.sent = true);
                s.stats.attempts += 1;
                s.stats.airtime += first[i].air;
            }
            in_error.resize(self.stations.len(), false);
            for (b, e) in in_error.iter_mut().enumerate() {
                *e = !on_air.iter().any(|&(st, _)| st == b) && self.detects_preamble(b, &on_air);
            }
            for (i, &(st, ac)) in on_air.iter().enumerate() {
                if Some(i) != winner {
                    let miss = match (first[i].bar, first[i].addba, first[i].to) {
                        (true, _, _) => Miss::Bar,
                        (_, true, Some(to)) => Miss::AddbaRequest(to),
                        _ => Miss::Data,
                    };
                    self.failed(st, ac, start[i] + first[i].air, miss);
                }
            }
            busy_end = match winner {
                Some(w) => end.max(self.succeed(on_air[w].0, on_air[w].1, start[w])),
                None => end,
            };
        } else if let Some(&(st, ac)) = on_air.first() {
            busy_end = self.succeed(st, ac, t);
        } else {
            busy_end = t;
        }
        let eifs_extra = self.phy.eifs() - self.phy.difs();
        for (st, ac) in internal {
            self.failed(st, ac, end, Miss::Internal);
        }
        self.airtime_busy += busy_end - t;
        // Everyone else froze at `t` and resumes counting after the busy period and its AIFS.
        let qos = self.qos;
        let slot = self.phy.slot.as_nanos().max(1);
        // A TXOP that ended early without a CF-End leaves the others' NAV running to the end
        // of the TXOP limit: they resume after it, the holder right away (10.22.2.8; ns-3's
        // `QosFrameExchangeManager::GetFrameDurationId` covers the remaining TXOP).
        let nav = self.nav.take();
        for st in 0..self.stations.len() {
            let heard_error = in_error.get(st).copied().unwrap_or(false);
            let busy = match nav {
                Some((holder, until)) if holder != st => busy_end.max(until),
                _ => busy_end,
            };
            let resume = if heard_error { busy + eifs_extra } else { busy };
            for ac in 0..4 {
                let aifs = self.phy.aifs(self.edca[ac].aifsn);
                let s = &mut self.stations[st].acs[ac];
                // Idle categories go on counting a post-backoff (with immediate access).
                let counting = s.has_work() || (self.immediate_access && s.backoff > 0);
                if !counting {
                    continue;
                }
                if s.count_from <= t && !started.contains(&(st, ac)) {
                    // Idle slots counted since its AIFS ended. An EDCA function also decrements
                    // at the slot boundary that ends AIFS itself (802.11-2016 10.22.2.4; ns-3
                    // models it the same way), a DCF one only after each idle slot.
                    let idle = u32::try_from((t - s.count_from).as_nanos() / slot).unwrap_or(u32::MAX);
                    s.backoff = s.backoff.saturating_sub(idle.saturating_add(u32::from(qos)));
                }
                s.count_from = s.count_from.max(resume + aifs);
            }
        }
        // Senders that waited for an ACK in vain back off from their ACK timeout instead
        // (they heard no frame in error, so no EIFS for them).
        // Their slots stay on everyone's grid, so that a tie with another station is still
        // a collision.
        let timed_out = std::mem::take(&mut self.timed_out);
        for &(st, ac, at) in &timed_out {
            let aifs = self.phy.aifs(self.edca[ac].aifsn);
            // The later of the medium's idle AIFS and the timeout's end (a frame shorter
            // than the longest in a collision timed out while the medium was still busy).
            let idle = busy_end + aifs;
            let earliest = (at + self.phy.ack_timeout() + aifs).max(idle);
            let s = &mut self.stations[st].acs[ac];
            if s.has_work() {
                s.count_from = on_grid(idle, earliest, self.phy.slot);
            }
        }
        self.timed_out = timed_out;
        self.busy_until = self.busy_until.max(busy_end);
        self.next_tx_cache.set(None);
        // Shared transmit paths: frames left; refill the cards and find their new heads.
        if self.any_shared {
            self.nic_after(&started, busy_end);
        }
    }

    /// Whether bystander `b` detects one of the colliding PPDUs' preambles (and so receives
    /// a frame in error). See [`Medium::with_eifs`] and [`Medium::with_preamble_detection`].
    fn detects_preamble(&self, b: usize, on_air: &[(usize, usize)]) -> bool {
        match &self.eifs {
            Eifs::Never => false,
            Eifs::Always => true,
            Eifs::Detected(d) => {
                let n = self.stations.len();
                let powers = on_air.iter().map(|&(st, _)| d.rx_mw[st * n + b]);
                let (total, strongest) = powers.fold((0.0, 0.0f64), |(sum, max), p| (sum + p, max.max(p)));
                strongest >= d.min_mw && strongest >= d.threshold * (total - strongest + d.noise_mw)
            }
        }
    }

    /// A frame exchange that worked on the air (frames may still fail by the receiver's FER).
    /// Returns when the medium is free again.
    fn succeed(&mut self, st: usize, ac: usize, t: Instant) -> Instant {
        if !self.stations[st].acs[ac].addba_resp.is_empty() {
            return self.addba_response(st, ac, t);
        }
        if self.stations[st].acs[ac].bar_pending.is_some() {
            return self.block_ack_req(st, ac, t);
        }
        if let Some(to) = self.needs_addba(st, ac, t) {
            return self.addba(st, ac, to, t);
        }
        let txop = self.edca[ac].txop;
        let mut at = t;
        let mut groups = std::mem::take(&mut self.groups);
        if !txop.is_zero() {
            self.nav = Some((st, t + txop));
        }
        let mut next = None;
        while let Some(f) = self.stations[st].acs[ac].queue.front() {
            let (dest, rts) = (f.dest, self.uses_rts(st, f));
            // The first exchange of the TXOP (`next` not yet computed) may use all of it.
            let agg = match next {
                Some(a) => a,
                None => self.aggregate(st, ac, (!txop.is_zero()).then_some(txop), true, Some(&mut groups)),
            };
            let (k, air) = (agg.frames, agg.air);
            self.stations[st].acs[ac].stats.attempts += 1;
            self.stations[st].acs[ac].stats.airtime += air;
            if rts {
                at += self.rts_cts();
            }
            let end = at + air;
            let arrive = end + self.propagation;
            match dest {
                Dest::Broadcast => {
                    let Some(f) = self.stations[st].acs[ac].queue.pop_front() else { break };
                    for to in (0..self.stations.len()).filter(|&to| to != st) {
                        if !self.rng.random_bool(self.stations[to].cfg.fer) {
                            self.emit(MediumEvent::Delivered { from: st, to, handle: f.handle.clone(), at: arrive });
                        }
                    }
                    self.done(st, ac, f.handle, end, f.bytes);
                    at = end;
                }
                Dest::Unicast(to) => {
                    let fer = self.stations[to].cfg.fer;
                    // Each MPDU is received or corrupted whole, with all the MSDUs it carries.
                    let mut ok = std::mem::take(&mut self.ok);
                    ok.clear();
                    if agg.mpdus == k {
                        ok.extend((0..k).map(|_| !self.rng.random_bool(fer)));
                    } else {
                        for &n in &groups {
                            let good = !self.rng.random_bool(fer);
                            ok.extend(std::iter::repeat_n(good, n));
                        }
                    }
                    let response = self.response(agg.mpdus);
                    if !ok.iter().any(|&o| o) {
                        // Nothing got through: no (block) ACK; the sender times out and backs
                        // off. Without the ACK-timeout option the medium counts as busy for
                        // the missing response (Bianchi's T_s for every attempt).
                        self.stations[st].acs[ac].queue.iter_mut().take(k).for_each(|f| f.sent = true);
                        self.ok = ok;
                        self.groups = groups;
                        if agg.mpdus > 1 {
                            self.stations[st].acs[ac].bar_pending = Some(to);
                        }
                        self.failed(st, ac, end, Miss::Data);
                        return if self.ack_timeout { end } else { end + self.phy.sifs + response };
                    }
                    at = end + self.phy.sifs + response;
                    // Delivered subframes leave the queue; lost ones stay at the front, in order,
                    // and count one more attempt for the head.
                    let mut kept = VecDeque::new();
                    for good in ok.iter().copied() {
                        let Some(f) = self.stations[st].acs[ac].queue.pop_front() else { break };
                        if good {
                            self.emit(MediumEvent::Delivered { from: st, to, handle: f.handle.clone(), at: arrive });
                            self.done(st, ac, f.handle, at, f.bytes);
                        } else {
                            kept.push_back(Frame { sent: true, ..f });
                        }
                    }
                    self.ok = ok;
                    let retry = !kept.is_empty();
                    while let Some(f) = kept.pop_back() {
                        self.stations[st].acs[ac].queue.push_front(f);
                    }
                    if retry {
                        // The block ack came back: no timeout, and a success for the window.
                        self.groups = groups;
                        self.failed(st, ac, at, Miss::PartialBa);
                        return at;
                    }
                }
            }
            // Within a TXOP, the next exchange of the same category follows after SIFS if it
            // fits, its acknowledgement included, in what is left of the TXOP limit: an
            // A-MPDU shrinks to fit (ns-3 passes the remaining TXOP as the PPDU duration
            // limit), a frame that does not fit at all ends the TXOP.
            if txop.is_zero() {
                break;
            }
            let Some(mut left) = txop.checked_sub(at + self.phy.sifs - t) else { break };
            if self.stations[st].acs[ac].queue.front().is_some_and(|f| self.uses_rts(st, f)) {
                left = left.saturating_sub(self.rts_cts());
            }
            let a = self.aggregate(st, ac, Some(left), false, Some(&mut groups));
            if a.frames == 0 {
                break;
            }
            next = Some(a);
            at += self.phy.sifs;
        }
        self.groups = groups;
        // A TXOP that ends early is truncated with a CF-End after SIFS if the TXOP time left
        // then exceeds the CF-End's air time (ns-3 `QosFrameExchangeManager::
        // SendCfEndIfNeeded`). It is group addressed, so it goes at the lowest rate (52 µs on
        // OFDM, as ns-3 3.44's traces show; 352 µs at 1 Mbit/s on 802.11g), not at the
        // control rate.
        let cf_end = self.phy.group_control_duration(CF_END_BYTES);
        if self.cf_end && !txop.is_zero() && (at + self.phy.sifs - t) + cf_end < txop {
            at += self.phy.sifs + cf_end;
            self.nav = None;
        }
        self.release(st, ac);
        at
    }

    /// RTS, SIFS, CTS, SIFS: what precedes a protected frame.
    fn rts_cts(&self) -> Duration {
        let basic = self.phy.basic_mbps;
        self.phy.legacy_duration(RTS_BYTES, basic)
            + self.phy.sifs
            + self.phy.legacy_duration(CTS_BYTES, basic)
            + self.phy.sifs
    }

    /// Discards every frame whose MSDU lifetime has run out by `now`, in every queue, and
    /// returns how many. ns-3's `WifiMacQueue` does this whenever a frame arrives at a full
    /// queue, which a sender that offers more than it can send does all the time; a driver
    /// that keeps its queues full calls this after each event to get the same queue. Without
    /// a lifetime it does nothing.
    pub fn wipe_expired(&mut self, now: Instant) -> usize {
        let mut n = 0;
        for st in 0..self.stations.len() {
            for ac in 0..4 {
                n += self.expire(st, ac, now);
            }
        }
        n
    }

    /// Discards the expired frames at the front of `(st, ac)`'s queue (frames are in
    /// enqueue order there, retransmissions first) and returns how many. MPDUs in flight
    /// (sent in an A-MPDU whose block ack was missed, their BlockAckReq not yet answered)
    /// stay: ns-3's `WifiMacQueue` skips in-flight MPDUs when it removes expired ones, and
    /// looks at their lifetime only when the BlockAckReq fails or its block ack comes
    /// ([`Medium::expire_in_flight`]).
    fn expire(&mut self, st: usize, ac: usize, now: Instant) -> usize {
        self.drop_expired(st, ac, now, false)
    }

    /// Discards the sent frames of `(st, ac)` whose lifetime has run out, in flight or not
    /// (ns-3's `BlockAckManager::HandleInFlightMpdu` when a block ack comes or a
    /// BlockAckReq fails); the recipient's window then needs a BlockAckReq.
    fn expire_in_flight(&mut self, st: usize, ac: usize, now: Instant) -> usize {
        self.drop_expired(st, ac, now, true)
    }

    fn drop_expired(&mut self, st: usize, ac: usize, now: Instant, in_flight: bool) -> usize {
        let Some(life) = self.msdu_lifetime else { return 0 };
        let mut dropped = 0;
        let mut i = 0;
        loop {
            let s = &mut self.stations[st].acs[ac];
            let Some(f) = s.queue.get(i) else { break };
            if (in_flight && !f.sent) || now.saturating_duration_since(f.enqueued) <= life {
                break;
            }
            if !in_flight && f.sent && s.bar_pending.is_some() {
                i += 1;
                continue;
            }
            let Some(f) = s.queue.remove(i) else { break };
            s.stats.lifetime_drops += 1;
            if i == 0 {
                s.attempts = 0;
            }
            dropped += 1;
            if let (true, Dest::Unicast(to)) = (f.sent, f.dest)
                && s.bar_pending.is_none()
                && s.ba_peers.iter().any(|p| p.0 == to)
            {
                s.bar_pending = Some(to);
            }
            self.emit(MediumEvent::Dropped {
                station: st,
                ac: Ac::ALL[ac],
                handle: f.handle,
                at: now,
                reason: DropReason::Lifetime,
            });
        }
        if dropped > 0 {
            self.next_tx_cache.set(None);
            if self.any_shared {
                self.nic_refill(st, now);
            }
        }
        dropped
    }

    fn done(&mut self, st: usize, ac: usize, handle: H, at: Instant, bytes: usize) {
        let s = &mut self.stations[st].acs[ac];
        s.stats.successes += 1;
        s.stats.bytes_sent += bytes as u64;
        let attempts = s.attempts.saturating_add(1);
        s.attempts = 0;
        self.reset_cw(st, ac);
        self.emit(MediumEvent::Sent { station: st, ac: Ac::ALL[ac], handle, at, attempts });
    }

    /// The contention window after a success: CWmin, and the station retry count back to 0.
    pub(super) fn reset_cw(&mut self, st: usize, ac: usize) {
        let s = &mut self.stations[st].acs[ac];
        s.cw = self.edca[ac].cw_min;
        s.qsrc = 0;
    }

    /// The contention window after a failed exchange (802.11-2020 10.23.2.2, as ns-3 3.44's
    /// `Txop::UpdateFailedCw`): while the station retry count QSRC is below the retry limit
    /// it grows by one and CW becomes min(CWmax, 2^QSRC (CWmin + 1) − 1); at the limit both
    /// go back to the start. The count spans frames (a BlockAckReq that fails after a failed
    /// A-MPDU widens the window further) and only a success resets it; dropping a frame at
    /// its own retry limit does not.
    fn widen_cw(&mut self, st: usize, ac: usize, limit: u8) {
        let params = self.edca[ac];
        let s = &mut self.stations[st].acs[ac];
        if limit == u8::MAX || s.qsrc < limit {
            s.qsrc = s.qsrc.saturating_add(1);
            let cw = (u64::from(params.cw_min) + 1) << u32::from(s.qsrc).min(32);
            s.cw = cw.saturating_sub(1).min(u64::from(params.cw_max)) as u16;
        } else {
            s.qsrc = 0;
            s.cw = params.cw_min;
        }
    }

    /// An exchange of `(st, ac)` that went wrong (`miss` says how): widen the window, count
    /// a retry of the head frame (or drop it), and back off. `end` is when the failed PPDU
    /// ended.
    fn failed(&mut self, st: usize, ac: usize, end: Instant, miss: Miss) {
        let cfg = self.stations[st].cfg;
        let long = self.stations[st].acs[ac].queue.front().is_some_and(|f| self.uses_rts(st, f));
        let limit = if long { cfg.long_retry_limit } else { cfg.short_retry_limit };
        let awaited_ack = matches!(miss, Miss::Data | Miss::Bar | Miss::AddbaRequest(_));
        let s = &mut self.stations[st].acs[ac];
        if !s.addba_resp.is_empty() || s.queue.is_empty() {
            // An ADDBA Response failed: an MMPDU, retried up to the retry limit like any
            // frame and then dropped (ns-3's `DropMpduIfRetryLimitReached`); the originator
            // then runs into its response timeout and asks again later.
            if s.has_work() {
                s.stats.collisions += 1;
                s.resp_attempts = s.resp_attempts.saturating_add(1);
                if limit != u8::MAX && s.resp_attempts >= limit {
                    s.addba_resp.pop_front();
                    s.resp_attempts = 0;
                    s.stats.retry_drops += 1;
                }
                self.widen_cw(st, ac, limit);
                if self.ack_timeout && awaited_ack {
                    self.timed_out.push((st, ac, end));
                }
                self.release(st, ac);
            }
            return;
        }
        let Some(front) = s.queue.front() else { return };
        let broadcast = front.dest == Dest::Broadcast;
        s.stats.collisions += 1;
        if miss == Miss::Bar {
            // A BlockAckReq counts against no frame: it is sent again as long as an MPDU in
            // flight is still alive (ns-3's `NeedBarRetransmission`); those whose lifetime ran
            // out while it was awaited leave now.
            self.widen_cw(st, ac, limit);
            self.expire_in_flight(st, ac, end);
        } else if let Miss::AddbaRequest(to) = miss {
            // An ADDBA Request is an MMPDU with a retry count of its own, not the data
            // frame's: at the retry limit it is dropped and the originator sends single MPDUs
            // until the failed agreement resets (ns-3: `NotifyOriginatorAgreementNoReply`,
            // then `ResetBa` after `FailedAddBaTimeout`).
            s.req_attempts = s.req_attempts.saturating_add(1);
            if limit != u8::MAX && s.req_attempts >= limit {
                s.req_attempts = 0;
                s.ba_peers.retain(|p| p.0 != to);
                s.ba_peers.push((to, Some(end)));
            }
            self.widen_cw(st, ac, limit);
        } else {
            s.attempts = s.attempts.saturating_add(1);
            let drop = if broadcast {
                Some(DropReason::BroadcastCollision)
            } else if limit != u8::MAX && s.attempts >= limit {
                Some(DropReason::RetryLimit)
            } else {
                None
            };
            if let Some(reason) = drop {
                if reason == DropReason::RetryLimit {
                    s.stats.retry_drops += 1;
                }
                s.attempts = 0;
                if let Some(f) = s.queue.pop_front() {
                    self.emit(MediumEvent::Dropped { station: st, ac: Ac::ALL[ac], handle: f.handle, at: end, reason });
                }
            }
            match (broadcast, miss) {
                // Nobody acknowledges a broadcast, so its sender never learns it collided.
                (true, _) => self.reset_cw(st, ac),
                // A block ack came back: a success for the window, if not for every MPDU
                // (ns-3's `HtFrameExchangeManager::ReceiveMpdu` resets CW on any block ack).
                (false, Miss::PartialBa) => self.reset_cw(st, ac),
                _ => self.widen_cw(st, ac, limit),
            }
        }
        if self.ack_timeout && awaited_ack && !broadcast {
            self.timed_out.push((st, ac, end));
        }
        self.release(st, ac);
    }
}

/// How an exchange went wrong, for [`Medium::failed`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Miss {
    /// No acknowledgement came back for a data frame, an A-MPDU or a management frame:
    /// the sender learns it at its ACK timeout.
    Data,
    /// No block ack came back for a BlockAckReq.
    Bar,
    /// No ACK came back for an ADDBA Request to this recipient.
    AddbaRequest(usize),
    /// A block ack came back but left MPDUs unacknowledged.
    PartialBa,
    /// Another category of the same station won the same slot (10.22.2.4): nothing went on
    /// the air.
    Internal,
}

/// The first instant at or after `t` on the slot grid through `anchor` (which may lie before
/// or after `t`).
pub(super) fn on_grid(anchor: Instant, t: Instant, slot: Duration) -> Instant {
    let slot = slot.as_nanos().max(1);
    let to_ns = |n: u128| Duration::from_nanos(u64::try_from(n).unwrap_or(u64::MAX));
    if t >= anchor {
        anchor + to_ns((t - anchor).as_nanos().div_ceil(slot) * slot)
    } else {
        anchor.saturating_sub(to_ns((anchor - t).as_nanos() / slot * slot))
    }
}
