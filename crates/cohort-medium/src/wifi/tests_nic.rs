//! NIC profiles: per-AC hardware queues against one shared transmit path.

use super::nic_scenario::VoBehindBulk;
use super::*;
use std::time::Duration;

#[test]
fn print_base_hash() {
    let r = VoBehindBulk { duration: Duration::from_secs(2), ..Default::default() }.run().unwrap();
    println!("hash {:#x} be {} p50 {:?} p99 {:?}", r.trace_hash, r.be_mbps, r.vo_quantile(0.5), r.vo_quantile(0.99));
    let r = VoBehindBulk { duration: Duration::from_secs(2), bulk_stations: 4, seed: 7, ..Default::default() }.run().unwrap();
    println!("hash {:#x} be {} p50 {:?} p99 {:?}", r.trace_hash, r.be_mbps, r.vo_quantile(0.5), r.vo_quantile(0.99));
}
