//! The sliding-window decoder: on-the-fly Gaussian elimination with in-order release.
//!
//! Columns are source-symbol indices. Each column is in one of three states:
//!
//! * **unknown**: nothing received involves it as a leading term;
//! * **seen** (seed 004 §II, after Sundararajan et al.): a stored row `x_j + Σ_{m>j} c_m x_m = P`
//!   has `j` as its leading column. The decoder's rank is the number of seen or decoded
//!   columns; its seen count, which the receiver acknowledges, is the length of the prefix of
//!   columns that are all seen or decoded;
//! * **decoded**: the source symbol itself is known.
//!
//! An incoming equation is reduced left to right against known symbols and stored rows until
//! its leading column is unknown, where it becomes a new row; only then is its payload touched,
//! in a single fused [`combine`](crate::gf256::Kernel::combine), so redundant symbols cost no
//! payload work at all. After every innovative symbol the decoder looks for the longest prefix
//! from the next column to release whose rows only reference columns inside the prefix, and
//! back-substitutes it from the top down. Released symbols stay as history until space is
//! needed, because repairs still in flight may combine them.

use crate::encoder::{CoderConfig, ConfigError, RepairInfo};
use crate::gf256::{self, Kernel};

/// How an accepted symbol changed the decoder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// It raised the rank.
    Innovative,
    /// It was a linear combination of what the decoder already had (a duplicate, say).
    Redundant,
    /// Every source symbol it involves is already released, or it references history the
    /// decoder has forgotten; discarded.
    Stale,
}

/// A symbol the decoder cannot take. Each is counted in [`DecoderStats::rejected`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InputError {
    #[error("symbol of {len} bytes, expected at most {symbol_size}")]
    SymbolSize { len: usize, symbol_size: usize },
    #[error("repair symbol covering no source symbols")]
    EmptyRepair,
    #[error("repair covers {count} symbols, more than the window of {max_window}")]
    RepairTooWide { count: usize, max_window: usize },
    #[error(
        "source index {index} is beyond the decoder's window (limit {limit}) while {pending} earlier symbols are undecoded"
    )]
    BeyondWindow { index: u64, limit: u64, pending: u64 },
}

/// Counters, by kind of input and by what became of it: every input is counted as received
/// and then as exactly one of innovative, redundant, stale or rejected.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DecoderStats {
    pub source_received: u64,
    pub repair_received: u64,
    pub innovative: u64,
    pub redundant: u64,
    pub stale: u64,
    pub rejected: u64,
    /// Source symbols obtained by decoding rather than received.
    pub recovered: u64,
    /// Source symbols handed to the application.
    pub released: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Unknown,
    Seen,
    Decoded,
}

#[derive(Debug)]
struct Slot {
    state: State,
    /// For a seen column `j`: coefficients of columns `j+1 ..= j+len` (leading 1 implicit).
    coefs: Vec<u8>,
    /// The source symbol (decoded) or the row's right-hand side (seen); empty until the
    /// slot first holds one (buffers are taken lazily, see [`Decoder::with_buffers`]).
    payload: Box<[u8]>,
}

/// Sliding-window RLNC decoder. See the [module docs](self).
#[derive(Debug)]
pub struct Decoder {
    cfg: CoderConfig,
    kernel: Kernel,
    slots: Vec<Slot>,
    /// Oldest column still held; everything below has been released and forgotten.
    base: u64,
    /// Next column to release.
    next: u64,
    /// One past the highest column any symbol referenced.
    end: u64,
    stats: DecoderStats,
    eq_coefs: Vec<u8>,
    eq_payload: Box<[u8]>,
    /// Pending payload subtractions of the equation being reduced: (coefficient, column).
    terms: Vec<(u8, u64)>,
    repair_coefs: Vec<u8>,
    /// Symbol buffers not in any slot, handed out before anything is allocated.
    spare: Vec<Box<[u8]>>,
    /// Symbol buffers this decoder allocated itself.
    allocated: u64,
}

impl Decoder {
    /// A decoder holding up to `2 * max_window` columns: one window of history for repairs in
    /// flight, one of symbols not yet released.
    pub fn new(cfg: CoderConfig) -> Result<Self, ConfigError> {
        Self::with_kernel(cfg, Kernel::best())
    }

    /// A decoder with a chosen kernel.
    pub fn with_kernel(cfg: CoderConfig, kernel: Kernel) -> Result<Self, ConfigError> {
        Self::with_buffers(cfg, kernel, Vec::new())
    }

    /// A decoder that takes its symbol buffers from `buffers` (those of another coder's
    /// [`into_buffers`](Self::into_buffers), say) before it allocates any. A slot gets its
    /// buffer when it first holds a symbol, so memory follows the columns in use; a connection
    /// that hands a finished coder's buffers to the next allocates nothing when coders roll
    /// over. Buffers of another size are dropped.
    pub fn with_buffers(cfg: CoderConfig, kernel: Kernel, mut buffers: Vec<Box<[u8]>>) -> Result<Self, ConfigError> {
        cfg.validate()?;
        let cap = 2 * cfg.max_window;
        buffers.retain(|b| b.len() == cfg.symbol_size);
        let slots =
            (0..cap).map(|_| Slot { state: State::Unknown, coefs: Vec::new(), payload: Box::default() }).collect();
        let mut d = Decoder {
            cfg,
            kernel,
            slots,
            base: 0,
            next: 0,
            end: 0,
            stats: DecoderStats::default(),
            eq_coefs: Vec::with_capacity(cap),
            eq_payload: Box::default(),
            terms: Vec::with_capacity(cap),
            repair_coefs: Vec::with_capacity(cfg.max_window),
            spare: buffers,
            allocated: 0,
        };
        d.eq_payload = d.buffer();
        Ok(d)
    }

    /// Every symbol buffer this decoder holds, for the next one ([`with_buffers`](Self::with_buffers)).
    pub fn into_buffers(self) -> Vec<Box<[u8]>> {
        let mut v = self.spare;
        v.extend(self.slots.into_iter().map(|s| s.payload).filter(|b| !b.is_empty()));
        v.push(self.eq_payload);
        v
    }

    /// Takes buffers from `buffers` until this decoder holds `spare` unused ones (or `buffers`
    /// runs out); see [`crate::encoder::top_up`].
    pub fn add_buffers(&mut self, buffers: &mut Vec<Box<[u8]>>, spare: usize) {
        crate::encoder::top_up(&mut self.spare, buffers, spare, self.cfg.symbol_size);
    }

    /// Symbol buffers held by this decoder.
    pub fn buffers(&self) -> usize {
        self.spare.len() + 1 + self.slots.iter().filter(|s| !s.payload.is_empty()).count()
    }

    /// Symbol buffers this decoder had to allocate (those it was given not counted).
    pub fn allocated(&self) -> u64 {
        self.allocated
    }

    /// A symbol buffer: a spare one, or a new one. Its contents are unspecified.
    fn buffer(&mut self) -> Box<[u8]> {
        self.spare.pop().unwrap_or_else(|| {
            self.allocated += 1;
            vec![0u8; self.cfg.symbol_size].into_boxed_slice()
        })
    }

    /// The configuration.
    pub fn config(&self) -> CoderConfig {
        self.cfg
    }

    /// Counters so far.
    pub fn stats(&self) -> DecoderStats {
        self.stats
    }

    /// Index of the next source symbol [`pop`](Self::pop) will release.
    pub fn next_release(&self) -> u64 {
        self.next
    }

    /// Seen count: every column below it is seen or decoded. This is what the receiver
    /// acknowledges so the encoder can slide its window.
    pub fn seen(&self) -> u64 {
        let mut col = self.next;
        while col < self.end && self.state(col) != State::Unknown {
            col += 1;
        }
        col
    }

    /// Decoder rank: how many columns are seen or decoded (released ones included).
    pub fn rank(&self) -> u64 {
        self.next + (self.next..self.end).filter(|&c| self.state(c) != State::Unknown).count() as u64
    }

    fn cap(&self) -> u64 {
        self.slots.len() as u64
    }

    fn idx(&self, col: u64) -> usize {
        (col % self.cap()) as usize
    }

    fn state(&self, col: u64) -> State {
        self.slots[self.idx(col)].state
    }

    fn reject(&mut self, e: InputError) -> Result<Outcome, InputError> {
        self.stats.rejected += 1;
        Err(e)
    }

    fn stale(&mut self) -> Result<Outcome, InputError> {
        self.stats.stale += 1;
        Ok(Outcome::Stale)
    }

    fn count(&mut self, o: Outcome) -> Outcome {
        match o {
            Outcome::Innovative => self.stats.innovative += 1,
            Outcome::Redundant => self.stats.redundant += 1,
            Outcome::Stale => self.stats.stale += 1,
        }
        o
    }

    /// Makes column `last` addressable by forgetting released history; fails when that would
    /// drop a symbol not yet released.
    fn make_room(&mut self, last: u64) -> Result<(), InputError> {
        let cap = self.cap();
        if last < self.base + cap {
            return Ok(());
        }
        let new_base = last + 1 - cap;
        if new_base > self.next {
            return Err(InputError::BeyondWindow {
                index: last,
                limit: self.next + cap,
                pending: self.end.saturating_sub(self.next),
            });
        }
        for col in self.base..new_base.min(self.base + cap) {
            let i = self.idx(col);
            self.slots[i].state = State::Unknown;
            self.slots[i].coefs.clear();
        }
        self.base = new_base;
        Ok(())
    }

    /// Takes source symbol `index` (shorter data is zero-padded, as the encoder pads).
    pub fn push_source(&mut self, index: u64, data: &[u8]) -> Result<Outcome, InputError> {
        self.stats.source_received += 1;
        let size = self.cfg.symbol_size;
        if data.len() > size {
            return self.reject(InputError::SymbolSize { len: data.len(), symbol_size: size });
        }
        if index < self.next {
            return self.stale();
        }
        if let Err(e) = self.make_room(index) {
            return self.reject(e);
        }
        self.end = self.end.max(index + 1);
        let i = self.idx(index);
        let outcome = match self.slots[i].state {
            State::Decoded => Outcome::Redundant,
            State::Unknown => {
                if self.slots[i].payload.is_empty() {
                    self.slots[i].payload = self.buffer();
                }
                let slot = &mut self.slots[i];
                slot.payload[..data.len()].copy_from_slice(data);
                slot.payload[data.len()..].fill(0);
                slot.state = State::Decoded;
                Outcome::Innovative
            }
            State::Seen => {
                // The row that saw this column loses its leading term: x_j is now known, so
                // `Σ c_m x_m = P - x_j` is a new equation over the later columns.
                let slot = &mut self.slots[i];
                let lo = index + 1;
                std::mem::swap(&mut self.eq_coefs, &mut slot.coefs);
                self.eq_payload.copy_from_slice(&slot.payload);
                gf256::xor(&mut self.eq_payload[..data.len()], data);
                slot.payload[..data.len()].copy_from_slice(data);
                slot.payload[data.len()..].fill(0);
                slot.state = State::Decoded;
                slot.coefs.clear();
                let outcome = self.insert(lo);
                // The column turned decoded whatever the rest of the row brought.
                self.resolve();
                return Ok(self.count(outcome));
            }
        };
        if outcome == Outcome::Innovative {
            self.resolve();
        }
        Ok(self.count(outcome))
    }

    /// Takes a repair symbol described by `info`.
    pub fn push_repair(&mut self, info: RepairInfo, payload: &[u8]) -> Result<Outcome, InputError> {
        self.stats.repair_received += 1;
        let size = self.cfg.symbol_size;
        if payload.len() != size {
            return self.reject(InputError::SymbolSize { len: payload.len(), symbol_size: size });
        }
        let count = usize::from(info.count);
        if count == 0 {
            return self.reject(InputError::EmptyRepair);
        }
        if count > self.cfg.max_window {
            return self.reject(InputError::RepairTooWide { count, max_window: self.cfg.max_window });
        }
        let Some(last) = info.first.checked_add(count as u64 - 1) else {
            return self.stale();
        };
        if last < self.next || info.first < self.base {
            return self.stale();
        }
        if let Err(e) = self.make_room(last) {
            return self.reject(e);
        }
        self.end = self.end.max(last + 1);
        info.coefficients(&mut self.repair_coefs);
        self.eq_coefs.clear();
        self.eq_coefs.extend_from_slice(&self.repair_coefs);
        self.eq_payload.copy_from_slice(payload);
        let outcome = self.insert(info.first);
        if outcome == Outcome::Innovative {
            self.resolve();
        }
        Ok(self.count(outcome))
    }

    /// Reduces the equation in `eq_coefs` (column `lo` onwards) / `eq_payload` and stores it
    /// as a new row if it is innovative.
    fn insert(&mut self, lo: u64) -> Outcome {
        self.terms.clear();
        let mut p = 0;
        let pivot = loop {
            let Some(&c) = self.eq_coefs.get(p) else {
                break None;
            };
            if c == 0 {
                p += 1;
                continue;
            }
            let col = lo + p as u64;
            let i = self.idx(col);
            match self.slots[i].state {
                State::Unknown => break Some((p, c)),
                State::Decoded => {}
                State::Seen => {
                    let row = &self.slots[i].coefs;
                    let need = p + 1 + row.len();
                    if self.eq_coefs.len() < need {
                        self.eq_coefs.resize(need, 0);
                    }
                    self.kernel.axpy(&mut self.eq_coefs[p + 1..need], c, row);
                }
            }
            self.eq_coefs[p] = 0;
            self.terms.push((c, col));
            p += 1;
        };
        let Some((p, c)) = pivot else {
            return Outcome::Redundant;
        };
        let col = lo + p as u64;
        // Payload: subtract every known symbol and row met on the way, in one pass.
        let mut payload = std::mem::take(&mut self.eq_payload);
        {
            let terms: Vec<(u8, &[u8])> =
                self.terms.iter().map(|&(c, m)| (c, &self.slots[self.idx(m)].payload[..])).collect();
            self.kernel.combine(&mut payload, &terms);
        }
        let inv = gf256::inv(c).unwrap_or(1);
        self.kernel.scale(&mut payload, inv);
        let mut coefs = std::mem::take(&mut self.eq_coefs);
        coefs.drain(..=p);
        self.kernel.scale(&mut coefs, inv);
        while coefs.last() == Some(&0) {
            coefs.pop();
        }
        let i = self.idx(col);
        let slot = &mut self.slots[i];
        slot.state = if coefs.is_empty() { State::Decoded } else { State::Seen };
        if slot.state == State::Decoded {
            self.stats.recovered += 1;
        }
        std::mem::swap(&mut slot.coefs, &mut coefs);
        std::mem::swap(&mut slot.payload, &mut payload);
        self.eq_coefs = coefs;
        self.eq_coefs.clear();
        // The slot was unknown: its buffer, if it had one yet, becomes the next equation's.
        self.eq_payload = if payload.is_empty() { self.buffer() } else { payload };
        Outcome::Innovative
    }

    /// Back-substitutes the longest decodable prefix starting at the next column to release.
    fn resolve(&mut self) {
        let mut col = self.next;
        let mut need = self.next;
        let mut closed = self.next;
        let mut has_rows = false;
        while col < self.end {
            let slot = &self.slots[self.idx(col)];
            match slot.state {
                State::Unknown => break,
                State::Decoded => {}
                State::Seen => {
                    need = need.max(col + 1 + slot.coefs.len() as u64);
                    has_rows = true;
                }
            }
            col += 1;
            if col >= need {
                closed = col;
            }
        }
        if !has_rows {
            return;
        }
        for col in (self.next..closed).rev() {
            let i = self.idx(col);
            if self.slots[i].state != State::Seen {
                continue;
            }
            let mut payload = std::mem::take(&mut self.slots[i].payload);
            let coefs = std::mem::take(&mut self.slots[i].coefs);
            {
                let terms: Vec<(u8, &[u8])> = coefs
                    .iter()
                    .enumerate()
                    .filter(|&(_, &c)| c != 0)
                    .map(|(k, &c)| (c, &self.slots[self.idx(col + 1 + k as u64)].payload[..]))
                    .collect();
                self.kernel.combine(&mut payload, &terms);
            }
            let slot = &mut self.slots[i];
            slot.payload = payload;
            slot.coefs = coefs;
            slot.coefs.clear();
            slot.state = State::Decoded;
            self.stats.recovered += 1;
        }
    }

    /// Releases the next source symbol in order, if it is decoded: `(index, symbol)`.
    pub fn pop(&mut self) -> Option<(u64, &[u8])> {
        if self.next >= self.end || self.state(self.next) != State::Decoded {
            return None;
        }
        let col = self.next;
        self.next += 1;
        self.stats.released += 1;
        Some((col, &self.slots[self.idx(col)].payload))
    }
}
