//! Sees every IPv4 TCP and UDP packet leave one interface, whatever application sent it: an
//! `AF_PACKET` socket of `ETH_P_ALL` bound to the interface receives a copy of each frame the
//! kernel hands to the device (`sll_pkttype == PACKET_OUTGOING`), after the queueing
//! discipline, so what it reports is what left for the card. Incoming frames are skipped.
//!
//! The parser ([`parse_outgoing`]) never panics: frames too short, not IPv4, fragments after
//! the first, or of another protocol yield `None` and are counted by the caller.

use cohort_proto::preempt::agent::{FlowKey, PROTO_TCP, PROTO_UDP};
use std::io;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

const ETH_P_ALL: u16 = 0x0003;
const ETH_P_IP: u16 = 0x0800;
const ETH_P_8021Q: u16 = 0x8100;
/// Headers are all the parser reads: Ethernet (+ one VLAN tag), IPv4 with options, ports.
const SNAP: usize = 14 + 4 + 60 + 4;

/// One outgoing packet: its flow, its IP length, its transport payload and its DSCP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Outgoing {
    pub key: FlowKey,
    pub ip_len: u16,
    /// Bytes after the TCP or UDP header (0 for a bare TCP acknowledgement).
    pub payload: u16,
    pub dscp: u8,
}

/// Parses the headers of an Ethernet frame: IPv4 TCP or UDP, first fragment (or unfragmented).
pub fn parse_outgoing(frame: &[u8]) -> Option<Outgoing> {
    let mut ty = u16::from_be_bytes([*frame.get(12)?, *frame.get(13)?]);
    let mut l3 = 14;
    if ty == ETH_P_8021Q {
        ty = u16::from_be_bytes([*frame.get(16)?, *frame.get(17)?]);
        l3 = 18;
    }
    if ty != ETH_P_IP {
        return None;
    }
    let ip = frame.get(l3..)?;
    let (&vihl, &tos) = (ip.first()?, ip.get(1)?);
    let ihl = usize::from(vihl & 0x0f) * 4;
    if vihl >> 4 != 4 || ihl < 20 {
        return None;
    }
    let ip_len = u16::from_be_bytes([*ip.get(2)?, *ip.get(3)?]);
    let frag = u16::from_be_bytes([*ip.get(6)?, *ip.get(7)?]) & 0x1fff;
    let proto = *ip.get(9)?;
    if frag != 0 || !(proto == PROTO_TCP || proto == PROTO_UDP) {
        return None;
    }
    let addr = |i: usize| -> Option<Ipv4Addr> {
        Some(Ipv4Addr::new(*ip.get(i)?, *ip.get(i + 1)?, *ip.get(i + 2)?, *ip.get(i + 3)?))
    };
    let port = |i: usize| -> Option<u16> { Some(u16::from_be_bytes([*ip.get(ihl + i)?, *ip.get(ihl + i + 1)?])) };
    let key =
        FlowKey { proto, src: SocketAddrV4::new(addr(12)?, port(0)?), dst: SocketAddrV4::new(addr(16)?, port(2)?) };
    let l4_header = if proto == PROTO_TCP { usize::from(*ip.get(ihl + 12)? >> 4) * 4 } else { 8 };
    let payload = usize::from(ip_len).saturating_sub(ihl + l4_header) as u16;
    Some(Outgoing { key, ip_len, payload, dscp: tos >> 2 })
}

/// Counters of an observer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ObserverStats {
    pub outgoing: u64,
    /// Outgoing frames that are not IPv4 TCP/UDP first fragments.
    pub other: u64,
}

/// An `AF_PACKET` socket watching one interface's outgoing frames.
#[derive(Debug)]
pub struct Observer {
    fd: OwnedFd,
    stats: ObserverStats,
}

impl Observer {
    /// Opens the socket on the interface with index `ifindex` (needs `CAP_NET_RAW`).
    pub fn open(ifindex: i32) -> io::Result<Self> {
        // SAFETY: plain socket(2); the descriptor is owned from here on.
        let fd = unsafe {
            libc::socket(
                libc::AF_PACKET,
                libc::SOCK_RAW | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                i32::from(ETH_P_ALL.to_be()),
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a fresh descriptor nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        // SAFETY: sockaddr_ll is plain data; zeroed is a valid value.
        let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_protocol = ETH_P_ALL.to_be();
        sll.sll_ifindex = ifindex;
        // SAFETY: binding to an address of the right size that we own.
        let r = unsafe {
            libc::bind(fd.as_raw_fd(), (&raw const sll).cast(), std::mem::size_of::<libc::sockaddr_ll>() as u32)
        };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Observer { fd, stats: ObserverStats::default() })
    }

    pub fn stats(&self) -> ObserverStats {
        self.stats
    }

    /// Hands every outgoing packet waiting on the socket to `f`; returns when none is left.
    pub fn drain(&mut self, mut f: impl FnMut(Outgoing)) -> io::Result<()> {
        let mut buf = [0u8; SNAP];
        loop {
            // SAFETY: sockaddr_ll is plain data; zeroed is a valid value.
            let mut from: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
            let mut len = std::mem::size_of::<libc::sockaddr_ll>() as u32;
            // SAFETY: receiving into buffers we own, of the lengths we pass; frames longer than
            // the buffer are truncated (only their headers are read).
            let n = unsafe {
                libc::recvfrom(
                    self.fd.as_raw_fd(),
                    buf.as_mut_ptr().cast(),
                    buf.len(),
                    0,
                    (&raw mut from).cast(),
                    &mut len,
                )
            };
            if n < 0 {
                let e = io::Error::last_os_error();
                match e.kind() {
                    io::ErrorKind::WouldBlock => return Ok(()),
                    io::ErrorKind::Interrupted => continue,
                    _ => return Err(e),
                }
            }
            if from.sll_pkttype != libc::PACKET_OUTGOING {
                continue;
            }
            self.stats.outgoing += 1;
            match parse_outgoing(&buf[..n as usize]) {
                Some(o) => f(o),
                None => self.stats.other += 1,
            }
        }
    }
}

impl AsRawFd for Observer {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(vlan: bool, proto: u8, tos: u8, frag: u16) -> Vec<u8> {
        let mut f = vec![0u8; 12];
        if vlan {
            f.extend_from_slice(&[0x81, 0x00, 0xa0, 0x05]);
        }
        f.extend_from_slice(&[0x08, 0x00]);
        let mut ip = vec![0x45, tos, 0x05, 0xdc, 0, 0];
        ip.extend_from_slice(&frag.to_be_bytes());
        ip.extend_from_slice(&[64, proto, 0, 0, 10, 0, 0, 2, 10, 0, 0, 1]);
        ip.extend_from_slice(&[0x9c, 0x40, 0x23, 0x28]);
        // The rest of a TCP header (data offset 8 words: 32 bytes) or of a UDP one.
        ip.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 0, 0x80, 0x10, 0, 0]);
        f.extend(ip);
        f
    }

    #[test]
    fn ipv4_udp_and_tcp_headers_are_read_and_anything_else_is_none() {
        let o = parse_outgoing(&frame(false, PROTO_UDP, 0xb8, 0)).unwrap();
        assert_eq!(o.key.src, "10.0.0.2:40000".parse().unwrap());
        assert_eq!(o.key.dst, "10.0.0.1:9000".parse().unwrap());
        assert_eq!((o.key.proto, o.ip_len, o.payload, o.dscp), (PROTO_UDP, 1500, 1472, 46));
        let t = parse_outgoing(&frame(true, PROTO_TCP, 0, 0x4000)).unwrap();
        assert_eq!((t.key.proto, t.payload), (PROTO_TCP, 1500 - 20 - 32), "DF set, VLAN, TCP options");
        let mut ack = frame(false, PROTO_TCP, 0, 0);
        ack[16..18].copy_from_slice(&52u16.to_be_bytes());
        assert_eq!(parse_outgoing(&ack).unwrap().payload, 0, "a bare acknowledgement");
        assert_eq!(parse_outgoing(&frame(false, 1, 0, 0)), None, "ICMP");
        assert_eq!(parse_outgoing(&frame(false, PROTO_UDP, 0, 185)), None, "a later fragment has no ports");
        let good = frame(false, PROTO_TCP, 0, 0);
        for n in 0..14 + 20 + 13 {
            assert_eq!(parse_outgoing(&good[..n]), None, "truncated at {n}");
        }
        let mut v6 = good.clone();
        v6[14] = 0x60;
        assert_eq!(parse_outgoing(&v6), None);
        let mut short_ihl = good;
        short_ihl[14] = 0x44;
        assert_eq!(parse_outgoing(&short_ihl), None);
    }
}
