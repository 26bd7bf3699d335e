//! `cohort coorp`: coordinated preemption for every application of a robot.
//!
//! `cohort coorp agent` runs on each robot (root): it watches the robot's interface, marks the
//! control flows nobody marked EF, holds bulk flows in a kernel gate during protection windows
//! and while another robot holds the team's bulk token, and talks to the other agents over
//! secure frames. `cohort coorp status` shows what an agent sees and decided.

use clap::{Args, Subcommand, ValueEnum};
use cohort_net::preempt::CardSource;
use cohort_net::preempt::agent::{self, AgentOptions, AgentSnapshot};
use cohort_proto::preempt::agent::{AgentConfig, Mode, Override, PROTO_TCP};
use serde_json::{Value, json};
use std::net::SocketAddrV4;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

#[derive(Debug, Args)]
pub struct CoorpArgs {
    #[command(subcommand)]
    which: Which,
}

#[derive(Debug, Subcommand)]
enum Which {
    /// Run this robot's agent (root) until SIGINT/SIGTERM or `--duration-s`; prints its final
    /// counters as JSON.
    Agent(Box<AgentArgs>),
    /// Show an agent's flows, verdicts, gate and token.
    Status(StatusArgs),
    /// Force a verdict for every flow with PORT at either end while the agent runs (`ls`,
    /// `bulk`), or give it back to the classifier (`auto`); taken within 200 ms.
    Override(OverrideArgs),
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum VerdictArg {
    Ls,
    Bulk,
    Auto,
}

#[derive(Debug, Args)]
struct OverrideArgs {
    /// The agent's status file (as given to `--status`; default: the agent of robot `--id`).
    #[arg(long)]
    status: Option<PathBuf>,
    #[arg(long, default_value_t = 0)]
    id: u32,
    port: u16,
    #[arg(value_enum)]
    verdict: VerdictArg,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum ModeArg {
    /// Both halves: protection windows and the bulk token.
    Coorp,
    /// The bulk token only.
    Global,
    /// Protection windows only.
    Local,
    /// Only classify and EF-mark foreign control.
    Mark,
}

#[derive(Debug, Args)]
struct AgentArgs {
    /// The robot's interface toward the team.
    #[arg(long)]
    dev: String,
    /// This robot's id in the team.
    #[arg(long)]
    id: u32,
    /// The agent's own address (UDP).
    #[arg(long)]
    bind: SocketAddrV4,
    /// Another robot's agent, `ID=IP:PORT` (repeat).
    #[arg(long = "peer", value_parser = parse_peer)]
    peers: Vec<(u32, SocketAddrV4)>,
    /// The robot whose agent runs the arbiter (fixed; see --group-broadcast).
    #[arg(long, default_value_t = 0)]
    arbiter: u32,
    /// The team's broadcast address and group port (`IP:PORT`): the agents form a GCBRR group
    /// and the arbiter runs on its coordinator, moving when that robot fails.
    #[arg(long)]
    group_broadcast: Option<SocketAddrV4>,
    /// The channel's goodput for one sender, Mbit/s: the gate shapes egress to it.
    #[arg(long)]
    link_mbps: f64,
    #[arg(long, value_enum, default_value = "coorp")]
    mode: ModeArg,
    #[arg(long, default_value_t = 1)]
    team: u32,
    #[arg(long, env = "COHORT_TEAM_SECRET", hide_env_values = true)]
    secret: String,
    /// Where the status is kept (replaced every 200 ms).
    #[arg(long)]
    status: Option<PathBuf>,
    /// Stop after this many seconds.
    #[arg(long)]
    duration_s: Option<f64>,
    /// Flows with this port at either end are control (repeat).
    #[arg(long = "ls-port")]
    ls_ports: Vec<u16>,
    /// Flows with this port at either end are bulk (repeat).
    #[arg(long = "bulk-port")]
    bulk_ports: Vec<u16>,
    /// Bulk is held this long before each protection window, ms (without --card, or until
    /// the card's drain rate is known).
    #[arg(long, default_value_t = 2.0)]
    lead_ms: f64,
    /// Where the robot's card load is read: `PATH:STATION`, a card file (a testbed run's
    /// emulator keeps one per run, `/run/cohort/testbed/RUN/card`, station = node index), or
    /// `mac80211:DIR`, on a real host the debugfs directory of the station the robot sends to
    /// (`/sys/kernel/debug/ieee80211/phy0/netdev:wlan0/stations/MAC`; its AQL airtime counted
    /// at --link-mbps). The bulk is then held as long before each window as the card needs to
    /// drain.
    #[arg(long, value_parser = parse_card)]
    card: Option<CardArg>,
    /// With --card: bytes the card may still hold when a window starts if it drains at the
    /// full --link-mbps (scaled by the share of that rate it drains at).
    #[arg(long, default_value_t = 65_535)]
    card_allowance_bytes: u64,
    /// Robots that may send bulk at once (`LIMIT`; the team must agree).
    #[arg(long, default_value_t = 1)]
    limit: usize,
    /// The bulk token's `TIMESLICE`, seconds (the team must agree).
    #[arg(long, default_value_t = 5.0)]
    timeslice_s: f64,
    /// Milliseconds of silence after which a robot's bulk counts as done and the token goes
    /// back; an upload over TCP sockets of this robot gives it back sooner, once they have
    /// nothing left to send.
    #[arg(long, default_value_t = 200.0)]
    bulk_idle_ms: f64,
}

#[derive(Debug, Args)]
struct StatusArgs {
    /// The agent's status file (as given to `--status`; default: the agent of robot `--id`).
    #[arg(long)]
    status: Option<PathBuf>,
    #[arg(long, default_value_t = 0)]
    id: u32,
    #[arg(long)]
    json: bool,
}

/// Why a `cohort coorp` command failed.
#[derive(Debug, thiserror::Error)]
pub enum CoorpError {
    #[error("{0}")]
    Args(String),
    #[error(transparent)]
    Agent(#[from] agent::AgentError),
    #[error("status {path}: {err}")]
    Status { path: PathBuf, err: String },
}

fn parse_peer(s: &str) -> Result<(u32, SocketAddrV4), String> {
    let (id, addr) = s.split_once('=').ok_or("expected ID=IP:PORT")?;
    Ok((id.parse().map_err(|e| format!("peer id: {e}"))?, addr.parse().map_err(|e| format!("peer address: {e}"))?))
}

/// `--card` as given; the link rate completes a mac80211 source.
#[derive(Debug, Clone, PartialEq)]
enum CardArg {
    Shared(PathBuf, usize),
    Mac80211(PathBuf),
}

impl CardArg {
    fn source(&self, link_rate_bps: u64) -> CardSource {
        match self {
            CardArg::Shared(path, station) => CardSource::Shared { path: path.clone(), station: *station },
            CardArg::Mac80211(dir) => CardSource::Mac80211 { station_dir: dir.clone(), rate_bps: link_rate_bps },
        }
    }
}

fn parse_card(s: &str) -> Result<CardArg, String> {
    if let Some(dir) = s.strip_prefix("mac80211:") {
        if dir.is_empty() {
            return Err("expected mac80211:DIR (the directory is empty)".into());
        }
        return Ok(CardArg::Mac80211(PathBuf::from(dir)));
    }
    let (path, station) = s.rsplit_once(':').ok_or("expected PATH:STATION or mac80211:DIR")?;
    if path.is_empty() {
        return Err("expected PATH:STATION (the path is empty)".into());
    }
    Ok(CardArg::Shared(PathBuf::from(path), station.parse().map_err(|e| format!("station: {e}"))?))
}

fn default_status(id: u32) -> PathBuf {
    PathBuf::from(format!("/run/cohort/coorp-agent-{id}.json"))
}

/// The overrides file of the agent whose status is at `status`.
fn overrides_path(status: &Path) -> PathBuf {
    status.with_extension("overrides")
}

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    STOP.store(true, Ordering::Relaxed);
}

/// SIGINT and SIGTERM set [`STOP`] (no `SA_RESTART`: the agent's wait ends at once).
fn catch_stop_signals() {
    // SAFETY: installing an async-signal-safe handler (one atomic store) before threads start.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_signal as *const () as usize;
        libc::sigemptyset(&mut sa.sa_mask);
        libc::sigaction(libc::SIGINT, &sa, std::ptr::null_mut());
        libc::sigaction(libc::SIGTERM, &sa, std::ptr::null_mut());
    }
}

fn ms(d: Option<Duration>) -> Value {
    d.map_or(Value::Null, |d| json!((d.as_secs_f64() * 1e6).round() / 1e3))
}

/// The JSON of a snapshot (the status file, and the agent's last words).
pub fn snapshot_json(s: &AgentSnapshot) -> Value {
    let flows: Vec<Value> = s
        .flows
        .iter()
        .map(|f| {
            json!({
                "proto": if f.proto == PROTO_TCP { "tcp" } else { "udp" },
                "src": f.src.to_string(), "dst": f.dst.to_string(),
                "verdict": f.verdict, "marking": f.marking,
                "packets": f.packets, "bytes": f.bytes, "messages": f.messages,
                "period_ms": ms(f.period), "sigma_ms": ms(f.sigma), "max_message_bytes": f.max_message_bytes,
            })
        })
        .collect();
    let st = &s.stats;
    json!({
        "id": s.id, "mode": s.mode, "uptime_s": s.uptime.as_secs_f64(), "held": s.held, "token": s.token,
        "hosts_arbiter": s.hosts_arbiter, "backlog_packets": s.backlog_packets,
        "flows": flows,
        "stats": {
            "arbiter_starts": st.arbiter_starts,
            "packets": st.packets, "flows_seen": st.flows_seen, "flows_marked": st.flows_marked,
            "flows_unmarked": st.flows_unmarked, "ls_messages": st.ls_messages, "holds": st.holds,
            "releases": st.releases, "window_holds": st.window_holds, "token_holds": st.token_holds,
            "token_requests": st.token_requests, "untracked_packets": st.untracked_packets,
            "bulk_sessions": st.bulk_sessions, "bulk_refused": st.bulk_refused,
            "bulk_forgotten": st.bulk_forgotten, "early_releases": st.early_releases,
            "drained_releases": st.drained_releases,
            "card_readings": st.card_readings, "card_early_holds": st.card_early_holds,
        },
        "gate": s.gate.map(|g| json!({
            "holds": g.holds, "releases": g.releases,
            "last_change_us": g.last_change.as_micros() as u64, "max_change_us": g.max_change.as_micros() as u64,
        })),
        "observer": { "outgoing": s.observer.outgoing, "other": s.observer.other },
        "marker_changes": s.marker_changes, "sent": s.sent, "received": s.received,
        "rejected": s.rejected, "kernel_errors": s.kernel_errors, "override_errors": s.override_errors,
        "bulk_malformed": s.bulk_malformed,
        "card": { "pending_bytes": s.card_pending_bytes, "drain_mbps": s.card_drain_bps.map(|b| b * 8e-6) },
    })
}

fn write_status(path: &Path, v: &Value) -> std::io::Result<()> {
    if let Some(dir) = path.parent()
        && !dir.as_os_str().is_empty()
    {
        std::fs::create_dir_all(dir)?;
    }
    let tmp = path.with_extension("json.tmp");
    std::fs::write(&tmp, serde_json::to_vec_pretty(v).unwrap_or_default())?;
    std::fs::rename(&tmp, path)
}

fn agent_cmd(a: &AgentArgs) -> Result<ExitCode, CoorpError> {
    if !(a.link_mbps.is_finite() && a.link_mbps > 0.0) {
        return Err(CoorpError::Args(format!("--link-mbps {} must be positive", a.link_mbps)));
    }
    if !(a.lead_ms.is_finite() && (0.0..=1000.0).contains(&a.lead_ms)) {
        return Err(CoorpError::Args(format!("--lead-ms {} must lie in [0, 1000]", a.lead_ms)));
    }
    if !(a.timeslice_s.is_finite() && a.timeslice_s > 0.0 && a.timeslice_s < 4000.0) {
        return Err(CoorpError::Args(format!("--timeslice-s {} must lie in (0, 4000)", a.timeslice_s)));
    }
    if !(a.bulk_idle_ms.is_finite() && (1.0..=60_000.0).contains(&a.bulk_idle_ms)) {
        return Err(CoorpError::Args(format!("--bulk-idle-ms {} must lie in [1, 60000]", a.bulk_idle_ms)));
    }
    if let Some(d) = a.duration_s
        && !(d.is_finite() && d > 0.0)
    {
        return Err(CoorpError::Args(format!("--duration-s {d} must be positive")));
    }
    let mode = match a.mode {
        ModeArg::Coorp => Mode::Coorp,
        ModeArg::Global => Mode::Global,
        ModeArg::Local => Mode::Local,
        ModeArg::Mark => Mode::Mark,
    };
    if a.card.is_some() && !mode.local() {
        return Err(CoorpError::Args(format!(
            "--card sets how long before each protection window the bulk is held; --mode {} holds none (use coorp or local)",
            mode.name()
        )));
    }
    let defaults = AgentConfig::default();
    let overrides = a
        .ls_ports
        .iter()
        .map(|&p| (p, Override::Ls))
        .chain(a.bulk_ports.iter().map(|&p| (p, Override::Bulk)))
        .collect();
    let config = AgentConfig {
        mode,
        token: cohort_proto::preempt::Config {
            limit: a.limit,
            timeslice: Duration::from_secs_f64(a.timeslice_s),
            ..defaults.token
        },
        lead: Duration::from_secs_f64(a.lead_ms / 1e3),
        card_allowance_bytes: a.card_allowance_bytes,
        link_rate_bps: Some((a.link_mbps * 1e6) as u64),
        bulk_idle: Duration::from_secs_f64(a.bulk_idle_ms / 1e3),
        overrides,
        own_port: a.bind.port(),
        ..defaults
    };
    let opts = AgentOptions {
        dev: a.dev.clone(),
        id: a.id,
        bind: a.bind,
        peers: a.peers.clone(),
        arbiter: a.arbiter,
        group: a.group_broadcast,
        link_rate_bps: (a.link_mbps * 1e6) as u64,
        team_id: a.team,
        team_secret: a.secret.as_bytes().to_vec(),
        config,
        duration: a.duration_s.map(Duration::from_secs_f64),
        backlog_every: Duration::from_millis(5),
        status_every: Duration::from_millis(200),
        overrides_file: None,
        card: a.card.as_ref().map(|c| c.source((a.link_mbps * 1e6) as u64)),
    };
    let path = a.status.clone().unwrap_or_else(|| default_status(a.id));
    let opts = AgentOptions { overrides_file: Some(overrides_path(&path)), ..opts };
    catch_stop_signals();
    let mut status_errors = 0u64;
    let last = agent::run(&opts, &STOP, |s| {
        if let Err(e) = write_status(&path, &snapshot_json(s)) {
            status_errors += 1;
            if status_errors == 1 {
                eprintln!("cohort coorp agent: status {}: {e}", path.display());
            }
        }
    })?;
    let v = snapshot_json(&last);
    let _ = write_status(&path, &v);
    println!("{v}");
    Ok(ExitCode::SUCCESS)
}

fn status_cmd(a: &StatusArgs) -> Result<ExitCode, CoorpError> {
    let path = a.status.clone().unwrap_or_else(|| default_status(a.id));
    let err = |e: String| CoorpError::Status { path: path.clone(), err: e };
    let text = std::fs::read_to_string(&path).map_err(|e| err(format!("{e} (is the agent running?)")))?;
    let v: Value = serde_json::from_str(&text).map_err(|e| err(e.to_string()))?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&v).unwrap_or_default());
        return Ok(ExitCode::SUCCESS);
    }
    let s = |k: &str| v.get(k).map(|x| x.to_string()).unwrap_or_default();
    println!(
        "robot {}  mode {}  up {:.1} s  bulk {}  token {}{}  backlog {} packets",
        s("id"),
        s("mode").trim_matches('"'),
        v["uptime_s"].as_f64().unwrap_or(0.0),
        if v["held"].as_bool().unwrap_or(false) { "held" } else { "open" },
        s("token").trim_matches('"'),
        if v["hosts_arbiter"].as_bool().unwrap_or(false) { " (arbiter here)" } else { "" },
        s("backlog_packets"),
    );
    println!(
        "{:<5} {:<22} {:<22} {:<17} {:<9} {:>9} {:>8} {:>9}",
        "proto", "src", "dst", "verdict", "marking", "period_ms", "sigma_ms", "messages"
    );
    for f in v["flows"].as_array().into_iter().flatten() {
        let t = |k: &str| f[k].as_str().unwrap_or("").to_string();
        let n = |k: &str| f[k].as_f64().map_or("-".to_string(), |x| format!("{x:.2}"));
        println!(
            "{:<5} {:<22} {:<22} {:<17} {:<9} {:>9} {:>8} {:>9}",
            t("proto"),
            t("src"),
            t("dst"),
            t("verdict"),
            t("marking"),
            n("period_ms"),
            n("sigma_ms"),
            f["messages"].as_u64().unwrap_or(0)
        );
    }
    println!("override a verdict: cohort coorp override PORT ls|bulk|auto (or --ls-port/--bulk-port at start)");
    Ok(ExitCode::SUCCESS)
}

fn override_cmd(a: &OverrideArgs) -> Result<ExitCode, CoorpError> {
    let status = a.status.clone().unwrap_or_else(|| default_status(a.id));
    let path = overrides_path(&status);
    let err = |e: String| CoorpError::Status { path: path.clone(), err: e };
    let old = std::fs::read_to_string(&path).unwrap_or_default();
    let (mut entries, bad) = agent::parse_overrides(&old);
    if !bad.is_empty() {
        return Err(err(format!("lines that are not `PORT ls|bulk`: {bad:?}")));
    }
    entries.retain(|e| e.0 != a.port);
    match a.verdict {
        VerdictArg::Ls => entries.push((a.port, Override::Ls)),
        VerdictArg::Bulk => entries.push((a.port, Override::Bulk)),
        VerdictArg::Auto => {}
    }
    let text: String =
        entries.iter().map(|(p, o)| format!("{p} {}\n", if *o == Override::Ls { "ls" } else { "bulk" })).collect();
    let tmp = path.with_extension("overrides.tmp");
    std::fs::write(&tmp, text).and_then(|()| std::fs::rename(&tmp, &path)).map_err(|e| err(e.to_string()))?;
    println!("{}: {} override(s); the agent takes them within 200 ms", path.display(), entries.len());
    Ok(ExitCode::SUCCESS)
}

pub fn run(a: &CoorpArgs) -> Result<ExitCode, CoorpError> {
    match &a.which {
        Which::Agent(x) => agent_cmd(x),
        Which::Status(x) => status_cmd(x),
        Which::Override(x) => override_cmd(x),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn card_sources_parse() {
        assert_eq!(
            parse_card("/run/cohort/testbed/w/card:2"),
            Ok(CardArg::Shared("/run/cohort/testbed/w/card".into(), 2))
        );
        let dir = "/sys/kernel/debug/ieee80211/phy0/netdev:wlan0/stations/02:00:00:00:00:01";
        assert_eq!(parse_card(&format!("mac80211:{dir}")), Ok(CardArg::Mac80211(dir.into())));
        assert_eq!(
            CardArg::Mac80211(dir.into()).source(40_000_000),
            CardSource::Mac80211 { station_dir: dir.into(), rate_bps: 40_000_000 }
        );
        for bad in ["mac80211:", "card", ":1", "card:x"] {
            assert!(parse_card(bad).is_err(), "{bad}");
        }
    }
}
