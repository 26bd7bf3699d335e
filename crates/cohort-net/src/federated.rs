//! Path statistics shared with the team over the group (seed 001 §4.1; the sans-IO half is
//! `cohort_proto::multipath::federated`).
//!
//! A [`PathStatsService`] runs on a [`GroupSocket`] of its own (the team's group, on a port
//! kept for this service, so that no application's requests are taken from it). It keeps the
//! statistics this robot measured per [`PathKey`] ([`PathStatsService::publish`], or
//! [`publish_socket`](PathStatsService::publish_socket) after a multipath connection). In the
//! group only the coordinator asks (GCBRR), so sharing runs in rounds: every
//! [`GATHER_EVERY`] the coordinator's service sends the team's view to every member in one
//! request, each member adopts it and replies with its own measurements, and the coordinator
//! combines those into the next view. A robot about to use paths starts each from the view
//! and its own measurement ([`PathStatsService::start_paths`] on a new [`MpLrtSocket`]),
//! so its scheduler starts from the team's experience instead of exploring. When the
//! coordinator changes, the next one gathers from its own store and the reports. The
//! coordinator's service also admits robots that ask to join, once a round.

use crate::group::{GroupError, GroupSocket};
use crate::mp::MpLrtSocket;
use cohort_proto::multipath::bandit::ArmStats;
use cohort_proto::multipath::federated::{FedError, PathKey, StatsStore};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// A report halves in weight every this long (Eqs. 17-18's weights, by age).
pub const HALF_LIFE: Duration = Duration::from_secs(300);
/// The coordinator gathers this often.
pub const GATHER_EVERY: Duration = Duration::from_secs(1);
/// How long a member may take to answer.
const PROC_T: Duration = Duration::from_millis(20);

/// Why sharing failed.
#[derive(Debug, thiserror::Error)]
pub enum FederatedError {
    #[error(transparent)]
    Group(#[from] GroupError),
    #[error(transparent)]
    Message(#[from] FedError),
    #[error("{keys} path keys for a socket of {paths} paths")]
    Paths { keys: usize, paths: usize },
}

/// Counters of the service.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FederatedStats {
    /// Views this robot adopted (and answered with its report), as a member.
    pub views: u64,
    /// Requests that carried no view, and reports that were not reports: skipped (a request
    /// is still answered).
    pub malformed: u64,
    /// Rounds this robot gathered as coordinator, and the reports it got.
    pub rounds: u64,
    pub reports: u64,
}

#[derive(Debug, Default)]
struct Counters {
    views: AtomicU64,
    malformed: AtomicU64,
    rounds: AtomicU64,
    reports: AtomicU64,
}

/// This robot's side of the sharing. See the [module docs](self).
#[derive(Debug)]
pub struct PathStatsService {
    group: Arc<GroupSocket>,
    store: Arc<Mutex<StatsStore>>,
    clock: std::time::Instant,
    counters: Arc<Counters>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

fn now(clock: std::time::Instant) -> cohort_time::Instant {
    cohort_time::Instant::from_nanos(clock.elapsed().as_nanos() as u64)
}

impl PathStatsService {
    /// Takes part in the sharing rounds on `group` (a member already, or joining later): as
    /// its coordinator it gathers, as a member it adopts views and reports.
    pub fn start(group: GroupSocket) -> Result<Self, FederatedError> {
        Self::start_shared(Arc::new(group))
    }

    /// [`start`](Self::start) on a group socket held elsewhere too (the Python binding's). The
    /// service answers the group's requests itself: nobody else may take them.
    pub fn start_shared(group: Arc<GroupSocket>) -> Result<Self, FederatedError> {
        let store = Arc::new(Mutex::new(StatsStore::new()));
        let (clock, counters, stop) = (std::time::Instant::now(), Arc::new(Counters::default()), Arc::default());
        let thread = {
            let (group, store, counters, stop) = (group.clone(), store.clone(), counters.clone(), Arc::clone(&stop));
            std::thread::Builder::new()
                .name("cohort-pathstats".into())
                .spawn(move || serve(&group, &store, clock, &counters, &stop))
                .map_err(GroupError::Io)?
        };
        Ok(PathStatsService { group, store, clock, counters, stop, thread: Some(thread) })
    }

    /// The group the service runs on.
    pub fn group(&self) -> &GroupSocket {
        &self.group
    }

    /// Records this robot's statistics of path `key`, measured now.
    pub fn publish(&self, key: &PathKey, stats: ArmStats) -> Result<(), FederatedError> {
        let t = now(self.clock);
        Ok(self.store.lock().unwrap_or_else(|e| e.into_inner()).record(key.clone(), stats, t)?)
    }

    /// Records what multipath socket `sock` learned of each of its paths, path `i` under
    /// `keys[i]`.
    pub fn publish_socket(&self, sock: &MpLrtSocket, keys: &[PathKey]) -> Result<(), FederatedError> {
        let arms = sock.arm_stats();
        if arms.len() != keys.len() {
            return Err(FederatedError::Paths { keys: keys.len(), paths: arms.len() });
        }
        for (k, s) in keys.iter().zip(arms) {
            self.publish(k, s)?;
        }
        Ok(())
    }

    /// What this robot measured itself of `key`, if anything.
    pub fn own(&self, key: &PathKey) -> Option<ArmStats> {
        self.store.lock().unwrap_or_else(|e| e.into_inner()).get(key)
    }

    /// What to start each of `keys` with: the team's latest view, or this robot's own
    /// measurement of a path the view lacks (`None` for a key neither knows).
    pub fn known(&self, keys: &[PathKey]) -> Vec<Option<ArmStats>> {
        self.store.lock().unwrap_or_else(|e| e.into_inner()).start_for(keys, now(self.clock), HALF_LIFE.as_secs_f64())
    }

    /// Waits (up to `timeout`) until a view of the team has come or been gathered; whether
    /// one has. A robot that just joined gets one within [`GATHER_EVERY`].
    /// A [`stop`](Self::stop) from another thread ends the wait at once (`false` unless a
    /// view had come).
    pub fn wait_view(&self, timeout: Duration) -> bool {
        let end = std::time::Instant::now() + timeout;
        loop {
            if self.store.lock().unwrap_or_else(|e| e.into_inner()).has_view() {
                return true;
            }
            if std::time::Instant::now() >= end || self.stop.load(Ordering::Relaxed) {
                return false;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Starts path `i` of `sock` from what is known of `keys[i]` ([`known`](Self::known));
    /// paths nobody knows start cold. Returns what each path started from.
    pub fn start_paths(&self, sock: &MpLrtSocket, keys: &[PathKey]) -> Result<Vec<Option<ArmStats>>, FederatedError> {
        let paths = sock.local_addrs().len();
        if keys.len() != paths {
            return Err(FederatedError::Paths { keys: keys.len(), paths });
        }
        let got = self.known(keys);
        for (i, s) in got.iter().enumerate() {
            if let Some(s) = s {
                sock.federated_start(i, *s);
            }
        }
        Ok(got)
    }

    pub fn stats(&self) -> FederatedStats {
        let c = &self.counters;
        FederatedStats {
            views: c.views.load(Ordering::Relaxed),
            malformed: c.malformed.load(Ordering::Relaxed),
            rounds: c.rounds.load(Ordering::Relaxed),
            reports: c.reports.load(Ordering::Relaxed),
        }
    }
}

impl PathStatsService {
    /// Stops taking part in the sharing rounds (the service's thread ends; dropping the
    /// service waits for it) and ends any [`wait_view`](Self::wait_view) under way.
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

impl Drop for PathStatsService {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Until `stop`: as coordinator, a gathering round every [`GATHER_EVERY`]; as a member,
/// adopts each view that comes and answers with its own report (a request that carries no
/// view is still answered, and counted).
fn serve(
    group: &GroupSocket,
    store: &Mutex<StatsStore>,
    clock: std::time::Instant,
    counters: &Counters,
    stop: &AtomicBool,
) {
    let lock = || store.lock().unwrap_or_else(|e| e.into_inner());
    let mut next_round = std::time::Instant::now();
    while !stop.load(Ordering::Relaxed) {
        if group.is_coordinator() && std::time::Instant::now() >= next_round {
            next_round = std::time::Instant::now() + GATHER_EVERY;
            let me = group.pid();
            let others: Vec<u32> = group.members().into_iter().filter(|&p| p != me).collect();
            let view = lock().view_report(now(clock));
            let reports = if others.is_empty() {
                Vec::new()
            } else {
                match group.request_reply(&others, &view, PROC_T, Some(GATHER_EVERY)) {
                    Ok(r) => r.replies.into_values().collect(),
                    Err(e) => {
                        tracing::debug!(%e, "path statistics: gathering round");
                        continue;
                    }
                }
            };
            let refs: Vec<&[u8]> = reports.iter().map(Vec::as_slice).collect();
            let bad = lock().gather(&refs, now(clock), HALF_LIFE.as_secs_f64());
            counters.rounds.fetch_add(1, Ordering::Relaxed);
            counters.reports.fetch_add((reports.len() - bad) as u64, Ordering::Relaxed);
            counters.malformed.fetch_add(bad as u64, Ordering::Relaxed);
            // Robots that asked to join are admitted once a round (one join poll: 2·MsgT),
            // so a robot that arrives later, or restarts, takes part without anyone else
            // running the team's group.
            match group.check_joins(Duration::ZERO, Some(GATHER_EVERY)) {
                Ok(joined) if !joined.is_empty() => tracing::debug!(?joined, "path statistics: admitted"),
                Ok(_) => {}
                Err(e) => tracing::debug!(%e, "path statistics: join poll"),
            }
        }
        let req = match group.next_request(Some(Duration::from_millis(50))) {
            Ok(r) => r,
            Err(GroupError::TimedOut) => continue,
            Err(GroupError::Stopped) => return,
            Err(e) => {
                tracing::debug!(%e, "path statistics: no request");
                continue;
            }
        };
        let t = now(clock);
        let report = {
            let mut g = lock();
            match g.adopt(&req.data, t) {
                Ok(()) => counters.views.fetch_add(1, Ordering::Relaxed),
                Err(_) => counters.malformed.fetch_add(1, Ordering::Relaxed),
            };
            g.own_report(t)
        };
        if let Err(e) = group.reply(req.id, &report) {
            tracing::debug!(%e, "path statistics: reply");
        }
    }
}
