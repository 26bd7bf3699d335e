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

    /// Receives one frame into `buf`; `Ok(None)` when none is waiting.
    pub fn recv(&self, buf: &mut [u8]) -> io::Result<Option<usize>> {
        // SAFETY: buf is valid for writes of its length. MSG_TRUNC reports the real length of
        // a frame longer than the buffer, so it can be counted and dropped.
        let n = unsafe { libc::recv(self.fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), libc::MSG_TRUNC) };
        if n >= 0 {
            return Ok(Some(n as usize));
        }
        let e = io::Error::last_os_error();
        match e.kind() {
            io::ErrorKind::WouldBlock => Ok(None),
            io::ErrorKind::Interrupted => self.recv(buf),
            _ => Err(e),
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

impl AsRawFd for PacketSocket {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}
