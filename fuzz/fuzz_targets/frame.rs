//! The frame parser and opener on arbitrary bytes: nothing panics, and nothing opens unless it
//! was sealed with the key. The first input byte picks a mode:
//!
//! * 0: the rest of the input is the datagram, as an outsider would send it;
//! * 1: a genuine frame with the rest of the input XORed over it (from its end);
//! * 2: a genuine frame cut or zero-extended to a length taken from the input;
//! * 3: a genuine frame whose sender id and packet number are rewritten from the input.
//!
//! Every variant that differs from the genuine frame must be rejected and counted under exactly
//! one reason; an unchanged genuine frame must open once and then be refused as a replay.
#![no_main]

use cohort_wire::frame::{Frame, FrameRepr, OVERHEAD, Opener, Sealer, TeamKey, kind};
use libfuzzer_sys::fuzz_target;
use std::sync::OnceLock;

/// A fixed random 32-byte team secret: without it, a forgery is a 2^-106 event per try.
const SECRET: [u8; 32] = [
    0x3c, 0x91, 0x5e, 0x07, 0xd2, 0x48, 0xaf, 0x16, 0x7b, 0xe0, 0x25, 0x9c, 0x63, 0xfa, 0x0e, 0x81, 0x54, 0xc7, 0x2a,
    0xb9, 0x10, 0x6d, 0xf3, 0x88, 0x4f, 0xd6, 0x39, 0xa2, 0x75, 0x0b, 0xee, 0x5a,
];
const TEAM: u32 = 1;

fn key() -> &'static TeamKey {
    static KEY: OnceLock<TeamKey> = OnceLock::new();
    KEY.get_or_init(|| TeamKey::derive(&SECRET, TEAM).expect("32-byte secret"))
}

fn be_u64(b: &[u8]) -> u64 {
    let mut a = [0u8; 8];
    let n = b.len().min(8);
    a[..n].copy_from_slice(&b[..n]);
    u64::from_be_bytes(a)
}

fuzz_target!(|data: &[u8]| {
    // The view and the header parser never panic, whatever the bytes.
    if let Ok(f) = Frame::new_checked(data) {
        if let Ok(r) = FrameRepr::parse(&f) {
            assert_eq!(r.buffer_len(), data.len());
        }
        let _ = (f.header(), f.ciphertext(), f.tag(), f.kind(), f.sender_id(), f.packet_number());
    }

    let Some((&mode, rest)) = data.split_first() else { return };
    let mut opener = Opener::new(key().clone());
    let mut candidate = if mode % 4 == 0 {
        rest.to_vec()
    } else {
        let mut sealer = Sealer::new(key().clone(), u32::from(mode >> 2));
        let payload = &rest[..rest.len().min(64)];
        let mut genuine = vec![0u8; payload.len() + OVERHEAD];
        let n = sealer.seal(kind::LRT, payload, &mut genuine).expect("buffer fits");
        assert_eq!(n, genuine.len());
        let mut g = genuine.clone();
        match mode % 4 {
            1 => {
                for (b, m) in g.iter_mut().zip(rest.iter().rev()) {
                    *b ^= m;
                }
            }
            2 => {
                let len = rest.last().map_or(0, |&b| usize::from(b)) + rest.len() % 7;
                g.resize(len, 0);
            }
            _ => {
                let mut f = Frame::new_unchecked(&mut g[..]);
                let tail = &rest[rest.len().saturating_sub(12)..];
                f.set_sender_id(be_u64(tail) as u32);
                f.set_packet_number(be_u64(tail.get(4..).unwrap_or(&[])));
            }
        }
        if g == genuine {
            let opened = opener.open(&mut g).expect("genuine frame refused");
            assert_eq!(opened.payload, payload);
            assert!(opener.open(&mut genuine).is_err(), "replay accepted");
            let c = opener.counters();
            assert_eq!((c.accepted, c.replayed), (1, 1));
            return;
        }
        g
    };
    assert!(opener.open(&mut candidate).is_err(), "forgery accepted");
    let c = opener.counters();
    assert_eq!((c.accepted, c.rejected()), (0, 1), "one rejection, counted once");
});
