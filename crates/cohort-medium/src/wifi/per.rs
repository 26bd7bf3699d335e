//! How much signal a PPDU needs over interference and noise to get through: the SINR at
//! which half of a PPDU's MPDUs of a given size are received, per modulation and coding,
//! as ns-3 3.44's default error model (`TableBasedErrorRateModel`, the AWGN tables of
//! IEEE 802.11 TGax with BCC, which `YansWifiPhyHelper` installs) gives it. The curves are
//! steep (10% to 90% success within about 1.5 dB for a 1500-byte MPDU), so a threshold at
//! the 50% point decides capture well; the model uses it for whole-frame capture at a
//! receiver ([`Medium::with_preamble_detection`](super::Medium::with_preamble_detection)).
//!
//! The table was sampled from ns-3's model (`ErrorRateModel::GetChunkSuccessRate` through
//! its Python bindings, 20 MHz, one spatial stream) by `scripts/ns3_per_thresholds.py`,
//! which prints it again. BPSK 3/4 (802.11a/g at 9 Mbit/s) has no table in ns-3; its row is
//! QPSK 3/4's less 3.01 dB (QPSK carries two BPSK streams at the same energy per bit).

use super::PhyKind;

/// MPDU sizes (bytes) at which the thresholds were sampled.
const SIZES: [f64; 5] = [14.0, 64.0, 256.0, 1024.0, 4096.0];

/// Data bits per subcarrier per symbol (bits per constellation point × code rate), and the
/// SINR (dB) at which half the MPDUs of each of [`SIZES`] get through.
const THRESHOLDS: [(f64, [f64; 5]); 11] = [
    (0.5, [-1.93, -0.96, -0.47, 0.18, 0.66]),          // BPSK 1/2
    (0.75, [0.61, 1.54, 2.03, 2.64, 3.16]),            // BPSK 3/4 (see the module's note)
    (1.0, [1.08, 2.07, 2.54, 3.17, 3.69]),             // QPSK 1/2
    (1.5, [3.62, 4.55, 5.04, 5.65, 6.17]),             // QPSK 3/4
    (2.0, [6.32, 7.42, 8.05, 8.77, 9.36]),             // 16-QAM 1/2
    (3.0, [9.51, 10.62, 11.13, 11.87, 12.44]),         // 16-QAM 3/4
    (4.0, [13.31, 14.55, 15.18, 16.04, 16.71]),        // 64-QAM 2/3
    (4.5, [14.64, 15.9, 16.57, 17.34, 17.99]),         // 64-QAM 3/4
    (5.0, [16.12, 17.34, 17.95, 18.64, 19.27]),        // 64-QAM 5/6
    (6.0, [19.59, 20.93, 21.65, 22.56, 23.32]),        // 256-QAM 3/4
    (20.0 / 3.0, [21.27, 22.53, 23.18, 24.08, 24.76]), // 256-QAM 5/6
];

/// Data subcarriers of an OFDM symbol: 48 for the non-HT rates, 52, 108, 234 or 468 for
/// HT/VHT in 20, 40, 80 or 160 MHz.
fn subcarriers(kind: PhyKind) -> &'static [f64] {
    match kind {
        PhyKind::Ofdm | PhyKind::ErpOfdm => &[48.0],
        PhyKind::Ht | PhyKind::Vht => &[52.0, 108.0, 234.0, 468.0],
        PhyKind::Dsss => &[],
    }
}

/// The SINR (dB) a PPDU at `mbps` on a `kind` PHY needs for half its MPDUs of `mpdu_bytes`
/// to be received; `None` where the table has no answer: DSSS, a short guard interval or
/// several spatial streams (rates that are no 4 µs-symbol, one-stream rate of the PHY).
/// Between sampled sizes the threshold is interpolated in the logarithm of the size; beyond
/// them it is held.
pub fn half_success_sinr_db(kind: PhyKind, mbps: f64, mpdu_bytes: usize) -> Option<f64> {
    let row = subcarriers(kind).iter().find_map(|&n| {
        let bits = mbps * 4.0 / n;
        THRESHOLDS.iter().find(|(b, _)| (bits / b - 1.0).abs() < 0.01)
    })?;
    let x = (mpdu_bytes.max(1) as f64).ln();
    let xs = SIZES.map(f64::ln);
    let ys = row.1;
    if x <= xs[0] {
        return Some(ys[0]);
    }
    for i in 1..xs.len() {
        if x <= xs[i] {
            let f = (x - xs[i - 1]) / (xs[i] - xs[i - 1]);
            return Some(ys[i - 1] + f * (ys[i] - ys[i - 1]));
        }
    }
    Some(ys[xs.len() - 1])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_one_stream_rate_has_a_threshold_that_grows_with_rate_and_size() {
        // 802.11a/g rates, HT MCS 0-7 in 20 and 40 MHz, VHT MCS 8 in 20 MHz and MCS 9 in 80.
        let ofdm = [6.0, 9.0, 12.0, 18.0, 24.0, 36.0, 48.0, 54.0];
        let ht20 = [6.5, 13.0, 19.5, 26.0, 39.0, 52.0, 58.5, 65.0];
        let ht40 = [13.5, 27.0, 40.5, 54.0, 81.0, 108.0, 121.5, 135.0];
        for (kind, rates) in [(PhyKind::Ofdm, &ofdm[..]), (PhyKind::Ht, &ht20[..]), (PhyKind::Ht, &ht40[..])] {
            let t: Vec<f64> = rates.iter().map(|&r| half_success_sinr_db(kind, r, 1500).unwrap()).collect();
            assert!(t.windows(2).all(|w| w[0] < w[1]), "{kind:?} {t:?}");
        }
        let vht8 = half_success_sinr_db(PhyKind::Vht, 78.0, 1500).unwrap();
        let vht9_80 = half_success_sinr_db(PhyKind::Vht, 390.0, 1500).unwrap();
        assert!(vht8 < vht9_80 && vht9_80 > 22.0, "{vht8} {vht9_80}");
        let sizes: Vec<f64> = [1, 14, 100, 1500, 4096, 65_535]
            .iter()
            .map(|&b| half_success_sinr_db(PhyKind::Ht, 65.0, b).unwrap())
            .collect();
        assert!(sizes.windows(2).all(|w| w[0] <= w[1]), "{sizes:?}");
        // ns-3's 50% point for a 1500-byte MPDU at HT MCS 7 lies between 18 and 19 dB.
        assert!((18.0..19.0).contains(&half_success_sinr_db(PhyKind::Ht, 65.0, 1538).unwrap()));
    }

    #[test]
    fn rates_outside_the_table_have_no_threshold() {
        assert_eq!(half_success_sinr_db(PhyKind::Dsss, 11.0, 1500), None);
        // HT MCS 7 with the short guard interval, and two spatial streams of MCS 7 (130).
        assert_eq!(half_success_sinr_db(PhyKind::Ht, 72.2, 1500), None);
        assert_eq!(half_success_sinr_db(PhyKind::Ht, 130.0, 1500), None);
    }
}
