//! Coordinated robotic learning (seed 000 §II, §VI) on the 802.11 model, with the systems that
//! share its channel: EDCA alone, SchedWiFi, COORP and its two halves.
//!
//! **The workload.** Robot 0 leads, robots 1..N work. A model-predictive control (MPC) loop
//! runs at `loop_hz`: at its start every worker sends a perception (12 KB, seed 000 §VI-A) to
//! the leader; once the leader has them all it infers (`inference_ms`) and sends each worker
//! an action (1 KB). The loop's *reaction time* runs from its start to the last action
//! received; a loop whose reaction exceeds `boundary_ms` (or never completes) violates. Beside
//! it a data-parallel training job (DRLC) runs epochs: the leader disseminates a batch
//! partition to every worker, each trains (`train_ms`) and sends its parameter update back; the
//! epoch ends when the leader holds every update. Messages travel as UDP datagrams of at most
//! [`FRAGMENT`] bytes; bulk is a backlog in each host that the driver hands to the card while
//! the card's queue has room, as mac80211 pulls from its queues (TCP's retransmission is
//! modelled by putting a dropped bulk frame back into the backlog).
//!
//! **Control marked or not.** Marked, perceptions and actions ride AC_VO (DSCP EF); unmarked,
//! as ROS 2 and Zenoh send them by default, AC_BE beside the bulk. Under COORP an unmarked flow
//! is classified by its robot's [`FlowClassifier`] and, once judged latency-sensitive, marked
//! EF, as Cohort's runtime marks foreign control in the kernel.
//!
//! **Systems.** `NoBh`: no training at all (the ideal reaction time). `Edca`: the card serves
//! what it is handed. `SchedWifi`: exclusive ST-windows of seed 000's Eq. 4 for every LS
//! message (R = 7, TX_ack = 30 µs), laid out one after the other from the loop's start; each LS
//! message leaves at its window's start and every robot stops handing bulk to its card before
//! any window, as seed 000 emulated the Time-Aware Shaper with its virtual-preemption layer.
//! `CoorpGlobal`: the bulk token of Algorithm 1 ([`Arbiter`] on the leader, a [`Client`] per
//! robot, their messages carried as AC_VO frames over the same channel). `CoorpLocal`: each
//! robot's [`Controller`] learns its own LS flows and its [`Vpl`] hands bulk to the card only
//! as far as it can finish before the next protection window (Algorithm 2). `Coorp`: both.
//!
//! Everything is seeded: one seed, one run.

use cohort_medium::wifi::aggregation::Aggregation;
use cohort_medium::wifi::{Ac, Dest, EdcaParams, Medium, MediumEvent, Phy, StationConfig, Timing};
use cohort_proto::preempt::arbiter::Arbiter;
use cohort_proto::preempt::client::Client;
use cohort_proto::preempt::controller::{
    ClassifierConfig, Controller, ControllerConfig, FlowClass, FlowClassifier, Window,
};
use cohort_proto::preempt::vpl::{Vpl, VplConfig};
use cohort_proto::preempt::{self, Epoch};
use cohort_time::Instant;
use serde::Serialize;
use std::collections::VecDeque;
use std::time::Duration;

/// Largest UDP payload per frame (a 1500-byte IP packet).
pub const FRAGMENT: usize = 1472;

/// Packets a host's queueing discipline holds in front of the card (`txqueuelen`, 1000).
pub const QDISC_PACKETS: usize = 1000;

/// Who shares the channel with the control loop, and how.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum System {
    NoBh,
    Edca,
    SchedWifi,
    Coorp,
    CoorpGlobal,
    CoorpLocal,
}

impl System {
    pub const ALL: [System; 6] =
        [System::NoBh, System::Edca, System::SchedWifi, System::Coorp, System::CoorpGlobal, System::CoorpLocal];

    pub fn name(self) -> &'static str {
        match self {
            System::NoBh => "no_bh",
            System::Edca => "edca",
            System::SchedWifi => "schedwifi",
            System::Coorp => "coorp",
            System::CoorpGlobal => "coorp_global",
            System::CoorpLocal => "coorp_local",
        }
    }

    fn global(self) -> bool {
        matches!(self, System::Coorp | System::CoorpGlobal)
    }

    fn local(self) -> bool {
        matches!(self, System::Coorp | System::CoorpLocal)
    }
}

/// The workload and the channel.
#[derive(Debug, Clone, Serialize)]
pub struct CrlParams {
    /// Robots, the leader included.
    pub robots: usize,
    pub phy_mbps: f64,
    pub loop_hz: f64,
    pub boundary_ms: f64,
    pub perception_bytes: usize,
    pub action_bytes: usize,
    pub inference_ms: f64,
    pub batch_bytes: usize,
    pub update_bytes: usize,
    pub train_ms: f64,
    /// Training epochs; the run ends after them (or at `max_s`).
    pub epochs: usize,
    /// Simulated time without training when `epochs` is 0 or the system is `NoBh`.
    pub loops_without_bh: usize,
    pub marked: bool,
    /// The card: queue depth, NIC profile, retries (its `ampdu` is set from `aggregation`).
    pub station: StationConfig,
    /// A-MPDU limits per category (ns-3's defaults: AC_BE and AC_VI aggregate).
    pub aggregation: Aggregation,
    pub max_s: f64,
    /// The preemption controller's and the virtual-preemption layer's settings under COORP.
    #[serde(skip)]
    pub controller: ControllerConfig,
    #[serde(skip)]
    pub vpl: VplConfig,
}

impl Default for CrlParams {
    fn default() -> Self {
        CrlParams {
            robots: 5,
            // 802.11ac, 80 MHz, one stream, MCS 9 (long guard interval).
            phy_mbps: 390.0,
            loop_hz: 30.0,
            boundary_ms: 33.0,
            perception_bytes: 12 * 1024,
            action_bytes: 1024,
            inference_ms: 2.0,
            batch_bytes: 1 << 20,
            update_bytes: 10 << 20,
            train_ms: 100.0,
            epochs: 3,
            loops_without_bh: 300,
            marked: true,
            station: StationConfig::default(),
            aggregation: Aggregation::default(),
            max_s: 600.0,
            controller: ControllerConfig::default(),
            vpl: VplConfig::default(),
        }
    }
}

/// What one run measured.
#[derive(Debug, Clone, Default, Serialize)]
pub struct CrlOutcome {
    pub system: Option<System>,
    pub loops: usize,
    /// Reaction time of every loop that completed, ms (in loop order).
    pub reaction_ms: Vec<f64>,
    /// Loops that never completed (a perception or action lost).
    pub incomplete: usize,
    pub violations: usize,
    pub epoch_s: Vec<f64>,
    /// Bulk payload bytes acknowledged, and the time the training ran.
    pub bh_bytes: u64,
    pub bh_seconds: f64,
    pub bh_requeued: u64,
    /// Frames of LS messages that went out on AC_VO, and on AC_BE.
    pub ls_frames_vo: u64,
    pub ls_frames_be: u64,
    pub simulated_s: f64,
}

impl CrlOutcome {
    pub fn violation_share(&self) -> f64 {
        self.violations as f64 / self.loops.max(1) as f64
    }

    pub fn bh_mbps(&self) -> f64 {
        if self.bh_seconds > 0.0 { self.bh_bytes as f64 * 8.0 / self.bh_seconds / 1e6 } else { 0.0 }
    }
}

/// A frame on the medium.
#[derive(Debug, Clone)]
enum Frame {
    /// Fragment of LS message `msg`.
    Ls { msg: usize },
    /// A bulk frame of `bytes` of transfer `transfer`.
    Bh { transfer: usize, bytes: usize, id: u64 },
    /// An arbiter message, from the arbiter (to clients) or from a client (to the arbiter).
    Ctl { from: usize, from_arbiter: bool, bytes: Vec<u8> },
}

/// An LS message in flight.
#[derive(Debug, Clone)]
struct LsMsg {
    loop_k: usize,
    to: usize,
    fragments_left: usize,
    lost: bool,
    action: bool,
}

/// A bulk transfer: `from` sends `bytes` to `to`.
#[derive(Debug, Clone)]
struct Transfer {
    to: usize,
    unsent: usize,
    unacked: usize,
}

/// A packet in a host's queueing discipline, waiting for room in the card.
#[derive(Debug, Clone, Copy)]
enum Queued {
    Ls { msg: usize, to: usize, bytes: usize },
    Bh { transfer: usize, bytes: usize },
}

#[derive(Debug)]
struct Robot {
    /// Transfers with bytes the application has still to write, in turn.
    backlog: VecDeque<usize>,
    /// The host's queueing discipline: one FIFO per access category (Linux's mq root over
    /// mac80211's per-AC queues; unmarked control shares AC_BE's FIFO with the bulk).
    qdisc: [VecDeque<Queued>; 4],
    /// Bulk packets in the qdisc now (a TCP sender keeps it up to `QDISC_PACKETS`).
    qdisc_bulk: usize,
    in_card: usize,
    client: Option<Client>,
    controller: Option<Controller>,
    /// Per destination (one flow each), when this robot classifies its unmarked flows: the
    /// classifier, and whether the flow is marked EF now.
    classifiers: Option<std::collections::BTreeMap<usize, (FlowClassifier, bool)>>,
    vpl: Option<Vpl>,
    recheck_at: Option<Instant>,
}

/// Seed 000 Eq. 4: the ST-window of an LS message of `bytes`.
pub fn st_window(bytes: usize, phy_mbps: f64) -> Duration {
    let us = 2.0 * 25.0 + (bytes as f64 * 8.0 / phy_mbps + 2.0 * 16.0 + 30.0) * (1.0 + 7.0);
    Duration::from_secs_f64(us / 1e6)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

struct Run<'a> {
    p: &'a CrlParams,
    system: System,
    medium: Medium<Frame>,
    robots: Vec<Robot>,
    arbiter: Option<Arbiter>,
    msgs: Vec<LsMsg>,
    transfers: Vec<Transfer>,
    /// Per loop: perceptions received, actions received, start, last action time.
    loops: Vec<(usize, usize, Instant, Option<Instant>)>,
    /// Timers: (when, what).
    timers: Vec<(Instant, Timer)>,
    next_bh_id: u64,
    out: CrlOutcome,
    epoch: Option<(usize, Instant, usize)>,
    bh_start: Option<Instant>,
    buf: Vec<u8>,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Timer {
    /// Worker sends its perception of loop k (SchedWiFi delays it to its window).
    Perception { worker: usize, k: usize },
    /// The leader finished inference for loop k.
    Infer { k: usize },
    /// The leader sends the action of loop k to `worker`.
    Action { worker: usize, k: usize },
    /// `worker` finished training on its partition.
    Trained { worker: usize },
}

impl<'a> Run<'a> {
    fn period(&self) -> Duration {
        Duration::from_secs_f64(1.0 / self.p.loop_hz)
    }

    fn ls_ac(&mut self, robot: usize, to: usize, bytes: usize, now: Instant) -> Ac {
        if self.p.marked {
            return Ac::Vo;
        }
        let Some(map) = self.robots[robot].classifiers.as_mut() else { return Ac::Be };
        let (c, marked) =
            map.entry(to).or_insert_with(|| (FlowClassifier::new(ClassifierConfig::default()).expect("valid"), false));
        // A marking, once made, stays (as a kernel rule would) while the flow stays small: a
        // control flow whose timing the bulk disturbed must not lose the very marking that
        // protects it. A message too large for control unmarks it.
        match c.observe(now, bytes as u64) {
            FlowClass::LatencySensitive => *marked = true,
            FlowClass::TooLarge => *marked = false,
            FlowClass::Undecided | FlowClass::Aperiodic => {}
        }
        if *marked { Ac::Vo } else { Ac::Be }
    }

    fn send_ls(&mut self, now: Instant, from: usize, to: usize, bytes: usize, k: usize, action: bool) {
        if let Some(c) = self.robots[from].controller.as_mut() {
            c.observe(if action { 1000 + to as u32 } else { 0 }, now);
        }
        let ac = self.ls_ac(from, to, bytes, now);
        let frags = bytes.div_ceil(FRAGMENT);
        let msg = self.msgs.len();
        self.msgs.push(LsMsg { loop_k: k, to, fragments_left: frags, lost: false, action });
        for i in 0..frags {
            let len = if i + 1 == frags { bytes - i * FRAGMENT } else { FRAGMENT };
            if ac == Ac::Vo {
                self.out.ls_frames_vo += 1
            } else {
                self.out.ls_frames_be += 1
            }
            let q = &mut self.robots[from].qdisc[ac.index()];
            if q.len() >= QDISC_PACKETS {
                self.msgs[msg].lost = true;
            } else {
                q.push_back(Queued::Ls { msg, to, bytes: len });
            }
        }
        self.pull(now, from);
    }

    /// The SchedWiFi windows of the loop starting at `t0`: every worker's perception, then,
    /// after inference, every action, back to back.
    fn sched_windows(&self, t0: Instant) -> Vec<(Window, Timer)> {
        let n = self.p.robots;
        let (wp, wa) =
            (st_window(self.p.perception_bytes, self.p.phy_mbps), st_window(self.p.action_bytes, self.p.phy_mbps));
        let k = ((t0 - Instant::ZERO).as_secs_f64() * self.p.loop_hz).round() as usize;
        let mut v = Vec::new();
        let mut t = t0;
        for w in 1..n {
            v.push((Window { start: t, end: t + wp }, Timer::Perception { worker: w, k }));
            t += wp;
        }
        t += Duration::from_secs_f64(self.p.inference_ms / 1e3);
        for w in 1..n {
            v.push((Window { start: t, end: t + wa }, Timer::Action { worker: w, k }));
            t += wa;
        }
        v
    }

    /// Protection windows robot `r` honours now.
    fn windows(&self, r: usize, now: Instant) -> Vec<Window> {
        match self.system {
            System::SchedWifi => {
                let period = self.period();
                let k = ((now - Instant::ZERO).as_secs_f64() * self.p.loop_hz).floor() as u32;
                let mut v = Vec::new();
                for kk in [k, k + 1] {
                    let t0 = Instant::ZERO + period * kk;
                    v.extend(self.sched_windows(t0).into_iter().map(|(w, _)| w).filter(|w| w.end > now));
                }
                v
            }
            _ => self.robots[r].controller.as_ref().map_or_else(Vec::new, |c| c.windows(now, self.period() * 2)),
        }
    }

    /// The bulk application writes into the qdisc while it has room and, under COORP's global
    /// half, while the robot holds the token (seed 000's BH controller intercepts the write).
    fn refill(&mut self, now: Instant, r: usize) {
        if let Some(c) = &self.robots[r].client
            && !c.may_send(now)
        {
            return;
        }
        while self.robots[r].qdisc_bulk < QDISC_PACKETS {
            let Some(t) = self.robots[r].backlog.pop_front() else { return };
            let bytes = self.transfers[t].unsent.min(FRAGMENT);
            self.transfers[t].unsent -= bytes;
            if self.transfers[t].unsent > 0 {
                self.robots[r].backlog.push_back(t);
            }
            self.robots[r].qdisc[Ac::Be.index()].push_back(Queued::Bh { transfer: t, bytes });
            self.robots[r].qdisc_bulk += 1;
        }
    }

    /// Whether the virtual-preemption layer (or SchedWiFi's shaper) lets a bulk packet of
    /// `bytes` go to robot `r`'s card now.
    fn bulk_may_enter_card(&mut self, now: Instant, r: usize, bytes: usize) -> bool {
        if !(self.system.local() || self.system == System::SchedWifi) {
            return true;
        }
        let ws = self.windows(r, now);
        // Without the global half, bulk has no token to wait for.
        let until = match &self.robots[r].client {
            Some(c) => c.send_until().or(Some(Instant::FAR_FUTURE)),
            None => Some(Instant::FAR_FUTURE),
        };
        let Some(vpl) = self.robots[r].vpl.as_mut() else { return true };
        let rel = vpl.poll_release(now, &ws, &[bytes as u32], until);
        if rel.packets == 0 {
            // Never ask again at this very instant: time must move on.
            self.robots[r].recheck_at = rel.recheck_at.map(|t| t.max(now + Duration::from_micros(1)));
            return false;
        }
        true
    }

    /// The driver pulls robot `r`'s qdisc into its card while the card's queue of each
    /// category has room, in FIFO order: a held bulk packet holds what queues behind it.
    fn pull(&mut self, now: Instant, r: usize) {
        self.refill(now, r);
        let depth = self.p.station.queue_depth;
        for ac in [Ac::Vo, Ac::Vi, Ac::Be, Ac::Bk] {
            while self.medium.queue_len(r, ac) < depth {
                let Some(&front) = self.robots[r].qdisc[ac.index()].front() else { break };
                let (to, bytes, frame) = match front {
                    Queued::Ls { msg, to, bytes } => (to, bytes, Frame::Ls { msg }),
                    Queued::Bh { transfer, bytes } => {
                        if !self.bulk_may_enter_card(now, r, bytes) {
                            break;
                        }
                        let id = self.next_bh_id;
                        self.next_bh_id += 1;
                        (self.transfers[transfer].to, bytes, Frame::Bh { transfer, bytes, id })
                    }
                };
                self.robots[r].qdisc[ac.index()].pop_front();
                if let Frame::Bh { id, .. } = frame {
                    self.robots[r].qdisc_bulk -= 1;
                    self.robots[r].in_card += 1;
                    if let Some(v) = self.robots[r].vpl.as_mut() {
                        v.on_enqueue(now, id, bytes as u32);
                    }
                }
                if self.medium.enqueue(now, r, ac, Dest::Unicast(to), bytes, frame).is_err() {
                    break;
                }
            }
        }
        self.refill(now, r);
    }

    fn start_transfer(&mut self, now: Instant, from: usize, to: usize, bytes: usize) {
        let t = self.transfers.len();
        self.transfers.push(Transfer { to, unsent: bytes, unacked: bytes });
        self.robots[from].backlog.push_back(t);
        if let Some(c) = self.robots[from].client.as_mut() {
            c.want(now);
        }
    }

    fn start_epoch(&mut self, now: Instant) {
        let done = self.out.epoch_s.len();
        if done >= self.p.epochs || self.system == System::NoBh {
            self.epoch = None;
            return;
        }
        self.bh_start.get_or_insert(now);
        self.epoch = Some((done, now, self.p.robots - 1));
        for w in 1..self.p.robots {
            self.start_transfer(now, 0, w, self.p.batch_bytes);
        }
    }

    fn transfer_done(&mut self, now: Instant, t: usize, from: usize) {
        let to = self.transfers[t].to;
        if self.robots[from].backlog.is_empty()
            && self.robots[from].qdisc_bulk == 0
            && self.robots[from].in_card == 0
            && let Some(c) = self.robots[from].client.as_mut()
        {
            c.finished(now);
        }
        if from == 0 {
            // A batch partition arrived: the worker trains.
            self.timers.push((now + Duration::from_secs_f64(self.p.train_ms / 1e3), Timer::Trained { worker: to }));
        } else if let Some((e, t0, left)) = self.epoch {
            self.epoch = Some((e, t0, left - 1));
            if left == 1 {
                self.out.epoch_s.push((now - t0).as_secs_f64());
                self.start_epoch(now);
            }
        }
    }

    fn medium_event(&mut self, ev: MediumEvent<Frame>) {
        match ev {
            MediumEvent::Delivered { to, handle: Frame::Ls { msg }, at, .. } => {
                let m = &mut self.msgs[msg];
                m.fragments_left -= 1;
                if m.fragments_left == 0 && !m.lost && to == m.to {
                    let (k, action) = (m.loop_k, m.action);
                    let l = &mut self.loops[k];
                    if action {
                        l.1 += 1;
                        if l.1 == self.p.robots - 1 {
                            l.3 = Some(at);
                        }
                    } else {
                        l.0 += 1;
                        if l.0 == self.p.robots - 1 && self.system != System::SchedWifi {
                            self.timers
                                .push((at + Duration::from_secs_f64(self.p.inference_ms / 1e3), Timer::Infer { k }));
                        }
                    }
                }
            }
            MediumEvent::Delivered { to, handle: Frame::Ctl { from, from_arbiter, bytes }, at, .. } => {
                self.deliver_control(at, from, from_arbiter, to, &bytes);
            }
            MediumEvent::Dropped { handle: Frame::Ls { msg }, .. } => self.msgs[msg].lost = true,
            MediumEvent::Sent { station, handle: Frame::Bh { transfer, bytes, id }, at, .. } => {
                self.robots[station].in_card -= 1;
                if let Some(v) = self.robots[station].vpl.as_mut() {
                    v.on_complete(at, id);
                }
                self.out.bh_bytes += bytes as u64;
                let tr = &mut self.transfers[transfer];
                tr.unacked -= bytes;
                if tr.unacked == 0 {
                    self.transfer_done(at, transfer, station);
                }
            }
            MediumEvent::Dropped { station, handle: Frame::Bh { transfer, bytes, id }, at, .. } => {
                // TCP resends what the link lost.
                self.robots[station].in_card -= 1;
                if let Some(v) = self.robots[station].vpl.as_mut() {
                    v.on_complete(at, id);
                }
                self.out.bh_requeued += 1;
                self.transfers[transfer].unsent += bytes;
                if !self.robots[station].backlog.contains(&transfer) {
                    self.robots[station].backlog.push_front(transfer);
                }
                self.pull(at, station);
            }
            _ => {}
        }
    }

    /// An arbiter message reaches robot `to`: the arbiter's go to its client, the clients'
    /// to the arbiter (on the leader).
    fn deliver_control(&mut self, now: Instant, from: usize, from_arbiter: bool, to: usize, bytes: &[u8]) {
        if from_arbiter {
            if let Some(c) = self.robots[to].client.as_mut() {
                c.handle_datagram(now, from as u32, bytes);
            }
        } else if to == 0
            && let Some(a) = self.arbiter.as_mut()
        {
            a.handle_datagram(now, from as u32, bytes);
        }
    }

    /// Carries the arbiter's and clients' datagrams over the channel, on AC_VO; the leader's
    /// own client and its arbiter talk without the air.
    fn transmit_control(&mut self, now: Instant) {
        let n = self.p.robots;
        let mut out: Vec<(usize, bool, preempt::Transmit, Vec<u8>)> = Vec::new();
        if let Some(a) = self.arbiter.as_mut() {
            while let Some(t) = a.poll_transmit(now, &mut self.buf) {
                out.push((0, true, t, self.buf[..t.len].to_vec()));
            }
        }
        for r in 0..n {
            if let Some(c) = self.robots[r].client.as_mut() {
                while let Some(t) = c.poll_transmit(now, &mut self.buf) {
                    out.push((r, false, t, self.buf[..t.len].to_vec()));
                }
            }
        }
        for (from, from_arbiter, t, bytes) in out {
            let dests: Vec<usize> = match t.dest {
                preempt::Dest::Unicast(d) => vec![d as usize],
                preempt::Dest::Broadcast => (0..n).collect(),
            };
            for d in dests {
                if d == from {
                    self.deliver_control(now, from, from_arbiter, d, &bytes);
                    continue;
                }
                let f = Frame::Ctl { from, from_arbiter, bytes: bytes.clone() };
                let _ = self.medium.enqueue(now, from, Ac::Vo, Dest::Unicast(d), bytes.len(), f);
            }
        }
    }

    fn timer(&mut self, now: Instant, t: Timer) {
        let (pb, ab) = (self.p.perception_bytes, self.p.action_bytes);
        match t {
            Timer::Perception { worker, k } => self.send_ls(now, worker, 0, pb, k, false),
            Timer::Infer { k } => {
                for w in 1..self.p.robots {
                    self.send_ls(now, 0, w, ab, k, true);
                }
            }
            Timer::Action { worker, k } => {
                // SchedWiFi: an action leaves in its window, if the perceptions arrived.
                if self.loops[k].0 == self.p.robots - 1 {
                    self.send_ls(now, 0, worker, ab, k, true);
                }
            }
            Timer::Trained { worker } => self.start_transfer(now, worker, 0, self.p.update_bytes),
        }
    }
}

/// Runs the workload under `system` with `seed`.
pub fn run(p: &CrlParams, system: System, seed: u64) -> Result<CrlOutcome, String> {
    if p.robots < 2 {
        return Err("at least a leader and one worker".into());
    }
    let phy = Phy::vht(p.phy_mbps);
    let station = StationConfig { ampdu: p.aggregation.limits(&phy), ..p.station };
    let medium = Medium::new(phy, EdcaParams::defaults_2020(&phy), &vec![station; p.robots], seed)
        .map_err(|e| e.to_string())?
        .with_timing(Timing::Standard);
    let cfg = preempt::Config::default();
    let members: Vec<u32> = (0..p.robots as u32).collect();
    let arbiter = if system.global() {
        Some(Arbiter::new(cfg, 0, &members, Epoch::ZERO, Instant::ZERO).map_err(|e| e.to_string())?)
    } else {
        None
    };
    let mut robots = Vec::new();
    for r in 0..p.robots {
        robots.push(Robot {
            backlog: VecDeque::new(),
            qdisc: Default::default(),
            qdisc_bulk: 0,
            in_card: 0,
            client: if system.global() { Some(Client::new(cfg, r as u32).map_err(|e| e.to_string())?) } else { None },
            controller: if system.local() {
                Some(Controller::new(p.controller).map_err(|e| e.to_string())?)
            } else {
                None
            },
            classifiers: (system.local() || system.global()).then(Default::default),
            // SchedWiFi's shaper keeps its exclusive windows free of bulk: no allowance.
            vpl: if system.local() {
                Some(Vpl::new(p.vpl).map_err(|e| e.to_string())?)
            } else if system == System::SchedWifi {
                Some(Vpl::new(VplConfig { window_allowance_bytes: 0, ..p.vpl }).map_err(|e| e.to_string())?)
            } else {
                None
            },
            recheck_at: None,
        });
    }
    let mut run = Run {
        p,
        system,
        medium,
        robots,
        arbiter,
        msgs: Vec::new(),
        transfers: Vec::new(),
        loops: Vec::new(),
        timers: Vec::new(),
        next_bh_id: 0,
        out: CrlOutcome { system: Some(system), ..CrlOutcome::default() },
        epoch: None,
        bh_start: None,
        buf: vec![0u8; preempt::MAX_DATAGRAM],
    };
    let period = run.period();
    let max = Instant::ZERO + Duration::from_secs_f64(p.max_s);
    let mut now = Instant::ZERO;
    let mut next_loop = Instant::ZERO;
    // The first second is the controllers' and classifiers' learning time: training starts
    // after it, and loops count from then.
    let warm = Instant::ZERO + Duration::from_secs(1);
    let mut epochs_started = false;
    let mut bh_end = None;
    let mut loops_after = 0usize;
    let mut evs = Vec::new();
    loop {
        // Next event.
        let mut t = next_loop;
        for c in [run.medium.poll_timeout(), run.arbiter.as_ref().and_then(Arbiter::poll_timeout)].into_iter().flatten()
        {
            t = t.min(c);
        }
        for r in &run.robots {
            for c in [r.client.as_ref().and_then(Client::poll_timeout), r.recheck_at].into_iter().flatten() {
                t = t.min(c);
            }
        }
        for (c, _) in &run.timers {
            t = t.min(*c);
        }
        if !epochs_started && t >= warm {
            t = warm;
        }
        now = now.max(t);
        if now >= max {
            break;
        }
        if !epochs_started && now >= warm {
            epochs_started = true;
            run.start_epoch(now);
        }
        run.medium.handle_timeout(now);
        evs.clear();
        while let Some(ev) = run.medium.poll_event(now) {
            evs.push(ev);
        }
        for ev in evs.drain(..) {
            run.medium_event(ev);
        }
        if let Some(a) = run.arbiter.as_mut() {
            a.handle_timeout(now);
        }
        for r in 0..p.robots {
            if let Some(c) = run.robots[r].client.as_mut() {
                c.handle_timeout(now);
                while c.poll_event().is_some() {}
            }
            if run.robots[r].recheck_at.is_some_and(|c| c <= now) {
                run.robots[r].recheck_at = None;
            }
        }
        let mut due = Vec::new();
        run.timers.retain(|&(at, tm)| {
            if at <= now {
                due.push((at, tm));
                false
            } else {
                true
            }
        });
        due.sort_by_key(|&(at, _)| at);
        for (_, tm) in due {
            run.timer(now, tm);
        }
        if now >= next_loop {
            let k = run.loops.len();
            run.loops.push((0, 0, next_loop, None));
            if system == System::SchedWifi {
                for (w, tm) in run.sched_windows(next_loop) {
                    run.timers.push((w.start, tm));
                }
            } else {
                for w in 1..p.robots {
                    run.send_ls(now, w, 0, p.perception_bytes, k, false);
                }
            }
            next_loop += period;
            if epochs_started && run.epoch.is_none() {
                bh_end.get_or_insert(now);
                loops_after += 1;
                if system == System::NoBh || p.epochs == 0 {
                    if loops_after > p.loops_without_bh {
                        break;
                    }
                } else if loops_after > 2 {
                    break;
                }
            }
        }
        run.transmit_control(now);
        for r in 0..p.robots {
            run.pull(now, r);
        }
    }
    // Loops that started after the warm-up and before the end, with time to complete.
    let end = if system == System::NoBh || p.epochs == 0 { now } else { bh_end.unwrap_or(now) };
    let boundary = Duration::from_secs_f64(p.boundary_ms / 1e3);
    for &(_, _, start, done) in &run.loops {
        if start < warm || start + boundary > end {
            continue;
        }
        run.out.loops += 1;
        match done {
            Some(d) => {
                let r = d - start;
                run.out.reaction_ms.push(ms(r));
                if r > boundary {
                    run.out.violations += 1;
                }
            }
            None => {
                run.out.incomplete += 1;
                run.out.violations += 1;
            }
        }
    }
    if let (Some(s), Some(e)) = (run.bh_start, bh_end) {
        run.out.bh_seconds = (e - s).as_secs_f64();
    }
    run.out.simulated_s = (now - Instant::ZERO).as_secs_f64();
    Ok(run.out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn small(marked: bool) -> CrlParams {
        CrlParams {
            epochs: 1,
            update_bytes: 1 << 20,
            batch_bytes: 256 << 10,
            loops_without_bh: 60,
            marked,
            ..CrlParams::default()
        }
    }

    #[test]
    fn st_window_is_seed_000_eq_4() {
        // 2·25 µs + (1024·8/390 + 2·16 + 30)·(1 + 7) µs.
        let want = 50.0 + (1024.0 * 8.0 / 390.0 + 62.0) * 8.0;
        assert!((st_window(1024, 390.0).as_secs_f64() * 1e6 - want).abs() < 1e-3);
    }

    #[test]
    fn every_system_trains_to_the_end_and_one_seed_gives_one_run() {
        for system in System::ALL {
            let o = run(&small(true), system, 3).unwrap();
            assert!(o.loops > 0, "{system:?}: {} loops", o.loops);
            if system == System::NoBh {
                assert_eq!((o.epoch_s.len(), o.bh_bytes), (0, 0));
            } else {
                assert_eq!(o.epoch_s.len(), 1, "{system:?} finished its epoch");
                assert!(o.bh_bytes >= 4 * ((1 << 20) + (256 << 10)), "{system:?}: every byte acknowledged");
            }
            let again = run(&small(true), system, 3).unwrap();
            assert_eq!((again.reaction_ms, again.epoch_s), (o.reaction_ms, o.epoch_s), "{system:?} replays");
        }
    }

    /// The systems that shape bulk with the virtual-preemption layer alone finish training on
    /// both NIC profiles over several seeds: the layer never holds a robot's bulk for good.
    #[test]
    fn the_layer_alone_never_stalls_training() {
        use cohort_medium::wifi::{NicProfile, StationConfig};
        for station in [StationConfig::default(), StationConfig { nic: NicProfile::mt76_usb(), ..Default::default() }] {
            for system in [System::SchedWifi, System::CoorpLocal] {
                for seed in 1..=3 {
                    let o = run(&CrlParams { station, ..small(true) }, system, seed).unwrap();
                    assert_eq!(o.epoch_s.len(), 1, "{system:?}, seed {seed}, {:?}: the epoch never ended", station.nic);
                }
            }
        }
    }

    #[test]
    fn unmarked_control_rides_best_effort_unless_coorp_recognises_it() {
        let edca = run(&small(false), System::Edca, 1).unwrap();
        assert_eq!(edca.ls_frames_vo, 0, "nobody marks it under EDCA alone");
        let coorp = run(&small(false), System::Coorp, 1).unwrap();
        // Only the messages before a flow's verdict go best effort: `min_samples` per flow, four
        // perception flows of 9 frames and four action flows of one.
        let p = small(false);
        let undecided =
            ClassifierConfig::default().min_samples as u64 * 4 * (p.perception_bytes.div_ceil(FRAGMENT) + 1) as u64;
        assert!(coorp.ls_frames_be <= undecided && coorp.ls_frames_vo > 0, "classified LS and marked EF: {coorp:?}");
        let marked = run(&small(true), System::Edca, 1).unwrap();
        assert_eq!(marked.ls_frames_be, 0);
    }

    #[test]
    fn a_team_of_one_is_refused() {
        assert!(run(&CrlParams { robots: 1, ..small(true) }, System::Edca, 1).is_err());
    }
}
