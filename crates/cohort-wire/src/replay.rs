//! Sliding replay window over 64-bit packet numbers (RFC 6479's bitmap, as WireGuard uses).

/// Packet numbers tracked behind the highest one accepted.
pub const WINDOW: u64 = 1024;
const WORDS: usize = (WINDOW / 64) as usize;

/// Remembers which of the last [`WINDOW`] packet numbers were accepted.
#[derive(Debug, Clone)]
pub struct ReplayWindow {
    /// One past the highest accepted packet number (0: nothing yet).
    top: u64,
    bits: [u64; WORDS],
}

impl Default for ReplayWindow {
    fn default() -> Self {
        Self::new()
    }
}

impl ReplayWindow {
    pub fn new() -> Self {
        ReplayWindow { top: 0, bits: [0; WORDS] }
    }

    fn slot(pn: u64) -> (usize, u64) {
        (((pn / 64) % WORDS as u64) as usize, 1u64 << (pn % 64))
    }

    /// `Ok` if `pn` would be accepted; `Err(true)` if it is older than the window,
    /// `Err(false)` if it was already accepted.
    pub fn check(&self, pn: u64) -> Result<(), bool> {
        if pn >= self.top {
            return Ok(());
        }
        if self.top - pn > WINDOW - 64 {
            // The word holding `pn` may already be reused by newer numbers.
            return Err(true);
        }
        let (w, b) = Self::slot(pn);
        if self.bits[w] & b != 0 { Err(false) } else { Ok(()) }
    }

    /// Records `pn` as accepted, with the same errors as [`check`](Self::check).
    pub fn accept(&mut self, pn: u64) -> Result<(), bool> {
        self.check(pn)?;
        if pn >= self.top {
            // Clear the words the window slides over.
            let old_word = self.top.div_ceil(64);
            let new_word = (pn + 1).div_ceil(64);
            let clear = (new_word - old_word).min(WORDS as u64);
            for k in 0..clear {
                self.bits[((old_word + k) % WORDS as u64) as usize] = 0;
            }
            self.top = pn + 1;
        }
        let (w, b) = Self::slot(pn);
        self.bits[w] |= b;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn in_order_out_of_order_duplicate_and_old() {
        let mut w = ReplayWindow::new();
        assert_eq!(w.accept(0), Ok(()));
        assert_eq!(w.accept(0), Err(false));
        assert_eq!(w.accept(5), Ok(()));
        assert_eq!(w.accept(3), Ok(()), "late but inside the window");
        assert_eq!(w.accept(3), Err(false));
        assert_eq!(w.accept(5000), Ok(()));
        assert_eq!(w.accept(5), Err(true), "far behind the window");
        assert_eq!(w.accept(5000 - 900), Ok(()));
        assert_eq!(w.accept(4999), Ok(()));
        assert_eq!(w.accept(4999), Err(false));
    }

    /// Against a set-based model: every packet number accepted at most once, and anything
    /// within `WINDOW - 64` of the top that was not yet accepted is accepted.
    #[test]
    fn matches_a_model() {
        use std::collections::HashSet;
        let mut w = ReplayWindow::new();
        let mut seen = HashSet::new();
        let mut top = 0u64;
        let mut x = 12345u64;
        for _ in 0..200_000 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let jump = (x >> 33) % 100;
            let pn = if jump < 70 { top + (x >> 50) % 4 } else { top.saturating_sub((x >> 40) % 1200) };
            let got = w.accept(pn);
            let fresh = !seen.contains(&pn);
            if got.is_ok() {
                assert!(fresh, "pn {pn} accepted twice");
                seen.insert(pn);
                top = top.max(pn + 1);
            } else if fresh {
                assert!(top - pn > WINDOW - 64, "pn {pn} refused though fresh and recent (top {top})");
            }
        }
    }
}
