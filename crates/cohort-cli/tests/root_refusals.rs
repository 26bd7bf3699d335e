//! Every command that needs the testbed refuses, without root, in one line that says why and
//! what to do, before it runs anything (a bench that printed its progress first, or ran its
//! 40 s simulator half before finding out, wasted the user's time and buried the reason).
//! As root the commands run as `nobody` (setpriv); otherwise as this user.

use std::process::Command;

fn unprivileged(args: &[&str]) -> std::process::Output {
    let exe = env!("CARGO_BIN_EXE_cohort");
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let mut cmd = if root {
        let mut c = Command::new("setpriv");
        c.args(["--reuid=65534", "--regid=65534", "--clear-groups", exe]);
        c
    } else {
        Command::new(exe)
    };
    cmd.args(args).current_dir(std::env::temp_dir()).output().expect("setpriv (util-linux) or the binary runs")
}

#[test]
fn testbed_commands_refuse_without_root_in_one_line() {
    for args in [
        &["testbed", "down", "--all"][..],
        &["bench", "transport", "--seconds", "1"],
        &["bench", "group", "--sizes", "3"],
        &["bench", "testbed-fidelity"],
        &["bench", "crosscheck"],
        &["bench", "coorp-gate"],
        &["bench", "coorp", "--testbed", "--no-sim"],
        &["bench", "multipath", "--testbed", "--reps", "1"],
        &["bench", "bridge", "--reps", "1"],
    ] {
        let out = unprivileged(args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} ran without root");
        assert_eq!(err.lines().count(), 1, "{args:?}: one line, got:\n{err}");
        assert!(err.contains("needs root") && err.contains("sudo"), "{args:?}: {err}");
        assert!(!err.contains("invalid argument"), "{args:?}: not an argument error: {err}");
    }
}
