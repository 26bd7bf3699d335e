//! VO message delay behind a bulk backlog under each NIC profile
//! ([`cohort_medium::wifi::nic_scenario::VoBehindBulk`]):
//!
//! ```text
//! cargo run --release -p cohort-medium --example nic_profiles -- [SIM_SECONDS] [SEEDS] [--json]
//! ```
//!
//! 5 stations on 802.11ac (VHT 433.3 Mbit/s, ns-3's default aggregation, 802.11-2016 EDCA,
//! standard timing, 64 + 1000 frames per AC). Station 1 keeps an AC_BE backlog to station 0
//! and sends a 4096-byte AC_VO message (three MSDUs) at 30 Hz; in the second configuration
//! stations 2-4 keep AC_BE backlogs too. The first second is warm-up. Delays are from the
//! message's enqueue to the delivery of its last MSDU, pooled over the seeds.

use cohort_medium::wifi::NicProfile;
use cohort_medium::wifi::nic_scenario::VoBehindBulk;
use std::time::Duration;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let json = args.iter().any(|a| a == "--json");
    let mut nums = args.iter().filter_map(|a| a.parse::<f64>().ok());
    let secs = nums.next().unwrap_or(60.0).clamp(2.0, 1e5);
    let seeds = nums.next().unwrap_or(3.0).clamp(1.0, 100.0) as u64;
    let mut rows = vec![];
    for bulk_stations in [1, 4] {
        for (name, nic) in [("per_ac", NicProfile::PerAc), ("shared_tx", NicProfile::mt76_usb())] {
            let (mut delays, mut lost, mut be) = (vec![], 0, 0.0);
            for seed in 1..=seeds {
                let s = VoBehindBulk {
                    bulk_stations,
                    nic,
                    seed,
                    duration: Duration::from_secs_f64(secs),
                    ..Default::default()
                };
                let r = s.run().unwrap_or_else(|e| panic!("{e}"));
                delays.extend(r.vo_delays);
                lost += r.vo_lost;
                be += r.be_mbps / seeds as f64;
            }
            delays.sort();
            let q = |p: f64| {
                let i = ((p * delays.len() as f64).ceil() as usize).clamp(1, delays.len().max(1)) - 1;
                delays.get(i).map_or(f64::NAN, |d| d.as_secs_f64() * 1e3)
            };
            let over_33 = delays.iter().filter(|d| **d > Duration::from_millis(33)).count();
            rows.push((bulk_stations, name, nic, delays.len(), lost, q(0.5), q(0.9), q(0.99), q(1.0), over_33, be));
        }
    }
    let cmd = format!("cargo run --release -p cohort-medium --example nic_profiles -- {secs} {seeds}");
    if json {
        let items: Vec<String> = rows
            .iter()
            .map(|r| {
                format!(
                    "{{\"bulk_stations\":{},\"profile\":\"{}\",\"nic\":\"{:?}\",\"messages\":{},\"lost\":{},\
                     \"vo_p50_ms\":{:.3},\"vo_p90_ms\":{:.3},\"vo_p99_ms\":{:.3},\"vo_max_ms\":{:.3},\
                     \"over_33ms\":{},\"be_mbps\":{:.1}}}",
                    r.0, r.1, r.2, r.3, r.4, r.5, r.6, r.7, r.8, r.9, r.10
                )
            })
            .collect();
        println!(
            "{{\"command\":\"{cmd}\",\"sim_seconds\":{secs},\"warmup_s\":1,\"seeds\":{seeds},\"rows\":[{}]}}",
            items.join(",")
        );
        return;
    }
    println!("# {cmd}");
    println!("| BE senders | profile | VO msgs | lost | p50 ms | p90 ms | p99 ms | max ms | > 33 ms | BE Mbit/s |");
    println!("|---|---|---|---|---|---|---|---|---|---|");
    for r in rows {
        println!(
            "| {} | {} | {} | {} | {:.2} | {:.2} | {:.2} | {:.2} | {} | {:.1} |",
            r.0, r.1, r.3, r.4, r.5, r.6, r.7, r.8, r.9, r.10
        );
    }
}
