use super::alloc::{Greedy, Mapping, greedy, literal, one_to_one};
use super::exact::{brute_force, optimum};
use super::*;
use proptest::prelude::*;

/// 2 beams × 2 devices, 1 Hz, 1 W of noise: `θ` in bit/s is the spectral efficiency.
fn hand(signal: [f64; 4], crosstalk: [f64; 4]) -> Channel {
    Channel::from_matrices(2, 2, 1.0, 1.0, signal.to_vec(), crosstalk.to_vec()).unwrap()
}

/// Beam 0 reaches device 0 (15 W), beam 1 both (3 W at 0, 7 W at 1). Two streams to device 0
/// (no crosstalk between them) give log2(16) + log2(4) = 6; splitting the beams between the
/// devices gives log2(1 + 15/4) + log2(8) = 5.248; the one-to-one baseline can only do that.
#[test]
fn a_hand_computed_instance() {
    let s = [15.0, 0.0, 3.0, 7.0];
    let ch = hand(s, s);
    let g = greedy(&ch);
    assert!((g.total_bps - 6.0).abs() < 1e-9, "{g:?}");
    assert_eq!(g.streams.iter().map(|s| s.device).collect::<Vec<_>>(), vec![0, 0]);
    assert!((g.device_bps[0] - 6.0).abs() < 1e-9);
    let o = one_to_one(&ch);
    let split = 4.75f64.log2() + 3.0;
    assert!((o.total_bps - split).abs() < 1e-9, "{o:?}");
    for m in [Mapping::OneToMany, Mapping::OneToOne] {
        let (best, _) = optimum(&ch, m).unwrap();
        assert!((best.total_bps - brute_force(&ch, m).total_bps).abs() < 1e-9);
    }
    assert!((optimum(&ch, Mapping::OneToMany).unwrap().0.total_bps - 6.0).abs() < 1e-9);
}

/// A second stream whose crosstalk costs more than it carries is not allocated: Algorithm 1
/// stops when no triple gains, chains left idle.
#[test]
fn the_greedy_stops_when_nothing_gains() {
    let ch = hand([15.0, 0.0, 0.0, 1.0], [15.0, 0.0, 15.0, 1.0]);
    let g = greedy(&ch);
    assert_eq!(g.streams, vec![Stream { chain: 0, beam: 0, device: 0 }]);
    assert!((g.total_bps - 4.0).abs() < 1e-12);
    assert_eq!(optimum(&ch, Mapping::OneToMany).unwrap().0.total_bps, 4.0);
}

/// Eqs. 1-2 by hand: the SNR is the signal over the other device's crosstalk plus noise.
#[test]
fn evaluation_follows_eqs_1_and_2() {
    let ch = hand([15.0, 0.0, 3.0, 7.0], [15.0, 1.0, 3.0, 7.0]);
    let a = ch.evaluate(&[Stream { chain: 1, beam: 0, device: 0 }, Stream { chain: 0, beam: 1, device: 1 }]).unwrap();
    assert!((a.snr[0] - 15.0 / 4.0).abs() < 1e-12);
    assert!((a.snr[1] - 7.0 / 2.0).abs() < 1e-12);
    assert!((a.total_bps - (4.75f64.log2() + 4.5f64.log2())).abs() < 1e-12);
    for bad in [
        vec![Stream { chain: 2, beam: 0, device: 0 }],
        vec![Stream { chain: 0, beam: 0, device: 2 }],
        vec![Stream { chain: 0, beam: 0, device: 0 }, Stream { chain: 0, beam: 1, device: 1 }],
        vec![Stream { chain: 0, beam: 1, device: 0 }, Stream { chain: 1, beam: 1, device: 1 }],
    ] {
        assert!(matches!(ch.evaluate(&bad), Err(BeamsError::Stream { .. })), "{bad:?}");
    }
}

#[test]
fn the_codebook_is_a_linear_array() {
    let ap = ApConfig::new(Band::G60, 2, 8);
    for b in 0..8 {
        // Peak gain N along each beam's steering direction.
        assert!((ap.gain(b, ap.steering_rad(b)) - 16.0).abs() < 1e-9);
    }
    assert!((ap.steering_rad(0) + ap.sector_rad).abs() < 1e-12);
    // Behind the array and in the nulls: the floor (20 dB below the peak).
    assert!((ap.gain(3, 3.0) - 0.16).abs() < 1e-12);
    assert!(ap.gain(0, ap.steering_rad(7)) >= 0.16 - 1e-12);
    // The first side lobe of a 16-element ULA is about 13 dB down.
    let lobe = (0..2000).map(|k| ap.gain(4, ap.steering_rad(4) + 0.14 + k as f64 * 1e-4)).fold(0.0, f64::max);
    assert!((10.0 * (16.0 / lobe).log10() - 13.2).abs() < 0.5, "{lobe}");
    // The 5 GHz array's beams are wider than the 60 GHz one's.
    let five = ApConfig::new(Band::G5, 2, 8);
    assert!(five.gain(4, five.steering_rad(4) + 0.15) / 4.0 > ap.gain(4, ap.steering_rad(4) + 0.15) / 16.0);
}

#[test]
fn link_budgets_are_plausible() {
    // 60 GHz at 10 m on the beam's axis: 10 dBm + 12 dBi − 88 dB = −66 dBm over −70.7 dBm of
    // noise: ~5 dB SNR, ~4 Gbit/s of Shannon over 2.16 GHz.
    let ap = ApConfig::new(Band::G60, 1, 1);
    let ch = Channel::new(&ap, &[(10.0, 0.0)]).unwrap();
    let snr_db = 10.0 * (ch.signal_w(0, 0) / ch.noise_w).log10();
    assert!((snr_db - 4.6).abs() < 0.5, "{snr_db}");
    let five = Channel::new(&ApConfig::new(Band::G5, 1, 1), &[(10.0, 0.0)]).unwrap();
    let th = five.theta_alone_bps(0, 0);
    assert!((th / 1e6 - 1000.0).abs() < 300.0, "{th}");
}

#[test]
fn bad_configs_are_typed_errors() {
    let ok = ApConfig::new(Band::G5, 2, 4);
    assert!(ok.validate().is_ok());
    type Edit = Box<dyn Fn(&mut ApConfig)>;
    let cases: Vec<Edit> = vec![
        Box::new(|a| a.chains = 0),
        Box::new(|a| a.beams = 0),
        Box::new(|a| a.elements = 0),
        Box::new(|a| a.beams = MAX_BEAMS + 1),
        Box::new(|a| a.x = f64::NAN),
        Box::new(|a| a.tx_dbm = f64::INFINITY),
        Box::new(|a| a.bandwidth_hz = 0.0),
        Box::new(|a| a.sector_rad = 2.0),
        Box::new(|a| a.path_loss_exponent = -1.0),
        Box::new(|a| a.isolation_db = -3.0),
    ];
    for f in cases {
        let mut a = ok.clone();
        f(&mut a);
        assert!(a.validate().is_err(), "{a:?}");
        assert!(Channel::new(&a, &[(1.0, 1.0)]).is_err());
    }
    assert!(Channel::new(&ok, &[(f64::NAN, 0.0)]).is_err());
    assert!(Channel::new(&ok, &[(1e300, 0.0)]).is_err());
    assert!(matches!(
        Channel::from_matrices(1, 2, 1.0, 1.0, vec![1.0; 3], vec![1.0; 3]),
        Err(BeamsError::Shape { devices: 2, signal: 3, crosstalk: 3 })
    ));
    assert!(Channel::from_matrices(1, 1, 1.0, 1.0, vec![1.0; 2], vec![1.0; 3]).is_err());
    assert!(Channel::from_matrices(1, 1, 1.0, 0.0, vec![1.0], vec![1.0]).is_err());
    assert!(Channel::from_matrices(1, 1, 1.0, 1.0, vec![-1.0], vec![1.0]).is_err());
    let big = Channel::new(&ApConfig::new(Band::G60, 8, 8), &[(5.0, 0.0)]).unwrap();
    assert!(matches!(optimum(&big, Mapping::OneToMany), Err(BeamsError::TooMany { .. })));
}

#[test]
fn energy_efficiency_counts_active_chains() {
    let s = [15.0, 0.0, 3.0, 7.0];
    let g = greedy(&hand(s, s));
    let p = PowerModel::default();
    assert!((p.bits_per_joule(&g) - 6.0 / 1.1).abs() < 1e-12);
}

/// A small random instance: an access point of `band` at the origin and devices within 30 m
/// in front of it.
fn instance() -> impl Strategy<Value = Channel> {
    (any::<bool>(), 1usize..=3, 1usize..=6, prop::collection::vec((1.0f64..30.0, -1.4f64..1.4), 1..=4)).prop_map(
        |(sixty, chains, beams, devs)| {
            let ap = ApConfig::new(if sixty { Band::G60 } else { Band::G5 }, chains, beams);
            let pos: Vec<(f64, f64)> = devs.iter().map(|&(d, a)| (d * a.cos(), d * a.sin())).collect();
            Channel::new(&ap, &pos).unwrap()
        },
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Every allocation is valid (no chain or beam twice, within range), the greedy's running
    /// total is the evaluated one, greedy ≤ optimum, one-to-one ≤ one-to-many at the optimum,
    /// and the ILP's optimum is the brute force's.
    #[test]
    fn allocations_are_valid_and_ordered(ch in instance()) {
        let mut g = Greedy::new();
        let total = g.run(&ch, Mapping::OneToMany);
        let a = ch.evaluate(g.streams()).unwrap();
        prop_assert!((a.total_bps - total).abs() <= 1e-6 * total.max(1.0));
        let o = ch.evaluate(&one_to_one(&ch).streams).unwrap();
        let mut devs: Vec<usize> = o.streams.iter().map(|s| s.device).collect();
        devs.dedup();
        devs.sort_unstable();
        devs.dedup();
        prop_assert_eq!(devs.len(), o.streams.len());
        let (best, _) = optimum(&ch, Mapping::OneToMany).unwrap();
        let (best1, _) = optimum(&ch, Mapping::OneToOne).unwrap();
        ch.evaluate(&best.streams).unwrap();
        let tol = 1e-9 * best.total_bps.max(1.0);
        prop_assert!(a.total_bps <= best.total_bps + tol);
        prop_assert!(o.total_bps <= best1.total_bps + tol);
        prop_assert!(best1.total_bps <= best.total_bps + tol);
        prop_assert!((best.total_bps - brute_force(&ch, Mapping::OneToMany).total_bps).abs() <= tol);
        prop_assert!((best1.total_bps - brute_force(&ch, Mapping::OneToOne).total_bps).abs() <= tol);
        prop_assert!(a.streams.len() <= ch.chains.min(ch.beams));
    }

    /// The fast greedy picks what Algorithm 1 evaluated literally picks (same beams and
    /// devices in the same order; chains are interchangeable), on larger instances too.
    #[test]
    fn the_fast_greedy_is_algorithm_1(ch in instance(), wide in prop::collection::vec((1.0f64..60.0, -1.5f64..1.5), 1..=9), sixty: bool) {
        let ap = ApConfig::new(if sixty { Band::G60 } else { Band::G5 }, 4, 12);
        let pos: Vec<(f64, f64)> = wide.iter().map(|&(d, a)| (d * a.cos(), d * a.sin())).collect();
        for c in [ch, Channel::new(&ap, &pos).unwrap()] {
            for m in [Mapping::OneToMany, Mapping::OneToOne] {
                let fast = Greedy::new().allocate(&c, m);
                let slow = literal(&c, m);
                let key = |a: &Allocation| a.streams.iter().map(|s| (s.beam, s.device)).collect::<Vec<_>>();
                prop_assert_eq!(key(&fast), key(&slow));
                prop_assert!((fast.total_bps - slow.total_bps).abs() <= 1e-9 * slow.total_bps.max(1.0));
            }
        }
    }
}
