//! Greedy allocation: seed 001's Algorithm 1 and the one-to-one baseline.
//!
//! Algorithm 1 starts with nothing allocated and, while some triple still raises the total,
//! allocates the chain-beam-device triple `(r̃, b̃, ı̃)` with the largest gain
//! `Allocate(B̃ ∪ {b}, R̃ ∪ {r}, Ĩ ∪ {ı}) − Allocate(B̃, R̃, Ĩ)` (the total `Σ θ` of Eqs. 1-2
//! after and before), over free chains and beams and *every* device, so several chains may
//! serve one device (one-to-many). It stops when no chain or beam is free or no triple gains.
//!
//! Evaluating one candidate naively costs `O(|R|)` (the SNR of every stream allocated so far),
//! `|I|·|R|·|B|` candidates per step, `|R|` steps: Remark 1's `O(|I||R|³|B|)`. Cohort computes
//! the same gains faster, exactly: a new stream on beam `b` to device `k` adds its own `θ` and
//! lowers the `θ` of the streams of every other device `ı` by a loss that depends on `b` and `ı`
//! only, so each step computes the loss of every free beam at every served device once
//! (`O(|B|·|R|)`) and the gain of every (beam, device) from it (`O(|B|·|I|)`). Chains are
//! identical (see the module docs of [`super`]), so the free chain a triple names does not
//! change its gain: the lowest-numbered free chain is taken. A round is `O(|R|·|B|·(|I|+|R|))`.
//! Ties go to the lowest beam, then the lowest device.
//!
//! The one-to-one allocator (HEKATON's mapping, seed 001 §6.5) is the same greedy with each
//! device served by at most one chain.

use super::{Allocation, Channel, Stream};

/// Which devices a step may pick.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mapping {
    /// Seed 001: several chains may serve one device.
    OneToMany,
    /// HEKATON: a device gets at most one chain.
    OneToOne,
}

/// Reusable buffers of the greedy, so a scheduling round allocates nothing.
#[derive(Debug, Clone, Default)]
pub struct Greedy {
    /// Interference at each device from the streams of other devices, watts.
    interference: Vec<f64>,
    /// Streams allocated, their `θ`.
    streams: Vec<Stream>,
    theta: Vec<f64>,
    /// Served devices (distinct), and the loss of each free beam at each of them.
    served: Vec<usize>,
    loss: Vec<f64>,
    /// Free beams by their bound on the gain, highest first.
    order: Vec<(f64, usize)>,
    beam_free: Vec<bool>,
    device_served: Vec<bool>,
}

impl Greedy {
    pub fn new() -> Self {
        Self::default()
    }

    /// Runs Algorithm 1 (or its one-to-one variant) on `ch`.
    pub fn allocate(&mut self, ch: &Channel, mapping: Mapping) -> Allocation {
        self.run(ch, mapping);
        ch.evaluate_unchecked(&self.streams)
    }

    /// The streams of the last [`Greedy::allocate`] (or [`Greedy::run`]).
    pub fn streams(&self) -> &[Stream] {
        &self.streams
    }

    /// Algorithm 1 without building the [`Allocation`]: the streams are in
    /// [`Greedy::streams`], the total is returned.
    pub fn run(&mut self, ch: &Channel, mapping: Mapping) -> f64 {
        let (nb, ni) = (ch.beams, ch.devices);
        self.interference.clear();
        self.interference.resize(ni, 0.0);
        self.streams.clear();
        self.theta.clear();
        self.served.clear();
        self.beam_free.clear();
        self.beam_free.resize(nb, true);
        self.device_served.clear();
        self.device_served.resize(ni, false);
        let mut total = 0.0;
        for chain in 0..ch.chains.min(nb) {
            // A new stream's gain is at most its own `θ` (the loss it causes the others is ≥ 0
            // and its own device's part of that loss is not counted): beam `b`'s bound is the
            // best `θ` it could carry, to the device with the best SNR for it (`θ` grows with
            // the SNR: one logarithm per beam). Beams are examined from the highest bound down
            // and the search stops at the first bound below the best gain found: the same
            // triple as examining every one, far fewer logarithms.
            self.order.clear();
            for b in (0..nb).filter(|&b| self.beam_free[b]) {
                let snr = (0..ni)
                    .filter(|&k| mapping == Mapping::OneToMany || !self.device_served[k])
                    .map(|k| ch.signal_w(b, k) / (self.interference[k] + ch.noise_w))
                    .fold(f64::NEG_INFINITY, f64::max);
                if snr > f64::NEG_INFINITY {
                    self.order.push((ch.bandwidth_hz * snr.ln_1p() * std::f64::consts::LOG2_E, b));
                }
            }
            self.order.sort_unstable_by(|x, y| y.0.total_cmp(&x.0).then(x.1.cmp(&y.1)));
            let ns = self.served.len();
            self.loss.clear();
            self.loss.resize(ns, 0.0);
            let mut best: Option<(f64, usize, usize)> = None;
            for &(bound, b) in &self.order {
                if best.is_some_and(|(g, ..)| bound < g) {
                    break;
                }
                // The loss of beam `b` at each served device.
                for (s, &dev) in self.served.iter().enumerate() {
                    let extra = ch.crosstalk_w(b, dev);
                    let mut l = 0.0;
                    if extra > 0.0 {
                        let after = self.interference[dev] + extra;
                        for (st, &th) in self.streams.iter().zip(&self.theta) {
                            if st.device == dev {
                                l += th - ch.theta_bps(ch.signal_w(st.beam, dev), after);
                            }
                        }
                    }
                    self.loss[s] = l;
                }
                let loss_all: f64 = self.loss.iter().sum();
                for k in 0..ni {
                    if mapping == Mapping::OneToOne && self.device_served[k] {
                        continue;
                    }
                    // A stream to `k` does not interfere with `k`'s own streams.
                    let own = match self.device_served[k] {
                        true => self.served.iter().position(|&d| d == k).map_or(0.0, |s| self.loss[s]),
                        false => 0.0,
                    };
                    let gain = ch.theta_bps(ch.signal_w(b, k), self.interference[k]) - (loss_all - own);
                    let better = match best {
                        None => true,
                        Some((g, bb, bk)) => gain > g || (gain == g && (b, k) < (bb, bk)),
                    };
                    if better {
                        best = Some((gain, b, k));
                    }
                }
            }
            let Some((gain, b, k)) = best else { break };
            if gain <= 0.0 {
                break;
            }
            total += gain;
            self.beam_free[b] = false;
            if !self.device_served[k] {
                self.device_served[k] = true;
                self.served.push(k);
            }
            for (dev, i) in self.interference.iter_mut().enumerate() {
                if dev != k {
                    *i += ch.crosstalk_w(b, dev);
                }
            }
            self.streams.push(Stream { chain, beam: b, device: k });
            self.theta.push(0.0);
            for (st, th) in self.streams.iter().zip(self.theta.iter_mut()) {
                *th = ch.theta_bps(ch.signal_w(st.beam, st.device), self.interference[st.device]);
            }
        }
        total
    }
}

/// Algorithm 1 evaluated literally, as Remark 1 counts it: every step tries every free chain,
/// free beam and device, and evaluates Eqs. 1-2 over the whole allocation with that triple
/// added (`O(|I||R|³|B|)` a round, as `O(|R|)` streams each need `O(|R|)` crosstalk terms:
/// `O(|I||R|⁴|B|)` as written here). The reference [`Greedy`] is checked against, and
/// timed beside in `cohort bench beams`. Ties go to the lowest chain, beam, device.
pub fn literal(ch: &Channel, mapping: Mapping) -> Allocation {
    let mut streams: Vec<Stream> = Vec::new();
    let mut total = 0.0;
    loop {
        let mut best: Option<(f64, Stream)> = None;
        let chains: Vec<usize> = (0..ch.chains).filter(|&r| streams.iter().all(|s| s.chain != r)).collect();
        let beams: Vec<usize> = (0..ch.beams).filter(|&b| streams.iter().all(|s| s.beam != b)).collect();
        let devices: Vec<usize> = (0..ch.devices)
            .filter(|&i| mapping == Mapping::OneToMany || streams.iter().all(|s| s.device != i))
            .collect();
        for &chain in &chains {
            for &beam in &beams {
                for &device in &devices {
                    streams.push(Stream { chain, beam, device });
                    let gain = ch.evaluate_unchecked(&streams).total_bps - total;
                    let t = streams.pop().unwrap_or(Stream { chain, beam, device });
                    if best.is_none_or(|(g, _)| gain > g) {
                        best = Some((gain, t));
                    }
                }
            }
        }
        match best {
            Some((gain, t)) if gain > 0.0 => {
                streams.push(t);
                total = ch.evaluate_unchecked(&streams).total_bps;
            }
            _ => break,
        }
    }
    ch.evaluate_unchecked(&streams)
}

/// Algorithm 1 (one-to-many) on `ch`.
pub fn greedy(ch: &Channel) -> Allocation {
    Greedy::new().allocate(ch, Mapping::OneToMany)
}

/// The one-to-one baseline on `ch`.
pub fn one_to_one(ch: &Channel) -> Allocation {
    Greedy::new().allocate(ch, Mapping::OneToOne)
}
