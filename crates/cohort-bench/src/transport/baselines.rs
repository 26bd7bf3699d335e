//! Each transport's sender and receiver for the shoot-out, with their sockets opened inside
//! the testbed nodes' namespaces. Every loop ends at the schedule's deadline.

use super::{Arrivals, Path, Schedule};
use cohort_emu::netns::in_netns;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::sync::Arc;
use std::time::{Duration, Instant};

type Outcome = Result<(u64, Arrivals), String>;

fn s<E: std::fmt::Display>(e: E) -> String {
    e.to_string()
}

fn left(sch: &Schedule) -> Duration {
    sch.deadline.saturating_duration_since(Instant::now()).max(Duration::from_millis(1))
}

/// Runs transport `name` on `path` with schedule `sch`: (messages handed to it, arrivals).
pub fn run(name: &str, path: &Path, sch: &Schedule) -> Outcome {
    match name {
        "lrt" => lrt(path, sch),
        "tcp_cubic" => tcp(path, sch, "cubic"),
        "tcp_bbr" => tcp(path, sch, "bbr"),
        "kcp" => kcp(path, sch),
        "quic" => quic(path, sch, false),
        "quic_bbr" => quic(path, sch, true),
        other => Err(format!("unknown transport {other:?}")),
    }
}

/// Runs the generator on this thread and the receiver on another; returns both results.
fn pair(sender: impl FnOnce() -> u64 + Send, receiver: impl FnOnce() -> Arrivals + Send) -> (u64, Arrivals) {
    std::thread::scope(|sc| {
        let rx = sc.spawn(receiver);
        let sent = sender();
        (sent, rx.join().unwrap_or_default())
    })
}

fn lrt(p: &Path, sch: &Schedule) -> Outcome {
    use cohort_net::{LrtSocket, SocketConfig};
    const SECRET: &[u8] = b"transport shoot-out team secret";
    let cfg = |id| SocketConfig::new(SECRET, 7, id);
    let rx_ip = p.rx_ip;
    let server = in_netns(&p.rx_ns, move || LrtSocket::listen((rx_ip, 0).into(), cfg(1)).map_err(io::Error::other))
        .map_err(s)?;
    let to = SocketAddr::new(p.rx_ip.into(), server.local_addr().port());
    let client = in_netns(&p.tx_ns, move || LrtSocket::connect(to, cfg(2)).map_err(io::Error::other)).map_err(s)?;
    client.wait_connected(Some(Duration::from_secs(5))).map_err(s)?;
    Ok(pair(
        || {
            let mut sent = 0;
            while sent < sch.count {
                let Some(m) = sch.next(sent) else { break };
                if client.send(&m).is_err() {
                    break;
                }
                sent += 1;
            }
            sent
        },
        || {
            let mut got = Arrivals::new();
            while (got.len() as u64) < sch.count {
                match server.recv_timeout(Some(left(sch))) {
                    Ok(m) => got.extend(sch.arrival(&m)),
                    Err(_) => break,
                }
                if Instant::now() > sch.deadline {
                    break;
                }
            }
            got
        },
    ))
}

fn tcp(p: &Path, sch: &Schedule, cc: &'static str) -> Outcome {
    let rx_ip = p.rx_ip;
    let listener = in_netns(&p.rx_ns, move || TcpListener::bind((rx_ip, 0))).map_err(s)?;
    let to = SocketAddr::new(p.rx_ip.into(), listener.local_addr().map_err(s)?.port());
    let tx_ip = p.tx_ip;
    let sock = in_netns(&p.tx_ns, move || {
        let so = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None)?;
        so.set_tcp_congestion(cc.as_bytes())?;
        so.set_tcp_nodelay(true)?;
        so.bind(&SocketAddr::new(tx_ip.into(), 0).into())?;
        Ok(so)
    })
    .map_err(s)?;
    sock.connect_timeout(&to.into(), Duration::from_secs(5)).map_err(s)?;
    let mut conn: TcpStream = sock.into();
    let (mut peer, _) = listener.accept().map_err(s)?;
    Ok(pair(
        || {
            let mut sent = 0;
            while sent < sch.count {
                let Some(m) = sch.next(sent) else { break };
                let _ = conn.set_write_timeout(Some(left(sch)));
                if conn.write_all(&m).is_err() {
                    break;
                }
                sent += 1;
            }
            sent
        },
        || {
            let mut got = Arrivals::new();
            let mut buf = vec![0u8; sch.size];
            while (got.len() as u64) < sch.count {
                let _ = peer.set_read_timeout(Some(left(sch)));
                if peer.read_exact(&mut buf).is_err() {
                    break;
                }
                got.extend(sch.arrival(&buf));
            }
            got
        },
    ))
}

fn runtime() -> Result<tokio::runtime::Runtime, String> {
    tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(s)
}

/// Feeds the schedule's messages into a channel from a thread of its own (tokio's timer ticks
/// in milliseconds; the generator's sleep is precise), so async senders get them on time.
fn generator(sch: Schedule) -> tokio::sync::mpsc::UnboundedReceiver<Vec<u8>> {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    std::thread::spawn(move || {
        let mut i = 0;
        while i < sch.count {
            let Some(m) = sch.next(i) else { break };
            if tx.send(m).is_err() {
                break;
            }
            i += 1;
        }
    });
    rx
}

fn udp_in(ns: &str, ip: std::net::Ipv4Addr) -> Result<UdpSocket, String> {
    in_netns(ns, move || {
        let u = UdpSocket::bind((ip, 0))?;
        u.set_nonblocking(true)?;
        Ok(u)
    })
    .map_err(s)
}

/// KCP "turbo mode" as its authors define it: `nodelay 1, interval 10, resend 2, nc 1`;
/// windows of 1024 segments so that the window never limits 1 message per millisecond
/// across a 100 ms round trip; each write flushed at once.
fn kcp_config() -> tokio_kcp::KcpConfig {
    tokio_kcp::KcpConfig {
        nodelay: tokio_kcp::KcpNoDelayConfig { nodelay: true, interval: 10, resend: 2, nc: true },
        wnd_size: (1024, 1024),
        flush_write: true,
        flush_acks_input: true,
        stream: false,
        ..tokio_kcp::KcpConfig::default()
    }
}

fn kcp(p: &Path, sch: &Schedule) -> Outcome {
    let rx_sock = udp_in(&p.rx_ns, p.rx_ip)?;
    let to = SocketAddr::new(p.rx_ip.into(), rx_sock.local_addr().map_err(s)?.port());
    let tx_sock = udp_in(&p.tx_ns, p.tx_ip)?;
    let sch2 = *sch;
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let done2 = done.clone();
    Ok(pair(
        move || {
            let Ok(rt) = runtime() else { return 0 };
            rt.block_on(async move {
                let Ok(udp) = tokio::net::UdpSocket::from_std(tx_sock) else { return 0 };
                let cfg = kcp_config();
                let connect = tokio_kcp::KcpStream::connect_with_socket(&cfg, udp, to);
                let Ok(Ok(mut st)) = tokio::time::timeout(left(&sch2), connect).await else {
                    return 0;
                };
                let mut msgs = generator(sch2);
                let mut sent = 0;
                while let Ok(Some(m)) = tokio::time::timeout(left(&sch2), msgs.recv()).await {
                    // KCP's send waits for window space; it must not outlive the deadline.
                    if !matches!(tokio::time::timeout(left(&sch2), st.send(&m)).await, Ok(Ok(_))) {
                        break;
                    }
                    sent += 1;
                }
                // Keep the session alive (it retransmits) until the receiver is done.
                while !done.load(std::sync::atomic::Ordering::Relaxed) && Instant::now() < sch2.deadline {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                sent
            })
        },
        move || {
            let Ok(rt) = runtime() else { return Arrivals::new() };
            rt.block_on(async move {
                let mut got = Arrivals::new();
                let Ok(udp) = tokio::net::UdpSocket::from_std(rx_sock) else { return got };
                let Ok(mut l) = tokio_kcp::KcpListener::from_socket(kcp_config(), udp).await else { return got };
                let Ok(Ok((mut st, _))) = tokio::time::timeout(left(&sch2), l.accept()).await else { return got };
                let mut buf = vec![0u8; 65_536];
                while (got.len() as u64) < sch2.count {
                    match tokio::time::timeout(left(&sch2), st.recv(&mut buf)).await {
                        Ok(Ok(n)) => got.extend(sch2.arrival(&buf[..n])),
                        _ => break,
                    }
                }
                done2.store(true, std::sync::atomic::Ordering::Relaxed);
                got
            })
        },
    ))
}

/// quinn over the emulated path; with `bbr`, both ends run quinn's BBR congestion controller
/// instead of its default (NewReno-style cubic).
fn quic(p: &Path, sch: &Schedule, bbr: bool) -> Outcome {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let cert = rcgen::generate_simple_self_signed(vec!["cohort".to_string()]).map_err(s)?;
    let cert_der = rustls::pki_types::CertificateDer::from(cert.cert.der().to_vec());
    let key = rustls::pki_types::PrivatePkcs8KeyDer::from(cert.key_pair.serialize_der());
    let mut server_cfg = quinn::ServerConfig::with_single_cert(vec![cert_der.clone()], key.into()).map_err(s)?;
    let mut roots = rustls::RootCertStore::empty();
    roots.add(cert_der).map_err(s)?;
    let mut client_cfg = quinn::ClientConfig::with_root_certificates(Arc::new(roots)).map_err(s)?;
    if bbr {
        let mut t = quinn::TransportConfig::default();
        t.congestion_controller_factory(Arc::new(quinn::congestion::BbrConfig::default()));
        let t = Arc::new(t);
        client_cfg.transport_config(t.clone());
        server_cfg.transport_config(t);
    }
    let rx_sock = udp_in(&p.rx_ns, p.rx_ip)?;
    let to = SocketAddr::new(p.rx_ip.into(), rx_sock.local_addr().map_err(s)?.port());
    let tx_sock = udp_in(&p.tx_ns, p.tx_ip)?;
    let sch2 = *sch;
    Ok(pair(
        move || {
            let Ok(rt) = runtime() else { return 0 };
            rt.block_on(async move {
                let rtm = Arc::new(quinn::TokioRuntime);
                let Ok(mut ep) = quinn::Endpoint::new(quinn::EndpointConfig::default(), None, tx_sock, rtm) else {
                    return 0;
                };
                ep.set_default_client_config(client_cfg);
                let Ok(connecting) = ep.connect(to, "cohort") else { return 0 };
                let Ok(Ok(conn)) = tokio::time::timeout(left(&sch2), connecting).await else { return 0 };
                let Ok(Ok(mut stream)) = tokio::time::timeout(left(&sch2), conn.open_uni()).await else { return 0 };
                let mut msgs = generator(sch2);
                let mut sent = 0;
                while let Ok(Some(m)) = tokio::time::timeout(left(&sch2), msgs.recv()).await {
                    if !matches!(tokio::time::timeout(left(&sch2), stream.write_all(&m)).await, Ok(Ok(()))) {
                        break;
                    }
                    sent += 1;
                }
                let _ = tokio::time::timeout(left(&sch2), conn.closed()).await;
                sent
            })
        },
        move || {
            let Ok(rt) = runtime() else { return Arrivals::new() };
            rt.block_on(async move {
                let mut got = Arrivals::new();
                let rtm = Arc::new(quinn::TokioRuntime);
                let Ok(ep) = quinn::Endpoint::new(quinn::EndpointConfig::default(), Some(server_cfg), rx_sock, rtm)
                else {
                    return got;
                };
                let Ok(Some(incoming)) = tokio::time::timeout(left(&sch2), ep.accept()).await else { return got };
                let Ok(Ok(conn)) = tokio::time::timeout(left(&sch2), incoming).await else { return got };
                let Ok(Ok(mut stream)) = tokio::time::timeout(left(&sch2), conn.accept_uni()).await else {
                    return got;
                };
                let mut buf = vec![0u8; sch2.size];
                while (got.len() as u64) < sch2.count {
                    match tokio::time::timeout(left(&sch2), stream.read_exact(&mut buf)).await {
                        Ok(Ok(())) => got.extend(sch2.arrival(&buf)),
                        _ => break,
                    }
                }
                conn.close(0u32.into(), b"done");
                got
            })
        },
    ))
}
