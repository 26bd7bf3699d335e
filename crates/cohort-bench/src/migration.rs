//! `cohort bench migration`: a robot changes address in the middle of a two-way LRT stream
//! (issue 19: "loses no message and stalls no longer than one RTT").
//!
//! Two real [`LrtSocket`]s on loopback talk through a relay thread that plays the network: it
//! delays every datagram by `owd_ms` each way and, after `rebind_after` datagrams from the
//! client, starts carrying the client's traffic from a new source port and drops whatever the
//! server still sends to the old one (a NAT rebinding, or a drone that moved to another
//! access point and got a new address). Both ends send a timestamped message every
//! `interval_ms`. The server keeps answering at the old address until the client has answered
//! its path challenge from the new one, so the server-to-client direction is where a move
//! costs time; the client-to-server direction shows what the lost acknowledgements cost.
//!
//! Per direction and repetition: messages sent and delivered (each once, in order), the
//! one-way delay of every message, and the **stall**: the largest delay of a message minus the
//! path's one-way delay, which is the time a move added. One process clock stamps both ends,
//! so delays are exact. The figure to compare is the round trip `2 · owd_ms`.

use crate::progress::{Plan, Step};
use crate::stats::{mean_ci95, quantile, round};
use cohort_net::{LrtSocket, NetError, SocketConfig};
use serde::Serialize;
use serde_json::{Value, json};
use std::collections::VecDeque;
use std::net::{SocketAddr, UdpSocket};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// What to run.
#[derive(Debug, Clone, Serialize)]
pub struct MigrationParams {
    pub owd_ms: f64,
    pub interval_ms: f64,
    /// Messages each end sends per repetition.
    pub count: u32,
    pub size: usize,
    /// Client datagrams the relay carries from the first address.
    pub rebind_after: usize,
    pub reps: u32,
}

impl Default for MigrationParams {
    fn default() -> Self {
        MigrationParams { owd_ms: 10.0, interval_ms: 1.0, count: 3000, size: 200, rebind_after: 1500, reps: 5 }
    }
}

const SECRET: &[u8] = b"cohort migration bench team secret";

/// The relay: client <-> `outside` | `up` <-> server, `owd` each way; after `rebind_after`
/// client datagrams `up` is replaced by a fresh socket (a new source address for the server).
fn relay(
    server: SocketAddr,
    owd: Duration,
    rebind_after: usize,
    stop: Arc<AtomicBool>,
) -> std::io::Result<(SocketAddr, std::thread::JoinHandle<()>)> {
    let outside = UdpSocket::bind("127.0.0.1:0")?;
    outside.set_nonblocking(true)?;
    let addr = outside.local_addr()?;
    let mut up = UdpSocket::bind("127.0.0.1:0")?;
    up.set_nonblocking(true)?;
    let h = std::thread::Builder::new().name("migration-relay".into()).spawn(move || {
        let (mut client, mut carried, mut buf) = (None, 0usize, vec![0u8; 70_000]);
        // Datagrams in flight: (due, towards the server?, bytes).
        let mut flight: VecDeque<(Instant, bool, Vec<u8>)> = VecDeque::new();
        while !stop.load(Ordering::Relaxed) {
            let mut idle = true;
            while let Ok((n, from)) = outside.recv_from(&mut buf) {
                idle = false;
                client = Some(from);
                flight.push_back((Instant::now() + owd, true, buf[..n].to_vec()));
            }
            while let Ok((n, _)) = up.recv_from(&mut buf) {
                idle = false;
                flight.push_back((Instant::now() + owd, false, buf[..n].to_vec()));
            }
            let now = Instant::now();
            while flight.front().is_some_and(|f| f.0 <= now) {
                let Some((_, to_server, bytes)) = flight.pop_front() else { break };
                idle = false;
                if to_server {
                    carried += 1;
                    if carried == rebind_after {
                        // The old mapping is gone: what the server sends there is lost.
                        match UdpSocket::bind("127.0.0.1:0").and_then(|s| s.set_nonblocking(true).map(|()| s)) {
                            Ok(s) => up = s,
                            Err(e) => tracing::error!(%e, "relay: rebinding failed"),
                        }
                    }
                    let _ = up.send_to(&bytes, server);
                } else if let Some(c) = client {
                    let _ = outside.send_to(&bytes, c);
                }
            }
            if idle {
                std::thread::sleep(Duration::from_micros(50));
            }
        }
    })?;
    Ok((addr, h))
}

fn message(epoch: Instant, i: u32, size: usize) -> Vec<u8> {
    let mut m = vec![0u8; size.max(12)];
    m[..4].copy_from_slice(&i.to_be_bytes());
    m[4..12].copy_from_slice(&(epoch.elapsed().as_nanos() as u64).to_be_bytes());
    m
}

/// Sends `count` messages, one every `interval`.
fn sender(s: Arc<LrtSocket>, epoch: Instant, p: MigrationParams) -> std::thread::JoinHandle<Result<(), NetError>> {
    std::thread::spawn(move || {
        let interval = Duration::from_secs_f64(p.interval_ms / 1e3);
        let start = Instant::now();
        for i in 0..p.count {
            let due = start + interval * i;
            if let Some(d) = due.checked_duration_since(Instant::now()) {
                std::thread::sleep(d);
            }
            s.send(&message(epoch, i, p.size))?;
        }
        Ok(())
    })
}

/// Receives until `count` messages arrived or `deadline`; returns each message's one-way
/// delay in ms, and whether every one arrived once and in order.
fn receiver(s: &LrtSocket, epoch: Instant, count: u32, deadline: Instant) -> (Vec<f64>, bool) {
    let (mut delays, mut in_order) = (Vec::new(), true);
    while (delays.len() as u32) < count {
        let Some(left) = deadline.checked_duration_since(Instant::now()) else { break };
        let Ok(m) = s.recv_timeout(Some(left)) else { break };
        let i = u32::from_be_bytes(m[..4].try_into().unwrap_or_default());
        let sent = u64::from_be_bytes(m[4..12].try_into().unwrap_or_default());
        in_order &= i == delays.len() as u32;
        delays.push((epoch.elapsed().as_nanos() as f64 - sent as f64) / 1e6);
    }
    let complete = in_order && delays.len() as u32 == count;
    (delays, complete)
}

/// Stall and delay figures of one direction's delays.
fn direction(delays: &[f64], complete: bool, owd_ms: f64) -> Value {
    let mut sorted = delays.to_vec();
    sorted.sort_by(f64::total_cmp);
    let max = sorted.last().copied().unwrap_or(f64::NAN);
    json!({
        "delivered": delays.len(),
        "exactly_once_in_order": complete,
        "delay_ms": { "p50": round(quantile(&sorted, 0.5), 3), "p99": round(quantile(&sorted, 0.99), 3), "max": round(max, 3) },
        "stall_ms": round(max - owd_ms, 3),
    })
}

/// One repetition: both directions' delays, and the sockets' migration counters.
fn once(p: &MigrationParams, rep: u32) -> Result<Value, String> {
    let e = |e: NetError| e.to_string();
    let epoch = Instant::now();
    let any: SocketAddr = "127.0.0.1:0".parse().map_err(|_| "address")?;
    let server = Arc::new(LrtSocket::listen(any, SocketConfig::new(SECRET, 7, 1)).map_err(e)?);
    let stop = Arc::new(AtomicBool::new(false));
    let owd = Duration::from_secs_f64(p.owd_ms / 1e3);
    let (relay_addr, relay_thread) =
        relay(server.local_addr(), owd, p.rebind_after, stop.clone()).map_err(|e| e.to_string())?;
    let client = Arc::new(LrtSocket::connect(relay_addr, SocketConfig::new(SECRET, 7, 2 + rep)).map_err(e)?);
    server.wait_connected(Some(Duration::from_secs(10))).map_err(e)?;
    let first = server.peer_addr();
    let to_server = sender(client.clone(), epoch, p.clone());
    let to_client = sender(server.clone(), epoch, p.clone());
    let run = Duration::from_secs_f64(p.interval_ms * f64::from(p.count) / 1e3) + Duration::from_secs(10);
    let deadline = Instant::now() + run;
    let (s2, count) = (server.clone(), p.count);
    let up = std::thread::spawn(move || receiver(&s2, epoch, count, deadline));
    let (down, down_ok) = receiver(&client, epoch, p.count, deadline);
    let (up, up_ok) = up.join().map_err(|_| "receiver thread panicked")?;
    let sent = [to_server.join(), to_client.join()];
    stop.store(true, Ordering::Relaxed);
    let _ = relay_thread.join();
    for r in sent {
        r.map_err(|_| "sender thread panicked")?.map_err(|e| format!("send failed: {e}"))?;
    }
    let st = server.stats();
    Ok(json!({
        "rep": rep,
        "moved": server.peer_addr() != first,
        "migrations": st.migrations,
        "path_challenges": st.path_challenges,
        "client_to_server": direction(&up, up_ok, p.owd_ms),
        "server_to_client": direction(&down, down_ok, p.owd_ms),
    }))
}

/// Runs the repetitions and pools them.
pub fn bench(p: &MigrationParams, progress: impl FnMut(&Step)) -> Result<Value, String> {
    if p.rebind_after == 0 || p.count == 0 || p.reps == 0 || !(p.owd_ms >= 0.0 && p.interval_ms > 0.0) {
        return Err("count, reps and rebind_after must be positive, owd_ms at least 0, interval_ms above 0".into());
    }
    let mut plan = Plan::new(u64::from(p.reps), progress);
    let mut runs = Vec::new();
    for rep in 0..p.reps {
        plan.begin(&format!("repetition {} of {}", rep + 1, p.reps));
        runs.push(once(p, rep)?);
    }
    plan.finish();
    let stalls = |dir: &str| runs.iter().filter_map(|r| r[dir]["stall_ms"].as_f64()).collect::<Vec<_>>();
    let summary = |dir: &str| {
        let v = stalls(dir);
        let (m, ci) = mean_ci95(&v);
        json!({ "stall_ms_mean": round(m, 3), "stall_ms_ci95": round(ci, 3),
                "stall_ms_max": round(v.iter().copied().fold(f64::NAN, f64::max), 3),
                "every_message_once_in_order": runs.iter().all(|r| r[dir]["exactly_once_in_order"] == true) })
    };
    Ok(json!({
        "bench": "migration",
        "command": format!(
            "cohort bench migration --json --owd-ms {} --interval-ms {} --count {} --size {} --rebind-after {} --reps {}",
            p.owd_ms, p.interval_ms, p.count, p.size, p.rebind_after, p.reps
        ),
        "params": p,
        "rtt_ms": round(2.0 * p.owd_ms, 3),
        "every_run_moved": runs.iter().all(|r| r["moved"] == true),
        "client_to_server": summary("client_to_server"),
        "server_to_client": summary("server_to_client"),
        "runs": runs,
    }))
}
