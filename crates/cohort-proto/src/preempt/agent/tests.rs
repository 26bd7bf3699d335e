use super::*;
use crate::Dest;
use std::net::Ipv4Addr;

const PERIOD: Duration = Duration::from_nanos(33_333_333);

fn key(proto: u8, sport: u16, dport: u16) -> FlowKey {
    FlowKey {
        proto,
        src: SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 2), sport),
        dst: SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 1), dport),
    }
}

fn agent(mode: Mode) -> Agent {
    Agent::new(AgentConfig { mode, ..AgentConfig::default() }, 1, 1, &[1], Instant::ZERO).unwrap()
}

fn actions(a: &mut Agent) -> Vec<Action> {
    std::iter::from_fn(|| a.poll_action()).collect()
}

/// A 12 KB perception as nine datagrams 100 µs apart, starting at `t`.
fn perception(a: &mut Agent, k: FlowKey, t: Instant, dscp: u8) {
    for i in 0..9 {
        a.on_packet(t + Duration::from_micros(100 * i), k, 1400, dscp);
    }
}

/// A TCP upload: `n` full segments 120 µs apart from `t`.
fn upload(a: &mut Agent, k: FlowKey, t: Instant, n: u64) {
    for i in 0..n {
        a.on_packet(t + Duration::from_micros(120 * i), k, 1500, 0);
    }
}

#[test]
fn an_unmarked_periodic_flow_is_marked_ef_and_an_upload_becomes_bulk() {
    let mut a = agent(Mode::Mark);
    let ctl = key(PROTO_UDP, 40000, 9000);
    let bulk = key(PROTO_TCP, 40001, 5001);
    let mut marked_at = None;
    for k in 0..40u32 {
        let t = Instant::ZERO + PERIOD * k;
        perception(&mut a, ctl, t, 0);
        if actions(&mut a).contains(&Action::Set(ctl, Marking::Ef)) {
            marked_at.get_or_insert(k);
        }
    }
    let k = marked_at.expect("the control flow was never marked");
    // A verdict needs `min_samples` finished messages; it comes with the next one.
    assert!(k as usize >= ClassifierConfig::default().min_samples, "marked after only {k} messages");
    assert_eq!(a.flows().find(|f| f.key == ctl).unwrap().verdict, Verdict::Ls);
    upload(&mut a, bulk, Instant::ZERO + PERIOD * 41, 60);
    assert_eq!(actions(&mut a), vec![Action::Set(bulk, Marking::Bulk)], "64 KB into one burst makes it bulk");
    assert_eq!(a.stats().flows_marked, 1);
    // Mark mode never touches the gate.
    assert!(!a.is_held());
}

#[test]
fn an_aperiodic_small_flow_is_bulk_and_an_app_marked_flow_is_left_alone() {
    let mut a = agent(Mode::Mark);
    let chatty = key(PROTO_UDP, 40002, 9001);
    let voice = key(PROTO_UDP, 40003, 9002);
    // Gaps of 10, 47, 13, 90, ... ms: small but irregular.
    let mut t = Instant::ZERO;
    for i in 0..30u64 {
        a.on_packet(t, chatty, 200, 0);
        t += Duration::from_millis(10 + (i * 37) % 83);
    }
    assert_eq!(a.flows().find(|f| f.key == chatty).unwrap().verdict, Verdict::Bulk);
    for k in 0..3u32 {
        perception(&mut a, voice, t + PERIOD * k, 46);
    }
    let f = a.flows().find(|f| f.key == voice).unwrap();
    assert_eq!(f.verdict, Verdict::MarkedByApp);
    assert_eq!(f.marking, Marking::Untouched, "its application marks it; the kernel need not");
    assert!(!actions(&mut a).iter().any(|x| matches!(x, Action::Set(k, _) if *k == voice)));
}

#[test]
fn overrides_and_the_agents_own_port_win() {
    let mut a = Agent::new(
        AgentConfig {
            mode: Mode::Mark,
            overrides: vec![(9000, Override::Ls), (5001, Override::Bulk)],
            ..Default::default()
        },
        1,
        1,
        &[1],
        Instant::ZERO,
    )
    .unwrap();
    a.on_packet(Instant::ZERO, key(PROTO_UDP, 1, 9000), 100, 0);
    a.on_packet(Instant::ZERO, key(PROTO_TCP, 2, 5001), 100, 0);
    a.on_packet(Instant::ZERO, key(PROTO_UDP, 7470, 7470), 100, 0);
    assert_eq!(
        actions(&mut a),
        vec![Action::Set(key(PROTO_UDP, 1, 9000), Marking::Ef), Action::Set(key(PROTO_TCP, 2, 5001), Marking::Bulk)]
    );
    assert_eq!(a.flows().count(), 2, "the agents' own datagrams are not a flow");
}

#[test]
fn a_silent_flow_is_forgotten_and_its_marking_removed() {
    let mut a = agent(Mode::Mark);
    let k = key(PROTO_UDP, 1, 9000);
    for i in 0..12u32 {
        perception(&mut a, k, Instant::ZERO + PERIOD * i, 0);
    }
    assert!(actions(&mut a).contains(&Action::Set(k, Marking::Ef)));
    a.handle_timeout(Instant::ZERO + PERIOD * 12 + AgentConfig::default().flow_idle);
    assert_eq!(actions(&mut a), vec![Action::Set(k, Marking::Untouched)]);
    assert_eq!(a.flows().count(), 0);
}

/// Runs a local-mode agent over a learned 30 Hz flow and records the gate's state at each
/// step of 100 µs.
#[test]
fn local_preemption_holds_the_bulk_before_each_control_message_and_releases_after() {
    let mut a = agent(Mode::Local);
    let ctl = key(PROTO_UDP, 40000, 9000);
    let lead = a.config().lead;
    let mut held = false;
    let mut t = Instant::ZERO;
    let step = Duration::from_micros(100);
    let mut next_msg = 0u32;
    let (mut holds, mut covered, mut messages_after_learning) = (0, 0, 0);
    let end = Instant::ZERO + PERIOD * 60;
    while t < end {
        if t >= Instant::ZERO + PERIOD * next_msg {
            // Past learning, every message must find the gate already held.
            if next_msg >= 20 {
                messages_after_learning += 1;
                if held {
                    covered += 1;
                }
            }
            perception(&mut a, ctl, t, if next_msg > 12 { 46 } else { 0 });
            next_msg += 1;
        }
        a.handle_timeout(t);
        for x in actions(&mut a) {
            match x {
                Action::Hold => {
                    assert!(!held, "hold twice");
                    held = true;
                    holds += 1;
                }
                Action::Release => {
                    assert!(held, "release of an open gate");
                    held = false;
                }
                Action::Set(..) => {}
            }
        }
        let next = a.poll_timeout(t).max(t + Duration::from_nanos(1));
        t = next.min(t + step);
    }
    assert_eq!(covered, messages_after_learning, "every learned message found the bulk held");
    assert!(holds >= 40, "one hold per period: {holds}");
    // Between windows the gate is open most of the time.
    let model = a.controller().flow(0).unwrap();
    let window = 2.0 * 2.0 * model.sigma().unwrap().as_secs_f64() + 0.002 + lead.as_secs_f64();
    assert!(window < PERIOD.as_secs_f64() / 2.0, "windows of {window} s leave the bulk little room");
    assert_eq!(a.stats().window_holds, holds);
}

/// One millisecond of a team whose robots all have bulk waiting: timers, every datagram
/// delivered at once among the robots `alive` says are up, and the gates' actions applied to
/// `open` (a robot that is down sends nothing, whatever its gate said).
fn team_step(agents: &mut [Agent], open: &mut [bool], t: Instant, alive: impl Fn(usize) -> bool) {
    let mut buf = [0u8; 256];
    for (i, a) in agents.iter_mut().enumerate().filter(|(i, _)| alive(*i)) {
        a.on_backlog(t, 10);
        if open[i] {
            a.on_packet(t, key(PROTO_TCP, 40000 + i as u16, 5001), 1500, 0);
        }
        a.handle_timeout(t);
    }
    let mut wire = Vec::new();
    for (i, a) in agents.iter_mut().enumerate().filter(|(i, _)| alive(*i)) {
        while let Some(tx) = a.poll_transmit(t, &mut buf) {
            wire.push((i, a.id(), tx.dest, buf[..tx.len].to_vec()));
        }
    }
    for (from_i, from, dest, bytes) in wire {
        for (i, a) in agents.iter_mut().enumerate().filter(|(i, _)| alive(*i)) {
            let to_me = match dest {
                Dest::Unicast(d) => d == a.id(),
                Dest::Broadcast => i != from_i,
            };
            if to_me {
                a.handle_datagram(t, from, &bytes);
            }
        }
    }
    for (i, a) in agents.iter_mut().enumerate() {
        for x in actions(a) {
            match x {
                Action::Hold => open[i] = false,
                Action::Release => open[i] = true,
                Action::Set(..) => {}
            }
        }
        if !alive(i) {
            open[i] = false;
        }
    }
}

/// Two robots with bulk and one arbiter, their datagrams delivered at once: never both open.
#[test]
fn global_preemption_lets_one_robot_send_bulk_at_a_time_and_each_gets_its_turn() {
    let cfg = AgentConfig {
        mode: Mode::Global,
        token: Config { timeslice: Duration::from_millis(500), ..Config::default() },
        ..AgentConfig::default()
    };
    let members = [1, 2];
    let mut agents: Vec<Agent> =
        members.iter().map(|&id| Agent::new(cfg.clone(), id, 1, &members, Instant::ZERO).unwrap()).collect();
    let mut open = [false; 2];
    let mut open_time = [Duration::ZERO; 2];
    let step = Duration::from_millis(1);
    let mut t = Instant::ZERO;
    for _ in 0..6000 {
        team_step(&mut agents, &mut open, t, |_| true);
        for i in 0..2 {
            if open[i] {
                open_time[i] += step;
            }
        }
        assert!(!(open[0] && open[1]), "two robots sent bulk at once at {t:?}");
        t += step;
    }
    for (i, d) in open_time.iter().enumerate() {
        assert!(*d > Duration::from_secs(1), "robot {} sent bulk for only {d:?} of 6 s", i + 1);
    }
}

/// Three robots with bulk; the arbiter's robot crashes and, after the group layer's fault
/// detection, the next robot becomes coordinator and hosts a new arbiter. Never two survivors
/// open at once, and both survivors send bulk after the crash.
#[test]
fn the_arbiter_moves_with_the_coordinator_and_never_lets_two_robots_send() {
    let cfg = AgentConfig {
        mode: Mode::Global,
        token: Config { timeslice: Duration::from_millis(400), ..Config::default() },
        ..AgentConfig::default()
    };
    let members = [1u32, 2, 3];
    let mut agents: Vec<Agent> =
        members.iter().map(|&id| Agent::new(cfg.clone(), id, 1, &members, Instant::ZERO).unwrap()).collect();
    let crash_at = Instant::ZERO + Duration::from_secs(3);
    let detected_at = crash_at + Duration::from_millis(500);
    let mut open = [false; 3];
    let mut open_after = [Duration::ZERO; 3];
    let step = Duration::from_millis(1);
    let mut t = Instant::ZERO;
    while t < Instant::ZERO + Duration::from_secs(10) {
        if t == detected_at {
            agents[1].set_arbiter_host(t, true, &[2, 3]).unwrap();
        }
        team_step(&mut agents, &mut open, t, |i| i != 0 || t < crash_at);
        for i in 0..3 {
            if open[i] && t > crash_at {
                open_after[i] += step;
            }
        }
        assert!(open.iter().filter(|&&o| o).count() <= 1, "two robots sent bulk at once at {t:?}: {open:?}");
        t += step;
    }
    assert_eq!(agents[1].stats().arbiter_starts, 1);
    for i in [1, 2] {
        assert!(
            open_after[i] > Duration::from_secs(1),
            "robot {} sent bulk for {:?} after the crash",
            i + 1,
            open_after[i]
        );
    }
}

#[test]
fn an_invalid_configuration_is_refused() {
    let bad = AgentConfig { token: Config { limit: 0, ..Config::default() }, ..AgentConfig::default() };
    assert!(matches!(Agent::new(bad, 1, 1, &[1], Instant::ZERO), Err(AgentConfigError::Token(ConfigError::Limit))));
}

/// The receiver of an upload acknowledges on a connection it also sent bulk on: its
/// acknowledgements neither ask for the token nor count as bulk.
#[test]
fn acknowledgements_of_a_bulk_flow_do_not_ask_for_the_token() {
    let mut a = agent(Mode::Global);
    let k = key(PROTO_TCP, 40001, 5001);
    upload(&mut a, k, Instant::ZERO, 60);
    assert!(actions(&mut a).contains(&Action::Set(k, Marking::Bulk)));
    assert_eq!(a.stats().token_requests, 1);
    // The token comes and the upload ends; then only acknowledgements leave for 2 s.
    let mut t = Instant::ZERO + Duration::from_millis(10);
    while t < Instant::ZERO + Duration::from_secs(3) {
        a.on_backlog(t, 0);
        if t > Instant::ZERO + Duration::from_secs(1) {
            a.on_packet(t, k, 52, 0);
        }
        a.handle_timeout(t);
        // A team of one: its arbiter and client talk inside the agent.
        let mut buf = [0u8; 256];
        while a.poll_transmit(t, &mut buf).is_some() {}
        t += Duration::from_millis(1);
    }
    assert_eq!(a.stats().token_requests, 1, "acknowledgements asked for the token");
    assert_eq!(a.client().unwrap().state(), crate::preempt::client::ClientState::Idle);
}

#[test]
fn the_flow_table_is_bounded() {
    let mut a =
        Agent::new(AgentConfig { mode: Mode::Mark, max_flows: 100, ..Default::default() }, 1, 1, &[1], Instant::ZERO)
            .unwrap();
    for port in 0..10_000u16 {
        a.on_packet(Instant::ZERO + Duration::from_micros(u64::from(port)), key(PROTO_UDP, 20000 + port, 53), 80, 0);
    }
    assert_eq!(a.flows().count(), 100);
    assert_eq!(a.stats().untracked_packets, 9_900);
    // Once they go quiet they are forgotten, and new flows are tracked again.
    a.handle_timeout(Instant::ZERO + AgentConfig::default().flow_idle + Duration::from_secs(1));
    assert_eq!(a.flows().count(), 0);
}

/// The user overrides a verdict while the agent runs, and takes the override back.
#[test]
fn an_override_set_while_running_takes_effect_at_once_and_can_be_taken_back() {
    let mut a = agent(Mode::Mark);
    let ctl = key(PROTO_UDP, 40000, 9000);
    for k in 0..20u32 {
        perception(&mut a, ctl, Instant::ZERO + PERIOD * k, 0);
    }
    assert!(actions(&mut a).contains(&Action::Set(ctl, Marking::Ef)));
    a.set_overrides(vec![(9000, Override::Bulk)]);
    assert_eq!(actions(&mut a), vec![Action::Set(ctl, Marking::Bulk)]);
    assert_eq!(a.flows().next().unwrap().verdict, Verdict::Forced(Override::Bulk));
    a.set_overrides(vec![]);
    assert_eq!(actions(&mut a), vec![Action::Set(ctl, Marking::Ef)], "back to what the classifier says");
    assert_eq!(a.flows().next().unwrap().verdict, Verdict::Ls);
}

/// Runs a lone robot's agent (it hosts the arbiter) until `until`, step by step, handing its
/// own token datagrams back to itself (`poll_transmit` does that for unicast to self).
fn run_alone(a: &mut Agent, from: Instant, until: Instant) {
    let mut buf = [0u8; 256];
    let mut t = from;
    while t <= until {
        a.handle_timeout(t);
        while a.poll_transmit(t, &mut buf).is_some() {}
        t += Duration::from_micros(500);
    }
}

#[test]
fn a_bulk_session_gets_the_token_and_gives_it_back_when_it_closes() {
    let mut a = agent(Mode::Global);
    let t0 = Instant::ZERO;
    // Without the token the permit is closed; the demand asks for it.
    let p = a.bulk_demand(t0, 7, 45000, 1 << 20);
    assert!(!p.open);
    assert_eq!(a.stats().token_requests, 1);
    run_alone(&mut a, t0, t0 + Duration::from_millis(5));
    let t1 = t0 + Duration::from_millis(6);
    let p = a.bulk_demand(t1, 7, 45000, 1 << 19);
    assert!(p.open, "the lone robot holds the token");
    // Open until the lease ends, never past it.
    let lease_end = p.until.expect("a lease has an end");
    assert!(lease_end > t1 && lease_end <= t1 + a.config().token.timeslice);
    // Its own packets are bulk (gated) but do not keep the token wanted after it closes.
    upload(&mut a, key(PROTO_TCP, 45000, 5001), t1, 60);
    let t2 = t1 + Duration::from_millis(10);
    a.bulk_demand(t2, 7, 45000, 0);
    a.bulk_close(t2, 7);
    assert_eq!(a.stats().early_releases, 1, "the token went back the moment the transfer closed");
    assert!(!a.client().unwrap().wants());
    assert!(!a.bulk_permit(t2).open);
}

#[test]
fn foreign_bulk_keeps_the_token_past_a_closing_session() {
    let mut a = agent(Mode::Global);
    let t0 = Instant::ZERO;
    a.bulk_demand(t0, 1, 45000, 1000);
    run_alone(&mut a, t0, t0 + Duration::from_millis(5));
    let t1 = t0 + Duration::from_millis(6);
    // A foreign upload flows too: closing the session must not cut it off.
    upload(&mut a, key(PROTO_TCP, 46000, 5001), t1, 10);
    a.bulk_close(t1 + Duration::from_millis(2), 1);
    assert_eq!(a.stats().early_releases, 0);
    assert!(a.bulk_permit(t1 + Duration::from_millis(2)).open);
}

#[test]
fn a_foreign_upload_whose_sockets_drained_gives_the_token_back_before_the_idle_time() {
    let mut a = agent(Mode::Global);
    let t0 = Instant::ZERO;
    let up = key(PROTO_TCP, 46000, 5001);
    upload(&mut a, up, t0, 1);
    run_alone(&mut a, t0, t0 + Duration::from_millis(5));
    let t1 = t0 + Duration::from_millis(6);
    assert!(a.client().unwrap().may_send(t1), "the lone robot holds the token");
    upload(&mut a, up, t1, 50);
    let last = t1 + Duration::from_micros(120 * 49);
    assert_eq!(a.recent_bulk_flows(last).collect::<Vec<_>>(), [up]);
    // Bytes still unacknowledged, or a sender the kernel does not know: the token stays.
    a.on_send_queues(last, Some(30_000));
    a.on_send_queues(last, None);
    assert!(a.client().unwrap().may_send(last));
    // Drained, then a packet: that reading says nothing about the packet.
    a.on_send_queues(last, Some(0));
    assert!(!a.client().unwrap().wants());
    upload(&mut a, up, last + Duration::from_millis(1), 1);
    run_alone(&mut a, last + Duration::from_millis(1), last + Duration::from_millis(5));
    let last = last + Duration::from_millis(5);
    assert!(a.client().unwrap().may_send(last), "the token came back for the new packet");
    a.handle_timeout(last + Duration::from_millis(1));
    assert!(a.client().unwrap().may_send(last + Duration::from_millis(1)));
    // Drained after the last packet: back now, not after `bulk_idle` of silence.
    let t2 = last + Duration::from_millis(3);
    a.on_send_queues(t2, Some(0));
    assert!(!a.client().unwrap().wants(), "the token went back {:?} after the upload", t2 - last);
    assert_eq!((a.stats().drained_releases, a.stats().early_releases), (2, 0));
    // The upload's next packet asks for the token again; the old reading no longer counts.
    let t3 = t2 + Duration::from_millis(50);
    upload(&mut a, up, t3, 1);
    assert!(a.client().unwrap().wants());
    run_alone(&mut a, t3, t3 + Duration::from_millis(5));
    assert!(a.client().unwrap().may_send(t3 + Duration::from_millis(5)), "{:?}", a.client().unwrap().state());
    // Nothing flowed for `bulk_idle`: no flow is recent any more.
    assert_eq!(a.recent_bulk_flows(t3 + a.config().bulk_idle).count(), 0);
}

#[test]
fn a_silent_session_is_forgotten_and_releases_the_token() {
    let mut a = agent(Mode::Global);
    let t0 = Instant::ZERO;
    a.bulk_demand(t0, 9, 45000, 1 << 30);
    run_alone(&mut a, t0, t0 + (BULK_SESSION_SILENCE - Duration::from_millis(1)));
    assert!(a.client().unwrap().may_send(t0 + (BULK_SESSION_SILENCE - Duration::from_millis(1))));
    run_alone(&mut a, t0 + BULK_SESSION_SILENCE, t0 + BULK_SESSION_SILENCE + Duration::from_millis(2));
    assert_eq!(a.stats().bulk_forgotten, 1);
    assert!(!a.client().unwrap().wants(), "a dead sender does not keep the token");
}

#[test]
fn the_session_table_is_bounded() {
    let mut a = agent(Mode::Mark);
    for s in 0..MAX_BULK_SESSIONS as u64 {
        assert!(a.bulk_demand(Instant::ZERO, s, 1000 + s as u16, 1).open, "mark mode never holds");
    }
    let p = a.bulk_demand(Instant::ZERO, 1 << 40, 999, 1);
    assert_eq!(p, BulkPermit { open: false, until: None });
    assert_eq!(a.stats().bulk_refused, 1);
    // A known session is still served.
    assert!(a.bulk_demand(Instant::ZERO, 3, 1003, 1).open);
}

#[test]
fn the_permit_ends_before_the_next_protection_window() {
    let mut a = agent(Mode::Local);
    let ctl = key(PROTO_UDP, 40000, 9000);
    let mut t = Instant::ZERO;
    for k in 0..30u32 {
        t = Instant::ZERO + PERIOD * k;
        perception(&mut a, ctl, t, 46);
        a.handle_timeout(t);
    }
    // Just after a control message and its window: open, until the next window opens (lead
    // included), which is before the next message.
    let after = t + PERIOD / 2;
    a.handle_timeout(after);
    let p = a.bulk_demand(after, 1, 45000, 1 << 20);
    assert!(p.open);
    let until = p.until.expect("the next window bounds the permit");
    let next_msg = Instant::ZERO + PERIOD * 30;
    assert!(until > after && until < next_msg, "{until:?} not between {after:?} and {next_msg:?}");
    // Inside the window it is closed.
    assert!(!a.bulk_permit(next_msg).open);
}

/// A card that the gate fills at `fill` bytes/s while open (up to `cap` bytes: the driver stops
/// the queue) and that sends `drain` bytes/s while it holds anything.
struct TestCard {
    pending: f64,
    sent: f64,
    fill: f64,
    drain: f64,
    cap: f64,
}

impl TestCard {
    fn step(&mut self, open: bool, dt: Duration) {
        let dt = dt.as_secs_f64();
        let out = (self.drain * dt).min(self.pending);
        self.pending -= out;
        self.sent += out;
        if open {
            self.pending = (self.pending + self.fill * dt).min(self.cap);
        }
    }

    fn reading(&self) -> CardReading {
        CardReading { pending_bytes: self.pending as u64, sent_bytes: self.sent as u64 }
    }
}

/// Runs a local-half agent for 60 periods beside a card that fills faster than it drains;
/// returns what the card held when each learned control message (from the 20th) arrived and
/// the share of the time between messages the card was sending.
fn card_run(read_card: bool, every: Duration, link_rate_bps: Option<u64>) -> (Vec<f64>, f64, AgentStats) {
    let cfg = AgentConfig { mode: Mode::Local, card_every: every, link_rate_bps, ..AgentConfig::default() };
    let mut a = Agent::new(cfg, 1, 1, &[1], Instant::ZERO).unwrap();
    let ctl = key(PROTO_UDP, 40000, 9000);
    // 160 Mbit/s of sending, 320 of filling, a 200 KB queue: 10 ms to drain when full.
    let mut card = TestCard { pending: 0.0, sent: 0.0, fill: 40e6, drain: 20e6, cap: 200e3 };
    let step = Duration::from_micros(20);
    let (mut t, mut next_msg, mut next_read) = (Instant::ZERO, 0u32, Instant::ZERO);
    let (mut open, mut at_msgs, mut busy, mut total) = (true, Vec::new(), 0u64, 0u64);
    while t < Instant::ZERO + PERIOD * 60 {
        if t >= Instant::ZERO + PERIOD * next_msg {
            if next_msg >= 20 {
                at_msgs.push(card.pending);
            }
            perception(&mut a, ctl, t, 46);
            next_msg += 1;
        }
        if read_card && t >= next_read {
            a.on_card(t, card.reading());
            next_read = t + every;
        }
        a.handle_timeout(t);
        for x in actions(&mut a) {
            match x {
                Action::Hold => open = false,
                Action::Release => open = true,
                Action::Set(..) => {}
            }
        }
        if next_msg > 20 {
            total += 1;
            busy += u64::from(card.pending > 0.0);
        }
        card.step(open, step);
        t += step;
    }
    (at_msgs, busy as f64 / total as f64, a.stats())
}

#[test]
fn with_the_card_read_the_bulk_stops_when_the_card_needs_it_to_drain() {
    let allowance = AgentConfig::default().card_allowance_bytes as f64;
    let every = AgentConfig::default().card_every;
    // The fixed 2 ms lead leaves most of a full card in place when the message comes.
    let (blind, _, blind_stats) = card_run(false, every, None);
    assert!(blind.iter().all(|&p| p > 100e3), "a 2 ms lead drains 40 of 200 KB: {blind:?}");
    assert_eq!(blind_stats.card_readings, 0);
    // Read every 500 µs, the card holds at most the allowance when each message arrives...
    let (seen, busy, stats) = card_run(true, every, None);
    let margin = 40e6 * every.as_secs_f64();
    assert!(seen.iter().all(|&p| p <= allowance + margin), "allowance {allowance}: {seen:?}");
    assert!(stats.card_early_holds >= 30, "{stats:?}");
    // ... and it is not starved for that: it sends most of the time between messages.
    assert!(busy > 0.6, "card busy {busy}");
    // Read slowly, the margin for what the gate passes between readings still holds.
    let slow = Duration::from_millis(2);
    let (seen, _, _) = card_run(true, slow, None);
    assert!(seen.iter().all(|&p| p <= allowance + 40e6 * slow.as_secs_f64()), "{seen:?}");
    // A card that drains at a fifth of the channel rate keeps a fifth of the allowance: the
    // message waits behind it as long as behind one aggregate at the full rate.
    let (seen, _, _) = card_run(true, every, Some(5 * 160_000_000));
    assert!(seen.iter().all(|&p| p <= allowance / 5.0 + margin), "{seen:?}");
}

#[test]
fn a_hold_lasts_to_the_window_end_and_stale_readings_bring_back_the_fixed_lead() {
    let mut a = agent(Mode::Local);
    let ctl = key(PROTO_UDP, 40000, 9000);
    for k in 0..30u32 {
        let t = Instant::ZERO + PERIOD * k;
        perception(&mut a, ctl, t, 46);
        a.handle_timeout(t);
    }
    let _ = actions(&mut a);
    // A card draining 10 MB/s that holds 300 KB, 20 ms before the next message: 23 ms to go
    // below the allowance, so the bulk is held now.
    let next = Instant::ZERO + PERIOD * 30;
    let t0 = Instant::ZERO + (PERIOD * 30 - Duration::from_millis(20));
    let mut sent = 0;
    for k in 0..10u64 {
        let at = Instant::ZERO + (PERIOD * 30 - Duration::from_millis(30) + Duration::from_millis(k));
        a.on_card(at, CardReading { pending_bytes: 300_000, sent_bytes: sent });
        sent += 10_000;
    }
    a.on_card(t0, CardReading { pending_bytes: 300_000, sent_bytes: sent });
    assert!(a.card().unwrap().drain_bps.is_some_and(|d| (d - 10e6).abs() < 1e5));
    assert_eq!(actions(&mut a), vec![Action::Hold]);
    // The card empties: the hold stays until the window's end, not the card's.
    a.on_card(t0 + Duration::from_millis(1), CardReading { pending_bytes: 0, sent_bytes: sent + 300_000 });
    a.handle_timeout(t0 + Duration::from_millis(2));
    assert_eq!(actions(&mut a), vec![]);
    assert!(a.is_held());
    // After the window, released. The next hold, the card read empty 50 ms before, starts
    // later than the fixed lead would; once the readings are stale (100 ms), the fixed lead
    // is back.
    let mut t = t0;
    let mut release = None;
    let mut holds = Vec::new();
    let mut msg = 30u32;
    while t < Instant::ZERO + PERIOD * 35 {
        if t >= Instant::ZERO + PERIOD * msg {
            perception(&mut a, ctl, t, 46);
            msg += 1;
        }
        a.handle_timeout(t);
        for x in actions(&mut a) {
            match x {
                Action::Release => release = release.or(Some(t)),
                Action::Hold => holds.push(t),
                _ => {}
            }
        }
        t += Duration::from_micros(50);
    }
    assert!(release.is_some_and(|r| r > next), "{release:?}");
    let lead_of = |k: u32| {
        let w = Instant::ZERO + PERIOD * k;
        let h = holds.iter().copied().filter(|&h| h < w).max().expect("a hold before each message");
        w.saturating_duration_since(h)
    };
    let fixed = a.config().lead;
    assert!(lead_of(31) < fixed, "empty card: {:?}", lead_of(31));
    assert!(lead_of(34) >= fixed && lead_of(34) < fixed + Duration::from_millis(6), "stale: {:?}", lead_of(34));
}

#[test]
fn the_drain_rate_counts_only_intervals_in_which_the_card_never_ran_empty() {
    let r = |pending_bytes, sent_bytes| CardReading { pending_bytes, sent_bytes };
    let ms = |k: u64| Instant::ZERO + Duration::from_millis(k);
    // A card fed a 100-byte acknowledgement per millisecond, sent at once: never backlogged,
    // so no rate, however long it runs.
    let mut e = CardEstimate::new(r(100, 0), ms(0));
    for k in 1..50 {
        e.update(r(100, 100 * k), ms(k));
    }
    assert_eq!(e.drain_bps, None);
    // Backlogged (100 KB, refilled as it drains) at 30 MB/s: that is its rate.
    for k in 50..70 {
        e.update(r(100_000, 100 * 49 + 30_000 * (k - 49)), ms(k));
    }
    let d = e.drain_bps.expect("a rate from the backlogged intervals");
    assert!((d - 30e6).abs() < 1e5, "{d}");
    // A backlogged card that the channel lets send nothing for 4 ms is a zero-rate sample.
    let sent = 100 * 49 + 30_000 * 20;
    for k in 70..75 {
        e.update(r(100_000, sent), ms(k));
    }
    assert!(e.drain_bps.unwrap() < 0.8 * d);
}
