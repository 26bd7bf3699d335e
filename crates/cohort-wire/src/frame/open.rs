//! Opening: one [`Opener`] per local receiver, with a replay window per remote sender.

use super::{Frame, FrameError, FrameRepr, HEADER_LEN, TAG_LEN, TeamKey, nonce};
use crate::replay::{Refusal, ReplayWindow};
use chacha20poly1305::{AeadInOut, Tag};
use std::collections::{HashMap, VecDeque};

/// Why a frame was rejected. Each reason has its counter in [`RejectCounters`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum OpenError {
    /// Shorter than header and tag, or of an unknown version.
    #[error(transparent)]
    Frame(#[from] FrameError),
    /// The team id in the header is not ours.
    #[error("frame of team {0}")]
    WrongTeam(u32),
    /// The tag does not match: wrong key, or any bit of header, ciphertext or tag changed.
    #[error("authentication failed")]
    AuthFailed,
    /// This sender's packet number was already accepted.
    #[error("packet {pn} from sender {sender} already received")]
    Replayed { sender: u32, pn: u64 },
    /// This sender's packet number is too far behind its newest to be checked for replay.
    #[error("packet {pn} from sender {sender} is older than the replay window")]
    TooOld { sender: u32, pn: u64 },
    /// A life of this sender the opener has retired (a newer life replaced it).
    #[error("epoch {epoch:#x} of sender {sender} is a retired life")]
    StaleLife { sender: u32, epoch: u64 },
}

/// Frames accepted, and rejected by reason: every call to [`Opener::open`] adds one to exactly
/// one of `accepted`, `truncated`, `bad_version`, `wrong_team`, `auth_failed`, `replayed`,
/// `too_old` and `stale_life`.
///
/// Checks run in that order and stop at the first failure, so a frame counts under the first
/// reason that applies. The replay check runs before decryption for senders already tracked
/// (a cheap drop), so `replayed` and `too_old` also count forgeries that claim an old packet
/// number of a known sender; a frame is only ever *accepted* after authentication.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RejectCounters {
    pub accepted: u64,
    pub truncated: u64,
    pub bad_version: u64,
    pub wrong_team: u64,
    pub auth_failed: u64,
    pub replayed: u64,
    pub too_old: u64,
    pub stale_life: u64,
    /// Lives (epochs) of known senders heard for the first time: restarts, second sockets,
    /// robots sharing a sender id (not a rejection).
    pub new_lives: u64,
    /// Senders whose replay state was dropped to respect the opener's sender bound (not a
    /// rejection).
    pub senders_evicted: u64,
}

impl core::ops::Add for RejectCounters {
    type Output = RejectCounters;

    /// The counts of two openers together (a socket's team and session keys).
    fn add(self, o: RejectCounters) -> RejectCounters {
        RejectCounters {
            accepted: self.accepted + o.accepted,
            truncated: self.truncated + o.truncated,
            bad_version: self.bad_version + o.bad_version,
            wrong_team: self.wrong_team + o.wrong_team,
            auth_failed: self.auth_failed + o.auth_failed,
            replayed: self.replayed + o.replayed,
            too_old: self.too_old + o.too_old,
            stale_life: self.stale_life + o.stale_life,
            new_lives: self.new_lives + o.new_lives,
            senders_evicted: self.senders_evicted + o.senders_evicted,
        }
    }
}

impl RejectCounters {
    /// Every rejection, whatever the reason.
    pub fn rejected(&self) -> u64 {
        self.truncated
            + self.bad_version
            + self.wrong_team
            + self.auth_failed
            + self.replayed
            + self.too_old
            + self.stale_life
    }

    fn count(&mut self, r: &Result<FrameRepr, OpenError>) {
        let c = match r {
            Ok(_) => &mut self.accepted,
            Err(OpenError::Frame(FrameError::Truncated(_))) => &mut self.truncated,
            Err(OpenError::Frame(FrameError::Version(_))) => &mut self.bad_version,
            Err(OpenError::WrongTeam(_)) => &mut self.wrong_team,
            Err(OpenError::AuthFailed) => &mut self.auth_failed,
            Err(OpenError::Replayed { .. }) => &mut self.replayed,
            Err(OpenError::TooOld { .. }) => &mut self.too_old,
            Err(OpenError::StaleLife { .. }) => &mut self.stale_life,
        };
        *c += 1;
    }
}

/// An authenticated frame's contents; `payload` is the decrypted plaintext, in place in the
/// datagram buffer.
#[derive(Debug, PartialEq, Eq)]
pub struct Opened<'a> {
    pub kind: u8,
    pub sender_id: u32,
    /// The sender's life (see the [module docs](super)).
    pub epoch: u64,
    pub packet_number: u64,
    pub payload: &'a [u8],
}

/// Lives of one sender tracked at once (each with its own replay window).
pub const MAX_LIVES: usize = 4;
/// Retired lives of one sender remembered (and refused).
pub const MAX_RETIRED: usize = 32;

/// One life of a remote sender.
#[derive(Debug, Clone)]
pub(in crate::frame) struct Life {
    epoch: u64,
    window: ReplayWindow,
    last_seen: u64,
}

/// A remote sender's replay state: the lives heard from recently, and the epochs of lives
/// retired to make room, which stay refused.
#[derive(Debug, Clone, Default)]
pub(in crate::frame) struct SenderState {
    pub(in crate::frame) lives: Vec<Life>,
    pub(in crate::frame) retired: VecDeque<u64>,
    /// Opener tick of the last frame accepted from this sender (for eviction).
    last_seen: u64,
}

impl SenderState {
    fn life(&self, epoch: u64) -> Option<&Life> {
        self.lives.iter().find(|l| l.epoch == epoch)
    }

    /// Refusals knowable before decryption.
    fn precheck(&self, sender: u32, epoch: u64, pn: u64) -> Result<(), OpenError> {
        if self.retired.contains(&epoch) {
            return Err(OpenError::StaleLife { sender, epoch });
        }
        match self.life(epoch) {
            Some(l) => l.window.check(pn).map_err(|r| refusal(r, sender, pn)),
            None => Ok(()),
        }
    }

    /// The life `epoch`, created if new (retiring the least recently heard beyond
    /// [`MAX_LIVES`]); whether it is new.
    fn life_mut(&mut self, epoch: u64, tick: u64) -> (&mut Life, bool) {
        let fresh = self.life(epoch).is_none();
        if fresh {
            if self.lives.len() >= MAX_LIVES
                && let Some(i) = (0..self.lives.len()).min_by_key(|&i| self.lives[i].last_seen)
            {
                let old = self.lives.swap_remove(i);
                if self.retired.len() >= MAX_RETIRED {
                    self.retired.pop_front();
                }
                self.retired.push_back(old.epoch);
            }
            self.lives.push(Life { epoch, window: ReplayWindow::new(), last_seen: tick });
        }
        let i = self.lives.iter().position(|l| l.epoch == epoch).unwrap_or(self.lives.len() - 1);
        let l = &mut self.lives[i];
        l.last_seen = tick;
        (l, fresh)
    }
}

/// Opens frames for one local receiver.
///
/// Replay state is kept per remote sender id and per life (epoch) of that sender, created on
/// the first authentic frame of it, for at most `max_senders` senders and [`MAX_LIVES`] lives
/// each. A new life of a known sender (a restart) is accepted at once; when it pushes the
/// least recently heard life out, that life's epoch is remembered (the last [`MAX_RETIRED`])
/// and refused from then on, so recorded frames of an old life cannot be replayed. Only
/// authentic frames create or move state, so an outsider cannot fill the table or slide a
/// window.
#[derive(Debug)]
pub struct Opener {
    key: TeamKey,
    pub(in crate::frame) senders: HashMap<u32, SenderState>,
    max_senders: usize,
    tick: u64,
    counters: RejectCounters,
}

fn refusal(r: Refusal, sender: u32, pn: u64) -> OpenError {
    match r {
        Refusal::Replayed => OpenError::Replayed { sender, pn },
        Refusal::TooOld => OpenError::TooOld { sender, pn },
    }
}

impl Opener {
    /// Senders tracked by default.
    pub const DEFAULT_MAX_SENDERS: usize = 1024;

    /// An opener tracking up to [`DEFAULT_MAX_SENDERS`](Self::DEFAULT_MAX_SENDERS) senders.
    pub fn new(key: TeamKey) -> Self {
        Self::with_max_senders(key, Self::DEFAULT_MAX_SENDERS)
    }

    /// An opener tracking replay state for at most `max_senders` senders (at least 1); each
    /// takes about 150 bytes. When an authentic frame from a new sender would exceed the bound,
    /// the sender heard from least recently is forgotten (one O(`max_senders`) scan). Should it
    /// come back, it starts a fresh window: a recorded frame of its that is replayed then is
    /// accepted once more. Size the bound above the team, so that only departed senders are
    /// evicted.
    pub fn with_max_senders(key: TeamKey, max_senders: usize) -> Self {
        Opener {
            key,
            senders: HashMap::new(),
            max_senders: max_senders.max(1),
            tick: 0,
            counters: RejectCounters::default(),
        }
    }

    pub fn team_id(&self) -> u32 {
        self.key.team_id
    }

    pub fn counters(&self) -> RejectCounters {
        self.counters
    }

    /// Senders with replay state now.
    pub fn tracked_senders(&self) -> usize {
        self.senders.len()
    }

    /// The bound on [`tracked_senders`](Self::tracked_senders).
    pub fn max_senders(&self) -> usize {
        self.max_senders
    }

    /// Whether replay state is held for `sender_id`.
    pub fn is_tracked(&self, sender_id: u32) -> bool {
        self.senders.contains_key(&sender_id)
    }

    /// The highest packet number accepted from life `epoch` of `sender_id`, if it is tracked.
    pub fn highest_packet_number(&self, sender_id: u32, epoch: u64) -> Option<u64> {
        self.senders.get(&sender_id).and_then(|s| s.life(epoch)).and_then(|l| l.window.highest())
    }

    /// Authenticates and decrypts `datagram` in place; counts the outcome.
    ///
    /// Checks, in order: length, version, team id, replay window (known senders), tag, then
    /// records the packet number. On any failure the frame is parsed no further and its
    /// ciphertext is left as it was.
    pub fn open<'a>(&mut self, datagram: &'a mut [u8]) -> Result<Opened<'a>, OpenError> {
        let r = self.check(datagram);
        self.counters.count(&r);
        let repr = r?;
        let n = datagram.len();
        Ok(Opened {
            kind: repr.kind,
            sender_id: repr.sender_id,
            epoch: repr.epoch,
            packet_number: repr.packet_number,
            payload: &datagram[HEADER_LEN..n - TAG_LEN],
        })
    }

    fn check(&mut self, datagram: &mut [u8]) -> Result<FrameRepr, OpenError> {
        let mut f = Frame::new_checked(datagram)?;
        let repr = FrameRepr::parse(&f)?;
        if repr.team_id != self.key.team_id {
            return Err(OpenError::WrongTeam(repr.team_id));
        }
        let (sender, epoch, pn) = (repr.sender_id, repr.epoch, repr.packet_number);
        // Cheap pre-check before spending a decryption on a frame the window would refuse.
        if let Some(s) = self.senders.get(&sender) {
            s.precheck(sender, epoch, pn)?;
        }
        let (head, body, tag) = f.split_mut();
        let tag = Tag::try_from(&*tag).map_err(|_| OpenError::AuthFailed)?;
        // Verifies the tag before decrypting: on failure `body` is untouched.
        self.key
            .cipher
            .decrypt_inout_detached(&nonce(sender, epoch, pn), head, body.into(), &tag)
            .map_err(|_| OpenError::AuthFailed)?;
        self.remember(sender, epoch, pn).map_err(|r| refusal(r, sender, pn))?;
        Ok(repr)
    }

    /// Records an authentic `(sender, epoch, pn)` in its life's window, evicting if needed.
    fn remember(&mut self, sender: u32, epoch: u64, pn: u64) -> Result<(), Refusal> {
        self.tick += 1;
        if !self.senders.contains_key(&sender)
            && self.senders.len() >= self.max_senders
            && let Some(oldest) = self.senders.iter().min_by_key(|(_, s)| s.last_seen).map(|(&id, _)| id)
        {
            self.senders.remove(&oldest);
            self.counters.senders_evicted += 1;
        }
        let tick = self.tick;
        let known = self.senders.contains_key(&sender);
        let s = self.senders.entry(sender).or_default();
        s.last_seen = tick;
        let (life, fresh) = s.life_mut(epoch, tick);
        let r = life.window.accept(pn);
        self.counters.new_lives += u64::from(fresh && known);
        r
    }
}
