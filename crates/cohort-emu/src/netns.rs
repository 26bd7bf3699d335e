//! Network namespaces, veth pairs and interface settings.
//!
//! Namespaces and links are made with iproute2's `ip` (what an operator would type, and the
//! tool that keeps `/run/netns` consistent); what `ip` cannot do is done here: running code
//! inside a namespace ([`in_netns`]: a short-lived thread `setns`es into it, so sockets it opens
//! stay in that namespace), and switching off the veth offloads ([`disable_offloads`]) with the
//! `SIOCETHTOOL` ioctl, because a frame captured with a pending checksum or as a 64 KiB TSO
//! segment cannot be carried across an emulated link as is.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::process::Command;

/// Where iproute2 keeps named namespaces.
pub const NETNS_DIR: &str = "/run/netns";

/// Why a namespace operation failed.
#[derive(Debug, thiserror::Error)]
pub enum NetnsError {
    #[error(
        "the testbed needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN) to create network namespaces and veth pairs; \
         run it with sudo"
    )]
    NotRoot,
    #[error("`ip` (iproute2) could not be started: {0}")]
    NoIp(io::Error),
    #[error("`{cmd}` failed: {stderr}")]
    Ip { cmd: String, stderr: String },
    #[error("namespace {ns}: {source}")]
    Enter { ns: String, source: io::Error },
    #[error("interface {ifname}: {what}: {source}")]
    Interface { ifname: String, what: &'static str, source: io::Error },
}

/// Whether this process may manage namespaces.
pub fn require_root() -> Result<(), NetnsError> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 { Ok(()) } else { Err(NetnsError::NotRoot) }
}

/// Runs `ip ARGS...`; a non-zero exit is an error carrying `ip`'s message.
pub fn ip(args: &[&str]) -> Result<String, NetnsError> {
    let out = Command::new("ip").args(args).output().map_err(NetnsError::NoIp)?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(NetnsError::Ip {
            cmd: format!("ip {}", args.join(" ")),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        })
    }
}

/// Named namespaces that exist now.
pub fn list() -> Result<Vec<String>, NetnsError> {
    // `ip netns list` prints "name (id: N)" for namespaces with an id.
    Ok(ip(&["netns", "list"])?.lines().filter_map(|l| l.split_whitespace().next().map(str::to_string)).collect())
}

pub fn exists(ns: &str) -> bool {
    std::path::Path::new(NETNS_DIR).join(ns).exists()
}

pub fn add(ns: &str) -> Result<(), NetnsError> {
    ip(&["netns", "add", ns])?;
    ip(&["-n", ns, "link", "set", "lo", "up"])?;
    Ok(())
}

/// Kills every process still inside `ns`, then deletes it (which deletes its interfaces).
pub fn delete(ns: &str) -> Result<(), NetnsError> {
    if let Ok(pids) = ip(&["netns", "pids", ns]) {
        for pid in pids.split_whitespace().filter_map(|p| p.parse::<i32>().ok()) {
            // SAFETY: sending a signal has no memory-safety preconditions.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
    }
    ip(&["netns", "del", ns]).map(|_| ())
}

/// One veth pair: `outer` in namespace `outer_ns`, `inner` in `inner_ns`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VethPair<'a> {
    pub outer_ns: &'a str,
    pub outer: &'a str,
    pub inner_ns: &'a str,
    pub inner: &'a str,
    pub inner_mac: &'a str,
    /// Address with prefix, e.g. `10.77.0.1/24`.
    pub inner_addr: &'a str,
}

/// Creates the pair, names and addresses the inner end, disables IPv6 autoconfiguration
/// (no router solicitations or DAD frames on emulated links) and the offloads on both ends,
/// and brings both up.
pub fn add_veth(v: &VethPair<'_>) -> Result<(), NetnsError> {
    ip(&["-n", v.outer_ns, "link", "add", v.outer, "type", "veth", "peer", "name", v.inner, "netns", v.inner_ns])?;
    ip(&["-n", v.inner_ns, "link", "set", v.inner, "address", v.inner_mac, "addrgenmode", "none"])?;
    ip(&["-n", v.outer_ns, "link", "set", v.outer, "addrgenmode", "none"])?;
    ip(&["-n", v.inner_ns, "addr", "add", v.inner_addr, "brd", "+", "dev", v.inner])?;
    disable_offloads(v.inner_ns, v.inner)?;
    disable_offloads(v.outer_ns, v.outer)?;
    ip(&["-n", v.outer_ns, "link", "set", v.outer, "up"])?;
    ip(&["-n", v.inner_ns, "link", "set", v.inner, "up"])?;
    Ok(())
}

/// Runs `f` on a thread that has entered namespace `ns`. File descriptors it creates
/// (sockets) stay bound to `ns` after it returns.
pub fn in_netns<T: Send>(ns: &str, f: impl FnOnce() -> io::Result<T> + Send) -> Result<T, NetnsError> {
    let path = std::path::Path::new(NETNS_DIR).join(ns);
    let enter_err = |source| NetnsError::Enter { ns: ns.to_string(), source };
    let file = std::fs::File::open(&path).map_err(enter_err)?;
    std::thread::scope(|s| {
        s.spawn(|| {
            // SAFETY: setns on a namespace file we hold open; it changes this thread only,
            // and the thread ends when `f` returns.
            if unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
                return Err(io::Error::last_os_error());
            }
            f()
        })
        .join()
        .unwrap_or_else(|_| Err(io::Error::other("thread panicked")))
    })
    .map_err(enter_err)
}

// ethtool's legacy feature commands (linux/ethtool.h).
const SIOCETHTOOL: libc::c_ulong = 0x8946;
const ETHTOOL_STXCSUM: u32 = 0x17;
const ETHTOOL_SSG: u32 = 0x19;
const ETHTOOL_STSO: u32 = 0x1f;
const ETHTOOL_SGSO: u32 = 0x24;
const ETHTOOL_SGRO: u32 = 0x2c;

#[repr(C)]
struct EthtoolValue {
    cmd: u32,
    data: u32,
}

#[repr(C)]
struct IfReqData {
    name: [libc::c_char; libc::IFNAMSIZ],
    data: *mut libc::c_void,
    _pad: [u8; 16],
}

/// Turns off TX checksum offload, scatter-gather, TSO, GSO and GRO on `ifname` in `ns`, so
/// every frame crossing the emulator is a complete, checksummed, MTU-sized frame.
pub fn disable_offloads(ns: &str, ifname: &str) -> Result<(), NetnsError> {
    let name = ifname.to_string();
    in_netns(ns, move || {
        // SAFETY: a plain socket for the ioctl; checked and owned below.
        let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: fd is a fresh descriptor.
        let sock = unsafe { OwnedFd::from_raw_fd(fd) };
        for cmd in [ETHTOOL_SGRO, ETHTOOL_SGSO, ETHTOOL_STSO, ETHTOOL_SSG, ETHTOOL_STXCSUM] {
            let mut v = EthtoolValue { cmd, data: 0 };
            let mut req =
                IfReqData { name: ifname_bytes(&name)?, data: (&mut v as *mut EthtoolValue).cast(), _pad: [0; 16] };
            // SAFETY: SIOCETHTOOL with an ifreq whose data points at a live ethtool_value.
            if unsafe { libc::ioctl(sock.as_raw_fd(), SIOCETHTOOL, &mut req) } != 0 {
                let e = io::Error::last_os_error();
                // A device without the feature cannot have it on.
                if e.raw_os_error() != Some(libc::EOPNOTSUPP) {
                    return Err(e);
                }
            }
        }
        Ok(())
    })
    .map_err(|e| match e {
        NetnsError::Enter { source, .. } => {
            NetnsError::Interface { ifname: ifname.to_string(), what: "disabling offloads", source }
        }
        e => e,
    })
}

fn ifname_bytes(name: &str) -> io::Result<[libc::c_char; libc::IFNAMSIZ]> {
    let c = CString::new(name).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    let b = c.as_bytes_with_nul();
    if b.len() > libc::IFNAMSIZ {
        return Err(io::Error::from(io::ErrorKind::InvalidInput));
    }
    let mut out = [0 as libc::c_char; libc::IFNAMSIZ];
    for (o, &x) in out.iter_mut().zip(b) {
        *o = x as libc::c_char;
    }
    Ok(out)
}

/// The interface index of `ifname` in the calling thread's namespace.
pub fn ifindex(ifname: &str) -> io::Result<u32> {
    let c = CString::new(ifname).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: a valid NUL-terminated name.
    let i = unsafe { libc::if_nametoindex(c.as_ptr()) };
    if i == 0 { Err(io::Error::last_os_error()) } else { Ok(i) }
}
