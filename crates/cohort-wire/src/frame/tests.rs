use super::*;
use proptest::prelude::*;

const SECRET: &[u8] = b"team secret of the test fleet";

fn pair() -> (Sealer, Opener) {
    let k = TeamKey::derive(SECRET, 7).unwrap();
    (Sealer::new(k.clone(), 3).unwrap(), Opener::new(k))
}

fn sealed(s: &mut Sealer, payload: &[u8]) -> Vec<u8> {
    let mut out = vec![0u8; payload.len() + OVERHEAD];
    let n = s.seal(kind::LRT, payload, &mut out).unwrap();
    out.truncate(n);
    out
}

#[test]
fn header_bytes_round_trip() {
    #[rustfmt::skip]
    let bytes: [u8; OVERHEAD + 2] = [
        2, 5,                          // version, kind
        0, 0, 0, 7,                    // team id
        0, 0, 0, 3,                    // sender id
        0, 0, 0, 0, 0, 0, 0, 9,        // epoch
        0, 0, 0, 0, 0, 0, 1, 2,        // packet number
        0xAA, 0xBB,                    // ciphertext
        0xF0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x0F, // tag
    ];
    let f = Frame::new_checked(&bytes[..]).unwrap();
    let r = FrameRepr::parse(&f).unwrap();
    assert_eq!(
        r,
        FrameRepr { version: 2, kind: 5, team_id: 7, sender_id: 3, epoch: 9, packet_number: 258, payload_len: 2 }
    );
    assert_eq!((f.len(), f.header()), (bytes.len(), &bytes[..HEADER_LEN]));
    assert_eq!(f.ciphertext(), &[0xAA, 0xBB]);
    assert_eq!(f.tag(), &bytes[HEADER_LEN + 2..]);
    let mut out = [0u8; OVERHEAD + 2];
    let mut g = Frame::new_unchecked(&mut out[..]);
    r.emit(&mut g);
    g.ciphertext_mut().copy_from_slice(&[0xAA, 0xBB]);
    g.tag_mut().copy_from_slice(&bytes[HEADER_LEN + 2..]);
    assert_eq!(out, bytes);
    assert_eq!(r.buffer_len(), bytes.len());
}

#[test]
fn header_parse_errors() {
    for n in 0..OVERHEAD {
        let b = vec![VERSION; n];
        assert_eq!(Frame::new_checked(&b[..]).unwrap_err(), FrameError::Truncated(n));
        assert_eq!(FrameRepr::parse(&Frame::new_unchecked(&b[..])).unwrap_err(), FrameError::Truncated(n));
    }
    let mut b = [0u8; OVERHEAD];
    b[0] = 1;
    assert_eq!(FrameRepr::parse(&Frame::new_checked(&b[..]).unwrap()), Err(FrameError::Version(1)), "v1 is refused");
}

/// Independent vector from Python: `cryptography`'s HKDF-SHA256, then libsodium's
/// `crypto_aead_xchacha20poly1305_ietf_encrypt` (PyNaCl) with the header as associated data:
/// secret "0123456789abcdef", team 7, sender 3, epoch 0x0102030405060708, packet 258, kind 1.
#[test]
fn sealed_frame_known_answer() {
    const EPOCH: u64 = 0x0102_0304_0506_0708;
    #[rustfmt::skip]
    const KAT: [u8; OVERHEAD + 5] = [
        0x02, 0x01, 0x00, 0x00, 0x00, 0x07, 0x00, 0x00, 0x00, 0x03, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06,
        0x07, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x02, 0xf7, 0x3d, 0xb4, 0xcb, 0x3b, 0x4e,
        0xee, 0x72, 0x54, 0xe7, 0x4e, 0x5e, 0x43, 0xba, 0x61, 0x85, 0xf9, 0xe6, 0xa1, 0x97, 0xf7,
    ];
    let k = TeamKey::derive(b"0123456789abcdef", 7).unwrap();
    let mut s = Sealer::with_epoch(k.clone(), 3, EPOCH);
    s.next_pn = 258;
    let mut out = [0u8; 64];
    let n = s.seal(kind::GROUP, b"hello", &mut out).unwrap();
    assert_eq!(&out[..n], &KAT[..]);
    let mut o = Opener::new(k);
    let mut buf = KAT;
    let got = o.open(&mut buf).unwrap();
    assert_eq!(got, Opened { kind: kind::GROUP, sender_id: 3, epoch: EPOCH, packet_number: 258, payload: b"hello" });
}

#[test]
fn seal_open_round_trip_and_packet_numbers_advance() {
    let (mut s, mut o) = pair();
    assert_eq!((s.sender_id(), s.team_id(), o.team_id()), (3, 7, 7));
    for i in 0..5u64 {
        assert_eq!(s.next_packet_number(), i);
        let mut f = sealed(&mut s, b"hello team");
        assert_ne!(&f[HEADER_LEN..HEADER_LEN + 10], b"hello team", "payload is encrypted");
        let got = o.open(&mut f).unwrap();
        assert_eq!(
            got,
            Opened { kind: kind::LRT, sender_id: 3, epoch: s.epoch(), packet_number: i, payload: b"hello team" }
        );
    }
    let mut empty = sealed(&mut s, b"");
    assert_eq!(o.open(&mut empty).unwrap().payload, b"");
    let big: Vec<u8> = (0..9000u32).map(|i| i as u8).collect();
    let mut f = sealed(&mut s, &big);
    assert_eq!(o.open(&mut f).unwrap().payload, &big[..]);
    assert_eq!(o.counters().accepted, 7);
    assert_eq!(o.highest_packet_number(3, s.epoch()), Some(6));
    assert_eq!(o.highest_packet_number(3, s.epoch() ^ 1), None);
}

#[test]
fn seal_in_place_matches_seal_and_fails_without_consuming_a_number() {
    let k = TeamKey::derive(SECRET, 7).unwrap();
    let (mut a, mut b) = (Sealer::with_epoch(k.clone(), 3, 5), Sealer::with_epoch(k, 3, 5));
    let mut copied = [0u8; 64];
    let n = a.seal(kind::LRT, b"in place", &mut copied).unwrap();
    let mut buf = [0u8; 64];
    buf[HEADER_LEN..HEADER_LEN + 8].copy_from_slice(b"in place");
    assert_eq!(b.seal_in_place(kind::LRT, &mut buf, 8), Ok(n));
    assert_eq!(copied[..n], buf[..n]);
    assert_eq!(
        b.seal_in_place(kind::LRT, &mut buf, 64 - OVERHEAD + 1),
        Err(SealError::BufferTooSmall { need: 65, have: 64 })
    );
    assert_eq!(
        b.seal_in_place(kind::LRT, &mut buf, usize::MAX),
        Err(SealError::BufferTooSmall { need: usize::MAX, have: 64 })
    );
    assert_eq!(b.next_packet_number(), 1, "failed seals consume no packet number");
}

#[test]
fn wrong_key_and_wrong_team_are_rejected() {
    let (mut s, _) = pair();
    let other = TeamKey::derive(b"a different secret entirely", 7).unwrap();
    let mut o = Opener::new(other);
    let mut f = sealed(&mut s, b"x");
    let before = f.clone();
    assert_eq!(o.open(&mut f), Err(OpenError::AuthFailed));
    assert_eq!(f, before, "a failed open leaves the datagram as it was");
    let same_secret_other_team = TeamKey::derive(SECRET, 8).unwrap();
    let mut o2 = Opener::new(same_secret_other_team);
    let mut f = sealed(&mut s, b"x");
    assert_eq!(o2.open(&mut f.clone()), Err(OpenError::WrongTeam(7)));
    // Even with the team field rewritten, the key differs: authentication fails.
    Frame::new_unchecked(&mut f[..]).set_team_id(8);
    assert_eq!(o2.open(&mut f), Err(OpenError::AuthFailed));
    assert_eq!(o.counters().auth_failed, 1);
    assert_eq!((o2.counters().wrong_team, o2.counters().auth_failed), (1, 1));
    assert_eq!(o2.tracked_senders(), 0, "rejected frames create no replay state");
}

#[test]
fn every_single_bit_flip_is_rejected() {
    let (mut s, mut o) = pair();
    let f = sealed(&mut s, b"flip me");
    for bit in 0..f.len() * 8 {
        let mut g = f.clone();
        g[bit / 8] ^= 1 << (bit % 8);
        assert!(o.open(&mut g).is_err(), "bit {bit} flipped and still accepted");
    }
    let c = o.counters();
    assert_eq!(c.accepted, 0);
    assert_eq!(c.rejected(), (f.len() * 8) as u64);
    // 8 version bits, 32 team bits; the rest (kind, sender, epoch, packet number, body, tag)
    // fail the tag.
    assert_eq!((c.bad_version, c.wrong_team, c.auth_failed), (8, 32, (f.len() * 8 - 40) as u64));
    // The original is still good: failed attempts did not touch the replay window.
    assert!(o.open(&mut f.clone()).is_ok());
}

#[test]
fn truncations_of_every_length_are_rejected() {
    let (mut s, mut o) = pair();
    let f = sealed(&mut s, b"truncate me please");
    for n in 0..f.len() {
        let mut g = f[..n].to_vec();
        let e = o.open(&mut g).unwrap_err();
        if n < OVERHEAD {
            assert_eq!(e, OpenError::Frame(FrameError::Truncated(n)));
        } else {
            assert_eq!(e, OpenError::AuthFailed);
        }
    }
    let c = o.counters();
    assert_eq!((c.truncated, c.auth_failed, c.accepted), (OVERHEAD as u64, (f.len() - OVERHEAD) as u64, 0));
    // Extended frames fail too.
    let mut g = f.clone();
    g.push(0);
    assert_eq!(o.open(&mut g), Err(OpenError::AuthFailed));
}

#[test]
fn replays_and_old_frames_are_rejected_and_reordering_accepted_once() {
    let (mut s, mut o) = pair();
    let frames: Vec<Vec<u8>> = (0..2000).map(|_| sealed(&mut s, b"p")).collect();
    assert!(o.open(&mut frames[1].clone()).is_ok());
    assert!(o.open(&mut frames[0].clone()).is_ok(), "reordered within the window");
    assert_eq!(o.open(&mut frames[0].clone()), Err(OpenError::Replayed { sender: 3, pn: 0 }));
    assert!(o.open(&mut frames[1999].clone()).is_ok());
    assert_eq!(o.open(&mut frames[2].clone()), Err(OpenError::TooOld { sender: 3, pn: 2 }));
    assert!(o.open(&mut frames[1500].clone()).is_ok());
    assert_eq!(o.open(&mut frames[1500].clone()), Err(OpenError::Replayed { sender: 3, pn: 1500 }));
    let c = o.counters();
    assert_eq!((c.accepted, c.replayed, c.too_old), (4, 2, 1));
}

/// One frame per reason, in a script: each counter counts its own reason and nothing else.
#[test]
fn counters_match_the_reasons() {
    let (mut s, mut o) = pair();
    let good = sealed(&mut s, b"ok");
    let next = sealed(&mut s, b"ok");
    let far: Vec<Vec<u8>> = (0..crate::REPLAY_WINDOW).map(|_| sealed(&mut s, b"")).collect();
    let mut script: Vec<(Vec<u8>, Result<(), OpenError>)> = vec![
        (good[..5].to_vec(), Err(OpenError::Frame(FrameError::Truncated(5)))),
        (
            {
                let mut b = good.clone();
                b[0] = 9;
                b
            },
            Err(OpenError::Frame(FrameError::Version(9))),
        ),
        (
            {
                let mut b = good.clone();
                b[5] ^= 1;
                b
            },
            Err(OpenError::WrongTeam(6)),
        ),
        (
            {
                let mut b = good.clone();
                b[HEADER_LEN] ^= 1;
                b
            },
            Err(OpenError::AuthFailed),
        ),
        (good.clone(), Ok(())),
        (good.clone(), Err(OpenError::Replayed { sender: 3, pn: 0 })),
        (far.last().unwrap().clone(), Ok(())),
        (next, Err(OpenError::TooOld { sender: 3, pn: 1 })),
    ];
    for (i, (bytes, want)) in script.iter_mut().enumerate() {
        assert_eq!(o.open(bytes).map(|_| ()), *want, "step {i}");
    }
    let c = o.counters();
    let want = RejectCounters {
        accepted: 2,
        truncated: 1,
        bad_version: 1,
        wrong_team: 1,
        auth_failed: 1,
        replayed: 1,
        too_old: 1,
        stale_life: 0,
        new_lives: 0,
        senders_evicted: 0,
    };
    assert_eq!(c, want);
    assert_eq!(c.rejected() + c.accepted, script.len() as u64);
}

#[test]
fn sealer_checks_its_buffer_and_counter() {
    let (mut s, mut o) = pair();
    let mut small = [0u8; OVERHEAD + 1];
    assert_eq!(s.seal(0, b"ab", &mut small), Err(SealError::BufferTooSmall { need: OVERHEAD + 2, have: OVERHEAD + 1 }));
    s.next_pn = u64::MAX - 1;
    let mut last = sealed(&mut s, b"last");
    assert_eq!(s.seal(0, b"", &mut small), Err(SealError::PacketNumberExhausted));
    assert_eq!(s.next_packet_number(), u64::MAX);
    assert_eq!(o.open(&mut last.clone()).unwrap().packet_number, u64::MAX - 1);
    assert_eq!(o.open(&mut last), Err(OpenError::Replayed { sender: 3, pn: u64::MAX - 1 }));
}

#[test]
fn sender_state_is_bounded_and_least_recently_seen_is_evicted() {
    let k = TeamKey::derive(SECRET, 7).unwrap();
    let mut o = Opener::with_max_senders(k.clone(), 4);
    assert_eq!(o.max_senders(), 4);
    let mut sealers: Vec<Sealer> = (0..10u32).map(|id| Sealer::new(k.clone(), id).unwrap()).collect();
    let first0 = sealed(&mut sealers[0], b"hi");
    assert!(o.open(&mut first0.clone()).is_ok());
    for s in &mut sealers[1..4] {
        assert!(o.open(&mut sealed(s, b"hi")).is_ok());
    }
    // Sender 0 speaks again, so sender 1 is now the least recently seen.
    assert!(o.open(&mut sealed(&mut sealers[0], b"again")).is_ok());
    assert!(o.open(&mut sealed(&mut sealers[4], b"hi")).is_ok());
    assert_eq!(o.tracked_senders(), 4);
    assert!(o.is_tracked(0) && !o.is_tracked(1) && o.is_tracked(4));
    assert_eq!(o.open(&mut first0.clone()), Err(OpenError::Replayed { sender: 0, pn: 0 }));
    for s in &mut sealers[5..] {
        assert!(o.open(&mut sealed(s, b"hi")).is_ok());
    }
    assert_eq!(o.tracked_senders(), 4);
    assert_eq!(o.counters().senders_evicted, 6);
    // The documented cost of eviction: a forgotten sender's old frame is accepted once more.
    assert!(!o.is_tracked(0));
    assert!(o.open(&mut first0.clone()).is_ok());
    assert_eq!(o.open(&mut first0.clone()), Err(OpenError::Replayed { sender: 0, pn: 0 }));
    assert_eq!(Opener::with_max_senders(k, 0).max_senders(), 1);
}

/// The restart defect: a sender restarted with the same secret and sender id used to start at
/// packet number 0 again, reusing nonces, and was refused as "too old". Now each life has its
/// own epoch: no header repeats, and the receiver accepts the new life at once.
#[test]
fn a_restarted_sender_reuses_no_nonce_and_is_accepted() {
    let k = TeamKey::derive(SECRET, 7).unwrap();
    let mut o = Opener::new(k.clone());
    let mut headers = std::collections::HashSet::new();
    for life in 0..3 {
        let mut s = Sealer::new(k.clone(), 3).unwrap();
        for i in 0..1500u32 {
            let mut f = sealed(&mut s, &i.to_be_bytes());
            assert!(headers.insert(f[..HEADER_LEN].to_vec()), "life {life} repeated a nonce at {i}");
            assert!(o.open(&mut f).is_ok(), "life {life}, frame {i} refused");
        }
    }
    assert_eq!((o.counters().accepted, o.counters().new_lives), (4500, 2));
}

/// The goal of the nonce invariant at scale: a million lives of one sender id (each a restart,
/// a socket opening, or a life begun after the clock stepped back: a sealer reads no clock, so
/// the three are the same event to it) seal their frames with no nonce repeated.
#[test]
fn a_million_lives_of_one_sender_repeat_no_nonce() {
    let k = TeamKey::derive(SECRET, 7).unwrap();
    let mut nonces = std::collections::HashSet::with_capacity(2_000_000);
    let mut out = [0u8; OVERHEAD + 1];
    for _ in 0..1_000_000 {
        let mut s = Sealer::new(k.clone(), 3).unwrap();
        for _ in 0..2 {
            let n = s.seal(kind::LRT, b"r", &mut out).unwrap();
            let f = Frame::new_checked(&out[..n]).unwrap();
            assert!(nonces.insert((f.epoch(), f.packet_number())), "nonce repeated");
        }
    }
    assert_eq!(nonces.len(), 2_000_000);
}

/// Lives pushed out of the opener stay refused (no replay of an old life), concurrent lives
/// each keep their own window, and the retired list is bounded.
#[test]
fn retired_lives_stay_refused_and_concurrent_lives_are_separate() {
    let k = TeamKey::derive(SECRET, 7).unwrap();
    let mut o = Opener::new(k.clone());
    let mut lives: Vec<Sealer> = (0..MAX_LIVES as u64 + 1).map(|e| Sealer::with_epoch(k.clone(), 3, e)).collect();
    let first = sealed(&mut lives[0], b"old life");
    assert!(o.open(&mut first.clone()).is_ok());
    for s in &mut lives[1..MAX_LIVES] {
        assert!(o.open(&mut sealed(s, b"x")).is_ok());
    }
    // Two lives interleave: both accepted, each with its own replay window.
    let (a, b) = (sealed(&mut lives[1], b"a"), sealed(&mut lives[2], b"b"));
    assert!(o.open(&mut a.clone()).is_ok() && o.open(&mut b.clone()).is_ok());
    assert!(matches!(o.open(&mut a.clone()), Err(OpenError::Replayed { .. })));
    // One more life pushes out life 0, the least recently heard: its frames are refused now.
    assert!(o.open(&mut sealed(&mut lives[MAX_LIVES], b"new")).is_ok());
    assert_eq!(o.open(&mut first.clone()), Err(OpenError::StaleLife { sender: 3, epoch: 0 }));
    assert_eq!(o.open(&mut sealed(&mut lives[0], b"still 0")), Err(OpenError::StaleLife { sender: 3, epoch: 0 }));
    let c = o.counters();
    assert_eq!((c.new_lives, c.stale_life), (MAX_LIVES as u64, 2));
    // Many more lives: memory stays bounded, the newest retired ones are still refused.
    let mut last_retired = None;
    for e in 100..100 + 3 * MAX_RETIRED as u64 {
        let mut s = Sealer::with_epoch(k.clone(), 3, e);
        assert!(o.open(&mut sealed(&mut s, b"x")).is_ok());
        last_retired = Some(s);
    }
    let st = &o.senders[&3];
    assert_eq!((st.lives.len(), st.retired.len()), (MAX_LIVES, MAX_RETIRED));
    assert!(o.open(&mut sealed(last_retired.as_mut().unwrap(), b"y")).is_ok(), "the newest life is live");
}

proptest! {
    /// The nonce invariant: however sealers of one sender id are created and interleaved
    /// (restarts, several sockets, robots sharing an id), no two frames share a nonce.
    #[test]
    fn no_nonce_repeats_across_lives(plan in proptest::collection::vec((0usize..8, 1usize..20), 1..60)) {
        let k = TeamKey::derive(SECRET, 7).unwrap();
        let mut live: Vec<Sealer> = Vec::new();
        let mut nonces = std::collections::HashSet::new();
        for (pick, frames) in plan {
            // `pick` beyond the live sealers opens a new one (a restart or a second socket).
            if pick >= live.len() {
                live.push(Sealer::new(k.clone(), 3).unwrap());
            }
            let i = pick.min(live.len() - 1);
            let s = &mut live[i];
            for _ in 0..frames {
                let f = sealed(s, b"n");
                let fr = Frame::new_checked(&f[..]).unwrap();
                prop_assert!(nonces.insert((fr.sender_id(), fr.epoch(), fr.packet_number())));
            }
        }
    }

    /// Random bytes never open and never panic, even with a plausible header.
    #[test]
    fn random_bytes_never_open(mut bytes in proptest::collection::vec(any::<u8>(), 0..200), team in any::<bool>()) {
        let (_, mut o) = pair();
        if team && bytes.len() >= HEADER_LEN {
            bytes[0] = VERSION;
            bytes[2..6].copy_from_slice(&7u32.to_be_bytes());
        }
        if let Ok(f) = Frame::new_checked(&bytes[..]) {
            let _ = (FrameRepr::parse(&f), f.ciphertext(), f.tag());
        }
        prop_assert!(o.open(&mut bytes).is_err());
        prop_assert_eq!(o.counters().rejected(), 1);
    }

    /// Any change to a genuine frame (a XOR mask, then a new length) is rejected.
    #[test]
    fn mutated_frames_never_open(
        payload in proptest::collection::vec(any::<u8>(), 0..64),
        mask in proptest::collection::vec(any::<u8>(), 0..100),
        len_delta in -40i32..8,
    ) {
        let (mut s, mut o) = pair();
        let genuine = sealed(&mut s, &payload);
        let mut g = genuine.clone();
        for (b, m) in g.iter_mut().zip(&mask) {
            *b ^= m;
        }
        let len = (g.len() as i64 + i64::from(len_delta)).max(0) as usize;
        g.resize(len, 0);
        prop_assume!(g != genuine);
        prop_assert!(o.open(&mut g).is_err());
        prop_assert!(o.open(&mut genuine.clone()).is_ok());
    }
}
