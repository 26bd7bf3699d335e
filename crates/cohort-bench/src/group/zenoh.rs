//! The Zenoh baseline: 1-to-N request-reply as a robot team would write it today, a `get` on
//! a key answered by every robot's queryable.
//!
//! It runs in Python (`python/cohort/zenoh_rr.py`, PyPI `eclipse-zenoh`); [`queryable_command`]
//! and [`get_command`] build the exact invocations and [`parse_get`] reads the result line. The
//! group bench runs it beside GCBRR; the bridge bench (`crate::bridge_testbed`) runs it across
//! the team directly and through `cohort bridge`.

use std::io;
use std::process::Command;
use std::time::Duration;

/// How a queryable's session reaches the others: by listening on an endpoint (the others
/// connect to it), or by connecting to one (e.g. its robot's `cohort bridge`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endpoint<'a> {
    Listen(&'a str),
    Connect(&'a str),
}

/// The ordinary process: `PYTHON -m cohort.zenoh_rr queryable (--listen|--connect) EP --key
/// KEY --reply-len N --stop-after SECONDS`, with `python` the interpreter (or a wrapper such as
/// `ip netns exec NS python3`).
///
/// It declares a queryable on `key` that answers every query with `reply_len` bytes, prints
/// `ready` on stdout once declared, and exits after `stop_after` or on SIGTERM. Spawn it inside
/// the member's namespace, with stdout piped, and wait for the `ready` line before starting the
/// `get` side.
pub fn queryable_command(
    python: Command,
    endpoint: Endpoint<'_>,
    key: &str,
    reply_len: usize,
    stop_after: Duration,
) -> Command {
    let mut c = crate::proc::python_module(python, "cohort.zenoh_rr");
    let (flag, ep) = match endpoint {
        Endpoint::Listen(ep) => ("--listen", ep),
        Endpoint::Connect(ep) => ("--connect", ep),
    };
    c.args(["queryable", flag, ep, "--key", key])
        .arg("--reply-len")
        .arg(reply_len.to_string())
        .arg("--stop-after")
        .arg(format!("{:.3}", stop_after.as_secs_f64()));
    c
}

/// The coordinator: `PYTHON -m cohort.zenoh_rr get --connect tcp/IP:PORT [--connect ...] --key
/// 'cohort/rr/*' --expect N --request-len N --interactions K --timeout-s T`.
///
/// One `session.get` per interaction with the request as payload, waiting until `expect`
/// replies arrived; prints one JSON line `{"latencies_ms": [...], "total_s": ..,
/// "complete": ..}` (read it with [`parse_get`]).
pub fn get_command(
    python: Command,
    connect: &[String],
    key: &str,
    expect: usize,
    request_len: usize,
    interactions: usize,
    timeout: Duration,
) -> Command {
    let mut c = crate::proc::python_module(python, "cohort.zenoh_rr");
    c.arg("get");
    for e in connect {
        c.args(["--connect", e]);
    }
    c.args(["--key", key])
        .arg("--expect")
        .arg(expect.to_string())
        .arg("--request-len")
        .arg(request_len.to_string())
        .arg("--interactions")
        .arg(interactions.to_string())
        .arg("--timeout-s")
        .arg(format!("{:.3}", timeout.as_secs_f64()));
    c
}

/// The JSON line printed by `zenoh_rr.py get`.
#[derive(Debug, Clone, PartialEq, serde::Deserialize, serde::Serialize)]
pub struct GetOutput {
    /// Per completed interaction: `get` issued → last of the expected replies received, ms.
    pub latencies_ms: Vec<f64>,
    /// Whole run, seconds.
    pub total_s: f64,
    /// Interactions that got all expected replies.
    pub complete: usize,
}

/// Parses the last JSON line of `zenoh_rr.py get`'s stdout.
pub fn parse_get(stdout: &str) -> io::Result<GetOutput> {
    let bad = |m: String| io::Error::new(io::ErrorKind::InvalidData, m);
    let line = stdout
        .lines()
        .rev()
        .find(|l| l.trim_start().starts_with('{'))
        .ok_or_else(|| bad("zenoh_rr get printed no JSON line".into()))?;
    serde_json::from_str(line).map_err(|e| bad(format!("zenoh_rr get output: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    fn python() -> Command {
        Command::new("python3")
    }

    /// The exact Rust-built invocations, end to end on loopback; skipped (passes) when
    /// `python3` cannot import `zenoh`.
    #[test]
    fn zenoh_commands_run_end_to_end_when_zenoh_is_installed() {
        use std::process::Stdio;
        let has_zenoh = Command::new("python3")
            .args(["-c", "import zenoh"])
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !has_zenoh {
            eprintln!("skipped: python3 cannot import zenoh");
            return;
        }
        let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let endpoint = format!("tcp/127.0.0.1:{port}");
        let l = queryable_command(python(), Endpoint::Listen(&endpoint), "cohort/rr/1", 100, Duration::from_secs(20));
        let q = crate::proc::Proc::spawn(l, "queryable").unwrap();
        q.expect_line("ready", Duration::from_secs(10)).unwrap();
        let out =
            get_command(python(), &[endpoint], "cohort/rr/*", 1, 100, 5, Duration::from_secs(8)).output().unwrap();
        assert!(out.status.success());
        let got = parse_get(&String::from_utf8_lossy(&out.stdout)).unwrap();
        assert_eq!((got.complete, got.latencies_ms.len()), (5, 5));
    }

    #[test]
    fn zenoh_commands_and_output() {
        let c = queryable_command(
            python(),
            Endpoint::Listen("tcp/10.77.0.2:7447"),
            "cohort/rr/2",
            1500,
            Duration::from_secs(30),
        );
        let args: Vec<_> = c.get_args().map(|a| a.to_string_lossy().into_owned()).collect();
        assert_eq!(
            args,
            [
                "-m",
                "cohort.zenoh_rr",
                "queryable",
                "--listen",
                "tcp/10.77.0.2:7447",
                "--key",
                "cohort/rr/2",
                "--reply-len",
                "1500",
                "--stop-after",
                "30.000"
            ]
        );
        let c = queryable_command(python(), Endpoint::Connect("tcp/127.0.0.1:1"), "k", 1, Duration::from_secs(1));
        let args: Vec<_> = c.get_args().map(|a| a.to_string_lossy().into_owned()).collect();
        assert_eq!(args[2..5], ["queryable", "--connect", "tcp/127.0.0.1:1"]);
        let c = get_command(
            python(),
            &["tcp/a:1".into(), "tcp/b:2".into()],
            "cohort/rr/*",
            2,
            1500,
            10,
            Duration::from_secs(5),
        );
        let args: Vec<_> = c.get_args().map(|a| a.to_string_lossy().into_owned()).collect();
        assert_eq!(args[2..7], ["get", "--connect", "tcp/a:1", "--connect", "tcp/b:2"]);
        let out = parse_get("noise\n{\"latencies_ms\": [1.5, 2], \"total_s\": 0.1, \"complete\": 2}\n").unwrap();
        assert_eq!(out.latencies_ms, [1.5, 2.0]);
        assert_eq!(out.complete, 2);
        assert_eq!(parse_get("nothing").unwrap_err().kind(), io::ErrorKind::InvalidData);
    }
}
