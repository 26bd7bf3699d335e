//! Saturation scenarios: every station always has a frame waiting. Bianchi's model and ns-3's
//! reference tables describe exactly this, so it is how the model is validated; the
//! `edca_sat` scenario is the same experiment with EDCA categories, compared with ns-3 itself.

pub use super::bianchi::{BIANCHI_CASES, BianchiCase, BianchiModel, BianchiResult, bianchi_cases, max_rel_err};

use super::phy::LLC_SNAP_BYTES;
use super::{
    Ac, Aggregation, Dest, EdcaParams, EdcaTable, Medium, MediumError, MediumEvent, NS3_PREAMBLE_THRESHOLD_DB, Phy,
    PhyKind, StationConfig, Timing,
};
use cohort_time::Instant;
use std::time::Duration;

/// Throughput of a saturation run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Saturation {
    /// Payload bits delivered per second, all stations.
    pub total_mbps: f64,
    /// The same by access category.
    pub per_ac_mbps: [f64; 4],
    pub collisions: u64,
    pub successes: u64,
    /// PPDUs put on the air (successful or not).
    pub attempts: u64,
    /// Share of the time the channel was busy.
    pub busy_share: f64,
}

/// A saturation experiment: each flow `(source, category, destination)` keeps its queue full
/// of `msdu_bytes`-byte unicast frames for `warmup + duration`; `payload_bytes` of each frame
/// delivered after the warm-up count as throughput (the MSDU minus the headers above the MAC).
#[derive(Debug, Clone, PartialEq)]
pub struct SaturationRun {
    pub phy: Phy,
    pub edca: [EdcaParams; 4],
    pub station: StationConfig,
    pub stations: usize,
    pub flows: Vec<(usize, Ac, usize)>,
    pub msdu_bytes: usize,
    pub payload_bytes: usize,
    pub duration: Duration,
    /// Time before `duration` starts whose deliveries do not count.
    pub warmup: Duration,
    /// Flow `i` starts `i × stagger` after the first.
    pub stagger: Duration,
    pub seed: u64,
    /// What stations do after a failed exchange.
    pub timing: Timing,
    /// Received powers `rx_dbm[from][to]` for preamble detection
    /// ([`Medium::with_preamble_detection`], ns-3's 4 dB threshold); `None`: no geometry.
    pub rx_dbm: Option<Vec<Vec<f64>>>,
}

impl SaturationRun {
    /// Runs the experiment.
    pub fn run(&self) -> Result<Saturation, MediumError> {
        let mut m: Medium<usize> = Medium::new(self.phy, self.edca, &vec![self.station; self.stations], self.seed)?;
        m = m.with_timing(self.timing);
        if let Some(rx) = &self.rx_dbm {
            m = m.with_preamble_detection(rx, NS3_PREAMBLE_THRESHOLD_DB)?;
        }
        let begin = Instant::ZERO + self.warmup;
        let end = begin + self.duration;
        // Fill each flow's queue when it starts (flow i at i × stagger); each frame that
        // leaves (sent or dropped) is replaced at once, so a TXOP always finds frames waiting.
        // The senders offer more than they can send, as ns-3's OnOff applications do, so a
        // frame that outlives its MSDU lifetime is replaced as soon as it expires
        // (`Medium::wipe_expired`, every millisecond), not when it reaches the front.
        let mut started = 0;
        let mut frames = [0u64; 4];
        let mut next_wipe = Instant::ZERO;
        loop {
            let next_start = (started < self.flows.len()).then(|| Instant::ZERO + self.stagger * started as u32);
            let t = match (m.poll_timeout(), next_start) {
                (Some(a), Some(b)) => a.min(b),
                (a, b) => match a.or(b) {
                    Some(t) => t,
                    None => break,
                },
            };
            if t > end {
                break;
            }
            if next_start == Some(t) {
                let (src, ac, dst) = self.flows[started];
                for _ in 0..self.station.queue_depth {
                    m.enqueue(t, src, ac, Dest::Unicast(dst), self.msdu_bytes, started)?;
                }
                started += 1;
                continue;
            }
            m.handle_timeout(t);
            if t >= next_wipe {
                m.wipe_expired(t);
                next_wipe = t + WIPE_EVERY;
            }
            while let Some(ev) = m.poll_event(t) {
                let (MediumEvent::Sent { handle, .. } | MediumEvent::Dropped { handle, .. }) = ev else { continue };
                let Some(&(src, ac, dst)) = self.flows.get(handle) else { continue };
                if let MediumEvent::Sent { at, .. } = ev
                    && at > begin
                    && at <= end
                {
                    frames[ac.index()] += 1;
                }
                m.enqueue(t, src, ac, Dest::Unicast(dst), self.msdu_bytes, handle)?;
            }
        }
        let secs = self.duration.as_secs_f64().max(1e-9);
        let per_ac_mbps = frames.map(|f| f as f64 * self.payload_bytes as f64 * 8.0 / secs / 1e6);
        let (mut collisions, mut successes, mut attempts) = (0, 0, 0);
        for st in 0..self.stations {
            for ac in Ac::ALL {
                let s = m.stats(st, ac).unwrap_or_default();
                collisions += s.collisions;
                successes += s.successes;
                attempts += s.attempts;
            }
        }
        Ok(Saturation {
            total_mbps: per_ac_mbps.iter().sum(),
            per_ac_mbps,
            collisions,
            successes,
            attempts,
            busy_share: (m.busy_time().as_secs_f64() / secs).min(1.0),
        })
    }
}

/// How often a saturation run replaces expired frames: a millisecond on lifetimes of
/// hundreds (ns-3 does it at every arrival, some every 0.2 ms per sender).
const WIPE_EVERY: Duration = Duration::from_millis(1);

/// `n` stations configured as `cfg`; each flow `(source, category, destination)` keeps its
/// queue full of `payload`-byte unicast MSDUs for `duration` of simulated time (all of the
/// MSDU counts as throughput).
#[allow(clippy::too_many_arguments)]
pub fn saturate(
    phy: Phy,
    edca: [EdcaParams; 4],
    cfg: StationConfig,
    n: usize,
    flows: &[(usize, Ac, usize)],
    payload: usize,
    duration: Duration,
    seed: u64,
) -> Result<Saturation, MediumError> {
    SaturationRun {
        phy,
        edca,
        station: cfg,
        stations: n,
        flows: flows.to_vec(),
        msdu_bytes: payload,
        payload_bytes: payload,
        duration,
        warmup: Duration::ZERO,
        stagger: Duration::ZERO,
        seed,
        timing: Timing::Bianchi,
        rx_dbm: None,
    }
    .run()
}

/// Where a scenario's stations stand. Only preamble detection looks at it: with
/// [`Timing::Ns3`], a bystander of a collision waits EIFS when it can pick out one of the
/// colliding preambles (see [`Medium::with_preamble_detection`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Placement {
    /// As `edca_sat.py` places them: station `i` (0 the receiver) at `(i mod 2, 0.1 i)`
    /// metres, two columns a metre apart, received powers from [`ns3_rx_dbm`].
    Ns3,
    /// No geometry: no bystander ever detects a colliding preamble.
    None,
}

impl Placement {
    /// Received power from each station to each other (dBm), for `n` stations.
    pub fn rx_dbm(self, n: usize) -> Option<Vec<Vec<f64>>> {
        match self {
            Placement::None => None,
            Placement::Ns3 => {
                let at = |i: usize| ((i % 2) as f64, 0.1 * i as f64);
                let power = |a: usize, b: usize| {
                    let ((xa, ya), (xb, yb)) = (at(a), at(b));
                    ns3_rx_dbm((xa - xb).hypot(ya - yb))
                };
                Some((0..n).map(|a| (0..n).map(|b| power(a, b)).collect()).collect())
            }
        }
    }
}

/// Received power `d` metres from a sender under the defaults of ns-3's
/// `YansWifiChannelHelper::Default()` and `WifiPhy`: `LogDistancePropagationLossModel` with
/// exponent 3 and a 46.6777 dB loss at the 1 m reference distance (and that same loss at
/// any shorter distance: `DoCalcRxPower` returns `txPower - referenceLoss` for
/// `d <= referenceDistance`), 16.0206 dBm transmit power (`TxPowerStart`), no antenna gain.
pub fn ns3_rx_dbm(d: f64) -> f64 {
    let path = if d > 1.0 { 30.0 * d.log10() } else { 0.0 };
    16.0206 - 46.6777 - path
}

/// The channel a scenario file gets for the settings it leaves out, the same in `cohort sim`
/// and `cohort testbed` so that one scenario gives one answer: 802.11's timing after failures
/// (EIFS, ACK timeouts: [`Timing::Standard`]), a 64-frame hardware queue per category with a
/// 1000-packet qdisc in front of it (Linux's `txqueuelen`), 802.11-2016's EDCA table, and the
/// PHY's default aggregation ([`Aggregation`]). The simulator, which has no qdisc, gives each
/// category one FIFO of `queue_depth + qdisc_packets` frames instead: the same order and
/// the same drops, except that A-MPDUs can then draw on frames still "in the qdisc".
/// (The `edca_sat` saturation scenario keeps its own, ns-3-like defaults.)
pub const CHANNEL_TIMING: Timing = Timing::Standard;
/// See [`CHANNEL_TIMING`].
pub const CHANNEL_QUEUE_DEPTH: usize = 64;
/// See [`CHANNEL_TIMING`].
pub const CHANNEL_QDISC_PACKETS: usize = 1000;

/// Which 802.11 amendment a scenario runs, by the letter users know it by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PhyStandard {
    /// 802.11a, OFDM 5 GHz.
    A,
    /// 802.11b, DSSS, long preamble.
    B,
    /// 802.11g, ERP-OFDM, long (20 µs) slot: stations without an AP use the long slot
    /// (802.11-2016 9.4.1.4: an IBSS sets Short Slot Time to 0; ns-3's
    /// `WifiPhy::Configure80211g` keeps 20 µs unless an AP allows 9).
    G,
    /// 802.11n, HT-mixed 5 GHz.
    N,
    /// 802.11ac, VHT.
    Ac,
}

impl PhyStandard {
    /// The PHY at this data rate, with the standard's control rate.
    pub fn phy(self, data_mbps: f64) -> Phy {
        match self {
            PhyStandard::A => Phy::ofdm(data_mbps),
            PhyStandard::B => Phy::dsss(data_mbps),
            PhyStandard::G => Phy { slot: std::time::Duration::from_micros(20), ..Phy::erp_ofdm(data_mbps) },
            PhyStandard::N => Phy::ht(data_mbps),
            PhyStandard::Ac => Phy::vht(data_mbps),
        }
    }
}

/// The `edca_sat` scenario of `../shared/reference/ns3/edca_sat.py`: `stations` senders
/// (numbered 1..=stations) saturate station 0 with UDP datagrams; every `vo_every`-th sender
/// is on AC_VO (ns-3: TOS 0xc0), the others on AC_BE (TOS 0x70, user priority 3); EDCA
/// defaults; 802.11a at 54 Mbit/s with 24 Mbit/s control frames. Every field has that
/// default, so an empty TOML table is the reference scenario with N = 5.
///
/// ```toml
/// stations = 5
/// vo_every = 4
/// phy = "a"            # a | b | g | n | ac
/// data_mbps = 54.0
/// # control_mbps = 24.0   (default: the standard's control rate for data_mbps)
/// payload_bytes = 1472 # UDP payload, as ns-3's OnOffApplication PacketSize
/// header_bytes = 36    # UDP 8 + IPv4 20 + LLC/SNAP 8, inside the MSDU
/// queue_depth = 500
/// duration_s = 10.0
/// seed = 1
/// timing = "ns3"       # bianchi | standard | ns3
/// edca_table = "802.11-2020"  # 802.11-2016 | 802.11-2020
/// placement = "ns3"    # ns3 | none
/// warmup_s = 0.0       # simulated seconds before duration_s whose deliveries do not count
/// stagger_ms = 1.0     # sender i starts (i - 1) ms after sender 1, as edca_sat.py
/// # acs = ["vi", "bk", "bk"]   # each sender's category (overrides vo_every)
/// [aggregation]        # optional; default: the PHY's (n/ac: ns-3 3.44's, a/b/g: none)
/// enabled = true
/// max_ampdu_bytes = { be = 65535, vi = 65535, vo = 0, bk = 0 }
/// max_amsdu_bytes = { be = 0 }
/// ```
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EdcaSatScenario {
    /// Saturated senders (one more station receives).
    pub stations: usize,
    /// Every `vo_every`-th sender (1-based) is on AC_VO; 0: none.
    pub vo_every: usize,
    /// Each sender's access category, sender 1 first (`stations` entries); overrides
    /// `vo_every`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub acs: Option<Vec<Ac>>,
    pub phy: PhyStandard,
    pub data_mbps: f64,
    /// Basic/control rate; `None`: the standard's for the data rate.
    pub control_mbps: Option<f64>,
    /// Application payload per frame; throughput counts these bytes.
    pub payload_bytes: usize,
    /// Bytes between the payload and the MAC header (UDP/IP/LLC).
    pub header_bytes: usize,
    /// Queue per category: ns-3's `WifiMacQueue` holds 500 packets. It must hold more than
    /// a TXOP can carry: the run refills queues only between accesses, and an AC_VI TXOP of
    /// A-MPDUs carries over a hundred short frames.
    pub queue_depth: usize,
    /// Simulated seconds of saturation (ns-3's figure divides by the same span).
    pub duration_s: f64,
    pub seed: u64,
    /// What stations do after a failed exchange; `ns3` (the default) behaves as ns-3 3.44
    /// does on the same scenario (see [`Timing::Ns3`]).
    pub timing: Timing,
    /// Where the stations stand (only preamble detection, under `timing = "ns3"`, uses it).
    pub placement: Placement,
    /// Which default EDCA parameter set: `802.11-2020` (the default, as ns-3 3.44: AC_VO
    /// may keep the channel for 2.080 ms per access) or `802.11-2016` (1.504 ms, as Linux).
    pub edca_table: EdcaTable,
    /// Simulated seconds before `duration_s` whose deliveries do not count.
    pub warmup_s: f64,
    /// Sender `i` starts `(i − 1) × stagger_ms` after sender 1, as `edca_sat.py` starts its
    /// OnOff applications 1 ms apart (block-ack agreements are then set up one by one).
    pub stagger_ms: f64,
    /// A-MPDU/A-MSDU limits per category; the default is the PHY's: ns-3 3.44's on n/ac
    /// (see [`Aggregation`]), none on a/b/g.
    pub aggregation: Aggregation,
}

impl Default for EdcaSatScenario {
    fn default() -> Self {
        EdcaSatScenario {
            stations: 5,
            vo_every: 4,
            phy: PhyStandard::A,
            data_mbps: 54.0,
            control_mbps: None,
            payload_bytes: 1472,
            header_bytes: 8 + 20 + LLC_SNAP_BYTES,
            queue_depth: 500,
            duration_s: 10.0,
            seed: 1,
            timing: Timing::Ns3,
            edca_table: EdcaTable::Ieee2020,
            placement: Placement::Ns3,
            acs: None,
            warmup_s: 0.0,
            stagger_ms: 1.0,
            aggregation: Aggregation::default(),
        }
    }
}

/// What an `edca_sat` run measured.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct EdcaSatReport {
    pub stations: usize,
    pub simulated_s: f64,
    pub throughput_mbps: f64,
    pub bk_mbps: f64,
    pub be_mbps: f64,
    pub vi_mbps: f64,
    pub vo_mbps: f64,
    pub collisions: u64,
    pub successes: u64,
    /// PPDUs on the air: the unit of work of the model.
    pub attempts: u64,
    pub busy_share: f64,
}

impl EdcaSatScenario {
    /// The saturation experiment this scenario describes.
    pub fn saturation_run(&self) -> Result<SaturationRun, MediumError> {
        for d in [self.duration_s, self.warmup_s, self.stagger_ms / 1e3] {
            if !(d.is_finite() && (0.0..=1e6).contains(&d)) {
                return Err(MediumError::Station("duration_s, warmup_s and stagger_ms must lie in [0, 1e6] s"));
            }
        }
        if self.acs.as_ref().is_some_and(|a| a.len() != self.stations) {
            return Err(MediumError::Station("acs needs one category per sender"));
        }
        if self.stations == 0 || self.stations > 10_000 {
            return Err(MediumError::Station("stations must lie in 1..=10000"));
        }
        let mut phy = self.phy.phy(self.data_mbps);
        if let Some(c) = self.control_mbps {
            phy.basic_mbps = c;
        }
        if self.timing == Timing::Ns3 && phy.kind == PhyKind::Vht {
            // ns-3 3.44 leaves VHT-SIG-B out of single-user PPDUs (`VhtPhy::GetSigBDuration`
            // is 4 µs only for VHT MU): its VHT preamble is 36 µs, not 802.11's 40.
            phy.plcp = Duration::from_micros(36);
        }
        let flows = (1..=self.stations)
            .map(|i| {
                let vo = self.vo_every > 0 && i % self.vo_every == 0;
                let ac = match &self.acs {
                    Some(acs) => acs[i - 1],
                    None if vo => Ac::Vo,
                    None => Ac::Be,
                };
                (i, ac, 0)
            })
            .collect();
        Ok(SaturationRun {
            phy,
            edca: self.edca_table.params(&phy),
            station: StationConfig {
                queue_depth: self.queue_depth,
                ampdu: self.aggregation.limits(&phy),
                ..StationConfig::default()
            },
            stations: self.stations + 1,
            flows,
            msdu_bytes: self.payload_bytes.saturating_add(self.header_bytes),
            payload_bytes: self.payload_bytes,
            duration: Duration::from_secs_f64(self.duration_s),
            warmup: Duration::from_secs_f64(self.warmup_s),
            stagger: Duration::from_secs_f64(self.stagger_ms / 1e3),
            seed: self.seed,
            timing: self.timing,
            rx_dbm: if self.timing == Timing::Ns3 { self.placement.rx_dbm(self.stations + 1) } else { None },
        })
    }

    /// Runs the scenario in virtual time.
    pub fn run(&self) -> Result<EdcaSatReport, MediumError> {
        let s = self.saturation_run()?.run()?;
        let [bk, be, vi, vo] = s.per_ac_mbps;
        Ok(EdcaSatReport {
            stations: self.stations,
            simulated_s: self.duration_s,
            throughput_mbps: s.total_mbps,
            bk_mbps: bk,
            be_mbps: be,
            vi_mbps: vi,
            vo_mbps: vo,
            collisions: s.collisions,
            successes: s.successes,
            attempts: s.attempts,
            busy_share: s.busy_share,
        })
    }

    /// Runs the scenario and measures how fast: simulated seconds and PPDUs per wall-clock
    /// second. This is the one place the crate reads a clock, for benchmarks only; the model
    /// itself never does.
    pub fn run_timed(&self) -> Result<(EdcaSatReport, Speed), MediumError> {
        let start = std::time::Instant::now();
        let r = self.run()?;
        let wall_s = start.elapsed().as_secs_f64().max(1e-9);
        let speed = Speed {
            wall_s,
            sim_seconds_per_wall_second: r.simulated_s / wall_s,
            ppdus_per_wall_second: r.attempts as f64 / wall_s,
        };
        Ok((r, speed))
    }
}

/// How fast a run went.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Speed {
    pub wall_s: f64,
    pub sim_seconds_per_wall_second: f64,
    pub ppdus_per_wall_second: f64,
}

/// [`EdcaSatScenario`] with `n` senders for `duration`, everything else at its default.
pub fn edca_sat(n: usize, duration: Duration, seed: u64) -> Result<Saturation, MediumError> {
    EdcaSatScenario { stations: n, duration_s: duration.as_secs_f64(), seed, ..EdcaSatScenario::default() }
        .saturation_run()?
        .run()
}
