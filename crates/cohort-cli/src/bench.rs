//! `cohort bench NAME`.

use crate::progress::Progress;
use crate::python;
use clap::{Args, Subcommand};
use cohort_bench::progress::Step;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

#[derive(Debug, Args)]
pub struct BenchArgs {
    #[command(subcommand)]
    which: Which,
}

#[derive(Debug, Subcommand)]
enum Which {
    /// GF(2^8) kernels, sliding-window encode/decode, and the `rlnc` crate's decoder.
    Coding(CodingArgs),
    /// LRT vs seed 004's block-RLNC scheme and selective-repeat ARQ over a simulated
    /// point-to-point link.
    Lrt(LrtArgs),
    /// LRT, block RLNC and selective-repeat ARQ over the grid of one-way delays, losses (iid
    /// and bursts), message intervals and sizes.
    #[command(name = "lrt-grid")]
    LrtGrid(LrtGridArgs),
    /// LRT's bandwidth estimator on a shared 802.11 channel: two LRT uploads and an unmarked
    /// control loop, against hand-set rates.
    #[command(name = "lrt-share")]
    LrtShare(LrtShareArgs),
    /// The 802.11 model against ns-3's Bianchi reference tables.
    Bianchi {
        #[arg(long)]
        json: bool,
        #[arg(long, default_value_t = 7)]
        seed: u64,
    },
    /// The 802.11 model's speed and per-AC throughput on the edca_sat scenario.
    Sim {
        #[arg(long)]
        json: bool,
        #[arg(long, default_value_t = 5)]
        stations: usize,
        #[arg(long, default_value_t = 60.0)]
        seconds: f64,
        #[arg(long, default_value_t = 1)]
        seed: u64,
    },
    /// The testbed emulator: configured vs measured delay, jitter, loss and rate (root).
    #[command(name = "testbed-fidelity")]
    TestbedFidelity(FidelityArgs),
    /// LRT vs kernel TCP (cubic, bbr), KCP turbo and QUIC across the testbed (root).
    Transport(TransportArgs),
    /// GCBRR vs TCP/RUP/UUP point-to-point request-reply, TCP group management and Zenoh over
    /// the emulated 1 Mbit/s 802.11 channel of seed 003 (root).
    Group(GroupArgs),
    /// ROS 2 nodes (zenoh-ros2-sdk) across the emulated Wi-Fi team beside a TCP upload: Zenoh
    /// direct against `cohort bridge` (root).
    Bridge(BridgeArgs),
    /// The Python bindings' LRT message rate against the Rust binary's on loopback
    /// (`python -m cohort.lrt_rate`; `cohort bench bindings --help`).
    #[command(disable_help_flag = true)]
    Bindings {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// The OS tuner's bench (`python -m cohort.tune bench`; root for the live part).
    #[command(disable_help_flag = true)]
    Tune {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Coordinated robotic learning on the simulated 802.11ac channel: EDCA, SchedWiFi, COORP
    /// and its halves, control marked and unmarked, and the scalability sweep (seed 000).
    Coorp(CoorpArgs),
    /// Multipath LRT (seed 001) in the simulator: Cohort's scheduler against min-RTT,
    /// round-robin and each path alone; static paths, loss, handoffs, short flows, the delay
    /// target and the federated start. `--testbed` (root): against kernel MPTCP on real
    /// kernels over two emulated radios.
    Multipath(crate::bench_multipath::MultipathArgs),
    /// RF-chain and beam allocation (seed 001 Algorithm 1): greedy against the exact optimum,
    /// time per round, one-to-many against one-to-one, and allocation-aware multipath end to
    /// end against an equal split.
    Beams(crate::bench_beams::BeamsArgs),
    /// A robot changes address in the middle of a two-way LRT stream over a delaying relay:
    /// messages lost, and the stall the move adds against the round trip.
    Migration(crate::bench_migration::MigrationArgs),
    /// One Wi-Fi scenario in the simulator and on the testbed: per-AC throughput and delay
    /// side by side (root for the testbed half).
    Crosscheck(crate::bench_crosscheck::CrosscheckArgs),
    /// How fast the bulk gate holds and releases a foreign TCP upload in the kernel (root).
    #[command(name = "coorp-gate")]
    CoorpGate(CoorpGateArgs),
    /// Wake-up lateness of the runtime's timerfd timer vs thread::sleep and tokio's sleep.
    Timer {
        #[arg(long)]
        json: bool,
        #[arg(long, default_value_t = 2000)]
        samples: usize,
        #[arg(long, default_value_t = 500)]
        interval_us: u64,
        /// Repetitions of `--samples` wake-ups per timer, the timers' order rotating.
        #[arg(long, default_value_t = 5)]
        reps: usize,
    },
}

#[derive(Debug, Args)]
struct CodingArgs {
    /// Print the report as JSON (otherwise a short summary).
    #[arg(long)]
    json: bool,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Source symbols in the measured stream.
    #[arg(long, default_value_t = 6400)]
    symbols: u64,
    /// Minimum measuring time per figure, in milliseconds.
    #[arg(long, default_value_t = 500)]
    min_time_ms: u64,
    /// Iid loss on the measured stream.
    #[arg(long, default_value_t = 0.10)]
    loss: f64,
    /// Also write the JSON to this file and a bar chart next to it (same name, `.png`;
    /// needs Python with matplotlib).
    #[arg(long)]
    out: Option<PathBuf>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum LossKind {
    Iid,
    Ge,
}

#[derive(Debug, Args)]
struct LrtArgs {
    #[arg(long)]
    json: bool,
    /// One-way delay of the link.
    #[arg(long, default_value_t = 50.0)]
    owd_ms: f64,
    /// Iid loss probability, or the bad-state loss of the Gilbert-Elliott model.
    #[arg(long, default_value_t = 0.10)]
    loss: f64,
    #[arg(long, value_enum, default_value_t = LossKind::Iid)]
    loss_model: LossKind,
    /// Gilbert-Elliott: per-packet probability of going from the good to the bad state.
    #[arg(long, default_value_t = 0.01)]
    ge_p_gb: f64,
    /// Gilbert-Elliott: per-packet probability of going from the bad to the good state.
    #[arg(long, default_value_t = 0.3)]
    ge_p_bg: f64,
    /// Gilbert-Elliott: loss probability in the good state.
    #[arg(long, default_value_t = 0.0)]
    ge_loss_good: f64,
    #[arg(long, default_value_t = 100.0)]
    rate_mbps: f64,
    /// Message size in bytes.
    #[arg(long, default_value_t = 1024)]
    size: usize,
    #[arg(long, default_value_t = 1.0)]
    interval_ms: f64,
    #[arg(long, default_value_t = 20_000)]
    count: u64,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Messages sent in this first stretch are carried but not measured.
    #[arg(long, default_value_t = 1000.0)]
    warmup_ms: f64,
    /// Runs (run k uses seed + k); the figures pool them, each run's p99 and the paired
    /// ratios come with 95% intervals.
    #[arg(long, default_value_t = 3)]
    reps: u64,
    /// Also write the JSON here and the delay CDFs next to it (`.png`).
    #[arg(long)]
    out: Option<PathBuf>,
}

#[derive(Debug, Args)]
struct LrtGridArgs {
    #[arg(long)]
    json: bool,
    /// Messages per run.
    #[arg(long, default_value_t = 10_000)]
    count: u64,
    /// Runs per point (seeds `seed`, `seed + 1`, ...), pooled.
    #[arg(long, default_value_t = 3)]
    reps: u64,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// One-way delays (ms), comma-separated.
    #[arg(long, value_delimiter = ',', default_values_t = [5.0, 25.0, 50.0, 100.0])]
    owds_ms: Vec<f64>,
    /// Message intervals (ms), comma-separated.
    #[arg(long, value_delimiter = ',', default_values_t = [1.0, 5.0, 10.0])]
    intervals_ms: Vec<f64>,
    /// Worker threads (0: one per core); results do not depend on it.
    #[arg(long, default_value_t = 0)]
    threads: usize,
    /// LRT measures the bandwidth (`estimate_rate`) instead of pacing at the link's rate.
    #[arg(long)]
    estimate_rate: bool,
    /// Also write the JSON here and a chart next to it (`.png`).
    #[arg(long)]
    out: Option<PathBuf>,
}

#[derive(Debug, Args)]
struct LrtShareArgs {
    #[arg(long)]
    json: bool,
    /// Hand-set per-connection rates to compare with (Mbit/s), comma-separated.
    #[arg(long, value_delimiter = ',', default_values_t = [2.0, 4.0, 6.0, 8.0, 12.0, 24.0, 100.0])]
    rates_mbps: Vec<f64>,
    /// Runs per setting (seeds `seed`, `seed + 1`, ...).
    #[arg(long, default_value_t = 3)]
    reps: u64,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Bytes each upload carries.
    #[arg(long, default_value_t = 4 << 20)]
    bulk_bytes: usize,
    /// Also write the JSON here.
    #[arg(long)]
    out: Option<PathBuf>,
}

#[derive(Debug, Args)]
struct TransportArgs {
    #[arg(long)]
    json: bool,
    /// Measured seconds per case, after the warm-up.
    #[arg(long, default_value_t = 20.0)]
    seconds: f64,
    #[arg(long, default_value_t = 3.0)]
    warmup_s: f64,
    /// Independent loss rates, comma-separated.
    #[arg(long, value_delimiter = ',', default_values_t = [0.0, 0.02, 0.05, 0.10])]
    losses: Vec<f64>,
    /// Mean loss rates of the cases whose losses come in fades (the channel down for
    /// `--burst-ms` on average), comma-separated; `--fades` alone: none.
    #[arg(long, value_delimiter = ',', num_args = 0.., default_values_t = [0.10])]
    fades: Vec<f64>,
    #[arg(long, default_value_t = 3.0)]
    burst_ms: f64,
    /// Slot of the loss trace every link of a run replays (µs): each slot lost or not.
    #[arg(long, default_value_t = 10.0)]
    loss_slot_us: f64,
    /// Transports, comma-separated (lrt, tcp_cubic, tcp_bbr, kcp, quic, quic_bbr).
    #[arg(long, value_delimiter = ',', default_values_t = cohort_bench::transport::TRANSPORTS.map(String::from))]
    transports: Vec<String>,
    /// Runs per case (run k uses seed + k); figures pool them, with each run's p99.
    #[arg(long, default_value_t = 3)]
    reps: u32,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Write the delay CDFs (one panel per case) here, and the JSON next to it (`.json`).
    #[arg(long)]
    plot: Option<PathBuf>,
}

#[derive(Debug, Args)]
struct GroupArgs {
    #[arg(long)]
    json: bool,
    /// Group sizes (coordinator included), comma-separated.
    #[arg(long, value_delimiter = ',', default_values_t = [3, 6, 12])]
    sizes: Vec<usize>,
    /// Request-reply interactions per system and size.
    #[arg(long, default_value_t = 1000)]
    interactions: usize,
    /// Polls (GCBRR) or messages per node (the others) of the N-to-1 test.
    #[arg(long, default_value_t = 1000)]
    polls: usize,
    /// Payload of every request, reply and message (default: the most that fits one frame in a
    /// group of 12, GCBRR's header being the largest).
    #[arg(long, default_value_t = cohort_bench::group::one_frame_payload())]
    payload: usize,
    /// Initial sizes of the join test, comma-separated (the group grows to 12).
    #[arg(long, value_delimiter = ',', default_values_t = [2, 4, 6, 8, 10])]
    join_from: Vec<usize>,
    /// Coordinator crashes to time.
    #[arg(long, default_value_t = 5)]
    failovers: usize,
    /// Skip the Zenoh baseline.
    #[arg(long)]
    no_zenoh: bool,
    /// GCBRR with `msg_t` throughout rather than learned from the answers (an ablation of
    /// `Config::learn_msg_t`).
    #[arg(long)]
    fixed_msg_t: bool,
    /// Repetitions of the whole bench (GCBRR before the baselines in odd-numbered runs, after
    /// them in even-numbered ones); figures are their means with 95% intervals.
    #[arg(long, default_value_t = 3)]
    reps: usize,
    /// Frame error rate of every station in a second request-reply pass at the largest size
    /// (GCBRR, TCP-SEQ, TCP-PAR); 0 skips it.
    #[arg(long, default_value_t = 0.05)]
    fer: f64,
    /// Write the figures here, and the JSON next to it (`.json`).
    #[arg(long)]
    plot: Option<PathBuf>,
}

#[derive(Debug, Args)]
struct BridgeArgs {
    #[arg(long)]
    json: bool,
    /// Frame error rate of every station that has none of its own in scenarios/testbed_wifi.toml.
    #[arg(long, default_value_t = 0.05)]
    fer: f64,
    /// Followers of the leader (the get asks every one).
    #[arg(long, default_value_t = 4)]
    followers: usize,
    /// The ROS 2 topic's rate.
    #[arg(long, default_value_t = 100.0)]
    rate_hz: f64,
    /// Measured messages of the topic per run.
    #[arg(long, default_value_t = 2000)]
    messages: usize,
    /// Gets per run.
    #[arg(long, default_value_t = 200)]
    gets: usize,
    /// Bytes of each follower's answer.
    #[arg(long, default_value_t = 200)]
    reply_len: usize,
    /// No TCP upload beside the measurement.
    #[arg(long)]
    no_bulk: bool,
    /// Repetitions, the systems in a rotating order in each.
    #[arg(long, default_value_t = 3)]
    reps: usize,
    /// Systems, comma-separated: zenoh, bridge, bridge_sample_priority.
    #[arg(long, value_delimiter = ',', default_values_t = ["zenoh".to_string(), "bridge".into(), "bridge_sample_priority".into()])]
    systems: Vec<String>,
    /// The bridges' `query_proc_t` (a robot's time to answer in its own session), ms.
    #[arg(long, default_value_t = 10.0)]
    query_proc_ms: f64,
    /// The bridges' `broadcast_copies`: each group broadcast sent that many times (1-4;
    /// default: the bridge's own default).
    #[arg(long, value_parser = clap::value_parser!(u8).range(1..=4))]
    broadcast_copies: Option<u8>,
    /// Write the chart here, and the JSON next to it (`.json`).
    #[arg(long)]
    plot: Option<PathBuf>,
}

#[derive(Debug, Args)]
struct FidelityArgs {
    #[arg(long)]
    json: bool,
    /// Probes of the delay and loss phase (50 Mbit/s of 1250-byte datagrams: 100 000 take 21 s).
    #[arg(long, default_value_t = 100_000)]
    probes: u64,
    /// Windows of `--probes` probes, one after the other over the same link; the loss error
    /// is their mean (one window's error is mostly the generator's sampling noise).
    #[arg(long, default_value_t = 5)]
    loss_windows: u32,
    #[arg(long, default_value_t = 20.0)]
    owd_ms: f64,
    #[arg(long, default_value_t = 0.05)]
    loss: f64,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// SCHED_FIFO priority of the emulator thread, and of Rattan's (0: none).
    #[arg(long, default_value_t = 50)]
    rt_priority: i32,
    /// Do not run Rattan beside Cohort (it runs when $COHORT_RATTAN, target/tools/bin/rattan
    /// or PATH has one: scripts/install-rattan).
    #[arg(long)]
    no_rattan: bool,
    /// Repetitions; the emulators alternate within each, and the summary gives means with 95%
    /// intervals.
    #[arg(long, default_value_t = 1)]
    reps: u32,
    /// Measure every repetition twice: on the idle machine and beside a CPU hog at normal
    /// priority on every core.
    #[arg(long)]
    background_load: bool,
    /// Cohort's emulator's timing options (as `cohort testbed up`'s).
    #[command(flatten)]
    emu: crate::testbed_cmd::EmuTimingFlags,
    /// Also write the JSON here and the delay-error CDF next to it (`.png`).
    #[arg(long)]
    out: Option<PathBuf>,
}

#[derive(Debug, Args)]
struct CoorpArgs {
    /// Print the report as JSON (otherwise a short summary).
    #[arg(long)]
    json: bool,
    /// Robots, the leader included.
    #[arg(long, default_value_t = 5)]
    robots: usize,
    /// Repetitions (seeds), systems alternating within each.
    #[arg(long, default_value_t = 3)]
    reps: u64,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Training epochs per run.
    #[arg(long, default_value_t = 2)]
    epochs: usize,
    /// Parameter update per worker, MiB.
    #[arg(long, default_value_t = 10.0)]
    update_mb: f64,
    /// Team sizes of the scalability sweep (empty: none).
    #[arg(long, value_delimiter = ',', default_value = "2,5,10,20,30,40,50,60")]
    scale: Vec<usize>,
    /// Also write the JSON next to this PNG (reaction-time CDFs and the sweep); with
    /// --testbed also `NAME_testbed.png` (the testbed's CDFs).
    #[arg(long)]
    plot: Option<PathBuf>,
    /// Also run the testbed half (root): the workload on real kernel stacks in network
    /// namespaces over the emulated channel, the Cohort systems as `cohort coorp agent`
    /// processes; merged as `profiles.<p>.testbed.<system>` and `unmarked.testbed`.
    #[arg(long)]
    testbed: bool,
    /// With --testbed: skip the simulator half.
    #[arg(long, requires = "testbed")]
    no_sim: bool,
    /// Testbed systems with control marked (edca, schedwifi, coorp, coorp_global, coorp_local,
    /// cohort_bulk, cohort_bulk_local (the training's bulk sent as `cohort bulk`, asking the
    /// agents for permits), no_bh, ideal; `ideal` is the denominator of bh_utilization). The
    /// local half's agents and SchedWiFi's shapers read their robot's card (`coorp_local_fixed`,
    /// `schedwifi_fixed`: a fixed 2 ms lead instead); `coorp_card`: COORP's agents read it too.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "edca,schedwifi,coorp,coorp_global,coorp_local,cohort_bulk,cohort_bulk_local,no_bh,ideal"
    )]
    testbed_systems: Vec<String>,
    /// Testbed systems with control unmarked (edca, coorp; "" for none).
    #[arg(long, value_delimiter = ',', default_value = "edca,coorp")]
    testbed_unmarked: Vec<String>,
    /// NIC profiles of the testbed half.
    #[arg(long, value_delimiter = ',', default_value = "per_ac,shared_tx")]
    testbed_profiles: Vec<String>,
    /// The testbed's channel as PHY:Mbit/s (e.g. ac:78); default: the fastest candidate the
    /// emulator sustains in real time here, measured first.
    #[arg(long)]
    testbed_channel: Option<String>,
    /// Training epochs per testbed run.
    #[arg(long, default_value_t = 3)]
    testbed_epochs: usize,
    /// Parameter update per worker on the testbed, MiB; default: sized so that a run lasts
    /// about 20 s on the channel.
    #[arg(long)]
    testbed_update_mb: Option<f64>,
    /// Seconds of each phase of the channel search per candidate.
    #[arg(long, default_value_t = 3.0)]
    testbed_probe_s: f64,
}

#[derive(Debug, Args)]
struct CoorpGateArgs {
    /// Print the report as JSON (otherwise a short summary).
    #[arg(long)]
    json: bool,
    #[arg(long, default_value_t = 300)]
    cycles: usize,
    /// The control period, ms (30 Hz by default).
    #[arg(long, default_value_t = 100.0 / 3.0)]
    period_ms: f64,
    /// The protection window held in each period, ms.
    #[arg(long, default_value_t = 8.0)]
    hold_ms: f64,
    /// The link rate the gate shapes to, Mbit/s.
    #[arg(long, default_value_t = 50.0)]
    link_mbps: f64,
    /// Also write the JSON here and the pause CDF next to it (`.png`).
    #[arg(long)]
    out: Option<PathBuf>,
}

#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    #[error("invalid argument: {0}")]
    Invalid(String),
    #[error("writing {path}: {source}")]
    Write { path: PathBuf, source: std::io::Error },
    #[error(transparent)]
    Python(#[from] python::PythonError),
    #[error("plotting failed; the JSON is at {0}")]
    Plot(PathBuf),
    #[error("{0}")]
    Run(String),
}

/// Refuses a bench that needs the testbed (network namespaces) before anything runs, in one
/// line, when this process is not root.
pub(crate) fn need_root(bench: &str) -> Result<(), BenchError> {
    cohort_emu::netns::require_root().map_err(|e| BenchError::Run(format!("bench {bench}: {e}")))
}

pub fn run(args: BenchArgs) -> Result<ExitCode, BenchError> {
    match args.which {
        Which::Coding(a) => coding(&a),
        Which::CoorpGate(a) => coorp_gate(&a),
        Which::Coorp(a) => coorp(&a),
        Which::Lrt(a) => lrt(&a),
        Which::LrtGrid(a) => lrt_grid(&a),
        Which::LrtShare(a) => lrt_share(&a),
        Which::Multipath(a) => crate::bench_multipath::run(&a),
        Which::Beams(a) => crate::bench_beams::run(&a),
        Which::Migration(a) => crate::bench_migration::run(&a),
        Which::Crosscheck(a) => crate::bench_crosscheck::run(&a),
        Which::Bianchi { json, seed } => {
            let r = cohort_bench::medium::bianchi(seed);
            if json {
                println!("{}", serde_json::to_string_pretty(&r).unwrap_or_default());
            } else {
                for c in &r.cases {
                    println!(
                        "{:>6} n={:>2}: simulated {:>8.4} analytic {:>8.4} ns-3 {:>8.4} Mbit/s, error {:.2}%",
                        c.phy,
                        c.n,
                        c.simulated_mbps,
                        c.analytic_mbps,
                        c.reference_mbps,
                        c.rel_err * 100.0
                    );
                }
                println!("max error {:.2}%", r.max_rel_err * 100.0);
            }
            Ok(ExitCode::SUCCESS)
        }
        Which::Sim { json, stations, seconds, seed } => {
            if stations == 0 || stations > 1000 || !(seconds > 0.0 && seconds <= 3600.0) {
                return Err(BenchError::Invalid("--stations 1..=1000 and --seconds in (0, 3600]".into()));
            }
            let r = cohort_bench::medium::sim(stations, seconds, seed);
            if json {
                println!("{}", serde_json::to_string_pretty(&r).unwrap_or_default());
            } else {
                println!(
                    "edca_sat n={}: {:.2} Mbit/s (BE {:.2}, VO {:.2}); {:.0} simulated s per wall s; 40 stations: {:.0}",
                    r.stations,
                    r.throughput_mbps,
                    r.be_mbps,
                    r.vo_mbps,
                    r.sim_seconds_per_wall_second,
                    r.stations_40_sim_seconds_per_wall_second
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        Which::TestbedFidelity(a) => fidelity(&a),
        Which::Transport(a) => transport(&a),
        Which::Group(a) => group(&a),
        Which::Bridge(a) => bridge(&a),
        Which::Bindings { args } => {
            // The pair's Rust half is this very binary.
            let mut all = Vec::new();
            if let Ok(exe) = std::env::current_exe() {
                all.extend(["--cohort-bin".to_string(), exe.display().to_string()]);
            }
            all.extend(args);
            Ok(python::run_module("cohort.lrt_rate", &all)?)
        }
        Which::Tune { args } => {
            let all: Vec<String> = std::iter::once("bench".to_string()).chain(args).collect();
            Ok(python::run_module("cohort.tune", &all)?)
        }
        Which::Timer { json, samples, interval_us, reps } => {
            if samples == 0 || interval_us == 0 || reps == 0 {
                return Err(BenchError::Invalid("--samples, --interval-us and --reps must be positive".into()));
            }
            let progress = Progress::new("timer", json);
            let r = cohort_bench::timer::run(samples, Duration::from_micros(interval_us), reps, |s| progress.step(s))
                .map_err(|source| BenchError::Write { path: "timerfd".into(), source })?;
            if json {
                println!("{}", serde_json::to_string_pretty(&r).unwrap_or_default());
            } else {
                for (name, l) in
                    [("timerfd", &r.timerfd), ("thread::sleep", &r.thread_sleep), ("tokio sleep", &r.tokio_sleep)]
                {
                    println!(
                        "{name:>14}: late p50 {:>7.1} p99 {:>7.1} p99.9 {:>7.1} max {:>7.1} us",
                        l.p50_us, l.p99_us, l.p999_us, l.max_us
                    );
                }
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn coding(a: &CodingArgs) -> Result<ExitCode, BenchError> {
    if !(0.0..0.9).contains(&a.loss) {
        return Err(BenchError::Invalid(format!("--loss {} must be in [0, 0.9)", a.loss)));
    }
    if a.symbols == 0 {
        return Err(BenchError::Invalid("--symbols must be positive".into()));
    }
    let p = cohort_bench::coding::CodingParams {
        seed: a.seed,
        symbols: a.symbols,
        loss: a.loss,
        min_time: Duration::from_millis(a.min_time_ms),
        ..Default::default()
    };
    let progress = Progress::new("coding", a.json);
    let report = cohort_bench::coding::run(&p, |s| progress.step(s));
    let json = serde_json::to_string_pretty(&report).unwrap_or_default();
    if a.json {
        println!("{json}");
    } else {
        println!(
            "kernel {}: axpy {:.2} Gbit/s ({:.1}x scalar) | encode w64 {:.2} Gbit/s | decode w64 {:.2} Gbit/s | rlnc k64 {:.2} Gbit/s | decode/rlnc {:.2}x",
            report.kernel,
            report.axpy_simd_gbps,
            report.axpy_simd_over_scalar,
            report.encode_gbps_w64,
            report.decode_gbps_w64,
            report.rlnc_crate_decode_gbps_k64,
            report.decode_vs_rlnc_ratio
        );
    }
    if let Some(path) = &a.out {
        write_and_plot(path, &json, "coding")?;
    }
    Ok(ExitCode::SUCCESS)
}

fn probability(name: &str, p: f64) -> Result<f64, BenchError> {
    if (0.0..=1.0).contains(&p) { Ok(p) } else { Err(BenchError::Invalid(format!("--{name} {p} must be in [0, 1]"))) }
}

fn lrt(a: &LrtArgs) -> Result<ExitCode, BenchError> {
    use cohort_medium::link::LossModel;
    let loss = match a.loss_model {
        LossKind::Iid => LossModel::Iid { p: probability("loss", a.loss)? },
        LossKind::Ge => LossModel::GilbertElliott {
            p_gb: probability("ge-p-gb", a.ge_p_gb)?,
            p_bg: probability("ge-p-bg", a.ge_p_bg)?,
            loss_good: probability("ge-loss-good", a.ge_loss_good)?,
            loss_bad: probability("loss", a.loss)?,
        },
    };
    if loss.mean() >= 0.9 {
        return Err(BenchError::Invalid("mean loss must stay below 0.9".into()));
    }
    let positive =
        [("owd-ms", a.owd_ms >= 0.0), ("rate-mbps", a.rate_mbps > 0.0), ("interval-ms", a.interval_ms > 0.0)];
    if let Some((name, _)) = positive.iter().find(|(_, ok)| !ok) {
        return Err(BenchError::Invalid(format!("--{name} must be positive")));
    }
    if a.size == 0 || a.size > 16 << 20 || a.count == 0 {
        return Err(BenchError::Invalid("--size must be 1 B..16 MiB and --count positive".into()));
    }
    if !(1..=50).contains(&a.reps) {
        return Err(BenchError::Invalid("--reps in 1..=50".into()));
    }
    let p = cohort_bench::lrt::LrtParams {
        owd_ms: a.owd_ms,
        loss,
        rate_mbps: a.rate_mbps,
        size: a.size,
        interval_ms: a.interval_ms,
        count: a.count,
        seed: a.seed,
        warmup_ms: a.warmup_ms,
        reps: a.reps,
    };
    let progress = Progress::new("lrt", a.json);
    let r = cohort_bench::lrt::run(&p, |s| progress.step(s)).map_err(BenchError::Invalid)?;
    let json = serde_json::to_string_pretty(&r).unwrap_or_default();
    if a.json {
        println!("{json}");
    } else {
        for (name, f) in [("lrt", &r.lrt), ("block", &r.block), ("arq", &r.arq)] {
            println!(
                "{name:>5}: p50 {:.1} p90 {:.1} p99 {:.1} p99.9 {:.1} ms | at OWD {:.1}% | overhead {:.2} | delivered {}/{} in order: {}",
                f.delay.p50_ms,
                f.delay.p90_ms,
                f.delay.p99_ms,
                f.delay.p999_ms,
                f.delay.share_at_owd * 100.0,
                f.overhead,
                f.delivered,
                f.sent,
                f.in_order
            );
        }
        let (b, q) = (r.runs.p99_ratio_block_over_lrt, r.runs.p99_ratio_arq_over_lrt);
        println!(
            "block p99 / lrt p99 = {:.2} ({:.2} ± {:.2} paired over {} runs); arq p99 / lrt p99 = {:.2} ({:.2} ± {:.2}); {}",
            r.p99_ratio_block_over_lrt,
            b.mean,
            b.ci95,
            b.runs,
            r.p99_ratio_arq_over_lrt,
            q.mean,
            q.ci95,
            r.capacity_note
        );
        println!("replay: {}", r.command);
    }
    if let Some(path) = &a.out {
        let mut v = serde_json::to_value(&r).unwrap_or_default();
        let thin = |d: &[f64]| cohort_bench::stats::thin(d, 2000);
        v["cdf"] = serde_json::json!({
            "lrt": thin(&r.lrt.delays_ms),
            "block": thin(&r.block.delays_ms),
            "arq": thin(&r.arq.delays_ms),
        });
        write_and_plot(path, &serde_json::to_string(&v).unwrap_or_default(), "lrt")?;
    }
    Ok(ExitCode::SUCCESS)
}

fn lrt_grid(a: &LrtGridArgs) -> Result<ExitCode, BenchError> {
    use cohort_bench::lrt_grid::{GridParams, run};
    if a.owds_ms.iter().any(|&d| !(0.0..=10_000.0).contains(&d)) || a.owds_ms.is_empty() {
        return Err(BenchError::Invalid("--owds-ms must be 0..=10000 ms each".into()));
    }
    if a.intervals_ms.iter().any(|&d| !(d > 0.0 && d <= 10_000.0)) || a.intervals_ms.is_empty() {
        return Err(BenchError::Invalid("--intervals-ms must be in (0, 10000] ms each".into()));
    }
    let mut g = GridParams {
        count: a.count,
        reps: a.reps,
        seed: a.seed,
        owds_ms: a.owds_ms.clone(),
        intervals_ms: a.intervals_ms.clone(),
        ..GridParams::default()
    };
    if a.threads > 0 {
        g.threads = a.threads;
    }
    let total = cohort_bench::lrt_grid::points(&g).len() as u64;
    let done = std::sync::atomic::AtomicU64::new(0);
    let lrt_cfg = cohort_proto::lrt::Config { estimate_rate: a.estimate_rate, ..Default::default() };
    let progress = Progress::new("lrt-grid", a.json);
    let r = run(&g, &lrt_cfg, |p| {
        let n = done.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
        let what = format!(
            "{} ms, {}, {} B every {} ms: p99 lrt {:.1} block {:.1} arq {:.1} ms, overhead {:.2}/{:.2}/{:.2}",
            p.owd_ms,
            p.loss_label,
            p.size,
            p.interval_ms,
            p.lrt.delay.p99_ms,
            p.block.delay.p99_ms,
            p.arq.delay.p99_ms,
            p.lrt.overhead,
            p.block.overhead,
            p.arq.overhead
        );
        progress.finished(&Step { done: n, total, what: &what });
    })
    .map_err(BenchError::Invalid)?;
    let json = serde_json::to_string_pretty(&r).unwrap_or_default();
    if a.json {
        println!("{json}");
    } else {
        println!(
            "{} points: LRT's p99 lowest at {} (wins: lrt {}, block {}, arq {}); overhead - ARQ's at most {:.2} (interval <= 5 ms); overhead at 10 ms at most {:.2}; all complete and in order: {}",
            r.points,
            r.lrt_lowest_p99_points,
            r.wins.lrt,
            r.wins.block,
            r.wins.arq,
            r.max_overhead_minus_arq,
            r.max_overhead_10ms,
            r.all_complete_in_order
        );
    }
    if let Some(path) = &a.out {
        write_and_plot(path, &json, "lrt-grid")?;
    }
    Ok(ExitCode::SUCCESS)
}

fn lrt_share(a: &LrtShareArgs) -> Result<ExitCode, BenchError> {
    let p = cohort_bench::lrt_share::ShareParams {
        rates_mbps: a.rates_mbps.clone(),
        reps: a.reps,
        seed: a.seed,
        bulk_bytes: a.bulk_bytes,
        ..Default::default()
    };
    if a.bulk_bytes == 0 || a.bulk_bytes > 1 << 30 {
        return Err(BenchError::Invalid("--bulk-bytes must be 1 B..1 GiB".into()));
    }
    let total = p.rates_mbps.len() as u64 + 1;
    let done = std::cell::Cell::new(0);
    let progress = Progress::new("lrt-share", a.json);
    let r = cohort_bench::lrt_share::run_bench(&p, |s| {
        let what = format!(
            "{}: goodput {:.2} ± {:.2} Mbit/s, control p99 {:.1} ± {:.1} ms (p50 {:.1}), complete {}",
            s.label, s.goodput_mbps, s.goodput_ci95, s.control_p99_ms, s.control_p99_ci95, s.control_p50_ms, s.complete
        );
        done.set(done.get() + 1);
        progress.finished(&Step { done: done.get(), total, what: &what });
    })
    .map_err(BenchError::Invalid)?;
    let json = serde_json::to_string_pretty(&r).unwrap_or_default();
    if a.json {
        println!("{json}");
    } else {
        println!(
            "estimator: {:.3} of the best hand-set rate's goodput ({} Mbit/s), control p99 {:.3} of it",
            r.goodput_ratio_vs_best, r.best_hand_set_mbps, r.control_p99_ratio_vs_best
        );
    }
    if let Some(path) = &a.out {
        std::fs::write(path, &json).map_err(|source| BenchError::Write { path: path.clone(), source })?;
    }
    Ok(ExitCode::SUCCESS)
}

fn transport(a: &TransportArgs) -> Result<ExitCode, BenchError> {
    need_root("transport")?;
    use cohort_bench::transport::{TRANSPORTS, TransportParams};
    if !(a.seconds > 0.0 && a.seconds <= 600.0 && (0.0..=60.0).contains(&a.warmup_s)) {
        return Err(BenchError::Invalid("--seconds in (0, 600], --warmup-s in [0, 60]".into()));
    }
    if let Some(bad) = a.losses.iter().chain(&a.fades).find(|l| !(0.0..0.9).contains(*l)) {
        return Err(BenchError::Invalid(format!("loss {bad} must be in [0, 0.9)")));
    }
    if !(a.loss_slot_us.is_finite() && (1.0..=1e6).contains(&a.loss_slot_us)) {
        return Err(BenchError::Invalid(format!("--loss-slot-us {} must be in [1, 1e6]", a.loss_slot_us)));
    }
    if !(a.burst_ms.is_finite() && a.burst_ms * 1e3 >= a.loss_slot_us && a.burst_ms <= 60_000.0) {
        return Err(BenchError::Invalid(format!(
            "--burst-ms {} must be at least one slot and at most 60 s",
            a.burst_ms
        )));
    }
    if let Some(bad) = a.transports.iter().find(|t| !TRANSPORTS.contains(&t.as_str())) {
        return Err(BenchError::Invalid(format!("unknown transport {bad:?}; known: {}", TRANSPORTS.join(", "))));
    }
    if !(1..=20).contains(&a.reps) {
        return Err(BenchError::Invalid("--reps in 1..=20".into()));
    }
    let p = TransportParams {
        reps: a.reps,
        seconds: a.seconds,
        warmup_s: a.warmup_s,
        losses: a.losses.clone(),
        fades: a.fades.clone(),
        burst_ms: a.burst_ms,
        loss_slot_us: a.loss_slot_us,
        transports: a.transports.clone(),
        seed: a.seed,
        ..TransportParams::default()
    };
    let progress = Progress::new("transport", a.json);
    let r = cohort_bench::transport::run(&p, |s| progress.step(s)).map_err(BenchError::Run)?;
    let json = serde_json::to_string_pretty(&r).unwrap_or_default();
    if a.json {
        println!("{json}");
    } else {
        for c in &r.cases {
            for (name, f) in &c.transports {
                let g = |k: &str| f.get(k).and_then(|v| v.as_f64()).unwrap_or(f64::NAN);
                println!(
                    "{:>26} {:<7} {name:<9}: p50 {:>7.1} p99 {:>8.1} ± {:.1} p99.9 {:>8.1} ms, at owd {:>5.1}%, \
                     overhead {:.2}, {}/{} delivered, in order {}, sustained {}",
                    c.loss.name(),
                    c.workload,
                    g("p50_ms"),
                    g("p99_ms"),
                    g("p99_ci95"),
                    g("p999_ms"),
                    g("share_at_owd") * 100.0,
                    g("overhead"),
                    g("delivered"),
                    g("sent"),
                    f.get("in_order").and_then(|v| v.as_bool()).unwrap_or(false),
                    f.get("sustained").and_then(|v| v.as_bool()).unwrap_or(false),
                );
            }
        }
        println!("replay: {}", r.command);
    }
    if let Some(png) = &a.plot {
        write_and_plot(&png.with_extension("json"), &json, "transport")?;
    }
    Ok(ExitCode::SUCCESS)
}

fn group(a: &GroupArgs) -> Result<ExitCode, BenchError> {
    need_root("group")?;
    use cohort_bench::group::GroupParams;
    let p = GroupParams {
        sizes: a.sizes.clone(),
        interactions: a.interactions,
        polls: a.polls,
        payload: a.payload,
        join_from: a.join_from.clone(),
        failovers: a.failovers,
        reps: a.reps,
        zenoh: !a.no_zenoh,
        fer: a.fer,
        timing: cohort_proto::group::Config { learn_msg_t: !a.fixed_msg_t, ..GroupParams::default().timing },
        ..GroupParams::default()
    };
    p.validate().map_err(BenchError::Invalid)?;
    let progress = Progress::new("group", a.json);
    let r = cohort_bench::group::run(&p, |s| progress.step(s)).map_err(BenchError::Run)?;
    print_summary_and_plot(&r, a.json, a.plot.as_ref(), "group")
}

/// Prints the whole report (`--json`) or its `summary`, and with `--plot` writes the JSON
/// beside the chart and renders it.
fn print_summary_and_plot(
    r: &serde_json::Value,
    json: bool,
    plot: Option<&PathBuf>,
    kind: &str,
) -> Result<ExitCode, BenchError> {
    let text = serde_json::to_string_pretty(r).unwrap_or_default();
    if json {
        println!("{text}");
    } else {
        println!("{}", serde_json::to_string_pretty(&r["summary"]).unwrap_or_default());
    }
    if let Some(png) = plot {
        write_and_plot(&png.with_extension("json"), &text, kind)?;
    }
    Ok(ExitCode::SUCCESS)
}

fn bridge(a: &BridgeArgs) -> Result<ExitCode, BenchError> {
    use cohort_bench::bridge_testbed::{BridgeParams, System};
    let systems = a
        .systems
        .iter()
        .map(|s| System::parse(s).ok_or_else(|| BenchError::Invalid(format!("--systems: unknown system {s:?}"))))
        .collect::<Result<Vec<_>, _>>()?;
    if !(0.0..=10_000.0).contains(&a.query_proc_ms) {
        return Err(BenchError::Invalid("--query-proc-ms must lie in [0, 10000]".into()));
    }
    let p = BridgeParams {
        fer: a.fer,
        followers: a.followers,
        rate_hz: a.rate_hz,
        messages: a.messages,
        gets: a.gets,
        reply_len: a.reply_len,
        bulk: !a.no_bulk,
        reps: a.reps,
        systems,
        query_proc: Duration::from_secs_f64(a.query_proc_ms / 1e3),
        broadcast_copies: a.broadcast_copies,
        ..BridgeParams::default()
    };
    p.check().map_err(BenchError::Invalid)?;
    need_root("bridge")?;
    let progress = Progress::new("bridge", a.json);
    let r = cohort_bench::bridge_testbed::run(&p, |s| progress.step(s)).map_err(BenchError::Run)?;
    print_summary_and_plot(&r, a.json, a.plot.as_ref(), "bridge")
}

fn fidelity(a: &FidelityArgs) -> Result<ExitCode, BenchError> {
    need_root("testbed-fidelity")?;
    if a.probes < 100
        || !(1..=100).contains(&a.loss_windows)
        || !(0.0..0.9).contains(&a.loss)
        || !(0.0..=10_000.0).contains(&a.owd_ms)
        || !(1..=100).contains(&a.reps)
    {
        return Err(BenchError::Invalid(
            "--probes >= 100, --loss-windows in [1, 100], --loss in [0, 0.9), --owd-ms in [0, 10000], --reps in [1, 100]"
                .into(),
        ));
    }
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    if let Some(cpu) = a.emu.cpu.filter(|&c| c >= cpus) {
        return Err(BenchError::Invalid(format!("--cpu {cpu}: this machine has CPUs 0-{}", cpus - 1)));
    }
    let p = cohort_bench::fidelity::FidelityParams {
        probes: a.probes,
        loss_windows: a.loss_windows,
        owd_ms: a.owd_ms,
        loss: a.loss,
        seed: a.seed,
        rt_priority: (a.rt_priority > 0).then_some(a.rt_priority),
        rattan: !a.no_rattan,
        reps: a.reps,
        background_load: a.background_load,
        busy_poll: a.emu.busy_poll,
        cpu: a.emu.cpu,
        lock_memory: a.emu.lock_memory,
        ..Default::default()
    };
    let progress = Progress::new("testbed-fidelity", a.json);
    let r = cohort_bench::fidelity::run(&p, |s| progress.step(s)).map_err(BenchError::Run)?;
    let json = serde_json::to_string_pretty(&r).unwrap_or_default();
    if a.json {
        println!("{json}");
    } else {
        use cohort_bench::fidelity::{EmulatorFigures, PeerOutcome};
        let line = |name: &str, f: &EmulatorFigures| {
            println!(
                "{name}: owd error mean {:.3} ms (p50 {:.3}, p99 {:.3}, max {:.3}); added jitter p99 {:.3} ms; loss {:.4} vs {} \
                 (abs err {:.4}); rate {:.2} vs {} Mbit/s (rel err {:.4})",
                f.owd_err_ms_mean,
                f.owd_err_ms_p50,
                f.owd_err_ms_p99,
                f.owd_err_ms_max,
                f.added_jitter_p99_ms,
                f.measured_loss,
                p.loss,
                f.loss_abs_err,
                f.measured_rate_mbps,
                p.rate_mbps,
                f.rate_rel_err,
            )
        };
        line("cohort", &r.cohort);
        if let Some(late) = r.cohort.emulator_late_us_p99 {
            println!("cohort emulator lateness p99 {late:.0} us");
        }
        match &r.rattan {
            PeerOutcome::Measured(m) => line("rattan", &m.figures),
            PeerOutcome::Skipped { skipped } => println!("rattan: skipped: {skipped}"),
            PeerOutcome::Failed { failed } => println!("rattan: failed: {failed}"),
        }
        if let Some(c) = &r.cohort_vs_rattan {
            println!(
                "cohort no worse than rattan on every figure: {} literally, {} with loss judged beyond sampling noise \
                 (mean |loss err| of an exact generator {:.5}, difference se {:.5})",
                c.cohort_no_worse_on_all,
                c.cohort_no_worse_on_all_beyond_noise,
                c.loss_abs_err_expected,
                c.loss_abs_err_diff_se
            );
        }
        for sm in &r.summaries {
            println!(
                "{:?}: {} repetition(s) pooled, {} withheld; goals (mean <= {} ms, jitter <= {} ms) met: {:?}",
                sm.condition, sm.reps_published, sm.reps_withheld, sm.owd_goal_ms, sm.jitter_goal_ms, sm.goals_met
            );
            for (name, st) in [("cohort", &sm.cohort), ("rattan", &sm.rattan)] {
                let Some(st) = st else { continue };
                let figs: Vec<String> = st
                    .figures
                    .iter()
                    .map(|(k, m)| format!("{k} {:.4} [{:.4}, {:.4}]", m.mean, m.ci95[0], m.ci95[1]))
                    .collect();
                println!("  {name}: {}; host steal {:.2}%", figs.join(", "), st.steal_share.mean * 100.0);
            }
            if let Some(nw) = &sm.cohort_no_worse_beyond_noise {
                println!("  cohort no worse than rattan beyond noise: {nw:?}");
            }
        }
        println!("replay: {}", r.command);
    }
    if let Some(path) = &a.out {
        write_and_plot(path, &json, "fidelity")?;
    }
    Ok(ExitCode::SUCCESS)
}

fn coorp(a: &CoorpArgs) -> Result<ExitCode, BenchError> {
    if !(2..=200).contains(&a.robots)
        || a.reps == 0
        || a.update_mb.is_nan()
        || a.update_mb <= 0.0
        || a.scale.iter().any(|&n| !(2..=200).contains(&n))
    {
        return Err(BenchError::Invalid("--robots and --scale in 2..=200, --reps and --update-mb positive".into()));
    }
    let p = cohort_bench::coorp::CoorpParams {
        robots: a.robots,
        reps: a.reps,
        seed: a.seed,
        epochs: a.epochs,
        update_mb: a.update_mb,
        scale: a.scale.clone(),
    };
    let tb = if a.testbed { Some(testbed_params(a)?) } else { None };
    let mut r = if a.no_sim {
        serde_json::json!({ "bench": "coorp" })
    } else {
        let progress = Progress::new("coorp", a.json);
        cohort_bench::coorp::bench(&p, |s| progress.step(s)).map_err(BenchError::Run)?
    };
    if let Some(tp) = &tb {
        let progress = Progress::new("coorp testbed", a.json);
        let t = cohort_bench::coorp_testbed::bench(tp, |s| progress.step(s)).map_err(BenchError::Run)?;
        cohort_bench::coorp_testbed::merge(&mut r, &t);
        r["testbed"]["command"] = serde_json::Value::String(testbed_command(a));
    }
    let json = serde_json::to_string_pretty(&r).unwrap_or_default();
    if a.json {
        println!("{json}");
    } else {
        let f = |v: &serde_json::Value, k: &str| v.get(k).and_then(|x| x.as_f64()).unwrap_or(f64::NAN);
        for (profile, v) in r["profiles"].as_object().into_iter().flatten() {
            for (system, s) in v["sim"].as_object().into_iter().flatten() {
                println!(
                    "{profile:<9} {system:<13} violations {:>6.2}%  reaction p99 {:>7.2} ms  bulk utilization {:.3}  epoch x{:.3} of EDCA",
                    f(s, "violation_share") * 100.0,
                    f(&s["reaction_ms"], "p99"),
                    f(s, "bh_utilization"),
                    f(s, "epoch_time_ratio_vs_edca"),
                );
            }
            for (system, s) in r["unmarked_by_profile"][profile].as_object().into_iter().flatten() {
                println!(
                    "{profile:<9} {system:<13} unmarked control: violations {:>6.2}%",
                    f(s, "violation_share") * 100.0
                );
            }
        }
        for (profile, v) in r["profiles"].as_object().into_iter().flatten() {
            for (system, s) in v["testbed"].as_object().into_iter().flatten() {
                println!(
                    "{profile:<9} {system:<13} testbed: violations {:>6.2}% (per run {})  reaction p50 {:>7.2} p99 {:>7.2} ms  \
                     bulk {:.1} Mbit/s, utilization {:.3}  epoch x{:.3} of EDCA",
                    f(s, "violation_share") * 100.0,
                    s["violation_share_per_run"],
                    f(s, "reaction_p50_ms"),
                    f(s, "reaction_p99_ms"),
                    f(s, "bh_mbps"),
                    f(s, "bh_utilization"),
                    f(s, "epoch_time_ratio_vs_edca"),
                );
            }
            for (system, s) in r["unmarked_testbed_by_profile"][profile].as_object().into_iter().flatten() {
                println!(
                    "{profile:<9} {system:<13} testbed, unmarked control: violations {:>6.2}%",
                    f(s, "violation_share") * 100.0
                );
            }
        }
        if a.testbed {
            println!("testbed channel: {}", r["testbed_channel"]);
            println!("testbed replay: {}", r["testbed"]["command"].as_str().unwrap_or_default());
        }
        for s in r["scalability"].as_array().into_iter().flatten() {
            println!(
                "{:>3} robots: violations {:>6.2}% (model {:>6.2}%), bulk {:>7.1} Mbit/s (model {:>7.1})",
                f(s, "robots"),
                f(s, "violation_share") * 100.0,
                f(s, "model_violation_share") * 100.0,
                f(s, "bh_mbps"),
                f(s, "model_bh_mbps")
            );
        }
        if !a.no_sim {
            println!("max robots within 5%: {}", r["max_robots_within_5pct"]);
            println!("replay: {}", r["command"].as_str().unwrap_or_default());
        }
    }
    if let Some(png) = &a.plot {
        if !a.no_sim {
            write_and_plot(&png.with_extension("json"), &json, "coorp")?;
        }
        if a.testbed {
            // The testbed's CDFs beside it: `NAME_testbed.png` and its JSON (the whole report).
            let stem = png.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|| "coorp".into());
            write_and_plot(&png.with_file_name(format!("{stem}_testbed.json")), &json, "coorp-testbed")?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The testbed half's parameters from the flags; refuses to go on without root.
fn testbed_params(a: &CoorpArgs) -> Result<cohort_bench::coorp_testbed::TestbedParams, BenchError> {
    use cohort_bench::coorp_testbed::{Channel, TbSystem, TestbedParams};
    need_root("coorp --testbed")?;
    let systems = |names: &[String], allowed: &[TbSystem]| -> Result<Vec<TbSystem>, BenchError> {
        names
            .iter()
            .filter(|n| !n.is_empty())
            .map(|n| {
                TbSystem::from_name(n).filter(|s| allowed.contains(s)).ok_or_else(|| {
                    let names: Vec<&str> = allowed.iter().map(|s| s.name()).collect();
                    BenchError::Invalid(format!("testbed system {n:?}: one of {}", names.join(", ")))
                })
            })
            .collect()
    };
    let mut p = TestbedParams {
        reps: a.reps,
        seed: a.seed,
        systems: systems(&a.testbed_systems, &TbSystem::MARKED)?,
        unmarked: systems(&a.testbed_unmarked, &TbSystem::UNMARKED)?,
        profiles: a.testbed_profiles.clone(),
        probe_s: a.testbed_probe_s,
        ..TestbedParams::default()
    };
    if let Some(bad) = p.profiles.iter().find(|x| !["per_ac", "shared_tx"].contains(&x.as_str())) {
        return Err(BenchError::Invalid(format!("--testbed-profiles: {bad:?} is not per_ac or shared_tx")));
    }
    if let Some(c) = &a.testbed_channel {
        let (phy, rate) = c.split_once(':').unwrap_or(("", ""));
        let rate: f64 =
            rate.parse().map_err(|_| BenchError::Invalid("--testbed-channel PHY:MBPS, e.g. ac:78".into()))?;
        if !["a", "g", "n", "ac"].contains(&phy) || !(1.0..=10_000.0).contains(&rate) {
            return Err(BenchError::Invalid("--testbed-channel: PHY a, g, n or ac; rate in [1, 10000] Mbit/s".into()));
        }
        p.channel = Some(Channel { phy: phy.into(), data_mbps: rate });
    }
    if !(0.5..=60.0).contains(&a.testbed_probe_s) || !(1..=100).contains(&a.testbed_epochs) {
        return Err(BenchError::Invalid("--testbed-probe-s in [0.5, 60], --testbed-epochs in [1, 100]".into()));
    }
    p.workload.epochs = a.testbed_epochs;
    if let Some(mb) = a.testbed_update_mb {
        if !(mb > 0.0 && mb <= 1024.0) {
            return Err(BenchError::Invalid("--testbed-update-mb in (0, 1024]".into()));
        }
        p.workload.update_bytes = (mb * 1_048_576.0) as usize;
    }
    // The agents are this very binary's `coorp agent`.
    p.agent = std::env::current_exe().ok();
    Ok(p)
}

/// The command that replays the testbed half.
fn testbed_command(a: &CoorpArgs) -> String {
    let mut c = format!(
        "cohort bench coorp --json --testbed --no-sim --reps {} --seed {} --testbed-systems {} --testbed-unmarked '{}' \
         --testbed-profiles {} --testbed-epochs {} --testbed-probe-s {}",
        a.reps,
        a.seed,
        a.testbed_systems.join(","),
        a.testbed_unmarked.join(","),
        a.testbed_profiles.join(","),
        a.testbed_epochs,
        a.testbed_probe_s
    );
    if let Some(ch) = &a.testbed_channel {
        c += &format!(" --testbed-channel {ch}");
    }
    if let Some(mb) = a.testbed_update_mb {
        c += &format!(" --testbed-update-mb {mb}");
    }
    c
}

fn coorp_gate(a: &CoorpGateArgs) -> Result<ExitCode, BenchError> {
    need_root("coorp-gate")?;
    let p = cohort_bench::coorp_gate::GateParams {
        cycles: a.cycles,
        period_ms: a.period_ms,
        hold_ms: a.hold_ms,
        link_mbps: a.link_mbps,
        ..Default::default()
    };
    let r = cohort_bench::coorp_gate::run(&p).map_err(BenchError::Run)?;
    let json = serde_json::to_string_pretty(&r).unwrap_or_default();
    if a.json {
        println!("{json}");
    } else {
        println!(
            "{} cycles: pause p50 {} p99 {} max {} ms; resume p50 {} p99 {} ms ({} without); netlink p99 {} us; \
             leaked {}; EF probes held p99 {} ms, open p99 {} ms, lost {}; bulk {} Mbit/s = {} of open (open share {})",
            r.pause_ms.n,
            r.pause_ms.p50,
            r.pause_ms.p99,
            r.pause_ms.max,
            r.resume_ms.p50,
            r.resume_ms.p99,
            r.no_resume,
            r.netlink_us.p99,
            r.leaked_segments,
            r.probe_owd_ms_held.p99,
            r.probe_owd_ms_open.p99,
            r.probes_lost,
            r.bulk_mbps,
            r.bulk_utilization,
            r.open_share
        );
        println!("replay: {}", r.command);
    }
    if let Some(path) = &a.out {
        write_and_plot(path, &json, "coorp-gate")?;
    }
    Ok(ExitCode::SUCCESS)
}

/// Writes the JSON report and renders its PNG with `python -m cohort.plot KIND JSON PNG`.
pub(crate) fn write_and_plot(path: &PathBuf, json: &str, kind: &str) -> Result<(), BenchError> {
    std::fs::write(path, json).map_err(|source| BenchError::Write { path: path.clone(), source })?;
    let png = path.with_extension("png");
    let args = [kind.to_string(), path.display().to_string(), png.display().to_string()];
    match python::run_module("cohort.plot", &args)? {
        c if c == ExitCode::SUCCESS => Ok(()),
        _ => Err(BenchError::Plot(path.clone())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Bench {
        #[command(flatten)]
        args: BenchArgs,
    }

    fn transport_args(words: &[&str]) -> TransportArgs {
        let argv = ["bench", "transport"].iter().chain(words);
        match Bench::try_parse_from(argv).expect("parses").args.which {
            Which::Transport(a) => a,
            other => panic!("parsed as {other:?}"),
        }
    }

    #[test]
    fn the_transport_bench_runs_fades_unless_told_not_to() {
        assert_eq!(transport_args(&[]).fades, vec![0.10]);
        assert_eq!(transport_args(&["--fades"]).fades, Vec::<f64>::new());
        assert_eq!(transport_args(&["--fades", "0.05,0.2"]).fades, vec![0.05, 0.2]);
    }
}
