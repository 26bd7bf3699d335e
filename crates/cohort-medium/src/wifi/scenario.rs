//! Saturation scenarios: every station always has a frame waiting. Bianchi's model and ns-3's
//! reference tables describe exactly this, so it is how the model is validated.

use super::{Ac, Dest, EdcaParams, Medium, MediumEvent, Phy, StationConfig};
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
}

/// `n` stations configured as `cfg`; each flow `(source, category, destination)` keeps its
/// queue full of `payload`-byte unicast frames for `duration` of simulated time.
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
) -> Result<Saturation, super::MediumError> {
    let mut m: Medium<usize> = Medium::new(phy, edca, &vec![cfg; n], seed)?;
    let end = Instant::ZERO + duration;
    // Fill every flow's queue; each frame that leaves (sent or dropped) is replaced at once, so
    // a TXOP always finds frames waiting.
    for (i, &(src, ac, dst)) in flows.iter().enumerate() {
        for _ in 0..cfg.queue_depth {
            m.enqueue(Instant::ZERO, src, ac, Dest::Unicast(dst), payload, i)?;
        }
    }
    let mut bytes = [0u64; 4];
    while let Some(t) = m.poll_timeout() {
        if t > end {
            break;
        }
        m.handle_timeout(t);
        while let Some(ev) = m.poll_event(t) {
            let (MediumEvent::Sent { handle, .. } | MediumEvent::Dropped { handle, .. }) = ev else { continue };
            let (src, ac, dst) = flows[handle];
            if let MediumEvent::Sent { at, .. } = ev
                && at <= end
            {
                bytes[ac.index()] += payload as u64;
            }
            m.enqueue(t, src, ac, Dest::Unicast(dst), payload, handle)?;
        }
    }
    let secs = duration.as_secs_f64();
    let per_ac_mbps = bytes.map(|b| b as f64 * 8.0 / secs / 1e6);
    let (mut collisions, mut successes) = (0, 0);
    for st in 0..n {
        for ac in Ac::ALL {
            let s = m.stats(st, ac).unwrap_or_default();
            collisions += s.collisions;
            successes += s.successes;
        }
    }
    Ok(Saturation { total_mbps: per_ac_mbps.iter().sum(), per_ac_mbps, collisions, successes })
}

/// One reference case of ns-3's Bianchi tables (`src/wifi/examples/reference/`): saturation
/// throughput of `n` stations, 1500-byte payloads, basic access, DCF, CWmax 1023, DIFS after a
/// collision.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BianchiCase {
    pub phy: &'static str,
    pub n: usize,
    pub reference_mbps: f64,
}

/// The reference cases Cohort checks against.
pub const BIANCHI_CASES: [BianchiCase; 8] = [
    BianchiCase { phy: "11b-1", n: 5, reference_mbps: 0.8437 },
    BianchiCase { phy: "11b-1", n: 10, reference_mbps: 0.7861 },
    BianchiCase { phy: "11b-1", n: 20, reference_mbps: 0.7226 },
    BianchiCase { phy: "11b-1", n: 50, reference_mbps: 0.6336 },
    BianchiCase { phy: "11g-54", n: 5, reference_mbps: 29.8324 },
    BianchiCase { phy: "11g-54", n: 10, reference_mbps: 28.1519 },
    BianchiCase { phy: "11g-54", n: 20, reference_mbps: 26.2925 },
    BianchiCase { phy: "11g-54", n: 50, reference_mbps: 23.5618 },
];

impl BianchiCase {
    pub fn phy(&self) -> Phy {
        if self.phy == "11b-1" { Phy::dsss(1.0) } else { Phy::erp_ofdm(54.0) }
    }

    /// Simulates the case for `duration`; returns the measured throughput in Mbit/s.
    pub fn simulate(&self, duration: Duration, seed: u64) -> f64 {
        let phy = self.phy();
        // Bianchi's model retries a frame until it succeeds, and so do ns-3's reference runs.
        let cfg = StationConfig { queue_depth: 4, retry_limit: u8::MAX, ..StationConfig::default() };
        let flows: Vec<_> = (0..self.n).map(|i| (i, Ac::Be, (i + 1) % self.n)).collect();
        saturate(phy, EdcaParams::dcf(&phy), cfg, self.n, &flows, 1500, duration, seed).map_or(0.0, |s| s.total_mbps)
    }

    /// Bianchi's analytical saturation throughput (JSAC 2000, eqs. 7, 9 and 13, basic access),
    /// with the same frame timing as the simulation: a second, independent check.
    pub fn analytic(&self) -> f64 {
        let phy = self.phy();
        let dcf = EdcaParams::dcf(&phy)[0];
        let w = f64::from(dcf.cw_min) + 1.0;
        let m = ((f64::from(dcf.cw_max) + 1.0) / w).log2().round() as i32;
        let n = self.n as f64;
        let mut tau: f64 = 0.1;
        for _ in 0..500 {
            let p = 1.0 - (1.0 - tau).powf(n - 1.0);
            let next = 2.0 * (1.0 - 2.0 * p) / ((1.0 - 2.0 * p) * (w + 1.0) + p * w * (1.0 - (2.0 * p).powi(m)));
            tau = 0.5 * tau + 0.5 * next;
        }
        let ptr = 1.0 - (1.0 - tau).powf(n);
        let ps = n * tau * (1.0 - tau).powf(n - 1.0) / ptr;
        let data = phy.duration(1500 + super::phy::MAC_OVERHEAD_BYTES, phy.data_mbps).as_secs_f64();
        let ts = data + phy.sifs.as_secs_f64() + phy.ack_duration().as_secs_f64() + phy.difs().as_secs_f64();
        let tc = data + phy.difs().as_secs_f64();
        let slot = phy.slot.as_secs_f64();
        ps * ptr * 1500.0 * 8.0 / ((1.0 - ptr) * slot + ptr * ps * ts + ptr * (1.0 - ps) * tc) / 1e6
    }
}

/// The `edca_sat` scenario of `../shared/reference/ns3/edca_sat.py`: stations 1..=n saturate
/// station 0 with 1472-byte UDP payloads (1508-byte MSDUs with UDP, IPv4 and LLC/SNAP headers),
/// every 4th station on AC_VO and the others on AC_BE, EDCA defaults, 802.11a at 54 Mbit/s with
/// 24 Mbit/s control frames. Throughputs are UDP payload rates, as ns-3 reports them.
pub fn edca_sat(n: usize, duration: Duration, seed: u64) -> Result<Saturation, super::MediumError> {
    let phy = Phy::ofdm(54.0);
    let flows: Vec<_> = (1..=n).map(|i| (i, if i % 4 == 0 { Ac::Vo } else { Ac::Be }, 0)).collect();
    let cfg = StationConfig { queue_depth: 64, ..StationConfig::default() };
    let s = saturate(phy, EdcaParams::defaults(&phy), cfg, n + 1, &flows, 1508, duration, seed)?;
    let scale = 1472.0 / 1508.0;
    let per_ac_mbps = s.per_ac_mbps.map(|x| x * scale);
    Ok(Saturation { total_mbps: s.total_mbps * scale, per_ac_mbps, ..s })
}
