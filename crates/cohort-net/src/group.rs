//! `GroupSocket`: one GCBRR group member (`cohort_proto::group::Member`) on UDP.
//!
//! Broadcasts go to the team's broadcast address — a subnet broadcast such as
//! `10.77.0.255:7400`, or an IPv4 multicast group such as `239.7.7.7:7400` — and unicasts
//! (JOIN to the coordinator) to the address the destination was last heard from. Every member
//! uses the same port. A socket holds two UDP sockets: one bound to its own address, from which
//! it sends and where unicasts arrive, and one bound to the broadcast address and port, where
//! broadcasts arrive (so several members can share a host, each on its own address).
//!
//! Every datagram is a secure frame of kind `GROUP` sealed with the team key, with the
//! member's pid as sender id: a datagram from outside the team is dropped (and counted) before
//! the protocol sees it, so only key holders can join or be heard. The first packet number is
//! the wall clock in nanoseconds, so a restarted process never repeats a nonce and the others'
//! replay windows accept it.
//!
//! The handle is cheap to share between threads (`&self` everywhere); a driver thread waits on
//! both sockets, a `timerfd` and a waker in one `epoll` and runs every protocol step. Blocking
//! calls take a timeout; every one has an `_async` twin that works on any executor.

use crate::backlog::{Backlog, Taken};
use crate::secure::{Secure, SecureError};
use crate::shared::{Shared, Wait};
use crate::timer::TimerFd;
use cohort_proto::group::{
    self, Dest, Event, IncomingId, InitError, JoinError, LeaveError, Member, PollError, Replies, ReplyError,
    RequestError, RequestId, State, Stats,
};
use cohort_wire::frame::kind;
use mio::net::UdpSocket;
use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Token, Waker};
use std::collections::{HashMap, VecDeque};
use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

const UNICAST: Token = Token(0);
const BROADCAST: Token = Token(1);
const TIMER: Token = Token(2);
const WAKE: Token = Token(3);

/// Membership events kept for [`GroupSocket::next_event`] when nobody reads them; older ones
/// are dropped (and counted) beyond this.
const EVENT_BACKLOG: usize = 1024;

/// IPv4 and UDP headers, and the Ethernet/802.11 MTU they must fit in unfragmented.
const UDP_IPV4: usize = 28;
const ETHERNET_MTU: usize = 1500;

/// Outcomes of requests and polls kept until their callers collect them; the oldest are
/// dropped (and counted) beyond this, and their callers told [`GroupError::OutcomeDropped`].
const OUTCOME_BACKLOG: usize = 1024;
/// How long past an answer's slot a closing socket waits for its driver to send it.
const LINGER_MARGIN: Duration = Duration::from_millis(20);

/// How to open a [`GroupSocket`].
#[derive(Debug, Clone)]
pub struct GroupConfig {
    /// Protocol timing.
    pub group: group::Config,
    /// The team secret every member holds (at least 16 bytes); keys are derived from it.
    pub team_secret: Vec<u8>,
    pub team_id: u32,
    /// This process's id, unique in the team; also its frame sender id.
    pub pid: u32,
    /// This member's own address (`ip:port`); the port is the team's.
    pub local: SocketAddr,
    /// The team's broadcast address: a subnet broadcast or an IPv4 multicast group, on the
    /// same port as `local`.
    pub broadcast: SocketAddr,
    /// DSCP code point for outgoing datagrams (0..=63); 46 (EF) puts them on Wi-Fi's AC_VO.
    pub dscp: Option<u8>,
    /// Accept requests and replies that need more than one 1500-byte frame (IP-fragmented:
    /// one lost fragment of a broadcast loses the message, as 802.11 does not retry
    /// broadcasts). Default `false`: such a payload is refused with
    /// [`GroupError::BeyondOneFrame`]; carry it over an [`crate::LrtSocket`] instead.
    pub allow_fragmentation: bool,
}

impl GroupConfig {
    pub fn new(
        team_secret: impl Into<Vec<u8>>,
        team_id: u32,
        pid: u32,
        local: SocketAddr,
        broadcast: SocketAddr,
    ) -> Self {
        GroupConfig {
            group: group::Config::default(),
            team_secret: team_secret.into(),
            team_id,
            pid,
            local,
            broadcast,
            dscp: None,
            allow_fragmentation: false,
        }
    }
}

/// Where a new socket starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Start {
    /// A member of the static initial group `pids` (`Init(pid, pids)`): the smallest pid
    /// coordinates. For the first start of a team only: a process that restarts must [`Start::Outside`]
    /// and join, or the others would take its new life for its old one.
    Static(Vec<u32>),
    /// Outside the group; [`GroupSocket::join`] joins. `incarnation` must be at least the
    /// largest this pid ever used ([`incarnation_from_clock`] is a safe choice across restarts).
    Outside { incarnation: u32 },
}

/// An incarnation above every earlier one of a process that restarts at most once a second:
/// the wall clock in seconds (fits a `u32` until 2106).
pub fn incarnation_from_clock() -> u32 {
    let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    u32::try_from(secs).unwrap_or(u32::MAX - 1)
}

/// What went wrong.
#[derive(Debug, thiserror::Error)]
pub enum GroupError {
    #[error("socket: {0}")]
    Io(#[from] io::Error),
    #[error("invalid configuration: {0}")]
    Config(String),
    #[error(transparent)]
    Init(#[from] InitError),
    #[error(transparent)]
    Request(#[from] RequestError),
    #[error(transparent)]
    Reply(#[from] ReplyError),
    #[error(transparent)]
    Join(#[from] JoinError),
    #[error(transparent)]
    Leave(#[from] LeaveError),
    #[error(transparent)]
    Poll(#[from] PollError),
    #[error("request {0:?} aborted: this process stopped being coordinator")]
    Aborted(RequestId),
    #[error("this process stopped being coordinator before the poll completed")]
    Deposed,
    #[error("this process left the group")]
    NotMember,
    #[error("the outcome was dropped: more than {OUTCOME_BACKLOG} outcomes were left uncollected")]
    OutcomeDropped,
    #[error("timed out")]
    TimedOut,
    #[error("the driver stopped")]
    Stopped,
    #[error(transparent)]
    Entropy(#[from] cohort_wire::frame::EntropyError),
    /// Another socket on this robot (this network namespace) already runs this pid in this
    /// group (team id and broadcast address).
    #[error("pid {pid} of team {team} is already in use on this host; give this process another pid")]
    PidInUse { team: u32, pid: u32 },
    /// The payload does not fit one frame for this group's pids (see
    /// [`max_unfragmented_payload`]); send it over an `LrtSocket`, or set
    /// [`GroupConfig::allow_fragmentation`].
    #[error("payload of {len} bytes needs more than one frame in this group (at most {max}); send it over LRT")]
    BeyondOneFrame { len: usize, max: usize },
}

/// A request to handle: answer it with [`GroupSocket::reply`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub id: IncomingId,
    pub data: Vec<u8>,
    /// When the request reached this member (its socket's driver handed it out), so an
    /// application can tell how long it took to answer, waiting for a thread included.
    pub received: std::time::Instant,
}

/// Counters of the socket, besides the member's own.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct GroupSocketStats {
    pub member: Stats,
    pub datagrams_sent: u64,
    pub wire_bytes_sent: u64,
    pub datagrams_received: u64,
    pub wire_bytes_received: u64,
    /// Datagrams that failed a frame check (wrong team or key, tampered, replayed, another
    /// payload kind).
    pub rejected_frames: u64,
    pub frames: cohort_wire::frame::RejectCounters,
    /// This socket's own broadcasts, heard back and dropped.
    pub own_echoes: u64,
    /// Authentic datagrams with this socket's pid from another life: another robot uses the
    /// pid (dropped, and warned about once).
    pub pid_conflicts: u64,
    /// Unicasts to a pid whose address was not known yet, broadcast instead.
    pub unicast_fallbacks: u64,
    /// Datagrams the kernel refused to send (full buffer, no route): lost, as on the air.
    pub send_errors: u64,
    /// Datagrams larger than one 1500-byte IP packet, so IP-fragmented (a lost fragment of a
    /// broadcast loses the message: keep payloads under [`max_unfragmented_payload`]).
    pub fragmented_datagrams: u64,
    /// Membership events dropped because nobody read them.
    pub events_dropped: u64,
    /// Request and poll outcomes dropped because nobody collected them.
    pub outcomes_dropped: u64,
    /// Times the driver woke the application's waiting calls: only when something they wait
    /// for may have changed (an event, a state, an answer leaving), not per datagram, so a
    /// member that overhears its team's replies does not wake its application for each.
    pub waiter_wakeups: u64,
}

#[derive(Debug)]
struct Inner {
    member: Member,
    secure: Secure,
    /// Where each pid was last heard from.
    addrs: HashMap<u32, SocketAddr>,
    stats: GroupSocketStats,
    requests: VecDeque<Request>,
    events: VecDeque<Event>,
    /// Outcomes of this coordinator's requests, until their callers collect them.
    outcomes: Backlog<RequestId, Result<Replies, RequestId>>,
    /// Completed join and leave polls, numbered from 1 in completion order, until collected.
    joins_done: Backlog<usize, Vec<u32>>,
    leaves_done: Backlog<usize, Vec<u32>>,
    /// Polls completed so far.
    joins_completed: usize,
    leaves_completed: usize,
    /// Polls queued so far; the `n`th completes as entry `n` of `*_done` (a coordinator
    /// completes polls of one kind in the order they were queued).
    joins_started: usize,
    leaves_started: usize,
    shutdown: bool,
    /// Events routed so far.
    routed: u64,
}

impl Inner {
    /// Everything a waiting call's condition reads can change only when this does (or when
    /// answers that waited for their slots no longer wait): routed events (requests,
    /// outcomes, polls, membership), the member's state, the frames it sent (an answer the
    /// application made ready and the driver sent between two looks), shutdown.
    fn observable(&self) -> (u64, State, u64, bool) {
        (self.routed, self.member.state(), self.member.stats().frames_sent, self.shutdown)
    }

    /// Routes the member's events to whoever waits for them.
    fn route_events(&mut self) {
        while let Some(ev) = self.member.poll_event() {
            self.routed += 1;
            match ev {
                Event::Request { id, data } => {
                    self.requests.push_back(Request { id, data, received: std::time::Instant::now() })
                }
                Event::Replies(r) => {
                    self.outcomes.insert(r.id, Ok(r));
                }
                Event::RequestAborted { id } => {
                    self.outcomes.insert(id, Err(id));
                }
                Event::JoinsChecked { added } => {
                    self.joins_completed += 1;
                    self.joins_done.insert(self.joins_completed, added);
                }
                Event::LeavesChecked { left } => {
                    self.leaves_completed += 1;
                    self.leaves_done.insert(self.leaves_completed, left);
                }
                other => {
                    if matches!(other, Event::BecameCoord { .. }) {
                        // A new coordinator has no polls queued: a former reign's unfinished
                        // polls were answered `Deposed` and will never complete.
                        self.joins_started = self.joins_completed;
                        self.leaves_started = self.leaves_completed;
                    }
                    if self.events.len() == EVENT_BACKLOG {
                        self.events.pop_front();
                        self.stats.events_dropped += 1;
                    }
                    self.events.push_back(other);
                }
            }
        }
    }
}

/// One member of a GCBRR group over UDP. See the [module docs](self).
#[derive(Debug)]
pub struct GroupSocket {
    shared: Arc<Shared<Inner>>,
    thread: Option<JoinHandle<()>>,
    pid: u32,
    local: SocketAddr,
    allow_fragmentation: bool,
    /// Holds this process's claim on its (team, pid) until the socket is dropped.
    _claim: std::os::unix::net::UnixDatagram,
}

fn udp_socket(addr: SocketAddr, dscp: Option<u8>) -> Result<socket2::Socket, GroupError> {
    use socket2::{Domain, Protocol, Socket, Type};
    let s = Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP))?;
    if let Some(d) = dscp {
        if d > 63 {
            return Err(GroupError::Config(format!("dscp {d} exceeds 63")));
        }
        s.set_tos_v4(u32::from(d) << 2)?;
    }
    s.set_nonblocking(true)?;
    Ok(s)
}

/// The unicast socket (bound to `local`, allowed to broadcast) and the broadcast one.
fn bind(cfg: &GroupConfig) -> Result<(std::net::UdpSocket, std::net::UdpSocket), GroupError> {
    let (SocketAddr::V4(local), SocketAddr::V4(bcast)) = (cfg.local, cfg.broadcast) else {
        return Err(GroupError::Config("group sockets are IPv4 (broadcast or multicast)".into()));
    };
    if local.port() != bcast.port() || local.port() == 0 {
        return Err(GroupError::Config(format!(
            "local {local} and broadcast {bcast} must share one nonzero port (the team's)"
        )));
    }
    let uni = udp_socket(cfg.local, cfg.dscp)?;
    uni.set_broadcast(true)?;
    uni.set_reuse_address(true)?;
    if bcast.ip().is_multicast() {
        uni.set_multicast_if_v4(local.ip())?;
        uni.set_multicast_loop_v4(true)?;
    }
    uni.bind(&cfg.local.into())?;
    let bc = udp_socket(cfg.broadcast, None)?;
    bc.set_reuse_address(true)?;
    if bcast.ip().is_multicast() {
        bc.join_multicast_v4(bcast.ip(), local.ip())?;
    }
    bc.bind(&cfg.broadcast.into())?;
    Ok((uni.into(), bc.into()))
}

impl GroupSocket {
    /// Binds the sockets and starts the driver. With [`Start::Static`] the socket is a member
    /// at once; with [`Start::Outside`] call [`join`](Self::join).
    pub fn open(cfg: GroupConfig, start: Start) -> Result<Self, GroupError> {
        let key = cohort_wire::frame::TeamKey::derive(&cfg.team_secret, cfg.team_id)
            .map_err(|e| GroupError::Config(e.to_string()))?;
        let claim = claim_pid(cfg.team_id, cfg.broadcast, cfg.pid)?;
        let (uni, bc) = bind(&cfg)?;
        let local = uni.local_addr()?;
        let mut uni = UdpSocket::from_std(uni);
        let mut bc = UdpSocket::from_std(bc);
        let poll = Poll::new()?;
        let timer = TimerFd::new()?;
        poll.registry().register(&mut uni, UNICAST, Interest::READABLE)?;
        poll.registry().register(&mut bc, BROADCAST, Interest::READABLE)?;
        poll.registry().register(&mut SourceFd(&timer.as_raw_fd()), TIMER, Interest::READABLE)?;
        let waker = Waker::new(poll.registry(), WAKE)?;
        let clock_zero = cohort_time::Instant::ZERO;
        let member = match start {
            Start::Static(pids) => Member::with_group(cfg.group, cfg.pid, &pids, clock_zero)?,
            Start::Outside { incarnation } => {
                Member::new(cfg.group, cfg.pid, incarnation).map_err(|e| GroupError::Config(e.to_string()))?
            }
        };
        let mut inner = Inner {
            member,
            secure: Secure::new(key, cfg.pid, kind::GROUP)?,
            addrs: HashMap::new(),
            stats: GroupSocketStats::default(),
            requests: VecDeque::new(),
            events: VecDeque::new(),
            outcomes: Backlog::new(OUTCOME_BACKLOG),
            joins_done: Backlog::new(OUTCOME_BACKLOG),
            leaves_done: Backlog::new(OUTCOME_BACKLOG),
            joins_completed: 0,
            leaves_completed: 0,
            joins_started: 0,
            leaves_started: 0,
            shutdown: false,
            routed: 0,
        };
        // A static group's coordinator is one from construction on: route its BecameCoord now,
        // before any caller can queue a poll, or the poll numbering would be reset under it.
        inner.route_events();
        let shared = Arc::new(Shared::new(inner, waker));
        let s2 = shared.clone();
        let io = Io { uni, bc, broadcast: cfg.broadcast, pid: cfg.pid };
        let thread = std::thread::Builder::new().name(format!("cohort-group-{}", cfg.pid)).spawn(move || {
            if let Err(e) = drive(&s2, poll, &io, &timer) {
                tracing::error!(%e, "group driver stopped");
            }
            s2.lock().shutdown = true;
            s2.notify();
        })?;
        Ok(GroupSocket {
            shared,
            thread: Some(thread),
            pid: cfg.pid,
            local,
            allow_fragmentation: cfg.allow_fragmentation,
            _claim: claim,
        })
    }

    pub fn pid(&self) -> u32 {
        self.pid
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// Membership state.
    pub fn state(&self) -> State {
        self.shared.lock().member.state()
    }

    /// The coordinator, as this process sees it.
    pub fn coordinator(&self) -> Option<u32> {
        self.shared.lock().member.coordinator()
    }

    pub fn is_coordinator(&self) -> bool {
        self.shared.lock().member.is_coordinator()
    }

    /// The members of this process's view, by pid.
    pub fn members(&self) -> Vec<u32> {
        self.shared.lock().member.view().pids()
    }

    pub fn stats(&self) -> GroupSocketStats {
        let g = self.shared.lock();
        let mut s = g.stats;
        s.member = g.member.stats();
        s.rejected_frames = g.secure.rejected();
        s.frames = g.secure.counters();
        s.outcomes_dropped = g.outcomes.dropped() + g.joins_done.dropped() + g.leaves_done.dropped();
        s
    }

    /// Runs `f` on the member, then lets the driver send what it queued.
    fn with_member<T>(&self, f: impl FnOnce(&mut Member, cohort_time::Instant) -> T) -> Result<T, GroupError> {
        self.with_inner(|i, now| f(&mut i.member, now))
    }

    fn with_inner<T>(&self, f: impl FnOnce(&mut Inner, cohort_time::Instant) -> T) -> Result<T, GroupError> {
        let r = {
            let mut g = self.shared.lock();
            if g.shutdown {
                return Err(GroupError::Stopped);
            }
            let now = self.shared.clock.now();
            let r = f(&mut g, now);
            g.route_events();
            r
        };
        self.shared.waker.wake()?;
        Ok(r)
    }

    /// Blocks until `done` yields a value, the driver stops, or `timeout` passes.
    fn wait<T>(
        &self,
        timeout: Option<Duration>,
        mut done: impl FnMut(&mut Inner) -> Option<T>,
    ) -> Result<T, GroupError> {
        let mut out = None;
        let (g, w) = self.shared.wait_until(
            timeout.map(|t| Instant::now() + t),
            |i| i.shutdown,
            |i| {
                out = done(i);
                out.is_some()
            },
        );
        drop(g);
        match (w, out) {
            (Wait::Done, Some(v)) => Ok(v),
            (Wait::TimedOut, _) => Err(GroupError::TimedOut),
            _ => Err(GroupError::Stopped),
        }
    }

    /// Async [`wait`](Self::wait), without a timeout (wrap it in the executor's).
    async fn wait_async<T>(&self, mut done: impl FnMut(&mut Inner) -> Option<T>) -> Result<T, GroupError> {
        loop {
            let seen = self.shared.generation();
            if let Some(v) = done(&mut self.shared.lock()) {
                return Ok(v);
            }
            if !self.shared.changed_since(seen, |i| i.shutdown).await {
                return Err(GroupError::Stopped);
            }
        }
    }

    /// Issues `RequestReply(pids, data, proc_t)` as coordinator; the replies come from
    /// [`wait_replies`](Self::wait_replies). Requests queue behind the operation in progress.
    pub fn start_request(&self, pids: &[u32], data: &[u8], proc_t: Duration) -> Result<RequestId, GroupError> {
        let one_frame = !self.allow_fragmentation;
        self.with_member(|m, now| {
            if one_frame {
                fits_one_frame(m, data.len(), false)?;
            }
            Ok(m.request_reply(now, pids, data.to_vec(), proc_t)?)
        })?
    }

    fn take_outcome(i: &mut Inner, id: RequestId) -> Option<Result<Replies, GroupError>> {
        match i.outcomes.take(id) {
            Taken::Ready(r) => Some(r.map_err(GroupError::Aborted)),
            Taken::Dropped => Some(Err(GroupError::OutcomeDropped)),
            Taken::Pending => None,
        }
    }

    /// Waits for the outcome of request `id`: every addressed process answered or failed.
    pub fn wait_replies(&self, id: RequestId, timeout: Option<Duration>) -> Result<Replies, GroupError> {
        self.wait(timeout, |i| Self::take_outcome(i, id))?
    }

    /// `RequestReply`: sends `data` to the members among `pids` and waits for their replies
    /// (each answering process exactly once; those that fail or leave are listed in
    /// [`Replies::failed`]).
    pub fn request_reply(
        &self,
        pids: &[u32],
        data: &[u8],
        proc_t: Duration,
        timeout: Option<Duration>,
    ) -> Result<Replies, GroupError> {
        let id = self.start_request(pids, data, proc_t)?;
        self.wait_replies(id, timeout)
    }

    /// Async [`request_reply`](Self::request_reply).
    pub async fn request_reply_async(
        &self,
        pids: &[u32],
        data: &[u8],
        proc_t: Duration,
    ) -> Result<Replies, GroupError> {
        let id = self.start_request(pids, data, proc_t)?;
        self.wait_async(|i| Self::take_outcome(i, id)).await?
    }

    /// The next request addressed to this process (`ProcessRequest`'s input).
    pub fn next_request(&self, timeout: Option<Duration>) -> Result<Request, GroupError> {
        self.wait(timeout, |i| i.requests.pop_front())
    }

    /// Async [`next_request`](Self::next_request).
    pub async fn next_request_async(&self) -> Result<Request, GroupError> {
        self.wait_async(|i| i.requests.pop_front()).await
    }

    /// Answers request `id`; the reply goes out in this process's slot.
    pub fn reply(&self, id: IncomingId, data: &[u8]) -> Result<(), GroupError> {
        let one_frame = !self.allow_fragmentation;
        self.with_member(|m, now| {
            if one_frame {
                fits_one_frame(m, data.len(), true)?;
            }
            Ok(m.reply(now, id, data.to_vec())?)
        })?
    }

    /// The next membership event (`BecameCoord`, `GroupChanged`, `Joined`, `Left`, `Removed`).
    pub fn next_event(&self, timeout: Option<Duration>) -> Result<Event, GroupError> {
        self.wait(timeout, |i| i.events.pop_front())
    }

    /// Async [`next_event`](Self::next_event).
    pub async fn next_event_async(&self) -> Result<Event, GroupError> {
        self.wait_async(|i| i.events.pop_front()).await
    }

    /// Asks to join and waits for the coordinator's join poll and view; returns the members.
    /// On timeout the process stays in `Join` state (call again to keep waiting).
    pub fn join(&self, timeout: Option<Duration>) -> Result<Vec<u32>, GroupError> {
        if self.state() == State::Left {
            self.with_member(|m, now| m.join(now))??;
        }
        self.wait(timeout, |i| (i.member.state() == State::Normal).then(|| i.member.view().pids()))
    }

    /// Async [`join`](Self::join).
    pub async fn join_async(&self) -> Result<Vec<u32>, GroupError> {
        if self.state() == State::Left {
            self.with_member(|m, now| m.join(now))??;
        }
        self.wait_async(|i| (i.member.state() == State::Normal).then(|| i.member.view().pids())).await
    }

    /// Asks to leave and waits until this process is out of the group.
    pub fn leave(&self, timeout: Option<Duration>) -> Result<(), GroupError> {
        self.with_member(|m, now| m.leave(now))??;
        self.wait(timeout, |i| (i.member.state() == State::Left).then_some(()))
    }

    /// Async [`leave`](Self::leave).
    pub async fn leave_async(&self) -> Result<(), GroupError> {
        self.with_member(|m, now| m.leave(now))??;
        self.wait_async(|i| (i.member.state() == State::Left).then_some(())).await
    }

    /// `CheckJoins(join_t)`: one join poll; returns the processes admitted.
    pub fn check_joins(&self, join_t: Duration, timeout: Option<Duration>) -> Result<Vec<u32>, GroupError> {
        let n = self.start_poll(true, join_t)?;
        self.wait(timeout, |i| Self::poll_outcome(i, true, n))?
    }

    /// `CheckLeaves(leave_t)`: one leave poll; returns the processes that left.
    pub fn check_leaves(&self, leave_t: Duration, timeout: Option<Duration>) -> Result<Vec<u32>, GroupError> {
        let n = self.start_poll(false, leave_t)?;
        self.wait(timeout, |i| Self::poll_outcome(i, false, n))?
    }

    /// Async [`check_joins`](Self::check_joins).
    pub async fn check_joins_async(&self, join_t: Duration) -> Result<Vec<u32>, GroupError> {
        let n = self.start_poll(true, join_t)?;
        self.wait_async(|i| Self::poll_outcome(i, true, n)).await?
    }

    /// Async [`check_leaves`](Self::check_leaves).
    pub async fn check_leaves_async(&self, leave_t: Duration) -> Result<Vec<u32>, GroupError> {
        let n = self.start_poll(false, leave_t)?;
        self.wait_async(|i| Self::poll_outcome(i, false, n)).await?
    }

    /// Queues a join (`joins`) or leave poll; returns the number of its outcome (a
    /// coordinator completes polls of one kind in the order they were queued).
    fn start_poll(&self, joins: bool, t: Duration) -> Result<usize, GroupError> {
        self.with_inner(|i, now| {
            if joins {
                i.member.check_joins(now, t)?;
                i.joins_started += 1;
                Ok(i.joins_started)
            } else {
                i.member.check_leaves(now, t)?;
                i.leaves_started += 1;
                Ok(i.leaves_started)
            }
        })?
    }

    fn poll_outcome(i: &mut Inner, joins: bool, n: usize) -> Option<Result<Vec<u32>, GroupError>> {
        let done = if joins { &mut i.joins_done } else { &mut i.leaves_done };
        match done.take(n) {
            Taken::Ready(r) => Some(Ok(r)),
            Taken::Dropped => Some(Err(GroupError::OutcomeDropped)),
            Taken::Pending => (!i.member.is_coordinator()).then_some(Err(GroupError::Deposed)),
        }
    }

    /// Stops the driver without telling anyone (the others' fault detectors will notice);
    /// [`leave`](Self::leave) first to depart cleanly.
    pub fn close(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        // Answers already made ready (a reply, a view acknowledgement) wait for their slot, at
        // most (N - 1)·MsgT: linger until they are handed to the kernel, so a reply just before
        // the socket closes reaches the coordinator instead of counting as a failure.
        let due = self.shared.lock().member.answers_due().map(|t| self.shared.clock.to_std(t) + LINGER_MARGIN);
        if due.is_some() {
            let _ = self.shared.wait_until(due, |i| i.shutdown, |i| i.member.answers_due().is_none());
        }
        self.shared.lock().shutdown = true;
        let _ = self.shared.waker.wake();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for GroupSocket {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The driver's sockets.
struct Io {
    uni: UdpSocket,
    bc: UdpSocket,
    broadcast: SocketAddr,
    pid: u32,
}

fn drive(shared: &Shared<Inner>, mut poll: Poll, io: &Io, timer: &TimerFd) -> Result<(), GroupError> {
    let mut events = Events::with_capacity(64);
    let mut plain = vec![0u8; Member::MAX_DATAGRAM];
    let mut wire = vec![0u8; Member::MAX_DATAGRAM + cohort_wire::frame::OVERHEAD];
    let (mut seen, mut answers_waited) = (None, false);
    loop {
        let wake = {
            let mut g = shared.lock();
            let now = shared.clock.now();
            if g.shutdown {
                // What the member has queued (a reply due at once) still goes out.
                return transmit(&mut g, io, now, &mut plain, &mut wire);
            }
            g.member.handle_timeout(now);
            g.route_events();
            transmit(&mut g, io, now, &mut plain, &mut wire)?;
            let deadline = g.member.poll_timeout().map(|t| shared.clock.to_std(t));
            timer.set(deadline)?;
            let now_seen = Some(g.observable());
            let answers_wait = g.member.answers_due().is_some();
            let wake = now_seen != seen || (answers_waited && !answers_wait);
            answers_waited = answers_wait;
            if wake {
                g.stats.waiter_wakeups += 1;
            }
            seen = now_seen;
            wake
        };
        if wake {
            shared.notify();
        }
        crate::shared::wait_events(&mut poll, &mut events)?;
        for ev in events.iter() {
            match ev.token() {
                TIMER => {
                    timer.acknowledge();
                }
                UNICAST => receive(shared, &io.uni, io.pid, &mut wire),
                BROADCAST => receive(shared, &io.bc, io.pid, &mut wire),
                _ => {}
            }
        }
    }
}

fn transmit(
    g: &mut Inner,
    io: &Io,
    now: cohort_time::Instant,
    plain: &mut [u8],
    wire: &mut [u8],
) -> Result<(), GroupError> {
    while let Some(t) = g.member.poll_transmit(now, plain) {
        let to = match t.dest {
            Dest::Broadcast => io.broadcast,
            Dest::Unicast(pid) => match g.addrs.get(&pid) {
                Some(a) => *a,
                None => {
                    g.stats.unicast_fallbacks += 1;
                    io.broadcast
                }
            },
        };
        let len = match g.secure.seal(&plain[..t.len], wire) {
            Ok(len) => len,
            Err(SecureError::Exhausted) => return Err(GroupError::Config("packet numbers exhausted".into())),
            Err(e) => return Err(GroupError::Io(io::Error::other(e.to_string()))),
        };
        if len + UDP_IPV4 > ETHERNET_MTU {
            // 802.11 broadcasts have no link-layer retry: one lost IP fragment loses the whole
            // message. Counted and warned about, so a payload that does not fit one frame is
            // seen, not silently fragile.
            if g.stats.fragmented_datagrams == 0 {
                tracing::warn!(
                    bytes = len + UDP_IPV4,
                    "group: datagram larger than one 1500-byte frame; it is IP-fragmented"
                );
            }
            g.stats.fragmented_datagrams += 1;
        }
        match io.uni.send_to(&wire[..len], to) {
            Ok(_) => {
                g.stats.datagrams_sent += 1;
                g.stats.wire_bytes_sent += len as u64;
            }
            // A full buffer or a missing route loses the datagram, as the air would; the
            // protocol's timers repair it.
            Err(e) => {
                g.stats.send_errors += 1;
                tracing::debug!(%e, %to, "group: send_to failed");
            }
        }
    }
    Ok(())
}

fn receive(shared: &Shared<Inner>, sock: &UdpSocket, own: u32, buf: &mut [u8]) {
    crate::shared::drain(sock, buf, |datagram, from| {
        let mut g = shared.lock();
        g.stats.datagrams_received += 1;
        g.stats.wire_bytes_received += datagram.len() as u64;
        let Some(o) = g.secure.open(datagram) else {
            return;
        };
        let (sender, payload) = (o.sender_id, o.payload);
        if sender == own {
            if o.epoch == g.secure.epoch() {
                g.stats.own_echoes += 1;
            } else {
                // Another process, on another robot (this one's is refused at `open`), speaks
                // with our pid: its frames are safe (another epoch) but the group is not.
                if g.stats.pid_conflicts == 0 {
                    tracing::warn!(pid = own, "group: another robot uses this pid");
                }
                g.stats.pid_conflicts += 1;
            }
            return;
        }
        g.addrs.insert(sender, from);
        let now = shared.clock.now();
        g.member.handle_datagram(now, payload);
        g.route_events();
    });
}

/// Refuses a request (`reply` false) or reply payload of `len` bytes that would not fit one
/// frame in `m`'s group as it is now.
fn fits_one_frame(m: &Member, len: usize, reply: bool) -> Result<(), GroupError> {
    let pids = m.view().pids();
    let span = match (pids.iter().min(), pids.iter().max()) {
        (Some(lo), Some(hi)) => hi - lo + 1,
        _ => 1,
    };
    let max = if reply { max_unfragmented_reply(span) } else { max_unfragmented_payload(span) };
    if len > max { Err(GroupError::BeyondOneFrame { len, max }) } else { Ok(()) }
}

/// The payload that still fits one 1500-byte IP packet behind `msg`'s header (a message
/// without data).
fn room_after(msg: cohort_wire::group::Message<'_>) -> usize {
    let empty = cohort_wire::group::GroupRepr { pid: 1, incarnation: 0, msg };
    ETHERNET_MTU.saturating_sub(empty.buffer_len() + cohort_wire::frame::OVERHEAD + UDP_IPV4)
}

/// The widest mask of a group whose pids span `span` consecutive ids.
fn widest_mask(span: u32) -> cohort_wire::group::PidMask {
    cohort_wire::group::PidMask::from_pids([1, span.max(1)]).unwrap_or_default()
}

/// The largest reply payload whose ARPL still fits one 1500-byte IP packet, for a group whose
/// pids span `span` consecutive ids (the mask of the replies its sender overheard grows with
/// it).
pub fn max_unfragmented_reply(span: u32) -> usize {
    use cohort_wire::group::Message;
    room_after(Message::Arpl { coord: 0, coord_inc: 0, seqno: 0, heard: widest_mask(span), data: &[] })
}

/// The largest request payload whose AREQ still fits one 1500-byte IP packet, for a group
/// whose pids span `span` consecutive ids (the reply mask grows with it).
pub fn max_unfragmented_payload(span: u32) -> usize {
    use cohort_wire::group::Message;
    room_after(Message::Areq { ticket: 0, seqno: 0, rmask: widest_mask(span), data: &[] })
}

/// Claims `pid` in the group (team id and broadcast address) on this host for the life of the
/// returned socket: an abstract Unix socket named after them, which only one socket of a
/// network namespace can bind and which the kernel releases when the process dies, however it
/// dies.
fn claim_pid(team: u32, group: SocketAddr, pid: u32) -> Result<std::os::unix::net::UnixDatagram, GroupError> {
    use std::os::linux::net::SocketAddrExt;
    let name = format!("cohort/team-{team}/group-{group}/pid-{pid}");
    let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes())?;
    std::os::unix::net::UnixDatagram::bind_addr(&addr).map_err(|e| match e.kind() {
        io::ErrorKind::AddrInUse => GroupError::PidInUse { team, pid },
        _ => GroupError::Io(e),
    })
}

/// The subnet broadcast address of `ip/prefix`, for building a [`GroupConfig`].
pub fn subnet_broadcast(ip: Ipv4Addr, prefix: u8) -> IpAddr {
    let host_bits = 32 - u32::from(prefix.min(32));
    let mask = if host_bits == 32 { 0 } else { u32::MAX << host_bits };
    IpAddr::V4(Ipv4Addr::from(u32::from(ip) | !mask))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subnet_broadcast_sets_every_host_bit() {
        let b = |ip: [u8; 4], prefix| subnet_broadcast(Ipv4Addr::from(ip), prefix).to_string();
        assert_eq!(b([10, 78, 0, 3], 24), "10.78.0.255");
        assert_eq!(b([10, 78, 1, 3], 20), "10.78.15.255");
        assert_eq!(b([192, 168, 1, 1], 32), "192.168.1.1");
        assert_eq!(b([192, 168, 1, 1], 0), "255.255.255.255");
        assert_eq!(b([192, 168, 1, 1], 40), "192.168.1.1", "a prefix above 32 is taken as 32");
    }
}
