//! A bounded store of results waiting for their callers.
//!
//! A caller that starts operations and never collects their results must not make the socket
//! grow without bound. Results are keyed by a number that grows with completion order; beyond
//! the capacity the oldest is dropped (counted), and a caller asking for a dropped result is
//! told so instead of waiting forever.

use std::collections::BTreeMap;

/// What [`Backlog::take`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Taken<V> {
    Ready(V),
    /// The result was dropped to respect the capacity.
    Dropped,
    /// Not completed yet.
    Pending,
}

/// At most `capacity` results, by key.
#[derive(Debug)]
pub struct Backlog<K, V> {
    items: BTreeMap<K, V>,
    capacity: usize,
    /// The largest key dropped so far: keys up to it that are absent are gone for good.
    dropped_through: Option<K>,
    dropped: u64,
}

impl<K: Ord + Copy, V> Backlog<K, V> {
    pub fn new(capacity: usize) -> Self {
        Backlog { items: BTreeMap::new(), capacity: capacity.max(1), dropped_through: None, dropped: 0 }
    }

    /// Stores `v` under `k` (keys arrive in increasing order), dropping the oldest beyond the
    /// capacity.
    pub fn insert(&mut self, k: K, v: V) {
        self.items.insert(k, v);
        while self.items.len() > self.capacity {
            if let Some((old, _)) = self.items.pop_first() {
                self.dropped_through = self.dropped_through.max(Some(old));
                self.dropped += 1;
            }
        }
    }

    /// Removes and returns the result under `k`; each result is taken once (its single waiter
    /// takes it).
    pub fn take(&mut self, k: K) -> Taken<V> {
        match self.items.remove(&k) {
            Some(v) => Taken::Ready(v),
            None if self.dropped_through.is_some_and(|d| k <= d) => Taken::Dropped,
            None => Taken::Pending,
        }
    }

    /// Results waiting now.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.items.len()
    }

    /// Results dropped to respect the capacity.
    pub fn dropped(&self) -> u64 {
        self.dropped
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_million_uncollected_results_stay_within_capacity_and_dropped_ones_say_so() {
        let mut b = Backlog::new(1024);
        for k in 0..1_000_000u64 {
            b.insert(k, k);
            assert!(b.len() <= 1024);
        }
        assert_eq!(b.dropped(), 1_000_000 - 1024);
        assert_eq!(b.take(5), Taken::Dropped);
        assert_eq!(b.take(999_999), Taken::Ready(999_999));
        assert_eq!(b.take(999_999), Taken::Pending, "taken once, nothing left under it");
        assert_eq!(b.take(1_000_000), Taken::Pending);
    }
}
