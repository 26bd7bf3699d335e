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
