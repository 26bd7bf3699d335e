//! The training's bulk over plain kernel TCP: one connection per worker, blocking I/O with
//! timeouts so that every transfer notices the run's stop flag. With permits (the
//! `cohort_bulk*` systems) every sender asks its robot's coorp agent before it hands data to
//! the kernel, as `cohort bulk send` does (`cohort_net::preempt::bulk`).

use super::workload::{Endpoint, WorkloadError, io_err};
use cohort_net::preempt::bulk::{Budget, PermitClient};
use std::io::{self, Read, Write};
use std::net::{SocketAddr, SocketAddrV4, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// How often blocked transfers look at the stop flag.
const POLL: Duration = Duration::from_millis(100);

/// Reads exactly `n` bytes (discarding them) unless `stop` is set first; returns whether all
/// came.
pub(crate) fn read_n(s: &mut TcpStream, n: usize, stop: &AtomicBool, buf: &mut [u8]) -> io::Result<bool> {
    let mut left = n;
    while left > 0 {
        if stop.load(Ordering::Relaxed) {
            return Ok(false);
        }
        let len = left.min(buf.len());
        match s.read(&mut buf[..len]) {
            Ok(0) => return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "peer closed the bulk connection")),
            Ok(r) => left -= r,
            Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(true)
}

/// The rate a permit is planned with when the agent gives none (it always does).
const FALLBACK_RATE_BPS: u64 = 100_000_000;

/// Closes a transfer's permit session when the transfer ends, however it ends.
struct SessionEnd<'a>(Option<&'a PermitClient>);

impl Drop for SessionEnd<'_> {
    fn drop(&mut self) {
        if let Some(p) = self.0 {
            p.close();
        }
    }
}

/// Writes `n` bytes unless `stop` is set first, each chunk within the agent's permit when
/// `permits` is given (the transfer's session is closed at the end, for an early release);
/// returns whether all went.
pub(crate) fn write_n(
    s: &mut TcpStream,
    n: usize,
    stop: &AtomicBool,
    buf: &[u8],
    permits: Option<&PermitClient>,
) -> io::Result<bool> {
    let _end = SessionEnd(permits);
    let mut left = n;
    while left > 0 {
        if stop.load(Ordering::Relaxed) {
            return Ok(false);
        }
        let mut len = left.min(buf.len());
        if let Some(p) = permits {
            match p.budget(s, left as u64, FALLBACK_RATE_BPS)? {
                Budget::Closed(d) | Budget::Wait(d) => {
                    std::thread::sleep(d);
                    continue;
                }
                Budget::Bytes(b) => len = len.min(usize::try_from(b).unwrap_or(usize::MAX)),
                Budget::Unlimited => {}
            }
        }
        match s.write(&buf[..len]) {
            Ok(0) => return Err(io::Error::new(io::ErrorKind::WriteZero, "bulk connection closed")),
            Ok(w) => left -= w,
            Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(true)
}

/// Opens the bulk connections: a listener per worker, one connection from the leader to each.
/// Returns (leader side, worker side) per worker.
pub(crate) fn bulk_connections(
    leader: &Endpoint,
    workers: &[Endpoint],
    port: u16,
) -> Result<Vec<(TcpStream, TcpStream)>, WorkloadError> {
    let mut out = Vec::new();
    for w in workers {
        let at = SocketAddrV4::new(w.addr, port);
        let listener = cohort_emu::netns::in_netns(&w.ns, move || {
            let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None)?;
            s.set_reuse_address(true)?;
            s.bind(&at.into())?;
            s.listen(4)?;
            Ok(TcpListener::from(s))
        })
        .map_err(|source| WorkloadError::Setup { ns: w.ns.clone(), source })?;
        let leader_side = cohort_emu::netns::in_netns(&leader.ns, move || {
            TcpStream::connect_timeout(&SocketAddr::V4(at), Duration::from_secs(5))
        })
        .map_err(|source| WorkloadError::Setup { ns: leader.ns.clone(), source })?;
        listener.set_nonblocking(true).map_err(io_err("listener"))?;
        let deadline = Instant::now() + Duration::from_secs(5);
        let worker_side = loop {
            match listener.accept() {
                Ok((s, _)) => break s,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock && Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(5));
                }
                Err(e) => return Err(io_err(format!("accepting the bulk connection on {}", w.ns))(e)),
            }
        };
        for s in [&leader_side, &worker_side] {
            s.set_nonblocking(false).map_err(io_err("bulk socket"))?;
            s.set_read_timeout(Some(POLL)).map_err(io_err("bulk socket"))?;
            s.set_write_timeout(Some(POLL)).map_err(io_err("bulk socket"))?;
            s.set_nodelay(true).map_err(io_err("bulk socket"))?;
        }
        out.push((leader_side, worker_side));
    }
    Ok(out)
}
