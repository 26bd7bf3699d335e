//! Sets of process ids on the wire: a length-prefixed bitmap anchored at its smallest member.
//!
//! ```text
//! +-----------+-----------+---------------------------+
//! | base u32  | len u16   | bitmap (len bytes)        |
//! +-----------+-----------+---------------------------+
//! ```
//!
//! Bit `i` (least significant first) of byte `j` stands for process `base + 8j + i`. The
//! encoding is canonical, so every set has exactly one form and `parse ∘ emit` is the
//! identity on bytes as well as on sets: the empty set is `base = 0, len = 0`; otherwise
//! `base` is the smallest member (bit 0 of byte 0 is set) and the last byte is not zero. A
//! set spans at most [`MAX_SPAN`] consecutive ids, so groups far larger than 64 members fit.

/// Most consecutive ids one mask can span (bitmaps of up to 8 KiB).
pub const MAX_SPAN: u32 = 65_536;
/// Bytes before the bitmap.
pub const MASK_HEADER_LEN: usize = 6;

/// Why a mask was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum MaskError {
    #[error("mask needs {need} bytes, {got} left")]
    Truncated { need: usize, got: usize },
    #[error("mask of {0} bytes spans more than {MAX_SPAN} ids")]
    TooWide(usize),
    #[error("mask is not in canonical form")]
    NotCanonical,
    #[error("mask reaches past the largest process id")]
    Overflow,
}

/// Why a pid could not be added to a mask.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("process {pid} would make the mask span more than {MAX_SPAN} ids")]
pub struct SpanError {
    pub pid: u32,
}

/// A set of process ids, kept sorted; what `rmask` is in seed 003.
///
/// Besides set operations it answers the two questions the reply schedule asks:
/// [`position`](Self::position) (`posBit`: the 1-based slot of a process) and
/// [`next_after`](Self::next_after) (`nxtBit`: who replies after a given process).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct PidMask {
    pids: Vec<u32>,
}

impl PidMask {
    /// The empty set.
    pub const fn new() -> Self {
        PidMask { pids: Vec::new() }
    }

    /// The set of `pids` (duplicates ignored), or the first pid that widens it past
    /// [`MAX_SPAN`].
    pub fn from_pids<I: IntoIterator<Item = u32>>(pids: I) -> Result<Self, SpanError> {
        let mut m = PidMask::new();
        for p in pids {
            m.insert(p)?;
        }
        Ok(m)
    }

    /// Adds `pid`; `Ok(false)` if it was already there.
    pub fn insert(&mut self, pid: u32) -> Result<bool, SpanError> {
        match self.pids.binary_search(&pid) {
            Ok(_) => Ok(false),
            Err(at) => {
                let lo = self.pids.first().map_or(pid, |&f| f.min(pid));
                let hi = self.pids.last().map_or(pid, |&l| l.max(pid));
                if u64::from(hi) - u64::from(lo) >= u64::from(MAX_SPAN) {
                    return Err(SpanError { pid });
                }
                self.pids.insert(at, pid);
                Ok(true)
            }
        }
    }

    /// Removes `pid`; whether it was there.
    pub fn remove(&mut self, pid: u32) -> bool {
        match self.pids.binary_search(&pid) {
            Ok(at) => {
                self.pids.remove(at);
                true
            }
            Err(_) => false,
        }
    }

    pub fn contains(&self, pid: u32) -> bool {
        self.pids.binary_search(&pid).is_ok()
    }

    /// Members (`bitsSet`).
    pub fn len(&self) -> usize {
        self.pids.len()
    }

    pub fn is_empty(&self) -> bool {
        self.pids.is_empty()
    }

    /// Members in increasing order.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = u32> + ExactSizeIterator + '_ {
        self.pids.iter().copied()
    }

    /// `posBit`: the 1-based rank of `pid` among the members, its reply slot.
    pub fn position(&self, pid: u32) -> Option<usize> {
        self.pids.binary_search(&pid).ok().map(|i| i + 1)
    }

    /// `nxtBit`: the smallest member greater than `pid` (whether or not `pid` is a member).
    pub fn next_after(&self, pid: u32) -> Option<u32> {
        let at = self.pids.partition_point(|&p| p <= pid);
        self.pids.get(at).copied()
    }

    /// Members smaller than `pid`.
    pub fn count_below(&self, pid: u32) -> usize {
        self.pids.partition_point(|&p| p < pid)
    }

    /// Bytes [`emit`](Self::emit) writes.
    pub fn buffer_len(&self) -> usize {
        MASK_HEADER_LEN + self.bitmap_len()
    }

    fn bitmap_len(&self) -> usize {
        match (self.pids.first(), self.pids.last()) {
            (Some(&lo), Some(&hi)) => (hi - lo) as usize / 8 + 1,
            _ => 0,
        }
    }

    /// Writes the mask into the front of `out`; returns its length, or `None` if `out` is too
    /// short.
    pub fn emit(&self, out: &mut [u8]) -> Option<usize> {
        let len = self.buffer_len();
        let b = out.get_mut(..len)?;
        b.fill(0);
        let base = self.pids.first().copied().unwrap_or(0);
        b[..4].copy_from_slice(&base.to_be_bytes());
        // The span bound keeps the bitmap within MAX_SPAN / 8 bytes, so this cannot truncate.
        b[4..6].copy_from_slice(&(self.bitmap_len() as u16).to_be_bytes());
        for &p in &self.pids {
            let off = (p - base) as usize;
            b[MASK_HEADER_LEN + off / 8] |= 1 << (off % 8);
        }
        Some(len)
    }

    /// Parses a mask at the front of `b`; returns it and the bytes it took. Never panics.
    pub fn parse(b: &[u8]) -> Result<(Self, usize), MaskError> {
        let head = b.get(..MASK_HEADER_LEN).ok_or(MaskError::Truncated { need: MASK_HEADER_LEN, got: b.len() })?;
        let base = u32::from_be_bytes([head[0], head[1], head[2], head[3]]);
        let n = usize::from(u16::from_be_bytes([head[4], head[5]]));
        if n > (MAX_SPAN / 8) as usize {
            return Err(MaskError::TooWide(n));
        }
        let need = MASK_HEADER_LEN + n;
        let bits = b.get(MASK_HEADER_LEN..need).ok_or(MaskError::Truncated { need, got: b.len() })?;
        if n == 0 {
            return if base == 0 { Ok((PidMask::new(), need)) } else { Err(MaskError::NotCanonical) };
        }
        if bits[0] & 1 == 0 || bits[n - 1] == 0 {
            return Err(MaskError::NotCanonical);
        }
        let mut pids = Vec::with_capacity(bits.iter().map(|x| x.count_ones() as usize).sum());
        for (j, &byte) in bits.iter().enumerate() {
            for i in 0..8 {
                if byte & (1 << i) != 0 {
                    let pid = u64::from(base) + (j * 8 + i) as u64;
                    pids.push(u32::try_from(pid).map_err(|_| MaskError::Overflow)?);
                }
            }
        }
        Ok((PidMask { pids }, need))
    }
}

impl FromIterator<u32> for PidMask {
    /// Collects ids, skipping any that would widen the set past [`MAX_SPAN`].
    fn from_iter<I: IntoIterator<Item = u32>>(iter: I) -> Self {
        let mut m = PidMask::new();
        for p in iter {
            let _ = m.insert(p);
        }
        m
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_follow_the_bit_order() {
        let m = PidMask::from_pids([9, 3, 70, 5, 3]).unwrap();
        assert_eq!(m.iter().collect::<Vec<_>>(), [3, 5, 9, 70]);
        assert_eq!((m.position(3), m.position(9), m.position(70), m.position(4)), (Some(1), Some(3), Some(4), None));
        assert_eq!((m.next_after(3), m.next_after(6), m.next_after(70)), (Some(5), Some(9), None));
        assert_eq!(m.count_below(9), 2);
    }

    #[test]
    fn bytes_are_canonical() {
        let m = PidMask::from_pids([3, 5, 12]).unwrap();
        let mut b = [0u8; 16];
        let n = m.emit(&mut b).unwrap();
        // base 3; offsets 0, 2, 9 → byte 0 = 0b101, byte 1 = 0b10.
        assert_eq!(&b[..n], &[0, 0, 0, 3, 0, 2, 0b101, 0b10]);
        assert_eq!(PidMask::parse(&b[..n]), Ok((m, n)));
        assert_eq!(PidMask::parse(&[0, 0, 0, 0, 0, 0]), Ok((PidMask::new(), 6)));
        assert_eq!(PidMask::parse(&[0, 0, 0, 1, 0, 0]), Err(MaskError::NotCanonical));
        assert_eq!(PidMask::parse(&[0, 0, 0, 3, 0, 1, 0b10]), Err(MaskError::NotCanonical));
        assert_eq!(PidMask::parse(&[0, 0, 0, 3, 0, 2, 1, 0]), Err(MaskError::NotCanonical));
        assert_eq!(PidMask::parse(&[0, 0, 0, 3, 0, 2, 1]), Err(MaskError::Truncated { need: 8, got: 7 }));
        assert_eq!(PidMask::parse(&[0xFF, 0xFF, 0xFF, 0xFF, 0, 1, 0b11]), Err(MaskError::Overflow));
        assert_eq!(PidMask::parse(&[0, 0, 0, 0, 0xFF, 0xFF]), Err(MaskError::TooWide(0xFFFF)));
    }

    #[test]
    fn large_groups_fit_and_the_span_is_bounded() {
        let m: PidMask = (1..=1000).collect();
        assert_eq!(m.len(), 1000);
        let mut b = vec![0u8; m.buffer_len()];
        m.emit(&mut b).unwrap();
        assert_eq!(PidMask::parse(&b).unwrap().0, m);
        let mut far = PidMask::from_pids([u32::MAX]).unwrap();
        assert_eq!(far.insert(u32::MAX - MAX_SPAN), Err(SpanError { pid: u32::MAX - MAX_SPAN }));
        assert_eq!(far.insert(u32::MAX - (MAX_SPAN - 1)), Ok(true));
        let mut b = vec![0u8; far.buffer_len()];
        far.emit(&mut b).unwrap();
        assert_eq!(PidMask::parse(&b).unwrap().0, far);
    }
}
