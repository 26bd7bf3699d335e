//! `cohort doctor`: what this machine lets Cohort do, what each missing piece disables, and how
//! to get it. Every check asks the kernel or runs the tool itself (it never trusts a version
//! string alone) and changes nothing it does not undo.

use clap::Args;
use serde::Serialize;
use std::path::Path;
use std::process::{Command, ExitCode, Stdio};

#[derive(Debug, Args)]
pub struct DoctorArgs {
    /// Print the checks as JSON.
    #[arg(long)]
    json: bool,
}

/// One check: `ok`, or what is missing, what that disables and how to get it.
#[derive(Debug, Clone, Serialize)]
pub struct Check {
    pub name: &'static str,
    pub ok: bool,
    /// What was found (a version, a mode, a reason).
    pub found: String,
    /// What a missing piece disables.
    pub disables: &'static str,
    /// How to get it.
    pub fix: &'static str,
}

fn read(path: &str) -> Option<String> {
    std::fs::read_to_string(path).ok().map(|s| s.trim().to_string())
}

/// Runs `program args...` quietly: its first line of stdout, or why it failed (the last line
/// of its stderr, where tools and Python tracebacks put the reason).
fn run(program: &str, args: &[&str]) -> Result<String, String> {
    match Command::new(program).args(args).stdin(Stdio::null()).output() {
        Ok(o) if o.status.success() => {
            Ok(String::from_utf8_lossy(&o.stdout).lines().next().unwrap_or("").trim().into())
        }
        Ok(o) => {
            let err = String::from_utf8_lossy(&o.stderr);
            Err(err.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("failed").trim().into())
        }
        Err(e) => Err(format!("{program}: {e}")),
    }
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

fn root() -> Check {
    let ok = is_root();
    Check {
        name: "root",
        ok,
        found: if ok { "running as root".into() } else { "not root".into() },
        disables: "cohort testbed, cohort coorp agent, and the benches marked root (testbed-fidelity, transport, group, coorp --testbed, coorp-gate)",
        fix: "run those commands with sudo",
    }
}

fn netns() -> Check {
    let found = if !is_root() {
        Err("needs root to try".to_string())
    } else {
        let name = format!("cohort-doctor-{}", std::process::id());
        run("ip", &["netns", "add", &name]).map(|_| {
            let _ = run("ip", &["netns", "del", &name]);
            "a namespace was created and removed".to_string()
        })
    };
    Check {
        name: "network namespaces",
        ok: found.is_ok(),
        found: found.unwrap_or_else(|e| e),
        disables: "the testbed (one namespace per robot) and every root bench",
        fix: "install iproute2 (apt-get install iproute2) and run as root in a kernel with CONFIG_NET_NS",
    }
}

fn af_packet() -> Check {
    // SAFETY: socket(2) with constant arguments; the descriptor is closed at once.
    let fd = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW, i32::from((libc::ETH_P_ALL as u16).to_be())) };
    let found = if fd >= 0 {
        // SAFETY: a descriptor this function owns.
        unsafe { libc::close(fd) };
        "raw packet socket opened".to_string()
    } else {
        std::io::Error::last_os_error().to_string()
    };
    Check {
        name: "AF_PACKET",
        ok: fd >= 0,
        found,
        disables: "the emulator between namespaces and the COORP agent's observer",
        fix: "run as root (CAP_NET_RAW) on a kernel with CONFIG_PACKET",
    }
}

fn cgroups() -> Check {
    let v2 = read("/sys/fs/cgroup/cgroup.controllers");
    let v1: Vec<&str> = ["cpu", "cpuset", "memory"]
        .into_iter()
        .filter(|c| Path::new(&format!("/sys/fs/cgroup/{c}")).is_dir())
        .collect();
    let (ok, found) = match (&v2, v1.len()) {
        (_, 3) => (true, "cgroup v1 controllers cpu, cpuset, memory".to_string()),
        (Some(c), _) if ["cpu", "memory"].iter().all(|k| c.split_whitespace().any(|x| x == *k)) => {
            (true, format!("cgroup v2: {c}"))
        }
        (Some(c), _) => (false, format!("cgroup v2 without cpu or memory: {c}")),
        (None, _) => (false, format!("no cgroup v2 root and v1 controllers {v1:?}")),
    };
    Check {
        name: "cgroups",
        ok,
        found,
        disables: "the OS tuner's CPU-share and memory knobs (cohort tune)",
        fix: "mount the cgroup v2 hierarchy with the cpu and memory controllers, or the v1 cpu/cpuset/memory controllers",
    }
}

fn sched_deadline() -> Check {
    let runtime = read("/proc/sys/kernel/sched_rt_runtime_us");
    // sched_getattr(2) on ourselves tells whether the syscall exists.
    let mut attr = [0u8; 56];
    // SAFETY: the kernel writes at most `size` (56) bytes into `attr`.
    let r = unsafe { libc::syscall(libc::SYS_sched_getattr, 0, attr.as_mut_ptr(), attr.len() as u32, 0u32) };
    let ok = r == 0 && runtime.as_deref() != Some("-1");
    let found = if r != 0 {
        format!("sched_getattr: {}", std::io::Error::last_os_error())
    } else {
        match runtime.as_deref() {
            Some("-1") => {
                "real-time throttling is off (sched_rt_runtime_us = -1): the tuner refuses RT policies".into()
            }
            Some(v) => format!("sched_setattr present, sched_rt_runtime_us = {v}"),
            None => "sched_setattr present".into(),
        }
    };
    Check {
        name: "SCHED_DEADLINE",
        ok,
        found,
        disables: "the tuner's real-time policies for the navigation loop and the testbed's SCHED_FIFO emulator",
        fix: "a kernel with SCHED_DEADLINE (3.14+) and RT throttling on (sysctl kernel.sched_rt_runtime_us=950000)",
    }
}

fn thp() -> Check {
    let v = read("/sys/kernel/mm/transparent_hugepage/enabled");
    Check {
        name: "transparent huge pages",
        ok: v.is_some(),
        found: v.unwrap_or_else(|| "no /sys/kernel/mm/transparent_hugepage".into()),
        disables: "the tuner's THP knob",
        fix: "a kernel with CONFIG_TRANSPARENT_HUGEPAGE",
    }
}

fn mptcp() -> Check {
    let v = read("/proc/sys/net/mptcp/enabled");
    Check {
        name: "MPTCP",
        ok: v.as_deref() == Some("1"),
        found: v.map_or_else(|| "no /proc/sys/net/mptcp".into(), |v| format!("net.mptcp.enabled = {v}")),
        disables: "the kernel MPTCP baseline of the multipath comparison",
        fix: "sysctl net.mptcp.enabled=1 on a kernel with CONFIG_MPTCP (5.6+)",
    }
}

fn nft() -> Check {
    let r = run("nft", &["--version"]);
    Check {
        name: "nftables",
        ok: r.is_ok(),
        found: r.unwrap_or_else(|e| e),
        disables: "cohort coorp agent (it marks foreign control EF and foreign bulk for the gate with nft)",
        fix: "apt-get install nftables (scripts/test installs it when run as root)",
    }
}

fn python_module(name: &'static str, module: &str, disables: &'static str, fix: &'static str) -> Check {
    let interpreter = std::env::var("COHORT_PYTHON").unwrap_or_else(|_| "python3".into());
    let code = format!("import {module}; print(getattr({module}, '__version__', 'present'))");
    let r = run(&interpreter, &["-c", &code]);
    Check { name, ok: r.is_ok(), found: r.unwrap_or_else(|e| e), disables, fix }
}

fn rattan() -> Check {
    let r = cohort_bench::rattan::find(&cohort_bench::rattan::Lookup::from_env())
        .and_then(|p| cohort_bench::rattan::version(&p).map(|v| format!("{} ({v})", p.display())));
    Check {
        name: "Rattan",
        ok: r.is_ok(),
        found: r.unwrap_or_else(|e| e),
        disables: "the third-party emulator beside Cohort's in cohort bench testbed-fidelity and transport",
        fix: "scripts/install-rattan, or set COHORT_RATTAN",
    }
}

/// Every check, in the order printed.
pub fn checks() -> Vec<Check> {
    vec![
        root(),
        netns(),
        af_packet(),
        cgroups(),
        sched_deadline(),
        thp(),
        mptcp(),
        nft(),
        python_module(
            "Python bindings",
            "cohort._native",
            "the Python API (cohort.LrtSocket, GroupSocket, sim), cohort bridge, and plots' package",
            "pip install . (or pip install -e '.[dev]') in the repository; it builds the native module with maturin",
        ),
        python_module("optuna", "optuna", "cohort tune's search", "pip install optuna"),
        python_module("matplotlib", "matplotlib", "every --plot and --out chart", "pip install matplotlib"),
        python_module(
            "eclipse-zenoh",
            "zenoh",
            "cohort bridge and the group bench's Zenoh baseline",
            "pip install eclipse-zenoh",
        ),
        python_module(
            "ns-3",
            "ns",
            "scripts/ns3_matrix.sh's ns-3 side (the stored runs still re-derive the table)",
            "pip install ns3",
        ),
        rattan(),
    ]
}

pub fn run_doctor(a: &DoctorArgs) -> ExitCode {
    let all = checks();
    if a.json {
        println!("{}", serde_json::to_string_pretty(&all).unwrap_or_default());
        return ExitCode::SUCCESS;
    }
    for c in &all {
        if c.ok {
            println!("ok       {:<24} {}", c.name, c.found);
        } else {
            println!("missing  {:<24} {}", c.name, c.found);
            println!("         {:<24} disables: {}", "", c.disables);
            println!("         {:<24} fix: {}", "", c.fix);
        }
    }
    let missing = all.iter().filter(|c| !c.ok).count();
    println!(
        "{} of {} present; the simulator, the demo's simulated parts and cargo test need none of them",
        all.len() - missing,
        all.len()
    );
    ExitCode::SUCCESS
}
