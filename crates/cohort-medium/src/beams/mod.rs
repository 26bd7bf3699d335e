//! RF-chain and beam allocation at a multi-antenna access point (seed 001 §3.1), sans-IO.
//!
//! Seed 001 gives each link to device `ı`, served by beam `b` on RF chain `r`, a throughput
//! `θ_{r,b}^ı = log(1 + SNR_{r,b}^ı)` (Eq. 1) with
//! `SNR_{r,b}^ı = P_{r,b,ı} / (Σ_{i∈B} Σ_{j∈R} Σ_{k∈I∖{ı}} I_{i,j,k}·C_{i,j}^b + ς²)` (Eq. 2):
//! the received power over the crosstalk of every simultaneous stream to *another* device plus
//! the noise. Every scheduling round the access point chooses the indicator `I_{b,r,ı}` that
//! maximises `Σ θ` with each chain serving at most one (beam, device) (the integer program
//! after Eq. 2). This module is that model made concrete:
//!
//! * **Access point** ([`ApConfig`]): `R` identical RF chains (normalised transmit power, as
//!   Eq. 1 assumes; so `P_{r,b,ı}` does not depend on `r`) driving one uniform linear array of
//!   `elements` half-wavelength-spaced antennas, and a codebook of `B` beams steered uniformly
//!   in `sin φ` over the sector `±sector_rad` around the boresight.
//! * **Beam gain** ([`ApConfig::gain`]): the array factor of the ULA,
//!   `|sin(Nπ/2·Δ) / (N·sin(π/2·Δ))|²·N` with `Δ = sin ψ − sin φ_b`: a main lobe of `N`
//!   (10·log10 N dBi) and the ULA's natural side lobes (the first at −13.3 dB), floored at
//!   `sidelobe_floor_db` below the peak (phase-shifter quantisation and element errors fill
//!   the nulls: seed 001 §2.1 notes that pencil beams with low inter-stream interference are
//!   not plausible). Behind the array (`|ψ| > 90°`) only the floor is left.
//! * **Received power**: `P_{r,b,ı} = P_tx·G_b(ψ_ı)/PL(d_ı)` with the log-distance path loss
//!   `PL(d) = PL(1 m) + 10·n·log10 d` (Friis at 1 m; `n` per band), `d` clamped to ≥ 1 m.
//! * **Crosstalk**: `C_{i,j}^b` seen by device `ı` is the power beam `i` (on chain `j`) puts
//!   at `ı`, `P_tx·G_i(ψ_ı)/PL(d_ı)`, less `isolation_db` (what the precoder cancels). Seed
//!   001 writes `C` without the receiving device; physically it is where the device stands
//!   that decides how much of another beam it hears, so Cohort's `C` depends on it.
//!   Streams to the same device do not interfere with each other (`k ∈ I∖{ı}` in Eq. 2: they
//!   are one device's spatial streams).
//! * **Noise**: `ς² = k·T·W·F` (−174 dBm/Hz + 10·log10 W + noise figure).
//! * **Throughput**: Eq. 1 with the band's bandwidth: `θ = W·log2(1 + SNR)` bit/s (Shannon).
//! * **A beam carries one stream**: two chains on one beam would radiate the same spatial
//!   stream, so a beam is used at most once per round (the integer program's chain constraint
//!   plus this beam constraint).
//!
//! Two bands ([`Band`]): 5 GHz MU-MIMO (80 MHz, 4-element array, 15 dB precoder isolation)
//! and 60 GHz 802.11ay-like (one 2.16 GHz channel, 16-element array, analog beams only: no
//! isolation), each with the constants stated on [`ApConfig::new`].
//!
//! Allocators ([`alloc`]): seed 001's Algorithm 1 (greedy; several chains may serve one
//! device), the one-to-one baseline (HEKATON: a device gets at most one chain), and the exact
//! optimum of the integer program ([`exact`], an ILP per active beam set).

pub mod alloc;
pub mod exact;

/// Boltzmann's constant times 290 K, dBm per Hz.
pub const THERMAL_DBM_PER_HZ: f64 = -174.0;

/// The band an access point works in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Band {
    /// 5 GHz, 802.11ac/ax MU-MIMO, 80 MHz.
    G5,
    /// 60 GHz, 802.11ay-like, one 2.16 GHz channel.
    G60,
}

/// An access point: its position, band, chains, codebook and radio constants.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ApConfig {
    pub band: Band,
    /// `|R|`: RF chains.
    pub chains: usize,
    /// `|B|`: beams in the codebook.
    pub beams: usize,
    /// Antennas of the uniform linear array (half-wavelength spacing).
    pub elements: usize,
    /// Position, metres.
    pub x: f64,
    pub y: f64,
    /// Direction the array faces, radians from the +x axis.
    pub boresight_rad: f64,
    /// Beams are steered over `±sector_rad` around the boresight.
    pub sector_rad: f64,
    /// Transmit power of each chain, dBm.
    pub tx_dbm: f64,
    /// Receiver bandwidth `W`, Hz.
    pub bandwidth_hz: f64,
    pub noise_figure_db: f64,
    /// Path loss at the 1 m reference distance, dB, and the log-distance exponent `n`.
    pub ref_loss_db: f64,
    pub path_loss_exponent: f64,
    /// The gain pattern's floor below the main lobe's peak, dB (positive).
    pub sidelobe_floor_db: f64,
    /// How much of another stream's power the precoder removes at a device, dB (≥ 0).
    pub isolation_db: f64,
}

/// A configuration, device position or allocation the model cannot use.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum BeamsError {
    #[error("an access point needs at least one RF chain, one beam and one antenna")]
    Empty,
    #[error("{what} must be finite{extra}: {value}")]
    Invalid { what: &'static str, extra: &'static str, value: f64 },
    #[error("at most {max} {what}, not {value}")]
    TooMany { what: &'static str, max: usize, value: usize },
    #[error("stream {index}: {why}")]
    Stream { index: usize, why: &'static str },
    #[error(
        "the signal and crosstalk matrices must both be beams × devices ({devices} devices, {signal} and {crosstalk} entries)"
    )]
    Shape { devices: usize, signal: usize, crosstalk: usize },
    #[error("the exact solver failed: {0}")]
    Solver(String),
}

/// Largest codebook and chain count accepted (the model is sized for real access points).
pub const MAX_BEAMS: usize = 4096;
pub const MAX_CHAINS: usize = 64;
pub const MAX_DEVICES: usize = 4096;

impl ApConfig {
    /// An access point at the origin facing +x, with `chains` chains and `beams` beams over a
    /// ±60° sector, and the band's constants (modelling choices, stated):
    ///
    /// | | 5 GHz | 60 GHz |
    /// |---|---|---|
    /// | bandwidth | 80 MHz | 2.16 GHz (one 802.11ay channel) |
    /// | array | 4 elements | 16 elements |
    /// | transmit power per chain | 17 dBm | 10 dBm |
    /// | loss at 1 m (Friis) | 46.68 dB (5.15 GHz) | 68.0 dB (60.48 GHz) |
    /// | path-loss exponent | 3.0 (ns-3's default, as `cohort_sim::mobility`) | 2.0 (line of sight) |
    /// | noise figure | 7 dB | 10 dB |
    /// | side-lobe floor | 20 dB | 20 dB |
    /// | precoder isolation | 15 dB (digital MU-MIMO precoding, imperfect CSI) | 0 dB (analog beams) |
    pub fn new(band: Band, chains: usize, beams: usize) -> Self {
        let (bandwidth_hz, elements, tx_dbm, ref_loss_db, path_loss_exponent, noise_figure_db, isolation_db) =
            match band {
                Band::G5 => (80e6, 4, 17.0, 46.6777, 3.0, 7.0, 15.0),
                Band::G60 => (2.16e9, 16, 10.0, 68.0, 2.0, 10.0, 0.0),
            };
        ApConfig {
            band,
            chains,
            beams,
            elements,
            x: 0.0,
            y: 0.0,
            boresight_rad: 0.0,
            sector_rad: std::f64::consts::FRAC_PI_3,
            tx_dbm,
            bandwidth_hz,
            noise_figure_db,
            ref_loss_db,
            path_loss_exponent,
            sidelobe_floor_db: 20.0,
            isolation_db,
        }
    }

    /// Checks every field; every later call relies on it.
    pub fn validate(&self) -> Result<(), BeamsError> {
        if self.chains == 0 || self.beams == 0 || self.elements == 0 {
            return Err(BeamsError::Empty);
        }
        for (what, max, value) in
            [("chains", MAX_CHAINS, self.chains), ("beams", MAX_BEAMS, self.beams), ("elements", 1024, self.elements)]
        {
            if value > max {
                return Err(BeamsError::TooMany { what, max, value });
            }
        }
        let finite = |what, value: f64| {
            if value.is_finite() { Ok(()) } else { Err(BeamsError::Invalid { what, extra: "", value }) }
        };
        let positive = |what, value: f64, lo: f64, hi: f64, extra| {
            if value.is_finite() && value >= lo && value <= hi {
                Ok(())
            } else {
                Err(BeamsError::Invalid { what, extra, value })
            }
        };
        finite("x", self.x)?;
        finite("y", self.y)?;
        finite("boresight_rad", self.boresight_rad)?;
        positive("sector_rad", self.sector_rad, 0.0, std::f64::consts::FRAC_PI_2, " and in [0, π/2]")?;
        positive("tx_dbm", self.tx_dbm, -50.0, 60.0, " and in [-50, 60]")?;
        positive("bandwidth_hz", self.bandwidth_hz, 1e3, 1e11, " and in [1 kHz, 100 GHz]")?;
        positive("noise_figure_db", self.noise_figure_db, 0.0, 50.0, " and in [0, 50]")?;
        positive("ref_loss_db", self.ref_loss_db, 0.0, 200.0, " and in [0, 200]")?;
        positive("path_loss_exponent", self.path_loss_exponent, 1.0, 8.0, " and in [1, 8]")?;
        positive("sidelobe_floor_db", self.sidelobe_floor_db, 0.0, 100.0, " and in [0, 100]")?;
        positive("isolation_db", self.isolation_db, 0.0, 100.0, " and in [0, 100]")
    }

    /// Steering direction of beam `b`, radians from the boresight: uniform in `sin φ` over
    /// the sector (beam `0` at `−sector`, the last at `+sector`; one beam points ahead).
    pub fn steering_rad(&self, b: usize) -> f64 {
        if self.beams <= 1 {
            return 0.0;
        }
        let s = self.sector_rad.sin();
        (-s + 2.0 * s * b as f64 / (self.beams - 1) as f64).asin()
    }

    /// Linear power gain of beam `b` towards `psi` radians off the boresight (see the module
    /// docs): the ULA's array factor times `N`, never below the floor.
    pub fn gain(&self, b: usize, psi: f64) -> f64 {
        let n = self.elements as f64;
        let floor = n * 10f64.powf(-self.sidelobe_floor_db / 10.0);
        let psi = (psi + std::f64::consts::PI).rem_euclid(std::f64::consts::TAU) - std::f64::consts::PI;
        if psi.abs() > std::f64::consts::FRAC_PI_2 {
            return floor;
        }
        let delta = psi.sin() - self.steering_rad(b).sin();
        let x = std::f64::consts::FRAC_PI_2 * delta;
        let af = if x.sin().abs() < 1e-12 { 1.0 } else { ((n * x).sin() / (n * x.sin())).powi(2) };
        (n * af).max(floor)
    }

    /// The noise `ς²`, watts.
    pub fn noise_w(&self) -> f64 {
        dbm_to_w(THERMAL_DBM_PER_HZ + 10.0 * self.bandwidth_hz.log10() + self.noise_figure_db)
    }

    /// Path loss (linear, ≥ 1) at `d` metres.
    pub fn path_loss(&self, d: f64) -> f64 {
        10f64.powf((self.ref_loss_db + 10.0 * self.path_loss_exponent * d.max(1.0).log10()) / 10.0)
    }
}

/// dBm to watts.
pub fn dbm_to_w(dbm: f64) -> f64 {
    10f64.powf((dbm - 30.0) / 10.0)
}

/// One round's channel: the received power `P_{·,b,ı}` and crosstalk `C_{b,·}` at every
/// device of every beam, and the noise. Built from an [`ApConfig`] and device positions.
#[derive(Debug, Clone, PartialEq)]
pub struct Channel {
    pub chains: usize,
    pub beams: usize,
    pub devices: usize,
    /// `W`, Hz.
    pub bandwidth_hz: f64,
    /// `ς²`, watts.
    pub noise_w: f64,
    /// `P_{r,b,ı}` (the same for every chain), watts, at `[b·devices + ı]`.
    signal_w: Vec<f64>,
    /// Crosstalk of beam `b` at device `ı`, watts, at `[b·devices + ı]`.
    crosstalk_w: Vec<f64>,
}

impl Channel {
    /// The channel from `ap` to devices at `positions` (metres).
    pub fn new(ap: &ApConfig, positions: &[(f64, f64)]) -> Result<Self, BeamsError> {
        ap.validate()?;
        if positions.len() > MAX_DEVICES {
            return Err(BeamsError::TooMany { what: "devices", max: MAX_DEVICES, value: positions.len() });
        }
        let n = positions.len();
        let tx_w = dbm_to_w(ap.tx_dbm);
        let isolation = 10f64.powf(-ap.isolation_db / 10.0);
        let mut signal_w = vec![0.0; ap.beams * n];
        let mut crosstalk_w = vec![0.0; ap.beams * n];
        for (i, &(x, y)) in positions.iter().enumerate() {
            for (what, v) in [("device x", x), ("device y", y)] {
                if !v.is_finite() || v.abs() > 1e7 {
                    return Err(BeamsError::Invalid { what, extra: " and within 10 000 km", value: v });
                }
            }
            let (dx, dy) = (x - ap.x, y - ap.y);
            let loss = ap.path_loss(dx.hypot(dy));
            let psi = dy.atan2(dx) - ap.boresight_rad;
            for b in 0..ap.beams {
                let p = tx_w * ap.gain(b, psi) / loss;
                signal_w[b * n + i] = p;
                crosstalk_w[b * n + i] = p * isolation;
            }
        }
        Ok(Channel {
            chains: ap.chains,
            beams: ap.beams,
            devices: n,
            bandwidth_hz: ap.bandwidth_hz,
            noise_w: ap.noise_w(),
            signal_w,
            crosstalk_w,
        })
    }

    /// A channel from explicit matrices (`[b·devices + ı]`, watts): for hand-computed cases
    /// and other models' outputs. Every number must be finite and ≥ 0, the noise > 0.
    pub fn from_matrices(
        chains: usize,
        devices: usize,
        bandwidth_hz: f64,
        noise_w: f64,
        signal_w: Vec<f64>,
        crosstalk_w: Vec<f64>,
    ) -> Result<Self, BeamsError> {
        if chains == 0 || devices == 0 || signal_w.is_empty() {
            return Err(BeamsError::Empty);
        }
        if chains > MAX_CHAINS {
            return Err(BeamsError::TooMany { what: "chains", max: MAX_CHAINS, value: chains });
        }
        if devices > MAX_DEVICES {
            return Err(BeamsError::TooMany { what: "devices", max: MAX_DEVICES, value: devices });
        }
        let beams = signal_w.len() / devices;
        if beams * devices != signal_w.len() || crosstalk_w.len() != signal_w.len() {
            return Err(BeamsError::Shape { devices, signal: signal_w.len(), crosstalk: crosstalk_w.len() });
        }
        if beams > MAX_BEAMS {
            return Err(BeamsError::TooMany { what: "beams", max: MAX_BEAMS, value: beams });
        }
        for (what, v) in [("bandwidth_hz", bandwidth_hz), ("noise_w", noise_w)] {
            if !v.is_finite() || v <= 0.0 {
                return Err(BeamsError::Invalid { what, extra: " and > 0", value: v });
            }
        }
        if let Some(&v) = signal_w.iter().chain(&crosstalk_w).find(|v| !v.is_finite() || **v < 0.0) {
            return Err(BeamsError::Invalid { what: "a power", extra: " and ≥ 0", value: v });
        }
        Ok(Channel { chains, beams, devices, bandwidth_hz, noise_w, signal_w, crosstalk_w })
    }

    /// `P_{r,b,ı}`, watts (chains are identical).
    #[inline]
    pub fn signal_w(&self, b: usize, i: usize) -> f64 {
        self.signal_w[b * self.devices + i]
    }

    /// `C_{b,·}` at device `ı`, watts.
    #[inline]
    pub fn crosstalk_w(&self, b: usize, i: usize) -> f64 {
        self.crosstalk_w[b * self.devices + i]
    }

    /// Eq. 1 with bandwidth: `W·log2(1 + signal/(interference + ς²))`, bit/s.
    #[inline]
    pub fn theta_bps(&self, signal_w: f64, interference_w: f64) -> f64 {
        self.bandwidth_hz * (signal_w / (interference_w + self.noise_w)).ln_1p() * std::f64::consts::LOG2_E
    }

    /// `θ` of a stream on beam `b` to device `ı` with nothing else on the air.
    pub fn theta_alone_bps(&self, b: usize, i: usize) -> f64 {
        self.theta_bps(self.signal_w(b, i), 0.0)
    }
}

/// One stream of an allocation: `I_{b,r,ı} = 1`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize)]
pub struct Stream {
    pub chain: usize,
    pub beam: usize,
    pub device: usize,
}

/// An allocation and what it gives: each stream's SNR (Eq. 2) and `θ` (Eq. 1), each
/// device's sum (its link's throughput: several chains may serve it) and the total.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Allocation {
    pub streams: Vec<Stream>,
    pub snr: Vec<f64>,
    pub theta_bps: Vec<f64>,
    pub device_bps: Vec<f64>,
    pub total_bps: f64,
}

impl Allocation {
    /// RF chains in use.
    pub fn chains_used(&self) -> usize {
        self.streams.len()
    }
}

impl Channel {
    /// Evaluates `streams` with Eqs. 1-2. A stream naming a chain, beam or device out of range,
    /// or a chain or beam used twice, is an error.
    pub fn evaluate(&self, streams: &[Stream]) -> Result<Allocation, BeamsError> {
        let mut chain_used = vec![false; self.chains];
        let mut beam_used = vec![false; self.beams];
        for (index, s) in streams.iter().enumerate() {
            let err = |why| BeamsError::Stream { index, why };
            if s.chain >= self.chains || s.beam >= self.beams || s.device >= self.devices {
                return Err(err("chain, beam or device out of range"));
            }
            if std::mem::replace(&mut chain_used[s.chain], true) {
                return Err(err("a chain serves at most one stream"));
            }
            if std::mem::replace(&mut beam_used[s.beam], true) {
                return Err(err("a beam carries at most one stream"));
            }
        }
        Ok(self.evaluate_unchecked(streams))
    }

    /// [`Channel::evaluate`] for streams known to be valid.
    pub(crate) fn evaluate_unchecked(&self, streams: &[Stream]) -> Allocation {
        let mut a = Allocation {
            streams: streams.to_vec(),
            snr: Vec::with_capacity(streams.len()),
            theta_bps: Vec::with_capacity(streams.len()),
            device_bps: vec![0.0; self.devices],
            total_bps: 0.0,
        };
        for s in streams {
            let interference: f64 =
                streams.iter().filter(|o| o.device != s.device).map(|o| self.crosstalk_w(o.beam, s.device)).sum();
            let p = self.signal_w(s.beam, s.device);
            let theta = self.theta_bps(p, interference);
            a.snr.push(p / (interference + self.noise_w));
            a.theta_bps.push(theta);
            a.device_bps[s.device] += theta;
            a.total_bps += theta;
        }
        a
    }
}

/// Power an access point draws (Fig. 9's energy efficiency): a fixed part and a part per
/// active RF chain. Seed 001 gives no numbers; Cohort's defaults are 0.5 W of baseband and
/// 0.3 W per chain (mixer, converters, phase shifters and amplifier of one chain).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct PowerModel {
    pub static_w: f64,
    pub per_chain_w: f64,
}

impl Default for PowerModel {
    fn default() -> Self {
        PowerModel { static_w: 0.5, per_chain_w: 0.3 }
    }
}

impl PowerModel {
    /// Bits per joule of `a`: its total throughput over the power its active chains draw.
    pub fn bits_per_joule(&self, a: &Allocation) -> f64 {
        let w = self.static_w + self.per_chain_w * a.chains_used() as f64;
        if w > 0.0 { a.total_bps / w } else { 0.0 }
    }
}

#[cfg(test)]
mod tests;
