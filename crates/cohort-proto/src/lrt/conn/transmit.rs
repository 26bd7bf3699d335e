//! The send path: what goes out next, in priority order.

use super::*;

/// Bytes a driver adds around each LRT packet (secure frame header and tag, UDP and IPv4
/// headers), used for pacing and overhead accounting.
pub const PER_PACKET_OVERHEAD: usize = cohort_wire::frame::OVERHEAD + 28;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RepairWhy {
    Signal,
    Feedback,
    Credit,
    Timer,
    Probe,
}

impl Connection {
    /// Largest LRT packet this connection emits; `poll_transmit` needs a buffer this long.
    pub fn max_packet_len(&self) -> usize {
        self.cfg.max_packet_len()
    }

    /// Tokens a symbol packet needs: the largest one, with the driver's framing.
    pub(super) fn symbol_wire_len(&self) -> usize {
        self.cfg.symbol_wire_len()
    }

    /// Writes the next packet into `buf` and returns its length. `pn` is the frame packet
    /// number the driver will seal it with (needed to match acknowledgements).
    pub fn poll_transmit(&mut self, now: Instant, pn: u64, buf: &mut [u8]) -> Option<usize> {
        let (len, data) = self.next_packet(now, buf)?;
        self.last_tx = now;
        self.stats.packets_sent += 1;
        self.stats.bytes_sent += len as u64;
        if data {
            self.data_total += 1;
        }
        if self.sent.len() >= SENT_LOG {
            self.sent.pop_front();
        }
        self.sent.push_back(Sent { pn, at: now, data_total: self.data_total, coder: self.emitted.take() });
        Some(len)
    }

    fn emit(&self, repr: &LrtRepr<'_>, buf: &mut [u8]) -> Option<usize> {
        let n = repr.emit(buf);
        if n.is_none() {
            tracing::error!(need = repr.buffer_len(), have = buf.len(), "lrt: transmit buffer too small");
        }
        n
    }

    fn ack(&self, now: Instant, coder: u16, full_rank: bool, seen: u64, released: u64, rank: u64) -> LrtRepr<'static> {
        let held = self.highest_pn_at.map_or(Duration::ZERO, |at| now.saturating_duration_since(at));
        LrtRepr::Ack(AckRepr {
            coder,
            full_rank,
            seen: seen as u32,
            released: released as u32,
            rank: rank as u32,
            loss_runs: self.loss_runs,
            echo_pn: self.highest_pn.unwrap_or(0),
            rx_data: self.rx_data,
            ack_delay_us: u32::try_from(held.as_micros()).unwrap_or(u32::MAX),
        })
    }

    fn next_packet(&mut self, now: Instant, buf: &mut [u8]) -> Option<(usize, bool)> {
        if let State::Closed(_) = self.state {
            let code = self.close_pending.take()?;
            if self.closing.is_none() {
                let every = self.rtt.probe_timeout().min(MAX_CLOSING / CLOSING_PTOS);
                let (until, next_copy) = (now + every * CLOSING_PTOS, now + every);
                self.closing = Some(Closing { code, until, heard: 0, next_copy, every });
            }
            return self.emit(&LrtRepr::Close { code }, buf).map(|n| (n, false));
        }
        if let Some(due) = self.hello_due
            && self.state == State::Handshaking
        {
            if due > now {
                return None;
            }
            self.hello_due = Some(now + self.cfg.handshake_retry);
            let hello = self.cfg.hello(self.conn_id);
            return self.emit(&LrtRepr::Hello(hello), buf).map(|n| (n, false));
        }
        if self.hello_ack_pending {
            self.hello_ack_pending = false;
            let hello = self.cfg.hello(self.conn_id);
            return self.emit(&LrtRepr::HelloAck(hello), buf).map(|n| (n, false));
        }
        if let Some(id) = self.stale_acks.pop_front() {
            self.stats.acks_sent += 1;
            self.stats.full_rank_acks_sent += 1;
            let all = u64::from(self.cfg.coder_symbols);
            return self.emit(&self.ack(now, id, true, all, all, all), buf).map(|n| (n, false));
        }
        let ack_ready = self.ack_now || self.ack_due.is_some_and(|d| now >= d);
        if ack_ready && let Some(c) = self.rx.iter_mut().find(|c| c.ack_pending) {
            c.ack_pending = false;
            let (id, seen, rel, rank) = (c.id, c.dec.seen(), c.dec.next_release(), c.dec.rank());
            if !self.rx.iter().any(|c| c.ack_pending) {
                self.acks_owed = 0;
                self.ack_due = None;
                self.ack_now = false;
            }
            self.stats.acks_sent += 1;
            return self.emit(&self.ack(now, id, false, seen, rel, rank), buf).map(|n| (n, false));
        }
        if self.state != State::Established {
            return None;
        }
        if let Some(n) = self.next_symbol(now, buf) {
            return Some((n, true));
        }
        if now >= self.last_tx + self.cfg.keepalive {
            return self.emit(&LrtRepr::Ping, buf).map(|n| (n, false));
        }
        None
    }

    /// Whether a new source symbol has somewhere to go: the newest coder has room, or a new
    /// coder may open.
    pub(super) fn source_room(&self) -> bool {
        match self.tx.back() {
            None => true,
            Some(c) if c.closed(&self.cfg) => self.tx.len() < self.cfg.max_coders,
            Some(c) => !c.enc.is_full(),
        }
    }

    fn open_coder(&mut self, now: Instant) {
        // It takes its buffers from the pool as it pushes (see `buffers`).
        let enc = Encoder::new(self.cfg.coder_config()).unwrap_or_else(|_| unreachable!("validated config"));
        self.tx.push_back(TxCoder {
            id: self.next_coder,
            enc,
            lens: VecDeque::new(),
            credit: 0.0,
            owed: 0,
            uncovered_since: None,
            uncovered: 0,
            last_progress: now,
            last_repair: now,
            seen: 0,
            repairs_sent: 0,
            answers_sent: 0,
        });
        self.next_coder = self.next_coder.wrapping_add(1);
        self.stats.coders_opened += 1;
    }

    fn next_symbol(&mut self, now: Instant, buf: &mut [u8]) -> Option<usize> {
        let wire = self.symbol_wire_len();
        // Repairs the driver asked for (symbols it knows lost) come first, then source
        // symbols: they are the user's data (seed 004 §III-E).
        if self.urgent_repairs > 0 && !self.tx.iter().any(|c| !c.enc.window().is_empty()) {
            self.urgent_repairs = 0;
        }
        // A repair earned by the redundancy rate (`credit`) also goes before waiting sources.
        // Seed 004 §III-E sends sources as fast as the bucket allows and repairs in the
        // opportunities left, within a rate of at least `src·(1 + r)`; a sender that always
        // has sources waiting (a bulk transfer, a multipath window full of them) leaves no
        // opportunity, its code rate falls to 1 and a loss waits for feedback alone, which
        // answers only what is already missing: at 10% loss a saturated 10 Mbit/s path held
        // one symbol undecoded for 600 ms while later ones kept arriving. Sending the earned
        // repair first keeps `src ≤ rate/(1 + r)`, which is that interval seen from the source.
        // Only once the loss rate is measured: the prior (`initial_loss`) is a guess, and
        // repairs it earns ahead of a short transfer's sources delayed its end by a round
        // trip or more on a clean path (64 KiB over 10 Mbit/s: 161 → 238 ms); they still go
        // in the gaps.
        let earned = self.loss.measured();
        let owed = self.tx.iter().any(|c| (c.owed > 0 || (earned && c.credit >= 1.0)) && !c.enc.window().is_empty());
        if !self.divider.is_empty() && self.source_room() && self.urgent_repairs == 0 && !owed {
            if !self.bucket.try_take(now, wire) {
                return None;
            }
            if self.tx.back().is_none_or(|c| c.closed(&self.cfg)) {
                self.open_coder(now);
            }
            let r = self.redundancy();
            self.divider.next_symbol(&mut self.sym);
            let c = self.tx.back_mut()?;
            c.enc.add_buffers(&mut self.buffers, 1);
            let index = c.enc.push(&self.sym).ok()?;
            c.lens.push_back(self.sym.len() as u16);
            c.credit += r;
            c.uncovered_since.get_or_insert(now);
            c.uncovered = c.uncovered.saturating_add(1);
            let header = SymbolRepr { coder: c.id, kind: SymbolKind::Source { index: index as u32 } };
            self.emitted = Some((c.id, c.enc.rank(), c.answers_sent));
            self.stats.source_sent += 1;
            if self.want_writable && self.divider.queued_bytes() < self.cfg.send_buffer_bytes / 2 {
                self.want_writable = false;
                self.notify(Event::Writable);
            }
            return self.emit(&LrtRepr::Symbol { header, payload: &self.sym }, buf);
        }
        // Then repairs, sending opportunities shared round-robin among coders.
        let n = self.tx.len();
        for k in 0..n {
            let i = (self.rr + k) % n;
            let c = &self.tx[i];
            if c.enc.window().is_empty() {
                continue;
            }
            let why = if self.urgent_repairs > 0 {
                RepairWhy::Signal
            } else if c.owed > 0 {
                RepairWhy::Feedback
            } else if c.credit >= 1.0 {
                RepairWhy::Credit
            } else if c.timer_at(&self.cfg).is_some_and(|t| now >= t) {
                RepairWhy::Timer
            } else if now >= c.probe_at(&self.rtt, self.cfg.ack_delay) {
                RepairWhy::Probe
            } else {
                continue;
            };
            if !self.bucket.try_take(now, wire) {
                return None;
            }
            self.rr = i + 1;
            let size = self.cfg.symbol_size;
            self.sym.resize(size, 0);
            let c = &mut self.tx[i];
            // Every repair covers the whole window: a decoder can release a lost symbol only
            // once it holds as many equations as unknowns up to the newest symbol they involve,
            // and leaving older unknowns out of a repair never helps that.
            let info = c.enc.repair(&mut self.sym).ok()?;
            // Symbols travel without their zero padding, so the combination is zero beyond
            // the longest symbol in the window: that tail need not travel either.
            let used = usize::from(c.lens.iter().copied().max().unwrap_or(size as u16));
            c.credit = (c.credit - 1.0).max(-1.0);
            c.uncovered_since = None;
            c.uncovered = 0;
            c.last_repair = now;
            c.repairs_sent += 1;
            if matches!(why, RepairWhy::Signal | RepairWhy::Feedback) {
                c.answers_sent += 1;
            }
            self.emitted = Some((c.id, c.enc.rank(), c.answers_sent));
            self.stats.repair_sent += 1;
            match why {
                RepairWhy::Signal => {
                    self.urgent_repairs -= 1;
                    self.stats.repair_signal_sent += 1;
                }
                RepairWhy::Feedback => {
                    c.owed -= 1;
                    self.stats.repair_feedback_sent += 1;
                }
                RepairWhy::Credit => {}
                RepairWhy::Timer => self.stats.repair_timer_sent += 1,
                RepairWhy::Probe => self.stats.repair_probe_sent += 1,
            }
            let header = SymbolRepr {
                coder: c.id,
                kind: SymbolKind::Repair { first: info.first as u32, count: info.count, key: info.key },
            };
            return self.emit(&LrtRepr::Symbol { header, payload: &self.sym[..used] }, buf);
        }
        None
    }
}
