//! Seed 003 §VI-D: TCP-based group management ([`GmCoordinator`], [`GmMember`]).
//!
//! The coordinator keeps one TCP connection per member and runs a single-threaded `poll(2)`
//! event loop over the listener and the connections. A join poll is one UDP datagram
//! `"CGMP" | epoch: u32` sent to each address in [`GmRound::poll_to`] (the testbed's broadcast
//! address, e.g. `10.77.0.255:port`; `SO_BROADCAST` is set). A joiner that receives it opens a
//! TCP connection to the coordinator — no join request is sent. When the join window
//! ([`GmRound::join_t`]) closes, the coordinator pushes the new view over each connection, old
//! members first (in join order), then the new ones, and waits for every member's
//! acknowledgment. View body: `0x56 | epoch: u32 | count: u16 | entries`, entry
//! `id: u32 | join_epoch: u32 | family: u8 (4 or 6) | ip (4 or 16 bytes) | port: u16`; the
//! coordinator is entry id 0. View ack body: `0x57 | epoch: u32`. A member finds itself in the
//! view by its TCP connection's local address; a joiner is a member once it has received a view
//! that contains it.
//!
//! Measured: at each joiner, poll received → view received ([`GmMemberRun::join_delay`]); at
//! the coordinator, poll sent → every member acknowledged the view ([`GmRun::update_delay`]).
//! The join poll is sent once (the paper's "single join poll"); a joiner that misses it does
//! not join in that round and shows up as missing in [`GmRun::joined`].
//!
//! Harness sequence: [`GmCoordinator::bind`]; start the N−1 initial members
//! ([`GmMember::initial`] then [`GmMember::run`], in their threads);
//! [`GmCoordinator::accept_initial`] (accepts them and pushes the initial view); create the
//! 12−N joiners with [`GmMember::joiner`] (which binds the poll socket) and only then call
//! their `run`, and once all are bound call [`GmCoordinator::join_round`]; finally set the
//! members' stop flag.

use super::common::{
    Conn, READABLE, STOP_POLL, accept_all, be_u16, be_u32, connect_retry, invalid_data, invalid_input,
    is_transient_udp, poll_fds, pollfd, remaining, send_lossy, sock_timeout, timed_out, unspecified_like, with_context,
};
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

const TAG_VIEW: u8 = 0x56;
const TAG_VIEW_ACK: u8 = 0x57;
const POLL_MAGIC: &[u8; 4] = b"CGMP";

/// One member of a group view.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ViewEntry {
    /// Member id: 0 is the coordinator, then in join order.
    pub id: u32,
    /// The member's address: for the coordinator its listening address, for the others the
    /// remote address of their TCP connection.
    pub addr: SocketAddr,
    /// Epoch of the view in which the member joined (the paper's join time `t`).
    pub join_epoch: u32,
}

fn encode_view(epoch: u32, view: &[ViewEntry]) -> io::Result<Vec<u8>> {
    let count = u16::try_from(view.len()).map_err(|_| invalid_input("view too large"))?;
    let mut b = vec![TAG_VIEW];
    b.extend_from_slice(&epoch.to_be_bytes());
    b.extend_from_slice(&count.to_be_bytes());
    for e in view {
        b.extend_from_slice(&e.id.to_be_bytes());
        b.extend_from_slice(&e.join_epoch.to_be_bytes());
        match e.addr.ip() {
            IpAddr::V4(ip) => {
                b.push(4);
                b.extend_from_slice(&ip.octets());
            }
            IpAddr::V6(ip) => {
                b.push(6);
                b.extend_from_slice(&ip.octets());
            }
        }
        b.extend_from_slice(&e.addr.port().to_be_bytes());
    }
    Ok(b)
}

fn decode_view(b: &[u8]) -> Option<(u32, Vec<ViewEntry>)> {
    if b.first() != Some(&TAG_VIEW) {
        return None;
    }
    let epoch = be_u32(b, 1)?;
    let count = be_u16(b, 5)?;
    let mut at = 7;
    let mut view = Vec::with_capacity(usize::from(count).min(b.len() / 15));
    for _ in 0..count {
        let id = be_u32(b, at)?;
        let join_epoch = be_u32(b, at + 4)?;
        at += 8;
        let ip = match *b.get(at)? {
            4 => {
                let o: [u8; 4] = b.get(at + 1..at + 5)?.try_into().ok()?;
                at += 5;
                IpAddr::V4(Ipv4Addr::from(o))
            }
            6 => {
                let o: [u8; 16] = b.get(at + 1..at + 17)?.try_into().ok()?;
                at += 17;
                IpAddr::V6(Ipv6Addr::from(o))
            }
            _ => return None,
        };
        let port = be_u16(b, at)?;
        at += 2;
        view.push(ViewEntry { id, addr: SocketAddr::new(ip, port), join_epoch });
    }
    (at == b.len()).then_some((epoch, view))
}

fn view_ack(epoch: u32) -> [u8; 5] {
    let mut b = [TAG_VIEW_ACK; 5];
    b[1..5].copy_from_slice(&epoch.to_be_bytes());
    b
}

fn poll_datagram(epoch: u32) -> [u8; 8] {
    let mut b = [0u8; 8];
    b[..4].copy_from_slice(POLL_MAGIC);
    b[4..].copy_from_slice(&epoch.to_be_bytes());
    b
}

/// Parameters of one join round.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GmRound<'a> {
    /// Where the join poll goes: the broadcast address and poll port of the testbed
    /// (e.g. `10.77.0.255:7401`), or several unicast addresses (the loopback tests).
    pub poll_to: &'a [SocketAddr],
    /// How many joiners the harness started (for [`GmRun::connect_delay`] and `close_early`).
    pub joiners_expected: usize,
    /// The join window: connections accepted within it become members of the next view.
    pub join_t: Duration,
    /// Close the window as soon as `joiners_expected` connections arrived instead of waiting
    /// the whole `join_t` (the default in the paper's protocol is the full window: `false`).
    pub close_early: bool,
}

/// Result of one join round at the coordinator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GmRun {
    /// Poll sent → every member acknowledged the new view (the paper's group update delay).
    pub update_delay: Duration,
    /// Poll sent → the `joiners_expected`-th connection accepted (`None` if fewer came).
    pub connect_delay: Option<Duration>,
    /// First view byte queued → last view ack (zero when no one joined and nothing was pushed).
    pub push_delay: Duration,
    /// Joiners that connected within the window and are in the new view.
    pub joined: usize,
    /// Connections accepted after the window closed (not in this view).
    pub late_connections: usize,
    /// Members whose connection closed during the round (removed from the view).
    pub left: usize,
    /// The view after the round (coordinator first).
    pub view: Vec<ViewEntry>,
    /// Its epoch.
    pub epoch: u32,
    /// Bytes handed to sockets in the round (poll datagrams and view frames).
    pub bytes_sent: u64,
}

#[derive(Debug)]
struct GmSlot {
    entry: ViewEntry,
    conn: Conn,
}

/// The coordinator of the TCP-based group management baseline (single-threaded poll loop).
#[derive(Debug)]
pub struct GmCoordinator {
    listener: TcpListener,
    me: ViewEntry,
    members: Vec<GmSlot>,
    late: Vec<Conn>,
    epoch: u32,
    next_id: u32,
}

impl GmCoordinator {
    /// Binds the TCP listener on `listen` (port 0 picks one).
    pub fn bind(listen: SocketAddr) -> io::Result<Self> {
        let listener = TcpListener::bind(listen).map_err(|e| with_context(e, format_args!("bind {listen}")))?;
        listener.set_nonblocking(true)?;
        let me = ViewEntry { id: 0, addr: listener.local_addr()?, join_epoch: 0 };
        Ok(Self { listener, me, members: Vec::new(), late: Vec::new(), epoch: 0, next_id: 1 })
    }

    /// The listening address (to pass to the members).
    pub fn local_addr(&self) -> SocketAddr {
        self.me.addr
    }

    /// The current view (coordinator first).
    pub fn view(&self) -> Vec<ViewEntry> {
        std::iter::once(self.me).chain(self.members.iter().map(|s| s.entry)).collect()
    }

    /// Accepts `n` initial members (no poll: they connect on their own), pushes them the first
    /// view and waits for their acks. `TimedOut` at `deadline` if fewer connect or ack.
    pub fn accept_initial(&mut self, n: usize, deadline: Instant) -> io::Result<()> {
        let mut new = Vec::new();
        while new.len() < n {
            let left = remaining(deadline, format_args!("{} of {n} initial members connected", new.len()))?;
            let mut fds = [pollfd(self.listener.as_raw_fd(), libc::POLLIN)];
            poll_fds(&mut fds, left)?;
            new.extend(accept_all(&self.listener)?);
        }
        let mut bytes = 0;
        let mut left = 0;
        self.push_view(new, &mut bytes, &mut left, deadline)?;
        Ok(())
    }

    /// One join round: send the join poll, accept connections for `join_t`, push the new view
    /// (old members first, then the joiners) and wait for every member's ack. A member whose
    /// connection closes is dropped from the view. `TimedOut` at `deadline`.
    pub fn join_round(&mut self, round: &GmRound<'_>, deadline: Instant) -> io::Result<GmRun> {
        let poll_sock = UdpSocket::bind(unspecified_like(round.poll_to.first().copied().unwrap_or(self.me.addr)))?;
        poll_sock.set_broadcast(true)?;
        let poll = poll_datagram(self.epoch + 1);
        let mut bytes_sent = 0u64;
        let t0 = Instant::now();
        for to in round.poll_to {
            if send_lossy(&poll_sock, &poll, *to)? {
                bytes_sent += poll.len() as u64;
            }
        }
        let window_end = t0 + round.join_t;
        let mut new: Vec<Conn> = Vec::new();
        let mut connect_delay = None;
        let mut left = 0usize;
        loop {
            let now = Instant::now();
            if now >= window_end || (round.close_early && new.len() >= round.joiners_expected) {
                break;
            }
            remaining(deadline, "join window")?;
            let wait = window_end.min(deadline).saturating_duration_since(now);
            let mut fds = vec![pollfd(self.listener.as_raw_fd(), libc::POLLIN)];
            fds.extend(self.members.iter().map(|s| pollfd(s.conn.fd(), libc::POLLIN)));
            poll_fds(&mut fds, wait)?;
            left += self.reap_members(&fds[1..])?;
            if fds[0].revents != 0 {
                new.extend(accept_all(&self.listener)?);
                if connect_delay.is_none() && new.len() >= round.joiners_expected {
                    connect_delay = Some(t0.elapsed());
                }
            }
        }
        let joined = new.len();
        let push_start = Instant::now();
        if joined > 0 {
            self.push_view(new, &mut bytes_sent, &mut left, deadline)?;
        }
        let end = Instant::now();
        let late_connections = self.late.len();
        self.late.clear();
        Ok(GmRun {
            update_delay: end - t0,
            connect_delay,
            push_delay: if joined > 0 { end - push_start } else { Duration::ZERO },
            joined,
            late_connections,
            left,
            view: self.view(),
            epoch: self.epoch,
            bytes_sent,
        })
    }

    /// Drops members whose connection closed or failed (`fds[i]` polls `members[i]`); a member
    /// that sends anything outside a view push is a protocol error.
    fn reap_members(&mut self, fds: &[libc::pollfd]) -> io::Result<usize> {
        let mut gone = vec![false; self.members.len()];
        for (i, s) in self.members.iter_mut().enumerate() {
            if fds.get(i).is_none_or(|f| f.revents == 0) {
                continue;
            }
            if s.conn.fill().is_err() {
                gone[i] = true;
                continue;
            }
            if s.conn.next_frame()?.is_some() {
                return Err(invalid_data(format_args!("member {} sent a frame outside a view push", s.conn.peer)));
            }
            gone[i] = s.conn.eof;
        }
        let n = gone.iter().filter(|&&g| g).count();
        let mut i = 0;
        self.members.retain(|_| {
            i += 1;
            !gone[i - 1]
        });
        Ok(n)
    }

    /// Adds `new` as members with a new epoch, pushes the view to old members first, then to
    /// the new ones, and waits for all acks; late connections are parked in `self.late`.
    fn push_view(&mut self, new: Vec<Conn>, bytes: &mut u64, left: &mut usize, deadline: Instant) -> io::Result<()> {
        self.epoch += 1;
        let epoch = self.epoch;
        for conn in new {
            let entry = ViewEntry { id: self.next_id, addr: conn.peer, join_epoch: epoch };
            self.next_id += 1;
            self.members.push(GmSlot { entry, conn });
        }
        let body = encode_view(epoch, &self.view())?;
        for s in &mut self.members {
            *bytes += s.conn.queue(&body)?;
            s.conn.flush()?;
        }
        let mut acked = vec![false; self.members.len()];
        let mut gone = vec![false; self.members.len()];
        loop {
            let waiting: Vec<usize> = (0..self.members.len()).filter(|&i| !acked[i] && !gone[i]).collect();
            if waiting.is_empty() {
                break;
            }
            let left_t = remaining(deadline, format_args!("{} view acks missing", waiting.len()))?;
            let mut fds = vec![pollfd(self.listener.as_raw_fd(), libc::POLLIN)];
            fds.extend(waiting.iter().map(|&i| pollfd(self.members[i].conn.fd(), self.members[i].conn.events())));
            poll_fds(&mut fds, left_t)?;
            for (j, &i) in waiting.iter().enumerate() {
                let re = fds[j + 1].revents;
                if re == 0 {
                    continue;
                }
                let c = &mut self.members[i].conn;
                let ok = (|| -> io::Result<()> {
                    c.flush()?;
                    if re & READABLE != 0 {
                        c.fill()?;
                    }
                    while let Some(f) = c.next_frame()? {
                        if f == view_ack(epoch) {
                            acked[i] = true;
                        } else {
                            return Err(invalid_data(format_args!("member {} sent an unexpected frame", c.peer)));
                        }
                    }
                    Ok(())
                })();
                match ok {
                    Err(e) if e.kind() == io::ErrorKind::InvalidData => return Err(e),
                    Err(_) => gone[i] = true,
                    Ok(()) => gone[i] = c.eof && !acked[i],
                }
            }
            if fds[0].revents != 0 {
                self.late.extend(accept_all(&self.listener)?);
            }
        }
        *left += gone.iter().filter(|&&g| g).count();
        let mut i = 0;
        self.members.retain(|_| {
            i += 1;
            !gone[i - 1]
        });
        Ok(())
    }
}

/// Result of a group member's run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GmMemberRun {
    /// Joiner: poll received → first view containing it received (the paper's join delay).
    /// `None` for an initial member or a joiner that did not join.
    pub join_delay: Option<Duration>,
    /// When the join poll arrived (joiners).
    pub poll_received_at: Option<Instant>,
    /// When the member first received a view containing it.
    pub member_since: Option<Instant>,
    /// Views received and acknowledged.
    pub views: u32,
    /// The last view received.
    pub view: Vec<ViewEntry>,
    /// Own id in that view.
    pub id: Option<u32>,
}

/// A process of the TCP-based group management baseline: an initial member (connects at once)
/// or a joiner (waits for the join poll on its UDP socket, then connects).
#[derive(Debug)]
pub struct GmMember {
    poll: Option<UdpSocket>,
}

impl GmMember {
    /// An initial member: [`GmMember::run`] connects immediately.
    pub fn initial() -> Self {
        Self { poll: None }
    }

    /// A joiner listening for the join poll on `poll_bind` (bind `0.0.0.0:port` to receive
    /// broadcast polls; `SO_REUSEADDR` is set). The socket is bound when this returns, so a
    /// poll sent afterwards is not missed.
    pub fn joiner(poll_bind: SocketAddr) -> io::Result<Self> {
        use socket2::{Domain, Protocol, Socket, Type};
        let sock = Socket::new(Domain::for_address(poll_bind), Type::DGRAM, Some(Protocol::UDP))?;
        sock.set_reuse_address(true)?;
        sock.bind(&poll_bind.into()).map_err(|e| with_context(e, format_args!("bind poll socket {poll_bind}")))?;
        Ok(Self { poll: Some(sock.into()) })
    }

    /// The poll socket's address (joiners).
    pub fn poll_addr(&self) -> Option<SocketAddr> {
        self.poll.as_ref().and_then(|s| s.local_addr().ok())
    }

    /// Runs the member: (joiner) wait for the poll, connect to `coord_tcp`, then acknowledge
    /// every view until `stop` is set or the coordinator closes the connection. At `deadline`
    /// it returns what it has if it became a member, else a `TimedOut` error.
    pub fn run(self, coord_tcp: SocketAddr, deadline: Instant, stop: &AtomicBool) -> io::Result<GmMemberRun> {
        let mut run = GmMemberRun {
            join_delay: None,
            poll_received_at: None,
            member_since: None,
            views: 0,
            view: Vec::new(),
            id: None,
        };
        if let Some(sock) = &self.poll {
            let mut buf = [0u8; 64];
            loop {
                if stop.load(Ordering::Relaxed) {
                    return Ok(run);
                }
                let left = remaining(deadline, "waiting for the join poll")?;
                sock.set_read_timeout(sock_timeout(left.min(STOP_POLL)))?;
                match sock.recv_from(&mut buf) {
                    Ok((n, _)) if n == 8 && &buf[..4] == POLL_MAGIC => {
                        run.poll_received_at = Some(Instant::now());
                        break;
                    }
                    Ok(_) => {}
                    Err(e) if is_transient_udp(&e) => {}
                    Err(e) => return Err(with_context(e, "recv join poll")),
                }
            }
        }
        let stream = connect_retry(coord_tcp, deadline)?;
        let me = stream.local_addr()?;
        let mut conn = Conn::new(stream)?;
        let finish = |run: GmMemberRun| {
            if run.member_since.is_some() { Ok(run) } else { Err(timed_out("not a member yet")) }
        };
        while !stop.load(Ordering::Relaxed) {
            let Ok(left) = remaining(deadline, "member") else {
                return finish(run);
            };
            let mut fds = [pollfd(conn.fd(), conn.events())];
            poll_fds(&mut fds, left.min(STOP_POLL))?;
            if fds[0].revents == 0 {
                continue;
            }
            conn.flush()?;
            conn.fill()?;
            while let Some(frame) = conn.next_frame()? {
                let (epoch, view) =
                    decode_view(&frame).ok_or_else(|| invalid_data("malformed view from the coordinator"))?;
                let Some(mine) = view.iter().find(|e| e.addr == me) else {
                    continue;
                };
                let now = Instant::now();
                if run.member_since.is_none() {
                    run.member_since = Some(now);
                    run.join_delay = run.poll_received_at.map(|p| now - p);
                }
                run.id = Some(mine.id);
                run.views += 1;
                run.view = view;
                conn.queue(&view_ack(epoch))?;
                conn.flush()?;
            }
            if conn.eof {
                return Ok(run);
            }
        }
        Ok(run)
    }
}

/// Convenience: an initial member, or a joiner listening for the poll on `0.0.0.0:poll_port`
/// (IPv4), then [`GmMember::run`]. Use the two-step API when the harness must know that the
/// joiner's poll socket is bound before the poll is sent.
pub fn gm_member(
    coord_tcp: SocketAddr,
    poll_port: u16,
    is_initial: bool,
    deadline: Instant,
    stop: &AtomicBool,
) -> io::Result<GmMemberRun> {
    let m = if is_initial {
        GmMember::initial()
    } else {
        GmMember::joiner(SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), poll_port))?
    };
    m.run(coord_tcp, deadline, stop)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::group::baselines::common::{lo, soon};
    use std::sync::Arc;
    use std::thread;

    #[test]
    fn view_encoding_round_trips_and_rejects_garbage() {
        let view = vec![
            ViewEntry { id: 0, addr: "10.77.0.1:7400".parse().unwrap(), join_epoch: 0 },
            ViewEntry { id: 3, addr: "[fe80::1]:9".parse().unwrap(), join_epoch: 2 },
        ];
        let b = encode_view(7, &view).unwrap();
        assert_eq!(decode_view(&b), Some((7, view)));
        for cut in 0..b.len() {
            assert_eq!(decode_view(&b[..cut]), None);
        }
        let mut bad = b.clone();
        bad[15] = 5; // unknown family
        assert_eq!(decode_view(&bad), None);
        assert_eq!(decode_view(&[TAG_VIEW, 0, 0, 0, 1, 0xff, 0xff]), None);
    }

    /// Runs a group of `initial` + joiners; `poll` maps the joiners' poll addresses to the
    /// addresses the coordinator polls.
    fn gm_group(
        initial: usize,
        joiner_binds: &[SocketAddr],
        poll_to: impl FnOnce(&[SocketAddr]) -> Vec<SocketAddr>,
    ) -> (GmRun, Vec<GmMemberRun>, Vec<GmMemberRun>) {
        let stop = Arc::new(AtomicBool::new(false));
        let mut coord = GmCoordinator::bind(lo()).unwrap();
        let caddr = coord.local_addr();
        let spawn = |m: GmMember| {
            let stop = Arc::clone(&stop);
            thread::spawn(move || m.run(caddr, soon(8), &stop))
        };
        let initials: Vec<_> = (0..initial).map(|_| spawn(GmMember::initial())).collect();
        coord.accept_initial(initial, soon(5)).unwrap();
        assert_eq!(coord.view().len(), initial + 1);
        let joiners: Vec<GmMember> = joiner_binds.iter().map(|b| GmMember::joiner(*b).unwrap()).collect();
        let polled: Vec<SocketAddr> = joiners.iter().map(|j| j.poll_addr().unwrap()).collect();
        let joiners: Vec<_> = joiners.into_iter().map(spawn).collect();
        let targets = poll_to(&polled);
        let round = GmRound {
            poll_to: &targets,
            joiners_expected: joiner_binds.len(),
            join_t: Duration::from_millis(300),
            close_early: false,
        };
        let run = coord.join_round(&round, soon(5)).unwrap();
        stop.store(true, Ordering::Relaxed);
        let collect = |hs: Vec<thread::JoinHandle<io::Result<GmMemberRun>>>| {
            hs.into_iter().map(|h| h.join().unwrap().unwrap()).collect::<Vec<_>>()
        };
        (run, collect(initials), collect(joiners))
    }

    fn check_group(run: &GmRun, initials: &[GmMemberRun], joiners: &[GmMemberRun]) {
        let n = initials.len() + joiners.len();
        assert_eq!(run.joined, joiners.len(), "{run:?}");
        assert_eq!(run.view.len(), n + 1);
        assert_eq!(run.epoch, 2);
        assert_eq!((run.left, run.late_connections), (0, 0));
        assert!(run.connect_delay.is_some() && run.push_delay <= run.update_delay);
        let ids: Vec<u32> = run.view.iter().map(|e| e.id).collect();
        assert_eq!(ids, (0..=n as u32).collect::<Vec<_>>());
        for m in initials {
            assert_eq!((m.views, m.join_delay), (2, None));
            assert_eq!(m.view, run.view);
        }
        for m in joiners {
            assert_eq!(m.views, 1);
            assert!(m.join_delay.is_some() && m.poll_received_at.is_some());
            assert_eq!(m.view, run.view);
            let entry = run.view.iter().find(|e| Some(e.id) == m.id).unwrap();
            assert_eq!(entry.join_epoch, 2);
        }
    }

    #[test]
    fn group_management_join_round_with_unicast_polls() {
        let (run, initials, joiners) = gm_group(2, &[lo(), lo()], <[SocketAddr]>::to_vec);
        check_group(&run, &initials, &joiners);
    }

    #[test]
    fn group_management_join_round_with_a_broadcast_poll_on_loopback() {
        // Linux routes 127.255.255.255 as the broadcast address of lo: every socket bound to
        // 0.0.0.0:port with SO_REUSEADDR receives one copy, as in the testbed.
        let first = GmMember::joiner("0.0.0.0:0".parse().unwrap()).unwrap();
        let port = first.poll_addr().unwrap().port();
        drop(first);
        let any: SocketAddr = SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), port);
        let bcast = SocketAddr::new(IpAddr::V4(Ipv4Addr::new(127, 255, 255, 255)), port);
        let (run, initials, joiners) = gm_group(2, &[any, any], |_| vec![bcast]);
        check_group(&run, &initials, &joiners);
    }

    #[test]
    fn group_management_bounds() {
        // No member connects: accept_initial times out. A joiner that gets no poll stops on
        // stop, and times out at its deadline.
        let mut coord = GmCoordinator::bind(lo()).unwrap();
        let deadline = Instant::now() + Duration::from_millis(200);
        let err = coord.accept_initial(1, deadline).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::TimedOut);
        let j = GmMember::joiner(lo()).unwrap();
        let stop = AtomicBool::new(true);
        let r = j.run(coord.local_addr(), soon(5), &stop).unwrap();
        assert_eq!(r.member_since, None);
        let j = GmMember::joiner(lo()).unwrap();
        let stop = AtomicBool::new(false);
        let deadline = Instant::now() + Duration::from_millis(200);
        let err = j.run(coord.local_addr(), deadline, &stop).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::TimedOut);
        // No joiner: nothing is pushed, the view stays.
        let round =
            GmRound { poll_to: &[], joiners_expected: 0, join_t: Duration::from_millis(50), close_early: false };
        let run = coord.join_round(&round, soon(5)).unwrap();
        assert_eq!((run.joined, run.epoch, run.view.len()), (0, 0, 1));
    }
}
