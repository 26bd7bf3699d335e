//! The decoder's input path: arbitrary bytes, split into datagrams, parsed as coded-symbol
//! packets and fed to a sliding-window decoder. Nothing may panic, and whatever is released
//! must be released in order, exactly once, with every input accounted for.
#![no_main]

use cohort_coding::{CoderConfig, Decoder, RepairInfo};
use cohort_wire::symbol::{SymbolKind, SymbolPacket, SymbolRepr};
use libfuzzer_sys::fuzz_target;

const SYMBOL: usize = 16;

fuzz_target!(|data: &[u8]| {
    let cfg = CoderConfig { symbol_size: SYMBOL, max_window: 8 };
    let mut dec = Decoder::new(cfg).expect("valid config");
    let mut next = 0u64;
    let mut accepted = 0u64;
    let mut rest = data;
    // Each datagram: one length byte, then that many bytes.
    while let Some((&len, tail)) = rest.split_first() {
        let take = usize::from(len).min(tail.len());
        let (dgram, tail) = tail.split_at(take);
        rest = tail;
        let Ok(p) = SymbolPacket::new_checked(dgram) else { continue };
        let Ok(repr) = SymbolRepr::parse(&p) else { continue };
        let res = match repr.kind {
            SymbolKind::Source { index } => dec.push_source(u64::from(index), p.payload()),
            SymbolKind::Repair { first, count, key } => {
                dec.push_repair(RepairInfo { first: u64::from(first), count, key }, p.payload())
            }
        };
        accepted += u64::from(res.is_ok());
        while let Some((i, sym)) = dec.pop() {
            assert_eq!(i, next, "released out of order");
            assert_eq!(sym.len(), SYMBOL);
            next += 1;
        }
        assert!(dec.seen() >= dec.next_release());
        assert!(dec.rank() >= dec.next_release());
    }
    let s = dec.stats();
    assert_eq!(s.released, next);
    assert_eq!(s.innovative + s.redundant + s.stale, accepted);
    assert_eq!(s.source_received + s.repair_received, accepted + s.rejected);
});
