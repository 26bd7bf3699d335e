//! Real sockets on loopback: the runtime drives LRT end to end.

use cohort_net::{LrtSocket, NetError, SocketConfig};
use cohort_proto::lrt::CloseReason;
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

/// A frame's nonce fields: sender id, epoch, packet number.
type Nonce = (u32, u64, u64);

/// Forwards datagrams between one client and `target`, recording the client's frame headers.
fn relay(
    target: std::net::SocketAddr,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> (std::net::SocketAddr, std::thread::JoinHandle<Vec<Nonce>>) {
    use cohort_wire::frame::Frame;
    let sock = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    sock.set_read_timeout(Some(Duration::from_millis(20))).unwrap();
    let addr = sock.local_addr().unwrap();
    let h = std::thread::spawn(move || {
        let (mut seen, mut client, mut buf) = (Vec::new(), None, vec![0u8; 70_000]);
        while !stop.load(std::sync::atomic::Ordering::Relaxed) {
            let Ok((n, from)) = sock.recv_from(&mut buf) else { continue };
            if from == target {
                if let Some(c) = client {
                    let _ = sock.send_to(&buf[..n], c);
                }
                continue;
            }
            client = Some(from);
            let f = Frame::new_checked(&buf[..n]).unwrap();
            seen.push((f.sender_id(), f.epoch(), f.packet_number()));
            let _ = sock.send_to(&buf[..n], target);
        }
        seen
    });
    (addr, h)
}

/// The restart defect of the nonce design: a sender restarted with the same secret and sender
/// id used to start its packet numbers at 0 again and put hundreds of datagrams on the wire
/// under nonces an earlier life had used. Three lives through a recording relay: every frame
/// header (sender, epoch, packet number: the nonce) is new, and each life is served.
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
        headers.extend(rec.join().unwrap());
    }
    let distinct: std::collections::HashSet<_> = headers.iter().collect();
    assert!(headers.len() >= 3 * 50, "300 messages of 200 B are at least 50 symbols a life");
    assert_eq!(distinct.len(), headers.len(), "a nonce was used twice");
    let lives: std::collections::HashSet<_> = headers.iter().map(|h| h.1).collect();
    assert_eq!(lives.len(), 3, "one epoch per life");
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
                    std::thread::sleep(Duration::from_micros(50));
                }
                let _ = up.send_to(&buf[..n], target);
            }
            if let (Ok((n, _)), Some(c)) = (up.recv_from(&mut buf), client) {
                idle = false;
                let _ = outside.send_to(&buf[..n], c);
            }
            // What the server sends to the spoofed address goes nowhere.
            while spoof.recv_from(&mut sink).is_ok() {}
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
}
