//! The per-robot agent of coordinated preemption for traffic Cohort does not send itself,
//! sans-IO: the decisions of `cohort coorp agent` (the runtime in `cohort-net` feeds it the
//! packets it sees leave the robot's interface and carries out its actions in the kernel).
//!
//! What it does with the robot's foreign traffic (a plain TCP upload, rsync, a ROS 2 or Zenoh
//! control loop that marks nothing):
//!
//! * **Flows and messages.** Packets are grouped by 5-tuple into flows, and a flow's packets
//!   that leave less than [`AgentConfig::burst_gap`] apart into one *message* (a 12 KB
//!   perception leaves as nine datagrams back to back). Every finished message goes to the
//!   flow's [`FlowClassifier`].
//! * **Marking.** A flow the classifier judges latency-sensitive (periodic and small) is marked
//!   EF, so it rides AC_VO and passes the bulk gate ([`Marking::Ef`]). The marking stays while
//!   the flow stays small (a control flow whose timing the bulk disturbed keeps the very
//!   marking that protects it); a message above the classifier's bound makes the flow bulk.
//!   A flow judged bulk (aperiodic, or messages too large) goes into the gate's bulk class
//!   ([`Marking::Bulk`]); a flow not yet judged passes untouched, so a control loop is never
//!   held while it is being learned. A flow its application marked itself (EF, CS6, CS7) is LS
//!   from its first packet; ports in [`AgentConfig::overrides`] force a verdict either way.
//! * **Local preemption.** Every LS message start feeds the [`Controller`]; the bulk is held
//!   from [`AgentConfig::lead`] before each protection window to its end ([`Action::Hold`],
//!   [`Action::Release`]), so the card's queue has drained when the control message arrives.
//!   Where the runtime can read what the card holds ([`Agent::on_card`]: the emulator
//!   publishes it, a driver keeps it as mac80211's AQL and TXQ counters), the lead is no longer
//!   a constant but Algorithm 2's: the bulk is held once what is in the card, less
//!   an allowance, would take the card until the window's start to send at the rate it was
//!   seen to drain ([`CardEstimate`]). The allowance is what a control frame waits for on a
//!   card with per-AC queues, one aggregate on the air ([`AgentConfig::card_allowance_bytes`]
//!   at the full channel rate): on a card that gets a fifth of the channel, a fifth of it.
//! * **Global preemption.** While bulk waits in the gate or flows, the robot wants the team's
//!   bulk token ([`Client`]); without it the bulk is held. The robot named arbiter runs the
//!   [`Arbiter`] too. The token goes back early once the bulk is done: its TCP senders have
//!   nothing left ([`Agent::on_send_queues`]), or it has been silent for
//!   [`AgentConfig::bulk_idle`].
//!
//! * **Cohort's own bulk.** A bulk sender that knows it is one (`cohort bulk send`) tells the
//!   agent how much it has left ([`Agent::bulk_demand`]) and hands data to the kernel only
//!   while the [`BulkPermit`] is open and only as much as can leave before the permit's end
//!   (the next protection window, or the end of the token's lease): seed 000's virtual
//!   preemption (Algorithm 2) done where the data is made, so nothing of it waits in the
//!   card when control arrives. The token is requested on the first demand, and given back
//!   the moment the last transfer closes ([`Agent::bulk_close`]; Algorithm 1's early
//!   release) rather than after [`AgentConfig::bulk_idle`]. A session silent for
//!   [`BULK_SESSION_SILENCE`] (its sender died) is forgotten, so it cannot keep the token.
//!
//! Seed 000 treats everything not LS as BH; here that holds for every flow once judged.

use super::arbiter::Arbiter;
use super::client::Client;
use super::controller::{ClassifierConfig, Controller, ControllerConfigError, FlowClass, FlowClassifier};
use super::{Config, ConfigError, Epoch};
use crate::{Dest, Transmit};
use cohort_time::Instant;
use std::collections::{HashMap, VecDeque};
use std::net::SocketAddrV4;
use std::time::Duration;

/// Which halves of COORP the agent runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Mode {
    /// Classify and mark foreign control only; never hold bulk.
    Mark,
    /// Marking and protection windows (local preemption), no token.
    Local,
    /// Marking and the bulk token (global preemption), no windows.
    Global,
    /// Both halves.
    Coorp,
}

impl Mode {
    pub fn local(self) -> bool {
        matches!(self, Mode::Local | Mode::Coorp)
    }

    pub fn global(self) -> bool {
        matches!(self, Mode::Global | Mode::Coorp)
    }

    pub fn name(self) -> &'static str {
        match self {
            Mode::Mark => "mark",
            Mode::Local => "local",
            Mode::Global => "global",
            Mode::Coorp => "coorp",
        }
    }
}

/// IP protocol numbers the agent tracks.
pub const PROTO_TCP: u8 = 6;
pub const PROTO_UDP: u8 = 17;

/// One direction of a transport flow, as seen leaving the robot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FlowKey {
    pub proto: u8,
    pub src: SocketAddrV4,
    pub dst: SocketAddrV4,
}

/// A verdict forced by the user.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Override {
    Ls,
    Bulk,
}

/// Smallest IP packet of a bulk flow that carries data: 20 bytes of IPv4 header and at most 60
/// of TCP header hold no payload. Smaller packets of a bulk flow (its TCP acknowledgements,
/// above all: the receiver of an upload acknowledges on the same connection) are never held
/// and never ask for the token, or a robot holding the token would wait for acknowledgements
/// that another robot's gate holds.
pub const BULK_DATA_MIN_BYTES: u64 = 81;

/// DSCP code points Linux maps to AC_VO (EF, CS6, CS7): traffic already marked LS.
pub const LS_DSCP: [u8; 3] = [46, 48, 56];

/// A bulk session not heard from for this long is forgotten (its sender died).
pub const BULK_SESSION_SILENCE: Duration = Duration::from_secs(1);

/// Bulk sessions one agent keeps at once; a further one is refused (closed permit).
pub const MAX_BULK_SESSIONS: usize = 64;

/// When a bulk sender that asks ([`Agent::bulk_demand`]) may hand data to the kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BulkPermit {
    /// Send now.
    pub open: bool,
    /// Until then at the latest (the next protection window, opened `lead` early, or the
    /// token's lease end); `None` while closed, or open with no end in sight.
    pub until: Option<Instant>,
}

/// One bulk sender on this robot.
#[derive(Debug, Clone, Copy)]
struct BulkSession {
    /// Its local port: its packets drive no token request of their own.
    port: u16,
    pending: u64,
    heard: Instant,
}

/// Settings of an agent.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentConfig {
    pub mode: Mode,
    pub classifier: ClassifierConfig,
    /// The bulk token's timing (the whole team must agree).
    pub token: Config,
    /// Packets of one flow closer than this belong to one message. Default 2 ms.
    pub burst_gap: Duration,
    /// A flow silent this long is forgotten (its marking removed). Default 10 s.
    pub flow_idle: Duration,
    /// The bulk is held this long before a protection window starts, so what the gate
    /// already let through drains from the card first. Default 2 ms.
    pub lead: Duration,
    /// With the card's load known ([`Agent::on_card`]): how much may still be in the card when
    /// a protection window starts, as the card drains at the full channel rate: one A-MPDU at
    /// the HT/VHT limit, as [`super::vpl::VplConfig::window_allowance_bytes`]. Default 65 535 B.
    pub card_allowance_bytes: u64,
    /// The full channel rate for one sender (bit/s; the gate's rate). With it the allowance is
    /// time, not bytes: a card that drains at a share of this rate may keep that share of
    /// [`card_allowance_bytes`](Self::card_allowance_bytes), so a control message waits no
    /// longer behind it than behind one aggregate at the full rate. `None`: bytes as given.
    pub link_rate_bps: Option<u64>,
    /// How often the runtime reads the card: a hold starts early enough for what the gate
    /// can hand the card between two readings. Default 500 µs.
    pub card_every: Duration,
    /// A token holder whose bulk has been silent this long gives it back (sooner when the
    /// kernel says its TCP senders have nothing left). Default 200 ms. Also how far back a
    /// flow counts as recent bulk ([`Agent::recent_bulk_flows`]).
    pub bulk_idle: Duration,
    /// Verdicts forced by port (either end of a flow).
    pub overrides: Vec<(u16, Override)>,
    /// Packets of this port (either end) are the agents' own and not classified.
    pub own_port: u16,
    /// Flows tracked at once; packets of further flows pass untouched and are counted (a port
    /// scan or a burst of DNS lookups must not grow the table without bound). Default 4096.
    pub max_flows: usize,
}

impl Default for AgentConfig {
    fn default() -> Self {
        AgentConfig {
            mode: Mode::Coorp,
            classifier: ClassifierConfig::default(),
            token: Config::default(),
            burst_gap: Duration::from_millis(2),
            flow_idle: Duration::from_secs(10),
            lead: Duration::from_millis(2),
            card_allowance_bytes: super::vpl::VplConfig::default().window_allowance_bytes.into(),
            link_rate_bps: None,
            card_every: Duration::from_micros(500),
            bulk_idle: Duration::from_millis(200),
            overrides: Vec::new(),
            own_port: 7470,
            max_flows: 4096,
        }
    }
}

/// How the kernel treats a flow's packets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Marking {
    /// As its application sent them (undecided flows, flows marked by their application).
    Untouched,
    /// DSCP set to EF: AC_VO on the air, past the gate.
    Ef,
    /// Into the gate's bulk class, which it holds.
    Bulk,
}

impl Marking {
    pub fn name(self) -> &'static str {
        match self {
            Marking::Untouched => "untouched",
            Marking::Ef => "ef",
            Marking::Bulk => "bulk",
        }
    }
}

/// What the runtime must do in the kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Treat the flow's packets so from now on.
    Set(FlowKey, Marking),
    /// Hold the bulk at the gate.
    Hold,
    /// Let the bulk through.
    Release,
}

/// An invalid [`AgentConfig`].
#[derive(Debug, Clone, Copy, PartialEq, thiserror::Error)]
pub enum AgentConfigError {
    #[error("bulk token: {0}")]
    Token(#[from] ConfigError),
    #[error("time model: {0}")]
    Model(#[from] ControllerConfigError),
}

/// Why a flow is LS or bulk, for `cohort coorp status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Verdict {
    /// Not enough messages yet (treated as bulk by the gate, as everything not LS).
    Undecided,
    /// Periodic and small: marked by the agent.
    Ls,
    /// Its application marks it AC_VO itself.
    MarkedByApp,
    /// Not periodic, or messages too large.
    Bulk,
    /// Forced by the user.
    Forced(Override),
}

impl Verdict {
    pub fn is_ls(self) -> bool {
        matches!(self, Verdict::Ls | Verdict::MarkedByApp | Verdict::Forced(Override::Ls))
    }

    pub fn name(self) -> &'static str {
        match self {
            Verdict::Undecided => "undecided",
            Verdict::Ls => "ls",
            Verdict::MarkedByApp => "ls-marked-by-app",
            Verdict::Bulk => "bulk",
            Verdict::Forced(Override::Ls) => "ls-forced",
            Verdict::Forced(Override::Bulk) => "bulk-forced",
        }
    }
}

/// One flow the agent knows.
#[derive(Debug, Clone)]
pub struct Flow {
    pub key: FlowKey,
    /// The controller's name for it.
    pub id: u32,
    pub verdict: Verdict,
    /// What the kernel does with its packets.
    pub marking: Marking,
    pub packets: u64,
    pub bytes: u64,
    pub last_seen: Instant,
    /// When a data packet of it last counted as bulk (`None`: never).
    pub last_bulk: Option<Instant>,
    classifier: FlowClassifier,
    burst_start: Instant,
    burst_bytes: u64,
}

impl Flow {
    pub fn classifier(&self) -> &FlowClassifier {
        &self.classifier
    }
}

/// Counters of an agent.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AgentStats {
    pub packets: u64,
    pub flows_seen: u64,
    pub flows_marked: u64,
    pub flows_unmarked: u64,
    pub ls_messages: u64,
    pub holds: u64,
    pub releases: u64,
    /// Holds for a protection window (local) and for want of the token (global).
    pub window_holds: u64,
    pub token_holds: u64,
    pub token_requests: u64,
    /// Packets of flows beyond `max_flows`, left untouched.
    pub untracked_packets: u64,
    /// Arbiters this robot started on becoming coordinator.
    pub arbiter_starts: u64,
    /// Bulk sessions opened, refused (table full), forgotten (silent), and tokens given back
    /// as the last one closed.
    pub bulk_sessions: u64,
    pub bulk_refused: u64,
    pub bulk_forgotten: u64,
    pub early_releases: u64,
    /// Tokens given back before `bulk_idle` of silence because the kernel said the foreign
    /// bulk's senders had nothing left ([`Agent::on_send_queues`]).
    pub drained_releases: u64,
    /// Readings of the card's load, and holds that began earlier than the fixed lead because
    /// the card held more than it could send before the window.
    pub card_readings: u64,
    pub card_early_holds: u64,
}

/// What one station's card holds and has completed (cumulative), as the runtime reads it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CardReading {
    pub pending_bytes: u64,
    pub sent_bytes: u64,
}

/// A card reading older than this is not trusted; the fixed lead applies again.
const CARD_STALE: Duration = Duration::from_millis(100);
/// The drain rate is sampled over this much busy time (the card completes an aggregate at a
/// time, so shorter samples see bursts and gaps instead of a rate).
const DRAIN_SAMPLE: Duration = Duration::from_millis(4);
/// The longest the bulk is held ahead of a window for the card to drain.
const MAX_CARD_LEAD: Duration = Duration::from_millis(200);

/// The card's load and rates, from the runtime's readings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CardEstimate {
    pub last: CardReading,
    pub at: Instant,
    /// Bytes per second the card sends while it has something to send (EWMA, weight 1/4, of
    /// samples over 4 ms (`DRAIN_SAMPLE`) of intervals between readings in which it never ran
    /// empty: it held more at the interval's start than it sent in it); `None` until the
    /// first sample.
    pub drain_bps: Option<f64>,
    /// Bytes per second handed to the card between the last two readings.
    pub fill_bps: f64,
    busy_bytes: u64,
    busy_time: Duration,
}

impl CardEstimate {
    pub fn new(r: CardReading, now: Instant) -> Self {
        CardEstimate { last: r, at: now, drain_bps: None, fill_bps: 0.0, busy_bytes: 0, busy_time: Duration::ZERO }
    }

    /// Takes the reading `r` made at `now` into `slot`, starting an estimate there if it holds
    /// none yet.
    pub fn observe(slot: &mut Option<CardEstimate>, r: CardReading, now: Instant) {
        match slot {
            Some(c) => c.update(r, now),
            None => *slot = Some(CardEstimate::new(r, now)),
        }
    }

    /// Takes the reading `r` made at `now`.
    pub fn update(&mut self, r: CardReading, now: Instant) {
        let dt = now.saturating_duration_since(self.at);
        if dt.is_zero() {
            return;
        }
        let sent = r.sent_bytes.saturating_sub(self.last.sent_bytes);
        let handed = (r.pending_bytes + r.sent_bytes).saturating_sub(self.last.pending_bytes + self.last.sent_bytes);
        self.fill_bps = handed as f64 / dt.as_secs_f64();
        if self.last.pending_bytes > sent {
            // It held more at the start than it sent, so it never waited for something to
            // send: what it sent is what the channel let it (a card that emptied would show
            // the rate its sender fed it, not the rate it drains at).
            self.busy_bytes += sent;
            self.busy_time += dt;
            if self.busy_time >= DRAIN_SAMPLE {
                let sample = self.busy_bytes as f64 / self.busy_time.as_secs_f64();
                self.drain_bps = Some(self.drain_bps.map_or(sample, |d| 0.75 * d + 0.25 * sample));
                (self.busy_bytes, self.busy_time) = (0, Duration::ZERO);
            }
        }
        (self.last, self.at) = (r, now);
    }

    /// How long before a window the bulk must stop so that the card holds at most `allowance`
    /// when it starts: Algorithm 2's drain time, with what the gate may add before the next
    /// reading counted in.
    pub fn lead(&self, allowance: f64, every: Duration) -> Option<Duration> {
        let drain = self.drain_bps?;
        let excess = self.last.pending_bytes as f64 + self.fill_bps * every.as_secs_f64() - allowance;
        Some(Duration::from_secs_f64((excess.max(0.0) / drain.max(1.0)).min(MAX_CARD_LEAD.as_secs_f64())))
    }
}

/// Why the gate is held now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum HoldCause {
    Window,
    Token,
}

/// The agent of one robot.
#[derive(Debug)]
pub struct Agent {
    cfg: AgentConfig,
    id: u32,
    flows: HashMap<FlowKey, Flow>,
    next_flow_id: u32,
    controller: Controller,
    client: Option<Client>,
    arbiter: Option<Arbiter>,
    held: Option<HoldCause>,
    /// Bulk packets waiting in the gate, as last reported.
    backlog: u64,
    card: Option<CardEstimate>,
    /// The end of the protection window whose hold began (it lasts to that end, however the
    /// card's drain time changes meanwhile).
    window_latch: Option<Instant>,
    /// When bulk other than a session's own last flowed or waited in the gate (`None`: never).
    last_bulk: Option<Instant>,
    /// When the kernel last said the senders of the recent bulk flows had nothing left.
    drained: Option<Instant>,
    /// When idle flows are next looked for (every tenth of `flow_idle`, not at every wake-up:
    /// the runtime calls `handle_timeout` once per batch of packets).
    next_sweep: Instant,
    actions: VecDeque<Action>,
    stats: AgentStats,
    bulk: HashMap<u64, BulkSession>,
}

impl Agent {
    /// An agent for robot `id` of a team of `members`; it hosts the arbiter if `arbiter == id`.
    pub fn new(
        cfg: AgentConfig,
        id: u32,
        arbiter: u32,
        members: &[u32],
        now: Instant,
    ) -> Result<Self, AgentConfigError> {
        cfg.token.validate()?;
        let controller = Controller::new(cfg.classifier.model)?;
        let global = cfg.mode.global();
        let client = if global { Some(Client::new(cfg.token, id)?) } else { None };
        let arbiter =
            if global && arbiter == id { Some(Arbiter::new(cfg.token, id, members, Epoch::ZERO, now)?) } else { None };
        Ok(Agent {
            cfg,
            id,
            flows: HashMap::new(),
            next_flow_id: 0,
            controller,
            client,
            arbiter,
            held: None,
            backlog: 0,
            card: None,
            window_latch: None,
            last_bulk: None,
            drained: None,
            next_sweep: now,
            actions: VecDeque::new(),
            stats: AgentStats::default(),
            bulk: HashMap::new(),
        })
    }

    pub fn id(&self) -> u32 {
        self.id
    }

    pub fn config(&self) -> &AgentConfig {
        &self.cfg
    }

    pub fn stats(&self) -> AgentStats {
        self.stats
    }

    pub fn flows(&self) -> impl Iterator<Item = &Flow> {
        self.flows.values()
    }

    pub fn controller(&self) -> &Controller {
        &self.controller
    }

    pub fn client(&self) -> Option<&Client> {
        self.client.as_ref()
    }

    pub fn arbiter(&self) -> Option<&Arbiter> {
        self.arbiter.as_ref()
    }

    pub fn is_held(&self) -> bool {
        self.held.is_some()
    }

    /// A packet of `bytes` (IP length) with DSCP `dscp` left the robot at `now`.
    pub fn on_packet(&mut self, now: Instant, key: FlowKey, bytes: u64, dscp: u8) {
        if key.src.port() == self.cfg.own_port || key.dst.port() == self.cfg.own_port {
            return;
        }
        self.stats.packets += 1;
        let forced = self.forced(&key);
        let full = self.flows.len() >= self.cfg.max_flows;
        let flow = match self.flows.entry(key) {
            std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
            std::collections::hash_map::Entry::Vacant(_) if full => {
                self.stats.untracked_packets += 1;
                return;
            }
            std::collections::hash_map::Entry::Vacant(e) => {
                self.stats.flows_seen += 1;
                let id = self.next_flow_id;
                self.next_flow_id = self.next_flow_id.wrapping_add(1);
                let classifier = FlowClassifier::new(self.cfg.classifier).expect("validated with the controller");
                e.insert(Flow {
                    key,
                    id,
                    verdict: Verdict::Undecided,
                    marking: Marking::Untouched,
                    packets: 0,
                    bytes: 0,
                    last_seen: now,
                    last_bulk: None,
                    classifier,
                    burst_start: now,
                    burst_bytes: 0,
                })
            }
        };
        let first = flow.packets == 0;
        flow.packets += 1;
        flow.bytes += bytes;
        let new_message = first || now.saturating_duration_since(flow.last_seen) > self.cfg.burst_gap;
        flow.last_seen = now;
        let mut class = None;
        if new_message {
            if !first {
                class = Some(flow.classifier.observe(flow.burst_start, flow.burst_bytes));
            }
            flow.burst_start = now;
            flow.burst_bytes = 0;
        }
        flow.burst_bytes += bytes;
        if flow.burst_bytes > self.cfg.classifier.max_message_bytes {
            // A message already past the bound is bulk before it ends.
            class = Some(FlowClass::TooLarge);
        }
        let verdict = match (forced, class) {
            (Some(o), _) => Verdict::Forced(o),
            _ if LS_DSCP.contains(&dscp) && flow.marking != Marking::Ef => Verdict::MarkedByApp,
            (None, Some(FlowClass::LatencySensitive)) => Verdict::Ls,
            (None, Some(FlowClass::TooLarge)) => Verdict::Bulk,
            // A verdict, once LS, stays through aperiodic stretches (see the module doc).
            (None, Some(FlowClass::Aperiodic)) if flow.verdict != Verdict::Ls => Verdict::Bulk,
            _ => flow.verdict,
        };
        flow.verdict = verdict;
        Self::apply_marking(flow, &mut self.stats, &mut self.actions);
        if verdict.is_ls() {
            if new_message {
                self.stats.ls_messages += 1;
                self.controller.observe(flow.id, now);
            }
        } else if bytes >= BULK_DATA_MIN_BYTES && !self.bulk.values().any(|b| b.port == key.src.port()) {
            // A bulk session's own packets are gated like any bulk, but its demand, not its
            // packets, decides when the token is wanted and given back.
            self.last_bulk = Some(now);
            flow.last_bulk = Some(now);
            self.want_token(now);
        }
        self.update_gate(now);
    }

    /// The flows whose data counted as bulk within [`AgentConfig::bulk_idle`]: the runtime
    /// asks the kernel whether their senders have anything left to send
    /// ([`on_send_queues`](Self::on_send_queues)).
    pub fn recent_bulk_flows(&self, now: Instant) -> impl Iterator<Item = FlowKey> + '_ {
        let idle = self.cfg.bulk_idle;
        self.flows
            .values()
            .filter(move |f| f.last_bulk.is_some_and(|b| now.saturating_duration_since(b) < idle))
            .map(|f| f.key)
    }

    /// What the senders of [`recent_bulk_flows`](Self::recent_bulk_flows) have left, read
    /// from the kernel after every packet shown to the agent so far: `Some(bytes)` when each
    /// is a TCP socket of this host (bytes written and not yet acknowledged, `ss`'s Send-Q),
    /// `None` when one is not (a forwarded flow, UDP). An upload whose sockets are empty is
    /// done: the token goes back now instead of after `bulk_idle` of silence, which on a team
    /// uploading in turn leaves the channel idle that long at every hand-over (Algorithm 1's
    /// early release, for applications that cannot tell the agent themselves).
    pub fn on_send_queues(&mut self, now: Instant, pending: Option<u64>) {
        self.drained = (pending == Some(0)).then_some(now);
        self.release_if_done(now, false);
        self.update_gate(now);
    }

    /// The gate holds `packets` bulk packets now (read from the kernel).
    pub fn on_backlog(&mut self, now: Instant, packets: u64) {
        self.backlog = packets;
        if packets > 0 {
            self.last_bulk = Some(now);
            self.want_token(now);
        }
        self.update_gate(now);
    }

    /// The robot's card holds `r` now (read from the driver's counters or the emulator's).
    pub fn on_card(&mut self, now: Instant, r: CardReading) {
        self.stats.card_readings += 1;
        CardEstimate::observe(&mut self.card, r, now);
        self.update_gate(now);
    }

    /// The card's load as last read (`None`: never read).
    pub fn card(&self) -> Option<&CardEstimate> {
        self.card.as_ref()
    }

    /// How long before a protection window the bulk is held: the card's drain time when a
    /// fresh reading and a drain rate are known, the fixed [`AgentConfig::lead`] otherwise.
    fn lead(&self, now: Instant) -> Duration {
        self.card
            .filter(|c| now.saturating_duration_since(c.at) <= CARD_STALE)
            .and_then(|c| c.lead(self.card_allowance(&c), self.cfg.card_every))
            .unwrap_or(self.cfg.lead)
    }

    /// The bytes a window may find in the card: the allowance, scaled by the share of the
    /// channel rate the card drains at.
    fn card_allowance(&self, c: &CardEstimate) -> f64 {
        let bytes = self.cfg.card_allowance_bytes as f64;
        match (self.cfg.link_rate_bps, c.drain_bps) {
            (Some(link), Some(drain)) if link > 0 => bytes * (drain * 8.0 / link as f64).min(1.0),
            _ => bytes,
        }
    }

    fn want_token(&mut self, now: Instant) {
        if let Some(c) = self.client.as_mut()
            && !c.wants()
        {
            self.stats.token_requests += 1;
            c.want(now);
        }
    }

    /// Replaces the verdicts forced by port (the user's overrides, changed while the agent
    /// runs). Flows a new override names take it at once; flows an override no longer names
    /// go back to what their classifier says.
    pub fn set_overrides(&mut self, overrides: Vec<(u16, Override)>) {
        self.cfg.overrides = overrides;
        let keys: Vec<FlowKey> = self.flows.keys().copied().collect();
        for key in keys {
            let forced = self.forced(&key);
            let Some(flow) = self.flows.get_mut(&key) else { continue };
            let verdict = match (forced, flow.verdict) {
                (Some(o), _) => Verdict::Forced(o),
                (None, Verdict::Forced(_)) => match flow.classifier.evidence().class {
                    FlowClass::LatencySensitive => Verdict::Ls,
                    FlowClass::Aperiodic | FlowClass::TooLarge => Verdict::Bulk,
                    FlowClass::Undecided => Verdict::Undecided,
                },
                (None, v) => v,
            };
            flow.verdict = verdict;
            Self::apply_marking(flow, &mut self.stats, &mut self.actions);
        }
    }

    fn forced(&self, key: &FlowKey) -> Option<Override> {
        self.cfg.overrides.iter().find(|(p, _)| *p == key.src.port() || *p == key.dst.port()).map(|&(_, o)| o)
    }

    /// Sets the kernel marking that `flow`'s verdict calls for, if it changed.
    fn apply_marking(flow: &mut Flow, stats: &mut AgentStats, actions: &mut VecDeque<Action>) {
        let marking = match flow.verdict {
            Verdict::Ls | Verdict::Forced(Override::Ls) => Marking::Ef,
            Verdict::Bulk | Verdict::Forced(Override::Bulk) => Marking::Bulk,
            Verdict::Undecided | Verdict::MarkedByApp => Marking::Untouched,
        };
        if marking != flow.marking {
            match (flow.marking, marking) {
                (_, Marking::Ef) => stats.flows_marked += 1,
                (Marking::Ef, _) => stats.flows_unmarked += 1,
                _ => {}
            }
            flow.marking = marking;
            actions.push_back(Action::Set(flow.key, marking));
        }
    }

    /// Whether this robot hosts the arbiter now (it is the team's coordinator), and the team's
    /// members. Becoming host starts an arbiter whose epoch is newer than any this robot heard,
    /// so it recovers the team's grants before it grants (see the module docs of
    /// [`super`]); losing it stands the arbiter down (its grants run out by their leases).
    pub fn set_arbiter_host(&mut self, now: Instant, host: bool, members: &[u32]) -> Result<(), AgentConfigError> {
        if !self.cfg.mode.global() {
            return Ok(());
        }
        match (host, self.arbiter.as_mut()) {
            (true, None) => {
                let heard = self.client.as_ref().map_or(Epoch::ZERO, Client::highest_epoch);
                self.arbiter = Some(Arbiter::new(self.cfg.token, self.id, members, heard, now)?);
                self.stats.arbiter_starts += 1;
            }
            (true, Some(a)) => a.set_members(now, members),
            (false, Some(a)) => {
                a.stand_down();
                self.arbiter = None;
            }
            (false, None) => {}
        }
        Ok(())
    }

    /// A token-protocol datagram from robot `from` (its frame's authenticated sender).
    pub fn handle_datagram(&mut self, now: Instant, from: u32, bytes: &[u8]) {
        if let Some(a) = self.arbiter.as_mut() {
            a.handle_datagram(now, from, bytes);
        }
        if let Some(c) = self.client.as_mut() {
            c.handle_datagram(now, from, bytes);
        }
        self.update_gate(now);
    }

    /// A bulk sender (`session`, sending from local `port`) has `pending` bytes left: the
    /// token is wanted while it has any. Returns its permit; a new session beyond
    /// [`MAX_BULK_SESSIONS`] gets a closed one.
    pub fn bulk_demand(&mut self, now: Instant, session: u64, port: u16, pending: u64) -> BulkPermit {
        if !self.bulk.contains_key(&session) {
            if self.bulk.len() >= MAX_BULK_SESSIONS {
                self.stats.bulk_refused += 1;
                return BulkPermit { open: false, until: None };
            }
            self.stats.bulk_sessions += 1;
        }
        self.bulk.insert(session, BulkSession { port, pending, heard: now });
        if pending > 0 {
            self.want_token(now);
        }
        self.update_gate(now);
        self.bulk_permit(now)
    }

    /// A bulk sender is done (or gave up). When no other has data left and no foreign bulk
    /// flows, the token goes back now.
    pub fn bulk_close(&mut self, now: Instant, session: u64) {
        if self.bulk.remove(&session).is_some() {
            self.release_if_done(now, true);
            self.update_gate(now);
        }
    }

    /// Whether a bulk sender may hand data to the kernel now, and until when.
    pub fn bulk_permit(&self, now: Instant) -> BulkPermit {
        if self.hold_cause(now).is_some() {
            return BulkPermit { open: false, until: None };
        }
        let window =
            if self.cfg.mode.local() { self.windows(now).map(|w| w.0).filter(|&s| s > now).min() } else { None };
        let lease = self.client.as_ref().and_then(Client::send_until);
        let until = match (window, lease) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        BulkPermit { open: true, until }
    }

    /// Gives the token back when nothing wants it: no bulk session with data left, nothing in
    /// the gate, and no foreign bulk for `bulk_idle` or its senders drained since it last
    /// flowed (`early`: a session just closed; counted).
    fn release_if_done(&mut self, now: Instant, early: bool) {
        let silent = self.last_bulk.is_none_or(|l| now.saturating_duration_since(l) >= self.cfg.bulk_idle);
        let drained = matches!((self.drained, self.last_bulk), (Some(d), Some(l)) if d >= l);
        if self.bulk.values().any(|b| b.pending > 0) || self.backlog > 0 || !(silent || drained) {
            return;
        }
        if let Some(c) = self.client.as_mut()
            && c.may_send(now)
        {
            c.finished(now);
            if early {
                self.stats.early_releases += 1;
            }
            if !silent {
                self.stats.drained_releases += 1;
            }
        }
    }

    /// Runs the timers: token protocol, idle flows, window edges.
    pub fn handle_timeout(&mut self, now: Instant) {
        if let Some(a) = self.arbiter.as_mut() {
            a.handle_timeout(now);
        }
        let before = self.bulk.len();
        self.bulk.retain(|_, b| now.saturating_duration_since(b.heard) < BULK_SESSION_SILENCE);
        self.stats.bulk_forgotten += (before - self.bulk.len()) as u64;
        if let Some(c) = self.client.as_mut() {
            c.handle_timeout(now);
        }
        if before > 0 && self.bulk.is_empty() {
            // The last session died silently: its early release is due now.
            self.release_if_done(now, true);
        } else {
            self.release_if_done(now, false);
        }
        if now >= self.next_sweep {
            self.next_sweep = now + self.cfg.flow_idle / 10;
            self.forget_idle_flows(now);
        }
        self.update_gate(now);
    }

    fn forget_idle_flows(&mut self, now: Instant) {
        let idle = self.cfg.flow_idle;
        let gone: Vec<FlowKey> =
            self.flows.values().filter(|f| now.saturating_duration_since(f.last_seen) >= idle).map(|f| f.key).collect();
        for k in gone {
            if let Some(f) = self.flows.remove(&k) {
                self.controller.remove_flow(f.id);
                if f.marking == Marking::Ef {
                    self.stats.flows_unmarked += 1;
                }
                if f.marking != Marking::Untouched {
                    self.actions.push_back(Action::Set(k, Marking::Untouched));
                }
            }
        }
    }

    /// The next datagram of the token protocol for other robots, written into `buf`. What the
    /// robot's own arbiter and client say to each other (unicast to this robot, or a broadcast,
    /// which reaches this robot too) is handed over here without a socket.
    pub fn poll_transmit(&mut self, now: Instant, buf: &mut [u8]) -> Option<Transmit> {
        loop {
            let (t, from_arbiter) = if let Some(t) = self.arbiter.as_mut().and_then(|a| a.poll_transmit(now, buf)) {
                (t, true)
            } else {
                (self.client.as_mut().and_then(|c| c.poll_transmit(now, buf))?, false)
            };
            let to_self = match t.dest {
                Dest::Unicast(d) => d == self.id,
                Dest::Broadcast => true,
            };
            if to_self {
                let bytes = buf[..t.len].to_vec();
                if from_arbiter {
                    if let Some(c) = self.client.as_mut() {
                        c.handle_datagram(now, self.id, &bytes);
                    }
                } else if let Some(a) = self.arbiter.as_mut() {
                    a.handle_datagram(now, self.id, &bytes);
                }
                self.update_gate(now);
            }
            if t.dest != Dest::Unicast(self.id) {
                return Some(t);
            }
        }
    }

    /// The next kernel action.
    pub fn poll_action(&mut self) -> Option<Action> {
        self.actions.pop_front()
    }

    /// When [`handle_timeout`](Self::handle_timeout) should next run: the token protocol's
    /// timers, the next edge of the gate, an idle check.
    pub fn poll_timeout(&self, now: Instant) -> Instant {
        let mut t = now + self.cfg.bulk_idle.min(self.cfg.flow_idle);
        for x in
            [self.arbiter.as_ref().and_then(Arbiter::poll_timeout), self.client.as_ref().and_then(Client::poll_timeout)]
                .into_iter()
                .flatten()
        {
            t = t.min(x);
        }
        if let Some(e) = self.next_window_edge(now) {
            t = t.min(e);
        }
        t.max(now)
    }

    /// The protection windows to honour, each opened [`lead`](Self::lead) early.
    fn windows(&self, now: Instant) -> impl Iterator<Item = (Instant, Instant)> + '_ {
        let lead = self.lead(now);
        let horizon = lead + Duration::from_millis(200);
        self.controller
            .windows(now, horizon)
            .into_iter()
            .map(move |w| (Instant::from_nanos(w.start.as_nanos().saturating_sub(lead.as_nanos() as u64)), w.end))
    }

    fn next_window_edge(&self, now: Instant) -> Option<Instant> {
        if !self.cfg.mode.local() {
            return None;
        }
        self.windows(now).flat_map(|(s, e)| [s, e + Duration::from_nanos(1)]).filter(|&x| x > now).min()
    }

    /// The end of the protection window the bulk is held for now, if any.
    fn window_hold(&self, now: Instant) -> Option<Instant> {
        if !self.cfg.mode.local() {
            return None;
        }
        let latched = self.window_latch.filter(|&e| now <= e);
        latched.or_else(|| self.windows(now).filter(|&(s, e)| s <= now && now <= e).map(|w| w.1).max())
    }

    fn hold_cause(&self, now: Instant) -> Option<HoldCause> {
        if self.window_hold(now).is_some() {
            return Some(HoldCause::Window);
        }
        if let Some(c) = &self.client
            && !c.may_send(now)
        {
            return Some(HoldCause::Token);
        }
        None
    }

    fn update_gate(&mut self, now: Instant) {
        if let Some(end) = self.window_hold(now) {
            self.window_latch = Some(end);
        }
        let cause = self.hold_cause(now);
        match (self.held, cause) {
            (None, Some(c)) => {
                self.stats.holds += 1;
                match c {
                    HoldCause::Window => {
                        self.stats.window_holds += 1;
                        if self.lead(now) > self.cfg.lead {
                            self.stats.card_early_holds += 1;
                        }
                    }
                    HoldCause::Token => self.stats.token_holds += 1,
                }
                self.actions.push_back(Action::Hold);
            }
            (Some(_), None) => {
                self.stats.releases += 1;
                self.actions.push_back(Action::Release);
            }
            _ => {}
        }
        self.held = cause;
    }
}

#[cfg(test)]
mod tests;
