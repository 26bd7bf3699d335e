//! A testbed run: one namespace per node, one for the emulator, veth pairs between them, and
//! the emulator carrying frames through the channel models.
//!
//! Names: run `R`'s node `N` lives in namespace `cht-R-N`, the emulator's interfaces in
//! `cht-R-emu`; the run's files (scenario, emulator pid, log, `status.json`) are in
//! `/run/cohort/testbed/R/`. Because every name derives from the run, [`down_all`] can remove
//! what a crashed run left behind without any record of it.

use crate::emulator::{Control, EmuOptions, EmuStatus, Emulator};
use crate::fabric::{Fabric, Port, PortRole};
use crate::netns::{self, NetnsError, VethPair};
use crate::packet::PacketSocket;
use crate::scenario::{ScenarioError, TestbedScenario, check_name};
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Prefix of every namespace the testbed makes.
pub const NS_PREFIX: &str = "cht-";
/// Where runs keep their files.
pub const STATE_ROOT: &str = "/run/cohort/testbed";

/// Why a testbed operation failed.
#[derive(Debug, thiserror::Error)]
pub enum TestbedError {
    #[error(transparent)]
    Netns(#[from] NetnsError),
    #[error(transparent)]
    Scenario(#[from] ScenarioError),
    #[error("run {0:?} is already up; `cohort testbed down --run {0}` removes it")]
    AlreadyUp(String),
    #[error("no run named {0:?} is up")]
    NotUp(String),
    #[error("several runs are up ({0}); name one with --run")]
    Ambiguous(String),
    #[error("node {0:?} is not in the run")]
    NoNode(String),
    #[error("emulator: {0}")]
    Emulator(std::io::Error),
    #[error("emulator process exited during start-up; its log {log}:\n{text}")]
    EmulatorDied { log: String, text: String },
    #[error("{what} {path}: {source}")]
    Io { what: &'static str, path: String, source: std::io::Error },
    #[error("trace: {0}")]
    Trace(#[from] crate::fabric::TraceRefused),
    #[error(
        "a trace can start at a chosen time only on an emulator thread (Testbed::up with EmuMode::Thread); a process emulator plays the scenario's `trace = FILE` from its start"
    )]
    TraceNeedsThread,
}

fn io_err(what: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> TestbedError {
    let path = path.display().to_string();
    move |source| TestbedError::Io { what, path, source }
}

/// Namespace of `node` in run `run`.
pub fn node_ns(run: &str, node: &str) -> String {
    format!("{NS_PREFIX}{run}-{node}")
}

/// Namespace of the emulator's interfaces.
pub fn emu_ns(run: &str) -> String {
    node_ns(run, "emu")
}

/// Where a Wi-Fi run's emulator publishes what each station's card holds (station `i` is the
/// scenario's node `i`): what `cohort coorp agent --card` reads.
pub fn card_file(run: &str) -> PathBuf {
    state_dir(run).join("card")
}

pub fn state_dir(run: &str) -> PathBuf {
    Path::new(STATE_ROOT).join(run)
}

/// One node-side interface and its emulator-side peer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attachment {
    pub port: Port,
    /// Interface name inside the node (`eth0`, `wlan0`, ...).
    pub ifname: String,
    /// Interface name in the emulator's namespace.
    pub emu_ifname: String,
    pub addr: Ipv4Addr,
    pub prefix: u8,
}

/// Every interface of a scenario, in fabric port order.
pub fn attachments(s: &TestbedScenario) -> Vec<Attachment> {
    let mut per_node = vec![0usize; s.nodes.len()];
    crate::fabric::ports(s)
        .into_iter()
        .map(|port| match port.role {
            PortRole::LinkEnd { link, side } => {
                let j = per_node[port.node];
                per_node[port.node] += 1;
                Attachment {
                    port,
                    ifname: format!("eth{j}"),
                    emu_ifname: format!("l{link}{}", if side == 0 { 'a' } else { 'b' }),
                    addr: Ipv4Addr::new(10, 77, link as u8, side as u8 + 1),
                    prefix: 24,
                }
            }
            PortRole::Station { station } => Attachment {
                port,
                ifname: "wlan0".into(),
                emu_ifname: format!("s{station}"),
                addr: Ipv4Addr::new(10, 78, 0, station as u8 + 1),
                prefix: 24,
            },
        })
        .collect()
}

fn mac_str(m: [u8; 6]) -> String {
    m.iter().map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(":")
}

/// Where the emulator runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EmuMode {
    /// A thread of this process; it stops when the [`Testbed`] is dropped.
    Thread,
    /// A detached process: `PROGRAM ARGS... --run RUN` (the `cohort testbed emulate`
    /// command), which outlives this one.
    Process { program: PathBuf, args: Vec<String> },
}

#[derive(Debug)]
enum Emu {
    Thread {
        ctl: Arc<Control>,
        handle: Option<std::thread::JoinHandle<std::io::Result<()>>>,
    },
    Process,
    /// Torn down.
    None,
}

/// A run that is up. Dropping it tears it down (as [`Testbed::down`] does) unless it was
/// [`detach`](Testbed::detach)ed.
#[derive(Debug)]
pub struct Testbed {
    run: String,
    scenario: TestbedScenario,
    attachments: Vec<Attachment>,
    emu: Emu,
    status: Arc<Mutex<Option<EmuStatus>>>,
}

/// Opens the emulator's sockets (in its namespace) for every attachment.
pub fn open_sockets(run: &str, atts: &[Attachment]) -> Result<Vec<PacketSocket>, TestbedError> {
    let names: Vec<String> = atts.iter().map(|a| a.emu_ifname.clone()).collect();
    Ok(netns::in_netns(&emu_ns(run), move || {
        names.iter().map(|n| PacketSocket::bind(netns::ifindex(n)?)).collect::<std::io::Result<Vec<_>>>()
    })?)
}

/// Writes `status` to the run's `status.json` (atomically: a reader never sees half a file).
pub fn write_status(run: &str, status: &EmuStatus) -> std::io::Result<()> {
    let dir = state_dir(run);
    let tmp = dir.join("status.json.tmp");
    std::fs::write(&tmp, serde_json::to_vec_pretty(status).map_err(std::io::Error::other)?)?;
    std::fs::rename(tmp, dir.join("status.json"))
}

impl Testbed {
    /// Brings run `run` of `scenario` up: namespaces, interfaces, addresses, the emulator.
    /// Anything made before a failure is removed again.
    pub fn up(scenario: &TestbedScenario, run: &str, mode: EmuMode, opts: EmuOptions) -> Result<Self, TestbedError> {
        Self::up_with_progress(scenario, run, mode, opts, |_, _, _| {})
    }

    /// [`up`](Self::up), telling `progress(done, total, what)` as each namespace, link and
    /// finally the emulator is set up (`done` of `total` steps finished, `what` starting).
    pub fn up_with_progress(
        scenario: &TestbedScenario,
        run: &str,
        mode: EmuMode,
        opts: EmuOptions,
        mut progress: impl FnMut(u64, u64, &str),
    ) -> Result<Self, TestbedError> {
        check_name("run name", run, 24)?;
        scenario.validate()?;
        netns::require_root()?;
        if netns::exists(&emu_ns(run)) || state_dir(run).exists() {
            return Err(TestbedError::AlreadyUp(run.to_string()));
        }
        let mut tb = Testbed {
            run: run.to_string(),
            scenario: scenario.clone(),
            attachments: attachments(scenario),
            emu: Emu::None,
            status: Arc::new(Mutex::new(None)),
        };
        // On any error from here, dropping `tb` removes what exists.
        let dir = state_dir(run);
        std::fs::create_dir_all(&dir).map_err(io_err("creating", &dir))?;
        let json = serde_json::to_string_pretty(scenario).map_err(|e| io_err("encoding", &dir)(e.into()))?;
        std::fs::write(dir.join("scenario.json"), json).map_err(io_err("writing", &dir))?;
        let total = (scenario.nodes.len() + tb.attachments.len() + 2) as u64;
        let mut done = 0;
        let mut step = |what: String| {
            progress(done, total, &what);
            done += 1;
        };
        step(format!("namespace {}", emu_ns(run)));
        netns::add(&emu_ns(run))?;
        for n in &scenario.nodes {
            step(format!("namespace {}", node_ns(run, n)));
            netns::add(&node_ns(run, n))?;
        }
        for a in &tb.attachments {
            let inner_ns = node_ns(run, &scenario.nodes[a.port.node]);
            step(format!("link {} {}", inner_ns, a.ifname));
            netns::add_veth(&VethPair {
                outer_ns: &emu_ns(run),
                outer: &a.emu_ifname,
                inner_ns: &inner_ns,
                inner: &a.ifname,
                inner_mac: &mac_str(a.port.mac),
                inner_addr: &format!("{}/{}", a.addr, a.prefix),
            })?;
        }
        step("emulator".to_string());
        tb.start_emulator(mode, opts)?;
        progress(total, total, "up");
        Ok(tb)
    }

    fn start_emulator(&mut self, mode: EmuMode, mut opts: EmuOptions) -> Result<(), TestbedError> {
        opts.card_file.get_or_insert_with(|| card_file(&self.run));
        match mode {
            EmuMode::Thread => {
                let sockets = open_sockets(&self.run, &self.attachments)?;
                let fabric = Fabric::new(&self.scenario)?;
                let mut emu = Emulator::new(fabric, sockets, opts).map_err(TestbedError::Emulator)?;
                let ctl = Arc::new(Control::default());
                let (ctl2, status) = (ctl.clone(), self.status.clone());
                let handle = std::thread::Builder::new()
                    .name("cohort-emu".into())
                    .spawn(move || emu.run(&ctl2, |st| *status.lock().expect("status lock") = Some(st.clone())))
                    .map_err(TestbedError::Emulator)?;
                self.emu = Emu::Thread { ctl, handle: Some(handle) };
                // Wait for the first status so that callers start on a running emulator.
                for _ in 0..200 {
                    if self.status.lock().expect("status lock").is_some() {
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(5));
                }
            }
            EmuMode::Process { program, args } => {
                let dir = state_dir(&self.run);
                let log_path = dir.join("emulator.log");
                let log = std::fs::File::create(&log_path).map_err(io_err("creating", &log_path))?;
                let err = log.try_clone().map_err(io_err("opening", &log_path))?;
                use std::os::unix::process::CommandExt;
                let mut child = Command::new(&program)
                    .args(&args)
                    .args(["--run", &self.run])
                    .stdin(std::process::Stdio::null())
                    .stdout(log)
                    .stderr(err)
                    .process_group(0)
                    .spawn()
                    .map_err(TestbedError::Emulator)?;
                std::fs::write(dir.join("emulator.pid"), child.id().to_string()).map_err(io_err("writing", &dir))?;
                self.emu = Emu::Process;
                for _ in 0..400 {
                    if dir.join("status.json").exists() {
                        return Ok(());
                    }
                    if let Ok(Some(_)) = child.try_wait() {
                        let text = std::fs::read_to_string(&log_path).unwrap_or_default();
                        return Err(TestbedError::EmulatorDied { log: log_path.display().to_string(), text });
                    }
                    std::thread::sleep(Duration::from_millis(10));
                }
                return Err(TestbedError::Emulator(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    "no status.json from the emulator within 4 s",
                )));
            }
        }
        Ok(())
    }

    pub fn run_name(&self) -> &str {
        &self.run
    }

    pub fn scenario(&self) -> &TestbedScenario {
        &self.scenario
    }

    pub fn attachments(&self) -> &[Attachment] {
        &self.attachments
    }

    /// The namespace of `node`.
    pub fn ns(&self, node: &str) -> Result<String, TestbedError> {
        self.scenario.node_index(node).ok_or_else(|| TestbedError::NoNode(node.to_string()))?;
        Ok(node_ns(&self.run, node))
    }

    /// The `i`-th address of `node` (its interfaces in creation order).
    pub fn addr(&self, node: &str, i: usize) -> Result<Ipv4Addr, TestbedError> {
        let n = self.scenario.node_index(node).ok_or_else(|| TestbedError::NoNode(node.to_string()))?;
        self.attachments
            .iter()
            .filter(|a| a.port.node == n)
            .nth(i)
            .map(|a| a.addr)
            .ok_or_else(|| TestbedError::NoNode(format!("{node} (interface {i})")))
    }

    /// Fills every node's neighbour (ARP) table with permanent entries for every other node on
    /// the same subnet, as ns-3's `NeighborCacheHelper` does: no ARP request ever goes on the
    /// air. On a slow shared channel, many nodes resolving at once lose colliding broadcast
    /// requests, and Linux retries only after a second; benchmarks that start many flows at
    /// once use this so that they measure the protocols rather than ARP.
    pub fn populate_neighbors(&self) -> Result<(), TestbedError> {
        let same_subnet = |a: &Attachment, b: &Attachment| {
            let mask = u32::MAX.checked_shl(32 - u32::from(a.prefix)).unwrap_or(0);
            a.prefix == b.prefix && u32::from(a.addr) & mask == u32::from(b.addr) & mask
        };
        for a in &self.attachments {
            let ns = node_ns(&self.run, &self.scenario.nodes[a.port.node]);
            for b in self.attachments.iter().filter(|b| b.port.node != a.port.node && same_subnet(a, b)) {
                let entry = format!("{} lladdr {} dev {} nud permanent", b.addr, mac_str(b.port.mac), a.ifname);
                let args: Vec<&str> = ["-n", &ns, "neigh", "replace"].into_iter().chain(entry.split(' ')).collect();
                netns::ip(&args)?;
            }
        }
        Ok(())
    }

    /// A command that runs `program` inside `node`'s namespace.
    pub fn command(&self, node: &str, program: impl AsRef<std::ffi::OsStr>) -> Result<Command, TestbedError> {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.ns(node)?]).arg(program);
        Ok(c)
    }

    /// Runs `f` on a thread inside `node`'s namespace (sockets it opens stay there).
    pub fn in_node<T: Send>(
        &self,
        node: &str,
        f: impl FnOnce() -> std::io::Result<T> + Send,
    ) -> Result<T, TestbedError> {
        Ok(netns::in_netns(&self.ns(node)?, f)?)
    }

    /// Point-to-point link `link` (scenario order) starts following `trace` now, both ways:
    /// a bench starts a mobility trace at the moment a transfer starts. The trace is checked
    /// here; the emulator applies it within microseconds.
    pub fn play_trace(&self, link: usize, trace: cohort_medium::trace::Trace) -> Result<(), TestbedError> {
        let Emu::Thread { ctl, .. } = &self.emu else { return Err(TestbedError::TraceNeedsThread) };
        if self.scenario.mode != crate::scenario::Mode::P2p {
            return Err(crate::fabric::TraceRefused::NotP2p.into());
        }
        if link >= self.scenario.links.len() {
            return Err(crate::fabric::TraceRefused::NoLink(link, self.scenario.links.len()).into());
        }
        crate::fabric::check_trace(&trace)?;
        ctl.play(link, trace);
        Ok(())
    }

    /// The emulator's status: taken now from an emulator thread (waiting at most 1 s), the
    /// latest `status.json` of an emulator process.
    pub fn status(&self) -> Option<EmuStatus> {
        match &self.emu {
            Emu::Thread { ctl, handle } => {
                let last = self.status.lock().expect("status lock").as_ref().map(|s| s.uptime_s);
                ctl.want_status.store(true, Ordering::Relaxed);
                for _ in 0..200 {
                    let st = self.status.lock().expect("status lock").clone();
                    if st.as_ref().map(|s| s.uptime_s) != last || handle.as_ref().is_none_or(|h| h.is_finished()) {
                        return st;
                    }
                    std::thread::sleep(Duration::from_millis(5));
                }
                self.status.lock().expect("status lock").clone()
            }
            _ => read_status(&self.run).ok(),
        }
    }

    /// Leaves the run's namespaces and files in place when this value is dropped (the CLI's
    /// `up`, whose emulator is a process of its own). An emulator thread cannot outlive this
    /// process and is stopped.
    pub fn detach(mut self) {
        self.stop_thread();
        self.run.clear();
    }

    fn stop_thread(&mut self) {
        if let Emu::Thread { ctl, handle } = &mut self.emu {
            ctl.stop.store(true, Ordering::Relaxed);
            if let Some(h) = handle.take() {
                let _ = h.join();
            }
        }
        self.emu = Emu::None;
    }

    /// Stops the emulator and removes the run.
    pub fn down(mut self) -> Result<(), TestbedError> {
        self.teardown()
    }

    fn teardown(&mut self) -> Result<(), TestbedError> {
        if self.run.is_empty() {
            return Ok(());
        }
        self.stop_thread();
        let run = std::mem::take(&mut self.run);
        down(&run)
    }
}

impl Drop for Testbed {
    fn drop(&mut self) {
        if let Err(e) = self.teardown() {
            tracing::warn!("tearing the testbed down: {e}");
        }
    }
}

/// Reads run `run`'s `status.json`.
pub fn read_status(run: &str) -> Result<EmuStatus, TestbedError> {
    let p = state_dir(run).join("status.json");
    let text = std::fs::read(&p).map_err(io_err("reading", &p))?;
    serde_json::from_slice(&text).map_err(|e| TestbedError::Io {
        what: "parsing",
        path: p.display().to_string(),
        source: e.into(),
    })
}

/// The runs that are up (by their emulator namespace or their state directory).
pub fn runs() -> Result<Vec<String>, TestbedError> {
    let mut out: Vec<String> = netns::list()?
        .into_iter()
        .filter_map(|n| n.strip_prefix(NS_PREFIX).and_then(|r| r.strip_suffix("-emu")).map(str::to_string))
        .collect();
    if let Ok(rd) = std::fs::read_dir(STATE_ROOT) {
        out.extend(rd.filter_map(|e| e.ok()).map(|e| e.file_name().to_string_lossy().into_owned()));
    }
    out.sort();
    out.dedup();
    Ok(out)
}

/// The one run that is up, or the named one.
pub fn pick_run(run: Option<&str>) -> Result<String, TestbedError> {
    let up = runs()?;
    match run {
        Some(r) if up.iter().any(|u| u == r) => Ok(r.to_string()),
        Some(r) => Err(TestbedError::NotUp(r.to_string())),
        None => match up.as_slice() {
            [one] => Ok(one.clone()),
            [] => Err(TestbedError::NotUp("(any)".into())),
            many => Err(TestbedError::Ambiguous(many.join(", "))),
        },
    }
}

/// Stops run `run`'s emulator process (if any) and deletes its namespaces and files.
pub fn down(run: &str) -> Result<(), TestbedError> {
    netns::require_root()?;
    let dir = state_dir(run);
    stop_emulator_process(run);
    let prefix = format!("{NS_PREFIX}{run}-");
    let mut first_err = None;
    for ns in netns::list()? {
        if ns.starts_with(&prefix)
            && belongs_to(run, &ns)
            && let Err(e) = netns::delete(&ns)
        {
            first_err.get_or_insert(e);
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    first_err.map_or(Ok(()), |e| Err(e.into()))
}

/// Whether namespace `ns` is run `run`'s (and not run `run-x`'s, whose names share the prefix).
fn belongs_to(run: &str, ns: &str) -> bool {
    let Ok(s) = std::fs::read_to_string(state_dir(run).join("scenario.json")) else {
        // No record: only a crashed run; take what matches, except other recorded runs.
        let rest = &ns[NS_PREFIX.len()..];
        return !runs_with_state().iter().any(|r| r != run && rest.starts_with(&format!("{r}-")));
    };
    match TestbedScenario::from_json(&s) {
        Ok(sc) => ns == emu_ns(run) || sc.nodes.iter().any(|n| ns == node_ns(run, n)),
        Err(_) => true,
    }
}

fn runs_with_state() -> Vec<String> {
    std::fs::read_dir(STATE_ROOT)
        .map(|rd| rd.filter_map(|e| e.ok()).map(|e| e.file_name().to_string_lossy().into_owned()).collect())
        .unwrap_or_default()
}

/// Stops the emulator process recorded for run `run`, if there is one.
fn stop_emulator_process(run: &str) {
    let pid = std::fs::read_to_string(state_dir(run).join("emulator.pid"));
    if let Some(pid) = pid.ok().and_then(|p| p.trim().parse::<i32>().ok()) {
        stop_process(pid);
    }
}

fn stop_process(pid: i32) {
    // SAFETY: signals only; a stale pid that no longer exists gives ESRCH.
    unsafe {
        if libc::kill(pid, libc::SIGTERM) != 0 {
            return;
        }
        for _ in 0..200 {
            if libc::kill(pid, 0) != 0 {
                return;
            }
            let mut st = 0;
            libc::waitpid(pid, &mut st, libc::WNOHANG);
            std::thread::sleep(Duration::from_millis(10));
        }
        libc::kill(pid, libc::SIGKILL);
    }
}

/// Removes every run, including what crashed runs left behind: emulator processes, every
/// `cht-*` namespace, the state directories. Returns the runs removed.
pub fn down_all() -> Result<Vec<String>, TestbedError> {
    netns::require_root()?;
    let runs = runs()?;
    for r in &runs {
        stop_emulator_process(r);
    }
    let mut first_err = None;
    for ns in netns::list()?.into_iter().filter(|n| n.starts_with(NS_PREFIX)) {
        if let Err(e) = netns::delete(&ns) {
            first_err.get_or_insert(e);
        }
    }
    let _ = std::fs::remove_dir_all(STATE_ROOT);
    first_err.map_or(Ok(runs), |e| Err(e.into()))
}

/// What `cohort testbed emulate --run RUN` does: opens the run's sockets, runs the emulator
/// until SIGTERM or SIGINT, writing `status.json` as it goes.
pub fn emulate(run: &str, mut opts: EmuOptions) -> Result<(), TestbedError> {
    opts.card_file.get_or_insert_with(|| card_file(run));
    static CTL: Control = Control {
        stop: AtomicBool::new(false),
        want_status: AtomicBool::new(false),
        traces: Mutex::new(Vec::new()),
        traces_waiting: AtomicBool::new(false),
    };
    extern "C" fn on_signal(_: libc::c_int) {
        CTL.stop.store(true, Ordering::Relaxed);
    }
    let dir = state_dir(run);
    let path = dir.join("scenario.json");
    let text = std::fs::read_to_string(&path).map_err(io_err("reading", &path))?;
    let scenario = TestbedScenario::from_json(&text)?;
    let atts = attachments(&scenario);
    let sockets = open_sockets(run, &atts)?;
    let fabric = Fabric::new(&scenario)?;
    let mut emu = Emulator::new(fabric, sockets, opts).map_err(TestbedError::Emulator)?;
    // SAFETY: the handler only stores to an atomic.
    unsafe {
        libc::signal(libc::SIGTERM, on_signal as *const () as libc::sighandler_t);
        libc::signal(libc::SIGINT, on_signal as *const () as libc::sighandler_t);
    }
    let run_name = run.to_string();
    emu.run(&CTL, |st| {
        if let Err(e) = write_status(&run_name, st) {
            tracing::warn!("writing status: {e}");
        }
    })
    .map_err(TestbedError::Emulator)?;
    let st = emu.status();
    let _ = write_status(run, &st);
    Ok(())
}
