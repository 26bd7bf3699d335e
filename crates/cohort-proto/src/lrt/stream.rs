//! Message division and reconstruction (seed 004 §III-A and the Division and Reconstruct
//! modules of its Fig. 4).
//!
//! Messages become a stream of `[length u32 BE][body]` records cut into equal-sized source
//! symbols. A record's body may run across symbols; its 4-byte length prefix never does: when
//! fewer than 4 bytes remain in a symbol, they are padding. A symbol is sent as soon as it is
//! full, or as soon as nothing else is queued, in which case the rest is zero padding that the
//! receiver recognises as a zero length (or as fewer than 4 remaining bytes). Zero padding is
//! never transmitted: symbols travel trimmed and the decoder pads them back. Messages are
//! 1 byte to [`MAX_MESSAGE`] bytes, so a zero length is unambiguous.

use cohort_time::Instant;
use std::collections::VecDeque;
use std::time::Duration;

/// Largest message: 16 MiB.
pub const MAX_MESSAGE: usize = 16 << 20;
const PREFIX: usize = 4;

/// Splits queued messages into source symbols.
#[derive(Debug)]
pub struct Divider {
    symbol_size: usize,
    queue: VecDeque<Vec<u8>>,
    /// Bytes of the front message's body already cut into symbols (None: prefix not yet).
    front_sent: Option<usize>,
    queued_bytes: usize,
}

impl Divider {
    /// A divider for symbols of `symbol_size` (at least 5 bytes: a prefix and one body byte).
    pub fn new(symbol_size: usize) -> Self {
        Divider { symbol_size, queue: VecDeque::new(), front_sent: None, queued_bytes: 0 }
    }

    /// Queues a message (the caller checked its size).
    pub fn push(&mut self, msg: Vec<u8>) {
        self.queued_bytes += msg.len() + PREFIX;
        self.queue.push_back(msg);
    }

    /// Whether nothing is queued.
    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    /// Bytes queued and not yet cut into symbols (prefixes included).
    pub fn queued_bytes(&self) -> usize {
        self.queued_bytes
    }

    /// Messages queued, the one being cut included.
    pub fn queued_messages(&self) -> usize {
        self.queue.len()
    }

    /// Cuts the next symbol into `out` (cleared first, at most `symbol_size` bytes, trailing
    /// padding omitted). Returns false when nothing is queued.
    pub fn next_symbol(&mut self, out: &mut Vec<u8>) -> bool {
        out.clear();
        let s = self.symbol_size;
        while out.len() < s {
            let Some(front) = self.queue.front() else {
                break;
            };
            let sent = match self.front_sent {
                Some(n) => n,
                None => {
                    if s - out.len() < PREFIX {
                        break;
                    }
                    out.extend_from_slice(&(front.len() as u32).to_be_bytes());
                    self.queued_bytes -= PREFIX;
                    0
                }
            };
            let take = (front.len() - sent).min(s - out.len());
            out.extend_from_slice(&front[sent..sent + take]);
            self.queued_bytes -= take;
            if sent + take == front.len() {
                self.queue.pop_front();
                self.front_sent = None;
            } else {
                self.front_sent = Some(sent + take);
            }
        }
        !out.is_empty()
    }
}

/// How long messages wait in the send queue before their last byte is cut into a symbol:
/// the sender's part of a message's delay, which a delay target must count (a message that
/// waited 2 ms here meets 2 ms less of its budget on the paths). `send` takes no time (as in
/// quinn and smoltcp), so a message is stamped by the first call after it that knows the time
/// (the driver's next transmit poll or timer); the wait is short by at most that gap.
#[derive(Debug, Default)]
pub struct QueueWaits {
    /// When each queued message was first seen, oldest first (`None`: not yet).
    at: VecDeque<Option<Instant>>,
    unstamped: usize,
    last: Option<Duration>,
}

impl QueueWaits {
    /// A message joined the queue.
    pub fn queued(&mut self) {
        self.at.push_back(None);
        self.unstamped += 1;
    }

    /// The time is `now`: stamps the messages queued since the last call.
    pub fn stamp(&mut self, now: Instant) {
        for s in self.at.iter_mut().rev().take(self.unstamped) {
            *s = Some(now);
        }
        self.unstamped = 0;
    }

    /// `done` messages (the oldest) were cut whole by `now`.
    pub fn cut(&mut self, now: Instant, done: usize) {
        for _ in 0..done {
            if let Some(s) = self.at.pop_front() {
                self.last = Some(now.saturating_duration_since(s.unwrap_or(now)));
            }
        }
        self.unstamped = self.unstamped.min(self.at.len());
    }

    /// How long the last message cut whole had waited.
    pub fn last(&self) -> Option<Duration> {
        self.last
    }
}

/// A symbol stream that cannot come from a correct sender.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum StreamError {
    #[error("message length {0} exceeds the 16 MiB limit")]
    TooLong(usize),
}

/// Rebuilds messages from source symbols released in order.
#[derive(Debug)]
pub struct Reassembler {
    symbol_size: usize,
    /// The message being rebuilt and its announced length.
    partial: Option<(usize, Vec<u8>)>,
}

impl Reassembler {
    pub fn new(symbol_size: usize) -> Self {
        Reassembler { symbol_size, partial: None }
    }

    /// Bytes held for a message not yet complete.
    pub fn partial_bytes(&self) -> usize {
        self.partial.as_ref().map_or(0, |(_, v)| v.len())
    }

    /// Consumes one (zero-padded, full-size) symbol; completed messages go to `out`.
    pub fn push_symbol(&mut self, sym: &[u8], out: &mut VecDeque<Vec<u8>>) -> Result<(), StreamError> {
        let s = sym.len().min(self.symbol_size);
        let mut pos = 0;
        while pos < s {
            if let Some((len, body)) = &mut self.partial {
                let take = (*len - body.len()).min(s - pos);
                body.extend_from_slice(&sym[pos..pos + take]);
                pos += take;
                if body.len() == *len
                    && let Some((_, body)) = self.partial.take()
                {
                    out.push_back(body);
                }
                continue;
            }
            if s - pos < PREFIX {
                break;
            }
            let len = u32::from_be_bytes([sym[pos], sym[pos + 1], sym[pos + 2], sym[pos + 3]]) as usize;
            pos += PREFIX;
            if len == 0 {
                break;
            }
            if len > MAX_MESSAGE {
                return Err(StreamError::TooLong(len));
            }
            self.partial = Some((len, Vec::with_capacity(len.min(1 << 20))));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Messages are stamped by the first call that knows the time after they were queued,
    /// and the wait is taken when the last of a message's bytes is cut.
    #[test]
    fn queue_waits_stamp_late_and_measure_at_the_last_byte() {
        let t = |ms: u64| Instant::ZERO + Duration::from_millis(ms);
        let mut w = QueueWaits::default();
        assert_eq!(w.last(), None);
        w.queued();
        w.queued();
        w.stamp(t(10));
        w.queued();
        w.cut(t(12), 0);
        assert_eq!(w.last(), None, "nothing cut whole yet");
        w.stamp(t(15));
        w.cut(t(16), 2);
        assert_eq!(w.last(), Some(Duration::from_millis(6)), "the second of the first two");
        w.cut(t(20), 1);
        assert_eq!(w.last(), Some(Duration::from_millis(5)), "stamped at 15");
        w.queued();
        w.cut(t(21), 1);
        assert_eq!(w.last(), Some(Duration::ZERO), "cut before any call stamped it: no wait known");
        w.cut(t(22), 3);
        assert_eq!(w.last(), Some(Duration::ZERO), "cutting more than is queued changes nothing");
    }

    fn run(symbol_size: usize, msgs: &[Vec<u8>], flush_every: usize) -> (Vec<Vec<u8>>, usize) {
        let mut d = Divider::new(symbol_size);
        let mut r = Reassembler::new(symbol_size);
        let mut out = VecDeque::new();
        let mut sym = Vec::new();
        let mut symbols = 0;
        let mut cut = |d: &mut Divider, out: &mut VecDeque<Vec<u8>>| {
            while d.next_symbol(&mut sym) {
                assert!(sym.len() <= symbol_size);
                symbols += 1;
                let mut padded = sym.clone();
                padded.resize(symbol_size, 0);
                r.push_symbol(&padded, out).unwrap();
            }
        };
        for (i, m) in msgs.iter().enumerate() {
            d.push(m.clone());
            if flush_every > 0 && i % flush_every == 0 {
                cut(&mut d, &mut out);
            }
        }
        cut(&mut d, &mut out);
        assert_eq!(d.queued_bytes(), 0);
        (out.into_iter().collect(), symbols)
    }

    #[test]
    fn one_kib_messages_take_one_symbol_each_when_sent_alone() {
        let msgs: Vec<Vec<u8>> = (0..10).map(|i| vec![i as u8; 1024]).collect();
        let (got, symbols) = run(1200, &msgs, 1);
        assert_eq!(got, msgs);
        assert_eq!(symbols, 10, "zero padding, no waiting for the next message");
    }

    #[test]
    fn queued_messages_fill_the_residual_space() {
        let msgs: Vec<Vec<u8>> = (0..10).map(|i| vec![i as u8; 1024]).collect();
        let (got, symbols) = run(1200, &msgs, 0);
        assert_eq!(got, msgs);
        assert_eq!(symbols, (10 * 1028usize).div_ceil(1200), "packed back to back");
    }

    #[test]
    fn prefix_never_straddles_and_zeros_in_bodies_survive() {
        // 1 + 4 + 2 = 7 bytes used, 3 left in a 10-byte symbol: too few for a prefix.
        let msgs = vec![vec![0u8; 2], vec![0u8; 1], vec![7u8; 25], vec![0u8; 3]];
        let (got, _) = run(10, &msgs, 0);
        assert_eq!(got, msgs);
    }

    #[test]
    fn oversized_length_is_an_error() {
        let mut r = Reassembler::new(8);
        let mut out = VecDeque::new();
        let sym = [0x01, 0x00, 0x00, 0x01, 0, 0, 0, 0];
        assert_eq!(r.push_symbol(&sym, &mut out), Err(StreamError::TooLong((16 << 20) + 1)));
    }

    proptest! {
        #[test]
        fn any_messages_round_trip(
            symbol_size in 5usize..64,
            lens in proptest::collection::vec(1usize..200, 0..40),
            flush_every in 0usize..4,
        ) {
            let msgs: Vec<Vec<u8>> = lens.iter().enumerate().map(|(i, &n)| (0..n).map(|k| (i * 31 + k) as u8).collect()).collect();
            let (got, _) = run(symbol_size, &msgs, flush_every);
            prop_assert_eq!(got, msgs);
        }
    }
}
