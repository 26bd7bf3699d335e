//! The sliding-window encoder.

use crate::gf256::Kernel;
use crate::tinymt::{DENSITY_FULL, coding_coefficients};
use std::collections::VecDeque;
use std::ops::Range;

/// Limits shared by an encoder and its decoder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CoderConfig {
    /// Bytes per symbol; every source symbol is zero-padded to this size.
    pub symbol_size: usize,
    /// Most source symbols a repair may combine: the encoder's window bound. The decoder keeps
    /// this many columns of history plus whatever it has not yet released.
    pub max_window: usize,
}

impl CoderConfig {
    /// Columns a decoder holds: one window of released history (repairs in flight may still
    /// combine it) and one of symbols not yet released. The encoder never runs further than
    /// this ahead of the decoder's last reported release point.
    pub fn decoder_capacity(&self) -> usize {
        2 * self.max_window
    }
}

impl CoderConfig {
    /// Largest window a repair header can describe (its count field is 16 bits).
    pub const MAX_WINDOW_LIMIT: usize = u16::MAX as usize;

    /// Checks the limits.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.symbol_size == 0 {
            return Err(ConfigError::ZeroSymbolSize);
        }
        if self.max_window == 0 || self.max_window > Self::MAX_WINDOW_LIMIT {
            return Err(ConfigError::Window(self.max_window));
        }
        Ok(())
    }
}

/// An invalid [`CoderConfig`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    #[error("symbol size must be at least one byte")]
    ZeroSymbolSize,
    #[error("window of {0} symbols is outside 1..=65535")]
    Window(usize),
}

/// Why [`Encoder::push`] refused a source symbol.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PushError {
    #[error("source symbol of {len} bytes exceeds the symbol size {symbol_size}")]
    TooLarge { len: usize, symbol_size: usize },
    /// Backpressure: wait for an acknowledgement to slide the window.
    #[error("window full: {0} symbols not yet released by the decoder")]
    WindowFull(usize),
}

/// Why [`Encoder::repair`] produced nothing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RepairError {
    #[error("nothing to protect: every source symbol is acknowledged")]
    EmptyWindow,
    #[error("output buffer of {len} bytes, symbol size is {symbol_size}")]
    BufferSize { len: usize, symbol_size: usize },
}

/// What a receiver needs to rebuild a repair symbol's equation: the window it covers and the
/// key its coefficients derive from (RFC 8681's repair FEC payload ID, with a 64-bit index).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RepairInfo {
    /// Index of the first source symbol combined.
    pub first: u64,
    /// Number of consecutive source symbols combined.
    pub count: u16,
    /// Seed of the coefficients (RFC 8682 TinyMT32).
    pub key: u16,
}

impl RepairInfo {
    /// Source indices this repair covers.
    pub fn range(&self) -> Range<u64> {
        self.first..self.first + u64::from(self.count)
    }

    /// Its coefficients, one per covered source symbol.
    pub fn coefficients(&self, out: &mut Vec<u8>) {
        out.clear();
        out.resize(usize::from(self.count), 0);
        coding_coefficients(self.key, DENSITY_FULL, out);
    }
}

/// Moves symbol buffers of `size` bytes from `from` into `spare` until it holds `want` (or
/// `from` runs out), dropping any of another size. A connection keeps one pool for all its
/// coders and tops each up before it pushes a symbol, so that no coder allocates while another
/// has buffers to spare.
pub(crate) fn top_up(spare: &mut Vec<Box<[u8]>>, from: &mut Vec<Box<[u8]>>, want: usize, size: usize) {
    while spare.len() < want {
        match from.pop() {
            Some(b) if b.len() == size => spare.push(b),
            Some(_) => {}
            None => break,
        }
    }
}

/// Sliding-window RLNC encoder.
///
/// Source symbols are numbered from 0 in the order they are [pushed](Self::push) (the
/// encoder rank of seed 004 §III-C is the number pushed). The window is
/// `[oldest unacknowledged, newest]`; an [acknowledgement](Self::ack) of the decoder's seen
/// count drops the prefix it no longer needs, and [`repair`](Self::repair) combines the whole
/// window with coefficients drawn from a fresh repair key.
#[derive(Debug)]
pub struct Encoder {
    cfg: CoderConfig,
    kernel: Kernel,
    window: VecDeque<Box<[u8]>>,
    spare: Vec<Box<[u8]>>,
    first: u64,
    released: u64,
    next_key: u16,
    coefs: Vec<u8>,
    /// Symbol buffers this encoder allocated itself (none while spares last).
    allocated: u64,
}

impl Encoder {
    /// A new encoder with the [best](Kernel::best) kernel.
    pub fn new(cfg: CoderConfig) -> Result<Self, ConfigError> {
        Self::with_kernel(cfg, Kernel::best())
    }

    /// A new encoder with a chosen kernel (benchmarks compare them).
    pub fn with_kernel(cfg: CoderConfig, kernel: Kernel) -> Result<Self, ConfigError> {
        Self::with_buffers(cfg, kernel, Vec::new())
    }

    /// A new encoder that stores its source symbols in `buffers` (those of a finished coder's
    /// [`into_buffers`](Self::into_buffers), say) before it allocates any, so that a connection
    /// rolling over to its next coder allocates nothing. Buffers of another size are dropped.
    pub fn with_buffers(cfg: CoderConfig, kernel: Kernel, mut buffers: Vec<Box<[u8]>>) -> Result<Self, ConfigError> {
        cfg.validate()?;
        buffers.retain(|b| b.len() == cfg.symbol_size);
        Ok(Encoder {
            cfg,
            kernel,
            window: VecDeque::with_capacity(cfg.max_window),
            spare: buffers,
            first: 0,
            released: 0,
            next_key: 0,
            coefs: Vec::with_capacity(cfg.max_window),
            allocated: 0,
        })
    }

    /// Every symbol buffer this encoder holds, stored symbols included, for the next coder.
    pub fn into_buffers(self) -> Vec<Box<[u8]>> {
        let mut v = self.spare;
        v.extend(self.window);
        v
    }

    /// Takes buffers from `buffers` until this encoder holds `spare` unused ones (or `buffers`
    /// runs out); see [`top_up`].
    pub fn add_buffers(&mut self, buffers: &mut Vec<Box<[u8]>>, spare: usize) {
        top_up(&mut self.spare, buffers, spare, self.cfg.symbol_size);
    }

    /// Symbol buffers held by this encoder.
    pub fn buffers(&self) -> usize {
        self.spare.len() + self.window.len()
    }

    /// Symbol buffers this encoder had to allocate (those it was given not counted).
    pub fn allocated(&self) -> u64 {
        self.allocated
    }

    /// The configuration.
    pub fn config(&self) -> CoderConfig {
        self.cfg
    }

    /// Encoder rank: how many source symbols have been pushed.
    pub fn rank(&self) -> u64 {
        self.first + self.window.len() as u64
    }

    /// Indices of the unacknowledged source symbols.
    pub fn window(&self) -> Range<u64> {
        self.first..self.rank()
    }

    /// Whether a [`push`](Self::push) would be refused for lack of room: the window is at its
    /// bound, or the decoder would have no column left for the symbol. The second limit matters
    /// under heavy loss: a seen symbol is decoded only once the rows after it close, so the
    /// decoder's undecoded span can outgrow the encoder's window.
    pub fn is_full(&self) -> bool {
        self.window.len() >= self.cfg.max_window || self.rank() >= self.released + self.cfg.decoder_capacity() as u64
    }

    /// Adds a source symbol (zero-padded to the symbol size) and returns its index.
    pub fn push(&mut self, data: &[u8]) -> Result<u64, PushError> {
        let size = self.cfg.symbol_size;
        if data.len() > size {
            return Err(PushError::TooLarge { len: data.len(), symbol_size: size });
        }
        if self.is_full() {
            return Err(PushError::WindowFull(self.rank().saturating_sub(self.released) as usize));
        }
        let mut buf = match self.spare.pop() {
            Some(b) => b,
            None => {
                self.allocated += 1;
                vec![0u8; size].into_boxed_slice()
            }
        };
        buf[..data.len()].copy_from_slice(data);
        buf[data.len()..].fill(0);
        self.window.push_back(buf);
        Ok(self.rank() - 1)
    }

    /// The stored (padded) source symbol `index`, if still in the window.
    pub fn source(&self, index: u64) -> Option<&[u8]> {
        let off = index.checked_sub(self.first)?;
        self.window.get(usize::try_from(off).ok()?).map(|b| &b[..])
    }

    /// Takes the decoder's feedback: its seen count ([`Decoder::seen`](crate::Decoder::seen))
    /// and release point ([`Decoder::next_release`](crate::Decoder::next_release)). Drops every
    /// source symbol below `seen` (no later repair needs them) and returns how many. Values
    /// are clamped to what was pushed and never move backwards, since feedback from the
    /// network may be old or reordered.
    pub fn ack(&mut self, seen: u64, released: u64) -> usize {
        self.released = self.released.max(released.min(self.rank()));
        let upto = seen.min(self.rank());
        let mut dropped = 0;
        while self.first < upto {
            if let Some(b) = self.window.pop_front() {
                self.spare.push(b);
            }
            self.first += 1;
            dropped += 1;
        }
        dropped
    }

    /// Writes a repair symbol over the whole window into `out` with the next repair key.
    pub fn repair(&mut self, out: &mut [u8]) -> Result<RepairInfo, RepairError> {
        let info = self.repair_with_key(self.next_key, out)?;
        self.next_key = self.next_key.wrapping_add(1);
        Ok(info)
    }

    /// Writes the repair symbol for `key` over the whole window into `out`.
    pub fn repair_with_key(&mut self, key: u16, out: &mut [u8]) -> Result<RepairInfo, RepairError> {
        if out.len() != self.cfg.symbol_size {
            return Err(RepairError::BufferSize { len: out.len(), symbol_size: self.cfg.symbol_size });
        }
        if self.window.is_empty() {
            return Err(RepairError::EmptyWindow);
        }
        // The window never exceeds `max_window`, which `validate` bounds by u16::MAX.
        let info = RepairInfo { first: self.first, count: self.window.len() as u16, key };
        info.coefficients(&mut self.coefs);
        out.fill(0);
        let terms: Vec<(u8, &[u8])> = self.coefs.iter().zip(&self.window).map(|(&c, s)| (c, &s[..])).collect();
        self.kernel.combine(out, &terms);
        Ok(info)
    }
}
