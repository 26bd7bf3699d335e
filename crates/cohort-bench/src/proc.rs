//! A child process a bench talks to by lines: its stdout read on a thread, lines awaited with a
//! deadline, its stdin written to, SIGTERM then SIGKILL when it is stopped or dropped, so a
//! bench that fails half-way leaves no process behind.

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The repository's `python/` directory, put first on `PYTHONPATH` by [`python_module`] so the
/// commands work whether or not the `cohort` package is installed.
pub const PYTHON_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../python");

/// `python -m MODULE` with the repository's package on `PYTHONPATH` (before any inherited path),
/// or `program python -m MODULE` when a wrapper is given (e.g. `ip netns exec NS`).
pub fn python_module(mut wrapper: Command, module: &str) -> Command {
    let path = match std::env::var_os("PYTHONPATH") {
        Some(p) if !p.is_empty() => {
            let mut s = std::ffi::OsString::from(PYTHON_DIR);
            s.push(":");
            s.push(p);
            s
        }
        _ => PYTHON_DIR.into(),
    };
    wrapper.env("PYTHONPATH", path).args(["-m", module]);
    wrapper
}

/// Keeps this much of a child's stderr (its end) for error messages.
const STDERR_KEEP: usize = 4096;

/// A running child process; see the module documentation.
#[derive(Debug)]
pub struct Proc {
    what: String,
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    stderr: Arc<Mutex<String>>,
}

impl Proc {
    /// Starts `cmd` with piped stdin, stdout and stderr; `what` names it in errors.
    pub fn spawn(mut cmd: Command, what: impl Into<String>) -> Result<Proc, String> {
        let what = what.into();
        cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
        let mut child = cmd.spawn().map_err(|e| format!("{what}: cannot start: {e}"))?;
        let (tx, lines) = channel();
        let out = child.stdout.take().ok_or_else(|| format!("{what}: no stdout"))?;
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let stderr = Arc::new(Mutex::new(String::new()));
        let mut err = child.stderr.take().ok_or_else(|| format!("{what}: no stderr"))?;
        let keep = Arc::clone(&stderr);
        std::thread::spawn(move || {
            let mut buf = [0u8; 1024];
            while let Ok(n) = err.read(&mut buf) {
                if n == 0 {
                    break;
                }
                let mut s = keep.lock().unwrap_or_else(|p| p.into_inner());
                s.push_str(&String::from_utf8_lossy(&buf[..n]));
                if s.len() > 2 * STDERR_KEEP {
                    let cut = s.len() - STDERR_KEEP;
                    let cut = (cut..s.len()).find(|&i| s.is_char_boundary(i)).unwrap_or(s.len());
                    s.drain(..cut);
                }
            }
        });
        let stdin = child.stdin.take();
        Ok(Proc { what, child, stdin, lines, stderr })
    }

    /// The end of what the child wrote on stderr so far (its last 5 lines).
    pub fn stderr_tail(&self) -> String {
        self.stderr_lines(5).join(" | ")
    }

    /// The last `n` lines the child wrote on stderr (within what is kept).
    pub fn stderr_lines(&self, n: usize) -> Vec<String> {
        let s = self.stderr.lock().unwrap_or_else(|p| p.into_inner());
        let mut v: Vec<String> = s.trim().lines().rev().take(n).map(str::to_string).collect();
        v.reverse();
        v
    }

    fn failed(&self, why: &str) -> String {
        let tail = self.stderr_tail();
        if tail.is_empty() { format!("{}: {why}", self.what) } else { format!("{}: {why} (stderr: {tail})", self.what) }
    }

    /// Waits until the child prints a line equal to `want` (other lines are skipped).
    pub fn expect_line(&self, want: &str, timeout: Duration) -> Result<(), String> {
        self.next_line_where(|l| l.trim() == want, timeout)
            .map(|_| ())
            .map_err(|e| self.failed(&format!("{e} `{want}`")))
    }

    /// Waits for the next line that starts with `{` and parses it as JSON.
    pub fn json_line(&self, timeout: Duration) -> Result<serde_json::Value, String> {
        let line = self
            .next_line_where(|l| l.trim_start().starts_with('{'), timeout)
            .map_err(|e| self.failed(&format!("{e} a JSON report")))?;
        serde_json::from_str(&line).map_err(|e| self.failed(&format!("unreadable report ({e})")))
    }

    fn next_line_where(&self, ok: impl Fn(&str) -> bool, timeout: Duration) -> Result<String, &'static str> {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(l) if ok(&l) => return Ok(l),
                Ok(_) => {}
                Err(RecvTimeoutError::Timeout) => return Err("timed out waiting for"),
                Err(RecvTimeoutError::Disconnected) => return Err("exited before printing"),
            }
        }
    }

    /// Waits until the child has written `needle` on stderr (a process that logs its start
    /// there); an error if it exits first or the time runs out.
    pub fn expect_stderr(&mut self, needle: &str, timeout: Duration) -> Result<(), String> {
        let deadline = Instant::now() + timeout;
        loop {
            if self.stderr.lock().unwrap_or_else(|p| p.into_inner()).contains(needle) {
                return Ok(());
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                // Let the reader catch the last words.
                std::thread::sleep(Duration::from_millis(50));
                return Err(self.failed(&format!("exited ({status}) before logging `{needle}`")));
            }
            if Instant::now() >= deadline {
                return Err(self.failed(&format!("timed out waiting for `{needle}` on stderr")));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Writes one line to the child's stdin.
    pub fn send_line(&mut self, line: &str) -> Result<(), String> {
        let r = match self.stdin.as_mut() {
            Some(s) => writeln!(s, "{line}").and_then(|()| s.flush()),
            None => return Err(self.failed("stdin closed")),
        };
        r.map_err(|e| self.failed(&format!("writing stdin: {e}")))
    }

    /// Sends SIGTERM (unless the child has exited), without waiting: to stop several children
    /// at once, terminate each, then [`Proc::stop`] each.
    pub fn terminate(&mut self) {
        self.signal(libc::SIGTERM);
    }

    /// Sends `sig` unless the child has exited.
    pub fn signal(&mut self, sig: libc::c_int) {
        signal_child(&mut self.child, sig);
    }

    /// Sends SIGTERM and waits up to `grace` for the child to exit, then kills it.
    pub fn stop(&mut self, grace: Duration) -> Option<ExitStatus> {
        self.stop_dumping(grace, None)
    }

    /// As [`Proc::stop`], but a child still running after `grace` is first sent `dump` (a
    /// signal it answers by printing its state on stderr, as Python's `faulthandler.register`
    /// does) and given a second for it, so [`Proc::stderr_lines`] shows where it hung.
    pub fn stop_dumping(&mut self, grace: Duration, dump: Option<libc::c_int>) -> Option<ExitStatus> {
        if let Ok(Some(s)) = self.child.try_wait() {
            return Some(s);
        }
        self.terminate();
        if let Some(s) = self.exited_by(Instant::now() + grace) {
            return Some(s);
        }
        if let Some(sig) = dump {
            self.signal(sig);
            if let Some(s) = self.exited_by(Instant::now() + Duration::from_secs(1)) {
                return Some(s);
            }
        }
        let _ = self.child.kill();
        self.child.wait().ok()
    }

    fn exited_by(&mut self, deadline: Instant) -> Option<ExitStatus> {
        exited_by(&mut self.child, deadline)
    }
}

/// Sends `sig` to `child` unless it has exited (a reaped pid may belong to another process).
pub fn signal_child(child: &mut Child, sig: libc::c_int) {
    if let Ok(None) = child.try_wait() {
        // SAFETY: kill(2) on the pid of our own child, which has not been reaped.
        unsafe {
            libc::kill(child.id() as libc::pid_t, sig);
        }
    }
}

/// `child`'s exit status if it exits by `deadline`.
pub fn exited_by(child: &mut Child, deadline: Instant) -> Option<ExitStatus> {
    loop {
        if let Ok(Some(s)) = child.try_wait() {
            return Some(s);
        }
        if Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if !matches!(self.child.try_wait(), Ok(Some(_))) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_json_stdin_and_stderr_of_a_real_child() {
        let mut c = Command::new("sh");
        c.args(["-c", "echo ready; read x; echo noise; echo \"{\\\"got\\\": \\\"$x\\\"}\"; echo oops >&2; sleep 30"]);
        let mut p = Proc::spawn(c, "sh").unwrap();
        p.expect_line("ready", Duration::from_secs(5)).unwrap();
        p.send_line("go").unwrap();
        let v = p.json_line(Duration::from_secs(5)).unwrap();
        assert_eq!(v["got"], "go");
        // Nothing more comes: a timeout names the child and what it waited for.
        let e = p.expect_line("never", Duration::from_millis(200)).unwrap_err();
        assert!(e.starts_with("sh: timed out waiting for `never`"), "{e}");
        assert!(p.stderr_tail().contains("oops"));
        // SIGTERM ends the sleep.
        let s = p.stop(Duration::from_secs(5)).unwrap();
        assert!(!s.success());
    }

    /// A child that ignores SIGTERM is asked for its state (here a line on stderr), then
    /// killed; what it printed is kept.
    #[test]
    fn a_child_that_does_not_stop_is_asked_to_dump_then_killed() {
        let mut c = Command::new("bash");
        c.args([
            "-c",
            "trap '' TERM; trap 'echo stuck in the loop >&2' USR1; echo ready; while :; do sleep 0.05; done",
        ]);
        let mut p = Proc::spawn(c, "bash").unwrap();
        p.expect_line("ready", Duration::from_secs(5)).unwrap();
        let s = p.stop_dumping(Duration::from_millis(300), Some(libc::SIGUSR1)).unwrap();
        assert!(!s.success());
        let deadline = Instant::now() + Duration::from_secs(2);
        while p.stderr_lines(3).is_empty() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(p.stderr_lines(3), ["stuck in the loop"]);
    }

    #[test]
    fn a_child_that_exits_early_is_reported_with_its_stderr() {
        let mut c = Command::new("sh");
        c.args(["-c", "echo bad config >&2; exit 2"]);
        let p = Proc::spawn(c, "bridge").unwrap();
        let e = p.expect_line("ready", Duration::from_secs(5)).unwrap_err();
        assert!(e.contains("exited before printing `ready`"), "{e}");
        // The stderr reader may lag the exit by a moment.
        let deadline = Instant::now() + Duration::from_secs(2);
        while !p.stderr_tail().contains("bad config") && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(p.stderr_tail().contains("bad config"));
        let mut c = Command::new("sh");
        c.args(["-c", "echo starting >&2; sleep 0.2; echo robot 1 up >&2; echo config wrong >&2; exit 1"]);
        let mut p = Proc::spawn(c, "bridge").unwrap();
        p.expect_stderr("up", Duration::from_secs(5)).unwrap();
        let e = p.expect_stderr("ready", Duration::from_secs(5)).unwrap_err();
        assert!(e.contains("exited (exit status: 1) before logging `ready`") && e.contains("config wrong"), "{e}");
    }

    #[test]
    fn python_module_puts_the_repository_first_on_the_path() {
        let c = python_module(Command::new("python3"), "cohort.zenoh_rr");
        let args: Vec<_> = c.get_args().map(|a| a.to_string_lossy().into_owned()).collect();
        assert_eq!(args, ["-m", "cohort.zenoh_rr"]);
        let path = c.get_envs().find(|(k, _)| *k == "PYTHONPATH").and_then(|(_, v)| v).unwrap();
        assert!(path.to_string_lossy().starts_with(PYTHON_DIR));
    }
}
