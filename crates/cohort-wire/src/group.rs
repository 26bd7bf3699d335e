//! Messages of group request-reply and membership (GCBRR, seed 003 Table III), carried as the
//! payload of a secure frame of kind [`frame::kind::GROUP`](crate::frame::kind::GROUP).
//!
//! Every message starts with the same 10 bytes: type, flags, then the sender's process id and
//! incarnation (a process that restarts or rejoins takes a larger incarnation, so its old
//! self's messages and view entries can never be confused with its new self's):
//!
//! ```text
//!  0      1       2          6              10
//! +------+-------+----------+--------------+--------------------------------------+
//! | type | flags | pid u32  | incarn. u32  | body                                 |
//! +------+-------+----------+--------------+--------------------------------------+
//!
//! AREQ  (1)  ticket u64 | seqno u64 | rmask MASK | data…
//! ARPL  (2)  coord u32 | coord_inc u32 | seqno u64 | [heard MASK] | data…   flags bit 0: heard
//! JPOLL (3)  ticket u64 | poll u64
//! JOIN  (4)  coord u32 | poll u64
//! LPOLL (5)  ticket u64 | poll u64
//! LEFT  (6)  —
//! VPUSH (7)  ticket u64 | push u64 | next_ticket u64 | rmask MASK | count u16 | count × ENTRY
//! VACK  (8)  coord u32 | coord_inc u32 | push u64
//! HBEAT (9)  ticket u64 | view u64 | members MASK          flags bit 0: sender is coordinator
//! AGAIN (10) ticket u64 | seqno u64 | rmask MASK
//!
//! ENTRY      pid u32 | incarnation u32 | ticket u64 | flags u8 (bit 0: new member)
//! MASK       see [`mask`]: base u32 | len u16 | bitmap
//! ```
//!
//! All integers are big-endian. `ticket` in coordinator messages is the sender's own ticket
//! (two coordinators that hear each other use it to decide which one stands down); `seqno`,
//! `poll` and `push` number the coordinator's requests, polls and view pushes so answers can
//! be matched to them. `data` runs to the end of the message. VPUSH entries are sorted by
//! pid, without repeats. HBEAT is the fault detector's heartbeat: a process that has sent
//! nothing for a while sends one, carrying the members its view holds and the number of the
//! latest view push that view reflects (so a heartbeat overtaken by a later push is known to
//! be stale).
//!
//! A reply carries, when it has any (flag bit 0), the processes whose replies to the same
//! request its sender overheard before sending it (`heard`): they hold the request, so the
//! coordinator that lost one of those replies may ask for it again with AGAIN, which repeats
//! the request's number and reply mask but not its data.
//!
//! The encoding is canonical: undefined flag bits must be zero, fixed-size messages may not
//! carry trailing bytes, masks and views have one form each. So whatever
//! [`GroupRepr::parse`] accepts, [`GroupRepr::emit`] writes back byte for byte.

pub mod mask;

pub use mask::{MAX_SPAN, MaskError, PidMask, SpanError};

/// Message type numbers.
pub mod kind {
    pub const AREQ: u8 = 1;
    pub const ARPL: u8 = 2;
    pub const JPOLL: u8 = 3;
    pub const JOIN: u8 = 4;
    pub const LPOLL: u8 = 5;
    pub const LEFT: u8 = 6;
    pub const VPUSH: u8 = 7;
    pub const VACK: u8 = 8;
    pub const HBEAT: u8 = 9;
    pub const AGAIN: u8 = 10;
}

/// Bytes of the common header.
pub const HEADER_LEN: usize = 10;
/// Bytes of one view entry.
pub const ENTRY_LEN: usize = 17;
/// HBEAT flag: the sender considers itself the coordinator.
const FLAG_COORD: u8 = 0x01;
/// ARPL flag: a non-empty `heard` mask precedes the data.
const FLAG_HEARD: u8 = 0x01;
/// Entry flag: a member added since the last completed view push.
const ENTRY_NEW: u8 = 0x01;

/// Why a group message was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum GroupError {
    #[error("message of {0} bytes is shorter than the {HEADER_LEN}-byte header")]
    Truncated(usize),
    #[error("message type {0} is unknown")]
    UnknownType(u8),
    #[error("message type {kind} needs {need} bytes, got {got}")]
    Short { kind: u8, need: usize, got: usize },
    #[error("message type {kind} has {extra} trailing bytes")]
    Trailing { kind: u8, extra: usize },
    #[error("message type {kind}: undefined flag bits set")]
    Reserved { kind: u8 },
    #[error("view entries not sorted by pid, or repeated")]
    Unsorted,
    #[error(transparent)]
    Mask(#[from] MaskError),
}

/// A zero-copy view of a group message: the common header and the body.
#[derive(Debug, Clone)]
pub struct GroupPacket<T: AsRef<[u8]>> {
    buffer: T,
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_be_bytes(a)
}

impl<T: AsRef<[u8]>> GroupPacket<T> {
    /// Wraps `buffer` without checks: accessors panic if it is shorter than [`HEADER_LEN`].
    pub const fn new_unchecked(buffer: T) -> Self {
        GroupPacket { buffer }
    }

    /// Wraps `buffer` after [`check_len`](Self::check_len).
    pub fn new_checked(buffer: T) -> Result<Self, GroupError> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// Ensures the common header fits, so no accessor can go out of bounds.
    pub fn check_len(&self) -> Result<(), GroupError> {
        let n = self.buffer.as_ref().len();
        if n < HEADER_LEN { Err(GroupError::Truncated(n)) } else { Ok(()) }
    }

    pub fn into_inner(self) -> T {
        self.buffer
    }

    pub fn msg_type(&self) -> u8 {
        self.buffer.as_ref()[0]
    }

    pub fn flags(&self) -> u8 {
        self.buffer.as_ref()[1]
    }

    /// The sender's process id.
    pub fn pid(&self) -> u32 {
        u32_at(self.buffer.as_ref(), 2)
    }

    /// The sender's incarnation.
    pub fn incarnation(&self) -> u32 {
        u32_at(self.buffer.as_ref(), 6)
    }

    /// Everything after the common header.
    pub fn body(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> GroupPacket<T> {
    pub fn set_msg_type(&mut self, v: u8) {
        self.buffer.as_mut()[0] = v;
    }

    pub fn set_flags(&mut self, v: u8) {
        self.buffer.as_mut()[1] = v;
    }

    pub fn set_pid(&mut self, v: u32) {
        self.buffer.as_mut()[2..6].copy_from_slice(&v.to_be_bytes());
    }

    pub fn set_incarnation(&mut self, v: u32) {
        self.buffer.as_mut()[6..10].copy_from_slice(&v.to_be_bytes());
    }

    pub fn body_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[HEADER_LEN..]
    }
}

/// One member in a pushed group view.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ViewEntry {
    pub pid: u32,
    pub incarnation: u32,
    /// Assigned by the coordinator that admitted it; the smallest ticket is the coordinator.
    pub ticket: u64,
    /// Added since the coordinator last completed a view push (`new(grp)` of seed 003).
    pub new: bool,
}

/// A group message's body. Payloads borrow from the datagram.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Message<'a> {
    /// Application request number `seqno` for the processes of `rmask`, which reply in the
    /// order of their ids.
    Areq { ticket: u64, seqno: u64, rmask: PidMask, data: &'a [u8] },
    /// Reply to request `seqno` of coordinator `coord` (incarnation `coord_inc`); `heard` holds
    /// the processes whose replies to it the sender overheard before sending this one (they
    /// hold the request).
    Arpl { coord: u32, coord_inc: u32, seqno: u64, heard: PidMask, data: &'a [u8] },
    /// Join poll number `poll`.
    Jpoll { ticket: u64, poll: u64 },
    /// Join request to coordinator `coord`, answering its poll `poll` (sent unicast).
    Join { coord: u32, poll: u64 },
    /// Leave poll number `poll`.
    Lpoll { ticket: u64, poll: u64 },
    /// The sender leaves the group.
    Left,
    /// View push number `push` of `view` to the processes of `rmask`; `next_ticket` is the
    /// ticket the coordinator would assign next.
    Vpush { ticket: u64, push: u64, next_ticket: u64, rmask: PidMask, view: Vec<ViewEntry> },
    /// Acknowledges view push `push` of coordinator `coord`.
    Vack { coord: u32, coord_inc: u32, push: u64 },
    /// Heartbeat: the sender is alive, holds ticket `ticket` (0 if none), considers itself the
    /// coordinator if `coord`, and has `members` in its view, which reflects view push `view`.
    Hbeat { ticket: u64, view: u64, coord: bool, members: PidMask },
    /// Asks the processes of `rmask`, which hold request `seqno` already, to send their replies
    /// again, in the order of their ids: a repair round without the request's data.
    Again { ticket: u64, seqno: u64, rmask: PidMask },
}

impl Message<'_> {
    /// The type byte.
    pub fn kind(&self) -> u8 {
        match self {
            Message::Areq { .. } => kind::AREQ,
            Message::Arpl { .. } => kind::ARPL,
            Message::Jpoll { .. } => kind::JPOLL,
            Message::Join { .. } => kind::JOIN,
            Message::Lpoll { .. } => kind::LPOLL,
            Message::Left => kind::LEFT,
            Message::Vpush { .. } => kind::VPUSH,
            Message::Vack { .. } => kind::VACK,
            Message::Hbeat { .. } => kind::HBEAT,
            Message::Again { .. } => kind::AGAIN,
        }
    }
}

/// A parsed group message: its sender and body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupRepr<'a> {
    pub pid: u32,
    pub incarnation: u32,
    pub msg: Message<'a>,
}

fn need(b: &[u8], kind: u8, len: usize) -> Result<(), GroupError> {
    if b.len() < len {
        Err(GroupError::Short { kind, need: len + HEADER_LEN, got: b.len() + HEADER_LEN })
    } else {
        Ok(())
    }
}

fn exact(b: &[u8], kind: u8, len: usize) -> Result<(), GroupError> {
    need(b, kind, len)?;
    if b.len() > len { Err(GroupError::Trailing { kind, extra: b.len() - len }) } else { Ok(()) }
}

fn parse_view(b: &[u8]) -> Result<Vec<ViewEntry>, GroupError> {
    need(b, kind::VPUSH, 2)?;
    let count = usize::from(u16::from_be_bytes([b[0], b[1]]));
    exact(&b[2..], kind::VPUSH, count * ENTRY_LEN)?;
    let mut view: Vec<ViewEntry> = Vec::with_capacity(count);
    for e in b[2..].chunks_exact(ENTRY_LEN) {
        if e[16] & !ENTRY_NEW != 0 {
            return Err(GroupError::Reserved { kind: kind::VPUSH });
        }
        let entry = ViewEntry { pid: u32_at(e, 0), incarnation: u32_at(e, 4), ticket: u64_at(e, 8), new: e[16] != 0 };
        if view.last().is_some_and(|l| l.pid >= entry.pid) {
            return Err(GroupError::Unsorted);
        }
        view.push(entry);
    }
    Ok(view)
}

impl<'a> GroupRepr<'a> {
    /// Parses a message; never panics.
    pub fn parse(bytes: &'a [u8]) -> Result<Self, GroupError> {
        let p = GroupPacket::new_checked(bytes)?;
        let (k, flags) = (p.msg_type(), p.flags());
        let allowed = match k {
            kind::HBEAT => FLAG_COORD,
            kind::ARPL => FLAG_HEARD,
            _ => 0,
        };
        if !(kind::AREQ..=kind::AGAIN).contains(&k) {
            return Err(GroupError::UnknownType(k));
        }
        if flags & !allowed != 0 {
            return Err(GroupError::Reserved { kind: k });
        }
        let b = &bytes[HEADER_LEN..];
        let msg = match k {
            kind::AREQ => {
                need(b, k, 16)?;
                let (rmask, n) = mask::PidMask::parse(&b[16..])?;
                Message::Areq { ticket: u64_at(b, 0), seqno: u64_at(b, 8), rmask, data: &b[16 + n..] }
            }
            kind::ARPL => {
                need(b, k, 16)?;
                let (heard, n) = if flags & FLAG_HEARD != 0 {
                    let (heard, n) = mask::PidMask::parse(&b[16..])?;
                    if heard.is_empty() {
                        // An empty set is written without the flag.
                        return Err(MaskError::NotCanonical.into());
                    }
                    (heard, n)
                } else {
                    (PidMask::new(), 0)
                };
                let (coord, coord_inc, seqno) = (u32_at(b, 0), u32_at(b, 4), u64_at(b, 8));
                Message::Arpl { coord, coord_inc, seqno, heard, data: &b[16 + n..] }
            }
            kind::JPOLL | kind::LPOLL => {
                exact(b, k, 16)?;
                let (ticket, poll) = (u64_at(b, 0), u64_at(b, 8));
                if k == kind::JPOLL { Message::Jpoll { ticket, poll } } else { Message::Lpoll { ticket, poll } }
            }
            kind::JOIN => {
                exact(b, k, 12)?;
                Message::Join { coord: u32_at(b, 0), poll: u64_at(b, 4) }
            }
            kind::LEFT => {
                exact(b, k, 0)?;
                Message::Left
            }
            kind::VPUSH => {
                need(b, k, 24)?;
                let (rmask, n) = mask::PidMask::parse(&b[24..])?;
                let view = parse_view(&b[24 + n..])?;
                Message::Vpush { ticket: u64_at(b, 0), push: u64_at(b, 8), next_ticket: u64_at(b, 16), rmask, view }
            }
            kind::VACK => {
                exact(b, k, 16)?;
                Message::Vack { coord: u32_at(b, 0), coord_inc: u32_at(b, 4), push: u64_at(b, 8) }
            }
            kind::AGAIN => {
                need(b, k, 16)?;
                let (rmask, n) = mask::PidMask::parse(&b[16..])?;
                exact(&b[16..], k, n)?;
                Message::Again { ticket: u64_at(b, 0), seqno: u64_at(b, 8), rmask }
            }
            _ => {
                need(b, k, 16)?;
                let (members, n) = mask::PidMask::parse(&b[16..])?;
                exact(&b[16..], k, n)?;
                Message::Hbeat { ticket: u64_at(b, 0), view: u64_at(b, 8), coord: flags & FLAG_COORD != 0, members }
            }
        };
        Ok(GroupRepr { pid: p.pid(), incarnation: p.incarnation(), msg })
    }

    /// Bytes [`emit`](Self::emit) writes.
    pub fn buffer_len(&self) -> usize {
        HEADER_LEN
            + match &self.msg {
                Message::Areq { rmask, data, .. } => 16 + rmask.buffer_len() + data.len(),
                Message::Arpl { heard, data, .. } => {
                    16 + if heard.is_empty() { 0 } else { heard.buffer_len() } + data.len()
                }
                Message::Jpoll { .. } | Message::Lpoll { .. } | Message::Vack { .. } => 16,
                Message::Join { .. } => 12,
                Message::Left => 0,
                Message::Vpush { rmask, view, .. } => 24 + rmask.buffer_len() + 2 + view.len() * ENTRY_LEN,
                Message::Hbeat { members, .. } => 16 + members.buffer_len(),
                Message::Again { rmask, .. } => 16 + rmask.buffer_len(),
            }
    }

    /// Writes the message into the front of `out` and returns its length; `None` when `out`
    /// is too short or a VPUSH view has more than 65 535 entries.
    ///
    /// VPUSH entries are written in the order given: give them sorted by pid, without repeats,
    /// or [`parse`](Self::parse) refuses the result.
    pub fn emit(&self, out: &mut [u8]) -> Option<usize> {
        let len = self.buffer_len();
        let buf = out.get_mut(..len)?;
        buf.fill(0);
        let mut p = GroupPacket::new_unchecked(&mut buf[..]);
        p.set_msg_type(self.msg.kind());
        p.set_pid(self.pid);
        p.set_incarnation(self.incarnation);
        match &self.msg {
            Message::Hbeat { coord: true, .. } => p.set_flags(FLAG_COORD),
            Message::Arpl { heard, .. } if !heard.is_empty() => p.set_flags(FLAG_HEARD),
            _ => {}
        }
        let b = p.body_mut();
        match &self.msg {
            Message::Areq { ticket, seqno, rmask, data } => {
                b[..8].copy_from_slice(&ticket.to_be_bytes());
                b[8..16].copy_from_slice(&seqno.to_be_bytes());
                let n = rmask.emit(&mut b[16..])?;
                b[16 + n..].copy_from_slice(data);
            }
            Message::Arpl { coord, coord_inc, seqno, heard, data } => {
                b[..4].copy_from_slice(&coord.to_be_bytes());
                b[4..8].copy_from_slice(&coord_inc.to_be_bytes());
                b[8..16].copy_from_slice(&seqno.to_be_bytes());
                let n = if heard.is_empty() { 0 } else { heard.emit(&mut b[16..])? };
                b[16 + n..].copy_from_slice(data);
            }
            Message::Again { ticket, seqno, rmask } => {
                b[..8].copy_from_slice(&ticket.to_be_bytes());
                b[8..16].copy_from_slice(&seqno.to_be_bytes());
                rmask.emit(&mut b[16..])?;
            }
            Message::Jpoll { ticket, poll } | Message::Lpoll { ticket, poll } => {
                b[..8].copy_from_slice(&ticket.to_be_bytes());
                b[8..16].copy_from_slice(&poll.to_be_bytes());
            }
            Message::Join { coord, poll } => {
                b[..4].copy_from_slice(&coord.to_be_bytes());
                b[4..12].copy_from_slice(&poll.to_be_bytes());
            }
            Message::Left => {}
            Message::Vpush { ticket, push, next_ticket, rmask, view } => {
                b[..8].copy_from_slice(&ticket.to_be_bytes());
                b[8..16].copy_from_slice(&push.to_be_bytes());
                b[16..24].copy_from_slice(&next_ticket.to_be_bytes());
                let n = rmask.emit(&mut b[24..])?;
                let at = 24 + n;
                b[at..at + 2].copy_from_slice(&u16::try_from(view.len()).ok()?.to_be_bytes());
                for (e, out) in view.iter().zip(b[at + 2..].chunks_exact_mut(ENTRY_LEN)) {
                    out[..4].copy_from_slice(&e.pid.to_be_bytes());
                    out[4..8].copy_from_slice(&e.incarnation.to_be_bytes());
                    out[8..16].copy_from_slice(&e.ticket.to_be_bytes());
                    out[16] = if e.new { ENTRY_NEW } else { 0 };
                }
            }
            Message::Vack { coord, coord_inc, push } => {
                b[..4].copy_from_slice(&coord.to_be_bytes());
                b[4..8].copy_from_slice(&coord_inc.to_be_bytes());
                b[8..16].copy_from_slice(&push.to_be_bytes());
            }
            Message::Hbeat { ticket, view, members, .. } => {
                b[..8].copy_from_slice(&ticket.to_be_bytes());
                b[8..16].copy_from_slice(&view.to_be_bytes());
                members.emit(&mut b[16..])?;
            }
        }
        Some(len)
    }
}

#[cfg(test)]
mod tests;
