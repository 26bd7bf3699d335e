//! The harness of the `lrt_conn` fuzz target, here so that the target and the regression
//! tests of what it found run the same code: an established connection fed arbitrary
//! datagrams (its peer's packets mutated by the input, raw bytes under fresh and replayed
//! packet numbers), interleaved with timeouts and sends. It panics if the connection panics or
//! lets its events grow.

use super::{Config, Connection};
use cohort_time::Instant;
use std::time::Duration;

/// Runs the harness on `data`.
pub fn feed_arbitrary(data: &[u8]) {
    let cfg = Config { coder_symbols: 64, max_window: 32, ..Config::default() };
    let mut now = Instant::ZERO;
    let mut client = Connection::connect(cfg.clone(), 7, now).unwrap();
    let mut server = Connection::accept(cfg, now).unwrap();
    let mut buf = vec![0u8; 70_000];
    for pn in 0..4u64 {
        while let Some(n) = client.poll_transmit(now, pn, &mut buf) {
            server.handle_packet(now, pn, &buf[..n]);
        }
        while let Some(n) = server.poll_transmit(now, pn, &mut buf) {
            client.handle_packet(now, pn, &buf[..n]);
        }
        now += Duration::from_millis(1);
    }
    let (mut pn, mut rest, mut i) = (100u64, data, 0u64);
    while let Some((&op, tail)) = rest.split_first() {
        let len = usize::from(op & 0x3f).min(tail.len());
        let (chunk, tail) = tail.split_at(len);
        rest = tail;
        i += 1;
        let _ = client.send(&i.to_be_bytes());
        now += Duration::from_micros(u64::from(op) * 50);
        client.handle_timeout(now);
        server.handle_timeout(now);
        match op >> 6 {
            0 | 1 => {
                if let Some(n) = client.poll_transmit(now, pn, &mut buf) {
                    for (b, m) in buf[..n].iter_mut().zip(chunk) {
                        *b ^= m;
                    }
                    server.handle_packet(now, pn, &buf[..n]);
                }
            }
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
}
