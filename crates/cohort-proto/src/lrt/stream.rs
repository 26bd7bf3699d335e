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

use std::collections::VecDeque;

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
