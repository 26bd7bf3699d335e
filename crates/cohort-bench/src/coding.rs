//! `cohort bench coding`: GF(2^8) kernel throughput, sliding-window encode/decode throughput on
//! a lossy stream, and the `rlnc` crate's block decoder on the same amount of data.
//!
//! Units: `*_gbps` are gigabits per second of source data processed (for `axpy`, of the
//! source operand). Each figure is the median over repetitions run for at least
//! `min_time_ms`, after one warm-up repetition; `spread` gives each one's repetitions and the
//! 2.5-97.5% range of their throughputs, and `ratio_ranges` the range of each ratio those
//! admit (numerator's low over denominator's high to high over low).

use crate::progress::{Plan, Step};
use crate::stats::{gbps, median, quantile, round, time_reps};
use cohort_coding::gf256::Kernel;
use cohort_coding::{CoderConfig, Decoder, Encoder, RepairInfo};
use rand::{Rng, RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;
use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

/// What to run (reported back in the JSON as `params`).
#[derive(Debug, Clone, Serialize)]
pub struct CodingParams {
    pub symbol_size: usize,
    pub window: usize,
    pub loss: f64,
    /// One packet in `repair_every` is a repair (5 → 25% redundancy over the source rate).
    pub repair_every: u64,
    /// Packets between the decoder's feedback and its arrival at the encoder.
    pub ack_lag: usize,
    /// Source symbols in the stream.
    pub symbols: u64,
    pub seed: u64,
    /// Minimum measuring time per figure; one warm-up repetition precedes it.
    #[serde(rename = "min_time_ms", serialize_with = "millis")]
    pub min_time: Duration,
}

fn millis<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_u128(d.as_millis())
}

impl Default for CodingParams {
    fn default() -> Self {
        CodingParams {
            symbol_size: 1200,
            window: 64,
            loss: 0.10,
            repair_every: 5,
            ack_lag: 8,
            symbols: 6_400,
            seed: 1,
            min_time: Duration::from_millis(500),
        }
    }
}

/// The report `cohort bench coding --json` prints.
#[derive(Debug, Serialize)]
pub struct CodingReport {
    pub kernel: String,
    pub axpy_scalar_gbps: f64,
    pub axpy_simd_gbps: f64,
    pub axpy_simd_over_scalar: f64,
    /// Every available kernel's `axpy` and fused 64-source `combine` throughput.
    pub kernels: BTreeMap<String, KernelFigures>,
    pub encode_gbps_w64: f64,
    pub decode_gbps_w64: f64,
    pub rlnc_crate_decode_gbps_k64: f64,
    pub decode_vs_rlnc_ratio: f64,
    /// Our decoder on the rlnc crate's own terms: 64 source symbols received only as repair
    /// symbols (no systematic copies), i.e. a full 64x64 elimination.
    pub block_decode_gbps_k64: f64,
    pub block_decode_vs_rlnc_ratio: f64,
    /// Each figure above: its repetitions and the range of their throughputs.
    pub spread: BTreeMap<&'static str, Spread>,
    /// Each ratio above: the lowest and highest the figures' ranges admit.
    pub ratio_ranges: BTreeMap<&'static str, [f64; 2]>,
    pub stream: StreamFigures,
    pub params: CodingParams,
    pub command: String,
}

#[derive(Debug, Serialize)]
pub struct KernelFigures {
    pub axpy_gbps: f64,
    pub combine64_gbps: f64,
    #[serde(skip)]
    axpy: Timed,
}

/// A throughput figure's repetitions and the 2.5-97.5% range of their throughputs.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Spread {
    pub reps: usize,
    pub low_gbps: f64,
    pub high_gbps: f64,
}

/// The median throughput of timed repetitions and their spread.
#[derive(Debug, Clone, Copy, Default)]
struct Timed {
    gbps: f64,
    spread: Spread,
}

impl Timed {
    /// Repetitions `t` that each processed `bytes`.
    fn of(bytes: usize, mut t: Vec<Duration>) -> Timed {
        let mut g: Vec<f64> = t.iter().map(|&d| gbps(bytes, d)).collect();
        g.sort_by(f64::total_cmp);
        let spread =
            Spread { reps: g.len(), low_gbps: round(quantile(&g, 0.025), 3), high_gbps: round(quantile(&g, 0.975), 3) };
        Timed { gbps: gbps(bytes, median(&mut t)), spread }
    }

    /// `self / other` and the range of that ratio their spreads admit.
    fn over(&self, other: &Timed) -> (f64, [f64; 2]) {
        let (a, b) = (self.spread, other.spread);
        let r = |x: f64, y: f64| round(x / y.max(1e-9), 2);
        (r(self.gbps, other.gbps), [r(a.low_gbps, b.high_gbps), r(a.high_gbps, b.low_gbps)])
    }
}

/// What happened on the lossy stream the encode/decode figures were measured on.
#[derive(Debug, Serialize)]
pub struct StreamFigures {
    pub packets_sent: u64,
    pub packets_lost: u64,
    pub repairs_sent: u64,
    pub sources_lost: u64,
    pub recovered: u64,
    pub released_in_order: u64,
}

fn random_bytes(rng: &mut ChaCha8Rng, n: usize) -> Vec<u8> {
    let mut v = vec![0u8; n];
    rng.fill_bytes(&mut v);
    v
}

fn kernel_figures(k: Kernel, p: &CodingParams, rng: &mut ChaCha8Rng) -> KernelFigures {
    let n = p.symbol_size;
    let src = random_bytes(rng, n);
    let mut dst = random_bytes(rng, n);
    const INNER: usize = 256;
    let t = time_reps(p.min_time / 4, 5, || {
        for c in 0..INNER {
            k.axpy(&mut dst, (c as u8) | 2, &src);
        }
    });
    let axpy = Timed::of(n * INNER, t);
    let srcs: Vec<Vec<u8>> = (0..64).map(|_| random_bytes(rng, n)).collect();
    let terms: Vec<(u8, &[u8])> = srcs.iter().enumerate().map(|(i, s)| (i as u8 | 2, &s[..])).collect();
    let mut t = time_reps(p.min_time / 4, 5, || {
        for _ in 0..INNER / 16 {
            k.combine(&mut dst, &terms);
        }
    });
    let combine = gbps(n * 64 * (INNER / 16), median(&mut t));
    KernelFigures { axpy_gbps: round(axpy.gbps, 2), combine64_gbps: round(combine, 2), axpy }
}

#[derive(Debug, Clone, Copy)]
enum Action {
    Push(u64),
    Repair,
    /// Nothing to send: every source symbol is acknowledged but not yet released.
    Idle,
}

/// A recorded lossy stream: what the encoder did at each step, the feedback it got, and the
/// packets that reached the decoder. Replaying it times encoder and decoder separately.
struct Trace {
    steps: Vec<(Option<(u64, u64)>, Action)>,
    received: Vec<(Option<RepairInfo>, u64, Vec<u8>)>,
    stream: StreamFigures,
}

fn record(p: &CodingParams, data: &[Vec<u8>]) -> Trace {
    let cfg = CoderConfig { symbol_size: p.symbol_size, max_window: p.window };
    let mut enc = Encoder::new(cfg).expect("valid config");
    let mut dec = Decoder::new(cfg).expect("valid config");
    let mut rng = ChaCha8Rng::seed_from_u64(p.seed ^ 0x5EED);
    let mut feedback: VecDeque<(u64, u64)> = VecDeque::new();
    let mut pending_ack = None;
    let mut steps = Vec::new();
    let mut received = Vec::new();
    let mut s = StreamFigures {
        packets_sent: 0,
        packets_lost: 0,
        repairs_sent: 0,
        sources_lost: 0,
        recovered: 0,
        released_in_order: 0,
    };
    let mut buf = vec![0u8; p.symbol_size];
    let mut step = 0u64;
    while dec.stats().released < p.symbols && step < 100 * p.symbols {
        step += 1;
        if let Some((seen, rel)) = pending_ack {
            enc.ack(seen, rel);
        }
        let want_repair = step.is_multiple_of(p.repair_every);
        let action = if enc.rank() < p.symbols && !enc.is_full() && !want_repair {
            Action::Push(enc.push(&data[enc.rank() as usize]).expect("room checked"))
        } else if !enc.window().is_empty() {
            Action::Repair
        } else {
            steps.push((pending_ack.take(), Action::Idle));
            feedback.push_back((dec.seen(), dec.next_release()));
            pending_ack = (feedback.len() > p.ack_lag).then(|| feedback.pop_front()).flatten();
            continue;
        };
        steps.push((pending_ack.take(), action));
        let lost = rng.random_bool(p.loss);
        s.packets_sent += 1;
        s.packets_lost += u64::from(lost);
        match action {
            Action::Idle => {}
            Action::Push(i) => {
                s.sources_lost += u64::from(lost);
                if !lost {
                    dec.push_source(i, &data[i as usize]).expect("valid source");
                    received.push((None, i, data[i as usize].clone()));
                }
            }
            Action::Repair => {
                s.repairs_sent += 1;
                let info = enc.repair(&mut buf).expect("window not empty");
                if !lost {
                    dec.push_repair(info, &buf).expect("valid repair");
                    received.push((Some(info), 0, buf.clone()));
                }
            }
        }
        while let Some((i, sym)) = dec.pop() {
            assert_eq!(sym, &data[i as usize][..], "decoded symbol {i} differs from the source");
        }
        feedback.push_back((dec.seen(), dec.next_release()));
        pending_ack = (feedback.len() > p.ack_lag).then(|| feedback.pop_front()).flatten();
    }
    s.recovered = dec.stats().recovered;
    s.released_in_order = dec.stats().released;
    Trace { steps, received, stream: s }
}

fn replay_encoder(p: &CodingParams, data: &[Vec<u8>], trace: &Trace) {
    let cfg = CoderConfig { symbol_size: p.symbol_size, max_window: p.window };
    let mut enc = Encoder::new(cfg).expect("valid config");
    let mut buf = vec![0u8; p.symbol_size];
    for &(ack, action) in &trace.steps {
        if let Some((seen, rel)) = ack {
            enc.ack(seen, rel);
        }
        match action {
            Action::Push(i) => {
                enc.push(&data[i as usize]).expect("as recorded");
            }
            Action::Repair => {
                enc.repair(&mut buf).expect("as recorded");
            }
            Action::Idle => {}
        }
    }
}

fn replay_decoder(p: &CodingParams, trace: &Trace) -> u64 {
    let cfg = CoderConfig { symbol_size: p.symbol_size, max_window: p.window };
    let mut dec = Decoder::new(cfg).expect("valid config");
    let mut released = 0;
    for (info, i, payload) in &trace.received {
        match info {
            Some(info) => dec.push_repair(*info, payload).expect("as recorded"),
            None => dec.push_source(*i, payload).expect("as recorded"),
        };
        while dec.pop().is_some() {
            released += 1;
        }
    }
    released
}

/// The `rlnc` crate's decoder on one 64-piece generation of the same total size.
fn rlnc_decode(p: &CodingParams, rng: &mut ChaCha8Rng) -> Timed {
    const K: usize = 64;
    let data = random_bytes(rng, K * p.symbol_size);
    let enc = rlnc::full::Encoder::new(data, K).expect("valid generation");
    let pieces: Vec<Vec<u8>> = (0..K + 16).map(|_| enc.code(rng)).collect();
    let piece_len = enc.get_piece_byte_len();
    let t = time_reps(p.min_time, 3, || {
        let mut d = rlnc::full::Decoder::new(piece_len, K).expect("valid decoder");
        for piece in &pieces {
            if d.is_already_decoded() {
                break;
            }
            let _ = d.decode(piece);
        }
        assert!(d.is_already_decoded(), "rlnc: 80 random pieces did not reach full rank");
    });
    Timed::of(K * p.symbol_size, t)
}

/// Our decoder given a 64-symbol window only through repair symbols: the worst case for it
/// and the rlnc crate's normal case.
fn block_decode(p: &CodingParams, rng: &mut ChaCha8Rng) -> Timed {
    const K: usize = 64;
    let cfg = CoderConfig { symbol_size: p.symbol_size, max_window: K };
    let mut enc = Encoder::new(cfg).expect("valid config");
    for _ in 0..K {
        enc.push(&random_bytes(rng, p.symbol_size)).expect("room for one window");
    }
    let repairs: Vec<(RepairInfo, Vec<u8>)> = (0..K + 16)
        .map(|_| {
            let mut buf = vec![0u8; p.symbol_size];
            (enc.repair(&mut buf).expect("window not empty"), buf)
        })
        .collect();
    let t = time_reps(p.min_time, 3, || {
        let mut dec = Decoder::new(cfg).expect("valid config");
        let mut released = 0;
        for (info, payload) in &repairs {
            dec.push_repair(*info, payload).expect("valid repair");
            while dec.pop().is_some() {
                released += 1;
            }
            if released == K {
                break;
            }
        }
        assert_eq!(released, K, "80 repairs did not decode 64 symbols");
    });
    Timed::of(K * p.symbol_size, t)
}

/// Runs the coding benchmark.
pub fn run(p: &CodingParams, progress: impl FnMut(&Step)) -> CodingReport {
    let mut rng = ChaCha8Rng::seed_from_u64(p.seed);
    let mut kernels = BTreeMap::new();
    // Each kernel, then encoding, decoding, the `rlnc` crate and the block decoder.
    let mut plan = Plan::new(Kernel::available().len() as u64 + 4, progress);
    for k in Kernel::available() {
        plan.begin(&format!("kernel {k}"));
        kernels.insert(k.to_string(), kernel_figures(k, p, &mut rng));
    }
    let best = Kernel::best();
    let scalar = kernels[&Kernel::SCALAR.to_string()].axpy;
    let simd = kernels[&best.to_string()].axpy;

    let data: Vec<Vec<u8>> = (0..p.symbols).map(|_| random_bytes(&mut rng, p.symbol_size)).collect();
    let trace = record(p, &data);
    let bytes = p.symbols as usize * p.symbol_size;
    plan.begin("sliding-window encoder");
    let encode = Timed::of(bytes, time_reps(p.min_time, 3, || replay_encoder(p, &data, &trace)));
    plan.begin("sliding-window decoder");
    let td = time_reps(p.min_time, 3, || {
        assert_eq!(replay_decoder(p, &trace), p.symbols, "replayed decoder released everything");
    });
    let decode = Timed::of(bytes, td);
    plan.begin("the rlnc crate's decoder");
    let rlnc = rlnc_decode(p, &mut rng);
    plan.begin("block decoder");
    let block = block_decode(p, &mut rng);
    plan.finish();
    let (simd_over_scalar, simd_range) = simd.over(&scalar);
    let (decode_over_rlnc, decode_range) = decode.over(&rlnc);
    let (block_over_rlnc, block_range) = block.over(&rlnc);
    let spread = [
        ("axpy_scalar_gbps", scalar),
        ("axpy_simd_gbps", simd),
        ("encode_gbps_w64", encode),
        ("decode_gbps_w64", decode),
        ("rlnc_crate_decode_gbps_k64", rlnc),
        ("block_decode_gbps_k64", block),
    ]
    .into_iter()
    .map(|(k, t)| (k, t.spread))
    .collect();
    let ratio_ranges = [
        ("axpy_simd_over_scalar", simd_range),
        ("decode_vs_rlnc_ratio", decode_range),
        ("block_decode_vs_rlnc_ratio", block_range),
    ]
    .into_iter()
    .collect();

    CodingReport {
        kernel: best.to_string(),
        axpy_scalar_gbps: round(scalar.gbps, 2),
        axpy_simd_gbps: round(simd.gbps, 2),
        axpy_simd_over_scalar: simd_over_scalar,
        kernels,
        encode_gbps_w64: round(encode.gbps, 3),
        decode_gbps_w64: round(decode.gbps, 3),
        rlnc_crate_decode_gbps_k64: round(rlnc.gbps, 3),
        decode_vs_rlnc_ratio: decode_over_rlnc,
        block_decode_gbps_k64: round(block.gbps, 3),
        block_decode_vs_rlnc_ratio: block_over_rlnc,
        spread,
        ratio_ranges,
        stream: trace.stream,
        params: p.clone(),
        command: format!("cohort bench coding --json --seed {}", p.seed),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tiny_run_reports_every_figure() {
        let p = CodingParams { symbols: 300, min_time: Duration::from_millis(1), ..CodingParams::default() };
        let mut steps = Vec::new();
        let r = run(&p, crate::progress::recorder(&mut steps));
        crate::progress::assert_followed_plan(&steps);
        assert_eq!(r.stream.released_in_order, 300);
        assert!(r.stream.packets_lost > 0 && r.stream.recovered > 0);
        let v = serde_json::to_value(&r).unwrap();
        for key in [
            "axpy_scalar_gbps",
            "axpy_simd_gbps",
            "encode_gbps_w64",
            "decode_gbps_w64",
            "rlnc_crate_decode_gbps_k64",
            "decode_vs_rlnc_ratio",
        ] {
            assert!(v[key].as_f64().is_some_and(|x| x > 0.0), "{key} missing or zero");
        }
        for (key, s) in &r.spread {
            assert!(s.reps >= 3 && s.low_gbps > 0.0 && s.low_gbps <= s.high_gbps, "{key}: {s:?}");
            // The figures are rounded to 0.01 at most.
            let x = v[key].as_f64().unwrap();
            assert!(s.low_gbps <= x + 0.01 && x <= s.high_gbps + 0.01, "{key}: {x} outside {s:?}");
        }
        for (key, [lo, hi]) in &r.ratio_ranges {
            let x = v[key].as_f64().unwrap();
            assert!(*lo <= x + 0.01 && x <= *hi + 0.01, "{key}: {x} outside [{lo}, {hi}]");
        }
    }
}
