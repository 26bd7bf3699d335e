//! `GroupSocket`: `cohort_net::GroupSocket` (GCBRR request-reply and membership) for Python.

use crate::errors::{self, Class, Error};
use crate::lrt::frames_dict;
use crate::wait::{self, Outcome, Pending};
use cohort_net::group::{GroupConfig, GroupSocket, Request, Start, incarnation_from_clock};
use cohort_net::{GroupError, GroupSocketStats};
use cohort_proto::group::{Event, IncomingId, LeftReason, RemoveReason, Replies, RequestId, State};
use pyo3::prelude::*;
use pyo3::pybacked::PyBackedBytes;
use pyo3::types::{PyBytes, PyDict};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

/// One member of a GCBRR group over UDP broadcast or multicast.
#[pyclass(frozen, module = "cohort._native", name = "GroupSocket")]
#[derive(Debug)]
pub struct PyGroupSocket {
    sock: Mutex<Option<Arc<GroupSocket>>>,
    pid: u32,
    local: SocketAddr,
}

/// A request addressed to this member; answer it with `GroupSocket.reply`.
#[pyclass(frozen, module = "cohort._native", name = "GroupRequest")]
#[derive(Debug)]
pub struct PyGroupRequest {
    id: IncomingId,
    data: Vec<u8>,
    received: std::time::Instant,
}

#[pymethods]
impl PyGroupRequest {
    #[getter]
    fn data<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.data)
    }

    /// The coordinator that issued it.
    #[getter]
    fn coordinator(&self) -> u32 {
        self.id.coord
    }

    /// The coordinator's request number.
    #[getter]
    fn seqno(&self) -> u64 {
        self.id.seqno
    }

    /// Seconds since the request reached this member: read just before `reply`, what the
    /// member took to answer (the coordinator's `proc_t`), thread wake-ups included.
    #[getter]
    fn age(&self) -> f64 {
        self.received.elapsed().as_secs_f64()
    }

    fn __repr__(&self) -> String {
        format!("GroupRequest(coordinator={}, seqno={}, {} bytes)", self.id.coord, self.id.seqno, self.data.len())
    }
}

/// The outcome of one request: each answering member's reply, and those that failed.
#[pyclass(frozen, module = "cohort._native", name = "GroupReplies")]
#[derive(Debug)]
pub struct PyReplies {
    inner: Replies,
}

#[pymethods]
impl PyReplies {
    #[getter]
    fn request_id(&self) -> u64 {
        self.inner.id.0
    }

    /// Each answering member's reply, by pid.
    #[getter]
    fn replies<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        for (pid, r) in &self.inner.replies {
            d.set_item(pid, PyBytes::new(py, r))?;
        }
        Ok(d)
    }

    /// Addressed members that failed, left or were not members.
    #[getter]
    fn failed(&self) -> Vec<u32> {
        self.inner.failed.clone()
    }

    /// Request broadcasts the round took (1 without loss).
    #[getter]
    fn broadcasts(&self) -> u32 {
        self.inner.broadcasts
    }

    /// Seconds from issuing the request to its last reply or failure.
    #[getter]
    fn duration_s(&self) -> f64 {
        self.inner.done_at.saturating_duration_since(self.inner.issued_at).as_secs_f64()
    }

    fn __repr__(&self) -> String {
        let pids: Vec<u32> = self.inner.replies.keys().copied().collect();
        format!("GroupReplies(request_id={}, replied={pids:?}, failed={:?})", self.inner.id.0, self.inner.failed)
    }
}

/// A membership event.
#[pyclass(frozen, get_all, module = "cohort._native", name = "GroupEvent")]
#[derive(Debug)]
pub struct PyGroupEvent {
    /// `became_coordinator`, `group_changed`, `joined`, `left` or `removed`.
    kind: &'static str,
    /// The members after the event (`became_coordinator`, `group_changed`, `joined`).
    members: Option<Vec<u32>>,
    /// The coordinator this process joined under (`joined`).
    coordinator: Option<u32>,
    /// The member removed from the view (`removed`) and its incarnation.
    pid: Option<u32>,
    incarnation: Option<u32>,
    /// Why (`left`: `requested`, `expelled`, `left_instead_of_taking_over`; `removed`:
    /// `suspected`, `left`, `by_coordinator`, `superseded`).
    reason: Option<&'static str>,
}

#[pymethods]
impl PyGroupEvent {
    fn __repr__(&self) -> String {
        format!(
            "GroupEvent(kind={:?}, members={:?}, coordinator={:?}, pid={:?}, reason={:?})",
            self.kind, self.members, self.coordinator, self.pid, self.reason
        )
    }
}

fn event(e: Event) -> PyGroupEvent {
    let mut out =
        PyGroupEvent { kind: "", members: None, coordinator: None, pid: None, incarnation: None, reason: None };
    match e {
        Event::BecameCoord { members } => {
            out.kind = "became_coordinator";
            out.members = Some(members);
        }
        Event::GroupChanged { members } => {
            out.kind = "group_changed";
            out.members = Some(members);
        }
        Event::Joined { coord, members } => {
            out.kind = "joined";
            out.coordinator = Some(coord);
            out.members = Some(members);
        }
        Event::Left { reason } => {
            out.kind = "left";
            out.reason = Some(match reason {
                LeftReason::Requested => "requested",
                LeftReason::Expelled { by } => {
                    out.coordinator = Some(by);
                    "expelled"
                }
                LeftReason::LeftInsteadOfTakingOver => "left_instead_of_taking_over",
            });
        }
        Event::Removed { pid, incarnation, reason } => {
            out.kind = "removed";
            out.pid = Some(pid);
            out.incarnation = Some(incarnation);
            out.reason = Some(match reason {
                RemoveReason::Suspected => "suspected",
                RemoveReason::Left => "left",
                RemoveReason::ByCoordinator => "by_coordinator",
                RemoveReason::Superseded => "superseded",
            });
        }
        // The socket routes these to their own calls; they never reach `next_event`.
        Event::Request { .. } => out.kind = "request",
        Event::Replies(_) => out.kind = "replies",
        Event::RequestAborted { .. } => out.kind = "request_aborted",
        Event::JoinsChecked { .. } => out.kind = "joins_checked",
        Event::LeavesChecked { .. } => out.kind = "leaves_checked",
    }
    out
}

fn state_name(s: State) -> &'static str {
    match s {
        State::Normal => "member",
        State::Join => "joining",
        State::Leave => "leaving",
        State::Left => "outside",
    }
}

fn grp(e: GroupError) -> Error {
    e.into()
}

fn is_timeout(e: &Error) -> bool {
    e.class == Class::Timeout
}

fn addr_tuple(a: SocketAddr) -> (String, u16) {
    (a.ip().to_string(), a.port())
}

/// A finished async operation's value, made into a Python object on the loop's thread.
fn done<T: Send + 'static>(
    r: Result<T, GroupError>,
    make: impl FnOnce(Python<'_>, T) -> PyResult<Py<PyAny>> + Send + 'static,
) -> Outcome {
    match r {
        Ok(v) => Ok(Box::new(move |py: Python<'_>| make(py, v))),
        Err(e) => Err(e.into()),
    }
}

fn pids_obj(py: Python<'_>, pids: Vec<u32>) -> PyResult<Py<PyAny>> {
    Ok(pids.into_pyobject(py)?.into_any().unbind())
}

impl PyGroupSocket {
    /// Hands the socket over (to the path statistics service): this object reports closed.
    /// Under one lock: two threads handing the same socket over cannot both get it.
    pub(crate) fn take(&self) -> Result<Arc<GroupSocket>, Error> {
        self.sock.lock().unwrap_or_else(|p| p.into_inner()).take().ok_or_else(closed)
    }

    fn get(&self) -> Result<Arc<GroupSocket>, Error> {
        self.sock.lock().unwrap_or_else(|p| p.into_inner()).clone().ok_or_else(closed)
    }
}

fn closed() -> Error {
    Error { reason: Some("Local"), ..Error::new(Class::Closed, "Closed", "the group socket was closed") }
}

#[pymethods]
impl PyGroupSocket {
    #[staticmethod]
    #[pyo3(signature = (local, broadcast, *, secret, team, pid, members=None, incarnation=None, dscp=None,
        allow_fragmentation=false, msg_t=0.03, fault_detect_t=1.0, heartbeat_t=0.25, max_payload=60000,
        start_grace=0.0, early_repair=true, broadcast_copies=1, slot_lead=0.002, learn_msg_t=true,
        ask_again=true))]
    #[allow(clippy::too_many_arguments)]
    fn open(
        py: Python<'_>,
        local: &str,
        broadcast: &str,
        secret: PyBackedBytes,
        team: u32,
        pid: u32,
        members: Option<Vec<u32>>,
        incarnation: Option<u32>,
        dscp: Option<u8>,
        allow_fragmentation: bool,
        msg_t: f64,
        fault_detect_t: f64,
        heartbeat_t: f64,
        max_payload: usize,
        start_grace: f64,
        early_repair: bool,
        broadcast_copies: u8,
        slot_lead: f64,
        learn_msg_t: bool,
        ask_again: bool,
    ) -> PyResult<Self> {
        let (local, broadcast) = (errors::address(local)?, errors::address(broadcast)?);
        let mut cfg = GroupConfig::new(&*secret, team, pid, local, broadcast);
        if let Some(d) = dscp
            && d > 63
        {
            return Err(Error::config("Config", format!("dscp {d} exceeds 63")).into());
        }
        cfg.dscp = dscp;
        cfg.allow_fragmentation = allow_fragmentation;
        cfg.group.msg_t = errors::seconds("msg_t", msg_t)?;
        cfg.group.fault_detect_t = errors::seconds("fault_detect_t", fault_detect_t)?;
        cfg.group.heartbeat_t = errors::seconds("heartbeat_t", heartbeat_t)?;
        cfg.group.max_payload = max_payload;
        cfg.group.start_grace = errors::seconds("start_grace", start_grace)?;
        cfg.group.early_repair = early_repair;
        cfg.group.broadcast_copies = broadcast_copies;
        cfg.group.slot_lead = errors::seconds("slot_lead", slot_lead)?;
        cfg.group.learn_msg_t = learn_msg_t;
        cfg.group.ask_again = ask_again;
        let start = match (members, incarnation) {
            (Some(_), Some(_)) => {
                return Err(Error::config(
                    "Config",
                    "give `members` (a member of that static group) or `incarnation` (outside; join()), not both",
                )
                .into());
            }
            (Some(m), None) => Start::Static(m),
            (None, i) => Start::Outside { incarnation: i.unwrap_or_else(incarnation_from_clock) },
        };
        let s = py.detach(|| GroupSocket::open(cfg, start)).map_err(grp)?;
        Ok(PyGroupSocket { pid: s.pid(), local: s.local_addr(), sock: Mutex::new(Some(Arc::new(s))) })
    }

    #[getter]
    fn pid(&self) -> u32 {
        self.pid
    }

    #[getter]
    fn local_addr(&self) -> (String, u16) {
        addr_tuple(self.local)
    }

    /// `member`, `joining`, `leaving` or `outside`.
    #[getter]
    fn state(&self) -> PyResult<&'static str> {
        Ok(state_name(self.get()?.state()))
    }

    #[getter]
    fn coordinator(&self) -> PyResult<Option<u32>> {
        Ok(self.get()?.coordinator())
    }

    #[getter]
    fn is_coordinator(&self) -> PyResult<bool> {
        Ok(self.get()?.is_coordinator())
    }

    /// The members of this process's view, by pid.
    #[getter]
    fn members(&self) -> PyResult<Vec<u32>> {
        Ok(self.get()?.members())
    }

    #[getter]
    fn closed(&self) -> bool {
        self.sock.lock().unwrap_or_else(|p| p.into_inner()).is_none()
    }

    /// Issues a request to `pids` as coordinator; returns its id for `wait_replies`.
    #[pyo3(signature = (pids, data, proc_t=0.0))]
    fn start_request(&self, pids: Vec<u32>, data: PyBackedBytes, proc_t: f64) -> PyResult<u64> {
        let proc_t = errors::seconds("proc_t", proc_t)?;
        Ok(self.get()?.start_request(&pids, &data, proc_t).map_err(grp)?.0)
    }

    /// Waits for the outcome of request `request_id`.
    #[pyo3(signature = (request_id, timeout=None))]
    fn wait_replies(&self, py: Python<'_>, request_id: u64, timeout: Option<f64>) -> PyResult<PyReplies> {
        let t = errors::timeout(timeout)?;
        let r = wait::sliced(
            py,
            t,
            |slice| self.get()?.wait_replies(RequestId(request_id), Some(slice)).map_err(grp),
            is_timeout,
        )?;
        Ok(PyReplies { inner: r })
    }

    /// `request_reply_async` as an operation the asyncio loop polls.
    #[pyo3(signature = (pids, data, proc_t=0.0))]
    fn request_reply_op(&self, pids: Vec<u32>, data: Vec<u8>, proc_t: f64) -> PyResult<Pending> {
        let (s, proc_t) = (self.get()?, errors::seconds("proc_t", proc_t)?);
        Ok(Pending::new(async move {
            let r = s.request_reply_async(&pids, &data, proc_t).await;
            done(r, |py, r| Ok(Py::new(py, PyReplies { inner: r })?.into_any()))
        }))
    }

    /// The next request addressed to this member.
    #[pyo3(signature = (timeout=None))]
    fn next_request(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<PyGroupRequest> {
        let t = errors::timeout(timeout)?;
        let r = wait::sliced(py, t, |slice| self.get()?.next_request(Some(slice)).map_err(grp), is_timeout)?;
        Ok(PyGroupRequest { id: r.id, data: r.data, received: r.received })
    }

    fn next_request_op(&self) -> PyResult<Pending> {
        let s = self.get()?;
        Ok(Pending::new(async move {
            let r = s.next_request_async().await;
            done(r, |py, Request { id, data, received }| {
                Ok(Py::new(py, PyGroupRequest { id, data, received })?.into_any())
            })
        }))
    }

    /// Answers `request`; the reply goes out in this member's slot.
    fn reply(&self, request: &PyGroupRequest, data: PyBackedBytes) -> PyResult<()> {
        Ok(self.get()?.reply(request.id, &data).map_err(grp)?)
    }

    /// The next membership event.
    #[pyo3(signature = (timeout=None))]
    fn next_event(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<PyGroupEvent> {
        let t = errors::timeout(timeout)?;
        let e = wait::sliced(py, t, |slice| self.get()?.next_event(Some(slice)).map_err(grp), is_timeout)?;
        Ok(event(e))
    }

    fn next_event_op(&self) -> PyResult<Pending> {
        let s = self.get()?;
        Ok(Pending::new(async move {
            let r = s.next_event_async().await;
            done(r, |py, e| Ok(Py::new(py, event(e))?.into_any()))
        }))
    }

    /// Asks to join and waits for the coordinator's join poll; returns the members. On
    /// timeout the process stays `joining` (call again to keep waiting).
    #[pyo3(signature = (timeout=None))]
    fn join(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<Vec<u32>> {
        let t = errors::timeout(timeout)?;
        wait::sliced(py, t, |slice| self.get()?.join(Some(slice)).map_err(grp), is_timeout)
    }

    fn join_op(&self) -> PyResult<Pending> {
        let s = self.get()?;
        Ok(Pending::new(async move { done(s.join_async().await, pids_obj) }))
    }

    /// Asks to leave and waits (up to `timeout`) until this process is out of the group.
    #[pyo3(signature = (timeout=None))]
    fn leave(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<()> {
        let t = errors::timeout(timeout)?;
        let s = self.get()?;
        Ok(py.detach(|| s.leave(t)).map_err(grp)?)
    }

    fn leave_op(&self) -> PyResult<Pending> {
        let s = self.get()?;
        Ok(Pending::new(async move { done(s.leave_async().await, |py, ()| Ok(py.None())) }))
    }

    /// One join poll (coordinator only), open for `join_t` seconds; returns the pids admitted.
    #[pyo3(signature = (join_t, timeout=None))]
    fn check_joins(&self, py: Python<'_>, join_t: f64, timeout: Option<f64>) -> PyResult<Vec<u32>> {
        let (join_t, t) = (errors::seconds("join_t", join_t)?, errors::timeout(timeout)?);
        let s = self.get()?;
        Ok(py.detach(|| s.check_joins(join_t, t)).map_err(grp)?)
    }

    /// One leave poll (coordinator only), open for `leave_t` seconds; returns the pids that left.
    #[pyo3(signature = (leave_t, timeout=None))]
    fn check_leaves(&self, py: Python<'_>, leave_t: f64, timeout: Option<f64>) -> PyResult<Vec<u32>> {
        let (leave_t, t) = (errors::seconds("leave_t", leave_t)?, errors::timeout(timeout)?);
        let s = self.get()?;
        Ok(py.detach(|| s.check_leaves(leave_t, t)).map_err(grp)?)
    }

    fn check_joins_op(&self, join_t: f64) -> PyResult<Pending> {
        let (s, t) = (self.get()?, errors::seconds("join_t", join_t)?);
        Ok(Pending::new(async move { done(s.check_joins_async(t).await, pids_obj) }))
    }

    fn check_leaves_op(&self, leave_t: f64) -> PyResult<Pending> {
        let (s, t) = (self.get()?, errors::seconds("leave_t", leave_t)?);
        Ok(Pending::new(async move { done(s.check_leaves_async(t).await, pids_obj) }))
    }

    /// Counters so far.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        stats_dict(py, &self.get()?.stats())
    }

    /// Stops the driver without telling anyone (`leave()` first to depart cleanly).
    fn close(&self, py: Python<'_>) {
        let taken = self.sock.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(s) = taken {
            py.detach(|| {
                if let Ok(s) = Arc::try_unwrap(s) {
                    s.close();
                }
            });
        }
    }
}

macro_rules! put {
    ($d:expr, $s:expr, $($f:ident),+ $(,)?) => {
        $( $d.set_item(stringify!($f), $s.$f)?; )+
    };
}

fn stats_dict<'py>(py: Python<'py>, s: &GroupSocketStats) -> PyResult<Bound<'py, PyDict>> {
    let member = PyDict::new(py);
    let m = &s.member;
    put!(
        member,
        m,
        frames_sent,
        bytes_sent,
        broadcasts_sent,
        unicasts_sent,
        requests_sent,
        replies_sent,
        polls_sent,
        joins_sent,
        pushes_sent,
        acks_sent,
        heartbeats_sent,
        lefts_sent,
        frames_received,
        malformed,
        ignored,
        suspicions,
        requests_handled,
        early_repairs,
        again_sent,
        early_answers,
        broadcast_copies,
        joins_refused
    );
    let d = PyDict::new(py);
    d.set_item("member", member)?;
    put!(
        d,
        s,
        datagrams_sent,
        wire_bytes_sent,
        datagrams_received,
        wire_bytes_received,
        rejected_frames,
        own_echoes,
        pid_conflicts,
        unicast_fallbacks,
        send_errors,
        fragmented_datagrams,
        events_dropped,
        outcomes_dropped,
        waiter_wakeups
    );
    d.set_item("frames", frames_dict(py, &s.frames)?)?;
    Ok(d)
}
