//! Rust errors as Python exceptions.
//!
//! The exception classes live in `cohort.errors` (pure Python), so each can derive from both
//! `CohortError` and the built-in exception a Python programmer expects (`TimeoutError`,
//! `ConnectionError`, `ValueError`, `OSError`). Every exception carries the Rust error's
//! variant name as `kind` and its message as `str(e)`; a closed connection also carries the
//! close `reason`.

use cohort_net::federated::FederatedError;
use cohort_net::{GroupError, NetError};
use cohort_proto::group::{JoinError, LeaveError, PollError, ReplyError, RequestError};
use cohort_proto::lrt::CloseReason;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyType;

/// The Python class an error maps to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    Base,
    Timeout,
    Closed,
    Config,
    MessageSize,
    State,
    Io,
}

impl Class {
    fn name(self) -> &'static str {
        match self {
            Class::Base => "CohortError",
            Class::Timeout => "TimeoutError",
            Class::Closed => "ClosedError",
            Class::Config => "ConfigError",
            Class::MessageSize => "MessageSizeError",
            Class::State => "StateError",
            Class::Io => "IoError",
        }
    }

    fn class<'py>(self, py: Python<'py>) -> PyResult<&'py Bound<'py, PyType>> {
        static CLASSES: [PyOnceLock<Py<PyType>>; 7] = [const { PyOnceLock::new() }; 7];
        CLASSES[self as usize].import(py, "cohort.errors", self.name())
    }
}

/// A Rust error, ready to be raised in Python.
#[derive(Debug)]
pub struct Error {
    pub class: Class,
    pub kind: &'static str,
    pub message: String,
    pub reason: Option<&'static str>,
    pub errno: Option<i32>,
}

impl Error {
    pub fn new(class: Class, kind: &'static str, message: impl Into<String>) -> Self {
        Error { class, kind, message: message.into(), reason: None, errno: None }
    }

    pub fn config(kind: &'static str, message: impl Into<String>) -> Self {
        Error::new(Class::Config, kind, message)
    }

    pub fn closed_locally() -> Self {
        Error { reason: Some("Local"), ..Error::new(Class::Closed, "Closed", "the socket was closed") }
    }

    fn io(e: &std::io::Error, context: &str) -> Self {
        Error { errno: e.raw_os_error(), ..Error::new(Class::Io, "Io", format!("{context}{e}")) }
    }
}

impl From<Error> for PyErr {
    fn from(e: Error) -> PyErr {
        Python::attach(|py| {
            let made = e.class.class(py).and_then(|cls| {
                let inst = cls.call1((e.message.as_str(), e.kind, e.reason))?;
                if let Some(errno) = e.errno {
                    inst.setattr("errno", errno)?;
                }
                Ok(PyErr::from_value(inst))
            });
            made.unwrap_or_else(|err| err)
        })
    }
}

fn close_reason(r: &CloseReason) -> &'static str {
    match r {
        CloseReason::Local => "Local",
        CloseReason::Peer(_) => "Peer",
        CloseReason::TimedOut => "TimedOut",
        CloseReason::HandshakeTimedOut => "HandshakeTimedOut",
        CloseReason::ParamMismatch { .. } => "ParamMismatch",
        CloseReason::Protocol(_) => "Protocol",
    }
}

impl From<NetError> for Error {
    fn from(e: NetError) -> Self {
        match e {
            NetError::Io(io) => Error::io(&io, "socket: "),
            NetError::Config(m) => Error::config("Config", format!("invalid configuration: {m}")),
            NetError::Closed(r) => {
                let message = match &r {
                    CloseReason::HandshakeTimedOut => "connection closed: the handshake got no answer (no peer \
                        holding this team's secret and team id answered at that address)"
                        .to_string(),
                    CloseReason::TimedOut => {
                        "connection closed: nothing authenticated arrived from the peer for the idle timeout".into()
                    }
                    CloseReason::Local => "connection closed here".into(),
                    CloseReason::Peer(code) => format!("connection closed by the peer (code {code})"),
                    CloseReason::ParamMismatch { ours, theirs } => {
                        format!("connection closed: parameters differ (ours {ours:?}, the peer's {theirs:?})")
                    }
                    CloseReason::Protocol(m) => format!("connection closed: protocol violation: {m}"),
                };
                Error { reason: Some(close_reason(&r)), ..Error::new(Class::Closed, "Closed", message) }
            }
            e @ NetError::MessageSize(_) => Error::new(Class::MessageSize, "MessageSize", e.to_string()),
            e @ NetError::WouldBlock => Error::new(Class::Base, "WouldBlock", e.to_string()),
            e @ NetError::TimedOut => Error::new(Class::Timeout, "TimedOut", e.to_string()),
            e @ NetError::Entropy(_) => Error::new(Class::Base, "Entropy", e.to_string()),
        }
    }
}

impl From<GroupError> for Error {
    fn from(e: GroupError) -> Self {
        let msg = e.to_string();
        let (class, kind) = match &e {
            GroupError::Io(io) => return Error::io(io, "socket: "),
            GroupError::Config(_) => (Class::Config, "Config"),
            GroupError::Init(_) => (Class::Config, "Init"),
            GroupError::PidInUse { .. } => (Class::Config, "PidInUse"),
            GroupError::Request(RequestError::NotCoordinator) | GroupError::Poll(PollError::NotCoordinator) => {
                (Class::State, "NotCoordinator")
            }
            GroupError::Request(RequestError::TooLarge { .. }) | GroupError::Reply(ReplyError::TooLarge { .. }) => {
                (Class::MessageSize, "TooLarge")
            }
            GroupError::BeyondOneFrame { .. } => (Class::MessageSize, "BeyondOneFrame"),
            GroupError::Reply(ReplyError::Stale(_)) => (Class::State, "Stale"),
            GroupError::Reply(ReplyError::AlreadyReplied(_)) => (Class::State, "AlreadyReplied"),
            GroupError::Join(JoinError::NotLeft) => (Class::State, "NotLeft"),
            GroupError::Join(JoinError::Incarnations) => (Class::State, "Incarnations"),
            GroupError::Leave(LeaveError::NotMember) | GroupError::NotMember => (Class::State, "NotMember"),
            GroupError::Aborted(_) => (Class::State, "Aborted"),
            GroupError::Deposed => (Class::State, "Deposed"),
            GroupError::OutcomeDropped => (Class::State, "OutcomeDropped"),
            GroupError::TimedOut => (Class::Timeout, "TimedOut"),
            GroupError::Stopped => {
                return Error { reason: Some("Stopped"), ..Error::new(Class::Closed, "Stopped", msg) };
            }
            GroupError::Entropy(_) => (Class::Base, "Entropy"),
        };
        Error::new(class, kind, msg)
    }
}

/// A timeout in seconds from Python (`None`: wait forever).
pub fn timeout(seconds: Option<f64>) -> Result<Option<std::time::Duration>, Error> {
    match seconds {
        None => Ok(None),
        Some(s) if (0.0..1e9).contains(&s) => Ok(Some(std::time::Duration::from_secs_f64(s))),
        Some(s) => Err(Error::config("Timeout", format!("timeout {s} s: must be a finite number >= 0, or None"))),
    }
}

/// A duration in seconds from Python, for configuration.
pub fn seconds(name: &str, s: f64) -> Result<std::time::Duration, Error> {
    if (0.0..1e9).contains(&s) {
        Ok(std::time::Duration::from_secs_f64(s))
    } else {
        Err(Error::config("Config", format!("{name} = {s}: must be a finite number of seconds >= 0")))
    }
}

/// An `ip:port` (or `host:port`) address.
pub fn address(addr: &str) -> Result<std::net::SocketAddr, Error> {
    use std::net::ToSocketAddrs;
    if let Ok(a) = addr.parse() {
        return Ok(a);
    }
    let bad = |why: String| Error::config("Address", format!("address {addr:?}: {why} (expected \"ip:port\")"));
    let mut found = addr.to_socket_addrs().map_err(|e| bad(e.to_string()))?;
    found.next().ok_or_else(|| bad("no address found".into()))
}

impl From<FederatedError> for Error {
    fn from(e: FederatedError) -> Self {
        match e {
            FederatedError::Group(g) => g.into(),
            e @ FederatedError::Message(_) => Error::config("Stats", e.to_string()),
            e @ FederatedError::Paths { .. } => Error::config("Paths", e.to_string()),
        }
    }
}
