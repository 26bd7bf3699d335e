//! An established LRT connection fed arbitrary datagrams: genuine packets of its peer mutated
//! by the input, and raw input bytes, interleaved with timeouts. Nothing panics, events stay
//! bounded, and the connection keeps answering.
#![no_main]

use cohort_proto::lrt::{Config, Connection};
use cohort_time::Instant;
use libfuzzer_sys::fuzz_target;
use std::time::Duration;

fn established() -> (Connection, Connection, Instant) {
    let cfg = Config { coder_symbols: 64, max_window: 32, ..Config::default() };
    let mut now = Instant::ZERO;
    let mut client = Connection::connect(cfg.clone(), 7, now).expect("valid config");
    let mut server = Connection::accept(cfg, now).expect("valid config");
    let mut buf = vec![0u8; 70_000];
    for pn in 0..4u64 {
        while let Some(n) = client.poll_transmit(now, pn, &mut buf) {
            server.handle_packet(now, pn, &buf[..n]);
        }
        while let Some(n) = server.poll_transmit(now, pn, &mut buf) {
            client.handle_packet(now, pn, &buf[..n]);
        }
        now = now + Duration::from_millis(1);
    }
    (client, server, now)
}

fuzz_target!(|data: &[u8]| {
    let (mut client, mut server, mut now) = established();
    let mut buf = vec![0u8; 70_000];
    let mut pn = 100u64;
    let mut rest = data;
    let mut i = 0u64;
    while let Some((&op, tail)) = rest.split_first() {
        let len = usize::from(op & 0x3f).min(tail.len());
        let (chunk, tail) = tail.split_at(len);
        rest = tail;
        i += 1;
        let _ = client.send(&i.to_be_bytes());
        now = now + Duration::from_micros(u64::from(op) * 50);
        client.handle_timeout(now);
        server.handle_timeout(now);
        match op >> 6 {
            // A genuine packet of the client, with the chunk XORed over its start.
            0 | 1 => {
                if let Some(n) = client.poll_transmit(now, pn, &mut buf) {
                    for (b, m) in buf[..n].iter_mut().zip(chunk) {
                        *b ^= m;
                    }
                    server.handle_packet(now, pn, &buf[..n]);
                }
            }
            // Raw bytes, under a replayed or a fresh packet number.
            2 => server.handle_packet(now, pn.saturating_sub(u64::from(op)), chunk),
            _ => server.handle_packet(now, pn, chunk),
        }
        pn += 1;
        while server.poll_transmit(now, pn, &mut buf).is_some() {
            pn += 1;
        }
        while let Ok(Some(_)) = server.recv() {}
        assert!(server.pending_events() <= 4 && client.pending_events() <= 4);
    }
});
