//! The frame parser and opener on arbitrary bytes: nothing panics, and nothing opens unless it
//! was sealed with the key. The first byte picks a mutation of a genuine frame (so the fuzzer
//! also explores near-valid inputs); every variant must be rejected and counted.
#![no_main]

use cohort_wire::frame::{Frame, FrameRepr, Opener, Sealer, TeamKey, kind};
use libfuzzer_sys::fuzz_target;

const SECRET: &[u8] = b"fuzzing team secret, 32 bytes!!";

fuzz_target!(|data: &[u8]| {
    if let Ok(f) = Frame::new_checked(data) {
        let _ = FrameRepr::parse(&f);
        let _ = (f.ciphertext(), f.tag(), f.header());
    }
    let key = TeamKey::derive(SECRET, 1).expect("long secret");
    let mut opener = Opener::new(key.clone());
    let Some((&mode, rest)) = data.split_first() else { return };
    let mut buf = if mode & 1 == 0 {
        rest.to_vec()
    } else {
        // A genuine frame, then the rest of the input XORed over it: any change is a forgery.
        let mut sealer = Sealer::new(key, u32::from(mode));
        let mut out = vec![0u8; 64 + rest.len()];
        let n = sealer.seal(kind::LRT, &rest[..rest.len().min(64)], &mut out).expect("fits");
        out.truncate(n);
        let mut changed = false;
        for (o, r) in out.iter_mut().zip(rest.iter().rev()) {
            *o ^= r;
            changed |= *r != 0;
        }
        if !changed {
            assert!(opener.open(&mut out.clone()).is_ok(), "genuine frame refused");
            assert!(opener.open(&mut out).is_err(), "replay accepted");
            return;
        }
        out
    };
    assert!(opener.open(&mut buf).is_err(), "forgery accepted");
    let c = opener.counters();
    assert_eq!((c.accepted, c.rejected()), (0, 1));
});
