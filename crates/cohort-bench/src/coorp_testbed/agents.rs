//! The per-robot Cohort agent (`cohort coorp agent`), one process in every testbed node.
//!
//! Contract (the agent's CLI): `PROGRAM coorp agent --dev IFACE --id N --bind IP:PORT
//! --peer ID=IP:PORT ... --arbiter ID --link-mbps R --mode coorp|global|local|mark --team T
//! --secret S --status FILE.json --duration-s S [--card PATH:STATION]`. The agent writes `FILE.json` within about a
//! second of starting and every 200 ms after; on SIGTERM (or after the duration) it removes
//! what it installed, prints one JSON object of its counters on stdout and exits 0. The bench
//! starts the workload only once every agent's status file exists, stops the agents after the
//! run and keeps their counters; an agent that exits early, fails, or prints no JSON fails the
//! run.

use crate::proc::{exited_by, signal_child};
use cohort_emu::Testbed;
use serde_json::Value;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The agents' port on every node's testbed address.
pub const AGENT_PORT: u16 = 7470;
/// How long an agent has to write its first status file.
const STATUS_WAIT: Duration = Duration::from_secs(5);
/// How long an agent has to exit after SIGTERM.
const EXIT_WAIT: Duration = Duration::from_secs(5);

/// What the agent does (`--mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AgentMode {
    /// Bulk token and protection windows (and marking of foreign control).
    Coorp,
    /// The bulk token only.
    Global,
    /// Protection windows only.
    Local,
    /// Only classify and EF-mark foreign control.
    Mark,
}

impl AgentMode {
    pub fn as_str(self) -> &'static str {
        match self {
            AgentMode::Coorp => "coorp",
            AgentMode::Global => "global",
            AgentMode::Local => "local",
            AgentMode::Mark => "mark",
        }
    }
}

/// Why the agents could not run.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    #[error(
        "{program} has no `coorp agent` subcommand (`{program} coorp agent --help` failed: {detail}); \
         the Cohort systems of `bench coorp --testbed` need a `cohort` binary built with it"
    )]
    NoSubcommand { program: String, detail: String },
    #[error("starting the agent on {node}: {source}")]
    Spawn { node: String, source: std::io::Error },
    #[error("the agent on {node} wrote no status file within {secs} s{detail}")]
    NoStatus { node: String, secs: u64, detail: String },
    #[error("the agent on {node} exited during the run ({status}); stderr:\n{stderr}")]
    Died { node: String, status: String, stderr: String },
    #[error("the agent on {node} did not stop within {secs} s of SIGTERM")]
    NoExit { node: String, secs: u64 },
    #[error("the agent on {node} failed ({status}); stderr:\n{stderr}")]
    Failed { node: String, status: String, stderr: String },
    #[error("the agent on {node} printed no JSON counters (stdout: {stdout:?})")]
    NoCounters { node: String, stdout: String },
    #[error(transparent)]
    Testbed(#[from] cohort_emu::TestbedError),
}

/// Checks that `program` has the `coorp agent` subcommand.
pub fn check(program: &Path) -> Result<(), AgentError> {
    let err = |detail: String| AgentError::NoSubcommand { program: program.display().to_string(), detail };
    let out = Command::new(program)
        .args(["coorp", "agent", "--help"])
        .stdin(Stdio::null())
        .output()
        .map_err(|e| err(e.to_string()))?;
    if out.status.success() {
        Ok(())
    } else {
        let text = String::from_utf8_lossy(&out.stderr);
        Err(err(text.lines().next().unwrap_or("no output").to_string()))
    }
}

/// The settings every agent of a run shares.
#[derive(Debug, Clone)]
pub struct AgentSpec {
    pub program: PathBuf,
    pub mode: AgentMode,
    pub link_mbps: f64,
    pub team: u32,
    pub secret: String,
    pub duration_s: f64,
    /// Where the status and output files go.
    pub dir: PathBuf,
    /// The emulator's card file: each agent reads its robot's station (`--card`).
    pub card: Option<PathBuf>,
}

#[derive(Debug)]
struct Running {
    node: String,
    child: Child,
    stdout: PathBuf,
    stderr: PathBuf,
}

/// The running agents of one run; dropping them stops any still running.
#[derive(Debug)]
pub struct Agents {
    running: Vec<Running>,
}

fn tail(path: &Path) -> String {
    let t = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = t.lines().collect();
    lines[lines.len().saturating_sub(20)..].join("\n")
}

impl Agents {
    /// Starts an agent in each of `nodes` (ids 0.., the first the arbiter) and waits for every
    /// status file.
    pub fn start(tb: &Testbed, nodes: &[String], spec: &AgentSpec) -> Result<Agents, AgentError> {
        let addrs: Vec<Ipv4Addr> = nodes.iter().map(|n| tb.addr(n, 0)).collect::<Result<_, _>>()?;
        let mut agents = Agents { running: Vec::new() };
        for (id, node) in nodes.iter().enumerate() {
            let status = spec.dir.join(format!("agent-{node}.json"));
            let stdout = spec.dir.join(format!("agent-{node}.out"));
            let stderr = spec.dir.join(format!("agent-{node}.err"));
            let spawn_err = |source| AgentError::Spawn { node: node.clone(), source };
            let mut c = tb.command(node, &spec.program)?;
            c.args(["coorp", "agent", "--dev", "wlan0", "--id", &id.to_string()])
                .args(["--bind", &format!("{}:{AGENT_PORT}", addrs[id])]);
            for (j, a) in addrs.iter().enumerate().filter(|&(j, _)| j != id) {
                c.args(["--peer", &format!("{j}={a}:{AGENT_PORT}")]);
            }
            c.args(["--arbiter", "0", "--link-mbps", &format!("{:.3}", spec.link_mbps)])
                .args(["--mode", spec.mode.as_str(), "--team", &spec.team.to_string(), "--secret", &spec.secret])
                .arg("--status")
                .arg(&status)
                .args(["--duration-s", &format!("{:.0}", spec.duration_s.ceil())]);
            if let Some(card) = &spec.card {
                let station = tb.scenario().nodes.iter().position(|n| n == node).ok_or_else(|| AgentError::Spawn {
                    node: node.clone(),
                    source: std::io::Error::other("not a node of the testbed"),
                })?;
                c.arg("--card").arg(format!("{}:{station}", card.display()));
            }
            c.stdin(Stdio::null())
                .stdout(std::fs::File::create(&stdout).map_err(spawn_err)?)
                .stderr(std::fs::File::create(&stderr).map_err(spawn_err)?);
            let child = c.spawn().map_err(spawn_err)?;
            agents.running.push(Running { node: node.clone(), child, stdout, stderr });
        }
        let deadline = Instant::now() + STATUS_WAIT;
        for (r, node) in agents.running.iter_mut().zip(nodes) {
            let status = spec.dir.join(format!("agent-{node}.json"));
            loop {
                if status.exists() {
                    break;
                }
                if let Ok(Some(s)) = r.child.try_wait() {
                    return Err(AgentError::NoStatus {
                        node: node.clone(),
                        secs: STATUS_WAIT.as_secs(),
                        detail: format!("; it exited ({s}), stderr:\n{}", tail(&r.stderr)),
                    });
                }
                if Instant::now() >= deadline {
                    return Err(AgentError::NoStatus {
                        node: node.clone(),
                        secs: STATUS_WAIT.as_secs(),
                        detail: String::new(),
                    });
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        Ok(agents)
    }

    /// Fails if an agent has exited (they run until told to stop).
    pub fn check_alive(&mut self) -> Result<(), AgentError> {
        for r in &mut self.running {
            if let Ok(Some(s)) = r.child.try_wait() {
                return Err(AgentError::Died { node: r.node.clone(), status: s.to_string(), stderr: tail(&r.stderr) });
            }
        }
        Ok(())
    }

    /// Stops every agent (SIGTERM) and returns each one's counters, with its node.
    pub fn stop(mut self) -> Result<Vec<Value>, AgentError> {
        self.check_alive()?;
        for r in &mut self.running {
            signal_child(&mut r.child, libc::SIGTERM);
        }
        let deadline = Instant::now() + EXIT_WAIT;
        let mut out = Vec::new();
        for mut r in std::mem::take(&mut self.running) {
            let Some(status) = exited_by(&mut r.child, deadline) else {
                let _ = r.child.kill();
                let _ = r.child.wait();
                return Err(AgentError::NoExit { node: r.node, secs: EXIT_WAIT.as_secs() });
            };
            if !status.success() {
                return Err(AgentError::Failed { node: r.node, status: status.to_string(), stderr: tail(&r.stderr) });
            }
            let text = std::fs::read_to_string(&r.stdout).unwrap_or_default();
            // The counters are the last JSON object on stdout.
            let counters = text.lines().rev().find_map(|l| serde_json::from_str::<Value>(l.trim()).ok());
            let counters = counters.or_else(|| serde_json::from_str::<Value>(text.trim()).ok());
            match counters {
                Some(v @ Value::Object(_)) => out.push(serde_json::json!({ "node": r.node, "counters": v })),
                _ => return Err(AgentError::NoCounters { node: r.node, stdout: text.chars().take(400).collect() }),
            }
        }
        Ok(out)
    }
}

impl Drop for Agents {
    fn drop(&mut self) {
        for r in &mut self.running {
            signal_child(&mut r.child, libc::SIGTERM);
        }
        let deadline = Instant::now() + Duration::from_secs(2);
        for r in &mut self.running {
            if exited_by(&mut r.child, deadline).is_none() {
                let _ = r.child.kill();
                let _ = r.child.wait();
            }
        }
    }
}
