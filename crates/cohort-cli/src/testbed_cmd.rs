//! `cohort testbed`: real network stacks in namespaces over the emulated channel.

use crate::progress::Progress;
use clap::{Args, Subcommand};
use cohort_bench::progress::Step;
use cohort_emu::testbed::{self, EmuMode, Testbed};
use cohort_emu::{EmuOptions, EmuStatus, TestbedError, TestbedScenario};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Debug, Args)]
pub struct TestbedArgs {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Debug, Args)]
struct EmuFlags {
    /// Poll instead of sleeping this close to a deadline (µs).
    #[arg(long, default_value_t = 60)]
    spin_us: u64,
    /// SCHED_FIFO priority of the emulator (0: the default scheduler).
    #[arg(long, default_value_t = 50)]
    rt_priority: i32,
    #[command(flatten)]
    timing: EmuTimingFlags,
    /// Write one JSON line per frame to this file.
    #[arg(long)]
    frame_log: Option<PathBuf>,
}

/// How the emulator holds its timing on a machine with other work (`cohort testbed up` and
/// `cohort bench testbed-fidelity`).
#[derive(Debug, Clone, Args)]
pub struct EmuTimingFlags {
    /// Never block in the kernel: poll sockets and clock in a loop (most of one CPU; for a
    /// machine with other work on it).
    #[arg(long)]
    pub busy_poll: bool,
    /// Run the emulator on this CPU only.
    #[arg(long)]
    pub cpu: Option<usize>,
    /// Lock the emulator's memory (mlockall).
    #[arg(long)]
    pub lock_memory: bool,
}

impl EmuTimingFlags {
    /// The same flags on a command line.
    fn args(&self) -> Vec<String> {
        let mut v = Vec::new();
        if self.busy_poll {
            v.push("--busy-poll".into());
        }
        if let Some(cpu) = self.cpu {
            v.extend(["--cpu".into(), cpu.to_string()]);
        }
        if self.lock_memory {
            v.push("--lock-memory".into());
        }
        v
    }
}

impl EmuFlags {
    fn options(&self) -> EmuOptions {
        EmuOptions {
            spin_us: self.spin_us,
            rt_priority: (self.rt_priority > 0).then_some(self.rt_priority),
            busy_poll: self.timing.busy_poll,
            cpu: self.timing.cpu,
            lock_memory: self.timing.lock_memory,
            frame_log: self.frame_log.clone(),
            ..EmuOptions::default()
        }
    }
}

#[derive(Debug, Subcommand)]
enum Cmd {
    /// Create a namespace per node, the veth pairs, addresses and routes, and start the
    /// emulator in the background.
    Up {
        scenario: PathBuf,
        /// Run name (default: the scenario's name); namespaces are `cht-RUN-NODE`.
        #[arg(long)]
        run: Option<String>,
        #[command(flatten)]
        emu: EmuFlags,
    },
    /// Run a command inside a node: `cohort testbed exec NODE -- CMD ARGS...`.
    Exec {
        node: String,
        #[arg(long)]
        run: Option<String>,
        #[arg(last = true, required = true)]
        cmd: Vec<String>,
    },
    /// Per-link or per-station counters, queue depths, airtime and drops.
    Status {
        #[arg(long)]
        run: Option<String>,
        #[arg(long)]
        json: bool,
    },
    /// Stop the emulator and delete the run's namespaces; `--all` also removes whatever a
    /// crashed run left behind.
    Down {
        #[arg(long)]
        run: Option<String>,
        #[arg(long)]
        all: bool,
    },
    /// The emulator process itself (started by `up`).
    #[command(hide = true)]
    Emulate {
        #[arg(long)]
        run: String,
        #[command(flatten)]
        emu: EmuFlags,
    },
}

pub fn run(a: &TestbedArgs) -> Result<ExitCode, TestbedError> {
    match &a.cmd {
        Cmd::Up { scenario, run, emu } => {
            let s = TestbedScenario::load(scenario)?;
            let run = run.clone().unwrap_or_else(|| s.name.clone());
            let exe = std::env::current_exe().map_err(TestbedError::Emulator)?;
            let mut args = vec!["testbed".to_string(), "emulate".into()];
            args.extend([
                "--spin-us".into(),
                emu.spin_us.to_string(),
                "--rt-priority".into(),
                emu.rt_priority.to_string(),
            ]);
            args.extend(emu.timing.args());
            if let Some(p) = &emu.frame_log {
                args.extend(["--frame-log".into(), p.display().to_string()]);
            }
            let progress = Progress::bar_only("testbed up", false);
            let tb = Testbed::up_with_progress(
                &s,
                &run,
                EmuMode::Process { program: exe, args },
                emu.options(),
                |d, t, w| progress.step(&Step { done: d, total: t, what: w }),
            )?;
            drop(progress);
            println!("run {run} is up ({:?} mode):", s.mode);
            for at in tb.attachments() {
                let node = &s.nodes[at.port.node];
                println!(
                    "  {node:<12} {:<6} {}/{}   ns {}",
                    at.ifname,
                    at.addr,
                    at.prefix,
                    testbed::node_ns(&run, node)
                );
            }
            println!(
                "cohort testbed exec --run {run} NODE -- CMD   |   cohort testbed status   |   cohort testbed down"
            );
            tb.detach();
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Exec { node, run, cmd } => {
            let run = testbed::pick_run(run.as_deref())?;
            let ns = testbed::node_ns(&run, node);
            if !cohort_emu::netns::exists(&ns) {
                return Err(TestbedError::NoNode(node.clone()));
            }
            use std::os::unix::process::CommandExt;
            let err = std::process::Command::new("ip").args(["netns", "exec", &ns]).args(cmd).exec();
            Err(TestbedError::Emulator(err))
        }
        Cmd::Status { run, json } => {
            let run = testbed::pick_run(run.as_deref())?;
            let st = testbed::read_status(&run)?;
            if *json {
                println!("{}", serde_json::to_string_pretty(&st).expect("status serializes"));
            } else {
                print_status(&run, &st);
            }
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Down { run, all } => {
            if *all {
                let removed = testbed::down_all()?;
                println!("removed {} run(s){}", removed.len(), list(&removed));
            } else {
                let run = testbed::pick_run(run.as_deref())?;
                testbed::down(&run)?;
                println!("run {run} is down");
            }
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Emulate { run, emu } => {
            testbed::emulate(run, emu.options())?;
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn list(v: &[String]) -> String {
    if v.is_empty() { String::new() } else { format!(": {}", v.join(", ")) }
}

fn print_status(run: &str, st: &EmuStatus) {
    let c = &st.fabric.counters;
    println!(
        "run {run}: up {:.1} s, {:?}, real-time {}; frames in {} out {}; malformed {} oversize {} queue-full {} channel drops {}",
        st.uptime_s,
        st.fabric.mode,
        st.realtime,
        c.frames_in,
        c.frames_out,
        c.malformed,
        st.oversize,
        c.queue_full,
        c.channel_drops
    );
    println!(
        "emulator lateness: p50 {:.0} µs, p99 {:.0} µs, max {:.0} µs; {}{}{}time stolen by the host {:.2}%",
        st.late_us_p50,
        st.late_us_p99,
        st.late_us_max,
        if st.busy_poll { "busy-polling; " } else { "" },
        st.cpu.map(|c| format!("on CPU {c}; ")).unwrap_or_default(),
        if st.memory_locked { "memory locked; " } else { "" },
        st.steal_share * 100.0
    );
    if !st.fabric.links.is_empty() {
        println!(
            "{:<5} {:<12} {:>10} {:>10} {:>8} {:>8} {:>7}",
            "link", "direction", "offered", "delivered", "lost", "q-drops", "queued"
        );
        for l in &st.fabric.links {
            println!(
                "{:<5} {:<12} {:>10} {:>10} {:>8} {:>8} {:>7}",
                l.link,
                format!("{}->{}", l.from, l.to),
                l.offered,
                l.delivered,
                l.lost,
                l.queue_drops,
                l.queued_packets
            );
        }
    }
    if !st.fabric.stations.is_empty() {
        println!("channel busy {:.1} ms", st.fabric.channel_busy_ms);
        println!(
            "{:<12} {:<3} {:>6} {:>6} {:>9} {:>9} {:>8} {:>8} {:>10}",
            "station", "ac", "queue", "max", "enqueued", "sent", "q-drops", "retry-dr", "airtime ms"
        );
        for s in &st.fabric.stations {
            for a in s.acs.iter().filter(|a| a.enqueued > 0) {
                println!(
                    "{:<12} {:<3} {:>6} {:>6} {:>9} {:>9} {:>8} {:>8} {:>10.1}",
                    s.node,
                    a.ac,
                    a.queue_len,
                    a.max_queue,
                    a.enqueued,
                    a.successes,
                    a.queue_drops,
                    a.retry_drops,
                    a.airtime_ms
                );
            }
        }
    }
}
