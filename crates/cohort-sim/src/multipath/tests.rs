use super::*;
use cohort_medium::link::LossModel;
use cohort_proto::multipath::Scheduler;

fn link(mbit: f64, owd_ms: u64, loss: f64) -> MpPath {
    MpPath::new(LinkParams {
        loss: LossModel::Iid { p: loss },
        ..LinkParams::clean(Duration::from_millis(owd_ms), (mbit * 1e6) as u64)
    })
}

fn ms(x: u64) -> Duration {
    Duration::from_millis(x)
}

fn with(s: Scheduler) -> MpConfig {
    MpConfig { scheduler: s, ..MpConfig::default() }
}

/// A bulk transfer of `messages` of 1200 B with the default scheduler (the application keeps
/// four unsent, as the bench does); every message must arrive.
fn bulk(paths: Vec<MpPath>, messages: u32, seed: u64) -> MpOutcome {
    let r = MpRun { app_buffer_bytes: 4 * 1200, ..MpRun::new(MpConfig::default(), paths, messages, 1200, seed) };
    let o = run(&r).unwrap();
    assert_eq!(o.delivered, messages);
    o
}

#[test]
fn two_paths_carry_a_bulk_transfer_exactly_once_in_order() {
    let o =
        run(&MpRun::new(MpConfig::default(), vec![link(20.0, 10, 0.0), link(10.0, 10, 0.0)], 3000, 1000, 1)).unwrap();
    assert_eq!(o.delivered, 3000);
    assert!(o.in_order);
    assert!(o.sender.paths.iter().all(|q| q.sent > 200), "both paths used: {:?}", o.sender);
    assert!(o.goodput_mbps > 20.0, "more than the better path alone: {:.1} Mbit/s", o.goodput_mbps);
    assert_eq!(o.receiver.malformed, 0);
    assert_eq!(o.delays_ms.len(), 3000);
}

#[test]
fn a_path_that_fails_mid_transfer_costs_no_message() {
    let mut paths = vec![link(20.0, 10, 0.0), link(20.0, 10, 0.0)];
    paths[1].outages.push((ms(600), ms(600_000)));
    let o = run(&MpRun::new(MpConfig::default(), paths, 4000, 1000, 2)).unwrap();
    assert_eq!(o.delivered, 4000);
    assert!(o.in_order);
    let p1 = o.sender.paths[1];
    assert!(!p1.up && p1.failures >= 1, "{p1:?}");
    assert!(o.sender.paths[0].sent > p1.sent);
    // The stall is bounded by the failure detector (200 ms) and LRT's repairs, not by a
    // retransmission timeout that backs off.
    assert!(o.max_stall_ms < 400.0, "stall {} ms", o.max_stall_ms);
}

#[test]
fn a_path_that_returns_is_used_again() {
    let mut paths = vec![link(20.0, 10, 0.0), link(20.0, 10, 0.0)];
    paths[1].outages.push((ms(300), ms(900)));
    let o = run(&MpRun::new(MpConfig::default(), paths, 8000, 1000, 3)).unwrap();
    assert_eq!(o.delivered, 8000);
    let p1 = o.sender.paths[1];
    assert!(p1.up && p1.failures >= 1, "the path failed and came back: {p1:?}");
    assert!(p1.delivered > 1000, "and carried traffic again: {p1:?}");
}

#[test]
fn a_short_flow_is_cloned_on_every_path() {
    let o = run(&MpRun::new(MpConfig::default(), vec![link(20.0, 10, 0.2), link(20.0, 30, 0.0)], 40, 1000, 4)).unwrap();
    assert_eq!(o.delivered, 40);
    assert!(o.sender.paths.iter().map(|q| q.clones_sent).sum::<u64>() >= 20, "{:?}", o.sender);
}

/// LD-MPSP holds the queue near its target where Reno windows fill the buffer: the same
/// bottleneck with a deep queue, the same bulk; messages' delays past the base delay compared.
#[test]
fn the_delay_target_keeps_the_queue_short() {
    let deep = MpPath::new(LinkParams { queue_bytes: 2_000_000, ..link(10.0, 10, 0.0).link });
    let p90 = |s: Scheduler| {
        let mut r = MpRun::new(with(s), vec![deep.clone()], 6000, 1000, 5);
        r.app_buffer_bytes = 16 * 1024;
        let o = run(&r).unwrap();
        assert_eq!(o.delivered, 6000);
        let mut d: Vec<f64> = o.delays_ms[2000..].to_vec();
        d.sort_by(f64::total_cmp);
        d[d.len() * 9 / 10]
    };
    let (ld, reno) = (p90(Scheduler::LdMpsp { tau: ms(20) }), p90(Scheduler::MinRtt));
    assert!(ld < 10.0 + 40.0, "LD-MPSP near its 20 ms target: p90 {ld:.1} ms");
    assert!(reno > 2.0 * ld, "Reno fills the queue: p90 {reno:.1} ms against {ld:.1}");
}

/// τ read as a bound: on two busy paths, most messages arrive within τ of the fastest,
/// where Algorithm 3's law as written settles with the queue at τ and most exceed it; the
/// goodput is the same to a few percent.
#[test]
fn the_delay_target_is_a_bound_most_messages_meet() {
    let go = |share: Option<f64>| {
        let cfg = MpConfig { tau_share: share, ..with(Scheduler::LdMpsp { tau: ms(20) }) };
        let mut r = MpRun::new(cfg, vec![link(20.0, 10, 0.0), link(10.0, 10, 0.0)], 6000, 1200, 6);
        r.app_buffer_bytes = 4 * 1200;
        let o = run(&r).unwrap();
        assert_eq!(o.delivered, 6000);
        assert!(o.in_order);
        let base = o.delays_ms.iter().copied().fold(f64::INFINITY, f64::min);
        let within = o.delays_ms.iter().filter(|&&d| d - base <= 20.0).count() as f64 / o.delays_ms.len() as f64;
        (within, o.goodput_mbps, o.sender.delay_set_ms)
    };
    let (bound, literal) = (go(Some(0.95)), go(None));
    assert!(bound.0 > 0.8, "τ as a bound: {bound:?}");
    assert!(literal.0 < 0.5, "Algorithm 3 as written settles at τ: {literal:?}");
    assert_eq!(literal.2, 20.0, "its set point stays τ");
    assert!(bound.1 > 0.95 * literal.1, "goodput {bound:?} against {literal:?}");
}

#[test]
fn the_same_run_gives_the_same_outcome() {
    let r = MpRun::new(MpConfig::default(), vec![link(12.0, 15, 0.05), link(6.0, 5, 0.1)], 500, 900, 9);
    assert_eq!(run(&r).unwrap(), run(&r).unwrap());
}

/// Random paths, loss and outages over many seeds and every scheduler: every message once,
/// in order.
#[test]
fn seeded_sweep_delivers_everything_in_order() {
    for seed in 0..30u64 {
        let n = 1 + (seed % 3) as usize;
        let mut paths: Vec<MpPath> = (0..n)
            .map(|i| {
                let k = seed * 7 + i as u64;
                link(2.0 + (k % 20) as f64, 2 + k % 40, [0.0, 0.02, 0.1, 0.2][(k % 4) as usize])
            })
            .collect();
        if seed % 5 == 0 && n > 1 {
            paths[seed as usize % n].outages.push((ms(300), ms(900)));
        }
        let sched = [Scheduler::LdMpsp { tau: ms(20) }, Scheduler::MinRtt, Scheduler::RoundRobin][(seed % 3) as usize];
        let mut r = MpRun::new(MpConfig { seed, ..with(sched) }, paths, 600, 700, seed);
        r.limit = Duration::from_secs(120);
        let o = run(&r).unwrap();
        assert_eq!(o.delivered, 600, "seed {seed} ({sched:?}); replay: cargo test -p cohort-sim seeded_sweep");
        assert!(o.in_order, "seed {seed}");
    }
}

/// One path, out for a moment right after the start: the connection recovers.
#[test]
fn a_single_path_recovers_from_an_early_outage() {
    let mut p = link(20.0, 10, 0.0);
    p.outages.push((ms(40), ms(67)));
    let mut r = MpRun::new(MpConfig::default(), vec![p], 417, 1200, 1);
    r.limit = Duration::from_secs(30);
    let o = run(&r).unwrap();
    assert_eq!(o.delivered, 417, "{:?}", o.sender);
}

/// Channel errors on one path are not congestion: its LD-MPSP window does not halve whenever
/// a loss comes with a queue, so the lossy path stays busy (the first version halved at every
/// queue past half the target and left the path idle much of the time: 0.88 at 10% loss).
#[test]
fn random_loss_does_not_halve_a_paths_window() {
    for loss in [0.05, 0.1, 0.2] {
        let busy: Vec<f64> = (1..7)
            .map(|seed| {
                let o = bulk(vec![link(10.0, 10, loss)], 6000, seed);
                let p = o.sender.paths[0];
                (p.bytes_sent + UNDER_MP as u64 * p.sent) as f64 * 8.0 / o.completed.unwrap().as_secs_f64() / 10e6
            })
            .collect();
        let mean = busy.iter().sum::<f64>() / busy.len() as f64;
        assert!(mean > 0.92, "loss {loss}: the path carried datagrams {:.1}% of the time ({busy:.3?})", mean * 100.0);
    }
}

/// A buffer that overflows is congestion, loss or not: a shallow buffer (10 ms at the rate)
/// below the 20 ms target on a path that also drops 5-20% keeps the window near what the
/// buffer holds instead of growing until the overflow dominates. (Twice the discriminator let
/// it grow: first a buffer shallower than τ/2 never counted as a high queue; then the dips of
/// a full buffer's queue counted as low and its overflow raised the channel's rate with the
/// high-queue one: at 10% channel loss 40-60% of the datagrams were lost.)
#[test]
fn overflow_of_a_shallow_buffer_still_halves_the_window() {
    let shallow = |loss: f64| MpPath::new(LinkParams { queue_bytes: 12_500, ..link(10.0, 10, loss).link });
    for loss in [0.0, 0.05, 0.1, 0.2] {
        for seed in 1..7 {
            let p = bulk(vec![shallow(loss)], 6000, seed).sender.paths[0];
            let lost = p.lost as f64 / p.sent as f64;
            assert!(
                lost < loss + 0.05,
                "loss {loss}, seed {seed}: {lost:.3} of the datagrams lost, window {:.1}",
                p.cwnd
            );
        }
    }
}

/// A path the delay balancing would leave empty still carries a packet every round (MS-UCB
/// plays it): a path slow at first and fast later is found again. Path 1 starts at 1 Mbit/s
/// with 150 ms of delay and turns into a 20 Mbit/s, 10 ms path after 1 s.
#[test]
fn a_path_that_recovers_is_measured_again() {
    let mut slow = link(1.0, 150, 0.0);
    slow.changes.push((ms(1000), link(20.0, 10, 0.0).link));
    let mut r = MpRun::new(MpConfig::default(), vec![link(5.0, 10, 0.0), slow], u32::MAX / 2, 1200, 5);
    r.app_buffer_bytes = 4 * 1200;
    r.limit = Duration::from_secs(6);
    let o = run(&r).unwrap();
    let p1 = o.sender.paths[1];
    assert!(p1.sent > o.sender.paths[0].sent, "the recovered path carries most: {:?}", o.sender.paths);
    assert!(o.goodput_mbps > 12.0, "{:.1} Mbit/s", o.goodput_mbps);
}

/// A sender that always has data waiting still sends the repairs its redundancy rate earns
/// (seed 004 §III-E's `src·(1 + r)`): on one saturated path with 10% loss no message waits
/// for a lost symbol's repair for long.
#[test]
fn a_saturated_sender_keeps_its_redundancy() {
    for seed in 1..5 {
        let o = bulk(vec![link(10.0, 10, 0.1)], 8000, seed);
        let l = &o.sender_lrt;
        assert!(
            l.repair_sent as f64 > 0.15 * l.source_sent as f64,
            "seed {seed}: repairs {} for {} sources (feedback {}, signal {})",
            l.repair_sent,
            l.source_sent,
            l.repair_feedback_sent,
            l.repair_signal_sent
        );
        // Without the earned repairs the longest stall was above 600 ms; with them it is a few
        // round trips (100-290 ms over 40 seeds).
        assert!(o.max_stall_ms < 400.0, "seed {seed}: longest stall {:.1} ms", o.max_stall_ms);
    }
}

/// A radio out of range when the connection starts (nothing it carried ever arrived) is
/// used once it comes up: the receiver answers a probe of a path it has heard nothing on,
/// so the path's return does not wait for data the sender no longer sends it.
#[test]
fn a_path_out_from_the_start_is_used_once_it_comes_up() {
    let mut paths = vec![link(20.0, 10, 0.0), link(20.0, 10, 0.0)];
    paths[1].outages.push((ms(0), ms(500)));
    let o = run(&MpRun::new(MpConfig::default(), paths, 8000, 1000, 5)).unwrap();
    assert_eq!(o.delivered, 8000);
    assert!(o.in_order);
    let p1 = o.sender.paths[1];
    assert!(p1.up && p1.failures >= 1, "the path failed at the start and came up: {p1:?}");
    assert!(p1.delivered > 1000, "and carried traffic: {p1:?}");
}

/// The receiver's clock gains 1000 ppm (30 ms over the transfer, as a clock NTP slews might):
/// one-way delays grow with it, yet the paths' queueing delay stays the real one (the round
/// trip, on the sender's clock alone, bounds it), so LD-MPSP keeps its windows and the
/// transfer its goodput. Before the bound, the growing delay read as a queue past τ and the
/// windows shrank to two packets.
#[test]
fn a_drifting_receiver_clock_does_not_read_as_a_queue() {
    let paths = || vec![link(4.0, 10, 0.0), link(2.0, 10, 0.0)];
    let run_at = |ppm: f64| {
        let r = MpRun {
            app_buffer_bytes: 4 * 1200,
            receiver_clock_ppm: ppm,
            ..MpRun::new(MpConfig::default(), paths(), 18_000, 1200, 9)
        };
        let o = run(&r).unwrap();
        assert_eq!(o.delivered, 18_000, "{ppm} ppm");
        assert!(o.in_order);
        o
    };
    let (steady, fast) = (run_at(0.0), run_at(1000.0));
    assert!(
        fast.goodput_mbps > 0.95 * steady.goodput_mbps,
        "goodput {:.2} Mbit/s with the drift, {:.2} without",
        fast.goodput_mbps,
        steady.goodput_mbps
    );
    for p in &fast.sender.paths {
        assert!(p.queueing_ms < 25.0, "queueing {:.1} ms read at the end: {p:?}", p.queueing_ms);
    }
    let slow = run_at(-1000.0);
    assert!(slow.goodput_mbps > 0.95 * steady.goodput_mbps, "a slow clock: {:.2}", slow.goodput_mbps);
    assert!(matches!(
        run(&MpRun { receiver_clock_ppm: -1e6, ..MpRun::new(MpConfig::default(), paths(), 1, 1200, 9) }),
        Err(MpRunError::Clock(_))
    ));
}

/// A radio hands over to an access point farther away (its one-way delay from 10 to 30 ms,
/// the outage of the handover between): the path's queueing delay is measured against the
/// new route, not read 20 ms high for the rest of the connection (above τ, which held its
/// window at two packets: 1050 packets carried against 2912 on the far route from the start;
/// after the fix 2462, the outage and the restart included; 3743 against 4234 since the
/// delay target's tracker no longer winds down on paths 20 ms apart).
#[test]
fn a_path_that_returns_on_a_longer_route_is_measured_afresh() {
    let run_with = |first_owd: u64, handover: bool| {
        let mut p1 = link(10.0, first_owd, 0.0);
        if handover {
            p1.outages.push((ms(1000), ms(1300)));
            p1.changes.push((ms(1150), link(10.0, 30, 0.0).link));
        }
        let mut r = MpRun::new(MpConfig::default(), vec![link(10.0, 10, 0.0), p1], u32::MAX / 2, 1200, 11);
        r.app_buffer_bytes = 4 * 1200;
        r.limit = Duration::from_secs(5);
        run(&r).unwrap().sender.paths[1]
    };
    let (far, moved) = (run_with(30, false), run_with(10, true));
    assert!(moved.up && moved.failures >= 1, "the path failed and came back: {moved:?}");
    assert!(moved.queueing_ms < 20.0, "queueing read at the end {:.1} ms: {moved:?}", moved.queueing_ms);
    assert!(
        moved.delivered as f64 > 0.75 * far.delivered as f64,
        "after the handover the far route carries {} packets, from the start {}",
        moved.delivered,
        far.delivered
    );
}

/// Two 10 Mbit/s paths 10 and 30 ms one way: 20 ms apart with no queue at all, so no window
/// can bring a message within τ = 20 ms of the fastest delivery. The delay target's tracker
/// leaves the set point at τ (Algorithm 3 as written) instead of winding it down to its floor,
/// where the 30 ms path grew by 0.15 packets a round trip and carried 2912 packets in 5 s
/// against the 10 ms path's 4619 (now 4234 against 4591).
#[test]
fn paths_apart_by_more_than_tau_keep_their_windows() {
    let mut r = MpRun::new(MpConfig::default(), vec![link(10.0, 10, 0.0), link(10.0, 30, 0.0)], u32::MAX / 2, 1200, 11);
    r.app_buffer_bytes = 4 * 1200;
    r.limit = ms(5000);
    let o = run(&r).unwrap();
    let (near, far) = (o.sender.paths[0], o.sender.paths[1]);
    assert!(far.delivered as f64 > 0.8 * near.delivered as f64, "far {far:?}, near {near:?}");
    assert_eq!(o.sender.delay_set_ms, 20.0);
    assert!(o.sender.delay_over_tau_share > 0.9, "still counted over τ: {}", o.sender.delay_over_tau_share);
}
