//! `cohort bulk send/recv`: Cohort's own bulk transfer under the robot's coordinated-preemption
//! agent (see `cohort_net::preempt::bulk`).

use clap::{Args, Subcommand};
use cohort_net::preempt::bulk::{self, BulkError, BulkOptions};
use serde_json::json;
use std::fs::File;
use std::io::{BufReader, BufWriter};
use std::net::{SocketAddr, TcpListener};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

#[derive(Debug, Args)]
pub struct BulkArgs {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Debug, Subcommand)]
enum Cmd {
    /// Send FILE to a `cohort bulk recv`, asking the agent on `--dev` for permits.
    Send {
        /// The receiver's address.
        to: SocketAddr,
        file: PathBuf,
        /// The interface whose `cohort coorp agent` to ask; without it the file goes
        /// unpermitted (a foreign upload to the agent, held by its gate if one runs).
        #[arg(long)]
        dev: Option<String>,
        /// The link rate to plan with when the agent does not give one (Mbit/s).
        #[arg(long, default_value_t = 100.0)]
        rate_mbps: f64,
        #[arg(long)]
        json: bool,
    },
    /// Receive transfers into `--out` (one file per transfer: OUT, OUT.1, ...).
    Recv {
        #[arg(long)]
        listen: SocketAddr,
        #[arg(long)]
        out: PathBuf,
        /// Transfers to receive before exiting.
        #[arg(long, default_value_t = 1)]
        count: u32,
        /// Give up on a sender silent this long (s).
        #[arg(long, default_value_t = 30.0)]
        timeout_s: f64,
        #[arg(long)]
        json: bool,
    },
}

/// Why `cohort bulk` failed.
#[derive(Debug, thiserror::Error)]
pub enum BulkCmdError {
    #[error("{0}")]
    Args(String),
    #[error("{path}: {source}")]
    File { path: PathBuf, source: std::io::Error },
    #[error(transparent)]
    Bulk(#[from] BulkError),
}

pub fn run(a: &BulkArgs) -> Result<ExitCode, BulkCmdError> {
    match &a.cmd {
        Cmd::Send { to, file, dev, rate_mbps, json } => {
            if !(rate_mbps.is_finite() && *rate_mbps > 0.0) {
                return Err(BulkCmdError::Args(format!("--rate-mbps {rate_mbps} must be positive")));
            }
            let io = |source| BulkCmdError::File { path: file.clone(), source };
            let f = File::open(file).map_err(io)?;
            let len = f.metadata().map_err(io)?.len();
            let opts = BulkOptions { agent_dev: dev.clone(), rate_bps: (rate_mbps * 1e6) as u64, ..Default::default() };
            let r = bulk::send(*to, &mut BufReader::new(f), len, &opts)?;
            let secs = r.elapsed.as_secs_f64().max(1e-9);
            if *json {
                let v = json!({
                    "bytes": r.bytes, "elapsed_s": secs, "mbps": r.bytes as f64 * 8.0 / secs / 1e6,
                    "under_agent": r.under_agent, "permits": r.permits, "closed_permits": r.closed_permits,
                    "held_s": r.held.as_secs_f64(),
                });
                println!("{v}");
            } else {
                println!(
                    "sent {} bytes in {secs:.2} s ({:.1} Mbit/s), verified by the receiver; {}",
                    r.bytes,
                    r.bytes as f64 * 8.0 / secs / 1e6,
                    if r.under_agent {
                        format!(
                            "{} permits, {} closed, held {:.2} s",
                            r.permits,
                            r.closed_permits,
                            r.held.as_secs_f64()
                        )
                    } else {
                        "no agent asked".to_string()
                    }
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Recv { listen, out, count, timeout_s, json } => {
            if !(timeout_s.is_finite() && *timeout_s > 0.0) || *count == 0 {
                return Err(BulkCmdError::Args("--timeout-s and --count must be positive".into()));
            }
            let l = TcpListener::bind(listen).map_err(|source| BulkCmdError::File { path: out.clone(), source })?;
            for i in 0..*count {
                let path = if i == 0 { out.clone() } else { PathBuf::from(format!("{}.{i}", out.display())) };
                let io = |source| BulkCmdError::File { path: path.clone(), source };
                let mut w = BufWriter::new(File::create(&path).map_err(io)?);
                match bulk::recv(&l, &mut w, Duration::from_secs_f64(*timeout_s)) {
                    Ok(r) => {
                        let secs = r.elapsed.as_secs_f64().max(1e-9);
                        if *json {
                            println!(
                                "{}",
                                json!({"from": r.from.to_string(), "bytes": r.bytes, "elapsed_s": secs, "file": path})
                            );
                        } else {
                            println!("received {} bytes from {} into {} (verified)", r.bytes, r.from, path.display());
                        }
                    }
                    Err(e) => {
                        // What arrived is not to be trusted: leave no file that looks whole.
                        drop(w);
                        let _ = std::fs::remove_file(&path);
                        return Err(e.into());
                    }
                }
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}
