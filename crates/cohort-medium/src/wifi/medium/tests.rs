//! The retry and backoff rules of one category, checked on the state machine's own state:
//! the station retry count that sets the contention window, BlockAckReqs that cost no frame,
//! MPDUs in flight that outlive their lifetime until their BlockAckReq is answered, and
//! post-backoff with immediate access.

use super::*;
use crate::wifi::Aggregation;

const BE: usize = 1;

/// Two HT stations with ns-3's aggregation defaults, an agreement from 0 to 1 already set
/// up, and `frames` frames of 0 to 1 queued at `at`.
fn pair(timing: Timing, frames: u32, at: Instant) -> Medium<u32> {
    let phy = Phy::ht(65.0);
    let cfg = StationConfig { ampdu: Aggregation::ns3_defaults(&phy), queue_depth: 500, ..StationConfig::default() };
    let mut m: Medium<u32> =
        Medium::new(phy, EdcaParams::defaults_2020(&phy), &[cfg; 2], 1).unwrap().with_timing(timing);
    m.stations[0].acs[BE].ba_peers.push((1, None));
    for i in 0..frames {
        m.enqueue(at, 0, Ac::Be, Dest::Unicast(1), 1500, i).unwrap();
    }
    m
}

fn drops(m: &mut Medium<u32>, now: Instant) -> Vec<(u32, DropReason)> {
    let mut out = vec![];
    while let Some(e) = m.poll_event(now) {
        if let MediumEvent::Dropped { handle, reason, .. } = e {
            out.push((handle, reason));
        }
    }
    out
}

/// 802.11-2020 10.23.2.2: the window doubles with each failure while QSRC is below the
/// retry limit (7), and goes back to CWmin at the failure after that, not when the frame
/// reaches its own limit and is dropped (the 7th).
#[test]
fn the_window_follows_the_station_retry_count_not_the_frame() {
    let t = Instant::ZERO + Duration::from_millis(1);
    let mut m = pair(Timing::Standard, 3, Instant::ZERO);
    let mut cws = vec![];
    let mut dropped = vec![];
    for _ in 0..9 {
        m.failed(0, BE, t, Miss::Data);
        cws.push(m.stations[0].acs[BE].cw);
        dropped.push(drops(&mut m, t).len());
    }
    assert_eq!(cws, [31, 63, 127, 255, 511, 1023, 1023, 15, 31]);
    assert_eq!(dropped, [0, 0, 0, 0, 0, 0, 1, 0, 0], "the head frame goes at its 7th failure");
    m.reset_cw(0, BE);
    assert_eq!((m.stations[0].acs[BE].cw, m.stations[0].acs[BE].qsrc), (15, 0));
}

/// A BlockAckReq that gets no block ack widens the window but costs no frame: it is sent
/// again, however often it fails.
#[test]
fn a_failed_block_ack_request_drops_no_frame() {
    let t = Instant::ZERO + Duration::from_millis(1);
    let mut m = pair(Timing::Standard, 3, Instant::ZERO);
    m.stations[0].acs[BE].bar_pending = Some(1);
    for _ in 0..20 {
        m.failed(0, BE, t, Miss::Bar);
        assert_eq!(drops(&mut m, t), []);
    }
    let s = &m.stations[0].acs[BE];
    assert_eq!((s.queue.len(), s.bar_pending, s.attempts), (3, Some(1), 0));
}

/// A block ack that reports lost MPDUs still ends the exchange with a success for the
/// window; the head frame counts one more attempt.
#[test]
fn a_block_ack_with_losses_resets_the_window() {
    let t = Instant::ZERO + Duration::from_millis(1);
    let mut m = pair(Timing::Standard, 3, Instant::ZERO);
    m.failed(0, BE, t, Miss::Data);
    m.failed(0, BE, t, Miss::Data);
    assert_eq!(m.stations[0].acs[BE].cw, 63);
    m.failed(0, BE, t, Miss::PartialBa);
    let s = &m.stations[0].acs[BE];
    assert_eq!((s.cw, s.qsrc, s.attempts), (15, 0, 3));
}

/// ns-3 does not expire MPDUs in flight: those of a missed block ack stay while their
/// BlockAckReq is pending, go when its block ack comes, and then need a BlockAckReq of
/// their own to move the recipient's window; frames never sent expire as before.
#[test]
fn mpdus_in_flight_expire_only_when_their_block_ack_request_is_answered() {
    let life = NS3_MSDU_LIFETIME;
    let mut m = pair(Timing::Ns3, 10, Instant::ZERO);
    let s = &mut m.stations[0].acs[BE];
    s.queue.iter_mut().take(4).for_each(|f| f.sent = true);
    s.bar_pending = Some(1);
    let late = Instant::ZERO + life + Duration::from_millis(1);
    assert_eq!(m.expire(0, BE, late), 6, "the six never sent expire");
    assert_eq!(m.stations[0].acs[BE].queue.len(), 4, "the four in flight stay");
    drops(&mut m, late);
    m.block_ack_req(0, BE, late);
    let gone = drops(&mut m, late + Duration::from_millis(1));
    assert_eq!(gone.iter().map(|d| d.0).collect::<Vec<_>>(), [0, 1, 2, 3]);
    assert!(gone.iter().all(|d| d.1 == DropReason::Lifetime));
    assert_eq!(m.stations[0].acs[BE].bar_pending, Some(1), "another BlockAckReq moves the window");
}

/// Under ns-3's timing a frame that finds its queue empty, its post-backoff run out and the
/// medium idle goes at the first slot boundary after AIFS, whatever the seed; one that
/// arrives right after the previous exchange waits out the post-backoff drawn then.
#[test]
fn a_frame_at_an_idle_medium_goes_without_backoff() {
    let first_and_second_tx = |timing: Timing, seed: u64| {
        let phy = Phy::ofdm(54.0);
        let cfg = StationConfig::default();
        let mut m: Medium<u32> =
            Medium::new(phy, EdcaParams::defaults(&phy), &[cfg; 2], seed).unwrap().with_timing(timing);
        let at = Instant::ZERO + Duration::from_millis(1);
        m.enqueue(at, 0, Ac::Be, Dest::Unicast(1), 1500, 0).unwrap();
        let mut delivered = vec![];
        while let Some(t) = m.poll_timeout() {
            m.handle_timeout(t);
            while let Some(e) = m.poll_event(t) {
                match e {
                    MediumEvent::Delivered { at, .. } => delivered.push(at),
                    MediumEvent::Sent { at, handle: 0, .. } => {
                        m.enqueue(at, 0, Ac::Be, Dest::Unicast(1), 1500, 1).unwrap()
                    }
                    _ => {}
                }
            }
        }
        (delivered[0], delivered[1] - delivered[0])
    };
    let ns3: Vec<_> = (1..=20).map(|seed| first_and_second_tx(Timing::Ns3, seed)).collect();
    assert!(ns3.iter().all(|r| r.0 == ns3[0].0), "no backoff before the first: {ns3:?}");
    assert!(ns3.iter().any(|r| r.1 != ns3[0].1), "a post-backoff before the second: {ns3:?}");
    let standard: Vec<_> = (1..=20).map(|seed| first_and_second_tx(Timing::Standard, seed)).collect();
    assert!(standard.iter().any(|r| r.0 != standard[0].0), "a fresh backoff: {standard:?}");
}

/// An ADDBA Response is an MMPDU: retried up to the retry limit, then dropped, and the
/// recipient stops contending for it.
#[test]
fn an_addba_response_is_dropped_at_the_retry_limit() {
    let t = Instant::ZERO + Duration::from_millis(1);
    let mut m = pair(Timing::Standard, 0, Instant::ZERO);
    m.stations[1].acs[BE].addba_resp.push_back(0);
    for i in 1..=7 {
        assert_eq!(m.stations[1].acs[BE].addba_resp.len(), 1, "attempt {i}");
        m.failed(1, BE, t, Miss::Data);
    }
    let r = &m.stations[1].acs[BE];
    assert!(r.addba_resp.is_empty() && !r.has_work());
    assert_eq!((r.stats.retry_drops, r.resp_attempts), (1, 0));
}

/// An ADDBA Request that is never acknowledged counts against no data frame: after the retry
/// limit the originator gives up on the agreement for a while and sends single MPDUs.
#[test]
fn a_failed_addba_request_falls_back_to_single_mpdus() {
    let t = Instant::ZERO + Duration::from_millis(1);
    let mut m = pair(Timing::Standard, 3, Instant::ZERO);
    m.stations[0].acs[BE].ba_peers.clear();
    assert_eq!(m.needs_addba(0, BE, t), Some(1));
    for _ in 0..7 {
        m.failed(0, BE, t, Miss::AddbaRequest(1));
    }
    assert_eq!(drops(&mut m, t), [], "no data frame pays for it");
    assert_eq!(m.stations[0].acs[BE].attempts, 0);
    assert_eq!(m.ba_view(0, BE, 1, t), BaView::NoReply);
    assert_eq!(m.needs_addba(0, BE, t), None, "single MPDUs meanwhile");
    let later = t + FAILED_ADDBA_TIMEOUT + Duration::from_millis(1);
    assert_eq!(m.needs_addba(0, BE, later), Some(1), "then it asks again");
}

/// The floor of one frame on an otherwise idle 802.11b channel at 1 Mbit/s (QoS data,
/// AC_BE): AIFS 10 + 3·20 µs, a mean first backoff of 31/2 slots (310 µs), the PPDU (192 µs
/// preamble + 8 µs per byte of MSDU and 30-byte header), and for a unicast SIFS + a 304 µs
/// ACK; a slower receiver's station rate is the sender's, not the receiver's.
#[test]
fn an_uncontended_frame_costs_aifs_mean_backoff_ppdu_and_ack() {
    let phy = Phy::dsss(1.0);
    let slow = StationConfig { data_mbps: Some(0.5), ..StationConfig::default() };
    let m: Medium<u32> = Medium::new(phy, EdcaParams::defaults(&phy), &[StationConfig::default(), slow], 1).unwrap();
    let us = |d: Duration| d.as_nanos() / 1000;
    assert_eq!(us(m.uncontended_airtime(0, Ac::Be, 1460, Dest::Broadcast)), 70 + 310 + 192 + 8 * 1490);
    assert_eq!(us(m.uncontended_airtime(0, Ac::Be, 1460, Dest::Unicast(1))), 70 + 310 + 192 + 8 * 1490 + 10 + 304);
    assert_eq!(us(m.uncontended_airtime(1, Ac::Be, 100, Dest::Unicast(0))), 70 + 310 + 192 + 16 * 130 + 10 + 304);
    // AC_VO waits AIFSN 2 and a quarter of the window.
    assert_eq!(us(m.uncontended_airtime(0, Ac::Vo, 1460, Dest::Broadcast)), 50 + 70 + 192 + 8 * 1490);
}
