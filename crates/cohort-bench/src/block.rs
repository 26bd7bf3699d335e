//! The block-RLNC scheme seed 004 §IV-B compares LRT with, as a sans-IO sender/receiver pair.
//!
//! Source symbols are sent as soon as they are cut (the code is systematic, as LRT's is), and
//! the symbols accumulated during one timing cycle (10 ms in the paper) form a block. When the
//! cycle ends, the block is closed and `ceil(k * r)` repair symbols over the whole block
//! follow, `r` matched to the loss the acknowledgements reveal with the same rule LRT uses.
//! The receiver acknowledges each block's rank; a block not fully decoded one probe timeout
//! after its last repair gets as many further repairs as it still lacks, so delivery is
//! reliable. Messages are released in order across blocks. Packets use the LRT formats (the
//! block number is the coder ID), so both schemes pay the same header bytes.

use cohort_coding::{CoderConfig, Decoder, Encoder, RepairInfo};
use cohort_proto::lrt::pace::{LossEstimator, RttEstimator};
use cohort_proto::lrt::stream::{Divider, Reassembler};
use cohort_time::Instant;
use cohort_wire::lrt::{AckRepr, LrtRepr};
use cohort_wire::symbol::{SymbolKind, SymbolRepr};
use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

/// Parameters of the block scheme.
#[derive(Debug, Clone)]
pub struct BlockConfig {
    pub symbol_size: usize,
    /// Accumulation cycle: a block holds the source symbols of one cycle.
    pub cycle: Duration,
    /// Largest block; a cycle with more symbols closes early.
    pub max_block: usize,
    pub redundancy_min: f64,
    pub redundancy_margin: f64,
}

impl Default for BlockConfig {
    fn default() -> Self {
        BlockConfig {
            symbol_size: 1200,
            cycle: Duration::from_millis(10),
            max_block: 1024,
            redundancy_min: 0.05,
            redundancy_margin: 1.0,
        }
    }
}

#[derive(Debug)]
struct TxBlock {
    enc: Encoder,
    lens: Vec<u16>,
    closed: bool,
    repairs_due: u64,
    last_repair: Instant,
    acked_seen: u64,
}

/// Sends messages as blocks of source symbols followed by repairs.
#[derive(Debug)]
pub struct BlockSender {
    cfg: BlockConfig,
    divider: Divider,
    sym: Vec<u8>,
    blocks: BTreeMap<u16, TxBlock>,
    next_block: u16,
    cycle_end: Option<Instant>,
    loss: LossEstimator,
    rtt: RttEstimator,
    sent: VecDeque<(u64, Instant, u64)>,
    data_total: u64,
    last_echo: Option<(u64, u64)>,
}

impl BlockSender {
    pub fn new(cfg: BlockConfig) -> Self {
        BlockSender {
            divider: Divider::new(cfg.symbol_size),
            sym: Vec::with_capacity(cfg.symbol_size),
            blocks: BTreeMap::new(),
            next_block: 0,
            cycle_end: None,
            loss: LossEstimator::default(),
            rtt: RttEstimator::new(Duration::from_millis(300)),
            sent: VecDeque::new(),
            data_total: 0,
            last_echo: None,
            cfg,
        }
    }

    pub fn send(&mut self, msg: &[u8]) {
        self.divider.push(msg.to_vec());
    }

    fn redundancy(&self) -> f64 {
        self.loss.loss() * (1.0 + self.cfg.redundancy_margin) + self.cfg.redundancy_min
    }

    fn coder_cfg(&self) -> CoderConfig {
        CoderConfig {
            symbol_size: self.cfg.symbol_size,
            max_window: self.cfg.max_block,
        }
    }

    fn close_current(&mut self, now: Instant) {
        let r = self.redundancy();
        if let Some(b) = self.blocks.get_mut(&self.next_block.wrapping_sub(1))
            && !b.closed
        {
            b.closed = true;
            b.repairs_due += (b.enc.rank() as f64 * r).ceil() as u64;
            b.last_repair = now;
        }
        self.cycle_end = None;
    }

    /// When the sender next has something to do.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let probe = self.rtt.probe_timeout();
        let mut t = self.cycle_end;
        for b in self.blocks.values().filter(|b| b.closed) {
            let at = b.last_repair + probe;
            t = Some(t.map_or(at, |x| x.min(at)));
        }
        t
    }

    /// The next packet; `pn` is the packet number it travels with.
    pub fn poll_transmit(&mut self, now: Instant, pn: u64, buf: &mut [u8]) -> Option<usize> {
        let n = self.next_packet(now, buf)?;
        self.data_total += 1;
        self.sent.push_back((pn, now, self.data_total));
        if self.sent.len() > 1 << 14 {
            self.sent.pop_front();
        }
        Some(n)
    }

    fn next_packet(&mut self, now: Instant, buf: &mut [u8]) -> Option<usize> {
        if self.cycle_end.is_some_and(|e| now >= e) {
            self.close_current(now);
        }
        if !self.divider.is_empty() {
            if self.cycle_end.is_none() {
                let enc = Encoder::new(self.coder_cfg()).ok()?;
                let tx = TxBlock {
                    enc,
                    lens: vec![],
                    closed: false,
                    repairs_due: 0,
                    last_repair: now,
                    acked_seen: 0,
                };
                self.blocks.insert(self.next_block, tx);
                self.next_block = self.next_block.wrapping_add(1);
                self.cycle_end = Some(now + self.cfg.cycle);
            }
            let id = self.next_block.wrapping_sub(1);
            self.divider.next_symbol(&mut self.sym);
            let b = self.blocks.get_mut(&id)?;
            let index = b.enc.push(&self.sym).ok()? as u32;
            b.lens.push(self.sym.len() as u16);
            let full = b.enc.is_full();
            let header = SymbolRepr {
                coder: id,
                kind: SymbolKind::Source { index },
            };
            let n = LrtRepr::Symbol {
                header,
                payload: &self.sym,
            }
            .emit(buf);
            if full {
                self.close_current(now);
            }
            return n;
        }
        let probe = self.rtt.probe_timeout();
        for (&id, b) in self.blocks.iter_mut().filter(|(_, b)| b.closed) {
            if b.repairs_due == 0 && now >= b.last_repair + probe {
                // Still not decoded a probe timeout after the last repair: send what it lacks.
                b.repairs_due = (b.enc.rank() - b.acked_seen).max(1);
            }
            if b.repairs_due > 0 {
                b.repairs_due -= 1;
                b.last_repair = now;
                self.sym.resize(self.cfg.symbol_size, 0);
                let info = b.enc.repair(&mut self.sym).ok()?;
                let used = usize::from(b.lens.iter().copied().max().unwrap_or(0));
                let header = SymbolRepr {
                    coder: id,
                    kind: SymbolKind::Repair {
                        first: info.first as u32,
                        count: info.count,
                        key: info.key,
                    },
                };
                return LrtRepr::Symbol {
                    header,
                    payload: &self.sym[..used],
                }
                .emit(buf);
            }
        }
        None
    }

    /// Takes an acknowledgement.
    pub fn handle_packet(&mut self, now: Instant, bytes: &[u8]) {
        let Ok(LrtRepr::Ack(a)) = LrtRepr::parse(bytes) else {
            return;
        };
        if self.last_echo.is_none_or(|(e, _)| a.echo_pn > e) {
            if let Some(&(_, at, total)) = self.sent.iter().find(|s| s.0 == a.echo_pn) {
                self.rtt.sample(now - at);
                if let Some((e, rx)) = self.last_echo
                    && let Some(&(_, _, base)) = self.sent.iter().find(|s| s.0 == e)
                {
                    self.loss.record(total - base, a.rx_data.saturating_sub(rx));
                }
            }
            self.last_echo = Some((a.echo_pn, a.rx_data));
        }
        if a.full_rank {
            self.blocks.remove(&a.coder);
        } else if let Some(b) = self.blocks.get_mut(&a.coder) {
            b.acked_seen = b.acked_seen.max(u64::from(a.seen));
        }
    }

    /// Whether every block is acknowledged and nothing is queued.
    pub fn idle(&self) -> bool {
        self.blocks.is_empty() && self.divider.is_empty()
    }
}

#[derive(Debug)]
struct RxBlock {
    dec: Decoder,
    /// Block size once a repair (which covers the whole block) told it.
    k: Option<u64>,
    ack: bool,
}

/// Decodes blocks and releases messages in order.
#[derive(Debug)]
pub struct BlockReceiver {
    cfg: BlockConfig,
    blocks: BTreeMap<u16, RxBlock>,
    next: u16,
    reasm: Reassembler,
    pub messages: VecDeque<Vec<u8>>,
    highest_pn: u64,
    rx_data: u64,
    done_acks: VecDeque<u16>,
    padded: Vec<u8>,
}

impl BlockReceiver {
    pub fn new(cfg: BlockConfig) -> Self {
        BlockReceiver {
            blocks: BTreeMap::new(),
            next: 0,
            reasm: Reassembler::new(cfg.symbol_size),
            messages: VecDeque::new(),
            highest_pn: 0,
            rx_data: 0,
            done_acks: VecDeque::new(),
            padded: vec![0; cfg.symbol_size],
            cfg,
        }
    }

    pub fn handle_packet(&mut self, pn: u64, bytes: &[u8]) {
        let Ok(LrtRepr::Symbol { header, payload }) = LrtRepr::parse(bytes) else {
            return;
        };
        self.highest_pn = self.highest_pn.max(pn);
        self.rx_data += 1;
        if header.coder.wrapping_sub(self.next) >= 0x8000 {
            self.done_acks.push_back(header.coder);
            return;
        }
        let cfg = CoderConfig {
            symbol_size: self.cfg.symbol_size,
            max_window: self.cfg.max_block,
        };
        let Some(b) = (match self.blocks.entry(header.coder) {
            std::collections::btree_map::Entry::Occupied(o) => Some(o.into_mut()),
            std::collections::btree_map::Entry::Vacant(v) => Decoder::new(cfg).ok().map(|dec| {
                v.insert(RxBlock {
                    dec,
                    k: None,
                    ack: false,
                })
            }),
        }) else {
            return;
        };
        let _ = match header.kind {
            SymbolKind::Source { index } => b.dec.push_source(u64::from(index), payload),
            SymbolKind::Repair { first, count, key } => {
                b.k = Some(u64::from(first) + u64::from(count));
                self.padded[..payload.len()].copy_from_slice(payload);
                self.padded[payload.len()..].fill(0);
                b.dec.push_repair(
                    RepairInfo {
                        first: u64::from(first),
                        count,
                        key,
                    },
                    &self.padded,
                )
            }
        };
        b.ack = true;
        self.release();
    }

    fn release(&mut self) {
        while let Some(b) = self.blocks.get_mut(&self.next) {
            while let Some((_, sym)) = b.dec.pop() {
                let _ = self.reasm.push_symbol(sym, &mut self.messages);
            }
            if b.k.is_some_and(|k| b.dec.next_release() >= k) {
                self.blocks.remove(&self.next);
                self.done_acks.push_back(self.next);
                self.next = self.next.wrapping_add(1);
            } else {
                break;
            }
        }
    }

    /// The next acknowledgement to send.
    pub fn poll_transmit(&mut self, buf: &mut [u8]) -> Option<usize> {
        let (coder, full_rank, seen, released) = if let Some(id) = self.done_acks.pop_front() {
            (id, true, 0, 0)
        } else {
            let (&id, b) = self.blocks.iter_mut().find(|(_, b)| b.ack)?;
            b.ack = false;
            (id, false, b.dec.seen() as u32, b.dec.next_release() as u32)
        };
        let ack = AckRepr {
            coder,
            full_rank,
            seen,
            released,
            echo_pn: self.highest_pn,
            rx_data: self.rx_data,
        };
        LrtRepr::Ack(ack).emit(buf)
    }
}
