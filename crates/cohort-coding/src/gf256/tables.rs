//! Compile-time tables for GF(2^8) with the RFC 8681 polynomial x^8 + x^4 + x^3 + x^2 + 1 (0x11D).
//!
//! Everything here is computed by `const fn` from the polynomial, so the tables cannot drift
//! from the field definition; the unit tests compare them with a bit-serial multiplier.

/// The reducing polynomial, without the x^8 term (0x11D & 0xFF).
pub const POLY_LOW: u8 = 0x1D;

/// Bit-serial ("Russian peasant") multiplication; the reference every table is built from.
pub const fn mul_slow(mut a: u8, mut b: u8) -> u8 {
    let mut p = 0u8;
    let mut i = 0;
    while i < 8 {
        if b & 1 != 0 {
            p ^= a;
        }
        let carry = a & 0x80 != 0;
        a <<= 1;
        if carry {
            a ^= POLY_LOW;
        }
        b >>= 1;
        i += 1;
    }
    p
}

const fn build_mul() -> [[u8; 256]; 256] {
    let mut t = [[0u8; 256]; 256];
    let mut a = 0;
    while a < 256 {
        let mut b = 0;
        while b < 256 {
            t[a][b] = mul_slow(a as u8, b as u8);
            b += 1;
        }
        a += 1;
    }
    t
}

const fn build_inv() -> [u8; 256] {
    let mut t = [0u8; 256];
    let mut a = 1;
    while a < 256 {
        let mut b = 1;
        while b < 256 {
            if mul_slow(a as u8, b as u8) == 1 {
                t[a] = b as u8;
                break;
            }
            b += 1;
        }
        a += 1;
    }
    t
}

/// Split-nibble tables: `NIB[c][0..16]` holds `c * i`, `NIB[c][16..32]` holds `c * (i << 4)`,
/// so `c * x = NIB[c][x & 15] ^ NIB[c][16 + (x >> 4)]`: two 16-entry lookups that PSHUFB/TBL do
/// sixteen (or 32, 64) bytes at a time.
const fn build_nib() -> [[u8; 32]; 256] {
    let mut t = [[0u8; 32]; 256];
    let mut c = 0;
    while c < 256 {
        let mut i = 0;
        while i < 16 {
            t[c][i] = mul_slow(c as u8, i as u8);
            t[c][16 + i] = mul_slow(c as u8, (i << 4) as u8);
            i += 1;
        }
        c += 1;
    }
    t
}

/// GFNI affine matrices: multiplication by a constant `c` is GF(2)-linear in `x`, so it is an
/// 8x8 bit matrix that `GF2P8AFFINEQB` applies to every byte. (`GF2P8MULB` cannot be used: it
/// multiplies in the AES field, 0x11B.) Row `i` of the product (bit `i` of `c * x`) sits in byte
/// `7 - i` of the qword and has bit `j` set when bit `i` of `c * 2^j` is set.
const fn build_affine() -> [u64; 256] {
    let mut t = [0u64; 256];
    let mut c = 0;
    while c < 256 {
        let mut m = 0u64;
        let mut i = 0;
        while i < 8 {
            let mut row = 0u8;
            let mut j = 0;
            while j < 8 {
                if (mul_slow(c as u8, 1 << j) >> i) & 1 != 0 {
                    row |= 1 << j;
                }
                j += 1;
            }
            m |= (row as u64) << (8 * (7 - i));
            i += 1;
        }
        t[c] = m;
        c += 1;
    }
    t
}

/// Full product table, 64 KiB: `MUL[a][b] = a * b`.
pub static MUL: [[u8; 256]; 256] = build_mul();
/// Multiplicative inverses; `INV[0]` is 0 (zero has none).
pub static INV: [u8; 256] = build_inv();
/// Split-nibble product tables for the shuffle kernels.
pub static NIB: [[u8; 32]; 256] = build_nib();
/// GFNI affine matrices for multiplication by each constant.
pub static AFFINE: [u64; 256] = build_affine();
