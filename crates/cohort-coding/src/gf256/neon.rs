//! AArch64 NEON kernels: the split-nibble method with `TBL` (`vqtbl1q_u8`).
//!
//! NEON is mandatory on AArch64, so these are always selected there. Not exercised by this
//! repository's CI (x86-64 only); the scalar fallback covers correctness elsewhere.

use super::scalar;
use super::tables::NIB;
use std::arch::aarch64::*;

#[target_feature(enable = "neon")]
unsafe fn mul16(x: uint8x16_t, lo: uint8x16_t, hi: uint8x16_t) -> uint8x16_t {
    let l = vandq_u8(x, vdupq_n_u8(0x0f));
    let h = vshrq_n_u8::<4>(x);
    veorq_u8(vqtbl1q_u8(lo, l), vqtbl1q_u8(hi, h))
}

#[target_feature(enable = "neon")]
pub unsafe fn axpy(dst: &mut [u8], c: u8, src: &[u8]) {
    let n = dst.len();
    let mut i = 0;
    // SAFETY: accesses stay within `[0, n)`.
    unsafe {
        let t = NIB[c as usize].as_ptr();
        let (lo, hi) = (vld1q_u8(t), vld1q_u8(t.add(16)));
        while i + 16 <= n {
            let s = vld1q_u8(src.as_ptr().add(i));
            let d = vld1q_u8(dst.as_ptr().add(i));
            vst1q_u8(dst.as_mut_ptr().add(i), veorq_u8(d, mul16(s, lo, hi)));
            i += 16;
        }
    }
    scalar::axpy(&mut dst[i..], c, &src[i..]);
}

#[target_feature(enable = "neon")]
pub unsafe fn scale(buf: &mut [u8], c: u8) {
    let n = buf.len();
    let mut i = 0;
    // SAFETY: accesses stay within `[0, n)`.
    unsafe {
        let t = NIB[c as usize].as_ptr();
        let (lo, hi) = (vld1q_u8(t), vld1q_u8(t.add(16)));
        while i + 16 <= n {
            let s = vld1q_u8(buf.as_ptr().add(i));
            vst1q_u8(buf.as_mut_ptr().add(i), mul16(s, lo, hi));
            i += 16;
        }
    }
    scalar::scale(&mut buf[i..], c);
}

#[target_feature(enable = "neon")]
pub unsafe fn combine(dst: &mut [u8], terms: &[(u8, &[u8])]) {
    let n = dst.len();
    let mut i = 0;
    // SAFETY: every source has length `n` (checked by the safe wrapper); accesses stay in range.
    unsafe {
        while i + 16 <= n {
            let mut acc = vld1q_u8(dst.as_ptr().add(i));
            for &(c, s) in terms {
                let t = NIB[c as usize].as_ptr();
                let (lo, hi) = (vld1q_u8(t), vld1q_u8(t.add(16)));
                acc = veorq_u8(acc, mul16(vld1q_u8(s.as_ptr().add(i)), lo, hi));
            }
            vst1q_u8(dst.as_mut_ptr().add(i), acc);
            i += 16;
        }
    }
    for &(c, s) in terms {
        scalar::axpy(&mut dst[i..], c, &s[i..]);
    }
}
