//! x86-64 kernels: split-nibble PSHUFB (SSSE3, AVX2, AVX-512BW) and GFNI affine (AVX2, AVX-512).
//!
//! Each function is `unsafe` only because it needs its target features; [`super::Kernel`]
//! is constructed solely from run-time feature detection, so callers never reach one on a CPU
//! without them. All loads and stores are unaligned and stay within the slices: the vector loop
//! covers whole vectors and the scalar kernel finishes the tail.

use super::scalar;
use super::tables::{AFFINE, NIB};
use std::arch::x86_64::*;

macro_rules! tail {
    ($dst:expr, $c:expr, $src:expr, $i:expr, axpy) => {
        scalar::axpy(&mut $dst[$i..], $c, &$src[$i..])
    };
    ($dst:expr, $c:expr, $i:expr, scale) => {
        scalar::scale(&mut $dst[$i..], $c)
    };
}

// ---- SSSE3 -------------------------------------------------------------------------------

#[target_feature(enable = "ssse3")]
unsafe fn mul16(x: __m128i, lo: __m128i, hi: __m128i) -> __m128i {
    let mask = _mm_set1_epi8(0x0f);
    let l = _mm_and_si128(x, mask);
    let h = _mm_and_si128(_mm_srli_epi64(x, 4), mask);
    _mm_xor_si128(_mm_shuffle_epi8(lo, l), _mm_shuffle_epi8(hi, h))
}

#[target_feature(enable = "ssse3")]
pub unsafe fn axpy_ssse3(dst: &mut [u8], c: u8, src: &[u8]) {
    let n = dst.len();
    let mut i = 0;
    // SAFETY: every access is to `[i, i + 16)` with `i + 16 <= n` on slices of length `n`.
    unsafe {
        let t = NIB[c as usize].as_ptr();
        let lo = _mm_loadu_si128(t.cast());
        let hi = _mm_loadu_si128(t.add(16).cast());
        while i + 16 <= n {
            let s = _mm_loadu_si128(src.as_ptr().add(i).cast());
            let d = _mm_loadu_si128(dst.as_ptr().add(i).cast());
            let p = mul16(s, lo, hi);
            _mm_storeu_si128(dst.as_mut_ptr().add(i).cast(), _mm_xor_si128(d, p));
            i += 16;
        }
    }
    tail!(dst, c, src, i, axpy);
}

#[target_feature(enable = "ssse3")]
pub unsafe fn scale_ssse3(buf: &mut [u8], c: u8) {
    let n = buf.len();
    let mut i = 0;
    // SAFETY: accesses stay within `[0, n)`.
    unsafe {
        let t = NIB[c as usize].as_ptr();
        let lo = _mm_loadu_si128(t.cast());
        let hi = _mm_loadu_si128(t.add(16).cast());
        while i + 16 <= n {
            let s = _mm_loadu_si128(buf.as_ptr().add(i).cast());
            _mm_storeu_si128(buf.as_mut_ptr().add(i).cast(), mul16(s, lo, hi));
            i += 16;
        }
    }
    tail!(buf, c, i, scale);
}

#[target_feature(enable = "ssse3")]
pub unsafe fn combine_ssse3(dst: &mut [u8], terms: &[(u8, &[u8])]) {
    let n = dst.len();
    let mut i = 0;
    // SAFETY: every source has length `n` (checked by the safe wrapper); accesses stay in range.
    unsafe {
        while i + 16 <= n {
            let mut acc = _mm_loadu_si128(dst.as_ptr().add(i).cast());
            for &(c, s) in terms {
                let t = NIB[c as usize].as_ptr();
                let lo = _mm_loadu_si128(t.cast());
                let hi = _mm_loadu_si128(t.add(16).cast());
                let x = _mm_loadu_si128(s.as_ptr().add(i).cast());
                acc = _mm_xor_si128(acc, mul16(x, lo, hi));
            }
            _mm_storeu_si128(dst.as_mut_ptr().add(i).cast(), acc);
            i += 16;
        }
    }
    for &(c, s) in terms {
        scalar::axpy(&mut dst[i..], c, &s[i..]);
    }
}

// ---- AVX2 --------------------------------------------------------------------------------

#[target_feature(enable = "avx2")]
unsafe fn tables32(c: u8) -> (__m256i, __m256i) {
    // SAFETY: NIB rows are 32 bytes long.
    unsafe {
        let t = NIB[c as usize].as_ptr();
        let lo = _mm256_broadcastsi128_si256(_mm_loadu_si128(t.cast()));
        let hi = _mm256_broadcastsi128_si256(_mm_loadu_si128(t.add(16).cast()));
        (lo, hi)
    }
}

#[target_feature(enable = "avx2")]
unsafe fn mul32(x: __m256i, lo: __m256i, hi: __m256i) -> __m256i {
    let mask = _mm256_set1_epi8(0x0f);
    let l = _mm256_and_si256(x, mask);
    let h = _mm256_and_si256(_mm256_srli_epi64(x, 4), mask);
    _mm256_xor_si256(_mm256_shuffle_epi8(lo, l), _mm256_shuffle_epi8(hi, h))
}

#[target_feature(enable = "avx2")]
pub unsafe fn axpy_avx2(dst: &mut [u8], c: u8, src: &[u8]) {
    let n = dst.len();
    let mut i = 0;
    // SAFETY: accesses stay within `[0, n)`.
    unsafe {
        let (lo, hi) = tables32(c);
        while i + 64 <= n {
            let s0 = _mm256_loadu_si256(src.as_ptr().add(i).cast());
            let s1 = _mm256_loadu_si256(src.as_ptr().add(i + 32).cast());
            let d0 = _mm256_loadu_si256(dst.as_ptr().add(i).cast());
            let d1 = _mm256_loadu_si256(dst.as_ptr().add(i + 32).cast());
            let r0 = _mm256_xor_si256(d0, mul32(s0, lo, hi));
            let r1 = _mm256_xor_si256(d1, mul32(s1, lo, hi));
            _mm256_storeu_si256(dst.as_mut_ptr().add(i).cast(), r0);
            _mm256_storeu_si256(dst.as_mut_ptr().add(i + 32).cast(), r1);
            i += 64;
        }
        while i + 32 <= n {
            let s = _mm256_loadu_si256(src.as_ptr().add(i).cast());
            let d = _mm256_loadu_si256(dst.as_ptr().add(i).cast());
            _mm256_storeu_si256(dst.as_mut_ptr().add(i).cast(), _mm256_xor_si256(d, mul32(s, lo, hi)));
            i += 32;
        }
    }
    tail!(dst, c, src, i, axpy);
}

#[target_feature(enable = "avx2")]
pub unsafe fn scale_avx2(buf: &mut [u8], c: u8) {
    let n = buf.len();
    let mut i = 0;
    // SAFETY: accesses stay within `[0, n)`.
    unsafe {
        let (lo, hi) = tables32(c);
        while i + 32 <= n {
            let s = _mm256_loadu_si256(buf.as_ptr().add(i).cast());
            _mm256_storeu_si256(buf.as_mut_ptr().add(i).cast(), mul32(s, lo, hi));
            i += 32;
        }
    }
    tail!(buf, c, i, scale);
}

#[target_feature(enable = "avx2")]
pub unsafe fn combine_avx2(dst: &mut [u8], terms: &[(u8, &[u8])]) {
    let n = dst.len();
    let mut i = 0;
    // SAFETY: every source has length `n` (checked by the safe wrapper); accesses stay in range.
    unsafe {
        while i + 32 <= n {
            let mut acc = _mm256_loadu_si256(dst.as_ptr().add(i).cast());
            for &(c, s) in terms {
                let (lo, hi) = tables32(c);
                let x = _mm256_loadu_si256(s.as_ptr().add(i).cast());
                acc = _mm256_xor_si256(acc, mul32(x, lo, hi));
            }
            _mm256_storeu_si256(dst.as_mut_ptr().add(i).cast(), acc);
            i += 32;
        }
    }
    for &(c, s) in terms {
        scalar::axpy(&mut dst[i..], c, &s[i..]);
    }
}

// ---- AVX-512BW ---------------------------------------------------------------------------

#[target_feature(enable = "avx512f,avx512bw")]
unsafe fn tables64(c: u8) -> (__m512i, __m512i) {
    // SAFETY: NIB rows are 32 bytes long.
    unsafe {
        let t = NIB[c as usize].as_ptr();
        let lo = _mm512_broadcast_i32x4(_mm_loadu_si128(t.cast()));
        let hi = _mm512_broadcast_i32x4(_mm_loadu_si128(t.add(16).cast()));
        (lo, hi)
    }
}

#[target_feature(enable = "avx512f,avx512bw")]
unsafe fn mul64(x: __m512i, lo: __m512i, hi: __m512i) -> __m512i {
    let mask = _mm512_set1_epi8(0x0f);
    let l = _mm512_and_si512(x, mask);
    let h = _mm512_and_si512(_mm512_srli_epi64(x, 4), mask);
    _mm512_xor_si512(_mm512_shuffle_epi8(lo, l), _mm512_shuffle_epi8(hi, h))
}

#[target_feature(enable = "avx512f,avx512bw")]
pub unsafe fn axpy_avx512(dst: &mut [u8], c: u8, src: &[u8]) {
    let n = dst.len();
    let mut i = 0;
    // SAFETY: accesses stay within `[0, n)`.
    unsafe {
        let (lo, hi) = tables64(c);
        while i + 64 <= n {
            let s = _mm512_loadu_si512(src.as_ptr().add(i).cast());
            let d = _mm512_loadu_si512(dst.as_ptr().add(i).cast());
            _mm512_storeu_si512(dst.as_mut_ptr().add(i).cast(), _mm512_xor_si512(d, mul64(s, lo, hi)));
            i += 64;
        }
    }
    tail!(dst, c, src, i, axpy);
}

#[target_feature(enable = "avx512f,avx512bw")]
pub unsafe fn scale_avx512(buf: &mut [u8], c: u8) {
    let n = buf.len();
    let mut i = 0;
    // SAFETY: accesses stay within `[0, n)`.
    unsafe {
        let (lo, hi) = tables64(c);
        while i + 64 <= n {
            let s = _mm512_loadu_si512(buf.as_ptr().add(i).cast());
            _mm512_storeu_si512(buf.as_mut_ptr().add(i).cast(), mul64(s, lo, hi));
            i += 64;
        }
    }
    tail!(buf, c, i, scale);
}

#[target_feature(enable = "avx512f,avx512bw")]
pub unsafe fn combine_avx512(dst: &mut [u8], terms: &[(u8, &[u8])]) {
    let n = dst.len();
    let mut i = 0;
    // SAFETY: every source has length `n` (checked by the safe wrapper); accesses stay in range.
    unsafe {
        while i + 64 <= n {
            let mut acc = _mm512_loadu_si512(dst.as_ptr().add(i).cast());
            for &(c, s) in terms {
                let (lo, hi) = tables64(c);
                let x = _mm512_loadu_si512(s.as_ptr().add(i).cast());
                acc = _mm512_xor_si512(acc, mul64(x, lo, hi));
            }
            _mm512_storeu_si512(dst.as_mut_ptr().add(i).cast(), acc);
            i += 64;
        }
    }
    for &(c, s) in terms {
        scalar::axpy(&mut dst[i..], c, &s[i..]);
    }
}

// ---- GFNI (with AVX2 / AVX-512) ----------------------------------------------------------

#[target_feature(enable = "gfni,avx2")]
pub unsafe fn axpy_gfni256(dst: &mut [u8], c: u8, src: &[u8]) {
    let n = dst.len();
    let mut i = 0;
    // SAFETY: accesses stay within `[0, n)`.
    unsafe {
        let m = _mm256_set1_epi64x(AFFINE[c as usize] as i64);
        while i + 32 <= n {
            let s = _mm256_loadu_si256(src.as_ptr().add(i).cast());
            let d = _mm256_loadu_si256(dst.as_ptr().add(i).cast());
            let p = _mm256_gf2p8affine_epi64_epi8::<0>(s, m);
            _mm256_storeu_si256(dst.as_mut_ptr().add(i).cast(), _mm256_xor_si256(d, p));
            i += 32;
        }
    }
    tail!(dst, c, src, i, axpy);
}

#[target_feature(enable = "gfni,avx2")]
pub unsafe fn scale_gfni256(buf: &mut [u8], c: u8) {
    let n = buf.len();
    let mut i = 0;
    // SAFETY: accesses stay within `[0, n)`.
    unsafe {
        let m = _mm256_set1_epi64x(AFFINE[c as usize] as i64);
        while i + 32 <= n {
            let s = _mm256_loadu_si256(buf.as_ptr().add(i).cast());
            _mm256_storeu_si256(buf.as_mut_ptr().add(i).cast(), _mm256_gf2p8affine_epi64_epi8::<0>(s, m));
            i += 32;
        }
    }
    tail!(buf, c, i, scale);
}

#[target_feature(enable = "gfni,avx2")]
pub unsafe fn combine_gfni256(dst: &mut [u8], terms: &[(u8, &[u8])]) {
    let n = dst.len();
    let mut i = 0;
    // SAFETY: every source has length `n` (checked by the safe wrapper); accesses stay in range.
    unsafe {
        while i + 32 <= n {
            let mut acc = _mm256_loadu_si256(dst.as_ptr().add(i).cast());
            for &(c, s) in terms {
                let m = _mm256_set1_epi64x(AFFINE[c as usize] as i64);
                let x = _mm256_loadu_si256(s.as_ptr().add(i).cast());
                acc = _mm256_xor_si256(acc, _mm256_gf2p8affine_epi64_epi8::<0>(x, m));
            }
            _mm256_storeu_si256(dst.as_mut_ptr().add(i).cast(), acc);
            i += 32;
        }
    }
    for &(c, s) in terms {
        scalar::axpy(&mut dst[i..], c, &s[i..]);
    }
}

#[target_feature(enable = "gfni,avx512f,avx512bw")]
pub unsafe fn axpy_gfni512(dst: &mut [u8], c: u8, src: &[u8]) {
    let n = dst.len();
    let mut i = 0;
    // SAFETY: accesses stay within `[0, n)`.
    unsafe {
        let m = _mm512_set1_epi64(AFFINE[c as usize] as i64);
        while i + 64 <= n {
            let s = _mm512_loadu_si512(src.as_ptr().add(i).cast());
            let d = _mm512_loadu_si512(dst.as_ptr().add(i).cast());
            let p = _mm512_gf2p8affine_epi64_epi8::<0>(s, m);
            _mm512_storeu_si512(dst.as_mut_ptr().add(i).cast(), _mm512_xor_si512(d, p));
            i += 64;
        }
    }
    tail!(dst, c, src, i, axpy);
}

#[target_feature(enable = "gfni,avx512f,avx512bw")]
pub unsafe fn scale_gfni512(buf: &mut [u8], c: u8) {
    let n = buf.len();
    let mut i = 0;
    // SAFETY: accesses stay within `[0, n)`.
    unsafe {
        let m = _mm512_set1_epi64(AFFINE[c as usize] as i64);
        while i + 64 <= n {
            let s = _mm512_loadu_si512(buf.as_ptr().add(i).cast());
            _mm512_storeu_si512(buf.as_mut_ptr().add(i).cast(), _mm512_gf2p8affine_epi64_epi8::<0>(s, m));
            i += 64;
        }
    }
    tail!(buf, c, i, scale);
}

#[target_feature(enable = "gfni,avx512f,avx512bw")]
pub unsafe fn combine_gfni512(dst: &mut [u8], terms: &[(u8, &[u8])]) {
    let n = dst.len();
    let mut i = 0;
    // SAFETY: every source has length `n` (checked by the safe wrapper); accesses stay in range.
    unsafe {
        while i + 64 <= n {
            let mut acc = _mm512_loadu_si512(dst.as_ptr().add(i).cast());
            for &(c, s) in terms {
                let m = _mm512_set1_epi64(AFFINE[c as usize] as i64);
                let x = _mm512_loadu_si512(s.as_ptr().add(i).cast());
                acc = _mm512_xor_si512(acc, _mm512_gf2p8affine_epi64_epi8::<0>(x, m));
            }
            _mm512_storeu_si512(dst.as_mut_ptr().add(i).cast(), acc);
            i += 64;
        }
    }
    for &(c, s) in terms {
        scalar::axpy(&mut dst[i..], c, &s[i..]);
    }
}
