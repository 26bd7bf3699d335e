//! Sliding replay window over 64-bit packet numbers (RFC 6479's bitmap, as WireGuard uses).
//!
//! The window is anchored at the highest packet number accepted so far. Anything above it is
//! new; anything less than [`WINDOW`]` - 64` below it is looked up in a ring of 64-bit words;
//! anything further behind is refused as too old. Sliding forward zeroes only the words the
//! anchor moves over, so accepting a packet costs O(1) however far it jumps. The last 64
//! positions are given up so that a word can be cleared whole (RFC 6479, section 3).

/// Packet numbers covered by the bitmap behind the highest one accepted. A packet up to
/// `WINDOW - 64` behind the highest accepted one (exclusive) is still accepted once.
pub const WINDOW: u64 = 1024;
const WORDS: usize = (WINDOW / 64) as usize;

/// Why the window refuses a packet number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// Already accepted.
    Replayed,
    /// Too far behind the highest accepted number to tell.
    TooOld,
}

/// Remembers which of the last [`WINDOW`] packet numbers were accepted.
#[derive(Debug, Clone)]
pub struct ReplayWindow {
    /// The highest accepted packet number; `None` before the first.
    highest: Option<u64>,
    bits: [u64; WORDS],
}

impl Default for ReplayWindow {
    fn default() -> Self {
        Self::new()
    }
}

impl ReplayWindow {
    pub const fn new() -> Self {
        ReplayWindow { highest: None, bits: [0; WORDS] }
    }

    /// The highest packet number accepted so far.
    pub fn highest(&self) -> Option<u64> {
        self.highest
    }

    fn word(pn: u64) -> usize {
        ((pn / 64) % WORDS as u64) as usize
    }

    fn bit(pn: u64) -> u64 {
        1u64 << (pn % 64)
    }

    /// `Ok` if `pn` would be accepted now. Does not change the window.
    pub fn check(&self, pn: u64) -> Result<(), Refusal> {
        let Some(highest) = self.highest else { return Ok(()) };
        if pn > highest {
            return Ok(());
        }
        if highest - pn >= WINDOW - 64 {
            // The word holding `pn` may already be reused by newer numbers.
            return Err(Refusal::TooOld);
        }
        if self.bits[Self::word(pn)] & Self::bit(pn) != 0 { Err(Refusal::Replayed) } else { Ok(()) }
    }

    /// Records `pn` as accepted, with the same refusals as [`check`](Self::check).
    /// Call only for authenticated packets.
    pub fn accept(&mut self, pn: u64) -> Result<(), Refusal> {
        self.check(pn)?;
        match self.highest {
            Some(highest) if pn <= highest => {}
            Some(highest) => {
                // Zero the words the anchor slides over: (highest/64, pn/64], at most all.
                let (from, to) = (highest / 64, pn / 64);
                let words = (to - from).min(WORDS as u64);
                for k in 1..=words {
                    self.bits[((from + k) % WORDS as u64) as usize] = 0;
                }
                self.highest = Some(pn);
            }
            None => self.highest = Some(pn),
        }
        self.bits[Self::word(pn)] |= Self::bit(pn);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Refusal::{Replayed, TooOld};

    #[test]
    fn in_order_out_of_order_duplicate_and_old() {
        let mut w = ReplayWindow::new();
        assert_eq!(w.accept(0), Ok(()));
        assert_eq!(w.accept(0), Err(Replayed));
        assert_eq!(w.accept(5), Ok(()));
        assert_eq!(w.accept(3), Ok(()), "late but inside the window");
        assert_eq!(w.accept(3), Err(Replayed));
        assert_eq!(w.accept(5000), Ok(()));
        assert_eq!(w.accept(5), Err(TooOld), "far behind the window");
        assert_eq!(w.accept(5000 - 900), Ok(()));
        assert_eq!(w.accept(4999), Ok(()));
        assert_eq!(w.accept(4999), Err(Replayed));
        assert_eq!(w.highest(), Some(5000));
    }

    #[test]
    fn window_edge() {
        let mut w = ReplayWindow::new();
        w.accept(10_000).unwrap();
        assert_eq!(w.check(10_000 - (WINDOW - 64)), Err(TooOld));
        assert_eq!(w.accept(10_000 - (WINDOW - 64) + 1), Ok(()));
    }

    #[test]
    fn the_largest_packet_numbers_neither_overflow_nor_reset_the_window() {
        let mut w = ReplayWindow::new();
        assert_eq!(w.accept(u64::MAX - 1), Ok(()));
        assert_eq!(w.accept(u64::MAX), Ok(()));
        assert_eq!(w.accept(u64::MAX), Err(Replayed));
        assert_eq!(w.accept(u64::MAX - 1), Err(Replayed));
        assert_eq!(w.accept(0), Err(TooOld));
        assert_eq!(w.accept(u64::MAX - 2), Ok(()));
    }

    /// Against a set-based model: every packet number accepted at most once, and anything
    /// within `WINDOW - 64` of the highest that was not yet accepted is accepted.
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
            let pn = if jump < 70 {
                top + (x >> 50) % 4
            } else if jump < 72 {
                top + (x >> 40) % 3000
            } else {
                top.saturating_sub((x >> 40) % 1200)
            };
            let got = w.accept(pn);
            let fresh = !seen.contains(&pn);
            if got.is_ok() {
                assert!(fresh, "pn {pn} accepted twice");
                seen.insert(pn);
                top = top.max(pn + 1);
            } else if fresh {
                assert_eq!(got, Err(TooOld));
                assert!(top - pn > WINDOW - 64, "pn {pn} refused though fresh and recent (top {top})");
            } else {
                let far = top - pn > WINDOW - 64;
                assert_eq!(got, Err(if far { TooOld } else { Replayed }));
            }
        }
    }
}
