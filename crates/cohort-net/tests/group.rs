//! GroupSocket over loopback: each member on its own 127.0.0.x address, broadcasts to
//! 127.255.255.255, all on one free port.

use cohort_net::group::{GroupConfig, GroupError, GroupSocket, Start};
use cohort_proto::group::{Config, Event, State};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, UdpSocket};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

const SECRET: &[u8] = b"group test secret, 32 bytes long";
const WAIT: Option<Duration> = Some(Duration::from_secs(10));

/// A port nothing on loopback uses now.
fn free_port() -> u16 {
    UdpSocket::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn fast() -> Config {
    Config {
        msg_t: Duration::from_millis(10),
        fault_detect_t: Duration::from_millis(1500),
        heartbeat_t: Duration::from_millis(150),
        ..Config::default()
    }
}

fn cfg(pid: u32, port: u16, secret: &[u8]) -> GroupConfig {
    let ip = Ipv4Addr::new(127, 0, 0, u8::try_from(pid).unwrap());
    let mut c = GroupConfig::new(
        secret,
        7,
        pid,
        SocketAddr::new(IpAddr::V4(ip), port),
        SocketAddr::new(IpAddr::V4(Ipv4Addr::new(127, 255, 255, 255)), port),
    );
    c.group = fast();
    c
}

fn open_static(pids: &[u32], port: u16) -> Vec<Arc<GroupSocket>> {
    pids.iter()
        .map(|&p| Arc::new(GroupSocket::open(cfg(p, port, SECRET), Start::Static(pids.to_vec())).unwrap()))
        .collect()
}

/// Answers every request with `pid:data` until `stop`.
fn serve(s: Arc<GroupSocket>, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<u64> {
    serve_with(s, stop, |pid, data| {
        let mut out = format!("{pid}:").into_bytes();
        out.extend_from_slice(data);
        out
    })
}

/// Answers every request with `answer(pid, data)` until `stop`.
fn serve_with(
    s: Arc<GroupSocket>,
    stop: Arc<AtomicBool>,
    answer: impl Fn(u32, &[u8]) -> Vec<u8> + Send + 'static,
) -> std::thread::JoinHandle<u64> {
    std::thread::spawn(move || {
        let mut handled = 0;
        while !stop.load(Ordering::Relaxed) {
            match s.next_request(Some(Duration::from_millis(50))) {
                Ok(r) => {
                    s.reply(r.id, &answer(s.pid(), &r.data)).unwrap();
                    handled += 1;
                }
                Err(GroupError::TimedOut) => {}
                Err(e) => panic!("member {}: {e}", s.pid()),
            }
        }
        handled
    })
}

/// A member's application is woken for what it waits for (a request; its answer leaving), not
/// for every datagram: the replies it overhears and the heartbeats change nothing it waits on.
#[test]
fn overheard_datagrams_do_not_wake_the_application() {
    let port = free_port();
    let g = open_static(&[1, 2, 3, 4], port);
    let stop = Arc::new(AtomicBool::new(false));
    let servers: Vec<_> = g[1..].iter().map(|s| serve(s.clone(), stop.clone())).collect();
    for k in 0..30u32 {
        let r = g[0].request_reply(&[2, 3, 4], &k.to_be_bytes(), Duration::from_millis(20), WAIT).unwrap();
        assert_eq!(r.replies.len(), 3);
    }
    stop.store(true, Ordering::Relaxed);
    servers.into_iter().for_each(|s| assert_eq!(s.join().unwrap(), 30));
    for s in &g[1..] {
        let st = s.stats();
        // Per request: the request, the two other replies, its own reply heard back.
        assert!(st.datagrams_received >= 4 * 30, "{st:?}");
        assert!(st.waiter_wakeups <= 2 * st.member.requests_handled + 10, "{st:?}");
    }
}

#[test]
fn request_reply_reaches_every_member_once() {
    let port = free_port();
    let g = open_static(&[1, 2, 3, 4], port);
    assert!(g[0].is_coordinator());
    let stop = Arc::new(AtomicBool::new(false));
    let servers: Vec<_> = g[1..].iter().map(|s| serve(s.clone(), stop.clone())).collect();
    for k in 0..20u32 {
        let data = k.to_be_bytes();
        let r = g[0].request_reply(&[2, 3, 4], &data, Duration::from_millis(20), WAIT).unwrap();
        assert!(r.failed.is_empty(), "{r:?}");
        assert_eq!(r.replies.len(), 3);
        for (pid, rep) in &r.replies {
            let mut want = format!("{pid}:").into_bytes();
            want.extend_from_slice(&data);
            assert_eq!(rep, &want);
        }
    }
    stop.store(true, Ordering::Relaxed);
    let handled: Vec<u64> = servers.into_iter().map(|h| h.join().unwrap()).collect();
    assert_eq!(handled, vec![20, 20, 20], "each member handles each request exactly once");
    let st = g[0].stats();
    assert_eq!(st.member.requests_sent, 20);
    assert_eq!(st.rejected_frames, 0);
}

#[test]
fn async_request_reply_and_requests() {
    let port = free_port();
    let g = open_static(&[1, 2], port);
    let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
    let (coord, member) = (g[0].clone(), g[1].clone());
    rt.block_on(async move {
        let serve = async {
            let r = member.next_request_async().await.unwrap();
            member.reply(r.id, b"pong").unwrap();
        };
        let ask = coord.request_reply_async(&[2], b"ping", Duration::from_millis(20));
        let (_, replies) = tokio::join!(serve, ask);
        assert_eq!(replies.unwrap().replies.get(&2).map(Vec::as_slice), Some(&b"pong"[..]));
    });
}

/// A member that closes its socket right after replying: the reply still reaches the
/// coordinator, whether it was due at once (the first slot) or waited for its slot (the
/// second, closed before the first member answered). Before, the socket's driver stopped
/// with the reply unsent and the coordinator counted the member failed after `FaultDetectT`.
#[test]
fn a_reply_made_just_before_closing_is_not_lost() {
    for round in 0..5 {
        let port = free_port();
        let mut g = open_static(&[1, 2, 3], port);
        let third = g.pop().unwrap();
        let second = g.pop().unwrap();
        let coord = g.pop().unwrap();
        let answering = std::thread::spawn(move || {
            for m in [third, second] {
                let r = m.next_request(WAIT).unwrap();
                m.reply(r.id, &m.pid().to_be_bytes()).unwrap();
                drop(Arc::into_inner(m).expect("the only handle"));
            }
        });
        let r = coord.request_reply(&[2, 3], b"close after", Duration::from_millis(20), WAIT).unwrap();
        answering.join().unwrap();
        assert_eq!(r.failed, Vec::<u32>::new(), "round {round}");
        let got: Vec<u32> = r.replies.keys().copied().collect();
        assert_eq!(got, vec![2, 3], "round {round}");
    }
}

#[test]
fn join_leave_and_membership_events() {
    let port = free_port();
    let g = open_static(&[1, 2], port);
    let joiner = Arc::new(GroupSocket::open(cfg(5, port, SECRET), Start::Outside { incarnation: 1 }).unwrap());
    assert_eq!(joiner.state(), State::Left);
    let j = joiner.clone();
    let t = std::thread::spawn(move || j.join(WAIT));
    // Poll until the joiner has asked (its JOIN state is set by then; polls are cheap).
    let mut added = Vec::new();
    for _ in 0..20 {
        added = g[0].check_joins(Duration::from_millis(50), WAIT).unwrap();
        if !added.is_empty() {
            break;
        }
    }
    assert_eq!(added, vec![5]);
    assert_eq!(t.join().unwrap().unwrap(), vec![1, 2, 5]);
    assert_eq!(g[0].members(), vec![1, 2, 5]);
    // The coordinator reported the change.
    let mut saw_change = false;
    while let Ok(ev) = g[0].next_event(Some(Duration::from_millis(10))) {
        saw_change |= matches!(ev, Event::GroupChanged { ref members } if members == &[1, 2, 5]);
    }
    assert!(saw_change);

    let j = joiner.clone();
    let t = std::thread::spawn(move || j.leave(WAIT));
    let mut left = Vec::new();
    for _ in 0..20 {
        left = g[0].check_leaves(Duration::from_millis(50), WAIT).unwrap();
        if !left.is_empty() {
            break;
        }
    }
    assert_eq!(left, vec![5]);
    t.join().unwrap().unwrap();
    assert_eq!(joiner.state(), State::Left);
    assert_eq!(g[0].members(), vec![1, 2]);
}

#[test]
fn coordinator_crash_elects_the_next_ticket() {
    let port = free_port();
    let mut g = open_static(&[1, 2, 3], port);
    let coord = g.remove(0);
    Arc::try_unwrap(coord).unwrap().close();
    let mut became = false;
    while let Ok(ev) = g[0].next_event(Some(Duration::from_secs(5))) {
        if matches!(ev, Event::BecameCoord { .. }) {
            became = true;
            break;
        }
    }
    assert!(became, "pid 2 takes over");
    // pid 3's own detector fires at about the same time.
    for _ in 0..100 {
        if g[1].coordinator() == Some(2) {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(g[1].coordinator(), Some(2));
    let stop = Arc::new(AtomicBool::new(false));
    let server = serve(g[1].clone(), stop.clone());
    let r = g[0].request_reply(&[3], b"x", Duration::from_millis(20), WAIT).unwrap();
    assert_eq!(r.replies.len(), 1);
    stop.store(true, Ordering::Relaxed);
    server.join().unwrap();
}

#[test]
fn outsiders_and_garbage_are_dropped_and_counted() {
    let port = free_port();
    let g = open_static(&[1, 2], port);
    // Another team secret: its join is never heard, nor its heartbeats.
    let other = b"some other secret of 32 bytes!!!";
    let intruder = GroupSocket::open(cfg(9, port, other), Start::Outside { incarnation: 1 }).unwrap();
    let loner = GroupSocket::open(cfg(8, port, other), Start::Static(vec![8])).unwrap();
    assert!(matches!(intruder.join(Some(Duration::from_millis(300))), Err(GroupError::TimedOut)));
    // Garbage on the broadcast port.
    let raw = UdpSocket::bind("127.0.0.20:0").unwrap();
    raw.set_broadcast(true).unwrap();
    raw.send_to(b"not a frame", ("127.255.255.255", port)).unwrap();
    let added = g[0].check_joins(Duration::from_millis(100), WAIT).unwrap();
    assert!(added.is_empty());
    assert_eq!(g[0].members(), vec![1, 2]);
    let st = g[0].stats();
    assert!(st.frames.truncated >= 1 && st.frames.auth_failed >= 1, "{st:?}");
    assert_eq!(loner.members(), vec![8]);
    assert!(intruder.stats().rejected_frames >= 1, "the intruder cannot read the team either");
}

#[test]
fn bad_configurations_are_refused() {
    let mut c = cfg(1, free_port(), SECRET);
    c.broadcast.set_port(c.local.port() + 1);
    assert!(matches!(GroupSocket::open(c, Start::Static(vec![1])), Err(GroupError::Config(_))));
    let c = cfg(1, free_port(), b"short");
    assert!(matches!(GroupSocket::open(c, Start::Static(vec![1])), Err(GroupError::Config(_))));
    let c = cfg(1, free_port(), SECRET);
    assert!(matches!(GroupSocket::open(c, Start::Static(vec![2, 3])), Err(GroupError::Init(_))));
    let g = open_static(&[1, 2], free_port());
    assert!(matches!(
        g[1].request_reply(&[1], b"x", Duration::ZERO, WAIT),
        Err(GroupError::Request(cohort_proto::group::RequestError::NotCoordinator))
    ));
}

/// A second socket with a pid already running in the group on this host is refused with a
/// clear error; once the first is gone the pid is free again, and the restarted process (a new
/// life, packet numbers from 0 again) is heard by members that heard its former life.
#[test]
fn a_pid_in_use_is_refused_and_a_restarted_member_is_heard() {
    let port = free_port();
    let g = open_static(&[1, 2], port);
    let err = GroupSocket::open(cfg(2, port, SECRET), Start::Static(vec![1, 2])).unwrap_err();
    assert!(matches!(err, GroupError::PidInUse { team: 7, pid: 2 }), "{err:?}");
    assert!(err.to_string().contains("already in use"));
    // Another group (another broadcast port) may use the same pid on this host.
    drop(GroupSocket::open(cfg(2, free_port(), SECRET), Start::Static(vec![2])).unwrap());
    let stop = Arc::new(AtomicBool::new(false));
    let h = serve(g[1].clone(), stop.clone());
    assert_eq!(g[0].request_reply(&[2], b"a", Duration::ZERO, WAIT).unwrap().replies.len(), 1);
    stop.store(true, Ordering::Relaxed);
    h.join().unwrap();
    let mut g = g;
    drop(g.pop());
    // The restart: a new life of pid 2 joins; the coordinator hears it at once.
    let restarted = Arc::new(GroupSocket::open(cfg(2, port, SECRET), Start::Outside { incarnation: 1 }).unwrap());
    let j = restarted.clone();
    let t = std::thread::spawn(move || j.join(WAIT));
    let mut added = Vec::new();
    for _ in 0..40 {
        added = g[0].check_joins(Duration::from_millis(50), WAIT).unwrap();
        if !added.is_empty() {
            break;
        }
    }
    assert_eq!(added, vec![2]);
    assert_eq!(t.join().unwrap().unwrap(), vec![1, 2]);
    let stop = Arc::new(AtomicBool::new(false));
    let h = serve(restarted.clone(), stop.clone());
    assert_eq!(g[0].request_reply(&[2], b"b", Duration::ZERO, WAIT).unwrap().replies.len(), 1);
    stop.store(true, Ordering::Relaxed);
    h.join().unwrap();
    let frames = g[0].stats().frames;
    assert_eq!(frames.stale_life + frames.too_old + frames.replayed, 0, "{frames:?}");
    assert_eq!(frames.new_lives, 1, "the restart is a new life of pid 2");
}

/// A payload past one frame would be IP-fragmented, and a broadcast survives that only if no
/// fragment is lost (802.11 does not retry broadcasts): it is refused with a typed error that
/// says what fits, unless the group allows fragmentation, and then each such datagram is counted.
#[test]
fn payloads_past_one_frame_are_refused_unless_fragmentation_is_allowed() {
    let port = free_port();
    let g = open_static(&[1, 2], port);
    let stop = Arc::new(AtomicBool::new(false));
    // Replies as long as fits (the mask of the replies a member overheard is counted at its
    // widest for the group's pids).
    let reply = cohort_net::group::max_unfragmented_reply(2);
    let h = serve_with(g[1].clone(), stop.clone(), move |_, _| vec![9u8; reply]);
    let fits = cohort_net::group::max_unfragmented_payload(2);
    assert_eq!(g[0].request_reply(&[2], &vec![7u8; fits], Duration::ZERO, WAIT).unwrap().replies[&2].len(), reply);
    match g[0].request_reply(&[2], &vec![7u8; fits + 1], Duration::ZERO, WAIT) {
        Err(GroupError::BeyondOneFrame { len, max }) => assert_eq!((len, max), (fits + 1, fits)),
        other => panic!("{other:?}"),
    }
    assert_eq!(g[0].stats().fragmented_datagrams, 0, "nothing past one frame left");
    stop.store(true, Ordering::Relaxed);
    h.join().unwrap();
    drop(g);
    let port = free_port();
    let open = |p: u32| {
        let mut c = cfg(p, port, SECRET);
        c.allow_fragmentation = true;
        Arc::new(GroupSocket::open(c, Start::Static(vec![1, 2])).unwrap())
    };
    let g = [open(1), open(2)];
    let stop = Arc::new(AtomicBool::new(false));
    let h = serve(g[1].clone(), stop.clone());
    g[0].request_reply(&[2], &vec![7u8; fits + 1], Duration::ZERO, WAIT).unwrap();
    assert_eq!(g[0].stats().fragmented_datagrams, 1, "allowed, and counted");
    stop.store(true, Ordering::Relaxed);
    h.join().unwrap();
}
