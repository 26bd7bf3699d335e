//! `cohort group run`: one GCBRR group member over real UDP (a testbed node or a real host),
//! showing membership changes live; the coordinator issues requests and polls for joins and
//! leaves. Also the loopback team of `cohort demo`.

use clap::{Args, Subcommand};
use cohort_net::group::{GroupConfig, GroupError, GroupSocket, Start, incarnation_from_clock};
use cohort_proto::group::{Config as Timing, Event};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

#[derive(Debug, Args)]
pub struct GroupArgs {
    #[command(subcommand)]
    cmd: GroupCmd,
}

#[derive(Debug, Subcommand)]
enum GroupCmd {
    /// Run one member until `--duration-s` passes or it leaves the group (exit status 3 when
    /// the group expelled it).
    Run(RunArgs),
}

#[derive(Debug, Args)]
struct RunArgs {
    /// This process's id, unique in the team (the smallest pid of a static group coordinates).
    #[arg(long)]
    pid: u32,
    /// Own address and the team's port, e.g. 10.78.0.1:7400.
    #[arg(long)]
    addr: SocketAddr,
    /// The team's broadcast address (subnet broadcast or IPv4 multicast group), same port.
    #[arg(long)]
    broadcast: SocketAddr,
    /// Start as a member of this static group (comma-separated pids); otherwise join.
    #[arg(long, value_delimiter = ',')]
    group: Vec<u32>,
    /// Team secret (at least 16 bytes); defaults to the COHORT_TEAM_SECRET environment variable.
    #[arg(long, env = "COHORT_TEAM_SECRET", hide_env_values = true)]
    secret: String,
    #[arg(long, default_value_t = 1)]
    team: u32,
    /// As coordinator: issue a request to every member this often (0: never).
    #[arg(long, default_value_t = 1000)]
    request_every_ms: u64,
    /// Request and reply payload, bytes.
    #[arg(long, default_value_t = 64)]
    payload: usize,
    /// As coordinator: poll for joins and leaves this often (0: never).
    #[arg(long, default_value_t = 3000)]
    poll_every_ms: u64,
    /// `joinT` and `leaveT` of those polls.
    #[arg(long, default_value_t = 200)]
    poll_t_ms: u64,
    /// `MsgT`, ms.
    #[arg(long, default_value_t = 30)]
    msg_t_ms: u64,
    /// `FaultDetectT`, ms.
    #[arg(long, default_value_t = 1000)]
    fault_detect_ms: u64,
    /// Leave the group after this many seconds.
    #[arg(long)]
    leave_after_s: Option<f64>,
    /// Stop after this many seconds (default: run until interrupted).
    #[arg(long)]
    duration_s: Option<f64>,
    /// One JSON object per line instead of text.
    #[arg(long)]
    json: bool,
}

/// What can stop a group command.
#[derive(Debug, thiserror::Error)]
pub enum GroupCmdError {
    #[error(transparent)]
    Group(#[from] GroupError),
    #[error("{0}")]
    Invalid(String),
}

pub fn run(a: &GroupArgs) -> Result<ExitCode, GroupCmdError> {
    match &a.cmd {
        GroupCmd::Run(r) => run_member(r),
    }
}

fn timing(r: &RunArgs) -> Result<Timing, GroupCmdError> {
    let t = Timing {
        msg_t: Duration::from_millis(r.msg_t_ms),
        fault_detect_t: Duration::from_millis(r.fault_detect_ms),
        heartbeat_t: Duration::from_millis(r.fault_detect_ms / 4),
        ..Timing::default()
    };
    t.validate().map_err(|e| GroupCmdError::Invalid(e.to_string()))?;
    Ok(t)
}

/// Prints one line: text, or a JSON object with `event` and the fields.
fn say(json: bool, pid: u32, what: &str, fields: serde_json::Value) {
    let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64());
    if json {
        let mut o = serde_json::json!({ "t": t, "pid": pid, "event": what });
        if let (Some(o), Some(f)) = (o.as_object_mut(), fields.as_object()) {
            o.extend(f.clone());
        }
        println!("{o}");
    } else {
        println!("[pid {pid}] {what} {fields}");
    }
}

fn describe(ev: &Event) -> (&'static str, serde_json::Value) {
    use serde_json::json;
    match ev {
        Event::BecameCoord { members } => ("became_coordinator", json!({ "members": members })),
        Event::GroupChanged { members } => ("group_changed", json!({ "members": members })),
        Event::Joined { coord, members } => ("joined", json!({ "coordinator": coord, "members": members })),
        Event::Left { reason } => ("left", json!({ "reason": format!("{reason:?}") })),
        Event::Removed { pid, incarnation, reason } => {
            ("removed", json!({ "member": pid, "incarnation": incarnation, "reason": format!("{reason:?}") }))
        }
        other => ("event", json!({ "event": format!("{other:?}") })),
    }
}

fn run_member(r: &RunArgs) -> Result<ExitCode, GroupCmdError> {
    let mut cfg = GroupConfig::new(r.secret.as_bytes().to_vec(), r.team, r.pid, r.addr, r.broadcast);
    cfg.group = timing(r)?;
    let start = if r.group.is_empty() {
        Start::Outside { incarnation: incarnation_from_clock() }
    } else {
        Start::Static(r.group.clone())
    };
    let joining = r.group.is_empty();
    let s = Arc::new(GroupSocket::open(cfg, start)?);
    let (json, pid) = (r.json, r.pid);
    say(json, pid, "started", serde_json::json!({ "addr": s.local_addr().to_string(), "members": s.members() }));
    let stop = Arc::new(AtomicBool::new(false));
    let server = spawn_server(s.clone(), stop.clone(), r.payload, json);
    if joining {
        let members = s.join(r.duration_s.map(Duration::from_secs_f64))?;
        say(json, pid, "member", serde_json::json!({ "members": members }));
    }
    let began = Instant::now();
    let end = r.duration_s.map(|d| began + Duration::from_secs_f64(d));
    let leave_at = r.leave_after_s.map(|d| began + Duration::from_secs_f64(d));
    let every = |ms: u64| (ms > 0).then(|| Duration::from_millis(ms));
    let (req_every, poll_every) = (every(r.request_every_ms), every(r.poll_every_ms));
    let (mut next_req, mut next_poll) = (began, began);
    let data = vec![0x42; r.payload];
    let poll_t = Duration::from_millis(r.poll_t_ms);
    let mut k = 0u64;
    loop {
        let now = Instant::now();
        if end.is_some_and(|e| now >= e) {
            break;
        }
        if leave_at.is_some_and(|l| now >= l) {
            s.leave(Some(Duration::from_secs(30)))?;
            say(json, pid, "left", serde_json::json!({ "reason": "requested" }));
            break;
        }
        while let Ok(ev) = s.next_event(Some(Duration::ZERO)) {
            let (what, f) = describe(&ev);
            say(json, pid, what, f);
            if let Event::Left { reason } = ev {
                // Expelled (a suspicion, true or false) or left: this member's life is over.
                stop.store(true, Ordering::Relaxed);
                let _ = server.join();
                let expelled = matches!(reason, cohort_proto::group::LeftReason::Expelled { .. });
                return Ok(if expelled { ExitCode::from(3) } else { ExitCode::SUCCESS });
            }
        }
        if s.is_coordinator() {
            if let Some(p) = poll_every.filter(|_| now >= next_poll) {
                next_poll = now + p;
                let added = s.check_joins(poll_t, Some(Duration::from_secs(30)))?;
                let left = s.check_leaves(poll_t, Some(Duration::from_secs(30)))?;
                if !added.is_empty() || !left.is_empty() {
                    say(json, pid, "polled", serde_json::json!({ "joined": added, "left": left }));
                }
            }
            let members: Vec<u32> = s.members().into_iter().filter(|&m| m != pid).collect();
            if let Some(p) = req_every.filter(|_| now >= next_req && !members.is_empty()) {
                next_req = now + p;
                k += 1;
                let rep = s.request_reply(&members, &data, Duration::from_millis(50), Some(Duration::from_secs(30)))?;
                say(
                    json,
                    pid,
                    "replies",
                    serde_json::json!({
                        "request": k,
                        "replied": rep.replies.keys().collect::<Vec<_>>(),
                        "failed": rep.failed,
                        "latency_ms": rep.done_at.saturating_duration_since(rep.issued_at).as_secs_f64() * 1e3,
                        "broadcasts": rep.broadcasts,
                    }),
                );
            }
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    stop.store(true, Ordering::Relaxed);
    let _ = server.join();
    let st = s.stats();
    say(
        json,
        pid,
        "stopped",
        serde_json::json!({
            "datagrams_sent": st.datagrams_sent,
            "datagrams_received": st.datagrams_received,
            "rejected_frames": st.rejected_frames,
            "requests_handled": st.member.requests_handled,
        }),
    );
    Ok(ExitCode::SUCCESS)
}

/// Answers every request with `payload` bytes until `stop`.
fn spawn_server(s: Arc<GroupSocket>, stop: Arc<AtomicBool>, payload: usize, json: bool) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let reply = vec![0x24; payload];
        while !stop.load(Ordering::Relaxed) {
            match s.next_request(Some(Duration::from_millis(50))) {
                Ok(req) => {
                    if s.reply(req.id, &reply).is_ok() && json {
                        say(
                            json,
                            s.pid(),
                            "request",
                            serde_json::json!({ "from": req.id.coord, "seqno": req.id.seqno }),
                        );
                    }
                }
                Err(GroupError::TimedOut) => {}
                Err(_) => return,
            }
        }
    })
}

/// What the loopback team of `cohort demo` did.
#[derive(Debug, Default, serde::Serialize)]
pub struct LoopbackTeam {
    pub members: usize,
    pub requests: u64,
    pub replies: u64,
    pub failed_replies: u64,
    pub latency_p50_ms: f64,
    pub joined: Vec<u32>,
    pub left: Vec<u32>,
    pub crashed_coordinator: u32,
    pub new_coordinator: Option<u32>,
    pub takeover_ms: f64,
    pub requests_after_takeover: u64,
    pub intruder_rejected_frames: u64,
    pub outsider_admitted: bool,
    pub log: Vec<String>,
}

/// Four robots on loopback (127.0.0.11-14, real UDP sockets): requests, a fifth robot joins,
/// one leaves, the coordinator crashes and the next takes over, an outsider with the wrong key
/// is never heard.
pub fn loopback_team(requests: u64) -> Result<LoopbackTeam, GroupCmdError> {
    let port = std::net::UdpSocket::bind("127.0.0.1:0").and_then(|s| s.local_addr()).map_err(GroupError::from)?.port();
    let bcast = SocketAddr::new(IpAddr::V4(Ipv4Addr::new(127, 255, 255, 255)), port);
    let secret = b"cohort demo team secret, 32 byte";
    let timing = Timing {
        msg_t: Duration::from_millis(10),
        // Long enough that a loaded machine (tests run in parallel) suspects nobody falsely.
        fault_detect_t: Duration::from_millis(1000),
        heartbeat_t: Duration::from_millis(200),
        ..Timing::default()
    };
    let open = |pid: u32, secret: &[u8], start: Start| -> Result<Arc<GroupSocket>, GroupCmdError> {
        let addr = SocketAddr::new(IpAddr::V4(Ipv4Addr::new(127, 0, 0, 10 + pid as u8)), port);
        let mut cfg = GroupConfig::new(secret.to_vec(), 1, pid, addr, bcast);
        cfg.group = timing;
        Ok(Arc::new(GroupSocket::open(cfg, start)?))
    };
    let pids = [1, 2, 3, 4];
    let mut team: Vec<Arc<GroupSocket>> =
        pids.iter().map(|&p| open(p, secret, Start::Static(pids.to_vec()))).collect::<Result<_, _>>()?;
    let stop = Arc::new(AtomicBool::new(false));
    let mut servers: Vec<_> = team[1..].iter().map(|s| spawn_server(s.clone(), stop.clone(), 32, false)).collect();
    let mut out = LoopbackTeam { members: pids.len(), crashed_coordinator: 1, ..LoopbackTeam::default() };
    let wait = Some(Duration::from_secs(10));
    let mut lat = Vec::new();
    let mut ask = |coord: &GroupSocket, out: &mut LoopbackTeam| -> Result<(), GroupCmdError> {
        let members: Vec<u32> = coord.members().into_iter().filter(|&m| m != coord.pid()).collect();
        let r = coord.request_reply(&members, b"formation: wedge", Duration::from_millis(20), wait)?;
        out.requests += 1;
        out.replies += r.replies.len() as u64;
        out.failed_replies += r.failed.len() as u64;
        lat.push(r.done_at.saturating_duration_since(r.issued_at).as_secs_f64() * 1e3);
        Ok(())
    };
    for _ in 0..requests {
        ask(&team[0], &mut out)?;
    }
    out.log.push(format!("{} requests to 3 members: every reply once", out.requests));
    // A fifth robot joins; an outsider with another key tries too.
    let fifth = open(5, secret, Start::Outside { incarnation: 1 })?;
    let intruder = open(9, b"not the team's secret, 32 bytes!", Start::Outside { incarnation: 1 })?;
    let (f, i) = (fifth.clone(), intruder.clone());
    let joining = std::thread::spawn(move || f.join(wait));
    let intruding = std::thread::spawn(move || i.join(Some(Duration::from_millis(800))));
    std::thread::sleep(Duration::from_millis(50));
    for _ in 0..5 {
        out.joined = team[0].check_joins(Duration::from_millis(100), wait)?;
        if !out.joined.is_empty() {
            break;
        }
    }
    joining.join().map_err(|_| GroupCmdError::Invalid("join thread panicked".into()))??;
    out.outsider_admitted = intruding.join().map_err(|_| GroupCmdError::Invalid("thread panicked".into()))?.is_ok();
    out.intruder_rejected_frames = team[0].stats().frames.auth_failed;
    out.log.push(format!("joined: {:?}; outsider admitted: {}", out.joined, out.outsider_admitted));
    servers.push(spawn_server(fifth.clone(), stop.clone(), 32, false));
    team.push(fifth);
    ask(&team[0], &mut out)?;
    // Robot 4 leaves.
    let leaver = team[3].clone();
    let leaving = std::thread::spawn(move || leaver.leave(wait));
    for _ in 0..5 {
        out.left = team[0].check_leaves(Duration::from_millis(100), wait)?;
        if !out.left.is_empty() {
            break;
        }
    }
    leaving.join().map_err(|_| GroupCmdError::Invalid("leave thread panicked".into()))??;
    out.log.push(format!("left: {:?}; members now {:?}", out.left, team[0].members()));
    // The coordinator crashes.
    let crashed = team.remove(0);
    let next = team[0].clone();
    while next.next_event(Some(Duration::ZERO)).is_ok() {}
    let t0 = Instant::now();
    Arc::try_unwrap(crashed).map_err(|_| GroupCmdError::Invalid("coordinator still shared".into()))?.close();
    loop {
        match next.next_event(Some(Duration::from_secs(5)))? {
            Event::BecameCoord { .. } => break,
            _ => continue,
        }
    }
    out.takeover_ms = t0.elapsed().as_secs_f64() * 1e3;
    out.new_coordinator = Some(next.pid());
    // Let the others' detectors catch up, then command the rest of the team.
    std::thread::sleep(timing.msg_t * 5);
    for _ in 0..3 {
        ask(&next, &mut out)?;
        out.requests_after_takeover += 1;
    }
    out.log.push(format!(
        "coordinator 1 crashed; {} took over after {:.0} ms (FaultDetectT {} ms); members {:?}",
        next.pid(),
        out.takeover_ms,
        timing.fault_detect_t.as_millis(),
        next.members()
    ));
    stop.store(true, Ordering::Relaxed);
    for s in servers {
        let _ = s.join();
    }
    lat.sort_by(f64::total_cmp);
    out.latency_p50_ms = lat.get(lat.len() / 2).copied().unwrap_or(f64::NAN);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_loopback_team_commands_joins_leaves_and_survives_its_coordinator() {
        let t = loopback_team(3).unwrap();
        assert_eq!((t.requests, t.failed_replies), (3 + 1 + 3, 0));
        assert_eq!(t.replies, 3 * 3 + 4 + 3 * 2, "every addressed member answered every request once");
        assert_eq!((t.joined.as_slice(), t.left.as_slice()), (&[5][..], &[4][..]));
        assert!(!t.outsider_admitted);
        assert_eq!(t.new_coordinator, Some(2));
        assert_eq!(t.requests_after_takeover, 3);
    }
}
