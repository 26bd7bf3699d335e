//! Block-ack agreements, BlockAckReq exchanges and A-MPDU/A-MSDU building: the parts of
//! the [`Medium`] that aggregation adds. See the [module docs](super::super).

use super::*;
use crate::wifi::PhyKind;

impl<H: Clone> Medium<H> {
    /// The BlockAckReq exchange (BlockAckReq, SIFS, BlockAck at the control rate) that
    /// follows an A-MPDU whose block ack was missed, in the access won at `t`: ns-3's
    /// `QosTxop` attribute `UseExplicitBarAfterMissedBlockAck` is true by default, so a lost
    /// A-MPDU costs this whole access more before its MPDUs are sent again
    /// (`HtFrameExchangeManager::MissedBlockAck`), and the block ack resets the contention
    /// window. Returns when the medium is free again.
    pub(super) fn block_ack_req(&mut self, st: usize, ac: usize, t: Instant) -> Instant {
        let air = self.phy.legacy_duration(BLOCK_ACK_REQ_BYTES, self.phy.basic_mbps);
        let end = t + air + self.phy.sifs + self.response(2);
        let s = &mut self.stations[st].acs[ac];
        s.stats.attempts += 1;
        s.stats.airtime += air;
        s.bar_pending = None;
        self.reset_cw(st, ac);
        // The MPDUs it covered are no longer in flight: those whose lifetime ran out while
        // they were leave, and move the window by another BlockAckReq.
        self.expire_in_flight(st, ac, end);
        self.release(st, ac);
        end
    }

    /// The agreement of `(st, ac)` with recipient `to` at `now`.
    pub(super) fn ba_view(&self, st: usize, ac: usize, to: usize, now: Instant) -> BaView {
        match self.stations[st].acs[ac].ba_peers.iter().find(|p| p.0 == to) {
            None => BaView::Reset,
            Some((_, None)) => BaView::Established,
            Some((_, Some(deadline))) if now < *deadline => BaView::Waiting(*deadline),
            Some((_, Some(deadline))) if now < *deadline + FAILED_ADDBA_TIMEOUT => BaView::NoReply,
            Some(_) => BaView::Reset,
        }
    }

    /// The recipient with which `(st, ac)` must set up a block-ack agreement at `now` before
    /// it sends its front frame, if any: as ns-3's `HtFrameExchangeManager::
    /// NeedSetupBlockAck`, when the category may send A-MPDUs and more than one frame waits,
    /// or always on VHT, and no agreement exists or a failed one has been reset.
    pub(super) fn needs_addba(&self, st: usize, ac: usize, now: Instant) -> Option<usize> {
        let s = &self.stations[st].acs[ac];
        let Dest::Unicast(to) = s.queue.front()?.dest else { return None };
        let wanted =
            (self.stations[st].cfg.ampdu[ac].max_frames > 1 && s.queue.len() > 1) || self.phy.kind == PhyKind::Vht;
        (wanted && self.ba_view(st, ac, to, now) == BaView::Reset).then_some(to)
    }

    /// The ADDBA Request exchange (request, SIFS, ACK) to `to` in the access won at `t`;
    /// returns when the medium is free again. The recipient then owes an ADDBA Response,
    /// which it sends in an access of its own, in the same category; the originator's
    /// frames for `to` wait for it up to [`ADDBA_RESPONSE_TIMEOUT`]. Agreements never end
    /// once established (ns-3's inactivity timeout is off by default).
    pub(super) fn addba(&mut self, st: usize, ac: usize, to: usize, t: Instant) -> Instant {
        let air = self.phy.legacy_duration(ADDBA_REQUEST_BYTES, self.phy.basic_mbps);
        let end = t + air + self.phy.sifs + self.phy.ack_duration();
        let s = &mut self.stations[st].acs[ac];
        s.stats.attempts += 1;
        s.stats.airtime += air;
        s.req_attempts = 0;
        s.ba_peers.retain(|p| p.0 != to);
        s.ba_peers.push((to, Some(end + ADDBA_RESPONSE_TIMEOUT)));
        // An acknowledged MMPDU is a success (ns-3: `ReceivedNormalAck` resets CW).
        self.reset_cw(st, ac);
        self.draw_backoff(st, ac);
        // The recipient queues the response when the ACK has gone, the medium idle
        // (replacing an older one to the same originator) and, if it had nothing to send,
        // starts contending.
        let aifs = self.phy.aifs(self.edca[ac].aifsn);
        let r = &mut self.stations[to].acs[ac];
        let idle = !r.has_work();
        if r.addba_resp.front() == Some(&st) {
            // A new response replaces the one being retried: its count starts afresh.
            r.resp_attempts = 0;
        }
        r.addba_resp.retain(|&o| o != st);
        r.addba_resp.push_back(st);
        if idle {
            self.start_contending(to, ac, end, end + aifs, true);
        }
        end
    }

    /// The ADDBA Response exchange (response, SIFS, ACK) of recipient `st` in the access won
    /// at `t`. It establishes the agreement even when it comes late, after the originator
    /// stopped waiting (ns-3's `BlockAckManager::UpdateOriginatorAgreement` accepts it in
    /// any state).
    pub(super) fn addba_response(&mut self, st: usize, ac: usize, t: Instant) -> Instant {
        let air = self.phy.legacy_duration(ADDBA_RESPONSE_BYTES, self.phy.basic_mbps);
        let end = t + air + self.phy.sifs + self.phy.ack_duration();
        self.reset_cw(st, ac);
        let s = &mut self.stations[st].acs[ac];
        s.stats.attempts += 1;
        s.stats.airtime += air;
        s.resp_attempts = 0;
        if let Some(orig) = s.addba_resp.pop_front()
            && let Some(p) = self.stations[orig].acs[ac].ba_peers.iter_mut().find(|p| p.0 == st)
        {
            p.1 = None;
        }
        self.release(st, ac);
        end
    }

    /// The acknowledgement of a PPDU of `mpdus` MPDUs: an ACK, or a compressed block ack.
    pub(super) fn response(&self, mpdus: usize) -> Duration {
        if mpdus > 1 { self.phy.legacy_duration(BLOCK_ACK_BYTES, self.phy.basic_mbps) } else { self.phy.ack_duration() }
    }

    /// What the next PPDU of `(st, ac)` carries. Unicast frames to the front frame's
    /// recipient are packed, in queue order, into MPDUs (A-MSDUs of at most
    /// `max_amsdu_bytes`, subframe headers and padding included; one MSDU alone goes as a
    /// plain MPDU) and MPDUs into an A-MPDU: at most `max_frames` MPDUs, none beyond the
    /// block-ack window from the oldest unacknowledged frame, at most `max_bytes` (4-byte
    /// delimiters and padding included, as ns-3's `MpduAggregator::GetSizeIfAggregated`),
    /// no longer on the air than the PHY's longest PPDU, and, given `room`, leaving time for
    /// SIFS and the (block) ack within it. A VHT PPDU always carries an A-MPDU (a single
    /// MPDU as an S-MPDU). The first exchange of a TXOP (`initial`) carries at least one
    /// frame; a later one carries nothing if even that does not fit (`frames == 0`).
    /// `groups`, if given, receives the number of MSDUs in each MPDU.
    pub(super) fn aggregate(
        &self,
        st: usize,
        ac: usize,
        room: Option<Duration>,
        initial: bool,
        mut groups: Option<&mut Vec<usize>>,
    ) -> Aggregate {
        if let Some(g) = groups.as_deref_mut() {
            g.clear();
        }
        let none = Aggregate { frames: 0, mpdus: 0, air: Duration::ZERO };
        let q = &self.stations[st].acs[ac].queue;
        let Some(first) = q.front() else { return none };
        let sifs = self.phy.sifs;
        let fits = |air: Duration, mpdus: usize| room.is_none_or(|r| air + sifs + self.response(mpdus) <= r);
        if first.dest == Dest::Broadcast {
            let air = self.duration(st, first);
            if let Some(g) = groups {
                g.push(1);
            }
            return if initial || fits(air, 1) { Aggregate { frames: 1, mpdus: 1, air } } else { none };
        }
        let mut limit = self.stations[st].cfg.ampdu[ac];
        if let Dest::Unicast(to) = first.dest
            && !self.stations[st].acs[ac].ba_peers.contains(&(to, None))
        {
            // No agreement (yet, or its setup failed): single MPDUs, normal acks.
            limit.max_frames = 1;
        }
        let (rate, hdr) = (self.rate(st), self.mac_overhead());
        let vht = self.phy.kind == PhyKind::Vht;
        let max_ppdu = self.phy.max_ppdu();
        let window = u32::from(limit.max_frames.max(1));
        let amsdu = limit.max_amsdu_bytes as usize;
        // The A-MPDU so far: `prefix` bytes of MPDUs before the last one (delimiters and
        // padding included), and the last MPDU: `last_n` MSDUs, the first `last_first`
        // bytes, as an A-MSDU `last_amsdu` bytes.
        let (mut prefix, mut last_n, mut last_first, mut last_amsdu) = (0usize, 0usize, 0usize, 0usize);
        let mut best = none;
        let psdu = |prefix: usize, mpdus: usize, mpdu: usize| {
            if mpdus == 1 && !vht {
                mpdu
            } else {
                let start = if prefix == 0 { 0 } else { prefix.next_multiple_of(4) };
                start + MPDU_DELIMITER + mpdu
            }
        };
        for f in q.iter() {
            if f.dest != first.dest {
                break;
            }
            // Either the frame joins the last MPDU's A-MSDU, or it opens a new MPDU.
            let joined = (amsdu > 0 && last_n > 0).then(|| {
                let content = if last_n == 1 { AMSDU_SUBFRAME_HEADER + last_first } else { last_amsdu };
                content.next_multiple_of(4) + AMSDU_SUBFRAME_HEADER + f.bytes
            });
            let (mpdus, new_prefix, n, first_bytes, amsdu_bytes) = match joined {
                Some(a) if a <= amsdu => (best.mpdus, prefix, last_n + 1, last_first, a),
                _ => {
                    if best.mpdus >= usize::from(limit.max_frames.max(1))
                        || (amsdu == 0 && f.seq.wrapping_sub(first.seq) >= window)
                    {
                        break;
                    }
                    let p = if best.mpdus == 0 {
                        0
                    } else {
                        psdu(prefix, best.mpdus, mpdu_len(hdr, last_n, last_first, last_amsdu))
                    };
                    (best.mpdus + 1, p, 1, f.bytes, 0)
                }
            };
            let bytes = psdu(new_prefix, mpdus, mpdu_len(hdr, n, first_bytes, amsdu_bytes));
            let air = self.phy.duration(bytes, rate);
            let ok = (mpdus == 1 || bytes <= limit.max_bytes as usize)
                && max_ppdu.is_none_or(|m| air <= m)
                && fits(air, mpdus);
            // The first frame of a TXOP goes even if it breaks a limit.
            let forced = initial && best.frames == 0;
            if !(ok || forced) {
                break;
            }
            if let Some(g) = groups.as_deref_mut() {
                if n == 1 {
                    g.push(1);
                } else if let Some(last) = g.last_mut() {
                    *last += 1;
                }
            }
            (prefix, last_n, last_first, last_amsdu) = (new_prefix, n, first_bytes, amsdu_bytes);
            best = Aggregate { frames: best.frames + 1, mpdus, air };
        }
        best
    }
}

/// The length of an MPDU of `n` MSDUs (the first `first` bytes; as an A-MSDU `amsdu` bytes)
/// under a `hdr`-byte MAC header and FCS: a lone MSDU goes as it is (ns-3 builds an A-MSDU
/// of two or more).
fn mpdu_len(hdr: usize, n: usize, first: usize, amsdu: usize) -> usize {
    hdr + if n > 1 { amsdu } else { first }
}
