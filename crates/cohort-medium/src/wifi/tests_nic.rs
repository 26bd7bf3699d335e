//! NIC profiles: per-AC hardware queues against one shared transmit path.

use super::nic_scenario::VoBehindBulk;
use super::*;
use std::time::Duration;

#[test]
fn print_base_hash() {
    for nic in [NicProfile::PerAc, NicProfile::mt76_usb()] {
        for (bulk, seed) in [(1, 1), (4, 7)] {
            let r = VoBehindBulk { duration: Duration::from_secs(2), bulk_stations: bulk, seed, nic, ..Default::default() }.run().unwrap();
            println!("{nic:?} {bulk} hash {:#x} be {} p50 {:?} p99 {:?} n {} lost {}", r.trace_hash, r.be_mbps, r.vo_quantile(0.5), r.vo_quantile(0.99), r.vo_delays.len(), r.vo_lost);
        }
    }
}
