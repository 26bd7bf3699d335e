//! The receive path: authenticated packets in, messages and acknowledgements out.

use super::*;

impl Connection {
    /// Takes one authenticated LRT packet (the plaintext of a secure frame) and the frame's
    /// packet number. A malformed packet is counted and dropped; it never changes state.
    pub fn handle_packet(&mut self, now: Instant, pn: u64, bytes: &[u8]) {
        if matches!(self.state, State::Closed(_)) {
            self.while_closing(now, bytes);
            return;
        }
        self.stats.packets_received += 1;
        self.stats.bytes_received += bytes.len() as u64;
        let pkt = match LrtRepr::parse(bytes) {
            Ok(p) => p,
            Err(e) => {
                tracing::debug!(%e, "lrt: malformed packet dropped");
                self.stats.malformed += 1;
                return;
            }
        };
        self.last_rx = now;
        if self.highest_pn.is_some_and(|h| pn > h.saturating_add(1)) {
            self.loss_runs = self.loss_runs.wrapping_add(1);
        }
        if self.highest_pn.is_none_or(|h| pn > h) {
            self.highest_pn = Some(pn);
            self.highest_pn_at = Some(now);
        }
        match pkt {
            LrtRepr::Hello(h) => self.on_hello(h),
            LrtRepr::HelloAck(h) => self.on_hello_ack(h),
            LrtRepr::Symbol { header, payload } => self.on_symbol(now, header, payload),
            LrtRepr::Ack(a) => self.on_ack(now, a),
            LrtRepr::Ping => {}
            LrtRepr::Close { code } => self.close_with(CloseReason::Peer(code), None),
        }
    }

    /// A packet after this end closed: during the closing period, the peer evidently did not
    /// hear the CLOSE, which goes again (at the 1st, 2nd, 4th... packet heard, so a peer
    /// sending fast draws few); the peer's own CLOSE ends the period.
    fn while_closing(&mut self, now: Instant, bytes: &[u8]) {
        let Some(c) = self.closing.as_mut().filter(|c| now < c.until) else { return };
        match LrtRepr::parse(bytes) {
            Ok(LrtRepr::Close { .. }) => self.closing = None,
            Ok(_) => {
                c.heard = c.heard.saturating_add(1);
                if c.heard.is_power_of_two() && self.close_pending.is_none() {
                    self.close_pending = Some(c.code);
                    self.stats.closes_repeated += 1;
                }
            }
            Err(_) => self.stats.malformed += 1,
        }
    }

    fn check_params(&mut self, theirs: HelloRepr) -> bool {
        let ours = self.cfg.hello(theirs.conn_id);
        if theirs != ours {
            self.close_with(CloseReason::ParamMismatch { ours, theirs }, Some(code::PARAMS));
            return false;
        }
        true
    }

    fn establish(&mut self) {
        if self.state == State::Handshaking {
            self.state = State::Established;
            self.notify(Event::Connected);
        }
    }

    fn on_hello(&mut self, h: HelloRepr) {
        if self.role != Role::Server {
            self.stats.malformed += 1;
            return;
        }
        if self.state == State::Established && h.conn_id != self.conn_id {
            self.close_with(CloseReason::Protocol("HELLO for another connection".into()), Some(code::PROTOCOL));
            return;
        }
        if self.check_params(h) {
            self.conn_id = h.conn_id;
            self.hello_ack_pending = true;
            self.establish();
        }
    }

    fn on_hello_ack(&mut self, h: HelloRepr) {
        if self.role != Role::Client || h.conn_id != self.conn_id {
            self.stats.malformed += 1;
            return;
        }
        if self.check_params(h) {
            self.hello_due = None;
            self.establish();
        }
    }

    fn on_symbol(&mut self, now: Instant, header: SymbolRepr, payload: &[u8]) {
        if self.state != State::Established {
            self.stats.symbols_rejected += 1;
            return;
        }
        self.stats.symbols_received += 1;
        self.rx_data += 1;
        let ahead = header.coder.wrapping_sub(self.filter);
        if ahead >= 0x8000 {
            // Seed 004 §III-D: a symbol of a coder already fully decoded means our full-rank
            // acknowledgement was lost; send it again.
            self.stats.out_of_date += 1;
            if !self.stale_acks.contains(&header.coder) && self.stale_acks.len() < STALE_ACKS {
                self.stale_acks.push_back(header.coder);
            }
            return;
        }
        if usize::from(ahead) >= self.cfg.max_coders || payload.len() > self.cfg.symbol_size {
            self.stats.symbols_rejected += 1;
            return;
        }
        while self.rx.len() <= usize::from(ahead) {
            let id = self.filter.wrapping_add(self.rx.len() as u16);
            // One for the decoder's working equation; the slots take theirs as symbols come.
            let buffers = self.take_buffers(1);
            let dec = Decoder::with_buffers(self.cfg.coder_config(), Kernel::best(), buffers)
                .unwrap_or_else(|_| unreachable!("validated config"));
            self.rx.push_back(RxCoder { id, dec, ack_pending: false, newest: 0, missing: 0 });
        }
        let coder = &mut self.rx[usize::from(ahead)];
        debug_assert_eq!(coder.id, header.coder);
        // A symbol takes at most two buffers (a slot's and the next equation's).
        coder.dec.add_buffers(&mut self.buffers, 2);
        let seen_before = coder.dec.seen();
        let newest = match header.kind {
            SymbolKind::Source { index } => u64::from(index) + 1,
            SymbolKind::Repair { first, count, .. } => u64::from(first) + u64::from(count),
        };
        let res = match header.kind {
            SymbolKind::Source { index } => coder.dec.push_source(u64::from(index), payload),
            SymbolKind::Repair { first, count, key } => {
                self.padded[..payload.len()].copy_from_slice(payload);
                self.padded[payload.len()..].fill(0);
                let info = RepairInfo { first: u64::from(first), count, key };
                coder.dec.push_repair(info, &self.padded)
            }
        };
        // A symbol beyond a gap reveals a loss: the sender hears of it at once, so that where
        // the round trip is short the repair it sends in answer arrives before any timer
        // would have sent one (the receiver's half of feedback-driven repair).
        if res.is_ok() {
            coder.newest = coder.newest.max(newest);
            let missing = coder.newest.saturating_sub(coder.dec.rank());
            if missing > coder.missing {
                coder.ack_pending = true;
                self.ack_now = true;
            }
            coder.missing = missing;
        }
        match res {
            // While a column is missing the sender hears of every new equation too (within
            // `ack_every`/`ack_delay`), not only of seen-prefix changes: with a reorder window
            // it cannot judge the acknowledgement that first reveals a gap, and only later ones
            // show the gap outlasting the window.
            Ok(Outcome::Innovative) => coder.ack_pending |= coder.dec.seen() != seen_before || coder.missing > 0,
            // Redundant or stale: the sender is ahead of what it knows of us; tell it now.
            Ok(_) => {
                coder.ack_pending = true;
                self.ack_now = true;
            }
            Err(e) => {
                tracing::debug!(%e, "lrt: symbol rejected");
                self.stats.symbols_rejected += 1;
            }
        }
        self.release();
        self.acks_owed += 1;
        self.ack_due.get_or_insert(now + self.cfg.ack_delay);
        if self.acks_owed >= self.cfg.ack_every {
            self.ack_now = true;
        }
    }

    /// Moves decoded symbols, in order across coders, into messages while `recv` has room.
    /// Returns whether anything moved.
    pub(super) fn release(&mut self) -> bool {
        let mut moved = false;
        while self.recv_bytes < self.cfg.recv_buffer_bytes {
            let Some(front) = self.rx.front_mut() else {
                break;
            };
            if let Some((_, sym)) = front.dec.pop() {
                front.ack_pending = true;
                moved = true;
                let before = self.recv_queue.len();
                let pushed = self.reasm.push_symbol(sym, &mut self.recv_queue);
                // Messages completed before a malformed length prefix are whole and in order:
                // they are delivered, and counted, before the connection closes.
                for m in self.recv_queue.range(before..) {
                    self.recv_bytes += m.len();
                }
                let added = (self.recv_queue.len() - before) as u64;
                self.stats.messages_received += added;
                if added > 0 && before == 0 {
                    self.notify(Event::Readable);
                }
                if let Err(e) = pushed {
                    self.close_with(CloseReason::Protocol(e.to_string()), Some(code::PROTOCOL));
                    return moved;
                }
                continue;
            }
            if front.dec.next_release() >= u64::from(self.cfg.coder_symbols) {
                // Every symbol of this coder is out: the filter moves on (seed 004 §III-D).
                let done = match self.rx.pop_front() {
                    Some(c) => {
                        self.allocated_by_finished += c.dec.allocated();
                        self.buffers.extend(c.dec.into_buffers());
                        c.id
                    }
                    None => self.filter,
                };
                if self.stale_acks.len() < STALE_ACKS {
                    self.stale_acks.push_back(done);
                }
                self.filter = self.filter.wrapping_add(1);
                continue;
            }
            break;
        }
        moved
    }

    fn on_ack(&mut self, now: Instant, a: AckRepr) {
        // Round trip and loss from the echoed packet number.
        let mut then = None;
        if self.last_echo.is_none_or(|e| a.echo_pn > e) {
            let mut rtt = None;
            if let Ok(i) = self.sent.binary_search_by_key(&a.echo_pn, |s| s.pn) {
                let s = self.sent[i];
                rtt = Some(now - s.at);
                self.rtt.sample(now - s.at);
                let base = self.last_echo.and_then(|e| self.sent.binary_search_by_key(&e, |s| s.pn).ok());
                if let Some(b) = base {
                    let sent = s.data_total - self.sent[b].data_total;
                    let received = a.rx_data.saturating_sub(self.last_rx_data);
                    let runs = a.loss_runs.wrapping_sub(self.last_loss_runs);
                    self.loss.record_runs(sent, received, u64::from(runs));
                }
                // The coder as it stood when the newest symbol packet that must have arrived
                // by now left: the echoed one, or with a reorder window (several paths) the
                // newest sent that long before it.
                let cutoff = s.at.saturating_sub(self.reorder_window);
                let j = (i.saturating_sub(SENT_LOG)..=i)
                    .rev()
                    .find(|&k| self.sent[k].at <= cutoff && self.sent[k].coder.is_some());
                then = j.and_then(|k| self.sent[k].coder);
                self.echo_then = then;
                // Later acknowledgements look no further back than this one's pick. With none
                // old enough yet (the first reorder window after a pause), nothing goes: the
                // packets of that window are what the next ones will pick.
                self.sent.drain(..j.unwrap_or(0));
            }
            self.last_echo = Some(a.echo_pn);
            self.last_rx_data = a.rx_data;
            self.last_loss_runs = a.loss_runs;
            let sample = AckSample {
                now,
                rtt,
                ack_delay: Duration::from_micros(u64::from(a.ack_delay_us)),
                loss: self.loss.loss(),
                delivered: a.rx_data,
                packet_bytes: self.symbol_wire_len(),
                srtt: self.rtt.srtt(),
                app_limited: self.divider.is_empty(),
            };
            if let Some(r) = self.rate.as_mut().and_then(|e| e.on_ack(sample)) {
                self.bucket.set_rate(now, r as u64);
            }
        } else if self.last_echo == Some(a.echo_pn) {
            // Another coder's acknowledgement sent with the same echo.
            then = self.echo_then;
        }
        let cfg = &self.cfg;
        let Some(pos) = self.tx.iter().position(|c| c.id == a.coder) else {
            return;
        };
        let r = self.redundancy();
        let c = &mut self.tx[pos];
        // Rank-update ACKs drive repairs too (seed 004 §III-C), as a selective-repeat ARQ's
        // gap report drives retransmissions: when that packet left, the decoder should
        // have held `rank_then` columns; each it lacks is answered by one repair, ahead of new
        // sources, unless an answer sent after that packet is already on its way. Repairs sent
        // for other reasons are not counted: they are there for losses nobody knows of yet.
        // This is the feedback half of repair: where the round trip is short it recovers a
        // loss sooner than proactive redundancy would, and it recovers a burst or a partition
        // within a round trip.
        if let Some((id, rank_then, answers_then)) = then
            && id == c.id
        {
            // At most the columns the window still holds: a peer's rank far behind (or a
            // wrapped one) never asks for more repairs than could help.
            // The rank alone misses a loss behind sources that kept arriving (a bulk stream,
            // or sources on a faster path): they lift the rank to `rank_then` and beyond while
            // the lost column still blocks delivery. The first unseen column says so: if it
            // lies below `rank_then`, at least one column the peer must have had lacks an
            // equation.
            let window = c.enc.window();
            let behind = rank_then.saturating_sub(u64::from(a.rank));
            let blocked = u64::from(u64::from(a.seen) < rank_then);
            let held = (window.end - window.start) as f64;
            let ask = ((behind as f64).min(held) * (1.0 + r)).ceil().max(blocked as f64);
            let answering = (c.answers_sent - answers_then) as f64;
            c.owed = c.owed.max((ask - answering).max(0.0) as u32);
        }
        let rank = c.enc.rank();
        let seen = u64::from(a.seen).min(rank);
        let released = u64::from(a.released).min(rank);
        if seen > c.seen {
            c.seen = seen;
            c.last_progress = now;
        }
        let dropped = c.enc.ack(seen, released);
        for _ in 0..dropped {
            c.lens.pop_front();
        }
        let finished = a.full_rank || (c.closed(cfg) && released >= u64::from(cfg.coder_symbols));
        if finished && let Some(c) = self.tx.remove(pos) {
            self.allocated_by_finished += c.enc.allocated();
            self.buffers.extend(c.enc.into_buffers());
        }
    }
}
