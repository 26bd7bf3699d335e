//! Real sockets on loopback: the runtime drives LRT end to end.

use cohort_net::{LrtSocket, NetError, SocketConfig};
use cohort_proto::lrt::CloseReason;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

const SECRET: &[u8] = b"loopback test team secret";

fn cfg(sender: u32) -> SocketConfig {
    let mut c = SocketConfig::new(SECRET, 9, sender);
    c.dscp = Some(46);
    c
}

fn msg(i: u32, len: usize) -> Vec<u8> {
    let mut m = vec![(i % 251) as u8; len.max(4)];
    m[..4].copy_from_slice(&i.to_be_bytes());
    m
}

#[test]
fn messages_cross_loopback_in_order_exactly_once() {
    let server = LrtSocket::listen("127.0.0.1:0".parse().unwrap(), cfg(1)).unwrap();
    let addr = server.local_addr();
    let client = std::thread::spawn(move || {
        let c = LrtSocket::connect(addr, cfg(2)).unwrap();
        for i in 0..2000u32 {
            c.send(&msg(i, 1 + (i as usize * 37) % 3000)).unwrap();
        }
        c.flush(Some(Duration::from_secs(20))).unwrap();
        c.stats()
    });
    server.wait_connected(Some(Duration::from_secs(10))).unwrap();
    for i in 0..2000u32 {
        let m = server.recv_timeout(Some(Duration::from_secs(10))).unwrap();
        assert_eq!(m, msg(i, 1 + (i as usize * 37) % 3000), "message {i}");
    }
    let cs = client.join().unwrap();
    assert_eq!(cs.conn.messages_sent, 2000);
    assert!(cs.datagrams_sent >= cs.conn.source_sent);
    let ss = server.stats();
    assert_eq!(ss.conn.messages_received, 2000);
    assert_eq!(ss.rejected_frames, 0);
}

#[test]
fn wrong_team_key_cannot_connect_and_is_counted() {
    let server = LrtSocket::listen("127.0.0.1:0".parse().unwrap(), cfg(1)).unwrap();
    let mut bad = SocketConfig::new(b"not the team secret at all".to_vec(), 9, 2);
    bad.lrt.handshake_timeout = Duration::from_millis(600);
    let err = LrtSocket::connect(server.local_addr(), bad).unwrap_err();
    assert!(matches!(err, NetError::Closed(CloseReason::HandshakeTimedOut)), "{err:?}");
    let st = server.stats();
    assert!(st.rejected_frames >= 2, "every forged HELLO is counted");
    assert_eq!(st.frames.auth_failed, st.rejected_frames, "by reason: authentication");
    assert_eq!(st.frames.accepted, 0);
    assert!(matches!(server.wait_connected(Some(Duration::from_millis(10))), Err(NetError::TimedOut)));
}

#[test]
fn async_api_and_peer_close() {
    let server = LrtSocket::listen("127.0.0.1:0".parse().unwrap(), cfg(1)).unwrap();
    let addr = server.local_addr();
    let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
    let client = LrtSocket::connect(addr, cfg(2)).unwrap();
    rt.block_on(async {
        for i in 0..100 {
            client.send_async(&msg(i, 500)).await.unwrap();
        }
        for i in 0..100 {
            assert_eq!(server.recv_async().await.unwrap(), msg(i, 500));
        }
    });
    client.close();
    let e = server.recv_timeout(Some(Duration::from_secs(5))).unwrap_err();
    assert!(matches!(e, NetError::Closed(CloseReason::Peer(0))), "{e:?}");
}

#[test]
fn bad_configuration_is_an_error() {
    let mut c = cfg(1);
    c.dscp = Some(64);
    assert!(matches!(LrtSocket::listen("127.0.0.1:0".parse().unwrap(), c), Err(NetError::Config(_))));
    let short = SocketConfig::new(b"short".to_vec(), 1, 1);
    assert!(matches!(LrtSocket::listen("127.0.0.1:0".parse().unwrap(), short), Err(NetError::Config(_))));
}

/// A frame's key and nonce: whether the team key sealed it (the key exchange) or the
/// session's key (everything else), then sender id, epoch, packet number.
type Nonce = (bool, u32, u64, u64);

/// One datagram the relay forwarded: `true` if it went from the client to the server.
type Recorded = (bool, Vec<u8>);

/// Forwards datagrams between one client and `target`, recording every datagram both ways.
fn relay(
    target: std::net::SocketAddr,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> (std::net::SocketAddr, std::thread::JoinHandle<Vec<Recorded>>) {
    let sock = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    sock.set_read_timeout(Some(Duration::from_millis(20))).unwrap();
    let addr = sock.local_addr().unwrap();
    let h = std::thread::spawn(move || {
        let (mut seen, mut client, mut buf) = (Vec::new(), None, vec![0u8; 70_000]);
        while !stop.load(std::sync::atomic::Ordering::Relaxed) {
            let Ok((n, from)) = sock.recv_from(&mut buf) else { continue };
            if from == target {
                if let Some(c) = client {
                    seen.push((false, buf[..n].to_vec()));
                    let _ = sock.send_to(&buf[..n], c);
                }
                continue;
            }
            client = Some(from);
            seen.push((true, buf[..n].to_vec()));
            let _ = sock.send_to(&buf[..n], target);
        }
        seen
    });
    (addr, h)
}

fn nonce(datagram: &[u8]) -> Nonce {
    let f = cohort_wire::frame::Frame::new_checked(datagram).unwrap();
    (f.kind() == cohort_wire::frame::kind::HANDSHAKE, f.sender_id(), f.epoch(), f.packet_number())
}

/// The restart defect of the nonce design: a sender restarted with the same secret and sender
/// id used to start its packet numbers at 0 again and put hundreds of datagrams on the wire
/// under nonces an earlier life had used. Three lives through a recording relay: every
/// (key, nonce) pair is new, and each life is served. A life's key exchange goes under the
/// team key and its traffic under the session's key, each with packet numbers from 0, so the
/// nonce fields alone may appear once under each; the session key is new every life.
#[test]
fn a_restarted_sender_repeats_no_nonce_on_the_wire() {
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut headers = Vec::new();
    for life in 0..3 {
        let server = LrtSocket::listen("127.0.0.1:0".parse().unwrap(), cfg(1)).unwrap();
        stop.store(false, std::sync::atomic::Ordering::Relaxed);
        let (addr, rec) = relay(server.local_addr(), stop.clone());
        let c = LrtSocket::connect(addr, cfg(2)).unwrap();
        for i in 0..300u32 {
            c.send(&msg(i, 200)).unwrap();
        }
        for i in 0..300u32 {
            assert_eq!(server.recv_timeout(Some(Duration::from_secs(10))).unwrap(), msg(i, 200), "life {life}");
        }
        c.flush(Some(Duration::from_secs(10))).unwrap();
        drop(c);
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        headers.extend(rec.join().unwrap().iter().filter(|d| d.0).map(|d| nonce(&d.1)));
    }
    let distinct: std::collections::HashSet<_> = headers.iter().collect();
    assert!(headers.len() >= 3 * 50, "300 messages of 200 B are at least 50 symbols a life");
    assert_eq!(distinct.len(), headers.len(), "a nonce was used twice under one key");
    let lives: std::collections::HashSet<_> = headers.iter().map(|h| h.2).collect();
    assert_eq!(lives.len(), 3, "one epoch per life");
}

/// Forward secrecy on the wire: a session recorded both ways, then the team secret handed to
/// the attacker. The team key opens the key exchange (two ephemeral public keys and empty
/// payloads) and nothing else; the messages themselves are under the session's keys, which
/// depend on ephemeral secrets both ends dropped.
#[test]
fn recorded_traffic_does_not_open_with_the_team_secret() {
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let server = LrtSocket::listen("127.0.0.1:0".parse().unwrap(), cfg(1)).unwrap();
    let (addr, rec) = relay(server.local_addr(), stop.clone());
    let c = LrtSocket::connect(addr, cfg(2)).unwrap();
    let secret_text = b"the map of the warehouse";
    for i in 0..50u32 {
        c.send(&[secret_text.as_slice(), &i.to_be_bytes()].concat()).unwrap();
    }
    for _ in 0..50 {
        server.recv_timeout(Some(Duration::from_secs(10))).unwrap();
    }
    server.try_send(b"acknowledged, here is the plan").unwrap();
    assert_eq!(c.recv_timeout(Some(Duration::from_secs(10))).unwrap(), b"acknowledged, here is the plan");
    c.flush(Some(Duration::from_secs(10))).unwrap();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let recorded = rec.join().unwrap();
    assert!(recorded.iter().any(|d| !d.0), "the server's answers were recorded too");
    let team = cohort_wire::frame::TeamKey::derive(SECRET, 9).unwrap();
    let (mut exchange, mut traffic) = (0, 0);
    for (_, d) in &recorded {
        let mut d = d.clone();
        let is_exchange = nonce(&d).0;
        // A fresh opener each time: no replay window stands between a frame and the key.
        let opened = cohort_wire::frame::Opener::new(team.clone()).open(&mut d).map(|o| o.payload.len());
        if is_exchange {
            assert_eq!(opened, Ok(cohort_proto::session::MESSAGE_LEN), "the exchange is under the team key");
            exchange += 1;
        } else {
            assert_eq!(opened, Err(cohort_wire::frame::OpenError::AuthFailed), "traffic is not under the team key");
            traffic += 1;
        }
        assert!(!d.windows(secret_text.len()).any(|w| w == secret_text), "plaintext on the wire");
    }
    // Small messages share symbols, so a few datagrams carry them all.
    assert!(exchange >= 2 && traffic >= 4, "{exchange} exchange and {traffic} traffic datagrams");
}

/// A message 1 recorded from an earlier connection and replayed to a fresh listener is
/// answered (a responder remembers nothing), but only a datagram under a session's key makes
/// a connection: the replayer never gets one, and the real client still connects. On the old
/// design the replayed HELLO (then under the team key) pinned the listener to the replayer.
#[test]
fn a_replayed_key_exchange_does_not_take_the_listener() {
    let trap = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    trap.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let trap_addr = trap.local_addr().unwrap();
    let early = std::thread::spawn(move || {
        let mut c = cfg(2);
        c.lrt.handshake_timeout = Duration::from_millis(300);
        LrtSocket::connect(trap_addr, c).map(|_| ())
    });
    let mut buf = [0u8; 2048];
    let (n, _) = trap.recv_from(&mut buf).unwrap();
    let recorded = buf[..n].to_vec();
    assert!(matches!(early.join().unwrap(), Err(NetError::Closed(CloseReason::HandshakeTimedOut))));

    let server = LrtSocket::listen("127.0.0.1:0".parse().unwrap(), cfg(1)).unwrap();
    let attacker = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    attacker.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    attacker.send_to(&recorded, server.local_addr()).unwrap();
    let (n, _) = attacker.recv_from(&mut buf).unwrap();
    assert!(nonce(&buf[..n]).0, "the listener answers with a message 2");
    // The attacker cannot finish the exchange; replaying its bytes again changes nothing.
    attacker.send_to(&recorded, server.local_addr()).unwrap();

    let c = LrtSocket::connect(server.local_addr(), cfg(3)).unwrap();
    c.send(b"hello from the real robot").unwrap();
    assert_eq!(server.recv_timeout(Some(Duration::from_secs(10))).unwrap(), b"hello from the real robot");
    assert_eq!(server.peer_addr().map(|a| a.port()), Some(c.local_addr().port()), "the real client is the peer");
    let st = server.stats();
    assert!(st.keys.handshakes_sent >= 2, "{st:?}");
    assert_eq!(st.keys.half_open_dropped, 1, "the replayer's half-open session is dropped when the real one starts");
    assert_eq!(st.foreign_sender, 0);
}

/// A NAT that rebinds: it forwards a client to `target`, and after `rebind_after` datagrams
/// from the client carries them from a new source port, dropping the old one.
fn rebinding_nat(
    target: std::net::SocketAddr,
    rebind_after: usize,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> (std::net::SocketAddr, std::thread::JoinHandle<()>) {
    use std::net::UdpSocket;
    let outside = UdpSocket::bind("127.0.0.1:0").unwrap();
    outside.set_nonblocking(true).unwrap();
    let addr = outside.local_addr().unwrap();
    let h = std::thread::spawn(move || {
        let mut up = UdpSocket::bind("127.0.0.1:0").unwrap();
        up.set_nonblocking(true).unwrap();
        let (mut client, mut forwarded, mut buf) = (None, 0usize, vec![0u8; 70_000]);
        while !stop.load(std::sync::atomic::Ordering::Relaxed) {
            let mut idle = true;
            if let Ok((n, from)) = outside.recv_from(&mut buf) {
                idle = false;
                client = Some(from);
                forwarded += 1;
                if forwarded == rebind_after {
                    // The old mapping is gone: what the server sends there is lost.
                    up = UdpSocket::bind("127.0.0.1:0").unwrap();
                    up.set_nonblocking(true).unwrap();
                }
                let _ = up.send_to(&buf[..n], target);
            }
            if let (Ok((n, _)), Some(c)) = (up.recv_from(&mut buf), client) {
                idle = false;
                let _ = outside.send_to(&buf[..n], c);
            }
            if idle {
                std::thread::sleep(Duration::from_micros(100));
            }
        }
    });
    (addr, h)
}

/// A drone changes address mid-stream (here a NAT rebinding): the server follows the peer's
/// newest authentic datagram to its new address, so acknowledgements reach it again; every
/// message arrives once, in order, and the sender's flush completes.
#[test]
fn a_peer_that_changes_address_mid_stream_is_followed() {
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let server = LrtSocket::listen("127.0.0.1:0".parse().unwrap(), cfg(1)).unwrap();
    let (nat, h) = rebinding_nat(server.local_addr(), 200, stop.clone());
    let c = LrtSocket::connect(nat, cfg(2)).unwrap();
    let first = server.peer_addr().unwrap();
    for i in 0..2000u32 {
        c.send(&msg(i, 300)).unwrap();
    }
    for i in 0..2000u32 {
        assert_eq!(server.recv_timeout(Some(Duration::from_secs(10))).unwrap(), msg(i, 300), "message {i}");
    }
    c.flush(Some(Duration::from_secs(10))).expect("acknowledgements reach the client at its new address");
    assert_eq!(server.stats().migrations, 1);
    assert!(server.stats().path_challenges >= 1, "the new address was challenged first");
    assert!(c.stats().path_responses >= 1, "and the client answered from there");
    assert_ne!(server.peer_addr().unwrap(), first);
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    h.join().unwrap();
}

/// An on-path attacker without the key copies each fresh datagram of the client and delivers
/// the copy first from an address of its own, where it drops whatever comes back (it wants the
/// server's answers sent to a victim). The copy is authentic and the newest, so without path
/// validation the server would move there and lose the client. With it, the challenge sent to
/// that address is never answered: the connection stays, every message arrives, acknowledgements
/// keep reaching the client.
#[test]
fn a_spoofed_source_address_does_not_redirect_the_connection() {
    use std::net::UdpSocket;
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let server = LrtSocket::listen("127.0.0.1:0".parse().unwrap(), cfg(1)).unwrap();
    let target = server.local_addr();
    let outside = UdpSocket::bind("127.0.0.1:0").unwrap();
    outside.set_nonblocking(true).unwrap();
    let relay = outside.local_addr().unwrap();
    let st = stop.clone();
    // Bytes the attacker sent from its address, and bytes the server sent there.
    let (spoofed, to_attacker) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let (sp, ta) = (spoofed.clone(), to_attacker.clone());
    let h = std::thread::spawn(move || {
        let up = UdpSocket::bind("127.0.0.1:0").unwrap();
        let spoof = UdpSocket::bind("127.0.0.1:0").unwrap();
        up.set_nonblocking(true).unwrap();
        spoof.set_nonblocking(true).unwrap();
        let (mut client, mut n_fwd, mut buf, mut sink) = (None, 0usize, vec![0u8; 70_000], vec![0u8; 70_000]);
        while !st.load(std::sync::atomic::Ordering::Relaxed) {
            let mut idle = true;
            if let Ok((n, from)) = outside.recv_from(&mut buf) {
                idle = false;
                client = Some(from);
                n_fwd += 1;
                if n_fwd > 100 {
                    let _ = spoof.send_to(&buf[..n], target);
                    sp.fetch_add(n as u64, Ordering::Relaxed);
                    std::thread::sleep(Duration::from_micros(50));
                }
                let _ = up.send_to(&buf[..n], target);
            }
            if let (Ok((n, _)), Some(c)) = (up.recv_from(&mut buf), client) {
                idle = false;
                let _ = outside.send_to(&buf[..n], c);
            }
            // What the server sends to the spoofed address goes nowhere.
            while let Ok((n, _)) = spoof.recv_from(&mut sink) {
                ta.fetch_add(n as u64, Ordering::Relaxed);
            }
            if idle {
                std::thread::sleep(Duration::from_micros(100));
            }
        }
    });
    let c = LrtSocket::connect(relay, cfg(2)).unwrap();
    for i in 0..1500u32 {
        c.send(&msg(i, 300)).unwrap();
    }
    for i in 0..1500u32 {
        assert_eq!(server.recv_timeout(Some(Duration::from_secs(10))).unwrap(), msg(i, 300), "message {i}");
    }
    c.flush(Some(Duration::from_secs(10))).expect("acknowledgements still reach the client");
    let s = server.stats();
    assert_eq!(s.migrations, 0, "{s:?}");
    assert!(s.path_challenges >= 1, "the spoofed address was challenged: {s:?}");
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    h.join().unwrap();
    // While the challenge is open the server copies its datagrams to the new address, but
    // never more than three times what came from there (plus the challenges themselves).
    let (spoofed, to_attacker) = (spoofed.load(Ordering::Relaxed), to_attacker.load(Ordering::Relaxed));
    assert!(
        to_attacker <= 3 * spoofed + s.path_challenges * 64,
        "{to_attacker} bytes sent to a spoofed address that sent {spoofed}: {s:?}"
    );
}

/// One port, three robots: a listener hands out one connection per robot, each carries its
/// messages both ways once and in order, and the port's counters say so.
#[test]
fn one_listener_serves_several_robots_each_once_in_order() {
    use cohort_net::LrtListener;
    let listener = LrtListener::bind("127.0.0.1:0".parse().unwrap(), cfg(1)).unwrap();
    let addr = listener.local_addr();
    let robots: Vec<_> = (0..3u32)
        .map(|r| {
            std::thread::spawn(move || {
                let c = LrtSocket::connect(addr, cfg(10 + r)).unwrap();
                c.send(&r.to_be_bytes()).unwrap();
                for i in 0..400u32 {
                    c.send(&msg(i * 7 + r, 300)).unwrap();
                }
                for i in 0..50u32 {
                    assert_eq!(c.recv_timeout(Some(Duration::from_secs(10))).unwrap(), msg(i + r, 100), "robot {r}");
                }
                c.flush(Some(Duration::from_secs(10))).unwrap();
            })
        })
        .collect();
    let mut seen = Vec::new();
    for _ in 0..3 {
        let s = listener.accept(Some(Duration::from_secs(10))).unwrap();
        let r = u32::from_be_bytes(s.recv_timeout(Some(Duration::from_secs(10))).unwrap().try_into().unwrap());
        for i in 0..400u32 {
            assert_eq!(s.recv_timeout(Some(Duration::from_secs(10))).unwrap(), msg(i * 7 + r, 300), "from robot {r}");
        }
        for i in 0..50u32 {
            s.send(&msg(i + r, 100)).unwrap();
        }
        // The robot checks it got them (it may close the moment it has, so no flush here).
        assert_eq!(s.local_addr(), addr);
        seen.push((r, s));
    }
    for h in robots {
        h.join().unwrap();
    }
    let mut ids: Vec<u32> = seen.iter().map(|(r, _)| *r).collect();
    ids.sort_unstable();
    assert_eq!(ids, [0, 1, 2]);
    assert_eq!(listener.stats().0.connections, 3);
}

/// A robot whose process restarts (a new life of the same sender id) connects to the same
/// port again and gets a new connection; its old one ends on its own (here: closed by the old
/// process), not by taking the new one over, and the port keeps serving.
#[test]
fn a_restarted_robot_connects_again_to_the_same_listener() {
    use cohort_net::LrtListener;
    let listener = LrtListener::bind("127.0.0.1:0".parse().unwrap(), cfg(1)).unwrap();
    let addr = listener.local_addr();
    for life in 0..3u32 {
        let c = LrtSocket::connect(addr, cfg(2)).unwrap();
        let s = listener.accept(Some(Duration::from_secs(10))).unwrap();
        for i in 0..200u32 {
            c.send(&msg(i + life, 200)).unwrap();
        }
        for i in 0..200u32 {
            assert_eq!(s.recv_timeout(Some(Duration::from_secs(10))).unwrap(), msg(i + life, 200), "life {life}");
        }
        c.flush(Some(Duration::from_secs(10))).unwrap();
        drop(c);
        assert!(matches!(s.recv_timeout(Some(Duration::from_secs(10))), Err(NetError::Closed(CloseReason::Peer(_)))));
    }
    // A crash leaves the old connection open at the listener: the new life still connects
    // at once, beside it (the old one would end by its idle timeout).
    let crashed = LrtSocket::connect(addr, cfg(2)).unwrap();
    let old = listener.accept(Some(Duration::from_secs(10))).unwrap();
    let restarted = LrtSocket::connect(addr, cfg(2)).unwrap();
    let new = listener.accept(Some(Duration::from_secs(10))).unwrap();
    restarted.send(b"after the restart").unwrap();
    assert_eq!(new.recv_timeout(Some(Duration::from_secs(10))).unwrap(), b"after the restart");
    crashed.send(b"the old life").unwrap();
    assert_eq!(old.recv_timeout(Some(Duration::from_secs(10))).unwrap(), b"the old life");
    drop((crashed, restarted, old, new));
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while listener.stats().1 > 0 && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    let (st, open) = listener.stats();
    assert_eq!((st.connections, open), (5, 0), "{st:?}");
}

/// A robot that moves (a rebinding NAT) while connected to a listener keeps its connection:
/// datagrams are routed by the life they are sealed for, not by address.
#[test]
fn a_listener_follows_a_robot_that_moves() {
    use cohort_net::LrtListener;
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let listener = LrtListener::bind("127.0.0.1:0".parse().unwrap(), cfg(1)).unwrap();
    let (nat, h) = rebinding_nat(listener.local_addr(), 200, stop.clone());
    let c = LrtSocket::connect(nat, cfg(2)).unwrap();
    let s = listener.accept(Some(Duration::from_secs(10))).unwrap();
    let first = s.peer_addr().unwrap();
    for i in 0..2000u32 {
        c.send(&msg(i, 300)).unwrap();
    }
    for i in 0..2000u32 {
        assert_eq!(s.recv_timeout(Some(Duration::from_secs(10))).unwrap(), msg(i, 300), "message {i}");
    }
    c.flush(Some(Duration::from_secs(10))).expect("acknowledgements reach the robot at its new address");
    assert_eq!(s.stats().migrations, 1);
    assert_ne!(s.peer_addr().unwrap(), first);
    assert_eq!(listener.stats().0.connections, 1, "one connection, however many addresses");
    stop.store(true, Ordering::Relaxed);
    h.join().unwrap();
}

/// Bad input on a listener: a peer without the team secret never gets a connection (its
/// message 1 is not even answered), stray datagrams are counted, and a full listener refuses
/// (and counts) a new peer instead of growing.
#[test]
fn a_listener_refuses_outsiders_strays_and_peers_beyond_its_limit() {
    use cohort_net::LrtListener;
    let listener = LrtListener::bind_with_limit("127.0.0.1:0".parse().unwrap(), cfg(1), 1).unwrap();
    let addr = listener.local_addr();
    let mut bad = SocketConfig::new(b"not the team secret at all".to_vec(), 9, 5);
    bad.lrt.handshake_timeout = Duration::from_millis(400);
    assert!(matches!(LrtSocket::connect(addr, bad), Err(NetError::Closed(CloseReason::HandshakeTimedOut))));
    let stray = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    stray.send_to(&[2u8; 64], addr).unwrap();
    let first = LrtSocket::connect(addr, cfg(2)).unwrap();
    let _s = listener.accept(Some(Duration::from_secs(10))).unwrap();
    let mut late = cfg(3);
    late.lrt.handshake_timeout = Duration::from_millis(600);
    assert!(LrtSocket::connect(addr, late).is_err(), "a second peer beyond the limit gets no connection");
    assert!(matches!(listener.accept(Some(Duration::from_millis(100))), Err(NetError::TimedOut)));
    let (st, open) = listener.stats();
    assert_eq!((st.connections, open), (1, 1), "{st:?}");
    assert!(st.refused >= 1 && st.unrouted >= 1, "{st:?}");
    first.send(b"still served").unwrap();
    assert!(LrtListener::bind_with_limit("127.0.0.1:0".parse().unwrap(), cfg(1), 0).is_err());
}
