//! Aggregation as ns-3 3.44 does it, and the stored matrix against ns-3.

use super::ns3_matrix::{self, CellResult};
use super::scenario::{EdcaSatScenario, PhyStandard};
use super::*;
use cohort_time::Instant;
use std::time::Duration;

#[test]
fn ht_and_vht_defaults_aggregate_be_and_vi_not_vo_or_bk() {
    for phy in [Phy::ht(65.0), Phy::vht(78.0)] {
        let d = Aggregation::ns3_defaults(&phy);
        for ac in [Ac::Be, Ac::Vi] {
            assert_eq!(d[ac.index()], AmpduLimit::HT, "{ac:?} on {:?}: 64 MPDUs, 65 535 bytes", phy.kind);
        }
        for ac in [Ac::Vo, Ac::Bk] {
            assert!(!d[ac.index()].aggregates(), "{ac:?} on {:?}", phy.kind);
        }
        assert!(Aggregation::OFF.limits(&phy).iter().all(|l| !l.aggregates()));
    }
    for phy in [Phy::ofdm(54.0), Phy::erp_ofdm(54.0), Phy::dsss(11.0)] {
        assert!(Aggregation::ns3_defaults(&phy).iter().all(|l| !l.aggregates()), "{:?} never aggregates", phy.kind);
    }
    // Overrides per category, capped to what the PHY carries.
    let a: Aggregation =
        toml::from_str("max_ampdu_bytes = { vo = 2000000, be = 0 }\nmax_amsdu_bytes = { vi = 20000 }").unwrap();
    let l = a.limits(&Phy::ht(65.0));
    assert_eq!(l[Ac::Vo.index()].max_bytes, 65_535);
    assert!(!l[Ac::Be.index()].aggregates());
    assert_eq!(l[Ac::Vi.index()].max_amsdu_bytes, 7935);
    assert_eq!(a.limits(&Phy::vht(78.0))[Ac::Vo.index()].max_bytes, 1_048_575);
}

/// The kind of scenario: 802.11n, every 4th sender on AC_VO. With the defaults
/// AC_BE sends A-MPDUs and AC_VO single frames; turning aggregation off changes the split.
#[test]
fn ht_scenario_aggregates_best_effort_by_default() {
    let s =
        EdcaSatScenario { phy: PhyStandard::N, data_mbps: 65.0, stations: 6, duration_s: 1.0, ..Default::default() };
    let run = s.saturation_run().unwrap();
    assert_eq!(run.station.ampdu, Aggregation::ns3_defaults(&run.phy));
    let mut m: Medium<usize> = Medium::new(run.phy, run.edca, &vec![run.station; 7], 1).unwrap();
    for i in 0..200 {
        m.enqueue(Instant::ZERO, 1, Ac::Be, Dest::Unicast(0), 1508, i).unwrap_or(());
        m.enqueue(Instant::ZERO, 4, Ac::Vo, Dest::Unicast(0), 1508, i).unwrap_or(());
    }
    while let Some(t) = m.poll_timeout() {
        m.handle_timeout(t);
        while m.poll_event(t).is_some() {}
    }
    let (be, vo) = (m.stats(1, Ac::Be).unwrap(), m.stats(4, Ac::Vo).unwrap());
    assert!(be.successes > 3 * be.attempts, "A-MPDUs carry many frames each: {be:?}");
    assert_eq!(vo.successes, vo.attempts - vo.collisions, "one frame per PPDU: {vo:?}");
    let on = s.run().unwrap();
    let off = EdcaSatScenario { aggregation: Aggregation::OFF, ..s }.run().unwrap();
    assert!(on.be_mbps > 2.0 * off.be_mbps, "{on:?} vs {off:?}");
}

/// A TXOP of A-MPDUs: the first fills the block-ack window, the next one shrinks to fit what
/// is left of AC_VI's 4.096 ms, and nothing goes beyond it.
#[test]
fn ampdus_shrink_to_fit_the_rest_of_the_txop() {
    let phy = Phy::ht(65.0);
    let edca = EdcaTable::Ieee2020.params(&phy);
    let cfg = StationConfig { ampdu: Aggregation::ns3_defaults(&phy), queue_depth: 500, ..StationConfig::default() };
    let mut m: Medium<u32> = Medium::new(phy, edca, &[cfg; 2], 1).unwrap().with_cf_end(false);
    for i in 0..300 {
        m.enqueue(Instant::ZERO, 0, Ac::Vi, Dest::Unicast(1), 236, i).unwrap();
    }
    let mut sent: Vec<Instant> = vec![];
    while let Some(t) = m.poll_timeout() {
        m.handle_timeout(t);
        while let Some(e) = m.poll_event(t) {
            if let MediumEvent::Sent { at, .. } = e {
                sent.push(at);
            }
        }
    }
    assert_eq!(sent.len(), 300);
    // The first access sets up the block-ack agreement; then TXOPs of A-MPDUs.
    let mut bursts: Vec<(Instant, usize)> = vec![];
    for t in sent {
        match bursts.last_mut() {
            Some((at, k)) if *at == t => *k += 1,
            _ => bursts.push((t, 1)),
        }
    }
    assert_eq!(bursts[0].1, 64, "the first A-MPDU fills the 64-MPDU window: {bursts:?}");
    assert!(bursts[1].1 < 64 && bursts[1].1 > 10, "the second shrinks to the TXOP's rest: {bursts:?}");
    let txop = bursts[1].0 - bursts[0].0;
    assert!(txop < Duration::from_micros(4096), "{txop:?}");
}

/// A lost A-MPDU is followed by a BlockAckReq exchange in the next access, before the
/// MPDUs go again (ns-3's `UseExplicitBarAfterMissedBlockAck`).
#[test]
fn a_lost_ampdu_costs_a_block_ack_request() {
    let phy = Phy::ht(65.0);
    let edca = EdcaTable::Ieee2020.params(&phy);
    let run = |fer: f64| {
        let cfg = StationConfig { ampdu: Aggregation::ns3_defaults(&phy), fer, ..StationConfig::default() };
        let mut m: Medium<u32> = Medium::new(phy, edca, &[cfg; 2], 1).unwrap();
        for i in 0..64 {
            m.enqueue(Instant::ZERO, 0, Ac::Be, Dest::Unicast(1), 1508, i).unwrap();
        }
        while let Some(t) = m.poll_timeout() {
            m.handle_timeout(t);
            while m.poll_event(t).is_some() {}
        }
        m.stats(0, Ac::Be).unwrap()
    };
    let clean = run(0.0);
    // ADDBA, then A-MPDUs of up to 5.484 ms: 42 frames would fit 65 535 bytes, 28 fit the
    // time at 65 Mbit/s, so 28 + 28 + 8.
    assert_eq!(clean.attempts, 4, "{clean:?}");
    let lossy = run(1.0);
    // Every A-MPDU is lost whole: each failure is followed by a BlockAckReq access (but for
    // the few after which the retry limit emptied the queue).
    assert_eq!(lossy.successes, 0);
    let data_ppdus = lossy.collisions;
    let bars = lossy.attempts - 1 - data_ppdus;
    assert!(bars <= data_ppdus && bars >= data_ppdus * 9 / 10, "{lossy:?}");
}

/// The ns-3 runs of a stored table (`docs/bench/NAME_raw/`) and the table (`NAME.json`).
fn medium_stored_matrix(name: &str) -> (Vec<ns3_matrix::Ns3Run>, serde_json::Value) {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/bench");
    let runs = ns3_matrix::read_ns3_dir(&root.join(format!("{name}_raw"))).unwrap();
    let json = std::fs::read_to_string(root.join(format!("{name}.json"))).unwrap();
    (runs, serde_json::from_str(&json).unwrap())
}

/// Re-derives the matrix table from ns-3's raw output kept in the repository and the model,
/// and checks it against the stored table: the same ns-3 means, the same model figures, and
/// every cell the table records as meeting the goals (total within 3 %, every category with
/// at least 5 % of the total within 10 %) still meets them. The same for the HT MCS 7 sweep
/// over the number of senders (`ns3_n7_sweep`).
#[test]
fn ns3_matrix_table_is_rederived_from_the_raw_runs() {
    let (runs, _) = medium_stored_matrix("ns3_matrix");
    assert!(runs.len() >= 3 * 40, "at least 40 cells of 3 runs: {}", runs.len());
    for name in ["ns3_matrix", "ns3_n7_sweep"] {
        check_stored_table(name);
    }
}

fn check_stored_table(name: &str) {
    let (runs, stored) = medium_stored_matrix(name);
    let results: Vec<CellResult> = ns3_matrix::compare(&runs).unwrap();
    let cells = stored["cells"].as_array().unwrap();
    assert_eq!(results.len(), cells.len(), "{name}");
    for (r, c) in results.iter().zip(cells) {
        let label = format!("{name}: {:?}", r.cell);
        assert_eq!(c["cell"]["phy"], r.cell.phy.as_str(), "{label}");
        assert_eq!(c["runs"].as_u64().unwrap() as usize, r.runs, "{label}");
        for ac in 0..4 {
            let ns3 = c["ns3_mbps"][ac].as_f64().unwrap();
            let model = c["model_mbps"][ac].as_f64().unwrap();
            assert!((ns3 - r.ns3_mbps[ac]).abs() <= 1e-6 * (1.0 + ns3), "{label}: ns-3 mean");
            assert!((model - r.model_mbps[ac]).abs() <= 1e-6 * (1.0 + model), "{label}: model");
        }
        if c["meets_goal"].as_bool().unwrap() {
            assert!(r.meets_goal, "{label}: total {:+.3}, worst category {:.3}", r.total_err, r.worst_ac_err());
        }
    }
    let met = results.iter().filter(|r| r.meets_goal).count();
    assert_eq!(met as u64, stored["cells_meeting_goal"].as_u64().unwrap());
}
