//! `cohort`: the command-line front door to Cohort.

mod bench;
mod bench_beams;
mod bench_crosscheck;
mod bench_migration;
mod bench_multipath;
mod bulk_cmd;
mod coorp_cmd;
mod demo;
mod demo_lrt;
#[cfg(test)]
mod doc_commands;
mod doctor;
mod group_cmd;
mod lrt_cmd;
mod progress;
mod python;
mod sim_cmd;
mod testbed_cmd;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

#[derive(Debug, Parser)]
#[command(name = "cohort", version, about = "Networking and runtime stack for robot teams sharing a wireless channel")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the team-stack demonstration on the built-in default scenario.
    Demo(demo::DemoArgs),
    /// What this machine lets Cohort do: root, namespaces, AF_PACKET, cgroups, SCHED_DEADLINE,
    /// THP, MPTCP, nftables, the Python side, Rattan and ns-3; what each missing piece
    /// disables and how to get it.
    Doctor(doctor::DoctorArgs),
    /// The coded transport over real UDP: `cohort lrt recv --listen ADDR`, `cohort lrt send ADDR`.
    Lrt(lrt_cmd::LrtArgs),
    /// A GCBRR group member over real UDP: `cohort group run --pid N --addr IP:PORT
    /// --broadcast IP:PORT [--group 1,2,3]`; shows membership changes live.
    Group(group_cmd::GroupArgs),
    /// Deterministic simulation: `cohort sim run SCENARIO --seed N` or `--seeds A..B`.
    Sim(sim_cmd::SimArgs),
    /// Coordinated preemption for every application (root): `cohort coorp agent --dev IFACE
    /// ...` on each robot, `cohort coorp status`.
    Coorp(coorp_cmd::CoorpArgs),
    /// Cohort's own bulk transfer under the robot's coorp agent: `cohort bulk recv --listen
    /// ADDR --out FILE`, `cohort bulk send ADDR FILE --dev IFACE`.
    Bulk(bulk_cmd::BulkArgs),
    /// Run a benchmark (baselines in the same run); `--json` prints the figures.
    Bench(bench::BenchArgs),
    /// Real network stacks in namespaces over the emulated channel (root):
    /// `up SCENARIO`, `exec NODE -- CMD`, `status`, `down [--all]`.
    Testbed(testbed_cmd::TestbedArgs),
    /// The OS tuner (Python, `cohort.tune`): `cohort tune --help`.
    #[command(disable_help_flag = true)]
    Tune {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// The Zenoh bridge (Python, `cohort.bridge`): `cohort bridge --config FILE`; one per
    /// robot, carries the configured key expressions across the team on Cohort.
    #[command(disable_help_flag = true)]
    Bridge {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
}

fn main() -> ExitCode {
    // Exit quietly when stdout goes away (`cohort ... | head`), like other Unix tools.
    // SAFETY: restoring the default disposition of SIGPIPE before any thread starts.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    let cli = Cli::parse();
    let result: Result<ExitCode, Box<dyn std::error::Error>> = match cli.command {
        Command::Demo(a) => demo::run(&a).map_err(Into::into),
        Command::Doctor(a) => Ok(doctor::run_doctor(&a)),
        Command::Lrt(a) => lrt_cmd::run(&a).map_err(Into::into),
        Command::Group(a) => group_cmd::run(&a).map_err(Into::into),
        Command::Sim(a) => sim_cmd::run(&a).map_err(Into::into),
        Command::Coorp(a) => coorp_cmd::run(&a).map_err(Into::into),
        Command::Bulk(a) => bulk_cmd::run(&a).map_err(Into::into),
        Command::Bench(a) => bench::run(a).map_err(Into::into),
        Command::Testbed(a) => testbed_cmd::run(&a).map_err(Into::into),
        Command::Tune { args } => python::run_module("cohort.tune", &args).map_err(Into::into),
        Command::Bridge { args } => python::run_module("cohort.bridge", &args).map_err(Into::into),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("cohort: {e}");
            ExitCode::FAILURE
        }
    }
}
