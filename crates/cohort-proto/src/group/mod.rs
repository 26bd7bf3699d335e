//! GCBRR: coordinated broadcast-based group request-reply and membership (seed 003).
//!
//! A [`Member`] is one process of a group, sans-IO. One member, the *coordinator* (the member
//! with the smallest ticket), broadcasts requests to any subset of the others, who answer in
//! transmission slots ordered by their process ids (`posBit(rmask)`): the first answers as soon
//! as its application has replied, every later one right after it overhears its predecessor's
//! reply, or when its slot timer fires if that reply was lost. Replies never contend with each
//! other, and a request plus N replies take N + 1 transmissions. When the round's timer fires,
//! the coordinator re-broadcasts the request addressing only the processes still missing.
//!
//! Membership (Algorithms 3-6): the coordinator invites joins with a join poll
//! ([`Member::check_joins`]), gives each joiner the next ticket, and pushes the new view first
//! to the old members and then to each new one in ticket order; it invites leaves with a leave
//! poll ([`Member::check_leaves`]). When the coordinator fails or leaves, every member removes
//! it and takes the member with the next smallest ticket as coordinator, without exchanging a
//! message; that member, unless it is itself leaving, becomes coordinator
//! ([`Event::BecameCoord`]) and pushes its view if it holds members whose admission push had
//! not completed.
//!
//! # Mapping to seed 003
//!
//! | paper | here |
//! |---|---|
//! | Table II `state`, `myid`, `coordid`, `grp`, `seqno`, `rmask`, `replies`, `reply` | [`State`], `pid`, `coord`, [`View`], per-coordinator request numbers, the running round's [`PidMask`], [`Replies`], the stored reply (re-sent, never recomputed) |
//! | Table III messages | [`cohort_wire::group::Message`], plus HBEAT for the fault detector and AGAIN for repairs without the request ([`Config::ask_again`]) |
//! | Alg. 1 `Init` | [`Member::with_group`] (static group) or [`Member::new`] + [`Member::join`] |
//! | Alg. 2 request-reply | [`Member::request_reply`], [`Event::Request`] + [`Member::reply`], [`Event::Replies`] |
//! | Alg. 3 join | [`Member::join`], [`Member::check_joins`] → [`Event::JoinsChecked`] |
//! | Alg. 4 leave | [`Member::leave`], [`Member::check_leaves`] → [`Event::LeavesChecked`] |
//! | Alg. 5 view push | two phases, old members then each new one in ticket order |
//! | Alg. 6 failure and election | removal, `minTicket` election, takeover push, leave-instead-of-take-over |
//!
//! # Timers
//!
//! With `MsgT` = [`Config::msg_t`]: a request round waits `MsgT + procT + n·MsgT` for `n`
//! missing replies; a view-push round `MsgT + n·MsgT`; a join or leave poll `2·MsgT + joinT`
//! (`leaveT`). An addressed process sends in slot `k` (1-based) `(k - 1)·MsgT` after its reply
//! is ready, or earlier: right after it overhears slot `k - 1`, or `(k - 1 - j)·MsgT` after it
//! overhears slot `j`. With [`Config::learn_msg_t`], a request round's slots count in the
//! `MsgT` learned from the spacing of the answers instead (see `timing`): the round waits
//! `MsgT + procT + n·MsgT'` with `MsgT'` the learned one, and the coordinator's early repair
//! goes at the earlier of `k·MsgT` after the latest reply and `k·MsgT'` after the later of the
//! latest reply and `MsgT + procT` after the broadcast. With [`Config::ask_again`], a repair
//! round that asks only members known to hold the request (another member overheard their
//! replies) omits its data and its `procT`.
//!
//! # Fault detection (what the paper assumes, built here)
//!
//! Any message from a process is a sign of life; a member that has sent nothing for
//! [`Config::heartbeat_t`] broadcasts a heartbeat (HBEAT) carrying the pids of its view; the
//! coordinator sends one every `heartbeat_t` whatever else it sends, but not among the
//! answers of a round it waits for if it can help it (it would contend with them for the
//! channel): one that comes due then waits, up to half a `heartbeat_t`, for the round's end and
//! goes ahead of the next round's broadcast, and keeps its schedule. The
//! coordinator suspects a member it has not heard from for [`Config::fault_detect_t`]; an
//! ordinary member suspects its coordinator likewise. Every process carries an *incarnation*;
//! a message from a larger incarnation of a member tells that its old incarnation failed, and
//! a process that joins again always does so with a larger one, so nothing of a former life
//! (a late message, a view entry, a reply) is taken for the new one.
//!
//! **False suspicions.** A real detector can be wrong: a loss burst or a partition longer than
//! `fault_detect_t` makes a live process look dead. Cohort then *makes the suspicion true*
//! (fail-stop emulation, as in Isis): whoever is removed from the group must leave it. The
//! removed process learns of it from the next message that shows it — the coordinator's
//! heartbeat without it, or, for a coordinator, a heartbeat from one of its members without
//! it, or a message from a second coordinator — and then broadcasts LEFT, enters
//! [`State::Left`] and reports [`Event::Left`] with [`LeftReason::Expelled`]; the application
//! may [`join`](Member::join) again (with a larger incarnation). Two coordinators that hear
//! each other settle it at once: the one that the other's view lacks, or else the one with
//! the larger ticket, stands down. Until the removed process learns it was removed, it may
//! still act: a falsely suspected coordinator may run a request that members still following
//! it answer (each answers it at most once, as always), and a falsely suspected member may
//! answer requests. Safety (STA, uniqueness of the coordinator among processes nobody has
//! removed, at-most-once) holds throughout; the join commitment GM3 holds for every process
//! that is never suspected. `fault_detect_t` should span several heartbeats (default four).
//!
//! The member never reads a clock, touches a socket or draws a random number.

mod coord;
mod member;
mod ordinary;
mod slot;
mod timing;
mod view;

pub use cohort_wire::group::PidMask;
pub use member::Member;
pub use view::{Entry, View};

use cohort_time::Instant;
use std::collections::BTreeMap;
use std::time::Duration;

/// Timing of the protocol. Every timer derives from these.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Config {
    /// `MsgT`: the longest one message takes from send to delivery, queueing and channel
    /// access included. Slots and round timers are multiples of it; choose it generously
    /// (it costs only when a message is lost). Default 30 ms: a 1500-byte frame at 1 Mbit/s
    /// (12 ms) plus contention.
    pub msg_t: Duration,
    /// `FaultDetectT`: silence after which a process is suspected. Default 1 s.
    pub fault_detect_t: Duration,
    /// A member that has sent nothing for this long sends a heartbeat. Default 250 ms, a
    /// quarter of `fault_detect_t`, so three heartbeats in a row may be lost without a false
    /// suspicion.
    pub heartbeat_t: Duration,
    /// Largest request or reply payload, bytes. Default 60 000 (a UDP datagram with room for
    /// headers, the secure frame and the reply mask of a large group).
    pub max_payload: usize,
    /// A static group's members are not started at one instant (robots boot, processes load):
    /// a member of [`Member::with_group`] suspects another only after `fault_detect_t +
    /// start_grace` without hearing it, so the members that start within `start_grace` of
    /// each other keep the static view, its tickets and its coordinator (the smallest pid).
    /// Without it, a member started `fault_detect_t` after the others is removed, readmitted
    /// with a new ticket, and the coordinator is whoever started first. Once a member has been
    /// heard, `fault_detect_t` alone applies. Default 0 (Alg. 1 as written).
    pub start_grace: Duration,
    /// The coordinator asks the members still missing again as soon as their slots have
    /// passed, rather than at the round's deadline (`MsgT + procT + n·MsgT`): at once when the
    /// reply of the last missing member's slot or a later one arrives, and otherwise `k·MsgT`
    /// after the latest reply, `k` being how many slots after it the last missing member's
    /// comes (its slot timer counts from the latest slot it heard). Replies go in slot order,
    /// so a member missing then lost the request or its reply on the air (broadcasts are never
    /// retried by the MAC; 802.11 loses them to frame errors and, beside a saturating upload,
    /// to collisions), or is still processing: it then answers once, and the early round cost
    /// one request frame; a member that missed the reply its timer counted from may send
    /// after the early round has gone (its reply counts, and the copy it sends in the new
    /// round is ignored). Only a round from which no reply came at all waits for the deadline.
    /// An answer to an earlier round that arrives sooner after a repair than any answer can
    /// follow a broadcast (see [`Stats::early_answers`]) shows that repair premature, and the
    /// coordinator's early repairs then wait the largest such lateness (plus 1 ms) more, as
    /// RACK widens its reordering window after a spurious retransmission (RFC 8985): a member
    /// slower than its slot then costs its lateness, not a request frame and a second
    /// answer. The slack is held while the premature repairs it saves (each about two slots
    /// of airtime) outweigh what it adds to the repairs that were needed, per request over
    /// about the last 16: a lossy channel whose repairs are needed drops it.
    /// Default on; `false` is Alg. 2 as written.
    pub early_repair: bool,
    /// Each broadcast goes out this many times back to back (1 to 4). 802.11 never retries a
    /// broadcast, so beside a saturating upload a request or a reply lost to a collision costs
    /// a repair round (`MsgT` or more); a second copy contends anew, after its own backoff,
    /// and is lost with it only if both are. Receivers keep the first copy (every message is
    /// idempotent: duplicates are what the protocol already tolerates from the network).
    /// Unicasts are retried by the MAC and go once. Default 1 (Alg. 1-6 as written).
    pub broadcast_copies: u8,
    /// The slot lead: a member in slot `k` that overhears slot `k - 2` sends `slot_lead` later
    /// instead of waiting to overhear slot `k - 1` (or for its `MsgT` timer). By then slot
    /// `k - 1`'s answer is on the air, and the link's carrier sense holds this one until it
    /// ends: the time each host takes to receive, process and send after the answer before it
    /// is hidden behind the next answer's frame, as a unicast's MAC ACK hides it for a
    /// point-to-point exchange; and a member that missed the request costs no `MsgT` of
    /// silence. Choose it above the predecessor's channel access and processing time (a
    /// predecessor slower than that contends with this answer, and 802.11 may lose both to a
    /// collision, repaired as any loss) and below the answers' airtime (a lead longer than
    /// a frame changes nothing). Zero: off (Alg. 2 as written). Default 2 ms: on a channel
    /// whose answers take longer than that (a 1500-byte frame below 6 Mbit/s).
    pub slot_lead: Duration,
    /// `MsgT` learned from the answers: every process times the spacing of consecutive slots'
    /// answers it hears, smoothed as RFC 6298 smooths a round trip, and a request round's
    /// slots (the members' slot timers, the coordinator's early repair and the last `n·MsgT`
    /// of its deadline) count `SRTT + max(1 ms, 4·RTTVAR)` each instead of `msg_t`, once four
    /// samples came and never longer than `msg_t`. A lost request or answer then costs the
    /// silence this channel needs, not the worst channel's. What the spacing does not show
    /// keeps its allowance: the request's delivery (`msg_t`) and the members' processing
    /// (`procT`), so the coordinator's early repair counts learned slots from no earlier than
    /// `msg_t + procT` after its broadcast (and never waits longer than `msg_t`'s). A timer
    /// that fires too soon costs one request frame (the answer it did not wait for still
    /// counts, and its copy in the new round is ignored). Default on; `false` keeps `msg_t`
    /// (Alg. 2 as written). View pushes and polls always use `msg_t`.
    pub learn_msg_t: bool,
    /// A repair round asks again without the request's data where it can. The coordinator
    /// cannot tell a member that lost the request from one whose reply it lost, so Alg. 2
    /// re-sends the whole request in every repair round; but the members overhear each
    /// other's replies (that is how their slots follow each other). With this on, every
    /// reply names the members whose replies to the same request its sender overheard before
    /// sending it, and a repair round whose missing members were all named since they were
    /// last asked sends AGAIN (the request's number and reply mask, no data): they answer with
    /// the reply they hold, in slot order, within `MsgT + n·MsgT` (no `procT`: their replies
    /// are ready). Any other repair round re-sends the request. A member that is asked again
    /// for a request it does not hold ignores it (it cannot happen while its view and
    /// incarnation stand). Default on; `false` keeps the replies and repairs of Alg. 2.
    pub ask_again: bool,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            msg_t: Duration::from_millis(30),
            fault_detect_t: Duration::from_secs(1),
            heartbeat_t: Duration::from_millis(250),
            max_payload: 60_000,
            start_grace: Duration::ZERO,
            early_repair: true,
            broadcast_copies: 1,
            slot_lead: Duration::from_millis(2),
            learn_msg_t: true,
            ask_again: true,
        }
    }
}

/// An invalid [`Config`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    #[error("msg_t must be positive")]
    MsgT,
    #[error("heartbeat_t {heartbeat_t:?} must be positive and below fault_detect_t {fault_detect_t:?}")]
    Heartbeat { heartbeat_t: Duration, fault_detect_t: Duration },
    #[error("max_payload {0} above 65 000")]
    Payload(usize),
    #[error("broadcast_copies {0} outside 1..=4")]
    Copies(u8),
}

impl Config {
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.msg_t.is_zero() {
            return Err(ConfigError::MsgT);
        }
        if self.heartbeat_t.is_zero() || self.heartbeat_t >= self.fault_detect_t {
            return Err(ConfigError::Heartbeat { heartbeat_t: self.heartbeat_t, fault_detect_t: self.fault_detect_t });
        }
        if self.max_payload > 65_000 {
            return Err(ConfigError::Payload(self.max_payload));
        }
        if !(1..=4).contains(&self.broadcast_copies) {
            return Err(ConfigError::Copies(self.broadcast_copies));
        }
        Ok(())
    }
}

/// Membership state (Table II `state`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum State {
    /// A member of the group.
    Normal,
    /// Waiting for a join poll, or for the view after answering one.
    Join,
    /// A member waiting for a leave poll to leave (it keeps answering requests meanwhile).
    Leave,
    /// Not a member.
    Left,
}

pub use crate::{Dest, Transmit};

/// A request this process issued as coordinator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RequestId(pub u64);

/// A request this process was asked to handle: coordinator, its incarnation, request number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct IncomingId {
    pub coord: u32,
    pub coord_incarnation: u32,
    pub seqno: u64,
}

/// The outcome of [`Member::request_reply`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Replies {
    pub id: RequestId,
    /// The reply of each addressed process that answered.
    pub replies: BTreeMap<u32, Vec<u8>>,
    /// Addressed processes that failed, left or were not members.
    pub failed: Vec<u32>,
    /// When the request was issued and when its last reply (or failure) came in.
    pub issued_at: Instant,
    pub done_at: Instant,
    /// Request broadcasts this round took (1 without loss).
    pub broadcasts: u32,
}

/// Why this process left the group.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LeftReason {
    /// [`Member::leave`] completed.
    Requested,
    /// The group removed this process (a suspicion, true or false): `by` showed it.
    Expelled { by: u32 },
    /// Elected coordinator while leaving: left instead of taking over (Alg. 6).
    LeftInsteadOfTakingOver,
}

/// Why a member was removed from this process's view.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RemoveReason {
    /// The fault detector: silent for `fault_detect_t`.
    Suspected,
    /// It announced its departure (LEFT).
    Left,
    /// The coordinator's view no longer holds it.
    ByCoordinator,
    /// A larger incarnation of it was heard: the old one is gone.
    Superseded,
}

/// What the application should know.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// This process is the coordinator, of a group with these members (`BecameCoord`).
    BecameCoord { members: Vec<u32> },
    /// The coordinator's view changed (`GroupChanged`; only the coordinator gets it).
    GroupChanged { members: Vec<u32> },
    /// Handle this request and answer with [`Member::reply`] (`ProcessRequest`).
    Request { id: IncomingId, data: Vec<u8> },
    /// A request of this coordinator completed: every addressed process answered or failed.
    Replies(Replies),
    /// A request could not complete because this process stopped being coordinator.
    RequestAborted { id: RequestId },
    /// `join` completed: this process is a member.
    Joined { coord: u32, members: Vec<u32> },
    /// This process is no longer a member.
    Left { reason: LeftReason },
    /// A `check_joins` completed; these processes were admitted and told so.
    JoinsChecked { added: Vec<u32> },
    /// A `check_leaves` completed; these processes announced their departure.
    LeavesChecked { left: Vec<u32> },
    /// Diagnostic, at every process: `pid` (incarnation `incarnation`) left this view.
    Removed { pid: u32, incarnation: u32, reason: RemoveReason },
}

/// Why [`Member::request_reply`] refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RequestError {
    #[error("only the coordinator issues requests")]
    NotCoordinator,
    #[error("payload of {len} bytes above max_payload {max}")]
    TooLarge { len: usize, max: usize },
}

/// Why [`Member::reply`] refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReplyError {
    #[error("{0:?} is not the request in progress")]
    Stale(IncomingId),
    #[error("{0:?} was already answered")]
    AlreadyReplied(IncomingId),
    #[error("payload of {len} bytes above max_payload {max}")]
    TooLarge { len: usize, max: usize },
}

/// Why [`Member::join`] refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum JoinError {
    #[error("already a member or joining")]
    NotLeft,
    #[error("incarnations exhausted")]
    Incarnations,
}

/// Why [`Member::leave`] refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum LeaveError {
    #[error("not a member")]
    NotMember,
}

/// Why [`Member::check_joins`] or [`Member::check_leaves`] refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum PollError {
    #[error("only the coordinator polls")]
    NotCoordinator,
}

/// Why [`Member::with_group`] refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InitError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("the group must contain the local process {0}")]
    NotInGroup(u32),
    /// Reply slots address members by their offset from the smallest pid, so a group spans at
    /// most `cohort_wire::group::MAX_SPAN` consecutive pids.
    #[error("pids {lo} and {hi} are more than {} apart", cohort_wire::group::MAX_SPAN - 1)]
    Span { lo: u32, hi: u32 },
}

/// Counters, for benchmarks and diagnostics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    pub frames_sent: u64,
    pub bytes_sent: u64,
    pub broadcasts_sent: u64,
    pub unicasts_sent: u64,
    pub requests_sent: u64,
    pub replies_sent: u64,
    pub polls_sent: u64,
    pub joins_sent: u64,
    pub pushes_sent: u64,
    pub acks_sent: u64,
    pub heartbeats_sent: u64,
    pub lefts_sent: u64,
    pub frames_received: u64,
    /// Datagrams that did not parse.
    pub malformed: u64,
    /// Parsed messages that this state had no use for (stale, foreign, duplicate).
    pub ignored: u64,
    /// Members this process suspected.
    pub suspicions: u64,
    /// Requests this process handled (one [`Event::Request`] each).
    pub requests_handled: u64,
    /// Request rounds this coordinator started early ([`Config::early_repair`]).
    pub early_repairs: u64,
    /// Repair rounds this coordinator sent without the request's data ([`Config::ask_again`];
    /// not counted in `requests_sent`).
    pub again_sent: u64,
    /// Replies that reached this coordinator sooner after a repair round that asked for them
    /// than one answer follows another (the least spacing of consecutive answers it heard;
    /// before it heard any, one slot: the learned `MsgT`, or `msg_t`): an answer to that round
    /// takes the repair's delivery and its own, so these answered the round before, and the
    /// repair went before they could arrive (a slow member, or a timer too short for this
    /// channel). Each widens the early repair's wait ([`Config::early_repair`]).
    pub early_answers: u64,
    /// Extra copies of broadcasts sent ([`Config::broadcast_copies`]).
    pub broadcast_copies: u64,
    /// Joiners refused because their pid would make the group span more pids than reply
    /// slots can address (`cohort_wire::group::MAX_SPAN`).
    pub joins_refused: u64,
}

#[cfg(test)]
mod tests;
