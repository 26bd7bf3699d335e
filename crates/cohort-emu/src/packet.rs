//! Raw Ethernet frames in and out of one interface: an `AF_PACKET` socket bound to it.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// Linux `PACKET_IGNORE_OUTGOING` (since 4.20): do not hand our own transmissions back to us.
const PACKET_IGNORE_OUTGOING: libc::c_int = 23;
/// Kernel receive buffer asked for; bursts at 100 Mbit/s must not overflow it while the
/// emulator thread is briefly descheduled.
const RCVBUF_BYTES: libc::c_int = 8 << 20;

/// A non-blocking packet socket bound to one interface, seeing every frame it receives.
#[derive(Debug)]
pub struct PacketSocket {
    fd: OwnedFd,
}

fn check(rc: libc::c_int) -> io::Result<libc::c_int> {
    if rc < 0 { Err(io::Error::last_os_error()) } else { Ok(rc) }
}

impl PacketSocket {
    /// Opens a socket on interface `ifindex` of the calling thread's namespace.
    pub fn bind(ifindex: u32) -> io::Result<Self> {
        // Protocol 0 at creation, ETH_P_ALL at bind: no frame of another interface slips in
        // between the two calls.
        // SAFETY: plain syscall, result checked.
        let fd = check(unsafe {
            libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC, 0)
        })?;
        // SAFETY: fresh descriptor.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let one: libc::c_int = 1;
        // SAFETY: valid option pointers and lengths.
        unsafe {
            check(libc::setsockopt(
                fd.as_raw_fd(),
                libc::SOL_PACKET,
                PACKET_IGNORE_OUTGOING,
                (&one as *const libc::c_int).cast(),
                4,
            ))?;
            check(libc::setsockopt(
                fd.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_TIMESTAMPNS,
                (&one as *const libc::c_int).cast(),
                4,
            ))?;
            // SO_RCVBUFFORCE needs CAP_NET_ADMIN; fall back to the capped SO_RCVBUF.
            let buf = RCVBUF_BYTES;
            for opt in [libc::SO_RCVBUFFORCE, libc::SO_RCVBUF] {
                let ok =
                    libc::setsockopt(fd.as_raw_fd(), libc::SOL_SOCKET, opt, (&buf as *const libc::c_int).cast(), 4);
                if ok == 0 {
                    break;
                }
            }
            let mut sll: libc::sockaddr_ll = std::mem::zeroed();
            sll.sll_family = libc::AF_PACKET as u16;
            sll.sll_protocol = (libc::ETH_P_ALL as u16).to_be();
            sll.sll_ifindex = ifindex as i32;
            check(libc::bind(
                fd.as_raw_fd(),
                (&sll as *const libc::sockaddr_ll).cast(),
                std::mem::size_of::<libc::sockaddr_ll>() as u32,
            ))?;
        }
        Ok(PacketSocket { fd })
    }

    /// Receives one frame into `buf` with the kernel's receive time; `Ok(None)` when none is
    /// waiting.
    pub fn recv(&self, buf: &mut [u8]) -> io::Result<Option<Received>> {
        match recv_timestamped(self.fd.as_raw_fd(), buf, libc::MSG_TRUNC | libc::MSG_DONTWAIT) {
            Ok(r) => Ok(Some(r)),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(None),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => self.recv(buf),
            Err(e) => Err(e),
        }
    }

    /// Sends one complete Ethernet frame out of the interface.
    pub fn send(&self, frame: &[u8]) -> io::Result<()> {
        loop {
            // SAFETY: frame is valid for reads of its length.
            let n = unsafe { libc::send(self.fd.as_raw_fd(), frame.as_ptr().cast(), frame.len(), 0) };
            if n >= 0 {
                return Ok(());
            }
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
    }
}

/// One datagram or frame as received.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Received {
    /// Its length (with `MSG_TRUNC`: the full length, even beyond the buffer).
    pub len: usize,
    /// When the kernel received it (CLOCK_REALTIME ns, `SO_TIMESTAMPNS`), if it said.
    pub realtime_ns: Option<u64>,
}

/// `recvmsg` on `fd` with `flags`, reading the `SO_TIMESTAMPNS` control message the socket was
/// asked for. For veth and loopback the kernel takes the stamp when the frame is queued for
/// reception, before softirq processing, so a busy machine does not shift it.
pub fn recv_timestamped(fd: RawFd, buf: &mut [u8], flags: libc::c_int) -> io::Result<Received> {
    let mut iov = libc::iovec { iov_base: buf.as_mut_ptr().cast(), iov_len: buf.len() };
    let mut cmsg = [0u64; 16];
    // SAFETY: an all-zero msghdr is valid; it is pointed at live buffers below.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = cmsg.as_mut_ptr().cast();
    msg.msg_controllen = std::mem::size_of_val(&cmsg);
    // SAFETY: msghdr points at live buffers of the stated sizes.
    let n = unsafe { libc::recvmsg(fd, &mut msg, flags) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut realtime_ns = None;
    // SAFETY: walking the control messages the kernel wrote, with the libc macros.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&msg);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SO_TIMESTAMPNS {
                let t: libc::timespec = std::ptr::read_unaligned(libc::CMSG_DATA(c).cast());
                realtime_ns = Some(t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64);
            }
            c = libc::CMSG_NXTHDR(&msg, c);
        }
    }
    Ok(Received { len: n as usize, realtime_ns })
}

impl AsRawFd for PacketSocket {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}
