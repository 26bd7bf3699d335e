use super::tables::{AFFINE, MUL, NIB, mul_slow};
use super::*;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Independent reference: multiplication through discrete logs with generator 2, built here
/// from repeated doubling rather than from the tables under test.
fn log_exp() -> ([u8; 256], [u8; 255]) {
    let mut exp = [0u8; 255];
    let mut log = [0u8; 256];
    let mut x: u16 = 1;
    for (i, e) in exp.iter_mut().enumerate() {
        *e = x as u8;
        log[x as usize] = i as u8;
        x <<= 1;
        if x & 0x100 != 0 {
            x ^= 0x11D;
        }
    }
    (log, exp)
}

#[test]
fn all_products_match_log_exp_reference() {
    let (log, exp) = log_exp();
    for a in 0..=255u8 {
        for b in 0..=255u8 {
            let want =
                if a == 0 || b == 0 { 0 } else { exp[(log[a as usize] as usize + log[b as usize] as usize) % 255] };
            assert_eq!(mul(a, b), want, "{a} * {b}");
            assert_eq!(mul_slow(a, b), want);
        }
    }
}

#[test]
fn rfc_polynomial_and_inverses() {
    assert_eq!(mul(0x80, 0x02), 0x1D, "x^8 reduces by 0x11D");
    assert_eq!(inv(0), None);
    assert_eq!(div(5, 0), None);
    for a in 1..=255u8 {
        assert_eq!(mul(a, inv(a).unwrap()), 1);
        assert_eq!(div(mul(a, 77), 77), Some(a));
    }
}

#[test]
fn nibble_and_affine_tables_agree_with_products() {
    for c in 0..=255usize {
        for x in 0..=255usize {
            let want = MUL[c][x];
            assert_eq!(NIB[c][x & 15] ^ NIB[c][16 + (x >> 4)], want);
            // Apply the affine matrix the way GF2P8AFFINEQB does.
            let m = AFFINE[c];
            let mut got = 0u8;
            for i in 0..8 {
                let row = (m >> (8 * (7 - i))) as u8;
                got |= (((row & x as u8).count_ones() & 1) as u8) << i;
            }
            assert_eq!(got, want, "affine c={c} x={x}");
        }
    }
}

#[test]
fn at_least_scalar_and_best_are_available() {
    let all = Kernel::available();
    assert_eq!(all[0], Kernel::SCALAR);
    assert!(all.contains(&Kernel::best()));
}

fn random_bytes(rng: &mut ChaCha8Rng, n: usize) -> Vec<u8> {
    (0..n).map(|_| rng.random()).collect()
}

/// Every kernel against the scalar kernel, every length 0..=4096, at odd offsets inside larger
/// buffers so that unaligned heads and every tail length are exercised.
#[test]
fn every_kernel_matches_scalar_for_every_length_and_alignment() {
    let mut rng = ChaCha8Rng::seed_from_u64(0xC0DE);
    let src_all = random_bytes(&mut rng, 4096 + 16);
    let dst_all = random_bytes(&mut rng, 4096 + 16);
    for k in Kernel::available() {
        for len in 0..=4096usize {
            let c: u8 = rng.random();
            let so = rng.random_range(0..8);
            let d_off = rng.random_range(0..8);
            let src = &src_all[so..so + len];
            let mut want = dst_all[d_off..d_off + len].to_vec();
            let mut got_buf = dst_all.clone();
            let got = &mut got_buf[d_off..d_off + len];
            Kernel::SCALAR.axpy(&mut want, c, src);
            k.axpy(got, c, src);
            assert_eq!(got, &want[..], "{k} axpy len={len} c={c} offsets=({so},{d_off})");

            let mut ws = src.to_vec();
            let mut gs = src_all.clone();
            Kernel::SCALAR.scale(&mut ws, c);
            k.scale(&mut gs[so..so + len], c);
            assert_eq!(&gs[so..so + len], &ws[..], "{k} scale len={len}");
        }
    }
}

#[test]
fn every_kernel_combine_matches_sum_of_axpys() {
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    for k in Kernel::available() {
        for &len in &[0usize, 1, 15, 16, 17, 31, 33, 63, 64, 65, 127, 1200, 1201, 4096] {
            for &nsrc in &[0usize, 1, 2, 3, 8, 64] {
                let srcs: Vec<Vec<u8>> = (0..nsrc).map(|_| random_bytes(&mut rng, len + 3)).collect();
                let coefs: Vec<u8> = (0..nsrc).map(|_| rng.random()).collect();
                let terms: Vec<(u8, &[u8])> = coefs.iter().zip(&srcs).map(|(&c, s)| (c, &s[3..])).collect();
                let base = random_bytes(&mut rng, len);
                let mut want = base.clone();
                for &(c, s) in &terms {
                    Kernel::SCALAR.axpy(&mut want, c, s);
                }
                let mut got = base.clone();
                k.combine(&mut got, &terms);
                assert_eq!(got, want, "{k} combine len={len} n={nsrc}");
            }
        }
    }
}

#[test]
#[should_panic(expected = "lengths differ")]
fn mismatched_lengths_are_a_programming_error() {
    Kernel::best().axpy(&mut [0u8; 4], 3, &[0u8; 5]);
}
