//! The virtual-preemption layer of seed 000 §IV-C (Algorithm 2), sans-IO.
//!
//! The network card finishes whatever it was handed before it can send a newly arrived LS
//! message (§II-C, Fig. 3: frame aggregation). So the layer hands BH packets to the card only
//! while they can be finished before the next protection window starts, and none during a
//! window; when the LS message arrives, the card's BH queue is empty.
//!
//! * **Completion-time table** (Alg. 2 lines 11-21): for every BH packet handed to the card
//!   the layer notes the time and `n`, the BH packets already in the card; when the card
//!   reports it complete, `t_comp − t_enq` is a sample of `CTT[n]`, the time the card needs
//!   for a packet with `n` ahead of it. Each row keeps the latest
//!   [`VplConfig::ctt_samples`] (`N_samp`), and only those younger than
//!   [`VplConfig::ctt_max_age`]: a row refills only when packets go with that many ahead, so
//!   one slow sample (a packet that waited out a burst) would otherwise keep its row's
//!   estimate above every gap between windows, the layer would release nothing, and nothing
//!   would replace the sample (a stall seen in the simulator, SchedWiFi's windows on
//!   `shared_tx`, seed 2: one robot's bulk held for good). An emptied row falls back on the
//!   rate.
//! * **Release decision** (Alg. 2 lines 1-10): with `t₁` the next window's start, a packet
//!   handed over now with `n` ahead finishes after about `percentile(CTT[n], p_prot)`; the
//!   layer releases the queue's packets one by one while that fits before `t₁` and stops at
//!   the first that does not (the paper "pauses the kernel queue"). Inside a window
//!   (`t₁ ≤ now ≤ t₂`) it releases nothing and asks to be called again at `t₂`, when the
//!   controller has the next window (lines 22-25).
//! * **Rate fallback.** A row without samples yet (a queue depth never seen) is estimated
//!   from the link rate (an EWMA of bytes over completion intervals while the card is busy)
//!   and the bytes ahead: `(bytes in the card + bytes released) · 8 / rate`. Packets the card
//!   reports complete at one instant (the frames of one A-MPDU) form one sample: their bytes
//!   together over the time since the card started on the first of them.
//! * **Allowance.** A window may start with up to [`VplConfig::window_allowance_bytes`] of BH
//!   still in the card (a packet is released while its estimated completion falls before
//!   `t₁` plus the time those bytes take at the rate estimate): the LS message then waits as
//!   it would behind the aggregate on the air on a card with per-AC hardware queues, and the
//!   card does not sit idle for the whole drain margin before every window. `0` is the
//!   paper's empty card.
//! * **Token end.** The bulk token's lease end ([`super::client::Client::send_until`]) acts
//!   as a window without end: BH handed to the card finishes before the robot stops holding
//!   the token, so no BH of this robot is on the air after its lease.

use super::controller::Window;
use cohort_time::Instant;
use std::collections::VecDeque;
use std::time::Duration;

/// Settings of the virtual-preemption layer.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct VplConfig {
    /// `N_samp`: samples kept per CTT row. Default 64.
    pub ctt_samples: usize,
    /// `p_prot`: the percentile of a CTT row used as the completion time. The paper gives no
    /// value; default 0.95, matching the 95 % accuracy of the windows (§IV-B).
    pub percentile: f64,
    /// Rows of the CTT (card queue depths tracked); deeper queues use the rate fallback.
    /// Default 128.
    pub ctt_rows: usize,
    /// Link rate assumed before the first measurement, bit/s. Default 20 Mbit/s
    /// (conservative for 802.11n/ac).
    pub initial_rate_bps: u64,
    /// A CTT sample older than this no longer counts. Default 1 s (30 periods of a 30 Hz
    /// loop; the paper keeps samples by count only, which can stall, see the module docs).
    pub ctt_max_age: Duration,
    /// EWMA gain of the rate estimate. Default 1/8.
    pub rate_gain: f64,
    /// BH bytes the card may still hold when a protection window starts. The LS message then
    /// waits for at most these, as on a card with a hardware queue per access category an
    /// AC_VO frame waits for the aggregate already on the air and no more (the `per_ac`
    /// profile; seed 000 §II-C: the harm is the BH *queued* in the card, Fig. 3). `0` is
    /// Algorithm 2 as written: the card's BH queue empty. Default 65 535 B, one A-MPDU at
    /// the HT/VHT limit mac80211 and ns-3 use for AC_BE. The token end is always strict.
    pub window_allowance_bytes: u32,
}

impl Default for VplConfig {
    fn default() -> Self {
        VplConfig {
            ctt_samples: 64,
            percentile: 0.95,
            ctt_rows: 128,
            initial_rate_bps: 20_000_000,
            rate_gain: 0.125,
            ctt_max_age: Duration::from_secs(1),
            window_allowance_bytes: 65_535,
        }
    }
}

impl VplConfig {
    /// Algorithm 2 as the paper writes it: no BH left in the card when a window starts (what a
    /// Time-Aware Shaper's exclusive windows need, and the baseline the default is measured
    /// against).
    pub fn empty_card() -> Self {
        VplConfig { window_allowance_bytes: 0, ..VplConfig::default() }
    }
}

/// An invalid [`VplConfig`].
#[derive(Debug, Clone, Copy, PartialEq, thiserror::Error)]
pub enum VplConfigError {
    #[error("ctt_samples and ctt_rows must be positive")]
    Table,
    #[error("percentile {0} must lie in (0, 1]")]
    Percentile(f64),
    #[error("initial_rate_bps must be positive")]
    Rate,
    #[error("rate_gain {0} must lie in (0, 1]")]
    Gain(f64),
    #[error("ctt_max_age must be positive")]
    MaxAge,
}

impl VplConfig {
    pub fn validate(&self) -> Result<(), VplConfigError> {
        if self.ctt_samples == 0 || self.ctt_rows == 0 {
            return Err(VplConfigError::Table);
        }
        if !(self.percentile > 0.0 && self.percentile <= 1.0) {
            return Err(VplConfigError::Percentile(self.percentile));
        }
        if self.initial_rate_bps == 0 {
            return Err(VplConfigError::Rate);
        }
        if !(self.rate_gain > 0.0 && self.rate_gain <= 1.0) {
            return Err(VplConfigError::Gain(self.rate_gain));
        }
        if self.ctt_max_age.is_zero() {
            return Err(VplConfigError::MaxAge);
        }
        Ok(())
    }
}

/// The completion-time table `CTT` of Algorithm 2.
#[derive(Debug, Clone)]
pub struct CompletionTable {
    /// Per row: (when recorded, completion time), oldest first.
    rows: Vec<VecDeque<(Instant, Duration)>>,
    keep: usize,
    max_age: Duration,
}

impl CompletionTable {
    /// `rows` queue depths, the latest `keep` samples of each, none older than `max_age`.
    pub fn new(rows: usize, keep: usize, max_age: Duration) -> Self {
        CompletionTable { rows: vec![VecDeque::new(); rows], keep, max_age }
    }

    /// A packet enqueued with `n` BH packets ahead took `d` to complete, known at `now`
    /// (lines 17-21).
    pub fn record(&mut self, now: Instant, n: usize, d: Duration) {
        if let Some(row) = self.rows.get_mut(n) {
            if row.len() >= self.keep {
                row.pop_front();
            }
            row.push_back((now, d));
        }
    }

    /// `percentile(CTT[n], p)` over the samples not older than the table's age limit at
    /// `now`, or `None` if row `n` has none (line 3).
    pub fn estimate(&self, now: Instant, n: usize, p: f64) -> Option<Duration> {
        let row = self.rows.get(n)?;
        let mut v: Vec<Duration> = row.iter().filter(|(at, _)| now - *at <= self.max_age).map(|&(_, d)| d).collect();
        if v.is_empty() {
            return None;
        }
        v.sort_unstable();
        let idx = ((p * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1;
        Some(v[idx])
    }

    pub fn samples(&self, n: usize) -> usize {
        self.rows.get(n).map_or(0, VecDeque::len)
    }
}

/// The layer's answer: hand `packets` (the queue's first ones, `bytes` in all) to the card
/// now, and call again at `recheck_at` (or on the next enqueue, completion or window change).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Release {
    pub packets: usize,
    pub bytes: u64,
    pub recheck_at: Option<Instant>,
    /// The window (or token end, as a window without end) that stopped the release, if any.
    pub blocked_by: Option<Window>,
}

/// Counters, for benchmarks and diagnostics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct VplStats {
    pub released_packets: u64,
    pub released_bytes: u64,
    /// Release decisions that held packets back.
    pub pauses: u64,
    pub completions: u64,
    /// Completion reports for packets the layer did not know.
    pub unknown_completions: u64,
}

#[derive(Debug, Clone, Copy)]
struct InCard {
    id: u64,
    bytes: u32,
    t_enq: Instant,
    ahead: usize,
}

/// The virtual-preemption layer of one robot's card.
#[derive(Debug, Clone)]
pub struct Vpl {
    cfg: VplConfig,
    ctt: CompletionTable,
    in_card: VecDeque<InCard>,
    bytes_in_card: u64,
    rate_bps: f64,
    last_completion: Option<Instant>,
    /// Completions at one instant not yet in the rate estimate: since when the card was busy
    /// with them, that instant, their bytes.
    batch: Option<(Instant, Instant, u64)>,
    stats: VplStats,
}

impl Vpl {
    pub fn new(cfg: VplConfig) -> Result<Self, VplConfigError> {
        cfg.validate()?;
        Ok(Vpl {
            cfg,
            ctt: CompletionTable::new(cfg.ctt_rows, cfg.ctt_samples, cfg.ctt_max_age),
            in_card: VecDeque::new(),
            bytes_in_card: 0,
            rate_bps: cfg.initial_rate_bps as f64,
            last_completion: None,
            batch: None,
            stats: VplStats::default(),
        })
    }

    pub fn table(&self) -> &CompletionTable {
        &self.ctt
    }

    /// The current link-rate estimate, bit/s.
    pub fn rate_bps(&self) -> f64 {
        self.rate_with_batch()
    }

    /// BH packets and bytes handed to the card and not yet complete.
    pub fn in_card(&self) -> (usize, u64) {
        (self.in_card.len(), self.bytes_in_card)
    }

    pub fn stats(&self) -> VplStats {
        self.stats
    }

    /// A BH packet `id` of `bytes` was handed to the card (Alg. 2 lines 11-15).
    pub fn on_enqueue(&mut self, now: Instant, id: u64, bytes: u32) {
        let ahead = self.in_card.len();
        self.in_card.push_back(InCard { id, bytes, t_enq: now, ahead });
        self.bytes_in_card += u64::from(bytes);
    }

    /// The card reports BH packet `id` complete (lines 16-21).
    pub fn on_complete(&mut self, now: Instant, id: u64) {
        let Some(at) = self.in_card.iter().position(|p| p.id == id) else {
            self.stats.unknown_completions += 1;
            return;
        };
        let Some(p) = self.in_card.remove(at) else { return };
        self.stats.completions += 1;
        self.bytes_in_card -= u64::from(p.bytes);
        self.ctt.record(now, p.ahead, now - p.t_enq);
        // One rate sample per completion instant: an aggregate's frames all complete when it
        // does, and each alone over the aggregate's time would count a fraction of the rate.
        match &mut self.batch {
            Some((_, at, bytes)) if *at == now => *bytes += u64::from(p.bytes),
            _ => {
                self.close_batch();
                // The card worked on this batch since the later of its first packet's
                // hand-over and the previous completion.
                let busy_from = self.last_completion.map_or(p.t_enq, |l| l.max(p.t_enq));
                self.batch = Some((busy_from, now, u64::from(p.bytes)));
            }
        }
        self.last_completion = Some(now);
    }

    /// Folds the pending completion batch into the rate estimate.
    fn close_batch(&mut self) {
        if let Some((from, at, bytes)) = self.batch.take() {
            let busy = at - from;
            if !busy.is_zero() {
                let sample = bytes as f64 * 8.0 / busy.as_secs_f64();
                self.rate_bps += self.cfg.rate_gain * (sample - self.rate_bps);
            }
        }
    }

    /// How long after hand-over at `now` a packet with `ahead` packets (and `bytes_ahead`
    /// bytes, its own included) before it would complete.
    pub fn completion_estimate(&self, now: Instant, ahead: usize, bytes_through: u64) -> Duration {
        self.ctt
            .estimate(now, ahead, self.cfg.percentile)
            .unwrap_or_else(|| Duration::from_secs_f64(bytes_through as f64 * 8.0 / self.rate_with_batch().max(1.0)))
    }

    /// The rate estimate with the pending completion batch folded in (without keeping it:
    /// more of the batch may still complete at its instant).
    fn rate_with_batch(&self) -> f64 {
        match self.batch {
            Some((from, at, bytes)) if at > from => {
                let sample = bytes as f64 * 8.0 / (at - from).as_secs_f64();
                self.rate_bps + self.cfg.rate_gain * (sample - self.rate_bps)
            }
            _ => self.rate_bps,
        }
    }

    /// How much of the BH queue (`queue`: packet sizes in send order) may go to the card
    /// now, given the protection windows (sorted, e.g. [`super::controller::Controller::windows`])
    /// and the end of the bulk token's lease, if this robot holds it (`None`: it does not, so
    /// nothing may go).
    pub fn poll_release(
        &mut self,
        now: Instant,
        windows: &[Window],
        queue: &[u32],
        send_until: Option<Instant>,
    ) -> Release {
        let Some(token_end) = send_until.filter(|&t| t > now) else {
            return self.pause(Release { packets: 0, bytes: 0, recheck_at: None, blocked_by: None }, queue);
        };
        let next = windows.iter().find(|w| w.end >= now).copied();
        if let Some(w) = next
            && w.start <= now
        {
            // Inside a window (line 5, second half): hold everything until it ends.
            return self.pause(Release { packets: 0, bytes: 0, recheck_at: Some(w.end), blocked_by: Some(w) }, queue);
        }
        let token = Window { start: token_end, end: Instant::FAR_FUTURE };
        let (limit, allowance) = match next {
            Some(w) if w.start < token_end => (w, self.cfg.window_allowance_bytes),
            _ => (token, 0),
        };
        // What the card may still hold at the limit, as the time it needs to send it.
        let room =
            limit.start - now + Duration::from_secs_f64(f64::from(allowance) * 8.0 / self.rate_with_batch().max(1.0));
        let (mut packets, mut bytes) = (0usize, 0u64);
        let (ahead0, bytes0) = (self.in_card.len(), self.bytes_in_card);
        for &size in queue {
            let through = bytes0 + bytes + u64::from(size);
            if self.completion_estimate(now, ahead0 + packets, through) >= room {
                break;
            }
            packets += 1;
            bytes += u64::from(size);
        }
        let blocked = packets < queue.len();
        let r = Release {
            packets,
            bytes,
            recheck_at: blocked.then_some(limit.end).filter(|&t| t != Instant::FAR_FUTURE),
            blocked_by: blocked.then_some(limit),
        };
        self.stats.released_packets += packets as u64;
        self.stats.released_bytes += bytes;
        self.pause(r, queue)
    }

    fn pause(&mut self, r: Release, queue: &[u32]) -> Release {
        if r.packets < queue.len() {
            self.stats.pauses += 1;
        }
        r
    }
}
