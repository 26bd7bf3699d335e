//! The group view `grp` of seed 003 Table II: members with their incarnations and tickets.

use cohort_wire::group::{PidMask, ViewEntry};
use std::collections::BTreeMap;

/// One member as a view holds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Entry {
    pub incarnation: u32,
    pub ticket: u64,
    /// Added since the coordinator last completed a view push (`new(grp)`).
    pub new: bool,
}

/// A group view: process id to [`Entry`]. The member with the smallest ticket (ties broken by
/// the smaller pid, which STA makes moot) is the coordinator.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct View {
    entries: BTreeMap<u32, Entry>,
}

impl View {
    pub fn new() -> Self {
        View::default()
    }

    /// A view from pushed entries.
    pub fn from_entries(entries: &[ViewEntry]) -> Self {
        View {
            entries: entries
                .iter()
                .map(|e| (e.pid, Entry { incarnation: e.incarnation, ticket: e.ticket, new: e.new }))
                .collect(),
        }
    }

    pub fn get(&self, pid: u32) -> Option<&Entry> {
        self.entries.get(&pid)
    }

    /// Whether `pid` is a member with incarnation `incarnation`.
    pub fn has(&self, pid: u32, incarnation: u32) -> bool {
        self.get(pid).is_some_and(|e| e.incarnation == incarnation)
    }

    pub fn contains(&self, pid: u32) -> bool {
        self.entries.contains_key(&pid)
    }

    /// Whether `pid` may join without the view spanning more than
    /// [`MAX_SPAN`](cohort_wire::group::MAX_SPAN) pids (the reply mask's bound).
    pub fn admits(&self, pid: u32) -> bool {
        let lo = self.entries.keys().next().map_or(pid, |&l| l.min(pid));
        let hi = self.entries.keys().next_back().map_or(pid, |&h| h.max(pid));
        u64::from(hi) - u64::from(lo) < u64::from(cohort_wire::group::MAX_SPAN)
    }

    pub fn insert(&mut self, pid: u32, e: Entry) {
        self.entries.insert(pid, e);
    }

    pub fn remove(&mut self, pid: u32) -> Option<Entry> {
        self.entries.remove(&pid)
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Members in increasing pid order (`procs(grp)`).
    pub fn pids(&self) -> Vec<u32> {
        self.entries.keys().copied().collect()
    }

    pub fn iter(&self) -> impl Iterator<Item = (u32, &Entry)> + '_ {
        self.entries.iter().map(|(&p, e)| (p, e))
    }

    /// `minTicket(grp)`: the coordinator this view designates.
    pub fn min_ticket(&self) -> Option<u32> {
        self.entries.iter().min_by_key(|(p, e)| (e.ticket, **p)).map(|(&p, _)| p)
    }

    /// The largest ticket in the view.
    pub fn max_ticket(&self) -> u64 {
        self.entries.values().map(|e| e.ticket).max().unwrap_or(0)
    }

    /// `new(grp)` in increasing ticket order.
    pub fn new_members(&self) -> Vec<u32> {
        let mut v: Vec<(u64, u32)> = self.entries.iter().filter(|(_, e)| e.new).map(|(&p, e)| (e.ticket, p)).collect();
        v.sort_unstable();
        v.into_iter().map(|(_, p)| p).collect()
    }

    /// `old(grp)`: members that are not new.
    pub fn old_members(&self) -> Vec<u32> {
        self.entries.iter().filter(|(_, e)| !e.new).map(|(&p, _)| p).collect()
    }

    /// Marks every member old (the view push that announced them completed).
    pub fn commit(&mut self) {
        self.entries.values_mut().for_each(|e| e.new = false);
    }

    /// The members as a pid set, as heartbeats carry it.
    pub fn mask(&self) -> PidMask {
        self.entries.keys().copied().collect()
    }

    /// The view as VPUSH carries it (sorted by pid).
    pub fn to_entries(&self) -> Vec<ViewEntry> {
        self.entries
            .iter()
            .map(|(&pid, e)| ViewEntry { pid, incarnation: e.incarnation, ticket: e.ticket, new: e.new })
            .collect()
    }

    /// `(pid, incarnation, ticket)` of every member, for comparing views.
    pub fn summary(&self) -> Vec<(u32, u32, u64)> {
        self.entries.iter().map(|(&p, e)| (p, e.incarnation, e.ticket)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_smallest_ticket_coordinates_and_new_members_sort_by_ticket() {
        let mut v = View::new();
        v.insert(5, Entry { incarnation: 0, ticket: 2, new: false });
        v.insert(2, Entry { incarnation: 0, ticket: 3, new: false });
        v.insert(9, Entry { incarnation: 1, ticket: 5, new: true });
        v.insert(1, Entry { incarnation: 4, ticket: 4, new: true });
        assert_eq!(v.min_ticket(), Some(5));
        assert_eq!(v.new_members(), [1, 9]);
        assert_eq!(v.old_members(), [2, 5]);
        assert_eq!(v.max_ticket(), 5);
        assert_eq!(View::from_entries(&v.to_entries()), v);
        v.commit();
        assert!(v.new_members().is_empty());
        v.remove(5);
        assert_eq!(v.min_ticket(), Some(2));
    }
}
