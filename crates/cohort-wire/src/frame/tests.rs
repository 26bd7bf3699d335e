use super::*;
use proptest::prelude::*;

const SECRET: &[u8] = b"team secret of the test fleet";

fn pair() -> (Sealer, Opener) {
    let k = TeamKey::derive(SECRET, 7).unwrap();
    (Sealer::new(k.clone(), 3), Opener::new(k))
}

fn sealed(s: &mut Sealer, payload: &[u8]) -> Vec<u8> {
    let mut out = vec![0u8; payload.len() + OVERHEAD];
    let n = s.seal(kind::LRT, payload, &mut out).unwrap();
    out.truncate(n);
    out
}

#[test]
fn header_bytes_round_trip() {
    let bytes: [u8; OVERHEAD + 2] = [
        1, 0, 0, 0, 0, 7, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 1, 2, 0xAA, 0xBB, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        0,
    ];
    let f = Frame::new_checked(&bytes[..]).unwrap();
    let r = FrameRepr::parse(&f).unwrap();
    assert_eq!(r, FrameRepr { version: 1, kind: 0, team_id: 7, sender_id: 3, packet_number: 258, payload_len: 2 });
    assert_eq!(f.ciphertext(), &[0xAA, 0xBB]);
    assert_eq!(f.tag(), &[0u8; 16]);
    let mut out = [0u8; OVERHEAD + 2];
    out[HEADER_LEN..HEADER_LEN + 2].copy_from_slice(&[0xAA, 0xBB]);
    r.emit(&mut Frame::new_unchecked(&mut out[..]));
    assert_eq!(out, bytes);
    assert_eq!(r.buffer_len(), bytes.len());
}

#[test]
fn seal_open_round_trip_and_packet_numbers_advance() {
    let (mut s, mut o) = pair();
    for i in 0..5u64 {
        assert_eq!(s.next_packet_number(), i);
        let mut f = sealed(&mut s, b"hello team");
        assert_ne!(&f[HEADER_LEN..HEADER_LEN + 10], b"hello team", "payload is encrypted");
        let got = o.open(&mut f).unwrap();
        assert_eq!(got, Opened { kind: kind::LRT, sender_id: 3, packet_number: i, payload: b"hello team" });
    }
    let mut empty = sealed(&mut s, b"");
    assert_eq!(o.open(&mut empty).unwrap().payload, b"");
    assert_eq!(o.counters().accepted, 6);
}

#[test]
fn wrong_key_and_wrong_team_are_rejected() {
    let (mut s, _) = pair();
    let other = TeamKey::derive(b"a different secret entirely", 7).unwrap();
    let mut o = Opener::new(other);
    let mut f = sealed(&mut s, b"x");
    assert_eq!(o.open(&mut f), Err(OpenError::AuthFailed));
    let same_secret_other_team = TeamKey::derive(SECRET, 8).unwrap();
    let mut o2 = Opener::new(same_secret_other_team);
    let mut f = sealed(&mut s, b"x");
    assert_eq!(o2.open(&mut f.clone()), Err(OpenError::WrongTeam(7)));
    // Even with the team field rewritten, the key differs: authentication fails.
    Frame::new_unchecked(&mut f[..]).set_team_id(8);
    assert_eq!(o2.open(&mut f), Err(OpenError::AuthFailed));
    assert_eq!(o.counters().auth_failed, 1);
    assert_eq!((o2.counters().wrong_team, o2.counters().auth_failed), (1, 1));
    assert_eq!(TeamKey::derive(b"short", 1).unwrap_err(), KeyError::SecretTooShort(5));
    assert!(!format!("{:?}", TeamKey::derive(SECRET, 1).unwrap()).contains("cipher"), "no key material in Debug");
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
    assert_eq!(o.counters().accepted, 0);
    assert_eq!(o.counters().rejected(), (f.len() * 8) as u64);
    assert!(o.counters().bad_version > 0 && o.counters().wrong_team > 0 && o.counters().auth_failed > 0);
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
    assert_eq!(o.counters().truncated, OVERHEAD as u64);
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
    let c = o.counters();
    assert_eq!((c.accepted, c.replayed, c.too_old), (4, 1, 1));
}

#[test]
fn sealer_checks_its_buffer_and_counter() {
    let (mut s, _) = pair();
    let mut small = [0u8; OVERHEAD + 1];
    assert_eq!(s.seal(0, b"ab", &mut small), Err(SealError::BufferTooSmall { need: OVERHEAD + 2, have: OVERHEAD + 1 }));
    s.next_pn = u64::MAX;
    assert_eq!(s.seal(0, b"", &mut small), Err(SealError::PacketNumberExhausted));
}

#[test]
fn sender_state_is_bounded() {
    let k = TeamKey::derive(SECRET, 7).unwrap();
    let mut o = Opener::with_max_senders(k.clone(), 4);
    for sender in 0..10u32 {
        let mut s = Sealer::new(k.clone(), sender);
        assert!(o.open(&mut sealed(&mut s, b"hi")).is_ok());
    }
    assert_eq!(o.windows.len(), 4);
    assert_eq!(o.counters().senders_evicted, 6);
}

proptest! {
    /// Random bytes never open and never panic.
    #[test]
    fn random_bytes_never_open(mut bytes in proptest::collection::vec(any::<u8>(), 0..200), team in any::<bool>()) {
        let (_, mut o) = pair();
        if team && bytes.len() >= HEADER_LEN {
            bytes[0] = VERSION;
            bytes[2..6].copy_from_slice(&7u32.to_be_bytes());
        }
        prop_assert!(o.open(&mut bytes).is_err());
    }
}
