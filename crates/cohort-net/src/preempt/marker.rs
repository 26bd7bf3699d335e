//! Marks chosen flows in the kernel with nftables: flows judged latency-sensitive get DSCP EF
//! (AC_VO on the air, and past the bulk gate's u32 filter), flows judged bulk get the gate's
//! bulk class as their packet priority (into its held class). Any application's packets, no
//! change to it.
//!
//! One table per network namespace, `ip cohort`, with two sets of 5-tuples and one chain at
//! the output hook, at mangle priority so the gate's classifier (after netfilter) sees the
//! result:
//!
//! ```text
//! table ip cohort {
//!   set ef   { type ipv4_addr . inet_proto . inet_service . ipv4_addr . inet_service; }
//!   set bulk { type ipv4_addr . inet_proto . inet_service . ipv4_addr . inet_service; }
//!   chain out { type filter hook output priority mangle;
//!     ip saddr . meta l4proto . th sport . ip daddr . th dport @ef ip dscp set ef
//!     ip saddr . meta l4proto . th sport . ip daddr . th dport @bulk ip length >= 81 meta priority set 1:20 } }
//! ```
//!
//! Only data-carrying packets of a bulk flow get the mark (`BULK_DATA_MIN_BYTES`): its
//! acknowledgements pass, so an upload another robot sends under the token is never stalled by
//! this robot's gate.
//!
//! Changes go through the `nft` program (nftables ≥ 0.9; the netlink protocol of nf_tables is
//! large and nft is its reference client); a change is one set element, made once per flow
//! when its verdict changes, never on a packet's path. The table is removed on drop.

use cohort_proto::preempt::agent::{BULK_DATA_MIN_BYTES, FlowKey, Marking, PROTO_TCP};
use std::collections::HashMap;
use std::io::Write;
use std::process::{Command, Stdio};

const TABLE: &str = "cohort";

/// Why marking failed.
#[derive(Debug, thiserror::Error)]
pub enum MarkerError {
    #[error("nft (nftables) could not be started: {0}; install the nftables package")]
    NoNft(std::io::Error),
    #[error("marking foreign flows needs CAP_NET_ADMIN (run as root)")]
    Privilege,
    #[error("`nft` refused {what}: {stderr}")]
    Nft { what: String, stderr: String },
}

fn nft(script: &str) -> Result<(), MarkerError> {
    let mut child = Command::new("nft")
        .args(["-f", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(MarkerError::NoNft)?;
    if let Some(mut stdin) = child.stdin.take() {
        // A failed write shows as nft's own error below.
        let _ = stdin.write_all(script.as_bytes());
    }
    let out = child.wait_with_output().map_err(MarkerError::NoNft)?;
    if out.status.success() {
        return Ok(());
    }
    let stderr = String::from_utf8_lossy(&out.stderr).trim().to_string();
    if stderr.contains("Operation not permitted") {
        return Err(MarkerError::Privilege);
    }
    Err(MarkerError::Nft { what: script.lines().next().unwrap_or_default().to_string(), stderr })
}

/// The nft element of a flow.
fn element(k: &FlowKey) -> String {
    let proto = if k.proto == PROTO_TCP { "tcp" } else { "udp" };
    format!("{} . {proto} . {} . {} . {}", k.src.ip(), k.src.port(), k.dst.ip(), k.dst.port())
}

/// The nftables table of this network namespace's marks; removed when dropped.
#[derive(Debug)]
pub struct Marker {
    flows: HashMap<FlowKey, Marking>,
    changes: u64,
}

impl Marker {
    /// Installs the table (replacing one a crashed agent left); bulk packets get the priority
    /// `bulk_class` (an HTB class id, `major << 16 | minor`).
    pub fn install(bulk_class: u32) -> Result<Self, MarkerError> {
        let class = format!("{:x}:{:x}", bulk_class >> 16, bulk_class & 0xffff);
        let tuple = "ipv4_addr . inet_proto . inet_service . ipv4_addr . inet_service";
        let key = "ip saddr . meta l4proto . th sport . ip daddr . th dport";
        nft(&format!(
            "table ip {TABLE} {{}}\ndelete table ip {TABLE}\ntable ip {TABLE} {{\n\
             set ef {{ type {tuple}; }}\nset bulk {{ type {tuple}; }}\n\
             chain out {{ type filter hook output priority mangle; policy accept;\n\
             {key} @ef ip dscp set ef\n{key} @bulk ip length >= {BULK_DATA_MIN_BYTES} meta priority set {class}\n}}\n}}\n"
        ))?;
        Ok(Marker { flows: HashMap::new(), changes: 0 })
    }

    /// Treats `key`'s packets as `m` from now on.
    pub fn set(&mut self, key: FlowKey, m: Marking) -> Result<(), MarkerError> {
        let old = self.flows.get(&key).copied().unwrap_or(Marking::Untouched);
        if old == m {
            return Ok(());
        }
        let set = |m| match m {
            Marking::Ef => Some("ef"),
            Marking::Bulk => Some("bulk"),
            Marking::Untouched => None,
        };
        let e = element(&key);
        let mut script = String::new();
        if let Some(s) = set(old) {
            script += &format!("delete element ip {TABLE} {s} {{ {e} }}\n");
        }
        if let Some(s) = set(m) {
            script += &format!("add element ip {TABLE} {s} {{ {e} }}\n");
        }
        nft(&script)?;
        self.changes += 1;
        if m == Marking::Untouched {
            self.flows.remove(&key);
        } else {
            self.flows.insert(key, m);
        }
        Ok(())
    }

    /// Set changes made so far.
    pub fn changes(&self) -> u64 {
        self.changes
    }
}

impl Drop for Marker {
    fn drop(&mut self) {
        if let Err(e) = nft(&format!("delete table ip {TABLE}\n")) {
            tracing::warn!(%e, "marker: could not remove the nftables table");
        }
    }
}
