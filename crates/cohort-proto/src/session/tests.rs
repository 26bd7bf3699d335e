use super::*;
use cohort_wire::frame::{OVERHEAD, OpenError, Opener, Sealer, kind, session_psk};
use std::collections::HashSet;

const SECRET: &[u8] = b"a team secret of 32 bytes, here!";
const TEAM: u32 = 7;

fn psk() -> [u8; 32] {
    session_psk(SECRET, TEAM).unwrap()
}

/// Entropy number `n`: distinct `n`, distinct bytes (a seeded generator, as the simulator's).
fn ent(n: u64) -> [u8; 32] {
    use rand_chacha::rand_core::{RngCore, SeedableRng};
    let mut e = [0u8; 32];
    rand_chacha::ChaCha8Rng::seed_from_u64(n).fill_bytes(&mut e);
    e
}

fn t(ms: u64) -> Instant {
    Instant::ZERO + Duration::from_millis(ms)
}

/// Exchange number `n` (entropy `2n` and `2n + 1`): the initiator's and the responder's keys.
fn handshake(n: u64) -> (SessionKeys, SessionKeys) {
    let mut i = Initiator::new(&psk(), TEAM, Duration::from_millis(100), t(0), ent(2 * n)).unwrap();
    let msg1 = *i.poll_transmit(t(0)).unwrap();
    let (r, msg2) = respond(&psk(), TEAM, &msg1, ent(2 * n + 1)).unwrap();
    (i.handle(&msg2).unwrap(), r)
}

/// Seals `payload` under `key` as sender 1, epoch 0, packet number 0: the same nonce every
/// time, so equal frames mean equal keys.
fn seal(key: &TeamKey, payload: &[u8]) -> Vec<u8> {
    let mut out = vec![0u8; payload.len() + OVERHEAD];
    let n = Sealer::with_epoch(key.clone(), 1, 0).seal(kind::LRT, payload, &mut out).unwrap();
    out.truncate(n);
    out
}

fn opens(key: &TeamKey, frame: &[u8]) -> Result<Vec<u8>, OpenError> {
    let mut f = frame.to_vec();
    Opener::new(key.clone()).open(&mut f).map(|o| o.payload.to_vec())
}

#[test]
fn both_ends_get_the_same_keys_crosswise() {
    let (i, r) = handshake(0);
    assert_eq!(opens(&r.recv, &seal(&i.send, b"to the responder")).unwrap(), b"to the responder");
    assert_eq!(opens(&i.recv, &seal(&r.send, b"to the initiator")).unwrap(), b"to the initiator");
    // The two directions use different keys: a frame reflected back is refused.
    assert!(opens(&i.recv, &seal(&i.send, b"reflected")).is_err());
}

#[test]
fn session_frames_do_not_open_with_the_team_key() {
    let (i, _) = handshake(0);
    let team = TeamKey::derive(SECRET, TEAM).unwrap();
    assert!(matches!(opens(&team, &seal(&i.send, b"secret")), Err(OpenError::AuthFailed)));
}

/// Forward secrecy, as far as a test can show it: whoever holds the team secret and replays
/// the recorded message 1 to a responder of their own gets other keys, because the keys
/// depend on ephemeral secrets that neither message carries.
#[test]
fn a_replayed_message_1_yields_other_keys() {
    let mut i = Initiator::new(&psk(), TEAM, Duration::from_millis(100), t(0), ent(1)).unwrap();
    let msg1 = *i.poll_transmit(t(0)).unwrap();
    let (r, msg2) = respond(&psk(), TEAM, &msg1, ent(2)).unwrap();
    let ik = i.handle(&msg2).unwrap();
    let (replayed, msg2b) = respond(&psk(), TEAM, &msg1, ent(3)).unwrap();
    assert_ne!(msg2, msg2b, "a fresh ephemeral key per response");
    let frame = seal(&ik.send, b"recorded");
    assert!(opens(&r.recv, &frame).is_ok());
    assert!(opens(&replayed.recv, &frame).is_err(), "the replay's keys open nothing of the session");
}

#[test]
fn another_secret_or_team_is_refused() {
    let mut i = Initiator::new(&psk(), TEAM, Duration::from_millis(100), t(0), ent(1)).unwrap();
    let msg1 = *i.poll_transmit(t(0)).unwrap();
    let other_secret = session_psk(b"another secret, also 32 bytes!!!", TEAM).unwrap();
    assert!(matches!(respond(&other_secret, TEAM, &msg1, ent(2)), Err(SessionError::Refused(_))));
    assert!(
        matches!(respond(&psk(), TEAM + 1, &msg1, ent(2)), Err(SessionError::Refused(_))),
        "the prologue binds the team"
    );
    assert_ne!(psk(), session_psk(SECRET, TEAM + 1).unwrap());
    // The PSK is not the team's frame key material.
    let team = TeamKey::derive(SECRET, TEAM).unwrap();
    assert!(opens(&team, &seal(&TeamKey::session(&psk(), TEAM), b"x")).is_err());
}

#[test]
fn every_tampered_byte_and_wrong_length_is_refused() {
    let mut i = Initiator::new(&psk(), TEAM, Duration::from_millis(100), t(0), ent(1)).unwrap();
    let msg1 = *i.poll_transmit(t(0)).unwrap();
    for pos in 0..MESSAGE_LEN {
        let mut bad = msg1;
        bad[pos] ^= 0x20;
        assert!(matches!(respond(&psk(), TEAM, &bad, ent(2)), Err(SessionError::Refused(_))), "byte {pos}");
    }
    assert!(matches!(respond(&psk(), TEAM, &msg1[..47], ent(2)), Err(SessionError::Refused(_))));
    assert!(matches!(respond(&psk(), TEAM, &[msg1.as_slice(), &[0]].concat(), ent(2)), Err(SessionError::Refused(_))));
    let (_, msg2) = respond(&psk(), TEAM, &msg1, ent(2)).unwrap();
    for pos in 0..MESSAGE_LEN {
        let mut bad = msg2;
        bad[pos] ^= 0x01;
        assert!(matches!(i.handle(&bad), Err(SessionError::Refused(_))), "byte {pos}");
    }
    assert!(matches!(i.handle(&msg2[..10]), Err(SessionError::Refused(_))));
    // A forged message 2 does not spoil the handshake: the real one still completes.
    let keys = i.handle(&msg2).unwrap();
    assert!(matches!(i.handle(&msg2), Err(SessionError::Finished)));
    let (r, _) = respond(&psk(), TEAM, &msg1, ent(2)).unwrap();
    assert!(opens(&r.recv, &seal(&keys.send, b"x")).is_ok());
}

/// Sans-IO: the same entropy gives the same exchange, as a replayed simulation needs.
#[test]
fn the_same_entropy_gives_the_same_session() {
    let (a, _) = handshake(5);
    let (b, _) = handshake(5);
    assert_eq!(seal(&a.send, b"x"), seal(&b.send, b"x"));
}

#[test]
fn message_1_is_repeated_every_retry_until_message_2() {
    let mut i = Initiator::new(&psk(), TEAM, Duration::from_millis(100), t(10), ent(1)).unwrap();
    assert_eq!(i.poll_timeout(), Some(t(10)));
    assert!(i.poll_transmit(t(9)).is_none());
    let first = *i.poll_transmit(t(10)).unwrap();
    assert!(i.poll_transmit(t(10)).is_none());
    assert_eq!(i.poll_timeout(), Some(t(110)));
    assert!(i.poll_transmit(t(109)).is_none());
    assert_eq!(*i.poll_transmit(t(110)).unwrap(), first, "the same bytes every time");
    assert_eq!(i.sent(), 2);
    let (_, msg2) = respond(&psk(), TEAM, &first, ent(2)).unwrap();
    i.handle(&msg2).unwrap();
    assert_eq!(i.poll_timeout(), None);
    assert!(i.poll_transmit(t(1000)).is_none());
}

/// The nonce invariant across sessions: a frame's nonce (sender ‖ epoch ‖ packet number) may
/// repeat from one session to the next (every session starts its packet numbers afresh), so
/// the keys must not. 2 000 handshakes, both directions: 4 000 distinct keys.
#[test]
fn no_two_sessions_share_a_key() {
    let mut seen = HashSet::new();
    for n in 0..2000 {
        let (i, r) = handshake(n);
        assert!(seen.insert(seal(&i.send, b"same plaintext, same nonce")));
        assert!(seen.insert(seal(&r.send, b"same plaintext, same nonce")));
    }
    assert_eq!(seen.len(), 4000);
}
