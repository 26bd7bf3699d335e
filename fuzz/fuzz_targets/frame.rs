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
//!
//! Keys: mode 0 opens with a key that never seals anything, so any frame it accepts is a
//! forgery. Modes 1-3 seal under a key used for one iteration only: libFuzzer sees the genuine
//! frame (its memcmp hooks record `g == genuine`) and would otherwise feed it back in a later
//! iteration, where a fresh `Opener` rightly accepts it once, a cross-iteration replay rather
//! than a forgery.
#![no_main]

use cohort_wire::frame::{Frame, FrameRepr, OVERHEAD, Opener, Sealer, TeamKey, kind};
use libfuzzer_sys::fuzz_target;
use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

/// A fixed random 32-byte team secret; its key opens mode-0 inputs and never seals (it must
/// differ from every secret any version of this target sealed with: the corpus keeps frames).
const OUTSIDER_SECRET: [u8; 32] = [
    0x7e, 0x0d, 0x24, 0x98, 0xe2, 0xf6, 0x1c, 0xbb, 0xd2, 0xb8, 0x2b, 0xe8, 0xb4, 0xee, 0x24, 0x7f, 0x63, 0xc7, 0x71,
    0x99, 0x89, 0x8b, 0x57, 0x46, 0x9b, 0x3a, 0x6b, 0x74, 0x58, 0xeb, 0x7b, 0x45,
];

/// The base of the one-time sealing secrets (its last 8 bytes are replaced by a counter).
const SEALING_SECRET: [u8; 32] = [
    0x0c, 0x69, 0x3e, 0xf4, 0x33, 0xd6, 0x2b, 0x39, 0xe4, 0x1f, 0x97, 0x57, 0x9a, 0x5d, 0xd7, 0x5b, 0x86, 0x47, 0xa5,
    0x0f, 0x63, 0x3c, 0xb5, 0xae, 0x6c, 0xca, 0xdb, 0x45, 0x81, 0x84, 0x30, 0xf1,
];
const TEAM: u32 = 1;

/// The key for outsider bytes: without it, a forgery is a 2^-106 event per try.
fn outsider_key() -> &'static TeamKey {
    static KEY: OnceLock<TeamKey> = OnceLock::new();
    KEY.get_or_init(|| TeamKey::derive(&OUTSIDER_SECRET, TEAM).expect("32-byte secret"))
}

/// A key no earlier iteration used, in this process or an earlier run (whose frames the corpus
/// may keep): the secret with its last 8 bytes replaced by a counter from a random start.
fn one_time_key() -> TeamKey {
    static START: OnceLock<u64> = OnceLock::new();
    static ITERATION: AtomicU64 = AtomicU64::new(0);
    let start = *START.get_or_init(|| RandomState::new().build_hasher().finish());
    let n = start.wrapping_add(ITERATION.fetch_add(1, Ordering::Relaxed));
    let mut secret = SEALING_SECRET;
    secret[24..].copy_from_slice(&n.to_be_bytes());
    TeamKey::derive(&secret, TEAM).expect("32-byte secret")
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
        let _ = (f.header(), f.ciphertext(), f.tag(), f.kind(), f.sender_id(), f.epoch(), f.packet_number());
    }

    let Some((&mode, rest)) = data.split_first() else { return };
    let (mut opener, mut candidate) = if mode % 4 == 0 {
        (Opener::new(outsider_key().clone()), rest.to_vec())
    } else {
        let key = one_time_key();
        let mut opener = Opener::new(key.clone());
        let mut sealer = Sealer::with_epoch(key, u32::from(mode >> 2), u64::from(mode));
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
        (opener, g)
    };
    assert!(opener.open(&mut candidate).is_err(), "forgery accepted");
    let c = opener.counters();
    assert_eq!((c.accepted, c.rejected()), (0, 1), "one rejection, counted once");
});
