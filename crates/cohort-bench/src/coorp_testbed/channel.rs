//! The channel search: the fastest candidate the emulator sustains in real time here (see the
//! [parent module](super)), and the model's single-station goodput the agents shape to.

use super::workload::{self, WorkloadParams};
use super::{Bed, Channel, TestbedParams};
use crate::stats::round;
use cohort_emu::cpustat::CpuTimes;
use serde_json::{Value, json};
use std::io::{Read, Write};
use std::net::{SocketAddr, SocketAddrV4, TcpStream};
use std::time::{Duration, Instant};

/// Goodput (Mbit/s) of one saturating kernel TCP flow from worker 1 to the leader, measured
/// at the receiver over `secs` after `warmup_s` (slow start).
fn tcp_goodput(bed: &Bed, port: u16, warmup_s: f64, secs: f64) -> Result<f64, String> {
    let at = SocketAddrV4::new(bed.leader.addr, port);
    let listener = cohort_emu::netns::in_netns(&bed.leader.ns, move || std::net::TcpListener::bind(at))
        .map_err(|e| e.to_string())?;
    let mut tx = cohort_emu::netns::in_netns(&bed.workers[0].ns, move || {
        TcpStream::connect_timeout(&SocketAddr::V4(at), Duration::from_secs(5))
    })
    .map_err(|e| e.to_string())?;
    let (mut rx, _) = listener.accept().map_err(|e| e.to_string())?;
    let total = Duration::from_secs_f64(warmup_s + secs);
    for s in [&tx, &rx] {
        s.set_write_timeout(Some(Duration::from_millis(100))).map_err(|e| e.to_string())?;
        s.set_read_timeout(Some(Duration::from_millis(100))).map_err(|e| e.to_string())?;
    }
    let start = Instant::now();
    let writer = std::thread::spawn(move || {
        let buf = vec![0u8; 64 * 1024];
        while start.elapsed() < total {
            let _ = tx.write(&buf);
        }
    });
    let mut buf = vec![0u8; 64 * 1024];
    let mut bytes = 0u64;
    let warm = Duration::from_secs_f64(warmup_s);
    let mut t_warm = None;
    while start.elapsed() < total {
        // The span starts at the first read after the warm-up, whose bytes arrived before it.
        if let Ok(n) = rx.read(&mut buf)
            && start.elapsed() >= warm
            && t_warm.replace(t_warm.unwrap_or_else(Instant::now)).is_some()
        {
            bytes += n as u64;
        }
    }
    let _ = writer.join();
    let span = t_warm.map_or(0.0, |t| t.elapsed().as_secs_f64());
    Ok(if span > 0.0 { bytes as f64 * 8.0 / span / 1e6 } else { 0.0 })
}

/// The model's single-station bulk goodput (Mbit/s) on `ch` with `profile`: one worker, no
/// control, one 8 MiB transfer, the simulator's 802.11 code.
pub fn model_goodput(ch: &Channel, profile: &str) -> Result<f64, String> {
    let station = crate::coorp::profiles()
        .into_iter()
        .find(|(n, _)| *n == profile)
        .map(|(_, s)| s)
        .ok_or_else(|| format!("unknown NIC profile {profile:?}"))?;
    let cp = cohort_sim::crl::CrlParams {
        robots: 2,
        phy_mbps: ch.data_mbps,
        perception_bytes: 0,
        action_bytes: 0,
        batch_bytes: 1500,
        update_bytes: 8 << 20,
        train_ms: 0.0,
        epochs: 1,
        station,
        ..Default::default()
    };
    Ok(cohort_sim::crl::run(&cp, cohort_sim::crl::System::Edca, 1)?.bh_mbps())
}

/// Measures candidate channels fastest first and returns the report and the first sustained
/// one (the slowest candidate if none is).
pub fn choose_channel(p: &TestbedParams, progress: &mut impl FnMut(&str)) -> Result<(Channel, Value), String> {
    let mut measured = Vec::new();
    let mut chosen = None;
    for ch in &p.candidates {
        progress(&format!("channel search: {} {} Mbit/s", ch.phy, ch.data_mbps));
        let model = model_goodput(ch, "per_ac")?;
        let bed = Bed::up(p.workers, ch, "per_ac", p.seed)?;
        let cpu0 = CpuTimes::read(None).unwrap_or_default();
        let tcp = tcp_goodput(&bed, 7490, 1.0, p.probe_s)?;
        let wl = WorkloadParams {
            epochs: 1000,
            max_s: p.probe_s + 0.5,
            warmup_s: 0.5,
            update_bytes: 1 << 20,
            ..p.workload.clone()
        };
        let o = workload::run(&bed.leader, &bed.workers, &wl).map_err(|e| e.to_string())?;
        let late = bed.lateness();
        let cpu1 = CpuTimes::read(None).unwrap_or_default();
        bed.tb.down().map_err(|e| e.to_string())?;
        let late_p99 = late["late_us_p99"].as_f64().unwrap_or(f64::INFINITY);
        let ok = late_p99 <= p.max_late_us_p99 && tcp >= p.min_goodput_share * model;
        measured.push(json!({
            "phy": ch.phy, "data_mbps": ch.data_mbps,
            "model_single_station_mbps": round(model, 2),
            "tcp_single_flow_mbps": round(tcp, 2),
            "tcp_share_of_model": round(tcp / model.max(1e-9), 3),
            "workload_bulk_bytes_mbps": round(o.bh_bytes as f64 * 8.0 / o.run_s.max(1e-9) / 1e6, 2),
            "workload_loops": o.loops,
            "emulator": late,
            "steal_share": round(cpu0.steal_share(&cpu1), 4),
            "sustained": ok,
        }));
        if ok {
            chosen = Some(ch.clone());
            break;
        }
    }
    let (ch, how) = match chosen {
        Some(c) => (c, "the fastest candidate the emulator sustained"),
        None => (
            p.candidates.last().cloned().ok_or("no candidate channels")?,
            "no candidate was sustained; the slowest is used and its figures are the host's, not the model's",
        ),
    };
    Ok((
        ch.clone(),
        json!({
            "phy": ch.phy, "data_mbps": ch.data_mbps, "chosen": how,
            "criterion": format!(
                "emulator delivery lateness p99 <= {} us over a {} s saturating TCP flow and {} s of the EDCA workload, \
                 and that TCP flow's goodput >= {} of the model's single-station goodput",
                p.max_late_us_p99, p.probe_s, p.probe_s, p.min_goodput_share),
            "measurements": measured,
        }),
    ))
}
