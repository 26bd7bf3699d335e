//! The BH controller of seed 000 §IV-A (Algorithm 1 `send()`), one per robot: it requests
//! the bulk token when the robot has bulk data, holds and renews it, gives it back early when
//! the bulk is done, and tells the robot's local layer when BH traffic may flow
//! ([`ClientEvent::MaySend`], [`Client::may_send`]).
//!
//! Algorithm 1's loop `while data not all sent: request_wait(); transmit ≤ TIMESLICE;
//! release()` becomes: [`Client::want`] once; the client requests, holds for at most one
//! slice, and, while the robot still wants, queues again when the slice ends (a REVOKE or
//! the last lease running out); [`Client::finished`] releases early.
//!
//! The lease is counted on this robot's clock from the stamp the grant echoes, shortened for
//! drift ([`Config::holder_lease`]); see the [module docs](super) for why the holder always
//! stops before the arbiter can grant again.

use super::{Config, ConfigError, Dest, Epoch, HeldGrant, Message, PreemptRepr, Transmit, micros_u32, write};
use cohort_time::Instant;
use std::collections::VecDeque;
use std::time::Duration;

/// The client's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientState {
    /// No bulk to send, no token.
    Idle,
    /// Requested the token at `since` (this robot's clock).
    Waiting { since: Instant },
    /// Holds grant (`epoch`, `seq`): may send BH until `lease_end`; the slice ends by
    /// `slice_end` (both on this robot's clock, conservative).
    Holding { epoch: Epoch, seq: u64, lease_end: Instant, slice_end: Instant, since: Instant },
}

/// Why the robot must stop sending BH.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StopReason {
    /// [`Client::finished`]: the bulk is done; the token went back early.
    Finished,
    /// The arbiter revoked the grant (its slice is over).
    Revoked,
    /// The lease ran out before a renewal came back (slice end, loss, or arbiter gone).
    LeaseExpired,
}

/// What the robot's local layer should know.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientEvent {
    /// BH may flow until `until` (this robot's clock) unless extended; see
    /// [`Client::send_until`] for the current bound.
    MaySend { until: Instant },
    /// BH must stop now.
    MustStop { reason: StopReason },
}

/// Counters, for benchmarks and diagnostics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ClientStats {
    pub requests_sent: u64,
    pub renewals_sent: u64,
    pub releases_sent: u64,
    pub reports_sent: u64,
    pub grants_taken: u64,
    /// Datagrams that did not parse, or whose sender field disagreed with the transport's.
    pub malformed: u64,
    /// Messages from an arbiter older than the newest this robot has heard (fenced off).
    pub stale: u64,
    /// Parsed messages this state had no use for.
    pub ignored: u64,
}

/// The robot side of the bulk token.
#[derive(Debug)]
pub struct Client {
    cfg: Config,
    id: u32,
    highest: Epoch,
    want: bool,
    state: ClientState,
    next_request: Instant,
    next_renew: Instant,
    /// The newest grant this robot gave back: a late copy of it (a re-sent grant overtaken
    /// by the release) must not be taken again, as the arbiter may already have regranted.
    released: Option<(Epoch, u64)>,
    out: VecDeque<(Dest, PreemptRepr)>,
    events: VecDeque<ClientEvent>,
    stats: ClientStats,
}

impl Client {
    pub fn new(cfg: Config, id: u32) -> Result<Self, ConfigError> {
        cfg.validate()?;
        Ok(Client {
            cfg,
            id,
            highest: Epoch::ZERO,
            want: false,
            state: ClientState::Idle,
            next_request: Instant::ZERO,
            next_renew: Instant::ZERO,
            released: None,
            out: VecDeque::new(),
            events: VecDeque::new(),
            stats: ClientStats::default(),
        })
    }

    pub fn id(&self) -> u32 {
        self.id
    }

    /// The newest arbiter epoch heard; a new arbiter on this robot must start above it.
    pub fn highest_epoch(&self) -> Epoch {
        self.highest
    }

    /// The robot running the newest arbiter heard, if any.
    pub fn arbiter(&self) -> Option<u32> {
        (self.highest != Epoch::ZERO).then_some(self.highest.arbiter)
    }

    pub fn state(&self) -> ClientState {
        self.state
    }

    /// Whether the robot still has bulk to send.
    pub fn wants(&self) -> bool {
        self.want
    }

    pub fn stats(&self) -> ClientStats {
        self.stats
    }

    /// Whether BH traffic may be handed to the network now.
    pub fn may_send(&self, now: Instant) -> bool {
        matches!(self.state, ClientState::Holding { lease_end, .. } if now < lease_end)
    }

    /// Until when BH may flow, if the robot holds the token. A local layer that wants its
    /// bulk off the air by then treats this as the start of a protection window (see
    /// [`super::vpl::Vpl::poll_release`]).
    pub fn send_until(&self) -> Option<Instant> {
        match self.state {
            ClientState::Holding { lease_end, .. } => Some(lease_end),
            _ => None,
        }
    }

    /// The robot has bulk to send: request the token (Algorithm 1 line 13).
    pub fn want(&mut self, now: Instant) {
        self.want = true;
        if self.state == ClientState::Idle {
            self.state = ClientState::Waiting { since: now };
            self.request(now);
        }
    }

    /// The bulk is done: stop and give the token back early (§IV-A "recycle the unused
    /// time"). A robot still waiting stops waiting; a grant that arrives later is released.
    pub fn finished(&mut self, _now: Instant) {
        self.want = false;
        match self.state {
            ClientState::Holding { epoch, seq, .. } => {
                self.stop(StopReason::Finished);
                self.release(epoch, seq);
            }
            ClientState::Waiting { .. } => self.state = ClientState::Idle,
            ClientState::Idle => {}
        }
    }

    /// Parses and handles one arbiter message from robot `from` (the frame's authenticated
    /// sender). A datagram that does not parse is counted and dropped.
    pub fn handle_datagram(&mut self, now: Instant, from: u32, bytes: &[u8]) {
        match PreemptRepr::parse(bytes) {
            Ok(r) => self.handle_message(now, from, &r),
            Err(_) => self.stats.malformed += 1,
        }
    }

    /// Handles one arbiter message from robot `from`.
    pub fn handle_message(&mut self, now: Instant, from: u32, r: &PreemptRepr) {
        if r.sender != from {
            self.stats.malformed += 1;
            return;
        }
        let from_arbiter = matches!(r.msg, Message::Grant { .. } | Message::Revoke { .. } | Message::Query);
        if !from_arbiter || r.epoch.arbiter != from {
            self.stats.ignored += 1;
            return;
        }
        if r.epoch < self.highest {
            self.stats.stale += 1;
            if r.msg == Message::Query {
                // Tell the older arbiter about the newer epoch so it moves above it or stands down.
                self.report(now, Dest::Unicast(from));
            }
            return;
        }
        self.highest = r.epoch;
        match r.msg {
            Message::Query => self.report(now, Dest::Unicast(from)),
            Message::Grant { holder, seq, lease_us, slice_us, echo } if holder == self.id => {
                let echo = Instant::from_nanos(echo);
                if echo > now {
                    self.stats.ignored += 1;
                    return;
                }
                // All robots share the configuration: no grant is longer than its lease.
                let lease_end = echo + self.cfg.holder_lease(micros(lease_us).min(self.cfg.lease));
                let slice_end = echo + self.cfg.shrink(micros(slice_us).min(self.cfg.timeslice));
                self.on_grant(now, r.epoch, seq, lease_end, slice_end);
            }
            Message::Revoke { holder, grant_epoch, seq } if holder == self.id => match self.state {
                ClientState::Holding { epoch, seq: s, .. } if (epoch, s) == (grant_epoch, seq) => {
                    self.stop(StopReason::Revoked);
                    self.requeue(now);
                }
                _ => self.stats.ignored += 1,
            },
            _ => self.stats.ignored += 1,
        }
    }

    /// Handles the timers: lease end, renewals, request retries.
    pub fn handle_timeout(&mut self, now: Instant) {
        match self.state {
            ClientState::Holding { lease_end, .. } if now >= lease_end => {
                self.stop(StopReason::LeaseExpired);
                self.requeue(now);
            }
            ClientState::Holding { epoch, seq, .. } if now >= self.next_renew => {
                self.next_renew = now + self.cfg.renew_interval;
                self.stats.renewals_sent += 1;
                self.send(Message::Renew { grant_epoch: epoch, seq, stamp: now.as_nanos() });
            }
            ClientState::Waiting { .. } if now >= self.next_request => self.request(now),
            _ => {}
        }
    }

    /// The next datagram to send, written into `buf` (at least [`super::MAX_DATAGRAM`]).
    pub fn poll_transmit(&mut self, _now: Instant, buf: &mut [u8]) -> Option<Transmit> {
        let (dest, r) = self.out.pop_front()?;
        write(&r, dest, buf)
    }

    pub fn poll_event(&mut self) -> Option<ClientEvent> {
        self.events.pop_front()
    }

    /// When [`handle_timeout`](Self::handle_timeout) should next run.
    pub fn poll_timeout(&self) -> Option<Instant> {
        match self.state {
            ClientState::Idle => None,
            ClientState::Waiting { .. } => Some(self.next_request),
            ClientState::Holding { lease_end, .. } => Some(lease_end.min(self.next_renew)),
        }
    }

    fn dest(&self) -> Dest {
        self.arbiter().map_or(Dest::Broadcast, Dest::Unicast)
    }

    fn send(&mut self, msg: Message) {
        let dest = self.dest();
        self.out.push_back((dest, PreemptRepr { sender: self.id, epoch: self.highest, msg }));
    }

    fn request(&mut self, now: Instant) {
        self.next_request = now + self.cfg.retry_interval;
        self.stats.requests_sent += 1;
        self.send(Message::Request { stamp: now.as_nanos() });
    }

    fn report(&mut self, now: Instant, dest: Dest) {
        let (held, waiting, waited) = match self.state {
            ClientState::Idle => (None, false, Duration::ZERO),
            ClientState::Waiting { since } => (None, true, now - since),
            ClientState::Holding { epoch, seq, lease_end, slice_end, .. } => {
                let held = HeldGrant {
                    epoch,
                    seq,
                    lease_left_us: micros_up(lease_end - now),
                    slice_left_us: micros_u32(slice_end - now),
                };
                (Some(held), false, Duration::ZERO)
            }
        };
        self.stats.reports_sent += 1;
        let msg = Message::Report { held, waiting, waited_us: micros_u32(waited), stamp: now.as_nanos() };
        self.out.push_back((dest, PreemptRepr { sender: self.id, epoch: self.highest, msg }));
    }

    fn release(&mut self, epoch: Epoch, seq: u64) {
        self.stats.releases_sent += 1;
        self.released = self.released.max(Some((epoch, seq)));
        self.send(Message::Release { grant_epoch: epoch, seq });
    }

    fn on_grant(&mut self, now: Instant, epoch: Epoch, seq: u64, lease_end: Instant, slice_end: Instant) {
        if let Some((e, s)) = self.released
            && e == epoch
            && seq <= s
        {
            // A grant this robot already gave back (re-sent before the release arrived).
            self.stats.stale += 1;
            self.release(epoch, seq);
            return;
        }
        match self.state {
            ClientState::Idle => {
                // Nothing to send (any more): give it straight back.
                self.release(epoch, seq);
            }
            ClientState::Waiting { .. } if lease_end > now => {
                self.stats.grants_taken += 1;
                self.state = ClientState::Holding { epoch, seq, lease_end, slice_end, since: now };
                self.next_renew = now + self.cfg.renew_interval;
                self.events.push_back(ClientEvent::MaySend { until: lease_end });
            }
            ClientState::Waiting { .. } => {
                // The echoed stamp is too old to leave any lease: renew at once for a fresh one.
                self.stats.renewals_sent += 1;
                self.send(Message::Renew { grant_epoch: epoch, seq, stamp: now.as_nanos() });
            }
            ClientState::Holding { epoch: e, seq: s, lease_end: l, since, .. } => {
                if epoch == e && seq < s {
                    // A late copy of an older grant of this epoch.
                    self.stats.stale += 1;
                    return;
                }
                // A renewal, a newer arbiter re-issuing the grant it adopted, or (a later seq
                // of this epoch) the arbiter's newer grant to this robot.
                self.state = ClientState::Holding { epoch, seq, lease_end: l.max(lease_end), slice_end, since };
            }
        }
    }

    fn stop(&mut self, reason: StopReason) {
        self.state = ClientState::Idle;
        self.events.push_back(ClientEvent::MustStop { reason });
    }

    /// After a slice, queue again if there is still bulk (Algorithm 1 line 12's loop).
    fn requeue(&mut self, now: Instant) {
        if self.want {
            self.state = ClientState::Waiting { since: now };
            self.request(now);
        }
    }
}

fn micros(us: u32) -> Duration {
    Duration::from_micros(u64::from(us))
}

/// Microseconds, rounded up: a holder never under-reports its lease.
fn micros_up(d: Duration) -> u32 {
    u32::try_from(d.as_nanos().div_ceil(1000)).unwrap_or(u32::MAX)
}
