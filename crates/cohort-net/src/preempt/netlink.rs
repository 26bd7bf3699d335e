//! The rtnetlink requests of the bulk gate: on its fast path, change a TBF qdisc's rate and
//! burst (`RTM_NEWQDISC` without `NLM_F_CREATE`, as `tc qdisc change` sends it) and read the
//! kernel's acknowledgement; and read how many packets a qdisc holds (`RTM_GETQDISC` dump,
//! `TCA_STATS2`/`TCA_STATS_QUEUE`, as `tc -s qdisc show` reads it). And the one `sock_diag`
//! request of the agent: how many bytes a local TCP socket has written and not had
//! acknowledged (`SOCK_DIAG_BY_FAMILY` for one socket, `inet_diag_msg.idiag_wqueue`, `ss`'s
//! Send-Q; `linux/inet_diag.h`, `net/ipv4/tcp_diag.c`).
//!
//! Written by hand because it is one fixed message: the layouts are `linux/netlink.h`
//! (`nlmsghdr`), `linux/rtnetlink.h` (`tcmsg`, `rtattr`) and `linux/pkt_sched.h`
//! (`tc_ratespec`, `tc_tbf_qopt`, `TCA_TBF_*`). Since Linux 3.13 `tbf_change` takes the burst
//! in bytes (`TCA_TBF_BURST`) and computes the bucket itself, and needs no rate table when the
//! rate spec names its link layer; it refills the bucket on every change, which is what makes a
//! release take effect at once.

use std::io;
use std::net::SocketAddrV4;
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
const SOCK_DIAG_BY_FAMILY: u16 = 20;
const INET_DIAG_NOCOOKIE: u32 = !0;
/// `inet_diag_msg`: family, state, timer, retrans (4), `inet_diag_sockid` (48), expires,
/// rqueue, wqueue, uid, inode (20).
const INET_DIAG_MSG_LEN: usize = 72;
const INET_DIAG_WQUEUE_AT: usize = 60;

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

/// The `SOCK_DIAG_BY_FAMILY` request for the TCP socket of this host whose local address is
/// `local` and peer `peer` (`struct inet_diag_req_v2` with a full `inet_diag_sockid`: the
/// kernel looks that one socket up, `inet_diag_find_one_icsk`; no cookie to check).
pub fn tcp_socket_query(seq: u32, local: SocketAddrV4, peer: SocketAddrV4) -> Vec<u8> {
    let mut m = vec![0u8; 16];
    // family, protocol, extensions, pad, states (all).
    m.extend_from_slice(&[libc::AF_INET as u8, libc::IPPROTO_TCP as u8, 0, 0]);
    m.extend_from_slice(&u32::MAX.to_ne_bytes());
    // inet_diag_sockid: ports and addresses in network order, interface, cookie.
    m.extend_from_slice(&local.port().to_be_bytes());
    m.extend_from_slice(&peer.port().to_be_bytes());
    for ip in [local.ip(), peer.ip()] {
        m.extend_from_slice(&ip.octets());
        m.extend_from_slice(&[0u8; 12]);
    }
    m.extend_from_slice(&0u32.to_ne_bytes());
    m.extend_from_slice(&INET_DIAG_NOCOOKIE.to_ne_bytes());
    m.extend_from_slice(&INET_DIAG_NOCOOKIE.to_ne_bytes());
    let len = m.len() as u32;
    m[0..4].copy_from_slice(&len.to_ne_bytes());
    m[4..6].copy_from_slice(&SOCK_DIAG_BY_FAMILY.to_ne_bytes());
    m[6..8].copy_from_slice(&NLM_F_REQUEST.to_ne_bytes());
    m[8..12].copy_from_slice(&seq.to_ne_bytes());
    m
}

/// Reads the reply to [`tcp_socket_query`] `seq` out of a received datagram: `Some(Some(bytes))`
/// the socket's unacknowledged bytes, `Some(None)` no such socket here (`ENOENT`), `None` no
/// reply to `seq` in it; a malformed message or another refusal is an error.
pub fn parse_socket_reply(buf: &[u8], seq: u32) -> io::Result<Option<Option<u32>>> {
    for m in messages(buf) {
        let m = m?;
        if m.seq != seq {
            continue;
        }
        return match m.ty {
            NLMSG_ERROR if m.body.len() >= 4 => match errno(m.body) {
                libc::ENOENT => Ok(Some(None)),
                e => Err(io::Error::from_raw_os_error(e)),
            },
            SOCK_DIAG_BY_FAMILY if m.body.len() >= INET_DIAG_MSG_LEN => {
                Ok(Some(Some(ne_u32(&m.body[INET_DIAG_WQUEUE_AT..]))))
            }
            _ => Err(io::Error::new(io::ErrorKind::InvalidData, "unexpected sock_diag reply")),
        };
    }
    Ok(None)
}

/// One netlink message of a received datagram: its type, sequence number and what follows
/// the 16-byte `nlmsghdr`.
struct Message<'a> {
    ty: u16,
    seq: u32,
    body: &'a [u8],
}

fn ne_u32(b: &[u8]) -> u32 {
    u32::from_ne_bytes([b[0], b[1], b[2], b[3]])
}

/// The errno of an `NLMSG_ERROR` body (`struct nlmsgerr`: the negated errno first).
fn errno(body: &[u8]) -> i32 {
    -(ne_u32(body) as i32)
}

/// The messages of a received datagram in order; a length that does not fit is an error, and
/// the last item.
fn messages(buf: &[u8]) -> impl Iterator<Item = io::Result<Message<'_>>> {
    let mut at = 0;
    std::iter::from_fn(move || {
        let h = buf.get(at..at + 16)?;
        let len = ne_u32(h) as usize;
        if len < 16 || at + len > buf.len() {
            at = buf.len();
            return Some(Err(io::Error::new(io::ErrorKind::InvalidData, "malformed netlink message")));
        }
        let m = Message { ty: u16::from_ne_bytes([h[4], h[5]]), seq: ne_u32(&h[8..]), body: &buf[at + 16..at + len] };
        at += len.next_multiple_of(4);
        Some(Ok(m))
    })
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
    let mut found = None;
    for m in messages(buf) {
        let m = m?;
        match m.ty {
            NLMSG_DONE => return Ok((found, true)),
            NLMSG_ERROR if m.body.len() >= 4 => return Err(io::Error::from_raw_os_error(errno(m.body))),
            // struct tcmsg: family and pads, ifindex, handle, parent, info; attributes after.
            RTM_NEWQDISC
                if m.body.len() >= 20 && ne_u32(&m.body[4..]) as i32 == ifindex && ne_u32(&m.body[8..]) == handle =>
            {
                let queue = attrs(&m.body[20..])
                    .filter(|&(t, _)| t == TCA_STATS2)
                    .flat_map(|(_, p)| attrs(p))
                    .find(|&(t, p)| t == TCA_STATS_QUEUE && p.len() >= 8);
                if let Some((_, p)) = queue {
                    found = Some(QueueStats { packets: ne_u32(p), bytes: ne_u32(&p[4..]) });
                }
            }
            _ => {}
        }
    }
    Ok((found, false))
}

/// Reads the acknowledgement of request `seq` out of a received datagram: `Ok(true)` if the
/// kernel accepted it, an error with its errno if it refused, `Ok(false)` if the datagram holds
/// no acknowledgement of `seq`.
pub fn parse_ack(buf: &[u8], seq: u32) -> io::Result<bool> {
    for m in messages(buf) {
        let m = m?;
        if m.ty == NLMSG_ERROR && m.seq == seq && m.body.len() >= 4 {
            let e = errno(m.body);
            return if e == 0 { Ok(true) } else { Err(io::Error::from_raw_os_error(e)) };
        }
    }
    Ok(false)
}

/// A netlink socket of the calling thread's network namespace: `NETLINK_ROUTE` for the gate
/// ([`Rtnl::open`]), `NETLINK_SOCK_DIAG` for the agent's socket queries ([`Rtnl::sock_diag`]).
#[derive(Debug)]
pub struct Rtnl {
    fd: OwnedFd,
    seq: u32,
}

impl Rtnl {
    pub fn open() -> io::Result<Self> {
        Self::of(libc::NETLINK_ROUTE)
    }

    pub fn sock_diag() -> io::Result<Self> {
        Self::of(libc::NETLINK_SOCK_DIAG)
    }

    fn of(protocol: libc::c_int) -> io::Result<Self> {
        // SAFETY: plain socket(2); the descriptor is owned from here on.
        let fd = unsafe { libc::socket(libc::AF_NETLINK, libc::SOCK_RAW | libc::SOCK_CLOEXEC, protocol) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` is a fresh descriptor nothing else owns.
        Ok(Rtnl { fd: unsafe { OwnedFd::from_raw_fd(fd) }, seq: 0 })
    }

    /// Bytes the TCP socket `local` → `peer` of this host has written and not had
    /// acknowledged; `None` if there is no such socket here.
    pub fn tcp_unacked(&mut self, local: SocketAddrV4, peer: SocketAddrV4) -> io::Result<Option<u32>> {
        self.seq = self.seq.wrapping_add(1);
        self.send(&tcp_socket_query(self.seq, local, peer))?;
        let mut buf = [0u8; 8192];
        loop {
            if let Some(r) = parse_socket_reply(self.recv(&mut buf)?, self.seq)? {
                return Ok(r);
            }
        }
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

    #[test]
    fn a_socket_query_has_the_kernel_layout_and_its_replies_are_read() {
        let (local, peer) = ("10.0.0.2:46000".parse().unwrap(), "10.0.0.1:5001".parse().unwrap());
        let m = tcp_socket_query(9, local, peer);
        // nlmsghdr 16 + inet_diag_req_v2 56.
        assert_eq!(m.len(), 16 + 56);
        assert_eq!(u16::from_ne_bytes([m[4], m[5]]), SOCK_DIAG_BY_FAMILY);
        assert_eq!((m[16], m[17]), (libc::AF_INET as u8, libc::IPPROTO_TCP as u8));
        assert_eq!(&m[24..28], &[0xb3, 0xb0, 0x13, 0x89], "ports in network order");
        assert_eq!((&m[28..32], &m[44..48]), (&[10, 0, 0, 2][..], &[10, 0, 0, 1][..]));
        assert_eq!(&m[64..72], &[0xff; 8], "no cookie to check");
        let reply = |seq: u32, ty: u16, wqueue: u32| {
            let mut b = vec![0u8; 16 + INET_DIAG_MSG_LEN];
            b[0..4].copy_from_slice(&((16 + INET_DIAG_MSG_LEN) as u32).to_ne_bytes());
            b[4..6].copy_from_slice(&ty.to_ne_bytes());
            b[8..12].copy_from_slice(&seq.to_ne_bytes());
            b[16 + INET_DIAG_WQUEUE_AT..16 + INET_DIAG_WQUEUE_AT + 4].copy_from_slice(&wqueue.to_ne_bytes());
            b
        };
        assert_eq!(parse_socket_reply(&reply(9, SOCK_DIAG_BY_FAMILY, 4096), 9).unwrap(), Some(Some(4096)));
        assert_eq!(parse_socket_reply(&reply(8, SOCK_DIAG_BY_FAMILY, 4096), 9).unwrap(), None, "another request's");
        let mut gone = reply(9, NLMSG_ERROR, 0);
        gone[16..20].copy_from_slice(&(-libc::ENOENT).to_ne_bytes());
        assert_eq!(parse_socket_reply(&gone, 9).unwrap(), Some(None), "no such socket");
        gone[16..20].copy_from_slice(&(-libc::EPERM).to_ne_bytes());
        assert_eq!(parse_socket_reply(&gone, 9).unwrap_err().raw_os_error(), Some(libc::EPERM));
        let short = reply(9, SOCK_DIAG_BY_FAMILY, 1);
        assert!(parse_socket_reply(&short[..40], 9).is_err(), "a length past the datagram");
        let mut truncated = short[..40].to_vec();
        truncated[0..4].copy_from_slice(&40u32.to_ne_bytes());
        assert!(parse_socket_reply(&truncated, 9).is_err(), "a reply too short for its message");
    }

    /// The kernel's own answer: a socket whose peer does not read keeps bytes unacknowledged;
    /// once the peer has read them all, none; a socket that is not there, `None`.
    #[test]
    fn the_kernel_reports_what_a_tcp_socket_has_left() {
        use std::io::{Read, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let mut tx = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (mut rx, _) = listener.accept().unwrap();
        let v4 = |a: std::net::SocketAddr| match a {
            std::net::SocketAddr::V4(a) => a,
            std::net::SocketAddr::V6(_) => unreachable!("bound to 127.0.0.1"),
        };
        let (local, peer) = (v4(tx.local_addr().unwrap()), v4(tx.peer_addr().unwrap()));
        let mut diag = Rtnl::sock_diag().unwrap();
        assert_eq!(diag.tcp_unacked(local, peer).unwrap(), Some(0), "nothing written yet");
        tx.set_nonblocking(true).unwrap();
        let chunk = vec![7u8; 64 << 10];
        let mut written = 0usize;
        while let Ok(n) = tx.write(&chunk) {
            written += n;
        }
        let left = diag.tcp_unacked(local, peer).unwrap().expect("the socket is there");
        assert!(left > 0, "a peer that does not read leaves bytes in the sender ({written} written)");
        let mut buf = vec![0u8; 1 << 16];
        let mut read = 0usize;
        while read < written {
            read += rx.read(&mut buf).unwrap();
        }
        // Every byte read was acknowledged; the last acknowledgement may still be on its way.
        let drained = (0..2000).any(|_| {
            std::thread::sleep(std::time::Duration::from_millis(1));
            diag.tcp_unacked(local, peer).unwrap() == Some(0)
        });
        assert!(drained, "the peer read everything, yet bytes stay unacknowledged");
        let nobody = "127.0.0.1:9".parse().unwrap();
        assert_eq!(diag.tcp_unacked(local, nobody).unwrap(), None);
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
