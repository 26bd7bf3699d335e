//! A robot moving past access points: per-radio link traces with handoffs and outages, for
//! multipath runs (seed 001 moves its devices on an elliptical path past several access
//! points; this generator does the same at 802.11a/n scale, one trace per radio).
//!
//! * **Path**: the robot goes round an ellipse (semi-axes `a`, `b`, centred at the origin) at
//!   a constant speed.
//! * **Received power**: ns-3's default `LogDistancePropagationLossModel` (exponent 3, the
//!   Friis loss at 1 m as the reference: 46.68 dB at 5.15 GHz, 40.05 dB at 2.4 GHz), 16.02 dBm
//!   transmit power (`cohort_medium::wifi::ns3_rx_dbm` is the 5 GHz case).
//! * **Association**: each radio joins the strongest access point of its band and hands over
//!   when another is `hysteresis_db` stronger, or when its own falls below the lowest rate's
//!   sensitivity; a handover costs `handoff` of outage (scanning, authentication,
//!   association); a radio out of every AP's range is out.
//! * **Rate**: the fastest OFDM rate whose receiver minimum input sensitivity (802.11-2016
//!   Table 17-18: −82 dBm at 6 Mbit/s ... −65 dBm at 54 Mbit/s, 20 MHz) the received power
//!   meets; the link carries what one station's DCF exchange (DIFS, mean CWmin backoff,
//!   preamble, data, SIFS, ACK at 24 Mbit/s or the data rate if lower) leaves of that rate for
//!   1500-byte frames.
//! * **Loss**: what the MAC's retries leave: 1% iid, 10% within 3 dB of the sensitivity of the
//!   lowest rate (the cell edge). A modelling choice, stated, not measured.

use crate::multipath::MpPath;
use cohort_medium::link::{LinkParams, LossModel};
pub use cohort_medium::trace::{Trace, TraceError, parse_trace};
use std::time::Duration;

/// A band a radio and an access point work in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Band {
    /// 2.4 GHz.
    G24,
    /// 5 GHz.
    G5,
}

impl Band {
    /// Loss at the 1 m reference distance: Friis, `20·log10(4π·d0/λ)`.
    fn reference_loss_db(self) -> f64 {
        match self {
            Band::G24 => 40.05,
            Band::G5 => 46.6777,
        }
    }
}

/// An access point.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Ap {
    pub x: f64,
    pub y: f64,
    pub band: Band,
}

/// The robot's journey.
#[derive(Debug, Clone, PartialEq)]
pub struct Mobility {
    pub aps: Vec<Ap>,
    /// Semi-axes of the ellipse, metres.
    pub a: f64,
    pub b: f64,
    pub speed_mps: f64,
    pub hysteresis_db: f64,
    pub handoff: Duration,
    /// One-way delay of every link (the wired side included).
    pub owd: Duration,
    /// How often the trace samples the position.
    pub step: Duration,
}

impl Mobility {
    /// An ellipse of 60 × 30 m semi-axes with three APs per band spread around it 10 m outside
    /// the path, at `speed_mps`; 3 dB hysteresis, 100 ms handovers, 5 ms one way, samples
    /// every 100 ms.
    pub fn elliptical(speed_mps: f64) -> Self {
        let (a, b) = (60.0, 30.0);
        let mut aps = Vec::new();
        for (k, band) in [(0.0, Band::G5), (0.5, Band::G24)] {
            for i in 0..3 {
                let th = std::f64::consts::TAU * (i as f64 + k) / 3.0;
                aps.push(Ap { x: (a + 10.0) * th.cos(), y: (b + 10.0) * th.sin(), band });
            }
        }
        Mobility {
            aps,
            a,
            b,
            speed_mps,
            hysteresis_db: 3.0,
            handoff: Duration::from_millis(100),
            owd: Duration::from_millis(5),
            step: Duration::from_millis(100),
        }
    }

    /// Where the robot is at `t` (starting at (a, 0), counter-clockwise; the angle advances by
    /// arc length with the local radius, close enough for a trace).
    pub fn position(&self, t: Duration) -> (f64, f64) {
        // Ramanujan's perimeter of the ellipse.
        let h = ((self.a - self.b) / (self.a + self.b)).powi(2);
        let perimeter = std::f64::consts::PI * (self.a + self.b) * (1.0 + 3.0 * h / (10.0 + (4.0 - 3.0 * h).sqrt()));
        let th = std::f64::consts::TAU * (self.speed_mps * t.as_secs_f64() / perimeter);
        (self.a * th.cos(), self.b * th.sin())
    }
}

/// Received power, dBm, `d` metres from an AP of `band`.
pub fn rx_dbm(band: Band, d: f64) -> f64 {
    let path = if d > 1.0 { 30.0 * d.log10() } else { 0.0 };
    16.0206 - band.reference_loss_db() - path
}

/// 802.11-2016 Table 17-18, 20 MHz: (data rate Mbit/s, minimum sensitivity dBm).
const OFDM: [(f64, f64); 8] = [
    (6.0, -82.0),
    (9.0, -81.0),
    (12.0, -79.0),
    (18.0, -77.0),
    (24.0, -74.0),
    (36.0, -70.0),
    (48.0, -66.0),
    (54.0, -65.0),
];

/// What one station's DCF exchange delivers of OFDM rate `mbps` with 1500-byte frames
/// (802.11-2016 §17: 9 µs slots, SIFS 16 µs, DIFS 34 µs, CWmin 15, 20 µs preamble and SIGNAL,
/// 4 µs symbols of `4·rate` data bits, 16 service + 6 tail bits, 34 bytes of MAC header and
/// FCS; the ACK at the highest basic rate ≤ the data rate, 6/12/24 Mbit/s).
pub fn dcf_goodput_mbps(mbps: f64) -> f64 {
    let frame = |bytes: f64, rate: f64| 20.0 + ((16.0 + 8.0 * bytes + 6.0) / (4.0 * rate)).ceil() * 4.0;
    let ack_rate = [24.0, 12.0, 6.0].into_iter().find(|r| *r <= mbps).unwrap_or(6.0);
    let t = 34.0 + 7.5 * 9.0 + frame(1534.0, mbps) + 16.0 + frame(14.0, ack_rate);
    1500.0 * 8.0 / t
}

/// The trace of a radio of `band` over `duration`, a sample every `step`, changes only.
pub fn trace(m: &Mobility, band: Band, duration: Duration) -> Trace {
    let aps: Vec<&Ap> = m.aps.iter().filter(|a| a.band == band).collect();
    let mut out: Trace = Vec::new();
    let mut current: Option<usize> = None;
    let mut handing_over_until = Duration::ZERO;
    let mut t = Duration::ZERO;
    let edge = OFDM[0].1;
    while t <= duration {
        let (x, y) = m.position(t);
        let power = |i: usize| rx_dbm(band, (aps[i].x - x).hypot(aps[i].y - y));
        let best = (0..aps.len()).max_by(|&i, &j| power(i).total_cmp(&power(j)));
        let next = match (current, best) {
            (_, None) => None,
            (Some(c), Some(b)) if power(c) >= edge && power(b) < power(c) + m.hysteresis_db => Some(c),
            (_, Some(b)) if power(b) >= edge => Some(b),
            _ => None,
        };
        if next != current {
            if current.is_some() && next.is_some() {
                handing_over_until = t + m.handoff;
            }
            current = next;
        }
        let state = match current {
            Some(c) if t >= handing_over_until => {
                let p = power(c);
                let rate = OFDM.iter().rev().find(|(_, s)| p >= *s).map_or(OFDM[0].0, |r| r.0);
                let loss = if p < edge + 3.0 { 0.10 } else { 0.01 };
                let bps = (dcf_goodput_mbps(rate) * 1e6) as u64;
                Some(LinkParams { loss: LossModel::Iid { p: loss }, ..LinkParams::clean(m.owd, bps) })
            }
            _ => None,
        };
        if out.last().is_none_or(|(_, s)| *s != state) {
            out.push((t, state));
        }
        // A handover's end is a change too: sample it exactly.
        let step_end = t + m.step;
        t = if handing_over_until > t && handing_over_until < step_end { handing_over_until } else { step_end };
    }
    out
}

/// The multipath paths of a robot with one radio per band in `radios`: each path follows its
/// radio's trace (its link's parameters change, and it is out while the radio is).
pub fn paths(m: &Mobility, radios: &[Band], duration: Duration) -> Vec<MpPath> {
    radios.iter().map(|&band| from_trace(&trace(m, band, duration), LinkParams::clean(m.owd, 1_000_000))).collect()
}

/// A path that follows `tr`: its link starts with the trace's first associated state
/// (`fallback` if it never has one), changes at every entry, and is out from each `None` to
/// the next state (to the end of time after the last).
pub fn from_trace(tr: &Trace, fallback: LinkParams) -> MpPath {
    let first = tr.iter().find_map(|(_, s)| *s).unwrap_or(fallback);
    let mut p = MpPath::new(first);
    let mut out_since: Option<Duration> = None;
    for (t, s) in tr {
        match (s, out_since) {
            (None, None) => out_since = Some(*t),
            (Some(params), since) => {
                if let Some(a) = since {
                    p.outages.push((a, *t));
                    out_since = None;
                }
                p.changes.push((*t, *params));
            }
            (None, Some(_)) => {}
        }
    }
    if let Some(a) = out_since {
        p.outages.push((a, Duration::MAX / 2));
    }
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_trace_file_is_read_and_bad_lines_are_named() {
        let tr = parse_trace("# t_ms,rate_mbps,owd_ms,loss\n0,20,10,0.01\n500, down\n800,5,30,0.1 # back, slower\n")
            .unwrap();
        assert_eq!(tr.len(), 3);
        assert_eq!(tr[1], (Duration::from_millis(500), None));
        let p = from_trace(&tr, LinkParams::clean(Duration::from_millis(1), 1_000_000));
        assert_eq!(p.link.rate_bps, 20_000_000);
        assert_eq!(p.outages, vec![(Duration::from_millis(500), Duration::from_millis(800))]);
        assert_eq!(p.changes.len(), 2);
        for (bad, line) in [
            ("0,20,10", 1),
            ("0,20,10,0\n0,20,10,0", 2),
            ("x,1,1,0", 1),
            ("0,-1,1,0", 1),
            ("0,0,1,0", 1),
            ("0,1,1,2", 1),
            ("0,nan,1,0", 1),
            ("3e46", 1),
            ("3e46,down", 1),
            ("0,1,3e46,0", 1),
            ("0,1e300,1,0", 1),
            ("0,up", 1),
            ("# c\n\n5,1,1,0\n4,down", 4),
        ] {
            assert_eq!(parse_trace(bad).map_err(|e| e.line), Err(line), "{bad:?}");
        }
    }

    /// A run over a recorded trace: the second path goes down and comes back slower; every
    /// message arrives in order.
    #[test]
    fn a_run_follows_a_trace_file() {
        use crate::multipath::{MpRun, run};
        let clean = LinkParams::clean(Duration::from_millis(10), 20_000_000);
        let tr = parse_trace("0,10,10,0\n300,down\n700,4,20,0.05\n").unwrap();
        let paths = vec![MpPath::new(clean), from_trace(&tr, clean)];
        let o = run(&MpRun::new(Default::default(), paths, 3000, 1000, 3)).unwrap();
        assert_eq!((o.delivered, o.in_order), (3000, true));
    }

    #[test]
    fn rates_follow_the_standard_and_the_dcf() {
        // ns-3's 5 GHz received power at 1 m.
        assert!((rx_dbm(Band::G5, 1.0) - (16.0206 - 46.6777)).abs() < 1e-9);
        assert!(rx_dbm(Band::G24, 50.0) > rx_dbm(Band::G5, 50.0));
        // A single 54 Mbit/s station carries a little over half its rate (a known DCF result:
        // about 30 Mbit/s of UDP at 54).
        let g = dcf_goodput_mbps(54.0);
        assert!((28.0..33.0).contains(&g), "{g}");
        assert!(dcf_goodput_mbps(6.0) < 6.0 && dcf_goodput_mbps(6.0) > 4.5);
    }

    #[test]
    fn a_lap_has_handovers_rate_changes_and_outages() {
        let m = Mobility::elliptical(5.0);
        let lap = Duration::from_secs(60);
        for band in [Band::G5, Band::G24] {
            let tr = trace(&m, band, lap);
            assert!(tr.len() > 5, "{band:?}: the rate changes along the path: {}", tr.len());
            assert!(tr.iter().any(|(_, s)| s.is_none()), "{band:?}: handovers are outages");
            assert!(tr.iter().any(|(_, s)| s.is_some()), "{band:?}: and the radio is associated");
        }
        let p = paths(&m, &[Band::G5, Band::G24], lap);
        assert_eq!(p.len(), 2);
        assert!(p.iter().all(|q| !q.outages.is_empty() && !q.changes.is_empty()));
        // The two radios are not out at the same moments throughout.
        let out = |q: &MpPath, t: Duration| q.outages.iter().any(|&(a, b)| t >= a && t < b);
        let both = (0..600).filter(|k| {
            let t = Duration::from_millis(100 * k);
            out(&p[0], t) && out(&p[1], t)
        });
        assert!(both.count() < 300);
    }
}
