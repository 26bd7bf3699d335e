//! Rattan (the `rattan` crate, an AF_PACKET path emulator in Rust) as the fidelity bench's
//! peer: the same point-to-point link and the same probe workload run through it in the same
//! invocation. Rattan is a bench-time tool, found on this machine (see [`find`]); nothing in
//! the product depends on it.
//!
//! How the two runs are made comparable:
//! - Topology. Rattan's `Isolated` mode builds `ns-left-ID`, `ns-rattan-ID` and `ns-right-ID`
//!   with one veth pair from each end namespace into `ns-rattan-ID` (static ARP entries, veth
//!   offloads off), and forwards between the two pairs with AF_PACKET. That is the shape of
//!   Cohort's testbed (one namespace per node, a veth into the emulator); only the emulator
//!   differs. Rattan runs a command in each end namespace: ours only reports `$RATTAN_ID` and
//!   the peer's address and then waits, and the bench opens its sockets inside those
//!   namespaces with `setns` exactly as it does in Cohort's, so the probe sender, receiver,
//!   socket options and kernel receive timestamps are the same code.
//! - Link model. Cells `Bw` → `Delay` → `Loss` (the order of `rattan link`): a probe is
//!   serialized after the probes before it, then delayed, then maybe dropped, as in Cohort's
//!   link model. Rattan counts IP bytes (`NetworkLayer`: payload + 28) where Cohort counts
//!   Ethernet frame bytes (payload + 42), so Rattan's bandwidth is scaled by
//!   (payload + 28) / (payload + 42): every probe then takes the same serialization time on
//!   both, and the same expected-arrival replay and frame-byte goodput apply to both.
//! - Scheduling. Cohort's emulator thread runs SCHED_FIFO at `rt_priority`; Rattan is started
//!   with the same policy and priority (inherited by its threads), so neither competes with
//!   the probe sender (SCHED_FIFO 40) on unequal terms.
//! - Loss randomness. Rattan's `Loss` cell draws from a fixed seed (42) that its config cannot
//!   change; Cohort draws from `--seed`. The loss errors of both are sampling noise of about
//!   sqrt(p(1-p)/probes), which the report states beside them.
//!
//! Clean-up: the end commands exit when the bench removes their flag file, and Rattan then
//! deletes its namespaces (and with them its veths) itself. If it does not exit in time it is
//! interrupted, then killed, and whatever `ns-*-ID` namespace is left is deleted here.

use std::ffi::OsString;
use std::fmt::Write as _;
use std::io;
use std::net::{Ipv4Addr, UdpSocket};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// What to tell someone whose machine has no Rattan.
pub const INSTALL_HINT: &str = "rattan not found (looked at $COHORT_RATTAN, target/tools/bin/rattan and PATH); \
     install it with scripts/install-rattan (cargo install rattan --version 0.1.1 --root target/tools), \
     or set COHORT_RATTAN=/path/to/rattan";

/// Where Rattan is looked for: `$COHORT_RATTAN` (must exist if set), then
/// `target/tools/bin/rattan` under the current directory and beside the running binary's
/// `target/` (a `cohort` in `target/release/` finds `target/tools/bin/rattan`), then `PATH`.
#[derive(Debug, Clone, Default)]
pub struct Lookup {
    pub env: Option<OsString>,
    pub cwd: Option<PathBuf>,
    pub exe: Option<PathBuf>,
    pub path: Option<OsString>,
}

impl Lookup {
    /// This process's environment.
    pub fn from_env() -> Self {
        Lookup {
            env: std::env::var_os("COHORT_RATTAN"),
            cwd: std::env::current_dir().ok(),
            exe: std::env::current_exe().ok(),
            path: std::env::var_os("PATH"),
        }
    }
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    p.metadata().map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0).unwrap_or(false)
}

/// The Rattan binary to use, or why there is none.
pub fn find(l: &Lookup) -> Result<PathBuf, String> {
    if let Some(e) = l.env.as_ref().filter(|e| !e.is_empty()) {
        let p = PathBuf::from(e);
        return if is_executable(&p) {
            Ok(p)
        } else {
            Err(format!("COHORT_RATTAN={} is not an executable file; {INSTALL_HINT}", p.display()))
        };
    }
    let mut candidates = Vec::new();
    if let Some(cwd) = &l.cwd {
        candidates.push(cwd.join("target/tools/bin/rattan"));
    }
    // target/<profile>/cohort -> target/tools/bin/rattan
    if let Some(target) = l.exe.as_ref().and_then(|e| e.parent()).and_then(|d| d.parent()) {
        candidates.push(target.join("tools/bin/rattan"));
    }
    if let Some(path) = &l.path {
        candidates.extend(std::env::split_paths(path).map(|d| d.join("rattan")));
    }
    candidates.into_iter().find(|p| is_executable(p)).ok_or_else(|| INSTALL_HINT.to_string())
}

/// `rattan --version`'s first line.
pub fn version(bin: &Path) -> Result<String, String> {
    let out = Command::new(bin).arg("--version").output().map_err(|e| format!("{}: {e}", bin.display()))?;
    if !out.status.success() {
        return Err(format!("{} --version: {}", bin.display(), String::from_utf8_lossy(&out.stderr).trim()));
    }
    Ok(String::from_utf8_lossy(&out.stdout).lines().next().unwrap_or("").trim().to_string())
}

/// One direction of the link, in Cohort's terms.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LinkSpec {
    pub owd_ms: f64,
    /// Rate in Mbit/s of Ethernet frame bytes (Cohort's link model).
    pub rate_mbps: f64,
    pub loss: f64,
    /// UDP payload of every probe: fixes the IP/frame byte ratio for the bandwidth scaling.
    pub payload: usize,
}

/// Rattan's bandwidth (IP bytes, bit/s) giving a probe of `payload` bytes the serialization
/// time that `rate_mbps` of frame bytes gives it in Cohort's model.
pub fn rattan_bps(rate_mbps: f64, payload: usize) -> u64 {
    let ip = (payload + 28) as f64;
    let frame = (payload + crate::fidelity::FRAME_OVERHEAD) as f64;
    (rate_mbps * 1e6 * ip / frame).round() as u64
}

fn toml_str(s: &str) -> String {
    let mut o = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => o.push_str("\\\""),
            '\\' => o.push_str("\\\\"),
            c => o.push(c),
        }
    }
    o.push('"');
    o
}

/// The Rattan config (TOML) for `link` from left to right (right to left unshaped), running
/// `side_script` in each end namespace as `/bin/sh SCRIPT left|right DIR`.
pub fn config_toml(link: &LinkSpec, side_script: &Path, dir: &Path) -> String {
    let mut t = String::from("# written by cohort bench testbed-fidelity\n[env]\nmode = \"Isolated\"\n\n");
    let _ = write!(
        t,
        "[cells.up_bw]\ntype = \"Bw\"\nbw_type = \"NetworkLayer\"\nqueue = \"Infinite\"\nbandwidth = \"{}bps\"\n\n",
        rattan_bps(link.rate_mbps, link.payload)
    );
    let _ = write!(t, "[cells.up_delay]\ntype = \"Delay\"\ndelay = \"{}us\"\n\n", (link.owd_ms * 1e3).round() as u64);
    let mut chain = vec!["up_bw", "up_delay"];
    if link.loss > 0.0 {
        let _ = write!(t, "[cells.up_loss]\ntype = \"Loss\"\npattern = [{:?}]\n\n", link.loss);
        chain.push("up_loss");
    }
    t.push_str("[links]\n");
    let _ = writeln!(t, "left = \"{}\"", chain[0]);
    for w in chain.windows(2) {
        let _ = writeln!(t, "{} = \"{}\"", w[0], w[1]);
    }
    let _ = writeln!(t, "{} = \"right\"", chain[chain.len() - 1]);
    t.push_str("right = \"left\"\n\n[commands]\n");
    for side in ["left", "right"] {
        let args = ["/bin/sh", &side_script.display().to_string(), side, &dir.display().to_string()]
            .iter()
            .map(|a| toml_str(a))
            .collect::<Vec<_>>()
            .join(", ");
        let _ = writeln!(t, "{side} = [{args}]");
    }
    t
}

/// Run in each end namespace: report Rattan's instance id and the other end's address
/// (`$RATTAN_BASE` is the peer's first veth address), then wait for the flag to go.
const SIDE_SCRIPT: &str = r#"side="$1"; dir="$2"
printf '%s %s\n' "$RATTAN_ID" "$RATTAN_BASE" > "$dir/$side.tmp" && mv "$dir/$side.tmp" "$dir/$side"
while [ -e "$dir/run" ]; do sleep 0.1; done
"#;

/// Whether `name` is one of the namespaces a Rattan instance makes (`ns-left-ID`,
/// `ns-rattan-ID`, `ns-right-ID`).
fn is_rattan_namespace(name: &str) -> bool {
    ["ns-left-", "ns-rattan-", "ns-right-"].iter().any(|p| {
        name.strip_prefix(p)
            .is_some_and(|id| !id.is_empty() && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'))
    })
}

/// Whether a process whose command name is `rattan` is running.
fn rattan_running() -> bool {
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .any(|e| std::fs::read_to_string(e.path().join("comm")).is_ok_and(|c| c.trim_end() == "rattan"))
}

/// Removes the namespaces an earlier Rattan run left behind (it died, or the bench did before
/// its clean-up), when no Rattan is running; returns what it removed. As `cohort testbed down
/// --all` does for Cohort's runs.
pub fn clear_stale() -> Vec<String> {
    if rattan_running() {
        return Vec::new();
    }
    let Ok(all) = cohort_emu::netns::list() else { return Vec::new() };
    all.into_iter()
        .filter(|ns| is_rattan_namespace(ns))
        .filter(|ns| match cohort_emu::netns::delete(ns) {
            Ok(()) => true,
            Err(e) => {
                eprintln!("could not remove stale Rattan namespace {ns}: {e}");
                false
            }
        })
        .collect()
}

/// A running Rattan instance with its namespaces; torn down on drop.
#[derive(Debug)]
pub struct RattanLink {
    child: Option<Child>,
    dir: PathBuf,
    pub id: String,
    pub left_ns: String,
    pub right_ns: String,
    pub left_addr: Ipv4Addr,
    pub right_addr: Ipv4Addr,
}

fn read_side(dir: &Path, side: &str) -> Option<(String, Ipv4Addr)> {
    let s = std::fs::read_to_string(dir.join(side)).ok()?;
    let mut it = s.split_whitespace();
    let id = it.next()?.to_string();
    let peer = it.next()?.parse().ok()?;
    Some((id, peer))
}

/// The last lines Rattan logged, without colour codes.
fn log_tail(dir: &Path) -> String {
    let raw = std::fs::read_to_string(dir.join("rattan.log")).unwrap_or_default();
    let mut s = String::with_capacity(raw.len());
    let mut esc = false;
    for c in raw.chars() {
        match c {
            '\x1b' => esc = true,
            'm' if esc => esc = false,
            c if !esc => s.push(c),
            _ => {}
        }
    }
    let lines: Vec<&str> = s.lines().filter(|l| !l.contains("IFLA_INET6_CONF")).collect();
    lines[lines.len().saturating_sub(8)..].join(" | ")
}

impl RattanLink {
    /// Starts `bin` with `link` (unique `tag` names the scratch directory), and waits until
    /// both end namespaces are ready.
    pub fn up(bin: &Path, link: &LinkSpec, tag: &str, rt_priority: Option<i32>) -> Result<RattanLink, String> {
        let dir = std::env::temp_dir().join(format!("cohort-rattan-{}-{tag}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let io_err = |e: io::Error| format!("{}: {e}", dir.display());
        let script = dir.join("side.sh");
        std::fs::write(&script, SIDE_SCRIPT).map_err(io_err)?;
        let config = dir.join("rattan.toml");
        std::fs::write(&config, config_toml(link, &script, &dir)).map_err(io_err)?;
        std::fs::write(dir.join("run"), b"").map_err(io_err)?;
        // Rattan logs (errors included) to stdout.
        let log = std::fs::File::create(dir.join("rattan.log")).map_err(io_err)?;
        let log2 = log.try_clone().map_err(io_err)?;
        let mut cmd = Command::new(bin);
        cmd.arg("run").arg("-c").arg(&config).stdin(Stdio::null()).stdout(log).stderr(log2);
        if std::env::var_os("RUST_LOG").is_none() {
            cmd.env("RUST_LOG", "warn");
        }
        // SAFETY: only prctl, getppid and sched_setscheduler (async-signal-safe) run between
        // fork and exec.
        unsafe {
            cmd.pre_exec(move || {
                // Rattan dies with the bench (SIGINT: it then removes its namespaces as on a
                // normal stop); a bench that dies before this takes effect is seen by getppid.
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGINT);
                if libc::getppid() == 1 {
                    return Err(io::Error::other("the bench exited while starting rattan"));
                }
                if let Some(prio) = rt_priority {
                    let p = libc::sched_param { sched_priority: prio };
                    // Best effort, as for Cohort's emulator thread: without the capability
                    // Rattan runs at normal priority.
                    libc::sched_setscheduler(0, libc::SCHED_FIFO, &p);
                }
                Ok(())
            });
        }
        let child = cmd.spawn().map_err(|e| format!("starting {}: {e}", bin.display()))?;
        let mut link = RattanLink {
            child: Some(child),
            dir,
            id: String::new(),
            left_ns: String::new(),
            right_ns: String::new(),
            left_addr: Ipv4Addr::UNSPECIFIED,
            right_addr: Ipv4Addr::UNSPECIFIED,
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let (Some((id, right)), Some((id2, left))) =
                (read_side(&link.dir, "left"), read_side(&link.dir, "right"))
            {
                if id != id2 {
                    return Err(format!("the two end commands report different Rattan ids ({id}, {id2})"));
                }
                link.left_ns = format!("ns-left-{id}");
                link.right_ns = format!("ns-right-{id}");
                link.id = id;
                link.left_addr = left;
                link.right_addr = right;
                return Ok(link);
            }
            if let Some(st) = link.child.as_mut().and_then(|c| c.try_wait().ok().flatten()) {
                link.child = None;
                return Err(format!("rattan exited ({st}) before its namespaces were ready: {}", log_tail(&link.dir)));
            }
            if Instant::now() > deadline {
                return Err(format!("rattan's namespaces were not ready within 30 s: {}", log_tail(&link.dir)));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Opens a UDP socket bound to `addr` inside namespace `ns`.
    pub fn socket(ns: &str, addr: Ipv4Addr) -> Result<UdpSocket, String> {
        cohort_emu::netns::in_netns(ns, move || UdpSocket::bind((addr, 0))).map_err(|e| e.to_string())
    }

    /// Stops Rattan and removes everything it made; an error says what was left to clean.
    pub fn down(mut self) -> Result<(), String> {
        self.teardown()
    }

    fn teardown(&mut self) -> Result<(), String> {
        let _ = std::fs::remove_file(self.dir.join("run"));
        let mut note = String::new();
        if let Some(mut child) = self.child.take() {
            let wait = |child: &mut Child, secs: u64| {
                crate::proc::exited_by(child, Instant::now() + Duration::from_secs(secs)).is_some()
            };
            if !wait(&mut child, 10) {
                crate::proc::signal_child(&mut child, libc::SIGINT);
                if !wait(&mut child, 5) {
                    let _ = child.kill();
                    let _ = child.wait();
                    eprintln!("rattan did not exit when asked and was killed");
                }
            }
        }
        if !self.id.is_empty() {
            for ns in ["left", "rattan", "right"].map(|s| format!("ns-{s}-{}", self.id)) {
                if cohort_emu::netns::exists(&ns) {
                    match cohort_emu::netns::delete(&ns) {
                        Ok(()) => eprintln!("rattan left namespace {ns} behind; deleted it"),
                        Err(e) => note.push_str(&format!("could not delete namespace {ns}: {e}; ")),
                    }
                }
            }
        }
        let _ = std::fs::remove_dir_all(&self.dir);
        if note.is_empty() { Ok(()) } else { Err(note.trim_end_matches("; ").to_string()) }
    }
}

impl Drop for RattanLink {
    fn drop(&mut self) {
        if (self.child.is_some() || self.dir.exists())
            && let Err(e) = self.teardown()
        {
            eprintln!("rattan clean-up: {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_rattans_namespaces_are_stale_candidates() {
        for ns in ["ns-left-ab12", "ns-rattan-ab12", "ns-right-7"] {
            assert!(is_rattan_namespace(ns), "{ns}");
        }
        for ns in ["ns-left-", "cht-fid-a", "ns-left-a/b", "myns-left-1", "ns-middle-1", "ns-left-a b"] {
            assert!(!is_rattan_namespace(ns), "{ns}");
        }
    }

    #[test]
    fn bandwidth_scaling_gives_equal_serialization_time() {
        let bps = rattan_bps(100.0, 1250);
        let rattan_s = (1250 + 28) as f64 * 8.0 / bps as f64;
        let cohort_s = (1250 + 42) as f64 * 8.0 / 100e6;
        assert!((rattan_s / cohort_s - 1.0).abs() < 1e-6, "{rattan_s} vs {cohort_s}");
    }

    #[test]
    fn config_chains_bw_delay_loss_and_skips_zero_loss() {
        let link = LinkSpec { owd_ms: 20.0, rate_mbps: 100.0, loss: 0.05, payload: 1250 };
        let t = config_toml(&link, Path::new("/tmp/x/side.sh"), Path::new("/tmp/x"));
        assert!(t.contains("mode = \"Isolated\""));
        assert!(t.contains("queue = \"Infinite\""));
        assert!(t.contains("delay = \"20000us\""));
        assert!(t.contains(&format!("bandwidth = \"{}bps\"", rattan_bps(100.0, 1250))));
        assert!(t.contains("pattern = [0.05]"));
        for l in [
            "left = \"up_bw\"",
            "up_bw = \"up_delay\"",
            "up_delay = \"up_loss\"",
            "up_loss = \"right\"",
            "right = \"left\"",
        ] {
            assert!(t.contains(l), "{l} missing in\n{t}");
        }
        assert!(t.contains("left = [\"/bin/sh\", \"/tmp/x/side.sh\", \"left\", \"/tmp/x\"]"));
        let t0 = config_toml(&LinkSpec { loss: 0.0, ..link }, Path::new("/s"), Path::new("/d"));
        assert!(!t0.contains("up_loss"));
        assert!(t0.contains("up_delay = \"right\""));
    }

    #[test]
    fn lookup_order_and_hint() {
        let dir = std::env::temp_dir().join(format!("cohort-rattan-lookup-{}", std::process::id()));
        let bin = dir.join("target/tools/bin/rattan");
        std::fs::create_dir_all(bin.parent().unwrap()).unwrap();
        std::fs::write(&bin, "#!/bin/sh\n").unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();

        let none = Lookup::default();
        assert_eq!(find(&none).unwrap_err(), INSTALL_HINT);
        let by_cwd = Lookup { cwd: Some(dir.clone()), ..Default::default() };
        assert_eq!(find(&by_cwd).unwrap(), bin);
        let by_exe = Lookup { exe: Some(dir.join("target/release/cohort")), ..Default::default() };
        assert_eq!(find(&by_exe).unwrap(), bin);
        let by_path = Lookup { path: Some(bin.parent().unwrap().as_os_str().to_owned()), ..Default::default() };
        assert_eq!(find(&by_path).unwrap(), bin);
        let bad_env = Lookup { env: Some("/nonexistent/rattan".into()), cwd: Some(dir.clone()), ..Default::default() };
        assert!(find(&bad_env).unwrap_err().contains("COHORT_RATTAN=/nonexistent/rattan"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
