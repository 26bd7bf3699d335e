//! Portable table kernels: one 256-byte row of the product table per constant.

use super::tables::MUL;

pub fn axpy(dst: &mut [u8], c: u8, src: &[u8]) {
    let row = &MUL[c as usize];
    for (d, s) in dst.iter_mut().zip(src) {
        *d ^= row[*s as usize];
    }
}

pub fn scale(buf: &mut [u8], c: u8) {
    let row = &MUL[c as usize];
    for b in buf {
        *b = row[*b as usize];
    }
}

pub fn xor(dst: &mut [u8], src: &[u8]) {
    // Word-at-a-time XOR; the compiler vectorises this loop on its own.
    let mut d = dst.chunks_exact_mut(8);
    let mut s = src.chunks_exact(8);
    for (dw, sw) in (&mut d).zip(&mut s) {
        let x =
            u64::from_ne_bytes(dw.try_into().unwrap_or([0; 8])) ^ u64::from_ne_bytes(sw.try_into().unwrap_or([0; 8]));
        dw.copy_from_slice(&x.to_ne_bytes());
    }
    for (db, sb) in d.into_remainder().iter_mut().zip(s.remainder()) {
        *db ^= *sb;
    }
}
