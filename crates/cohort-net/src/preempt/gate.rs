//! The bulk gate: holds and releases a robot's bulk traffic in the kernel, whatever
//! application sends it (a plain TCP upload, rsync, a ROS 2 bag upload), with no change to the
//! application and no kernel patch.
//!
//! Seed 000's virtual-preemption layer stops passing bandwidth-hungry (BH) data to the card
//! before a latency-sensitive (LS) message is due, so that the card's buffer is empty when it
//! arrives (§IV-C, Algorithm 2). Cohort's own bulk obeys that layer directly; foreign bulk is
//! held here, on the egress queue of the robot's interface:
//!
//! ```text
//! root  1:  HTB, default class 1:20 (1:30 when bulk is chosen per packet)
//!   ├── 1:10  latency-sensitive: DSCP EF, CS6, CS7 (u32 filters), rate = link rate, prio 0
//!   ├── 1:20  bulk: everything else, or only packets whose priority names 1:20, prio 1
//!   │     └── 20:  TBF: open (rate far above the link) or held (1 byte/s)
//!   └── 1:30  when bulk is chosen per packet: everything else, prio 1, never held
//! ```
//!
//! With [`GateConfig::bulk_by_priority`] the agent decides per flow what is bulk: nftables sets
//! the packet priority (`skb->priority`) of the data packets of flows it judged bulk to the
//! class id [`BULK_CLASSID`], and HTB puts a packet whose priority names one of its leaf classes
//! straight into it (`htb_classify`, before any filter), so a control loop still being learned
//! and the acknowledgements of someone else's upload are never held. The kick then carries that
//! priority too (`SO_PRIORITY`), or it would wake the open class instead of the held one.
//! (A u32 `match mark` filter looks like the obvious tool, but this kernel is built without
//! `CONFIG_CLS_U32_MARK`: tc accepts the filter and the kernel installs it with no key, so it
//! matches every packet. Measured on the testbed, where it held every acknowledgement.)
//!
//! Shaping egress to the link rate moves the bulk backlog from the card into the host, where
//! it can be held; the LS class passes it. The classes' buckets hold two MTUs, so the shaper
//! paces frames out one by one as a card would pull them, instead of in bursts of milliseconds. Holding changes the TBF's rate over rtnetlink
//! ([`super::netlink`]; one request and its acknowledgement, no process started), so the
//! decision takes effect within one netlink round trip; at most one burst (one MTU) of bulk
//! leaves after it, because the kernel refills the bucket on every change. Releasing changes it
//! back and sends one *kick*: a minimal Ethernet frame of the IEEE local-experimental type
//! 0x88B5 into the bulk class, because HTB deactivates a class whose queue refused to dequeue
//! and re-activates it only on the next enqueue; without it a held TCP upload, whose packets all
//! wait in the queue, would stay stalled until its retransmission timer fires (measured here:
//! 350 ms and more). Receivers drop the kick (no protocol has that type).
//!
//! Measured alternatives on this kernel (6.18, no `sch_plug`, no tc actions): changing the HTB
//! class's own rate holds as fast but leaves the class up to `mbuffer` (60 s) in token debt when
//! released; dropping with a filter makes TCP collapse its window. IPv4 only for now: IPv6 LS
//! traffic is treated as bulk.

use super::netlink::{QueueStats, Rtnl, Tbf};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::process::Command;
use std::time::{Duration, Instant};

/// The TBF's handle and its parent class.
const TBF_HANDLE: u32 = 0x0020_0000;
const BULK_CLASS: u32 = 0x0001_0020;
/// The bulk class's id as a packet priority: `skb->priority` of packets that go to it.
pub const BULK_CLASSID: u32 = BULK_CLASS;
/// IEEE 802 local experimental Ethertype 1: the kick's type.
const KICK_ETHERTYPE: u16 = 0x88B5;

/// How to install a gate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GateConfig {
    /// The robot's interface toward the team (its Wi-Fi interface).
    pub dev: String,
    /// The link's rate: egress is shaped to it, so the backlog waits in the host.
    pub link_rate_bps: u64,
    /// Bulk bytes the host queue holds; beyond, the kernel drops and TCP backs off.
    pub bulk_queue_bytes: u32,
    /// DSCP code points that pass the gate (latency-sensitive): EF, CS6 and CS7 by default,
    /// the code points Linux maps to AC_VO.
    pub bypass_dscp: Vec<u8>,
    /// If set, only packets whose priority (`skb->priority`) is [`BULK_CLASSID`] are bulk;
    /// others pass in class 1:30.
    pub bulk_by_priority: bool,
}

impl GateConfig {
    pub fn new(dev: impl Into<String>, link_rate_bps: u64) -> Self {
        GateConfig {
            dev: dev.into(),
            link_rate_bps,
            bulk_queue_bytes: 4 << 20,
            bypass_dscp: vec![46, 48, 56],
            bulk_by_priority: false,
        }
    }

    fn open(&self) -> Tbf {
        // Far above the link (the HTB class above shapes), and a bucket above a 64 KiB GSO
        // segment so the TBF never splits one.
        Tbf {
            rate_bytes_per_s: (self.link_rate_bps / 8).saturating_mul(10).max(1),
            burst_bytes: 256 << 10,
            limit_bytes: self.bulk_queue_bytes,
        }
    }

    fn held(&self) -> Tbf {
        Tbf { rate_bytes_per_s: 1, burst_bytes: 1514, limit_bytes: self.bulk_queue_bytes }
    }
}

/// Why a gate could not be installed or moved.
#[derive(Debug, thiserror::Error)]
pub enum GateError {
    #[error("the bulk gate needs CAP_NET_ADMIN (run as root) to change {dev}'s queueing")]
    Privilege { dev: String },
    #[error("no interface named {0}")]
    NoDevice(String),
    #[error("invalid gate configuration: {0}")]
    Config(String),
    #[error("`{cmd}` failed: {stderr}")]
    Tc { cmd: String, stderr: String },
    #[error("tc (iproute2) could not be started: {0}")]
    NoTc(io::Error),
    #[error("netlink: {0}")]
    Netlink(io::Error),
    #[error("kick: {0}")]
    Kick(io::Error),
}

/// Counters of a gate.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GateStats {
    pub holds: u64,
    pub releases: u64,
    /// Netlink round trip of the last hold or release.
    pub last_change: Duration,
    /// The longest netlink round trip so far.
    pub max_change: Duration,
}

/// A bulk gate installed on one interface of this network namespace; removed (the interface's
/// default queueing restored) when dropped.
#[derive(Debug)]
pub struct BulkGate {
    cfg: GateConfig,
    ifindex: i32,
    rtnl: Rtnl,
    kick: OwnedFd,
    held: bool,
    stats: GateStats,
}

fn tc(args: &[String]) -> Result<(), GateError> {
    let out = Command::new("tc").args(args).output().map_err(GateError::NoTc)?;
    if out.status.success() {
        return Ok(());
    }
    let stderr = String::from_utf8_lossy(&out.stderr).trim().to_string();
    Err(GateError::Tc { cmd: format!("tc {}", args.join(" ")), stderr })
}

fn ifindex(dev: &str) -> Result<i32, GateError> {
    let name = std::ffi::CString::new(dev).map_err(|_| GateError::NoDevice(dev.into()))?;
    // SAFETY: a NUL-terminated name we own.
    let i = unsafe { libc::if_nametoindex(name.as_ptr()) };
    if i == 0 { Err(GateError::NoDevice(dev.into())) } else { Ok(i as i32) }
}

/// An AF_PACKET socket for kicks on `ifindex`.
fn kick_socket() -> io::Result<OwnedFd> {
    // SAFETY: plain socket(2); the descriptor is owned from here on.
    let fd = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a fresh descriptor nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Gives every frame of `fd` the priority `prio` (`SO_PRIORITY`; above 6 needs
/// `CAP_NET_ADMIN`).
fn set_priority(fd: &OwnedFd, prio: u32) -> io::Result<()> {
    // SAFETY: setting an integer option on a socket we own.
    let r = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PRIORITY,
            (&raw const prio).cast(),
            std::mem::size_of::<u32>() as u32,
        )
    };
    if r < 0 { Err(io::Error::last_os_error()) } else { Ok(()) }
}

impl BulkGate {
    /// Installs the gate on `cfg.dev`, open. Replaces the interface's root queueing
    /// discipline (restored to the kernel's default on drop).
    pub fn install(cfg: GateConfig) -> Result<Self, GateError> {
        if cfg.link_rate_bps < 8_000 {
            return Err(GateError::Config(format!("link rate {} bit/s is below 8 kbit/s", cfg.link_rate_bps)));
        }
        if let Some(d) = cfg.bypass_dscp.iter().find(|&&d| d > 63) {
            return Err(GateError::Config(format!("dscp {d} exceeds 63")));
        }
        let ifindex = ifindex(&cfg.dev)?;
        let dev = cfg.dev.clone();
        let rate = format!("{}bit", cfg.link_rate_bps);
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        let privilege = |e: GateError| match e {
            GateError::Tc { ref stderr, .. } if stderr.contains("not permitted") => {
                GateError::Privilege { dev: dev.clone() }
            }
            e => e,
        };
        let default = if cfg.bulk_by_priority { "30" } else { "20" };
        tc(&s(&["qdisc", "replace", "dev", &dev, "root", "handle", "1:", "htb", "default", default]))
            .map_err(privilege)?;
        let gate =
            |rtnl, kick| BulkGate { cfg: cfg.clone(), ifindex, rtnl, kick, held: false, stats: GateStats::default() };
        let mut installed = gate(Rtnl::open().map_err(GateError::Netlink)?, kick_socket().map_err(GateError::Kick)?);
        let classes: &[(&str, &str)] = if cfg.bulk_by_priority {
            &[("1:10", "0"), ("1:20", "1"), ("1:30", "1")]
        } else {
            &[("1:10", "0"), ("1:20", "1")]
        };
        for &(class, prio) in classes {
            tc(&s(&[
                "class", "replace", "dev", &dev, "parent", "1:", "classid", class, "htb", "rate", &rate, "ceil", &rate,
                "prio", prio, "quantum", "1514", "burst", "3028", "cburst", "3028",
            ]))?;
        }
        let open = cfg.open();
        tc(&s(&[
            "qdisc",
            "replace",
            "dev",
            &dev,
            "parent",
            "1:20",
            "handle",
            "20:",
            "tbf",
            "rate",
            &format!("{}bit", open.rate_bytes_per_s * 8),
            "burst",
            &open.burst_bytes.to_string(),
            "limit",
            &open.limit_bytes.to_string(),
        ]))?;
        for d in &cfg.bypass_dscp {
            tc(&s(&[
                "filter",
                "add",
                "dev",
                &dev,
                "parent",
                "1:",
                "protocol",
                "ip",
                "prio",
                "1",
                "u32",
                "match",
                "ip",
                "tos",
                &format!("{:#04x}", d << 2),
                "0xfc",
                "flowid",
                "1:10",
            ]))?;
        }
        if cfg.bulk_by_priority {
            set_priority(&installed.kick, BULK_CLASSID).map_err(GateError::Kick)?;
        }
        // Make sure the fast path works before anyone relies on it.
        installed.change(open)?;
        Ok(installed)
    }

    fn change(&mut self, tbf: Tbf) -> Result<Duration, GateError> {
        let t0 = Instant::now();
        self.rtnl.change_tbf(self.ifindex, TBF_HANDLE, BULK_CLASS, tbf).map_err(GateError::Netlink)?;
        let d = t0.elapsed();
        self.stats.last_change = d;
        self.stats.max_change = self.stats.max_change.max(d);
        Ok(d)
    }

    /// Stops bulk from leaving (at most one more MTU does); returns the netlink round trip.
    pub fn hold(&mut self) -> Result<Duration, GateError> {
        let d = self.change(self.cfg.held())?;
        self.held = true;
        self.stats.holds += 1;
        Ok(d)
    }

    /// Lets bulk leave again at the link rate; returns the netlink round trip.
    pub fn release(&mut self) -> Result<Duration, GateError> {
        let d = self.change(self.cfg.open())?;
        self.held = false;
        self.stats.releases += 1;
        self.kick().map_err(GateError::Kick)?;
        Ok(d)
    }

    /// One minimal broadcast frame of the experimental type into the bulk class.
    fn kick(&self) -> io::Result<()> {
        let mut frame = [0u8; 60];
        frame[..6].fill(0xff);
        frame[12..14].copy_from_slice(&KICK_ETHERTYPE.to_be_bytes());
        // SAFETY: sockaddr_ll is plain data; zeroed is a valid value.
        let mut to: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        to.sll_family = libc::AF_PACKET as u16;
        to.sll_protocol = KICK_ETHERTYPE.to_be();
        to.sll_ifindex = self.ifindex;
        to.sll_halen = 6;
        to.sll_addr[..6].fill(0xff);
        // SAFETY: sending a buffer we own to an address of the right size.
        let n = unsafe {
            libc::sendto(
                self.kick.as_raw_fd(),
                frame.as_ptr().cast(),
                frame.len(),
                0,
                (&raw const to).cast(),
                std::mem::size_of::<libc::sockaddr_ll>() as u32,
            )
        };
        if n < 0 { Err(io::Error::last_os_error()) } else { Ok(()) }
    }

    pub fn is_held(&self) -> bool {
        self.held
    }

    /// Bulk packets and bytes waiting in the gate now.
    pub fn backlog(&mut self) -> Result<QueueStats, GateError> {
        let q = self.rtnl.queue_stats(self.ifindex, TBF_HANDLE).map_err(GateError::Netlink)?;
        q.ok_or_else(|| GateError::Netlink(io::Error::new(io::ErrorKind::NotFound, "the gate's TBF is gone")))
    }

    pub fn stats(&self) -> GateStats {
        self.stats
    }

    pub fn config(&self) -> &GateConfig {
        &self.cfg
    }
}

impl Drop for BulkGate {
    fn drop(&mut self) {
        let args = ["qdisc", "del", "dev", &self.cfg.dev, "root"].map(str::to_string);
        if let Err(e) = tc(&args) {
            tracing::warn!(%e, dev = %self.cfg.dev, "bulk gate: could not remove the queueing discipline");
        }
    }
}
