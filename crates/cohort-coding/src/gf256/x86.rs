//! x86-64 kernels: split-nibble PSHUFB (SSSE3, AVX2, AVX-512BW) and GFNI affine (AVX2, AVX-512).
//!
//! Each function is `unsafe` only because it needs its target features; [`super::Kernel`]
//! is constructed solely from run-time feature detection, so callers never reach one on a CPU
//! without them. All loads and stores are unaligned and stay within the slices: the vector loop
//! covers whole vectors and the scalar kernel finishes the tail.
//!
//! One macro writes `axpy`, `scale` and `combine` for each instruction set from two pieces:
//! how to prepare a constant `c` (tables or an affine matrix in registers) and how to multiply
//! one vector by it.

use super::scalar;
use super::tables::{AFFINE, NIB};
use std::arch::x86_64::*;

macro_rules! kernels {
    (
        features = $feat:literal, width = $w:expr, vector = $v:ty,
        load = $load:ident, store = $store:ident, xor = $xor:ident,
        prepare = $prep:ident, multiply = $mul:ident, module = $m:ident
    ) => {
        pub mod $m {
            use super::*;

            #[target_feature(enable = $feat)]
            pub unsafe fn axpy(dst: &mut [u8], c: u8, src: &[u8]) {
                let n = dst.len();
                let mut i = 0;
                // SAFETY: every access is to `[i, i + width)` with `i + width <= n`, and both slices
                // have length `n` (checked by the safe wrapper).
                unsafe {
                    let k = $prep(c);
                    while i + $w <= n {
                        let s: $v = $load(src.as_ptr().add(i).cast());
                        let d: $v = $load(dst.as_ptr().add(i).cast());
                        $store(dst.as_mut_ptr().add(i).cast(), $xor(d, $mul(s, k)));
                        i += $w;
                    }
                }
                scalar::axpy(&mut dst[i..], c, &src[i..]);
            }

            #[target_feature(enable = $feat)]
            pub unsafe fn scale(buf: &mut [u8], c: u8) {
                let n = buf.len();
                let mut i = 0;
                // SAFETY: accesses stay within `[0, n)`.
                unsafe {
                    let k = $prep(c);
                    while i + $w <= n {
                        let s: $v = $load(buf.as_ptr().add(i).cast());
                        $store(buf.as_mut_ptr().add(i).cast(), $mul(s, k));
                        i += $w;
                    }
                }
                scalar::scale(&mut buf[i..], c);
            }

            #[target_feature(enable = $feat)]
            pub unsafe fn combine(dst: &mut [u8], terms: &[(u8, &[u8])]) {
                let n = dst.len();
                let mut i = 0;
                // SAFETY: every source has length `n` (checked by the safe wrapper); accesses stay
                // in range.
                unsafe {
                    while i + $w <= n {
                        let mut acc: $v = $load(dst.as_ptr().add(i).cast());
                        for &(c, s) in terms {
                            let x: $v = $load(s.as_ptr().add(i).cast());
                            acc = $xor(acc, $mul(x, $prep(c)));
                        }
                        $store(dst.as_mut_ptr().add(i).cast(), acc);
                        i += $w;
                    }
                }
                for &(c, s) in terms {
                    scalar::axpy(&mut dst[i..], c, &s[i..]);
                }
            }
        }
    };
}

// ---- split-nibble shuffles ---------------------------------------------------------------

#[target_feature(enable = "ssse3")]
unsafe fn nib16(c: u8) -> (__m128i, __m128i) {
    // SAFETY: NIB rows are 32 bytes long.
    unsafe {
        let t = NIB[c as usize].as_ptr();
        (_mm_loadu_si128(t.cast()), _mm_loadu_si128(t.add(16).cast()))
    }
}

#[target_feature(enable = "ssse3")]
unsafe fn mul16(x: __m128i, (lo, hi): (__m128i, __m128i)) -> __m128i {
    let mask = _mm_set1_epi8(0x0f);
    let l = _mm_and_si128(x, mask);
    let h = _mm_and_si128(_mm_srli_epi64(x, 4), mask);
    _mm_xor_si128(_mm_shuffle_epi8(lo, l), _mm_shuffle_epi8(hi, h))
}

#[target_feature(enable = "avx2")]
unsafe fn nib32(c: u8) -> (__m256i, __m256i) {
    // SAFETY: NIB rows are 32 bytes long.
    unsafe {
        let t = NIB[c as usize].as_ptr();
        let lo = _mm256_broadcastsi128_si256(_mm_loadu_si128(t.cast()));
        let hi = _mm256_broadcastsi128_si256(_mm_loadu_si128(t.add(16).cast()));
        (lo, hi)
    }
}

#[target_feature(enable = "avx2")]
unsafe fn mul32(x: __m256i, (lo, hi): (__m256i, __m256i)) -> __m256i {
    let mask = _mm256_set1_epi8(0x0f);
    let l = _mm256_and_si256(x, mask);
    let h = _mm256_and_si256(_mm256_srli_epi64(x, 4), mask);
    _mm256_xor_si256(_mm256_shuffle_epi8(lo, l), _mm256_shuffle_epi8(hi, h))
}

#[target_feature(enable = "avx512f,avx512bw")]
unsafe fn nib64(c: u8) -> (__m512i, __m512i) {
    // SAFETY: NIB rows are 32 bytes long.
    unsafe {
        let t = NIB[c as usize].as_ptr();
        let lo = _mm512_broadcast_i32x4(_mm_loadu_si128(t.cast()));
        let hi = _mm512_broadcast_i32x4(_mm_loadu_si128(t.add(16).cast()));
        (lo, hi)
    }
}

#[target_feature(enable = "avx512f,avx512bw")]
unsafe fn mul64(x: __m512i, (lo, hi): (__m512i, __m512i)) -> __m512i {
    let mask = _mm512_set1_epi8(0x0f);
    let l = _mm512_and_si512(x, mask);
    let h = _mm512_and_si512(_mm512_srli_epi64(x, 4), mask);
    _mm512_xor_si512(_mm512_shuffle_epi8(lo, l), _mm512_shuffle_epi8(hi, h))
}

// ---- GFNI affine -------------------------------------------------------------------------

#[target_feature(enable = "gfni,avx2")]
unsafe fn affine32(c: u8) -> __m256i {
    _mm256_set1_epi64x(AFFINE[c as usize] as i64)
}

#[target_feature(enable = "gfni,avx2")]
unsafe fn gfmul32(x: __m256i, m: __m256i) -> __m256i {
    _mm256_gf2p8affine_epi64_epi8::<0>(x, m)
}

#[target_feature(enable = "gfni,avx512f,avx512bw")]
unsafe fn affine64(c: u8) -> __m512i {
    _mm512_set1_epi64(AFFINE[c as usize] as i64)
}

#[target_feature(enable = "gfni,avx512f,avx512bw")]
unsafe fn gfmul64(x: __m512i, m: __m512i) -> __m512i {
    _mm512_gf2p8affine_epi64_epi8::<0>(x, m)
}

kernels!(
    features = "ssse3",
    width = 16,
    vector = __m128i,
    load = _mm_loadu_si128,
    store = _mm_storeu_si128,
    xor = _mm_xor_si128,
    prepare = nib16,
    multiply = mul16,
    module = ssse3
);
kernels!(
    features = "avx2",
    width = 32,
    vector = __m256i,
    load = _mm256_loadu_si256,
    store = _mm256_storeu_si256,
    xor = _mm256_xor_si256,
    prepare = nib32,
    multiply = mul32,
    module = avx2
);
kernels!(
    features = "avx512f,avx512bw",
    width = 64,
    vector = __m512i,
    load = _mm512_loadu_si512,
    store = _mm512_storeu_si512,
    xor = _mm512_xor_si512,
    prepare = nib64,
    multiply = mul64,
    module = avx512
);
kernels!(
    features = "gfni,avx2",
    width = 32,
    vector = __m256i,
    load = _mm256_loadu_si256,
    store = _mm256_storeu_si256,
    xor = _mm256_xor_si256,
    prepare = affine32,
    multiply = gfmul32,
    module = gfni256
);
kernels!(
    features = "gfni,avx512f,avx512bw",
    width = 64,
    vector = __m512i,
    load = _mm512_loadu_si512,
    store = _mm512_storeu_si512,
    xor = _mm512_xor_si512,
    prepare = affine64,
    multiply = gfmul64,
    module = gfni512
);
