//! Scenario files.
//!
//! ```toml
//! name = "lrt-lossy-p2p"
//! duration_s = 5.0          # messages are sent during this time; the run then drains
//! nodes = 2
//!
//! [network]                 # "p2p": one link per flow; "wifi": one shared 802.11 channel
//! kind = "p2p"
//! owd_ms = 20.0
//! rate_mbps = 50.0
//! loss = 0.1                # iid, or the bad-state loss with ge_p_gb / ge_p_bg
//! jitter_ms = 2.0
//! duplicate = 0.01
//!
//! [[flows]]                 # an LRT connection from -> to carrying timestamped messages
//! from = 0
//! to = 1
//! size = 1000
//! interval_ms = 2.0
//! count = 500
//!
//! [[faults]]                # faults as data
//! kind = "partition"        # "partition" (nodes a, b cut off), "loss" (extra loss p),
//!                           # "drift" (node's clock, ppm), "crash" (node, at_s, restart_s)
//! at_s = 1.0
//! until_s = 1.5
//! a = 0
//! b = 1
//! ```

use cohort_medium::wifi::scenario::{CHANNEL_QDISC_PACKETS, CHANNEL_QUEUE_DEPTH, CHANNEL_TIMING};
use cohort_medium::wifi::{Aggregation, Timing};
use serde::Deserialize;

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    pub name: String,
    pub duration_s: f64,
    pub nodes: usize,
    pub network: Network,
    #[serde(default)]
    pub flows: Vec<Flow>,
    #[serde(default)]
    pub faults: Vec<Fault>,
    /// Further partitions and loss bursts drawn from the seed (see `engine`), so a seed sweep
    /// explores different fault timings.
    #[serde(default)]
    pub random_faults: u32,
    /// Time after `duration_s` for the flows to drain before unfinished ones count as failures.
    #[serde(default = "default_drain")]
    pub drain_s: f64,
    /// LRT settings of every connection; unset fields keep `lrt::Config`'s defaults.
    #[serde(default)]
    pub lrt: LrtSettings,
}

/// The `[lrt]` table: connection parameters both ends use.
#[derive(Debug, Clone, Copy, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LrtSettings {
    pub symbol_size: Option<usize>,
    pub max_window: Option<usize>,
    /// Source symbols per coder: small values make coder IDs, the out-of-date filter and the
    /// full-rank ACK of a finished coder (seed 004 §III-B, D) run within a short scenario.
    pub coder_symbols: Option<u32>,
    /// The operator's rate (`rate_bps`, in Mbit/s): the pacing rate, or with `estimate_rate`
    /// its cap.
    pub rate_mbps: Option<f64>,
    /// Measure the available bandwidth (`lrt::rate`) instead of pacing at `rate_mbps`.
    pub estimate_rate: Option<bool>,
}

impl LrtSettings {
    /// The connection configuration these settings give.
    pub fn config(&self) -> cohort_proto::lrt::Config {
        let d = cohort_proto::lrt::Config::default();
        cohort_proto::lrt::Config {
            symbol_size: self.symbol_size.unwrap_or(d.symbol_size),
            max_window: self.max_window.unwrap_or(d.max_window),
            coder_symbols: self.coder_symbols.unwrap_or(d.coder_symbols),
            rate_bps: self.rate_mbps.map_or(d.rate_bps, |r| (r * 1e6) as u64),
            estimate_rate: self.estimate_rate.unwrap_or(d.estimate_rate),
            ..d
        }
    }
}

fn default_drain() -> f64 {
    30.0
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Network {
    P2p {
        owd_ms: f64,
        #[serde(default = "default_rate")]
        rate_mbps: f64,
        #[serde(default)]
        loss: f64,
        #[serde(default)]
        ge_p_gb: Option<f64>,
        #[serde(default)]
        ge_p_bg: Option<f64>,
        #[serde(default)]
        jitter_ms: f64,
        #[serde(default)]
        duplicate: f64,
    },
    Wifi {
        /// "a", "b", "g", "n" or "ac".
        phy: String,
        data_mbps: f64,
        #[serde(default = "default_queue")]
        queue_depth: usize,
        #[serde(default)]
        fer: f64,
        /// A-MPDU/A-MSDU limits per access category (`[network.aggregation]`, see
        /// `cohort_medium::wifi::Aggregation`); default: the PHY's (n/ac: ns-3 3.44's,
        /// a/b/g: none).
        #[serde(default)]
        aggregation: Aggregation,
        /// What stations do after a failed exchange; default `standard`, as the testbed.
        #[serde(default = "default_timing")]
        timing: Timing,
        /// The qdisc in front of each hardware queue (default 1000, as the testbed): the
        /// simulator adds it to the queue (see `cohort_medium::wifi::scenario::CHANNEL_TIMING`).
        #[serde(default = "default_qdisc")]
        qdisc_packets: usize,
        /// What a frame waits for inside the card (`nic = { profile = "shared_tx", ... }`;
        /// default `per_ac`), as in the testbed's `[wifi]`.
        #[serde(default)]
        nic: cohort_medium::wifi::NicProfile,
    },
}

fn default_interval() -> f64 {
    1.0
}

fn default_rate() -> f64 {
    100.0
}

fn default_queue() -> usize {
    CHANNEL_QUEUE_DEPTH
}

fn default_qdisc() -> usize {
    CHANNEL_QDISC_PACKETS
}

fn default_timing() -> Timing {
    CHANNEL_TIMING
}

/// What the application on a flow does.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum App {
    /// One message every `interval_ms` (a control loop, telemetry).
    #[default]
    Periodic,
    /// `count` messages as fast as the connection takes them (a map or model transfer);
    /// `interval_ms` is ignored.
    Bulk,
    /// A request every `interval_ms`; the receiver answers each with `reply_size` bytes and
    /// the flow's delays are request-to-reply times.
    RequestReply,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Flow {
    pub from: usize,
    pub to: usize,
    #[serde(default)]
    pub app: App,
    pub size: usize,
    #[serde(default = "default_interval")]
    pub interval_ms: f64,
    pub count: u64,
    /// Reply size of a request-reply flow (default: `size`).
    #[serde(default)]
    pub reply_size: Option<usize>,
    /// DSCP of the flow's datagrams (picks the Wi-Fi access category).
    #[serde(default)]
    pub dscp: u8,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Fault {
    /// Nothing passes between nodes `a` and `b` from `at_s` until `until_s`.
    Partition { at_s: f64, until_s: f64, a: usize, b: usize },
    /// Every packet is also lost with probability `p` from `at_s` until `until_s`.
    Loss { at_s: f64, until_s: f64, p: f64 },
    /// Node `node`'s clock runs `ppm` parts per million fast (negative: slow).
    Drift { node: usize, ppm: f64 },
    /// Node `node` stops at `at_s` (its connection state is lost) and restarts at `restart_s`;
    /// every flow it is part of then runs over a new connection. Messages not delivered before
    /// the crash may be lost (at most once); everything sent after the restart must arrive.
    Crash { node: usize, at_s: f64, restart_s: f64 },
}

/// A scenario that cannot run.
#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    #[error("reading {path}: {source}")]
    Read { path: String, source: std::io::Error },
    #[error("parsing scenario: {0}")]
    Parse(#[from] toml::de::Error),
    #[error("invalid scenario: {0}")]
    Invalid(String),
}

impl Scenario {
    pub fn from_toml(text: &str) -> Result<Self, ScenarioError> {
        let s: Scenario = toml::from_str(text)?;
        s.validate()?;
        Ok(s)
    }

    pub fn load(path: &std::path::Path) -> Result<Self, ScenarioError> {
        let text = std::fs::read_to_string(path)
            .map_err(|source| ScenarioError::Read { path: path.display().to_string(), source })?;
        Self::from_toml(&text)
    }

    pub fn validate(&self) -> Result<(), ScenarioError> {
        let bad = |m: String| Err(ScenarioError::Invalid(m));
        if let Err(e) = self.lrt.config().validate() {
            return bad(format!("[lrt]: {e}"));
        }
        if self.random_faults > 1000 {
            return bad("random_faults above 1000".into());
        }
        if self.nodes < 2 || self.nodes > 256 {
            return bad(format!("nodes {} outside 2..=256", self.nodes));
        }
        if !(self.duration_s > 0.0 && self.duration_s <= 3600.0 && self.drain_s >= 0.0) {
            return bad("duration_s must be in (0, 3600] and drain_s non-negative".into());
        }
        for (i, f) in self.flows.iter().enumerate() {
            if f.from >= self.nodes || f.to >= self.nodes || f.from == f.to {
                return bad(format!("flow {i}: from/to must be distinct nodes below {}", self.nodes));
            }
            let reply_ok = f.reply_size.is_none_or(|r| (16..=1 << 20).contains(&r));
            if f.size < 16 || f.size > 1 << 20 || f.interval_ms <= 0.0 || f.count == 0 || f.dscp > 63 || !reply_ok {
                return bad(format!("flow {i}: size 16 B..1 MiB, interval and count positive, dscp 0..=63"));
            }
        }
        for (i, f) in self.faults.iter().enumerate() {
            let ok = match *f {
                Fault::Partition { at_s, until_s, a, b } => at_s <= until_s && a < self.nodes && b < self.nodes,
                Fault::Loss { at_s, until_s, p } => at_s <= until_s && (0.0..=1.0).contains(&p),
                Fault::Drift { node, ppm } => node < self.nodes && ppm.abs() < 100_000.0,
                Fault::Crash { node, at_s, restart_s } => node < self.nodes && at_s <= restart_s,
            };
            if !ok {
                return bad(format!("fault {i} is inconsistent: {f:?}"));
            }
        }
        let p = |x: f64| (0.0..=1.0).contains(&x);
        match &self.network {
            Network::P2p { owd_ms, rate_mbps, loss, ge_p_gb, ge_p_bg, jitter_ms, duplicate } => {
                if *owd_ms < 0.0 || *rate_mbps <= 0.0 || *jitter_ms < 0.0 || !p(*loss) || !p(*duplicate) {
                    return bad("p2p: owd, jitter non-negative, rate positive, probabilities in [0, 1]".into());
                }
                if ge_p_gb.is_some() != ge_p_bg.is_some() || !ge_p_gb.is_none_or(p) || !ge_p_bg.is_none_or(p) {
                    return bad("p2p: give both ge_p_gb and ge_p_bg, as probabilities".into());
                }
            }
            Network::Wifi { phy, data_mbps, queue_depth, fer, .. } => {
                if !["a", "b", "g", "n", "ac"].contains(&phy.as_str())
                    || *data_mbps <= 0.0
                    || *queue_depth == 0
                    || !p(*fer)
                {
                    return bad("wifi: phy a|b|g|n|ac, positive rate and queue depth, fer in [0, 1]".into());
                }
            }
        }
        Ok(())
    }
}
