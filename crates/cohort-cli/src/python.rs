//! Forwarding to the Python half of Cohort (`python/cohort`), for the tools written there.

use std::path::PathBuf;
use std::process::{Command, ExitCode};

/// Why a Python tool could not be started.
#[derive(Debug, thiserror::Error)]
pub enum PythonError {
    #[error("could not start {interpreter} (set COHORT_PYTHON to a Python 3.11+ interpreter): {source}")]
    Spawn { interpreter: String, source: std::io::Error },
}

/// The repository's `python/` directory when running from a checkout, so the package works
/// without installation; an installed `cohort` package is used otherwise.
fn checkout_python_dir() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    exe.ancestors()
        .map(|a| a.join("python").join("cohort"))
        .find(|p| p.is_dir())
        .and_then(|p| p.parent().map(PathBuf::from))
}

/// `python3 -m MODULE ARGS...` (`COHORT_PYTHON` picks the interpreter) with the checkout's
/// package first on `PYTHONPATH`, and the interpreter's name.
fn module_command(module: &str, args: &[String]) -> (Command, String) {
    let interpreter = std::env::var("COHORT_PYTHON").unwrap_or_else(|_| "python3".into());
    let mut cmd = Command::new(&interpreter);
    cmd.arg("-m").arg(module).args(args);
    if let Some(dir) = checkout_python_dir() {
        let mut path = dir.into_os_string();
        if let Some(old) = std::env::var_os("PYTHONPATH") {
            path.push(":");
            path.push(old);
        }
        cmd.env("PYTHONPATH", path);
    }
    (cmd, interpreter)
}

/// Runs the module with its output captured (stdin closed).
pub fn module_output(module: &str, args: &[String]) -> Result<std::process::Output, PythonError> {
    let (mut cmd, interpreter) = module_command(module, args);
    cmd.stdin(std::process::Stdio::null());
    cmd.output().map_err(|source| PythonError::Spawn { interpreter, source })
}

/// Runs `python3 -m MODULE ARGS...` and returns its exit status.
pub fn run_module(module: &str, args: &[String]) -> Result<ExitCode, PythonError> {
    let (mut cmd, interpreter) = module_command(module, args);
    let status = cmd.status().map_err(|source| PythonError::Spawn { interpreter, source })?;
    Ok(match status.code() {
        Some(0) => ExitCode::SUCCESS,
        Some(c) => ExitCode::from(u8::try_from(c).unwrap_or(1)),
        None => ExitCode::FAILURE,
    })
}
