//! Script-like tests on a simulated pair: two connections joined by a seeded lossy link in
//! virtual time.

use super::*;
use cohort_medium::link::{Duplex, Jitter, Link, LinkParams, LossModel};
use cohort_time::Instant;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::time::Duration;

/// A clean direction: this one-way delay, 1 Gbit/s, an unbounded queue.
fn clean(owd_ms: u64) -> LinkParams {
    LinkParams { queue_bytes: usize::MAX, ..LinkParams::clean(Duration::from_millis(owd_ms), 1_000_000_000) }
}

/// A direction losing `p` of the packets, iid.
fn lossy(owd_ms: u64, p: f64) -> LinkParams {
    LinkParams { loss: LossModel::Iid { p }, ..clean(owd_ms) }
}

type Wire = Link<(u64, Vec<u8>)>;

/// Client `a` and server `b` over a link with per-direction faults.
struct Pair {
    a: Connection,
    b: Connection,
    now: Instant,
    ab: Wire,
    ba: Wire,
    pn_a: u64,
    pn_b: u64,
    buf: Vec<u8>,
    /// Messages `b` received, with the time.
    got: Vec<(Instant, Vec<u8>)>,
    /// Pull received messages out of `b` as they arrive (a slow receiver does not).
    b_reads: bool,
    /// Lose this many of the CLOSE packets `b` sends next.
    lose_b_closes: u32,
}

impl Pair {
    fn new(cfg: Config, ab: LinkParams, ba: LinkParams, seed: u64) -> Self {
        let now = Instant::ZERO;
        let Duplex { up, down } = Duplex::new(ab, ba, seed).unwrap();
        Pair {
            a: Connection::connect(cfg.clone(), 42, now).unwrap(),
            b: Connection::accept(cfg, now).unwrap(),
            now,
            ab: up,
            ba: down,
            pn_a: 0,
            pn_b: 0,
            buf: vec![0u8; 70_000],
            got: vec![],
            b_reads: true,
            lose_b_closes: 0,
        }
    }

    /// Runs both ends at the current time until neither has anything to send.
    fn flush(&mut self) {
        loop {
            let mut any = false;
            while let Some(n) = self.a.poll_transmit(self.now, self.pn_a, &mut self.buf) {
                self.ab.send(self.now, n, (self.pn_a, self.buf[..n].to_vec()));
                self.pn_a += 1;
                any = true;
            }
            while let Some(n) = self.b.poll_transmit(self.now, self.pn_b, &mut self.buf) {
                let is_close = matches!(
                    cohort_wire::lrt::LrtRepr::parse(&self.buf[..n]),
                    Ok(cohort_wire::lrt::LrtRepr::Close { .. })
                );
                if is_close && self.lose_b_closes > 0 {
                    self.lose_b_closes -= 1;
                    self.pn_b += 1;
                    continue;
                }
                self.ba.send(self.now, n, (self.pn_b, self.buf[..n].to_vec()));
                self.pn_b += 1;
                any = true;
            }
            while let Some((pn, p)) = self.ab.pop_due(self.now) {
                self.b.handle_packet(self.now, pn, &p);
                any = true;
            }
            while let Some((pn, p)) = self.ba.pop_due(self.now) {
                self.a.handle_packet(self.now, pn, &p);
                any = true;
            }
            if self.b_reads {
                while let Ok(Some(m)) = self.b.recv() {
                    self.got.push((self.now, m));
                }
            }
            if !any {
                break;
            }
        }
    }

    /// One step: jump to the next event, handle it, flush.
    fn step(&mut self, limit: Instant) -> bool {
        self.flush();
        let next = [self.a.poll_timeout(), self.b.poll_timeout(), self.ab.next_at(), self.ba.next_at()]
            .into_iter()
            .flatten()
            .min();
        let Some(t) = next else { return false };
        if t > limit {
            self.now = limit;
            return false;
        }
        self.now = self.now.max(t);
        self.a.handle_timeout(self.now);
        self.b.handle_timeout(self.now);
        self.flush();
        true
    }

    /// Steps until `limit`.
    fn drive_until(&mut self, limit: Instant) {
        let mut steps = 0u64;
        let mut spin = crate::spin::SpinGuard::new(self.now);
        while self.step(limit) {
            steps += 1;
            spin.step(self.now, || format!("timeouts a {:?} b {:?}", self.a.poll_timeout(), self.b.poll_timeout()));
            assert!(
                steps < 5_000_000,
                "runaway simulation at {:?}: timeouts a {:?} b {:?}, links {:?} {:?}",
                self.now,
                self.a.poll_timeout(),
                self.b.poll_timeout(),
                self.ab.next_at(),
                self.ba.next_at()
            );
        }
    }

    fn drive_for(&mut self, d: Duration) {
        let limit = self.now + d;
        self.drive_until(limit);
    }
}

fn message(i: u64, size: usize) -> Vec<u8> {
    let mut m = vec![0u8; size.max(8)];
    m[..8].copy_from_slice(&i.to_be_bytes());
    for (k, b) in m.iter_mut().enumerate().skip(8) {
        *b = (i as usize * 131 + k) as u8;
    }
    m
}

/// Sends `count` messages of `size` bytes every `interval`, then drains; returns the pair.
fn stream(cfg: Config, ab: LinkParams, ba: LinkParams, seed: u64, count: u64, size: usize, interval: Duration) -> Pair {
    let mut p = Pair::new(cfg, ab, ba, seed);
    while p.a.state() == &State::Handshaking && p.now < Instant::from_millis(4000) {
        p.drive_for(Duration::from_millis(50));
    }
    assert_eq!(p.a.state(), &State::Established, "seed {seed}: handshake");
    for i in 0..count {
        p.a.send(&message(i, size)).unwrap();
        p.drive_for(interval);
    }
    let deadline = p.now + Duration::from_secs(30);
    while (p.got.len() as u64) < count && p.now < deadline {
        p.drive_for(Duration::from_millis(50));
    }
    p
}

fn assert_exactly_once_in_order(p: &Pair, count: u64, size: usize, seed: u64) {
    assert_eq!(p.got.len() as u64, count, "seed {seed}: delivered {} of {count}", p.got.len());
    for (i, (_, m)) in p.got.iter().enumerate() {
        assert_eq!(m, &message(i as u64, size), "seed {seed}: message {i} differs or out of order");
    }
}

#[test]
fn handshake_then_lossless_stream_arrives_at_one_way_delay() {
    let cfg = Config::default();
    let p = stream(cfg, clean(50), clean(50), 1, 200, 1000, Duration::from_millis(1));
    assert_exactly_once_in_order(&p, 200, 1000, 1);
    let s = p.a.stats();
    assert_eq!(s.source_sent, 200, "one 1 KB message per symbol, sent at once");
    assert_eq!(p.b.stats().symbols_rejected, 0);
    assert!(s.loss_estimate < 0.05, "the prior fades as evidence of no loss arrives: {}", s.loss_estimate);
}

#[test]
fn iid_loss_is_repaired_without_retransmission() {
    for seed in 0..6 {
        let lossy = lossy(50, 0.10);
        let p = stream(Config::default(), lossy, lossy, seed, 1000, 1000, Duration::from_millis(1));
        assert_exactly_once_in_order(&p, 1000, 1000, seed);
        let s = p.a.stats();
        assert!(p.ab.stats().lost > 50, "seed {seed}: the link lost packets");
        assert!((0.05..0.15).contains(&s.loss_estimate), "seed {seed}: loss estimate {}", s.loss_estimate);
        assert!(s.repair_sent > 100);
    }
}

#[test]
fn low_rate_flow_gets_repairs_on_the_timer_once_per_repair_period() {
    let lossy = lossy(50, 0.10);
    let p = stream(Config::default(), lossy, lossy, 3, 300, 1000, Duration::from_millis(10));
    assert_exactly_once_in_order(&p, 300, 1000, 3);
    let s = p.a.stats();
    // One message every 10 ms, a repair period of 20 ms: a timer repair every second message.
    assert!(s.repair_timer_sent > 50 && s.repair_timer_sent <= s.source_sent / 2 + 5, "{s:?}");
}

#[test]
fn a_revealed_loss_is_acknowledged_at_once_and_answered_before_new_sources() {
    let mut p = Pair::new(Config::default(), clean(10), clean(10), 1);
    p.drive_for(Duration::from_millis(100));
    assert_eq!(p.a.state(), &State::Established);
    p.drive_for(Duration::from_millis(100));
    let now = p.now;
    let mut buf = vec![0u8; 2000];
    let mut next = |c: &mut Connection, pn: u64| c.poll_transmit(now, pn, &mut buf).map(|n| buf[..n].to_vec());
    // Message 0's only symbol is lost; message 1's arrives and shows the gap.
    p.a.send(&message(0, 500)).unwrap();
    let lost = next(&mut p.a, 1000).unwrap();
    assert_eq!(lost[0], 0, "a source symbol");
    p.a.send(&message(1, 500)).unwrap();
    let second = next(&mut p.a, 1001).unwrap();
    p.b.handle_packet(now, 1001, &second);
    let ack = next(&mut p.b, 500).expect("the receiver acknowledges a revealed loss at once");
    assert!(next(&mut p.b, 501).is_none());
    p.a.handle_packet(now, 500, &ack);
    // The answer (one missing column, with the loss-matched margin) goes before new sources.
    p.a.send(&message(2, 500)).unwrap();
    let r = p.a.stats().redundancy;
    let answers = (1.0 + r).ceil() as usize;
    let kinds: Vec<u8> = (0..answers + 1).map_while(|i| next(&mut p.a, 1002 + i as u64).map(|b| b[0])).collect();
    assert_eq!(kinds[..answers], vec![1; answers][..], "repairs first: {kinds:?}");
    assert_eq!(kinds[answers], 0, "then the new source");
    assert_eq!(p.a.stats().repair_feedback_sent, answers as u64);
}

#[test]
fn faults_sweep_bursty_reordered_duplicated() {
    for seed in 0..200u64 {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let loss = rng.random_range(0.0..0.4);
        let loss = if rng.random_bool(0.5) {
            LossModel::GilbertElliott { p_gb: 0.05, p_bg: 0.3, loss_good: 0.0, loss_bad: loss }
        } else {
            LossModel::Iid { p: loss }
        };
        let f = LinkParams {
            loss,
            duplicate: rng.random_range(0.0..0.1),
            jitter: Jitter::Uniform { max: Duration::from_micros(rng.random_range(0..5_000)) },
            ..clean(rng.random_range(1..80))
        };
        let size = rng.random_range(1..3000);
        let interval = Duration::from_micros(rng.random_range(200..5000));
        let p = stream(Config::default(), f, f, seed, 300, size, interval);
        assert_exactly_once_in_order(&p, 300, size.max(8), seed);
    }
}

#[test]
fn large_messages_span_many_symbols_and_many_coders() {
    let cfg = Config { coder_symbols: 64, max_window: 32, ..Config::default() };
    let lossy = lossy(20, 0.05);
    let p = stream(cfg, lossy, lossy, 9, 20, 200_000, Duration::from_millis(20));
    assert_exactly_once_in_order(&p, 20, 200_000, 9);
    assert!(p.a.stats().coders_opened > 10, "{:?}", p.a.stats());
}

#[test]
fn lost_full_rank_ack_is_resent_on_out_of_date_symbols() {
    let cfg = Config { coder_symbols: 8, max_window: 8, ..Config::default() };
    let lossy = lossy(5, 0.3);
    let p = stream(cfg, lossy, lossy, 5, 400, 500, Duration::from_millis(2));
    assert_exactly_once_in_order(&p, 400, 500, 5);
    let b = p.b.stats();
    assert!(b.full_rank_acks_sent >= 40, "{b:?}");
}

#[test]
fn slow_receiver_bounds_memory_and_send_blocks() {
    let cfg = Config { recv_buffer_bytes: 64 * 1024, send_buffer_bytes: 256 * 1024, ..Config::default() };
    let mut p = Pair::new(cfg, clean(10), clean(10), 1);
    p.b_reads = false;
    p.drive_for(Duration::from_millis(100));
    let mut accepted = 0u64;
    let mut blocked = false;
    for i in 0..5000u64 {
        match p.a.send(&message(i, 1000)) {
            Ok(()) => accepted += 1,
            Err(SendError::WouldBlock) => {
                blocked = true;
                break;
            }
            Err(e) => panic!("{e}"),
        }
        p.drive_for(Duration::from_micros(100));
    }
    assert!(blocked, "send must push back once the receiver stops reading");
    p.drive_for(Duration::from_secs(2));
    let cap = 300 * 1024 + 8 * 256 * 1200 * 3;
    assert!(p.a.buffered_bytes() < cap, "sender holds {}", p.a.buffered_bytes());
    assert!(p.b.buffered_bytes() < cap, "receiver holds {}", p.b.buffered_bytes());
    // The receiver catches up: everything accepted arrives, in order.
    p.b_reads = true;
    let deadline = p.now + Duration::from_secs(10);
    while (p.got.len() as u64) < accepted && p.now < deadline {
        p.drive_for(Duration::from_millis(10));
    }
    assert_exactly_once_in_order(&p, accepted, 1000, 1);
}

#[test]
fn vanished_peer_is_an_error_not_a_hang() {
    let cfg = Config { idle_timeout: Duration::from_secs(2), ..Config::default() };
    let mut p = Pair::new(cfg, clean(10), clean(10), 1);
    p.drive_for(Duration::from_millis(100));
    p.a.send(b"still there?").unwrap();
    // The peer vanishes: nothing from b reaches a any more.
    p.ba.set_params(lossy(10, 1.0)).unwrap();
    p.drive_for(Duration::from_secs(3));
    assert_eq!(p.a.state(), &State::Closed(CloseReason::TimedOut));
    assert_eq!(p.a.send(b"x"), Err(SendError::Closed(CloseReason::TimedOut)));
    assert_eq!(p.a.recv(), Err(RecvError::Closed(CloseReason::TimedOut)));
    let mut events = vec![];
    while let Some(e) = p.a.poll_event() {
        events.push(e);
    }
    assert_eq!(events, [Event::Connected, Event::Closed(CloseReason::TimedOut)]);
}

#[test]
fn handshake_times_out_without_a_server() {
    let mut p = Pair::new(Config::default(), lossy(1, 1.0), clean(1), 1);
    p.drive_for(Duration::from_secs(6));
    assert_eq!(p.a.state(), &State::Closed(CloseReason::HandshakeTimedOut));
}

#[test]
fn a_driver_that_cannot_send_yet_waits_for_the_timers_not_for_the_hello() {
    let cfg = Config::default();
    let t0 = Instant::ZERO + Duration::from_millis(5);
    let mut c = Connection::connect(cfg.clone(), 7, t0).unwrap();
    // Its HELLO is due at once: a driver that could send would send it now...
    assert_eq!(c.poll_timeout(), Some(t0));
    // ...but one whose key exchange is still running has only the handshake timeout to wait for.
    assert_eq!(c.timer_deadline(), Some(t0 + cfg.handshake_timeout));
    c.handle_timeout(t0 + cfg.handshake_timeout);
    assert_eq!(c.state(), &State::Closed(CloseReason::HandshakeTimedOut));
    // A server waiting for its first HELLO has nothing to time out.
    let s = Connection::accept(cfg.clone(), t0).unwrap();
    assert_eq!(s.timer_deadline(), None);
    // An established connection times out when idle, whatever it has to send.
    let mut p = Pair::new(cfg.clone(), clean(1), clean(1), 1);
    p.drive_for(Duration::from_millis(50));
    assert_eq!(p.a.state(), &State::Established);
    let idle = p.a.timer_deadline().unwrap();
    assert!(idle > p.now && idle <= p.now + cfg.idle_timeout, "{idle:?} at {:?}", p.now);
    p.a.send(b"x").unwrap();
    assert!(p.a.poll_timeout().unwrap() < idle);
    assert_eq!(p.a.timer_deadline(), Some(idle));
}

#[test]
fn mismatched_parameters_close_both_ends() {
    let mut p = Pair::new(Config::default(), clean(1), clean(1), 1);
    p.b = Connection::accept(Config { symbol_size: 1000, ..Config::default() }, Instant::ZERO).unwrap();
    p.drive_for(Duration::from_millis(50));
    assert!(matches!(p.b.state(), State::Closed(CloseReason::ParamMismatch { .. })));
    assert_eq!(p.a.state(), &State::Closed(CloseReason::Peer(conn::code::PARAMS)));
}

#[test]
fn close_reaches_the_peer() {
    let mut p = Pair::new(Config::default(), clean(1), clean(1), 1);
    p.drive_for(Duration::from_millis(50));
    p.a.close();
    p.drive_for(Duration::from_millis(50));
    assert_eq!(p.b.state(), &State::Closed(CloseReason::Peer(conn::code::NORMAL)));
    assert_eq!(p.a.send(b"x"), Err(SendError::Closed(CloseReason::Local)));
}

/// The receiver closes and its CLOSE is lost: the sender's next packets reach an end in its
/// closing period, which sends the CLOSE again, so the sender learns of a normal close
/// instead of timing out. After the period the closed end is drained and answers nothing.
#[test]
fn a_lost_close_is_sent_again_while_the_peer_still_talks() {
    let mut p = Pair::new(Config::default(), clean(5), clean(5), 1);
    p.drive_for(Duration::from_millis(100));
    p.b.close();
    p.lose_b_closes = 1;
    p.flush();
    assert_eq!(p.lose_b_closes, 0, "the first CLOSE was sent, and lost");
    assert!(!p.b.is_drained(p.now), "b stays for its closing period");
    p.a.send(&message(1, 500)).unwrap();
    p.flush();
    // a's symbol arrives 5 ms later, within the closing period: b answers it at once.
    p.drive_for(Duration::from_millis(12));
    assert_eq!(p.a.state(), &State::Closed(CloseReason::Peer(conn::code::NORMAL)));
    assert_eq!(p.b.stats().closes_repeated, 1);
    p.drive_for(conn::MAX_CLOSING);
    assert!(p.b.is_drained(p.now) && p.b.poll_timeout().is_none());
    // The end that heard the CLOSE sends none and is drained at once.
    assert!(p.a.is_drained(p.now));
}

/// A peer with nothing to say still learns of the close: the CLOSE goes again once per
/// probe timeout during the closing period, so only losing every copy leaves it to time out.
#[test]
fn a_silent_peer_learns_of_the_close_from_a_later_copy() {
    for lost in 0..conn::CLOSING_PTOS {
        let mut p = Pair::new(Config::default(), clean(5), clean(5), 1);
        p.drive_for(Duration::from_millis(100));
        p.b.close();
        p.lose_b_closes = lost;
        p.drive_for(conn::MAX_CLOSING);
        assert_eq!(p.a.state(), &State::Closed(CloseReason::Peer(conn::code::NORMAL)), "{lost} copies lost");
        assert!(p.b.is_drained(p.now));
    }
    let mut p = Pair::new(Config::default(), clean(5), clean(5), 1);
    p.drive_for(Duration::from_millis(100));
    p.b.close();
    p.lose_b_closes = u32::MAX;
    p.drive_for(Duration::from_secs(30));
    assert_eq!(p.a.state(), &State::Closed(CloseReason::TimedOut), "every copy lost: the idle timeout says so");
    assert!(p.b.stats().closes_repeated >= u64::from(conn::CLOSING_PTOS - 1));
}

/// Over many seeds and lossy links (5-30% each way), an end whose peer closed while it still
/// had data in flight learns of the close instead of timing out, except where every copy
/// of the CLOSE was lost: `Σ p³` over these runs expects about 3 such ends of 300.
#[test]
fn a_close_survives_loss_without_the_peer_timing_out() {
    let mut timed_out = Vec::new();
    for seed in 0..300 {
        let loss = 0.05 + 0.25 * (seed % 5) as f64 / 4.0;
        let mut p = Pair::new(Config::default(), lossy(5, loss), lossy(5, loss), seed);
        p.drive_for(Duration::from_millis(300));
        for i in 0..20 {
            p.a.send(&message(i, 1000)).unwrap();
        }
        p.drive_for(Duration::from_millis(20));
        p.b.close();
        p.drive_for(Duration::from_secs(30));
        match p.a.state() {
            State::Closed(CloseReason::Peer(conn::code::NORMAL)) => {}
            other => timed_out.push((seed, loss, other.clone())),
        }
    }
    assert!(timed_out.len() <= 6, "ends that missed the close (seed, loss, state): {timed_out:?}");
}

#[test]
fn malformed_packets_are_counted_and_change_nothing() {
    let mut p = Pair::new(Config::default(), clean(1), clean(1), 1);
    p.drive_for(Duration::from_millis(50));
    for junk in [&[][..], &[9, 9, 9], &[0, 0, 0], &[2, 0xFF], &[1; 12]] {
        p.b.handle_packet(p.now, 1000, junk);
    }
    assert_eq!(p.b.stats().malformed, 5);
    assert_eq!(p.b.stats().symbols_rejected, 0);
    assert_eq!(p.b.state(), &State::Established);
}

#[test]
fn invalid_config_and_message_sizes_are_errors() {
    assert!(matches!(
        Connection::connect(Config { symbol_size: 4, ..Config::default() }, 1, Instant::ZERO),
        Err(ConfigError::SymbolSize(4))
    ));
    assert!(Connection::accept(Config { rate_share: 0.0, ..Config::default() }, Instant::ZERO).is_err());
    // A pacer whose bucket cannot hold one packet would never send (the connection hung
    // silently until stop 47).
    let tight = Config { burst_bytes: 1200, ..Config::default() };
    assert!(matches!(
        Connection::connect(tight, 1, Instant::ZERO),
        Err(ConfigError::Burst { burst: 1200, packet }) if packet > 1200
    ));
    let mut c = Connection::connect(Config::default(), 1, Instant::ZERO).unwrap();
    assert_eq!(c.send(b""), Err(SendError::Size(0)));
    assert_eq!(c.send(&vec![0u8; stream::MAX_MESSAGE + 1]), Err(SendError::Size(stream::MAX_MESSAGE + 1)));
}

/// An application that never polls events (as `cohort-net`'s socket did not) used to leave one
/// `Readable` per message queued for the life of the connection. Events coalesce now: a long
/// lossy stream leaves at most one of each kind waiting, and every message still arrives.
#[test]
fn events_stay_bounded_when_nobody_polls_them() {
    let count = 20_000;
    let p = stream(Config::default(), lossy(5, 0.1), lossy(5, 0.1), 3, count, 100, Duration::from_millis(1));
    assert_exactly_once_in_order(&p, count, 100, 3);
    assert!(
        p.a.pending_events() <= 4 && p.b.pending_events() <= 4,
        "{} {}",
        p.a.pending_events(),
        p.b.pending_events()
    );
    let mut b = p.b;
    let mut seen = vec![];
    while let Some(e) = b.poll_event() {
        seen.push(e);
    }
    assert!(seen.contains(&Event::Connected) && seen.contains(&Event::Readable), "{seen:?}");
}

/// Found by the fuzz target: a symbol whose corrupted length prefix closes the connection after
/// it completed a message left that message uncounted in the receive buffer, and `recv`
/// underflowed the count.
#[test]
fn a_message_completed_before_a_bad_length_prefix_is_counted() {
    super::fuzzing::feed_arbitrary(&[
        0x07, 0x00, 0x00, 0x00, 0x01, 0x03, 0x00, 0x00, 0x00, 0x00, 0xe3, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0xfe, 0xff, 0xff, 0xff, 0x49,
    ]);
}

#[test]
fn the_estimator_finds_the_bottleneck_instead_of_flooding_it() {
    // A 10 Mbit/s link with a deep queue; the operator's rate (the cap) is 100 Mbit/s.
    let link = LinkParams { queue_bytes: 4 << 20, ..LinkParams::clean(Duration::from_millis(10), 10_000_000) };
    let run = |estimate_rate: bool| {
        let cfg = Config { estimate_rate, ..Config::default() };
        let mut p = Pair::new(cfg, link, link, 7);
        p.drive_for(Duration::from_millis(200));
        for i in 0..2000 {
            p.a.send(&message(i, 1000)).unwrap();
        }
        let mut peak = 0;
        for _ in 0..300 {
            p.drive_for(Duration::from_millis(10));
            peak = peak.max(p.ab.queued_packets(p.now));
        }
        assert_exactly_once_in_order(&p, 2000, 1000, 7);
        (peak, p.a.stats().rate_bps, p.a.rate_estimator().map(|e| e.rounds()))
    };
    let (flood_peak, flood_rate, none) = run(false);
    let (peak, rate, rounds) = run(true);
    assert!(none.is_none() && flood_rate == 90_000_000);
    let (rounds, backoffs) = rounds.unwrap();
    assert!(backoffs > 0 && rounds > backoffs, "{rounds} rounds, {backoffs} back-offs");
    assert!(rate < 20_000_000, "paces near the bottleneck, not at the cap: {rate}");
    assert!(peak * 2 < flood_peak, "the queue stays short: {peak} packets against {flood_peak}");
}

#[test]
fn an_acknowledgement_far_behind_asks_for_no_more_repairs_than_the_window_holds() {
    let mut p = Pair::new(Config::default(), clean(10), clean(10), 1);
    p.drive_for(Duration::from_millis(200));
    // Three messages delivered and acknowledged: the window slides past them.
    for i in 0..3 {
        p.a.send(&message(i, 500)).unwrap();
    }
    p.drive_for(Duration::from_millis(200));
    assert_eq!(p.got.len(), 3);
    assert_eq!(p.a.unacked_symbols(), 0);
    let now = p.now;
    let mut buf = vec![0u8; 2000];
    for i in 0..2 {
        p.a.send(&message(3 + i, 500)).unwrap();
        assert!(p.a.poll_transmit(now, 5000 + i, &mut buf).is_some());
    }
    // An authenticated but stale acknowledgement: rank 0 where five columns were sent and
    // the window holds two.
    let ack = cohort_wire::lrt::LrtRepr::Ack(cohort_wire::lrt::AckRepr {
        coder: 0,
        full_rank: false,
        seen: 0,
        released: 0,
        echo_pn: 5001,
        rx_data: 5,
        rank: 0,
        loss_runs: 0,
        ack_delay_us: 0,
    });
    let n = ack.emit(&mut buf).unwrap();
    let pkt = buf[..n].to_vec();
    p.a.handle_packet(now, 900, &pkt);
    let r = p.a.stats().redundancy;
    let mut repairs = 0;
    while p.a.poll_transmit(now, 6000 + repairs, &mut buf).is_some() {
        assert_eq!(buf[0], 1, "only repairs");
        repairs += 1;
    }
    assert!(repairs > 0);
    assert!(repairs as f64 <= (2.0 * (1.0 + r)).ceil(), "{repairs} repairs for a window of 2 (r = {r})");
}

/// Coders roll over every 64 symbols: once the stream has run through a few, each new coder
/// takes the buffers of the ones that finished, so neither end allocates symbol buffers any
/// more. Before the pool every coder allocated its own (a decoder all of its columns at once),
/// and a long connection's resident memory stepped up whenever a rollover overlapped the
/// previous coder.
#[test]
fn coders_rolling_over_reuse_their_buffers() {
    let cfg = Config { coder_symbols: 64, max_window: 32, ..Config::default() };
    let link = lossy(10, 0.05);
    let mut p = Pair::new(cfg, link, link, 3);
    while p.a.state() == &State::Handshaking {
        p.drive_for(Duration::from_millis(50));
    }
    let mut at_warmup = (0, 0);
    for i in 0..6000u64 {
        p.a.send(&message(i, 700)).unwrap();
        p.drive_for(Duration::from_millis(1));
        if i == 2000 {
            at_warmup = (p.a.symbol_buffers_allocated(), p.b.symbol_buffers_allocated());
        }
    }
    p.drive_for(Duration::from_secs(2));
    assert_exactly_once_in_order(&p, 6000, 700, 3);
    let opened = p.a.stats().coders_opened;
    assert!(opened > 50, "{opened} coders");
    let end = (p.a.symbol_buffers_allocated(), p.b.symbol_buffers_allocated());
    // A loss burst may still raise the high-water mark a little; without reuse every one of
    // the rollovers after warm-up would allocate a coder's worth (32 or 64 buffers) again.
    assert!(
        end.0 <= at_warmup.0 + 32 && end.1 <= at_warmup.1 + 64,
        "buffers allocated at warm-up {at_warmup:?}, at the end {end:?}, over {opened} coders"
    );
    assert!(p.b.symbol_buffers() as u64 <= end.1, "held buffers were allocated");
}

/// A source lost while later sources keep arriving (a bulk stream, or a multipath connection
/// whose faster path carries the sources after it). Every acknowledgement then shows a rank at
/// or above what the decoder should have held when the echoed packet left, yet the lost column
/// still blocks every message behind it. The acknowledgement's first unseen column tells the
/// sender which column lacks an equation; the loss is answered within a round trip and a
/// reorder window, not when the stream pauses. Proactive and timer repair are off, so only
/// feedback can answer.
#[test]
fn a_loss_behind_sources_that_keep_arriving_is_answered_by_feedback() {
    let cfg = Config {
        redundancy_min: 0.0,
        redundancy_max: 0.0,
        initial_loss: 0.0,
        repair_delay: Duration::from_secs(5),
        repair_period: Duration::from_secs(5),
        ..Config::default()
    };
    for window_ms in [0u64, 20] {
        let mut p = Pair::new(cfg.clone(), clean(10), clean(10), 1);
        p.a.set_reorder_window(Duration::from_millis(window_ms));
        p.drive_for(Duration::from_millis(200));
        assert_eq!(p.a.state(), &State::Established);
        let mut buf = vec![0u8; 2000];
        p.a.send(&message(0, 500)).unwrap();
        let lost_at = p.now;
        assert!(p.a.poll_transmit(lost_at, p.pn_a, &mut buf).is_some());
        assert_eq!(buf[0], 0, "message 0's source symbol, dropped");
        p.pn_a += 1;
        for i in 1..400 {
            p.a.send(&message(i, 500)).unwrap();
            p.drive_for(Duration::from_millis(1));
        }
        p.drive_for(Duration::from_millis(500));
        assert_exactly_once_in_order(&p, 400, 500, window_ms);
        let waited = p.got[0].0 - lost_at;
        assert!(
            waited < Duration::from_millis(20 + window_ms + 30),
            "window {window_ms} ms: message 0 waited {waited:?} (the stream ran 400 ms)"
        );
        assert!(p.a.stats().repair_feedback_sent >= 1, "{:?}", p.a.stats());
    }
}

/// The receiver says how long it held an acknowledgement: one symbol alone waits out the
/// `ack_delay` timer, and the ACK reports that wait, so the sender can take it out of its
/// round trip.
#[test]
fn an_acknowledgement_reports_how_long_the_receiver_held_it() {
    use cohort_wire::lrt::LrtRepr;
    let cfg = Config::default();
    let mut p = Pair::new(cfg.clone(), clean(5), clean(5), 1);
    p.drive_for(Duration::from_millis(100));
    p.a.send(&message(0, 200)).unwrap();
    let mut buf = vec![0u8; 2000];
    let n = p.a.poll_transmit(p.now, 1000, &mut buf).expect("the symbol");
    let arrived = p.now + Duration::from_millis(5);
    p.b.handle_packet(arrived, 1000, &buf[..n]);
    assert!(p.b.poll_transmit(arrived, 2000, &mut buf).is_none(), "one symbol is acknowledged by the timer");
    let due = p.b.poll_timeout().expect("the acknowledgement timer");
    assert_eq!(due, arrived + cfg.ack_delay);
    p.b.handle_timeout(due);
    let n = p.b.poll_transmit(due, 2000, &mut buf).expect("the acknowledgement");
    match LrtRepr::parse(&buf[..n]) {
        Ok(LrtRepr::Ack(a)) => {
            assert_eq!(a.echo_pn, 1000);
            assert_eq!(u128::from(a.ack_delay_us), cfg.ack_delay.as_micros());
        }
        other => panic!("expected an ACK, got {other:?}"),
    }
}
