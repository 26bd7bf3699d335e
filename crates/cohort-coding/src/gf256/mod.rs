//! Arithmetic in GF(2^8) with the RFC 8681 polynomial 0x11D, and the bulk kernels coding
//! spends its time in.
//!
//! * [`mul`], [`inv`], [`div`]: single elements, by table.
//! * [`axpy`]: `dst ^= c * src` (addition in GF(2^8) is XOR).
//! * [`combine`]: `dst ^= Σ c_i * src_i`, fused so `dst` is loaded and stored once per vector
//!   however many sources there are; encoding and decoding use it for whole rows at once.
//! * [`scale`]: `buf = c * buf`.
//!
//! The free functions use the fastest [`Kernel`] this CPU has, detected once at run time:
//! GFNI affine with AVX-512 or AVX2 when the CPU has GFNI, then split-nibble shuffles with
//! AVX-512BW, AVX2 or SSSE3, NEON on AArch64, and the 64 KiB product table everywhere else.
//! A [`Kernel`] value can only be obtained for a kernel the CPU supports, which is what makes
//! the SIMD paths safe to call.

mod scalar;
pub mod tables;

#[cfg(target_arch = "x86_64")]
mod x86;

#[cfg(target_arch = "aarch64")]
mod neon;

use std::fmt;
use std::sync::OnceLock;

/// Calls kernel `$op` of the instruction set `$kind` names with `$args`, or runs `$fallback`
/// for the scalar kernel (and for any kind this target cannot have).
macro_rules! dispatch {
    ($kind:expr, $op:ident, ($($arg:expr),*), $fallback:expr) => {
        // SAFETY (every arm): a `Kernel` is only ever built from run-time detection of the
        // features its kind needs, and callers checked the slice lengths.
        match $kind {
            #[cfg(target_arch = "x86_64")]
            KernelKind::Ssse3 => unsafe { x86::ssse3::$op($($arg),*) },
            #[cfg(target_arch = "x86_64")]
            KernelKind::Avx2 => unsafe { x86::avx2::$op($($arg),*) },
            #[cfg(target_arch = "x86_64")]
            KernelKind::Avx512 => unsafe { x86::avx512::$op($($arg),*) },
            #[cfg(target_arch = "x86_64")]
            KernelKind::GfniAvx2 => unsafe { x86::gfni256::$op($($arg),*) },
            #[cfg(target_arch = "x86_64")]
            KernelKind::GfniAvx512 => unsafe { x86::gfni512::$op($($arg),*) },
            #[cfg(target_arch = "aarch64")]
            KernelKind::Neon => unsafe { neon::$op($($arg),*) },
            _ => $fallback,
        }
    };
}

/// `a * b`.
#[inline]
pub fn mul(a: u8, b: u8) -> u8 {
    tables::MUL[a as usize][b as usize]
}

/// The multiplicative inverse of `a`; `None` for zero.
#[inline]
pub fn inv(a: u8) -> Option<u8> {
    (a != 0).then(|| tables::INV[a as usize])
}

/// `a / b`; `None` when `b` is zero.
#[inline]
pub fn div(a: u8, b: u8) -> Option<u8> {
    inv(b).map(|ib| mul(a, ib))
}

/// The implementations of the bulk operations.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum KernelKind {
    /// 64 KiB product table, one lookup per byte.
    Scalar,
    /// Split-nibble `PSHUFB`, 16 bytes per step.
    Ssse3,
    /// Split-nibble `VPSHUFB`, 32 bytes per step.
    Avx2,
    /// Split-nibble `VPSHUFB` on 512-bit registers, 64 bytes per step.
    Avx512,
    /// `VGF2P8AFFINEQB` with a per-constant bit matrix, 32 bytes per step.
    GfniAvx2,
    /// `VGF2P8AFFINEQB` on 512-bit registers, 64 bytes per step.
    GfniAvx512,
    /// Split-nibble `TBL`, 16 bytes per step.
    Neon,
}

/// A bulk-kernel implementation that this CPU supports.
///
/// Obtain one with [`Kernel::best`] or [`Kernel::available`]; there is no other constructor,
/// so holding a `Kernel` proves its instructions can run here.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Kernel(KernelKind);

impl fmt::Debug for Kernel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.0)
    }
}

impl fmt::Display for Kernel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = match self.0 {
            KernelKind::Scalar => "scalar",
            KernelKind::Ssse3 => "ssse3",
            KernelKind::Avx2 => "avx2",
            KernelKind::Avx512 => "avx512bw",
            KernelKind::GfniAvx2 => "gfni-avx2",
            KernelKind::GfniAvx512 => "gfni-avx512",
            KernelKind::Neon => "neon",
        };
        f.write_str(name)
    }
}

impl Kernel {
    /// The portable table kernel, available everywhere.
    pub const SCALAR: Kernel = Kernel(KernelKind::Scalar);

    /// Every kernel this CPU supports, slowest first (the scalar kernel is always first).
    pub fn available() -> Vec<Kernel> {
        let mut v = vec![Kernel::SCALAR];
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::is_x86_feature_detected as has;
            if has!("ssse3") {
                v.push(Kernel(KernelKind::Ssse3));
            }
            if has!("avx2") {
                v.push(Kernel(KernelKind::Avx2));
            }
            if has!("avx512f") && has!("avx512bw") {
                v.push(Kernel(KernelKind::Avx512));
            }
            if has!("gfni") && has!("avx2") {
                v.push(Kernel(KernelKind::GfniAvx2));
            }
            if has!("gfni") && has!("avx512f") && has!("avx512bw") {
                v.push(Kernel(KernelKind::GfniAvx512));
            }
        }
        #[cfg(target_arch = "aarch64")]
        {
            if std::arch::is_aarch64_feature_detected!("neon") {
                v.push(Kernel(KernelKind::Neon));
            }
        }
        v
    }

    /// The fastest kernel this CPU supports (detected once, then cached).
    ///
    /// Setting the environment variable `COHORT_GF_KERNEL` to a kernel's name (`scalar`,
    /// `ssse3`, `avx2`, `avx512bw`, `gfni-avx2`, `gfni-avx512`, `neon`) before the first call
    /// selects that kernel instead when the CPU has it, to compare or to work around a fault.
    pub fn best() -> Kernel {
        static BEST: OnceLock<Kernel> = OnceLock::new();
        *BEST.get_or_init(|| {
            let all = Kernel::available();
            let wanted = std::env::var("COHORT_GF_KERNEL").ok();
            wanted.and_then(|w| all.iter().copied().find(|k| k.to_string() == w)).unwrap_or_else(|| all[all.len() - 1])
        })
    }

    /// Which implementation this is.
    pub fn kind(self) -> KernelKind {
        self.0
    }

    /// `dst ^= c * src`.
    ///
    /// # Panics
    /// If the slices differ in length (a programming error, never input-dependent).
    pub fn axpy(self, dst: &mut [u8], c: u8, src: &[u8]) {
        assert_eq!(dst.len(), src.len(), "axpy: slice lengths differ");
        match c {
            0 => {}
            1 => scalar::xor(dst, src),
            _ => dispatch!(self.0, axpy, (dst, c, src), scalar::axpy(dst, c, src)),
        }
    }

    /// `buf = c * buf`.
    pub fn scale(self, buf: &mut [u8], c: u8) {
        match c {
            0 => buf.fill(0),
            1 => {}
            _ => dispatch!(self.0, scale, (buf, c), scalar::scale(buf, c)),
        }
    }

    /// `dst ^= Σ c_i * src_i` over `terms = [(c_i, src_i)]`, reading and writing `dst` once.
    ///
    /// # Panics
    /// If a source's length differs from `dst`'s (a programming error).
    pub fn combine(self, dst: &mut [u8], terms: &[(u8, &[u8])]) {
        for (_, s) in terms {
            assert_eq!(s.len(), dst.len(), "combine: slice lengths differ");
        }
        // Zero coefficients contribute nothing; with few terms the single-source kernel is as
        // good, so skip the fused path's per-vector bookkeeping.
        if terms.len() <= 1 {
            for &(c, s) in terms {
                self.axpy(dst, c, s);
            }
            return;
        }
        dispatch!(self.0, combine, (dst, terms), {
            for &(c, s) in terms {
                self.axpy(dst, c, s);
            }
        })
    }
}

/// `dst ^= c * src` with the [best](Kernel::best) kernel.
pub fn axpy(dst: &mut [u8], c: u8, src: &[u8]) {
    Kernel::best().axpy(dst, c, src)
}

/// `dst ^= src` (addition in GF(2^8)).
pub fn xor(dst: &mut [u8], src: &[u8]) {
    assert_eq!(dst.len(), src.len(), "xor: slice lengths differ");
    scalar::xor(dst, src)
}

/// `buf = c * buf` with the [best](Kernel::best) kernel.
pub fn scale(buf: &mut [u8], c: u8) {
    Kernel::best().scale(buf, c)
}

/// `dst ^= Σ c_i * src_i` with the [best](Kernel::best) kernel.
pub fn combine(dst: &mut [u8], terms: &[(u8, &[u8])]) {
    Kernel::best().combine(dst, terms)
}

#[cfg(test)]
mod tests;
