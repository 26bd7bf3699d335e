//! Demo stage 2: a secure LRT session in virtual time. Leader and follower first run the
//! session key exchange (`cohort_proto::session`, Noise on the team secret) over the lossy
//! link, then real `lrt::Connection`s; every packet is sealed in a secure frame under the
//! session's keys and opened on arrival; the link loses packets; an intruder without the keys
//! injects forgeries and replays captured frames. Everything is seeded and deterministic.

use cohort_medium::link::{Duplex, LinkParams, LossModel};
use cohort_proto::lrt::{Config, Connection, State};
use cohort_proto::session::{self, Initiator, SessionKeys};
use cohort_time::Instant;
use cohort_wire::frame::{OVERHEAD, Opener, RejectCounters, Sealer, TeamKey, kind, session_psk};
use rand::{Rng, RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;
use std::time::Duration;

/// What the session did.
#[derive(Debug, Default, Serialize)]
pub struct SessionSummary {
    /// Virtual milliseconds the key exchange took, and the message 1s it sent (lost ones are
    /// sent again).
    pub key_exchange_ms: f64,
    pub key_exchange_attempts: u32,
    pub commands_sent: u64,
    pub commands_delivered: u64,
    pub in_order: bool,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub owd_ms: f64,
    pub datagrams_lost: u64,
    pub repairs_sent: u64,
    pub frame_overhead_bytes: usize,
    pub forged_injected: u64,
    pub replays_injected: u64,
    pub follower_rejected: RejectSummary,
}

#[derive(Debug, Default, Serialize)]
pub struct RejectSummary {
    pub accepted: u64,
    pub auth_failed: u64,
    pub replayed: u64,
    pub too_old: u64,
    pub wrong_team: u64,
    pub other: u64,
}

impl From<RejectCounters> for RejectSummary {
    fn from(c: RejectCounters) -> Self {
        RejectSummary {
            accepted: c.accepted,
            auth_failed: c.auth_failed,
            replayed: c.replayed,
            too_old: c.too_old,
            wrong_team: c.wrong_team,
            other: c.truncated + c.bad_version,
        }
    }
}

struct Node {
    conn: Connection,
    sealer: Sealer,
    opener: Opener,
}

const SECRET: &[u8] = b"demo team secret, not for production";
const TEAM: u32 = 42;

/// The key exchange in virtual time over the session's own lossy links (`up` carries the
/// leader's datagrams): the leader sends
/// message 1 under the team key every `handshake_retry` until message 2 comes back; the
/// follower answers every copy with the same message 2. Returns the leader's and the
/// follower's keys, the time the leader had them and the message 1s sent; `None` if nothing
/// got through in `give_up`.
fn key_exchange(
    links: &mut Duplex<Vec<u8>>,
    rng: &mut ChaCha8Rng,
    cfg: &Config,
    epochs: (u64, u64),
) -> Option<(SessionKeys, SessionKeys, Instant, u32)> {
    let team = TeamKey::derive(SECRET, TEAM).expect("long secret");
    let psk = session_psk(SECRET, TEAM).expect("long secret");
    let mut entropy = || {
        let mut e = [0u8; 32];
        rng.fill_bytes(&mut e);
        e
    };
    let mut init = Initiator::new(&psk, TEAM, cfg.handshake_retry, Instant::ZERO, entropy()).ok()?;
    let (mut lead, mut follow) =
        (Sealer::with_epoch(team.clone(), 1, epochs.0), Sealer::with_epoch(team.clone(), 2, epochs.1));
    let (mut lead_open, mut follow_open) = (Opener::new(team.clone()), Opener::new(team));
    let mut answered: Option<(SessionKeys, [u8; session::MESSAGE_LEN])> = None;
    let mut wire = [0u8; 128];
    let mut now = Instant::ZERO;
    while now < Instant::ZERO + cfg.handshake_timeout {
        if let Some(m1) = init.poll_transmit(now) {
            let n = lead.seal(kind::HANDSHAKE, m1, &mut wire).ok()?;
            links.up.send(now, n + 28, wire[..n].to_vec());
        }
        while let Some(mut d) = links.up.pop_due(now) {
            let Ok(o) = follow_open.open(&mut d) else { continue };
            if answered.is_none() {
                answered = session::respond(&psk, TEAM, o.payload, entropy()).ok();
            }
            if let Some((_, m2)) = &answered {
                let n = follow.seal(kind::HANDSHAKE, m2, &mut wire).ok()?;
                links.down.send(now, n + 28, wire[..n].to_vec());
            }
        }
        while let Some(mut d) = links.down.pop_due(now) {
            let Ok(o) = lead_open.open(&mut d) else { continue };
            if let Ok(keys) = init.handle(o.payload) {
                return answered.map(|(f, _)| (keys, f, now, init.sent()));
            }
        }
        now = [init.poll_timeout(), links.up.next_at(), links.down.next_at()].into_iter().flatten().min()?.max(now);
    }
    None
}

/// Runs the session: `count` 100-byte commands, one per millisecond.
pub fn secure_session(loss: f64, seed: u64, count: u64) -> SessionSummary {
    let cfg = Config::default();
    let owd = Duration::from_millis(20);
    let lp = LinkParams { loss: LossModel::Iid { p: loss }, ..LinkParams::clean(owd, 20_000_000) };
    let mut links = Duplex::<Vec<u8>>::new(lp, lp, seed).expect("loss checked by the caller");
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 3);
    let mut s = SessionSummary { commands_sent: count, in_order: true, owd_ms: 20.0, ..Default::default() };
    let Some((lead_keys, follow_keys, t0, attempts)) = key_exchange(&mut links, &mut rng, &cfg, (seed, seed ^ 1))
    else {
        s.in_order = false;
        return s;
    };
    (s.key_exchange_ms, s.key_exchange_attempts) = ((t0 - Instant::ZERO).as_secs_f64() * 1000.0, attempts);
    let Duplex { up: mut down, down: mut up } = links;
    // Each end's life keeps its epoch; the session's keys are new, so its nonces are too.
    let mut leader = Node {
        conn: Connection::connect(cfg.clone(), seed, t0).expect("valid config"),
        sealer: Sealer::with_epoch(lead_keys.send, 1, seed),
        opener: Opener::new(lead_keys.recv),
    };
    let mut follower = Node {
        conn: Connection::accept(cfg, t0).expect("valid config"),
        sealer: Sealer::with_epoch(follow_keys.send, 2, seed ^ 1),
        opener: Opener::new(follow_keys.recv),
    };
    // Commands start once the handshake is done, as an application would wait for `connect`.
    let mut start = Instant::FAR_FUTURE;
    let (mut plain, mut wire) = (vec![0u8; 2048], vec![0u8; 2048]);
    let mut captured: Vec<Vec<u8>> = vec![];
    let mut delays = vec![];
    let mut now = t0;
    let mut next = 0u64;
    let give_up = t0 + Duration::from_millis(count) + Duration::from_secs(60);
    while s.commands_delivered < count && now < give_up {
        if start == Instant::FAR_FUTURE && leader.conn.state() == &State::Established {
            start = now;
        }
        let send_at = |i: u64| start + Duration::from_millis(i);
        while next < count && send_at(next) <= now {
            let mut cmd = format!("waypoint {next}: x={} y={}", next * 3, next * 7).into_bytes();
            cmd.resize(100, b' ');
            // The send buffer is far larger than the session.
            let _ = leader.conn.send(&cmd);
            next += 1;
        }
        // The intruder: forged frames and replays of captured ones, now and then.
        if rng.random_bool(0.002) {
            let mut forged = vec![0u8; 60 + (rng.next_u32() % 200) as usize];
            rng.fill_bytes(&mut forged);
            forged[0] = 1;
            forged[2..6].copy_from_slice(&TEAM.to_be_bytes());
            s.forged_injected += 1;
            // Straight into the follower's radio: no link loss spares the opener.
            let _ = follower.opener.open(&mut forged);
        }
        if rng.random_bool(0.002) && !captured.is_empty() {
            let mut f = captured[(rng.next_u32() as usize) % captured.len()].clone();
            s.replays_injected += 1;
            let _ = follower.opener.open(&mut f);
        }
        for (link, node) in [(&mut down, &mut follower), (&mut up, &mut leader)] {
            while let Some(mut d) = link.pop_due(now) {
                if let Ok(o) = node.opener.open(&mut d) {
                    node.conn.handle_packet(now, o.packet_number, o.payload);
                }
            }
        }
        for (node, link, capture) in [(&mut leader, &mut down, true), (&mut follower, &mut up, false)] {
            node.conn.handle_timeout(now);
            while let Some(n) = node.conn.poll_transmit(now, node.sealer.next_packet_number(), &mut plain) {
                let Ok(len) = node.sealer.seal(kind::LRT, &plain[..n], &mut wire) else { break };
                if capture && captured.len() < 64 {
                    captured.push(wire[..len].to_vec());
                }
                link.send(now, len + 28, wire[..len].to_vec());
            }
        }
        while let Ok(Some(m)) = follower.conn.recv() {
            let text = String::from_utf8_lossy(&m);
            let i: u64 =
                text.split(':').next().and_then(|w| w.trim_start_matches("waypoint ").parse().ok()).unwrap_or(u64::MAX);
            s.in_order &= i == s.commands_delivered;
            s.commands_delivered += 1;
            delays.push((now - send_at(i.min(count))).as_secs_f64() * 1000.0);
        }
        let t = [
            (next < count).then(|| send_at(next)),
            leader.conn.poll_timeout(),
            follower.conn.poll_timeout(),
            down.next_at(),
            up.next_at(),
            Some(now + Duration::from_millis(1)),
        ]
        .into_iter()
        .flatten()
        .min();
        now = t.map_or(give_up, |t| t.max(now));
    }
    delays.sort_by(f64::total_cmp);
    let q = |x: f64| {
        delays.get(((delays.len() as f64 * x) as usize).min(delays.len().saturating_sub(1))).copied().unwrap_or(0.0)
    };
    (s.p50_ms, s.p99_ms) = (q(0.5), q(0.99));
    s.datagrams_lost = down.stats().lost + up.stats().lost;
    s.repairs_sent = leader.conn.stats().repair_sent;
    s.frame_overhead_bytes = OVERHEAD;
    s.follower_rejected = follower.opener.counters().into();
    s
}
