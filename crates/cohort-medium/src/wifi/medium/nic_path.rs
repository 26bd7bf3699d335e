//! The shared transmit path of [`NicProfile::SharedTx`](crate::wifi::NicProfile::SharedTx):
//! hand-overs from the host to the card and which category the card serves. See
//! [`crate::wifi::nic`].

use super::*;
use crate::wifi::nic::IN_HANDOFF;

/// A hand-over entry that refills a card instead of ending a frame's hand-over.
pub(super) const NIC_REFILL: usize = usize::MAX;

impl<H: Clone> Medium<H> {
    /// Frames of `ac` handed to the station's card and waiting there (in hand-over or in its
    /// buffer; not those on the air): under `PerAc` the whole queue, under `SharedTx` at most
    /// `buffer_frames`, the rest waiting in the host. Seed 000's Fig. 11 counts these, all
    /// categories together, when a latency-sensitive frame arrives.
    pub fn nic_backlog(&self, station: usize, ac: Ac) -> usize {
        self.stations.get(station).map_or(0, |s| {
            let s = &s.acs[ac.index()];
            s.queue.len() + s.held.iter().take_while(|f| f.ticket != IN_HOST).count()
        })
    }

    /// [`Medium::handle_timeout`] with shared transmit paths: hand-overs that end first
    /// change who contends, so they run before transmissions at the same instant.
    pub(super) fn nic_handle_timeout(&mut self, now: Instant) {
        loop {
            let next = self.next_tx();
            if let Some(Reverse((h, ..))) = self.handoffs.peek()
                && *h <= now
                && next.is_none_or(|t| *h <= t)
            {
                self.nic_arrive();
                continue;
            }
            match next {
                Some(t) if t <= now => self.transmit(t),
                _ => break,
            }
        }
    }

    /// After an exchange that started `started`'s PPDUs and ended at `busy_end`: their
    /// stations' cards under a shared transmit path refill when the frames are reported done
    /// and serve their new head.
    pub(super) fn nic_after(&mut self, started: &[(usize, usize)], busy_end: Instant) {
        for (i, &(st, _)) in started.iter().enumerate() {
            if self.stations[st].cfg.nic.is_shared() && !started[..i].iter().any(|p| p.0 == st) {
                let after_timeout = self.timed_out.iter().filter(|o| o.0 == st).map(|o| o.2 + self.phy.ack_timeout());
                let now = after_timeout.fold(busy_end, Instant::max);
                // The driver hands more frames over when the card reports these done.
                self.nic_seq += 1;
                self.handoffs.push(Reverse((now, self.nic_seq, st, NIC_REFILL)));
                self.nic_update(st, now);
            }
        }
    }

    /// Starts handing frames of `st` over to its card, each AC as far as the card has room
    /// for it; each hand-over ends `handoff` after `now`.
    pub(super) fn nic_refill(&mut self, st: usize, now: Instant) {
        let (room, handoff) = (self.stations[st].cfg.nic.buffer_frames(), self.stations[st].cfg.nic.handoff());
        for ac in (0..4).rev() {
            let s = &mut self.stations[st].acs[ac];
            let free = room.saturating_sub(s.queue.len());
            for f in s.held.iter_mut().take(free) {
                if f.ticket == IN_HOST {
                    f.ticket = IN_HANDOFF;
                    self.nic_seq += 1;
                    self.handoffs.push(Reverse((now + handoff, self.nic_seq, st, ac)));
                }
            }
        }
    }

    /// The earliest hand-over ends: its frame joins the card's transmit path (or, for a
    /// [`NIC_REFILL`] entry, the card reports frames done and the driver refills it).
    pub(super) fn nic_arrive(&mut self) {
        let Some(Reverse((at, _, st, ac))) = self.handoffs.pop() else { return };
        if ac == NIC_REFILL {
            return self.nic_refill(st, at);
        }
        self.nic_seq += 1;
        let rank = self.nic_seq;
        if let Some(f) = self.stations[st].acs[ac].held.iter_mut().find(|f| f.ticket == IN_HANDOFF) {
            f.ticket = rank;
        }
        self.nic_update(st, at);
    }

    /// Lets only the category at the head of `st`'s transmit path contend: its `queue` gets
    /// the frames handed over before any other category's (what its next PPDUs may carry);
    /// everything else waits in `held`. A category that reaches the head starts a fresh
    /// backoff at `now`.
    pub(super) fn nic_update(&mut self, st: usize, now: Instant) {
        let fronts: [u64; 4] = std::array::from_fn(|ac| {
            let s = &self.stations[st].acs[ac];
            s.queue.front().or(s.held.front()).map_or(IN_HOST, |f| f.ticket).min(IN_HANDOFF)
        });
        let head = (0..4).filter(|&a| fronts[a] < IN_HANDOFF).min_by_key(|&a| fronts[a]);
        for ac in 0..4 {
            let start = self.contention_start(ac, now);
            let limit = match head {
                Some(h) if h == ac => (0..4).filter(|&b| b != ac).map(|b| fronts[b]).min().unwrap_or(IN_HANDOFF),
                _ => 0,
            };
            let s = &mut self.stations[st].acs[ac];
            let was = s.has_work();
            while s.queue.back().is_some_and(|f| f.ticket >= limit) {
                let Some(f) = s.queue.pop_back() else { break };
                s.held.push_front(f);
            }
            while s.held.front().is_some_and(|f| f.ticket < limit.min(IN_HANDOFF)) {
                let Some(f) = s.held.pop_front() else { break };
                s.queue.push_back(f);
            }
            if !was && s.has_work() {
                self.start_contending(st, ac, now, start, self.busy_until <= now);
            }
        }
        self.next_tx_cache.set(None);
    }
}
