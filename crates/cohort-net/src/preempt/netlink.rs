//! The rtnetlink requests of the bulk gate: on its fast path, change a TBF qdisc's rate and
//! burst (`RTM_NEWQDISC` without `NLM_F_CREATE`, as `tc qdisc change` sends it) and read the
//! kernel's acknowledgement; and read how many packets a qdisc holds (`RTM_GETQDISC` dump,
//! `TCA_STATS2`/`TCA_STATS_QUEUE`, as `tc -s qdisc show` reads it).
//!
//! Written by hand because it is one fixed message: the layouts are `linux/netlink.h`
//! (`nlmsghdr`), `linux/rtnetlink.h` (`tcmsg`, `rtattr`) and `linux/pkt_sched.h`
//! (`tc_ratespec`, `tc_tbf_qopt`, `TCA_TBF_*`). Since Linux 3.13 `tbf_change` takes the burst
//! in bytes (`TCA_TBF_BURST`) and computes the bucket itself, and needs no rate table when the
//! rate spec names its link layer; it refills the bucket on every change, which is what makes a
//! release take effect at once.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

const RTM_NEWQDISC: u16 = 36;
const RTM_GETQDISC: u16 = 38;
const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
const NLM_F_REQUEST: u16 = 1;
const NLM_F_ACK: u16 = 4;
const NLM_F_DUMP: u16 = 0x300;
const TCA_STATS2: u16 = 7;
const TCA_STATS_QUEUE: u16 = 3;
const TCA_KIND: u16 = 1;
const TCA_OPTIONS: u16 = 2;
const TCA_TBF_PARMS: u16 = 1;
const TCA_TBF_RATE64: u16 = 4;
const TCA_TBF_BURST: u16 = 6;
const NLA_F_NESTED: u16 = 1 << 15;
const TC_LINKLAYER_ETHERNET: u8 = 1;

/// A TBF's settings: rate in bytes per second, bucket in bytes, queue limit in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tbf {
    pub rate_bytes_per_s: u64,
    pub burst_bytes: u32,
    pub limit_bytes: u32,
}

fn attr(buf: &mut Vec<u8>, ty: u16, payload: &[u8]) {
    let len = 4 + payload.len();
    buf.extend_from_slice(&(len as u16).to_ne_bytes());
    buf.extend_from_slice(&ty.to_ne_bytes());
    buf.extend_from_slice(payload);
    buf.resize(buf.len().next_multiple_of(4), 0);
}

/// The `RTM_NEWQDISC` request changing TBF `handle` under `parent` on `ifindex` to `tbf`.
pub fn tbf_change(seq: u32, ifindex: i32, handle: u32, parent: u32, tbf: Tbf) -> Vec<u8> {
    let mut m = vec![0u8; 16];
    // struct tcmsg: family, pad, pad, ifindex, handle, parent, info.
    m.extend_from_slice(&[0, 0, 0, 0]);
    m.extend_from_slice(&ifindex.to_ne_bytes());
    m.extend_from_slice(&handle.to_ne_bytes());
    m.extend_from_slice(&parent.to_ne_bytes());
    m.extend_from_slice(&0u32.to_ne_bytes());
    attr(&mut m, TCA_KIND, b"tbf\0");
    // struct tc_tbf_qopt: rate and peak rate (struct tc_ratespec: cell_log, linklayer,
    // overhead, cell_align, mpu, rate), limit, buffer (ignored beside TCA_TBF_BURST), mtu.
    let mut q = Vec::with_capacity(36);
    q.extend_from_slice(&[0, TC_LINKLAYER_ETHERNET, 0, 0, 0, 0, 0, 0]);
    q.extend_from_slice(&u32::try_from(tbf.rate_bytes_per_s).unwrap_or(u32::MAX).to_ne_bytes());
    q.extend_from_slice(&[0u8; 12]);
    q.extend_from_slice(&tbf.limit_bytes.to_ne_bytes());
    q.extend_from_slice(&0u32.to_ne_bytes());
    q.extend_from_slice(&0u32.to_ne_bytes());
    let mut opts = Vec::new();
    attr(&mut opts, TCA_TBF_PARMS, &q);
    if tbf.rate_bytes_per_s > u64::from(u32::MAX) {
        attr(&mut opts, TCA_TBF_RATE64, &tbf.rate_bytes_per_s.to_ne_bytes());
    }
    attr(&mut opts, TCA_TBF_BURST, &tbf.burst_bytes.to_ne_bytes());
    attr(&mut m, TCA_OPTIONS | NLA_F_NESTED, &opts);
    let len = m.len() as u32;
    m[0..4].copy_from_slice(&len.to_ne_bytes());
    m[4..6].copy_from_slice(&RTM_NEWQDISC.to_ne_bytes());
    m[6..8].copy_from_slice(&(NLM_F_REQUEST | NLM_F_ACK).to_ne_bytes());
    m[8..12].copy_from_slice(&seq.to_ne_bytes());
    m
}

/// The `RTM_GETQDISC` dump request for the qdiscs of `ifindex`.
pub fn qdisc_dump(seq: u32, ifindex: i32) -> Vec<u8> {
    let mut m = vec![0u8; 16];
    m.extend_from_slice(&[0, 0, 0, 0]);
    m.extend_from_slice(&ifindex.to_ne_bytes());
    m.extend_from_slice(&[0u8; 12]);
    let len = m.len() as u32;
    m[0..4].copy_from_slice(&len.to_ne_bytes());
    m[4..6].copy_from_slice(&RTM_GETQDISC.to_ne_bytes());
    m[6..8].copy_from_slice(&(NLM_F_REQUEST | NLM_F_DUMP).to_ne_bytes());
    m[8..12].copy_from_slice(&seq.to_ne_bytes());
    m
}

/// Packets and bytes a qdisc holds (`struct gnet_stats_queue`: qlen, backlog).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QueueStats {
    pub packets: u32,
    pub bytes: u32,
}

/// Iterates `(type, payload)` over the attributes in `buf`; stops at the first malformed one.
fn attrs(buf: &[u8]) -> impl Iterator<Item = (u16, &[u8])> {
    let mut at = 0;
    std::iter::from_fn(move || {
        let h = buf.get(at..at + 4)?;
        let len = usize::from(u16::from_ne_bytes([h[0], h[1]]));
        let ty = u16::from_ne_bytes([h[2], h[3]]) & !NLA_F_NESTED;
        let payload = buf.get(at + 4..at + len.max(4))?;
        at += len.max(4).next_multiple_of(4);
        Some((ty, payload))
    })
}

/// Reads the dump replies in `buf`: the queue of qdisc `handle` on `ifindex` if among them,
/// and whether the dump is complete (`NLMSG_DONE` seen).
pub fn parse_qdisc_dump(buf: &[u8], ifindex: i32, handle: u32) -> io::Result<(Option<QueueStats>, bool)> {
    let mut at = 0;
    let mut found = None;
    while buf.len() >= at + 16 {
        let u32_at = |i: usize| u32::from_ne_bytes([buf[i], buf[i + 1], buf[i + 2], buf[i + 3]]);
        let len = u32_at(at) as usize;
        let ty = u16::from_ne_bytes([buf[at + 4], buf[at + 5]]);
        if len < 16 || at + len > buf.len() {
            return Err(io::Error::new(io::ErrorKind::InvalidData, "malformed netlink message"));
        }
        match ty {
            NLMSG_DONE => return Ok((found, true)),
            NLMSG_ERROR if len >= 20 => {
                let errno = u32_at(at + 16) as i32;
                return Err(io::Error::from_raw_os_error(-errno));
            }
            RTM_NEWQDISC if len >= 36 => {
                let body = &buf[at + 16..at + len];
                let idx = i32::from_ne_bytes([body[4], body[5], body[6], body[7]]);
                let h = u32::from_ne_bytes([body[8], body[9], body[10], body[11]]);
                if idx == ifindex && h == handle {
                    let queue = attrs(&body[20..])
                        .filter(|&(t, _)| t == TCA_STATS2)
                        .flat_map(|(_, p)| attrs(p))
                        .find(|&(t, p)| t == TCA_STATS_QUEUE && p.len() >= 8);
                    if let Some((_, p)) = queue {
                        found = Some(QueueStats {
                            packets: u32::from_ne_bytes([p[0], p[1], p[2], p[3]]),
                            bytes: u32::from_ne_bytes([p[4], p[5], p[6], p[7]]),
                        });
                    }
                }
            }
            _ => {}
        }
        at += len.next_multiple_of(4);
    }
    Ok((found, false))
}

/// Reads the acknowledgement of request `seq` out of a received datagram: `Ok(true)` if the
/// kernel accepted it, an error with its errno if it refused, `Ok(false)` if the datagram holds
/// no acknowledgement of `seq`.
pub fn parse_ack(buf: &[u8], seq: u32) -> io::Result<bool> {
    let mut at = 0;
    while buf.len() >= at + 20 {
        let u32_at = |i: usize| u32::from_ne_bytes([buf[i], buf[i + 1], buf[i + 2], buf[i + 3]]);
        let len = u32_at(at) as usize;
        let ty = u16::from_ne_bytes([buf[at + 4], buf[at + 5]]);
        if len < 16 || at + len > buf.len() {
            return Err(io::Error::new(io::ErrorKind::InvalidData, "malformed netlink message"));
        }
        if ty == NLMSG_ERROR && u32_at(at + 8) == seq {
            let errno = u32_at(at + 16) as i32;
            return if errno == 0 { Ok(true) } else { Err(io::Error::from_raw_os_error(-errno)) };
        }
        at += len.next_multiple_of(4);
    }
    Ok(false)
}

/// A `NETLINK_ROUTE` socket of the calling thread's network namespace.
#[derive(Debug)]
pub struct Rtnl {
    fd: OwnedFd,
    seq: u32,
}

impl Rtnl {
    pub fn open() -> io::Result<Self> {
        // SAFETY: plain socket(2); the descriptor is owned from here on.
        let fd = unsafe { libc::socket(libc::AF_NETLINK, libc::SOCK_RAW | libc::SOCK_CLOEXEC, libc::NETLINK_ROUTE) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` is a fresh descriptor nothing else owns.
        Ok(Rtnl { fd: unsafe { OwnedFd::from_raw_fd(fd) }, seq: 0 })
    }

    fn send(&self, msg: &[u8]) -> io::Result<()> {
        // SAFETY: sending a buffer we own; the kernel is the default destination of a netlink
        // socket.
        let n = unsafe { libc::send(self.fd.as_raw_fd(), msg.as_ptr().cast(), msg.len(), 0) };
        if n < 0 { Err(io::Error::last_os_error()) } else { Ok(()) }
    }

    fn recv<'a>(&self, buf: &'a mut [u8]) -> io::Result<&'a [u8]> {
        loop {
            // SAFETY: receiving into a buffer we own, of the length we pass.
            let n = unsafe { libc::recv(self.fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
            if n >= 0 {
                return Ok(&buf[..n as usize]);
            }
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
    }

    /// What qdisc `handle` on `ifindex` holds now; `None` if it does not exist.
    pub fn queue_stats(&mut self, ifindex: i32, handle: u32) -> io::Result<Option<QueueStats>> {
        self.seq = self.seq.wrapping_add(1);
        self.send(&qdisc_dump(self.seq, ifindex))?;
        let mut buf = vec![0u8; 32 << 10];
        let mut found = None;
        loop {
            let (f, done) = parse_qdisc_dump(self.recv(&mut buf)?, ifindex, handle)?;
            found = found.or(f);
            if done {
                return Ok(found);
            }
        }
    }

    /// Sends `tbf_change` and waits for the kernel's acknowledgement.
    pub fn change_tbf(&mut self, ifindex: i32, handle: u32, parent: u32, tbf: Tbf) -> io::Result<()> {
        self.seq = self.seq.wrapping_add(1);
        let msg = tbf_change(self.seq, ifindex, handle, parent, tbf);
        self.send(&msg)?;
        let mut buf = [0u8; 8192];
        loop {
            if parse_ack(self.recv(&mut buf)?, self.seq)? {
                return Ok(());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tbf_change_has_the_kernel_layout() {
        let tbf = Tbf { rate_bytes_per_s: 1, burst_bytes: 1600, limit_bytes: 4 << 20 };
        let m = tbf_change(7, 3, 0x0020_0000, 0x0001_0020, tbf);
        // nlmsghdr 16 + tcmsg 20 + kind 8 + options (4 + parms 40 + burst 8).
        assert_eq!(m.len(), 16 + 20 + 8 + 4 + 40 + 8);
        assert_eq!(u32::from_ne_bytes(m[0..4].try_into().unwrap()) as usize, m.len());
        assert_eq!(u16::from_ne_bytes([m[4], m[5]]), RTM_NEWQDISC);
        assert_eq!(u16::from_ne_bytes([m[6], m[7]]), NLM_F_REQUEST | NLM_F_ACK, "change: no CREATE, no EXCL");
        assert_eq!(i32::from_ne_bytes(m[20..24].try_into().unwrap()), 3);
        assert_eq!(&m[40..44], b"tbf\0");
        // The rate spec's rate field and the burst attribute.
        assert_eq!(m[48 + 4 + 1], TC_LINKLAYER_ETHERNET);
        assert_eq!(u32::from_ne_bytes(m[48 + 4 + 8..48 + 4 + 12].try_into().unwrap()), 1);
        assert_eq!(u32::from_ne_bytes(m[m.len() - 4..].try_into().unwrap()), 1600);
        // A rate beyond 32 bits travels in TCA_TBF_RATE64.
        let fast = tbf_change(1, 3, 0, 0, Tbf { rate_bytes_per_s: 1 << 33, ..tbf });
        assert_eq!(fast.len(), m.len() + 12);
    }

    #[test]
    fn acks_and_refusals_are_read_and_garbage_is_an_error() {
        let ack = |seq: u32, errno: i32| {
            let mut b = vec![0u8; 36];
            b[0..4].copy_from_slice(&36u32.to_ne_bytes());
            b[4..6].copy_from_slice(&NLMSG_ERROR.to_ne_bytes());
            b[8..12].copy_from_slice(&seq.to_ne_bytes());
            b[16..20].copy_from_slice(&errno.to_ne_bytes());
            b
        };
        assert!(parse_ack(&ack(5, 0), 5).unwrap());
        assert!(!parse_ack(&ack(4, 0), 5).unwrap(), "another request's ack");
        assert_eq!(parse_ack(&ack(5, -libc::EINVAL), 5).unwrap_err().raw_os_error(), Some(libc::EINVAL));
        let mut bad = ack(5, 0);
        bad[0..4].copy_from_slice(&1000u32.to_ne_bytes());
        assert!(parse_ack(&bad, 5).is_err());
        assert!(!parse_ack(&[1, 2, 3], 5).unwrap());
    }

    /// One `RTM_NEWQDISC` reply as the kernel writes it: tcmsg, a kind, and `TCA_STATS2` with
    /// a `TCA_STATS_QUEUE` inside.
    fn qdisc_reply(ifindex: i32, handle: u32, qlen: u32, backlog: u32) -> Vec<u8> {
        let mut m = vec![0u8; 16];
        m.extend_from_slice(&[0, 0, 0, 0]);
        m.extend_from_slice(&ifindex.to_ne_bytes());
        m.extend_from_slice(&handle.to_ne_bytes());
        m.extend_from_slice(&[0u8; 8]);
        attr(&mut m, TCA_KIND, b"tbf\0");
        let mut q = Vec::new();
        for v in [qlen, backlog, 0, 0, 0] {
            q.extend_from_slice(&v.to_ne_bytes());
        }
        let mut stats = Vec::new();
        attr(&mut stats, 1, &[0u8; 16]);
        attr(&mut stats, TCA_STATS_QUEUE, &q);
        attr(&mut m, TCA_STATS2 | NLA_F_NESTED, &stats);
        let len = m.len() as u32;
        m[0..4].copy_from_slice(&len.to_ne_bytes());
        m[4..6].copy_from_slice(&RTM_NEWQDISC.to_ne_bytes());
        m
    }

    #[test]
    fn a_qdisc_dump_yields_the_named_queue_and_ends_at_done() {
        let mut dump = qdisc_reply(3, 0x0001_0000, 9, 9000);
        dump.extend(qdisc_reply(3, 0x0020_0000, 4, 6000));
        dump.extend(qdisc_reply(4, 0x0020_0000, 7, 7000));
        let (q, done) = parse_qdisc_dump(&dump, 3, 0x0020_0000).unwrap();
        assert_eq!(q, Some(QueueStats { packets: 4, bytes: 6000 }));
        assert!(!done);
        let mut end = vec![0u8; 20];
        end[0..4].copy_from_slice(&20u32.to_ne_bytes());
        end[4..6].copy_from_slice(&NLMSG_DONE.to_ne_bytes());
        assert_eq!(parse_qdisc_dump(&end, 3, 0x0020_0000).unwrap(), (None, true));
        let mut bad = qdisc_reply(3, 0x0020_0000, 1, 1);
        bad[0..4].copy_from_slice(&4000u32.to_ne_bytes());
        assert!(parse_qdisc_dump(&bad, 3, 0x0020_0000).is_err());
        // A truncated attribute inside is skipped, not read past.
        let mut short = qdisc_reply(3, 0x0020_0000, 1, 1);
        let n = short.len();
        short[n - 24..n - 22].copy_from_slice(&200u16.to_ne_bytes());
        assert_eq!(parse_qdisc_dump(&short, 3, 0x0020_0000).unwrap().0, None);
    }
}
