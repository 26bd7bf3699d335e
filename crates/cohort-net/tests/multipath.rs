//! Multipath LRT over real UDP sockets on loopback: two paths (127.0.0.1 and 127.0.0.2).

use cohort_net::{MpLrtSocket, NetError, SocketConfig};
use cohort_proto::lrt::CloseReason;
use cohort_proto::multipath::MpConfig;
use std::net::{SocketAddr, UdpSocket};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

const SECRET: &[u8] = b"multipath loopback team secret";

fn cfg(sender: u32) -> SocketConfig {
    SocketConfig::new(SECRET, 4, sender)
}

fn addr(s: &str) -> SocketAddr {
    s.parse().unwrap()
}

fn msg(i: u32, len: usize) -> Vec<u8> {
    let mut m = vec![(i % 251) as u8; len.max(4)];
    m[..4].copy_from_slice(&i.to_be_bytes());
    m
}

/// Forwards datagrams between a client and `target` until `cut` is set; then drops them all
/// (a radio out of range). Counts what it forwarded.
fn relay(target: SocketAddr, cut: Arc<AtomicBool>, stop: Arc<AtomicBool>, forwarded: Arc<AtomicU64>) -> SocketAddr {
    let sock = UdpSocket::bind("127.0.0.2:0").unwrap();
    sock.set_read_timeout(Some(Duration::from_millis(10))).unwrap();
    let a = sock.local_addr().unwrap();
    std::thread::spawn(move || {
        let (mut client, mut buf) = (None, vec![0u8; 70_000]);
        while !stop.load(Ordering::Relaxed) {
            let Ok((n, from)) = sock.recv_from(&mut buf) else { continue };
            if cut.load(Ordering::Relaxed) {
                continue;
            }
            let to = if from == target {
                match client {
                    Some(c) => c,
                    None => continue,
                }
            } else {
                client = Some(from);
                target
            };
            let _ = sock.send_to(&buf[..n], to);
            forwarded.fetch_add(1, Ordering::Relaxed);
        }
    });
    a
}

#[test]
fn two_paths_carry_messages_exactly_once_in_order() {
    let server = MpLrtSocket::listen(&[addr("127.0.0.1:0"), addr("127.0.0.2:0")], cfg(1), MpConfig::default()).unwrap();
    let s = server.local_addrs().to_vec();
    let client = std::thread::spawn(move || {
        let paths = [(addr("127.0.0.1:0"), s[0]), (addr("127.0.0.2:0"), s[1])];
        let c = MpLrtSocket::connect(&paths, cfg(2), MpConfig::default()).unwrap();
        for i in 0..3000u32 {
            c.send(&msg(i, 1 + (i as usize * 53) % 2500)).unwrap();
        }
        c.flush(Some(Duration::from_secs(30))).unwrap();
        c.stats()
    });
    server.wait_connected(Some(Duration::from_secs(10))).unwrap();
    for i in 0..3000u32 {
        assert_eq!(server.recv_timeout(Some(Duration::from_secs(10))).unwrap(), msg(i, 1 + (i as usize * 53) % 2500));
    }
    let cs = client.join().unwrap();
    assert!(cs.mp.paths.iter().all(|p| p.sent > 50), "both paths carried data: {:?}", cs.mp.paths);
    let ss = server.stats();
    assert_eq!(ss.conn.messages_received, 3000);
    assert_eq!(ss.rejected_frames, 0);
    assert!(server.peer_addrs().iter().all(|p| p.is_some()), "the listener learned both paths");
}

/// The listening end sends, one path per super-arm: it knows a path's peer address only once
/// something arrived on that path, so its first packets on the second path go nowhere and the
/// path fails. The connector, which has nothing from that path, answers the probes that
/// follow with an empty report, and the path comes back and carries messages (before, the
/// probes went unanswered and the path stayed down for the connection's life).
#[test]
fn a_listener_sends_on_every_path() {
    let one = MpConfig { super_arm: 1, ..MpConfig::default() };
    let server = MpLrtSocket::listen(&[addr("127.0.0.1:0"), addr("127.0.0.2:0")], cfg(1), one.clone()).unwrap();
    let s = server.local_addrs().to_vec();
    let paths = [(addr("127.0.0.1:0"), s[0]), (addr("127.0.0.2:0"), s[1])];
    let c = MpLrtSocket::connect(&paths, cfg(2), one).unwrap();
    server.wait_connected(Some(Duration::from_secs(10))).unwrap();
    let reader = std::thread::spawn(move || {
        for i in 0..3000u32 {
            assert_eq!(c.recv_timeout(Some(Duration::from_secs(10))).unwrap(), msg(i, 1000), "message {i}");
        }
        c
    });
    for i in 0..3000u32 {
        server.send(&msg(i, 1000)).unwrap();
    }
    server.flush(Some(Duration::from_secs(30))).unwrap();
    let _c = reader.join().unwrap();
    assert!(server.peer_addrs().iter().all(|p| p.is_some()), "the listener learned both paths");
    let st = server.stats();
    assert!(st.mp.paths.iter().all(|p| p.delivered > 0), "both paths delivered: {:?}", st.mp.paths);
}

/// Path 1 goes through a relay that stops forwarding mid-stream: every message still arrives,
/// and the sender marks the path down.
#[test]
fn a_path_lost_mid_stream_costs_no_message() {
    let server = MpLrtSocket::listen(&[addr("127.0.0.1:0"), addr("127.0.0.2:0")], cfg(1), MpConfig::default()).unwrap();
    let s = server.local_addrs().to_vec();
    let (cut, stop, fwd) =
        (Arc::new(AtomicBool::new(false)), Arc::new(AtomicBool::new(false)), Arc::new(AtomicU64::new(0)));
    let via = relay(s[1], cut.clone(), stop.clone(), fwd.clone());
    let paths = [(addr("127.0.0.1:0"), s[0]), (addr("127.0.0.2:0"), via)];
    let c = MpLrtSocket::connect(&paths, cfg(2), MpConfig::default()).unwrap();
    let reader = std::thread::spawn(move || {
        let mut got = 0u32;
        while got < 4000 {
            let m = server.recv_timeout(Some(Duration::from_secs(10))).unwrap();
            assert_eq!(m, msg(got, 900), "message {got}");
            got += 1;
        }
        server
    });
    for i in 0..4000u32 {
        if i == 1500 {
            // `send` only queues: wait (bounded) until path 1 has really carried traffic, then
            // cut it while the rest of the stream is still to go.
            let since = std::time::Instant::now();
            while fwd.load(Ordering::Relaxed) < 50 && since.elapsed() < Duration::from_secs(10) {
                std::thread::sleep(Duration::from_millis(2));
            }
            assert!(fwd.load(Ordering::Relaxed) >= 50, "path 1 carried traffic before the cut");
            cut.store(true, Ordering::Relaxed);
        }
        c.send(&msg(i, 900)).unwrap();
    }
    c.flush(Some(Duration::from_secs(30))).unwrap();
    let _server = reader.join().unwrap();
    std::thread::sleep(Duration::from_millis(400));
    let st = c.stats();
    assert!(st.mp.paths[1].failures >= 1 || !st.mp.paths[1].up, "path 1 marked down: {:?}", st.mp.paths[1]);
    stop.store(true, Ordering::Relaxed);
}

#[test]
fn another_secret_cannot_connect() {
    let server = MpLrtSocket::listen(&[addr("127.0.0.1:0")], cfg(1), MpConfig::default()).unwrap();
    let mut bad = SocketConfig::new(b"not the multipath team secret".to_vec(), 4, 2);
    bad.lrt.handshake_timeout = Duration::from_millis(500);
    let err =
        MpLrtSocket::connect(&[(addr("127.0.0.1:0"), server.local_addrs()[0])], bad, MpConfig::default()).unwrap_err();
    assert!(matches!(err, NetError::Closed(CloseReason::HandshakeTimedOut)), "{err:?}");
    let st = server.stats();
    assert!(st.frames.auth_failed >= 1 && st.frames.accepted == 0, "{st:?}");
}

#[test]
fn no_paths_is_a_configuration_error() {
    assert!(matches!(MpLrtSocket::listen(&[], cfg(1), MpConfig::default()), Err(NetError::Config(_))));
}
