//! The connection's own checks; whole transfers over simulated links are in
//! `cohort_sim::multipath`'s tests.

use super::*;
use crate::lrt::Config;

fn conn(paths: usize) -> MpConnection {
    MpConnection::new(Connection::accept(Config::default(), Instant::ZERO).unwrap(), MpConfig::default(), paths)
}

#[test]
fn garbage_is_counted_not_parsed() {
    let mut c = conn(1);
    c.handle_datagram(Instant::ZERO, 0, &[]);
    c.handle_datagram(Instant::ZERO, 0, &[7, 1, 2]);
    c.handle_datagram(Instant::ZERO, 9, &[1; 40]);
    c.handle_datagram(Instant::ZERO, 0, &[2; 10]);
    let mut ack = [0u8; wire::PATH_ACK_LEN];
    wire::PathAck {
        path: 5,
        received: 1,
        highest: 0,
        highest_sent_us: 0,
        held_us: 0,
        owd_raw_us: 0,
        arrival_us: 0,
        probe_mark: 0,
    }
    .emit(&mut ack);
    c.handle_datagram(Instant::ZERO, 0, &ack);
    assert_eq!(c.stats().malformed, 5, "short, unknown type, unknown path (data and report)");
}

/// A receiver reports each path on that path, after `ack_every` datagrams or `ack_delay`.
#[test]
fn reports_go_back_on_their_path() {
    let mut c = conn(2);
    let mut d = vec![0u8; wire::DATA_HEADER + 10];
    wire::DataHeader { path: 1, seq: 0, sent_us: 0, pn: 0 }.emit(&mut d);
    c.handle_datagram(Instant::ZERO, 1, &d);
    let mut buf = [0u8; 2048];
    assert_eq!(c.poll_transmit(Instant::ZERO, &mut buf), None, "not yet due");
    let t = Instant::ZERO + MpConfig::default().ack_delay;
    assert!(c.poll_timeout().is_some_and(|w| w <= t));
    assert_eq!(c.poll_transmit(t, &mut buf), Some((1, wire::PATH_ACK_LEN)));
    match wire::MpRepr::parse(&buf[..wire::PATH_ACK_LEN]) {
        Ok(wire::MpRepr::PathAck(a)) => assert_eq!((a.path, a.received, a.highest), (1, 1, 0)),
        other => panic!("{other:?}"),
    }
}

/// A rate hint sets the service time delay balancing uses (`γ = size/θ`, seed 001 §3.2), so
/// a window splits in proportion to the allocated rates; `None` goes back to measurement.
#[test]
fn rate_hints_set_the_service_time() {
    let mut c = conn(2);
    let rtt = MpConfig::default().default_rtt;
    c.set_rate_hint(0, Some(100e6));
    c.set_rate_hint(1, Some(25e6));
    c.set_rate_hint(7, Some(1.0));
    let m: Vec<_> = c.tx.iter().map(|p| p.delay_model(rtt)).collect();
    assert!((m[0].gamma - 1250.0 * 8.0 / 100e6).abs() < 1e-15);
    assert!((m[1].gamma / m[0].gamma - 4.0).abs() < 1e-12);
    let w = split(&m, 100, 0.0);
    assert_eq!(w, vec![80, 20]);
    c.set_rate_hint(1, Some(0.0));
    assert!((c.tx[1].delay_model(rtt).gamma - 1250.0 * 8.0 / 1e3).abs() < 1e-9, "floored at 1 kbit/s");
    c.set_rate_hint(1, None);
    assert_eq!(c.tx[1].delay_model(rtt).gamma, 1e-4, "the unmeasured default");
}

/// A probe of a path nothing arrived on is answered at once with an empty report; the
/// sender takes it as the path's return and counts what left before the probe as lost.
#[test]
fn a_probe_of_a_silent_path_gets_an_empty_answer() {
    let (mut tx, mut rx) = (conn(2), conn(2));
    let mut buf = [0u8; 2048];
    // Path 1 fails with 5 packets in flight (seq 0-4), none of which arrived.
    for _ in 0..5 {
        tx.tx[1].on_send(Instant::ZERO, 100, false);
    }
    tx.tx[1].fail(10.0);
    let t = Instant::ZERO + Duration::from_millis(300);
    let mut probe = [0u8; wire::PROBE_LEN];
    wire::emit_probe(1, tx.tx[1].next_seq, &mut probe);
    // Two more leave after the probe (seq 5, 6): the answer says nothing of them.
    tx.tx[1].on_send(t, 100, false);
    tx.tx[1].on_send(t, 100, false);
    rx.handle_datagram(t, 1, &probe);
    assert_eq!(rx.poll_timeout(), Some(Instant::ZERO), "answered at once");
    let (path, n) = rx.poll_transmit(t, &mut buf).unwrap();
    assert_eq!((path, wire::MpRepr::parse(&buf[..n])), (1, Ok(wire::MpRepr::Empty(1, 5))));
    assert_eq!(rx.poll_transmit(t, &mut buf), None, "once");
    tx.handle_datagram(t, 1, &buf[..n]);
    let p = tx.stats().paths[1];
    assert!(p.up, "{p:?}");
    assert_eq!((p.lost, tx.tx[1].in_flight()), (5, 2), "lost with the failure; still in flight");
}

/// A report on path 0 answering no probe: `received` in all, the `highest` sequence, the
/// one-way delay and the arrival time in ms.
fn path_ack(received: u32, highest: u32, owd_ms: u32, arrival_ms: u32) -> wire::PathAck {
    wire::PathAck {
        path: 0,
        received,
        highest,
        highest_sent_us: 0,
        held_us: 0,
        owd_raw_us: owd_ms * 1000,
        arrival_us: arrival_ms * 1000,
        probe_mark: wire::NO_MARK,
    }
}

/// A path that fails and comes back starts afresh: the first report after the failure counts
/// packets from before it (already counted lost) and carries their one-way delay, so of what
/// it counts only packets sent since the failure are new; the path leaves slow start on a
/// queue measured after its return, not on the one it had before (until stop 48 it did, and
/// a returning 20 Mbit/s path took 700 ms to regain its window at one packet per round trip).
#[test]
fn a_path_that_comes_back_starts_afresh() {
    let ms = Duration::from_millis;
    let growth = path::Growth::DelayTarget { tau: ms(20), set: ms(20) };
    let mut p = PathTx::new(10.0);
    // 20 packets; the last ten meet a growing queue of up to 15 ms.
    for i in 0..20u32 {
        p.on_send(Instant::ZERO + ms(u64::from(i)), 1200, false);
    }
    for i in 0..20u32 {
        let q = i.saturating_sub(10) * 3 / 2;
        p.on_report(Instant::ZERO + ms(u64::from(20 + 2 * i + q)), &path_ack(i + 1, i, 10 + q, 10 + i + q), growth);
    }
    assert!(!p.slow_start && p.queueing >= ms(10), "the queue ended slow start: {p:?}");
    // Ten more leave; five arrive but their reports are lost with the link; the path fails.
    for i in 20..30u32 {
        p.on_send(Instant::ZERO + ms(u64::from(60 + i)), 1200, false);
    }
    p.fail(10.0);
    let (delivered, lost) = (p.delivered, p.lost);
    // The answer to the probe that finds it back counts those five, with their old delay.
    let back = Instant::ZERO + ms(900);
    assert_eq!(p.on_report(back, &path_ack(25, 24, 25, 95), growth), (0, 0));
    assert!(p.up && p.slow_start, "back, and in slow start: {p:?}");
    assert_eq!((p.delivered, p.lost, p.queueing, p.cwnd), (delivered, lost, Duration::ZERO, 10.0));
    // Fresh packets on an empty queue: slow start grows the window by one per packet.
    for i in 0..6u32 {
        p.on_send(back + ms(u64::from(i)), 1200, false);
    }
    p.on_report(back + ms(25), &path_ack(31, 35, 10, 830), growth);
    assert_eq!((p.delivered - delivered, p.cwnd, p.slow_start), (6, 16.0, true));
    // Every path down, the connection keeps sending on this one: two packets arrive unreported
    // before the failure, three leave after it, and the first report counts all five.
    p.on_send(back + ms(30), 1200, false);
    p.on_send(back + ms(31), 1200, false);
    p.fail(10.0);
    let (delivered, lost) = (p.delivered, p.lost);
    for i in 0..3 {
        p.on_send(back + ms(300 + i), 1200, false);
    }
    assert_eq!(p.on_report(back + ms(325), &path_ack(36, 40, 10, 1130), growth), (3, 0));
    assert_eq!((p.delivered - delivered, p.lost - lost, p.in_flight()), (3, 0, 0));
}

/// A path that comes back restarts at the smaller of the initial window and its window before
/// the failure (RFC 5681's restart window) and leaves slow start once it is back there; a
/// slow path (a window of four) must not come back queueing the initial ten.
#[test]
fn a_returning_path_restarts_at_its_old_window() {
    let ms = Duration::from_millis;
    let growth = path::Growth::DelayTarget { tau: ms(20), set: ms(20) };
    let mut p = PathTx::new(10.0);
    p.cwnd = 4.0;
    p.slow_start = false;
    p.fail(10.0);
    assert_eq!((p.cwnd, p.slow_start), (4.0, true));
    for i in 0..4 {
        p.on_send(Instant::ZERO + ms(i), 1200, false);
    }
    assert_eq!(p.on_report(Instant::ZERO + ms(23), &path_ack(4, 3, 10, 13), growth), (4, 0));
    // One step of slow start reaches the old window; Algorithm 3 (an empty queue: +1/w) after.
    assert!(!p.slow_start, "{p:?}");
    assert!(p.cwnd > 5.0 && p.cwnd < 6.0, "{}", p.cwnd);
}

/// A path that comes back on a longer route (a handover to an access point farther away)
/// reads its queue against the new route: its first flight measures the bases afresh, once
/// the new service time is known; one back on the same route keeps the bases it had, at a
/// slower rate too (its packets' longer transmission stays read as queue). Until stop 49 the
/// smallest delays were kept for the connection's life, and 20 ms more one way read as 20 ms
/// of queue for ever.
#[test]
fn a_path_back_on_a_longer_route_measures_its_bases_afresh() {
    let ms = Duration::from_millis;
    let at = |t: u32| Instant::ZERO + ms(u64::from(t));
    let growth = path::Growth::DelayTarget { tau: ms(20), set: ms(15) };
    // Back at 500 ms: packets 20 and 21 (sent 1 ms apart) meet one-way delays `owd` and
    // arrive `gap` ms apart; the reverse direction takes `back` ms.
    let back_on = |owd: [u32; 2], gap: u32, back: u32| {
        let mut p = PathTx::new(10.0);
        // 20 packets a millisecond apart, 10 ms each way, no queue.
        for i in 0..20u32 {
            p.on_send(at(i), 1200, false);
            p.on_report(at(20 + i), &path_ack(i + 1, i, 10, 10 + i), growth);
        }
        assert_eq!(p.min_rtt, Some(ms(20)));
        p.fail(10.0);
        for i in 0..4 {
            p.on_send(at(500 + i), 1200, false);
        }
        let arrival = 500 + owd[0];
        p.on_report(at(arrival + back), &path_ack(21, 20, owd[0], arrival), growth);
        p.on_report(at(arrival + gap + back), &path_ack(22, 21, owd[1], arrival + gap), growth);
        p
    };
    let mut moved = back_on([30, 30], 1, 30);
    // 19 ms longer one way (20 less the service time ahead of packet 21): the round trip
    // at most twice that longer.
    assert_eq!(moved.min_rtt, Some(ms(58)));
    assert_eq!(moved.queueing, ms(1), "the bound's millisecond, not the 20 ms of the route");
    assert!(moved.slow_start, "slow start, ended on the route taken for queue, goes on: {moved:?}");
    // The next flight meets 4 ms of queue on the new route, and reads it.
    moved.on_send(at(600), 1200, false);
    moved.on_report(at(664), &path_ack(25, 24, 34, 634), growth);
    assert_eq!(moved.queueing, ms(5));
    assert_eq!(moved.min_rtt, Some(ms(58)), "bases fall only from here");
    // The same route: the bases measured on more samples stay.
    let same = back_on([10, 10], 1, 10);
    assert_eq!((same.min_rtt, same.queueing), (Some(ms(20)), ms(0)));
    // The same route at an eighth of the rate: each packet 7 ms longer on the link (more than
    // τ/4), the second 7 ms behind the first; read as queue, as before the failure. (The
    // old base is from the faster rate.)
    let slower = back_on([17, 24], 8, 10);
    assert_eq!((slower.min_rtt, slower.queueing), (Some(ms(20)), ms(14)));
}

/// A path declared failed while packets sent before were still on their way (slowed to a
/// crawl, not out): they arrive after the failure, so its first flight back waited behind
/// them and measures no route; the bases stay.
#[test]
fn a_path_slow_rather_than_out_keeps_its_bases() {
    let ms = Duration::from_millis;
    let at = |t: u32| Instant::ZERO + ms(u64::from(t));
    let growth = path::Growth::DelayTarget { tau: ms(20), set: ms(15) };
    let mut p = PathTx::new(10.0);
    for i in 0..20u32 {
        p.on_send(at(i), 1200, false);
    }
    for i in 0..15u32 {
        p.on_report(at(20 + i), &path_ack(i + 1, i, 10, 10 + i), growth);
    }
    p.fail(10.0);
    for i in 0..4 {
        p.on_send(at(500 + i), 1200, false);
    }
    // The rest of the old packets, then the new ones behind them, 30 ms late.
    p.on_report(at(520), &path_ack(17, 16, 300, 510), growth);
    p.on_report(at(530), &path_ack(20, 19, 300, 520), growth);
    p.on_report(at(550), &path_ack(21, 20, 40, 540), growth);
    p.on_report(at(551), &path_ack(22, 21, 40, 541), growth);
    assert_eq!(p.min_rtt, Some(ms(20)));
    assert_eq!(p.queueing, ms(30), "read as queue: {p:?}");
}
