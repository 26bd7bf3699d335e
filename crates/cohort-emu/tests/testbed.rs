//! Real testbeds: namespaces, veth pairs and the emulator, with kernel UDP, TCP and MPTCP
//! across them. These need root (CI runs as root); every run is torn down by `Drop`, also when
//! an assertion fails, and each test is bounded in time.

use cohort_emu::testbed::{self, NS_PREFIX};
use cohort_emu::{EmuMode, EmuOptions, Testbed, TestbedScenario};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// `down_all` removes every run, so tests that bring runs up hold this.
static SERIAL: Mutex<()> = Mutex::new(());

fn run_name(tag: &str) -> String {
    format!("t{}{tag}", std::process::id() % 100_000)
}

fn up(text: &str, tag: &str) -> Testbed {
    let s = TestbedScenario::parse(text).unwrap();
    Testbed::up(&s, &run_name(tag), EmuMode::Thread, EmuOptions { rt_priority: None, ..EmuOptions::default() })
        .unwrap_or_else(|e| panic!("testbed up: {e}"))
}

const P2P: &str = r#"
name = "p2p"
mode = "p2p"
nodes = ["a", "b"]
[[links]]
a = "a"
b = "b"
owd_ms = 20.0
rate_mbps = 50.0
"#;

fn udp_in(tb: &Testbed, node: &str, ip: std::net::Ipv4Addr) -> UdpSocket {
    let s = tb.in_node(node, move || UdpSocket::bind((ip, 0))).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
    s
}

#[test]
fn p2p_udp_and_tcp_cross_the_emulated_link() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let tb = up(P2P, "p");
    let (a_ip, b_ip) = (tb.addr("a", 0).unwrap(), tb.addr("b", 0).unwrap());
    assert_eq!((a_ip.to_string().as_str(), b_ip.to_string().as_str()), ("10.77.0.1", "10.77.0.2"));

    // UDP: never earlier than the configured one-way delay (ARP is resolved by the first one).
    let a = udp_in(&tb, "a", a_ip);
    let b = udp_in(&tb, "b", b_ip);
    let b_addr = b.local_addr().unwrap();
    let mut buf = [0u8; 2048];
    for i in 0..5u8 {
        let t = Instant::now();
        a.send_to(&[i; 600], b_addr).unwrap();
        let (n, from) = b.recv_from(&mut buf).unwrap();
        assert_eq!((n, buf[0], from), (600, i, a.local_addr().unwrap()));
        assert!(t.elapsed() >= Duration::from_millis(20), "delivered before the link's delay: {:?}", t.elapsed());
    }

    // TCP: a 2 MB transfer arrives intact through the emulator.
    let listener = tb.in_node("b", move || TcpListener::bind((b_ip, 0))).unwrap();
    let to: SocketAddr = listener.local_addr().unwrap();
    let data: Vec<u8> = (0..2_000_000u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8).collect();
    let sender = {
        let data = data.clone();
        let s = tb.in_node("a", move || Ok(socket_unconnected())).unwrap();
        std::thread::spawn(move || {
            let mut c = connect(s, to);
            c.write_all(&data).unwrap();
        })
    };
    let (mut conn, _) = listener.accept().unwrap();
    conn.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut got = Vec::new();
    conn.read_to_end(&mut got).unwrap();
    sender.join().unwrap();
    assert!(got == data, "TCP stream corrupted or cut: {} of {} bytes", got.len(), data.len());

    let st = tb.status().expect("the emulator reports its status");
    let ab = &st.fabric.links[0];
    assert_eq!((ab.from.as_str(), ab.to.as_str()), ("a", "b"));
    assert!(ab.delivered >= 2_000_000 / 1500, "{ab:?}");
    assert_eq!(st.oversize, 0, "offloads must be off: no frame above the MTU");
    tb.down().unwrap();
    assert!(!cohort_emu::netns::exists(&testbed::node_ns(&run_name("p"), "a")));
}

/// A TCP socket created in the caller's namespace, connected later from another thread.
fn socket_unconnected() -> socket2::Socket {
    socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap()
}

fn connect(s: socket2::Socket, to: SocketAddr) -> TcpStream {
    s.connect_timeout(&to.into(), Duration::from_secs(5)).unwrap();
    s.into()
}

#[test]
fn lossy_link_loses_about_what_it_is_told() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let tb = up(&P2P.replace("owd_ms = 20.0", "owd_ms = 1.0\nloss = 0.3").replace("nodes =", "seed = 3\nnodes ="), "l");
    let a = udp_in(&tb, "a", tb.addr("a", 0).unwrap());
    let b = udp_in(&tb, "b", tb.addr("b", 0).unwrap());
    b.set_read_timeout(Some(Duration::from_millis(300))).unwrap();
    // Resolve ARP first (it can be lost too): retry until one datagram gets through.
    let mut buf = [0u8; 1500];
    let b_addr = b.local_addr().unwrap();
    while {
        a.send_to(b"arp", b_addr).unwrap();
        b.recv_from(&mut buf).is_err()
    } {}
    let sent = 2000;
    // Read while sending, so the receiver's socket buffer never overflows.
    let reader = std::thread::spawn(move || {
        let mut got = 0;
        let mut buf = [0u8; 64];
        while b.recv_from(&mut buf).is_ok() {
            got += 1;
        }
        got
    });
    for i in 0..sent {
        a.send_to(&(i as u32).to_be_bytes(), b_addr).unwrap();
        if i % 20 == 0 {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    let got = reader.join().unwrap();
    let loss = 1.0 - got as f64 / sent as f64;
    // 2000 Bernoulli(0.3) draws: a 6-sigma band is ±0.06.
    assert!((loss - 0.3).abs() < 0.06, "measured loss {loss}");
    let st = tb.status().unwrap();
    assert!(st.fabric.links[0].lost > 0);
}

const WIFI: &str = r#"
name = "wifi"
mode = "wifi"
nodes = ["leader", "f1", "f2", "f3"]
[wifi]
phy = "a"
data_mbps = 54.0
"#;

#[test]
fn wifi_broadcast_reaches_every_station_and_status_counts_per_ac() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let tb = up(WIFI, "w");
    let leader = tb
        .in_node("leader", || {
            let s = UdpSocket::bind(("0.0.0.0", 0))?;
            s.set_broadcast(true)?;
            Ok(s)
        })
        .unwrap();
    let followers: Vec<UdpSocket> = ["f1", "f2", "f3"]
        .iter()
        .map(|f| {
            let s = tb.in_node(f, || UdpSocket::bind(("0.0.0.0", 47_999))).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
            s
        })
        .collect();
    // EF-marked (AC_VO) command to everyone.
    socket2::SockRef::from(&leader).set_tos_v4(0xb8).unwrap();
    leader.send_to(b"formation 3", ("10.78.0.255", 47_999)).unwrap();
    for f in &followers {
        let mut buf = [0u8; 64];
        let (n, from) = f.recv_from(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"formation 3");
        assert_eq!(from.ip().to_string(), "10.78.0.1");
    }
    // A unicast reply goes back (ARP over the channel first).
    followers[1]
        .send_to(b"ack", leader.local_addr().map(|a| SocketAddr::from(([10, 78, 0, 1], a.port()))).unwrap())
        .unwrap();
    leader.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
    let mut buf = [0u8; 16];
    let (n, _) = leader.recv_from(&mut buf).unwrap();
    assert_eq!(&buf[..n], b"ack");
    std::thread::sleep(Duration::from_millis(300));
    let st = tb.status().unwrap();
    let vo = st.fabric.stations[0].acs.iter().find(|a| a.ac == "VO").unwrap();
    assert!(vo.successes >= 1, "the EF broadcast went out on AC_VO: {st:#?}");
    assert!(st.fabric.channel_busy_ms > 0.0);

    // Filled neighbour tables: every other station, permanent, with its real MAC.
    tb.populate_neighbors().unwrap();
    let ns = tb.ns("f2").unwrap();
    let table = cohort_emu::netns::ip(&["-n", &ns, "neigh", "show", "dev", "wlan0"]).unwrap();
    for peer in ["10.78.0.1", "10.78.0.2", "10.78.0.4"] {
        let line = table.lines().find(|l| l.starts_with(&format!("{peer} "))).unwrap_or_else(|| panic!("{table}"));
        assert!(line.contains("PERMANENT"), "{line}");
    }
    assert!(!table.contains("10.78.0.3 "), "not itself: {table}");
    let mac = tb.attachments().iter().find(|a| a.addr.to_string() == "10.78.0.1").unwrap().port.mac;
    let want = mac.iter().map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(":");
    assert!(table.contains(&want), "{table} lacks {want}");
}

#[test]
fn mptcp_uses_both_paths_through_the_emulator() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let text =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../scenarios/testbed_mptcp.toml")).unwrap();
    let tb = up(&text, "m");
    let (a_ns, b_ns) = (tb.ns("a").unwrap(), tb.ns("b").unwrap());
    let ip = |args: &[&str]| cohort_emu::netns::ip(args).unwrap();
    ip(&["-n", &b_ns, "mptcp", "limits", "set", "subflow", "2", "add_addr_accepted", "2"]);
    ip(&["-n", &a_ns, "mptcp", "limits", "set", "subflow", "2", "add_addr_accepted", "2"]);
    // The server announces its second address; the client opens a subflow to it over eth1.
    ip(&["-n", &b_ns, "mptcp", "endpoint", "add", "10.77.1.2", "dev", "eth1", "signal"]);

    const IPPROTO_MPTCP: i32 = 262;
    let mptcp = || {
        socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, Some(socket2::Protocol::from(IPPROTO_MPTCP)))
    };
    // Bound to every address: the second subflow's MP_JOIN arrives at 10.77.1.2.
    let listener = tb
        .in_node("b", || {
            let s = mptcp()?;
            s.bind(&SocketAddr::from(([0, 0, 0, 0], 0)).into())?;
            s.listen(4)?;
            Ok(s)
        })
        .unwrap();
    let port = listener.local_addr().unwrap().as_socket().unwrap().port();
    let to = SocketAddr::from((tb.addr("b", 0).unwrap(), port));
    let client = tb.in_node("a", mptcp).unwrap();
    let total = 6_000_000usize;
    let sender = std::thread::spawn(move || {
        let mut c = connect(client, to);
        let chunk = vec![7u8; 64 * 1024];
        let mut left = total;
        while left > 0 {
            let n = left.min(chunk.len());
            c.write_all(&chunk[..n]).unwrap();
            left -= n;
        }
    });
    let (conn, _) = listener.accept().unwrap();
    let mut conn: TcpStream = conn.into();
    conn.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut got = 0usize;
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = conn.read(&mut buf).unwrap();
        if n == 0 {
            break;
        }
        got += n;
    }
    sender.join().unwrap();
    assert_eq!(got, total);
    let st = tb.status().unwrap();
    let carried = |link: usize| st.fabric.links.iter().filter(|l| l.link == link).map(|l| l.delivered).sum::<u64>();
    // 6 MB is about 4000 full frames; each path must have carried a real share of them.
    assert!(carried(0) > 300 && carried(1) > 300, "frames per path: {} and {}", carried(0), carried(1));
}

/// A trace started on a running testbed: the link goes out (datagrams are lost and counted),
/// comes back at its next step with the step's delay, and a bad request is a typed error.
#[test]
fn a_link_follows_a_trace_started_on_a_running_testbed() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let tb = up(P2P, "tr");
    let (a_ip, b_ip) = (tb.addr("a", 0).unwrap(), tb.addr("b", 0).unwrap());
    let a = udp_in(&tb, "a", a_ip);
    let b = udp_in(&tb, "b", b_ip);
    b.set_read_timeout(Some(Duration::from_millis(400))).unwrap();
    let to = b.local_addr().unwrap();
    let mut buf = [0u8; 256];
    // Resolve ARP first, on the clean link.
    a.send_to(b"arp", to).unwrap();
    b.recv_from(&mut buf).unwrap();
    let ms = Duration::from_millis;
    let back = cohort_medium::link::LinkParams::clean(ms(60), 10_000_000);
    tb.play_trace(0, vec![(Duration::ZERO, None), (ms(500), Some(back))]).unwrap();
    std::thread::sleep(ms(50));
    for _ in 0..5 {
        a.send_to(b"while out", to).unwrap();
    }
    assert!(b.recv_from(&mut buf).is_err(), "nothing crosses a link that is out");
    std::thread::sleep(ms(200));
    let t = Instant::now();
    a.send_to(b"back", to).unwrap();
    let (n, _) = b.recv_from(&mut buf).unwrap();
    assert_eq!(&buf[..n], b"back");
    assert!(t.elapsed() >= ms(60), "the step's delay applies: {:?}", t.elapsed());
    let st = tb.status().unwrap();
    assert!(st.fabric.counters.outage_drops >= 5, "{:?}", st.fabric.counters);
    assert_eq!((st.fabric.links[0].out, st.fabric.links[0].rate_bps), (false, 10_000_000));
    let e = tb.play_trace(7, vec![]).unwrap_err();
    assert!(e.to_string().contains("link 7"), "{e}");
    let bad = cohort_medium::link::LinkParams { rate_bps: 0, ..back };
    assert!(tb.play_trace(0, vec![(Duration::ZERO, Some(bad))]).is_err());
}

#[test]
fn down_all_removes_what_a_crashed_run_left() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let tb = up(P2P, "c");
    let run = tb.run_name().to_string();
    // A crash: the process forgets the run without tearing it down.
    tb.detach();
    assert!(testbed::runs().unwrap().contains(&run));
    // Also a stray namespace with no record at all.
    cohort_emu::netns::add(&format!("{NS_PREFIX}{run}x-stray")).unwrap();
    let removed = testbed::down_all().unwrap();
    assert!(removed.contains(&run), "{removed:?}");
    let left: Vec<String> =
        cohort_emu::netns::list().unwrap().into_iter().filter(|n| n.starts_with(NS_PREFIX)).collect();
    assert!(left.is_empty(), "left behind: {left:?}");
    assert!(testbed::runs().unwrap().is_empty());
}

#[test]
fn a_run_name_cannot_be_used_twice_and_bad_names_are_refused() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let tb = up(P2P, "d");
    let s = TestbedScenario::parse(P2P).unwrap();
    let e = Testbed::up(&s, tb.run_name(), EmuMode::Thread, EmuOptions::default()).unwrap_err();
    assert!(e.to_string().contains("already up"), "{e}");
    let e = Testbed::up(&s, "Bad Name", EmuMode::Thread, EmuOptions::default()).unwrap_err();
    assert!(e.to_string().contains("run name"), "{e}");
    assert!(tb.ns("nobody").is_err());
}

#[test]
fn a_busy_polling_pinned_emulator_delivers_on_time_and_says_how_it_runs() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let s = TestbedScenario::parse(P2P).unwrap();
    let opts = EmuOptions { busy_poll: true, cpu: Some(0), lock_memory: true, ..EmuOptions::default() };
    let tb = Testbed::up(&s, &run_name("bp"), EmuMode::Thread, opts).unwrap_or_else(|e| panic!("testbed up: {e}"));
    let (a_ip, b_ip) = (tb.addr("a", 0).unwrap(), tb.addr("b", 0).unwrap());
    let a = udp_in(&tb, "a", a_ip);
    let b = udp_in(&tb, "b", b_ip);
    let b_addr = b.local_addr().unwrap();
    let mut buf = [0u8; 2048];
    // Spaced out so that the loop rests between them: every one still arrives, in order,
    // never before the link's delay.
    for i in 0..20u8 {
        let t = Instant::now();
        a.send_to(&[i; 300], b_addr).unwrap();
        let (n, _) = b.recv_from(&mut buf).unwrap();
        assert_eq!((n, buf[0]), (300, i));
        assert!(t.elapsed() >= Duration::from_millis(20), "delivered before the link's delay: {:?}", t.elapsed());
        std::thread::sleep(Duration::from_millis(3));
    }
    let st = tb.status().expect("a status");
    // As it came out, not as asked: root may lock memory and pin; the mode is the loop's.
    assert!(st.busy_poll);
    assert_eq!(st.cpu, Some(0));
    assert!(st.memory_locked);
    assert!((0.0..=1.0).contains(&st.steal_share));
    assert!(st.fabric.counters.frames_out >= 20);
    tb.down().unwrap();
}
