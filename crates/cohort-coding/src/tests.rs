//! Encoder and decoder together.

use super::*;
use proptest::prelude::*;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

const SYM: usize = 48;

fn cfg(w: usize) -> CoderConfig {
    CoderConfig { symbol_size: SYM, max_window: w }
}

fn source(i: u64) -> Vec<u8> {
    // Distinct, non-trivial content per index; length varies to exercise padding.
    let len = 1 + (i as usize * 7) % SYM;
    (0..len).map(|k| (i as u8).wrapping_mul(31).wrapping_add(k as u8 ^ 0x5A)).collect()
}

fn padded(i: u64) -> Vec<u8> {
    let mut v = source(i);
    v.resize(SYM, 0);
    v
}

fn drain(dec: &mut Decoder, out: &mut Vec<u64>) {
    while let Some((i, data)) = dec.pop() {
        assert_eq!(data, &padded(i)[..], "content of symbol {i}");
        out.push(i);
    }
}

#[test]
fn invalid_configs_are_refused() {
    assert_eq!(Encoder::new(CoderConfig { symbol_size: 0, max_window: 4 }).err(), Some(ConfigError::ZeroSymbolSize));
    assert_eq!(Decoder::new(CoderConfig { symbol_size: 8, max_window: 0 }).err(), Some(ConfigError::Window(0)));
    assert!(Encoder::new(CoderConfig { symbol_size: 8, max_window: 70_000 }).is_err());
}

#[test]
fn lossless_stream_is_released_immediately_in_order() {
    let mut enc = Encoder::new(cfg(8)).unwrap();
    let mut dec = Decoder::new(cfg(8)).unwrap();
    let mut out = vec![];
    for _ in 0..100 {
        let i = enc.push(&source(enc.rank())).unwrap();
        assert_eq!(dec.push_source(i, enc.source(i).unwrap()).unwrap(), Outcome::Innovative);
        drain(&mut dec, &mut out);
        assert_eq!(out.len() as u64, i + 1, "released the moment it arrived");
        enc.ack(dec.seen(), dec.next_release());
    }
    assert_eq!(dec.stats().recovered, 0);
    assert_eq!(dec.rank(), 100);
}

/// Seed 004, Fig. 3: P1 lost, then the repair (P1+P2) recovers it; P3, P4 and P6 lost and
/// recovered by later repairs, released strictly in order.
#[test]
fn seed_figure_3_walkthrough() {
    let mut enc = Encoder::new(cfg(16)).unwrap();
    let mut dec = Decoder::new(cfg(16)).unwrap();
    let mut out = vec![];
    let mut rep = vec![0u8; SYM];
    let send_source = |enc: &mut Encoder, dec: &mut Decoder, lost: bool| {
        let i = enc.push(&source(enc.rank())).unwrap();
        if !lost {
            dec.push_source(i, enc.source(i).unwrap()).unwrap();
        }
    };
    send_source(&mut enc, &mut dec, true); // P1 (index 0) lost
    send_source(&mut enc, &mut dec, false); // P2
    let info = enc.repair(&mut rep).unwrap();
    assert_eq!(info.range(), 0..2);
    assert_eq!(dec.push_repair(info, &rep).unwrap(), Outcome::Innovative);
    drain(&mut dec, &mut out);
    assert_eq!(out, [0, 1]);
    enc.ack(dec.seen(), dec.next_release());
    send_source(&mut enc, &mut dec, true); // P3 lost
    send_source(&mut enc, &mut dec, true); // P4 lost
    let info = enc.repair(&mut rep).unwrap();
    dec.push_repair(info, &rep).unwrap();
    assert_eq!(dec.seen(), 3, "P3 is seen");
    assert_eq!(dec.rank(), 3);
    drain(&mut dec, &mut out);
    assert_eq!(out, [0, 1], "P3 seen but not decodable yet");
    enc.ack(dec.seen(), dec.next_release());
    send_source(&mut enc, &mut dec, false); // P5
    send_source(&mut enc, &mut dec, true); // P6 lost
    let info = enc.repair(&mut rep).unwrap();
    dec.push_repair(info, &rep).unwrap();
    assert_eq!(dec.seen(), 5, "P4 seen, P5 decoded");
    enc.ack(dec.seen(), dec.next_release());
    send_source(&mut enc, &mut dec, false); // P7
    send_source(&mut enc, &mut dec, false); // P8
    drain(&mut dec, &mut out);
    assert_eq!(out, [0, 1]);
    let info = enc.repair(&mut rep).unwrap();
    assert_eq!(dec.push_repair(info, &rep).unwrap(), Outcome::Innovative);
    drain(&mut dec, &mut out);
    assert_eq!(out, (0..8).collect::<Vec<_>>(), "everything recovered, in order");
    assert_eq!(dec.stats().recovered, 4);
}

#[test]
fn duplicates_stale_and_bad_input_are_counted() {
    let mut enc = Encoder::new(cfg(4)).unwrap();
    let mut dec = Decoder::new(cfg(4)).unwrap();
    let mut rep = vec![0u8; SYM];
    let i = enc.push(&source(0)).unwrap();
    let info = enc.repair(&mut rep).unwrap();
    assert_eq!(dec.push_source(i, &source(0)).unwrap(), Outcome::Innovative);
    assert_eq!(dec.push_source(i, &source(0)).unwrap(), Outcome::Redundant);
    assert_eq!(dec.push_repair(info, &rep).unwrap(), Outcome::Redundant);
    assert!(dec.pop().is_some());
    assert_eq!(dec.push_source(i, &source(0)).unwrap(), Outcome::Stale);
    assert_eq!(dec.push_repair(info, &rep).unwrap(), Outcome::Stale);
    assert_eq!(dec.push_source(1, &[0u8; SYM + 1]), Err(InputError::SymbolSize { len: SYM + 1, symbol_size: SYM }));
    assert_eq!(
        dec.push_repair(info, &rep[1..]).unwrap_err(),
        InputError::SymbolSize { len: SYM - 1, symbol_size: SYM }
    );
    let empty = RepairInfo { first: 1, count: 0, key: 0 };
    assert_eq!(dec.push_repair(empty, &rep), Err(InputError::EmptyRepair));
    let wide = RepairInfo { first: 1, count: 5, key: 0 };
    assert!(matches!(dec.push_repair(wide, &rep), Err(InputError::RepairTooWide { .. })));
    let far = RepairInfo { first: u64::MAX - 1, count: 4, key: 0 };
    assert_eq!(dec.push_repair(far, &rep).unwrap(), Outcome::Stale, "index overflow is stale, not a panic");
    // Column 1 lost; columns 2..=8 would need history beyond 2 * window while 1 is pending.
    assert!(dec.push_source(2, &source(2)).is_ok());
    assert!(matches!(dec.push_source(9, &source(9)), Err(InputError::BeyondWindow { .. })));
    let s = dec.stats();
    assert_eq!((s.innovative, s.redundant, s.stale, s.rejected), (2, 2, 3, 5));
    assert_eq!(s.source_received + s.repair_received, 2 + 2 + 3 + 5, "each input counted once");
    assert_eq!(s.released, 1);
}

#[test]
fn encoder_window_and_backpressure() {
    let mut enc = Encoder::new(cfg(3)).unwrap();
    let mut rep = vec![0u8; SYM];
    assert_eq!(enc.repair(&mut rep), Err(RepairError::EmptyWindow));
    for k in 0..3 {
        assert_eq!(enc.push(&source(k)).unwrap(), k);
    }
    assert_eq!(enc.push(&source(3)), Err(PushError::WindowFull(3)));
    assert_eq!(enc.push(&[0; SYM + 1]), Err(PushError::TooLarge { len: SYM + 1, symbol_size: SYM }));
    assert_eq!(enc.repair(&mut rep[1..]), Err(RepairError::BufferSize { len: SYM - 1, symbol_size: SYM }));
    assert_eq!(enc.ack(2, 2), 2);
    assert_eq!(enc.ack(1, 1), 0, "an old acknowledgement is harmless");
    assert_eq!(enc.ack(99, 99), 1, "an acknowledgement beyond the rank is clamped");
    assert_eq!(enc.window(), 3..3);
    assert_eq!(enc.push(&source(3)).unwrap(), 3);
    let info = enc.repair(&mut rep).unwrap();
    assert_eq!((info.first, info.count, info.key), (3, 1, 0), "failed calls use no key");
    // Seen but not released: the decoder's capacity (2 x window = 6) also bounds the encoder.
    for k in 4..9 {
        assert_eq!(enc.push(&source(k)).unwrap(), k);
        enc.ack(k + 1, 3);
    }
    assert_eq!(enc.window(), 9..9);
    assert_eq!(enc.push(&source(9)), Err(PushError::WindowFull(6)));
    enc.ack(9, 4);
    assert_eq!(enc.push(&source(9)).unwrap(), 9);
}

/// Our repair payloads equal those of an independent RFC 8681 encoder for the same window
/// and repair key (GF(2^8), full density).
#[test]
fn repair_payloads_match_cu_fec() {
    use cu_fec::{DensityThreshold, EncodingSymbolId, Field, RepairParameters, RlcConfig, RlcEncoder};
    let c = RlcConfig::new(SYM, 16, Field::Gf256).unwrap();
    let mut theirs = RlcEncoder::<SYM, 16>::new(c, EncodingSymbolId::new(0)).unwrap();
    let mut ours = Encoder::new(cfg(16)).unwrap();
    let mut a = vec![0u8; SYM];
    let mut b = vec![0u8; SYM];
    for k in 0..16u64 {
        theirs.push_source(&padded(k)).unwrap();
        ours.push(&source(k)).unwrap();
        for key in [0u16, 1, 7, 4242, u16::MAX] {
            let id = theirs.encode_repair(RepairParameters::new(key, DensityThreshold::FULL), &mut a).unwrap();
            let info = ours.repair_with_key(key, &mut b).unwrap();
            assert_eq!(a, b, "window 0..={k}, key {key}");
            assert_eq!(u32::from(id.first_source_esi()) as u64, info.first);
            assert_eq!(u64::from(id.source_symbols()), u64::from(info.count));
        }
    }
}

/// One run of a lossy stream with delayed acknowledgements, reordering and duplication,
/// followed by a loss-free flush of repairs. Returns the indices released, in order.
fn lossy_run(
    seed: u64,
    n: u64,
    window: usize,
    loss: f64,
    redundancy: f64,
    ack_delay: usize,
) -> (Vec<u64>, DecoderStats) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut enc = Encoder::new(cfg(window)).unwrap();
    let mut dec = Decoder::new(cfg(window)).unwrap();
    let mut out = vec![];
    let mut acks: std::collections::VecDeque<(u64, u64)> = Default::default();
    // In flight: (deliver_at_step, packet); a packet is a source index or a repair.
    enum Pkt {
        Src(u64, Vec<u8>),
        Rep(RepairInfo, Vec<u8>),
    }
    let mut flight: Vec<(u64, Pkt)> = vec![];
    let mut step = 0u64;
    let deliver = |dec: &mut Decoder, p: &Pkt| match p {
        Pkt::Src(i, d) => {
            dec.push_source(*i, d).unwrap();
        }
        Pkt::Rep(info, d) => {
            dec.push_repair(*info, d).unwrap();
        }
    };
    while enc.rank() < n || !flight.is_empty() {
        step += 1;
        let pkt = if enc.rank() < n && !enc.is_full() && !rng.random_bool(redundancy) {
            let i = enc.push(&source(enc.rank())).unwrap();
            Some(Pkt::Src(i, source(i)))
        } else if !enc.window().is_empty() {
            let mut rep = vec![0u8; SYM];
            let info = enc.repair(&mut rep).unwrap();
            Some(Pkt::Rep(info, rep))
        } else {
            None
        };
        if let Some(p) = pkt
            && !rng.random_bool(loss)
        {
            let copies = if rng.random_bool(0.05) { 2 } else { 1 };
            for _ in 0..copies {
                let at = step + rng.random_range(0..3);
                let dup = match &p {
                    Pkt::Src(i, d) => Pkt::Src(*i, d.clone()),
                    Pkt::Rep(info, d) => Pkt::Rep(*info, d.clone()),
                };
                flight.push((at, dup));
            }
        }
        let (now, later): (Vec<_>, Vec<_>) = flight.drain(..).partition(|(at, _)| *at <= step);
        flight = later;
        for (_, p) in &now {
            deliver(&mut dec, p);
        }
        drain(&mut dec, &mut out);
        acks.push_back((dec.seen(), dec.next_release()));
        if acks.len() > ack_delay {
            let (seen, released) = acks.pop_front().unwrap();
            enc.ack(seen, released);
        }
        assert!(step < 100 * n + 1000, "seed {seed}: no progress");
    }
    // Flush: loss-free repairs until everything is released (the encoder's window still
    // covers whatever the decoder has not seen, because it only slides on acks).
    let mut rounds = 0;
    while (out.len() as u64) < n {
        enc.ack(dec.seen(), dec.next_release());
        let mut rep = vec![0u8; SYM];
        let info = enc.repair(&mut rep).unwrap();
        dec.push_repair(info, &rep).unwrap();
        drain(&mut dec, &mut out);
        rounds += 1;
        assert!(rounds <= 2 * window + 8, "seed {seed}: flush did not converge");
    }
    (out, dec.stats())
}

#[test]
fn heavy_loss_with_reordering_and_duplicates() {
    for seed in 0..40 {
        let (out, stats) = lossy_run(seed, 300, 32, 0.3, 0.4, 4);
        assert_eq!(out, (0..300).collect::<Vec<_>>(), "seed {seed}");
        assert_eq!(stats.released, 300);
        assert!(stats.recovered > 0, "seed {seed}: losses were repaired");
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// For any loss pattern, once the repairs received cover the losses every source symbol
    /// is released, in order, exactly once, with its exact content.
    #[test]
    fn every_source_symbol_released_in_order_exactly_once(
        seed in any::<u64>(),
        n in 1u64..200,
        window in 1usize..48,
        loss in 0.0f64..0.5,
        redundancy in 0.05f64..0.6,
        ack_delay in 0usize..8,
    ) {
        let (out, stats) = lossy_run(seed, n, window, loss, redundancy, ack_delay);
        prop_assert_eq!(out, (0..n).collect::<Vec<_>>());
        prop_assert_eq!(stats.released, n);
        prop_assert_eq!(stats.rejected, 0);
    }
}

/// A coder built on the buffers of a finished pair allocates none while they last (each round
/// repeats the same lossy stream, so it needs what the last one had), and a stream through
/// buffers that hold old data still decodes exactly; a buffer of another size is never used.
#[test]
fn coders_built_on_old_buffers_allocate_nothing_and_decode_exactly() {
    let kernel = gf256::Kernel::best();
    let (mut enc_bufs, mut dec_bufs) = (Vec::new(), vec![vec![0u8; SYM + 1].into_boxed_slice()]);
    for round in 0..3 {
        let mut rng = ChaCha8Rng::seed_from_u64(11);
        let mut enc = Encoder::with_buffers(cfg(16), kernel, std::mem::take(&mut enc_bufs)).unwrap();
        let mut dec = Decoder::with_buffers(cfg(16), kernel, std::mem::take(&mut dec_bufs)).unwrap();
        let mut out = vec![];
        let mut rep = vec![0u8; SYM];
        for _ in 0..400 {
            if enc.is_full() {
                // The window is at its bound: a repair that arrives lets it slide.
                let info = enc.repair(&mut rep).unwrap();
                dec.push_repair(info, &rep).unwrap();
                drain(&mut dec, &mut out);
                enc.ack(dec.seen(), dec.next_release());
                continue;
            }
            let i = enc.push(&source(enc.rank())).unwrap();
            if rng.random::<f64>() > 0.2 {
                dec.push_source(i, enc.source(i).unwrap()).unwrap();
            }
            if i % 3 == 2 {
                let info = enc.repair(&mut rep).unwrap();
                if rng.random::<f64>() > 0.2 {
                    dec.push_repair(info, &rep).unwrap();
                }
            }
            drain(&mut dec, &mut out);
            enc.ack(dec.seen(), dec.next_release());
        }
        // Close the stream with repairs until everything is out.
        while (out.len() as u64) < enc.rank() {
            let info = enc.repair(&mut rep).unwrap();
            dec.push_repair(info, &rep).unwrap();
            drain(&mut dec, &mut out);
            enc.ack(dec.seen(), dec.next_release());
        }
        assert_eq!(out, (0..enc.rank()).collect::<Vec<_>>(), "round {round}");
        if round > 0 {
            assert_eq!((enc.allocated(), dec.allocated()), (0, 0), "round {round} reused every buffer");
        }
        assert!(dec.buffers() <= 2 * 16 + 1, "a decoder holds at most its columns and one equation");
        enc_bufs = enc.into_buffers();
        dec_bufs = dec.into_buffers();
        assert!(dec_bufs.iter().chain(&enc_bufs).all(|b| b.len() == SYM));
    }
}
