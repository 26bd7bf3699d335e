//! Testbed scenario files: which nodes exist and what joins them.
//!
//! Point-to-point mode: every `[[links]]` entry is a cable with the link model's parameters in
//! each direction (asymmetric when `[links.b_to_a]` overrides some of them). A node gets one
//! interface per link it is on (`eth0`, `eth1`, ... in file order) and the two ends of link
//! `k` are `10.77.k.1/24` (side `a`) and `10.77.k.2/24` (side `b`).
//!
//! ```toml
//! name = "p2p"
//! mode = "p2p"
//! nodes = ["a", "b"]
//! seed = 1
//!
//! [[links]]
//! a = "a"
//! b = "b"
//! owd_ms = 50.0
//! rate_mbps = 100.0
//! loss = 0.1                 # iid; or the Gilbert-Elliott four below
//! # ge_p_gb = 0.01, ge_p_bg = 0.3, ge_loss_good = 0.0, ge_loss_bad = 0.5
//! # jitter_ms = 2.0, jitter = "uniform" | "normal" | "exponential" | "pareto", pareto_shape = 2.5
//! # duplicate = 0.0, reorder = 0.0, reorder_delay_ms = 0.0
//! # queue_packets = 1000, queue_bytes = 1250000   (default: 100 ms at the rate, >= 64 KiB)
//! # loss_slot_us = 100       # losses follow a trace over time, one fate per 100 µs slot
//! # loss_trace = 1           # links naming one trace lose in the same slots (default: each
//! #                          # link and direction its own trace)
//! [links.b_to_a]             # optional: the reverse direction differs
//! loss = 0.02
//!
//! [[links]]                  # a link that follows a trace file (`cohort_medium::trace`):
//! a = "a"                    # its settings above hold until the first step, then each
//! b = "b"                    # line's rate, delay and loss (both ways) or its outage, timed
//! trace = "radio.csv"        # from the emulator's start; relative to the scenario file
//! ```
//!
//! Wi-Fi mode: one shared 802.11 channel (the `cohort-medium` model) among all nodes, every
//! node on interface `wlan0` with `10.78.0.(i+1)/24` in one broadcast domain.
//!
//! ```toml
//! name = "team"
//! mode = "wifi"
//! nodes = ["leader", "f1", "f2"]
//! [wifi]
//! phy = "a"                  # a | b | g | n | ac
//! data_mbps = 54.0
//! queue_depth = 64           # per access category: the WNIC buffer of seed 000 §II-C
//! qdisc_packets = 1000       # per access category, in front of it (0: drop at a full WNIC)
//! fer = 0.0
//! timing = "standard"        # standard | bianchi | ns3
//! # rts_threshold = 500
//! # nic = { profile = "shared_tx" }  # per_ac (default) | shared_tx: one transmit path in the
//! #                                  # card, mt76 USB values; buffer_frames, handoff_us
//! [wifi.aggregation]         # optional; default: the PHY's (n/ac: ns-3 3.44's, a/b/g: none)
//! max_ampdu_bytes = { be = 65535, vi = 65535, vo = 0, bk = 0 }   # 0: no A-MPDU
//! # max_amsdu_bytes = { be = 7935 }, enabled = false, ba_window = 64
//! [[wifi.stations]]          # per-station overrides
//! node = "f2"
//! data_mbps = 24.0
//! fer = 0.1
//! # nic = { profile = "shared_tx", buffer_frames = 64, handoff_us = 125 }
//! ```

use cohort_medium::link::{Jitter, LinkParams, LossClock, LossModel, mix64};
use cohort_medium::trace::{Trace, parse_trace};
use cohort_medium::wifi::scenario::{CHANNEL_QDISC_PACKETS, CHANNEL_QUEUE_DEPTH, CHANNEL_TIMING, PhyStandard};
use cohort_medium::wifi::{Aggregation, NicProfile, StationConfig, Timing};
use serde::{Deserialize, Serialize};
use std::path::Path;
use std::time::Duration;

/// The longest node name: it becomes part of a namespace name.
pub const MAX_NODE_NAME: usize = 15;
/// At most this many links (one /24 each under 10.77.0.0/16) or stations (one /24).
pub const MAX_LINKS: usize = 250;

/// A whole testbed scenario. See the [module docs](self).
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct TestbedScenario {
    pub name: String,
    pub mode: Mode,
    pub nodes: Vec<String>,
    /// Seeds the channel models' random streams (loss, jitter, backoff).
    #[serde(default = "default_seed")]
    pub seed: u64,
    #[serde(default)]
    pub links: Vec<LinkSpec>,
    #[serde(default)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wifi: Option<WifiSpec>,
}

fn default_seed() -> u64 {
    1
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    P2p,
    Wifi,
}

/// One direction's link-model settings; every field optional so `b_to_a` can override a few.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct DirectionSpec {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub owd_ms: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rate_mbps: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub loss: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ge_p_gb: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ge_p_bg: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ge_loss_good: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ge_loss_bad: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub jitter_ms: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub jitter: Option<JitterKind>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pareto_shape: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub duplicate: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reorder: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reorder_delay_ms: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub queue_packets: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub queue_bytes: Option<usize>,
    /// Losses follow a trace over time with slots this long (`cohort_medium::link::LossClock`)
    /// instead of a draw per packet.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub loss_slot_us: Option<f64>,
    /// Names the loss trace: links naming the same trace, with the same slot and loss model,
    /// lose in the same slots in the same direction (the two directions of a trace are
    /// independent). Needs `loss_slot_us`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub loss_trace: Option<u64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum JitterKind {
    Uniform,
    Normal,
    Exponential,
    Pareto,
}

/// A point-to-point link between nodes `a` and `b`.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct LinkSpec {
    pub a: String,
    pub b: String,
    /// A trace file the link follows from the emulator's start (both directions): one line
    /// per change, `t_ms,rate_mbps,owd_ms,loss` or `t_ms,down`. A relative path is taken from
    /// the scenario file's directory ([`TestbedScenario::load`]) or the working directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<std::path::PathBuf>,
    #[serde(flatten)]
    pub a_to_b: DirectionSpec,
    #[serde(default)]
    pub b_to_a: DirectionSpec,
}

/// The shared channel.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct WifiSpec {
    #[serde(default = "default_phy")]
    pub phy: PhyStandard,
    #[serde(default = "default_data_mbps")]
    pub data_mbps: f64,
    #[serde(default = "default_queue_depth")]
    pub queue_depth: usize,
    /// Frames a node's qdisc holds per access category while its hardware queue is full (the
    /// back-pressure mac80211 applies: Linux's `txqueuelen`); 0 drops at a full hardware queue.
    #[serde(default = "default_qdisc_packets")]
    pub qdisc_packets: usize,
    #[serde(default)]
    pub fer: f64,
    #[serde(default)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rts_threshold: Option<usize>,
    #[serde(default = "default_timing")]
    pub timing: Timing,
    /// A-MPDU/A-MSDU limits per access category; default: the PHY's (n/ac: ns-3 3.44's,
    /// a/b/g: none). See `cohort_medium::wifi::Aggregation`.
    #[serde(default)]
    pub aggregation: Aggregation,
    /// What a frame waits for inside each card (`cohort_medium::wifi::NicProfile`): per-AC
    /// hardware queues (default) or one shared transmit path (`shared_tx`).
    #[serde(default)]
    pub nic: NicProfile,
    #[serde(default)]
    pub stations: Vec<StationSpec>,
}

fn default_phy() -> PhyStandard {
    PhyStandard::A
}
fn default_data_mbps() -> f64 {
    54.0
}
fn default_qdisc_packets() -> usize {
    CHANNEL_QDISC_PACKETS
}
fn default_queue_depth() -> usize {
    CHANNEL_QUEUE_DEPTH
}
/// The defaults are those of `cohort sim` too (see `CHANNEL_TIMING`).
fn default_timing() -> Timing {
    CHANNEL_TIMING
}

/// Per-station overrides on the shared channel.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct StationSpec {
    pub node: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub data_mbps: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fer: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub queue_depth: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nic: Option<NicProfile>,
}

/// Why a scenario cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    #[error("cannot read {path}: {source}")]
    Read { path: String, source: std::io::Error },
    #[error("invalid scenario: {0}")]
    Toml(#[from] toml::de::Error),
    #[error("invalid scenario: {0}")]
    Invalid(String),
}

fn invalid<T>(msg: impl Into<String>) -> Result<T, ScenarioError> {
    Err(ScenarioError::Invalid(msg.into()))
}

/// A name usable inside namespace names: `[a-z0-9_-]`, 1 to `max` characters.
pub fn check_name(what: &str, name: &str, max: usize) -> Result<(), ScenarioError> {
    let ok = !name.is_empty()
        && name.len() <= max
        && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_');
    if ok { Ok(()) } else { invalid(format!("{what} {name:?} must be 1-{max} characters of a-z, 0-9, '-', '_'")) }
}

impl DirectionSpec {
    /// `self` with every unset field taken from `base`.
    fn over(&self, base: &DirectionSpec) -> DirectionSpec {
        macro_rules! pick {
            ($($f:ident),*) => { DirectionSpec { $($f: self.$f.or(base.$f)),* } };
        }
        pick!(
            owd_ms,
            rate_mbps,
            loss,
            ge_p_gb,
            ge_p_bg,
            ge_loss_good,
            ge_loss_bad,
            jitter_ms,
            jitter,
            pareto_shape,
            duplicate,
            reorder,
            reorder_delay_ms,
            queue_packets,
            queue_bytes,
            loss_slot_us,
            loss_trace
        )
    }

    /// The link model's parameters; a missing delay is 0, a missing rate 1 Gbit/s.
    pub fn params(&self) -> Result<LinkParams, ScenarioError> {
        let ms = |name: &str, v: Option<f64>| -> Result<Duration, ScenarioError> {
            let v = v.unwrap_or(0.0);
            if !(v.is_finite() && (0.0..=86_400_000.0).contains(&v)) {
                return invalid(format!("{name} must be between 0 and 86400000 ms, not {v}"));
            }
            Ok(Duration::from_secs_f64(v / 1000.0))
        };
        let rate_mbps = self.rate_mbps.unwrap_or(1000.0);
        if !(rate_mbps.is_finite() && rate_mbps > 0.0 && rate_mbps <= 1e6) {
            return invalid(format!("rate_mbps must be in (0, 1e6], not {rate_mbps}"));
        }
        let mut p = LinkParams::clean(ms("owd_ms", self.owd_ms)?, (rate_mbps * 1e6) as u64);
        p.loss = match (self.ge_p_gb, self.ge_p_bg) {
            (Some(p_gb), Some(p_bg)) => LossModel::GilbertElliott {
                p_gb,
                p_bg,
                loss_good: self.ge_loss_good.unwrap_or(0.0),
                loss_bad: self.ge_loss_bad.or(self.loss).unwrap_or(1.0),
            },
            (None, None) => LossModel::Iid { p: self.loss.unwrap_or(0.0) },
            _ => return invalid("Gilbert-Elliott loss needs both ge_p_gb and ge_p_bg"),
        };
        let j = ms("jitter_ms", self.jitter_ms)?;
        p.jitter = match (self.jitter_ms, self.jitter.unwrap_or(JitterKind::Uniform)) {
            (None, _) => Jitter::None,
            (Some(_), JitterKind::Uniform) => Jitter::Uniform { max: j },
            (Some(_), JitterKind::Normal) => Jitter::Normal { sigma: j },
            (Some(_), JitterKind::Exponential) => Jitter::Exponential { mean: j },
            (Some(_), JitterKind::Pareto) => Jitter::Pareto { scale: j, shape: self.pareto_shape.unwrap_or(2.5) },
        };
        p.duplicate = self.duplicate.unwrap_or(0.0);
        p.reorder = self.reorder.unwrap_or(0.0);
        p.reorder_delay = ms("reorder_delay_ms", self.reorder_delay_ms)?;
        if let Some(b) = self.queue_bytes {
            p.queue_bytes = b;
        }
        p.queue_packets = self.queue_packets;
        p.loss_clock = match (self.loss_slot_us, self.loss_trace) {
            (None, None) => None,
            (None, Some(_)) => return invalid("loss_trace needs loss_slot_us"),
            (Some(us), _) => {
                if !(us.is_finite() && (1.0..=86_400e6).contains(&us)) {
                    return invalid(format!("loss_slot_us must be between 1 and 86400000000, not {us}"));
                }
                // The seed is set per link and direction by `LinkSpec::directions`.
                Some(LossClock { slot: Duration::from_secs_f64(us / 1e6), seed: 0 })
            }
        };
        p.validate().map_err(|e| ScenarioError::Invalid(e.to_string()))?;
        Ok(p)
    }

    /// The seed of this direction's loss trace: the named trace's in direction `dir` (0:
    /// a → b, 1: b → a) or, unnamed, link `link`'s own in that direction; both drawn from the
    /// scenario's seed.
    fn trace_seed(&self, scenario_seed: u64, link: usize, dir: u64) -> u64 {
        let id = match self.loss_trace {
            Some(n) => mix64(n.wrapping_mul(2) | dir) | 1,
            None => mix64((link as u64) << 1 | dir) & !1,
        };
        mix64(scenario_seed) ^ id
    }
}

impl LinkSpec {
    /// Parameters of the `a → b` and `b → a` directions of link number `link` in a scenario
    /// seeded with `seed` (which seeds the loss traces of links with a `loss_slot_us`).
    pub fn directions(&self, seed: u64, link: usize) -> Result<(LinkParams, LinkParams), ScenarioError> {
        let ba = self.b_to_a.over(&self.a_to_b);
        let (mut pab, mut pba) = (self.a_to_b.params()?, ba.params()?);
        for (p, spec, dir) in [(&mut pab, &self.a_to_b, 0), (&mut pba, &ba, 1)] {
            if let Some(c) = p.loss_clock.as_mut() {
                c.seed = spec.trace_seed(seed, link, dir);
            }
        }
        Ok((pab, pba))
    }

    /// The trace the link follows, read and checked, if it has one.
    pub fn load_trace(&self) -> Result<Option<Trace>, ScenarioError> {
        let Some(path) = &self.trace else { return Ok(None) };
        let text = std::fs::read_to_string(path)
            .map_err(|source| ScenarioError::Read { path: path.display().to_string(), source })?;
        let tr = parse_trace(&text).map_err(|e| ScenarioError::Invalid(format!("{}: {e}", path.display())))?;
        crate::fabric::check_trace(&tr).map_err(|e| ScenarioError::Invalid(format!("{}: {e}", path.display())))?;
        Ok(Some(tr))
    }
}

impl WifiSpec {
    /// The station settings of each node, in node order.
    pub fn station_configs(&self, nodes: &[String]) -> Vec<StationConfig> {
        nodes
            .iter()
            .map(|n| {
                let o = self.stations.iter().find(|s| &s.node == n);
                StationConfig {
                    queue_depth: o.and_then(|o| o.queue_depth).unwrap_or(self.queue_depth),
                    fer: o.and_then(|o| o.fer).unwrap_or(self.fer),
                    data_mbps: o.and_then(|o| o.data_mbps),
                    rts_threshold: self.rts_threshold,
                    ampdu: self.aggregation.limits(&self.phy.phy(self.data_mbps)),
                    nic: o.and_then(|o| o.nic).unwrap_or(self.nic),
                    ..StationConfig::default()
                }
            })
            .collect()
    }
}

impl TestbedScenario {
    /// Reads and validates a scenario file.
    pub fn load(path: &Path) -> Result<Self, ScenarioError> {
        let text = std::fs::read_to_string(path)
            .map_err(|source| ScenarioError::Read { path: path.display().to_string(), source })?;
        let mut s: TestbedScenario = toml::from_str(&text)?;
        let dir = path.parent().unwrap_or(Path::new("."));
        for l in &mut s.links {
            if let Some(t) = l.trace.as_mut().filter(|t| t.is_relative()) {
                *t = dir.join(&*t);
            }
        }
        s.validate()?;
        Ok(s)
    }

    /// Parses and validates a scenario given as JSON (the form a run keeps in its directory).
    pub fn from_json(text: &str) -> Result<Self, ScenarioError> {
        let s: TestbedScenario = serde_json::from_str(text).map_err(|e| ScenarioError::Invalid(e.to_string()))?;
        s.validate()?;
        Ok(s)
    }

    /// Parses and validates scenario text.
    pub fn parse(text: &str) -> Result<Self, ScenarioError> {
        let s: TestbedScenario = toml::from_str(text)?;
        s.validate()?;
        Ok(s)
    }

    /// Two nodes `a` and `b` joined by one point-to-point link per entry of `links` (the
    /// same parameters both ways), validated.
    pub fn pair(name: &str, seed: u64, links: &[DirectionSpec]) -> Result<Self, ScenarioError> {
        let s = TestbedScenario {
            name: name.to_string(),
            mode: Mode::P2p,
            nodes: vec!["a".into(), "b".into()],
            seed,
            links: links
                .iter()
                .map(|d| LinkSpec {
                    a: "a".into(),
                    b: "b".into(),
                    trace: None,
                    a_to_b: d.clone(),
                    b_to_a: DirectionSpec::default(),
                })
                .collect(),
            wifi: None,
        };
        s.validate()?;
        Ok(s)
    }

    /// Index of a node by name.
    pub fn node_index(&self, name: &str) -> Option<usize> {
        self.nodes.iter().position(|n| n == name)
    }

    /// Checks names, references and every model parameter.
    pub fn validate(&self) -> Result<(), ScenarioError> {
        check_name("scenario name", &self.name, 32)?;
        if self.nodes.is_empty() {
            return invalid("a scenario needs at least one node");
        }
        for (i, n) in self.nodes.iter().enumerate() {
            check_name("node name", n, MAX_NODE_NAME)?;
            if n == "emu" {
                return invalid("node name \"emu\" is reserved for the emulator's namespace");
            }
            if self.nodes[..i].contains(n) {
                return invalid(format!("node {n:?} is listed twice"));
            }
        }
        match self.mode {
            Mode::P2p => {
                if self.wifi.is_some() {
                    return invalid("[wifi] belongs to mode = \"wifi\"");
                }
                if self.links.is_empty() {
                    return invalid("mode = \"p2p\" needs at least one [[links]] entry");
                }
                if self.links.len() > MAX_LINKS {
                    return invalid(format!("at most {MAX_LINKS} links"));
                }
                for (k, l) in self.links.iter().enumerate() {
                    for end in [&l.a, &l.b] {
                        if self.node_index(end).is_none() {
                            return invalid(format!("link end {end:?} is not a node"));
                        }
                    }
                    if l.a == l.b {
                        return invalid(format!("link from {:?} to itself", l.a));
                    }
                    l.directions(self.seed, k)?;
                    l.load_trace()?;
                }
            }
            Mode::Wifi => {
                let Some(w) = &self.wifi else { return invalid("mode = \"wifi\" needs a [wifi] table") };
                if !self.links.is_empty() {
                    return invalid("[[links]] belong to mode = \"p2p\"");
                }
                if self.nodes.len() > MAX_LINKS {
                    return invalid(format!("at most {MAX_LINKS} stations"));
                }
                for s in &w.stations {
                    if self.node_index(&s.node).is_none() {
                        return invalid(format!("station {:?} is not a node", s.node));
                    }
                }
                self.build_medium::<()>().map_err(|e| ScenarioError::Invalid(e.to_string()))?;
            }
        }
        Ok(())
    }

    /// The shared channel of a Wi-Fi scenario, with frames carried as `H`.
    pub fn build_medium<H: Clone>(&self) -> Result<cohort_medium::wifi::Medium<H>, cohort_medium::wifi::MediumError> {
        let w = self.wifi.as_ref().ok_or(cohort_medium::wifi::MediumError::Station("not a wifi scenario"))?;
        cohort_medium::wifi::Phy::validate_rate(w.data_mbps).map_err(cohort_medium::wifi::MediumError::Phy)?;
        let phy = w.phy.phy(w.data_mbps);
        let edca = cohort_medium::wifi::EdcaParams::defaults(&phy);
        Ok(cohort_medium::wifi::Medium::new(phy, edca, &w.station_configs(&self.nodes), self.seed)?
            .with_timing(w.timing))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const P2P: &str = r#"
        name = "p2p"
        mode = "p2p"
        nodes = ["a", "b"]
        [[links]]
        a = "a"
        b = "b"
        owd_ms = 50.0
        rate_mbps = 20.0
        loss = 0.1
        jitter_ms = 2.0
        jitter = "normal"
        [links.b_to_a]
        loss = 0.01
    "#;

    #[test]
    fn p2p_directions_inherit_and_override() {
        let s = TestbedScenario::parse(P2P).unwrap();
        let (ab, ba) = s.links[0].directions(1, 0).unwrap();
        assert_eq!(ab.owd, Duration::from_millis(50));
        assert_eq!(ba.owd, Duration::from_millis(50));
        assert_eq!(ab.rate_bps, 20_000_000);
        assert_eq!(ab.loss, LossModel::Iid { p: 0.1 });
        assert_eq!(ba.loss, LossModel::Iid { p: 0.01 });
        assert_eq!(ba.jitter, Jitter::Normal { sigma: Duration::from_millis(2) });
    }

    #[test]
    fn links_naming_one_loss_trace_share_it_and_others_do_not() {
        let timed = |trace: Option<u64>| DirectionSpec {
            loss: Some(0.1),
            loss_slot_us: Some(100.0),
            loss_trace: trace,
            ..DirectionSpec::default()
        };
        let s = TestbedScenario::pair("p2p", 9, &[timed(Some(4)), timed(Some(4)), timed(None), timed(None)]).unwrap();
        let clocks: Vec<_> = (0..4)
            .map(|k| {
                let (ab, ba) = s.links[k].directions(s.seed, k).unwrap();
                (ab.loss_clock.unwrap(), ba.loss_clock.unwrap())
            })
            .collect();
        assert_eq!(clocks[0].0.slot, Duration::from_micros(100));
        assert_eq!(clocks[0], clocks[1], "one named trace, one clock per direction");
        let seeds: std::collections::HashSet<u64> =
            [0, 2, 3].iter().flat_map(|&k| [clocks[k].0.seed, clocks[k].1.seed]).collect();
        assert_eq!(seeds.len(), 6, "directions and unnamed links each have their own trace");
        let other = TestbedScenario::pair("p2p", 10, &[timed(Some(4))]).unwrap();
        assert_ne!(
            other.links[0].directions(other.seed, 0).unwrap().0.loss_clock,
            Some(clocks[0].0),
            "the scenario's seed seeds the trace"
        );
        assert_eq!(TestbedScenario::parse(P2P).unwrap().links[0].directions(1, 0).unwrap().0.loss_clock, None);
    }

    #[test]
    fn pair_builds_what_the_file_form_says() {
        let d =
            DirectionSpec { owd_ms: Some(50.0), rate_mbps: Some(20.0), loss: Some(0.1), ..DirectionSpec::default() };
        let s = TestbedScenario::pair("p2p", 1, std::slice::from_ref(&d)).unwrap();
        let file = TestbedScenario::parse(P2P).unwrap();
        assert_eq!(s.links[0].directions(1, 0).unwrap().0.loss, file.links[0].directions(1, 0).unwrap().0.loss);
        assert_eq!((s.nodes.len(), s.links.len()), (2, 1));
        let bad = DirectionSpec { loss: Some(2.0), ..d };
        assert!(TestbedScenario::pair("p2p", 1, &[bad]).is_err());
    }

    #[test]
    fn wifi_station_overrides() {
        let s = TestbedScenario::parse(
            r#"
            name = "team"
            mode = "wifi"
            nodes = ["leader", "f1"]
            [wifi]
            phy = "b"
            data_mbps = 11.0
            [[wifi.stations]]
            node = "f1"
            fer = 0.2
        "#,
        )
        .unwrap();
        let c = s.wifi.as_ref().unwrap().station_configs(&s.nodes);
        assert_eq!(c[0].fer, 0.0);
        assert_eq!(c[1].fer, 0.2);
        s.build_medium::<u8>().unwrap();
    }

    #[test]
    fn invalid_scenarios_say_why() {
        let cases = [
            (P2P.replace("loss = 0.1", "loss = 1.5"), "probability"),
            (P2P.replace("b = \"b\"", "b = \"c\""), "not a node"),
            (P2P.replace("nodes = [\"a\", \"b\"]", "nodes = [\"a\", \"B\"]"), "must be 1-15"),
            (P2P.replace("nodes = [\"a\", \"b\"]", "nodes = [\"a\", \"b\", \"a\"]"), "twice"),
            (P2P.replace("owd_ms = 50.0", "owd_ms = -1.0"), "between 0"),
            (P2P.replace("rate_mbps = 20.0", "rate_mbps = 0.0"), "rate_mbps"),
            (P2P.replace("mode = \"p2p\"", "mode = \"wifi\""), "needs a [wifi]"),
            (P2P.replace("loss = 0.1", "ge_p_gb = 0.1"), "both ge_p_gb"),
            (P2P.replace("loss = 0.1", "lossy = 0.1"), "unknown field"),
            (P2P.replace("loss = 0.1", "loss = 0.1\nloss_trace = 3"), "loss_trace needs loss_slot_us"),
            (P2P.replace("loss = 0.1", "loss = 0.1\nloss_slot_us = 0.5"), "loss_slot_us must be"),
            (P2P.replace("loss = 0.1", "loss = 0.1\nloss_slot_us = nan"), "loss_slot_us must be"),
            (P2P.replace("nodes = [\"a\", \"b\"]", "nodes = [\"a\", \"b\", \"emu\"]"), "reserved"),
        ];
        for (text, want) in cases {
            let e = TestbedScenario::parse(&text).unwrap_err().to_string();
            assert!(e.contains(want), "{want:?} not in {e:?}");
        }
        let wifi = "name = \"w\"\nmode = \"wifi\"\nnodes = [\"a\"]\n[wifi]\ndata_mbps = 0.0\n";
        let e = TestbedScenario::parse(wifi).unwrap_err().to_string();
        assert!(e.contains("invalid"), "{e}");
    }

    #[test]
    fn nic_profile_per_channel_and_per_station() {
        let text = "name = \"w\"\nmode = \"wifi\"\nnodes = [\"a\", \"b\", \"c\"]\n[wifi]\n\
                    nic = { profile = \"shared_tx\" }\n[[wifi.stations]]\nnode = \"b\"\n\
                    nic = { profile = \"per_ac\" }\n[[wifi.stations]]\nnode = \"c\"\n\
                    nic = { profile = \"shared_tx\", buffer_frames = 8, handoff_us = 0 }\n";
        let s = TestbedScenario::parse(text).unwrap();
        let nics: Vec<NicProfile> = s.wifi.as_ref().unwrap().station_configs(&s.nodes).iter().map(|c| c.nic).collect();
        assert_eq!(
            nics,
            [NicProfile::mt76_usb(), NicProfile::PerAc, NicProfile::SharedTx { buffer_frames: 8, handoff_us: 0 }]
        );
        let json = serde_json::to_string(&s).unwrap();
        assert_eq!(TestbedScenario::from_json(&json).unwrap(), s);
        let bad = text.replace("buffer_frames = 8", "buffer_frames = 0");
        assert!(TestbedScenario::parse(&bad).unwrap_err().to_string().contains("buffer_frames"));
        let default = TestbedScenario::parse("name = \"w\"\nmode = \"wifi\"\nnodes = [\"a\"]\n[wifi]\n").unwrap();
        assert_eq!(default.wifi.unwrap().nic, NicProfile::PerAc);
    }

    #[test]
    fn shipped_scenarios_parse() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios");
        let mut n = 0;
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.file_name().unwrap().to_string_lossy().starts_with("testbed_") {
                TestbedScenario::load(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
                n += 1;
            }
        }
        assert!(n >= 2, "expected the shipped testbed_*.toml scenarios");
    }
}
