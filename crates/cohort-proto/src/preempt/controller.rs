//! The preemption controller of seed 000 §IV-B: a time model per latency-sensitive flow and
//! the protection windows (PW) the virtual-preemption layer keeps clear of bulk traffic.
//!
//! **Time model.** Message `k` of an LS flow arrives at `T_k ~ N(p·k + q, σ²)` (§IV-B, Fig.
//! 6). [`FlowModel`] fits `t_k ≈ a·k + b` by least squares over the last
//! [`ControllerConfig::fit_samples`] arrivals (refitting at every sample, which subsumes the
//! paper's "recompute after a configured interval"), with σ the residual standard deviation
//! (`n − 2` degrees of freedom), floored at [`ControllerConfig::sigma_floor`].
//!
//! **Rate changes.** The paper refits when a prediction misses by more than 2σ; Cohort uses
//! [`ControllerConfig::refit_sigmas`] (default 3σ, so a Gaussian flow trips it on 0.3 % of
//! messages rather than 5 %). A miss does not throw the model away at once: the arrival and
//! the one before it form a *candidate* model (period = their gap), and while the candidate
//! lives, windows are kept for both. Arrivals the candidate predicts join it; one the old
//! model predicts but the candidate does not ends it (the miss was a spike). Once the
//! candidate holds four arrivals (three at the new rate) it replaces the model, and the new
//! fit keeps the old σ as a floor until it has half its samples. So after a rate change the
//! second message at the new rate, one new period after the first, is already protected. A
//! two-point candidate's prediction `2·t₁ − t₀` has variance `6σ²`, so its tolerance and
//! window use `√6·σ`. A flow whose arrivals keep landing a whole number `g ≥ 2` of periods
//! apart (it slowed down by `g`) is refitted after two such skips in a row.
//!
//! **Windows.** For the next arrival `t̂`, the window is `[t̂ − Δ, t̂ + Δ + margin]` with
//! `Δ = z·σ`: for the paper's accuracy `C = 95 %`, `z ≈ 2` (§IV-B; the prototype uses
//! `√2·erfinv(C)·σ` = 1.96σ), set by [`ControllerConfig::window_sigmas`]; `margin` is the
//! constant the paper extends every window by for late messages (§IV-C, 2 ms). Windows of all
//! flows that overlap are merged into one (§IV-B). Once arrival `k` has been observed its
//! window is dropped, so bulk resumes as soon as the LS message is handed over (Fig. 5 step
//! 3) rather than at the window's end. A flow whose σ exceeds
//! [`ControllerConfig::sigma_max`] is too irregular to protect (the prototype ignores models
//! with σ > 5 ms) and contributes no windows.

use cohort_time::Instant;
use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

/// Settings of the time model and the protection windows.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ControllerConfig {
    /// Arrivals the fit uses (a sliding window). Default 32 (about 1 s at 30 Hz).
    pub fit_samples: usize,
    /// Arrivals needed before the first fit. Default 8.
    pub min_samples: usize,
    /// `z` of `Δ = z·σ`. Default 2.0 (§IV-B: `C = 95 %`).
    pub window_sigmas: f64,
    /// A prediction that misses by more than this many σ starts a candidate model. Default 3.
    pub refit_sigmas: f64,
    /// Added to the end of every window (§IV-C: "empirically set to 2ms").
    pub margin: Duration,
    /// Smallest σ used, so a perfectly regular flow still gets a window. Default 100 µs.
    pub sigma_floor: Duration,
    /// Flows with a larger σ get no windows. Default 5 ms (the prototype's cut-off).
    pub sigma_max: Duration,
}

impl Default for ControllerConfig {
    fn default() -> Self {
        ControllerConfig {
            fit_samples: 32,
            min_samples: 8,
            window_sigmas: 2.0,
            refit_sigmas: 3.0,
            margin: Duration::from_millis(2),
            sigma_floor: Duration::from_micros(100),
            sigma_max: Duration::from_millis(5),
        }
    }
}

/// An invalid [`ControllerConfig`].
#[derive(Debug, Clone, Copy, PartialEq, thiserror::Error)]
pub enum ControllerConfigError {
    #[error("min_samples {min} must be at least 3 and at most fit_samples {fit}")]
    Samples { min: usize, fit: usize },
    #[error("window_sigmas {0} must be positive and finite")]
    WindowSigmas(f64),
    #[error("refit_sigmas {0} must be positive and finite")]
    RefitSigmas(f64),
    #[error("sigma_floor {floor:?} must be positive and below sigma_max {max:?}")]
    Sigma { floor: Duration, max: Duration },
}

impl ControllerConfig {
    pub fn validate(&self) -> Result<(), ControllerConfigError> {
        if self.min_samples < 3 || self.min_samples > self.fit_samples {
            return Err(ControllerConfigError::Samples { min: self.min_samples, fit: self.fit_samples });
        }
        if !(self.window_sigmas.is_finite() && self.window_sigmas > 0.0) {
            return Err(ControllerConfigError::WindowSigmas(self.window_sigmas));
        }
        if !(self.refit_sigmas.is_finite() && self.refit_sigmas > 0.0) {
            return Err(ControllerConfigError::RefitSigmas(self.refit_sigmas));
        }
        if self.sigma_floor.is_zero() || self.sigma_floor >= self.sigma_max {
            return Err(ControllerConfigError::Sigma { floor: self.sigma_floor, max: self.sigma_max });
        }
        Ok(())
    }

    /// `z` for a two-sided coverage `c` of a normal distribution (`√2·erfinv(c)`, the
    /// prototype's formula), e.g. 0.95 → 1.96; for [`window_sigmas`](Self::window_sigmas).
    pub fn sigmas_for_coverage(c: f64) -> f64 {
        let c = c.clamp(0.0, 0.999_999);
        // Bisection on the coverage of [-z, z], with erf from Abramowitz-Stegun 7.1.26.
        let (mut lo, mut hi) = (0.0f64, 10.0f64);
        for _ in 0..60 {
            let mid = 0.5 * (lo + hi);
            if erf(mid / std::f64::consts::SQRT_2) < c { lo = mid } else { hi = mid }
        }
        0.5 * (lo + hi)
    }
}

fn erf(x: f64) -> f64 {
    let t = 1.0 / (1.0 + 0.327_591_1 * x.abs());
    let poly =
        t * (0.254_829_592 + t * (-0.284_496_736 + t * (1.421_413_741 + t * (-1.453_152_027 + t * 1.061_405_429))));
    let y = 1.0 - poly * (-x * x).exp();
    if x >= 0.0 { y } else { -y }
}

/// A protection window `[start, end]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Window {
    pub start: Instant,
    pub end: Instant,
}

impl Window {
    pub fn contains(&self, t: Instant) -> bool {
        self.start <= t && t <= self.end
    }
}

/// What one arrival did to a [`FlowModel`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Observation {
    /// Still collecting the first samples.
    Warming,
    /// Fits the model (possibly after skipped periods).
    Fitted,
    /// Missed the model by more than `refit_sigmas·σ`: a candidate model was formed.
    Outlier,
    /// The candidate predicted it, but has not been confirmed often enough yet.
    Candidate,
    /// The candidate predicted it for the last time needed (or a run of equal skips
    /// happened): the model restarted at a new rate.
    RateChanged,
    /// Not later than the previous arrival: ignored.
    Ignored,
}

/// Arrivals (the last one at the old rate included) a candidate needs to become the model.
const CANDIDATE_CONFIRM: usize = 4;
/// Spread of a candidate's prediction in σ: `2·t₁ − t₀` has variance `6σ²`; a longer
/// candidate predicts better, so this is conservative for it.
const CANDIDATE_SPREAD: f64 = 2.449_489_742_783_178;

/// A possible new rate: consecutive arrivals from the one before a miss on.
#[derive(Debug, Clone, Default)]
struct Candidate {
    pts: Vec<f64>,
    /// Whether the old model also predicted every arrival that confirmed the candidate.
    main_agrees: bool,
}

/// Least-squares extrapolation of consecutive arrivals `pts` (k = 0, 1, …) to the next one.
fn predict(pts: &[f64]) -> f64 {
    let n = pts.len() as f64;
    if pts.len() < 2 {
        return pts.last().copied().unwrap_or(0.0);
    }
    let mk = (n - 1.0) / 2.0;
    let mt = pts.iter().sum::<f64>() / n;
    let (mut skk, mut skt) = (0.0, 0.0);
    for (k, &t) in pts.iter().enumerate() {
        let dk = k as f64 - mk;
        skk += dk * dk;
        skt += dk * (t - mt);
    }
    mt + skt / skk * (n - mk)
}

/// A fitted line `t_k = phase + period·k` (relative to the model's anchor), in nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Line {
    period: f64,
    phase: f64,
    sigma: f64,
}

/// The time model `{p, q, σ}` of one LS flow (§IV-B).
#[derive(Debug, Clone)]
pub struct FlowModel {
    cfg: ControllerConfig,
    anchor: Instant,
    /// `(k, t − anchor)` of the arrivals in the fit.
    samples: VecDeque<(i64, f64)>,
    line: Option<Line>,
    /// σ carried over a rate change until the new fit has enough samples.
    prior_sigma: f64,
    /// The previous arrival (accepted or not) and the candidate formed from it and the one
    /// before: `(t0, t1)`.
    last: Option<f64>,
    candidate: Option<Candidate>,
    /// Gap (in periods) of the previous arrival if it skipped, for the slow-down rule.
    last_skip: Option<i64>,
    observations: u64,
    outliers: u64,
    rate_changes: u64,
}

impl FlowModel {
    pub fn new(cfg: ControllerConfig) -> Result<Self, ControllerConfigError> {
        cfg.validate()?;
        Ok(Self::with(cfg))
    }

    fn with(cfg: ControllerConfig) -> Self {
        FlowModel {
            cfg,
            anchor: Instant::ZERO,
            samples: VecDeque::new(),
            line: None,
            prior_sigma: 0.0,
            last: None,
            candidate: None,
            last_skip: None,
            observations: 0,
            outliers: 0,
            rate_changes: 0,
        }
    }

    /// The estimated period `p`, once fitted.
    pub fn period(&self) -> Option<Duration> {
        self.line.map(|l| Duration::from_nanos(l.period.max(0.0) as u64))
    }

    /// The residual standard deviation σ used for windows (floored), once fitted.
    pub fn sigma(&self) -> Option<Duration> {
        self.line.map(|_| Duration::from_nanos(self.sigma_eff() as u64))
    }

    /// The residual standard deviation of the fit itself, unfloored.
    pub fn fit_sigma(&self) -> Option<Duration> {
        self.line.map(|l| Duration::from_nanos(l.sigma as u64))
    }

    pub fn samples(&self) -> usize {
        self.samples.len()
    }

    pub fn rate_changes(&self) -> u64 {
        self.rate_changes
    }

    /// Arrivals that missed the model (spikes and the first arrivals at a new rate).
    pub fn outliers(&self) -> u64 {
        self.outliers
    }

    /// Arrivals observed (ignored ones not counted).
    pub fn observations(&self) -> u64 {
        self.observations
    }

    /// Whether the flow is regular enough to protect.
    pub fn protectable(&self) -> bool {
        self.line.is_some() && self.sigma_eff() <= self.cfg.sigma_max.as_nanos() as f64
    }

    fn sigma_eff(&self) -> f64 {
        let Some(l) = self.line else { return 0.0 };
        // A σ from few samples is unreliable (and often tiny): after a rate change keep the old
        // σ as a floor until the new fit has half its samples.
        let settled = self.samples.len() >= (self.cfg.fit_samples / 2).max(self.cfg.min_samples);
        let fitted = if settled { l.sigma } else { l.sigma.max(self.prior_sigma) };
        fitted.max(self.cfg.sigma_floor.as_nanos() as f64)
    }

    fn rel(&self, t: Instant) -> f64 {
        t.as_nanos() as f64 - self.anchor.as_nanos() as f64
    }

    fn abs(&self, rel: f64) -> Instant {
        let ns = self.anchor.as_nanos() as f64 + rel;
        Instant::from_nanos(if ns <= 0.0 { 0 } else { ns as u64 })
    }

    /// Records an arrival at `t` (the flow's message was handed to the stack).
    pub fn observe(&mut self, t: Instant) -> Observation {
        if self.observations == 0 {
            self.anchor = t;
        }
        let x = self.rel(t);
        if self.last.is_some_and(|l| x <= l) {
            return Observation::Ignored;
        }
        self.observations += 1;
        let prev = self.last.replace(x);
        let Some(line) = self.line else {
            let k = self.samples.back().map_or(0, |s| s.0 + 1);
            self.push(k, x);
            return Observation::Warming;
        };
        let sigma = self.sigma_eff();
        let last_k = self.samples.back().map_or(0, |s| s.0);
        // Does the model predict it: the next message, or a later one (periods skipped)?
        let tol = self.cfg.refit_sigmas * sigma;
        let k = (((x - line.phase) / line.period).round() as i64).max(last_k + 1);
        let main_ok = (x - (line.phase + line.period * k as f64)).abs() <= tol;
        // Does the candidate (a new rate) predict it? Its tolerance is its window's half-width.
        let cand_tol = self.cfg.window_sigmas * CANDIDATE_SPREAD * sigma;
        let cand_ok = self.candidate.as_ref().is_some_and(|c| (x - predict(&c.pts)).abs() <= cand_tol);
        if cand_ok && let Some(c) = self.candidate.as_mut() {
            c.pts.push(x);
            c.main_agrees &= main_ok;
            if c.pts.len() >= CANDIDATE_CONFIRM {
                let c = self.candidate.take().unwrap_or_default();
                if !c.main_agrees {
                    self.restart(&c.pts, sigma);
                    return Observation::RateChanged;
                }
                // The model predicted every confirming arrival too: the miss was a spike
                // that the candidate absorbed; no rate change.
            }
        }
        if main_ok {
            if !cand_ok {
                // The miss was a spike.
                self.candidate = None;
            }
            let gap = k - last_k;
            if gap >= 2 && self.last_skip == Some(gap) && self.samples.len() >= 2 {
                // Two equal skips in a row: the flow slowed down by `gap`; the last two
                // arrivals and this one are consecutive at the new rate.
                let n = self.samples.len();
                let pts = [self.samples[n - 2].1, self.samples[n - 1].1, x];
                self.last_skip = None;
                self.restart(&pts, sigma);
                return Observation::RateChanged;
            }
            self.last_skip = (gap >= 2).then_some(gap);
            self.push(k, x);
            return Observation::Fitted;
        }
        self.last_skip = None;
        if cand_ok {
            return Observation::Candidate;
        }
        // A miss: a new candidate from the previous arrival and this one.
        self.outliers += 1;
        self.candidate = prev.map(|p| Candidate { pts: vec![p, x], main_agrees: true });
        Observation::Outlier
    }

    /// Restarts the fit at a new rate from consecutive arrivals `pts`.
    fn restart(&mut self, pts: &[f64], sigma: f64) {
        self.rate_changes += 1;
        self.prior_sigma = sigma;
        self.candidate = None;
        self.samples.clear();
        for (k, &x) in pts.iter().enumerate() {
            self.samples.push_back((k as i64, x));
        }
        self.refit();
    }

    fn push(&mut self, k: i64, x: f64) {
        self.samples.push_back((k, x));
        while self.samples.len() > self.cfg.fit_samples {
            self.samples.pop_front();
        }
        if self.line.is_some() || self.samples.len() >= self.cfg.min_samples {
            self.refit();
        }
    }

    /// Least squares over the samples.
    fn refit(&mut self) {
        let n = self.samples.len() as f64;
        if n < 2.0 {
            return;
        }
        let k0 = self.samples[0].0 as f64;
        let (mut sk, mut st) = (0.0, 0.0);
        for &(k, t) in &self.samples {
            sk += k as f64 - k0;
            st += t;
        }
        let (mk, mt) = (sk / n, st / n);
        let (mut skk, mut skt) = (0.0, 0.0);
        for &(k, t) in &self.samples {
            let dk = k as f64 - k0 - mk;
            skk += dk * dk;
            skt += dk * (t - mt);
        }
        if skk <= 0.0 {
            return;
        }
        let period = skt / skk;
        if period <= 0.0 {
            return;
        }
        let phase = mt - period * (mk + k0);
        let mut ssr = 0.0;
        for &(k, t) in &self.samples {
            let r = t - (phase + period * k as f64);
            ssr += r * r;
        }
        let sigma = if n > 2.0 { (ssr / (n - 2.0)).sqrt() } else { 0.0 };
        self.line = Some(Line { period, phase, sigma });
    }

    /// Predicted arrivals whose windows end after `now` and start before `now + horizon`,
    /// pushed into `out`.
    pub fn windows_into(&self, now: Instant, horizon: Duration, out: &mut Vec<Window>) {
        let Some(line) = self.line else { return };
        if !self.protectable() {
            return;
        }
        let sigma = self.sigma_eff();
        let delta = self.cfg.window_sigmas * sigma;
        let margin = self.cfg.margin.as_nanos() as f64;
        let (lo, hi) = (self.rel(now), self.rel(now + horizon));
        let last_k = self.samples.back().map_or(0, |s| s.0);
        // The first k whose window ends after now, but never one already seen.
        let first = (((lo - delta - margin - line.phase) / line.period).floor() as i64).max(last_k + 1);
        let mut k = first;
        loop {
            let t = line.phase + line.period * k as f64;
            if t - delta > hi {
                break;
            }
            if t + delta + margin >= lo {
                out.push(Window { start: self.abs(t - delta), end: self.abs(t + delta + margin) });
            }
            k += 1;
        }
        if let Some(c) = &self.candidate {
            let t = predict(&c.pts);
            let dc = delta * CANDIDATE_SPREAD;
            if t + dc + margin >= lo && t - dc <= hi {
                out.push(Window { start: self.abs(t - dc), end: self.abs(t + dc + margin) });
            }
        }
    }
}

/// Merges overlapping windows (§IV-B): sorts by start and joins each window that starts
/// before the current one ends.
pub fn merge(mut ws: Vec<Window>) -> Vec<Window> {
    ws.sort();
    let mut out: Vec<Window> = Vec::with_capacity(ws.len());
    for w in ws {
        match out.last_mut() {
            Some(l) if w.start <= l.end => l.end = l.end.max(w.end),
            _ => out.push(w),
        }
    }
    out
}

/// The preemption controller of one robot: a [`FlowModel`] per LS flow, merged windows.
#[derive(Debug, Clone)]
pub struct Controller {
    cfg: ControllerConfig,
    flows: BTreeMap<u32, FlowModel>,
}

impl Controller {
    pub fn new(cfg: ControllerConfig) -> Result<Self, ControllerConfigError> {
        cfg.validate()?;
        Ok(Controller { cfg, flows: BTreeMap::new() })
    }

    pub fn config(&self) -> &ControllerConfig {
        &self.cfg
    }

    /// An LS message of `flow` was sent at `now`.
    pub fn observe(&mut self, flow: u32, now: Instant) -> Observation {
        let cfg = self.cfg;
        self.flows.entry(flow).or_insert_with(|| FlowModel::with(cfg)).observe(now)
    }

    /// Forgets a flow (it ended).
    pub fn remove_flow(&mut self, flow: u32) {
        self.flows.remove(&flow);
    }

    pub fn flow(&self, flow: u32) -> Option<&FlowModel> {
        self.flows.get(&flow)
    }

    /// The merged protection windows that end after `now` and start before `now + horizon`.
    pub fn windows(&self, now: Instant, horizon: Duration) -> Vec<Window> {
        let mut ws = Vec::new();
        for m in self.flows.values() {
            m.windows_into(now, horizon, &mut ws);
        }
        merge(ws)
    }

    /// Whether `t` lies in a window predicted now (before `t`'s arrival is observed).
    pub fn in_window(&self, t: Instant) -> bool {
        self.windows(t, Duration::ZERO).iter().any(|w| w.contains(t))
    }
}

/// Settings of the foreign-flow classifier.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ClassifierConfig {
    /// The time model used to judge periodicity.
    pub model: ControllerConfig,
    /// Arrivals needed before a verdict. Default 8.
    pub min_samples: usize,
    /// Largest message an LS flow sends, bytes. Default 64 KiB (the paper's LS messages are
    /// 1-12 KB; its prototype treats messages of 0.5 MiB and more as bulk).
    pub max_message_bytes: u64,
    /// Largest `σ / period` of a periodic flow. Default 0.1.
    pub max_jitter_ratio: f64,
    /// Largest share of arrivals that may miss the model. Default 0.1.
    pub max_outlier_share: f64,
}

impl Default for ClassifierConfig {
    fn default() -> Self {
        ClassifierConfig {
            model: ControllerConfig::default(),
            min_samples: 8,
            max_message_bytes: 64 * 1024,
            max_jitter_ratio: 0.1,
            max_outlier_share: 0.1,
        }
    }
}

/// The classifier's verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FlowClass {
    /// Not enough arrivals yet.
    Undecided,
    /// Periodic and small: protect it.
    LatencySensitive,
    /// Not periodic: `σ / period` above the bound, or no stable period.
    Aperiodic,
    /// A message above `max_message_bytes`.
    TooLarge,
}

/// Why a flow was classified as it was.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Evidence {
    pub class: FlowClass,
    pub messages: u64,
    pub period: Option<Duration>,
    pub sigma: Option<Duration>,
    /// `σ / period` of the fit (unfloored σ).
    pub jitter_ratio: Option<f64>,
    pub mean_bytes: u64,
    pub max_bytes: u64,
    /// Share of arrivals that missed the model.
    pub outlier_share: f64,
    pub rate_changes: u64,
}

/// Recognises LS flows among foreign traffic: periodic (fit residual small against the
/// period) and small (every message under a bound).
#[derive(Debug, Clone)]
pub struct FlowClassifier {
    cfg: ClassifierConfig,
    model: FlowModel,
    messages: u64,
    bytes: u64,
    max_bytes: u64,
}

impl FlowClassifier {
    pub fn new(cfg: ClassifierConfig) -> Result<Self, ControllerConfigError> {
        Ok(FlowClassifier { cfg, model: FlowModel::new(cfg.model)?, messages: 0, bytes: 0, max_bytes: 0 })
    }

    /// A message of `bytes` was seen at `now`.
    pub fn observe(&mut self, now: Instant, bytes: u64) -> FlowClass {
        self.messages += 1;
        self.bytes += bytes;
        self.max_bytes = self.max_bytes.max(bytes);
        self.model.observe(now);
        self.evidence().class
    }

    pub fn model(&self) -> &FlowModel {
        &self.model
    }

    pub fn evidence(&self) -> Evidence {
        let period = self.model.period();
        let sigma = self.model.fit_sigma();
        let jitter_ratio = match (period, sigma) {
            (Some(p), Some(s)) if !p.is_zero() => Some(s.as_secs_f64() / p.as_secs_f64()),
            _ => None,
        };
        let outlier_share = self.model.outliers() as f64 / self.model.observations().max(1) as f64;
        let class = if self.max_bytes > self.cfg.max_message_bytes {
            FlowClass::TooLarge
        } else if self.messages < self.cfg.min_samples as u64 {
            FlowClass::Undecided
        } else if jitter_ratio.is_some_and(|j| j <= self.cfg.max_jitter_ratio)
            && outlier_share <= self.cfg.max_outlier_share
            && self.model.protectable()
        {
            FlowClass::LatencySensitive
        } else {
            FlowClass::Aperiodic
        };
        Evidence {
            class,
            messages: self.messages,
            period,
            sigma,
            jitter_ratio,
            mean_bytes: self.bytes.checked_div(self.messages).unwrap_or(0),
            max_bytes: self.max_bytes,
            outlier_share,
            rate_changes: self.model.rate_changes(),
        }
    }
}
