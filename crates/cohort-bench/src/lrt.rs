//! `cohort bench lrt`: LRT, seed 004's block-RLNC scheme and a selective-repeat ARQ carry the
//! same timestamped messages over the same simulated point-to-point link
//! (`cohort_medium::link`, virtual time, same seed), and the in-order per-message delay
//! distribution of each is reported.

use crate::arq::{ArqConfig, ArqReceiver, ArqSender};
use crate::block::{BlockConfig, BlockReceiver, BlockSender};
use crate::progress::{Plan, Step};
use crate::stats::{DelayFigures, MeanCi, mean, round};
use cohort_medium::link::{Duplex, LinkParams, LossModel};
use cohort_proto::lrt::{Config, Connection, State};
use cohort_time::Instant;
use cohort_wire::frame::OVERHEAD;
use serde::Serialize;
use std::time::Duration;

/// UDP and IPv4 header bytes each datagram also carries.
const UDP_IP: usize = 28;
/// Bytes each datagram carries beyond the scheme's packet: secure frame and UDP/IPv4.
pub(crate) const PER_PACKET: usize = OVERHEAD + UDP_IP;

/// What to run.
#[derive(Debug, Clone, Serialize)]
pub struct LrtParams {
    pub owd_ms: f64,
    pub loss: LossModel,
    pub rate_mbps: f64,
    pub size: usize,
    pub interval_ms: f64,
    pub count: u64,
    pub seed: u64,
    /// Messages sent during the first `warmup_ms` are carried but not measured.
    pub warmup_ms: f64,
    /// Runs (`cohort bench lrt`): run `k` uses seed `seed + k`; every scheme runs on each.
    pub reps: u64,
}

impl Default for LrtParams {
    fn default() -> Self {
        LrtParams {
            owd_ms: 50.0,
            loss: LossModel::Iid { p: 0.10 },
            rate_mbps: 100.0,
            size: 1024,
            interval_ms: 1.0,
            count: 20_000,
            seed: 1,
            warmup_ms: 1000.0,
            reps: 3,
        }
    }
}

/// One scheme's figures.
#[derive(Debug, Clone, Default, Serialize)]
pub struct SchemeFigures {
    #[serde(flatten)]
    pub delay: DelayFigures,
    /// Bytes on the wire, both directions, with frame and UDP/IP headers, per application byte.
    pub overhead: f64,
    pub sent: u64,
    pub delivered: u64,
    pub measured: u64,
    pub in_order: bool,
    pub duplicates: u64,
    pub packets_forward: u64,
    pub packets_backward: u64,
    pub lost_by_link: u64,
    /// Delays of the measured messages (ms), for plots; left out of the JSON.
    #[serde(skip)]
    pub delays_ms: Vec<f64>,
}

impl SchemeFigures {
    /// Several runs of one scheme as one: their measured delays pooled, counts summed, the
    /// mean overhead, in order only if every run was.
    pub fn pooled(runs: &[&SchemeFigures], owd_ms: f64) -> SchemeFigures {
        let mut delays_ms: Vec<f64> = runs.iter().flat_map(|r| r.delays_ms.iter().copied()).collect();
        delays_ms.sort_by(f64::total_cmp);
        let sum = |f: fn(&SchemeFigures) -> u64| runs.iter().map(|r| f(r)).sum();
        SchemeFigures {
            delay: DelayFigures::of(&delays_ms, owd_ms),
            overhead: mean(&runs.iter().map(|r| r.overhead).collect::<Vec<_>>()),
            sent: sum(|r| r.sent),
            delivered: sum(|r| r.delivered),
            measured: delays_ms.len() as u64,
            in_order: runs.iter().all(|r| r.in_order),
            duplicates: sum(|r| r.duplicates),
            packets_forward: sum(|r| r.packets_forward),
            packets_backward: sum(|r| r.packets_backward),
            lost_by_link: sum(|r| r.lost_by_link),
            delays_ms,
        }
    }
}

/// Each run's p99 (ms) per scheme, and the ratios paired by run (same seed, same link).
#[derive(Debug, Clone, Serialize)]
pub struct RunFigures {
    pub lrt_p99_ms: Vec<f64>,
    pub block_p99_ms: Vec<f64>,
    pub arq_p99_ms: Vec<f64>,
    pub lrt_p99: MeanCi,
    pub p99_ratio_block_over_lrt: MeanCi,
    pub p99_ratio_arq_over_lrt: MeanCi,
}

/// The report `cohort bench lrt --json` prints.
#[derive(Debug, Serialize)]
pub struct LrtReport {
    pub p50_ms: f64,
    pub p90_ms: f64,
    pub p99_ms: f64,
    pub p999_ms: f64,
    pub share_at_owd: f64,
    pub overhead: f64,
    pub delivered: u64,
    pub sent: u64,
    pub in_order: bool,
    pub block_p99_ms: f64,
    pub p99_ratio_block_over_lrt: f64,
    pub arq_p99_ms: f64,
    pub p99_ratio_arq_over_lrt: f64,
    /// The top-level figures pool every run's delays; these are the runs one by one.
    pub runs: RunFigures,
    pub lrt: SchemeFigures,
    pub block: SchemeFigures,
    /// Selective-repeat ARQ ([`crate::arq`]) on the same link.
    pub arq: SchemeFigures,
    /// Offered load including LRT's redundancy at the link's mean loss, over the link rate.
    pub offered_load_share: f64,
    pub capacity_note: String,
    pub params: LrtParams,
    pub duration_s: f64,
    pub command: String,
}

/// Either end of a scheme under test.
trait End {
    fn poll_transmit(&mut self, now: Instant, pn: u64, buf: &mut [u8]) -> Option<usize>;
    fn handle_packet(&mut self, now: Instant, pn: u64, bytes: &[u8]);
    fn poll_timeout(&self) -> Option<Instant>;
    fn handle_timeout(&mut self, now: Instant);
    fn send(&mut self, msg: &[u8]);
    fn recv(&mut self) -> Option<Vec<u8>>;
}

impl End for Connection {
    fn poll_transmit(&mut self, now: Instant, pn: u64, buf: &mut [u8]) -> Option<usize> {
        Connection::poll_transmit(self, now, pn, buf)
    }
    fn handle_packet(&mut self, now: Instant, pn: u64, bytes: &[u8]) {
        Connection::handle_packet(self, now, pn, bytes)
    }
    fn poll_timeout(&self) -> Option<Instant> {
        Connection::poll_timeout(self)
    }
    fn handle_timeout(&mut self, now: Instant) {
        Connection::handle_timeout(self, now)
    }
    fn send(&mut self, msg: &[u8]) {
        // The send buffer (8 MiB) holds far more than any run offers.
        let _ = Connection::send(self, msg);
    }
    fn recv(&mut self) -> Option<Vec<u8>> {
        Connection::recv(self).ok().flatten()
    }
}

impl End for ArqSender {
    fn poll_transmit(&mut self, now: Instant, pn: u64, buf: &mut [u8]) -> Option<usize> {
        ArqSender::poll_transmit(self, now, pn, buf)
    }
    fn handle_packet(&mut self, now: Instant, _pn: u64, bytes: &[u8]) {
        ArqSender::handle_packet(self, now, bytes)
    }
    fn poll_timeout(&self) -> Option<Instant> {
        ArqSender::poll_timeout(self)
    }
    fn handle_timeout(&mut self, now: Instant) {
        ArqSender::handle_timeout(self, now)
    }
    fn send(&mut self, msg: &[u8]) {
        ArqSender::send(self, msg)
    }
    fn recv(&mut self) -> Option<Vec<u8>> {
        None
    }
}

impl End for ArqReceiver {
    fn poll_transmit(&mut self, now: Instant, _pn: u64, buf: &mut [u8]) -> Option<usize> {
        ArqReceiver::poll_transmit(self, now, buf)
    }
    fn handle_packet(&mut self, now: Instant, pn: u64, bytes: &[u8]) {
        ArqReceiver::handle_packet(self, now, pn, bytes)
    }
    fn poll_timeout(&self) -> Option<Instant> {
        ArqReceiver::poll_timeout(self)
    }
    fn handle_timeout(&mut self, _now: Instant) {}
    fn send(&mut self, _msg: &[u8]) {}
    fn recv(&mut self) -> Option<Vec<u8>> {
        self.messages.pop_front()
    }
}

impl End for BlockSender {
    fn poll_transmit(&mut self, now: Instant, pn: u64, buf: &mut [u8]) -> Option<usize> {
        BlockSender::poll_transmit(self, now, pn, buf)
    }
    fn handle_packet(&mut self, now: Instant, _pn: u64, bytes: &[u8]) {
        BlockSender::handle_packet(self, now, bytes)
    }
    fn poll_timeout(&self) -> Option<Instant> {
        BlockSender::poll_timeout(self)
    }
    fn handle_timeout(&mut self, _now: Instant) {}
    fn send(&mut self, msg: &[u8]) {
        BlockSender::send(self, msg)
    }
    fn recv(&mut self) -> Option<Vec<u8>> {
        None
    }
}

impl End for BlockReceiver {
    fn poll_transmit(&mut self, _now: Instant, _pn: u64, buf: &mut [u8]) -> Option<usize> {
        BlockReceiver::poll_transmit(self, buf)
    }
    fn handle_packet(&mut self, _now: Instant, pn: u64, bytes: &[u8]) {
        BlockReceiver::handle_packet(self, pn, bytes)
    }
    fn poll_timeout(&self) -> Option<Instant> {
        None
    }
    fn handle_timeout(&mut self, _now: Instant) {}
    fn send(&mut self, _msg: &[u8]) {}
    fn recv(&mut self) -> Option<Vec<u8>> {
        self.messages.pop_front()
    }
}

fn message(i: u64, size: usize) -> Vec<u8> {
    let mut m = vec![0u8; size.max(8)];
    m[..8].copy_from_slice(&i.to_be_bytes());
    for (k, b) in m.iter_mut().enumerate().skip(8) {
        *b = (i as usize).wrapping_mul(31).wrapping_add(k) as u8;
    }
    m
}

fn link_params(p: &LrtParams) -> LinkParams {
    // A drop-tail queue of 100 ms at the link rate.
    LinkParams {
        loss: p.loss,
        ..LinkParams::clean(Duration::from_secs_f64(p.owd_ms / 1000.0), (p.rate_mbps * 1e6) as u64)
    }
}

/// Runs one scheme: `a` sends, `b` receives, over a fresh pair of link directions.
fn run_scheme(p: &LrtParams, a: &mut dyn End, b: &mut dyn End, start: Instant) -> Result<SchemeFigures, String> {
    let lp = link_params(p);
    let Duplex { up: mut ab, down: mut ba } =
        Duplex::<(u64, Vec<u8>)>::new(lp, lp, p.seed).map_err(|e| format!("link: {e}"))?;
    let interval = Duration::from_secs_f64(p.interval_ms / 1000.0);
    let warmup = Duration::from_secs_f64(p.warmup_ms / 1000.0);
    let owd = Duration::from_secs_f64(p.owd_ms / 1000.0);
    let send_at = |i: u64| start + interval.mul_f64(i as f64);
    let end_of_sending = send_at(p.count);
    let give_up = end_of_sending + Duration::from_secs(60);
    let (mut pn_a, mut pn_b) = (0u64, 0u64);
    let mut buf = vec![0u8; 70_000];
    let mut now = Instant::ZERO;
    let mut next_msg = 0u64;
    let mut got: Vec<(u64, Instant)> = Vec::with_capacity(p.count as usize);
    let mut f = SchemeFigures { sent: p.count, ..Default::default() };
    loop {
        while next_msg < p.count && send_at(next_msg) <= now {
            a.send(&message(next_msg, p.size));
            next_msg += 1;
        }
        while let Some((pn, pkt)) = ab.pop_due(now) {
            b.handle_packet(now, pn, &pkt);
        }
        while let Some((pn, pkt)) = ba.pop_due(now) {
            a.handle_packet(now, pn, &pkt);
        }
        a.handle_timeout(now);
        b.handle_timeout(now);
        while let Some(n) = a.poll_transmit(now, pn_a, &mut buf) {
            ab.send(now, n + OVERHEAD + UDP_IP, (pn_a, buf[..n].to_vec()));
            pn_a += 1;
        }
        while let Some(n) = b.poll_transmit(now, pn_b, &mut buf) {
            ba.send(now, n + OVERHEAD + UDP_IP, (pn_b, buf[..n].to_vec()));
            pn_b += 1;
        }
        while let Some(m) = b.recv() {
            let i = m.get(..8).map_or(u64::MAX, |h| u64::from_be_bytes(h.try_into().unwrap_or([0xFF; 8])));
            got.push((i, now));
        }
        if got.len() as u64 >= p.count || now > give_up {
            break;
        }
        let next = [
            (next_msg < p.count).then(|| send_at(next_msg)),
            a.poll_timeout(),
            b.poll_timeout(),
            ab.next_at(),
            ba.next_at(),
        ]
        .into_iter()
        .flatten()
        .min();
        match next {
            Some(t) => now = now.max(t),
            None => break,
        }
    }
    let mut expected = 0u64;
    f.in_order = true;
    let mut seen = vec![false; p.count as usize];
    for &(i, at) in &got {
        let Some(s) = seen.get_mut(i as usize) else {
            f.in_order = false;
            continue;
        };
        if *s {
            f.duplicates += 1;
            continue;
        }
        *s = true;
        f.delivered += 1;
        if i != expected {
            f.in_order = false;
        }
        expected = i + 1;
        if send_at(i) >= start + warmup {
            f.delays_ms.push((at - send_at(i)).as_secs_f64() * 1000.0);
        }
    }
    f.delays_ms.sort_by(f64::total_cmp);
    f.measured = f.delays_ms.len() as u64;
    f.delay = DelayFigures::of(&f.delays_ms, owd.as_secs_f64() * 1000.0);
    let (sa, sb) = (ab.stats(), ba.stats());
    f.overhead = (sa.offered_bytes + sb.offered_bytes) as f64 / (p.count as f64 * p.size as f64);
    f.packets_forward = sa.offered;
    f.packets_backward = sb.offered;
    f.lost_by_link = sa.lost + sb.lost + sa.queue_drops + sb.queue_drops;
    Ok(f)
}

/// The three schemes' figures at one point.
#[derive(Debug, Clone)]
pub struct PointFigures {
    pub lrt: SchemeFigures,
    pub block: SchemeFigures,
    pub arq: SchemeFigures,
}

/// Runs LRT (with `cfg`), the block scheme and selective-repeat ARQ on the same link, one
/// after the other, with the same seed; an invalid link is an error.
pub fn run_point(p: &LrtParams, cfg: &Config) -> Result<PointFigures, String> {
    let mut a = Connection::connect(cfg.clone(), 1, Instant::ZERO).map_err(|e| format!("lrt config: {e}"))?;
    let mut b = Connection::accept(cfg.clone(), Instant::ZERO).map_err(|e| format!("lrt config: {e}"))?;
    // LRT's handshake takes one round trip; start the clock for every scheme after it.
    let start = Instant::ZERO + Duration::from_secs_f64(p.owd_ms * 4.0 / 1000.0 + 0.1);
    let lrt = run_scheme(p, &mut a, &mut b, start)?;
    debug_assert!(matches!(a.state(), State::Established | State::Closed(_)));
    let bc = BlockConfig { symbol_size: cfg.symbol_size, ..BlockConfig::default() };
    let (mut bs, mut br) = (BlockSender::new(bc.clone()), BlockReceiver::new(bc));
    let block = run_scheme(p, &mut bs, &mut br, start)?;
    let ac = ArqConfig {
        symbol_size: cfg.symbol_size,
        rate_bps: (cfg.rate_bps as f64 * cfg.rate_share) as u64,
        burst_bytes: cfg.burst_bytes,
        ack_delay: cfg.ack_delay,
        ..ArqConfig::default()
    };
    let (mut xs, mut xr) = (ArqSender::new(ac.clone()), ArqReceiver::new(ac));
    let arq = run_scheme(p, &mut xs, &mut xr, start)?;
    Ok(PointFigures { lrt, block, arq })
}

/// Runs LRT, the block scheme and selective-repeat ARQ on the same link; an invalid link is
/// an error.
pub fn run(p: &LrtParams, progress: impl FnMut(&Step)) -> Result<LrtReport, String> {
    let cfg = Config { rate_bps: (p.rate_mbps * 1e6) as u64, ..Config::default() };
    let mut plan = Plan::new(p.reps.max(1), progress);
    let points = (0..p.reps.max(1))
        .map(|k| {
            plan.begin(&format!("repetition {} of {}: LRT, block, ARQ", k + 1, p.reps.max(1)));
            run_point(&LrtParams { seed: p.seed + k, ..p.clone() }, &cfg)
        })
        .collect::<Result<Vec<_>, _>>()?;
    plan.finish();
    let pool = |f: fn(&PointFigures) -> &SchemeFigures| {
        SchemeFigures::pooled(&points.iter().map(f).collect::<Vec<_>>(), p.owd_ms)
    };
    let (lrt, block, arq) = (pool(|x| &x.lrt), pool(|x| &x.block), pool(|x| &x.arq));
    let p99s = |f: fn(&PointFigures) -> &SchemeFigures| points.iter().map(|x| round(f(x).delay.p99_ms, 2)).collect();
    let ratio = |f: fn(&PointFigures) -> &SchemeFigures| {
        MeanCi::of(&points.iter().map(|x| f(x).delay.p99_ms / x.lrt.delay.p99_ms).collect::<Vec<_>>())
    };
    let runs = RunFigures {
        lrt_p99_ms: p99s(|x| &x.lrt),
        block_p99_ms: p99s(|x| &x.block),
        arq_p99_ms: p99s(|x| &x.arq),
        lrt_p99: MeanCi::of(&points.iter().map(|x| x.lrt.delay.p99_ms).collect::<Vec<_>>()),
        p99_ratio_block_over_lrt: ratio(|x| &x.block),
        p99_ratio_arq_over_lrt: ratio(|x| &x.arq),
    };
    let per_msg =
        (p.size + 4).div_ceil(cfg.symbol_size) as f64 * (p.size.min(cfg.symbol_size) + 12 + OVERHEAD + UDP_IP) as f64;
    let load = per_msg * 8.0 / (p.interval_ms / 1000.0)
        * (1.0
            + cohort_proto::lrt::pace::redundancy(
                p.loss.mean(),
                1.0,
                cfg.redundancy_spread,
                cfg.redundancy_min,
                cfg.redundancy_max,
            ));
    let share = load / (p.rate_mbps * 1e6 * cfg.rate_share);
    let capacity_note = if share > 1.0 {
        format!(
            "offered load with redundancy is {:.0}% of the usable link rate: queues grow, delays measure the overload",
            share * 100.0
        )
    } else {
        "offered load fits the link".to_string()
    };
    Ok(LrtReport {
        p50_ms: lrt.delay.p50_ms,
        p90_ms: lrt.delay.p90_ms,
        p99_ms: lrt.delay.p99_ms,
        p999_ms: lrt.delay.p999_ms,
        share_at_owd: lrt.delay.share_at_owd,
        overhead: lrt.overhead,
        delivered: lrt.delivered,
        sent: lrt.sent,
        in_order: lrt.in_order,
        block_p99_ms: block.delay.p99_ms,
        p99_ratio_block_over_lrt: block.delay.p99_ms / lrt.delay.p99_ms,
        arq_p99_ms: arq.delay.p99_ms,
        p99_ratio_arq_over_lrt: arq.delay.p99_ms / lrt.delay.p99_ms,
        runs,
        offered_load_share: share,
        capacity_note,
        duration_s: (p.count as f64 * p.interval_ms + p.warmup_ms) / 1000.0,
        command: command(p),
        lrt,
        block,
        arq,
        params: p.clone(),
    })
}

fn command(p: &LrtParams) -> String {
    let loss = match p.loss {
        LossModel::Iid { p } => format!("--loss {p} --loss-model iid"),
        LossModel::GilbertElliott { p_gb, p_bg, loss_bad, .. } => {
            format!("--loss {loss_bad} --loss-model ge --ge-p-gb {p_gb} --ge-p-bg {p_bg}")
        }
    };
    format!(
        "cohort bench lrt --json --owd-ms {} {loss} --rate-mbps {} --size {} --interval-ms {} --count {} --seed {} --reps {}",
        p.owd_ms, p.rate_mbps, p.size, p.interval_ms, p.count, p.seed, p.reps
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_lossy_run_delivers_everything_in_order_for_both_schemes() {
        let p = LrtParams { count: 400, warmup_ms: 50.0, reps: 2, ..LrtParams::default() };
        let r = run(&p, crate::progress::quiet).unwrap();
        assert_eq!(r.runs.lrt_p99_ms.len(), 2);
        assert_eq!(r.runs.p99_ratio_block_over_lrt.runs, 2);
        for f in [&r.lrt, &r.block, &r.arq] {
            assert_eq!(f.delivered, 800, "two runs of 400, pooled");
            assert!(f.in_order);
            assert_eq!(f.duplicates, 0);
            assert!(f.lost_by_link > 0);
            assert!(f.delay.p50_ms >= p.owd_ms);
        }
        let v = serde_json::to_value(&r).unwrap();
        for k in ["p50_ms", "p99_ms", "p999_ms", "share_at_owd", "overhead", "block_p99_ms", "p99_ratio_block_over_lrt"]
        {
            assert!(v[k].is_number(), "{k}");
        }
    }
}

#[cfg(test)]
mod invalid {
    #[test]
    fn invalid_link_is_an_error() {
        let p = super::LrtParams { loss: super::LossModel::Iid { p: 2.0 }, count: 10, ..Default::default() };
        assert!(super::run(&p, crate::progress::quiet).unwrap_err().contains("probability"));
    }
}
