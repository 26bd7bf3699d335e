//! RFC 8682 TinyMT32 and the RFC 8681 coding-coefficient generator.
//!
//! A repair symbol names its coefficients with a 16-bit *repair key*: both ends seed TinyMT32
//! (the 127-bit Mersenne-Twister variant with the parameter set RFC 8682 mandates) with the key
//! and draw the coefficients in the order RFC 8681 §3.6 specifies, so only the key travels.

const MAT1: u32 = 0x8f70_11ee;
const MAT2: u32 = 0xfc78_ff1f;
const TMAT: u32 = 0x3793_fdff;
const SH0: u32 = 1;
const SH1: u32 = 10;
const SH8: u32 = 8;
const MASK: u32 = 0x7fff_ffff;
const MIN_LOOP: u32 = 8;
const PRE_LOOP: u32 = 8;

/// The TinyMT32 generator of RFC 8682.
#[derive(Debug, Clone)]
pub struct TinyMt32 {
    st: [u32; 4],
}

impl TinyMt32 {
    /// `tinymt32_init(seed)`.
    pub fn new(seed: u32) -> Self {
        let mut st = [seed, MAT1, MAT2, TMAT];
        for i in 1..MIN_LOOP {
            let prev = st[((i - 1) & 3) as usize];
            let v = 1_812_433_253u32.wrapping_mul(prev ^ (prev >> 30)).wrapping_add(i);
            st[(i & 3) as usize] ^= v;
        }
        // RFC 8682 §2.2 notes the all-zero state check cannot trigger with these parameters
        // for any 32-bit seed, so it is omitted.
        let mut g = TinyMt32 { st };
        for _ in 0..PRE_LOOP {
            g.next_state();
        }
        g
    }

    fn next_state(&mut self) {
        let s = &mut self.st;
        let mut y = s[3];
        let mut x = (s[0] & MASK) ^ s[1] ^ s[2];
        x ^= x << SH0;
        y ^= (y >> SH0) ^ x;
        s[0] = s[1];
        s[1] = s[2];
        s[2] = x ^ (y << SH1);
        s[3] = y;
        if y & 1 != 0 {
            s[1] ^= MAT1;
            s[2] ^= MAT2;
        }
    }

    fn temper(&self) -> u32 {
        let s = &self.st;
        let t1 = s[0].wrapping_add(s[2] >> SH8);
        let t0 = s[3] ^ t1;
        if t1 & 1 != 0 { t0 ^ TMAT } else { t0 }
    }

    /// `tinymt32_generate_uint32`.
    pub fn next_u32(&mut self) -> u32 {
        self.next_state();
        self.temper()
    }

    /// `tinymt32_rand16`: a value in 0..16 (RFC 8681 §3.5).
    pub fn rand16(&mut self) -> u8 {
        (self.next_u32() & 0xF) as u8
    }

    /// `tinymt32_rand256`: a value in 0..256 (RFC 8681 §3.5).
    pub fn rand256(&mut self) -> u8 {
        (self.next_u32() & 0xFF) as u8
    }

    fn nonzero_byte(&mut self) -> u8 {
        loop {
            let v = self.rand256();
            if v != 0 {
                return v;
            }
        }
    }
}

/// Density threshold `DT` of RFC 8681 (0..=15): a coefficient is non-zero with probability
/// `(DT + 1) / 16`; 15 means every coefficient is non-zero.
pub const DENSITY_FULL: u8 = 15;

/// RFC 8681 `generate_coding_coefficients` for GF(2^8) (m = 8): fills `out` with the
/// coefficients of a repair symbol whose window has `out.len()` source symbols.
///
/// With `dt == 15` every coefficient is a non-zero byte; with a smaller `dt` a coefficient is
/// first kept with probability `(dt + 1) / 16` and is zero otherwise. `dt` above 15 is treated
/// as 15.
pub fn coding_coefficients(repair_key: u16, dt: u8, out: &mut [u8]) {
    let mut g = TinyMt32::new(u32::from(repair_key));
    if dt >= DENSITY_FULL {
        for c in out.iter_mut() {
            *c = g.nonzero_byte();
        }
    } else {
        for c in out.iter_mut() {
            *c = if g.rand16() <= dt { g.nonzero_byte() } else { 0 };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 8682 §3: the first outputs of TinyMT32 seeded with 1.
    #[test]
    fn rfc8682_reference_sequence() {
        let want = [
            2_545_341_989u32,
            981_918_433,
            3_715_302_833,
            2_387_538_352,
            3_591_001_365,
            3_820_442_102,
            2_114_400_566,
            2_196_103_051,
            2_783_359_912,
            764_534_509,
        ];
        let mut g = TinyMt32::new(1);
        for w in want {
            assert_eq!(g.next_u32(), w);
        }
    }

    /// RFC 8681 §3.5: rand256 and rand16 on seed 1.
    #[test]
    fn rfc8681_small_ranges() {
        let mut g = TinyMt32::new(1);
        let bytes: Vec<u8> = (0..10).map(|_| g.rand256()).collect();
        assert_eq!(bytes, [37, 225, 177, 176, 21, 246, 54, 139, 168, 237]);
        let mut g = TinyMt32::new(1);
        let nibbles: Vec<u8> = (0..10).map(|_| g.rand16()).collect();
        assert_eq!(nibbles, [5, 1, 1, 0, 5, 6, 6, 11, 8, 13]);
    }

    /// Cross-check against an independent RFC 8681 implementation (`cu-fec`).
    #[test]
    fn coefficients_match_cu_fec_for_every_key_and_density() {
        use cu_fec::{DensityThreshold, Field, generate_coding_coefficients};
        let mut ours = [0u8; 40];
        let mut theirs = [0u8; 40];
        for key in (0..=u16::MAX).step_by(97).chain([0, 1, u16::MAX]) {
            for dt in 0..=15u8 {
                coding_coefficients(key, dt, &mut ours);
                let d = DensityThreshold::new(dt).unwrap();
                generate_coding_coefficients(Field::Gf256, key, d, &mut theirs);
                assert_eq!(ours, theirs, "key={key} dt={dt}");
            }
        }
    }
}
